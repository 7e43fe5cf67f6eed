"""The convolution family on the GPU: CPU and GPU results side by side. Skipped without CuPy or a usable GPU.

CONVOLUTION runs the same loop over filter taps on CuPy (each tap one cuBLAS GEMM through cupy.matmul), so its
float results may differ from NumPy's BLAS in the order of the additions: they are compared within the operator's
rule for the call, whose sum bound is 2 (K u + u_out) times the convolution of |x| and |w| (+ |bias|).
CONVOLUTION_INTEGER and QUANTIZED_LINEAR_CONVOLUTION are exact on both (float64 sums of integers, then fixed float32 steps): bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import dmlcli
from dmlcli.checking.comparison import compare_arrays, rule_for

cupy = pytest.importorskip("cupy")


FLOAT_CALLS = [
    ((2, 4, 9, 9), (6, 2, 3, 3), {"group_count": 2, "strides": [2, 1], "start_padding": [1, 1]}),
    ((1, 3, 17), (5, 3, 4), {"dilations": [2], "end_padding": [3]}),
    ((1, 2, 5, 6, 7), (2, 2, 2, 3, 2), {"mode": "convolution", "output_padding": [1, 0, 1]}),
    ((2, 4, 5, 5), (4, 3, 3, 3), {"direction": "backward", "strides": [2, 2], "start_padding": [1, 0],
                                  "output_padding": [1, 1]}),
    ((1, 6, 4, 4, 4), (6, 1, 2, 2, 2), {"direction": "backward", "group_count": 3, "dilations": [1, 2, 1]}),
    ((4, 32, 28, 28), (32, 32, 3, 3), {"start_padding": [1, 1], "end_padding": [1, 1]}),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("x_shape, w_shape, parameters", FLOAT_CALLS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_convolution_gpu_matches_cpu(gpu_backend, dtype, x_shape, w_shape, parameters, with_bias):
    rng = np.random.default_rng(sum(x_shape))
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    backward = parameters.get("direction") == "backward"
    channels = w_shape[1] * parameters.get("group_count", 1) if backward else w_shape[0]
    extra = [rng.standard_normal((1, channels) + (1,) * (len(x_shape) - 2)).astype(dtype)] if with_bias else []
    on_cpu = dmlcli.run("convolution", x, w, *extra, backend="cpu", **parameters)
    on_gpu = dmlcli.run("convolution", x, w, *extra, backend=gpu_backend, **parameters)
    assert on_cpu.dtype == on_gpu.dtype == np.dtype(dtype) and on_cpu.shape == on_gpu.shape
    call = dmlcli.validate("convolution", x, w, *extra, **parameters).call
    rule = rule_for(call.operator, on_cpu.dtype, call=call, inputs=[x, w, *extra])
    comparison = compare_arrays(on_gpu, on_cpu, rule)
    assert comparison.passed, comparison.text()


@pytest.mark.parametrize("activation, fields", [("relu", {}), ("elu", {"fused_alpha": 0.5}), ("sigmoid", {})])
def test_fused_activation_on_the_gpu(gpu_backend, activation, fields):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    on_cpu = dmlcli.run("convolution", x, w, backend="cpu", fused_activation=activation, **fields)
    on_gpu = dmlcli.run("convolution", x, w, backend=gpu_backend, fused_activation=activation, **fields)
    call = dmlcli.validate("convolution", x, w, fused_activation=activation, **fields).call
    comparison = compare_arrays(on_gpu, on_cpu, rule_for(call.operator, on_cpu.dtype, call=call, inputs=[x, w]))
    assert comparison.passed, comparison.text()
    if activation == "relu":
        assert (on_gpu >= 0).all() and (on_gpu == 0).any()


@pytest.mark.parametrize("x_dtype, w_dtype", [("uint8", "int8"), ("int8", "uint8"), ("uint8", "uint8")])
def test_integer_convolutions_are_bit_identical(gpu_backend, x_dtype, w_dtype):
    rng = np.random.default_rng(9)
    info_x, info_w = np.iinfo(x_dtype), np.iinfo(w_dtype)
    x = rng.integers(info_x.min, info_x.max + 1, (2, 8, 11, 11)).astype(x_dtype)
    w = rng.integers(info_w.min, info_w.max + 1, (6, 4, 3, 3)).astype(w_dtype)
    xzp = np.array(3, x_dtype).reshape(1, 1, 1, 1)
    wzp = rng.integers(0, 20, (1, 6, 1, 1)).astype(w_dtype)
    parameters = {"group_count": 2, "strides": [2, 1], "start_padding": [1, 2]}
    on_cpu = dmlcli.run("convolution_integer", x, xzp, w, wzp, backend="cpu", **parameters)
    on_gpu = dmlcli.run("convolution_integer", x, xzp, w, wzp, backend=gpu_backend, **parameters)
    assert on_cpu.dtype == on_gpu.dtype == np.int32 and np.array_equal(on_cpu, on_gpu)
    one = np.ones((1, 1, 1, 1), np.float32)
    scales = [x, one * 0.05, xzp, w, rng.uniform(0.001, 0.02, (1, 6, 1, 1)).astype(np.float32), wzp,
              rng.integers(-500, 500, (1, 6, 1, 1)).astype(np.int32), one * 0.3,
              np.array(7, x_dtype).reshape(1, 1, 1, 1)]
    on_cpu = dmlcli.run("quantized_linear_convolution", *scales, backend="cpu", **parameters)
    on_gpu = dmlcli.run("quantized_linear_convolution", *scales, backend=gpu_backend, **parameters)
    assert on_cpu.dtype == on_gpu.dtype == np.dtype(x_dtype) and np.array_equal(on_cpu, on_gpu)


def test_nothing_goes_through_the_host_between_steps(gpu_backend, monkeypatch):
    # The kernel runs on device arrays from start to end: copying to the host would call cupy.asnumpy (or
    # ndarray.get, which asnumpy uses); both are made to fail while it runs.
    from dmlcli.operators import find_operator
    from dmlcli.calls.validation import TensorInfo
    from dmlcli.data_types import FLOAT32

    op = find_operator("convolution")
    x = cupy.asarray(np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32))
    w = cupy.asarray(np.ones((2, 2, 3, 3), np.float32))
    params = {p.field: p.default for p in op.parameters}
    params["FusedActivation"] = op.options["fused_activation"].parse({"fused_activation": "relu"}, {})

    def refuse(*args, **kwargs):
        raise AssertionError("a host copy between steps")

    monkeypatch.setattr(cupy, "asnumpy", refuse)
    out = TensorInfo("OutputTensor", FLOAT32, (1, 2, 4, 4))
    (result,) = gpu_backend.execute_shaped_device(op, [x, w, None], [out], params)
    monkeypatch.undo()
    assert isinstance(result, cupy.ndarray) and result.shape == (1, 2, 4, 4)
    assert np.all(cupy.asnumpy(result) >= 0)
