"""Which arguments name Zarr stores: asked of every run's arguments, so it imports nothing and reads no data."""

from __future__ import annotations


def is_url(name: str) -> bool:
    """`scheme://...` as fsspec reads it (checked by hand: compiling a regular expression costs start-up time)."""
    scheme, separator, _ = name.partition("://")
    return bool(separator) and scheme[:1].isascii() and scheme[:1].isalpha() and all(
        c.isascii() and (c.isalnum() or c in "+.-") for c in scheme)


def is_zarr_source(name: str) -> bool:
    """Whether an input or output argument names a Zarr store (no zarr import: this decides the route).

    A `.zarr` name, an fsspec URL, or a local folder holding Zarr metadata.
    """
    if not isinstance(name, str) or name == "-" or name.lstrip().startswith(("[", "{")):
        return False
    if is_url(name) or name.rstrip("/\\").lower().endswith(".zarr"):
        return True
    from pathlib import Path  # only for a name that may be a folder: inline tensors go without pathlib

    path = Path(name)
    try:
        return path.is_dir() and any((path / key).is_file() for key in ("zarr.json", ".zarray"))
    except OSError:
        return False
