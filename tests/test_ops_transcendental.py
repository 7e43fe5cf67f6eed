"""The math family: ACOS ... ATANH, ATAN_YX, POW and CONSTANT_POW.

Every result is checked against a reference written here, element by element, from Python's math
module (in double precision) rounded to FLOAT32/FLOAT16 with struct, never from dmlcli's kernels.
The support tables are transcribed a second time below, from directml_elementwise.md section B2,
in a different shape from the operator table.
"""

from __future__ import annotations

import json
import math
import struct
import warnings

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

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
INF, NAN = math.inf, math.nan

# ---------------------------------------------------------------- reference (Python's math, C99 specials)


def _overflow_to(sign):
    return math.copysign(INF, sign)


def r_acos(x):
    return math.acos(x) if -1.0 <= x <= 1.0 else NAN


def r_asin(x):
    return math.asin(x) if -1.0 <= x <= 1.0 else NAN


def r_atan(x):
    return math.atan(x)


def _periodic(function):
    def reference(x):
        return NAN if math.isinf(x) or math.isnan(x) else function(x)
    return reference


def r_exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def r_log(x):
    if math.isnan(x) or x < 0:
        return NAN
    if x == 0:
        return -INF
    return math.log(x)


def r_sinh(x):
    try:
        return math.sinh(x)
    except OverflowError:
        return _overflow_to(x)


def r_cosh(x):
    try:
        return math.cosh(x)
    except OverflowError:
        return INF


def r_acosh(x):
    return NAN if x < 1.0 else math.acosh(x)


def r_atanh(x):
    if abs(x) > 1.0:
        return NAN
    if abs(x) == 1.0:
        return math.copysign(INF, x)
    return math.atanh(x)


def _odd_integer(e):
    return math.isfinite(e) and e == math.floor(e) and math.fmod(e, 2.0) != 0.0


def r_pow(x, e):
    """C99 pow (Annex F) from math.pow, whose exceptions stand for C's special results."""
    if e == 0.0 or x == 1.0:
        return 1.0
    if math.isnan(x) or math.isnan(e):
        return NAN
    try:
        return math.pow(x, e)
    except OverflowError:
        return -INF if x < 0 and _odd_integer(e) else INF
    except ValueError:
        if x == 0.0:  # zero to a negative power
            return math.copysign(INF, x) if _odd_integer(e) else INF
        return NAN  # a negative base with a non-integral exponent


UNARY = {
    "ACOS": r_acos, "ASIN": r_asin, "ATAN": r_atan, "COS": _periodic(math.cos), "SIN": _periodic(math.sin),
    "TAN": _periodic(math.tan), "EXP": r_exp, "LOG": r_log, "ERF": math.erf, "SINH": r_sinh, "COSH": r_cosh,
    "TANH": math.tanh, "ASINH": math.asinh, "ACOSH": r_acosh, "ATANH": r_atanh,
}
FMT = {"float32": "<f", "float16": "<e"}


def round_to(value: float, dtype: str) -> float:
    """A double rounded once, to nearest even, to FLOAT32 or FLOAT16 (struct does it correctly)."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        return struct.unpack(FMT[dtype], struct.pack(FMT[dtype], value))[0]
    except OverflowError:
        return math.copysign(INF, value)


def scaled(x: float, scale: float, bias: float) -> float:
    """x*Scale + Bias with each step rounded to FLOAT32 (a FLOAT32 product is exact in a double, and a
    double sum of two FLOAT32 values rounds to the same FLOAT32 as the exact sum)."""
    return round_to(round_to(x * scale, "float32") + bias, "float32")


def f32(value: float) -> float:
    return round_to(value, "float32")


# ---------------------------------------------------------------- comparison


def ordered(array: np.ndarray) -> np.ndarray:
    bits = array.dtype.itemsize * 8
    raw = array.view(f"int{bits}").astype(np.int64)
    return np.where(raw < 0, -(raw & ((1 << (bits - 1)) - 1)), raw)


def assert_matches(op_name: str, got: np.ndarray, want: np.ndarray, where: str = "") -> None:
    """`got` within the operator's declared tolerance of `want`, and within 1 ULP (dmlcli rounds a double
    result once, so only a last-place difference between two libms is allowed); NaN matches NaN,
    infinities must be equal."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    tolerance = dmlcli.find_operator(op_name).tolerance
    limit = tolerance.for_dtype(got.dtype)
    g, w = got.ravel(), want.ravel()
    for i in range(g.size):
        a, b = g[i], w[i]
        context = f"{op_name} {got.dtype}{where} element {i}: got {a!r}, want {b!r}"
        if np.isnan(b) or np.isnan(a):
            assert np.isnan(a) and np.isnan(b), context
            continue
        if np.isinf(a) or np.isinf(b):
            assert a == b, context
            continue
        ulps = abs(int(ordered(g[i:i + 1])[0]) - int(ordered(w[i:i + 1])[0]))
        assert ulps <= 1, context + f" ({ulps} ULP)"
        if tolerance.kind == "ulp":
            assert ulps <= limit, context
        else:
            assert abs(float(a) - float(b)) <= limit, context


def assert_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want, got.view(f"uint{got.dtype.itemsize * 8}"),
                                             want.view(f"uint{want.dtype.itemsize * 8}"))


def expected_unary(op_name: str, values, dtype: str, scale_bias=None) -> np.ndarray:
    out = []
    for v in values:
        v = float(v)
        if scale_bias is not None:
            v = scaled(v, *scale_bias)
        out.append(round_to(UNARY[op_name](v), dtype))
    return np.array(out, dtype=dtype)


def floats_of(dtype: str, **kwargs):
    return st.floats(width=32 if dtype == "float32" else 16, **kwargs)


# ---------------------------------------------------------------- the entries


ENUMS = {"ACOS": 3, "ASIN": 5, "ATAN": 6, "COS": 9, "EXP": 11, "LOG": 13, "POW": 25, "CONSTANT_POW": 26, "SIN": 28,
         "TAN": 31, "ERF": 81, "SINH": 82, "COSH": 83, "TANH": 84, "ASINH": 85, "ACOSH": 86, "ATANH": 87,
         "ATAN_YX": 141}
WEBNN = {  # section C row 7: (kind, FLOAT32, FLOAT16)
    "EXP": ("ulp", 32, 1), "POW": ("ulp", 32, 2), "COS": ("atol", 1 / 1024, 1 / 512),
    "SIN": ("atol", 1 / 1024, 1 / 512), "TAN": ("atol", 1 / 1024, 1 / 512), "ERF": ("atol", 1 / 1024, 1 / 512),
    "TANH": ("atol", 1 / 1024, 1 / 512), "LOG": ("atol", 1 / 1024, 1 / 1024),
}
MATH_OPS = sorted(ENUMS)


def test_the_family_holds_exactly_these_operators():
    from dmlcli.operators.elementwise import transcendental

    assert sorted(op.name for op in transcendental.OPERATORS) == MATH_OPS
    assert {op.name: op.enum_value for op in transcendental.OPERATORS} == ENUMS
    assert all(op.family == "math" for op in transcendental.OPERATORS)


@pytest.mark.parametrize("name", MATH_OPS)
def test_entry(name):
    op = dmlcli.find_operator(name)
    assert op.dml_name == f"DML_OPERATOR_ELEMENT_WISE_{name}"
    assert op.exactness == "approximate"
    assert op.in_place
    fields = [p.field for p in op.parameters]
    # B4: ScaleBias on every one of these but ATAN_YX; CONSTANT_POW's Exponent after it (DESC order).
    assert fields == ({"ATAN_YX": [], "CONSTANT_POW": ["ScaleBias", "Exponent"]}.get(name, ["ScaleBias"]))
    expected_inputs = {"ATAN_YX": ("ATensor", "BTensor"), "POW": ("InputTensor", "ExponentTensor")}
    assert op.inputs == expected_inputs.get(name, ("InputTensor",))
    if name in WEBNN:
        assert (op.tolerance.kind, op.tolerance.float32, op.tolerance.float16) == WEBNN[name]
        assert "WebNN" in op.tolerance.source
    else:
        assert op.tolerance.source.startswith("dmlcli's choice; WebNN lists none")
    assert op.notes


def test_cuda_source_builds_for_every_signature():
    from dmlcli.backends.gpu_kernels import module_source, signatures

    for name in MATH_OPS:
        op = dmlcli.find_operator(name)
        source = module_source(op)
        prefix = f"dml_{name.lower()}_"
        assert prefix in op.cuda_body and prefix in op.cuda_helpers
        # Float <-> double conversions in PTX without .ftz (CuPy compiles with -ftz=true).
        assert "cvt.f64.f32" in source and "cvt.rn.f32.f64" in source and "cvt.rn.f16.f64" in source
        assert ".ftz" not in op.cuda_helpers
    assert len(signatures(dmlcli.find_operator("POW"))) == 8 * 8


# ---------------------------------------------------------------- unary values


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_random(name, dtype):
    @SETTINGS
    @given(st.lists(floats_of(dtype), min_size=1, max_size=24),
           st.lists(floats_of(dtype, min_value=-1.25, max_value=1.25), min_size=0, max_size=8))
    def check(values, near_one):
        data = np.array(values + near_one, dtype=dtype)
        assert_matches(name, dmlcli.run(name, data), expected_unary(name, data, dtype))

    check()


_PI = math.pi
# (input, exact expected output) in FLOAT32, bit for bit (the sign of zero included).
SPECIALS = {
    "ACOS": [(1.0000001, NAN), (-1.0000001, NAN), (1.0, 0.0), (-1.0, f32(_PI)), (0.0, f32(_PI / 2)), (INF, NAN),
             (NAN, NAN)],
    "ASIN": [(-0.0, -0.0), (0.0, 0.0), (1.0000001, NAN), (1.0, f32(_PI / 2)), (-1.0, -f32(_PI / 2)), (1e-40, 1e-40),
             (-INF, NAN)],
    "ATAN": [(INF, f32(_PI / 2)), (-INF, -f32(_PI / 2)), (-0.0, -0.0), (1e-45, 1e-45), (NAN, NAN),
             (3.4028234663852886e38, f32(_PI / 2))],
    "COS": [(INF, NAN), (-INF, NAN), (-0.0, 1.0), (0.0, 1.0), (NAN, NAN)],
    "SIN": [(-0.0, -0.0), (1e-40, 1e-40), (INF, NAN), (-INF, NAN),
            (3.4028234663852886e38, f32(math.sin(3.4028234663852886e38)))],
    "TAN": [(-0.0, -0.0), (1.5707963705062866, -22877332.0), (INF, NAN), (1e-40, 1e-40)],
    "EXP": [(0.0, 1.0), (-0.0, 1.0), (-INF, 0.0), (INF, INF), (NAN, NAN), (88.72283172607422, f32(math.exp(88.72283172607422))),
            (88.7228775024414, INF), (-103.0, f32(math.exp(-103.0))), (-104.0, 0.0)],
    "LOG": [(0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-1e-45, NAN), (1.0, 0.0), (INF, INF), (-INF, NAN),
            (1e-45, f32(math.log(1.401298464324817e-45))), (NAN, NAN)],
    "ERF": [(INF, 1.0), (-INF, -1.0), (-0.0, -0.0), (4.0, 1.0), (-4.0, -1.0), (3.9, f32(math.erf(f32(3.9)))),
            (1e-40, f32(f32(1e-40) * 2 / math.sqrt(_PI))), (NAN, NAN)],
    "SINH": [(-0.0, -0.0), (1e-40, 1e-40), (89.5, INF), (-89.5, -INF), (INF, INF), (-INF, -INF),
             (89.0, f32(math.sinh(89.0)))],
    "COSH": [(-0.0, 1.0), (0.0, 1.0), (89.5, INF), (-INF, INF), (NAN, NAN)],
    "TANH": [(INF, 1.0), (-INF, -1.0), (-0.0, -0.0), (20.0, 1.0), (1e-40, 1e-40)],
    "ASINH": [(-INF, -INF), (INF, INF), (-0.0, -0.0), (1e-40, 1e-40),
              (3.4028234663852886e38, f32(math.asinh(3.4028234663852886e38)))],
    "ACOSH": [(1.0, 0.0), (0.9999999403953552, NAN), (INF, INF), (-INF, NAN), (0.0, NAN)],
    "ATANH": [(1.0, INF), (-1.0, -INF), (1.0000001, NAN), (-1.0000001, NAN), (-0.0, -0.0), (1e-40, 1e-40)],
}


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_unary_special_values(name):
    inputs = np.array([x for x, _ in SPECIALS[name]], np.float32)
    want = np.array([y for _, y in SPECIALS[name]], np.float32)
    got = dmlcli.run(name, inputs)
    # NaN bits may differ in payload: compare NaN positions, and the rest bit for bit.
    assert np.array_equal(np.isnan(got), np.isnan(want)), (name, got, want)
    keep = ~np.isnan(want)
    assert_bits(got[keep], want[keep])


def test_float16_edges():
    x = np.array([11.0859375, 11.09375, -17.0, 65504.0, 0.0, -0.0, 6e-08], np.float16)
    got = dmlcli.run("exp", x)
    assert_bits(got, np.array([65248.0, INF, round_to(math.exp(-17.0), "float16"), INF, 1.0, 1.0, 1.0], np.float16))
    assert 0 < float(got[2]) < 6.2e-08  # a FLOAT16 subnormal, not flushed
    assert dmlcli.run("exp", np.array([-17.5], np.float16))[0] == np.float16(round_to(math.exp(-17.5), "float16"))
    assert_bits(dmlcli.run("log", np.array([0.0, -0.0, -1.0, 65504.0], np.float16))[[0, 1, 3]],
                np.array([-INF, -INF, round_to(math.log(65504.0), "float16")], np.float16))
    assert_bits(dmlcli.run("asinh", np.array([65504.0, -65504.0], np.float16)),
                np.array([round_to(math.asinh(65504.0), "float16"), round_to(-math.asinh(65504.0), "float16")],
                         np.float16))
    assert_bits(dmlcli.run("sin", np.array([-0.0, 6e-08], np.float16)), np.array([-0.0, 6e-08], np.float16))


# ---------------------------------------------------------------- ScaleBias


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_scale_bias(name, dtype):
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.lists(floats_of(dtype, allow_nan=False, min_value=-4, max_value=4), min_size=1, max_size=12),
           st.floats(-3, 3, width=32), st.floats(-3, 3, width=32))
    def check(values, scale, bias):
        data = np.array(values, dtype=dtype)
        got = dmlcli.run(name, data, scale=scale, bias=bias)
        assert_matches(name, got, expected_unary(name, data, dtype, (scale, bias)), f" scale {scale} bias {bias}")

    check()


def test_scale_bias_is_two_float32_roundings_not_a_fused_multiply_add():
    # (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46: FLOAT32 rounds the product to 1 + 2^-22, so adding -(1 + 2^-22)
    # gives exactly 0; a fused multiply-add would keep 2^-46.
    x = np.array([1 + 2.0**-23], np.float32)
    got = dmlcli.run("constant_pow", x, exponent=1, scale=1 + 2.0**-23, bias=-(1 + 2.0**-22))
    assert_bits(got, np.array([0.0], np.float32))


def test_scale_bias_on_float16_is_not_rounded_to_float16():
    # 1 + 2^-12 is not a FLOAT16; rounded to FLOAT16 it would be 1, and 1^1024 = 1.
    got = dmlcli.run("constant_pow", np.array([1.0], np.float16), exponent=1024, bias=2.0**-12)
    assert_bits(got, np.array([round_to((1 + 2.0**-12) ** 1024, "float16")], np.float16))
    assert got[0] > 1.28


def test_scale_bias_edges():
    minus_zero = np.array([-0.0], np.float32)
    assert_bits(dmlcli.run("sin", minus_zero), minus_zero)  # no ScaleBias: bit for bit
    assert_bits(dmlcli.run("sin", minus_zero, scale=1), np.array([0.0], np.float32))  # -0*1 + 0 = +0
    assert_bits(dmlcli.run("sin", minus_zero, scale=-1), np.array([0.0], np.float32))
    # Scale 0: the result is f(Bias) whatever the input (but inf * 0 is NaN).
    x = np.array([5.0, -7.0, 1e30, INF], np.float32)
    got = dmlcli.run("exp", x, scale=0, bias=1)
    assert_bits(got[:3], np.full(3, f32(math.e), np.float32))
    assert np.isnan(got[3])
    # The product overflows FLOAT32 before the operator sees it.
    assert_bits(dmlcli.run("atan", np.array([3e38], np.float32), scale=10), np.array([f32(_PI / 2)], np.float32))
    assert np.isnan(dmlcli.run("cos", np.array([1.0], np.float32), scale=NAN)[0])
    # Bias alone (scale defaults to 1) and scale alone (bias defaults to 0).
    assert_bits(dmlcli.run("log", np.array([1.0], np.float32), bias=-1), np.array([-INF], np.float32))
    assert_bits(dmlcli.run("acos", np.array([0.5], np.float32), scale=2), np.array([0.0], np.float32))


def test_atan_yx_takes_no_scale_bias():
    with pytest.raises(dmlcli.InputError):
        dmlcli.run("atan_yx", np.ones(2, np.float32), np.ones(2, np.float32), scale=2)


# ---------------------------------------------------------------- ATAN_YX


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_atan_yx_random(dtype):
    @SETTINGS
    @given(st.lists(st.tuples(floats_of(dtype), floats_of(dtype)), min_size=1, max_size=24))
    def check(pairs):
        y = np.array([p[0] for p in pairs], dtype)
        x = np.array([p[1] for p in pairs], dtype)
        want = np.array([round_to(math.atan2(float(a), float(b)), dtype) for a, b in zip(y, x)], dtype)
        assert_matches("ATAN_YX", dmlcli.run("atan_yx", y, x), want)

    check()


def test_atan_yx_special_values():
    y = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, INF, INF, -INF, 1.0, NAN, 0.0], np.float32)
    x = np.array([0.0, 0.0, -0.0, -0.0, 0.0, -INF, INF, -INF, 1.0, -1.0, 1.0, NAN], np.float32)
    want = np.array([0.0, -0.0, f32(_PI), -f32(_PI), f32(_PI / 2), -f32(_PI), f32(_PI / 4), f32(3 * _PI / 4),
                     -f32(_PI / 2), f32(3 * _PI / 4), NAN, NAN], np.float32)
    got = dmlcli.run("atan_yx", y, x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert_bits(got[:10], want[:10])


# ---------------------------------------------------------------- POW and CONSTANT_POW

INT_TYPES = ["int32", "int16", "int8", "uint32", "uint16", "uint8"]
FLOAT_TYPES = ["float32", "float16"]


def int_limits(dtype: str) -> tuple[int, int, int]:
    bits = int(dtype.lstrip("uint"))
    if dtype.startswith("u"):
        return bits, 0, (1 << bits) - 1
    return bits, -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def wrap(value: int, dtype: str) -> int:
    bits, low, _ = int_limits(dtype)
    value %= 1 << bits
    return value - (1 << bits) if low < 0 and value >= 1 << (bits - 1) else value


def r_int_pow(base: int, exponent: int, dtype: str) -> int:
    """The documented integer POW: exact modulo 2^width; negative exponents 1 -> 1, -1 -> +-1, 0 -> all bits
    set, others -> 0."""
    if exponent >= 0:
        return wrap(pow(base, exponent, 1 << int_limits(dtype)[0]), dtype)
    if base == 1:
        return 1
    if base == -1:
        return -1 if exponent % 2 else 1
    if base == 0:
        return wrap(-1, dtype)
    return 0


def to_integer(value: float, dtype: str, snap: bool) -> int:
    """A double as an integer type: toward zero, wrapped modulo 2^width; NaN and infinities give 0. POW's
    results (`snap`) are first snapped within 2^-48 to an integer and saturated to the type's range."""
    if math.isnan(value) or math.isinf(value):
        return 0
    if snap:
        if abs(value - round(value)) <= abs(value) * 2.0**-48:
            value = float(round(value))
        low, high = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
        return min(max(math.trunc(value), low), high)
    return wrap(math.trunc(value), dtype)


def scaled_integer(x: int, scale: float, bias: float, dtype: str) -> int:
    """ScaleBias on an integer: x*Scale + Bias in double (Python floats: each step rounded once), then as above."""
    return to_integer(float(x) * f32(scale) + f32(bias), dtype, False)


def ints_of(dtype: str):
    _, low, high = int_limits(dtype)
    return st.integers(low, high)


@pytest.mark.parametrize("base_type", FLOAT_TYPES)
@pytest.mark.parametrize("exponent_type", FLOAT_TYPES)
def test_pow_float_float(base_type, exponent_type):
    @SETTINGS
    @given(st.lists(st.tuples(floats_of(base_type), floats_of(exponent_type)), min_size=1, max_size=20),
           st.lists(st.tuples(floats_of(base_type, min_value=-8, max_value=8),
                              st.integers(-12, 12).map(float)), max_size=8))
    def check(pairs, integral):
        pairs = pairs + integral
        x = np.array([p[0] for p in pairs], base_type)
        e = np.array([p[1] for p in pairs], exponent_type)
        want = np.array([round_to(r_pow(float(a), float(b)), base_type) for a, b in zip(x, e)], base_type)
        assert_matches("POW", dmlcli.run("pow", x, e), want)

    check()


@pytest.mark.parametrize("base_type", FLOAT_TYPES)
@pytest.mark.parametrize("exponent_type", INT_TYPES)
def test_pow_float_base_integer_exponent(base_type, exponent_type):
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.lists(st.tuples(floats_of(base_type), ints_of(exponent_type)), min_size=1, max_size=16),
           st.lists(st.tuples(floats_of(base_type, min_value=-3, max_value=3), st.integers(0, 30)), max_size=8))
    def check(pairs, small):
        pairs = pairs + small
        x = np.array([p[0] for p in pairs], base_type)
        e = np.array([p[1] for p in pairs], exponent_type)
        want = np.array([round_to(r_pow(float(a), float(int(b))), base_type) for a, b in zip(x, e)], base_type)
        got = dmlcli.run("pow", x, e)
        assert got.dtype == np.dtype(base_type)
        assert_matches("POW", got, want)

    check()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.sampled_from(INT_TYPES), st.sampled_from(INT_TYPES), st.data())
def test_pow_integer_integer_is_exact_and_wraps(base_type, exponent_type, data):
    pairs = data.draw(st.lists(st.tuples(ints_of(base_type), ints_of(exponent_type)), min_size=1, max_size=16))
    small = data.draw(st.lists(st.tuples(st.integers(-3, 3).filter(lambda v: v >= int_limits(base_type)[1]),
                                         st.integers(-3, 40).filter(lambda v: v >= int_limits(exponent_type)[1])),
                               max_size=8))
    pairs = pairs + small
    x = np.array([p[0] for p in pairs], base_type)
    e = np.array([p[1] for p in pairs], exponent_type)
    want = np.array([r_int_pow(int(a), int(b), base_type) for a, b in zip(x, e)], base_type)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy must not warn about overflow
        got = dmlcli.run("pow", x, e)
    assert_bits(got, want)


def test_pow_integer_examples():
    got = dmlcli.run("pow", np.array([3, 2, -2, 2, 0, 0, 1, -1, -1, 2, -128], np.int8),
                     np.array([5, 7, 7, 8, 0, -1, -5, -3, -2, -1, 2], np.int8))
    assert got.tolist() == [-13, -128, -128, 0, 1, -1, 1, -1, 1, 0, 0]  # 243 wraps to -13
    got = dmlcli.run("pow", np.array([0, 2, 255, 3], np.uint8), np.array([-1, 8, -1, 2], np.int32))
    assert got.tolist() == [255, 0, 0, 9]  # 0^-1: all bits set
    got = dmlcli.run("pow", np.array([3, 7, 65535], np.uint32), np.array([40, 4294967295, 2], np.uint32))
    assert got.tolist() == [pow(3, 40, 2**32), pow(7, 4294967295, 2**32), pow(65535, 2, 2**32)]
    got = dmlcli.run("pow", np.array([-2, 46341, -2147483648], np.int32), np.array([31, 2, 1], np.int16))
    assert got.tolist() == [-2147483648, wrap(46341**2, "int32"), -2147483648]


@pytest.mark.parametrize("base_type", INT_TYPES)
@pytest.mark.parametrize("exponent_type", FLOAT_TYPES)
def test_pow_integer_base_float_exponent(base_type, exponent_type):
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.lists(st.tuples(ints_of(base_type), floats_of(exponent_type)), min_size=1, max_size=16),
           st.lists(st.tuples(st.integers(-20, 20).filter(lambda v: v >= int_limits(base_type)[1]),
                              st.sampled_from([0.5, 1.5, 2.0, 0.25, -1.0, 3.0, 0.75])), max_size=8))
    def check(pairs, exact):
        pairs = pairs + exact
        x = np.array([p[0] for p in pairs], base_type)
        e = np.array([p[1] for p in pairs], exponent_type)
        want = np.array([to_integer(r_pow(float(int(a)), float(b)), base_type, True) for a, b in zip(x, e)],
                        base_type)
        assert_bits(dmlcli.run("pow", x, e), want)

    check()


def test_pow_integer_base_float_exponent_examples():
    x = np.array([4, 16, 9, 8, 0, -8, 2, 10, -3, 7, 3, 2], np.int32)
    e = np.array([0.5, 0.25, 1.5, 1 / 3, -1, 0.5, 31, 0.5, 3, NAN, 20, 40], np.float32)
    # 8^(float32(1/3)) is just over 2 (float32(1/3) > 1/3). 0^-1 = inf and NaN give 0; 2^31, 3^20 and 2^40
    # are past INT32's range and saturate (Direct3D's float-to-integer conversion), where integer powers wrap.
    assert dmlcli.run("pow", x, e).tolist() == [2, 2, 27, 2, 0, 0, 2**31 - 1, 3, -27, 0, 2**31 - 1, 2**31 - 1]
    assert dmlcli.run("pow", x[-2:], e[-2:].astype(np.int32)).tolist() == [wrap(3**20, "int32"), 0]
    assert dmlcli.run("pow", np.array([-2, 2, 3], np.int8), np.array([7, -1, 5], np.float16)).tolist() == [-128, 0, 127]
    assert dmlcli.run("pow", np.array([3, 0], np.uint8), np.array([6, -1], np.float32)).tolist() == [255, 0]
    # The ONNX vector's case: computed in floating point, cast back to the base type.
    assert dmlcli.run("pow", np.array([1, 2, 3], np.int32), np.array([4, 5, 6], np.float32)).tolist() == [1, 32, 729]


POW_SPECIALS = [  # (base, exponent, result) in FLOAT32
    (0.0, -1.0, INF), (-0.0, -1.0, -INF), (-0.0, -2.0, INF), (0.0, 3.0, 0.0), (-0.0, 3.0, -0.0),
    (-8.0, 1 / 3, NAN), (-2.0, 3.0, -8.0), (-2.0, 0.5, NAN), (NAN, 0.0, 1.0), (1.0, NAN, 1.0), (-1.0, INF, 1.0),
    (-1.0, -INF, 1.0), (0.5, INF, 0.0), (2.0, INF, INF), (0.5, -INF, INF), (2.0, -INF, 0.0), (-INF, 3.0, -INF),
    (-INF, 2.0, INF), (-INF, -3.0, -0.0), (INF, -1.0, 0.0), (2.0, 200.0, INF), (-2.0, 129.0, -INF),
    (2.0, -150.0, 0.0), (2.0, -149.0, 2.0**-149), (NAN, 1.0, NAN), (4.0, 0.5, 2.0),
    # The cases a sqrt shortcut for x^0.5 gets wrong, and signed zeros with infinite exponents.
    (-INF, 0.5, INF), (-0.0, 0.5, 0.0), (-INF, -0.5, 0.0), (-0.0, -0.5, INF), (-0.0, INF, 0.0), (-0.0, -INF, INF),
    (-INF, -INF, 0.0), (-INF, INF, INF), (0.5, -INF, INF), (-0.5, INF, 0.0), (-2.0, -INF, 0.0), (-2.0, 2.0, 4.0),
]


def test_pow_special_values():
    x = np.array([p[0] for p in POW_SPECIALS], np.float32)
    e = np.array([p[1] for p in POW_SPECIALS], np.float32)
    want = np.array([p[2] for p in POW_SPECIALS], np.float32)
    for got in (dmlcli.run("pow", x, e),
                np.array([dmlcli.run("constant_pow", x[i:i + 1], exponent=float(e[i]))[0] for i in range(x.size)])):
        assert np.array_equal(np.isnan(got), np.isnan(want)), got
        keep = ~np.isnan(want)
        assert_bits(got[keep], want[keep])


def test_pow_scale_bias():
    # A float base: (x*Scale + Bias)^e; the exponent is not scaled.
    x = np.array([1.0, 2.0, -1.0], np.float32)
    e = np.array([2.0, 3.0, 2.0], np.float32)
    got = dmlcli.run("pow", x, e, scale=2, bias=0.5)
    assert_bits(got, np.array([6.25, 4.5**3, 2.25], np.float32))
    # An integer base: x*Scale + Bias in double, back to the base's type (toward zero, wrapped), then exact.
    xi = np.array([2, 3, -2, 0, 4, 100], np.int8)
    ei = np.array([7, 5, 1, -1, 2, 1], np.int32)
    want = [r_int_pow(scaled_integer(int(a), 1.5, 0.25, "int8"), int(b), "int8") for a, b in zip(xi, ei)]
    got = dmlcli.run("pow", xi, ei, scale=1.5, bias=0.25)
    assert got.tolist() == want == [wrap(3**7, "int8"), wrap(4**5, "int8"), -2, -1, 36, wrap(150, "int8")]
    # int32 values past 2^24 keep their low bits (float64, not float32); Scale 0.1 is the FLOAT32 0.1.
    big = np.array([16777217, -2147483648, 1000], np.int32)
    got = dmlcli.run("pow", big, np.ones(3, np.int32), scale=1, bias=0.5)
    assert got.tolist() == [16777217, -2147483647, 1000]  # -2147483647.5 truncated toward zero
    got = dmlcli.run("pow", big, np.ones(3, np.uint8), scale=0.1)
    assert got.tolist() == [scaled_integer(int(v), 0.1, 0.0, "int32") for v in big] == [1677721, -214748368, 100]
    got = dmlcli.run("pow", np.array([5, 7], np.uint16), np.array([0.5, 2.0], np.float32), scale=-1.0, bias=NAN)
    assert got.tolist() == [0, 0]  # NaN scaled base -> 0, then 0^0.5 = 0 and 0^2 = 0


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_constant_pow_random(dtype):
    @SETTINGS
    @given(st.lists(floats_of(dtype), min_size=1, max_size=20),
           st.one_of(st.floats(width=32), st.integers(-6, 6).map(float), st.sampled_from([0.5, -0.5, 1 / 3])))
    def check(values, exponent):
        x = np.array(values, dtype)
        want = np.array([round_to(r_pow(float(v), f32(exponent)), dtype) for v in x], dtype)
        assert_matches("CONSTANT_POW", dmlcli.run("constant_pow", x, exponent=exponent), want)

    check()


def test_constant_pow_exponent_edges():
    x = np.array([-2.0, -0.0, 0.0, 0.5, 2.0, NAN, INF], np.float32)
    assert_bits(dmlcli.run("constant_pow", x), x)  # the default Exponent 1 leaves the input (and NaN) as it is
    assert_bits(dmlcli.run("constant_pow", x, exponent=0), np.ones(7, np.float32))
    got = dmlcli.run("constant_pow", x, exponent=-1)
    assert_bits(got[:5], np.array([-0.5, -INF, INF, 2.0, 0.5], np.float32))
    got = dmlcli.run("constant_pow", x, exponent=0.5)
    assert np.isnan(got[0]) and got[6] == INF and got[4] == np.float32(f32(math.sqrt(2)))
    assert_bits(got[1:3], np.array([0.0, 0.0], np.float32))
    got = dmlcli.run("constant_pow", np.array([1.0, 2.0, -1.0, 0.5], np.float32), exponent="inf")
    assert got.tolist() == [1.0, INF, 1.0, 0.0]
    got = dmlcli.run("constant_pow", np.array([1.0, 2.0], np.float32), exponent="nan")
    assert got[0] == 1.0 and np.isnan(got[1])
    # The Exponent is a FLOAT: 0.1 is rounded to FLOAT32 before the power.
    assert_bits(dmlcli.run("constant_pow", np.array([10.0], np.float32), exponent=0.1),
                np.array([f32(10.0 ** f32(0.1))], np.float32))
    assert_bits(dmlcli.run("constant_pow", np.array([-2.0], np.float16), exponent=3),
                np.array([-8.0], np.float16))
    assert_bits(dmlcli.run("constant_pow", np.array([300.0], np.float16), exponent=2), np.array([INF], np.float16))


def test_pow_broadcast_and_strided_views():
    base = np.arange(1, 13, dtype=np.float32).reshape(3, 4)[:, ::2]  # a non-contiguous view
    exponent = np.array([0.5, -2.0], np.float32)
    got = dmlcli.run("pow", base, exponent, broadcast=True)
    want = np.array([[round_to(r_pow(float(a), float(b)), "float32") for a, b in zip(row, exponent)] for row in base],
                    np.float32)
    assert_bits(got, want)


def test_streamed_in_small_chunks(tmp_path):
    values = np.linspace(-5, 5, 1001, dtype=np.float32)
    np.save(tmp_path / "x.npy", values)
    dmlcli.run_files("erf", [str(tmp_path / "x.npy")], str(tmp_path / "y.npy"), chunk_bytes=256, scale=0.5)
    assert_bits(np.load(tmp_path / "y.npy"), expected_unary("ERF", values, "float32", (0.5, 0.0)))


# ---------------------------------------------------------------- validation: a second transcription of B2

LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL11 = "FLOAT64 FLOAT32 FLOAT16 INT64 INT32 INT16 INT8 UINT64 UINT32 UINT16 UINT8".split()
F = {"FLOAT32", "FLOAT16"}
EIGHT = F | {"INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"}
SINCE_1_0 = [("3_0", range(1, 9), F), ("1_0", {4}, F)]
SINCE_2_0 = [("3_0", range(1, 9), F), ("2_0", {4}, F)]
PAGE_ROWS = {
    **{name: SINCE_1_0 for name in ("ACOS", "ASIN", "ATAN", "COS", "SIN", "TAN", "EXP", "LOG", "CONSTANT_POW")},
    **{name: SINCE_2_0 for name in ("ERF", "SINH", "COSH", "TANH", "ASINH", "ACOSH", "ATANH")},
    "ATAN_YX": [("3_1", range(1, 9), F)],
}


def page_row(rows_, at):
    found = [row for row in rows_ if LEVELS.index(row[0]) <= LEVELS.index(at)]
    return found[0] if found else None


def accepted(op, inputs, at) -> bool:
    try:
        plan(op, inputs, feature_level=at)
        return True
    except dmlcli.ValidationError:
        return False


@pytest.mark.parametrize("name", sorted(PAGE_ROWS))
def test_support_table_grid(name):
    arity = 2 if name == "ATAN_YX" else 1
    for at in LEVELS:
        row = page_row(PAGE_ROWS[name], at)
        for type_name in ALL11:
            data_type = parse_data_type(type_name)
            for rank in (1, 4):
                want = row is not None and type_name in row[2] and rank in row[1]
                got = accepted(name, [(data_type, (2,) * rank)] * arity, at)
                assert got == want, (name, at, type_name, rank)


def pow_page_accepts(at, base, exponent, rank) -> bool:
    if LEVELS.index(at) >= LEVELS.index("3_0"):
        return base in EIGHT and exponent in EIGHT and 1 <= rank <= 8
    # 1_0 to 2_1: FLOAT32/FLOAT16, 4 dimensions, and "ExponentTensor must match the type of InputTensor".
    return base in F and exponent == base and rank == 4


MIXED_FLOATS_BELOW_3_0 = [(at, base, exponent) for at in ("1_0", "2_0", "2_1") for base in sorted(F)
                          for exponent in sorted(F) if base != exponent]


def test_pow_support_table_grid():
    for at in LEVELS:
        for base in ALL11:
            for exponent in ALL11:
                for rank in (1, 4):
                    inputs = [(parse_data_type(base), (3,) * rank), (parse_data_type(exponent), (3,) * rank)]
                    assert accepted("POW", inputs, at) == pow_page_accepts(at, base, exponent, rank), \
                        (at, base, exponent, rank)


@pytest.mark.parametrize("at, base, exponent", MIXED_FLOATS_BELOW_3_0)
def test_pow_below_3_0_refuses_mixed_float_types(at, base, exponent):
    inputs = [(parse_data_type(base), (3, 3, 3, 3)), (parse_data_type(exponent), (3, 3, 3, 3))]
    assert not accepted("POW", inputs, at)


def test_output_type_and_lowest_level():
    f32t, f16t, i8t = (parse_data_type(t) for t in ("FLOAT32", "FLOAT16", "INT8"))
    assert plan("pow", [(i8t, (3,)), (f32t, (3,))]).call.output.data_type == i8t
    assert plan("pow", [(f16t, (3,)), (i8t, (3,))]).call.output.data_type == f16t
    assert plan("pow", [(f32t, (1, 2, 3, 4)), (f32t, (1, 2, 3, 4))]).lowest_feature_level.short == "1_0"
    assert plan("pow", [(f32t, (3,)), (i8t, (3,))]).lowest_feature_level.short == "3_0"
    assert plan("erf", [(f16t, (1, 2, 3, 4))]).lowest_feature_level.short == "2_0"
    assert plan("atan_yx", [(f16t, (2, 2)), (f16t, (2, 2))]).lowest_feature_level.short == "3_1"
    for bad in (lambda: plan("pow", [(f32t, (3,)), (f32t, (3,))], output_dtype="float16"),
                lambda: plan("sin", [(f32t, (3,))], output_dtype="float16"),
                lambda: plan("atan_yx", [(f32t, (3,)), (f16t, (3,))])):
        with pytest.raises(dmlcli.ValidationError):
            bad()


# ---------------------------------------------------------------- ONNX vectors

MINE = {"acos", "asin", "atan", "atan_yx", "cos", "sin", "tan", "exp", "log", "erf", "sinh", "cosh", "tanh", "asinh",
        "acosh", "atanh", "pow", "constant_pow"}
ONNX = sorted(p for p in (SHARED / "conformance" / "onnx_elementwise").glob("*.json")
              if json.loads(p.read_text())["op"] in MINE)


def test_every_onnx_vector_is_here(shared_dir):
    assert len(ONNX) == 42


@pytest.mark.parametrize("path", shared_params(ONNX), ids=lambda p: p.stem)
def test_onnx_vector(path):
    case = json.loads(path.read_text())
    inputs = [tensor_from_object(t, where=path.name) for t in case["inputs"]]
    expected = tensor_from_object(case["expected"], where=path.name)
    call = lambda: dmlcli.run(case["op"], *inputs, broadcast=case.get("broadcast", False), **case["params"])  # noqa: E731
    if case["directml_support"].startswith("unsupported"):
        with pytest.raises(dmlcli.ValidationError, match="INT64|UINT64"):
            call()
        return
    got = call()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    tolerance = case["tolerance"]
    if tolerance.get("exact"):
        assert_bits(got, expected)
        return
    g, e = got.astype(np.float64), expected.astype(np.float64)
    same = (g == e) | (np.isnan(g) & np.isnan(e))
    close = np.abs(g - e) <= tolerance["atol"] + tolerance["rtol"] * np.abs(e)
    assert np.all(same | close), path.name
    # The case gives the lowest level whose table accepts the data types; ranks other than 4 need 3_0.
    lowest = plan(case["op"], [(parse_data_type(str(t.dtype)), t.shape) for t in inputs],
                  broadcast=case.get("broadcast", False), **case["params"]).lowest_feature_level.short
    for_types = case["directml_support"].removeprefix("DML_FEATURE_LEVEL_")
    rank_4 = all(len(got.shape) == 4 for _ in inputs)
    assert lowest == (for_types if rank_4 else max(for_types, "3_0", key=LEVELS.index))


# ---------------------------------------------------------------- the command line


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def test_cli_constant_pow_exponent():
    result = invoke("run", "constant_pow", "[1.5, 3, 7]", "--dtype", "float32", "--exponent", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "float32", "shape": [3], "data": [2.25, 9.0, 49.0]}
    result = invoke("run", "constant_pow", "[4, -8]", "--dtype", "float32", "--exponent", "-0.5", "--format", "json")
    assert json.loads(result.stdout)["data"] == [0.5, "nan"]


def test_cli_scale_and_bias():
    result = invoke("run", "log", "[1, 2]", "--dtype", "float32", "--scale", "2", "--bias", "-1", "--format", "json")
    assert result.exit_code == 0, result.output
    assert [np.float32(v) for v in json.loads(result.stdout)["data"]] == [0.0, np.float32(f32(math.log(3.0)))]
    result = invoke("run", "exp", "[0, 1]", "--dtype", "float16", "--bias", "1", "--format", "json")
    assert [np.float16(v) for v in json.loads(result.stdout)["data"]] == [np.float16(round_to(math.e, "float16")),
                                                                           np.float16(round_to(math.exp(2), "float16"))]
    result = invoke("run", "pow", '{"dtype": "int8", "shape": [3], "data": [2, 3, -2]}',
                    '{"dtype": "uint8", "shape": [3], "data": [7, 5, 7]}', "--scale", "1", "--format", "json")
    assert json.loads(result.stdout) == {"dtype": "int8", "shape": [3], "data": [-128, -13, -128]}


def test_cli_refuses_parameters_the_operator_lacks():
    assert invoke("run", "sin", "[1]", "--dtype", "float32", "--exponent", "2").exit_code == 2
    assert invoke("run", "atan_yx", "[1]", "[1]", "--dtype", "float32", "--scale", "2").exit_code == 2
    result = invoke("run", "pow", '{"dtype": "int64", "shape": [1], "data": [2]}',
                    '{"dtype": "int64", "shape": [1], "data": [2]}')
    assert result.exit_code == 3, result.output


def test_cli_check_uses_the_declared_tolerance(tmp_path):
    got = dmlcli.run("exp", np.array([1.0, 2.0], np.float32))
    near = (got.view(np.int32) + np.array([30, -30], np.int32)).view(np.float32)
    far = (got.view(np.int32) + np.array([0, 40], np.int32)).view(np.float32)
    for expected, code in ((near, 0), (far, 1)):
        (tmp_path / "e.json").write_text(json.dumps({"dtype": "float32", "shape": [2], "data": expected.tolist()}))
        result = invoke("run", "exp", "[1, 2]", "--dtype", "float32", "--check", str(tmp_path / "e.json"))
        assert result.exit_code == code, result.output


def test_cli_describe_shows_the_decisions():
    result = invoke("describe", "pow")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Until 3_0 ExponentTensor must match the type of InputTensor" in text
    assert "all bits set" in text and "wrapped modulo 2^width" in text
    text = " ".join(invoke("describe", "atan_yx").output.split())
    assert "atan2(+-0, -0) = +-pi" in text
    text = " ".join(invoke("describe", "log").output.split())
    assert "-0.0 too" in text and "x*Scale + Bias in FLOAT32" in text


def test_erf_sums_each_element_to_its_own_precision_in_a_tensor_of_mixed_magnitudes():
    # Most elements small (a few terms each), some near 4 (about 90): each element's series runs until its own
    # terms are negligible, and each element's error stays a few double ULP, far below FLOAT32's.
    from dmlcli.operators.elementwise.transcendental import _erf

    rng = np.random.default_rng(31)
    x = np.concatenate([rng.uniform(-0.5, 0.5, 900), rng.uniform(-3.99, 3.99, 100), [0.0, -0.0, 1e-30, 3.999]])
    got = _erf(x)
    want = np.array([math.erf(v) for v in x])
    assert np.all(np.abs(got - want) <= 16 * np.spacing(np.abs(want)) + 1e-300)  # a few double ULP near 4
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))


@pytest.mark.parametrize("apart", [None, 2.0**-12])  # 2^-12: a band so wide that most elements take the series
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_erf_rounded_gives_the_series_bits_rounded_once(monkeypatch, dtype, apart):
    # ERF's kernel rounds a Horner evaluation where it is far enough from a rounding boundary and sums the series
    # elsewhere: every element must be _erf's own double rounded once, whatever path it takes.
    from dmlcli.operators.elementwise import transcendental

    if apart is not None:
        monkeypatch.setattr(transcendental, "_ERF_APART", apart)
    rng = np.random.default_rng(47)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 4.0, -4.0, np.nextafter(4.0, 0), 3.9, 1e-310, -5e-324,
                1e-30, 2.0, -0.5, 0.5, float(np.finfo(np.float32).tiny), -1.0]
    x = np.concatenate([rng.standard_normal(3000), rng.uniform(-4.5, 4.5, 3000), rng.standard_normal(500) * 1e-4,
                        (rng.standard_normal(500) * 2).astype(dtype).astype(np.float64), specials])
    want = transcendental._to_float_result(transcendental._erf(x), np.dtype(dtype))
    got = transcendental._erf_rounded(x.reshape(2, -1), np.dtype(dtype))
    assert got.dtype == dtype and got.shape == (2, x.size // 2)
    assert np.array_equal(got.reshape(-1).view(np.uint32 if dtype == np.float32 else np.uint16),
                          want.view(np.uint32 if dtype == np.float32 else np.uint16))


@pytest.mark.parametrize("largest", [1e-3, 0.2, 0.5, 0.51, 1.0, 2.0, 3.99])
def test_erf_rounded_at_the_degree_of_the_tensors_largest_value(largest):
    # The Horner degrees follow the largest |x| of the tensor (and of the elements past the first band): a tensor
    # of small values is summed at a low degree, which must still give every element the series' bits.
    from dmlcli.operators.elementwise import transcendental

    rng = np.random.default_rng(int(largest * 1000))
    x = np.concatenate([rng.uniform(-largest, largest, 20000), [largest, -largest, 0.0, -0.0]])
    x = x.astype(np.float32).astype(np.float64)
    want = transcendental._to_float_result(transcendental._erf(x), np.dtype(np.float32))
    got = transcendental._erf_rounded(x, np.dtype(np.float32))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
