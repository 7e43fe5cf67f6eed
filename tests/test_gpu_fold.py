"""FOLD and UNFOLD on the GPU: the same xp kernel on CuPy as on NumPy.

UNFOLD copies elements (bit for bit, NaN payloads included); FOLD's integer sums are the CPU's bits and its float
sums, the same FLOAT32 additions in the same order, agree within the operator's tolerance (CuPy's own additions
may flush subnormals). They need CuPy and a CUDA device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dmlcli import api
from dmlcli.checking.comparison import compare_arrays, rule_for
from dmlcli.errors import BackendUnavailableError

cupy = pytest.importorskip("cupy")


@pytest.fixture(scope="module", autouse=True)
def gpu_usable():
    from dmlcli.backends import gpu

    try:
        gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


GEOMETRIES = [  # spatial Sizes, then WindowSizes, Strides, Dilations, StartPadding, EndPadding
    ((17, 23), dict(window_sizes=[3, 3], strides=[1, 1], dilations=[1, 1], start_padding=[1, 1], end_padding=[1, 1])),
    ((16, 16), dict(window_sizes=[2, 2], strides=[2, 2], dilations=[1, 1], start_padding=[0, 0], end_padding=[0, 0])),
    ((9, 10, 11), dict(window_sizes=[2, 3, 2], strides=[1, 2, 3], dilations=[2, 1, 1], start_padding=[0, 1, 2],
                       end_padding=[1, 0, 2])),
    ((40,), dict(window_sizes=[5], strides=[3], dilations=[2], start_padding=[2], end_padding=[0])),
]


def _columns(spatial, params, channels, dtype, seed):
    cpu_columns = api.run("unfold", np.ones((2, channels) + spatial, np.float32), **params)
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(cpu_columns.shape).astype(dtype)
    return rng.integers(-1000, 1000, cpu_columns.shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint64"])
@pytest.mark.parametrize("spatial, params", GEOMETRIES)
def test_unfold_same_bits(dtype, spatial, params):
    rng = np.random.default_rng(1)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal((2, 3) + spatial).astype(np.float32)
        x.reshape(-1)[::7] = np.uint32(0x7FC00123).view(np.float32)  # a NaN payload to keep (FLOAT16: a NaN)
        x = x.astype(dtype)
    else:
        x = rng.integers(0, 100, (2, 3) + spatial).astype(dtype)
    cpu_result = api.run("unfold", x, backend="cpu", **params)
    gpu_result = api.run("unfold", x, backend="gpu", **params)
    assert cpu_result.dtype == gpu_result.dtype
    assert np.array_equal(cpu_result.view(np.uint8), gpu_result.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint64"])
@pytest.mark.parametrize("spatial, params", GEOMETRIES)
def test_fold(dtype, spatial, params):
    columns = _columns(spatial, params, 3, dtype, 2)
    options = dict(output_shape=(2, 3) + spatial, **params)
    cpu_result = api.run("fold", columns, backend="cpu", **options)
    gpu_result = api.run("fold", columns, backend="gpu", **options)
    if np.dtype(dtype).kind != "f":
        assert np.array_equal(cpu_result, gpu_result)
        return
    call = api.validate("fold", columns, **options).call
    rule = rule_for(call.operator, cpu_result.dtype, call=call, inputs=[columns])
    assert rule.limit == math.prod(params["window_sizes"]) and rule.bound is not None
    comparison = compare_arrays(gpu_result, cpu_result, rule)  # the ULP figure, the floor or the sum bound
    assert comparison.passed, comparison.text()
