"""What dmlcli onnx takes from outside DirectML: constant folding (onnx's reference implementation), and ONNX
Runtime's CPU provider, for --fallback cpu (one node) and --compare ort (every intermediate tensor).

ONNX Runtime is imported only here and only for those two options. The reference session runs the model as it is,
with every node's outputs added to the graph's outputs and graph optimisations off, so that each node's own
result is there to compare (an optimised graph fuses nodes and drops their outputs). Initializers held in external
files are handed to ONNX Runtime from their memory maps (SessionOptions.add_external_initializers), so the model is
not copied into memory to be compared.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..errors import InputError, ValidationError, first_line
from .graph import Inferred, Node
from .loading import LoadedModel, require_onnx, require_onnxruntime


def _value_info(name: str, array: np.ndarray):
    onnx = require_onnx()
    return onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(array.dtype),
                                              list(array.shape))


def _single_node_model(node: Node, model: LoadedModel, inputs: Mapping[str, np.ndarray],
                       types: Mapping[str, Inferred]):
    """A model of one node: its inputs typed as the arrays are, its outputs as inference typed them (untyped
    where it could not), the source model's opsets and functions."""
    return _nodes_model((node,), node.outputs, model, inputs, types)


def _nodes_model(nodes: Sequence[Node], output_names: Sequence[str], model: LoadedModel,
                 inputs: Mapping[str, np.ndarray], types: Mapping[str, Inferred]):
    """A model of a few of the model's nodes (in an order they run in), giving `output_names`."""
    onnx = require_onnx()
    helper = onnx.helper
    outputs = []
    for name in output_names:
        if not name:
            continue
        known = types.get(name)
        outputs.append(helper.make_tensor_value_info(name, known.elem_type, None) if known is not None
                       else helper.make_empty_tensor_value_info(name))
    graph = helper.make_graph([node.proto for node in nodes], "node",
                              [_value_info(name, array) for name, array in inputs.items()], outputs)
    single = helper.make_model(graph, opset_imports=list(model.proto.opset_import))
    single.ir_version = model.proto.ir_version or single.ir_version
    single.functions.extend(model.proto.functions)
    try:  # outputs the model's inference could not type are typed from the node's own inputs
        return onnx.shape_inference.infer_shapes(single)
    except Exception:  # noqa: BLE001 - inference is a help: ONNX Runtime words what is still wrong
        return single


def folded_outputs(node: Node, model: LoadedModel, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """A constant node's outputs by onnx's reference implementation (None where it cannot compute them: an
    operator or domain it does not know; the node then runs as any other)."""
    require_onnx()
    from onnx.reference import ReferenceEvaluator

    inputs = {name: np.asarray(values[name]) for name in node.inputs if name}
    try:
        evaluator = ReferenceEvaluator(_single_node_model(node, model, inputs, {}))
        asked = [name for name in node.outputs if name]
        results = evaluator.run(asked, inputs)
    except Exception:  # noqa: BLE001 - the reference's failures have many types; the node runs unfolded
        return None
    return {name: np.asarray(result) for name, result in zip(asked, results)}


def _session_options(onnxruntime, *, optimise: bool):
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # fatal only: dmlcli words ONNX Runtime's errors itself, in one line
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    if not optimise:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


def fallback_session(node: Node, model: LoadedModel, inputs: Mapping[str, np.ndarray], types: Mapping[str, Inferred]):
    """ONNX Runtime's CPU provider on the node alone (--fallback cpu); a fused node's as the model's own nodes it
    stands for (`inputs` then the values they read: contrib operators are no operators of the model's opsets)."""
    onnxruntime = require_onnxruntime("--fallback cpu")
    members = node.fused if node.fusion else (node,)
    single = _nodes_model(members, node.outputs, model, {name: np.asarray(array) for name, array in inputs.items()},
                          types)
    try:
        return onnxruntime.InferenceSession(single.SerializeToString(), _session_options(onnxruntime, optimise=True),
                                            providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - ONNX Runtime's errors are plain exceptions
        raise ValidationError(f"{model.shown}: {node.label}: ONNX Runtime's CPU provider cannot run it either "
                              f"({first_line(error)})") from None


def reference_values(model: LoadedModel, nodes: Sequence[Node], feeds: Mapping[str, np.ndarray],
                     types: Mapping[str, Inferred], ours: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Every tensor of the model as ONNX Runtime's CPU provider computes it (--compare ort): each node output, typed
    as shape inference types it (else as dmlcli's own run gave it, `ours`), the graph's outputs, and the inputs and
    initializers as given."""
    onnx = require_onnx()
    onnxruntime = require_onnxruntime("--compare ort")
    probe = onnx.ModelProto()
    probe.CopyFrom(model.proto)
    graph = probe.graph
    have = {output.name for output in graph.output}
    extra = []
    for node in nodes:
        for name in node.outputs:
            if not name or name in have:
                continue
            if name in types:
                elem_type = types[name].elem_type
            elif name in ours:
                elem_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(ours[name].dtype))
            else:
                continue
            extra.append(onnx.helper.make_tensor_value_info(name, elem_type, None))
            have.add(name)
    graph.output.extend(extra)
    options = _session_options(onnxruntime, optimise=False)
    external = [name for name in model.mapped]
    if external:
        options.add_external_initializers(external, [onnxruntime.OrtValue.ortvalue_from_numpy(
            np.ascontiguousarray(model.constants[name])) for name in external])
    try:
        session = onnxruntime.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [output.name for output in graph.output]
        results = session.run(names, dict(feeds))
    except Exception as error:  # noqa: BLE001 - ONNX Runtime's errors are plain exceptions
        raise InputError(f"{model.shown}: ONNX Runtime's CPU provider cannot run the model to compare with "
                         f"({first_line(error)})") from None
    found = {**model.constants, **feeds}
    found.update({name: np.asarray(result) for name, result in zip(names, results)})
    return found
