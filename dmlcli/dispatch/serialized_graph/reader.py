"""A DirectML serialized graph file read into plain records, every offset checked.

The file is a DmlGraphDesc FlatBuffer (generated/DmlGraphDesc.fbs), read with the classes flatc generated from
that schema (generated/dml_graph_generated.py) on the `flatbuffers` runtime, imported here only, when such a
file is read. What is read follows DirectML's own reader, DeserializeDmlGraph (DxDispatch/src/dxdispatch/
DirectMLHelpers/DmlGraphDeserialization.cpp, the same as ONNX Runtime's): nodes in the order the file lists
them, each an operator (its DML_OPERATOR_* type, the tensor descs of its present tensors, its attributes) or a
constant (raw bytes, or a name: the file NAME.bin beside the graph); edges found by name, each input name being a
graph input or the output of an earlier node.

FlatBuffers' Python runtime trusts its input (it has no verifier), so a file is untrusted here: every read
goes through _Reader, which turns an offset outside the file (a struct or numpy error, a number out of its
type's range, a string running past the end) into one InputError naming the field; and since offsets may share
one object many times over, the reads are counted against the file's size (WORK_PER_BYTE), so a small file
cannot make the reading take long. Nothing here knows dmlcli's operators: graph.py maps the records onto them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import BackendUnavailableError, InputError, raise_interruption
from ..jsonc import shown

INSTALL_FLATBUFFERS = "pip install flatbuffers"
# Bytes of names and vectors a file may make the reader go through, per byte of file (plus a floor): a file
# read once costs about 1 per byte; names shared by a producer and its consumers cost a few times that.
WORK_PER_BYTE = 16
WORK_FLOOR = 1 << 20
# The attribute kinds a fused activation's fields may have (its fields are FLOATs; nothing nests in them).
_SCALAR_KINDS = ("UInt32", "UInt64", "Int32", "Float32", "Bool")


class _OutsideFile(Exception):
    """A string that runs past the end of the file (the runtime would silently cut it short)."""


class _FileBytes(bytes):
    """The file's bytes, refusing a slice that ends past them: flatbuffers' String() slices its bytes."""

    def __getitem__(self, key):
        if isinstance(key, slice) and key.stop is not None and key.stop > len(self):
            raise _OutsideFile
        return super().__getitem__(key)


# What flatbuffers' runtime raises on an offset outside the file: struct.error (a read past the end),
# TypeError (an offset outside uint32, enforce_number), ValueError (numpy.frombuffer past the end).
_RUNTIME_ERRORS = (struct.error, TypeError, ValueError, IndexError, OverflowError, _OutsideFile)


@dataclass(frozen=True)
class TensorRecord:
    """A DmlBufferTensorDesc as the file has it."""

    data_type: str  # "DML_TENSOR_DATA_TYPE_FLOAT32"
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None
    total_size_in_bytes: int

    def as_desc(self, owned_by_dml: bool = False) -> dict:
        """The tensor desc in DxDispatch's JSON spelling (what dispatchable.parse_tensor_desc reads)."""
        desc = {"DataType": self.data_type, "Sizes": list(self.sizes),
                "TotalTensorSizeInBytes": self.total_size_in_bytes}
        if self.strides is not None:
            desc["Strides"] = list(self.strides)
        if owned_by_dml:
            desc["Flags"] = "OWNED_BY_DML"
        return desc


@dataclass(frozen=True)
class OperatorRecord:
    type_name: str  # "DML_OPERATOR_GEMM"
    inputs: tuple[TensorRecord, ...]  # the present input tensors' descs, in the operator's field order
    outputs: tuple[TensorRecord, ...]
    # (DirectML field name, value in DxDispatch's JSON spelling), for each attribute the file gives a value;
    # an absent optional one (a NULL FusedActivation or ScaleBias) is a nameless entry and left out.
    attributes: tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class ConstantRecord:
    name: str | None  # ConstantName: the data are the file NAME.bin beside the graph
    data: np.ndarray | None  # ConstantRawData: the bytes (a uint8 view of the file)


@dataclass(frozen=True)
class NodeRecord:
    index: int
    name: str
    input_names: tuple[str, ...]  # "" where an optional input is left out
    output_names: tuple[str, ...]
    operator: OperatorRecord | None
    constant: ConstantRecord | None

    @property
    def label(self) -> str:
        return f"nodes[{self.index}] ({shown(self.name)})"


@dataclass(frozen=True)
class GraphRecord:
    nodes: tuple[NodeRecord, ...]
    input_names: tuple[str, ...]  # graphInputNames (the bind points a dispatch binds)
    output_names: tuple[str, ...]


def read_graph(data: bytes, where: str) -> GraphRecord:
    """The graph in `data` (a serialized graph file's bytes); InputError (exit 2) for a malformed one."""
    try:
        from .generated import dml_graph_generated as fb
    except ImportError as error:  # a core dependency, but an install may lack it: said as the extras' are (exit 4)
        raise_interruption(error)
        raise BackendUnavailableError(f"{where}: serialized DirectML graphs are read with the flatbuffers package, "
                                      f"which is not installed: {INSTALL_FLATBUFFERS}") from None

    reader = _Reader(data, where, fb)
    root = reader.read("the root table", lambda: fb.DmlGraphDesc.GetRootAs(reader.data, 0))
    reader.read("the root table", root.NodesIsNone)  # its vtable: the first read through the root's offset
    inputs = reader.names("graphInputNames", root.GraphInputNamesLength, root.GraphInputNames)
    outputs = reader.names("graphOutputNames", root.GraphOutputNamesLength, root.GraphOutputNames)
    count = reader.length("nodes", root.NodesLength, 4)
    nodes = tuple(reader.node(index, reader.read(f"nodes[{index}]", root.Nodes, index)) for index in range(count))
    graph = GraphRecord(nodes, inputs, outputs)
    check_edges(graph, where)
    return graph


def check_edges(graph: GraphRecord, where: str) -> None:
    """Each input name is a graph input or an earlier node's output; each output name is made once; each graph
    output is made by some node (DeserializeDmlGraph's PopulateEdges, which needs producers listed first)."""
    _no_repeats(graph.input_names, "graphInputNames", where)
    _no_repeats(graph.output_names, "graphOutputNames", where)
    graph_inputs = set(graph.input_names) - {""}
    made: dict[str, NodeRecord] = {}
    for node in graph.nodes:
        if node.constant is not None and any(node.input_names):
            raise InputError(f"{where}: {node.label}: a constant node has no inputs, but inputNames lists "
                             f"{', '.join(shown(n) for n in node.input_names if n)}")
        for position, name in enumerate(node.input_names):
            if name and name not in graph_inputs and name not in made:
                raise InputError(f"{where}: {node.label}: inputNames[{position}] {shown(name)} is neither a graph input "
                                 "nor an output of an earlier node (a serialized graph lists producers first)")
        for position, name in enumerate(node.output_names):
            if not name:
                continue
            if name in made or name in graph_inputs:
                other = f"{made[name].label}'s output" if name in made else "a graph input"
                raise InputError(f"{where}: {node.label}: outputNames[{position}] {shown(name)} is also {other}; "
                                 "each edge has one producer")
            made[name] = node
    for position, name in enumerate(graph.output_names):
        if name and name not in made:
            raise InputError(f"{where}: graphOutputNames[{position}] {shown(name)} is not an output of any node")


def _no_repeats(names: tuple[str, ...], field: str, where: str) -> None:
    seen: set[str] = set()
    for position, name in enumerate(names):
        if name and name in seen:
            raise InputError(f"{where}: {field}[{position}] {shown(name)} is named twice")
        seen.add(name)


class _Reader:
    """Reads through the generated classes; each read checked and counted (see the module's docstring)."""

    def __init__(self, data: bytes, where: str, fb):
        self.data = _FileBytes(data)
        self.where = where
        self.fb = fb
        self.work = 0
        self.limit = WORK_PER_BYTE * len(data) + WORK_FLOOR

    # ---- checked reads

    def read(self, field: str, accessor: Callable, *arguments):
        try:
            return accessor(*arguments)
        except _RUNTIME_ERRORS:
            raise InputError(f"{self.where}: {field}: an offset or length points outside the file's {len(self.data)} "
                             "bytes (not a DirectML serialized graph, or a damaged one)") from None
        except RecursionError:  # an object made to contain itself
            raise InputError(f"{self.where}: {field}: nested without end (a damaged file)") from None

    def charge(self, amount: int, field: str) -> None:
        self.work += amount
        if self.work > self.limit:
            raise InputError(f"{self.where}: {field}: the file's offsets lead to more than {self.limit} bytes of "
                             f"names and vectors from a {len(self.data)}-byte file (objects shared over and over); "
                             "refused as malformed")

    def length(self, field: str, accessor: Callable, width: int) -> int:
        """A vector's length, which cannot exceed what the file holds."""
        count = self.read(f"{field} (its length)", accessor)
        if count * width > len(self.data):
            raise InputError(f"{self.where}: {field}: its length {count} needs more than the file's {len(self.data)} "
                             "bytes (not a DirectML serialized graph, or a damaged one)")
        self.charge(4 + count * width, field)
        return count

    def text(self, field: str, accessor: Callable, *arguments) -> str:
        raw = self.read(field, accessor, *arguments)
        if raw is None:
            return ""
        self.charge(4 + len(raw), field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{self.where}: {field}: is not UTF-8 text") from None

    def names(self, field: str, length: Callable, accessor: Callable) -> tuple[str, ...]:
        return tuple(self.text(f"{field}[{i}]", accessor, i) for i in range(self.length(field, length, 4)))

    def numbers(self, field: str, length: Callable, as_numpy: Callable) -> tuple[int, ...]:
        if self.length(field, length, 4) == 0:
            return ()
        return tuple(int(v) for v in self.read(field, as_numpy).tolist())

    def union(self, field: str, type_accessor: Callable, value_accessor: Callable, names: type):
        """(member name or None, a Table at the member) for a union field; an unknown type code is refused."""
        code = self.read(f"{field}_type", type_accessor)
        members = {value: name for name, value in vars(names).items() if not name.startswith("_")}
        if code not in members:
            raise InputError(f"{self.where}: {field}: unknown {names.__name__} type code {code} (expected "
                             f"{', '.join(f'{v} {n}' for v, n in sorted(members.items()))})")
        table = self.read(field, value_accessor)
        return (None if code == 0 else members[code]), table

    def view(self, kind, table):
        """The generated class `kind` placed at a union member's position."""
        obj = kind()
        obj.Init(table.Bytes, table.Pos)
        return obj

    # ---- the graph's parts

    def node(self, index: int, flat) -> NodeRecord:
        field = f"nodes[{index}]"
        self.charge(16, field)
        name = self.text(f"{field}.name", flat.Name)
        if not name:
            raise InputError(f"{self.where}: {field}: a node needs a name (DirectML's reader refuses one without)")
        label = f"{field} ({shown(name)})"
        input_names = self.names(f"{label}.inputNames", flat.InputNamesLength, flat.InputNames)
        output_names = self.names(f"{label}.outputNames", flat.OutputNamesLength, flat.OutputNames)
        kind, table = self.union(f"{label}.desc", flat.DescType, flat.Desc, self.fb.NodeDesc)
        if kind is None or table is None:
            raise InputError(f"{self.where}: {label}: has no desc (an operator or a constant)")
        if kind == "OperatorNodeDesc":
            operator = self.operator(f"{label}.desc", self.view(self.fb.OperatorNodeDesc, table))
            return NodeRecord(index, name, input_names, output_names, operator, None)
        constant = self.constant(f"{label}.desc", self.view(self.fb.ConstantNodeDesc, table))
        return NodeRecord(index, name, input_names, output_names, None, constant)

    def constant(self, field: str, flat) -> ConstantRecord:
        kind, table = self.union(f"{field}.data", flat.DataType, flat.Data, self.fb.ConstantNodeDescDetail)
        if kind is None or table is None:
            raise InputError(f"{self.where}: {field}: a constant node needs its data or the name of its data")
        if kind == "ConstantName":
            name = self.text(f"{field}.data.name", self.view(self.fb.ConstantName, table).Name)
            if not name:
                raise InputError(f"{self.where}: {field}: the constant's name is empty (it names the file NAME.bin "
                                 "that holds its data)")
            return ConstantRecord(name, None)
        raw = self.view(self.fb.ConstantRawData, table)
        if self.length(f"{field}.data.data", raw.DataLength, 1) == 0:
            return ConstantRecord(None, np.zeros(0, dtype=np.uint8))
        data = self.read(f"{field}.data.data", raw.DataAsNumpy)
        return ConstantRecord(None, data)

    def operator(self, field: str, flat) -> OperatorRecord:
        type_name = self.text(f"{field}.type", flat.Type)
        if not type_name:
            raise InputError(f"{self.where}: {field}: the operator type is empty (expected DML_OPERATOR_...)")
        inputs = tuple(self.tensor(f"{field}.inputs[{i}]", self.read(f"{field}.inputs[{i}]", flat.Inputs, i))
                       for i in range(self.length(f"{field}.inputs", flat.InputsLength, 4)))
        outputs = tuple(self.tensor(f"{field}.outputs[{i}]", self.read(f"{field}.outputs[{i}]", flat.Outputs, i))
                        for i in range(self.length(f"{field}.outputs", flat.OutputsLength, 4)))
        attributes = self.attributes(f"{field}.attributes", flat.AttributesLength, flat.Attributes)
        return OperatorRecord(type_name, inputs, outputs, attributes)

    def tensor(self, field: str, flat) -> TensorRecord:
        self.charge(16, field)
        data_type = self.text(f"{field}.dataType", flat.DataType)
        sizes = self.numbers(f"{field}.sizes", flat.SizesLength, flat.SizesAsNumpy)
        strides = None if self.read(f"{field}.strides", flat.StridesIsNone) else \
            self.numbers(f"{field}.strides", flat.StridesLength, flat.StridesAsNumpy)
        total = self.read(f"{field}.totalTensorSizeInBytes", flat.TotalTensorSizeInBytes)
        return TensorRecord(data_type, sizes, strides, total)

    def attributes(self, field: str, length: Callable, accessor: Callable,
                   scalars_only: bool = False) -> tuple[tuple[str, object], ...]:
        """(name, value) of each attribute given a value; `scalars_only` for an activation's own fields."""
        found = []
        for i in range(self.length(field, length, 4)):
            here = f"{field}[{i}]"
            flat = self.read(here, accessor, i)
            name = self.text(f"{here}.name", flat.Name)
            kind, table = self.union(f"{here}.val", flat.ValType, flat.Val, self.fb.AttributeFieldVariant)
            if table is None or kind is None:
                if name:  # DirectML's reader would dereference a null value here
                    raise InputError(f"{self.where}: {here} ({shown(name)}): has no value")
                continue  # a left-out optional field: DmlGraphSerialization writes it nameless and empty
            if not name:
                raise InputError(f"{self.where}: {here}: has a value but no name (the DirectML field it sets)")
            if scalars_only and kind not in _SCALAR_KINDS:
                raise InputError(f"{self.where}: {here} ({shown(name)}): an activation's field holds a number, "
                                 f"not a {kind}")
            found.append((name, self.attribute_value(f"{here} ({shown(name)})", kind, table)))
        return tuple(found)

    def attribute_value(self, field: str, kind: str, table):
        """An attribute's value as DxDispatch's JSON writes the field (numbers, arrays, objects)."""
        fb = self.fb
        self.charge(16, field)
        if kind in _SCALAR_KINDS:
            return self.read(field, self.view(getattr(fb, kind), table).Data)
        if kind in ("UIntArray", "IntArray", "FloatArray"):
            array = self.view(getattr(fb, kind), table)
            if self.length(field, array.DataLength, 4) == 0:
                return []
            return self.read(field, array.DataAsNumpy).tolist()
        if kind == "ScaleBias":
            scale_bias = self.view(fb.ScaleBias, table)
            return {"Scale": self.read(field, scale_bias.Scale), "Bias": self.read(field, scale_bias.Bias)}
        if kind == "Size2D":
            size = self.view(fb.Size2D, table)
            return {"Width": self.read(field, size.Width), "Height": self.read(field, size.Height)}
        if kind == "ScalarUnionData":
            return self.scalar_union(field, self.view(fb.ScalarUnionData, table))
        if kind == "Activation":
            return self.activation(field, self.view(fb.Activation, table))
        activations = self.view(fb.ActivationArray, table)  # ActivationArray, the one kind left
        return [self.activation(f"{field}.data[{i}]", self.read(f"{field}.data[{i}]", activations.Data, i))
                for i in range(self.length(f"{field}.data", activations.DataLength, 4))]

    def scalar_union(self, field: str, flat) -> dict:
        kind, table = self.union(f"{field}.data", flat.DataType, flat.Data, self.fb.ScalarVariant)
        if kind is None or table is None:
            raise InputError(f"{self.where}: {field}: the scalar union has no value")
        if kind == "ByteArray":
            return {"Bytes": [int(b) for b in self.read(field, self.view(self.fb.ByteArray, table).Data)]}
        # The other members are named as DxDispatch's JSON names them (Int8, UInt16, Float32, ...).
        return {kind: self.read(field, self.view(getattr(self.fb, kind), table).Data)}

    def activation(self, field: str, flat) -> dict:
        """A fused activation as DxDispatch's JSON writes one: {"Type": ..., field: value, ...}."""
        type_name = self.text(f"{field}.type", flat.Type)
        desc: dict = {"Type": type_name}
        for name, value in self.attributes(f"{field}.attributes", flat.AttributesLength, flat.Attributes,
                                           scalars_only=True):
            if name in desc:
                raise InputError(f"{self.where}: {field}: the field {shown(name)} is given twice")
            desc[name] = value
        return desc
