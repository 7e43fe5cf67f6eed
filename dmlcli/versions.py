"""The versions that produce a result: dmlcli's, NumPy's, CuPy's (read from its installed metadata, never
imported: that takes seconds and a GPU) and Python's. --version prints them; reports record them."""

from __future__ import annotations

import platform

CUPY_DISTRIBUTIONS = ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x")


def versions() -> dict[str, str | None]:
    """{"dmlcli", "numpy", "cupy" (None where CuPy is not installed), "python"}."""
    from importlib import metadata

    import numpy

    from .version import __version__

    cupy = None
    for distribution in CUPY_DISTRIBUTIONS:
        try:
            cupy = metadata.version(distribution)
            break
        except metadata.PackageNotFoundError:
            continue
    return {"dmlcli": __version__, "numpy": numpy.__version__, "cupy": cupy, "python": platform.python_version()}
