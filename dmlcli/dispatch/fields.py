"""A DxDispatch model's JSON fields as DxDispatch reads them: the keys an object may have, unsigned integers,
data type names, and element values converted as DxDispatch/src/model/JsonParsers.cpp converts them.

Shared by everything that reads a model (model.py: resources and commands; dispatchable.py: operator
dispatchables and their tensor descs), below all of them.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np

from ..data_types import ALL_DATA_TYPES, DataType, integer_limits
from ..errors import InputError
from .jsonc import shown

_DATA_TYPE_PREFIX = "DML_TENSOR_DATA_TYPE_"
UINT32_MAX = 0xFFFFFFFF
UINT64_MAX = 0xFFFFFFFFFFFFFFFF


def check_keys(value: dict, allowed, where: str, what: str) -> None:
    """Refuse a JSON object's first key that is not among `allowed`, naming the keys allowed."""
    unknown = [key for key in value if key not in allowed]
    if unknown:
        raise InputError(f"{where}: unknown key {shown(unknown[0])} in the {what} (expected {', '.join(allowed)})")


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_long_integer(value) -> bool:
    """An integer too long for int() (kept as Decimal by the JSON reader): out of every range."""
    return isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value()


def parse_uint(value, where: str, *, maximum: int = UINT32_MAX) -> int:
    if not _is_integer(value) or not 0 <= value <= maximum:
        raise InputError(f"{where}: expected an unsigned integer (0 to {maximum}), found {shown(value)}")
    return value


def parse_data_type_name(value, where: str) -> DataType:
    """DML_TENSOR_DATA_TYPE_X or X (Guide.md, "Abbreviated Enum Values")."""
    if not isinstance(value, str):
        raise InputError(f"{where}: a data type must be a string such as \"FLOAT32\", found {shown(value)}")
    key = value.strip().upper()
    if key.startswith(_DATA_TYPE_PREFIX):
        key = key[len(_DATA_TYPE_PREFIX):]
    for data_type in ALL_DATA_TYPES:
        if data_type.name == key:
            return data_type
    if key == "UNKNOWN":
        raise InputError(f"{where}: data type UNKNOWN is not supported by dmlcli (DxDispatch uses it for "
                         "mixed-type list initialisers, which only HLSL constant buffers need)")
    names = ", ".join(t.name for t in ALL_DATA_TYPES)
    raise InputError(f"{where}: unknown data type {shown(value)} (expected one of {names}, optionally with the "
                     f"{_DATA_TYPE_PREFIX} prefix)")


def element_values(values: list, data_type: DataType, where: str, *, first_index: int = 0) -> np.ndarray:
    """JSON values as an array of `data_type`, converted as DxDispatch's JsonParsers.cpp does.

    Floats: a number, or "nan" / "inf" / "-inf" in any case; the number is read as a double and
    cast to float (FLOAT16 goes double -> float -> half, as ParseFloat16 does). Integers: JSON
    integers only (1.0 is refused, as RapidJSON's IsInt64/IsUint64 refuse it), in range
    (gsl::narrow throws otherwise). `first_index`: the index of values[0] in messages (a long list
    is converted in pieces).
    """
    np_dtype = data_type.numpy_dtype
    kinds = set(map(type, values))  # bool is not int here: true and false are refused
    if data_type.is_float:
        if kinds <= {int, float}:  # plain numbers, the common case: converted by NumPy at once
            try:
                return _doubles_to(np.array(values, dtype=np.float64), values, data_type, where, first_index)
            except OverflowError:  # an integer beyond a double: the element by element path names it
                pass
        doubles = [_as_double(value, data_type, f"{where}[{first_index + i}]") for i, value in enumerate(values)]
        return _doubles_to(np.array(doubles, dtype=np.float64), values, data_type, where, first_index)
    lowest, highest = integer_limits(np_dtype)
    if kinds == {int} and lowest <= min(values) and max(values) <= highest:
        return np.array(values, dtype=np_dtype)
    for i, value in enumerate(values):
        if _is_long_integer(value):
            raise InputError(f"{where}[{first_index + i}]: {shown(value)} is out of range for {data_type.name} "
                             f"({lowest} to {highest})")
        if not _is_integer(value):
            raise InputError(f"{where}[{first_index + i}]: {shown(value)} is not an integer, as {data_type.name} "
                             "needs (DxDispatch refuses numbers written with a decimal point or exponent here)")
        if not lowest <= value <= highest:
            raise InputError(f"{where}[{first_index + i}]: {shown(value)} is out of range for {data_type.name} "
                             f"({lowest} to {highest})")
    return np.array(values, dtype=np_dtype)


def _out_of_range(value, data_type: DataType, where: str) -> InputError:
    # The wording of `run`'s JSON reader for the same value ("= 1e400 is out of range for float32").
    return InputError(f"{where}: {shown(value)} is out of range for {data_type.name} (write \"inf\" for infinity)")


def _as_double(value, data_type: DataType, where: str) -> float:
    if isinstance(value, str):
        special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(value.lower())
        if special is None:
            raise InputError(f"{where}: {shown(value)} is not a number (expected a number, \"nan\", \"inf\" or \"-inf\")")
        return special
    if isinstance(value, Decimal) and not value.is_nan():
        # Beyond a double's range (the JSON reader keeps those exact): RapidJSON refuses them.
        raise _out_of_range(value, data_type, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {shown(value)} is not a number")
    try:
        return float(value)
    except OverflowError:
        raise _out_of_range(value, data_type, where) from None


def _doubles_to(doubles: np.ndarray, values: list, data_type: DataType, where: str, first_index: int = 0) -> np.ndarray:
    with np.errstate(over="ignore"):
        result = doubles
        if data_type.bits <= 32:
            result = result.astype(np.float32)  # static_cast<float>(value.GetDouble())
        if data_type.bits == 16:
            result = result.astype(np.float16)  # half_float::half(float), round to nearest even
    overflow = np.isfinite(doubles) & ~np.isfinite(result)
    if overflow.any():
        index = int(np.flatnonzero(overflow)[0])
        raise _out_of_range(values[index], data_type, f"{where}[{first_index + index}]")
    return result


def element_value(value, data_type: DataType, where: str):
    """One JSON value as a NumPy scalar of `data_type`."""
    return element_values([value], data_type, where)[0]
