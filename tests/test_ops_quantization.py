"""QUANTIZE_LINEAR, DEQUANTIZE_LINEAR, QUANTIZED_LINEAR_ADD.

The reference below works on Python floats and integers, element by element: float32 rounding with
struct (a float32 division or product computed in double and rounded once to float32 is the
correctly rounded float32 result, since 53 >= 2*24 + 2), rint with Python's round (halves to even),
saturation with min/max. dmlcli defines these operators step by step in float32, so the integer
outputs must match exactly and the float outputs bit for bit. The support tables are transcribed a
second time here and checked against acceptance at every feature level, optional zero points included.
"""

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

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL = "float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8".split()
INTS6 = "int32 int16 int8 uint32 uint16 uint8".split()
ANY = "1-8"

# ---------------------------------------------------------------- the support tables, transcribed again
# (level, dims, input, scale, zero point, output, zero point optional)
QUANTIZE_ROWS = [
    ("6_2", ANY, "float32 float16 int32", "float32 float16", "int8 uint8", "int8 uint8", True),
    ("6_0", ANY, "float32 float16 int32", "float32 float16", "int8 uint8", "int8 uint8", False),
    ("3_0", ANY, "float32 int32", "float32", "int8 uint8", "int8 uint8", False),
    ("2_1", "4", "float32 int32", "float32", "int8 uint8", "int8 uint8", False),
    ("1_0", "4", "float32", "float32", "uint8", "uint8", False),
]
DEQUANTIZE_ROWS = [
    ("6_2", ANY, " ".join(INTS6), "float32 float16", " ".join(INTS6), "float32 float16", True),
    ("6_0", ANY, " ".join(INTS6), "float32 float16", " ".join(INTS6), "float32 float16", False),
    ("3_0", ANY, " ".join(INTS6), "float32", " ".join(INTS6), "float32", False),
    ("2_1", "4", " ".join(INTS6), "float32", " ".join(INTS6), "float32", False),
    ("1_0", "4", "uint8", "float32", "uint8", "float32", False),
]


def row_at(rows, level):
    found = [row for row in rows if LEVELS.index(row[0]) <= LEVELS.index(level)]
    return found[0] if found else None


def dims_ok(dims, rank):
    return 1 <= rank <= 8 if dims == ANY else rank == int(dims)


def expect_q(rows, level, rank, x, scale, zero_point, out):
    """Whether DirectML's table accepts the call; zero_point None: left out."""
    row = row_at(rows, level)
    if row is None:
        return False
    _, dims, xs, ss, zs, os_, optional = row
    if zero_point is None and not optional:
        return False
    return (dims_ok(dims, rank) and x in xs.split() and scale in ss.split() and out in os_.split()
            and (zero_point is None or zero_point in zs.split()))


def accepted(op, inputs, level, output_dtype=None):
    try:
        plan(op, [(parse_data_type(t), shape) for t, shape in inputs], feature_level=level, output_dtype=output_dtype)
        return True
    except dmlcli.ValidationError:
        return False


def test_quantize_validation_grid():
    failures = []
    for level in LEVELS:
        for rank in (1, 4):
            shape = (2,) * rank
            for x in ALL:
                for scale in ("float32", "float16", "int32"):
                    for out in ("int8", "uint8", "int16"):
                        got = accepted("quantize_linear", [(x, shape), (scale, shape), (out, shape)], level)
                        if got != expect_q(QUANTIZE_ROWS, level, rank, x, scale, out, out):
                            failures.append(f"{level} rank {rank} {x} {scale} {out}: accepted={got}")
                        got = accepted("quantize_linear", [(x, shape), (scale, shape)], level, output_dtype=out)
                        if got != expect_q(QUANTIZE_ROWS, level, rank, x, scale, None, out):
                            failures.append(f"{level} rank {rank} {x} {scale} no zero point -> {out}: accepted={got}")
    assert not failures, "\n".join(failures[:20])


def test_dequantize_validation_grid():
    failures = []
    for level in LEVELS:
        for rank in (1, 4):
            shape = (2,) * rank
            for x in ALL:
                for scale in ("float32", "float16", "int32"):
                    # The output takes the scale's type (DirectML: OutputTensor and ScaleTensor share one).
                    got = accepted("dequantize_linear", [(x, shape), (scale, shape), (x, shape)], level)
                    if got != expect_q(DEQUANTIZE_ROWS, level, rank, x, scale, x, scale):
                        failures.append(f"{level} rank {rank} {x} {scale}: accepted={got}")
                    got = accepted("dequantize_linear", [(x, shape), (scale, shape)], level)
                    if got != expect_q(DEQUANTIZE_ROWS, level, rank, x, scale, None, scale):
                        failures.append(f"{level} rank {rank} {x} {scale} no zero point: accepted={got}")
    assert not failures, "\n".join(failures[:20])


def test_quantized_linear_add_validation_grid():
    failures = []
    types = ("int8", "uint8", "int16", "float32")
    for level in LEVELS:
        for rank in (1, 3):
            shape = (2,) * rank
            for a in types:
                for b in types:
                    for out in ("int8", "uint8", "int16"):
                        for scale in ("float32", "float16"):
                            want = (LEVELS.index(level) >= LEVELS.index("4_0") and {a, b, out} <= {"int8", "uint8"}
                                    and scale == "float32")
                            inputs = [(a, shape), (scale, shape), (a, shape), (b, shape), (scale, shape), (b, shape),
                                      (scale, shape), (out, shape)]
                            got = accepted("quantized_linear_add", inputs, level)
                            if got != want:
                                failures.append(f"{level} {a} {b} {out} {scale}: accepted={got}")
                            short = [inputs[0], inputs[1], inputs[3], inputs[4], inputs[6]]
                            got = accepted("quantized_linear_add", short, level, output_dtype=out)
                            if got != want:
                                failures.append(f"{level} {a} {b} -> {out} {scale} no zero points: accepted={got}")
    assert not failures, "\n".join(failures[:20])


def test_constraints_and_messages():
    f32, i8, u8 = (parse_data_type(t) for t in ("float32", "int8", "uint8"))
    with pytest.raises(dmlcli.ValidationError, match="ZeroPointTensor data type INT8 and OutputTensor data type UINT8 differ"):
        plan("quantize_linear", [(f32, (4,)), (f32, (4,)), (i8, (4,))], output_dtype="uint8")
    with pytest.raises(dmlcli.ValidationError, match=r"ZeroPointTensor may be left out only from DML_FEATURE_LEVEL_6_2"):
        plan("quantize_linear", [(f32, (4,)), (f32, (4,))], output_dtype="uint8", feature_level="6_0")
    with pytest.raises(dmlcli.ValidationError, match="ScaleTensor data type FLOAT16 and OutputTensor data type FLOAT32 differ"):
        plan("dequantize_linear", [(u8, (4,)), (parse_data_type("float16"), (4,)), (u8, (4,))], output_dtype="float32")
    with pytest.raises(dmlcli.ValidationError, match=r"InputTensor Sizes \[4\] and ScaleTensor Sizes \[1\] differ"):
        plan("quantize_linear", [(f32, (4,)), (f32, (1,)), (u8, (4,))])
    plan("quantize_linear", [(f32, (4,)), (f32, (1,)), (u8, (1,))], broadcast=True)
    with pytest.raises(dmlcli.InputError, match=r"takes 3 or 8 input tensors|takes 5 or 8 input tensors"):
        plan("quantized_linear_add", [(i8, (4,))] * 3)
    with pytest.raises(dmlcli.InputError, match="takes 2 or 3 input tensors"):
        plan("quantize_linear", [(f32, (4,))])


def test_entries():
    expected = {"QUANTIZE_LINEAR": (33, "1_0", "composite", None), "DEQUANTIZE_LINEAR": (34, "1_0", "one rounding", None),
                "QUANTIZED_LINEAR_ADD": (147, "4_0", "composite", None)}
    for name, (enum, introduced, exactness, _) in expected.items():
        op = dmlcli.find_operator(name)
        assert (op.enum_value, op.introduced.short, op.exactness, op.family) == (enum, introduced, exactness, "quantization")
        assert op.tolerance is not None and op.tolerance.source
        assert op.notes and not op.parameters
    assert dmlcli.find_operator("dequantize_linear").tolerance.kind == "ulp"
    assert dmlcli.find_operator("dequantize_linear").tolerance.float32 == 1
    assert dmlcli.find_operator("quantize_linear").tolerance.float32 == 1
    assert dmlcli.find_operator("quantized_linear_add").inputs == (
        "ATensor", "AScaleTensor", "AZeroPointTensor", "BTensor", "BScaleTensor", "BZeroPointTensor",
        "OutputScaleTensor", "OutputZeroPointTensor")


# ---------------------------------------------------------------- the reference


def f32(value: float) -> float:
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def f16(value: float) -> float:
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        return struct.unpack("<e", struct.pack("<e", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def limits(dtype):
    bits = np.dtype(dtype).itemsize * 8
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if np.dtype(dtype).kind == "i" else (0, (1 << bits) - 1)


def div32(x: float, s: float) -> float:
    """The IEEE float32 quotient of two float32 values (Python raises where IEEE gives inf or NaN)."""
    if math.isnan(x) or math.isnan(s) or (math.isinf(x) and math.isinf(s)) or (x == 0 and s == 0):
        return math.nan
    sign = math.copysign(1, x) * math.copysign(1, s)
    if s == 0 or math.isinf(x):
        return sign * math.inf
    if math.isinf(s):
        return sign * 0.0
    return f32(x / s)


def requantize(value: float, zero_point: int, out) -> int:
    low, high = limits(out)
    if math.isnan(value):
        return low
    if math.isinf(value):
        return high if value > 0 else low
    return min(max(round(value) + zero_point, low), high)  # round(): halves to even, exact


def as_float32(value, dtype) -> float:
    return f32(float(value)) if np.dtype(dtype).kind in "iu" else float(value)


def ref_quantize(x, x_type, scale, zero_point, out):
    return requantize(div32(as_float32(x, x_type), float(scale)), zero_point, out)


def ref_dequantize(x, scale, zero_point, out):
    product = f32(f32(float(x - zero_point)) * float(scale))  # exact double product, rounded once
    return f16(product) if out == "float16" else product


def ref_quantized_add(a, a_scale, a_zero, b, b_scale, b_zero, out_scale, out_zero, out):
    a_value = f32(float(a - a_zero) * a_scale)
    b_value = f32(float(b - b_zero) * b_scale)
    return requantize(div32(f32(a_value + b_value), out_scale), out_zero, out)


def assert_elements(got, expected, dtype, context=""):
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), context
    for index, (g, e) in enumerate(zip(got.reshape(-1).tolist(), expected)):
        if np.dtype(dtype).kind == "f":
            ok = (math.isnan(g) and math.isnan(e)) or (g == e and math.copysign(1, g) == math.copysign(1, e))
        else:
            ok = g == e
        assert ok, f"{context} element {index}: got {g!r}, expected {e!r}"
    assert got.size == len(expected)


def run(op, *inputs, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return dmlcli.run(op, *inputs, **options)


# ---------------------------------------------------------------- strategies


def float_values(dtype):
    halves = st.integers(-600, 600).map(lambda k: k / 2)  # ties, after a scale of 1 or 0.5
    if dtype == "float16":
        anything = st.integers(0, 0xFFFF).map(lambda bits: struct.unpack("<e", struct.pack("<H", bits))[0])
        return st.one_of(anything, halves.map(f16))
    return st.one_of(st.floats(width=32), halves, st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e-45]))


def int_values(dtype):
    low, high = limits(dtype)
    return st.one_of(st.integers(low, high), st.sampled_from([low, high, 0]), st.integers(max(low, -9), min(high, 9)))


def values(dtype):
    return float_values(dtype) if np.dtype(dtype).kind == "f" else int_values(dtype)


SCALES = st.one_of(st.sampled_from([1.0, 0.5, 2.0, 0.25, 0.1, 3.0, -1.0, -0.5, 1e-3, 0.0078125, 7.0]),
                   st.floats(width=32, allow_nan=False, allow_infinity=False).filter(lambda s: s != 0))


def scale_values(dtype):
    return SCALES.map(f16).filter(lambda s: s != 0) if dtype == "float16" else SCALES.map(f32)


# ---------------------------------------------------------------- QUANTIZE_LINEAR

QUANTIZE_SIGNATURES = [(x, s, o) for x in ("float32", "float16", "int32") for s in ("float32", "float16")
                       for o in ("int8", "uint8")]


@pytest.mark.parametrize("x_type,scale_type,out", QUANTIZE_SIGNATURES)
@SETTINGS
@given(data=st.data())
def test_quantize(x_type, scale_type, out, data):
    n = data.draw(st.integers(1, 10))
    x = data.draw(st.lists(values(x_type), min_size=n, max_size=n))
    scale = data.draw(st.lists(scale_values(scale_type), min_size=n, max_size=n))
    zero = data.draw(st.lists(int_values(out), min_size=n, max_size=n))
    got = run("quantize_linear", np.array(x, x_type), np.array(scale, scale_type), np.array(zero, out))
    assert_elements(got, [ref_quantize(v, x_type, s, z, out) for v, s, z in zip(x, scale, zero)], out,
                    f"quantize {x_type} {scale_type} {out}")


def test_quantize_by_hand():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300, -300, np.inf, -np.inf, np.nan, 1e-45, 127.5], np.float32)
    ones = np.ones(x.shape, np.float32)
    # Halves to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -1.5 -> -2; NaN -> the lowest value.
    assert run("quantize_linear", x, ones, np.zeros(x.shape, np.uint8)).tolist() == [0, 2, 2, 0, 0, 255, 0, 255, 0, 0, 0, 128]
    assert run("quantize_linear", x, ones, np.full(x.shape, -3, np.int8)).tolist() == [
        -3, -1, -1, -3, -5, 127, -128, 127, -128, -128, -3, 125]
    # INT32 inputs go through float32: 16777217 -> 16777216; / 2^20 = 16 exactly.
    assert run("quantize_linear", np.array([16777217, -5], np.int32), np.array([2.0 ** 20, 2], np.float32),
               np.array([0, 10], np.int8)).tolist() == [16, 8]  # -5/2 = -2.5 -> -2, + 10
    # FLOAT16 input and scale.
    assert run("quantize_linear", np.array([3.0, -7.0], np.float16), np.array([2.0, 2.0], np.float16),
               np.array([1, 1], np.uint8)).tolist() == [3, 0]  # 1.5 -> 2 (+1 = 3); -3.5 -> -4 (+1 = -3 -> 0)


def test_quantize_scale_zero_warns_and_saturates():
    x = np.array([5.0, -5.0, 0.0, 2.0], np.float32)
    scale = np.array([0.0, 0.0, 0.0, -0.0], np.float32)
    with pytest.warns(dmlcli.DmlcliWarning, match=r"QUANTIZE_LINEAR: 4 of 4 output elements use a scale of 0 or NaN"):
        got = dmlcli.run("quantize_linear", x, scale, np.array([1, 1, 1, 1], np.int8))
    assert got.tolist() == [127, -128, -128, -128]  # 5/0 = inf, -5/0 = -inf, 0/0 = NaN, 2/-0 = -inf
    with pytest.warns(dmlcli.DmlcliWarning, match="1 of 3 output elements"):
        dmlcli.run("quantize_linear", np.zeros(3, np.float32), np.array([1, np.nan, 2], np.float32),
                   np.zeros(3, np.uint8))


def test_quantize_zero_point_left_out():
    x = np.array([1.5, -1.5, 1000.0], np.float32)
    scale = np.ones(3, np.float32)
    assert run("quantize_linear", x, scale, output_dtype="int8").tolist() == [2, -2, 127]
    assert run("quantize_linear", x, scale, output_dtype="uint8").tolist() == [2, 0, 255]
    with pytest.raises(dmlcli.ValidationError, match="left out only from DML_FEATURE_LEVEL_6_2"):
        dmlcli.run("quantize_linear", x, scale, output_dtype="uint8", feature_level="6_1")


def test_quantize_zero_point_left_out_defaults_to_uint8():
    """With ZeroPointTensor (which ties the output's type) left out, the output type falls back to UINT8."""
    got = dmlcli.run("quantize_linear", np.array([1.5], np.float32), np.ones(1, np.float32))
    assert got.dtype == np.uint8 and got.tolist() == [2]
    with pytest.raises(dmlcli.ValidationError, match="ScaleTensor Sizes \\[3\\] differ"):
        dmlcli.run("quantize_linear", np.array([1.5, 2], np.float32), np.ones(3, np.float32))


def test_quantized_add_scales_that_cannot_reach_every_element_are_refused():
    """QUANTIZED_LINEAR_ADD's scales and zero points stand outside the same-Sizes rule, but must broadcast."""
    a = np.array([1, 2], np.uint8)
    scale, zero = np.ones(1, np.float32), np.zeros(1, np.uint8)
    ok = dmlcli.run("quantized_linear_add", a, scale, zero, a, scale, zero, scale, zero)
    assert ok.tolist() == [2, 4]
    with pytest.raises(dmlcli.ValidationError, match=r"AScaleTensor Sizes \[3\] do not broadcast to OutputTensor "
                                                     r"Sizes \[2\]; each of its sizes must be 1 or the output's"):
        dmlcli.run("quantized_linear_add", a, np.ones(3, np.float32), zero, a, scale, zero, scale, zero)


def test_quantize_broadcast_scale():
    x = np.array([[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]], np.float32)
    got = run("quantize_linear", x, np.array([0.5], np.float32), np.array([10], np.uint8), broadcast=True)
    assert got.tolist() == [[12, 14, 16], [8, 6, 4]]
    per_column = run("quantize_linear", x, np.array([1.0, 2.0, 4.0], np.float32), np.array([0], np.int8),
                     broadcast=True)
    assert per_column.tolist() == [[1, 1, 1], [-1, -1, -1]]  # 2/2 = 1, 3/4 = 0.75 -> 1, -0.75 -> -1


# ---------------------------------------------------------------- DEQUANTIZE_LINEAR

DEQUANTIZE_SIGNATURES = [(x, s) for x in INTS6 for s in ("float32", "float16")]


@pytest.mark.parametrize("x_type,scale_type", DEQUANTIZE_SIGNATURES)
@SETTINGS
@given(data=st.data())
def test_dequantize(x_type, scale_type, data):
    n = data.draw(st.integers(1, 10))
    x = data.draw(st.lists(int_values(x_type), min_size=n, max_size=n))
    zero = data.draw(st.lists(int_values(x_type), min_size=n, max_size=n))
    scale = data.draw(st.lists(st.one_of(scale_values(scale_type), st.sampled_from([math.inf, math.nan])),
                               min_size=n, max_size=n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dmlcli.DmlcliWarning)
        got = dmlcli.run("dequantize_linear", np.array(x, x_type), np.array(scale, scale_type), np.array(zero, x_type))
    assert_elements(got, [ref_dequantize(v, s, z, scale_type) for v, s, z in zip(x, scale, zero)], scale_type,
                    f"dequantize {x_type} {scale_type}")


def test_dequantize_by_hand():
    got = run("dequantize_linear", np.array([0, 5, 255], np.uint8), np.full(3, 0.5, np.float32), np.full(3, 3, np.uint8))
    assert got.tolist() == [-1.5, 1.0, 126.0]
    # 32-bit differences past 2^24 are rounded to float32 first: 2^32 - 1 - 0 -> 2^32.
    got = run("dequantize_linear", np.array([2 ** 32 - 1], np.uint32), np.ones(1, np.float32), np.zeros(1, np.uint32))
    assert got.tolist() == [4294967296.0]
    got = run("dequantize_linear", np.array([-2 ** 31], np.int32), np.ones(1, np.float32), np.array([2 ** 31 - 1], np.int32))
    assert got.tolist() == [-4294967296.0]  # -2^32 + 1, rounded to float32
    # FLOAT16 output: the float32 product rounded once (70000 overflows float16 to inf).
    got = run("dequantize_linear", np.array([100, 3], np.int16), np.array([700, 0.1], np.float16), np.zeros(2, np.int16))
    assert got.dtype == np.float16 and got[0] == np.inf and got[1] == np.float16(0.2998046875)
    # Zero point left out (6_2): zeros of the input's type.
    assert run("dequantize_linear", np.array([-4, 4], np.int8), np.full(2, 0.25, np.float32)).tolist() == [-1.0, 1.0]
    with pytest.warns(dmlcli.DmlcliWarning, match="DEQUANTIZE_LINEAR: 1 of 2 output elements use a scale of 0"):
        got = dmlcli.run("dequantize_linear", np.array([-4, 4], np.int8), np.array([0.0, 1.0], np.float32))
    assert got.tolist() == [-0.0, 4.0] and math.copysign(1, got[0]) == -1


def test_dequantize_mixed_integer_types_compute_exactly():
    # DirectML ties the zero point's type to the input's; dmlcli does not check that yet, but computes it exactly.
    got = run("dequantize_linear", np.array([4294967295], np.uint32), np.ones(1, np.float32), np.array([-2 ** 31], np.int32))
    assert got.tolist() == [f32(4294967295 + 2 ** 31)]


# ---------------------------------------------------------------- QUANTIZED_LINEAR_ADD

QLA_SIGNATURES = [(a, b, o) for a in ("int8", "uint8") for b in ("int8", "uint8") for o in ("int8", "uint8")]


@pytest.mark.parametrize("a_type,b_type,out", QLA_SIGNATURES)
@SETTINGS
@given(data=st.data())
def test_quantized_linear_add(a_type, b_type, out, data):
    n = data.draw(st.integers(1, 8))
    a = data.draw(st.lists(int_values(a_type), min_size=n, max_size=n))
    b = data.draw(st.lists(int_values(b_type), min_size=n, max_size=n))
    a_scale, b_scale, out_scale = (data.draw(scale_values("float32")) for _ in range(3))
    a_zero, b_zero, out_zero = data.draw(int_values(a_type)), data.draw(int_values(b_type)), data.draw(int_values(out))
    one = (1,)
    got = run("quantized_linear_add", np.array(a, a_type), np.full(one, a_scale, np.float32), np.full(one, a_zero, a_type),
              np.array(b, b_type), np.full(one, b_scale, np.float32), np.full(one, b_zero, b_type),
              np.full(one, out_scale, np.float32), np.full(one, out_zero, out))
    assert_elements(got, [ref_quantized_add(x, a_scale, a_zero, y, b_scale, b_zero, out_scale, out_zero, out)
                          for x, y in zip(a, b)], out, f"qla {a_scale} {b_scale} {out_scale}")


def test_quantized_linear_add_by_hand():
    a = np.array([10, -20, 100, -128], np.int8)
    b = np.array([10, 20, 30, 40], np.uint8)
    f = np.float32
    got = run("quantized_linear_add", a, np.array([0.5], f), np.array([2], np.int8), b, np.array([0.25], f),
              np.array([8], np.uint8), np.array([1.0], f), np.array([-1], np.int8))
    # A: 4, -11, 49, -65; B: 0.5, 3, 5.5, 8; sums 4.5, -8, 54.5, -57 -> 4, -8, 54, -57 (halves to even) - 1.
    assert got.dtype == np.int8 and got.tolist() == [3, -9, 53, -58]
    # Without zero points (all three left out), the output type is chosen.
    got = run("quantized_linear_add", a, np.array([1.0], f), b, np.array([1.0], f), np.array([2.0], f), output_dtype="uint8")
    assert got.tolist() == [10, 0, 65, 0]  # (10 + 10) / 2, (-20 + 20) / 2, 130 / 2, -88 / 2 -> 0
    with pytest.warns(dmlcli.DmlcliWarning, match="QUANTIZED_LINEAR_ADD: 4 of 4 output elements use a scale of 0"):
        got = dmlcli.run("quantized_linear_add", a, np.array([1.0], f), b, np.array([1.0], f), np.array([0.0], f),
                         output_dtype="int8")
    assert got.tolist() == [127, -128, 127, -128]  # 20/0, 0/0 (NaN -> lowest), 130/0, -88/0


# ---------------------------------------------------------------- the command line and DxDispatch


def test_command_line():
    result = CliRunner().invoke(cli, ["run", "quantize_linear", '{"dtype": "float32", "data": [0.5, 1.5, 2.5, 1000]}',
                                      '{"dtype": "float32", "data": [1, 1, 1, 1]}',
                                      '{"dtype": "int8", "data": [0, 0, 0, -10]}', "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "int8", "shape": [4], "data": [0, 2, 2, 127]}
    result = CliRunner().invoke(cli, ["run", "dequantize_linear", '{"dtype": "uint8", "data": [0, 10]}',
                                      '{"dtype": "float16", "data": [0.5, 0.5]}', "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "float16", "shape": [2], "data": [0.0, 5.0]}
    result = CliRunner().invoke(cli, ["run", "quantize_linear", "[1]", "[1]", "--dtype", "float32",
                                      "--output-dtype", "uint8", "--feature-level", "6_0"])
    assert result.exit_code != 0 and "left out only from DML_FEATURE_LEVEL_6_2" in result.output


def test_dispatch_model(tmp_path, monkeypatch):
    def tensor(dtype, sizes, strides=None):
        desc = {"DataType": dtype, "Sizes": sizes}
        if strides is not None:
            desc["Strides"] = strides
        return desc

    model = {
        "resources": {
            "X": {"initialValuesDataType": "FLOAT32", "initialValues": [-1.5, 0.5, 2.5, 300]},
            "S": {"initialValuesDataType": "FLOAT32", "initialValues": [0.5]},
            "Z": {"initialValuesDataType": "UINT8", "initialValues": [3]},
            "Q": {"initialValuesDataType": "UINT8", "initialValues": {"valueCount": 4, "value": 0}},
            "D": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}},
            "A": {"initialValuesDataType": "INT8", "initialValues": [10, -20, 100, -128]},
            "AS": {"initialValuesDataType": "FLOAT32", "initialValues": [0.5]},
            "AZ": {"initialValuesDataType": "INT8", "initialValues": [2]},
            "B": {"initialValuesDataType": "UINT8", "initialValues": [10, 20, 30, 40]},
            "BS": {"initialValuesDataType": "FLOAT32", "initialValues": [0.25]},
            "BZ": {"initialValuesDataType": "UINT8", "initialValues": [8]},
            "OS": {"initialValuesDataType": "FLOAT32", "initialValues": [1.0]},
            "OZ": {"initialValuesDataType": "INT8", "initialValues": [-1]},
            "O": {"initialValuesDataType": "INT8", "initialValues": {"valueCount": 4, "value": 0}},
        },
        "dispatchables": {
            # The scale and zero point are broadcast through zero strides, as DirectML does.
            "quantize": {"type": "DML_OPERATOR_ELEMENT_WISE_QUANTIZE_LINEAR", "desc": {
                "InputTensor": tensor("FLOAT32", [4]), "ScaleTensor": tensor("FLOAT32", [4], [0]),
                "ZeroPointTensor": tensor("UINT8", [4], [0]), "OutputTensor": tensor("UINT8", [4])}},
            "dequantize": {"type": "DML_OPERATOR_ELEMENT_WISE_DEQUANTIZE_LINEAR", "desc": {
                "InputTensor": tensor("UINT8", [4]), "ScaleTensor": tensor("FLOAT32", [4], [0]),
                "ZeroPointTensor": tensor("UINT8", [4], [0]), "OutputTensor": tensor("FLOAT32", [4])}},
            "add": {"type": "DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD", "desc": {
                "ATensor": tensor("INT8", [4]), "AScaleTensor": tensor("FLOAT32", [1]),
                "AZeroPointTensor": tensor("INT8", [1]), "BTensor": tensor("UINT8", [4]),
                "BScaleTensor": tensor("FLOAT32", [1]), "BZeroPointTensor": tensor("UINT8", [1]),
                "OutputScaleTensor": tensor("FLOAT32", [1]), "OutputZeroPointTensor": tensor("INT8", [1]),
                "OutputTensor": tensor("INT8", [4])}},
        },
        "commands": [
            {"type": "dispatch", "dispatchable": "quantize",
             "bindings": {"InputTensor": "X", "ScaleTensor": "S", "ZeroPointTensor": "Z", "OutputTensor": "Q"}},
            {"type": "print", "resource": "Q"},
            {"type": "dispatch", "dispatchable": "dequantize",
             "bindings": {"InputTensor": "Q", "ScaleTensor": "S", "ZeroPointTensor": "Z", "OutputTensor": "D"}},
            {"type": "print", "resource": "D"},
            {"type": "dispatch", "dispatchable": "add",
             "bindings": {"ATensor": "A", "AScaleTensor": "AS", "AZeroPointTensor": "AZ", "BTensor": "B",
                          "BScaleTensor": "BS", "BZeroPointTensor": "BZ", "OutputScaleTensor": "OS",
                          "OutputZeroPointTensor": "OZ", "OutputTensor": "O"}},
            {"type": "print", "resource": "O"},
        ],
    }
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if not line.startswith("Dispatch '")]
    assert lines == [
        "Resource 'Q': 0, 4, 8, 255",  # x / 0.5 = -3, 1, 5, 600; + 3 = 0, 4, 8, 603 -> 255
        "Resource 'D': -1.5, 0.5, 2.5, 126",  # (q - 3) * 0.5
        "Resource 'O': 3, -9, 53, -58",  # worked out in test_quantized_linear_add_by_hand
    ]


def test_cuda_sources_are_generated_for_every_signature():
    from dmlcli.backends import gpu_kernels

    for name, count in {"QUANTIZE_LINEAR": 12, "DEQUANTIZE_LINEAR": 72, "QUANTIZED_LINEAR_ADD": 32}.items():
        op = dmlcli.find_operator(name)
        signatures = gpu_kernels.signatures(op)
        assert len(signatures) == count
        assert "dml_apply_" + "_".join(signatures[0]) + "(" in gpu_kernels.module_source(op, signatures[0])
    assert ("int32", "float32", "int8", "int8") in gpu_kernels.signatures(dmlcli.find_operator("quantize_linear"))
