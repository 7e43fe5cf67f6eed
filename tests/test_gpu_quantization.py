"""QUANTIZE, DEQUANTIZE, DYNAMIC_QUANTIZE_LINEAR and QUANTIZED_LINEAR_AVERAGE_POOLING on the GPU: the CPU's bits.

Their float32 steps run in quantization/gpu.py's IEEE kernels (no flush to zero) and pooling's window kernel, so
every result is the CPU's bit for bit, subnormal scales and products included. 4-bit tensors live on the device as
int8/uint8 values and come back as ml_dtypes' int4/uint4 (backends/gpu.py). They need CuPy and a CUDA device.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from dmlcli import api
from dmlcli.errors import BackendUnavailableError

cupy = pytest.importorskip("cupy")


@pytest.fixture(scope="module", autouse=True)
def gpu_usable():
    from dmlcli.backends import gpu

    try:
        gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


def same_bits(cpu_result, gpu_result) -> bool:
    if cpu_result.dtype != gpu_result.dtype or cpu_result.shape != gpu_result.shape:
        return False
    return np.ascontiguousarray(cpu_result).tobytes() == np.ascontiguousarray(gpu_result).tobytes()


def both(op, *arrays, **options):
    cpu_results = api.run(op, *arrays, backend="cpu", **options)
    gpu_results = api.run(op, *arrays, backend="gpu", **options)
    if not isinstance(cpu_results, tuple):
        cpu_results, gpu_results = (cpu_results,), (gpu_results,)
    return cpu_results, gpu_results


TYPES = {"int8": np.int8, "uint8": np.uint8, "int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4}
LIMITS = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15)}
LAYOUTS = [((64, 96), (64, 1)), ((64, 96), (1, 96)), ((64, 96), (64, 3)), ((8, 16, 32), (1, 4, 32)),
           ((1000,), (1,))]


def inputs(shape, scale_shape, dtype, name, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 20).astype(dtype)
    x.reshape(-1)[::13] = np.finfo(dtype).smallest_subnormal * 3
    x.reshape(-1)[1::17] = np.asarray(0.5, dtype) * rng.integers(-9, 9)
    x.reshape(-1)[2::19] = np.nan
    scale = rng.uniform(0.1, 4.0, scale_shape).astype(dtype)
    scale.reshape(-1)[::5] = np.finfo(dtype).smallest_subnormal * 7  # subnormal scales: huge quotients
    lowest, highest = LIMITS[name]
    zero = rng.integers(lowest, highest + 1, scale_shape).astype(TYPES[name])
    return x, scale, zero


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape, scale_shape", LAYOUTS)
def test_quantize_gives_the_cpu_bits(name, dtype, shape, scale_shape):
    x, scale, zero = inputs(shape, scale_shape, dtype, name)
    for arrays in ([x, scale, zero], [x, scale]):
        cpu_results, gpu_results = both("quantize", *arrays, output_dtype=name)
        assert same_bits(cpu_results[0], gpu_results[0]), (name, dtype, shape, len(arrays))


@pytest.mark.parametrize("name", sorted(TYPES))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape, scale_shape", LAYOUTS)
def test_dequantize_gives_the_cpu_bits(name, dtype, shape, scale_shape):
    _, scale, zero = inputs(shape, scale_shape, dtype, name)
    lowest, highest = LIMITS[name]
    q = np.random.default_rng(1).integers(lowest, highest + 1, shape).astype(TYPES[name])
    for arrays in ([q, scale, zero], [q, scale]):
        cpu_results, gpu_results = both("dequantize", *arrays)
        assert same_bits(cpu_results[0], gpu_results[0]), (name, dtype, shape, len(arrays))


@pytest.mark.parametrize("name", ["uint8", "int8"])
@pytest.mark.parametrize("values", [
    np.random.default_rng(2).standard_normal((32, 33)).astype(np.float32) * 5,
    np.array([np.finfo(np.float32).smallest_subnormal * 5, -np.finfo(np.float32).smallest_subnormal * 9, 0.0],
             np.float32),
    np.array([np.nan, 3.0, -0.0, -2.5], np.float32),
    np.zeros((4, 4), np.float32),
    np.random.default_rng(3).standard_normal((7, 9)).astype(np.float16),
])
def test_dynamic_quantize_gives_the_cpu_bits(name, values):
    cpu_results, gpu_results = both("dynamic_quantize_linear", values, output_dtype=name)
    assert all(same_bits(c, g) for c, g in zip(cpu_results, gpu_results))


@pytest.mark.parametrize("include", [False, True])
@pytest.mark.parametrize("name, per_channel", [("uint8", False), ("int8", True)])
@pytest.mark.parametrize("shape, window, strides, start, dilations", [
    ((2, 3, 17, 19), [3, 3], [1, 1], [1, 1], [1, 1]),
    ((1, 4, 16, 16), [2, 2], [2, 2], [0, 0], [1, 1]),
    ((1, 2, 5, 6, 7), [2, 3, 2], [1, 2, 1], [1, 0, 1], [2, 1, 1]),
])
def test_quantized_average_pooling_gives_the_cpu_bits(include, name, per_channel, shape, window, strides, start,
                                                      dilations):
    rng = np.random.default_rng(4)
    lowest, highest = LIMITS[name]
    x = rng.integers(lowest, highest + 1, shape).astype(name)
    channel = (1, shape[1]) + (1,) * (len(shape) - 2) if per_channel else (1,)
    in_scale, out_scale = (rng.uniform(0.01, 0.3, channel).astype(np.float32) for _ in range(2))
    in_zero, out_zero = (rng.integers(lowest, highest + 1, channel).astype(name) for _ in range(2))
    options = dict(window_size=window, strides=strides, start_padding=start, end_padding=start, dilations=dilations,
                   include_padding=include, output_dtype=name)
    for arrays in ([x, in_scale, in_zero, out_scale, out_zero], [x, in_scale, None, out_scale, None]):
        cpu_results, gpu_results = both("quantized_linear_average_pooling", *arrays, **options)
        assert same_bits(cpu_results[0], gpu_results[0])


def test_4_bit_results_come_back_as_ml_dtypes():
    x = np.linspace(-20, 20, 64, dtype=np.float32).reshape(8, 8)
    scale = np.full((8, 2), 2.5, np.float32)
    result = api.run("quantize", x, scale, output_dtype="int4", backend="gpu")
    assert result.dtype == np.dtype(ml_dtypes.int4)
    assert api.run("dequantize", result, scale, backend="gpu").dtype == np.float32
