"""NumPy kernel bodies, one per operator.

Every kernel takes the operator's input arrays (already broadcast to one shape), the output
NumPy dtype and the operator's parameters, and returns the output array. Kernels are
elementwise, so the streaming executor may call them on any slice of the inputs.
"""

from __future__ import annotations

import numpy as np

from .data_types import as_bits


def bit_and(inputs, out_dtype, params):
    a, b = inputs
    return np.bitwise_and(as_bits(a), as_bits(b)).view(out_dtype)


def bit_or(inputs, out_dtype, params):
    a, b = inputs
    return np.bitwise_or(as_bits(a), as_bits(b)).view(out_dtype)


def bit_xor(inputs, out_dtype, params):
    a, b = inputs
    return np.bitwise_xor(as_bits(a), as_bits(b)).view(out_dtype)


def bit_not(inputs, out_dtype, params):
    (x,) = inputs
    return np.invert(as_bits(x)).view(out_dtype)


def bit_count(inputs, out_dtype, params):
    # np.bitwise_count counts |x| for signed types, so count the unsigned view instead.
    (x,) = inputs
    return np.bitwise_count(as_bits(x)).astype(out_dtype, copy=False)


def _shift(shift, a, b):
    # Counts at or past the element width give 0 (dmlcli's documented choice; DirectML does not
    # say). NumPy's shift ufuncs define exactly that for unsigned types (numpy PR #13739: npy_lshift
    # and npy_rshift), in one pass; tests/test_core_semantics.py pins it for every width.
    return shift(a, b.astype(a.dtype, copy=False))


def bit_shift_left(inputs, out_dtype, params):
    a, b = inputs
    return _shift(np.left_shift, a, b).astype(out_dtype, copy=False)


def bit_shift_right(inputs, out_dtype, params):
    a, b = inputs
    return _shift(np.right_shift, a, b).astype(out_dtype, copy=False)


def logical_and(inputs, out_dtype, params):
    a, b = inputs
    return np.logical_and(a != 0, b != 0).astype(out_dtype)


def logical_or(inputs, out_dtype, params):
    a, b = inputs
    return np.logical_or(a != 0, b != 0).astype(out_dtype)


def logical_xor(inputs, out_dtype, params):
    a, b = inputs
    return np.not_equal(a != 0, b != 0).astype(out_dtype)


def logical_not(inputs, out_dtype, params):
    (x,) = inputs
    return (x == 0).astype(out_dtype)


def is_infinity(inputs, out_dtype, params):
    (x,) = inputs
    mode = params["InfinityMode"]
    infinite = np.isinf(x)
    if mode == "POSITIVE":
        infinite &= x > 0
    elif mode == "NEGATIVE":
        infinite &= x < 0
    return infinite.astype(out_dtype)


def is_nan(inputs, out_dtype, params):
    (x,) = inputs
    return np.isnan(x).astype(out_dtype)


# Comparisons: NumPy compares two arrays of one dtype exactly (int64/uint64 never go through
# float64) and by IEEE-754 for floats, which is what DirectML specifies.
def _comparison(ufunc):
    def kernel(inputs, out_dtype, params):
        a, b = inputs
        return ufunc(a, b).astype(out_dtype)

    kernel.__name__ = ufunc.__name__
    return kernel


logical_equals = _comparison(np.equal)
logical_greater_than = _comparison(np.greater)
logical_less_than = _comparison(np.less)
logical_greater_than_or_equal = _comparison(np.greater_equal)
logical_less_than_or_equal = _comparison(np.less_equal)
