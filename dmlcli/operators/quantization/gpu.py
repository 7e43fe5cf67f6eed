"""The quantization family's own CUDA: the float32 steps of QUANTIZE, DEQUANTIZE, DYNAMIC_QUANTIZE_LINEAR and
QUANTIZED_LINEAR_AVERAGE_POOLING element by element on the GPU.

The xp kernels (entries.py) compute these steps with NumPy's or CuPy's operators; CuPy compiles its operators with
-ftz=true, which would flush FLOAT32 subnormals (a subnormal scale, quotient or product), so on the GPU the same
steps run here over dmlcli's IEEE device primitives (numerics/cuda_prelude.py: division and multiplication in PTX
without .ftz, rounding to a whole number by cvt.rni without .ftz): the GPU gives the CPU's bits. The blocked
scales and zero points arrive already expanded to the input's Sizes (broadcast views; CuPy's kernels follow their
strides), 4-bit tensors as int8/uint8 values (backends/gpu.py).
"""

from __future__ import annotations

import numpy as np

from ..numerics.cuda_prelude import elementwise_kernel

# saturate(rint(v) + zero_point) into [lowest, highest]; a NaN v gives lowest: linear.requantize's steps.
_REQUANTIZE = r"""
__device__ __forceinline__ int dml_requantize(float v, int zero_point, int lowest, int highest) {
    if (isnan(dml_f32{v})) return lowest;
    float r;
    asm("cvt.rni.f32.f32 %0, %1;" : "=f"(r) : "f"(v));
    const int whole = dml_lt(r, -1024.0f) ? -1024 : (dml_gt(r, 1024.0f) ? 1024 : (int)r);
    const int total = whole + zero_point;
    return total < lowest ? lowest : (total > highest ? highest : total);
}
"""


def quantize_values(cp, x, scale, zero_point, limits: tuple[int, int], kernel_dtype):
    """saturate(rint(x / scale) + zero_point) of FLOAT32 `x` and `scale` (arrays that broadcast together) into a new
    array of `kernel_dtype` (int8 or uint8); `zero_point` an integer array or None (0)."""
    kernel = elementwise_kernel(
        cp, "dml_quantize_values", "float32 x, float32 s, int32 z, int32 lowest, int32 highest", "Y y",
        "y = (Y)dml_requantize(dml_div(x, s), z, lowest, highest)", preamble=_REQUANTIZE)
    zero = cp.int32(0) if zero_point is None else zero_point.astype(cp.int32)
    shape = np.broadcast_shapes(x.shape, scale.shape)
    result = cp.empty(shape, dtype=kernel_dtype)
    kernel(x, scale, zero, cp.int32(limits[0]), cp.int32(limits[1]), result)
    return result


def dequantize_values(cp, x, scale, zero_point, out_dtype):
    """float32(x - zero_point) * scale (one IEEE multiplication) into a new array of `out_dtype` (FLOAT32, or
    FLOAT16 rounded once from that product); `x` and `zero_point` integer arrays (None: 0), `scale` FLOAT32."""
    zero = cp.int32(0) if zero_point is None else zero_point.astype(cp.int32)
    shape = np.broadcast_shapes(x.shape, scale.shape)
    if np.dtype(out_dtype) == np.float16:
        kernel = elementwise_kernel(cp, "dml_dequantize_values_f16", "int32 x, int32 z, float32 s", "uint16 y",
                                    "y = dml_float_to_half(dml_mul((float)(x - z), s))")
        result = cp.empty(shape, dtype=cp.uint16)
        kernel(x.astype(cp.int32), zero, scale, result)
        return result.view(cp.float16)
    kernel = elementwise_kernel(cp, "dml_dequantize_values", "int32 x, int32 z, float32 s", "float32 y",
                                "y = dml_mul((float)(x - z), s)")
    result = cp.empty(shape, dtype=cp.float32)
    kernel(x.astype(cp.int32), zero, scale, result)
    return result
