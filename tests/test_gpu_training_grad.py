"""The training family's pooling, resampling, slicing and ROI align gradients on the GPU: the same xp kernels on
CuPy as on NumPy, adding the same terms in the same order (no atomics), so the GPU gives the CPU's bits; only
ROI_ALIGN_GRAD's corner gradient, a float64 reduction in CuPy's order rounded once, is compared within the
operator's tolerance. They need CuPy and a CUDA device; test_gpu_training_grad_autograd.py compares the GPU's
gradients with PyTorch's autograd.
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


def data(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def with_specials(array):
    """NaN, infinities and -0.0 among the values (they must travel the same way on both backends)."""
    array = array.copy()
    flat = array.reshape(-1)
    flat[::17] = np.nan
    flat[5::23] = np.inf
    flat[7::29] = -0.0
    return array


ROIS = np.array([[0.7, 1.3, 20.6, 14.1], [25.2, 13.9, 1.4, 0.6], [-3.6, -2.3, 12.2, 36.4], [8.3, 8.1, 8.3, 9.9],
                 [1.0, 1.0, 30.0, 30.0]], np.float32)
BATCHES = np.array([0, 1, 1, 0, 3], np.uint32)

CASES = [
    ("average_pooling_grad", [data((4, 16, 16, 16))], dict(window_size=[3, 3], strides=[2, 2], start_padding=[1, 1],
                                                            end_padding=[1, 1], output_shape=(4, 16, 32, 32))),
    ("average_pooling_grad", [with_specials(data((2, 3, 4, 5, 6), "float16"))],
     dict(window_size=[2, 3, 2], strides=[1, 1, 2], include_padding=True, start_padding=[0, 1, 0],
          end_padding=[1, 1, 1], output_shape=(2, 3, 4, 5, 11))),
    ("max_pooling_grad", [data((4, 16, 32, 32)), data((4, 16, 16, 16), seed=1)],
     dict(window_size=[3, 3], strides=[2, 2], start_padding=[1, 1], end_padding=[0, 0])),
    ("max_pooling_grad", [np.round(data((2, 3, 9, 9), "float16") * 2), with_specials(data((2, 3, 4, 7), "float16"))],
     dict(window_size=[2, 3], strides=[2, 1], dilations=[2, 1], start_padding=[0, 0], end_padding=[0, 0])),
    ("resample_grad", [data((2, 8, 64, 48))], dict(interpolation_mode="linear", output_shape=(2, 8, 32, 20))),
    ("resample_grad", [with_specials(data((1, 3, 7, 9), "float16"))],
     dict(interpolation_mode="nearest_neighbor", scales=[1, 1, 0.8, 2.5], output_shape=(1, 3, 9, 4))),
    ("resample_grad1", [data((5, 40, 33))], dict(interpolation_mode="linear", scales=[1.0, 2.5, 0.7],
                                                 input_pixel_offsets=[0, 0.5, 0.25], output_pixel_offsets=[0, -0.5, 1],
                                                 output_shape=(5, 16, 40))),
    ("resample_grad1", [data((3, 6, 12))], dict(interpolation_mode="nearest_neighbor", rounding_direction="increasing",
                                                scales=[1, 1.5, 3], output_shape=(3, 4, 4))),
    ("slice_grad", [with_specials(data((3, 5, 7, 2)))],
     dict(input_window_offsets=[1, 0, 2, 0], input_window_sizes=[5, 9, 13, 2], input_window_strides=[2, -2, 2, -1],
          output_shape=(7, 11, 16, 3))),
    ("slice_grad", [np.arange(120, dtype=np.int16).reshape(2, 3, 4, 5)],
     dict(input_window_strides=[1, -1, 2, 1], output_shape=(2, 3, 8, 6))),
    ("roi_align_grad", [data((4, 8, 32, 32)), data((5, 8, 7, 7), seed=1), ROIS, BATCHES], {}),
    ("roi_align_grad", [data((4, 8, 32, 32)), data((5, 8, 7, 7), seed=1), ROIS, BATCHES],
     dict(reduction_function="max", minimum_samples_per_output=2, maximum_samples_per_output=2, spatial_scale_x=0.8,
          align_regions_to_corners=True)),
    ("roi_align_grad", [None, data((5, 8, 5, 3), "float16", seed=2), ROIS.astype(np.float16), BATCHES],
     dict(interpolation_mode="nearest_neighbor", input_pixel_offset=0, output_pixel_offset=0,
          output_shape=(4, 8, 32, 32))),
]


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("op, arrays, options", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_the_gpu_gives_the_cpu_result(op, arrays, options):
    cpu = _outputs(api.run(op, *arrays, backend="cpu", **options))
    gpu = _outputs(api.run(op, *arrays, backend="gpu", **options))
    verdict = api.validate(op, *arrays, **options)
    assert len(cpu) == len(gpu) == len(verdict.call.outputs)
    for output, (tensor, on_cpu, on_gpu) in enumerate(zip(verdict.call.outputs, cpu, gpu)):
        assert on_cpu.dtype == on_gpu.dtype and on_cpu.shape == on_gpu.shape, tensor.name
        if tensor.name != "OutputROIGradientTensor":
            # Every bit but a NaN's payload: IEEE-754 does not fix it, and the GPU's arithmetic gives the canonical
            # NaN where the CPU's keeps an operand's (tests/test_gpu.py's parity rule).
            assert np.array_equal(np.isnan(on_cpu), np.isnan(on_gpu)), f"{tensor.name}: NaN in other places"
            numbers = ~np.isnan(on_cpu)
            assert on_cpu[numbers].tobytes() == on_gpu[numbers].tobytes(), f"{tensor.name}: the GPU's bits differ"
            continue
        rule = rule_for(verdict.call.operator, on_cpu.dtype, call=verdict.call, parameters=verdict.call.parameters,
                        inputs=arrays, output=output)
        assert np.array_equal(np.isnan(on_cpu), np.isnan(on_gpu))
        comparison = compare_arrays(on_gpu, on_cpu, rule)
        assert comparison.passed, (tensor.name, comparison.text())
