"""ELEMENT_WISE IDENTITY, ABS, ADD, SUBTRACT, MULTIPLY, DIVIDE, MEAN, DIFFERENCE_SQUARE, MODULUS_FLOOR,
MODULUS_TRUNCATE, RECIP, SQRT, NEGATE and SIGN against an independent reference.

The reference below works one element at a time on Python ints and exact rationals (fractions), and
rounds to float16/float32 with its own round-to-nearest-even; it shares no code with dmlcli's kernels.
The support tables are transcribed a second time, as strings, from
../shared/reference/directml_elementwise.md §B2, and checked against dmlcli's validation at every level.
"""

import json
import math
import re
import struct
import warnings
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.api import plan
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.io.json_tensor import tensor_from_object

from conftest import SHARED, shared_params

# NumPy must never warn (overflow in a cast, division by zero): the kernels handle every case themselves.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

OPS = ("identity", "abs", "add", "subtract", "multiply", "divide", "mean", "difference_square", "modulus_floor",
       "modulus_truncate", "recip", "sqrt", "negate", "sign")
UNARY = {"identity", "abs", "recip", "sqrt", "negate", "sign"}
SCALE_BIAS_OPS = ("identity", "abs", "recip", "sqrt")

# ---------------------------------------------------------------- second transcription of §B2

LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
F = "FLOAT32 FLOAT16"
T8 = F + " INT32 INT16 INT8 UINT32 UINT16 UINT8"
T10 = T8 + " INT64 UINT64"
A11 = T10 + " FLOAT64"
F_I32_U32 = F + " INT32 UINT32"
ANY = "1-8"


def _add_table(old_dims):
    return [("5_1", ANY, T10), ("4_1", ANY, F + " INT64 INT32 UINT64 UINT32"), ("3_0", ANY, F_I32_U32),
            ("2_1", old_dims, F_I32_U32), ("1_0", old_dims, F)]


TABLES = {
    "identity": [("4_1", ANY, A11), ("3_0", ANY, T8), ("2_1", "4-5", T8), ("1_0", "4-5", F)],
    "abs": [("4_1", ANY, F + " INT64 INT32 INT16 INT8"), ("3_0", ANY, F + " INT32 INT16 INT8"),
            ("2_1", "4", F + " INT32 INT16 INT8"), ("1_0", "4", F)],
    "add": _add_table("4-5"),
    "subtract": _add_table("4"),
    "multiply": _add_table("4-5"),
    "divide": [("6_0", ANY, T10), ("5_1", ANY, T8), ("3_0", ANY, F_I32_U32), ("2_1", "4", F_I32_U32), ("1_0", "4", F)],
    "mean": [("3_0", ANY, F_I32_U32), ("2_1", "4", F_I32_U32), ("1_0", "4", F)],
    "difference_square": [("3_1", ANY, F_I32_U32)],
    "modulus_floor": [("6_0", ANY, T10), ("3_0", ANY, T8), ("2_1", "4", T8)],
    "modulus_truncate": [("6_0", ANY, T10), ("3_0", ANY, T8), ("2_1", "4", T8)],
    "recip": [("3_0", ANY, F), ("1_0", "4", F)],
    "sqrt": [("3_0", ANY, F), ("1_0", "4", F)],
    "negate": [("5_0", ANY, F + " INT64 INT32 INT16 INT8")],
    "sign": [("4_1", ANY, T10), ("3_0", ANY, T8), ("2_1", "4", T8), ("2_0", "4", F)],
}
ENUMS = {"identity": 1, "abs": 2, "add": 4, "divide": 10, "mean": 22, "multiply": 24, "recip": 27, "sqrt": 29,
         "subtract": 30, "sign": 79, "modulus_truncate": 101, "modulus_floor": 102, "difference_square": 143,
         "negate": 156}
CLASSES = {"identity": "exact", "abs": "exact", "negate": "exact", "sign": "exact", "add": "one rounding",
           "subtract": "one rounding", "multiply": "one rounding", "divide": "one rounding",
           "recip": "one rounding", "sqrt": "one rounding", "mean": "composite", "difference_square": "composite",
           "modulus_floor": "composite", "modulus_truncate": "composite"}
# WebNN (reference §C row 7) where it has a figure, else dmlcli's documented 2 ULP.
ULPS = {"add": 1, "subtract": 1, "multiply": 1, "sqrt": 1, "divide": 2, "recip": 2, "mean": 2,
        "difference_square": 2, "modulus_floor": 2, "modulus_truncate": 2}


def newest_types(op):
    return TABLES[op][0][2].lower().split()


def expected_row(op, level):
    found = [row for row in TABLES[op] if LEVELS.index(row[0]) <= LEVELS.index(level)]
    return found[0] if found else None


def rank_allowed(dims, rank):
    if dims == ANY:
        return 1 <= rank <= 8
    low, _, high = dims.partition("-")
    return int(low) <= rank <= int(high or low)


def accepted(op, level, dtype, rank):
    row = expected_row(op, level)
    return row is not None and dtype in row[2].split() and rank_allowed(row[1], rank)


# ---------------------------------------------------------------- the reference: exact rationals, own rounding

FORMATS = {"float16": (11, -14, 15), "float32": (24, -126, 127)}  # precision, emin, emax
NAN = float("nan")
INF = float("inf")


def _floor_log2(v: Fraction) -> int:
    a, b = v.numerator, v.denominator
    e = a.bit_length() - b.bit_length()
    lhs, rhs = (a, b << e) if e >= 0 else (a << -e, b)
    return e - 1 if lhs < rhs else e


def round_to(v: Fraction, fmt: str) -> float:
    """The nonzero rational v rounded to nearest-even in float16/float32 (subnormals, overflow to inf)."""
    precision, emin, emax = FORMATS[fmt]
    magnitude = abs(v)
    e = max(_floor_log2(magnitude), emin)
    shift = precision - 1 - e
    quantum = Fraction(1, 1 << shift) if shift >= 0 else Fraction(1 << -shift)
    n, rest = divmod(magnitude, quantum)
    if rest * 2 > quantum or (rest * 2 == quantum and n % 2):
        n += 1
    result = n * quantum
    r = INF if result >= 2 ** (emax + 1) else float(result)
    return -r if v < 0 else r


def to_fmt(x: float, fmt: str) -> float:
    if math.isnan(x) or math.isinf(x) or x == 0 or fmt == "float64":
        return x
    return round_to(Fraction(x), fmt)


def _special(*values):
    return any(math.isnan(v) or math.isinf(v) for v in values)


def _negative(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def f_add(a, b, fmt):
    if _special(a, b):
        return a + b  # IEEE for infinities: inf + -inf is NaN
    exact = Fraction(a) + Fraction(b)
    if exact == 0:
        return -0.0 if _negative(a) and _negative(b) else 0.0
    return round_to(exact, fmt)


def f_mul(a, b, fmt):
    if _special(a, b):
        return a * b
    exact = Fraction(a) * Fraction(b)
    if exact == 0:
        return -0.0 if _negative(a) != _negative(b) else 0.0
    return round_to(exact, fmt)


def f_div(a, b, fmt):
    if math.isnan(a) or math.isnan(b):
        return NAN
    sign = -1.0 if _negative(a) != _negative(b) else 1.0
    if math.isinf(a):
        return NAN if math.isinf(b) else sign * INF
    if math.isinf(b):
        return sign * 0.0
    if b == 0:
        return NAN if a == 0 else sign * INF
    if a == 0:
        return sign * 0.0
    return round_to(Fraction(a) / Fraction(b), fmt)


def f_sqrt(x, fmt):
    if math.isnan(x) or x < 0:
        return NAN
    if x == 0 or math.isinf(x):
        return x
    v = Fraction(x)
    k = 200
    scaled = v.numerator << (2 * k)
    s = math.isqrt(scaled // v.denominator)
    exact = s * s * v.denominator == scaled
    # Between s and s+1 (in units of 2^-k) when inexact: their midpoint rounds the same way.
    return round_to(Fraction(s, 1 << k) if exact else Fraction(2 * s + 1, 1 << (k + 1)), fmt)


def f_mean(a, b, fmt):
    if _special(a, b):
        return a + b
    exact = (Fraction(a) + Fraction(b)) / 2
    if exact == 0:
        return -0.0 if _negative(a) and _negative(b) else 0.0
    return round_to(exact, fmt)


def f_difference_square(a, b, fmt):
    if _special(a, b):
        d = a - b
        return d * d
    exact = (Fraction(a) - Fraction(b)) ** 2
    return 0.0 if exact == 0 else round_to(exact, fmt)


def f_difference_square_steps(a, b, fmt):
    """dmlcli's documented steps: d = a - b and d * d in float64 (Python floats), then one rounding."""
    d = a - b
    return to_fmt(d * d, fmt)


def f_modulus_truncate(a, b, fmt):
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or b == 0:
        return NAN
    if math.isinf(b):
        return a
    fa, fb = Fraction(a), Fraction(b)
    r = fa - fb * int(fa / fb)  # int() truncates toward zero
    if r == 0:
        return math.copysign(0.0, a)
    assert round_to(r, fmt) == float(r)  # fmod is exact
    return float(r)


def f_modulus_floor(a, b, fmt):
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or b == 0:
        return NAN
    if math.isinf(b):
        if a == 0:
            return math.copysign(0.0, b)
        return a if (a < 0) == (b < 0) else b
    fa, fb = Fraction(a), Fraction(b)
    r = fa - fb * math.floor(fa / fb)
    if r == 0:
        return math.copysign(0.0, b)
    return round_to(r, fmt)


def int_info(dtype):
    bits = np.dtype(dtype).itemsize * 8
    signed = np.dtype(dtype).kind == "i"
    return bits, signed, (-(1 << (bits - 1)) if signed else 0), ((1 << (bits - 1)) - 1 if signed else (1 << bits) - 1)


def wrap(v: int, dtype) -> int:
    bits, signed, _, _ = int_info(dtype)
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def int_scale_bias(x: int, scale: float, bias: float, dtype) -> int:
    v = float(x) * scale + bias  # Python floats: IEEE float64, one rounding each
    return 0 if math.isnan(v) or math.isinf(v) else wrap(int(v), dtype)


def int_reference(op, values, dtype, sb):
    a = values[0]
    b = values[1] if len(values) > 1 else None
    all_ones = wrap(-1, dtype)
    if sb is not None:
        a = int_scale_bias(a, sb[0], sb[1], dtype)
    if op == "identity":
        return a
    if op == "abs":
        return wrap(abs(a), dtype)
    if op == "negate":
        return wrap(-a, dtype)
    if op == "sign":
        return (a > 0) - (a < 0)
    if op == "add":
        return wrap(a + b, dtype)
    if op == "subtract":
        return wrap(a - b, dtype)
    if op == "multiply":
        return wrap(a * b, dtype)
    if op == "difference_square":
        return wrap((a - b) ** 2, dtype)
    if op == "mean":
        return (a + b) // 2  # floor
    if b == 0:
        return all_ones
    truncated = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    if op == "divide":
        return wrap(truncated, dtype)
    if op == "modulus_truncate":
        return a - b * truncated
    if op == "modulus_floor":
        return a % b
    raise AssertionError(op)


def float_bits(x, dtype) -> int:
    raw = np.asarray(x, dtype=dtype).tobytes()
    return int.from_bytes(raw, "little")


SIGN_BIT = {"float16": 1 << 15, "float32": 1 << 31, "float64": 1 << 63}


def float_reference(op, values, dtype, sb):
    """(expected value, expected bit pattern or None): bits where the operator promises them (sign-bit
    operators and bit copies, NaN payloads included)."""
    x = float(values[0])
    bits = float_bits(values[0], dtype)
    if sb is None:
        if op == "identity":
            return x, bits
        if op == "negate":
            return -x, bits ^ SIGN_BIT[dtype]
        if op == "abs":
            return abs(x), bits & ~SIGN_BIT[dtype]
        if op == "sign":
            return (x if math.isnan(x) or x == 0 else math.copysign(1.0, x)), (bits if x == 0 else None)
        if op == "recip":
            return f_div(1.0, x, dtype), None
        if op == "sqrt":
            return f_sqrt(x, dtype), None
        y = float(values[1])
        function = {"add": f_add, "multiply": f_mul, "divide": f_div, "mean": f_mean,
                    "difference_square": f_difference_square, "modulus_floor": f_modulus_floor,
                    "modulus_truncate": f_modulus_truncate}.get(op)
        if op == "subtract":
            return f_add(x, -y, dtype), None
        return function(x, y, dtype), None
    scale, bias = sb
    if dtype == "float64":
        g = x * scale + bias
    else:  # float32 work, then the operator in float32, then one rounding to FLOAT16
        g = f_add(f_mul(x, scale, "float32"), bias, "float32")
    result = {"identity": g, "abs": abs(g), "recip": f_div(1.0, g, "float32"), "sqrt": f_sqrt(g, "float32")}[op]
    return to_fmt(result, dtype), None


def ulp_distance(x: float, y: float, dtype) -> int:
    def ordered(v):
        bits = float_bits(v, dtype)
        sign = SIGN_BIT[dtype]
        return -(bits & ~sign) if bits & sign else bits

    return abs(ordered(x) - ordered(y))


def check(op, arrays, dtype, sb=None, **keywords):
    """Run op through dmlcli.run and compare each element with the reference; return the failures."""
    if sb is not None:
        keywords.update(scale=sb[0], bias=sb[1])
        sb = (float(np.float32(sb[0])), float(np.float32(sb[1])))
    got = dmlcli.run(op, *arrays, **keywords)
    assert got.dtype == np.dtype(dtype) and got.shape == arrays[0].shape
    failures = []
    flat = [a.reshape(-1) for a in arrays]
    for i, result in enumerate(got.reshape(-1)):
        values = [f[i] for f in flat]
        if np.dtype(dtype).kind in "iu":
            want = int_reference(op, [int(v) for v in values], dtype, sb)
            if int(result) != want:
                failures.append(f"{op} {dtype} {values} sb={sb}: got {int(result)}, expected {want}")
            continue
        want, want_bits = float_reference(op, values, dtype, sb)
        r = float(result)
        if want_bits is not None:
            ok = float_bits(result, dtype) == want_bits
        elif math.isnan(want):
            ok = math.isnan(r)
        else:
            ok = float_bits(result, dtype) == float_bits(want, dtype)
            if op == "difference_square" and sb is None:
                # dmlcli's float64 steps, bit for bit; within the declared tolerance of the exact square.
                ok = (float_bits(result, dtype) == float_bits(f_difference_square_steps(*map(float, values), dtype),
                                                              dtype)
                      and ulp_distance(r, want, dtype) <= ULPS[op])
        if not ok:
            failures.append(f"{op} {dtype} {[float(v) for v in values]} sb={sb}: got {r!r} "
                            f"({float_bits(result, dtype):#x}), expected {want!r}")
    return failures


# ---------------------------------------------------------------- values

def _f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


FLOAT_SPECIALS = {
    "float32": [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.5, 0.1, 1e30, -2.5e-30, 16777215.0, _f32(1), -_f32(1),
                _f32(0x00800000), _f32(0x007FFFFF), _f32(0x7F7FFFFF), -_f32(0x7F7FFFFF), INF, -INF, NAN],
    "float16": [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.5, 0.1, 1000.0, -2049.0, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -14,
                65504.0, -65504.0, INF, -INF, NAN],
}
FLOAT_SPECIALS["float64"] = FLOAT_SPECIALS["float32"] + [1e300, -5e-324]


def int_specials(dtype):
    _, signed, low, high = int_info(dtype)
    values = {0, 1, 2, 3, 7, high, high - 1, low, low + 1}
    if signed:
        values |= {-1, -2, -7}
    return sorted(values)


def specials(dtype):
    return FLOAT_SPECIALS[dtype] if np.dtype(dtype).kind == "f" else int_specials(dtype)


def grid(op, dtype):
    values = np.array(specials(dtype), dtype=dtype)
    if op in UNARY:
        return [values]
    a, b = np.meshgrid(values, values, indexing="ij")
    return [a.reshape(-1), b.reshape(-1)]


CASES = [(op, dtype) for op in OPS for dtype in newest_types(op)]


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o}-{d}" for o, d in CASES])
def test_special_values_grid(op, dtype):
    """Every operator x every type of its newest row, on every (pair of) special value(s)."""
    failures = check(op, grid(op, dtype), dtype)
    assert not failures, "\n".join(failures[:10])


def _element(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        _, _, low, high = int_info(dtype)
        return st.one_of(st.integers(low, high), st.sampled_from(int_specials(dtype)), st.integers(-9, 9).filter(
            lambda v: low <= v <= high))
    width = dtype.itemsize * 8
    raw = st.integers(0, (1 << width) - 1).map(lambda bits: np.array(bits, f"uint{width}").view(dtype)[()])
    nice = st.floats(width=min(width, 32), min_value=-1e4, max_value=1e4, allow_nan=False)
    return st.one_of(raw, nice, st.sampled_from(FLOAT_SPECIALS[dtype.name]))


@st.composite
def op_arrays(draw, op, dtypes=None):
    dtype = draw(st.sampled_from(dtypes or newest_types(op)))
    size = draw(st.integers(1, 12))
    count = 1 if op in UNARY else 2
    arrays = [np.array(draw(st.lists(_element(dtype), min_size=size, max_size=size)), dtype=dtype)
              for _ in range(count)]
    return dtype, arrays


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_random_values(op, data):
    dtype, arrays = data.draw(op_arrays(op))
    failures = check(op, arrays, dtype)
    assert not failures, "\n".join(failures[:10])


_SCALES = st.one_of(st.floats(width=32, min_value=-100, max_value=100),
                    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e-40, 3e38, INF, -INF, NAN]))


@pytest.mark.parametrize("op", SCALE_BIAS_OPS)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_scale_bias(op, data):
    dtype, arrays = data.draw(op_arrays(op))
    sb = (data.draw(_SCALES), data.draw(_SCALES))
    failures = check(op, arrays, dtype, sb=sb)
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("op", SCALE_BIAS_OPS)
def test_scale_bias_edges_every_type(op):
    edges = [(1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (2.0, 1.0), (0.5, -0.25), (1e-40, 0.0), (3e38, 3e38),
             (INF, 0.0), (NAN, 1.0), (1.0, -INF), (-3.0, 1e9)]
    failures = []
    for dtype in newest_types(op):
        for sb in edges:
            failures += check(op, [np.array(specials(dtype), dtype=dtype)], dtype, sb=sb)
    assert not failures, "\n".join(failures[:10])


# ---------------------------------------------------------------- pinned values (the documented decisions)


def test_identity_copies_bits_without_scale_bias():
    payloads = {"float16": [0x7C01, 0xFE00, 0x7E55, 0x8000],
                "float32": [0x7F800001, 0xFFC00000, 0x7FC12345, 0x80000000],
                "float64": [0x7FF0000000000001, 0xFFF8000000000000, 0x8000000000000000]}
    for dtype, patterns in payloads.items():
        bits = np.array(patterns, dtype=f"uint{np.dtype(dtype).itemsize * 8}")
        x = bits.view(dtype)
        out = dmlcli.run("identity", x)
        assert out.view(bits.dtype).tolist() == patterns
        assert not np.shares_memory(out, x)  # a copy, not the input's own buffer
        neg = dmlcli.run("negate", x) if dtype != "float64" else None
        if neg is not None:
            sign = SIGN_BIT[dtype]
            assert neg.view(bits.dtype).tolist() == [p ^ sign for p in patterns]
            assert dmlcli.run("abs", x).view(bits.dtype).tolist() == [p & ~sign for p in patterns]


def test_scale_bias_on_float_is_two_float32_roundings():
    # (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46 rounds to 1 + 2^-22 before the bias: no fused multiply-add.
    x = np.array([1 + 2 ** -23], np.float32)
    assert dmlcli.run("identity", x, scale=1 + 2 ** -23, bias=-1.0)[0] == np.float32(2 ** -22)
    # -0.0 with ScaleBias (1, 0) becomes +0.0; without ScaleBias it stays -0.0.
    z = np.array([-0.0], np.float32)
    assert math.copysign(1, dmlcli.run("identity", z, scale=1)[0]) == 1.0
    assert math.copysign(1, dmlcli.run("identity", z)[0]) == -1.0
    # FLOAT16 computes in float32 and rounds once at the end: 2049 survives 2048 + 1 in float32, then rounds to even.
    h = np.array([2048.0], np.float16)
    assert dmlcli.run("identity", h, bias=1.0)[0] == np.float16(2048.0)
    assert dmlcli.run("identity", h, bias=3.0)[0] == np.float16(2052.0)


def test_scale_bias_on_integers_wraps_and_truncates():
    x = np.array([100, -128, 127, 3, -3], np.int8)
    assert dmlcli.run("identity", x, scale=2, bias=1).tolist() == [-55, 1, -1, 7, -5]
    assert dmlcli.run("identity", x, scale=0.5).tolist() == [50, -64, 63, 1, -1]  # toward zero
    assert dmlcli.run("identity", x, scale=float("nan")).tolist() == [0] * 5
    assert dmlcli.run("identity", x, scale=float("inf")).tolist() == [0] * 5
    assert dmlcli.run("abs", x, scale=2, bias=1).tolist() == [55, 1, 1, 7, 5]
    u = np.array([2 ** 64 - 1, 5], np.uint64)
    # 2^64 - 1 becomes 2^64 in float64, which wraps to 0.
    assert dmlcli.run("identity", u, scale=1.0).tolist() == [0, 5]
    assert dmlcli.run("identity", np.array([5], np.uint8), scale=-1.0).tolist() == [251]
    assert dmlcli.run("identity", np.array([1], np.int64), scale=2.0 ** 70).tolist() == [0]
    assert dmlcli.run("identity", np.array([3], np.int64), scale=2.0 ** 62).tolist() == [-(2 ** 62)]


def test_integer_edges():
    i8 = np.int8
    def run(op, a, b, dtype=i8):
        return dmlcli.run(op, np.array(a, dtype), np.array(b, dtype)).tolist()

    assert run("divide", [7, -7, -128, 5, 0], [2, 2, -1, 0, 0]) == [3, -3, -128, -1, -1]
    assert run("divide", [7, 5], [0, 2], np.uint32) == [2 ** 32 - 1, 2]
    assert run("modulus_truncate", [7, -7, 7, -128, 5], [-2, 2, 0, -1, 3]) == [1, -1, -1, 0, 2]
    assert run("modulus_floor", [7, -7, 7, -128, 5], [-2, 2, 0, -1, -3]) == [-1, 1, -1, 0, -1]
    big = np.iinfo(np.int64)
    assert run("modulus_floor", [big.min], [big.max], np.int64) == [big.max - 1]
    assert dmlcli.run("abs", np.array([-128, -127], i8)).tolist() == [-128, 127]
    assert dmlcli.run("negate", np.array([big.min, 5], np.int64)).tolist() == [big.min, -5]
    assert dmlcli.run("add", np.array([127], i8), np.array([1], i8)).tolist() == [-128]
    assert dmlcli.run("multiply", np.array([2 ** 31 - 1], np.int32), np.array([2], np.int32)).tolist() == [-2]
    assert dmlcli.run("subtract", np.array([0], np.uint64), np.array([1], np.uint64)).tolist() == [2 ** 64 - 1]
    m = np.iinfo(np.int32)
    assert dmlcli.run("mean", np.array([-1, 1, -3, m.max, m.min], np.int32),
                      np.array([0, 2, 0, m.max, m.min], np.int32)).tolist() == [-1, 1, -2, m.max, m.min]
    assert run("mean", [2 ** 32 - 1], [2 ** 32 - 2], np.uint32) == [2 ** 32 - 2]
    assert dmlcli.run("difference_square", np.array([0], np.uint32), np.array([3], np.uint32)).tolist() == [9]
    assert dmlcli.run("difference_square", np.array([m.min], np.int32), np.array([m.max], np.int32)).tolist() == [1]
    assert dmlcli.run("sign", np.array([0, 200], np.uint8)).tolist() == [0, 1]
    assert dmlcli.run("sign", np.array([big.min, 0, big.max], np.int64)).tolist() == [-1, 0, 1]


def test_float_edges():
    f = np.float32
    fmax = float(np.finfo(f).max)
    assert dmlcli.run("mean", np.array([fmax], f), np.array([fmax], f))[0] == f(fmax)  # no overflow
    tiny = np.array([1], np.uint32).view(f)  # 2^-149
    assert dmlcli.run("mean", tiny, tiny)[0] == tiny[0]
    assert dmlcli.run("add", tiny, tiny)[0] == f(2.0 ** -148)  # subnormals kept
    assert dmlcli.run("sqrt", np.array([-0.0], f)).view(np.uint32)[0] == 0x80000000
    assert np.isnan(dmlcli.run("sqrt", np.array([-1.0], f))[0])
    assert dmlcli.run("recip", np.array([-0.0], f))[0] == -np.inf
    sign = dmlcli.run("sign", np.array([-0.0, 0.0, np.nan, -np.inf, 1e-45], f))
    assert sign.view(np.uint32)[:2].tolist() == [0x80000000, 0] and np.isnan(sign[2]) and sign[3:].tolist() == [-1, 1]
    r = dmlcli.run("modulus_truncate", np.array([-4.0, 5.5, 1.0, 3.0, np.inf], f),
                   np.array([2.0, -2.0, np.inf, 0.0, 1.0], f))
    assert r.view(np.uint32)[0] == 0x80000000 and r[1:3].tolist() == [1.5, 1.0] and np.isnan(r[3:]).all()
    r = dmlcli.run("modulus_floor", np.array([4.0, 5.5, -5.0, 5.0, -0.0], f),
                   np.array([-2.0, -2.0, np.inf, np.inf, 3.0], f))
    assert r.view(np.uint32)[0] == 0x80000000 and r[1:4].tolist() == [-0.5, np.inf, 5.0]
    assert r.view(np.uint32)[4] == 0  # zero takes the divisor's sign
    # FLOAT16 in float32 then one rounding: correctly rounded (65504 + 16 rounds to 65504; + 32 overflows).
    h = np.float16
    assert dmlcli.run("add", np.array([65504, 65504], h), np.array([15.9, 16], h)).tolist() == [65504, np.inf]


def test_inputs_are_not_written():
    a = np.array([1.5, -2.0], np.float32)
    b = np.array([0.5, 4.0], np.float32)
    before = (a.copy(), b.copy())
    for op in OPS:
        if "FLOAT32" in TABLES[op][0][2].split():
            dmlcli.run(op, *([a] if op in UNARY else [a, b]))
    assert np.array_equal(a, before[0]) and np.array_equal(b, before[1])


def test_broadcast_and_many_dims():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    b = np.array([5], np.int32)
    got = dmlcli.run("modulus_floor", a, b, broadcast=True)
    assert got.tolist() == (a % 5).tolist()
    x = np.linspace(-3, 3, 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2, dtype=np.float32).reshape((2,) * 8)
    assert np.array_equal(dmlcli.run("negate", x), -x)


@pytest.mark.parametrize("dtype", ["float16"])
@pytest.mark.parametrize("op", ["sqrt", "recip"])
def test_every_float16_value(op, dtype):
    """Every FLOAT16 bit pattern (stride 3 keeps it quick): one correct rounding, NaN for NaN."""
    x = np.arange(0, 1 << 16, 3, dtype=np.uint16).view(np.float16)
    failures = check(op, [x], dtype)
    assert not failures, "\n".join(failures[:10])


# ---------------------------------------------------------------- the table


@pytest.mark.parametrize("op", OPS)
def test_entry(op):
    entry = dmlcli.find_operator(op)
    assert entry.name == op.upper() and entry.enum_value == ENUMS[op]
    assert entry.family == "arithmetic" and entry.prefix == "ELEMENT_WISE"
    assert entry.dml_name == f"DML_OPERATOR_ELEMENT_WISE_{op.upper()}"
    assert entry.introduced.short == TABLES[op][-1][0]
    assert entry.inputs == (("InputTensor",) if op in UNARY else ("ATensor", "BTensor"))
    assert set(entry.same_data_type) == set(entry.tensors) == set(entry.same_sizes)
    assert entry.in_place
    assert entry.exactness == CLASSES[op]
    if op in ULPS:
        assert (entry.tolerance.kind, entry.tolerance.float32, entry.tolerance.float16) == ("ulp", ULPS[op], ULPS[op])
        assert entry.tolerance.source
    else:
        assert entry.tolerance is None
    assert [p.field for p in entry.parameters] == (["ScaleBias"] if op in SCALE_BIAS_OPS else [])
    assert entry.notes and all(len(n) > 20 for n in entry.notes)
    expected_options = {"scale": entry.parameters[0], "bias": entry.parameters[0]} if op in SCALE_BIAS_OPS else {}
    assert entry.options == expected_options


@pytest.mark.parametrize("op", OPS)
def test_validation_grid(op):
    """Accept/reject at every feature level, every data type, ranks around the pre-3_0 and 3_0 limits."""
    failures = []
    n = 1 if op in UNARY else 2
    for level in LEVELS:
        for dtype in A11.split():
            for rank in (1, 3, 4, 5, 8, 9):
                want = accepted(op, level, dtype, rank)
                try:
                    verdict = plan(op, [(parse_data_type(dtype), (2,) * rank)] * n, feature_level=level)
                except dmlcli.ValidationError as error:
                    if want:
                        failures.append(f"{op} {level} {dtype} rank {rank}: rejected: {error}")
                    elif not str(error).startswith(f"{op.upper()}: "):
                        failures.append(f"{op}: message {error}")
                    continue
                if not want:
                    failures.append(f"{op} {level} {dtype} rank {rank}: accepted")
                    continue
                lowest = next(lv for lv in LEVELS if accepted(op, lv, dtype, rank))
                if verdict.lowest_feature_level.short != lowest:
                    failures.append(f"{op} {dtype} rank {rank}: lowest {verdict.lowest_feature_level}, "
                                    f"expected {lowest}")
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("op", [o for o in OPS if o not in UNARY])
def test_mixed_types_and_output_type_are_rejected(op):
    with pytest.raises(dmlcli.ValidationError, match="ATensor data type FLOAT32 and BTensor data type FLOAT16 differ"):
        dmlcli.validate(op, np.zeros(2, np.float32), np.zeros(2, np.float16))
    with pytest.raises(dmlcli.ValidationError, match="differ"):
        dmlcli.validate(op, np.zeros(2, np.float32), np.zeros(2, np.float32), output_dtype="float16")


def test_messages_name_the_first_level():
    with pytest.raises(dmlcli.ValidationError) as error:
        dmlcli.validate("add", np.zeros(2, np.int8), np.zeros(2, np.int8), feature_level="5_0")
    assert str(error.value).endswith("supported from DML_FEATURE_LEVEL_5_1")
    with pytest.raises(dmlcli.ValidationError, match="not available at DML_FEATURE_LEVEL_3_0"):
        dmlcli.validate("difference_square", np.zeros(2, np.float32), np.zeros(2, np.float32), feature_level="3_0")
    with pytest.raises(dmlcli.ValidationError, match="dimension count 5 is not supported at DML_FEATURE_LEVEL_2_1"):
        dmlcli.validate("subtract", np.zeros((1,) * 5, np.float32), np.zeros((1,) * 5, np.float32), feature_level="2_1")
    assert dmlcli.validate("add", np.zeros((1,) * 5, np.float32), np.zeros((1,) * 5, np.float32), feature_level="2_1")
    with pytest.raises(dmlcli.ValidationError, match="FLOAT64 is not supported"):
        dmlcli.validate("sqrt", np.zeros(2, np.float64))


# ---------------------------------------------------------------- command line and API keywords


def _cli_json(args):
    result = CliRunner().invoke(cli, args + ["--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_scale_and_bias_through_the_command_line():
    out = _cli_json(["run", "identity", "[1.5, -3, 7]", "--dtype", "float32", "--scale", "2", "--bias", "1"])
    assert out["dtype"] == "float32" and out["data"] == [4.0, -5.0, 15.0]
    assert _cli_json(["run", "abs", "[1.5, -3, 7]", "--dtype", "float32", "--bias", "-2"])["data"] == [0.5, 5.0, 5.0]
    assert _cli_json(["run", "sqrt", "[1, 4, 9]", "--dtype", "float16", "--scale", "4"])["data"] == [2.0, 4.0, 6.0]
    out = _cli_json(["run", "recip", "[1, 4, -0.5]", "--dtype", "float32", "--scale", "2"])
    assert out["data"] == [0.5, 0.125, -1.0]
    out = _cli_json(["run", "identity", "[100, -3]", "--dtype", "int8", "--scale", "2", "--bias", "1"])
    assert out["data"] == [-55, -5]
    assert _cli_json(["run", "divide", "[7, -7, 5]", "[2, 2, 0]", "--dtype", "int32"])["data"] == [3, -3, -1]
    assert _cli_json(["run", "modulus_floor", "[7, -7]", "[-2, 2]", "--dtype", "int16"])["data"] == [-1, 1]


def test_scale_is_refused_where_there_is_no_scale_bias():
    result = CliRunner().invoke(cli, ["run", "add", "[1]", "[2]", "--dtype", "float32", "--scale", "2"])
    assert result.exit_code != 0 and "ADD has no scale parameter" in result.output
    with pytest.raises(dmlcli.InputError, match="NEGATE has no bias parameter"):
        dmlcli.run("negate", np.zeros(2, np.float32), bias=1)


def test_api_keywords_default_the_other_half():
    x = np.array([1.0, -2.0], np.float32)
    assert dmlcli.run("identity", x, scale=3).tolist() == [3.0, -6.0]
    assert dmlcli.run("identity", x, bias=3).tolist() == [4.0, 1.0]
    verdict = dmlcli.validate("identity", x, scale=3)
    assert verdict.call.parameters["ScaleBias"] == (np.float32(3), np.float32(0))
    assert dmlcli.validate("identity", x).call.parameters["ScaleBias"] is None


def test_describe_prints_the_decisions():
    result = CliRunner().invoke(cli, ["describe", "sign"])
    assert result.exit_code == 0 and "SIGN(-0.0) = -0.0" in result.output
    result = CliRunner().invoke(cli, ["describe", "mean"])
    assert "floor((a + b) / 2)" in result.output


def test_cuda_sources_are_generated():
    from dmlcli.backends import gpu_kernels

    for op in OPS:
        entry = dmlcli.find_operator(op)
        source = gpu_kernels.module_source(entry)
        for signature in gpu_kernels.signatures(entry):
            assert gpu_kernels.kernel_name("vec", signature) in source
        helper_names = set(re.findall(r"__forceinline__\s+(?:\w+\s+)+?(dml_\w+)\s*\(", entry.cuda_helpers))
        assert helper_names and all(name.startswith(f"dml_{op}_") for name in helper_names), helper_names


# ---------------------------------------------------------------- ONNX vectors

ONNX_DIR = SHARED / "conformance" / "onnx_elementwise"
ONNX_CASES = sorted(p for p in ONNX_DIR.glob("*.json") if json.loads(p.read_text())["op"] in OPS) \
    if ONNX_DIR.is_dir() else []


def test_onnx_cases_are_found(shared_dir):
    assert len(ONNX_CASES) == 59


@pytest.mark.parametrize("path", shared_params(ONNX_CASES), ids=lambda p: p.stem)
def test_onnx_vector(path):
    case = json.loads(path.read_text())
    inputs = [tensor_from_object(t, where=path.name) for t in case["inputs"]]
    expected = tensor_from_object(case["expected"], where=path.name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = dmlcli.run(case["op"], *inputs, broadcast=case.get("broadcast", False), **case["params"])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    tolerance = case["tolerance"]
    if tolerance.get("exact"):
        assert got.tobytes() == expected.tobytes()
        return
    g, e = got.astype(np.float64), expected.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(e)
    close = np.abs(g - e) <= tolerance["atol"] + tolerance["rtol"] * np.abs(e)
    assert (both_nan | close | (g == e)).all()
    # And within the operator's own tolerance (0 ULP for the exact operators).
    allowed = ULPS.get(case["op"], 0)
    dtype = expected.dtype.name
    worst = max(ulp_distance(float(x), float(y), dtype) for x, y in zip(got.reshape(-1), expected.reshape(-1))
                if not (math.isnan(x) and math.isnan(y)))
    assert worst <= allowed
