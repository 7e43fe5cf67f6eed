"""The kernels' matrix products on the GPU (operators/numerics/products.py: cuBLAS's strided batched GEMM through
ctypes on CuPy's handle): numpy.matmul's meaning for every layout a kernel hands it (stacks broadcast either
way, transposed and sliced views, empty and K = 0 products, FLOAT16/32/64), each element within the sum bound
2 K u sum|a||b| of the float64 product, and a stream capture (which CuPy's own matmul refuses) replaying the eager
call's bits. Skipped without CuPy or a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.usefixtures("gpu_usable")

from dmlcli.operators.numerics import products  # noqa: E402

UNIT = {np.float16: 2.0**-11, np.float32: 2.0**-24, np.float64: 2.0**-53}


def _within_bound(got, a, b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = np.matmul(a64, b64)
    sizes = np.matmul(np.abs(a64), np.abs(b64))
    k = a.shape[-1]
    u = max(UNIT[a.dtype.type], 2.0**-24)  # FLOAT16 accumulates in FLOAT32, then rounds once to FLOAT16
    rounding = UNIT[got.dtype.type] * np.abs(exact)
    assert got.shape == exact.shape and got.dtype == a.dtype
    assert np.all(np.abs(got.astype(np.float64) - exact) <= 2 * (k + 1) * u * sizes + rounding + 1e-300)


def _layouts(rng, dtype):
    """(a, b) pairs as host arrays, and how to view each on the device."""
    def values(*shape):
        return rng.standard_normal(shape).astype(dtype)
    yield values(5, 7), values(7, 3), None
    yield values(4, 5, 7), values(7, 3), None                      # A's stack, B one matrix
    yield values(5, 7), values(6, 7, 3), None                      # B's stack
    yield values(2, 1, 5, 7), values(1, 3, 7, 4), None             # both broadcast: a loop over the first axis
    yield values(3, 1, 5, 7), values(3, 4, 7, 2), None             # a partly broadcast stack
    yield values(7, 5), values(3, 7), "transposed"                 # views with swapped last axes
    yield values(2, 9, 12), values(2, 12, 10), "sliced"            # strided rows and columns
    yield values(0, 4), values(4, 3), None                         # no rows
    yield values(3, 0), values(0, 5), None                         # K = 0: zeros
    yield values(1, 1, 6), values(6, 1), None                      # single row and column


def _device(host, how):
    array = cupy.asarray(host)
    if how == "transposed":
        return cupy.swapaxes(array, -1, -2)
    if how == "sliced":
        return array[..., ::2, 1::2]
    return array


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_every_layout_gives_numpys_product(dtype):
    rng = np.random.default_rng(11)
    for a_host, b_host, how in _layouts(rng, dtype):
        a, b = _device(a_host, how), _device(b_host, how)
        got = products.matmul(cupy, a, b)
        _within_bound(cupy.asnumpy(got), cupy.asnumpy(a), cupy.asnumpy(b))


def test_the_product_runs_on_cublas_not_cupys_matmul():
    assert products._library(cupy) is not None


def test_a_captured_product_replays_the_eager_bits():
    rng = np.random.default_rng(2)
    a = cupy.asarray(rng.standard_normal((8, 64, 96)).astype(np.float32))
    b = cupy.asarray(rng.standard_normal((96, 48)).astype(np.float32))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        eager = cupy.asnumpy(products.matmul(cupy, a, b))
        stream.begin_capture()
        out = products.matmul(cupy, a, b)
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        assert np.array_equal(cupy.asnumpy(out), eager)
        a[...] = 0
        graph.launch(stream)
        stream.synchronize()
        assert not cupy.asnumpy(out).any()


def test_integer_and_one_dimensional_products_keep_cupys_matmul():
    a = cupy.arange(6, dtype=cupy.int32).reshape(2, 3)
    b = cupy.arange(12, dtype=cupy.int32).reshape(3, 4)
    assert np.array_equal(cupy.asnumpy(products.matmul(cupy, a, b)), np.arange(6).reshape(2, 3) @ np.arange(12).reshape(3, 4))
    v = cupy.arange(3, dtype=cupy.float32)
    assert float(products.matmul(cupy, v, v)) == 5.0
