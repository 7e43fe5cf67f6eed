"""`dmlcli onnx --backend gpu`: whole ONNX models on the GPU backend, every tensor kept on the device between
nodes and the weights copied over once per session. Results agree with the CPU backend's and with PyTorch's
within the models' tolerance (rtol 1e-4, atol 1e-4 x the largest magnitude). They need CuPy and a CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest

import dmlcli

cupy = pytest.importorskip("cupy")
onnx = pytest.importorskip("onnx")
pytestmark = pytest.mark.usefixtures("gpu_usable")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from dmlcli.onnx_model import OnnxSession  # noqa: E402
from test_onnx_models import MODELS, needs_models, within_model_tolerance  # noqa: E402 - tests/ is on the path


@needs_models
@pytest.mark.parametrize("name", ["squeezenet1_1", "encoder_small"])
def test_the_shared_models_match_pytorch_and_the_cpu_on_the_gpu(name):
    data = np.load(MODELS / f"{name}.npz")
    session = OnnxSession(str(MODELS / f"{name}.onnx"), backend="gpu")
    on_gpu = session.run({"input": data["input"]})["output"]
    assert isinstance(on_gpu, np.ndarray) and on_gpu.dtype == np.float32
    assert within_model_tolerance(on_gpu, data["output"])
    on_cpu = dmlcli.run_onnx(str(MODELS / f"{name}.onnx"), {"input": data["input"]})["output"]
    assert within_model_tolerance(on_gpu, on_cpu)
    # The weights went to the device once: a second run copies no constant again.
    copied = len(session.executor._device)
    session.run({"input": data["input"]})
    assert copied > 0 and len(session.executor._device) == copied


def test_a_graph_of_plumbing_and_element_wise_nodes_gives_the_cpus_result_on_the_gpu():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Transpose", ["m"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Erf", ["t"], ["e"]), helper.make_node("Softmax", ["e"], ["s"], axis=-1),
             helper.make_node("Greater", ["s", "half"], ["g"]), helper.make_node("Where", ["g", "s", "half"], ["y"]),
             helper.make_node("Shape", ["y"], ["shape"]), helper.make_node("Cast", ["shape"], ["sizes"], to=1)]
    graph = helper.make_graph(nodes, "gpu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("sizes", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"),
                                           numpy_helper.from_array(np.array(0.125, np.float32), "half")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    gpu = dmlcli.run_onnx(model, {"x": x}, backend="gpu")
    cpu = dmlcli.run_onnx(model, {"x": x})
    assert gpu["sizes"].tolist() == cpu["sizes"].tolist() == [3, 2, 8]
    assert np.allclose(gpu["y"], cpu["y"], rtol=1e-5, atol=1e-6)


@needs_models
def test_compare_runs_on_the_gpu_backend():
    pytest.importorskip("onnxruntime")
    from dmlcli.onnx_model.compare import compare_with_ort

    data = np.load(MODELS / "encoder_small.npz")
    session = OnnxSession(str(MODELS / "encoder_small.onnx"), backend="gpu")
    outputs, comparison = compare_with_ort(session, {"input": data["input"]})
    assert comparison.first_divergence is None, comparison.first_divergence.to_json()
    assert within_model_tolerance(outputs["output"], data["output"])
