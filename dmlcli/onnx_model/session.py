"""A model ready to run: read once, planned once per set of input Sizes, run as often as asked.

`OnnxSession(model, backend=..., feature_level=..., fallback=...)` reads the model (initializers converted or
memory-mapped once), and `run(inputs)` gives its outputs by name. The first call with given input types and
Sizes plans the graph while it runs it (shape inference, folding, each node's step: see steps.py); later calls
with the same run the plan's steps alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..errors import InputError, ValidationError
from ..feature_levels import parse_feature_level
from ..suite.onnx.table import entry_for
from .executors import executor_for
from .fusions import fused_model
from .graphs import CapturedRun, capture_run
from .graph import RANDOM, Inferred, Node, inferred_tensors, nodes_of
from .lean import lean_program
from .loading import DEFAULT_DOMAINS, LoadedModel, load_model
from .reference import fallback_session, folded_outputs
from .steps import BOOL, Advance, ComposedStep, DirectMLStep, FallbackStep, FoldedStep, Refused, Step, ViewStep

FALLBACKS = (None, "cpu")
# ONNX operators whose outputs are bool whatever shape inference says (DirectML writes them as UINT8 0 and 1).
BOOL_RESULTS = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor",
                          "IsNaN", "IsInf"})
# Progress: (nodes done, nodes in all) after each node.
Progress = Callable[[int, int], None]


@dataclass
class Plan:
    """The steps of one set of input types and Sizes, and what shape inference said of every tensor."""

    steps: list[Step]
    types: dict[str, Inferred]
    # The steps a call runs, each with its position and the tensors it is the last to read (neither the model's
    # outputs nor its initializers): freed after it. Folded steps are not run: their outputs are `folded`.
    running: list[tuple[int, Step, tuple[str, ...]]] = field(default_factory=list)
    folded: dict[str, np.ndarray] = field(default_factory=dict)
    # `running` as a call runs it: each step's position, its advancer (Step.advancer) and the tensors freed after it.
    program: list[tuple[int, Advance, tuple[str, ...]]] = field(default_factory=list)
    # `program` for a call that keeps only the model's outputs: without the views its readers read through (lean.py).
    lean: list[tuple[int, Advance, tuple[str, ...]]] = field(default_factory=list)


class OnnxSession:
    def __init__(self, model, *, backend: str = "cpu", feature_level=None, fallback: str | None = None,
                 cuda_graphs: bool = True, fusions: bool = True) -> None:
        """`cuda_graphs`: on the GPU, a plan's third call and later replay a CUDA graph captured on its second
        (graphs.py), where the run can be captured and the graph gives the eager run's bits. `fusions`: apply the
        graph fusions ONNX Runtime applies for its DirectML provider (fusions.py) before planning."""
        if fallback not in FALLBACKS:
            raise InputError(f"fallback {fallback!r}: expected None or 'cpu'")
        self.model: LoadedModel = load_model(model)
        self.feature_level = parse_feature_level(feature_level)
        self.fallback = fallback
        self.executor = executor_for(backend)
        # The model's own nodes, and the nodes that run: after the fusions, where they are on.
        self.model_nodes: tuple[Node, ...] = nodes_of(self.model)
        self.fusions = bool(fusions)
        self.nodes: tuple[Node, ...] = fused_model(self.model, self.model_nodes) if self.fusions \
            else self.model_nodes
        self.executor.keep(self.model.constants.values())
        self._plans: dict[tuple, Plan] = {}
        self.cuda_graphs = bool(cuda_graphs) and self.executor.captures_graphs
        # Each captured plan's graph, or the reason its calls stay eager.
        self._graphs: dict[tuple, CapturedRun | str] = {}

    @property
    def backend(self) -> str:
        return self.executor.name

    # ------------------------------------------------------------ inputs

    def checked_inputs(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The inputs by the model's declared names, each of its declared type and Sizes (bool given as 0/1
        integers is read as bool); InputError naming what the model declares otherwise."""
        declared = {d.name: d for d in self.model.inputs}
        unknown = [name for name in inputs if name not in declared]
        if unknown:
            raise InputError(f"{self.model.shown} has no input {unknown[0]!r} (its inputs: {self._wanted()})")
        missing = [name for name in declared if name not in inputs]
        if missing:
            raise InputError(f"{self.model.shown} needs input {declared[missing[0]].describe()}, which is not given "
                             f"(its inputs: {self._wanted()})")
        checked = {}
        for name, value in inputs.items():
            checked[name] = self._checked(declared[name], np.asarray(value))
        return checked

    def _wanted(self) -> str:
        """The model's declared inputs, for a message."""
        return "; ".join(d.describe() for d in self.model.inputs) or "none"

    def _checked(self, declared, array: np.ndarray) -> np.ndarray:
        dtype = declared.dtype
        if dtype is not None and array.dtype != dtype:
            if dtype == np.bool_ and array.dtype.kind in "iu" and bool(np.isin(array, (0, 1)).all()):
                array = array.astype(np.bool_)
            else:
                raise self._given_as(declared, array)
        if declared.dims is not None:
            fixed = all(isinstance(d, int) and d > 0 for d in declared.dims if d is not None)
            matches = len(declared.dims) == array.ndim and all(
                not isinstance(d, int) or d <= 0 or d == size for d, size in zip(declared.dims, array.shape))
            if fixed and not matches:
                raise self._given_as(declared, array)
        return array

    def _given_as(self, declared, array: np.ndarray) -> InputError:
        return InputError(f"{self.model.shown}: input {declared.describe()} is given as "
                          f"{array.dtype} {list(array.shape)}")

    # ------------------------------------------------------------ running

    def run(self, inputs: Mapping[str, np.ndarray], *, progress: Progress | None = None,
            keep_all: bool = False) -> dict[str, np.ndarray]:
        """The model's outputs by name (NumPy arrays, ONNX's types). With `keep_all`, every tensor computed
        (the intermediates too), on the backend's device."""
        feeds = self.checked_inputs(inputs)
        key = _signature(feeds)
        plan = self._plans.get(key)
        if plan is not None and self.cuda_graphs and not keep_all:
            outputs = self._graph_run(key, plan, feeds)
            if outputs is not None:
                if progress is not None:
                    progress(len(plan.steps), len(plan.steps))
                return outputs
        values = {**self.model.constants, **{name: self.executor.to_device(a) for name, a in feeds.items()}}
        with self.executor.running():
            if plan is None:
                plan = self._plan(feeds, values, progress)
                self._plans[key] = plan
            else:
                self._execute(plan, values, progress, keep_all)
        if keep_all:
            return values
        return {d.name: self.executor.to_host(values[d.name]) for d in self.model.outputs}

    def _graph_run(self, key: tuple, plan: Plan, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        """The outputs through the plan's CUDA graph: replayed where there is one, captured on the first call
        that finds none (whose outputs are the eager run's); None where the plan cannot be captured."""
        if key in self._graphs:
            captured = self._graphs[key]
            return captured.run(feeds) if isinstance(captured, CapturedRun) else None
        cupy = self.executor.cupy

        def run(inputs: dict[str, object]) -> dict[str, object]:
            values = {**self.model.constants, **inputs}
            with self.executor.running():
                self._execute(plan, values, None, False)
            return {d.name: values[d.name] for d in self.model.outputs}

        def set_uploads(uploads) -> None:
            self.executor.uploads = uploads

        captured, outputs, why = capture_run(cupy, set_uploads, run, feeds)
        self._graphs[key] = captured if captured is not None else why
        return outputs

    def graph_state(self, inputs: Mapping[str, np.ndarray]) -> str:
        """How calls with these inputs' types and Sizes run on the GPU: "replayed" (a CUDA graph), "eager: WHY",
        or "not captured yet" (a plan's first two calls run eagerly)."""
        if not self.cuda_graphs:
            return "eager: CUDA graphs are off" if self.executor.captures_graphs else "eager: the CPU backend"
        key = _signature(self.checked_inputs(inputs))
        if key not in self._graphs:
            return "not captured yet"
        captured = self._graphs[key]
        return "replayed" if isinstance(captured, CapturedRun) else f"eager: {captured}"

    def plan_for(self, inputs: Mapping[str, np.ndarray]) -> Plan:
        """The plan of these inputs' types and Sizes (made by running them once where there is none yet)."""
        feeds = self.checked_inputs(inputs)
        key = _signature(feeds)
        if key not in self._plans:
            self.run(feeds)
        return self._plans[key]

    def _execute(self, plan: Plan, values: dict, progress: Progress | None, keep_all: bool) -> None:
        values.update(plan.folded)
        total = len(plan.steps)
        position = 0
        try:
            for position, advance, frees in (plan.program if keep_all else plan.lean):
                advance(values)
                if not keep_all:
                    for name in frees:
                        del values[name]
                if progress is not None:
                    progress(position + 1, total)
        except (Refused, InputError) as error:
            raise self._labelled(plan.steps[position], error) from None
        if progress is not None and (not plan.running or plan.running[-1][0] + 1 < total):
            progress(total, total)  # the folded steps after the last one run

    def run_step(self, step: Step, values) -> dict:
        try:
            return step.run(values, self.executor)
        except (Refused, InputError) as error:
            raise self._labelled(step, error) from None

    def _labelled(self, step: Step, error: Refused | InputError) -> ValidationError | InputError:
        """A node's refusal (exit 3) or malformed call (exit 2), saying which node."""
        if isinstance(error, Refused):
            return ValidationError(f"{self.model.shown}: {step.node.label}: {error}")
        return InputError(f"{self.model.shown}: {step.node.label}: {error}")

    # ------------------------------------------------------------ planning

    def _plan(self, feeds: dict, values: dict, progress: Progress | None) -> Plan:
        types = inferred_tensors(self.model, {name: array.shape for name, array in feeds.items()})
        constant = set(self.model.constants)
        steps: list[Step] = []
        for position, node in enumerate(self.nodes):
            step, outputs = self._step(node, values, constant, types)
            steps.append(step)
            if isinstance(step, FoldedStep):
                constant.update(step.outputs)
                self.executor.keep(step.outputs.values())
            values.update(outputs)
            if progress is not None:
                progress(position + 1, len(self.nodes))
        folded = {name: array for step in steps if isinstance(step, FoldedStep) for name, array in step.outputs.items()}
        running = self._running(steps)
        program = [(position, step.advancer(self.executor), frees) for position, step, frees in running]
        calls = [(position, call, advance) for (position, step, _), (_, own, _) in zip(running, program)
                 for call, advance in step.lean_calls(own, self.executor)]
        return Plan(steps, types, running, folded, program, lean_program(calls, self._kept()))

    def _kept(self) -> set[str]:
        """The tensors a run never frees: the model's outputs and constants."""
        return {d.name for d in self.model.outputs} | set(self.model.constants)

    def _running(self, steps: list[Step]) -> list[tuple[int, Step, tuple[str, ...]]]:
        last_use = {name: position for position, step in enumerate(steps) for name in step.node.inputs if name}
        kept = self._kept()
        return [(position, step, tuple(dict.fromkeys(name for name in step.node.inputs if name
                                                     and last_use[name] == position and name not in kept)))
                for position, step in enumerate(steps) if not isinstance(step, FoldedStep)]

    def _step(self, node: Node, values: dict, constant: set,
              types: Mapping[str, Inferred]) -> tuple[Step, dict]:
        """The node's step and its outputs on the plan's first call."""
        folded = self._folded(node, values, constant, types)
        if folded is not None:
            return folded, folded.outputs
        if node.domain not in DEFAULT_DOMAINS and not node.fusion:  # a fusion's contrib node maps by its name
            return self._refused(node, values, types, f"{node.domain}.{node.op} is an operator of the domain "
                                 f"{node.domain!r}; dmlcli's ONNX table maps ONNX's own operators")
        entry = entry_for(node.call(values))
        if entry is None:
            return self._refused(node, values, types, f"ONNX operator {node.op} has no entry in dmlcli's ONNX table "
                                 "(dmlcli/suite/onnx/table.py)")
        if entry.view is not None:
            step = ViewStep(node, entry)
            try:
                return step, step.plan(values, self.executor, constant)
            except (Refused, InputError) as error:
                raise self._labelled(step, error) from None
        if entry.composed is not None:  # several DirectML calls (the provider's graph for a contrib operator)
            return self._planned(ComposedStep(node, entry, self.feature_level), node, values, constant, types)
        if entry.directml is None:
            return self._refused(node, values, types, entry.reason)
        bools = frozenset(name for name in node.outputs if name and (node.op in BOOL_RESULTS or (
            name in types and types[name].elem_type == BOOL)))
        return self._planned(DirectMLStep(node, entry, self.feature_level, bools), node, values, constant, types)

    def _planned(self, step: Step, node: Node, values: dict, constant: set,
                 types: Mapping[str, Inferred]) -> tuple[Step, dict]:
        """A DirectML step planned on the plan's first call, with its outputs; the fallback's where DirectML
        refuses it."""
        try:
            return step, step.plan(values, self.executor, constant)
        except Refused as refused:  # shown now, where the fallback can take the node
            return self._refused(node, values, types, str(refused))
        except InputError as error:
            raise self._labelled(step, error) from None

    def _folded(self, node: Node, values: dict, constant: set, types: Mapping[str, Inferred]) -> FoldedStep | None:
        """The node's outputs as constants where it reads only constants (or only a known tensor's Sizes)."""
        if node.op in RANDOM or (node.domain not in DEFAULT_DOMAINS and not node.fusion):
            return None
        reads_sizes = node.op in ("Shape", "Size") and types.get(node.inputs[0], Inferred(0, None)).shape is not None
        if not reads_sizes and not all(not name or name in constant for name in node.inputs):
            return None
        # Constants are on the host already; Shape and Size read only a tensor's Sizes, wherever it lies.
        host = values if reads_sizes else {name: self.executor.to_host(values[name]) for name in node.inputs if name}
        if node.fusion:  # ONNX Runtime folds constants before it fuses: the nodes it stands for, folded
            return self._folded_members(node, host)
        entry = entry_for(node.call(host))
        if entry is not None and entry.view is not None:
            try:
                outputs = ViewStep(node, entry).run(host, self.executor)
            except (Refused, InputError):
                return None
        else:
            outputs = folded_outputs(node, self.model, host)
            if outputs is None:
                return None
        return FoldedStep(node, {name: np.asarray(array) for name, array in outputs.items()})

    def _folded_members(self, node: Node, host: dict) -> FoldedStep | None:
        values = dict(host)
        for member in node.fused:
            outputs = folded_outputs(member, self.model, {name: values[name] for name in member.inputs if name})
            if outputs is None:
                return None
            values.update(outputs)
        return FoldedStep(node, {name: np.asarray(values[name]) for name in node.outputs if name})

    def _refused(self, node: Node, values: dict, types: Mapping[str, Inferred], reason: str) -> tuple[Step, dict]:
        """The fallback step of a node DirectML cannot run (--fallback cpu) and its outputs, else the refusal
        (exit 3)."""
        if self.fallback != "cpu":
            raise ValidationError(f"{self.model.shown}: {node.label}: {reason}; DirectML cannot run it "
                                  "(--fallback cpu runs such nodes on ONNX Runtime's CPU provider)")
        inputs = {name: self.executor.to_host(values[name]) for name in fallback_inputs(node)}
        session = fallback_session(node, self.model, inputs, types)
        step = FallbackStep(node, reason, session, list(inputs))
        return step, self.run_step(step, values)

    # ------------------------------------------------------------ what was planned

    def fallbacks(self, inputs: Mapping[str, np.ndarray]) -> list[tuple[Node, str]]:
        """The nodes the plan of these inputs runs on ONNX Runtime's CPU provider, each with its reason."""
        return [(step.node, step.reason) for step in self.plan_for(inputs).steps if isinstance(step, FallbackStep)]


def fallback_inputs(node: Node) -> tuple[str, ...]:
    """The values ONNX Runtime's CPU provider is given for a node it runs (--fallback cpu): the node's inputs; for a
    fused node, what the model's nodes it stands for read from outside them (constants too)."""
    if not node.fusion:
        return tuple(dict.fromkeys(name for name in node.inputs if name))
    made = {name for member in node.fused for name in member.outputs if name}
    return tuple(dict.fromkeys(name for member in node.fused for name in member.inputs if name and name not in made))


def _signature(feeds: Mapping[str, np.ndarray]) -> tuple:
    return tuple(sorted((name, array.dtype.str, array.shape) for name, array in feeds.items()))

