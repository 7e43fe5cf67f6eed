"""Backends run a validated call's kernel: NumPy on the CPU, CuPy on an NVIDIA GPU.

The GPU backend is imported only when asked for, so the CPU path never pays for CuPy.
"""

from __future__ import annotations

import importlib

from ..errors import InputError

BACKEND_NAMES = ("cpu", "gpu", "auto")
_MODULES = {"cpu": "dmlcli.backends.cpu", "gpu": "dmlcli.backends.gpu"}


def get_backend(name: str):
    """The backend object for `name`; raises BackendUnavailableError (exit 4) where it cannot run."""
    key = str(name).strip().lower()
    if key not in BACKEND_NAMES:
        raise InputError(f"unknown backend {name!r} (expected one of {', '.join(BACKEND_NAMES)})")
    if key == "auto":
        return _auto_backend()
    return importlib.import_module(_MODULES[key]).create()


def _auto_backend():
    import warnings

    from ..errors import BackendUnavailableError, DmlcliWarning

    try:
        return importlib.import_module(_MODULES["gpu"]).create()
    except (BackendUnavailableError, ImportError) as why:
        warnings.warn(f"--backend auto: no usable GPU ({why}); running on the CPU", DmlcliWarning, stacklevel=3)
        return importlib.import_module(_MODULES["cpu"]).create()
