"""CPU benchmark of ACTIVATION_GELU's kernel (a script, not a test): the kernel (dmlcli/operators/elementwise/gelu.py)
against the kernel before it (bench/gelu_erfc_check.py's copy: erf's series over every element, Cody's erfc past
t = 0.5), on the same inputs, checking both give the same bits.

Inputs: the Transformer encoder's GELU ({1, 16, 512} FLOAT32: normal values of deviation 0.6, as the feed-forward's
pre-activations of ../shared/onnx_models/encoder_small.onnx, 0.58), the same values in FLOAT16, and 1 Mi FLOAT32
values of that spread; --spread sets the deviation. Times are CPU times (time.thread_time) of the calling thread,
medians of --repeats runs of each kernel in ten rounds (a single thread: OPENBLAS_NUM_THREADS=1 is set here). With
DMLCLI_COMPILED_LOOPS=1 (and the `compiled` extra) the FLOAT32 path is one Numba call; the header says which.

    PYTHONPATH=. python3 bench/gelu_cpu_bench.py [--repeats 400] [--spread 0.6]
    DMLCLI_COMPILED_LOOPS=1 PYTHONPATH=. python3 bench/gelu_cpu_bench.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gelu_erfc_check import before  # noqa: E402

from dmlcli.operators.elementwise.gelu import gelu  # noqa: E402
from dmlcli.operators.numerics import compiled_loops  # noqa: E402


def cpu_seconds(function, *arguments) -> float:
    start = time.thread_time()
    function(*arguments)
    return time.thread_time() - start


def medians(x: np.ndarray, repeats: int) -> tuple[float, float]:
    """The median CPU seconds of the kernel before and of the kernel: `repeats` runs of each, in rounds of a tenth
    of them, each kernel's runs of a round in a row (a call right after the other kernel's pays for the caches that
    one left)."""
    old, new = [], []
    per_round = max(1, repeats // 10)
    for _ in range(max(1, repeats // per_round)):
        old.extend(cpu_seconds(before, x, x.dtype) for _ in range(per_round))
        new.extend(cpu_seconds(gelu, [x], x.dtype, {}) for _ in range(per_round))
    return statistics.median(old), statistics.median(new)


def same_bits(x: np.ndarray) -> bool:
    unsigned = f"u{x.itemsize}"
    return np.array_equal(before(x, x.dtype).view(unsigned), gelu([x], x.dtype, {}).view(unsigned))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=400, help="runs of the small cases (the 1 Mi case: 1/20)")
    parser.add_argument("--spread", type=float, default=0.6, help="the inputs' standard deviation")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    encoder = (rng.standard_normal((1, 16, 512)) * args.spread).astype(np.float32)
    cases = [("FLOAT32 {1,16,512}", encoder, args.repeats),
             ("FLOAT16 {1,16,512}", encoder.astype(np.float16), args.repeats),
             ("FLOAT32 1 Mi", (rng.standard_normal(1 << 20) * args.spread).astype(np.float32),
              max(1, args.repeats // 20))]
    loops = "on" if compiled_loops.active() is not None else f"off ({compiled_loops.state().get('reason')})"
    print(f"GELU on the CPU, CPU time per call (medians), inputs N(0, {args.spread}^2); compiled loops {loops}")
    print(f"{'case':<22}{'before':>12}{'now':>12}{'speed-up':>10}  same bits")
    with np.errstate(all="ignore"):
        gelu([encoder], np.float32, {})  # the FLOAT16 table and the other one-off work, outside the timing
        gelu([encoder.astype(np.float16)], np.float16, {})
        all_same = True
        for name, x, repeats in cases:
            old, new = medians(x, repeats)
            same = same_bits(x)
            all_same &= same
            print(f"{name:<22}{old * 1e6:>10.1f}us{new * 1e6:>10.1f}us{old / new:>9.2f}x  {'yes' if same else 'NO'}")
    print(f"same bits in every case: {'yes' if all_same else 'NO'}")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
