"""ScaleBias on the CPU, shared by every family that has the field: x*Scale + Bias, applied to the input first.

Floats are scaled in FLOAT32 (two roundings, never fused), as DirectML's FLOAT Scale and Bias are; integer
tensors (IDENTITY, ABS, CLIP, POW's base, ...: DirectML's pages are silent) in float64, truncated toward
zero and wrapped modulo 2^width, NaN and infinities giving 0. The CUDA twins are in each family's helpers.
"""

from __future__ import annotations

import numpy as np


def wrap_to_integer(values: np.ndarray, dtype) -> np.ndarray:
    """float64 values truncated toward zero, wrapped modulo 2^width into the integer `dtype`; NaN, +-inf give 0."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    with np.errstate(all="ignore"):
        finite = np.isfinite(values)
        whole = np.trunc(np.where(finite, values, 0.0))
        remainder = np.fmod(whole, np.float64(2.0 ** width))  # exact, |remainder| < 2^width
        magnitude = np.abs(remainder).astype(np.uint64)  # exact: a whole number below 2^64
        pattern = np.where(remainder < 0, np.negative(magnitude), magnitude)  # uint64 negation wraps
    return pattern.astype(f"uint{width}").view(dtype)


def integer_scale_bias(x: np.ndarray, pair) -> np.ndarray:
    """ScaleBias (scale, bias) on an integer tensor: x*Scale + Bias in float64 (each step rounded once),
    back to x's own type."""
    scale, bias = pair
    with np.errstate(all="ignore"):
        product = x.astype(np.float64) * np.float64(np.float32(scale))
        return wrap_to_integer(product + np.float64(np.float32(bias)), x.dtype)


def float32_scale_bias(x: np.ndarray, pair) -> np.ndarray:
    """ScaleBias (scale, bias) on a FLOAT16/FLOAT32 tensor: x*Scale, then + Bias, each rounded to FLOAT32."""
    scale, bias = pair
    with np.errstate(all="ignore"):
        product = np.multiply(x.astype(np.float32), np.float32(scale), dtype=np.float32)
        return np.add(product, np.float32(bias), dtype=np.float32)


def cuda_scale_bias_helpers(p: str) -> str:
    """`{p}_scale_bias(x, HasScaleBias, Scale, Bias)` for CUDA bodies, the twin of the functions above:
    FLOAT16/FLOAT32 (as dml_f32) in float32 through the prelude's PTX arithmetic (no flush to zero), FLOAT64
    in float64, integers in float64 truncated toward zero and wrapped modulo 2^width (NaN, inf -> 0)."""
    return f"""
__device__ __forceinline__ unsigned long long {p}_wrap(double v, int w) {{
    if (!(fabs(v) <= 1.7976931348623157e308)) return 0ull;
    const double r = fmod(trunc(v), ldexp(1.0, w));
    const unsigned long long m = (unsigned long long)fabs(r);
    return r < 0.0 ? 0ull - m : m;
}}
template <typename T>
__device__ __forceinline__ T {p}_scale_bias(T x, int has, float scale, float bias) {{
    if (!has) return x;
    const double v = __dadd_rn(__dmul_rn((double)x, dml_widen(scale)), dml_widen(bias));
    return (T){p}_wrap(v, (int)(sizeof(T) * 8));
}}
__device__ __forceinline__ dml_f32 {p}_scale_bias(dml_f32 x, int has, float scale, float bias) {{
    return has ? x * scale + bias : x;
}}
__device__ __forceinline__ double {p}_scale_bias(double x, int has, float scale, float bias) {{
    return has ? __dadd_rn(__dmul_rn(x, dml_widen(scale)), dml_widen(bias)) : x;
}}
"""
