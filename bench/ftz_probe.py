"""Does NVRTC through CuPy keep float32 subnormals with COMPILE_OPTIONS? (prints what it finds).

    PYTHONPATH=. python3 bench/ftz_probe.py [--elements 1048576]

Without CuPy (or a GPU) it says so and exits 0: there is nothing to probe.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmlcli.backends.gpu_kernels import COMPILE_OPTIONS  # noqa: E402

SOURCE = r'''
extern "C" __global__ void add(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
extern "C" __global__ void mul(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * b[i];
}
extern "C" __global__ void divide(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] / b[i];
}
extern "C" __global__ void root(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = sqrtf(a[i]);
}
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=1 << 20)
    args = parser.parse_args(argv)
    from dmlcli.backends import gpu
    from dmlcli.errors import BackendUnavailableError

    try:
        gpu.create()
    except BackendUnavailableError as why:
        print(f"skipped: {why}")
        return 0
    import cupy as cp

    rng = np.random.default_rng(1)
    n = max(args.elements, 4)
    a = rng.standard_normal(n).astype(np.float32) * np.float32(1e-38)
    b = rng.standard_normal(n).astype(np.float32)
    a[:4] = np.float32(1e-45), np.float32(3e-39), np.float32(-1e-40), np.float32(1e-38)
    b[:4] = 0, 0, 0, 1
    for options in ((), COMPILE_OPTIONS):
        module = cp.RawModule(code=SOURCE, options=options)
        for name, ref in (("add", a + b), ("mul", a * b), ("divide", a / np.where(b == 0, 1, b)), ("root", np.sqrt(np.abs(a)))):
            bb = np.where(b == 0, 1, b).astype(np.float32) if name == "divide" else b
            aa = np.abs(a) if name == "root" else a
            out = cp.empty(n, cp.float32)
            module.get_function(name)(((n + 255) // 256,), (256,), (cp.asarray(aa), cp.asarray(bb), out, np.int32(n)))
            got = out.get()
            with np.errstate(all="ignore"):
                ref = {"add": aa + bb, "mul": aa * bb, "divide": aa / bb, "root": np.sqrt(aa)}[name]
            same = np.array_equal(got.view(np.uint32), ref.view(np.uint32))
            print(f"options={options or 'CuPy default'} {name}: bit-exact with NumPy: {same}; "
                  f"differing {int((got.view(np.uint32) != ref.view(np.uint32)).sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
