"""CAST and the generators on the GPU: the same bits as the CPU, for every type pair and the special values
(RANDOM_GENERATOR: the same Philox bits and state).

CuPy's own astype and float32 arithmetic would not give them (flush-to-zero of FLOAT32 subnormals, C casts of
out-of-range floats and NaN to integers, NaN payloads), so CAST and FILL_VALUE_SEQUENCE have CUDA kernels of
their own: these tests are what tells whether they agree with NumPy. They need CuPy and a CUDA device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dmlcli import api, engine
from dmlcli.errors import BackendUnavailableError

from test_ops_generation import ALL, T10, as_bits, bits_of_float, from_bits, special_values

cupy = pytest.importorskip("cupy")


@pytest.fixture(scope="module", autouse=True)
def gpu_usable():
    from dmlcli.backends import gpu

    try:
        gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


def both(op, *arrays, **options):
    """The CPU's and the GPU's result of one call."""
    return api.run(op, *arrays, backend="cpu", **options), api.run(op, *arrays, backend="gpu", **options)


def assert_same_bits(cpu_result, gpu_result, context=""):
    assert cpu_result.dtype == gpu_result.dtype and cpu_result.shape == gpu_result.shape
    cpu_bits, gpu_bits = as_bits(cpu_result), as_bits(gpu_result)
    wrong = [(i, hex(c), hex(g)) for i, (c, g) in enumerate(zip(cpu_bits, gpu_bits)) if c != g]
    assert not wrong, f"{context}: (element, CPU, GPU) {wrong[:8]} of {len(wrong)}"


def random_bits(dtype: str, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    width = np.dtype(dtype).itemsize * 8
    return rng.integers(0, 2**width, size=count, dtype=np.uint64).astype(f"uint{width}").view(dtype)


@pytest.mark.parametrize("source", ALL)
def test_cast_every_pair_special_values_and_random_bits(source):
    x = np.concatenate([special_values(source), random_bits(source, 4096, seed=len(source))])
    for target in ALL:
        cpu_result, gpu_result = both("cast", x, output_dtype=target)
        assert_same_bits(cpu_result, gpu_result, f"CAST {source} -> {target}")


@pytest.mark.parametrize("rank", [1, 3, 8])
@pytest.mark.parametrize("source,target", [("float32", "int8"), ("float64", "float16"), ("int64", "float32"),
                                           ("float16", "uint64"), ("uint32", "int16")])
def test_cast_ranks_and_large_tensors(source, target, rank):
    shape = (3,) * (rank - 1) + (70001 // 3 ** (rank - 1) + 1,)
    x = random_bits(source, math.prod(shape), seed=rank).reshape(shape)
    if source.startswith("float"):
        x = np.where(np.isnan(x), x, x / np.asarray(1e3, source))  # mostly inside the ranges, some NaN
    cpu_result, gpu_result = both("cast", x, output_dtype=target)
    assert_same_bits(cpu_result, gpu_result, f"CAST {source} -> {target} rank {rank}")


def test_cast_subnormals_survive_the_gpu():
    """CuPy compiles with flush-to-zero: a compiler-made conversion would make these 0."""
    x = from_bits([1, 0x80000001, 0x007FFFFF], "float32")
    cpu_result, gpu_result = both("cast", x, output_dtype="float64")
    assert_same_bits(cpu_result, gpu_result)
    assert gpu_result[0] == 2.0**-149
    y = np.array([2.0**-149, -(2.0**-140), 1e-310], np.float64)
    cpu_result, gpu_result = both("cast", y, output_dtype="float32")
    assert_same_bits(cpu_result, gpu_result)
    assert as_bits(gpu_result)[:2] == [1, 0x80000200]


def desc_union(bits: int, dtype: str):
    return {"UInt16": bits} if dtype == "float16" else {"Bytes": list(bits.to_bytes(8, "little"))}


@pytest.mark.parametrize("dtype", ALL)
def test_fill_value_constant(dtype):
    for bits in [0, 1, (1 << (np.dtype(dtype).itemsize * 8)) - 1, 0x7E01 if dtype == "float16" else 5]:
        results = []
        for backend in ("cpu", "gpu"):
            req = engine.request("fill_value_constant", output_shape=(3, 5, 7), output_dtype=dtype,
                                 desc_fields={"ValueDataType": dtype.upper(), "Value": desc_union(bits, dtype)})
            results.append(engine.run(req, [], backend=backend).output)
        assert_same_bits(*results, f"FILL_VALUE_CONSTANT {dtype} {bits:#x}")


@pytest.mark.parametrize("dtype", T10)
def test_fill_value_sequence(dtype):
    width = np.dtype(dtype).itemsize * 8
    rng = np.random.default_rng(width)
    pairs = [(0, 1), (10, (1 << width) - 2), (1 << (width - 1), 3)]
    pairs += [(int(a), int(b)) for a, b in rng.integers(0, 2**min(width, 62), size=(6, 2))]
    if dtype.startswith("float"):
        pairs += [(bits_of_float(1.0, dtype), bits_of_float(0.1, dtype)),  # two roundings, not one fused
                  (bits_of_float(-0.0, dtype), bits_of_float(2.0**-24, dtype)),  # subnormal steps (float32)
                  (bits_of_float(0.0, dtype), 1),  # the least subnormal step
                  (bits_of_float(1.0, dtype), bits_of_float(math.inf, dtype)),  # 0 * inf: NaN at index 0
                  (bits_of_float(math.nan, dtype), bits_of_float(1.0, dtype))]
    for start, delta in pairs:
        results = []
        for backend in ("cpu", "gpu"):
            req = engine.request("fill_value_sequence", output_shape=(3, 70001), output_dtype=dtype,
                                 desc_fields={"ValueDataType": dtype.upper(), "ValueStart": desc_union(start, dtype),
                                              "ValueDelta": desc_union(delta, dtype)})
            results.append(engine.run(req, [], backend=backend).output)
        assert_same_bits(*results, f"FILL_VALUE_SEQUENCE {dtype} start {start:#x} delta {delta:#x}")


def test_fill_value_sequence_indices_past_2_24():
    cpu_result, gpu_result = both("fill_value_sequence", output_shape=(2**24 + 1000,), value_start="0.5",
                                  value_delta="3")
    assert_same_bits(cpu_result, gpu_result, "FLOAT32 indices past 2^24")


@pytest.mark.parametrize("dtype", ALL)
def test_diagonal_matrix(dtype):
    for shape, offset, value in [((5, 7), 0, "1"), ((2, 3, 4, 5), -2, "10.6"), ((3, 9, 4), 3, "-1e10"),
                                 ((4, 4), 0, "nan"), ((1, 2, 6, 6), 9, "0.1")]:
        cpu_result, gpu_result = both("diagonal_matrix", output_shape=shape, output_dtype=dtype, offset=offset,
                                      value=value)
        assert_same_bits(cpu_result, gpu_result, f"DIAGONAL_MATRIX {dtype} {shape} {offset} {value}")


@pytest.mark.parametrize("dtype", ALL)
def test_diagonal_matrix1(dtype):
    for shape, begin, end in [((5, 7), 0, 1), ((2, 3, 4, 5), -2, 3), ((3, 9, 4), 3, -1), ((4, 4), 2, 2),
                              ((1, 2, 6, 6), -(2**31), 1)]:
        x = random_bits(dtype, math.prod(shape), seed=len(shape)).reshape(shape)
        cpu_result, gpu_result = both("diagonal_matrix1", x, value="7", diagonal_fill_begin=begin,
                                      diagonal_fill_end=end)
        assert_same_bits(cpu_result, gpu_result, f"DIAGONAL_MATRIX1 {dtype} {shape} {begin} {end}")
        cpu_result, gpu_result = both("diagonal_matrix1", output_shape=shape, output_dtype=dtype,
                                      diagonal_fill_begin=begin, diagonal_fill_end=end)
        assert_same_bits(cpu_result, gpu_result, f"DIAGONAL_MATRIX1 {dtype} {shape} no input")


@pytest.mark.parametrize("source,target", [("float32", "float16"), ("float64", "uint8"), ("uint8", "float64"),
                                           ("float16", "int32"), ("int64", "int64")])
def test_cast_vector_kernel_tails_and_unaligned_inputs(source, target):
    """CAST's kernel converts cast_vector() elements a thread from 16-byte loads: every count up to past a few
    vectors (the tail taken one element at a time) and an input that starts off a 16-byte boundary (the element
    kernel) give the CPU's bits."""
    from types import SimpleNamespace

    from dmlcli.data_types import from_numpy
    from dmlcli.operators.generation.entries import cast_gpu_kernel

    output = SimpleNamespace(data_type=from_numpy(np.dtype(target)))
    x = random_bits(source, 200, seed=7)
    on_device = cupy.asarray(x)
    for start, count in [(0, n) for n in range(1, 40)] + [(1, 150), (3, 101)]:
        cpu_result = api.run("cast", x[start:start + count], output_dtype=target, backend="cpu")
        (gpu_result,) = cast_gpu_kernel(cupy, [on_device[start:start + count]], [output], {})
        assert_same_bits(cpu_result, cupy.asnumpy(gpu_result), f"CAST {source} -> {target} [{start}:+{count}]")


# ---------------------------------------------------------------- RANDOM_GENERATOR: integer arithmetic only

PHILOX_STATES = [(0, 0, 0, 0, 0, 0), (0xFFFFFFF0, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xDEADBEEF, 1),
                 (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0)]


@pytest.mark.parametrize("state", PHILOX_STATES)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 1, 3, 7), (2, 3, 64, 129), (4, 8, 256, 257)])
def test_random_generator_gives_the_cpus_bits(state, shape):
    """The same xp kernel on CuPy (UINT64 products split into 32-bit words): the output and the advanced state."""
    words = np.array(state, np.uint32).reshape(1, 1, 1, 6)
    (cpu_bits, cpu_state), (gpu_bits, gpu_state) = both("random_generator", words, output_shape=shape)
    assert gpu_bits.dtype == np.uint32 and gpu_bits.shape == shape
    assert np.array_equal(cpu_bits, gpu_bits) and np.array_equal(cpu_state, gpu_state)
