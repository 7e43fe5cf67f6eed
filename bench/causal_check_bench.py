"""GPU probe (a script, not a test): what the causal mask's check (attention/causal_masks.py) adds to a causal
attention, its kernel launched plainly and launched early (numerics/driver_launch.py: a programmatic dependent
launch, compute capability 9.0 and up).

PyTorch's scaled_dot_product_attention with is_causal=True on FLOAT16 [1, 32, S, 128] stands for cuDNN's causal
attention, and the module's kernel checks a {S, S} INT32 causal mask right behind it, as a MULTIHEAD_ATTENTION call
with a BOOLEAN mask learnt causal runs (no row is remade: the mask stays causal). Each round times, with CUDA events,
--calls calls back to back --rows times: the attention alone, then attention and check with each launch; the
figures are the medians over rounds of what the check adds per call (the baseline is the attention alone, timed in
the same round). Issue 33's goal 5 (0.9 of PyTorch's causal attention) leaves the check about a tenth of the call.

    PYTHONPATH=. python3 bench/causal_check_bench.py [--rounds 6] [--size 2048]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--rows", type=int, default=7, help="timed rows of calls a round (median)")
    parser.add_argument("--calls", type=int, default=50, help="calls back to back a row")
    parser.add_argument("--size", type=int, default=2048, help="the sequence length S")
    args = parser.parse_args(argv)
    try:
        import cupy as cp
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no CUDA device for PyTorch")
    except ImportError as why:
        print(f"skipped: {why}")
        return 0
    from dmlcli.operators.attention import causal_masks
    from dmlcli.operators.numerics.cuda_prelude import compiled
    from dmlcli.operators.numerics.driver_launch import EARLY_LAUNCH_CAPABILITY, DriverLaunch

    size = args.size
    launch = DriverLaunch.of(compiled(cp, causal_masks._SOURCE), causal_masks._ARGUMENT_KINDS)
    capability = int(cp.cuda.Device().compute_capability)
    if launch is None:
        print("skipped: no handle to the check's compiled function (CuPy's RawKernel gives none)")
        return 0
    mask = cp.asarray(np.tril(np.ones((size, size), np.int32)))
    # The geometry (causal_masks._GEOMETRY): the mask's strides {0, 0, S, 1}, one batch and head of it, then batch 1,
    # 32 heads, group 1, S rows and keys, head and value sizes 128; Q, K, V and O's strides unused (nothing remade).
    geometry = cp.asarray(np.array([0, 0, size, 1, 1, 1, 1, 32, 1, size, size, 128, 128] + [0] * 16, np.int64))
    flag = cp.zeros(1, np.uint64)
    blocks = max(1, min(causal_masks._BLOCKS, -(-size * 32 // causal_masks._THREADS)))
    arguments = (mask.data.ptr, geometry.data.ptr, flag.data.ptr, 1, 1, 1, 0.1, -1e4, 0, 0, 0, 0)
    q = torch.randn(1, 32, size, 128, device="cuda", dtype=torch.float16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    stream = torch.cuda.current_stream().cuda_stream

    def attention():
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def checked(early: bool):
        def call():
            attention()
            launch(blocks, causal_masks._THREADS, stream, arguments, early=early)
        return call

    def per_call(step) -> float:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        rows = []
        for _ in range(args.rows):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.calls):
                step()
            stop.record()
            stop.synchronize()
            rows.append(start.elapsed_time(stop) * 1e3 / args.calls)
        return statistics.median(rows)

    cases = {"plain": checked(False)}
    if capability >= EARLY_LAUNCH_CAPABILITY and launch.can_launch_early:
        cases["early"] = checked(True)
    alone_times, added = [], {name: [] for name in cases}
    for _ in range(args.rounds):
        alone = per_call(attention)
        alone_times.append(alone)
        for name, step in cases.items():
            added[name].append(per_call(step) - alone)
    if int(flag.get()[0]) != 0:
        raise SystemExit("the check found the causal mask not causal: the bench's geometry is wrong")
    print(f"GPU: {torch.cuda.get_device_name()} (compute capability {capability / 10:.1f}; an early launch needs "
          f"{EARLY_LAUNCH_CAPABILITY / 10:.1f}, and the driver's cuLaunchKernelEx: "
          f"{'found' if launch.can_launch_early else 'missing'})")
    print(f"causal attention [1, 32, {size}, 128] FLOAT16 alone: median {statistics.median(alone_times):.1f} us a call")
    for name, values in added.items():
        print(f"check launched {name:5}: adds median {statistics.median(values):.1f} us a call "
              f"(rounds: {', '.join(f'{v:.1f}' for v in values)})")
    if "early" in cases:
        print(f"early / plain: {statistics.median(added['early']) / statistics.median(added['plain']):.2f} "
              "of the added time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
