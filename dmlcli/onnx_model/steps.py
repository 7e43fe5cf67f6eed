"""What runs for each node of a model, chosen once per input Sizes (a plan) and run on every call:

- folded: the node reads only constants (initializers, Constant nodes, folded values, the Sizes of a tensor whose
  Sizes shape inference knows): its outputs are computed once, when the plan is made, as ONNX Runtime folds such
  nodes on its CPU before the DirectML provider sees the graph (the view's own rule where the table has one,
  Shape or Reshape; else onnx's reference implementation, standing for ONNX Runtime's CPU kernels);
- view: the table's entry runs no DirectML operator (Reshape, Squeeze, Identity, Shape...): the outputs are views
  of the input, computed on every call;
- directml: the table's entry, its adapter and the DirectML operator, validated at the plan's feature level; the
  verdict is kept for the next call with the same tensors and fields;
- fallback: a node DirectML cannot run, with --fallback cpu, through ONNX Runtime's CPU provider (the DirectML
  provider's fallback), one single-node session per node.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .. import engine
from ..errors import InputError, ValidationError
from ..suite.onnx.adapters import OnnxCall
from ..suite.onnx.mapping import cannot_reason, directml_operator, planned_call, prepare, unsupported_reason
from ..suite.onnx.table import Entry
from .graph import Node

BOOL = 9  # ONNX's TensorProto.BOOL: DirectML holds it as UINT8 0/1


class Refused(Exception):
    """DirectML cannot run the node: the reason, in DirectML's words (a skip reason, or a validation error)."""


class Step:
    """One node's work; `run` gives its outputs by name."""

    kind = ""

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def directml(self) -> str:
        """What runs the node, as the comparison table names it."""
        raise NotImplementedError

    def run(self, values: Mapping[str, object], executor) -> dict[str, object]:
        raise NotImplementedError

    def named(self, results: Sequence) -> dict[str, object]:
        """An adapter's or view's outputs by the node's output names: one per position, or one per name asked
        for where the adapter gives only those (the recurrent networks)."""
        names = self.node.outputs
        asked = [name for name in names if name]
        if len(results) < len(asked):
            raise InputError(f"{self.node.label} gave {len(results)} outputs for the {len(asked)} it is asked for")
        pairs = zip(names, results) if len(results) >= self.node.output_count else zip(asked, results)
        return {name: result for name, result in pairs if name}


class FoldedStep(Step):
    kind = "folded"

    def __init__(self, node: Node, outputs: dict[str, np.ndarray]) -> None:
        super().__init__(node)
        self.outputs = outputs

    @property
    def directml(self) -> str:
        return "(folded)"

    def run(self, values, executor):
        return self.outputs


class ViewStep(Step):
    kind = "view"

    def __init__(self, node: Node, entry: Entry) -> None:
        super().__init__(node)
        self.entry = entry

    @property
    def directml(self) -> str:
        return "(none: a view)"

    def run(self, values, executor):
        call = self.node.call(values)
        reason = cannot_reason(self.entry, call)
        if reason is not None:
            raise Refused(reason)
        return self.named(self.entry.view(call))


def _as_directml(array):
    """ONNX's bool tensors as DirectML holds them: UINT8 0 and 1 (the same bytes)."""
    return array.view(np.uint8) if array is not None and array.dtype == np.bool_ else array


class DirectMLStep(Step):
    kind = "directml"

    def __init__(self, node: Node, entry: Entry, feature_level, bool_outputs: frozenset[str]) -> None:
        super().__init__(node)
        self.entry = entry
        self.operator = directml_operator(entry)
        self.feature_level = feature_level
        self.bool_outputs = bool_outputs
        self.verdicts: dict[tuple, object] = {}
        self.last_verdict = None  # the verdict of the latest call (its tolerance rule, for --compare)

    @property
    def directml(self) -> str:
        return self.operator.name

    def call(self, values) -> OnnxCall:
        """The node's ONNX call, ONNX's bool tensors given as DirectML's UINT8."""
        node = self.node
        inputs = tuple(_as_directml(values[name]) if name else None for name in node.inputs)
        return OnnxCall(node.op, inputs, node.attributes, node.output_count, node.outputs, node.opset)

    def run(self, values, executor):
        call = self.call(values)
        reason = cannot_reason(self.entry, call)
        if reason is not None:
            raise Refused(reason)
        prepared = prepare(self.entry, call)
        key = _key(prepared)
        verdict = self.verdicts.get(key) if key is not None else None
        if verdict is None:
            verdict = self._verdict(prepared, call)
            if key is not None:
                self.verdicts[key] = verdict
        self.last_verdict = verdict
        results = prepared.finish(executor.execute(verdict, prepared.inputs))
        outputs = self.named(results)
        for name in self.bool_outputs.intersection(outputs):
            if outputs[name].dtype == np.uint8:
                outputs[name] = outputs[name].view(np.bool_)
        return outputs

    def _verdict(self, prepared, call):
        """The validated DirectML call (Refused where no level of the operator or this level takes it)."""
        unsupported = unsupported_reason(self.operator, prepared)
        if unsupported is not None:
            raise Refused(unsupported)
        planned = planned_call(self.entry, self.operator, prepared)
        request = engine.request(self.operator, feature_level=self.feature_level, broadcast=planned.broadcast,
                                 output_dtype=planned.output_dtype, output_shapes=planned.output_shapes or None,
                                 **planned.keywords)
        try:
            return engine.plan_arrays(request, planned.inputs)
        except ValidationError as error:
            raise Refused(str(error)) from None


def _key(prepared) -> tuple | None:
    """What a kept verdict is looked up by: the tensors' types and Sizes, the fields (their repr: exact for
    numbers and text), the output type and broadcasting. None where a field holds an array (not kept)."""
    values = prepared.values
    if any(isinstance(value, np.ndarray) for value in values.values()):
        return None
    tensors = tuple(None if array is None else (array.dtype.str, array.shape) for array in prepared.inputs)
    return tensors, repr(tuple(values.items())), prepared.output_dtype, prepared.broadcast


class FallbackStep(Step):
    """A node run by ONNX Runtime's CPU provider (--fallback cpu), with the reason DirectML cannot run it."""

    kind = "fallback"

    def __init__(self, node: Node, reason: str, session, input_names: Sequence[str]) -> None:
        super().__init__(node)
        self.reason = reason
        self.session = session
        self.input_names = tuple(input_names)

    @property
    def directml(self) -> str:
        return "(ONNX Runtime CPU)"

    def run(self, values, executor):
        feeds = {name: executor.to_host(values[name]) for name in self.input_names}
        results = self.session.run([name for name in self.node.outputs if name], feeds)
        asked = [name for name in self.node.outputs if name]
        return {name: executor.to_device(np.asarray(result)) for name, result in zip(asked, results)}
