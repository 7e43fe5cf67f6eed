"""The graph fusions ONNX Runtime applies to a model its DirectML provider runs, so that dmlcli runs the nodes the
provider runs (fewer, bigger DirectML calls). Each fusion is one function with its conditions as ONNX Runtime
states them (microsoft/onnxruntime; the file and the condition are cited at each check). In ONNX Runtime's order
(optimizer/graph_transformer_utils.cc, commit d981c050, the lists for kDmlExecutionProvider):

- Level 1 (every provider): MatMulAddFusion (optimizer/matmul_add_fusion.cc): MatMul followed by its only
  consumer Add of a bias -> Gemm. An A of another rank than 2 is reshaped to [M, K] and the result back (ONNX
  Runtime inserts two Reshape nodes; here the Gemm's adapter makes the same views, table.py's Gemm of rank N);
- Level 2, the transformers whose lists hold the DirectML provider, in their order, the whole list repeated until
  the graph no longer changes (graph_transformer_mgr.cc, ApplyTransformers; at most 10 steps, SessionOptions'
  max_num_graph_transformation_steps):
  - GeluFusion (gelu_fusion.cc): x * 0.5 * (1 + Erf(x / sqrt 2)) in either of its two orders -> com.microsoft
    Gelu, which the provider runs as DML_OPERATOR_ACTIVATION_GELU (table.py's Gelu);
  - MatmulTransposeFusion (matmul_transpose_fusion.cc): a Transpose that keeps the batch dimensions in order and
    moves only the last axis and one other (and a Cast between it and the MatMul, swapped before it) feeding a
    MatMul or FusedMatMul -> com.microsoft FusedMatMul with transA/transB and transBatchA/transBatchB;
  - SkipLayerNormFusion (skip_layer_norm_fusion.cc): Add (with a bias Add) feeding LayerNormalization ->
    com.microsoft SkipLayerNormalization, which the provider runs as ELEMENT_WISE_ADD (twice with a bias) then
    MEAN_VARIANCE_NORMALIZATION1 (table.py's composed entry);
  - MatMulScaleFusion (matmul_scale_fusion.cc): Mul or Div by a scalar constant before or after a MatMul or
    FusedMatMul -> FusedMatMul with alpha; the provider runs FusedMatMul as one GEMM (table.py's FusedMatMul);
  - MatMulActivationFusion (matmul_activation_fusion.cc, the DirectML provider's alone): a FusedMatMul and the
    Softmax reading it -> com.microsoft FusedMatMulActivation, one GEMM with a fused ACTIVATION_SOFTMAX1;
  LayerNormFusion, AttentionFusion, EmbedLayerNormFusion, BiasGeluFusion and QuickGeluFusion are on the list too:
  they match neither shared model (ONNX Runtime's CPU provider, which runs them all, makes no node of theirs in
  either) and are not built here;
- the provider's own fusion, DmlOperatorFusion (providers/dml/DmlExecutionProvider/src/GraphTransformer.cpp,
  PerformOperatorFusion, with Operators/OperatorUtility.cpp's FusionHelpers lists c_fusableOps and
  c_activationOps): an activation that is the only consumer of a Conv, ConvTranspose, BatchNormalization,
  InstanceNormalization, MeanVarianceNormalization, Gemm or MatMul becomes that operator's FusedActivation.

ONNX Runtime folds constants (Level 1's ConstantFolding) before it fuses: a Constant node's value, and the outputs
of a node of ONNX's domain that reads only constants (or, a Shape or Size, only a tensor whose Sizes are known),
count as initializers here (computed when a fusion asks, by onnx's reference, as the plan folds them); a Constant
node that only the fused nodes read goes with them. The fusions run once per session (as ONNX Runtime's run once
per InferenceSession), on the Sizes shape inference gives for the model's declared inputs: where those are
symbolic, a condition that needs a Size is not met, as in ONNX Runtime.

Not done (Level 1, every provider): ONNX Runtime's TransposeOptimizer moves Transposes through other nodes before
Level 2 (in the shared encoder, the Transposes of the attention heads through their Reshapes, which lets
MatmulTransposeFusion take them with transBatch), and ReshapeFusion and CommonSubexpressionElimination merge nodes;
dmlcli fuses the graph as the model gives it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from .graph import RANDOM, Inferred, Node, inferred_tensors
from .loading import DEFAULT_DOMAINS, LoadedModel, require_onnx

MATMUL_ADD, GELU, ACTIVATION = "MatMulAddFusion", "GeluFusion", "DmlOperatorFusion"
MATMUL_TRANSPOSE, SKIP_LAYER_NORM = "MatmulTransposeFusion", "SkipLayerNormFusion"
MATMUL_SCALE, MATMUL_ACTIVATION = "MatMulScaleFusion", "MatMulActivationFusion"
FLOAT, FLOAT16, DOUBLE, BFLOAT16 = 1, 10, 11, 16  # ONNX's TensorProto element types
MS_DOMAIN = "com.microsoft"
STEPS = 10  # SessionOptions::max_num_graph_transformation_steps: the most passes of a level's transformers
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
    # The tensors ONNX Runtime's ConstantFolding makes initializers, each with the node that makes it (their
    # values computed when a fusion asks, `model` giving the opsets for onnx's reference), and their values so far.
    folds: Mapping[str, Node] = field(default_factory=dict)
    model: LoadedModel | None = None
    folded: dict[str, np.ndarray | None] = field(default_factory=dict)  # None: the reference could not compute it
    made: dict[str, Inferred] = field(default_factory=dict)  # the types of tensors a fusion made

    def inferred(self, name: str) -> Inferred | None:
        return self.types.get(name) or self.made.get(name)

    def shape(self, name: str) -> tuple[int, ...] | None:
        if name in self.constants:
            return tuple(np.shape(self.constants[name]))
        found = self.inferred(name)
        return None if found is None else found.shape

    def dims(self, name: str) -> tuple[int | str | None, ...] | None:
        """Each dimension as shape inference gives it (a size, a symbolic name, None), where the rank is known."""
        if name in self.constants:
            return tuple(np.shape(self.constants[name]))
        found = self.inferred(name)
        return None if found is None else found.dims if found.dims is not None else found.shape

    def rank(self, name: str) -> int | None:
        dims = self.dims(name)
        return None if dims is None else len(dims)

    def elem_type(self, name: str) -> int | None:
        found = self.inferred(name)
        if found is not None:
            return found.elem_type
        if name in self.constants:
            onnx = require_onnx()
            try:
                return onnx.helper.np_dtype_to_tensor_dtype(np.asarray(self.constants[name]).dtype)
            except (KeyError, TypeError, ValueError):
                return None
        return None

    def is_constant(self, name: str) -> bool:
        """Whether the tensor is an initializer once ONNX Runtime has folded constants (graph_utils'
        NodeArgIsConstant / GetConstantInitializer after Level 1's ConstantFolding)."""
        return name in self.constants or name in self.folds

    def constant(self, name: str) -> np.ndarray | None:
        """The tensor's value where it is a constant (is_constant), else None; a folded value is computed by onnx's
        reference implementation (the plan's own folding), None where the reference cannot."""
        if name in self.constants:
            return np.asarray(self.constants[name])
        if name not in self.folds or self.model is None:
            return None
        if name not in self.folded:
            self._fold(name)
        return self.folded.get(name)

    def _fold(self, name: str) -> None:
        """Computes the folded nodes `name` depends on, in an order where each reads only values made before it."""
        from .reference import folded_outputs

        order: list[Node] = []
        pending, seen = [self.folds[name]], set()
        while pending:  # the folded nodes needed, each once (no recursion: chains may be long)
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            order.append(node)
            if node.op not in ("Shape", "Size"):
                pending.extend(self.folds[input_name] for input_name in node.inputs
                               if input_name in self.folds and input_name not in self.folded)
        position = {id(node): index for index, node in enumerate(dict.fromkeys(self.folds.values()))}
        for node in sorted(order, key=lambda member: position[id(member)]):
            values = {input_name: self._input_value(node, input_name) for input_name in node.inputs if input_name}
            outputs = None if any(value is None for value in values.values()) \
                else folded_outputs(node, self.model, values)
            if outputs is None:
                self.folded.update({output: None for output in node.outputs if output})
                break
            self.folded.update(outputs)
        self.folded.setdefault(name, None)

    def _input_value(self, node: Node, name: str) -> np.ndarray | None:
        if node.op in ("Shape", "Size"):  # reads the Sizes alone: a stand-in of the tensor's type and Sizes
            onnx = require_onnx()
            dtype = onnx.helper.tensor_dtype_to_np_dtype(self.elem_type(name) or FLOAT)
            return np.broadcast_to(np.zeros((), dtype), self.shape(name))
        return self.folded.get(name) if name in self.folds else self.constant(name)

    def is_scalar_constant(self, name: str, expected: Sequence[float]) -> bool:
        """IsInitializerWithExpectedValue: a constant whose shape is [] or [1] (IsScalar), a floating-point value
        within atol 1e-8 + rtol 1e-5 of one of `expected`."""
        value = self.constant(name)
        if value is None or value.shape not in ((), (1,)) or value.dtype.kind != "f":
            return False
        number = float(value.reshape(-1)[0])
        return any(abs(number - wanted) <= EXPECTED_ATOL + EXPECTED_RTOL * abs(wanted) for wanted in expected)


def folding_nodes(nodes: Sequence[Node], constants: Mapping[str, np.ndarray],
                  types: Mapping[str, Inferred]) -> dict[str, Node]:
    """The tensors ONNX Runtime's ConstantFolding (constant_folding.cc) makes initializers, with their nodes: the
    outputs of a node of ONNX's domain, not random and not a Constant (already a value), that reads only constants,
    or a Shape or Size whose input's Sizes are known (ConstantFolding folds those from the shape alone)."""
    known = set(constants)
    found: dict[str, Node] = {}
    for node in nodes:
        if node.op in RANDOM or node.op == "Constant" or node.domain not in DEFAULT_DOMAINS:
            continue
        reads_sizes = node.op in ("Shape", "Size") and node.inputs and \
            types.get(node.inputs[0], Inferred(0, None)).shape is not None
        if reads_sizes or all(not name or name in known for name in node.inputs):
            for name in node.outputs:
                if name:
                    known.add(name)
                    found[name] = node
    return found


class Edges:
    """Who makes and who reads each tensor of a node list (ONNX Runtime's edges: one per input slot read)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.position = {id(node): index for index, node in enumerate(nodes)}
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

    def node_producer(self, name: str, graph: FusionGraph) -> Node | None:
        """The node an edge comes from: none for a graph input or a constant (ConstantFolding has made it an
        initializer, which no edge comes from)."""
        return None if graph.is_constant(name) else self.producer.get(name)


@dataclass(frozen=True)
class Fused:
    """What one fusion does: the nodes it makes (in an order they can run in, put where the last of `removed`
    stood), the nodes they replace, and the nodes they no longer read, which go where nothing reads them any more
    after the pass (a Transpose whose every MatMul took it: MatmulTransposeFusion's consumer count)."""

    made: tuple[Node, ...]
    removed: tuple[Node, ...]
    bypassed: tuple[Node, ...] = ()


def since_version(node: Node, opset: int) -> int | None:
    """The since-version of the node's operator at the model's opset (IsSupportedOptypeVersionAndDomain's)."""
    onnx = require_onnx()
    try:
        return int(onnx.defs.get_schema(node.op, opset, "").since_version)
    except Exception:  # noqa: BLE001 - onnx raises SchemaError for an operator it does not know
        return None


def _plain(node: Node, op: str) -> bool:
    return node.op == op and node.domain in DEFAULT_DOMAINS and not node.fusion


def _plain_version(node: Node | None, op: str, versions: tuple[int, ...], graph: FusionGraph) -> bool:
    """IsSupportedOptypeVersionAndDomain(node, op, versions) on a model's own node of ONNX's domain."""
    return node is not None and _plain(node, op) and since_version(node, graph.opset) in versions


def _contrib(node: Node | None, op: str) -> bool:
    """A com.microsoft node of this type a fusion made (version 1, the only one)."""
    return node is not None and node.op == op and node.domain == MS_DOMAIN and bool(node.fusion)


def _floating(graph: FusionGraph, names: Sequence[str], allowed: tuple[int, ...]) -> bool:
    return all(graph.elem_type(name) in allowed for name in names if name)


def _makes_graph_output(node: Node, graph: FusionGraph) -> bool:
    """Graph::NodeProducesGraphOutput."""
    return any(name in graph.graph_outputs for name in node.outputs)


def _members(group: Sequence[Node], edges: Edges) -> tuple[Node, ...]:
    """The model's nodes a group stands for, in the node list's order (a fused node's own members in theirs)."""
    ordered = sorted(group, key=lambda node: edges.position.get(id(node), -1))
    return tuple(member for node in ordered for member in (node.fused if node.fusion else (node,)))


def _fusions(*nodes: Node, fusion: str) -> str:
    """The fusions a node made by `fusion` from these nodes has been through, in order ("A + B")."""
    earlier = [node.fusion for node in nodes if node.fusion]
    return " + ".join(dict.fromkeys([*earlier, fusion]))


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
                activation: Node | None = None, intermediates: Mapping[str, str] | None = None) -> Node:
    onnx = require_onnx()
    proto = onnx.helper.make_node(op, list(inputs), list(outputs), name=name, domain=domain or None,
                                  **{key: value for key, value in attributes.items()
                                     if not isinstance(value, np.ndarray)})
    return Node(first.index, proto, op, domain, tuple(inputs), tuple(outputs), dict(attributes), opset, fusion,
                tuple(fused), activation, tuple((intermediates or {}).items()))


def _name(node: Node) -> str:
    return node.proto.name or f"{node.op}_{node.index}"


# ---------------------------------------------------------------- MatMulAddFusion (matmul_add_fusion.cc)


def matmul_add(matmul: Node, edges: Edges, graph: FusionGraph) -> Fused | None:
    """MatMul + Add -> Gemm, where MatMulAddFusion::ApplyImpl fuses them: the MatMul (every version of opsets 7 to
    23 is in its list {1, 9, 13}) has one output edge and makes no graph output; that edge reads into an Add; the
    MatMul's A and the Add's first input have one type, FLOAT, FLOAT16 or BFLOAT16; A's and B's Sizes are known and
    B is 2-D; where A is not 2-D (Reshapes needed) A is no attention projection's input (Reshape of a Transpose of
    a MatMul of a Softmax) and no attention pattern's (preserve_attention_pattern, on by default), and A's Sizes
    are all known; the bias is [N], or (A 2-D only) [1, N], [M, 1] or [M, N]."""
    if not _plain(matmul, "MatMul") or _makes_graph_output(matmul, graph):
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
    gemm = _fused_node(matmul, f"{_name(matmul)}/{MATMUL_ADD}", "Gemm", "", (a_name, b_name, bias_name),
                       add.outputs, {}, matmul.opset, MATMUL_ADD, (matmul, add))
    return Fused((gemm,), (matmul, add))


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
    for op in ("Reshape", "Transpose", "MatMul", "Softmax"):
        if producer is None or producer.op != op:
            return False
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


def gelu(div: Node, edges: Edges, graph: FusionGraph) -> Fused | None:
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
        group, last = (div, erf, add, half_mul, mul), mul
    else:  # pattern 2: (x * (1 + erf)) * 0.5
        if other != root or edges.sole_reader(mul, graph) is None:
            return None
        half_mul = edges.output_edges(mul)[0]
        if not _plain(half_mul, "Mul") or not _floating(graph, half_mul.inputs, GELU_TYPES):
            return None
        half = half_mul.inputs[1] if half_mul.inputs[0] == mul.outputs[0] else half_mul.inputs[0]
        group, last = (div, erf, add, mul, half_mul), half_mul
    if not graph.is_scalar_constant(half, (0.5,)):
        return None
    node = _fused_node(div, f"{_name(div)}/{GELU}", "Gelu", MS_DOMAIN, (root,), last.outputs, {}, 1, GELU, group)
    return Fused((node,), group)


# ---------------------------------------------------------------- MatmulTransposeFusion (matmul_transpose_fusion.cc)

FUSED_MATMUL_TYPES = (FLOAT, FLOAT16, DOUBLE, BFLOAT16)  # IsAllowedFusedMatMulDataType
FUSED_MATMUL = "FusedMatMul"
TRANSPOSE_ATTRIBUTES = ("transA", "transB", "transBatchA", "transBatchB")


@dataclass(frozen=True)
class _Taken:
    """A Transpose a FusedMatMul reads through: is_trans (the last two axes swapped), is_trans_batch (the first
    axis moved to the rows' place), and the Cast that stood between them (ReorderCastAndTranspose)."""

    transpose: Node
    trans: bool
    batch: bool
    cast: Node | None = None


def _transpose_flags(transpose: Node | None, graph: FusionGraph) -> tuple[bool, bool] | None:
    """GetTransposeNodeFromOutput: (is_trans, is_trans_batch) where a Transpose (that makes no graph output) can be
    read through by a matrix product: its perm (or, without one, the reversed axes of an input of known rank) of
    rank 2 or more keeps the last axis among the last two; past rank 2 it starts with 0 or 1 and its first rank - 2
    entries count up by one (the batch dimensions keep their order, contiguous). None where it cannot."""
    if transpose is None or transpose.op != "Transpose" or _makes_graph_output(transpose, graph):
        return None
    perm = transpose.attributes.get("perm")
    if perm is None:
        rank = graph.rank(transpose.inputs[0])
        if rank is None:
            return None
        perm = list(range(rank))[::-1]
    perm = [int(axis) for axis in perm]
    rank = len(perm)
    if rank < 2:
        return None
    last = rank - 1
    if perm[rank - 1] != last and perm[rank - 2] != last:
        return None
    if rank >= 3:
        if perm[0] not in (0, 1) or any(perm[i] + 1 != perm[i + 1] for i in range(rank - 3)):
            return None
    return perm[rank - 2] == last, rank >= 3 and perm[0] == 1


def _taken(name: str, edges: Edges, graph: FusionGraph) -> _Taken | None:
    """The Transpose the product's input comes from, directly or through a Cast (which ONNX Runtime swaps with it:
    Cast(x) then Transpose, both exact, the same values)."""
    producer = edges.node_producer(name, graph)
    flags = _transpose_flags(producer, graph)
    if flags is not None:
        return _Taken(producer, *flags)
    if producer is None or producer.op != "Cast":
        return None
    transpose = edges.node_producer(producer.inputs[0], graph)
    flags = _transpose_flags(transpose, graph)
    return None if flags is None else _Taken(transpose, *flags, cast=producer)


def matmul_transpose(node: Node, edges: Edges, graph: FusionGraph) -> Fused | None:
    """MatMul (since-version 9 or 13; not 1, opsets 7 and 8) or FusedMatMul reading a Transpose -> FusedMatMul that
    reads the Transpose's input, where MatmulTransposeFusion::ApplyImpl fuses it: both inputs FLOAT, FLOAT16, DOUBLE
    or BFLOAT16; an input is taken (GetTransposeNodeFromOutput) unless the FusedMatMul already has transBatch for
    it; where either is taken with transBatch, both of the product's inputs have one known rank, else the
    transBatch ones are left. The flags are xor-ed with a FusedMatMul's own, its alpha kept. A Transpose stays
    while another node reads it (UpdateConsumerCount)."""
    fused_before = _contrib(node, FUSED_MATMUL) and node.activation is None
    if not fused_before and not _plain_version(node, "MatMul", (9, 13), graph):
        return None
    left_name, right_name = node.inputs[0], node.inputs[1]
    if graph.elem_type(left_name) not in FUSED_MATMUL_TYPES or graph.elem_type(right_name) not in FUSED_MATMUL_TYPES:
        return None
    own = {key: int(node.attributes.get(key, 0)) for key in TRANSPOSE_ATTRIBUTES} if fused_before else {}
    left = None if own.get("transBatchA") else _taken(left_name, edges, graph)
    right = None if own.get("transBatchB") else _taken(right_name, edges, graph)
    if (left is not None and left.batch) or (right is not None and right.batch):
        ranks = graph.rank(left_name), graph.rank(right_name)
        if None in ranks or ranks[0] != ranks[1]:
            left = None if left is not None and left.batch else left
            right = None if right is not None and right.batch else right
    if left is None and right is None:
        return None
    made, removed, bypassed, inputs = [], [node], [], []
    for taken, name in ((left, left_name), (right, right_name)):
        if taken is None:
            inputs.append(name)
            continue
        if taken.cast is None:
            inputs.append(taken.transpose.inputs[0])
            bypassed.append(taken.transpose)
        else:
            swapped = _swapped_cast(taken, name, node, edges, graph)
            made.extend(swapped)
            inputs.append(swapped[0].outputs[0])
            removed.append(taken.cast)
            bypassed.append(taken.transpose)
    attributes = {"transA": int(left is not None and left.trans) ^ own.get("transA", 0),
                  "transB": int(right is not None and right.trans) ^ own.get("transB", 0),
                  "transBatchA": int(left is not None and left.batch) ^ own.get("transBatchA", 0),
                  "transBatchB": int(right is not None and right.batch) ^ own.get("transBatchB", 0),
                  "alpha": float(node.attributes.get("alpha", 1.0)) if fused_before else 1.0}
    fusion = _fusions(node, fusion=MATMUL_TRANSPOSE)
    fused = _fused_node(node, f"{_name(node)}/{MATMUL_TRANSPOSE}/", FUSED_MATMUL, MS_DOMAIN, inputs, node.outputs,
                        attributes, 1, fusion, _members([node], edges))
    return Fused((*made, fused), tuple(removed), tuple(bypassed))


def _swapped_cast(taken: _Taken, name: str, product: Node, edges: Edges, graph: FusionGraph) -> list[Node]:
    """ReorderCastAndTranspose: a new Cast of the Transpose's input ("<cast output>_transformed", the product's new
    input), and, where anything else reads the old Cast's output, a new Transpose of the new Cast that makes it."""
    cast, transpose = taken.cast, taken.transpose
    source = transpose.inputs[0]
    renamed = f"{name}_transformed"
    before = graph.inferred(source)
    graph.made[renamed] = Inferred(int(cast.attributes.get("to", 0)), None if before is None else before.shape,
                                   None if before is None else before.dims)
    new_cast = _fused_node(cast, f"{_name(cast)}_transformed", "Cast", cast.domain, (source,), (renamed,),
                           cast.attributes, cast.opset, MATMUL_TRANSPOSE, (cast,))
    made = [new_cast]
    others = [reader for reader in edges.readers.get(name, ()) if reader is not product]
    if others or name in graph.graph_outputs:
        made.append(_fused_node(transpose, f"{_name(transpose)}_transformed", "Transpose", transpose.domain,
                                (renamed,), (name,), transpose.attributes, transpose.opset, MATMUL_TRANSPOSE, ()))
    return made


# ---------------------------------------------------------------- MatMulScaleFusion (matmul_scale_fusion.cc)

SCALE_VERSIONS = (7, 13, 14)  # Mul's and Div's since-versions GetScaleFromNode takes (every one of opsets 7 to 23)
# ExtractScalarDispatchTarget's types; another type is no scale here (ONNX Runtime's dispatcher would throw).
SCALE_TYPES = ("uint32", "uint64", "int32", "int64", "float16", "float32", "float64", "bfloat16")


@dataclass(frozen=True)
class _Scale:
    """A Mul or Div by a scalar constant: the node, the factor (a float32 value, or a float64 one from a DOUBLE
    constant) and the position of the input it scales."""

    node: Node
    value: float
    double: bool
    scaled: int


def _scalar(graph: FusionGraph, name: str, max_rank: int) -> tuple[float, bool] | None:
    """GetScalarConstantInitializer: a constant of one element and at most `max_rank` dimensions (the other
    input's rank: no broadcast), of a type ExtractScalarDispatchTarget reads, whose value float32 holds exactly
    (integers past 2^24 only where their low bits are zero); its value as float32 (float64 for DOUBLE)."""
    value = graph.constant(name)
    if value is None or value.size != 1 or value.ndim > max_rank or value.dtype.name not in SCALE_TYPES:
        return None
    scalar = value.reshape(-1)[0]
    if value.dtype.name == "float64":
        return float(scalar), True
    as_float = np.float32(scalar)
    if value.dtype.kind in "iu" and int(as_float) != int(scalar):
        return None
    return float(as_float), False


def _scale_of(node: Node | None, graph: FusionGraph) -> _Scale | None:
    """GetScaleFromNode: Div (7, 13, 14) by a scalar constant divisor (input 1), the factor 1 / divisor in float32
    (float64 for DOUBLE); Mul (7, 13, 14) with a scalar constant as either input (input 0 tried first)."""
    if _plain_version(node, "Div", SCALE_VERSIONS, graph):
        found = _scalar(graph, node.inputs[1], graph.rank(node.inputs[0]) or 0)
        if found is None:
            return None
        divisor, double = found
        value = 1.0 / divisor if double else float(np.float32(1.0) / np.float32(divisor))
        return _Scale(node, value, double, 0)
    if _plain_version(node, "Mul", SCALE_VERSIONS, graph):
        for position in (0, 1):
            found = _scalar(graph, node.inputs[position], graph.rank(node.inputs[1 - position]) or 0)
            if found is not None:
                return _Scale(node, *found, 1 - position)
    return None


def matmul_scale(node: Node, edges: Edges, graph: FusionGraph) -> Fused | None:
    """Mul or Div by a scalar constant feeding a MatMul (since-version 9 or 13) or FusedMatMul, or reading it ->
    FusedMatMul with alpha, where MatMulScaleFusion's ProcessNode fuses them: an input's producer is a scale whose
    scaled input has a known rank of 1 or more (the scale node stays while another node reads it); the output's
    only edge (no graph output: CheckOutputEdges(node, 1)) reads into a scale. alpha = the FusedMatMul's alpha (or 1)
    times each input scale, in the input edges' order, then the output scale's, in float32; with a DOUBLE scale in
    float64, and no fusion where float32 does not hold the product exactly. (IsMatMulInputTypeSupported lists types
    for the CPU and CUDA providers only: every type for the DirectML provider.)"""
    fused_before = _contrib(node, FUSED_MATMUL) and node.activation is None
    if not fused_before and not _plain_version(node, "MatMul", (9, 13), graph):
        return None
    inputs = []
    for position, name in enumerate(node.inputs[:2]):
        scale = _scale_of(edges.node_producer(name, graph), graph)
        if scale is not None and (graph.rank(scale.node.inputs[scale.scaled]) or 0) > 0:
            inputs.append((position, scale))
    inputs.sort(key=lambda found: (edges.position.get(id(found[1].node), -1), found[0]))  # Node::EdgeSet's order
    output = None
    reader = edges.sole_reader(node, graph)
    if reader is not None:
        output = _scale_of(reader, graph)
    if not inputs and output is None:
        return None
    scales = [scale for _, scale in inputs] + ([output] if output is not None else [])
    alpha = _alpha(float(node.attributes.get("alpha", 1.0)) if fused_before else 1.0, scales)
    if alpha is None:
        return None
    names = list(node.inputs)
    for position, scale in inputs:
        names[position] = scale.node.inputs[scale.scaled]
    attributes = {**(node.attributes if fused_before else {}), "alpha": alpha}
    removed = [node, *_unread_scales(node, [scale.node for _, scale in inputs], edges, graph)]
    if output is not None:
        removed.append(output.node)
    fused = _fused_node(node, f"{_name(node)}/{MATMUL_SCALE}/", FUSED_MATMUL, MS_DOMAIN, names,
                        output.node.outputs if output is not None else node.outputs, attributes, 1,
                        _fusions(node, fusion=MATMUL_SCALE), _members(removed, edges))
    return Fused((fused,), tuple(removed))


def _alpha(start: float, scales: Sequence[_Scale]) -> float | None:
    """The fused alpha: the product in float32 (each factor float32), or in float64 where a scale is DOUBLE, then
    only where float32 holds it exactly (None: no fusion)."""
    if any(scale.double for scale in scales):
        total = start
        for scale in scales:
            total *= scale.value
        return total if float(np.float32(total)) == total else None
    product = np.float32(start)
    for scale in scales:
        product = np.float32(product * np.float32(scale.value))
    return float(product)


def _unread_scales(product: Node, scales: Sequence[Node], edges: Edges, graph: FusionGraph) -> list[Node]:
    """The input scale nodes no other node reads once the product's edges from them are gone (CheckOutputEdges(
    graph, node, 0): no edge left, no graph output)."""
    gone = []
    for scale in dict.fromkeys(scales):
        if _makes_graph_output(scale, graph):
            continue
        if all(reader is product for reader in edges.output_edges(scale)):
            gone.append(scale)
    return gone


# ---------------------------------------------------------------- SkipLayerNormFusion (skip_layer_norm_fusion.cc)

LAYER_NORM_TYPES = (FLOAT16, FLOAT, BFLOAT16)  # supported_data_types, for every input of each node
ADD_VERSIONS = (7, 13, 14)
SKIP_LAYER_NORM_EPSILON = float(np.float32(1e-12))  # contrib_defs.h, kDefaultSkipLayerNormEpsilon


def _producing_add(node: Node, position: int, edges: Edges, graph: FusionGraph) -> Node | None:
    """The Add (7, 13, 14) whose output 0 is the node's input `position` (graph_utils::FindPath's step)."""
    name = node.inputs[position] if position < len(node.inputs) else ""
    add = edges.node_producer(name, graph) if name else None
    return add if _plain_version(add, "Add", ADD_VERSIONS, graph) and add.outputs[0] == name else None


def _first_add(add: Node, edges: Edges, graph: FusionGraph) -> bool:
    """CheckFirstAdd (and no graph output): inputs of the supported types, one output edge, both inputs 3-D of one
    known Sizes (the first dimension may instead be one symbolic name in both)."""
    if not _floating(graph, add.inputs, LAYER_NORM_TYPES) or len(edges.output_edges(add)) != 1 \
            or _makes_graph_output(add, graph):
        return False
    first, second = graph.dims(add.inputs[0]), graph.dims(add.inputs[1])
    if first is None or second is None or len(first) != 3 or len(second) != 3:
        return False
    for axis, (one, other) in enumerate(zip(first, second)):
        if isinstance(one, int) and isinstance(other, int) and one == other:
            continue
        if axis == 0 and isinstance(one, str) and isinstance(other, str) and one and one == other:
            continue
        return False
    return True


def _second_add(add: Node, edges: Edges, graph: FusionGraph) -> bool:
    """CheckSecondAdd (and no graph output): inputs of the supported types, one output edge, input 1 a constant
    1-D bias whose size is input 0's (3-D) last size."""
    if not _floating(graph, add.inputs, LAYER_NORM_TYPES) or len(edges.output_edges(add)) != 1 \
            or _makes_graph_output(add, graph) or not graph.is_constant(add.inputs[1]):
        return False
    data, bias = graph.dims(add.inputs[0]), graph.dims(add.inputs[1])
    return data is not None and bias is not None and len(data) == 3 and len(bias) == 1 \
        and isinstance(data[2], int) and isinstance(bias[0], int) and data[2] == bias[0]


def skip_layer_norm(norm: Node, edges: Edges, graph: FusionGraph) -> Fused | None:
    """Add (+ a bias Add) -> LayerNormalization (1, 17) -> com.microsoft SkipLayerNormalization, where
    SkipLayerNormFusion::ApplyImpl fuses them: every input of each node FLOAT16, FLOAT or BFLOAT16; the first Add
    (Add1) makes the LayerNormalization's input 0. Format 1: Add1's input 0 is Add2(x, bias) -> (x, Add1's input 1,
    gamma, beta, bias); format 2: Add1's input 1 is Add2(skip, bias) -> (Add1's input 0, skip, gamma, beta, bias);
    format 3: Add1 alone -> (Add1's inputs, gamma, beta); the first that holds (CheckFirstAdd, CheckSecondAdd). The
    node takes the LayerNormalization's outputs and its epsilon (kDefaultSkipLayerNormEpsilon, 1e-12, where it has
    none); its axis is not read (the fused node normalises over the last axis)."""
    if not _plain_version(norm, "LayerNormalization", (1, 17), graph) \
            or not _floating(graph, norm.inputs, LAYER_NORM_TYPES):
        return None
    first = _producing_add(norm, 0, edges, graph)
    if first is None:
        return None
    gamma, beta = norm.inputs[1], norm.inputs[2] if len(norm.inputs) > 2 else ""
    found = None
    for position in (0, 1):  # formats 1 and 2: Add2 at Add1's input 0, then at its input 1
        second = _producing_add(first, position, edges, graph)
        if second is not None and _first_add(first, edges, graph) and _second_add(second, edges, graph):
            pair = [second.inputs[0], first.inputs[1 - position]]
            inputs = (*(pair if position == 0 else pair[::-1]), gamma, beta, second.inputs[1])
            found = inputs, (second, first, norm)
            break
    if found is None and _first_add(first, edges, graph):  # format 3
        found = (first.inputs[0], first.inputs[1], gamma, beta), (first, norm)
    if found is None:
        return None
    inputs, group = found
    sums = {"input_skip_sum": first.outputs[0]} if len(group) == 2 else {}  # the provider's ADD is Add1 itself
    epsilon = float(norm.attributes.get("epsilon", SKIP_LAYER_NORM_EPSILON))
    node = _fused_node(norm, f"{_name(norm)}/{SKIP_LAYER_NORM}", "SkipLayerNormalization", MS_DOMAIN, inputs,
                       norm.outputs, {"epsilon": epsilon}, 1, SKIP_LAYER_NORM, _members(group, edges),
                       intermediates=sums)
    return Fused((node,), group)


# ---------------------------------------------------------------- MatMulActivationFusion (matmul_activation_fusion.cc)


def matmul_activation(node: Node, edges: Edges, graph: FusionGraph) -> Fused | None:
    """FusedMatMul and the Softmax (1, 11, 13) that is its one output edge -> com.microsoft FusedMatMulActivation
    (the FusedMatMul's inputs and attributes, activation "Softmax", each Softmax attribute as activation_<name>),
    where MatMulActivationFusion::ApplyImpl fuses them (the DirectML provider's list alone): the FusedMatMul makes
    no graph output."""
    if not _contrib(node, FUSED_MATMUL) or node.activation is not None:
        return None
    readers = edges.output_edges(node)
    if len(readers) != 1 or not _plain_version(readers[0], "Softmax", (1, 11, 13), graph) \
            or _makes_graph_output(node, graph):
        return None
    softmax = readers[0]
    attributes = {**node.attributes, "activation": "Softmax",
                  **{f"activation_{key}": value for key, value in softmax.attributes.items()}}
    fused = _fused_node(node, f"{_name(node)}_FusedActivation", "FusedMatMulActivation", MS_DOMAIN, node.inputs,
                        softmax.outputs, attributes, 1, _fusions(node, fusion=MATMUL_ACTIVATION),
                        _members([node, softmax], edges), intermediates={"product": node.outputs[0]})
    return Fused((fused,), (node, softmax))


# ---------------------------------------------------------------- the DirectML provider's activation fusion


def fused_activation(node: Node, edges: Edges, graph: FusionGraph) -> Fused | None:
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
                     fusion=_fusions(node, fusion=ACTIVATION), fused=(*fused, activation),
                     activation=None if activation.op == "Dropout" else activation)
    return Fused((merged,), (node, activation))


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

Fusion = Callable[[Node, Edges, FusionGraph], "Fused | None"]
# In ONNX Runtime's order: Level 1 (MatMulAddFusion), Level 2 (the DirectML provider's transformers), each level's
# list repeated until the graph no longer changes; then the provider's own fusion, once.
LEVEL_1: tuple[tuple[str, Fusion], ...] = ((MATMUL_ADD, matmul_add),)
LEVEL_2: tuple[tuple[str, Fusion], ...] = ((GELU, gelu), (MATMUL_TRANSPOSE, matmul_transpose),
                                           (SKIP_LAYER_NORM, skip_layer_norm), (MATMUL_SCALE, matmul_scale),
                                           (MATMUL_ACTIVATION, matmul_activation))
PROVIDER: tuple[tuple[str, Fusion], ...] = ((ACTIVATION, fused_activation),)


def fused_model(model: LoadedModel, nodes: Sequence[Node]) -> tuple[Node, ...]:
    """The model's nodes after the fusions, their conditions read on the Sizes shape inference gives for the
    model's declared inputs (where a declared Size is symbolic, inference leaves what depends on it unknown)."""
    shapes = {declared.name: tuple(declared.dims) for declared in model.inputs if declared.dims is not None
              and all(isinstance(size, int) and size > 0 for size in declared.dims)}
    types = inferred_tensors(model, shapes)
    constants = constant_values(nodes, model.constants)
    graph = FusionGraph(constants, types, frozenset(declared.name for declared in model.outputs), model.opset,
                        folding_nodes(nodes, constants, types), model)
    return fused_nodes(nodes, graph)


def fused_nodes(nodes: Sequence[Node], graph: FusionGraph) -> tuple[Node, ...]:
    """The nodes after every fusion, in an order where each reads only values made before it (a fused node takes
    the place of the last node it stands for)."""
    current = list(nodes)
    for level in (LEVEL_1, LEVEL_2):
        for _step in range(STEPS):  # GraphTransformerManager::ApplyTransformers
            changed = False
            for _name, fusion in level:
                current, modified = _one_pass(current, fusion, graph)
                changed = changed or modified
            if not changed:
                break
    for _name, fusion in PROVIDER:
        current, _ = _one_pass(current, fusion, graph)
    return tuple(current)


def _one_pass(nodes: list[Node], fusion: Fusion, graph: FusionGraph) -> tuple[list[Node], bool]:
    """One fusion over the node list (in its order, each node once, as ONNX Runtime's topological walk); whether
    it changed anything."""
    edges = Edges(nodes)
    taken: set[int] = set()
    replacement: dict[int, tuple[Node, ...]] = {}
    bypassed: dict[int, tuple[Node, int]] = {}  # a bypassed node -> (itself, the id of the last node made past it)
    for node in nodes:
        if id(node) in taken:
            continue
        found = fusion(node, edges, graph)
        if found is None or any(id(member) in taken for member in found.removed):
            continue
        made = list(found.made)
        constants = _dead_constants(found.removed, edges, graph)
        if constants:  # first: the nodes a fused node stands for are kept in an order they can run in
            made[-1] = replace(made[-1], fused=(*constants, *made[-1].fused))
        last = max(found.removed, key=lambda member: edges.position[id(member)])
        for member in (*found.removed, *constants):
            taken.add(id(member))
            replacement[id(member)] = ()
        replacement[id(last)] = tuple(made)
        for node_bypassed in found.bypassed:
            bypassed[id(node_bypassed)] = (node_bypassed, id(made[-1]))
    if not replacement:
        return nodes, False
    result = [made for node in nodes for made in replacement.get(id(node), (node,))]
    return _without_unread(result, bypassed, graph), True


def _without_unread(nodes: list[Node], bypassed: Mapping[int, tuple[Node, int]], graph: FusionGraph) -> list[Node]:
    """The list without the bypassed nodes nothing reads any more (and that make no graph output), each then one
    of the nodes the last node made past it stands for."""
    read = {name for node in nodes for name in node.inputs if name}
    gone = {key: owner for key, (node, owner) in bypassed.items()
            if not _makes_graph_output(node, graph) and not any(name in read for name in node.outputs if name)}
    if not gone:
        return nodes
    kept = []
    for node in nodes:
        if id(node) in gone:
            continue
        owned = [bypassed[key][0] for key, owner in gone.items() if owner == id(node)]
        kept.append(replace(node, fused=(*_flattened(owned), *node.fused)) if owned else node)
    return kept


def _flattened(nodes: Sequence[Node]) -> tuple[Node, ...]:
    return tuple(member for node in nodes for member in (node.fused if node.fusion else (node,)))


def removed_outputs(node: Node) -> list[tuple[Node, str]]:
    """The tensors of the nodes a fused node stands for that no longer exist (each with the node that made it): not
    its outputs, nor the intermediate values its DirectML calls make under the model's names."""
    kept = set(node.outputs) | {name for _, name in node.intermediates}
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
