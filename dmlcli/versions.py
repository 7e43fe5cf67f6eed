"""The versions that produce a result: dmlcli's, NumPy's, CuPy's (read from its installed metadata, never
imported: that takes seconds and a GPU) and Python's. --version prints them; reports record them."""

from __future__ import annotations

import platform

CUPY_DISTRIBUTIONS = ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x")


def versions() -> dict[str, str | None]:
    """{"dmlcli", "numpy", "cupy" (None where CuPy is not installed), "python"}."""
    import numpy

    from .version import __version__

    cupy = next((found for found in map(installed_version, CUPY_DISTRIBUTIONS) if found is not None), None)
    return {"dmlcli": __version__, "numpy": numpy.__version__, "cupy": cupy, "python": platform.python_version()}


def installed_version(distribution: str) -> str | None:
    """An installed distribution's version, read from its metadata (the package is not imported), or None."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
