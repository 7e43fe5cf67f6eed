"""GPU benchmark (a script, not a test): the shaped operators on resident data against the copy and CuPy.

For each case, an input of --gib GiB already on the GPU: dmlcli's kernel (GpuBackend.execute_shaped_device, the
call validated once beforehand) and CuPy's own call for the same thing, each timed with CUDA events (medians of
--repeats runs after a warm-up). Throughput counts bytes read + bytes written; it is shown as a fraction of the
same GPU's device-to-device copy bandwidth (cudaMemcpy of the input's bytes: 2 x bytes per second), measured in
the same run. Issue 23's goals: >= 0.7 of the copy for reductions and data movement, and never slower
than CuPy (dmlcli / CuPy time <= 1); issue 19's: pooling at >= 0.6 of the copy (its CuPy baselines:
reshape + max / mean for windows that tile the input, a loop over window offsets otherwise). Each result is
checked against CuPy's before it is timed.

    PYTHONPATH=. python3 bench/shaped_gpu_bench.py                 # 1 GiB inputs, 10 repeats
    PYTHONPATH=. python3 bench/shaped_gpu_bench.py --gib 0.01 --repeats 2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_bench import cupy_and_gpu, gpu_median_seconds, moved_bytes, warm_up  # noqa: E402 - the GPU benches' helpers


def _cases(cp, rows: int, cols: int):
    """(label, operator, params, make inputs, CuPy's call on the same inputs)."""
    f32 = lambda: cp.random.random((rows, cols), dtype=cp.float32)  # noqa: E731
    half = lambda: cp.random.random((rows // 2, cols), dtype=cp.float32)  # noqa: E731
    index = lambda: cp.random.randint(0, rows, size=(1, rows // 2), dtype=cp.int32)  # noqa: E731
    nchw = lambda: cp.random.random((max(1, rows * cols // (16 * 256 * 256)), 16, 256, 256), dtype=cp.float32)  # noqa
    return [
        ("reduce sum, rows", "reduce", {"function": "sum", "axes": [1]}, lambda: [f32()],
         lambda x: cp.sum(x, axis=1, keepdims=True)),
        ("reduce sum, columns", "reduce", {"function": "sum", "axes": [0]}, lambda: [f32()],
         lambda x: cp.sum(x, axis=0, keepdims=True)),
        ("reduce max, rows", "reduce", {"function": "max", "axes": [1]}, lambda: [f32()],
         lambda x: cp.max(x, axis=1, keepdims=True)),
        ("reduce l2, rows", "reduce", {"function": "l2", "axes": [1]}, lambda: [f32()],
         lambda x: cp.sqrt(cp.sum(x * x, axis=1, keepdims=True))),
        ("argmax, rows", "argmax", {"axes": [1], "output_dtype": "int64"}, lambda: [f32()],
         lambda x: cp.argmax(x, axis=1)[:, None]),
        ("softmax1, rows", "activation_softmax1", {"axes": [1]}, lambda: [f32()],
         lambda x: (lambda e: e / e.sum(axis=1, keepdims=True))(cp.exp(x - x.max(axis=1, keepdims=True)))),
        ("cumulative_summation, rows", "cumulative_summation", {"axis": 1}, lambda: [f32()],
         lambda x: cp.cumsum(x, axis=1)),
        ("join, axis 0", "join", {"axis": 0}, lambda: [half(), half()], lambda a, b: cp.concatenate([a, b], axis=0)),
        ("slice, every other column", "slice", {"strides": [1, 2]}, lambda: [f32()], lambda x: x[:, ::2].copy()),
        ("tile, twice along rows", "tile", {"repeats": [2, 1]}, lambda: [half()], lambda x: cp.tile(x, (2, 1))),
        ("padding, constant", "padding", {"start_padding": [1, 1], "end_padding": [1, 1]}, lambda: [f32()],
         lambda x: cp.pad(x, 1)),
        ("gather, rows", "gather", {"axis": 0, "index_dimensions": 1}, lambda: [f32(), index()],
         lambda x, i: cp.take(x, i[0], axis=0)),
        ("cast float32 -> float16", "cast", {"output_dtype": "float16"}, lambda: [f32()],
         lambda x: x.astype(cp.float16)),
        # Pooling (issue 19's goal: >= 0.6 of the copy): { B, 16, 256, 256 } holding the same elements.
        ("max_pooling 2x2 stride 2", "max_pooling", {"window_size": [2, 2], "strides": [2, 2]}, lambda: [nchw()],
         lambda x: x.reshape(x.shape[0], 16, 128, 2, 128, 2).max(axis=(3, 5))),
        ("average_pooling 2x2 stride 2", "average_pooling", {"window_size": [2, 2], "strides": [2, 2]},
         lambda: [nchw()], lambda x: x.reshape(x.shape[0], 16, 128, 2, 128, 2).mean(axis=(3, 5))),
        ("max_pooling 3x3 stride 1 pad 1", "max_pooling",
         {"window_size": [3, 3], "start_padding": [1, 1], "end_padding": [1, 1]}, lambda: [nchw()],
         lambda x: _offset_max(cp, x, 3)),
    ]


def _offset_max(cp, x, k):
    """CuPy has no pooling call: the maximum over k x k windows (stride 1, padding k // 2) by window offsets."""
    pad = k // 2
    padded = cp.pad(x, [(0, 0), (0, 0), (pad, pad), (pad, pad)], constant_values=-cp.inf)
    best = None
    for i in range(k):
        for j in range(k):
            view = padded[:, :, i:i + x.shape[2], j:j + x.shape[3]]
            best = view.copy() if best is None else cp.maximum(best, view, out=best)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="input size in GiB (FLOAT32)")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    found = cupy_and_gpu()
    if found is None:
        return 0
    cp, backend = found
    import dmlcli
    from dmlcli import engine
    from dmlcli.data_types import from_numpy

    cols = 16384
    rows = max(4, int(args.gib * 2**30 / 4 / cols) // 2 * 2)
    clocks = warm_up(cp)

    def measure_copy() -> float:
        source = cp.random.random((rows, cols), dtype=cp.float32)
        target = cp.empty_like(source)
        copy = gpu_median_seconds(cp, lambda: cp.cuda.runtime.memcpy(
            target.data.ptr, source.data.ptr, source.nbytes, cp.cuda.runtime.memcpyDeviceToDevice), args.repeats)
        return 2 * source.nbytes / copy

    # The best of three medians: single copies vary by 10-15% in a run where the kernels' own times hold to 1-2%,
    # and the best is the strictest yardstick.
    copy_bandwidth = max(measure_copy() for _ in range(3))
    print(f"GPU: {backend.device_name}; CuPy {cp.__version__}; FLOAT32 input {rows} x {cols} "
          f"({rows * cols * 4 / 2**30:.2f} GiB); device-to-device copy {copy_bandwidth / 1e9:.0f} GB/s (the best of "
          f"three medians after a warm-up). {clocks}")
    print(f"{'case':32} {'dmlcli / copy':>14} {'CuPy / copy':>12} {'dmlcli / CuPy time':>19}")
    for label, op, params, make, baseline in _cases(cp, rows, cols):
        inputs = make()
        parameters = dict(params)
        output_dtype = parameters.pop("output_dtype", None)
        req = engine.request(op, output_dtype=output_dtype, **parameters)
        verdict = engine.plan(req, [(from_numpy(np.dtype(x.dtype)), tuple(x.shape)) for x in inputs])
        call = verdict.call
        run = lambda: backend.execute_shaped_device(call.operator, inputs, call.outputs, call.parameters)  # noqa
        got, want = run()[0], baseline(*inputs)
        rule_ok = cp.allclose(got.astype(cp.float64), cp.asarray(want).astype(cp.float64), rtol=1e-3, atol=1e-3)
        if not bool(rule_ok):
            print(f"{label:32} MISMATCH against CuPy's result; not timed")
            continue
        moved = moved_bytes(inputs, call)
        ours = gpu_median_seconds(cp, run, args.repeats)
        theirs = gpu_median_seconds(cp, lambda: baseline(*inputs), args.repeats)
        print(f"{label:32} {moved / ours / copy_bandwidth:14.2f} {moved / theirs / copy_bandwidth:12.2f} "
              f"{ours / theirs:19.2f}")
        del inputs, got, want
        cp.get_default_memory_pool().free_all_blocks()
    del dmlcli
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
