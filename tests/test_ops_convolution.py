"""The convolution family: CONVOLUTION, CONVOLUTION_INTEGER, QUANTIZED_LINEAR_CONVOLUTION.

Every expected value comes from an independent reference written here with plain Python loops over output
coordinates and filter taps in float64 (or Python integers), from hand-computed examples, or from ONNX's node
tests (../shared/onnx_operators, mapped by hand onto the DESC fields), never from dmlcli's kernels. The
support tables are transcribed a second time below and checked against acceptance at every feature level.
Float results are compared within an error bound of the float32 accumulation (a multiple of the float32
epsilon times sum |x| |w| per element); integer and quantized results exactly.
"""

import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.api import plan
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.operators import find_operator
from shaped_cli import cli_args, json_input, judge_cell, refused_in_one_line  # noqa: F401 - tests/ is on the path

from conftest import SHARED

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL = "float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8".split()

# ---------------------------------------------------------------- the support tables, transcribed again
# (level, dimension counts of the main tensors, data types of the main input) newest first
TABLES = {
    "CONVOLUTION": [("4_0", (3, 4, 5), ("float32", "float16")), ("1_0", (4, 5), ("float32", "float16"))],
    "CONVOLUTION_INTEGER": [("4_0", (3, 4), ("int8", "uint8")), ("2_1", (4,), ("int8", "uint8"))],
    "QUANTIZED_LINEAR_CONVOLUTION": [("5_2", (3, 4), ("int8", "uint8")), ("4_0", (3, 4), ("int8", "uint8")),
                                     ("2_1", (4,), ("int8", "uint8"))],
}
ENUMS = {"CONVOLUTION": 53, "CONVOLUTION_INTEGER": 119, "QUANTIZED_LINEAR_CONVOLUTION": 120}


def expected_accepts(op, level, dtype, rank):
    found = [row for row in TABLES[op] if LEVELS.index(row[0]) <= LEVELS.index(level)]
    return bool(found) and dtype in found[0][2] and rank in found[0][1]


def planned_inputs(op, dtype, rank):
    t = parse_data_type(dtype)
    x, w = (t, (1, 2) + (3,) * (rank - 2)), (t, (2, 2) + (2,) * (rank - 2))
    if op == "CONVOLUTION":
        return [x, w]
    if op == "CONVOLUTION_INTEGER":
        return [x, w]
    f32 = parse_data_type("float32")
    one = (f32, (1,) * rank)
    return [x, one, w, one, one]


@pytest.mark.parametrize("op", sorted(TABLES))
def test_validation_grid(op):
    failures = []
    for level in LEVELS:
        for dtype in ALL:
            for rank in (2, 3, 4, 5, 6):
                judge_cell(f"{op} {level} {dtype} rank {rank}",
                           lambda: plan(op, planned_inputs(op, dtype, rank), feature_level=level),
                           expected_accepts(op, level, dtype, rank),
                           lambda: next(lv for lv in LEVELS if expected_accepts(op, lv, dtype, rank)), failures)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("op", sorted(TABLES))
def test_entry_names_enum_values_and_levels(op):
    entry = find_operator(op)
    assert entry.enum_value == ENUMS[op] and entry.family == "convolution"
    assert entry.introduced.short == TABLES[op][-1][0]


def test_the_enums_are_directml_h_s():
    entry = find_operator("convolution")
    options = {p.field: dict(p.values) for p in entry.parameters if hasattr(p, "values") and p.values}
    assert options["Mode"] == {"CONVOLUTION": 0, "CROSS_CORRELATION": 1}
    assert options["Direction"] == {"FORWARD": 0, "BACKWARD": 1}


def test_rejected_level_names_the_lowest_accepting_one():
    f32 = parse_data_type("float32")
    with pytest.raises(dmlcli.ValidationError, match=r"not supported at DML_FEATURE_LEVEL_3_1 .*supported from "
                                                     r"DML_FEATURE_LEVEL_4_0"):
        plan("convolution", [(f32, (1, 1, 4)), (f32, (1, 1, 2))], feature_level="3_1")
    i8 = parse_data_type("int8")
    with pytest.raises(dmlcli.ValidationError, match=r"not available at DML_FEATURE_LEVEL_2_0 \(introduced in "
                                                     r"DML_FEATURE_LEVEL_2_1\)"):
        plan("convolution_integer", [(i8, (1, 1, 2, 2)), (i8, (1, 1, 1, 1))], feature_level="2_0")


def test_quantized_filter_scale_of_one_dimension_needs_5_2():
    # The page's 4_0 row gives FilterScaleTensor 3 to 4 dimensions, its 5_2 row 1 to 4.
    i8, f32 = parse_data_type("int8"), parse_data_type("float32")
    base = [(i8, (1, 1, 3, 3)), (f32, (1, 1, 1, 1)), (i8, (1, 1, 2, 2))]
    assert plan("quantized_linear_convolution", base + [(f32, (1,)), (f32, (1,))]).lowest_feature_level.short == "5_2"
    assert plan("quantized_linear_convolution", base + [(f32, (1, 1, 1, 1)), (f32, (1,))]
                ).lowest_feature_level.short == "4_0"
    assert plan("quantized_linear_convolution", base + [(f32, (1, 1, 1, 1)), (f32, (1, 1, 1, 1))]
                ).lowest_feature_level.short == "2_1"


def test_bias_and_zero_points_are_optional():
    x = np.ones((1, 1, 3, 3), np.float32)
    w = np.ones((2, 1, 2, 2), np.float32)
    with_bias = dmlcli.run("convolution", x, w, np.array([1, -1], np.float32).reshape(1, 2, 1, 1))
    assert with_bias[0, :, 0, 0].tolist() == [5.0, 3.0]
    assert dmlcli.run("convolution", x, w)[0, :, 0, 0].tolist() == [4.0, 4.0]
    xi, wi = np.full((1, 1, 2, 2), 3, np.uint8), np.full((1, 1, 2, 2), 2, np.uint8)
    assert dmlcli.run("convolution_integer", xi, wi).tolist() == [[[[24]]]]
    assert dmlcli.run("convolution_integer", xi, np.array(1, np.uint8).reshape(1, 1, 1, 1), wi,
                      np.array(1, np.uint8).reshape(1, 1, 1, 1)).tolist() == [[[[8]]]]


# ---------------------------------------------------------------- the rules the pages state (exit 3)


def arr(shape, dtype="float32"):
    return (np.arange(math.prod(shape)) % 7).astype(dtype).reshape(shape)


X4, W4 = arr((1, 2, 4, 4)), arr((2, 2, 2, 2))
I8X, I8W = arr((1, 2, 4, 4), "int8"), arr((2, 2, 2, 2), "int8")
ONE_F = np.ones((1, 1, 1, 1), np.float32)
RULES = [
    ("convolution", [X4, arr((2, 2, 2))], {}, r"FilterTensor has 3 dimensions but InputTensor has 4"),
    ("convolution", [X4, arr((2, 3, 2, 2))], {}, r"InputTensor has 2 channels but FilterTensor Sizes\[1\] 3 x "
                                                 r"GroupCount 1 = 3"),
    ("convolution", [arr((1, 2, 4, 4)), arr((3, 1, 2, 2))], {"group_count": 2},
     r"FilterTensor's 3 output channels \(Sizes\[0\]\) do not divide into GroupCount 2 groups"),
    ("convolution", [X4, W4], {"group_count": 0}, r"GroupCount is 0; it must be at least 1"),
    ("convolution", [X4, W4], {"strides": [1]}, r"Strides has 1 values but the tensors have 2 spatial dimensions"),
    ("convolution", [X4, W4], {"output_padding": [0, 0, 0]}, r"OutputPadding has 3 values"),
    ("convolution", [X4, W4], {"strides": [1, 0]}, r"Strides\[1\] is 0; Strides must be at least 1"),
    ("convolution", [X4, W4], {"dilations": [0, 1]}, r"Dilations\[0\] is 0"),
    ("convolution", [X4, W4], {"dilations": [4, 1]}, r"spatial dimension 0: the dilated filter spans 5 elements "
                                                     r"but the padded input has 4"),
    ("convolution", [X4, W4, np.ones((1, 3, 1, 1), np.float32)], {},
     r"BiasTensor Sizes \[1, 3, 1, 1\] must be \[1, 2, 1, 1\]"),
    ("convolution", [X4, arr((3, 2, 2, 2))], {"direction": "backward"},
     r"InputTensor has 2 channels \(Sizes\[1\]\) but FilterTensor Sizes\[0\] is 3"),
    ("convolution", [X4, W4], {"direction": "backward", "start_padding": [3, 0], "end_padding": [3, 0]},
     r"spatial dimension 0: \(InputTensor size 4 - 1\) x stride 1 \+ dilated filter 2 - StartPadding 3 - "
     r"EndPadding 3 \+ OutputPadding 0 = -1; the output needs at least 1 element"),
    ("convolution_integer", [I8X, np.zeros((1, 1, 1, 1), np.uint8), I8W, np.zeros((1, 1, 1, 1), np.int8)], {},
     r"InputTensor is INT8 but InputZeroPointTensor is UINT8; they must have the same DataType"),
    ("convolution_integer", [I8X, np.zeros((1, 1, 1, 1), np.int8), I8W, np.zeros((1, 3, 1, 1), np.int8)], {},
     r"FilterZeroPointTensor Sizes \[1, 3, 1, 1\] is not a per-tensor or per-channel zero point"),
    ("convolution_integer", [I8X, np.zeros((1, 2, 1, 1), np.int8), I8W, np.zeros((1, 1, 1, 1), np.int8)], {},
     r"InputZeroPointTensor Sizes \[1, 2, 1, 1\] is not a per-tensor zero point: expected Sizes of all 1s$"),
    ("convolution_integer", [I8X, np.zeros((1, 1, 1), np.int8), I8W, np.zeros((1, 1, 1, 1), np.int8)], {},
     r"FilterZeroPointTensor has 4 dimensions but InputZeroPointTensor has 3"),
    ("quantized_linear_convolution", [I8X, np.ones((1, 2, 1, 1), np.float32), I8W, ONE_F, ONE_F], {},
     r"InputScaleTensor Sizes \[1, 2, 1, 1\] is not a per-tensor value"),
    ("quantized_linear_convolution",
     [I8X, ONE_F, np.zeros((1, 1, 1, 1), np.int8), I8W, ONE_F, np.zeros((1, 1, 1, 1), np.int8),
      np.zeros((1, 2, 1), np.int32), ONE_F, np.zeros((1, 1, 1, 1), np.int8)], {},
     r"BiasTensor Sizes \[1, 2, 1\] must be \[1, 2, 1, 1\] .*; ONNX.s \[1, 2, 1\] is that reshaped"),
]


@pytest.mark.parametrize("op, inputs, parameters, message", RULES)
def test_rule_violations_name_field_value_and_what_is_allowed(op, inputs, parameters, message):
    with pytest.raises(dmlcli.ValidationError, match=f"^{op.upper()}: {message}"):
        dmlcli.validate(op, *inputs, **parameters)


@pytest.mark.parametrize("op, inputs, parameters, message", RULES)
def test_rule_violations_exit_3_on_the_command_line(op, inputs, parameters, message):
    prefix = f"dmlcli: error: {op.upper()}: "
    result = refused_in_one_line(cli_args(op, inputs, parameters, "-o", "-"), 3, prefix)
    assert result.stderr.startswith(prefix)


@pytest.mark.parametrize("op, inputs, parameters, message", [
    ("convolution", [X4, W4], {"fused_alpha": 0.5}, r"--fused-alpha needs --fused-activation"),
    ("convolution", [X4, W4], {"fused_activation": "relu", "fused_alpha": 0.5}, r"RELU has no Alpha"),
    ("convolution", [X4, W4], {"fused_activation": "swish"}, r"'swish' is not an activation DirectML can fuse"),
    ("convolution", [X4, W4], {"mode": "flip"}, r"Mode"),
    ("convolution", [X4, W4], {"strides": [-1, 1]}, r"out of range \(0 to 4294967295\)"),
])
def test_usage_errors_exit_2(op, inputs, parameters, message):
    with pytest.raises(dmlcli.InputError, match=message):
        dmlcli.run(op, *inputs, **parameters)
    result = CliRunner().invoke(cli, cli_args(op, inputs, parameters, "-o", "-"))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("dmlcli: error: ") and result.stderr.count("\n") == 1


# ---------------------------------------------------------------- independent references (plain loops)


def ref_forward(x, w, bias=None, strides=None, dilations=None, start=None, end=None, groups=1, outpad=None,
                flip=False):
    """Forward cross-correlation (convolution with flip=True) in float64, by loops over every output element
    and filter tap; output padding positions hold 0 before the bias."""
    n_spatial = x.ndim - 2
    strides = strides or [1] * n_spatial
    dilations = dilations or [1] * n_spatial
    start = start or [0] * n_spatial
    end = end or [0] * n_spatial
    outpad = outpad or [0] * n_spatial
    x, w = x.astype(np.float64), w.astype(np.float64)
    if flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * n_spatial]
    batch, channels = x.shape[:2]
    outputs, per_group = w.shape[0], w.shape[1]
    core = [(n + s0 + e0 - ((k - 1) * d + 1)) // s + 1
            for n, s0, e0, k, d, s in zip(x.shape[2:], start, end, w.shape[2:], dilations, strides)]
    out = np.zeros((batch, outputs) + tuple(c + p for c, p in zip(core, outpad)))
    per_group_out = outputs // groups
    for n, m in itertools.product(range(batch), range(outputs)):
        group = m // per_group_out
        for o in itertools.product(*(range(c) for c in core)):
            total = 0.0
            for c in range(per_group):
                for k in itertools.product(*(range(t) for t in w.shape[2:])):
                    i = [oo * s + kk * d - b for oo, s, kk, d, b in zip(o, strides, k, dilations, start)]
                    if all(0 <= ii < size for ii, size in zip(i, x.shape[2:])):
                        total += x[(n, group * per_group + c) + tuple(i)] * w[(m, c) + k]
            out[(n, m) + o] = total
    if bias is not None:
        out += np.asarray(bias, np.float64).reshape((1, -1) + (1,) * n_spatial)
    return out


def ref_backward(x, w, bias=None, strides=None, dilations=None, start=None, end=None, groups=1, outpad=None,
                 flip=False):
    """Transposed convolution by its definition: every input element times every filter tap lands at
    i x stride + k x dilation - start of the output (cropped to the output's Sizes)."""
    n_spatial = x.ndim - 2
    strides = strides or [1] * n_spatial
    dilations = dilations or [1] * n_spatial
    start = start or [0] * n_spatial
    end = end or [0] * n_spatial
    outpad = outpad or [0] * n_spatial
    x, w = x.astype(np.float64), w.astype(np.float64)
    if flip:
        w = w[(slice(None), slice(None)) + (slice(None, None, -1),) * n_spatial]
    batch, channels = x.shape[:2]
    per_group_in, per_group_out = channels // groups, w.shape[1]
    lengths = [(n - 1) * s + (k - 1) * d + 1 - b - e + p
               for n, s, k, d, b, e, p in zip(x.shape[2:], strides, w.shape[2:], dilations, start, end, outpad)]
    out = np.zeros((batch, per_group_out * groups) + tuple(lengths))
    for n, c in itertools.product(range(batch), range(channels)):
        group = c // per_group_in
        for i in itertools.product(*(range(size) for size in x.shape[2:])):
            for m in range(per_group_out):
                for k in itertools.product(*(range(t) for t in w.shape[2:])):
                    o = [ii * s + kk * d - b for ii, s, kk, d, b in zip(i, strides, k, dilations, start)]
                    if all(0 <= oo < length for oo, length in zip(o, lengths)):
                        out[(n, group * per_group_out + m) + tuple(o)] += x[(n, c) + i] * w[(c, m) + k]
    if bias is not None:
        out += np.asarray(bias, np.float64).reshape((1, -1) + (1,) * n_spatial)
    return out


def assert_close_to_float64(got, want, bound_terms, products):
    """Within (products + 2) float32 epsilons of sum |x||w| (+ one rounding of FLOAT16 outputs)."""
    eps = np.finfo(np.float32).eps
    limit = (products + 2) * eps * bound_terms + 1e-30
    if got.dtype == np.float16:
        limit = limit + np.abs(want) * 2.0 ** -11 + 2.0 ** -25
    diff = np.abs(got.astype(np.float64) - want)
    assert np.all(diff <= limit), (float(diff.max()), got, want)


@st.composite
def conv_call(draw, backward=False):
    n_spatial = draw(st.integers(1, 3))
    groups = draw(st.sampled_from([1, 2]))
    per_group_in = draw(st.integers(1, 2))
    per_group_out = draw(st.integers(1, 2))
    taps = [draw(st.integers(1, 3)) for _ in range(n_spatial)]
    dilations = [draw(st.integers(1, 2)) for _ in range(n_spatial)]
    strides = [draw(st.integers(1, 3)) for _ in range(n_spatial)]
    start = [draw(st.integers(0, 2)) for _ in range(n_spatial)]
    end = [draw(st.integers(0, 2)) for _ in range(n_spatial)]
    outpad = [draw(st.integers(0, 1)) for _ in range(n_spatial)]
    windows = [(k - 1) * d + 1 for k, d in zip(taps, dilations)]
    if backward:
        sizes = [draw(st.integers(1, 3)) for _ in range(n_spatial)]
        # the cropped output must keep at least one element
        start = [min(b, (n - 1) * s + w_ - 1) for b, n, s, w_ in zip(start, sizes, strides, windows)]
        end = [min(e, (n - 1) * s + w_ - b - 1) for e, n, s, w_, b in zip(end, sizes, strides, windows, start)]
        x_shape = (draw(st.integers(1, 2)), groups * per_group_in) + tuple(sizes)
        w_shape = (groups * per_group_in, per_group_out) + tuple(taps)
    else:
        sizes = [max(1, w_ - b - e) + draw(st.integers(0, 3)) for w_, b, e in zip(windows, start, end)]
        x_shape = (draw(st.integers(1, 2)), groups * per_group_in) + tuple(sizes)
        w_shape = (groups * per_group_out, per_group_in) + tuple(taps)
    seed = draw(st.integers(0, 2**31))
    return dict(x_shape=x_shape, w_shape=w_shape, groups=groups, strides=strides, dilations=dilations,
                start=start, end=end, outpad=outpad, seed=seed, flip=draw(st.booleans()),
                bias=draw(st.booleans()), dtype=draw(st.sampled_from(["float32", "float16"])))


def _run_call(call, backward):
    rng = np.random.default_rng(call["seed"])
    x = rng.standard_normal(call["x_shape"]).astype(call["dtype"])
    w = rng.standard_normal(call["w_shape"]).astype(call["dtype"])
    channels = call["w_shape"][0] if not backward else call["w_shape"][1] * call["groups"]
    bias = rng.standard_normal((1, channels) + (1,) * (x.ndim - 2)).astype(call["dtype"]) if call["bias"] else None
    keywords = dict(strides=call["strides"], dilations=call["dilations"], start_padding=call["start"],
                    end_padding=call["end"], output_padding=call["outpad"], group_count=call["groups"],
                    mode="convolution" if call["flip"] else "cross_correlation",
                    direction="backward" if backward else "forward")
    got = dmlcli.run("convolution", x, w, *([bias] if bias is not None else []), **keywords)
    reference = ref_backward if backward else ref_forward
    arguments = dict(strides=call["strides"], dilations=call["dilations"], start=call["start"], end=call["end"],
                     groups=call["groups"], outpad=call["outpad"], flip=call["flip"])
    want = reference(x, w, bias, **arguments)
    bound = reference(np.abs(x), np.abs(w), None if bias is None else np.abs(bias), **arguments)
    products = (x.shape[1] // call["groups"]) * math.prod(w.shape[2:])
    assert got.shape == want.shape and got.dtype == x.dtype
    assert_close_to_float64(got, want, bound, products)


@SETTINGS
@given(conv_call())
def test_forward_matches_the_reference(call):
    _run_call(call, backward=False)


@SETTINGS
@given(conv_call(backward=True))
def test_backward_matches_its_definition(call):
    _run_call(call, backward=True)


def test_backward_is_the_adjoint_of_forward():
    # <forward(x), y> = <x, backward(y)> with the same filter, strides, dilations, paddings and groups.
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, (2, 4, 7, 6)).astype(np.float32)
    w = rng.integers(-3, 4, (6, 2, 3, 2)).astype(np.float32)
    keywords = dict(strides=[2, 1], dilations=[1, 2], start_padding=[1, 0], end_padding=[2, 1], group_count=2)
    y = dmlcli.run("convolution", x, w, **keywords)
    g = rng.integers(-3, 4, y.shape).astype(np.float32)
    # BACKWARD's filter is {input channels of the transposed call (6), its outputs per group (2)}: the same w.
    # OutputPadding [1, 0] gives back the input element the forward windows of stride 2 never reached.
    back = dmlcli.run("convolution", g, w, direction="backward", output_padding=[1, 0], **keywords)
    assert back.shape == x.shape
    assert float(np.sum(y.astype(np.float64) * g)) == float(np.sum(x.astype(np.float64) * back))


def test_a_2d_example_by_hand_with_stride_padding_and_bias():
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.array([[1, 0], [0, -1]], np.float32).reshape(1, 1, 2, 2)
    got = dmlcli.run("convolution", x, w, np.array([10], np.float32).reshape(1, 1, 1, 1), strides=[2, 2],
                     start_padding=[1, 1])
    # padded: zeros row/column first; windows at (0,0),(0,2),(2,0),(2,2) of the padded 4x4 (end padding 0)
    # (0,0): 0*1 - 1*1 = -1; (0,2): 0 - 3 = -3; (2,0): 0 - 7 = -7; (2,2): 5 - 9 = -4
    assert got.tolist() == [[[[9.0, 7.0], [3.0, 6.0]]]]
    flipped = dmlcli.run("convolution", x, w, mode="convolution")  # the filter turned: [[-1, 0], [0, 1]]
    assert flipped.tolist() == [[[[4.0, 4.0], [4.0, 4.0]]]]


def test_depthwise_groups():
    x = np.arange(2 * 4 * 4, dtype=np.float32).reshape(1, 2, 4, 4)
    w = np.stack([np.ones((1, 2, 2)), -np.ones((1, 2, 2))]).astype(np.float32)  # (2, 1, 2, 2)
    got = dmlcli.run("convolution", x, w, group_count=2)
    want = ref_forward(x, w, groups=2)
    assert np.array_equal(got, want.astype(np.float32))
    assert got[0, 1, 0, 0] == -(16 + 17 + 20 + 21)


def test_float16_accumulates_in_float32_and_rounds_once():
    # 2048 + 1 + 1 + ... in FLOAT16 arithmetic would stay 2048 (1 is half an ULP there); FLOAT32 accumulation
    # gives 2048 + 8 = 2056, which FLOAT16 holds exactly.
    x = np.array([2048] + [1] * 8, np.float16).reshape(1, 1, 9)
    w = np.ones((1, 1, 9), np.float16)
    assert dmlcli.run("convolution", x, w).tolist() == [[[2056.0]]]


@pytest.mark.parametrize("activation, fields", [("relu", {}), ("elu", {"fused_alpha": 0.5}),
                                                ("leaky_relu", {"fused_alpha": 0.25}), ("sigmoid", {})])
def test_fused_activation_is_the_activation_of_the_result(activation, fields):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 3, 1, 1)).astype(np.float32)
    plain = dmlcli.run("convolution", x, w, b)
    fused = dmlcli.run("convolution", x, w, b, fused_activation=activation, **fields)
    alone = dmlcli.run(activation, plain, **{key.removeprefix("fused_"): value for key, value in fields.items()})
    assert np.array_equal(fused, alone)
    assert (fused < 0).any() == (activation in ("elu", "leaky_relu"))


def test_fused_activation_in_a_dxdispatch_model(tmp_path):
    model = json.loads((SHARED / "dxdispatch_models" / "dml_convolution_2d.json").read_text())
    model["resources"]["filter"]["initialValues"] = [0.5, -0.5, 0.5, -0.5]
    model["dispatchables"]["conv2d"]["desc"]["FusedActivation"] = {"Type": "ACTIVATION_LEAKY_RELU", "Alpha": 0.5}
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(model))
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 0, result.output
    # each window: 0.5 x (a - b + c - d) = -1 (b = a + 1, d = c + 1); leaky relu with Alpha 0.5: -0.5
    assert "Resource 'output': -0.5, -0.5, -0.5, -0.5" in result.output


def test_one_cli_run_per_operator():
    runs = [
        (["run", "convolution", "[[[[1,2,3],[4,5,6],[7,8,9]]]]", "[[[[0.5,0.5],[0.5,0.5]]]]", "--dtype", "float32",
          "--fused-activation", "relu", "--strides", "1,1", "-o", "-"], [[[[6.0, 8.0], [12.0, 14.0]]]]),
        (["run", "convolution_integer", "[[[[1,2,3],[4,5,6],[7,8,9]]]]", "[[[[1,1],[1,1]]]]", "--dtype", "uint8",
          "-o", "-"], [[[[12, 16], [24, 28]]]]),
    ]
    for args, want in runs:
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["data"] == want
    x = json_input(np.arange(1, 10, dtype=np.uint8).reshape(1, 1, 3, 3))
    w = json_input(np.ones((1, 1, 2, 2), np.uint8))
    one = json_input(np.ones((1, 1, 1, 1), np.float32))
    half = json_input(np.full((1, 1, 1, 1), 2, np.float32))
    result = CliRunner().invoke(cli, ["run", "quantized_linear_convolution", x, one, w, one, half, "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[[[6, 8], [12, 14]]]]  # 12/2, 16/2, 24/2, 28/2


# ---------------------------------------------------------------- the integer operators, exactly


def ref_integer(x, xzp, w, wzp, **geometry):
    """Python-integer loops: sum (x - xzp) (w - wzp), wrapped to INT32."""
    shifted_x = x.astype(np.int64) - (0 if xzp is None else int(xzp.reshape(-1)[0]))
    shifted_w = w.astype(np.int64)
    if wzp is not None:
        shifted_w = shifted_w - wzp.astype(np.int64).reshape((-1,) + (1,) * (w.ndim - 1)) if wzp.size > 1 \
            else shifted_w - int(wzp.reshape(-1)[0])
    exact = ref_forward(shifted_x, shifted_w, **geometry)  # float64 holds these small integer sums exactly
    return exact.astype(np.int64)


@SETTINGS
@given(st.data())
def test_convolution_integer_matches_the_reference(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    dtype = data.draw(st.sampled_from(["int8", "uint8"]))
    filter_dtype = data.draw(st.sampled_from(["int8", "uint8"]))
    rank = data.draw(st.sampled_from([3, 4]))
    groups = data.draw(st.sampled_from([1, 2]))
    n_spatial = rank - 2
    x = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, (1, 2 * groups) + (5,) * n_spatial).astype(dtype)
    w = rng.integers(np.iinfo(filter_dtype).min, np.iinfo(filter_dtype).max + 1,
                     (2 * groups, 2) + (2,) * n_spatial).astype(filter_dtype)
    xzp = rng.integers(0, 100, (1,) * rank).astype(dtype)
    per_channel = data.draw(st.booleans())
    wzp = rng.integers(0, 100, ((1, 2 * groups) + (1,) * n_spatial) if per_channel else (1,) * rank
                       ).astype(filter_dtype)
    geometry = dict(strides=[data.draw(st.integers(1, 2))] * n_spatial, dilations=[1] * n_spatial,
                    start=[1] * n_spatial, end=[0] * n_spatial)
    got = dmlcli.run("convolution_integer", x, xzp, w, wzp, strides=geometry["strides"],
                     start_padding=geometry["start"], end_padding=geometry["end"], group_count=groups)
    # Padded elements contribute 0 (they pad x - x_zero_point, as ONNX's ConvInteger does): so does the reference.
    want = ref_integer(x, xzp, w, wzp, groups=groups, **geometry)
    assert got.dtype == np.int32 and np.array_equal(got, want.astype(np.int32))


def test_convolution_integer_wraps_like_an_int32_accumulator():
    # A sum past 2^31 needs over 33000 products of 255 x 255; the largest product, and the wrap itself:
    x = np.full((1, 1, 1, 1), 255, np.uint8)
    w = np.full((1, 1, 1, 1), 255, np.uint8)
    assert dmlcli.run("convolution_integer", x, w).tolist() == [[[[65025]]]]
    from dmlcli.operators.convolution.entries import _wrap_int32

    assert _wrap_int32(np, np.array([2.0 ** 31, -(2.0 ** 31) - 1])).tolist() == [-(2 ** 31), 2 ** 31 - 1]


def test_quantized_linear_convolution_follows_its_float32_steps():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    xs, ys = np.float32(0.02), np.float32(0.1)
    ws = np.array([0.01, 0.03, 0.005], np.float32)
    xzp, wzp, yzp = np.uint8(120), np.array([1, -2, 3], np.int8), np.uint8(128)
    bias = np.array([100, -2000, 7], np.int32)
    got = dmlcli.run("quantized_linear_convolution", x, xs.reshape(1, 1, 1, 1), xzp.reshape(1, 1, 1, 1), w,
                     ws.reshape(1, 3, 1, 1), wzp.reshape(1, 3, 1, 1), bias.reshape(1, 3, 1, 1),
                     ys.reshape(1, 1, 1, 1), yzp.reshape(1, 1, 1, 1), start_padding=[1, 1], end_padding=[1, 1])
    acc = ref_integer(x, xzp.reshape(1, 1, 1, 1), w, wzp.reshape(1, 3, 1, 1), start=[1, 1], end=[1, 1])
    acc = acc + bias.reshape(1, 3, 1, 1)
    scale = (xs * ws).astype(np.float32).reshape(1, 3, 1, 1)
    value = (acc.astype(np.float32) * scale) / ys
    want = np.clip(np.rint(value) + np.float32(128), 0, 255).astype(np.uint8)
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    assert len(np.unique(want)) > 10  # the steps are exercised on many values, not a saturated block


# ---------------------------------------------------------------- ONNX's node tests as extra vectors


@pytest.mark.parametrize("name", ["conv_with_strides_and_asymmetric_padding", "convtranspose_group_2",
                                  "convtranspose_output_shape", "convtranspose_3d", "convinteger_with_padding",
                                  "qlinearconv", "conv_with_autopad_same", "convtranspose_dilations"])
def test_onnx_node_tests_pass(name):
    from dmlcli.suite import run_suite

    path = SHARED / "onnx_operators" / f"onnx__test_{name}.json"
    if not path.exists():
        pytest.skip("../shared/onnx_operators is not here")
    run = run_suite([path], backend="cpu", jobs=1)
    assert [r.verdict for r in run.results] == ["passed"], [r.message for r in run.results]


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_small_column_budgets_tile_rows_and_batches_with_the_same_result(monkeypatch, direction):
    # The column buffer is bounded by COLUMN_BUDGET_BYTES: with a tiny budget every tile is one row of one
    # batch item, and the result must not change.
    from dmlcli.operators.convolution import entries as convolution

    rng = np.random.default_rng(2)
    x = rng.integers(-4, 5, (3, 4, 7, 5)).astype(np.float32)
    w = rng.integers(-4, 5, (4, 2, 3, 2)).astype(np.float32)
    keywords = dict(strides=[2, 1], start_padding=[1, 0], end_padding=[0, 1], group_count=2, direction=direction)
    whole = dmlcli.run("convolution", x, w, **keywords)
    monkeypatch.setattr(convolution, "COLUMN_BUDGET_BYTES", 64)
    tiles = list(convolution._tiles(3, 7, 100))
    assert len(tiles) == 21 and all(rows == 1 for _, _, rows in tiles)
    assert np.array_equal(dmlcli.run("convolution", x, w, **keywords), whole)
    reference = ref_backward if direction == "backward" else ref_forward
    want = reference(x, w, strides=[2, 1], start=[1, 0], end=[0, 1], groups=2)
    assert np.array_equal(whole, want.astype(np.float32))


class _NumpyUnderAnotherName:
    """NumPy that is not `numpy` to the kernels: they take the branch they take on CuPy (one batched xp.matmul
    instead of the loop of 2-D products), so that branch is checked here too, on any machine."""

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.mark.parametrize("op, arrays, options", [
    ("convolution", [np.arange(2 * 4 * 6 * 5, dtype=np.float32).reshape(2, 4, 6, 5) % 5,
                     np.arange(4 * 2 * 3 * 2, dtype=np.float32).reshape(4, 2, 3, 2) % 3 - 1],
     {"group_count": 2, "strides": [2, 1], "start_padding": [1, 1]}),
    ("convolution", [np.arange(1 * 4 * 3, dtype=np.float32).reshape(1, 4, 3) % 4,
                     np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2) % 3 - 1],
     {"direction": "backward", "strides": [2], "output_padding": [1]}),
    ("convolution_integer", [np.arange(2 * 2 * 5 * 5).astype(np.uint8).reshape(2, 2, 5, 5),
                             np.arange(3 * 2 * 2 * 2).astype(np.int8).reshape(3, 2, 2, 2) - 12], {}),
])
def test_the_gpu_branch_gives_the_cpu_result(op, arrays, options):
    call = dmlcli.validate(op, *arrays, **options).call
    full = call.complete(arrays)
    (on_cpu,) = find_operator(op).array_kernel(np, full, call.outputs, call.parameters)
    (other,) = find_operator(op).array_kernel(_NumpyUnderAnotherName(), full, call.outputs, call.parameters)
    assert on_cpu.dtype == other.dtype and np.array_equal(on_cpu, other)


@pytest.mark.parametrize("groups, batch", [(1, 1), (2, 3)])
def test_a_pointwise_filter_reads_the_input_as_its_column_buffer(groups, batch):
    # A 1 x 1 filter with strides of 1 and no padding multiplies the input itself (no column buffer is copied):
    # the result is the reference's, as through the general path.
    rng = np.random.default_rng(32)
    x = rng.standard_normal((batch, 4, 5, 3)).astype(np.float32)
    w = rng.standard_normal((6, 4 // groups, 1, 1)).astype(np.float32)
    got = dmlcli.run("convolution", x, w, group_count=groups)
    want = ref_forward(x, w, groups=groups)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5)
    padded = dmlcli.run("convolution", x, w, group_count=groups, start_padding=[1, 0])  # the general path
    assert np.allclose(padded[:, :, 1:], got, rtol=1e-6, atol=1e-6) and not padded[:, :, 0].any()
