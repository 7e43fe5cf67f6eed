"""The contrib nodes ONNX Runtime's DirectML fusions make (FusedMatMul with transBatch, SkipLayerNormalization with a
bias, FusedMatMulActivation) on the GPU backend: the same calls as the CPU's (transposing views, several DirectML
calls for one node), within the models' rule of the CPU's results, replayed as a CUDA graph from the third call (no
host read of a device value). They need CuPy and a CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
onnx = pytest.importorskip("onnx")
pytestmark = pytest.mark.usefixtures("gpu_usable")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from dmlcli.onnx_model import OnnxSession  # noqa: E402
from test_onnx_models import within_model_tolerance  # noqa: E402 - tests/ is on the path

F32 = TensorProto.FLOAT


def _attention_block():
    """x [S, B, H] -> q, k, v heads through transposes -> Softmax((q * s) @ k^T) @ v -> a residual Add with a bias
    Add -> LayerNormalization: MatMulScaleFusion, MatMulActivationFusion, MatmulTransposeFusion (transBatch) and
    SkipLayerNormFusion (form 1) all apply."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),  # [B, S, H]
             helper.make_node("Mul", ["xt", "s"], ["q"]),
             helper.make_node("Transpose", ["xt"], ["kt"], perm=[0, 2, 1]),  # [B, H, S]
             helper.make_node("MatMul", ["q", "kt"], ["scores"]),
             helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
             helper.make_node("Transpose", ["x"], ["v"], perm=[1, 0, 2]),
             helper.make_node("MatMul", ["p", "v"], ["o"]),
             helper.make_node("Add", ["o", "bias"], ["ob"]), helper.make_node("Add", ["ob", "xt"], ["sum"]),
             helper.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["y"], epsilon=1e-5)]
    initializers = [numpy_helper.from_array(np.array(0.25, np.float32), "s")] + [
        numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), name) for name in ("bias", "gamma", "beta")]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", F32, [6, 2, 16])],
                              [helper.make_tensor_value_info("y", F32, None)], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, {"x": rng.standard_normal((6, 2, 16)).astype(np.float32)}


def test_the_contrib_nodes_give_the_cpus_results_on_the_gpu_and_replay_as_a_graph():
    model, feeds = _attention_block()
    cpu = OnnxSession(model)
    assert {node.op for node in cpu.nodes if node.fusion} >= {"FusedMatMulActivation", "FusedMatMul",
                                                              "SkipLayerNormalization"}
    want = cpu.run(feeds)["y"]
    gpu = OnnxSession(model, backend="gpu")
    for _ in range(3):
        got = gpu.run(feeds)["y"]
        assert within_model_tolerance(got, want)
    assert gpu.graph_state(feeds) == "replayed"
    assert within_model_tolerance(gpu.run(feeds)["y"], want)
