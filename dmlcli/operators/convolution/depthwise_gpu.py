"""Depthwise CONVOLUTION on the GPU: dmlcli's own kernel, where it beats cuDNN's plans.

A depthwise call (FORWARD, GroupCount = the input's channels, one input channel a group, FilterTensor {K, 1, ...}
with K a multiple of the channels) sums a few taps per output: memory-bound work that cuDNN's plans for NCHW tensors
ran at a third of PyTorch's speed on the H200 ({32, 256, 56, 56} FLOAT16 3x3 with bias and RELU: 0.54 ms against
0.19; the heuristics offered three plans). Here a thread computes OUTPUTS_PER_THREAD neighbouring outputs of a row:
it reads the inputs their windows share once (padding reads as +0, never stored, as the CPU pads), sums each
output's products in FLOAT32 in the window's row-major order, adds the bias in FLOAT32, applies a fused RELU and rounds
once to the output type: the structure of dmlcli's CPU kernel (convolution/entries.py), so the result is within
CONVOLUTION's sum bound of the CPU's as any order of summation is, and a padded tap times an infinite weight is NaN
on both.

WindowSize, Strides and Dilations are compile-time constants (a kernel per geometry, compiled once: the window's
loops unroll); the Sizes and paddings are arguments. Up to three spatial dimensions (fewer get leading sizes of 1).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..elementwise.activation import RELU_DEVICE
from ..numerics.cuda_prelude import C_FLOAT_TYPES, DEVICE_PRELUDE, FAST_DIVISION, fast_division, launch

# Outputs a thread computes along the last axis, the inputs they share loaded once (3x3 FLOAT16 {32, 256, 56, 56}
# with bias and RELU on the H200: 0.200 ms with one output a thread, PyTorch 0.193).
OUTPUTS_PER_THREAD = 4


def applies(x, w, bias, params, geo: dict, out_shape: tuple[int, ...]) -> bool:
    """Whether this kernel takes the call: a FORWARD depthwise convolution of FLOAT16 or FLOAT32 tensors of one type,
    1 to 3 spatial dimensions, every index (the output's too) within 32 bits."""
    channels = x.shape[1]
    # The group count first: it settles most calls, before the slower questions (a dtype's name costs 1.5 us).
    return (params.get("GroupCount", 1) == channels > 1 and params.get("Direction", "FORWARD") == "FORWARD"
            and x.dtype.name in C_FLOAT_TYPES and w.dtype == x.dtype and (bias is None or bias.dtype == x.dtype)
            and w.shape[1] == 1 and w.shape[0] % channels == 0
            and 3 <= x.ndim <= 5 and not any(geo["OutputPadding"])
            and max(x.size, w.size, math.prod(out_shape)) < 2**31 and x.size > 0)


def convolve(cupy, x, w, bias, out_shape: tuple[int, ...], params, geo: dict, relu: bool, flip):
    """The depthwise convolution's output (the bias added and, with `relu`, RELU applied: the caller marks it
    applied). `flip(w)` flips a filter (CONVOLUTION mode)."""
    if params.get("Mode") == "CONVOLUTION":
        w = cupy.ascontiguousarray(flip(w))
    out = cupy.empty(out_shape, dtype=x.dtype)
    if out.size == 0:
        return out
    lead = (1,) * (5 - x.ndim)
    in_sizes, out_sizes = lead + tuple(x.shape[2:]), lead + tuple(out_shape[2:])
    source = _source(x.dtype.name, lead + tuple(w.shape[2:]), lead + tuple(geo["Strides"]),
                     lead + tuple(geo["Dilations"]), bias is not None, relu)
    pads = (0,) * len(lead) + tuple(geo["StartPadding"])
    groups2 = -(-out_sizes[2] // OUTPUTS_PER_THREAD)  # a thread's outputs: OUTPUTS_PER_THREAD along the last axis
    divisions = [fast_division(size) for size in out_sizes[:2] + (groups2,)] + [fast_division(out_shape[1])]
    threads = out.size // out_sizes[2] * groups2
    launch(cupy, source, x, w, bias if bias is not None else x, out,
           *(np.int32(size) for size in in_sizes + out_sizes + pads), np.int32(x.shape[1]),
           np.int32(out_shape[1] // x.shape[1]), np.int32(out_shape[1]), np.int32(groups2),
           *(np.uint32(m) for m, _ in divisions), *(np.uint32(r) for _, r in divisions), count=threads)
    return out


@functools.lru_cache(maxsize=128)  # the text is built once per geometry
def _source(dtype: str, window, strides, dilations, with_bias: bool, relu: bool) -> str:
    value = C_FLOAT_TYPES[dtype]
    load = "dml_half_to_float" if dtype == "float16" else ""
    store = "dml_float_to_half(r)" if dtype == "float16" else "r"
    constants = "".join(f"  constexpr int {name}{dim} = {values[dim]};\n"
                        for name, values in (("w", window), ("s", strides), ("d", dilations)) for dim in range(3))
    span = (OUTPUTS_PER_THREAD - 1) * strides[2] + (window[2] - 1) * dilations[2] + 1
    bias = f"      r = r + {load}(bs[k]);\n" if with_bias else ""
    activation = "      r = dml_relu_apply(r);\n" if relu else ""  # before the rounding: see RELU_DEVICE
    return (DEVICE_PRELUDE + RELU_DEVICE + FAST_DIVISION +
            f'extern "C" __global__ void dml_kernel(const {value}* xs, const {value}* ws, const {value}* bs,\n'
            f"    {value}* ys, const int i0, const int i1, const int i2, const int o0, const int o1, const int o2,\n"
            "    const int p0, const int p1, const int p2, const int channels, const int multiplier,\n"
            "    const int out_channels, const int groups2, const unsigned int m0, const unsigned int m1,\n"
            "    const unsigned int m2, const unsigned int mk, const unsigned int r0, const unsigned int r1,\n"
            "    const unsigned int r2, const unsigned int rk, const long long n) {\n"
            f"{constants}"
            f"  constexpr int V = {OUTPUTS_PER_THREAD}, SPAN = {span};\n"
            "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
            "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {\n"
            "    unsigned int t = (unsigned int)i;\n"
            "    unsigned int q = dml_fast_divide(t, (unsigned int)groups2, m2, r2);\n"
            "    const int c2 = (int)(t - q * groups2) * V; t = q;\n"
            "    q = dml_fast_divide(t, (unsigned int)o1, m1, r1); const int c1 = t - q * o1; t = q;\n"
            "    q = dml_fast_divide(t, (unsigned int)o0, m0, r0); const int c0 = t - q * o0; t = q;\n"
            "    q = dml_fast_divide(t, (unsigned int)out_channels, mk, rk); const int k = t - q * out_channels;\n"
            f"    const {value}* plane = xs + ((long long)q * channels + k / multiplier) * ((long long)i0 * i1 * i2);\n"
            f"    const {value}* taps = ws + (long long)k * (w0 * w1 * w2);\n"
            "    float acc[V];\n"
            "    #pragma unroll\n"
            "    for (int v = 0; v < V; ++v) acc[v] = 0.0f;\n"
            "    #pragma unroll\n"
            "    for (int a = 0; a < w0; ++a) {\n"
            "      const int x0 = c0 * s0 - p0 + a * d0;\n"
            "      const bool in0 = x0 >= 0 && x0 < i0;\n"
            "      #pragma unroll\n"
            "      for (int b = 0; b < w1; ++b) {\n"
            "        const int x1 = c1 * s1 - p1 + b * d1;\n"
            "        const bool in1 = in0 && x1 >= 0 && x1 < i1;\n"
            f"        const {value}* row = plane + ((long long)x0 * i1 + x1) * i2;\n"
            "        const int first = c2 * s2 - p2;\n"
            "        float span[SPAN];  // the inputs of this row that the thread's outputs read; padding reads +0\n"
            "        #pragma unroll\n"
            "        for (int e = 0; e < SPAN; ++e) {\n"
            "          const int x2 = first + e;\n"
            f"          span[e] = (in1 && x2 >= 0 && x2 < i2) ? {load}(row[x2]) : 0.0f;\n"
            "        }\n"
            "        #pragma unroll\n"
            "        for (int c = 0; c < w2; ++c) {\n"
            f"          const float tap = {load}(taps[(a * w1 + b) * w2 + c]);\n"
            "          #pragma unroll\n"
            "          for (int v = 0; v < V; ++v) acc[v] = fmaf(span[v * s2 + c * d2], tap, acc[v]);\n"
            "        }\n      }\n    }\n"
            f"    {value}* out = ys + ((((long long)q * out_channels + k) * o0 + c0) * o1 + c1) * o2 + c2;\n"
            "    #pragma unroll\n"
            "    for (int v = 0; v < V; ++v) {\n"
            "      if (c2 + v >= o2) break;\n"
            "      float r = acc[v];\n"
            f"{bias}{activation}"
            f"      out[v] = {store};\n"
            "    }\n  }\n}\n")
