"""The graph fusions ONNX Runtime applies for its DirectML provider (dmlcli/onnx_model/fusions.py): each pattern
matched and not matched at the edges of its conditions, on onnx.helper graphs, with the fused run's outputs within
the model rule (rtol 1e-4, atol 1e-4 x max|output|) of the unfused run and of a float64 NumPy reference; the shared
models' node counts before and after; --compare ort's report on a fused model.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from dmlcli.cli import cli

from conftest import SHARED, SHARED_MISSING

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from dmlcli.onnx_model import OnnxSession  # noqa: E402
from test_onnx_models import model_of  # noqa: E402

MODELS = SHARED / "onnx_models"
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason=SHARED_MISSING)
F32 = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def constant(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def value(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, list(shape))


def within_rule(got, want):
    want = np.asarray(want, np.float64)
    return np.allclose(got, want, rtol=1e-4, atol=1e-4 * max(np.abs(want).max(), 1e-30))


def fused_and_plain(model, feeds):
    """The fused session's nodes and outputs, and the unfused run's outputs."""
    fused = OnnxSession(model)
    plain = OnnxSession(model, fusions=False)
    return fused, fused.run(feeds), plain.run(feeds)


def fusions_of(session):
    return [node.fusion for node in session.nodes if node.fusion]


def gelu64(x):
    x = np.asarray(x, np.float64)
    return 0.5 * x * np.array([math.erfc(-v / math.sqrt(2)) for v in x.ravel()]).reshape(x.shape)


# ---------------------------------------------------------------- MatMulAddFusion


def matmul_add_model(a_shape, b_shape, bias_shape, *, extra_reader=False, matmul_is_output=False):
    k, n = b_shape[-2], b_shape[-1]
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "bias"], ["y"], name="add")]
    outputs = [value("y", [None] * len(a_shape))]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["m"], ["r"]))
        outputs.append(value("r", [None] * len(a_shape)))
    if matmul_is_output:
        outputs.append(value("m", [None] * len(a_shape)))
    initializers = [constant("b", RNG.standard_normal(b_shape)), constant("bias", RNG.standard_normal(bias_shape))]
    del k, n
    return model_of(nodes, [value("a", a_shape)], outputs, initializers)


@pytest.mark.parametrize("a_shape, bias_shape", [((4, 8), (3,)), ((4, 8), (1, 3)), ((4, 8), (4, 1)),
                                                 ((4, 8), (4, 3)), ((2, 4, 8), (3,)), ((8,), (3,))])
def test_matmul_add_fuses_into_gemm(a_shape, bias_shape):
    model = matmul_add_model(a_shape, (8, 3), bias_shape)
    a = RNG.standard_normal(a_shape).astype(np.float32)
    session, fused, plain = fused_and_plain(model, {"a": a})
    assert fusions_of(session) == ["MatMulAddFusion"]
    assert [node.op for node in session.nodes] == ["Gemm"]
    b = numpy_helper.to_array(model.graph.initializer[0]).astype(np.float64)
    bias = numpy_helper.to_array(model.graph.initializer[1]).astype(np.float64)
    want = np.matmul(a.astype(np.float64), b) + bias
    assert fused["y"].shape == want.shape == plain["y"].shape
    assert within_rule(fused["y"], want) and within_rule(fused["y"], plain["y"])


@pytest.mark.parametrize("case", ["second reader", "graph output", "bias of rank 2 with a 3-D A", "B of rank 3",
                                  "bias of the wrong length"])
def test_matmul_add_left_where_its_conditions_fail(case):
    a_shape, b_shape, bias_shape, options = {
        "second reader": ((4, 8), (8, 3), (3,), {"extra_reader": True}),
        "graph output": ((4, 8), (8, 3), (3,), {"matmul_is_output": True}),
        "bias of rank 2 with a 3-D A": ((2, 4, 8), (8, 3), (1, 3), {}),
        "B of rank 3": ((2, 4, 8), (2, 8, 3), (3,), {}),
        "bias of the wrong length": ((4, 8), (8, 3), (1,), {}),
    }[case]
    model = matmul_add_model(a_shape, b_shape, bias_shape, **options)
    session, fused, plain = fused_and_plain(model, {"a": RNG.standard_normal(a_shape).astype(np.float32)})
    assert "MatMulAddFusion" not in fusions_of(session)
    assert [node.op for node in session.nodes][:2] == ["MatMul", "Add"]
    assert np.array_equal(fused["y"], plain["y"])


def test_matmul_add_left_for_an_attention_projection_input():
    """IsAttentionProjectionInput: A made by Reshape(Transpose(MatMul(Softmax(...)))) keeps its MatMul and Add."""
    nodes = [helper.make_node("Softmax", ["s"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"]),
             helper.make_node("Transpose", ["o"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["y"])]
    initializers = [constant("v", RNG.standard_normal((2, 4, 8))), numpy_helper.from_array(
        np.array([4, 2, 8], np.int64), "shape"), constant("w", RNG.standard_normal((8, 3))),
        constant("bias", RNG.standard_normal(3))]
    model = model_of(nodes, [value("s", (2, 4, 4))], [value("y", (4, 2, 3))], initializers)
    session, fused, plain = fused_and_plain(model, {"s": RNG.standard_normal((2, 4, 4)).astype(np.float32)})
    assert "MatMulAddFusion" not in fusions_of(session)
    assert np.array_equal(fused["y"], plain["y"])


# ---------------------------------------------------------------- GeluFusion


def gelu_model(*, pattern=2, divisor=math.sqrt(2), one=1.0, half=0.5, erf_read_twice=False):
    nodes = [helper.make_node("Div", ["x", "c_div"], ["d"], name="div"), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "c_one"], ["p"])]
    if pattern == 1:
        nodes += [helper.make_node("Mul", ["x", "c_half"], ["h"]), helper.make_node("Mul", ["h", "p"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "p"], ["h"]), helper.make_node("Mul", ["h", "c_half"], ["y"])]
    outputs = [value("y", (3, 5))]
    if erf_read_twice:
        nodes.append(helper.make_node("Neg", ["e"], ["n"]))
        outputs.append(value("n", (3, 5)))
    initializers = [constant("c_div", divisor), constant("c_one", one), constant("c_half", half)]
    return model_of(nodes, [value("x", (3, 5))], outputs, initializers)


@pytest.mark.parametrize("pattern", [1, 2])
@pytest.mark.parametrize("divisor", [math.sqrt(2), 1.4142099618911743])
def test_gelu_pattern_fuses(pattern, divisor):
    x = (RNG.standard_normal((3, 5)) * 3).astype(np.float32)
    x[0, :3] = [0.0, -8.0, 8.0]
    session, fused, plain = fused_and_plain(gelu_model(pattern=pattern, divisor=divisor), {"x": x})
    assert fusions_of(session) == ["GeluFusion"]
    node = session.nodes[0]
    assert (node.op, node.domain) == ("Gelu", "com.microsoft")
    assert session.plan_for({"x": x}).steps[0].directml == "GELU"
    assert within_rule(fused["y"], gelu64(x)) and within_rule(fused["y"], plain["y"])


@pytest.mark.parametrize("case", ["divisor 1.5", "addend 2", "factor 0.25", "Erf read twice"])
def test_gelu_left_where_its_conditions_fail(case):
    options = {"divisor 1.5": {"divisor": 1.5}, "addend 2": {"one": 2.0}, "factor 0.25": {"half": 0.25},
               "Erf read twice": {"erf_read_twice": True}}[case]
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    session, fused, plain = fused_and_plain(gelu_model(**options), {"x": x})
    assert "GeluFusion" not in fusions_of(session)
    assert np.array_equal(fused["y"], plain["y"])


def test_gelu_divisor_within_ort_tolerance_fuses():
    """IsInitializerWithExpectedValue's rtol 1e-5: a divisor 1e-6 away from sqrt(2) still counts."""
    session, _, _ = fused_and_plain(gelu_model(divisor=math.sqrt(2) + 1e-6), {"x": np.ones((3, 5), np.float32)})
    assert fusions_of(session) == ["GeluFusion"]


# ---------------------------------------------------------------- the DirectML provider's activation fusion


def conv_model(activation="Relu", *, read_twice=False, attributes=None, extra_inputs=()):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node(activation, ["c", *extra_inputs], ["y"], name="act", **(attributes or {}))]
    outputs = [value("y", (1, 4, 5, 5))]
    if read_twice:
        nodes.append(helper.make_node("Neg", ["c"], ["n"]))
        outputs.append(value("n", (1, 4, 5, 5)))
    initializers = [constant("w", RNG.standard_normal((4, 3, 3, 3))), constant("b", RNG.standard_normal(4)),
                    constant("slope", np.full((4, 1, 1), 0.1))]
    return model_of(nodes, [value("x", (1, 3, 5, 5))], outputs, initializers)


@pytest.mark.parametrize("activation, attributes, directml", [
    ("Relu", {}, "CONVOLUTION + RELU"),
    ("LeakyRelu", {"alpha": 0.2}, "CONVOLUTION + LEAKY_RELU"),
    ("Sigmoid", {}, "CONVOLUTION + SIGMOID")])
def test_activation_fuses_into_conv(activation, attributes, directml):
    x = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    session, fused, plain = fused_and_plain(conv_model(activation, attributes=attributes), {"x": x})
    assert fusions_of(session) == ["DmlOperatorFusion"]
    assert session.plan_for({"x": x}).steps[0].directml == directml
    assert within_rule(fused["y"], plain["y"])


@pytest.mark.parametrize("case", ["conv read twice", "PRelu (two inputs)", "Gelu (not in c_activationOps)"])
def test_activation_left_where_its_conditions_fail(case):
    model = {"conv read twice": lambda: conv_model(read_twice=True),
             "PRelu (two inputs)": lambda: conv_model("PRelu", extra_inputs=("slope",)),
             "Gelu (not in c_activationOps)": lambda: conv_model("Gelu", attributes={})}[case]
    if case.startswith("Gelu"):
        built = model()
        built.opset_import[0].version = 20
        model = lambda: built  # noqa: E731
    session, fused, plain = fused_and_plain(model(), {"x": RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)})
    assert fusions_of(session) == []
    assert np.array_equal(fused["y"], plain["y"])


def test_gemm_of_matmul_add_takes_the_activation_only_where_a_is_2d():
    """A 2-D MatMul + Add + Relu becomes one GEMM with a fused RELU; with a 3-D A, ONNX Runtime's Reshape sits
    between the Gemm and the Relu, so the Relu stays its own node."""
    for a_shape, fused_relu in (((4, 8), True), ((2, 4, 8), False)):
        nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "bias"], ["s"]),
                 helper.make_node("Relu", ["s"], ["y"])]
        model = model_of(nodes, [value("a", a_shape)], [value("y", [None] * len(a_shape))],
                         [constant("b", RNG.standard_normal((8, 3))), constant("bias", RNG.standard_normal(3))])
        a = RNG.standard_normal(a_shape).astype(np.float32)
        session, fused, plain = fused_and_plain(model, {"a": a})
        steps = session.plan_for({"a": a}).steps
        assert [step.directml for step in steps] == (["GEMM + RELU"] if fused_relu
                                                     else ["GEMM", "RELU"])
        assert within_rule(fused["y"], plain["y"])


def test_constant_inputs_fold_through_the_fused_nodes():
    """A fused group that reads only constants is folded (ONNX Runtime folds before it fuses)."""
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Add", ["m", "bias"], ["s"]),
             helper.make_node("Add", ["s", "x"], ["y"])]
    model = model_of(nodes, [value("x", (4, 3))], [value("y", (4, 3))],
                     [constant("a", RNG.standard_normal((4, 8))), constant("b", RNG.standard_normal((8, 3))),
                      constant("bias", RNG.standard_normal(3))])
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    session, fused, plain = fused_and_plain(model, {"x": x})
    assert [step.kind for step in session.plan_for({"x": x}).steps] == ["folded", "directml"]
    assert within_rule(fused["y"], plain["y"])


# ---------------------------------------------------------------- the shared models


@needs_models
@pytest.mark.parametrize("name, before, after, fusions", [
    ("encoder_small", 187, 156, {"MatMulAddFusion": 7, "GeluFusion": 2, "SkipLayerNormFusion": 4,
                                 "MatMulScaleFusion + MatMulActivationFusion": 2}),
    ("squeezenet1_1", 83, 57, {"DmlOperatorFusion": 26})])
def test_shared_models_fused_node_counts_and_outputs(name, before, after, fusions):
    data = np.load(MODELS / f"{name}.npz")
    session = OnnxSession(MODELS / f"{name}.onnx")
    assert len(session.model_nodes) == before and len(session.nodes) == after
    found = {}
    for fusion in fusions_of(session):
        found[fusion] = found.get(fusion, 0) + 1
    assert found == fusions
    output = session.run({"input": data["input"]})["output"]
    assert within_rule(output, data["output"])  # PyTorch's own output, the rule


# ---------------------------------------------------------------- --compare ort and --no-fusions


def test_compare_ort_lists_fused_nodes_and_matches(tmp_path):
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "bias"], ["s"], name="add"),
             helper.make_node("Div", ["s", "c_div"], ["d"], name="div"), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "c_one"], ["p"]), helper.make_node("Mul", ["s", "p"], ["h"]),
             helper.make_node("Mul", ["h", "c_half"], ["y"])]
    model = model_of(nodes, [value("a", (2, 4, 8))], [value("y", (2, 4, 3))],
                     [constant("b", RNG.standard_normal((8, 3))), constant("bias", RNG.standard_normal(3)),
                      constant("c_div", math.sqrt(2)), constant("c_one", 1.0), constant("c_half", 0.5)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "a.npy", RNG.standard_normal((2, 4, 8)).astype(np.float32))
    report = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["onnx", str(path), "--input", f"a={tmp_path / 'a.npy'}", "--compare", "ort",
                                      "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert "MATCHES: all 2 nodes" in result.output
    assert "(fused: MatMulAddFusion)" in result.output and "(fused: GeluFusion)" in result.output
    document = json.loads(report.read_text())["compare"]
    assert document["verdict"] == "MATCHES"
    assert [node["fusion"] for node in document["nodes"]] == ["MatMulAddFusion", "GeluFusion"]
    assert {entry["name"] for entry in document["fused_tensors"]} == {"m", "d", "e", "p", "h"}
    assert [output["name"] for node in document["nodes"] for output in node["outputs"]] == ["s", "y"]

    plain = CliRunner().invoke(cli, ["onnx", str(path), "--input", f"a={tmp_path / 'a.npy'}", "--compare", "ort",
                                     "--no-fusions"])
    assert plain.exit_code == 0, plain.output
    assert "MATCHES: all 7 nodes" in plain.output and "fused" not in plain.output


def test_run_onnx_fusions_off_keeps_the_nodes():
    import dmlcli

    model = gelu_model()
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    assert within_rule(dmlcli.run_onnx(model, {"x": x}, fusions=False)["y"], gelu64(x))
    assert within_rule(dmlcli.run_onnx(model, {"x": x})["y"], gelu64(x))
