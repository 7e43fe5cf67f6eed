"""Data movement on the GPU: JOIN by the copy engine (cudaMemcpy2DAsync calls, each a block of equal rows copied at
the device's copy bandwidth), TILE by a kernel that reads the input once (tile_by_kernel; the copy engine's tile
past TILE_MAX_COPIES copies), PADDING by one kernel of its own for every mode (pad), with the copy engine's interior
(place) where that kernel does not take the input, SLICE and SLICE1 by a strided gather (strided_copy; every other
element of rows of whole 16-byte vectors by a warp-wide kernel of its own, _pairs) (issue 23: data movement at >= 0.7
of the copy, and never slower than CuPy). CuPy's concatenate, tile and slice assignment run an indexing kernel at
about half of it; its copy of a strided view, one element a thread with 64-bit index arithmetic, 10-15% slower than
strided_copy.

join, tile and place return None (or False) where their layout does not fit a few 2-D copies (a pitch past the
device's limit, or more pieces than MAX_COPIES); the caller then runs the shared xp kernel. Bytes are copied as they
are, so every type and every bit pattern (NaN payloads included) is kept.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ..numerics.cuda_prelude import C_WORD_TYPES, FAST_DIVISION, fast_division, launch

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


# TILE by one kernel that reads the input once and writes each element to all its copies: a thread loads one
# 16-byte vector of the input (where the last dimension allows) and stores it at every copy's place, the copies'
# offsets from a table computed once on the host (TILE_MAX_COPIES of them at most). The copy engine's 2-D copies
# read the input once per copy: a tile of 2 along the rows moved 0.70-0.84 of the copy bandwidth's bytes.
TILE_MAX_COPIES = 4096
TILE_MAX_RANK = 8


@functools.lru_cache(maxsize=128)  # the text is built once per rank, width, vector and index size
def _tile_source(rank: int, word: str, vector: int, wide: bool) -> str:
    """For each input vector i (rank dimensions, the last counted in vectors): y[its place + copies[k]] = x[i] for
    each of the `count` copies."""
    lines = _indexing_head(word, vector, wide)
    lines += [f'extern "C" __global__ void dml_kernel(const V* x, T* y, const long long* __restrict__ copies, '
              f'const long long count, {_dimension_arguments(rank, "out_step")}, const long long n) {{',
              *_grid_loop("long long target = 0;"),
              *_coordinate_sums(rank, vector, wide, "target += (long long)({coordinate}) * out_step{d};"),
              "        const V v = x[i];",
              "        for (long long k = 0; k < count; ++k) *reinterpret_cast<V*>(y + target + copies[k]) = v;",
              "    }", "}", ""]
    return "\n".join(lines)


def _indexing_head(word: str, vector: int, wide: bool) -> list[str]:
    """The definitions the tile and gather kernels share: the word type T, the index type, the vector V."""
    return [FAST_DIVISION, f"typedef {word} T;", f"typedef {'long long' if wide else 'int'} idx_t;",
            f"struct __align__({vector} * sizeof(T)) V {{ T v[{vector}]; }};"]


def _dimension_arguments(rank: int, step_name: str) -> str:
    """Each dimension's size and step, then its magic number and shift (cuda_prelude.fast_division)."""
    return ", ".join([f"const long long {name}{d}" for name in ("size", step_name) for d in range(rank)]
                     + [f"const unsigned int {name}{d}" for name in ("magic", "shift") for d in range(rank)])


def _grid_loop(declaration: str) -> list[str]:
    return ["    const idx_t stride = (idx_t)gridDim.x * blockDim.x;",
            "    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {",
            f"        idx_t t = i; {declaration}"]


def _coordinate_sums(rank: int, vector: int, wide: bool, accumulate: str) -> list[str]:
    """Index i's coordinate in each dimension, last first (the last counted in vectors: its coordinate is the
    vector's times `vector`), each added to a sum by `accumulate` (a format of {coordinate} and {d})."""
    lines = []
    for d in reversed(range(rank)):
        if wide:
            quotient = f"t / (idx_t)size{d}"
        else:
            quotient = f"(idx_t)dml_fast_divide((unsigned int)t, (unsigned int)size{d}, magic{d}, shift{d})"
        scale = f" * {vector}" if d == rank - 1 and vector > 1 else ""
        lines += ["        {", f"        const idx_t q = {quotient};",
                  "        " + accumulate.format(coordinate=f"(t - q * (idx_t)size{d}){scale}", d=d) + " t = q;",
                  "        }"]
    return lines


def tile_by_kernel(cp, x, repeats):
    """TILE of a CuPy array by the read-once kernel; None where it does not take the call (more than
    TILE_MAX_COPIES copies, a rank past TILE_MAX_RANK, an empty input)."""
    copies = math.prod(repeats)
    if x.size == 0 or x.ndim == 0 or x.ndim > TILE_MAX_RANK or copies > TILE_MAX_COPIES:
        return None
    x = cp.ascontiguousarray(x)
    itemsize = x.dtype.itemsize
    out = cp.empty(tuple(size * repeat for size, repeat in zip(x.shape, repeats)), dtype=x.dtype)
    vector = max(1, GATHER_VECTOR_BYTES // itemsize) if x.data.ptr % GATHER_VECTOR_BYTES == 0 else 1
    while x.shape[-1] % vector:
        vector //= 2
    out_steps = [s // itemsize for s in out.strides]
    counts = list(x.shape[:-1]) + [x.shape[-1] // vector]
    wide = max(x.size, out.size) >= 2**31 - 2**24
    word = f"uint{itemsize * 8}"
    magic = [fast_division(count) for count in counts]
    offsets = _copy_offsets(cp, x.shape, tuple(int(r) for r in repeats), out_steps)
    launch(cp, _tile_source(x.ndim, C_WORD_TYPES[itemsize * 8], vector, wide), x.view(word), out.view(word),
           offsets, np.int64(copies), *(np.int64(v) for v in (*counts, *out_steps)),
           *(np.uint32(m) for m, _ in magic), *(np.uint32(r) for _, r in magic), count=x.size // vector)
    return out


# The copies' offsets on the device, kept per device, input shape and repeats: made on every call, they were a
# host-to-device copy from pageable memory before each launch (the host waits for it; the GPU idles meanwhile).
_TILE_OFFSETS: dict = {}
_TILE_OFFSETS_KEPT = 256


def _copy_offsets(cp, shape, repeats: tuple, out_steps):
    """Each copy's offset: the copy's index along each axis times the input's size there, in output elements (the
    same for every element size: out_steps are in elements)."""
    key = (cp.cuda.Device().id, tuple(int(n) for n in shape), repeats)
    found = _TILE_OFFSETS.get(key)
    if found is None:
        offsets = np.zeros(1, dtype=np.int64)
        for size, repeat, step in zip(shape, repeats, out_steps):
            offsets = (offsets[:, None] + np.arange(repeat, dtype=np.int64)[None, :] * (size * step)).reshape(-1)
        if len(_TILE_OFFSETS) >= _TILE_OFFSETS_KEPT:
            _TILE_OFFSETS.clear()
        found = _TILE_OFFSETS[key] = cp.asarray(offsets)
    return found


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


# PADDING in one pass: each thread writes PAD_VECTOR_BYTES of consecutive outputs in one store (the flat output's
# 16-byte words, rows of any width: a word may hold the end of one row and the start of the next) and finds each
# output's input element (CONSTANT: none outside the interior) by movement.padding_runs's rule, dimension by
# dimension: the division into coordinates once per thread, then the last coordinate counted up, the outer ones
# found again only where a row ends. The output is written once and the input read about once, coalesced along the
# last axis; every mode, every padding length (folded periodically as on the CPU). One thread per element measured
# 0.69-0.76 of the copy bandwidth on 1 GiB FLOAT32 (its index arithmetic and 4-byte stores the cost); the copy
# engine's 2-D copy into a padded row pitch about half (its rows start off 16-byte boundaries).
PAD_MAX_RANK = 8
PAD_VECTOR_BYTES = 16
_PAD_FOLD = {
    "CONSTANT": "",
    "EDGE": "c = c < 0 ? 0 : (c >= size ? size - 1 : c);",
    # A one-element dimension mirrors onto its only element (padding_period).
    "REFLECTION": ("if (size == 1) { c = 0; } else { const idx_t period = 2 * (size - 1); "
                   "idx_t folded = c % period; if (folded < 0) folded += period; "
                   "c = folded < size ? folded : period - folded; }"),
    "SYMMETRIC": ("if (size == 1) { c = 0; } else { const idx_t period = 2 * size; "
                  "idx_t folded = c % period; if (folded < 0) folded += period; "
                  "c = folded < size ? folded : period - 1 - folded; }"),
    # The input repeated end to end: the coordinate modulo the size (padding_runs's WRAP).
    "WRAP": "{ idx_t folded = c % size; if (folded < 0) folded += size; c = folded; }",
}


def _pad_coordinate(d: int, mode: str) -> list[str]:
    """Output coordinate c of dimension d (the input's start subtracted) to the input's: CONSTANT marks a
    coordinate outside the input, the other modes fold it in (only where it lies in the padding)."""
    if mode == "CONSTANT":
        return [f"inside = inside && c >= 0 && c < (idx_t)in{d};"]
    return [f"if (c < 0 || c >= (idx_t)in{d}) {{ const idx_t size = (idx_t)in{d}; {_PAD_FOLD[mode]} }}"]


def _divided(t: str, d: int, wide: bool) -> str:
    if wide:
        return f"{t} / (idx_t)out{d}"
    return f"(idx_t)dml_fast_divide((unsigned int){t}, (unsigned int)out{d}, magic{d}, shift{d})"


@functools.lru_cache(maxsize=128)  # the text is built once per rank, mode, width, vector and index size
def _pad_source(rank: int, mode: str, word: str, vector: int, wide: bool) -> str:
    """The kernel for one rank, mode and element width: sizes, starts and input strides are arguments; each of
    the n threads writes `vector` outputs of the `total`."""
    last = rank - 1
    arguments = ", ".join([f"const long long {name}{d}" for name in ("out", "in", "start", "step") for d in range(rank)]
                          + [f"const unsigned int {name}{d}" for name in ("magic", "shift") for d in range(rank)])
    lines = [FAST_DIVISION, f"typedef {word} T;", f"typedef {'long long' if wide else 'int'} idx_t;",
             f"struct __align__({vector} * sizeof(T)) V {{ T v[{vector}]; }};",
             f'extern "C" __global__ void dml_kernel(const T* x, V* y, const T value, {arguments}, '
             "const long long total, const long long n) {",
             # The input offset of an output row (its index over every dimension but the last), and whether it
             # lies inside the input (CONSTANT).
             "    auto row_source = [&](idx_t t, bool& inside) -> idx_t {",
             "        idx_t source = 0;"]
    for d in reversed(range(last)):
        if d == 0:  # what is left of a row's index is its first coordinate (rows past the output are not asked)
            lines += ["        {", "        idx_t c = t - (idx_t)start0;"]
        else:
            lines += ["        {", f"        const idx_t q = {_divided('t', d, wide)};",
                      f"        idx_t c = t - q * (idx_t)out{d} - (idx_t)start{d}; t = q;"]
        lines += [*("        " + line for line in _pad_coordinate(d, mode)),
                  f"        source += c * (idx_t)step{d};", "        }"]
    lines += ["        return source;", "    };",
              "    const idx_t stride = (idx_t)gridDim.x * blockDim.x;",
              "    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {",
              f"        const idx_t first = i * {vector};",
              f"        idx_t row = {_divided('first', last, wide)};",
              f"        idx_t r = first - row * (idx_t)out{last};",
              "        bool row_inside = true;",
              "        idx_t row_start = row_source(row, row_inside);",
              "        V v;",
              "        #pragma unroll",
              f"        for (int j = 0; j < {vector}; ++j) {{",
              "            if (first + j < (idx_t)total) {",
              f"                idx_t c = r - (idx_t)start{last};"
              + (" bool inside = row_inside;" if mode == "CONSTANT" else ""),
              *("                " + line for line in _pad_coordinate(last, mode)),
              (f"                v.v[j] = inside ? x[row_start + c * (idx_t)step{last}] : value;" if mode == "CONSTANT"
               else f"                v.v[j] = x[row_start + c * (idx_t)step{last}];"),
              "            }",
              f"            if (++r == (idx_t)out{last} && j + 1 < {vector} && first + j + 1 < (idx_t)total) {{",
              "                r = 0; ++row; row_inside = true; row_start = row_source(row, row_inside);",
              "            }",
              "        }",
              f"        if (first + {vector} <= (idx_t)total) {{ y[i] = v; }} else {{",
              "            for (int j = 0; first + j < (idx_t)total; ++j) reinterpret_cast<T*>(y)[first + j] = v.v[j];",
              "        }",
              "    }", "}", ""]
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
    vector = max(1, PAD_VECTOR_BYTES // itemsize)
    wide = max(out.size, x.size) + vector >= 2**31 - 2**24  # room for the grid-stride step past the last element
    source = _pad_source(x.ndim, mode, C_WORD_TYPES[itemsize * 8], vector, wide)
    steps = [s // itemsize for s in x.strides]
    arguments = [np.int64(v) for v in (*out.shape, *x.shape, *start, *steps)]
    magic = [fast_division(size) for size in out.shape]
    threads = -(-out.size // vector)
    launch(cp, source, x.view(word), out.view(word), value, *arguments, *(np.uint32(m) for m, _ in magic),
           *(np.uint32(r) for _, r in magic), np.int64(out.size), count=threads)
    return out


# SLICE and SLICE1: a gather from a strided view of the input (negative steps included) into a fresh C-ordered
# output. Dimensions that are contiguous in the view are merged first (a slice of whole rows is one dimension), so
# that each thread divides its index by few sizes, by magic numbers (cuda_prelude.fast_division); a thread writes
# GATHER_VECTOR_BYTES of consecutive outputs in one store where the last dimension allows.
GATHER_MAX_RANK = 8
GATHER_VECTOR_BYTES = 16


def _merged(shape, steps) -> tuple[list[int], list[int]]:
    """The view's dimensions with sizes of 1 left out and neighbours that read as one dimension merged."""
    sizes, strides = [], []
    for size, step in zip(shape, steps):
        if size == 1:
            continue
        if sizes and strides[-1] == size * step:
            sizes[-1] *= size
            strides[-1] = step
        else:
            sizes.append(size)
            strides.append(step)
    return sizes or [1], strides or [1]


# A last-dimension step of 2 to SPAN_MAX_STEP elements with 16-byte vectors: the thread reads the `step` 16-byte
# words its outputs lie in and picks them (a slice of every other column: two 16-byte loads for four FLOAT32
# outputs, where element loads take four instructions that each touch twice the sectors they use).
SPAN_MAX_STEP = 4


@functools.lru_cache(maxsize=128)  # the text is built once per rank, width, vector, span and index size
def _gather_source(rank: int, word: str, vector: int, wide: bool, span: int = 0) -> str:
    """y[i] = x[sum of coordinate * step] for `rank` dimensions; `vector` consecutive outputs a thread; `span`: the
    last dimension's step where the thread reads its outputs' 16-byte words whole (0: element by element)."""
    lines = _indexing_head(word, vector, wide)
    lines += [f'extern "C" __global__ void dml_kernel(const T* x, V* y, {_dimension_arguments(rank, "step")}, '
              "const long long n) {",
              *_grid_loop("idx_t source = 0;"),
              *_coordinate_sums(rank, vector, wide, "source += {coordinate} * (idx_t)step{d};")]
    last = rank - 1
    if span:
        lines += ["        uint4 words[%d];" % span,
                  "        #pragma unroll",
                  f"        for (int q = 0; q < {span}; ++q) words[q] = reinterpret_cast<const uint4*>(x + source)[q];",
                  "        const T* picked = reinterpret_cast<const T*>(words);",
                  "        V v;",
                  "        #pragma unroll",
                  f"        for (int j = 0; j < {vector}; ++j) v.v[j] = picked[j * {span}];"]
    else:
        lines += ["        V v;",
                  "        #pragma unroll",
                  f"        for (int j = 0; j < {vector}; ++j) v.v[j] = x[source + j * (idx_t)step{last}];"]
    lines += ["        y[i] = v;", "    }", "}", ""]
    return "\n".join(lines)


# A last step of 2 over at most two dimensions (after merging; every other column of a matrix reads as one dimension),
# rows of whole 16-byte output vectors from 16-byte boundaries: each warp reads PAIR_GROUPS x 1 KiB of consecutive
# input words (lane l the words l, 32 + l, ...: every load instruction 512 contiguous bytes) and keeps the 8 bytes of
# every other element of each; two neighbouring lanes' picks make one 16-byte output vector, which warp shuffles bring
# to the lane that stores it (every store instruction 512 contiguous bytes). The gather kernel's whole-word reads
# (_gather_source's span) have each lane read two words 32 bytes from the next lane's: every other column of 1 GiB of
# FLOAT32 at 0.75 of the H200's copy bandwidth (counting the whole input read and the half written).
PAIR_GROUPS = 2


@functools.lru_cache(maxsize=16)
def _pairs_source(itemsize: int, wide: bool) -> str:
    """Every other element of `itemsize` bytes along rows: a 16-byte input word gives 8 bytes of output."""
    pick = {1: "make_uint2(__byte_perm(w.x, w.y, 0x6420), __byte_perm(w.z, w.w, 0x6420))",
            2: "make_uint2(__byte_perm(w.x, w.y, 0x5410), __byte_perm(w.z, w.w, 0x5410))",
            4: "make_uint2(w.x, w.z)", 8: "make_uint2(w.x, w.y)"}[itemsize]
    divide = ("t / segments" if wide else
              "(idx_t)dml_fast_divide((unsigned int)t, (unsigned int)segments, magic, shift)")
    return FAST_DIVISION + f"""
typedef {'long long' if wide else 'int'} idx_t;
#define PAIR_GROUPS {PAIR_GROUPS}
// The 8 bytes of elements 0, 2, ... of a 16-byte word.
__device__ __forceinline__ uint2 dml_pick(uint4 w) {{ return {pick}; }}
__device__ __forceinline__ unsigned int dml_from(unsigned int v, int lane) {{
    return __shfl_sync(0xffffffffu, v, lane);
}}
// rows of `vectors` 16-byte output vectors (2 x vectors input words each), `row_step` input words apart (any sign).
extern "C" __global__ void dml_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, const long long lvectors,
        const long long lsegments, const long long row_step, const unsigned int magic, const unsigned int shift,
        const long long n) {{
    const idx_t vectors = (idx_t)lvectors, segments = (idx_t)lsegments;
    const int lane = threadIdx.x & 31;
    // Output vector v of a group is the picks of the group's words 2 v and 2 v + 1: for lanes 0 to 15 the first 32
    // words' (held by lanes 2 lane and 2 lane + 1), for lanes 16 to 31 the next 32's (lanes 2 lane - 32 and after).
    const int source = (2 * lane) & 31;
    // n is a multiple of 32 and so is the stride: a warp's lanes share each task and leave the loop together (the
    // shuffles need all 32).
    const idx_t stride = (idx_t)gridDim.x * blockDim.x;
    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {{
        const idx_t t = i >> 5;
        const idx_t row = {divide};
        const idx_t first = (t - row * segments) * (32 * PAIR_GROUPS);  // the task's first output vector in the row
        const uint4* in = x + (long long)row * row_step + 2 * (long long)first;
        uint4* out = y + (long long)row * vectors + first;
        const idx_t words = 2 * (vectors - first);  // input words of the row from the task's first
        uint4 loaded[2 * PAIR_GROUPS];
        #pragma unroll
        for (int q = 0; q < 2 * PAIR_GROUPS; ++q) {{
            loaded[q] = 32 * q + lane < words ? in[32 * q + lane] : make_uint4(0u, 0u, 0u, 0u);
        }}
        #pragma unroll
        for (int g = 0; g < PAIR_GROUPS; ++g) {{
            const uint2 low = dml_pick(loaded[2 * g]), high = dml_pick(loaded[2 * g + 1]);
            const unsigned int a = dml_from(low.x, source), b = dml_from(low.y, source);
            const unsigned int c = dml_from(low.x, source + 1), d = dml_from(low.y, source + 1);
            const unsigned int e = dml_from(high.x, source), f = dml_from(high.y, source);
            const unsigned int u = dml_from(high.x, source + 1), v = dml_from(high.y, source + 1);
            const uint4 vector = lane < 16 ? make_uint4(a, b, c, d) : make_uint4(e, f, u, v);
            if (32 * g + lane < vectors - first) out[32 * g + lane] = vector;
        }}
    }}
}}
"""


def _pairs(cp, view, out, sizes, steps) -> None:
    """Every other element of rows of whole 16-byte output vectors into `out` (the caller checked pairs_fit)."""
    itemsize = view.dtype.itemsize
    rows, count = (1, sizes[0]) if len(sizes) == 1 else sizes
    row_step = 0 if len(sizes) == 1 else steps[0] * itemsize // 16
    vectors = count * itemsize // 16
    segments = -(-vectors // (32 * PAIR_GROUPS))
    threads = rows * segments * 32
    # The kernel's indices count threads, tasks and words within a row (pointers move in 64 bits): 32 bits where
    # they leave room for the grid-stride step past the last thread.
    wide = max(threads, 2 * vectors) >= 2**31 - 2**24
    magic, shift = fast_division(segments)
    launch(cp, _pairs_source(itemsize, wide), view, out, np.int64(vectors), np.int64(segments), np.int64(row_step),
           np.uint32(magic), np.uint32(shift), count=threads)


def strided_copy(cp, view):
    """A C-ordered copy of the CuPy array `view` (a strided view of a bigger array, steps of any sign), made by one
    gather kernel (every other element of whole 16-byte vectors by _pairs); CuPy's own copy where the kernel does not
    take it (more than GATHER_MAX_RANK dimensions that do not merge), and a plain copy where the view is contiguous."""
    if view.size == 0 or view.ndim == 0:
        return cp.ascontiguousarray(view)
    planned = _gather_plan(view.shape, view.strides, view.dtype.itemsize)
    if planned is None:
        return cp.ascontiguousarray(view)
    sizes, steps, vector = planned.sizes, planned.steps, planned.vector
    out = cp.empty(view.shape, dtype=view.dtype)
    whole_words = _reads_whole_words(view, sizes, steps, vector)
    if _pairs_take(sizes, steps, whole_words):
        _pairs(cp, view, out, sizes, steps)
        return out
    word = f"uint{view.dtype.itemsize * 8}"
    source = _gather_source(len(sizes), C_WORD_TYPES[view.dtype.itemsize * 8], vector, planned.wide,
                            steps[-1] if whole_words else 0)
    launch(cp, source, view.view(word), out.view(word), *planned.arguments, count=planned.count)
    return out


class _GatherPlan(NamedTuple):
    """What strided_copy works out from a view's Sizes, strides and item size alone."""

    sizes: tuple[int, ...]  # the view's dimensions merged (_merged), in elements
    steps: tuple[int, ...]
    vector: int  # consecutive outputs a thread stores at once
    count: int  # the kernel's stores
    wide: bool  # whether the kernel needs 64-bit indices
    arguments: tuple  # the counts and steps as int64, then the magic numbers of their divisions


@functools.lru_cache(maxsize=256)
def _gather_plan(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> _GatherPlan | None:
    """strided_copy's plan for a view (a repeated call's, such as attention's present keys on every call, worked out
    once); None where the kernel does not take the view."""
    sizes, steps, vector = _layout_of(shape, strides, itemsize)
    if len(sizes) > GATHER_MAX_RANK or (len(sizes) == 1 and steps[0] == 1):
        return None
    counts = sizes[:-1] + [sizes[-1] // vector]
    reach = sum((size - 1) * abs(step) for size, step in zip(sizes, steps))
    wide = max(math.prod(shape), reach) >= 2**31 - 2**24  # room for the grid-stride step past the last element
    magic = [fast_division(count) for count in counts]
    arguments = (*(np.int64(v) for v in (*counts, *steps)), *(np.uint32(m) for m, _ in magic),
                 *(np.uint32(r) for _, r in magic))
    return _GatherPlan(tuple(sizes), tuple(steps), vector, math.prod(shape) // vector, wide, arguments)


def gather_layout(view) -> tuple[list[int], list[int], int]:
    """The view's dimensions merged (_merged: sizes and steps in elements) and how many consecutive outputs the
    gather kernel stores at once (GATHER_VECTOR_BYTES of them where the last size allows)."""
    return _layout_of(view.shape, view.strides, view.dtype.itemsize)


def _layout_of(shape, strides, itemsize: int) -> tuple[list[int], list[int], int]:
    sizes, steps = _merged(shape, [s // itemsize for s in strides])
    vector = max(1, GATHER_VECTOR_BYTES // itemsize)
    while sizes[-1] % vector:
        vector //= 2
    return sizes, steps, vector


def pairs_fit(view) -> bool:
    """Whether strided_copy takes `view` (not empty, not contiguous) by _pairs: a last step of 2, at most two
    dimensions once merged, and whole 16-byte words to read (_reads_whole_words)."""
    sizes, steps, vector = gather_layout(view)
    return _pairs_take(sizes, steps, _reads_whole_words(view, sizes, steps, vector))


def _pairs_take(sizes, steps, whole_words: bool) -> bool:
    return whole_words and steps[-1] == 2 and len(sizes) <= 2


def _reads_whole_words(view, sizes, steps, vector: int) -> bool:
    """Whether each thread may read its outputs' 16-byte words whole: a last step of 2 to SPAN_MAX_STEP, 16-byte
    vectors, every word on a 16-byte boundary (the view's start and every other step a multiple of a vector), and
    the last word read still inside the view's allocation (it reaches step - 1 elements past the last output)."""
    itemsize = view.dtype.itemsize
    if not 2 <= steps[-1] <= SPAN_MAX_STEP or vector * itemsize != 16 or view.data.ptr % 16:
        return False
    if any(step % vector for step in steps[:-1]):
        return False
    furthest = sum(max(0, (size - 1) * step) for size, step in zip(sizes, steps)) + steps[-1] - 1
    memory = view.data.mem
    return view.data.ptr + (furthest + 1) * itemsize <= memory.ptr + memory.size
