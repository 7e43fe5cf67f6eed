"""The normalization and resampling families on the GPU: the same xp kernel on CuPy as on NumPy.

Float normalisations agree with the CPU within the operator's tolerance for the call (CuPy's reductions add in
another order); NEAREST_NEIGHBOR resampling and VALUE_SCALE_2D give the same bits; fused activations run the
activation's own GPU kernel. They need CuPy and a CUDA device.
"""

from __future__ import annotations

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


def both(op, *arrays, **options):
    return api.run(op, *arrays, backend="cpu", **options), api.run(op, *arrays, backend="gpu", **options)


def assert_within(op, arrays, options, context=""):
    cpu_result, gpu_result = both(op, *arrays, **options)
    assert cpu_result.dtype == gpu_result.dtype and cpu_result.shape == gpu_result.shape, context
    verdict = api.validate(op, *arrays, **options)
    # The ULP figure, the floor, or (for the operators that sum terms) each element's sum bound from these inputs.
    rule = rule_for(verdict.call.operator, cpu_result.dtype, call=verdict.call, parameters=verdict.call.parameters,
                    inputs=arrays)
    assert np.array_equal(np.isnan(cpu_result), np.isnan(gpu_result)), context
    comparison = compare_arrays(gpu_result, cpu_result, rule)
    assert comparison.passed, f"{context}: {comparison.text()}"


SHAPES = [(2, 3, 4, 5), (1, 16, 33, 7), (4, 64, 32, 32)]
DTYPES = ["float32", "float16"]


def data(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fused", [None, "relu", "sigmoid"])
def test_batch_normalization(shape, dtype, fused):
    channel = (1, shape[1], 1, 1)
    mean, scale, bias = data(channel, dtype, 1), data(channel, dtype, 2), data(channel, dtype, 3)
    variance = np.abs(data(channel, dtype, 4)) + np.asarray(0.5, dtype)
    options = {} if fused is None else {"fused_activation": fused}
    assert_within("batch_normalization", [data(shape, dtype), mean, variance, scale, bias], options, f"{shape} {fused}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("per_element", [False, True])
@pytest.mark.parametrize("shape", [(3, 8, 9, 10), (2, 8, 4, 6), (5, 3)])
def test_batch_normalization_gives_the_cpu_bits(dtype, per_element, shape):
    """The GPU's one-pass kernel does the CPU's four IEEE operations per element: the same bits, subnormals and
    zeros' signs included (nothing is reduced); planes of a multiple of 4 go by float4, others one by one."""
    channel = shape if per_element else (1, shape[1]) + (1,) * (len(shape) - 2)
    x = data(shape, dtype)
    x.reshape(-1)[::7] = np.finfo(dtype).smallest_subnormal * 5
    x.reshape(-1)[3::11] = -0.0
    mean, scale, bias = data(channel, dtype, 1), data(channel, dtype, 2), data(channel, dtype, 3) * 1e-3
    variance = np.abs(data(channel, dtype, 4)) + np.asarray(0.5, dtype)
    cpu_result, gpu_result = both("batch_normalization", x, mean, variance, scale, bias, epsilon=1e-3)
    bits = np.uint32 if dtype == "float32" else np.uint16
    assert np.array_equal(cpu_result.view(bits), gpu_result.view(bits))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("axes", [[2, 3], [1, 2, 3], [3]])
def test_mean_variance_normalization1(shape, dtype, axes):
    channel = (1, shape[1], 1, 1)
    assert_within("mean_variance_normalization1", [data(shape, dtype), data(channel, dtype, 1),
                                                   data(channel, dtype, 2)], {"axes": axes}, f"{shape} {axes}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cross_channel", [False, True])
def test_mean_variance_normalization_with_fused_elu(dtype, cross_channel):
    assert_within("mean_variance_normalization", [data((2, 8, 16, 16), dtype)],
                  {"cross_channel": cross_channel, "fused_activation": "elu"})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cross_channel", [False, True])
@pytest.mark.parametrize("size", [1, 3, 5])
def test_local_response_normalization(dtype, cross_channel, size):
    assert_within("local_response_normalization", [data((2, 12, 17, 9), dtype)],
                  {"cross_channel": cross_channel, "local_size": size, "alpha": 0.5})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, 3])
def test_lp_normalization(dtype, p, axis):
    assert_within("lp_normalization", [data((3, 40, 5, 64), dtype)], {"p": p, "axis": axis})


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint8"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 2, 0.5, 1.75], [1, 1, 0.3, 3]])
def test_resample1_nearest_same_bits_linear_within(dtype, scales):
    x = (np.random.default_rng(7).standard_normal((2, 3, 19, 23)) * 20).astype(dtype)
    offsets = {"input_pixel_offsets": [0.5, 0, 0.25, 0.5], "output_pixel_offsets": [-0.5, 0, 0, -0.5]}
    cpu_result, gpu_result = both("resample1", x, scales=scales, **offsets)
    assert np.array_equal(cpu_result, gpu_result)
    if dtype.startswith("float"):
        assert_within("resample1", [x], {"scales": scales, "interpolation_mode": "linear", **offsets})
    else:  # integers: the FLOAT32 interpolation rounded; a half within rounding may go either way
        cpu_result, gpu_result = both("resample1", x, scales=scales, interpolation_mode="linear", **offsets)
        assert np.abs(cpu_result.astype(np.int64) - gpu_result.astype(np.int64)).max() <= 1


@pytest.mark.parametrize("mode", ["nearest_neighbor", "linear"])
def test_upsample_2d_and_resample(mode):
    x = data((2, 3, 2, 8, 9), "float32")
    cpu_result, gpu_result = both("upsample_2d", x, scale_size=(3, 2), interpolation_mode=mode)
    if mode == "nearest_neighbor":
        assert np.array_equal(cpu_result, gpu_result)
    else:
        assert_within("upsample_2d", [x], {"scale_size": (3, 2), "interpolation_mode": mode})
    x4 = data((2, 3, 8, 9), "float16")
    cpu_result, gpu_result = both("resample", x4, scales=[1, 1, 1.5, 0.5], interpolation_mode="nearest_neighbor")
    assert np.array_equal(cpu_result, gpu_result)


@pytest.mark.parametrize("dtype", DTYPES)
def test_value_scale_2d_same_bits(dtype):
    cpu_result, gpu_result = both("value_scale_2d", data((2, 3, 31, 17), dtype), scale=0.37, bias=[0.5, -1, 2])
    assert np.array_equal(cpu_result, gpu_result)


@pytest.mark.parametrize("shape, axes, scaled, by_rows", [
    ((2, 8, 16, 16), [2, 3], True, True), ((3, 5, 7), [2], False, True), ((2, 4, 100, 128), [2, 3], True, True),
    ((2, 8, 6, 6), [1, 2, 3], False, True), ((2, 8, 6, 6), [1, 2, 3], True, False),
    ((2, 8, 6, 6), [0, 2, 3], False, False)])
def test_mean_variance_normalization_one_block_per_row(shape, axes, scaled, by_rows, monkeypatch):
    """Trailing axes run the one-block-per-row kernel (a row past shared memory: the long-row kernels) with Scale
    and Bias one value a row or absent; axes that do not trail or a Scale that varies within a row take the
    three-pass path; both within the tolerance of the CPU's result."""
    from dmlcli.operators.normalization import entries as normalization

    taken = []
    original = normalization._normalise_rows
    monkeypatch.setattr(normalization, "_normalise_rows",
                        lambda *args: taken.append(original(*args)) or taken[-1])
    channel = (1, shape[1]) + (1,) * (len(shape) - 2)
    inputs = [data(shape, "float32"), data(channel, "float32", 1) if scaled else None,
              data(channel, "float32", 2) if scaled else None]
    for normalize_variance in (True, False):
        assert_within("mean_variance_normalization1", inputs, {"axes": axes, "normalize_variance": normalize_variance},
                      f"{shape} {axes}")
    assert taken and all((result is not None) == by_rows for result in taken), (shape, axes)


@pytest.mark.parametrize("shape, dtype", [
    ((2, 3, 130, 130), "float32"), ((1, 2, 129, 127), "float32"), ((2, 2, 200, 300), "float32"),
    ((1, 3, 128, 128), "float16"), ((3, 40000), "float32")])
def test_mean_variance_normalization_long_rows(shape, dtype, monkeypatch):
    """Rows past MVN_STAGE_BYTES run the two long-row kernels (chunks of MVN_CHUNK elements, FLOAT64 partial sums
    about the row's first element): within the CPU's tolerance, with and without NormalizeVariance, Scale and
    Bias, rows of a multiple of 4 elements (float4) and not (a mean far from zero: the next test)."""
    from dmlcli.operators.normalization import entries as normalization

    taken = []
    original = normalization._normalise_long_rows
    monkeypatch.setattr(normalization, "_normalise_long_rows", lambda *args: taken.append(1) or original(*args))
    x = data(shape, dtype)
    rows = (1,) * len(shape)
    per_row = shape[:2] + (1,) * (len(shape) - 2) if len(shape) > 2 else (shape[0], 1)
    axes = list(range(2, len(shape))) if len(shape) > 2 else [1]
    for scaled in (False, True):
        inputs = [x, data(per_row, dtype, 1) if scaled else None, data(rows, dtype, 2) if scaled else None]
        for normalize_variance in (True, False):
            assert_within("mean_variance_normalization1", inputs,
                          {"axes": axes, "normalize_variance": normalize_variance}, f"{shape} {scaled}")
    assert len(taken) == 4


def test_mean_variance_normalization_long_rows_far_mean():
    """A mean far from zero against the spread (1000 + N(0, 1)): the long-row kernels' partial sums about the row's
    first element keep the variance; the result is the FLOAT64 formula's within what rounding x to FLOAT32 allows,
    and the CPU's within the sum bound (the mean's rounding error, N u mean|x|, stays in x - mean)."""
    x = (data((2, 2, 200, 300), "float32") + 1000.0).astype(np.float32)
    got = api.run("mean_variance_normalization1", x, axes=[2, 3], backend="gpu")
    wide = x.astype(np.float64)
    mean = wide.mean(axis=(2, 3), keepdims=True)
    expected = (wide - mean) / np.sqrt(((wide - mean) ** 2).mean(axis=(2, 3), keepdims=True) + 1e-5)
    assert np.abs(got - expected).max() < 1e-3
    assert_within("mean_variance_normalization1", [x, None, None], {"axes": [2, 3]}, "a mean far from zero")


# ---------------------------------------------------------------- MEAN_VARIANCE_NORMALIZATION2, RESAMPLE2, RESAMPLE3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("use_mean, use_variance", [(True, True), (False, True), (True, False), (False, False)])
@pytest.mark.parametrize("shape, axes", [((2, 3, 4, 5), [2, 3]), ((4, 64, 32, 32), [1, 2, 3]), ((3, 40, 5), [0, 2]),
                                         ((2, 3, 130, 130), [2, 3])])
def test_mean_variance_normalization2(dtype, use_mean, use_variance, shape, axes):
    """Every path of the GPU's normalisation (one block per row, long rows, the three-pass fallback for axes that do
    not trail) with UseMean and UseVariance: within the tolerance of the CPU's result."""
    channel = tuple(1 if axis in axes else size for axis, size in enumerate(shape))
    assert_within("mean_variance_normalization2", [data(shape, dtype), data(channel, dtype, 1)],
                  {"axes": axes, "use_mean": use_mean, "use_variance": use_variance}, f"{shape} {axes}")


def test_mean_variance_normalization2_rms_far_from_zero_on_long_rows():
    """UseMean FALSE on the long-row kernels: the partial sums are taken about 0 (the mean of the squares, not the
    variance), so an input far from zero normalises to about 1, as the formula says."""
    x = (data((1, 2, 200, 300), "float32") + 1000.0).astype(np.float32)
    got = api.run("mean_variance_normalization2", x, axes=[2, 3], use_mean=False, backend="gpu")
    wide = x.astype(np.float64)
    expected = wide / np.sqrt((wide ** 2).mean(axis=(2, 3), keepdims=True) + 1e-5)
    assert np.abs(got - expected).max() < 1e-5


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", ["increasing", "decreasing"])
def test_resample2_nearest_same_bits(dtype, direction):
    x = data((2, 3, 19, 23), dtype)
    options = {"scales": [1, 2, 0.5, 1.75], "input_pixel_offsets": [0.5, 0, 0.25, 1],
               "output_pixel_offsets": [-0.5, 0, 0, -0.5], "rounding_direction": direction}
    cpu_result, gpu_result = both("resample2", x, **options)
    assert np.array_equal(cpu_result, gpu_result)
    assert_within("resample2", [x], {**options, "interpolation_mode": "linear"})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scales", [[1, 1, 0.5, 0.5], [1, 1, 0.3, 1.5], [0.75, 1, 0.45, 0.6]])
def test_resample3_antialiased(dtype, scales):
    assert_within("resample3", [data((4, 3, 37, 41), dtype)],
                  {"scales": scales, "interpolation_mode": "linear", "antialiased": True}, f"{scales}")
