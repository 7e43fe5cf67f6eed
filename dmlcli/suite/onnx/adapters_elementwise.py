"""The adapters of the ONNX operators that map onto DirectML's element-wise operators and CAST, and of the
graph's plumbing: what a model needs besides the shaped operators of adapters.py.

Element-wise: the ONNX inputs are the DESC's tensors in order, broadcast by ONNX's multidirectional rule
(NumPy's, which dmlcli's broadcast applies: DirectML reads such a tensor through zero Strides), and each ONNX
attribute is a DESC field (LeakyRelu's alpha is ACTIVATION_LEAKY_RELU's Alpha). Plumbing: Transpose and Expand
are ELEMENT_WISE_IDENTITY on the input seen through permuted or zero Strides (the view a strided tensor desc
gives DirectML); Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference), Shape, Size and Constant run
no DirectML operator at all: ONNX Runtime's DirectML provider reuses the buffer or reads the Sizes (`views`).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .adapters import (TENSOR_PROTO_TYPES, MappingError, OnnxCall, Prepared, broadcast_operands, data_input,
                       exact_text, host_values, normalised_axis)

# ONNX's TensorProto codes of the types DirectML has (bool is UINT8's 0 and 1).
BOOL_CODE = 9


def given_inputs(call: OnnxCall) -> list[np.ndarray]:
    return [tensor for tensor in call.inputs if tensor is not None]


def elementwise(*attributes: tuple[str, str, float]) -> Callable[[OnnxCall, dict], Prepared]:
    """An adapter for an element-wise ONNX operator whose attributes are FLOAT fields: (DESC field, ONNX attribute,
    ONNX's default) each. The inputs are broadcast (ONNX's multidirectional broadcasting, NumPy's rule)."""
    def adapt(call: OnnxCall, fixed) -> Prepared:
        values = dict(fixed)
        for field, name, default in attributes:
            values[field] = float(call.attr(name, default))
        operands, finish = broadcast_operands(given_inputs(call))
        return Prepared(values, operands, broadcast=True, finish=finish)

    return adapt


def adapt_clip(call: OnnxCall, fixed) -> Prepared:
    """Clip -> CLIP1 (typed Min and Max in the input's type): opset 11's min and max inputs, opset 6's attributes;
    a bound left out is the type's lowest or highest value (ONNX's numeric_limits::lowest() and max())."""
    from ...data_types import from_numpy

    data = data_input(call)
    limits = np.finfo(data.dtype) if data.dtype.kind == "f" else np.iinfo(data.dtype)
    if call.since(11):
        low, high = call.input(1), call.input(2)
        low = limits.min if low is None else host_values(low).reshape(-1)[0]
        high = limits.max if high is None else host_values(high).reshape(-1)[0]
    else:
        low, high = call.attr("min", float(limits.min)), call.attr("max", float(limits.max))
    values = {**fixed, "MinMaxDataType": from_numpy(data.dtype).name,
              "Min": exact_text(data.dtype.type(low).item()), "Max": exact_text(data.dtype.type(high).item())}
    return Prepared(values, [data])


INFINITY_MODES = {(1, 1): "EITHER", (1, 0): "POSITIVE", (0, 1): "NEGATIVE"}


def adapt_is_inf(call: OnnxCall, fixed) -> Prepared:
    """IsInf's detect_positive and detect_negative -> IS_INFINITY's InfinityMode."""
    mode = INFINITY_MODES[(int(call.attr("detect_positive", 1)), int(call.attr("detect_negative", 1)))]
    return Prepared({**fixed, "InfinityMode": mode}, [data_input(call)])


def detects_nothing(call: OnnxCall) -> bool:
    return not call.attr("detect_positive", 1) and not call.attr("detect_negative", 1)


def onnx_type(code) -> np.dtype:
    """The NumPy type of an ONNX TensorProto code (Cast's `to`, ConstantOfShape's value)."""
    name = TENSOR_PROTO_TYPES.get(int(code))
    if name is None:
        raise MappingError(f"ONNX's data type {code} (a TensorProto code) has no DirectML data type")
    return np.dtype(name)


def adapt_cast(call: OnnxCall, fixed) -> Prepared:
    """Cast -> CAST, the output type ONNX's `to` (a 0-D tensor as DirectML's {1}, reshaped back)."""
    operands, finish = broadcast_operands([data_input(call)])
    return Prepared(dict(fixed), operands, output_dtype=onnx_type(call.attr("to")).name, finish=finish)


def casts_to_bool(call: OnnxCall) -> bool:
    return int(call.attr("to", 0)) == BOOL_CODE


def casts_to_another_type(call: OnnxCall) -> bool:
    """Cast to a type DirectML has none of (strings, bfloat16, float8); bool is casts_to_bool's."""
    return int(call.attr("to", 0)) not in TENSOR_PROTO_TYPES


def adapt_constant_of_shape(call: OnnxCall, fixed) -> Prepared:
    """ConstantOfShape -> FILL_VALUE_CONSTANT: the shape input is the output's Sizes, `value` (one element,
    float32 0 by default) its Value and type."""
    value = call.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    shape = tuple(int(size) for size in host_values(data_input(call)).reshape(-1))
    return Prepared({**fixed, "Value": exact_text(value[0].item()), "OutputTensor.Sizes": shape}, [],
                    output_dtype=value.dtype.name)


def fills_nothing(call: OnnxCall) -> bool:
    return 0 in host_values(data_input(call)).reshape(-1).tolist() or data_input(call).size == 0


def variadic_count(call: OnnxCall) -> int:
    return len(given_inputs(call))


# ---------------------------------------------------------------- strided views copied by ELEMENT_WISE_IDENTITY


def adapt_transpose(call: OnnxCall, fixed) -> Prepared:
    """Transpose -> ELEMENT_WISE_IDENTITY of the input seen through permuted Strides (perm, default reversed)."""
    data = data_input(call)
    perm = call.attr("perm")
    order = tuple(range(data.ndim))[::-1] if perm is None else tuple(normalised_axis(p, data.ndim, "perm") for p in perm)
    if sorted(order) != list(range(data.ndim)):
        raise MappingError(f"ONNX's perm {list(perm)} is not a permutation of the {data.ndim} axes")
    return Prepared(dict(fixed), [np.transpose(data, order)])


def adapt_expand(call: OnnxCall, fixed) -> Prepared:
    """Expand -> ELEMENT_WISE_IDENTITY of the input seen through zero Strides at the broadcast Sizes (ONNX's
    shape and the input's, broadcast both ways)."""
    data = data_input(call)
    wanted = tuple(int(size) for size in host_values(call.input(1)).reshape(-1))
    try:
        shape = np.broadcast_shapes(data.shape, wanted)
    except ValueError:
        raise MappingError(f"ONNX's Expand shape {list(wanted)} does not broadcast with the input's "
                           f"{list(data.shape)}") from None
    return Prepared(dict(fixed), [np.broadcast_to(data, shape)])


# ---------------------------------------------------------------- no DirectML operator: reshapes, Sizes, constants


def reshape_target(call: OnnxCall) -> tuple[int, ...]:
    """Reshape's output Sizes: the shape input (opset 5; an attribute before), 0 copying the input's size unless
    allowzero, -1 taking what is left."""
    data = data_input(call)
    given = call.input(1)
    wanted = [int(v) for v in (host_values(given).reshape(-1) if given is not None else call.attr("shape", ()))]
    if not call.attr("allowzero", 0):
        wanted = [data.shape[i] if size == 0 and i < data.ndim else size for i, size in enumerate(wanted)]
    if wanted.count(-1) > 1:
        raise MappingError(f"ONNX's Reshape shape {wanted} has more than one -1")
    if -1 in wanted:
        known = math.prod(size for size in wanted if size != -1)
        if known == 0 or data.size % known:
            raise MappingError(f"ONNX's Reshape cannot fit Sizes {list(data.shape)} into {wanted}")
        wanted[wanted.index(-1)] = data.size // known
    if math.prod(wanted) != data.size:
        raise MappingError(f"ONNX's Reshape shape {wanted} holds {math.prod(wanted)} elements, the input "
                           f"{data.size}")
    return tuple(wanted)


def view_reshape(call: OnnxCall) -> tuple[np.ndarray, ...]:
    return (data_input(call).reshape(reshape_target(call)),)


def view_flatten(call: OnnxCall) -> tuple[np.ndarray, ...]:
    data = data_input(call)
    axis = int(call.attr("axis", 1))
    axis = axis + data.ndim if axis < 0 else axis
    if not 0 <= axis <= data.ndim:
        raise MappingError(f"ONNX's Flatten axis {call.attr('axis')} is outside [-{data.ndim}, {data.ndim}]")
    return (data.reshape(math.prod(data.shape[:axis]), math.prod(data.shape[axis:])),)


def _axes(call: OnnxCall, rank: int, input_from: int) -> list[int] | None:
    """Squeeze's or Unsqueeze's axes: the input (opset 13) or the attribute (before), normalised to `rank`."""
    given = call.input(1) if call.since(input_from) else None
    axes = [int(v) for v in host_values(given).reshape(-1)] if given is not None else call.attr("axes")
    return None if axes is None else sorted(normalised_axis(axis, rank, "axes") for axis in axes)


def view_squeeze(call: OnnxCall) -> tuple[np.ndarray, ...]:
    data = data_input(call)
    axes = _axes(call, data.ndim, 13)
    if axes is None:
        axes = [axis for axis, size in enumerate(data.shape) if size == 1]
    if any(data.shape[axis] != 1 for axis in axes):
        raise MappingError(f"ONNX's Squeeze axes {axes} include an axis of Sizes {list(data.shape)} that is not 1")
    return (data.reshape(tuple(size for axis, size in enumerate(data.shape) if axis not in axes)),)


def view_unsqueeze(call: OnnxCall) -> tuple[np.ndarray, ...]:
    data = data_input(call)
    count = call.input(1).size if call.since(13) and call.input(1) is not None else \
        len(call.attr("axes", ()))
    axes = _axes(call, data.ndim + count, 13) or []
    shape = list(data.shape)
    for axis in axes:
        shape.insert(axis, 1)
    return (data.reshape(shape),)


def view_identity(call: OnnxCall) -> tuple[np.ndarray, ...]:
    return (data_input(call),)


def view_dropout(call: OnnxCall) -> tuple[np.ndarray, ...]:
    """Dropout in inference is its input; its optional mask is all true (ones)."""
    data = data_input(call)
    return (data, np.ones(data.shape, np.bool_))[:max(call.outputs, 1)]


def trains(call: OnnxCall) -> bool:
    """Dropout with training_mode true (opset 12's input) drops elements at random."""
    flag = call.input(2)
    return flag is not None and bool(host_values(flag).reshape(-1)[0])


def view_shape(call: OnnxCall) -> tuple[np.ndarray, ...]:
    """The input's Sizes as int64 (opset 15's start and end slice them, clamped as Python slices)."""
    shape = data_input(call).shape
    start, end = int(call.attr("start", 0)), call.attr("end")
    return (np.array(shape[slice(start, None if end is None else int(end))], np.int64),)


def view_size(call: OnnxCall) -> tuple[np.ndarray, ...]:
    return (np.array(data_input(call).size, np.int64),)


def view_constant(call: OnnxCall) -> tuple[np.ndarray, ...]:
    """Constant's value, given by one of its attributes (a tensor, or value_float(s), value_int(s))."""
    for name, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):
        value = call.attr(name)
        if value is not None:
            return (np.asarray(value) if dtype is None else np.asarray(value, dtype),)
    raise MappingError("ONNX's Constant has none of value, value_float(s), value_int(s) (strings and sparse "
                       "tensors have no DirectML type)")
