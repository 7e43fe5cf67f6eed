"""CPU benchmark (a script, not a test): CAST and the fills through dmlcli.run against the NumPy call that does
the same thing, measured in the same run (goal: at most 1.3x).

Each line gives two ratios: "run", dmlcli.run (the whole call: validation, the memory check, the kernel; about
0.25 ms of fixed cost per call on the development machine), and "kernel", the operator's kernel through the
backend on a call validated beforehand (engine.execute), which is what the 1.3x goal is about.

CAST against ndarray.astype on --mib MiB inputs of values inside the target's range (so astype's result is
CAST's: the rule for out-of-range values and NaN costs a second look only at blocks that have them); a pair
with NaN is timed too. FILL_VALUE_SEQUENCE against np.arange(start, stop, step, dtype) and FILL_VALUE_CONSTANT
against np.full, each writing --mib MiB. Times are medians of --repeats runs, alternating dmlcli and NumPy.
--clock cpu times each call by this thread's CPU time (time.thread_time) instead of the wall clock: on a machine
whose cores other work shares, the time spent waiting for a core is left out.

    .venv/bin/python bench/generation_cpu_bench.py [--mib 16] [--repeats 9] [--clock wall|cpu]
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
from dmlcli.data_types import from_numpy  # noqa: E402
from dmlcli.operators.numerics import compiled_loops  # noqa: E402

GOAL = 1.3
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = time.perf_counter  # main() sets the one --clock names
CAST_PAIRS = [("float32", "int32"), ("float32", "uint8"), ("float64", "int64"), ("float16", "int16"),
              ("float32", "float16"), ("float64", "float32"), ("float32", "float64"), ("int32", "float32"),
              ("int64", "int32"), ("uint8", "float32"), ("int32", "int8")]


def median_time(function, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = clock()
        function()
        samples.append(clock() - start)
    return statistics.median(samples)


def alternating_medians(functions, repeats: int) -> list[float]:
    for function in functions:
        function()  # warm up (and the first page faults)
    samples = [[] for _ in functions]
    for _ in range(repeats):  # alternating, so that a busy moment of the machine hits all of them
        for function, found in zip(functions, samples):
            found.append(median_time(function, 1))
    return [statistics.median(found) for found in samples]


def compare(label: str, op: str, arrays, numpy_call, repeats: int, **options) -> float:
    """dmlcli.run and the kernel alone (engine.execute of a validated call) against NumPy; the kernel's ratio."""
    verdict = engine.plan(engine.request(op, **options), [(from_numpy(a.dtype), a.shape) for a in arrays])
    run_time, kernel_time, numpy_time = alternating_medians(
        [lambda: dmlcli.run(op, *arrays, **options), lambda: engine.execute(verdict, arrays, "cpu"), numpy_call],
        repeats)
    ratio = kernel_time / numpy_time
    mark = "" if ratio <= GOAL else f"  (over {GOAL}x)"
    print(f"{label:<40} numpy {numpy_time * 1e3:7.2f} ms | run {run_time * 1e3:7.2f} ms {run_time / numpy_time:5.2f}x"
          f" | kernel {kernel_time * 1e3:7.2f} ms {ratio:5.2f}x{mark}")
    return ratio


def cast_input(source: str, target: str, count: int, rng) -> np.ndarray:
    if source.startswith("float"):
        info = np.iinfo(target) if target.startswith(("int", "uint")) else None
        low, high = (max(info.min, -30000), min(info.max, 30000)) if info is not None else (-1e4, 1e4)
        return rng.uniform(low, high, count).astype(source)
    info = np.iinfo(source)
    return rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), count, dtype=source)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; cpu: this thread's CPU time (leaves out waiting for a core)")
    parser.add_argument("--compiled-loops", action="store_true",
                        help="the kernels with Numba's compiled loops (as DMLCLI_COMPILED_LOOPS=1 runs them)")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    rng = np.random.default_rng(1)
    ratios = []
    loops = compiled_loops.use(args.compiled_loops)
    if args.compiled_loops and loops is None:
        parser.error("--compiled-loops needs numba (pip install 'dmlcli[compiled]')")
    print(f"CAST, {args.mib} MiB inputs, medians of {args.repeats} ({args.clock} clock, "
          f"{'compiled' if loops else 'NumPy'} loops)")
    for source, target in CAST_PAIRS:
        x = cast_input(source, target, args.mib * 2**20 // np.dtype(source).itemsize, rng)
        ratios.append(compare(f"cast {source} -> {target}", "cast", [x], lambda: x.astype(target), args.repeats,
                              output_dtype=target))
    x = cast_input("float32", "int32", args.mib * 2**18, rng)
    x[::1000] = np.nan  # every block has a NaN: the rule's path everywhere (not counted in the goal)
    with np.errstate(invalid="ignore"):
        compare("cast float32 -> int32, a NaN per block", "cast", [x], lambda: x.astype("int32"), args.repeats,
                output_dtype="int32")
    x = cast_input("float32", "uint8", args.mib * 2**18, rng) * np.float32(1.5)  # a third past 255
    compare("cast float32 -> uint8, a third past 255", "cast", [x], lambda: x.astype("uint8"), args.repeats,
            output_dtype="uint8")
    print(f"FILL_VALUE_SEQUENCE against np.arange, FILL_VALUE_CONSTANT against np.full, {args.mib} MiB outputs")
    for dtype, start, delta in [("float32", 0.5, 0.25), ("float16", 0.0, 0.001), ("int32", -5, 3), ("uint8", 0, 1),
                                ("int64", 7, -2)]:
        count = args.mib * 2**20 // np.dtype(dtype).itemsize
        ratios.append(compare(f"fill_value_sequence {dtype}", "fill_value_sequence", [],
                              lambda: np.arange(start, start + count * delta, delta, dtype=dtype), args.repeats,
                              output_shape=(count,), output_dtype=dtype, value_start=start, value_delta=delta))
    for dtype in ("float32", "uint8", "float64"):
        count = args.mib * 2**20 // np.dtype(dtype).itemsize
        ratios.append(compare(f"fill_value_constant {dtype}", "fill_value_constant", [],
                              lambda: np.full(count, 3, dtype), args.repeats, output_shape=(count,),
                              output_dtype=dtype, value=3))
    worst = max(ratios)
    print(f"kernel: worst ratio {worst:.2f}x (goal {GOAL}x); geometric mean {statistics.geometric_mean(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
