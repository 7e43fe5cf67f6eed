"""GPU benchmark (a script, not a test): GEMM's GPU kernel on resident data against CuPy's own matmul.

For square FLOAT32 and FLOAT16 products of --size (and a batched FLOAT32 one), inputs already on the device:
dmlcli's kernel (GpuBackend.execute_shaped_device: CuPy's matmul = cuBLAS sgemm, TF32 off, plus Alpha/Beta/C
and the cast where asked) against `cupy.matmul` on the same arrays (FLOAT16: CuPy's half matmul, the call a
user would write). Times are CUDA-event medians of --repeats runs after a warm-up; goal: never slower than CuPy's
call for FLOAT32 (ratio <= 1.0 within noise). FLOAT16 is widened to FLOAT32 for a guaranteed FP32 accumulation,
so its ratio shows what that costs against CuPy's half-precision call. Each result is checked against the CPU
backend within GEMM's tolerance before it is timed. The FLOAT32 cases run once more with --allow-tf32
(execute_shaped_device(..., allow_tf32=True): TF32 tensor cores, checked within the TF32-wide rule): their
"tf32 ms" and "speed-up" columns are that run's median and the FLOAT32 run's median divided by it. Exits 4 without
CuPy or a device.

    PYTHONPATH=. python3 bench/matmul_gpu_bench.py [--size 4096] [--repeats 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_bench import gpu_median_seconds  # noqa: E402 - CUDA-event medians, one helper for the GPU benches

import dmlcli  # noqa: E402
from dmlcli.api import plan  # noqa: E402
from dmlcli.records import replace  # noqa: E402
from dmlcli.checking.comparison import rule_for, ulp_distance  # noqa: E402
from dmlcli.data_types import from_numpy  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        import cupy

        from dmlcli.backends import gpu
        backend = gpu.create()
    except Exception as why:  # noqa: BLE001 - no CuPy, no device: say so and stop
        print(f"skipped: needs CuPy and a CUDA device ({why})")
        return 0
    rng = np.random.default_rng(0)
    n = args.size
    cases = {
        "gemm_f32": ((n, n), (n, n), np.float32),
        "gemm_f16": ((n, n), (n, n), np.float16),
        "gemm_f32_batched": ((8, n // 4, n // 2), (8, n // 2, n // 4), np.float32),
    }
    print(f"GEMM on {backend.device_name}, resident inputs, CUDA-event medians of {args.repeats} runs")
    print(f"{'case':20} {'dmlcli ms':>10} {'cupy ms':>10} {'ratio':>7} {'TFLOP/s':>8} {'tf32 ms':>10} "
          f"{'speed-up':>8}")
    for name, (a_shape, b_shape, dtype) in cases.items():
        a = rng.uniform(0, 1, a_shape).astype(dtype)
        b = rng.uniform(0, 1, b_shape).astype(dtype)
        call = plan("gemm", [(from_numpy(a.dtype), a.shape), (from_numpy(b.dtype), b.shape)]).call
        operator, outputs, params = call.operator, call.outputs, call.parameters
        a_dev, b_dev = cupy.asarray(a), cupy.asarray(b)
        ours = backend.execute_shaped_device(operator, [a_dev, b_dev, None], outputs, params)[0]
        if a.ndim == 2 and n <= 2048:  # the CPU check is seconds at larger sizes
            want = dmlcli.run("gemm", a, b)
            rule = rule_for(operator, want.dtype, call=call)
            assert ulp_distance(cupy.asnumpy(ours), want).max() <= rule.limit, name
        run = lambda: backend.execute_shaped_device(operator, [a_dev, b_dev, None], outputs, params)  # noqa: E731
        dmlcli_ms = gpu_median_seconds(cupy, run, args.repeats) * 1e3
        cupy_ms = gpu_median_seconds(cupy, lambda: cupy.matmul(a_dev, b_dev), args.repeats) * 1e3
        flops = 2 * np.prod(a_shape[:-1], dtype=np.float64) * a_shape[-1] * b_shape[-1]
        tf32 = ""
        if dtype == np.float32:
            tf32_ms = tf32_median(cupy, backend, call, [a, b], [a_dev, b_dev, None], args.repeats, check=n <= 2048)
            tf32 = f" {tf32_ms:10.3f} {dmlcli_ms / tf32_ms:8.2f}"
        print(f"{name:20} {dmlcli_ms:10.3f} {cupy_ms:10.3f} {dmlcli_ms / cupy_ms:7.2f} "
              f"{flops / dmlcli_ms / 1e9:8.1f}{tf32}")
    return 0


def tf32_median(cupy, backend, call, host, device, repeats: int, *, check: bool) -> float:
    """The kernel's median with TF32 allowed, its result first checked against the CPU's within the TF32 rule."""
    operator, outputs, params = call.operator, call.outputs, call.parameters
    run = lambda: backend.execute_shaped_device(operator, device, outputs, params, allow_tf32=True)  # noqa: E731
    if check:
        want = dmlcli.run("gemm", *host)
        rule = rule_for(operator, want.dtype, call=replace(call, allow_tf32=True))
        got = cupy.asnumpy(run()[0])
        assert ((ulp_distance(got, want) <= rule.limit)
                | (np.abs(got.astype(np.float64) - want) <= rule.floor)).all(), "TF32 result out of its rule"
    return gpu_median_seconds(cupy, run, repeats) * 1e3


if __name__ == "__main__":
    sys.exit(main())
