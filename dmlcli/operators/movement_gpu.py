"""Data movement on the GPU: JOIN and TILE by the copy engine (cudaMemcpy2DAsync calls, each a block of equal rows
copied at the device's copy bandwidth), PADDING by one kernel of its own for every mode (pad), with the copy engine's
interior (place) where that kernel does not take the input (issue 23: data movement at >= 0.7 of the copy). CuPy's
concatenate, tile and slice assignment run an indexing kernel at about half of it.

join, tile and place return None (or False) where their layout does not fit a few 2-D copies (a pitch past the
device's limit, or more pieces than MAX_COPIES); the caller then runs the shared xp kernel. Bytes are copied as they
are, so every type and every bit pattern (NaN payloads included) is kept.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .cuda_prelude import C_WORD_TYPES, FAST_DIVISION, fast_division, launch

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


# PADDING in one pass: one thread per output element finds the input element it copies (CONSTANT: none outside
# the interior) by movement.source_index's rule, dimension by dimension, so that the output is written once and
# the input read about once, coalesced along the last axis; every mode, every padding length (folded
# periodically as on the CPU). The copy engine's 2-D copy into a padded row pitch measured about half of the copy
# bandwidth (its rows start off 16-byte boundaries), and the slabs cost a launch each.
PAD_MAX_RANK = 8
_PAD_FOLD = {
    "CONSTANT": "",
    "EDGE": "        c = c < 0 ? 0 : (c >= size ? size - 1 : c);\n",
    # A one-element dimension mirrors onto its only element (source_index).
    "REFLECTION": ("        if (size == 1) { c = 0; } else {\n"
                   "            const idx_t period = 2 * (size - 1);\n"
                   "            idx_t folded = c % period; if (folded < 0) folded += period;\n"
                   "            c = folded < size ? folded : period - folded;\n        }\n"),
    "SYMMETRIC": ("        if (size == 1) { c = 0; } else {\n"
                  "            const idx_t period = 2 * size;\n"
                  "            idx_t folded = c % period; if (folded < 0) folded += period;\n"
                  "            c = folded < size ? folded : period - 1 - folded;\n        }\n"),
}


@functools.lru_cache(maxsize=128)  # the text is built once per rank, mode, width and index size
def _pad_source(rank: int, mode: str, word: str, wide: bool) -> str:
    """The kernel for one rank, mode and element width: sizes, starts and input strides are arguments."""
    index = "long long" if wide else "int"
    arguments = ", ".join([f"const long long {name}{d}" for name in ("out", "in", "start", "step") for d in range(rank)]
                          + [f"const unsigned int {name}{d}" for name in ("magic", "shift") for d in range(rank)])
    lines = [FAST_DIVISION, f"typedef {word} T;", f"typedef {index} idx_t;",
             f'extern "C" __global__ void dml_kernel(const T* x, T* y, const T value, {arguments}, const long long n) {{',
             "    const idx_t stride = (idx_t)gridDim.x * blockDim.x;",
             "    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {",
             "        idx_t t = i, source = 0; bool inside = true;"]
    for d in reversed(range(rank)):
        lines.append("        {")
        lines.append(f"        const idx_t size = (idx_t)in{d};")
        if wide:
            lines.append(f"        idx_t c = t % (idx_t)out{d} - (idx_t)start{d}; t /= (idx_t)out{d};")
        else:  # a division by a magic number (cuda_prelude.fast_division): the kernel's costliest step otherwise
            lines.append(f"        const idx_t q = (idx_t)dml_fast_divide((unsigned int)t, (unsigned int)out{d},"
                         f" magic{d}, shift{d});")
            lines.append(f"        idx_t c = t - q * (idx_t)out{d} - (idx_t)start{d}; t = q;")
        if mode == "CONSTANT":
            lines.append("        inside = inside && c >= 0 && c < size;")
        else:
            # Only a coordinate in the padding folds (most are in the interior: no division for them).
            lines.append("        if (c < 0 || c >= size) {\n" + _PAD_FOLD[mode].rstrip("\n") + "\n        }")
        lines.append(f"        source += c * (idx_t)step{d};")
        lines.append("        }")
    lines.append("        y[i] = inside ? x[source] : value;" if mode == "CONSTANT" else "        y[i] = x[source];")
    lines.append("    }\n}\n")
    return "\n".join(lines)


def pad(cp, x, out_shape, start, mode: str, constant):
    """PADDING of `x` into a new array of `out_shape`, `start` elements before the input in each dimension, by
    `mode` with `constant` (CONSTANT); None where the kernel does not take it (rank past PAD_MAX_RANK, or an empty
    input: the xp kernel then runs)."""
    if x.ndim == 0 or x.ndim > PAD_MAX_RANK or x.size == 0:
        return None
    x = cp.ascontiguousarray(x)
    itemsize = np.dtype(x.dtype).itemsize
    word = f"uint{itemsize * 8}"
    out = cp.empty(tuple(out_shape), dtype=x.dtype)
    if out.size == 0:
        return out
    value = np.asarray(constant if mode == "CONSTANT" else 0, dtype=x.dtype).view(word)[()]
    wide = max(out.size, x.size) >= 2**31 - 2**24  # room for the grid-stride step past the last element
    source = _pad_source(x.ndim, mode, C_WORD_TYPES[itemsize * 8], wide)
    steps = [s // itemsize for s in x.strides]
    arguments = [np.int64(v) for v in (*out.shape, *x.shape, *start, *steps)]
    magic = [fast_division(size) for size in out.shape]
    launch(cp, source, x.view(word), out.view(word), value, *arguments, *(np.uint32(m) for m, _ in magic),
           *(np.uint32(r) for _, r in magic), count=out.size)
    return out
