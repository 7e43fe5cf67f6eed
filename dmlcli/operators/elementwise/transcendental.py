"""The trigonometric, hyperbolic, exponential and power functions and ERF: ACOS, ASIN, ATAN, ATAN_YX, COS,
SIN, TAN, EXP, LOG, ERF, SINH, COSH, TANH, ASINH, ACOSH, ATANH, POW, CONSTANT_POW: entries and kernels.

Sources: ../shared/reference/directml_elementwise.md (B2 for the operators and support tables, B4 for
which take ScaleBias, C row 7 for WebNN's tolerances). None of these results is defined by IEEE-754,
so both backends compute in double precision and round once to the output type; DirectML's own
kernels (float32 or float16 HLSL) are held to the operator's tolerance, not to these bits.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ...data_types import FLOATS, TYPES_8
from ...feature_levels import level
from ..numerics.conversions import float_to_integer
from ..table.parameters import FloatParameter, ScaleBiasParameter
from ..numerics.scale_bias import float32_scale_bias, integer_scale_bias
from ..table.schema import APPROXIMATE, DIMS_1_TO_8, DIMS_4, Operator, Tolerance, rows

X = ("InputTensor",)
XO = ("InputTensor", "OutputTensor")
AB = ("ATensor", "BTensor")
ABO = ("ATensor", "BTensor", "OutputTensor")
POW_INPUTS = ("InputTensor", "ExponentTensor")
POW_TENSORS = ("InputTensor", "ExponentTensor", "OutputTensor")

SCALE_BIAS = ScaleBiasParameter(
    field="ScaleBias",
    help="optional {Scale, Bias} applied to the input first: x*Scale + Bias in FLOAT32",
)
EXPONENT = FloatParameter(
    field="Exponent",
    help="the power every element is raised to (FLOAT32)",
    default_value=1.0,
)


def _same(types, *tensors):
    return {name: types for name in tensors}


# Support rows (B2), newest first. Rows below 3_0 are 4 dimensions exactly for all of these operators.
_UNARY_1_0 = rows(("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)), ("1_0", DIMS_4, _same(FLOATS, *XO)))
_UNARY_2_0 = rows(("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)), ("2_0", DIMS_4, _same(FLOATS, *XO)))
_ATAN_YX = rows(("3_1", DIMS_1_TO_8, _same(FLOATS, *ABO)))
_POW = rows(
    ("3_0", DIMS_1_TO_8, _same(TYPES_8, *POW_TENSORS)),
    ("1_0", DIMS_4, _same(FLOATS, *POW_TENSORS), POW_TENSORS),  # "Until 3_0 ExponentTensor must match"
)
_CONSTANT_POW = _UNARY_1_0

# ---------------------------------------------------------------- tolerances (C row 7)

_WEBNN = "WebNN conformance tolerance (directml_elementwise.md section C row 7)"
_TRIG_ATOL = Tolerance("atol", 1 / 1024, 1 / 512, _WEBNN)
_LOG_ATOL = Tolerance("atol", 1 / 1024, 1 / 1024, _WEBNN)
_EXP_ULP = Tolerance("ulp", 32, 1, _WEBNN)
_POW_ULP = Tolerance("ulp", 32, 2, _WEBNN)
_INVERSE_TRIG = Tolerance(
    "atol", 1 / 1024, 1 / 512,
    "dmlcli's choice; WebNN lists none: the figure WebNN gives cos, sin and tan, for results bounded by pi")
_HYPERBOLIC = Tolerance(
    "ulp", 32, 2,
    "dmlcli's choice; WebNN lists none: WebNN's exp figure for FLOAT32 (sinh and cosh are sums of two "
    "exponentials), widened to pow's 2 ULP for FLOAT16")
_INVERSE_HYPERBOLIC = Tolerance(
    "atol", 1 / 1024, 1 / 128,
    "dmlcli's choice; WebNN lists none: WebNN's log figure for FLOAT32 (these are logarithms of algebraic "
    "expressions); for FLOAT16 1/128, one FLOAT16 ULP at the largest results (|asinh|, acosh <= 11.8)")
_SINH = Tolerance(
    "ulp", 32, 2, _HYPERBOLIC.source, floor_float32=2.0 ** -23, floor_float16=2.0 ** -10,
    floor_source="(e^x - e^-x)/2 near x = 0: each exponential rounded near 1 errs by up to an ULP of 1 (2^-23 "
                 "FLOAT32, 2^-10 FLOAT16), which the difference keeps in full while the true result goes to 0")
_CONSTANT_POW_ULP = Tolerance(
    "ulp", 32, 2, "dmlcli's choice; WebNN lists none: WebNN's pow figure, as CONSTANT_POW is POW with one exponent")

# ---------------------------------------------------------------- notes

_DOUBLE = ("dmlcli computes in double precision from the (scaled) input and rounds once to the output type, "
           "on the CPU and the GPU alike; DirectML's kernels compute in FLOAT32 or FLOAT16, so a result from "
           "Windows may differ within the tolerance.")
_POW_EVALUATION = ("The CPU computes in double precision and rounds once. On the GPU a float base with a float "
                   "exponent is 2^(y log2 x), y log2 x carried in two floats and 2^r by the GPU's exponential unit "
                   "(within about 3 ULP of FLOAT32) where the base is a positive normal float and the result one too; "
                   "else CUDA's powf (at most 4 ULP), or double where the base or the exponent is subnormal (as the "
                   "CPU); all within the 32 ULP tolerance. Integer exponents and integer bases are computed in double "
                   "(exactly where the result is an integer).")
_SCALE_BIAS_NOTE = ("ScaleBias, when given, is applied to the input first as x*Scale + Bias in FLOAT32: the "
                    "product and the sum are each rounded to FLOAT32 (never fused), for FLOAT16 tensors too "
                    "(the scaled value is not rounded to FLOAT16). Without it the input is used as it is, "
                    "bit for bit (-0.0 stays -0.0).")
_IEEE_SPECIALS = ("DirectML's page gives no special values; dmlcli gives C99/IEEE-754's (NaN in, NaN out; "
                  "results past the largest finite value are infinities; FLOAT32 subnormals are values, not "
                  "zeros: --float-rules d3d flushes them as Direct3D does).")


def _domain(text: str) -> str:
    return f"Outside the domain the result is NaN, as in C: {text}."


# ---------------------------------------------------------------- NumPy kernels


def _scaled(x: np.ndarray, scale_bias) -> np.ndarray:
    """ScaleBias applied to a float input: x*Scale, then + Bias, each rounded to FLOAT32."""
    return x if scale_bias is None else float32_scale_bias(x, scale_bias)


def _to_float_result(values: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(values, dtype=np.float64).astype(out_dtype, copy=False)


def _unary_kernel(function, name: str, rounded=None):
    """The kernel of a unary function of float64 values, rounded once to the output type; `rounded(wide,
    out_dtype)`, where given, gives those bits itself (ERF's, sooner)."""
    def kernel(inputs, out_dtype, params):
        (x,) = inputs
        wide = _scaled(x, params.get("ScaleBias")).astype(np.float64)
        with np.errstate(all="ignore"):
            if rounded is not None:
                return rounded(wide, np.dtype(out_dtype))
            return _to_float_result(function(wide), out_dtype)

    kernel.__name__ = name
    return kernel


_TWO_OVER_SQRT_PI = 1.1283791670955126  # 2/sqrt(pi), correctly rounded to double
# Past this |x| the FLOAT32 (and FLOAT16) result is +-1 exactly: erfc(4) = 1.5e-8 is below half a
# FLOAT32 ULP under 1 (2^-25 = 3.0e-8), so every |x| >= 4 rounds to +-1.
_ERF_SATURATES = 4.0


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in double precision for |x| < 4 (NumPy has none), +-1 beyond, NaN for NaN.

    erf(x) = 2/sqrt(pi) * exp(-x^2) * sum_n x * (2x^2)^n / (1*3*5*...*(2n+1)): every term is
    positive (no cancellation), so the sum is good to a few double ULP, far below FLOAT32's.
    """
    with np.errstate(all="ignore"):
        magnitude = np.abs(x)
        inside = np.where(magnitude < _ERF_SATURATES, x, 0.0)  # NaN, inf and |x| >= 4 take the closed form
        square = inside * inside
        total = _erf_series(inside.reshape(-1), square.reshape(-1)).reshape(inside.shape)
        series = _TWO_OVER_SQRT_PI * np.exp(-square) * total
        return np.where(np.isnan(x), x, np.where(magnitude < _ERF_SATURATES, series, np.copysign(1.0, x)))


def _erf_series(flat: np.ndarray, square: np.ndarray) -> np.ndarray:
    """sum_n x * (2x^2)^n / (1*3*5*...*(2n+1)) for each element of a flat float64 array, each summed until its own
    terms fall below 2^-60 of its sum (at most about 90 terms, |x| just under 4; a few for |x| near 0). Every
    fourth term the elements whose sums are done are left out of the rest of the work, so a tensor of mostly small
    values costs the terms those need, not the terms of its largest value."""
    factor = 2.0 * square
    term, total = flat.copy(), flat.copy()
    active = None  # the positions still summing (None: every one)
    n = 0
    while True:
        n += 1
        term *= factor
        term /= 2 * n + 1
        if active is None:
            total += term
        else:
            total[active] += term
        if n % 4:
            continue
        sums = total if active is None else total[active]
        going = np.abs(term) > np.abs(sums) * 2.0**-60
        if not going.any():
            return total
        if 2 * np.count_nonzero(going) < going.size:
            active = np.flatnonzero(going) if active is None else active[going]
            term, factor = term[going], factor[going]


def _erf_series_of(x: float) -> float:
    """_erf_series for one element, in Python's floats (IEEE doubles, the same operations in the same order): an
    element's sum is its own, whatever the others are (the terms _erf_series adds after an element's own stop are
    below half an ULP of its sum, so they change nothing)."""
    factor = 2.0 * (x * x)
    term = total = x
    n = 0
    while True:
        n += 1
        term *= factor
        term /= 2 * n + 1
        total += term
        if n % 4 == 0 and not abs(term) > abs(total) * 2.0**-60:
            return total


def _double_factorial_reciprocals(count: int) -> list[float]:
    """1 / (1 * 3 * 5 * ... * (2n + 1)) for n = 0 .. count - 1, each correctly rounded to double."""
    values, product = [], 1
    for n in range(count):
        product *= 2 * n + 1
        values.append(float(Fraction(1, product)))
    return values


def _erf_tail(y: float, degree: int) -> float:
    """A bound on sum_{n > degree} y^n / (2n+1)!! (the terms fall by y / (2n+3) each: a geometric bound), relative
    to the sum from n = 0, which is at least 1."""
    ratio = y / (2 * degree + 5)
    if ratio >= 1:
        return math.inf
    return float(Fraction(1, math.prod(range(1, 2 * degree + 4, 2)))) * y ** (degree + 1) / (1 - ratio)


# The series' sum in y = 2x^2 by Horner's rule: every element at the degree of the first band (y <= 0.5), then the
# elements past it again at the degree of the largest y there (y < 32: |x| < 4). A degree is the least whose tail
# is below 2^-46 of the sum at a grid point at or above the y it serves (the tail grows with y): most of a network's
# activations lie in the first band, and the rest near it, at degrees a fraction of the largest's.
_ERF_FIRST_BAND = 0.5
_ERF_GRID = 0.25  # the grid of y on which degrees are worked out (y <= 32: 128 points)
_ERF_DEGREES_MOST = 65  # the degree at y = 32 (_erf_degree(32.0))
_ERF_COEFFICIENTS = _double_factorial_reciprocals(_ERF_DEGREES_MOST + 1)
# Relative distance within which the Horner result and _erf_series's lie: each sums the same positive terms of
# the same factor y, with at most (2 x 128 + 128) roundings in the series (at most 128 terms, each made by 2n
# roundings) and 2 x 128 + 2 in Horner's rule and the products by x and the scale: 650 ULP of double at most
# (2^-43.6), and the truncations (2^-46 here, 2^-59 in the series). 2^-40 leaves a factor of 10.
_ERF_APART = 2.0**-40


def _horner(y: np.ndarray, degree: int) -> np.ndarray:
    """sum_{n <= degree} y^n / (2n+1)!! by Horner's rule: ((c_d y + c_{d-1}) y + ...) y + c_0."""
    total = y * _ERF_COEFFICIENTS[degree]
    for coefficient in _ERF_COEFFICIENTS[degree - 1:0:-1]:
        total += coefficient
        total *= y
    total += _ERF_COEFFICIENTS[0]
    return total


@functools.lru_cache(maxsize=None)
def _erf_grid_degree(point: int) -> int:
    """The least degree whose tail is below 2^-46 of the sum at y = point x _ERF_GRID."""
    return next(n for n in range(1, 200) if _erf_tail(point * _ERF_GRID, n) <= 2.0**-46)


def _erf_degree(y: float) -> int:
    """The degree that sums every y' <= y to within 2^-46: the degree of the grid point at or above y."""
    return _erf_grid_degree(max(1, math.ceil(y / _ERF_GRID)))


def _erf_horner(square: np.ndarray) -> np.ndarray:
    """sum_n (2 square)^n / (2n+1)!! for each element (square < 16), by Horner's rule: every element at the first
    band's degree (or the whole tensor's, where it lies below), the elements past the band again at the degree of
    their largest."""
    factor = 2.0 * square
    if factor.size == 0:
        return factor
    top = float(factor.max())
    result = _horner(factor, _erf_degree(min(top, _ERF_FIRST_BAND)))
    if top > _ERF_FIRST_BAND:
        where = np.flatnonzero(factor > _ERF_FIRST_BAND)
        result[where] = _horner(factor[where], _erf_degree(top))
    return result


def _erf_rounded(x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """_erf(x) rounded once to `out_dtype`, the same bits, sooner for FLOAT32 and FLOAT16 results.

    The series' sum is x * P(2x^2), P's terms all positive: Horner's rule gives it with no division, at a degree
    fixed by the element's band, to within _ERF_APART of the series' own double (both are sums of the same terms,
    a few hundred roundings apart at most). Where both ends of that interval round to one value of the output
    type, that value is the series' too; the few elements near a rounding boundary (about 3 in 10^5 for FLOAT32)
    are summed as _erf_series sums them. Other output types (FLOAT64) take _erf itself."""
    if out_dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        return _to_float_result(_erf(x), out_dtype)
    flat = x.reshape(-1)
    inside = np.abs(flat) < _ERF_SATURATES
    values = np.where(inside, flat, 0.0)  # NaN, inf and |x| >= 4 as in _erf (and 0 here: decided at once)
    square = values * values
    scale = _TWO_OVER_SQRT_PI * np.exp(-square)  # _erf's own first factors, the same bits
    near = scale * (values * _erf_horner(square))
    result = (near * (1 - _ERF_APART)).astype(out_dtype)
    undecided = np.flatnonzero(result != (near * (1 + _ERF_APART)).astype(out_dtype))
    for position in undecided.tolist():
        exact = scale[position] * _erf_series_of(float(values[position]))
        result[position] = np.float64(exact).astype(out_dtype)
    if not inside.all():
        result = np.where(inside, result, np.where(np.isnan(flat), flat, np.copysign(1.0, flat)).astype(out_dtype))
    return result.reshape(x.shape)


def _c99_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """pow on float64 arrays of one shape with C99's special values (Annex F), as CUDA's pow gives them.

    NumPy's own special values depend on the path it takes (a scalar exponent of 0.5 becomes sqrt,
    so (-inf)^0.5 would be NaN, not inf), so they are set here explicitly.
    """
    with np.errstate(all="ignore"):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        ordinary = _ordinary_powers(x, y)  # before broadcasting: a scalar exponent is read once
        x, y = np.broadcast_arrays(x, y)
        power = np.power(x, y)
        if ordinary:
            return power
        integral = np.isfinite(y) & (np.floor(y) == y)
        odd = integral & (np.fmod(y, 2.0) != 0.0)
        magnitude = np.abs(x)
        negative_y = y < 0
        inf = np.inf
        cases = [
            (y == 0, 1.0),
            (x == 1, 1.0),
            (np.isnan(x) | np.isnan(y), np.nan),
            ((x == 0) & negative_y & odd, np.copysign(inf, x)),
            ((x == 0) & negative_y, inf),
            ((x == 0) & odd, x),
            (x == 0, 0.0),
            (np.isinf(y) & (x == -1), 1.0),
            ((y == -inf) & (magnitude < 1), inf),
            (y == -inf, 0.0),
            ((y == inf) & (magnitude < 1), 0.0),
            (y == inf, inf),
            ((x == -inf) & negative_y & odd, -0.0),
            ((x == -inf) & negative_y, 0.0),
            ((x == -inf) & odd, -inf),
            (x == -inf, inf),
            ((x == inf) & negative_y, 0.0),
            (x == inf, inf),
            ((x < 0) & ~integral, np.nan),
        ]
        return np.select([c for c, _ in cases], [np.broadcast_to(v, x.shape) for _, v in cases], power)


def _ordinary_powers(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether no pair is one of C99's special cases: every base positive and finite, every exponent finite and
    not zero (a base of 1 then gives 1 either way). Four reductions and a count, where masks of each condition
    took about ten passes over the tensor (CONSTANT_POW 1.5x np.power's time); NaN fails every comparison."""
    if x.size == 0 or y.size == 0:
        return True
    if not (np.minimum.reduce(x, axis=None) > 0 and np.maximum.reduce(x, axis=None) < np.inf):
        return False
    if not (np.minimum.reduce(y, axis=None) > -np.inf and np.maximum.reduce(y, axis=None) < np.inf):
        return False
    return int(np.count_nonzero(y)) == y.size


_SNAP = 2.0**-48  # a float POW result this close (relative) to an integer is that integer: see _POW_NOTES


def _wrap_to_integer(values: np.ndarray, dtype: np.dtype, *, snap: bool) -> np.ndarray:
    """float64 values as an integer type: toward zero, wrapped modulo 2^width (two's complement); NaN and
    +-inf give 0. With `snap`, a value within 2^-48 (relative) of an integer is that integer first, and
    values outside the type's range saturate to its limits (Direct3D's float-to-integer conversion), since
    the low bits of a double beyond 2^53 differ from one device's pow to another's."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    with np.errstate(all="ignore"):
        values = np.asarray(values, dtype=np.float64)
        values = np.where(np.isfinite(values), values, 0.0)
        if snap:
            nearest = np.rint(values)
            values = np.where(np.abs(values - nearest) <= np.abs(values) * _SNAP, nearest, values)
            return float_to_integer(np, values, dtype)  # Direct3D's conversion: toward zero, saturating
        remainder = np.fmod(np.trunc(values), 2.0**width)  # exact; |remainder| < 2^width <= 2^32
        return remainder.astype(np.int64).astype(f"uint{width}").view(dtype)


def _integer_power(base: np.ndarray, exponent: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """base ** exponent exactly, modulo 2^width; negative exponents as _POW_NOTES says."""
    unsigned = np.dtype(f"uint{base.dtype.itemsize * 8}")
    wrapped = base.astype(unsigned)  # two's complement: signed to unsigned of one width is modular
    wide = exponent.astype(np.int64)
    remaining = np.where(wide < 0, 0, wide).astype(np.uint64)
    result = np.ones(np.shape(base), unsigned)
    with np.errstate(all="ignore"):
        while np.any(remaining):
            odd = (remaining & np.uint64(1)).astype(bool)
            result = np.where(odd, result * wrapped, result)
            wrapped = wrapped * wrapped
            remaining = remaining >> np.uint64(1)
        negative = wide < 0
        if np.any(negative):
            value = base.astype(np.int64)
            all_bits = unsigned.type(np.iinfo(unsigned).max)  # -1 in a signed type, the maximum in an unsigned one
            odd = (wide & 1) == 1
            special = np.where(value == 1, unsigned.type(1),
                               np.where(value == -1, np.where(odd, all_bits, unsigned.type(1)),
                                        np.where(value == 0, all_bits, unsigned.type(0))))
            result = np.where(negative, special.astype(unsigned), result)
    return np.asarray(result, unsigned).astype(out_dtype, copy=False)


def pow_(inputs, out_dtype, params):
    x, exponent = inputs
    scale_bias = params.get("ScaleBias")
    out_dtype = np.dtype(out_dtype)
    if x.dtype.kind == "f":
        base = _scaled(x, scale_bias).astype(np.float64)
        with np.errstate(all="ignore"):
            return _to_float_result(_c99_pow(base, exponent), out_dtype)
    base = x if scale_bias is None else integer_scale_bias(x, scale_bias)
    if exponent.dtype.kind == "f":
        return _wrap_to_integer(_c99_pow(base, exponent), out_dtype, snap=True)
    return _integer_power(base, exponent, out_dtype)


pow_.__name__ = "pow"


def constant_pow(inputs, out_dtype, params):
    (x,) = inputs
    base = _scaled(x, params.get("ScaleBias")).astype(np.float64)
    with np.errstate(all="ignore"):
        return _to_float_result(_c99_pow(base, np.float32(params["Exponent"])), out_dtype)


def atan_yx(inputs, out_dtype, params):
    y, x = inputs
    with np.errstate(all="ignore"):
        return _to_float_result(np.arctan2(y.astype(np.float64), x.astype(np.float64)), out_dtype)


# ---------------------------------------------------------------- CUDA helpers
#
# Float <-> double conversions are inline PTX without .ftz: CuPy compiles with -ftz=true, under which
# a compiler-made conversion would flush FLOAT32 subnormal inputs and results to zero. A FLOAT16
# result (W == 16) is rounded once from the double, straight to half, and handed over as the float of
# that half value (which the generator's conversion to half keeps exactly), as NumPy rounds it.


def _float_helpers(prefix: str) -> str:
    return f"""
__device__ __forceinline__ double {prefix}_widen(float f) {{ return dml_widen(f); }}
__device__ __forceinline__ float {prefix}_narrow(double d, int w) {{ return dml_round_to_output(d, w); }}
// Whether CUDA's float32 function may take this value: not a subnormal, which -ftz would flush to zero first.
__device__ __forceinline__ bool {prefix}_not_subnormal(float f) {{
    const unsigned int bits = __float_as_uint(f);
    return (bits & 0x7f800000u) != 0u || (bits & 0x007fffffu) == 0u;
}}
__device__ __forceinline__ dml_f32 {prefix}_scaled(dml_f32 x, int has_scale_bias, float scale, float bias) {{
    return has_scale_bias ? x * scale + bias : x;
}}
"""


_POW_HELPERS = _float_helpers("dml_pow") + r"""
// A double as an integer type: toward zero, wrapped modulo 2^width, NaN and +-inf -> 0; with `snap`, a
// value within 2^-48 (relative) of an integer is that integer first (so that 4^0.5 never truncates to 1).
template <typename T>
__device__ __forceinline__ T dml_pow_to_integer(double r, bool snap) {
    if (!(fabs(r) <= 1.7976931348623157e308)) return (T)0;
    if (snap) {
        const double nearest = rint(r);
        if (fabs(r - nearest) <= fabs(r) * 3.552713678800501e-15) r = nearest;
        // Outside the type's range: its limits (Direct3D's float-to-integer conversion saturates).
        const double high = (T)(-1) < (T)0 ? (double)((1ull << (8 * sizeof(T) - 1)) - 1ull)
                                            : (double)((1ull << (8 * sizeof(T) - 1)) * 2.0 - 1.0);
        const double low = (T)(-1) < (T)0 ? -(double)(1ull << (8 * sizeof(T) - 1)) : 0.0;
        r = fmin(fmax(trunc(r), low), high);
    }
    r = fmod(trunc(r), (double)(1ull << (8 * sizeof(T))));
    const unsigned long long m = (unsigned long long)fabs(r);
    return (T)(r < 0.0 ? 0ull - m : m);
}
// base^exponent exactly, modulo 2^width (types of at most 32 bits); negative exponents: 1 -> 1,
// -1 -> +-1, 0 -> all bits set, anything else -> 0.
template <typename T, typename U>
__device__ __forceinline__ T dml_pow_integer(T a, U b) {
    const unsigned long long mask = (1ull << (8 * sizeof(T))) - 1ull;
    const long long e = (long long)b;
    if (e < 0) {
        const long long v = (long long)a;
        if (v == 1) return (T)1;
        if (v == -1) return (e & 1) ? (T)mask : (T)1;
        if (v == 0) return (T)mask;
        return (T)0;
    }
    unsigned long long base = (unsigned long long)(long long)a & mask;
    unsigned long long result = 1ull;
    unsigned long long n = (unsigned long long)e;
    while (n != 0ull) {
        if (n & 1ull) result = (result * base) & mask;
        base = (base * base) & mask;
        n >>= 1;
    }
    return (T)result;
}
template <typename U>
__device__ __forceinline__ double dml_pow_exponent(U b) { return (double)b; }
__device__ __forceinline__ double dml_pow_exponent(dml_f32 b) { return dml_pow_widen(b.v); }
// An integer base after ScaleBias: x*Scale + Bias in double (each step rounded once), back to its type.
template <typename T>
__device__ __forceinline__ T dml_pow_base(T a, int has_scale_bias, float scale, float bias) {
    if (!has_scale_bias) return a;
    const double v = __dadd_rn(__dmul_rn((double)a, dml_pow_widen(scale)), dml_pow_widen(bias));
    return dml_pow_to_integer<T>(v, false);
}
// A FLOAT32 result as the output type (FLOAT16: rounded once more, from the float; POW's 2 ULP allow it).
__device__ __forceinline__ float dml_pow_narrow_float(float f, int w) {
    return w == 16 ? dml_half_to_float(dml_float_to_half(f)) : f;
}
// x^y for a normal positive x and a finite y whose result is a normal float: 2^t, t = y log2(x) carried in two
// floats (hi + lo, about 2^-40 relative), then 2^t = 2^n 2^r with n the integer nearest t and 2^r (|r| <= 1/2) from
// the special-function unit (ex2.approx: 2 ULP), so within 3 ULP of the exact power. log2(x) = e + log2(m), m in
// [sqrt(1/2), sqrt(2)): ln(m) = 2 atanh(f), f = (m - 1) / (m + 1) as hi + lo, the series to f^13 (|f| <= 0.1716:
// the terms left out are below 2^-34 of the sum). False (and nothing written) for anything else, which powf takes.
// Emulated on the CPU (.probe/pow_emul.py: float32 steps, an exact 2^r) it stays within 3.3 ULP of the exact power
// over 20 million inputs (x near sqrt(2) with t near 125 the worst; random ones within 0.75).
// powf held POW at 0.70 to 0.78 of the copy on the H200 (issue 33: bound by its instructions); with this path first
// POW ran at 0.86 to 0.94 (bench/gpu_bench.py --ops pow, five runs; the tree before 0.77 and 0.78 in the same runs).
// The products whose rounding errors are recovered are __fmul_rn, never contracted.
__device__ __forceinline__ bool dml_pow_fast(float x, float y, float* result) {
    const int bits = __float_as_int(x);
    if (bits < 0x00800000 || bits >= 0x7f800000 || !(fabsf(y) <= 3.40282347e38f)) return false;
    int e = (bits >> 23) - 127;
    int m_bits = (bits & 0x007fffff) | 0x3f800000;
    if (m_bits > 0x3fb504f3) { m_bits -= 0x00800000; e += 1; }  // m in [sqrt(1/2), sqrt(2))
    const float m = __int_as_float(m_bits);
    const float a = m - 1.0f;  // exact (Sterbenz)
    const float b = m + 1.0f;
    const float b_lo = m - (b - 1.0f);  // m + 1 = b + b_lo exactly
    const float inverse = dml_rcp_ftz(b);
    const float f_first = __fmul_rn(a, inverse);
    const float f_rest = __fmaf_rn(-f_first, b_lo, __fmaf_rn(-f_first, b, a)) * inverse;
    const float f_hi = f_first + f_rest;  // renormalised: |f_lo| <= ulp(f_hi) / 2 (Fast2Sum)
    const float f_lo = f_rest - (f_hi - f_first);
    const float s = f_hi * f_hi;
    float series = 0.15384615f;  // 2/13
    series = __fmaf_rn(series, s, 0.18181818f);
    series = __fmaf_rn(series, s, 0.22222222f);
    series = __fmaf_rn(series, s, 0.28571429f);
    series = __fmaf_rn(series, s, 0.4f);
    series = __fmaf_rn(series, s, 0.66666667f);
    const float lead = 2.0f * f_hi;
    const float rest = __fmaf_rn(2.0f, f_lo, series * s * f_hi);  // the series past its first term, about lead / 100
    const float ln_hi = lead + rest;  // renormalised, so that t_hi below carries t to within an ULP
    const float ln_lo = rest - (ln_hi - lead);
    const float log2e_hi = 1.44269502f, log2e_lo = 1.92596303e-8f;
    const float l_hi = __fmul_rn(ln_hi, log2e_hi);
    const float l_lo = __fmaf_rn(ln_hi, log2e_hi, -l_hi) + __fmaf_rn(ln_hi, log2e_lo, ln_lo * log2e_hi);
    const float whole = (float)e;
    const float sum_hi = whole + l_hi;  // |e| >= 1 >= |l_hi|, or e = 0: Fast2Sum
    const float sum_lo = ((whole - sum_hi) + l_hi) + l_lo;
    const float t_hi = __fmul_rn(y, sum_hi);
    if (!(fabsf(t_hi) <= 125.0f)) return false;  // 2^t past a normal float's range (or close to its ends)
    const float t_lo = __fmaf_rn(y, sum_hi, -t_hi) + y * sum_lo;
    const float n = rintf(t_hi);
    const float power = dml_ex2_ftz((t_hi - n) + t_lo);  // t_hi - n exact
    *result = __int_as_float(__float_as_int(power) + ((int)n << 23));
    return true;
}
// Float base, float exponent: dml_pow_fast where it applies, else CUDA's powf (at most 4 ULP of FLOAT32, within the
// 32 ULP tolerance; the double pow ran at 0.40 of the copy on an H100), the double pow where -ftz would flush a
// subnormal base or exponent first. That slow path is a call, not inlined, so that the fast path's registers are
// its own (H200, bench/gpu_bench.py --ops pow, two runs each: 0.94 and 0.94 of the copy against 0.92 and 0.89).
__device__ __noinline__ float dml_pow_slow(float base, float y, int w) {
    if (dml_pow_not_subnormal(base) && dml_pow_not_subnormal(y)) return dml_pow_narrow_float(powf(base, y), w);
    return dml_pow_narrow(pow(dml_pow_widen(base), dml_pow_widen(y)), w);
}
__device__ __forceinline__ float dml_pow_apply(dml_f32 a, dml_f32 b, int has, float scale, float bias, int w) {
    const float base = dml_pow_scaled(a, has, scale, bias).v;
    float fast;
    if (dml_pow_fast(base, b.v, &fast)) return dml_pow_narrow_float(fast, w);
    return dml_pow_slow(base, b.v, w);
}
// Float base, integer exponent (converted to double exactly).
template <typename U>
__device__ __forceinline__ float dml_pow_apply(dml_f32 a, U b, int has, float scale, float bias, int w) {
    return dml_pow_narrow(pow(dml_pow_widen(dml_pow_scaled(a, has, scale, bias).v), dml_pow_exponent(b)), w);
}
// Integer base, float exponent: computed in double, converted back to the base's type.
template <typename T>
__device__ __forceinline__ T dml_pow_apply(T a, dml_f32 b, int has, float scale, float bias, int w) {
    const T base = dml_pow_base(a, has, scale, bias);
    return dml_pow_to_integer<T>(pow((double)base, dml_pow_widen(b.v)), true);
}
// Integer base, integer exponent: exact.
template <typename T, typename U>
__device__ __forceinline__ T dml_pow_apply(T a, U b, int has, float scale, float bias, int w) {
    return dml_pow_integer(dml_pow_base(a, has, scale, bias), b);
}
"""


# ---------------------------------------------------------------- entries

_UNARY_FUNCTIONS = {
    # name: (enum, introduced, support, NumPy function, CUDA double function, summary, formula, tolerance, notes)
    "ACOS": (3, "1_0", _UNARY_1_0, np.arccos, "acos", "The arccosine of each element, in radians (0 to pi).",
             "f(x) = acos(x)", _INVERSE_TRIG, (_domain("|x| > 1 (acos(1.0000001) is NaN)"),)),
    "ASIN": (5, "1_0", _UNARY_1_0, np.arcsin, "asin", "The arcsine of each element, in radians (-pi/2 to pi/2).",
             "f(x) = asin(x)", _INVERSE_TRIG, (_domain("|x| > 1"), "asin(-0.0) = -0.0.")),
    "ATAN": (6, "1_0", _UNARY_1_0, np.arctan, "atan", "The arctangent of each element, in radians (-pi/2 to pi/2).",
             "f(x) = atan(x)", _INVERSE_TRIG, ("atan(+-inf) = +-pi/2; atan(-0.0) = -0.0.",)),
    "COS": (9, "1_0", _UNARY_1_0, np.cos, "cos", "The cosine of each element (radians).", "f(x) = cos(x)",
            _TRIG_ATOL, (_domain("x = +-inf"), "Arguments of any size are reduced exactly (DXIL's cos is specified "
                         "to 0.0008 absolute on [-100 pi, 100 pi] only).")),
    "SIN": (28, "1_0", _UNARY_1_0, np.sin, "sin", "The sine of each element (radians).", "f(x) = sin(x)",
            _TRIG_ATOL, (_domain("x = +-inf"), "sin(-0.0) = -0.0. Arguments of any size are reduced exactly (DXIL's "
                         "sin is specified to 0.0008 absolute on [-100 pi, 100 pi] only).")),
    "TAN": (31, "1_0", _UNARY_1_0, np.tan, "tan", "The tangent of each element (radians).", "f(x) = tan(x)",
            _TRIG_ATOL, (_domain("x = +-inf"), "No FLOAT32 or FLOAT16 value is an odd multiple of pi/2, so tan is "
                         "finite for every finite input (tan(1.5707964f) = -22877332).")),
    "EXP": (11, "1_0", _UNARY_1_0, np.exp, "exp", "e raised to the power of each element.", "f(x) = e^x",
            _EXP_ULP, ("exp(-inf) = 0, exp(inf) = inf; results past the largest finite value are inf "
                       "(FLOAT32 from x > 88.72, FLOAT16 from x > 11.09); tiny results are subnormals or 0.",)),
    "LOG": (13, "1_0", _UNARY_1_0, np.log, "log", "The natural logarithm of each element.", "f(x) = ln(x)",
            _LOG_ATOL, ("The page's 'x < 0 gives indefinite' is NaN here, and 'x = 0 gives -INF' holds for -0.0 "
                        "too (as IEEE-754); log(inf) = inf. A FLOAT32 subnormal input gives its finite logarithm "
                        "(about -103.3 for the smallest); Direct3D flushes it to 0 first, giving -inf "
                        "(--float-rules d3d).",)),
    "ERF": (81, "2_0", _UNARY_2_0, _erf, "erf", "The Gauss error function of each element.",
            "f(x) = 2/sqrt(pi) * integral from 0 to x of e^(-t^2) dt", _TRIG_ATOL,
            ("erf(+-inf) = +-1; erf(-0.0) = -0.0. DirectML's own tests reportedly allow about 5/1024 for erf "
             "(wpt#43560); dmlcli keeps WebNN's 1/1024.",)),
    "SINH": (82, "2_0", _UNARY_2_0, np.sinh, "sinh", "The hyperbolic sine of each element.",
             "f(x) = (e^x - e^-x) / 2", _SINH, ("Overflows to +-inf (FLOAT32 past |x| = 89.4); "
                                                      "sinh(-0.0) = -0.0; small x give x, not 0.",)),
    "COSH": (83, "2_0", _UNARY_2_0, np.cosh, "cosh", "The hyperbolic cosine of each element.",
             "f(x) = (e^x + e^-x) / 2", _HYPERBOLIC,
             ("Overflows to inf (FLOAT32 past |x| = 89.4); cosh(+-inf) = inf.",)),
    "TANH": (84, "2_0", _UNARY_2_0, np.tanh, "tanh", "The hyperbolic tangent of each element.",
             "f(x) = (e^x - e^-x) / (e^x + e^-x)", _TRIG_ATOL,
             ("tanh(+-inf) = +-1; tanh(-0.0) = -0.0. Later WebNN versions give tanh 16 ULP; dmlcli keeps "
              "the figure of C row 7.",)),
    "ASINH": (85, "2_0", _UNARY_2_0, np.arcsinh, "asinh", "The inverse hyperbolic sine of each element.",
              "f(x) = ln(x + sqrt(x^2 + 1))", _INVERSE_HYPERBOLIC, ("asinh(+-inf) = +-inf; asinh(-0.0) = -0.0.",)),
    "ACOSH": (86, "2_0", _UNARY_2_0, np.arccosh, "acosh", "The inverse hyperbolic cosine of each element.",
              "f(x) = ln(x + sqrt(x^2 - 1))", _INVERSE_HYPERBOLIC, (_domain("x < 1; acosh(1) = 0, acosh(inf) = inf"),)),
    "ATANH": (87, "2_0", _UNARY_2_0, np.arctanh, "atanh", "The inverse hyperbolic tangent of each element.",
              "f(x) = ln((1 + x) / (1 - x)) / 2", _INVERSE_HYPERBOLIC,
              (_domain("|x| > 1; atanh(+-1) = +-inf"), "atanh(-0.0) = -0.0.")),
}


# Issue 21: where CUDA's float32 function is far within the operator's tolerance (tanhf and erff 2 ULP, logf 1 ULP,
# against an absolute 1/1024), the GPU evaluates in float32: the double functions run at a fraction of the
# memory bandwidth on an H100 (TANH 0.63 of the copy, ERF 0.58, LOG 0.72). Subnormal inputs keep the double path.
# Issue 33 (H200, where the double functions fell further behind the faster memory): EXP 0.74-0.80 of the copy, SIN
# 0.70-0.74; expf, sinf and cosf are 2 ULP (CUDA's table, with exact argument reduction for sinf and cosf at any
# size), against EXP's 32 ULP and the absolute 1/1024 of SIN and COS.
_FLOAT32_ON_GPU = {"TANH": "tanhf", "ERF": "erff", "LOG": "logf", "EXP": "expf", "SIN": "sinf", "COS": "cosf"}
# Where a float32 function's result would be subnormal for a normal input (-ftz would flush it to 0), such inputs keep
# the double path too: exp(x) is below the smallest normal FLOAT32 (2^-126) for x < -87.3365.
_FLOAT32_DOMAIN = {"EXP": "v > -87.33f"}
# FLOAT16 results too where the tolerance is in FLOAT16 ULP: the float32 result rounded again to FLOAT16 lies within
# one FLOAT16 ULP of the CPU's one rounding (EXP's FLOAT16 figure is 1 ULP; its double path ran at 0.56 of the H200's
# copy). The absolute 1/1024 of LOG, TANH, ERF, SIN and COS is under one FLOAT16 ULP from 2 up: those keep it.
_FLOAT16_TOO = {"EXP"}
# The functions with their own way to the rounded result (_unary_kernel's `rounded`).
_ROUNDED = {"ERF": _erf_rounded}
_FLOAT32_NOTE = ("On the GPU, FLOAT32 values are computed with CUDA's float32 {function} (at most {ulp} ULP, far "
                 "within the tolerance); FLOAT16 values and subnormal inputs in double precision rounded once, as "
                 "on the CPU, which computes every value so.")
_FLOAT16_TOO_NOTE = ("On the GPU, FLOAT32 and FLOAT16 values are computed with CUDA's float32 {function} (at most "
                     "{ulp} ULP; a FLOAT16 result rounded from it is within one FLOAT16 ULP of the CPU's); subnormal "
                     "inputs in double precision rounded once, as on the CPU, which computes every value so.")


def _unary_cuda_body(name: str, prefix: str, cuda_function: str) -> str:
    scaled = f"{prefix}_scaled(x, HasScaleBias, Scale, Bias).v"
    double = f"{prefix}_narrow({cuda_function}({prefix}_widen({scaled})), W)"
    single = _FLOAT32_ON_GPU.get(name)
    if single is None:
        return double
    return f"{prefix}_fast({scaled}, W)"


def _unary_fast_helper(name: str, prefix: str, cuda_function: str) -> str:
    single = _FLOAT32_ON_GPU.get(name)
    if single is None:
        return ""
    domain = f" && {_FLOAT32_DOMAIN[name]}" if name in _FLOAT32_DOMAIN else ""
    width = "" if name in _FLOAT16_TOO else "w != 16 && "
    return f"""
__device__ __forceinline__ float {prefix}_fast(float v, int w) {{
    // w: the output's width in bits (see _FLOAT16_TOO for which functions take FLOAT16 results here).
    return {width}{prefix}_not_subnormal(v){domain} ? {single}(v)
                                                : {prefix}_narrow({cuda_function}({prefix}_widen(v)), w);
}}
"""


def _unary(name: str) -> Operator:
    enum_value, introduced, support, function, cuda_function, summary, formula, tolerance, notes = \
        _UNARY_FUNCTIONS[name]
    prefix = f"dml_{name.lower()}"
    single = _FLOAT32_ON_GPU.get(name)
    note = _FLOAT16_TOO_NOTE if name in _FLOAT16_TOO else _FLOAT32_NOTE
    evaluation = (_DOUBLE,) if single is None else (note.format(function=single, ulp=1 if single == "logf" else 2),)
    return Operator(
        name=name, enum_value=enum_value, family="math", summary=summary, formula=formula,
        introduced=level(introduced), inputs=X, support=support, same_data_type=XO, same_sizes=XO,
        cpu_kernel=_unary_kernel(function, name.lower(), _ROUNDED.get(name)),
        cuda_body=_unary_cuda_body(name, prefix, cuda_function),
        cuda_helpers=_float_helpers(prefix) + _unary_fast_helper(name, prefix, cuda_function),
        parameters=(SCALE_BIAS,), in_place=True, exactness=APPROXIMATE, tolerance=tolerance,
        notes=notes + (_IEEE_SPECIALS, _SCALE_BIAS_NOTE) + evaluation,
    )


_POW_NOTES = (
    "Feature levels 1_0 to 2_1: the page ties all three tensors' DataType ('Until 3_0 ExponentTensor must "
    "match the type of InputTensor'), and so does the 1_0 support row here: a FLOAT32 base with a FLOAT16 "
    "exponent is refused below 3_0 and accepted from 3_0.",
    "From 3_0 ExponentTensor may have any of the 8 types whatever InputTensor's; the output has the "
    "InputTensor's type.",
    "Float base: pow in double precision (C99's special values: pow(x, 0) = 1 even for NaN, pow(1, y) = 1, "
    "pow(-1, +-inf) = 1, pow(+-0, negative) = +-inf or inf; a negative base with a non-integral exponent is "
    "NaN), rounded once to the output type. An integer exponent is converted to double exactly, as ONNX "
    "computes it.",
    "Integer base and integer exponent: the exact power, wrapping modulo 2^width like integer multiplication "
    "(the page: 'this operator guarantees exact results'). Negative exponents (which the page does not "
    "cover): base 1 gives 1, base -1 gives 1 or -1 by the exponent's parity, base 0 gives all bits set "
    "(-1, or the largest unsigned value: 1/0, as dmlcli's integer DIVIDE by zero gives it, after D3D), any "
    "other base 0 (the reciprocal truncated toward zero).",
    "Integer base, float exponent (undocumented; ONNX's pow_types vectors compute in floating point and "
    "cast back): pow in double precision, converted to the base's type toward zero, and results outside the "
    "type's range saturate to its limits, as Direct3D converts floats to integers (the low bits of a double "
    "past 2^53 are not reproducible from one device's pow to another's: a wrapped result would be noise, "
    "so 3^20.0 in INT32 is 2147483647); NaN and infinities give 0 (0^-1.0 = inf gives 0). A result "
    "within 2^-48 (relative) of an integer is taken as that integer first, so that exact powers such as "
    "4^0.5 = 2 never truncate to 1 through a last-place error of a device's pow. A power that lies within a "
    "last-place error of that window's edge may still be truncated differently by the CPU's and the GPU's pow "
    "(the GPU tests allow such results to differ by one; exact integer powers never do).",
    "ScaleBias applies to InputTensor only, never to ExponentTensor. On an integer InputTensor (undocumented) "
    "dmlcli follows the convention of its IDENTITY and ABS entries: x*Scale + Bias in float64 (each step "
    "rounded once), truncated toward zero and wrapped modulo 2^width into the base's type (NaN and "
    "infinities give 0); the power then acts on that integer.",
    "The ONNX pow_types cases with INT64 or UINT64 tensors are refused: POW has no 64-bit types at any level.",
)

_CONSTANT_POW_NOTES = (
    "Data types follow the page (FLOAT32, FLOAT16 only); the feature-level history says 3_0 added integer "
    "types to CONSTANT_POW, which no support table shows (section D item 1).",
    "Exponent is a FLOAT (FLOAT32) field with no default in DirectML; dmlcli's default is 1 (the input "
    "unchanged).",
    "pow in double precision with C99's special values (x^0 = 1 even for NaN, 1^y = 1, (-1)^+-inf = 1, "
    "(+-0)^negative = inf or +-inf); a negative base with a non-integral Exponent gives NaN.",
)

OPERATORS: tuple[Operator, ...] = (
    _unary("ACOS"),
    _unary("ASIN"),
    _unary("ATAN"),
    Operator(
        name="ATAN_YX", enum_value=141, family="math",
        summary="The angle of the point (x, y) = (BTensor, ATensor) from the positive x axis, in radians "
                "(-pi to pi): the two-argument arctangent.",
        formula="f(y, x) = atan2(y, x)   (y = ATensor, x = BTensor)",
        introduced=level("3_1"), inputs=AB, support=_ATAN_YX, same_data_type=ABO, same_sizes=ABO,
        cpu_kernel=atan_yx,
        cuda_body="dml_atan_yx_narrow(atan2(dml_atan_yx_widen(a.v), dml_atan_yx_widen(b.v)), W)",
        cuda_helpers=_float_helpers("dml_atan_yx"), in_place=True, exactness=APPROXIMATE, tolerance=_INVERSE_TRIG,
        notes=("The page leaves (0, 0) undefined; dmlcli gives C's atan2: atan2(+-0, +0) = +-0, "
               "atan2(+-0, -0) = +-pi, and C99's values with infinities (atan2(+-inf, +-inf) = +-pi/4 or +-3pi/4).",
               "No ScaleBias (DESC fields: ATensor, BTensor, OutputTensor).", _DOUBLE),
    ),
    _unary("COS"),
    _unary("SIN"),
    _unary("TAN"),
    _unary("EXP"),
    _unary("LOG"),
    _unary("ERF"),
    _unary("SINH"),
    _unary("COSH"),
    _unary("TANH"),
    _unary("ASINH"),
    _unary("ACOSH"),
    _unary("ATANH"),
    Operator(
        name="POW", enum_value=25, family="math",
        summary="Each element of InputTensor raised to the power of the matching element of ExponentTensor.",
        formula="f(x, e) = x^e   (exact, wrapping, for integer types)",
        introduced=level("1_0"), inputs=POW_INPUTS, support=_POW,
        same_data_type=("InputTensor", "OutputTensor"), same_sizes=POW_TENSORS,
        cpu_kernel=pow_, cuda_body="dml_pow_apply(a, b, HasScaleBias, Scale, Bias, W)",
        cuda_helpers=_POW_HELPERS, parameters=(SCALE_BIAS,), in_place=True,
        exactness=APPROXIMATE, tolerance=_POW_ULP,
        notes=_POW_NOTES + (_SCALE_BIAS_NOTE, _POW_EVALUATION),
    ),
    Operator(
        name="CONSTANT_POW", enum_value=26, family="math",
        summary="Each element raised to the power Exponent (one FLOAT for the whole tensor).",
        formula="f(x) = x^Exponent",
        introduced=level("1_0"), inputs=X, support=_CONSTANT_POW, same_data_type=XO, same_sizes=XO,
        cpu_kernel=constant_pow,
        cuda_body=("dml_constant_pow_narrow(pow(dml_constant_pow_widen(dml_constant_pow_scaled(x, HasScaleBias, "
                   "Scale, Bias).v), dml_constant_pow_widen(Exponent)), W)"),
        cuda_helpers=_float_helpers("dml_constant_pow"), parameters=(SCALE_BIAS, EXPONENT), in_place=True,
        exactness=APPROXIMATE, tolerance=_CONSTANT_POW_ULP,
        notes=_CONSTANT_POW_NOTES + (_SCALE_BIAS_NOTE, _DOUBLE),
    ),
)
