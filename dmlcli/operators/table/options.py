"""What every parameter kind shares, kept apart from the kinds themselves (parameters.py) so that an operator
without parameters, and the command line's option spellings, never load the kinds' classes: DirectML's field
name in the API's and the command line's spellings, the UINT and INT ranges, and each NumPy type's C++ type for
a CUDA kernel argument.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:  # annotations only: the module is imported without them at run time
    from typing import Mapping


class TakesOptions(Protocol):
    """What all_options reads of a parameter (parameters.Parameter), named here so that this module, which
    parameters.py imports, does not import it back."""

    options: tuple[str, ...]


Taking = TypeVar("Taking", bound=TakesOptions)

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


def all_options(parameters: tuple[Taking, ...]) -> dict[str, Taking]:
    """Each API keyword of `parameters`, mapped to the parameter that takes it."""
    return {option: parameter for parameter in parameters for option in parameter.options}
