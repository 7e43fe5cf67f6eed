"""Serialized DirectML graphs written here, for the tests: with the builder functions flatc generated from the
schema (the writer's side, as ONNX Runtime's DmlGraphSerialization.cpp writes a graph), never with dmlcli's reader.

A node is a dict: {"name", "op": "DML_OPERATOR_...", "inputs": [edge names, "" for one left out], "outputs":
[...], "in": [tensor(...)], "out": [tensor(...)], "attributes": [(field, kind, value)]} for an operator;
{"name", "constant": "NAME"} (data in NAME.bin beside the graph) or {"name", "raw": bytes} with "outputs" for a
constant. An attribute's kind is the union member (UInt32, Float32, ScaleBias, Activation, ...); (field, kind,
None) is a left-out optional field, written nameless and empty as DmlGraphSerialization writes it.
"""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np

from dmlcli.dispatch.serialized_graph.generated import dml_graph_generated as fb

ITEM_SIZES = {"FLOAT32": 4, "FLOAT16": 2, "UINT32": 4, "INT32": 4, "UINT8": 1, "INT8": 1, "UINT16": 2, "INT16": 2,
              "FLOAT64": 8, "UINT64": 8, "INT64": 8}


def tensor(sizes, data_type="FLOAT32", strides=None, total=None) -> dict:
    """A DmlBufferTensorDesc; TotalTensorSizeInBytes as DMLCalcBufferTensorSize gives it unless `total`."""
    if total is None:
        steps = strides or [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
        last = sum((n - 1) * s for n, s in zip(sizes, steps))
        total = ((last + 1) * ITEM_SIZES[data_type] + 3) & ~3
    return {"DataType": f"DML_TENSOR_DATA_TYPE_{data_type}", "Sizes": list(sizes), "Strides": strides,
            "Total": total}


def floats(*values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def graph_file(nodes: list[dict], inputs: list[str], outputs: list[str]) -> bytes:
    builder = flatbuffers.Builder(1024)
    node_offsets = [_node(builder, node) for node in nodes]
    input_names = _strings(builder, inputs, fb.DmlGraphDescStartGraphInputNamesVector)
    output_names = _strings(builder, outputs, fb.DmlGraphDescStartGraphOutputNamesVector)
    node_vector = _offsets(builder, node_offsets, fb.DmlGraphDescStartNodesVector)
    fb.DmlGraphDescStart(builder)
    fb.DmlGraphDescAddNodes(builder, node_vector)
    fb.DmlGraphDescAddGraphInputNames(builder, input_names)
    fb.DmlGraphDescAddGraphOutputNames(builder, output_names)
    builder.Finish(fb.DmlGraphDescEnd(builder))
    return bytes(builder.Output())


def _offsets(builder, offsets: list[int], start) -> int:
    start(builder, len(offsets))
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _strings(builder, texts: list[str], start) -> int:
    return _offsets(builder, [builder.CreateString(text) for text in texts], start)


def _node(builder, node: dict) -> int:
    if "op" in node:
        kind, desc = fb.NodeDesc.OperatorNodeDesc, _operator(builder, node)
    else:
        kind, desc = fb.NodeDesc.ConstantNodeDesc, _constant(builder, node)
    name = builder.CreateString(node["name"])
    inputs = _strings(builder, node.get("inputs", []), fb.DmlGraphNodeStartInputNamesVector)
    outputs = _strings(builder, node.get("outputs", []), fb.DmlGraphNodeStartOutputNamesVector)
    fb.DmlGraphNodeStart(builder)
    fb.DmlGraphNodeAddDescType(builder, node.get("desc_type", kind))
    fb.DmlGraphNodeAddDesc(builder, desc)
    fb.DmlGraphNodeAddName(builder, name)
    fb.DmlGraphNodeAddInputNames(builder, inputs)
    fb.DmlGraphNodeAddOutputNames(builder, outputs)
    return fb.DmlGraphNodeEnd(builder)


def _constant(builder, node: dict) -> int:
    if "constant" in node:
        name = builder.CreateString(node["constant"])
        fb.ConstantNameStart(builder)
        fb.ConstantNameAddName(builder, name)
        detail, kind = fb.ConstantNameEnd(builder), fb.ConstantNodeDescDetail.ConstantName
    else:
        data = builder.CreateNumpyVector(np.frombuffer(node["raw"], dtype=np.uint8))
        fb.ConstantRawDataStart(builder)
        fb.ConstantRawDataAddData(builder, data)
        detail, kind = fb.ConstantRawDataEnd(builder), fb.ConstantNodeDescDetail.ConstantRawData
    fb.ConstantNodeDescStart(builder)
    fb.ConstantNodeDescAddDataType(builder, kind)
    fb.ConstantNodeDescAddData(builder, detail)
    return fb.ConstantNodeDescEnd(builder)


def _tensor(builder, desc: dict) -> int:
    data_type = builder.CreateString(desc["DataType"])
    sizes = builder.CreateNumpyVector(np.array(desc["Sizes"], dtype=np.uint32))
    strides = None if desc["Strides"] is None else builder.CreateNumpyVector(np.array(desc["Strides"], np.uint32))
    fb.DmlBufferTensorDescStart(builder)
    fb.DmlBufferTensorDescAddDataType(builder, data_type)
    fb.DmlBufferTensorDescAddSizes(builder, sizes)
    if strides is not None:
        fb.DmlBufferTensorDescAddStrides(builder, strides)
    fb.DmlBufferTensorDescAddTotalTensorSizeInBytes(builder, desc["Total"])
    return fb.DmlBufferTensorDescEnd(builder)


def _operator(builder, node: dict) -> int:
    type_name = builder.CreateString(node["op"])
    inputs = _offsets(builder, [_tensor(builder, t) for t in node.get("in", [])], fb.OperatorNodeDescStartInputsVector)
    outputs = _offsets(builder, [_tensor(builder, t) for t in node.get("out", [])],
                       fb.OperatorNodeDescStartOutputsVector)
    attributes = _attributes(builder, node.get("attributes", []), fb.OperatorNodeDescStartAttributesVector)
    fb.OperatorNodeDescStart(builder)
    fb.OperatorNodeDescAddType(builder, type_name)
    fb.OperatorNodeDescAddInputs(builder, inputs)
    fb.OperatorNodeDescAddOutputs(builder, outputs)
    fb.OperatorNodeDescAddAttributes(builder, attributes)
    return fb.OperatorNodeDescEnd(builder)


def _attributes(builder, attributes: list, start) -> int:
    return _offsets(builder, [_attribute(builder, *attribute) for attribute in attributes], start)


def _attribute(builder, field: str, kind: str, value) -> int:
    code = getattr(fb.AttributeFieldVariant, kind)
    offset = None if value is None else _value(builder, kind, value)
    name = None if value is None else builder.CreateString(field)
    fb.AttributeDescStart(builder)
    if name is not None:
        fb.AttributeDescAddName(builder, name)
    fb.AttributeDescAddValType(builder, code)
    if offset is not None:
        fb.AttributeDescAddVal(builder, offset)
    return fb.AttributeDescEnd(builder)


def _value(builder, kind: str, value) -> int:
    structs = {"UInt32": fb.CreateUint32, "UInt64": fb.CreateUint64, "Int32": fb.CreateInt32,
               "Float32": fb.CreateFloat32, "Bool": fb.CreateBool}
    if kind in structs:
        return structs[kind](builder, value)
    if kind == "ScaleBias":
        return fb.CreateScaleBias(builder, *value)
    if kind == "Size2D":
        return fb.CreateSize2D(builder, *value)  # width, height
    if kind in ("UIntArray", "IntArray", "FloatArray"):
        dtype = {"UIntArray": np.uint32, "IntArray": np.int32, "FloatArray": np.float32}[kind]
        data = builder.CreateNumpyVector(np.array(value, dtype=dtype))
        getattr(fb, f"{kind}Start")(builder)
        getattr(fb, f"{kind}AddData")(builder, data)
        return getattr(fb, f"{kind}End")(builder)
    if kind == "ScalarUnionData":
        member = fb.CreateByteArray(builder, list(value))
        fb.ScalarUnionDataStart(builder)
        fb.ScalarUnionDataAddDataType(builder, fb.ScalarVariant.ByteArray)
        fb.ScalarUnionDataAddData(builder, member)
        return fb.ScalarUnionDataEnd(builder)
    if kind == "Activation":
        return _activation(builder, *value)
    activations = [_activation(builder, *item) for item in value]  # ActivationArray
    data = _offsets(builder, activations, fb.ActivationArrayStartDataVector)
    fb.ActivationArrayStart(builder)
    fb.ActivationArrayAddData(builder, data)
    return fb.ActivationArrayEnd(builder)


def _activation(builder, type_name: str, attributes: list) -> int:
    name = builder.CreateString(type_name)
    fields = _attributes(builder, attributes, fb.ActivationStartAttributesVector)
    fb.ActivationStart(builder)
    fb.ActivationAddType(builder, name)
    fb.ActivationAddAttributes(builder, fields)
    return fb.ActivationEnd(builder)


# ---------------------------------------------------------------- a graph of several nodes

X = [1, -2, 3, -4, 5, -6]  # graph input x, [1, 1, 2, 3]
W = [1, -2, 3, 4, 5, -6]  # graph input w, [1, 1, 3, 2]
BIAS = [0.5, -1, 2, -3, 4, -5]  # a raw constant, [1, 1, 2, 3]
SCALE = [2, -1, 0.5]  # a named constant (scale.bin), read through zero strides as [1, 1, 2, 3]


def several_nodes() -> list[dict]:
    """sum = x + bias; prod = sum * scale (broadcast); clipped = clip(prod, -1.5, 1.5); relu = relu(sum) (sum feeds
    two nodes); gemm_out = leaky_relu(0.5 * relu @ w, 0.1) with no C. Outputs prod, clipped and gemm_out."""
    t23, t32, t22 = tensor([1, 1, 2, 3]), tensor([1, 1, 3, 2]), tensor([1, 1, 2, 2])
    broadcast = tensor([1, 1, 2, 3], strides=[0, 0, 0, 1])
    return [
        {"name": "bias_node", "raw": floats(*BIAS), "outputs": ["bias"]},
        {"name": "scale_node", "constant": "scale", "outputs": ["scale_out"]},
        {"name": "add", "op": "DML_OPERATOR_ELEMENT_WISE_ADD", "inputs": ["x", "bias"], "outputs": ["sum"],
         "in": [t23, t23], "out": [t23]},
        {"name": "mul", "op": "DML_OPERATOR_ELEMENT_WISE_MULTIPLY", "inputs": ["sum", "scale_out"],
         "outputs": ["prod"], "in": [t23, broadcast], "out": [t23]},
        {"name": "relu", "op": "DML_OPERATOR_ACTIVATION_RELU", "inputs": ["sum"], "outputs": ["relu_out"],
         "in": [t23], "out": [t23]},
        {"name": "gemm", "op": "DML_OPERATOR_GEMM", "inputs": ["relu_out", "w", ""], "outputs": ["gemm_out"],
         "in": [t23, t32], "out": [t22],
         "attributes": [("TransA", "UInt32", 0), ("TransB", "UInt32", 0), ("Alpha", "Float32", 0.5),
                        ("Beta", "Float32", 0.0),
                        ("FusedActivation", "Activation", ("DML_OPERATOR_ACTIVATION_LEAKY_RELU",
                                                           [("Alpha", "Float32", 0.1)]))]},
        {"name": "clip", "op": "DML_OPERATOR_ELEMENT_WISE_CLIP", "inputs": ["prod"], "outputs": ["clipped"],
         "in": [t23], "out": [t23],
         "attributes": [("ScaleBias", "ScaleBias", None), ("Min", "Float32", -1.5), ("Max", "Float32", 1.5)]},
    ]


def several_nodes_model(folder, nodes=None, bindings=None, commands=None, name="model.json"):
    """The graph (graph.bin), its named constant (scale.bin) and a model that runs it, prints its outputs and
    writes gemm_out to gemm.npy."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.bin").write_bytes(graph_file(nodes or several_nodes(), ["x", "w"], ["prod", "clipped", "gemm_out"]))
    (folder / "scale.bin").write_bytes(floats(*SCALE))

    def buffer(values):
        return {"initialValuesDataType": "FLOAT32", "initialValues": values}

    resources = {"X": buffer(X), "W": buffer(W), "Prod": buffer([0] * 6), "Clipped": buffer([0] * 6),
                 "G": buffer([0] * 4)}
    bindings = bindings or {"x": "X", "w": "W", "prod": "Prod", "clipped": "Clipped", "gemm_out": "G"}
    commands = commands or [{"type": "dispatch", "dispatchable": "graph", "bindings": bindings},
                            {"type": "print", "resource": "Prod"}, {"type": "print", "resource": "Clipped"},
                            {"type": "print", "resource": "G"},
                            {"type": "writeFile", "resource": "G", "targetPath": "gemm.npy", "dimensions": [2, 2]}]
    model = {"resources": resources,
             "dispatchables": {"graph": {"type": "dmlSerializedGraph", "sourcePath": "graph.bin"}},
             "commands": commands}
    path = folder / name
    path.write_text(json.dumps(model))
    return path
