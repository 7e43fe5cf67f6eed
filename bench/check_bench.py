"""--check's comparison (a script, not a test): compare_arrays against NumPy's own bit comparison of the
same two arrays (issue 21: the kinds of difference must not make a matching result slow to check).

compare_arrays classifies only the elements whose bits differ, so a result that matches (all or all but a
few elements identical) costs about the bit comparison; one that differs everywhere pays the classification
(the widening to float64, ULP and absolute errors) on every element. FLOAT32, --millions elements, times are
medians of --repeats runs, alternating dmlcli and the baseline.

    .venv/bin/python bench/check_bench.py [--millions 4] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmlcli.checking.comparison import compare_arrays, parse_tolerance  # noqa: E402


def _median_seconds(function, repeats: int, baseline) -> tuple[float, float]:
    ours, theirs = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        baseline()
        theirs.append(time.perf_counter() - started)
    return statistics.median(ours), statistics.median(theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--millions", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    size = int(args.millions * 1_000_000)
    result = rng.standard_normal(size).astype(np.float32)
    few = result.copy()
    few[:: max(1, size // 10)] += 1  # ten elements out of tolerance
    everywhere = (result * np.float32(1 + 2e-7)).astype(np.float32)  # every element 1 or 2 ULP off
    cases = [("identical", result.copy()), ("10 differ", few), ("all differ by 1-2 ULP", everywhere)]
    print(f"{size:,} FLOAT32 elements; baseline: numpy.array_equal of the two arrays' bits; median of {args.repeats}")
    print(f"{'expected':24} {'rule':8} {'dmlcli ms':>10} {'NumPy ms':>9} {'ratio':>7}")
    for label, expected in cases:
        bits = result.view(np.uint32), expected.view(np.uint32)
        for rule_text in ("exact", "ulp:4"):
            rule = parse_tolerance(rule_text)
            ours, theirs = _median_seconds(lambda: compare_arrays(result, expected, rule), args.repeats,
                                           lambda: np.array_equal(*bits))
            print(f"{label:24} {rule_text:8} {ours * 1e3:10.1f} {theirs * 1e3:9.1f} {ours / theirs:7.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
