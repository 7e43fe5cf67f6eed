"""A `dmlSerializedGraph` dispatchable: a serialized DirectML graph run as a graph of dmlcli's operators.

As DxDispatch runs it (DxDispatch/src/dxdispatch/DmlDispatchable.cpp, BuildAndCompileGraph and the bind points
of GetSerializedBindPoints): `sourcePath` names the graph file, read as reader.py reads it; a constant node that
names its data reads the file NAME.bin beside the graph, and its consumers' tensors are OWNED_BY_DML; a dispatch
binds the graph's inputs and outputs by their names (graphInputNames, graphOutputNames). Each operator node
becomes the operator dispatchable a DxDispatch JSON desc would give (dispatchable.parse_dispatchable, with the
node's tensor descs and attributes under DirectML's field names), is validated as one (binding.check_dispatchable)
and runs through the engine, in the file's order, which lists producers first.

Where the values live while the graph runs: a graph input is read in place from the buffer bound to it; a
constant from its bytes; an operator's output is written, through its desc's Strides, into a buffer of the
graph's own (GraphBuffer), TotalTensorSizeInBytes long, where its consumers read it through theirs; the graph's
outputs are copied into their bound buffers once every node has run. Every check is made before anything runs:
the nodes' rules, each edge's two ends (one data type, enough bytes), each constant's length, each binding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...calls.validation import field_of
from ...data_types import ALL_DATA_TYPES
from ...errors import InputError, ValidationError
from ..files import PathRules, RegularFile, file_beside, shown_path, source_file
from ..jsonc import shown
from ..memory import MemoryBudget
from ..binding import BoundTensor, CheckedDispatchable, bind_tensor, check_dispatchable, sharing, tensors_overlap
from ..dispatchable import (BindingSource, Dispatchable, DispatchCommand, binding_source, find_model_operator,
                            parse_dispatchable)
from .reader import GraphRecord, NodeRecord, read_graph

GRAPH_KEYS = ("type", "sourcePath", "executionFlags")
# The file's bytes stay while the model lives (raw constants are views of them); reading makes records beside
# them (names and small tuples): at their peak about as many bytes again, with Python's overheads.
GRAPH_PEAK_FACTOR = 4
INPUT, CONSTANT, INTERMEDIATE = "graph input", "constant", "intermediate"


@dataclass(frozen=True)
class GraphBuffer:
    """A buffer of the graph's own, where a BoundTensor names a model resource otherwise."""

    kind: str  # CONSTANT (a constant node's bytes) or INTERMEDIATE (an operator's output)
    name: str  # the edge's name


@dataclass(frozen=True)
class GraphStep:
    """An operator node, as the operator dispatchable it amounts to."""

    label: str  # "nodes[2] ('model_output_dmlEp_0')", for messages
    dispatchable: Dispatchable
    sources: dict[str, tuple[str, str]]  # each input tensor (ATensor, InputTensors[1]): (INPUT | CONSTANT | INTERMEDIATE, edge)
    targets: dict[str, str]  # each output tensor: the edge it makes


@dataclass(frozen=True)
class GraphDispatchable:
    name: str
    source_path: Path  # resolved, inside the model's folder unless paths outside are allowed
    shown_source: str
    steps: tuple[GraphStep, ...]
    constants: dict[str, object]  # a constant node's output edge -> its bytes (bytes, or a uint8 view of the file)
    input_names: tuple[str, ...]  # the bind points a dispatch binds
    output_names: tuple[str, ...]
    constant_nodes: tuple[str, ...]  # named constants' nodes: DxDispatch binds them itself, at initialisation


# ---------------------------------------------------------------- reading


def parse_graph_dispatchable(name: str, value: dict, *, rules: PathRules, budget: MemoryBudget,
                             where: str) -> GraphDispatchable:
    """ParseModelDmlSerializedGraphDispatchableDesc, then the graph read, its nodes mapped and its constants read."""
    unknown = [key for key in value if key not in GRAPH_KEYS]
    if "bindings" in unknown:
        raise InputError(f"{where}: a dmlSerializedGraph dispatchable takes no \"bindings\" (DxDispatch replaces them "
                         "with the graph's named constants); bind the graph's inputs and outputs in the dispatch command")
    if unknown:
        raise InputError(f"{where}: unknown key {shown(unknown[0])} in the dmlSerializedGraph dispatchable (expected "
                         f"{', '.join(GRAPH_KEYS)})")
    source = value.get("sourcePath")
    if not isinstance(source, str) or not source:
        raise InputError(f"{where}: a dmlSerializedGraph dispatchable needs a \"sourcePath\" (the graph's .bin file)")
    path = source_file(source, rules, where)
    shown_source = f"sourcePath {shown_path(source)}"
    here = f"{where}: {shown_source}"
    with RegularFile(path, where, shown_source) as handle:
        budget.claim(handle.size, f"reading the serialized graph ({handle.size} bytes)", where,
                     peak=handle.size * GRAPH_PEAK_FACTOR)
        data = handle.read_all()
    graph = read_graph(data, here)
    constants, constant_nodes = read_constants(graph, path.parent, rules, budget, here)
    steps = tuple(graph_step(node, graph, constants, constant_nodes, here) for node in graph.nodes
                  if node.operator is not None)
    if not steps:
        raise InputError(f"{here}: the graph has no operator node")
    _check_outputs_made_by_operators(graph, constants, here)
    return GraphDispatchable(name, path, shown_source, steps, constants, graph.input_names, graph.output_names,
                             tuple(node.name for node in graph.nodes if node.constant and node.constant.name))


def read_constants(graph: GraphRecord, folder: Path, rules: PathRules, budget: MemoryBudget,
                   where: str) -> tuple[dict[str, object], set[str]]:
    """(each constant node's output edge -> its bytes, the edges of named constants).

    A named constant's data are the file NAME.bin in the graph's folder (DmlDispatchable.cpp,
    CreateResourceFromConstantNode), which must stay inside the model's folder; its size is claimed from the
    memory budget before it is read. As in DxDispatch, a named constant must feed an operator (whose tensor
    desc gives its data type).
    """
    consumed = {name for node in graph.nodes for name in node.input_names if name}
    constants: dict[str, object] = {}
    named: set[str] = set()
    for node in graph.nodes:
        if node.constant is None:
            continue
        edges = [name for name in node.output_names if name]
        if node.constant.name is None:
            constants.update((edge, node.constant.data) for edge in edges)
            continue
        if not any(edge in consumed for edge in edges):
            raise InputError(f"{where}: {node.label}: the constant {shown(node.constant.name)} feeds no operator "
                             "(DxDispatch takes a named constant's data type from the operator it feeds)")
        shown_file = f"the constant's file {shown_path(node.constant.name + '.bin')}"
        here = f"{where}: {node.label}"
        path = file_beside(folder, node.constant.name + ".bin", rules, here, shown_file)
        with RegularFile(path, here, shown_file) as handle:
            budget.claim(handle.size, f"reading {shown_file} ({handle.size} bytes)", here)
            data = handle.read_all()
        constants.update((edge, data) for edge in edges)
        named.update(edges)
    return constants, named


def _check_outputs_made_by_operators(graph: GraphRecord, constants: dict, where: str) -> None:
    for position, name in enumerate(graph.output_names):
        if name in constants:
            raise InputError(f"{where}: graphOutputNames[{position}] {shown(name)} is a constant node's output; a "
                             "graph's outputs come from its operators")


def graph_step(node: NodeRecord, graph: GraphRecord, constants: dict, named_constants: set[str],
               where: str) -> GraphStep:
    """The operator node as an operator dispatchable: its tensors by DirectML field, in the operator's order (one
    input name per input field, empty for one left out; a tensor array takes every remaining tensor desc, as
    DeserializeDmlGraph reads them), and its attributes by their DirectML field names."""
    label = f"{where}: {node.label}"
    operator = find_model_operator(node.operator.type_name, label)
    desc: dict = {}

    def source(edge: str) -> tuple[str, str]:
        if edge in graph.input_names:
            return INPUT, edge
        return (CONSTANT if edge in constants else INTERMEDIATE), edge

    inputs = _fields(operator.inputs, operator.variadic, node.input_names, node.operator.inputs, "input", label,
                     operator.dml_name)
    sources = {}
    for key, edge, record in inputs:
        _put(desc, key, record.as_desc(owned_by_dml=edge in named_constants))
        sources[key] = source(edge)
    targets = {}
    for key, edge, record in _fields(operator.outputs, operator.variadic, node.output_names, node.operator.outputs,
                                     "output", label, operator.dml_name):
        _put(desc, key, record.as_desc())
        targets[key] = edge
    parameters = {parameter.field: parameter for parameter in operator.parameters}
    for name, value in node.operator.attributes:
        if name in operator.tensors:
            raise InputError(f"{label}: attribute {shown(name)} names a tensor field; tensors come from the node's "
                             "inputs and outputs")
        if name in desc:
            raise InputError(f"{label}: the field {shown(name)} is given twice")
        desc[name] = _desc_value(parameters.get(name), value)
    dispatchable = parse_dispatchable(node.name, {"type": operator.dml_name, "desc": desc}, {}, where=label)
    return GraphStep(node.label, dispatchable, sources, targets)


def _fields(fields: tuple[str, ...], variadic: str | None, names: tuple[str, ...], records: tuple, kind: str,
            where: str, operator: str) -> list[tuple[str, str, object]]:
    """(tensor key, edge name, tensor record) of each present tensor among `fields` (inputs or outputs)."""
    found = []
    names_left, records_left = list(names), list(records)
    for field in fields:
        if field == variadic:
            position = 0
            while records_left:
                if not names_left or not names_left[0]:
                    raise InputError(f"{where}: {kind}s has {len(records)} tensor descs, but {kind}Names does not name "
                                     f"each tensor of {field}")
                found.append((f"{field}[{position}]", names_left.pop(0), records_left.pop(0)))
                position += 1
            continue
        if not names_left:
            raise InputError(f"{where}: {kind}Names has {len(names)} names, but {operator} has {kind} tensors "
                             f"{', '.join(fields)} (one name each, empty for one left out)")
        name = names_left.pop(0)
        if not name:
            continue  # a _Maybenull_ tensor left out: the desc does not have it
        if not records_left:
            raise InputError(f"{where}: {kind}s has {len(records)} tensor descs, fewer than the names in {kind}Names")
        found.append((field, name, records_left.pop(0)))
    if names_left or records_left:
        raise InputError(f"{where}: {kind}Names has {len(names)} names and {kind}s {len(records)} tensor descs, more "
                         f"than {operator}'s {kind} tensors {', '.join(fields)} take")
    return found


def _put(desc: dict, key: str, tensor: dict) -> None:
    """A tensor desc into the desc, a tensor array's one after another in its list."""
    field = field_of(key)
    if field != key:
        desc.setdefault(field, []).append(tensor)
    else:
        desc[field] = tensor


def _desc_value(parameter, value):
    """An attribute's value as a DxDispatch desc writes it: a data type field holds DML_TENSOR_DATA_TYPE's number
    in the file, and its name in a desc; the other kinds read numbers as they are (an enum its number too)."""
    from ...operators.table.parameters import DataTypeParameter

    if isinstance(parameter, DataTypeParameter) and isinstance(value, int):
        for data_type in ALL_DATA_TYPES:
            if data_type.value == value:
                return data_type.name
    return value


# ---------------------------------------------------------------- planning


@dataclass(frozen=True)
class PlannedStep:
    step: GraphStep
    checked: CheckedDispatchable
    tensors: dict[str, BoundTensor]  # every tensor of the desc: in a model resource or in a GraphBuffer


@dataclass(frozen=True)
class PlannedGraphDispatch:
    command: DispatchCommand
    dispatchable: GraphDispatchable
    steps: tuple[PlannedStep, ...]
    buffer_sizes: dict[GraphBuffer, int]  # each operator output's buffer, TotalTensorSizeInBytes long
    outputs: tuple[tuple[BoundTensor, BoundTensor], ...]  # each graph output: (in the graph's buffer, in the bound one)

    @property
    def name(self) -> str:
        return self.dispatchable.name

    def graph_buffers(self) -> dict:
        """The graph's own buffers for one run: the constants' bytes and fresh (zeroed) intermediate ones."""
        buffers: dict = {GraphBuffer(CONSTANT, edge): data for edge, data in self.dispatchable.constants.items()}
        buffers.update((key, bytearray(size)) for key, size in self.buffer_sizes.items())
        return buffers

    @property
    def largest_step_elements(self) -> int:
        return max(sum(int(np.prod(t.desc.sizes, dtype=np.int64)) for t in step.tensors.values())
                   for step in self.steps)


def check_graph(dispatchable: GraphDispatchable, feature_level=None) -> tuple[CheckedDispatchable, ...]:
    """Each operator node validated at `feature_level` as an operator dispatchable (ValidationError, exit 3)."""
    return tuple(check_dispatchable(step.dispatchable, feature_level,
                                    where=f"dispatchable {shown(dispatchable.name)}: {step.label}")
                 for step in dispatchable.steps)


def parse_graph_bindings(value: dict, dispatchable: GraphDispatchable, resources: dict, *,
                         where: str) -> dict[str, BindingSource]:
    """Bindings by the graph's input and output names: a resource, {"name", "elementOffset"} or a one-item array."""
    points = dispatchable.input_names + dispatchable.output_names
    bindings = {}
    for name, source in value.items():
        here = f"{where}: {name}"
        if name in dispatchable.constant_nodes:
            raise InputError(f"{here}: is a constant of the graph, read from {shown_path(name + '.bin')} beside it; only "
                             "the graph's inputs and outputs are bound")
        if name not in points:
            raise InputError(f"{here}: the graph has no input or output named {shown(name)} (inputs: "
                             f"{', '.join(map(shown, dispatchable.input_names)) or 'none'}; outputs: "
                             f"{', '.join(map(shown, dispatchable.output_names))})")
        if isinstance(source, list):
            if len(source) != 1:
                raise InputError(f"{here}: bind point {shown(name)} requires 1 resource, but {len(source)} were bound")
            source = source[0]
        bindings[name] = binding_source(source, resources, where=here)
    return bindings


def plan_graph_dispatch(command: DispatchCommand, dispatchable: GraphDispatchable,
                        checked: tuple[CheckedDispatchable, ...], resources: dict) -> PlannedGraphDispatch:
    """Bind one dispatch of the graph: each node's tensors to a bound resource (of the model's `resources`) or a
    buffer of the graph's own, each checked as DirectML checks a binding (range, alignment) or as an edge (one data
    type, enough bytes)."""
    prefix = f"command {command.index} (dispatch {shown(dispatchable.name)})"
    made: dict[str, tuple[BoundTensor, int, int, str]] = {}  # edge -> its producer's tensor, size, step, tensor key
    planned, sizes, inputs = [], {}, []  # inputs: (what, bound tensor) of each graph input read
    for index, (step, step_checked) in enumerate(zip(dispatchable.steps, checked)):
        here = f"{prefix}: {step.label}"
        tensors = {}
        for key, desc in step.dispatchable.tensors.items():
            strides, total = step_checked.strides[key], step_checked.total_sizes[key]
            if key in step.targets:
                buffer = GraphBuffer(INTERMEDIATE, step.targets[key])
                tensors[key] = BoundTensor(desc, buffer, 0, strides, False)
                made[buffer.name] = (tensors[key], total, index, key)
                sizes[buffer] = total
                continue
            kind, edge = step.sources[key]
            if kind == INPUT:
                tensors[key] = bind_tensor(key, desc, _bound(command, edge, "input", here), False, step_checked,
                                           resources, here)
                inputs.append((f"graph input {shown(edge)}", tensors[key]))
            elif kind == CONSTANT:
                tensors[key] = _constant(key, desc, edge, dispatchable.constants[edge], strides, total, here)
            else:
                tensors[key] = _intermediate(key, desc, edge, made[edge][:2], strides, total, here)
        planned.append(PlannedStep(step, step_checked, tensors))
    outputs, bound_outputs = [], []
    for edge in dispatchable.output_names:
        produced, _, step_index, key = made[edge]
        here = f"{prefix}: {dispatchable.steps[step_index].label}"
        bound = bind_tensor(key, produced.desc, _bound(command, edge, "output", here), False, checked[step_index],
                            resources, here)
        outputs.append((produced, bound))
        bound_outputs.append((f"graph output {shown(edge)}", bound))
    _check_output_aliasing(bound_outputs, inputs, prefix)
    return PlannedGraphDispatch(command, dispatchable, tuple(planned), sizes, tuple(outputs))


def _bound(command: DispatchCommand, edge: str, kind: str, where: str) -> BindingSource:
    binding = command.bindings.get(edge)
    if binding is None:
        raise InputError(f"{where}: nothing bound for graph {kind} {shown(edge)}")
    return binding



def _constant(key: str, desc, edge: str, data, strides, total: int, where: str) -> BoundTensor:
    if len(data) < total:
        raise InputError(f"{where}: {key} reads {total} bytes (TotalTensorSizeInBytes) from the constant "
                         f"{shown(edge)}, which holds {len(data)}")
    return BoundTensor(desc, GraphBuffer(CONSTANT, edge), 0, strides, True)


def _intermediate(key: str, desc, edge: str, producer: tuple[BoundTensor, int], strides, total: int,
                  where: str) -> BoundTensor:
    made, size = producer
    if made.desc.data_type != desc.data_type:
        raise InputError(f"{where}: {key} reads {shown(edge)} as {desc.data_type.name}, but its producer writes "
                         f"{made.desc.data_type.name}")
    if total > size:
        raise InputError(f"{where}: {key} reads {total} bytes (TotalTensorSizeInBytes) of {shown(edge)}, but its "
                         f"producer's tensor has {size}")
    return BoundTensor(desc, GraphBuffer(INTERMEDIATE, edge), 0, strides, False)


def _check_output_aliasing(outputs: list[tuple[str, BoundTensor]], inputs: list[tuple[str, BoundTensor]],
                           where: str) -> None:
    """A graph's outputs may share bytes neither with each other nor with its inputs: DirectML documents
    in-place execution for some operators only, and for no graph. Each item: (what it is, the bound tensor)."""
    for position, (name, output) in enumerate(outputs):
        for other_name, other in outputs[position + 1:] + inputs:
            overlapping = tensors_overlap(output, other)  # None: could not be ruled out within bounded work
            if overlapping is not False:
                raise ValidationError(f"{where}: {name} and {other_name} {sharing(overlapping)} bytes "
                                      f"of buffer {shown(output.resource)}; a graph's outputs need memory of "
                                      "their own")
