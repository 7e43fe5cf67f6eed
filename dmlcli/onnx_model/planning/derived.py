"""How a planned node's array is made again from one of the node's runtime inputs (planned.py keeps one per array):

- Derived: the input itself, a reshape of it, or a view of its memory with Sizes and Strides of its own;
- Copied: a C-ordered copy of such a view, then the input itself, a reshape or a view of that copy: the array a
  lean run makes where it does not run a node that moves data (IDENTITY, GATHER, SLICE: Operator.moves_input), whose
  output is such a copy (copies.py).

Where a chain of such nodes is read through, their views are composed into one (composed): the element positions
the chain reads, worked out once on an array of positions, laid out as one view's Sizes and Strides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# The most elements whose positions a plan lays out (an int64 array of them, once per chain): a copy of a larger
# tensor costs far more than the node's call it would save.
LARGEST_LAID_OUT = 1 << 22


@dataclass(frozen=True)
class Derived:
    """An array made from one runtime input: the input itself (shape None), a reshape of the C-ordered input
    (strides None), or a view of the input's memory at `offset` bytes with its own Sizes and Strides."""

    position: int
    shape: tuple[int, ...] | None = None
    strides: tuple[int, ...] | None = None
    offset: int = 0
    dtype: np.dtype | None = None

    def of(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        return self.on(inputs[self.position])

    def on(self, array: np.ndarray) -> np.ndarray:
        """The array made of `array` (the input at `position`)."""
        if self.shape is None:
            return array
        if self.strides is None:
            return array.reshape(self.shape)
        return np.ndarray(self.shape, self.dtype, buffer=array, offset=self.offset, strides=self.strides)


@dataclass(frozen=True)
class Copied:
    """An array made of a C-ordered copy of `source` (a Derived of the runtime input at its position, a view with
    Strides of its own): the copy itself (`then` None), or `then` made of it (its position unused: a reshape of the
    copy, or a view of the copy's memory)."""

    source: Derived
    then: Derived | None = None

    @property
    def position(self) -> int:
        return self.source.position

    def of(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        copy = self.source.of(inputs).copy()
        return copy if self.then is None else self.then.on(copy)


def positions_of(item: Derived, shape: tuple[int, ...]) -> np.ndarray | None:
    """The element positions `item` reads of a C-ordered input of `shape` (int64, C order), or None where it reads
    the input's memory with another type or there are more than LARGEST_LAID_OUT of them."""
    count = math.prod(shape)
    if count > LARGEST_LAID_OUT:
        return None
    return _laid_over(item, np.arange(count, dtype=np.int64).reshape(shape))


def _laid_over(item: Derived, positions: np.ndarray) -> np.ndarray | None:
    """`item` made of an int64 array of positions standing for its input (its Strides and offset in the input's
    elements, not bytes): None where they are not whole elements of the input's type."""
    if item.shape is None or item.strides is None:
        return item.on(positions)
    size = item.dtype.itemsize
    if item.offset % size or any(stride % size for stride in item.strides):
        return None
    wide = positions.itemsize
    return np.ndarray(item.shape, np.int64, buffer=positions, offset=item.offset // size * wide,
                      strides=tuple(stride // size * wide for stride in item.strides))


def as_view(positions: np.ndarray, shape: tuple[int, ...], dtype: np.dtype, position: int) -> Derived | None:
    """A Derived of a C-ordered input of `shape` and `dtype` whose elements are those at `positions` (an array of
    element positions in the input), or None where no single view reads them (no offset and Strides give them all,
    or one lies outside the input)."""
    if positions.size == 0:
        return None
    rank = positions.ndim
    first = int(positions[(0,) * rank])
    steps = tuple(int(positions[tuple(1 if axis == k else 0 for axis in range(rank))]) - first if n > 1 else 0
                  for k, n in enumerate(positions.shape))
    low = first + sum(min(0, (n - 1) * s) for n, s in zip(positions.shape, steps))
    high = first + sum(max(0, (n - 1) * s) for n, s in zip(positions.shape, steps))
    if low < 0 or high >= math.prod(shape):
        return None
    expected = np.full(positions.shape, first, np.int64)
    for axis, (n, s) in enumerate(zip(positions.shape, steps)):
        if s:
            expected += np.arange(n, dtype=np.int64).reshape([n if a == axis else 1 for a in range(rank)]) * s
    if not np.array_equal(expected, positions):
        return None
    size = dtype.itemsize
    return Derived(position, tuple(positions.shape), tuple(s * size for s in steps), first * size, dtype)


def composed(outer: Derived, inner: Derived, shape: tuple[int, ...], dtype: np.dtype) -> Derived | None:
    """One view of a C-ordered input of `shape` and `dtype` (at inner's position) reading what `outer` reads of a
    C-ordered copy of `inner`'s view of that input, or None where no single view does (or the input is too large
    to lay out)."""
    positions = positions_of(inner, shape)
    if positions is None:
        return None
    read = _laid_over(outer, np.ascontiguousarray(positions))
    return None if read is None else as_view(read, shape, dtype, inner.position)
