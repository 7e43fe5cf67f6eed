"""The adapters of the ONNX operators that map onto DirectML's 6_3 and 6_4 normalization and folding operators:
RMSNormalization -> MEAN_VARIANCE_NORMALIZATION2 (UseMean FALSE), GroupNormalization -> MEAN_VARIANCE_NORMALIZATION1
over a grouped view of the input, Col2Im -> FOLD. As in adapters.py, an adapter changes no value: it names the
fields, reshapes tensors (size-1 axes, a channel axis split into groups and joined back) and states the output's
Sizes where DirectML reads them from the desc.
"""

from __future__ import annotations

import math

import numpy as np

from .adapters import (MappingError, OnnxCall, Prepared, _onnx_pads, _spatial_attr, data_input,
                       normalised_axis, padded, reshaped_to)

ONNX_EPSILON = 1e-5  # RMSNormalization's and GroupNormalization's default epsilon


def adapt_rms_normalization(call: OnnxCall, fixed) -> Prepared:
    """ONNX's RMSNormalization: X / sqrt(mean(X^2 over axis..last) + epsilon) * scale, scale broadcast from the
    right (leading size-1 axes up to X's rank)."""
    data = data_input(call)
    axis = normalised_axis(call.attr("axis", -1), data.ndim)
    scale = padded(call.input(1), data.ndim)
    values = {**fixed, "Axes": tuple(range(axis, data.ndim)), "Epsilon": call.attr("epsilon", ONNX_EPSILON)}
    return Prepared(values, [data, scale])


def grouped_shape(call: OnnxCall) -> tuple[int, ...]:
    """X's Sizes {N, C, D1, ...} with the channels split into num_groups groups: {N, G, C / G, D1, ...}."""
    data = data_input(call)
    groups = int(call.attr("num_groups", 0))
    if data.ndim < 2 or groups < 1 or data.shape[1] % groups:
        raise MappingError(f"ONNX's GroupNormalization needs num_groups ({groups}) to divide the channel count of X "
                           f"{list(data.shape)}")
    return (data.shape[0], groups, data.shape[1] // groups) + data.shape[2:]


def _grouped_per_channel(tensor: np.ndarray, grouped: tuple[int, ...]) -> np.ndarray:
    """scale or bias as MEAN_VARIANCE_NORMALIZATION1's ScaleTensor on the grouped view: one value per channel
    (opset 21) is {1, G, C / G, 1, ...}; one per group (opset 18) is {1, G, 1, 1, ...}."""
    groups, per_group = grouped[1], grouped[2]
    tail = (1,) * (len(grouped) - 3)
    if tensor.size == groups * per_group:
        return tensor.reshape((1, groups, per_group) + tail)
    if tensor.size == groups:
        return tensor.reshape((1, groups, 1) + tail)
    raise MappingError(f"ONNX's GroupNormalization scale and bias hold one value per channel ({groups * per_group}) "
                       f"or per group ({groups}); found {tensor.size}")


def adapt_group_normalization(call: OnnxCall, fixed) -> Prepared:
    """ONNX's GroupNormalization: the mean and variance of each group of C / num_groups channels (with their
    spatial elements), then scale and bias per channel: MEAN_VARIANCE_NORMALIZATION1 over the axes {2, ...} of
    X seen as {N, G, C / G, D1, ...}, the output reshaped back to X's Sizes."""
    data = data_input(call)
    grouped = grouped_shape(call)
    scale, bias = (_grouped_per_channel(call.input(i), grouped) for i in (1, 2))
    values = {**fixed, "Axes": tuple(range(2, len(grouped))), "Epsilon": call.attr("epsilon", ONNX_EPSILON)}
    return Prepared(values, [data.reshape(grouped), scale, bias], finish=reshaped_to([data.shape]))


def group_normalization_rank(call: OnnxCall) -> int:
    return len(grouped_shape(call))


def adapt_col2im(call: OnnxCall, fixed) -> Prepared:
    """ONNX's Col2Im(input {N, C x prod(block_shape), L}, image_shape, block_shape) with dilations, pads and strides:
    FOLD with WindowSizes block_shape and the output's Sizes {N, C, image_shape...}."""
    data = data_input(call)
    image = [int(v) for v in call.input(1).ravel()]
    block = [int(v) for v in call.input(2).ravel()]
    count = len(block)
    if len(image) != count or data.ndim != 3 or math.prod(block) == 0 or data.shape[1] % math.prod(block):
        raise MappingError(f"ONNX's Col2Im input {list(data.shape)} with image_shape {image} and block_shape {block} "
                           "is not {N, C x prod(block_shape), L}")
    start, end = _onnx_pads(call, count)
    values = {**fixed, "WindowSizes": tuple(block), "Strides": tuple(_spatial_attr(call, "strides", count, 1)),
              "Dilations": tuple(_spatial_attr(call, "dilations", count, 1)), "StartPadding": tuple(start),
              "EndPadding": tuple(end),
              "OutputTensor.Sizes": (data.shape[0], data.shape[1] // math.prod(block), *image)}
    return Prepared(values, [data])
