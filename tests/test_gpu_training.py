"""The training family on the GPU: the CPU's results (ADAM_OPTIMIZER bit for bit, the FLOAT64 normalization
kernels within the operator's tolerance: CuPy's sums add in another order), and each gradient against PyTorch's
autograd where the formulas agree (torch.nn.functional.batch_norm and local_response_norm, torch.optim.Adam's step
with eps 0). Needs CuPy and a CUDA device; the PyTorch tests need torch too.
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


def data(shape, dtype="float32", seed=0, low=None):
    values = np.random.default_rng(seed).standard_normal(shape)
    return (np.abs(values) + low if low is not None else values).astype(dtype)


def assert_within(op, got, want, arrays, options, context="", output=0):
    """`got` within the operator's rule for the call of `want`, its output at position `output` (ULP, the absolute
    floor, or the sum bound of the call's inputs)."""
    assert got.dtype == want.dtype and got.shape == want.shape, context
    verdict = api.validate(op, *arrays, **options)
    rule = rule_for(verdict.call.operator, want.dtype, call=verdict.call, parameters=verdict.call.parameters,
                    inputs=arrays, output=output)
    assert np.array_equal(np.isnan(got), np.isnan(want)), context
    comparison = compare_arrays(got, want, rule)
    assert comparison.passed, f"{context}: {comparison.text()}"


def both(op, arrays, options):
    return (api.run(op, *arrays, backend="cpu", **options), api.run(op, *arrays, backend="gpu", **options))


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


SHAPES = [((2, 3, 4, 5), (1, 3, 1, 1)), ((8, 16, 33, 7), (1, 16, 1, 1)), ((64, 300), (1, 300)),
          ((3, 4, 5), (1, 4, 5))]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape, per_channel", SHAPES)
def test_normalization_training_operators_match_the_cpu(shape, per_channel, dtype):
    x, dy = data(shape, dtype, 1), data(shape, dtype, 2)
    scale, bias = data(per_channel, dtype, 3), data(per_channel, dtype, 4)
    _, mean, variance = api.run("batch_normalization_training", x, scale, bias)
    calls = [("batch_normalization_training", [x, scale, bias, dy], {"fused_activation": "relu"}),
             ("batch_normalization_grad", [x, dy, mean, variance, scale], {"epsilon": 1e-3}),
             ("batch_normalization_training_grad", [x, dy, mean, variance, scale], {})]
    for op, arrays, options in calls:
        cpu_results, gpu_results = (_as_tuple(r) for r in both(op, arrays, options))
        for output, (cpu_out, gpu_out) in enumerate(zip(cpu_results, gpu_results)):
            assert_within(op, gpu_out, cpu_out, arrays, options, f"{op} {shape}", output)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("cross_channel, size", [(True, 5), (True, 2), (False, 3)])
def test_lrn_grad_matches_the_cpu(dtype, cross_channel, size):
    x, dy = data((2, 7, 9, 11), dtype, 5), data((2, 7, 9, 11), dtype, 6)
    options = {"cross_channel": cross_channel, "local_size": size, "alpha": 0.5, "beta": 0.75, "bias": 1.5}
    cpu_out, gpu_out = both("local_response_normalization_grad", [x, dy], options)
    assert_within("local_response_normalization_grad", gpu_out, cpu_out, [x, dy], options)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("step", [1, 7, 1000])
def test_adam_gives_the_cpus_bits(dtype, step):
    shape = (4, 8, 16, 33)
    x, m, g = data(shape, dtype, 7), data(shape, dtype, 8), data(shape, dtype, 9)
    v = data(shape, dtype, 10, low=0.0)
    tiny = np.finfo(dtype).smallest_subnormal
    m.reshape(-1)[::5] = tiny * 3  # subnormal moments: CuPy's own float32 arithmetic would flush them
    g.reshape(-1)[::7] = -0.0
    arrays = [x, m, v, g, np.array(step, np.uint32).reshape(1, 1, 1, 1)]
    cpu_results, gpu_results = both("adam_optimizer", arrays, {"beta1": 0.5, "epsilon": 1e-3})
    bits = np.uint32 if dtype == "float32" else np.uint16
    for cpu_out, gpu_out in zip(cpu_results, gpu_results):
        assert np.array_equal(cpu_out.view(bits), gpu_out.view(bits))


# ---------------------------------------------------------------- PyTorch's autograd

def _torch():
    torch = pytest.importorskip("torch")
    return torch, ("cuda" if torch.cuda.is_available() else "cpu")


def _grads(torch, device, forward, dy, *tensors):
    """d(sum(dy * forward(*tensors))) / d tensors, in float64."""
    leaves = [torch.tensor(np.asarray(t, np.float64), device=device, requires_grad=True) for t in tensors]
    out = forward(*leaves)
    out.backward(torch.tensor(np.asarray(dy, np.float64), device=device))
    return [leaf.grad.cpu().numpy() for leaf in leaves]


def _close(op, got, want, arrays, options, context, output=0):
    assert_within(op, got, want.astype(got.dtype), arrays, options, context, output)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-4, atol=1e-4, err_msg=context)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (16, 8)])
def test_batch_normalization_training_grad_is_torchs(shape):
    torch, device = _torch()
    channels = (1, shape[1]) + (1,) * (len(shape) - 2)
    x, dy, scale, bias = data(shape, seed=11), data(shape, seed=12), data(channels, seed=13), data(channels, seed=14)
    eps = float(np.float32(1e-3))
    _, mean, variance = api.run("batch_normalization_training", x, scale, bias, epsilon=1e-3, backend="gpu")
    arrays = [x, dy, mean, variance, scale]
    got = api.run("batch_normalization_training_grad", *arrays, epsilon=1e-3, backend="gpu")

    def forward(x_, w_, b_):
        return torch.nn.functional.batch_norm(x_, None, None, w_, b_, training=True, eps=eps)

    want = _grads(torch, device, forward, dy, x, scale.reshape(-1), bias.reshape(-1))
    for output, (name, out, expected) in enumerate(zip(("dx", "dscale", "dbias"), got, want)):
        _close("batch_normalization_training_grad", out, expected.reshape(out.shape), arrays, {"epsilon": 1e-3}, name,
               output)


def test_batch_normalization_grad_is_torchs_inference_gradient():
    torch, device = _torch()
    shape, channels = (4, 3, 5, 6), (1, 3, 1, 1)
    x, dy, scale, bias = data(shape, seed=21), data(shape, seed=22), data(channels, seed=23), data(channels, seed=24)
    mean, variance = data(channels, seed=25), data(channels, seed=26, low=0.5)
    arrays = [x, dy, mean, variance, scale]
    got = api.run("batch_normalization_grad", *arrays, epsilon=1e-3, backend="gpu")
    running_mean = torch.tensor(mean.reshape(-1).astype(np.float64), device=device)
    running_var = torch.tensor(variance.reshape(-1).astype(np.float64), device=device)
    eps = float(np.float32(1e-3))

    def forward(x_, w_, b_):
        return torch.nn.functional.batch_norm(x_, running_mean, running_var, w_, b_, training=False, eps=eps)

    want = _grads(torch, device, forward, dy, x, scale.reshape(-1), bias.reshape(-1))
    for output, (name, out, expected) in enumerate(zip(("dx", "dscale", "dbias"), got, want)):
        _close("batch_normalization_grad", out, expected.reshape(out.shape), arrays, {"epsilon": 1e-3}, name, output)


@pytest.mark.parametrize("size", [1, 3, 5])  # odd sizes: torch's window is then DirectML's (even ones differ)
def test_lrn_grad_is_torchs(size):
    torch, device = _torch()
    x, dy = data((2, 7, 4, 5), seed=31), data((2, 7, 4, 5), seed=32)
    options = {"cross_channel": True, "local_size": size, "alpha": 0.5, "beta": 0.75, "bias": 1.5}
    got = api.run("local_response_normalization_grad", x, dy, backend="gpu", **options)
    alpha, beta, k = (float(np.float32(options[name])) for name in ("alpha", "beta", "bias"))

    def forward(x_):
        return torch.nn.functional.local_response_norm(x_, size, alpha=alpha, beta=beta, k=k)

    (want,) = _grads(torch, device, forward, dy, x)
    _close("local_response_normalization_grad", got, want, [x, dy], options, f"size {size}")


@pytest.mark.parametrize("step", [1, 2, 50])
def test_adam_is_torchs_step_without_epsilon(step):
    """torch.optim.Adam adds eps to sqrt(V) / sqrt(1 - Beta2^T), DirectML to sqrt(V): with eps 0 they agree."""
    torch, device = _torch()
    shape = (1, 2, 8, 9)
    x, m, g = data(shape, seed=41), data(shape, seed=42) * 0.1, data(shape, seed=43)
    v = data(shape, seed=44, low=0.1) * np.float32(0.01)
    options = {"learning_rate": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 0.0}
    arrays = [x, m, v, g, np.array(step, np.uint32).reshape(1, 1, 1, 1)]
    got = api.run("adam_optimizer", *arrays, backend="gpu", **options)
    parameter = torch.nn.Parameter(torch.tensor(x.astype(np.float64), device=device))
    optimizer = torch.optim.Adam([parameter], lr=float(np.float32(0.01)), betas=(float(np.float32(0.9)),
                                                                                  float(np.float32(0.999))), eps=0.0)
    optimizer.state[parameter] = {"step": torch.tensor(float(step - 1)),
                                  "exp_avg": torch.tensor(m.astype(np.float64), device=device),
                                  "exp_avg_sq": torch.tensor(v.astype(np.float64), device=device)}
    parameter.grad = torch.tensor(g.astype(np.float64), device=device)
    optimizer.step()
    state = optimizer.state[parameter]
    want = (parameter.detach().cpu().numpy(), state["exp_avg"].cpu().numpy(), state["exp_avg_sq"].cpu().numpy())
    for output, (name, out, expected) in enumerate(zip(("x", "m", "v"), got, want)):
        _close("adam_optimizer", out, expected, arrays, options, name, output)
