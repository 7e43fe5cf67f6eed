"""Hooks: an operator's own look at the values of a call, to warn about results that may differ on Windows.

A hook counts something in the inputs (whole tensors, or chunk by chunk when streamed; each
element counted once per output element it reaches) and turns the total into one warning. The
engine runs an operator's hooks on every route (a whole run, a streamed run, a dispatch), so the
warning reads the same everywhere.
"""

from __future__ import annotations

from typing import Mapping, Protocol

import numpy as np

from ...data_types import DataType
from ...records import Frozen


class Hook(Protocol):
    tensors: tuple[str, ...]  # the inputs the hook reads

    def count(self, arrays: Mapping[str, np.ndarray], data_types: Mapping[str, DataType], out_shape) -> int:
        """How many output elements the hook has something to say about, in these (possibly partial) inputs."""

    def message(self, operator_name: str, total: int, elements: int, data_types: Mapping[str, DataType]) -> str:
        """The warning for `total` of `elements` output elements."""


class ShiftCountCheck(Frozen):
    """Shift counts at or past the element width: dmlcli gives 0, DirectML hardware is reported to mask them."""

    counts: str  # the input holding the shift counts

    def __init__(self, counts: str) -> None:
        vars(self).update(counts=counts)

    @property
    def tensors(self) -> tuple[str, ...]:
        return (self.counts,)

    def count(self, arrays, data_types, out_shape) -> int:
        too_big = np.asarray(arrays[self.counts]) >= data_types[self.counts].bits
        if out_shape is not None:
            too_big = np.broadcast_to(too_big, out_shape)
        return int(np.count_nonzero(too_big))

    def message(self, operator_name, total, elements, data_types) -> str:
        width = data_types[self.counts].bits
        return (f"{operator_name}: {total} of {elements} shift counts are >= the element width {width}; dmlcli "
                "gives 0 for them (DirectML hardware is reported to mask such counts)")
