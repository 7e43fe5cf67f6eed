"""The matrix multiplication family on the GPU: the CPU's result against the GPU's.

GEMM runs through CuPy's matmul (cuBLAS sgemm, TF32 off unless the call allows it); it agrees with
the CPU's BLAS within GEMM's rule for the call: its ULP figure (2K ULP + Alpha/Beta terms), its floor, or each
element's sum bound 2 (K u + u_out) |A||B| (signed inputs that cancel); it is not bit-identical (the summation orders
differ). The
integer operators (MATRIX_MULTIPLY_INTEGER, QUANTIZED_LINEAR_MATRIX_MULTIPLY, MATRIX_MULTIPLY_INTEGER_TO_FLOAT
with 8- and 16-bit inputs) are bit-identical. A fused activation runs on the GPU as the activation's own kernel.
With --allow-tf32 (allow_tf32=True) FLOAT32 products run on TF32 tensor cores: 2-D and batched GEMMs and
CONVOLUTION's grouped products alike, within the TF32-wide rule, and cuBLAS's mode is restored after each call.
Skipped without CuPy or a CUDA device.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.checking.comparison import compare_arrays, rule_for
from dmlcli.cli import cli

F32, F16 = np.float32, np.float16


@pytest.fixture(scope="module")
def gpu(gpu_backend):
    """The backend's name, for `dmlcli.run(..., backend=gpu)`; a skip where no device can run it."""
    return "gpu"


def both(name, *arrays, **params):
    return dmlcli.run(name, *arrays, backend="cpu", **params), dmlcli.run(name, *arrays, backend="gpu", **params)


def _call(name, arrays, **params):
    from dmlcli.api import plan

    return plan(name, [(dmlcli.data_types.from_numpy(x.dtype), x.shape) for x in arrays], **params).call


def test_tf32_is_not_enabled(gpu):
    assert os.environ.get("CUPY_TF32", "0") == "0"


GEMM_SHAPES = [  # (A, B, C or None, parameters)
    ((64, 256), (256, 48), None, {}),
    ((256, 64), (48, 256), (64, 48), {"trans_a": "transpose", "trans_b": "transpose", "alpha": 0.5, "beta": 2.0}),
    ((2, 3, 33, 129), (2, 3, 129, 17), (1, 3, 1, 17), {"alpha": -1.0}),
    ((1, 1, 512, 1024), (1, 1, 1024, 512), None, {}),
]


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("a_shape, b_shape, c_shape, params", GEMM_SHAPES, ids=[str(s[0]) for s in GEMM_SHAPES])
def test_gemm_cpu_and_gpu_agree_within_the_rule(gpu, dtype, a_shape, b_shape, c_shape, params):
    rng = np.random.default_rng(11)
    arrays = [rng.uniform(-1, 1, s).astype(dtype) for s in (a_shape, b_shape, c_shape) if s is not None]
    cpu, gpu_result = both("gemm", *arrays, **params)
    call = _call("gemm", arrays, **params)
    rule = rule_for(call.operator, cpu.dtype, call=call, inputs=arrays)
    assert gpu_result.dtype == cpu.dtype and gpu_result.shape == cpu.shape
    comparison = compare_arrays(gpu_result, cpu, rule)
    assert comparison.passed, comparison.text()


@pytest.mark.parametrize("dtype", [F32, F16])
def test_gemm_signed_inputs_agree_within_the_dot_product_bound(gpu, dtype):
    rng = np.random.default_rng(12)
    a, b = rng.uniform(-1, 1, (2, 70, 300)).astype(dtype), rng.uniform(-1, 1, (2, 300, 40)).astype(dtype)
    cpu, gpu_result = both("gemm", a, b)
    rule = rule_for(dmlcli.find_operator("gemm"), cpu.dtype, call=_call("gemm", [a, b]), inputs=[a, b])
    comparison = compare_arrays(gpu_result, cpu, rule)
    assert comparison.passed, comparison.text()


@pytest.mark.parametrize("activation, fields", [("elu", {"fused_alpha": 0.5}), ("sigmoid", {}), ("relu", {}),
                                                ("gelu", {})])
def test_gemm_fused_activation_on_the_gpu(gpu, activation, fields):
    rng = np.random.default_rng(13)
    a, b = rng.uniform(0, 1, (20, 64)).astype(F32), rng.uniform(-1, 0.5, (64, 30)).astype(F32)
    cpu, gpu_result = both("gemm", a, b, fused_activation=activation, **fields)
    plain = dmlcli.run("gemm", a, b, backend="gpu")
    own = dmlcli.run(f"activation_{activation}", plain, backend="gpu",
                     **{k.removeprefix("fused_"): v for k, v in fields.items()})
    assert np.array_equal(gpu_result, own)  # the activation's own GPU kernel on the GPU's product
    # Within the rule for a fused call: the product's and the activation's figures, or the product's sum bound
    # carried through the activation's slope.
    call = _call("gemm", [a, b], fused_activation=activation, **fields)
    comparison = compare_arrays(gpu_result, cpu, rule_for(call.operator, cpu.dtype, call=call, inputs=[a, b]))
    assert comparison.passed, comparison.text()


def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)


@pytest.mark.parametrize("a_type, b_type", [(np.int8, np.int8), (np.uint8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("shape", [((5, 7), (7, 3)), ((2, 3, 40, 300), (2, 3, 300, 20))])
def test_matrix_multiply_integer_is_bit_identical(gpu, a_type, b_type, shape):
    rng = np.random.default_rng(14)
    a, b = _ints(rng, a_type, shape[0]), _ints(rng, b_type, shape[1])
    azp, bzp = _ints(rng, a_type, (shape[0][-2],)), _ints(rng, b_type, (shape[1][-1],))
    cpu, gpu_result = both("matrix_multiply_integer", a, azp, b, bzp)
    assert cpu.dtype == gpu_result.dtype == np.int32 and np.array_equal(cpu, gpu_result)


@pytest.mark.parametrize("out_type", [np.int8, np.uint8])
def test_quantized_linear_matrix_multiply_is_bit_identical(gpu, out_type):
    rng = np.random.default_rng(15)
    a, b = _ints(rng, np.uint8, (2, 50, 64)), _ints(rng, np.int8, (2, 64, 30))
    inputs = [a, rng.uniform(0.001, 0.05, (50,)).astype(F32), _ints(rng, np.uint8, (50,)), b,
              rng.uniform(0.001, 0.05, (30,)).astype(F32), _ints(rng, np.int8, (30,)),
              rng.uniform(0.01, 0.5, (1,)).astype(F32), _ints(rng, out_type, (1,))]
    cpu, gpu_result = both("quantized_linear_matrix_multiply", *inputs)
    assert np.array_equal(cpu, gpu_result)


@pytest.mark.parametrize("int_type, out_type", [(np.int8, F32), (np.int8, F16), (np.uint16, F32)])
def test_matrix_multiply_integer_to_float_is_bit_identical(gpu, int_type, out_type):
    rng = np.random.default_rng(16)
    a, b = _ints(rng, int_type, (3, 40, 100)), _ints(rng, int_type, (3, 100, 20))
    inputs = [a, rng.uniform(0.001, 0.01, (40,)).astype(out_type), _ints(rng, int_type, (1,)), b,
              rng.uniform(0.001, 0.01, (1,)).astype(out_type), _ints(rng, int_type, (20,)),
              rng.uniform(-1, 1, (3, 40, 20)).astype(out_type)]
    cpu, gpu_result = both("matrix_multiply_integer_to_float", *inputs)
    assert np.array_equal(cpu, gpu_result)


# ---------------------------------------------------------------- --allow-tf32


def _math_mode() -> int:
    """The cuBLAS math mode of this thread's handle (CUBLAS_TF32_TENSOR_OP_MATH is 3)."""
    import cupy
    from cupy_backends.cuda.libs import cublas

    return cublas.getMathMode(cupy.cuda.device.get_cublas_handle())


def test_allow_tf32_gemm_passes_check_at_the_widened_tolerance(gpu, tmp_path):
    """1024^3 FLOAT32 through the command line: --check against the CPU's result passes at the TF32-wide rule.
    Positive data: nothing cancels, so ULP measure the error (random normal data cancel to results near 0 that
    fail even the FLOAT32 rule against another summation order; the bound test below takes them)."""
    rng = np.random.default_rng(21)
    paths = [tmp_path / name for name in ("a.npy", "b.npy", "cpu.npy")]
    a, b = (rng.uniform(0, 1, (1024, 1024)).astype(F32) for _ in range(2))
    for path, array in zip(paths, (a, b, dmlcli.run("gemm", a, b))):
        np.save(path, array)
    result = CliRunner().invoke(cli, ["run", "gemm", str(paths[0]), str(paths[1]), "--backend", "gpu",
                                      "--allow-tf32", "--check", str(paths[2])])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("PASSED")


def test_allow_tf32_gemm_uses_tf32_and_only_for_that_call(gpu):
    """Random normal 1024^3: the TF32 result differs from the FLOAT32 one, by far more than FLOAT32's own error,
    and stays within TF32's dot-product bound; cuBLAS's mode is back afterwards and the next call is FLOAT32."""
    rng = np.random.default_rng(22)
    a, b = rng.standard_normal((1024, 1024)).astype(F32), rng.standard_normal((1024, 1024)).astype(F32)
    before = _math_mode()
    cpu = dmlcli.run("gemm", a, b).astype(np.float64)
    fp32 = dmlcli.run("gemm", a, b, backend="gpu")
    tf32 = dmlcli.run("gemm", a, b, backend="gpu", allow_tf32=True)
    assert _math_mode() == before
    assert np.array_equal(dmlcli.run("gemm", a, b, backend="gpu"), fp32)
    fp32_error, tf32_error = np.abs(fp32 - cpu).max(), np.abs(tf32 - cpu).max()
    assert not np.array_equal(tf32, fp32) and tf32_error > 16 * fp32_error  # TF32 keeps 10 of 23 mantissa bits
    # Each TF32 input is within 2^-10 of its FLOAT32 value (rounded or truncated), so each product within 2^-9: the
    # call's sum bound takes TF32's unit roundoff, 2 (K 2^-11 + 2^-24) |A||B|.
    call = dmlcli.validate("gemm", a, b, allow_tf32=True).call
    rule = rule_for(call.operator, F32, call=call, inputs=[a, b])
    assert rule.bound.figures.roundoff == 2.0 ** -11
    comparison = compare_arrays(tf32, cpu.astype(F32), rule)
    assert comparison.passed, comparison.text()


@pytest.mark.parametrize("op, shapes", [
    ("gemm", [(1, 1, 256, 512), (1, 1, 512, 256)]),  # batched matmul: cuBLAS's strided-batched GEMM
    ("gemm", [(2, 3, 64, 256), (2, 3, 256, 64)]),
    ("convolution", [(2, 16, 20, 20), (8, 16, 3, 3)]),  # grouped products, (g, m, k) @ (n, g, k, p)
])
def test_allow_tf32_reaches_batched_products(gpu, op, shapes, monkeypatch):
    # The products' path: with cuDNN installed a convolution runs there, whose plan may or may not take TF32 (the
    # flag allows, never requires it: tests/test_gpu_cudnn.py checks that path within TF32's rule).
    from dmlcli.operators.numerics import cudnn_graphs

    monkeypatch.setattr(cudnn_graphs, "_LOADED", [cudnn_graphs._Loaded(None, "dmlcli's own products tested")])
    rng = np.random.default_rng(23)
    arrays = [rng.standard_normal(shape).astype(F32) for shape in shapes]
    fp32 = dmlcli.run(op, *arrays, backend="gpu")
    tf32 = dmlcli.run(op, *arrays, backend="gpu", allow_tf32=True)
    cpu = dmlcli.run(op, *arrays).astype(np.float64)
    assert np.abs(tf32 - cpu).max() > 16 * np.abs(fp32 - cpu).max()


def test_allow_tf32_leaves_float16_and_other_operators_alone(gpu):
    rng = np.random.default_rng(24)
    a, b = rng.uniform(0, 1, (2, 64, 128)).astype(F16), rng.uniform(0, 1, (2, 128, 32)).astype(F16)
    assert np.array_equal(dmlcli.run("gemm", a, b, backend="gpu", allow_tf32=True),
                          dmlcli.run("gemm", a, b, backend="gpu"))
    x = rng.standard_normal((4, 1000)).astype(F32)
    assert np.array_equal(dmlcli.run("reduce", x, axes=[1], function="sum", backend="gpu", allow_tf32=True),
                          dmlcli.run("reduce", x, axes=[1], function="sum", backend="gpu"))


def test_cublas_mode_is_restored_when_the_kernel_fails(gpu):
    from dmlcli import records
    from dmlcli.backends import gpu as gpu_module

    def failing(xp, inputs, outputs, parameters):
        assert _math_mode() == 3  # CUBLAS_TF32_TENSOR_OP_MATH, inside the window
        raise RuntimeError("the kernel failed")

    gemm = dmlcli.find_operator("gemm")
    broken = records.replace(gemm, array_kernel=failing, gpu_array_kernel=failing)
    call = _call("gemm", [np.ones((4, 4), F32)] * 2)
    before = _math_mode()
    with pytest.raises(RuntimeError, match="the kernel failed"):
        gpu_module.create().execute_shaped(broken, [np.ones((4, 4), F32)] * 2 + [None], call.outputs,
                                           call.parameters, allow_tf32=True)
    assert _math_mode() == before


FINISHED_CALLS = [  # FLOAT16 products where cuBLAS's epilogue is not IEEE's: finished in one pass (matmul/gpu.py)
    ((2, 3, 33, 40), (2, 3, 40, 17), (1, 3, 1, 17), {"beta": 0.0}),  # Beta 0 still multiplies C (0 * inf = NaN)
    ((64, 96), (96, 80), (64, 80), {"alpha": 0.0, "beta": 2.0}),  # Alpha 0 still multiplies the sums
]
EPILOGUE_CALLS = [  # FLOAT16 products that Alpha or C changes: Alpha and Beta * C in cuBLAS's epilogue
    ((64, 96), (96, 80), (1, 80), {}),  # addmm's bias
    ((64, 96), (96, 80), (64, 80), {"alpha": 0.5, "beta": 2.0}),
    ((48, 32), (32, 24), None, {"alpha": -0.25}),
    ((32, 48), (24, 32), (1, 24), {"trans_a": "transpose", "trans_b": "transpose"}),
    ((2, 3, 33, 40), (2, 3, 40, 17), (1, 3, 1, 17), {"beta": -1.5}),
]


def _half_arrays(seed, shapes):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, s).astype(F16) for s in shapes if s is not None]
    if len(arrays) == 3:
        arrays[2].reshape(-1)[:3] = [np.inf, -np.inf, np.nan]
    return arrays


@pytest.mark.parametrize("calls, taken", [(EPILOGUE_CALLS, True), (FINISHED_CALLS, False)])
def test_which_float16_products_take_cublas_s_epilogue(gpu, calls, taken):
    import cupy

    from dmlcli.operators.matmul import entries

    for a_shape, b_shape, c_shape, params in calls:
        arrays = _half_arrays(30, (a_shape, b_shape, c_shape))
        call = _call("gemm", arrays, **params)
        given = [cupy.asarray(a) for a in arrays] + [None] * (3 - len(arrays))
        found = entries._half_epilogue(cupy, given, call.outputs, call.parameters)
        assert (found is not None) == taken, params


@pytest.mark.parametrize("activation", [None, "relu", "sigmoid"])
@pytest.mark.parametrize("a_shape, b_shape, c_shape, params", EPILOGUE_CALLS, ids=[str(c[3]) for c in EPILOGUE_CALLS])
def test_a_float16_product_through_cublas_s_epilogue_is_within_the_rule(gpu, a_shape, b_shape, c_shape, params,
                                                                        activation):
    """cuBLAS's one rounding of Alpha * sums + Beta * C agrees with the CPU's within GEMM's rule, C's infinities and
    NaN where the CPU has them; a fused activation is its own GPU kernel on the product."""
    arrays = _half_arrays(32, (a_shape, b_shape, c_shape))
    fields = dict(params, **({"fused_activation": activation} if activation else {}))
    cpu, got = both("gemm", *arrays, **fields)
    for special in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(special(got), special(cpu))
    call = _call("gemm", arrays, **fields)
    rule = rule_for(call.operator, cpu.dtype, call=call, inputs=arrays)
    comparison = compare_arrays(np.nan_to_num(got), np.nan_to_num(cpu), rule)
    assert comparison.passed, comparison.text()
    if activation is not None:
        plain = dmlcli.run("gemm", *arrays, backend="gpu", **params)
        own = dmlcli.run(f"activation_{activation}", plain, backend="gpu")
        assert np.array_equal(got.view(np.uint16), own.view(np.uint16))


@pytest.mark.parametrize("activation", [None, "relu", "sigmoid"])
@pytest.mark.parametrize("a_shape, b_shape, c_shape, params", FINISHED_CALLS, ids=[str(c[3]) for c in FINISHED_CALLS])
def test_a_float16_product_finished_in_one_pass_gives_the_passes_bits(gpu, a_shape, b_shape, c_shape, params,
                                                                       activation):
    """The one pass gives the bits of entries.gemm_product's CuPy operations on the same sums followed by the
    activation's own GPU kernel, infinities and NaN in C included."""
    import cupy

    from dmlcli.operators.matmul import entries

    arrays = _half_arrays(31, (a_shape, b_shape, c_shape))
    fields = dict(params, **({"fused_activation": activation} if activation else {}))
    got = dmlcli.run("gemm", *arrays, backend="gpu", **fields)
    call = _call("gemm", arrays, **fields)
    given = [cupy.asarray(a) for a in arrays] + [None] * (3 - len(arrays))
    passes = entries.gemm_product(cupy, given, call.outputs, call.parameters)  # CuPy's operations, no finish
    if activation is not None:
        passes = cupy.asarray(dmlcli.run(f"activation_{activation}", cupy.asnumpy(passes), backend="gpu"))
    expected = cupy.asnumpy(passes)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    assert np.array_equal(np.nan_to_num(got).view(np.uint16), np.nan_to_num(expected).view(np.uint16))
