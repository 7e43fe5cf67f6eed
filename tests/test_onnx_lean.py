"""A run that keeps only the model's outputs reads through its planned view nodes (dmlcli/onnx_model/lean.py): the
views' readers make their arrays of the views' inputs, the views' outputs are never made, and the outputs have the
bits of the whole program's run (keep_all), which makes every tensor.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from dmlcli.onnx_model import OnnxSession  # noqa: E402
from dmlcli.onnx_model.planning.planned import Derived, read_through  # noqa: E402
from dmlcli.onnx_model.steps import ViewStep  # noqa: E402

from test_onnx_models import F32, MODELS, model_of, tensor, value  # noqa: E402


def _bits(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _views_model(opset: int = 17):
    """A chain of views (Reshape, Unsqueeze, Squeeze, Flatten) of the model's input and between DirectML calls: a
    Transpose reading a view of a view (a strided read of a reshape), a MatMul reading a view, an Add reading a view
    of a Relu's output, and a Reshape whose output is the model's output."""
    rng = np.random.default_rng(7)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["x", "shape"], ["v1"]),
        helper.make_node("Unsqueeze", ["v1", "zero"], ["v2"]),
        helper.make_node("Transpose", ["v2"], ["t"], perm=[0, 2, 1, 3]),
        helper.make_node("Squeeze", ["t", "zero"], ["s"]),
        helper.make_node("Flatten", ["s"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "w"], ["m"]),
        helper.make_node("Reshape", ["r", "flat"], ["v3"]),
        helper.make_node("Add", ["v3", "x_flat"], ["a"]),
        helper.make_node("Reshape", ["a", "back"], ["y2"]),
    ]
    initializers = [tensor("shape", np.array([6, 2, 4], np.int64)), tensor("zero", np.array([0], np.int64)),
                    tensor("w", rng.standard_normal((24, 5)).astype(np.float32)),
                    tensor("flat", np.array([48], np.int64)), tensor("back", np.array([4, 12], np.int64)),
                    tensor("x_flat", rng.standard_normal(48).astype(np.float32))]
    return model_of(nodes, [value("x", F32, [3, 4, 4])], [value("m"), value("y2")], initializers, opset=opset)


def _feeds(seed: int) -> dict:
    return {"x": np.random.default_rng(seed).standard_normal((3, 4, 4)).astype(np.float32)}


def test_a_run_reads_through_its_views_and_gives_the_whole_programs_bits():
    session = OnnxSession(_views_model())
    session.run(_feeds(0))  # the plan
    plan = session.plan_for(_feeds(0))
    ops = {position: step.node.op for position, step, _ in plan.running}
    skipped = sorted(ops[position] for position, _, _ in plan.running if position not in dict(
        (position, None) for position, _, _ in plan.lean))
    # every view but the one whose output is the model's (y2); the views read by views are read through too, and
    # the Transpose between them (a copy of a strided view: the MatMul makes that copy itself)
    assert skipped == ["Flatten", "Reshape", "Reshape", "Squeeze", "Transpose", "Unsqueeze"]
    for seed in (1, 2):
        lean = session.run(_feeds(seed))
        whole = session.run(_feeds(seed), keep_all=True)
        fresh = OnnxSession(_views_model()).run(_feeds(seed))  # a first run: each node mapped
        for name in ("m", "y2"):
            assert _bits(lean[name]) == _bits(whole[name]) == _bits(fresh[name]), name


def test_a_reader_that_declines_runs_the_views_it_reads_through_first():
    """Inputs other than the plan's (a Fortran-ordered x: other Strides) are declined by the runners that read them:
    the Transpose that reads x through two skipped views runs those views first (their general path, which reshapes
    a copy), then its own general path: the same bits."""
    session = OnnxSession(_views_model())
    session.run(_feeds(0))
    x = np.asfortranarray(_feeds(3)["x"])
    got = session.run({"x": x})
    want = OnnxSession(_views_model()).run({"x": np.ascontiguousarray(x)})
    for name in ("m", "y2"):
        assert _bits(got[name]) == _bits(want[name]), name


def test_a_view_read_by_a_node_that_is_not_planned_is_kept():
    """A view's output read by a node whose call reads a runtime value (a Gather's runtime indices are planned, a
    Reshape by a runtime shape is not): the view runs and its output is there for that node."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["v"]),
             helper.make_node("Reshape", ["v", "runtime_shape"], ["y"])]
    model = model_of(nodes, [value("x", F32, [2, 6]), value("runtime_shape", TensorProto.INT64, [2])],
                     [value("y")], [tensor("shape", np.array([3, 4], np.int64))])
    session = OnnxSession(model)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "runtime_shape": np.array([6, 2], np.int64)}
    session.run(feeds)
    plan = session.plan_for(feeds)
    assert len(plan.lean) == len(plan.program)
    assert session.run(feeds)["y"].shape == (6, 2)


def test_reading_through_makes_the_readers_arrays_of_the_views_input():
    """read_through on a planned Transpose reading a Reshape view: the Transpose's strided read is made of the
    Reshape's input, which its runner checks for the Sizes and Strides the view was planned on."""
    session = OnnxSession(_views_model())
    session.run(_feeds(0))
    plan = session.plan_for(_feeds(0))
    steps = {step.node.op + ":" + step.node.outputs[0]: step for _, step, _ in plan.running}
    reshape, unsqueeze, transpose = steps["Reshape:v1"], steps["Unsqueeze:v2"], steps["Transpose:t"]
    assert isinstance(reshape, ViewStep)
    unsqueezed = read_through(unsqueeze.planned, "v1", reshape.planned)
    assert unsqueezed.wiring.inputs[0] == "x" and unsqueezed.made[0] == Derived(0, (1, 6, 2, 4))
    read = read_through(read_through(transpose.planned, "v2", unsqueezed), "v1", reshape.planned)
    assert read is None  # the Transpose reads v2 only: v1 is no input of its own
    direct = read_through(transpose.planned, "v2", unsqueezed)
    assert direct.wiring.inputs[0] == "x" and direct.signature.runtime[0][2] == (3, 4, 4)
    declined = []
    values = dict(_feeds(4))
    direct.runner(declined.append)(values)
    assert declined == []
    assert _bits(values["t"]) == _bits(np.ascontiguousarray(values["x"].reshape(1, 6, 2, 4).transpose(0, 2, 1, 3)))
    fortran = {"x": np.asfortranarray(values["x"])}
    direct.runner(declined.append)(fortran)
    assert declined == [fortran] and "t" not in fortran  # other Strides: declined


@pytest.mark.skipif(not MODELS.is_dir(), reason="the shared models are not there")
def test_the_encoders_lean_run_skips_its_views_and_copies_and_gives_the_same_bits():
    """The encoder's views, and the Transposes and Gathers of its attention (copies of views of their inputs, each
    chain of them one copy its product makes), are not run: 44 of its 64 nodes."""
    path = str(MODELS / "encoder_small.onnx")
    given = np.load(MODELS / "encoder_small.npz")["input"]
    session = OnnxSession(path)
    session.run({"input": given})
    plan = session.plan_for({"input": given})
    skipped = {position for position, _, _ in plan.running} - {position for position, _, _ in plan.lean}
    assert all(isinstance(plan.steps[position], ViewStep) or plan.steps[position].node.op in ("Transpose", "Gather")
               for position in skipped)
    assert len(skipped) == 44
    other = {"input": np.random.default_rng(2).integers(0, 1000, given.shape).astype(given.dtype)}
    for feeds in ({"input": given}, other):
        lean, whole = session.run(feeds), session.run(feeds, keep_all=True)
        for name, array in lean.items():
            assert _bits(array) == _bits(whole[name]), name
