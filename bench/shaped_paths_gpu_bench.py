"""GPU benchmark (a script, not a test): CUMULATIVE_SUMMATION, MAX_POOLING and SLICE on shapes beside
shaped_gpu_bench's, so that a new kernel for the bench's shape can be seen to be no slower on the others.

Each case's input holds about --mib MiB of FLOAT32 on the GPU; its time (median of --repeats CUDA-event timings
after a warm-up) is shown in ms and as a fraction of the device-to-device copy of the same bytes (read + written,
as shaped_gpu_bench counts them). Run it on two checkouts (before and after a change of kernel) and compare the
columns: the kernel each call takes is the checkout's own choice.

    PYTHONPATH=. python3 bench/shaped_paths_gpu_bench.py                 # 256 MiB inputs, 10 repeats
    PYTHONPATH=. python3 bench/shaped_paths_gpu_bench.py --mib 1 --repeats 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_bench import copy_bandwidth, cupy_and_gpu, gpu_median_seconds, moved_bytes, warm_up  # noqa: E402 - the GPU benches' helpers

SAME_3x3 = {"window_size": [3, 3], "start_padding": [1, 1], "end_padding": [1, 1]}
SAME_5x5 = {"window_size": [5, 5], "start_padding": [2, 2], "end_padding": [2, 2]}


def _cases(elements: int):
    """(label, operator, parameters, input shape) with about `elements` FLOAT32 elements each."""
    cases = []
    for cols in (64, 256, 1024, 4096, 16384, 65536, 1 << 20):  # few long rows to many short ones
        cases.append((f"cumulative_summation, rows of {cols}", "cumulative_summation", {"axis": 1},
                      (max(1, elements // cols), cols)))
    cases.append(("cumulative_summation, rows of 16383", "cumulative_summation", {"axis": 1},
                  (max(1, elements // 16383), 16383)))  # not a multiple of 4: the shared-memory tiles
    for height, width in ((256, 256), (32, 32), (512, 512), (64, 1024), (256, 250)):  # 250: not whole vectors
        planes = max(1, elements // (16 * height * width))
        cases.append((f"max_pooling 3x3 same, {height} x {width}", "max_pooling", SAME_3x3,
                      (planes, 16, height, width)))
    cases.append(("max_pooling 5x5 same, 256 x 256", "max_pooling", SAME_5x5,
                  (max(1, elements // (16 * 256 * 256)), 16, 256, 256)))
    for cols in (64, 1024, 16384, 16386):  # 16386: rows of half vectors
        cases.append((f"slice every other column, rows of {cols}", "slice", {"strides": [1, 2]},
                      (max(1, elements // cols), cols)))
    cases.append(("slice every other row and column", "slice", {"strides": [2, 2]},
                  (max(2, elements // 4096), 4096)))
    return cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=256.0, help="input size of each case in MiB (FLOAT32)")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    found = cupy_and_gpu()
    if found is None:
        return 0
    cp, backend = found
    from dmlcli import engine
    from dmlcli.data_types import from_numpy

    elements = max(1, int(args.mib * 2**20 / 4))
    clocks = warm_up(cp)
    print(f"GPU: {backend.device_name}; CuPy {cp.__version__}; about {args.mib:g} MiB of FLOAT32 a case. {clocks}")
    print(f"{'case':44} {'input shape':>22} {'ms':>9} {'fraction of the copy':>21}")
    for label, op, params, shape in _cases(elements):
        x = cp.random.random(shape, dtype=cp.float32)
        verdict = engine.plan(engine.request(op, **params), [(from_numpy(np.dtype(x.dtype)), tuple(x.shape))])
        call = verdict.call
        run = lambda: backend.execute_shaped_device(call.operator, [x], call.outputs, call.parameters)  # noqa: E731
        moved = moved_bytes([x], call)
        ours = gpu_median_seconds(cp, run, args.repeats)
        copy = copy_bandwidth(cp, moved // 2 + 1, args.repeats)  # a copy of half the bytes moves them all
        print(f"{label:44} {'x'.join(map(str, shape)):>22} {ours * 1e3:9.3f} {moved / ours / copy:21.2f}")
        del x
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
