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


def _bits(outputs: dict) -> dict:
    return {name: (array.dtype.str, array.shape, array.tobytes()) for name, array in outputs.items()}


@needs_models
@pytest.mark.parametrize("name", ["squeezenet1_1", "encoder_small"])
def test_the_shared_models_replay_a_cuda_graph_with_the_eager_runs_bits(name):
    data = np.load(MODELS / f"{name}.npz")
    session = OnnxSession(str(MODELS / f"{name}.onnx"), backend="gpu")
    eager = OnnxSession(str(MODELS / f"{name}.onnx"), backend="gpu", cuda_graphs=False)
    rng = np.random.default_rng(3)
    other = data["input"].copy()
    if other.dtype.kind == "f":
        other = (other + rng.standard_normal(other.shape).astype(other.dtype)).astype(other.dtype)
    else:
        other = rng.integers(0, 1000, other.shape).astype(other.dtype)
    assert session.graph_state({"input": data["input"]}) == "not captured yet"
    calls = [data["input"], data["input"], data["input"], other, data["input"], other]
    for call in calls:
        got = session.run({"input": call})
        assert _bits(got) == _bits(eager.run({"input": call}))
    assert session.graph_state({"input": data["input"]}) == "replayed"
    assert eager.graph_state({"input": data["input"]}) == "eager: CUDA graphs are off"


def test_a_plan_that_reads_a_device_value_on_the_host_runs_eagerly_saying_why():
    # RoiAlign reads its boxes on the host (pooling/entries.py): its run cannot be captured, and stays eager.
    x = np.random.default_rng(5).standard_normal((1, 2, 8, 8)).astype(np.float32)
    rois = np.array([[0, 0, 4, 4], [1, 1, 7, 6]], np.float32)
    nodes = [helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=2, output_width=2,
                              sampling_ratio=2)]
    graph = helper.make_graph(nodes, "roi", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8]),
                                             helper.make_tensor_value_info("rois", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.zeros(2, np.int64), "batch")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    session = OnnxSession(model, backend="gpu")
    feeds = {"x": x, "rois": rois}
    results = [session.run(feeds)["y"] for _ in range(4)]
    state = session.graph_state(feeds)
    assert state.startswith("eager: ") and state != "eager: CUDA graphs are off", state
    cpu = dmlcli.run_onnx(model, feeds)["y"]
    for result in results:
        assert np.allclose(result, cpu, rtol=1e-5, atol=1e-6)
    # Other boxes, the same Sizes: read again, not baked into a graph.
    other = {"x": x, "rois": np.array([[2, 2, 8, 8], [0, 0, 3, 3]], np.float32)}
    assert np.allclose(session.run(other)["y"], dmlcli.run_onnx(model, other)["y"], rtol=1e-5, atol=1e-6)


def test_a_graphs_outputs_are_the_callers_own():
    # An output that is a constant, one that is the input, and one computed: a caller's writes to what one call
    # returned never reach the next call's (the replayed graph's device arrays stay the graph's).
    nodes = [helper.make_node("Identity", ["c"], ["k"]), helper.make_node("Identity", ["x"], ["same"]),
             helper.make_node("Add", ["x", "c"], ["sum"])]
    graph = helper.make_graph(nodes, "own", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("k", "same", "sum")],
                              initializer=[numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")])
    session = OnnxSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), backend="gpu")
    x = np.ones(4, np.float32)
    for _ in range(4):
        got = session.run({"x": x})
        assert got["k"].tolist() == [0, 1, 2, 3] and got["same"].tolist() == [1] * 4 and got["sum"].tolist() == [1, 2, 3, 4]
        for array in got.values():
            if array.flags.writeable:  # a constant output is the session's own, read-only
                array[...] = -7
