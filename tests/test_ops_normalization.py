"""The normalization family: BATCH_NORMALIZATION, MEAN_VARIANCE_NORMALIZATION(1), LOCAL_RESPONSE_NORMALIZATION,
LP_NORMALIZATION.

Each operator against: a second transcription of its support table (spot checks by level), every rule its
shape rule and level rule enforce (exit 3 on the command line), an independent reference written here from the
pages' formulas with plain Python loops over indices (float64, then rounded once), fused activations, FLOAT16
computed in FLOAT32, and ONNX's node-test vectors mapped by hand.
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
from dmlcli.io.json_tensor import tensor_from_object
from dmlcli.operators.normalization import entries as module
import shaped_cli  # noqa: E402 - tests/ is on the path

from conftest import SHARED, shared_params

ENTRIES = {  # key: (DML_OPERATOR_TYPE value, introduced, exactness, parameters' fields)
    "BATCH_NORMALIZATION": (72, "1_0", "composite", ("Spatial", "Epsilon", "FusedActivation")),
    "MEAN_VARIANCE_NORMALIZATION": (73, "1_0", "approximate",
                                    ("CrossChannel", "NormalizeVariance", "Epsilon", "FusedActivation")),
    "MEAN_VARIANCE_NORMALIZATION1": (115, "2_1", "approximate",
                                     ("Axes", "NormalizeVariance", "Epsilon", "FusedActivation")),
    "MEAN_VARIANCE_NORMALIZATION2": (171, "6_3", "approximate",  # test_ops_mvn2.py tests it
                                     ("Axes", "UseMean", "UseVariance", "Epsilon", "FusedActivation")),
    "LOCAL_RESPONSE_NORMALIZATION": (74, "1_0", "approximate", ("CrossChannel", "LocalSize", "Alpha", "Beta", "Bias")),
    "LP_NORMALIZATION": (75, "1_0", "approximate", ("Axis", "Epsilon", "P")),
}


def test_the_family_holds_each_operator_once():
    assert sorted(op.key for op in module.OPERATORS) == sorted(ENTRIES)
    assert [name for name, members in dmlcli.operators.FAMILIES if members == module.OPERATORS] == ["normalization"]


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_entry(key):
    op = dmlcli.find_operator(key)
    value, introduced, exactness, fields = ENTRIES[key]
    assert op.key == key and op.enum_value == value and op.family == "normalization"
    assert op.introduced.short == introduced and op.exactness == exactness
    assert tuple(p.field for p in op.parameters) == fields
    assert op.notes and not op.is_elementwise and op.tolerance is not None


# ---------------------------------------------------------------- support tables, a second transcription

# (operator, number of inputs, data type, rank, lowest level that accepts it or None)
SUPPORT = [
    ("batch_normalization", 5, "float32", 4, "1_0"),
    ("batch_normalization", 5, "float16", 4, "1_0"),
    ("batch_normalization", 5, "float32", 3, "3_1"),
    ("batch_normalization", 5, "float16", 8, "3_1"),
    ("batch_normalization", 5, "int32", 4, None),
    ("mean_variance_normalization", 1, "float32", 4, "1_0"),
    ("mean_variance_normalization", 3, "float16", 4, "1_0"),
    ("mean_variance_normalization", 1, "float32", 5, None),
    ("mean_variance_normalization1", 3, "float32", 4, "2_1"),
    ("mean_variance_normalization1", 1, "float16", 2, "3_1"),
    ("mean_variance_normalization1", 1, "float32", 8, "3_1"),
    ("mean_variance_normalization1", 1, "uint8", 4, None),
    ("local_response_normalization", 1, "float32", 4, "1_0"),
    ("local_response_normalization", 1, "float16", 4, "1_0"),
    ("local_response_normalization", 1, "float32", 3, None),
    ("lp_normalization", 1, "float32", 4, "1_0"),
    ("lp_normalization", 1, "float16", 1, "3_1"),
    ("lp_normalization", 1, "int8", 4, None),
]
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0"]


def plan(op, inputs, **kwargs):
    return api_plan(op, [(parse_data_type(t), shape) for t, shape in inputs], **kwargs)


@pytest.mark.parametrize("name, count, dtype, rank, lowest", SUPPORT,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in SUPPORT])
def test_support_rows(name, count, dtype, rank, lowest):
    shape = (2,) * rank
    params = {"axis": 0} if name == "lp_normalization" else {}
    inputs = [(dtype, shape)] * count
    if lowest is None:
        with pytest.raises(dmlcli.ValidationError, match="no feature level accepts this call"):
            plan(name, inputs, **params)
        return
    assert plan(name, inputs, **params).lowest_feature_level.short == lowest
    below = LEVELS[LEVELS.index(lowest) - 1] if lowest != "1_0" else None
    if below is not None:
        with pytest.raises(dmlcli.ValidationError, match=f"DML_FEATURE_LEVEL_{lowest}"):
            plan(name, inputs, feature_level=below, **params)


def test_level_rules():
    x, per_channel = ("float32", (1, 3, 2, 2)), ("float32", (1, 3, 1, 1))
    # BATCH_NORMALIZATION Spatial FALSE: Mean and Variance unbroadcast in Height and Width below 4_0.
    assert plan("batch_normalization", [x] + [per_channel] * 4, spatial=False).lowest_feature_level.short == "4_0"
    assert plan("batch_normalization", [x] + [per_channel] * 4).lowest_feature_level.short == "1_0"
    full = ("float32", (1, 3, 2, 2))
    assert plan("batch_normalization", [x, full, full, per_channel, per_channel],
                spatial=False).lowest_feature_level.short == "1_0"
    # MEAN_VARIANCE_NORMALIZATION1: a broadcast channel only from 4_0.
    one_channel = ("float32", (1, 1, 1, 1))
    assert plan("mean_variance_normalization1", [x, one_channel, one_channel]).lowest_feature_level.short == "4_0"
    assert plan("mean_variance_normalization1", [x, per_channel, per_channel]).lowest_feature_level.short == "2_1"
    # MEAN_VARIANCE_NORMALIZATION: any dimension broadcasts at 1_0.
    assert plan("mean_variance_normalization", [x, one_channel, one_channel]).lowest_feature_level.short == "1_0"


# ---------------------------------------------------------------- rules: every RuleViolation, exit 3

X4 = "[[[[1,2],[3,4]]]]"
RULES = [
    (["batch_normalization", X4, "[[[[1,1,1]]]]", "[[[[1]]]]", "[[[[1]]]]", "[[[[0]]]]", "--dtype", "float32"],
     "BATCH_NORMALIZATION: MeanTensor Sizes [1, 1, 1, 3] do not broadcast to InputTensor Sizes [1, 1, 2, 2] "
     "(dimension 3 is 3; allowed: 1 or 2)"),
    (["batch_normalization", X4, "[[[1]]]", "[[[[1]]]]", "[[[[1]]]]", "[[[[0]]]]", "--dtype", "float32"],
     "BATCH_NORMALIZATION: MeanTensor has 3 dimensions but InputTensor has 4"),
    (["batch_normalization", X4, "[[[[1]]]]", "[[[[1,1],[1,1]]]]", "[[[[1]]]]", "[[[[0]]]]", "--dtype", "float32",
      "--spatial", "false", "--feature-level", "3_0"],
     "BATCH_NORMALIZATION: Spatial FALSE requires MeanTensor's Height and Width to equal InputTensor's [2, 2]"),
    (["mean_variance_normalization", X4, "[[[[1,1,1]]]]", "[[[[0]]]]", "--dtype", "float32"],
     "MEAN_VARIANCE_NORMALIZATION: ScaleTensor Sizes [1, 1, 1, 3] do not broadcast"),
    (["mean_variance_normalization1", "[[1,2]]", "--dtype", "float32", "--axes", "2"],
     "MEAN_VARIANCE_NORMALIZATION1: Axes 2 is out of range for InputTensor's 2 dimensions"),
    (["mean_variance_normalization1", "[[1,2]]", "--dtype", "float32", "--axes", "1,1"],
     "MEAN_VARIANCE_NORMALIZATION1: Axes [1, 1] names an axis twice"),
    (["lp_normalization", "[[3,4]]", "--dtype", "float32", "--axis", "2"],
     "LP_NORMALIZATION: Axis 2 is out of range for InputTensor's 2 dimensions"),
    (["lp_normalization", "[[3,4]]", "--dtype", "float32", "--p", "3"],
     "LP_NORMALIZATION: P 3 is not an order DirectML takes (allowed: 1 or 2)"),
    (["local_response_normalization", "[[1,2]]", "--dtype", "float32"],
     "LOCAL_RESPONSE_NORMALIZATION: InputTensor dimension count 2 is not supported"),
]


@pytest.mark.parametrize("args, message", RULES, ids=[a[0] + str(i) for i, (a, _) in enumerate(RULES)])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_mvn1_channel_rule_exit_3():
    result = CliRunner().invoke(cli, ["run", "mean_variance_normalization1", "[[[[1]],[[2]]]]", "[[[[1]]]]",
                                      "[[[[0]]]]", "--dtype", "float32", "--axes", "2,3", "--feature-level", "3_0",
                                      "-o", "-"])
    assert result.exit_code == 3, result.output
    assert "MEAN_VARIANCE_NORMALIZATION1: ScaleTensor ChannelCount 1 must equal InputTensor's 2 below " \
           "DML_FEATURE_LEVEL_4_0" in result.stderr


def test_local_size_must_be_at_least_1():
    result = CliRunner().invoke(cli, ["run", "local_response_normalization", X4, "--dtype", "float32",
                                      "--local-size", "0", "-o", "-"])
    assert result.exit_code == 2 and "LocalSize (--local-size) = 0 is out of range" in result.stderr


def test_scale_and_bias_come_together_below_5_2():
    alone = ["run", "mean_variance_normalization", X4, "[[[[2]]]]", "--dtype", "float32", "-o", "-"]
    result = CliRunner().invoke(cli, alone + ["--feature-level", "5_1"])
    assert result.exit_code == 3
    assert "ScaleTensor without BiasTensor is allowed from DML_FEATURE_LEVEL_5_2" in result.stderr
    scaled = CliRunner().invoke(cli, alone)  # 6_4: ScaleTensor alone scales, no bias
    assert scaled.exit_code == 0, scaled.output
    x = np.asarray(json.loads(scaled.stdout)["data"], np.float64)
    plain = np.asarray(json.loads(CliRunner().invoke(cli, alone[:3] + alone[4:]).stdout)["data"], np.float64)
    np.testing.assert_allclose(x, 2 * plain, rtol=1e-6)


# ---------------------------------------------------------------- independent references (the pages' formulas)

def _broadcast_at(t: np.ndarray, index: tuple[int, ...]) -> float:
    return float(t[tuple(0 if size == 1 else i for size, i in zip(t.shape, index))])


def ref_batch_norm(x, mean, var, scale, bias, epsilon):
    out = np.empty(x.shape, np.float64)
    for index in itertools.product(*map(range, x.shape)):
        m, v = _broadcast_at(mean, index), _broadcast_at(var, index)
        s, b = _broadcast_at(scale, index), _broadcast_at(bias, index)
        out[index] = s * ((float(x[index]) - m) / math.sqrt(v + float(epsilon))) + b
    return out


def ref_mvn(x, axes, scale, bias, normalize_variance, epsilon, use_mean=True):
    """The MEAN_VARIANCE_NORMALIZATION operators over each group of the elements that `axes` span, in float64;
    without `use_mean` (MEAN_VARIANCE_NORMALIZATION2's UseMean FALSE) the mean is 0 and the variance the mean of
    the squares. Scale and Bias each where given."""
    out = np.empty(x.shape, np.float64)
    kept = [a for a in range(x.ndim) if a not in axes]
    for outer in itertools.product(*[range(x.shape[a]) for a in kept]):
        members = []
        for inner in itertools.product(*[range(x.shape[a]) for a in axes]):
            index = [0] * x.ndim
            for a, i in zip(kept, outer):
                index[a] = i
            for a, i in zip(axes, inner):
                index[a] = i
            members.append(tuple(index))
        values = [float(x[i]) for i in members]
        mean = math.fsum(values) / len(values) if use_mean else 0.0
        variance = math.fsum((v - mean) ** 2 for v in values) / len(values)
        for index, value in zip(members, values):
            y = value - mean
            if normalize_variance:
                y = y / math.sqrt(variance + float(epsilon))
            if scale is not None:
                y = y * _broadcast_at(scale, index)
            if bias is not None:
                y = y + _broadcast_at(bias, index)
            out[index] = y
    return out


def ref_lrn(x, cross_channel, size, alpha, beta, bias):
    out = np.empty(x.shape, np.float64)
    low, high = (size - 1) // 2, size - 1 - (size - 1) // 2
    n, c, h, w = x.shape
    for b, ch, i, j in itertools.product(range(n), range(c), range(h), range(w)):
        total = 0.0
        if cross_channel:
            for k in range(ch - low, ch + high + 1):
                if 0 <= k < c:
                    total += float(x[b, k, i, j]) ** 2
        else:
            for p in range(i - low, i + high + 1):
                for q in range(j - low, j + high + 1):
                    if 0 <= p < h and 0 <= q < w:
                        total += float(x[b, ch, p, q]) ** 2
        out[b, ch, i, j] = float(x[b, ch, i, j]) / (float(bias) + float(alpha) / size * total) ** float(beta)
    return out


def ref_lp(x, axis, p, epsilon):
    out = np.empty(x.shape, np.float64)
    for index in itertools.product(*map(range, x.shape)):
        row = [float(x[index[:axis] + (k,) + index[axis + 1:]]) for k in range(x.shape[axis])]
        norm = sum(abs(v) for v in row) if p == 1 else math.sqrt(sum(v * v for v in row))
        out[index] = float(x[index]) / max(norm, float(epsilon))
    return out


def assert_close(got, expected64, op, call, context=""):
    """Within the operator's rule for this call: ULP of the output type, or the rule's absolute floor."""
    expected = expected64.astype(got.dtype)
    assert got.shape == expected.shape, context
    rule = rule_for(op, got.dtype, call=call)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), context
    distance = np.where(np.isnan(got), 0, ulp_distance(got, expected))
    absolute = np.abs(got.astype(np.float64) - expected64)
    ok = (distance <= rule.limit) | (absolute <= rule.floor) | np.isnan(got)
    assert ok.all(), f"{context}: {distance[~ok].max()} ULP > {rule.limit}, {absolute[~ok].max()} > {rule.floor}"


SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _array(draw, shape, dtype, low=-3.0, high=3.0):
    size = math.prod(shape)
    values = draw(st.lists(st.integers(int(low * 16), int(high * 16)), min_size=size, max_size=size))
    return (np.array(values, np.float64) / 16).astype(dtype).reshape(shape)


def _per_channel(draw, shape, dtype, low=-2.0, high=2.0, rank_one_axes=()):
    sub = tuple(1 if axis in rank_one_axes or draw(st.booleans()) else s for axis, s in enumerate(shape))
    return _array(draw, sub, dtype, low, high)


@SETTINGS
@given(data=st.data())
def test_batch_normalization_against_the_reference(data):
    dtype = data.draw(st.sampled_from(["float32", "float16"]))
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=4, max_size=4)))
    x = _array(data.draw, shape, dtype)
    mean = _per_channel(data.draw, shape, dtype)
    var = np.abs(_per_channel(data.draw, shape, dtype, 0.25, 2.0))
    scale, bias = _per_channel(data.draw, shape, dtype), _per_channel(data.draw, shape, dtype)
    epsilon = data.draw(st.sampled_from([1e-5, 0.01, 0.5]))
    verdict = dmlcli.validate("batch_normalization", x, mean, var, scale, bias, epsilon=epsilon)
    got = dmlcli.run("batch_normalization", x, mean, var, scale, bias, epsilon=epsilon)
    assert_close(got, ref_batch_norm(x, mean, var, scale, bias, np.float32(epsilon)), verdict.call.operator,
                 verdict.call, f"{dtype} {shape}")


@SETTINGS
@given(data=st.data())
def test_mvn1_against_the_reference(data):
    dtype = data.draw(st.sampled_from(["float32", "float16"]))
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axes = tuple(data.draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True)))
    x = _array(data.draw, shape, dtype)
    normalize = data.draw(st.booleans())
    with_scale = data.draw(st.booleans())
    extra = [_per_channel(data.draw, shape, dtype), _per_channel(data.draw, shape, dtype)] if with_scale else []
    epsilon = data.draw(st.sampled_from([1e-5, 0.1]))
    params = dict(axes=list(axes), normalize_variance=normalize, epsilon=epsilon)
    verdict = dmlcli.validate("mean_variance_normalization1", x, *extra, **params)
    got = dmlcli.run("mean_variance_normalization1", x, *extra, **params)
    expected = ref_mvn(x, sorted(axes), extra[0] if extra else None, extra[1] if extra else None, normalize,
                       np.float32(epsilon))
    assert_close(got, expected, verdict.call.operator, verdict.call, f"{dtype} {shape} {axes}")


@pytest.mark.parametrize("cross_channel", [False, True])
def test_mvn_is_mvn1_on_its_axes(cross_channel):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale, bias = rng.standard_normal((1, 3, 1, 1)).astype(np.float32), rng.standard_normal((1, 3, 1, 1)).astype(
        np.float32)
    got = dmlcli.run("mean_variance_normalization", x, scale, bias, cross_channel=cross_channel)
    axes = [1, 2, 3] if cross_channel else [2, 3]
    assert np.array_equal(got, dmlcli.run("mean_variance_normalization1", x, scale, bias, axes=axes))
    verdict = dmlcli.validate("mean_variance_normalization", x, scale, bias, cross_channel=cross_channel)
    assert_close(got, ref_mvn(x, axes, scale, bias, True, np.float32(1e-5)), verdict.call.operator, verdict.call)


@SETTINGS
@given(data=st.data())
def test_lrn_against_the_reference(data):
    dtype = data.draw(st.sampled_from(["float32", "float16"]))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=4, max_size=4)))
    x = _array(data.draw, shape, dtype)
    params = dict(cross_channel=data.draw(st.booleans()), local_size=data.draw(st.integers(1, 5)),
                  alpha=data.draw(st.sampled_from([1e-4, 0.5, 2.0])), beta=data.draw(st.sampled_from([0.75, 0.5, 1.5])),
                  bias=data.draw(st.sampled_from([1.0, 2.0])))
    verdict = dmlcli.validate("local_response_normalization", x, **params)
    got = dmlcli.run("local_response_normalization", x, **params)
    expected = ref_lrn(x, params["cross_channel"], params["local_size"], np.float32(params["alpha"]),
                       np.float32(params["beta"]), np.float32(params["bias"]))
    assert_close(got, expected, verdict.call.operator, verdict.call, str(params))


@SETTINGS
@given(data=st.data())
def test_lp_against_the_reference(data):
    dtype = data.draw(st.sampled_from(["float32", "float16"]))
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    x = _array(data.draw, shape, dtype)
    params = dict(axis=data.draw(st.integers(0, rank - 1)), p=data.draw(st.sampled_from([1, 2])))
    verdict = dmlcli.validate("lp_normalization", x, **params)
    got = dmlcli.run("lp_normalization", x, **params)
    assert_close(got, ref_lp(x, params["axis"], params["p"], np.float32(1e-5)), verdict.call.operator, verdict.call)


def test_lp_row_of_zeros_gives_zeros_and_nan_propagates():
    got = dmlcli.run("lp_normalization", np.array([[0, 0], [np.nan, 1]], np.float32), axis=1)
    assert np.array_equal(got[0], [0, 0]) and np.isnan(got[1]).all()


def test_float16_computes_in_float32_and_rounds_once():
    # A mean of 2049 halves is not representable in FLOAT16 arithmetic step by step; in FLOAT32 it is exact.
    x = np.full((1, 1, 1, 4), 2048, np.float16)
    x[0, 0, 0, 0] = 2052
    got = dmlcli.run("mean_variance_normalization1", x, axes=[3], normalize_variance=False)
    assert got.dtype == np.float16 and np.array_equal(got, np.array([[[[3, -1, -1, -1]]]], np.float16))


# ---------------------------------------------------------------- fused activations

@pytest.mark.parametrize("name, extra", [
    ("batch_normalization", 4), ("mean_variance_normalization", 0), ("mean_variance_normalization1", 2)])
@pytest.mark.parametrize("activation, fields", [("relu", {}), ("leaky_relu", {"fused_alpha": 0.25}),
                                                ("sigmoid", {})])
def test_fused_activation_is_the_activation_on_the_rounded_result(name, extra, activation, fields):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 2, 2)).astype(np.float16)
    others = [np.abs(rng.standard_normal((1, 3, 1, 1))).astype(np.float16) + np.float16(0.5) for _ in range(extra)]
    plain = dmlcli.run(name, x, *others)
    fused = dmlcli.run(name, x, *others, fused_activation=activation, **fields)
    alone = {"fused_alpha": "alpha"}
    expected = dmlcli.run(f"activation_{activation}", plain, **{alone[k]: v for k, v in fields.items()})
    assert np.array_equal(fused, expected)


def test_fused_activation_from_a_dxdispatch_desc(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = {
        "resources": {"in": {"initialValuesDataType": "FLOAT32", "initialValues": [-1, 1, -3, 3]},
                      "out": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}}},
        "dispatchables": {"mvn": {"type": "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1", "desc": {
            "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 4]},
            "AxisCount": 1, "Axes": [3], "NormalizeVariance": False, "Epsilon": 0.0,
            "FusedActivation": {"Type": "ACTIVATION_RELU"}}}},
        "commands": [{"type": "dispatch", "dispatchable": "mvn", "bindings": {"InputTensor": "in", "OutputTensor": "out"}},
                     {"type": "print", "resource": "out"}]}
    path = tmp_path / "mvn.json"
    path.write_text(json.dumps(model))
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 0, result.output
    assert "Resource 'out': 0, 1, 0, 3" in result.output


# ---------------------------------------------------------------- the command line

CLI_RUNS = [
    (["batch_normalization", X4, "[[[[2]]]]", "[[[[4]]]]", "[[[[1]]]]", "[[[[0]]]]", "--dtype", "float32",
      "--epsilon", "0"], [[[[-0.5, 0], [0.5, 1]]]]),
    (["mean_variance_normalization", "[[[[1,3]]]]", "--dtype", "float32", "--epsilon", "0"], [[[[-1, 1]]]]),
    (["mean_variance_normalization1", "[[1,3],[2,2]]", "--dtype", "float16", "--axes", "1"],
     [[-1, 1], [0, 0]]),
    (["mean_variance_normalization2", "[[3,4]]", "--dtype", "float32", "--axes", "1", "--use-mean", "false",
      "--epsilon", "0"], [[3 / math.sqrt(12.5), 4 / math.sqrt(12.5)]]),
    (["local_response_normalization", "[[[[2]]]]", "--dtype", "float32", "--local-size", "1", "--alpha", "0.75",
      "--beta", "1", "--bias", "1"], [[[[0.5]]]]),
    (["lp_normalization", "[[3,4]]", "--dtype", "float32", "--axis", "1", "--p", "1"], [[3 / 7, 4 / 7]]),
]


@pytest.mark.parametrize("args, data", CLI_RUNS, ids=[a[0] for a, _ in CLI_RUNS])
def test_command_line_run(args, data):
    result = CliRunner().invoke(cli, ["run", *args, "-o", "-"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert np.allclose(np.array(document["data"], np.float64), np.array(data, np.float64), rtol=1e-3, atol=1e-6)


def test_every_operator_has_a_command_line_run():
    assert sorted({args[0] for args, _ in CLI_RUNS}) == sorted(op.cli_name for op in module.OPERATORS)


def test_float_rules_d3d_flush_subnormals():
    # Scale * (2 - 1) / sqrt(0 + 1) + 0 with a subnormal Scale: IEEE keeps it, Direct3D's rules flush it to 0.
    args = ["run", "batch_normalization", "[[[[2]]]]", "[[[[1]]]]", "[[[[0]]]]", "[[[[1e-39]]]]", "[[[[0]]]]",
            "--dtype", "float32", "--epsilon", "1", "-o", "-"]
    ieee = json.loads(CliRunner().invoke(cli, args).stdout)["data"][0][0][0][0]
    d3d = json.loads(CliRunner().invoke(cli, args + ["--float-rules", "d3d"]).stdout)["data"][0][0][0][0]
    assert ieee == pytest.approx(1e-39, rel=1e-3) and d3d == 0


# ---------------------------------------------------------------- ONNX's node tests, mapped by hand

ONNX_DIR = SHARED / "onnx_operators"
ONNX_OPS = ("BatchNormalization", "InstanceNormalization", "LayerNormalization", "MeanVarianceNormalization", "LRN",
            "LpNormalization")
ONNX_CASES = sorted(p for p in ONNX_DIR.glob("onnx__test_*.json") if json.loads(p.read_text())["onnx_op"] in ONNX_OPS) \
    if ONNX_DIR.is_dir() else []


def test_the_onnx_cases_are_there(shared_dir):
    assert len(ONNX_CASES) == 26


def _channel(t: np.ndarray, rank: int) -> np.ndarray:
    return t.reshape((1, -1) + (1,) * (rank - 2))


def map_onnx(case) -> tuple[str, dict, list] | str:
    """The DirectML call for an ONNX case: (operator, parameters, inputs), or why DirectML cannot express it."""
    op, attributes = case["onnx_op"], case["attributes"]
    inputs = [tensor_from_object(t, where=case["case_name"]) for t in case["inputs"]]
    x = inputs[0]
    epsilon = attributes.get("epsilon", 1e-5)
    if op == "BatchNormalization":
        if attributes.get("training_mode"):
            return "training_mode: DirectML computes it with BATCH_NORMALIZATION_TRAINING, not BATCH_NORMALIZATION"
        scale, bias, mean, var = (_channel(t, x.ndim) for t in inputs[1:])
        return "batch_normalization", {"epsilon": epsilon}, [x, mean, var, scale, bias]
    if op == "InstanceNormalization":
        scale, bias = (_channel(t, x.ndim) for t in inputs[1:])
        return "mean_variance_normalization1", {"axes": list(range(2, x.ndim)), "epsilon": epsilon}, [x, scale, bias]
    if op == "LayerNormalization":
        axis = attributes.get("axis", -1) % x.ndim
        scale, bias = (t.reshape((1,) * (x.ndim - t.ndim) + t.shape) for t in inputs[1:])
        return "mean_variance_normalization1", {"axes": list(range(axis, x.ndim)), "epsilon": epsilon}, [x, scale, bias]
    if op == "MeanVarianceNormalization":
        axes = [a % x.ndim for a in attributes.get("axes", [0, 2, 3])]
        return "mean_variance_normalization1", {"axes": axes, "epsilon": 0.0}, [x]
    if op == "LRN":
        return "local_response_normalization", {"cross_channel": True, "local_size": attributes["size"],
                                                "alpha": attributes["alpha"], "beta": attributes.get("beta", 0.75),
                                                "bias": attributes.get("bias", 1.0)}, [x]
    return "lp_normalization", {"axis": attributes.get("axis", -1) % x.ndim, "p": attributes.get("p", 2)}, [x]


@pytest.mark.parametrize("path", shared_params(ONNX_CASES), ids=lambda p: getattr(p, "stem", str(p)))
def test_onnx_vector(path):
    case = json.loads(path.read_text())
    mapped = map_onnx(case)
    if isinstance(mapped, str):
        pytest.skip(mapped)
    name, params, inputs = mapped
    expected = tensor_from_object(case["expected"][0], where=path.name)  # LayerNormalization: Y (not Mean, InvStdDev)
    verdict = dmlcli.validate(name, *inputs, **params)
    got = dmlcli.run(name, *inputs, **params)
    assert_close(got, expected.astype(np.float64), verdict.call.operator, verdict.call, case["case_name"])


def test_onnx_skips_are_only_training_mode(shared_dir):
    skipped = [p.stem for p in ONNX_CASES if isinstance(map_onnx(json.loads(p.read_text())), str)]
    assert skipped == ["onnx__test_batchnorm_epsilon_training_mode", "onnx__test_batchnorm_example_training_mode"]


# ---------------------------------------------------------------- Dask: the axes a row or region spans stay whole

@pytest.mark.parametrize("op, params", [("lp_normalization", {"axis": 1, "p": 1}),
                                        ("local_response_normalization", {"cross_channel": True, "local_size": 3}),
                                        ("local_response_normalization", {"cross_channel": False, "local_size": 2})])
def test_on_dask_gives_the_in_memory_bits(op, params):
    da = pytest.importorskip("dask.array", reason="the [dask] extra (dask[array]) is not installed")
    import dmlcli.dask

    x = np.random.default_rng(9).standard_normal((3, 5, 6, 7)).astype(np.float32)
    got = dmlcli.dask.run(op, da.from_array(x, chunks=(2, 2, 3, 3)), **params).compute()
    assert np.array_equal(got, dmlcli.run(op, x, **params))


# ---------------------------------------------------------------- the ONNX table's adapters, through `dmlcli test`

def test_dmlcli_test_runs_the_onnx_normalization_and_resize_cases(shared_dir, tmp_path):
    report = tmp_path / "report.json"
    result = CliRunner().invoke(cli, ["test", str(shared_dir / "onnx_operators"), "-k",
                                      "norm or Resize or Upsample or LRN", "--report", str(report), "-q"])
    assert result.exit_code == 0, result.output
    document = json.loads(report.read_text())
    assert document["totals"]["failed"] == 0 and document["totals"]["error"] == 0
    assert document["totals"]["passed"] == 31 and document["totals"]["skipped"] == 29
    reasons = {entry["message"] for entry in document["results"] if entry["verdict"] == "skipped"}
    # LayerNormalization's Mean and InvStdDev, cubic, training_mode; and three Resize cases ONNX Runtime's DirectML
    # provider maps to other values than ONNX's reference (align_corners and tf_crop_and_resize lengths,
    # pytorch_half_pixel's length 1), each worded for its case
    provider = {reason for reason in reasons if reason.startswith("ONNX Runtime's DirectML provider maps this Resize")}
    assert len(reasons) == 6 and len(provider) == 3
    assert not any("not implemented in dmlcli yet" in reason for reason in reasons), reasons
    assert all("DirectML" in reason for reason in reasons), reasons


def test_a_fused_activation_keeps_the_normalisations_grown_tolerance():
    x = np.zeros((1, 1, 2, 50), np.float32)
    plain = dmlcli.validate("mean_variance_normalization1", x, axes=[3]).call
    fused = dmlcli.validate("mean_variance_normalization1", x, axes=[3], fused_activation="sigmoid").call
    rule = rule_for(plain.operator, np.float32, call=plain)
    with_sigmoid = rule_for(fused.operator, np.float32, call=fused, parameters=fused.parameters)
    assert rule.limit == 3 * 50 + 840 and rule.floor == 2.0 ** -20
    assert with_sigmoid.limit == rule.limit and with_sigmoid.floor == rule.floor  # sigmoid's 34 ULP is tighter
    # ADD1 keeps the activation's own figure (ELU's 18 ULP is looser than ADD's 1).
    add1 = dmlcli.validate("add1", np.float32([1]), np.float32([2]), fused_activation="elu").call
    assert rule_for(add1.operator, np.float32, call=add1, parameters=add1.parameters).limit == 18


def test_the_lowest_level_is_searched_again_where_parameters_decide_it():
    # Like tensors, another Spatial: the level rule decides (validation's cache must not answer from the first).
    x, per_channel = ("float32", (1, 3, 2, 2)), ("float32", (1, 3, 1, 1))
    for spatial, lowest in ((False, "4_0"), (True, "1_0"), (False, "4_0")):
        assert plan("batch_normalization", [x] + [per_channel] * 4,
                    spatial=spatial).lowest_feature_level.short == lowest
    # REDUCE's rows by Function: SUM takes INT32 from 2_1 at 4 dimensions; MULTIPLY too; L1 only from 5_0.
    assert plan("reduce", [("int32", (1, 1, 2, 3))], function="sum").lowest_feature_level.short == "2_1"
    assert plan("reduce", [("int32", (1, 1, 2, 3))], function="l1").lowest_feature_level.short == "5_0"
