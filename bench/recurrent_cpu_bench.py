"""CPU benchmark (a script, not a test): RNN, GRU and LSTM through dmlcli.run against a plain NumPy loop that
computes the same thing, measured in the same run (goal: at most 1.3x).

The NumPy baseline is the textbook form: the inputs' projection X W^T in one np.matmul, then one np.matmul with R
per time step and the gates' element-wise formulas, in float32 (tanh/sigmoid defaults, forward, with bias and an
initial state). Two ratios per line: "run", dmlcli.run (validation, the memory check, the kernel), and "kernel",
the operator's kernel on a call validated beforehand (engine.execute). Times are medians of --repeats runs,
alternating dmlcli and NumPy.

    .venv/bin/python bench/recurrent_cpu_bench.py [--repeats 9]
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
from dmlcli import engine  # noqa: E402

GOAL = 1.3
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
SHAPES = [(16, 8, 32, 64), (64, 32, 128, 128), (128, 64, 256, 256)]  # seq_length, batch, input_size, hidden


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def numpy_loop(kind, x, w, r, b, h0):
    """The same network in plain NumPy, float32 (the baseline)."""
    hidden = r.shape[-1]
    gates = GATES[kind]
    projected = np.matmul(x[0], w[0, 0].T) + b[0, 0, 0, :gates * hidden]
    rb = b[0, 0, 0, gates * hidden:]
    h, c = h0[0, 0], np.zeros_like(h0[0, 0])
    out = np.empty((x.shape[1], 1) + h.shape, np.float32)
    for t in range(x.shape[1]):
        if kind == "rnn":
            h = np.tanh(projected[t] + h @ r[0, 0].T + rb)
        elif kind == "gru":
            zr = h @ r[0, 0, :2 * hidden].T + rb[:2 * hidden]
            z = sigmoid(projected[t, :, :hidden] + zr[:, :hidden])
            reset = sigmoid(projected[t, :, hidden:2 * hidden] + zr[:, hidden:])
            n = np.tanh(projected[t, :, 2 * hidden:] + (reset * h) @ r[0, 0, 2 * hidden:].T + rb[2 * hidden:])
            h = (1 - z) * n + z * h
        else:
            g = projected[t] + h @ r[0, 0].T + rb
            i, o, f = sigmoid(g[:, :hidden]), sigmoid(g[:, hidden:2 * hidden]), sigmoid(g[:, 2 * hidden:3 * hidden])
            c = f * c + i * np.tanh(g[:, 3 * hidden:])
            h = o * np.tanh(c)
        out[t, 0] = h
    return out, h


def alternating_medians(functions, repeats: int) -> list[float]:
    for function in functions:
        function()
    samples = [[] for _ in functions]
    for _ in range(repeats):
        for index, function in enumerate(functions):
            start = time.perf_counter()
            function()
            samples[index].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'operator':8} {'seq x batch x input x hidden':>28} {'numpy ms':>9} {'run ms':>8} {'kernel ms':>9} "
          f"{'run/numpy':>9} {'kernel/numpy':>12}")
    for kind in ("rnn", "gru", "lstm"):
        for steps, batch, width, hidden in SHAPES:
            gates = GATES[kind]
            x = rng.standard_normal((1, steps, batch, width)).astype(np.float32)
            w = (rng.standard_normal((1, 1, gates * hidden, width)) * 0.1).astype(np.float32)
            r = (rng.standard_normal((1, 1, gates * hidden, hidden)) * 0.1).astype(np.float32)
            b = (rng.standard_normal((1, 1, 1, 2 * gates * hidden)) * 0.1).astype(np.float32)
            h0 = (rng.standard_normal((1, 1, batch, hidden)) * 0.1).astype(np.float32)
            arrays = [x, w, r, b, h0]
            verdict = engine.plan_arrays(engine.request(kind), arrays)
            numpy_ms, run_ms, kernel_ms = (1000 * t for t in alternating_medians([
                lambda: numpy_loop(kind, x, w, r, b, h0),
                lambda: dmlcli.run(kind, *arrays),
                lambda: engine.execute(verdict, arrays, "cpu"),
            ], args.repeats))
            mark = "" if kernel_ms / numpy_ms <= GOAL else f"  (over the {GOAL}x goal)"
            print(f"{kind:8} {f'{steps} x {batch} x {width} x {hidden}':>28} {numpy_ms:9.2f} {run_ms:8.2f} "
                  f"{kernel_ms:9.2f} {run_ms / numpy_ms:9.2f} {kernel_ms / numpy_ms:12.2f}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
