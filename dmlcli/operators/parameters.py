"""Parameter kinds: the non-tensor fields of an operator's DESC struct, declared once in the table.

Each parameter knows its DirectML field name, its command-line and API spellings (derived from the
field name), its default, how to read a value typed by a person or written in a DxDispatch model,
and what it looks like to a CUDA kernel. The command line, the Python API, `dispatch`, `describe`
and both backends read these declarations; none of them names a particular parameter.

Values after parsing ("typed values") are what both backends receive, in a dict by field name:
an enum's short name (str), a FLOAT field as numpy.float32, an integer as int, a typed scalar as
a NumPy scalar of the tensor's own type, ScaleBias as a (scale, bias) pair of float32 or None.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the module is imported without them at run time
    from typing import Mapping

    from .parameter_kinds import Parameter

# C++ type of each NumPy dtype's value as a CUDA kernel argument.
CUDA_VALUE_TYPES = {
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "float16": "float", "float32": "float", "float64": "double",
}


@lru_cache(maxsize=None)  # a handful of field names, asked for on every call that checks its options
def snake_case(field: str) -> str:
    """DirectML's field name in the API's spelling: InfinityMode -> infinity_mode, MinMaxDataType -> min_max_data_type."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", field).lower()


def option_flag(option: str) -> str:
    """The command-line spelling of an API keyword: infinity_mode -> --infinity-mode."""
    return "--" + option.replace("_", "-")


def _given(given: Mapping[str, object], option: str):
    value = given.get(option)
    return None if value is None else value


INT32_RANGE = (-(2**31), 2**31 - 1)
UINT32_RANGE = (0, 2**32 - 1)


def all_options(parameters: tuple[Parameter, ...]) -> dict[str, Parameter]:
    """Each API keyword of `parameters`, mapped to the parameter that takes it."""
    return {option: parameter for parameter in parameters for option in parameter.options}


# The kinds (EnumParameter, FloatParameter, ...), their base Parameter and CudaArgument live in parameter_kinds.py,
# loaded on first use: an operator without parameters runs without creating their classes.
# `from .parameters import EnumParameter` works as before.
_KINDS = (
    'Parameter',
    'CudaArgument',
    'EnumParameter',
    'FloatParameter',
    'IntegerParameter',
    'TypedScalarParameter',
    '_DEFAULT_NUMBERS',
    'ScaleBiasParameter',
    'BoolParameter',
    'IntArrayParameter',
    'FloatArrayParameter',
    'FusedActivationParameter',
    '_data_type_from',
    'DataTypeParameter',
    '_SCALAR_UNION_MEMBERS',
    '_SCALAR_UNION_SPELLING',
    'ScalarUnionParameter',
    '_split_outside_parentheses',
    'ActivationsParameter',
)


def __getattr__(name: str):
    if name in _KINDS:
        from . import parameter_kinds

        return getattr(parameter_kinds, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
