"""--check: a result compared with an expected tensor, bit for bit or within the operator's tolerance.

Exact operators and integer outputs are compared bit for bit. Float outputs of operators that are
not exact are compared within the operator's tolerance (operators/schema.py): ULP of the output
type OR an absolute floor (an element passes when either holds), or an absolute difference; NaN
matches NaN and equal infinities match. An operator that sums terms has a third way to pass, its sum
bound (bounds.py): the rounding error its sums may carry, computed for each element from the call's
inputs. `--tolerance` overrides it: ulp:N, atol:X, ulp:N,atol:X, rtol:R,atol:A (NumPy's allclose),
exact or bits (bit for bit with no exception: `EVERY_BIT`).

Every element falls in one of the kinds of `KINDS`: identical; within tolerance; differing only by a
flushed subnormal or the sign of a zero (what Direct3D's rules allow a device); NaN against a number;
out of tolerance. Only the last two fail (exit 1), bit for bit too, where the verdict names the flushes
it accepted; under `bits` a flush fails as well. The verdict and the report count each kind.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..data_types import as_bits
from ..errors import InputError, quoted
from ..io.npy import to_native
from ..scalars import format_value

if TYPE_CHECKING:  # annotations only: a check without a sum bound never imports bounds.py
    from .bounds import ElementBound

MAX_LISTED = 5


@dataclass(frozen=True)
class Rule:
    """How elements are matched: exactly (kind "exact"), within `limit` ULP (or `floor` absolute, either
    passing), within `limit` absolute, or NumPy's allclose."""

    kind: str  # "exact", "ulp", "atol" or "allclose" (|got - want| <= limit + rtol*|want|, a test case's)
    limit: float = 0.0
    source: str = ""
    rtol: float = 0.0
    floor: float = 0.0  # "ulp" only: an element also passes where |got - want| <= floor (0: ULP alone)
    floor_source: str = ""  # why the floor is what it is
    # "exact" only: a flushed subnormal or a zero's sign fails too (--tolerance bits); else such an element
    # passes, as Direct3D's float rules allow a device to give it (the verdict says how many).
    every_bit: bool = False
    # "ulp" and "atol": the call's sum bound (bounds.py), element by element: an element also passes within it.
    bound: ElementBound | None = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        if self.kind == "exact":
            return "every bit" if self.every_bit else "bit for bit"
        if self.kind == "allclose":
            return f"within {self.limit:g} + {self.rtol:g}*|expected|"
        if self.kind == "ulp":
            return (f"within {self.limit:g} ULP" + (f" or {self.floor:.3g} absolute" if self.floor else "")
                    + self._bound_text())
        return f"within {self.limit:g} absolute" + self._bound_text()

    def _bound_text(self) -> str:
        return f" or the sum bound {self.bound.describe()}" if self.bound is not None else ""


EXACT = Rule("exact")
EVERY_BIT = Rule("exact", every_bit=True)  # --tolerance bits

# The kinds of element an element-wise comparison tells apart (the report's "difference_kinds" keys).
IDENTICAL = "identical"  # the same bits (or NaN against NaN where payloads are not compared)
WITHIN = "within_tolerance"
SUBNORMAL_OR_ZERO_SIGN = "subnormal_or_zero_sign"  # a zero against a subnormal, or +0 against -0
NAN_VS_NUMBER = "nan_vs_number"
OUT = "out_of_tolerance"
KINDS = (IDENTICAL, WITHIN, SUBNORMAL_OR_ZERO_SIGN, NAN_VS_NUMBER, OUT)
D3D_ACCEPTS = "subnormal_or_zero_sign_d3d_accepts"  # of those, the ones --float-rules d3d gives
BY_FLOOR = "within_tolerance_by_floor_alone"  # of the within ones, those past the ULP limit but within the floor
BY_BOUND = "within_tolerance_by_sum_bound_alone"  # of the within ones, those past the ULP limit and the floor
SUB_COUNTS = (D3D_ACCEPTS, BY_FLOOR, BY_BOUND)


TOLERANCE_FORMS = ("ulp:N (N >= 0), atol:X (X >= 0), both as ulp:N,atol:X (either may hold), rtol:R,atol:A "
                   "(NumPy's allclose: |got - expected| <= A + R*|expected|), exact, or bits")


def parse_tolerance(text: str, source: str = "--tolerance") -> Rule:
    """`ulp:N`, `atol:X`, both (`ulp:N,atol:X`: either may hold), `rtol:R,atol:A` or `rtol:R` (NumPy's allclose,
    atol 0 when left out), `exact` or `bits` (every bit: a flushed subnormal or a zero's sign fails too), as
    --tolerance takes it; `source` names where the text came from (messages, the rule's source)."""
    key = str(text).strip().lower()
    if key == "exact":
        return EXACT
    if key == "bits":
        return EVERY_BIT
    limits: dict[str, float] = {}
    for part in key.split(","):
        kind, _, number = part.strip().partition(":")
        try:
            limit = float(number) if number.isascii() else -1.0  # float() reads other scripts' digits too
        except ValueError:
            limit = -1.0
        if kind not in ("ulp", "atol", "rtol") or not np.isfinite(limit) or limit < 0 or kind in limits:
            raise InputError(f"{source} {quoted(text)}: expected {TOLERANCE_FORMS}")
        limits[kind] = limit
    if "rtol" in limits:
        if "ulp" in limits:
            raise InputError(f"{source} {quoted(text)}: rtol goes with atol (rtol:R,atol:A, NumPy's allclose), not "
                             "with ulp")
        return Rule("allclose", limits.get("atol", 0.0), source, rtol=limits["rtol"])
    if "ulp" in limits:
        return Rule("ulp", limits["ulp"], source, floor=limits.get("atol", 0.0),
                    floor_source=source if "atol" in limits else "")
    return Rule("atol", limits["atol"], source)


def rule_for(operator, dtype: np.dtype, override: Rule | None = None, parameters=None, call=None,
             inputs=None, output: int = 0) -> Rule:
    """The rule a result of `operator` in `dtype` is checked by: exact for integers and exact operators.

    With the `call` and the `inputs` it was run on (the arrays, in DESC order, None for one left out), an
    operator that sums terms gets its sum bound for the call's output at position `output` (bounds.py: one extra
    run of the operator on the CPU). An override (--tolerance, a case's tolerance) has none.

    With a fused activation among the call's `parameters` (ADD1, the normalisations), the looser of the
    operator's rule and the activation's applies (the activation's alone where their kinds differ). A
    shaped operator's tolerance may grow with the call (a reduction's with the number of elements reduced:
    `tolerance_scale(call)` multiplies the figure), where the `call` is given. A call that allows TF32
    (`call.allow_tf32`) of an operator with tf32_products and a FLOAT32 result is checked within TF32_WIDENING
    (2^13) times the figure and the floor: TF32 keeps 10 of FLOAT32's 23 mantissa bits.
    """
    if np.dtype(dtype).kind != "f":
        return EXACT
    if override is not None:
        return override
    own = getattr(operator, "tolerance", None)
    fused_tolerance = None
    for value in (parameters or {}).values():
        fused = value[0] if isinstance(value, tuple) and value else None
        if getattr(fused, "tolerance", None) is not None:
            fused_tolerance = fused.tolerance
    dtype = np.dtype(dtype)
    rule = None
    if own is not None:
        limit = own.for_dtype(dtype)
        scale = getattr(operator, "tolerance_scale", None)
        if scale is not None and call is not None:
            limit = limit * scale(call)
        rule = Rule(own.kind, limit, own.source, floor=own.floor_for(dtype), floor_source=own.floor_reason or "")
        if getattr(call, "allow_tf32", False) and operator.tf32_applies(dtype):
            rule = _widened_for_tf32(rule)
    if fused_tolerance is not None:
        fused_rule = Rule(fused_tolerance.kind, fused_tolerance.for_dtype(dtype), fused_tolerance.source,
                          floor=fused_tolerance.floor_for(dtype), floor_source=fused_tolerance.floor_reason or "")
        if rule is None or rule.kind != fused_rule.kind:
            rule = fused_rule  # the activation's own rule (ADD1 with tanh's absolute tolerance)
        else:
            # The looser of the operator's rule for this call and the activation's, figure by figure: a fused
            # activation keeps a normalisation's grown ULP count and its absolute floor.
            rule = Rule(rule.kind, max(rule.limit, fused_rule.limit), f"{rule.source}; with {fused_rule.source}",
                        floor=max(rule.floor, fused_rule.floor),
                        floor_source=rule.floor_source if rule.floor >= fused_rule.floor else fused_rule.floor_source)
    if rule is None:
        return EXACT
    if inputs is not None and call is not None and getattr(operator, "sum_bound", None) is not None:
        rule = with_sum_bound(rule, call, inputs, output)
    return rule


def with_sum_bound(rule: Rule, call, inputs, output: int = 0) -> Rule:
    """`rule` with the call's sum bound for its output at position `output`, where the operator has one."""
    from .bounds import element_bound

    return with_bound(rule, element_bound(call, inputs, output))


def with_bound(rule: Rule, bound: ElementBound | None) -> Rule:
    """`rule` with an output's sum bound (bounds.element_bounds gives every output's from one run); an exact rule
    or an override's allclose has none."""
    if bound is None or rule.kind not in ("ulp", "atol"):
        return rule
    return replace(rule, bound=bound)


def _widened_for_tf32(rule: Rule) -> Rule:
    from ..operators.table.schema import TF32_WIDENING

    why = "x 2^13 for TF32 products (--allow-tf32: TF32 keeps 10 of FLOAT32's 23 mantissa bits)"
    return Rule(rule.kind, rule.limit * TF32_WIDENING, f"{rule.source}; {why}", floor=rule.floor * TF32_WIDENING,
                floor_source=f"{rule.floor_source}; {why}" if rule.floor_source else "")


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
    # The largest errors: ULP over the elements that differ (flushes and those within by the floor alone left
    # out: their ULP, of a value near 0, means nothing), absolute over all that differ but the flushes.
    max_ulp: float = 0.0
    max_abs: float = 0.0
    # With a sum bound: the largest |got - expected| / bound over the elements that differ (flushes left out): how
    # much of its bound the worst element used (past 1 only where the ULP figure or the floor passed it, or where it
    # fails); None where the rule has no bound.
    max_bound_share: float | None = None
    # (index, got, expected, kind, Measures or None) for the first few
    differences: list = field(default_factory=list)
    max_listed: int = MAX_LISTED
    nan_equal: bool = False  # a NaN matches any NaN: the expected side is JSON, which holds no payloads
    loose_nans: int = 0  # NaN pairs that matched although their bits differ (nan_equal)
    nans_compared: int = 0
    # Whether --float-rules d3d flushes this operator's FLOAT32 results (not for bit-pattern operators).
    d3d_flushes: bool = True
    kinds: dict = field(default_factory=lambda: dict.fromkeys(KINDS + SUB_COUNTS, 0))

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
        """PASSED/FAILED with the count and share of mismatching elements, the kinds of difference and the
        first differences."""
        if self.reason is not None:
            return f"FAILED: {self.reason}"
        summary = "" if self.rule.kind == "exact" else (f"; largest error {self.max_ulp:.0f} ULP, "
                                                         f"{self.max_abs:.3g} absolute")
        if self.max_bound_share is not None and self.max_bound_share > 0:
            summary += f", {self.max_bound_share:.2g} of its sum bound"
        breakdown = self._breakdown()
        if self.passed:
            how = self.rule.describe()
            note = " (NaN payloads not compared: JSON cannot hold them)" if self.nan_equal and self.nans_compared else ""
            flushes = self.kinds[SUBNORMAL_OR_ZERO_SIGN]
            if self.rule.kind == "exact" and flushes:  # the one exception bit for bit allows, said on this line
                return (f"PASSED: all {self.elements} elements match {how} except {flushes} only by a flushed "
                        f"subnormal or the sign of a zero ({self._d3d_gives()}){note}")
            return f"PASSED: all {self.elements} elements match {how}{summary}{note}" + breakdown
        what = "differ" if self.rule.kind == "exact" else f"are not {self.rule.describe()}"
        lines = [f"FAILED: {self.mismatches} of {self.elements} elements {what} ({100.0 * self.share:.3g}%)"
                 f"{summary}{breakdown}"]
        for index, got, want, kind, measures in self.differences[:self.max_listed]:
            position = "[" + ", ".join(str(i) for i in index) + "]"
            tag = {NAN_VS_NUMBER: " (NaN against a number)",
                   SUBNORMAL_OR_ZERO_SIGN: " (only a flushed subnormal or the sign of a zero)"}.get(kind, "")
            if kind == OUT and measures is not None:
                tag = f": {measures.describe(self.rule)}"
            lines.append(f"  at {position}: got {format_value(got, self.dtype, 'table')} "
                         f"({format_value(got, self.dtype, 'hex')}), expected "
                         f"{format_value(want, self.dtype, 'table')} ({format_value(want, self.dtype, 'hex')}){tag}")
        shown = min(self.max_listed, len(self.differences))
        if self.max_listed and self.mismatches > shown:
            lines.append(f"  ... and {self.mismatches - shown} more")
        return "\n".join(lines)

    def _breakdown(self) -> str:
        """A second line counting the kinds, where a float comparison found more than identical elements.

        Bit for bit, only where a difference is a flushed subnormal, a zero's sign or a NaN (the plain
        "N differ" says the rest)."""
        k = self.kinds
        if self.dtype.kind != "f" or k[IDENTICAL] == self.elements:
            return ""
        if self.rule.kind == "exact" and not (k[SUBNORMAL_OR_ZERO_SIGN] or k[NAN_VS_NUMBER]):
            return ""
        parts = [f"{k[IDENTICAL]} identical"]
        if self.rule.kind != "exact":
            alone = [f"{k[BY_FLOOR]} by the absolute floor alone"] if k[BY_FLOOR] else []
            alone += [f"{k[BY_BOUND]} by the sum bound alone"] if k[BY_BOUND] else []
            parts.append(f"{k[WITHIN]} within tolerance" + (f" ({', '.join(alone)})" if alone else ""))
        if k[SUBNORMAL_OR_ZERO_SIGN]:
            accepted = ", which --tolerance bits does not accept" if self.rule.every_bit else ""
            parts.append(f"{k[SUBNORMAL_OR_ZERO_SIGN]} only by a flushed subnormal or the sign of a zero "
                         f"({self._d3d_gives()}{accepted})")
        if k[NAN_VS_NUMBER]:
            parts.append(f"{k[NAN_VS_NUMBER]} NaN against a number")
        if k[OUT]:
            parts.append(f"{k[OUT]} {'differ otherwise' if self.rule.kind == 'exact' else 'out of tolerance'}")
        return "\n  " + ", ".join(parts)

    def _d3d_gives(self) -> str:
        """How many of the flushes and zero signs --float-rules d3d gives (a FLOAT32 flush to a zero of the same
        sign, in an operator on values)."""
        d3d, flushes = self.kinds[D3D_ACCEPTS], self.kinds[SUBNORMAL_OR_ZERO_SIGN]
        if not d3d:
            return "--float-rules d3d gives none of them"
        return f"--float-rules d3d gives {'them' if d3d == flushes else f'{d3d} of them'}"

    def to_json(self) -> dict:
        """The comparison as the --report file holds it (values in JSON tensor spelling, bits for floats)."""
        from ..io.json_tensor import format_json_value

        report = {
            "verdict": "PASSED" if self.passed else "FAILED",
            "elements": self.elements,
            "mismatches": self.mismatches if self.reason is None else None,
            "mismatch_share": self.share if self.reason is None else None,
            "reason": self.reason,
            "tolerance": {"kind": self.rule.kind, "limit": self.rule.limit, "source": self.rule.source or None,
                          "text": self.rule.describe(),
                          "atol_floor": self.rule.floor if self.rule.kind == "ulp" else None,
                          "floor_source": (self.rule.floor_source or None) if self.rule.kind == "ulp" else None,
                          "every_bit": self.rule.every_bit,
                          "rtol": self.rule.rtol if self.rule.kind == "allclose" else None,
                          "sum_bound": self.rule.bound.figures.to_json() if self.rule.bound is not None else None},
            "nan_payloads_compared": (not self.nan_equal) if self.dtype.kind == "f" else None,
            "difference_kinds": dict(self.kinds) if self.reason is None else None,
        }
        if self.rule.kind != "exact":
            report["max_ulp"] = self.max_ulp
            report["max_abs_error"] = self.max_abs if math.isfinite(self.max_abs) else "inf"
            report["max_sum_bound_share"] = self.max_bound_share
        first = []
        for index, got, want, kind, measures in self.differences[:self.max_listed]:
            entry = {"index": list(index), "expected": json.loads(format_json_value(want, self.dtype)),
                     "got": json.loads(format_json_value(got, self.dtype))}
            if self.dtype.kind == "f":
                entry["expected_bits"] = format_value(want, self.dtype, "hex")
                entry["got_bits"] = format_value(got, self.dtype, "hex")
                entry["kind"] = kind
                if measures is not None:
                    entry["failed"] = measures.to_json(self.rule)
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
        # Only the elements whose bits differ are classified: in a matching result that is few or none, and
        # bit for bit costs little more than the comparison of the bits.
        positions = np.flatnonzero(as_bits(result) != as_bits(expected))
        if c.dtype.kind == "f":
            c.nans_compared += int(np.count_nonzero(np.isnan(result) & np.isnan(expected)))
        got, want = result[positions], expected[positions]
        allowed = None
        if c.rule.bound is not None and c.rule.kind != "exact":
            allowed = c.rule.bound.allowed(start + positions, want.astype(np.float64))
        kinds, ulps, absolute = classify(got, want, c.rule, nan_equal=c.nan_equal, d3d_flushes=c.d3d_flushes,
                                         bound=allowed)
        if c.nan_equal and c.rule.kind == "exact":
            c.loose_nans += int(np.count_nonzero(kinds[IDENTICAL]))  # NaN pairs whose bits differ
        c.kinds[IDENTICAL] += result.size - positions.size
        for kind in KINDS + SUB_COUNTS:
            c.kinds[kind] += int(np.count_nonzero(kinds[kind]))
        if ulps is not None:
            measured = ~(kinds[IDENTICAL] | kinds[SUBNORMAL_OR_ZERO_SIGN])  # a flush is no error of the formula
            if measured.any():
                c.max_abs = max(c.max_abs, float(absolute[measured].max()))
            if allowed is not None:
                c.max_bound_share = max(c.max_bound_share or 0.0, _largest_share(absolute, allowed, measured))
            measured &= ~(kinds[BY_FLOOR] | kinds[BY_BOUND])
            if measured.any():
                c.max_ulp = max(c.max_ulp, float(ulps[measured].max()))
        differ = kinds[NAN_VS_NUMBER] | kinds[OUT]
        if c.rule.every_bit:
            differ = differ | kinds[SUBNORMAL_OR_ZERO_SIGN]  # --tolerance bits: a flush fails too
        count = int(np.count_nonzero(differ))
        if count and len(c.differences) < c.max_listed:
            for at in np.flatnonzero(differ)[:c.max_listed - len(c.differences)]:
                position = int(positions[at])
                index = tuple(int(i) for i in np.unravel_index(start + position, c.shape)) if c.shape else ()
                kind = next(k for k in (SUBNORMAL_OR_ZERO_SIGN, NAN_VS_NUMBER, OUT) if kinds[k][at])
                # An element out of tolerance says which figures it is past (a NaN or a flush says its kind).
                measures = None if ulps is None or kind != OUT else Measures(
                    float(ulps[at]), float(absolute[at]), None if allowed is None else float(allowed[at]))
                c.differences.append((index, result[position], expected[position], kind, measures))
        c.mismatches += count


def _largest_share(absolute: np.ndarray, allowed: np.ndarray, measured: np.ndarray) -> float:
    """The largest |got - expected| / bound over the `measured` elements (an element with no bound: left out)."""
    with np.errstate(all="ignore"):
        share = np.where(measured & (allowed > 0), absolute / np.where(allowed > 0, allowed, 1.0), 0.0)
    finite = share[np.isfinite(share)]
    return float(finite.max()) if finite.size else 0.0


@dataclass(frozen=True)
class Measures:
    """What a differing element was measured by: its ULP distance, its absolute error and its sum bound (None
    without one), so that a failing element says which figure it is past."""

    ulps: float
    absolute: float
    bound: float | None

    def describe(self, rule: Rule) -> str:
        """'1.2e-05 off (17553 ULP): past 54 ULP, the floor 9.54e-07 and its sum bound 3.1e-06'."""
        off = f"{self.absolute:.3g} off ({self.ulps:.0f} ULP)"
        if rule.kind == "allclose":
            return f"{off}: past {rule.limit:g} + {rule.rtol:g}*|expected|"
        if rule.kind == "atol":
            past = [f"{rule.limit:g} absolute"]
        else:
            past = [f"{rule.limit:g} ULP"] + ([f"the floor {rule.floor:.3g}"] if rule.floor else [])
        if self.bound is not None:
            past.append(f"its sum bound {self.bound:.3g}")
        return f"{off}: past " + (past[0] if len(past) == 1 else ", ".join(past[:-1]) + " and " + past[-1])

    def to_json(self, rule: Rule) -> dict:
        """The element's measures and the figures it is past, in the --report file."""
        found = {"ulp": self.ulps, "abs_error": self.absolute if math.isfinite(self.absolute) else "inf"}
        if rule.kind == "ulp":
            found.update(ulp_limit=rule.limit, atol_floor=rule.floor)
        elif rule.kind == "atol":
            found.update(atol=rule.limit)
        else:
            found.update(atol=rule.limit, rtol=rule.rtol)
        found["sum_bound"] = self.bound
        return found


def compare_arrays(result: np.ndarray, expected: np.ndarray, rule: Rule = EXACT, *, nan_equal: bool = False,
                   max_listed: int = MAX_LISTED, d3d_flushes: bool = True) -> Comparison:
    """Compare two whole arrays (see `Comparison`); `nan_equal` where the expected side came from JSON,
    `d3d_flushes` False for an operator on bit patterns (Direct3D's flushes do not apply to it)."""
    result, expected = to_native(np.asarray(result)), to_native(np.asarray(expected))
    comparison = Comparison(rule, result.dtype, tuple(result.shape), expected.dtype, tuple(expected.shape),
                            max_listed=max_listed, nan_equal=nan_equal, d3d_flushes=d3d_flushes)
    if comparison.reason is None:
        Tally(comparison).add(result.reshape(-1), expected.reshape(-1), 0)
    return comparison


def compare(result: np.ndarray, expected: np.ndarray, rule: Rule = EXACT) -> tuple[str, bool]:
    """(report, equal): PASSED/FAILED, the counts, the largest errors and the first differing elements."""
    comparison = compare_arrays(result, expected, rule)
    return comparison.text(), comparison.passed


def compare_npy_files(result_path, expected_path, rule: Rule = EXACT, *, chunk_bytes: int,
                      max_listed: int = MAX_LISTED, d3d_flushes: bool = True) -> Comparison:
    """Compare two .npy files chunk by chunk, in constant memory (the headers first: dtype and shape)."""
    from pathlib import Path

    from ..io.npy import iter_npy_chunks, read_npy_header

    result_where, expected_where = f"result {result_path}", f"expected '{expected_path}'"
    shape, _, dtype, _ = read_npy_header(Path(result_path), where=result_where)
    expected_shape, _, expected_dtype, _ = read_npy_header(Path(expected_path), where=expected_where)
    comparison = Comparison(rule, np.dtype(dtype).newbyteorder("="), tuple(shape),
                            np.dtype(expected_dtype).newbyteorder("="), tuple(expected_shape), max_listed=max_listed,
                            d3d_flushes=d3d_flushes)
    if comparison.reason is not None:
        return comparison
    elements = max(1, chunk_bytes // comparison.dtype.itemsize)
    tally = Tally(comparison)
    got_chunks = iter_npy_chunks(Path(result_path), where=result_where, chunk_elements=elements)
    want_chunks = iter_npy_chunks(Path(expected_path), where=expected_where, chunk_elements=elements)
    for (start, got), (_, want) in zip(got_chunks, want_chunks):
        tally.add(got, want, start)
    return comparison


def classify(result: np.ndarray, expected: np.ndarray, rule: Rule, *, nan_equal: bool = False,
             d3d_flushes: bool = True, bound: np.ndarray | None = None):
    """({kind: mask} over `KINDS` and `SUB_COUNTS`, ULP distances, absolute errors) elementwise.

    `bound`: each element's sum bound (absolute), a third way to be within a "ulp" or "atol" rule.

    The two measures are None for the exact rule. NaN matches NaN under a tolerance (and bit for bit
    where `nan_equal`), never a number however close its bits. A zero against a subnormal, or +0
    against -0, is its own kind: under a tolerance it passes, and where the zero keeps the subnormal's
    sign in a FLOAT32 result of an operator on values it is what --float-rules d3d gives (D3D_ACCEPTS).
    """
    bits_equal = as_bits(result) == as_bits(expected)
    none = np.zeros(result.shape, bool)
    if result.dtype.kind != "f":
        return {IDENTICAL: bits_equal, WITHIN: none, SUBNORMAL_OR_ZERO_SIGN: none, NAN_VS_NUMBER: none,
                OUT: ~bits_equal, D3D_ACCEPTS: none, BY_FLOOR: none, BY_BOUND: none}, None, None
    nan_got, nan_want = np.isnan(result), np.isnan(expected)
    both_nan = nan_got & nan_want
    identical = bits_equal | (both_nan if (nan_equal or rule.kind != "exact") else False)
    one_nan = nan_got != nan_want
    tiny = np.finfo(result.dtype).smallest_normal
    with np.errstate(all="ignore"):
        small = (np.abs(result) < tiny) & (np.abs(expected) < tiny)  # zeros and subnormals (NaN: False)
        zero_got, zero_want = result == 0, expected == 0
        flush = ~identical & small & (zero_got | zero_want)
    d3d = flush & ~(zero_got & zero_want) & (np.signbit(result) == np.signbit(expected))
    d3d &= result.dtype == np.float32 and d3d_flushes  # Direct3D flushes FLOAT32 only, and only on values
    rest = ~identical & ~flush & ~one_nan
    if rule.kind == "exact":
        return {IDENTICAL: identical, WITHIN: none, SUBNORMAL_OR_ZERO_SIGN: flush, NAN_VS_NUMBER: one_nan,
                OUT: rest, D3D_ACCEPTS: d3d, BY_FLOOR: none, BY_BOUND: none}, None, None
    with np.errstate(all="ignore"):
        wide = result.astype(np.float64), expected.astype(np.float64)
        absolute = np.where(identical, 0.0, np.abs(wide[0] - wide[1]))
        absolute = np.where(np.isnan(absolute), np.inf, absolute)
        ulps = np.where(identical, 0.0, ulp_distance(result, expected).astype(np.float64))
        if rule.kind == "allclose":  # NumPy's assert_allclose, which ONNX's node tests use
            inside = absolute <= rule.limit + rule.rtol * np.abs(wide[1])
        elif rule.kind == "ulp":
            inside = (ulps <= rule.limit) | (absolute <= rule.floor)
        else:
            inside = absolute <= rule.limit
        beyond = none
        if bound is not None and rule.kind != "allclose":
            beyond = ~inside & (absolute <= bound)
            inside = inside | beyond
    within = rest & inside
    by_floor = within & (ulps > rule.limit) & (absolute <= rule.floor) if rule.kind == "ulp" else none
    return {IDENTICAL: identical, WITHIN: within, SUBNORMAL_OR_ZERO_SIGN: flush, NAN_VS_NUMBER: one_nan,
            OUT: rest & ~inside, D3D_ACCEPTS: d3d, BY_FLOOR: by_floor, BY_BOUND: within & beyond}, ulps, absolute
