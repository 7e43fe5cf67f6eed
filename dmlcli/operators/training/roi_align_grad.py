"""ROI_ALIGN_GRAD: the gradients of ROI_ALIGN and ROI_ALIGN1 with respect to their input and their regions.

Sources: DirectML's page (MicrosoftDocs/windows-ai-docs, docs/directml/api/
ns-directml-dml_roi_align_grad_operator_desc.md at aa654162: fields, example, the pseudo-code of
OutputROIGradientTensor, the optional tensors and the support table) and DirectML.h (the fields, three of them
_Maybenull_, and the DML_OPERATOR_TYPE value 150). The regions' samples are the pooling family's ROI_ALIGN1
reading (pooling/entries.py: sample_axis, bilinear_terms, region_samples, region_corners).

Per region, on the host as the forward: the incoming gradient of each output element is spread over its samples
(AVERAGE: divided by their count; MAX: all of it to the first sample that is the maximum), then carried back to the
input through the transpose of the sampling, along x and then along y (adjoint.py: bilinear taps are separable),
and added to the region's batch; regions are added in order. The regions' gradient needs the input's values: the
derivative of each bilinear sample with respect to its position, times the position's derivative with respect to
each corner.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOATS, UINT32
from ..pooling.entries import (ALIGN_TO_CORNERS, INPUT_PIXEL_OFFSET, INTERPOLATION, MAXIMUM_SAMPLES, MINIMUM_SAMPLES,
                               OUTPUT_PIXEL_OFFSET, ROI_REDUCTION, SPATIAL_SCALE_X, SPATIAL_SCALE_Y, SampleAxis,
                               check_sample_grid, bilinear_terms, region_corners, region_samples, roi_align_shape,
                               sample_axis)
from ..table.schema import COMPOSITE, DIMS_4, Operator, rows
from ..table.shaped import RuleViolation, ShapeQuery
from .adjoint import (FAMILY, AxisTaps, adjoint_along_axis, forward_rule, gradient_sum_bound,
                      stated_gradient_sizes, sum_tolerance)

_ROI_DIMS = (2, 3, 4)
_ROWS = rows(("4_1", {"InputTensor": (DIMS_4, FLOATS), "InputGradientTensor": (DIMS_4, FLOATS),
                      "ROITensor": (_ROI_DIMS, FLOATS), "BatchIndicesTensor": ((1, 2, 3, 4), (UINT32,)),
                      "OutputGradientTensor": (DIMS_4, FLOATS), "OutputROIGradientTensor": (_ROI_DIMS, FLOATS)}))
_TIED = ("InputGradientTensor", "InputTensor", "OutputGradientTensor", "OutputROIGradientTensor", "ROITensor")


# ---------------------------------------------------------------- shape rule and tolerance


def roi_align_grad_shape(query: ShapeQuery) -> dict:
    has_input = "InputTensor" in query.shapes
    if not has_input and query.parameters["ReductionFunction"] == "MAX":
        raise RuleViolation("ReductionFunction MAX needs InputTensor, the forward's input, whose samples pick each "
                            "output's maximum (the page: InputTensor must be supplied when ReductionFunction is MAX)")
    if not has_input and query.asks_for("OutputROIGradientTensor"):
        raise RuleViolation("OutputROIGradientTensor needs InputTensor, the forward's input (the page: InputTensor "
                            "must be supplied when OutputROIGradientTensor is)")
    sizes = (tuple(query.shape("InputTensor")) if has_input
             else stated_gradient_sizes(query, "ROI_ALIGN_GRAD", "ROI_ALIGN1"))
    forward_rule(roi_align_shape, query, sizes, query.shape("InputGradientTensor"))
    found = {"OutputGradientTensor": sizes}
    if has_input:  # without it the call has no regions' gradient (an optional output, left out)
        found["OutputROIGradientTensor"] = tuple(query.shape("ROITensor"))
    return found


def _samples_bound(size: int, out_size: int, params) -> int:
    """Samples per output element along an axis for a region the size of the input (one more for rounding)."""
    wanted = math.ceil(size / out_size) + 1
    return min(max(wanted, params["MinimumSamplesPerOutput"]), params["MaximumSamplesPerOutput"])


def roi_align_grad_tolerance_scale(call) -> int:
    """A worst case from the Sizes (the regions themselves are data): an input element sums up to 4 taps of every
    sample of every region (regions shrunk onto one pixel), and a corner's gradient ChannelCount x samples terms;
    the samples of a region as large as the input, + 4 roundings of each term."""
    regions = call.tensors["ROITensor"].shape[-2]
    # InputTensor's Sizes are OutputGradientTensor's; either may be left out, not both (the shape rule).
    channels, height, width = call.tensors.get("InputTensor", call.tensors.get("OutputGradientTensor")).shape[1:]
    out_h, out_w = call.tensors["InputGradientTensor"].shape[2:]
    samples = (out_h * _samples_bound(height, out_h, call.parameters)
               * out_w * _samples_bound(width, out_w, call.parameters))
    return max(4 * regions, channels) * samples + 4


# ---------------------------------------------------------------- kernel (xp is numpy or cupy)


def _host(array) -> np.ndarray:
    return np.asarray(array.get() if hasattr(array, "get") else array)


def _sample_gradient(xp, incoming, plane, y: SampleAxis, x: SampleAxis, params):
    """The incoming gradient each sample of one region carries ({ ChannelCount, y samples, x samples }, FLOAT32),
    and where it reaches the output (None: every sample). AVERAGE: the output's gradient divided by its sample
    count (one FLOAT32 division); MAX: the output's gradient at its first maximal sample (row-major over its y and
    x samples; NaN the maximum where a sample is NaN, as the forward's maximum), 0 at the others."""
    gradient = incoming.astype(xp.float32)
    count = y.samples * x.samples
    channels, out_h, out_w = gradient.shape
    if params["ReductionFunction"] == "AVERAGE":
        share = gradient / xp.float32(count)
        return xp.repeat(xp.repeat(share, y.samples, axis=1), x.samples, axis=2), None
    values = region_samples(xp, plane, y, x, params["InterpolationMode"] == "LINEAR", xp.float32(0))
    grouped = values.reshape(channels, out_h, y.samples, out_w, x.samples).transpose(0, 1, 3, 2, 4).reshape(
        channels, out_h, out_w, count)
    best = xp.max(grouped, axis=-1, keepdims=True)
    maximal = (grouped == best) | (xp.isnan(grouped) & xp.isnan(best))
    first = xp.argmax(maximal.astype(xp.int8), axis=-1)
    chosen = xp.arange(count)[None, None, None, :] == first[..., None]

    def as_samples(array):
        return array.reshape(channels, out_h, out_w, y.samples, x.samples).transpose(0, 1, 3, 2, 4).reshape(
            channels, out_h * y.samples, out_w * x.samples)

    return as_samples(xp.where(chosen, gradient[..., None], xp.float32(0))), as_samples(chosen)


def _sample_taps(axis: SampleAxis, linear: bool) -> AxisTaps:
    """The forward's taps along one axis, without the samples outside the input (they read a constant)."""
    taps = AxisTaps.linear(axis.low, axis.high, axis.weight) if linear else AxisTaps.nearest(axis.nearest)
    return taps.keep(~axis.outside)


def _input_gradient(xp, carried, y: SampleAxis, x: SampleAxis, linear: bool, height: int, width: int):
    """The samples' gradient carried back to the input plane: the transpose of the sampling along x, then along y."""
    along_x = adjoint_along_axis(xp, carried, 2, width, _sample_taps(x, linear))
    return adjoint_along_axis(xp, along_x, 1, height, _sample_taps(y, linear))


def _corner_gradient(xp, carried, reached, neighbours, y: SampleAxis, x: SampleAxis, params) -> np.ndarray:
    """d(loss)/d(x1, y1, x2, y2) of one region (float64): each sample's gradient times the bilinear value's
    derivative along x (or y) -- the page's imageGradX = (1 - yLerp)(topRight - topLeft) + yLerp(bottomRight -
    bottomLeft), imageGradY likewise, in FLOAT32 -- where the clamp lets the sample move, summed over channels and
    samples in float64, times d(position)/d(corner): 1 - fraction for x1 (y1), fraction for x2 (y2), times
    SpatialScaleX (Y)."""
    (_, top_left), (_, top_right), (_, bottom_left), (_, bottom_right) = neighbours
    one = xp.float32(1)
    wy, wx = xp.asarray(y.weight)[:, None], xp.asarray(x.weight)[None, :]
    moves_x = (x.slope[None, :] > 0) & ~y.outside[:, None]
    moves_y = (y.slope[:, None] > 0) & ~x.outside[None, :]
    totals = []
    for moves, slope_of_value in ((moves_x, (one - wy) * (top_right - top_left) + wy * (bottom_right - bottom_left)),
                                  (moves_y, (one - wx) * (bottom_left - top_left) + wx * (bottom_right - top_right))):
        where = xp.asarray(moves) if reached is None else reached & xp.asarray(moves)
        terms = xp.where(where, carried * slope_of_value, xp.float32(0))
        totals.append(terms)
    per_x = _host(xp.sum(totals[0], axis=(0, 1), dtype=xp.float64))
    per_y = _host(xp.sum(totals[1], axis=(0, 2), dtype=xp.float64))
    scale_x, scale_y = float(np.float32(params["SpatialScaleX"])), float(np.float32(params["SpatialScaleY"]))
    return np.array([scale_x * float(np.dot(per_x, 1.0 - x.fraction)), scale_y * float(np.dot(per_y, 1.0 - y.fraction)),
                     scale_x * float(np.dot(per_x, x.fraction)), scale_y * float(np.dot(per_y, y.fraction))])


def roi_align_grad_kernel(xp, inputs, outputs, params):
    """The outputs the call asks for (each _Maybenull_), in DESC order: the input's gradient where asked (else not
    summed), the corners' gradient where asked (the shape rule gives it only with InputTensor)."""
    x, incoming, rois, batches = inputs  # x is None where the call leaves InputTensor out
    by_name = {info.name: info for info in outputs}
    gradient_info = by_name.get("OutputGradientTensor")
    corners_info = by_name.get("OutputROIGradientTensor")
    host_rois = _host(rois).astype(np.float32).reshape(-1, 4)
    host_batches = _host(batches).reshape(-1)
    # OutputGradientTensor has InputTensor's Sizes; without InputTensor the call asks for OutputGradientTensor.
    batch_count, channels, height, width = x.shape if x is not None else gradient_info.shape
    out_h, out_w = incoming.shape[2:]
    align = bool(params["AlignRegionsToCorners"])
    linear = params["InterpolationMode"] == "LINEAR"
    total = None if gradient_info is None else xp.zeros(gradient_info.shape, dtype=xp.float32)
    corner_gradients = np.zeros((len(host_rois), 4), dtype=np.float64)
    for r, (roi, batch) in enumerate(zip(host_rois, host_batches)):
        if int(batch) >= batch_count:
            continue  # the forward reads OutOfBoundsInputValue everywhere: a constant, no gradient
        x1, y1, x2, y2 = region_corners(roi, params)
        check_sample_grid(r, (y1, y2, out_h), (x1, x2, out_w), channels, params)
        y_axis = sample_axis(y1, y2, out_h, height, params, align)
        x_axis = sample_axis(x1, x2, out_w, width, params, align)
        plane = None if x is None else x[int(batch)].astype(xp.float32, copy=False)
        carried, reached = _sample_gradient(xp, incoming[r], plane, y_axis, x_axis, params)
        if total is not None:
            total[int(batch)] += _input_gradient(xp, carried, y_axis, x_axis, linear, height, width)
        if corners_info is not None and linear:  # NEAREST_NEIGHBOR's samples do not move with the corners: 0
            neighbours = list(bilinear_terms(xp, plane, y_axis, x_axis))
            corner_gradients[r] = _corner_gradient(xp, carried, reached, neighbours, y_axis, x_axis, params)
    found = ()
    if gradient_info is not None:
        found += (xp.ascontiguousarray(total.astype(gradient_info.data_type.numpy_dtype, copy=False)),)
    if corners_info is not None:
        # float64 sums rounded once to the output type
        corner_result = corner_gradients.astype(corners_info.data_type.numpy_dtype).reshape(corners_info.shape)
        found += (xp.asarray(corner_result),)
    return found


# ---------------------------------------------------------------- the entry

ROI_ALIGN_GRAD = Operator(
    name="ROI_ALIGN_GRAD", enum_value=150, family=FAMILY, prefix="",
    summary="the gradients of ROI_ALIGN1 with respect to its input and to its regions' corners",
    formula="OutputGradientTensor[b, c] = sum over regions r of batch b and their samples s of (InputGradientTensor["
            "r, c, output of s] / samples per output, or all of it at the output's maximal sample) x (the weight "
            "s reads each element with); OutputROIGradientTensor[r] = d(sum of InputGradientTensor x ROI_ALIGN1 "
            "output) / d(x1, y1, x2, y2)",
    introduced=_ROWS[-1].level, inputs=("InputTensor", "InputGradientTensor", "ROITensor", "BatchIndicesTensor"),
    output="OutputGradientTensor", extra_outputs=("OutputROIGradientTensor",), support=_ROWS,
    same_data_type=_TIED, same_sizes=("InputTensor", "OutputGradientTensor"), cpu_kernel=None, cuda_body="",
    parameters=(ROI_REDUCTION, INTERPOLATION, SPATIAL_SCALE_X, SPATIAL_SCALE_Y, INPUT_PIXEL_OFFSET, OUTPUT_PIXEL_OFFSET,
                MINIMUM_SAMPLES, MAXIMUM_SAMPLES, ALIGN_TO_CORNERS),
    optional_inputs=(("InputTensor", "InputGradientTensor"),), optional_since=_ROWS[-1].level,
    optional_outputs=("OutputGradientTensor", "OutputROIGradientTensor"),
    shape_rule=roi_align_grad_shape, array_kernel=roi_align_grad_kernel, exactness=COMPOSITE,
    tolerance=sum_tolerance("the terms each element sums (a worst case for the regions' Sizes)"),
    tolerance_scale=roi_align_grad_tolerance_scale,
    sum_bound=gradient_sum_bound(roi_align_grad_tolerance_scale, "the terms an element sums at most, a worst case "
                                                                 "for the regions' Sizes (OutputGradientTensor; the "
                                                                 "corners' gradient has its ULP figure and floor)"),
    notes=(
        "The page: InputTensor (optional) must be given when OutputROIGradientTensor is, and when ReductionFunction "
        "is MAX; OutputGradientTensor and OutputROIGradientTensor are each optional, at least one given. A call "
        "gives the outputs it asks for (outputs= in the API, --outputs on the command line, the outputs a DxDispatch "
        "desc has; one left out is not computed), by default every output the inputs allow: without InputTensor "
        "(left out with None, or `none`) only OutputGradientTensor (a one-element tuple in the API). A call that asks "
        "for OutputROIGradientTensor without InputTensor is refused.",
        "OutputGradientTensor has InputTensor's Sizes; without InputTensor DirectML takes them from its desc "
        "(--output-shape, output_shape=). OutputROIGradientTensor has ROITensor's Sizes. ROITensor, "
        "BatchIndicesTensor, InputGradientTensor ({ NumROIs, ChannelCount, OutputHeight, OutputWidth }) and the "
        "fields are checked by ROI_ALIGN1's rules; ROI_ALIGN is ROI_ALIGN1 with InputPixelOffset 0.5, "
        "OutputPixelOffset -0.5 and AlignRegionsToCorners false.",
        "OutputGradientTensor is the adjoint of dmlcli's ROI_ALIGN1 (the page: 'similar to RESAMPLE_GRAD on each "
        "region'): AVERAGE divides each output's "
        "gradient by its sample count (FLOAT32); MAX gives it all to the output's first maximal sample (row-major "
        "over its samples; the page is silent on ties). Each sample carries it back to the element it read "
        "(NEAREST_NEIGHBOR) or to its 4 neighbours with the bilinear weights, transposed along x and then along y "
        "(each product rounded to FLOAT32, an element's terms added in order of the samples); regions are added "
        "to their batch in order. Samples outside the input read a constant and carry nothing back.",
        "OutputROIGradientTensor: the page's pseudo-code (for one sample per output) multiplies imageGradX = "
        "(1 - yLerp)(topRight - topLeft) + yLerp(bottomRight - bottomLeft) and imageGradY by the incoming "
        "gradient and by each corner's weight in the sample's position; it leaves out the sample count, the "
        "SpatialScale and the pixel offsets, and its weights (inputWidth - x, x) are not normalised. dmlcli reads "
        "it as the derivative of ROI_ALIGN1's output: position = first + fraction x (last - first) - "
        "InputPixelOffset with fraction = (s - OutputPixelOffset) / (samples along the axis) (AlignRegionsToCorners: "
        "s / (samples - 1)), so d/dx1 = SpatialScaleX x (1 - fraction) and d/dx2 = SpatialScaleX x fraction; a "
        "sample held by the clamp (before the first element, at the last) or outside the input contributes 0, and "
        "NEAREST_NEIGHBOR's samples (piecewise constant in the corners) give 0. The sums run in float64 and are "
        "rounded once; the sample count's jumps (ceil of the region's size) are not differentiated.",
        "The page's example (4 nearest regions of a [1, 1, 4, 4] input, one sample per output, gradient 1..12 -> "
        "[[3, 3, 9, 6], [0, 0, 0, 0], [15, 9, 21, 12], [0, 0, 0, 0]]) rounds its ties (coordinates 0.5) down; "
        "dmlcli's ROI_ALIGN1 reads element floor(x + 0.5) (ONNX's RoiAlign), under which it gives [[0, 0, 0, 0], "
        "[1, 5, 4, 11], [0, 0, 0, 0], [7, 17, 10, 23]].",
        "ROI_ALIGN_GRAD has no OutOfBoundsInputValue: for MAX an outside sample reads 0 (ROI_ALIGN1's default in "
        "dmlcli). A batch index past InputTensor (the page: undefined) reads only that constant: no gradient.",
        "The page's support table (4_1: BatchIndicesTensor UINT32 only; FLOAT32 and FLOAT16 for the others) has "
        "no later rows."),
)

OPERATORS = (ROI_ALIGN_GRAD,)
