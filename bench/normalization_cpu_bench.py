"""CPU benchmark of the normalization and resampling operators (a script, not a test): each through dmlcli.run,
against the NumPy expression that computes the same thing in FLOAT32 (goal: at most 1.3x).

The NumPy baselines are the plain formulas (mean and variance with keepdims, then the arithmetic; resampling by
np.take of the computed indices), written here without dmlcli's checks. Inputs are FLOAT32 {N, C, H, W} of about
--mib MiB (8 by default). Times are medians of --repeats runs, alternating dmlcli and NumPy, each run after the
caches are flushed; the ratio of the medians is shown beside.

    .venv/bin/python bench/normalization_cpu_bench.py [--mib 8] [--repeats 7] [--ops batch_normalization,...]
        [--compiled-loops]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dmlcli  # noqa: E402
from dmlcli.operators.numerics import compiled_loops  # noqa: E402

GOAL = 1.3
SCRATCH = np.zeros(64 * 2**20, np.uint8)  # written before each timed call: neither side finds its data cached


def evict_caches() -> None:
    np.add(SCRATCH, 1, out=SCRATCH)


def timed(function) -> float:
    evict_caches()
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def numpy_batch_norm(x, mean, var, scale, bias, eps=np.float32(1e-5)):
    return scale * ((x - mean) / np.sqrt(var + eps)) + bias


def numpy_mvn(x, axes, eps=np.float32(1e-5)):
    mean = x.mean(axis=axes, keepdims=True)
    centred = x - mean
    return centred / np.sqrt((centred * centred).mean(axis=axes, keepdims=True) + eps)


def numpy_lrn(x, size=5, alpha=np.float32(1e-4), beta=np.float32(0.75), bias=np.float32(1)):
    squares = np.pad(x * x, ((0, 0), ((size - 1) // 2, size - 1 - (size - 1) // 2), (0, 0), (0, 0)))
    total = sum(squares[:, k:k + x.shape[1]] for k in range(size))
    return x / (bias + alpha / np.float32(size) * total) ** beta


def numpy_lp(x, axis=1):
    return x / np.maximum(np.sqrt((x * x).sum(axis=axis, keepdims=True)), np.float32(1e-5))


def numpy_nearest_2x(x):
    return np.ascontiguousarray(np.repeat(np.repeat(x, 2, axis=2), 2, axis=3))


def cases(mib: float):
    elements = int(mib * 2**20 / 4)
    side = int((elements / 32) ** 0.5)
    x = np.random.default_rng(0).standard_normal((2, 16, side, side)).astype(np.float32)
    channel = [np.random.default_rng(i).standard_normal((1, 16, 1, 1)).astype(np.float32) for i in range(4)]
    channel[1] = np.abs(channel[1]) + np.float32(0.5)
    mean, var, scale, bias = channel
    # a layer normalization's {N, S, 128} of the same size: the statistics over the last axis
    rows = np.random.default_rng(4).standard_normal((max(1, elements // 1024), 8, 128)).astype(np.float32)
    gamma, beta = (np.random.default_rng(i).standard_normal((1, 1, 128)).astype(np.float32) for i in (5, 6))
    wide = np.random.default_rng(7).standard_normal((max(1, elements // 6144), 8, 768)).astype(np.float32)
    gamma_wide, beta_wide = (np.random.default_rng(i).standard_normal((1, 1, 768)).astype(np.float32) for i in (8, 9))
    return {
        "batch_normalization": (lambda: dmlcli.run("batch_normalization", x, mean, var, scale, bias),
                                lambda: numpy_batch_norm(x, mean, var, scale, bias)),
        "mean_variance_normalization1": (lambda: dmlcli.run("mean_variance_normalization1", x, axes=[2, 3]),
                                         lambda: numpy_mvn(x, (2, 3))),
        "mvn1_last_axis": (
            lambda: dmlcli.run("mean_variance_normalization1", rows, gamma, beta, axes=[2]),
            lambda: numpy_mvn(rows, (2,)) * gamma + beta),
        "mvn1_last_axis_768": (
            lambda: dmlcli.run("mean_variance_normalization1", wide, gamma_wide, beta_wide, axes=[2]),
            lambda: numpy_mvn(wide, (2,)) * gamma_wide + beta_wide),
        "local_response_normalization": (lambda: dmlcli.run("local_response_normalization", x, cross_channel=True),
                                         lambda: numpy_lrn(x)),
        "lp_normalization": (lambda: dmlcli.run("lp_normalization", x, axis=1), lambda: numpy_lp(x)),
        "upsample_2d": (lambda: dmlcli.run("upsample_2d", x, scale_size=(2, 2)), lambda: numpy_nearest_2x(x)),
        "value_scale_2d": (lambda: dmlcli.run("value_scale_2d", x[:, :3], scale=0.5, bias=[1, 2, 3]),
                           lambda: np.ascontiguousarray(x[:, :3] * np.float32(0.5) + np.arange(1, 4, dtype=np.float32)
                                                        .reshape(1, 3, 1, 1))),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--ops", default="")
    parser.add_argument("--compiled-loops", action="store_true",
                        help="turn the compiled loops on (MEAN_VARIANCE_NORMALIZATION over the last axis; needs numba)")
    args = parser.parse_args(argv)
    loops = compiled_loops.use(args.compiled_loops)
    if args.compiled_loops and loops is None:
        parser.error("--compiled-loops needs numba (pip install 'dmlcli[compiled]')")
    print(f"compiled loops: {'on' if loops is not None else 'off'}")
    chosen = cases(args.mib)
    names = [name for name in chosen if not args.ops or name in args.ops.split(",")]
    print(f"{'operator':<30} {'dmlcli ms':>10} {'numpy ms':>10} {'ratio':>7}  (goal <= {GOAL})")
    ratios = []
    for name in names:
        ours, theirs = chosen[name]
        ours(), theirs()  # warm-up: imports, first allocations
        mine, numpy_times = [], []
        for _ in range(args.repeats):
            mine.append(timed(ours))
            numpy_times.append(timed(theirs))
        a, b = statistics.median(mine), statistics.median(numpy_times)
        ratios.append((a / b, name))
        print(f"{name:<30} {a * 1e3:>10.2f} {b * 1e3:>10.2f} {a / b:>7.2f}")
    worst, which = max(ratios)
    print(f"worst ratio: {worst:.2f} ({which})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
