"""The indexing family on the GPU: every operator's CuPy result is bit-identical to the CPU's.

Skipped without CuPy or a usable device. The inputs include what the chosen rules cover: negative and
out-of-range indices, many duplicate scatter targets (CuPy's plain fancy assignment would pick an arbitrary
one), ties and NaN (with payloads) in TOP_K, -0.0 and NaN in NONZERO_COORDINATES.
"""

from __future__ import annotations

import numpy as np
import pytest

import dmlcli
from dmlcli.errors import BackendUnavailableError

cupy = pytest.importorskip("cupy")

DATA_DTYPES = ("float32", "float16", "float64", "int8", "uint16", "int32", "uint64")
INDEX_DTYPES = ("int32", "int64", "uint32", "uint64")
SHAPES = ((7,), (3, 5), (2, 3, 4), (2, 1, 3, 2, 2))


@pytest.fixture(scope="module", autouse=True)
def gpu_usable():
    from dmlcli.backends import gpu

    try:
        gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


def values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        pool = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, 3.0, 3.0, np.nan], dtype)
        out = rng.choice(pool, size=shape)
        if out.size > 1:  # a NaN with a payload, kept bit for bit
            width = np.dtype(f"uint{dtype.itemsize * 8}")
            out.reshape(-1).view(width)[0] = np.array(-1, np.int64).astype(width) >> 1  # all ones but the sign
        return out
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -5), min(info.max, 5), size=shape, endpoint=True).astype(dtype)


def indices(rng, shape, dtype, size):
    low = -size - 2 if np.dtype(dtype).kind == "i" else 0
    return rng.integers(low, size + 2, size=shape, endpoint=True).astype(dtype)


def assert_same_bits(cpu, gpu):
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    gpu = gpu if isinstance(gpu, tuple) else (gpu,)
    for c, g in zip(cpu, gpu):
        assert c.dtype == g.dtype and c.shape == g.shape
        width = np.dtype(f"uint{c.dtype.itemsize * 8}")
        assert np.array_equal(c.view(width), g.view(width)), (c, g)


def both(op, *arrays, **options):
    return (dmlcli.run(op, *arrays, backend="cpu", **options), dmlcli.run(op, *arrays, backend="gpu", **options))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DATA_DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_gathers(shape, dtype, index_dtype):
    rng = np.random.default_rng(len(shape) * 31 + len(dtype))
    x = values(rng, shape, dtype)
    axis = len(shape) - 1
    # GATHER: a row of indices in the last dimension (leading ones: IndexDimensions 1).
    idx = indices(rng, (1,) * (len(shape) - 1) + (5,), index_dtype, shape[axis])
    assert_same_bits(*both("gather", x, idx, axis=axis, index_dimensions=1))
    for other in range(len(shape) - 1):  # the one-kernel GATHER along every axis: outer and inner blocks
        idx = indices(rng, (1,) * (len(shape) - 1) + (4,), index_dtype, shape[other])
        assert_same_bits(*both("gather", x, idx, axis=other, index_dimensions=1))
    elements = indices(rng, shape[:-1] + (4,), index_dtype, shape[axis])
    assert_same_bits(*both("gather_elements", x, elements, axis=axis))
    tuples = indices(rng, (1,) * (len(shape) - 2) + (3, 1) if len(shape) > 1 else (1,), index_dtype, min(shape))
    if len(shape) > 1:
        assert_same_bits(*both("gather_nd", x, tuples))
        assert_same_bits(*both("gather_nd1", x, tuples))


@pytest.mark.parametrize("shape", SHAPES[2:], ids=str)
def test_gather_nd1_batches(shape):
    rng = np.random.default_rng(5)
    x = values(rng, shape, "int32")
    tuples = indices(rng, shape[:1] + (1,) * (len(shape) - 3) + (4, 1), "int64", min(shape))
    assert_same_bits(*both("gather_nd1", x, tuples, batch_dimension_count=1))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DATA_DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_scatters_with_duplicates(shape, dtype, index_dtype):
    rng = np.random.default_rng(len(shape) * 7 + len(index_dtype))
    x = values(rng, shape, dtype)
    axis = 0
    # Many more updates than positions: every target is hit several times, out of range too.
    index_shape = (40,) + shape[1:]
    idx = indices(rng, index_shape, index_dtype, shape[axis])
    assert_same_bits(*both("scatter_elements", x, idx, values(rng, index_shape, dtype), axis=axis))
    tuples = indices(rng, (1,) * (len(shape) - 2) + (40, 1) if len(shape) > 1 else (40,), index_dtype, shape[0])
    if len(shape) > 1:
        updates = values(rng, (1,) * (len(shape) - 2) + (40,) + shape[1:] if len(shape) > 2 else (40, shape[1]),
                         dtype)
        assert_same_bits(*both("scatter_nd", x, tuples, updates.reshape(_updates_shape(shape))))


def _updates_shape(shape):
    """SCATTER_ND's UpdatesTensor for 40 one-coordinate tuples into `shape`: (40,) + shape[1:], fitted to its rank."""
    sizes = [40, *shape[1:]]
    return (1,) * (len(shape) - len(sizes)) + tuple(sizes)


def test_scatter_large_duplicate_load_is_deterministic():
    rng = np.random.default_rng(11)
    x = np.zeros(97, np.uint32)
    idx = rng.integers(0, 97, 200_000).astype(np.uint32)
    updates = np.arange(200_000, dtype=np.uint32)
    cpu, gpu = both("scatter", x, idx, updates)
    assert_same_bits(cpu, gpu)
    last = {int(t): u for u, t in enumerate(idx.tolist())}
    assert all(int(cpu[t]) == u for t, u in last.items())


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DATA_DTYPES)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_one_hot(shape, dtype, index_dtype):
    rng = np.random.default_rng(3)
    axis = len(shape) - 1
    depth = 6
    idx = indices(rng, shape[:-1] + (1,), index_dtype, depth)
    table = values(rng, (1,) * (len(shape) - 1) + (2,), dtype)
    assert_same_bits(*both("one_hot", idx, table, axis=axis, output_shape=shape[:-1] + (depth,)))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [t for t in DATA_DTYPES if t != "float64"])
@pytest.mark.parametrize("direction", ["increasing", "decreasing"])
def test_top_k(shape, dtype, direction):
    rng = np.random.default_rng(9)
    x = values(rng, shape, dtype)
    for axis in range(len(shape)):
        for k in sorted({1, shape[axis]}):
            assert_same_bits(*both("top_k1", x, axis=axis, k=k, axis_direction=direction, output_dtype="uint64"))
    assert_same_bits(*both("top_k", x, axis=0, k=1))


def test_top_k_long_rows():
    rng = np.random.default_rng(2)
    x = rng.integers(-3, 3, size=(4, 100_000)).astype(np.float32)  # ties everywhere
    assert_same_bits(*both("top_k", x, axis=1, k=100))
    assert_same_bits(*both("top_k1", x.astype(np.int64), axis=1, k=100, axis_direction="increasing"))


@pytest.mark.parametrize("shape", [(1, 1, 2, 4), (3, 5), (2, 3, 4), (1, 2, 1, 3, 2)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint32"])
def test_nonzero_coordinates(shape, dtype):
    rng = np.random.default_rng(4)
    assert_same_bits(*both("nonzero_coordinates", values(rng, shape, dtype)))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_gathers_clamp_the_index_types_extremes(index_dtype):
    """DirectML's clamp of out-of-range gather indices at the index type's own limits (INT64's lowest, UINT64's
    values past INT64's range, which a signed reading would turn negative): the GPU gives the CPU's bits, along
    the outer, a middle and the last axis (GATHER's one kernel), and in GATHER_ELEMENTS and GATHER_ND."""
    info = np.iinfo(index_dtype)
    rng = np.random.default_rng(7)
    x = values(rng, (3, 4, 5), "float32")
    extremes = np.array([info.min, info.max, 0, info.max - 1, 1 if info.min == 0 else -1], dtype=index_dtype)
    for axis in range(3):
        row = extremes.reshape(1, 1, -1)
        assert_same_bits(*both("gather", x, row, axis=axis, index_dimensions=1))
    elements = np.resize(extremes, (3, 4, 2)).astype(index_dtype)
    assert_same_bits(*both("gather_elements", x, elements, axis=2))
    tuples = np.resize(extremes, (1, 5, 2)).astype(index_dtype)
    assert_same_bits(*both("gather_nd", x, tuples))
    assert_same_bits(*both("gather_nd1", x, tuples))


@pytest.mark.parametrize("dtype, shape, axis", [
    ("float32", (6, 32), 0), ("float32", (6, 1), 0), ("float32", (6, 31), 0), ("float32", (6, 33), 0),
    ("float32", (4, 1000), 0), ("float16", (3, 4, 8), 1), ("float64", (5, 2), 0), ("uint8", (2, 7, 1000), 1),
    ("int8", (4, 3), 0), ("uint16", (2, 9, 4), 1), ("float32", (64, 1024), 0)])  # the last: the bench's, small
def test_gather_moves_whole_words(dtype, shape, axis):
    """GATHER's kernel copies 16-, 8-, 4-, 2- or 1-byte words (the widest the slices after Axis are a whole number
    of): the CPU's bits for each width, rows of 1, 31, 32, 33 and 1000 elements, negative and out-of-range
    indices."""
    rng = np.random.default_rng(len(shape) * 7 + shape[-1])
    x = values(rng, shape, dtype)
    for index_dtype in ("int32", "uint64"):
        idx = indices(rng, (1,) * (len(shape) - 1) + (5,), index_dtype, shape[axis])
        assert_same_bits(*both("gather", x, idx, axis=axis, index_dimensions=1))


def test_gather_of_a_view_that_starts_off_a_word():
    """A contiguous view that starts 4 bytes past a 16-byte boundary is moved in 4-byte words, the same bits as a
    fresh copy of it."""
    from dmlcli.operators.indexing import entries as indexing

    rng = np.random.default_rng(3)
    flat = values(rng, (5 * 64 + 1,), "float32")
    host = flat[1:].reshape(5, 64)
    idx = indices(rng, (1, 7), "int64", 5)
    view = cupy.asarray(flat)[1:].reshape(5, 64)
    assert view.data.ptr % 16 == 4
    call = dmlcli.validate("gather", host, idx, axis=0, index_dimensions=1).call
    (got,) = indexing.gather_gpu_kernel(cupy, [view, cupy.asarray(idx)], call.outputs, call.parameters)
    assert_same_bits(dmlcli.run("gather", host, idx, backend="cpu", axis=0, index_dimensions=1), cupy.asnumpy(got))
