"""--check: a result compared with an expected tensor, bit for bit or within the operator's tolerance.

Exact operators and integer outputs are compared bit for bit. Float outputs of operators that are
not exact are compared within the operator's tolerance (operators/schema.py: ULP of the output
type, or an absolute difference); NaN matches NaN and equal infinities match. `--tolerance`
overrides it: ulp:N, atol:X or exact.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from .data_types import as_bits
from .errors import InputError, quoted
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
        raise InputError(f"--tolerance {quoted(text)}: expected ulp:N (N >= 0), atol:X (X >= 0) or exact")
    return Rule(kind, limit, "--tolerance")


def rule_for(operator, dtype: np.dtype, override: Rule | None = None, parameters=None, call=None) -> Rule:
    """The rule a result of `operator` in `dtype` is checked by: exact for integers and exact operators.

    With a fused activation among the call's `parameters` (ADD1), the activation's tolerance applies. A
    shaped operator's tolerance may grow with the call (a reduction's with the number of elements reduced:
    `tolerance_scale(call)` multiplies the figure), where the `call` is given; an operator's `tolerance_rule(call,
    dtype)` may give the call a rule of its own (REDUCE's LOG_SUM).
    """
    if np.dtype(dtype).kind != "f":
        return EXACT
    if override is not None:
        return override
    own_rule = getattr(operator, "tolerance_rule", None)
    if own_rule is not None and call is not None:
        found = own_rule(call, np.dtype(dtype))
        if found is not None:
            return found
    tolerance = getattr(operator, "tolerance", None)
    for value in (parameters or {}).values():
        fused = value[0] if isinstance(value, tuple) and value else None
        if getattr(fused, "tolerance", None) is not None:
            tolerance = fused.tolerance
    if tolerance is None:
        return EXACT
    limit = tolerance.for_dtype(np.dtype(dtype))
    scale = getattr(operator, "tolerance_scale", None)
    if scale is not None and call is not None:
        limit = limit * scale(call)
    return Rule(tolerance.kind, limit, tolerance.source)


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


@dataclass
class Comparison:
    """A --check comparison: the verdict, the counts, the largest errors and the first differences.

    Built by `Tally` chunk by chunk (flat C-order ranges), so that two big .npy files are compared
    in constant memory; `text()` is the verdict as printed, `to_json()` the report's fields.
    """

    rule: Rule
    dtype: np.dtype
    shape: tuple[int, ...]
    expected_dtype: np.dtype | None = None
    expected_shape: tuple[int, ...] | None = None
    mismatches: int = 0
    max_ulp: float = 0.0
    max_abs: float = 0.0
    differences: list = field(default_factory=list)  # (index, got, expected) for the first few
    max_listed: int = MAX_LISTED
    nan_equal: bool = False  # a NaN matches any NaN: the expected side is JSON, which holds no payloads
    loose_nans: int = 0  # NaN pairs that matched although their bits differ (nan_equal)
    nans_compared: int = 0

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def reason(self) -> str | None:
        """Why the tensors cannot be compared element by element (dtype or shape), or None."""
        if self.expected_dtype is not None and self.expected_dtype != self.dtype:
            return f"result dtype {self.dtype} differs from expected dtype {self.expected_dtype}"
        if self.expected_shape is not None and tuple(self.expected_shape) != tuple(self.shape):
            return f"result shape {list(self.shape)} differs from expected shape {list(self.expected_shape)}"
        return None

    @property
    def passed(self) -> bool:
        return self.reason is None and self.mismatches == 0

    @property
    def share(self) -> float:
        """The share of mismatching elements, 0 to 1 (1 where dtype or shape differ)."""
        if self.reason is not None:
            return 1.0
        return self.mismatches / max(self.elements, 1)

    def text(self) -> str:
        """PASSED/FAILED with the count and share of mismatching elements and the first differences."""
        if self.reason is not None:
            return f"FAILED: {self.reason}"
        summary = "" if self.rule.kind == "exact" else (f"; largest error {self.max_ulp:.0f} ULP, "
                                                         f"{self.max_abs:.3g} absolute")
        if self.passed:
            how = "bit for bit" if self.rule.kind == "exact" else self.rule.describe()
            note = " (NaN payloads not compared: JSON cannot hold them)" if self.nan_equal and self.nans_compared else ""
            return f"PASSED: all {self.elements} elements match {how}{summary}{note}"
        what = "differ" if self.rule.kind == "exact" else f"are not {self.rule.describe()}"
        lines = [f"FAILED: {self.mismatches} of {self.elements} elements {what} ({100.0 * self.share:.3g}%){summary}"]
        for index, got, want in self.differences[:self.max_listed]:
            position = "[" + ", ".join(str(i) for i in index) + "]"
            lines.append(f"  at {position}: got {format_value(got, self.dtype, 'table')} "
                         f"({format_value(got, self.dtype, 'hex')}), expected "
                         f"{format_value(want, self.dtype, 'table')} ({format_value(want, self.dtype, 'hex')})")
        shown = min(self.max_listed, len(self.differences))
        if self.max_listed and self.mismatches > shown:
            lines.append(f"  ... and {self.mismatches - shown} more")
        return "\n".join(lines)

    def to_json(self) -> dict:
        """The comparison as the --report file holds it (values in JSON tensor spelling, bits for floats)."""
        from .io.json_tensor import format_json_value

        report = {
            "verdict": "PASSED" if self.passed else "FAILED",
            "elements": self.elements,
            "mismatches": self.mismatches if self.reason is None else None,
            "mismatch_share": self.share if self.reason is None else None,
            "reason": self.reason,
            "tolerance": {"kind": self.rule.kind, "limit": self.rule.limit, "source": self.rule.source or None,
                          "text": self.rule.describe()},
            "nan_payloads_compared": (not self.nan_equal) if self.dtype.kind == "f" else None,
        }
        if self.rule.kind != "exact":
            report["max_ulp"] = self.max_ulp
            report["max_abs_error"] = self.max_abs if math.isfinite(self.max_abs) else "inf"
        first = []
        for index, got, want in self.differences[:self.max_listed]:
            entry = {"index": list(index), "expected": json.loads(format_json_value(want, self.dtype)),
                     "got": json.loads(format_json_value(got, self.dtype))}
            if self.dtype.kind == "f":
                entry["expected_bits"] = format_value(want, self.dtype, "hex")
                entry["got_bits"] = format_value(got, self.dtype, "hex")
            first.append(entry)
        report["first_differences"] = first
        return report


class Tally:
    """Compares a result with its expected tensor one flat C-order range at a time."""

    def __init__(self, comparison: Comparison):
        self.comparison = comparison

    def add(self, result: np.ndarray, expected: np.ndarray, start: int) -> None:
        """Compare the elements [start, start + n) of the flattened tensors (both native, same dtype)."""
        c = self.comparison
        if c.rule.kind == "exact":
            differ = as_bits(result) != as_bits(expected)
            if c.dtype.kind == "f":
                both_nan = np.isnan(result) & np.isnan(expected)
                c.nans_compared += int(np.count_nonzero(both_nan))
                if c.nan_equal:
                    c.loose_nans += int(np.count_nonzero(differ & both_nan))
                    differ &= ~both_nan
        else:
            differ, ulps, absolute = _outside_tolerance(result, expected, c.rule)
            c.nans_compared += int(np.count_nonzero(np.isnan(result) & np.isnan(expected)))
            if ulps.size:
                c.max_ulp = max(c.max_ulp, float(ulps.max()))
                c.max_abs = max(c.max_abs, float(absolute.max()))
        count = int(np.count_nonzero(differ))
        if count and len(c.differences) < c.max_listed:
            for position in np.flatnonzero(differ)[:c.max_listed - len(c.differences)]:
                index = tuple(int(i) for i in np.unravel_index(start + int(position), c.shape)) if c.shape else ()
                c.differences.append((index, result[position], expected[position]))
        c.mismatches += count


def compare_arrays(result: np.ndarray, expected: np.ndarray, rule: Rule = EXACT, *, nan_equal: bool = False,
                   max_listed: int = MAX_LISTED) -> Comparison:
    """Compare two whole arrays (see `Comparison`); `nan_equal` where the expected side came from JSON."""
    result, expected = to_native(np.asarray(result)), to_native(np.asarray(expected))
    comparison = Comparison(rule, result.dtype, tuple(result.shape), expected.dtype, tuple(expected.shape),
                            max_listed=max_listed, nan_equal=nan_equal)
    if comparison.reason is None:
        Tally(comparison).add(result.reshape(-1), expected.reshape(-1), 0)
    return comparison


def compare(result: np.ndarray, expected: np.ndarray, rule: Rule = EXACT) -> tuple[str, bool]:
    """(report, equal): PASSED/FAILED, the counts, the largest errors and the first differing elements."""
    comparison = compare_arrays(result, expected, rule)
    return comparison.text(), comparison.passed


def compare_npy_files(result_path, expected_path, rule: Rule = EXACT, *, chunk_bytes: int,
                      max_listed: int = MAX_LISTED) -> Comparison:
    """Compare two .npy files chunk by chunk, in constant memory (the headers first: dtype and shape)."""
    from pathlib import Path

    from .io.npy import iter_npy_chunks, read_npy_header

    result_where, expected_where = f"result {result_path}", f"expected '{expected_path}'"
    shape, _, dtype, _ = read_npy_header(Path(result_path), where=result_where)
    expected_shape, _, expected_dtype, _ = read_npy_header(Path(expected_path), where=expected_where)
    comparison = Comparison(rule, np.dtype(dtype).newbyteorder("="), tuple(shape),
                            np.dtype(expected_dtype).newbyteorder("="), tuple(expected_shape), max_listed=max_listed)
    if comparison.reason is not None:
        return comparison
    elements = max(1, chunk_bytes // comparison.dtype.itemsize)
    tally = Tally(comparison)
    got_chunks = iter_npy_chunks(Path(result_path), where=result_where, chunk_elements=elements)
    want_chunks = iter_npy_chunks(Path(expected_path), where=expected_where, chunk_elements=elements)
    for (start, got), (_, want) in zip(got_chunks, want_chunks):
        tally.add(got, want, start)
    return comparison


def _outside_tolerance(result: np.ndarray, expected: np.ndarray, rule: Rule):
    """(outside, ULP distances, absolute errors) elementwise; NaN matches NaN, never a number."""
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
    return outside, ulps, absolute
