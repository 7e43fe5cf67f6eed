"""DirectML's tensor data types (DML_TENSOR_DATA_TYPE) and their NumPy equivalents.

INT4 and UINT4 (DirectML 6_3) have no NumPy type of their own: dmlcli holds them as ml_dtypes' int4 and uint4
(the NumPy extension types JAX and ONNX use; one element a byte, the value in its low four bits), imported only
when a run meets a 4-bit tensor. Kernels compute them as int8 and uint8 (`kernel_dtype`): the backends convert at
their edges (to_kernel_array, from_kernel_array), as CuPy has no 4-bit type either.
"""

from __future__ import annotations

import re

import numpy as np

from .errors import InputError, quoted, raise_interruption
from .records import Frozen

_PREFIX = "DML_TENSOR_DATA_TYPE_"
# DirectML tensors hold at most 2^32-1 elements (DML_BUFFER_TENSOR_DESC: UINT sizes and counts).
MAX_ELEMENTS = 2**32 - 1


class DataType(Frozen):
    """One DML_TENSOR_DATA_TYPE: equal to another of the same fields, hashable (an immutable record, records.py)."""

    name: str  # DirectML's short name, e.g. "FLOAT32"
    value: int  # the DML_TENSOR_DATA_TYPE enum value
    bits: int
    numpy_name: str  # NumPy's name; ml_dtypes' for the 4-bit types (int4, uint4), which NumPy knows once it is loaded

    def __init__(self, name: str, value: int, bits: int, numpy_name: str) -> None:
        vars(self).update(name=name, value=value, bits=bits, numpy_name=numpy_name)

    @property
    def dml_name(self) -> str:
        return _PREFIX + self.name

    @property
    def numpy_dtype(self) -> np.dtype:
        """The dtype dmlcli holds the tensor in (ml_dtypes' int4 and uint4 for the 4-bit types)."""
        if self.bits == 4:
            return four_bit_dtype(self.numpy_name)
        return np.dtype(self.numpy_name)

    @property
    def kernel_dtype(self) -> np.dtype:
        """The dtype kernels compute the tensor in, on NumPy and CuPy alike: int8 and uint8 for INT4 and UINT4
        (CuPy has no 4-bit type), the tensor's own dtype for the others."""
        if self.bits == 4:
            return np.dtype(self.numpy_name.replace("4", "8"))
        return np.dtype(self.numpy_name)

    @property
    def is_four_bit(self) -> bool:
        return self.bits == 4

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
UINT4 = DataType("UINT4", 12, 4, "uint4")
INT4 = DataType("INT4", 13, 4, "int4")

ALL_DATA_TYPES = (FLOAT32, FLOAT16, UINT32, UINT16, UINT8, INT32, INT16, INT8, FLOAT64, UINT64, INT64, UINT4, INT4)
_BY_NAME = {t.name: t for t in ALL_DATA_TYPES}
_BY_NUMPY = {np.dtype(t.numpy_name): t for t in ALL_DATA_TYPES if t.bits >= 8}  # the 4-bit ones: from_numpy

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
FOUR_BIT = (UINT4, INT4)
QUANTIZED_8_4 = (INT8, INT4, UINT8, UINT4)  # what DirectML 6_3's QUANTIZE writes, in its page's order
# The names the first transcription used.
CMP10 = TYPES_10
CMP8 = TYPES_8


def as_bits(array):
    """The native encoding: the same bytes seen as the unsigned integer of the same width.

    Works on NumPy and CuPy arrays alike (a view, no copy); a 4-bit array's four bits, a byte's low half (a copy:
    a '|V1' file read as int4 may hold anything in the high half, which is no part of the value).
    """
    if is_four_bit_dtype(array.dtype):
        return array.view(np.uint8) & np.uint8(0xF)
    return array.view(f"uint{array.dtype.itemsize * 8}")


def four_bit_dtype(name: str) -> np.dtype:
    """ml_dtypes' `name` (int4 or uint4) as a NumPy dtype; ml_dtypes is imported here, at the first 4-bit tensor."""
    try:
        import ml_dtypes
    except ImportError as error:
        raise_interruption(error)
        raise InputError(f"{name.upper()} tensors need the ml_dtypes package (pip install 'ml_dtypes>=0.4'), which "
                         "gives NumPy its 4-bit types") from None
    return np.dtype(getattr(ml_dtypes, name))


def is_four_bit_dtype(dtype: np.dtype) -> bool:
    """Whether `dtype` is ml_dtypes' int4 or uint4 (asked without importing ml_dtypes)."""
    return dtype.kind == "V" and dtype.name in ("int4", "uint4") and dtype.type.__module__.startswith("ml_dtypes")


def is_raw_byte_dtype(dtype: np.dtype) -> bool:
    """Whether `dtype` is NumPy's one-byte void, '|V1': what np.save writes for ml_dtypes' 4-bit arrays."""
    return dtype.kind == "V" and dtype.itemsize == 1 and dtype.fields is None and not is_four_bit_dtype(dtype)


RAW_BYTES_HINT = ("one-byte void elements ('|V1') are what numpy.save writes for ml_dtypes' int4 and uint4 arrays, "
                  "which loses their type: give --dtype int4 or --dtype uint4 (dtype= in the API) to read them as "
                  "such, or save them with dmlcli, which writes the descr 'int4' or 'uint4'")


def integer_limits(dtype) -> tuple[int, int]:
    """(lowest, highest) value of an integer dtype, ml_dtypes' int4 (-8, 7) and uint4 (0, 15) included, which
    np.iinfo does not take."""
    dtype = np.dtype(dtype)
    if is_four_bit_dtype(dtype):
        return (-8, 7) if dtype.name == "int4" else (0, 15)
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def to_kernel_array(array: np.ndarray) -> np.ndarray:
    """A NumPy array as kernels take it: a 4-bit one as int8/uint8 values (a conversion, not a view: ml_dtypes
    keeps a negative INT4 in the low four bits, unextended), any other as it is."""
    if is_four_bit_dtype(array.dtype):
        return array.astype(np.dtype(array.dtype.name.replace("4", "8")))
    return array


def from_kernel_array(array: np.ndarray, data_type: DataType) -> np.ndarray:
    """A kernel's NumPy result in the type dmlcli holds `data_type` in: int8/uint8 values (in range: the kernels
    saturate) as ml_dtypes' int4/uint4; other types as they are."""
    if data_type.is_four_bit:
        return array.astype(data_type.numpy_dtype)
    return array


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
    known = ", ".join(t.numpy_name for t in ALL11 + FOUR_BIT)
    raise InputError(f"unknown data type {quoted(text)} (expected one of {known}, in NumPy or DirectML spelling)")


def from_numpy(dtype: np.dtype) -> DataType:
    dtype = np.dtype(dtype)
    native = dtype.newbyteorder("=") if dtype.byteorder not in ("=", "|") else dtype
    found = _BY_NUMPY.get(native)
    if found is None:
        if is_four_bit_dtype(dtype):
            return _BY_NAME[dtype.name.upper()]
        if is_raw_byte_dtype(dtype):
            raise InputError(f"NumPy dtype {dtype.str} has no DirectML tensor data type ({RAW_BYTES_HINT})")
        hint = " (use uint8 0/1 for booleans)" if dtype.kind == "b" else ""
        raise InputError(f"NumPy dtype {dtype} has no DirectML tensor data type{hint}")
    return found
