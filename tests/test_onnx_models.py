"""`dmlcli onnx` and dmlcli.run_onnx: whole ONNX models on DirectML's operators (dmlcli/onnx_model/).

The shared models (../shared/onnx_models: SqueezeNet 1.1 and a 2-layer Transformer encoder, with PyTorch's own
output) must match within rtol 1e-4 and atol 1e-4 x the output's largest magnitude. Small models are built here
with onnx.helper: each graph's result is checked against a NumPy reference written in the test (float64), the
plumbing (Shape, Reshape, Gather on shapes, ...) against what ONNX Runtime folds, and the refusals, fallbacks,
inputs, outputs, reports and opsets through the API and the command line.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli

from conftest import SHARED, SHARED_MISSING

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from dmlcli.onnx_model import OnnxSession  # noqa: E402

MODELS = SHARED / "onnx_models"
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason=SHARED_MISSING)
F32 = TensorProto.FLOAT


def model_of(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def tensor(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def value(name, elem=F32, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def within_model_tolerance(got, want):
    want = np.asarray(want, np.float64)
    return np.allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


# ---------------------------------------------------------------- the shared models


@needs_models
@pytest.mark.parametrize("name", ["squeezenet1_1", "encoder_small"])
def test_the_shared_models_match_pytorch(name):
    data = np.load(MODELS / f"{name}.npz")
    outputs = dmlcli.run_onnx(str(MODELS / f"{name}.onnx"), {"input": data["input"]})
    assert outputs["output"].dtype == np.float32 and outputs["output"].shape == data["output"].shape
    assert within_model_tolerance(outputs["output"], data["output"])


@needs_models
def test_the_command_line_checks_a_shared_model(tmp_path):
    model, data = MODELS / "encoder_small.onnx", MODELS / "encoder_small.npz"
    result = CliRunner().invoke(cli, ["onnx", str(model), "--input", str(data), "--check", str(data),
                                      "-o", str(tmp_path / "out.npz"), "--report", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("output: PASSED")
    assert np.load(tmp_path / "out.npz")["output"].shape == (1, 16, 1000)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["check"]["output"]["verdict"] == "PASSED" and report["fallbacks"] == []
    assert report["backend"] == "cpu" and report["feature_level"] == "DML_FEATURE_LEVEL_6_4"


@needs_models
def test_the_encoders_plumbing_is_folded_or_viewed_and_its_transposes_are_strided_identities():
    data = np.load(MODELS / "encoder_small.npz")
    session = OnnxSession(str(MODELS / "encoder_small.onnx"), fusions=False)  # the model's own nodes
    steps = session.plan_for({"input": data["input"]}).steps
    kinds = {}
    for step in steps:
        kinds.setdefault(step.node.op, set()).add(step.directml)
    for op in ("Shape", "Constant", "Cast", "Sqrt", "Slice", "Concat", "Mod"):  # shape arithmetic: ORT folds it
        assert kinds[op] == {"(folded)"}, op
    for op in ("Reshape", "Squeeze", "Unsqueeze"):  # views of the activations (Reshape folds on constants too)
        assert "(none: a view)" in kinds[op], op
    assert kinds["Transpose"] == {"IDENTITY"} and kinds["MatMul"] == {"GEMM"} and kinds["Erf"] == {"ERF"}
    assert kinds["LayerNormalization"] == {"MEAN_VARIANCE_NORMALIZATION1"} and kinds["Softmax"] == {"SOFTMAX1"}
    fused = {step.node.op: step.directml for step in OnnxSession(str(MODELS / "encoder_small.onnx")).plan_for(
        {"input": data["input"]}).steps if step.node.fusion}  # ONNX Runtime's fusions (tests/test_onnx_fusions.py)
    assert fused == {"Gemm": "GEMM", "Gelu": "GELU", "SkipLayerNormalization": "ADD then MEAN_VARIANCE_NORMALIZATION1",
                     "FusedMatMulActivation": "GEMM then SOFTMAX1"}


# ---------------------------------------------------------------- graphs built here, against NumPy


def _erf(x):
    return np.vectorize(math.erf)(x)


def test_a_transformer_block_built_with_helper_matches_a_float64_reference():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    c = rng.standard_normal(8).astype(np.float32)
    scale, bias = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    y5 = rng.standard_normal((1, 2, 1, 8, 5)).astype(np.float32)
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "last"], ["width"], axis=0),  # a Gather on shapes: folded
        helper.make_node("Cast", ["width"], ["width_f"], to=F32),
        helper.make_node("Sqrt", ["width_f"], ["root"]),
        helper.make_node("Concat", ["minus_one", "width"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["x", "flat_shape"], ["rows"]),  # a view
        helper.make_node("Gemm", ["rows", "w", "c"], ["projected"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Reshape", ["projected", "shape"], ["back"]),
        helper.make_node("LayerNormalization", ["back", "scale", "bias"], ["normed"], axis=-1, epsilon=1e-5),
        helper.make_node("Div", ["normed", "root"], ["scaled"]),
        helper.make_node("Erf", ["scaled"], ["erf"]),
        helper.make_node("Pow", ["erf", "two"], ["squared"]),
        helper.make_node("Softmax", ["squared"], ["soft"], axis=1),
        helper.make_node("Transpose", ["soft"], ["swapped"], perm=[0, 2, 1, 3]),
        helper.make_node("Unsqueeze", ["swapped", "zero"], ["five"]),
        helper.make_node("MatMul", ["five", "y5"], ["product"]),  # rank 5, batch broadcast
        helper.make_node("Greater", ["product", "zero_f"], ["positive"]),
        helper.make_node("Expand", ["zero_f", "product_shape"], ["zeros"]),
        helper.make_node("Where", ["positive", "product", "zeros"], ["relu"]),
        helper.make_node("Flatten", ["relu"], ["flat"], axis=2),
        helper.make_node("Identity", ["flat"], ["y"]),
    ]
    constants = [tensor("last", np.array([-1], np.int64)), tensor("minus_one", np.array([-1], np.int64)),
                 tensor("w", w), tensor("c", c), tensor("scale", scale), tensor("bias", bias),
                 tensor("two", np.array(2.0, np.float32)), tensor("zero", np.array([0], np.int64)),
                 tensor("y5", y5), tensor("zero_f", np.array(0.0, np.float32)),
                 tensor("product_shape", np.array([1, 2, 4, 3, 5], np.int64))]
    model = model_of(nodes, [value("x", F32, [2, 3, 4, 8])], [value("y")], constants)
    got = dmlcli.run_onnx(model, {"x": x})["y"]

    # The same arithmetic in float64.
    x64 = x.astype(np.float64)
    projected = 0.5 * x64.reshape(-1, 8) @ w.T.astype(np.float64) + 2.0 * c
    back = projected.reshape(x.shape)
    normed = (back - back.mean(-1, keepdims=True)) / np.sqrt(back.var(-1, keepdims=True) + 1e-5) * scale + bias
    squared = _erf(normed / math.sqrt(8)) ** 2
    soft = np.exp(squared - squared.max(1, keepdims=True))
    soft /= soft.sum(1, keepdims=True)
    product = np.matmul(np.transpose(soft, (0, 2, 1, 3))[None], y5.astype(np.float64))
    want = np.where(product > 0, product, 0).reshape(2, -1)
    assert got.shape == want.shape == (2, 60) and got.dtype == np.float32
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [7, 11, 13, 17, 23])
def test_opsets_7_to_23_read_their_own_attributes_and_inputs(opset):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    axes_as_input = opset >= 13
    unsqueeze = helper.make_node("Unsqueeze", ["x", "axes"] if axes_as_input else ["x"], ["u"],
                                 **({} if axes_as_input else {"axes": [0]}))
    squeeze = helper.make_node("Squeeze", ["u", "axes"] if axes_as_input else ["u"], ["s"],
                               **({} if axes_as_input else {"axes": [0]}))
    # Softmax before 13 normalises every axis from `axis` on together; from 13, the one axis.
    softmax = helper.make_node("Softmax", ["s"], ["soft"], axis=1)
    clip = (helper.make_node("Clip", ["soft", "low", "high"], ["y"]) if opset >= 11
            else helper.make_node("Clip", ["soft"], ["y"], min=0.05, max=0.5))
    constants = [tensor("axes", np.array([0], np.int64))] if axes_as_input else []
    if opset >= 11:
        constants += [tensor("low", np.array(0.05, np.float32)), tensor("high", np.array(0.5, np.float32))]
    model = model_of([unsqueeze, squeeze, softmax, clip], [value("x", F32, [2, 3, 4])], [value("y")], constants,
                     opset=opset)
    got = dmlcli.run_onnx(model, {"x": x})["y"]
    axes = (1,) if opset >= 13 else (1, 2)
    e = np.exp(x.astype(np.float64) - x.max(axis=axes, keepdims=True))
    want = np.clip(e / e.sum(axis=axes, keepdims=True), 0.05, 0.5)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset, node, constants", [
    (7, helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 1, 0], value=2.5), []),
    (7, helper.make_node("Slice", ["x"], ["y"], starts=[1], ends=[3], axes=[1]), []),
    (7, helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 2.0], mode="nearest"), []),
    (9, helper.make_node("Upsample", ["x", "scales"], ["y"], mode="linear"), [("scales", np.float32([1, 2]))]),
    (10, helper.make_node("Resize", ["x", "scales"], ["y"], mode="nearest"), [("scales", np.float32([2, 1]))]),
    (9, helper.make_node("TopK", ["x"], ["y", "i"], k=2), []),
    (10, helper.make_node("TopK", ["x", "k"], ["y", "i"]), [("k", np.int64([2]))]),
])
def test_older_opsets_read_their_attributes_as_onnx_runtime_does(opset, node, constants):
    onnxruntime = pytest.importorskip("onnxruntime")
    x = np.float32([[1, 4, 2, 8], [5, 3, 7, 6]])
    outputs = [value(name, TensorProto.UNDEFINED) for name in node.output]  # typed by shape inference
    model = model_of([node], [value("x", F32, [2, 4])], outputs, [tensor(n, v) for n, v in constants], opset=opset)
    model = onnx.shape_inference.infer_shapes(model)
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = dmlcli.run_onnx(model, {"x": x})
    for name, expected in zip(node.output, want):
        assert got[name].dtype == expected.dtype and np.array_equal(got[name], expected), (name, got[name], expected)


def test_an_opset_outside_7_to_23_is_refused_saying_which_run():
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [value("x", F32, [2])], [value("y")], opset=6)
    with pytest.raises(dmlcli.InputError, match="opset 6; dmlcli onnx runs opsets 7 to 23"):
        dmlcli.run_onnx(model, {"x": np.ones(2, np.float32)})


def _cast_model():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT8, name="cast")]
    return model_of(nodes, [value("x", F32, [4])], [value("y", TensorProto.UINT8), value("r")])


def test_bool_outputs_keep_onnx_type_and_uint8_casts_saturate_as_directml_does():
    nodes = [helper.make_node("Less", ["x", "zero"], ["negative"]), helper.make_node("Not", ["negative"], ["y"])]
    model = model_of(nodes, [value("x", F32, [3])], [value("y", TensorProto.BOOL)],
                     [tensor("zero", np.array(0.0, np.float32))])
    assert dmlcli.run_onnx(model, {"x": np.float32([-1, 0, 2])})["y"].tolist() == [False, True, True]
    # DirectML's CAST converts as Direct3D does: out-of-range values saturate (ONNX Runtime's CPU wraps them).
    out = dmlcli.run_onnx(_cast_model(), {"x": np.float32([-1.5, 300, 2.7, np.nan])})
    assert out["y"].tolist() == [0, 255, 2, 0]


# ---------------------------------------------------------------- refusals and the CPU fallback


def _cubic_model():
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic")
    return model_of([node], [value("x", F32, [1, 1, 2, 2])], [value("y")],
                    [tensor("scales", np.float32([1, 1, 2, 2]))])


def test_a_node_directml_cannot_run_is_named_with_the_reason_exit_3():
    with pytest.raises(dmlcli.ValidationError) as refused:
        dmlcli.run_onnx(_cubic_model(), {"x": np.ones((1, 1, 2, 2), np.float32)})
    message = str(refused.value)
    assert "node #0 (Resize)" in message and "mode cubic has no DirectML counterpart" in message
    assert "--fallback cpu" in message and refused.value.exit_code == 3


def test_an_operator_outside_the_table_is_refused_and_the_fallback_runs_it_on_onnx_runtime():
    pytest.importorskip("onnxruntime")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Det", ["r"], ["y"], name="determinant")]
    model = model_of(nodes, [value("x", F32, [2, 2])], [value("y")])
    x = np.float32([[3, 1], [2, 4]])
    with pytest.raises(dmlcli.ValidationError, match="'determinant' \\(Det\\): ONNX operator Det has no entry"):
        dmlcli.run_onnx(model, {"x": x})
    session = OnnxSession(model, fallback="cpu")
    assert np.isclose(session.run({"x": x})["y"], 10.0)
    assert [(node.op, "no entry" in reason) for node, reason in session.fallbacks({"x": x})] == [("Det", True)]
    result = CliRunner().invoke(cli, ["onnx", str(_saved(model)), "--input", "x=[[3, 1], [2, 4]]",
                                      "--fallback", "cpu"])
    assert result.exit_code == 0, result.output
    assert "fallback: node 'determinant' (Det) ran on ONNX Runtime's CPU provider" in result.output


def _saved(model, folder=None) -> Path:
    import tempfile

    path = Path(folder or tempfile.mkdtemp()) / "model.onnx"
    onnx.save(model, str(path))
    return path


def test_a_call_a_lower_feature_level_refuses_names_the_lowest_level_that_takes_it():
    model = model_of([helper.make_node("Gelu", ["x"], ["y"])], [value("x", F32, [3])], [value("y")], opset=20)
    x = np.float32([-1, 0, 1])
    got = dmlcli.run_onnx(model, {"x": x})["y"]
    assert np.allclose(got, 0.5 * x * (1 + _erf(x / math.sqrt(2))), atol=2e-3)
    with pytest.raises(dmlcli.ValidationError, match="GELU.*supported from DML_FEATURE_LEVEL_5_1"):
        dmlcli.run_onnx(model, {"x": x}, feature_level="4_0")


# ---------------------------------------------------------------- inputs


@pytest.mark.parametrize("inputs, words", [
    ({}, "needs input x (float [2, 3]), which is not given"),
    ({"x": np.ones((2, 3), np.float32), "z": np.ones(1, np.float32)}, "has no input 'z' (its inputs: x (float [2, 3]))"),
    ({"x": np.ones((2, 3), np.float64)}, "input x (float [2, 3]) is given as float64 [2, 3]"),
    ({"x": np.ones((3, 2), np.float32)}, "input x (float [2, 3]) is given as float32 [3, 2]"),
])
def test_missing_or_mistyped_inputs_get_the_declared_names_types_and_shapes(inputs, words):
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [value("x", F32, [2, 3])], [value("y")])
    with pytest.raises(dmlcli.InputError) as wrong:
        dmlcli.run_onnx(model, inputs)
    assert words in str(wrong.value) and wrong.value.exit_code == 2


def test_the_command_line_reads_inputs_by_name_bare_and_from_npz(tmp_path):
    model = model_of([helper.make_node("Add", ["a", "b"], ["y"])],
                     [value("a", F32, [2]), value("b", F32, ["n"])], [value("y")])
    path = _saved(model, tmp_path)
    np.savez(tmp_path / "in.npz", a=np.float32([1, 2]), b=np.float32([10, 20]), other=np.float32([0]))
    runner = CliRunner()
    by_name = runner.invoke(cli, ["onnx", str(path), "-i", "a=[1, 2]", "-i", "b=[10, 20]"])
    assert by_name.exit_code == 0, by_name.output
    assert "11.0" in by_name.output and "y · DML_FEATURE_LEVEL_6_4 · cpu · float32 · shape [2]" in by_name.output
    from_npz = runner.invoke(cli, ["onnx", str(path), "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path)])
    assert from_npz.exit_code == 0, from_npz.output
    assert np.load(tmp_path / "y.npy").tolist() == [11, 22]
    unknown = runner.invoke(cli, ["onnx", str(path), "-i", "c=[1]"])
    assert unknown.exit_code == 2 and "has no input 'c' (its inputs: a, b)" in unknown.output
    one = runner.invoke(cli, ["onnx", str(path), "-i", "[1, 2]"])
    assert one.exit_code == 2 and "give NAME=FILE; the model has 2 inputs (a, b)" in one.output


def test_an_unwritable_output_is_refused_before_the_model_runs(tmp_path):
    path = _saved(model_of([helper.make_node("Relu", ["x"], ["y"])], [value("x", F32, [1])], [value("y")]), tmp_path)
    for target in (str(tmp_path / "missing" / "out.npz"), str(tmp_path / "no_such_folder")):
        result = CliRunner().invoke(cli, ["onnx", str(path), "-i", "[1]", "-o", target])
        assert result.exit_code == 2 and "dmlcli: error: -o" in result.output and "Traceback" not in result.output
    not_a_model = tmp_path / "x.onnx"
    not_a_model.write_bytes(b"\x00garbage")
    result = CliRunner().invoke(cli, ["onnx", str(not_a_model), "-i", "[1]"])
    assert result.exit_code == 2 and "is not an ONNX model" in result.output


@pytest.mark.parametrize("node, inputs, given, words", [
    (helper.make_node("Reshape", ["x", "s"], ["y"], name="flatten"),
     [value("x", F32, [2, 2]), value("s", TensorProto.INT64, [2])],
     ["x=[[1, 2], [3, 4]]", "s=[3, 1]"], "node 'flatten' (Reshape): ONNX Reshape: ONNX's Reshape shape [3, 1] holds 3 "
                                         "elements, the input 4"),
    (helper.make_node("Resize", ["x", "", "s"], ["y"], name="up"),
     [value("x", F32, [1, 1, 2, 2]), value("s", F32, [4])],
     ["x=[[[[1, 2], [3, 4]]]]", "s=[1, 1, NaN, 2]"], "node 'up' (Resize): ONNX Resize: ONNX's Resize scale for axis 2 "
                                                     "is nan, where a finite number is needed"),
    (helper.make_node("Slice", ["x", "s", "e", "a"], ["y"], name="crop"),
     [value("x", F32, [2, 2]), *(value(name, TensorProto.INT64, [2]) for name in "sea")],
     ["x=[[1, 2], [3, 4]]", "s=[0, 0]", "e=[1, 1]", "a=[0, -2]"],
     "node 'crop' (Slice): ONNX Slice: ONNX's Slice axes [0, -2] name an axis more than once"),
    (helper.make_node("TopK", ["x", "k"], ["y", "i"], name="best"), [value("x", F32, [2, 2]),
                                                                     value("k", TensorProto.INT64, [1])],
     ["x=[[1, 2], [3, 4]]", "k=[3]"], "node 'best' (TopK): ONNX TopK: ONNX's TopK k 3 is larger than axis 1's 2 "
                                      "elements"),
])
def test_a_runtime_value_that_makes_a_nodes_call_malformed_exits_2_naming_the_node(tmp_path, node, inputs, given,
                                                                                     words):
    """A graph input that a view or an adapter reads (a Reshape's shape, a Resize's scales, a Slice's axes, TopK's
    k) and no ONNX call can hold: the node's error in one line (exit 2), never an internal error."""
    path = _saved(model_of([node], inputs, [value(name) for name in node.output]), tmp_path)
    arguments = ["onnx", str(path), *[part for item in given for part in ("-i", item)], "-o", str(tmp_path / "o.npz")]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert words in result.output and not (tmp_path / "o.npz").exists()


def test_a_refused_node_exits_3_on_the_command_line(tmp_path):
    path = _saved(_cubic_model(), tmp_path)
    result = CliRunner().invoke(cli, ["onnx", str(path), "-i", "[[[[1, 2], [3, 4]]]]", "-o", str(tmp_path / "o.npz")])
    assert result.exit_code == 3 and result.output.count("\n") == 1
    assert "mode cubic" in result.output and not (tmp_path / "o.npz").exists()


# ---------------------------------------------------------------- --compare ort


def test_compare_finds_the_node_that_diverges_from_onnx_runtime(tmp_path):
    pytest.importorskip("onnxruntime")
    path = _saved(_cast_model(), tmp_path)
    report = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["onnx", str(path), "-i", "[-1.5, 300, 2.7, 1]", "--compare", "ort",
                                      "--report", str(report)])
    assert result.exit_code == 1, result.output
    assert "DIVERGES: 1 of 2 nodes; the first is node 'cast' (Cast) on CAST" in result.output
    rows = {line.split()[1]: line.split() for line in result.output.splitlines() if line[:1].isdigit()}
    assert rows["relu"][2:4] == ["Relu", "RELU"] and rows["relu"][-1] == "matches"
    assert rows["cast"][2:] == ["Cast", "CAST", "255", "255", "DIVERGES"]
    document = json.loads(report.read_text())
    assert document["compare"]["first_divergence"] == "node 'cast' (Cast)"
    cast = document["compare"]["nodes"][1]
    assert cast["directml"] == "CAST" and cast["outputs"][0]["max_abs_error"] == 255


@needs_models
def test_compare_finds_every_node_of_squeezenet_within_its_tolerance():
    pytest.importorskip("onnxruntime")
    from dmlcli.onnx_model.compare import compare_with_ort

    data = np.load(MODELS / "squeezenet1_1.npz")
    session = OnnxSession(str(MODELS / "squeezenet1_1.onnx"))
    seen = []
    outputs, comparison = compare_with_ort(session, {"input": data["input"]}, progress=lambda d, t: seen.append((d, t)))
    # Every node matches within its operator's rule: a convolution's outputs that cancel to near zero, where
    # ONNX Runtime's own rounding is many ULP of the small result, pass within the call's sum bound.
    assert not comparison.diverging, [node.to_json() for node in comparison.diverging]
    assert any(output.rule.bound is not None for node in comparison.nodes for output in node.outputs)
    assert seen[-1] == (len(session.nodes), len(session.nodes))
    convolutions = [node for node in comparison.nodes if node.step.node.op == "Conv"]
    assert len(convolutions) == 26 and any(node.max_ulp > 0 for node in convolutions)  # measured, not copied
    assert within_model_tolerance(outputs["output"], data["output"])


# ---------------------------------------------------------------- external data, memory-mapped


def test_external_weights_are_memory_mapped_not_copied(tmp_path):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((512, 1024)).astype(np.float32)  # 2 MiB of weights, held in model.bin
    model = model_of([helper.make_node("MatMul", ["x", "w"], ["y"])], [value("x", F32, [2, 512])], [value("y")],
                     [tensor("w", w)])
    onnx.save_model(model, str(tmp_path / "model.onnx"), save_as_external_data=True, location="model.bin",
                    size_threshold=1024)
    session = OnnxSession(str(tmp_path / "model.onnx"))
    held = session.model.constants["w"]
    assert isinstance(held, np.memmap) and not held.flags.writeable and session.model.mapped == {"w"}
    x = rng.standard_normal((2, 512)).astype(np.float32)
    assert np.allclose(session.run({"x": x})["y"], x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    assert isinstance(session.model.constants["w"], np.memmap)  # still the map: nothing replaced it with a copy
    pytest.importorskip("onnxruntime")
    from dmlcli.onnx_model.compare import compare_with_ort

    _, comparison = compare_with_ort(session, {"x": x})  # ONNX Runtime reads the weights from the same map
    assert [node.verdict for node in comparison.nodes] == ["matches"]


def test_external_data_outside_the_models_folder_is_refused(tmp_path):
    inner = tmp_path / "model"
    inner.mkdir()
    model = model_of([helper.make_node("Relu", ["w"], ["y"])], [], [value("y")],
                     [tensor("w", np.ones(512, np.float32))])
    onnx.save_model(model, str(tmp_path / "outside.onnx"), save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    proto = onnx.load(str(tmp_path / "outside.onnx"), load_external_data=False)
    proto.graph.initializer[0].external_data[0].value = "../w.bin"
    onnx.save(proto, str(inner / "m.onnx"))
    with pytest.raises(dmlcli.InputError, match="lies outside the model's folder"):
        OnnxSession(str(inner / "m.onnx"))


def test_a_session_plans_once_and_reuses_its_plan():
    model = model_of([helper.make_node("Relu", ["x"], ["y"])], [value("x", F32, ["n"])], [value("y")])
    session = OnnxSession(model)
    for size in (3, 3, 5):
        assert session.run({"x": -np.ones(size, np.float32)})["y"].tolist() == [0.0] * size
    assert len(session._plans) == 2


def test_without_the_onnx_package_the_command_says_how_to_install_it(tmp_path, monkeypatch):
    path = _saved(model_of([helper.make_node("Relu", ["x"], ["y"])], [value("x", F32, [1])], [value("y")]), tmp_path)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    result = CliRunner().invoke(cli, ["onnx", str(path), "-i", "[1]"])
    assert result.exit_code == 4
    assert result.output == ("dmlcli: error: dmlcli onnx needs the onnx package, which is not installed: "
                             "pip install 'dmlcli[onnx]'\n")


def test_compare_without_onnx_runtime_says_how_to_install_it(tmp_path, monkeypatch):
    path = _saved(_cast_model(), tmp_path)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    result = CliRunner().invoke(cli, ["onnx", str(path), "-i", "[1, 2, 3, 4]", "--compare", "ort"])
    assert result.exit_code == 4 and "--compare ort needs ONNX Runtime" in result.output


def test_a_scalar_keeps_no_dimension_on_its_way_to_the_device():
    """The GPU executor copies host arrays in C order without numpy.ascontiguousarray's one dimension for a 0-D
    array (a Gather's scalar index kept an axis ONNX drops on the GPU)."""
    from dmlcli.onnx_model.executors import c_ordered

    assert c_ordered(np.array(3, np.int64)).shape == ()
    strided = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    assert c_ordered(strided).flags.c_contiguous and np.array_equal(c_ordered(strided), strided)
