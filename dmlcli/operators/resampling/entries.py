"""The resampling family: UPSAMPLE_2D, RESAMPLE, RESAMPLE1, RESAMPLE2, RESAMPLE3 (nearest neighbour and linear)
and VALUE_SCALE_2D.

Sources: DirectML's pages for each DESC (MicrosoftDocs/sdk-api, ns-directml-dml_<name>_operator_desc.md, the
newest stored version of each: upsample_2d 2cd469d9, resample f2d501f7, resample1 883ac18d, resample2 of
07/21/2022 (its ms.date), value_scale_2d 0f132192), the enums DML_INTERPOLATION_MODE (NEAREST_NEIGHBOR = 0,
LINEAR = 1) and DML_AXIS_DIRECTION (INCREASING = 0, DECREASING = 1), and the DML_OPERATOR_TYPE values of
DirectML.h (VALUE_SCALE_2D 65, UPSAMPLE_2D 66, RESAMPLE 96, RESAMPLE1 116, RESAMPLE2 161, RESAMPLE3 175).
RESAMPLE3 (6_4) has no stored page: RESAMPLE2's fields plus BOOL Antialiased (DirectML.h), whose meaning is
ONNX's Resize antialias, which ONNX Runtime's DirectML provider passes to it unchanged (the entry's notes).

One coordinate rule for the family (RESAMPLE1's page, which says RESAMPLE and UPSAMPLE_2D are its case with
InputPixelOffsets 0.5 and OutputPixelOffsets -0.5): output coordinate o along a dimension reads the input at
x = (o - OutputPixelOffset) / Scale - InputPixelOffset, computed in FLOAT32, where element i sits at x = i.
NEAREST_NEIGHBOR takes element floor(x + 0.5) (the page: "the input element nearest to the corresponding pixel
center"; a tie takes the higher index); RESAMPLE2's and RESAMPLE3's take ceil(x) (RoundingDirection INCREASING) or
floor(x) (DECREASING). LINEAR takes the weighted average of elements floor(x) and floor(x) + 1 along each
resampled dimension; x is clamped to the input (the page: "the output edges are clamped"). RESAMPLE3's
Antialiased LINEAR widens that triangle filter by 1 / Scale where Scale < 1.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOAT16, FLOAT32, FLOATS, INT8, UINT8
from ...errors import InputError, cut, quoted
from ...scalars import is_digits
from ..table.options import _given, option_flag
from ..table.parameters import (BoolParameter, CudaArgument, EnumParameter, FloatArrayParameter, FloatParameter,
    Parameter)
from ..table.schema import APPROXIMATE, COMPOSITE, DIMS_4, Operator, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes

FAMILY = "resampling"
IO = ("InputTensor", "OutputTensor")
_DIMS_1_TO_4 = (1, 2, 3, 4)
_DIMS_4_TO_5 = (4, 5)
_WITH_BYTES = (FLOAT32, FLOAT16, INT8, UINT8)


def _same(level, dims, types):
    return (level, dims, {"InputTensor": types, "OutputTensor": types})


# ---------------------------------------------------------------- support tables (the pages, newest row first)

_UPSAMPLE_ROWS = rows(_same("1_0", _DIMS_4_TO_5, FLOATS))
_RESAMPLE_ROWS = rows(_same("6_2", _DIMS_1_TO_4, _WITH_BYTES), _same("5_1", _DIMS_1_TO_4, FLOATS),
                      _same("2_0", DIMS_4, FLOATS))
_RESAMPLE1_ROWS = rows(_same("6_2", _DIMS_1_TO_4, _WITH_BYTES), _same("5_1", _DIMS_1_TO_4, FLOATS),
                       _same("2_1", DIMS_4, FLOATS))
_RESAMPLE2_ROWS = rows(_same("5_1", _DIMS_1_TO_4, FLOATS))
_RESAMPLE3_ROWS = rows(_same("6_4", _DIMS_1_TO_4, FLOATS))  # no page: RESAMPLE2's table, from 6_4 (DirectML.h)
_VALUE_SCALE_ROWS = rows(_same("1_0", DIMS_4, FLOATS))

# ---------------------------------------------------------------- parameters

INTERPOLATION_MODE = EnumParameter(
    field="InterpolationMode", help="nearest_neighbor (the nearest input element) or linear (the weighted average "
                                    "of the 2 nearest per resampled dimension)",
    enum_prefix="DML_INTERPOLATION_MODE_", values=(("NEAREST_NEIGHBOR", 0), ("LINEAR", 1)),
    default_value="NEAREST_NEIGHBOR")

ROUNDING_DIRECTION = EnumParameter(
    field="RoundingDirection",
    help="NEAREST_NEIGHBOR's rounding of a fractional input coordinate: increasing (ceil) or decreasing (floor); "
         "LINEAR ignores it",
    enum_prefix="DML_AXIS_DIRECTION_", values=(("INCREASING", 0), ("DECREASING", 1)), default_value="DECREASING")
ANTIALIASED = BoolParameter(
    field="Antialiased", help="true: LINEAR downsampling (Scale < 1) widens its triangle filter by 1 / Scale, so every "
                              "input element within it is averaged (ONNX's Resize antialias); NEAREST_NEIGHBOR ignores "
                              "it")


class Size2DParameter(Parameter):
    """A DML_SIZE_2D field (UPSAMPLE_2D's ScaleSize): {UINT Width; UINT Height}.

    The typed value is (Height, Width), the order of the tensor's dimensions. On the command line
    `--scale-size 2,3` (Height 2, Width 3) or a single number for both; in the API a pair (height, width) or
    {"Height": 2, "Width": 3}; in a DxDispatch model {"Width": 3, "Height": 2}. Each at least 1.
    """

    default_value: tuple[int, int]

    def __init__(self, field: str, help: str, default_value: tuple[int, int] = (2, 2)) -> None:
        vars(self).update(field=field, help=help, default_value=default_value)

    @property
    def default(self) -> tuple[int, int]:
        return self.default_value

    def metavar(self, option: str) -> str:
        return "HEIGHT,WIDTH"

    def _number(self, value, where: str) -> int:
        text = str(value).strip()
        if isinstance(value, (bool, float)) or not is_digits(text) or len(text) > 12:
            raise InputError(f"{where}: {quoted(cut(text, 40))} is not a whole number of at least 1")
        number = int(text)
        if not 1 <= number <= 2**32 - 1:
            raise InputError(f"{where}: {number} is out of range (1 to {2**32 - 1})")
        return number

    def parse(self, given, data_types) -> tuple[int, int]:
        value = _given(given, self.options[0])
        if value is None:
            return self.default
        where = f"{self.field} ({option_flag(self.options[0])})"
        if isinstance(value, dict):
            return self.parse_desc(value, data_types)
        if isinstance(value, str):
            items = [item.strip() for item in value.strip().strip("[]()").split(",")]
        elif isinstance(value, (list, tuple)):
            items = list(value)
        else:
            items = [value]
        if len(items) == 1:
            items = items * 2
        if len(items) != 2:
            raise InputError(f"{where} must be HEIGHT,WIDTH (two whole numbers) or one number for both")
        return (self._number(items[0], where), self._number(items[1], where))

    def parse_desc(self, value, data_types) -> tuple[int, int]:
        if not isinstance(value, dict) or set(value) != {"Width", "Height"}:
            raise InputError(f"{self.field} must be a JSON object with Width and Height (a DML_SIZE_2D)")
        return (self._number(value["Height"], f"{self.field}.Height"), self._number(value["Width"], f"{self.field}.Width"))

    def describe(self, value) -> str:
        return f"Height {value[0]}, Width {value[1]}"

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return ()


SCALE_SIZE = Size2DParameter(field="ScaleSize", help="the integer Height and Width scales, as HEIGHT,WIDTH (or one "
                                                     "number for both; default 2,2)")
RESAMPLE_SCALES = FloatArrayParameter(
    field="Scales", count_field="ScaleCount", default_text="OutputTensor's Sizes / InputTensor's Sizes",
    help="one scale per dimension (> 1 enlarges, < 1 shrinks); left out: the output's Sizes (--output-shape) over "
         "the input's")
RESAMPLE1_SCALES = FloatArrayParameter(
    field="Scales", count_field="DimensionCount", default_text="OutputTensor's Sizes / InputTensor's Sizes",
    help="one scale per dimension (> 1 enlarges, < 1 shrinks); left out: the output's Sizes (--output-shape) over "
         "the input's")
INPUT_PIXEL_OFFSETS = FloatArrayParameter(
    field="InputPixelOffsets", count_field="DimensionCount", default_text="0.5 for every dimension (pixel centres)",
    help="offsets added to the input coordinates before scaling, one per dimension (0.5: pixel centres, as RESAMPLE)")
OUTPUT_PIXEL_OFFSETS = FloatArrayParameter(
    field="OutputPixelOffsets", count_field="DimensionCount", default_text="-0.5 for every dimension (pixel centres)",
    help="offsets added after scaling, one per dimension (-0.5: pixel centres, as RESAMPLE)")
VALUE_SCALE = FloatParameter(field="Scale", help="the scale applied to every input value", default_value=1.0)
VALUE_BIAS = FloatArrayParameter(
    field="Bias", count_field="ChannelCount", default_text="0 for every channel",
    help="one bias per channel (ChannelCount is its length: 1 or 3, the input's channel count)")


# ---------------------------------------------------------------- shape rules

def upsample_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    height_scale, width_scale = query.parameters["ScaleSize"]
    for name, scale, size in (("Height", height_scale, shape[-2]), ("Width", width_scale, shape[-1])):
        if scale > (2**32 - 1) // size:
            raise RuleViolation(f"ScaleSize.{name} {scale} is too large for Input{name} {size} (allowed: 0 < "
                                f"ScaleSize.{name} <= UINT_MAX / Input{name} = {(2**32 - 1) // size})")
    return {"OutputTensor": shape[:-2] + (shape[-2] * height_scale, shape[-1] * width_scale)}


def _check_per_dimension(values, rank: int, field_name: str) -> None:
    if values is not None and len(values) != rank:
        raise RuleViolation(f"{field_name} has {len(values)} values but InputTensor has {rank} dimensions (one value "
                            "per dimension: the count must match the DimensionCount)")


def resample_scales(shape, out_shape, scales) -> tuple[float, ...]:
    """The Scales, or the output's Sizes over the input's where they are left out."""
    if scales is not None:
        return tuple(float(s) for s in scales)
    return tuple(float(np.float32(o / i)) for o, i in zip(out_shape, shape))


def _resample_rule(query: ShapeQuery, offsets: tuple[str, ...]) -> dict:
    shape = query.shape("InputTensor")
    rank = len(shape)
    scales = query.parameters["Scales"]
    _check_per_dimension(scales, rank, "Scales")
    for name in offsets:
        _check_per_dimension(query.parameters[name], rank, name)
    if scales is not None:
        for axis, scale in enumerate(scales):
            if not (math.isfinite(float(scale)) and float(scale) > 0):
                raise RuleViolation(f"Scales[{axis}] {float(scale):g} is not a finite number above 0")
    for name in offsets:
        values = query.parameters[name]
        if values is not None and not all(math.isfinite(float(v)) for v in values):
            raise RuleViolation(f"{name} {describe_sizes([float(v) for v in values])} must be finite")
    given = query.given_outputs.get("OutputTensor")
    if given is not None:
        if len(given) != rank:
            raise RuleViolation(f"OutputTensor has {len(given)} dimensions but InputTensor has {rank} (the same "
                                "DimensionCount is required)")
        return {"OutputTensor": tuple(given)}
    if scales is None:
        raise RuleViolation("give Scales or the OutputTensor's Sizes (--output-shape): DirectML takes the output's "
                            "Sizes from its tensor desc")
    # DirectML takes the output's Sizes from its desc; without one, the scaled size rounded down (ONNX's rule).
    return {"OutputTensor": tuple(max(1, math.floor(size * float(scale))) for size, scale in zip(shape, scales))}


def resample_shape(query: ShapeQuery) -> dict:
    return _resample_rule(query, ())


def resample1_shape(query: ShapeQuery) -> dict:
    return _resample_rule(query, ("InputPixelOffsets", "OutputPixelOffsets"))


def value_scale_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    bias = query.parameters["Bias"]
    if bias is not None:
        if len(bias) not in (1, 3):
            raise RuleViolation(f"ChannelCount {len(bias)} (the length of Bias) must be 1 or 3")
        if len(bias) != shape[1]:
            raise RuleViolation(f"ChannelCount {len(bias)} (the length of Bias) must match InputTensor's channel "
                                f"count {shape[1]} (dimension 1 of {describe_sizes(shape)})")
    elif shape[1] not in (1, 3):
        raise RuleViolation(f"InputTensor's channel count {shape[1]} must be 1 or 3 (ChannelCount)")
    return {"OutputTensor": shape}


# ---------------------------------------------------------------- tolerances

def resample_tolerance_scale(call) -> int:
    """LINEAR: WebNN's resample2d figure as it stands (its 4 taps of bilinear); NEAREST_NEIGHBOR copies an element:
    0 ULP. RESAMPLE3's Antialiased LINEAR averages about 2 / Scale elements per dimension where Scale < 1 instead
    of 2: the figure times ceil(1 / Scale) for each such dimension (dmlcli's choice, after WebNN's pooling figures,
    which grow with the elements a window averages)."""
    if call.parameters["InterpolationMode"] == "NEAREST_NEIGHBOR":
        return 0
    if not call.parameters.get("Antialiased"):
        return 1
    scales = resample_scales(call.tensors["InputTensor"].shape, call.output.shape, call.parameters["Scales"])
    return math.prod(math.ceil(1 / scale) for scale in scales if scale < 1)


_RESAMPLE_TOLERANCE = Tolerance(
    "ulp", 84, 10,
    "WebNN's resample2d tolerance (web-platform-tests webnn/resources/utils.js): LINEAR 84 ULP (FLOAT32), 10 ULP "
    "(FLOAT16); NEAREST_NEIGHBOR 0 (it copies an input element; the absolute floor below still applies to "
    "--check, while dmlcli's own tests and the GPU parity tests require the same bits)",
    floor_float32=2.0 ** -20, floor_float16=2.0 ** -10,
    floor_source="a weighted average of values of unit size that cancel (a + w * (b - a) near 0) carries their "
                 "absolute rounding error: 2^-20 (FLOAT32) and 2^-10 (FLOAT16) bound it for inputs of unit size")


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)

def resample_coordinates(xp, out_size: int, in_size: int, scale: float, input_offset: float, output_offset: float):
    """Each output element's input coordinate along one dimension, in FLOAT32, clamped to the input."""
    o = xp.arange(out_size, dtype=xp.float32)
    x = (o - xp.float32(output_offset)) / xp.float32(scale) - xp.float32(input_offset)
    return xp.clip(x, xp.float32(0), xp.float32(in_size - 1))


# How an output element is computed from the input coordinate x along one dimension (resample_values' `method`).
NEAREST = "nearest"  # RESAMPLE, RESAMPLE1, UPSAMPLE_2D: element floor(x + 0.5)
NEAREST_DOWN = "floor"  # RESAMPLE2/3 with RoundingDirection DECREASING: element floor(x)
NEAREST_UP = "ceil"  # RoundingDirection INCREASING: element ceil(x)
LINEAR = "linear"  # the two neighbours' weighted average
WIDENED_LINEAR = "antialiased"  # RESAMPLE3's Antialiased LINEAR: the triangle widened by 1 / Scale where Scale < 1
_ROUNDINGS = {NEAREST: lambda xp, x: xp.floor(x + xp.float32(0.5)), NEAREST_DOWN: lambda xp, x: xp.floor(x),
              NEAREST_UP: lambda xp, x: xp.ceil(x)}


# The most FLOAT32 elements a LINEAR block gathers at once (each of its two neighbours' takes): the working set of an
# interpolation stays this size whatever the output's, so a run takes about the output's memory (issue 34: the
# whole-axis a + w * (b - a) held four output-sized temporaries, 4x the output).
BLOCK_ELEMENTS = 1 << 20
# On the GPU blocks may be larger (each costs a few kernel launches; device memory is tens of GiB): 256 MiB a take.
GPU_BLOCK_ELEMENTS = 1 << 26


def _blocks(outer: int, positions: int, inner: int, budget: int):
    """(outer slice, positions slice, inner slice) blocks of an (outer, positions, inner) result, each at most
    `budget` elements (at least one element of each)."""
    inner_step = min(inner, budget)
    position_step = max(1, min(positions, budget // inner_step))
    outer_step = max(1, budget // (inner_step * position_step))
    for o in range(0, outer, outer_step):
        for p in range(0, positions, position_step):
            for i in range(0, inner, inner_step):
                yield slice(o, o + outer_step), slice(p, p + position_step), slice(i, i + inner_step)


def _interpolate_axis(xp, values, axis: int, out_size: int, block_values, out_dtype=None):
    """An interpolation along `axis`, block by block: `block_values(part, positions)` gives the FLOAT32 result of
    the output positions `positions` (a slice) from `part`, the input viewed as (outer, size, inner) and cut to a
    block's outer and inner range. With `out_dtype` each block is rounded to it at once (_to_output), so the last
    axis writes the output itself and no FLOAT32 copy of it is held."""
    outer = math.prod(values.shape[:axis])
    inner = math.prod(values.shape[axis + 1:])
    shaped = values.reshape(outer, values.shape[axis], inner)
    result = xp.empty((outer, out_size, inner), dtype=xp.float32 if out_dtype is None else out_dtype)
    budget = BLOCK_ELEMENTS if xp is np else GPU_BLOCK_ELEMENTS  # read when called (tests set them)
    for before, positions, after in _blocks(outer, out_size, inner, budget):
        block = block_values(shaped[before, :, after], positions)
        result[before, positions, after] = block if out_dtype is None else _to_output(xp, block, out_dtype)
    return result.reshape(values.shape[:axis] + (out_size,) + values.shape[axis + 1:])


def _antialiased_axis(xp, values, axis: int, out_size: int, scale: float, input_offset: float, output_offset: float,
                      out_dtype=None):
    """ONNX's antialiased linear filter along one dimension (Scale < 1): output o averages every element j with
    |j - x| < 1 / Scale, weighted 1 - |j - x| * Scale and normalised by the weights' sum; x is not clamped, an
    element past an edge reads the edge element (ONNX's edge padding). FLOAT32 throughout, taps in increasing j."""
    in_size = values.shape[axis]
    o = xp.arange(out_size, dtype=xp.float32)
    x = (o - xp.float32(output_offset)) / xp.float32(scale) - xp.float32(input_offset)
    reach = math.ceil(1 / float(scale)) + 1  # taps on each side of floor(x) that may lie within 1 / Scale
    first = xp.floor(x).astype(xp.int64) - reach
    taps = [first + k for k in range(2 * reach + 2)]
    weights = [xp.maximum(xp.float32(1) - xp.abs(j.astype(xp.float32) - x) * xp.float32(scale), xp.float32(0))
               for j in taps]
    total = weights[0]
    for weight in weights[1:]:
        total = total + weight

    def block_values(part, positions):
        result = None
        for j, weight in zip(taps, weights):
            share = (weight[positions] / total[positions])[:, None]
            term = xp.take(part, xp.clip(j[positions], 0, in_size - 1), axis=1)
            term = xp.where(share > 0, share * term, xp.float32(0))  # an element outside the filter is not read
            result = term if result is None else result + term
        return result

    return _interpolate_axis(xp, values, axis, out_size, block_values, out_dtype)


def _resample_axis(xp, values, axis: int, out_size: int, scale: float, input_offset: float, output_offset: float,
                   method: str, out_dtype=None):
    """One dimension resampled; the interpolating methods give FLOAT32 (or `out_dtype`, rounded to it once)."""
    if method == WIDENED_LINEAR:
        if float(scale) < 1:
            return _antialiased_axis(xp, values, axis, out_size, scale, input_offset, output_offset, out_dtype)
        method = LINEAR  # ONNX's filter is min(Scale, 1) wide: upsampling is plain linear
    in_size = values.shape[axis]
    x = resample_coordinates(xp, out_size, in_size, scale, input_offset, output_offset)
    if method != LINEAR:
        index = xp.clip(_ROUNDINGS[method](xp, x).astype(xp.int64), 0, in_size - 1)
        return xp.take(values, index, axis=axis)
    low = xp.floor(x).astype(xp.int64)
    high = xp.minimum(low + 1, in_size - 1)
    weight = x - low.astype(xp.float32)

    def block_values(part, positions):
        a = xp.take(part, low[positions], axis=1)
        b = xp.take(part, high[positions], axis=1)
        b -= a  # a + w * (b - a), in place: the same three FLOAT32 roundings
        b *= weight[positions][:, None]
        b += a
        return b

    return _interpolate_axis(xp, values, axis, out_size, block_values, out_dtype)


def _to_output(xp, work, dtype):
    """FLOAT32 results rounded once to the output type; INT8/UINT8 rounded to nearest even and saturated."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return xp.ascontiguousarray(work.astype(dtype, copy=False))
    info = np.iinfo(dtype)
    return xp.ascontiguousarray(xp.clip(xp.rint(work), info.min, info.max).astype(dtype))


def resample_values(xp, x, out_shape, scales, input_offsets, output_offsets, method: str, out_dtype):
    """Resample every dimension whose mapping is not the identity, one after another (separable); an interpolation's
    last resampled dimension is rounded to the output's type block by block."""
    interpolates = method in (LINEAR, WIDENED_LINEAR)
    resampled = [axis for axis in range(x.ndim)
                 if not (out_shape[axis] == x.shape[axis] and float(scales[axis]) == 1.0
                         and float(input_offsets[axis]) + float(output_offsets[axis]) == 0.0)]
    work = x.astype(xp.float32) if interpolates else x
    for axis in resampled:
        last = interpolates and axis == resampled[-1]
        work = _resample_axis(xp, work, axis, out_shape[axis], scales[axis], input_offsets[axis],
                              output_offsets[axis], method, out_dtype if last else None)
    if not interpolates:
        return xp.ascontiguousarray(work.astype(out_dtype, copy=False))
    return work if resampled else _to_output(xp, work, out_dtype)


def resample_method(params) -> str:
    """The family's `method` for a call's InterpolationMode, RoundingDirection (RESAMPLE2/3) and Antialiased
    (RESAMPLE3)."""
    if params["InterpolationMode"] == "LINEAR":
        return WIDENED_LINEAR if params.get("Antialiased") else LINEAR
    direction = params.get("RoundingDirection")
    if direction is None:
        return NEAREST
    return NEAREST_UP if direction == "INCREASING" else NEAREST_DOWN


def resample_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    scales = resample_scales(x.shape, out.shape, params["Scales"])
    rank = x.ndim
    input_offsets = params.get("InputPixelOffsets") or (0.5,) * rank
    output_offsets = params.get("OutputPixelOffsets") or (-0.5,) * rank
    return (resample_values(xp, x, out.shape, scales, input_offsets, output_offsets, resample_method(params),
                            out.data_type.numpy_dtype),)


def upsample_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    height, width = params["ScaleSize"]
    scales = (1.0,) * (x.ndim - 2) + (float(height), float(width))
    if params["InterpolationMode"] != "LINEAR":
        # Whole-number scales at pixel centres: output o reads floor((o + 0.5) / s - 0.5 + 0.5) = o // s (never a
        # tie), so each element is repeated s times: the rule's exact result, without FLOAT32 coordinates.
        return (xp.ascontiguousarray(xp.repeat(xp.repeat(x, height, axis=-2), width, axis=-1)),)
    return (resample_values(xp, x, out.shape, scales, (0.5,) * x.ndim, (-0.5,) * x.ndim, LINEAR,
                            out.data_type.numpy_dtype),)


def value_scale_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    channels = x.shape[1]
    bias = params["Bias"] if params["Bias"] is not None else (0.0,) * channels
    bias_array = xp.asarray(np.asarray(bias, np.float32).reshape((1, channels) + (1,) * (x.ndim - 2)))
    # Two FLOAT32 roundings (Scale * x, then + Bias), never fused, as DirectML's FLOAT fields are applied.
    scaled = x.astype(xp.float32, copy=False) * xp.float32(params["Scale"])
    scaled += bias_array  # in place: the sum is the second rounding either way
    return (xp.ascontiguousarray(scaled.astype(out.data_type.numpy_dtype, copy=False)),)


# ---------------------------------------------------------------- entries

_COORDINATES = ("Output coordinate o reads the input at x = (o - OutputPixelOffset) / Scale - InputPixelOffset "
                "(FLOAT32), element i sitting at x = i; x is clamped to [0, size - 1] (the page: edges are "
                "clamped).")
_NEAREST = ("NEAREST_NEIGHBOR takes element floor(x + 0.5): a tie (x halfway between two elements) takes the higher "
            "index (the page says only 'nearest'; this is the rounding onnxruntime's DirectML provider describes for "
            "DirectML). Its results are input elements, bit for bit.")
_LINEAR = ("LINEAR computes a + w * (b - a) per resampled dimension in FLOAT32, one dimension after another (the "
           "multilinear weighted average), a and b the elements floor(x) and floor(x) + 1, w = x - floor(x); FLOAT16 "
           "is rounded once at the end. INT8 and UINT8 (from 6_2) are rounded to nearest even and saturated "
           "(page silent).")
_OUTPUT_SIZES = ("The output's Sizes come from its tensor desc (a DxDispatch desc, or --output-shape); without one, "
                 "floor(InputSize * Scale) per dimension. Scales left out: the output's Sizes over the input's.")

UPSAMPLE_2D = Operator(
    name="UPSAMPLE_2D", enum_value=66, family=FAMILY, prefix="",
    summary="enlarges Height and Width by whole-number scales (nearest neighbour or bilinear)",
    formula="OutputTensor Sizes = {N, C, [D,] H * ScaleSize.Height, W * ScaleSize.Width}; each output element "
            "interpolated from the input at pixel centres",
    introduced=_UPSAMPLE_ROWS[-1].level, inputs=("InputTensor",), support=_UPSAMPLE_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(SCALE_SIZE, INTERPOLATION_MODE),
    shape_rule=upsample_shape, array_kernel=upsample_kernel, exactness=APPROXIMATE, tolerance=_RESAMPLE_TOLERANCE,
    tolerance_scale=resample_tolerance_scale,
    notes=("Only the last two dimensions are resampled (LINEAR is bilinear even for 5 dimensions); it is RESAMPLE "
           "with Scales {1, 1, [1,] Height, Width}.", _COORDINATES, _NEAREST, _LINEAR,
           "ScaleSize: 0 < Height <= UINT_MAX / InputHeight and 0 < Width <= UINT_MAX / InputWidth (the page). In a "
           "DxDispatch model \"ScaleSize\": {\"Width\": 2, \"Height\": 2}; on the command line --scale-size "
           "HEIGHT,WIDTH."),
)

RESAMPLE = Operator(
    name="RESAMPLE", enum_value=96, family=FAMILY, prefix="",
    summary="resamples every dimension by a float scale (nearest neighbour or multilinear), at pixel centres",
    formula="OutputTensor[o] = Input interpolated at x = (o + 0.5) / Scales - 0.5 per dimension",
    introduced=_RESAMPLE_ROWS[-1].level, inputs=("InputTensor",), support=_RESAMPLE_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(INTERPOLATION_MODE, RESAMPLE_SCALES),
    shape_rule=resample_shape, array_kernel=resample_kernel, exactness=APPROXIMATE, tolerance=_RESAMPLE_TOLERANCE,
    tolerance_scale=resample_tolerance_scale,
    notes=("Scales: one per dimension, each finite and above 0; ScaleCount is their number and must be the "
           "DimensionCount.", _OUTPUT_SIZES, _COORDINATES, _NEAREST, _LINEAR),
)

RESAMPLE1 = Operator(
    name="RESAMPLE1", enum_value=116, family=FAMILY, prefix="",
    summary="resamples every dimension by a float scale with input and output pixel offsets",
    formula="OutputTensorX = (InputTensorX + InputPixelOffset) * Scale + OutputPixelOffset, per dimension",
    introduced=_RESAMPLE1_ROWS[-1].level, inputs=("InputTensor",), support=_RESAMPLE1_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INTERPOLATION_MODE, RESAMPLE1_SCALES, INPUT_PIXEL_OFFSETS, OUTPUT_PIXEL_OFFSETS),
    shape_rule=resample1_shape, array_kernel=resample_kernel, exactness=APPROXIMATE, tolerance=_RESAMPLE_TOLERANCE,
    tolerance_scale=resample_tolerance_scale,
    notes=("Scales, InputPixelOffsets and OutputPixelOffsets: one value per dimension each (DimensionCount is "
           "their common length and must be the tensors' DimensionCount); offsets finite. Left out in the API and on "
           "the command line: 0.5 and -0.5, which the page says make it RESAMPLE.", _OUTPUT_SIZES, _COORDINATES,
           _NEAREST, _LINEAR),
)

_ROUNDING = ("NEAREST_NEIGHBOR takes element ceil(x) with RoundingDirection INCREASING, floor(x) with DECREASING (the "
             "page: 'round fractional coordinates toward increasing axis values (ceil)' / 'decreasing (floor)'); x "
             "is clamped to the input first, so the index lies in it. LINEAR ignores RoundingDirection (the page). "
             "The results are input elements, bit for bit.")
_RESAMPLE1_EQUIVALENCE = (
    "The page's remark: LINEAR is RESAMPLE1's; NEAREST_NEIGHBOR with DECREASING is RESAMPLE1's with the offsets "
    "adjusted by -0.5. floor(x') = floor(x + 0.5) needs x' = x + 0.5, which InputPixelOffsets - 0.5 gives at any "
    "Scale (OutputPixelOffsets - 0.5, as the page words it, only at Scale 1): dmlcli follows the coordinate formula, "
    "as ONNX Runtime's DirectML provider does (DmlOperatorResize.cpp at 59e75cf6 adjusts the input offsets: "
    "ONNX's round_prefer_ceil is DECREASING with InputPixelOffsets - 0.5, round_prefer_floor INCREASING with + 0.5, "
    "floor DECREASING, ceil INCREASING).")
_OFFSETS = ("Scales, InputPixelOffsets and OutputPixelOffsets: one value per dimension each (DimensionCount is their "
            "common length and must be the tensors' DimensionCount); offsets finite. Left out in the API and on the "
            "command line: 0.5 and -0.5 (pixel centres); RoundingDirection DECREASING.")

RESAMPLE2 = Operator(
    name="RESAMPLE2", enum_value=161, family=FAMILY, prefix="",
    summary="RESAMPLE1 with the nearest neighbour's rounding direction (ceil or floor) as a field",
    formula="OutputTensorX = (InputTensorX + InputPixelOffset) * Scale + OutputPixelOffset, per dimension; "
            "NEAREST_NEIGHBOR rounds InputTensorX by RoundingDirection",
    introduced=_RESAMPLE2_ROWS[-1].level, inputs=("InputTensor",), support=_RESAMPLE2_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INTERPOLATION_MODE, ROUNDING_DIRECTION, RESAMPLE1_SCALES, INPUT_PIXEL_OFFSETS, OUTPUT_PIXEL_OFFSETS),
    shape_rule=resample1_shape, array_kernel=resample_kernel, exactness=APPROXIMATE, tolerance=_RESAMPLE_TOLERANCE,
    tolerance_scale=resample_tolerance_scale,
    notes=(_OFFSETS, _OUTPUT_SIZES, _COORDINATES, _ROUNDING, _RESAMPLE1_EQUIVALENCE, _LINEAR,
           "Support table: the stored page's one row (5_1: 1 to 4 dimensions, FLOAT32 and FLOAT16). RESAMPLE's and "
           "RESAMPLE1's pages add INT8 and UINT8 at 6_2; RESAMPLE2's does not, and dmlcli follows it."),
)

RESAMPLE3 = Operator(
    name="RESAMPLE3", enum_value=175, family=FAMILY, prefix="",
    summary="RESAMPLE2 with an antialiasing filter for linear downsampling (ONNX's Resize antialias)",
    formula="RESAMPLE2's coordinates; Antialiased LINEAR with Scale < 1: sum over |j - x| < 1 / Scale of "
            "(1 - |j - x| * Scale) * Input[j], divided by the sum of those weights",
    introduced=_RESAMPLE3_ROWS[-1].level, inputs=("InputTensor",), support=_RESAMPLE3_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INTERPOLATION_MODE, ROUNDING_DIRECTION, RESAMPLE1_SCALES, INPUT_PIXEL_OFFSETS, OUTPUT_PIXEL_OFFSETS,
                ANTIALIASED),
    shape_rule=resample1_shape, array_kernel=resample_kernel, exactness=APPROXIMATE, tolerance=_RESAMPLE_TOLERANCE,
    tolerance_scale=resample_tolerance_scale,
    notes=("No stored page (6_4): the fields are DirectML.h's (RESAMPLE2's and BOOL Antialiased), RESAMPLE2's page "
           "gives everything but Antialiased. ONNX Runtime's DirectML provider (DmlOperatorResize.cpp at 59e75cf6) "
           "builds RESAMPLE3 for ONNX's Resize with Antialiased = Resize's antialias attribute and the offsets and "
           "RoundingDirection it gives RESAMPLE2, so Antialiased is taken to mean ONNX's antialias (onnx/reference/"
           "ops/op_resize.py, _linear_coeffs_antialias): where a dimension is downsampled (Scale < 1) the linear "
           "triangle is stretched by 1 / Scale: output o averages every element j with |j - x| < 1 / Scale, "
           "weighted 1 - |j - x| * Scale, the weights normalised to sum to 1; Scale >= 1 is plain LINEAR.",
           "Antialiased: x is not clamped; an element j past an edge reads the edge element (ONNX's reference pads "
           "by edge), which for plain LINEAR and NEAREST_NEIGHBOR is the same as clamping x. NEAREST_NEIGHBOR "
           "ignores Antialiased (ONNX defines antialias for its linear and cubic modes only). The weights, their sum "
           "and the weighted sum are FLOAT32, the elements in increasing order, one dimension after another; the "
           "tolerance is LINEAR's times ceil(1 / Scale) for each downsampled dimension (dmlcli's choice: more "
           "elements averaged).",
           _OFFSETS, _OUTPUT_SIZES, _COORDINATES, _ROUNDING, _LINEAR,
           "Support table: RESAMPLE2's (1 to 4 dimensions, FLOAT32 and FLOAT16) from 6_4, the level DirectML.h "
           "declares RESAMPLE3 at."),
)

VALUE_SCALE_2D = Operator(
    name="VALUE_SCALE_2D", enum_value=65, family=FAMILY, prefix="",
    summary="Scale * Input + Bias[channel]: one scale, one bias per channel",
    formula="OutputTensor[n, c, h, w] = Scale * InputTensor[n, c, h, w] + Bias[c]",
    introduced=_VALUE_SCALE_ROWS[-1].level, inputs=("InputTensor",), support=_VALUE_SCALE_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(VALUE_SCALE, VALUE_BIAS),
    shape_rule=value_scale_shape, array_kernel=value_scale_kernel, exactness=COMPOSITE,
    tolerance=Tolerance("ulp", 2, 2, "WebNN's mul and add tolerances (1 ULP each, webnn/resources/utils.js) for "
                                     "the two roundings"),
    notes=("ChannelCount (the length of Bias) must be 1 or 3 and match the input's channel count (the page). Bias "
           "left out in the API and on the command line: 0 for every channel.",
           "Computed in FLOAT32 as two roundings, Scale * x and then + Bias (never fused), and rounded once to "
           "FLOAT16 for FLOAT16 tensors. NaN propagates."),
)

OPERATORS = (UPSAMPLE_2D, RESAMPLE, RESAMPLE1, RESAMPLE2, RESAMPLE3, VALUE_SCALE_2D)
