"""Data movement on the GPU: every operator's result bit for bit equal to the CPU backend's.

The kernels are the same functions on NumPy and CuPy (index arrays made on the host), so any difference is a
CuPy call that does not do what NumPy's does. Inputs are random bit patterns: NaN payloads (signalling ones
too), -0.0 and subnormals must come through unchanged. Skipped without CuPy or a usable GPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dmlcli
from dmlcli.errors import BackendUnavailableError

cupy = pytest.importorskip("cupy")

DTYPES = ["float32", "float16", "float64", "int8", "uint16", "int32", "uint64"]
SHAPES = [(1, 4, 6, 6), (2, 8, 4, 10), (3, 5), (7,)]


@pytest.fixture(scope="module")
def gpu_backend():
    from dmlcli.backends import gpu

    try:
        return gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


def random_bits(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=math.prod(shape) * np.dtype(dtype).itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def bits(array):
    array = np.asarray(array)
    return array.view(f"uint{array.dtype.itemsize * 8}") if array.dtype.kind == "f" else array


def calls(shape, dtype):
    """(operator, inputs, parameters) for inputs of this shape and type: each operator that takes them."""
    rank = len(shape)
    x = random_bits(shape, dtype, seed=rank * 31 + len(dtype))
    last = rank - 1
    found = [
        ("join", [x, random_bits(shape[:last] + (3,), dtype, 1), x], {"axis": last}),
        ("join", [x, random_bits((2,) + shape[1:], dtype, 2)], {"axis": 0}),  # one row: a plain copy per input
        ("split", [x], {"axis": 0, "output_sizes": [1, shape[0] - 1] if shape[0] > 1 else [1]}),
        ("split", [x], {"axis": last, "output_count": shape[last]}),
        ("slice", [x], {"offsets": [s // 3 for s in shape], "strides": [1 + (s > 4) for s in shape]}),
        ("slice1", [x], {"input_window_offsets": [s // 4 for s in shape],
                         "input_window_strides": [(-1) ** d * (1 + d % 2) for d in range(rank)]}),
        ("reverse_subsequences", [x, random_bits((1,) + shape[1:], "uint32", 7) % np.uint32(shape[0] + 3)],
         {"axis": 0}),
        ("reverse_subsequences", [x, np.full((1,) + shape[1:], shape[0], np.uint64)], {"axis": 0}),  # whole lines
    ]
    for mode in ("constant", "edge", "reflection", "symmetric"):
        pads = {"start_padding": [d + 1 for d in range(rank)], "end_padding": [2 * s + 1 for s in shape]}
        found.append(("padding", [x], {"padding_mode": mode, "padding_value": -2.5, **pads}))
        found.append(("padding1", [x], {"padding_mode": mode, **pads}))
    wrap = {"start_padding": [min(d + 1, s) for d, s in enumerate(shape)], "end_padding": list(shape)}  # one copy
    found.append(("padding", [x], {"padding_mode": "wrap", **wrap}))
    found.append(("padding1", [x], {"padding_mode": "wrap", **wrap}))
    if dtype != "float64":  # TILE's tables have no FLOAT64
        found.append(("tile", [x], {"repeats": [1 + d % 3 for d in range(rank)]}))
    if rank == 4:
        n, c, h, w = shape
        for order in ("depth_column_row", "column_row_depth"):
            found.append(("depth_to_space1", [random_bits((n, 4 * c, h, w), dtype, 3)],
                          {"block_size": 2, "order": order}))
            found.append(("space_to_depth1", [x], {"block_size": 2, "order": order}))
        found.append(("depth_to_space", [random_bits((n, 9 * c, h, w), dtype, 4)], {"block_size": 3}))
        found.append(("space_to_depth", [x], {"block_size": 2}))
    return found


CASES = [pytest.param(shape, dtype, id=f"{dtype}-{'x'.join(map(str, shape))}") for shape in SHAPES for dtype in DTYPES]


@pytest.mark.parametrize("shape, dtype", CASES)
def test_gpu_results_equal_the_cpu_results_bit_for_bit(gpu_backend, shape, dtype):
    failures = []
    for op, inputs, parameters in calls(shape, dtype):
        on_cpu = dmlcli.run(op, *inputs, backend="cpu", **parameters)
        on_gpu = dmlcli.run(op, *inputs, backend=gpu_backend, **parameters)
        cpu_outputs = on_cpu if isinstance(on_cpu, tuple) else (on_cpu,)
        gpu_outputs = on_gpu if isinstance(on_gpu, tuple) else (on_gpu,)
        if len(cpu_outputs) != len(gpu_outputs):
            failures.append(f"{op} {parameters}: {len(gpu_outputs)} outputs on the GPU, {len(cpu_outputs)} on the CPU")
            continue
        for index, (c, g) in enumerate(zip(cpu_outputs, gpu_outputs)):
            if c.dtype != g.dtype or c.shape != g.shape or not np.array_equal(bits(c), bits(g)):
                failures.append(f"{op} {parameters} output {index}: GPU {g.dtype} {g.shape} differs from CPU "
                                f"{c.dtype} {c.shape}")
    assert not failures, "\n".join(failures[:10])


def test_gpu_large_inputs(gpu_backend):
    # Big enough that CuPy's kernels run over many blocks (4 MiB of FLOAT32 per input).
    x = random_bits((16, 64, 32, 32), "float32", 11)
    lengths = random_bits((16, 1, 32, 32), "uint64", 12)
    for op, inputs, parameters in [
        ("join", [x, x], {"axis": 1}), ("split", [x], {"axis": 3, "output_count": 4}),
        ("slice1", [x], {"input_window_strides": [-1, 3, -2, 1]}),
        ("padding", [x], {"padding_mode": "reflection", "start_padding": [0, 1, 40, 2], "end_padding": [1, 0, 3, 70]}),
        ("tile", [x], {"repeats": [1, 2, 1, 2]}), ("depth_to_space1", [x], {"block_size": 4, "order": 1}),
        # movement_gpu's copies: a 2-D interior, tiles along each axis, a join of rows.
        ("padding", [x[0, 0]], {"start_padding": [3, 1], "end_padding": [0, 5], "padding_value": 7.5}),
        ("padding", [x[0]], {"start_padding": [1, 2, 3], "end_padding": [4, 5, 6]}),
        ("tile", [x[0, 0]], {"repeats": [3, 1]}), ("tile", [x[0, 0]], {"repeats": [1, 3]}),
        ("join", [x[0], x[1, :7]], {"axis": 0}),
        ("space_to_depth", [x], {"block_size": 8}), ("reverse_subsequences", [x, lengths], {"axis": 1}),
    ]:
        on_cpu = dmlcli.run(op, *inputs, backend="cpu", **parameters)
        on_gpu = dmlcli.run(op, *inputs, backend=gpu_backend, **parameters)
        for c, g in zip(*(r if isinstance(r, tuple) else (r,) for r in (on_cpu, on_gpu))):
            assert c.shape == g.shape and np.array_equal(bits(c), bits(g)), op


# DxDispatch's JOIN, SPLIT and SLICE models on the GPU: tests/test_dispatch_shaped.py runs every shaped model there.


def test_gpu_padding_is_one_kernel(gpu_backend, monkeypatch):
    """PADDING and PADDING1 on the GPU run movement_gpu.pad (one kernel, every mode and padding length), not the
    copy engine's interior and slab assignments; their results are the CPU's bit for bit."""
    from dmlcli.operators.movement import gpu as movement_gpu

    def refuse(*args, **kwargs):
        raise AssertionError("the copy-engine padding ran")

    monkeypatch.setattr(movement_gpu, "place", refuse)
    for shape, dtype in [((5,), "uint8"), ((3, 4), "float64"), ((2, 3, 1, 4, 2), "float16"), ((6, 7), "int32")]:
        x = random_bits(shape, dtype, 9)
        for mode in ("constant", "edge", "reflection", "symmetric"):
            pads = {"start_padding": [2 * s + 1 for s in shape], "end_padding": [d for d in range(len(shape))]}
            for op, extra in (("padding", {"padding_value": 3.5}), ("padding1", {})):
                on_cpu = dmlcli.run(op, x, backend="cpu", padding_mode=mode, **pads, **extra)
                on_gpu = dmlcli.run(op, x, backend=gpu_backend, padding_mode=mode, **pads, **extra)
                assert on_cpu.shape == on_gpu.shape and np.array_equal(bits(on_cpu), bits(on_gpu)), (op, mode, shape)


def random_padding_call(rng, case: int, longest):
    """A random-bits input of rank 1 to 6 and any element width, and StartPadding and EndPadding of 0 to
    `longest(size)` in each dimension."""
    rank = int(rng.integers(1, 7))
    shape = tuple(int(rng.integers(1, 6 if rank > 3 else 30)) for _ in range(rank))
    dtype = str(rng.choice(["uint8", "float16", "float32", "int32", "float64", "uint64"]))
    pads = {"start_padding": [int(rng.integers(0, longest(s) + 1)) for s in shape],
            "end_padding": [int(rng.integers(0, longest(s) + 1)) for s in shape]}
    return random_bits(shape, dtype, case), pads


def test_padding_on_random_shapes_every_width_and_mode(gpu_backend):
    """The vector kernel (PAD_VECTOR_BYTES of outputs a thread, rows of any width, several rows in one store for
    short ones, a partial last store): 200 random calls, rank 1 to 6, every element width, zero and long pads on
    either side, every mode; the CPU's bits."""
    rng = np.random.default_rng(23)
    for case in range(200):
        x, pads = random_padding_call(rng, case, lambda size: 2 * size + 1)
        shape, dtype = x.shape, x.dtype
        mode = str(rng.choice(["constant", "edge", "reflection", "symmetric"]))
        extra = {"padding_value": -1.5} if mode == "constant" else {}
        on_cpu = dmlcli.run("padding", x, backend="cpu", padding_mode=mode, **pads, **extra)
        on_gpu = dmlcli.run("padding", x, backend=gpu_backend, padding_mode=mode, **pads, **extra)
        assert on_cpu.shape == on_gpu.shape and np.array_equal(bits(on_cpu), bits(on_gpu)), (shape, dtype, pads, mode)


def test_padding_wrap_on_random_shapes(gpu_backend):
    """PaddingMode WRAP (6_4) in movement_gpu.pad's kernel: 100 random calls, rank 1 to 6, every element width,
    padding from none to one copy of the input on either side; the CPU's bits. Then the kernel alone with padding
    of several copies (which dmlcli's validation refuses, and the kernel folds modulo the size as
    movement.source_index does), against numpy.pad's 'wrap'."""
    from dmlcli.operators.movement import gpu as movement_gpu

    rng = np.random.default_rng(29)
    for case in range(100):
        x, pads = random_padding_call(rng, case, lambda size: size)
        for op in ("padding", "padding1"):
            on_cpu = dmlcli.run(op, x, backend="cpu", padding_mode="wrap", **pads)
            on_gpu = dmlcli.run(op, x, backend=gpu_backend, padding_mode="wrap", **pads)
            assert on_cpu.shape == on_gpu.shape and np.array_equal(bits(on_cpu), bits(on_gpu)), (x.shape, x.dtype,
                                                                                                  pads)
    x = random_bits((3, 1, 4), "float32", 5)
    start, end = (7, 2, 0), (1, 5, 9)
    out_shape = tuple(a + n + b for a, n, b in zip(start, x.shape, end))
    got = movement_gpu.pad(cupy, cupy.asarray(x), out_shape, start, "WRAP", 0)
    assert np.array_equal(bits(cupy.asnumpy(got)), bits(np.pad(x, list(zip(start, end)), mode="wrap")))


@pytest.fixture
def device_room():
    """For a test that holds several GiB of device memory at once (the 64-bit index tests): one such test at a time
    among pytest-xdist's workers (an exclusive lock on a file beside the others' temporary files), this process's
    pooled blocks given back before and after, and a skip saying how much is free where the device has not the
    room (its memory held by other processes): `need(nbytes)`. Under `pytest -n 14` two of them at once, beside the
    other workers' pools, ran the H200 out of memory."""
    import fcntl
    import tempfile
    from pathlib import Path

    pool = cupy.get_default_memory_pool()
    with open(Path(tempfile.gettempdir()) / "dmlcli-tests-device-room.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pool.free_all_blocks()

        def need(nbytes: int) -> None:
            free = cupy.cuda.runtime.memGetInfo()[0]
            if free < nbytes:
                pytest.skip(f"needs {nbytes / 2**30:.1f} GiB of device memory at once; {free / 2**30:.1f} GiB free")

        try:
            yield need
        finally:
            pool.free_all_blocks()


def test_padding_with_64_bit_indices(gpu_backend, device_room):
    """An output past 2^31 elements takes the kernel's 64-bit index arithmetic; CuPy's own pad as the reference."""
    from dmlcli.operators.movement import gpu as movement_gpu

    cp = cupy
    device_room(7 * 2**30)  # the input, the output and CuPy's pad, 2 GiB each, and the index temporaries
    # 2 GiB made in place (a row's pattern, then a number a row added): the arange of every index and its remainder
    # took 16 GiB more, which ran the device out of memory beside other GPU tests under pytest -n 14.
    x = cp.empty((2**16, 2**15 - 3), cp.uint8)
    x[...] = (cp.arange(2**15 - 3, dtype=cp.uint16) % 251).astype(cp.uint8)
    x += (cp.arange(2**16, dtype=cp.uint32) % 253).astype(cp.uint8)[:, None]
    for mode, cupy_mode in (("CONSTANT", "constant"), ("EDGE", "edge")):
        got = movement_gpu.pad(cp, x, (2**16 + 3, 2**15 + 2), (1, 2), mode, 7)
        assert got.size > 2**31
        expected = cp.pad(x, ((1, 2), (2, 3)), mode=cupy_mode, **({"constant_values": 7} if mode == "CONSTANT" else {}))
        assert bool(cp.array_equal(got, expected)), mode
        del got, expected


def _random_view(rng, cp):
    """A strided view of a random-bits array: rank 1 to 8, each dimension a slice with a step of either sign."""
    rank = int(rng.integers(1, 9))
    shape = tuple(int(rng.integers(1, 7 if rank > 4 else 40)) for _ in range(rank))
    dtype = str(rng.choice(["uint8", "float16", "float32", "int32", "float64", "uint64"]))
    x = cp.asarray(random_bits(shape, dtype, int(rng.integers(0, 2**31))))
    window = []
    for size in shape:
        step = int(rng.choice([1, 1, 2, 3, -1, -2]))
        start, stop = sorted(int(v) for v in rng.integers(0, size + 1, size=2))
        window.append(slice(start, stop, step) if step > 0 else slice(stop - 1 if stop else None, start - 1
                                                                       if start else None, step))
    return x[tuple(window)]


def test_strided_copy_gives_the_views_elements(gpu_backend):
    """movement_gpu.strided_copy (SLICE's and SLICE1's kernel) equals CuPy's copy of the view bit for bit: every
    rank to 8, steps of either sign, sizes of 1 and 0, widths 1 to 8 bytes, last dimensions that do and do not
    take a vector store, views that merge to one dimension."""
    from dmlcli.operators.movement import gpu as movement_gpu

    cp = cupy
    rng = np.random.default_rng(5)
    views = [_random_view(rng, cp) for _ in range(300)]
    base = cp.asarray(random_bits((64, 4096), "float32", 9))
    views += [base[:, ::2], base[:, 1::2], base[::-1, ::-4], base[3:60:5, 7:4000:3], base[:, :1024], base[10:20],
              base.reshape(64, 64, 64)[:, ::-1, 2:], cp.asarray(random_bits((1000,), "uint8", 3))[::-1]]
    # Last steps of 2 to 4 on 16-byte boundaries: the whole-word reads (movement_gpu._reads_whole_words).
    views += [base[:, ::3], base[::2, 4::4], base[::-4, 8:4000:2], base.reshape(-1)[: 4096 * 63][::2]]
    views += [cp.asarray(random_bits((40, 512), dtype, 8))[:, ::step] for dtype in ("float16", "uint8", "float64")
              for step in (2, 3, 4)]
    for index, view in enumerate(views):
        got = movement_gpu.strided_copy(cp, view)
        assert got.flags.c_contiguous and got.shape == view.shape and got.dtype == view.dtype, index
        assert bool(cp.array_equal(got.view(f"uint{view.dtype.itemsize * 8}"),
                                   cp.ascontiguousarray(view).view(f"uint{view.dtype.itemsize * 8}"))), \
            (index, view.shape, view.strides, view.dtype)


def test_strided_copy_with_64_bit_indices(gpu_backend, device_room):
    """A view reaching past 2^31 elements takes the kernel's 64-bit index arithmetic."""
    from dmlcli.operators.movement import gpu as movement_gpu

    cp = cupy
    device_room(5 * 2**30)  # the input (2 GiB), the copy and CuPy's copy of the view (up to 0.7 GiB each)
    x = cp.empty(2**31 + 2**22, dtype=cp.uint8)
    x.view(cp.uint32)[...] = cp.arange(x.size // 4, dtype=cp.uint32)
    for view in (x[::-3], x[: 2**31][::2].reshape(-1, 2**20)[:, 7:]):
        got = movement_gpu.strided_copy(cp, view)
        assert bool(cp.array_equal(got, cp.ascontiguousarray(view)))
        del got


def test_strided_copy_of_every_other_element(gpu_backend, monkeypatch):
    """A last step of 2 over rows of whole 16-byte output vectors (one dimension or two once merged, rows in either
    order) runs the warp kernel movement_gpu._pairs: CuPy's copy of the view bit for bit, widths of 1 to 8 bytes,
    rows of one vector, of part of a warp's task, of one task and of several; views it does not take (off a 16-byte
    boundary, lengths not a whole number of vectors, three dimensions, other steps) keep the gather kernel, with the
    same bits."""
    from dmlcli.operators.movement import gpu as movement_gpu

    cp = cupy
    used = []
    real = movement_gpu._pairs
    monkeypatch.setattr(movement_gpu, "_pairs", lambda *args: used.append(1) or real(*args))
    base = cp.asarray(random_bits((64, 4096), "float32", 11))
    planes = base.reshape(8, 8, 64, 64)
    views = [(base[:, ::2], True), (base[:, 1::2], False), (base[:, 8:1032:2], True), (base[::-1, ::2], True),
             (base[3:60:5, 8:4000:2], True), (base[::-1, 16:16 + 8 * 33:2], True),
             (base.reshape(-1)[: 4096 * 63][::2], True), (base.reshape(-1)[:2001][::2], False),
             (base.reshape(-1)[-8:][::2], True), (base[:1, :8][:, ::2], True), (base[:, ::4], False),
             (planes[:, ::2, 1:, ::2], True), (planes[:, :3, 1:, ::2], False)]
    for dtype in ("uint8", "float16", "float64", "int32"):
        y = cp.asarray(random_bits((40, 512), dtype, 12))
        views += [(y[:, ::2], True), (y[:, 16:272:2], True), (y[::-3, 32:512:2], True), (y[:, 1::2], False),
                  (y[:, ::2][:, :33], False), (y.reshape(-1)[::2], True)]
    for index, (view, pairs) in enumerate(views):
        assert movement_gpu.pairs_fit(view) == pairs, index
        before = len(used)
        got = movement_gpu.strided_copy(cp, view)
        assert (len(used) > before) == pairs, index
        word = f"uint{view.dtype.itemsize * 8}"
        assert got.flags.c_contiguous and got.shape == view.shape, index
        assert bool(cp.array_equal(got.view(word), cp.ascontiguousarray(view).view(word))), \
            (index, view.shape, view.strides, view.dtype)


def test_every_other_column_on_the_bench_rows(gpu_backend):
    """SLICE with strides [1, 2] on rows of the bench's 16384 FLOAT32 columns (2048 rows: 128 MiB) by _pairs: the
    CPU's bits."""
    from dmlcli.operators.movement import gpu as movement_gpu

    x = random_bits((2048, 16384), "float32", 13)
    assert movement_gpu.pairs_fit(cupy.asarray(x)[:, ::2])
    on_cpu = dmlcli.run("slice", x, backend="cpu", strides=[1, 2])
    on_gpu = dmlcli.run("slice", x, backend=gpu_backend, strides=[1, 2])
    assert np.array_equal(bits(on_cpu), bits(on_gpu))


def test_every_other_element_with_64_bit_indices(gpu_backend, device_room):
    """2^26 rows of one 16-byte output vector each (every other byte of 32 of each row's 48): 2^31 threads, so _pairs
    counts them in 64 bits; CuPy's copy of the view bit for bit."""
    from dmlcli.operators.movement import gpu as movement_gpu

    cp = cupy
    device_room(5 << 30)  # the 3 GiB input, the copy and CuPy's reference copy
    # 3 GiB made in place (a row's pattern, then a number a row added), as test_padding_with_64_bit_indices does: an
    # arange of every word and its product took 6 GiB more, beside the other GPU tests under pytest -n 14.
    x = cp.empty((2**26, 48), dtype=cp.uint8)
    x[...] = cp.arange(48, dtype=cp.uint8) * cp.uint8(5)
    x += (cp.arange(2**26, dtype=cp.uint32) % 251).astype(cp.uint8)[:, None]
    view = x[:, :32:2]
    assert movement_gpu.pairs_fit(view)
    got = movement_gpu.strided_copy(cp, view)
    assert bool(cp.array_equal(got, cp.ascontiguousarray(view)))
    del got, x


def test_slice_on_the_gpu_runs_the_gather_kernel(gpu_backend, monkeypatch):
    """SLICE and SLICE1 on the GPU go through movement_gpu.strided_copy, with the CPU's bits."""
    from dmlcli.operators.movement import gpu as movement_gpu

    used = []
    real = movement_gpu.strided_copy
    monkeypatch.setattr(movement_gpu, "strided_copy", lambda cp, view: used.append(view.shape) or real(cp, view))
    x = random_bits((6, 50, 33), "float32", 4)
    for op, parameters in (("slice", {"offsets": [1, 2, 3], "strides": [2, 3, 2], "sizes": [3, 10, 12]}),
                           ("slice1", {"input_window_strides": [-1, 2, -3]})):
        on_cpu = dmlcli.run(op, x, backend="cpu", **parameters)
        on_gpu = dmlcli.run(op, x, backend=gpu_backend, **parameters)
        assert np.array_equal(bits(on_cpu), bits(on_gpu)), op
    assert len(used) == 2


def test_tile_reads_the_input_once(gpu_backend, monkeypatch):
    """TILE on the GPU runs movement_gpu.tile_by_kernel (one read of the input, each vector stored at every copy's
    place), the copy engine only past TILE_MAX_COPIES copies; the CPU's bits either way, every width, last
    dimensions that do and do not take 16-byte vectors."""
    from dmlcli.operators.movement import gpu as movement_gpu

    engine_tiles = []
    real = movement_gpu.tile
    monkeypatch.setattr(movement_gpu, "tile", lambda cp, x, repeats: engine_tiles.append(repeats) or real(cp, x, repeats))
    for dtype in ("uint8", "float16", "float32", "uint64"):
        for shape, repeats in [((3, 8), (2, 3)), ((5, 7), (1, 4)), ((2, 3, 12), (3, 1, 2)), ((2, 1, 1, 1, 1, 1, 1, 6),
                                                                                           (1, 2, 1, 1, 3, 1, 1, 2))]:
            x = random_bits(shape, dtype, len(shape))
            on_cpu = dmlcli.run("tile", x, backend="cpu", repeats=list(repeats))
            on_gpu = dmlcli.run("tile", x, backend=gpu_backend, repeats=list(repeats))
            assert np.array_equal(bits(on_cpu), bits(on_gpu)), (dtype, shape, repeats)
    assert not engine_tiles
    x = random_bits((3,), "float32", 1)
    many = [movement_gpu.TILE_MAX_COPIES + 1]
    assert np.array_equal(bits(dmlcli.run("tile", x, backend=gpu_backend, repeats=many)),
                          bits(dmlcli.run("tile", x, backend="cpu", repeats=many)))
    assert engine_tiles == [tuple(many)]


def test_tile_offsets_kept_on_the_device(gpu_backend):
    """TILE's copy offsets are made once per shape and repeats and kept on the device: calls that share them (other
    element widths, a second call) and calls that differ only in the repeats or the shape give the CPU's bits."""
    from dmlcli.operators.movement import gpu as movement_gpu

    movement_gpu._TILE_OFFSETS.clear()
    for shape, repeats in [((3, 8), (2, 1)), ((3, 8), (1, 2)), ((3, 8), (2, 1)), ((8, 3), (2, 1)), ((64, 1024), (2, 1))]:
        for dtype in ("float32", "uint8", "uint64"):
            x = random_bits(shape, dtype, shape[0])
            on_cpu = dmlcli.run("tile", x, backend="cpu", repeats=list(repeats))
            on_gpu = dmlcli.run("tile", x, backend=gpu_backend, repeats=list(repeats))
            assert np.array_equal(bits(on_cpu), bits(on_gpu)), (dtype, shape, repeats)
    assert len(movement_gpu._TILE_OFFSETS) == 4
