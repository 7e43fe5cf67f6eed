"""QUANTIZED_LINEAR_AVERAGE_POOLING (6_2): an average pooling of dequantized values, quantized again.

It sits with the pooling family because the window is its substance: the shape rule, the parameters and the
averaging are AVERAGE_POOLING1's (entries.py, reused, not written again); the dequantize and quantize steps are
the quantization family's (quantization/entries.py), which lies below it, so the imports go down.

Source: DirectML's page (MicrosoftDocs/sdk-api ns-directml-dml_quantized_linear_average_pooling_operator_desc.md,
08/21/2024): "mathematically equivalent to dequantizing the inputs, then performing average pooling, and then
quantizing the output", the dequantize and quantize functions, the scales' and zero points' Sizes ({ 1, 1, 1, 1 }
per tensor, { 1, ChannelCount, 1, 1 } per channel), the constraints and the support table; DirectML.h for the
fields (Dilations among them) and the DML_OPERATOR_TYPE value.
"""

from __future__ import annotations

from ...data_types import FLOAT32, INT8, UINT8
from ...feature_levels import level
from ..quantization.entries import dequantize_values, quantize_values, quantize_values_gpu
from ..quantization.gpu import dequantize_values as dequantize_values_gpu
from ..table.schema import COMPOSITE, DIMS_4_TO_5, Operator, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes
from .entries import DILATIONS, END_PADDING, INCLUDE_PADDING, START_PADDING, STRIDES, WINDOW_SIZE, average_values
from .entries import average_values_gpu, pooling_shape

_QUANTIZED = (INT8, UINT8)
_SCALES = ("InputScaleTensor", "InputZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor")
_INPUTS = ("InputTensor",) + _SCALES
_DIMS_1_TO_5 = (1, 2, 3, 4, 5)

_ROWS = rows(("6_2", {"InputTensor": (DIMS_4_TO_5, _QUANTIZED), "InputScaleTensor": (_DIMS_1_TO_5, (FLOAT32,)),
                      "InputZeroPointTensor": (_DIMS_1_TO_5, _QUANTIZED),
                      "OutputScaleTensor": (_DIMS_1_TO_5, (FLOAT32,)),
                      "OutputZeroPointTensor": (_DIMS_1_TO_5, _QUANTIZED),
                      "OutputTensor": (DIMS_4_TO_5, _QUANTIZED)}, ("OutputTensor", "OutputZeroPointTensor")))


def _per_channel_sizes(shape) -> tuple[int, ...]:
    return (1, shape[1]) + (1,) * (len(shape) - 2)


def quantized_average_shape(query: ShapeQuery) -> dict:
    """AVERAGE_POOLING1's output Sizes and rules; each scale and zero point per tensor (one element) or per channel
    ({ 1, ChannelCount, 1, 1 } in InputTensor's DimensionCount), as the page describes them."""
    shape = query.shape("InputTensor")
    for name in _SCALES:
        if name not in query.shapes:
            continue  # a zero point left out
        sizes = tuple(query.shape(name))
        if sizes.count(1) != len(sizes) and sizes != _per_channel_sizes(shape):
            raise RuleViolation(f"{name} Sizes {describe_sizes(sizes)} are neither one element (per tensor) nor "
                                f"{describe_sizes(_per_channel_sizes(shape))} (per channel of InputTensor Sizes "
                                f"{describe_sizes(shape)})")
    return pooling_shape(query)


def _broadcastable(xp, tensor, rank: int):
    """A scale or zero point shaped to broadcast over { N, C, ... }: one element, or one per channel."""
    if tensor is None:
        return None
    return tensor.reshape((1,) * rank) if tensor.size == 1 else tensor.reshape((1, -1) + (1,) * (rank - 2))


def quantized_average_kernel(xp, inputs, outputs, params, dequantize=dequantize_values, average=average_values,
                             quantize=quantize_values):
    x = inputs[0]
    in_scale, in_zero, out_scale, out_zero = (_broadcastable(xp, t, x.ndim) for t in inputs[1:])
    values = dequantize(xp, x, in_scale.astype(xp.float32, copy=False), in_zero, xp.float32)
    averages = average(xp, values, params)
    return (quantize(xp, averages, out_scale.astype(xp.float32, copy=False), out_zero, outputs[0].data_type),)


def quantized_average_gpu_kernel(cp, inputs, outputs, params):
    return quantized_average_kernel(cp, inputs, outputs, params, dequantize=dequantize_values_gpu,
                                    average=average_values_gpu, quantize=quantize_values_gpu)


QUANTIZED_LINEAR_AVERAGE_POOLING = Operator(
    name="QUANTIZED_LINEAR_AVERAGE_POOLING", enum_value=169, family="pooling", prefix="",
    summary="averages each sliding, dilated window of dequantized values and quantizes the averages",
    formula=("OutputTensor = clamp(round(average(window of (InputTensor - InputZeroPoint) * InputScale) / OutputScale) "
             "+ OutputZeroPoint, Min, Max)"),
    introduced=level("6_2"), inputs=_INPUTS, support=_ROWS, same_data_type=("InputTensor", "InputZeroPointTensor"),
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(STRIDES, WINDOW_SIZE, START_PADDING, END_PADDING, DILATIONS, INCLUDE_PADDING),
    optional_inputs=(("InputZeroPointTensor", "InputTensor"), ("OutputZeroPointTensor", "OutputTensor")),
    optional_since=level("6_2"), default_output_type=UINT8, shape_rule=quantized_average_shape,
    array_kernel=quantized_average_kernel, gpu_array_kernel=quantized_average_gpu_kernel, exactness=COMPOSITE,
    tolerance=Tolerance(kind="atol", float32=1, float16=1,
                        source="no WebNN figure; dmlcli takes quantizeLinear's +-1. The outputs are integers and are "
                               "always compared exactly, the float32 steps being fixed"),
    notes=(
        "The page: dequantize, average pool, quantize. dmlcli's steps, in float32 so that CPU and GPU agree bit for "
        "bit: each element dequantized as DEQUANTIZE_LINEAR does (float32(x - InputZeroPoint) * InputScale, one "
        "rounding); the window averaged as AVERAGE_POOLING1 does (the same code: a FLOAT32 sum in row-major window "
        "order, padding adding 0.0, divided by the window's size with IncludePadding, else by the input elements it "
        "reads); quantized as QUANTIZE_LINEAR does (the average / OutputScale, rounded half to even, plus "
        "OutputZeroPoint, saturated; NaN gives the lowest value). An exact reference, or DirectML summing integers "
        "first, may differ by 1 where a float32 step rounds across a half.",
        "InputTensor is { N, C, H, W } or { N, C, D, H, W }; Strides, WindowSize, StartPadding, EndPadding and "
        "Dilations have one value per spatial dimension, with AVERAGE_POOLING1's defaults in the API and on the "
        "command line (WindowSize required) and its rules (a window must fit the padded input and read at least one "
        "input element). The page's output-Sizes formula leaves the dilation out; dmlcli uses the dilated window's "
        "extent, as for AVERAGE_POOLING1.",
        "Each scale and zero point is per tensor (one element: the page's { 1, 1, 1, 1 }, any DimensionCount the "
        "table allows) or per channel ({ 1, ChannelCount, 1, 1 } in InputTensor's DimensionCount); other Sizes are "
        "refused.",
        "InputZeroPointTensor and OutputZeroPointTensor are optional (_Maybenull_, 0 when left out). InputZeroPoint "
        "has InputTensor's type and OutputZeroPoint OutputTensor's (the page); OutputTensor's type follows "
        "OutputZeroPointTensor, or without it is a choice (--output-dtype, UINT8 by default).",
        "dmlcli keeps it with the pooling family: the window is pooling's (entries.py's shape rule, parameters and "
        "averaging, reused), the dequantize and quantize steps the quantization family's.",
    ),
)

OPERATORS = (QUANTIZED_LINEAR_AVERAGE_POOLING,)
