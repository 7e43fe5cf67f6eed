"""The pooling family: AVERAGE_POOLING(1), MAX_POOLING(1, 2), LP_POOLING(1), MAX_UNPOOLING, ROI_POOLING and
ROI_ALIGN(1).

Sources: DirectML's pages (MicrosoftDocs/sdk-api, ns-directml-dml_<name>_operator_desc.md, the versions with the
newest support tables) for the fields, the output Sizes and the support tables; DirectML.h (microsoft/
DirectX-Headers include/directx/DirectML.h) for the DML_OPERATOR_TYPE values and for AVERAGE_POOLING1 and
LP_POOLING1, which no stored page describes: their DESCs (the plain operators' fields plus Dilations) sit under
`#if DML_TARGET_VERSION >= 0x6200`, so they are taken as introduced at 6_2 with the plain operators' support
table (4 to 5 dimensions, FLOAT32 and FLOAT16), dmlcli's reading where no page exists.

Every operator here slides a window over the spatial dimensions (all but the first two: { N, C, H, W } or
{ N, C, D, H, W }); the array fields Strides, WindowSize, StartPadding, EndPadding (and Dilations) share one
count field, DimensionCount, which is the input's DimensionCount - 2.

One kernel for both backends (`xp` is numpy or cupy): the input is padded once (only where a padding is
given), then a loop over the window's offsets combines strided views of it (xp.add for sums, xp.fmax for
maxima): no copy beyond the padded input and the accumulator, the same calls on NumPy and CuPy. The ROI
operators loop over the regions on the host (their ROI and batch tensors are read there) and gather each
region's samples with xp.take. On the GPU, the maxima without indices, the averages and the L1/L2 pools run
pooling_gpu.py's own kernels instead (one read of the input, no padded copy), which compute the same values in the
same order.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...data_types import FLOAT16, FLOAT32, FLOATS, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64
from ...errors import InputError
from ...records import Frozen
from . import gpu as pooling_gpu
from ..numerics import compiled_loops
from ..numerics.padding import constant_padded
from ..numerics.work import advance
from ..table.parameters import BoolParameter, EnumParameter, FloatParameter, IntArrayParameter, IntegerParameter
from ..table.schema import APPROXIMATE, DIMS_4, DIMS_4_TO_5, EXACT, Operator, SumBound, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes

FAMILY = "pooling"
IO = ("InputTensor", "OutputTensor")
_TYPES_8 = (FLOAT32, FLOAT16, INT8, UINT8)
_TYPES_ALL = (FLOAT32, FLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, UINT16, UINT8)

# ---------------------------------------------------------------- support tables (the pages, newest row first)


def _io(level, types):
    return (level, DIMS_4_TO_5, {"InputTensor": types, "OutputTensor": types})


def _with_indices(level, types, index_types):
    return (level, DIMS_4_TO_5, {"InputTensor": types, "OutputTensor": types, "OutputIndicesTensor": index_types})


AVERAGE_ROWS = rows(_io("1_0", FLOATS))
_AVERAGE1_ROWS = rows(_io("6_2", FLOATS))
_LP_ROWS = rows(_io("1_0", FLOATS))
_LP1_ROWS = rows(_io("6_2", FLOATS))
_MAX_ROWS = rows(_io("5_0", _TYPES_ALL), _io("3_0", _TYPES_8), _io("1_0", FLOATS))
_MAX1_ROWS = rows(_with_indices("5_0", _TYPES_ALL, (UINT64, UINT32)), _with_indices("3_0", _TYPES_8, (UINT32,)),
                  _with_indices("2_0", FLOATS, (UINT32,)))
_MAX2_ROWS = rows(_with_indices("5_0", _TYPES_ALL, (UINT64, UINT32)), _with_indices("3_0", _TYPES_8, (UINT32,)),
                  _with_indices("2_1", FLOATS, (UINT32,)))
_UNPOOL_ROWS = rows(
    ("5_0", DIMS_4, {"InputTensor": _TYPES_ALL, "IndicesTensor": (UINT64, UINT32), "OutputTensor": _TYPES_ALL}),
    ("3_0", DIMS_4, {"InputTensor": FLOATS, "IndicesTensor": (UINT32,), "OutputTensor": FLOATS}),
)

# ---------------------------------------------------------------- parameters


def _window_array(field: str, default_text: str, help: str) -> IntArrayParameter:
    return IntArrayParameter(field=field, count_field="DimensionCount", default_text=default_text, help=help,
                             max_length=3)


STRIDES = _window_array("Strides", "1 in every spatial dimension",
                        "the window's step in each spatial dimension ({H, W} or {D, H, W}; at least 1)")
WINDOW_SIZE = _window_array("WindowSize", "none: required",
                            "the window's size in each spatial dimension ({H, W} or {D, H, W}; at least 1)")
START_PADDING = _window_array("StartPadding", "0 in every spatial dimension",
                              "the padding elements before the input in each spatial dimension")
END_PADDING = _window_array("EndPadding", "0 in every spatial dimension",
                            "the padding elements after the input in each spatial dimension")
DILATIONS = _window_array("Dilations", "1 in every spatial dimension",
                          "the step between the elements a window reads in each spatial dimension (at least 1)")
INCLUDE_PADDING = BoolParameter(
    field="IncludePadding", help="true: padding elements count in the average's divisor (as zeros); false: they "
                                 "do not")
P = IntegerParameter(field="P", default_value=2, minimum=1,
                     help="the norm's exponent: (sum of |x|^P over the window)^(1/P); 1 or 2 usually (at least 1)")

_PLAIN = (STRIDES, WINDOW_SIZE, START_PADDING, END_PADDING)
_DILATED = _PLAIN + (DILATIONS,)

# ---------------------------------------------------------------- the window's geometry


def _spatial_values(params, field: str, count: int, default: int) -> tuple[int, ...]:
    values = params.get(field)
    if values is None:
        return (default,) * count
    return tuple(values)


def window_geometry(input_shape, params) -> dict:
    """Strides, WindowSize, StartPadding, EndPadding and Dilations of a call, one value per spatial dimension,
    checked against the input: RuleViolation for a call the pages' rules refuse."""
    rank = len(input_shape)
    spatial = rank - 2
    window = params.get("WindowSize")
    if window is None:
        raise InputError("WindowSize is required: give one size per spatial dimension (--window-size 2,2 for a "
                         "4-D input)")
    for field in ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations"):
        values = params.get(field)
        if values is not None and len(values) != spatial:
            raise RuleViolation(f"{field} has {len(values)} values but InputTensor has {spatial} spatial dimensions "
                                f"(DimensionCount must be 2 for a 4-D input, 3 for a 5-D input; InputTensor Sizes "
                                f"{describe_sizes(input_shape)})")
    geometry = {
        "Strides": _spatial_values(params, "Strides", spatial, 1),
        "WindowSize": tuple(window),
        "StartPadding": _spatial_values(params, "StartPadding", spatial, 0),
        "EndPadding": _spatial_values(params, "EndPadding", spatial, 0),
        "Dilations": _spatial_values(params, "Dilations", spatial, 1),
    }
    for field in ("Strides", "WindowSize", "Dilations"):
        for dim, value in enumerate(geometry[field]):
            if value < 1:
                raise RuleViolation(f"{field}[{dim}] is {value}; it must be at least 1")
    return geometry


def _extent(window: int, dilation: int) -> int:
    """How many padded elements a window spans: (WindowSize - 1) * Dilation + 1."""
    return (window - 1) * dilation + 1


def output_sizes(input_shape, geometry, dilated: bool = True) -> tuple[int, ...]:
    """The pages' formula: (PaddedSize - WindowSize) / Strides + 1, with the window's dilated extent."""
    sizes = list(input_shape[:2])
    for dim, size in enumerate(input_shape[2:]):
        padded = size + geometry["StartPadding"][dim] + geometry["EndPadding"][dim]
        extent = _extent(geometry["WindowSize"][dim], geometry["Dilations"][dim])
        if extent > padded:
            how = f"(WindowSize[{dim}] - 1) * Dilations[{dim}] + 1" if dilated else f"WindowSize[{dim}]"
            raise RuleViolation(f"the window spans {extent} elements in spatial dimension {dim} ({how}) but the "
                                f"padded input has {padded} (InputTensor's "
                                f"{size} + StartPadding + EndPadding); the window must fit the padded input")
        sizes.append((padded - extent) // geometry["Strides"][dim] + 1)
    return tuple(sizes)


def window_taps(dim: int, size: int, out_size: int, geometry) -> np.ndarray:
    """For one spatial dimension: the input coordinate each window element reads, shape (out_size, window),
    negative or >= size where it reads padding."""
    stride, window = geometry["Strides"][dim], geometry["WindowSize"][dim]
    dilation, start = geometry["Dilations"][dim], geometry["StartPadding"][dim]
    return (np.arange(out_size)[:, None] * stride + np.arange(window)[None, :] * dilation) - start


def _check_windows_read_input(input_shape, out_shape, geometry) -> None:
    """dmlcli's rule where the pages are silent: every window reads at least one input element (a window wholly
    in padding has no maximum and no average without IncludePadding). Worked out arithmetically per dimension
    (first_padding_only_window), never by listing the windows: a call's validation takes no memory of the
    output's size (issue 34: StartPadding 2 * 10^8 took 3.1 GB)."""
    for dim, size in enumerate(input_shape[2:]):
        first = first_padding_only_window(size, out_shape[dim + 2], geometry["Strides"][dim],
                                          geometry["WindowSize"][dim], geometry["Dilations"][dim],
                                          geometry["StartPadding"][dim])
        if first is not None:
            raise RuleViolation(f"output position {first} of spatial dimension {dim} reads only padding (StartPadding "
                                f"{geometry['StartPadding'][dim]}, EndPadding {geometry['EndPadding'][dim]}, "
                                f"WindowSize {geometry['WindowSize'][dim]}); every window must read at least one "
                                "input element")


def first_padding_only_window(size: int, out_size: int, stride: int, window: int, dilation: int,
                              start: int) -> int | None:
    """The first output position along one dimension whose window reads no input element, None where every window
    reads one. Window o reads the padded coordinates b, b + dilation, ..., e (b = o * stride - start, e = b + (window
    - 1) * dilation; the input holds 0 .. size - 1). It reads nothing where it ends before the input (e < 0: first
    at o = 0, as e grows with o), starts after it (b >= size: from o = ceil((size + start) / stride)), or, with
    dilation > size, straddles the input with every element in a gap: b < 0 <= size <= e and b mod dilation >=
    size (the first element past 0 is b mod dilation). The last case is found by counting the straddling windows
    that do read (_straddling_reads) and halving the range: O(log^2) steps whatever the sizes."""
    def begin(o: int) -> int:
        return o * stride - start

    reach = (window - 1) * dilation
    if begin(0) + reach < 0:
        return 0
    found = []
    after = -(-(size + start) // stride)
    if after < out_size:
        found.append(after)
    if dilation > size and window > 1:
        low = max(0, -(-(size - reach + start) // stride))  # b(o) + reach >= size from here
        high = min(out_size - 1, -(-start // stride) - 1)  # b(o) < 0 up to here
        if low <= high and _straddling_reads(low, high - low + 1, stride, start, dilation, size) < high - low + 1:
            shortest, longest = 1, high - low + 1  # the fewest windows from `low` that include one reading nothing
            while shortest < longest:
                middle = (shortest + longest) // 2
                if _straddling_reads(low, middle, stride, start, dilation, size) < middle:
                    longest = middle
                else:
                    shortest = middle + 1
            found.append(low + shortest - 1)
    return min(found) if found else None


def _straddling_reads(first: int, count: int, stride: int, start: int, dilation: int, size: int) -> int:
    """How many of the windows first .. first + count - 1 (each straddling the input, dilation > size) read an
    input element: those with (o * stride - start) mod dilation < size. [x mod d < n] = floor(x / d) - floor((x - n)
    / d) for 0 < n <= d, so the count is a difference of two floor sums."""
    origin = first * stride - start
    return (_floor_sum(count, dilation, stride, origin) - _floor_sum(count, dilation, stride, origin - size))


def _floor_sum(count: int, divisor: int, slope: int, intercept: int) -> int:
    """The sum of floor((slope * i + intercept) / divisor) for i in 0 .. count - 1 (divisor > 0), in O(log) steps:
    AtCoder Library's floor_sum (the Euclid-like reduction), with Python's floor division for any signs."""
    total = 0
    while True:
        if slope >= divisor or slope < 0:
            whole, slope = divmod(slope, divisor)
            total += whole * count * (count - 1) // 2
        if intercept >= divisor or intercept < 0:
            whole, intercept = divmod(intercept, divisor)
            total += whole * count
        top = slope * count + intercept
        if top < divisor:
            return total
        count, intercept = divmod(top, divisor)
        divisor, slope = slope, divisor


def pooling_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    geometry = window_geometry(shape, query.parameters)
    out = output_sizes(shape, geometry, dilated="Dilations" in query.parameters)
    _check_windows_read_input(shape, out, geometry)
    return {"OutputTensor": out}


def max_pooling_indices_shape(query: ShapeQuery) -> dict:
    sizes = pooling_shape(query)["OutputTensor"]
    return {"OutputTensor": sizes, "OutputIndicesTensor": sizes}


# ---------------------------------------------------------------- how the tolerances grow


def window_count(call) -> int:
    """The elements one window reads: the product of WindowSize."""
    return math.prod(window_geometry(call.tensors["InputTensor"].shape, call.parameters)["WindowSize"])


def average_tolerance_scale(call) -> int:
    """WebNN's averagePool2d figure (webnn/resources/utils.js getPoolingOperatorsPrecisionTolerance): N + 2 ULP
    for a window of N elements."""
    return window_count(call) + 2


def lp_tolerance_scale(call) -> int:
    """WebNN's l2Pool2d figure, N + 2 ULP, for P of 1 and 2; 2N + 4 for other P (dmlcli's choice: the power and
    the root are two more roundings of a few ULP each, which WebNN, having only l2Pool2d, does not cover)."""
    count = window_count(call)
    return count + 2 if call.parameters["P"] in (1, 2) else 2 * count + 4


def average_terms(call) -> int:
    """K of the average's sum bound: the N elements of a window, + 1 for the division."""
    return window_count(call) + 1


AVERAGE_SUM_BOUND = SumBound(
    average_terms, "N + 1, N the elements of a window",
    "the operator itself run on |InputTensor| in float64 (each window's average of magnitudes)",
    absolute=("InputTensor",))


# ---------------------------------------------------------------- what a call costs (issue 34)


def window_work(call) -> int:
    """The element reads of a window kernel: each output element reads its window's elements, once, twice where the
    maximum's index is found too (the windows are walked again). A 1024 x 1024 window over a broadcast 2048 x 2048
    input reads 1.1 * 10^12 elements from one: `validate` says so, and the run shows its progress on a terminal."""
    passes = 2 if len(call.outputs) > 1 else 1
    return math.prod(call.output.shape) * window_count(call) * passes


def _window_scratch(per_output: int, per_input: int):
    """The scratch of a window kernel: the padded copy of the input where a padding is given (FLOAT32 where the
    kernel widens, per_input > 0; the input's type for a maximum), `per_input` bytes an input element (its FLOAT32
    copy, and for LP its absolute values), `per_output` bytes an output element (FLOAT32 sums and their terms, the
    masks of the first zero's walk, a maximum's tap and INT64 indices), and 1 MiB for the small arrays (the
    counts per dimension). The padded copy can be far larger than the output (large strides over a large padding):
    counted, a run that cannot hold it is refused before any work."""
    def scratch(call) -> int:
        x = call.tensors["InputTensor"]
        geometry = window_geometry(x.shape, call.parameters)
        item = 4 if per_input else x.data_type.numpy_dtype.itemsize
        padded = 0
        if any(geometry["StartPadding"]) or any(geometry["EndPadding"]):
            padded = math.prod(x.shape[:2]) * math.prod(
                size + start + end for size, start, end in zip(x.shape[2:], geometry["StartPadding"],
                                                                geometry["EndPadding"]))
        return (padded * item + per_input * math.prod(x.shape) + per_output * math.prod(call.output.shape)
                + (1 << 20))
    return scratch


def _max_scratch(per_output: int):
    """_window_scratch for a maximum, and the two partial maxima alive at once while window_maxima takes the
    maximum one spatial dimension at a time (after dimension d: the output's sizes up to d, the padded input's
    beyond), and the first zero's two masks over the padded input."""
    window = _window_scratch(per_output, per_input=0)

    def scratch(call) -> int:
        x = call.tensors["InputTensor"]
        geometry = window_geometry(x.shape, call.parameters)
        padded = [size + start + end for size, start, end in zip(x.shape[2:], geometry["StartPadding"],
                                                                    geometry["EndPadding"])]
        out = call.output.shape[2:]
        partial = [math.prod(x.shape[:2]) * math.prod(out[:d + 1]) * math.prod(padded[d + 1:])
                   for d in range(len(out))]
        alive = max(partial[d] + (partial[d - 1] if d else 0) for d in range(len(out)))
        bools = 2 * math.prod(x.shape[:2]) * math.prod(padded) if x.data_type.is_float else 0
        return window(call) + alive * x.data_type.numpy_dtype.itemsize + bools
    return scratch


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)


def _geometry_of(x_shape, params):
    geometry = window_geometry(x_shape, params)
    return geometry, output_sizes(x_shape, geometry)


def _padded(xp, x, geometry, value):
    """The input with its spatial padding filled with `value` (no copy where there is no padding)."""
    pads = [(0, 0), (0, 0)] + list(zip(geometry["StartPadding"], geometry["EndPadding"]))
    return constant_padded(xp, x, pads, value)


def window_views(padded, geometry, out_shape):
    """Each window element's strided view of the padded input, in row-major window order (the 'first encountered'
    order of the pages' ties): views of shape out_shape."""
    spatial = len(out_shape) - 2
    for offsets in itertools.product(*(range(w) for w in geometry["WindowSize"])):
        index = [slice(None), slice(None)]
        for dim in range(spatial):
            start = offsets[dim] * geometry["Dilations"][dim]
            stop = start + geometry["Strides"][dim] * (out_shape[dim + 2] - 1) + 1
            index.append(slice(start, stop, geometry["Strides"][dim]))
        view = padded[tuple(index)]
        advance(view.size)  # a long loop's progress (window_work counts these reads)
        yield offsets, view


def window_count_reads(out_shape, geometry) -> int:
    """The reads of a pooling's windows (output elements x window elements): window_work's count, reported at once
    by a compiled loop that takes them all in one call."""
    return math.prod(out_shape) * math.prod(geometry["WindowSize"])


def _window_sum(xp, padded, geometry, out_shape, transform=None):
    if xp is np and all(n == 1 for n in out_shape[2:]):
        return _one_window_sum(padded, geometry, out_shape, transform)
    total = None
    for _, view in window_views(padded, geometry, out_shape):
        term = view if transform is None else transform(view)
        if total is None:
            total = xp.array(term, dtype=xp.float32, copy=True)
        else:
            xp.add(total, term, out=total)
    return total


def _one_window_sum(padded, geometry, out_shape, transform=None):
    """_window_sum where each channel has one window (global pooling): the window's elements copied once to rows
    of their own (row-major window order), then added one row after another as _window_sum adds its views; each
    add reads a contiguous row where _window_sum's views are strided (a 13 x 13 window over 1000 channels: 0.16
    ms, 0.56 ms through the views). Not np.sum, which would add them pairwise."""
    spatial = len(out_shape) - 2
    index = (slice(None), slice(None)) + tuple(
        slice(0, (window - 1) * dilation + 1, dilation)
        for window, dilation in zip(geometry["WindowSize"][:spatial], geometry["Dilations"][:spatial]))
    window = padded[index]
    advance(window.size)
    rows = np.ascontiguousarray(np.moveaxis(window.reshape(window.shape[:2] + (-1,)), -1, 0))
    if transform is not None:
        rows = transform(rows)
    total = np.array(rows[0], dtype=np.float32, copy=True)
    for row in rows[1:]:
        np.add(total, row, out=total)
    return total.reshape(out_shape)


def valid_counts(xp, x_shape, out_shape, geometry):
    """How many input (not padding) elements each window reads: the product over spatial dimensions of each
    dimension's count, broadcast to the output's spatial Sizes."""
    spatial = len(out_shape) - 2
    count = np.ones(out_shape[2:], dtype=np.float32)
    for dim in range(spatial):
        per_dim = _reads_per_window(x_shape[dim + 2], out_shape[dim + 2], geometry["Strides"][dim],
                                    geometry["WindowSize"][dim], geometry["Dilations"][dim],
                                    geometry["StartPadding"][dim]).astype(np.float32)
        shape = [1] * spatial
        shape[dim] = out_shape[dim + 2]
        count = count * per_dim.reshape(shape)
    return xp.asarray(count)


def _reads_per_window(size: int, out_size: int, stride: int, window: int, dilation: int, start: int) -> np.ndarray:
    """For one spatial dimension, how many input elements each window reads: the window elements k in
    [0, window) with 0 <= b + k * dilation < size (b = o * stride - start), counted from their bounds, so the
    work and memory go with the output's size, not the window's."""
    begin = np.arange(out_size, dtype=np.int64) * stride - start
    first = np.maximum(0, -(begin // dilation))  # ceil(-b / dilation)
    last = np.minimum(window - 1, (size - 1 - begin) // dilation)
    return np.maximum(0, last - first + 1)


def average_values(xp, x, params):
    """Each window's average in FLOAT32 (FLOAT16 widened exactly), before any rounding to the output's type: the sum
    of the window's elements in row-major order, divided by the window's size (IncludePadding) or by the input
    elements it reads. QUANTIZED_LINEAR_AVERAGE_POOLING averages its dequantized values through this too."""
    geometry, out_shape = _geometry_of(x.shape, params)
    work = x.astype(xp.float32, copy=False)  # FLOAT16 widens exactly; the sum runs in FLOAT32
    total = _window_sum(xp, _padded(xp, work, geometry, 0), geometry, out_shape)
    if params["IncludePadding"]:
        total /= xp.float32(math.prod(geometry["WindowSize"]))
    else:
        total /= valid_counts(xp, x.shape, out_shape, geometry)
    return total


def average_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    return (average_values(xp, x, params).astype(out.data_type.numpy_dtype, copy=False),)


def lp_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    geometry, out_shape = _geometry_of(x.shape, params)
    p = params["P"]
    work = xp.abs(x.astype(xp.float32, copy=False))  # padding adds 0 to the sum, so it is padded with 0
    padded = _padded(xp, work, geometry, 0)
    if p == 1:
        total = _window_sum(xp, padded, geometry, out_shape)
    elif p == 2:
        total = xp.sqrt(_window_sum(xp, padded, geometry, out_shape, transform=lambda v: v * v))
    else:
        total = _window_sum(xp, padded, geometry, out_shape, transform=lambda v: xp.power(v, xp.float32(p)))
        total = xp.power(total, xp.float32(1.0 / p))
    return (total.astype(out.data_type.numpy_dtype, copy=False),)


def _lowest(dtype):
    """The padding of a maximum: NaN for floats (xp.fmax skips it as it skips NaN), the type's minimum else."""
    dtype = np.dtype(dtype)
    return dtype.type(np.nan) if dtype.kind == "f" else np.iinfo(dtype).min


def maximum_padded(xp, x, geometry):
    """The input padded with a value that is never the maximum (_lowest): NaN for floats, which xp.fmax skips as it
    skips NaN, the type's minimum else; what a window's elements are read from by tap (max_window_taps)."""
    return _padded(xp, x, geometry, _lowest(x.dtype))


def _tap_outputs(tap: int, count: int, size: int, stride: int, dilation: int, start: int) -> tuple[int, int]:
    """The outputs first..last (along one spatial dimension) whose window element `tap` is an input element, not
    padding: start <= o x stride + tap x dilation < start + size. Empty where first > last."""
    offset = tap * dilation - start
    first = max(0, -(offset // stride))  # ceil(-offset / stride)
    last = min(count - 1, (size - 1 - offset) // stride)
    return first, last


class _Phases:
    """The elements of an array's last axis every `stride`, by phase (begin mod stride), each phase copied once to
    an array of its own: a tap's elements are then consecutive, where a view every `stride` elements takes NumPy's
    element-by-element loops (a 3 x 3, stride 2 maximum over 64 x 111 x 111: 2.5x faster along that axis)."""

    def __init__(self, xp, array, stride: int) -> None:
        self.xp, self.array, self.stride = xp, array, stride
        self.copies: dict[int, object] = {}

    def elements(self, begin: int, count: int):
        """array[..., begin : begin + stride x (count - 1) + 1 : stride]."""
        phase, offset = begin % self.stride, begin // self.stride
        if phase not in self.copies:
            self.copies[phase] = self.xp.ascontiguousarray(self.array[..., phase::self.stride])
        return self.copies[phase][..., offset:offset + count]


def window_maxima(xp, x, geometry, out_shape):
    """Each window's maximum (NaN skipped: NaN only where the window reads nothing but NaN), what MAX_POOLING and
    MAX_POOLING_GRAD select by: the maxima over maximum_padded's windows, with no padded copy made.

    The maximum of a window is the maximum, along its first spatial dimension, of the maxima along the others, so
    it is taken one spatial dimension at a time: 3 + 3 passes for a 3 x 3 window instead of 9 (the same values:
    fmax keeps a number against NaN whatever the order, and the sign of a zero maximum is set afterwards by
    _keep_the_first_zero). A tap's padding is left out rather than read: max(m, padding) is m, and an output
    whose first taps are padding starts as the padding (_lowest), as it would from the padded input."""
    combine = xp.fmax if x.dtype.kind == "f" else xp.maximum
    # window_work's reads (output elements x window elements), reported as the passes go: each tap's share of them.
    work, taps, done, reported = window_count_reads(out_shape, geometry), sum(geometry["WindowSize"]), 0, 0
    best = x
    for dim in range(len(out_shape) - 2):
        axis, count, size = dim + 2, out_shape[dim + 2], best.shape[dim + 2]
        stride, dilation, start = geometry["Strides"][dim], geometry["Dilations"][dim], geometry["StartPadding"][dim]
        phases = _Phases(xp, best, stride) if axis == best.ndim - 1 and stride > 1 else None
        reduced = None
        for tap in range(geometry["WindowSize"][dim]):
            first, last = _tap_outputs(tap, count, size, stride, dilation, start)
            if first <= last:
                begin = first * stride + tap * dilation - start
                if phases is not None:
                    view = phases.elements(begin, last - first + 1)
                else:
                    source = [slice(None)] * best.ndim
                    source[axis] = slice(begin, begin + stride * (last - first) + 1, stride)
                    view = best[tuple(source)]
                if reduced is None and (first, last) == (0, count - 1):
                    reduced = xp.array(view, copy=True)  # every output's first tap: no padding to start from
                else:
                    if reduced is None:
                        shape = list(best.shape)
                        shape[axis] = count
                        reduced = xp.full(tuple(shape), _lowest(x.dtype), dtype=x.dtype)
                    target = [slice(None)] * best.ndim
                    target[axis] = slice(first, last + 1)
                    part = reduced[tuple(target)]
                    combine(part, view, out=part)
            done += 1
            advance(work * done // taps - reported)
            reported = work * done // taps
        best = reduced
    return best


def max_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    out = outputs[0]
    geometry, out_shape = _geometry_of(x.shape, params)
    loops = compiled_loops.active() if xp is np and len(outputs) == 1 else None
    best = None if loops is None else loops.max_pool_2d(x, geometry, out_shape)  # the same values, one pass
    if best is not None:
        advance(window_count_reads(out_shape, geometry))
        return (best.astype(out.data_type.numpy_dtype, copy=False),)
    best = window_maxima(xp, x, geometry, out_shape)
    if x.dtype.kind == "f":
        _keep_the_first_zero(xp, best, x, geometry, out_shape)
    if len(outputs) == 1:
        return (best.astype(out.data_type.numpy_dtype, copy=False),)
    return best, _max_indices(xp, x, maximum_padded(xp, x, geometry), best, geometry, out_shape, outputs[1])


def _keep_the_first_zero(xp, best, x, geometry, out_shape) -> None:
    """Where a window's maximum is a zero, the window's first zero (row-major), as the rule keeps the first of
    equal values: fmax's vector loops give the later of -0.0 and +0.0 (x86's maxps returns its second operand
    for two zeros) and its scalar loop the earlier, so without this the sign would depend on where an element
    falls. Only windows whose maximum is a zero are walked again, over the padded input."""
    pending = best == 0
    if not pending.any():
        return
    # Read from the bits, one pass each with nothing made: -0.0 is the one float whose bits, read as a signed
    # integer, are the least; +0.0 the one whose bits, read unsigned, are 0. -0.0 first: the rarer (none after a
    # ReLU), so most inputs take one pass.
    size = x.dtype.itemsize
    if int(x.view(f"int{8 * size}").min()) != -(1 << (8 * size - 1)) or int(x.view(f"uint{8 * size}").min()) != 0:
        return  # the input's zeros all have one sign: every zero maximum has it already
    for _, view in window_views(maximum_padded(xp, x, geometry), geometry, out_shape):
        first = pending & (view == 0)
        best[first] = view[first]
        pending &= ~first
        if not pending.any():
            return


def _gpu_window(cp, kind: str, inputs, outputs, params, include_padding: bool = False):
    """The CUDA kernel of pooling_gpu.py for `kind`, or None where it does not apply (the xp kernel runs)."""
    (x,) = inputs
    if not pooling_gpu.fits(x):
        return None
    geometry, out_shape = _geometry_of(x.shape, params)
    out_dtype = outputs[0].data_type.numpy_dtype
    if kind == "max" and pooling_gpu.slide_fits(x, geometry, out_shape, out_dtype):
        return (pooling_gpu.max_slide_kernel(cp, x, geometry, out_shape),)
    if kind == "max" and pooling_gpu.strip_fits(x, geometry, out_dtype):
        return (pooling_gpu.max_strip_kernel(cp, x, geometry, out_shape),)
    return (pooling_gpu.window_kernel(cp, kind, x, geometry, out_shape, out_dtype, include_padding),)


def max_gpu_kernel(cp, inputs, outputs, params):
    """The maximum on the GPU: pooling_gpu's kernel (one read of the input); with indices, the xp kernel."""
    fast = _gpu_window(cp, "max", inputs, outputs, params) if len(outputs) == 1 else None
    return fast or max_kernel(cp, inputs, outputs, params)


def average_values_gpu(cp, x, params, out_dtype=np.float32):
    """average_values on the GPU by pooling_gpu's kernel (the CPU's FLOAT32 operations in its order), rounded once
    to `out_dtype`; where that kernel does not apply, the xp kernel's."""
    if not pooling_gpu.fits(x):
        return average_values(cp, x, params).astype(out_dtype, copy=False)
    geometry, out_shape = _geometry_of(x.shape, params)
    return pooling_gpu.window_kernel(cp, "average", x, geometry, out_shape, out_dtype, bool(params["IncludePadding"]))


def average_gpu_kernel(cp, inputs, outputs, params):
    (x,) = inputs
    return (average_values_gpu(cp, x, params, outputs[0].data_type.numpy_dtype),)


def lp_gpu_kernel(cp, inputs, outputs, params):
    """P of 1 and 2 by pooling_gpu's kernel; other P (a pow per element) by the xp kernel."""
    kind = {1: "l1", 2: "l2"}.get(params["P"])
    fast = _gpu_window(cp, kind, inputs, outputs, params) if kind else None
    return fast or lp_kernel(cp, inputs, outputs, params)


def _tap_reads_input(xp, x_shape, out_shape, geometry, offsets):
    """Where one window element reads the input (not padding): a boolean broadcast to the output's spatial
    Sizes, or None where it reads the input everywhere."""
    mask = None
    spatial = len(out_shape) - 2
    for dim in range(spatial):
        coordinate = (np.arange(out_shape[dim + 2]) * geometry["Strides"][dim]
                      + offsets[dim] * geometry["Dilations"][dim] - geometry["StartPadding"][dim])
        inside = (coordinate >= 0) & (coordinate < x_shape[dim + 2])
        if inside.all():
            continue
        shape = [1] * spatial
        shape[dim] = out_shape[dim + 2]
        inside = inside.reshape(shape)
        mask = inside if mask is None else mask & inside
    return None if mask is None else xp.asarray(mask)


def max_window_taps(xp, x, padded, best, geometry, out_shape):
    """Which window element (its number in row-major window order) holds each window's maximum `best`: the first
    that reads the input and equals it, as the pages say of ties (MAX_POOLING2: the first encountered;
    MAX_POOLING_GRAD: the lowest logical element index, the same element); a window of nothing but NaN gives its
    first input element. An int32 array of the output's Sizes."""
    best_tap = xp.full(out_shape, -1, dtype=xp.int32)
    reads_by_tap = []
    for tap, (window_offsets, view) in enumerate(window_views(padded, geometry, out_shape)):
        reads = _tap_reads_input(xp, x.shape, out_shape, geometry, window_offsets)
        reads_by_tap.append(reads)
        hit = view == best
        hit &= best_tap < 0
        if reads is not None:
            hit &= reads  # padding equal to the maximum (an integer type's minimum) is not an element
        xp.copyto(best_tap, xp.int32(tap), where=hit)
    if x.dtype.kind == "f" and bool((best_tap < 0).any()):  # windows of nothing but NaN: their first element
        for tap, reads in enumerate(reads_by_tap):
            unset = best_tap < 0
            if reads is not None:
                unset &= reads
            xp.copyto(best_tap, xp.int32(tap), where=unset)
    return best_tap


def _max_indices(xp, x, padded, best, geometry, out_shape, indices_info):
    """The flat (row-major, whole-tensor) index of each window's maximum `best`: the window element
    max_window_taps picks, turned into the index: the window origin's flat index + that element's offset."""
    spatial = len(out_shape) - 2
    in_strides = [math.prod(x.shape[d + 3:]) for d in range(spatial)]
    best_tap = max_window_taps(xp, x, padded, best, geometry, out_shape)
    offsets = [sum((window_offsets[d] * geometry["Dilations"][d] - geometry["StartPadding"][d]) * in_strides[d]
                   for d in range(spatial))
               for window_offsets in itertools.product(*(range(w) for w in geometry["WindowSize"]))]
    # The flat index of each output's window origin (its first padded position, before the offsets).
    origin = xp.arange(out_shape[0] * out_shape[1], dtype=xp.int64).reshape(tuple(out_shape[:2]) + (1,) * spatial)
    origin = origin * math.prod(x.shape[2:])
    for dim in range(spatial):
        shape = [1] * (spatial + 2)
        shape[dim + 2] = out_shape[dim + 2]
        step = xp.arange(out_shape[dim + 2], dtype=xp.int64) * (geometry["Strides"][dim] * in_strides[dim])
        origin = origin + step.reshape(shape)
    index = origin + xp.asarray(np.asarray(offsets, np.int64))[best_tap]
    return index.astype(indices_info.data_type.numpy_dtype)


# ---------------------------------------------------------------- MAX_UNPOOLING


def unpooling_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    indices = query.shape("IndicesTensor")
    if tuple(indices) != tuple(shape):
        raise RuleViolation(f"IndicesTensor Sizes {describe_sizes(indices)} differ from InputTensor Sizes "
                            f"{describe_sizes(shape)}; they must be the same")
    given = query.given_outputs.get("OutputTensor")
    if given is None:
        raise InputError("MAX_UNPOOLING takes OutputTensor's Sizes from its tensor desc: give them with "
                         "--output-shape (output_shape= in the API), e.g. the Sizes of the max-pooling's input")
    given = tuple(given)
    if len(given) != len(shape):
        raise RuleViolation(f"OutputTensor has {len(given)} dimensions and InputTensor {len(shape)}; they must have "
                            "the same DimensionCount")
    if given[:2] != tuple(shape[:2]):
        raise RuleViolation(f"OutputTensor Sizes {describe_sizes(given)} and InputTensor Sizes "
                            f"{describe_sizes(shape)} differ in the batch or channel dimension; they must match "
                            "(a pooling keeps the first two dimensions)")
    return {"OutputTensor": given}


def unpooling_kernel(xp, inputs, outputs, params):
    x, indices = inputs
    (out,) = outputs
    size = math.prod(out.shape)
    result = xp.zeros(size, dtype=out.data_type.numpy_dtype)
    index = indices.reshape(-1).astype(xp.int64)
    values = x.reshape(-1)
    valid = (index >= 0) & (index < size) & (indices.reshape(-1) < size)  # UINT64 past 2^63 reads as negative
    index, values = index[valid], values[valid]
    if index.size:
        # Several values for one index: the last in row-major order wins on both backends (CuPy's scatter
        # of duplicates has no order), so only each index's last occurrence is written.
        order = xp.argsort(index, kind="stable")
        ordered = index[order]
        last = xp.ones(ordered.shape, dtype=bool)
        last[:-1] = ordered[1:] != ordered[:-1]
        result[ordered[last]] = values[order[last]]
    return (result.reshape(out.shape),)


# ---------------------------------------------------------------- ROI_POOLING


class Size2DParameter(IntArrayParameter):
    """A DML_SIZE_2D field (ROI_POOLING's PooledSize): `--pooled-size H,W` (the page's "(height, width)"); a
    DxDispatch desc's {"Width": W, "Height": H} object (or [H, W]). The typed value is (height, width)."""

    def parse_desc(self, value, data_types):
        if isinstance(value, dict):
            missing = {"Width", "Height"} - set(value)
            if missing:
                raise InputError(f"{self.field} must be an object with Width and Height (missing "
                                 f"{', '.join(sorted(missing))})")
            return self.parse_items([value["Height"], value["Width"]], self.field)
        return super().parse_desc(value, data_types)


POOLED_SIZE = Size2DParameter(
    field="PooledSize", default_text="none: required", max_length=2,
    help="the output's { Height, Width } per region, as H,W (OutputTensor's last two Sizes; each at least 1)")
SPATIAL_SCALE = FloatParameter(
    field="SpatialScale", default_value=1.0,
    help="the factor from ROITensor's coordinates to InputTensor's (FLOAT)")

_ROI_ROWS = rows(("1_0", DIMS_4, {"InputTensor": FLOATS, "ROITensor": FLOATS, "OutputTensor": FLOATS}))


def roi_pooling_shape(query: ShapeQuery) -> dict:
    shape, rois = query.shape("InputTensor"), query.shape("ROITensor")
    if len(rois) != 4 or rois[0] != 1 or rois[1] != 1 or rois[3] != 5:
        raise RuleViolation(f"ROITensor Sizes {describe_sizes(rois)} are not {{ 1, 1, NumROIs, 5 }} (each ROI is "
                            "[BatchID, x1, y1, x2, y2])")
    pooled = query.parameters["PooledSize"]
    if pooled is None:
        raise InputError("PooledSize is required: give the output's height and width per region (--pooled-size 2,2)")
    if len(pooled) != 2:
        raise RuleViolation(f"PooledSize has {len(pooled)} values; it is {{ Height, Width }} (2 values)")
    for name, value in zip(("Height", "Width"), pooled):
        if value < 1:
            raise RuleViolation(f"PooledSize.{name} is {value}; it must be at least 1")
    return {"OutputTensor": (rois[2], shape[1], pooled[0], pooled[1])}


def _round_half_away(value: float) -> int:
    """C's round(): halves away from zero."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def roi_bins(roi, spatial_scale: np.float32, pooled, input_hw):
    """For one ROI [BatchID, x1, y1, x2, y2]: the batch and, per output row and column, the input's [start, end)
    after the page's integer formulas and the clamp to the input."""
    scale = np.float32(spatial_scale)
    x1, y1, x2, y2 = (_round_half_away(float(np.float32(v) * scale)) for v in roi[1:5])
    bins = []
    for count, first, last, size in ((pooled[0], y1, y2, input_hw[0]), (pooled[1], x1, x2, input_hw[1])):
        region = max(last - first + 1, 1)  # the page requires x2 >= x1; a smaller region counts as 1 (Caffe's rule)
        edges = []
        for index in range(count):
            start = (index * region) // count + first
            end = ((index + 1) * region + count - 1) // count + first
            edges.append((min(max(start, 0), size), min(max(end, 0), size)))
        bins.append(edges)
    return bins


def roi_pooling_kernel(xp, inputs, outputs, params):
    x, rois = inputs
    (out,) = outputs
    pooled = params["PooledSize"]
    host_rois = np.asarray(rois.get() if hasattr(rois, "get") else rois, dtype=np.float32).reshape(-1, 5)
    result = xp.zeros(out.shape, dtype=x.dtype)
    for index, roi in enumerate(host_rois):
        batch = float(roi[0])
        if not (math.isfinite(batch) and 0 <= int(batch) < x.shape[0]):
            continue  # a BatchID outside the input: the region stays 0
        with np.errstate(over="ignore"):
            if not np.isfinite(roi[1:5].astype(np.float32) * np.float32(params["SpatialScale"])).all():
                continue  # a NaN or infinite corner (after the scale): the region stays 0
        rows_, columns = roi_bins(roi, params["SpatialScale"], pooled, x.shape[2:])
        plane = x[int(batch)]
        for row, (y0, y1) in enumerate(rows_):
            for column, (x0, x1) in enumerate(columns):
                if y1 <= y0 or x1 <= x0:
                    continue  # an empty bin (clamped away): 0, as Caffe's ROI pooling writes
                block = plane[:, y0:y1, x0:x1].reshape(plane.shape[0], -1)
                result[index, :, row, column] = _nan_skipping_max(xp, block)
    return (result,)


def _nan_skipping_max(xp, block):
    """The maximum of each row, NaN skipped (NaN only where a row is nothing but NaN)."""
    nan = xp.isnan(block)
    best = xp.max(xp.where(nan, xp.asarray(-xp.inf, block.dtype), block), axis=1)
    return xp.where(xp.all(nan, axis=1), xp.asarray(xp.nan, block.dtype), best)


# ---------------------------------------------------------------- ROI_ALIGN and ROI_ALIGN1

ROI_REDUCTION = EnumParameter(
    field="ReductionFunction", help="how the samples of one output element combine: average or max",
    enum_prefix="DML_REDUCE_FUNCTION_", values=(("AVERAGE", 2), ("MAX", 7)), default_value="AVERAGE")
INTERPOLATION = EnumParameter(
    field="InterpolationMode", help="how a sample reads the input: nearest_neighbor or linear (bilinear)",
    enum_prefix="DML_INTERPOLATION_MODE_", values=(("NEAREST_NEIGHBOR", 0), ("LINEAR", 1)), default_value="LINEAR")
SPATIAL_SCALE_X = FloatParameter(field="SpatialScaleX", default_value=1.0,
                                 help="the factor from ROITensor's x coordinates to InputTensor's columns")
SPATIAL_SCALE_Y = FloatParameter(field="SpatialScaleY", default_value=1.0,
                                 help="the factor from ROITensor's y coordinates to InputTensor's rows")
INPUT_PIXEL_OFFSET = FloatParameter(field="InputPixelOffset", default_value=0.5,
                                    help="the offset from (0, 0) to the input's first pixel centre (0.5 or 0)")
OUTPUT_PIXEL_OFFSET = FloatParameter(field="OutputPixelOffset", default_value=-0.5,
                                     help="the offset from the output's first pixel centre to (0, 0) (-0.5 or 0)")
OUT_OF_BOUNDS = FloatParameter(field="OutOfBoundsInputValue", default_value=0.0,
                               help="the value a sample outside the input reads")
MINIMUM_SAMPLES = IntegerParameter(field="MinimumSamplesPerOutput", default_value=1, minimum=1,
                                   help="the fewest samples per output element along each axis (at least 1)")
MAXIMUM_SAMPLES = IntegerParameter(field="MaximumSamplesPerOutput", default_value=2**32 - 1, minimum=1,
                                   help="the most samples per output element along each axis")
ALIGN_TO_CORNERS = BoolParameter(
    field="AlignRegionsToCorners", help="true: the samples stretch to the region's corners instead of being "
                                        "spread evenly within it")

_ROI_ALIGN_ROWS = rows(
    ("5_0", {"InputTensor": (DIMS_4, FLOATS), "ROITensor": ((2, 3, 4), FLOATS),
             "BatchIndicesTensor": ((1, 2, 3, 4), (UINT64, UINT32)), "OutputTensor": (DIMS_4, FLOATS)}),
    ("3_0", {"InputTensor": (DIMS_4, FLOATS), "ROITensor": ((2, 3, 4), FLOATS),
             "BatchIndicesTensor": ((1, 2, 3, 4), (UINT32,)), "OutputTensor": (DIMS_4, FLOATS)}),
)
_ROI_ALIGN1_ROWS = rows(
    ("5_0", {"InputTensor": (DIMS_4, FLOATS), "ROITensor": ((2, 3, 4), FLOATS),
             "BatchIndicesTensor": ((1, 2, 3, 4), (UINT64, UINT32)), "OutputTensor": (DIMS_4, FLOATS)}),
    ("4_0", {"InputTensor": (DIMS_4, FLOATS), "ROITensor": ((2, 3, 4), FLOATS),
             "BatchIndicesTensor": ((1, 2, 3, 4), (UINT32,)), "OutputTensor": (DIMS_4, FLOATS)}),
)


def roi_align_shape(query: ShapeQuery) -> dict:
    shape, rois, batches = (query.shape(name) for name in ("InputTensor", "ROITensor", "BatchIndicesTensor"))
    if rois[-1] != 4 or any(size != 1 for size in rois[:-2]):
        raise RuleViolation(f"ROITensor Sizes {describe_sizes(rois)} are not {{ NumROIs, 4 }}, {{ 1, NumROIs, 4 }} "
                            "or { 1, 1, NumROIs, 4 } (each ROI is [x1, y1, x2, y2])")
    count = rois[-2]
    if batches[-1] != count or any(size != 1 for size in batches[:-1]):
        raise RuleViolation(f"BatchIndicesTensor Sizes {describe_sizes(batches)} are not {{ NumROIs }} (or with "
                            f"leading 1s) for ROITensor's {count} regions")
    minimum, maximum = query.parameters["MinimumSamplesPerOutput"], query.parameters["MaximumSamplesPerOutput"]
    if minimum > maximum:
        raise RuleViolation(f"MinimumSamplesPerOutput {minimum} is above MaximumSamplesPerOutput {maximum}")
    given = query.given_outputs.get("OutputTensor")
    if given is None:
        raise InputError("ROI_ALIGN takes the output's height and width from OutputTensor's Sizes: give them with "
                         "--output-shape (output_shape= in the API), { NumROIs, ChannelCount, OutputHeight, "
                         "OutputWidth }")
    given = tuple(given)
    if len(given) != 4 or given[:2] != (count, shape[1]):
        raise RuleViolation(f"OutputTensor Sizes {describe_sizes(given)} are not {{ NumROIs {count}, ChannelCount "
                            f"{shape[1]}, OutputHeight, OutputWidth }}")
    return {"OutputTensor": given}


class SampleAxis(Frozen):
    """One axis of one region's samples (out_size * samples of them, output-major), host NumPy arrays."""

    samples: int  # per output element
    outside: np.ndarray  # bool: the sample reads OutOfBoundsInputValue
    low: np.ndarray  # int64: the neighbour at or below the (clamped) coordinate
    high: np.ndarray  # int64: the neighbour above it (low itself at the last element)
    weight: np.ndarray  # float32: the high neighbour's share (0 at the last element)
    nearest: np.ndarray  # int64: NEAREST_NEIGHBOR's element
    # float32: d(the coordinate a sample reads) / d(its position): 1 where the clamp lets the position through,
    # 0 where it holds the sample at the first or last element or the sample is outside (what a gradient
    # with respect to the region's corners needs)
    slope: np.ndarray
    # float64: d(position) / d(last corner); d(position) / d(first corner) is 1 - this (the sample's fraction of
    # the region, from the position formula; it does not depend on the corners themselves)
    fraction: np.ndarray

    def __init__(self, samples, outside, low, high, weight, nearest, slope, fraction) -> None:
        vars(self).update(samples=samples, outside=outside, low=low, high=high, weight=weight, nearest=nearest,
                          slope=slope, fraction=fraction)


def sample_axis(first, last, out_size, size, params, align) -> SampleAxis:
    """One axis of one region: each sample's input coordinate, the two neighbours and weight of each (ONNX's
    RoiAlign bilinear rule: a sample below -1 or past `size` is out of bounds, the others clamped to
    [0, size - 1]), and the samples per output element."""
    region = last - first
    wanted = math.ceil(abs(region) / out_size) if math.isfinite(region) else 0  # NaN/inf corners: the fewest
    samples = int(min(max(wanted, params["MinimumSamplesPerOutput"]), params["MaximumSamplesPerOutput"]))
    total = out_size * samples
    index = np.arange(total, dtype=np.float64)
    # ROI_ALIGN has no offset fields: its pixels are centred, as ROI_ALIGN1's 0.5 and -0.5.
    input_offset, output_offset = params.get("InputPixelOffset", 0.5), params.get("OutputPixelOffset", -0.5)
    if align and total > 1:
        position = index * (region / (total - 1)) + first - input_offset
        fraction = index / (total - 1)
    else:
        position = (index - output_offset) * (region / total) + first - input_offset
        fraction = (index - float(output_offset)) / total
    with np.errstate(all="ignore"):
        position = position.astype(np.float32)
    outside = ~((position >= -1.0) & (position <= size))  # NaN (from NaN or infinite corners) is outside too
    position = np.where(outside, np.float32(0), position)
    clamped = np.maximum(position, np.float32(0))
    low = np.floor(clamped).astype(np.int64)
    at_edge = low >= size - 1
    low = np.minimum(low, size - 1)
    high = np.where(at_edge, low, low + 1)
    weight = np.where(at_edge, np.float32(0), clamped - low.astype(np.float32)).astype(np.float32)
    nearest = np.minimum(np.floor(clamped + np.float32(0.5)).astype(np.int64), size - 1)
    slope = (~outside & ~at_edge & (position >= 0)).astype(np.float32)
    return SampleAxis(samples, outside, low, high, weight, nearest, slope, fraction)


def bilinear_terms(xp, plane, y: SampleAxis, x: SampleAxis):
    """Each sample's four neighbours (planes of { ChannelCount, y samples, x samples }) with their FLOAT32 weights,
    in the order ROI_ALIGN adds them: top-left, top-right, bottom-left, bottom-right."""
    top, bottom = xp.take(plane, xp.asarray(y.low), axis=1), xp.take(plane, xp.asarray(y.high), axis=1)
    lx, hx = xp.asarray(x.low), xp.asarray(x.high)
    wy, wx = xp.asarray(y.weight)[:, None], xp.asarray(x.weight)[None, :]
    one = xp.float32(1)
    yield (one - wy) * (one - wx), xp.take(top, lx, axis=2)
    yield (one - wy) * wx, xp.take(top, hx, axis=2)
    yield wy * (one - wx), xp.take(bottom, lx, axis=2)
    yield wy * wx, xp.take(bottom, hx, axis=2)


# The most bytes one region's samples may take (every sample of every channel, a few FLOAT32 arrays of them).
SAMPLE_GRID_BYTES = 2**30


def check_sample_grid(region_index, y_axis, x_axis, channels, params) -> None:
    """Refuse, before allocating it, a region whose samples would not fit SAMPLE_GRID_BYTES (a huge region with
    the adaptive count: DirectML loops over them, dmlcli holds them at once)."""
    counts = []
    for first, last, out_size in (y_axis, x_axis):
        region = last - first
        wanted = math.ceil(abs(region) / out_size) if math.isfinite(region) else 0
        counts.append(out_size * min(max(wanted, params["MinimumSamplesPerOutput"]),
                                     params["MaximumSamplesPerOutput"]))
    needed = 4 * 4 * channels * counts[0] * counts[1]
    if needed > SAMPLE_GRID_BYTES:
        raise InputError(f"ROI {region_index} takes {counts[0]} x {counts[1]} samples per channel "
                         f"({needed / 2**30:.1f} GiB of work for its {channels} channels, above dmlcli's "
                         f"{SAMPLE_GRID_BYTES // 2**30} GiB per region); lower MaximumSamplesPerOutput "
                         "(--maximum-samples-per-output) or the region's size")


def region_samples(xp, plane, y: SampleAxis, x: SampleAxis, linear: bool, fill):
    """The value every sample of one region reads from `plane` ({ ChannelCount, H, W }, FLOAT32): bilinear or
    nearest, OutOfBoundsInputValue `fill` outside the input; { ChannelCount, y samples, x samples }."""
    if linear:
        values = None
        for weight, neighbour in bilinear_terms(xp, plane, y, x):
            if values is None:
                values = weight * neighbour
            else:
                values += weight * neighbour
    else:
        values = xp.take(xp.take(plane, xp.asarray(y.nearest), axis=1), xp.asarray(x.nearest), axis=2)
    return xp.where(xp.asarray(y.outside[:, None] | x.outside[None, :]), fill, values)


def region_corners(roi, params) -> tuple[float, float, float, float]:
    """One ROI's [x1, y1, x2, y2] in input coordinates: each a FLOAT32 product with SpatialScaleX or Y."""
    sx, sy = np.float32(params["SpatialScaleX"]), np.float32(params["SpatialScaleY"])
    return tuple(float(v) for v in (roi[0] * sx, roi[1] * sy, roi[2] * sx, roi[3] * sy))


def roi_align_kernel(xp, inputs, outputs, params):
    x, rois, batches = inputs
    (out,) = outputs
    host_rois = np.asarray(rois.get() if hasattr(rois, "get") else rois, dtype=np.float32).reshape(-1, 4)
    host_batches = np.asarray(batches.get() if hasattr(batches, "get") else batches).reshape(-1)
    out_h, out_w = out.shape[2:]
    result = xp.empty(out.shape, dtype=xp.float32)
    align = bool(params.get("AlignRegionsToCorners", False))
    linear = params["InterpolationMode"] == "LINEAR"
    fill = xp.float32(params["OutOfBoundsInputValue"])
    for r, (roi, batch) in enumerate(zip(host_rois, host_batches)):
        x1, y1, x2, y2 = region_corners(roi, params)
        plane = x[int(batch)].astype(xp.float32, copy=False) if int(batch) < x.shape[0] else None
        if plane is None:  # a batch index past the input: every sample is out of bounds
            result[r] = fill
            continue
        check_sample_grid(r, (y1, y2, out_h), (x1, x2, out_w), x.shape[1], params)
        y_axis = sample_axis(y1, y2, out_h, x.shape[2], params, align)
        x_axis = sample_axis(x1, x2, out_w, x.shape[3], params, align)
        grouped = region_samples(xp, plane, y_axis, x_axis, linear, fill).reshape(
            x.shape[1], out_h, y_axis.samples, out_w, x_axis.samples)
        if params["ReductionFunction"] == "MAX":
            result[r] = xp.max(grouped, axis=(2, 4))
        else:
            result[r] = xp.sum(grouped, axis=(2, 4), dtype=xp.float32) / xp.float32(y_axis.samples * x_axis.samples)
    return (result.astype(out.data_type.numpy_dtype, copy=False),)


# ---------------------------------------------------------------- entries

_SIZES_NOTE = ("InputTensor is { N, C, H, W } or { N, C, D, H, W }; Strides, WindowSize, StartPadding, EndPadding"
               "{dilations} have one value per spatial dimension (DimensionCount = 2 or 3, the input's DimensionCount "
               "- 2). OutputTensor's Sizes are { N, C, (PaddedSize - Extent) / Strides + 1, ... }, PaddedSize being "
               "Sizes + StartPadding + EndPadding and Extent (WindowSize - 1) * Dilations + 1 (WindowSize without "
               "Dilations; the MAX_POOLING2 page's formula leaves the dilation out, which would read past the "
               "padded input).")
_DEFAULTS_NOTE = ("The API and the command line may leave out Strides (1), StartPadding and EndPadding (0){dil}; "
                  "WindowSize is required. A DxDispatch model gives every field, as DirectML needs them.")
_ONLY_PADDING_NOTE = ("A window that reads nothing but padding is refused (exit 3; the pages are silent, and such a "
                      "window has no maximum, and no average without IncludePadding).")
_F16 = "FLOAT16 and FLOAT32 inputs are summed in FLOAT32 (window elements in row-major order) and rounded once."
_MAX_NOTE = ("The maximum is a selection, exact: NaN is skipped, as ELEMENT_WISE_MAX returns the non-NaN operand "
             "(dmlcli's rule for selections, the pages being silent), NaN only where every element read is NaN. "
             "Padding takes no part (it is never the maximum).")
_INDICES_NOTE = ("OutputIndicesTensor (the page's optional output, _Maybenull_ in DirectML.h) is computed and "
                 "returned with OutputTensor unless the call leaves it out (outputs=(\"OutputTensor\",), --outputs "
                 "OutputTensor, a DxDispatch desc without it: then only the maxima are computed, as MAX_POOLING's); "
                 "by default a call has two outputs (-o out.npz writes both, -o - prints both). It holds the flat, "
                 "row-major index into the whole InputTensor of each maximum, the first encountered (row-major within "
                 "the window) among equal values, as the page says; a window of nothing but NaN gives its first "
                 "input element. Its type is chosen with --output-dtype (UINT32 by default; UINT64 from 5_0).")


def _dilated(text: str, dilations: bool) -> str:
    return text.replace("{dilations}", " and Dilations" if dilations else "").replace(
        "{dil}", ", Dilations (1)" if dilations else "")


def _pool_entry(name, enum_value, summary, formula, support, parameters, kernel, notes, dilations, **extra):
    return Operator(
        name=name, enum_value=enum_value, family=FAMILY, prefix="", summary=summary, formula=formula,
        introduced=support[-1].level, inputs=("InputTensor",), support=support, same_data_type=IO, same_sizes=(),
        cpu_kernel=None, cuda_body="", parameters=parameters, array_kernel=kernel,
        notes=(_dilated(_SIZES_NOTE, dilations), _dilated(_DEFAULTS_NOTE, dilations), _ONLY_PADDING_NOTE) + notes,
        work=window_work, **{"shape_rule": pooling_shape, **extra})


# Bytes an output element takes besides the output (_window_scratch): a FLOAT32 sum; a sum and a term (LP's power);
# the first zero's masks; with indices also an INT32 tap, two masks and two INT64 index arrays.
_AVERAGE_SCRATCH = _window_scratch(4, per_input=4)
_LP_SCRATCH = _window_scratch(8, per_input=8)
_MAX_SCRATCH = _max_scratch(3)
_MAX_INDICES_SCRATCH = _max_scratch(26)


_AVERAGE_TOLERANCE = Tolerance(
    "ulp", 1, 1, "WebNN's averagePool2d tolerance (web-platform-tests webnn/resources/utils.js, "
                 "getPoolingOperatorsPrecisionTolerance): N + 2 ULP for a window of N elements",
    floor_float32=2.0 ** -20,
    floor_source="dmlcli's choice, 2^-20 (9.5e-7) for FLOAT32: a window of values of both signs averages near 0, "
                 "where the FLOAT32 sum's rounding error (relative to the sum of |x|, not to the result) is many ULP "
                 "of the result; the floor covers unit-scale data (|x| up to a few), as ONNX's node tests hold. "
                 "FLOAT16 sums in FLOAT32 and rounds once: its floor is the plain underflow one")
_LP_TOLERANCE = Tolerance(
    "ulp", 1, 1, "WebNN's l2Pool2d tolerance (web-platform-tests webnn/resources/utils.js, "
                 "getPoolingOperatorsPrecisionTolerance): N + 2 ULP for a window of N elements, for P of 1 and 2; "
                 "2N + 4 for other P (dmlcli's choice: the power and the root round twice more)")
_AVERAGE_FORMULA = ("OutputTensor[n, c, o] = sum(window elements) / (IncludePadding ? WindowSize product : the input "
                    "elements in the window)")
_INCLUDE_NOTE = ("IncludePadding true: padding counts as zeros and the divisor is the product of WindowSize; false: "
                 "the divisor is the number of input elements the window reads.")
_LP_FORMULA = "OutputTensor[n, c, o] = (sum(|x|^P for x in the window))^(1/P); padding adds 0"
_LP_NOTE = ("P must be at least 1 (the page: usually 1 or 2). |x| is taken before the power, as ONNX's LpPool does, "
            "so odd P give a norm; P = 1 sums |x|, P = 2 takes sqrt of the sum of squares, other P use pow.")
_MAX_FORMULA = "OutputTensor[n, c, o] = max(window elements), padding ignored"

AVERAGE_POOLING = _pool_entry(
    "AVERAGE_POOLING", 56, "the average of each sliding window (4-D or 5-D input)", _AVERAGE_FORMULA, AVERAGE_ROWS,
    _PLAIN + (INCLUDE_PADDING,), average_kernel, (_INCLUDE_NOTE, _F16), dilations=False, exactness=APPROXIMATE,
    gpu_array_kernel=average_gpu_kernel,
    tolerance=_AVERAGE_TOLERANCE, tolerance_scale=average_tolerance_scale, sum_bound=AVERAGE_SUM_BOUND,
    scratch=_AVERAGE_SCRATCH)
AVERAGE_POOLING1 = _pool_entry(
    "AVERAGE_POOLING1", 166, "the average of each sliding, dilated window (4-D or 5-D input)", _AVERAGE_FORMULA,
    _AVERAGE1_ROWS, _DILATED + (INCLUDE_PADDING,), average_kernel,
    (_INCLUDE_NOTE, _F16, "No stored page describes AVERAGE_POOLING1: its fields are DirectML.h's, its level 6_2 "
                          "(DML_TARGET_VERSION 0x6200) and its support AVERAGE_POOLING's table, dmlcli's reading."),
    dilations=True, exactness=APPROXIMATE, tolerance=_AVERAGE_TOLERANCE, tolerance_scale=average_tolerance_scale,
    scratch=_AVERAGE_SCRATCH, gpu_array_kernel=average_gpu_kernel, sum_bound=AVERAGE_SUM_BOUND)
LP_POOLING = _pool_entry(
    "LP_POOLING", 57, "the Lp norm of each sliding window (4-D or 5-D input)", _LP_FORMULA, _LP_ROWS, _PLAIN + (P,),
    lp_kernel, (_LP_NOTE, _F16), dilations=False, exactness=APPROXIMATE, tolerance=_LP_TOLERANCE,
    tolerance_scale=lp_tolerance_scale, scratch=_LP_SCRATCH, gpu_array_kernel=lp_gpu_kernel)
LP_POOLING1 = _pool_entry(
    "LP_POOLING1", 165, "the Lp norm of each sliding, dilated window (4-D or 5-D input)", _LP_FORMULA, _LP1_ROWS,
    _DILATED + (P,), lp_kernel,
    (_LP_NOTE, _F16, "No stored page describes LP_POOLING1: its fields are DirectML.h's, its level 6_2 "
                     "(DML_TARGET_VERSION 0x6200) and its support LP_POOLING's table, dmlcli's reading."),
    dilations=True, exactness=APPROXIMATE, tolerance=_LP_TOLERANCE, tolerance_scale=lp_tolerance_scale,
    scratch=_LP_SCRATCH, gpu_array_kernel=lp_gpu_kernel)
MAX_POOLING = _pool_entry(
    "MAX_POOLING", 58, "the maximum of each sliding window (4-D or 5-D input)", _MAX_FORMULA, _MAX_ROWS, _PLAIN,
    max_kernel, (_MAX_NOTE,), dilations=False, exactness=EXACT, native_encoding=False,
    gpu_array_kernel=max_gpu_kernel, scratch=_MAX_SCRATCH)
MAX_POOLING1 = _pool_entry(
    "MAX_POOLING1", 91, "the maximum of each sliding window and its index in the input", _MAX_FORMULA, _MAX1_ROWS,
    _PLAIN, max_kernel, (_MAX_NOTE, _INDICES_NOTE), dilations=False, exactness=EXACT,
    gpu_array_kernel=max_gpu_kernel, extra_outputs=("OutputIndicesTensor",), default_output_type=UINT32,
    optional_outputs=("OutputIndicesTensor",),
    scratch=_MAX_INDICES_SCRATCH,
    shape_rule=max_pooling_indices_shape)
MAX_POOLING2 = _pool_entry(
    "MAX_POOLING2", 110, "the maximum of each sliding, dilated window and its index in the input", _MAX_FORMULA,
    _MAX2_ROWS, _DILATED, max_kernel, (_MAX_NOTE, _INDICES_NOTE), dilations=True, exactness=EXACT,
    gpu_array_kernel=max_gpu_kernel, extra_outputs=("OutputIndicesTensor",), default_output_type=UINT32,
    optional_outputs=("OutputIndicesTensor",),
    scratch=_MAX_INDICES_SCRATCH,
    shape_rule=max_pooling_indices_shape)

MAX_UNPOOLING = Operator(
    name="MAX_UNPOOLING", enum_value=92, family=FAMILY, prefix="",
    summary="scatters each value to the flat index IndicesTensor gives it in a zero-filled output (undoes a max "
            "pooling)",
    formula="OutputTensor (flat) = 0; OutputTensor[IndicesTensor[i]] = InputTensor[i] for every i",
    introduced=_UNPOOL_ROWS[-1].level, inputs=("InputTensor", "IndicesTensor"), support=_UNPOOL_ROWS,
    same_data_type=IO, same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(), shape_rule=unpooling_shape,
    array_kernel=unpooling_kernel, exactness=EXACT, native_encoding=True,
    notes=("DirectML takes OutputTensor's Sizes from its tensor desc: a DxDispatch model gives them; in the API and "
           "on the command line --output-shape (output_shape=) states them. They keep InputTensor's batch and "
           "channel sizes (dmlcli's check; the page says only 'the same number of dimensions').",
           "IndicesTensor has InputTensor's Sizes; its values are flat, row-major indices into the whole "
           "OutputTensor (a max pooling's OutputIndicesTensor).",
           "Where the page is silent: an index past the output's element count is skipped (as a scatter skips an "
           "out-of-range index); several values for one index: the last in row-major order is written. Values "
           "are copied bit for bit."),
)

ROI_POOLING = Operator(
    name="ROI_POOLING", enum_value=59, family=FAMILY, prefix="",
    summary="the maximum over each of PooledSize bins of each region of interest (Fast R-CNN's ROI pooling)",
    formula="OutputTensor[r, c, i, j] = max(InputTensor[BatchID, c, y, x] over the bin (i, j) of ROI r, its "
            "corners round(coordinate * SpatialScale))",
    introduced=_ROI_ROWS[-1].level, inputs=("InputTensor", "ROITensor"), support=_ROI_ROWS,
    same_data_type=("InputTensor", "ROITensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(SPATIAL_SCALE, POOLED_SIZE), shape_rule=roi_pooling_shape, array_kernel=roi_pooling_kernel,
    exactness=EXACT,
    notes=("ROITensor is { 1, 1, NumROIs, 5 }, each ROI [BatchID, x1, y1, x2, y2] with inclusive corners; the "
           "output is { NumROIs, ChannelCount, PooledSize.Height, PooledSize.Width }. --pooled-size takes H,W; a "
           "DxDispatch desc's DML_SIZE_2D {\"Width\", \"Height\"} object is read too.",
           "The page's formulas, in integers: corners round(coordinate * SpatialScale) (halves away from zero, as "
           "C's round; the product in FLOAT32), RegionHeight = y2 - y1 + 1, StartY = Y * RegionHeight / "
           "PooledSize.Height + y1, EndY = ((Y + 1) * RegionHeight + PooledSize.Height - 1) / PooledSize.Height + "
           "y1 (floor divisions), then clamped to the input, as the page says.",
           "Where the page is silent (dmlcli's choices, after Caffe's ROI pooling): a region with x2 < x1 or y2 < y1 "
           "counts as 1 element wide; a bin clamped to nothing gives 0; a BatchID (truncated toward zero) outside "
           "[0, BatchCount) gives 0s for its region, and so does a NaN or infinite corner. The maximum skips NaN "
           "(NaN only where every element of the "
           "bin is NaN), as the family's other maxima: an input value, exact."),
)

_ROI_ALIGN_NOTES = (
    "ROITensor is { NumROIs, 4 } (or with leading 1s), each ROI [x1, y1, x2, y2]; BatchIndicesTensor { NumROIs } "
    "(or with leading 1s). DirectML takes the output's { NumROIs, ChannelCount, OutputHeight, OutputWidth } from "
    "its desc: --output-shape (output_shape=) states them.",
    "dmlcli's reading of the page's pseudo-code (it has typos: the Y scale computed from X, a sample loop to <= "
    "that would take one sample too many): along each axis, samples = clamp(ceil(|scaled region size| / output "
    "size), MinimumSamplesPerOutput, MaximumSamplesPerOutput); sample s (0 to output size * samples - 1) sits at "
    "(s - OutputPixelOffset) * region size / (output size * samples) + scaled x1 - InputPixelOffset (with "
    "AlignRegionsToCorners, s * region size / (output size * samples - 1) + scaled x1 - InputPixelOffset: the "
    "first and last samples on the corners), computed in double precision and rounded once to FLOAT32 (the "
    "scaled corners in FLOAT32). Inverted regions (x2 < x1) read mirrored, as the page says.",
    "A sample reads as ONNX's RoiAlign reads (the page does not say): below -1 or past the input's size in either "
    "dimension it reads OutOfBoundsInputValue; otherwise its coordinates are clamped to the input and LINEAR "
    "blends the 4 neighbours (weights in FLOAT32, the order of ONNX's reference), NEAREST_NEIGHBOR takes the "
    "element at floor(coordinate + 0.5). AVERAGE sums the samples in FLOAT32 and divides by their count; MAX "
    "takes the largest interpolated value (the page's pseudo-code). NaN propagates. FLOAT16 is computed in "
    "FLOAT32 and rounded once. A batch index past the input reads OutOfBoundsInputValue (the page: undefined), "
    "and so does a sample whose position is NaN (a NaN or infinite corner). A region whose samples would take "
    "more than 1 GiB at once (a huge region with the adaptive count) is refused (exit 2): lower "
    "MaximumSamplesPerOutput.",
)
_ROI_ALIGN_TOLERANCE = Tolerance(
    "ulp", 32, 32, "dmlcli's choice (WebNN has no ROI align): each sample is a blend of 4 values (about 7 "
                   "roundings) and each output an average of samples; 32 ULP",
    floor_float32=2.0 ** -20,
    floor_source="dmlcli's choice, 2^-20 (9.5e-7) for FLOAT32, as AVERAGE_POOLING's: blends and averages of "
                 "values of both signs near 0 carry rounding errors relative to the values blended")

ROI_ALIGN = Operator(
    name="ROI_ALIGN", enum_value=139, family=FAMILY, prefix="",
    summary="resamples each region of interest to the output's height and width (Mask R-CNN's ROI align)",
    formula="OutputTensor[r, c, i, j] = ReductionFunction(interpolate(InputTensor[BatchIndices[r], c], sample) for "
            "the samples of (i, j) in ROI r)",
    introduced=_ROI_ALIGN_ROWS[-1].level, inputs=("InputTensor", "ROITensor", "BatchIndicesTensor"),
    support=_ROI_ALIGN_ROWS, same_data_type=("InputTensor", "ROITensor", "OutputTensor"), same_sizes=(),
    cpu_kernel=None, cuda_body="",
    parameters=(ROI_REDUCTION, INTERPOLATION, SPATIAL_SCALE_X, SPATIAL_SCALE_Y, OUT_OF_BOUNDS, MINIMUM_SAMPLES,
                MAXIMUM_SAMPLES),
    shape_rule=roi_align_shape, array_kernel=roi_align_kernel, exactness=APPROXIMATE, tolerance=_ROI_ALIGN_TOLERANCE,
    notes=_ROI_ALIGN_NOTES + ("ROI_ALIGN is ROI_ALIGN1 with InputPixelOffset 0.5, OutputPixelOffset -0.5 and "
                              "AlignRegionsToCorners false (ROI_ALIGN1's page says so).",),
)
ROI_ALIGN1 = Operator(
    name="ROI_ALIGN1", enum_value=149, family=FAMILY, prefix="",
    summary="resamples each region of interest to the output's height and width, with pixel offsets and corner "
            "alignment",
    formula=ROI_ALIGN.formula, introduced=_ROI_ALIGN1_ROWS[-1].level,
    inputs=("InputTensor", "ROITensor", "BatchIndicesTensor"), support=_ROI_ALIGN1_ROWS,
    same_data_type=("InputTensor", "ROITensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(ROI_REDUCTION, INTERPOLATION, SPATIAL_SCALE_X, SPATIAL_SCALE_Y, INPUT_PIXEL_OFFSET,
                OUTPUT_PIXEL_OFFSET, OUT_OF_BOUNDS, MINIMUM_SAMPLES, MAXIMUM_SAMPLES, ALIGN_TO_CORNERS),
    shape_rule=roi_align_shape, array_kernel=roi_align_kernel, exactness=APPROXIMATE, tolerance=_ROI_ALIGN_TOLERANCE,
    notes=_ROI_ALIGN_NOTES,
)

OPERATORS = (AVERAGE_POOLING, AVERAGE_POOLING1, LP_POOLING, LP_POOLING1, MAX_POOLING, MAX_POOLING1, MAX_POOLING2,
             MAX_UNPOOLING, ROI_POOLING, ROI_ALIGN, ROI_ALIGN1)
