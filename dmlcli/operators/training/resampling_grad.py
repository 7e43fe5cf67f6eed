"""RESAMPLE_GRAD and RESAMPLE_GRAD1: the gradients of RESAMPLE1 and RESAMPLE2 with respect to their input.

Sources: DirectML's pages (MicrosoftDocs/sdk-api ns-directml-dml_resample_grad_operator_desc.md at 2db4b020;
MicrosoftDocs/windows-ai-docs docs/directml/api/ns-directml-dml_resample_grad1_operator_desc.md at fdac5cdc, and
ns-directml-dml_resample2_operator_desc.md there for RoundingDirection), DirectML.h for the fields and the
DML_OPERATOR_TYPE values (RESAMPLE_GRAD 134, RESAMPLE_GRAD1 162), and onnxruntime's DirectML provider
(onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorResize.cpp) for what RoundingDirection
does with InputPixelOffsets.

A resampling is linear in its input and separable: along each resampled dimension output element o reads input
elements through taps (resampling/entries.py's coordinate rule: LINEAR two neighbours with weights 1 - w and w,
NEAREST_NEIGHBOR one element). The gradient is its transpose: along each dimension, the last first (the forward
resamples the first dimension first), every input element receives the incoming gradient of each output that
read it times the weight it was read with (adjoint.py).
"""

from __future__ import annotations

import numpy as np

from ...data_types import FLOATS
from ..resampling.entries import (INPUT_PIXEL_OFFSETS, INTERPOLATION_MODE, OUTPUT_PIXEL_OFFSETS, RESAMPLE1_SCALES,
                                  ROUNDING_DIRECTION, resample_coordinates, resample1_shape, resample_scales)
from ..table.schema import COMPOSITE, DIMS_4, Operator, rows
from ..table.shaped import ShapeQuery
from .adjoint import (FAMILY, AxisTaps, adjoint_along_axis, forward_rule, gradient_sum_bound,
                      stated_gradient_sizes, sum_tolerance)

GRADIENTS = ("InputGradientTensor", "OutputGradientTensor")
_DIMS_1_TO_4 = (1, 2, 3, 4)

_GRAD_ROWS = rows(("3_0", DIMS_4, {"InputGradientTensor": FLOATS, "OutputGradientTensor": FLOATS}))
_GRAD1_ROWS = rows(("5_1", _DIMS_1_TO_4, {"InputGradientTensor": FLOATS, "OutputGradientTensor": FLOATS}))


# ---------------------------------------------------------------- the forward's taps, one dimension at a time


def _nearest_index(x: np.ndarray, in_size: int, rounding: str | None) -> np.ndarray:
    """NEAREST_NEIGHBOR's element for the (clamped) coordinates x: RESAMPLE1's floor(x + 0.5) (rounding None), or
    RESAMPLE2's floor (DECREASING) or ceil (INCREASING)."""
    if rounding is None:
        return np.minimum(np.floor(x + np.float32(0.5)).astype(np.int64), in_size - 1)
    return (np.floor(x) if rounding == "DECREASING" else np.ceil(x)).astype(np.int64)


def axis_taps(in_size: int, out_size: int, scale, input_offset, output_offset, linear: bool,
              rounding: str | None) -> AxisTaps:
    """Which input elements each output element reads along one dimension, and with which weights: the
    resampling family's coordinates (resample_coordinates, FLOAT32, clamped) and its neighbours and weights."""
    x = resample_coordinates(np, out_size, in_size, scale, input_offset, output_offset)
    if not linear:
        return AxisTaps.nearest(_nearest_index(x, in_size, rounding))
    low = np.floor(x).astype(np.int64)
    high = np.minimum(low + 1, in_size - 1)
    return AxisTaps.linear(low, high, (x - low.astype(np.float32)).astype(np.float32))


def resampled_axes(input_shape, output_shape, params):
    """(dimension, taps) for each dimension the forward resamples (not the identity), in the forward's order."""
    rank = len(input_shape)
    scales = resample_scales(input_shape, output_shape, params["Scales"])
    input_offsets = params.get("InputPixelOffsets") or (0.5,) * rank
    output_offsets = params.get("OutputPixelOffsets") or (-0.5,) * rank
    linear = params["InterpolationMode"] == "LINEAR"
    found = []
    for axis in range(rank):
        # As resample_values skips them: the same Sizes, scale 1 and offsets that cancel map each element to itself.
        if (output_shape[axis] == input_shape[axis] and float(scales[axis]) == 1.0
                and float(input_offsets[axis]) + float(output_offsets[axis]) == 0.0):
            continue
        found.append((axis, axis_taps(input_shape[axis], output_shape[axis], scales[axis], input_offsets[axis],
                                      output_offsets[axis], linear, params.get("RoundingDirection"))))
    return found


# ---------------------------------------------------------------- shape rules, tolerance and kernel


def _grad_shape(query: ShapeQuery, operator: str, forward: str) -> dict:
    sizes = stated_gradient_sizes(query, operator, forward)
    forward_rule(resample1_shape, query, sizes, query.shape("InputGradientTensor"))
    return {"OutputGradientTensor": sizes}


def resample_grad_shape(query: ShapeQuery) -> dict:
    return _grad_shape(query, "RESAMPLE_GRAD", "RESAMPLE1")


def resample_grad1_shape(query: ShapeQuery) -> dict:
    return _grad_shape(query, "RESAMPLE_GRAD1", "RESAMPLE2")


def resample_grad_tolerance_scale(call) -> int:
    """The FLOAT32 roundings of one element, summed over the resampled dimensions: a dimension whose adjoint adds
    m terms to an element rounds m + 1 times for LINEAR (m - 1 sums, a product per term, 1 - w) and m - 1 times
    for NEAREST_NEIGHBOR (sums of copies: 0 where each element is read once, an exact result)."""
    linear = call.parameters["InterpolationMode"] == "LINEAR"
    axes = resampled_axes(call.tensors["OutputGradientTensor"].shape, call.tensors["InputGradientTensor"].shape,
                          call.parameters)
    return sum(taps.most_per_element() + (1 if linear else -1) for _, taps in axes)


def resample_grad_kernel(xp, inputs, outputs, params):
    (incoming,) = inputs
    (out,) = outputs
    work = incoming.astype(xp.float32)
    for axis, taps in reversed(resampled_axes(out.shape, incoming.shape, params)):
        work = adjoint_along_axis(xp, work, axis, out.shape[axis], taps)
    return (xp.ascontiguousarray(work.astype(out.data_type.numpy_dtype, copy=False)),)


# ---------------------------------------------------------------- entries

_ADJOINT_NOTE = (
    "The adjoint of dmlcli's {forward} (the page: 'the weighted contributions of that element to the OutputTensor'): "
    "along each resampled dimension, the last first, each element of OutputGradientTensor receives the incoming "
    "gradient of every output element that read it, times the weight it was read with (LINEAR: 1 - w as the lower "
    "neighbour, w as the upper, w = x - floor(x) in FLOAT32; NEAREST_NEIGHBOR: 1). Each product is rounded to "
    "FLOAT32 and an element's terms are added to a FLOAT32 zero in increasing order of the output element that "
    "read it (its share as the lower neighbour before its share as the upper one where both are the same element, "
    "at the last element); FLOAT16 is computed in FLOAT32 and rounded once. NaN and infinities propagate as the "
    "sums carry them (an infinite gradient times a weight of 0 is NaN, as the forward's 0 x inf is).")
_SIZES_NOTE = (
    "DirectML takes OutputGradientTensor's Sizes from its tensor desc (the forward's input Sizes, which the "
    "incoming gradient's do not determine): a DxDispatch model gives them; the API and the command line state them "
    "with --output-shape (output_shape=), required. They must be what {forward}'s rule accepts for an input of "
    "those Sizes and an output of InputGradientTensor's (the same DimensionCount). Scales, InputPixelOffsets and "
    "OutputPixelOffsets: one value per dimension; left out in the API and on the command line, Scales are "
    "InputGradientTensor's Sizes over OutputGradientTensor's and the offsets 0.5 and -0.5 (pixel centres).")
_COORDINATES_NOTE = (
    "The coordinates are the resampling family's: output coordinate o reads x = (o - OutputPixelOffset) / Scale - "
    "InputPixelOffset in FLOAT32, clamped to [0, size - 1].")

_SUM_BOUND = gradient_sum_bound(resample_grad_tolerance_scale, "the roundings of an element summed over the "
                                 "resampled dimensions (m + 1 for m linear terms, m - 1 for m nearest copies)")

RESAMPLE_GRAD = Operator(
    name="RESAMPLE_GRAD", enum_value=134, family=FAMILY, prefix="",
    summary="the gradient of RESAMPLE1 with respect to its input (the transpose of the resampling)",
    formula="OutputGradientTensor[i] = sum over output elements o that read i of InputGradientTensor[o] * (the "
            "weight o read i with), dimension by dimension",
    introduced=_GRAD_ROWS[-1].level, inputs=("InputGradientTensor",), output="OutputGradientTensor",
    support=_GRAD_ROWS, same_data_type=GRADIENTS, same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INTERPOLATION_MODE, RESAMPLE1_SCALES, INPUT_PIXEL_OFFSETS, OUTPUT_PIXEL_OFFSETS),
    shape_rule=resample_grad_shape, array_kernel=resample_grad_kernel, exactness=COMPOSITE,
    tolerance=sum_tolerance("the products and sums of an element"), tolerance_scale=resample_grad_tolerance_scale,
    sum_bound=_SUM_BOUND,
    notes=(_ADJOINT_NOTE.format(forward="RESAMPLE1"), _SIZES_NOTE.format(forward="RESAMPLE1"), _COORDINATES_NOTE,
           "NEAREST_NEIGHBOR reads element floor(x + 0.5), a tie taking the higher index, as dmlcli's RESAMPLE1 "
           "does. The page's example (a nearest 1.5x width, 0.5x height resampling of [[1, 2], [3, 4]] giving "
           "[1, 1, 2], whose gradient of [4, 5, 6] is [[9, 6], [0, 0]]) takes the lower index at its two ties (x = "
           "0.5); dmlcli keeps its forward's rule, under which that example's gradient is [[0, 0], [4, 11]].",
           "The page's support table takes 4 dimensions (FLOAT32, FLOAT16) and has no later rows; RESAMPLE_GRAD1 "
           "(5_1) takes 1 to 4."),
)

RESAMPLE_GRAD1 = Operator(
    name="RESAMPLE_GRAD1", enum_value=162, family=FAMILY, prefix="",
    summary="the gradient of RESAMPLE2 with respect to its input, with RESAMPLE2's rounding direction",
    formula=RESAMPLE_GRAD.formula,
    introduced=_GRAD1_ROWS[-1].level, inputs=("InputGradientTensor",), output="OutputGradientTensor",
    support=_GRAD1_ROWS, same_data_type=GRADIENTS, same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INTERPOLATION_MODE, ROUNDING_DIRECTION, RESAMPLE1_SCALES, INPUT_PIXEL_OFFSETS, OUTPUT_PIXEL_OFFSETS),
    shape_rule=resample_grad1_shape, array_kernel=resample_grad_kernel, exactness=COMPOSITE,
    tolerance=sum_tolerance("the products and sums of an element"), tolerance_scale=resample_grad_tolerance_scale,
    sum_bound=_SUM_BOUND,
    notes=(_ADJOINT_NOTE.format(forward="RESAMPLE2 (RESAMPLE1 with RoundingDirection)"),
           _SIZES_NOTE.format(forward="RESAMPLE2"), _COORDINATES_NOTE,
           "RoundingDirection (RESAMPLE2's page): NEAREST_NEIGHBOR reads element floor(x) (DECREASING) or ceil(x) "
           "(INCREASING) of the clamped coordinate; LINEAR ignores it. onnxruntime's DirectML provider "
           "(DmlOperatorResize.cpp) maps ONNX's nearest modes this way: floor DECREASING, ceil INCREASING, "
           "round_prefer_ceil DECREASING with InputPixelOffsets - 0.5, round_prefer_floor INCREASING with "
           "InputPixelOffsets + 0.5. So RESAMPLE_GRAD's NEAREST_NEIGHBOR is RESAMPLE_GRAD1's DECREASING with "
           "InputPixelOffsets lowered by 0.5; the page says OutputPixelOffsets, which agrees only where Scale is 1. "
           "Left out in the API and on the command line, RoundingDirection is DECREASING.",
           "No dmlcli RESAMPLE2 existed when this entry was written: its forward is read from RESAMPLE2's page and "
           "the rule above, over the resampling family's coordinates. The page's example (RESAMPLE_GRAD's: [4, 5, 6] "
           "-> [[9, 6], [0, 0]]) is what DECREASING gives with the default offsets."),
)

OPERATORS = (RESAMPLE_GRAD, RESAMPLE_GRAD1)
