"""ONNX Runtime's Level-2 fusions for its DirectML provider that make contrib nodes (dmlcli/onnx_model/fusions.py):
MatmulTransposeFusion, SkipLayerNormFusion, MatMulScaleFusion and MatMulActivationFusion, each on onnx.helper graphs
that meet and that miss its conditions; and the contrib nodes as the provider runs them (suite/onnx/adapters_contrib.py:
FusedMatMul one GEMM, SkipLayerNormalization ELEMENT_WISE_ADD then MEAN_VARIANCE_NORMALIZATION1, FusedMatMulActivation
GEMM then ACTIVATION_SOFTMAX1). Every fused run is compared node by node (each DirectML call of a composed node on its
own) with ONNX Runtime's CPU run of the unfused graph, each within its operator's tolerance (--compare ort), and its
outputs with a float64 NumPy reference within the models' rule. Where ONNX Runtime's CPU provider runs the same list
(all but MatMulActivationFusion, the DirectML provider's alone), the contrib nodes it makes are dmlcli's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import SHARED, SHARED_MISSING

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dmlcli.onnx_model.fusions as fusions  # noqa: E402
from dmlcli.errors import ValidationError  # noqa: E402
from dmlcli.onnx_model import OnnxSession  # noqa: E402
from dmlcli.onnx_model.compare import compare_with_ort  # noqa: E402
from dmlcli.onnx_model.steps import ComposedStep  # noqa: E402
from dmlcli.suite.onnx.table import CONTRIB_ENTRIES, TABLE  # noqa: E402
from test_onnx_models import model_of  # noqa: E402

MODELS = SHARED / "onnx_models"
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason=SHARED_MISSING)
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
RNG = np.random.default_rng(11)
# ONNX Runtime's CPU provider with the Level-2 list the DirectML provider runs: the CPU's own transformers off, and
# Level 1's TransposeOptimizer (and the node merges dmlcli leaves out) off, as dmlcli fuses the graph as it is given.
CPU_ONLY = ["GemmActivationFusion", "MatMulIntegerToFloatFusion", "DynamicQuantizeMatMulFusion",
            "ConvActivationFusion", "SimplifiedLayerNormFusion", "GatherSliceToSplitFusion", "GatherToSplitFusion",
            "GatherToSliceFusion", "FastGeluFusion", "BiasSoftmaxFusion", "BiasSkipLayerNormFusion",
            "TransposeOptimizer", "TransposeOptimizer_CPUExecutionProvider", "ReshapeFusion",
            "CommonSubexpressionElimination", "ConstantSharing"]


def constant(name, array, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(array, dtype), name)


def value(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def random(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def within_rule(got, want):
    want = np.asarray(want, np.float64)
    return np.allclose(got, want, rtol=1e-4, atol=1e-4 * max(np.abs(want).max(), 1e-30))


def fused_run(model, feeds):
    """The fused session, its outputs, and --compare ort's node-by-node comparison (which must match)."""
    session = OnnxSession(model)
    outputs, comparison = compare_with_ort(session, feeds)
    assert comparison.first_divergence is None, [
        (node.step.node.label, [(o.name, o.verdict, o.max_ulp) for o in node.outputs]) for node in comparison.diverging]
    return session, outputs, comparison


def contrib(session):
    """The session's contrib nodes: (op, the fusions it went through, inputs, attributes)."""
    return [(node.op, node.fusion, node.inputs, dict(node.attributes)) for node in session.nodes
            if node.domain == fusions.MS_DOMAIN]


def ort_contrib(model, tmp_path):
    """The com.microsoft nodes ONNX Runtime's CPU provider makes with the DirectML provider's Level-2 list: (op,
    inputs, attributes), a FusedMatMul's transposes written out (this ONNX Runtime writes them, 0 too, where the
    source MatMulScaleFusion cites writes alpha alone: the same node)."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "ort.onnx")
    onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"],
                                 disabled_optimizers=CPU_ONLY)
    optimised = onnx.load(str(tmp_path / "ort.onnx"))
    found = []
    for node in optimised.graph.node:
        if node.domain == fusions.MS_DOMAIN:
            attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if node.op_type == "FusedMatMul":
                attributes = {**dict.fromkeys(fusions.TRANSPOSE_ATTRIBUTES, 0), **attributes}
            found.append((node.op_type, tuple(node.input), attributes))
    return found


def written_out(attributes):
    """A FusedMatMul's attributes with the transposes it leaves out (0, the schema's default)."""
    return {**dict.fromkeys(fusions.TRANSPOSE_ATTRIBUTES, 0), **attributes}


def without_matmul_activation(monkeypatch):
    """dmlcli's list without MatMulActivationFusion: the one ONNX Runtime's CPU provider does not run."""
    monkeypatch.setattr(fusions, "LEVEL_2", tuple(p for p in fusions.LEVEL_2 if p[0] != fusions.MATMUL_ACTIVATION))


# ---------------------------------------------------------------- MatmulTransposeFusion


def transpose_model(perm, a_shape, b_shape, *, on="a", opset=17, extra_reader=False, transpose_is_output=False,
                    second_matmul=False):
    """MatMul(Transpose(a), b) (or of b's Transpose), with the options' extra readers and outputs."""
    transposed = "a" if on == "a" else "b"
    nodes = [helper.make_node("Transpose", [transposed], ["t"], perm=list(perm), name="transpose"),
             helper.make_node("MatMul", ["t", "b"] if on == "a" else ["a", "t"], ["y"], name="mm")]
    outputs = [value("y", None)]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["t"], ["n"]))
        outputs.append(value("n", None))
    if transpose_is_output:
        outputs.append(value("t", None))
    if second_matmul:
        nodes.append(helper.make_node("MatMul", ["t", "b"] if on == "a" else ["a", "t"], ["z"], name="mm2"))
        outputs.append(value("z", None))
    return model_of(nodes, [value("a", a_shape), value("b", b_shape)], outputs, opset=opset)


@pytest.mark.parametrize("perm, a_shape, b_shape, on, flags", [
    ((1, 0), (8, 4), (8, 3), "a", {"transA": 1}),
    ((0, 2, 1), (2, 8, 4), (2, 8, 3), "a", {"transA": 1}),
    ((1, 0), (4, 8), (3, 8), "b", {"transB": 1}),
    ((1, 0, 2), (4, 2, 8), (2, 8, 3), "a", {"transBatchA": 1}),  # [M, batch, K] read as [batch, M, K]
    ((1, 2, 0), (8, 2, 4), (2, 8, 3), "a", {"transA": 1, "transBatchA": 1}),  # [K, batch, M]
    ((1, 2, 0, 3), (4, 2, 3, 8), (2, 3, 8, 5), "a", {"transBatchA": 1}),
    ((0, 1, 3, 2), (2, 3, 4, 8), (2, 3, 5, 8), "b", {"transB": 1}),
])
def test_a_transpose_the_product_can_read_through_becomes_fused_matmul(perm, a_shape, b_shape, on, flags, tmp_path):
    model = transpose_model(perm, a_shape, b_shape, on=on)
    a, b = random(*a_shape), random(*b_shape)
    session, outputs, _ = fused_run(model, {"a": a, "b": b})
    expected = {"transA": 0, "transB": 0, "transBatchA": 0, "transBatchB": 0, "alpha": 1.0, **flags}
    assert contrib(session) == [("FusedMatMul", "MatmulTransposeFusion", ("a", "b"), expected)]
    assert [node.op for node in session.nodes] == ["FusedMatMul"]  # the Transpose went with its only reader
    step = session.plan_for({"a": a, "b": b}).steps[0]
    assert step.directml == "GEMM" and step.last_verdict.call.parameters["Alpha"] == 1.0
    x64, y64 = a.astype(np.float64), b.astype(np.float64)
    want = np.matmul(np.transpose(x64, perm), y64) if on == "a" else np.matmul(x64, np.transpose(y64, perm))
    assert outputs["y"].shape == want.shape and within_rule(outputs["y"], want)
    assert [(op, inputs) for op, inputs, _ in ort_contrib(model, tmp_path)] == [("FusedMatMul", ("a", "b"))]


@pytest.mark.parametrize("case", ["another reader", "a second product"])
def test_a_transpose_read_elsewhere_stays_while_the_product_reads_through_it(case):
    model = transpose_model((1, 0), (8, 4), (8, 3), extra_reader=case == "another reader",
                            second_matmul=case == "a second product")
    session, outputs, _ = fused_run(model, {"a": random(8, 4), "b": random(8, 3)})
    ops = [node.op for node in session.nodes]
    if case == "another reader":  # UpdateConsumerCount: the Neg still reads it
        assert ops == ["Transpose", "FusedMatMul", "Neg"]
    else:  # both products read through it: nothing reads it any more
        assert ops == ["FusedMatMul", "FusedMatMul"]
        assert [member.op for member in session.nodes[-1].fused] == ["Transpose", "MatMul"]


@pytest.mark.parametrize("case", ["graph output", "perm moves a batch axis", "last axis first", "opset 8 MatMul",
                                  "transBatch with other ranks", "int32"])
def test_a_transpose_is_left_where_a_condition_fails(case):
    model, feeds = {
        "graph output": lambda: (transpose_model((1, 0), (8, 4), (8, 3), transpose_is_output=True), None),
        "perm moves a batch axis": lambda: (transpose_model((1, 0, 2, 3), (2, 3, 4, 8), (3, 2, 8, 5)), None),
        "last axis first": lambda: (transpose_model((2, 0, 1), (8, 2, 4), (4, 2, 3)), None),
        "opset 8 MatMul": lambda: (transpose_model((1, 0), (8, 4), (8, 3), opset=8), None),  # MatMul-1: not in {9, 13}
        "transBatch with other ranks": lambda: (transpose_model((1, 0, 2), (4, 2, 8), (8, 3)), None),
        "int32": lambda: (model_of([helper.make_node("Transpose", ["a"], ["t"], perm=[1, 0]),
                                    helper.make_node("MatMul", ["t", "b"], ["y"])],
                                   [value("a", (8, 4), TensorProto.INT32), value("b", (8, 3), TensorProto.INT32)],
                                   [value("y", None, TensorProto.INT32)]), None),
    }[case]()
    session = OnnxSession(model)
    assert not any(node.fusion for node in session.nodes), case
    if case != "int32":  # (DirectML's GEMM takes no integers: nothing to run)
        shapes = {d.name: d.dims for d in session.model.inputs}
        fused_run(model, {name: random(*shape) for name, shape in shapes.items()})


def test_a_cast_between_the_transpose_and_the_product_is_moved_before_the_transpose():
    """ReorderCastAndTranspose: Transpose -> Cast -> MatMul becomes a Cast of the Transpose's input, read by the
    FusedMatMul through transA; where the Cast's output has another reader a new Transpose makes it for that one."""
    for other in (False, True):
        nodes = [helper.make_node("Transpose", ["a"], ["t"], perm=[1, 0], name="transpose"),
                 helper.make_node("Cast", ["t"], ["c"], to=F32, name="cast"),
                 helper.make_node("MatMul", ["c", "b"], ["y"], name="mm")]
        outputs = [value("y", None)]
        if other:
            nodes.append(helper.make_node("Neg", ["c"], ["n"]))
            outputs.append(value("n", None))
        model = model_of(nodes, [value("a", (8, 4), F16), value("b", (8, 3))], outputs)
        a, b = random(8, 4).astype(np.float16), random(8, 3)
        session, out, _ = fused_run(model, {"a": a, "b": b})
        ops = [(node.op, node.inputs, node.outputs) for node in session.nodes]
        assert ops[0] == ("Cast", ("a",), ("c_transformed",))
        assert ops[-1 if not other else -2][0] == "FusedMatMul"
        fused = next(node for node in session.nodes if node.op == "FusedMatMul")
        assert fused.inputs == ("c_transformed", "b") and fused.attributes["transA"] == 1
        assert (("Transpose", ("c_transformed",), ("c",)) in ops) is other
        want = np.matmul(a.astype(np.float64).T, b.astype(np.float64))
        assert within_rule(out["y"], want)


# ---------------------------------------------------------------- MatMulScaleFusion


def scale_model(*, before=None, after=None, scale=0.25, scale_shape=(), extra_reader=False, opset=17,
                divide_by_input=False):
    """MatMul(a * scale, b) (before="mul"/"div"), or MatMul(a, b) * scale (after="mul"/"div")."""
    nodes, a_name, y_name = [], "a", "y"
    if before:
        if divide_by_input:
            nodes.append(helper.make_node("Div", ["s", "a"], ["as"], name="scale"))
        else:
            nodes.append(helper.make_node("Mul" if before == "mul" else "Div", ["a", "s"], ["as"], name="scale"))
        a_name = "as"
    nodes.append(helper.make_node("MatMul", [a_name, "b"], ["m" if after else "y"], name="mm"))
    if after:
        nodes.append(helper.make_node("Mul" if after == "mul" else "Div", ["m", "s"], ["y"], name="scale"))
    outputs = [value("y", None)]
    if extra_reader:
        nodes.append(helper.make_node("Neg", [a_name if before else "m"], ["n"]))
        outputs.append(value("n", None))
    return model_of(nodes, [value("a", (4, 8)), value("b", (8, 3))], outputs,
                    [constant("s", np.full(scale_shape, scale))], opset=opset)


@pytest.mark.parametrize("before, after, alpha", [("mul", None, 0.25), ("div", None, 4.0), (None, "mul", 0.25),
                                                   (None, "div", 4.0)])
def test_a_scalar_scale_before_or_after_becomes_alpha(before, after, alpha, tmp_path):
    model = scale_model(before=before, after=after)
    a, b = random(4, 8), random(8, 3)
    session, outputs, _ = fused_run(model, {"a": a, "b": b})
    (op, fusion, inputs, attributes), = contrib(session)
    assert (op, fusion, inputs, attributes) == ("FusedMatMul", "MatMulScaleFusion", ("a", "b"), {"alpha": alpha})
    assert [node.op for node in session.nodes] == ["FusedMatMul"] and session.nodes[0].outputs == ("y",)
    assert session.plan_for({"a": a, "b": b}).steps[0].last_verdict.call.parameters["Alpha"] == np.float32(alpha)
    assert within_rule(outputs["y"], np.matmul(a.astype(np.float64), b.astype(np.float64)) * alpha)
    assert ort_contrib(model, tmp_path) == [("FusedMatMul", ("a", "b"), written_out({"alpha": alpha}))]


def test_scales_on_both_inputs_multiply_in_float32_as_onnx_runtime_does(tmp_path):
    """The attention's q * s and k * s (s = 1 / sqrt(sqrt(32)), folded from a Sqrt of a constant): alpha is
    float32(float32(1 * s) * s), the encoder's 0.1767767071723938."""
    nodes = [helper.make_node("Sqrt", ["d"], ["s"]), helper.make_node("Mul", ["a", "s"], ["as"]),
             helper.make_node("Mul", ["b", "s"], ["bs"]), helper.make_node("MatMul", ["as", "bs"], ["y"], name="mm")]
    root = np.float32(1) / np.sqrt(np.float32(math.sqrt(32)))
    model = model_of(nodes, [value("a", (2, 4, 8)), value("b", (2, 8, 4))], [value("y", None)],
                     [constant("d", [root * root])])
    session, outputs, _ = fused_run(model, {"a": random(2, 4, 8), "b": random(2, 8, 4)})
    scale = np.sqrt(np.float32(root * root))
    (_, _, inputs, attributes), = contrib(session)
    assert inputs == ("a", "b") and attributes["alpha"] == float(np.float32(np.float32(1) * scale) * scale)
    assert ort_contrib(model, tmp_path)[0][2]["alpha"] == pytest.approx(attributes["alpha"], rel=0, abs=0)


@pytest.mark.parametrize("case", ["vector", "rank above the other's", "dividend", "two readers after"])
def test_a_scale_is_left_where_a_condition_fails(case):
    model = {"vector": lambda: scale_model(before="mul", scale_shape=(8,)),
             "rank above the other's": lambda: scale_model(before="mul", scale_shape=(1, 1, 1)),
             "dividend": lambda: scale_model(before="div", divide_by_input=True),
             "two readers after": lambda: scale_model(after="mul", extra_reader=True)}[case]()
    session = OnnxSession(model)
    assert not any(node.fusion for node in session.nodes), case
    fused_run(model, {"a": random(4, 8) + 3, "b": random(8, 3)})


@pytest.mark.parametrize("opset", [7, 8, 9, 12, 13, 17, 23])
def test_the_scale_fusion_takes_matmul_9_and_13_of_every_opset(opset):
    """ProcessNode asks MatMul {9, 13}: opsets 7 and 8 have MatMul-1, whose MatMul and Mul stay."""
    model = scale_model(before="mul", opset=opset)
    a, b = random(4, 8), random(8, 3)
    session = OnnxSession(model)
    assert [node.op for node in session.nodes] == (["Mul", "MatMul"] if opset < 9 else ["FusedMatMul"])
    assert within_rule(session.run({"a": a, "b": b})["y"], np.matmul(a.astype(np.float64) * 0.25, b))


def test_a_scale_read_elsewhere_stays():
    """GetInputNodeMerges asks no single reader: the product reads the Mul's input, and the Mul stays for the Neg."""
    model = scale_model(before="mul", extra_reader=True)
    session, _, _ = fused_run(model, {"a": random(4, 8), "b": random(8, 3)})
    assert [node.op for node in session.nodes] == ["Mul", "FusedMatMul", "Neg"]


def test_scale_then_transpose_fuse_over_two_steps_as_onnx_runtime_does(tmp_path, monkeypatch):
    """MatMul(Transpose(a) * s, b): the Transpose is not the product's input until MatMulScaleFusion has taken the
    Mul; the list's second step fuses it (name and fusions "MatMulScaleFusion + MatmulTransposeFusion")."""
    nodes = [helper.make_node("Transpose", ["a"], ["t"], perm=[0, 2, 1]), helper.make_node("Mul", ["t", "s"], ["ts"]),
             helper.make_node("MatMul", ["ts", "b"], ["y"], name="mm")]
    model = model_of(nodes, [value("a", (2, 8, 4)), value("b", (2, 8, 3))], [value("y", None)],
                     [constant("s", 0.5)])
    without_matmul_activation(monkeypatch)
    session, outputs, _ = fused_run(model, {"a": random(2, 8, 4), "b": random(2, 8, 3)})
    assert contrib(session) == [("FusedMatMul", "MatMulScaleFusion + MatmulTransposeFusion", ("a", "b"),
                                 {"transA": 1, "transB": 0, "transBatchA": 0, "transBatchB": 0, "alpha": 0.5})]
    assert [(op, inputs) for op, inputs, _ in ort_contrib(model, tmp_path)] == [("FusedMatMul", ("a", "b"))]


# ---------------------------------------------------------------- SkipLayerNormFusion


def skip_model(form=3, *, skip_shape=(2, 5, 8), shape=(2, 5, 8), epsilon=1e-3, add_reader=False,
               bias_constant=True, statistics=False):
    """LayerNormalization(Add(x, skip)) (form 3), with a bias Add on x (form 1) or on skip (form 2)."""
    hidden = shape[-1]
    nodes, inputs = [], [value("x", shape), value("skip", skip_shape)]
    if form == 1:
        nodes += [helper.make_node("Add", ["x", "bias"], ["xb"]), helper.make_node("Add", ["xb", "skip"], ["sum"])]
    elif form == 2:
        nodes += [helper.make_node("Add", ["skip", "bias"], ["sb"]), helper.make_node("Add", ["x", "sb"], ["sum"])]
    else:
        nodes.append(helper.make_node("Add", ["x", "skip"], ["sum"]))
    attributes = {} if epsilon is None else {"epsilon": epsilon}
    nodes.append(helper.make_node("LayerNormalization", ["sum", "gamma", "beta"],
                                  ["y", "mean"] if statistics else ["y"], name="norm", **attributes))
    outputs = [value("y", None)] + ([value("mean", None)] if statistics else [])
    if add_reader:
        nodes.append(helper.make_node("Neg", ["sum"], ["n"]))
        outputs.append(value("n", None))
    initializers = [constant("gamma", 1 + random(hidden)), constant("beta", random(hidden))]
    if bias_constant:
        initializers.append(constant("bias", random(hidden)))
    else:
        inputs.append(value("bias", (hidden,)))
    return model_of(nodes, inputs, outputs, initializers)


def layer_norm64(x, gamma, beta, epsilon):
    x = np.asarray(x, np.float64)
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


@pytest.mark.parametrize("form, inputs, directml", [
    (3, ("x", "skip", "gamma", "beta"), "ADD then MEAN_VARIANCE_NORMALIZATION1"),
    (1, ("x", "skip", "gamma", "beta", "bias"), "ADD then ADD then MEAN_VARIANCE_NORMALIZATION1"),
    (2, ("x", "skip", "gamma", "beta", "bias"), "ADD then ADD then MEAN_VARIANCE_NORMALIZATION1")])
def test_add_and_layer_normalization_become_skip_layer_normalization(form, inputs, directml, tmp_path):
    model = skip_model(form)
    feeds = {"x": random(2, 5, 8), "skip": random(2, 5, 8)}
    session, outputs, comparison = fused_run(model, feeds)
    assert contrib(session) == [("SkipLayerNormalization", "SkipLayerNormFusion", inputs,
                                 {"epsilon": float(np.float32(1e-3))})]
    step = session.plan_for(feeds).steps[0]
    assert isinstance(step, ComposedStep) and step.directml == directml
    # Form 3's sum is the model's Add: compared bit for bit as ELEMENT_WISE_ADD; the other forms add in the
    # provider's order (x + skip, then the bias), a sum the model does not hold.
    compared = [output.name for output in comparison.nodes[0].outputs]
    assert compared == (["sum", "y"] if form == 3 else ["y"])
    constants = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    total = feeds["x"].astype(np.float64) + feeds["skip"] + (constants["bias"] if form != 3 else 0)
    want = layer_norm64(total, constants["gamma"], constants["beta"], np.float32(1e-3))
    assert within_rule(outputs["y"], want)
    assert [(op, inputs) for op, inputs, _ in ort_contrib(model, tmp_path)] == [("SkipLayerNormalization", inputs)]


def test_a_layer_normalization_without_epsilon_takes_the_contrib_default():
    """The fusion writes kDefaultSkipLayerNormEpsilon (1e-12) where the LayerNormalization has none (ONNX's
    default there is 1e-5): the provider then runs with 1e-12."""
    session = OnnxSession(skip_model(epsilon=None))
    assert contrib(session)[0][3] == {"epsilon": float(np.float32(1e-12))}
    parts = session.plan_for({"x": random(2, 5, 8), "skip": random(2, 5, 8)}).steps[0].parts
    assert parts[-1].last_verdict.call.parameters["Epsilon"] == np.float32(1e-12)


@pytest.mark.parametrize("case", ["skip broadcast", "2-D", "sum read twice"])
def test_an_add_is_left_where_a_condition_fails(case):
    model = {"skip broadcast": lambda: skip_model(skip_shape=(1, 5, 8)),
             "2-D": lambda: skip_model(shape=(5, 8), skip_shape=(5, 8)),
             "sum read twice": lambda: skip_model(add_reader=True)}[case]()
    session = OnnxSession(model)
    assert not any(node.fusion for node in session.nodes), case
    fused_run(model, {d.name: random(*d.dims) for d in session.model.inputs})


def test_a_bias_that_is_not_constant_leaves_the_bias_add():
    """CheckSecondAdd asks a constant bias: form 3 takes the outer Add alone."""
    session = OnnxSession(skip_model(1, bias_constant=False))
    assert [node.op for node in session.nodes] == ["Add", "SkipLayerNormalization"]
    assert session.nodes[1].inputs == ("xb", "skip", "gamma", "beta")


def test_a_layer_normalization_whose_mean_is_asked_is_fused_and_refused_as_the_provider_refuses_it():
    session = OnnxSession(skip_model(statistics=True))
    assert [node.op for node in session.nodes] == ["SkipLayerNormalization"]
    with pytest.raises(ValidationError, match="mean or inv_std_var output is asked for; ONNX Runtime's DirectML"):
        session.run({"x": random(2, 5, 8), "skip": random(2, 5, 8)})
    # --fallback cpu runs the model's own nodes the fused node stands for on ONNX Runtime's CPU provider.
    model = skip_model(statistics=True)
    feeds = {"x": random(2, 5, 8), "skip": random(2, 5, 8)}
    session = OnnxSession(model, fallback="cpu")
    outputs = session.run(feeds)
    (node, reason), = session.fallbacks(feeds)
    assert node.op == "SkipLayerNormalization" and "mean or inv_std_var" in reason
    total = feeds["x"].astype(np.float64) + feeds["skip"]
    constants = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    assert within_rule(outputs["y"], layer_norm64(total, constants["gamma"], constants["beta"], np.float32(1e-3)))
    assert within_rule(outputs["mean"], total.mean(-1, keepdims=True))


def test_a_fused_node_dmlcli_refuses_falls_back_as_the_models_own_nodes():
    """A fused Gelu at feature level 5_0 (ACTIVATION_GELU came in 5_1): --fallback cpu runs the Div, Erf, Add and Muls
    it stands for (with their constants) on ONNX Runtime's CPU provider, which has no opset of com.microsoft to read
    the Gelu by."""
    nodes = [helper.make_node("Div", ["x", "c_div"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "c_one"], ["p"]), helper.make_node("Mul", ["x", "p"], ["h"]),
             helper.make_node("Mul", ["h", "c_half"], ["y"])]
    model = model_of(nodes, [value("x", (3, 5))], [value("y", None)],
                     [constant(name, number) for name, number in (("c_div", math.sqrt(2)), ("c_one", 1.0),
                                                                  ("c_half", 0.5))])
    session = OnnxSession(model, fallback="cpu", feature_level="5_0")
    x = random(3, 5)
    y = session.run({"x": x})["y"]
    (node, reason), = session.fallbacks({"x": x})
    assert node.op == "Gelu" and "5_1" in reason
    x64 = x.astype(np.float64)
    assert within_rule(y, 0.5 * x64 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2))))


# ---------------------------------------------------------------- MatMulActivationFusion


def attention_model(*, softmax_opset=13, axis=-1, extra_reader=False):
    """Softmax((q * s) @ k): MatMulScaleFusion's FusedMatMul, then the Softmax reading it."""
    nodes = [helper.make_node("Mul", ["q", "s"], ["qs"]), helper.make_node("MatMul", ["qs", "k"], ["scores"], name="mm"),
             helper.make_node("Softmax", ["scores"], ["p"], axis=axis)]
    outputs = [value("p", None)]
    if extra_reader:
        nodes.append(helper.make_node("Neg", ["scores"], ["n"]))
        outputs.append(value("n", None))
    return model_of(nodes, [value("q", (2, 3, 6, 8)), value("k", (2, 3, 8, 6))], outputs, [constant("s", 0.125)],
                    opset=softmax_opset)


def softmax64(x, axis):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_fused_matmul_and_softmax_become_fused_matmul_activation():
    q, k = random(2, 3, 6, 8), random(2, 3, 8, 6)
    session, outputs, comparison = fused_run(attention_model(), {"q": q, "k": k})
    assert contrib(session) == [("FusedMatMulActivation", "MatMulScaleFusion + MatMulActivationFusion", ("q", "k"),
                                 {"alpha": 0.125, "activation": "Softmax", "activation_axis": -1})]
    step = session.plan_for({"q": q, "k": k}).steps[0]
    assert step.directml == "GEMM then SOFTMAX1"
    # The GEMM's product is the model's MatMul output: each call compared with ONNX Runtime's own tensor.
    assert [output.name for output in comparison.nodes[0].outputs] == ["scores", "p"]
    want = softmax64(np.matmul(q.astype(np.float64) * 0.125, k), -1)
    assert within_rule(outputs["p"], want)


def test_a_product_read_twice_keeps_its_softmax():
    session, _, _ = fused_run(attention_model(extra_reader=True), {"q": random(2, 3, 6, 8), "k": random(2, 3, 8, 6)})
    assert [node.op for node in session.nodes] == ["FusedMatMul", "Softmax", "Neg"]


def test_an_opset_11_softmax_is_fused_over_its_one_axis_as_the_provider_computes_it():
    """Softmax-11 normalises over every axis from `axis` on; the provider's fused ACTIVATION_SOFTMAX1 takes
    activation_axis alone (TryGetGraphFusedActivationDesc): dmlcli runs the provider's, and --compare ort says where
    it parts from ONNX Runtime's CPU."""
    q, k = random(2, 3, 6, 8), random(2, 3, 8, 6)
    session = OnnxSession(attention_model(softmax_opset=11, axis=2))
    assert contrib(session)[0][3]["activation_axis"] == 2
    got = session.run({"q": q, "k": k})["p"]
    assert within_rule(got, softmax64(np.matmul(q.astype(np.float64) * 0.125, k), 2))
    _, comparison = compare_with_ort(session, {"q": q, "k": k})
    assert comparison.first_divergence is not None and comparison.first_divergence.outputs[-1].name == "p"


# ---------------------------------------------------------------- the table, --no-fusions, the shared encoder


def test_the_contrib_entries_name_the_directml_calls_and_stay_out_of_onnxs_names():
    from dmlcli.operators import find_operator

    for entry in CONTRIB_ENTRIES:
        assert entry.onnx_op not in TABLE
        if entry.directml is None:
            assert entry.composed is not None and "DirectML" in entry.reason and entry.adapter is None
        else:
            assert find_operator(entry.directml).key == entry.directml and entry.adapter is not None
        assert all("DirectML" in condition.reason for condition in entry.cannot)


@pytest.mark.parametrize("op, inputs, attributes, outputs, words", [
    ("SkipLayerNormalization", ((2, 3, 4, 8), (2, 3, 4, 8), (8,), (8,)), {}, ("y",), "neither 2-D nor 3-D"),
    ("SkipLayerNormalization", ((2, 5, 8), (1, 5, 8), (8,), (8,)), {}, ("y",),
     "reads skip at input's Sizes (ELEMENT_WISE_ADD of two {batch, sequence, hidden, 1} tensors)"),
    ("SkipLayerNormalization", ((2, 5, 8), (2, 5, 8), (5, 8), (8,)), {}, ("y",), "reads each as {1, 1, hidden, 1}"),
    ("SkipLayerNormalization", ((2, 5, 8), (2, 5, 8), (8,), (8,)), {}, ("y", "", "inv"), "inv_std_var"),
    ("FusedMatMul", ((4, 2, 8), (8, 3)), {"transBatchA": 1}, ("y",), "requires one rank above 2"),
    ("FusedMatMulActivation", ((2, 4, 8), (2, 8, 3)), {"activation": "Relu"}, ("y",), "not Relu"),
])
def test_a_contrib_call_the_provider_refuses_says_why(op, inputs, attributes, outputs, words):
    from dmlcli.suite.onnx.adapters import OnnxCall
    from dmlcli.suite.onnx.mapping import cannot_reason
    from dmlcli.suite.onnx.table import CONTRIB

    call = OnnxCall(op, tuple(random(*shape) for shape in inputs), attributes, len(outputs), outputs)
    reason = cannot_reason(CONTRIB[op], call)
    assert reason is not None and words in reason and "DirectML" in reason


def test_no_fusions_runs_the_models_own_nodes():
    model = attention_model()
    feeds = {"q": random(2, 3, 6, 8), "k": random(2, 3, 8, 6)}
    plain = OnnxSession(model, fusions=False)
    assert [node.op for node in plain.nodes] == ["Mul", "MatMul", "Softmax"] and not contrib(plain)
    assert within_rule(plain.run(feeds)["p"], OnnxSession(model).run(feeds)["p"])


@needs_models
def test_the_shared_encoder_fuses_as_the_providers_list_does_and_matches_onnx_runtime(tmp_path, monkeypatch):
    data = np.load(MODELS / "encoder_small.npz")
    session, outputs, comparison = fused_run(MODELS / "encoder_small.onnx", {"input": data["input"]})
    found = [(op, fusion) for op, fusion, _, _ in contrib(session)]
    assert found.count(("SkipLayerNormalization", "SkipLayerNormFusion")) == 4
    assert found.count(("FusedMatMulActivation", "MatMulScaleFusion + MatMulActivationFusion")) == 2
    assert [a for op, _, _, a in contrib(session) if op == "FusedMatMulActivation"][0]["alpha"] == 0.1767767071723938
    assert within_rule(outputs["output"], data["output"])
    # Without MatMulActivationFusion, ONNX Runtime's CPU provider (the same list, TransposeOptimizer off) makes
    # the same contrib nodes on the same activations (gamma and beta are Identity outputs here, which its Level 1
    # removes, reading their sources).
    without_matmul_activation(monkeypatch)
    ours = [(op, inputs[:2]) for op, _, inputs, _ in contrib(OnnxSession(MODELS / "encoder_small.onnx"))]
    theirs = [(op, inputs[:2]) for op, inputs, _ in ort_contrib(onnx.load(MODELS / "encoder_small.onnx"), tmp_path)]
    assert ours == theirs
