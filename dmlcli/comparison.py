"""--check: bit-for-bit comparison of a result with an expected tensor."""

from __future__ import annotations

import numpy as np

from .data_types import as_bits
from .rendering import format_value
from .io.npy import to_native

MAX_LISTED = 5


def compare(result: np.ndarray, expected: np.ndarray) -> tuple[str, bool]:
    """(report, equal): PASSED/FAILED, and the first differing elements."""
    result, expected = to_native(result), to_native(expected)
    if expected.dtype != result.dtype:
        return f"FAILED: result dtype {result.dtype} differs from expected dtype {expected.dtype}", False
    if expected.shape != result.shape:
        return f"FAILED: result shape {list(result.shape)} differs from expected shape {list(expected.shape)}", False
    differ = as_bits(result) != as_bits(expected)
    count = int(np.count_nonzero(differ))
    if count == 0:
        return f"PASSED: all {result.size} elements match bit for bit", True
    lines = [f"FAILED: {count} of {result.size} elements differ"]
    for index in list(zip(*np.nonzero(differ)))[:MAX_LISTED]:
        got, want = result[index], expected[index]
        position = "[" + ", ".join(str(int(i)) for i in index) + "]"
        lines.append(f"  at {position}: got {format_value(got, result.dtype, 'table')} "
                     f"({format_value(got, result.dtype, 'hex')}), expected "
                     f"{format_value(want, result.dtype, 'table')} ({format_value(want, result.dtype, 'hex')})")
    if count > MAX_LISTED:
        lines.append(f"  ... and {count - MAX_LISTED} more")
    return "\n".join(lines), False
