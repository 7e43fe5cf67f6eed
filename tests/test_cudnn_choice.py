"""The choice between cuDNN and dmlcli's own GPU kernels, and the cache of built graphs, without a GPU: a fake
frontend and a fake CuPy stand in (numerics/cudnn_graphs.py, convolution/cudnn.py, attention/cudnn.py)."""

from __future__ import annotations

import types

import numpy as np
import pytest

import dmlcli
from dmlcli.operators import find_operator
from dmlcli.operators.numerics import cudnn_graphs, products
from dmlcli.operators.numerics.cudnn_graphs import Unsupported


@pytest.fixture
def hidden_frontend(monkeypatch):
    """The frontend as if it were not installed."""
    monkeypatch.setattr(cudnn_graphs, "_LOADED", [cudnn_graphs._Loaded(None, "nvidia-cudnn-frontend is not installed")])


class FakeStream:
    def __init__(self, capturing=False):
        self.ptr = 0
        self._capturing = capturing

    def is_capturing(self):
        return self._capturing


def fake_cupy(capturing=False):
    stream = FakeStream(capturing)
    cuda = types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0), get_current_stream=lambda: stream)
    return types.SimpleNamespace(cuda=cuda, uint8=np.uint8, empty=np.empty)


class FakeGraph:
    def __init__(self, builds=("ok",)):
        self.plans = [types.SimpleNamespace(engine_id=index) for index in range(len(builds))]
        self.builds = builds
        self.executed = []

    def get_execution_plan_count(self):
        return len(self.plans)

    def build_plan_at_index(self, index):
        if self.builds[index] != "ok":
            raise RuntimeError(self.builds[index])

    def get_workspace_size_plan_at_index(self, index):
        return 0

    def execute_plan_at_index(self, pack, workspace, index, handle):
        self.executed.append((dict(pack), index))


@pytest.fixture
def fake_frontend(monkeypatch):
    module = types.SimpleNamespace(create_handle=lambda: "handle", set_stream=lambda handle, stream: None)
    monkeypatch.setattr(cudnn_graphs, "_LOADED", [cudnn_graphs._Loaded(module, "")])
    monkeypatch.setattr(cudnn_graphs, "_backend_plans", lambda graph: list(range(len(graph.plans))))
    monkeypatch.setattr(cudnn_graphs._HANDLES, "by_device", {}, raising=False)
    cudnn_graphs.forget()
    yield module
    cudnn_graphs.forget()


def test_a_signature_is_built_once(fake_frontend):
    cupy = fake_cupy()
    made = []

    def build(cudnn, handle):
        made.append(handle)
        return cudnn_graphs.Built(FakeGraph(), {"X": "x-tensor"})

    first = cudnn_graphs.cached(cupy, ("conv", (1, 2)), build, {"X": 16})
    second = cudnn_graphs.cached(cupy, ("conv", (1, 2)), build, {"X": 32})
    assert first is second and made == ["handle"]
    first.execute(fake_frontend, cupy, {"X": 48})
    assert first.graph.executed[-1] == ({"x-tensor": 48}, 0)
    cudnn_graphs.cached(cupy, ("conv", (1, 3)), build, {"X": 16})
    assert len(made) == 2


class WorkspaceGraph(FakeGraph):
    """A graph whose executes record the workspace each was given."""

    def execute_plan_at_index(self, pack, workspace, index, handle):
        self.executed.append(workspace)


@pytest.mark.parametrize("size, kept", [(272, True), (cudnn_graphs.WORKSPACE_KEPT, True),
                                        (cudnn_graphs.WORKSPACE_KEPT + 1, False)])
def test_a_small_workspace_is_kept_for_each_stream_but_never_for_a_capture(fake_frontend, size, kept):
    built = cudnn_graphs.Built(WorkspaceGraph(), {}, plan=0, workspace=size)
    cupy, other = fake_cupy(), fake_cupy()
    other.cuda.get_current_stream().ptr = 7
    for stream_cupy in (cupy, cupy, other, other):
        built.execute(fake_frontend, stream_cupy, {})
    first, again, elsewhere, elsewhere_again = built.graph.executed
    assert first.nbytes == size and (first is again) is kept and (elsewhere is elsewhere_again) is kept
    assert elsewhere is not first
    capture = fake_cupy(capturing=True)
    for _ in range(2):
        built.execute(fake_frontend, capture, {})
    assert built.graph.executed[-1] is not built.graph.executed[-2] and built.graph.executed[-1] is not first
    assert sorted(built.workspaces) == ([0, 7] if kept else [])


def test_a_plan_without_a_workspace_is_given_none(fake_frontend):
    built = cudnn_graphs.Built(WorkspaceGraph(), {}, plan=0, workspace=0)
    built.execute(fake_frontend, fake_cupy(), {})
    assert built.graph.executed == [None] and built.workspaces == {}


def test_the_first_plan_that_builds_is_kept(fake_frontend):
    built = cudnn_graphs.cached(fake_cupy(), "sig", lambda cudnn, handle: cudnn_graphs.Built(
        FakeGraph(("no engine", "ok")), {}), {})
    assert built.plan == 1 and built.plans_tried == ["1"]


def test_a_refused_signature_is_remembered(fake_frontend):
    calls = []

    def build(cudnn, handle):
        calls.append(1)
        raise ValueError("not supported here")

    for _ in range(2):
        with pytest.raises(Unsupported, match="cuDNN refused the graph .ValueError: not supported here"):
            cudnn_graphs.cached(fake_cupy(), "refused", build, {})
    assert calls == [1]
    with pytest.raises(Unsupported, match="no cuDNN plan builds"):
        cudnn_graphs.cached(fake_cupy(), "no plan", lambda cudnn, handle: cudnn_graphs.Built(
            FakeGraph(("declined",)), {}), {})


def test_no_graph_is_built_while_a_stream_captures(fake_frontend):
    build = lambda cudnn, handle: cudnn_graphs.Built(FakeGraph(), {})  # noqa: E731
    with pytest.raises(RuntimeError, match="captured"):
        cudnn_graphs.cached(fake_cupy(capturing=True), "late", build, {})
    built = cudnn_graphs.cached(fake_cupy(), "early", build, {})
    assert cudnn_graphs.cached(fake_cupy(capturing=True), "early", build, {}) is built


def test_the_frontend_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(cudnn_graphs.DISABLE_ENVIRONMENT, "1")
    loaded = cudnn_graphs._load()
    assert loaded.module is None and "DMLCLI_NO_CUDNN" in loaded.reason


def test_describe_says_why_not(hidden_frontend):
    assert cudnn_graphs.describe() == {"available": False, "reason": "nvidia-cudnn-frontend is not installed"}


def test_float32_leaves_tensor_cores_out_unless_tf32_is_allowed():
    from dmlcli.operators.convolution.cudnn import excluded_notes

    notes = types.SimpleNamespace(DOWN_CONVERT_INPUTS="down", REDUCED_PRECISION_REDUCTION="reduced",
                                  TENSOR_CORE="tensor")
    cudnn = types.SimpleNamespace(numerical_note=notes)
    assert excluded_notes(cudnn, "float32", False) == ["down", "reduced", "tensor"]
    assert excluded_notes(cudnn, "float32", True) == ["down", "reduced"]
    assert excluded_notes(cudnn, "float16", False) == ["down", "reduced"]


def test_tf32_permission_is_scoped():
    assert not products.tf32_allowed()
    with products.allowing_tf32():
        assert products.tf32_allowed()
    assert not products.tf32_allowed()


def test_without_the_frontend_the_gpu_kernels_run_dmlcli_s_own(hidden_frontend):
    # The GPU kernels of both families fall back to their xp kernels (run here on NumPy) and say why.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    call = dmlcli.validate("convolution", x, w, fused_activation="relu").call
    op = find_operator("convolution")
    (found,) = op.gpu_array_kernel(np, [x, w, None], call.outputs, call.parameters)
    (expected,) = op.array_kernel(np, [x, w, None], call.outputs, call.parameters)
    assert np.array_equal(found, expected)
    assert cudnn_graphs.LAST_CHOICE["convolution"] == "dmlcli: nvidia-cudnn-frontend is not installed"
    q = rng.standard_normal((1, 4, 8)).astype(np.float16)
    op = find_operator("multihead_attention")
    inputs = [q, q, q] + [None] * (len(op.inputs) - 3)
    call = dmlcli.validate("multihead_attention", *inputs, head_count=2).call
    found = op.gpu_array_kernel(np, inputs, call.outputs, call.parameters)
    expected = op.array_kernel(np, inputs, call.outputs, call.parameters)
    assert all(np.array_equal(a, b) for a, b in zip(found, expected))
    assert cudnn_graphs.LAST_CHOICE["attention"].startswith("dmlcli: ")


def test_the_cpu_backend_never_asks_for_cudnn(hidden_frontend, monkeypatch):
    monkeypatch.setattr(cudnn_graphs, "frontend", lambda: pytest.fail("the CPU backend asked for cuDNN"))
    x = np.ones((1, 1, 4, 4), np.float32)
    assert dmlcli.run("convolution", x, np.ones((1, 1, 3, 3), np.float32), backend="cpu").shape == (1, 1, 2, 2)


def test_a_handle_is_bound_to_a_stream_when_the_stream_changes(fake_frontend, monkeypatch):
    # cuDNN keeps the stream it was given: binding it again on every call cost host time; a call on another stream
    # (and back) must bind again.
    bound = []
    monkeypatch.setattr(fake_frontend, "set_stream", lambda handle, stream: bound.append(stream))
    cupy = fake_cupy()
    stream = cupy.cuda.get_current_stream()
    for pointer in (16, 16, 16, 32, 16, 16):
        stream.ptr = pointer
        assert cudnn_graphs._handle(fake_frontend, cupy) == "handle"
    assert bound == [16, 32, 16]


@pytest.mark.parametrize("change, taken", [
    ({}, True),
    ({"Direction": "BACKWARD"}, False),  # the transposed convolution: cuDNN's dgrad
    ({"GroupCount": 4}, False),  # grouped, several channels a group
    ({"dtype": np.float64}, False),
    ({"filter": (16, 2, 3, 3)}, False),
    ({"filter": (24, 1, 3, 3)}, True),  # a channel multiplier of 3
    ({"OutputPadding": (1, 0)}, False),
    ({"x": (2, 8, 10)}, True),  # 1-D
    ({"x": (2, 8, 4, 4, 4, 4)}, False),  # four spatial dimensions
    ({"out": (2, 2**28, 3, 3)}, False),  # an output past 32-bit indices (a channel multiplier of 2^25)
])
def test_which_calls_the_depthwise_gpu_kernel_takes(change, taken):
    from dmlcli.operators.convolution import depthwise_gpu

    dtype = change.get("dtype", np.float16)
    x = np.zeros(change.get("x", (2, 8, 10, 10)), dtype)
    w_shape = change.get("filter", (8, 1, 3, 3))
    w = np.zeros(w_shape[:2] + w_shape[2:][:x.ndim - 2], dtype)
    params = {"Direction": change.get("Direction", "FORWARD"), "GroupCount": change.get("GroupCount", 8)}
    geo = {"OutputPadding": change.get("OutputPadding", (0,) * (x.ndim - 2))}
    out_shape = change.get("out", (x.shape[0], w.shape[0]) + x.shape[2:])
    assert depthwise_gpu.applies(x, w, None, params, geo, out_shape) is taken


def test_products_widen_float16_operands_where_cublas_is_not_called():
    # NumPy (and a namespace without cuBLAS) gives the FLOAT32 sums by widening the operands, exactly.
    a = np.array([[2049.0, 1.0]], np.float16)
    b = np.array([[1.0], [1.0]], np.float16)
    found = products.matmul(np, a, b, out_dtype=np.float32)
    assert found.dtype == np.float32 and found[0, 0] == 2049.0
    with pytest.raises(ValueError):
        products.matmul(np, a.astype(np.float32), b.astype(np.float32), out_dtype=np.float16)



ROUTE_KINDS = ("fused", "alone", "channels-last")


def _kind(route_or_signature) -> str:
    """A route's (or a graph signature's) kind: the fused graph, the convolution alone (then the pass), or the fused
    graph written channels-last (then the transpose)."""
    if route_or_signature.channels_last:
        return "channels-last"
    return "fused" if route_or_signature.fused else "alone"


@pytest.fixture
def convolution_routes(fake_frontend, monkeypatch):
    """convolution/cudnn.py's route of a signature on fakes: each graph a FakeGraph that builds, or that builds no
    plan where its kind is in `refused`; the timing's verdict the route of kind `fastest` (the first timed where
    none is of that kind)."""
    from dmlcli.operators.convolution import cudnn as convolution_cudnn

    state = types.SimpleNamespace(refused=set(), fastest="fused", timed=[], built=[])

    def builder(signature):
        def build(cudnn, handle):
            state.built.append(_kind(signature))
            return cudnn_graphs.Built(FakeGraph(("declined",) if _kind(signature) in state.refused else ("ok",)), {})
        return build

    def fastest(cudnn, cupy, routes, buffers):
        kinds = [_kind(route) for route in routes]
        state.timed.append(kinds)
        return routes[kinds.index(state.fastest)] if state.fastest in kinds else routes[0]

    monkeypatch.setattr(convolution_cudnn, "_builder", builder)
    monkeypatch.setattr(convolution_cudnn, "_fastest", fastest)
    state.module = convolution_cudnn
    state.signature = convolution_cudnn.Signature(
        input_sizes=(1, 4, 8, 8), filter_sizes=(2, 4, 1, 1), output_sizes=(1, 2, 8, 8), dtype="float16",
        backward=False, pre=(0, 0), post=(0, 0), strides=(1, 1), dilations=(1, 1), bias=True, relu=True, fused=True,
        tf32=False)
    return state


def _route(state, tuned_plans, monkeypatch, signature=None):
    monkeypatch.setattr(cudnn_graphs, "TUNED_PLANS", tuned_plans)
    cupy = fake_cupy()
    # The channels-last graph is built on a scratch buffer of its own: an address is all a fake graph needs.
    cupy.empty = lambda shape, dtype=None: types.SimpleNamespace(shape=shape, dtype=dtype,
                                                                 data=types.SimpleNamespace(ptr=4096))
    buffers = state.module.Buffers({}, {}, np.empty((1, 2, 8, 8), np.float16), None, True)
    return state.module._route(None, cupy, signature or state.signature, buffers)


@pytest.mark.parametrize("fastest", ROUTE_KINDS)
def test_a_convolution_s_route_is_timed_once_where_plans_are_tuned(convolution_routes, monkeypatch, fastest):
    convolution_routes.fastest = fastest
    first = _route(convolution_routes, 6, monkeypatch)
    assert _kind(first) == fastest
    assert convolution_routes.timed == [list(ROUTE_KINDS)] and convolution_routes.built == list(ROUTE_KINDS)
    assert _route(convolution_routes, 6, monkeypatch) is first  # kept: no timing, no build
    assert len(convolution_routes.timed) == 1 and len(convolution_routes.built) == 3
    cudnn_graphs.forget()  # the routes go with the graphs
    _route(convolution_routes, 6, monkeypatch)
    assert len(convolution_routes.timed) == 2


def test_without_tuning_the_fused_graph_runs_and_nothing_is_timed(convolution_routes, monkeypatch):
    assert _kind(_route(convolution_routes, 1, monkeypatch)) == "fused"
    assert convolution_routes.timed == [] and convolution_routes.built == ["fused"]


@pytest.mark.parametrize("fastest", ["fused", "channels-last"])
def test_a_convolution_without_bias_or_relu_times_its_graph_in_either_layout(convolution_routes, monkeypatch,
                                                                             fastest):
    convolution_routes.fastest = fastest
    plain = convolution_routes.signature._replace(bias=False, relu=False)
    assert _kind(_route(convolution_routes, 6, monkeypatch, plain)) == fastest
    assert convolution_routes.timed == [["fused", "channels-last"]]
    assert convolution_routes.built == ["fused", "channels-last"]


def test_a_fused_graph_cudnn_cannot_plan_takes_the_convolution_alone(convolution_routes, monkeypatch):
    convolution_routes.refused = {"fused"}
    assert _kind(_route(convolution_routes, 6, monkeypatch)) == "alone"
    assert convolution_routes.timed == []


@pytest.mark.parametrize("refused, timed", [("alone", ["fused", "channels-last"]),
                                            ("channels-last", ["fused", "alone"])])
def test_a_route_cudnn_cannot_plan_is_left_out_of_the_timing(convolution_routes, monkeypatch, refused, timed):
    convolution_routes.refused = {refused}
    assert _kind(_route(convolution_routes, 6, monkeypatch)) == "fused"
    assert convolution_routes.timed == [timed]


def test_where_only_the_fused_graph_plans_it_runs_untimed(convolution_routes, monkeypatch):
    convolution_routes.refused = {"alone", "channels-last"}
    convolution_routes.fastest = "alone"
    assert _kind(_route(convolution_routes, 6, monkeypatch)) == "fused"
    assert convolution_routes.timed == [["fused"]]  # one route: _fastest returns it untimed (below)


@pytest.mark.parametrize("signature_change", [{}, {"bias": False, "relu": False}])
def test_where_cudnn_plans_neither_graph_the_refusal_is_kept(convolution_routes, monkeypatch, signature_change):
    convolution_routes.refused = set(ROUTE_KINDS)
    signature = convolution_routes.signature._replace(**signature_change)
    for _ in range(2):
        with pytest.raises(Unsupported, match="no cuDNN plan builds"):
            _route(convolution_routes, 6, monkeypatch, signature)
    assert convolution_routes.built == (["fused", "alone"] if not signature_change else ["fused"])


def test_a_route_runs_the_fused_graph_alone_or_the_convolution_then_the_pass_or_the_transpose(monkeypatch):
    from dmlcli.operators.convolution import channel_finish, channels_last
    from dmlcli.operators.convolution import cudnn as convolution_cudnn

    ran = []
    built = types.SimpleNamespace(execute=lambda cudnn, cupy, pointers: ran.append(("execute", pointers)))
    monkeypatch.setattr(channel_finish, "finish", lambda cupy, out, bias, relu: ran.append(("pass", out, bias, relu)))
    monkeypatch.setattr(channels_last, "to_channels_first",
                        lambda cupy, written, out: ran.append(("transpose", written.shape, out.shape)))
    out = np.empty((2, 3, 4, 5), np.float16)
    buffers = convolution_cudnn.Buffers({"X": 1, "W": 2, "Y": 3, "B": 4}, {"X": 1, "W": 2, "Y": 3}, out, "bias", True)
    convolution_cudnn.Route(built, True).run(None, None, buffers)
    assert ran == [("execute", buffers.with_bias)]
    ran.clear()
    convolution_cudnn.Route(built, False).run(None, None, buffers)
    assert ran == [("execute", buffers.pointers), ("pass", out, "bias", True)]
    ran.clear()
    scratch = types.SimpleNamespace(shape=(2, 4, 5, 3), data=types.SimpleNamespace(ptr=4096))
    cupy = types.SimpleNamespace(empty=lambda shape, dtype: scratch if shape == (2, 4, 5, 3) else None)
    convolution_cudnn.Route(built, True, channels_last=True).run(None, cupy, buffers)
    assert ran == [("execute", {"X": 1, "W": 2, "Y": 4096, "B": 4}), ("transpose", (2, 4, 5, 3), (2, 3, 4, 5))]


@pytest.mark.parametrize("seconds, chosen", [((2.0, 1.0, 3.0), "alone"), ((1.0, 2.0, 3.0), "fused"),
                                             ((3.0, 2.0, 1.0), "channels-last"), ((1.0, 1.0, 1.0), "fused"),
                                             ((2.0, 1.0, 1.0), "alone")])
def test_the_fastest_route_is_the_one_that_took_least_time(monkeypatch, seconds, chosen):
    from dmlcli.operators.convolution import cudnn as convolution_cudnn

    routes = [types.SimpleNamespace(name=name, run=lambda cudnn, cupy, buffers, name=name: name) for name in ROUTE_KINDS]
    times = dict(zip(ROUTE_KINDS, seconds))
    monkeypatch.setattr(cudnn_graphs, "capturing", lambda cupy: False)
    monkeypatch.setattr(cudnn_graphs, "back_to_back_seconds", lambda cupy, run: times[run()])
    assert convolution_cudnn._fastest(None, None, routes, None).name == chosen


def test_routes_are_never_timed_during_a_capture_and_one_route_is_not_timed(monkeypatch):
    from dmlcli.operators.convolution import cudnn as convolution_cudnn

    monkeypatch.setattr(cudnn_graphs, "capturing", lambda cupy: True)
    with pytest.raises(RuntimeError, match="captured"):
        convolution_cudnn._fastest(None, None, [None, None], None)
    monkeypatch.setattr(cudnn_graphs, "back_to_back_seconds", lambda cupy, run: pytest.fail("timed"))
    assert convolution_cudnn._fastest(None, None, ["only"], None) == "only"


def test_no_channels_last_route_past_the_transpose_s_grid_or_without_room(convolution_routes, monkeypatch):
    """An output of more batches, or more positions, than channels_last.py's grid covers is not offered the route;
    nor is one whose buffer the device has no room for (CuPy's OutOfMemoryError is a MemoryError)."""
    from dmlcli.operators.convolution import channels_last

    assert channels_last.fits((65535, 2, 64 * 65535)) and not channels_last.fits((65536, 2, 8))
    assert not channels_last.fits((1, 2, 64 * 65535 + 1)) and not channels_last.fits((1, 2, 2100, 2100))
    big = convolution_routes.signature._replace(output_sizes=(1, 2, 2100, 2100))
    _route(convolution_routes, 6, monkeypatch, big)
    assert convolution_routes.timed == [["fused", "alone"]]
    cudnn_graphs.forget()

    def no_room(shape, dtype=None):
        raise MemoryError("out of memory allocating the channels-last buffer (the test)")

    monkeypatch.setattr(cudnn_graphs, "TUNED_PLANS", 6)
    buffers = convolution_routes.module.Buffers({}, {}, np.empty((1, 2, 8, 8), np.float16), None, True)
    cupy = fake_cupy()
    cupy.empty = no_room
    convolution_routes.module._route(None, cupy, convolution_routes.signature, buffers)
    assert convolution_routes.timed[-1] == ["fused", "alone"]


def test_channels_last_strides_and_sizes():
    """The strides cuDNN is given for a channels-last output, in {N, C, spatial...} order, are those of a C-ordered
    {N, spatial..., C} buffer, for 1 to 3 spatial dimensions."""
    from dmlcli.operators.convolution import channels_last

    for sizes in [(2, 3, 5), (2, 3, 4, 5), (2, 3, 4, 5, 6), (1, 1, 1, 1)]:
        written = channels_last.channels_last_sizes(sizes)
        buffer = np.empty(written, np.int8)
        as_nchw = np.moveaxis(buffer, -1, 1)
        assert as_nchw.shape == sizes
        assert channels_last.channels_last_strides(sizes) == list(as_nchw.strides)


def test_back_to_back_seconds_times_rows_of_calls_and_takes_the_median(monkeypatch):
    # Three rows of five calls after one untimed call; each row's events span 10, 40 and 20 ms: 4 ms a call.
    spans = iter([10.0, 40.0, 20.0])
    event = types.SimpleNamespace(record=lambda stream: None, synchronize=lambda: None)
    cuda = types.SimpleNamespace(get_current_stream=lambda: "stream", Event=lambda: event,
                                 get_elapsed_time=lambda start, end: next(spans))
    calls = []
    seconds = cudnn_graphs.back_to_back_seconds(types.SimpleNamespace(cuda=cuda), lambda: calls.append(1), 5)
    assert seconds == pytest.approx(0.004) and len(calls) == 1 + 3 * 5


@pytest.mark.parametrize("shape, dtype, aligned, lanes, grid", [
    ((32, 64, 56, 56), np.float16, True, 8, (2, 2048)),  # 3136 values a plane: 392 words, two blocks of 256
    ((32, 64, 56, 56), np.float32, True, 4, (4, 2048)),
    ((2, 3, 5, 7), np.float16, True, 1, (1, 6)),  # 70 bytes a plane: one value at a time, a block of 64 threads
    ((2, 3, 8, 8), np.float16, False, 1, (1, 6)),  # an output that does not start on 16 bytes
    ((66000, 1, 4), np.float32, True, 4, (1, 65535)),  # more planes than a grid's rows: the kernel loops over them
    ((1, 4), np.float16, True, 1, (1, 4)),  # a plane of one value
])
def test_channel_finish_launches_a_row_of_blocks_per_plane(shape, dtype, aligned, lanes, grid):
    from dmlcli.operators.convolution import channel_finish

    source, found_grid, block, sizes = channel_finish._launch(shape, np.dtype(dtype), aligned, True, True)
    units = int(np.prod(shape[2:])) // lanes
    assert found_grid == grid and [int(size) for size in sizes] == [shape[0] * shape[1], shape[1], units]
    assert block[0] <= 256 and block[0] >= min(32, units) and found_grid[0] * block[0] >= min(units, 65535 * 256)
    assert ("uint4 word" in source) is (lanes > 1) and f"values[{lanes}]" in source


def test_a_device_arrays_contiguity_is_read_from_cupys_own_flag_or_its_flags():
    """execute_shaped_device's check of each tensor (backends/gpu.py): CuPy's `_c_contiguous`, and `flags` where an
    array type has no such attribute; an array that is C-contiguous is handed on as it is."""
    from dmlcli.backends import gpu

    class Flagged:
        def __init__(self, ordered):
            self._c_contiguous = ordered

    class FlagsOnly:
        def __init__(self, ordered):
            self.flags = types.SimpleNamespace(c_contiguous=ordered)

    assert gpu._c_ordered(Flagged(True)) and not gpu._c_ordered(Flagged(False))
    assert gpu._c_ordered(FlagsOnly(True)) and not gpu._c_ordered(FlagsOnly(False))
    fake = types.SimpleNamespace(ndarray=Flagged, asarray=lambda x: x, ascontiguousarray=lambda x: ("copied", x))
    ordered, strided = Flagged(True), Flagged(False)
    assert gpu._contiguous_on_device(fake, ordered) is ordered
    assert gpu._contiguous_on_device(fake, strided) == ("copied", strided)


def _attention_layout(batch=1, sequence=16, kv_sequence=16, past=0, heads=2, size=32):
    from dmlcli.operators.attention.layout import Layout

    return Layout(batch, sequence, kv_sequence, past, heads, heads, size, size, "QueryTensor", "KeyTensor",
                  "ValueTensor")


@pytest.mark.parametrize("mask, change, may", [
    (np.ones((1, 1, 16, 16), np.int32), {}, True),
    (np.ones((16, 16), np.int32), {}, True),  # lead-padded to {1, 1, S, T}
    (np.ones((2, 2, 16, 16), np.int32), {}, True),
    (np.ones((1, 1, 1, 16), np.int32), {}, False),  # broadcast along the rows: no causal pattern
    (np.ones((1, 1, 1, 16, 16), np.int32), {}, False),  # rank 5
    (np.ones((1, 1, 16, 16), np.int64), {}, False),  # the check reads INT32
    (np.ones((1, 1, 16, 16), np.int32), {"MaskFilterValue": -100.0}, False),  # a masked key would keep a weight
    (np.ones((1, 1, 16, 16), np.int32), {"MaskFilterValue": float("-inf")}, True),
    (np.ones((1, 1, 16, 16), np.int32), {"size": 512}, False),  # past the remaking's 8 elements a lane
    (np.ones((1, 1, 16, 20), np.int32), {"past": 4}, False),  # a past: cuDNN's causal mode is not DirectML's then
])
def test_which_boolean_masks_may_stand_for_cudnn_s_causal_mode(mask, change, may):
    """attention/cudnn.py's _may_be_causal: the Sizes, type and fields under which a BOOLEAN mask is learnt
    (attention/causal_masks.py) and, where it holds the causal pattern, runs cuDNN's causal mode."""
    from dmlcli.operators.attention import cudnn as attention_cudnn

    params = {"MaskFilterValue": change.get("MaskFilterValue", -10000.0)}
    found = _attention_layout(size=change.get("size", 32), past=change.get("past", 0))
    assert attention_cudnn._may_be_causal(mask, params, found) is may


def test_a_driver_launch_keeps_its_arguments_and_says_when_the_driver_refuses(monkeypatch):
    """numerics/driver_launch.py without a GPU: a fake cuLaunchKernel sees the function, the grid, the stream and a
    pointer to each argument's storage, which holds the call's values in their C types; a CUresult other than 0 is an
    error; a kernel with no handle to its function gives no launch."""
    import ctypes

    from dmlcli.operators.numerics import driver_launch

    seen = []

    def fake(function, gx, gy, gz, bx, by, bz, shared, stream, pointers, extra):
        values = [ctypes.cast(pointers[0], ctypes.POINTER(ctypes.c_uint64))[0],
                  ctypes.cast(pointers[1], ctypes.POINTER(ctypes.c_int32))[0],
                  ctypes.cast(pointers[2], ctypes.POINTER(ctypes.c_float))[0]]
        seen.append((function, gx, bx, stream, values))
        return 0 if values[1] >= 0 else 700

    monkeypatch.setattr(driver_launch, "_LAUNCH", [fake])
    kernel = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=1234))
    launch = driver_launch.DriverLaunch.of(kernel, ("u64", "i32", "f32"))
    launch(8, 256, 77, (2**63 + 5, -0, 0.25))
    launch(9, 128, 0, (1, 3, -1.5))
    assert seen == [(1234, 8, 256, 77, [2**63 + 5, 0, 0.25]), (1234, 9, 128, 0, [1, 3, -1.5])]
    with pytest.raises(RuntimeError, match="CUresult 700"):
        launch(1, 32, 0, (0, -1, 0.0))
    assert driver_launch.DriverLaunch.of(object(), ("u64",)) is None


def test_an_early_launch_goes_through_cuLaunchKernelEx_with_programmatic_serialization(monkeypatch):
    """numerics/driver_launch.py without a GPU: an early launch hands a fake cuLaunchKernelEx a CUlaunchConfig with
    the grid, the block, the stream and one attribute, PROGRAMMATIC_STREAM_SERIALIZATION (6) set to 1, and the
    kernel's arguments; a plain launch still takes cuLaunchKernel; without cuLaunchKernelEx an early launch is a plain
    one; the kernel's first statement, the wait, is compiled for compute capability 9.0 and up alone."""
    import ctypes

    from dmlcli.operators.numerics import driver_launch

    plain, early = [], []

    def fake(function, gx, gy, gz, bx, by, bz, shared, stream, pointers, extra):
        plain.append((function, gx, bx, stream))
        return 0

    def fake_ex(config, function, pointers, extra):
        config = ctypes.cast(config, ctypes.POINTER(driver_launch._LaunchConfig)).contents
        attribute = config.attributes[0]
        early.append((function, (config.grid_x, config.grid_y, config.grid_z),
                      (config.block_x, config.block_y, config.block_z), config.shared_bytes, config.stream,
                      config.attribute_count, attribute.id, attribute.value,
                      ctypes.cast(pointers[0], ctypes.POINTER(ctypes.c_uint64))[0]))
        return 0 if config.grid_x < 100 else 1

    monkeypatch.setattr(driver_launch, "_LAUNCH", [fake])
    monkeypatch.setattr(driver_launch, "_LAUNCH_EX", [fake_ex])
    kernel = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=99))
    launch = driver_launch.DriverLaunch.of(kernel, ("u64",))
    assert launch.can_launch_early
    launch(8, 256, 77, (5,), early=True)
    launch(3, 128, 78, (6,), early=True)
    launch(4, 64, 79, (7,))
    assert early == [(99, (8, 1, 1), (256, 1, 1), 0, 77, 1, 6, 1, 5), (99, (3, 1, 1), (128, 1, 1), 0, 78, 1, 6, 1, 6)]
    assert plain == [(99, 4, 64, 79)]
    with pytest.raises(RuntimeError, match="cuLaunchKernelEx gave CUresult 1"):
        launch(100, 32, 0, (0,), early=True)
    monkeypatch.setattr(driver_launch, "_LAUNCH_EX", [None])
    older = driver_launch.DriverLaunch.of(kernel, ("u64",))
    assert not older.can_launch_early
    older(2, 32, 80, (8,), early=True)
    assert plain[-1] == (99, 2, 32, 80) and len(early) == 3  # the refused launch and no other
    assert "__CUDA_ARCH__ >= 900" in driver_launch.DEPENDENT_LAUNCH_WAIT
    assert "griddepcontrol.wait" in driver_launch.DEPENDENT_LAUNCH_WAIT
