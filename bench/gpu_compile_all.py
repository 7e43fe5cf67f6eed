"""Compile every GPU kernel of the table (every operator x every type signature), in parallel processes.

A check and a cache warmer, not a benchmark of dmlcli: each signature is compiled once by NVRTC
through CuPy, which keeps the result in its on-disk kernel cache, so that later runs (the GPU tests,
a first `--backend gpu` call) load it instead of compiling. Prints the count, the failures with
NVRTC's first lines, and the time.

    PYTHONPATH=. python3 bench/gpu_compile_all.py [--processes 16] [--ops add,sin]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def compile_one(task: tuple[str, tuple[str, ...]]) -> str | None:
    import cupy

    from dmlcli.backends import gpu_kernels
    from dmlcli.operators import find_operator

    name, signature = task
    operator = find_operator(name)
    try:
        module = cupy.RawModule(code=gpu_kernels.module_source(operator, signature),
                                options=gpu_kernels.COMPILE_OPTIONS)
        for kind in ("vec", "nd"):
            module.get_function(gpu_kernels.kernel_name(kind, signature))
    except Exception as error:  # noqa: BLE001 - reported, not raised: the point is the full list
        return f"{name} {signature}: {' '.join(str(error).split())[:300]}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 4)
    parser.add_argument("--ops", default="", help="comma-separated operators [all]")
    args = parser.parse_args(argv)
    from dmlcli.backends import gpu
    from dmlcli.errors import BackendUnavailableError

    try:
        gpu.create()
    except BackendUnavailableError as why:
        print(f"skipped: {why}")
        return 0
    from dmlcli.backends import gpu_kernels
    from dmlcli.operators import OPERATORS

    chosen = [op for op in OPERATORS if not args.ops or op.cli_name in args.ops.split(",")]
    tasks = [(op.cli_name, signature) for op in chosen for signature in gpu_kernels.signatures(op)]
    start = time.perf_counter()
    # Spawned, not forked: this process has initialised CUDA (gpu.create), which a forked child cannot use.
    with ProcessPoolExecutor(args.processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        failures = [failure for failure in pool.map(compile_one, tasks, chunksize=4) if failure]
    seconds = time.perf_counter() - start
    for failure in failures:
        print("FAILED", failure)
    print(f"{len(tasks) - len(failures)} of {len(tasks)} signatures of {len(OPERATORS)} operators compiled "
          f"in {seconds:.1f} s with {args.processes} processes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
