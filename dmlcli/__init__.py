"""dmlcli: DirectML's operators on NumPy or CuPy, with DirectML's validation rules, anywhere.

The names below load on first use (PEP 562), so that `import dmlcli.something` (which runs this file first)
costs no more than that module: the command line imports the table's one family module a run needs.
"""

from .errors import BackendUnavailableError, DmlcliError, DmlcliWarning, InputError, ValidationError
from .version import __version__

__all__ = [
    "run", "run_files", "validate", "ValidationError", "InputError", "DmlcliError", "BackendUnavailableError",
    "DmlcliWarning", "OPERATORS", "find_operator", "FeatureLevel", "ALL_FEATURE_LEVELS",
    "parse_feature_level", "__version__", "run_case", "check", "run_onnx",
]

_LAZY = {
    "run": ("api", "run"), "run_files": ("api", "run_files"), "validate": ("api", "validate"),
    "run_case": ("api", "run_case"), "check": ("api", "check"),
    "run_onnx": ("api", "run_onnx"), "OPERATORS": ("operators", "OPERATORS"),
    "find_operator": ("operators", "find_operator"), "FeatureLevel": ("feature_levels", "FeatureLevel"),
    "ALL_FEATURE_LEVELS": ("feature_levels", "ALL_FEATURE_LEVELS"),
    "parse_feature_level": ("feature_levels", "parse_feature_level"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        if name != "OPERATORS":  # the table changes as families are registered; the functions do not
            globals()[name] = value  # so that a loop of dmlcli.run calls does not come through here each time
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
