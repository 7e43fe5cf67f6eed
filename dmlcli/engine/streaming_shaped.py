"""Constant-memory runs of the shaped operators that can stream: REDUCE and JOIN, .npy files to a .npy file.

A shaped operator runs in memory unless its call can be cut into independent or combinable pieces:
- JOIN along axis 0: the output is the inputs' bytes one after the other, copied chunk by chunk.
- REDUCE over trailing axes (every reduced axis after every kept one): each run of whole kept rows reduces on
  its own, so the input is read a chunk of rows at a time and each chunk's result is appended.
- REDUCE over leading axes (every reduced axis before every kept one): each chunk of leading rows reduces to a
  partial result, and the partials are combined (added, multiplied, max/min, log-add-exp, or for ARGMAX/ARGMIN
  the best value and its first index) before the last step (AVERAGE divides, L2 takes the root, LOG_SUM the
  log). FLOAT16 partials are kept in FLOAT32 and rounded once, as the in-memory kernel rounds once.
Every piece runs through the backend's execute_shaped with the operator's own kernel, so the GPU computes on
the GPU. Inputs must be .npy files stored in C order (a Fortran-order .npy or a .npz array runs in memory).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ..calls.validation import Call, TensorInfo

# The partial function each REDUCE function streams through over leading axes, and how partials combine.
_PARTIAL = {"SUM": "SUM", "AVERAGE": "SUM", "L1": "L1", "L2": "SUM_SQUARE", "SUM_SQUARE": "SUM_SQUARE",
            "LOG_SUM": "SUM", "LOG_SUM_EXP": "LOG_SUM_EXP", "MULTIPLY": "MULTIPLY", "MAX": "MAX", "MIN": "MIN",
            "ARGMAX": "ARGMAX", "ARGMIN": "ARGMIN"}


def streamable_layout(call: Call, inputs) -> str | None:
    """How this call streams: "join", "trailing" or "leading"; None where it runs in memory."""
    op = call.operator
    # Plain .npy files in C order: pieces are read by offset (a .npz member, read in order only, runs in memory).
    if not all(source.stored_in_c_order and source.member is None for source in inputs):
        return None
    if op.name == "JOIN" and op.prefix == "" and call.parameters.get("Axis") == 0:
        return "join"
    if op.name == "REDUCE" and op.prefix == "":
        rank = len(call.tensors["InputTensor"].shape)
        axes = call.parameters["Axes"]
        axes = tuple(range(rank)) if axes is None else tuple(sorted(axes))
        if axes == tuple(range(len(axes))):  # every axis too: read in chunks, combined
            return "leading"
        if axes == tuple(range(rank - len(axes), rank)):
            return "trailing"
    return None


def stream_shaped(call: Call, layout: str, inputs, output: Path, engine, *, chunk_bytes: int, progress=None) -> None:
    """Write the call's single output into `output` (.npy, atomically), reading the inputs chunk by chunk."""
    from ..io.atomic import write_atomically
    from ..io.npy import npy_header
    from .streaming import _no_progress

    out = call.output
    out_dtype = np.dtype(out.data_type.numpy_dtype)
    total = sum(math.prod(x.shape) * x.dtype.itemsize for x in inputs) + math.prod(out.shape) * out_dtype.itemsize

    def write(handle) -> None:
        handle.write(npy_header(out.shape, out_dtype))
        with (progress or _no_progress)(total) as advance:
            if layout == "join":
                _join(inputs, handle, out_dtype, chunk_bytes, advance)
            elif layout == "trailing":
                _reduce_trailing(call, inputs[0], handle, engine, chunk_bytes, advance)
            else:
                _reduce_leading(call, inputs[0], handle, engine, chunk_bytes, advance)

    write_atomically(output, write)


def _rows(source, chunk_bytes: int, row_elements: int):
    """(first, count) runs of whole rows of `row_elements` elements, about `chunk_bytes` each."""
    total_rows = math.prod(source.shape) // max(row_elements, 1)
    step = max(1, chunk_bytes // max(1, row_elements * source.dtype.itemsize))
    for first in range(0, total_rows, step):
        yield first, min(step, total_rows - first)


def _read_rows(source, first: int, count: int, row_elements: int) -> np.ndarray:
    """Rows [first, first + count) of the file as a native-order array of shape (count, row_elements), read
    with pread (a file truncated by another program during the run is an error in words, never SIGBUS)."""
    import os

    from ..errors import InputError, quoted
    from ..io.npy import to_native

    itemsize = source.dtype.itemsize
    buffer = bytearray(count * row_elements * itemsize)
    view = memoryview(buffer)
    position = source.offset + first * row_elements * itemsize
    descriptor = os.open(source.path, os.O_RDONLY)
    try:
        done = 0
        while done < len(buffer):
            got = os.preadv(descriptor, [view[done:]], position + done)
            if got <= 0:
                raise InputError(f"{source.label} {quoted(str(source.path))}: the file ended early (it changed "
                                 "during the run)")
            done += got
    finally:
        os.close(descriptor)
    return to_native(np.frombuffer(buffer, dtype=source.dtype).reshape(count, row_elements))


def _join(inputs, handle, out_dtype: np.dtype, chunk_bytes: int, advance) -> None:
    for source in inputs:
        row = max(1, math.prod(source.shape[1:]))
        for first, count in _rows(source, chunk_bytes, row):
            data = _read_rows(source, first, count, row).astype(out_dtype, copy=False)
            handle.write(np.ascontiguousarray(data).view(np.uint8).reshape(-1))
            advance(2 * data.nbytes)


def _piece_call(call: Call, shape: tuple[int, ...], dtype: np.dtype, function: str, axes, out_dtype) -> Call:
    """The REDUCE call for one piece: `shape` in `dtype`, reducing `axes` with `function`."""
    from ..data_types import from_numpy
    from ..records import replace

    source = TensorInfo("InputTensor", from_numpy(np.dtype(dtype)), tuple(shape))
    reduced = tuple(1 if axis in axes else size for axis, size in enumerate(shape))
    target = TensorInfo("OutputTensor", from_numpy(np.dtype(out_dtype)), reduced)
    parameters = dict(call.parameters, Function=function, Axes=tuple(axes))
    return replace(call, tensors={"InputTensor": source, "OutputTensor": target}, parameters=parameters)


def _run_piece(engine, piece_call: Call, data: np.ndarray) -> np.ndarray:
    return engine.execute_shaped(piece_call.operator, [data], piece_call.outputs, piece_call.parameters)[0]


def _reduce_trailing(call: Call, source, handle, engine, chunk_bytes: int, advance) -> None:
    shape = call.tensors["InputTensor"].shape
    axes = call.parameters["Axes"]
    kept = len(shape) - (len(shape) if axes is None else len(axes))
    row = max(1, math.prod(shape[kept:]))
    out_dtype = np.dtype(call.output.data_type.numpy_dtype)
    for first, count in _rows(source, chunk_bytes, row):
        data = _read_rows(source, first, count, row)
        piece = _piece_call(call, (count, row), data.dtype, call.parameters["Function"], (1,), out_dtype)
        result = _run_piece(engine, piece, data)
        handle.write(np.ascontiguousarray(result).view(np.uint8).reshape(-1))
        advance(data.nbytes + result.nbytes)


def _reduce_leading(call: Call, source, handle, engine, chunk_bytes: int, advance) -> None:
    shape = call.tensors["InputTensor"].shape
    axes = call.parameters["Axes"]
    reduced = len(shape) if axes is None else len(axes)
    row = max(1, math.prod(shape[reduced:]))
    count_reduced = math.prod(shape[:reduced])
    function = call.parameters["Function"]
    out_dtype = np.dtype(call.output.data_type.numpy_dtype)
    # FLOAT16 pieces are widened so that their partials keep FLOAT32 (the in-memory kernel rounds once too).
    work_dtype = np.dtype(np.float32) if source.dtype.kind == "f" and source.dtype.itemsize == 2 else \
        source.dtype.newbyteorder("=")
    partial = _PARTIAL[function]
    best_index = best_value = accumulated = None
    for first, count in _rows(source, chunk_bytes, row):
        data = _read_rows(source, first, count, row).astype(work_dtype, copy=False)
        if partial in ("ARGMAX", "ARGMIN"):
            index = _run_piece(engine, _piece_call(call, (count, row), work_dtype, partial, (0,), np.int64), data)
            value = _run_piece(engine, _piece_call(call, (count, row), work_dtype,
                                                   "MAX" if partial == "ARGMAX" else "MIN", (0,), work_dtype), data)
            index = index.reshape(-1) + first
            value = value.reshape(-1)
            if best_index is None:
                best_index, best_value = index, value
            else:
                better = _better(value, best_value, partial)
                best_index = np.where(better, index, best_index)
                best_value = np.where(better, value, best_value)
        else:
            piece = _run_piece(engine, _piece_call(call, (count, row), work_dtype, partial, (0,), work_dtype), data)
            piece = piece.reshape(-1)
            accumulated = piece if accumulated is None else _combine(accumulated, piece, partial)
        advance(data.nbytes)
    if partial in ("ARGMAX", "ARGMIN"):
        result = best_index.astype(out_dtype)
    else:
        result = _finish(accumulated, function, count_reduced).astype(out_dtype)
    handle.write(np.ascontiguousarray(result).view(np.uint8).reshape(-1))
    advance(result.nbytes)


def _better(value: np.ndarray, best: np.ndarray, partial: str) -> np.ndarray:
    """Where a later piece's value beats the best so far: strictly, so that the first index wins ties; a NaN
    best (every element so far NaN) is beaten by any number, as the kernel skips NaN."""
    with np.errstate(invalid="ignore"):
        strictly = value > best if partial == "ARGMAX" else value < best
    if value.dtype.kind == "f":
        strictly |= np.isnan(best) & ~np.isnan(value)
    return strictly


def _combine(accumulated: np.ndarray, piece: np.ndarray, partial: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        if partial in ("SUM", "L1", "SUM_SQUARE"):
            return accumulated + piece
        if partial == "MULTIPLY":
            return accumulated * piece
        if partial == "MAX":
            return np.fmax(accumulated, piece)
        if partial == "MIN":
            return np.fmin(accumulated, piece)
        if partial == "LOG_SUM_EXP":
            return np.logaddexp(accumulated, piece)
    raise ValueError(partial)  # pragma: no cover - _PARTIAL names no other


def _finish(accumulated: np.ndarray, function: str, count: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        if function == "AVERAGE":
            return accumulated / accumulated.dtype.type(count)
        if function == "L2":
            return np.sqrt(accumulated)
        if function == "LOG_SUM":
            return np.log(accumulated)
    return accumulated


def memory_bound(inputs: Sequence, call: Call, chunk_bytes: int) -> int:
    """An upper bound of a streamed shaped run's memory: a chunk read, its float32 copy and result, the
    accumulators (the output's size), and the code."""
    from .streaming import STREAMING_CODE_BYTES

    out = call.output
    out_bytes = math.prod(out.shape) * 8
    shape = inputs[0].shape
    # A trailing reduction reads whole rows of the reduced axes: at least one row a chunk.
    row = math.prod(shape[len(shape) - len(call.parameters.get("Axes") or ()):]) * 8 if call.operator.name == "REDUCE" \
        else 0
    return STREAMING_CODE_BYTES + 4 * max(chunk_bytes, row) + 3 * out_bytes
