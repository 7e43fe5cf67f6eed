"""A plan's run that keeps only the model's outputs (OnnxSession.run without keep_all): its view nodes read through.

A planned view node (Reshape, Squeeze, Unsqueeze, Flatten, Identity: its output is its input itself or a C-ordered
reshape of it) makes an array that the nodes after it only read. Where every later node that reads it is planned
(its call's or view's arrays made again from its inputs: planned.py), each of those can make its arrays of the
view's input instead (planned.read_through: the same arrays), and the run need not make the view's output at all:
a runner call less a view (about 3 us here; 22 of the Transformer encoder's 64 nodes are views). A run that keeps
every tensor (keep_all: --compare ort) runs the whole program.

A reader whose inputs are not those it was planned for (its runner declines) runs the views it reads through first,
in order, then its own advancer: the general path, as in the whole program.
"""

from __future__ import annotations

from typing import Sequence

from .planned import PlannedCall, PlannedView, read_through
from .steps import Advance, Step

Entry = tuple[int, Step, tuple[str, ...]]


def lean_program(running: Sequence[Entry], program: Sequence[tuple[int, Advance, tuple[str, ...]]],
                 kept: set[str]) -> list[tuple[int, Advance, tuple[str, ...]]]:
    """`program` (the whole plan's: running's steps' advancers) without the view nodes its readers read through,
    each such reader's advancer made of its planned call read through them, and the tensors freed after each step
    worked out again for what the steps left read. `kept`: the tensors never freed (the model's outputs and
    constants), which no view is skipped for. A view's constant inputs (a Reshape's shape) are the plan's on every
    run: a model's inputs are never its initializers (loading.py), so no run gives another value for them."""
    planned = [step.planned for _, step, _ in running]
    reads = [tuple(p.wiring.inputs) if p is not None else step.node.inputs for p, (_, step, _) in zip(planned, running)]
    through: list[list[int]] = [[] for _ in running]
    skipped: set[int] = set()
    for index in reversed(range(len(running))):
        view = planned[index]
        if not isinstance(view, PlannedView) or len(view.wiring.outputs) != 1:
            continue
        ((_, name),) = view.wiring.outputs
        if name in kept:
            continue
        readers = [later for later in range(index + 1, len(running)) if later not in skipped and name in reads[later]]
        rewritten = _read_through(readers, planned, name, view)
        if rewritten is None:
            continue
        for later, made in rewritten.items():
            planned[later], reads[later] = made, tuple(made.wiring.inputs)
            through[later] = sorted({index, *through[index], *through[later]})
        skipped.add(index)
    frees = _frees(reads, skipped, kept)
    whole = [advance for _, advance, _ in program]
    return [(position, _advancer(step, planned[index], [whole[view] for view in through[index]], whole[index]),
             frees[index])
            for index, (position, step, _) in enumerate(running) if index not in skipped]


def _read_through(readers: list[int], planned: list, name: str, view: PlannedView
                  ) -> dict[int, PlannedCall | PlannedView] | None:
    """Each reader's planned call or view read through the view, or None where one cannot be (a reader that kept
    no call or view: a composed node, a fallback, a call that reads a runtime value; or one read_through declines:
    ONNX's bool tensors, which only the general path passes)."""
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
