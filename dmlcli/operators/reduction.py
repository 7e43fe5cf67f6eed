"""REDUCE: entries and kernels of the reductions.

Source: DirectML's page for DML_REDUCE_OPERATOR_DESC (MicrosoftDocs/sdk-api,
ns-directml-dml_reduce_operator_desc.md): fields, the output Sizes rule, and the support tables by Function.
The kernel is one function for both backends (`xp` is numpy or cupy).

Rules dmlcli had to choose where the page is silent, each in the entry's notes: FLOAT16 and FLOAT32 inputs
accumulate in FLOAT32 and are rounded once to the output type; INT32/UINT32 SUM and MULTIPLY wrap modulo
2^32; MAX and MIN skip NaN (as ELEMENT_WISE_MAX/MIN return the non-NaN operand), giving NaN only where every
reduced element is NaN; ARGMAX/ARGMIN skip NaN likewise, pick the first index among ties (row-major over the
reduced axes, as if they were one flattened axis) and give 0 where every element is NaN.
"""

from __future__ import annotations

import math

import numpy as np

from ..data_types import FLOAT16, FLOAT32, FLOATS, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64
from .parameters import EnumParameter, IntArrayParameter
from .schema import APPROXIMATE, DIMS_1_TO_8, DIMS_4, Operator, Tolerance, rows
from .shaped import ShapeQuery, resolve_axes

IO = ("InputTensor", "OutputTensor")
_ARG_INPUTS = (FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, UINT8)


def _tied(level, dims, types):
    return (level, dims, {"InputTensor": types, "OutputTensor": types}, IO)


_ARG_ROWS = rows(
    ("3_0", DIMS_1_TO_8, {"InputTensor": _ARG_INPUTS, "OutputTensor": (INT64, INT32, UINT64, UINT32)}),
    ("2_1", DIMS_4, {"InputTensor": _ARG_INPUTS, "OutputTensor": (UINT32,)}),
    ("1_0", DIMS_4, {"InputTensor": FLOATS, "OutputTensor": (UINT32,)}),
)
_FLOAT_ROWS = rows(_tied("3_0", DIMS_1_TO_8, FLOATS), _tied("1_0", DIMS_4, FLOATS))
_MIN_MAX_ROWS = rows(
    _tied("3_0", DIMS_1_TO_8, _ARG_INPUTS),
    _tied("2_1", DIMS_4, (FLOAT32, FLOAT16, INT32, UINT32)),
    _tied("1_0", DIMS_4, FLOATS),
)
_SUM_ROWS = rows(
    _tied("3_0", DIMS_1_TO_8, (FLOAT32, FLOAT16, INT32, UINT32)),
    _tied("2_1", DIMS_4, (FLOAT32, FLOAT16, INT32, UINT32)),
    _tied("1_0", DIMS_4, FLOATS),
)

FUNCTIONS = (("ARGMAX", 0), ("ARGMIN", 1), ("AVERAGE", 2), ("L1", 3), ("L2", 4), ("LOG_SUM", 5),
             ("LOG_SUM_EXP", 6), ("MAX", 7), ("MIN", 8), ("MULTIPLY", 9), ("SUM", 10), ("SUM_SQUARE", 11))
_GROUPS = (
    (("ARGMIN", "ARGMAX"), _ARG_ROWS),
    (("AVERAGE", "L1", "L2", "LOG_SUM", "LOG_SUM_EXP", "SUM_SQUARE"), _FLOAT_ROWS),
    (("MIN", "MAX"), _MIN_MAX_ROWS),
    (("MULTIPLY", "SUM"), _SUM_ROWS),
)

FUNCTION = EnumParameter(
    field="Function", help="the reduction: argmax, argmin, average, l1, l2, log_sum, log_sum_exp, max, min, "
                           "multiply, sum or sum_square",
    enum_prefix="DML_REDUCE_FUNCTION_", values=FUNCTIONS, default_value="SUM")
AXES = IntArrayParameter(
    field="Axes", count_field="AxisCount", default_text="every axis",
    help="the axes to reduce, each from 0 to the input's DimensionCount - 1 (reduced axes keep size 1)")


def reduce_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    axes = resolve_axes(query.parameters["Axes"], len(shape), "Axes")
    return {"OutputTensor": tuple(1 if axis in axes else size for axis, size in enumerate(shape))}


def reduced_count(call) -> int:
    """How many input elements each output element reduces (what the tolerance grows with)."""
    shape = call.tensors["InputTensor"].shape
    axes = resolve_axes(call.parameters["Axes"], len(shape), "Axes")
    return math.prod(shape[axis] for axis in axes)


def _accumulator(xp, x):
    """Where a reduction adds up: FLOAT32 for the float types (FLOAT16 widened exactly), the type itself else."""
    return x.astype(xp.float32) if x.dtype == xp.float16 else x


def _arg_reduce(xp, x, axes, function: str):
    """ARGMAX/ARGMIN over `axes`, as if the reduced axes were one flattened axis (row-major)."""
    kept = [axis for axis in range(x.ndim) if axis not in axes]
    moved = xp.transpose(x, kept + list(axes))
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    if flat.dtype.kind == "f":
        # NaN is skipped, as MAX and MIN skip it; a row of NaN only gives index 0.
        fill = -xp.inf if function == "ARGMAX" else xp.inf
        flat = xp.where(xp.isnan(flat), xp.asarray(fill, flat.dtype), flat)
    found = xp.argmax(flat, axis=-1) if function == "ARGMAX" else xp.argmin(flat, axis=-1)
    return found


def _extreme_skipping_nan(xp, x, axis: tuple[int, ...], function: str):
    """MAX or MIN over `axis`, NaN skipped as ELEMENT_WISE_MAX/MIN skip it (NaN only where all are NaN)."""
    if getattr(xp, "__name__", "") == "numpy":
        return (np.fmax if function == "MAX" else np.fmin).reduce(x, axis=axis)
    extreme = xp.max if function == "MAX" else xp.min
    if x.dtype.kind != "f":
        return extreme(x, axis=axis)
    # CuPy has no fmax.reduce (it raises NotImplementedError): NaN become the identity, then come back where every
    # reduced element was NaN. The same values as NumPy's fmax.reduce.
    fill = xp.asarray(-xp.inf if function == "MAX" else xp.inf, x.dtype)
    found = extreme(xp.where(xp.isnan(x), fill, x), axis=axis)
    return xp.where(xp.all(xp.isnan(x), axis=axis), xp.asarray(xp.nan, x.dtype), found)


def reduce_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    out_dtype = np.dtype(out.data_type.numpy_dtype)
    axes = resolve_axes(params["Axes"], x.ndim, "Axes")
    function = params["Function"]
    if function in ("ARGMAX", "ARGMIN"):
        index = _arg_reduce(xp, x, axes, function)
        return (index.astype(out_dtype).reshape(out.shape),)
    work = _accumulator(xp, x)
    axis = tuple(axes)
    if function == "SUM":
        result = xp.sum(work, axis=axis, dtype=work.dtype)
    elif function == "MULTIPLY":
        result = xp.prod(work, axis=axis, dtype=work.dtype)
    elif function in ("MAX", "MIN"):
        result = _extreme_skipping_nan(xp, work, axis, function)
    elif function == "AVERAGE":
        result = xp.sum(work, axis=axis) / work.dtype.type(math.prod(x.shape[a] for a in axes))
    elif function == "L1":
        result = xp.sum(xp.abs(work), axis=axis)
    elif function == "L2":
        result = xp.sqrt(xp.sum(work * work, axis=axis))
    elif function == "SUM_SQUARE":
        result = xp.sum(work * work, axis=axis)
    elif function == "LOG_SUM":
        result = xp.log(xp.sum(work, axis=axis))
    elif function == "LOG_SUM_EXP":
        # Shifted by the largest element (skipping NaN), so that exp cannot overflow where the sum fits.
        peak = xp.max(xp.where(xp.isinf(work), xp.asarray(0, work.dtype), work), axis=axis, keepdims=True)
        peak = xp.where(xp.isnan(peak), xp.asarray(0, work.dtype), peak)
        result = xp.log(xp.sum(xp.exp(work - peak), axis=axis)) + xp.squeeze(peak, axis=axis)
    else:  # pragma: no cover - the enum admits no other value
        raise ValueError(function)
    return (xp.asarray(result).astype(out_dtype).reshape(out.shape),)


_TOLERANCE = Tolerance(
    "ulp", 2, 2,
    "dmlcli's choice after WebNN's reduction tolerances, which grow with the elements reduced: 2 ULP of the output "
    "type per element reduced (float results accumulate in FLOAT32, in an order DirectML does not document)")

def log_reduction_rule(call, dtype):
    """LOG_SUM and LOG_SUM_EXP: the sum's error (2 ULP per element reduced, relative) passes through log as an
    absolute error of up to 2n eps, which is many ULP of a result near 0 (a sum near 1): within 2n eps + 2n eps *
    |expected|. The other functions keep the ULP figure."""
    if call.parameters.get("Function") not in ("LOG_SUM", "LOG_SUM_EXP") or np.dtype(dtype).kind != "f":
        return None
    from ..comparison import Rule

    bound = 2 * reduced_count(call) * float(np.finfo(dtype).eps)
    return Rule("allclose", bound, "REDUCE LOG_SUM/LOG_SUM_EXP: 2 ULP per element reduced of the sum, carried "
                "through log (dmlcli's choice)", rtol=bound)


REDUCE = Operator(
    name="REDUCE", enum_value=55, family="reduction", prefix="",
    summary="reduces the input along Axes with a Function (sum, product, min, max, mean, norms, argmin/argmax)",
    formula="OutputTensor[i] = Function(InputTensor[j] for every j equal to i outside Axes); reduced axes keep "
            "size 1",
    introduced=_FLOAT_ROWS[-1].level, inputs=("InputTensor",), support=_ARG_ROWS, same_data_type=(),
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(FUNCTION, AXES), default_output_type=UINT32,
    support_by="Function", support_groups=_GROUPS, shape_rule=reduce_shape, array_kernel=reduce_kernel,
    exactness=APPROXIMATE, tolerance=_TOLERANCE, tolerance_scale=reduced_count, tolerance_rule=log_reduction_rule,
    notes=(
        "Axes may be left out in the API and on the command line: every axis is reduced (DirectML's desc needs "
        "them; a DxDispatch model must give Axes and AxisCount).",
        "FLOAT16 and FLOAT32 inputs accumulate in FLOAT32 and are rounded once to the output type; INT32 and "
        "UINT32 SUM and MULTIPLY wrap modulo 2^32 (two's complement). The page does not say how DirectML adds up.",
        "MAX and MIN skip NaN, as ELEMENT_WISE_MAX and MIN return the non-NaN operand: NaN only where every "
        "reduced element is NaN. ARGMAX and ARGMIN skip NaN too, give the first index among equal values and 0 "
        "where every element is NaN. The index counts over the reduced axes as one flattened, row-major axis.",
        "LOG_SUM_EXP is computed as max + log(sum(exp(x - max))), which equals the formula wherever it does not "
        "overflow, and stays finite where the plain sum of exponentials would overflow.",
        "LOG_SUM and LOG_SUM_EXP are checked within 2n eps + 2n eps * |expected| (n the elements reduced, eps "
        "the output type's machine epsilon): log turns the sum's relative error into an absolute one, so a result "
        "near 0 (a sum near 1) may be many ULP off while the sum is within 2 ULP per element.",
        "The output type is chosen with --output-dtype only for ARGMAX and ARGMIN (default UINT32, which every "
        "level allows); for the other functions it is the input's type.",
    ),
)

OPERATORS = (REDUCE,)
