"""What runs for each node of a model, chosen once per input Sizes (a plan) and run on every call:

- folded: the node reads only constants (initializers, Constant nodes, folded values, the Sizes of a tensor whose
  Sizes shape inference knows): its outputs are computed once, when the plan is made, as ONNX Runtime folds such
  nodes on its CPU before the DirectML provider sees the graph (the view's own rule where the table has one,
  Shape or Reshape; else onnx's reference implementation, standing for ONNX Runtime's CPU kernels);
- view: the table's entry runs no DirectML operator (Reshape, Squeeze, Identity, Shape...): the outputs are views
  of the input, made on every call (by the plan's own views where planning/planned.py keeps them);
- directml: the table's entry, its adapter and the DirectML operator, validated at the plan's feature level; the
  verdict is kept for the next call with the same tensors and fields, and where planning/planned.py can, the whole call
  (the adapter's views, the verdict, the executor's compiled call) for the next call with the same inputs;
- composed: a node ONNX Runtime's DirectML provider runs as several DirectML calls (the table's composed entries:
  SkipLayerNormalization is ELEMENT_WISE_ADD then MEAN_VARIANCE_NORMALIZATION1): one directml step per call, each
  the table's entry for its part, run in order on the node's inputs and the values the calls before it made;
- fallback: a node DirectML cannot run, with --fallback cpu, through ONNX Runtime's CPU provider (the DirectML
  provider's fallback), one single-node session per node.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .. import engine
from ..errors import InputError, ValidationError
from ..suite.onnx.adapters import OnnxCall
from ..suite.onnx.mapping import cannot_reason, directml_operator, planned_call, prepare, unsupported_reason, viewed
from ..suite.onnx.adapters_contrib import Composition
from ..suite.onnx.table import Entry, entry_for, fused_activation_keywords
from .graph import Node, part_nodes
from .planning.planned import Advance, PlannedCall, PlannedView, Wiring, constant_positions, planned_arrays

BOOL = 9  # ONNX's TensorProto.BOOL: DirectML holds it as UINT8 0/1


class Refused(Exception):
    """DirectML cannot run the node: the reason, in DirectML's words (a skip reason, or a validation error)."""


class Step:
    """One node's work; `run` gives its outputs by name."""

    kind = ""
    # What the plan kept of the node's call or views for the calls after its first (planning/planned.py), where it
    # kept any.
    planned: PlannedCall | PlannedView | None = None

    def __init__(self, node: Node) -> None:
        self.node = node

    @property
    def directml(self) -> str:
        """What runs the node, as the comparison table names it."""
        raise NotImplementedError

    def run(self, values: Mapping[str, object], executor) -> dict[str, object]:
        raise NotImplementedError

    def plan(self, values: Mapping[str, object], executor, constants: set[str]) -> dict[str, object]:
        """The outputs of the plan's first call, `constants` naming the plan's constants (a step that keeps
        nothing for later calls just runs)."""
        return self.run(values, executor)

    def advancer(self, executor) -> Advance:
        """The step as a model's run calls it once planned: its outputs stored in the run's values. A step whose
        plan kept its call runs that call's planned_runner, and `run` where the inputs differ from the plan's."""
        run = self.run

        def general(values: dict) -> None:
            values.update(run(values, executor))

        fast = None if self.planned is None else self.planned.runner(general, self.marked())
        return general if fast is None else fast

    def marked(self) -> object | None:
        """The object whose last_verdict a planned call of the step sets (None: a step that keeps no verdict)."""
        return None

    def lean_calls(self, own: Advance, executor) -> list[tuple[Step, Advance]]:
        """The step's calls as a run that keeps only the model's outputs takes them (lean.py), each a step with its
        advancer: the step itself and `own`, its advancer in the whole program."""
        return [(self, own)]

    def advancer_through(self, planned: PlannedCall | PlannedView, views: Sequence[Advance], own: Advance) -> Advance:
        """The step in a run that skips the views it reads through (lean.py): `planned`, the step's planned call or
        view made to read the views' inputs, where the inputs are those it was planned for; elsewhere the views'
        advancers (`views`, in order: the outputs the step's own path reads) and then its own advancer, `own`."""
        def otherwise(values: dict) -> None:
            for view in views:
                view(values)
            own(values)

        return planned.runner(otherwise, self.marked())

    def inputs_of(self, values: Mapping[str, object]) -> tuple:
        """The node's inputs as its work reads them (None for one left out)."""
        return self.node.inputs_of(values)

    def named(self, results: Sequence) -> dict[str, object]:
        """An adapter's or view's outputs by the node's output names."""
        return {name: results[index] for index, name in self.output_pairs(len(results))}

    def output_pairs(self, count: int) -> tuple[tuple[int, str], ...]:
        """(result index, output name) for `count` results: one per position, or one per name asked for where
        the adapter gives only those (the recurrent networks)."""
        names = self.node.outputs
        asked = [name for name in names if name]
        if count < len(asked):
            raise InputError(f"{self.node.label} gave {count} outputs for the {len(asked)} it is asked for")
        if count >= self.node.output_count:
            return tuple((index, name) for index, name in enumerate(names[:count]) if name)
        return tuple(enumerate(asked))


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
        self.planned: PlannedView | None = None

    @property
    def directml(self) -> str:
        return "(none: a view)"

    def run(self, values, executor):
        if self.planned is not None:
            outputs = self.planned.run(values)
            if outputs is not None:
                return outputs
        return self.named(self._views(self.inputs_of(values)))

    def _views(self, inputs: tuple) -> tuple:
        call = self.node.call_on(inputs)
        reason = cannot_reason(self.entry, call)
        if reason is not None:
            raise Refused(reason)
        return viewed(self.entry, call)

    def plan(self, values, executor, constants: set[str]) -> dict[str, object]:
        """The outputs of the plan's first call; the views kept as planning/planned.py makes them again, where it
        can."""
        inputs = self.inputs_of(values)
        outputs = self._views(inputs)
        found = planned_arrays(self.entry.value_inputs, self.node.inputs, inputs, constants, outputs)
        if found is not None:
            self.planned = PlannedView(Wiring(self.node.inputs, (), self.output_pairs(len(outputs))), *found)
        return self.named(outputs)


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
        self.planned: PlannedCall | None = None
        # An activation a fusion put into the node (fusions.py): DirectML's FusedActivation of the call.
        activation = node.activation
        self.fused_keywords = {} if activation is None else fused_activation_keywords(activation.op,
                                                                                     activation.attributes)

    @property
    def directml(self) -> str:
        if self.fused_keywords:
            return f"{self.operator.name} + {self.fused_keywords['fused_activation'].removeprefix('ACTIVATION_')}"
        return self.operator.name

    def inputs_of(self, values) -> tuple:
        """The node's inputs (None for one left out), ONNX's bool tensors given as DirectML's UINT8."""
        return tuple(_as_directml(values[name]) if name else None for name in self.node.inputs)

    def call(self, values) -> OnnxCall:
        """The node's ONNX call, ONNX's bool tensors given as DirectML's UINT8."""
        return self.node.call_on(self.inputs_of(values))

    def run(self, values, executor):
        planned = self.planned
        if planned is not None:
            outputs = planned.run(values)
            if outputs is not None:
                self.last_verdict = planned.verdict
                return outputs
        prepared, verdict = self._prepared(self.call(values))
        return self._outputs(prepared.finish(executor.execute(verdict, prepared.inputs)))

    def plan(self, values, executor, constants: set[str]) -> dict[str, object]:
        """The outputs of the plan's first call (Refused where DirectML cannot run the node); the call kept as
        planning/planned.py works it out, where it can, for the calls after."""
        inputs = self.inputs_of(values)
        prepared, verdict = self._prepared(self.node.call_on(inputs))
        results = prepared.finish(executor.execute(verdict, prepared.inputs))
        outputs = self._outputs(results)
        found = planned_arrays(self.entry.value_inputs, self.node.inputs, inputs, constants, prepared.inputs)
        execute = None if found is None else executor.compiled(verdict, prepared.inputs, constant_positions(found[1]))
        if execute is not None:
            names = self.node.inputs
            bool_inputs = tuple(p for p, name in enumerate(names) if name and values[name].dtype == np.bool_)
            bool_outputs = tuple(name for name in self.bool_outputs.intersection(outputs)
                                 if outputs[name].dtype == np.bool_)
            wiring = Wiring(names, bool_inputs, self.output_pairs(len(results)), bool_outputs)
            self.planned = PlannedCall(wiring, *found, execute, prepared.finish, verdict)
        return outputs

    def marked(self) -> object | None:
        return self  # its last_verdict: the kept verdict after a planned call

    def _prepared(self, call: OnnxCall):
        """The adapter's call and its verdict (kept for the next call with the same tensors and fields)."""
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
        return prepared, verdict

    def _outputs(self, results) -> dict[str, object]:
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
                                 **planned.keywords, **self.fused_keywords)
        try:
            return engine.plan_arrays(request, planned.inputs)
        except ValidationError as error:
            raise Refused(str(error)) from None


def _key(prepared) -> tuple | None:
    """What a kept verdict is looked up by: the tensors' types and Sizes, the fields (their repr: exact for
    numbers and text), the output type, broadcasting and the outputs asked for. None where a field holds an array
    (not kept)."""
    values = prepared.values
    if any(isinstance(value, np.ndarray) for value in values.values()):
        return None
    tensors = tuple(None if array is None else (array.dtype.str, array.shape) for array in prepared.inputs)
    return tensors, repr(tuple(values.items())), prepared.output_dtype, prepared.broadcast, prepared.outputs


class ComposedStep(Step):
    """A node the DirectML provider runs as several DirectML calls: the table's composed entry gives the calls
    (Parts), each planned and run as a DirectMLStep of its own; the values between them stay the node's own."""

    kind = "directml"

    def __init__(self, node: Node, entry: Entry, feature_level) -> None:
        super().__init__(node)
        self.entry = entry
        self.feature_level = feature_level
        self.parts: list[DirectMLStep] = []

    @property
    def directml(self) -> str:
        return " then ".join(part.directml for part in self.parts)

    def run(self, values, executor):
        """The node's outputs; each call's outputs join the run's values (the next call reads them there: the model's
        names of the tensors the fusion removed, or names of the node's own), and stay there for the run."""
        for part in self.parts:
            values.update(part.run(values, executor))
        return {name: values[name] for name in self.node.outputs if name}

    def plan(self, values, executor, constants: set[str]) -> dict[str, object]:
        """The outputs of the plan's first call, each part planned on the values before it (Refused, naming the
        part, where DirectML cannot run one)."""
        call = self.node.call(values)
        reason = cannot_reason(self.entry, call)
        if reason is not None:
            raise Refused(reason)
        self.parts = []
        for part in part_nodes(self.node, self.entry.composed(self._composition(call))):
            entry = entry_for(part.call(values))
            if entry is None or entry.directml is None:
                raise Refused(f"its {part.op} call has no DirectML operator in dmlcli's ONNX table")
            step = DirectMLStep(part, entry, self.feature_level, frozenset())
            try:
                values.update(step.plan(values, executor, constants))
            except Refused as refused:
                raise Refused(f"its {part.op} call ({step.operator.name}): {refused}") from None
            self.parts.append(step)
        return {name: values[name] for name in self.node.outputs if name}

    def advancer(self, executor) -> Advance:
        """Each call's advancer in turn (their outputs stay in the run's values, as `run` leaves them)."""
        parts = tuple(part.advancer(executor) for part in self.parts)

        def advance(values: dict) -> None:
            for part in parts:
                part(values)

        return advance

    def lean_calls(self, own: Advance, executor) -> list[tuple[Step, Advance]]:
        """Each DirectML call, a step planned on its own, with its advancer: a lean run reads through the views and
        copies before each call, and frees the values between them after their last reader."""
        return [(part, part.advancer(executor)) for part in self.parts]

    def _composition(self, call: OnnxCall) -> Composition:
        own = dict(self.node.intermediates)
        base = next((name for name in self.node.outputs if name), self.node.op)

        def named(role: str) -> str:
            return own.get(role) or f"{base}/{role}"

        return Composition(self.node.inputs, self.node.outputs, call, named)


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
