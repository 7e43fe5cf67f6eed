"""The arguments numerics/products.py hands cublasGemmStridedBatchedEx, without a GPU: a recording library and NumPy
arrays dressed as CuPy's stand in. The GPU tests (test_gpu_products.py, test_gpu_matmul.py) check the results."""

from __future__ import annotations

import types

import numpy as np
import pytest

from dmlcli.operators.numerics import products


class DeviceArray(np.ndarray):
    """A NumPy array with CuPy's `data.ptr`."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])


def fake_cupy():
    stream = types.SimpleNamespace(ptr=7)
    cuda = types.SimpleNamespace(device=types.SimpleNamespace(get_cublas_handle=lambda: 99),
                                 get_current_stream=lambda: stream)
    return types.SimpleNamespace(cuda=cuda, empty=lambda shape, dtype: np.empty(shape, dtype).view(DeviceArray),
                                 ascontiguousarray=lambda x: np.ascontiguousarray(x).view(DeviceArray))


def recording_library():
    calls = []
    library = products._Cublas.__new__(products._Cublas)
    library.gemm = lambda *arguments: calls.append(arguments) or 0
    library.set_stream = library.set_pointer_mode = lambda *arguments: 0
    return library, calls


@pytest.mark.parametrize("dtype, out_dtype, types_given", [
    (np.float16, None, (2, 2, 2)),  # CUDA_R_16F in, out
    (np.float16, np.float32, (2, 2, 0)),  # FLOAT16 operands, their FLOAT32 sums out
    (np.float32, None, (0, 0, 0)),
])
def test_the_operand_and_output_types_cublas_is_given(dtype, out_dtype, types_given):
    library, calls = recording_library()
    a = np.ones((3, 4, 5), dtype).view(DeviceArray)
    b = np.ones((5, 6), dtype).view(DeviceArray)
    out = library.matmul(fake_cupy(), a, b, out_dtype)
    assert out.shape == (3, 4, 6) and out.dtype == np.dtype(out_dtype or dtype)
    (arguments,) = calls
    # (handle, opB, opA, n, m, k, alpha, B, Btype, ldb, strideB, A, Atype, lda, strideA, beta, C, Ctype, ldc, strideC,
    #  count, compute, algorithm): B's type, A's, C's; FP32 compute; one strided call for the batch of 3.
    assert (arguments[8], arguments[12], arguments[17]) == types_given
    assert arguments[3:6] == (6, 4, 5) and arguments[20] == 3 and arguments[21] == 68
