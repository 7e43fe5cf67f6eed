"""Data movement on the GPU by the copy engine: JOIN, TILE and PADDING's interior as cudaMemcpy2DAsync calls, each
a block of equal rows copied at the device's copy bandwidth (issue 23: data movement at >= 0.7 of the copy).
CuPy's concatenate, tile and slice assignment run an indexing kernel at about half of it.

Each function returns None where its layout does not fit a few 2-D copies (a pitch past the device's limit, or
more pieces than MAX_COPIES); the caller then runs the shared xp kernel. Bytes are copied as they are, so every
type and every bit pattern (NaN payloads included) is kept.
"""

from __future__ import annotations

import math

import numpy as np

# cudaMemcpy2D's pitches are at most this (cudaDevAttrMaxPitch on current GPUs).
MAX_PITCH = 2**31 - 1
# More copies than this cost more in launches than an indexing kernel costs in bandwidth.
MAX_COPIES = 64


def _copy_rows(cp, destination: int, destination_pitch: int, source: int, source_pitch: int, width: int,
               height: int) -> None:
    """`height` rows of `width` bytes, one pitch apart on each side (one plain copy where there is one row)."""
    runtime = cp.cuda.runtime
    stream = cp.cuda.get_current_stream().ptr
    if height == 1:
        runtime.memcpyAsync(destination, source, width, runtime.memcpyDeviceToDevice, stream)
    else:
        runtime.memcpy2DAsync(destination, destination_pitch, source, source_pitch, width, height,
                              runtime.memcpyDeviceToDevice, stream)


def join(cp, inputs, out_shape, axis: int):
    """The inputs side by side along `axis`: one 2-D copy per input."""
    itemsize = np.dtype(inputs[0].dtype).itemsize
    outer = math.prod(out_shape[:axis])
    out_row = math.prod(out_shape[axis:]) * itemsize
    if (outer > 1 and out_row > MAX_PITCH) or len(inputs) > MAX_COPIES:
        return None
    result = cp.empty(tuple(out_shape), dtype=inputs[0].dtype)
    offset = 0
    for x in inputs:
        x = cp.ascontiguousarray(x)
        row = math.prod(x.shape[axis:]) * itemsize
        _copy_rows(cp, result.data.ptr + offset, out_row, x.data.ptr, row, row, outer)
        offset += row
    return result


def tile(cp, x, repeats):
    """TILE: for each axis with a repeat above 1 (last first), `repeat` 2-D copies of the array so far."""
    current = cp.ascontiguousarray(x)
    if sum(r for r in repeats if r > 1) > MAX_COPIES:
        return None
    itemsize = np.dtype(x.dtype).itemsize
    for axis in reversed(range(x.ndim)):
        repeat = repeats[axis]
        if repeat == 1:
            continue
        shape = list(current.shape)
        outer = math.prod(shape[:axis])
        row = math.prod(shape[axis:]) * itemsize
        if outer > 1 and row * repeat > MAX_PITCH:
            return None
        shape[axis] *= repeat
        tiled = cp.empty(tuple(shape), dtype=x.dtype)
        for copy in range(repeat):
            _copy_rows(cp, tiled.data.ptr + copy * row, row * repeat, current.data.ptr, row, row, outer)
        current = tiled
    return current if current is not x else current.copy()


def place(cp, out, start, x) -> bool:
    """Copy `x` into `out` at offsets `start` (PADDING's interior): as 2-D copies of `x`'s last-axis rows, one per
    index of the axes before the last two. False (nothing copied) where that takes more than MAX_COPIES copies."""
    x = cp.ascontiguousarray(x)
    itemsize = np.dtype(x.dtype).itemsize
    if x.ndim == 1:
        cp.cuda.runtime.memcpyAsync(out.data.ptr + start[0] * itemsize, x.data.ptr, x.nbytes,
                                    cp.cuda.runtime.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr)
        return True
    leading = x.shape[:-2]
    if math.prod(leading) > MAX_COPIES or out.strides[-2] > MAX_PITCH:
        return False
    rows, width = x.shape[-2], x.shape[-1] * itemsize
    for index in np.ndindex(*leading):
        offset = sum((i + s) * stride for i, s, stride in zip(index, start, out.strides))
        offset += start[-2] * out.strides[-2] + start[-1] * itemsize
        source = x.data.ptr + sum(i * stride for i, stride in zip(index, x.strides))
        _copy_rows(cp, out.data.ptr + offset, out.strides[-2], source, width, width, rows)
    return True
