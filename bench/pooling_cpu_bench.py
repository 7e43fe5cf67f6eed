"""CPU benchmark of the pooling operators (a script, not a test): each through dmlcli.run, against the best NumPy
expression for the same result (goal: at most 1.3x), and against one copy of the input (the bandwidth floor).

The NumPy baselines, each giving the same values (checked before timing):
- a window that tiles the input (window = strides, no padding): reshape to (..., H/k, k, W/k, k) and reduce the
  two window axes (np.max, or np.sum in FLOAT32 then a division): the fastest NumPy has for that case;
- overlapping windows: np.lib.stride_tricks.sliding_window_view of the padded input (np.pad), subsampled by the
  strides and reduced over the window axes (np.nanmax / np.sum(dtype=float32)); also, as a second baseline, the
  same loop over window offsets that dmlcli's kernel runs, written inline (np.fmax / np.add into one
  accumulator), which is usually the faster of the two: the ratio is given against the faster baseline.
Inputs are FLOAT32 (FLOAT16 where named), { N, C, H, W } of --mib MiB. Times are medians of --repeats runs,
caches flushed before each run, dmlcli and the baselines interleaved; the ratio is the median of the
per-repeat ratios (dmlcli / the faster baseline of that repeat).

    .venv/bin/python bench/pooling_cpu_bench.py [--mib 16] [--repeats 7]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dmlcli  # noqa: E402

GOAL = 1.3
SCRATCH = np.zeros(64 * 2**20, np.uint8)  # written before each timed run: no input left in the caches


def evict_caches() -> None:
    np.add(SCRATCH, 1, out=SCRATCH)


def median_time(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        evict_caches()
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def tiled(x, k, reduce):
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // k, k, w // k, k)
    if reduce == "max":
        return blocks.max(axis=(3, 5))
    return (blocks.sum(axis=(3, 5), dtype=np.float32) / np.float32(k * k)).astype(x.dtype)


def windows_view(x, k, s, pad, fill):
    padded = np.pad(x, [(0, 0), (0, 0), (pad, pad), (pad, pad)], constant_values=fill) if pad else x
    return np.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(2, 3))[:, :, ::s, ::s]


def sliding(x, k, s, pad, reduce):
    if reduce == "max":
        return np.nanmax(windows_view(x, k, s, pad, np.nan), axis=(-2, -1))
    view = windows_view(x, k, s, pad, 0)
    return (view.sum(axis=(-2, -1), dtype=np.float32) / np.float32(k * k)).astype(x.dtype)


def offset_loop(x, k, s, pad, reduce):
    fill = np.nan if reduce == "max" else 0
    work = x if reduce == "max" or x.dtype == np.float32 else x.astype(np.float32)
    padded = np.pad(work, [(0, 0), (0, 0), (pad, pad), (pad, pad)], constant_values=fill) if pad else work
    oh = (padded.shape[2] - k) // s + 1
    ow = (padded.shape[3] - k) // s + 1
    total = None
    for i, j in itertools.product(range(k), range(k)):
        view = padded[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
        if total is None:
            total = np.array(view, dtype=np.float32 if reduce != "max" else x.dtype)
        elif reduce == "max":
            np.fmax(total, view, out=total)
        else:
            np.add(total, view, out=total)
    if reduce == "max":
        return total
    return (total / np.float32(k * k)).astype(x.dtype)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    side = 56
    channels = max(1, int(args.mib * 2**20 / 4 / (side * side) / 4))
    rng = np.random.default_rng(0)
    x32 = rng.standard_normal((4, channels, side, side)).astype(np.float32)
    x16 = x32.astype(np.float16)
    copy_time = median_time(lambda: x32.copy(), args.repeats)
    print(f"input {list(x32.shape)} FLOAT32 ({x32.nbytes / 2**20:.1f} MiB); one copy of it: {copy_time * 1e3:.2f} ms")
    print(f"{'case':44s} {'dmlcli':>9s} {'sliding':>9s} {'loop':>9s} {'tiled':>9s}  {'ratio':>6s}  {'/copy':>6s}")
    cases = [
        ("max_pooling 2x2 stride 2", "max_pooling", x32, 2, 2, 0, "max"),
        ("max_pooling 3x3 stride 1 pad 1", "max_pooling", x32, 3, 1, 1, "max"),
        ("max_pooling 3x3 stride 2 pad 1", "max_pooling", x32, 3, 2, 1, "max"),
        ("average_pooling 2x2 stride 2", "average_pooling", x32, 2, 2, 0, "mean"),
        ("average_pooling 3x3 stride 1 pad 1 (incl.)", "average_pooling", x32, 3, 1, 1, "mean"),
        ("average_pooling FLOAT16 3x3 s1 pad 1 (incl.)", "average_pooling", x16, 3, 1, 1, "mean"),
    ]
    for label, op, x, k, s, pad, reduce in cases:
        parameters = dict(window_size=[k, k], strides=[s, s], start_padding=[pad, pad], end_padding=[pad, pad])
        if op == "average_pooling":
            parameters["include_padding"] = True
        got = dmlcli.run(op, x, **parameters)
        baselines = {"sliding": lambda: sliding(x, k, s, pad, reduce), "loop": lambda: offset_loop(x, k, s, pad, reduce)}
        if s == k and pad == 0:
            baselines["tiled"] = lambda: tiled(x, k, reduce)
        for name, function in baselines.items():  # the same result, or the comparison means nothing
            want = function()
            assert want.shape == got.shape and np.allclose(got.astype(np.float64), want.astype(np.float64),
                                                           rtol=2e-3, atol=2e-3), (label, name)
        # Interleaved: each repeat times dmlcli and every baseline back to back, so that a busy machine's swings
        # hit both sides; the ratio is the median of the per-repeat ratios to the faster baseline.
        samples = {name: [] for name in ("dmlcli", *baselines)}
        ratios = []
        for _ in range(args.repeats):
            samples["dmlcli"].append(median_time(lambda: dmlcli.run(op, x, **parameters), 1))
            for name, function in baselines.items():
                samples[name].append(median_time(function, 1))
            ratios.append(samples["dmlcli"][-1] / min(samples[name][-1] for name in baselines))
        times = {name: statistics.median(values) for name, values in samples.items()}
        ours, ratio = times["dmlcli"], statistics.median(ratios)
        cells = " ".join(f"{times[n] * 1e3:8.2f}m" if n in baselines else f"{'-':>9s}" for n in ("sliding", "loop", "tiled"))
        flag = "" if ratio <= GOAL else "  (over the goal)"
        print(f"{label:44s} {ours * 1e3:8.2f}m {cells}  {ratio:6.2f}  {ours / copy_time:6.1f}{flag}")
    values_time = median_time(lambda: dmlcli.run("max_pooling", x32, window_size=[3, 3]), args.repeats)
    both_time = median_time(lambda: dmlcli.run("max_pooling1", x32, window_size=[3, 3]), args.repeats)
    print(f"max_pooling1 3x3 (values and indices) {both_time * 1e3:.2f} ms, {both_time / values_time:.2f}x "
          f"max_pooling's values alone ({values_time * 1e3:.2f} ms)")
    print("ratio: dmlcli / the fastest NumPy baseline (goal <= 1.3); /copy: dmlcli / one copy of the input")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
