"""A compiled kernel launched through the CUDA driver's cuLaunchKernel, its arguments kept in ctypes storage between
calls: CuPy's RawKernel call converts and checks each argument on every launch (9 to 11 us of host time for a dozen
arguments on the H200 machines, 20 and more on a slower one), where a kernel queued on every call of an operator
changes a few values. For a caller whose host time per call bounds back-to-back calls (attention/causal_masks.py)."""

from __future__ import annotations

import ctypes
from typing import Sequence

# An argument's kind -> its C type (the kernel's parameter must be of that size: pointers as u64).
KINDS = {"u64": ctypes.c_uint64, "i32": ctypes.c_int32, "f32": ctypes.c_float}
_LAUNCH: list = []


def _cu_launch_kernel():
    """The driver's cuLaunchKernel, loaded once (the driver library CuPy itself runs on)."""
    if not _LAUNCH:
        launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        launch.restype = ctypes.c_int
        launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        _LAUNCH.append(launch)
    return _LAUNCH[0]


class DriverLaunch:
    """One kernel's launch with arguments of the given kinds, in that order."""

    def __init__(self, function: int, kinds: Sequence[str]) -> None:
        self.function = function
        self.values = [KINDS[kind]() for kind in kinds]
        self.pointers = (ctypes.c_void_p * len(kinds))(*[ctypes.addressof(value) for value in self.values])
        self.launch = _cu_launch_kernel()

    @classmethod
    def of(cls, kernel, kinds: Sequence[str]) -> "DriverLaunch | None":
        """For a CuPy RawKernel, compiled for the current device; None where this CuPy or system gives no handle
        to its function (the caller then calls the RawKernel itself)."""
        try:
            return cls(int(kernel.kernel.ptr), kinds)
        except (AttributeError, OSError, TypeError):
            return None

    def __call__(self, grid: int, block: int, stream: int, arguments: Sequence) -> None:
        """Queue the kernel on `stream` (a CUDA stream handle, as CuPy's Stream.ptr) with `arguments`."""
        for value, argument in zip(self.values, arguments):
            value.value = argument
        status = self.launch(self.function, grid, 1, 1, block, 1, 1, 0, stream, self.pointers, None)
        if status != 0:
            raise RuntimeError(f"cuLaunchKernel gave CUresult {status}")
