"""Whether a float array holds NaN or a zero of a given sign: one read-only reduction each, for the fast paths.

The exact kernels of MIN, MAX, CLIP, CLIP1, THRESHOLD, RELU and SIGN settle NaN and signed zeros element by
element, which costs several passes. Where an array holds neither, NumPy's single call (np.fmax, np.clip,
np.sign) already gives the exact result; these checks say when that is so, each at the cost of one SIMD
reduction (a read-only pass, a fraction of an element-wise pass that writes), so the careful path runs only for
arrays that need it.
"""

from __future__ import annotations

import functools

import numpy as np

from ..data_types import as_bits


def has_nan(values: np.ndarray) -> bool:
    """Whether any element is NaN: np.maximum's reduction propagates NaN."""
    if values.size == 0:
        return False
    return bool(np.isnan(np.maximum.reduce(values, axis=None)))


def has_zero(values: np.ndarray, *, negative: bool) -> bool:
    """Whether any element is -0.0 (`negative`) or +0.0, read from the bits.

    +0.0 is the only float whose bits are the unsigned minimum (0); -0.0 the only one whose bits, read as
    a signed integer, are the signed minimum (the sign bit alone).
    """
    if values.size == 0:
        return False
    bits = as_bits(values)
    if negative:
        signed = bits.view(f"int{values.dtype.itemsize * 8}")
        return int(np.minimum.reduce(signed, axis=None)) == int(np.iinfo(signed.dtype).min)
    return int(np.minimum.reduce(bits, axis=None)) == 0


@functools.lru_cache(maxsize=None)
def clip_keeps_nan_bits(dtype: np.dtype) -> bool:
    """Whether np.clip returns a NaN element itself, sign and payload bits and all (signalling NaNs too), in
    both its SIMD and its scalar loops. NumPy's clip does (a NaN operand wins and is returned as it is), but
    does not promise it: this asks once per data type, on an array long enough for both loops."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    quiet_bit = 1 << (np.finfo(dtype).nmant - 1)
    exponent = ((1 << (width - 1 - np.finfo(dtype).nmant)) - 1) << np.finfo(dtype).nmant
    sign = 1 << (width - 1)
    patterns = [exponent | quiet_bit | 1, exponent | 1, sign | exponent | quiet_bit | 3, sign | exponent | 5]
    probe = np.ones(67, dtype)
    positions = [0, 9, 40, 66]  # the start, the middle of vectors, the scalar tail
    as_bits(probe)[positions] = patterns
    with np.errstate(all="ignore"):
        clipped = np.clip(probe, np.zeros((), dtype), np.array(np.inf, dtype))
    return as_bits(clipped)[positions].tolist() == patterns
