"""GEMM's finish on the GPU for FLOAT16 operands whose product Alpha or a CTensor changes where cuBLAS's own
epilogue would not give IEEE's result (Alpha 0, or Beta 0 with a CTensor: cuBLAS skips that term, where 0 * inf is
NaN; entries._half_epilogue takes every other such call): one pass over cuBLAS's FLOAT32 sums (entries.gemm_product
takes them unrounded) applies Alpha, adds Beta * C, rounds once to FLOAT16 and applies a fused RELU (the activation's
own device function), where CuPy's operators took four passes over the sums.

The pass does entries.gemm_product's FLOAT32 operations in its order, each rounded once (dmlcli's IEEE prelude: no
contraction into fused multiply-adds, no flush to zero), so its result is that function's on the same sums; RELU
before the rounding is RELU after it (a rounding keeps a value's sign, and a NaN stays a NaN).
"""

from __future__ import annotations

import numpy as np

from ..elementwise.activation import RELU_DEVICE
from ..numerics.cuda_prelude import elementwise_kernel

# y: the FLOAT32 sums; c: CTensor broadcast to them (FLOAT16); has_c 0 where none is given; relu 1 to apply RELU.
_FINISH = ("dml_gemm_finish", "float32 y, T c, float32 alpha, float32 beta, int32 has_c, int32 relu", "T z",
           "float r = y;"
           " if (alpha != 1.0f) r = r * alpha;"
           " if (has_c) { const float widened = (float)c; r = r + (beta == 1.0f ? widened : widened * beta); }"
           " if (relu) r = dml_relu_apply(r);"
           " z = (T)r")


def finish(cupy, sums, c, alpha: np.float32, beta: np.float32, relu: bool, dtype: np.dtype):
    """Alpha * sums + Beta * C rounded once to `dtype` (FLOAT16), RELU applied where `relu`; C broadcasts to the
    sums (None: no C)."""
    out = cupy.empty(sums.shape, dtype=dtype)
    kernel = elementwise_kernel(cupy, *_FINISH, preamble=RELU_DEVICE)
    given = c if c is not None else out  # no C: the output stands in, unread (has_c 0), where zeros cost a launch
    kernel(sums, given, np.float32(alpha), np.float32(beta), np.int32(c is not None), np.int32(relu), out)
    return out
