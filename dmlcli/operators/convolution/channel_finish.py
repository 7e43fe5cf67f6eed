"""A convolution's bias and RELU as one pass over its output on the GPU, in place: what follows cuDNN's convolution
where it runs alone (convolution/cudnn.py: cuDNN fuses no bias after some BACKWARD calls, and its plain 1x1
convolution and this pass take less time than its fused plans).

Each (batch, channel) plane of the output is a row of a 2-D grid (blockIdx.y, a grid-stride loop past 65535 planes),
so a thread reads its channel's bias once and divides nothing per element. A plane whose bytes are a multiple of 16
(and whose first one is 16-byte aligned) is read and written in 16-byte words (8 FLOAT16 or 4 FLOAT32 values a load),
any other one value at a time.

Numbers: the bias is added in FLOAT32 (dml_add: IEEE, no flush to zero) and the sum rounded once to the output type;
RELU (dml_relu_apply: NaN kept, -0 to +0) comes before that rounding, with which it commutes. With no bias nothing
is added. CuPy's ElementwiseKernel with the bias broadcast did the same: its index arithmetic over four dimensions per
element took 33 us of GPU time for a {32, 64, 56, 56} FLOAT16 output (12.8 MB, which a read and a write take 6 us at
the H200's copy speed) and 21 us of host time a call; this kernel takes about 9 us of GPU time and 6 to 10 of host
time (.probe/conv1x1.py and host_levels.py, 2026-12-02).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..elementwise.activation import RELU_DEVICE
from ..numerics.cuda_prelude import C_FLOAT_TYPES, DEVICE_PRELUDE, compiled

# A value's conversions to and from float (FLOAT16 by the hardware, exactly).
_CONVERSIONS = {np.dtype(np.float16): ("dml_half_to_float", "dml_float_to_half"), np.dtype(np.float32): ("", "")}
_WORD_BYTES = 16
_THREADS = 256
_GRID_LIMIT = 65535  # blocks along y; along x a plane's words never need more (a grid-stride loop if they did)


def finish(cupy, out, bias, relu: bool) -> None:
    """out + bias (one value per channel, out's axis 1; None: no bias), then RELU where `relu`, in place: `out`
    C-ordered FLOAT16 or FLOAT32 with at least two axes, `bias` of its type."""
    if out.size == 0 or (bias is None and not relu):
        return
    source, grid, block, sizes = _launch(out.shape, out.dtype, out.data.ptr % _WORD_BYTES == 0, bias is not None,
                                         relu)
    compiled(cupy, source)(grid, block, (out, out if bias is None else bias, *sizes))


@functools.lru_cache(maxsize=64)  # worked out once per output shape (a few us of a call's host time)
def _launch(shape: tuple[int, ...], dtype: np.dtype, aligned: bool, with_bias: bool, relu: bool) -> tuple:
    """The kernel's text, grid, block and size arguments (planes, channels, loads a plane) for an output."""
    planes = shape[0] * shape[1]
    plane = math.prod(shape[2:])
    lanes = _WORD_BYTES // dtype.itemsize if aligned and plane * dtype.itemsize % _WORD_BYTES == 0 else 1
    units = plane // lanes
    threads = min(_THREADS, max(32, 1 << (units - 1).bit_length()))
    grid = (min(-(-units // threads), _GRID_LIMIT), min(planes, _GRID_LIMIT))
    return (_source(dtype, lanes, with_bias, relu), grid, (threads,),
            (np.int64(planes), np.int64(shape[1]), np.int64(units)))


@functools.lru_cache(maxsize=16)
def _source(dtype: np.dtype, lanes: int, with_bias: bool, relu: bool) -> str:
    value, (load, store) = C_FLOAT_TYPES[dtype.name], _CONVERSIONS[dtype]
    word = "uint4" if lanes > 1 else value
    channel_bias = f"    const float b = {load}(bs[p % channels]);\n" if with_bias else ""
    add = "        r = dml_add(r, b);\n" if with_bias else ""
    activation = "        r = dml_relu_apply(r);\n" if relu else ""
    return (DEVICE_PRELUDE + RELU_DEVICE +
            f'extern "C" __global__ void dml_kernel({value}* ys, const {value}* bs, const long long planes,\n'
            "    const long long channels, const long long units) {\n"
            f"  union Word {{ {word} word; {value} values[{lanes}]; }};\n"
            "  for (long long p = blockIdx.y; p < planes; p += gridDim.y) {\n"
            f"{channel_bias}"
            f"    {word}* row = reinterpret_cast<{word}*>(ys) + p * units;\n"
            "    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < units;\n"
            "         u += (long long)gridDim.x * blockDim.x) {\n"
            "      Word w;\n"
            "      w.word = row[u];\n"
            "      #pragma unroll\n"
            f"      for (int j = 0; j < {lanes}; ++j) {{\n"
            f"        float r = {load}(w.values[j]);\n"
            f"{add}{activation}"
            f"        w.values[j] = {store}(r);\n"
            "      }\n"
            "      row[u] = w.word;\n"
            "    }\n  }\n}\n")
