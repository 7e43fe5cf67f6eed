"""How one ONNX node test becomes one DirectML call: the adapters the table (table.py) names.

An adapter reads the case's ONNX inputs (by their position in ONNX's operator schema) and attributes and
returns a `Prepared` call: the DESC field values (by field name, or "<Tensor>.Sizes" for an output's Sizes
the caller states), the input tensors in DESC order, and `finish`, which turns DirectML's outputs into
ONNX's. `finish` and the reshapes of inputs only ever do what lies outside the operator and changes no
value: dropping or adding size-1 axes (keepdims=0, ranks padded with leading 1s), reading indices of one
integer type as another where the bits are the same, taking the rows a count says are written. The
conditions under which DirectML cannot compute a case are the table's (`Entry.cannot`), checked before an
adapter runs: adapters and those conditions share the helpers below (the axes, windows and ranks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Mapping, Sequence

import numpy as np

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
MAX_RANK = 8  # DirectML tensors have 1 to 8 dimensions
MAX_DIAGONAL_RANK = 4  # DIAGONAL_MATRIX1 takes 2 to 4 dimensions
MAX_UNPOOL_RANK = 4  # MAX_UNPOOLING takes 4 dimensions

# ONNX's TensorProto.DataType codes (onnx.proto) -> NumPy dtype names, for EyeLike's `dtype` attribute.
TENSOR_PROTO_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                      9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


class MappingError(Exception):
    """The case is not a well-formed ONNX call (an axis past the rank): the case's error, not a skip."""


# The kind of each attribute the table's ONNX operators declare, from ONNX's operator schemas (onnx.defs, every
# version of each operator of table.py; tests/test_suite_hardening.py holds this to onnx.defs where onnx is
# installed). A case is JSON: an attribute of another kind (null, a list for an INT, NaN for an integer, a number
# for a STRING) is the case's error, said once here, before an adapter reads it (issue 34: 115 of 1,500 mutated
# cases ended the whole run with an internal error).
ATTRIBUTE_KINDS = {
    **dict.fromkeys(("activation_alpha", "activation_beta", "scales"), "FLOATS"),
    "activations": "STRINGS",
    # p: an INT of LpPool (opset 18) and LpNormalization, a FLOAT of LpPool-1: a number either way
    **dict.fromkeys(("alpha", "beta", "bias", "clip", "cubic_coeff_a", "epsilon", "extrapolation_value", "height_scale",
                     "momentum", "norm_coefficient", "norm_coefficient_post", "scale", "softcap", "spatial_scale",
                     "width_scale", "p", "gamma", "lambd", "max", "min", "ratio", "value_float"), "FLOAT"),
    **dict.fromkeys(("antialias", "axis", "batch_axis", "batch_dims", "block_size", "blocksize", "broadcast",
                     "ceil_mode", "count_include_pad", "dtype", "exclude_outside", "exclusive", "group", "hidden_size",
                     "input_forget", "interleaved", "is_causal", "is_test", "k", "keepdims", "kv_num_heads", "largest",
                     "layout", "left_window_size", "linear_before_reset", "noop_with_empty_axes", "num_groups",
                     "num_heads", "num_outputs", "output_dtype", "output_height", "output_sequence", "output_width",
                     "precision", "q_num_heads", "qk_matmul_output_mode", "reverse", "right_window_size",
                     "rotary_embedding_dim", "sampling_ratio", "saturate", "select_last_index", "size",
                     "softmax_precision", "sorted", "spatial", "stash_type", "storage_order", "time_axis",
                     "training_mode", "transA", "transB", "upper", "allowzero", "detect_negative", "detect_positive",
                     "end", "fmod", "seed", "start", "value_int"), "INT"),
    **dict.fromkeys(("auto_pad", "coordinate_transformation_mode", "direction", "keep_aspect_ratio_policy", "mode",
                     "nearest_mode", "reduction", "approximate", "round_mode", "value_string"), "STRING"),
    **dict.fromkeys(("axes", "consumed_inputs", "dilations", "ends", "kernel_shape", "output_padding", "output_shape",
                     "paddings", "pads", "perm", "split", "starts", "strides", "shape", "value_ints"), "INTS"),
    "value_floats": "FLOATS", "value_strings": "STRINGS", "sparse_value": "SPARSE_TENSOR",
    # Names whose kind differs between operators: Pad-2's value is a FLOAT, Constant's and ConstantOfShape's a
    # TENSOR; Cast's to is a TensorProto code (INT) and, in a string form, its type's name.
    "value": ("FLOAT", "TENSOR"), "to": ("INT", "STRING"),
}
_KIND_WORDS = {"INT": "an integer", "FLOAT": "a number", "STRING": "text", "INTS": "a list of integers",
               "FLOATS": "a list of numbers", "STRINGS": "a list of texts", "TENSOR": "a tensor",
               "SPARSE_TENSOR": "a sparse tensor"}


def attribute_kinds(name: str) -> tuple[str, ...]:
    """The kinds ONNX declares for an attribute of this name (one, or several where operators differ); () if
    ATTRIBUTE_KINDS does not list it."""
    kinds = ATTRIBUTE_KINDS.get(name, ())
    return (kinds,) if isinstance(kinds, str) else kinds


def _is_kind(value, kind: str) -> bool:
    if kind in ("INTS", "FLOATS", "STRINGS"):
        return isinstance(value, list) and all(_is_kind(item, kind[:-1]) for item in value)
    if kind == "INT":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "FLOAT":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in ("TENSOR", "SPARSE_TENSOR"):  # a tensor's values, as a case file or onnx's helper gives them
        return value is not None and not isinstance(value, (str, bytes, dict))
    return isinstance(value, (str, bytes))


def check_attribute_kinds(call: OnnxCall) -> None:
    """MappingError naming the first attribute whose value is not of the kind ONNX declares for it."""
    for name, value in call.attributes.items():
        kinds = attribute_kinds(name)
        if kinds and not any(_is_kind(value, kind) for kind in kinds):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
            words = " or ".join(f"{_KIND_WORDS[kind]} (an ONNX {kind})" for kind in kinds)
            raise MappingError(f"ONNX's {call.op} attribute {name} must be {words}, found {shown}")


def _same(outputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    return tuple(outputs)


@dataclass
class Prepared:
    """One DirectML call standing for an ONNX case."""

    values: dict[str, object]  # by DESC field (or "<Tensor>.Sizes"), as the table's `fields` name them
    inputs: list[np.ndarray]  # in DESC order (a variadic field's tensors one after another)
    output_dtype: str | None = None  # the output whose type is a free choice (ArgMax's INT64 indices)
    broadcast: bool = False  # NumPy's broadcasting (ONNX's multidirectional broadcasting), element-wise only
    finish: Callable[[Sequence[np.ndarray]], tuple[np.ndarray, ...]] = _same  # DirectML outputs -> ONNX's
    # The DirectML outputs the call asks for (DESC names; `outputs=`), None for every one: ONNX Runtime's DirectML
    # provider binds only the outputs a node has, leaving the other _Maybenull_ ones NULL, so DirectML neither
    # checks nor computes them. `finish` then takes the results of those asked, in DESC order.
    outputs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class OnnxCall:
    """A case's ONNX side: inputs by schema position (None where left out), attributes, output count."""

    op: str
    inputs: tuple[np.ndarray | None, ...]
    attributes: Mapping[str, object] = field(default_factory=dict)
    outputs: int = 1
    output_names: tuple[str, ...] = ()  # "" for an optional output the case does not check (RNN's Y)
    # The opset of the node's domain in a model (an operator's meaning changes with it: Softmax before 13 takes
    # every axis from `axis` on); None for a node test, which is written for the newest version.
    opset: int | None = None

    def since(self, version: int) -> bool:
        """Whether the node follows the operator's definition from `version` on (a node test always does)."""
        return self.opset is None or self.opset >= version

    def input(self, position: int) -> np.ndarray | None:
        return self.inputs[position] if position < len(self.inputs) else None

    def attr(self, name: str, default=None):
        return self.attributes.get(name, default)


def onnx_call(case) -> OnnxCall:
    """The ONNX side of a loaded case: an empty name in input_names is an optional input left out."""
    names = case.input_names or tuple(f"input{i}" for i in range(len(case.inputs)))
    given = iter(case.inputs)
    inputs = tuple(None if not name else next(given) for name in names)
    outputs = len(case.output_names) or len(case.all_expected)
    return OnnxCall(case.onnx_op, inputs, dict(case.attributes), outputs, tuple(case.output_names))


# ---------------------------------------------------------------- helpers


def normalised_axis(axis, rank: int, what: str = "axis") -> int:
    """ONNX's axis in [-rank, rank - 1] as DirectML's UINT axis in [0, rank - 1]."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise MappingError(f"ONNX's {what} {axis} is outside [-{rank}, {rank - 1}] for a rank-{rank} tensor")
    return axis + rank if axis < 0 else axis


def host_values(tensor) -> np.ndarray:
    """A tensor whose values an adapter reads (k, a shape, axes) as a NumPy array: a model run on the GPU holds the
    tensors it computes on the device (CuPy's arrays, which NumPy cannot read implicitly)."""
    if isinstance(tensor, np.ndarray) or not hasattr(tensor, "get"):
        return np.asarray(tensor)
    return tensor.get()


def scalar_of(tensor: np.ndarray, what: str):
    """The one value of a 0-D or one-element ONNX tensor (k, axis, depth, start, ...)."""
    array = host_values(tensor)
    if array.size != 1:
        raise MappingError(f"ONNX's {what} must hold one value, found Sizes {list(array.shape)}")
    return array.reshape(-1)[0].item()


def whole_scalar(tensor: np.ndarray, what: str) -> int:
    """The one value of an ONNX tensor that counts or indexes (k, depth, an axis, a step count) as an integer:
    NaN, an infinity or a fraction is the case's error."""
    value = scalar_of(tensor, what)
    if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
        raise MappingError(f"ONNX's {what} must be a whole number, found {value}")
    return int(value)


def finite_scalar(tensor: np.ndarray, what: str):
    """The one value of an ONNX tensor that must be finite (Range's start, limit and delta)."""
    value = scalar_of(tensor, what)
    if isinstance(value, float) and not math.isfinite(value):
        raise MappingError(f"ONNX's {what} must be finite, found {value}")
    return value


def exact_text(value) -> str:
    """A number as text that DirectML's typed parameters read exactly (a double's repr round-trips)."""
    return repr(float(value)) if isinstance(value, float) else str(int(value))


def padded(array: np.ndarray, rank: int) -> np.ndarray:
    """The array with leading size-1 axes up to `rank` (a reshape: no value changes)."""
    return array.reshape((1,) * (rank - array.ndim) + array.shape)


class ReshapedTo:
    """A finish that reshapes each output to ONNX's Sizes (None: as it is); element counts must agree, so a
    wrong count is left for the comparison to report."""

    def __init__(self, shapes: Sequence[tuple[int, ...] | None]) -> None:
        self.shapes = tuple(None if shape is None else tuple(shape) for shape in shapes)
        self.counts = tuple(None if shape is None else math.prod(shape) for shape in self.shapes)

    def __call__(self, outputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        return tuple(output if shape is None or output.size != count else output.reshape(shape)
                     for output, shape, count in zip(outputs, self.shapes, self.counts))

    def planned(self, shapes: Sequence[tuple[int, ...]]) -> Callable[[Sequence[np.ndarray]], tuple] | None:
        """This finish for outputs of these Sizes on every call (a planned call's), which outputs it reshapes
        decided once; None where it hands them back as they are."""
        targets = tuple(None if wanted is None or count != math.prod(shape) or wanted == tuple(shape) else wanted
                        for wanted, count, shape in zip(self.shapes, self.counts, shapes))
        if len(targets) == len(shapes) and not any(targets):
            return None
        if targets == (None,):  # one output of several handed back (a finish keeps as many as it has Sizes for)
            return lambda outputs: (outputs[0],)
        if len(targets) == 1:
            (target,) = targets
            return lambda outputs: (outputs[0].reshape(target),)
        return lambda outputs: tuple(output if target is None else output.reshape(target)
                                     for output, target in zip(outputs, targets))


def reshaped_to(shapes: Sequence[tuple[int, ...] | None]) -> ReshapedTo:
    return ReshapedTo(shapes)


def planned_finish(finish: Callable, shapes: Sequence[tuple[int, ...]]) -> Callable | None:
    """An adapter's finish for DirectML's outputs of these Sizes on every call (a planned call's): None where it
    hands them back as they are (the call's results are then the node's), the reshapes decided once, or `finish`."""
    if finish is _same or finish is tuple:
        return None
    return finish.planned(shapes) if isinstance(finish, ReshapedTo) else finish


def data_input(call: OnnxCall) -> np.ndarray:
    data = call.input(0)
    if data is None:
        raise MappingError(f"ONNX's {call.op} needs its first input")
    return data




# ---------------------------------------------------------------- reductions


def given_axes(call: OnnxCall) -> list | None:
    """A reduction's axes as ONNX gives them: the axes input (opset 18) or attribute; None where empty or absent."""
    given = call.input(1)
    axes = list(given.reshape(-1)) if given is not None else call.attr("axes")
    return None if axes is None or len(axes) == 0 else axes


def reduce_axes(call: OnnxCall, rank: int) -> tuple[int, ...] | None:
    """The axes to reduce (normalised), None for every axis."""
    axes = given_axes(call)
    return None if axes is None else tuple(normalised_axis(axis, rank, "axes") for axis in axes)


def kept_shape(shape: tuple[int, ...], axes: tuple[int, ...] | None, keepdims) -> tuple[int, ...] | None:
    """ONNX's output Sizes where keepdims=0 drops the reduced axes (None: DirectML's own Sizes)."""
    if keepdims:
        return None
    reduced = set(range(len(shape)) if axes is None else axes)
    return tuple(size for axis, size in enumerate(shape) if axis not in reduced)


def adapt_reduce(call: OnnxCall, fixed: Mapping[str, object]) -> Prepared:
    data = data_input(call)
    axes = reduce_axes(call, data.ndim)
    values = dict(fixed)
    if axes is not None:
        values["Axes"] = axes
    return Prepared(values, [data], finish=reshaped_to([kept_shape(data.shape, axes, call.attr("keepdims", 1))]))


def adapt_arg_reduce(call: OnnxCall, fixed: Mapping[str, object]) -> Prepared:
    data = data_input(call)
    axis = normalised_axis(call.attr("axis", 0), data.ndim)
    values = {**fixed, "Axes": (axis,),
              "AxisDirection": "DECREASING" if call.attr("select_last_index", 0) else "INCREASING"}
    return Prepared(values, [data], output_dtype="int64",
                    finish=reshaped_to([kept_shape(data.shape, (axis,), call.attr("keepdims", 1))]))


def adapt_axis_activation(call: OnnxCall, fixed: Mapping[str, object]) -> Prepared:
    """Softmax, LogSoftmax, Hardmax -> the *1 activations' Axes: opset 13 normalises along one axis (default -1);
    before 13 the input is seen as 2-D, {axis, ..., rank - 1} normalised together (default axis 1)."""
    data = data_input(call)
    if call.since(13):
        return Prepared({**fixed, "Axes": (normalised_axis(call.attr("axis", -1), data.ndim),)}, [data])
    axis = normalised_axis(call.attr("axis", 1), data.ndim)
    return Prepared({**fixed, "Axes": tuple(range(axis, data.ndim))}, [data])


# ---------------------------------------------------------------- data movement


def adapt_concat(call: OnnxCall, fixed) -> Prepared:
    tensors = [tensor for tensor in call.inputs if tensor is not None]
    return Prepared({**fixed, "Axis": normalised_axis(call.attr("axis"), tensors[0].ndim)}, tensors)


def split_sizes(call: OnnxCall, length: int) -> list[int]:
    """Each output's size along the axis: the `split` input, or num_outputs (opset 18: every piece
    ceil(length / n) but a smaller last one), or equal pieces, one per output (opset 13)."""
    given = call.input(1)
    if given is not None:
        return [int(size) for size in given.reshape(-1)]
    if call.attr("split") is not None:
        return [int(size) for size in call.attr("split")]
    count = int(call.attr("num_outputs", call.outputs))
    if not 1 <= count <= length:
        raise MappingError(f"ONNX's Split into {count} outputs of an axis of {length}: num_outputs must be from 1 to "
                           "the axis's length")
    piece = -(-length // count)
    return [piece] * (count - 1) + [length - piece * (count - 1)]


def adapt_split(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    axis = normalised_axis(call.attr("axis", 0), data.ndim)
    sizes = split_sizes(call, data.shape[axis])
    shapes = [data.shape[:axis] + (size,) + data.shape[axis + 1:] for size in sizes]
    return Prepared({**fixed, "Axis": axis, "OutputTensors.Sizes": shapes}, [data])


def _integers(tensor) -> list[int] | None:
    return None if tensor is None else [int(v) for v in host_values(tensor).reshape(-1)]


def _slice_arguments(call: OnnxCall):
    """Slice's starts, ends, axes and steps: inputs from opset 10, attributes (no steps) before."""
    if call.since(10):
        return tuple(_integers(call.input(i)) for i in range(1, 5))
    axes = call.attr("axes")
    return [int(v) for v in call.attr("starts")], [int(v) for v in call.attr("ends")], axes, None


def slice_ranges(call: OnnxCall) -> list[tuple[int, int, int, int]]:
    """(axis, first element read, count, step) per sliced axis: ONNX clamps starts and ends as Python's
    slice(...).indices does."""
    data = data_input(call)
    starts, ends, axes_given, steps_given = _slice_arguments(call)
    axes = [normalised_axis(a, data.ndim, "axes") for a in axes_given] if axes_given is not None else \
        list(range(len(starts)))
    if len(set(axes)) != len(axes):  # ONNX: "Behavior is undefined if an axis is repeated"; ONNX Runtime refuses it
        raise MappingError(f"ONNX's Slice axes {[int(a) for a in axes_given]} name an axis more than once")
    steps = steps_given if steps_given is not None else [1] * len(starts)
    if 0 in steps:
        raise MappingError("ONNX's Slice steps may not be 0")
    found = []
    for axis, start, end, step in zip(axes, starts, ends, steps):
        first, stop, step = slice(start, end, step).indices(data.shape[axis])
        found.append((axis, first, len(range(first, stop, step)), step))
    return found


def adapt_slice(call: OnnxCall, fixed) -> Prepared:
    """starts/ends/axes/steps -> SLICE1's window, which spans the first to the last element read."""
    data = data_input(call)
    rank = data.ndim
    offsets, sizes, strides = [0] * rank, list(data.shape), [1] * rank
    for axis, first, count, step in slice_ranges(call):
        last = first + (count - 1) * step
        offsets[axis] = min(first, last)
        sizes[axis] = abs(last - first) + 1
        strides[axis] = step  # negative: SLICE1 copies from the window's end
    values = {**fixed, "InputWindowOffsets": tuple(offsets), "InputWindowSizes": tuple(sizes),
              "InputWindowStrides": tuple(strides)}
    return Prepared(values, [data])


PAD_MODES = {"constant": "CONSTANT", "edge": "EDGE", "reflect": "REFLECTION", "wrap": "WRAP"}


def pad_amounts(call: OnnxCall) -> list[int]:
    """Pad's pads: the input from opset 11, the attribute before."""
    return _integers(call.input(1)) if call.since(11) else [int(v) for v in call.attr("pads")]


def pad_widths(call: OnnxCall) -> tuple[list[int], list[int]]:
    """ONNX's pads (for the axes given, or every axis) as DirectML's StartPadding and EndPadding, one per axis."""
    rank = data_input(call).ndim
    pads = pad_amounts(call)
    axes_given = call.input(3)
    axes = [normalised_axis(a, rank, "axes") for a in axes_given.reshape(-1)] if axes_given is not None else \
        list(range(rank))
    if len(pads) != 2 * len(axes):
        raise MappingError(f"ONNX's pads has {len(pads)} values for {len(axes)} axes (2 per axis)")
    start, end = [0] * rank, [0] * rank
    for index, axis in enumerate(axes):
        start[axis], end[axis] = pads[index], pads[index + len(axes)]
    return start, end


def wraps_past_the_input(call: OnnxCall) -> bool:
    """Pad mode wrap with more padding than the input's size along an axis (numpy.pad repeats it periodically)."""
    if str(call.attr("mode", "constant")) != "wrap":
        return False
    shape = data_input(call).shape
    return any(count > size for widths in pad_widths(call) for count, size in zip(widths, shape))


def adapt_pad(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    start, end = pad_widths(call)
    mode = str(call.attr("mode", "constant"))
    value = call.input(2) if call.since(11) else np.asarray(call.attr("value", 0.0), data.dtype)
    values = {**fixed, "PaddingMode": PAD_MODES[mode], "StartPadding": tuple(start), "EndPadding": tuple(end)}
    if mode == "constant":
        values["PaddingValue"] = exact_text(scalar_of(value, "constant_value")) if value is not None else "0"
    return Prepared(values, [data])


def adapt_tile(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    repeats = tuple(int(v) for v in call.input(1).reshape(-1))
    return Prepared({**fixed, "Repeats": repeats}, [data])


def gather_shape(call: OnnxCall) -> tuple[int, ...]:
    data, indices = data_input(call), call.input(1)
    axis = normalised_axis(call.attr("axis", 0), data.ndim)
    return data.shape[:axis] + indices.shape + data.shape[axis + 1:]


def gather_nd_shape(call: OnnxCall) -> tuple[int, ...]:
    data, indices = data_input(call), call.input(1)
    return indices.shape[:-1] + data.shape[int(call.attr("batch_dims", 0)) + indices.shape[-1]:]


def common_rank(call: OnnxCall, output_shape: tuple[int, ...]) -> int:
    """The one DimensionCount the inputs and the output of a GATHER call share (leading 1s added)."""
    return max(*(t.ndim for t in call.inputs if t is not None), len(output_shape), 1)


def adapt_gather(call: OnnxCall, fixed) -> Prepared:
    """GATHER takes one DimensionCount for all three tensors: input and indices get leading 1s up to the
    output's rank, IndexDimensions says how many of the indices' dimensions count, Axis moves with the 1s."""
    data, indices = data_input(call), call.input(1)
    axis = normalised_axis(call.attr("axis", 0), data.ndim)
    onnx_shape = gather_shape(call)
    rank = common_rank(call, onnx_shape)
    values = {**fixed, "Axis": axis + rank - data.ndim, "IndexDimensions": indices.ndim}
    return Prepared(values, [padded(data, rank), padded(indices, rank)], finish=reshaped_to([onnx_shape]))


def indices_window(call: OnnxCall) -> tuple[slice, ...] | None:
    """GatherElements' and ScatterElements' data seen through the indices' Sizes off the axis, where the indices
    are smaller there (ONNX allows it; DirectML's *_ELEMENTS want equal Sizes off Axis): the window of data that
    a tensor desc with data's Strides and the indices' Sizes reads. None where the Sizes are already equal."""
    data, indices = data_input(call), call.input(1)
    axis = normalised_axis(call.attr("axis", 0), data.ndim)
    if indices is None or indices.ndim != data.ndim:
        raise MappingError(f"ONNX's {call.op} indices must have data's rank {data.ndim}")
    window = []
    for dimension, (have, want) in enumerate(zip(data.shape, indices.shape)):
        if dimension != axis and want > have:
            raise MappingError(f"ONNX's {call.op} indices Sizes {list(indices.shape)} exceed data's "
                               f"{list(data.shape)} off the axis")
        window.append(slice(None) if dimension == axis else slice(0, want))
    smaller = any(want < have for d, (have, want) in enumerate(zip(data.shape, indices.shape)) if d != axis)
    return tuple(window) if smaller else None


def adapt_gather_elements(call: OnnxCall, fixed) -> Prepared:
    """GATHER_ELEMENTS reads data through the indices' Sizes off the axis (the same Strides, smaller Sizes: a
    window), as ONNX Runtime's DirectML provider binds it; equal Sizes are the plain call."""
    data = data_input(call)
    window = indices_window(call)
    view = data if window is None else data[window]
    return Prepared({**fixed, "Axis": normalised_axis(call.attr("axis", 0), data.ndim)}, [view, call.input(1)])


def adapt_gather_nd(call: OnnxCall, fixed) -> Prepared:
    data, indices = data_input(call), call.input(1)
    batch = int(call.attr("batch_dims", 0))
    onnx_shape = gather_nd_shape(call)
    rank = common_rank(call, onnx_shape)
    values = {**fixed, "InputDimensionCount": data.ndim, "IndicesDimensionCount": indices.ndim,
              "BatchDimensionCount": batch}
    return Prepared(values, [padded(data, rank), padded(indices, rank)], finish=reshaped_to([onnx_shape]))


def adapt_scatter_elements(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    axis = normalised_axis(call.attr("axis", 0), data.ndim)
    return Prepared({**fixed, "Axis": axis}, [data, call.input(1), call.input(2)])


def adapt_scatter_nd(call: OnnxCall, fixed) -> Prepared:
    data, indices, updates = data_input(call), call.input(1), call.input(2)
    rank = max(data.ndim, indices.ndim, updates.ndim)
    values = {**fixed, "InputDimensionCount": data.ndim, "IndicesDimensionCount": indices.ndim}
    return Prepared(values, [padded(data, rank), padded(indices, rank), padded(updates, rank)],
                    finish=reshaped_to([data.shape]))


def one_hot_depth(call: OnnxCall) -> int:
    return whole_scalar(call.input(1), "depth")


def adapt_one_hot(call: OnnxCall, fixed) -> Prepared:
    """ONNX inserts the one-hot axis; ONE_HOT's IndicesTensor has the output's rank with size 1 there, and
    its ValuesTensor the output's rank too ([off, on] along the last axis)."""
    indices, pair = data_input(call), call.input(2)  # the depth (input 1) comes through one_hot_depth
    rank = indices.ndim + 1
    axis = normalised_axis(call.attr("axis", -1), rank)
    depth = one_hot_depth(call)
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
    values = {**fixed, "Axis": axis, "OutputTensor.Sizes": shape}
    return Prepared(values, [np.expand_dims(indices, axis), pair.reshape((1,) * (rank - 1) + (pair.size,))])


def top_k_count(call: OnnxCall) -> int:
    """TopK's k: the input from opset 10, the attribute before."""
    return whole_scalar(call.input(1), "k") if call.since(10) else int(call.attr("k"))


def adapt_top_k(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    axis = normalised_axis(call.attr("axis", -1), data.ndim)
    values = {**fixed, "Axis": axis, "K": top_k_count(call),
              "AxisDirection": "DECREASING" if call.attr("largest", 1) else "INCREASING"}

    def finish(outputs):
        # ONNX's int64 indices: DirectML writes UINT64 (5_0) whose bits are the same for indices below 2^63.
        return outputs[0], outputs[1].view(np.int64) if outputs[1].dtype == np.uint64 else outputs[1]

    return Prepared(values, [data], output_dtype="uint64", finish=finish)


def top_k_free_order(call: OnnxCall) -> int | None:
    """sorted=0 leaves the order of TopK's k elements free in ONNX: the axis along which values and indices are
    compared as a set of (value, index) pairs (None: sorted, compared in place)."""
    if call.attr("sorted", 1):
        return None
    return normalised_axis(call.attr("axis", -1), data_input(call).ndim)


def in_index_order(outputs: Sequence[np.ndarray], axis: int) -> tuple[np.ndarray, ...]:
    """TopK's values and indices with each slice along `axis` ordered by index: one order for any two results
    holding the same (value, index) pairs, whatever order each was written in."""
    values, indices = outputs[0], outputs[1]
    order = np.argsort(indices, axis=axis, kind="stable")
    return np.take_along_axis(values, order, axis=axis), np.take_along_axis(indices, order, axis=axis)


DEPTH_SPACE_ORDERS = {"DCR": "DEPTH_COLUMN_ROW", "CRD": "COLUMN_ROW_DEPTH"}


def adapt_depth_space(call: OnnxCall, fixed) -> Prepared:
    mode = str(call.attr("mode", "DCR")).upper()
    if mode not in DEPTH_SPACE_ORDERS:
        raise MappingError(f"ONNX's mode {mode!r} is not DCR or CRD")
    values = {**fixed, "BlockSize": int(call.attr("blocksize")), "Order": DEPTH_SPACE_ORDERS[mode]}
    return Prepared(values, [data_input(call)])


def adapt_cumulative(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    exclusive_field = "HasExclusiveProduct" if call.op == "CumProd" else "HasExclusiveSum"
    values = {**fixed, "Axis": normalised_axis(whole_scalar(call.input(1), "axis"), data.ndim),
              "AxisDirection": "DECREASING" if call.attr("reverse", 0) else "INCREASING",
              exclusive_field: bool(call.attr("exclusive", 0))}
    return Prepared(values, [data])


def adapt_reverse_sequence(call: OnnxCall, fixed) -> Prepared:
    """ONNX's 1-D sequence_lens (one per batch entry) -> REVERSE_SUBSEQUENCES' SequenceLengthsTensor, of the
    input's rank with size 1 on the time axis, each length repeated over the other axes; int64 lengths
    (never negative in a valid case) as UINT64, the same values."""
    data, lengths = data_input(call), call.input(1)
    time_axis = normalised_axis(call.attr("time_axis", 0), data.ndim, "time_axis")
    batch_axis = normalised_axis(call.attr("batch_axis", 1), data.ndim, "batch_axis")
    if np.any(lengths < 0):
        raise MappingError("ONNX's sequence_lens holds a negative length")
    shape = tuple(1 if axis == time_axis else size for axis, size in enumerate(data.shape))
    along_batch = [1] * data.ndim
    along_batch[batch_axis] = lengths.size
    table = np.broadcast_to(lengths.reshape(along_batch).astype(np.uint64), shape).copy()
    return Prepared({**fixed, "Axis": time_axis}, [data, table])


def adapt_nonzero(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    rank = data.ndim

    def finish(outputs):
        # NONZERO_COORDINATES writes a count and an M x N table of UINT32 rows (the last `rank` columns are the
        # coordinates); ONNX wants the `count` coordinates as int64 columns, rank x count.
        count = int(np.asarray(outputs[0]).reshape(-1)[0])
        table = np.asarray(outputs[1])
        rows = table.reshape(-1, table.shape[-1])[:count, table.shape[-1] - rank:]
        return (rows.T.astype(np.int64),)

    return Prepared(dict(fixed), [data], finish=finish)


def adapt_eye_like(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    code = call.attr("dtype")
    dtype = TENSOR_PROTO_TYPES.get(int(code)) if code is not None else data.dtype.name
    if dtype is None:
        raise MappingError(f"ONNX's dtype {code} is not a TensorProto data type dmlcli knows")
    values = {**fixed, "Offset": int(call.attr("k", 0)), "Value": "1", "OutputTensor.Sizes": data.shape}
    return Prepared(values, [], output_dtype=dtype)


def trilu_bounds(call: OnnxCall) -> tuple[int, int]:
    """DiagonalFillBegin and DiagonalFillEnd: the range of column - row that is zeroed."""
    k = whole_scalar(call.input(1), "k") if call.input(1) is not None else 0
    return (INT32_MIN, k) if call.attr("upper", 1) else (k + 1, INT32_MAX)


def folded_batch(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """`shape` with its leading dimensions folded into one so that it has at most `rank` dimensions (a reshape of
    a packed tensor: ONNX Runtime's DirectML provider folds the leading dimensions of MatMul's operands so,
    SetDimensionCount(4, ..., foldEndDimensions))."""
    if len(shape) <= rank:
        return shape
    keep = rank - 1
    return (math.prod(shape[:len(shape) - keep]),) + shape[len(shape) - keep:]


def adapt_trilu(call: OnnxCall, fixed) -> Prepared:
    """DIAGONAL_MATRIX1 with InputTensor writes Value (0) where column - row is in [Begin, End): triu (upper=1)
    zeroes column - row < k, tril zeroes column - row > k. Past 4 dimensions the leading ones (each a stack of
    matrices treated alike) are folded into one, and the output reshaped back."""
    data = data_input(call)
    begin, end = trilu_bounds(call)
    values = {**fixed, "DiagonalFillBegin": begin, "DiagonalFillEnd": end, "Value": "0"}
    folded = folded_batch(data.shape, MAX_DIAGONAL_RANK)
    if folded == data.shape:
        return Prepared(values, [data])
    return Prepared(values, [data.reshape(folded)], finish=reshaped_to([data.shape]))


def adapt_range(call: OnnxCall, fixed) -> Prepared:
    start, limit, delta = (call.input(i) for i in range(3))
    first, last, step = (finite_scalar(t, name) for t, name in ((start, "start"), (limit, "limit"),
                                                                (delta, "delta")))
    if step == 0:
        raise MappingError("ONNX's Range delta is 0")
    count = max(math.ceil((last - first) / step), 0)  # ONNX's number_of_elements, computed outside the operator
    values = {**fixed, "ValueStart": exact_text(first), "ValueDelta": exact_text(step), "OutputTensor.Sizes": (count,)}
    return Prepared(values, [], output_dtype=start.dtype.name)


def adapt_one_input(call: OnnxCall, fixed) -> Prepared:
    """An ONNX operator of one input whose attributes (none, or the table's `fixed` fields) are the DESC's."""
    return Prepared(dict(fixed), [data_input(call)])


def broadcast_operands(tensors: Sequence[np.ndarray]) -> tuple[list[np.ndarray], Callable]:
    """An element-wise call's operands at one rank: ONNX's multidirectional broadcasting aligns Sizes from the
    right, DirectML's descs all have the output's DimensionCount (at least 1), so each operand gets leading
    size-1 axes (a reshape; dmlcli's broadcast then gives the zero Strides). A 0-D result (every operand 0-D) is
    DirectML's {1}, reshaped back; the finish that does so is returned with the operands."""
    try:
        shape = np.broadcast_shapes(*(tensor.shape for tensor in tensors))
    except ValueError:
        raise MappingError("ONNX's inputs of Sizes " + ", ".join(str(list(t.shape)) for t in tensors)
                           + " do not broadcast") from None
    rank = max(len(shape), 1)
    operands = [padded(tensor, rank) for tensor in tensors]
    return operands, (reshaped_to([shape]) if not shape else _same)


def adapt_where(call: OnnxCall, fixed) -> Prepared:
    condition, a, b = call.inputs[:3]
    operands, finish = broadcast_operands([condition.astype(np.uint8), a, b])
    return Prepared(dict(fixed), operands, broadcast=True, finish=finish)


# ---------------------------------------------------------------- normalization


def per_channel(tensor: np.ndarray, rank: int) -> np.ndarray:
    """ONNX's 1-D per-channel tensor (scale, B, mean, var) as DirectML's {1, C, 1, ...} of the input's rank."""
    return tensor.reshape((1, -1) + (1,) * (rank - 2))


def adapt_batch_normalization(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    scale, bias, mean, variance = (per_channel(call.input(i), data.ndim) for i in (1, 2, 3, 4))
    return Prepared({**fixed, "Epsilon": call.attr("epsilon", 1e-5)}, [data, mean, variance, scale, bias])


def adapt_instance_normalization(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    scale, bias = (per_channel(call.input(i), data.ndim) for i in (1, 2))
    return Prepared({**fixed, "Axes": tuple(range(2, data.ndim)), "Epsilon": call.attr("epsilon", 1e-5)},
                    [data, scale, bias])


def adapt_layer_normalization(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    axis = normalised_axis(call.attr("axis", -1), data.ndim)
    scale = call.input(1)
    bias = call.input(2) if call.input(2) is not None else np.zeros_like(scale)
    scale, bias = (padded(t, data.ndim) for t in (scale, bias))
    return Prepared({**fixed, "Axes": tuple(range(axis, data.ndim)), "Epsilon": call.attr("epsilon", 1e-5)},
                    [data, scale, bias])


def adapt_mean_variance_normalization(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    axes = tuple(sorted(normalised_axis(axis, data.ndim, "axes") for axis in call.attr("axes", (0, 2, 3))))
    return Prepared({**fixed, "Axes": axes}, [data])


def adapt_lrn(call: OnnxCall, fixed) -> Prepared:
    values = {**fixed, "LocalSize": int(call.attr("size")), "Alpha": call.attr("alpha", 1e-4),
              "Beta": call.attr("beta", 0.75), "Bias": call.attr("bias", 1.0)}
    return Prepared(values, [data_input(call)])


def adapt_lp_normalization(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    return Prepared({**fixed, "Axis": normalised_axis(call.attr("axis", -1), data.ndim), "P": int(call.attr("p", 2))},
                    [data])


# ---------------------------------------------------------------- Resize -> RESAMPLE3, Upsample -> RESAMPLE2


@dataclass(frozen=True)
class ResizeMapping:
    """RESAMPLE2's (RESAMPLE3's) fields for an ONNX Resize or Upsample call (per dimension), and the output's Sizes."""

    mode: str  # NEAREST_NEIGHBOR or LINEAR
    rounding: str  # RoundingDirection: INCREASING (ceil) or DECREASING (floor)
    scales: tuple[float, ...]
    input_offsets: tuple[float, ...]
    output_offsets: tuple[float, ...]
    output_shape: tuple[int, ...]
    antialiased: bool  # RESAMPLE3's Antialiased: ONNX's antialias with mode linear


# ONNX's nearest_mode as RESAMPLE2's RoundingDirection and an adjustment of InputPixelOffsets, as ONNX Runtime's
# DirectML provider maps it (DmlOperatorResize.cpp): round_prefer_floor(x) = ceil(x - 0.5), round_prefer_ceil(x) =
# floor(x + 0.5), and x - 0.5 is InputPixelOffset + 0.5.
NEAREST_MODES = {"round_prefer_floor": ("INCREASING", 0.5), "round_prefer_ceil": ("DECREASING", -0.5),
                 "floor": ("DECREASING", 0.0), "ceil": ("INCREASING", 0.0)}
FLOAT32_MAX = float(np.finfo(np.float32).max)  # a Scale that maps every output coordinate onto one input coordinate


def _resize_axes(call: OnnxCall, rank: int) -> list[int]:
    return [normalised_axis(a, rank, "axes") for a in call.attr("axes", list(range(rank)))]


def is_upsample(call: OnnxCall) -> bool:
    """Upsample, and Resize before opset 11, which has Upsample's inputs (X, scales) and meaning (asymmetric
    coordinates, nearest elements by floor); Upsample before opset 9 takes its scales as an attribute."""
    return call.op == "Upsample" or not call.since(11)


def _finite_scale(call: OnnxCall, axis: int, scale: float) -> float:
    """`scale`, MappingError where it is NaN or infinite: no output size follows from it."""
    if not math.isfinite(scale):
        raise MappingError(f"ONNX's {call.op} scale for axis {axis} is {scale}, where a finite number is needed")
    return scale


def _resize_sizes_and_scales(call: OnnxCall, shape: tuple[int, ...]) -> tuple[list[float], list[int]]:
    """ONNX's scale and output size per dimension (Resize-19's scales or sizes, axes, keep_aspect_ratio_policy)."""
    rank = len(shape)
    if is_upsample(call):
        given = call.input(1) if call.since(9) else None
        scales = [_finite_scale(call, axis, float(s)) for axis, s in
                  enumerate(host_values(given).ravel() if given is not None else call.attr("scales"))]
        return scales, [int(math.floor(n * s)) for n, s in zip(shape, scales)]
    axes = _resize_axes(call, rank)
    scales_in, sizes_in = call.input(2), call.input(3)
    scales, sizes = [1.0] * rank, list(shape)
    if scales_in is not None and scales_in.size:
        for axis, scale in zip(axes, scales_in.ravel()):
            scales[axis] = _finite_scale(call, axis, float(np.float32(scale)))
            sizes[axis] = int(math.floor(shape[axis] * scales[axis]))
        return scales, sizes
    wanted = [int(v) for v in sizes_in.ravel()]
    policy = str(call.attr("keep_aspect_ratio_policy", "stretch"))
    if policy == "stretch":
        for axis, size in zip(axes, wanted):
            scales[axis], sizes[axis] = size / shape[axis], size
        return scales, sizes
    ratios = [size / shape[axis] for axis, size in zip(axes, wanted)]
    common = min(ratios) if policy == "not_larger" else max(ratios)
    for axis in axes:
        scales[axis] = common
        sizes[axis] = int(math.floor(common * shape[axis] + 0.5))  # ONNX rounds half up here
    return scales, sizes


def _crop_region(call: OnnxCall, rank: int) -> tuple[list[float], list[float]]:
    """tf_crop_and_resize's region of interest per dimension (start, end), normalised coordinates: the roi input
    over `axes`, 0 and 1 elsewhere."""
    starts, ends = [0.0] * rank, [1.0] * rank
    roi = call.input(1)
    if roi is None or roi.size == 0:
        raise MappingError("ONNX's tf_crop_and_resize needs its roi input")
    values = [float(v) for v in roi.ravel()]
    axes = _resize_axes(call, rank)
    for i, axis in enumerate(axes):
        starts[axis], ends[axis] = values[i], values[len(axes) + i]
    return starts, ends


def _crop_coordinates(n: int, length: float, start: float, end: float, out: int) -> np.ndarray:
    """ONNX's tf_crop_and_resize input coordinates of one dimension (onnx/reference/ops/op_resize.py), float64."""
    o = np.arange(out, dtype=np.float64)
    if length == 1:
        return np.full(out, (end - start) * (n - 1) / 2 + start * (n - 1))
    return o * (end - start) * (n - 1) / (length - 1) + start * (n - 1)


def resize_extrapolates(call: OnnxCall) -> bool:
    """Whether a tf_crop_and_resize coordinate falls outside the input, where ONNX writes extrapolation_value."""
    if call.op != "Resize" or str(call.attr("coordinate_transformation_mode", "half_pixel")) != "tf_crop_and_resize":
        return False
    shape = data_input(call).shape
    scales, sizes = _resize_sizes_and_scales(call, shape)
    starts, ends = _crop_region(call, len(shape))
    for n, out, scale, start, end in zip(shape, sizes, scales, starts, ends):
        x = _crop_coordinates(n, scale * n, start, end, out)
        if np.any((x < 0) | (x > n - 1)):
            return True
    return False


F32 = np.float32


def _pixel_offsets(transform: str, n: int, out: int, scale: float, crop: tuple[float, float]):
    """(Scale, InputPixelOffset, OutputPixelOffset), FLOAT32, that make x = (o - OutputPixelOffset) / Scale -
    InputPixelOffset ONNX's coordinate_transformation_mode along one dimension, as ONNX Runtime's DirectML provider
    computes them (DmlOperatorResize.cpp, ComputePixelOffsetsAndScales): in C++ float arithmetic, one rounding per
    operation in the provider's order (half_pixel_symmetric's offset, align_corners' and tf_crop_and_resize's
    Scale), so that DirectML is asked for the very bits the provider asks for; align_corners and tf_crop_and_resize
    from the output's Sizes, pytorch_half_pixel's special case on the input's length. Where that gives other values
    than ONNX's reference, the table's Resize entry says so (resize_differences)."""
    s, length, size = F32(scale), F32(n), F32(out)
    if transform == "asymmetric":
        return s, F32(0), F32(0)
    if transform == "pytorch_half_pixel":
        return (F32(FLOAT32_MAX), F32(0), F32(0)) if n <= 1 else (s, F32(0.5), F32(-0.5))
    if transform == "align_corners":
        return ((size - F32(1)) / (length - F32(1)) if out > 1 and n > 1 else F32(FLOAT32_MAX)), F32(0), F32(0)
    if transform == "half_pixel_symmetric":
        # 0.5f - float((in / 2.0f) * (1.0f - out / (scale * in))): ONNX's 0.5 - offset, folded into one offset.
        return s, F32(0.5) - (length / F32(2)) * (F32(1) - size / (s * length)), F32(-0.5)
    if transform == "tf_crop_and_resize":
        # x = o * (end - start) * (n - 1) / (out - 1) + start * (n - 1): a Scale and an InputPixelOffset.
        start, end = F32(crop[0]), F32(crop[1])
        if out == 1 or n <= 1:  # ONNX's 0.5 * (start + end) * (n - 1) (the provider's Scale would be 0 here)
            return F32(1), F32(-((crop[1] - crop[0]) * (n - 1) / 2 + crop[0] * (n - 1))), F32(0)
        return (size - F32(1)) / max((end - start) * (length - F32(1)), F32(1)), -(start * (length - F32(1))), F32(0)
    return s, F32(0.5), F32(-0.5)  # half_pixel


def _onnx_coordinate(transform: str, n: int, out: int, scale, o):
    """ONNX's input coordinate of output element o along one dimension (onnx/reference/ops/op_resize.py), in o's
    and scale's arithmetic: float64, or Fractions for the exact value (not tf_crop_and_resize's: _crop_coordinates)."""
    if transform == "asymmetric":
        return o / scale
    if transform == "align_corners":
        return o * 0 if out == 1 else o * (n - 1) / (out - 1)
    # (x + 0.5) / scale - 0.5 written with integers only, so that it keeps o's and scale's arithmetic.
    if transform == "pytorch_half_pixel" and out == 1:
        return (o * 0 - 1) / 2
    if transform in ("half_pixel", "pytorch_half_pixel"):
        return ((2 * o + 1) / scale - 1) / 2
    if transform == "half_pixel_symmetric":  # offset = (in / 2) * (1 - out / (scale * in))
        return n * (1 - out / (scale * n)) / 2 + ((2 * o + 1) / scale - 1) / 2
    raise ValueError(f"no exact coordinate for {transform}")


def _directml_coordinates(plan: ResizeMapping, axis: int, in_size: int) -> np.ndarray:
    """RESAMPLE's input coordinate of each output element of this axis: the page's (o - OutputPixelOffset) / Scale
    - InputPixelOffset in FLOAT32, clamped to the input (resampling's resample_coordinates)."""
    o = np.arange(plan.output_shape[axis], dtype=np.float32)
    return np.clip((o - F32(plan.output_offsets[axis])) / F32(plan.scales[axis]) - F32(plan.input_offsets[axis]),
                   F32(0), F32(in_size - 1))


def _directml_elements(plan: ResizeMapping, axis: int, in_size: int) -> np.ndarray:
    """The input element RESAMPLE's NEAREST_NEIGHBOR reads for each output element of this axis: its coordinate
    rounded by RoundingDirection."""
    x = _directml_coordinates(plan, axis, in_size)
    return (np.ceil(x) if plan.rounding == "INCREASING" else np.floor(x)).astype(np.int64)


# ONNX's nearest_mode on an exact coordinate whose rounding boundary it lies on: the element it picks there.
_EXACT_NEAREST = {"floor": math.floor, "ceil": math.ceil, "round_prefer_floor": lambda x: math.ceil(x - Fraction(1, 2)),
                  "round_prefer_ceil": lambda x: math.floor(x + Fraction(1, 2))}


def _rounding_tie(call: OnnxCall, plan: ResizeMapping, shape: tuple[int, ...]) -> str | None:
    """Where an output element's exact ONNX coordinate lies on its nearest_mode's rounding boundary (an integer for
    floor and ceil, a half for the round_prefer modes) and the FLOAT32 coordinate DirectML computes from the
    provider's fields falls on the other side of it, what happens (None where no element does). Only exact ties:
    a coordinate off the boundary rounds alike however it is computed. tf_crop_and_resize's ties are not looked
    for (its region's coordinates are ONNX's float64 ones, _crop_coordinates)."""
    transform = str(call.attr("coordinate_transformation_mode", "half_pixel"))
    if plan.mode != "NEAREST_NEIGHBOR" or is_upsample(call) or transform == "tf_crop_and_resize":
        return None
    nearest_mode = str(call.attr("nearest_mode", "round_prefer_floor"))
    boundary = 0.0 if nearest_mode in ("floor", "ceil") else 0.5
    scales, _ = _resize_sizes_and_scales(call, shape)
    for axis, (n, out) in enumerate(zip(shape, plan.output_shape)):
        if n == 1:  # every coordinate reads element 0
            continue
        approximate = _onnx_coordinate(transform, n, out, scales[axis], np.arange(out, dtype=np.float64))
        near = np.abs((approximate - boundary) - np.round(approximate - boundary)) < 1e-6
        coordinates, directml = _directml_coordinates(plan, axis, n), _directml_elements(plan, axis, n)
        for o in np.flatnonzero(near):
            exact = _onnx_coordinate(transform, n, out, Fraction(scales[axis]), Fraction(int(o)))
            if (exact - Fraction(boundary)).denominator != 1:
                continue
            onnx = min(max(_EXACT_NEAREST[nearest_mode](exact), 0), n - 1)
            if onnx != directml[o]:
                return (f"nearest_mode {nearest_mode} on an exact tie: {transform} puts output element {o} of "
                        f"axis {axis} exactly on {exact}, where ONNX reads input element {onnx}; DirectML computes "
                        f"the coordinate from the provider's FLOAT32 Scale {plan.scales[axis]:.9g} and "
                        f"InputPixelOffset {plan.input_offsets[axis]:.9g} as {float(coordinates[o]):.9g} and reads "
                        f"element {directml[o]}")
    return None


def resize_differences(call: OnnxCall) -> str | None:
    """Where ONNX Runtime's DirectML provider maps a Resize to values ONNX's reference does not give, what differs
    (None where they agree). The provider takes align_corners' and tf_crop_and_resize's length from the output's
    Sizes, ONNX's reference from input x scale before it is rounded down; it tests pytorch_half_pixel's special case
    on the input's length, ONNX on the output's; DirectML widens the antialiasing filter by 1 / Scale, which
    for align_corners is the coordinate scale (out - 1) / (in - 1), not ONNX's size ratio; and where a nearest
    coordinate is exactly on its rounding boundary, the provider's FLOAT32 fields may move it across
    (_rounding_tie)."""
    if call.op != "Resize" or is_upsample(call):
        return None
    shape = data_input(call).shape
    scales, sizes = _resize_sizes_and_scales(call, shape)
    transform = str(call.attr("coordinate_transformation_mode", "half_pixel"))
    antialiased = str(call.attr("mode", "nearest")) == "linear" and bool(call.attr("antialias", 0))
    crops = zip(*_crop_region(call, len(shape))) if transform == "tf_crop_and_resize" else [(0.0, 1.0)] * len(shape)
    for n, out, scale, (start, end) in zip(shape, sizes, scales, crops):
        if transform == "tf_crop_and_resize" and out > 1 and n > 1 and (end - start) * (n - 1) < 1:
            return (f"tf_crop_and_resize with a region {(end - start) * (n - 1):g} elements long: ONNX Runtime's "
                    "DirectML provider divides by at least 1 (std::max(..., 1.0f)), ONNX by the region's length")
        if transform in ("align_corners", "tf_crop_and_resize") and out > 1 and n * scale != out:
            return (f"{transform} with an input length {n} x scale {scale:g} that is not whole: ONNX's reference maps "
                    f"coordinates with length {n * scale:g}, ONNX Runtime's DirectML provider with the output's {out}")
        if transform == "pytorch_half_pixel" and out == 1 and n > 1:
            return ("pytorch_half_pixel with an output length 1: ONNX reads input element 0, ONNX Runtime's DirectML "
                    "provider tests the input's length (not 1) and maps it as half_pixel")
        if antialiased and transform == "align_corners" and scale < 1 and n > 1 and (out - 1) / (n - 1) != scale:
            return ("antialias with align_corners: DirectML widens the filter by 1 / Scale, and align_corners' Scale "
                    "is (out - 1) / (in - 1), not ONNX's size ratio")
    return _rounding_tie(call, resize_plan(call), shape)


def resize_plan(call: OnnxCall) -> ResizeMapping:
    """RESAMPLE2's (RESAMPLE3's) fields for ONNX's Resize or Upsample: the pixel offsets that make x = (o -
    OutputPixelOffset) / Scale - InputPixelOffset ONNX's coordinate_transformation_mode, and RoundingDirection with
    an offset adjustment ONNX's nearest_mode (NEAREST_MODES)."""
    data = data_input(call)
    shape = data.shape
    scales, sizes = _resize_sizes_and_scales(call, shape)
    legacy = is_upsample(call)
    transform = "asymmetric" if legacy else str(call.attr("coordinate_transformation_mode", "half_pixel"))
    mode = "NEAREST_NEIGHBOR" if str(call.attr("mode", "nearest")) == "nearest" else "LINEAR"
    nearest_mode = "floor" if legacy else str(call.attr("nearest_mode", "round_prefer_floor"))
    if nearest_mode not in NEAREST_MODES:
        raise MappingError(f"ONNX's nearest_mode {nearest_mode!r} is none of {', '.join(NEAREST_MODES)}")
    rounding, adjustment = NEAREST_MODES[nearest_mode] if mode == "NEAREST_NEIGHBOR" else ("DECREASING", 0.0)
    crops = list(zip(*_crop_region(call, len(shape)))) if transform == "tf_crop_and_resize" else [(0.0, 1.0)] * len(shape)
    used, ins, outs = [], [], []
    for n, out, scale, crop in zip(shape, sizes, scales, crops):
        scale, in_offset, out_offset = _pixel_offsets(transform, n, out, scale, crop)
        used.append(float(scale))
        ins.append(float(in_offset + F32(adjustment)))  # the provider's `offset += offsetAdjustment`, in float
        outs.append(float(out_offset))
    antialiased = mode == "LINEAR" and bool(call.attr("antialias", 0))
    return ResizeMapping(mode, rounding, tuple(used), tuple(ins), tuple(outs), tuple(sizes), antialiased)


MAX_RESAMPLE_RANK = 4  # RESAMPLE2 and RESAMPLE3 take 1 to 4 dimensions


def _axis_left_alone(plan: ResizeMapping, axis: int, in_size: int) -> bool:
    """Whether RESAMPLE reads output element o of this axis from input element o (so the axis can be merged with
    a neighbour that is left alone too): the same size and each float32 coordinate, clamped and rounded as the
    operator rounds it (resampling's resample_coordinates), is o itself."""
    out_size = plan.output_shape[axis]
    if in_size != out_size or plan.scales[axis] != 1.0:
        return False
    read = (_directml_elements if plan.mode == "NEAREST_NEIGHBOR" else _directml_coordinates)(plan, axis, in_size)
    return bool(np.array_equal(read, np.arange(out_size)))


def resize_layout(plan: ResizeMapping, shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """RESAMPLE's view of a Resize of more than 4 dimensions: [(first, last) axis of ONNX's, ...], one per axis of
    the call.
    As ONNX Runtime's DirectML provider does (DmlOperatorResize.cpp), axes of size 1 in both input and output are
    dropped (one is kept where all are); then, while more than 4 remain, two neighbouring axes that the resample
    leaves alone are merged into one (a reshape: each is read element for element). Each group is one axis of the
    call; its parameters are the group's first axis's where it is one ONNX axis, an identity's otherwise."""
    axes = [axis for axis, (n, m) in enumerate(zip(shape, plan.output_shape)) if not n == m == 1] or [0]
    groups = [(axis, axis) for axis in axes]
    while len(groups) > MAX_RESAMPLE_RANK:
        for index in range(len(groups) - 1):
            (first, _), (_, last) = groups[index], groups[index + 1]
            alone = all(_axis_left_alone(plan, axis, shape[axis]) or shape[axis] == plan.output_shape[axis] == 1
                        for axis in range(first, last + 1))
            if alone:
                groups[index:index + 2] = [(first, last)]
                break
        else:
            break
    return groups


def adapt_resize(call: OnnxCall, fixed) -> Prepared:
    data = data_input(call)
    plan = resize_plan(call)
    finish = _same
    if data.ndim > MAX_RESAMPLE_RANK:
        groups = resize_layout(plan, data.shape)
        merged = [first != last for first, last in groups]
        finish = reshaped_to([plan.output_shape])
        data = data.reshape(tuple(math.prod(data.shape[f:l + 1]) for f, l in groups))
        plan = ResizeMapping(
            plan.mode, plan.rounding, tuple(1.0 if m else plan.scales[f] for (f, _), m in zip(groups, merged)),
            tuple(0.0 if m else plan.input_offsets[f] for (f, _), m in zip(groups, merged)),
            tuple(0.0 if m else plan.output_offsets[f] for (f, _), m in zip(groups, merged)),
            tuple(math.prod(plan.output_shape[f:l + 1]) for f, l in groups), plan.antialiased)
    values = {**fixed, "InterpolationMode": plan.mode, "RoundingDirection": plan.rounding, "Scales": plan.scales,
              "InputPixelOffsets": plan.input_offsets, "OutputPixelOffsets": plan.output_offsets,
              "OutputTensor.Sizes": plan.output_shape}
    if call.op == "Resize":  # RESAMPLE3; Upsample maps onto RESAMPLE2, which has no Antialiased
        values["Antialiased"] = plan.antialiased
    return Prepared(values, [data], finish=finish)


# ---------------------------------------------------------------- convolutions


def _spatial_attr(call: OnnxCall, name: str, count: int, fill: int) -> list[int]:
    values = call.attr(name)
    if values is None:
        return [fill] * count
    values = [int(v) for v in values]
    if len(values) != count:
        raise MappingError(f"ONNX's {name} has {len(values)} values for {count} spatial dimensions")
    return values


def _onnx_pads(call: OnnxCall, count: int) -> tuple[list[int], list[int]]:
    pads = call.attr("pads")
    if pads is None:
        return [0] * count, [0] * count
    pads = [int(v) for v in pads]
    if len(pads) != 2 * count:
        raise MappingError(f"ONNX's pads has {len(pads)} values for {count} spatial dimensions (2 per dimension)")
    return pads[:count], pads[count:]


def _auto_pad(call: OnnxCall) -> str:
    return str(call.attr("auto_pad", "NOTSET"))


def conv_paddings(call: OnnxCall) -> tuple[list[int], list[int], list[int]]:
    """Start, end and output padding of an ONNX Conv or ConvTranspose, auto_pad and output_shape resolved as
    ONNX's operator schema defines them (possibly negative: the table's conditions look for those)."""
    x, w = data_input(call), call.input(1)
    count = x.ndim - 2
    strides = _spatial_attr(call, "strides", count, 1)
    dilations = _spatial_attr(call, "dilations", count, 1)
    windows = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dilations)]
    auto_pad = _auto_pad(call)
    if call.op == "ConvTranspose":
        extra = _spatial_attr(call, "output_padding", count, 0)
        shape = call.attr("output_shape")
        if shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            shape = [n * s for n, s in zip(x.shape[2:], strides)]
        if shape is None:
            start, end = ([0] * count, [0] * count) if auto_pad == "VALID" else _onnx_pads(call, count)
            return start, end, extra
        shape = [int(v) for v in shape][-count:]
        total = [s * (n - 1) + e + k - o for s, n, e, k, o in zip(strides, x.shape[2:], extra, windows, shape)]
        if auto_pad == "SAME_UPPER":
            start, end = [t // 2 for t in total], [t - t // 2 for t in total]
        else:
            start, end = [t - t // 2 for t in total], [t // 2 for t in total]
        # A negative end padding lengthens the output past what the taps reach: DirectML's OutputPadding.
        extra = [e + max(0, -b) for e, b in zip(extra, end)]
        end = [max(0, b) for b in end]
        return start, end, extra
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        start, end = [], []
        for n, s, k in zip(x.shape[2:], strides, windows):
            total = max(0, (-(-n // s) - 1) * s + k - n)
            low = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            start.append(low)
            end.append(total - low)
        return start, end, [0] * count
    if auto_pad == "VALID":
        return [0] * count, [0] * count, [0] * count
    start, end = _onnx_pads(call, count)
    return start, end, [0] * count


def _conv_values(call: OnnxCall, fixed, with_output_padding: bool) -> dict:
    x = data_input(call)
    count = x.ndim - 2
    start, end, extra = conv_paddings(call)
    values = {**fixed, "Strides": tuple(_spatial_attr(call, "strides", count, 1)),
              "Dilations": tuple(_spatial_attr(call, "dilations", count, 1)),
              "StartPadding": tuple(start), "EndPadding": tuple(end), "GroupCount": int(call.attr("group", 1))}
    if with_output_padding:
        values["OutputPadding"] = tuple(extra)
    return values


def _channel_tensor(values: np.ndarray, rank: int) -> np.ndarray:
    """An ONNX 0-D/1-element or per-channel 1-D tensor as DirectML's {1, C, 1, ...} (or all 1s) of `rank`."""
    flat = np.asarray(values).reshape(-1)
    shape = (1,) * rank if flat.size == 1 else (1, flat.size) + (1,) * (rank - 2)
    return flat.reshape(shape)


def adapt_conv(call: OnnxCall, fixed) -> Prepared:
    """Conv and ConvTranspose -> CONVOLUTION (FORWARD or BACKWARD, cross-correlation); B as {1, M, 1, ...}."""
    x, w, bias = data_input(call), call.input(1), call.input(2)
    values = _conv_values(call, fixed, with_output_padding=True)
    inputs = [x, w] + ([_channel_tensor(bias, x.ndim)] if bias is not None else [])
    return Prepared(values, inputs)


def adapt_conv_integer(call: OnnxCall, fixed) -> Prepared:
    """ConvInteger -> CONVOLUTION_INTEGER; left-out zero points are given as zeros of the tensor's type."""
    x, w = data_input(call), call.input(1)
    rank = x.ndim
    x_zero = call.input(2) if call.input(2) is not None else np.zeros(1, x.dtype)
    w_zero = call.input(3) if call.input(3) is not None else np.zeros(1, w.dtype)
    inputs = [x, _channel_tensor(x_zero, rank), w, _channel_tensor(w_zero, rank)]
    return Prepared(_conv_values(call, fixed, with_output_padding=False), inputs)


def adapt_qlinear_conv(call: OnnxCall, fixed) -> Prepared:
    """QLinearConv -> QUANTIZED_LINEAR_CONVOLUTION, in DirectML's order; a left-out B is an INT32 zero bias."""
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, bias = (call.input(i) for i in range(9))
    rank = x.ndim
    channels = w.shape[0]
    bias = np.zeros(channels, np.int32) if bias is None else bias
    inputs = [x, _channel_tensor(x_scale, rank), _channel_tensor(x_zero, rank), w, _channel_tensor(w_scale, rank),
              _channel_tensor(w_zero, rank), _channel_tensor(bias, rank).reshape((1, channels) + (1,) * (rank - 2)),
              _channel_tensor(y_scale, rank), _channel_tensor(y_zero, rank)]
    return Prepared(_conv_values(call, fixed, with_output_padding=False), inputs)
# ---------------------------------------------------------------- matrix multiplication

MAX_GEMM_RANK = 4  # GEMM and the integer products take 2 to 4 dimensions


def _matmul_operands(a: np.ndarray, b: np.ndarray, fold: bool = True):
    """ONNX's MatMul operands (NumPy's matmul rules) as DirectML's: a 1-D A is a row [1, K], a 1-D B a column
    [K, 1]; both get the same rank (leading 1s) and the same batch Sizes (a broadcast batch: what a desc's zero
    Strides give DirectML); with `fold`, past 4 dimensions the leading batch dimensions folded into one (MatMul's
    mapping; the provider's FusedMatMul does not fold). Returns the operands and ONNX's output Sizes."""
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    rank = max(a2.ndim, b2.ndim, 2)
    a2, b2 = padded(a2, rank), padded(b2, rank)
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise MappingError(f"ONNX's MatMul batch Sizes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    # NumPy's matmul drops the axis a 1-D operand gained.
    out_shape = batch + ((a2.shape[-2],) if a.ndim > 1 else ()) + ((b2.shape[-1],) if b.ndim > 1 else ())
    a2, b2 = np.broadcast_to(a2, batch + a2.shape[-2:]), np.broadcast_to(b2, batch + b2.shape[-2:])
    if fold and rank > MAX_GEMM_RANK:  # the leading batch dimensions folded into one (a reshape of the broadcast operands)
        a2, b2 = a2.reshape(folded_batch(a2.shape, MAX_GEMM_RANK)), b2.reshape(folded_batch(b2.shape, MAX_GEMM_RANK))
    return a2, b2, out_shape


def adapt_gemm(call: OnnxCall, fixed) -> Prepared:
    """Gemm: A and B are 2-D; C (unidirectionally broadcastable) gets leading 1s up to 2-D, and GEMM broadcasts
    its sizes of 1 as DirectML does with zero Strides."""
    a, b, c = call.input(0), call.input(1), call.input(2)
    values = {**fixed, "TransA": "TRANSPOSE" if call.attr("transA", 0) else "NONE",
              "TransB": "TRANSPOSE" if call.attr("transB", 0) else "NONE",
              "Alpha": float(call.attr("alpha", 1.0)), "Beta": float(call.attr("beta", 1.0))}
    inputs = [a, b] if c is None else [a, b, padded(c, 2)]
    return Prepared(values, inputs)


def adapt_gemm_of_rank(call: OnnxCall, fixed) -> Prepared:
    """The Gemm ONNX Runtime's MatMulAddFusion makes of MatMul + Add where A is not 2-D (matmul_add_fusion.cc):
    A reshaped to [M, K] (M the product of its leading Sizes) before the Gemm and the result to A's leading Sizes
    and N after it, the two Reshape nodes ONNX Runtime inserts, made here as views."""
    a, b = call.input(0), call.input(1)
    flat = OnnxCall(call.op, (a.reshape(-1, a.shape[-1]), *call.inputs[1:]), call.attributes, call.outputs,
                    call.output_names, call.opset)
    prepared = adapt_gemm(flat, fixed)
    prepared.finish = reshaped_to([a.shape[:-1] + (b.shape[1],)])
    return prepared


def adapt_matmul(call: OnnxCall, fixed) -> Prepared:
    a, b, out_shape = _matmul_operands(data_input(call), call.input(1))
    return Prepared(dict(fixed), [a, b], finish=reshaped_to([out_shape]))


def _vector(x: np.ndarray | None) -> np.ndarray | None:
    """A scalar or 1-D ONNX scale / zero point as a 1-D tensor (a 0-D one becomes {1}); None stays None."""
    if x is None:
        return None
    return np.asarray(x).reshape(-1)


def _zero_point(x: np.ndarray | None, dtype) -> np.ndarray:
    """ONNX's optional zero point; a left-out one is 0 (DirectML's meaning of a NULL zero point)."""
    return np.zeros(1, dtype) if x is None else np.asarray(x).reshape(-1)


def adapt_matmul_integer(call: OnnxCall, fixed) -> Prepared:
    """MatMulInteger(A, B, a_zero_point, b_zero_point) -> (A, AZeroPoint, B, BZeroPoint): a per-row a_zero_point
    is 1-D {M} (DirectML's { [1], [1], M, [1] }), a per-column b_zero_point {N}."""
    a, b, out_shape = _matmul_operands(data_input(call), call.input(1))
    inputs = [a, _zero_point(call.input(2), a.dtype), b, _zero_point(call.input(3), b.dtype)]
    return Prepared(dict(fixed), inputs, finish=reshaped_to([out_shape]))


def adapt_qlinear_matmul(call: OnnxCall, fixed) -> Prepared:
    """QLinearMatMul's eight inputs are DirectML's, in the same order; scalars become 1-D {1}."""
    a, b, out_shape = _matmul_operands(data_input(call), call.input(3))
    y_zero_point = call.input(7)
    inputs = [a, _vector(call.input(1)), _zero_point(call.input(2), a.dtype), b, _vector(call.input(4)),
              _zero_point(call.input(5), b.dtype), _vector(call.input(6)),
              _zero_point(y_zero_point, np.uint8 if y_zero_point is None else y_zero_point.dtype)]
    return Prepared(dict(fixed), inputs, finish=reshaped_to([out_shape]))
# ---------------------------------------------------------------- pooling


@dataclass(frozen=True)
class PoolWindows:
    """ONNX's pooling attributes as DirectML's explicit fields, one value per spatial dimension."""

    window: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start: tuple[int, ...]
    end: tuple[int, ...]
    ceil_extra: tuple[int, ...]  # EndPadding added so that DirectML's floor gives ONNX's ceil_mode count


def window_values(call: OnnxCall, name: str, default: int | None, count: int) -> list[int]:
    """A pooling attribute of `count` integers (kernel_shape, strides, dilations: one per spatial dimension; pads:
    two); left out, `default` for each (None: ONNX requires it)."""
    values = call.attr(name)
    if values is None:
        if default is None:
            raise MappingError(f"ONNX's {call.op} requires {name}")
        return [default] * count
    if len(values) != count:
        raise MappingError(f"ONNX's {call.op} {name} has {len(values)} values where the input's spatial dimensions "
                           f"take {count}")
    return [int(value) for value in values]


def pool_windows(call: OnnxCall) -> PoolWindows:
    """auto_pad (SAME_UPPER, SAME_LOWER, VALID, NOTSET with pads) and ceil_mode as explicit Start/EndPadding."""
    sizes = data_input(call).shape[2:]
    spatial = len(sizes)
    if call.op.startswith("Global"):
        return PoolWindows(tuple(sizes), (1,) * spatial, (1,) * spatial, (0,) * spatial, (0,) * spatial, (0,) * spatial)
    window = tuple(window_values(call, "kernel_shape", None, spatial))
    strides = tuple(window_values(call, "strides", 1, spatial))
    dilations = tuple(window_values(call, "dilations", 1, spatial))
    pads = window_values(call, "pads", 0, 2 * spatial)
    start, end = pads[:spatial], pads[spatial:]
    auto_pad = str(call.attr("auto_pad", "NOTSET")).upper()
    extents = [(k - 1) * d + 1 for k, d in zip(window, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for i, (n, s, e) in enumerate(zip(sizes, strides, extents)):
            total = max((-(-n // s) - 1) * s + e - n, 0)
            small = total // 2
            start[i], end[i] = (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)
    elif auto_pad == "VALID":
        start, end = [0] * spatial, [0] * spatial
    extra = [0] * spatial
    if call.attr("ceil_mode", 0):
        for i, (n, s, e) in enumerate(zip(sizes, strides, extents)):
            padded = n + start[i] + end[i]
            count = -(-(padded - e) // s) + 1
            if (count - 1) * s >= n + start[i]:  # ONNX drops a last window that would start in the end padding
                count -= 1
            extra[i] = max((count - 1) * s + e - padded, 0)
    return PoolWindows(window, strides, dilations, tuple(start), tuple(end), tuple(extra))


def _as_4d(data: np.ndarray) -> np.ndarray:
    """A 1-D pooling's { N, C, W } as DirectML's { N, C, 1, W } (a size-1 H axis)."""
    return data.reshape(data.shape[:2] + (1,) + data.shape[2:]) if data.ndim == 3 else data


def plain_max_pool(call: OnnxCall) -> bool:
    """A MaxPool that asks for Y alone and dilates nothing: DirectML's plain MAX_POOLING computes it."""
    return call.outputs < 2 and all(int(d) == 1 for d in call.attr("dilations", ()))


# LSTM's outputs in DESC order (GRU and RNN have the first two), ONNX's Y, Y_h and Y_c.
RECURRENT_OUTPUTS = ("OutputSequenceTensor", "OutputSingleTensor", "OutputCellSingleTensor")


def adapt_pool(call: OnnxCall, fixed) -> Prepared:
    """AveragePool, MaxPool, LpPool and their Global forms: explicit paddings; a 1-D pool gets a size-1 H axis
    (window 1) and its output loses it again. A plain MaxPool (plain_max_pool) is MAX_POOLING: no Dilations, no
    Indices."""
    plain = call.op == "MaxPool" and plain_max_pool(call)
    data = data_input(call)
    one_d = data.ndim == 3
    w = pool_windows(call)
    end = tuple(e + x for e, x in zip(w.end, w.ceil_extra))

    def lift(values, unit):
        return ((unit,) + tuple(values)) if one_d else tuple(values)

    values = {**fixed, "WindowSize": lift(w.window, 1), "Strides": lift(w.strides, 1),
              "StartPadding": lift(w.start, 0), "EndPadding": lift(end, 0)}
    if call.op in ("AveragePool", "MaxPool", "LpPool") and not plain:
        values["Dilations"] = lift(w.dilations, 1)
    if call.op == "AveragePool":
        values["IncludePadding"] = bool(call.attr("count_include_pad", 0))
    if call.op == "LpPool":
        values["P"] = int(call.attr("p", 2))

    op, asked = call.op, call.outputs  # not the call itself: a model's plan keeps the finish, not its inputs

    def finish(outputs):
        shaped = [o.reshape(o.shape[:2] + o.shape[3:]) if one_d else o for o in outputs]
        if op != "MaxPool" or asked < 2:
            return (shaped[0],)
        # ONNX's int64 indices: DirectML's UINT64 (5_0), the same bits for indices below 2^63.
        return shaped[0], shaped[1].view(np.int64)

    if call.op == "MaxPool" and not plain:  # MAX_POOLING2: its OutputIndicesTensor is _Maybenull_
        if asked < 2:
            return Prepared(values, [_as_4d(data)], finish=finish, outputs=("OutputTensor",))
        return Prepared(values, [_as_4d(data)], output_dtype="uint64", finish=finish)
    return Prepared(values, [_as_4d(data)], finish=finish)


def unpool_output_sizes(call: OnnxCall) -> tuple[int, ...]:
    """MaxUnpool's output Sizes: the output_shape input, else ONNX's default (in - 1) * stride + kernel - pads."""
    given = call.input(2)
    if given is not None:
        return tuple(int(v) for v in given.reshape(-1))
    data = data_input(call)
    spatial = data.ndim - 2
    window = window_values(call, "kernel_shape", None, spatial)
    strides = window_values(call, "strides", 1, spatial)
    pads = window_values(call, "pads", 0, 2 * spatial)
    return data.shape[:2] + tuple((n - 1) * s + k - pads[i] - pads[i + spatial]
                                  for i, (n, s, k) in enumerate(zip(data.shape[2:], strides, window)))


def unpool_4d(shape: tuple[int, ...]) -> tuple[int, ...]:
    """MaxUnpool's {N, C, spatial...} as MAX_UNPOOLING's 4 dimensions: 1-D {N, C, W} gains a size-1 H, 3-D
    {N, C, D, H, W} is {N, C, D, H x W}. The indices are flat positions in the output, which a reshape of its
    trailing dimensions does not change, and each input element is written where its index says whatever the
    window's shape, so the call is the same (a reshape, as ONNX Runtime's DirectML provider makes it)."""
    if len(shape) == 3:
        return shape[:2] + (1,) + shape[2:]
    if len(shape) == 5:
        return shape[:3] + (shape[3] * shape[4],)
    return shape


def adapt_max_unpool(call: OnnxCall, fixed) -> Prepared:
    data, indices = call.input(0), call.input(1)
    if indices is None:
        raise MappingError("ONNX's MaxUnpool needs its indices input I")
    out_shape = unpool_output_sizes(call)
    # ONNX's int64 indices as DirectML's UINT64 IndicesTensor (5_0): the same bits for indices >= 0.
    values = {**fixed, "OutputTensor.Sizes": unpool_4d(out_shape)}
    positions = indices.astype(np.int64).view(np.uint64)
    inputs = [data.reshape(unpool_4d(data.shape)), positions.reshape(unpool_4d(indices.shape))]
    return Prepared(values, inputs, finish=reshaped_to([out_shape]))


def roi_align_half_pixel(call: OnnxCall) -> bool:
    return str(call.attr("coordinate_transformation_mode", "half_pixel")) == "half_pixel"


def roi_align_small_region(call: OnnxCall) -> bool:
    """output_half_pixel: ONNX widens a region narrower than 1 (after spatial_scale) to 1; DirectML does not."""
    rois = host_values(call.input(1)).astype(np.float64).reshape(-1, 4) * float(call.attr("spatial_scale", 1.0))
    narrow = (rois[:, 2] - rois[:, 0] < 1) | (rois[:, 3] - rois[:, 1] < 1)
    return not roi_align_half_pixel(call) and bool(narrow.any())


def adapt_roi_align(call: OnnxCall, fixed) -> Prepared:
    data, rois, batches = call.input(0), call.input(1), call.input(2)
    if rois is None or batches is None:
        raise MappingError("ONNX's RoiAlign needs X, rois and batch_indices")
    ratio = int(call.attr("sampling_ratio", 0))
    scale = float(call.attr("spatial_scale", 1.0))
    values = {**fixed, "SpatialScaleX": scale, "SpatialScaleY": scale,
              "InputPixelOffset": 0.5 if roi_align_half_pixel(call) else 0.0,
              "ReductionFunction": "MAX" if str(call.attr("mode", "avg")) == "max" else "AVERAGE",
              # sampling_ratio 0: ONNX's adaptive ceil(region / output), DirectML's clamp between the bounds
              "MinimumSamplesPerOutput": ratio if ratio > 0 else 1,
              "MaximumSamplesPerOutput": ratio if ratio > 0 else 2**32 - 1,
              "OutputTensor.Sizes": (rois.shape[0], data.shape[1], int(call.attr("output_height", 1)),
                                     int(call.attr("output_width", 1)))}
    # ONNX's int64 batch indices as DirectML's UINT64 BatchIndicesTensor (5_0): the same bits for indices >= 0.
    return Prepared(values, [data, rois, batches.astype(np.int64).view(np.uint64)])
# ---------------------------------------------------------------- RNN, GRU, LSTM

RECURRENT_DIRECTIONS = {"forward": "FORWARD", "reverse": "BACKWARD", "bidirectional": "BIDIRECTIONAL"}
# ONNX's activation names -> DirectML's activation and the FLOAT fields ONNX's activation_alpha and
# activation_beta fill, in order, with ONNX's defaults where the lists run out.
ONNX_ACTIVATIONS = {
    "relu": ("relu", ()), "tanh": ("tanh", ()), "sigmoid": ("sigmoid", ()), "softsign": ("softsign", ()),
    "softplus": ("softplus", ()), "affine": ("linear", (("alpha", 1.0), ("beta", 0.0))),
    "leakyrelu": ("leaky_relu", (("alpha", 0.01),)), "thresholdedrelu": ("thresholded_relu", (("alpha", 1.0),)),
    "scaledtanh": ("scaled_tanh", (("alpha", 1.0), ("beta", 1.0))),
    "hardsigmoid": ("hard_sigmoid", (("alpha", 0.2), ("beta", 0.5))), "elu": ("elu", (("alpha", 1.0),)),
}
_RECURRENT_DEFAULTS = {"RNN": ("Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def recurrent_activations(call: OnnxCall) -> list[str] | None:
    """ONNX's activations with their alphas and betas as --activations items (None: ONNX's defaults, which are
    dmlcli's). An ONNX activation DirectML has no counterpart for is a MappingError."""
    names = call.attr("activations")
    if not names:
        return None
    alphas = list(call.attr("activation_alpha", []) or [])
    betas = list(call.attr("activation_beta", []) or [])
    found = []
    for name in names:
        key = _text(name).lower()
        if key not in ONNX_ACTIVATIONS:
            raise MappingError(f"ONNX's activation {_text(name)!r} is not one ONNX defines for {call.op}")
        directml, fields = ONNX_ACTIVATIONS[key]
        given = []
        for field_name, default in fields:
            source = alphas if field_name == "alpha" else betas
            given.append(f"{field_name}={exact_text(float(source.pop(0)) if source else default)}")
        found.append(directml + (f"({', '.join(given)})" if given else ""))
    return found


def adapt_recurrent(call: OnnxCall, fixed) -> Prepared:
    """ONNX's X, W, R, B, sequence_lens, initial_h (initial_c, P) -> DirectML's 4-D tensors: leading size-1 axes
    (reshapes), X permuted to time-major where layout=1, sequence_lens as UINT32 (the same non-negative
    values); Y, Y_h (Y_c) from OutputSequenceTensor, OutputSingleTensor (OutputCellSingleTensor)."""
    lstm = call.op == "LSTM"
    x = data_input(call)
    batch_major = int(call.attr("layout", 0)) == 1
    if batch_major:
        x = np.ascontiguousarray(np.swapaxes(x, 0, 1))
    w, r = call.input(1), call.input(2)
    if w is None or r is None:
        raise MappingError(f"ONNX's {call.op} needs W and R")
    lengths = call.input(4)
    if lengths is not None:
        if np.any(lengths < 0):
            raise MappingError("ONNX's sequence_lens holds a negative length")
        lengths = lengths.astype(np.uint32).reshape(1, 1, 1, -1)
    optional = [None if call.input(3) is None else call.input(3).reshape(1, 1, *call.input(3).shape),
                None if call.input(5) is None else call.input(5)[None]]
    if lstm:
        optional += [None if call.input(6) is None else call.input(6)[None], lengths,
                     None if call.input(7) is None else call.input(7).reshape(1, 1, *call.input(7).shape)]
    else:
        optional.append(lengths)
    while optional and optional[-1] is None:
        optional.pop()  # trailing optional inputs left out; one in the middle stays None
    inputs = [x[None], w[None], r[None], *optional]
    values = dict(fixed)
    direction = _text(call.attr("direction", "forward")).lower()
    if direction not in RECURRENT_DIRECTIONS:
        raise MappingError(f"ONNX's direction {direction!r} is not forward, reverse or bidirectional")
    values["Direction"] = RECURRENT_DIRECTIONS[direction]
    activations = recurrent_activations(call)
    if activations is not None:
        values["ActivationDescs"] = activations
    if call.op == "GRU":
        values["LinearBeforeReset"] = bool(call.attr("linear_before_reset", 0))
    if lstm:
        if call.attr("clip") is not None:
            values.update(UseClipThreshold=True, ClipThreshold=exact_text(float(call.attr("clip"))))
        values["CoupleInputForget"] = bool(call.attr("input_forget", 0))
    names = call.output_names or ("Y", "Y_h", "Y_c")[:call.outputs]
    asked = tuple(output for output, name in zip(RECURRENT_OUTPUTS[:3 if lstm else 2], names) if name)

    def finish(outputs):
        given = dict(zip(asked, outputs))
        onnx = []
        sequence = given.get("OutputSequenceTensor")
        if sequence is not None and batch_major:  # ONNX's layout=1: Y [batch, seq, D, H], Y_h and Y_c [batch, D, H]
            sequence = np.transpose(sequence, (2, 0, 1, 3))
        onnx.append(sequence)
        for output in RECURRENT_OUTPUTS[1:3 if lstm else 2]:
            single = given.get(output)
            if single is not None:
                single = np.swapaxes(single[0], 0, 1) if batch_major else single[0]
            onnx.append(single)
        return tuple(array for array, name in zip(onnx, names) if name)

    return Prepared(values, inputs, finish=finish, outputs=asked or None)
