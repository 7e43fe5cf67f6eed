"""A tensor padded with a constant, as xp.pad's constant mode pads it, sooner: one fill and one copy (np.pad costs
a small call 25 to 30 us more, a convolution's or a pooling's whole time on small tensors)."""

from __future__ import annotations

from typing import Sequence


def constant_padded(xp, x, pads: Sequence[tuple[int, int]], value=0):
    """`x` with pads[axis] = (before, after) elements of `value` around it along each axis; `x` itself where
    nothing is padded."""
    if not any(before or after for before, after in pads):
        return x
    shape = tuple(size + before + after for size, (before, after) in zip(x.shape, pads))
    padded = xp.full(shape, value, dtype=x.dtype)
    padded[tuple(slice(before, before + size) for size, (before, _) in zip(x.shape, pads))] = x
    return padded
