"""A compiled kernel launched through the CUDA driver's cuLaunchKernel, its arguments kept in ctypes storage between
calls: CuPy's RawKernel call converts and checks each argument on every launch (9 to 11 us of host time for a dozen
arguments on the H200 machines, 20 and more on a slower one), where a kernel queued on every call of an operator
changes a few values. For a caller whose host time per call bounds back-to-back calls (attention/causal_masks.py).

A launch may also be early (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, compute
capability 9.0 and up): the device then schedules the kernel's blocks as the stream's previous kernel's blocks end,
instead of after that kernel has completed, which hides the gap between two kernels (2 to 3 us on the H200). The
kernel must begin with `griddepcontrol.wait` (DEPENDENT_LAUNCH_WAIT), which holds each thread until the previous
kernel has completed and its writes are visible: the kernel then reads and writes nothing earlier than a plain
launch would, and the stream's order is kept."""

from __future__ import annotations

import ctypes
from typing import Sequence

# An argument's kind -> its C type (the kernel's parameter must be of that size: pointers as u64).
KINDS = {"u64": ctypes.c_uint64, "i32": ctypes.c_int32, "f32": ctypes.c_float}
_LAUNCH: list = []
_LAUNCH_EX: list = []  # cuLaunchKernelEx, or None where the driver has none

# The first statement of a kernel launched early: a no-op where the launch was plain or the device older than 9.0.
DEPENDENT_LAUNCH_WAIT = """
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
"""
EARLY_LAUNCH_CAPABILITY = 90  # the least compute capability (CuPy's "90" for 9.0) whose launches may be early
_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CUlaunchAttributeID


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: its id, padded to 8 bytes, then a 64-byte value (here the one int it holds)."""

    _fields_ = [("id", ctypes.c_int), ("padding", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig: the grid, the block, the dynamic shared memory, the stream and the attributes."""

    _fields_ = [("grid_x", ctypes.c_uint), ("grid_y", ctypes.c_uint), ("grid_z", ctypes.c_uint),
                ("block_x", ctypes.c_uint), ("block_y", ctypes.c_uint), ("block_z", ctypes.c_uint),
                ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attributes", ctypes.POINTER(_LaunchAttribute)), ("attribute_count", ctypes.c_uint)]


def _cu_launch_kernel():
    """The driver's cuLaunchKernel, loaded once (the driver library CuPy itself runs on)."""
    if not _LAUNCH:
        launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        launch.restype = ctypes.c_int
        launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        _LAUNCH.append(launch)
    return _LAUNCH[0]


def _cu_launch_kernel_ex():
    """The driver's cuLaunchKernelEx (CUDA 12.0 and up), loaded once; None where the driver has none."""
    if not _LAUNCH_EX:
        try:
            launch = getattr(ctypes.CDLL("libcuda.so.1"), "cuLaunchKernelEx", None)
        except OSError:  # no driver library: nothing is launched early
            launch = None
        if launch is not None:
            launch.restype = ctypes.c_int
            launch.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        _LAUNCH_EX.append(launch)
    return _LAUNCH_EX[0]


class DriverLaunch:
    """One kernel's launch with arguments of the given kinds, in that order."""

    def __init__(self, function: int, kinds: Sequence[str]) -> None:
        self.function = function
        self.values = [KINDS[kind]() for kind in kinds]
        self.pointers = (ctypes.c_void_p * len(kinds))(*[ctypes.addressof(value) for value in self.values])
        self.launch = _cu_launch_kernel()
        self.launch_ex = _cu_launch_kernel_ex()
        self.attribute = _LaunchAttribute(id=_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
        self.config = _LaunchConfig(block_y=1, block_z=1, grid_y=1, grid_z=1, shared_bytes=0,
                                    attributes=ctypes.pointer(self.attribute), attribute_count=1)

    @classmethod
    def of(cls, kernel, kinds: Sequence[str]) -> "DriverLaunch | None":
        """For a CuPy RawKernel, compiled for the current device; None where this CuPy or system gives no handle
        to its function (the caller then calls the RawKernel itself)."""
        try:
            return cls(int(kernel.kernel.ptr), kinds)
        except (AttributeError, OSError, TypeError):
            return None

    @property
    def can_launch_early(self) -> bool:
        return self.launch_ex is not None

    def __call__(self, grid: int, block: int, stream: int, arguments: Sequence, early: bool = False) -> None:
        """Queue the kernel on `stream` (a CUDA stream handle, as CuPy's Stream.ptr) with `arguments`; `early`: as
        a programmatic dependent launch (the module's text: the kernel begins with DEPENDENT_LAUNCH_WAIT, the device
        is of compute capability 9.0 or more, and no CUDA graph is being captured), where the driver has one."""
        for value, argument in zip(self.values, arguments):
            value.value = argument
        if early and self.launch_ex is not None:
            config = self.config
            config.grid_x, config.block_x, config.stream = grid, block, stream
            status, entry = self.launch_ex(ctypes.byref(config), self.function, self.pointers, None), "cuLaunchKernelEx"
        else:
            status, entry = self.launch(self.function, grid, 1, 1, block, 1, 1, 0, stream, self.pointers, None), \
                "cuLaunchKernel"
        if status != 0:
            raise RuntimeError(f"{entry} gave CUresult {status}")
