"""Pooling on the GPU: the same xp kernels on CuPy as on NumPy.

Maxima, their indices and MAX_UNPOOLING are selections and copies: equal to the CPU's results (values equal,
NaN where the CPU has NaN; indices and unpooled bits identical). Averages and Lp norms add the window's
elements in the same order with the same FLOAT32 operations, so they are checked within the operator's own
tolerance (N + 2 ULP; 2N + 4 for LP with P other than 1 and 2, whose pow may differ on CUDA).
Skipped without CuPy or a usable GPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dmlcli
from dmlcli.checking.comparison import compare_arrays, rule_for, ulp_distance
from dmlcli.errors import BackendUnavailableError

cupy = pytest.importorskip("cupy")

SHAPES = [(1, 3, 7, 9), (2, 4, 5, 6, 7), (4, 16, 33, 31)]
GEOMETRIES = [
    dict(window_size=[2, 2], strides=[2, 2]),
    dict(window_size=[3, 3], strides=[1, 2], start_padding=[1, 1], end_padding=[1, 2]),
    dict(window_size=[2, 3], strides=[2, 1], start_padding=[0, 2], end_padding=[1, 0], dilations=[2, 1]),
]


@pytest.fixture(scope="module")
def gpu_backend():
    from dmlcli.backends import gpu

    try:
        return gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


def spatial(geometry, rank):
    """The geometry for a rank-4 or rank-5 input (a 5-D input repeats the first spatial value)."""
    if rank == 4:
        return dict(geometry)
    return {key: [value[0], *value] for key, value in geometry.items()}


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(shape).astype(dtype)
        x.reshape(-1)[::17] = np.nan  # NaN skipped by the maxima, propagated by the sums
        x.reshape(-1)[::13] = 0.5  # ties
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def both(op, inputs, gpu_backend, **parameters):
    on_cpu = dmlcli.run(op, *inputs, backend="cpu", **parameters)
    on_gpu = dmlcli.run(op, *inputs, backend=gpu_backend, **parameters)
    return ((on_cpu,) if not isinstance(on_cpu, tuple) else on_cpu,
            (on_gpu,) if not isinstance(on_gpu, tuple) else on_gpu)


@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint8", "int64"])
@pytest.mark.parametrize("op", ["max_pooling", "max_pooling1", "max_pooling2"])
def test_gpu_maxima_and_indices_equal_the_cpu_results(gpu_backend, op, dtype, shape):
    x = data(shape, dtype, seed=len(shape))
    for geometry in GEOMETRIES:
        parameters = spatial(geometry, len(shape))
        if op != "max_pooling2":
            parameters.pop("dilations", None)
        cpu_outputs, gpu_outputs = both(op, [x], gpu_backend, **parameters)
        assert len(cpu_outputs) == len(gpu_outputs)
        assert np.array_equal(cpu_outputs[0], gpu_outputs[0], equal_nan=np.dtype(dtype).kind == "f"), parameters
        for c, g in zip(cpu_outputs[1:], gpu_outputs[1:]):
            assert c.dtype == g.dtype and np.array_equal(c, g), parameters


@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op, extra", [("average_pooling1", {"include_padding": False}),
                                       ("average_pooling1", {"include_padding": True}),
                                       ("lp_pooling1", {"p": 1}), ("lp_pooling1", {"p": 2}),
                                       ("lp_pooling1", {"p": 3})])
def test_gpu_sums_within_the_tolerance(gpu_backend, op, extra, dtype, shape):
    x = np.abs(np.nan_to_num(data(shape, dtype, seed=7))) + np.asarray(0.25, dtype)  # one sign: no cancellation
    for geometry in GEOMETRIES:
        parameters = spatial(geometry, len(shape))
        (c,), (g,) = both(op, [x], gpu_backend, **parameters, **extra)
        count = math.prod(parameters["window_size"])
        limit = 2 * count + 4 if extra.get("p") == 3 else count + 2
        assert c.dtype == g.dtype and c.shape == g.shape
        assert ulp_distance(c, g).max() <= limit, (op, extra, parameters)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gpu_signed_averages_within_the_sum_bound(gpu_backend, dtype):
    """Values of both signs average near 0, where the sums' rounding is many ULP of the result: the GPU's result is
    within the CPU's rule for the call, its sum bound 2 (K u + u_out) x the average of |x|."""
    x = np.nan_to_num(data((2, 3, 17, 19), dtype, seed=8), posinf=0, neginf=0)
    op = "average_pooling1"
    for geometry in GEOMETRIES:
        parameters = spatial(geometry, 4)
        (c,), (g,) = both(op, [x], gpu_backend, **parameters)
        call = dmlcli.validate(op, x, **parameters).call
        comparison = compare_arrays(g, c, rule_for(call.operator, c.dtype, call=call, inputs=[x]))
        assert comparison.passed, (parameters, comparison.text())


def test_gpu_max_unpooling_equals_the_cpu(gpu_backend):
    x = data((2, 3, 8, 8), "float32", seed=3)
    values, indices = dmlcli.run("max_pooling2", x, window_size=[2, 2], strides=[2, 2], output_dtype="uint64")
    duplicated = indices.copy()
    duplicated.reshape(-1)[::5] = duplicated.reshape(-1)[0]  # several values for one index: the last wins
    duplicated.reshape(-1)[3] = 10**9  # past the output: skipped
    for index in (indices, duplicated, indices.astype(np.uint32)):
        (c,), (g,) = both("max_unpooling", [values, index], gpu_backend, output_shape=x.shape)
        assert np.array_equal(c.view(np.uint32), g.view(np.uint32))


def test_gpu_large_input(gpu_backend):
    x = data((8, 64, 64, 64), "float32", seed=5)
    for op, parameters in [("max_pooling1", dict(window_size=[3, 3], start_padding=[1, 1], end_padding=[1, 1])),
                           ("average_pooling", dict(window_size=[2, 2], strides=[2, 2]))]:
        cpu_outputs, gpu_outputs = both(op, [x], gpu_backend, **parameters)
        if op == "max_pooling1":
            assert np.array_equal(cpu_outputs[0], gpu_outputs[0], equal_nan=True)
            assert np.array_equal(cpu_outputs[1], gpu_outputs[1])
        else:
            c, g = cpu_outputs[0], gpu_outputs[0]
            assert np.array_equal(np.isnan(c), np.isnan(g))
            call = dmlcli.validate(op, x, **parameters).call
            comparison = compare_arrays(g, c, rule_for(call.operator, c.dtype, call=call, inputs=[x]))
            assert comparison.passed, comparison.text()


def test_gpu_roi_pooling_equals_the_cpu(gpu_backend):
    x = data((2, 5, 17, 13), "float32", seed=9)
    rng = np.random.default_rng(4)
    corners = rng.uniform(-2, 20, (6, 4))
    corners[:, 2:] = np.maximum(corners[:, 2:], corners[:, :2])
    rois = np.concatenate([rng.integers(0, 3, (6, 1)), corners], axis=1).astype(np.float32).reshape(1, 1, 6, 5)
    for pooled in ([2, 2], [3, 5]):
        (c,), (g,) = both("roi_pooling", [x, rois], gpu_backend, pooled_size=pooled, spatial_scale=0.5)
        assert np.array_equal(c, g, equal_nan=True)


@pytest.mark.parametrize("op", ["roi_align", "roi_align1"])
def test_gpu_roi_align_within_the_tolerance(gpu_backend, op):
    x = np.abs(np.nan_to_num(data((2, 4, 12, 10), "float32", seed=6))) + np.float32(0.25)
    rng = np.random.default_rng(8)
    rois = rng.uniform(-2, 13, (5, 4)).astype(np.float32)
    batches = rng.integers(0, 2, 5).astype(np.uint32)
    for function in ("average", "max"):
        for mode in ("linear", "nearest_neighbor"):
            (c,), (g,) = both(op, [x, rois, batches], gpu_backend, output_shape=(5, 4, 3, 2),
                              reduction_function=function, interpolation_mode=mode, spatial_scale_x=0.8)
            assert c.shape == g.shape and ulp_distance(c, g).max() <= 32, (op, function, mode)


@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op, extra", [("average_pooling1", {"include_padding": False}),
                                       ("average_pooling1", {"include_padding": True}),
                                       ("lp_pooling1", {"p": 1}), ("lp_pooling1", {"p": 2})])
def test_gpu_window_kernels_give_the_cpu_bits(gpu_backend, op, extra, dtype, shape):
    """pooling_gpu.py adds in the CPU's order with the same IEEE operations (no flush, no contraction): the sums
    are bit-identical, signs of zeros, NaN and subnormal inputs included."""
    x = data(shape, dtype, seed=11)
    tiny = np.finfo(dtype).smallest_subnormal
    x.reshape(-1)[5::19] = tiny * 3  # subnormal inputs and sums: a flushing kernel would differ
    x.reshape(-1)[7::23] = -0.0
    for geometry in GEOMETRIES:
        (c,), (g,) = both(op, [x], gpu_backend, **spatial(geometry, len(shape)), **extra)
        bits = np.uint32 if dtype == "float32" else np.uint16
        same = (c.view(bits) == g.view(bits)) | (np.isnan(c) & np.isnan(g))
        assert same.all(), (op, extra, geometry, c[~same][:4], g[~same][:4])


def test_gpu_window_kernel_is_the_one_that_runs(gpu_backend, monkeypatch):
    """The GPU path of MAX_POOLING, AVERAGE_POOLING and LP_POOLING (P 1, 2) is pooling_gpu's kernel, not the xp one
    (which reads the padded input once per window element)."""
    from dmlcli.operators.pooling import entries as pooling

    def refuse(*args, **kwargs):
        raise AssertionError("the xp kernel ran on the GPU")

    monkeypatch.setattr(pooling, "max_kernel", refuse)
    monkeypatch.setattr(pooling, "average_kernel", refuse)
    monkeypatch.setattr(pooling, "lp_kernel", refuse)
    x = data((2, 3, 9, 8), "float32", seed=2)
    for op, extra in [("max_pooling", {}), ("average_pooling", {}), ("lp_pooling", {"p": 2})]:
        result = dmlcli.run(op, x, backend=gpu_backend, window_size=[3, 2], strides=[2, 2], **extra)
        assert result.shape == (2, 3, 4, 4)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gpu_max_pooling_gives_the_cpu_bits(gpu_backend, dtype):
    """pooling_gpu's maximum over a window inside the input (PTX max.f32) and its element-by-element rule agree
    with the CPU bit for bit: windows of zeros of both signs (the first zero of a tie, on both), subnormals, all-NaN
    windows, infinities, windows at the edges."""
    rng = np.random.default_rng(3)
    shape = (2, 3, 17, 19)
    x = rng.standard_normal(shape).astype(dtype)
    pick = rng.random(shape)
    x[pick < 0.3] = -0.0
    x[(pick >= 0.3) & (pick < 0.55)] = 0.0
    x[(pick >= 0.55) & (pick < 0.6)] = np.finfo(dtype).smallest_subnormal * -3
    x[(pick >= 0.6) & (pick < 0.62)] = -np.inf
    x[0, 0, 4:8, 4:8] = np.nan  # windows of nothing but NaN
    bits = np.uint32 if dtype == "float32" else np.uint16
    for geometry in GEOMETRIES + [dict(window_size=[3, 3], start_padding=[1, 1], end_padding=[1, 1])]:
        (c,), (g,) = both("max_pooling", [x], gpu_backend, **{k: v for k, v in geometry.items() if k != "dilations"})
        same = (c.view(bits) == g.view(bits)) | (np.isnan(c) & np.isnan(g))
        assert same.all(), (geometry, c[~same][:4], g[~same][:4])
        zeros = c == 0
        assert np.signbit(c[zeros]).any() and (~np.signbit(c[zeros])).any() and (c != 0).any()  # every kind made


def special_values(shape, seed):
    """Normal values with -0.0, +0.0, subnormals, NaN, +inf and -inf scattered in, and a band of NaN rows (windows of
    nothing but NaN) where the planes are tall enough."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    pick = rng.random(shape)
    x[pick < 0.2] = -0.0
    x[(pick >= 0.2) & (pick < 0.4)] = 0.0
    x[(pick >= 0.4) & (pick < 0.45)] = np.float32(np.finfo(np.float32).smallest_subnormal * 5)
    x[(pick >= 0.45) & (pick < 0.5)] = np.nan
    x[(pick >= 0.5) & (pick < 0.52)] = np.inf
    x[(pick >= 0.52) & (pick < 0.54)] = -np.inf
    if shape[2] > 8:
        x[0, 0, 2:7, :] = np.nan
    return x


def assert_maximum_by(kernel: str, x, gpu_backend, monkeypatch, **parameters) -> None:
    """MAX_POOLING of FLOAT32 `x` with `parameters` on the GPU runs pooling_gpu's `kernel` and gives the CPU's bits
    (a NaN where the CPU has one)."""
    from dmlcli.operators.pooling import gpu as pooling_gpu

    ran = []
    real = getattr(pooling_gpu, kernel)
    monkeypatch.setattr(pooling_gpu, kernel, lambda *args: ran.append(1) or real(*args))
    (c,), (g,) = both("max_pooling", [x], gpu_backend, **parameters)
    same = (c.view(np.uint32) == g.view(np.uint32)) | (np.isnan(c) & np.isnan(g))
    assert ran and same.all(), (kernel, parameters, c[~same][:4], g[~same][:4])


@pytest.mark.parametrize("window, start, end, shape", [
    ([3, 3], [1, 1], [1, 1], (2, 3, 17, 19)), ([3, 1], [0, 0], [0, 0], (1, 2, 9, 5)),
    ([5, 5], [2, 2], [2, 2], (1, 2, 23, 38)), ([3, 5], [0, 2], [2, 1], (2, 2, 8, 33)),
    ([7, 7], [3, 3], [3, 3], (1, 1, 5, 6)), ([4, 2], [1, 1], [0, 0], (3, 1, 3, 70)),
    ([7, 2], [6, 0], [6, 1], (1, 2, 2, 2))])
def test_gpu_max_pooling_strips_give_the_cpu_bits(gpu_backend, window, start, end, shape, monkeypatch):
    """FLOAT32 max pooling with stride 1 (windows of 3 to 7 rows) runs the strip kernel (STRIP_ROWS outputs down a
    column from one horizontal maximum per input row) where the slide kernel does not take it (widths that are not a
    multiple of 4, outputs narrower than the input): the CPU's bits, zeros of both signs, subnormals, NaN and
    infinities included, heights that are and are not a multiple of the strip, windows wider than the input."""
    assert_maximum_by("max_strip_kernel", special_values(shape, sum(shape)), gpu_backend, monkeypatch,
                      window_size=window, start_padding=start, end_padding=end)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("geometry", [
    dict(window_size=[2, 2], strides=[2, 2]),  # the bench's: every window inside
    dict(window_size=[3, 3], strides=[3, 1], start_padding=[1, 1], end_padding=[1, 1]),  # inside and across the edge
    dict(window_size=[2, 3], strides=[3, 5], dilations=[2, 1])])
@pytest.mark.parametrize("op, extra", [("average_pooling", {}), ("average_pooling1", {"include_padding": True}),
                                       ("lp_pooling", {"p": 1}), ("lp_pooling", {"p": 2})])
def test_gpu_inside_windows_give_the_cpu_bits(gpu_backend, op, extra, geometry, dtype):
    """Windows inside the input take the path without bounds tests (pooling_gpu._INSIDE_SUM), the others the
    generic loop: the CPU's bits either way, on { 2, 16, 32, 33 } (the bench's { B, 16, 256, 256 }, small), with
    subnormals and -0.0."""
    if "dilations" in geometry and op != "average_pooling1":
        geometry = {k: v for k, v in geometry.items() if k != "dilations"}
    x = data((2, 16, 32, 33), dtype, seed=7)
    x.reshape(-1)[5::19] = np.finfo(dtype).smallest_subnormal * 3
    x.reshape(-1)[7::23] = -0.0
    (c,), (g,) = both(op, [x], gpu_backend, **geometry, **extra)
    bits = np.uint32 if dtype == "float32" else np.uint16
    same = (c.view(bits) == g.view(bits)) | (np.isnan(c) & np.isnan(g))
    assert same.all(), (op, extra, geometry, c[~same][:4], g[~same][:4])


SLIDES = [([3, 3], [1, 1], [1, 1], (1, 2, 9, 8)), ([3, 3], [1, 1], [1, 1], (2, 3, 70, 132)),
          ([3, 3], [1, 1], [1, 1], (1, 1, 1, 4)), ([3, 3], [1, 1], [1, 1], (1, 1, 2, 260)),
          ([3, 3], [1, 1], [1, 1], (1, 3, 33, 256)), ([5, 5], [2, 2], [2, 2], (1, 2, 23, 40)),
          ([3, 1], [0, 0], [0, 0], (1, 2, 9, 8)), ([4, 2], [1, 1], [0, 0], (3, 1, 3, 12)),
          ([7, 5], [6, 4], [6, 0], (1, 2, 2, 8)), ([3, 7], [0, 2], [2, 4], (1, 1, 33, 136)),
          ([7, 7], [3, 3], [3, 3], (1, 1, 5, 4)), ([3, 5], [1, 0], [1, 4], (1, 1, 6, 8)),
          ([3, 3], [0, 1], [0, 1], (1, 1, 40, 16)), ([6, 3], [0, 2], [5, 0], (2, 2, 65, 124))]


@pytest.mark.parametrize("window, start, end, shape", SLIDES,
                         ids=[f"{w[0]}x{w[1]}-{s}-{e}-{'x'.join(map(str, shape))}" for w, s, e, shape in SLIDES])
def test_gpu_max_pooling_slides_give_the_cpu_bits(gpu_backend, window, start, end, shape, monkeypatch):
    """FLOAT32 max pooling with stride 1, an output as wide as the input and rows of a multiple of 4 runs the slide
    kernel (a warp walks down 128 columns; the columns beside a lane's vector from its neighbours, or loaded at the
    warp's ends; rows of padding above and below): the CPU's bits, zeros of both signs, subnormals, NaN (windows of
    nothing but NaN too) and infinities included; planes of one row, one vector, one warp and several, heights that
    are and are not a multiple of SLIDE_ROWS, padding of 0 to SLIDE_MAX_SIDE columns on either side."""
    assert_maximum_by("max_slide_kernel", special_values(shape, sum(shape)), gpu_backend, monkeypatch,
                      window_size=window, start_padding=start, end_padding=end)


def test_gpu_max_pooling_slide_on_the_bench_planes(gpu_backend, monkeypatch):
    """The bench's 3x3 "same" maximum over 256 x 256 planes ({ 4, 16, 256, 256 }: the bench has 256 images) by the
    slide kernel: the CPU's bits on random values, and on values with zeros of both signs, NaN and infinities."""
    for x in (np.random.default_rng(1).random((4, 16, 256, 256), dtype=np.float32),
              special_values((4, 16, 256, 256), 2)):
        assert_maximum_by("max_slide_kernel", x, gpu_backend, monkeypatch, window_size=[3, 3], start_padding=[1, 1],
                          end_padding=[1, 1])


def test_gpu_max_pooling_slide_leaves_what_it_does_not_take(gpu_backend, monkeypatch):
    """The slide kernel takes FLOAT32 only, rows of a multiple of 4 from a 16-byte boundary, outputs as wide as the
    input and at most SLIDE_MAX_SIDE columns of padding on either side; the strip kernel (or the generic one) runs the
    rest, with the CPU's bits: a view one element in, a width of 10, FLOAT16, an output narrower than the input, 5
    columns of padding on the left."""
    from dmlcli.operators.pooling import entries as pooling
    from dmlcli.operators.pooling import gpu as pooling_gpu

    monkeypatch.setattr(pooling_gpu, "max_slide_kernel", lambda *args: pytest.fail("the slide kernel ran"))
    x = special_values((2, 3, 17, 12), 4)
    flat = cupy.asarray(np.concatenate([np.zeros(1, np.float32), x.reshape(-1)]))
    view = flat[1:].reshape(x.shape)
    assert view.data.ptr % 16
    parameters = dict(window_size=[3, 3], start_padding=[1, 1], end_padding=[1, 1])
    call = dmlcli.validate("max_pooling", x, **parameters).call
    (g,) = pooling.max_gpu_kernel(cupy, [view], call.outputs, call.parameters)
    c = dmlcli.run("max_pooling", x, **parameters)  # the CPU's (the GPU's own copy of x would be aligned)
    assert np.array_equal(cupy.asnumpy(g).view(np.uint32), c.view(np.uint32))
    for y, extra in [(special_values((1, 2, 9, 10), 5), parameters),
                     (special_values((1, 2, 9, 12), 6).astype(np.float16), parameters),
                     (special_values((1, 2, 9, 12), 7), dict(window_size=[3, 3], start_padding=[1, 0],
                                                            end_padding=[1, 0])),
                     (special_values((1, 2, 9, 12), 8), dict(window_size=[3, 7], start_padding=[1, 5],
                                                            end_padding=[1, 1]))]:
        (c,), (g,) = both("max_pooling", [y], gpu_backend, **extra)
        bits = np.uint32 if y.dtype == np.float32 else np.uint16
        same = (c.view(bits) == g.view(bits)) | (np.isnan(c) & np.isnan(g))
        assert same.all(), (y.shape, y.dtype, extra)
