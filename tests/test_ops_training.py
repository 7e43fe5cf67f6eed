"""The training family: BATCH_NORMALIZATION_TRAINING, BATCH_NORMALIZATION_GRAD, BATCH_NORMALIZATION_TRAINING_GRAD,
LOCAL_RESPONSE_NORMALIZATION_GRAD and ADAM_OPTIMIZER.

Each operator against a second transcription of its support table (accepted at its level, refused one below),
the rules its shape rule enforces (exit 3), an independent reference written here (Python loops over indices,
float64, math.fsum), and for each gradient an independent derivative: central finite differences in float64 of
the forward formula, written here, and the adjoint identity <J^T dy, v> = <dy, J v>. ADAM_OPTIMIZER is checked
bit for bit against the page's order of operations done one element at a time with NumPy's float32 scalars. Then
the command line, the API, a DxDispatch model using DirectML.h's DESC field names, and ONNX's training operators
through `dmlcli test`.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.api import plan as api_plan
from dmlcli.checking.comparison import rule_for, ulp_distance
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.operators.training import normalization as norm_module
from dmlcli.operators.training import optimizers as optimizer_module
from dmlcli.suite import run_suite
from dmlcli.suite.onnx import TABLE, Planned, Skipped, plan as onnx_plan
from dmlcli.suite.onnx.adapters import OnnxCall
from dmlcli.suite.onnx.table import entry_for
import shaped_cli  # noqa: E402 - tests/ is on the path

ENTRIES = {  # key: (DML_OPERATOR_TYPE value, introduced, exactness, parameters' fields, outputs)
    "BATCH_NORMALIZATION_TRAINING": (151, "4_1", "composite", ("Epsilon", "FusedActivation"),
                                     ("OutputTensor", "OutputMeanTensor", "OutputVarianceTensor")),
    "BATCH_NORMALIZATION_GRAD": (146, "3_1", "composite", ("Epsilon",),
                                 ("OutputGradientTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor")),
    "BATCH_NORMALIZATION_TRAINING_GRAD": (152, "4_1", "composite", ("Epsilon",),
                                          ("OutputGradientTensor", "OutputScaleGradientTensor",
                                           "OutputBiasGradientTensor")),
    "LOCAL_RESPONSE_NORMALIZATION_GRAD": (144, "3_1", "approximate", ("CrossChannel", "LocalSize", "Alpha", "Beta",
                                                                      "Bias"), ("OutputGradientTensor",)),
    "ADAM_OPTIMIZER": (136, "3_0", "composite", ("LearningRate", "Beta1", "Beta2", "Epsilon"),
                       ("OutputParametersTensor", "OutputFirstMomentTensor", "OutputSecondMomentTensor")),
}
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0"]
RNG = np.random.default_rng(30)


def test_the_family_holds_each_operator_once():
    members = dict(dmlcli.operators.FAMILIES)["training"]
    assert {op.key for op in norm_module.OPERATORS + optimizer_module.OPERATORS} <= {op.key for op in members}


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_entry(key):
    op = dmlcli.find_operator(key)
    value, introduced, exactness, fields, outputs = ENTRIES[key]
    assert op.key == key and op.enum_value == value and op.family == "training"
    assert op.introduced.short == introduced and op.exactness == exactness
    assert tuple(p.field for p in op.parameters) == fields and op.outputs == outputs
    assert op.notes and not op.is_elementwise and op.tolerance is not None


# ---------------------------------------------------------------- support tables, a second transcription

def plan(op, inputs, **kwargs):
    return api_plan(op, [(parse_data_type(t), shape) for t, shape in inputs], **kwargs)


X4, C4 = (2, 3, 2, 2), (1, 3, 1, 1)
STEP = ("uint32", (1, 1, 1, 1))


def _inputs(op, dtype, rank):
    x, c = (2,) * rank, (1, 2) + (1,) * (rank - 2) if rank > 1 else (1,)
    return {
        "batch_normalization_training": [(dtype, x), (dtype, c), (dtype, c)],
        "batch_normalization_grad": [(dtype, x), (dtype, x), (dtype, c), (dtype, c), (dtype, c)],
        "batch_normalization_training_grad": [(dtype, x), (dtype, x), (dtype, c), (dtype, c), (dtype, c)],
        "local_response_normalization_grad": [(dtype, x), (dtype, x)],
        "adam_optimizer": [(dtype, x)] * 4 + [("uint32", (1,) * rank)],
    }[op]


SUPPORT = [  # (operator, data type, rank, lowest level that accepts it or None)
    ("batch_normalization_training", "float32", 4, "4_1"),
    ("batch_normalization_training", "float16", 1, "4_1"),
    ("batch_normalization_training", "float32", 8, "4_1"),
    ("batch_normalization_training", "int32", 4, None),
    ("batch_normalization_grad", "float32", 4, "3_1"),
    ("batch_normalization_grad", "float16", 8, "3_1"),
    ("batch_normalization_grad", "float16", 2, "3_1"),
    ("batch_normalization_grad", "uint8", 4, None),
    ("batch_normalization_training_grad", "float32", 3, "4_1"),
    ("batch_normalization_training_grad", "float16", 4, "4_1"),
    ("batch_normalization_training_grad", "int8", 4, None),
    ("local_response_normalization_grad", "float32", 4, "3_1"),
    ("local_response_normalization_grad", "float16", 4, "3_1"),
    ("local_response_normalization_grad", "float32", 3, None),
    ("local_response_normalization_grad", "float32", 5, None),
    ("adam_optimizer", "float32", 4, "3_0"),
    ("adam_optimizer", "float16", 4, "3_0"),
    ("adam_optimizer", "float32", 5, None),
    ("adam_optimizer", "float32", 2, None),
    ("adam_optimizer", "int32", 4, None),
]


@pytest.mark.parametrize("name, dtype, rank, lowest", SUPPORT, ids=[f"{s[0]}-{s[1]}-{s[2]}" for s in SUPPORT])
def test_support_rows(name, dtype, rank, lowest):
    inputs = _inputs(name, dtype, rank)
    if lowest is None:
        with pytest.raises(dmlcli.ValidationError, match="no feature level accepts this call"):
            plan(name, inputs)
        return
    assert plan(name, inputs).lowest_feature_level.short == lowest
    below = LEVELS[LEVELS.index(lowest) - 1]
    with pytest.raises(dmlcli.ValidationError, match=f"introduced in DML_FEATURE_LEVEL_{lowest}"):
        plan(name, inputs, feature_level=below)


def test_the_training_step_is_a_uint32_scalar():
    x = ("float32", X4)
    assert plan("adam_optimizer", [x] * 4 + [STEP]).lowest_feature_level.short == "3_0"
    with pytest.raises(dmlcli.ValidationError, match="TrainingStepTensor data type FLOAT32 is not supported at "
                                                     r"DML_FEATURE_LEVEL_6_4 \(allowed: UINT32\)"):
        plan("adam_optimizer", [x] * 4 + [("float32", (1, 1, 1, 1))])
    with pytest.raises(dmlcli.ValidationError, match="TrainingStepTensor Sizes \\[1, 1, 1, 2\\] are not a scalar's"):
        plan("adam_optimizer", [x] * 4 + [("uint32", (1, 1, 1, 2))])


def test_fused_add_is_optional_from_4_1_and_ties_types():
    x, c = ("float32", X4), ("float32", C4)
    assert plan("batch_normalization_training", [x, c, c, x]).lowest_feature_level.short == "4_1"
    with pytest.raises(dmlcli.ValidationError, match="FusedAddTensor data type FLOAT16 differ"):
        plan("batch_normalization_training", [x, c, c, ("float16", X4)])


# ---------------------------------------------------------------- rules: exit 3

def j(array) -> str:
    return shaped_cli.json_input(np.asarray(array))


F = np.float32
RULES = [
    (["batch_normalization_training", j(np.ones(X4, F)), j(np.ones((1, 3, 1, 3), F)), j(np.ones(C4, F))],
     "BATCH_NORMALIZATION_TRAINING: ScaleTensor Sizes [1, 3, 1, 3] do not broadcast to InputTensor Sizes "
     "[2, 3, 2, 2] (dimension 3 is 3; allowed: 1 or 2)"),
    (["batch_normalization_training", j(np.ones(X4, F)), j(np.ones(C4, F)), j(np.ones((1, 1, 1, 1), F))],
     "BATCH_NORMALIZATION_TRAINING: ScaleTensor Sizes [1, 3, 1, 1] and BiasTensor Sizes [1, 1, 1, 1] differ; "
     "ScaleTensor and BiasTensor must have the same Sizes"),
    (["batch_normalization_training", j(np.ones(X4, F)), j(np.ones(C4, F)), j(np.ones(C4, F)), j(np.ones(C4, F))],
     "BATCH_NORMALIZATION_TRAINING: InputTensor Sizes [2, 3, 2, 2] and FusedAddTensor Sizes [1, 3, 1, 1] differ"),
    (["batch_normalization_training", j(np.ones(X4, F)), j(np.ones((3, 1, 1), F)), j(np.ones((3, 1, 1), F))],
     "BATCH_NORMALIZATION_TRAINING: ScaleTensor has 3 dimensions but InputTensor has 4"),
    (["batch_normalization_grad", j(np.ones(X4, F)), j(np.ones((2, 3, 2, 1), F)), j(np.ones(C4, F)),
      j(np.ones(C4, F)), j(np.ones(C4, F))],
     "BATCH_NORMALIZATION_GRAD: InputTensor Sizes [2, 3, 2, 2] and InputGradientTensor Sizes [2, 3, 2, 1] differ"),
    (["batch_normalization_training_grad", j(np.ones(X4, F)), j(np.ones(X4, F)), j(np.ones(C4, F)),
      j(np.ones((1, 1, 1, 1), F)), j(np.ones(C4, F))],
     "BATCH_NORMALIZATION_TRAINING_GRAD: MeanTensor Sizes [1, 3, 1, 1] and VarianceTensor Sizes [1, 1, 1, 1] "
     "differ; MeanTensor, VarianceTensor and ScaleTensor must have the same Sizes"),
    (["local_response_normalization_grad", j(np.ones(X4, F)), j(np.ones((2, 3, 2, 3), F))],
     "LOCAL_RESPONSE_NORMALIZATION_GRAD: InputTensor Sizes [2, 3, 2, 2] and InputGradientTensor Sizes [2, 3, 2, 3] "
     "differ"),
    (["adam_optimizer", j(np.ones(X4, F)), j(np.ones(X4, F)), j(np.ones((2, 3, 2, 1), F)), j(np.ones(X4, F)),
      j(np.ones((1, 1, 1, 1), np.uint32))],
     "ADAM_OPTIMIZER: InputParametersTensor Sizes [2, 3, 2, 2] and InputSecondMomentTensor Sizes [2, 3, 2, 1] "
     "differ"),
]


@pytest.mark.parametrize("args, message", RULES, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(RULES)])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_local_size_must_be_at_least_1():
    shaped_cli.refused_in_one_line(["run", "local_response_normalization_grad", j(np.ones(X4, F)), j(np.ones(X4, F)),
                                    "--local-size", "0", "-o", "-"], 2, "LocalSize (--local-size) = 0 is out of range")


# ---------------------------------------------------------------- independent references (Python loops, float64)

def channel_groups(shape, per_channel_shape):
    """For each element of the per-channel tensor, the input indices its statistics combine."""
    groups = {}
    for index in itertools.product(*map(range, shape)):
        key = tuple(0 if size == 1 else i for size, i in zip(per_channel_shape, index))
        groups.setdefault(key, []).append(index)
    return groups


def ref_bn_training(x, scale, bias, fused_add, epsilon):
    y = np.empty(x.shape, np.float64)
    mean, var = np.empty(scale.shape, np.float64), np.empty(scale.shape, np.float64)
    for key, members in channel_groups(x.shape, scale.shape).items():
        values = [float(x[i]) for i in members]
        m = math.fsum(values) / len(values)
        v = math.fsum((value - m) ** 2 for value in values) / len(values)
        mean[key], var[key] = m, v
        for i in members:
            added = 0.0 if fused_add is None else float(fused_add[i])
            y[i] = float(scale[key]) * ((float(x[i]) - m) / math.sqrt(v + float(epsilon))) + float(bias[key]) + added
    return y, mean, var


def ref_bn_grad(x, dy, mean, var, scale, epsilon):
    dx = np.empty(x.shape, np.float64)
    dscale, dbias = np.empty(mean.shape, np.float64), np.empty(mean.shape, np.float64)
    for key, members in channel_groups(x.shape, mean.shape).items():
        root = math.sqrt(float(var[key]) + float(epsilon))
        for i in members:
            dx[i] = float(dy[i]) * (float(scale[key]) / root)
        dscale[key] = math.fsum(float(dy[i]) * (float(x[i]) - float(mean[key])) / root for i in members)
        dbias[key] = math.fsum(float(dy[i]) for i in members)
    return dx, dscale, dbias


def ref_bn_training_grad(x, dy, mean, var, scale, epsilon):
    """The page's lines, element by element (mean(Input) read as MeanTensor)."""
    dx, dscale, dbias = ref_bn_grad(x, dy, mean, var, scale, epsilon)
    for key, members in channel_groups(x.shape, mean.shape).items():
        spread = float(var[key]) + float(epsilon)
        coef0 = 1.0 / math.sqrt(spread)
        m = float(mean[key])
        mean_dy = math.fsum(float(dy[i]) for i in members) / len(members)
        mean_coef1 = math.fsum(float(dy[i]) * (float(x[i]) - m) for i in members) / len(members)
        for i in members:
            dx[i] = float(scale[key]) * coef0 * ((float(dy[i]) - mean_dy) - (float(x[i]) - m) * mean_coef1 / spread)
    return dx, dscale, dbias


def assert_within_rule(got, expected64, verdict, context=""):
    """Within the operator's rule for the call (ULP of the output type, or the rule's absolute floor)."""
    call = verdict.call
    assert got.shape == expected64.shape, context
    rule = rule_for(call.operator, got.dtype, call=call)
    expected = expected64.astype(got.dtype)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), context
    distance = np.where(np.isnan(got), 0, ulp_distance(got, expected))
    absolute = np.abs(got.astype(np.float64) - expected64)
    ok = (distance <= rule.limit) | (absolute <= rule.floor) | np.isnan(got)
    assert ok.all(), f"{context}: {distance[~ok].max()} ULP > {rule.limit}, {absolute[~ok].max()} > {rule.floor}"


def assert_rounded_once(got, expected64, context=""):
    """The float64 computation rounded once: within 1 ULP of the reference's rounding wherever no sum cancels to
    near zero (every value here is well away from 0 or exactly 0)."""
    big = np.abs(expected64) > 1e-3
    distance = ulp_distance(got, expected64.astype(got.dtype))
    assert (distance[big] <= 1).all(), f"{context}: {distance[big].max()} ULP"


def data(shape, dtype="float32", low=-2.0, high=2.0, rng=RNG):
    """Multiples of 1/16: exact in FLOAT16 too."""
    return (rng.integers(int(low * 16), int(high * 16) + 1, size=shape) / 16).astype(dtype)


PER_CHANNEL = [((2, 3, 2, 2), (1, 3, 1, 1)), ((4, 5), (1, 5)), ((3, 2, 4), (1, 2, 4)), ((2, 3, 2, 2), (1, 1, 1, 1)),
               ((6,), (1,)), ((2, 2, 3), (2, 2, 3))]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape, per_channel", PER_CHANNEL)
@pytest.mark.parametrize("with_add", [False, True])
def test_batch_normalization_training_against_the_reference(shape, per_channel, dtype, with_add):
    x, scale, bias = data(shape, dtype), data(per_channel, dtype), data(per_channel, dtype)
    fused_add = data(shape, dtype) if with_add else None
    inputs = [x, scale, bias] + ([fused_add] if with_add else [])
    verdict = dmlcli.validate("batch_normalization_training", *inputs, epsilon=0.01)
    got = dmlcli.run("batch_normalization_training", *inputs, epsilon=0.01)
    expected = ref_bn_training(x, scale, bias, fused_add, np.float32(0.01))
    for name, out, want in zip(("y", "mean", "variance"), got, expected):
        assert out.dtype == np.dtype(dtype)
        assert_within_rule(out, want, verdict, f"{name} {shape} {per_channel}")


def test_batch_normalization_training_statistics_are_the_batchs():
    x = data((4, 3, 5, 2))
    y, mean, variance = dmlcli.run("batch_normalization_training", x, np.ones((1, 3, 1, 1), F),
                                   np.zeros((1, 3, 1, 1), F), epsilon=0.0)
    wide = x.astype(np.float64)
    assert np.array_equal(mean, wide.mean(axis=(0, 2, 3), keepdims=True).astype(F))
    assert np.array_equal(variance, wide.var(axis=(0, 2, 3), keepdims=True).astype(F))  # population variance
    assert np.allclose(y.astype(np.float64).mean(axis=(0, 2, 3)), 0, atol=1e-6)
    assert np.allclose(y.astype(np.float64).var(axis=(0, 2, 3)), 1, atol=1e-5)


def test_batch_normalization_training_edge_cases():
    # One element per group (Scale has the input's Sizes): the mean is the element, the variance 0; Epsilon 0
    # then divides 0 by 0.
    x = data((2, 3))
    y, mean, variance = dmlcli.run("batch_normalization_training", x, np.ones((2, 3), F), np.zeros((2, 3), F),
                                   epsilon=0.0)
    assert np.array_equal(mean, x) and not variance.any() and np.isnan(y).all()
    y, _, _ = dmlcli.run("batch_normalization_training", x, np.ones((2, 3), F), np.full((2, 3), 5, F), epsilon=1.0)
    assert np.array_equal(y, np.full((2, 3), 5, F))
    # A NaN reaches its whole group (the mean), not the other channels.
    x = data((2, 2, 3))
    x[1, 0, 2] = np.nan
    y, mean, variance = dmlcli.run("batch_normalization_training", x, np.ones((1, 2, 1), F), np.zeros((1, 2, 1), F))
    assert np.isnan(y[:, 0]).all() and not np.isnan(y[:, 1]).any() and np.isnan(mean[0, 0, 0])


def test_fused_activation_runs_on_the_rounded_output_alone():
    x, scale, bias, add = data(X4), data(C4), data(C4), data(X4)
    plain = dmlcli.run("batch_normalization_training", x, scale, bias, add)
    fused = dmlcli.run("batch_normalization_training", x, scale, bias, add, fused_activation="relu")
    assert np.array_equal(fused[0], np.maximum(plain[0], 0))
    assert np.array_equal(fused[1], plain[1]) and np.array_equal(fused[2], plain[2])
    elu = dmlcli.run("batch_normalization_training", x, scale, bias, fused_activation="elu", fused_alpha=0.5)[0]
    activated = dmlcli.run("activation_elu", dmlcli.run("batch_normalization_training", x, scale, bias)[0], alpha=0.5)
    assert np.array_equal(elu, activated)


@pytest.mark.parametrize("op, reference", [("batch_normalization_grad", ref_bn_grad),
                                           ("batch_normalization_training_grad", ref_bn_training_grad)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape, per_channel", PER_CHANNEL)
def test_batch_normalization_gradients_against_the_reference(op, reference, shape, per_channel, dtype):
    x, dy = data(shape, dtype), data(shape, dtype)
    mean, scale = data(per_channel, dtype), data(per_channel, dtype)
    variance = data(per_channel, dtype, 0.25, 2.0)
    verdict = dmlcli.validate(op, x, dy, mean, variance, scale, epsilon=0.001)
    got = dmlcli.run(op, x, dy, mean, variance, scale, epsilon=0.001)
    expected = reference(x, dy, mean, variance, scale, np.float32(0.001))
    for name, out, want in zip(ENTRIES[op.upper()][4], got, expected):
        assert out.dtype == np.dtype(dtype) and out.shape == want.shape
        assert_within_rule(out, want, verdict, f"{name} {shape}")
        if dtype == "float32":
            assert_rounded_once(out, want, name)


# ---------------------------------------------------------------- derivatives: finite differences of the forward

H = 1e-6


def central_gradient(loss, point):
    """d loss / d point by central differences, every element (float64)."""
    gradient = np.empty(point.shape, np.float64)
    for index in np.ndindex(point.shape):
        up, down = point.copy(), point.copy()
        up[index] += H
        down[index] -= H
        gradient[index] = (loss(up) - loss(down)) / (2 * H)
    return gradient


def bn_forward(x, scale, bias, mean, var, epsilon):
    """BATCH_NORMALIZATION's formula (float64)."""
    return scale * ((x - mean) / np.sqrt(var + epsilon)) + bias


def bn_training_forward(x, scale, bias, epsilon):
    """BATCH_NORMALIZATION_TRAINING's OutputTensor (float64): the batch's own population statistics."""
    axes = tuple(axis for axis, size in enumerate(scale.shape) if size == 1)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return bn_forward(x, scale, bias, mean, var, epsilon), mean, var


def assert_matches_derivative(got, derivative, verdict, context):
    assert_within_rule(got, derivative, verdict, context)
    np.testing.assert_allclose(got.astype(np.float64), derivative, rtol=1e-5, atol=1e-5, err_msg=context)


@pytest.mark.parametrize("shape, per_channel", PER_CHANNEL[:4])
def test_batch_normalization_grad_is_the_derivative_with_fixed_statistics(shape, per_channel):
    x, dy, mean, scale, bias = (data(s) for s in (shape, shape, per_channel, per_channel, per_channel))
    variance, epsilon = data(per_channel, low=0.25, high=2.0), 0.001
    wide = [t.astype(np.float64) for t in (x, dy, mean, variance, scale, bias)]
    xw, dyw, mw, vw, sw, bw = wide
    eps = float(np.float32(epsilon))
    loss_x = lambda p: float(np.sum(dyw * bn_forward(p, sw, bw, mw, vw, eps)))  # noqa: E731
    loss_scale = lambda p: float(np.sum(dyw * bn_forward(xw, p, bw, mw, vw, eps)))  # noqa: E731
    loss_bias = lambda p: float(np.sum(dyw * bn_forward(xw, sw, p, mw, vw, eps)))  # noqa: E731
    verdict = dmlcli.validate("batch_normalization_grad", x, dy, mean, variance, scale, epsilon=epsilon)
    dx, dscale, dbias = dmlcli.run("batch_normalization_grad", x, dy, mean, variance, scale, epsilon=epsilon)
    assert_matches_derivative(dx, central_gradient(loss_x, xw), verdict, "dx")
    assert_matches_derivative(dscale, central_gradient(loss_scale, sw), verdict, "dscale")
    assert_matches_derivative(dbias, central_gradient(loss_bias, bw), verdict, "dbias")


@pytest.mark.parametrize("shape, per_channel", PER_CHANNEL[:4])
def test_batch_normalization_training_grad_is_the_derivative_of_the_training_forward(shape, per_channel):
    x, dy, scale, bias = data(shape), data(shape), data(per_channel), data(per_channel)
    epsilon = 0.01
    eps = float(np.float32(epsilon))
    xw, dyw, sw, bw = (t.astype(np.float64) for t in (x, dy, scale, bias))
    _, mean, variance = dmlcli.run("batch_normalization_training", x, scale, bias, epsilon=epsilon)
    verdict = dmlcli.validate("batch_normalization_training_grad", x, dy, mean, variance, scale, epsilon=epsilon)
    dx, dscale, dbias = dmlcli.run("batch_normalization_training_grad", x, dy, mean, variance, scale, epsilon=epsilon)
    loss_x = lambda p: float(np.sum(dyw * bn_training_forward(p, sw, bw, eps)[0]))  # noqa: E731
    loss_scale = lambda p: float(np.sum(dyw * bn_training_forward(xw, p, bw, eps)[0]))  # noqa: E731
    loss_bias = lambda p: float(np.sum(dyw * bn_training_forward(xw, sw, p, eps)[0]))  # noqa: E731
    assert_matches_derivative(dx, central_gradient(loss_x, xw), verdict, "dx")
    assert_matches_derivative(dscale, central_gradient(loss_scale, sw), verdict, "dscale")
    assert_matches_derivative(dbias, central_gradient(loss_bias, bw), verdict, "dbias")


def test_batch_normalization_training_grad_adjoint_identity():
    """<OutputGradient, v> = <InputGradient, J v>, J v the forward's directional derivative along v."""
    shape, per_channel, eps = (3, 4, 2, 3), (1, 4, 1, 1), 0.001
    x, dy, scale, bias, v = data(shape), data(shape), data(per_channel), data(per_channel), data(shape)
    _, mean, variance = dmlcli.run("batch_normalization_training", x, scale, bias, epsilon=eps)
    dx = dmlcli.run("batch_normalization_training_grad", x, dy, mean, variance, scale, epsilon=eps)[0]
    xw, sw, bw, vw = (t.astype(np.float64) for t in (x, scale, bias, v))
    e = float(np.float32(eps))
    jv = (bn_training_forward(xw + H * vw, sw, bw, e)[0] - bn_training_forward(xw - H * vw, sw, bw, e)[0]) / (2 * H)
    left, right = float(np.sum(dx.astype(np.float64) * vw)), float(np.sum(dy.astype(np.float64) * jv))
    assert left == pytest.approx(right, rel=1e-5, abs=1e-5)


def lrn_forward(x, cross_channel, size, alpha, beta, bias):
    """LOCAL_RESPONSE_NORMALIZATION's formula with its window (float64, loops)."""
    low, high = (size - 1) // 2, size - 1 - (size - 1) // 2
    n, c, h, w = x.shape
    out = np.empty(x.shape, np.float64)
    for b, ch, i, k in itertools.product(range(n), range(c), range(h), range(w)):
        if cross_channel:
            region = [x[b, q, i, k] for q in range(ch - low, ch + high + 1) if 0 <= q < c]
        else:
            region = [x[b, ch, p, q] for p in range(i - low, i + high + 1) for q in range(k - low, k + high + 1)
                      if 0 <= p < h and 0 <= q < w]
        total = math.fsum(float(value) ** 2 for value in region)
        out[b, ch, i, k] = float(x[b, ch, i, k]) / (bias + alpha / size * total) ** beta
    return out


LRN_CASES = [(True, 3), (True, 2), (True, 1), (True, 6), (False, 2), (False, 3)]


@pytest.mark.parametrize("cross_channel, size", LRN_CASES)
def test_lrn_grad_is_the_derivative_of_lrn(cross_channel, size):
    shape = (2, 4, 3, 3)
    x, dy = data(shape), data(shape)
    params = {"cross_channel": cross_channel, "local_size": size, "alpha": 0.5, "beta": 0.75, "bias": 1.5}
    alpha, beta, bias = (float(np.float32(params[k])) for k in ("alpha", "beta", "bias"))
    dyw = dy.astype(np.float64)
    loss = lambda p: float(np.sum(dyw * lrn_forward(p, cross_channel, size, alpha, beta, bias)))  # noqa: E731
    verdict = dmlcli.validate("local_response_normalization_grad", x, dy, **params)
    dx = dmlcli.run("local_response_normalization_grad", x, dy, **params)
    assert_matches_derivative(dx, central_gradient(loss, x.astype(np.float64)), verdict, f"{cross_channel} {size}")


@pytest.mark.parametrize("cross_channel, size", LRN_CASES)
def test_lrn_grad_adjoint_identity(cross_channel, size):
    shape = (1, 5, 4, 4)
    x, dy, v = data(shape), data(shape), data(shape)
    params = {"cross_channel": cross_channel, "local_size": size, "alpha": 0.25, "beta": 0.5, "bias": 2.0}
    dx = dmlcli.run("local_response_normalization_grad", x, dy, **params).astype(np.float64)
    alpha, beta, bias = (float(np.float32(params[k])) for k in ("alpha", "beta", "bias"))
    xw, vw = x.astype(np.float64), v.astype(np.float64)
    jv = (lrn_forward(xw + H * vw, cross_channel, size, alpha, beta, bias)
          - lrn_forward(xw - H * vw, cross_channel, size, alpha, beta, bias)) / (2 * H)
    assert float(np.sum(dx * vw)) == pytest.approx(float(np.sum(dy.astype(np.float64) * jv)), rel=1e-5, abs=1e-5)


def test_lrn_grad_float16_and_nan():
    x, dy = data((1, 3, 2, 2), "float16"), data((1, 3, 2, 2), "float16")
    x[0, 1, 0, 0] = np.nan
    dx = dmlcli.run("local_response_normalization_grad", x, dy, local_size=3, cross_channel=True)
    assert dx.dtype == np.float16
    # The NaN reaches the elements whose window or reflected window holds it: channels 0 to 2 at (0, 0) only.
    assert np.isnan(dx[0, :, 0, 0]).all() and not np.isnan(dx[0, :, 1:, :]).any()
    spatial = dmlcli.run("local_response_normalization_grad", x, dy, local_size=3)  # a 3 x 3 window: channel 1
    assert np.isnan(spatial[0, 1]).all() and not np.isnan(spatial[0, [0, 2]]).any()


# ---------------------------------------------------------------- ADAM_OPTIMIZER: the page's order, bit for bit

def ref_adam(x, m, v, g, step, lr, beta1, beta2, epsilon):
    """One element at a time with NumPy's float32 scalars (each operation rounded once), the page's grouping."""
    f = np.float32
    one, beta1, beta2 = f(1), f(beta1), f(beta2)
    with np.errstate(all="ignore"):
        alpha = np.sqrt(one - f(float(beta2) ** step)) / (one - f(float(beta1) ** step))
        rate = f(lr) * alpha
        out = [np.empty(x.shape, np.float32) for _ in range(3)]
        for i in np.ndindex(x.shape):
            xi, mi, vi, gi = (f(t[i]) for t in (x, m, v, g))
            new_m = beta1 * mi + (one - beta1) * gi
            new_v = beta2 * vi + ((one - beta2) * gi) * gi
            out[0][i] = xi - (rate * new_m) / (np.sqrt(new_v) + f(epsilon))
            out[1][i], out[2][i] = new_m, new_v
    return out


def step_tensor(step):
    return np.array(step, np.uint32).reshape(1, 1, 1, 1)


ADAM_PARAMS = [dict(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8),
               dict(learning_rate=0.5, beta1=0.5, beta2=0.75, epsilon=0.0),
               dict(learning_rate=3.0, beta1=0.0, beta2=0.0, epsilon=1.0)]


@pytest.mark.parametrize("step", [1, 2, 10, 100000, 2 ** 32 - 1])
@pytest.mark.parametrize("params", ADAM_PARAMS)
def test_adam_is_the_pages_order_bit_for_bit(step, params):
    shape = (2, 3, 4, 5)
    rng = np.random.default_rng(step)
    x, m, g = (rng.standard_normal(shape).astype(F) for _ in range(3))
    v = np.abs(rng.standard_normal(shape)).astype(F) * F(0.01)
    got = dmlcli.run("adam_optimizer", x, m, v, g, step_tensor(step), **params)
    expected = ref_adam(x, m, v, g, step, params["learning_rate"], params["beta1"], params["beta2"],
                        params["epsilon"])
    for out, want in zip(got, expected):
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32))


def test_adam_keeps_subnormals_and_signed_zeros():
    tiny = np.finfo(F).smallest_subnormal
    x = np.array([[[[1.0, -0.0, tiny, 0.0]]]], F)
    m = np.array([[[[tiny * 4, 0.0, -tiny, 0.0]]]], F)
    v = np.zeros((1, 1, 1, 4), F)
    g = np.array([[[[0.0, 0.0, 0.0, -0.0]]]], F)
    got = dmlcli.run("adam_optimizer", x, m, v, g, step_tensor(3), beta1=0.5, epsilon=1.0)
    expected = ref_adam(x, m, v, g, 3, 0.001, 0.5, 0.999, 1.0)
    for out, want in zip(got, expected):
        assert np.array_equal(out.view(np.uint32), want.view(np.uint32))
    assert got[1][0, 0, 0, 0] == tiny * 2  # Beta1 * M kept as a subnormal


def test_adam_against_a_float64_reference():
    shape = (1, 2, 3, 4)
    x, m, g = data(shape), data(shape), data(shape)
    v = data(shape, low=0.0)
    verdict = dmlcli.validate("adam_optimizer", x, m, v, g, step_tensor(5))
    got = dmlcli.run("adam_optimizer", x, m, v, g, step_tensor(5))
    b1, b2, lr, eps = (float(np.float32(value)) for value in (0.9, 0.999, 0.001, 1e-8))
    mw = b1 * m.astype(np.float64) + (1 - b1) * g
    vw = b2 * v.astype(np.float64) + (1 - b2) * g.astype(np.float64) ** 2
    xw = x - lr * math.sqrt(1 - b2 ** 5) / (1 - b1 ** 5) * mw / (np.sqrt(vw) + eps)
    for out, want in zip(got, (xw, mw, vw)):
        assert_within_rule(out, want, verdict)


def test_adam_float16_rounds_each_output_once():
    shape = (1, 1, 2, 3)
    x, m, v, g = (data(shape, "float16", 0.0 if i == 2 else -2.0) for i in range(4))
    got = dmlcli.run("adam_optimizer", x, m, v, g, step_tensor(2), learning_rate=0.25)
    wide = ref_adam(*(t.astype(F) for t in (x, m, v, g)), 2, 0.25, 0.9, 0.999, 1e-8)
    for out, want in zip(got, wide):
        assert out.dtype == np.float16 and np.array_equal(out, want.astype(np.float16))


def test_adam_at_step_0_divides_zero_by_zero():
    x = np.ones((1, 1, 1, 2), F)
    out, first, second = dmlcli.run("adam_optimizer", x, x, x, x, step_tensor(0))
    assert np.isnan(out).all() and np.isfinite(first).all() and np.isfinite(second).all()


# ---------------------------------------------------------------- the command line, DxDispatch

def typed(array) -> str:
    return shaped_cli.json_input(np.asarray(array))


CLI_RUNS = [
    (["batch_normalization_training", typed(np.array([[1, 3], [3, 5]], F)), typed(np.array([[1, 2]], F)),
      typed(np.array([[0, 1]], F)), "--epsilon", "0"],
     {"OutputTensor": [[-1, -1], [1, 3]], "OutputMeanTensor": [[2, 4]], "OutputVarianceTensor": [[1, 1]]}),
    (["batch_normalization_training", typed(np.array([[1, 3]], F)), typed(np.array([[2]], F)),
      typed(np.array([[1]], F)), "--epsilon", "0"],
     {"OutputTensor": [[-1, 3]], "OutputMeanTensor": [[2]], "OutputVarianceTensor": [[1]]}),
    (["batch_normalization_grad", typed(np.array([[1, 3]], F)), typed(np.array([[1, 1]], F)),
      typed(np.array([[2]], F)), typed(np.array([[4]], F)), typed(np.array([[6]], F)), "--epsilon", "0"],
     {"OutputGradientTensor": [[3, 3]], "OutputScaleGradientTensor": [[0]], "OutputBiasGradientTensor": [[2]]}),
    (["batch_normalization_training_grad", typed(np.array([[1, 3]], F)), typed(np.array([[1, -1]], F)),
      typed(np.array([[2]], F)), typed(np.array([[1]], F)), typed(np.array([[2]], F)), "--epsilon", "0"],
     {"OutputGradientTensor": [[0, 0]], "OutputScaleGradientTensor": [[-2]], "OutputBiasGradientTensor": [[0]]}),
    (["local_response_normalization_grad", typed(np.array([[[[0]]]], F)), typed(np.array([[[[2]]]], F)),
      "--local-size", "1", "--bias", "4", "--beta", "0.5"],
     {"OutputGradientTensor": [[[[1]]]]}),
    (["adam_optimizer", typed(np.array([[[[1, 2]]]], F)), typed(np.zeros((1, 1, 1, 2), F)),
      typed(np.zeros((1, 1, 1, 2), F)), typed(np.array([[[[0.5, -0.5]]]], F)),
      typed(np.array([[[[1]]]], np.uint32)), "--learning-rate", "0.5", "--epsilon", "0"],
     {"OutputParametersTensor": [[[[0.5, 2.5]]]], "OutputFirstMomentTensor": [[[[0.05, -0.05]]]],
      "OutputSecondMomentTensor": [[[[0.00025, 0.00025]]]]}),
]


@pytest.mark.parametrize("args, outputs", CLI_RUNS, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(CLI_RUNS)])
def test_command_line_run(args, outputs):
    result = CliRunner().invoke(cli, ["run", *args, "-o", "-"])
    assert result.exit_code == 0, result.output
    written = json.loads(result.stdout)
    if len(outputs) == 1:  # one output: the tensor itself
        written = {next(iter(outputs)): written}
    assert list(written) == list(outputs)
    for name, want in outputs.items():
        np.testing.assert_allclose(np.array(written[name]["data"], np.float64), np.array(want, np.float64),
                                   rtol=1e-5, atol=1e-7)


def test_every_operator_has_a_command_line_run():
    ran = {args[0] for args, _ in CLI_RUNS}
    assert ran == {op.cli_name for op in norm_module.OPERATORS + optimizer_module.OPERATORS}


def _desc_tensor(data_type, sizes):
    return {"DataType": data_type, "Sizes": list(sizes)}


def _resource(values, data_type="FLOAT32"):
    return {"initialValuesDataType": data_type, "initialValues": values}


MODEL = {
    "resources": {
        "x": _resource([1, 3, 2, 6]), "dy": _resource([1, -1, 0, 2]), "scale": _resource([2, 1]),
        "bias": _resource([0, 1]), "y": _resource({"valueCount": 4, "value": 0}),
        "mean": _resource({"valueCount": 2, "value": 0}), "var": _resource({"valueCount": 2, "value": 0}),
        "dx": _resource({"valueCount": 4, "value": 0}), "dscale": _resource({"valueCount": 2, "value": 0}),
        "dbias": _resource({"valueCount": 2, "value": 0}), "lrn_dx": _resource({"valueCount": 4, "value": 0}),
        "m": _resource([0, 0, 0, 0]), "v": _resource([0, 0, 0, 0]), "g": _resource([1, -1, 4, 2]),
        "t": _resource([1], "UINT32"),
    },
    "dispatchables": {
        # { N = 2, C = 2 }: each channel over its two batch elements; FusedAddTensor and FusedActivation left out.
        "bn": {"type": "DML_OPERATOR_BATCH_NORMALIZATION_TRAINING", "desc": {
            "InputTensor": _desc_tensor("FLOAT32", (2, 2)), "ScaleTensor": _desc_tensor("FLOAT32", (1, 2)),
            "BiasTensor": _desc_tensor("FLOAT32", (1, 2)), "FusedAddTensor": None,
            "OutputTensor": _desc_tensor("FLOAT32", (2, 2)), "OutputMeanTensor": _desc_tensor("FLOAT32", (1, 2)),
            "OutputVarianceTensor": _desc_tensor("FLOAT32", (1, 2)), "Epsilon": 0.0, "FusedActivation": None}},
        "bn_grad": {"type": "DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD", "desc": {
            "InputTensor": _desc_tensor("FLOAT32", (2, 2)), "InputGradientTensor": _desc_tensor("FLOAT32", (2, 2)),
            "MeanTensor": _desc_tensor("FLOAT32", (1, 2)), "VarianceTensor": _desc_tensor("FLOAT32", (1, 2)),
            "ScaleTensor": _desc_tensor("FLOAT32", (1, 2)), "OutputGradientTensor": _desc_tensor("FLOAT32", (2, 2)),
            "OutputScaleGradientTensor": _desc_tensor("FLOAT32", (1, 2)),
            "OutputBiasGradientTensor": _desc_tensor("FLOAT32", (1, 2)), "Epsilon": 0.0}},
        "lrn_grad": {"type": "DML_OPERATOR_LOCAL_RESPONSE_NORMALIZATION_GRAD", "desc": {
            "InputTensor": _desc_tensor("FLOAT32", (1, 4, 1, 1)),
            "InputGradientTensor": _desc_tensor("FLOAT32", (1, 4, 1, 1)),
            "OutputGradientTensor": _desc_tensor("FLOAT32", (1, 4, 1, 1)),
            "CrossChannel": True, "LocalSize": 1, "Alpha": 0.0, "Beta": 0.75, "Bias": 1.0}},
        "adam": {"type": "DML_OPERATOR_ADAM_OPTIMIZER", "desc": {
            **{name: _desc_tensor("FLOAT32", (1, 1, 2, 2)) for name in (
                "InputParametersTensor", "InputFirstMomentTensor", "InputSecondMomentTensor", "GradientTensor",
                "OutputParametersTensor", "OutputFirstMomentTensor", "OutputSecondMomentTensor")},
            "TrainingStepTensor": _desc_tensor("UINT32", (1, 1, 1, 1)),
            "LearningRate": 0.5, "Beta1": 0.5, "Beta2": 0.75, "Epsilon": 0.0}},
    },
    "commands": [
        {"type": "dispatch", "dispatchable": "bn", "bindings": {
            "InputTensor": "x", "ScaleTensor": "scale", "BiasTensor": "bias", "OutputTensor": "y",
            "OutputMeanTensor": "mean", "OutputVarianceTensor": "var"}},
        {"type": "dispatch", "dispatchable": "bn_grad", "bindings": {
            "InputTensor": "x", "InputGradientTensor": "dy", "MeanTensor": "mean", "VarianceTensor": "var",
            "ScaleTensor": "scale", "OutputGradientTensor": "dx", "OutputScaleGradientTensor": "dscale",
            "OutputBiasGradientTensor": "dbias"}},
        {"type": "dispatch", "dispatchable": "lrn_grad", "bindings": {
            "InputTensor": "x", "InputGradientTensor": "dy", "OutputGradientTensor": "lrn_dx"}},
        # In place: each output bound to the input it updates, as the page allows.
        {"type": "dispatch", "dispatchable": "adam", "bindings": {
            "InputParametersTensor": "x", "InputFirstMomentTensor": "m", "InputSecondMomentTensor": "v",
            "GradientTensor": "g", "TrainingStepTensor": "t", "OutputParametersTensor": "x",
            "OutputFirstMomentTensor": "m", "OutputSecondMomentTensor": "v"}},
        *({"type": "print", "resource": name} for name in ("y", "mean", "var", "dx", "dscale", "dbias", "lrn_dx",
                                                           "x", "m", "v")),
    ],
}


def test_a_dxdispatch_model_runs_the_family(tmp_path, monkeypatch):
    # x = [[1, 3], [2, 6]]: channel 0 holds 1, 2 (mean 1.5, variance 0.25), channel 1 holds 3, 6 (4.5, 2.25);
    # y = scale * (x - mean) / sd + bias. dy = [[1, -1], [0, 2]]: channel 0's dy 1, 0 (mean 0.5), xhat -1, 1, so
    # mean(dy * (x - mean)) = -0.25 and dx = 2 * 2 * ((1 - 0.5) - (-0.5)(-0.25)/0.25) = 0 and
    # 4 * ((0 - 0.5) - (0.5)(-0.25)/0.25) = 0; channel 1's dy -1, 2 (mean 0.5), x - mean -1.5, 1.5: mean(dy(x -
    # mean)) = 2.25, dx = (1 / 1.5)((-1.5) - (-1.5)(2.25)/2.25) = 0 and 0: a full-rank pair has no gradient left.
    # LRN with Alpha 0 is the identity: its gradient is dy. Adam (T = 1, Beta1 0.5, Beta2 0.75, g = [1, -1, 4, 2]):
    # M' = g / 2, V' = g^2 / 4, Alpha = sqrt(0.25) / 0.5 = 1, X' = x - 0.5 * (g / 2) / (|g| / 2) = x - 0.5 sign(g).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.json").write_text(json.dumps(MODEL))
    result = CliRunner().invoke(cli, ["dispatch", "model.json", "--no-timing"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Resource 'y': -2, 0, 2, 2", "Resource 'mean': 1.5, 4.5", "Resource 'var': 0.25, 2.25",
        "Resource 'dx': 0, 0, 0, 0", "Resource 'dscale': -1, 3", "Resource 'dbias': 1, 1",
        "Resource 'lrn_dx': 1, -1, 0, 2",
        "Resource 'x': 0.5, 3.5, 1.5, 5.5", "Resource 'm': 0.5, -0.5, 2, 1", "Resource 'v': 0.25, 0.25, 4, 1"]


# ---------------------------------------------------------------- ONNX's training operators through `dmlcli test`

def _tensor(array):
    array = np.asarray(array)
    return {"dtype": array.dtype.name, "shape": list(array.shape), "data": array.tolist()}


def onnx_adam(x, g, v, h, r, t, alpha, beta, epsilon):
    """ONNX's reference (onnx/backend/test/case/node/adam.py) without its regularisation terms, in float64."""
    v_new = alpha * v + (1 - alpha) * g
    h_new = beta * h + (1 - beta) * (g * g)
    rate = r * math.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    return x - rate * (v_new / (np.sqrt(h_new) + epsilon)), v_new, h_new


def adam_case(t=3, **attributes):
    x, g, v, h = (RNG.standard_normal(5) for _ in range(4))
    h = np.abs(h)
    attrs = {"alpha": 0.9, "beta": 0.999, "epsilon": 1e-7, **attributes}
    wide = [np.float32(a).astype(np.float64) for a in (x, g, v, h)]
    expected = onnx_adam(*wide, float(np.float32(0.1)), t, *(float(np.float32(attrs[k]))
                                                             for k in ("alpha", "beta", "epsilon")))
    return {"onnx_op": "Adam", "domain": "ai.onnx.preview.training", "attributes": attrs,
            "input_names": ["R", "T", "X", "G", "V", "H"], "output_names": ["X_new", "V_new", "H_new"],
            "inputs": [_tensor(np.float32(0.1)), _tensor(np.int64(t))] + [_tensor(a.astype(F)) for a in (x, g, v, h)],
            "expected": [_tensor(e.astype(F)) for e in expected]}


def bn_training_case(momentum):
    x, scale, bias = RNG.standard_normal((2, 3, 2, 2)), RNG.standard_normal(3), RNG.standard_normal(3)
    mean, var = RNG.standard_normal(3), np.abs(RNG.standard_normal(3))
    x32 = [t.astype(F) for t in (x, scale, bias, mean, var)]
    xw = x32[0].astype(np.float64)
    batch_mean, batch_var = xw.mean(axis=(0, 2, 3)), xw.var(axis=(0, 2, 3))
    eps = float(np.float32(1e-5))
    y = bn_forward(xw, x32[1].reshape(1, 3, 1, 1), x32[2].reshape(1, 3, 1, 1), batch_mean.reshape(1, 3, 1, 1),
                   batch_var.reshape(1, 3, 1, 1), eps)
    running_mean = x32[3] * momentum + batch_mean * (1 - momentum)
    running_var = x32[4] * momentum + batch_var * (1 - momentum)
    return {"onnx_op": "BatchNormalization", "attributes": {"training_mode": 1, "momentum": momentum},
            "input_names": ["x", "s", "bias", "mean", "var"], "output_names": ["y", "output_mean", "output_var"],
            "inputs": [_tensor(t) for t in x32],
            "expected": [_tensor(t.astype(F)) for t in (y, running_mean, running_var)]}


def test_onnx_training_cases_map_where_directml_expresses_them(tmp_path):
    cases = {"adam_t3": adam_case(), "adam_t1_no_epsilon": adam_case(t=1, epsilon=0.0),
             "adam_t0": adam_case(t=0), "adam_norm": adam_case(norm_coefficient=0.01),
             "adam_post": adam_case(norm_coefficient_post=0.5),
             "bn_momentum_0": bn_training_case(0.0), "bn_momentum_default": bn_training_case(0.9)}
    cases["bn_momentum_default"]["attributes"].pop("momentum")
    for name, document in cases.items():
        (tmp_path / f"onnx__{name}.json").write_text(json.dumps(document))
    run = run_suite([tmp_path], backend="cpu", jobs=1)
    verdicts = {r.case_id.removeprefix("onnx__"): (r.verdict, r.message) for r in run.results}
    assert verdicts["adam_t3"][0] == "passed", verdicts["adam_t3"]
    assert verdicts["adam_t1_no_epsilon"][0] == "passed", verdicts["adam_t1_no_epsilon"]
    assert verdicts["bn_momentum_0"][0] == "passed", verdicts["bn_momentum_0"]
    skips = {name: message for name, (verdict, message) in verdicts.items() if verdict == "skipped"}
    assert "at T = 0 skips the bias correction" in skips["adam_t0"]
    assert "norm_coefficient (0.01) adds norm_coefficient * X" in skips["adam_norm"]
    assert "norm_coefficient_post (0.5)" in skips["adam_post"]
    assert "with momentum 0.9: " in skips["bn_momentum_default"]  # ONNX's default, worded as the value
    assert len(skips) == 4 and all("DirectML" in message for message in skips.values())


def test_batch_normalization_picks_its_directml_operator_by_training_mode():
    x, c = np.ones((2, 3, 1, 1), F), np.ones(3, F)
    training = OnnxCall("BatchNormalization", (x, c, c, c, c), {"training_mode": 1}, 3)
    inference = OnnxCall("BatchNormalization", (x, c, c, c, c), {"training_mode": 0}, 1)
    assert entry_for(training).directml == "BATCH_NORMALIZATION_TRAINING"
    assert entry_for(inference) is TABLE["BatchNormalization"] and TABLE["BatchNormalization"].directml == \
        "BATCH_NORMALIZATION"
    # Only y expected: the running statistics are not compared, so any momentum maps.
    only_y = OnnxCall("BatchNormalization", (x, c, c, c, c), {"training_mode": 1, "momentum": 0.5}, 1)
    assert not any(condition.when(only_y) for condition in entry_for(only_y).cannot)
    infinite = OnnxCall("BatchNormalization", (x, c, c, np.full(3, np.inf, F), c), {"training_mode": 1,
                                                                                    "momentum": 0.0}, 3)
    assert any(condition.when(infinite) for condition in entry_for(infinite).cannot)


def test_adam_updating_several_tensors_is_skipped():
    one = np.ones(2, F)
    call = OnnxCall("Adam", (np.float32(0.1), np.int64(2)) + (one,) * 8, {}, 6)
    reasons = [c.describe(call) for c in TABLE["Adam"].cannot if c.when(call)]
    assert reasons[0] == ("ONNX's Adam updates several tensors in one call; DirectML's ADAM_OPTIMIZER updates one "
                          "InputParametersTensor")


def test_the_shared_onnx_training_cases_are_skipped_for_a_directml_reason(shared_dir):
    from dmlcli.suite import load_case

    adam = onnx_plan(load_case(shared_dir / "onnx_operators_complete" / "onnx__test_adam.json"))
    assert isinstance(adam, Skipped) and "norm_coefficient" in adam.reason and "DirectML" in adam.reason
    for name in ("epsilon", "example"):
        path = shared_dir / "onnx_operators" / f"onnx__test_batchnorm_{name}_training_mode.json"
        planned = onnx_plan(load_case(path))
        assert isinstance(planned, Skipped) and "momentum" in planned.reason
    plain = onnx_plan(load_case(shared_dir / "onnx_operators" / "onnx__test_batchnorm_epsilon.json"))
    assert isinstance(plain, Planned) and plain.operator.name == "BATCH_NORMALIZATION"
