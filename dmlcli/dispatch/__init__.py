"""Running DxDispatch models: the Python API behind `dmlcli dispatch`.

A DxDispatch model (microsoft/DirectML, DxDispatch/doc/Guide.md) is a JSON file of resources
(buffers), dispatchables (DirectML operators) and commands (dispatch, print, writeFile). dmlcli
runs the ones whose operators are in its table, anywhere, on NumPy or CuPy:

    from dmlcli.dispatch import load_model, run_model
    run = run_model(load_model("repro.json"), backend="cpu")
    run.buffers["Out"]          # the buffer's final bytes

The work is split by concern: jsonc (comments and trailing commas), model (the
format, resources and initialisers), plan (DirectML's rules, checked before anything runs),
run (execution) and printing (DxDispatch's text output); onnx (ONNX dispatchables through ONNX
Runtime, deferred resources), serialized_graph (dmlSerializedGraph: serialized DirectML graphs, read
with FlatBuffers and run node by node) and images (.jpg / .png through Pillow); strided views are
dmlcli.io.strided.
"""

from __future__ import annotations

from typing import Callable

from .jsonc import shown
from .memory import out_of_memory
from .model import Model, read_model
from .onnx import OnnxDispatchable, providers_for
from .binding import PlannedDispatch
from .plan import check_model
from .run import DispatchTiming, ModelRun, run_commands
from ..engine import choose_backend
from ..errors import InputError
from ..feature_levels import parse_feature_level

__all__ = ["DispatchTiming", "Model", "ModelRun", "check", "load_model", "run_model"]


def load_model(path, *, output_dir=None, allow_paths_outside: bool = False) -> Model:
    """Parse a model file. Raises InputError (exit code 2) for anything malformed or unsupported.

    Relative writeFile targets resolve against `output_dir` (default: the current folder, as in
    DxDispatch); sourcePath files are looked up beside the model first, then in the current folder.
    A model is untrusted input: its writes must stay inside `output_dir` and its reads inside the
    model's folder (links followed), unless `allow_paths_outside` (--allow-paths-outside).
    """
    try:
        return read_model(path, output_dir=output_dir, allow_paths_outside=allow_paths_outside)
    except MemoryError:
        raise out_of_memory(f"model {shown(str(path))}") from None


def check(model: Model, *, feature_level=None) -> list[PlannedDispatch]:
    """Validate every dispatch of `model` at `feature_level`; raises ValidationError (exit code 3)."""
    _, planned = check_model(model, feature_level)
    return planned


def run_model(model: Model, *, backend="cpu", feature_level=None, iterations: int = 1, warmup: int = 1,
              emit: Callable[[str], None] = print, timing: bool = True) -> ModelRun:
    """Check the whole model, then run its commands in order; each dispatch runs `iterations` times.

    `emit` receives each output line (prints, writeFile notes and, with `timing`, DxDispatch's
    per-dispatch timing summary: the median of the samples after the first `warmup`).
    """
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise InputError(f"iterations must be a positive integer, got {shown(iterations)}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise InputError(f"warmup must be a non-negative integer, got {shown(warmup)}")
    feature_level = parse_feature_level(feature_level)  # refused even when the model has no dispatch
    try:
        engine = choose_backend(backend)
        providers = None
        if any(isinstance(d, OnnxDispatchable) for d in model.dispatchables.values()):
            providers = providers_for(getattr(engine, "name", "cpu"), explicit=backend == "gpu")
        _, planned = check_model(model, feature_level, onnx_providers=providers)
        return run_commands(model, planned, engine, iterations=iterations, warmup=warmup, emit=emit,
                            timing=timing)
    except MemoryError:
        raise out_of_memory(f"model {shown(str(model.path))}") from None
