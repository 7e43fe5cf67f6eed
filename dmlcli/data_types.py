"""DirectML's tensor data types (DML_TENSOR_DATA_TYPE) and their NumPy equivalents."""

from __future__ import annotations

import re

import numpy as np

from .errors import InputError, quoted
from .records import Frozen

_PREFIX = "DML_TENSOR_DATA_TYPE_"
# DirectML tensors hold at most 2^32-1 elements (DML_BUFFER_TENSOR_DESC: UINT sizes and counts).
MAX_ELEMENTS = 2**32 - 1


class DataType(Frozen):
    """One DML_TENSOR_DATA_TYPE: equal to another of the same fields, hashable (an immutable record, records.py)."""

    name: str  # DirectML's short name, e.g. "FLOAT32"
    value: int  # the DML_TENSOR_DATA_TYPE enum value
    bits: int
    numpy_name: str | None  # None where NumPy has no such type (4-bit types)

    def __init__(self, name: str, value: int, bits: int, numpy_name: str | None) -> None:
        vars(self).update(name=name, value=value, bits=bits, numpy_name=numpy_name)

    @property
    def dml_name(self) -> str:
        return _PREFIX + self.name

    @property
    def numpy_dtype(self) -> np.dtype:
        if self.numpy_name is None:
            raise InputError(f"data type {self.name} has no NumPy equivalent, so dmlcli cannot hold it")
        return np.dtype(self.numpy_name)

    @property
    def is_float(self) -> bool:
        return self.name.startswith("FLOAT")

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        # Equal fields, same class (as a dataclass compares), with the name compared first: validation's
        # `data_type in row's types` compares a type with most of the eleven, which differ by name (issue 23).
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.name == other.name and (self.value, self.bits, self.numpy_name) == (
            other.value, other.bits, other.numpy_name)

    def __hash__(self) -> int:
        return hash((self.name, self.value, self.bits, self.numpy_name))


FLOAT32 = DataType("FLOAT32", 1, 32, "float32")
FLOAT16 = DataType("FLOAT16", 2, 16, "float16")
UINT32 = DataType("UINT32", 3, 32, "uint32")
UINT16 = DataType("UINT16", 4, 16, "uint16")
UINT8 = DataType("UINT8", 5, 8, "uint8")
INT32 = DataType("INT32", 6, 32, "int32")
INT16 = DataType("INT16", 7, 16, "int16")
INT8 = DataType("INT8", 8, 8, "int8")
FLOAT64 = DataType("FLOAT64", 9, 64, "float64")
UINT64 = DataType("UINT64", 10, 64, "uint64")
INT64 = DataType("INT64", 11, 64, "int64")
UINT4 = DataType("UINT4", 12, 4, None)
INT4 = DataType("INT4", 13, 4, None)

ALL_DATA_TYPES = (FLOAT32, FLOAT16, UINT32, UINT16, UINT8, INT32, INT16, INT8, FLOAT64, UINT64, INT64, UINT4, INT4)
_BY_NAME = {t.name: t for t in ALL_DATA_TYPES}
_BY_NUMPY = {np.dtype(t.numpy_name): t for t in ALL_DATA_TYPES if t.numpy_name}

# Named data-type sets, in the order DirectML's pages print them (as array-api-strict names its
# dtype categories). The operator table writes its support rows with these names.
FLOATS = (FLOAT32, FLOAT16)  # "F": what DirectML's math runs on
INTS_32_16_8 = (INT32, INT16, INT8, UINT32, UINT16, UINT8)  # "ints6"
TYPES_8 = FLOATS + INTS_32_16_8  # "8T": floats and every integer up to 32 bits
TYPES_10 = (FLOAT32, FLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, UINT16, UINT8)  # "10T": 8T and 64-bit ints
ALL11 = (FLOAT64, FLOAT32, FLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, UINT16, UINT8)  # 10T and FLOAT64
UNSIGNED_32_16_8 = (UINT32, UINT16, UINT8)
UNSIGNED_64_32_16_8 = (UINT64, UINT32, UINT16, UINT8)
UINT32_OR_UINT8 = (UINT32, UINT8)
# The names the first transcription used.
CMP10 = TYPES_10
CMP8 = TYPES_8


def as_bits(array):
    """The native encoding: the same bytes seen as the unsigned integer of the same width.

    Works on NumPy and CuPy arrays alike (a view, no copy).
    """
    return array.view(f"uint{array.dtype.itemsize * 8}")


_NUMPY_NAME = re.compile(r"[<>=|]?[a-z]+[0-9]*")


def parse_data_type(text: str) -> DataType:
    """Accept NumPy (`uint8`, `float16`) or DirectML (`UINT8`, `DML_TENSOR_DATA_TYPE_UINT8`) spellings."""
    key = str(text).strip().upper()
    if key.startswith(_PREFIX):
        key = key[len(_PREFIX):]
    if key in _BY_NAME:
        return _BY_NAME[key]
    name = str(text).strip().lower()
    # Only a plain NumPy name or code (float32, <u2, f8) goes to np.dtype: a struct or subarray spelling such as
    # "f4,(2" reaches an expression parser that raises SyntaxError, and names no DirectML type anyway.
    if _NUMPY_NAME.fullmatch(name):
        import warnings

        try:
            with warnings.catch_warnings():  # a deprecated alias ("a") names no DirectML type either
                warnings.simplefilter("ignore", DeprecationWarning)
                return from_numpy(np.dtype(name))
        except (TypeError, ValueError, InputError):
            pass
    known = ", ".join(t.numpy_name for t in ALL11)
    raise InputError(f"unknown data type {quoted(text)} (expected one of {known}, in NumPy or DirectML spelling)")


def from_numpy(dtype: np.dtype) -> DataType:
    dtype = np.dtype(dtype)
    native = dtype.newbyteorder("=") if dtype.byteorder not in ("=", "|") else dtype
    found = _BY_NUMPY.get(native)
    if found is None:
        hint = " (use uint8 0/1 for booleans)" if dtype.kind == "b" else ""
        raise InputError(f"NumPy dtype {dtype} has no DirectML tensor data type{hint}")
    return found
