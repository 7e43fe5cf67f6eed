"""CPU benchmark of CONVOLUTION (a script, not a test): dmlcli.run against NumPy's best single expression for the
same convolution (goal: at most 3x its time), with the peak temporary memory of each.

The baseline ("NumPy's best expression"; SciPy has no multi-channel convolution, and scipy.signal.correlate per
(output, input) channel pair is far slower): the padded input's sliding_window_view, strided, contracted with the
filter by np.tensordot, i.e. im2col made by tensordot's reshape (a C x K x output-points copy) and one BLAS GEMM:

    np.tensordot(sliding_window_view(xp, K, axis=(2, 3))[:, :, ::s, ::s], w, axes=([1, 4, 5], [1, 2, 3]))

dmlcli's kernel makes no im2col: a loop over the K filter taps, each one GEMM of the filter's slice with the
input shifted by that tap (memory: one shifted copy of the input and the output's accumulator). Peak
temporary memory is measured with tracemalloc (NumPy reports its buffers to it). FLOAT32; groups 1 (the
baseline's expression has no groups). Times are medians of --repeats runs, alternating the two.

    .venv/bin/python bench/conv_cpu_bench.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dmlcli  # noqa: E402

GOAL = 3.0

# (name, input N C H W, filter M C KH KW, stride, padding)
CASES = [
    ("resnet 3x3 64ch 56x56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("3x3 32ch 112x112 batch 2", (2, 32, 112, 112), (32, 32, 3, 3), 1, 1),
    ("7x7 stride 2, 3ch 224x224", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    ("1x1 256 -> 64ch 28x28", (4, 256, 28, 28), (64, 256, 1, 1), 1, 0),
    ("5x5 16ch 64x64", (2, 16, 64, 64), (32, 16, 5, 5), 1, 2),
]


def numpy_conv(x, w, stride: int, pad: int):
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = sliding_window_view(padded, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.ascontiguousarray(np.moveaxis(np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3])), 3, 1))


def dmlcli_conv(x, w, stride: int, pad: int):
    return dmlcli.run("convolution", x, w, strides=[stride, stride], start_padding=[pad, pad],
                      end_padding=[pad, pad])


def peak_bytes(function) -> int:
    tracemalloc.start()
    function()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'case':28} {'dmlcli ms':>10} {'numpy ms':>10} {'ratio':>6} {'dmlcli peak MiB':>16} "
          f"{'numpy peak MiB':>15}  (goal: ratio <= {GOAL})")
    worst = 0.0
    for name, x_shape, w_shape, stride, pad in CASES:
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        ours, theirs = dmlcli_conv(x, w, stride, pad), numpy_conv(x, w, stride, pad)
        scale = np.abs(theirs).max()
        assert ours.shape == theirs.shape and np.abs(ours - theirs).max() <= 1e-4 * scale, name
        samples = {"dmlcli": [], "numpy": []}
        for _ in range(args.repeats):
            for label, function in (("dmlcli", dmlcli_conv), ("numpy", numpy_conv)):
                start = time.perf_counter()
                function(x, w, stride, pad)
                samples[label].append(time.perf_counter() - start)
        mine, base = statistics.median(samples["dmlcli"]), statistics.median(samples["numpy"])
        ratio = mine / base
        worst = max(worst, ratio)
        memory = [peak_bytes(lambda f=f: f(x, w, stride, pad)) / 2**20 for f in (dmlcli_conv, numpy_conv)]
        print(f"{name:28} {mine * 1e3:10.1f} {base * 1e3:10.1f} {ratio:6.2f} {memory[0]:16.1f} {memory[1]:15.1f}")
    print(f"worst ratio {worst:.2f} ({'within' if worst <= GOAL else 'over'} the goal of {GOAL}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
