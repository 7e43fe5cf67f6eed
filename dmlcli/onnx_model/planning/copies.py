"""A planned node that only moves data, seen as a view that copies: its output a C-ordered copy of one view of its
one runtime input, where the plan finds such a view.

ONNX Runtime's DirectML provider runs a Transpose as ELEMENT_WISE_IDENTITY through permuted Strides, a Gather as
GATHER, a Slice as SLICE1: each call copies elements of its input, bits unchanged (the table's moves_input). Where
the call's other inputs are the plan's constants (a Gather's indices), which elements go where is the same on every
run: the plan works it out once by running the planned call on the input's element positions (1, 2, 3, ... in the
input's type, where that type holds them exactly: a zero GATHER writes for an index out of bounds is then no
position) and reads the result as one view's offset, Sizes and Strides (derived.as_view), or finds none (indices
in another order). A lean run (lean.py) then makes a reader's array of a copy of that view of the input instead of
running the node (a runner's call saved: several us a node), and a chain of such nodes (Transpose, Gather,
Transpose, as a Transformer's attention splits its heads) as one copy of their views composed. The bits are the
same: a copy of the same elements.
"""

from __future__ import annotations

import math

import numpy as np

from .derived import LARGEST_LAID_OUT, Copied, as_view
from .planned import PlannedCall, PlannedView, Signature, Wiring, made_again


def copying_view(planned: PlannedCall) -> PlannedView | None:
    """The planned call as a view that copies (its one output a Copied of its one runtime input), or None where it
    is not one: its operator computes (or its ScaleBias does), it reads more than one runtime input, or its output
    is not one view of that input copied C-ordered."""
    wiring = planned.wiring
    if wiring.bool_inputs or wiring.bool_outputs or len(wiring.outputs) != 1 or len(planned.signature.runtime) != 1:
        return None
    call = planned.verdict.call
    moved = call.operator.moved_input(call.parameters)
    if moved is None:
        return None
    ((position, dtype, shape, strides),) = planned.signature.runtime
    index = call.operator.inputs.index(moved)
    item = planned.made[index] if index < len(planned.made) else None
    if getattr(item, "position", None) != position or not _c_ordered(shape, strides, dtype.itemsize):
        return None
    positions = _positions(shape, dtype)
    if positions is None:
        return None
    inputs = [None] * len(wiring.inputs)
    inputs[position] = positions
    for at, value in planned.signature.constants:
        inputs[at] = value
    with np.errstate(all="ignore"):
        results = planned.finish(planned.execute(made_again(planned.made, inputs)))
    ((result_index, name),) = wiring.outputs
    result = results[result_index]
    if not isinstance(result, np.ndarray) or result.dtype != dtype or not result.flags.c_contiguous:
        return None
    moved_positions = result.astype(np.int64)
    if not np.array_equal(moved_positions, result):  # a value that is no position (a NaN, a fraction)
        return None
    found = as_view(moved_positions - 1, shape, dtype, position)
    if found is None:
        return None
    return PlannedView(Wiring(wiring.inputs, (), ((0, name),)), Signature(planned.signature.runtime, ()),
                       (Copied(found),))


def _c_ordered(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether Sizes and Strides lay the elements out in C order (a size-1 axis's Stride is any)."""
    return all(stride == math.prod(shape[axis + 1:]) * itemsize
               for axis, (size, stride) in enumerate(zip(shape, strides)) if size > 1)


def _positions(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """The input's element positions plus 1, in C order and the input's type, or None where that type does not hold
    them all exactly (or there are more than LARGEST_LAID_OUT)."""
    count = math.prod(shape)
    if count > LARGEST_LAID_OUT or count == 0:
        return None
    if dtype.kind == "f":
        exact = 2 ** (np.finfo(dtype).nmant + 1)
    elif dtype.kind in "iu":
        exact = int(np.iinfo(dtype).max)
    else:
        return None
    if count > exact:
        return None
    return np.arange(1, count + 1).astype(dtype).reshape(shape)
