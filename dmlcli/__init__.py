"""dmlcli: DirectML's element-wise operators on NumPy or CuPy, with DirectML's validation rules, anywhere."""

from .api import run, run_case, run_files, validate
from .errors import BackendUnavailableError, DmlcliError, DmlcliWarning, InputError, ValidationError
from .feature_levels import ALL_FEATURE_LEVELS, FeatureLevel, parse_feature_level
from .operators import OPERATORS, find_operator

__version__ = "0.1.0"

__all__ = [
    "run", "run_files", "validate", "ValidationError", "InputError", "DmlcliError", "BackendUnavailableError",
    "DmlcliWarning", "OPERATORS", "find_operator", "FeatureLevel", "ALL_FEATURE_LEVELS",
    "parse_feature_level", "__version__", "run_case",
]
