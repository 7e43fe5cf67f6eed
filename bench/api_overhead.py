"""Fixed cost of one `dmlcli.run` call on a tiny tensor, against the NumPy kernel alone (issue 23).

On a 4-element array the kernel costs a microsecond; everything else is dmlcli's per-call work: resolving the
operator and options, validating (the support table at the requested level), the room check, choosing the
backend, the hooks. Each figure is the median over batches of calls (each batch timed as a whole, per call),
as wall time and as this thread's CPU time (steadier on a shared, loaded machine).

    .venv/bin/python bench/api_overhead.py [--batches 25] [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import numpy as np

import dmlcli


def per_call(function, calls: int, batches: int) -> tuple[float, float]:
    """(median wall µs, median CPU µs) per call of `function`."""
    function()  # warm: the family module, the backend
    walls, cpus = [], []
    for _ in range(batches):
        start_wall, start_cpu = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            function()
        walls.append((time.perf_counter() - start_wall) / calls * 1e6)
        cpus.append((time.thread_time() - start_cpu) / calls * 1e6)
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=25)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    a8, b8 = np.array([0, 128, 42, 255], np.uint8), np.array([255, 255, 1, 1], np.uint8)
    af, bf = np.array([0.5, 1.5, -2.0, 3.25], np.float32), np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    cases = {
        "bit_xor uint8[4]": (lambda: np.bitwise_xor(a8, b8), lambda: dmlcli.run("bit_xor", a8, b8)),
        "add float32[4]": (lambda: np.add(af, bf), lambda: dmlcli.run("add", af, bf)),
        "bit_xor at 4_1": (lambda: np.bitwise_xor(a8, b8), lambda: dmlcli.run("bit_xor", a8, b8, feature_level="4_1")),
        "validate bit_xor": (lambda: None, lambda: dmlcli.validate("bit_xor", a8, b8)),
    }
    print(f"median of {args.batches} batches of {args.calls} calls; µs per call")
    print(f"{'call':22} {'kernel wall':>11} {'dmlcli wall':>11} {'overhead':>9} {'kernel cpu':>10} {'dmlcli cpu':>10} "
          f"{'overhead':>9}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (kernel, call) in cases.items():
            kernel_wall, kernel_cpu = per_call(kernel, args.calls, args.batches)
            wall, cpu = per_call(call, args.calls, args.batches)
            print(f"{name:22} {kernel_wall:11.1f} {wall:11.1f} {wall - kernel_wall:9.1f} {kernel_cpu:10.1f} "
                  f"{cpu:10.1f} {cpu - kernel_cpu:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
