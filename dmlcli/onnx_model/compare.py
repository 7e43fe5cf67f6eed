"""--compare ort: every node's outputs against ONNX Runtime's CPU provider, each within its operator's tolerance.

Each node is compared on its own: it runs on ONNX Runtime's values of its inputs, so that its difference is its
own, not the sum of every difference upstream (a network carries small differences forward and a later node
would seem to diverge for its predecessors' sake). The first node whose outputs fall outside the tolerance is
where dmlcli's DirectML semantics part from ONNX Runtime's CPU. A node the provider runs as several DirectML calls (a
composed node: SkipLayerNormalization) is compared call by call: each call runs on ONNX Runtime's values of its
inputs where the model has them (the tensors the fusion removed: the Add's sum, the MatMul's product), else on the
value the call before it made, and each output the model names is compared by the call's own rule. The tolerance is the DirectML operator's own for
the call (`describe OP`: a ULP figure with its absolute floor, grown with the accumulation length where the
operator's is), through checking/comparison.py's rule_for and compare_arrays, as --check uses them; a node that
runs no DirectML operator (folded, a view) must match bit for bit. The chained run's outputs (each node on
dmlcli's own values) are measured against ONNX Runtime's too, and reported beside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..checking.bounds import ElementBound, finished_bounds
from ..checking.comparison import EXACT, Comparison, Rule, compare_arrays, rule_for, ulp_distance, with_bound
from ..data_types import as_bits
from ..suite.onnx.mapping import arrangement, prepare
from .fusions import removed_outputs
from .reference import reference_values
from .session import OnnxSession, Progress
from .steps import ComposedStep, DirectMLStep, FallbackStep, Step

MATCHES, DIVERGES, NOT_COMPARED = "matches", "DIVERGES", "not compared"


@dataclass
class OutputComparison:
    name: str
    dtype: str
    shape: tuple[int, ...]
    rule: Rule
    comparison: Comparison | None  # None: ONNX Runtime gave no value to compare with
    max_ulp: float = 0.0
    max_abs: float = 0.0

    @property
    def verdict(self) -> str:
        if self.comparison is None:
            return NOT_COMPARED
        return MATCHES if self.comparison.passed else DIVERGES

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "verdict": self.verdict,
                "max_ulp": _finite(self.max_ulp), "max_abs_error": _finite(self.max_abs),
                "tolerance": self.rule.describe(), "tolerance_source": self.rule.source or None,
                "mismatches": None if self.comparison is None else self.comparison.mismatches}


def _finite(value: float):
    return value if math.isfinite(value) else "inf"


@dataclass
class NodeComparison:
    step: Step
    outputs: list[OutputComparison]

    @property
    def verdict(self) -> str:
        verdicts = [output.verdict for output in self.outputs]
        if DIVERGES in verdicts:
            return DIVERGES
        return MATCHES if MATCHES in verdicts else NOT_COMPARED

    @property
    def max_ulp(self) -> float:
        return max((output.max_ulp for output in self.outputs), default=0.0)

    @property
    def max_abs(self) -> float:
        return max((output.max_abs for output in self.outputs), default=0.0)

    def to_json(self) -> dict:
        node = self.step.node
        found = {"index": node.index, "name": node.proto.name, "op": node.op, "kind": self.step.kind,
                 "directml": self.step.directml, "verdict": self.verdict,
                 "outputs": [output.to_json() for output in self.outputs]}
        if isinstance(self.step, FallbackStep):
            found["fallback_reason"] = self.step.reason
        if node.fusion:
            found["fusion"] = node.fusion
            found["fused"] = [{"index": member.index, "name": member.proto.name, "op": member.op,
                               "outputs": [name for made_by, name in removed_outputs(node) if made_by is member]}
                              for member in node.fused]
        return found


@dataclass
class ModelComparison:
    nodes: list[NodeComparison]
    outputs: dict[str, float] = field(default_factory=dict)  # the chained run's largest absolute difference

    @property
    def diverging(self) -> list[NodeComparison]:
        return [node for node in self.nodes if node.verdict == DIVERGES]

    @property
    def first_divergence(self) -> NodeComparison | None:
        return next(iter(self.diverging), None)

    def to_json(self) -> dict:
        first = self.first_divergence
        return {"verdict": "DIVERGES" if first is not None else "MATCHES",
                "first_divergence": None if first is None else first.step.node.label,
                "diverging_nodes": len(self.diverging), "nodes": [node.to_json() for node in self.nodes],
                "fused_tensors": [{"name": name, "node": made_by, "fusion": fusion}
                                  for name, made_by, fusion in fused_tensors(self)],
                "chained_outputs_max_abs_error": {name: _finite(value) for name, value in self.outputs.items()}}


def output_rule(step: Step, dtype: np.dtype) -> Rule:
    """The rule a node's output is compared by: its DirectML operator's for the call (checking/comparison.py's
    rule_for, which follows --check and any change made there), bit for bit for every other kind of node."""
    if isinstance(step, DirectMLStep) and step.last_verdict is not None:
        call = step.last_verdict.call
        return rule_for(step.operator, dtype, None, call.parameters, call)
    return EXACT


def compared_output(step: Step, name: str, got: np.ndarray, want: np.ndarray | None,
                    bound: ElementBound | None = None) -> OutputComparison:
    """One output against ONNX Runtime's, by output_rule with the output's sum bound where it differs at all."""
    got = np.asarray(got)
    rule = output_rule(step, got.dtype)
    result = OutputComparison(name, str(got.dtype), tuple(got.shape), rule, None)
    if want is None:
        return result
    want = np.asarray(want)
    if want.dtype == np.bool_ or got.dtype == np.bool_:
        got, want = got.astype(np.uint8), want.astype(np.uint8)
    if got.dtype == want.dtype and got.shape == want.shape and not np.array_equal(as_bits(got), as_bits(want)):
        rule = with_bound(rule, bound)
        result.rule = rule
    result.comparison = compare_arrays(got, want, rule)
    if result.comparison.reason is None:
        result.max_ulp, result.max_abs = largest_differences(got, want)
    else:
        result.max_ulp = result.max_abs = math.inf
    return result


def largest_differences(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """The largest distance in ULP of the type (integers: in units) and in absolute value, NaN against NaN
    counting as equal and NaN against a number as infinitely far."""
    if got.size == 0:
        return 0.0, 0.0
    if got.dtype.kind != "f":
        difference = np.abs(got.astype(np.float64) - want.astype(np.float64))
        return float(difference.max()), float(difference.max())
    with np.errstate(all="ignore"):
        both = np.isnan(got) & np.isnan(want)
        one = np.isnan(got) != np.isnan(want)
        if one.any():
            return math.inf, math.inf
        absolute = np.where(both, 0.0, np.abs(got.astype(np.float64) - want.astype(np.float64)))
        absolute = np.where(np.isnan(absolute), 0.0, absolute)  # equal infinities
        ulps = np.where(both, 0.0, ulp_distance(got, want).astype(np.float64))
    return float(ulps.max()), float(absolute.max())


def compare_with_ort(session: OnnxSession, inputs: Mapping[str, np.ndarray], *,
                     progress: Progress | None = None) -> tuple[dict[str, np.ndarray], ModelComparison]:
    """The model's outputs (the chained run) and every node compared with ONNX Runtime's CPU provider."""
    plan = session.plan_for(inputs)
    feeds = session.checked_inputs(inputs)
    chained = session.run(feeds, keep_all=True)
    executor = session.executor
    # ONNX Runtime runs the model's own nodes (optimisations off): a fused node's outputs carry the names of the
    # last nodes it stands for, and the tensors the fusion removed are listed as fused (fused_tensors).
    reference = reference_values(session.model, session.model_nodes, feeds, plan.types, chained)
    nodes = []
    for position, step in enumerate(plan.steps):
        on_reference = {name: executor.to_device(reference[name]) for name in step.node.inputs
                        if name and name in reference}
        if isinstance(step, ComposedStep) and all(not name or name in on_reference for name in step.node.inputs):
            nodes.append(NodeComparison(step, _compared_parts(session, step, reference)))
        elif all(not name or name in on_reference for name in step.node.inputs):
            with executor.running():
                outputs = {name: executor.to_host(array)
                           for name, array in session.run_step(step, on_reference).items()}
            nodes.append(NodeComparison(step, _compared_outputs(step, outputs, reference, on_reference,
                                                                executor.to_host)))
        else:  # ONNX Runtime has no value for an input (one inference could not type, or a fusion's own tensor):
            # the chained run's outputs, and its inputs for the sum bounds
            outputs = {name: executor.to_host(chained[name]) for name in step.node.outputs if name}
            own = {name: chained[name] for name in step.node.inputs if name}
            nodes.append(NodeComparison(step, _compared_outputs(step, outputs, reference, own, executor.to_host)))
        if progress is not None:
            progress(position + 1, len(plan.steps))
    results = {d.name: executor.to_host(chained[d.name]) for d in session.model.outputs}
    differences = {name: largest_differences(np.asarray(array), np.asarray(reference[name]))[1]
                   for name, array in results.items() if name in reference
                   and np.shape(array) == np.shape(reference[name])}
    return results, ModelComparison(nodes, differences)


def _compared_parts(session: OnnxSession, step: ComposedStep, reference: Mapping) -> list[OutputComparison]:
    """A composed node's calls, each on ONNX Runtime's values of its inputs where the model has them (else on the
    value the call before it made), each output the model names compared by the call's own rule."""
    executor = session.executor
    made: dict[str, object] = {}
    compared = []
    for part in step.parts:
        inputs = {name: executor.to_device(reference[name]) if name in reference else made[name]
                  for name in part.node.inputs if name}
        with executor.running():
            outputs = session.run_step(part, inputs)
        made.update(outputs)
        named = {name: executor.to_host(array) for name, array in outputs.items() if name in reference}
        if named:
            compared.extend(_compared_outputs(part, named, reference, inputs, executor.to_host))
    return compared


def fused_tensors(comparison: ModelComparison) -> list[tuple[str, str, str]]:
    """The tensors of the model that a fusion removed: (tensor, the node that made it, the fusion), in node order."""
    return [(name, member.label, node.step.node.fusion) for node in comparison.nodes
            for member, name in removed_outputs(node.step.node)]


def _compared_outputs(step: Step, outputs: dict, reference: Mapping, inputs: Mapping,
                      to_host=np.asarray) -> list[OutputComparison]:
    names = [name for name in step.node.outputs if name]
    got = [outputs[name] for name in names]
    want = [reference.get(name) for name in names]
    bounds = [None] * len(names)
    if isinstance(step, DirectMLStep) and all(w is not None for w in want):
        arrange = arrangement(step.entry, step.call(inputs))
        if arrange is not tuple:  # ONNX leaves the order free: both sides ordered by index
            got, want = list(arrange(got)), list(arrange(want))
        elif step.operator.sum_bound is not None and step.last_verdict is not None:
            bounds = _node_bounds(step, inputs, got, to_host)
    return [compared_output(step, name, g, w, b) for name, g, w, b in zip(names, got, want, bounds)]


def _node_bounds(step: DirectMLStep, inputs: Mapping, got: list, to_host) -> list:
    """Each output's sum bound for the node's call on `inputs` (ONNX Runtime's values of them): the DirectML call's
    bounds from the arrays the adapter gives it, carried through the adapter's finish as the outputs are (as the
    suite runner's cases are)."""
    prepared = prepare(step.entry, step.call(inputs))
    arrays = [None if array is None else to_host(array) for array in prepared.inputs]
    return finished_bounds(step.last_verdict.call, arrays, prepared.finish, got)
