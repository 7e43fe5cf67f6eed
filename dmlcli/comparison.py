"""--check: a result compared with an expected tensor, bit for bit or within the operator's tolerance.

Exact operators and integer outputs are compared bit for bit. Float outputs of operators that are
not exact are compared within the operator's tolerance (operators/schema.py: ULP of the output
type, or an absolute difference); NaN matches NaN and equal infinities match. `--tolerance`
overrides it: ulp:N, atol:X or exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data_types import as_bits
from .errors import InputError
from .io.npy import to_native
from .rendering import format_value

MAX_LISTED = 5


@dataclass(frozen=True)
class Rule:
    """How elements are matched: exactly (kind "exact"), or within `limit` ULP or absolute."""

    kind: str  # "exact", "ulp", "atol" or "allclose" (|got - want| <= limit + rtol*|want|, a test case's)
    limit: float = 0.0
    source: str = ""
    rtol: float = 0.0

    def describe(self) -> str:
        if self.kind == "exact":
            return "bit for bit"
        if self.kind == "allclose":
            return f"within {self.limit:g} + {self.rtol:g}*|expected|"
        return f"within {self.limit:g} ULP" if self.kind == "ulp" else f"within {self.limit:g} absolute"


EXACT = Rule("exact")


def parse_tolerance(text: str) -> Rule:
    """`ulp:N`, `atol:X` or `exact`, as --tolerance takes it."""
    key = str(text).strip().lower()
    if key == "exact":
        return EXACT
    kind, _, number = key.partition(":")
    try:
        limit = float(number)
    except ValueError:
        limit = -1.0
    if kind not in ("ulp", "atol") or not np.isfinite(limit) or limit < 0:
        raise InputError(f"--tolerance {text!r}: expected ulp:N (N >= 0), atol:X (X >= 0) or exact")
    return Rule(kind, limit, "--tolerance")


def rule_for(operator, dtype: np.dtype, override: Rule | None = None, parameters=None) -> Rule:
    """The rule a result of `operator` in `dtype` is checked by: exact for integers and exact operators.

    With a fused activation among the call's `parameters` (ADD1), the activation's tolerance applies.
    """
    if np.dtype(dtype).kind != "f":
        return EXACT
    if override is not None:
        return override
    tolerance = getattr(operator, "tolerance", None)
    for value in (parameters or {}).values():
        fused = value[0] if isinstance(value, tuple) and value else None
        if getattr(fused, "tolerance", None) is not None:
            tolerance = fused.tolerance
    if tolerance is None:
        return EXACT
    return Rule(tolerance.kind, tolerance.for_dtype(np.dtype(dtype)), tolerance.source)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values of the dtype lie between a and b (0 for equal values, +0 and -0 too)."""
    bits = np.dtype(a.dtype).itemsize * 8
    sign = 1 << (bits - 1)

    def ordered(x):
        raw = as_bits(x).astype(np.int64) if bits < 64 else as_bits(x).astype(np.uint64)
        if bits == 64:
            return np.where(raw >= sign, np.float64(sign) - raw.astype(np.float64), raw.astype(np.float64))
        return np.where(raw >= sign, sign - raw, raw)

    return np.abs(ordered(a) - ordered(b))


def compare(result: np.ndarray, expected: np.ndarray, rule: Rule = EXACT) -> tuple[str, bool]:
    """(report, equal): PASSED/FAILED, the counts, the largest errors and the first differing elements."""
    result, expected = to_native(np.asarray(result)), to_native(np.asarray(expected))
    if expected.dtype != result.dtype:
        return f"FAILED: result dtype {result.dtype} differs from expected dtype {expected.dtype}", False
    if expected.shape != result.shape:
        return f"FAILED: result shape {list(result.shape)} differs from expected shape {list(expected.shape)}", False
    if rule.kind == "exact":
        differ = as_bits(result) != as_bits(expected)
        summary = ""
    else:
        differ, summary = _outside_tolerance(result, expected, rule)
    count = int(np.count_nonzero(differ))
    if count == 0:
        if rule.kind == "exact":
            return f"PASSED: all {result.size} elements match bit for bit", True
        return f"PASSED: all {result.size} elements match {rule.describe()}{summary}", True
    share = 100.0 * count / max(result.size, 1)
    what = "differ" if rule.kind == "exact" else f"are not {rule.describe()}"
    lines = [f"FAILED: {count} of {result.size} elements {what} ({share:.3g}%){summary}"]
    for index in list(zip(*np.nonzero(differ)))[:MAX_LISTED]:
        got, want = result[index], expected[index]
        position = "[" + ", ".join(str(int(i)) for i in index) + "]"
        lines.append(f"  at {position}: got {format_value(got, result.dtype, 'table')} "
                     f"({format_value(got, result.dtype, 'hex')}), expected "
                     f"{format_value(want, result.dtype, 'table')} ({format_value(want, result.dtype, 'hex')})")
    if count > MAX_LISTED:
        lines.append(f"  ... and {count - MAX_LISTED} more")
    return "\n".join(lines), False


def _outside_tolerance(result: np.ndarray, expected: np.ndarray, rule: Rule) -> tuple[np.ndarray, str]:
    both_nan = np.isnan(result) & np.isnan(expected)
    with np.errstate(all="ignore"):
        same = (result == expected) | both_nan
        wide = result.astype(np.float64), expected.astype(np.float64)
        absolute = np.where(same, 0.0, np.abs(wide[0] - wide[1]))
        absolute = np.where(np.isnan(absolute), np.inf, absolute)
        ulps = np.where(same, 0.0, ulp_distance(result, expected).astype(np.float64))
    measure = ulps if rule.kind == "ulp" else absolute
    limit = rule.limit
    if rule.kind == "allclose":  # NumPy's assert_allclose, which ONNX's node tests use
        with np.errstate(all="ignore"):
            limit = rule.limit + rule.rtol * np.abs(wide[1])
    one_nan = np.isnan(result) != np.isnan(expected)  # a NaN never matches a number, however close its bits
    outside = ~same & (one_nan | ~(measure <= limit))
    largest = (f"; largest error {ulps.max() if ulps.size else 0:.0f} ULP, "
               f"{absolute.max() if absolute.size else 0:.3g} absolute")
    return outside, largest
