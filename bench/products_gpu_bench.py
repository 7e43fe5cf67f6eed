"""GPU benchmark (a script, not a test): the kernels' matrix products (operators/numerics/products.py: cuBLAS's
cublasGemmStridedBatchedEx through ctypes on CuPy's handle) against cupy.matmul and PyTorch's matmul on the same
square FLOAT16 and FLOAT32 matrices of --size, inputs on the device, TF32 off. Times are CUDA-event medians of
--repeats calls after two warm-up calls (gpu_bench.gpu_median_seconds): the kernels alone, without dmlcli's
per-call work (bench/torch_gpu_bench.py times GEMM through the backend's call). Issue 33 item 4's question: is
the product itself at PyTorch's speed?

    PYTHONPATH=. python3 bench/products_gpu_bench.py [--size 4096] [--repeats 20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_bench import gpu_median_seconds, torch_and_gpu  # noqa: E402 - the GPU benches' own helpers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    found = torch_and_gpu()
    if found is None:
        return 0
    cp, torch, backend = found
    from dmlcli.operators.numerics import products

    if products._library(cp) is None:
        print("skipped: no cuBLAS library found in this process (products.py falls back to cupy.matmul)")
        return 0
    print(f"GPU: {backend.device_name}; CuPy {cp.__version__}; PyTorch {torch.__version__}; M = N = K = {args.size}; "
          f"CUDA-event medians of {args.repeats} calls")
    print(f"{'type':8} {'products ms':>12} {'cupy.matmul ms':>15} {'torch ms':>9} {'torch / products':>17}")
    rng = np.random.default_rng(0)
    for dtype in (np.float16, np.float32):
        a = cp.asarray(rng.standard_normal((args.size, args.size)).astype(dtype))
        b = cp.asarray(rng.standard_normal((args.size, args.size)).astype(dtype))
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        ours = gpu_median_seconds(cp, lambda: products.matmul(cp, a, b), args.repeats) * 1e3
        cupy_ms = gpu_median_seconds(cp, lambda: cp.matmul(a, b), args.repeats) * 1e3
        torch_ms = gpu_median_seconds(cp, lambda: torch.matmul(ta, tb), args.repeats) * 1e3
        print(f"{np.dtype(dtype).name:8} {ours:12.4f} {cupy_ms:15.4f} {torch_ms:9.4f} {torch_ms / ours:17.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
