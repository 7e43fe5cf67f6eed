"""One-off check (a script, not a test): GELU's CPU kernel past t = -x/sqrt(2) >= 0.5, where it takes Cody's
vectorised erfc (dmlcli/operators/elementwise/activation.py), gives the same bits as C's erfc taken element by
element there (the kernel before). It runs every FLOAT16 value; every FLOAT32 x in [-38, -0.70703125] (t from 0.4999
to 26.9, past which erfc is below 2^-1000), every 4096th FLOAT32 bit pattern over the rest of both signs, and the
edges (+-0, subnormals, +-inf, NaN, the saturation edge where the FLOAT32 result turns -0). It prints the largest
relative distance between Cody's erfc and C's over t in [0.5, 26.5] (the bound _ERFC_APART stands on), the count of
products redone with C's erfc, and the count of differing bits (0 expected).

    PYTHONPATH=. python3 bench/gelu_erfc_check.py [--step 1] [--spread 4096]

Exit status 0 where no bit differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmlcli.operators.elementwise import activation  # noqa: E402

CHUNK = 1 << 20


def before(x: np.ndarray, out_dtype) -> np.ndarray:
    """The kernel as it was: C's erfc element by element past t = 0.5, the erf series below (unchanged)."""
    v = x.astype(np.float64)
    t = -v * activation._SQRT1_2
    with np.errstate(all="ignore"):
        values = 0.5 * v * activation._erfc(t)
        tail = np.flatnonzero(t >= activation._ERFC_BY_ERF)
        values[tail] = 0.5 * v[tail] * activation._erfc_libm(t[tail])
        values = np.where(v == -np.inf, -0.0, values)
    return values.astype(out_dtype)


def differing(x: np.ndarray, out_dtype) -> int:
    with np.errstate(all="ignore"):  # NaN and infinity are values here
        now = activation.gelu([x], out_dtype, {})
        old = before(x, out_dtype)
    bits = np.dtype(out_dtype).itemsize * 8
    as_int = np.dtype(f"u{bits // 8}")
    return int(np.count_nonzero(now.view(as_int) != old.view(as_int)))


def largest_distance(t: np.ndarray) -> float:
    inside = t[(t >= 0.5) & (t <= 26.5)]
    if inside.size == 0:
        return 0.0
    cody, libm = activation._erfc_cody(inside), activation._erfc_libm(inside)
    return float(np.max(np.abs(cody - libm) / libm))


def redone(x: np.ndarray, out_dtype) -> int:
    with np.errstate(all="ignore"):
        v = x.astype(np.float64)
        t = -v * activation._SQRT1_2
        values = 0.5 * v * activation._erfc(t)
        return int(np.count_nonzero((t >= 0.5) & activation._near_a_rounding_boundary(values, out_dtype)))


def float32_patterns(first: int, last: int, step: int):
    for start in range(first, last + 1, CHUNK * step):
        yield np.arange(start, min(start + CHUNK * step, last + 1), step, dtype=np.uint32).view(np.float32)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--step", type=int, default=1,
                        help="every step-th FLOAT32 pattern of the tail and of [-14.5, -13.5] (1: all)")
    parser.add_argument("--spread", type=int, default=4096, help="every spread-th FLOAT32 pattern of the rest")
    args = parser.parse_args(argv)

    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    count = differing(halves, np.float16)
    print(f"FLOAT16, all 65536: differing {count}, redone {redone(halves, np.float16)}")

    head = int(np.float32(-0.70703125).view(np.uint32))
    end = int(np.float32(-38.0).view(np.uint32))
    worst, near, total = 0.0, 0, 0
    for x in float32_patterns(head, end, args.step):
        t = -x.astype(np.float64) * activation._SQRT1_2
        worst = max(worst, largest_distance(t))
        count += differing(x, np.float32)
        near += redone(x, np.float32)
        total += x.size
    print(f"FLOAT32 tail [-38, -0.70703125], {total} values: largest |cody - libm| / libm {worst:.3g} "
          f"(2^{math.log2(worst):.1f}), redone {near}, differing {count}")

    spread = np.arange(0, 1 << 32, args.spread, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38,
                      -2.0**-149, -14.0, -14.1, -14.2, -14.3, -13.9, -37.6, -37.7, -38.5, -40.0, -3.4028235e38],
                     np.float32)
    saturation = np.arange(int(np.float32(-13.5).view(np.uint32)), int(np.float32(-14.5).view(np.uint32)),
                           args.step, dtype=np.uint32).view(np.float32)
    rest = np.concatenate([spread, edges, saturation])
    rest_differing = differing(rest, np.float32)
    count += rest_differing
    print(f"FLOAT32 every {args.spread}th pattern, edges, every {args.step}th value in [-14.5, -13.5], "
          f"{rest.size} values: differing {rest_differing}")
    zero_from = saturation[activation.gelu([saturation], np.float32, {}) == 0]
    print(f"FLOAT32 results -0 from x = {zero_from.max() if zero_from.size else 'none'} down")
    print(f"differing bits in all: {count}")
    return 0 if count == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
