"""QUANTIZE and DEQUANTIZE (6_3), DYNAMIC_QUANTIZE_LINEAR (4_0) and QUANTIZED_LINEAR_AVERAGE_POOLING (6_2).

Each against: a second transcription of its support table, every rule its shape rule enforces (in words, exit 3 on
the command line), an independent reference written here element by element (Python loops; float64 where a step
is exact, then rounded as the entry's notes say), ONNX's reference implementation for blocked, per-axis and 4-bit
quantization, edge cases (NaN, infinities, zero scales, subnormals, sizes of 1), the command line, the API and a
DxDispatch desc with DirectML.h's field names.
"""

from __future__ import annotations

import itertools
import json
import math

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.cli import cli
from dmlcli.errors import ValidationError
from dmlcli.operators.pooling import quantized as pooling_module
from dmlcli.operators.quantization import entries as module

PROPERTIES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMITS = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15)}
DTYPES = {"int8": np.int8, "uint8": np.uint8, "int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4}


def ints(array) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]


# ---------------------------------------------------------------- the entries

ENTRIES = {  # key: (DML_OPERATOR_TYPE value, introduced, family, parameters' fields)
    "QUANTIZE": (173, "6_3", "quantization", ("QuantizationType",)),
    "DEQUANTIZE": (174, "6_3", "quantization", ("QuantizationType",)),
    "DYNAMIC_QUANTIZE_LINEAR": (148, "4_0", "quantization", ()),
    "QUANTIZED_LINEAR_AVERAGE_POOLING": (169, "6_2", "pooling",
                                         ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations",
                                          "IncludePadding")),
}


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_entry(key):
    op = dmlcli.find_operator(key)
    value, introduced, family, fields = ENTRIES[key]
    assert op.key == key and op.enum_value == value and op.family == family
    assert op.introduced.short == introduced and tuple(p.field for p in op.parameters) == fields
    assert op.notes and not op.is_elementwise
    assert op in module.OPERATORS + pooling_module.OPERATORS


def test_quantization_tensors_are_an_array_counted_by_its_own_field():
    for key in ("QUANTIZE", "DEQUANTIZE"):
        op = dmlcli.find_operator(key)
        assert op.variadic == "QuantizationTensors" and op.variadic_count_field == "QuantizationTensorCount"


# ---------------------------------------------------------------- support tables, a second transcription

F, H, I8, U8, I4, U4 = "float32", "float16", "int8", "uint8", "int4", "uint4"


def _arrays(*specs):
    """Arrays of (dtype name, shape)."""
    return [np.zeros(shape, DTYPES.get(name, name)) for name, shape in specs]


# (operator, input specs, keywords, lowest level that accepts it or None)
SUPPORT = [
    ("quantize", [(F, (2, 4)), (F, (2, 2)), (I4, (2, 2))], {}, "6_3"),
    ("quantize", [(H, (2, 4)), (H, (1, 1)), (U8, (1, 1))], {}, "6_3"),
    ("quantize", [(F, (2, 4)), (F, (1, 1))], {"output_dtype": "uint4"}, "6_3"),
    ("quantize", [(F, (2, 4)), (F, (1, 1))], {"output_dtype": "int16"}, None),
    ("quantize", [(I8, (2, 4)), (F, (1, 1))], {}, None),
    ("quantize", [(F, (1,) * 8), (F, (1,) * 8)], {}, "6_3"),
    ("quantize", [(F, (1,) * 9), (F, (1,) * 9)], {}, None),
    ("dequantize", [(I4, (2, 4)), (F, (2, 1)), (I4, (2, 1))], {}, "6_3"),
    ("dequantize", [(U4, (3,)), (H, (1,))], {}, "6_3"),
    ("dequantize", [(I8, (3,)), (F, (1,)), (I8, (1,))], {}, "6_3"),
    ("dequantize", [(np.int32, (3,)), (F, (1,))], {}, None),
    ("dynamic_quantize_linear", [(F, (3, 4))], {}, "4_0"),
    ("dynamic_quantize_linear", [(H, (1,) * 8)], {"output_dtype": "int8"}, "4_0"),
    ("dynamic_quantize_linear", [(F, (3,))], {"output_dtype": "int4"}, None),
    ("quantized_linear_average_pooling", [(U8, (1, 2, 3, 3)), (F, (1,)), (U8, (1,)), (F, (1, 2, 1, 1)),
                                          (U8, (1,))], {"window_size": [2, 2]}, "6_2"),
    ("quantized_linear_average_pooling", [(I8, (1, 2, 3, 3, 3)), (F, (1,)), (F, (1,))],
     {"window_size": [2, 2, 2], "output_dtype": "int8"}, "6_2"),
    ("quantized_linear_average_pooling", [(I8, (1, 2, 3)), (F, (1,)), (F, (1,))], {"window_size": [2]}, None),
]


@pytest.mark.parametrize("op, specs, keywords, lowest", SUPPORT)
def test_support_rows(op, specs, keywords, lowest):
    arrays = _arrays(*specs)
    if lowest is None:
        with pytest.raises(ValidationError):
            dmlcli.validate(op, *arrays, **keywords)
        return
    assert dmlcli.validate(op, *arrays, **keywords).lowest_feature_level.short == lowest
    below = {"6_3": "6_2", "6_2": "6_1", "4_0": "3_1"}[lowest]
    with pytest.raises(ValidationError, match=f"supported from DML_FEATURE_LEVEL_{lowest}"):
        dmlcli.validate(op, *arrays, feature_level=below, **keywords)


# ---------------------------------------------------------------- the rules, in words

RULES = [
    ("quantize", [(F, (2, 4)), (F, (2, 3))], {}, r"QuantizationTensors\[0\] Sizes \[2, 3\] do not tile InputTensor "
                                                 r"Sizes \[2, 4\]: its size 3 along axis 1 does not divide 4"),
    ("quantize", [(F, (2, 4)), (F, (4,))], {}, r"QuantizationTensors\[0\] has 1 dimensions and InputTensor 2"),
    ("quantize", [(F, (2, 4)), (F, (2, 2)), (I8, (2, 1))], {}, r"QuantizationTensors\[0\] \(the scale\) Sizes "
                                                               r"\[2, 2\] and QuantizationTensors\[1\]"),
    ("quantize", [(F, (2, 4)), (I8, (1, 1))], {}, r"QuantizationTensors\[0\] \(the scale\) data type INT8 is not a "
                                                  r"float type"),
    ("quantize", [(F, (2, 4)), (F, (1, 1)), (I8, (1, 1))], {"quantization_type": "scale"},
     r"QuantizationType SCALE takes 1 tensor in QuantizationTensors \(the scale\); 2 given"),
    ("quantize", [(F, (2, 4)), (F, (1, 1))], {"quantization_type": "scale_zero_point"},
     r"takes 2 tensors in QuantizationTensors \(the scale, then the zero point\); 1 given"),
    ("quantize", [(F, (2, 4)), (F, (1, 1))], {"quantization_type": "none"}, r"QuantizationType NONE gives no scale"),
    ("quantize", [(F, (2, 4)), (F, (1, 1)), (I8, (1, 1))], {"output_dtype": "int4"},
     r"QuantizationTensors\[1\] data type INT8 and OutputTensor data type INT4 differ"),
    ("dequantize", [(U4, (2, 4)), (F, (1, 1)), (I4, (1, 1))], {},
     r"InputTensor data type UINT4 and QuantizationTensors\[1\] data type INT4 differ"),
    ("quantized_linear_average_pooling", [(U8, (1, 2, 3, 3)), (F, (1, 3, 1, 1)), (F, (1,))], {"window_size": [2, 2]},
     r"InputScaleTensor Sizes \[1, 3, 1, 1\] are neither one element \(per tensor\) nor \[1, 2, 1, 1\]"),
    ("quantized_linear_average_pooling", [(U8, (1, 2, 3, 3)), (F, (1,)), (F, (1,))], {"window_size": [4, 4]},
     r"the window spans 4 elements in spatial dimension 0"),
    ("quantized_linear_average_pooling", [(U8, (1, 2, 3, 3)), (F, (1,)), (I8, (1,)), (F, (1,)), (U8, (1,))],
     {"window_size": [2, 2]}, r"InputTensor data type UINT8 and InputZeroPointTensor data type INT8 differ"),
]


@pytest.mark.parametrize("op, specs, keywords, message", RULES)
def test_rules_in_words(op, specs, keywords, message):
    with pytest.raises(ValidationError, match=message):
        dmlcli.validate(op, *_arrays(*specs), **keywords)


def test_a_rule_exits_3_on_the_command_line():
    result = CliRunner().invoke(cli, ["run", "quantize", '{"dtype": "float32", "data": [[1, 2, 3]]}',
                                      '{"dtype": "float32", "data": [[1, 2]]}'])
    assert result.exit_code == 3 and "do not tile InputTensor" in result.output


def test_the_quantization_type_follows_the_tensors_given():
    x, scale = np.ones((2, 2), np.float32), np.ones((1, 1), np.float32)
    assert dmlcli.validate("quantize", x, scale).call.parameters["QuantizationType"] == "SCALE"
    zero = np.zeros((1, 1), np.uint8)
    assert dmlcli.validate("quantize", x, scale, zero).call.parameters["QuantizationType"] == "SCALE_ZERO_POINT"


# ---------------------------------------------------------------- references, element by element


def block_index(index, shape, tensor_shape):
    """The scale element serving input element `index` (each axis: index // (size / its size))."""
    return tuple(i // (n // m) for i, n, m in zip(index, shape, tensor_shape))


def quantize_reference(x, scale, zero, name):
    """float32(x) / float32(scale), correctly rounded to float32 (the float64 quotient of two float32 values rounded
    once to float32 is the float32 quotient), rounded half to even (Python's round), plus the zero point,
    saturated; NaN gives the lowest."""
    lowest, highest = LIMITS[name]
    out = []
    for index in itertools.product(*(range(n) for n in x.shape)):
        at = block_index(index, x.shape, scale.shape)
        with np.errstate(all="ignore"):
            quotient = np.float32(np.float64(np.float32(x[index])) / np.float64(np.float32(scale[at])))
        if math.isnan(quotient):
            out.append(lowest)
            continue
        whole = round(float(quotient)) if math.isfinite(quotient) else (10**6 if quotient > 0 else -10**6)
        total = whole + (int(zero[at]) if zero is not None else 0)
        out.append(min(max(total, lowest), highest))
    return out


def dequantize_reference(x, scale, zero, out_dtype):
    out = []
    for index in itertools.product(*(range(n) for n in x.shape)):
        at = block_index(index, x.shape, scale.shape)
        difference = int(x[index]) - (int(zero[at]) if zero is not None else 0)
        product = np.float32(difference * float(np.float32(scale[at])))  # exact product, rounded once
        out.append(np.asarray(product).astype(out_dtype).item())
    return out


@st.composite
def quantize_calls(draw):
    rank = draw(st.integers(1, 3))
    blocks = [draw(st.sampled_from([1, 1, 2, 3])) for _ in range(rank)]
    per = [draw(st.sampled_from([1, 2])) for _ in range(rank)]
    shape = tuple(b * p for b, p in zip(blocks, per))
    scale_shape = tuple(blocks)
    name = draw(st.sampled_from(sorted(LIMITS)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = (rng.standard_normal(shape) * draw(st.sampled_from([1, 10, 300]))).astype(draw(st.sampled_from([F, H])))
    x.reshape(-1)[::5] = np.asarray(0.5, x.dtype) * rng.integers(-9, 9)  # ties at halves
    scale = rng.choice(np.array([0.5, 1.0, 0.25, 3.0, 0.1], x.dtype), size=scale_shape)
    lowest, highest = LIMITS[name]
    zero = None if draw(st.booleans()) else rng.integers(lowest, highest + 1, scale_shape).astype(DTYPES[name])
    return x, scale, zero, name


@PROPERTIES
@given(quantize_calls())
def test_quantize_against_the_reference(call):
    x, scale, zero, name = call
    arrays = [x, scale] + ([zero] if zero is not None else [])
    result = dmlcli.run("quantize", *arrays, output_dtype=name)
    assert result.dtype == np.dtype(DTYPES[name]) and result.shape == x.shape
    assert ints(result) == quantize_reference(x, scale, zero, name)


@PROPERTIES
@given(quantize_calls(), st.sampled_from([F, H]))
def test_dequantize_against_the_reference(call, out_dtype):
    x, scale, zero, name = call
    lowest, highest = LIMITS[name]
    q = np.random.default_rng(x.size).integers(lowest, highest + 1, x.shape).astype(DTYPES[name])
    scale = scale.astype(out_dtype)
    arrays = [q, scale] + ([zero] if zero is not None else [])
    result = dmlcli.run("dequantize", *arrays)
    assert result.dtype == np.dtype(out_dtype)
    expected = np.array(dequantize_reference(q, scale, zero, out_dtype), out_dtype)
    assert np.array_equal(result.reshape(-1).view(f"uint{result.itemsize * 8}"),
                          expected.view(f"uint{expected.itemsize * 8}"))


def test_quantize_edge_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 7.5, 8.5, -8.5, 1e30], np.float32)
    one = np.ones((1,), np.float32)
    assert ints(dmlcli.run("quantize", x, one, output_dtype="int4")) == [-8, 7, -8, 0, 0, 0, 7, 7, -8, 7]
    assert ints(dmlcli.run("quantize", x, one, output_dtype="uint4")) == [0, 15, 0, 0, 0, 0, 8, 8, 0, 15]
    zero_scale = np.zeros((1,), np.float32)  # x / 0: +-inf saturates, 0 / 0 = NaN gives the lowest
    assert ints(dmlcli.run("quantize", np.array([1.0, -1.0, 0.0], np.float32), zero_scale, output_dtype="int8")) \
        == [127, -128, -128]
    subnormal = np.array([np.finfo(np.float32).smallest_subnormal], np.float32)  # a subnormal scale is a number
    assert ints(dmlcli.run("quantize", np.array([1e-44, 0.0], np.float32), subnormal, output_dtype="uint8")) \
        == [7, 0]


def test_dequantize_edge_values():
    q = np.array([-8, 7, 0], ml_dtypes.int4)
    for scale, expected in ((np.inf, [-np.inf, np.inf, np.nan]), (np.nan, [np.nan] * 3), (0.0, [-0.0, 0.0, 0.0])):
        got = dmlcli.run("dequantize", q, np.array([scale], np.float32))
        assert np.array_equal(got, np.array(expected, np.float32), equal_nan=True)
    assert list(np.signbit(dmlcli.run("dequantize", q, np.zeros(1, np.float32)))) == [True, False, False]
    tiny = np.array([np.finfo(np.float32).smallest_subnormal], np.float32)
    assert dmlcli.run("dequantize", q, tiny).view(np.uint32).tolist() == [0x80000008, 7, 0]


def test_per_axis_and_per_tensor_are_blocks_of_the_whole_axis():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    per_row = np.array([[0.5], [1.0], [2.0]], np.float32)
    assert ints(dmlcli.run("quantize", x, per_row, output_dtype="int8")) == quantize_reference(x, per_row, None, I8)
    per_tensor = np.array([[0.75]], np.float32)
    assert ints(dmlcli.run("quantize", x, per_tensor, output_dtype="int8")) == \
        [min(max(round(v / 0.75), -128), 127) for v in x.reshape(-1).tolist()]


# ---------------------------------------------------------------- ONNX's reference implementation


def onnx_reference(op, inputs, attributes, opset=21):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attributes)
    types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
             np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
             np.dtype(ml_dtypes.int4): TensorProto.INT4, np.dtype(ml_dtypes.uint4): TensorProto.UINT4}
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, types[a.dtype], a.shape)
                                            for n, a in zip(names, inputs)],
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))[0]  # ONNX takes ml_dtypes' int4, uint4


@pytest.mark.parametrize("name, axis, block", [("int8", 1, 2), ("int4", 1, 2), ("uint4", 0, 3), ("int4", 0, 0),
                                               ("uint8", 1, 0)])
def test_quantize_matches_onnx_blocked_and_per_axis(name, axis, block):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((6, 4)) * 12).astype(np.float32)
    if block:
        scale_shape = tuple(n // block if k == axis else n for k, n in enumerate(x.shape))
    else:
        scale_shape = (x.shape[axis],)
    scale = rng.uniform(0.5, 3.0, scale_shape).astype(np.float32)
    lowest, highest = LIMITS[name]
    zero = rng.integers(lowest, highest + 1, scale_shape).astype(DTYPES[name])
    attributes = {"axis": axis, **({"block_size": block} if block else {})}
    expected = onnx_reference("QuantizeLinear", [x, scale, zero], attributes)
    ours_scale = scale if block else scale.reshape([-1 if k == axis else 1 for k in range(x.ndim)])
    ours_zero = zero if block else zero.reshape(ours_scale.shape)
    got = dmlcli.run("quantize", x, ours_scale, ours_zero)
    assert ints(got) == ints(expected)
    back = onnx_reference("DequantizeLinear", [got, scale, zero], attributes)
    assert dmlcli.run("dequantize", got, ours_scale, ours_zero).tolist() == back.tolist()


def test_dynamic_quantize_matches_onnx():
    rng = np.random.default_rng(3)
    pytest.importorskip("onnx")
    for x in (rng.standard_normal((3, 5)).astype(np.float32) * 4, np.array([2.0, 5.0, 7.5], np.float32),
              np.array([-3.0, -0.5], np.float32)):
        from onnx import TensorProto, helper
        from onnx.reference import ReferenceEvaluator

        node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                  [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in "ysz"])
        y, s, z = ReferenceEvaluator(helper.make_model(graph)).run(None, {"x": x})
        got_y, got_s, got_z = dmlcli.run("dynamic_quantize_linear", x)
        assert ints(got_y) == ints(y) and got_s.reshape(()) == s and int(got_z.reshape(())) == int(z)


# ---------------------------------------------------------------- DYNAMIC_QUANTIZE_LINEAR


def dynamic_reference(values, name):
    """The entry's steps in float32, one value at a time: the range widened to 0, NaN left out."""
    lowest, highest = LIMITS[name]
    finite = [np.float32(v) for v in values if not math.isnan(v)]
    low, high = min(finite + [np.float32(0)]), max(finite + [np.float32(0)])
    with np.errstate(all="ignore"):
        scale = np.float32((high - low) / np.float32(highest - lowest))
        start = np.float32(np.float32(lowest) - np.float32(low / scale))
    zero = lowest if math.isnan(start) else min(max(round(float(start)), lowest), highest)
    quantized = quantize_reference(np.array(values, np.float32), np.array([scale], np.float32),
                                   np.array([zero]), name)
    return quantized, scale, zero


@PROPERTIES
@given(st.lists(st.floats(-1e4, 1e4, width=32) | st.sampled_from([np.nan, 0.0, -0.0]), min_size=1, max_size=12),
       st.sampled_from([I8, U8]))
def test_dynamic_quantize_against_the_reference(values, name):
    y, scale, zero = dmlcli.run("dynamic_quantize_linear", np.array(values, np.float32), output_dtype=name)
    expected_y, expected_scale, expected_zero = dynamic_reference(values, name)
    assert y.dtype == np.dtype(name) and zero.dtype == np.dtype(name) and scale.dtype == np.float32
    assert scale.shape == (1,) and zero.shape == (1,)
    assert ints(y) == expected_y and int(zero[0]) == expected_zero
    assert scale.view(np.uint32)[0] == np.array([expected_scale], np.float32).view(np.uint32)[0]


def test_dynamic_quantize_of_zeros_and_of_infinities():
    y, scale, zero = dmlcli.run("dynamic_quantize_linear", np.zeros((2, 3), np.float32), output_dtype="int8")
    assert scale.shape == (1, 1) and float(scale[0, 0]) == 0.0 and int(zero[0, 0]) == -128 and set(ints(y)) == {-128}
    y, scale, zero = dmlcli.run("dynamic_quantize_linear", np.array([np.inf, 1.0], np.float32))
    assert math.isinf(scale[0]) and ints(y) == [0, 0] and int(zero[0]) == 0


def test_dynamic_quantize_of_float16_computes_in_float32():
    x = np.array([-1.5, 0.25, 3.0], np.float16)
    y, scale, zero = dmlcli.run("dynamic_quantize_linear", x)
    assert ints(y) == dynamic_reference(x.astype(np.float32).tolist(), U8)[0]


# ---------------------------------------------------------------- QUANTIZED_LINEAR_AVERAGE_POOLING


def qlap_reference(x, in_scale, in_zero, out_scale, out_zero, window, strides, start, end, dilations, include,
                   name):
    """Each window: the dequantized values (float32 products) summed in float32 in row-major order, padding adding
    0, divided by the window's size or its input elements, then quantized as QUANTIZE_LINEAR."""
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    outs = [(s + a + b - ((k - 1) * d + 1)) // st_ + 1
            for s, a, b, k, d, st_ in zip(spatial, start, end, window, dilations, strides)]
    lowest, highest = LIMITS[name]

    def per(tensor, channel):
        return tensor.reshape(-1)[channel if tensor.size > 1 else 0] if tensor is not None else 0

    result = np.zeros((n, c) + tuple(outs), DTYPES[name])
    for b, ch in itertools.product(range(n), range(c)):
        for position in itertools.product(*(range(o) for o in outs)):
            total, count = np.float32(0), 0
            for offsets in itertools.product(*(range(k) for k in window)):
                coordinate = [p * s_ + o * d - a for p, s_, o, d, a in zip(position, strides, offsets, dilations, start)]
                if all(0 <= q < s for q, s in zip(coordinate, spatial)):
                    value = np.float32(np.float32(int(x[(b, ch) + tuple(coordinate)]) - int(per(in_zero, ch)))
                                       * np.float32(per(in_scale, ch)))
                    total = np.float32(total + value)
                    count += 1
                else:
                    total = np.float32(total + np.float32(0))
            divisor = math.prod(window) if include else count
            average = np.float32(total / np.float32(divisor))
            quotient = np.float32(average / np.float32(per(out_scale, ch)))
            whole = round(float(quotient)) if math.isfinite(quotient) else lowest
            result[(b, ch) + position] = min(max(whole + int(per(out_zero, ch)), lowest), highest)
    return result


@pytest.mark.parametrize("include", [False, True])
@pytest.mark.parametrize("rank, window, strides, start, end, dilations", [
    (4, (2, 2), (1, 1), (0, 0), (0, 0), (1, 1)),
    (4, (3, 2), (2, 1), (1, 0), (1, 1), (1, 2)),
    (5, (2, 2, 2), (1, 2, 1), (0, 1, 0), (1, 0, 0), (1, 1, 1)),
])
@pytest.mark.parametrize("name, per_channel, zeros", [(U8, False, True), (I8, True, True), (U8, True, False)])
def test_quantized_average_pooling_against_the_reference(include, rank, window, strides, start, end, dilations,
                                                         name, per_channel, zeros):
    rng = np.random.default_rng(rank * 7 + len(name))
    shape = (2, 3) + (5,) * (rank - 2)
    lowest, highest = LIMITS[name]
    x = rng.integers(lowest, highest + 1, shape).astype(name)
    channel = (1, 3) + (1,) * (rank - 2) if per_channel else (1,)
    in_scale = rng.uniform(0.05, 0.5, channel).astype(np.float32)
    out_scale = rng.uniform(0.05, 0.5, channel).astype(np.float32)
    in_zero = rng.integers(lowest, highest + 1, channel).astype(name) if zeros else None
    out_zero = rng.integers(lowest, highest + 1, channel).astype(name) if zeros else None
    options = dict(window_size=list(window), strides=list(strides), start_padding=list(start),
                   end_padding=list(end), dilations=list(dilations), include_padding=include, output_dtype=name)
    got = dmlcli.run("quantized_linear_average_pooling", x, in_scale, in_zero, out_scale, out_zero, **options)
    expected = qlap_reference(x, in_scale, in_zero, out_scale, out_zero, window, strides, start, end, dilations,
                              include, name)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_quantized_average_pooling_takes_the_output_zero_points_type():
    x = np.full((1, 1, 2, 2), 4, np.int8)
    got = dmlcli.run("quantized_linear_average_pooling", x, np.array([1.0], np.float32), np.array([0], np.int8),
                     np.array([1.0], np.float32), np.array([-3], np.int8), window_size=[2, 2])
    assert got.dtype == np.int8 and got.tolist() == [[[[1]]]]


# ---------------------------------------------------------------- the command line, the API, DxDispatch


def test_command_line_quantize_to_int4_and_json():
    result = CliRunner().invoke(cli, ["run", "quantize", '{"dtype": "float32", "data": [[-3.0, 1.5, 40.0, 0.0]]}',
                                      '{"dtype": "float32", "data": [[0.5, 2.0]]}',
                                      '{"dtype": "int4", "data": [[1, -1]]}', "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "int4", "shape": [1, 4], "data": [[-5, 4, 7, -1]]}


def test_command_line_dynamic_quantize_writes_three_outputs():
    result = CliRunner().invoke(cli, ["run", "dynamic_quantize_linear", "[0, 2, -1, 1.5]", "--dtype", "float32",
                                      "-o", "-"])
    assert result.exit_code == 0, result.output
    outputs = json.loads(result.stdout)
    assert sorted(outputs) == ["OutputScaleTensor", "OutputTensor", "OutputZeroPointTensor"]
    assert outputs["OutputZeroPointTensor"] == {"dtype": "uint8", "shape": [1], "data": [85]}


def test_command_line_quantized_average_pooling_leaves_out_a_zero_point():
    result = CliRunner().invoke(cli, ["run", "quantized_linear_average_pooling",
                                      '{"dtype": "uint8", "data": [[[[2, 4], [6, 8]]]]}',
                                      '{"dtype": "float32", "data": [0.5]}', "none",
                                      '{"dtype": "float32", "data": [0.25]}', '{"dtype": "uint8", "data": [3]}',
                                      "--window-size", "2,2", "-o", "-"])
    assert result.exit_code == 0, result.output
    # (1 + 2 + 3 + 4) / 4 = 2.5; / 0.25 = 10; + 3
    assert json.loads(result.stdout) == {"dtype": "uint8", "shape": [1, 1, 1, 1], "data": [[[[13]]]]}


def test_desc_fields_as_a_dxdispatch_model_writes_them():
    from dmlcli import engine
    from dmlcli.data_types import parse_data_type

    f32, i4 = parse_data_type("float32"), parse_data_type("int4")
    request = engine.request("quantize", desc_fields={"QuantizationType": "DML_QUANTIZATION_TYPE_SCALE_ZERO_POINT"})
    verdict = engine.plan(request, [(f32, (2, 4)), (f32, (2, 1)), (i4, (2, 1))])
    x = np.array([[1, 2, 3, 4], [-1, -2, -3, -40]], np.float32)
    out = engine.execute(verdict, [x, np.array([[1.0], [0.5]], np.float32), np.array([[0], [1]], ml_dtypes.int4)],
                         "cpu").output
    assert ints(out) == [1, 2, 3, 4, -1, -3, -5, -8]
    pooling = engine.request("quantized_linear_average_pooling", desc_fields={
        "DimensionCount": 2, "Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0],
        "Dilations": [1, 1], "IncludePadding": False})
    u8 = parse_data_type("uint8")
    verdict = engine.plan(pooling, [(u8, (1, 1, 2, 2)), (f32, (1,)), (f32, (1,))],
                          input_names=("InputTensor", "InputScaleTensor", "OutputScaleTensor"))
    assert verdict.call.absent == ("InputZeroPointTensor", "OutputZeroPointTensor")
    values = [np.array([[[[2, 4], [6, 8]]]], np.uint8), np.array([0.5], np.float32), np.array([0.25], np.float32)]
    assert engine.execute(verdict, values, "cpu").output.tolist() == [[[[10]]]]
