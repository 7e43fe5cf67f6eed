"""The resampling family: UPSAMPLE_2D, RESAMPLE, RESAMPLE1, VALUE_SCALE_2D (RESAMPLE2 and RESAMPLE3: test_ops_resample23.py).

Each operator against: a second transcription of its support table (spot checks by level), every rule its shape
rule enforces (exit 3 on the command line), an independent reference written here from the pages' coordinate
relation with plain Python loops (NEAREST_NEIGHBOR bit for bit; LINEAR as the multilinear weighted average of the
2^k neighbours, within the tolerance), FloatArrayParameter's three spellings, and ONNX's Resize and Upsample
node-test vectors mapped by the suite runner's table onto RESAMPLE3 and RESAMPLE2 (skipped with the DirectML reason
where those cannot express them).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.api import plan as api_plan
from dmlcli.cli import cli
from dmlcli.checking.comparison import rule_for, ulp_distance
from dmlcli.data_types import parse_data_type
from dmlcli.errors import InputError
from dmlcli.io.json_tensor import tensor_from_object
from dmlcli.operators.resampling import entries as module
from dmlcli.operators.table.parameters import FloatArrayParameter
import shaped_cli  # noqa: E402 - tests/ is on the path

from conftest import SHARED, shared_params

ENTRIES = {  # key: (DML_OPERATOR_TYPE value, introduced, exactness, parameters' fields)
    "UPSAMPLE_2D": (66, "1_0", "approximate", ("ScaleSize", "InterpolationMode")),
    "RESAMPLE": (96, "2_0", "approximate", ("InterpolationMode", "Scales")),
    "RESAMPLE1": (116, "2_1", "approximate", ("InterpolationMode", "Scales", "InputPixelOffsets",
                                              "OutputPixelOffsets")),
    "RESAMPLE2": (161, "5_1", "approximate", ("InterpolationMode", "RoundingDirection", "Scales", "InputPixelOffsets",
                                              "OutputPixelOffsets")),
    "RESAMPLE3": (175, "6_4", "approximate", ("InterpolationMode", "RoundingDirection", "Scales", "InputPixelOffsets",
                                              "OutputPixelOffsets", "Antialiased")),
    "VALUE_SCALE_2D": (65, "1_0", "composite", ("Scale", "Bias")),
}


def test_the_family_holds_each_operator_once():
    assert sorted(op.key for op in module.OPERATORS) == sorted(ENTRIES)
    assert [name for name, members in dmlcli.operators.FAMILIES if members == module.OPERATORS] == ["resampling"]


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_entry(key):
    op = dmlcli.find_operator(key)
    value, introduced, exactness, fields = ENTRIES[key]
    assert op.key == key and op.enum_value == value and op.family == "resampling"
    assert op.introduced.short == introduced and op.exactness == exactness
    assert tuple(p.field for p in op.parameters) == fields
    assert op.notes and not op.is_elementwise and "WebNN" in op.tolerance.source


def test_interpolation_mode_enum():
    mode = module.INTERPOLATION_MODE
    assert dict(mode.values) == {"NEAREST_NEIGHBOR": 0, "LINEAR": 1}
    assert mode.parse_value("DML_INTERPOLATION_MODE_LINEAR") == "LINEAR" and mode.parse_value("0") == "NEAREST_NEIGHBOR"


# ---------------------------------------------------------------- FloatArrayParameter

def test_float_array_parameter_spellings():
    scales = FloatArrayParameter(field="Scales", help="", count_field="ScaleCount")
    assert scales.parse({"scales": "2, 0.1"}, {}) == (np.float32(2), np.float32(0.1))
    assert all(isinstance(v, np.float32) for v in scales.parse({"scales": [1, 0.1]}, {}))
    assert scales.parse_desc([0.5, 3], {}) == (np.float32(0.5), np.float32(3))
    assert scales.parse({}, {}) is None and scales.desc_fields == ("Scales", "ScaleCount")
    assert scales.describe((np.float32(0.5), np.float32(2))) == "{0.5, 2}"
    with pytest.raises(InputError, match="is not a number|not a number"):
        scales.parse({"scales": "1,abc"}, {})
    with pytest.raises(InputError, match="ScaleCount 3 does not match the 2 values of Scales"):
        scales.check_desc_count({"Scales": [1, 2], "ScaleCount": 3})
    with pytest.raises(InputError, match="must be a JSON array of numbers"):
        scales.parse_desc({"a": 1}, {})


def test_decimal_scales_are_rounded_once_to_float32():
    # 0.1 read as a decimal and rounded once: float32(0.1), not float32(float64(0.1)) by another route.
    (value,) = FloatArrayParameter(field="Scales", help="").parse({"scales": "0.1000000014901161193847656250001"}, {})
    assert value == np.float32(0.1)


# ---------------------------------------------------------------- support tables, a second transcription

SUPPORT = [  # (operator, data type, rank, lowest level or None)
    ("upsample_2d", "float32", 4, "1_0"), ("upsample_2d", "float16", 5, "1_0"), ("upsample_2d", "float32", 3, None),
    ("upsample_2d", "int8", 4, None),
    ("resample", "float32", 4, "2_0"), ("resample", "float16", 2, "5_1"), ("resample", "uint8", 4, "6_2"),
    ("resample", "int8", 1, "6_2"), ("resample", "float32", 5, None), ("resample", "int32", 4, None),
    ("resample1", "float16", 4, "2_1"), ("resample1", "float32", 3, "5_1"), ("resample1", "int8", 4, "6_2"),
    ("resample1", "uint16", 4, None),
    ("value_scale_2d", "float32", 4, "1_0"), ("value_scale_2d", "float16", 4, "1_0"),
    ("value_scale_2d", "float32", 3, None), ("value_scale_2d", "uint8", 4, None),
]
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2"]


@pytest.mark.parametrize("name, dtype, rank, lowest", SUPPORT, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in SUPPORT])
def test_support_rows(name, dtype, rank, lowest):
    shape = (1,) * max(rank - 3, 0) + (3, 2, 2)[-min(rank, 3):] if rank >= 1 else ()
    params = {"scales": [1.0] * rank} if name.startswith("resample") else {}
    inputs = [(parse_data_type(dtype), shape)]
    if lowest is None:
        with pytest.raises(dmlcli.ValidationError):
            api_plan(name, inputs, **params)
        return
    assert api_plan(name, inputs, **params).lowest_feature_level.short == lowest
    if lowest != "1_0":
        with pytest.raises(dmlcli.ValidationError, match=f"DML_FEATURE_LEVEL_{lowest}"):
            api_plan(name, inputs, feature_level=LEVELS[LEVELS.index(lowest) - 1], **params)


# ---------------------------------------------------------------- rules: every RuleViolation, exit 3

X4 = "[[[[1,2],[3,4]]]]"
RULES = [
    (["resample", X4, "--dtype", "float32", "--scales", "2,2"],
     "RESAMPLE: Scales has 2 values but InputTensor has 4 dimensions"),
    (["resample", X4, "--dtype", "float32", "--scales", "1,1,0,2"], "RESAMPLE: Scales[2] 0 is not a finite number "
                                                                    "above 0"),
    (["resample", X4, "--dtype", "float32", "--scales", "1,1,inf,2"], "RESAMPLE: Scales[2] inf is not a finite"),
    (["resample", X4, "--dtype", "float32"], "RESAMPLE: give Scales or the OutputTensor's Sizes (--output-shape)"),
    (["resample1", X4, "--dtype", "float32", "--scales", "1,1,2,2", "--input-pixel-offsets", "0.5"],
     "RESAMPLE1: InputPixelOffsets has 1 values but InputTensor has 4 dimensions"),
    (["resample1", X4, "--dtype", "float32", "--scales", "1,1,2,2", "--output-pixel-offsets", "0,0,nan,0"],
     "RESAMPLE1: OutputPixelOffsets"),
    (["resample", X4, "--dtype", "float32", "--scales", "1,1,2,2", "--output-shape", "1,2,4"],
     "RESAMPLE: OutputTensor has 3 dimensions but InputTensor has 4"),
    (["upsample_2d", X4, "--dtype", "float32", "--scale-size", "3000000000,2"],
     "UPSAMPLE_2D: ScaleSize.Height 3000000000 is too large for InputHeight 2"),
    (["upsample_2d", X4, "--dtype", "float32", "--scale-size", "2,2", "--output-shape", "1,1,4,5"],
     "UPSAMPLE_2D: OutputTensor"),
    (["value_scale_2d", "[[[[1]],[[2]]]]", "--dtype", "float32"],
     "VALUE_SCALE_2D: InputTensor's channel count 2 must be 1 or 3"),
    (["value_scale_2d", "[[[[1]],[[2]],[[3]]]]", "--dtype", "float32", "--bias", "1"],
     "VALUE_SCALE_2D: ChannelCount 1 (the length of Bias) must match InputTensor's channel count 3"),
    (["value_scale_2d", "[[[[1]],[[2]]]]", "--dtype", "float32", "--bias", "1,2"],
     "VALUE_SCALE_2D: ChannelCount 2 (the length of Bias) must be 1 or 3"),
]


@pytest.mark.parametrize("args, message", RULES, ids=[a[0] + str(i) for i, (a, _) in enumerate(RULES)])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_scale_size_usage_errors_exit_2():
    result = CliRunner().invoke(cli, ["run", "upsample_2d", X4, "--dtype", "float32", "--scale-size", "0,2", "-o", "-"])
    assert result.exit_code == 2 and "ScaleSize (--scale-size): 0 is out of range" in result.stderr


# ---------------------------------------------------------------- independent references (the pages' relation)

def _coordinate(o: int, scale, input_offset, output_offset, size: int) -> np.float32:
    """InputX from OutputX = (InputX + InputPixelOffset) * Scale + OutputPixelOffset, in FLOAT32, clamped."""
    f = np.float32
    x = (f(o) - f(output_offset)) / f(scale) - f(input_offset)
    return min(max(x, f(0)), f(size - 1))


def ref_resample(x, out_shape, scales, input_offsets, output_offsets, linear: bool):
    out = np.empty(out_shape, np.float64)
    for index in itertools.product(*map(range, out_shape)):
        coords = [_coordinate(o, s, i, p, n) for o, s, i, p, n in
                  zip(index, scales, input_offsets, output_offsets, x.shape)]
        if not linear:
            out[index] = x[tuple(min(int(math.floor(float(c) + 0.5)), n - 1) for c, n in zip(coords, x.shape))]
            continue
        total = 0.0
        corners = []
        for c, n in zip(coords, x.shape):
            low = int(math.floor(float(c)))
            weight = float(c) - low
            corners.append([(low, 1 - weight), (min(low + 1, n - 1), weight)])
        for choice in itertools.product(*corners):
            w = math.prod(weight for _, weight in choice)
            total += w * float(x[tuple(i for i, _ in choice)])
        out[index] = total
    return out


def assert_close(got, expected64, op, call, context=""):
    expected = expected64.astype(got.dtype)
    if got.dtype.kind != "f" or call.parameters.get("InterpolationMode") == "NEAREST_NEIGHBOR":
        assert np.array_equal(got, expected), context
        return
    rule = rule_for(op, got.dtype, call=call)
    distance = ulp_distance(got, expected)
    ok = (distance <= rule.limit) | (np.abs(got.astype(np.float64) - expected64) <= rule.floor)
    assert ok.all(), f"{context}: {distance[~ok].max()} ULP > {rule.limit}"


SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=st.data())
def test_resample1_against_the_reference(data):
    mode = data.draw(st.sampled_from(["nearest_neighbor", "linear"]))
    dtype = data.draw(st.sampled_from(["float32", "float16", "uint8", "int8"]))
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    scales = [data.draw(st.sampled_from([0.5, 0.75, 1.0, 1.5, 2.0, 3.0])) for _ in range(rank)]
    out_shape = tuple(max(1, math.floor(n * s)) for n, s in zip(shape, scales))
    offsets_in = [data.draw(st.sampled_from([0.0, 0.5, 0.25])) for _ in range(rank)]
    offsets_out = [data.draw(st.sampled_from([0.0, -0.5, 0.5])) for _ in range(rank)]
    low, high = (-8, 8) if dtype != "uint8" else (0, 16)
    x = np.array(data.draw(st.lists(st.integers(low, high), min_size=math.prod(shape), max_size=math.prod(shape))),
                 np.float64).reshape(shape).astype(dtype)
    if dtype in ("float32", "float16"):
        x = (x / 4).astype(dtype)
    params = dict(interpolation_mode=mode, scales=scales, input_pixel_offsets=offsets_in,
                  output_pixel_offsets=offsets_out)
    verdict = dmlcli.validate("resample1", x, **params)
    got = dmlcli.run("resample1", x, **params)
    assert got.shape == out_shape
    expected = ref_resample(x, out_shape, [np.float32(s) for s in scales], offsets_in, offsets_out, mode == "linear")
    if dtype in ("uint8", "int8") and mode == "linear":
        # The FLOAT32 interpolation rounded to nearest even: exact, except that a value within FLOAT32 rounding of
        # a half may land on either side of it.
        near_half = np.abs(np.abs(expected - np.floor(expected)) - 0.5) < 1e-5
        difference = np.abs(got.astype(np.float64) - np.rint(expected))
        assert np.all(np.where(near_half, difference <= 1, difference == 0)), (got, expected)
        return
    assert_close(got, expected, verdict.call.operator, verdict.call, f"{mode} {dtype} {shape} {scales}")


@SETTINGS
@given(data=st.data())
def test_resample_is_resample1_at_pixel_centres(data):
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    scales = [data.draw(st.sampled_from([0.5, 1.0, 1.25, 2.0])) for _ in range(rank)]
    mode = data.draw(st.sampled_from(["nearest_neighbor", "linear"]))
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    got = dmlcli.run("resample", x, interpolation_mode=mode, scales=scales)
    same = dmlcli.run("resample1", x, interpolation_mode=mode, scales=scales, input_pixel_offsets=[0.5] * rank,
                      output_pixel_offsets=[-0.5] * rank)
    assert np.array_equal(got, same)


@pytest.mark.parametrize("mode", ["nearest_neighbor", "linear"])
@pytest.mark.parametrize("shape", [(1, 2, 2, 3), (2, 1, 2, 2, 2)])
def test_upsample_2d_is_resample_of_the_last_two_dimensions(mode, shape):
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    got = dmlcli.run("upsample_2d", x, scale_size=(2, 3), interpolation_mode=mode)
    assert got.shape == shape[:-2] + (shape[-2] * 2, shape[-1] * 3)
    scales = [1.0] * (len(shape) - 2) + [2.0, 3.0]
    expected = ref_resample(x, got.shape, [np.float32(s) for s in scales], [0.5] * len(shape), [-0.5] * len(shape),
                            mode == "linear")
    verdict = dmlcli.validate("upsample_2d", x, scale_size=(2, 3), interpolation_mode=mode)
    assert_close(got, expected, verdict.call.operator, verdict.call)
    if mode == "nearest_neighbor":  # whole-number scales: each element repeated, no ties
        assert np.array_equal(got, np.repeat(np.repeat(x, 2, axis=-2), 3, axis=-1))


def test_nearest_tie_takes_the_higher_index():
    # Scale 0.5 at pixel centres: output 0 reads x = 0.5, halfway between elements 0 and 1.
    got = dmlcli.run("resample", np.array([10, 20, 30, 40], np.float32), scales=[0.5])
    assert got.tolist() == [20, 40]


def test_output_shape_decides_where_given_and_edges_clamp():
    got = dmlcli.run("resample", np.array([1, 2], np.float32), scales=[1.0], output_shape=(4,))
    assert got.tolist() == [1, 2, 2, 2]  # the scaled input is smaller than the output: the edge is clamped
    got = dmlcli.run("resample", np.array([1, 2, 3, 4], np.float32), output_shape=(2,), interpolation_mode="linear")
    assert got.tolist() == [1.5, 3.5]  # Scales left out: 2 / 4 = 0.5


def test_integer_linear_rounds_to_nearest_even_and_saturates():
    got = dmlcli.run("resample1", np.array([0, 1, 255], np.uint8), scales=[2.0], interpolation_mode="linear",
                     input_pixel_offsets=[0.5], output_pixel_offsets=[-0.5])
    # coordinates -0.25, 0.25, 0.75, 1.25, 1.75, 2.25 -> 0, 0.25, 0.75, 64.5, 191.5, 255
    assert got.tolist() == [0, 0, 1, 64, 192, 255]


def test_value_scale_2d_against_the_reference():
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float16):
        x = rng.standard_normal((2, 3, 2, 2)).astype(dtype)
        bias = [0.5, -1.25, 3.0]
        got = dmlcli.run("value_scale_2d", x, scale=0.3, bias=bias)
        expected = np.empty(x.shape, np.float32)
        for n, c, h, w in itertools.product(*map(range, x.shape)):  # two FLOAT32 roundings, as the notes say
            expected[n, c, h, w] = np.float32(np.float32(x[n, c, h, w]) * np.float32(0.3)) + np.float32(bias[c])
        assert np.array_equal(got, expected.astype(dtype))


# ---------------------------------------------------------------- the command line

CLI_RUNS = [
    (["upsample_2d", "[[[[1,2]]]]", "--dtype", "float32", "--scale-size", "1,2"], [[[[1, 1, 2, 2]]]]),
    (["resample", "[1,2]", "--dtype", "float16", "--scales", "2", "--interpolation-mode", "linear"],
     [1, 1.25, 1.75, 2]),
    (["resample1", "[1,2,3]", "--dtype", "float32", "--scales", "1", "--input-pixel-offsets", "0",
      "--output-pixel-offsets", "1"], [1, 1, 2]),
    (["value_scale_2d", "[[[[1]]]]", "--dtype", "float32", "--scale", "2", "--bias", "0.5"], [[[[2.5]]]]),
    (["resample2", "[1,2,3,4]", "--dtype", "float32", "--scales", "0.5", "--rounding-direction", "increasing"],
     [2, 4]),
    (["resample3", "[1,2,3,4,5,6,7,8]", "--dtype", "float32", "--scales", "0.5", "--interpolation-mode", "linear",
      "--antialiased", "true"], [1.625, 3.5, 5.5, 7.375]),
]


@pytest.mark.parametrize("args, data", CLI_RUNS, ids=[a[0] for a, _ in CLI_RUNS])
def test_command_line_run(args, data):
    result = CliRunner().invoke(cli, ["run", *args, "-o", "-"])
    assert result.exit_code == 0, result.output
    assert np.allclose(np.array(json.loads(result.stdout)["data"], np.float64), np.array(data, np.float64))


def test_every_operator_has_a_command_line_run():
    assert sorted({args[0] for args, _ in CLI_RUNS}) == sorted(op.cli_name for op in module.OPERATORS)


def test_dxdispatch_resample1_with_its_arrays(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4]},
            "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR", "DimensionCount": 4,
            "Scales": [1, 1, 1, 2], "InputPixelOffsets": [0.5, 0.5, 0.5, 0.5],
            "OutputPixelOffsets": [-0.5, -0.5, -0.5, -0.5]}
    model = {"resources": {"in": {"initialValuesDataType": "FLOAT32", "initialValues": [5, 7]},
                           "out": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}}},
             "dispatchables": {"r": {"type": "DML_OPERATOR_RESAMPLE1", "desc": desc}},
             "commands": [{"type": "dispatch", "dispatchable": "r", "bindings": {"InputTensor": "in",
                                                                                "OutputTensor": "out"}},
                          {"type": "print", "resource": "out"}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(model))
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 0, result.output
    assert "Resource 'out': 5, 5, 7, 7" in result.output
    desc["DimensionCount"] = 3
    path.write_text(json.dumps(model))
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 2 and "DimensionCount 3 does not match the 4 values of Scales" in result.output


# ---------------------------------------------------------------- ONNX's node tests, mapped by hand

ONNX_DIR = SHARED / "onnx_operators"
ONNX_CASES = sorted(p for p in ONNX_DIR.glob("onnx__test_*.json")
                    if json.loads(p.read_text())["onnx_op"] in ("Resize", "Upsample")) if ONNX_DIR.is_dir() else []


def test_the_onnx_cases_are_there(shared_dir):
    assert len(ONNX_CASES) == 34


def map_onnx(case) -> tuple[dict, np.ndarray] | str:
    """The parameters of RESAMPLE3 (Resize) or RESAMPLE2 (Upsample) for an ONNX case, or why DirectML cannot express
    it."""
    from dmlcli.suite.onnx.mapping import resize_mapping

    return resize_mapping(case["onnx_op"], case["attributes"], case["input_names"],
                          [tensor_from_object(t, where=case["case_name"]) for t in case["inputs"]],
                          tuple(case["expected"][0]["shape"]))


@pytest.mark.parametrize("path", shared_params(ONNX_CASES), ids=lambda p: getattr(p, "stem", str(p)))
def test_onnx_vector(path):
    case = json.loads(path.read_text())
    mapped = map_onnx(case)
    if isinstance(mapped, str):
        pytest.skip(mapped)
    params, x = mapped
    expected = tensor_from_object(case["expected"][0], where=path.name)
    name = "resample3" if case["onnx_op"] == "Resize" else "resample2"
    verdict = dmlcli.validate(name, x, **params)
    got = dmlcli.run(name, x, **params)
    assert_close(got, expected.astype(np.float64), verdict.call.operator, verdict.call, case["case_name"])


def test_onnx_skips_are_only_what_directml_cannot_express(shared_dir):
    reasons = {p.stem: map_onnx(json.loads(p.read_text())) for p in ONNX_CASES}
    skipped = {name: why for name, why in reasons.items() if isinstance(why, str)}
    # Cubic is all DirectML lacks here: RESAMPLE2/3's RoundingDirection gives every nearest_mode (ties included),
    # RESAMPLE3's Antialiased the antialias cases, the offsets tf_crop_and_resize's region (no coordinate of the
    # case falls outside the input, where ONNX's extrapolation_value would be needed). Three more are mapped as ONNX
    # Runtime's DirectML provider maps them, to other values than ONNX's reference (the table's `differs`).
    cubic = [why for why in skipped.values() if "mode cubic" in why]
    provider = [why for why in skipped.values() if why.startswith("ONNX Runtime's DirectML provider maps this Resize")]
    assert len(cubic) == 10 and len(provider) == 3 and len(skipped) == 13
    assert len(reasons) - len(skipped) == 21


def _dispatch(tmp_path, dispatchable: dict, values: list, out_count: int) -> object:
    model = {"resources": {"in": {"initialValuesDataType": "FLOAT32", "initialValues": values},
                           "out": {"initialValuesDataType": "FLOAT32",
                                   "initialValues": {"valueCount": out_count, "value": 0}}},
             "dispatchables": {"d": dispatchable},
             "commands": [{"type": "dispatch", "dispatchable": "d", "bindings": {"InputTensor": "in",
                                                                                "OutputTensor": "out"}},
                          {"type": "print", "resource": "out"}]}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    return CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])


def test_dxdispatch_value_scale_2d_and_its_channel_count(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tensor = {"DataType": "FLOAT32", "Sizes": [1, 3, 1, 1]}
    desc = {"InputTensor": tensor, "OutputTensor": tensor, "Scale": 2.0, "ChannelCount": 3, "Bias": [1, 2, 3]}
    result = _dispatch(tmp_path, {"type": "DML_OPERATOR_VALUE_SCALE_2D", "desc": desc}, [1, 1, 1], 3)
    assert result.exit_code == 0, result.output
    assert "Resource 'out': 3, 4, 5" in result.output
    desc["ChannelCount"] = 1
    result = _dispatch(tmp_path, {"type": "DML_OPERATOR_VALUE_SCALE_2D", "desc": desc}, [1, 1, 1], 3)
    assert result.exit_code == 2 and "ChannelCount 1 does not match the 3 values of Bias" in result.output


def test_dxdispatch_upsample_2d_scale_size_must_be_a_size_2d(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 4]},
            "ScaleSize": {"Width": 2, "Height": 2}, "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR"}
    result = _dispatch(tmp_path, {"type": "DML_OPERATOR_UPSAMPLE_2D", "desc": desc}, [1, 2], 8)
    assert result.exit_code == 0 and "Resource 'out': 1, 1, 2, 2, 1, 1, 2, 2" in result.output
    desc["ScaleSize"] = [2, 2]
    result = _dispatch(tmp_path, {"type": "DML_OPERATOR_UPSAMPLE_2D", "desc": desc}, [1, 2], 8)
    assert result.exit_code == 2 and "ScaleSize must be a JSON object with Width and Height" in result.output
