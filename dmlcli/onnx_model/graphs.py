"""A planned GPU run captured once as a CUDA graph and replayed on later calls with the same inputs' types and
Sizes: the same kernels on the same device addresses, launched by one call instead of one Python call per node.

A model's nodes are small (SqueezeNet's 83 and the encoder's 187 run in 1 to 3 ms of GPU time), so a run through
Python costs 10 to 20 ms of the host's time, not the GPU's; ONNX Runtime's CUDA provider offers the same remedy.

How a capture goes (capture_run), on the call after the plan's first:
1. A private CuPy memory pool and a stream of their own: everything the run allocates comes from that pool, which
   nothing else draws on, so the addresses the graph writes stay the graph's for as long as it lives.
2. The model's inputs are copied into input buffers of that pool, and the run goes once as it always does
   (eagerly), recording each host array it copies to the device (an adapter's small constants): CuPy refuses
   every copy between host and device while a stream captures.
3. The same run again, captured: each copy of a host array is served by the recorded device array where the host
   array holds the same bytes; anything that cannot be captured (a device value read on the host: RoiAlign's
   boxes, a generator's state, a node on ONNX Runtime's CPU provider; a copy that differs from the record) ends
   the capture, and the plan keeps running eagerly, saying why (OnnxSession.graph_state). So nothing a node
   decides on the host from a tensor's values is ever baked into a graph: such a read ends the capture. Matrix
   products reach cuBLAS through operators/numerics/products.py, since CuPy's matmul refuses a capturing stream.
4. The graph is launched once on the same inputs: its outputs must hold the bits of the eager run's, else the
   graph is dropped (a kernel whose result depends on the order of its atomic updates, say).
A replay copies the new inputs into the input buffers, launches the graph and copies the outputs back.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np


class Uncapturable(Exception):
    """The run does something a CUDA graph cannot replay."""


def c_ordered(array: np.ndarray) -> np.ndarray:
    """The array in C order, keeping its shape: numpy.ascontiguousarray gives a 0-D array (an ONNX scalar: Gather's
    index) one dimension, which made a Gather on the GPU keep an axis ONNX drops."""
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


@dataclass
class Uploads:
    """The host arrays one run copies to the device, in order: recorded on the eager run before a capture, then
    served from that record while the same run is captured (`replaying`)."""

    cupy: object
    recorded: list[tuple[np.ndarray, object]] = field(default_factory=list)
    replaying: int | None = None

    def upload(self, array: np.ndarray):
        if self.replaying is None:
            device = self.cupy.asarray(c_ordered(array))
            self.recorded.append((array.copy(), device))
            return device
        position = self.replaying
        if position >= len(self.recorded):
            raise Uncapturable(f"the captured run copied {position + 1} host arrays to the device, the eager run "
                               f"{len(self.recorded)}")
        host, device = self.recorded[position]
        if not _same_bits(host, array):
            raise Uncapturable(f"the captured run's host array {position + 1} ({array.dtype} {list(array.shape)}) "
                               "differs from the eager run's")
        self.replaying = position + 1
        return device


def _same_bits(first: np.ndarray, second: np.ndarray) -> bool:
    """The same type, Sizes and bytes (NaN payloads included)."""
    if first.dtype != second.dtype or first.shape != second.shape:
        return False
    return c_ordered(first).tobytes() == c_ordered(second).tobytes()


@dataclass
class CapturedRun:
    """A captured run and what it holds on to: its graph, stream, memory pool, input buffers, outputs (by the
    model's output names: device arrays, or host arrays where an output is a constant) and uploaded constants."""

    graph: object
    stream: object
    pool: object
    inputs: dict[str, object]
    outputs: dict[str, object]
    uploads: Uploads

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        for name, buffer in self.inputs.items():
            buffer.set(c_ordered(feeds[name]), stream=self.stream)
        self.graph.launch(stream=self.stream)
        return {name: _host(value, self.stream) for name, value in self.outputs.items()}


def _host(value, stream) -> np.ndarray:
    """An output on the host: a device array copied back, a constant (an output no node computes) as the eager
    run gives it."""
    if isinstance(value, np.ndarray):
        return value
    return value.get(stream=stream)


def capture_run(cupy, set_uploads: Callable[[Uploads | None], None],
                run: Callable[[dict[str, object]], dict[str, object]],
                feeds: Mapping[str, np.ndarray]) -> tuple[CapturedRun | None, dict[str, np.ndarray], str]:
    """This call's outputs (from the eager run), with the captured run that gives the same bits, or None and the
    reason it could not be captured. `run` runs the plan on device inputs (by name) and gives the model's outputs;
    `set_uploads` points the executor's copies of host arrays at an Uploads record (None: back to plain copies)."""
    pool = cupy.cuda.MemoryPool()
    stream = cupy.cuda.Stream(non_blocking=True)
    uploads = Uploads(cupy)
    with cupy.cuda.using_allocator(pool.malloc), stream:
        inputs = {name: cupy.asarray(c_ordered(array)) for name, array in feeds.items()}
        set_uploads(uploads)
        try:
            expected = {name: _host(value, stream) for name, value in run(dict(inputs)).items()}
            uploads.replaying = 0
            outputs, why = _captured_outputs(cupy, stream, run, inputs)
        finally:
            set_uploads(None)
        if outputs is None:
            return None, expected, why
        graph, outputs = outputs
        if uploads.replaying != len(uploads.recorded):
            return None, expected, (f"the captured run copied {uploads.replaying} of the eager run's "
                                    f"{len(uploads.recorded)} host arrays")
        captured = CapturedRun(graph, stream, pool, inputs, outputs, uploads)
        replayed = captured.run(feeds)
    differing = [name for name in expected if not _same_bits(expected[name], replayed[name])]
    if differing:
        return None, expected, f"the graph's replay gave other bits than the eager run for output {differing[0]!r}"
    return captured, expected, ""


def _captured_outputs(cupy, stream, run, inputs) -> tuple[tuple[object, dict] | None, str]:
    """(the graph, the run's outputs as captured), or None and why the capture failed. The cyclic garbage
    collector is held off meanwhile: an object it destroys could make a CUDA call the capture forbids."""
    collecting = gc.isenabled()
    gc.disable()
    capturing = True
    try:
        stream.begin_capture()
        try:
            outputs = run(dict(inputs))
        except Exception as error:  # Uncapturable, CUDA's refusal, or a library's own error for it: the same
            return None, _reason(error)  # code ran eagerly just before, so the capture is what failed
        graph = stream.end_capture()
        capturing = False
        return (graph, outputs), ""
    finally:
        if capturing:
            _end_abandoned(cupy, stream)
        if collecting:
            gc.enable()


def _end_abandoned(cupy, stream) -> None:
    """Ends a capture that failed (CUDA then says the capture was invalidated, which is what we know)."""
    try:
        stream.end_capture()
    except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError):
        pass


def _reason(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return f"{type(error).__name__}: {text}"
