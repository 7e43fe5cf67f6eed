"""RESAMPLE2 (5_1: RoundingDirection) and RESAMPLE3 (6_4: RESAMPLE2 with Antialiased).

Against: the support rows and levels, the shape rule's refusals, an independent reference written here from the
coordinate relation (OutputTensorX = (InputTensorX + InputPixelOffset) * Scale + OutputPixelOffset, FLOAT32
coordinates): ceil / floor nearest neighbours bit for bit, linear and the antialiased triangle (ONNX's
_linear_coeffs_antialias, rewritten here as loops) within the tolerance; the page's equivalence with RESAMPLE1;
ONNX's own reference Resize with antialias; the command line (test_ops_resampling.py's CLI_RUNS), the API and
DxDispatch descs with DirectML.h's field names.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.api import plan as api_plan
from dmlcli.checking.comparison import rule_for, ulp_distance
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
import shaped_cli  # noqa: E402 - tests/ is on the path

F = np.float32
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("name, lowest, below", [("resample2", "5_1", "5_0"), ("resample3", "6_4", "6_3")])
@pytest.mark.parametrize("dtype, rank", [("float32", 1), ("float16", 4)])
def test_support_rows_and_levels(name, lowest, below, dtype, rank):
    inputs = [(parse_data_type(dtype), (2,) * rank)]
    assert api_plan(name, inputs, scales=[1.0] * rank).lowest_feature_level.short == lowest
    with pytest.raises(dmlcli.ValidationError, match=f"DML_FEATURE_LEVEL_{lowest}"):
        api_plan(name, inputs, scales=[1.0] * rank, feature_level=below)


@pytest.mark.parametrize("name", ["resample2", "resample3"])
@pytest.mark.parametrize("dtype, rank", [("int8", 4), ("uint8", 2), ("float32", 5)])
def test_what_no_level_takes(name, dtype, rank):
    with pytest.raises(dmlcli.ValidationError, match="no feature level accepts this call"):
        api_plan(name, [(parse_data_type(dtype), (2,) * rank)], scales=[1.0] * rank)


X4 = "[[[[1,2],[3,4]]]]"
RULES = [
    (["resample2", X4, "--dtype", "float32", "--scales", "1,1,2,2", "--input-pixel-offsets", "0.5"],
     "RESAMPLE2: InputPixelOffsets has 1 values but InputTensor has 4 dimensions"),
    (["resample3", X4, "--dtype", "float32", "--scales", "1,1,0,2"], "RESAMPLE3: Scales[2] 0 is not a finite number"),
    (["resample3", X4, "--dtype", "float32"], "RESAMPLE3: give Scales or the OutputTensor's Sizes"),
    (["resample2", X4, "--dtype", "float32", "--scales", "1,1,2,2", "--feature-level", "5_0"],
     "supported from DML_FEATURE_LEVEL_5_1"),
]


@pytest.mark.parametrize("args, message", RULES, ids=[str(i) for i in range(len(RULES))])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_rounding_direction_spellings_and_a_wrong_one():
    x = F([10, 20, 30, 40])
    for spelling in ("increasing", "DML_AXIS_DIRECTION_INCREASING", "0"):
        assert dmlcli.run("resample2", x, scales=[0.5], rounding_direction=spelling).tolist() == [20, 40]
    result = CliRunner().invoke(cli, ["run", "resample2", "[1,2]", "--dtype", "float32", "--scales", "2",
                                      "--rounding-direction", "up", "-o", "-"])
    assert result.exit_code == 2 and "RoundingDirection" in result.stderr


# ---------------------------------------------------------------- the reference


def _coordinate(o: int, scale, input_offset, output_offset) -> F:
    """InputX from OutputX = (InputX + InputPixelOffset) * Scale + OutputPixelOffset, in FLOAT32 (not clamped)."""
    return (F(o) - F(output_offset)) / F(scale) - F(input_offset)


def _taps(o: int, n: int, scale, input_offset, output_offset, method: str) -> list[tuple[int, float]]:
    """(input index, weight) pairs of one output coordinate along one dimension, in float64."""
    x = float(_coordinate(o, scale, input_offset, output_offset))
    if method == "antialiased" and float(scale) < 1:
        s = float(scale)
        near = [j for j in range(math.floor(x - 1 / s) - 1, math.ceil(x + 1 / s) + 2) if abs(j - x) < 1 / s]
        weights = [1 - abs(j - x) * s for j in near]
        total = math.fsum(weights)
        return [(min(max(j, 0), n - 1), w / total) for j, w in zip(near, weights)]
    x = min(max(x, 0.0), n - 1.0)
    if method == "ceil":
        return [(math.ceil(x), 1.0)]
    if method == "floor":
        return [(math.floor(x), 1.0)]
    low = math.floor(x)
    return [(low, 1 - (x - low)), (min(low + 1, n - 1), x - low)]


def ref_resample(x, out_shape, scales, input_offsets, output_offsets, method: str) -> np.ndarray:
    out = np.empty(out_shape, np.float64)
    for index in itertools.product(*map(range, out_shape)):
        per_dim = [_taps(o, n, s, i, p, method) if (m != n or float(s) != 1 or float(i) + float(p) != 0)
                   else [(o, 1.0)]
                   for o, n, m, s, i, p in zip(index, x.shape, out_shape, scales, input_offsets, output_offsets)]
        out[index] = math.fsum(math.prod(w for _, w in choice) * float(x[tuple(j for j, _ in choice)])
                               for choice in itertools.product(*per_dim))
    return out


def assert_close(got, expected64, call, context=""):
    expected = expected64.astype(got.dtype)
    if call.parameters["InterpolationMode"] == "NEAREST_NEIGHBOR":
        assert np.array_equal(got, expected), context
        return
    rule = rule_for(call.operator, got.dtype, call=call)
    distance = ulp_distance(got, expected)
    ok = (distance <= rule.limit) | (np.abs(got.astype(np.float64) - expected64) <= rule.floor)
    assert ok.all(), f"{context}: {distance[~ok].max()} ULP > {rule.limit}"


def _draw_call(data, name: str):
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    scales = [data.draw(st.sampled_from([0.25, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0])) for _ in range(rank)]
    out_shape = tuple(max(1, math.floor(n * s)) for n, s in zip(shape, scales))
    params = dict(scales=scales, input_pixel_offsets=[data.draw(st.sampled_from([0.0, 0.5, 0.25, 1.0]))
                                                      for _ in range(rank)],
                  output_pixel_offsets=[data.draw(st.sampled_from([0.0, -0.5, 0.5])) for _ in range(rank)],
                  interpolation_mode=data.draw(st.sampled_from(["nearest_neighbor", "linear"])),
                  rounding_direction=data.draw(st.sampled_from(["increasing", "decreasing"])))
    if name == "resample3":
        params["antialiased"] = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from(["float32", "float16"]))
    values = data.draw(st.lists(st.integers(-16, 16), min_size=math.prod(shape), max_size=math.prod(shape)))
    x = (np.array(values, np.float64).reshape(shape) / 4).astype(dtype)
    return x, out_shape, params


@SETTINGS
@given(data=st.data(), name=st.sampled_from(["resample2", "resample3"]))
def test_against_the_reference(data, name):
    x, out_shape, params = _draw_call(data, name)
    verdict = dmlcli.validate(name, x, **params)
    got = dmlcli.run(name, x, **params)
    assert got.shape == out_shape and got.dtype == x.dtype
    if params["interpolation_mode"] == "linear":
        method = "antialiased" if params.get("antialiased") else "linear"
    else:
        method = "ceil" if params["rounding_direction"] == "increasing" else "floor"
    expected = ref_resample(x, out_shape, [F(s) for s in params["scales"]], params["input_pixel_offsets"],
                            params["output_pixel_offsets"], method)
    assert_close(got, expected, verdict.call, f"{name} {x.shape} {params}")


@SETTINGS
@given(data=st.data())
def test_decreasing_with_input_offsets_less_one_half_is_resample1(data):
    """The page's remark, in the form that holds at every Scale: RESAMPLE2's floor(x') with x' = x + 0.5 is
    RESAMPLE1's floor(x + 0.5)."""
    x, _, params = _draw_call(data, "resample2")
    del params["rounding_direction"]
    params["interpolation_mode"] = "nearest_neighbor"
    shifted = dict(params, input_pixel_offsets=[o - 0.5 for o in params["input_pixel_offsets"]])
    assert np.array_equal(dmlcli.run("resample2", x, rounding_direction="decreasing", **shifted),
                          dmlcli.run("resample1", x, **params))


def test_the_pages_output_offset_wording_holds_at_scale_1():
    x = np.arange(6, dtype=np.float32)
    params = dict(scales=[1.0], input_pixel_offsets=[0.25])
    one = dmlcli.run("resample1", x, output_pixel_offsets=[0.3], **params)
    two = dmlcli.run("resample2", x, output_pixel_offsets=[0.3 - 0.5], **params)
    assert np.array_equal(one, two)


@pytest.mark.parametrize("mode", ["nearest_neighbor", "linear"])
@pytest.mark.parametrize("direction", ["increasing", "decreasing"])
def test_resample3_without_antialias_is_resample2(mode, direction):
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 9)).astype(np.float32)
    params = dict(scales=[1, 1, 0.6, 1.7], interpolation_mode=mode, rounding_direction=direction)
    assert np.array_equal(dmlcli.run("resample3", x, **params), dmlcli.run("resample2", x, **params))
    if mode == "nearest_neighbor":  # Antialiased changes nothing for the nearest neighbour
        assert np.array_equal(dmlcli.run("resample3", x, antialiased=True, **params),
                              dmlcli.run("resample2", x, **params))


def test_antialias_upsampling_is_plain_linear():
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    params = dict(scales=[2.0, 1.5], interpolation_mode="linear")
    assert np.array_equal(dmlcli.run("resample3", x, antialiased=True, **params),
                          dmlcli.run("resample3", x, **params))


def test_nearest_ties_follow_the_direction():
    # Scale 0.5 at pixel centres: x = 0.5, 2.5: ceil takes the higher element, floor the lower.
    x = F([10, 20, 30, 40])
    assert dmlcli.run("resample2", x, scales=[0.5], rounding_direction="increasing").tolist() == [20, 40]
    assert dmlcli.run("resample2", x, scales=[0.5], rounding_direction="decreasing").tolist() == [10, 30]
    # Scale 2: x = -0.25, 0.25, 0.75, 1.25, clamped to [0, 1] first: ceil 0, 1, 1, 1; floor 0, 0, 0, 1.
    assert dmlcli.run("resample2", F([1, 2]), scales=[2.0], rounding_direction="increasing").tolist() == [1, 2, 2, 2]
    assert dmlcli.run("resample2", F([1, 2]), scales=[2.0], rounding_direction="decreasing").tolist() == [1, 1, 1, 2]
    # The scaled input smaller than the output: the edge repeats.
    assert dmlcli.run("resample2", F([1, 2]), scales=[1.0], output_shape=(4,)).tolist() == [1, 2, 2, 2]


def test_antialias_by_hand_and_nan():
    # x = 0.5 for output 0 at Scale 0.5: elements -1..2 weighted 0.25, 0.75, 0.75, 0.25 (element -1 is element 0).
    got = dmlcli.run("resample3", F([1, 2, 3, 4, 5, 6, 7, 8]), scales=[0.5], interpolation_mode="linear",
                     antialiased=True)
    assert got.tolist() == [1.625, 3.5, 5.5, 7.375]
    # A NaN reaches only the outputs whose filter covers it: output 2 (x = 4.5) reads elements 3 to 6, output 3
    # (x = 6.5) elements 5 to 8, element 8 being element 7 again.
    with_nan = dmlcli.run("resample3", F([1, 2, 3, 4, 5, 6, 7, np.nan]), scales=[0.5], interpolation_mode="linear",
                          antialiased=True)
    assert np.isnan(with_nan).tolist() == [False, False, False, True]


def test_the_tolerance_grows_with_the_downsampled_dimensions():
    x = np.zeros((1, 1, 8, 9), np.float32)
    call = dmlcli.validate("resample3", x, scales=[1, 1, 0.5, 0.3], interpolation_mode="linear",
                           antialiased=True).call
    plain = dmlcli.validate("resample3", x, scales=[1, 1, 0.5, 0.3], interpolation_mode="linear").call
    assert rule_for(call.operator, np.float32, call=call).limit == 84 * 2 * 4
    assert rule_for(plain.operator, np.float32, call=plain).limit == 84


@pytest.mark.parametrize("scales, shape", [((1, 1, 0.5, 0.5), (1, 1, 4, 4)), ((1, 1, 0.6, 0.8), (1, 2, 5, 7)),
                                           ((1, 1, 0.35, 1.3), (2, 1, 9, 4))])
def test_antialias_against_onnx_reference(scales, shape):
    """ONNX's own reference Resize (onnx.reference, antialias=1, half_pixel) is the meaning the provider forwards."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    node = helper.make_node("Resize", ["X", "", "scales"], ["Y"], mode="linear", antialias=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, shape),
                                            helper.make_tensor_value_info("scales", onnx.TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    (expected,) = ReferenceEvaluator(model).run(None, {"X": x, "scales": np.array(scales, np.float32)})
    params = dict(scales=list(scales), interpolation_mode="linear", antialiased=True)
    got = dmlcli.run("resample3", x, output_shape=expected.shape, **params)
    assert_close(got, expected.astype(np.float64),
                 dmlcli.validate("resample3", x, output_shape=expected.shape, **params).call)


# ---------------------------------------------------------------- DxDispatch


@pytest.mark.parametrize("operator, extra, values, expected", [
    ("RESAMPLE2", {"RoundingDirection": "DML_AXIS_DIRECTION_INCREASING"}, [10, 20, 30, 40], "20, 40"),
    ("RESAMPLE2", {"RoundingDirection": "DML_AXIS_DIRECTION_DECREASING"}, [10, 20, 30, 40], "10, 30"),
    ("RESAMPLE3", {"RoundingDirection": "DML_AXIS_DIRECTION_DECREASING", "Antialiased": True,
                   "InterpolationMode": "DML_INTERPOLATION_MODE_LINEAR"}, [1, 2, 3, 4, 5, 6, 7, 8],
     "1.625, 3.5, 5.5, 7.375"),
])
def test_dxdispatch_desc_with_directml_field_names(tmp_path, monkeypatch, operator, extra, values, expected):
    monkeypatch.chdir(tmp_path)
    count = len(values) // 2
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": [len(values)]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [count]},
            "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR", "DimensionCount": 1,
            "Scales": [0.5], "InputPixelOffsets": [0.5], "OutputPixelOffsets": [-0.5], **extra}
    result = shaped_cli.dispatch_one(tmp_path, operator, desc, {"InputTensor": values}, count)
    assert result.exit_code == 0, result.output
    assert f"Resource 'OutputTensor': {expected}" in result.output
