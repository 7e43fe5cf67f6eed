"""CPU benchmark (a script, not a test): the matrix multiplication family through dmlcli.run against the NumPy
call a user would write for the same result (goal: at most 1.2x for GEMM against `a @ b`).

Baselines: `a @ b` (FLOAT32), `(a32 @ b32).astype(float16)` (FLOAT16 widened, as GEMM computes it),
`alpha * (a.T @ b) + beta * c` (every GEMM option), and for the integer operators the exact product a user
would write (`(a - azp).astype(float64) @ (b - bzp)` then the cast). Times are medians of --repeats runs,
alternating dmlcli and NumPy; dmlcli's include its validation. NumPy's BLAS uses every core it is given.

    .venv/bin/python bench/matmul_cpu_bench.py [--size 1024] [--repeats 7] [--cases gemm_f32,gemm_f16,...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dmlcli  # noqa: E402

GOAL = 1.2


def cases(size: int, rng: np.random.Generator) -> dict[str, tuple[Callable, Callable]]:
    """name -> (dmlcli call, NumPy call) on the same inputs."""
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    c = rng.random((size, size), dtype=np.float32)
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    batch_a = rng.random((2, 4, size // 4, size // 2), dtype=np.float32)
    batch_b = rng.random((2, 4, size // 2, size // 4), dtype=np.float32)
    ia = rng.integers(-128, 128, (size // 2, size // 2)).astype(np.int8)
    ib = rng.integers(0, 256, (size // 2, size // 2)).astype(np.uint8)
    azp, bzp = np.array([3], np.int8), np.array([128], np.uint8)

    def integer_numpy():
        return ((ia.astype(np.float64) - 3) @ (ib.astype(np.float64) - 128)).astype(np.int64).astype(np.int32)

    return {
        "gemm_f32": (lambda: dmlcli.run("gemm", a, b), lambda: a @ b),
        "gemm_f32_all_options": (
            lambda: dmlcli.run("gemm", a, b, c, trans_a="transpose", alpha=0.5, beta=2.0),
            lambda: np.float32(0.5) * (a.T @ b) + np.float32(2.0) * c),
        "gemm_f32_batched": (lambda: dmlcli.run("gemm", batch_a, batch_b), lambda: batch_a @ batch_b),
        "gemm_f16": (lambda: dmlcli.run("gemm", a16, b16),
                     lambda: (a16.astype(np.float32) @ b16.astype(np.float32)).astype(np.float16)),
        "gemm_f32_fused_relu": (lambda: dmlcli.run("gemm", a, b, fused_activation="relu"),
                                lambda: np.maximum(a @ b, np.float32(0))),
        "matrix_multiply_integer": (lambda: dmlcli.run("matrix_multiply_integer", ia, azp, ib, bzp), integer_numpy),
    }


def timed(call: Callable) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="M = K = N of the square products")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args(argv)
    table = cases(args.size, np.random.default_rng(0))
    chosen = [name for name in args.cases.split(",") if name] or list(table)
    print(f"matmul family, CPU, {args.size}x{args.size}, medians of {args.repeats} runs (goal <= {GOAL}x)")
    print(f"{'case':26} {'dmlcli ms':>10} {'numpy ms':>10} {'ratio':>7}")
    worst = 0.0
    for name in chosen:
        ours_call, numpy_call = table[name]
        ours_call(), numpy_call()  # warm-up: imports, BLAS threads, page faults
        ours, theirs = [], []
        for _ in range(args.repeats):
            ours.append(timed(ours_call))
            theirs.append(timed(numpy_call))
        ratio = statistics.median(ours) / statistics.median(theirs)
        worst = max(worst, ratio)
        print(f"{name:26} {statistics.median(ours) * 1e3:10.2f} {statistics.median(theirs) * 1e3:10.2f} "
              f"{ratio:7.2f}")
    print(f"worst ratio {worst:.2f} (goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
