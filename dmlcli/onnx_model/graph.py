"""A model's graph as dmlcli runs it: its nodes in order, each node's ONNX call (the suite table's OnnxCall),
and the types and Sizes onnx.shape_inference gives every tensor for the inputs' Sizes of a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

import numpy as np

from ..errors import InputError
from ..suite.onnx.adapters import OnnxCall
from .loading import DEFAULT_DOMAINS, LoadedModel, require_onnx, tensor_array

# Operators whose outputs are random: never folded into constants (ONNX Runtime's constant folding leaves them).
RANDOM = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                    "Bernoulli"})
# Initializers up to this many elements go into the model shape inference reads (Reshape's shape, Slice's starts:
# what data propagation needs); larger ones are declared by type and Sizes alone, so no weights are copied.
SMALL_CONSTANT = 64


@dataclass(frozen=True, eq=False)
class Node:
    """One node: its position, ONNX names, decoded attributes and the opset of its domain."""

    index: int
    proto: object  # onnx.NodeProto
    op: str
    domain: str
    inputs: tuple[str, ...]  # "" for an optional input left out
    outputs: tuple[str, ...]  # "" for an optional output not asked for
    attributes: Mapping[str, object]
    opset: int | None
    # A node a graph fusion made (fusions.py): the fusion's name as ONNX Runtime names it, the model's nodes it
    # stands for, and the activation fused into it (DirectML's FusedActivation), where one is.
    fusion: str = ""
    fused: tuple["Node", ...] = ()
    activation: "Node | None" = None
    # A node the DirectML provider runs as several DirectML calls (the table's composed entries): the model's tensors
    # its intermediate values stand for, by the role the table's composition names them (role, tensor name), so that
    # --compare ort compares each call with ONNX Runtime's tensor. A role not given gets a name of the node's own.
    intermediates: tuple[tuple[str, str], ...] = ()

    @cached_property
    def output_count(self) -> int:
        """The outputs up to the last one asked for (an adapter returns at least those)."""
        named = [i for i, name in enumerate(self.outputs) if name]
        return named[-1] + 1 if named else 0

    @property
    def label(self) -> str:
        """How messages name the node: its name where it has one, else its position, with its operator."""
        name = self.proto.name
        return f"node {name!r} ({self.op})" if name else f"node #{self.index} ({self.op})"

    def inputs_of(self, values: Mapping[str, np.ndarray]) -> tuple:
        """The node's inputs among the given values (None for an input left out)."""
        return tuple(values[name] if name else None for name in self.inputs)

    def call(self, values: Mapping[str, np.ndarray]) -> OnnxCall:
        """The node's ONNX call on the given values (None for an input left out)."""
        return self.call_on(self.inputs_of(values))

    def call_on(self, inputs: tuple) -> OnnxCall:
        """The node's ONNX call on its inputs, by position."""
        return OnnxCall(self.op, inputs, self.attributes, self.output_count, self.outputs, self.opset)


def nodes_of(model: LoadedModel) -> tuple[Node, ...]:
    """The graph's nodes in an order where each reads only values made before it (ONNX asks the graph to be
    sorted so; a model that is not, is sorted here). InputError for a node that reads a value nobody makes."""
    graph = model.proto.graph
    nodes = [Node(index, proto, proto.op_type, proto.domain, tuple(proto.input), tuple(proto.output),
                  decoded_attributes(proto, model),
                  model.opset if proto.domain in DEFAULT_DOMAINS else model.opsets.get(proto.domain))
             for index, proto in enumerate(graph.node)]
    known = set(model.constants) | {declared.name for declared in model.inputs}
    ordered, waiting = [], list(nodes)
    while waiting:
        # The first node (in the model's order) whose inputs are all made: a sorted graph keeps its order.
        node = next((node for node in waiting if all(not name or name in known for name in node.inputs)), None)
        if node is None:
            stuck = waiting[0]
            missing = next(name for name in stuck.inputs if name and name not in known)
            raise InputError(f"{model.shown}: {stuck.label} reads {missing!r}, which no node, input or initializer "
                             "of the graph makes")
        known.update(name for name in node.outputs if name)
        ordered.append(node)
        waiting.remove(node)
    return tuple(ordered)


def decoded_attributes(proto, model: LoadedModel) -> dict[str, object]:
    """A node's attributes as the table's adapters read them: numbers, lists, text (strings decoded), tensors as
    arrays; subgraphs stay protos (no DirectML operator takes one)."""
    onnx = require_onnx()
    found = {}
    for attribute in proto.attribute:
        if attribute.ref_attr_name:
            raise InputError(f"{model.shown}: node {proto.name!r} ({proto.op_type}) refers to a function's attribute "
                             f"{attribute.ref_attr_name!r} outside a function")
        value = onnx.helper.get_attribute_value(attribute)
        if attribute.type == onnx.AttributeProto.TENSOR:
            value = tensor_array(value, model.folder, model.shown)
        elif attribute.type == onnx.AttributeProto.STRING:
            value = value.decode("utf-8", "replace")
        elif attribute.type == onnx.AttributeProto.STRINGS:
            value = [item.decode("utf-8", "replace") for item in value]
        found[attribute.name] = value
    return found


@dataclass(frozen=True)
class Inferred:
    """What shape inference says of one tensor: its ONNX element type and, where fully known, its Sizes; `dims`
    gives each dimension as inference has it (a size, a symbolic name, or None) where the rank is known."""

    elem_type: int
    shape: tuple[int, ...] | None
    dims: tuple[int | str | None, ...] | None = None


def inferred_tensors(model: LoadedModel, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Inferred]:
    """Every tensor's type and Sizes by onnx.shape_inference (with data propagation: Reshape's shape computed by
    Shape, Gather and Concat), for the graph inputs' Sizes of a run. Large initializers are declared by their type
    and Sizes only, so no weights are copied into the protobuf inference serialises. A graph shape inference
    cannot follow gives what it can (an operator it does not know leaves its outputs unknown)."""
    onnx = require_onnx()
    helper = onnx.helper
    source = model.proto
    probe = onnx.ModelProto()
    probe.ir_version = max(source.ir_version, 4)  # initializers need not be graph inputs from IR 4
    probe.opset_import.extend(source.opset_import)
    probe.functions.extend(source.functions)
    graph = probe.graph
    graph.node.extend(source.graph.node)
    for tensor in source.graph.initializer:
        if np.prod(tensor.dims, dtype=np.int64) <= SMALL_CONSTANT and tensor.data_location != onnx.TensorProto.EXTERNAL:
            graph.initializer.append(tensor)
        else:
            graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    for declared in model.inputs:
        shape = input_shapes.get(declared.name)
        graph.input.append(helper.make_tensor_value_info(declared.name, declared.elem_type,
                                                         None if shape is None else list(shape)))
    graph.output.extend(source.graph.output)
    try:
        inferred = onnx.shape_inference.infer_shapes(probe, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is a help; the run finds the Sizes itself
        return {}
    found = {}
    for info in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input):
        if not info.type.HasField("tensor_type"):
            continue
        tensor = info.type.tensor_type
        dims = None
        if tensor.HasField("shape"):
            dims = tuple(int(d.dim_value) if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param")
                         else None for d in tensor.shape.dim)
        shape = dims if dims is not None and all(isinstance(size, int) for size in dims) else None
        found[info.name] = Inferred(tensor.elem_type, shape, dims)
    return found


def part_nodes(node: Node, parts) -> tuple[Node, ...]:
    """The nodes of the DirectML calls a composed node is run as (the table's Parts), each an ONNX call its own
    entry maps, named after the node ("<name>/<position> <op>")."""
    onnx = require_onnx()
    made = []
    for position, part in enumerate(parts):
        proto = onnx.helper.make_node(part.onnx_op, list(part.inputs), list(part.outputs),
                                      name=f"{node.proto.name or node.op}/{position} {part.onnx_op}",
                                      **dict(part.attributes))
        made.append(Node(node.index, proto, part.onnx_op, "", tuple(part.inputs), tuple(part.outputs),
                         dict(part.attributes), part.opset))
    return tuple(made)
