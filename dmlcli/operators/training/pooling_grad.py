"""AVERAGE_POOLING_GRAD and MAX_POOLING_GRAD: the gradients of AVERAGE_POOLING and MAX_POOLING2 with respect to
their input.

Sources: DirectML's pages (MicrosoftDocs/sdk-api, ns-directml-dml_average_pooling_grad_operator_desc.md at
2db4b020 and ns-directml-dml_max_pooling_grad_operator_desc.md at 0d481a2b) for the fields, the example, the tie
rule and the support tables; DirectML.h for the DML_OPERATOR_TYPE values (AVERAGE_POOLING_GRAD 130,
MAX_POOLING_GRAD 131). The window geometry is the pooling family's (pooling/entries.py): the same fields, output
Sizes and refusals.

One kernel for both backends, as the forward's: the gradient is accumulated in a padded FLOAT32 tensor by a loop
over the window's elements in row-major order, each adding the incoming gradient (divided by the window's
divisor, or where that element is the window's maximum) to its strided view, then the padding is cut off. For one
window element the views of different windows are different elements, so each pass adds to distinct elements:
NumPy and CuPy add the same terms in the same order and give the same bits.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOATS
from ..pooling.entries import (DILATIONS, END_PADDING, INCLUDE_PADDING, START_PADDING, STRIDES, WINDOW_SIZE, window_taps,
                               valid_counts, window_views, max_window_taps, pooling_shape, window_geometry,
                               window_maxima, maximum_padded)
from ..table.schema import COMPOSITE, DIMS_4, DIMS_4_TO_5, Operator, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes
from .adjoint import (FAMILY, FORWARD_NAMES, forward_rule, gradient_sum_bound, stated_gradient_sizes,
                      sum_tolerance)

GRADIENTS = ("InputGradientTensor", "OutputGradientTensor")
_MAX_TENSORS = ("InputTensor",) + GRADIENTS

AVERAGE_ROWS = rows(("3_0", DIMS_4_TO_5, {"InputGradientTensor": FLOATS, "OutputGradientTensor": FLOATS}))
_MAX_ROWS = rows(("3_0", DIMS_4, {name: FLOATS for name in _MAX_TENSORS}))


# ---------------------------------------------------------------- shape rules


def _check_pooled(query: ShapeQuery, input_sizes: tuple[int, ...], forward: str, names: dict[str, str]) -> None:
    """The forward pooling of an input of `input_sizes` must give InputGradientTensor's Sizes."""
    incoming = query.shape("InputGradientTensor")
    input_name = names["InputTensor"]
    if len(input_sizes) != len(incoming):
        raise RuleViolation(f"{input_name} has {len(input_sizes)} dimensions and InputGradientTensor "
                            f"{len(incoming)}; they must have the same DimensionCount")
    pooled = tuple(forward_rule(pooling_shape, query, input_sizes, None, names)["OutputTensor"])
    if pooled != tuple(incoming):
        raise RuleViolation(f"InputGradientTensor Sizes {describe_sizes(incoming)} are not the Sizes {forward} gives "
                            f"an input of {input_name}'s Sizes {describe_sizes(input_sizes)} with these windows, "
                            f"{describe_sizes(pooled)}; the incoming gradient has the forward output's Sizes")


def average_grad_shape(query: ShapeQuery) -> dict:
    sizes = stated_gradient_sizes(query, "AVERAGE_POOLING_GRAD", "AVERAGE_POOLING")
    _check_pooled(query, sizes, "AVERAGE_POOLING", FORWARD_NAMES)
    return {"OutputGradientTensor": sizes}


def max_grad_shape(query: ShapeQuery) -> dict:
    sizes = tuple(query.shape("InputTensor"))
    _check_pooled(query, sizes, "MAX_POOLING2", {"InputTensor": "InputTensor", "OutputTensor": "InputGradientTensor"})
    return {"OutputGradientTensor": sizes}


# ---------------------------------------------------------------- how many terms an element sums


def windows_per_element(input_shape, pooled_shape, params) -> int:
    """The most windows that read one input element: per spatial dimension the most window positions that read
    one index, multiplied together (where those meet, that many windows read the element)."""
    geometry = window_geometry(input_shape, params)
    count = 1
    for dim, size in enumerate(input_shape[2:]):
        taps = window_taps(dim, size, pooled_shape[dim + 2], geometry).reshape(-1)
        count *= int(np.bincount(taps[(taps >= 0) & (taps < size)], minlength=1).max())
    return count


def average_grad_tolerance_scale(call) -> int:
    """A term per window that reads the element, each a FLOAT32 division, and their sums: N + 1 for N windows."""
    return windows_per_element(call.tensors["OutputGradientTensor"].shape, call.tensors["InputGradientTensor"].shape,
                               call.parameters) + 1


def max_grad_tolerance_scale(call) -> int:
    """The terms are copies of incoming gradients: N windows whose maximum is the element round N - 1 sums (0
    where the windows do not overlap: an exact result)."""
    return windows_per_element(call.tensors["InputTensor"].shape, call.tensors["InputGradientTensor"].shape,
                               call.parameters) - 1


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)


def _accumulator(xp, input_shape, geometry):
    """A FLOAT32 zero tensor of the padded input's Sizes, and the index of the input within it."""
    padded = tuple(input_shape[:2]) + tuple(size + start + end for size, start, end in
                                           zip(input_shape[2:], geometry["StartPadding"], geometry["EndPadding"]))
    inside = (slice(None), slice(None)) + tuple(slice(start, start + size) for start, size in
                                                zip(geometry["StartPadding"], input_shape[2:]))
    return xp.zeros(padded, dtype=xp.float32), inside


def average_grad_kernel(xp, inputs, outputs, params):
    (incoming,) = inputs
    (out,) = outputs
    geometry = window_geometry(out.shape, params)
    share = incoming.astype(xp.float32)
    if params["IncludePadding"]:
        share = share / xp.float32(math.prod(geometry["WindowSize"]))
    else:
        share = share / valid_counts(xp, out.shape, incoming.shape, geometry)
    total, inside = _accumulator(xp, out.shape, geometry)
    for _, view in window_views(total, geometry, incoming.shape):
        view += share  # a strided view of `total`: each window's element at this offset gets its window's share
    return (xp.ascontiguousarray(total[inside].astype(out.data_type.numpy_dtype, copy=False)),)


def max_grad_kernel(xp, inputs, outputs, params):
    x, incoming = inputs
    (out,) = outputs
    geometry = window_geometry(x.shape, params)
    best = window_maxima(xp, x, geometry, incoming.shape)
    chosen = max_window_taps(xp, x, maximum_padded(xp, x, geometry), best, geometry, incoming.shape)
    gradient = incoming.astype(xp.float32)
    zero = xp.float32(0)
    total, inside = _accumulator(xp, x.shape, geometry)
    for tap, (_, view) in enumerate(window_views(total, geometry, incoming.shape)):
        view += xp.where(chosen == tap, gradient, zero)
    return (xp.ascontiguousarray(total[inside].astype(out.data_type.numpy_dtype, copy=False)),)


# ---------------------------------------------------------------- entries

_GEOMETRY_NOTE = (
    "Strides, WindowSize, StartPadding, EndPadding{dilations} are the forward's (one value per spatial dimension, "
    "DimensionCount = the input's DimensionCount - 2), read and checked by the pooling family's rules; the API and "
    "the command line may leave out Strides (1), the paddings (0){dilation_default}, and WindowSize is required. "
    "InputGradientTensor must have the Sizes {forward} gives {input_name}'s Sizes with them (dmlcli's check: the "
    "page says 'typically').")
_SUM_ORDER = ("Each element's terms are added to a FLOAT32 zero in row-major order of the window element that "
              "reads it (the windows' order of a pass over the window's offsets); FLOAT16 is computed in FLOAT32 "
              "and rounded once.")

AVERAGE_POOLING_GRAD = Operator(
    name="AVERAGE_POOLING_GRAD", enum_value=130, family=FAMILY, prefix="",
    summary="the gradient of AVERAGE_POOLING with respect to its input: each window's incoming gradient shared "
            "among the elements it averaged",
    formula="OutputGradientTensor[i] = sum over the windows w that read i of InputGradientTensor[w] / (IncludePadding "
            "? WindowSize product : the input elements w reads)",
    introduced=AVERAGE_ROWS[-1].level, inputs=("InputGradientTensor",), output="OutputGradientTensor",
    support=AVERAGE_ROWS, same_data_type=GRADIENTS, same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(STRIDES, WINDOW_SIZE, START_PADDING, END_PADDING, INCLUDE_PADDING), shape_rule=average_grad_shape,
    array_kernel=average_grad_kernel, exactness=COMPOSITE,
    tolerance=sum_tolerance("an element's terms (a division each) and their sums"),
    tolerance_scale=average_grad_tolerance_scale,
    sum_bound=gradient_sum_bound(average_grad_tolerance_scale, "N + 1, N the windows that read an element"),
    notes=("The adjoint of dmlcli's AVERAGE_POOLING (the page: 'the weighted contributions of that element to the "
           "OutputTensor'): each window's incoming gradient is divided by the window's divisor (IncludePadding: "
           "the WindowSize product; else the input elements the window reads), one FLOAT32 division, and added "
           "to every input element the window reads; padding receives nothing. " + _SUM_ORDER,
           _GEOMETRY_NOTE.format(dilations="", dilation_default="", forward="AVERAGE_POOLING",
                                 input_name="OutputGradientTensor"),
           "DirectML takes OutputGradientTensor's Sizes from its tensor desc (the forward's input Sizes, which "
           "strides make ambiguous): a DxDispatch model gives them; the API and the command line state them with "
           "--output-shape (output_shape=), required. The same DataType and DimensionCount as InputGradientTensor "
           "(the page).",
           "The page's example (a 2x2 window with stride 1 over 3x3, gradient [[1, 2], [3, 4]] -> [[0.25, 0.75, "
           "0.5], [1, 2.5, 1.5], [0.75, 1.75, 1]]) is what this gives."),
)

MAX_POOLING_GRAD = Operator(
    name="MAX_POOLING_GRAD", enum_value=131, family=FAMILY, prefix="",
    summary="the gradient of MAX_POOLING2 with respect to its input: each window's incoming gradient given to its "
            "maximum element",
    formula="OutputGradientTensor[i] = sum over the windows w whose maximum is InputTensor[i] of "
            "InputGradientTensor[w]; 0 where no window picks i",
    introduced=_MAX_ROWS[-1].level, inputs=("InputTensor", "InputGradientTensor"), output="OutputGradientTensor",
    support=_MAX_ROWS, same_data_type=_MAX_TENSORS, same_sizes=("InputTensor", "OutputGradientTensor"),
    cpu_kernel=None, cuda_body="", parameters=(STRIDES, WINDOW_SIZE, START_PADDING, END_PADDING, DILATIONS),
    shape_rule=max_grad_shape, array_kernel=max_grad_kernel, exactness=COMPOSITE,
    tolerance=sum_tolerance("the sums of an element's terms (copies)"), tolerance_scale=max_grad_tolerance_scale,
    sum_bound=gradient_sum_bound(max_grad_tolerance_scale, "N - 1, N the windows that read an element (0 where "
                                                           "they do not overlap: an exact result, no bound)"),
    notes=("The page: InputTensor determines the index of the largest element of each window, InputGradientTensor's "
           "values are distributed to those indices, summed where they overlap, and every other element is 0. A "
           "tie goes to the lowest logical element index (the page), the first in row-major window order: the "
           "element MAX_POOLING2's OutputIndicesTensor names (pooling family: NaN skipped, a window of nothing but "
           "NaN picks its first input element, padding never the maximum). Each window's incoming gradient goes "
           "to one element, exactly; where windows overlap an element sums several. " + _SUM_ORDER,
           _GEOMETRY_NOTE.format(dilations=" and Dilations", dilation_default=", Dilations (1)",
                                 forward="MAX_POOLING2", input_name="InputTensor"),
           "OutputGradientTensor has InputTensor's Sizes (the page's constraint); all three tensors have one "
           "DataType. The page's support table takes 4 dimensions only (DimensionCount 2), FLOAT32 and FLOAT16.",
           "The page's example (a 2x2 window with stride 1 over [[1, 2, 3], [2, 4, 2], [5, 6, 7]], gradient "
           "[[1, 2], [4, 5]] -> [[0, 0, 0], [0, 3, 0], [0, 4, 5]]) is what this gives."),
)

OPERATORS = (AVERAGE_POOLING_GRAD, MAX_POOLING_GRAD)
