"""MAX, MIN, CLIP, CLIP1, THRESHOLD, CLIP_GRAD, CLIP_GRAD1, IF, CEIL, FLOOR, ROUND.

Every expected value comes from an independent reference written here, element by element, on
Python floats and integers (struct for float32/float16 rounding, fractions for exact comparisons),
never from dmlcli's kernels. All these operators are exact, so results are compared bit for bit
(any NaN matching any NaN, except where a test pins the bits). The support tables are transcribed
a second time below, in another shape, and checked against acceptance at every feature level.
"""

import json
import math
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

from conftest import SHARED, SHARED_MISSING

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL = "float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8".split()
F = ["float32", "float16"]
T8 = F + ["int32", "int16", "int8", "uint32", "uint16", "uint8"]
T10 = T8 + ["int64", "uint64"]
ANY = "1-8"

# ---------------------------------------------------------------- the support tables, transcribed again
# operator: (inputs, [(level, dims, types of every tensor but IF's condition)], newest first)
TABLES = {
    "MAX": (2, [("5_0", ANY, T10), ("3_0", ANY, T8), ("2_1", "4", T8), ("1_0", "4", F)]),
    "MIN": (2, [("5_0", ANY, T10), ("3_0", ANY, T8), ("2_1", "4", T8), ("1_0", "4", F)]),
    "CLIP": (1, [("5_0", ANY, T10), ("3_0", ANY, T8), ("2_1", "4", T8), ("1_0", "4", F)]),
    "CLIP1": (1, [("5_0", ANY, T10)]),
    "THRESHOLD": (1, [("3_0", ANY, T8), ("2_1", "4", T8), ("1_0", "4", F)]),
    "CLIP_GRAD": (2, [("5_0", ANY, T10), ("3_1", ANY, T8)]),
    "CLIP_GRAD1": (2, [("5_0", ANY, T10)]),
    # 2_0: the page's FLOAT16-only row read as FLOAT32 + FLOAT16; 2_1: the history's integer types.
    "IF": (3, [("5_0", ANY, ALL), ("3_0", ANY, T8), ("2_1", "4", T8), ("2_0", "4", F)]),
    "CEIL": (1, [("3_0", ANY, F), ("1_0", "4", F)]),
    "FLOOR": (1, [("3_0", ANY, F), ("1_0", "4", F)]),
    "ROUND": (1, [("3_0", ANY, F), ("2_1", "4", F)]),
}
ENUMS = {"MAX": 21, "MIN": 23, "CLIP": 8, "CLIP1": 153, "THRESHOLD": 32, "CLIP_GRAD": 142, "CLIP_GRAD1": 154,
         "IF": 88, "CEIL": 7, "FLOOR": 12, "ROUND": 99}
OPTIONS = {"MAX": [], "MIN": [], "CLIP": ["scale", "bias", "min", "max"],
           "CLIP1": ["scale", "bias", "min_max_data_type", "min", "max"], "THRESHOLD": ["scale", "bias", "min"],
           "CLIP_GRAD": ["min", "max"], "CLIP_GRAD1": ["min_max_data_type", "min", "max"], "IF": [],
           "CEIL": ["scale", "bias"], "FLOOR": ["scale", "bias"], "ROUND": ["rounding_mode"]}


def newest_types(op):
    return TABLES[op][1][0][2]


def expected_accepts(op, level, dtype, rank):
    found = [row for row in TABLES[op][1] if LEVELS.index(row[0]) <= LEVELS.index(level)]
    if not found:
        return False
    _, dims, types = found[0]
    return dtype in types and (1 <= rank <= 8 if dims == ANY else rank == int(dims))


def call_types(op, dtype):
    n = TABLES[op][0]
    if op == "IF":
        return ["uint8", dtype, dtype]
    return [dtype] * n


@pytest.mark.parametrize("op", sorted(TABLES))
def test_validation_grid(op):
    failures = []
    for level in LEVELS:
        for dtype in ALL:
            for rank in (1, 4):
                inputs = [(parse_data_type(t), (2,) * rank) for t in call_types(op, dtype)]
                want = expected_accepts(op, level, dtype, rank)
                try:
                    verdict = plan(op, inputs, feature_level=level)
                    got = True
                except dmlcli.ValidationError as error:
                    got = False
                    if want is False and "supported" not in str(error) and "not available" not in str(error):
                        failures.append(f"{op} {level} {dtype} {rank}: odd message {error}")
                if got != want:
                    failures.append(f"{op} {level} {dtype} rank {rank}: accepted={got}, expected {want}")
                elif got:
                    lowest = next(lv for lv in LEVELS if expected_accepts(op, lv, dtype, rank))
                    if verdict.lowest_feature_level.short != lowest:
                        failures.append(f"{op} {level} {dtype} {rank}: lowest {verdict.lowest_feature_level}")
    assert not failures, "\n".join(failures[:20])


def test_if_condition_must_be_uint8_and_a_b_out_one_type():
    shape = (2, 2)
    for dtype in ALL:
        inputs = [(parse_data_type(dtype), shape), (parse_data_type("float32"), shape), (parse_data_type("float32"), shape)]
        if dtype == "uint8":
            plan("if", inputs)
        else:
            with pytest.raises(dmlcli.ValidationError, match=f"ConditionTensor data type {dtype.upper()} is not supported"):
                plan("if", inputs)
    with pytest.raises(dmlcli.ValidationError, match="ATensor data type FLOAT32 and BTensor data type FLOAT16 differ"):
        plan("if", [(parse_data_type("uint8"), shape), (parse_data_type("float32"), shape),
                    (parse_data_type("float16"), shape)])


def test_entries():
    for name, enum in ENUMS.items():
        op = dmlcli.find_operator(name)
        assert op.enum_value == enum
        assert op.dml_name == f"DML_OPERATOR_ELEMENT_WISE_{name}"
        assert op.family == "arithmetic"
        assert op.exactness == "exact" and op.tolerance is None
        assert list(op.options) == OPTIONS[name]
        assert op.introduced.short == TABLES[name][1][-1][0]
        assert op.in_place == (name != "IF")
        assert op.notes
    assert dmlcli.find_operator("clip_grad").output == "OutputGradientTensor"
    assert dmlcli.find_operator("if").inputs == ("ConditionTensor", "ATensor", "BTensor")


# ---------------------------------------------------------------- the reference


def is_float(dtype):
    return np.dtype(dtype).kind == "f"


def rounded(value: float, dtype) -> float:
    """A Python float rounded once (to nearest even) to float32 or float16; overflow gives an infinity."""
    if math.isnan(value) or math.isinf(value) or dtype == "float64":
        return value
    fmt = {"float32": "<f", "float16": "<e"}[dtype]
    try:
        return struct.unpack(fmt, struct.pack(fmt, value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def f32(value: float) -> float:
    return rounded(value, "float32")


def limits(dtype):
    if is_float(dtype):
        big = {"float32": 3.4028234663852886e38, "float16": 65504.0, "float64": 1.7976931348623157e308}[dtype]
        return -big, big
    bits = np.dtype(dtype).itemsize * 8
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if np.dtype(dtype).kind == "i" else (0, (1 << bits) - 1)


def fmax(a, b):
    """D3D max: a NaN loses; max(-0, +0) = +0."""
    if math.isnan(b):
        return a
    if math.isnan(a):
        return b
    if a == b == 0:
        return -0.0 if (math.copysign(1, a) < 0 and math.copysign(1, b) < 0) else 0.0
    return a if a > b else b


def fmin(a, b):
    if math.isnan(b):
        return a
    if math.isnan(a):
        return b
    if a == b == 0:
        return 0.0 if (math.copysign(1, a) > 0 and math.copysign(1, b) > 0) else -0.0
    return a if a < b else b


def wrap(value: int, dtype) -> int:
    bits = np.dtype(dtype).itemsize * 8
    value %= 1 << bits
    if np.dtype(dtype).kind == "i" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def scaled(x, dtype, scale_bias):
    """The reference ScaleBias: floats in float32 (two roundings); integers in float64, truncated, wrapped."""
    if scale_bias is None:
        return x
    scale, bias = (f32(float(v)) for v in scale_bias)
    if is_float(dtype):
        return f32(f32(x * scale) + bias)
    value = float(x) * scale + bias  # Python floats are float64: each step rounded once
    if math.isnan(value) or math.isinf(value):
        return 0
    return wrap(math.trunc(value), dtype)


def whole_bound(bound: float, dtype, upper: bool) -> int:
    low, high = limits(dtype)
    if math.isnan(bound):
        return high if upper else low
    if math.isinf(bound):
        return high if bound > 0 else low
    exact = Fraction(bound)
    whole = math.floor(exact) if upper else math.ceil(exact)
    return min(max(whole, low), high)


def ref_clip(x, dtype, low, high, scale_bias=None, float_bounds=True):
    g = scaled(x, dtype, scale_bias)
    if is_float(dtype):
        return rounded(fmin(high, fmax(low, g)), dtype)
    if float_bounds:
        low, high = whole_bound(low, dtype, False), whole_bound(high, dtype, True)
    return min(high, max(low, g))


def ref_threshold(x, dtype, low, scale_bias=None):
    g = scaled(x, dtype, scale_bias)
    if is_float(dtype):
        return rounded(fmax(g, low), dtype)
    return max(g, whole_bound(low, dtype, False))


def ref_clip_grad(x, gradient, dtype, low, high):
    # Python compares ints with floats exactly (and NaN compares false), so this is the exact rule.
    return gradient if low < x < high else (0.0 if is_float(dtype) else 0)


def signed_zero(result, x):
    return math.copysign(0.0, x) if result == 0 else float(result)


def ref_round(x, mode):
    if math.isnan(x) or math.isinf(x):
        return x
    exact = Fraction(x)
    if mode == "halves_to_nearest_even":
        whole = round(exact)  # Fraction rounds halves to even
    elif mode == "toward_zero":
        whole = math.trunc(exact)
    else:
        whole = math.floor(abs(exact) + Fraction(1, 2)) * (1 if x >= 0 else -1)
    return signed_zero(whole, x)


def ref_whole(x, dtype, function, scale_bias=None):
    g = scaled(x, dtype, scale_bias)
    if math.isnan(g) or math.isinf(g):
        return g
    return rounded(signed_zero(function(Fraction(g)), g), dtype)


# ---------------------------------------------------------------- comparing


def as_python(value, dtype):
    return float(value) if is_float(dtype) else int(value)


def assert_elements(got, expected, dtype, context=""):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), context
    flat = got.reshape(-1)
    assert len(flat) == len(expected), context
    for index, (g, e) in enumerate(zip(flat, expected)):
        g = as_python(g, dtype)
        if is_float(dtype):
            ok = (math.isnan(g) and math.isnan(e)) or (g == e and math.copysign(1, g) == math.copysign(1, e))
        else:
            ok = g == e
        assert ok, f"{context} element {index}: got {g!r}, expected {e!r}"


def values_of(array):
    return [as_python(v, array.dtype) for v in array.reshape(-1)]


# ---------------------------------------------------------------- strategies and special values


def element_strategy(dtype):
    if dtype == "float16":  # every half, from its bits (st.floats(width=16) filters too much)
        return st.integers(0, 0xFFFF).map(lambda bits: struct.unpack("<e", struct.pack("<H", bits))[0])
    if dtype in ("float32", "float64"):
        width = {"float32": 32, "float64": 64}[dtype]
        return st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)
    low, high = limits(dtype)
    return st.one_of(st.integers(low, high), st.integers(max(low, -4), min(high, 4)), st.sampled_from([low, high]))


def arrays(dtype, size=None):
    count = st.integers(1, 12) if size is None else st.just(size)
    return count.flatmap(lambda n: st.lists(element_strategy(dtype), min_size=n, max_size=n))


def bound_strategy():
    return st.one_of(st.floats(width=32), st.sampled_from([0.0, -0.0, 2.5, -2.5, 1e-45, -1e-45, 255.5, -128.5,
                                                           2.0 ** 31, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 1e30]))


def special(dtype):
    if is_float(dtype):
        low, high = limits(dtype)
        tiny = {"float32": 1e-45, "float16": 2.0 ** -24, "float64": 5e-324}[dtype]
        values = [0.0, -0.0, math.inf, -math.inf, math.nan, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, high, low, tiny, -tiny,
                  1.0, -1.0, 3.0]
        if dtype == "float32":
            values += [0.49999997, -0.49999997, 1.1754944e-38, 8388609.0, 16777216.0]
        return [rounded(v, dtype) for v in values]
    low, high = limits(dtype)
    return sorted({low, low + 1, -1 if low < 0 else 2, 0, 1, 2, 3, high - 1, high})


def array(values, dtype):
    return np.array(values, dtype=dtype)


def run(op, *inputs, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return dmlcli.run(op, *inputs, **params)


# ---------------------------------------------------------------- MAX / MIN


@pytest.mark.parametrize("dtype", newest_types("MAX"))
@SETTINGS
@given(data=st.data())
def test_max_min(dtype, data):
    n = data.draw(st.integers(1, 12))
    a = data.draw(arrays(dtype, n))
    b = data.draw(arrays(dtype, n))
    got_max = run("max", array(a, dtype), array(b, dtype))
    got_min = run("min", array(a, dtype), array(b, dtype))
    if is_float(dtype):
        assert_elements(got_max, [fmax(x, y) for x, y in zip(a, b)], dtype, "max")
        assert_elements(got_min, [fmin(x, y) for x, y in zip(a, b)], dtype, "min")
    else:
        assert_elements(got_max, [max(x, y) for x, y in zip(a, b)], dtype, "max")
        assert_elements(got_min, [min(x, y) for x, y in zip(a, b)], dtype, "min")


@pytest.mark.parametrize("dtype", newest_types("MAX"))
def test_max_min_special_values(dtype):
    values = special(dtype)
    a = [x for x in values for _ in values]
    b = [y for _ in values for y in values]
    reference = (fmax, fmin) if is_float(dtype) else (max, min)
    assert_elements(run("max", array(a, dtype), array(b, dtype)), [reference[0](x, y) for x, y in zip(a, b)], dtype)
    assert_elements(run("min", array(a, dtype), array(b, dtype)), [reference[1](x, y) for x, y in zip(a, b)], dtype)


def test_max_min_nan_and_signed_zero_by_hand():
    a = np.array([np.nan, 1.0, -0.0, 0.0, np.nan], np.float32)
    b = np.array([2.0, np.nan, 0.0, -0.0, np.nan], np.float32)
    got = run("max", a, b)
    assert got[:4].tolist() == [2.0, 1.0, 0.0, 0.0] and np.isnan(got[4])
    assert [math.copysign(1, v) for v in got[2:4]] == [1, 1]
    got = run("min", a, b)
    assert got[:4].tolist() == [2.0, 1.0, 0.0, 0.0] and [math.copysign(1, v) for v in got[2:4]] == [-1, -1]
    # 64-bit integers compare exactly (2^63 - 1 and 2^63 - 2 are one double apart from nothing).
    big = np.array([2 ** 63 - 1, -2 ** 63], np.int64)
    assert run("max", big, np.array([2 ** 63 - 2, -2 ** 63 + 1], np.int64)).tolist() == [2 ** 63 - 1, -2 ** 63 + 1]
    ubig = np.array([2 ** 64 - 1], np.uint64)
    assert run("min", ubig, np.array([2 ** 64 - 2], np.uint64)).tolist() == [2 ** 64 - 2]


# ---------------------------------------------------------------- CLIP / THRESHOLD


@pytest.mark.parametrize("dtype", newest_types("CLIP"))
@SETTINGS
@given(data=st.data())
def test_clip(dtype, data):
    x = data.draw(arrays(dtype))
    low, high = data.draw(bound_strategy()), data.draw(bound_strategy())
    use_scale = data.draw(st.booleans())
    scale_bias = (data.draw(st.floats(-8, 8, width=32)), data.draw(st.floats(-300, 300, width=32))) if use_scale else None
    params = {"min": repr(low), "max": repr(high)}
    if scale_bias:
        params.update(scale=repr(scale_bias[0]), bias=repr(scale_bias[1]))
    got = run("clip", array(x, dtype), **params)
    assert_elements(got, [ref_clip(v, dtype, low, high, scale_bias) for v in x], dtype, f"clip {params}")


@pytest.mark.parametrize("dtype", newest_types("CLIP"))
def test_clip_special_values_and_bound_edges(dtype):
    x = special(dtype)
    tiny = 1e-45
    for low, high in [(-2.5, 2.5), (3.0, -3.0), (math.nan, 1.0), (-1.0, math.nan), (-math.inf, math.inf),
                      (tiny, -tiny), (-tiny, tiny), (-(2.0 ** 63), 2.0 ** 64), (2.0 ** 31, 2.0 ** 32), (-0.0, 0.0),
                      (0.0, -0.0), (-3.4028234663852886e38, 3.4028234663852886e38), (2.2, 2.8)]:
        got = run("clip", array(x, dtype), min=repr(low), max=repr(high))
        assert_elements(got, [ref_clip(v, dtype, low, high) for v in x], dtype, f"clip [{low}, {high}]")


def test_clip_by_hand():
    x = np.array([-4, -3, -2, -1, 0, 1, 2, 3, 4, np.nan], np.float32)
    assert run("clip", x, min=-2.5, max=2.5).tolist() == [-2.5, -2.5, -2, -1, 0, 1, 2, 2.5, 2.5, -2.5]
    # Min > Max: every element becomes Max (ONNX's test_clip_min_greater_than_max).
    assert run("clip", x, min=3, max=1).tolist() == [1.0] * 10
    # Integer tensors: ceil(Min), floor(Max); bounds beyond the type saturate.
    i8 = np.array([-128, -3, -2, 0, 2, 3, 127], np.int8)
    assert run("clip", i8, min=-2.5, max=2.5).tolist() == [-2, -2, -2, 0, 2, 2, 2]
    assert run("clip", i8, min=-1e30, max=1e30).tolist() == i8.tolist()
    assert run("clip", i8, min=1e30, max=2e30).tolist() == [127] * 7
    assert run("clip", i8, min=2.2, max=2.8).tolist() == [2] * 7  # no integer in [2.2, 2.8]: floor(Max)
    assert run("clip", np.array([0, 1], np.uint8), min=1e-45, max=5).tolist() == [1, 1]  # ceil of a subnormal
    # INT64 with bounds near 2^63: float32 2^63 is above the largest INT64, so nothing is clipped.
    i64 = np.array([2 ** 63 - 1, -2 ** 63, 2 ** 62 + 1], np.int64)
    assert run("clip", i64, min=-(2.0 ** 63), max=2.0 ** 63).tolist() == i64.tolist()
    assert run("clip", i64, min=0, max=2.0 ** 62).tolist() == [2 ** 62, 0, 2 ** 62]
    # FLOAT16: a float32 bound is rounded once to float16.
    assert run("clip", np.array([0.0, 1.0], np.float16), min=0.1, max=0.5).tolist() == [
        np.float16(0.1).item(), 0.5]


def test_clip_default_bounds_and_scale_bias():
    x = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
    assert run("clip", x).tolist() == [3.4028234663852886e38, -3.4028234663852886e38, 1.0, -3.4028234663852886e38]
    # ScaleBias first, in float32: 1.5 * 3 - 1 = 3.5 -> clipped to 3; -0.0 * 1 + 0 = +0.0 (without ScaleBias: -0.0).
    assert run("clip", np.array([1.5, 0.5], np.float32), scale=3, bias=-1, min=-10, max=3).tolist() == [3.0, 0.5]
    zero = run("clip", np.array([-0.0], np.float32), min=-1, max=1)
    assert math.copysign(1, zero[0]) == -1
    zero = run("clip", np.array([-0.0], np.float32), scale=1, min=-1, max=1)
    assert math.copysign(1, zero[0]) == 1
    # Integer ScaleBias: float64, truncated toward zero, wrapped into the type: 100 * 3 + 0.5 = 300.5 -> 300 -> 44.
    assert run("clip", np.array([100, -7], np.int8), scale=3, bias=0.5, min=-1000, max=1000).tolist() == [44, -20]
    # FLOAT16 + ScaleBias: g = 2049 in float32, rounded once to float16 at the end (2048, halves to even).
    assert run("clip", np.array([2048], np.float16), scale=1, bias=1).tolist() == [2048.0]


@pytest.mark.parametrize("dtype", newest_types("THRESHOLD"))
@SETTINGS
@given(data=st.data())
def test_threshold(dtype, data):
    x = data.draw(arrays(dtype))
    low = data.draw(bound_strategy())
    scale_bias = data.draw(st.one_of(st.none(), st.tuples(st.floats(-4, 4, width=32), st.floats(-9, 9, width=32))))
    params = {"min": repr(low)}
    if scale_bias:
        params.update(scale=repr(scale_bias[0]), bias=repr(scale_bias[1]))
    got = run("threshold", array(x, dtype), **params)
    assert_elements(got, [ref_threshold(v, dtype, low, scale_bias) for v in x], dtype, f"threshold {params}")


def test_threshold_by_hand():
    x = np.array([-3, -1, 0, 2, np.nan, -np.inf], np.float32)
    assert run("threshold", x, min=-1.5).tolist() == [-1.5, -1, 0, 2, -1.5, -1.5]
    assert run("threshold", np.array([-5, 7, 1], np.int32), min=1.5).tolist() == [2, 7, 2]
    assert run("threshold", np.array([-5, 7], np.int32), min="nan").tolist() == [-5, 7]
    assert run("threshold", np.array([0, 3], np.uint16), min=-1e9).tolist() == [0, 3]


# ---------------------------------------------------------------- CLIP1


@pytest.mark.parametrize("dtype", newest_types("CLIP1"))
@SETTINGS
@given(data=st.data())
def test_clip1(dtype, data):
    x = data.draw(arrays(dtype))
    low, high = data.draw(element_strategy(dtype)), data.draw(element_strategy(dtype))
    got = run("clip1", array(x, dtype), min=repr(low), max=repr(high), min_max_data_type=dtype)
    assert_elements(got, [ref_clip(v, dtype, low, high, float_bounds=False) for v in x], dtype, f"clip1 [{low}, {high}]")


@pytest.mark.parametrize("dtype", newest_types("CLIP1"))
def test_clip1_defaults_are_the_type_limits(dtype):
    x = special(dtype)
    low, high = limits(dtype)
    got = run("clip1", array(x, dtype))
    assert_elements(got, [ref_clip(v, dtype, low, high, float_bounds=False) for v in x], dtype)


def test_clip1_by_hand():
    # 64-bit bounds are read exactly: a double would make 2^63 - 2 and 2^63 - 1 the same number.
    i64 = np.array([2 ** 63 - 1, 2 ** 63 - 2, -2 ** 63], np.int64)
    assert run("clip1", i64, min=-2 ** 63 + 1, max=2 ** 63 - 2).tolist() == [2 ** 63 - 2, 2 ** 63 - 2, -2 ** 63 + 1]
    u64 = np.array([2 ** 64 - 1, 5], np.uint64)
    assert run("clip1", u64, min=6, max=2 ** 64 - 2).tolist() == [2 ** 64 - 2, 6]
    # FLOAT16 bounds are rounded once to float16 (0.1 -> 0.0999755859375), NaN -> min(Max, Min).
    got = run("clip1", np.array([0.0, np.nan, 1.0], np.float16), min=0.1, max=0.5)
    assert got.tolist() == [0.0999755859375, 0.0999755859375, 0.5]
    assert run("clip1", np.array([1, 5, 9], np.int8), min=6, max=2).tolist() == [2, 2, 2]  # Min > Max: Max
    # ScaleBias, then the typed bounds: 2 * 1.5 + 0.25 = 3.25.
    assert run("clip1", np.array([2.0], np.float32), scale=1.5, bias=0.25, min=0, max=10).tolist() == [3.25]
    assert run("clip1", np.array([5, 200], np.uint8), scale=2, bias=0).tolist() == [10, 144]  # 400 wraps


def test_min_max_data_type_must_match():
    x = np.array([1.0], np.float16)
    for spelling in ("float16", "FLOAT16", "DML_TENSOR_DATA_TYPE_FLOAT16", np.float16, parse_data_type("float16")):
        verdict = dmlcli.validate("clip1", x, min_max_data_type=spelling)
        assert verdict.call.parameters["MinMaxDataType"] == "FLOAT16"
    with pytest.raises(dmlcli.InputError, match="MinMaxDataType FLOAT32 must match OutputTensor data type FLOAT16"):
        dmlcli.run("clip1", x, min_max_data_type="float32")
    with pytest.raises(dmlcli.InputError, match="MinMaxDataType INT8 must match InputTensor data type FLOAT16"):
        dmlcli.run("clip_grad1", x, x, min_max_data_type="int8")
    with pytest.raises(dmlcli.InputError, match="unknown data type"):
        dmlcli.run("clip1", x, min_max_data_type="float17")
    with pytest.raises(dmlcli.InputError, match="out of range for int8"):
        dmlcli.run("clip1", np.array([1], np.int8), min=-129)
    with pytest.raises(dmlcli.InputError, match="not an integer"):
        dmlcli.run("clip1", np.array([1], np.int8), min=1.5)


def test_scalar_union_desc_forms():
    from dmlcli.operators.elementwise.selection import CLIP1_MIN

    f16 = {"OutputTensor": parse_data_type("float16")}
    f32 = {"OutputTensor": parse_data_type("float32")}
    i32 = {"OutputTensor": parse_data_type("int32")}
    u64 = {"OutputTensor": parse_data_type("uint64")}
    assert CLIP1_MIN.parse_desc(2, f16) == np.float16(2)
    assert CLIP1_MIN.parse_desc({"UInt16": 0x3C00}, f16) == np.float16(1.0)  # a half's bits
    assert CLIP1_MIN.parse_desc({"Bytes": [0x00, 0xC0]}, f16) == np.float16(-2.0)
    assert CLIP1_MIN.parse_desc({"Float32": 1.5}, f32) == np.float32(1.5)
    assert CLIP1_MIN.parse_desc({"float32": "-inf"}, f32) == -np.inf
    # Another member: its little-endian bytes, zero-filled to 8, read as the tensor's type.
    assert CLIP1_MIN.parse_desc({"Int8": -3}, i32) == 253
    assert CLIP1_MIN.parse_desc({"Float32": 1.0}, i32) == 0x3F800000
    assert CLIP1_MIN.parse_desc({"Int64": -1}, u64) == 2 ** 64 - 1
    assert CLIP1_MIN.parse_desc({"UInt64": 2 ** 64 - 1}, u64) == 2 ** 64 - 1
    value = CLIP1_MIN.parse_desc({"Float32": 1.5}, f16)  # 0x3FC00000: the low two bytes are 0
    assert value.dtype == np.float16 and value == 0
    for bad, message in [({"Float16": 1}, "unknown union member"), ({"Int8": 1, "UInt8": 2}, "one union member"),
                         ({"Bytes": [256]}, "Bytes must be"), ({"Bytes": [0] * 9}, "Bytes must be"),
                         ({"Int8": 300}, "out of range for int8"), ({"UInt16": 1.5}, "not an integer")]:
        with pytest.raises(dmlcli.InputError, match=message):
            CLIP1_MIN.parse_desc(bad, f16)


# ---------------------------------------------------------------- CLIP_GRAD / CLIP_GRAD1


@pytest.mark.parametrize("dtype", newest_types("CLIP_GRAD"))
@SETTINGS
@given(data=st.data())
def test_clip_grad(dtype, data):
    n = data.draw(st.integers(1, 10))
    x, gradient = data.draw(arrays(dtype, n)), data.draw(arrays(dtype, n))
    low, high = data.draw(bound_strategy()), data.draw(bound_strategy())
    got = run("clip_grad", array(x, dtype), array(gradient, dtype), min=repr(low), max=repr(high))
    assert_elements(got, [ref_clip_grad(v, g, dtype, low, high) for v, g in zip(x, gradient)], dtype,
                    f"clip_grad ({low}, {high})")


@pytest.mark.parametrize("dtype", newest_types("CLIP_GRAD1"))
@SETTINGS
@given(data=st.data())
def test_clip_grad1(dtype, data):
    n = data.draw(st.integers(1, 10))
    x, gradient = data.draw(arrays(dtype, n)), data.draw(arrays(dtype, n))
    low, high = data.draw(element_strategy(dtype)), data.draw(element_strategy(dtype))
    got = run("clip_grad1", array(x, dtype), array(gradient, dtype), min=repr(low), max=repr(high))
    assert_elements(got, [ref_clip_grad(v, g, dtype, low, high) for v, g in zip(x, gradient)], dtype,
                    f"clip_grad1 ({low}, {high})")


def test_clip_grad_by_hand():
    x = np.array([-2, -1.5, 0, 1.5, 2, np.nan], np.float32)
    g = np.array([10, 20, -0.0, 40, 50, 60], np.float32)
    got = run("clip_grad", x, g, min=-1.5, max=1.5)
    assert got.tolist() == [0, 0, 0, 0, 0, 0]  # strict: x == Min and x == Max give 0; NaN gives 0
    got = run("clip_grad", x, g, min=-1.6, max=1.6)
    assert got.tolist() == [0, 20, 0, 40, 0, 0] and math.copysign(1, got[2]) == -1  # the gradient's own -0.0
    assert math.copysign(1, run("clip_grad", x, g, min=5, max=6)[2]) == 1  # outside: +0.0
    i64 = np.array([2 ** 63 - 1, 2 ** 62, -2 ** 63], np.int64)
    ones = np.ones(3, np.int64)
    # float32 2^63 is above every INT64, so x < 2^63 holds for 2^63 - 1 (a double would say 2^63 < 2^63).
    assert run("clip_grad", i64, ones, min=-(2.0 ** 63), max=2.0 ** 63).tolist() == [1, 1, 0]
    assert run("clip_grad", np.array([0, 1, 2], np.uint8), np.full(3, 7, np.uint8), min=0.5, max=1.5).tolist() == [0, 7, 0]
    assert run("clip_grad", np.array([1], np.int32), np.array([7], np.int32), min="nan", max=5).tolist() == [0]
    assert run("clip_grad1", np.array([1, 2, 3], np.int16), np.array([4, 5, 6], np.int16), min=1, max=3).tolist() == [0, 5, 0]


# ---------------------------------------------------------------- IF


@pytest.mark.parametrize("dtype", newest_types("IF"))
@SETTINGS
@given(data=st.data())
def test_if(dtype, data):
    n = data.draw(st.integers(1, 12))
    condition = data.draw(st.lists(st.sampled_from([0, 1, 2, 128, 255]), min_size=n, max_size=n))
    a, b = data.draw(arrays(dtype, n)), data.draw(arrays(dtype, n))
    got = run("if", array(condition, "uint8"), array(a, dtype), array(b, dtype))
    assert_elements(got, [x if c != 0 else y for c, x, y in zip(condition, a, b)], dtype, "if")


def test_if_copies_bits():
    nan_a = np.array([0x7FC00001, 0xFFC12345, 0x80000000], np.uint32).view(np.float32)
    nan_b = np.array([0x7F800001, 0x00000001, 0x7F7FFFFF], np.uint32).view(np.float32)
    got = run("if", np.array([1, 0, 7], np.uint8), nan_a, nan_b)
    assert got.view(np.uint32).tolist() == [0x7FC00001, 0x00000001, 0x80000000]
    f64 = run("if", np.array([0, 3], np.uint8), np.array([1.5, 2 ** -1074], np.float64), np.array([-0.0, 9.0]))
    assert f64.tolist() == [-0.0, 2 ** -1074] and math.copysign(1, f64[0]) == -1


# ---------------------------------------------------------------- CEIL / FLOOR / ROUND


@pytest.mark.parametrize("dtype", F)
@SETTINGS
@given(data=st.data())
def test_ceil_floor_round(dtype, data):
    x = data.draw(arrays(dtype))
    scale_bias = data.draw(st.one_of(st.none(), st.tuples(st.floats(-64, 64, width=32), st.floats(-9, 9, width=32))))
    params = {} if scale_bias is None else {"scale": repr(scale_bias[0]), "bias": repr(scale_bias[1])}
    assert_elements(run("ceil", array(x, dtype), **params), [ref_whole(v, dtype, math.ceil, scale_bias) for v in x], dtype)
    assert_elements(run("floor", array(x, dtype), **params), [ref_whole(v, dtype, math.floor, scale_bias) for v in x],
                    dtype)
    for mode in ("halves_to_nearest_even", "toward_zero", "toward_infinity"):
        assert_elements(run("round", array(x, dtype), rounding_mode=mode), [ref_round(v, mode) for v in x], dtype, mode)


@pytest.mark.parametrize("dtype", F)
def test_ceil_floor_round_special_values(dtype):
    x = special(dtype) + [rounded(v, dtype) for v in (0.5000001, 1023.5, -1023.5, 4096.5, 0.99999994)]
    assert_elements(run("ceil", array(x, dtype)), [ref_whole(v, dtype, math.ceil) for v in x], dtype)
    assert_elements(run("floor", array(x, dtype)), [ref_whole(v, dtype, math.floor) for v in x], dtype)
    for mode in ("halves_to_nearest_even", "toward_zero", "toward_infinity"):
        assert_elements(run("round", array(x, dtype), rounding_mode=mode), [ref_round(v, mode) for v in x], dtype, mode)


def test_round_by_hand():
    x = np.array([0.49999997, 2.5, -2.5, 1.5, -0.5, -0.0, -0.4, 0.5], np.float32)
    away = run("round", x, rounding_mode="toward_infinity")
    assert away.tolist() == [0.0, 3.0, -3.0, 2.0, -1.0, -0.0, -0.0, 1.0]
    assert [math.copysign(1, v) for v in away[5:7]] == [-1, -1]
    assert run("round", x).tolist() == [0.0, 2.0, -2.0, 2.0, -0.0, -0.0, -0.0, 0.0]  # default: halves to even
    assert run("round", x, rounding_mode="toward_zero").tolist() == [0.0, 2.0, -2.0, 1.0, -0.0, -0.0, -0.0, 0.0]
    for spelling in ("TOWARD_INFINITY", "DML_ROUNDING_MODE_TOWARD_INFINITY", "2", 2):
        assert dmlcli.validate("round", x, rounding_mode=spelling).call.parameters["RoundingMode"] == "TOWARD_INFINITY"
    with pytest.raises(dmlcli.InputError, match="unknown RoundingMode 'up'"):
        dmlcli.run("round", x, rounding_mode="up")
    assert run("ceil", np.array([1e-45, -0.5, -1e-45], np.float32)).tolist() == [1.0, -0.0, -0.0]
    assert run("floor", np.array([1e-45, -1e-45, 0.5], np.float32)).tolist() == [0.0, -1.0, 0.0]
    assert run("ceil", np.array([0.3], np.float16), scale=4, bias=0.25).tolist() == [2.0]  # 0.2998 * 4 + 0.25 = 1.449


# ---------------------------------------------------------------- the command line


def cli_json(*args):
    result = CliRunner().invoke(cli, ["run", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_parameters_on_the_command_line():
    assert cli_json("clip", "[1.5, -3, 7]", "--dtype", "float32", "--min", "0", "--max", "2")["data"] == [1.5, 0.0, 2.0]
    assert cli_json("clip", "[1.5, -3, 7]", "--dtype", "float32", "--min", "0", "--max", "2", "--scale", "2",
                    "--bias", "-1")["data"] == [2.0, 0.0, 2.0]
    assert cli_json("clip", "[-7, 7]", "--dtype", "int8", "--min", "-2.5", "--max", "2.5")["data"] == [-2, 2]
    assert cli_json("clip1", "[1, 5, 9]", "--dtype", "uint64", "--min", "2", "--max", "18446744073709551614",
                    "--min-max-data-type", "UINT64")["data"] == [2, 5, 9]
    assert cli_json("threshold", "[-1, 4]", "--dtype", "float16", "--min", "0.5")["data"] == [0.5, 4.0]
    assert cli_json("round", "[2.5, -2.5]", "--dtype", "float32", "--rounding-mode", "toward_infinity")["data"] == [3.0, -3.0]
    assert cli_json("round", "[2.5, -2.5]", "--dtype", "float32")["data"] == [2.0, -2.0]
    assert cli_json("ceil", "[0.25]", "--dtype", "float32", "--scale", "4", "--bias", "0.5")["data"] == [2.0]
    assert cli_json("floor", "[-0.25]", "--dtype", "float32")["data"] == [-1.0]
    assert cli_json("clip_grad", "[0, 1, 2]", "[5, 6, 7]", "--dtype", "int32", "--min", "0", "--max", "2")["data"] == [0, 6, 0]
    assert cli_json("max", "[1, -0.0]", "[2, 0.0]", "--dtype", "float32")["data"] == [2.0, 0.0]
    assert cli_json("if", '{"dtype": "uint8", "data": [1, 0]}', '{"dtype": "int64", "data": [1, 2]}',
                    '{"dtype": "int64", "data": [3, 4]}')["data"] == [1, 4]
    result = CliRunner().invoke(cli, ["run", "clip1", "[1]", "--dtype", "float16", "--min-max-data-type", "float32"])
    assert result.exit_code != 0 and "MinMaxDataType FLOAT32 must match OutputTensor data type FLOAT16" in result.output
    result = CliRunner().invoke(cli, ["run", "max", "[1]", "[2]", "--dtype", "float32", "--min", "3"])
    assert result.exit_code != 0 and "MAX has no min parameter" in result.output


def test_describe_prints_the_decisions():
    result = CliRunner().invoke(cli, ["describe", "if"])
    assert result.exit_code == 0
    assert "FLOAT16 alone" in result.output and "cond != 0 ? a : b" in result.output
    result = CliRunner().invoke(cli, ["describe", "round"])
    assert "halves away from zero" in result.output and "0.49999997" in result.output


# ---------------------------------------------------------------- DxDispatch models


def dispatch_lines(model_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", str(model_path), "--no-timing"])
    return result, [line for line in result.stdout.splitlines() if not line.startswith("Dispatch '")]


@pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_MISSING)
def test_shared_models(tmp_path, monkeypatch):
    models = SHARED / "dxdispatch_models"
    # FLOAT16 sequence 1, 2, 3, 4, 5 clipped to [2, 4] by CLIP1 (MinMaxDataType FLOAT16, plain-number bounds).
    result, lines = dispatch_lines(models / "dml_scalar_union_fp16.json", tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert lines == ["Resource 'output': 2, 2, 3, 4, 4"]
    # -4..4 clipped to [-2.5, 2.5] in place.
    result, lines = dispatch_lines(models / "dml_element_wise_clip.json", tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert lines == ["Resource 'A': -2.5, -2.5, -2, -1, 0, 1, 2, 2.5, 2.5"]


def tensor(dtype, sizes):
    return {"DataType": dtype, "Sizes": sizes}


def test_own_model_with_union_forms(tmp_path, monkeypatch):
    model = {
        "resources": {
            "H": {"initialValuesDataType": "FLOAT16", "initialValues": [-3, 0.5, 1.5, 8]},
            "HOut": {"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 4, "value": 0}},
            "I": {"initialValuesDataType": "INT32", "initialValues": [-300, 5, 200, 1000]},
            "IOut": {"initialValuesDataType": "INT32", "initialValues": {"valueCount": 4, "value": 0}},
            "G": {"initialValuesDataType": "INT32", "initialValues": [1, 2, 3, 4]},
            "R": {"initialValuesDataType": "FLOAT32", "initialValues": [0.49999997, 2.5, -2.5, -0.5]},
        },
        "dispatchables": {
            # Min = 0x3C00 = 1.0 (a half's bits), Max = bytes 00 44 = 0x4400 = 4.0.
            "clip_h": {"type": "DML_OPERATOR_ELEMENT_WISE_CLIP1", "desc": {
                "InputTensor": tensor("FLOAT16", [4]), "OutputTensor": tensor("FLOAT16", [4]),
                "MinMaxDataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "Min": {"UInt16": 15360}, "Max": {"Bytes": [0, 68]},
                "ScaleBias": {"Scale": 2, "Bias": 0}}},
            # Int32 bounds from Int32 members; ScaleBias absent.
            "clip_i": {"type": "DML_OPERATOR_ELEMENT_WISE_CLIP1", "desc": {
                "InputTensor": tensor("INT32", [4]), "OutputTensor": tensor("INT32", [4]),
                "MinMaxDataType": "INT32", "Min": {"Int32": -100}, "Max": 300}},
            "grad": {"type": "DML_OPERATOR_ELEMENT_WISE_CLIP_GRAD1", "desc": {
                "InputTensor": tensor("INT32", [4]), "InputGradientTensor": tensor("INT32", [4]),
                "OutputGradientTensor": tensor("INT32", [4]), "MinMaxDataType": "INT32", "Min": -300, "Max": 1000}},
            "round": {"type": "DML_OPERATOR_ELEMENT_WISE_ROUND", "desc": {
                "InputTensor": tensor("FLOAT32", [4]), "OutputTensor": tensor("FLOAT32", [4]),
                "RoundingMode": "TOWARD_INFINITY"}},
        },
        "commands": [
            {"type": "dispatch", "dispatchable": "clip_h", "bindings": {"InputTensor": "H", "OutputTensor": "HOut"}},
            {"type": "print", "resource": "HOut"},
            {"type": "dispatch", "dispatchable": "clip_i", "bindings": {"InputTensor": "I", "OutputTensor": "IOut"}},
            {"type": "print", "resource": "IOut"},
            {"type": "dispatch", "dispatchable": "grad",
             "bindings": {"InputTensor": "I", "InputGradientTensor": "G", "OutputGradientTensor": "G"}},
            {"type": "print", "resource": "G"},
            {"type": "dispatch", "dispatchable": "round", "bindings": {"InputTensor": "R", "OutputTensor": "R"}},
            {"type": "print", "resource": "R"},
        ],
    }
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    result, lines = dispatch_lines(path, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert lines == [
        "Resource 'HOut': 1, 1, 3, 4",  # 2x: -6, 1, 3, 16 clipped to [1, 4]
        "Resource 'IOut': -100, 5, 200, 300",
        "Resource 'G': 0, 2, 3, 0",  # -300 and 1000 sit on the bounds: 0 (strict)
        "Resource 'R': 0, 3, -3, -1",
    ]
    model["dispatchables"]["clip_i"]["desc"]["MinMaxDataType"] = "FLOAT32"
    path.write_text(json.dumps(model))
    result, _ = dispatch_lines(path, tmp_path, monkeypatch)
    assert result.exit_code != 0
    assert "MinMaxDataType FLOAT32 must match OutputTensor data type INT32" in result.output


# ---------------------------------------------------------------- GPU source


def test_cuda_sources_are_generated_for_every_signature():
    from dmlcli.backends import gpu_kernels

    counts = {"MAX": 10, "MIN": 10, "CLIP": 10, "CLIP1": 10, "THRESHOLD": 8, "CLIP_GRAD": 10, "CLIP_GRAD1": 10,
              "IF": 11, "CEIL": 2, "FLOOR": 2, "ROUND": 2}
    for name, count in counts.items():
        op = dmlcli.find_operator(name)
        signatures = gpu_kernels.signatures(op)
        assert len(signatures) == count, name
        source = gpu_kernels.module_source(op)
        for signature in signatures:
            assert f"dml_apply_{'_'.join(signature)}(" in source
        # No compiler-made float rounding or float -> double conversion that -ftz could flush.
        assert "ceilf(" not in op.cuda_helpers and "floorf(" not in op.cuda_helpers and "roundf(" not in op.cuda_helpers
    if_sig = gpu_kernels.signatures(dmlcli.find_operator("if"))
    assert ("uint8", "float64", "float64", "float64") in if_sig
