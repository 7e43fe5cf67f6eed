"""Whether a float array holds NaN or a zero of a given sign: one read-only reduction each, for the fast paths.

The exact kernels of MIN, MAX, CLIP, CLIP1, THRESHOLD, RELU and SIGN settle NaN and signed zeros element by
element, which costs several passes. Where an array holds neither, NumPy's single call (np.fmax, np.clip,
np.sign) already gives the exact result; these checks say when that is so, each at the cost of one SIMD
reduction (a read-only pass, a fraction of an element-wise pass that writes), so the careful path runs only for
arrays that need it.

MIN, MAX and THRESHOLD need no NaN check where NumPy's vector loops follow the NaN rule themselves (as on
x86-64): the probe fmax_fmin_follow_nan_rule says whether they do, once per data type, and the kernels send only
whole vectors (WHOLE_VECTORS) through them, so that no element reaches their scalar remainder loop (C's fmaxf,
which may quiet a signalling NaN or return the second of two NaN). SIGN needs none where np.sign returns NaN as it
is (the probe sign_keeps_nan_bits): its result can then differ from the rule only at a -0.0.
"""

from __future__ import annotations

import functools

import numpy as np

from ...data_types import as_bits


def has_nan(values: np.ndarray) -> bool:
    """Whether any element is NaN: np.maximum's reduction propagates NaN."""
    if values.size == 0:
        return False
    return bool(np.isnan(np.maximum.reduce(values, axis=None)))


# The integer types of each float width, looked up once (a view by dtype name costs a parse per call).
_SIGNED = {size: np.dtype(f"int{size * 8}") for size in (2, 4, 8)}
_UNSIGNED = {size: np.dtype(f"uint{size * 8}") for size in (2, 4, 8)}
_SIGNED_MIN = {size: int(np.iinfo(dtype).min) for size, dtype in _SIGNED.items()}


def has_zero(values: np.ndarray, *, negative: bool) -> bool:
    """Whether any element is -0.0 (`negative`) or +0.0, read from the bits.

    +0.0 is the only float whose bits are the unsigned minimum (0); -0.0 the only one whose bits, read as
    a signed integer, are the signed minimum (the sign bit alone).
    """
    if values.size == 0:
        return False
    size = values.dtype.itemsize
    if negative:
        return int(np.minimum.reduce(values.view(_SIGNED[size]), axis=None)) == _SIGNED_MIN[size]
    return int(np.minimum.reduce(values.view(_UNSIGNED[size]), axis=None)) == 0


# NumPy's min/max loops run unrolled vectors, then single vectors, then a scalar loop for what is left: an array
# of a multiple of this many elements (a multiple of any vector's lanes) never reaches the scalar loop.
WHOLE_VECTORS = 1024


def nan_patterns(dtype: np.dtype) -> list[int]:
    """Four NaN encodings of a float type: quiet and signalling, each with either sign, with payloads."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    quiet_bit = 1 << (np.finfo(dtype).nmant - 1)
    exponent = ((1 << (width - 1 - np.finfo(dtype).nmant)) - 1) << np.finfo(dtype).nmant
    sign = 1 << (width - 1)
    return [exponent | quiet_bit | 1, exponent | 1, sign | exponent | quiet_bit | 3, sign | exponent | 5]


@functools.lru_cache(maxsize=None)
def clip_keeps_nan_bits(dtype: np.dtype) -> bool:
    """Whether np.clip returns a NaN element itself, sign and payload bits and all (signalling NaNs too), in
    both its SIMD and its scalar loops. NumPy's clip does (a NaN operand wins and is returned as it is), but
    does not promise it: this asks once per data type, on an array long enough for both loops."""
    dtype = np.dtype(dtype)
    return returns_nan_as_is(lambda probe: np.clip(probe, np.zeros((), dtype), np.array(np.inf, dtype)), dtype)


@functools.lru_cache(maxsize=None)
def sign_keeps_nan_bits(dtype: np.dtype) -> bool:
    """Whether np.sign returns a NaN element itself, bits and all (signalling NaNs too). NumPy 2's loop for
    floats is `x > 0 ? 1 : (x < 0 ? -1 : (x == 0 ? 0 : x))`, which does; a vector loop or another NumPy might
    quiet a signalling NaN or give its own. Asked once per data type."""
    return returns_nan_as_is(np.sign, np.dtype(dtype))


def returns_nan_as_is(function, dtype: np.dtype) -> bool:
    """Whether function(array) keeps the bits of four NaN encodings (nan_patterns) placed at the start, in the
    middle of vectors and in the scalar tail of an array of ones (67 elements: both kinds of loop), and at the
    same places of a view that starts one element into its buffer (an unaligned start)."""
    positions = [0, 9, 40, 66]
    patterns = nan_patterns(dtype)
    for offset in (0, 1):
        probe = np.ones(67 + offset, dtype)[offset:]
        as_bits(probe)[positions] = patterns
        with np.errstate(all="ignore"):
            result = function(probe)
        if as_bits(result)[positions].tolist() != patterns:
            return False
    return True


@functools.lru_cache(maxsize=None)
def fmax_fmin_follow_nan_rule(dtype: np.dtype) -> bool:
    """Whether np.fmax and np.fmin, on contiguous arrays of a multiple of WHOLE_VECTORS elements (into a fresh
    output), give the NaN rule's result in every element: the other operand where one is NaN (signalling NaNs
    too), and where both are NaN the first operand's bits. NumPy's x86 loops do (a masked max/min keeps the
    first operand where the second is NaN); Arm's fmaxnm quiets a signalling NaN. Asked once per data type."""
    dtype = np.dtype(dtype)
    return all(follows_nan_rule(function, dtype, offset) for function in (np.fmax, np.fmin) for offset in (0, 1))


@functools.lru_cache(maxsize=None)
def fmax_gives_positive_zero(dtype: np.dtype) -> bool:
    """Whether np.fmax(-0.0, +0.0), on contiguous arrays of a multiple of WHOLE_VECTORS elements (into a fresh
    output), gives +0.0 in every element: max's zero rule for that order of the operands, the one THRESHOLD's
    loop against a vector of Min = +0.0 meets. NumPy's x86 loops return the second operand of a tie of zeros, so
    they do (and get the other order wrong). Asked once per data type."""
    return gives_positive_zero(np.fmax, np.dtype(dtype))


def gives_positive_zero(function, dtype: np.dtype) -> bool:
    """The probe for one function(first, second, out=): -0.0 against +0.0 at every position of a vector, on
    operands that start at their buffers and one element into them."""
    count = 2 * WHOLE_VECTORS
    for offset in (0, 1):
        negative = np.full(count + offset, -0.0, dtype)[offset:]
        positive = np.zeros(count + offset, dtype)[offset:]
        result = np.empty(count, dtype)
        function(negative, positive, out=result)
        if has_zero(result, negative=True):
            return False
    return True


def follows_nan_rule(function, dtype: np.dtype, offset: int) -> bool:
    """The probe for one function, on operands that start `offset` elements into their buffers: each of four
    NaN encodings against a number, in either place, and against another NaN, at every position of a vector."""
    count = 2 * WHOLE_VECTORS
    first, second = np.ones(count + offset, dtype)[offset:], np.full(count + offset, 2, dtype)[offset:]
    patterns = np.array(nan_patterns(dtype), as_bits(first).dtype)
    position = np.arange(count)
    case, pattern = position % 4, (position // 4) % len(patterns)  # 0: first NaN, 1: second, 2: both, 3: none
    as_bits(first)[(case == 0) | (case == 2)] = patterns[pattern[(case == 0) | (case == 2)]]
    as_bits(second)[(case == 1) | (case == 2)] = patterns[(pattern[(case == 1) | (case == 2)] + 1) % len(patterns)]
    numbers, result = np.empty(count, dtype), np.empty(count, dtype)
    with np.errstate(all="ignore"):
        function(np.ones(count, dtype), np.full(count, 2, dtype), out=numbers)
        function(first, second, out=result)
    expected = np.where(case == 0, as_bits(second), np.where(case == 3, as_bits(numbers), as_bits(first)))
    return bool(np.array_equal(as_bits(result), expected))
