"""The convolution family: CONVOLUTION (forward and backward direction, convolution and cross-correlation mode,
1 to 3 spatial dimensions, groups, dilations, paddings, an optional bias and a fused activation),
CONVOLUTION_INTEGER and QUANTIZED_LINEAR_CONVOLUTION.

Sources: DirectML's pages (MicrosoftDocs/sdk-api, ns-directml-dml_convolution_operator_desc.md,
ns-directml-dml_convolution_integer_operator_desc.md, ns-directml-dml_quantized_linear_convolution_operator_desc.md,
their newest stored versions): fields, tensor constraints, support tables, the Mode/Direction table; DirectML.h
(microsoft/DirectX-Headers include/directx/DirectML.h) for DML_CONVOLUTION_MODE (CONVOLUTION 0, CROSS_CORRELATION
1), DML_CONVOLUTION_DIRECTION (FORWARD 0, BACKWARD 1) and the DML_OPERATOR_TYPE values (CONVOLUTION 53,
CONVOLUTION_INTEGER 119, QUANTIZED_LINEAR_CONVOLUTION 120, counted from DML_OPERATOR_INVALID = 0 without the
alias DML_OPERATOR_SCATTER).

One kernel for both backends (`xp` is numpy or cupy): per tile of output rows, a column buffer (the input's
window under each filter tap, copied by plain slicing, no sliding_window_view needed) and one batched matrix
product (xp.matmul: BLAS on the CPU, cuBLAS on the GPU). Tiles are chosen so that no column buffer exceeds
COLUMN_BUDGET_BYTES (32 MiB; GPU_COLUMN_BUDGET_BYTES, 1 GiB, on the GPU), whatever the sizes; the transposed
convolution likewise computes every tap's contribution for a tile of input rows with one GEMM and adds them into
place.

Numbers. FLOAT32 and FLOAT16 accumulate in FLOAT32 (FLOAT16 inputs are widened exactly), the bias is added in
FLOAT32 and the sum is rounded once to the output type; checked within WebNN's conv2d tolerance, which grows
with the accumulation length. The integer operators accumulate in float64, which holds every partial sum
exactly (each product of zero-point-shifted 8-bit values is at most 65025 in magnitude, so sums of up to 2^37
products are exact), then wrap to INT32 as DirectML's INT32 accumulator would: their outputs are exact and
bit-identical on both backends.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...data_types import FLOAT32, FLOATS, INT8, INT32, UINT8
from ..elementwise.activation import FUSABLE, fused_relu
from ..numerics.padding import constant_padded
from ..table.parameters import EnumParameter, FusedActivationParameter, IntArrayParameter, IntegerParameter
from ..table.schema import APPROXIMATE, COMPOSITE, EXACT, ActivationApplied, Operator, SumBound, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes, onnx_layout_hint
from ..numerics import cudnn_graphs, products
from . import cudnn, depthwise_gpu  # the GPU kernel's paths (text and Python only: CuPy is the caller's)

FAMILY = "convolution"
I8_U8 = (INT8, UINT8)
DIMS_3_TO_5 = (3, 4, 5)
DIMS_4_TO_5 = (4, 5)
DIMS_3_TO_4 = (3, 4)
DIMS_1_TO_4 = (1, 2, 3, 4)
DIMS_4 = (4,)

# ---------------------------------------------------------------- parameters

MODE = EnumParameter(
    field="Mode", enum_prefix="DML_CONVOLUTION_MODE_", values=(("CONVOLUTION", 0), ("CROSS_CORRELATION", 1)),
    default_value="CROSS_CORRELATION",
    help="CROSS_CORRELATION (the filter as it is, what ML models mean by convolution) or CONVOLUTION (the filter "
         "flipped along each spatial dimension)")
DIRECTION = EnumParameter(
    field="Direction", enum_prefix="DML_CONVOLUTION_DIRECTION_", values=(("FORWARD", 0), ("BACKWARD", 1)),
    default_value="FORWARD",
    help="FORWARD (convolution) or BACKWARD (transposed convolution: the forward one's adjoint, ONNX's "
         "ConvTranspose)")


def _array(field: str, default_text: str, help_text: str) -> IntArrayParameter:
    # Every array shares DimensionCount, as in DirectML's desc (one value per spatial dimension).
    return IntArrayParameter(field=field, count_field="DimensionCount", default_text=default_text, help=help_text)


STRIDES = _array("Strides", "1 in every spatial dimension",
                 "the filter's step over the input in each spatial dimension (at least 1)")
DILATIONS = _array("Dilations", "1 in every spatial dimension",
                   "the step between the filter's elements in each spatial dimension (at least 1)")
START_PADDING = _array("StartPadding", "0 in every spatial dimension",
                       "zeros added before each spatial dimension of the input (BACKWARD: cropped from the start of "
                       "the output)")
END_PADDING = _array("EndPadding", "0 in every spatial dimension",
                     "zeros added after each spatial dimension of the input (BACKWARD: cropped from the end of the "
                     "output)")
OUTPUT_PADDING = _array("OutputPadding", "0 in every spatial dimension",
                        "elements added at the end of each spatial dimension of the output (zeros before the bias)")
GROUP_COUNT = IntegerParameter(field="GroupCount", default_value=1, minimum=0,
                               help="the number of groups the channels are split into (1: an ordinary convolution; "
                                    "the input's channel count: depth-wise)")
FUSED_ACTIVATION = FusedActivationParameter(
    field="FusedActivation",
    help="an activation applied to the convolution's result, bias included (--fused-activation NAME), with its "
         "FLOAT fields as --fused-alpha, --fused-beta, ... (each the activation's own default when left out)",
    activations=FUSABLE,
)
SPATIAL = (STRIDES, DILATIONS, START_PADDING, END_PADDING)

# ---------------------------------------------------------------- support tables (the pages, newest row first)

_CONV_IO = ("InputTensor", "FilterTensor", "BiasTensor", "OutputTensor")
_CONV_ROWS = rows(
    ("4_0", DIMS_3_TO_5, {name: FLOATS for name in _CONV_IO}),
    ("1_0", DIMS_4_TO_5, {name: FLOATS for name in _CONV_IO}),
)
_CI_ROWS = rows(
    ("4_0", {"InputTensor": (DIMS_3_TO_4, I8_U8), "InputZeroPointTensor": (DIMS_1_TO_4, I8_U8),
             "FilterTensor": (DIMS_3_TO_4, I8_U8), "FilterZeroPointTensor": (DIMS_1_TO_4, I8_U8),
             "OutputTensor": (DIMS_3_TO_4, (INT32,))}),
    ("2_1", {"InputTensor": (DIMS_4, I8_U8), "InputZeroPointTensor": (DIMS_4, I8_U8),
             "FilterTensor": (DIMS_4, I8_U8), "FilterZeroPointTensor": (DIMS_4, I8_U8),
             "OutputTensor": (DIMS_4, (INT32,))}),
)


def _qlc_row(level_name, dims, scale_dims, filter_scale_dims):
    return (level_name, {
        "InputTensor": (dims, I8_U8), "InputScaleTensor": (scale_dims, (FLOAT32,)),
        "InputZeroPointTensor": (scale_dims, I8_U8), "FilterTensor": (dims, I8_U8),
        "FilterScaleTensor": (filter_scale_dims, (FLOAT32,)), "FilterZeroPointTensor": (scale_dims, I8_U8),
        "BiasTensor": (dims, (INT32,)), "OutputScaleTensor": (scale_dims, (FLOAT32,)),
        "OutputZeroPointTensor": (scale_dims, I8_U8), "OutputTensor": (dims, I8_U8)})


_QLC_ROWS = rows(
    _qlc_row("5_2", DIMS_3_TO_4, DIMS_1_TO_4, DIMS_1_TO_4),
    _qlc_row("4_0", DIMS_3_TO_4, DIMS_1_TO_4, DIMS_3_TO_4),  # the page's 4_0 row: FilterScaleTensor 3 to 4
    _qlc_row("2_1", DIMS_4, DIMS_4, DIMS_4),
)

# ---------------------------------------------------------------- the shape rules


def _spatial(values, count: int, field: str, fill: int) -> tuple[int, ...]:
    """One value per spatial dimension (DimensionCount = the tensors' rank - 2); left out: `fill` everywhere."""
    if values is None:
        return (fill,) * count
    if len(values) != count:
        raise RuleViolation(f"{field} has {len(values)} values but the tensors have {count} spatial dimensions "
                            f"(DimensionCount must be InputTensor's DimensionCount - 2 = {count})")
    return tuple(values)


def geometry(parameters, rank: int, with_output_padding: bool = True) -> dict:
    """The typed array fields resolved for `rank`-dimensional tensors (what the rule and the kernel use)."""
    count = rank - 2
    found = {
        "Strides": _spatial(parameters.get("Strides"), count, "Strides", 1),
        "Dilations": _spatial(parameters.get("Dilations"), count, "Dilations", 1),
        "StartPadding": _spatial(parameters.get("StartPadding"), count, "StartPadding", 0),
        "EndPadding": _spatial(parameters.get("EndPadding"), count, "EndPadding", 0),
        "OutputPadding": (_spatial(parameters.get("OutputPadding"), count, "OutputPadding", 0)
                          if with_output_padding else (0,) * count),
    }
    for field in ("Strides", "Dilations"):
        for dim, value in enumerate(found[field]):
            if value == 0:
                raise RuleViolation(f"{field}[{dim}] is 0; {field} must be at least 1 in every spatial dimension")
    return found


def _check_ranks(query: ShapeQuery, names: tuple[str, ...]) -> int:
    rank = len(query.shape(names[0]))
    for name in names[1:]:
        if name in query.shapes and len(query.shape(name)) != rank:
            raise RuleViolation(f"{name} has {len(query.shape(name))} dimensions but {names[0]} has {rank}; "
                                f"{', '.join(names)} must have the same DimensionCount")
    return rank


def _group_count(query: ShapeQuery) -> int:
    groups = query.parameters.get("GroupCount", 1)
    if groups == 0:
        raise RuleViolation("GroupCount is 0; it must be at least 1")
    return groups


def _channels(x, w, groups: int, backward: bool) -> int:
    """The output's channel count, after checking the channel rules of the direction."""
    if backward:
        if x[1] != w[0]:
            raise RuleViolation(f"InputTensor has {x[1]} channels (Sizes[1]) but FilterTensor Sizes[0] is {w[0]}; "
                                "the BACKWARD direction's filter is {InputChannelCount, OutputChannelCount / "
                                "GroupCount, spatial...}")
        if x[1] % groups:
            raise RuleViolation(f"InputTensor's {x[1]} channels do not divide into GroupCount {groups} groups")
        return w[1] * groups
    if x[1] != w[1] * groups:
        raise RuleViolation(f"InputTensor has {x[1]} channels but FilterTensor Sizes[1] {w[1]} x GroupCount {groups} "
                            f"= {w[1] * groups}; the filter is {{OutputChannelCount, InputChannelCount / GroupCount, "
                            "spatial...}")
    if w[0] % groups:
        raise RuleViolation(f"FilterTensor's {w[0]} output channels (Sizes[0]) do not divide into GroupCount "
                            f"{groups} groups")
    return w[0]


def spatial_sizes(x, w, geo: dict, backward: bool) -> tuple[int, ...]:
    """The output's spatial Sizes (output padding included); RuleViolation where one would be below 1."""
    sizes = []
    for dim, (size, taps) in enumerate(zip(x[2:], w[2:])):
        stride, dilation = geo["Strides"][dim], geo["Dilations"][dim]
        start, end, extra = geo["StartPadding"][dim], geo["EndPadding"][dim], geo["OutputPadding"][dim]
        window = (taps - 1) * dilation + 1
        if backward:
            length = (size - 1) * stride + window - start - end + extra
            if length < 1:
                raise RuleViolation(f"spatial dimension {dim}: (InputTensor size {size} - 1) x stride {stride} + "
                                    f"dilated filter {window} - StartPadding {start} - EndPadding {end} + "
                                    f"OutputPadding {extra} = {length}; the output needs at least 1 element")
        else:
            padded = size + start + end
            if window > padded:
                raise RuleViolation(f"spatial dimension {dim}: the dilated filter spans {window} elements but the "
                                    f"padded input has {padded} (InputTensor {size} + StartPadding {start} + "
                                    f"EndPadding {end}); the filter must fit in the padded input")
            length = (padded - window) // stride + 1 + extra
        sizes.append(length)
    return tuple(sizes)


def _per_channel(query: ShapeQuery, name: str, channels: int, what: str, allow_channels: bool = True) -> None:
    """A scale or zero point: one element, or (where allowed) one per output channel along axis 1."""
    if name not in query.shapes:
        return
    shape = query.shape(name)
    count = math.prod(shape)
    if count == 1:
        return
    axis = 1 if len(shape) >= 2 else 0
    if allow_channels and shape[axis] == channels == count:
        return
    expected = "Sizes of all 1s" + (f", or {channels} (the output channels) along axis {axis} and 1s elsewhere"
                                    if allow_channels else "")
    raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} is not {what}: expected {expected}")


def _tie(query: ShapeQuery, a: str, b: str) -> None:
    if a in query.data_types and b in query.data_types and query.data_types[a] != query.data_types[b]:
        raise RuleViolation(f"{a} is {query.data_types[a].name} but {b} is {query.data_types[b].name}; they must "
                            "have the same DataType")


def _bias(query: ShapeQuery, channels: int, rank: int) -> None:
    if "BiasTensor" not in query.shapes:
        return
    shape = query.shape("BiasTensor")
    expected = (1, channels) + (1,) * (rank - 2)
    if tuple(shape) != expected:
        raise RuleViolation(f"BiasTensor Sizes {describe_sizes(shape)} must be {describe_sizes(expected)} "
                            "({1, OutputChannelCount, 1, ...}, the InputTensor's DimensionCount)"
                            f"{onnx_layout_hint(shape, expected)}")


def convolution_shape(query: ShapeQuery) -> dict:
    rank = _check_ranks(query, ("InputTensor", "FilterTensor"))  # BiasTensor's Sizes, rank included: _bias
    x, w = query.shape("InputTensor"), query.shape("FilterTensor")
    backward = query.parameters.get("Direction") == "BACKWARD"
    groups = _group_count(query)
    geo = geometry(query.parameters, rank)
    channels = _channels(x, w, groups, backward)
    _bias(query, channels, rank)
    return {"OutputTensor": (x[0], channels) + spatial_sizes(x, w, geo, backward)}


def convolution_integer_shape(query: ShapeQuery) -> dict:
    rank = _check_ranks(query, ("InputTensor", "FilterTensor"))
    if "InputZeroPointTensor" in query.shapes:
        _check_ranks(query, ("InputZeroPointTensor", "FilterZeroPointTensor"))
    _tie(query, "InputTensor", "InputZeroPointTensor")
    _tie(query, "FilterTensor", "FilterZeroPointTensor")
    x, w = query.shape("InputTensor"), query.shape("FilterTensor")
    channels = _channels(x, w, _group_count(query), backward=False)
    _per_channel(query, "InputZeroPointTensor", channels, "a per-tensor zero point", allow_channels=False)
    _per_channel(query, "FilterZeroPointTensor", channels, "a per-tensor or per-channel zero point")
    geo = geometry(query.parameters, rank, with_output_padding=False)
    return {"OutputTensor": (x[0], channels) + spatial_sizes(x, w, geo, backward=False)}


def quantized_linear_convolution_shape(query: ShapeQuery) -> dict:
    rank = _check_ranks(query, ("InputTensor", "FilterTensor"))  # BiasTensor's Sizes, rank included: _bias
    _tie(query, "InputTensor", "InputZeroPointTensor")
    _tie(query, "FilterTensor", "FilterZeroPointTensor")
    x, w = query.shape("InputTensor"), query.shape("FilterTensor")
    channels = _channels(x, w, _group_count(query), backward=False)
    for name in ("InputScaleTensor", "InputZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"):
        _per_channel(query, name, channels, "a per-tensor value", allow_channels=False)
    for name in ("FilterScaleTensor", "FilterZeroPointTensor"):
        _per_channel(query, name, channels, "a per-tensor or per-channel value")
    _bias(query, channels, rank)
    geo = geometry(query.parameters, rank, with_output_padding=False)
    return {"OutputTensor": (x[0], channels) + spatial_sizes(x, w, geo, backward=False)}


# ---------------------------------------------------------------- the kernel (xp is numpy or cupy)


# The largest column buffer (the input's windows for a tile of output rows, one copy per filter tap) a call
# builds: big enough for BLAS's GEMMs to run at full speed, small enough to bound the memory of any call.
COLUMN_BUDGET_BYTES = 32 << 20
# On the GPU the same buffer may be larger: each tile costs a dozen kernel launches and cuBLAS wants long GEMMs, and
# device memory is tens of GiB (a ResNet-50 3x3 layer, N=32, C=256, 56x56, needs 0.9 GiB in one tile).
GPU_COLUMN_BUDGET_BYTES = 1 << 30


def _offsets(filter_sizes) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(taps) for taps in filter_sizes)))


def _window(offset, dilations, strides, lengths, first: int = 0) -> tuple[slice, ...]:
    """The elements one filter tap meets for outputs first.. first + lengths[0] - 1 of the first spatial
    dimension (all of the others): from (output x stride + offset x dilation), every stride."""
    found = []
    for dim, (o, d, s, n) in enumerate(zip(offset, dilations, strides, lengths)):
        begin = o * d + (first * s if dim == 0 else 0)
        found.append(slice(begin, begin + s * (n - 1) + 1, s))
    return tuple(found)


def _tiles(batch: int, rows: int, bytes_per_row: int, budget: int | None = None):
    """(batch slice, first row, row count) blocks whose column buffer stays within `budget` bytes (by default
    COLUMN_BUDGET_BYTES, read when called)."""
    budget = COLUMN_BUDGET_BYTES if budget is None else budget
    per_item = bytes_per_row * rows
    if per_item <= budget:
        step = max(1, budget // max(per_item, 1))
        for first in range(0, batch, step):
            yield slice(first, min(batch, first + step)), 0, rows
        return
    step = max(1, budget // max(bytes_per_row, 1))
    for item in range(batch):
        for first in range(0, rows, step):
            yield slice(item, item + 1), first, min(step, rows - first)


def _budget(xp) -> int:
    return COLUMN_BUDGET_BYTES if xp is np else GPU_COLUMN_BUDGET_BYTES


def _grouped_matmul(xp, filters, columns):
    """(g, m, k) @ (n, g, k, p) -> (n, g, m, p). NumPy's stacked matmul with a broadcast operand does not call
    BLAS (40x slower than a loop of 2-D products, measured), so NumPy gets the loop; CuPy's batched cuBLAS call
    takes the stack as it is."""
    if xp is not np:
        return products.matmul(xp, filters, columns)
    count, groups = columns.shape[:2]
    result = np.empty((count, groups, filters.shape[1], columns.shape[3]), dtype=np.result_type(filters, columns))
    for item, group in itertools.product(range(count), range(groups)):
        np.matmul(filters[group], columns[item, group], out=result[item, group])
    return result


def _is_pointwise(w, geo: dict) -> bool:
    """A 1 x 1 filter with strides of 1 over an unpadded input: each output element reads the input element at its
    own position, so the column buffer is the input itself."""
    return all(k == 1 for k in w.shape[2:]) and all(s == 1 for s in geo["Strides"]) and \
        not any(geo["StartPadding"]) and not any(geo["EndPadding"])


def _forward(xp, x, w, groups: int, geo: dict, lengths) -> object:
    """Cross-correlation of x (N, C, *S) with w (M, C/g, *K), input padded by Start/EndPadding: (N, M, *lengths).

    Per tile of output rows: the column buffer (the input's window under each filter tap, copied by plain
    slicing) and one batched GEMM (g, M/g, C/g x taps) @ (n, g, C/g x taps, points) through xp.matmul."""
    batch, channels = x.shape[:2]
    outputs = w.shape[0]
    pad = [(0, 0), (0, 0)] + list(zip(geo["StartPadding"], geo["EndPadding"]))
    padded = constant_padded(xp, x, pad)
    per_group_in, per_group_out = channels // groups, outputs // groups
    taps = _offsets(w.shape[2:])
    filters = xp.ascontiguousarray(w.reshape(groups, per_group_out, per_group_in * len(taps)))
    if _is_pointwise(w, geo):
        # A 1 x 1 filter read at every element: the input is already the column buffer (a reshape, no copy).
        columns = xp.ascontiguousarray(x).reshape(batch, groups, per_group_in, math.prod(lengths))
        return _grouped_matmul(xp, filters, columns).reshape((batch, outputs) + tuple(lengths))
    rest = tuple(lengths[1:])
    row_bytes = channels * len(taps) * math.prod(rest) * x.dtype.itemsize
    tiles = list(_tiles(batch, lengths[0], row_bytes, _budget(xp)))
    result = None if len(tiles) == 1 else xp.empty((batch, outputs) + tuple(lengths), dtype=x.dtype)
    for items, first, tile_rows in tiles:
        count = len(range(batch)[items])
        columns = xp.empty((count, channels, len(taps), tile_rows) + rest, dtype=x.dtype)
        for index, offset in enumerate(taps):
            window = _window(offset, geo["Dilations"], geo["Strides"], (tile_rows,) + rest, first)
            columns[:, :, index] = padded[(items, slice(None)) + window]
        points = tile_rows * math.prod(rest)
        product = _grouped_matmul(xp, filters, columns.reshape(count, groups, per_group_in * len(taps), points))
        if result is None:  # one tile is the whole result: no copy into a result buffer
            return product.reshape((count, outputs, tile_rows) + rest)
        result[items, :, first:first + tile_rows] = product.reshape((count, outputs, tile_rows) + rest)
    return result


def _backward(xp, x, w, groups: int, geo: dict, lengths) -> object:
    """The forward cross-correlation's adjoint (transposed convolution): x (N, C, *S), w (C, M/g, *K).

    Per tile of input rows: one batched GEMM (g, M/g x taps, C/g) @ (n, g, C/g, points) gives every tap's
    contribution, which is added at input x stride + tap x dilation of the uncropped result."""
    batch, channels = x.shape[:2]
    per_group_in, per_group_out = channels // groups, w.shape[1]
    sizes = tuple(x.shape[2:])
    strides, dilations, start = geo["Strides"], geo["Dilations"], geo["StartPadding"]
    taps = _offsets(w.shape[2:])
    # The uncropped result: every tap of every input element, at i x stride + k x dilation; at least as long
    # as the cropped output reaches (OutputPadding may reach past it: those elements stay 0).
    full = tuple(max((n - 1) * s + (k - 1) * d + 1, b + length)
                 for n, s, k, d, b, length in zip(sizes, strides, w.shape[2:], dilations, start, lengths))
    filters = w.reshape(groups, per_group_in, per_group_out, len(taps))
    filters = xp.ascontiguousarray(xp.moveaxis(filters, 1, 3)).reshape(groups, per_group_out * len(taps),
                                                                        per_group_in)
    result = xp.zeros((batch, groups, per_group_out) + full, dtype=x.dtype)
    rest = sizes[1:]
    row_bytes = groups * per_group_out * len(taps) * math.prod(rest) * x.dtype.itemsize
    for items, first, tile_rows in _tiles(batch, sizes[0], row_bytes, _budget(xp)):
        count = len(range(batch)[items])
        block = xp.ascontiguousarray(x[items, :, first:first + tile_rows])
        points = tile_rows * math.prod(rest)
        product = _grouped_matmul(xp, filters, block.reshape(count, groups, per_group_in, points))
        product = product.reshape((count, groups, per_group_out, len(taps), tile_rows) + rest)
        for index, offset in enumerate(taps):
            window = _window(offset, dilations, strides, (tile_rows,) + rest, first)
            result[(items, slice(None), slice(None)) + window] += product[:, :, :, index]
    crop = tuple(slice(b, b + length) for b, length in zip(start, lengths))
    return result[(slice(None),) * 3 + crop].reshape((batch, groups * per_group_out) + tuple(lengths))


def convolve(xp, x, w, groups: int, geo: dict, out_spatial, *, backward: bool = False):
    """The convolution of x and w (already flipped for CONVOLUTION mode) in their own dtype, OutputPadding included
    (zeros where no filter tap reaches)."""
    if backward:
        return _backward(xp, x, w, groups, geo, out_spatial)
    core = tuple(n - p for n, p in zip(out_spatial, geo["OutputPadding"]))
    result = _forward(xp, x, w, groups, geo, core)
    if core == tuple(out_spatial):
        return result
    padded = xp.zeros(result.shape[:2] + tuple(out_spatial), dtype=result.dtype)
    padded[(slice(None), slice(None)) + tuple(slice(0, n) for n in core)] = result
    return padded


def _flipped(w):
    return w[(slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)]


def _float_result(xp, inputs, outputs, params):
    x, w, bias = inputs
    out = outputs[0]
    rank = x.ndim
    geo = geometry(params, rank)
    # FLOAT32 and FLOAT16 accumulate in FLOAT32; float64 (the sum bound's magnitude run) in float64.
    accumulation = np.float64 if x.dtype == np.float64 else np.float32
    w = w.astype(accumulation, copy=False)  # FLOAT16 widened exactly; FLOAT32 read as it is
    if params.get("Mode") == "CONVOLUTION":
        w = _flipped(w)
    result = convolve(xp, x.astype(accumulation, copy=False), w, params.get("GroupCount", 1), geo, out.shape[2:],
                      backward=params.get("Direction") == "BACKWARD")
    if bias is not None:
        result += bias.astype(accumulation).reshape((1, -1) + (1,) * (rank - 2))
    return result.astype(out.data_type.numpy_dtype, copy=False)  # FLOAT16: the one rounding


def convolution_kernel(xp, inputs, outputs, params):
    """The convolution on NumPy or CuPy; a fused activation runs after it, in the backend (Operator.fused_activation),
    as that activation's own kernel on the result rounded to the output type."""
    return (xp.ascontiguousarray(_float_result(xp, inputs, outputs, params)),)


# What numerics/cudnn_graphs.LAST_CHOICE records for a call that dmlcli's depthwise kernel (depthwise_gpu.py) ran.
DEPTHWISE_CHOICE = "dmlcli: depthwise kernel (faster than cuDNN's plans)"


def convolution_gpu_kernel(xp, inputs, outputs, params):
    """CONVOLUTION on the GPU: a depthwise call through dmlcli's own kernel (convolution/depthwise_gpu.py), faster
    than cuDNN's plans for it; others through cuDNN (convolution/cudnn.py) where its frontend is installed and builds a
    plan for the call, faster than the column buffer and cuBLAS; else the kernel above. Which one ran is recorded
    (numerics/cudnn_graphs.LAST_CHOICE)."""
    x, w, bias = inputs
    geo = geometry(params, x.ndim)
    relu = fused_relu(params)
    if depthwise_gpu.applies(x, w, bias, params, geo, tuple(outputs[0].shape)):
        result = depthwise_gpu.convolve(xp, x, w, bias, tuple(outputs[0].shape), params, geo, relu, _flipped)
        cudnn_graphs.record(FAMILY, DEPTHWISE_CHOICE)
        return ActivationApplied((result,)) if relu else (result,)
    try:
        found = cudnn.convolve(xp, x, w, bias, tuple(outputs[0].shape), params, geo, relu, _flipped)
    except cudnn_graphs.Unsupported as why:
        cudnn_graphs.record(FAMILY, f"dmlcli: {why}")
        return convolution_kernel(xp, inputs, outputs, params)
    cudnn_graphs.record(FAMILY, "cudnn")
    return found


def _zero_point(tensor, rank: int):
    """A zero point as float64 that broadcasts against a filter or an input: per tensor, one element; per output
    channel, one value per filter row (FilterTensor's axis 0)."""
    values = tensor.astype(np.float64).reshape(-1)
    return values[0] if values.size == 1 else values.reshape((-1,) + (1,) * (rank - 1))


def _integer_accumulate(xp, x, xzp, w, wzp, groups: int, geo: dict, out_spatial):
    """sum (x - xzp) (w - wzp) over each window, exactly (float64 holds every partial sum), as float64."""
    rank = x.ndim
    shifted_x = x.astype(np.float64)
    if xzp is not None:
        shifted_x -= _zero_point(xzp, rank)
    shifted_w = w.astype(np.float64)
    if wzp is not None:
        shifted_w -= _zero_point(wzp, rank)
    return convolve(xp, shifted_x, shifted_w, groups, geo, out_spatial)


def _wrap_int32(xp, exact):
    """An exact integer-valued float64 array as INT32, modulo 2^32 (DirectML's INT32 accumulator)."""
    return exact.astype(np.int64).astype(np.int32)


def convolution_integer_kernel(xp, inputs, outputs, params):
    x, xzp, w, wzp = inputs
    geo = geometry(params, x.ndim, with_output_padding=False)
    exact = _integer_accumulate(xp, x, xzp, w, wzp, params.get("GroupCount", 1), geo, outputs[0].shape[2:])
    return (xp.ascontiguousarray(_wrap_int32(xp, exact)),)


def quantized_linear_convolution_kernel(xp, inputs, outputs, params):
    x, x_scale, xzp, w, w_scale, wzp, bias, y_scale, yzp = inputs
    out = outputs[0]
    rank = x.ndim
    geo = geometry(params, rank, with_output_padding=False)
    exact = _integer_accumulate(xp, x, xzp, w, wzp, params.get("GroupCount", 1), geo, out.shape[2:])
    if bias is not None:
        exact += bias.astype(np.float64).reshape((1, -1) + (1,) * (rank - 2))
    accumulator = _wrap_int32(xp, exact)
    channel_shape = (1, -1) + (1,) * (rank - 2)
    # Fixed float32 steps, each one IEEE rounding on both backends: float32(acc) x (x_scale x w_scale) / y_scale.
    scale = x_scale.astype(np.float32).reshape(-1)[0] * w_scale.astype(np.float32).reshape(-1)
    scale = scale.reshape(channel_shape) if scale.size > 1 else scale[0]
    value = (accumulator.astype(np.float32) * scale) / y_scale.astype(np.float32).reshape(-1)[0]
    info = np.iinfo(out.data_type.numpy_dtype)
    zero = 0.0 if yzp is None else yzp.astype(np.float32).reshape(-1)[0]
    rounded = xp.rint(value) + zero  # halves to even, as QUANTIZE_LINEAR
    rounded = xp.where(xp.isnan(rounded), np.float32(info.min), rounded)
    clamped = xp.clip(rounded, np.float32(info.min), np.float32(info.max))
    return (xp.ascontiguousarray(clamped.astype(out.data_type.numpy_dtype)),)


# ---------------------------------------------------------------- what a call holds (issue 34)


def _scratch(item: int):
    """The scratch of the convolution kernels, whose work is `item` bytes an element (FLOAT32; FLOAT64 for the
    integer ones): the widened input, its padded copy (forward; a large padding makes it far larger than the
    input), the uncropped result (backward), a column buffer (COLUMN_BUDGET_BYTES, or one row where a row is larger),
    and two of the output's size (a tile's product, the result before its cast or its OutputPadding)."""
    def scratch(call) -> int:
        x = call.tensors["InputTensor"].shape
        w = call.tensors["FilterTensor"].shape
        out = call.output.shape
        geo = geometry(call.parameters, len(x), with_output_padding=False)
        backward = call.parameters.get("Direction") == "BACKWARD"
        if backward:
            held = math.prod(out[:2]) * math.prod(
                max((n - 1) * s + (k - 1) * d + 1, b + length) for n, s, k, d, b, length in
                zip(x[2:], geo["Strides"], w[2:], geo["Dilations"], geo["StartPadding"], out[2:]))
        else:
            held = math.prod(x[:2]) * math.prod(n + b + e for n, b, e in zip(x[2:], geo["StartPadding"],
                                                                              geo["EndPadding"]))
        row = x[1] * math.prod(w[2:]) * math.prod(out[3:]) * item
        columns = max(min(COLUMN_BUDGET_BYTES, row * out[2] * x[0]), row)
        return item * (math.prod(x) + held + 2 * math.prod(out)) + columns
    return scratch


# ---------------------------------------------------------------- tolerance


def convolution_tolerance_scale(call) -> int:
    """WebNN's conv2d/convTranspose2d figure: 2 ULP per product summed into one output element, i.e. the input
    channels per group times the filter's spatial elements (the Tolerance's 2 is the per-product figure)."""
    x = call.tensors["InputTensor"].shape
    w = call.tensors["FilterTensor"].shape
    groups = call.parameters.get("GroupCount", 1) or 1
    return max(1, (x[1] // groups) * math.prod(w[2:]))


def convolution_terms(call) -> int:
    """K of CONVOLUTION's sum bound: the products summed into an output element at most (the input channels per
    group times the filter's spatial elements), + 1 with BiasTensor."""
    with_bias = "BiasTensor" not in call.absent and "BiasTensor" in call.tensors
    return convolution_tolerance_scale(call) + with_bias


CONVOLUTION_SUM_BOUND = SumBound(
    convolution_terms, "the input channels per group times the filter's spatial elements (the products summed into "
                       "an output element), + 1 with BiasTensor",
    "CONVOLUTION itself run on |InputTensor|, |FilterTensor| and |BiasTensor| with the call's parameters (no "
    "activation) in float64", absolute=("InputTensor", "FilterTensor", "BiasTensor"))

_WEBNN_CONV = ("WebNN's conv2d and convTranspose2d tolerance (web-platform-tests webnn/resources/utils.js, "
               "getConv2dPrecisionTolerance): filterWidth x filterHeight x (inputChannels / groups) x 2 ULP, for "
               "FLOAT32 and FLOAT16; dmlcli takes every spatial dimension of the filter (1-D and 3-D too)")

# ---------------------------------------------------------------- entries

_GEOMETRY_NOTE = (
    "Output Sizes, per spatial dimension (DimensionCount = InputTensor's DimensionCount - 2; every array field has "
    "one value per spatial dimension): FORWARD: (size + StartPadding + EndPadding - ((k - 1) x Dilation + 1)) / "
    "Stride + 1, rounded down, + OutputPadding; BACKWARD: (size - 1) x Stride + (k - 1) x Dilation + 1 - "
    "StartPadding - EndPadding + OutputPadding. The page prints no formula: these are DirectMLX's (forward) and "
    "ONNX ConvTranspose's (backward, the operator that ONNX Runtime's DirectML provider maps onto BACKWARD).")

CONVOLUTION = Operator(
    name="CONVOLUTION", enum_value=53, family=FAMILY, prefix="",
    summary="convolves the input with a filter (forward or transposed, 1-D to 3-D, groups, dilations, paddings), "
            "adds an optional bias and applies an optional fused activation",
    formula="FORWARD: Output[n, m, o] = activation(Bias[m] + sum over c in m's group and taps k of "
            "Input[n, c, o x Strides + k x Dilations - StartPadding] x Filter[m, c, k]); BACKWARD: its adjoint",
    introduced=_CONV_ROWS[-1].level, inputs=("InputTensor", "FilterTensor", "BiasTensor"), support=_CONV_ROWS,
    same_data_type=_CONV_IO, same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(MODE, DIRECTION, STRIDES, DILATIONS, START_PADDING, END_PADDING, OUTPUT_PADDING, GROUP_COUNT,
                FUSED_ACTIVATION),
    optional_inputs=(("BiasTensor", "InputTensor"),), optional_since=_CONV_ROWS[-1].level,
    shape_rule=convolution_shape, array_kernel=convolution_kernel, gpu_array_kernel=convolution_gpu_kernel,
    fused_activation="FusedActivation",
    exactness=APPROXIMATE, tolerance=Tolerance("ulp", 2, 2, _WEBNN_CONV),
    tolerance_scale=convolution_tolerance_scale, tf32_products=True, sum_bound=CONVOLUTION_SUM_BOUND,
    scratch=_scratch(4),
    notes=(
        "Tensors {N, C, [D], [H], W}: 1 to 3 spatial dimensions from 4_0 (3 to 5 dimensions), 2 to 3 at 1_0. "
        "FORWARD: FilterTensor is {OutputChannelCount, InputChannelCount / GroupCount, spatial...}; BACKWARD "
        "(transposed convolution, ONNX's ConvTranspose): {InputChannelCount, OutputChannelCount / GroupCount, "
        "spatial...}. BiasTensor is {1, OutputChannelCount, 1, ...}.",
        _GEOMETRY_NOTE,
        "Mode and Direction (the page's table): CROSS_CORRELATION uses the filter as it is and CONVOLUTION flips it "
        "along every spatial dimension; BACKWARD is the adjoint of FORWARD with the same Mode: each input element "
        "adds input x filter tap at position i x Stride + k x Dilation - StartPadding of the output.",
        "OutputPadding adds elements at the end of each spatial dimension of the output; no filter tap reaches them "
        "in the FORWARD direction (dmlcli's reading of the page's 'zero padding to the result'), so they hold 0 "
        "before the bias; the bias and the fused activation apply to every output element.",
        "Strides and Dilations of 0, and GroupCount 0, are refused (the page is silent; nothing could be computed).",
        "FLOAT32 and FLOAT16 accumulate in FLOAT32 (FLOAT16 widened exactly), the bias is added in FLOAT32 and the "
        "result rounded once to the output type; the order of the additions is BLAS's (cuBLAS on the GPU), so "
        "results are checked within WebNN's conv2d tolerance, which grows with the products summed per element. "
        "With --allow-tf32 a FLOAT32 convolution's products on the GPU may run on TF32 tensor cores (checked "
        "within 2^13 times that tolerance).",
        "On the GPU with cuDNN installed (nvidia-cudnn-frontend, the gpu extras) the convolution runs as cuDNN's "
        "graph where cuDNN builds a plan for the call (convolution/cudnn.py: FLOAT16 and FLOAT32, 1-D to 3-D, "
        "groups, BACKWARD as its data gradient, the bias and a RELU fused), computing in FLOAT32 without TF32 "
        "unless --allow-tf32; the order of its additions is cuDNN's, within the same rule. Where the convolution "
        "alone and one pass for the bias and RELU take less time (timed on a call's first run) or cuDNN fuses "
        "nothing, that pair runs: a FLOAT16 sum is then rounded twice, within the same rule. A depth-wise call "
        "runs dmlcli's own kernel; other calls run the column buffer and cuBLAS.",
        "The fused activation (dml-fused-activations: " + ", ".join(op.name.lower() for op in FUSABLE) + ") runs on "
        "the rounded result, exactly as the activation operator would on it, on the GPU as its own CUDA kernel. "
        "In a DxDispatch model: \"FusedActivation\": {\"Type\": \"ACTIVATION_RELU\"} (or null).",
        "The API and the command line may leave out the array fields (Strides and Dilations 1, paddings 0); a "
        "DxDispatch model gives them all with DimensionCount, as DirectML needs them.",
    ),
)

CONVOLUTION_INTEGER = Operator(
    name="CONVOLUTION_INTEGER", enum_value=119, family=FAMILY, prefix="",
    summary="forward cross-correlation of 8-bit integer tensors, less their zero points, into INT32",
    formula="Output[n, m, o] = sum over c in m's group and taps k of (Input[n, c, o x Strides + k x Dilations - "
            "StartPadding] - InputZeroPoint) x (Filter[m, c, k] - FilterZeroPoint[m])",
    introduced=_CI_ROWS[-1].level,
    inputs=("InputTensor", "InputZeroPointTensor", "FilterTensor", "FilterZeroPointTensor"), support=_CI_ROWS,
    same_data_type=(), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(STRIDES, DILATIONS, START_PADDING, END_PADDING, GROUP_COUNT),
    optional_inputs=(("InputZeroPointTensor", "InputTensor"), ("FilterZeroPointTensor", "FilterTensor")),
    optional_since=_CI_ROWS[-1].level,
    shape_rule=convolution_integer_shape, array_kernel=convolution_integer_kernel, exactness=EXACT, scratch=_scratch(8),
    notes=(
        "Tensors {N, C, [H], W}: 1 or 2 spatial dimensions from 4_0, 2 at 2_1 (the page says DimensionCount "
        "'only 2', but its 4_0 table takes 3-D tensors: dmlcli takes DimensionCount = rank - 2). The filter "
        "is {OutputChannelCount, InputChannelCount / GroupCount, spatial...}; the mode is cross-correlation.",
        "InputZeroPointTensor holds one value; FilterZeroPointTensor one value, or one per output channel "
        "(Sizes {1, OutputChannelCount, 1, 1}); both optional (0). The page's ties: InputTensor and "
        "InputZeroPointTensor, FilterTensor and FilterZeroPointTensor share a DataType; the zero points share a "
        "DimensionCount.",
        "Output Sizes, per spatial dimension: (size + StartPadding + EndPadding - ((k - 1) x Dilation + 1)) / "
        "Stride + 1, rounded down (DirectMLX's formula; the page prints none).",
        "Padded elements contribute 0 (the padding holds the zero point: it pads Input - InputZeroPoint with "
        "0, as ONNX's ConvInteger does; the page is silent).",
        "Exact: the sums are computed in float64, which holds them exactly (|product| <= 65025, up to 2^37 "
        "products), and wrap to INT32 modulo 2^32 as an INT32 accumulator does; the same on both backends.",
    ),
)

QUANTIZED_LINEAR_CONVOLUTION = Operator(
    name="QUANTIZED_LINEAR_CONVOLUTION", enum_value=120, family=FAMILY, prefix="",
    summary="forward cross-correlation of quantized 8-bit tensors: dequantize, convolve, add the INT32 bias, "
            "requantize with the output's scale and zero point",
    formula="Output = clamp(rint((sum (Input - InputZeroPoint) x (Filter - FilterZeroPoint) + Bias) x InputScale x "
            "FilterScale / OutputScale) + OutputZeroPoint, Min, Max)",
    introduced=_QLC_ROWS[-1].level,
    inputs=("InputTensor", "InputScaleTensor", "InputZeroPointTensor", "FilterTensor", "FilterScaleTensor",
            "FilterZeroPointTensor", "BiasTensor", "OutputScaleTensor", "OutputZeroPointTensor"),
    support=_QLC_ROWS, same_data_type=("OutputZeroPointTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None,
    cuda_body="", parameters=(STRIDES, DILATIONS, START_PADDING, END_PADDING, GROUP_COUNT),
    default_output_type=UINT8,
    optional_inputs=(("InputZeroPointTensor", "InputTensor"), ("FilterZeroPointTensor", "FilterTensor"),
                     ("BiasTensor", "InputTensor"), ("OutputZeroPointTensor", "OutputTensor")),
    optional_since=_QLC_ROWS[-1].level,
    shape_rule=quantized_linear_convolution_shape, array_kernel=quantized_linear_convolution_kernel,
    scratch=_scratch(8), exactness=COMPOSITE,
    tolerance=Tolerance("atol", 1, 1, "no WebNN figure; the outputs are integers and are always compared exactly, "
                                      "the float32 steps being fixed"),
    notes=(
        "Tensors {N, C, [H], W}: 1 or 2 spatial dimensions from 4_0, 2 at 2_1. InputScaleTensor, "
        "InputZeroPointTensor, OutputScaleTensor and OutputZeroPointTensor hold one value; FilterScaleTensor and "
        "FilterZeroPointTensor one value or one per output channel; BiasTensor is INT32 {1, OutputChannelCount, 1, "
        "1}. Zero points and the bias are optional (0).",
        "Steps (dmlcli's, fixed so both backends agree bit for bit): acc = sum (x - xzp) x (w - wzp) + bias, exact "
        "and wrapped to INT32; v = float32(acc) x float32(InputScale x FilterScale) / OutputScale, each a float32 "
        "operation; rint (halves to even) + OutputZeroPoint, clamped to the output type (NaN: its minimum). The "
        "page says only 'equivalent to dequantizing the inputs, convolving, and then quantizing the output'; the "
        "INT32 bias is in the accumulator's scale (InputScale x FilterScale), as ONNX's QLinearConv defines it.",
        "A scale of 0 is undefined behaviour in DirectML; dmlcli gives IEEE's result of the steps above.",
        "The page's ties: InputTensor and InputZeroPointTensor, FilterTensor and FilterZeroPointTensor, OutputTensor "
        "and OutputZeroPointTensor share a DataType.",
    ),
)

OPERATORS: tuple[Operator, ...] = (CONVOLUTION, CONVOLUTION_INTEGER, QUANTIZED_LINEAR_CONVOLUTION)
