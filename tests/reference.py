"""An independent reference for the operators, on Python ints and floats one element at a time.

It shares no code with dmlcli: bit patterns come from the struct module, results from plain
Python arithmetic, so agreement with dmlcli's NumPy kernels means something.
"""

import math
import struct

import numpy as np

_FLOAT_FORMAT = {2: "e", 4: "f", 8: "d"}
_UINT_FORMAT = {1: "B", 2: "H", 4: "I", 8: "Q"}


def bits_of(value, dtype) -> int:
    """The bit pattern of one element as a non-negative Python int."""
    dtype = np.dtype(dtype)
    size = dtype.itemsize
    if dtype.kind == "f":
        # struct round-trips float16/float32 through a Python float exactly, NaN payloads aside,
        # so floats travel as their raw bytes instead.
        raw = np.asarray(value, dtype=dtype).tobytes()
        return struct.unpack("<" + _UINT_FORMAT[size], raw)[0]
    return int(value) & ((1 << (8 * size)) - 1)


def from_bits(pattern: int, dtype):
    dtype = np.dtype(dtype)
    raw = struct.pack("<" + _UINT_FORMAT[dtype.itemsize], pattern)
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<"))[0].astype(dtype)


def _width(dtype) -> int:
    return np.dtype(dtype).itemsize * 8


def _truth(value) -> bool:
    return bool(float(value)) if np.dtype(type(value)).kind == "f" else int(value) != 0


def _pyfloat_or_int(value):
    return float(value) if np.asarray(value).dtype.kind == "f" else int(value)


def element(op: str, values, dtype, out_dtype, mode="EITHER"):
    """op's result for one element (a tuple of input scalars), as a NumPy scalar of out_dtype."""
    width = _width(dtype)
    mask = (1 << width) - 1
    if op in ("bit_and", "bit_or", "bit_xor"):
        a, b = (bits_of(v, dtype) for v in values)
        pattern = {"bit_and": a & b, "bit_or": a | b, "bit_xor": a ^ b}[op]
        return from_bits(pattern, dtype)
    if op == "bit_not":
        return from_bits(~bits_of(values[0], dtype) & mask, dtype)
    if op == "bit_count":
        return np.dtype(out_dtype).type(bin(bits_of(values[0], dtype)).count("1"))
    if op in ("bit_shift_left", "bit_shift_right"):
        a, count = int(values[0]), int(values[1])
        if count >= width:
            result = 0
        elif op == "bit_shift_left":
            result = (a << count) & mask
        else:
            result = a >> count
        return np.dtype(out_dtype).type(result)
    if op in ("logical_and", "logical_or", "logical_xor"):
        a, b = (_truth(v) for v in values)
        result = {"logical_and": a and b, "logical_or": a or b, "logical_xor": a != b}[op]
        return np.dtype(out_dtype).type(int(result))
    if op == "logical_not":
        return np.dtype(out_dtype).type(int(not _truth(values[0])))
    if op == "is_infinity":
        x = float(values[0])
        hit = math.isinf(x) and (mode == "EITHER" or (mode == "POSITIVE") == (x > 0))
        return np.dtype(out_dtype).type(int(hit))
    if op == "is_nan":
        return np.dtype(out_dtype).type(int(math.isnan(float(values[0]))))
    a, b = (_pyfloat_or_int(v) for v in values)
    result = {
        "logical_equals": a == b,
        "logical_greater_than": a > b,
        "logical_less_than": a < b,
        "logical_greater_than_or_equal": a >= b,
        "logical_less_than_or_equal": a <= b,
    }[op]
    return np.dtype(out_dtype).type(int(result))


def evaluate(op: str, arrays, out_dtype, mode="EITHER") -> np.ndarray:
    """op over whole arrays of one shape, element by element."""
    shape = arrays[0].shape
    dtype = arrays[0].dtype
    flat = [a.reshape(-1) for a in arrays]
    out = [element(op, tuple(f[i] for f in flat), dtype, out_dtype, mode) for i in range(flat[0].size)]
    return np.array(out, dtype=out_dtype).reshape(shape)
