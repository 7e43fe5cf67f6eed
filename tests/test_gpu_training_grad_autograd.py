"""The GPU's pooling, resampling and ROI align gradients against PyTorch's autograd (float64 on the CUDA device, so
that the reference carries no rounding of its own worth counting): avg_pool2d, max_pool2d, interpolate
(nearest, nearest-exact, linear, bilinear), torchvision's roi_align (aligned=True) and, for ROI_ALIGN_GRAD's corner
gradient, a differentiable ROI align written here in PyTorch. Each FLOAT32 (FLOAT16) result is checked within its
roundings x 2^-24 x the sum of its terms' magnitudes (the gradient of |incoming gradient|: the weights are not
negative). They need CuPy, a CUDA device and PyTorch (torchvision for roi_align); without them they skip.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dmlcli
from dmlcli.errors import BackendUnavailableError
from test_ops_training_grad import assert_sum_close  # noqa: E402 - tests/ is on the path

torch = pytest.importorskip("torch")
functional = torch.nn.functional


@pytest.fixture(scope="module")
def where():
    """dmlcli's backend and PyTorch's device: the GPU and CUDA."""
    pytest.importorskip("cupy")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    from dmlcli.backends import gpu

    try:
        gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")
    return "gpu", "cuda"


def autograd(forward, x, incoming, device):
    """d(sum(forward(x) * incoming)) / dx in float64 on `device`, as a NumPy array."""
    tensor = torch.tensor(x.astype(np.float64), device=device, requires_grad=True)
    forward(tensor).backward(torch.tensor(incoming.astype(np.float64), device=device))
    return tensor.grad.cpu().numpy()


def magnitude(op, arrays, options, index=None):
    """The sum of the magnitudes of each element's terms: the gradient (on the CPU) of |incoming gradient|."""
    found = dmlcli.run(op, *arrays, backend="cpu", **options)
    found = found[0] if isinstance(found, tuple) else found
    return np.abs(found.astype(np.float64))


def check_average_pooling(where, shape, window, stride, padding, include, dtype="float32", seed=0):
    backend, device = where
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    out = [(n + 2 * padding - window) // stride + 1 for n in shape[2:]]
    incoming = rng.standard_normal(tuple(shape[:2]) + tuple(out)).astype(dtype)
    options = dict(window_size=[window] * 2, strides=[stride] * 2, start_padding=[padding] * 2,
                   end_padding=[padding] * 2, include_padding=include, output_shape=shape)
    got = dmlcli.run("average_pooling_grad", incoming, backend=backend, **options)
    reference = autograd(lambda t: functional.avg_pool2d(t, window, stride, padding, count_include_pad=include),
                         x, incoming, device)
    assert_sum_close(got, reference, magnitude("average_pooling_grad", [np.abs(incoming)], options),
                     window * window + 2, f"avg_pool2d {window} {stride} {padding} {include}")


def check_max_pooling(where, shape, window, stride, padding, dilation, dtype="float32", seed=0):
    backend, device = where
    rng = np.random.default_rng(seed)
    x = (rng.permutation(math.prod(shape)) / 16).astype(dtype).reshape(shape)  # no ties: PyTorch's are its own
    extent = (window - 1) * dilation + 1
    out = [(n + 2 * padding - extent) // stride + 1 for n in shape[2:]]
    incoming = rng.standard_normal(tuple(shape[:2]) + tuple(out)).astype(dtype)
    options = dict(window_size=[window] * 2, strides=[stride] * 2, start_padding=[padding] * 2,
                   end_padding=[padding] * 2, dilations=[dilation] * 2)
    got = dmlcli.run("max_pooling_grad", x, incoming, backend=backend, **options)
    reference = autograd(lambda t: functional.max_pool2d(t, window, stride, padding, dilation), x, incoming, device)
    assert_sum_close(got, reference, magnitude("max_pooling_grad", [x, np.abs(incoming)], options),
                     window * window, f"max_pool2d {window} {stride} {padding} {dilation}")


# PyTorch's interpolate modes and the DirectML call whose gradient is theirs (scale factors of 2 and 0.5: both
# sides compute the coordinates exactly). nearest: floor(o / s), RESAMPLE2's DECREASING with offsets 0;
# nearest-exact: floor((o + 0.5) / s), RESAMPLE1's nearest at pixel centres; (bi)linear with align_corners=False:
# pixel centres, clamped at 0 (PyTorch) and at the last element (both read it alone there).
INTERPOLATIONS = {
    "nearest": ("resample_grad1", dict(interpolation_mode="nearest_neighbor", rounding_direction="decreasing"), 0.0),
    "nearest-exact": ("resample_grad", dict(interpolation_mode="nearest_neighbor"), 0.5),
    "bilinear": ("resample_grad", dict(interpolation_mode="linear"), 0.5),
    "linear": ("resample_grad1", dict(interpolation_mode="linear"), 0.5),
}


def check_interpolate(where, mode, shape, scale, dtype="float32", seed=0):
    backend, device = where
    op, options, centre = INTERPOLATIONS[mode]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    out_shape = tuple(shape[:2]) + tuple(int(n * scale) for n in shape[2:])
    incoming = rng.standard_normal(out_shape).astype(dtype)
    rank = len(shape)
    options = dict(options, scales=[1, 1] + [scale] * (rank - 2), input_pixel_offsets=[0.5] * 2 + [centre] * (rank - 2),
                   output_pixel_offsets=[-0.5] * 2 + [-centre] * (rank - 2), output_shape=shape)
    got = dmlcli.run(op, incoming, backend=backend, **options)
    keywords = {} if mode.startswith("nearest") else {"align_corners": False}
    reference = autograd(lambda t: functional.interpolate(t, scale_factor=scale, mode=mode, **keywords), x, incoming,
                         device)
    assert_sum_close(got, reference, magnitude(op, [np.abs(incoming)], options), 12 * (rank - 2),
                     f"interpolate {mode} {scale}")


def _torchvision_ops():
    try:
        from torchvision import ops
    except Exception as why:  # noqa: BLE001 - not installed, or built for another PyTorch
        pytest.skip(f"no usable torchvision: {why}")
    return ops


ROIS = np.array([[0.7, 1.3, 20.6, 14.1], [25.2, 13.9, 1.4, 0.6], [-3.6, -2.3, 12.2, 36.4], [8.3, 8.1, 8.3, 9.9]],
                np.float32)
BATCHES = np.array([0, 1, 1, 0], np.uint32)


def check_roi_align_input_gradient(where, samples, scale, dtype="float32", seed=0):
    """torchvision's roi_align with aligned=True is ROI_ALIGN1 with pixel offsets 0.5 and -0.5, AVERAGE, LINEAR and a
    fixed sample count (sampling_ratio)."""
    backend, device = where
    ops = _torchvision_ops()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 24, 32)).astype(dtype)
    incoming = rng.standard_normal((len(ROIS), 3, 5, 4)).astype(dtype)
    options = dict(spatial_scale_x=scale, spatial_scale_y=scale, minimum_samples_per_output=samples,
                   maximum_samples_per_output=samples)
    got = dmlcli.run("roi_align_grad", None, incoming, ROIS.astype(dtype), BATCHES, output_shape=x.shape,
                     backend=backend, **options)[0]
    boxes = torch.tensor(np.concatenate([BATCHES[:, None], ROIS], axis=1).astype(np.float64), device=device)
    reference = autograd(lambda t: ops.roi_align(t, boxes, (5, 4), spatial_scale=scale, sampling_ratio=samples,
                                                 aligned=True), x, incoming, device)
    share = np.abs(incoming.astype(np.float64)).max()
    terms = len(ROIS) * samples * samples * 4
    # dmlcli rounds the sample positions to FLOAT32 (below 40 here: weights off by up to 40 x 2^-24)
    total = magnitude("roi_align_grad", [None, np.abs(incoming), ROIS.astype(dtype), BATCHES],
                      dict(options, output_shape=x.shape)) + 40 * terms * share
    assert_sum_close(got, reference, total, terms + 4, f"roi_align {samples} {scale}")


def torch_roi_align(x, boxes, batches, out_hw, samples, scale, input_offset, output_offset):
    """ROI_ALIGN1 (AVERAGE, LINEAR, a fixed sample count) in PyTorch, differentiable in x and in the boxes: the clamp
    and the neighbours' choice carry no gradient, the positions and the weights do."""
    height, width = x.shape[2:]
    found = []
    for r in range(boxes.shape[0]):
        plane = x[int(batches[r])]
        axes = []
        for first, last, out_size, size in ((boxes[r, 1] * scale[1], boxes[r, 3] * scale[1], out_hw[0], height),
                                            (boxes[r, 0] * scale[0], boxes[r, 2] * scale[0], out_hw[1], width)):
            total = out_size * samples
            index = torch.arange(total, dtype=x.dtype, device=x.device)
            position = (index - output_offset) * (last - first) / total + first - input_offset
            inside = (position >= -1) & (position <= size)
            clamped = torch.clamp(position, min=0)
            low = torch.clamp(torch.floor(clamped).long(), max=size - 1)
            edge = low >= size - 1
            high = torch.where(edge, low, low + 1)
            weight = torch.where(edge, torch.zeros_like(clamped), clamped - low.to(x.dtype))
            axes.append((low, high, weight, inside))
        (ly, hy, wy, iy), (lx, hx, wx, ix) = axes
        wy, wx = wy[:, None], wx[None, :]
        value = ((1 - wy) * (1 - wx) * plane[:, ly][:, :, lx] + (1 - wy) * wx * plane[:, ly][:, :, hx]
                 + wy * (1 - wx) * plane[:, hy][:, :, lx] + wy * wx * plane[:, hy][:, :, hx])
        value = value * (iy[:, None] & ix[None, :]).to(x.dtype)
        found.append(value.reshape(x.shape[1], out_hw[0], samples, out_hw[1], samples).mean(dim=(2, 4)))
    return torch.stack(found)


def check_roi_corner_gradient(where, samples, scale, offsets, dtype="float32", seed=0):
    backend, device = where
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 24, 32)).astype(dtype)
    incoming = rng.standard_normal((len(ROIS), 3, 5, 4)).astype(dtype)
    options = dict(spatial_scale_x=scale[0], spatial_scale_y=scale[1], minimum_samples_per_output=samples,
                   maximum_samples_per_output=samples, input_pixel_offset=offsets[0], output_pixel_offset=offsets[1])
    gradient, corners = dmlcli.run("roi_align_grad", x, incoming, ROIS.astype(dtype), BATCHES, backend=backend,
                                   **options)
    boxes = torch.tensor(ROIS.astype(np.float64), device=device, requires_grad=True)
    image = torch.tensor(x.astype(np.float64), device=device, requires_grad=True)
    output = torch_roi_align(image, boxes, BATCHES, (5, 4), samples, scale, *offsets)
    output.backward(torch.tensor(incoming.astype(np.float64), device=device))
    reference_corners = boxes.grad.cpu().numpy()
    np.testing.assert_allclose(corners, reference_corners, rtol=2e-3 if dtype == "float16" else 1e-4,
                               atol=(2e-3 if dtype == "float16" else 1e-4) * (1 + np.abs(reference_corners).max()))
    share = np.abs(incoming.astype(np.float64)).max()
    terms = len(ROIS) * samples * samples * 4
    total = magnitude("roi_align_grad", [None, np.abs(incoming), ROIS.astype(dtype), BATCHES],
                      dict(options, output_shape=x.shape)) + 40 * terms * share
    assert_sum_close(gradient, image.grad.cpu().numpy(), total, terms + 4, f"roi corners {samples} {scale}")


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("window, stride, padding", [(2, 2, 0), (3, 1, 1), (3, 2, 1), (5, 3, 2)])
@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_average_pooling_grad_is_avg_pool2d_backward(where, window, stride, padding, include, dtype):
    check_average_pooling(where, (2, 4, 17, 12), window, stride, padding, include, dtype)


@pytest.mark.parametrize("window, stride, padding, dilation", [(2, 2, 0, 1), (3, 1, 1, 1), (3, 2, 1, 2),
                                                               (2, 1, 1, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_max_pooling_grad_is_max_pool2d_backward(where, window, stride, padding, dilation, dtype):
    check_max_pooling(where, (2, 3, 16, 13), window, stride, padding, dilation, dtype)


@pytest.mark.parametrize("mode", sorted(INTERPOLATIONS))
@pytest.mark.parametrize("scale", [2.0, 0.5])
def test_resample_grads_are_interpolate_backward(where, mode, scale):
    shape = (2, 3, 16) if mode == "linear" else (2, 3, 16, 12)
    check_interpolate(where, mode, shape, scale)


@pytest.mark.parametrize("samples, scale", [(1, 1.0), (2, 0.5), (3, 1.25)])
def test_roi_align_grad_is_torchvision_roi_align_backward(where, samples, scale):
    check_roi_align_input_gradient(where, samples, scale)


@pytest.mark.parametrize("samples, scale, offsets", [(1, (1.0, 1.0), (0.5, -0.5)), (2, (0.5, 0.75), (0.5, -0.5)),
                                                      (2, (1.0, 1.25), (0.0, 0.0))])
def test_roi_align_grad_corner_gradient_is_autograds(where, samples, scale, offsets):
    check_roi_corner_gradient(where, samples, scale, offsets)
