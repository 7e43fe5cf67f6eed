"""Running a checked model: buffers as bytes, dispatches through a backend, commands in order.

As in DxDispatch, every buffer starts with its initial values, commands run in the order the
model gives, and their effects last: a dispatch repeated (by `iterations`, DxDispatch's -i, or
by several dispatch commands) works on what the previous one left in the buffers.

Unlike DxDispatch, writeFile commands are staged (the buffer's bytes at that command) and written
only once every command has run, each atomically, so a model that fails part-way writes nothing.
Timing keeps constant memory whatever the iteration count (SampleReservoir).
"""

from __future__ import annotations

import math
import random
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..data_types import from_kernel_array, to_kernel_array
from ..engine import HookTally, execute
from ..calls.validation import field_of
from .jsonc import shown
from .memory import DISPATCH_BYTES_PER_ELEMENT, PRINT_BYTES_PER_ELEMENT, MemoryBudget
from .binding import BoundTensor, PlannedDispatch
from .dispatchable import DispatchCommand
from .model import Model, PrintCommand, WriteFileCommand, room_for_contents
from .images import check_image_write, encode_image, image_suffix
from .onnx import PlannedOnnxDispatch, run_onnx_dispatch
from .printing import format_resource, format_timing, format_values
from ..io.strided import buffer_bytes_for, from_buffer_bytes, store_four_bit, strided_view
from ..errors import DmlcliWarning, InputError, printable


class SampleReservoir:
    """One dispatch's timing samples in constant memory, whatever the iteration count.

    The first `warmup` samples are DxDispatch's cold ones and are dropped as they come (when there
    are no more samples than that, the last one stays hot, as in Executor.cpp). The hot ones are
    all kept up to CAPACITY, so their median is DxDispatch's exactly; past it, a uniform random
    sample of CAPACITY of them is kept (reservoir sampling, Vitter's algorithm R, fixed seed), whose
    median estimates the median of all.
    """

    CAPACITY = 10_000

    def __init__(self, warmup: int, capacity: int | None = None, seed: int = 0):
        self.warmup = warmup
        self.capacity = capacity or self.CAPACITY
        self.count = 0  # samples seen, cold and hot
        self.hot_count = 0
        self.kept: list[float] = []
        self.last: float | None = None
        self._random = random.Random(seed)

    def add(self, sample: float) -> None:
        self.count += 1
        self.last = sample
        if self.count <= self.warmup:
            return
        self.hot_count += 1
        if len(self.kept) < self.capacity:
            self.kept.append(sample)
            return
        slot = self._random.randrange(self.hot_count)
        if slot < self.capacity:
            self.kept[slot] = sample

    def hot(self) -> tuple[float, ...]:
        if self.hot_count == 0:
            return () if self.last is None else (self.last,)
        return tuple(self.kept)


@dataclass(frozen=True)
class DispatchTiming:
    """One dispatch command's samples, in milliseconds, split as DxDispatch splits them.

    From a run, the samples are the hot ones a SampleReservoir kept (every one up to its capacity)
    and `warmup` is 0, the cold ones being dropped as they came; `sample_count` is how many were
    taken. Built by hand, the first `warmup` samples are cold, as in DxDispatch.
    """

    name: str
    cpu_samples_ms: tuple[float, ...]
    warmup: int
    gpu_samples_ms: tuple[float, ...] = ()
    sample_count: int | None = None

    @classmethod
    def from_reservoirs(cls, name: str, cpu: SampleReservoir, gpu: SampleReservoir | None) -> "DispatchTiming":
        return cls(name, cpu.hot(), 0, gpu.hot() if gpu is not None else (), cpu.count)

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
    """Run the commands in order; the files the model writes are written at the end, once all have run."""
    check_room_to_run(model, planned)
    buffers = {name: resource.initial_contents() for name, resource in model.resources.items()}
    run = ModelRun(buffers)
    snapshots = {id(p): _initialisation_inputs(p, buffers) for p in planned if isinstance(p, PlannedDispatch)}
    by_command = {id(p.command): p for p in planned}
    staged: list[tuple[WriteFileCommand, bytes]] = []
    layouts: dict[int, tuple] = {}  # id(command) -> (DataType, shape) of a deferred resource's staged bytes
    deferred: dict[str, tuple] = {}  # deferred resource -> (DataType, shape, bytes), until the next dispatch

    def say(line: str) -> None:
        run.lines.append(line)
        emit(line)

    for command in model.commands:
        if isinstance(command, DispatchCommand):
            dispatch = by_command[id(command)]
            deferred.clear()  # Executor.cpp: m_deferredBinding.clear() at every dispatch command
            if isinstance(dispatch, PlannedOnnxDispatch):
                result = _run_onnx(dispatch, buffers, deferred, iterations, warmup)
            elif isinstance(dispatch, PlannedDispatch):
                result = _run_dispatch(dispatch, buffers, snapshots[id(dispatch)], backend, iterations, warmup)
            else:  # a serialized DirectML graph (serialized_graph.graph.PlannedGraphDispatch)
                result = _run_graph(dispatch, buffers, backend, iterations, warmup)
            run.timings.append(result)
            if timing:
                say(format_timing(result.name, iterations, result.cpu_median_ms, result.gpu_median_ms,
                                  None if isinstance(dispatch, PlannedOnnxDispatch) else _gpu_note(backend)))
        elif isinstance(command, PrintCommand):
            if command.resource in deferred:
                data_type, shape, contents = deferred[command.resource]
                say(format_values(command.resource, data_type, contents, math.prod(shape), verbose=command.verbose))
            else:
                say(format_resource(model.resources[command.resource], buffers[command.resource],
                                    verbose=command.verbose))
        elif isinstance(command, WriteFileCommand):
            if command.resource in deferred:
                data_type, shape, contents = deferred[command.resource]
                layouts[id(command)] = (data_type, shape)
                staged.append((command, _stage_deferred(command, data_type, shape, contents)))
            else:
                staged.append((command, stage_resource(command, model, buffers)))
    check_staged_writes(staged)
    created = CreatedFiles()
    with created.undone_on_failure():  # a write that fails, or a signal, takes back the files written before it
        for command, contents in staged:
            write_staged(command, model, contents, layout=layouts.get(id(command)), created=created)
    for command, _ in staged:
        say(f"Resource '{printable(command.resource)}' written to '{printable(str(command.target_path))}'")
    return run


def _run_onnx(dispatch: PlannedOnnxDispatch, buffers, deferred: dict, iterations: int, warmup: int) -> DispatchTiming:
    """The session run `iterations` times on the buffers (an output bound over an input compounds, as in DxDispatch)."""
    samples = SampleReservoir(warmup)
    for _ in range(iterations):
        start = time.perf_counter()
        run_onnx_dispatch(dispatch, buffers, deferred)
        samples.add((time.perf_counter() - start) * 1000.0)
    return DispatchTiming.from_reservoirs(dispatch.name, samples, None)


def _run_graph(dispatch, buffers, backend, iterations: int, warmup: int) -> DispatchTiming:
    """A serialized graph run `iterations` times on the buffers: its nodes in order, each through the engine, then
    its outputs copied into their bound buffers (so an iteration reads the inputs the previous one left).

    The views are made once: the model's buffers and the graph's own stay the same objects while it runs (the
    graph's intermediate buffers are rewritten by each iteration before they are read)."""
    local = {**buffers, **dispatch.graph_buffers()}
    steps = []
    for step in dispatch.steps:
        op = step.checked.verdict.call.operator
        inputs = [_reader(local, step.tensors[name], name) for name in step.tensors if field_of(name) in op.inputs]
        outputs = {name: _writer(local, tensor, name) for name, tensor in step.tensors.items()
                   if field_of(name) in op.outputs}
        steps.append((step.checked.verdict, inputs, outputs, HookTally(step.checked.verdict.call)))
    copies = [(_writer(buffers, bound, bound.resource), _reader(local, made, made.resource.name))
              for made, bound in dispatch.outputs]
    samples = SampleReservoir(warmup)
    for _ in range(iterations):
        start = time.perf_counter()
        for verdict, inputs, outputs, tally in steps:
            outcome = execute(verdict, [read() for read in inputs], backend, tally=tally)
            for result, tensor in zip(outcome.all_outputs, verdict.call.outputs):
                outputs[tensor.name](result)  # the call has only the outputs the node has (binding.py)
        for write, read in copies:
            write(read())
        samples.add((time.perf_counter() - start) * 1000.0)
    for step, (_, _, _, tally) in zip(dispatch.steps, steps):
        for message in tally.warnings(prefix=f"dispatch {shown(dispatch.name)}: {step.step.label}: "):
            warnings.warn(message, DmlcliWarning, stacklevel=2)
    return DispatchTiming.from_reservoirs(dispatch.name, samples, None)


def _stage_deferred(command: WriteFileCommand, data_type, shape: tuple[int, ...], contents: bytes) -> bytes:
    """A deferred resource's bytes for writeFile: Executor.cpp takes its dimensions and type from the output."""
    suffix = image_suffix(command.target_path)
    if suffix is None:
        return contents
    where = _write_where(command)
    check_image_write(shape, data_type, len(contents), where)
    return encode_image(contents, data_type, shape, suffix)


def check_staged_writes(staged: list[tuple[WriteFileCommand, bytes]]) -> None:
    """Refuse, before the first file is written, writes that cannot all succeed: a folder that cannot be
    written, a target that became a directory or (where none may be replaced) a file, a file one writeFile
    writes where another needs a folder ("a" then "a/b.npy"), or more bytes than a file system has free."""
    import os
    import shutil

    needed: dict[int, list] = {}  # st_dev -> [a folder on it, bytes]
    targets = {Path(command.resolved_path or command.target_path): command for command, _ in staged}
    for command, contents in staged:
        path = Path(command.resolved_path or command.target_path)
        where = _write_where(command)
        for folder in path.parents:
            if folder in targets:
                raise InputError(f"{where}: needs {shown(str(folder))} to be a folder, but "
                                 f"{_write_where(targets[folder])} writes a file there; nothing was written")
        kind = _kind(path, where)
        if kind == "folder":
            raise InputError(f"{where}: is a directory; nothing was written")
        if kind is not None and not command.may_replace:
            raise InputError(f"{where}: the file exists now, and a model run without --output-dir replaces no file "
                             "in the current folder; nothing was written")
        folder = path.parent
        while _kind(folder, where) is None and folder != folder.parent:
            folder = folder.parent  # the folders below it are created when the files are written
        if _kind(folder, where) != "folder":
            raise InputError(f"{where}: {shown(str(folder))} is a file, not a folder; nothing was written")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"{where}: the folder {shown(str(folder))} is not writable; nothing was written")
        entry = needed.setdefault(folder.stat().st_dev, [folder, 0])
        entry[1] += len(contents) + 4096  # an .npy header, and a block of slack per file
    for folder, count in needed.values():
        try:
            usage = shutil.disk_usage(folder)
        except OSError:
            continue
        if usage.total and count > usage.free:
            raise InputError(f"the files the model writes need {count} bytes in {shown(str(folder))}, which has "
                             f"{usage.free} free; nothing was written")


def _kind(path: Path, where: str) -> str | None:
    """"folder", "file" (anything else), or None where nothing is there; what the system cannot say is an error."""
    import os
    import stat

    try:
        return "folder" if stat.S_ISDIR(os.stat(path).st_mode) else "file"
    except FileNotFoundError:
        return None if not os.path.islink(path) else "file"  # a dangling link is in the way too
    except NotADirectoryError:
        return None  # a file above it: found when its folder is looked at
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        raise InputError(f"{where}: {shown(str(path))} cannot be looked at ({reason}); nothing was written") from None


class CreatedFiles:
    """The files and folders one run's writes created, taken back if a later write fails or a signal stops it:
    a model's files are written all or not at all (those it replaced keep their new contents)."""

    def __init__(self):
        self.files: list[Path] = []
        self.folders: list[Path] = []

    def undo(self) -> None:
        import os

        for file in reversed(self.files):
            try:
                os.unlink(file)
            except OSError:
                pass
        for folder in reversed(self.folders):
            try:
                os.rmdir(folder)  # only if empty: something else may have been put there meanwhile
            except OSError:
                pass
        self.files.clear()
        self.folders.clear()

    @contextmanager
    def undone_on_failure(self):
        from ..io.atomic import cleanup_if_abandoned

        with cleanup_if_abandoned(self.undo):
            try:
                yield self
            except BaseException:
                self.undo()
                raise


def check_room_to_run(model: Model, planned: list[PlannedDispatch], budget: MemoryBudget | None = None) -> None:
    """Refuse, before anything runs, a model whose run needs more memory than is available.

    Counted together: every buffer, the OWNED_BY_DML snapshots, a copy of the buffer for each
    writeFile (staged until the end) and, one at a time, the largest dispatch's temporaries, the
    longest print's text and the largest file's byte-order copy while it is written; and every ONNX output
    that shape inference sizes for a deferred resource (kept until the end where a writeFile takes it).
    """
    budget = budget or MemoryBudget()
    parts = room_for_contents(model)
    operators = [p for p in planned if isinstance(p, PlannedDispatch)]
    onnx = [p for p in planned if isinstance(p, PlannedOnnxDispatch)]
    owned = sum(buffer_bytes_for(_element_count(t), t.desc.data_type.bits) for p in operators
                for t in p.tensors.values() if t.at_initialisation)
    dispatches = [DISPATCH_BYTES_PER_ELEMENT * sum(_element_count(t) for t in p.tensors.values()) for p in operators]
    # An ONNX dispatch's inputs and outputs as arrays, twice (the feeds and ONNX Runtime's results); the
    # session's own intermediates are ONNX Runtime's to allocate, within its capped arena.
    dispatches += [2 * p.bound_bytes for p in onnx]
    # A serialized graph: every operator output's buffer at once, and its largest node's temporaries (its
    # constants were claimed when the model was read, and stay with it).
    dispatches += [sum(p.buffer_sizes.values()) + DISPATCH_BYTES_PER_ELEMENT * p.largest_step_elements
                   for p in planned if not isinstance(p, (PlannedDispatch, PlannedOnnxDispatch))]
    deferred = [sizes for p in onnx for sizes in p.deferred_outputs().values()]
    deferred_prints = {resource: count for p in onnx for resource, (count, _) in p.deferred_outputs().items()}
    longest_deferred_print = max((deferred_prints.get(c.resource, 0) for c in model.commands
                                  if isinstance(c, PrintCommand)), default=0)
    budget.check_total({
        "buffers": parts["buffers"],
        "OWNED_BY_DML copies": owned,
        "files to write": parts["files to write"],
        "the largest dispatch": max(dispatches, default=0),
        "ONNX outputs": sum(size for _, size in deferred),
        "the longest print": max(parts["the longest print"], PRINT_BYTES_PER_ELEMENT * longest_deferred_print),
    }, where=f"model {shown(str(model.path))}")


def _element_count(tensor: BoundTensor) -> int:
    count = 1
    for size in tensor.desc.sizes:
        count *= size
    return count


def _gpu_note(backend) -> str | None:
    if getattr(backend, "name", "") != "gpu" or hasattr(backend, "run_resident"):
        return None
    return "GPU time not measured (this gpu backend cannot launch on device arrays)"


class _KernelTimedGpu:
    """The GPU backend with DxDispatch's GPU time: CUDA events around the kernel alone, as D3D12 timestamps
    bracket a dispatch. Needs the backend's run_resident (a launch on device arrays)."""

    name = "gpu"

    def __init__(self, backend, warmup: int):
        self.backend = backend
        self.samples = SampleReservoir(warmup)

    def execute_shaped(self, operator, inputs, outputs, parameters):
        """A shaped operator: its kernel timed on arrays already on the device, as a dispatch's GPU time."""
        import cupy

        device_inputs = [None if x is None else cupy.asarray(np.ascontiguousarray(to_kernel_array(x))) for x in inputs]
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        results = self.backend.execute_shaped_device(operator, device_inputs, outputs, parameters)
        end.record()
        end.synchronize()
        self.samples.add(float(cupy.cuda.get_elapsed_time(start, end)))
        # A 4-bit output is int8/uint8 on the device (execute_shaped_device): int4/uint4 again on the host.
        return tuple(from_kernel_array(cupy.asnumpy(result), info.data_type) for result, info in zip(results, outputs))

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
        self.samples.add(float(cupy.cuda.get_elapsed_time(start, end)))
        return cupy.asnumpy(device_out).reshape(tuple(out_shape))


def _timed(backend, warmup: int):
    if getattr(backend, "name", "") == "gpu" and hasattr(backend, "run_resident"):
        return _KernelTimedGpu(backend, warmup)
    return backend


# ---------------------------------------------------------------- one dispatch


def _element_view(buffers: dict[str, bytearray], tensor: BoundTensor, where: str) -> np.ndarray:
    """The tensor's elements in its buffer: a strided view (writable through), or for a 4-bit tensor, whose
    elements are half bytes, a view of an unpacked copy (read it; write with _store)."""
    flat = from_buffer_bytes(buffers[tensor.resource], tensor.desc.data_type, offset=tensor.offset_in_bytes)
    return strided_view(flat, tensor.desc.sizes, tensor.strides, where=where)


def _reader(buffers, tensor: BoundTensor, where: str):
    """What gives a tensor's current elements each time it is called: its view, made once (4-bit: read anew)."""
    if tensor.desc.data_type.is_four_bit:
        return lambda: _element_view(buffers, tensor, where)
    view = _element_view(buffers, tensor, where)
    return lambda: view


def _writer(buffers, tensor: BoundTensor, where: str):
    """What writes a result into a tensor each time it is called: through its view, made once (4-bit: _store)."""
    if tensor.desc.data_type.is_four_bit:
        return lambda result: _store(buffers, tensor, result, where)
    view = _element_view(buffers, tensor, where)

    def write(result) -> None:
        view[...] = result

    return write


def _store(buffers: dict[str, bytearray], tensor: BoundTensor, result: np.ndarray, where: str) -> None:
    """An output written into its buffer: through the strided view, or half byte by half byte (4-bit)."""
    if tensor.desc.data_type.is_four_bit:
        store_four_bit(buffers[tensor.resource], tensor.offset_in_bytes, tensor.desc.sizes, tensor.strides, result)
        return
    target = _element_view(buffers, tensor, where)
    if np.may_share_memory(result, target):  # a backend handing back a view of an aliased input
        result = np.array(result)
    target[...] = result


def _initialisation_inputs(dispatch: PlannedDispatch, buffers) -> dict[str, np.ndarray]:
    """OWNED_BY_DML inputs, read once from the initial buffers (DirectML takes them at initialisation)."""
    return {name: np.ascontiguousarray(_element_view(buffers, tensor, name))
            for name, tensor in dispatch.tensors.items() if tensor.at_initialisation}


def _run_dispatch(dispatch: PlannedDispatch, buffers, snapshots, backend, iterations: int, warmup: int) -> DispatchTiming:
    verdict = dispatch.checked.verdict
    op = verdict.call.operator
    cpu_samples = SampleReservoir(warmup)
    # GPU kernel time is measured around element-wise launches; a shaped operator runs through its array
    # kernel on the backend as it is (its CPU time is still measured).
    timed = _timed(backend, warmup) if op.is_elementwise else backend
    tally = HookTally(verdict.call)  # over every iteration: in-place models change their inputs
    for _ in range(iterations):
        # Strided views straight into the buffers (no copy): backends return a new array, so the inputs
        # are read in full before the output is written back, which is what makes in-place dispatches exact.
        inputs = [snapshots[name] if name in snapshots else _element_view(buffers, dispatch.tensors[name], name)
                  for name in dispatch.tensors if field_of(name) in op.inputs]
        start = time.perf_counter()
        outcome = execute(verdict, inputs, timed, tally=tally)
        for result, tensor in zip(outcome.all_outputs, verdict.call.outputs):
            # The call has only the outputs the desc has: those it leaves out were not computed (binding.py).
            _store(buffers, dispatch.tensors[tensor.name], result, tensor.name)
        cpu_samples.add((time.perf_counter() - start) * 1000.0)
    for message in tally.warnings(prefix=f"dispatch {shown(dispatch.name)}: "):
        warnings.warn(message, DmlcliWarning, stacklevel=2)
    return DispatchTiming.from_reservoirs(dispatch.name, cpu_samples, getattr(timed, "samples", None))


# ---------------------------------------------------------------- writeFile


def stage_resource(command: WriteFileCommand, model: Model, buffers) -> bytes:
    """The bytes a writeFile will write, taken now (later commands may change the buffer).

    As DxDispatch's Executor.cpp: without "dimensions" the .npy is 1-D and covers the whole buffer,
    sizeInBytes / element size elements (so the 4-byte padding shows, unlike in print); with
    "dimensions" it has that shape. Any other extension gets the buffer's raw bytes.
    """
    resource = model.resources[command.resource]
    contents = buffers[command.resource]
    suffix = image_suffix(command.target_path)
    if suffix is not None:  # checked against the buffer when the model was read
        return encode_image(bytes(contents), resource.data_type, command.dimensions, suffix)
    if Path(command.target_path).suffix.lower() != ".npy":
        return bytes(contents)
    bits = resource.data_type.bits
    count = _npy_element_count(command, resource.size_in_bytes * 8 // bits)
    needed = buffer_bytes_for(count, bits)
    if needed > len(contents):
        shape = command.dimensions or (count,)
        raise InputError(f"{_write_where(command)}: dimensions {list(shape)} need {needed} bytes, but "
                         f"buffer {shown(command.resource)} holds {len(contents)}")
    return bytes(memoryview(contents)[:needed])


def _npy_element_count(command: WriteFileCommand, whole_buffer: int) -> int:
    """The elements the .npy holds: its dimensions', or the whole buffer's (`whole_buffer` elements)."""
    count = 1
    for size in command.dimensions or (whole_buffer,):
        count *= size
    return count


def _write_where(command: WriteFileCommand) -> str:
    return f"command {command.index} (writeFile {shown(str(command.target_path))})"


def write_staged(command: WriteFileCommand, model: Model, contents: bytes, layout: tuple | None = None,
                 created: CreatedFiles | None = None) -> None:
    """Write staged bytes as .npy (elements of the resource's initialValuesDataType) or raw bytes, atomically;
    an image's staged bytes are its encoded file. `layout`: a deferred resource's (DataType, shape).

    Missing folders are created, as DxDispatch creates them: the target was checked, when the model
    was read, to lie inside the output folder (unless paths outside were allowed), so they are too.
    `created` records what did not exist before, for taking it back.
    """
    import os

    from ..io.atomic import write_atomically

    resource = model.resources[command.resource]
    path = Path(command.resolved_path or command.target_path)
    where = _write_where(command)
    missing = [folder for folder in path.parents if not os.path.lexists(folder)]
    _make_folder(path, where)
    new_file = not os.path.lexists(path)
    if created is not None:
        created.folders += reversed(missing)  # outermost first: taken back innermost first
    _write_file(command, resource, path, contents, layout, write_atomically)
    if created is not None and new_file:
        created.files.append(path)


def _write_file(command: WriteFileCommand, resource, path: Path, contents, layout, write_atomically) -> None:
    from ..io.npy import save_npy

    if path.suffix.lower() != ".npy":
        write_atomically(path, lambda handle: handle.write(contents))
        return
    if layout is not None:
        data_type, shape = layout
    else:
        data_type = resource.data_type
        shape = command.dimensions or (resource.size_in_bytes * 8 // data_type.bits,)
    array = from_buffer_bytes(contents, data_type, count=math.prod(shape)).reshape(shape)
    write_atomically(path, lambda handle: save_npy(handle, array))


def write_resource(command: WriteFileCommand, model: Model, buffers) -> None:
    """Stage and write one writeFile command at once (the API before staging existed)."""
    write_staged(command, model, stage_resource(command, model, buffers))


def _make_folder(path: Path, where: str) -> None:
    # DxDispatch creates missing folders for its output files.
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{where}: cannot create the folder {shown(str(path.parent))} ({error.strerror})") from None
