"""Looking at a tensor that came from elsewhere (`dmlcli show`): counts of special values, in constant memory."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Elements per piece when counting: a few MiB of temporaries whatever the size of a memory-mapped file.
COUNT_CHUNK_ELEMENTS = 1 << 18


@dataclass(frozen=True)
class ValueCounts:
    """How many elements a tensor has, and how many are zero, NaN, +inf, -inf or subnormal (floats only)."""

    elements: int
    zero: int
    nan: int | None = None  # None for integer tensors, which cannot hold these
    positive_infinity: int | None = None
    negative_infinity: int | None = None
    subnormal: int | None = None

    def as_dict(self) -> dict[str, int]:
        names = {"elements": self.elements, "zero": self.zero, "nan": self.nan, "+inf": self.positive_infinity,
                 "-inf": self.negative_infinity, "subnormal": self.subnormal}
        return {name: count for name, count in names.items() if count is not None}

    def describe(self) -> str:
        """One line, e.g. '6 elements: 1 NaN, 1 +inf, 0 -inf, 1 subnormal, 2 zero'."""
        parts = []
        if self.nan is not None:
            parts += [f"{self.nan} NaN", f"{self.positive_infinity} +inf", f"{self.negative_infinity} -inf",
                      f"{self.subnormal} subnormal"]
        parts.append(f"{self.zero} zero")
        return f"{self.elements} element{'s' if self.elements != 1 else ''}: {', '.join(parts)}"


def count_values(array: np.ndarray, chunk_elements: int = COUNT_CHUNK_ELEMENTS) -> ValueCounts:
    """Count the special values of `array` piece by piece, so a memory-mapped .npy of any size is read
    through once in constant memory (the order of the elements does not matter to a count)."""
    flat = np.ravel(array, order="K")  # a view for C- or Fortran-ordered data (memory maps stay maps)
    is_float = array.dtype.kind == "f"
    totals = np.zeros(5, dtype=np.int64)  # zero, nan, +inf, -inf, subnormal
    tiny = np.finfo(array.dtype).tiny if is_float else None
    for start in range(0, flat.size, chunk_elements):
        piece = flat[start:start + chunk_elements]
        totals[0] += np.count_nonzero(piece == 0)
        if is_float:
            totals[1] += np.count_nonzero(np.isnan(piece))
            totals[2] += np.count_nonzero(piece == np.inf)
            totals[3] += np.count_nonzero(piece == -np.inf)
            magnitude = np.abs(piece)
            totals[4] += np.count_nonzero((magnitude < tiny) & (magnitude > 0))
    zero, nan, positive, negative, subnormal = (int(t) for t in totals)
    if not is_float:
        return ValueCounts(elements=int(flat.size), zero=zero)
    return ValueCounts(elements=int(flat.size), zero=zero, nan=nan, positive_infinity=positive,
                       negative_infinity=negative, subnormal=subnormal)
