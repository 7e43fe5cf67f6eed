"""One-off check (a script, not a test): GELU's CPU kernel (dmlcli/operators/elementwise/gelu.py) gives the bits of the
kernel before it (BEFORE, a copy below: erf's series in float64 up to t = -x/sqrt(2) = 0.5, Cody's vectorised erfc
past it with C's erfc near a rounding boundary) for every FLOAT16 value and every FLOAT32 value.

It checks, and prints:
- the polynomial's coefficients, derived again here in exact arithmetic (Chebyshev's economisation of S's Taylor
  series on [0, 9/4]), equal to the kernel's, and the size of the terms dropped;
- FLOAT16: the table against BEFORE for all 65536 values, and every FLOAT16 result of the series at every degree its
  tensor-wide rule can pick (from the element's own to 65): the table holds for any tensor;
- FLOAT32: the kernel against BEFORE for every step-th bit pattern of the whole range, in tensors of 2^20
  consecutive patterns (both pick their series' degrees from the same tensor); the largest relative distance
  between the values the kernel rounds unchecked (_approximate) and the reference's, at the tensor's degrees and at
  degree 65 (the bound _APART stands on), the count of values redone, and the largest distance between Cody's erfc
  and C's over the tail (the bound _ERFC_APART stands on);
- the count of differing bits (0 expected).

    PYTHONPATH=. python3 bench/gelu_erfc_check.py [--step 1]

All 2^32 FLOAT32 patterns (--step 1) take some minutes. Exit status 0 where everything holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmlcli.operators.elementwise import gelu as kernel  # noqa: E402
from dmlcli.operators.elementwise.transcendental import (  # noqa: E402
    _ERF_SATURATES, _TWO_OVER_SQRT_PI, _erf_horner, _erf_grid_degree)

CHUNK = 1 << 20
LARGEST_DEGREE = _erf_grid_degree(128)  # y = 2t^2 up to 32 (|t| < 4)


# ---------------------------------------------------------------- the kernel before (a copy)

def _erfc_before(values: np.ndarray) -> np.ndarray:
    flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
    t = np.where((flat < 0.5) & (flat > -_ERF_SATURATES), flat, 0.0)
    square = t * t
    erf = _TWO_OVER_SQRT_PI * np.exp(-square) * t * _erf_horner(square)
    result = 1.0 - np.where(flat <= -_ERF_SATURATES, -1.0, erf)
    rest = np.flatnonzero(~(flat < 0.5))
    if rest.size:
        result[rest] = kernel._erfc_cody(flat[rest])
    return result.reshape(np.shape(values))


def before(x: np.ndarray, out_dtype) -> np.ndarray:
    """The kernel before this one (its NaN gives the input's NaN, as on x86)."""
    v = np.asarray(x, dtype=np.float64)
    t = -v * kernel._SQRT1_2
    values = np.where(v == -np.inf, -0.0, 0.5 * v * _erfc_before(t))
    result = values.astype(out_dtype)
    tail = np.flatnonzero(t >= 0.5)
    near = tail[kernel._near_a_rounding_boundary(values.ravel()[tail], out_dtype)]
    if near.size:
        again = 0.5 * v.ravel()[near] * kernel._erfc_libm(t.ravel()[near])
        result = np.array(result, copy=True)
        result.ravel()[near] = again.astype(out_dtype)
    return result


def differing(x: np.ndarray, out_dtype) -> np.ndarray:
    """Positions where the kernel's bits differ from BEFORE's (NaN against NaN compared by bits too)."""
    now = kernel.gelu([x], out_dtype, {})
    old = before(x, out_dtype)
    unsigned = f"u{np.dtype(out_dtype).itemsize}"
    return np.flatnonzero(now.view(unsigned) != old.view(unsigned))


# ---------------------------------------------------------------- the polynomial, derived again

PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863")


def economised(bound: Fraction, degree: int, taylor_degree: int = 60) -> tuple[list[Fraction], Fraction]:
    """sum_n (-u/2)^n / (n! (2n+1)) to degree `taylor_degree`, economised to `degree` on [0, bound] (exact): the
    coefficients in u, lowest first, and the sum of the Chebyshev coefficients dropped."""
    half = bound / 2  # u = half (s + 1), s in [-1, 1]
    in_s = [Fraction(0)] * (taylor_degree + 1)
    for n in range(taylor_degree + 1):
        term = Fraction((-1) ** n, 2**n * math.factorial(n) * (2 * n + 1)) * half**n
        for j in range(n + 1):
            in_s[j] += term * math.comb(n, j)
    chebyshev = [Fraction(0)] * (taylor_degree + 1)  # s^j = 2^(1-j) sum_i C(j, i) T_|j-2i| / (2 for T_0)
    for j, c in enumerate(in_s):
        for i in range(j + 1):
            chebyshev[abs(j - 2 * i)] += c * Fraction(math.comb(j, i), 2**j)
    dropped = sum(abs(c) for c in chebyshev[degree + 1:])
    polynomials = [[Fraction(1)], [Fraction(0), Fraction(1)]]  # T_m in s
    for m in range(2, degree + 1):
        twice = [Fraction(0)] + [2 * c for c in polynomials[m - 1]]
        previous = polynomials[m - 2] + [Fraction(0)] * (len(twice) - len(polynomials[m - 2]))
        polynomials.append([a - b for a, b in zip(twice, previous)])
    kept_s = [Fraction(0)] * (degree + 1)
    for m in range(degree + 1):
        for j, c in enumerate(polynomials[m]):
            kept_s[j] += chebyshev[m] * c
    in_u = [Fraction(0)] * (degree + 1)  # s = u / half - 1
    for j, c in enumerate(kept_s):
        for i in range(j + 1):
            in_u[i] += c * math.comb(j, i) * (-1) ** (j - i) / half**i
    return in_u, dropped


def core_coefficients() -> tuple[tuple[float, ...], float]:
    """The kernel's polynomial as derived: (1/sqrt(2 pi)) times the economised series, rounded to double; and the
    terms dropped relative to S's least value on [0, 9/4] (at u = 9/4)."""
    bound = Fraction(kernel._CORE_BOUND).limit_denominator(1000)
    in_u, dropped = economised(bound, len(kernel._CORE_COEFFICIENTS) - 1)
    with localcontext() as context:
        context.prec = 60
        phi0 = 1 / (2 * PI).sqrt()
        coefficients = tuple(float(Decimal(c.numerator) / Decimal(c.denominator) * phi0) for c in in_u)
    x = math.sqrt(float(bound))
    least = 0.5 * math.erf(x / math.sqrt(2)) / x / float(phi0)
    return coefficients, float(dropped) / least


# ---------------------------------------------------------------- FLOAT16

def float16_every_degree() -> int:
    """FLOAT16 values whose series result at some degree the rule can pick differs from the table's."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    v = every.astype(np.float64)
    t = -v * kernel._SQRT1_2
    series = np.flatnonzero((t > -_ERF_SATURATES) & (t < 0.5))
    v, t = v[series], t[series]
    factor = kernel._series_factor(t)
    own = np.array([kernel._erf_degree(y) for y in factor.tolist()])  # the least the rule picks: top >= factor
    table = kernel._float16_table()[series]
    bad = np.zeros(series.size, bool)
    for degree in range(int(own.min()), LARGEST_DEGREE + 1):
        values = 0.5 * v * (1.0 - kernel._erf_by_series(t, (degree, degree)))
        bad |= (own <= degree) & (values.astype(np.float16).view(np.uint16) != table.view(np.uint16))
    return int(np.count_nonzero(bad))


# ---------------------------------------------------------------- FLOAT32

def approximated(x: np.ndarray) -> np.ndarray:
    """Positions whose value the kernel approximates (the polynomial's range, and 1.5 < x < 5.66)."""
    return np.flatnonzero((np.abs(x) <= 1.5) | ((x > 1.5) & (x < 5.65)))


def largest_distance(x: np.ndarray) -> float:
    """The largest relative distance between _approximate's values and the reference's, at the tensor's degrees
    and with the series' second band at degree 65."""
    positions = approximated(x)
    if positions.size == 0:
        return 0.0
    values, _ = kernel._approximate(x)
    values, v = values[positions], x[positions].astype(np.float64)
    first, rest = kernel._series_degrees(kernel._top_factor(x.astype(np.float64)))
    worst = 0.0
    for degrees in ((first, rest), (first, LARGEST_DEGREE)):
        reference = kernel._reference(v, degrees)
        inside = reference != 0
        distance = np.abs(values[inside] - reference[inside]) / np.abs(reference[inside])
        worst = max(worst, float(distance.max(initial=0.0)))
    return worst


def cody_distance(x: np.ndarray) -> float:
    """The largest relative distance between Cody's erfc and C's over the t = -x/sqrt(2) in [0.5, 26.5]."""
    t = -x.astype(np.float64) * kernel._SQRT1_2
    inside = t[(t >= 0.5) & (t <= 26.5)]
    if inside.size == 0:
        return 0.0
    libm = kernel._erfc_libm(inside)
    return float(np.max(np.abs(kernel._erfc_cody(inside) - libm) / libm))


def redone(x: np.ndarray) -> int:
    values, spare = kernel._approximate(x)
    return int(kernel._near_a_float32_boundary(values, spare).size)


def log2(value: float) -> str:
    return f"2^{math.log2(value):.1f}" if value > 0 else "0"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--step", type=int, default=1, help="every step-th FLOAT32 bit pattern (1: all 2^32)")
    args = parser.parse_args(argv)
    failures = 0

    derived, dropped = core_coefficients()
    same = derived == kernel._CORE_COEFFICIENTS
    failures += not same
    print(f"polynomial: derived again {'equal' if same else 'DIFFERENT'}; terms dropped {log2(dropped)} of S's least")

    with np.errstate(all="ignore"):
        halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
        count = differing(halves, np.float16).size
        degree_bad = float16_every_degree()
        failures += degree_bad
        print(f"FLOAT16, all 65536: differing {count}; values whose series result depends on the degree {degree_bad}")

        worst = cody = 0.0
        total = near = 0
        for start in range(0, 1 << 32, CHUNK * args.step):
            stop = min(start + CHUNK * args.step, 1 << 32)
            x = np.arange(start, stop, args.step, dtype=np.uint64).astype(np.uint32).view(np.float32)
            count += differing(x, np.float32).size
            worst = max(worst, largest_distance(x))
            cody = max(cody, cody_distance(x))
            near += redone(x)
            total += x.size
    bound_holds = worst <= kernel._APART / 4 and cody <= kernel._ERFC_APART / 64
    failures += not bound_holds
    print(f"FLOAT32, {total} values (every {args.step}th pattern): largest |approximation - reference| / |reference| "
          f"{log2(worst)} (_APART {log2(kernel._APART)}), redone {near}; largest |cody - libm| / libm {log2(cody)} "
          f"(_ERFC_APART {log2(kernel._ERFC_APART)})")
    print(f"differing bits in all: {count}")
    return 0 if count == 0 and failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
