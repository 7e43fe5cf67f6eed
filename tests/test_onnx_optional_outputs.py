"""A model's node asks DirectML for the outputs the node has (suite/onnx adapters' Prepared.outputs), as ONNX Runtime's
DirectML provider binds only those and leaves the other _Maybenull_ outputs NULL: an LSTM or GRU without Y, an
Attention without its presents, a dilated MaxPool without Indices. The results match ONNX Runtime's CPU run; the
planned DirectML call names only the outputs asked for."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from dmlcli.onnx_model import OnnxSession  # noqa: E402

F32 = TensorProto.FLOAT


def model_of(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10 if opset >= 23 else 8
    return model


def run_both(model, feeds):
    """dmlcli's outputs, ONNX Runtime's, and the DirectML outputs each DirectML call of the plan asked for."""
    session = OnnxSession(model)
    ours = session.run(feeds)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = dict(zip([o.name for o in reference.get_outputs()], reference.run(None, feeds)))
    asked = {step.node.op: tuple(info.name for info in step.last_verdict.call.outputs)
             for step in session.plan_for(feeds).steps if getattr(step, "last_verdict", None) is not None}
    return ours, theirs, asked


def assert_close(ours, theirs):
    assert ours.keys() == theirs.keys()
    for name, want in theirs.items():
        np.testing.assert_allclose(ours[name], want, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("op, outputs, asked", [
    ("LSTM", ["", "y_h"], ("OutputSingleTensor",)),
    ("LSTM", ["", "", "y_c"], ("OutputCellSingleTensor",)),
    ("LSTM", ["y", "", "y_c"], ("OutputSequenceTensor", "OutputCellSingleTensor")),
    ("GRU", ["", "y_h"], ("OutputSingleTensor",)),
    ("GRU", ["y"], ("OutputSequenceTensor",)),
])
def test_a_recurrent_node_asks_for_its_outputs_alone(op, outputs, asked):
    rng = np.random.default_rng(5)
    gates = 4 if op == "LSTM" else 3
    hidden, size = 6, 5
    w = rng.standard_normal((1, gates * hidden, size)).astype(np.float32) * 0.4
    r = rng.standard_normal((1, gates * hidden, hidden)).astype(np.float32) * 0.4
    node = helper.make_node(op, ["x", "w", "r"], outputs, hidden_size=hidden)
    shapes = {"y": [7, 1, 2, hidden], "y_h": [1, 2, hidden], "y_c": [1, 2, hidden]}
    model = model_of([node], [helper.make_tensor_value_info("x", F32, [7, 2, size])],
                     [helper.make_tensor_value_info(name, F32, shapes[name]) for name in outputs if name],
                     [numpy_helper.from_array(w, "w"), numpy_helper.from_array(r, "r")])
    feeds = {"x": rng.standard_normal((7, 2, size)).astype(np.float32)}
    ours, theirs, by_op = run_both(model, feeds)
    assert_close(ours, theirs)
    assert by_op[op] == asked


def test_an_attention_node_without_presents_asks_for_its_output_alone():
    rng = np.random.default_rng(6)
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=2)
    shape = [1, 5, 8]
    model = model_of([node], [helper.make_tensor_value_info(n, F32, shape) for n in "qkv"],
                     [helper.make_tensor_value_info("y", F32, shape)], opset=23)
    feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in "qkv"}
    ours, theirs, by_op = run_both(model, feeds)
    assert_close(ours, theirs)
    assert by_op["Attention"] == ("OutputTensor",)


@pytest.mark.parametrize("outputs, asked", [(["y"], ("OutputTensor",)),
                                            (["y", "indices"], ("OutputTensor", "OutputIndicesTensor"))])
def test_a_dilated_max_pool_asks_for_indices_only_where_the_node_has_them(outputs, asked):
    rng = np.random.default_rng(7)
    node = helper.make_node("MaxPool", ["x"], outputs, kernel_shape=[2, 2], dilations=[2, 2])
    out_shapes = {"y": (TensorProto.FLOAT, [1, 2, 4, 4]), "indices": (TensorProto.INT64, [1, 2, 4, 4])}
    model = model_of([node], [helper.make_tensor_value_info("x", F32, [1, 2, 6, 6])],
                     [helper.make_tensor_value_info(name, *out_shapes[name]) for name in outputs])
    feeds = {"x": rng.standard_normal((1, 2, 6, 6)).astype(np.float32)}
    ours, theirs, by_op = run_both(model, feeds)
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert np.array_equal(ours[name], theirs[name]), name
    assert by_op["MaxPool"] == asked
