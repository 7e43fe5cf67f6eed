"""The matrix multiplication family: GEMM, MATRIX_MULTIPLY_INTEGER, MATRIX_MULTIPLY_INTEGER_TO_FLOAT and
QUANTIZED_LINEAR_MATRIX_MULTIPLY.

Sources: DirectML's pages (MicrosoftDocs/sdk-api, ns-directml-dml_gemm_operator_desc.md and the three others,
the stored versions with the newest support tables): fields, tensor constraints, support rows, and the
DML_OPERATOR_TYPE values of DirectML.h (microsoft/DirectX-Headers include/directx/DirectML.h, counted from
DML_OPERATOR_INVALID = 0: GEMM 54, MATRIX_MULTIPLY_INTEGER 117, QUANTIZED_LINEAR_MATRIX_MULTIPLY 118,
MATRIX_MULTIPLY_INTEGER_TO_FLOAT 170). Each kernel is one function for both backends (`xp` is numpy or cupy).

How the numbers are computed (issue 19):
- GEMM accumulates in FLOAT32 through the library's matmul (NumPy's BLAS sgemm on the CPU, CuPy's matmul =
  cuBLAS on the GPU, with TF32 off unless the call allows it: --allow-tf32, which the GPU backend applies around
  this kernel; see Operator.tf32_products). FLOAT16 inputs are widened
  exactly to FLOAT32, multiplied and added there, and rounded once to FLOAT16. Alpha and Beta * C are applied in
  FLOAT32 after the product. On the GPU a FLOAT16 GEMM with nothing after the product (Alpha 1, no C) is cuBLAS's
  half GEMM, whose compute type is FP32: the same one rounding, without widening. The summation order is the library's, so CPU and GPU agree within the tolerance
  (WebNN's gemm figure: 2K ULP, +1 for Alpha != 1, +1 for C, +1 for Beta != 1), not bit for bit.
- The integer operators accumulate the zero-point-shifted integers exactly (as float64, which holds every sum of
  8-bit products of fewer than 2^37 terms exactly, through BLAS), so CPU and GPU give the same bits.
  MATRIX_MULTIPLY_INTEGER's INT32 output wraps modulo 2^32; QUANTIZED_LINEAR_MATRIX_MULTIPLY scales the exact sum in
  float64 and rounds half to even once; MATRIX_MULTIPLY_INTEGER_TO_FLOAT scales it in float64 and rounds once to
  the output type.
"""

from __future__ import annotations

import numpy as np

from ...data_types import FLOAT32, FLOATS, INT8, INT16, INT32, UINT8, UINT16, UINT32
from ...feature_levels import level
from ...records import replace
from ..elementwise.activation import FUSED_ACTIVATION, fused_relu
from ..table.parameters import EnumParameter, FloatParameter
from ..table.schema import (COMPOSITE, DIMS_4, EXACT, ActivationApplied, InputBroadcast, Operator, SumBound, Tolerance,
                            rows)
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes
from ..numerics import products

FAMILY = "matrix multiplication"
DIMS_2_TO_4 = (2, 3, 4)
DIMS_1_TO_4 = (1, 2, 3, 4)
I8_U8 = (INT8, UINT8)
INTS_6 = (INT32, INT16, INT8, UINT32, UINT16, UINT8)

# ---------------------------------------------------------------- support tables (the pages, newest row first)

GEMM_TENSORS = ("ATensor", "BTensor", "CTensor", "OutputTensor")
_GEMM = rows(
    ("4_0", DIMS_2_TO_4, {name: FLOATS for name in GEMM_TENSORS}),
    ("1_0", DIMS_4, {name: FLOATS for name in GEMM_TENSORS}),
)

MMI_INPUTS = ("ATensor", "AZeroPointTensor", "BTensor", "BZeroPointTensor")
_MMI = rows(
    ("5_2", {"ATensor": (DIMS_2_TO_4, I8_U8), "AZeroPointTensor": (DIMS_1_TO_4, I8_U8),
             "BTensor": (DIMS_2_TO_4, I8_U8), "BZeroPointTensor": (DIMS_1_TO_4, I8_U8),
             "OutputTensor": (DIMS_2_TO_4, (INT32,))}),
    ("4_0", {"ATensor": (DIMS_2_TO_4, I8_U8), "AZeroPointTensor": (DIMS_1_TO_4, I8_U8),
             "BTensor": (DIMS_2_TO_4, I8_U8), "BZeroPointTensor": (DIMS_2_TO_4, I8_U8),
             "OutputTensor": (DIMS_2_TO_4, (INT32,))}),
    ("2_1", DIMS_4, {"ATensor": I8_U8, "AZeroPointTensor": I8_U8, "BTensor": I8_U8, "BZeroPointTensor": I8_U8,
                     "OutputTensor": (INT32,)}),
)

MMITF_INPUTS = ("ATensor", "AScaleTensor", "AZeroPointTensor", "BTensor", "BScaleTensor", "BZeroPointTensor",
                "BiasTensor")
_MMITF = rows(
    ("6_2", {"ATensor": (DIMS_2_TO_4, INTS_6), "AScaleTensor": (DIMS_1_TO_4, FLOATS),
             "AZeroPointTensor": (DIMS_1_TO_4, INTS_6), "BTensor": (DIMS_2_TO_4, INTS_6),
             "BScaleTensor": (DIMS_1_TO_4, FLOATS), "BZeroPointTensor": (DIMS_1_TO_4, INTS_6),
             "BiasTensor": (DIMS_2_TO_4, FLOATS), "OutputTensor": (DIMS_2_TO_4, FLOATS)}),
)

QLMM_INPUTS = ("ATensor", "AScaleTensor", "AZeroPointTensor", "BTensor", "BScaleTensor", "BZeroPointTensor",
               "OutputScaleTensor", "OutputZeroPointTensor")


def _qlmm_row(level_name: str, matrix_dims, scale_dims):
    kinds = {"ATensor": (matrix_dims, I8_U8), "BTensor": (matrix_dims, I8_U8), "OutputTensor": (matrix_dims, I8_U8)}
    for name in QLMM_INPUTS:
        if name not in kinds:
            kinds[name] = (scale_dims, (FLOAT32,) if "Scale" in name else I8_U8)
    return (level_name, kinds)


_QLMM = rows(_qlmm_row("4_0", DIMS_2_TO_4, DIMS_1_TO_4), _qlmm_row("2_1", DIMS_4, DIMS_4))

# ---------------------------------------------------------------- parameters

_TRANSFORMS = (("NONE", 0), ("TRANSPOSE", 1))
TRANS_A = EnumParameter(field="TransA", help="none or transpose: ATensor is [.., M, K], or [.., K, M] transposed",
                        enum_prefix="DML_MATRIX_TRANSFORM_", values=_TRANSFORMS, default_value="NONE")
TRANS_B = EnumParameter(field="TransB", help="none or transpose: BTensor is [.., K, N], or [.., N, K] transposed",
                        enum_prefix="DML_MATRIX_TRANSFORM_", values=_TRANSFORMS, default_value="NONE")
ALPHA = FloatParameter(field="Alpha", help="the multiplier of A x B (default 1)", default_value=1.0)
BETA = FloatParameter(field="Beta", help="the multiplier of CTensor (default 1; ignored without CTensor)",
                      default_value=1.0)
# ADD1's parameter (the same fusable activations, options and kernels' arguments), with GEMM's words.
GEMM_FUSED_ACTIVATION = replace(
    FUSED_ACTIVATION, help="an activation applied to the GEMM's result (--fused-activation NAME), with its FLOAT "
                           "fields as --fused-alpha, --fused-beta, ... (each the activation's own default when left out)")

# ---------------------------------------------------------------- shape rules


def _matrix(query: ShapeQuery, name: str, transposed: bool = False) -> tuple[tuple[int, ...], int, int]:
    """A matrix tensor's batch Sizes and its (rows, columns) as the product sees them (after a transpose)."""
    shape = query.shape(name)
    if len(shape) < 2:
        raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} have {len(shape)} dimension(s); a matrix "
                            "needs at least 2 ({.., rows, columns})")
    rows_, columns = shape[-2], shape[-1]
    return shape[:-2], (columns if transposed else rows_), (rows_ if transposed else columns)


def _product_shape(query: ShapeQuery, trans_a: bool = False, trans_b: bool = False) -> tuple[int, ...]:
    """Output Sizes {batch.., M, N} of A x B: same DimensionCount, equal batch Sizes, A's K equal to B's."""
    a_batch, m, k = _matrix(query, "ATensor", trans_a)
    b_batch, k_b, n = _matrix(query, "BTensor", trans_b)
    a_shape, b_shape = query.shape("ATensor"), query.shape("BTensor")
    if len(a_shape) != len(b_shape):
        raise RuleViolation(f"ATensor has {len(a_shape)} dimensions and BTensor {len(b_shape)}; ATensor, BTensor "
                            f"and OutputTensor must have the same DimensionCount{_BROADCAST_HINT}")
    if k != k_b:
        raise RuleViolation(f"ATensor's K is {k} (Sizes {describe_sizes(a_shape)}"
                            f"{', transposed' if trans_a else ''}) but BTensor's K is {k_b} (Sizes "
                            f"{describe_sizes(b_shape)}{', transposed' if trans_b else ''}); they must be equal")
    if a_batch != b_batch:
        raise RuleViolation(f"ATensor's batch Sizes {describe_sizes(a_batch)} and BTensor's "
                            f"{describe_sizes(b_batch)} differ; {{BatchCount, ChannelCount}} must be "
                            f"equal{_BROADCAST_HINT}")
    return a_batch + (m, n)


# Where a call's Sizes would broadcast as ONNX's MatMul and Gemm broadcast them (DirectML's zero strides).
_BROADCAST_HINT = " (ONNX's MatMul broadcasts them, as --broadcast does: broadcast=True in the API)"


def matrix_broadcast(to_output: tuple[str, ...] = ()):
    """The rule of the matrix products' --broadcast (InputBroadcast): ATensor's and BTensor's batch Sizes broadcast
    together by NumPy's rules, the lower DimensionCount gaining leading 1s (ONNX's MatMul, MatMulInteger,
    QLinearMatMul); the tensors of `to_output` (GEMM's CTensor, a bias) broadcast one way to the output's Sizes
    (ONNX's Gemm C). DirectML reads each at those Sizes with zero Strides, as ONNX Runtime's DirectML provider
    writes them (DmlOperatorMatMulInteger: MatMulShapeMapping, then descs "with broadcasting")."""
    def rule(shapes: dict, parameters) -> dict:
        a, b = shapes["ATensor"], shapes["BTensor"]
        if len(a) < 2 or len(b) < 2:
            return shapes  # not matrices: the shape rule says so
        try:
            batch = tuple(np.broadcast_shapes(a[:-2], b[:-2]))
        except ValueError:
            raise RuleViolation(f"ATensor's batch Sizes {describe_sizes(a[:-2])} and BTensor's "
                                f"{describe_sizes(b[:-2])} do not broadcast together by NumPy's rules") from None
        found = {**shapes, "ATensor": batch + tuple(a[-2:]), "BTensor": batch + tuple(b[-2:])}
        m = a[-1] if parameters.get("TransA") == "TRANSPOSE" else a[-2]
        n = b[-2] if parameters.get("TransB") == "TRANSPOSE" else b[-1]
        out = batch + (m, n)
        for name in to_output:
            if name in shapes:
                given = tuple(shapes[name])
                if len(given) > len(out) or any(size not in (1, wanted) for size, wanted in zip(given[::-1],
                                                                                                  out[::-1])):
                    raise RuleViolation(f"{name} Sizes {describe_sizes(given)} do not broadcast to the output's "
                                        f"{describe_sizes(out)} (each size, from the last, 1 or the output's)")
                found[name] = out
        return found
    return rule


_BATCHES = "ATensor's and BTensor's batch Sizes broadcast together by NumPy's rules (the lower DimensionCount " \
           "gaining leading 1s), as ONNX's MatMul"
GEMM_BROADCAST = InputBroadcast(matrix_broadcast(("CTensor",)), f"{_BATCHES}; CTensor broadcasts to the output's "
                                "Sizes, as ONNX's Gemm C ([N], [M, 1], [1]): DirectML's zero Strides")
MATRIX_BROADCAST = InputBroadcast(matrix_broadcast(), f"{_BATCHES}: DirectML's zero Strides")
MMITF_BROADCAST = InputBroadcast(matrix_broadcast(("BiasTensor",)), f"{_BATCHES}; BiasTensor broadcasts to the "
                                 "output's Sizes (ONNX's [N] bias): DirectML's zero Strides")


def gemm_shape(query: ShapeQuery) -> dict:
    out = _product_shape(query, query.parameters["TransA"] == "TRANSPOSE",
                         query.parameters["TransB"] == "TRANSPOSE")
    c = query.shapes.get("CTensor")
    if c is not None:
        broadcastable = len(c) == len(out) and all(cs in (1, os_) for cs, os_ in zip(c, out))
        if not broadcastable:
            raise RuleViolation(f"CTensor Sizes {describe_sizes(c)} do not broadcast to the output's "
                                f"{describe_sizes(out)} (same DimensionCount; each size equal or 1)"
                                f"{_onnx_broadcast(c, out)}")
    return {"OutputTensor": out}


def _onnx_broadcast(given, out) -> str:
    """Where `given` broadcasts to `out` one way by NumPy's rules (ONNX's Gemm C of [N], a bias of [N]): how."""
    if len(given) <= len(out) and all(size in (1, wanted) for size, wanted in zip(given[::-1], out[::-1])):
        return f"; ONNX's {describe_sizes(given)} broadcasts to it with --broadcast (broadcast=True in the API)"
    return ""


def _same_types(query: ShapeQuery, groups) -> None:
    """DataType ties beyond the one group `same_data_type` holds (each pair among the tensors the call gives)."""
    for names in groups:
        given = [name for name in names if name in query.data_types]
        for name in given[1:]:
            if query.data_types[name] != query.data_types[given[0]]:
                raise RuleViolation(f"{given[0]} data type {query.data_types[given[0]].name} and {name} data type "
                                    f"{query.data_types[name].name} differ; {' and '.join(names)} must have the "
                                    "same DataType")


def _per_row(query: ShapeQuery, name: str, m: int) -> None:
    """{1, 1, 1, 1} (per tensor) or {1, 1, M, 1} (per row), with fewer dimensions from 4_0 ({[1], [1], M, [1]}):
    a 1-D tensor holds 1 or M values, a longer one has sizes 1 except a next-to-last size of 1 or M."""
    shape = query.shapes.get(name)
    if shape is None:
        return
    if len(shape) == 1:
        fits = shape[0] in (1, m)
    else:
        fits = shape[-1] == 1 and shape[-2] in (1, m) and all(size == 1 for size in shape[:-2])
    if not fits:
        raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} are neither per tensor ({{1, 1, 1, 1}}) nor per "
                            f"row ({{1, 1, M, 1}}, M = {m}; a 1-D tensor: {{1}} or {{M}})")


def _per_column(query: ShapeQuery, name: str, n: int) -> None:
    """{1, 1, 1, 1} (per tensor) or {1, 1, 1, N} (per column), leading 1s optional from 4_0."""
    shape = query.shapes.get(name)
    if shape is None:
        return
    if not (shape[-1] in (1, n) and all(size == 1 for size in shape[:-1])):
        raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} are neither per tensor ({{1, 1, 1, 1}}) nor per "
                            f"column ({{1, 1, 1, N}}, N = {n})")


def _same_rank(query: ShapeQuery, names) -> None:
    given = [name for name in names if name in query.shapes]
    for name in given[1:]:
        if len(query.shape(name)) != len(query.shape(given[0])):
            raise RuleViolation(f"{given[0]} has {len(query.shape(given[0]))} dimensions and {name} "
                                f"{len(query.shape(name))}; {', '.join(names)} must have the same DimensionCount")


def mmi_shape(query: ShapeQuery) -> dict:
    _same_types(query, (("ATensor", "AZeroPointTensor"), ("BTensor", "BZeroPointTensor")))
    out = _product_shape(query)
    _per_row(query, "AZeroPointTensor", out[-2])
    _per_column(query, "BZeroPointTensor", out[-1])
    return {"OutputTensor": out}


def mmitf_shape(query: ShapeQuery) -> dict:
    _same_types(query, (("ATensor", "AZeroPointTensor", "BTensor", "BZeroPointTensor"),))
    _same_rank(query, ("AScaleTensor", "AZeroPointTensor", "BScaleTensor", "BZeroPointTensor"))
    out = _product_shape(query)
    for name in ("AScaleTensor", "AZeroPointTensor"):
        _per_row(query, name, out[-2])
    for name in ("BScaleTensor", "BZeroPointTensor"):
        _per_column(query, name, out[-1])
    bias = query.shapes.get("BiasTensor")
    if bias is not None and tuple(bias) != out:
        raise RuleViolation(f"BiasTensor Sizes {describe_sizes(bias)} differ from the output's {describe_sizes(out)}; "
                            f"BiasTensor and OutputTensor must have the same Sizes{_onnx_broadcast(bias, out)}")
    return {"OutputTensor": out}


def qlmm_shape(query: ShapeQuery) -> dict:
    _same_types(query, (("ATensor", "AZeroPointTensor"), ("BTensor", "BZeroPointTensor")))
    _same_rank(query, ("AScaleTensor", "AZeroPointTensor", "BScaleTensor", "BZeroPointTensor", "OutputScaleTensor",
                       "OutputZeroPointTensor"))
    out = _product_shape(query)
    for name in ("AScaleTensor", "AZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"):
        _per_row(query, name, out[-2])
    for name in ("BScaleTensor", "BZeroPointTensor"):
        _per_column(query, name, out[-1])
    return {"OutputTensor": out}


# ---------------------------------------------------------------- how the tolerances grow

def _inner_length(call) -> int:
    """K: the length of each dot product."""
    shape = call.tensors["ATensor"].shape
    return shape[-2] if call.parameters.get("TransA") == "TRANSPOSE" else shape[-1]


def gemm_tolerance_scale(call) -> int:
    """WebNN's gemm figure (webnn/conformance_tests/gemm.https.any.js): 2K ULP for the dot product of K terms
    (a multiply and an add each), +1 for Alpha != 1, and with C: +1 for the addition, +1 for Beta != 1."""
    figure = 2 * _inner_length(call)
    if call.parameters.get("Alpha", 1.0) != 1.0:
        figure += 1
    if "CTensor" not in call.absent and "CTensor" in call.tensors:
        figure += 1 + (call.parameters.get("Beta", 1.0) != 1.0)
    return max(figure, 1)


def mmitf_tolerance_scale(call) -> int:
    """WebNN's matmul figure (2K ULP) for a device that dequantizes and multiplies in float, +1 for the scales'
    product, +1 for the bias."""
    return 2 * _inner_length(call) + 2


def gemm_terms(call) -> int:
    """K of GEMM's sum bound: the products of each dot product, + 1 for CTensor."""
    with_c = "CTensor" not in call.absent and "CTensor" in call.tensors
    return _inner_length(call) + with_c


def mmitf_terms(call) -> int:
    """K of MATRIX_MULTIPLY_INTEGER_TO_FLOAT's sum bound: the products of each dot product, + 1 for BiasTensor."""
    with_bias = "BiasTensor" not in call.absent and "BiasTensor" in call.tensors
    return _inner_length(call) + with_bias


def _absolute_scalars(params):
    """GEMM's parameters for its magnitude run: |Alpha| and |Beta|."""
    return {**params, "Alpha": abs(params["Alpha"]), "Beta": abs(params["Beta"])}


GEMM_SUM_BOUND = SumBound(
    gemm_terms, "the length of each dot product (ATensor's last dimension, its next-to-last with TransA), + 1 with "
                "CTensor",
    "GEMM itself run on |A|, |B| and |C| with |Alpha| and |Beta| (no activation) in float64: |Alpha| x |A| x |B| + "
    "|Beta| x |C|", absolute=("ATensor", "BTensor", "CTensor"), parameters=_absolute_scalars)


def mmitf_magnitude(xp, inputs, outputs, params):
    """M of MATRIX_MULTIPLY_INTEGER_TO_FLOAT: the operator's product of the magnitudes, |A - AZeroPoint| x |AScale|
    times |B - BZeroPoint| x |BScale|, + |Bias| (what a device that dequantizes and multiplies in float sums)."""
    a, a_scale, a_zero_point, b, b_scale, b_zero_point, bias = inputs
    shifted_a = xp.abs(_shifted(xp, a, a_zero_point, True))
    shifted_b = xp.abs(_shifted(xp, b, b_zero_point, False))
    absolute = [shifted_a, xp.abs(a_scale), None, shifted_b, xp.abs(b_scale), None,
                None if bias is None else xp.abs(bias)]
    return mmitf_kernel(xp, absolute, outputs, params)[0]


MMITF_SUM_BOUND = SumBound(
    mmitf_terms, "the length of each dot product, + 1 with BiasTensor",
    "the operator run on |A - AZeroPoint|, |AScale|, |B - BZeroPoint|, |BScale| and |Bias| in float64 (the sum a "
    "device that dequantizes and multiplies in float rounds)", magnitude=mmitf_magnitude)


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)

def _widened(xp, x):
    """FLOAT16 widened exactly to FLOAT32 (the accumulation type); FLOAT32 as it is."""
    return x.astype(xp.float32) if x.dtype == xp.float16 else x


def _half_product_rounds_once(xp, a, c, params) -> bool:
    """Whether CuPy's own FLOAT16 matmul gives GEMM's result: cuBLAS multiplies FLOAT16 with an FP32 compute type
    (CUBLAS_COMPUTE_32F, tensor cores accumulating in FP32) and rounds the FP32 sum once to FLOAT16, which is
    GEMM's result exactly when nothing is applied after the product (Alpha 1, no CTensor). NumPy has no FLOAT16
    BLAS, and a product Alpha or C still changes must stay FLOAT32 until the end: NumPy widens the operands, CuPy
    takes cuBLAS's FLOAT32 sums of the FLOAT16 operands (the same sums of exact products; widened operands ran
    FLOAT32's GEMM without tensor cores, 15x the time at 4096^3 on the H200)."""
    return xp is not np and a.dtype == xp.float16 and c is None and np.float32(params["Alpha"]) == 1


def _takes_half_sums(xp, a, c, params) -> bool:
    """Whether the product is taken as cuBLAS's FLOAT32 sums of FLOAT16 operands, unrounded, for Alpha and C to be
    applied before the one rounding (tensor cores, no widened copies): FLOAT16 on the GPU, where the product alone
    is not GEMM's result."""
    return xp is not np and a.dtype == xp.float16 and not _half_product_rounds_once(xp, a, c, params)


def _transposed(xp, a, b, params):
    """TransA(A) and TransB(B): views with the last two axes swapped where the call says TRANSPOSE."""
    if params["TransA"] == "TRANSPOSE":
        a = xp.swapaxes(a, -1, -2)
    if params["TransB"] == "TRANSPOSE":
        b = xp.swapaxes(b, -1, -2)
    return a, b


def _shared_matrix(a, b):
    """B's one matrix where every batch of A is multiplied by it (B's batch Sizes 1, or A's with zero Strides: ONNX's
    MatMul of a batch by a weight, broadcast by the adapter), else None."""
    if b.ndim <= 2 or a.ndim != b.ndim:
        return None
    for size, stride, a_size in zip(b.shape[:-2], b.strides[:-2], a.shape[:-2]):
        if size != 1 and (stride != 0 or size != a_size):
            return None
    return b[(0,) * (b.ndim - 2)]


def _product(xp, a, b, out_dtype=None):
    """A x B, batch by batch. On NumPy, a batch of A by one shared B is one product of A's rows stacked ({batch x
    M, K} x {K, N}): NumPy's matmul calls BLAS once per batch, each call a thin product (a Transformer's {16, 1,
    128} x {128, 384}: 16 calls of one row, 2.2x the time of one call of 16 rows). Each element is still one dot
    product of K terms summed in FLOAT32, in BLAS's order for the stacked shape: within GEMM's sum bound. CuPy
    batches on the device itself (cuBLAS's strided batched GEMM: numerics/products.py) and keeps its shape.
    `out_dtype` float32 with FLOAT16 operands (CuPy): the FLOAT32 sums, unrounded (products.matmul)."""
    shared = _shared_matrix(a, b) if xp is np else None
    if shared is None:
        return products.matmul(xp, a, b, out_dtype)
    rows = a.reshape(-1, a.shape[-1])  # a view where A's batch is C-ordered (the adapter's reshapes keep it so)
    return products.matmul(xp, rows, shared).reshape(a.shape[:-1] + shared.shape[-1:])


def gemm_product(xp, inputs, outputs, params, finish_on_gpu=None):
    """Alpha * TransA(A) x TransB(B) + Beta * C in FLOAT32, rounded once to the output type (no activation).
    `finish_on_gpu(sums, c, alpha, beta)`, where given, finishes FLOAT16 operands' FLOAT32 sums on the GPU."""
    a, b, c = inputs
    half_sums = None  # FLOAT16 operands on the GPU: cuBLAS's FLOAT32 sums, unrounded (tensor cores, no widened copies)
    if _takes_half_sums(xp, a, c, params):
        half_sums = np.float32
    elif not _half_product_rounds_once(xp, a, c, params):
        a, b = _widened(xp, a), _widened(xp, b)
    a, b = _transposed(xp, a, b, params)
    with np.errstate(all="ignore"):  # overflow to inf and 0 * inf = NaN are the IEEE results
        # FLOAT32 BLAS / cuBLAS sgemm (TF32 where the backend allows it), the half GEMM, or its FLOAT32 sums
        result = _product(xp, a, b, half_sums)
        if half_sums is not None and finish_on_gpu is not None:  # one pass on the device (matmul/gpu.py)
            return finish_on_gpu(result, c, np.float32(params["Alpha"]), np.float32(params["Beta"]))
        c = None if c is None else _widened(xp, c)
        result = _scaled_plus(result, c, np.float32(params["Alpha"]), np.float32(params["Beta"]))
    dtype = np.dtype(outputs[0].data_type.numpy_dtype)
    return result.astype(dtype, copy=False)


def _scaled_plus(result, c, alpha, beta):
    """Alpha * result + Beta * C into the FLOAT32 product `result` (its own array), in GEMM's order of operations;
    Beta * C even for Beta = 0 (IEEE's 0 * inf = NaN, as ONNX's reference gives), nothing added without C."""
    if alpha != 1:
        result *= alpha
    if c is not None:
        result += c if beta == 1 else c * beta
    return result


def gemm_planned(inputs, outputs, params, constant_inputs: frozenset[int] = frozenset()):
    """GEMM's CPU call worked out once for FLOAT32 tensors (Operator.planned_kernel: a model's node made again on
    inputs of the same types, Sizes and Strides): gemm_product's steps for that case alone, with the same operations
    in the same order, so the same bits. What it asks of the call on every call is answered here once: the types,
    Alpha's and Beta's conversions, which operands TransA and TransB swap, whether B is one matrix shared by A's
    batch (_shared_matrix reads B's Sizes and Strides, the same on every call), whether Alpha and Beta scale. It
    costs a model's GEMM node several us less a call (gemm_product asks a dozen questions of the types and enters an
    errstate that the model's run holds already). None for FLOAT16 (widened on every call)."""
    float32 = np.dtype(np.float32)
    if any(x is not None and x.dtype != float32 for x in inputs) or outputs[0].data_type.numpy_dtype != float32:
        return None
    alpha, beta = np.float32(params["Alpha"]), np.float32(params["Beta"])
    swap_a, swap_b = params["TransA"] == "TRANSPOSE", params["TransB"] == "TRANSPOSE"
    a, b = _transposed(np, inputs[0], inputs[1], params)
    # B's one matrix where A's batch shares it: its index, and the Sizes the product of A's rows takes back
    shared = None if _shared_matrix(a, b) is None else (0,) * (b.ndim - 2)
    product_shape = a.shape[:-1] + b.shape[-1:]
    scaled, plain_c = alpha != 1, beta == 1
    matmul = np.matmul

    def run(arrays):
        a, b, c = arrays
        if swap_a:
            a = a.swapaxes(-1, -2)
        if swap_b:
            b = b.swapaxes(-1, -2)
        if shared is None:
            result = matmul(a, b)
        else:  # _product's one product of A's rows stacked
            result = matmul(a.reshape(-1, a.shape[-1]), b[shared]).reshape(product_shape)
        if scaled:  # _scaled_plus's steps
            result *= alpha
        if c is not None:
            result += c if plain_c else c * beta
        return (result,)

    return run


def gemm_kernel(xp, inputs, outputs, params):
    """The product on NumPy (BLAS) or CuPy (cuBLAS); a fused activation runs after it, in the backend
    (Operator.fused_activation), as that activation's own kernel on the result rounded to the output type."""
    return (gemm_product(xp, inputs, outputs, params),)


def gemm_gpu_kernel(xp, inputs, outputs, params):
    """The same on CuPy. FLOAT16 operands whose product Alpha or C changes: Alpha and Beta * C in cuBLAS's own
    epilogue where it is IEEE's (_half_epilogue), one FLOAT32 result rounded once, as DirectML gives it; else
    cuBLAS's FLOAT32 sums finished in one pass (matmul/gpu.py), a fused RELU in it (the backend then applies no
    activation again)."""
    from . import gpu  # the GPU path only

    epilogue = _half_epilogue(xp, inputs, outputs, params)
    if epilogue is not None:
        return (epilogue,)
    relu = fused_relu(params)
    dtype = np.dtype(outputs[0].data_type.numpy_dtype)

    def finish_on_gpu(sums, c, alpha, beta):
        return gpu.finish(xp, sums, c, alpha, beta, relu, dtype)

    result = gemm_product(xp, inputs, outputs, params, finish_on_gpu)
    finished = _takes_half_sums(xp, inputs[0], inputs[2], params)  # the finish pass ran, with the RELU in it
    return ActivationApplied((result,)) if finished and relu else (result,)


def _half_epilogue(cupy, inputs, outputs, params):
    """Alpha * A x B + Beta * C for FLOAT16 operands with Alpha or C, in one cuBLAS call (products.accumulate: C
    written into the output first, then FP32 sums, Alpha and Beta * C in FP32 and one rounding to FLOAT16); None where
    that is not IEEE's result or cuBLAS does not take the call. cuBLAS reads no C with Beta 0 and no product with
    Alpha 0, where IEEE's 0 * inf is NaN: those take the FLOAT32 sums and the finish pass. The FLOAT32 sums written
    out and read back took 0.33 ms for a 4096^3 product with a bias against 0.22 for PyTorch's addmm on the H200."""
    a, b, c = inputs
    alpha, beta = np.float32(params["Alpha"]), np.float32(params["Beta"])
    if not _takes_half_sums(cupy, a, c, params) or alpha == 0:
        return None
    if c is not None and beta == 0:
        return None
    a, b = _transposed(cupy, a, b, params)
    shape = tuple(outputs[0].shape)
    out = cupy.empty(shape, dtype=a.dtype) if c is None else _spread(cupy, c, shape)
    added = float(beta) if c is not None else 0.0  # no C: cuBLAS reads nothing from the fresh output
    return out if products.accumulate(cupy, a, b, float(alpha), added, out) else None


def _spread(cupy, c, shape: tuple[int, ...]):
    """A fresh C-ordered copy of C broadcast to `shape`, written 16 bytes a thread by movement's strided copy (CuPy's
    copy of the broadcast view took 0.08 ms for a {1, 4096} bias to {4096, 4096} FLOAT16 on the H200)."""
    from ..movement.gpu import strided_copy

    spread = strided_copy(cupy, cupy.broadcast_to(c, shape))
    return spread.copy() if spread.data.ptr == c.data.ptr else spread  # C itself where it was that array already


def _shifted(xp, x, zero_point, per_row: bool):
    """x - zero_point as float64 (exact for every integer type up to 32 bits); the zero point per tensor,
    per row (a column vector) or per column (a row vector)."""
    value = x.astype(xp.float64)
    if zero_point is not None:
        value -= _broadcastable(zero_point, per_row).astype(xp.float64)
    return value


def _broadcastable(values, per_row: bool):
    """A per-tensor, per-row or per-column tensor as an [M, 1] or [1, N] matrix broadcasting against {.., M, N}."""
    flat = values.reshape(-1)
    return flat.reshape(-1, 1) if per_row else flat.reshape(1, -1)


def _exact_product(xp, a, a_zero_point, b, b_zero_point):
    """The zero-point-shifted integer product, each sum exact: float64 holds any sum of fewer than 2^37
    products of 8-bit differences (|d| <= 255) exactly, and BLAS multiplies float64 in any order."""
    return products.matmul(xp, _shifted(xp, a, a_zero_point, True), _shifted(xp, b, b_zero_point, False))


def mmi_kernel(xp, inputs, outputs, params):
    a, a_zero_point, b, b_zero_point = inputs
    total = _exact_product(xp, a, a_zero_point, b, b_zero_point)
    return (total.astype(xp.int64).astype(xp.int32),)  # INT32 wraps modulo 2^32 (only past ~33000 terms)


def mmitf_kernel(xp, inputs, outputs, params):
    a, a_scale, a_zero_point, b, b_scale, b_zero_point, bias = inputs
    total = _exact_product(xp, a, a_zero_point, b, b_zero_point)
    # The product of two FLOAT32 (or FLOAT16) scales is exact in float64; the scaled sum rounds once there.
    scale = _broadcastable(a_scale, True).astype(xp.float64) * _broadcastable(b_scale, False).astype(xp.float64)
    with np.errstate(all="ignore"):
        total *= scale
        if bias is not None:
            total += bias.astype(xp.float64)
    return (total.astype(np.dtype(outputs[0].data_type.numpy_dtype)),)


def qlmm_kernel(xp, inputs, outputs, params):
    a, a_scale, a_zero_point, b, b_scale, b_zero_point, out_scale, out_zero_point = inputs
    dtype = np.dtype(outputs[0].data_type.numpy_dtype)
    info = np.iinfo(dtype)
    total = _exact_product(xp, a, a_zero_point, b, b_zero_point)
    scale = _broadcastable(a_scale, True).astype(xp.float64) * _broadcastable(b_scale, False).astype(xp.float64)
    with np.errstate(all="ignore"):
        total *= scale
        total /= _broadcastable(out_scale, True).astype(xp.float64)
        total = xp.rint(total)  # halves to even
        if out_zero_point is not None:
            total += _broadcastable(out_zero_point, True).astype(xp.float64)
        total = xp.where(xp.isnan(total), info.min, xp.clip(total, info.min, info.max))
    return (total.astype(dtype),)


# ---------------------------------------------------------------- entries

_BATCH_NOTE = ("ATensor and BTensor have the same DimensionCount and the same batch Sizes ({BatchCount, "
               "ChannelCount}, as the page's example: BatchCount * ChannelCount independent products); a batch "
               "broadcast is a desc with zero Strides, which a DxDispatch model may give (dmlcli reads the strided "
               "tensor at its full Sizes); on the command line and in the API, --broadcast (broadcast=True) "
               "broadcasts the batch Sizes by NumPy's rules, as ONNX's MatMul (ONNX Runtime's DirectML provider "
               "writes those zero Strides: DmlOperatorMatMulInteger, MatMulShapeMapping).")
_ALL_OR_REQUIRED = ("A call through the API or the command line gives every input or only the required ones (they "
                    "are read by position); a DxDispatch desc may leave out any of the _Maybenull_ tensors (null or "
                    "absent), since it names them.")

GEMM = Operator(
    name="GEMM", enum_value=54, family=FAMILY, prefix="",
    summary="general matrix multiplication: FusedActivation(Alpha * TransA(A) x TransB(B) + Beta * C)",
    formula="Output = FusedActivation(Alpha * TransA(A) x TransB(B) + Beta * C)   (C: 0 when left out)",
    introduced=level("1_0"), inputs=("ATensor", "BTensor", "CTensor"), support=_GEMM, same_data_type=GEMM_TENSORS,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(TRANS_A, TRANS_B, ALPHA, BETA, GEMM_FUSED_ACTIVATION),
    optional_inputs=(("CTensor", "ATensor"),), optional_since=level("1_0"),
    shape_rule=gemm_shape, array_kernel=gemm_kernel, gpu_array_kernel=gemm_gpu_kernel, planned_kernel=gemm_planned,
    fused_activation="FusedActivation", input_broadcast=GEMM_BROADCAST,
    exactness=COMPOSITE, tf32_products=True,
    tolerance=Tolerance(
        "ulp", 1, 1,
        "WebNN's gemm tolerance (web-platform-tests webnn/conformance_tests/gemm.https.any.js), which grows with "
        "the K terms of each dot product: 2K ULP, +1 where Alpha != 1, +1 with CTensor, +1 more where Beta != 1",
        floor_float32=2.0 ** -20, floor_float16=2.0 ** -10,
        floor_source="a result that cancels (terms of about 1 summing near 0) carries the rounding error of its "
                     "partial sums, about K ULP of 1 rather than of the result: BLAS and cuBLAS add in different "
                     "orders (the H100 gave 33 ULP, 1.2e-7 absolute, on ONNX's matmul_2d); 2^-20 (FLOAT16 2^-10) "
                     "covers data of about unit scale, dmlcli's choice"),
    tolerance_scale=gemm_tolerance_scale, sum_bound=GEMM_SUM_BOUND,
    notes=(
        "FLOAT32 accumulates in FLOAT32 through NumPy's BLAS (CPU) or CuPy's matmul = cuBLAS (GPU); FLOAT16 inputs "
        "are widened exactly to FLOAT32, computed there and rounded once to FLOAT16. Alpha and Beta * C are "
        "applied in FLOAT32 after the product. TF32 is used only where the call allows it: --allow-tf32 "
        "(allow_tf32=True; DxDispatch's executionFlags DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION) lets "
        "a FLOAT32 GEMM on the GPU multiply on TF32 tensor cores (inputs kept to 10 mantissa bits, sums in "
        "FLOAT32), and its result is then checked within 2^13 times the tolerance; the CPU's result is the "
        "FLOAT32 one either way. On the GPU, "
        "FLOAT16 with Alpha 1 and no CTensor runs cuBLAS's half GEMM with its FP32 compute type (tensor cores "
        "accumulating in FP32, one rounding to FLOAT16: the same result at tensor-core speed); with Alpha "
        "or CTensor, A and B are widened to FLOAT32 first, so that Alpha and Beta * C apply before the one "
        "rounding.",
        "CPU and GPU agree within the tolerance, not bit for bit: BLAS and cuBLAS add the K products in different "
        "orders. The tolerance is in ULP of the result, with the output type's smallest normal as an absolute "
        "floor; a result that cancels (signed inputs) can be many ULP of itself off while within K eps * "
        "sum |a||b|.",
        "CTensor: the page asks for the output's Sizes (DirectML broadcasts it with zero Strides, as ONNX's "
        "unidirectional broadcast); dmlcli's API and command line also take a CTensor of the same DimensionCount "
        "whose sizes are each the output's or 1, and broadcast it; with --broadcast (broadcast=True) also one of "
        "fewer dimensions, as ONNX's Gemm C ([N], [M, 1]). Beta * C is computed even for Beta = 0 (IEEE: "
        "0 * inf = NaN, as ONNX's reference); without CTensor, Beta is ignored.",
        "FusedActivation: as ELEMENT_WISE_ADD1's (--fused-activation elu --fused-alpha 0.5; in a DxDispatch model "
        "\"FusedActivation\": {\"Type\": \"ACTIVATION_ELU\", \"Alpha\": 0.5}); it runs on the result rounded to the "
        "output type, exactly as that activation operator would, and its tolerance then applies (scaled as GEMM's).",
        _BATCH_NOTE,
        "NaN and inf propagate as IEEE arithmetic gives them (BLAS may give NaN where an exact 0 * inf would "
        "appear only in a partial sum).",
    ),
)

MATRIX_MULTIPLY_INTEGER = Operator(
    name="MATRIX_MULTIPLY_INTEGER", enum_value=117, family=FAMILY, prefix="",
    summary="integer matrix product of zero-point-shifted 8-bit tensors into INT32",
    formula="Output = (A - AZeroPoint) x (B - BZeroPoint)   (zero points: 0 when left out)",
    introduced=level("2_1"), inputs=MMI_INPUTS, support=_MMI, same_data_type=(), same_sizes=(),
    cpu_kernel=None, cuda_body="", optional_inputs=(("AZeroPointTensor", "ATensor"), ("BZeroPointTensor", "BTensor")),
    optional_since=level("2_1"), shape_rule=mmi_shape, array_kernel=mmi_kernel, exactness=EXACT,
    input_broadcast=MATRIX_BROADCAST,
    notes=(
        "Exact: every sum is computed exactly (as float64 through BLAS, exact below 2^37 terms) and written as "
        "INT32, wrapping modulo 2^32 where it exceeds INT32 (only past about 33000 terms of 8-bit products; the "
        "page is silent). CPU and GPU are bit-identical.",
        "AZeroPointTensor is per tensor ({1, 1, 1, 1}) or per row ({1, 1, M, 1}); BZeroPointTensor per tensor or "
        "per column ({1, 1, 1, N}); from 4_0 the leading 1s may be left out (a 1-D AZeroPointTensor holds 1 or M "
        "values, a 1-D BZeroPointTensor 1 or N). ATensor and AZeroPointTensor, BTensor and BZeroPointTensor share "
        "a DataType.",
        _BATCH_NOTE, _ALL_OR_REQUIRED,
    ),
)

MATRIX_MULTIPLY_INTEGER_TO_FLOAT = Operator(
    name="MATRIX_MULTIPLY_INTEGER_TO_FLOAT", enum_value=170, family=FAMILY, prefix="",
    summary="integer matrix product scaled to float: (A - AZP) x (B - BZP) * AScale * BScale + Bias",
    formula="Output = ((A - AZeroPoint) * AScale) x ((B - BZeroPoint) * BScale) + Bias",
    introduced=level("6_2"), inputs=MMITF_INPUTS, support=_MMITF,
    same_data_type=("AScaleTensor", "BScaleTensor", "BiasTensor", "OutputTensor"), same_sizes=(),
    cpu_kernel=None, cuda_body="",
    optional_inputs=(("AZeroPointTensor", "ATensor"), ("BZeroPointTensor", "BTensor"), ("BiasTensor", "OutputTensor")),
    optional_since=level("6_2"), shape_rule=mmitf_shape, array_kernel=mmitf_kernel, exactness=COMPOSITE,
    input_broadcast=MMITF_BROADCAST,
    tolerance=Tolerance(
        "ulp", 1, 1,
        "dmlcli's choice after WebNN's matmul figure (webnn/conformance_tests/matmul.https.any.js: 2K ULP for K "
        "terms), for a device that dequantizes and multiplies in float, +1 for the scales, +1 for the bias"),
    tolerance_scale=mmitf_tolerance_scale, sum_bound=MMITF_SUM_BOUND,
    notes=(
        "Since AScale is per tensor or per row and BScale per tensor or per column, the product factors: dmlcli "
        "computes the integer sum exactly (float64; exact for 8- and 16-bit inputs; 32-bit inputs exact while "
        "each sum stays below 2^53), multiplies it by AScale * BScale (exact in float64), adds the bias in "
        "float64 and rounds once to the output type. CPU and GPU are bit-identical for 8- and 16-bit inputs.",
        "Zero points and scales: AScale and AZeroPoint per tensor or per row ({1, 1, M, 1}, or 1 or M values in "
        "1-D), BScale and BZeroPoint per tensor or per column ({1, 1, 1, N}); ATensor, AZeroPointTensor, BTensor "
        "and BZeroPointTensor share a DataType; the scales, the bias and the output share another.",
        _BATCH_NOTE, _ALL_OR_REQUIRED + " To give a bias without zero points, give zero points of 0.",
    ),
)

QUANTIZED_LINEAR_MATRIX_MULTIPLY = Operator(
    name="QUANTIZED_LINEAR_MATRIX_MULTIPLY", enum_value=118, family=FAMILY, prefix="",
    summary="quantized matrix product: dequantize A and B, multiply, requantize with the output's scale",
    formula="Output = clamp(round(((A - AZP) x (B - BZP)) * AScale * BScale / OutputScale) + OutputZP, Min, Max)",
    introduced=level("2_1"), inputs=QLMM_INPUTS, support=_QLMM,
    same_data_type=("OutputZeroPointTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    default_output_type=UINT8,
    optional_inputs=(("AZeroPointTensor", "ATensor"), ("BZeroPointTensor", "BTensor"),
                     ("OutputZeroPointTensor", "OutputTensor")),
    optional_since=level("2_1"), shape_rule=qlmm_shape, array_kernel=qlmm_kernel, exactness=EXACT,
    input_broadcast=MATRIX_BROADCAST,
    notes=(
        "Exact and bit-identical on CPU and GPU: the integer sum is exact (float64), then multiplied by AScale * "
        "BScale (exact in float64) and divided by OutputScale in float64, rounded half to even (ONNX's "
        "QLinearMatMul and QuantizeLinear round so; the page's round() is silent), the zero point added and the "
        "result saturated to the output type. A NaN (a scale of 0 or NaN: 'undefined behavior' on the page) "
        "gives the type's lowest value, +-inf saturates, as QUANTIZE_LINEAR.",
        "AScale, AZeroPoint, OutputScale and OutputZeroPoint are per tensor or per row ({1, 1, M, 1}, or 1 or M "
        "values in 1-D); BScale and BZeroPoint per tensor or per column ({1, 1, 1, N}); all six have the same "
        "DimensionCount. Scales are FLOAT32 only.",
        "Without OutputZeroPointTensor the output type is chosen with --output-dtype (UINT8 or INT8, default UINT8).",
        _BATCH_NOTE, _ALL_OR_REQUIRED,
    ),
)

OPERATORS: tuple[Operator, ...] = (GEMM, MATRIX_MULTIPLY_INTEGER, MATRIX_MULTIPLY_INTEGER_TO_FLOAT,
                                   QUANTIZED_LINEAR_MATRIX_MULTIPLY)
