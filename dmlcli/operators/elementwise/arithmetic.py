"""IDENTITY, ABS, ADD, SUBTRACT, MULTIPLY, DIVIDE, MEAN, DIFFERENCE_SQUARE, MODULUS_FLOOR, MODULUS_TRUNCATE,
RECIP, SQRT, NEGATE, SIGN: entries and kernels.

Sources: ../shared/reference/directml_elementwise.md §B2 (fields, formulas, support tables), §C (precision;
row 7 gives WebNN's tolerances). The NumPy kernels are the reference the GPU must match:

* exact operators and integer variants are bit-exact (integers wrap modulo 2^width);
* one-rounding operators (ADD, SUBTRACT, MULTIPLY, DIVIDE, RECIP, SQRT) give the correctly rounded IEEE
  result: FLOAT32 in float32 (NumPy's float32 arithmetic is IEEE, subnormals kept), FLOAT16 in float32 and
  rounded once to float16 (exact for these operations: float32 has 24 >= 2*11 + 2 bits);
* composite operators (MEAN, DIFFERENCE_SQUARE, MODULUS_*) compute in float64 from the inputs and round
  once to the output type.
"""

from __future__ import annotations

import functools

import numpy as np

from ...data_types import (ALL11, FLOAT16, FLOAT32, FLOATS, INT8, INT16, INT32, INT64, TYPES_8, TYPES_10, UINT32,
    UINT64, as_bits)
from ...feature_levels import level
from ..numerics import compiled_loops
from ..numerics.float_specials import has_nan, has_zero, sign_keeps_nan_bits
from ..table.parameters import ScaleBiasParameter
from ..numerics.scale_bias import cuda_scale_bias_helpers, float32_scale_bias, integer_scale_bias
from ..table.schema import COMPOSITE, DIMS_1_TO_8, DIMS_4, DIMS_4_TO_5, EXACT, ONE_ROUNDING, Operator, Tolerance, rows

AB = ("ATensor", "BTensor")
ABO = ("ATensor", "BTensor", "OutputTensor")
X = ("InputTensor",)
XO = ("InputTensor", "OutputTensor")

# Type lists in the order the pages print them.
F_I32_U32 = (FLOAT32, FLOAT16, INT32, UINT32)
F_I64_I32_U64_U32 = (FLOAT32, FLOAT16, INT64, INT32, UINT64, UINT32)
F_SIGNED_32_16_8 = (FLOAT32, FLOAT16, INT32, INT16, INT8)
F_SIGNED_64_32_16_8 = (FLOAT32, FLOAT16, INT64, INT32, INT16, INT8)

SCALE_BIAS = ScaleBiasParameter(
    field="ScaleBias",
    help="optional DML_SCALE_BIAS applied to the input first: x*Scale + Bias (both FLOAT)",
)


def _same(types, *tensors):
    return {name: types for name in tensors}


_IDENTITY = rows(
    ("4_1", DIMS_1_TO_8, _same(ALL11, *XO)),
    ("3_0", DIMS_1_TO_8, _same(TYPES_8, *XO)),
    ("2_1", DIMS_4_TO_5, _same(TYPES_8, *XO)),
    ("1_0", DIMS_4_TO_5, _same(FLOATS, *XO)),
)
_ABS = rows(
    ("4_1", DIMS_1_TO_8, _same(F_SIGNED_64_32_16_8, *XO)),
    ("3_0", DIMS_1_TO_8, _same(F_SIGNED_32_16_8, *XO)),
    ("2_1", DIMS_4, _same(F_SIGNED_32_16_8, *XO)),
    ("1_0", DIMS_4, _same(FLOATS, *XO)),
)


def _add_like(old_dims):
    """ADD, SUBTRACT and MULTIPLY: 64-bit at 4_1, 8/16-bit integers only at 5_1; pre-3_0 dims per page."""
    return rows(
        ("5_1", DIMS_1_TO_8, _same(TYPES_10, *ABO)),
        ("4_1", DIMS_1_TO_8, _same(F_I64_I32_U64_U32, *ABO)),
        ("3_0", DIMS_1_TO_8, _same(F_I32_U32, *ABO)),
        ("2_1", old_dims, _same(F_I32_U32, *ABO)),
        ("1_0", old_dims, _same(FLOATS, *ABO)),
    )


_ADD = _add_like(DIMS_4_TO_5)
_SUBTRACT = _add_like(DIMS_4)
_MULTIPLY = _add_like(DIMS_4_TO_5)
_DIVIDE = rows(
    ("6_0", DIMS_1_TO_8, _same(TYPES_10, *ABO)),
    ("5_1", DIMS_1_TO_8, _same(TYPES_8, *ABO)),
    ("3_0", DIMS_1_TO_8, _same(F_I32_U32, *ABO)),
    ("2_1", DIMS_4, _same(F_I32_U32, *ABO)),
    ("1_0", DIMS_4, _same(FLOATS, *ABO)),
)
_MEAN = rows(
    ("3_0", DIMS_1_TO_8, _same(F_I32_U32, *ABO)),
    ("2_1", DIMS_4, _same(F_I32_U32, *ABO)),
    ("1_0", DIMS_4, _same(FLOATS, *ABO)),
)
_DIFFERENCE_SQUARE = rows(("3_1", DIMS_1_TO_8, _same(F_I32_U32, *ABO)))
_MODULUS = rows(
    ("6_0", DIMS_1_TO_8, _same(TYPES_10, *ABO)),
    ("3_0", DIMS_1_TO_8, _same(TYPES_8, *ABO)),
    ("2_1", DIMS_4, _same(TYPES_8, *ABO)),
)
_FLOAT_UNARY = rows(("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)), ("1_0", DIMS_4, _same(FLOATS, *XO)))
_SIGN = rows(
    ("4_1", DIMS_1_TO_8, _same(TYPES_10, *XO)),
    ("3_0", DIMS_1_TO_8, _same(TYPES_8, *XO)),
    ("2_1", DIMS_4, _same(TYPES_8, *XO)),
    ("2_0", DIMS_4, _same(FLOATS, *XO)),
)
_NEGATE = rows(("5_0", DIMS_1_TO_8, _same(F_SIGNED_64_32_16_8, *XO)))


# ---------------------------------------------------------------- notes

_SCALE_BIAS_NOTE = (
    "ScaleBias (--scale/--bias, API scale=/bias=) is applied to the input first: g = x*Scale + Bias in float32, "
    "two roundings (the product, then the sum; FLOAT16 inputs widened exactly). The operator then runs on g in "
    "float32 and a FLOAT16 output is rounded once from that float32 result (DirectML's 'float16 tensor from a "
    "float32 calculation', reference §C row 3). So ScaleBias adds up to two roundings to the operator's class. "
    "Without ScaleBias (NULL) the input is used bit for bit (-0.0 + 0 would give +0.0)."
)
_SCALE_BIAS_INTEGER_NOTE = (
    "DirectML does not say what ScaleBias does to an integer tensor. dmlcli computes x*Scale + Bias in float64 "
    "(x, Scale and Bias converted to float64, the product and the sum each rounded once, so 64-bit values past "
    "2^53 lose low bits), truncates toward zero and wraps modulo 2^width into the tensor's type (two's "
    "complement); a NaN or infinite value gives 0. The operator then acts on that integer. CPU and GPU take "
    "the same steps."
)
_WRAP_NOTE = ("Integer results wrap modulo 2^width (two's complement), as NumPy and C unsigned arithmetic do; "
              "DirectML's pages do not say.")
_ONE_ROUNDING_NOTE = (
    "FLOAT32: one correctly rounded IEEE-754 operation, float32 subnormals kept. FLOAT16: computed in float32 "
    "and rounded once to float16, which is the correctly rounded FLOAT16 result (float32 has 24 >= 2*11 + 2 "
    "bits). DirectML on D3D hardware may flush float32 subnormals and differ within the tolerance "
    "(reference §C rows 4 and 7); dmlcli itself is bit-exact to IEEE."
)
_DIVISION_BY_ZERO_NOTE = (
    "Integer division by zero gives a value with every bit set (the UINT maximum; -1 for signed types): D3D's "
    "udiv rule, applied to signed types too, as DirectML's page is silent. INT_MIN / -1 wraps to INT_MIN. "
    "Float division by zero follows IEEE: x/0 = +-inf, 0/0 = NaN."
)
_MODULUS_BY_ZERO_NOTE = (
    "Integer modulus by zero gives a value with every bit set (the UINT maximum; -1 for signed types): D3D's "
    "udiv rule, applied to signed types too, as DirectML's page is silent. INT_MIN mod -1 is 0. Float x mod 0, "
    "+-inf mod y and NaN operands give NaN (IEEE remainder rules)."
)
_MODULUS_PRECISION_NOTE = (
    "FLOAT: dmlcli's remainder is computed in float64 from the inputs (fmod is exact) and rounded once. How "
    "DirectML computes it is not documented (Releases 1.10.0 fixed a MODULUS precision issue on some GPUs, "
    "reference §C row 9); a float evaluation of the formula loses the remainder for large quotients (|a/b| past "
    "2^24 in FLOAT32), beyond any ULP tolerance, so the tolerance is meant for moderate quotients."
)


# ---------------------------------------------------------------- NumPy kernels


def _work(x):
    """Where FLOAT16 and FLOAT32 arithmetic runs: float32 (FLOAT16 widened exactly)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _wide(x):
    """The inputs of composite operators, in float64 (exact for FLOAT16 and FLOAT32)."""
    return x.astype(np.float64)


def _all_bits_set(dtype):
    return np.invert(np.zeros((), dtype))


def scale_bias(x: np.ndarray, params) -> np.ndarray:
    """The input after the optional ScaleBias: float32 for FLOAT16/FLOAT32, float64 for FLOAT64, the
    tensor's own type for integers (see _SCALE_BIAS_INTEGER_NOTE). None: the input itself."""
    pair = params.get("ScaleBias")
    if pair is None:
        return x
    if x.dtype in (np.float16, np.float32):
        return float32_scale_bias(x, pair)
    if x.dtype == np.float64:
        scale, bias = pair
        with np.errstate(all="ignore"):
            return x * np.float64(scale) + np.float64(bias)
    return integer_scale_bias(x, pair)


def _flip_sign(x):
    sign = np.array(1 << (x.dtype.itemsize * 8 - 1), dtype=f"uint{x.dtype.itemsize * 8}")
    return (as_bits(x) ^ sign).view(x.dtype)


def _clear_sign(x):
    rest = np.array((1 << (x.dtype.itemsize * 8 - 1)) - 1, dtype=f"uint{x.dtype.itemsize * 8}")
    return (as_bits(x) & rest).view(x.dtype)


def identity(inputs, out_dtype, params):
    (x,) = inputs
    if params.get("ScaleBias") is None:
        # A copy of the bits (never the input's own buffer), C-ordered as the backend returns it: a strided input (a
        # transpose) is then copied once, where astype's default order (the input's) left a second copy to the backend.
        return x.astype(out_dtype, order="C", copy=True)
    with np.errstate(all="ignore"):
        return scale_bias(x, params).astype(out_dtype, copy=False)


def abs_(inputs, out_dtype, params):
    (x,) = inputs
    g = scale_bias(x, params)
    with np.errstate(all="ignore"):
        if g.dtype.kind == "f":
            return _clear_sign(g).astype(out_dtype, copy=False)
        return np.abs(g).astype(out_dtype, copy=False)  # abs(INT_MIN) wraps to INT_MIN


def negate(inputs, out_dtype, params):
    (x,) = inputs
    if x.dtype.kind == "f":
        return _flip_sign(x).astype(out_dtype, copy=False)
    with np.errstate(all="ignore"):
        return np.negative(x).astype(out_dtype, copy=False)  # -INT_MIN wraps to INT_MIN


def _all_plus_or_minus_one(signs: np.ndarray) -> bool:
    """Whether every element of np.sign's output is +1 or -1 (none is a zero or NaN).

    For FLOAT32 below 2^24 elements one BLAS dot product tells: the sum of the squares, 1, 0 or NaN each, is
    the element count exactly (whole numbers below 2^24 add exactly in any order) only if all are +-1.
    """
    if signs.dtype == np.float32 and signs.ndim and signs.size < (1 << 24) and signs.flags.c_contiguous:
        flat = signs.reshape(-1)
        return bool(np.dot(flat, flat) == flat.size)
    return not has_nan(signs) and not has_zero(signs, negative=False)


def sign(inputs, out_dtype, params):
    (x,) = inputs
    if x.dtype.kind != "f":
        return np.sign(x).astype(out_dtype, copy=False)
    loops = compiled_loops.active()
    signs = None if loops is None else loops.sign(x)
    if signs is None and x.flags.c_contiguous and sign_keeps_nan_bits(x.dtype):
        signs = _sign_by_parts(x)
    if signs is None:
        signs = _sign_settled(x)
    return signs.astype(out_dtype, copy=False)


# SIGN is written a part at a time and each part looked for zeros right after it is written, while the part and
# its input are still in the core's own cache (2 x 256 KiB); a check of the whole result after the pass reads it
# back from farther away.
_SIGN_PART_BYTES = 1 << 18


def _sign_by_parts(x: np.ndarray) -> np.ndarray:
    """SIGN of a C-contiguous float array where np.sign returns NaN as it is (sign_keeps_nan_bits): np.sign part by
    part. Its one departure from the rule is then -0.0, to which it gives +0.0 (the only float whose bits are 0), so
    only a part whose result holds a zero, found by one reduction of its bits, takes the input's zeros back."""
    out = np.empty(x.shape, x.dtype)
    flat, flat_x = out.reshape(-1), x.reshape(-1)
    bits = as_bits(flat)
    step = max(1, _SIGN_PART_BYTES // x.itemsize)
    smallest = np.minimum.reduce  # called directly: has_zero's checks cost a part about a microsecond
    for start in range(0, flat.size, step):
        part = flat[start:start + step]
        np.sign(flat_x[start:start + step], out=part)
        if smallest(bits[start:start + step]) == 0:
            np.copyto(part, flat_x[start:start + step], where=part == 0)
    return out


def _sign_settled(x: np.ndarray) -> np.ndarray:
    """SIGN of any float array, whatever np.sign does with NaN: np.sign, kept where one dot product shows every
    element is +-1, else each zero and NaN settled by the rule."""
    signs = np.sign(x)
    # np.sign is exact but for zeros (its zero is +0.0) and NaN (its own NaN): both show in its output, as
    # +0.0 or NaN, so that is where they are looked for.
    if _all_plus_or_minus_one(signs):
        return signs
    # +-1 by np.sign, whose zero is +0: copysign gives it x's sign. NaN is returned as it is, by its bits
    # (np.sign's own NaN may differ between NumPy's SIMD and scalar loops, so between chunks).
    signs = np.copysign(signs, x)
    nan = np.isnan(x)
    if nan.any():
        signs = np.where(nan, x, signs)
    return signs


def _binary(ufunc):
    # No errstate of its own: the backend runs every cpu_kernel under np.errstate(all="ignore") (backends/cpu.py:
    # execute, execute_chunks, and the callers of `elementwise`), and entering one costs a call of a few thousand
    # values about as much as the operation itself (more once NumPy's code is out of the caches).
    def kernel(inputs, out_dtype, params):
        a, b = inputs
        if a.dtype.kind == "f":
            return ufunc(_work(a), _work(b)).astype(out_dtype, copy=False)
        return ufunc(a, b).astype(out_dtype, copy=False)  # wraps modulo 2^width

    kernel.__name__ = ufunc.__name__
    return kernel


add = _binary(np.add)
subtract = _binary(np.subtract)
multiply = _binary(np.multiply)


def _integer_division(a, b):
    """(truncated quotient, remainder with the dividend's sign, b == 0, the divisor used) for integer arrays.

    Zero divisors and INT_MIN / -1 are replaced by 1: INT_MIN / 1 is the wrapped INT_MIN / -1 and the
    remainder 0 is right for both; callers overwrite the zero-divisor results.
    """
    zero = b == 0
    unsafe = zero
    if a.dtype.kind == "i":
        unsafe = zero | ((a == np.iinfo(a.dtype).min) & (b == -1))
    divisor = np.where(unsafe, np.ones_like(b), b)
    with np.errstate(all="ignore"):
        remainder = np.fmod(a, divisor)  # C's %: truncated, the sign of the dividend
        quotient = (a - remainder) // divisor  # an exact division
    return quotient, remainder, zero, divisor


def divide(inputs, out_dtype, params):
    a, b = inputs
    if a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return np.divide(_work(a), _work(b)).astype(out_dtype, copy=False)
    quotient, _, zero, _ = _integer_division(a, b)
    return np.where(zero, _all_bits_set(a.dtype), quotient).astype(out_dtype, copy=False)


def mean(inputs, out_dtype, params):
    a, b = inputs
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            return ((_wide(a) + _wide(b)) * 0.5).astype(out_dtype, copy=False)
        # floor((a + b) / 2) without overflow; >> is arithmetic for signed types.
        return ((a >> 1) + (b >> 1) + (a & b & 1)).astype(out_dtype, copy=False)


def difference_square(inputs, out_dtype, params):
    a, b = inputs
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            difference = _wide(a) - _wide(b)
            return (difference * difference).astype(out_dtype, copy=False)
        difference = a - b
        return (difference * difference).astype(out_dtype, copy=False)


def modulus_truncate(inputs, out_dtype, params):
    a, b = inputs
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            return np.fmod(_wide(a), _wide(b)).astype(out_dtype, copy=False)
    _, remainder, zero, _ = _integer_division(a, b)
    return np.where(zero, _all_bits_set(a.dtype), remainder).astype(out_dtype, copy=False)


def modulus_floor(inputs, out_dtype, params):
    a, b = inputs
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            x, y = _wide(a), _wide(b)
            if remainder_is_floor_modulus():  # the rule below in one pass (1.8x -> about 1x np.mod's time)
                r = np.remainder(x, y)
                if not has_nan(r):  # which NaN comes out of two NaN operands is not the rule's there
                    return r.astype(out_dtype, copy=False)
            return _floor_modulus(x, y).astype(out_dtype, copy=False)
        _, r, zero, divisor = _integer_division(a, b)
        r = np.where((r != 0) & ((r < 0) != (divisor < 0)), r + divisor, r)  # opposite signs: no overflow
    return np.where(zero, _all_bits_set(a.dtype), r).astype(out_dtype, copy=False)


def _floor_modulus(x, y):
    """MODULUS_FLOOR's float rule in float64: fmod, then the divisor added where the remainder's sign is not the
    divisor's, and a zero remainder given the divisor's sign (NaN and infinities through the same arithmetic)."""
    with np.errstate(all="ignore"):
        r = np.fmod(x, y)
        # Each fix-up only where some element needs it: np.where over a whole tensor costs several passes.
        wrong_side = (r != 0) & ((r < 0) != (y < 0))
        if wrong_side.any():
            r = np.where(wrong_side, r + y, r)
        zero = r == 0
        if zero.any():
            r = np.where(zero, np.copysign(0.0, y), r)
        return r


@functools.lru_cache(maxsize=None)
def remainder_is_floor_modulus() -> bool:
    """Whether np.remainder on float64 gives _floor_modulus's bits wherever that is not NaN, and NaN where it is:
    NumPy's npy_remainder is that very rule (fmod, + y on the wrong side, copysign(0, y) for a zero; NaN for a
    zero divisor), but does not promise it (of two NaN operands it may return the other's bits: the kernel takes
    the rule itself for a result that holds a NaN). Asked once, on every pair of special and ordinary values
    (NaN payloads of both signs, zeros, infinities, subnormals), in arrays long enough for any vector loop, at
    two offsets."""
    specials = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -7.0, 0.1, -1e300, 1e300, 5e-324, -5e-324, np.inf,
                         -np.inf, np.nan, -np.nan, 1e-310, 7.0e15, -3.0e-5])
    bits = specials.view(np.uint64).copy()
    bits[-5] |= 12345  # a NaN payload
    specials = bits.view(np.float64)
    x, y = (part.reshape(-1) for part in np.meshgrid(specials, specials))
    for offset in (0, 1):
        first, second = np.resize(x, 2048 + offset)[offset:], np.resize(y, 2048 + offset)[offset:]
        with np.errstate(all="ignore"):
            found = np.remainder(first, second)
        expected = _floor_modulus(first, second)
        numbers = ~np.isnan(expected)
        if not (np.array_equal(np.isnan(found), ~numbers)
                and np.array_equal(found[numbers].view(np.uint64), expected[numbers].view(np.uint64))):
            return False
    return True


def recip(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return (np.float32(1) / _work(scale_bias(x, params))).astype(out_dtype, copy=False)


def sqrt(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return np.sqrt(_work(scale_bias(x, params))).astype(out_dtype, copy=False)


# ---------------------------------------------------------------- CUDA helpers
#
# Each operator's module holds its own helpers, named dml_<operator>_*. Overloads take dml_f32
# (FLOAT32, FLOAT16), double (FLOAT64) and, as templates, every integer type. Integer arithmetic runs
# in unsigned long long (wrapping, no signed-overflow UB) and is cast back to the type. Float <-> double
# conversions are inline PTX without .ftz: CuPy compiles with -ftz=true, under which a compiler-made
# float -> double or double -> float conversion may flush float32 subnormals. Double arithmetic uses
# the __d*_rn intrinsics, which the compiler never contracts into an FMA.


def _float64_helpers(p: str) -> str:
    return f"""
__device__ __forceinline__ double {p}_widen(float x) {{ return dml_widen(x); }}
__device__ __forceinline__ double {p}_widen(dml_f32 x) {{ return dml_widen(x.v); }}
// A float64 value rounded once to the output type (w = 16: FLOAT16, else FLOAT32), as a float that the
// kernel stores unchanged.
__device__ __forceinline__ dml_f32 {p}_round(double v, int w) {{ return dml_f32{{dml_round_to_output(v, w)}}; }}
"""


def _scale_bias_helpers(p: str) -> str:
    return _float64_helpers(p) + cuda_scale_bias_helpers(p)


def _negative_helpers(p: str) -> str:
    """{p}_negative(x): x < 0, written so that no unsigned type compares with zero (a compiler warning)."""
    unsigned = "".join(f"__device__ __forceinline__ bool {p}_negative({t}) {{ return false; }}\n"
                       for t in ("unsigned char", "unsigned short", "unsigned int", "unsigned long long"))
    return f"""
template <typename T>
__device__ __forceinline__ bool {p}_negative(T x) {{ return x < (T)0; }}
{unsigned}"""


def _wrapping_helpers(p: str, symbol: str) -> str:
    return f"""
template <typename T>
__device__ __forceinline__ T {p}_apply(T a, T b) {{
    return (T)((unsigned long long)a {symbol} (unsigned long long)b);
}}
__device__ __forceinline__ dml_f32 {p}_apply(dml_f32 a, dml_f32 b) {{ return a {symbol} b; }}
"""


_ABS_HELPERS = _scale_bias_helpers("dml_abs") + """
__device__ __forceinline__ dml_f32 dml_abs_apply(dml_f32 x) {
    return dml_f32{__uint_as_float(__float_as_uint(x.v) & 0x7fffffffu)};
}
template <typename T>
__device__ __forceinline__ T dml_abs_apply(T x) { return x < (T)0 ? (T)(0ull - (unsigned long long)x) : x; }
"""

_NEGATE_HELPERS = """
__device__ __forceinline__ dml_f32 dml_negate_apply(dml_f32 x) { return -x; }
template <typename T>
__device__ __forceinline__ T dml_negate_apply(T x) { return (T)(0ull - (unsigned long long)x); }
"""

_SIGN_HELPERS = _negative_helpers("dml_sign") + """
__device__ __forceinline__ dml_f32 dml_sign_apply(dml_f32 x) {
    return x > 0 ? dml_f32{1.0f} : (x < 0 ? dml_f32{-1.0f} : x);
}
template <typename T>
__device__ __forceinline__ T dml_sign_apply(T x) { return x > (T)0 ? (T)1 : (dml_sign_negative(x) ? (T)-1 : (T)0); }
"""

_DIVIDE_HELPERS = """
template <typename T>
__device__ __forceinline__ T dml_divide_apply(T a, T b) {
    if (b == (T)0) return (T)~0ull;
    if ((T)-1 < (T)0 && b == (T)-1) return (T)(0ull - (unsigned long long)a);
    return (T)(a / b);
}
__device__ __forceinline__ dml_f32 dml_divide_apply(dml_f32 a, dml_f32 b) { return a / b; }
"""

_MEAN_HELPERS = _float64_helpers("dml_mean") + """
__device__ __forceinline__ dml_f32 dml_mean_apply(dml_f32 a, dml_f32 b, int w) {
    return dml_mean_round(__dmul_rn(__dadd_rn(dml_mean_widen(a), dml_mean_widen(b)), 0.5), w);
}
template <typename T>
__device__ __forceinline__ T dml_mean_apply(T a, T b, int w) { return (T)((a >> 1) + (b >> 1) + (a & b & 1)); }
"""

_DIFFERENCE_SQUARE_HELPERS = _float64_helpers("dml_difference_square") + """
__device__ __forceinline__ dml_f32 dml_difference_square_apply(dml_f32 a, dml_f32 b, int w) {
    const double d = __dsub_rn(dml_difference_square_widen(a), dml_difference_square_widen(b));
    return dml_difference_square_round(__dmul_rn(d, d), w);
}
template <typename T>
__device__ __forceinline__ T dml_difference_square_apply(T a, T b, int w) {
    const unsigned long long d = (unsigned long long)a - (unsigned long long)b;
    return (T)(d * d);
}
"""

_MODULUS_TRUNCATE_HELPERS = _float64_helpers("dml_modulus_truncate") + """
__device__ __forceinline__ dml_f32 dml_modulus_truncate_apply(dml_f32 a, dml_f32 b, int w) {
    return dml_modulus_truncate_round(fmod(dml_modulus_truncate_widen(a), dml_modulus_truncate_widen(b)), w);
}
template <typename T>
__device__ __forceinline__ T dml_modulus_truncate_apply(T a, T b, int w) {
    if (b == (T)0) return (T)~0ull;
    if ((T)-1 < (T)0 && b == (T)-1) return (T)0;
    return (T)(a % b);
}
"""

_MODULUS_FLOOR_HELPERS = _float64_helpers("dml_modulus_floor") + _negative_helpers("dml_modulus_floor") + """
__device__ __forceinline__ dml_f32 dml_modulus_floor_apply(dml_f32 a, dml_f32 b, int w) {
    const double x = dml_modulus_floor_widen(a), y = dml_modulus_floor_widen(b);
    double r = fmod(x, y);
    if (r != 0.0) {
        if ((r < 0.0) != (y < 0.0)) r = __dadd_rn(r, y);
    } else {
        r = copysign(0.0, y);
    }
    return dml_modulus_floor_round(r, w);
}
template <typename T>
__device__ __forceinline__ T dml_modulus_floor_apply(T a, T b, int w) {
    if (b == (T)0) return (T)~0ull;
    if ((T)-1 < (T)0 && b == (T)-1) return (T)0;
    T r = (T)(a % b);
    if (r != (T)0 && dml_modulus_floor_negative(r) != dml_modulus_floor_negative(b)) r = (T)(r + b);
    return r;
}
"""


# ---------------------------------------------------------------- entries


def _binary_one_rounding(name, enum_value, symbol, word, support, kernel, webnn, ulp, notes=()):
    p = f"dml_{name.lower()}"
    return Operator(
        name=name, enum_value=enum_value, family="arithmetic",
        summary=f"The {word} of each pair of corresponding elements of ATensor and BTensor.",
        formula=f"f(a, b) = a {symbol} b", introduced=support[-1].level, inputs=AB, support=support,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=kernel, cuda_body=f"{p}_apply(a, b)",
        cuda_helpers=_wrapping_helpers(p, symbol), in_place=True, exactness=ONE_ROUNDING,
        tolerance=Tolerance(kind="ulp", float32=ulp, float16=ulp,
                            source=f"WebNN conformance (reference §C row 7: {webnn} {ulp} ULP), for comparing with "
                                   "DirectML hardware; dmlcli itself is correctly rounded"),
        notes=(_ONE_ROUNDING_NOTE, _WRAP_NOTE) + tuple(notes),
    )


_TWO_ULP_CHOICE = ("dmlcli's choice (WebNN lists no figure): 2 ULP, as WebNN allows its two-step operations "
                   "(div, reciprocal, linear)")
_LARGE_QUOTIENTS = _TWO_ULP_CHOICE + "; see the notes on large quotients"

OPERATORS: tuple[Operator, ...] = (
    Operator(
        name="IDENTITY", enum_value=1, family="arithmetic",
        summary="Copies each element (after the optional ScaleBias).",
        formula="f(x) = x   (with ScaleBias: x*Scale + Bias)", introduced=level("1_0"), inputs=X,
        support=_IDENTITY, same_data_type=XO, same_sizes=XO, parameters=(SCALE_BIAS,), cpu_kernel=identity,
        cuda_body="dml_identity_scale_bias(x, HasScaleBias, Scale, Bias)",
        cuda_helpers=_scale_bias_helpers("dml_identity"), in_place=True, exactness=EXACT, moves_input=X[0],
        notes=(
            "Without ScaleBias the output is a bit-for-bit copy: NaN payloads, -0.0 and FLOAT64 values kept.",
            _SCALE_BIAS_NOTE,
            "FLOAT64 (4_1) with ScaleBias: x*Scale + Bias in float64 (Scale and Bias widened exactly), two "
            "float64 roundings; DirectML has no FLOAT64 math elsewhere (reference §B2), so this is dmlcli's choice.",
            _SCALE_BIAS_INTEGER_NOTE,
        ),
    ),
    Operator(
        name="ABS", enum_value=2, family="arithmetic",
        summary="The absolute value of each element (after the optional ScaleBias).",
        formula="f(x) = abs(x)   (with ScaleBias: abs(x*Scale + Bias))", introduced=level("1_0"), inputs=X,
        support=_ABS, same_data_type=XO, same_sizes=XO, parameters=(SCALE_BIAS,), cpu_kernel=abs_,
        cuda_body="dml_abs_apply(dml_abs_scale_bias(x, HasScaleBias, Scale, Bias))",
        cuda_helpers=_ABS_HELPERS, in_place=True, exactness=EXACT,
        notes=(
            "FLOAT: clears the sign bit only (NaN too, payload kept); exact without ScaleBias.",
            "ABS of INT_MIN wraps to INT_MIN (two's complement, as NumPy and C); DirectML's page is silent.",
            _SCALE_BIAS_NOTE,
            _SCALE_BIAS_INTEGER_NOTE,
        ),
    ),
    _binary_one_rounding("ADD", 4, "+", "sum", _ADD, add, "add", 1, notes=(
        "8- and 16-bit integers only from 5_1: an older ADD page listed them at 3_0; the current page and the "
        "feature-level history say 5_1 (reference §D4).",
    )),
    _binary_one_rounding("SUBTRACT", 30, "-", "difference", _SUBTRACT, subtract, "sub", 1, notes=(
        "The page's 2_1 and 1_0 rows allow exactly 4 dimensions, where ADD and MULTIPLY allow 4 to 5: "
        "transcribed as printed (reference §D8).",
    )),
    _binary_one_rounding("MULTIPLY", 24, "*", "product", _MULTIPLY, multiply, "mul", 1),
    Operator(
        name="DIVIDE", enum_value=10, family="arithmetic",
        summary="ATensor divided by BTensor, element by element; integer quotients truncated toward zero.",
        formula="f(a, b) = a / b   (integers: truncated toward zero)", introduced=level("1_0"), inputs=AB,
        support=_DIVIDE, same_data_type=ABO, same_sizes=ABO, cpu_kernel=divide, cuda_body="dml_divide_apply(a, b)",
        cuda_helpers=_DIVIDE_HELPERS, in_place=True, exactness=ONE_ROUNDING,
        tolerance=Tolerance(kind="ulp", float32=2, float16=2,
                            source="WebNN conformance (reference §C row 7: div 2 ULP), for comparing with DirectML "
                                   "hardware; dmlcli itself is correctly rounded"),
        notes=(
            _ONE_ROUNDING_NOTE,
            "Integer division truncates toward zero (the page: 'For integer divisions, the result is truncated').",
            _DIVISION_BY_ZERO_NOTE,
        ),
    ),
    Operator(
        name="MEAN", enum_value=22, family="arithmetic",
        summary="The mean of each pair of corresponding elements of ATensor and BTensor.",
        formula="f(a, b) = (a + b) / 2   (integers: rounded toward negative infinity)", introduced=level("1_0"),
        inputs=AB, support=_MEAN, same_data_type=ABO, same_sizes=ABO, cpu_kernel=mean,
        cuda_body="dml_mean_apply(a, b, W)", cuda_helpers=_MEAN_HELPERS, in_place=True, exactness=COMPOSITE,
        tolerance=Tolerance(kind="ulp", float32=2, float16=2,
                            source=_TWO_ULP_CHOICE + "; dmlcli's own result is the correctly rounded mean"),
        notes=(
            "FLOAT: (a + b) * 0.5 in float64 from the inputs, rounded once to the output type: the correctly "
            "rounded mean, and no overflow for large finite inputs (the mean of FLT_MAX and FLT_MAX is FLT_MAX). "
            "DirectML may compute (a + b) / 2 in float32 (two roundings, overflow to inf): hence the tolerance.",
            "DirectML does not state how an integer mean is rounded. dmlcli rounds toward negative infinity, "
            "floor((a + b) / 2), computed without overflow as (a >> 1) + (b >> 1) + (a & b & 1) (arithmetic "
            "shift for INT32), on both backends: the mean of -1 and 0 is -1, of 1 and 2 is 1.",
        ),
    ),
    Operator(
        name="DIFFERENCE_SQUARE", enum_value=143, family="arithmetic",
        summary="The square of the difference of each pair of corresponding elements of ATensor and BTensor.",
        formula="f(a, b) = (a - b) * (a - b)", introduced=level("3_1"), inputs=AB, support=_DIFFERENCE_SQUARE,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=difference_square,
        cuda_body="dml_difference_square_apply(a, b, W)", cuda_helpers=_DIFFERENCE_SQUARE_HELPERS, in_place=True,
        exactness=COMPOSITE,
        tolerance=Tolerance(kind="ulp", float32=2, float16=2,
                            source="dmlcli's choice (WebNN lists no figure): a float32 (a-b)*(a-b) rounds twice, at "
                                   "most 1.5 ULP from the exact square; 2 ULP, as WebNN's two-step operations"),
        notes=(
            "FLOAT: d = a - b and d * d in float64 from the inputs, then rounded once to the output type "
            "(the float64 steps may round too, far below the output's precision).",
            "INT32/UINT32: (a - b) * (a - b) modulo 2^32 (wrapping like MULTIPLY), which is the square of the true "
            "difference modulo 2^32 for UINT32 too.",
        ),
    ),
    Operator(
        name="MODULUS_FLOOR", enum_value=102, family="arithmetic",
        summary="The remainder of ATensor divided by BTensor with the divisor's sign (Python's %).",
        formula="f(a, b) = a - b * floor(a / b)", introduced=level("2_1"), inputs=AB, support=_MODULUS,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=modulus_floor, cuda_body="dml_modulus_floor_apply(a, b, W)",
        cuda_helpers=_MODULUS_FLOOR_HELPERS, in_place=True, exactness=COMPOSITE,
        tolerance=Tolerance(kind="ulp", float32=2, float16=2, source=_LARGE_QUOTIENTS),
        notes=(
            "FLOAT: r = fmod(a, b); where r is nonzero and its sign differs from b's, r + b (one rounding); a zero "
            "result takes the divisor's sign, as in Python and NumPy. So finite a mod +-inf is a, or +-inf where "
            "a and b have opposite signs (Python's -5.0 % inf is inf).",
            "Integers: the remainder of floored division (exact), the sign of the divisor; UINT: as MODULUS_TRUNCATE.",
            _MODULUS_BY_ZERO_NOTE,
            _MODULUS_PRECISION_NOTE,
        ),
    ),
    Operator(
        name="MODULUS_TRUNCATE", enum_value=101, family="arithmetic",
        summary="The remainder of ATensor divided by BTensor with the dividend's sign (C's fmod and %).",
        formula="f(a, b) = a - b * trunc(a / b)", introduced=level("2_1"), inputs=AB, support=_MODULUS,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=modulus_truncate,
        cuda_body="dml_modulus_truncate_apply(a, b, W)", cuda_helpers=_MODULUS_TRUNCATE_HELPERS, in_place=True,
        exactness=COMPOSITE,
        tolerance=Tolerance(kind="ulp", float32=2, float16=2, source=_LARGE_QUOTIENTS),
        notes=(
            "FLOAT: C's fmod, exact (the remainder is representable in the input's type); the result, zero "
            "included, has the dividend's sign: fmod(-4, 2) is -0.0; finite a mod +-inf is a.",
            "Integers: the remainder of truncating division (C's %), exact, the sign of the dividend.",
            _MODULUS_BY_ZERO_NOTE,
            _MODULUS_PRECISION_NOTE,
        ),
    ),
    Operator(
        name="RECIP", enum_value=27, family="arithmetic",
        summary="The reciprocal of each element (after the optional ScaleBias).",
        formula="f(x) = 1 / x   (with ScaleBias: 1 / (x*Scale + Bias))", introduced=level("1_0"), inputs=X,
        support=_FLOAT_UNARY, same_data_type=XO, same_sizes=XO, parameters=(SCALE_BIAS,), cpu_kernel=recip,
        cuda_body="1.0f / dml_recip_scale_bias(x, HasScaleBias, Scale, Bias)",
        cuda_helpers=_scale_bias_helpers("dml_recip"), in_place=True, exactness=ONE_ROUNDING,
        tolerance=Tolerance(kind="ulp", float32=2, float16=2,
                            source="WebNN conformance (reference §C row 7: reciprocal 2 ULP), for comparing with "
                                   "DirectML hardware; dmlcli itself is correctly rounded"),
        notes=(_ONE_ROUNDING_NOTE, "1/+-0 = +-inf, 1/+-inf = +-0 (IEEE).", _SCALE_BIAS_NOTE),
    ),
    Operator(
        name="SQRT", enum_value=29, family="arithmetic",
        summary="The square root of each element (after the optional ScaleBias).",
        formula="f(x) = sqrt(x)   (with ScaleBias: sqrt(x*Scale + Bias))", introduced=level("1_0"), inputs=X,
        support=_FLOAT_UNARY, same_data_type=XO, same_sizes=XO, parameters=(SCALE_BIAS,), cpu_kernel=sqrt,
        cuda_body="dml_sqrt(dml_sqrt_scale_bias(x, HasScaleBias, Scale, Bias))",
        cuda_helpers=_scale_bias_helpers("dml_sqrt"), in_place=True, exactness=ONE_ROUNDING,
        tolerance=Tolerance(kind="ulp", float32=1, float16=1,
                            source="WebNN conformance (reference §C row 7: sqrt 1 ULP), for comparing with DirectML "
                                   "hardware; dmlcli itself is correctly rounded"),
        notes=(_ONE_ROUNDING_NOTE, "sqrt(-0.0) = -0.0, sqrt of a negative number is NaN (IEEE).", _SCALE_BIAS_NOTE),
    ),
    Operator(
        name="NEGATE", enum_value=156, family="arithmetic",
        summary="The negation of each element.",
        formula="f(x) = -x", introduced=level("5_0"), inputs=X, support=_NEGATE, same_data_type=XO,
        same_sizes=XO, cpu_kernel=negate, cuda_body="dml_negate_apply(x)", cuda_helpers=_NEGATE_HELPERS,
        in_place=True, exactness=EXACT,
        notes=(
            "FLOAT: flips the sign bit only (NaN and +-0 too); exact.",
            "-INT_MIN wraps to INT_MIN (two's complement, as NumPy and C); DirectML's page is silent.",
        ),
    ),
    Operator(
        name="SIGN", enum_value=79, family="arithmetic",
        summary="-1, 0 or +1 by the sign of each element, in the input's data type.",
        formula="f(x) = x > 0 ? 1 : (x < 0 ? -1 : 0)", introduced=level("2_0"), inputs=X, support=_SIGN,
        same_data_type=XO, same_sizes=XO, cpu_kernel=sign, cuda_body="dml_sign_apply(x)",
        cuda_helpers=_SIGN_HELPERS, in_place=True, exactness=EXACT,
        notes=(
            "DirectML's page is silent on zero's sign and on NaN. dmlcli keeps the input's own zero "
            "(SIGN(-0.0) = -0.0, as IEEE copysign-style functions do) and gives NaN for NaN (the input's NaN).",
            "Unsigned types give 0 or 1.",
        ),
    ),
)
