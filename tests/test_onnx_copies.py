"""A lean run reads through the nodes that only move data (dmlcli/onnx_model/planning/copies.py): a Transpose, a Gather
of constant indices, a Slice, whose output the plan finds a C-ordered copy of one view of the input; their readers
make that copy themselves, a chain of them as one copy of the composed views, with the whole program's bits.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from dmlcli.onnx_model import OnnxSession  # noqa: E402
from dmlcli.onnx_model.planning.copies import copying_view  # noqa: E402
from dmlcli.onnx_model.planning.derived import Copied, Derived, as_view, composed  # noqa: E402
from dmlcli.onnx_model.planning.planned import PlannedView, read_through  # noqa: E402
from dmlcli.operators import find_operator  # noqa: E402

from test_onnx_models import F32, model_of, tensor, value  # noqa: E402


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _run_both(model, feeds: dict) -> tuple[OnnxSession, dict, dict]:
    """The session (planned on `feeds`), its lean run's outputs and its whole program's."""
    session = OnnxSession(model)
    session.run(feeds)
    return session, session.run(feeds), session.run(feeds, keep_all=True)


def _skipped(session: OnnxSession, feeds: dict) -> list[str]:
    plan = session.plan_for(feeds)
    kept = {position for position, _, _ in plan.lean}
    return sorted(step.node.op for position, step, _ in plan.running if position not in kept)


def _step(session: OnnxSession, feeds: dict, output: str):
    plan = session.plan_for(feeds)
    return next(step for _, step, _ in plan.running if output in step.node.outputs)


def _attention_like(opset: int = 17):
    """A Transformer's head split: a product's rows {16, 1, 384} viewed as {16, 1, 3, 1, 128}, Transposed to
    {3, 16, 1, 1, 128}, one Gather per part (q, k, v), each reshaped to {16, 4, 32}, then the two products of the
    heads. ONNX Runtime's fusions (fusions.py) make each product a FusedMatMul that reads its operands' Transposes
    through Strides; the Transpose before the Gathers stays."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["rows"]),
        helper.make_node("Reshape", ["rows", "parts"], ["split"]),
        helper.make_node("Transpose", ["split"], ["parted"], perm=[2, 0, 1, 3, 4]),
        *[helper.make_node("Gather", ["parted", f"i{k}"], [f"g{k}"], axis=0) for k in range(3)],
        *[helper.make_node("Reshape", [f"g{k}", "heads"], [f"h{k}"]) for k in range(3)],
        *[helper.make_node("Transpose", [f"h{k}"], [f"t{k}"], perm=[1, 0, 2]) for k in range(3)],
        helper.make_node("Transpose", ["t1"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["t0", "kt"], ["scores"]),
        helper.make_node("MatMul", ["scores", "t2"], ["y"]),
    ]
    initializers = [tensor("w", rng.standard_normal((128, 384)).astype(np.float32)),
                    tensor("parts", np.array([16, 1, 3, 1, 128], np.int64)),
                    tensor("heads", np.array([16, 4, 32], np.int64)),
                    *[tensor(f"i{k}", np.array(k, np.int64)) for k in range(3)]]
    return model_of(nodes, [value("x", F32, [16, 1, 128])], [value("y")], initializers, opset=opset)


def _x(seed: int, shape=(16, 1, 128)) -> dict:
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


def test_the_attention_split_is_read_through_as_one_copy_a_product_makes():
    session, lean, whole = _run_both(_attention_like(), _x(0))
    assert _skipped(session, _x(0)) == ["Gather"] * 3 + ["Reshape"] * 4 + ["Transpose"]
    assert _bits(lean["y"]) == _bits(whole["y"])
    plan = session.plan_for(_x(0))
    scores = next(index for index, (position, _, _) in enumerate(plan.lean)
                  if plan.steps[position].node.outputs == ("scores",))
    assert len(plan.lean) == 3 and scores == 1  # the three products alone
    for seed in (1, 2):
        fresh = OnnxSession(_attention_like()).run(_x(seed))  # a first run: every node mapped and run
        whole = session.run(_x(seed), keep_all=True)["y"]
        assert _bits(session.run(_x(seed))["y"]) == _bits(fresh["y"]) == _bits(whole)


def test_a_product_reads_q_as_one_copy_of_one_view_of_the_rows():
    """Read through q's chain (Reshape, Gather, Transpose, Reshape), the first product's array of q is one copy of
    one view of the first MatMul's output (the Gather's and the Transpose's views composed), then its own strided
    read of that copy: the array it read of the Reshape's output, bit for bit."""
    session = OnnxSession(_attention_like())
    session.run(_x(0))
    steps = {name: _step(session, _x(0), name) for name in ("scores", "h0", "g0", "parted", "split")}
    planned = steps["scores"].planned
    for name in ("h0", "g0", "parted", "split"):
        node = steps[name].planned
        planned = read_through(planned, name, node if isinstance(node, PlannedView) else copying_view(node))
    assert planned.wiring.inputs[0] == "rows"
    first, original = planned.made[0], steps["scores"].planned.made[0]
    assert type(first) is Copied and type(first.source) is Derived and first.then is not None
    values = session.run(_x(5), keep_all=True)
    assert first.source.shape == (16, 1, 1, 128)  # rows[:, :, 0:128] as the Gather's {16, 1, 1, 128}
    made = first.of([values["rows"]])
    assert made.strides == original.of([values["h0"]]).strides
    assert _bits(made) == _bits(original.of([values["h0"]]))


def test_a_reader_whose_inputs_are_not_the_plans_runs_the_copies_first():
    """Another input's Strides (Fortran order) make the product reading x decline: every node runs, as in the
    whole program, with the same bits."""
    session = OnnxSession(_attention_like())
    session.run(_x(0))
    x = np.asfortranarray(_x(4)["x"])
    got = session.run({"x": x})["y"]
    want = OnnxSession(_attention_like()).run({"x": np.ascontiguousarray(x)})["y"]
    assert _bits(got) == _bits(want)


def _transposes_around_a_merge():
    """Transpose, a Reshape that merges two of the transposed axes, Transpose: the second copy's view of the first
    copy is no single view of x (its elements step by 12 then 1 then 4), so the first Transpose runs."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "merged"], ["m"]),
             helper.make_node("Transpose", ["m"], ["u"], perm=[1, 0]),
             helper.make_node("Relu", ["u"], ["y"])]
    return model_of(nodes, [value("x", F32, [2, 3, 4])], [value("y")],
                    [tensor("merged", np.array([2, 12], np.int64))])


def test_a_chain_whose_views_do_not_compose_keeps_the_copy_they_need():
    feeds = _x(0, (2, 3, 4))
    session, lean, whole = _run_both(_transposes_around_a_merge(), feeds)
    assert _skipped(session, feeds) == ["Reshape", "Transpose"]
    assert _bits(lean["y"]) == _bits(whole["y"])
    assert _bits(lean["y"]) == _bits(np.maximum(feeds["x"].transpose(0, 2, 1).reshape(2, 12).T, 0))


def _gather(indices, shape=(3, 5, 2), axis=1, elem=F32, opset=17):
    nodes = [helper.make_node("Gather", ["x", "indices"], ["g"], axis=axis), helper.make_node("Neg", ["g"], ["y"])]
    return model_of(nodes, [value("x", elem, list(shape))], [value("y")],
                    [tensor("indices", np.asarray(indices, np.int64))], opset=opset)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-5, 4), min_size=1, max_size=6))
def test_a_gather_is_read_through_where_its_indices_step_evenly(indices):
    """Indices that step by one amount (1, 0, -2, or a lone index; negative ones count from the end) pick one view
    of the data; any others are a gather, which runs."""
    feeds = {"x": np.random.default_rng(1).standard_normal((3, 5, 2)).astype(np.float32)}
    session, lean, whole = _run_both(_gather(indices), feeds)
    wrapped = [index % 5 for index in indices]
    even = len({b - a for a, b in zip(wrapped, wrapped[1:])}) <= 1
    assert (copying_view(_step(session, feeds, "g").planned) is not None) == even
    assert _skipped(session, feeds) == (["Gather"] if even else [])
    assert _bits(lean["y"]) == _bits(whole["y"]) == _bits(-np.take(feeds["x"], wrapped, axis=1))


def test_a_copy_whose_output_the_model_keeps_runs():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), helper.make_node("Relu", ["t"], ["y"])]
    model = model_of(nodes, [value("x", F32, [3, 4])], [value("y"), value("t")])
    feeds = _x(0, (3, 4))
    session, lean, whole = _run_both(model, feeds)
    assert _skipped(session, feeds) == []
    assert _bits(lean["t"]) == _bits(feeds["x"].T) and _bits(lean["y"]) == _bits(whole["y"])


@pytest.mark.parametrize("shape, read_through", [((32, 64), True), ((64, 64), False)])
def test_float16_positions_must_be_exact_for_a_copy_to_be_found(shape, read_through):
    """FLOAT16 holds the whole numbers up to 2048 exactly: a Transpose of 2048 FLOAT16 elements is found a copy,
    one of 4096 is not (its positions would round), and runs."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), helper.make_node("Neg", ["t"], ["y"])]
    model = model_of(nodes, [value("x", TensorProto.FLOAT16, list(shape))], [value("y")])
    feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float16)}
    session, lean, whole = _run_both(model, feeds)
    assert _skipped(session, feeds) == (["Transpose"] if read_through else [])
    assert _bits(lean["y"]) == _bits(whole["y"]) == _bits(-feeds["x"].T)


def test_only_identity_without_scale_bias_moves_its_input():
    identity = find_operator("IDENTITY")
    assert identity.moved_input({"ScaleBias": None}) == "InputTensor"
    assert identity.moved_input({"ScaleBias": (1.0, 0.0)}) is None  # x*1 + 0 makes -0.0 +0.0: not a copy
    assert find_operator("GATHER").moved_input({}) == "InputTensor"
    assert find_operator("RELU").moved_input({}) is None


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_as_view_finds_the_view_that_reads_a_strided_selection(data):
    """Positions of any view made by slicing and transposing a C-ordered array are that view's offset and Strides;
    a shuffled selection is found no view unless it happens to step evenly."""
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    steps = tuple(data.draw(st.sampled_from([1, 2, -1])) for _ in shape)
    view = positions[tuple(slice(None, None, s) for s in steps)]
    view = view.transpose(data.draw(st.permutations(range(len(shape)))))
    found = as_view(view, shape, np.dtype(np.float32), 0)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    assert found is not None and _bits(found.of([x])) == _bits(x.reshape(-1)[view])
    flat = view.reshape(-1)
    shuffled = flat[data.draw(st.permutations(range(flat.size)))]
    if as_view(shuffled, shape, np.dtype(np.float32), 0) is not None:
        assert flat.size <= 2 or np.all(np.diff(shuffled) == shuffled[1] - shuffled[0])


def test_composed_reads_what_a_view_of_a_copy_reads():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    float32 = np.dtype(np.float32)
    inner = Derived(0, (4, 2, 3), (4, 48, 16), 0, float32)  # x.transpose(2, 0, 1)
    outer = Derived(0, (2, 3), (12, 4), 12, float32)  # the copy's [0, 1, 0] on: {2, 3} elements, Strides {3, 1}
    copy = inner.of([x]).copy()
    want = outer.on(copy)
    found = composed(outer, inner, (2, 3, 4), float32)
    assert _bits(found.of([x])) == _bits(want)
    # x.reshape(6, 4).T copied, then read as {6, 4}: element [a, b] is x's (4a + b) // 6 + 4 ((4a + b) % 6): no view
    assert composed(Derived(0, (6, 4)), Derived(0, (4, 6), (4, 16), 0, float32), (2, 3, 4), float32) is None


@pytest.mark.parametrize("starts, ends, axes, steps", [([1, 0], [3, 5], [0, 1], [1, 2]), ([4], [-6], [1], [-1]),
                                                      ([0, 1], [2, 2], [2, 0], [1, 1])])
def test_a_slice_is_read_through_as_a_view(starts, ends, axes, steps):
    """SLICE1 copies one strided window (backwards where a step is negative): a view of its input."""
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"]),
             helper.make_node("Neg", ["s"], ["y"])]
    initializers = [tensor(name, np.array(values, np.int64))
                    for name, values in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps))]
    model = model_of(nodes, [value("x", F32, [3, 5, 2])], [value("y")], initializers)
    feeds = _x(0, (3, 5, 2))
    session, lean, whole = _run_both(model, feeds)
    window = [slice(None)] * 3
    for start, end, axis, step in zip(starts, ends, axes, steps):
        window[axis] = slice(start, end if end > -6 else None, step)
    assert _skipped(session, feeds) == ["Slice"]
    assert _bits(lean["y"]) == _bits(whole["y"]) == _bits(-feeds["x"][tuple(window)])
