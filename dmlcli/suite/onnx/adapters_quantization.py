"""ONNX's QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear as DirectML's QUANTIZE, DEQUANTIZE (6_3) and
DYNAMIC_QUANTIZE_LINEAR (4_0): the adapters the table (table.py) names for them, and what they share with its
`cannot` conditions.

ONNX's scale and zero point are per tensor (0-D or one element), per axis (1-D along `axis`) or blocked (the
input's rank, ceil(D / block_size) along `axis`); DirectML's QuantizationTensors have the input's rank, each size
dividing the input's (quantization/entries.py), so a per-tensor one becomes { 1, ..., 1 }, a per-axis one
{ 1, ..., C, ..., 1 } (reshapes) and a blocked one goes as it is. Nothing here changes a value.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .adapters import MappingError, OnnxCall, Prepared, data_input, normalised_axis, reshaped_to

# ONNX's TensorProto.DataType codes of the types QUANTIZE writes (onnx.proto: 2 UINT8, 3 INT8, 21 UINT4, 22 INT4);
# the others, by name, for the reason a case is skipped.
QUANTIZED_TYPES = {2: "uint8", 3: "int8", 21: "uint4", 22: "int4"}
OTHER_TYPES = {1: "float32", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 10: "float16", 11: "float64",
               12: "uint32", 13: "uint64", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
               19: "float8e5m2", 20: "float8e5m2fnuz", 23: "float4e2m1"}


def block_size(call: OnnxCall) -> int:
    return int(call.attr("block_size", 0) or 0)


def quantized_axis(call: OnnxCall) -> int:
    """ONNX's `axis` (default 1) as an index into the input's dimensions."""
    return normalised_axis(call.attr("axis", 1), data_input(call).ndim)


def partial_blocks(call: OnnxCall) -> bool:
    """Whether a blocked call's last block along `axis` is short (ONNX pads it; DirectML takes whole blocks)."""
    size = block_size(call)
    return bool(size) and data_input(call).shape[quantized_axis(call)] % size != 0


def unwritable_output_type(call: OnnxCall) -> bool:
    """Whether QuantizeLinear's output_dtype names a type QUANTIZE does not write (without a zero point, which
    sets the type otherwise)."""
    given = call.attr("output_dtype", 0)
    return bool(given) and int(given) not in QUANTIZED_TYPES and call.input(2) is None


def output_type_name(call: OnnxCall) -> str:
    code = int(call.attr("output_dtype", 0))
    return QUANTIZED_TYPES.get(code) or OTHER_TYPES.get(code, f"type {code}")


def quantization_tensor(tensor: np.ndarray, call: OnnxCall) -> np.ndarray:
    """An ONNX scale or zero point as a QuantizationTensors entry of the input's rank (a reshape)."""
    x = data_input(call)
    if block_size(call):
        if tensor.ndim != x.ndim:
            raise MappingError(f"a blocked scale or zero point has the input's rank {x.ndim}; found Sizes "
                               f"{list(tensor.shape)}")
        return tensor
    if tensor.size == 1 and tensor.ndim <= 1:
        return tensor.reshape((1,) * x.ndim)  # per tensor
    if tensor.ndim != 1:
        raise MappingError(f"a per-axis scale or zero point is 1-D; found Sizes {list(tensor.shape)}")
    shape = [1] * x.ndim
    shape[quantized_axis(call)] = tensor.shape[0]
    return tensor.reshape(shape)  # per axis


def _quantization_call(call: OnnxCall) -> tuple[dict, list[np.ndarray]]:
    x = data_input(call)
    tensors = [quantization_tensor(call.input(position), call) for position in (1, 2)
               if call.input(position) is not None]
    kind = "SCALE_ZERO_POINT" if len(tensors) == 2 else "SCALE"
    return {"QuantizationType": kind}, [x, *tensors]


def adapt_quantize(call: OnnxCall, fixed: Mapping[str, object]) -> Prepared:
    """QuantizeLinear -> QUANTIZE: with y_zero_point the output has its type; without it ONNX's output_dtype, else
    uint8 (ONNX's default)."""
    values, inputs = _quantization_call(call)
    output_dtype = None if call.input(2) is not None else QUANTIZED_TYPES.get(int(call.attr("output_dtype", 0)), "uint8")
    return Prepared({**fixed, **values}, inputs, output_dtype=output_dtype,
                    finish=reshaped_to([data_input(call).shape]))


def adapt_dequantize(call: OnnxCall, fixed: Mapping[str, object]) -> Prepared:
    """DequantizeLinear -> DEQUANTIZE: the output has the scale's type, as ONNX's y has."""
    values, inputs = _quantization_call(call)
    return Prepared({**fixed, **values}, inputs, finish=reshaped_to([data_input(call).shape]))


def other_dequantized_type(call: OnnxCall) -> bool:
    """Whether DequantizeLinear's output_dtype asks for a type other than the scale's, which DEQUANTIZE writes."""
    given = int(call.attr("output_dtype", 0) or 0)
    scale = call.input(1)
    return bool(given) and scale is not None and OTHER_TYPES.get(given) != np.dtype(scale.dtype).name


def adapt_dynamic_quantize(call: OnnxCall, fixed: Mapping[str, object]) -> Prepared:
    """DynamicQuantizeLinear -> DYNAMIC_QUANTIZE_LINEAR, UINT8 (ONNX's one type); ONNX's 0-D y_scale and
    y_zero_point are DirectML's one-element tensors of the input's rank (reshaped back)."""
    x = data_input(call)
    return Prepared(dict(fixed), [x], output_dtype="uint8", finish=reshaped_to([x.shape, (), ()]))
