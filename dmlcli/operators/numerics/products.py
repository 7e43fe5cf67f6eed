"""The kernels' matrix products (numpy.matmul's meaning: the last two axes multiplied, the stacks before them
broadcast): NumPy's on the CPU; on the GPU cuBLAS's cublasGemmStridedBatchedEx, called here through ctypes on
CuPy's own handle for the device and thread (so TF32 permission, set on that handle's math mode by the backend,
reaches it), in the current stream, with CUBLAS_GEMM_DEFAULT and the compute type cupy.matmul uses (32F for
FLOAT16 and FLOAT32, 64F for FLOAT64).

Why not cupy.matmul: CuPy refuses every cuBLAS call while a stream is captured into a CUDA graph (its
cublas.setStream raises NotImplementedError), and a model's GPU run is replayed as a CUDA graph
(onnx_model/graphs.py). One call, eager or captured, gives one result, so a replay has the eager run's bits.
cupy.matmul still runs where this path does not apply: no cuBLAS library found in the process, other data types
(the integer products have CuPy's own kernels), 1-D operands, sizes past cuBLAS's 32-bit arguments, ROCm.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import math
import threading
from typing import Iterator

import numpy as np

OP_N, OP_T = 0, 1
GEMM_DEFAULT = -1
POINTER_MODE_HOST = 0
# data type -> (cudaDataType, cublasComputeType_t, the scalars' C type): CUDA_R_32F 0, CUDA_R_64F 1, CUDA_R_16F 2;
# CUBLAS_COMPUTE_32F 68, CUBLAS_COMPUTE_64F 70.
CUDA_TYPES = {np.dtype(np.float32): (0, 68, ctypes.c_float), np.dtype(np.float64): (1, 70, ctypes.c_double),
              np.dtype(np.float16): (2, 68, ctypes.c_float)}
INT_MAX = 2**31 - 1

# Whether the running kernel's FLOAT32 products may use TF32 (--allow-tf32): cuBLAS learns it from its handle's math
# mode, which the GPU backend sets; a library with no such mode (cuDNN, operators/numerics/cudnn_graphs.py) reads it
# here. Set only around a kernel whose operator has tf32_products and a FLOAT32 output (backends/gpu.py).
_TF32_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar("dmlcli_tf32_allowed", default=False)


def tf32_allowed() -> bool:
    """True inside `allowing_tf32()`: the kernel's FLOAT32 products may run on TF32 tensor cores."""
    return _TF32_ALLOWED.get()


@contextlib.contextmanager
def allowing_tf32() -> Iterator[None]:
    token = _TF32_ALLOWED.set(True)
    try:
        yield
    finally:
        _TF32_ALLOWED.reset(token)


def matmul(xp, a, b, out_dtype=None):
    """a @ b as numpy.matmul gives it, on NumPy or CuPy arrays. `out_dtype` float32 with FLOAT16 operands gives the
    FLOAT32 sums unrounded (cuBLAS writes its FLOAT32 accumulators; elsewhere the operands are widened first, exactly),
    for a caller that adds to them before its one rounding."""
    sums = out_dtype is not None and np.dtype(out_dtype) != a.dtype  # FLOAT16 operands' FLOAT32 sums
    if sums and not (np.dtype(out_dtype) == np.float32 and a.dtype == b.dtype == np.float16):
        raise ValueError(f"a {a.dtype} product gives {a.dtype} or, from FLOAT16, float32; not {out_dtype}")
    # NumPy, and an array namespace other than CuPy's, have no cuBLAS of ours
    library = None if xp is np or getattr(xp, "cuda", None) is None else _library(xp)
    if library is None or not library.takes(a, b):
        return xp.matmul(a.astype(np.float32), b.astype(np.float32)) if sums else xp.matmul(a, b)
    return library.matmul(xp, a, b, np.dtype(np.float32) if sums else None)


def accumulate(cupy, a, b, alpha: float, beta: float, out) -> bool:
    """out = alpha * (a @ b) + beta * out on cuBLAS (a, b and out of one type), in its compute type (FP32 for FLOAT16
    operands) and rounded once to out's type: a GEMM's Alpha and Beta * C in cuBLAS's own epilogue, out holding C
    beforehand. cuBLAS's rules hold: with beta 0 out is not read (0 * inf gives no NaN), nor a and b with alpha 0.
    False, out untouched, where cuBLAS does not take the call (then the caller computes it otherwise)."""
    library = _library(cupy)
    if library is None or not library.takes(a, b) or out.dtype != a.dtype or not out.flags.c_contiguous:
        return False
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    if out.shape != batch + (a.shape[-2], b.shape[-1]) or out.size == 0 or a.shape[-1] == 0:
        return False
    library.matmul(cupy, a, b, out=out, scalars=(alpha, beta))
    return True


def describe(cupy) -> str:
    """Which path the GPU's products take, for `dmlcli info`."""
    if _library(cupy) is None:
        return "CuPy's matmul (no cuBLAS library found in the process)"
    return "cuBLAS through ctypes (cublasGemmStridedBatchedEx, capturable in a CUDA graph)"


class _Cublas:
    """cuBLAS's entry points this module calls, from the library CuPy loaded."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.gemm = library.cublasGemmStridedBatchedEx
        self.gemm.restype = ctypes.c_int
        self.gemm.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                              ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                              ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                              ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.set_stream = library.cublasSetStream_v2
        self.set_stream.restype = ctypes.c_int
        self.set_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.set_pointer_mode = library.cublasSetPointerMode_v2
        self.set_pointer_mode.restype = ctypes.c_int
        self.set_pointer_mode.argtypes = [ctypes.c_void_p, ctypes.c_int]

    @staticmethod
    def takes(a, b) -> bool:
        return (a.dtype == b.dtype and a.dtype in CUDA_TYPES and a.ndim >= 2 and b.ndim >= 2
                and a.shape[-1] == b.shape[-2] and max(a.shape[-2:] + b.shape[-1:]) <= INT_MAX)

    def matmul(self, cupy, a, b, out_dtype=None, out=None, scalars: tuple[float, float] = (1.0, 0.0)):
        """a @ b into a new array (of `out_dtype`, else the operands' type), or `scalars` (alpha, beta): alpha *
        (a @ b) + beta * out into the given C-ordered `out`."""
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        if out is None:
            out = cupy.empty(batch + (a.shape[-2], b.shape[-1]), dtype=a.dtype if out_dtype is None else out_dtype)
        if out.size == 0:
            return out
        if a.shape[-1] == 0:
            out.fill(0)
            return out
        rank = len(batch)
        a = a.reshape((1,) * (rank - a.ndim + 2) + a.shape)
        b = b.reshape((1,) * (rank - b.ndim + 2) + b.shape)
        handle = cupy.cuda.device.get_cublas_handle()
        self._check(self.set_stream(handle, cupy.cuda.get_current_stream().ptr), "cublasSetStream")
        self._check(self.set_pointer_mode(handle, POINTER_MODE_HOST), "cublasSetPointerMode")
        self._products(cupy, handle, a, b, out, scalars)
        return out

    def _products(self, cupy, handle, a, b, out, scalars: tuple[float, float]) -> None:
        """out = alpha * (a @ b) + beta * out, the three of one batch rank: one strided batched call where each
        operand's stack is one stride (or a single matrix), else one per item of the first stack axis."""
        batch = out.shape[:-2]
        a_stride, b_stride = _stack_stride(a, batch), _stack_stride(b, batch)
        count = math.prod(batch)
        if a_stride is None or b_stride is None or count > INT_MAX:
            for item in range(batch[0]):
                self._products(cupy, handle, a[item if a.shape[0] > 1 else 0], b[item if b.shape[0] > 1 else 0],
                               out[item], scalars)
            return
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        data_type, compute, scalar = CUDA_TYPES[a.dtype]
        a, a_stride = _matrix_layout(cupy, a, a_stride)
        b, b_stride = _matrix_layout(cupy, b, b_stride)
        out_type = CUDA_TYPES[out.dtype][0]  # the operands' type, or FLOAT32 sums of FLOAT16 operands
        alpha, beta = (scalar(value) for value in scalars)
        # Row-major C = A B is column-major C^T = B^T A^T: B's rows, then A's.
        status = self.gemm(handle, b.op, a.op, n, m, k, ctypes.byref(alpha), b.pointer, data_type, b.lead, b_stride,
                           a.pointer, data_type, a.lead, a_stride, ctypes.byref(beta), out.data.ptr, out_type, n,
                           m * n, count, compute, GEMM_DEFAULT)
        self._check(status, "cublasGemmStridedBatchedEx")

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed with cuBLAS status {status}")


class _Matrices:
    """A stack of matrices as cuBLAS reads them: the first's address, its operation and leading dimension."""

    def __init__(self, pointer: int, op: int, lead: int, copy=None) -> None:
        self.pointer, self.op, self.lead = pointer, op, lead
        self.copy = copy  # a C-ordered copy that holds the matrices, alive until the call is queued


def _stack_stride(x, batch: tuple[int, ...]) -> int | None:
    """The element stride from one matrix of x's stack to the next where x's stack is `batch` flattened with one
    stride (0 where x is a single matrix broadcast), else None."""
    stack = x.shape[:-2]
    if all(size == 1 for size in stack):
        return 0
    if stack != batch:
        return None
    stride = None
    step = x.itemsize
    for size, byte_stride in zip(reversed(stack), reversed(x.strides[:-2])):
        if size == 1:
            continue
        if stride is None:
            stride, step = byte_stride, byte_stride * size
        elif byte_stride != step:
            return None
        else:
            step = byte_stride * size
    if stride is None or stride % x.itemsize:
        return None
    return stride // x.itemsize


def _matrix_layout(cupy, x, stack_stride: int) -> tuple[_Matrices, int]:
    """x's matrices as cuBLAS's column-major operand of the transposed product, copying x in C order where its
    last two axes are neither rows nor columns of one stride."""
    rows, columns = x.shape[-2:]
    row_step, column_step = (s // x.itemsize if s % x.itemsize == 0 else -1 for s in x.strides[-2:])
    first = x[(0,) * (x.ndim - 2)]
    if column_step == 1 and (rows == 1 or row_step >= columns) and row_step <= INT_MAX:
        return _Matrices(first.data.ptr, OP_N, max(row_step if rows > 1 else columns, 1)), stack_stride
    if row_step == 1 and (columns == 1 or column_step >= rows) and column_step <= INT_MAX:
        return _Matrices(first.data.ptr, OP_T, max(column_step if columns > 1 else rows, 1)), stack_stride
    copied = cupy.ascontiguousarray(x)
    stride = 0 if stack_stride == 0 else rows * columns
    return _Matrices(copied[(0,) * (x.ndim - 2)].data.ptr, OP_N, max(columns, 1), copied), stride


_LOADED: dict[str, _Cublas | None] = {}
_LOADING = threading.Lock()


def _library(cupy) -> _Cublas | None:
    """cuBLAS as CuPy loaded it (the shared library mapped into this process once CuPy made its handle), or None
    where none is found (or on ROCm, whose BLAS is another library)."""
    found = _LOADED.get("cublas", False)
    if found is not False:
        return found
    with _LOADING:
        if "cublas" not in _LOADED:
            _LOADED["cublas"] = _load(cupy)
    return _LOADED["cublas"]


def _load(cupy) -> _Cublas | None:
    if getattr(cupy.cuda.runtime, "is_hip", False):
        return None
    cupy.cuda.device.get_cublas_handle()  # CuPy loads its cuBLAS
    path = _mapped_library("libcublas.so")
    if path is None:
        return None
    try:
        return _Cublas(ctypes.CDLL(path))
    except (OSError, AttributeError):
        return None


def _mapped_library(prefix: str) -> str | None:
    """The path of the shared library named prefix* (not cuBLASLt) mapped into this process (Linux's
    /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if path.rsplit("/", 1)[-1].startswith(prefix):
                    return path
    except OSError:
        return None
    return None
