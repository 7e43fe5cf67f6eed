"""Running a checked model: buffers as bytes, dispatches through a backend, commands in order.

As in DxDispatch, every buffer starts with its initial values, commands run in the order the
model gives, and their effects last: a dispatch repeated (by `iterations`, DxDispatch's -i, or
by several dispatch commands) works on what the previous one left in the buffers.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..engine import HookTally, execute
from .model import DispatchCommand, Model, PrintCommand, WriteFileCommand
from .plan import BoundTensor, PlannedDispatch
from .printing import format_resource, format_timing
from ..io.strided import little_endian, strided_view
from ..errors import DmlcliWarning, InputError


@dataclass(frozen=True)
class DispatchTiming:
    """One dispatch command's samples, in milliseconds, split as DxDispatch splits them."""

    name: str
    cpu_samples_ms: tuple[float, ...]
    warmup: int
    gpu_samples_ms: tuple[float, ...] = ()

    @staticmethod
    def hot(samples, warmup: int) -> tuple[float, ...]:
        # Executor.cpp: cold = min(max(n, 1) - 1, maxWarmup) samples; at least one sample stays hot.
        cold = min(max(len(samples), 1) - 1, warmup)
        return tuple(samples[cold:])

    @staticmethod
    def median(samples) -> float:
        ordered = sorted(samples)
        return ordered[len(ordered) // 2]  # Executor.cpp takes samples[size / 2]

    @property
    def cpu_median_ms(self) -> float:
        return self.median(self.hot(self.cpu_samples_ms, self.warmup))

    @property
    def gpu_median_ms(self) -> float | None:
        if not self.gpu_samples_ms:
            return None
        return self.median(self.hot(self.gpu_samples_ms, self.warmup))


@dataclass
class ModelRun:
    """What a run left: the final buffer contents, the printed lines and the timings."""

    buffers: dict[str, bytearray]
    lines: list[str] = field(default_factory=list)
    timings: list[DispatchTiming] = field(default_factory=list)


def run_commands(model: Model, planned: list[PlannedDispatch], backend, *, iterations: int = 1, warmup: int = 1,
                 emit: Callable[[str], None] = print, timing: bool = True) -> ModelRun:
    buffers = {name: resource.initial_contents() for name, resource in model.resources.items()}
    run = ModelRun(buffers)
    snapshots = {id(p): _initialisation_inputs(p, buffers) for p in planned}
    by_command = {id(p.command): p for p in planned}

    def say(line: str) -> None:
        run.lines.append(line)
        emit(line)

    for command in model.commands:
        if isinstance(command, DispatchCommand):
            dispatch = by_command[id(command)]
            result = _run_dispatch(dispatch, buffers, snapshots[id(dispatch)], backend, iterations, warmup)
            run.timings.append(result)
            if timing:
                say(format_timing(result.name, iterations, result.cpu_median_ms, result.gpu_median_ms,
                                  _gpu_note(backend)))
        elif isinstance(command, PrintCommand):
            say(format_resource(model.resources[command.resource], buffers[command.resource], verbose=command.verbose))
        elif isinstance(command, WriteFileCommand):
            write_resource(command, model, buffers)
            say(f"Resource '{command.resource}' written to '{command.target_path}'")
    return run


def _gpu_note(backend) -> str | None:
    if getattr(backend, "name", "") != "gpu" or hasattr(backend, "run_resident"):
        return None
    return "GPU time not measured (this gpu backend cannot launch on device arrays)"


class _KernelTimedGpu:
    """The GPU backend with DxDispatch's GPU time: CUDA events around the kernel alone, as D3D12 timestamps
    bracket a dispatch. Needs the backend's run_resident (a launch on device arrays)."""

    name = "gpu"

    def __init__(self, backend):
        self.backend = backend
        self.samples_ms: list[float] = []

    def execute(self, operator, inputs, out_shape, out_dtype, parameters):
        import cupy

        # run_resident takes contiguous same-sized arrays; flat ones let it pick its widest word freely.
        device_inputs = [cupy.asarray(np.ascontiguousarray(np.broadcast_to(x, out_shape)).reshape(-1)) for x in inputs]
        device_out = cupy.empty(int(np.prod(out_shape)), dtype=out_dtype)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        self.backend.run_resident(operator, device_inputs, device_out, parameters)
        end.record()
        end.synchronize()
        self.samples_ms.append(float(cupy.cuda.get_elapsed_time(start, end)))
        return cupy.asnumpy(device_out).reshape(tuple(out_shape))


def _timed(backend):
    if getattr(backend, "name", "") == "gpu" and hasattr(backend, "run_resident"):
        return _KernelTimedGpu(backend)
    return backend


# ---------------------------------------------------------------- one dispatch


def _element_view(buffers: dict[str, bytearray], tensor: BoundTensor, where: str) -> np.ndarray:
    raw = buffers[tensor.resource]
    dtype = little_endian(tensor.desc.data_type.numpy_dtype)
    count = (len(raw) - tensor.offset_in_bytes) // dtype.itemsize
    flat = np.frombuffer(raw, dtype=dtype, count=count, offset=tensor.offset_in_bytes)
    return strided_view(flat, tensor.desc.sizes, tensor.strides, where=where)


def _initialisation_inputs(dispatch: PlannedDispatch, buffers) -> dict[str, np.ndarray]:
    """OWNED_BY_DML inputs, read once from the initial buffers (DirectML takes them at initialisation)."""
    return {name: np.ascontiguousarray(_element_view(buffers, tensor, name))
            for name, tensor in dispatch.tensors.items() if tensor.at_initialisation}


def _run_dispatch(dispatch: PlannedDispatch, buffers, snapshots, backend, iterations: int, warmup: int) -> DispatchTiming:
    verdict = dispatch.checked.verdict
    op = verdict.call.operator
    cpu_samples = []
    timed = _timed(backend)
    tally = HookTally(verdict.call)  # over every iteration: in-place models change their inputs
    for _ in range(iterations):
        # Strided views straight into the buffers (no copy): backends return a new array, so the inputs
        # are read in full before the output is written back, which is what makes in-place dispatches exact.
        inputs = [snapshots[name] if name in snapshots else _element_view(buffers, dispatch.tensors[name], name)
                  for name in op.inputs if name in dispatch.tensors]
        start = time.perf_counter()
        result = execute(verdict, inputs, timed, tally=tally).output
        target = _element_view(buffers, dispatch.tensors[op.output], op.output)
        if np.may_share_memory(result, target):  # a backend handing back a view of an aliased input
            result = np.array(result)
        target[...] = result
        cpu_samples.append((time.perf_counter() - start) * 1000.0)
    for message in tally.warnings(prefix=f"dispatch {dispatch.name!r}: "):
        warnings.warn(message, DmlcliWarning, stacklevel=2)
    gpu_samples = tuple(getattr(timed, "samples_ms", ()))
    return DispatchTiming(dispatch.name, tuple(cpu_samples), warmup, gpu_samples)


# ---------------------------------------------------------------- writeFile


def write_resource(command: WriteFileCommand, model: Model, buffers) -> None:
    """Write a buffer as .npy (elements of its initialValuesDataType) or raw bytes, atomically.

    As DxDispatch's Executor.cpp: without "dimensions" the .npy is 1-D and covers the whole buffer,
    sizeInBytes / element size elements (so the 4-byte padding shows, unlike in print); with
    "dimensions" it has that shape. Any other extension gets the buffer's raw bytes.
    """
    from ..io.atomic import write_atomically

    resource = model.resources[command.resource]
    contents = bytes(buffers[command.resource])
    path = Path(command.target_path)
    where = f"command {command.index} (writeFile {str(path)!r})"
    if path.suffix.lower() != ".npy":
        _make_folder(path, where)
        write_atomically(path, lambda handle: handle.write(contents))
        return
    dtype = little_endian(resource.data_type.numpy_dtype)
    shape = command.dimensions or (resource.size_in_bytes // dtype.itemsize,)
    count = int(np.prod(shape, dtype=object))
    if count * dtype.itemsize > len(contents):
        raise InputError(f"{where}: dimensions {list(shape)} need {count * dtype.itemsize} bytes, but buffer "
                         f"{command.resource!r} holds {len(contents)}")
    array = np.frombuffer(contents, dtype=dtype, count=count).reshape(shape)
    _make_folder(path, where)
    write_atomically(path, lambda handle: np.save(handle, array.astype(array.dtype.newbyteorder("=")),
                                                  allow_pickle=False))


def _make_folder(path: Path, where: str) -> None:
    # DxDispatch creates missing folders for its output files.
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{where}: cannot create the folder {str(path.parent)!r} ({error.strerror})") from None
