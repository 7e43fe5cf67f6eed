"""The graph fusions ONNX Runtime applies to a model its DirectML provider runs, so that dmlcli runs the nodes the
provider runs (fewer, bigger DirectML calls). Each fusion is one function with its conditions as ONNX Runtime
states them (microsoft/onnxruntime; the file and the condition are cited at each check):

- MatMulAddFusion (optimizer/matmul_add_fusion.cc; graph_transformer_utils.cc runs it at Level 1 for every
  provider): MatMul followed by its only consumer Add of a bias -> Gemm. An A of another rank than 2 is reshaped
  to [M, K] and the result back (ONNX Runtime inserts two Reshape nodes; here the Gemm's adapter makes the same
  views, table.py's Gemm of rank N);
- GeluFusion (optimizer/gelu_fusion.cc; Level 2 for cpu_acl_cuda_dml_rocm_eps, which holds kDmlExecutionProvider):
  x * 0.5 * (1 + Erf(x / sqrt 2)) in either of its two orders -> com.microsoft Gelu, which the provider runs as
  DML_OPERATOR_ACTIVATION_GELU (table.py's Gelu);
- DmlOperatorFusion (providers/dml/DmlExecutionProvider/src/GraphTransformer.cpp, PerformOperatorFusion, with
  Operators/OperatorUtility.cpp's FusionHelpers lists c_fusableOps and c_activationOps): an activation that is the
  only consumer of a Conv, ConvTranspose, BatchNormalization, InstanceNormalization, MeanVarianceNormalization,
  Gemm or MatMul becomes that operator's FusedActivation.

ONNX Runtime folds constants (Level 1's ConstantFolding) before it fuses, so a Constant node's value counts as an
initializer here; a Constant node that only the fused nodes read goes with them. The fusions run once per session
(as ONNX Runtime's run once per InferenceSession), on the Sizes shape inference gives for the model's declared
inputs: where those are symbolic, a condition that needs a Size is not met, as in ONNX Runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from .graph import Inferred, Node, inferred_tensors
from .loading import DEFAULT_DOMAINS, LoadedModel, require_onnx

MATMUL_ADD, GELU, ACTIVATION = "MatMulAddFusion", "GeluFusion", "DmlOperatorFusion"
FLOAT, FLOAT16, DOUBLE, BFLOAT16 = 1, 10, 11, 16  # ONNX's TensorProto element types
MS_DOMAIN = "com.microsoft"
# IsInitializerWithExpectedValue (optimizer/utils.cc): |value - expected| <= atol + rtol * |expected|.
EXPECTED_ATOL, EXPECTED_RTOL = 1e-8, 1e-5
# gelu_fusion.cc: the divisor is sqrt(2), or the rounding some BERT models use.
SQRT2_VALUES = (float(np.sqrt(2.0)), 1.4142099618911743)

# OperatorUtility.cpp (commit 82cbf92e), FusionHelpers::c_fusableOps: ONNX operator -> the since-versions that fuse
# (OnnxOperatorSetN::sc_sinceVer_X is X's since-version as of opset N). Add and Sum fuse only Relu and LeakyRelu
# into DirectML's ELEMENT_WISE_ADD1, which dmlcli's table does not map Add onto: they are left out here (the
# values are the same unfused).
FUSABLE = {"Conv": (1, 11), "ConvTranspose": (1, 11), "BatchNormalization": (7, 9, 14, 15),
           "InstanceNormalization": (6,), "MeanVarianceNormalization": (1, 9, 13), "Gemm": (7, 9, 11, 13),
           "MatMul": (1, 9, 13)}
# FusionHelpers::c_activationOps: the activations that fuse, by since-version. PRelu is listed but has two inputs,
# which PerformOperatorFusion refuses; ScaledTanh and ParametricSoftplus are no ONNX operators of opsets 7 to 23;
# Dropout fuses as no activation (TryGetFusedActivationDesc returns none for it).
ACTIVATIONS = {"Sigmoid": (6, 13), "HardSigmoid": (6,), "Tanh": (6, 13), "Relu": (6, 13, 14), "LeakyRelu": (6, 16),
               "PRelu": (7, 9, 16), "ThresholdedRelu": (1, 10), "Elu": (6,), "Selu": (6,), "Softsign": (1,),
               "Softplus": (1,), "Dropout": (7,)}


@dataclass(frozen=True)
class FusionGraph:
    """What the fusions read besides the nodes: constant values, types and Sizes, the graph's outputs."""

    constants: Mapping[str, np.ndarray]  # initializers and Constant nodes' values
    types: Mapping[str, Inferred]
    graph_outputs: frozenset[str]
    opset: int

    def shape(self, name: str) -> tuple[int, ...] | None:
        if name in self.constants:
            return tuple(np.shape(self.constants[name]))
        found = self.types.get(name)
        return None if found is None else found.shape

    def elem_type(self, name: str) -> int | None:
        if name in self.types:
            return self.types[name].elem_type
        if name in self.constants:
            onnx = require_onnx()
            try:
                return onnx.helper.np_dtype_to_tensor_dtype(np.asarray(self.constants[name]).dtype)
            except (KeyError, TypeError, ValueError):
                return None
        return None

    def is_scalar_constant(self, name: str, expected: Sequence[float]) -> bool:
        """IsInitializerWithExpectedValue: a constant whose shape is [] or [1] (IsScalar), a floating-point value
        within atol 1e-8 + rtol 1e-5 of one of `expected`."""
        if name not in self.constants:
            return False
        value = np.asarray(self.constants[name])
        if value.shape not in ((), (1,)) or value.dtype.kind != "f":
            return False
        number = float(value.reshape(-1)[0])
        return any(abs(number - wanted) <= EXPECTED_ATOL + EXPECTED_RTOL * abs(wanted) for wanted in expected)


class Edges:
    """Who makes and who reads each tensor of a node list (ONNX Runtime's edges: one per input slot read)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.producer = {name: node for node in nodes for name in node.outputs if name}
        self.readers: dict[str, list[Node]] = {}
        for node in nodes:
            for name in node.inputs:
                if name:
                    self.readers.setdefault(name, []).append(node)

    def output_edges(self, node: Node) -> list[Node]:
        """The nodes reading the node's outputs, once per input slot (Node::GetOutputEdgesCount)."""
        return [reader for name in node.outputs if name for reader in self.readers.get(name, ())]

    def sole_reader(self, node: Node, graph: FusionGraph) -> Node | None:
        """The one node reading this node's outputs, where there is exactly one edge and no output is a graph
        output (optimizer_utils::CheckOutputEdges(graph, node, 1))."""
        edges = self.output_edges(node)
        if len(edges) != 1 or any(name in graph.graph_outputs for name in node.outputs):
            return None
        return edges[0]


def since_version(node: Node, opset: int) -> int | None:
    """The since-version of the node's operator at the model's opset (IsSupportedOptypeVersionAndDomain's)."""
    onnx = require_onnx()
    try:
        return int(onnx.defs.get_schema(node.op, opset, "").since_version)
    except Exception:  # noqa: BLE001 - onnx raises SchemaError for an operator it does not know
        return None


def _plain(node: Node, op: str) -> bool:
    return node.op == op and node.domain in DEFAULT_DOMAINS and not node.fusion


def _floating(graph: FusionGraph, names: Sequence[str], allowed: tuple[int, ...]) -> bool:
    return all(graph.elem_type(name) in allowed for name in names if name)


def _dead_constants(removed: Sequence[Node], edges: Edges, graph: FusionGraph) -> list[Node]:
    """The Constant nodes that only the removed nodes read (ONNX Runtime has folded them into initializers, which
    go unused with the nodes)."""
    gone = {id(node) for node in removed}
    found = []
    for node in removed:
        for name in node.inputs:
            maker = edges.producer.get(name)
            if maker is not None and maker.op == "Constant" and id(maker) not in gone \
                    and name not in graph.graph_outputs \
                    and all(id(reader) in gone for reader in edges.readers.get(name, ())):
                gone.add(id(maker))
                found.append(maker)
    return found


def _fused_node(first: Node, name: str, op: str, domain: str, inputs: Sequence[str], outputs: Sequence[str],
                attributes: Mapping[str, object], opset: int | None, fusion: str, fused: Sequence[Node],
                activation: Node | None = None) -> Node:
    onnx = require_onnx()
    proto = onnx.helper.make_node(op, list(inputs), list(outputs), name=name, domain=domain or None,
                                  **{key: value for key, value in attributes.items()
                                     if not isinstance(value, np.ndarray)})
    return Node(first.index, proto, op, domain, tuple(inputs), tuple(outputs), dict(attributes), opset, fusion,
                tuple(fused), activation)


# ---------------------------------------------------------------- MatMulAddFusion (matmul_add_fusion.cc)


def matmul_add(matmul: Node, edges: Edges, graph: FusionGraph) -> tuple[Node, list[Node]] | None:
    """MatMul + Add -> Gemm, where MatMulAddFusion::ApplyImpl fuses them: the MatMul (every version of opsets 7 to
    23 is in its list {1, 9, 13}) has one output edge and makes no graph output; that edge reads into an Add; the
    MatMul's A and the Add's first input have one type, FLOAT, FLOAT16 or BFLOAT16; A's and B's Sizes are known and
    B is 2-D; where A is not 2-D (Reshapes needed) A is no attention projection's input (Reshape of a Transpose of
    a MatMul of a Softmax) and no attention pattern's (preserve_attention_pattern, on by default), and A's Sizes
    are all known; the bias is [N], or (A 2-D only) [1, N], [M, 1] or [M, N]. Returns the Gemm and the nodes it
    stands for, or None."""
    if not _plain(matmul, "MatMul") or any(name in graph.graph_outputs for name in matmul.outputs):
        return None
    readers = edges.output_edges(matmul)
    if len(readers) != 1 or not _plain(readers[0], "Add"):
        return None
    add = readers[0]
    a_name, b_name = matmul.inputs[0], matmul.inputs[1]
    a_type = graph.elem_type(a_name)
    if a_type != graph.elem_type(add.inputs[0]) or a_type not in (FLOAT, FLOAT16, BFLOAT16):
        return None
    a_shape, b_shape = graph.shape(a_name), graph.shape(b_name)
    if a_shape is None or b_shape is None or len(b_shape) != 2:
        return None
    reshaped = len(a_shape) != 2
    if reshaped and (_attention_projection_input(matmul, edges) or _attention_pattern(matmul, add, edges)):
        return None
    bias_name = add.inputs[1] if add.inputs[0] == matmul.outputs[0] else add.inputs[0]
    bias = graph.shape(bias_name)
    n = b_shape[1]
    if bias is None or not _gemm_bias(bias, n, None if reshaped else a_shape[0]):
        return None
    name = f"{matmul.proto.name or f'MatMul_{matmul.index}'}/{MATMUL_ADD}"
    gemm = _fused_node(matmul, name, "Gemm", "", (a_name, b_name, bias_name), add.outputs, {}, matmul.opset,
                       MATMUL_ADD, (matmul, add))
    return gemm, [matmul, add]


def _gemm_bias(bias: tuple[int, ...], n: int, m: int | None) -> bool:
    """GEMM's unidirectional broadcast of C: (N), or with A 2-D (m given) (1, N), (M, 1) or (M, N)."""
    if len(bias) == 1:
        return bias[0] == n
    return m is not None and len(bias) == 2 and ((bias[0] == 1 and bias[1] == n) or
                                                 (bias[0] == m and bias[1] in (1, n)))


def _attention_projection_input(matmul: Node, edges: Edges) -> bool:
    """IsAttentionProjectionInput: A is made by an Attention or MultiHeadAttention node, or by a Reshape of a
    Transpose of a MatMul whose A a Softmax makes."""
    producer = edges.producer.get(matmul.inputs[0])
    if producer is not None and producer.op in ("Attention", "MultiHeadAttention"):
        return True
    chain = []
    for op in ("Reshape", "Transpose", "MatMul", "Softmax"):
        if producer is None or producer.op != op:
            return False
        chain.append(producer)
        producer = edges.producer.get(producer.inputs[0]) if producer.inputs else None
    return True


def _attention_pattern(matmul: Node, add: Node, edges: Edges) -> bool:
    """AttentionPatternCache::IsAttentionPattern: A is made by a LayerNormalization read by one Add, three MatMuls
    and Shapes only, and that Add's other input is made by an Add (the four projections AttentionFusion takes)."""
    norm = edges.producer.get(matmul.inputs[0])
    if norm is None or norm.op != "LayerNormalization":
        return False
    readers = edges.output_edges(norm)
    adds = [reader for reader in readers if reader.op == "Add"]
    matmuls = [reader for reader in readers if reader.op == "MatMul"]
    shapes = [reader for reader in readers if reader.op == "Shape"]
    if len(adds) != 1 or len(matmuls) != 3 or len(shapes) != len(readers) - 4:
        return False
    other = adds[0].inputs[1] if adds[0].inputs[0] == norm.outputs[0] else adds[0].inputs[0]
    maker = edges.producer.get(other)
    return maker is not None and maker.op == "Add"


# ---------------------------------------------------------------- GeluFusion (gelu_fusion.cc)

GELU_TYPES = (FLOAT16, FLOAT, DOUBLE)  # gelu_fusion.cc's supported_data_types, for every input of every node


def gelu(div: Node, edges: Edges, graph: FusionGraph) -> tuple[Node, list[Node]] | None:
    """Div(x, sqrt 2) -> Erf -> Add 1 -> Mul by x and Mul by 0.5 (either order) -> com.microsoft Gelu(x), where
    GeluFusion::ApplyImpl fuses it: every node's inputs are FLOAT16, FLOAT or DOUBLE; Div, Erf and Add each have
    one output edge and make no graph output; the divisor is a constant scalar sqrt(2) (or 1.4142099618911743), the
    addend 1 and the factor 0.5 (IsInitializerWithExpectedValue); pattern 1: Mul(Mul(x, 0.5), Add), the inner Mul
    with one output edge; pattern 2: Mul(Mul(x, Add), 0.5), the first Mul with one output edge. (Every version of
    Div, Erf, Add and Mul in opsets 7 to 23 is in the versions it accepts.)"""
    if not _plain(div, "Div") or not _floating(graph, div.inputs, GELU_TYPES):
        return None
    root = div.inputs[0]
    if not graph.is_scalar_constant(div.inputs[1], SQRT2_VALUES):
        return None
    erf = edges.sole_reader(div, graph)
    if erf is None or not _plain(erf, "Erf") or not _floating(graph, erf.inputs, GELU_TYPES):
        return None
    add = edges.sole_reader(erf, graph)
    if add is None or not _plain(add, "Add") or not _floating(graph, add.inputs, GELU_TYPES):
        return None
    one = add.inputs[1] if add.inputs[0] == erf.outputs[0] else add.inputs[0]
    if not graph.is_scalar_constant(one, (1.0,)):
        return None
    readers = edges.output_edges(add)
    mul = readers[0] if len(readers) == 1 else None
    if mul is None or not _plain(mul, "Mul") or not _floating(graph, mul.inputs, GELU_TYPES):
        return None
    other = mul.inputs[1] if mul.inputs[0] == add.outputs[0] else mul.inputs[0]
    half_mul = edges.producer.get(other)
    if half_mul is not None and half_mul.op == "Mul":  # pattern 1: (x * 0.5) * (1 + erf)
        if not _plain(half_mul, "Mul") or not _floating(graph, half_mul.inputs, GELU_TYPES) \
                or edges.sole_reader(half_mul, graph) is None or root not in half_mul.inputs:
            return None
        half = half_mul.inputs[1] if half_mul.inputs[0] == root else half_mul.inputs[0]
        group, last = [div, erf, add, half_mul, mul], mul
    else:  # pattern 2: (x * (1 + erf)) * 0.5
        if other != root or edges.sole_reader(mul, graph) is None:
            return None
        half_mul = edges.output_edges(mul)[0]
        if not _plain(half_mul, "Mul") or not _floating(graph, half_mul.inputs, GELU_TYPES):
            return None
        half = half_mul.inputs[1] if half_mul.inputs[0] == mul.outputs[0] else half_mul.inputs[0]
        group, last = [div, erf, add, mul, half_mul], half_mul
    if not graph.is_scalar_constant(half, (0.5,)):
        return None
    name = f"{div.proto.name or f'Div_{div.index}'}/{GELU}"
    node = _fused_node(div, name, "Gelu", MS_DOMAIN, (root,), last.outputs, {}, 1, GELU, group)
    return node, group


# ---------------------------------------------------------------- the DirectML provider's activation fusion


def fused_activation(node: Node, edges: Edges, graph: FusionGraph) -> tuple[Node, list[Node]] | None:
    """An operator and the activation reading it -> the operator with FusedActivation, where PerformOperatorFusion
    fuses them: the operator has exactly one output edge (and, here, makes no graph output: the fused node would
    not make it); the activation takes one input; FusionHelpers::TryGetFusedOp finds the operator's since-version
    in c_fusableOps and the activation's in c_activationOps. Where dmlcli's table maps the operator onto a DirectML
    operator without a FusedActivation field, the nodes are left as they are. A Gemm MatMulAddFusion made of an A
    of another rank than 2 is read by ONNX Runtime's Reshape, not by the activation: it is left too."""
    if node.domain not in DEFAULT_DOMAINS or node.op not in FUSABLE or node.activation is not None \
            or (node.fusion and node.fusion != MATMUL_ADD):
        return None
    if since_version(node, graph.opset) not in FUSABLE[node.op]:
        return None
    if node.fusion == MATMUL_ADD and graph.shape(node.inputs[0]) is not None and len(graph.shape(node.inputs[0])) != 2:
        return None  # ONNX Runtime's Gemm of a rank-N A is read by its output Reshape, not by the activation
    activation = edges.sole_reader(node, graph)
    if activation is None or activation.domain not in DEFAULT_DOMAINS or activation.op not in ACTIVATIONS \
            or len(activation.inputs) != 1 or since_version(activation, graph.opset) not in ACTIVATIONS[activation.op]:
        return None
    if activation.op == "Dropout" and sum(1 for name in activation.outputs if name) != 1:
        return None  # its mask is read: the fused node would not make it
    if not _takes_fused_activation(node):
        return None
    name = f"fused op ({node.proto.name or node.op}) + ({activation.proto.name or activation.op})"
    fused = node.fused if node.fusion else (node,)
    merged = replace(node, proto=_renamed(node, name, activation.outputs), outputs=activation.outputs,
                     fusion=ACTIVATION if not node.fusion else f"{node.fusion} + {ACTIVATION}",
                     fused=(*fused, activation), activation=None if activation.op == "Dropout" else activation)
    return merged, [node, activation]


def _renamed(node: Node, name: str, outputs: Sequence[str]):
    proto = type(node.proto)()
    proto.CopyFrom(node.proto)
    proto.name = name
    del proto.output[:]
    proto.output.extend(outputs)
    return proto


def _takes_fused_activation(node: Node) -> bool:
    """Whether dmlcli's table maps the node onto a DirectML operator with a FusedActivation field."""
    from ..suite.onnx.mapping import directml_operator
    from ..suite.onnx.table import TABLE

    entry = TABLE.get(node.op)
    operator = None if entry is None else directml_operator(entry)
    return operator is not None and operator.fused_activation is not None


# ---------------------------------------------------------------- the passes

Fusion = Callable[[Node, Edges, FusionGraph], "tuple[Node, list[Node]] | None"]
# In ONNX Runtime's order: MatMulAddFusion (Level 1), GeluFusion (Level 2), then the provider's own fusion.
PASSES: tuple[tuple[str, Fusion], ...] = ((MATMUL_ADD, matmul_add), (GELU, gelu), (ACTIVATION, fused_activation))


def fused_model(model: LoadedModel, nodes: Sequence[Node]) -> tuple[Node, ...]:
    """The model's nodes after the fusions, their conditions read on the Sizes shape inference gives for the
    model's declared inputs (where a declared Size is symbolic, inference leaves what depends on it unknown)."""
    shapes = {declared.name: tuple(declared.dims) for declared in model.inputs if declared.dims is not None
              and all(isinstance(size, int) and size > 0 for size in declared.dims)}
    graph = FusionGraph(constant_values(nodes, model.constants), inferred_tensors(model, shapes),
                        frozenset(declared.name for declared in model.outputs), model.opset)
    return fused_nodes(nodes, graph)


def fused_nodes(nodes: Sequence[Node], graph: FusionGraph) -> tuple[Node, ...]:
    """The nodes after every fusion, in an order where each reads only values made before it (a fused node takes
    the place of the last node it stands for)."""
    current = list(nodes)
    for _name, fusion in PASSES:
        current = _one_pass(current, fusion, graph)
    return tuple(current)


def _one_pass(nodes: list[Node], fusion: Fusion, graph: FusionGraph) -> list[Node]:
    edges = Edges(nodes)
    taken: set[int] = set()
    replacement: dict[int, Node | None] = {}
    for node in nodes:
        if id(node) in taken:
            continue
        found = fusion(node, edges, graph)
        if found is None:
            continue
        made, group = found
        if any(id(member) in taken for member in group):
            continue
        constants = _dead_constants(group, edges, graph)
        if constants:  # first: the nodes a fused node stands for are kept in an order they can run in
            made = replace(made, fused=(*constants, *made.fused))
        position = {id(member): index for index, member in enumerate(nodes)}
        last = max(group, key=lambda member: position[id(member)])
        for member in (*group, *constants):
            taken.add(id(member))
            replacement[id(member)] = None
        replacement[id(last)] = made
    return [replacement.get(id(node), node) for node in nodes if replacement.get(id(node), node) is not None]


def removed_outputs(node: Node) -> list[tuple[Node, str]]:
    """The tensors of the nodes a fused node stands for that no longer exist (each with the node that made it)."""
    kept = set(node.outputs)
    return [(member, name) for member in node.fused for name in member.outputs if name and name not in kept]


def constant_values(nodes: Sequence[Node], constants: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The initializers and every Constant node's value (ONNX Runtime's ConstantFolding makes those initializers
    before the fusions run)."""
    found = dict(constants)
    for node in nodes:
        if node.op != "Constant" or node.domain not in DEFAULT_DOMAINS or not node.outputs:
            continue
        for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
            if key in node.attributes:
                found[node.outputs[0]] = np.asarray(node.attributes[key])
                break
    return found
