"""FOLD and UNFOLD (DML_FEATURE_LEVEL_6_4): the sliding windows of a convolution laid out as columns (UNFOLD, im2col;
PyTorch's nn.functional.unfold) and put back, overlapping values summed (FOLD, col2im; ONNX's Col2Im, PyTorch's
nn.functional.fold).

Sources: DirectML's pages (MicrosoftDocs/sdk-api, ns-directml-dml_fold_operator_desc.md of 08/21/2024 and
ns-directml-dml_unfold_operator_desc.md of 08/22/2024, their ms.date): the fields, BlocksPerDimension, the layout
{N, C x prod(WindowSizes), BlockCount} and the examples, which this module's tests reproduce; DirectML.h for the
DESCs (FOLD 176, UNFOLD 177) and the level (`#if DML_TARGET_VERSION >= 0x6400`); ONNX Runtime's DirectML provider
(DmlOperatorCol2Im.cpp), which builds FOLD for ONNX's Col2Im from a 3-D input and an output of 2 + DimensionCount
dimensions.

They live beside the data movement family (one module of it: `dmlcli ops` lists them there) because UNFOLD only
copies elements and writes the padding's zeros, and FOLD is its inverse up to the sum of overlaps; their window
geometry is pooling's and convolution's (Strides, Dilations, StartPadding, EndPadding per spatial dimension), but
they compute no window function. One kernel for both backends (`xp` is numpy or cupy): a loop over the window's
offsets moves strided views, as pooling's kernel does.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import ALL11, FLOAT16, FLOAT32, INT32, INT64, UINT32, UINT64
from ...errors import InputError
from ..table.parameters import IntArrayParameter
from ..table.schema import COMPOSITE, EXACT, Operator, SumBound, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes

FAMILY = "data movement"
IO = ("InputTensor", "OutputTensor")
DIMS_3_TO_8 = tuple(range(3, 9))
MAX_SPATIAL = 6  # DimensionCount: UNFOLD's page [1, 6], FOLD's "<= 6"
_SUMMED_TYPES = (FLOAT32, FLOAT16, INT64, INT32, UINT64, UINT32)

# ---------------------------------------------------------------- support tables (the pages, one row each)

# Both pages give 3 to 8 dimensions and leave the data types empty. dmlcli's reading: UNFOLD copies elements and
# writes zeros, as PADDING1 does, so it takes what DirectML's data movement takes from 5_0 (all eleven types);
# FOLD adds overlapping elements, so it takes what DirectML adds at 5_0 and later (REDUCE's SUM and
# CUMULATIVE_SUMMATION: FLOAT32, FLOAT16, INT64, INT32, UINT64, UINT32).
_UNFOLD_ROWS = rows(("6_4", DIMS_3_TO_8, {name: ALL11 for name in IO}))
_FOLD_ROWS = rows(("6_4", DIMS_3_TO_8, {name: _SUMMED_TYPES for name in IO}))

# ---------------------------------------------------------------- parameters


def _window_array(field: str, default_text: str, help: str) -> IntArrayParameter:
    return IntArrayParameter(field=field, count_field="DimensionCount", default_text=default_text, help=help,
                             max_length=MAX_SPATIAL)


WINDOW_SIZES = _window_array("WindowSizes", "none: required",
                             "the window's size in each spatial dimension (at least 1; DimensionCount values, 1 to 6)")
STRIDES = _window_array("Strides", "1 in every spatial dimension",
                        "the window's step in each spatial dimension (at least 1)")
DILATIONS = _window_array("Dilations", "1 in every spatial dimension",
                          "the step between the elements a window reads in each spatial dimension (at least 1)")
START_PADDING = _window_array("StartPadding", "0 in every spatial dimension",
                              "the implicit zeros before the spatial tensor in each spatial dimension")
END_PADDING = _window_array("EndPadding", "0 in every spatial dimension",
                            "the implicit zeros after the spatial tensor in each spatial dimension")
_WINDOW_PARAMETERS = (WINDOW_SIZES, STRIDES, DILATIONS, START_PADDING, END_PADDING)

# ---------------------------------------------------------------- the geometry


class Windows:
    """A call's windows over the spatial tensor {N, C, S1, ..., Sd} (UNFOLD's input, FOLD's output), checked
    against the pages' rules: RuleViolation for a call they refuse."""

    def __init__(self, params, spatial_shape: tuple[int, ...], tensor: str) -> None:
        if params.get("WindowSizes") is None:
            raise InputError("WindowSizes is required: give one size per spatial dimension (--window-sizes 3,3 for "
                             "two spatial dimensions)")
        count = len(spatial_shape) - 2
        if not 1 <= count <= MAX_SPATIAL:
            raise RuleViolation(f"{tensor} Sizes {describe_sizes(spatial_shape)} are not {{N, C, S1, ..., Sd}} with 1 "
                                f"to {MAX_SPATIAL} spatial dimensions (3 to 8 dimensions in all)")
        for parameter in _WINDOW_PARAMETERS:
            values = params.get(parameter.field)
            if values is not None and len(values) != count:
                raise RuleViolation(f"{parameter.field} has {len(values)} values but {tensor} "
                                    f"{describe_sizes(spatial_shape)} has {count} spatial dimensions (DimensionCount "
                                    "is the spatial tensor's DimensionCount - 2: one value per spatial dimension)")
        self.sizes = tuple(spatial_shape[2:])
        self.window = tuple(params["WindowSizes"])
        self.strides = _or(params.get("Strides"), 1, count)
        self.dilations = _or(params.get("Dilations"), 1, count)
        self.start = _or(params.get("StartPadding"), 0, count)
        self.end = _or(params.get("EndPadding"), 0, count)
        for field, values in (("WindowSizes", self.window), ("Strides", self.strides),
                              ("Dilations", self.dilations)):
            for dim, value in enumerate(values):
                if value < 1:
                    raise RuleViolation(f"{field}[{dim}] is {value}; it must be at least 1")
        self.blocks = tuple(self._blocks(dim, tensor) for dim in range(count))

    def _blocks(self, dim: int, tensor: str) -> int:
        """BlocksPerDimension[d] = (SpatialSize + StartPadding + EndPadding - Dilations * (WindowSizes - 1) - 1)
        / Strides + 1 (the pages), where the window fits the padded size."""
        padded = self.sizes[dim] + self.start[dim] + self.end[dim]
        extent = self.dilations[dim] * (self.window[dim] - 1) + 1
        if extent > padded:
            raise RuleViolation(f"the window spans {extent} elements in spatial dimension {dim} (Dilations[{dim}] * "
                                f"(WindowSizes[{dim}] - 1) + 1) but the padded {tensor} has {padded} "
                                f"({self.sizes[dim]} + StartPadding + EndPadding); no block fits")
        return (padded - extent) // self.strides[dim] + 1

    @property
    def window_count(self) -> int:
        """prod(WindowSizes): the elements of one window, per channel."""
        return math.prod(self.window)

    @property
    def block_count(self) -> int:
        """BlockCount = prod(BlocksPerDimension)."""
        return math.prod(self.blocks)

    def columns_shape(self, batch: int, channels: int) -> tuple[int, int, int]:
        """The column tensor {N, C x prod(WindowSizes), BlockCount}."""
        return (batch, channels * self.window_count, self.block_count)

    def padded_sizes(self) -> tuple[int, ...]:
        return tuple(s + a + b for s, a, b in zip(self.sizes, self.start, self.end))

    def view(self, offset: tuple[int, ...]) -> tuple[slice, ...]:
        """The padded spatial tensor's elements that window element `offset` reads in every block, block-major."""
        return (slice(None), slice(None)) + tuple(
            slice(k * dilation, k * dilation + stride * (blocks - 1) + 1, stride)
            for k, dilation, stride, blocks in zip(offset, self.dilations, self.strides, self.blocks))

    def offsets(self):
        """Each window element's position, in row-major order (the order of the column tensor's rows)."""
        return np.ndindex(*self.window)

    def inside(self) -> tuple[slice, ...]:
        """The spatial tensor's place in its padded form."""
        return (slice(None), slice(None)) + tuple(slice(a, a + s) for a, s in zip(self.start, self.sizes))


def _or(values, fill: int, count: int) -> tuple[int, ...]:
    return (fill,) * count if values is None else tuple(values)


def _columns_of(query: ShapeQuery, name: str, computed: tuple[int, int, int], spatial_rank: int) -> tuple[int, ...]:
    """The column tensor's Sizes: {N, C x prod(WindowSizes), BlockCount}, or those with leading sizes of 1 up to the
    spatial tensor's DimensionCount (the pages' constraint that both tensors have one DimensionCount, which their
    own examples do not follow: dmlcli takes either)."""
    given = query.shapes.get(name) if name in query.shapes else query.given_outputs.get(name)
    if given is None:
        return computed
    given = tuple(given)
    leading, last = given[:-3], given[-3:]
    if len(given) < 3 or any(size != 1 for size in leading) or len(given) not in (3, spatial_rank):
        raise RuleViolation(f"{name} Sizes {describe_sizes(given)} are not {{N, C x prod(WindowSizes), BlockCount}} "
                            f"= {describe_sizes(computed)} (3 dimensions, or {spatial_rank} with leading sizes of 1)")
    if last != computed:
        raise RuleViolation(f"{name} Sizes {describe_sizes(given)} end in {describe_sizes(last)}, not {{N, C x "
                            f"prod(WindowSizes), BlockCount}} = {describe_sizes(computed)}")
    return given


def unfold_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    windows = Windows(query.parameters, shape, "InputTensor")
    computed = windows.columns_shape(shape[0], shape[1])
    return {"OutputTensor": _columns_of(query, "OutputTensor", computed, len(shape))}


def fold_shape(query: ShapeQuery) -> dict:
    given = query.given_outputs.get("OutputTensor")
    if given is None:
        raise RuleViolation("give the OutputTensor's Sizes {N, C, S1, ..., Sd} (--output-shape; API output_shape=): "
                            "DirectML reads them from the output's tensor desc, as many spatial sizes give one "
                            "BlockCount")
    given = tuple(given)
    if len(given) < 3:
        raise RuleViolation(f"OutputTensor Sizes {describe_sizes(given)} need N, C and at least one spatial size")
    windows = Windows(query.parameters, given, "OutputTensor")
    _columns_of(query, "InputTensor", windows.columns_shape(given[0], given[1]), len(given))
    return {"OutputTensor": given}


def fold_tolerance_scale(call) -> int:
    """WebNN's reduceSum figure, N ULP for N elements summed, N the most one output element sums: prod(WindowSizes)
    (each window element adds at most once to a position)."""
    return math.prod(call.parameters["WindowSizes"])


FOLD_SUM_BOUND = SumBound(
    fold_tolerance_scale, "prod(WindowSizes), the most terms an output element sums",
    "FOLD itself run on |InputTensor| in float64 (each position's sum of magnitudes)", absolute=("InputTensor",))


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)


def unfold_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    windows = Windows(params, x.shape, "InputTensor")
    padded = x
    if any(windows.start) or any(windows.end):
        padded = xp.zeros(x.shape[:2] + windows.padded_sizes(), dtype=x.dtype)
        padded[windows.inside()] = x
    columns = xp.empty(x.shape[:2] + (windows.window_count,) + windows.blocks, dtype=x.dtype)
    for row, offset in enumerate(windows.offsets()):
        columns[:, :, row] = padded[windows.view(offset)]
    return (xp.ascontiguousarray(columns.reshape(out.shape)),)


def fold_kernel(xp, inputs, outputs, params):
    (columns,) = inputs
    (out,) = outputs
    windows = Windows(params, tuple(out.shape), "OutputTensor")
    batch, channels = out.shape[:2]
    # Floats add in FLOAT32 (FLOAT16 widened, rounded once at the end); integers in their own type (wrapping).
    work_type = xp.float32 if columns.dtype.kind == "f" else columns.dtype
    blocks = columns.reshape((batch, channels, windows.window_count) + windows.blocks).astype(work_type, copy=False)
    total = xp.zeros((batch, channels) + windows.padded_sizes(), dtype=work_type)
    for row, offset in enumerate(windows.offsets()):  # each position sums its terms in window-element order
        total[windows.view(offset)] += blocks[:, :, row]
    return (xp.ascontiguousarray(total[windows.inside()].astype(out.data_type.numpy_dtype, copy=False)),)


# ---------------------------------------------------------------- entries

_LAYOUT = ("The column tensor is {N, C x prod(WindowSizes), BlockCount}: row c x prod(WindowSizes) + k holds channel "
           "c's window element k (the window's elements in row-major order), column b block b (the blocks in "
           "row-major order over BlocksPerDimension), as the pages' examples and PyTorch's unfold lay them out.")
_BLOCKS = ("BlocksPerDimension[d] = (SpatialSize[d] + StartPadding[d] + EndPadding[d] - Dilations[d] * "
           "(WindowSizes[d] - 1) - 1) / Strides[d] + 1 and BlockCount = prod(BlocksPerDimension) (the pages); a "
           "window wider than the padded size, a WindowSizes, Strides or Dilations value of 0 and arrays whose "
           "length is not the spatial DimensionCount are refused (exit 3).")
_DIMENSION_COUNTS = ("The pages say InputTensor and OutputTensor have the same DimensionCount, and their own examples "
                     "do not ({1, 1, 5, 5} unfolds into {1, 9, 9}); ONNX Runtime's DirectML provider gives FOLD a "
                     "3-D input and a 4-D or 5-D output. dmlcli takes the column tensor with 3 dimensions, or with "
                     "the spatial tensor's DimensionCount through leading sizes of 1.")
_TYPES = ("Data types: the pages' support tables leave them empty; dmlcli takes for UNFOLD what DirectML's data "
          "movement takes from 5_0 (all eleven: it copies elements and writes zeros, as PADDING1 does), for FOLD "
          "what DirectML sums from 5_0 (REDUCE's SUM, CUMULATIVE_SUMMATION: FLOAT32, FLOAT16, INT64, INT32, UINT64, "
          "UINT32).")
_FIELDS = ("WindowSizes is required; Strides and Dilations default to 1, StartPadding and EndPadding to 0 in the API "
           "and on the command line (a DxDispatch desc gives all five with DimensionCount, 1 to 6).")

UNFOLD = Operator(
    name="UNFOLD", enum_value=177, family=FAMILY, prefix="",
    summary="extracts each sliding window of the (zero-padded) spatial dimensions into a column (im2col)",
    formula="OutputTensor[n, c x prod(WindowSizes) + k, b] = padded InputTensor[n, c, block b's start * Strides + "
            "window element k * Dilations]",
    introduced=_UNFOLD_ROWS[-1].level, inputs=("InputTensor",), support=_UNFOLD_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=_WINDOW_PARAMETERS, shape_rule=unfold_shape,
    array_kernel=unfold_kernel, exactness=EXACT,
    notes=("InputTensor is {N, C, S1, ..., Sd} (d = DimensionCount spatial dimensions); the padding is implicit "
           "zeros (0 of the tensor's type, +0.0 for floats).", _LAYOUT, _BLOCKS, _DIMENSION_COUNTS, _FIELDS, _TYPES,
           "Every element is a copy of an input element or a padding zero: bit for bit on both backends (NaN "
           "payloads kept)."),
)

FOLD = Operator(
    name="FOLD", enum_value=176, family=FAMILY, prefix="",
    summary="puts columns of sliding windows back into the spatial tensor, summing overlapping values (col2im)",
    formula="OutputTensor[n, c, p] = sum over the (window element k, block b) that read position p of "
            "InputTensor[n, c x prod(WindowSizes) + k, b]",
    introduced=_FOLD_ROWS[-1].level, inputs=("InputTensor",), support=_FOLD_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=_WINDOW_PARAMETERS, shape_rule=fold_shape,
    array_kernel=fold_kernel, exactness=COMPOSITE,
    tolerance=Tolerance("ulp", 1, 1, "WebNN's reduceSum tolerance (web-platform-tests webnn/conformance_tests/"
                                     "reduce_sum.https.any.js), N ULP for N elements summed, N = prod(WindowSizes), "
                                     "the most terms one output element sums"),
    tolerance_scale=fold_tolerance_scale, sum_bound=FOLD_SUM_BOUND,
    notes=("OutputTensor is {N, C, S1, ..., Sd}: its Sizes come from its tensor desc (--output-shape, API "
           "output_shape=), which DirectML reads; InputTensor must then be {N, C x prod(WindowSizes), BlockCount}. "
           "Values that fall in the padding are dropped.", _LAYOUT, _BLOCKS, _DIMENSION_COUNTS, _FIELDS, _TYPES,
           "The sum (the page: 'summing the overlapping values'; the order page silent): each output element starts "
           "at +0 and adds its terms in window-element order (row-major over WindowSizes), FLOAT32 for FLOAT32 and "
           "FLOAT16 (rounded once at the end), integers in their own type, wrapping; a position no window reads is "
           "0. FOLD(UNFOLD(x)) is x times the number of windows that read each position."),
)

OPERATORS = (FOLD, UNFOLD)
