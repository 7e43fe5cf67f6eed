"""CONVOLUTION and MULTIHEAD_ATTENTION through cuDNN (operators/convolution/cudnn.py, operators/attention/cudnn.py):
each result against the CPU backend's within the operator's rule, the path taken checked (cudnn_graphs.LAST_CHOICE),
a configuration cuDNN does not take running dmlcli's kernel, and every call running with the frontend hidden.
Needs CuPy and a device; the cuDNN-specific tests also need nvidia-cudnn-frontend (skipped, saying why, without)."""

from __future__ import annotations

import numpy as np
import pytest

import dmlcli
from dmlcli.checking.comparison import compare_arrays, rule_for

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.usefixtures("gpu_usable")  # conftest: skips where no device can run

from dmlcli.operators.numerics import cudnn_graphs  # noqa: E402
from dmlcli.operators.convolution.entries import DEPTHWISE_CHOICE  # noqa: E402
from dmlcli.operators.attention import causal_masks  # noqa: E402


@pytest.fixture
def frontend():
    try:
        return cudnn_graphs.frontend()
    except cudnn_graphs.Unsupported as why:
        pytest.skip(f"cuDNN path not available: {why}")


@pytest.fixture
def hidden_frontend(monkeypatch):
    monkeypatch.setattr(cudnn_graphs, "_LOADED", [cudnn_graphs._Loaded(None, "hidden by the test")])


def convolution_within(x_shape, w_shape, parameters, dtype, with_bias, allow_tf32=False):
    """Runs the call on both backends, compares within the rule; the GPU's path taken."""
    rng = np.random.default_rng(sum(x_shape) + len(parameters))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal(w_shape) * 0.2).astype(dtype)
    backward = parameters.get("direction") == "backward"
    channels = w_shape[1] * parameters.get("group_count", 1) if backward else w_shape[0]
    extra = [rng.standard_normal((1, channels) + (1,) * (len(x_shape) - 2)).astype(dtype)] if with_bias else []
    on_cpu = dmlcli.run("convolution", x, w, *extra, backend="cpu", **parameters)
    on_gpu = dmlcli.run("convolution", x, w, *extra, backend="gpu", allow_tf32=allow_tf32, **parameters)
    taken = cudnn_graphs.LAST_CHOICE.get("convolution")
    assert on_cpu.dtype == on_gpu.dtype == np.dtype(dtype) and on_cpu.shape == on_gpu.shape
    call = dmlcli.validate("convolution", x, w, *extra, allow_tf32=allow_tf32, **parameters).call
    comparison = compare_arrays(on_gpu, on_cpu, rule_for(call.operator, on_cpu.dtype, call=call,
                                                         inputs=[x, w, *extra]))
    assert comparison.passed, f"{taken}: {comparison.text()}"
    return taken


CUDNN_CALLS = {
    "3x3 pad 1": ((4, 32, 28, 28), (32, 32, 3, 3), {"start_padding": [1, 1], "end_padding": [1, 1]}),
    "1x1": ((2, 64, 14, 14), (32, 64, 1, 1), {}),
    "strides 2, asymmetric padding": ((2, 16, 15, 17), (24, 16, 3, 3),
                                      {"strides": [2, 2], "start_padding": [1, 0], "end_padding": [0, 1]}),
    "dilation 2": ((2, 16, 20, 20), (16, 16, 3, 3), {"dilations": [2, 2], "start_padding": [2, 2],
                                                      "end_padding": [2, 2]}),
    "groups 4": ((2, 32, 12, 12), (32, 8, 3, 3), {"group_count": 4, "start_padding": [1, 1], "end_padding": [1, 1]}),
    "depthwise": ((2, 32, 16, 16), (32, 1, 3, 3), {"group_count": 32, "start_padding": [1, 1], "end_padding": [1, 1]}),
    "1-D": ((2, 16, 50), (24, 16, 5), {"start_padding": [2], "end_padding": [2], "strides": [2]}),
    "3-D": ((1, 8, 6, 10, 10), (16, 8, 3, 3, 3), {"start_padding": [1, 1, 1], "end_padding": [1, 1, 1]}),
    "convolution mode": ((2, 8, 9, 9), (8, 8, 3, 3), {"mode": "convolution"}),
    "backward stride 2": ((2, 16, 8, 8), (16, 8, 3, 3), {"direction": "backward", "strides": [2, 2],
                                                          "start_padding": [1, 1], "end_padding": [1, 1],
                                                          "output_padding": [1, 1]}),
    "backward grouped 3-D": ((1, 8, 4, 5, 5), (8, 2, 2, 2, 2), {"direction": "backward", "group_count": 2,
                                                                 "strides": [2, 2, 2]}),
}

# The calls that run dmlcli's own GPU path, faster than cuDNN's plans for them (convolution/depthwise_gpu.py), with or
# without cuDNN.
OWN_PATHS = {"depthwise": DEPTHWISE_CHOICE}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("name", list(CUDNN_CALLS))
def test_convolution_through_cudnn(frontend, name, dtype, with_bias):
    x_shape, w_shape, parameters = CUDNN_CALLS[name]
    taken = convolution_within(x_shape, w_shape, parameters, dtype, with_bias)
    assert taken == OWN_PATHS.get(name, "cudnn"), taken


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("name", ["3x3 pad 1", "1-D", "3-D", "depthwise", "backward stride 2"])
def test_fused_relu_through_cudnn(frontend, name, dtype):
    x_shape, w_shape, parameters = CUDNN_CALLS[name]
    taken = convolution_within(x_shape, w_shape, dict(parameters, fused_activation="relu"), dtype, True)
    assert taken == OWN_PATHS.get(name, "cudnn"), taken


def test_other_activations_follow_cudnn_s_convolution(frontend):
    taken = convolution_within((2, 8, 10, 10), (8, 8, 3, 3), {"fused_activation": "elu", "fused_alpha": 0.5},
                               "float16", True)
    assert taken == "cudnn", taken


def test_float32_with_tf32_allowed(frontend):
    assert convolution_within((4, 32, 28, 28), (32, 32, 3, 3), {"start_padding": [1, 1], "end_padding": [1, 1]},
                              "float32", False, allow_tf32=True) == "cudnn"


def test_a_configuration_cudnn_does_not_take_runs_dmlcli_s_kernel(frontend):
    taken = convolution_within((2, 4, 9, 9), (6, 4, 3, 3), {"output_padding": [1, 1]}, "float32", True)
    assert taken.startswith("dmlcli: FORWARD with OutputPadding"), taken


def test_without_the_frontend_every_convolution_runs(hidden_frontend):
    for name, (x_shape, w_shape, parameters) in CUDNN_CALLS.items():
        taken = convolution_within(x_shape, w_shape, parameters, "float16", True)
        assert taken == OWN_PATHS.get(name, "dmlcli: hidden by the test"), name


@pytest.fixture
def fresh_routes():
    """No graph or route kept from another test, and none left to the next (convolution/cudnn.py's routes)."""
    cudnn_graphs.forget()
    yield
    cudnn_graphs.forget()


# The convolution alone and then channel_finish's pass, where timing on a signature's first call finds the pair faster
# than the fused graph (convolution/cudnn.py's route): forced here, each call within the rule of the CPU's result.
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("name", ["3x3 pad 1", "1x1", "strides 2, asymmetric padding", "1-D", "3-D",
                                  "convolution mode", "groups 4"])
def test_the_convolution_alone_then_the_bias_and_relu_pass(frontend, fresh_routes, monkeypatch, name, dtype):
    from dmlcli.operators.convolution import cudnn as convolution_cudnn

    monkeypatch.setattr(cudnn_graphs, "TUNED_PLANS", 2)
    monkeypatch.setattr(convolution_cudnn, "_fastest",
                        lambda cudnn, cupy, routes, buffers: next(route for route in routes if not route.fused))
    x_shape, w_shape, parameters = CUDNN_CALLS[name]
    for activation in ({"fused_activation": "relu"}, {}):
        taken = convolution_within(x_shape, w_shape, dict(parameters, **activation), dtype, True)
        assert taken == "cudnn", taken
    assert [route.fused for route in convolution_cudnn._ROUTES.values()] == [False, False]


# The fused graph written channels-last and then channels_last.py's transpose (convolution/cudnn.py's route where timing
# finds it faster): forced here for every call cuDNN takes, with and without bias and RELU, each within the rule of the
# CPU's result (the transpose itself is checked bit for bit by the test after this one).
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("name", [name for name in CUDNN_CALLS if name != "depthwise"])
def test_the_graph_written_channels_last_then_transposed(frontend, fresh_routes, monkeypatch, name, dtype):
    from dmlcli.operators.convolution import cudnn as convolution_cudnn

    monkeypatch.setattr(cudnn_graphs, "TUNED_PLANS", 2)
    monkeypatch.setattr(convolution_cudnn, "_fastest",
                        lambda cudnn, cupy, routes, buffers: next(route for route in routes if route.channels_last))
    x_shape, w_shape, parameters = CUDNN_CALLS[name]
    for bias, activation in ((True, {"fused_activation": "relu"}), (False, {})):
        taken = convolution_within(x_shape, w_shape, dict(parameters, **activation), dtype, bias)
        assert taken == "cudnn", taken
    routes = list(convolution_cudnn._ROUTES.values())
    assert len(routes) == 2
    # A BACKWARD call whose fused graph cuDNN does not plan (bias and RELU after its dgrad) runs the convolution alone
    # and the pass, untimed: there is no channels-last form of that pair.
    assert all(route.channels_last or not route.fused for route in routes), routes
    if "direction" not in parameters:
        assert all(route.channels_last for route in routes), routes


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("sizes", [(2, 256, 56, 56), (3, 64, 7, 9), (1, 5, 13), (2, 3, 65, 2), (1, 130, 3, 3, 3),
                                   (2, 1, 1, 1), (1, 66, 1, 130)])
def test_the_channels_last_transpose_moves_every_value(dtype, sizes):
    """channels_last.to_channels_first against CuPy's own transpose, bit for bit: sizes on and off the 64-wide tiles,
    odd and even channels and positions (FLOAT16's pairs and single values), random bit patterns (NaNs kept)."""
    from dmlcli.operators.convolution import channels_last

    rng = np.random.default_rng(len(sizes) + sum(sizes))
    width = np.uint16 if dtype == "float16" else np.uint32
    written = rng.integers(0, np.iinfo(width).max, channels_last.channels_last_sizes(sizes), dtype=width, endpoint=True)
    source = cupy.asarray(written).view(dtype)
    out = cupy.empty(sizes, dtype)
    channels_last.to_channels_first(cupy, source, out)
    expected = np.ascontiguousarray(np.moveaxis(written, -1, 1))
    assert np.array_equal(cupy.asnumpy(out).view(width), expected)


def test_a_convolution_s_two_routes_are_timed_on_the_gpu(frontend, fresh_routes, monkeypatch):
    from dmlcli.operators.convolution import cudnn as convolution_cudnn

    monkeypatch.setattr(cudnn_graphs, "TUNED_PLANS", 2)
    x_shape, w_shape, parameters = (4, 64, 28, 28), (32, 64, 1, 1), {"fused_activation": "relu"}
    assert convolution_within(x_shape, w_shape, parameters, "float16", True) == "cudnn"
    assert len(convolution_cudnn._ROUTES) == 1  # either route, as the GPU timed them
    assert convolution_within(x_shape, w_shape, parameters, "float16", True) == "cudnn"


def _channel_finish_reference(y, bias, relu):
    """The bias added in FLOAT32 and rounded once, RELU by the CPU backend's kernel (NaN kept, -0 to +0)."""
    from dmlcli.operators.elementwise.activation import relu as relu_kernel

    r = y.astype(np.float32)
    if bias is not None:
        r = r + bias.astype(np.float32).reshape((1, -1) + (1,) * (y.ndim - 2))
    if relu:
        r = relu_kernel([r], np.float32, {})
    return r.astype(y.dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("shape, offset", [((2, 3, 8, 8), 0), ((2, 3, 5, 7), 0), ((3, 2, 1), 0), ((2, 3, 8, 8), 1),
                                           ((66000, 1, 4), 0), ((1, 2, 4, 4, 4), 0)])
@pytest.mark.parametrize("with_bias, relu", [(True, True), (True, False), (False, True)])
def test_channel_finish_adds_the_bias_and_applies_relu_in_place(dtype, shape, offset, with_bias, relu):
    # 16-byte words where a plane's bytes allow (8x8), one value at a time where they do not (5x7, a plane of one
    # value, an output not 16-byte aligned), more planes than a grid's 65535 rows; NaN, both zeros and infinities.
    from dmlcli.operators.convolution import channel_finish

    rng = np.random.default_rng(sum(shape) + offset)
    size = int(np.prod(shape))
    y = (rng.standard_normal(size) * 3).astype(dtype)
    y[:8] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan, 1e-30, -1e-30][:min(8, size)]
    y = y.reshape(shape)
    bias = (rng.standard_normal(shape[1]) * 2).astype(dtype) if with_bias else None
    expected = _channel_finish_reference(y, bias, relu)
    memory = cupy.empty(size + offset, dtype)
    out = memory[offset:].reshape(shape)
    out[...] = cupy.asarray(y)
    channel_finish.finish(cupy, out, None if bias is None else cupy.asarray(bias), relu)
    found = cupy.asnumpy(out)
    bits = np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")
    same = (found.view(bits) == expected.view(bits)) | (np.isnan(found) & np.isnan(expected))
    assert same.all(), (found[~same][:5], expected[~same][:5])


# Depthwise calls run dmlcli's own kernel (convolution/depthwise_gpu.py), cuDNN installed or not: every geometry it
# takes (1 to 3 spatial dimensions, strides, dilations, asymmetric and wide paddings, a channel multiplier, the
# CONVOLUTION mode's flip, odd sizes), within the sum bound of the CPU's result.
DEPTHWISE_CALLS = {
    "3x3 pad 1": ((2, 8, 13, 11), (8, 1, 3, 3), {"start_padding": [1, 1], "end_padding": [1, 1]}),
    "1-D k5 stride 2": ((3, 6, 37), (6, 1, 5), {"strides": [2], "start_padding": [2], "end_padding": [1]}),
    "3-D": ((1, 4, 5, 7, 6), (4, 1, 3, 2, 3), {"start_padding": [1, 0, 1], "end_padding": [1, 1, 0]}),
    "dilated, strided, asymmetric": ((2, 5, 17, 19), (5, 1, 3, 3),
                                     {"dilations": [2, 3], "strides": [2, 1], "start_padding": [2, 0],
                                      "end_padding": [1, 3]}),
    "multiplier 3": ((2, 4, 9, 9), (12, 1, 3, 3), {"start_padding": [1, 1], "end_padding": [1, 1]}),
    "convolution mode": ((1, 6, 8, 10), (6, 1, 2, 3), {"mode": "convolution", "start_padding": [0, 1],
                                                        "end_padding": [1, 1]}),
    "padding past the window": ((1, 3, 4, 4), (3, 1, 3, 3), {"start_padding": [3, 2], "end_padding": [2, 3]}),
    "7x7 no padding": ((2, 16, 20, 21), (16, 1, 7, 7), {}),
}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("activation", [None, "relu", "elu"])
@pytest.mark.parametrize("name", list(DEPTHWISE_CALLS))
def test_depthwise_kernel(name, dtype, activation):
    x_shape, w_shape, parameters = DEPTHWISE_CALLS[name]
    parameters = dict(parameters, group_count=x_shape[1])
    if activation is not None:
        parameters["fused_activation"] = activation
    taken = convolution_within(x_shape, w_shape, parameters, dtype, with_bias=activation != "elu")
    assert taken == DEPTHWISE_CHOICE, taken


def test_depthwise_relu_keeps_nan_and_zeroes_negative_zero():
    # RELU inside the kernel, before the rounding, is the activation's rule after it: NaN stays NaN, -0 becomes +0,
    # negatives 0, and a positive sum too small for FLOAT16 rounds to +0 either way.
    x = np.array([[[1.0, np.nan, -2.0, 0.0, 1e-8]]], np.float16).reshape(1, 1, 5)
    x = np.concatenate([x, -x], axis=1)
    w = np.ones((2, 1, 1), np.float16)
    on_gpu = dmlcli.run("convolution", x, w, backend="gpu", group_count=2, fused_activation="relu")
    on_cpu = dmlcli.run("convolution", x, w, backend="cpu", group_count=2, fused_activation="relu")
    assert cudnn_graphs.LAST_CHOICE.get("convolution") == DEPTHWISE_CHOICE
    assert np.array_equal(np.isnan(on_gpu), np.isnan(on_cpu))
    assert np.array_equal(np.nan_to_num(on_gpu).view(np.uint16), np.nan_to_num(on_cpu).view(np.uint16))


MHA_INPUTS = 11


def attention_within(arrays, options, operator="multihead_attention"):
    on_cpu = dmlcli.run(operator, *arrays, backend="cpu", **options)
    on_gpu = dmlcli.run(operator, *arrays, backend="gpu", **options)
    taken = cudnn_graphs.LAST_CHOICE.get("attention")
    verdict = dmlcli.validate(operator, *arrays, **options)
    for index, (cpu_result, gpu_result) in enumerate(zip(on_cpu, on_gpu)):
        assert cpu_result.dtype == gpu_result.dtype and cpu_result.shape == gpu_result.shape
        if index > 0:  # the present keys and values: copies
            assert np.array_equal(cpu_result, gpu_result), taken
            continue
        rule = rule_for(verdict.call.operator, cpu_result.dtype, call=verdict.call, inputs=arrays)
        comparison = compare_arrays(gpu_result, cpu_result, rule)
        assert comparison.passed, f"{taken}: {comparison.text()}"
    return taken


def qkv(batch, sequence, heads, size, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, sequence, heads * size)).astype(np.float16) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_through_cudnn(frontend, causal):
    batch, sequence, heads, size = 2, 128, 4, 64
    arrays = qkv(batch, sequence, heads, size) + [None] * (MHA_INPUTS - 3)
    options = {"head_count": heads, "scale": 1 / np.sqrt(size)}
    if causal:
        arrays[7] = np.tril(np.ones((sequence, sequence), np.int32)).reshape(1, 1, sequence, sequence)
        options["mask_type"] = "boolean"
    assert attention_within(arrays, options) == "cudnn"


def test_grouped_query_causal_attention_through_cudnn(frontend):
    # MULTIHEAD_ATTENTION1's past lengths without a past: causal whatever the lengths hold.
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 96, 8 * 64)).astype(np.float16)
    k, v = (rng.standard_normal((1, 96, 2 * 64)).astype(np.float16) for _ in range(2))
    arrays = [q, k, v] + [None] * 8 + [np.zeros(1, np.int32)]
    options = {"query_head_count": 8, "key_value_head_count": 2, "scale": 0.125}
    assert attention_within(arrays, options, "multihead_attention1") == "cudnn"


def test_stacked_attention_through_cudnn(frontend):
    stacked = np.random.default_rng(5).standard_normal((2, 64, 4, 3, 64)).astype(np.float16)
    arrays = [None] * 5 + [stacked] + [None] * (MHA_INPUTS - 6)
    assert attention_within(arrays, {"head_count": 4, "scale": 0.125}) == "cudnn"


def test_the_same_tensors_split_into_other_heads_make_their_own_plan(frontend):
    """A call's plan is kept per signature of its tensors; HeadCount is a field, so the same tensors split into 4
    heads of 64 and then into 8 heads of 32 lie differently: each call its own plan, each within the rule."""
    arrays = qkv(1, 64, 4, 64) + [None] * (MHA_INPUTS - 3)
    assert attention_within(arrays, {"head_count": 4, "scale": 0.125}) == "cudnn"
    assert attention_within(arrays, {"head_count": 8, "scale": 0.125}) == "cudnn"


def test_a_call_made_again_reuses_its_plan(frontend, monkeypatch):
    """The plan (views, graph signature) is worked out on a signature's first call alone: the later calls with the
    same Sizes, strides, types and fields find it (9c0e6c5 keyed it by a fresh layout object, so none ever did)."""
    from dmlcli.operators.attention import cudnn as attention_cudnn

    made = []
    plan = attention_cudnn._plan
    monkeypatch.setattr(attention_cudnn, "_plan", lambda *args: made.append(args) or plan(*args))
    arrays = qkv(1, 48, 2, 32, seed=9) + [None] * (MHA_INPUTS - 3)
    for _ in range(3):
        assert attention_within(arrays, {"head_count": 2, "scale": 0.25}) == "cudnn"
    assert len(made) == 1
    assert attention_within(arrays, {"head_count": 2, "scale": 0.5}) == "cudnn"  # another Scale: another graph
    assert len(made) == 2


def causal_mask(rows, cols, leading=(1, 1)):
    return np.broadcast_to(np.tril(np.ones((rows, cols), np.int32)), leading + (rows, cols)).copy()


@pytest.mark.parametrize("change", ["none", "a masked key in the last row", "a kept future key in a later head",
                                    "a random mask", "a row with every key masked"])
def test_any_boolean_mask_runs_through_cudnn_as_a_bias(frontend, change):
    """A BOOLEAN mask is cuDNN's additive bias (MaskFilterValue where the mask holds 0): the causal pattern, the same
    with one value changed anywhere, a random mask, a row whose every key is masked (DirectML then adds the filter to
    every score of the row, which leaves its softmax as it was): cuDNN each time, within the rule of the CPU's."""
    arrays = qkv(1, 40, 2, 32, seed=3) + [None] * (MHA_INPUTS - 3)
    options = {"head_count": 2, "scale": 0.2, "mask_type": "boolean"}
    arrays[7] = causal_mask(40, 40, (1, 2))
    if change == "a masked key in the last row":
        arrays[7][0, 1, 39, 17] = 0
    elif change == "a kept future key in a later head":
        arrays[7][0, 1, 5, 30] = 7
    elif change == "a random mask":
        arrays[7] = (np.random.default_rng(8).random((1, 2, 40, 40)) > 0.4).astype(np.int32)
    elif change == "a row with every key masked":
        arrays[7][0, 0, 12] = 0
    assert attention_within(arrays, options) == "cudnn"


def test_a_boolean_mask_with_an_infinite_filter(frontend):
    # ONNX's Attention maps its masks with MaskFilterValue -inf: FLOAT16 holds it, so the bias does too (no row of
    # this causal mask is wholly masked: such a row's softmax is NaN in DirectML's arithmetic).
    arrays = qkv(1, 24, 2, 32, seed=12) + [None] * (MHA_INPUTS - 3)
    arrays[7] = causal_mask(24, 24)
    options = {"head_count": 2, "mask_type": "boolean", "mask_filter_value": float("-inf")}
    assert attention_within(arrays, options) == "cudnn"


def test_a_mask_broadcast_along_the_rows_is_written_out_for_cudnn(frontend):
    # A key-padding mask {B, 1, 1, T}: cuDNN's bias takes {1|B, 1|H, S, T}, so the bias spreads it along the rows.
    arrays = qkv(2, 24, 2, 32, seed=10) + [None] * (MHA_INPUTS - 3)
    arrays[7] = np.ones((2, 1, 1, 24), np.int32)
    arrays[7][0, 0, 0, 18:] = 0
    arrays[7][1, 0, 0, :3] = 0
    assert attention_within(arrays, {"head_count": 2, "mask_type": "boolean"}) == "cudnn"


def test_a_boolean_mask_call_is_captured_into_a_cuda_graph(frontend):
    """No value is read on the host: a BOOLEAN mask's call is captured and replayed with the eager call's bits (a mask
    that is not causal: it keeps cuDNN's bias on every call, where a causal one would change route once learnt)."""
    arrays = qkv(1, 32, 2, 32, seed=11) + [None] * (MHA_INPUTS - 3)
    arrays[7] = (np.random.default_rng(11).random((1, 1, 32, 32)) > 0.3).astype(np.int32)
    from dmlcli.backends import get_backend

    backend = get_backend("gpu")
    call = dmlcli.validate("multihead_attention", *arrays, head_count=2, mask_type="boolean").call
    device = [None if a is None else cupy.asarray(a) for a in arrays]
    eager = backend.execute_shaped_device(call.operator, device, call.outputs, call.parameters)[0]
    pool, stream = cupy.cuda.MemoryPool(), cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.using_allocator(pool.malloc), stream:  # as onnx_model/graphs.py captures a model's run
        backend.execute_shaped_device(call.operator, device, call.outputs, call.parameters)  # warm, on this stream
        stream.begin_capture()
        captured = backend.execute_shaped_device(call.operator, device, call.outputs, call.parameters)[0]
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        assert cupy.asnumpy(captured).tobytes() == cupy.asnumpy(eager).tobytes()


class DeviceCall:
    """A call on device-resident arrays (the mask stays where it lies between calls, as a model's or a loop's does),
    each result compared with the CPU backend's for the mask the device then holds; which route each call took is
    read from causal_masks.check's pointers (given: cuDNN's causal mode, None: the bias)."""

    def __init__(self, arrays, options, monkeypatch, operator="multihead_attention"):
        from dmlcli.backends import get_backend

        self.arrays, self.options, self.operator = arrays, options, operator
        self.backend = get_backend("gpu")
        self.call = dmlcli.validate(operator, *arrays, **options).call
        self.device = [None if a is None else cupy.asarray(a) for a in arrays]
        self.routes = []
        causal_masks._STATES.clear()  # a mask an earlier test left at the same address is not this one
        check = causal_masks.check

        def spy(cupy, found, mask, signature, pointers, params):
            self.routes.append("bias" if pointers is None else "causal")
            check(cupy, found, mask, signature, pointers, params)

        monkeypatch.setattr(causal_masks, "check", spy)

    def __call__(self):
        result = self.backend.execute_shaped_device(self.call.operator, self.device, self.call.outputs,
                                                    self.call.parameters)[0]
        cupy.cuda.get_current_stream().synchronize()  # the flag's copy has arrived for the next call
        return self.within(cupy.asnumpy(result))

    def within(self, result):
        arrays = [None if a is None else cupy.asnumpy(a) for a in self.device]
        on_cpu = dmlcli.run(self.operator, *arrays, backend="cpu", **self.options)[0]
        call = dmlcli.validate(self.operator, *arrays, **self.options).call
        comparison = compare_arrays(result, on_cpu, rule_for(call.operator, on_cpu.dtype, call=call, inputs=arrays))
        assert comparison.passed, f"{self.routes}: {comparison.text()}"
        return result


def _learnt_layouts():
    """name -> (arrays, options, operator, where a change goes: (batch, head, row) of the mask)."""
    separate = qkv(2, 48, 4, 32, seed=21) + [None] * (MHA_INPUTS - 3)
    separate[7] = causal_mask(48, 48, (2, 1))
    stacked = [None] * 5 + [np.random.default_rng(22).standard_normal((1, 40, 2, 3, 64)).astype(np.float16)]
    stacked += [None, causal_mask(40, 40, (1, 2)), None, None, None]
    rng = np.random.default_rng(23)
    grouped = [rng.standard_normal((1, 36, 4 * 32)).astype(np.float16)]
    grouped += [rng.standard_normal((1, 36, 2 * 32)).astype(np.float16) for _ in range(2)]
    grouped += [None] * 4 + [causal_mask(36, 36)] + [None] * 4
    boolean = {"mask_type": "boolean"}
    return {
        "separate, a mask per batch": (separate, dict(boolean, head_count=4, scale=0.2), "multihead_attention",
                                       (1, 0, 30)),
        "stacked, a mask per head": (stacked, dict(boolean, head_count=2, scale=0.125), "multihead_attention",
                                     (0, 1, 7)),
        "grouped-query heads, one mask": (grouped, dict(boolean, query_head_count=4, key_value_head_count=2),
                                          "multihead_attention1", (0, 0, 20)),
    }


LEARNT_LAYOUTS = _learnt_layouts()
MASK_CHANGES = ["a masked key on the diagonal", "a kept future key", "the row's first keys masked", "every key masked",
                "a random mask"]


@pytest.mark.parametrize("change", MASK_CHANGES)
@pytest.mark.parametrize("name", list(LEARNT_LAYOUTS))
def test_a_mask_learnt_causal_runs_cudnn_s_causal_mode_and_a_changed_mask_is_recomputed(frontend, monkeypatch, name,
                                                                                        change):
    """A causal mask seen for the first time is checked at once and runs cuDNN's causal mode. The mask then written
    over in place: that call still gives DirectML's result (its rows that are no longer causal recomputed on the
    device), and the next goes back to the bias once the check has come back."""
    arrays, options, operator, (b, h, i) = LEARNT_LAYOUTS[name]
    call = DeviceCall(arrays, options, monkeypatch, operator)
    call(), call()
    assert call.routes == ["causal", "causal"]
    mask = call.device[7]
    if change == "a masked key on the diagonal":
        mask[b, h, i, i] = 0
    elif change == "a kept future key":
        mask[b, h, i, i + 3] = 5
    elif change == "the row's first keys masked":
        mask[b, h, i, :6] = 0
    elif change == "every key masked":
        mask[b, h, i] = 0
    else:
        mask[...] = cupy.asarray(np.random.default_rng(9).random(mask.shape) > 0.4, dtype=np.int32)
    call()
    assert call.routes == ["causal", "causal", "causal"]
    for _ in range(causal_masks.COPY_EVERY + 1):  # each right; the flag comes back within COPY_EVERY calls
        call()
        if call.routes[-1] == "bias":
            break
    assert call.routes[-1] == "bias"


def test_a_learnt_mask_with_an_infinite_filter_and_leading_keys_masked(frontend, monkeypatch):
    # With MaskFilterValue -inf, a masked key's score is -inf: the recomputation skips it (its weight is 0) where an
    # online softmax started at -inf would make 0 * inf = NaN of the keys after it.
    arrays = qkv(1, 24, 2, 32, seed=12) + [None] * (MHA_INPUTS - 3)
    arrays[7] = causal_mask(24, 24)
    options = {"head_count": 2, "mask_type": "boolean", "mask_filter_value": float("-inf")}
    call = DeviceCall(arrays, options, monkeypatch)
    call()
    call.device[7][0, 0, 15, :9] = 0
    result = call()
    assert call.routes == ["causal", "causal"] and not np.isnan(result).any()


def test_a_mask_not_causal_stays_on_the_bias(frontend, monkeypatch):
    arrays = qkv(1, 24, 2, 32, seed=13) + [None] * (MHA_INPUTS - 3)
    arrays[7] = causal_mask(24, 24)
    arrays[7][0, 0, 3, 10] = 1
    call = DeviceCall(arrays, {"head_count": 2, "mask_type": "boolean"}, monkeypatch)
    for _ in range(3):
        call()
    assert call.routes == ["bias"] * 3


def test_a_call_captured_on_a_learnt_causal_mask_is_right_for_the_mask_it_replays_with(frontend, monkeypatch):
    """A capture keeps the causal route its host chose; the check it replays recomputes any row the mask no longer
    holds causal, so the replay is DirectML's result for the mask as it then is."""
    arrays = qkv(1, 32, 2, 32, seed=14) + [None] * (MHA_INPUTS - 3)
    arrays[7] = causal_mask(32, 32)
    call = DeviceCall(arrays, {"head_count": 2, "mask_type": "boolean"}, monkeypatch)
    pool, stream = cupy.cuda.MemoryPool(), cupy.cuda.Stream(non_blocking=True)
    with cupy.cuda.using_allocator(pool.malloc), stream:
        call()
        stream.begin_capture()
        captured = call.backend.execute_shaped_device(call.call.operator, call.device, call.call.outputs,
                                                      call.call.parameters)[0]
        graph = stream.end_capture()
        assert call.routes == ["causal", "causal"]
        for row in (None, 9, 30):
            if row is not None:
                call.device[7][0, 0, row, row + 1:] = 1
            graph.launch(stream)
            stream.synchronize()
            call.within(cupy.asnumpy(captured))


def test_a_learnt_causal_mask_whose_causal_mode_cudnn_refuses_runs_the_bias(frontend, monkeypatch):
    # cuDNN may plan the biased attention of a call and not its causal mode: the call then runs the bias, as any
    # mask does, rather than leaving cuDNN for dmlcli's kernel.
    from dmlcli.operators.attention import cudnn as attention_cudnn

    build = attention_cudnn.build_graph

    def refusing(module, handle, signature):
        if signature.causal:
            raise cudnn_graphs.Unsupported("no causal plan (the test)")
        return build(module, handle, signature)

    cudnn_graphs.forget()  # no causal graph of these Sizes kept from an earlier test
    monkeypatch.setattr(attention_cudnn, "build_graph", refusing)
    try:
        arrays = qkv(1, 24, 2, 32, seed=15) + [None] * (MHA_INPUTS - 3)
        arrays[7] = causal_mask(24, 24)
        call = DeviceCall(arrays, {"head_count": 2, "mask_type": "boolean"}, monkeypatch)
        call(), call()
        assert call.routes == ["bias", "bias"] and cudnn_graphs.LAST_CHOICE.get("attention") == "cudnn"
    finally:
        cudnn_graphs.forget()  # the refusal is remembered: later tests of these Sizes must build their own


@pytest.mark.parametrize("driver", [True, False])
def test_the_check_runs_through_the_driver_or_cupy_s_own_launch(frontend, monkeypatch, driver):
    # The check's kernel is launched through the driver with kept arguments (numerics/driver_launch.py), or by
    # CuPy's RawKernel call where no handle to its function is found: either way each result is right.
    from dmlcli.operators.numerics import driver_launch

    if not driver:
        monkeypatch.setattr(driver_launch.DriverLaunch, "of", classmethod(lambda cls, kernel, kinds: None))
    arrays = qkv(1, 32, 2, 32, seed=16) + [None] * (MHA_INPUTS - 3)
    arrays[7] = causal_mask(32, 32)
    call = DeviceCall(arrays, {"head_count": 2, "mask_type": "boolean"}, monkeypatch)
    call()
    call.device[7][0, 0, 9, 20] = 1
    call()
    assert call.routes == ["causal", "causal"]
    (state,) = causal_masks._STATES.values()
    assert (state.launch is not None) is driver
    # Through the driver on a device of compute capability 9.0 and up, the check is launched early (its threads
    # waiting for the attention first): the second call's remade rows above are right either way.
    assert state.early is (driver and int(cupy.cuda.Device().compute_capability) >= 90)


def test_boolean_masks_of_ones_broadcast_and_with_past_lengths(frontend):
    # A {1, 1, 1, T} mask of ones keeps every key (no causal pattern in its Sizes); with MULTIHEAD_ATTENTION1's past
    # lengths and no past, the same mask is causal, as is a causal {S, T} mask.
    arrays = qkv(2, 24, 2, 32, seed=6) + [None] * (MHA_INPUTS - 3)
    ones = np.ones((1, 1, 1, 24), np.int32)
    assert attention_within(arrays[:7] + [ones] + arrays[8:], {"head_count": 2, "mask_type": "boolean"}) == "cudnn"
    with_lengths = arrays + [np.zeros(2, np.int32)]
    options1 = {"query_head_count": 2, "key_value_head_count": 2, "mask_type": "boolean"}
    for mask in (ones, causal_mask(24, 24)):
        given = with_lengths[:7] + [mask] + with_lengths[8:]
        assert attention_within(given, options1, "multihead_attention1") == "cudnn"


def test_attention_cudnn_does_not_take_runs_dmlcli_s_kernel(frontend):
    arrays = qkv(1, 16, 2, 32) + [None] * (MHA_INPUTS - 3)
    arrays[7] = (np.random.default_rng(2).random((1, 2, 16, 16)) > 0.3).astype(np.int32)
    taken = attention_within(arrays, {"head_count": 2, "mask_type": "boolean", "mask_filter_value": -1e6})
    assert taken.startswith("dmlcli: MaskFilterValue -1e+06 is not a FLOAT16"), taken
    float32 = [a.astype(np.float32) for a in qkv(1, 16, 2, 32)] + [None] * (MHA_INPUTS - 3)
    assert attention_within(float32, {"head_count": 2}).startswith("dmlcli: cuDNN's attention takes FLOAT16")


def test_without_the_frontend_attention_runs(hidden_frontend):
    arrays = qkv(1, 64, 4, 32) + [None] * (MHA_INPUTS - 3)
    assert attention_within(arrays, {"head_count": 4, "scale": 0.2}) == "dmlcli: hidden by the test"


def test_a_built_plan_runs_through_the_direct_execute_with_the_public_executes_bits(frontend):
    # The first call of a signature runs the frontend's public execute; the later ones its backend call directly
    # (cudnn_graphs._DirectExecute): the same plan, the same bits.
    cudnn_graphs.forget()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 12, 12)).astype(np.float16)
    w = (rng.standard_normal((8, 16, 3, 3)) * 0.2).astype(np.float16)
    first = dmlcli.run("convolution", x, w, backend="gpu", start_padding=[1, 1], end_padding=[1, 1])
    built = [b for b in cudnn_graphs._GRAPHS.values() if isinstance(b, cudnn_graphs.Built)]
    assert built and any(direct is not None for b in built for direct in b.direct.values()), \
        "frontend 1.32's backend path was not found: every call takes the public execute"
    for _ in range(3):
        again = dmlcli.run("convolution", x, w, backend="gpu", start_padding=[1, 1], end_padding=[1, 1])
        assert again.tobytes() == first.tobytes()


def test_float16_products_give_their_float32_sums_unrounded():
    # Integer-valued FLOAT16 operands whose sums (exact in FLOAT32) lie past FLOAT16's integers: the FLOAT32 output
    # holds them exactly, which a FLOAT16 result widened afterwards would not.
    from dmlcli.operators.numerics import products

    rng = np.random.default_rng(3)
    a = rng.integers(-30, 31, (3, 17, 40)).astype(np.float16)
    b = rng.integers(-30, 31, (40, 23)).astype(np.float16)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(exact).max() > 2048
    found = products.matmul(cupy, cupy.asarray(a), cupy.asarray(b), out_dtype=np.float32)
    assert found.dtype == np.float32 and np.array_equal(cupy.asnumpy(found), exact)
