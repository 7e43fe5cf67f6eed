"""TF32 products, allowed around any backend (`--allow-tf32`, `allow_tf32=True`, DxDispatch's executionFlags
DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION).

DirectML's flag *allows* a device to compute FLOAT32 work at lower precision; it never requires it. The
wrapper here carries the permission to the backend and no further: a backend that can use it says so with
`takes_allow_tf32 = True` and gets `allow_tf32=True` with each shaped operator's call (the GPU backend, which then
runs the kernel of an operator with `tf32_products` and a FLOAT32 output with TF32 tensor cores allowed, and
restores cuBLAS's mode after it). Any other backend (the CPU's: NumPy has no TF32; a caller's own) runs as it
does without the flag, which gives the full-precision result that the flag allows too. The kernels in the
operator table never change: the permission acts around them.
"""

from __future__ import annotations


class Tf32Allowed:
    """`inner` with TF32 products allowed: its shaped calls get allow_tf32=True where it takes that keyword."""

    def __init__(self, inner):
        self.inner = inner
        self.name = getattr(inner, "name", "custom")
        self.preferred_chunk_bytes = getattr(inner, "preferred_chunk_bytes", 1 << 20)

    def execute_shaped(self, operator, inputs, outputs, parameters):
        if getattr(self.inner, "takes_allow_tf32", False):
            return self.inner.execute_shaped(operator, inputs, outputs, parameters, allow_tf32=True)
        return self.inner.execute_shaped(operator, inputs, outputs, parameters)

    def describe(self) -> dict:
        return dict(self.inner.describe(), allow_tf32=True)

    def __getattr__(self, name: str):
        # Everything else (execute, execute_chunks, run_resident, pinned_empty, ...) is the backend's own:
        # element-wise operators have no products, and the wrapper must not hide what callers look for.
        if name == "inner":  # not set yet (a copy being built): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)


def with_tf32(backend, allowed: bool):
    return Tf32Allowed(backend) if allowed else backend
