"""CPU benchmark (a script, not a test): shaped operators through dmlcli.run against the NumPy call that computes
the same thing in memory. Goal: dmlcli at most 1.3x NumPy's time.

Each row of ROWS is (name, the operator and its options for dmlcli.run, the NumPy baseline, the inputs): both
calls take the same arrays, made once per row (--mib MiB of FLOAT32 per input, as a 1024-row matrix). dmlcli's
time includes everything dmlcli.run does (validation, the kernel, making the output its own C-ordered array); the
"kernel" columns time the operator's kernel alone on a call validated beforehand (engine.execute), as
bench/generation_cpu_bench.py and bench/cpu_ops_bench.py do: the difference is dmlcli.run's per-call cost, which
grows once the data push the interpreter's own code and objects out of the caches. Times are medians of --repeats
runs, alternating dmlcli.run, the kernel and NumPy. Families add their operators' rows to ROWS.

--clock cpu times each call by this thread's CPU time (time.thread_time) instead of the wall clock: on a machine
whose cores other work shares, the time spent waiting for a core is left out (NumPy runs these calls on this
thread alone, so nothing of theirs is missed).

    .venv/bin/python bench/shaped_cpu_bench.py [--mib 16] [--repeats 9] [--rows reduce_sum,softmax,...] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dmlcli  # noqa: E402
from dmlcli import engine  # noqa: E402
from dmlcli.data_types import from_numpy  # noqa: E402

GOAL = 1.3
ROWS_OF_MATRIX = 1024
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


@dataclass(frozen=True)
class Row:
    name: str
    operator: str  # what dmlcli.run is given, with `options`
    options: dict
    numpy_call: Callable  # (*inputs) -> array: the same result, as a NumPy user would compute it
    inputs: Callable  # (element count) -> tuple of arrays

    def dmlcli_call(self, *inputs):
        return dmlcli.run(self.operator, *inputs, **self.options)

    def kernel_call(self, inputs) -> Callable:
        """The operator's kernel alone, through the backend, on a call validated beforehand (engine.execute): what
        dmlcli.run adds to it is its per-call cost, which grows once the data push the interpreter out of the
        caches."""
        verdict = engine.plan(engine.request(self.operator, **self.options),
                              [(from_numpy(x.dtype), x.shape) for x in inputs])
        return lambda *xs: engine.execute(verdict, list(xs), "cpu")


def matrix(low: float = -4.0, high: float = 4.0):
    """One FLOAT32 input of the given element count, ROWS_OF_MATRIX rows."""
    def make(count: int):
        rng = np.random.default_rng(7)
        return (rng.uniform(low, high, size=(ROWS_OF_MATRIX, count // ROWS_OF_MATRIX)).astype(np.float32),)
    return make


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def numpy_log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def numpy_hardmax(x):
    return (np.arange(x.shape[-1]) == np.argmax(x, axis=-1)[:, None]).astype(x.dtype)


ROWS: list[Row] = [
    # ---- the reduction family
    Row("reduce_sum", "reduce", {"function": "sum", "axes": [1]}, lambda x: np.sum(x, axis=1, keepdims=True), matrix()),
    Row("reduce_sum_all", "reduce", {"function": "sum"}, lambda x: np.sum(x, keepdims=True), matrix()),
    Row("reduce_max", "reduce", {"function": "max", "axes": [1]}, lambda x: np.max(x, axis=1, keepdims=True), matrix()),
    Row("reduce_max_axis0", "reduce", {"function": "max", "axes": [0]}, lambda x: np.max(x, axis=0, keepdims=True),
        matrix()),
    Row("argmax", "argmax", {"axes": [1]}, lambda x: np.argmax(x, axis=1, keepdims=True), matrix()),
    Row("argmax_axis0", "argmax", {"axes": [0]}, lambda x: np.argmax(x, axis=0, keepdims=True), matrix()),
    Row("argmin", "argmin", {"axes": [1]}, lambda x: np.argmin(x, axis=1, keepdims=True), matrix()),
    Row("softmax", "softmax", {}, numpy_softmax, matrix()),
    Row("log_softmax", "log_softmax", {}, numpy_log_softmax, matrix()),
    Row("hardmax", "hardmax", {}, numpy_hardmax, matrix()),
    Row("cumulative_summation", "cumulative_summation", {"axis": 1}, lambda x: np.cumsum(x, axis=1), matrix()),
    Row("cumulative_summation_axis0", "cumulative_summation", {"axis": 0}, lambda x: np.cumsum(x, axis=0), matrix()),
    Row("cumulative_product", "cumulative_product", {"axis": 1}, lambda x: np.cumprod(x, axis=1), matrix(0.99, 1.01)),
]


def timed(call: Callable, inputs, clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    call(*inputs)
    return clock() - start


def measure(row: Row, count: int, repeats: int,
            clock: Callable[[], float] = time.perf_counter) -> tuple[float, float, float]:
    """Median seconds of dmlcli.run, of the kernel alone and of NumPy, alternating, after one warm-up run of each."""
    inputs = row.inputs(count)
    kernel = row.kernel_call(inputs)
    got, expected = row.dmlcli_call(*inputs), row.numpy_call(*inputs)
    kernel(*inputs)
    if got.shape != expected.shape:
        raise SystemExit(f"{row.name}: dmlcli gave shape {got.shape}, NumPy {expected.shape}: not the same thing")
    ours, alone, theirs = [], [], []
    for _ in range(repeats):
        ours.append(timed(row.dmlcli_call, inputs, clock))
        alone.append(timed(kernel, inputs, clock))
        theirs.append(timed(row.numpy_call, inputs, clock))
    return statistics.median(ours), statistics.median(alone), statistics.median(theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=16.0, help="MiB of FLOAT32 per input (default 16)")
    parser.add_argument("--repeats", type=int, default=9, help="runs of each call; the median counts (default 9)")
    parser.add_argument("--rows", default="", help="comma-separated row names (default: every row)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; cpu: this thread's CPU time (leaves out waiting for a core)")
    args = parser.parse_args(argv)
    clock = CLOCKS[args.clock]
    wanted = [name for name in args.rows.split(",") if name]
    unknown = sorted(set(wanted) - {row.name for row in ROWS})
    if unknown:
        parser.error(f"unknown rows {unknown}; known: {', '.join(row.name for row in ROWS)}")
    count = max(ROWS_OF_MATRIX, int(args.mib * 2**20 / 4) // ROWS_OF_MATRIX * ROWS_OF_MATRIX)
    print(f"numpy {np.__version__}; {count} FLOAT32 elements ({count * 4 / 2**20:g} MiB) per input as "
          f"{ROWS_OF_MATRIX} rows; medians of {args.repeats} runs ({args.clock} clock); goal <= {GOAL}x")
    # dmlcli.run's fixed cost (the request, validation, the memory check, the backend), on 8 elements: the floor
    # under every row, which weighs on the reductions that NumPy finishes in about a millisecond.
    tiny = np.ones((2, 4), np.float32)
    fixed = statistics.median(timed(lambda x: dmlcli.run("reduce", x, axes=[1]), (tiny,), clock)
                              for _ in range(max(args.repeats, 20)))
    print(f"dmlcli.run's fixed cost per call (REDUCE of 2x4 elements): {fixed * 1e3:.2f} ms")
    print(f"{'row':<28} {'dmlcli ms':>10} {'numpy ms':>10} {'ratio':>7} {'kernel ms':>10} {'kernel ratio':>13}")
    worst = worst_kernel = 0.0
    for row in ROWS:
        if wanted and row.name not in wanted:
            continue
        ours, alone, theirs = measure(row, count, args.repeats, clock)
        ratio, kernel_ratio = ours / theirs, alone / theirs
        worst, worst_kernel = max(worst, ratio), max(worst_kernel, kernel_ratio)
        flag = "" if ratio <= GOAL else "  over the goal"
        print(f"{row.name:<28} {ours * 1e3:>10.2f} {theirs * 1e3:>10.2f} {ratio:>6.2f}x {alone * 1e3:>10.2f} "
              f"{kernel_ratio:>12.2f}x{flag}")
    print(f"worst ratio {worst:.2f}x, kernels alone {worst_kernel:.2f}x (goal {GOAL}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
