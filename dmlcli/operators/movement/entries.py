"""Data movement: JOIN, SPLIT, SLICE, SLICE1, PADDING, PADDING1, TILE, DEPTH_TO_SPACE(1), SPACE_TO_DEPTH(1),
REVERSE_SUBSEQUENCES. Every result element is an exact copy of an input element (or, for PADDING's CONSTANT
mode, of the padding value): the bits are copied, NaN payloads included, on every backend.

Source: DirectML's pages (MicrosoftDocs/sdk-api, ns-directml-dml_<name>_operator_desc.md; REVERSE_SUBSEQUENCES's
is ns-directml-dml_reverse_subsequences_desc.md), transcribed in the project's group B notes, and DirectML.h for
the enum values. Each kernel is one function for both backends (`xp` is numpy or cupy); index arrays are computed
with NumPy on the host, so that both backends copy the same elements by construction.

Where a page is silent, dmlcli's choice is in the entry's notes.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import ALL11, FLOATS, TYPES_8, TYPES_10, UINT32, UINT64
from ...errors import InputError
from ...feature_levels import level
from . import gpu as movement_gpu
from ..table.options import INT32_RANGE, option_flag
from ..table.parameters import (DataTypeParameter, EnumParameter, FloatParameter, IntArrayParameter, IntegerParameter,
    ScalarUnionParameter)
from ..table.schema import DIMS_1_TO_8, DIMS_4, DIMS_4_TO_5, EXACT, Operator, rows
from ..table.shaped import RuleViolation, ShapeQuery, check_axis, check_length, describe_sizes

FAMILY = "data movement"
IO = ("InputTensor", "OutputTensor")
_TYPES_16_32 = tuple(t for t in TYPES_8 if t.name not in ("INT8", "UINT8"))  # 1_0's FLOAT32..UINT16, no 8-bit


def _io_row(level_name, dims, types, inputs=("InputTensor",), output="OutputTensor"):
    return (level_name, dims, {**{name: types for name in inputs}, output: types})


# ---------------------------------------------------------------- parameter kinds dmlcli adds


class OptionalIntegerParameter(IntegerParameter):
    """A UINT that may be left out (typed value None): what that means is `default_text`'s, and the shape rule's."""

    default_text: str

    def __init__(self, field: str, help: str, default_value: int = 0, minimum: int = 0, maximum: int = 2**32 - 1,
                 default_text: str = "") -> None:
        vars(self).update(field=field, help=help, default_value=default_value, minimum=minimum, maximum=maximum,
                          default_text=default_text)

    @property
    def default(self):
        return None

    def describe(self, value) -> str:
        return self.default_text if value is None else str(value)

    def describe_default(self) -> str:
        return self.default_text

    def check_declaration(self, tensors) -> None:
        """Nothing to check: there is no default value (IntegerParameter's default_value is unused)."""


class _NotInDescInteger(OptionalIntegerParameter):
    """An optional UINT a DxDispatch desc may leave out (SPLIT's OutputCount: the OutputTensors array says it)."""

    required_in_desc = False


class SplitSizesParameter(IntArrayParameter):
    """dmlcli's way to state SPLIT's OutputTensors' Sizes along Axis (not a DESC field: DirectML reads them
    from the output tensor descs, which a DxDispatch model gives)."""

    required_in_desc = False


class PaddingValueParameter(ScalarUnionParameter):
    """PADDING1's DML_SCALAR_UNION PaddingValue: a value of OutputTensor's type, 0 when left out."""

    def _limit(self, data_type):
        return data_type.numpy_dtype.type(0)

    def parse(self, given, data_types):
        # A NumPy scalar of the tensor's own type is taken as it is, so that a NaN's payload (a signalling
        # NaN's too) is not quieted on its way through a Python float.
        value = given.get(self.options[0])
        if isinstance(value, np.generic) and value.dtype == data_types[self.tensor].numpy_dtype:
            return value
        return super().parse(given, data_types)

    def describe_default(self) -> str:
        return "0"


class PaddingFloatParameter(FloatParameter):
    """PADDING's FLOAT PaddingValue; a numpy.float32 given to the API is taken bit for bit (a signalling NaN
    would be quieted on its way through a Python float)."""

    def parse(self, given, data_types):
        value = given.get(self.options[0])
        if isinstance(value, np.float32):
            return value
        return super().parse(given, data_types)


def _required(value, parameter, operator: str):
    """A parameter DirectML needs and dmlcli cannot guess (usage error, exit 2)."""
    if value is None:
        raise InputError(f"{operator} needs {parameter.field} ({option_flag(parameter.options[0])})")
    return value


def _per_dimension(values, rank: int, field_name: str, fill: int) -> tuple[int, ...]:
    """An array field with one value per input dimension; left out: `fill` in every dimension."""
    if values is None:
        return (fill,) * rank
    check_length(values, rank, field_name)
    return tuple(values)


def _fresh(xp, view):
    """A C-ordered copy of a view (the backends copy once more only where it still shares the input)."""
    return xp.ascontiguousarray(view)


# ---------------------------------------------------------------- JOIN and SPLIT

_JOIN_ROWS = rows(
    _io_row("4_1", DIMS_1_TO_8, ALL11, ("InputTensors",)),
    _io_row("3_0", DIMS_4_TO_5, TYPES_8, ("InputTensors",)),
    _io_row("2_1", DIMS_4, TYPES_8, ("InputTensors",)),
    _io_row("1_0", DIMS_4, _TYPES_16_32, ("InputTensors",)),
)

AXIS = IntegerParameter(field="Axis", help="the dimension to join along (0 to DimensionCount - 1)", default_value=0)


def _check_same_except_axis(shape, reference, axis: int, name: str, reference_name: str, what: str) -> None:
    if len(shape) != len(reference):
        raise RuleViolation(f"{name} has {len(shape)} dimensions but {reference_name} has {len(reference)}; "
                            f"{what} must have the same DimensionCount")
    if any(a != b for d, (a, b) in enumerate(zip(shape, reference)) if d != axis):
        raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} and {reference_name} Sizes "
                            f"{describe_sizes(reference)} differ outside Axis {axis}; {what} must have the same "
                            "Sizes in every dimension but Axis")


def join_shape(query: ShapeQuery) -> dict:
    shapes = query.shapes_of("InputTensors")
    first = shapes[0]
    axis = check_axis(query.parameters["Axis"], len(first), "Axis", "InputTensors[0]")
    for index, shape in enumerate(shapes[1:], start=1):
        _check_same_except_axis(shape, first, axis, f"InputTensors[{index}]", "InputTensors[0]", "the InputTensors")
    joined = sum(shape[axis] for shape in shapes)
    return {"OutputTensor": first[:axis] + (joined,) + first[axis + 1:]}


def join_kernel(xp, inputs, outputs, params):
    return (xp.concatenate(inputs, axis=params["Axis"]),)


def join_gpu_kernel(cp, inputs, outputs, params):
    """JOIN on the GPU by the copy engine (movement_gpu.py), CuPy's concatenate where that does not fit."""
    joined = movement_gpu.join(cp, inputs, outputs[0].shape, params["Axis"])
    return (joined,) if joined is not None else join_kernel(cp, inputs, outputs, params)


JOIN = Operator(
    name="JOIN", enum_value=63, family=FAMILY, prefix="",
    summary="concatenates one or more input tensors along Axis",
    formula="OutputTensor = InputTensors[0], InputTensors[1], ... one after the other along Axis",
    introduced=_JOIN_ROWS[-1].level, inputs=("InputTensors",), support=_JOIN_ROWS,
    same_data_type=("InputTensors", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(AXIS,), native_encoding=True, variadic="InputTensors", shape_rule=join_shape,
    array_kernel=join_kernel, gpu_array_kernel=join_gpu_kernel, exactness=EXACT, dask_layout="concatenate",
    notes=("InputTensors is an array of one or more tensors (InputCount in DirectML's desc): give them as the "
           "inputs, in order. Joining one tensor copies it.",
           "The page's tables give 1 to 8 dimensions from 4_1 (4 to 5 at 3_0); DirectML's release notes say 8-D "
           "JOIN came with 3_1. dmlcli follows the page.",
           "Every input's size along Axis must be non-zero, as the page says (DirectML tensors have no zero sizes)."),
)

_SPLIT_ROWS = rows(
    _io_row("4_1", DIMS_1_TO_8, ALL11, output="OutputTensors"),
    _io_row("3_0", DIMS_1_TO_8, TYPES_8, output="OutputTensors"),
    _io_row("2_1", DIMS_4, TYPES_8, output="OutputTensors"),
    _io_row("1_0", DIMS_4, _TYPES_16_32, output="OutputTensors"),
)

SPLIT_AXIS = IntegerParameter(field="Axis", help="the dimension to split along (0 to DimensionCount - 1)",
                              default_value=0)
OUTPUT_SIZES = SplitSizesParameter(
    field="OutputSizes", default_text="equal pieces (OutputCount of them)", max_length=1 << 16,
    help="dmlcli's way to state each of the OutputTensors' Sizes along Axis, in order (DirectML reads them from "
         "the output tensor descs); they must add up to the input's size along Axis")
OUTPUT_COUNT = _NotInDescInteger(
    field="OutputCount", minimum=1, default_text="the number of OutputSizes",
    help="the number of OutputTensors; without OutputSizes, the input is split into this many equal pieces")


def _split_from_given(given, shape, axis: int) -> list[tuple[int, ...]]:
    for index, piece in enumerate(given):
        _check_same_except_axis(tuple(piece), shape, axis, f"OutputTensors[{index}]", "InputTensor",
                                "InputTensor and the OutputTensors")
    return [tuple(piece) for piece in given]


def _split_pieces(query: ShapeQuery, shape, axis: int) -> list[int]:
    """Each output's size along Axis, from the outputs' descs, OutputSizes or OutputCount."""
    sizes, count = query.parameters["OutputSizes"], query.parameters["OutputCount"]
    given = query.given_outputs.get("OutputTensors")
    if given is not None and all(isinstance(size, int) for size in given):
        given = [tuple(given)]  # one output's Sizes (--output-shape): a split into one piece, a copy
    if given is not None:
        stated = [piece[axis] for piece in _split_from_given(given, shape, axis)]
        if sizes is not None and tuple(sizes) != tuple(stated):
            raise RuleViolation(f"OutputSizes {describe_sizes(sizes)} differ from the OutputTensors' sizes along "
                                f"Axis {axis}, {describe_sizes(stated)}")
        sizes = stated
    if sizes is not None:
        if not sizes:
            raise RuleViolation("OutputSizes is empty; OutputCount must be greater than 0 (one size per output)")
        if count is not None and count != len(sizes):
            raise RuleViolation(f"OutputCount {count} does not match the {len(sizes)} OutputTensors "
                                f"{describe_sizes(sizes)}")
        for index, size in enumerate(sizes):
            if size == 0:
                raise RuleViolation(f"OutputSizes[{index}] is 0; each output's size along Axis must be at least 1 "
                                    "(DirectML tensors have no zero sizes)")
        if sum(sizes) != shape[axis]:
            raise RuleViolation(f"OutputSizes {describe_sizes(sizes)} add up to {sum(sizes)}, but InputTensor's "
                                f"size along Axis {axis} is {shape[axis]}; the pieces must add up to it exactly")
        return list(sizes)
    if count is None:
        raise InputError(f"SPLIT needs {option_flag('output_sizes')} (each output's size along Axis) or "
                         f"{option_flag('output_count')} (that many equal pieces)")
    if shape[axis] % count:
        raise RuleViolation(f"InputTensor's size along Axis {axis}, {shape[axis]}, is not divisible by OutputCount "
                            f"{count}; give OutputSizes for pieces of different sizes")
    return [shape[axis] // count] * count


def split_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    axis = check_axis(query.parameters["Axis"], len(shape), "Axis")
    pieces = _split_pieces(query, shape, axis)
    return {"OutputTensors": [shape[:axis] + (piece,) + shape[axis + 1:] for piece in pieces]}


def split_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    axis = params["Axis"]
    bounds = np.cumsum([info.shape[axis] for info in outputs])[:-1].tolist()
    return tuple(_fresh(xp, piece) for piece in xp.split(x, bounds, axis=axis))


SPLIT = Operator(
    name="SPLIT", enum_value=62, family=FAMILY, prefix="",
    summary="splits the input along Axis into consecutive pieces, one per output tensor",
    formula="OutputTensors[0], OutputTensors[1], ... = InputTensor cut along Axis into pieces of the outputs' sizes",
    introduced=_SPLIT_ROWS[-1].level, inputs=("InputTensor",), output="OutputTensors", support=_SPLIT_ROWS,
    same_data_type=("InputTensor", "OutputTensors"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(SPLIT_AXIS, OUTPUT_SIZES, OUTPUT_COUNT), native_encoding=True, variadic="OutputTensors",
    shape_rule=split_shape, array_kernel=split_kernel, exactness=EXACT,
    notes=("OutputTensors is an array of one or more tensors (OutputCount in DirectML's desc); the API returns a "
           "tuple, one array per output; on the command line -o out.npz writes them all (OutputTensors_0, ...) and "
           "-o - prints them all as JSON.",
           "DirectML takes each output's size along Axis from its tensor desc. A DxDispatch model gives them so; "
           "in the API and on the command line, OutputSizes (--output-sizes 2,1,3) states them, or OutputCount "
           "(--output-count 3) splits the input into that many equal pieces.",
           "Each piece must be at least 1 long (DirectML tensors have no zero sizes; the page is silent)."),
)

# ---------------------------------------------------------------- SLICE and SLICE1

_SLICE_ROWS = rows(
    _io_row("4_1", DIMS_1_TO_8, ALL11),
    _io_row("3_0", DIMS_1_TO_8, TYPES_8),
    _io_row("2_1", DIMS_4_TO_5, TYPES_8),
    _io_row("1_0", DIMS_4_TO_5, _TYPES_16_32),
)
_SLICE1_ROWS = rows(
    _io_row("4_1", DIMS_1_TO_8, ALL11),
    _io_row("3_0", DIMS_1_TO_8, TYPES_8),
    _io_row("2_1", DIMS_4_TO_5, TYPES_8),
)

OFFSETS = IntArrayParameter(field="Offsets", count_field="DimensionCount", default_text="0 in every dimension",
                            help="the slice's start in each dimension of the input, in elements")
SIZES = IntArrayParameter(
    field="Sizes", count_field="DimensionCount",
    default_text="as many elements as fit from Offsets with Strides, in every dimension",
    help="the slice's size in each dimension, in elements (the output's Sizes)")
STRIDES = IntArrayParameter(field="Strides", count_field="DimensionCount", default_text="1 in every dimension",
                            help="the step between elements read in each dimension of the input (at least 1)")


def slice_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    rank = len(shape)
    offsets = _per_dimension(query.parameters["Offsets"], rank, "Offsets", 0)
    strides = _per_dimension(query.parameters["Strides"], rank, "Strides", 1)
    for dim, stride in enumerate(strides):
        if stride == 0:
            raise RuleViolation(f"Strides[{dim}] is 0; strides must be at least 1 (dmlcli's choice where the page is "
                                "silent: SLICE1's page forbids a stride of 0)")
    for dim, (offset, size) in enumerate(zip(offsets, shape)):
        if offset >= size:
            raise RuleViolation(f"Offsets[{dim}] {offset} is outside InputTensor's Sizes[{dim}] {size} (allowed: "
                                f"0 to {size - 1}; out-of-bounds reads are not permitted)")
    given = query.parameters["Sizes"]
    if given is None:
        sizes = tuple(-(-(size - offset) // stride) for size, offset, stride in zip(shape, offsets, strides))
    else:
        check_length(given, rank, "Sizes")
        sizes = tuple(given)
    for dim, (offset, count, stride, size) in enumerate(zip(offsets, sizes, strides, shape)):
        if count == 0:
            raise RuleViolation(f"Sizes[{dim}] is 0; the slice must copy at least 1 element in every dimension")
        last = offset + stride * (count - 1)
        if last > size - 1:
            raise RuleViolation(f"Offsets[{dim}] {offset} + Strides[{dim}] {stride} * (Sizes[{dim}] {count} - 1) = "
                                f"{last} reads past InputTensor's Sizes[{dim}] {size} (the last element read must be "
                                f"at most {size - 1}; out-of-bounds reads are not permitted)")
    return {"OutputTensor": sizes}


def slice_window(call) -> tuple[slice, ...]:
    """SLICE's elements as Python slices of the input (what the kernel and Dask index with)."""
    params, out = call.parameters, call.output
    rank = len(out.shape)
    offsets = _per_dimension(params["Offsets"], rank, "Offsets", 0)
    strides = _per_dimension(params["Strides"], rank, "Strides", 1)
    return tuple(slice(o, o + s * (n - 1) + 1, s) for o, s, n in zip(offsets, strides, out.shape))


def slice_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    window = slice_window(WindowCall(params, outputs[0]))
    return (_fresh(xp, x[window]),)


def slice_gpu_kernel(cp, inputs, outputs, params):
    """SLICE on the GPU: the window's view gathered by one kernel (movement_gpu.strided_copy)."""
    (x,) = inputs
    return (movement_gpu.strided_copy(cp, x[slice_window(WindowCall(params, outputs[0]))]),)


class WindowCall:
    """What slice_window and slice1_window read of a call: its parameters and output (the kernels have those)."""

    def __init__(self, parameters, output):
        self.parameters, self.output = parameters, output


SLICE = Operator(
    name="SLICE", enum_value=60, family=FAMILY, prefix="",
    summary="copies one strided subregion of the input",
    formula="OutputTensor[c] = InputTensor[Offsets + Strides * c] for every output coordinate c",
    introduced=_SLICE_ROWS[-1].level, inputs=("InputTensor",), support=_SLICE_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(OFFSETS, SIZES, STRIDES), native_encoding=True,
    shape_rule=slice_shape, array_kernel=slice_kernel, gpu_array_kernel=slice_gpu_kernel, exactness=EXACT,
    moves_input="InputTensor", dask_layout="index",
    dask_index=slice_window,
    notes=("Offsets, Sizes and Strides have one value per dimension (DimensionCount); every element read must lie "
           "inside the input (Offsets + Strides * (Sizes - 1) < InputTensor.Sizes). The output's Sizes are Sizes.",
           "The API and the command line may leave out Offsets (0), Strides (1) and Sizes (as many elements as fit "
           "from Offsets with Strides); a DxDispatch model gives all three, as DirectML needs them.",
           "A stride of 0 is refused: the page is silent, and SLICE1's page says strides may not be 0."),
)

WINDOW_OFFSETS = IntArrayParameter(
    field="InputWindowOffsets", count_field="DimensionCount", default_text="0 in every dimension",
    help="the start of the input window in each dimension, in elements")
WINDOW_SIZES = IntArrayParameter(
    field="InputWindowSizes", count_field="DimensionCount",
    default_text="from InputWindowOffsets to the end of the input, in every dimension",
    help="the extent of the input window in each dimension (InputWindowOffsets + InputWindowSizes <= the input's "
         "Sizes)")
WINDOW_STRIDES = IntArrayParameter(
    field="InputWindowStrides", count_field="DimensionCount", minimum=INT32_RANGE[0], maximum=INT32_RANGE[1],
    default_text="1 in every dimension",
    help="the step in each dimension (INT, not 0): a negative stride copies from the end of the window backwards")


def _max_copied(window: int, stride: int) -> int:
    """SLICE1's MaxCopiedElements (the page writes the signed stride; its own examples use the magnitude)."""
    return 1 + (window - 1) // abs(stride)


def slice1_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    rank = len(shape)
    offsets = _per_dimension(query.parameters["InputWindowOffsets"], rank, "InputWindowOffsets", 0)
    strides = _per_dimension(query.parameters["InputWindowStrides"], rank, "InputWindowStrides", 1)
    given_windows = query.parameters["InputWindowSizes"]
    if given_windows is None:
        for dim, (offset, size) in enumerate(zip(offsets, shape)):
            if offset >= size:
                raise RuleViolation(f"InputWindowOffsets[{dim}] {offset} is outside InputTensor's Sizes[{dim}] "
                                    f"{size} (allowed: 0 to {size - 1})")
        windows = tuple(size - offset for size, offset in zip(shape, offsets))
    else:
        check_length(given_windows, rank, "InputWindowSizes")
        windows = tuple(given_windows)
    for dim, (offset, window, stride, size) in enumerate(zip(offsets, windows, strides, shape)):
        if stride == 0:
            raise RuleViolation(f"InputWindowStrides[{dim}] is 0; strides may not be 0 (a negative stride copies "
                                "from the end of the window)")
        if window == 0:
            raise RuleViolation(f"InputWindowSizes[{dim}] is 0; the input window mustn't be empty in any dimension")
        if offset + window > size:
            raise RuleViolation(f"InputWindowOffsets[{dim}] {offset} + InputWindowSizes[{dim}] {window} = "
                                f"{offset + window} is more than InputTensor's Sizes[{dim}] {size}; the window "
                                "mustn't extend beyond the input")
    most = tuple(_max_copied(window, stride) for window, stride in zip(windows, strides))
    stated = query.given_outputs.get("OutputTensor")
    if stated is None:
        return {"OutputTensor": most}
    stated = tuple(stated)
    if len(stated) != rank:
        raise RuleViolation(f"OutputTensor has {len(stated)} dimensions but InputTensor has {rank}; they must have "
                            "the same DimensionCount")
    for dim, (count, limit) in enumerate(zip(stated, most)):
        if not 1 <= count <= limit:
            raise RuleViolation(f"OutputTensor Sizes[{dim}] {count} is outside 1 to MaxCopiedElements {limit} "
                                f"(= 1 + (InputWindowSizes[{dim}] {windows[dim]} - 1) // |InputWindowStrides[{dim}]| "
                                f"{abs(strides[dim])})")
    return {"OutputTensor": stated}


def slice1_window(call, input_shape) -> tuple[slice, ...]:
    """SLICE1's elements as Python slices of the input (negative strides read from the window's end)."""
    params, out = call.parameters, call.output
    rank = len(out.shape)
    offsets = _per_dimension(params["InputWindowOffsets"], rank, "InputWindowOffsets", 0)
    strides = _per_dimension(params["InputWindowStrides"], rank, "InputWindowStrides", 1)
    windows = params["InputWindowSizes"] or tuple(size - offset for size, offset in zip(input_shape, offsets))
    window = []
    for offset, size, stride, count in zip(offsets, windows, strides, out.shape):
        start = offset if stride > 0 else offset + size - 1  # a negative stride starts at the window's end
        stop = start + stride * (count - 1) + (1 if stride > 0 else -1)
        window.append(slice(start, None if stop < 0 else stop, stride))
    return tuple(window)


def slice1_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    return (_fresh(xp, x[slice1_window(WindowCall(params, outputs[0]), x.shape)]),)


def slice1_gpu_kernel(cp, inputs, outputs, params):
    """SLICE1 on the GPU: as SLICE's, negative strides included."""
    (x,) = inputs
    return (movement_gpu.strided_copy(cp, x[slice1_window(WindowCall(params, outputs[0]), x.shape)]),)


SLICE1 = Operator(
    name="SLICE1", enum_value=111, family=FAMILY, prefix="",
    summary="copies one strided subregion of an input window, backwards along dimensions with a negative stride",
    formula="OutputTensor[c] = InputTensor[CopyStart + InputWindowStrides * c], CopyStart = InputWindowOffsets "
            "(+ InputWindowSizes - 1 where the stride is negative)",
    introduced=_SLICE1_ROWS[-1].level, inputs=("InputTensor",), support=_SLICE1_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(WINDOW_OFFSETS, WINDOW_SIZES, WINDOW_STRIDES),
    native_encoding=True, shape_rule=slice1_shape, array_kernel=slice1_kernel, gpu_array_kernel=slice1_gpu_kernel,
    exactness=EXACT, moves_input="InputTensor",
    dask_layout="index", dask_index=lambda call: slice1_window(call, call.tensors["InputTensor"].shape),
    notes=("The output's Sizes may be anything from 1 to MaxCopiedElements = 1 + (InputWindowSizes - 1) // "
           "|InputWindowStrides| in each dimension; DirectML takes them from the output's desc (a DxDispatch "
           "model's, or output_shape= in the API). Left out, they are MaxCopiedElements: every reachable element.",
           "InputWindowStrides is a signed INT array (the header's type; one heading on the page says UINT). "
           "MaxCopiedElements uses the stride's magnitude, as the page's own negative-stride example needs.",
           "The API and the command line may leave out InputWindowOffsets (0), InputWindowSizes (to the end of the "
           "input) and InputWindowStrides (1)."),
)

# ---------------------------------------------------------------- PADDING and PADDING1

_PADDING_ROWS = rows(
    _io_row("5_0", DIMS_1_TO_8, ALL11),
    _io_row("3_1", DIMS_1_TO_8, TYPES_8),
    _io_row("2_1", DIMS_4_TO_5, TYPES_8),
    _io_row("1_0", DIMS_4_TO_5, FLOATS),
)
_PADDING1_ROWS = rows(_io_row("5_0", DIMS_1_TO_8, ALL11))

# DML_PADDING_MODE (DirectML.h 0x6400), and the feature level that brought each mode past the first three:
# SYMMETRIC the pages' ('This mode was introduced in DML_FEATURE_LEVEL_3_0'), WRAP DirectML 1.15.0's release notes
# (microsoft/DirectML Releases.md: FL 6.4 updated PADDING and PADDING1 'to accept DML_PADDING_MODE_WRAP').
PADDING_MODES = (("CONSTANT", 0), ("EDGE", 1), ("REFLECTION", 2), ("SYMMETRIC", 3), ("WRAP", 4))
PADDING_MODE_SINCE = {"SYMMETRIC": level("3_0"), "WRAP": level("6_4")}

PADDING_MODE = EnumParameter(
    field="PaddingMode", enum_prefix="DML_PADDING_MODE_", values=PADDING_MODES, default_value="CONSTANT",
    help="constant (PaddingValue), edge (the edge element repeated), reflection (mirrored, edges not repeated), "
         "symmetric (mirrored, edges repeated; from 3_0) or wrap (the input repeated as on a torus; from 6_4, "
         "padding at most the input's size)")
PADDING_VALUE = PaddingFloatParameter(
    field="PaddingValue", default_value=0.0,
    help="the FLOAT written into the padding in constant mode (integer tensors: truncated toward zero, then "
         "saturated to the type's range)")
START_PADDING = IntArrayParameter(field="StartPadding", count_field="DimensionCount", default_text="0 in every dimension",
                                  help="the elements added before the input in each dimension")
END_PADDING = IntArrayParameter(field="EndPadding", count_field="DimensionCount", default_text="0 in every dimension",
                                help="the elements added after the input in each dimension")
PADDING_VALUE_TYPE = DataTypeParameter(
    field="PaddingValueDataType", tensor="OutputTensor",
    help="the data type of PaddingValue; must be OutputTensor's (given or not, it is checked)")
TYPED_PADDING_VALUE = PaddingValueParameter(
    field="PaddingValue", tensor="OutputTensor",
    help="the value written into the padding in constant mode, of OutputTensor's data type (read exactly)")


def padding_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    start = _per_dimension(query.parameters["StartPadding"], len(shape), "StartPadding", 0)
    end = _per_dimension(query.parameters["EndPadding"], len(shape), "EndPadding", 0)
    if query.parameters["PaddingMode"] == "WRAP":
        _check_one_period(shape, start, end)
    return {"OutputTensor": tuple(s + size + e for s, size, e in zip(start, shape, end))}


def _check_one_period(shape, start, end) -> None:
    """WRAP's padding may be at most the input's size in each dimension: past one period no source says what
    DirectML copies (its pages do not describe WRAP at all), so dmlcli does not pick a value."""
    for field_name, values in (("StartPadding", start), ("EndPadding", end)):
        for dim, (count, size) in enumerate(zip(values, shape)):
            if count > size:
                raise RuleViolation(
                    f"{field_name}[{dim}] {count} is larger than InputTensor's size {size} in that dimension; with "
                    "PaddingMode WRAP dmlcli takes padding up to one copy of the input (DirectML documents no "
                    "result for more)")


def padding_level_rule(call, feature_level) -> str | None:
    mode = call.parameters["PaddingMode"]
    since = PADDING_MODE_SINCE.get(mode)
    if since is not None and feature_level < since:
        return f"PaddingMode {mode} is not available at {feature_level} (introduced in {since})"
    return None


def float_padding_value(value: np.float32, dtype: np.dtype):
    """PADDING's FLOAT PaddingValue in the tensor's type: floats rounded once (FLOAT16: to nearest even, past
    its range to infinity); integers truncated toward zero and saturated to the type's range, NaN giving 0."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return np.asarray(value, np.float32).astype(dtype)[()]
    number = float(value)
    if math.isnan(number):
        return dtype.type(0)
    info = np.iinfo(dtype)
    if math.isinf(number):
        return dtype.type(info.max if number > 0 else info.min)
    return dtype.type(min(max(math.trunc(number), int(info.min)), int(info.max)))


def padding_period(mode: str, size: int) -> int | None:
    """How many padded coordinates pass before the copied coordinates repeat; None for EDGE and for a one-element
    dimension (which mirrors onto its only element): one element repeated."""
    if mode == "EDGE" or size == 1:
        return None
    return {"WRAP": size, "REFLECTION": 2 * (size - 1), "SYMMETRIC": 2 * size}[mode]


def padding_runs(mode: str, offset: int, count: int, size: int):
    """The input coordinates that padded coordinates offset .. offset + count - 1 copy (relative to the input's first
    element: negative before it, >= size after it), as runs (length, first source coordinate, step): step 1 or -1
    (a stretch of the input forwards or backwards), or 0 (one element repeated). REFLECTION and SYMMETRIC fold
    periodically, as the page describes padding longer than the input ('folding them over previous padding
    regions'); WRAP repeats the input end to end (ONNX's Pad mode wrap, numpy.pad's 'wrap'). Worked out from the
    coordinates' arithmetic, so a run costs nothing whatever its length."""
    period = padding_period(mode, size)
    if period is None:
        yield count, 0 if offset < 0 else size - 1, 0
        return
    coordinate, stop = offset, offset + count
    while coordinate < stop:
        folded = coordinate % period
        if folded < size:  # the input forwards
            length, source, step = size - folded, folded, 1
        elif mode == "REFLECTION":  # backwards without repeating the edges: size - 2 down to 1
            length, source, step = period - folded, period - folded, -1
        else:  # SYMMETRIC backwards, edges repeated: size - 1 down to 0
            length, source, step = period - folded, period - 1 - folded, -1
        length = min(length, stop - coordinate)
        yield length, source, step
        coordinate += length


def _pad(xp, x, shape, start, end, mode: str, constant, place=None):
    """Padding by slices, one dimension at a time: the input copied once into the middle (by `place(out, start,
    x)` where given and it can, by slice assignment otherwise), then each dimension's two padding slabs filled
    (from the constant, or from the part already written: _copy_padding)."""
    out = xp.empty(shape, dtype=x.dtype)
    if place is None or not place(out, start, x):
        out[tuple(slice(s, s + n) for s, n in zip(start, x.shape))] = x
    fill = None if mode != "CONSTANT" else xp.asarray(np.asarray(constant, x.dtype))
    whole = slice(None)
    for axis, (before, size, after) in enumerate(zip(start, x.shape, end)):
        for first, count, offset in ((0, before, -before), (before + size, after, size)):
            if count == 0:
                continue
            if fill is not None:
                out[(whole,) * axis + (slice(first, first + count),)] = fill
                continue
            _copy_padding(out, axis, first, count, offset, size, before, mode)
    return out


def _copy_padding(out, axis: int, first: int, count: int, offset: int, size: int, before: int, mode: str) -> None:
    """One padding slab along `axis` (positions first .. first + count - 1, padded coordinates from `offset`) copied
    from the part of `out` already written, the input sitting at positions before .. before + size - 1: the first
    period by a slice copy per run (three at most), then what is written doubled until the slab is full (the
    copied coordinates repeat with the period). Only views are made (np.pad's way), never an index array or a
    gathered copy: padding 10^8 long takes the output's memory and no more (issue 34)."""
    whole = (slice(None),) * axis
    period = padding_period(mode, size)
    head = count if period is None else min(count, period)
    done = 0
    for length, source, step in padding_runs(mode, offset, head, size):
        if step == 0:
            read = slice(before + source, before + source + 1)  # broadcast by the assignment
        else:
            last = before + source + step * (length - 1)
            read = slice(before + source, last + step if last + step >= 0 else None, step)
        out[whole + (slice(first + done, first + done + length),)] = out[whole + (read,)]
        done += length
    while done < count:  # `done` is a whole number of periods here
        length = min(done, count - done)
        out[whole + (slice(first + done, first + done + length),)] = out[whole + (slice(first, first + length),)]
        done += length


def _padding_constant(params, dtype):
    """PaddingValue in the tensor's type (PADDING1 gives it typed already; PADDING as a FLOAT)."""
    value = params["PaddingValue"]
    return value if "PaddingValueDataType" in params else float_padding_value(value, dtype)


def padding_kernel(xp, inputs, outputs, params, place=None):
    (x,) = inputs
    (out,) = outputs
    start = _per_dimension(params["StartPadding"], x.ndim, "StartPadding", 0)
    end = _per_dimension(params["EndPadding"], x.ndim, "EndPadding", 0)
    constant = _padding_constant(params, x.dtype)
    return (_pad(xp, x, out.shape, start, end, params["PaddingMode"], constant, place),)


def padding_gpu_kernel(cp, inputs, outputs, params):
    """PADDING on the GPU in one kernel (movement_gpu.pad); where it does not take the input, the interior by the
    copy engine (movement_gpu.place) and the slabs as on the CPU."""
    (x,) = inputs
    start = _per_dimension(params["StartPadding"], x.ndim, "StartPadding", 0)
    padded = movement_gpu.pad(cp, x, outputs[0].shape, start, params["PaddingMode"], _padding_constant(params, x.dtype))
    if padded is not None:
        return (padded,)
    return padding_kernel(cp, inputs, outputs, params, place=lambda out, start, x: movement_gpu.place(cp, out,
                                                                                                         start, x))


_PADDING_NOTES = (
    "StartPadding and EndPadding have one value per dimension (DimensionCount); left out in the API and on the "
    "command line, 0. OutputTensor.Sizes = StartPadding + InputTensor.Sizes + EndPadding.",
    "REFLECTION and SYMMETRIC padding may be longer than the input: it folds over the padding already made, "
    "periodically (period 2 * (size - 1) and 2 * size). Along a dimension of size 1, REFLECTION repeats the one "
    "element (the page is silent; there is nothing else to mirror).",
    "WRAP (DML_PADDING_MODE_WRAP, 4 in DirectML.h 0x6400) is accepted from 6_4: DirectML 1.15.0's release notes "
    "(microsoft/DirectML Releases.md, 'DML_FEATURE_LEVEL 6.4') and the feature level history say FL 6_4 updated "
    "PADDING and PADDING1 to accept it; the pages describe no WRAP. dmlcli copies what the name and ONNX's Pad "
    "mode 'wrap' (opset 19: 'wrap-around padding as if the data tensor forms a torus', numpy.pad's 'wrap') say: "
    "output coordinate c - StartPadding taken modulo the input's size. Padding longer than the input is refused "
    "(StartPadding and EndPadding at most InputTensor's size in each dimension), where the modulo and a single "
    "wrap-around agree: no source says which DirectML does past one period (PyTorch's circular padding refuses it "
    "too).",
)

PADDING = Operator(
    name="PADDING", enum_value=64, family=FAMILY, prefix="",
    summary="surrounds the input with constant, edge, mirrored or wrapped-around values",
    formula="OutputTensor = InputTensor with StartPadding elements before and EndPadding after it in each "
            "dimension, filled by PaddingMode",
    introduced=_PADDING_ROWS[-1].level, inputs=("InputTensor",), support=_PADDING_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(PADDING_MODE, PADDING_VALUE, START_PADDING, END_PADDING), native_encoding=True,
    shape_rule=padding_shape, array_kernel=padding_kernel, gpu_array_kernel=padding_gpu_kernel, exactness=EXACT,
    level_rule=padding_level_rule,
    notes=_PADDING_NOTES + (
        "PaddingValue is a FLOAT whatever the tensors' type: FLOAT16 gets it rounded to nearest (even), FLOAT64 "
        "exactly; integer types get it truncated toward zero (10.6 becomes 10, as the page says) and saturated to "
        "the type's range, NaN becoming 0 (the page is silent past truncation). PADDING1 takes a typed value.",
        "SYMMETRIC is available from 3_0 (the page: 'This mode was introduced in DML_FEATURE_LEVEL_3_0').",
    ),
)

PADDING1 = Operator(
    name="PADDING1", enum_value=155, family=FAMILY, prefix="",
    summary="surrounds the input with constant, edge, mirrored or wrapped-around values (the constant typed like "
            "the output)",
    formula="OutputTensor = InputTensor with StartPadding elements before and EndPadding after it in each "
            "dimension, filled by PaddingMode",
    introduced=_PADDING1_ROWS[-1].level, inputs=("InputTensor",), support=_PADDING1_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(PADDING_MODE, PADDING_VALUE_TYPE, TYPED_PADDING_VALUE, START_PADDING, END_PADDING),
    native_encoding=True, shape_rule=padding_shape, array_kernel=padding_kernel,
    gpu_array_kernel=padding_gpu_kernel, exactness=EXACT, level_rule=padding_level_rule,
    notes=_PADDING_NOTES + (
        "PaddingValue is a DML_SCALAR_UNION of PaddingValueDataType, which must be OutputTensor's type: read "
        "exactly in that type (INT64 and UINT64 values are never routed through a double); left out, 0.",),
)

# ---------------------------------------------------------------- TILE

_TILE_ROWS = rows(
    _io_row("4_1", DIMS_1_TO_8, TYPES_10),
    _io_row("3_1", DIMS_1_TO_8, TYPES_8),
    _io_row("2_1", DIMS_4, TYPES_8),
    _io_row("1_0", DIMS_4, FLOATS),
)
REPEATS = IntArrayParameter(field="Repeats", count_field="RepeatsCount", default_text="none: required",
                            help="how many copies of the input to lay side by side in each dimension (at least 1)")


def tile_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    repeats = _required(query.parameters["Repeats"], REPEATS, "TILE")
    if len(repeats) != len(shape):
        raise RuleViolation(f"RepeatsCount {len(repeats)} (the values of Repeats) must be InputTensor's "
                            f"DimensionCount, {len(shape)}")
    for dim, count in enumerate(repeats):
        if count == 0:
            raise RuleViolation(f"Repeats[{dim}] is 0; values must be larger than 0")
    return {"OutputTensor": tuple(size * count for size, count in zip(shape, repeats))}


def tile_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    return (xp.tile(x, tuple(params["Repeats"])),)


def tile_gpu_kernel(cp, inputs, outputs, params):
    """TILE on the GPU by movement_gpu's read-once kernel, else the copy engine, else CuPy's tile."""
    repeats = tuple(params["Repeats"])
    tiled = movement_gpu.tile_by_kernel(cp, inputs[0], repeats)
    if tiled is None:
        tiled = movement_gpu.tile(cp, inputs[0], repeats)
    return (tiled,) if tiled is not None else tile_kernel(cp, inputs, outputs, params)


TILE = Operator(
    name="TILE", enum_value=70, family=FAMILY, prefix="",
    summary="lays copies of the input side by side, Repeats of them in each dimension",
    formula="OutputTensor[c] = InputTensor[c mod InputTensor.Sizes]; OutputTensor.Sizes = InputTensor.Sizes * "
            "Repeats",
    introduced=_TILE_ROWS[-1].level, inputs=("InputTensor",), support=_TILE_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(REPEATS,), native_encoding=True,
    shape_rule=tile_shape, array_kernel=tile_kernel, gpu_array_kernel=tile_gpu_kernel,
    exactness=EXACT,
    notes=("Repeats has one value per dimension (RepeatsCount = DimensionCount), each at least 1 (ONNX's repeat "
           "of 0, an empty output, has no DirectML form).",
           "The page's 4_1 table lists 64-bit integers but not FLOAT64; dmlcli follows it."),
)

# ---------------------------------------------------------------- DEPTH_TO_SPACE, SPACE_TO_DEPTH and their *1

_D2S_ROWS = rows(
    _io_row("5_0", DIMS_4, ALL11),
    _io_row("2_1", DIMS_4, TYPES_8),
    _io_row("1_0", DIMS_4, FLOATS),
)
_D2S1_ROWS = rows(
    _io_row("5_0", DIMS_4, ALL11),
    _io_row("2_1", DIMS_4, TYPES_8),
)
BLOCK_SIZE = OptionalIntegerParameter(field="BlockSize", minimum=0, default_text="none: required",
                                      help="the width and height of the blocks moved (at least 1)")
ORDER = EnumParameter(
    field="Order", enum_prefix="DML_DEPTH_SPACE_ORDER_", values=(("DEPTH_COLUMN_ROW", 0), ("COLUMN_ROW_DEPTH", 1)),
    default_value="DEPTH_COLUMN_ROW",
    help="how the channels of a block are laid out: depth_column_row (ONNX's DCR) or column_row_depth (ONNX's CRD)")


def _block_geometry(query: ShapeQuery, name: str) -> tuple[tuple[int, ...], int]:
    shape = query.shape("InputTensor")
    block = _required(query.parameters["BlockSize"], BLOCK_SIZE, name)
    if len(shape) != 4:
        raise RuleViolation(f"InputTensor has {len(shape)} dimensions; {name} works on 4 "
                            "({Batch, Channels, Height, Width})")
    if block == 0:
        raise RuleViolation("BlockSize is 0; it must be at least 1")
    return shape, block


def depth_to_space_shape(query: ShapeQuery, name: str = "DEPTH_TO_SPACE") -> dict:
    (batch, channels, height, width), block = _block_geometry(query, name)
    if channels % (block * block):
        raise RuleViolation(f"InputTensor's channel count {channels} is not divisible by BlockSize * BlockSize = "
                            f"{block * block} (OutputChannelCount = InputChannelCount / (BlockSize * BlockSize))")
    return {"OutputTensor": (batch, channels // (block * block), height * block, width * block)}


def space_to_depth_shape(query: ShapeQuery, name: str = "SPACE_TO_DEPTH") -> dict:
    (batch, channels, height, width), block = _block_geometry(query, name)
    for what, size in (("height", height), ("width", width)):
        if size % block:
            raise RuleViolation(f"InputTensor's {what} {size} is not divisible by BlockSize {block} (the output's "
                                f"{what} is the input's / BlockSize)")
    return {"OutputTensor": (batch, channels * block * block, height // block, width // block)}


def _order(params) -> str:
    return params.get("Order", "DEPTH_COLUMN_ROW")


def depth_to_space_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    n, c, h, w = x.shape
    b = params["BlockSize"]
    if _order(params) == "DEPTH_COLUMN_ROW":  # depth = (BlockHeight, BlockWidth, Channels)
        moved = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # COLUMN_ROW_DEPTH: depth = (Channels, BlockHeight, BlockWidth)
        moved = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return (_fresh(xp, moved).reshape(out.shape),)


def space_to_depth_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    n, c, h, w = x.shape
    b = params["BlockSize"]
    blocks = x.reshape(n, c, h // b, b, w // b, b)
    if _order(params) == "DEPTH_COLUMN_ROW":
        moved = blocks.transpose(0, 3, 5, 1, 2, 4)
    else:
        moved = blocks.transpose(0, 1, 3, 5, 2, 4)
    return (_fresh(xp, moved).reshape(out.shape),)


_BLOCK_NOTE = "BlockSize must be at least 1 (the page is silent on 0; 1 copies the input)."
_ORDER_NOTE = ("DEPTH_COLUMN_ROW: depth = (BlockHeight, BlockWidth, Channels), ONNX's DCR; COLUMN_ROW_DEPTH: "
               "depth = (Channels, BlockHeight, BlockWidth), ONNX's CRD.")

DEPTH_TO_SPACE = Operator(
    name="DEPTH_TO_SPACE", enum_value=69, family=FAMILY, prefix="",
    summary="moves blocks of channels into BlockSize x BlockSize spatial blocks (depth-column-row order)",
    formula="{N, (b, b, C), H, W} -> {N, C, (H, b), (W, b)}: C = InputChannelCount / b^2, b = BlockSize",
    introduced=_D2S_ROWS[-1].level, inputs=("InputTensor",), support=_D2S_ROWS, same_data_type=IO, same_sizes=(),
    cpu_kernel=None, cuda_body="", parameters=(BLOCK_SIZE,), native_encoding=True, shape_rule=depth_to_space_shape,
    array_kernel=depth_to_space_kernel, exactness=EXACT,
    notes=("The input's channel count must be divisible by BlockSize^2 (the page computes the output's as "
           "InputChannelCount / (BlockSize * BlockSize)).", _BLOCK_NOTE,
           "The same as DEPTH_TO_SPACE1 with Order DEPTH_COLUMN_ROW (ONNX's DepthToSpace in DCR mode)."),
)
DEPTH_TO_SPACE1 = Operator(
    name="DEPTH_TO_SPACE1", enum_value=113, family=FAMILY, prefix="",
    summary="moves blocks of channels into BlockSize x BlockSize spatial blocks, in either Order",
    formula="{N, depth, H, W} -> {N, C, (H, b), (W, b)}, depth = (b, b, C) or (C, b, b) by Order",
    introduced=_D2S1_ROWS[-1].level, inputs=("InputTensor",), support=_D2S1_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(BLOCK_SIZE, ORDER), native_encoding=True,
    shape_rule=lambda query: depth_to_space_shape(query, "DEPTH_TO_SPACE1"), array_kernel=depth_to_space_kernel,
    exactness=EXACT,
    notes=("The input's channel count must be divisible by BlockSize^2.", _BLOCK_NOTE, _ORDER_NOTE),
)
SPACE_TO_DEPTH = Operator(
    name="SPACE_TO_DEPTH", enum_value=68, family=FAMILY, prefix="",
    summary="moves BlockSize x BlockSize spatial blocks into channels (depth-column-row order)",
    formula="{N, C, (H, b), (W, b)} -> {N, (b, b, C), H, W}: the output is {N, C * b^2, H / b, W / b}",
    introduced=_D2S_ROWS[-1].level, inputs=("InputTensor",), support=_D2S_ROWS, same_data_type=IO, same_sizes=(),
    cpu_kernel=None, cuda_body="", parameters=(BLOCK_SIZE,), native_encoding=True, shape_rule=space_to_depth_shape,
    array_kernel=space_to_depth_kernel, exactness=EXACT,
    notes=("The output is {Batch, Channels * BlockSize^2, Height / BlockSize, Width / BlockSize}, as the page's "
           "example shows (its OutputTensor sentence repeats DEPTH_TO_SPACE's formula). Height and width must be "
           "divisible by BlockSize.", _BLOCK_NOTE,
           "The inverse of DEPTH_TO_SPACE; the same as SPACE_TO_DEPTH1 with Order DEPTH_COLUMN_ROW."),
)
SPACE_TO_DEPTH1 = Operator(
    name="SPACE_TO_DEPTH1", enum_value=114, family=FAMILY, prefix="",
    summary="moves BlockSize x BlockSize spatial blocks into channels, in either Order",
    formula="{N, C, (H, b), (W, b)} -> {N, depth, H, W}, depth = (b, b, C) or (C, b, b) by Order",
    introduced=_D2S1_ROWS[-1].level, inputs=("InputTensor",), support=_D2S1_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(BLOCK_SIZE, ORDER), native_encoding=True,
    shape_rule=lambda query: space_to_depth_shape(query, "SPACE_TO_DEPTH1"), array_kernel=space_to_depth_kernel,
    exactness=EXACT,
    notes=("The output is {Batch, Channels * BlockSize^2, Height / BlockSize, Width / BlockSize} (the page's "
           "examples; its OutputTensor sentence is DEPTH_TO_SPACE's). Height and width must be divisible by "
           "BlockSize.", _BLOCK_NOTE, _ORDER_NOTE),
)

# ---------------------------------------------------------------- REVERSE_SUBSEQUENCES

_REVERSE_ROWS = rows(
    ("5_0", {"InputTensor": (DIMS_1_TO_8, ALL11), "SequenceLengthsTensor": (DIMS_1_TO_8, (UINT64, UINT32)),
             "OutputTensor": (DIMS_1_TO_8, ALL11)}),
    ("4_0", {"InputTensor": (DIMS_1_TO_8, TYPES_8), "SequenceLengthsTensor": (DIMS_1_TO_8, (UINT32,)),
             "OutputTensor": (DIMS_1_TO_8, TYPES_8)}),
    ("3_0", {"InputTensor": (DIMS_4_TO_5, TYPES_8), "SequenceLengthsTensor": (DIMS_4_TO_5, (UINT32,)),
             "OutputTensor": (DIMS_4_TO_5, TYPES_8)}),
    ("2_1", {"InputTensor": (DIMS_4, TYPES_8), "SequenceLengthsTensor": (DIMS_4, (UINT32,)),
             "OutputTensor": (DIMS_4, TYPES_8)}),
)
REVERSE_AXIS = IntegerParameter(field="Axis", default_value=0,
                                help="the dimension whose subsequences are reversed (0 to DimensionCount - 1)")


def reverse_subsequences_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    lengths = query.shape("SequenceLengthsTensor")
    axis = check_axis(query.parameters["Axis"], len(shape), "Axis")
    expected = shape[:axis] + (1,) + shape[axis + 1:]
    if len(lengths) != len(shape):
        raise RuleViolation(f"SequenceLengthsTensor has {len(lengths)} dimensions but InputTensor has {len(shape)}; "
                            "they must have the same DimensionCount")
    if lengths != expected:
        raise RuleViolation(f"SequenceLengthsTensor Sizes {describe_sizes(lengths)} must be "
                            f"{describe_sizes(expected)}: InputTensor's Sizes with 1 along Axis {axis}")
    return {"OutputTensor": shape}


def reverse_subsequences_kernel(xp, inputs, outputs, params):
    x, lengths = inputs
    axis = params["Axis"]
    steps = x.shape[axis]
    # Lengths past the axis are clamped to it (the page); compared in their own unsigned type, so that no
    # UINT64 length wraps to a negative number on the way to an index.
    clamped = xp.minimum(lengths, xp.asarray(steps, dtype=lengths.dtype)).astype(xp.int64)
    if bool((clamped == steps).all()):  # every line reversed whole: one strided copy
        return (xp.flip(x, axis=axis).copy(),)
    position = xp.arange(steps, dtype=xp.int64).reshape((1,) * axis + (steps,) + (1,) * (x.ndim - axis - 1))
    source = xp.where(position < clamped, clamped - 1 - position, position)
    return (xp.take_along_axis(x, source, axis=axis),)


REVERSE_SUBSEQUENCES = Operator(
    name="REVERSE_SUBSEQUENCES", enum_value=106, family=FAMILY, prefix="",
    summary="reverses the first SequenceLengths elements of every line along Axis, copying the rest",
    formula="OutputTensor[.., k, ..] = InputTensor[.., L - 1 - k, ..] for k < L, else InputTensor[.., k, ..]; "
            "L = min(SequenceLengthsTensor[.., 0, ..], InputTensor.Sizes[Axis])",
    introduced=_REVERSE_ROWS[-1].level, inputs=("InputTensor", "SequenceLengthsTensor"), support=_REVERSE_ROWS,
    same_data_type=IO, same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(REVERSE_AXIS,),
    native_encoding=True, shape_rule=reverse_subsequences_shape, array_kernel=reverse_subsequences_kernel,
    exactness=EXACT,
    notes=("SequenceLengthsTensor has InputTensor's Sizes with 1 along Axis: one length per line along Axis.",
           "A length past the axis's size is clamped to it (the page); lengths 0 and 1 copy the line unchanged.",
           "Lengths are unsigned (UINT32; UINT64 from 5_0): ONNX's int64 sequence_lens must be converted."),
)

OPERATORS = (JOIN, SPLIT, SLICE, SLICE1, PADDING, PADDING1, TILE, DEPTH_TO_SPACE, DEPTH_TO_SPACE1, SPACE_TO_DEPTH,
             SPACE_TO_DEPTH1, REVERSE_SUBSEQUENCES)
