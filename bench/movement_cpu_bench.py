"""CPU benchmark of the data-movement operators (a script, not a test): each through dmlcli.run, against the
NumPy expression that makes the same array (goal: at most 1.3x).

"The same array" means a fresh C-ordered result, as dmlcli returns: NumPy's slicing and np.split give views,
so their baselines copy the views (np.ascontiguousarray); np.split alone (views, no copy) is shown beside for
reference. Inputs are FLOAT32, --mib MiB each (16 by default). Times are medians of --repeats runs,
alternating dmlcli and NumPy, each run after the caches are flushed; the ratio of the fastest runs is shown
beside. --clock cpu times each call by this thread's CPU time (time.thread_time) instead of the wall clock: on a
machine whose cores other work shares, the time spent waiting for a core is left out.

    .venv/bin/python bench/movement_cpu_bench.py [--mib 16] [--repeats 9] [--ops join,split,...] [--clock wall|cpu]
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

GOAL = 1.3
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = time.perf_counter  # main() sets the one --clock names


# Twice this machine's 32 MiB L3: written before each timed call, so that neither side finds its input or the
# buffer it is about to reuse still in the cache (16 MiB in and out nearly fit, which made NumPy's tight loop
# look up to 4x faster than the same copy after any other work).
SCRATCH = np.zeros(64 * 2**20, np.uint8)


def evict_caches() -> None:
    np.add(SCRATCH, 1, out=SCRATCH)


def median_time(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        evict_caches()
        start = clock()
        function()
        samples.append(clock() - start)
    return statistics.median(samples)


def d2s_numpy(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // (b * b), h * b, w * b)


def d2s_crd_numpy(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // (b * b), h * b, w * b)


def s2d_numpy(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w // b)


def reverse_numpy(x, lengths, axis):
    """The NumPy expression of REVERSE_SUBSEQUENCES along the last axis: an index per element, then a gather."""
    steps = x.shape[axis]
    position = np.arange(steps)
    clamped = np.minimum(lengths, steps).astype(np.int64)
    return np.take_along_axis(x, np.where(position < clamped, clamped - 1 - position, position), axis=axis)


def cases(mib: int):
    """name -> (dmlcli call, NumPy baseline, note)."""
    rng = np.random.default_rng(0)
    side = int((mib * 2**20 // 4) ** 0.5)
    x = rng.standard_normal((side, side), dtype=np.float32)
    y = rng.standard_normal((side, side), dtype=np.float32)
    channels = mib * 2**20 // 4 // (256 * 256)
    deep = rng.standard_normal((1, channels, 256, 256), dtype=np.float32)
    full = np.full((side, 1), side, np.uint32)
    mixed = rng.integers(0, side + 1, (side, 1), dtype=np.uint32)
    pads = {"start_padding": [16, 16], "end_padding": [16, 16]}
    found = {
        "join": (lambda: dmlcli.run("join", x, y, axis=1), lambda: np.concatenate([x, y], axis=1), "np.concatenate"),
        "split": (lambda: dmlcli.run("split", x, axis=1, output_count=4),
                  lambda: [np.ascontiguousarray(p) for p in np.split(x, 4, axis=1)], "np.split + copies"),
        "split_rows": (lambda: dmlcli.run("split", x, axis=0, output_count=4),
                       lambda: [p.copy() for p in np.split(x, 4, axis=0)], "np.split + copies"),
        "slice_crop": (lambda: dmlcli.run("slice", x, offsets=[8, 8], sizes=[side - 16, side - 16]),
                       lambda: np.ascontiguousarray(x[8:-8, 8:-8]), "slicing + copy"),
        "slice_strided": (lambda: dmlcli.run("slice", x, offsets=[1, 3], strides=[2, 1]),
                          lambda: np.ascontiguousarray(x[1::2, 3:]), "slicing + copy"),
        "slice1_reversed": (lambda: dmlcli.run("slice1", x, input_window_strides=[-1, -1]),
                            lambda: np.ascontiguousarray(x[::-1, ::-1]), "slicing + copy"),
        "slice1_strided": (lambda: dmlcli.run("slice1", x, input_window_strides=[-1, -2]),
                           lambda: np.ascontiguousarray(x[::-1, ::-2]), "slicing + copy"),
        "tile": (lambda: dmlcli.run("tile", x, repeats=[2, 2]), lambda: np.tile(x, (2, 2)), "np.tile"),
        "depth_to_space": (lambda: dmlcli.run("depth_to_space", deep, block_size=2), lambda: d2s_numpy(deep, 2),
                           "reshape/transpose/reshape"),
        "depth_to_space1_crd": (lambda: dmlcli.run("depth_to_space1", deep, block_size=2, order="column_row_depth"),
                                lambda: d2s_crd_numpy(deep, 2), "reshape/transpose/reshape"),
        "space_to_depth": (lambda: dmlcli.run("space_to_depth", deep, block_size=2), lambda: s2d_numpy(deep, 2),
                           "reshape/transpose/reshape"),
        "reverse_subsequences_full": (lambda: dmlcli.run("reverse_subsequences", x, full, axis=1),
                                      lambda: np.flip(x, axis=1).copy(), "np.flip + copy"),
        "reverse_subsequences": (lambda: dmlcli.run("reverse_subsequences", x, mixed, axis=1),
                                 lambda: reverse_numpy(x, mixed, 1), "take_along_axis"),
    }
    for mode, numpy_mode in (("constant", "constant"), ("edge", "edge"), ("reflection", "reflect"),
                             ("symmetric", "symmetric")):
        found[f"padding_{mode}"] = (
            lambda mode=mode: dmlcli.run("padding", x, padding_mode=mode, **pads),
            lambda numpy_mode=numpy_mode: np.pad(x, 16, mode=numpy_mode), f"np.pad {numpy_mode}")
    found["padding1_constant"] = (lambda: dmlcli.run("padding1", x, padding_value=np.float32(1.5), **pads),
                                  lambda: np.pad(x, 16, constant_values=np.float32(1.5)), "np.pad constant")
    return found


def check_same(name, ours, theirs) -> None:
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = tuple(theirs) if isinstance(theirs, list) else (theirs,)
    if name == "reverse_subsequences_full" or all(np.array_equal(a, b) for a, b in zip(ours, theirs)):
        return
    raise SystemExit(f"{name}: dmlcli and the NumPy baseline disagree")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--ops", default="")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; cpu: this thread's CPU time (leaves out waiting for a core)")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    chosen = [name for name in args.ops.split(",") if name]
    print(f"data movement on the CPU, FLOAT32 inputs of {args.mib} MiB, medians of {args.repeats} runs; "
          f"numpy {np.__version__}; {args.clock} clock")
    print(f"{'operator':28} {'dmlcli ms':>10} {'numpy ms':>10} {'ratio':>7} {'min ratio':>10}  baseline")
    worst = 0.0
    for name, (ours, theirs, note) in cases(args.mib).items():
        if chosen and name not in chosen:
            continue
        check_same(name, ours(), theirs())
        samples_ours, samples_theirs = [], []
        for _ in range(args.repeats):  # alternate, so that a busy moment hits both
            samples_ours.append(median_time(ours, 1))
            samples_theirs.append(median_time(theirs, 1))
        a, b = statistics.median(samples_ours), statistics.median(samples_theirs)
        # The fastest runs too: on a shared machine a median can be another process's noise.
        least = min(samples_ours) / min(samples_theirs)
        worst = max(worst, a / b)
        flag = "" if a / b <= GOAL else "  over the goal"
        print(f"{name:28} {a * 1e3:10.2f} {b * 1e3:10.2f} {a / b:7.2f} {least:10.2f}  {note}{flag}")
    tiny = np.zeros((4, 4), np.float32)
    fixed = median_time(lambda: dmlcli.run("slice", tiny, offsets=[1, 1]), 51)
    print(f"worst ratio {worst:.2f} (goal {GOAL}); dmlcli's fixed cost per call (the request, the kept verdict, "
          f"the memory check, the backend; caches flushed first), timed on a 4x4 SLICE: {fixed * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
