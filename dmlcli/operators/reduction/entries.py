"""The reduction family: REDUCE, ARGMIN/ARGMAX, the axis-wise activations (SOFTMAX, LOG_SOFTMAX, HARDMAX and
their "1" forms) and the running tallies (CUMULATIVE_SUMMATION, CUMULATIVE_PRODUCT).

Sources: DirectML's pages for each DESC (MicrosoftDocs/sdk-api, ns-directml-dml_<name>_operator_desc.md, as
transcribed in the project's group A notes): fields, the output Sizes rules, the support tables, and the
DML_OPERATOR_TYPE values of DirectML.h. Each kernel is one function for both backends (`xp` is numpy or cupy).

One NaN rule for the whole family, where the pages are silent (each entry's notes repeat what applies):
selections skip NaN, arithmetic propagates it. MAX and MIN skip NaN (as ELEMENT_WISE_MAX/MIN return the non-NaN
operand), giving NaN only where every reduced element is NaN; ARGMAX, ARGMIN and HARDMAX skip NaN likewise, and
a group of nothing but NaN gives the first index (the last with AxisDirection DECREASING). Sums, products,
norms, SOFTMAX, LOG_SOFTMAX and the cumulative operators propagate a NaN into every result it takes part in.
FLOAT16 inputs are computed in FLOAT32 and rounded once; FLOAT32 computes in FLOAT32. Integer sums and products
(REDUCE's SUM, MULTIPLY, L1, SUM_SQUARE and the cumulative operators) wrap modulo 2^width (two's complement).
Ties pick the first index (ARGMAX/ARGMIN with AxisDirection INCREASING, REDUCE, HARDMAX) or the last
(AxisDirection DECREASING); several reduced axes count as one flattened, row-major axis, as the pages' examples do.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOAT16, FLOAT32, FLOATS, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64
from . import gpu as reduction_gpu
from ..numerics import compiled_loops
from ..table.parameters import BoolParameter, EnumParameter, IntArrayParameter, IntegerParameter
from ..table.schema import (APPROXIMATE, COMPOSITE, DIMS_1_TO_8, DIMS_4, DIMS_4_TO_5, EXACT, Operator, SumBound,
                            Tolerance, rows)
from ..table.shaped import RuleViolation, ShapeQuery, check_axis, describe_sizes, resolve_axes

IO = ("InputTensor", "OutputTensor")
_ARG_INPUTS = (FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, UINT8)
_ARG_INPUTS_64 = (FLOAT32, FLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, UINT16, UINT8)
_INDEX_TYPES = (INT64, INT32, UINT64, UINT32)
_SUM_TYPES = (FLOAT32, FLOAT16, INT32, UINT32)
_SUM_TYPES_64 = (FLOAT32, FLOAT16, INT64, INT32, UINT64, UINT32)


def _tied(level, dims, types):
    """A row whose input and output take the same types, and must have the same one."""
    return (level, dims, {"InputTensor": types, "OutputTensor": types}, IO)


def _same(level, dims, types):
    """A row of an operator whose input and output always share a type (same_data_type says so)."""
    return (level, dims, {"InputTensor": types, "OutputTensor": types})


# ---------------------------------------------------------------- support tables (the pages, newest row first)

_ARG_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"InputTensor": _ARG_INPUTS_64, "OutputTensor": _INDEX_TYPES}),
    ("3_0", DIMS_1_TO_8, {"InputTensor": _ARG_INPUTS, "OutputTensor": _INDEX_TYPES}),
    ("2_1", DIMS_4, {"InputTensor": _ARG_INPUTS, "OutputTensor": (UINT32,)}),
    ("1_0", DIMS_4, {"InputTensor": FLOATS, "OutputTensor": (UINT32,)}),
)
_FLOAT_ROWS = rows(_tied("3_0", DIMS_1_TO_8, FLOATS), _tied("1_0", DIMS_4, FLOATS))
_L1_SUM_SQUARE_ROWS = rows(
    _tied("5_0", DIMS_1_TO_8, _SUM_TYPES_64),
    _tied("3_0", DIMS_1_TO_8, FLOATS),
    _tied("1_0", DIMS_4, FLOATS),
)
_MIN_MAX_ROWS = rows(
    _tied("5_0", DIMS_1_TO_8, _ARG_INPUTS_64),
    _tied("3_0", DIMS_1_TO_8, _ARG_INPUTS),
    _tied("2_1", DIMS_4, _SUM_TYPES),
    _tied("1_0", DIMS_4, FLOATS),
)
_SUM_ROWS = rows(
    _tied("5_0", DIMS_1_TO_8, _SUM_TYPES_64),
    _tied("3_0", DIMS_1_TO_8, _SUM_TYPES),
    _tied("2_1", DIMS_4, _SUM_TYPES),
    _tied("1_0", DIMS_4, FLOATS),
)
_ARGMIN_MAX_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"InputTensor": _ARG_INPUTS_64, "OutputTensor": _INDEX_TYPES}),
    ("3_0", DIMS_1_TO_8, {"InputTensor": _ARG_INPUTS, "OutputTensor": _INDEX_TYPES}),
)
_SOFTMAX_ROWS = rows(_same("3_0", DIMS_1_TO_8, FLOATS), _same("2_0", DIMS_4_TO_5, FLOATS), _same("1_0", DIMS_4, FLOATS))
_SOFTMAX1_ROWS = rows(_same("5_1", DIMS_1_TO_8, FLOATS))
_CUMSUM_ROWS = rows(
    _same("5_0", DIMS_1_TO_8, _SUM_TYPES_64), _same("4_0", DIMS_1_TO_8, _SUM_TYPES), _same("2_1", DIMS_4, _SUM_TYPES))
_CUMPROD_ROWS = rows(
    _same("5_0", DIMS_1_TO_8, _SUM_TYPES_64), _same("4_0", DIMS_1_TO_8, _SUM_TYPES), _same("3_1", DIMS_4, _SUM_TYPES))

FUNCTIONS = (("ARGMAX", 0), ("ARGMIN", 1), ("AVERAGE", 2), ("L1", 3), ("L2", 4), ("LOG_SUM", 5),
             ("LOG_SUM_EXP", 6), ("MAX", 7), ("MIN", 8), ("MULTIPLY", 9), ("SUM", 10), ("SUM_SQUARE", 11))
# The newest page's groups ("Tensor support according to function"); L1 and SUM_SQUARE gained integers at 5_0.
_GROUPS = (
    (("ARGMIN", "ARGMAX"), _ARG_ROWS),
    (("AVERAGE", "L2", "LOG_SUM", "LOG_SUM_EXP"), _FLOAT_ROWS),
    (("L1", "SUM_SQUARE"), _L1_SUM_SQUARE_ROWS),
    (("MIN", "MAX"), _MIN_MAX_ROWS),
    (("MULTIPLY", "SUM"), _SUM_ROWS),
)

# ---------------------------------------------------------------- parameters

FUNCTION = EnumParameter(
    field="Function", help="the reduction: argmax, argmin, average, l1, l2, log_sum, log_sum_exp, max, min, "
                           "multiply, sum or sum_square",
    enum_prefix="DML_REDUCE_FUNCTION_", values=FUNCTIONS, default_value="SUM")
AXES = IntArrayParameter(
    field="Axes", count_field="AxisCount", default_text="every axis",
    help="the axes to reduce, each from 0 to the input's DimensionCount - 1 (reduced axes keep size 1)")
AXIS_DIRECTION_VALUES = (("INCREASING", 0), ("DECREASING", 1))
ARG_DIRECTION = EnumParameter(
    field="AxisDirection", help="which index wins a tie: increasing (the first) or decreasing (the last)",
    enum_prefix="DML_AXIS_DIRECTION_", values=AXIS_DIRECTION_VALUES, default_value="INCREASING")
SOFTMAX_AXES = IntArrayParameter(
    field="Axes", count_field="AxisCount", default_text="the last axis (as the operator without 1)",
    help="the axes each group spans, each from 0 to the input's DimensionCount - 1")
CUMULATIVE_AXIS = IntegerParameter(
    field="Axis", help="the dimension to run along (0 to DimensionCount - 1)", default_value=0)
RUN_DIRECTION = EnumParameter(
    field="AxisDirection", help="increasing (from index 0 up) or decreasing (from the last index down)",
    enum_prefix="DML_AXIS_DIRECTION_", values=AXIS_DIRECTION_VALUES, default_value="INCREASING")
EXCLUSIVE_SUM = BoolParameter(
    field="HasExclusiveSum", help="true: each output leaves its own element out of the tally (the first is 0)")
EXCLUSIVE_PRODUCT = BoolParameter(
    field="HasExclusiveProduct", help="true: each output leaves its own element out of the tally (the first is 1)")


# ---------------------------------------------------------------- shape rules

def reduce_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    axes = resolve_axes(query.parameters["Axes"], len(shape), "Axes")
    return {"OutputTensor": tuple(1 if axis in axes else size for axis, size in enumerate(shape))}


def effective_rank(shape) -> int:
    """The pages' effective rank: the DimensionCount without the leftmost dimensions of size 1."""
    leading = 0
    while leading < len(shape) and shape[leading] == 1:
        leading += 1
    return len(shape) - leading


def last_axis_shape(query: ShapeQuery) -> dict:
    """SOFTMAX, LOG_SOFTMAX, HARDMAX: the output has the input's Sizes; the input's effective rank is at most 2."""
    shape = query.shape("InputTensor")
    if effective_rank(shape) > 2:
        raise RuleViolation(f"InputTensor Sizes {describe_sizes(shape)} have an effective rank of "
                            f"{effective_rank(shape)} (the DimensionCount without leading sizes of 1); at most 2 "
                            "is allowed (the '1' form of the operator, 5_1, takes any axes)")
    return {"OutputTensor": shape}


def axes_shape(query: ShapeQuery) -> dict:
    """SOFTMAX1, LOG_SOFTMAX1, HARDMAX1: the output has the input's Sizes; Axes are checked against the rank."""
    shape = query.shape("InputTensor")
    softmax_axes(query.parameters["Axes"], len(shape))
    return {"OutputTensor": shape}


def cumulative_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    check_axis(query.parameters["Axis"], len(shape), "Axis")
    return {"OutputTensor": shape}


def softmax_axes(axes, rank: int) -> tuple[int, ...]:
    return (rank - 1,) if axes is None else resolve_axes(axes, rank, "Axes")


# ---------------------------------------------------------------- how the tolerances grow

def reduced_count(call) -> int:
    """How many input elements each output element of REDUCE reduces."""
    shape = call.tensors["InputTensor"].shape
    axes = resolve_axes(call.parameters["Axes"], len(shape), "Axes")
    return math.prod(shape[axis] for axis in axes)


# WebNN's conformance tests (web-platform-tests webnn/conformance_tests/reduce_*.https.any.js), in ULP, for N
# reduced elements: (a, b) for a*N + b. MAX and MIN select an element: exact.
_REDUCE_ULP = {"SUM": (1, 0), "MULTIPLY": (1, 0), "L1": (1, 0), "AVERAGE": (1, 2), "L2": (2, 1),
               "SUM_SQUARE": (2, 0), "LOG_SUM": (1, 18), "LOG_SUM_EXP": (2, 18), "MAX": (0, 0), "MIN": (0, 0),
               "ARGMAX": (0, 0), "ARGMIN": (0, 0)}


def reduced_axes(call) -> tuple[int, ...]:
    """The axes a call reduces: what a Dask block must hold whole (REDUCE, ARGMIN, ARGMAX)."""
    return resolve_axes(call.parameters["Axes"], len(call.tensors["InputTensor"].shape), "Axes")


def group_axes(call) -> tuple[int, ...]:
    """The axes a softmax group spans (the last axis without Axes): what a Dask block must hold whole."""
    rank = len(call.tensors["InputTensor"].shape)
    return (rank - 1,) if "Axes" not in call.parameters else softmax_axes(call.parameters["Axes"], rank)


def cumulative_axes(call) -> tuple[int, ...]:
    return (call.parameters["Axis"],)


def reduce_tolerance_scale(call) -> int:
    a, b = _REDUCE_ULP[call.parameters["Function"]]
    return a * reduced_count(call) + b


def _group_count(call, default_last: bool) -> int:
    shape = call.tensors["InputTensor"].shape
    axes = (len(shape) - 1,) if default_last else softmax_axes(call.parameters["Axes"], len(shape))
    return math.prod(shape[axis] for axis in axes)


def softmax_tolerance_scale(call) -> int:
    """WebNN's softmax figure (webnn/conformance_tests/softmax.https.any.js): 3 * N + 3 ULP, N the axis' size."""
    return 3 * _group_count(call, "Axes" not in call.parameters) + 3


def cumsum_tolerance_scale(call) -> int:
    """WebNN's cumulativeSum figure (cumulative_sum.https.any.js): N - 1 ULP for an axis of N elements."""
    return call.tensors["InputTensor"].shape[call.parameters["Axis"]] - 1


def cumprod_tolerance_scale(call) -> int:
    """dmlcli's choice after WebNN's reduceProduct figure (N ULP): WebNN has no cumulative product."""
    return call.tensors["InputTensor"].shape[call.parameters["Axis"]]


# ---------------------------------------------------------------- sum bounds (checking/bounds.py)

# K of REDUCE's sum bound, N the elements reduced: (a, b) for a*N + b, the roundings an element goes through
# (AVERAGE's division, L2's squares and root, the logs and exponentials); MAX and MIN select (K = 0: no bound).
_REDUCE_TERMS = {"SUM": (1, 0), "MULTIPLY": (1, 0), "L1": (1, 0), "AVERAGE": (1, 1), "L2": (1, 2),
                 "SUM_SQUARE": (1, 1), "LOG_SUM": (1, 1), "LOG_SUM_EXP": (1, 3), "MAX": (0, 0), "MIN": (0, 0),
                 "ARGMAX": (0, 0), "ARGMIN": (0, 0)}


def reduce_terms(call) -> int:
    a, b = _REDUCE_TERMS[call.parameters["Function"]]
    return a * reduced_count(call) + b


def reduce_magnitude(xp, inputs, outputs, params):
    """M of REDUCE: the function itself on |x| (the sum of the magnitudes; a product's magnitude), except where a
    log turns the sum's relative error into an absolute one: LOG_SUM's M is sum|x| / |sum x| + |log(sum x)|,
    LOG_SUM_EXP's 1 + |max| + |log(sum(exp(x - max)))| (each exponential's relative error, the shift's)."""
    (x,) = inputs
    function = params["Function"]
    axes = resolve_axes(params["Axes"], x.ndim, "Axes")
    axis = _axis_argument(axes)
    shape = outputs[0].shape
    if function == "LOG_SUM":
        total = xp.sum(x, axis=axis)
        return (xp.sum(xp.abs(x), axis=axis) / xp.abs(total) + xp.abs(xp.log(total))).reshape(shape)
    if function == "LOG_SUM_EXP":
        peak = xp.max(x, axis=axis, keepdims=True)
        inner = xp.log(xp.sum(xp.exp(x - peak), axis=axis))
        return (1 + xp.abs(xp.squeeze(peak, axis=axis)) + xp.abs(inner)).reshape(shape)
    return reduce_kernel(xp, [xp.abs(x)], outputs, params)[0]


REDUCE_SUM_BOUND = SumBound(
    reduce_terms, "N for SUM, MULTIPLY and L1, N + 1 for AVERAGE, SUM_SQUARE and LOG_SUM, N + 2 for L2, N + 3 for "
                  "LOG_SUM_EXP (N the elements reduced); 0 for MAX and MIN, which select: no bound",
    "the function itself on |InputTensor| in float64 (the sum of the magnitudes), for LOG_SUM sum|x| / |sum x| + "
    "|log(sum x)| and for LOG_SUM_EXP 1 + |max| + |log(sum(exp(x - max)))| (a log turns the sum's relative error "
    "into an absolute one)", magnitude=reduce_magnitude)


def softmax_terms(call) -> int:
    """K of the softmax's sum bound: the N elements of a group, + 4 for the shift, the exponential, the division."""
    return _group_count(call, "Axes" not in call.parameters) + 4


def log_softmax_terms(call) -> int:
    return _group_count(call, "Axes" not in call.parameters) + 2


def _softmax_parts(xp, x, params):
    """(shifted x - max, the probabilities, sum_j p_j |x_j - max| per group, log(sum(exp(shifted)))), float64."""
    axes = _group_axes(params, x.ndim)
    shifted = x - xp.max(x, axis=axes, keepdims=True)
    exponentials = xp.exp(shifted)
    total = xp.sum(exponentials, axis=axes, keepdims=True)
    probabilities = exponentials / total
    # An element of probability 0 (-inf, or far below the maximum) adds nothing, however far its shift.
    weighted = xp.where(probabilities > 0, probabilities * xp.abs(shifted), 0)
    spread = xp.sum(weighted, axis=axes, keepdims=True)
    return shifted, probabilities, spread, xp.log(total)


def softmax_magnitude(xp, inputs, outputs, params):
    """M of the softmax: p_i x (1 + |x_i - max| + sum_j p_j |x_j - max|). The float shift x - max is off by an ULP
    of |x - max|, which exp turns into a relative error of p: a group spread over 80 units gives its small
    probabilities 80 ULP of themselves, however many elements it has."""
    shifted, probabilities, spread, _ = _softmax_parts(xp, inputs[0], params)
    return probabilities * (1 + xp.abs(shifted) + spread)


def log_softmax_magnitude(xp, inputs, outputs, params):
    """M of the log-softmax: 1 + 2|x_i - max| + 2|log(sum)| + sum_j p_j |x_j - max|: the result x_i - max - log(sum)
    cancels near 0 (the largest element of a group whose others are far smaller), where the absolute error of the
    shift and of log(sum) are many ULP of the result."""
    shifted, _, spread, log_total = _softmax_parts(xp, inputs[0], params)
    return 1 + 2 * xp.abs(shifted) + 2 * xp.abs(log_total) + spread


SOFTMAX_SUM_BOUND = SumBound(
    softmax_terms, "N + 4, N the elements of a group",
    "p_i x (1 + |x_i - max| + sum_j p_j |x_j - max|) in float64, p the softmax: the shift x - max is off by an ULP "
    "of itself, which exp turns into a relative error of p", magnitude=softmax_magnitude)
LOG_SOFTMAX_SUM_BOUND = SumBound(
    log_softmax_terms, "N + 2, N the elements of a group",
    "1 + 2|x_i - max| + 2|log(sum_j exp(x_j - max))| + sum_j p_j |x_j - max| in float64 (the absolute errors of "
    "the shift and of the log of the sum, which a result near 0 cannot measure in its own ULP)",
    magnitude=log_softmax_magnitude)


def cumsum_terms(call) -> int:
    return call.tensors["InputTensor"].shape[call.parameters["Axis"]]


CUMSUM_SUM_BOUND = SumBound(
    cumsum_terms, "N, the length of Axis",
    "CUMULATIVE_SUMMATION itself run on |InputTensor| in float64 (each running sum's magnitudes)",
    absolute=("InputTensor",))


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)

def _accumulator(xp, x):
    """Where a computation runs: FLOAT32 for the float types (FLOAT16 widened exactly), the type itself else."""
    return x.astype(xp.float32) if x.dtype == xp.float16 else x


def _flatten_reduced(xp, x, axes):
    """The reduced axes moved last (in dimension order, whatever order Axes lists them) and flattened into one,
    row-major: shape (kept sizes..., N)."""
    axes = tuple(sorted(axes))
    kept = [axis for axis in range(x.ndim) if axis not in axes]
    if axes != tuple(range(x.ndim - len(axes), x.ndim)):
        x = xp.transpose(x, kept + list(axes))
    return x.reshape(tuple(x.shape[:len(kept)]) + (-1,))


def _restore(xp, flat, shape, axes):
    """Undo _flatten_reduced for an array of the input's size (HARDMAX's one-hot)."""
    axes = tuple(sorted(axes))
    kept = [axis for axis in range(len(shape)) if axis not in axes]
    order = kept + list(axes)
    moved = flat.reshape(tuple(shape[axis] for axis in order))
    if order == list(range(len(shape))):
        return moved
    return xp.transpose(moved, [order.index(axis) for axis in range(len(shape))])


def arg_index(xp, x, axes, largest: bool, last: bool):
    """The index of the largest (smallest) element over `axes` as one row-major axis, skipping NaN.

    Ties give the first index, or the last where `last`; a group of only NaN gives the first (the last).
    The library's argmax runs once; only groups whose pick is a NaN are searched again, without the NaN. On the
    GPU, reduction_gpu.arg_rows does it in one pass for the types a float holds exactly.
    """
    flat = _flatten_reduced(xp, x, axes)
    count = flat.shape[-1]
    if xp is not np:  # CuPy: reduction_gpu's one-pass kernel, where it takes the type
        rows = xp.ascontiguousarray(flat).reshape(-1, count)
        found = reduction_gpu.arg_rows(xp, rows, largest, last)
        if found is not None:
            return found.reshape(flat.shape[:-1])
    if last:
        flat = flat[..., ::-1]
    # The array's own methods, not xp.argmax: a function that dispatches costs a millisecond call several per
    # cent once the caches hold the data rather than the code (issue 23), and so below.
    found = flat.argmax(axis=-1) if largest else flat.argmin(axis=-1)
    index = xp.asarray(found)  # a 0-d array where every axis is reduced, not a scalar
    if flat.dtype.kind == "f":
        picked = _picked(xp, flat, index)
        if _has_nan(xp, picked):  # NumPy's argmax stops at the first NaN; find the real extreme there
            _skip_nans(xp, flat, index, xp.isnan(picked).reshape(index.shape), largest)
    if last:
        index = (count - 1) - index
    return index


def _skip_nans(xp, flat, index, nan_groups, largest: bool) -> None:
    """Each group of `nan_groups` searched again with its NaN left out: `index` set in place."""
    groups = flat[nan_groups]
    fill = -xp.inf if largest else xp.inf
    cleaned = xp.where(xp.isnan(groups), xp.asarray(fill, groups.dtype), groups)
    best = (xp.max if largest else xp.min)(cleaned, axis=-1, keepdims=True)
    # The first element equal to the extreme (NaN equals nothing, so an -inf beats a NaN); none: 0.
    index[nan_groups] = xp.argmax(groups == best, axis=-1)


def _picked(xp, flat, index):
    """flat[..., index], each group's element at its index, as one row. On a C-ordered `flat` (the usual case: the
    reduced axes were last), one take from the flat buffer; take_along_axis builds an index array per dimension,
    which costs a millisecond reduction several per cent (issue 23)."""
    if not flat.flags.c_contiguous:
        return xp.take_along_axis(flat, index[..., None], axis=-1).reshape(-1)
    count = flat.shape[-1]
    return flat.reshape(-1).take(index.reshape(-1) + xp.arange(0, index.size * count, count))


def _has_nan(xp, values) -> bool:
    """Whether a row of floats holds a NaN: on NumPy the minimum's own reduction, which propagates NaN (one call
    into C; isnan and any are two, each a few microseconds once the data have pushed the code out of the cache)."""
    if xp is np:
        return math.isnan(np.minimum.reduce(values))
    return bool(xp.isnan(values).any())


def _arg_kernel(xp, inputs, outputs, params, largest: bool):
    (x,) = inputs
    (out,) = outputs
    axes = resolve_axes(params["Axes"], x.ndim, "Axes")
    index = arg_index(xp, x, axes, largest, last=params["AxisDirection"] == "DECREASING")
    return (index.astype(out.data_type.numpy_dtype).reshape(out.shape),)


def argmin_kernel(xp, inputs, outputs, params):
    return _arg_kernel(xp, inputs, outputs, params, largest=False)


def argmax_kernel(xp, inputs, outputs, params):
    return _arg_kernel(xp, inputs, outputs, params, largest=True)


def _skip_nan_extreme(xp, work, axis, largest: bool):
    """MAX or MIN over `axis`, skipping NaN; NaN only where every element is NaN."""
    result = xp.asarray(work.max(axis=axis) if largest else work.min(axis=axis))  # the methods: see arg_index
    if work.dtype.kind != "f" or not _has_nan(xp, result.reshape(-1)):
        return result
    fill = -xp.inf if largest else xp.inf
    cleaned = xp.where(xp.isnan(work), xp.asarray(fill, work.dtype), work)
    found = (xp.max if largest else xp.min)(cleaned, axis=axis)
    every_nan = xp.all(xp.isnan(work), axis=axis)
    return xp.where(every_nan, xp.asarray(xp.nan, work.dtype), found)


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
        index = arg_index(xp, x, axes, function == "ARGMAX", last=False)
        return (index.astype(out_dtype).reshape(out.shape),)
    work = _accumulator(xp, x)
    axis = _axis_argument(axes)
    if function == "SUM":
        result = work.sum(axis=axis, dtype=work.dtype)  # the method: see arg_index
    elif function == "MULTIPLY":
        result = work.prod(axis=axis, dtype=work.dtype)
    elif function in ("MAX", "MIN"):
        result = _skip_nan_extreme(xp, work, axis, function == "MAX")
    elif function == "AVERAGE":
        result = xp.sum(work, axis=axis, dtype=work.dtype) / work.dtype.type(math.prod(x.shape[a] for a in axes))
    elif function == "L1":
        result = xp.sum(xp.abs(work), axis=axis, dtype=work.dtype)  # integers: |INT_MIN| wraps to INT_MIN
    elif function == "L2":
        result = xp.sqrt(xp.sum(work * work, axis=axis, dtype=work.dtype))
    elif function == "SUM_SQUARE":
        result = xp.sum(work * work, axis=axis, dtype=work.dtype)
    elif function == "LOG_SUM":
        result = xp.log(xp.sum(work, axis=axis, dtype=work.dtype))
    elif function == "LOG_SUM_EXP":
        result = _log_sum_exp(xp, work, axis)
    else:  # pragma: no cover - the enum admits no other value
        raise ValueError(function)
    return (xp.asarray(result).astype(out_dtype, copy=False).reshape(out.shape),)  # a fresh result: no copy


def reduce_gpu_kernel(cp, inputs, outputs, params):
    """REDUCE on the GPU: floats in one pass where reduction_gpu.py takes the call (long rows over trailing axes,
    leading axes; MAX, MIN, L1, L2 and SUM_SQUARE over any axes), the rest by the shared xp kernel."""
    (x,) = inputs
    (out,) = outputs
    if x.dtype in (np.float16, np.float32) and x.size:  # FLOAT16 summed in FLOAT32, as the xp kernel does
        axes = resolve_axes(params["Axes"], x.ndim, "Axes")
        result = reduction_gpu.reduce(cp, params["Function"], _accumulator(cp, x), axes)
        if result is not None:
            return (result.astype(out.data_type.numpy_dtype, copy=False).reshape(out.shape),)
    return reduce_kernel(cp, inputs, outputs, params)


def _axis_argument(axes):
    """One axis as an int, several as a tuple: NumPy's reductions take a faster path for an int."""
    return axes[0] if len(axes) == 1 else tuple(axes)


def _log_sum_exp(xp, work, axis):
    """max + log(sum(exp(x - max))): the formula wherever it does not overflow, finite where the plain sum of
    exponentials would overflow. The shift skips infinities (so that +inf gives +inf, and a group of -inf
    gives -inf, as the formula does); a NaN propagates."""
    peak = xp.max(xp.where(xp.isinf(work), xp.asarray(0, work.dtype), work), axis=axis, keepdims=True)
    peak = xp.where(xp.isnan(peak), xp.asarray(0, work.dtype), peak)
    return xp.log(xp.sum(xp.exp(work - peak), axis=axis)) + xp.squeeze(peak, axis=axis)


def _group_axes(params, rank: int) -> int | tuple[int, ...]:
    """The axes a softmax-like group spans: the last one, or the '1' form's Axes (as the reductions take them)."""
    return _axis_argument(softmax_axes(params.get("Axes"), rank) if "Axes" in params else (rank - 1,))


def _group_max(xp, x, axes):
    """xp.max(x, axis=axes, keepdims=True); on NumPy the ufunc's reduce that np.max calls (the same reduction,
    without np.max's Python wrapper: a few us of a small call)."""
    if xp is np:
        return np.maximum.reduce(x, axis=axes, keepdims=True)
    return xp.max(x, axis=axes, keepdims=True)


def _group_sum(xp, x, axes):
    """xp.sum(x, axis=axes, keepdims=True, dtype=x.dtype); on NumPy the ufunc's reduce that np.sum calls (as
    _group_max)."""
    if xp is np:
        return np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=True)
    return xp.sum(x, axis=axes, keepdims=True, dtype=x.dtype)


def _shifted(xp, x, axes):
    """x - its group's max, a new array, where the computation runs (_accumulator)."""
    work = _accumulator(xp, x)
    return work - _group_max(xp, work, axes)


def softmax_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    axes = _group_axes(params, x.ndim)
    loops = compiled_loops.active() if xp is np and axes in (-1, x.ndim - 1) else None
    rows = None if loops is None else loops.softmax_rows(x)  # the same steps, compiled (FLOAT32 without a NaN)
    if rows is not None:
        return (rows.astype(out.data_type.numpy_dtype, copy=False),)
    # exp(x - max) / sum(exp(x - max)): the formula, without overflow for large inputs. A NaN or +inf in a
    # group makes the whole group NaN (inf - inf); -inf elements give 0.
    shifted = _shifted(xp, x, axes)
    xp.exp(shifted, out=shifted)
    shifted /= _group_sum(xp, shifted, axes)
    return (shifted.astype(out.data_type.numpy_dtype, copy=False),)


def softmax_planned(inputs, outputs, params, constant_inputs: frozenset[int] = frozenset()):
    """softmax_kernel's CPU call worked out once (Operator.planned_kernel: a model's planned node, such as the
    Softmax after an attention's product): FLOAT32 over the last axis in the compiled loops, whose axes and row
    summation program are decided here once (softmax_kernel asks for them on every call: a third of a
    {1, 4, 16, 16} call's cost); a call the loops decline (a NaN) takes softmax_kernel, as it would. None where the
    kernel would not take the loops, or they are off."""
    loops = compiled_loops.active()
    (x,) = inputs
    if loops is None or x.dtype != np.float32 or x.size == 0 or outputs[0].data_type.numpy_dtype != np.float32:
        return None
    if _group_axes(params, x.ndim) not in (-1, x.ndim - 1):
        return None
    return compiled_loops.planned_rows(loops.softmax_rows_of(x.shape[-1]), softmax_kernel, outputs, params)


def log_softmax_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    axes = _group_axes(params, x.ndim)
    shifted = _shifted(xp, x, axes)
    shifted -= xp.log(_group_sum(xp, xp.exp(shifted), axes))
    return (shifted.astype(out.data_type.numpy_dtype, copy=False),)


def _softmax_gpu(cp, inputs, outputs, params, log_form: bool):
    """Softmax or log-softmax over trailing axes by reduction_gpu's one-block-per-row kernel; other axes by the
    shared xp kernel."""
    (x,) = inputs
    axes = _group_axes(params, x.ndim)
    group = (axes,) if isinstance(axes, int) else tuple(sorted(axes))
    first = x.ndim - len(group)
    if group != tuple(range(first, x.ndim)):  # each row of the kernel is one group only where the axes trail
        return (log_softmax_kernel if log_form else softmax_kernel)(cp, inputs, outputs, params)
    rows = cp.ascontiguousarray(_accumulator(cp, x)).reshape(-1, math.prod(x.shape[first:]))
    result = reduction_gpu.softmax_rows(cp, rows, log_form).reshape(x.shape)
    return (result.astype(outputs[0].data_type.numpy_dtype, copy=False),)


def softmax_gpu_kernel(cp, inputs, outputs, params):
    return _softmax_gpu(cp, inputs, outputs, params, log_form=False)


def log_softmax_gpu_kernel(cp, inputs, outputs, params):
    return _softmax_gpu(cp, inputs, outputs, params, log_form=True)


def hardmax_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    axes = _group_axes(params, x.ndim)
    axes = (axes,) if isinstance(axes, int) else axes
    index = arg_index(xp, x, axes, largest=True, last=False)
    flat_shape = tuple(index.shape) + (math.prod(x.shape[axis] for axis in axes),)
    one_hot = (xp.arange(flat_shape[-1]) == index[..., None]).astype(out.data_type.numpy_dtype)
    return (xp.ascontiguousarray(_restore(xp, one_hot.reshape(flat_shape), x.shape, axes)),)


def _cumulative(xp, inputs, outputs, params, exclusive_field: str, product: bool):
    (x,) = inputs
    (out,) = outputs
    axis = params["Axis"]
    reverse = params["AxisDirection"] == "DECREASING"
    work = _accumulator(xp, x)
    if reverse:
        work = xp.flip(work, axis=axis)
    run = (xp.cumprod if product else xp.cumsum)(work, axis=axis, dtype=work.dtype)
    if params[exclusive_field]:
        # Each output holds the tally before its own element: the identity first, the last total dropped.
        head = [slice(None)] * x.ndim
        head[axis] = slice(0, 1)
        body = [slice(None)] * x.ndim
        body[axis] = slice(0, x.shape[axis] - 1)
        first = (xp.ones_like if product else xp.zeros_like)(run[tuple(head)])
        run = xp.concatenate([first, run[tuple(body)]], axis=axis)
    if reverse:
        run = xp.flip(run, axis=axis)
    return (xp.ascontiguousarray(run.astype(out.data_type.numpy_dtype, copy=False)),)


def cumsum_kernel(xp, inputs, outputs, params):
    return _cumulative(xp, inputs, outputs, params, "HasExclusiveSum", product=False)


def cumsum_gpu_kernel(cp, inputs, outputs, params):
    """CUMULATIVE_SUMMATION on the GPU along the last axis by reduction_gpu's one-block-per-row scan (reverse and
    exclusive sums included); other axes by the shared xp kernel (CuPy's cumsum)."""
    (x,) = inputs
    work = _accumulator(cp, x)
    if params["Axis"] != x.ndim - 1 or work.dtype.name not in reduction_gpu.cumsum_types():
        return cumsum_kernel(cp, inputs, outputs, params)
    run = reduction_gpu.cumsum_rows(cp, cp.ascontiguousarray(work), params["AxisDirection"] == "DECREASING",
                                    bool(params["HasExclusiveSum"]))
    return (run.astype(outputs[0].data_type.numpy_dtype, copy=False),)


def cumprod_kernel(xp, inputs, outputs, params):
    return _cumulative(xp, inputs, outputs, params, "HasExclusiveProduct", product=True)


# ---------------------------------------------------------------- entries

_NAN_SELECTION = ("NaN is skipped (dmlcli's rule for the family's selections, as ELEMENT_WISE_MAX returns the "
                  "non-NaN operand): a group of nothing but NaN gives the first index (the last with "
                  "AxisDirection DECREASING, as for any tie).")
_FLATTENED = ("Several Axes count as one flattened, row-major axis (in dimension order, whatever order Axes lists "
              "them): the index is the position within the reduced block (the pages' example: Axes {0, 1} of a 3x3 "
              "gives 4 for the centre).")
_INDEX_TYPE = ("The output type is chosen with --output-dtype (INT64, INT32, UINT64 or UINT32; default UINT32, "
               "as REDUCE's ARGMAX/ARGMIN). An INT32 index past 2^31 - 1 (a group of more than 2^31 elements) "
               "wraps modulo 2^32.")


REDUCE = Operator(
    name="REDUCE", enum_value=55, family="reduction", prefix="",
    summary="reduces the input along Axes with a Function (sum, product, min, max, mean, norms, argmin/argmax)",
    formula="OutputTensor[i] = Function(InputTensor[j] for every j equal to i outside Axes); reduced axes keep "
            "size 1",
    introduced=_FLOAT_ROWS[-1].level, inputs=("InputTensor",), support=_ARG_ROWS, same_data_type=(),
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(FUNCTION, AXES), default_output_type=UINT32,
    support_by="Function", support_groups=_GROUPS, shape_rule=reduce_shape, array_kernel=reduce_kernel,
    gpu_array_kernel=reduce_gpu_kernel,
    exactness=APPROXIMATE,
    tolerance=Tolerance(
        "ulp", 1, 1,
        "WebNN's reduction tolerances (web-platform-tests webnn/conformance_tests/reduce_*.https.any.js), which "
        "grow with the N elements reduced: N ULP for SUM, MULTIPLY and L1, N + 2 for AVERAGE, 2N + 1 for L2, 2N "
        "for SUM_SQUARE, N + 18 for LOG_SUM, 2N + 18 for LOG_SUM_EXP; MAX and MIN select an element: exact"),
    tolerance_scale=reduce_tolerance_scale, dask_layout="whole_axes",
    dask_axes=reduced_axes, sum_bound=REDUCE_SUM_BOUND,
    notes=(
        "Axes may be left out in the API and on the command line: every axis is reduced (DirectML's desc needs "
        "them; a DxDispatch model must give Axes and AxisCount).",
        "FLOAT16 and FLOAT32 inputs accumulate in FLOAT32 and are rounded once to the output type; integer SUM, "
        "MULTIPLY, L1 and SUM_SQUARE (INT32/UINT32, and INT64/UINT64 from 5_0) wrap modulo 2^width (two's "
        "complement; L1 of INT_MIN is INT_MIN). The page does not say how DirectML adds up.",
        "MAX and MIN skip NaN, as ELEMENT_WISE_MAX and MIN return the non-NaN operand: NaN only where every "
        "reduced element is NaN (the sign of a zero maximum is not promised). ARGMAX and ARGMIN skip NaN too, "
        "give the first index among equal values (as ARGMAX/ARGMIN with AxisDirection INCREASING, which their "
        "pages call equivalent) and 0 where every element is NaN. The index counts over the reduced axes as "
        "one flattened, row-major axis. The other functions propagate NaN.",
        "LOG_SUM_EXP is computed as max + log(sum(exp(x - max))), which equals the formula wherever it does not "
        "overflow, and stays finite where the plain sum of exponentials would overflow.",
        "LOG_SUM and LOG_SUM_EXP are checked within 2n eps + 2n eps * |expected| (n the elements reduced, eps "
        "the output type's machine epsilon): log turns the sum's relative error into an absolute one, so a result "
        "near 0 (a sum near 1) may be many ULP off while the sum is within 2 ULP per element.",
        "The output type is chosen with --output-dtype only for ARGMAX and ARGMIN (default UINT32, which every "
        "level allows); for the other functions it is the input's type.",
        "Support by Function follows the newest page: L1 and SUM_SQUARE take INT32/INT64/UINT32/UINT64 from 5_0 "
        "(an older version of the page grouped them with AVERAGE, floats only); MIN, MAX, SUM and MULTIPLY gain "
        "64-bit integers at 5_0, ARGMIN/ARGMAX at 4_1.",
    ),
)

ARGMIN = Operator(
    name="ARGMIN", enum_value=137, family="reduction", prefix="",
    summary="the index of the smallest element along Axes (ties: by AxisDirection)",
    formula="OutputTensor[i] = the position of min(InputTensor[j] for every j equal to i outside Axes) within "
            "the reduced axes; reduced axes keep size 1",
    introduced=_ARGMIN_MAX_ROWS[-1].level, inputs=("InputTensor",), support=_ARGMIN_MAX_ROWS, same_data_type=(),
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(AXES, ARG_DIRECTION), default_output_type=UINT32,
    shape_rule=reduce_shape, dask_layout="whole_axes", dask_axes=reduced_axes,
    array_kernel=argmin_kernel,
    exactness=EXACT,
    notes=("AxisDirection INCREASING gives the first of equal smallest values, DECREASING the last (the page: "
           "argmin({1,2,3,2,1}) is 0, or 4). Axes left out: every axis.", _NAN_SELECTION, _FLATTENED, _INDEX_TYPE),
)

ARGMAX = Operator(
    name="ARGMAX", enum_value=138, family="reduction", prefix="",
    summary="the index of the largest element along Axes (ties: by AxisDirection)",
    formula="OutputTensor[i] = the position of max(InputTensor[j] for every j equal to i outside Axes) within "
            "the reduced axes; reduced axes keep size 1",
    introduced=_ARGMIN_MAX_ROWS[-1].level, inputs=("InputTensor",), support=_ARGMIN_MAX_ROWS, same_data_type=(),
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(AXES, ARG_DIRECTION), default_output_type=UINT32,
    shape_rule=reduce_shape, dask_layout="whole_axes", dask_axes=reduced_axes,
    array_kernel=argmax_kernel,
    exactness=EXACT,
    notes=("AxisDirection INCREASING gives the first of equal largest values, DECREASING the last (the page: "
           "argmax({3,2,1,2,3}) is 0, or 4). Axes left out: every axis.", _NAN_SELECTION, _FLATTENED, _INDEX_TYPE),
)


_SOFTMAX_TOLERANCE = Tolerance(
    "ulp", 1, 1,
    "WebNN's softmax tolerance (web-platform-tests webnn/conformance_tests/softmax.https.any.js): 3N + 3 ULP for "
    "groups of N elements")
_LOG_SOFTMAX_TOLERANCE = Tolerance(
    "ulp", 1, 1,
    "dmlcli's choice after WebNN's softmax tolerance (WebNN has no log-softmax): 3N + 3 ULP for groups of N "
    "elements. A result near 0 (the largest element of a group whose others are far smaller) carries the "
    "absolute error of log(sum), which is many ULP of so small a value: check such results with --tolerance "
    "atol:X")
_EFFECTIVE_RANK = ("InputTensor's effective rank (its DimensionCount without the leftmost sizes of 1) is at most 2: "
                   "{1, 1, B, W} works as {B, W}; each row is normalised along the last axis.")
_F16 = "FLOAT16 inputs are computed in FLOAT32 and rounded once."
_SOFTMAX_NAN = ("Computed as exp(x - max) / sum(exp(x - max)) (the formula, without overflow for large inputs). "
                "A NaN or +inf in a group makes that group's results NaN (+inf - +inf); -inf elements give 0, a "
                "group of nothing but -inf gives NaN.")
_LOG_SOFTMAX_NAN = ("Computed as (x - max) - log(sum(exp(x - max))). A NaN or +inf in a group makes that group's "
                    "results NaN; -inf elements give -inf, a group of nothing but -inf gives NaN.")
_HARDMAX_RULES = ("1 at the first largest element of each group (ties: the first, as the page says), 0 elsewhere. "
                  "NaN is skipped, as ARGMAX skips it: a group of nothing but NaN puts its 1 first.")
_AXES_NOTE = ("Axes may be left out in the API and on the command line: the last axis, as the operator without "
              "1 (DirectML's desc needs them). Several Axes form one group (the sum runs over the whole block).")


def _softmax_entry(name, enum_value, summary, formula, kernel, exactness, tolerance, notes, one: bool,
                   gpu_kernel=None, sum_bound=None, planned_kernel=None):
    return Operator(
        name=name, enum_value=enum_value, family="reduction", prefix="ACTIVATION", summary=summary,
        formula=formula, introduced=(_SOFTMAX1_ROWS if one else _SOFTMAX_ROWS)[-1].level, inputs=("InputTensor",),
        support=_SOFTMAX1_ROWS if one else _SOFTMAX_ROWS, same_data_type=IO, same_sizes=(), cpu_kernel=None,
        cuda_body="", parameters=(SOFTMAX_AXES,) if one else (), shape_rule=axes_shape if one else last_axis_shape,
        array_kernel=kernel, gpu_array_kernel=gpu_kernel, exactness=exactness, tolerance=tolerance,
        tolerance_scale=softmax_tolerance_scale if tolerance is not None else None, dask_layout="whole_axes",
        dask_axes=group_axes, notes=((_AXES_NOTE,) if one else (_EFFECTIVE_RANK,)) + notes, sum_bound=sum_bound,
        planned_kernel=planned_kernel)


_SOFTMAX_FORMULA = "OutputTensor[i] = exp(x[i]) / sum(exp(x[j]) for j in i's group)"
_LOG_SOFTMAX_FORMULA = "OutputTensor[i] = ln(exp(x[i]) / sum(exp(x[j]) for j in i's group))"
_HARDMAX_FORMULA = "OutputTensor[i] = 1 where i is the first largest element of its group, else 0"

SOFTMAX = _softmax_entry("SOFTMAX", 48, "softmax along the last axis (effective rank at most 2)",
                         _SOFTMAX_FORMULA + " (the group: i's row along the last axis)", softmax_kernel,
                         APPROXIMATE, _SOFTMAX_TOLERANCE, (_SOFTMAX_NAN, _F16), one=False,
                         gpu_kernel=softmax_gpu_kernel, sum_bound=SOFTMAX_SUM_BOUND, planned_kernel=softmax_planned)
SOFTMAX1 = _softmax_entry("SOFTMAX1", 158, "softmax over the blocks that Axes span",
                          _SOFTMAX_FORMULA + " (the group: the elements equal to i outside Axes)", softmax_kernel,
                          APPROXIMATE, _SOFTMAX_TOLERANCE, (_SOFTMAX_NAN, _F16), one=True,
                          gpu_kernel=softmax_gpu_kernel, sum_bound=SOFTMAX_SUM_BOUND, planned_kernel=softmax_planned)
LOG_SOFTMAX = _softmax_entry("LOG_SOFTMAX", 41, "natural log of softmax along the last axis (effective rank at "
                             "most 2)", _LOG_SOFTMAX_FORMULA + " (the group: i's row along the last axis)",
                             log_softmax_kernel, APPROXIMATE, _LOG_SOFTMAX_TOLERANCE, (_LOG_SOFTMAX_NAN, _F16),
                             one=False, gpu_kernel=log_softmax_gpu_kernel, sum_bound=LOG_SOFTMAX_SUM_BOUND)
LOG_SOFTMAX1 = _softmax_entry("LOG_SOFTMAX1", 159, "natural log of softmax over the blocks that Axes span",
                              _LOG_SOFTMAX_FORMULA + " (the group: the elements equal to i outside Axes)",
                              log_softmax_kernel, APPROXIMATE, _LOG_SOFTMAX_TOLERANCE, (_LOG_SOFTMAX_NAN, _F16),
                              one=True, gpu_kernel=log_softmax_gpu_kernel, sum_bound=LOG_SOFTMAX_SUM_BOUND)
HARDMAX = _softmax_entry("HARDMAX", 36, "1 at the first largest element of each row (effective rank at most 2), 0 "
                         "elsewhere", _HARDMAX_FORMULA + " (the group: i's row along the last axis)", hardmax_kernel,
                         EXACT, None, (_HARDMAX_RULES,), one=False)
HARDMAX1 = _softmax_entry("HARDMAX1", 160, "1 at the first largest element of each block that Axes span, 0 "
                          "elsewhere", _HARDMAX_FORMULA + " (the group: the elements equal to i outside Axes, "
                          "counted row-major)", hardmax_kernel, EXACT, None, (_HARDMAX_RULES,), one=True)

_CUMULATIVE_NOTES = (
    "The page allows in-place execution: in a DxDispatch model the output may alias the input exactly.",
    "AxisDirection DECREASING runs from the last index down: output k then tallies elements k to the end "
    "(exclusive: k + 1 to the end, the last output being the identity).",
    "FLOAT16 is computed in FLOAT32 and rounded once per output; FLOAT32 runs in FLOAT32 (a running tally in "
    "index order on the CPU; the GPU's scan adds in another order, within the tolerance). Integers wrap modulo "
    "2^width (two's complement). A NaN propagates to every later output of its run.",
)

CUMULATIVE_SUMMATION = Operator(
    name="CUMULATIVE_SUMMATION", enum_value=105, family="reduction", prefix="",
    summary="the running sum along Axis (exclusive and reversed by its fields)",
    formula="OutputTensor[k] = InputTensor[0] + ... + InputTensor[k] along Axis (HasExclusiveSum: up to k - 1; "
            "DECREASING: from the end down to k)",
    introduced=_CUMSUM_ROWS[-1].level, inputs=("InputTensor",), support=_CUMSUM_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(CUMULATIVE_AXIS, RUN_DIRECTION, EXCLUSIVE_SUM),
    shape_rule=cumulative_shape, array_kernel=cumsum_kernel, gpu_array_kernel=cumsum_gpu_kernel, exactness=COMPOSITE,
    in_place=True,
    tolerance=Tolerance("ulp", 1, 1, "WebNN's cumulativeSum tolerance (web-platform-tests webnn/conformance_tests/"
                                     "cumulative_sum.https.any.js): N - 1 ULP along an axis of N elements"),
    tolerance_scale=cumsum_tolerance_scale, dask_layout="whole_axes", dask_axes=cumulative_axes,
    sum_bound=CUMSUM_SUM_BOUND,
    notes=("HasExclusiveSum true: each output leaves its own element out (the first output is 0, the total is "
           "not written).",) + _CUMULATIVE_NOTES,
)

CUMULATIVE_PRODUCT = Operator(
    name="CUMULATIVE_PRODUCT", enum_value=145, family="reduction", prefix="",
    summary="the running product along Axis (exclusive and reversed by its fields)",
    formula="OutputTensor[k] = InputTensor[0] * ... * InputTensor[k] along Axis (HasExclusiveProduct: up to k - 1; "
            "DECREASING: from the end down to k)",
    introduced=_CUMPROD_ROWS[-1].level, inputs=("InputTensor",), support=_CUMPROD_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(CUMULATIVE_AXIS, RUN_DIRECTION, EXCLUSIVE_PRODUCT),
    shape_rule=cumulative_shape, array_kernel=cumprod_kernel, exactness=COMPOSITE, in_place=True,
    tolerance=Tolerance("ulp", 1, 1, "dmlcli's choice after WebNN's reduceProduct tolerance (N ULP for N "
                                     "elements; WebNN has no cumulative product): N ULP along an axis of N "
                                     "elements"),
    tolerance_scale=cumprod_tolerance_scale, dask_layout="whole_axes", dask_axes=cumulative_axes,
    notes=("HasExclusiveProduct true: each output leaves its own element out (the first output is 1, the total "
           "is not written).",) + _CUMULATIVE_NOTES,
)

OPERATORS = (REDUCE, ARGMIN, ARGMAX, SOFTMAX, SOFTMAX1, LOG_SOFTMAX, LOG_SOFTMAX1, HARDMAX, HARDMAX1,
             CUMULATIVE_SUMMATION, CUMULATIVE_PRODUCT)
