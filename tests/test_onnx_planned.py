"""A model's plan reuses each node's DirectML call (dmlcli/onnx_model/planning/planned.py) where its table entry says
which inputs' values it reads and those are constants: the planned calls give the bits the node's own mapping gives on
the same values, and a node whose call depends on a runtime value, a copy, or another input's memory is mapped
again on every call.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from dmlcli.errors import InputError  # noqa: E402
from dmlcli.onnx_model import OnnxSession  # noqa: E402
from dmlcli.onnx_model.planning.planned import Derived, Signature, planned_arrays  # noqa: E402
from dmlcli.onnx_model.steps import DirectMLStep, ViewStep  # noqa: E402
from dmlcli.suite.onnx.table import ENTRIES  # noqa: E402

from test_onnx_models import F32, model_of, tensor, value  # noqa: E402


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _plumbing_model():
    """Transposes (permuted Strides), a broadcast MatMul of a 3-D activation by a 2-D weight, an Add with a bias, a
    Reshape view, a Gather of runtime indices, a Softmax and a bool output: the encoder's kinds of node."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
        helper.make_node("MatMul", ["t", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Reshape", ["a", "shape"], ["r"]),
        helper.make_node("Gather", ["r", "i"], ["g"], axis=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
        helper.make_node("Greater", ["y", "half"], ["big"]),
        helper.make_node("Not", ["big"], ["small"]),  # a bool input: DirectML's UINT8
    ]
    initializers = [tensor("w", rng.standard_normal((8, 6)).astype(np.float32)),
                    tensor("b", rng.standard_normal(6).astype(np.float32)),
                    tensor("shape", np.array([4, 3, 6], np.int64)),
                    tensor("half", np.array(0.5, np.float32))]
    return model_of(nodes, [value("x", F32, [3, 4, 8]), value("i", TensorProto.INT64, [2])],
                    [value("y"), value("big", TensorProto.BOOL), value("small", TensorProto.BOOL)], initializers)


def _vision_model():
    """SqueezeNet's kinds of node: a strided 3 x 3 Conv with a bias, Relu, a ceil-mode MaxPool (end padding), a 1 x 1
    Conv, a Concat of two branches, a GlobalAveragePool and a Flatten view."""
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node("Conv", ["p", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
        helper.make_node("Conv", ["p", "w3", "b3"], ["c3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["c2", "c3"], ["j"], axis=1),
        helper.make_node("GlobalAveragePool", ["j"], ["g"]),
        helper.make_node("Flatten", ["g"], ["y"]),
    ]
    initializers = [tensor("w1", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
                    tensor("b1", rng.standard_normal(8).astype(np.float32)),
                    tensor("w2", rng.standard_normal((4, 8, 1, 1)).astype(np.float32)),
                    tensor("b2", rng.standard_normal(4).astype(np.float32)),
                    tensor("w3", rng.standard_normal((4, 8, 3, 3)).astype(np.float32)),
                    tensor("b3", rng.standard_normal(4).astype(np.float32))]
    return model_of(nodes, [value("x", F32, [2, 3, 20, 21])], [value("y")], initializers)


def _feeds(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((3, 4, 8)).astype(np.float32), "i": rng.integers(-3, 3, 2).astype(np.int64)}


def test_planned_calls_give_the_bits_of_the_nodes_own_mapping():
    session = OnnxSession(_plumbing_model(), fusions=False)
    session.run(_feeds(0))  # the plan
    steps = session.plan_for(_feeds(0)).steps
    planned = {step.node.op for step in steps if isinstance(step, (DirectMLStep, ViewStep)) and step.planned}
    assert planned == {"Transpose", "MatMul", "Add", "Reshape", "Gather", "Softmax", "Greater", "Not"}
    for seed in (1, 2, 3):
        got = session.run(_feeds(seed))
        fresh = OnnxSession(_plumbing_model(), fusions=False).run(_feeds(seed))  # planned on these very values
        for name in ("y", "big", "small"):
            assert got[name].dtype == fresh[name].dtype and _bits(got[name]) == _bits(fresh[name]), name
    got = session.run(_feeds(4))
    assert got["big"].dtype == np.bool_ and got["small"].dtype == np.bool_ and (got["small"] == ~got["big"]).all()
    values = session.run(_feeds(5), keep_all=True)  # the planned calls are the ones a run takes
    for step in steps:
        if isinstance(step, (DirectMLStep, ViewStep)):
            assert step.planned.signature.matches(step.inputs_of(values)), step.node.op


def test_a_node_whose_call_reads_a_runtime_value_is_mapped_on_every_call():
    """Reshape's shape is a graph input here, not a constant: each call's shape counts."""
    model = model_of([helper.make_node("Reshape", ["x", "shape"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                     [value("x", F32, [2, 6]), value("shape", TensorProto.INT64, [2])], [value("z")])
    session = OnnxSession(model)
    x = np.arange(-6, 6, dtype=np.float32).reshape(2, 6)
    assert session.run({"x": x, "shape": np.array([3, 4])})["z"].shape == (3, 4)
    reshape = session.plan_for({"x": x, "shape": np.array([3, 4])}).steps[0]
    assert isinstance(reshape, ViewStep) and reshape.planned is None
    assert session.run({"x": x, "shape": np.array([4, 3])})["z"].shape == (4, 3)
    assert session.run({"x": x, "shape": np.array([12, 1])})["z"].tolist() == np.maximum(x, 0).reshape(12, 1).tolist()
    # A shape that does not hold the input's elements is the call's error (exit 2), said with the node, on a
    # planned run as on a first one.
    for tried in (session, OnnxSession(model)):
        with pytest.raises(InputError, match=r"node #0 \(Reshape\): ONNX Reshape: ONNX's Reshape shape \[5, 5\] "
                                             r"holds 25 elements, the input 12"):
            tried.run({"x": x, "shape": np.array([5, 5])})


def test_a_node_whose_adapter_copies_an_input_is_mapped_on_every_call():
    """Where's condition is converted to UINT8 (a new array): it cannot be made again from the Sizes."""
    model = model_of([helper.make_node("Where", ["c", "x", "y"], ["z"])],
                     [value("c", TensorProto.BOOL, [4]), value("x", F32, [4]), value("y", F32, [4])], [value("z")])
    session = OnnxSession(model)
    x, y = np.arange(4, dtype=np.float32), -np.arange(4, dtype=np.float32)
    first = session.run({"c": np.array([1, 0, 1, 0], bool), "x": x, "y": y})["z"]
    step = session.plan_for({"c": np.array([1, 0, 1, 0], bool), "x": x, "y": y}).steps[0]
    assert step.planned is None
    second = session.run({"c": np.array([0, 1, 1, 1], bool), "x": x, "y": y})["z"]
    assert first.tolist() == [0, -1, 2, -3] and second.tolist() == [0, 1, 2, 3]


def _planned_matmul():
    """The plumbing model's session once planned, its MatMul step, every tensor of a run and the MatMul's output."""
    session = OnnxSession(_plumbing_model(), fusions=False)
    feeds = _feeds(0)
    session.run(feeds)
    matmul = next(step for step in session.plan_for(feeds).steps if step.node.op == "MatMul")
    values = session.run(feeds, keep_all=True)
    return session, matmul, values, matmul.run(values, session.executor)["m"]


def test_inputs_other_than_the_planned_ones_take_the_general_path():
    """Another Sizes makes another plan; the same node run on other arrays of the constants (--compare's
    reference values) or on a non-contiguous input is mapped as it is, with the same result."""
    session, matmul, values, expected = _planned_matmul()
    copies = {name: np.array(values[name]) for name in matmul.node.inputs}  # other objects: no constant matches
    assert not matmul.planned.signature.matches(matmul.inputs_of(copies))
    assert _bits(matmul.run(copies, session.executor)["m"]) == _bits(expected)
    strided = dict(copies, t=np.asfortranarray(copies["t"]))
    assert _bits(matmul.run(strided, session.executor)["m"]) == _bits(expected)


def test_a_planned_nodes_runner_takes_only_the_inputs_it_was_planned_for():
    """A model's run calls each planned node's runner (planned_runner): the planned call on the run's values, its
    outputs stored there; inputs other than the plan's (other arrays of the constants, other Strides, another
    type) are declined, nothing stored but what the runner's `otherwise` does: the node's general path, which the
    step's advancer gives it."""
    session, matmul, values, expected = _planned_matmul()
    declined = []
    runner = matmul.planned.runner(declined.append)
    inputs = {name: values[name] for name in matmul.node.inputs}
    own = dict(inputs)
    runner(own)
    assert declined == [] and _bits(own["m"]) == _bits(expected)
    copies = {name: np.array(array) for name, array in inputs.items()}
    strided = dict(inputs, t=np.asfortranarray(inputs["t"]))
    wider = dict(inputs, t=inputs["t"].astype(np.float64))
    for other in (copies, strided, wider):
        runner(other)
        assert declined[-1] is other and "m" not in other
    assert len(declined) == 3
    advance = matmul.advancer(session.executor)
    for other in (copies, strided):
        advance(other)
        assert _bits(other["m"]) == _bits(expected)


def test_a_runs_planned_nodes_take_their_runners(monkeypatch):
    """After the plan, only the nodes whose ONNX bool tensors pass through Wiring's views (Greater, Not) take the
    general path; every other planned node runs as its runner, with the bits of a first (mapped) run."""
    general = []
    for kind in (DirectMLStep, ViewStep):
        def counted(self, values, executor, original=kind.run):
            general.append(self.node.op)
            return original(self, values, executor)

        monkeypatch.setattr(kind, "run", counted)
    session = OnnxSession(_plumbing_model(), fusions=False)
    session.run(_feeds(0))
    assert general == []  # planning maps each node itself (Step.plan)
    got = session.run(_feeds(1))
    assert sorted(general) == ["Greater", "Not"]
    fresh = OnnxSession(_plumbing_model(), fusions=False).run(_feeds(1))
    for name in ("y", "big", "small"):
        assert got[name].dtype == fresh[name].dtype and _bits(got[name]) == _bits(fresh[name]), name


def test_views_are_made_again_from_the_inputs_memory():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    made = planned_arrays((), ("x",), (x,), set(), (x, x.reshape(6, 4), x.transpose(2, 0, 1)[1:],
                                                   np.broadcast_to(x[:, :1], (2, 5, 4))))
    assert made is not None
    signature, (same, reshape, strided, broadcast) = made
    assert same == Derived(0) and reshape == Derived(0, (6, 4)) and strided.strides is not None
    other = np.arange(100, 124, dtype=np.float32).reshape(2, 3, 4)
    assert signature.matches((other,))
    assert strided.of((other,)).tolist() == other.transpose(2, 0, 1)[1:].tolist()
    assert broadcast.of((other,)).tolist() == np.broadcast_to(other[:, :1], (2, 5, 4)).tolist()
    assert reshape.of((other,)).tolist() == other.reshape(6, 4).tolist()
    assert not signature.matches((other.astype(np.float64),)) and not signature.matches((other[:, :, ::-1],))


def test_what_cannot_be_made_again_is_not_planned():
    x = np.arange(6, dtype=np.float32)
    w = np.ones(6, np.float32)
    assert planned_arrays(None, ("x",), (x,), set(), (x,)) is None  # the entry does not say what it reads
    assert planned_arrays((1,), ("x", "s"), (x, w), set(), (x,)) is None  # a value read off a runtime input
    assert planned_arrays((), ("x",), (x,), set(), (x + 1,)) is None  # a new array
    assert planned_arrays((), ("x", "y"), (x, x[:3]), set(), (x, x[:3])) is None  # two inputs of one memory
    signature, made = planned_arrays((), ("x", "w"), (x, w), {"w"}, (x, w.reshape(2, 3)))
    assert made[1].shape == (2, 3) and signature == Signature(((0, x.dtype, (6,), (4,)),), ((1, w),))
    assert not signature.matches((x, w.copy()))  # another array where the constant was


def test_every_entry_that_states_its_value_inputs_names_inputs_by_position():
    for entry in ENTRIES:
        if entry.value_inputs is not None:
            assert all(isinstance(p, int) and 0 <= p < 8 for p in entry.value_inputs), entry.onnx_op


# ---------------------------------------------------------------- BLAS on the calling thread


def _clear_blas_variables(monkeypatch):
    from dmlcli.onnx_model.executors import BLAS_THREAD_VARIABLES

    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_a_model_runs_with_blas_on_the_calling_thread(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from dmlcli.onnx_model.executors import CpuExecutor

    _clear_blas_variables(monkeypatch)
    seen = []
    run = CpuExecutor.execute

    def execute(self, verdict, arrays):  # what BLAS's thread count is while a node runs
        seen.append({i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"})
        return run(self, verdict, arrays)

    monkeypatch.setattr(CpuExecutor, "execute", execute)
    before = threadpoolctl.threadpool_info()
    OnnxSession(_plumbing_model()).run(_feeds(0))
    assert seen and all(counts <= {1} for counts in seen)
    assert threadpoolctl.threadpool_info() == before  # restored after the run


def test_blas_keeps_the_thread_count_the_environment_sets(monkeypatch):
    from dmlcli.onnx_model import executors

    _clear_blas_variables(monkeypatch)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert isinstance(executors.one_blas_thread(), type(executors.contextlib.nullcontext()))
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.setattr(executors, "_blas_controller", lambda: None)  # threadpoolctl not installed
    assert isinstance(executors.one_blas_thread(), type(executors.contextlib.nullcontext()))
    assert OnnxSession(_plumbing_model()).run(_feeds(0))["y"].shape == (4, 2, 6)


@pytest.mark.parametrize("name", ["squeezenet1_1", "encoder_small"])
def test_a_shared_models_planned_runs_give_the_bits_of_its_mapped_runs(name):
    """Every tensor of a planned run (each node's kept call) has the bits a first run gives, which maps, validates
    and runs each node through the engine: for the input that made the plan and for another of its Sizes."""
    from test_onnx_models import MODELS

    if not MODELS.is_dir():
        pytest.skip("the shared models are not there")
    path = str(MODELS / f"{name}.onnx")
    given = np.load(MODELS / f"{name}.npz")["input"]
    rng = np.random.default_rng(11)
    other = (rng.integers(0, 1000, given.shape).astype(given.dtype) if given.dtype.kind == "i"
             else rng.standard_normal(given.shape).astype(given.dtype))
    session = OnnxSession(path)
    session.run({"input": given})  # the plan
    # (with ONNX Runtime's fusions, SqueezeNet's 26 Conv + Relu pairs are 26 planned calls)
    assert sum(1 for step in session.plan_for({"input": given}).steps if getattr(step, "planned", None)) > 30
    for feeds in ({"input": given}, {"input": other}):
        planned = session.run(feeds, keep_all=True)
        mapped = OnnxSession(path).run(feeds, keep_all=True)  # a first run: no plan yet
        assert planned.keys() == mapped.keys()
        for tensor, array in mapped.items():
            assert planned[tensor].dtype == array.dtype and _bits(planned[tensor]) == _bits(array), tensor


def test_a_vision_graphs_planned_runs_give_the_bits_of_its_mapped_runs():
    session = OnnxSession(_vision_model())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 20, 21)).astype(np.float32)
    session.run({"x": x})
    steps = session.plan_for({"x": x}).steps
    assert all(step.planned is not None for step in steps), [s.node.op for s in steps if s.planned is None]
    for seed in (1, 2):
        feeds = {"x": rng.standard_normal((2, 3, 20, 21)).astype(np.float32)}
        planned = session.run(feeds, keep_all=True)
        mapped = OnnxSession(_vision_model()).run(feeds, keep_all=True)
        for tensor, array in mapped.items():
            assert planned[tensor].dtype == array.dtype and _bits(planned[tensor]) == _bits(array), tensor


def test_a_planned_kernels_result_is_never_an_inputs_memory():
    """The backend's planned call runs the kernel on the arrays as they come, and still hands back a fresh
    C-ordered array where a kernel gives an input (or a view of one) back."""
    from types import SimpleNamespace

    from dmlcli.backends.cpu import CpuBackend
    from dmlcli.data_types import FLOAT32

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    returns_views = SimpleNamespace(fused_activation=None, planned_kernel=None,
                                    array_kernel=lambda xp, inputs, outputs, params: (inputs[0][:, ::2], inputs[0]))
    info = SimpleNamespace(data_type=FLOAT32)
    run = CpuBackend().planned_shaped(returns_views, [x], [info, info], {})
    strided, same = run([x])
    assert strided.flags.c_contiguous and not np.shares_memory(strided, x)
    assert same is not x and not np.shares_memory(same, x) and np.array_equal(same, x)


def test_a_planned_call_of_converted_inputs_takes_the_backends_general_path():
    """An input the kernel must not see as it is (another byte order) keeps the backend's `shaped`, which converts
    it: the planned call gives the general path's result."""
    from dmlcli.backends.cpu import CpuBackend

    import dmlcli

    x = np.arange(6, dtype=">f4").reshape(2, 3)
    call = dmlcli.validate("slice", x.astype(np.float32), offsets=[0, 1], sizes=[2, 2], strides=[1, 1]).call
    backend = CpuBackend()
    run = backend.planned_shaped(call.operator, [x], call.outputs, call.parameters)
    (planned,) = run([x])
    (general,) = backend.execute_shaped(call.operator, [x], call.outputs, call.parameters)
    assert planned.dtype == np.float32 and np.array_equal(planned, general)
    assert np.array_equal(planned, np.array([[1, 2], [4, 5]], np.float32))


def _fresh_and_equal(got, expected, inputs) -> None:
    assert type(got) is tuple and len(got) == len(expected)
    for array, wanted in zip(got, expected):
        assert array.dtype == wanted.dtype and array.shape == wanted.shape and _bits(array) == _bits(wanted)
        assert array.flags.c_contiguous
        assert not any(x is not None and np.shares_memory(array, x) for x in inputs)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 5), k=st.integers(1, 6), n=st.integers(1, 5), batch=st.sampled_from([(), (2,), (2, 3)]),
       shared=st.booleans(), trans_a=st.booleans(), trans_b=st.booleans(), alpha=st.sampled_from([1.0, 0.5, -3.0, 0.0]),
       beta=st.sampled_from([1.0, 2.0, 0.0]), with_c=st.sampled_from([None, "row", "full"]), seed=st.integers(0, 99))
def test_gemms_planned_call_gives_its_kernels_bits(m, k, n, batch, shared, trans_a, trans_b, alpha, beta, with_c,
                                                    seed):
    """GEMM's planned_kernel (FLOAT32, worked out once) against its array_kernel, on the arrays the backend's planned
    call hands it: the same bits, a fresh C-ordered result; the same function again on other values of the same
    Sizes (a model's later call). An infinity and a NaN in A check IEEE's 0 * inf with Alpha or Beta 0."""
    import dmlcli
    from dmlcli.backends.cpu import CpuBackend

    rng = np.random.default_rng(seed)

    def operands():
        a = rng.standard_normal(batch + ((k, m) if trans_a else (m, k))).astype(np.float32)
        a.reshape(-1)[:2] = [np.inf, np.nan][: a.size]
        b_batch = tuple(1 for _ in batch) if shared else batch
        b = rng.standard_normal(b_batch + ((n, k) if trans_b else (k, n))).astype(np.float32)
        c = None if with_c is None else rng.standard_normal((1,) * len(batch) + ((1, n) if with_c == "row" else (m, n))
                                                            ).astype(np.float32)
        return [a, b, c]

    first = operands()
    keywords = dict(alpha=alpha, beta=beta, trans_a="transpose" if trans_a else "none",
                    trans_b="transpose" if trans_b else "none", broadcast=True)
    call = dmlcli.validate("gemm", *[x for x in first if x is not None], **keywords).call
    complete = call.complete
    run = CpuBackend().planned_shaped(call.operator, complete(first if with_c else first[:2]), call.outputs,
                                      call.parameters)
    assert run.__qualname__.startswith("gemm_planned")
    for arrays in (first, operands()):
        given = complete(arrays if with_c else arrays[:2])
        with np.errstate(all="ignore"):
            expected = call.operator.array_kernel(np, given, call.outputs, call.parameters)
            _fresh_and_equal(run(given), expected, given)


def test_gemms_planned_call_leaves_float16_to_its_kernel():
    import dmlcli
    from dmlcli.operators.matmul.entries import gemm_planned

    a = np.ones((2, 3), np.float16)
    call = dmlcli.validate("gemm", a, a.T.copy()).call
    assert gemm_planned(call.complete([a, a.T.copy()]), call.outputs, call.parameters) is None


@pytest.mark.parametrize("name, shapes, keywords", [
    ("identity", [(3, 4)], {}),
    ("identity", [(3, 4)], {"scale": 2.0, "bias": -1.0}),
    ("add", [(2, 5), (2, 5)], {}),
    ("activation_gelu", [(4, 8)], {}),
    ("activation_relu", [(6,)], {}),
])
def test_a_planned_elementwise_call_gives_the_backends_bits(name, shapes, keywords):
    """The backend's planned element-wise call (the kernel on the arrays as they come) against `elementwise`, on
    strided inputs (a transpose's: what a Transpose's IDENTITY reads) and contiguous ones; a fresh C-ordered result."""
    import dmlcli
    from dmlcli.backends.cpu import CpuBackend

    rng = np.random.default_rng(5)
    for strided in (False, True):
        arrays = [rng.standard_normal(shape[::-1]).astype(np.float32).T if strided
                  else rng.standard_normal(shape).astype(np.float32) for shape in shapes]
        call = dmlcli.validate(name, *arrays, **keywords).call
        shape, dtype = tuple(call.output.shape), np.dtype(call.output.data_type.numpy_dtype)
        backend = CpuBackend()
        run = backend.planned_elementwise(call.operator, arrays, shape, dtype, call.parameters)
        with np.errstate(all="ignore"):
            expected = (backend.elementwise(arrays, call.operator, shape, dtype, call.parameters),)
            _fresh_and_equal(run(arrays), expected, arrays)


def test_a_planned_elementwise_call_that_broadcasts_or_converts_takes_elementwise():
    """An input of other Sizes than the output's (broadcast) or of another byte order keeps `elementwise`, which
    broadcasts and converts; an IDENTITY kernel's result is never its input's memory."""
    from types import SimpleNamespace

    from dmlcli.backends.cpu import CpuBackend

    backend = CpuBackend()
    hands_back = SimpleNamespace(cpu_kernel=lambda inputs, dtype, params: inputs[0])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (same,) = backend.planned_elementwise(hands_back, [x], (2, 3), np.dtype(np.float32), {})([x])
    assert not np.shares_memory(same, x) and np.array_equal(same, x)
    row = np.arange(3, dtype=">f4")
    (spread,) = backend.planned_elementwise(hands_back, [row], (2, 3), np.dtype(np.float32), {})([row])
    assert spread.shape == (2, 3) and spread.dtype == np.float32 and np.array_equal(spread[1], [0, 1, 2])


@settings(max_examples=60, deadline=None)
@given(shape=st.sampled_from([(3, 16, 1, 8), (5, 4), (2, 3, 4)]), axis=st.integers(0, 3),
       indices=st.lists(st.integers(-9, 9), min_size=1, max_size=4), index_type=st.sampled_from(["int64", "int32",
                                                                                                   "uint32"]),
       seed=st.integers(0, 99))
def test_gathers_planned_call_gives_its_kernels_bits(shape, axis, indices, index_type, seed):
    """GATHER's planned_kernel, its constant indices' positions worked out once (negative ones counted from the
    end, those past either end clamped, as DirectML's shaders clamp them), against its array_kernel on two calls'
    data: the same bits, a fresh C-ordered result."""
    import dmlcli
    from dmlcli.backends.cpu import CpuBackend

    axis = axis % len(shape)
    rng = np.random.default_rng(seed)
    index_array = np.array(indices if index_type != "uint32" else [abs(i) for i in indices], index_type)
    index_array = index_array.reshape((1,) * (len(shape) - 1) + (-1,))
    first = rng.standard_normal(shape).astype(np.float32)
    call = dmlcli.validate("gather", first, index_array, axis=axis, index_dimensions=1).call
    run = CpuBackend().planned_shaped(call.operator, [first, index_array], call.outputs, call.parameters,
                                      frozenset({1}))
    assert run.__qualname__.startswith("gather_planned")
    for data in (first, rng.standard_normal(shape).astype(np.float32)):
        expected = call.operator.array_kernel(np, [data, index_array], call.outputs, call.parameters)
        _fresh_and_equal(run([data, index_array]), expected, [data, index_array])


def test_gathers_planned_call_needs_constant_indices_of_the_datas_type():
    """Indices that change from call to call, or an output read as another type, keep the kernel's own call."""
    import dmlcli
    from dmlcli.operators.indexing.entries import gather_planned

    data, indices = np.ones((3, 4), np.float32), np.zeros((1, 2), np.int64)
    call = dmlcli.validate("gather", data, indices, axis=1, index_dimensions=1).call
    assert gather_planned([data, indices], call.outputs, call.parameters, frozenset({1})) is not None
    assert gather_planned([data, indices], call.outputs, call.parameters, frozenset()) is None
    assert gather_planned([data.view(np.int32), indices], call.outputs, call.parameters, frozenset({1})) is None


@pytest.fixture
def compiled_loops_on():
    """The compiled loops on for the test (restored after it); skipped without Numba."""
    pytest.importorskip("numba")
    from dmlcli.operators.numerics import compiled_loops

    saved = dict(compiled_loops._state)
    assert compiled_loops.use(True) is not None
    yield
    compiled_loops._state.clear()
    compiled_loops._state.update(saved)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.sampled_from([(1, 16), (2, 3), (4,)]), n=st.sampled_from([1, 7, 8, 128, 200]),
       scaled=st.booleans(), biased=st.booleans(), normalize_variance=st.booleans(), nan=st.booleans(),
       seed=st.integers(0, 99))
def test_mvns_planned_call_gives_its_kernels_bits(compiled_loops_on, rows, n, scaled, biased, normalize_variance,
                                                  nan, seed):
    """MEAN_VARIANCE_NORMALIZATION1's planned_kernel over the last axis (a LayerNormalization's), Scale and Bias
    constants made ready once for the compiled loop, against its array_kernel: the same bits, a fresh C-ordered
    result; an input holding a NaN, which the loop declines, takes the kernel itself."""
    import dmlcli
    from dmlcli.backends.cpu import CpuBackend

    rng = np.random.default_rng(seed)
    shape = rows + (n,)
    side = (1,) * len(rows) + (n,)
    scale = rng.standard_normal(side).astype(np.float32) if scaled else None
    bias = rng.standard_normal(side).astype(np.float32) if biased else None
    first = rng.standard_normal(shape).astype(np.float32)
    keywords = dict(axes=[len(shape) - 1], normalize_variance=normalize_variance, epsilon=1e-5)
    call = dmlcli.validate("mean_variance_normalization1", first, scale, bias, **keywords).call
    complete = call.complete
    constant = frozenset(position for position, t in ((1, scale), (2, bias)) if t is not None)
    run = CpuBackend().planned_shaped(call.operator, complete([first, scale, bias]), call.outputs, call.parameters,
                                      constant)
    assert run.__qualname__.startswith("planned_rows")  # mvn_planned's call through the loop
    second = rng.standard_normal(shape).astype(np.float32)
    if nan:
        second.reshape(-1)[rng.integers(second.size)] = np.nan
    for x in (first, second):
        arrays = complete([x, scale, bias])
        with np.errstate(all="ignore"):
            expected = call.operator.array_kernel(np, arrays, call.outputs, call.parameters)
        _fresh_and_equal(run(arrays), expected, arrays)


def test_mvns_planned_call_leaves_the_others_to_its_kernel(compiled_loops_on):
    """A Scale that changes from call to call, other axes than the last, or the loops off: the kernel's own call."""
    import dmlcli
    from dmlcli.operators.numerics import compiled_loops
    from dmlcli.operators.normalization.entries import mvn_planned

    x, scale = np.ones((2, 3, 4), np.float32), np.ones((1, 1, 4), np.float32)
    call = dmlcli.validate("mean_variance_normalization1", x, scale, None, axes=[2]).call
    inputs = call.complete([x, scale, None])
    assert mvn_planned(inputs, call.outputs, call.parameters, frozenset({1})) is not None
    assert mvn_planned(inputs, call.outputs, call.parameters, frozenset()) is None
    across = dmlcli.validate("mean_variance_normalization1", x, axes=[1, 2]).call
    assert mvn_planned(across.complete([x]), across.outputs, across.parameters, frozenset()) is None
    compiled_loops.use(False)
    assert mvn_planned(inputs, call.outputs, call.parameters, frozenset({1})) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.sampled_from([(1, 4, 16), (2, 3), (5,)]), n=st.sampled_from([1, 7, 16, 200]),
       one=st.booleans(), special=st.sampled_from([None, np.nan, np.inf, -np.inf]), seed=st.integers(0, 99))
def test_softmaxs_planned_call_gives_its_kernels_bits(compiled_loops_on, rows, n, one, special, seed):
    """ACTIVATION_SOFTMAX(1)'s planned_kernel over the last axis (an attention's), its summation program made once
    for the compiled loops, against its array_kernel with the loops on and off: the same bits, a fresh C-ordered
    result; an input holding a NaN, which the loops decline, takes the kernel itself."""
    import dmlcli
    from dmlcli.backends.cpu import CpuBackend
    from dmlcli.operators.numerics import compiled_loops

    rng = np.random.default_rng(seed)
    shape = (rows if one else rows[-1:]) + (n,)  # SOFTMAX: an effective rank of at most 2
    first = (rng.standard_normal(shape) * 4).astype(np.float32)
    keywords = dict(axes=[len(shape) - 1]) if one else {}
    call = dmlcli.validate("softmax1" if one else "softmax", first, **keywords).call
    run = CpuBackend().planned_shaped(call.operator, [first], call.outputs, call.parameters, frozenset())
    assert run.__qualname__.startswith("planned_rows")  # softmax_planned's call through the loops
    second = (rng.standard_normal(shape) * 4).astype(np.float32)
    if special is not None:
        second.reshape(-1)[rng.integers(second.size)] = special
    for x in (first, second):
        with np.errstate(all="ignore"):
            got = run([x])
            expected = call.operator.array_kernel(np, [x], call.outputs, call.parameters)
            compiled_loops.use(False)
            numpy_expected = call.operator.array_kernel(np, [x], call.outputs, call.parameters)
            compiled_loops.use(True)
        _fresh_and_equal(got, expected, [x])
        _fresh_and_equal(got, numpy_expected, [x])


def test_softmaxs_planned_call_leaves_other_axes_to_its_kernel(compiled_loops_on):
    import dmlcli
    from dmlcli.operators.numerics import compiled_loops
    from dmlcli.operators.reduction.entries import softmax_planned

    x = np.ones((2, 3, 4), np.float32)
    last = dmlcli.validate("softmax1", x, axes=[2]).call
    assert softmax_planned([x], last.outputs, last.parameters) is not None
    middle = dmlcli.validate("softmax1", x, axes=[1]).call
    assert softmax_planned([x], middle.outputs, middle.parameters) is None
    half = x.astype(np.float16)
    assert softmax_planned([half], dmlcli.validate("softmax1", half, axes=[2]).call.outputs, last.parameters) is None
    compiled_loops.use(False)
    assert softmax_planned([x], last.outputs, last.parameters) is None


def test_a_planned_completion_makes_what_it_makes_of_constants_once():
    """Call.completion, complete as a model's planned node calls it: a constant's broadcast view is the first
    call's on every call, a runtime input is broadcast again, one complete leaves as it is passes as it comes, and a
    left-out input is in its place; the same arrays as complete gives, every call."""
    import dmlcli

    a, b, c = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.ones((1, 4), np.float32)
    call = dmlcli.validate("gemm", a, b, c, broadcast=True).call
    first = call.complete([a, b, c])
    assert first[2].shape == (2, 4)
    other_a, other_c = np.zeros((2, 3), np.float32), np.zeros((1, 4), np.float32)
    completion = call.completion([a, b, c], frozenset({2}))
    constant_view = completion([a, b, c])[2]
    assert completion([other_a, b, c])[2] is constant_view
    again = call.completion([a, b, c])([other_a, b, other_c])
    assert again[0] is other_a and again[2].shape == (2, 4) and np.shares_memory(again[2], other_c)
    for arrays in ([other_a, b, c], [a, b, other_c]):
        assert all(np.array_equal(x, y) for x, y in zip(call.completion([a, b, c])(arrays), call.complete(arrays)))
    without_c = dmlcli.validate("gemm", a, b).call
    assert without_c.absent == ("CTensor",)
    made = without_c.completion([a, b], frozenset({1}))([other_a, b])
    assert made[0] is other_a and made[1] is b and made[2] is None
    assert without_c.completed_sources([a, b]) == [0, 1, None]


def test_a_planned_finish_decides_its_reshapes_once():
    """An adapter's finish as a planned node's runner calls it, for outputs of known Sizes: left out where it hands
    them back as they are, else reshaping only those whose Sizes differ, with the finish's own results."""
    from dmlcli.suite.onnx.adapters import _same, planned_finish, reshaped_to

    assert planned_finish(_same, [(2, 3)]) is None and planned_finish(tuple, [(2, 3)]) is None
    assert planned_finish(reshaped_to([(2, 3), None]), [(2, 3), (4,)]) is None
    own = lambda outputs: tuple(outputs)  # noqa: E731 - an adapter's own finish is kept as it is
    assert planned_finish(own, [(2, 3)]) is own
    out, other = np.arange(6.0), np.arange(5.0)
    for shapes, wanted in ([[(2, 3), (5,)], [(6,), (5,)]], [[(2, 3)], [(6,)]], [[(2, 3), (4,)], [(6,), (5,)]],
                           [[(6,), (5,)], [(6,)]]):  # the last: the first output alone, as it is
        finish = reshaped_to(wanted)
        planned = planned_finish(finish, shapes)
        given = [out, other][:len(shapes)]
        got, expected = planned(given), finish(given)
        assert len(got) == len(expected) and all(a.shape == b.shape and np.shares_memory(a, c)
                                                 for a, b, c in zip(got, expected, given))
    (kept,) = reshaped_to([(5,)])([out])
    assert kept is out  # a wrong count is left for the comparison to report


def test_a_planned_node_marks_its_kept_verdict_as_the_latest():
    """--compare reads each node's latest verdict (its tolerance rule): a planned run marks the kept one."""
    session, matmul, values, expected = _planned_matmul()
    matmul.last_verdict = None
    own = {name: values[name] for name in matmul.node.inputs}
    matmul.advancer(session.executor)(own)
    assert matmul.last_verdict is matmul.planned.verdict and _bits(own["m"]) == _bits(expected)


def test_a_transposed_read_is_made_by_a_reshape_and_a_transpose():
    """A planned array that is a C-ordered input's reshape with its axes permuted (a Transpose's IDENTITY read) is
    made again by reshape and transpose, the same Sizes and Strides as planned; any other view (an offset, a step,
    zero Strides) by np.ndarray over the input's memory."""
    from dmlcli.onnx_model.planning.planned import _maker, _transposition

    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(6, 20)
    views = {"transposed": x.reshape(2, 3, 4, 5).transpose(2, 0, 3, 1),
             "unit axes": x.reshape(1, 6, 1, 20).transpose(3, 2, 1, 0),
             "sliced": x.reshape(2, 3, 4, 5)[:, 1:], "stepped": x[:, ::2], "broadcast": np.broadcast_to(x[:1], (3, 20))}
    for label, view in views.items():
        (made,) = planned_arrays((), ("x",), (x,), set(), (view,))[1]
        transposable = _transposition(made, x.dtype, x.shape) is not None
        assert transposable == (label in ("transposed", "unit axes")), label
        other = x + 1000
        again = _maker(made, ("x",), {0: (x.dtype, x.shape)})({"x": other})
        assert again.shape == view.shape and again.strides == view.strides and np.shares_memory(again, other), label
        assert np.array_equal(again, view + 1000), label
