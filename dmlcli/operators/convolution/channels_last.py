"""A convolution's output written channels-last by cuDNN, then made C-ordered ({N, C, spatial...}) by one tiled
transpose: convolution/cudnn.py's channels-last route, taken where it was timed faster than cuDNN writing the
C-ordered output itself.

Why: cuDNN's fastest FLOAT16 convolutions on these GPUs compute channels-last ({N, spatial..., C}); asked for a
C-ordered output, the plan appends its own layout kernel, which moved the bench's {32, 256, 56, 56} FLOAT16 output in
48.6 us where a copy of the same bytes takes 27 us (torch.profiler on the H200, 2026-12-03). Asked for the output
with channels-last strides, the plan writes it so directly, and this module's kernel moves it in 28.5 us: the call
took 249 us against 277 (medians of 9 rounds of 40 calls back to back; PyTorch's own call, which has cuDNN convert,
276), and bench/cudnn_bench.py's FLOAT16 3x3 row went from 0.98 to 1.01 of PyTorch to 1.06 (docs/gpu.md). A transpose
moves bits: the result is the same, bit for bit.

The kernel reads a {P, C} matrix of each batch (P the spatial positions) in 64 x 64 tiles through shared memory and
writes its {C, P} transpose: along C on the way in and along P on the way out, so both sides are whole rows of the
tile. Where C and P are even, FLOAT16 moves two values a thread (one 32-bit word: a warp's row of the tile is 128
bytes); otherwise one value at a time. Tiles past the matrix's edge check each index.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..numerics.cuda_prelude import compiled
from ..numerics.cudnn_graphs import contiguous_strides

TILE = 64
_BLOCK = (32, 8)  # a warp along the tile's rows, 8 rows of threads: each thread moves TILE / 8 rows
_GRID_LIMIT = 65535  # blocks along y and z


def channels_last_sizes(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """{N, C, spatial...} -> {N, spatial..., C}: the Sizes of the channels-last buffer cuDNN writes."""
    return (sizes[0],) + tuple(sizes[2:]) + (sizes[1],)


def channels_last_strides(sizes: tuple[int, ...]) -> list[int]:
    """The strides, in elements and in {N, C, spatial...} order, of a C-ordered {N, spatial..., C} buffer: how cuDNN is
    told to write the output channels-last."""
    written = contiguous_strides(channels_last_sizes(sizes))  # {N, spatial..., C}'s own order
    return [written[0], written[-1]] + written[1:-1]


def fits(sizes: tuple[int, ...]) -> bool:
    """Whether to_channels_first's grid covers an output of these Sizes ({N, C, spatial...}): at most 65535 batches,
    and 65535 tiles of positions (about 4.2 million); convolution/cudnn.py offers the route only then."""
    return sizes[0] <= _GRID_LIMIT and -(-math.prod(sizes[2:]) // TILE) <= _GRID_LIMIT


def to_channels_first(cupy, source, out) -> None:
    """out[n, c, p...] = source[n, p..., c]: `source` the C-ordered channels-last buffer, `out` the C-ordered output
    ({N, C, spatial...}, Sizes that fit), both FLOAT16 or FLOAT32 of the same type, queued on the current stream."""
    batch, channels = out.shape[0], out.shape[1]
    positions = math.prod(out.shape[2:])
    if out.size == 0:
        return
    pairs = out.dtype == np.float16 and channels % 2 == 0 and positions % 2 == 0
    if not fits(out.shape):
        raise ValueError(f"a channels-last output of {batch} batches and {positions} positions is past the grid")
    grid = (-(-channels // TILE), -(-positions // TILE), batch)
    compiled(cupy, _source(out.dtype.name, pairs))(grid, _BLOCK, (source, out, np.int64(positions),
                                                                  np.int64(channels)))


@functools.lru_cache(maxsize=4)
def _source(type_name: str, pairs: bool) -> str:
    value = {"float16": "__half", "float32": "float"}[type_name]
    if pairs:  # two FLOAT16 values a thread: C and P even, so every pair is one aligned 32-bit word
        read = r"""
            const long long p = p0 + row, c = c0 + 2 * threadIdx.x;
            if (p < positions && c < channels) {
                const __half2 pair = *(const __half2*)(source + p * channels + c);
                tile[row][2 * threadIdx.x] = pair.x;
                tile[row][2 * threadIdx.x + 1] = pair.y;
            }"""
        write = r"""
            const long long c = c0 + row, p = p0 + 2 * threadIdx.x;
            if (c < channels && p < positions) {
                __half2 pair;
                pair.x = tile[2 * threadIdx.x][row];
                pair.y = tile[2 * threadIdx.x + 1][row];
                *(__half2*)(out + c * positions + p) = pair;
            }"""
    else:  # one value a thread, two columns of the tile each
        read = r"""
            #pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int column = threadIdx.x + 32 * half;
                const long long p = p0 + row, c = c0 + column;
                if (p < positions && c < channels) tile[row][column] = source[p * channels + c];
            }"""
        write = r"""
            #pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int column = threadIdx.x + 32 * half;
                const long long c = c0 + row, p = p0 + column;
                if (c < channels && p < positions) out[c * positions + p] = tile[column][row];
            }"""
    return r"""
#include <cuda_fp16.h>
extern "C" __global__ void dml_kernel(const VALUE* source, VALUE* out, long long positions, long long channels)
{
    __shared__ VALUE tile[64][66];
    const long long c0 = (long long)blockIdx.x * 64, p0 = (long long)blockIdx.y * 64;
    source += (long long)blockIdx.z * positions * channels;
    out += (long long)blockIdx.z * positions * channels;
    #pragma unroll
    for (int k = 0; k < 8; ++k) {
        const int row = threadIdx.y + 8 * k;
        {READ}
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < 8; ++k) {
        const int row = threadIdx.y + 8 * k;
        {WRITE}
    }
}
""".replace("VALUE", value).replace("{READ}", read).replace("{WRITE}", write)
