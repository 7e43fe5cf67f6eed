"""A plan's run that keeps only the model's outputs (OnnxSession.run without keep_all): its view nodes and the nodes
that only move data read through.

A planned view node (Reshape, Squeeze, Unsqueeze, Flatten, Identity: its output is its input itself or a C-ordered
reshape of it) makes an array that the nodes after it only read. Where every later node that reads it is planned
(its call's or view's arrays made again from its inputs: planning/planned.py), each of those can make its arrays of the
view's input instead (planned.read_through: the same arrays), and the run need not make the view's output at all:
a runner call less a view (about 3 us here; 22 of the Transformer encoder's 64 nodes are views). So too a planned node
that only moves data (a Transpose, a Gather of constant indices, a Slice: planning/copies.py finds its output a copy of
one view of its input): its readers make a copy of that view themselves, and a chain of such nodes is one copy of their
views composed (the encoder's attention: Transpose, Gather, Transpose, Reshape, Transpose before each product). A node
the DirectML provider runs as several calls (a composed step: SkipLayerNormalization) counts here as its calls, each a
reader of its own. A run that keeps every tensor (keep_all: --compare ort) runs the whole program.

A reader whose inputs are not those it was planned for (its runner declines) runs the nodes it reads through first,
in order, then its own advancer: the general path, as in the whole program.
"""

from __future__ import annotations

from typing import Sequence

from .planning.copies import copying_view
from .planning.planned import PlannedCall, PlannedView, read_through
from .steps import Advance, Step

# A DirectML call of the plan (a step, or one call of a composed step): its node's position, its step, its advancer.
Call = tuple[int, Step, Advance]


def lean_program(calls: Sequence[Call], kept: set[str]) -> list[tuple[int, Advance, tuple[str, ...]]]:
    """The plan's calls (Step.lean_calls of the running steps, in order) as a run that keeps only the model's outputs
    runs them: without the view and data-moving nodes their readers read through, each such reader's advancer made of
    its planned call read through them, and the tensors freed after each call worked out again for what the calls
    left read. `kept`: the tensors never freed (the model's outputs and constants), which no node is skipped for. A
    view's constant inputs (a Reshape's shape, a Gather's indices) are the plan's on every run: a model's inputs are
    never its initializers (loading.py), so no run gives another value for them."""
    planned = [step.planned for _, step, _ in calls]
    reads = [tuple(p.wiring.inputs) if p is not None else step.node.inputs for p, (_, step, _) in zip(planned, calls)]
    through: list[list[int]] = [[] for _ in calls]
    skipped: set[int] = set()
    for index in reversed(range(len(calls))):
        view = _as_view(planned[index])
        if view is None or len(view.wiring.outputs) != 1:
            continue
        ((_, name),) = view.wiring.outputs
        if name in kept:
            continue
        readers = [later for later in range(index + 1, len(calls)) if later not in skipped and name in reads[later]]
        rewritten = _read_through(readers, planned, name, view)
        if rewritten is None:
            continue
        for later, made in rewritten.items():
            planned[later], reads[later] = made, tuple(made.wiring.inputs)
            through[later] = sorted({index, *through[index], *through[later]})
        skipped.add(index)
    frees = _frees(reads, skipped, kept)
    whole = [advance for _, _, advance in calls]
    return [(position, _advancer(step, planned[index], [whole[view] for view in through[index]], whole[index]),
             frees[index])
            for index, (position, step, _) in enumerate(calls) if index not in skipped]


def _as_view(planned: PlannedCall | PlannedView | None) -> PlannedView | None:
    """What a lean run may read through of a planned node: a view, or a call that only moves data as the view that
    copies it is (planning/copies.py)."""
    if isinstance(planned, PlannedCall):
        return copying_view(planned)
    return planned


def _read_through(readers: list[int], planned: list, name: str, view: PlannedView
                  ) -> dict[int, PlannedCall | PlannedView] | None:
    """Each reader's planned call or view read through the view, or None where one cannot be (a reader that kept
    no call or view: a fallback, a call that reads a runtime value; or one read_through declines: ONNX's bool
    tensors, which only the general path passes, or views of a chain that do not compose)."""
    if not readers:
        return None
    rewritten = {}
    for later in readers:
        made = None if planned[later] is None else read_through(planned[later], name, view)
        if made is None:
            return None
        rewritten[later] = made
    return rewritten


def _frees(reads: list[tuple[str, ...]], skipped: set[int], kept: set[str]) -> list[tuple[str, ...]]:
    """The tensors each step is the last to read (OnnxSession._running's rule, on what the steps left read)."""
    last_use = {name: index for index, names in enumerate(reads) if index not in skipped for name in names if name}
    return [tuple(dict.fromkeys(name for name in names if name and last_use[name] == index and name not in kept))
            if index not in skipped else () for index, names in enumerate(reads)]


def _advancer(step: Step, planned, views: list[Advance], own: Advance) -> Advance:
    """The step's advancer in the lean program: its own where it reads through no view."""
    if not views:
        return own
    return step.advancer_through(planned, views, own)
