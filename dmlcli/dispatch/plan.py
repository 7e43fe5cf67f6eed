"""DirectML's rules for a model's dispatches, checked before anything runs.

Every dispatchable of the model is checked by its kind's rules (binding.py for operator dispatchables, onnx.py
for ONNX models, serialized_graph/graph.py for serialized DirectML graphs), and each dispatch command planned:
its bindings resolved to byte ranges of the model's buffers and checked, so that a model runs whole or not at
all. A deferred resource is read only after the dispatch that gives it contents.
"""

from __future__ import annotations

from .binding import CheckedDispatchable, bind_dispatch, check_dispatchable
from .dispatchable import Dispatchable, DispatchCommand
from .jsonc import shown
from .memory import MemoryBudget
from .model import Model, room_for_contents
from .onnx import OnnxDispatchable, open_session, plan_onnx_dispatch
from ..errors import InputError


def check_model(model: Model, feature_level=None, *, onnx_providers: list[str] | None = None,
                ) -> tuple[dict[str, CheckedDispatchable], list]:
    """Validate every dispatchable and every dispatch command; raise on the first broken rule.

    The list holds a PlannedDispatch, PlannedOnnxDispatch or PlannedGraphDispatch (serialized graphs) per
    dispatch command.

    ONNX dispatchables are opened as ONNX Runtime sessions on `onnx_providers` (default: the CPU's), one
    per dispatchable, and each dispatch's bindings are checked against the model's inputs and outputs.
    """
    checked = {name: check_dispatchable(d, feature_level) for name, d in model.dispatchables.items()
               if isinstance(d, Dispatchable)}
    onnx = {name: d for name, d in model.dispatchables.items() if isinstance(d, OnnxDispatchable)}
    graphs = {name: d for name, d in model.dispatchables.items()
              if not isinstance(d, (Dispatchable, OnnxDispatchable))}
    if graphs:  # serialized DirectML graphs: each node validated once, as an operator dispatchable
        from .serialized_graph.graph import check_graph, plan_graph_dispatch

        checked_graphs = {name: check_graph(d, feature_level) for name, d in graphs.items()}
    # ONNX Runtime's tensors (its outputs too: they come back as arrays over its memory) may use what the rest of
    # the run leaves of the memory available: its buffers, the files it stages, its prints.
    limit = None
    if onnx:
        available = MemoryBudget().available
        limit = None if available is None else max(available - sum(room_for_contents(model).values()), 0)
    sessions = {name: open_session(d, onnx_providers or ["CPUExecutionProvider"], limit) for name, d in onnx.items()}
    planned = []
    for command in model.commands:
        if not isinstance(command, DispatchCommand):
            continue
        if command.dispatchable in sessions:
            planned.append(plan_onnx_dispatch(command, model.dispatchables[command.dispatchable],
                                              sessions[command.dispatchable], model.resources))
        elif command.dispatchable in graphs:
            planned.append(plan_graph_dispatch(command, graphs[command.dispatchable],
                                               checked_graphs[command.dispatchable], model.resources))
        else:
            planned.append(bind_dispatch(command, checked[command.dispatchable], model.resources))
    check_deferred_uses(model, planned)
    return checked, planned


def check_deferred_uses(model: Model, planned: list) -> None:
    """A deferred resource is readable (print, writeFile) only after the dispatch that gave it its contents, and
    until the next dispatch: DxDispatch's Executor clears its deferred bindings at every dispatch command."""
    by_command = {id(p.command): p for p in planned}
    resolved: set[str] = set()
    for command in model.commands:
        if isinstance(command, DispatchCommand):
            dispatch = by_command[id(command)]
            resolved = {t.resource for t in getattr(dispatch, "tensors", ()) if getattr(t, "deferred", False)}
            continue
        resource = model.resources[command.resource]
        if resource.deferred and command.resource not in resolved:
            raise InputError(f"command {command.index}: resource {shown(command.resource)} is deferred and the "
                             "dispatch just before this command did not give it contents (a deferred resource holds "
                             "an ONNX output until the next dispatch, as in DxDispatch)")
