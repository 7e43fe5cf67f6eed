"""MEAN_VARIANCE_NORMALIZATION2 (6_3): MEAN_VARIANCE_NORMALIZATION1 with UseMean and UseVariance.

Against: its support row and level (6_2 refused naming 6_3), the shape rule's refusals, the family's independent
reference (test_ops_normalization.ref_mvn: plain Python over index tuples, float64, math.fsum) for each of the four
UseMean x UseVariance formulas,
edge cases (a constant group, zeros without the mean, NaN and infinity, sizes 1), the command line, the API, a
DxDispatch desc with DirectML.h's field names, and ONNX's RMSNormalization and GroupNormalization node tests through
the suite runner's table.
"""

from __future__ import annotations

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
from dmlcli.data_types import parse_data_type
import shaped_cli  # noqa: E402 - tests/ is on the path
from test_ops_normalization import assert_close, ref_mvn  # the family's reference, with UseMean

NAME = "mean_variance_normalization2"


def test_entry():
    op = dmlcli.find_operator("MEAN_VARIANCE_NORMALIZATION2")
    assert op.enum_value == 171 and op.family == "normalization" and op.introduced.short == "6_3"
    assert tuple(p.field for p in op.parameters) == ("Axes", "UseMean", "UseVariance", "Epsilon", "FusedActivation")
    assert op.exactness == "approximate" and op.fused_activation == "FusedActivation"
    assert any("DmlOperatorSkipLayerNormalization.cpp" in note for note in op.notes)
    assert dict(op.optional_inputs) == {"ScaleTensor": "InputTensor", "BiasTensor": "InputTensor"}


# ---------------------------------------------------------------- validation at 6_2, 6_3 and 6_4


def plan(inputs, **kwargs):
    return api_plan(NAME, [(parse_data_type(t), shape) for t, shape in inputs], **kwargs)


@pytest.mark.parametrize("dtype, rank", [("float32", 1), ("float16", 4), ("float32", 8)])
def test_accepted_from_6_3_and_refused_at_6_2(dtype, rank):
    inputs = [(dtype, (2,) * rank)] * 3
    assert plan(inputs).lowest_feature_level.short == "6_3"
    assert plan(inputs, feature_level="6_4").feature_level.short == "6_4"
    with pytest.raises(dmlcli.ValidationError, match="introduced in DML_FEATURE_LEVEL_6_3"):
        plan(inputs, feature_level="6_2")


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float64"])
def test_other_data_types_are_refused_at_every_level(dtype):
    with pytest.raises(dmlcli.ValidationError, match="no feature level accepts this call"):
        plan([(dtype, (2, 2))])


def test_scale_alone_and_bias_alone_are_accepted_at_6_3():
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    scale = np.full((1, 1), 2, np.float32)
    bias = np.full((1, 1), 3, np.float32)
    plain = dmlcli.run(NAME, x, axes=[1])
    assert np.array_equal(dmlcli.run(NAME, x, scale, axes=[1]), plain * np.float32(2))
    assert np.array_equal(dmlcli.run(NAME, x, None, bias, axes=[1]), plain + np.float32(3))
    assert dmlcli.validate(NAME, x, None, bias, axes=[1]).lowest_feature_level.short == "6_3"


RULES = [
    ([NAME, "[[1,2]]", "--dtype", "float32", "--axes", "2"],
     "MEAN_VARIANCE_NORMALIZATION2: Axes 2 is out of range for InputTensor's 2 dimensions"),
    ([NAME, "[[1,2]]", "--dtype", "float32", "--axes", "0,0"],
     "MEAN_VARIANCE_NORMALIZATION2: Axes [0, 0] names an axis twice"),
    ([NAME, "[[1,2]]", "[[1,1,1]]", "--dtype", "float32"],
     "MEAN_VARIANCE_NORMALIZATION2: ScaleTensor Sizes [1, 3] do not broadcast to InputTensor Sizes [1, 2]"),
    ([NAME, "[[1,2]]", "[1]", "--dtype", "float32"],
     "MEAN_VARIANCE_NORMALIZATION2: ScaleTensor has 1 dimensions but InputTensor has 2"),
    ([NAME, "[[1,2]]", "--dtype", "float32", "--feature-level", "6_2"],
     "supported from DML_FEATURE_LEVEL_6_3"),
]


@pytest.mark.parametrize("args, message", RULES, ids=[str(i) for i in range(len(RULES))])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_a_flag_that_is_not_a_boolean_is_a_usage_error():
    result = CliRunner().invoke(cli, ["run", NAME, "[[1,2]]", "--dtype", "float32", "--use-mean", "maybe", "-o", "-"])
    assert result.exit_code == 2 and "UseMean" in result.stderr


# ---------------------------------------------------------------- the reference: the four formulas


def _array(draw, shape, dtype, low=-3.0, high=3.0):
    size = math.prod(shape)
    values = draw(st.lists(st.integers(int(low * 16), int(high * 16)), min_size=size, max_size=size))
    return (np.array(values, np.float64) / 16).astype(dtype).reshape(shape)


def _broadcastable(draw, shape, dtype):
    sub = tuple(1 if draw(st.booleans()) else s for s in shape)
    return _array(draw, sub, dtype, -2.0, 2.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_against_the_reference(data):
    dtype = data.draw(st.sampled_from(["float32", "float16"]))
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axes = tuple(data.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True)))
    use_mean, use_variance = data.draw(st.booleans()), data.draw(st.booleans())
    x = _array(data.draw, shape, dtype)
    scale = _broadcastable(data.draw, shape, dtype) if data.draw(st.booleans()) else None
    bias = _broadcastable(data.draw, shape, dtype) if data.draw(st.booleans()) else None
    epsilon = data.draw(st.sampled_from([1e-5, 0.1, 1.0]))
    params = dict(axes=list(axes), use_mean=use_mean, use_variance=use_variance, epsilon=epsilon)
    inputs = [x, scale, bias] if bias is not None else [x, scale] if scale is not None else [x]
    verdict = dmlcli.validate(NAME, *inputs, **params)
    got = dmlcli.run(NAME, *inputs, **params)
    expected = ref_mvn(x, sorted(axes), scale, bias, use_variance, np.float32(epsilon), use_mean)
    assert_close(got, expected, verdict.call.operator, verdict.call,
                 f"{dtype} {shape} {axes} mean={use_mean} variance={use_variance}")


@pytest.mark.parametrize("normalize_variance", [True, False])
def test_use_mean_true_is_mvn1_bit_for_bit(normalize_variance):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale, bias = rng.standard_normal((1, 3, 1, 1)).astype(np.float32), rng.standard_normal((1, 3, 1, 1)).astype(
        np.float32)
    two = dmlcli.run(NAME, x, scale, bias, axes=[2, 3], use_variance=normalize_variance)
    one = dmlcli.run("mean_variance_normalization1", x, scale, bias, axes=[2, 3],
                     normalize_variance=normalize_variance)
    assert np.array_equal(two, one)


def test_rms_normalization_by_hand():
    # [1, 2, 3, 4]: mean(x^2) = 7.5; epsilon 0: x / sqrt(7.5).
    got = dmlcli.run(NAME, np.array([[1, 2, 3, 4]], np.float32), axes=[1], use_mean=False, epsilon=0)
    np.testing.assert_array_equal(got, np.float32([[1, 2, 3, 4]]) / np.sqrt(np.float32(7.5)))


def test_neither_statistic_is_scale_and_bias_alone():
    x = np.array([[1.5, -2.0, 0.25]], np.float32)
    scale, bias = np.float32([[2]]), np.float32([[-1]])
    got = dmlcli.run(NAME, x, scale, bias, axes=[1], use_mean=False, use_variance=False)
    np.testing.assert_array_equal(got, x * np.float32(2) - np.float32(1))


def test_edge_cases():
    # A constant group: x - mean = 0, and 0 / sqrt(0 + epsilon) = 0.
    assert np.array_equal(dmlcli.run(NAME, np.full((2, 3), 5, np.float32), axes=[1]), np.zeros((2, 3), np.float32))
    # Zeros without the mean: mean(x^2) = 0, 0 / sqrt(epsilon) = 0.
    assert np.array_equal(dmlcli.run(NAME, np.zeros((1, 4), np.float16), axes=[1], use_mean=False),
                          np.zeros((1, 4), np.float16))
    # NaN and infinity poison their own group only.
    x = np.array([[1, np.nan, 2], [1, 2, 3], [np.inf, 1, 1]], np.float32)
    got = dmlcli.run(NAME, x, axes=[1], use_mean=False)
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all() and np.isnan(got[2]).any()
    # Sizes 1: a group of one element without the mean is x / sqrt(x^2 + epsilon).
    one = dmlcli.run(NAME, np.float32([[[3]]]), axes=[0, 1, 2], use_mean=False, epsilon=0)
    assert one.tolist() == [[[1.0]]]


def test_float16_is_computed_in_float32_and_rounded_once():
    x = (np.arange(12, dtype=np.float32).reshape(3, 4) / 7).astype(np.float16)
    got = dmlcli.run(NAME, x, axes=[1], use_mean=False)
    wide = dmlcli.run(NAME, x.astype(np.float32), axes=[1], use_mean=False)
    assert got.dtype == np.float16 and np.array_equal(got, wide.astype(np.float16))


def test_fused_activation_runs_on_the_rounded_result():
    x = np.array([[1, -2, 3, -4]], np.float32)
    plain = dmlcli.run(NAME, x, axes=[1], use_mean=False)
    assert np.array_equal(dmlcli.run(NAME, x, axes=[1], use_mean=False, fused_activation="relu"),
                          np.maximum(plain, 0))


# ---------------------------------------------------------------- the command line, the API, DxDispatch


def test_command_line_run():
    result = CliRunner().invoke(cli, ["run", NAME, "[[3,4]]", "[[2,1]]", "--dtype", "float32", "--axes", "1",
                                      "--use-mean", "false", "--epsilon", "0", "-o", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["data"]
    expected = np.float32([[3, 4]]) / np.sqrt(np.float32(12.5)) * np.float32([[2, 1]])
    np.testing.assert_array_equal(np.float32(data), expected)


def test_describe_gives_the_formulas_and_sources():
    result = CliRunner().invoke(cli, ["describe", NAME])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "UseMean FALSE, UseVariance TRUE" in text and "DmlOperatorLayerNormalization.cpp" in text


def test_dxdispatch_desc_with_directml_field_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tensor = {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4]}
    desc = {"InputTensor": tensor, "ScaleTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 1]}, "BiasTensor": None,
            "OutputTensor": tensor, "AxisCount": 1, "Axes": [3], "UseMean": False, "UseVariance": True,
            "Epsilon": 0.0, "FusedActivation": None}
    result = shaped_cli.dispatch_one(tmp_path, "MEAN_VARIANCE_NORMALIZATION2", desc,
                                     {"InputTensor": [1, 2, 3, 4], "ScaleTensor": [2]}, 4)
    assert result.exit_code == 0, result.output
    expected = np.float32([1, 2, 3, 4]) / np.sqrt(np.float32(7.5)) * np.float32(2)
    printed = result.output.split("Resource 'OutputTensor': ")[1].split()[0:4]
    np.testing.assert_allclose([float(v.rstrip(",")) for v in printed], expected, rtol=1e-5)


# ---------------------------------------------------------------- ONNX's RMSNormalization and GroupNormalization


def test_onnx_rms_and_group_normalization_through_the_table(shared_dir):
    from dmlcli.suite.runner import run_suite

    run = run_suite([shared_dir / "onnx_operators_complete"], backend="cpu", jobs=1,
                    keyword="RMSNormalization or GroupNormalization")
    counts = run.counts()
    assert counts["passed"] == 12 and counts["failed"] == counts["error"] == counts["skipped"] == 0, [
        (r.case_id, r.message) for r in run.results if not r.passed]
