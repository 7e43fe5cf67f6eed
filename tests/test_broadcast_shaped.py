"""--broadcast for the matrix products (issue 31, item 5): ONNX's MatMul [2, 3, 4, 5] @ [1, 1, 5, 6] and Gemm's C
shapes, validated at the broadcast Sizes, as DirectML expresses them with zero strides (ONNX Runtime's DirectML
provider writes those descs: DmlOperatorMatMulInteger's MatMulShapeMapping). Was: "GEMM is not element-wise".
The GPU's results against the CPU's are in the last test (skipped without CuPy)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.checking.comparison import compare_arrays, rule_for
from dmlcli.cli import cli
from dmlcli.errors import InputError, ValidationError

RNG = np.random.default_rng(31)
MATRIX_PRODUCTS = ["GEMM", "MATRIX_MULTIPLY_INTEGER", "MATRIX_MULTIPLY_INTEGER_TO_FLOAT",
                   "QUANTIZED_LINEAR_MATRIX_MULTIPLY"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def floats(*shape) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def reference_product(a, b) -> np.ndarray:
    """ONNX's MatMul in float64 with Python's exact sums (math.fsum), broadcast by NumPy's rules."""
    import math

    a64, b64 = np.broadcast_arrays(a.astype(np.float64)[..., :, :, None], b.astype(np.float64)[..., None, :, :])
    out = np.empty(a64.shape[:-2] + (b.shape[-1],))
    for index in np.ndindex(out.shape):
        out[index] = math.fsum(a64[index[:-1] + (slice(None), index[-1])] * b64[index[:-1] + (slice(None),
                                                                                              index[-1])])
    return out


def within_rule(op, got, expected64, arrays, **options) -> None:
    verdict = dmlcli.validate(op, *arrays, broadcast=True, **options)
    rule = rule_for(verdict.call.operator, got.dtype, call=verdict.call, parameters=verdict.call.parameters,
                    inputs=arrays)
    comparison = compare_arrays(got, expected64.astype(got.dtype), rule)
    assert comparison.passed, comparison.text()


@pytest.mark.parametrize("a_shape,b_shape,out_shape", [
    ((2, 3, 4, 5), (1, 1, 5, 6), (2, 3, 4, 6)),  # the issue's
    ((4, 5), (2, 5, 6), (2, 4, 6)),  # the lower DimensionCount gains leading 1s
    ((3, 1, 4, 5), (1, 2, 5, 6), (3, 2, 4, 6)),  # both sides broadcast
    ((1, 4, 5), (5, 6), (1, 4, 6)),
])
def test_matmul_batches_broadcast_as_onnx_s(a_shape, b_shape, out_shape):
    a, b = floats(*a_shape), floats(*b_shape)
    with pytest.raises(ValidationError, match=r"ONNX's MatMul broadcasts them, as --broadcast does"):
        dmlcli.run("gemm", a, b)
    got = dmlcli.run("gemm", a, b, broadcast=True)
    assert got.shape == out_shape and got.dtype == np.float32
    within_rule("gemm", got, reference_product(a, b), [a, b])
    verdict = dmlcli.validate("gemm", a, b, broadcast=True)  # validated at the broadcast Sizes
    assert [t.shape for t in verdict.call.tensors.values()] == [out_shape[:-2] + a_shape[-2:],
                                                                out_shape[:-2] + b_shape[-2:], out_shape]


@pytest.mark.parametrize("c_shape", [(6,), (4, 1), (1,), (1, 6), (3, 1, 6)])
def test_gemm_s_c_broadcasts_as_onnx_s(c_shape):
    a, b, c = floats(3, 4, 5), floats(3, 5, 6), floats(*c_shape)
    got = dmlcli.run("gemm", a, b, c, broadcast=True, alpha=0.5, beta=2)
    expected = 0.5 * reference_product(a, b) + 2 * np.broadcast_to(c.astype(np.float64), (3, 4, 6))
    within_rule("gemm", got, expected, [a, b, c], alpha=0.5, beta=2)


def test_gemm_s_c_with_transposes():
    a, b, c = floats(5, 4), floats(6, 5), floats(6)
    got = dmlcli.run("gemm", a, b, c, broadcast=True, trans_a="transpose", trans_b="transpose")
    within_rule("gemm", got, reference_product(a.T, b.T) + c, [a, b, c], trans_a="transpose", trans_b="transpose")


def test_what_does_not_broadcast_is_refused_in_words():
    with pytest.raises(ValidationError, match=r"^GEMM: ATensor's batch Sizes \[2\] and BTensor's \[3\] do not "
                                              r"broadcast together by NumPy's rules$"):
        dmlcli.validate("gemm", floats(2, 4, 5), floats(3, 5, 6), broadcast=True)
    with pytest.raises(ValidationError, match=r"^GEMM: CTensor Sizes \[5\] do not broadcast to the output's \[4, 6\]"):
        dmlcli.validate("gemm", floats(4, 5), floats(5, 6), floats(5), broadcast=True)
    without = invoke("run", "gemm", "[[1, 2], [3, 4]]", "[[1, 0], [0, 1]]", "[10, 20]", "--dtype", "float32")
    assert without.exit_code == 3 and without.stderr.strip().endswith(
        "; ONNX's [2] broadcasts to it with --broadcast (broadcast=True in the API)")
    other = invoke("run", "reduce", "[[1]]", "--dtype", "float32", "--broadcast")
    assert other.exit_code == 2
    assert other.stderr.strip() == (
        "dmlcli: error: REDUCE's inputs are not broadcast: DirectML reads them at their own Sizes (--broadcast is for "
        "the element-wise operators and " + ", ".join(MATRIX_PRODUCTS) + ")")
    with pytest.raises(InputError, match="REDUCE's inputs are not broadcast"):
        dmlcli.run("reduce", floats(2), broadcast=True)


def test_the_integer_products_broadcast_their_batches_and_bias():
    a = RNG.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    b = RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    exact = np.matmul(a.astype(np.int64), b.astype(np.int64))
    assert np.array_equal(dmlcli.run("matrix_multiply_integer", a, b, broadcast=True), exact.astype(np.int32))
    scale_a, scale_b, bias = np.float32([0.5]), np.float32([0.25]), floats(5)
    got = dmlcli.run("matrix_multiply_integer_to_float", a, scale_a, None, b, scale_b, None, bias, broadcast=True)
    expected = exact * 0.125 + bias.astype(np.float64)
    assert np.array_equal(got, expected.astype(np.float32))  # one rounding of the exact value
    u8a, u8b = a.astype(np.int16).astype(np.uint8) // 2, b.astype(np.int16).astype(np.uint8) // 2
    quantized = dmlcli.run("quantized_linear_matrix_multiply", u8a, np.float32([0.5]), np.uint8([0]), u8b,
                           np.float32([0.5]), np.uint8([0]), np.float32([64]), np.uint8([0]), broadcast=True)
    product = np.matmul(u8a.astype(np.int64), u8b.astype(np.int64)) * 0.25 / 64
    assert np.array_equal(quantized, np.clip(np.rint(product), 0, 255).astype(np.uint8))


def test_the_command_line_and_its_check(tmp_path):
    a, b = floats(2, 3, 4, 5), floats(1, 1, 5, 6)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    np.save(tmp_path / "ref.npy", reference_product(a, b).astype(np.float32))
    checked = invoke("run", "gemm", tmp_path / "a.npy", tmp_path / "b.npy", "--broadcast", "--check",
                     tmp_path / "ref.npy")
    assert checked.exit_code == 0 and checked.stdout.startswith("PASSED"), checked.output
    validated = invoke("validate", "gemm", tmp_path / "a.npy", tmp_path / "b.npy", "--broadcast")
    assert "ATensor FLOAT32 [2, 3, 4, 5], BTensor FLOAT32 [2, 3, 5, 6], OutputTensor FLOAT32 [2, 3, 4, 6]" in (
        validated.stdout)
    described = invoke("describe", "gemm")
    assert "Broadcast (--broadcast, broadcast=True): ATensor's and BTensor's batch Sizes broadcast together" in (
        described.stdout)
    record = json.loads(invoke("describe", "matrix_multiply_integer", "--format", "json").stdout)
    assert record["broadcast"].startswith("ATensor's and BTensor's batch Sizes broadcast together")
    assert json.loads(invoke("describe", "reduce", "--format", "json").stdout)["broadcast"] is None
    assert "NumPy's rules" in json.loads(invoke("describe", "add", "--format", "json").stdout)["broadcast"]


def test_the_table_says_which_operators_broadcast():
    takers = [op.name for op in dmlcli.operators.all_operators() if op.input_broadcast is not None]
    assert takers == MATRIX_PRODUCTS


def test_the_gpu_gives_the_cpu_s_broadcast_products(gpu_backend):
    a, b, c = floats(2, 3, 4, 5), floats(1, 1, 5, 6), floats(6)
    cpu_result = dmlcli.run("gemm", a, b, c, broadcast=True)
    gpu_result = dmlcli.run("gemm", a, b, c, broadcast=True, backend="gpu")
    within_rule("gemm", gpu_result, cpu_result.astype(np.float64), [a, b, c])
    ints = RNG.integers(-128, 128, (2, 3, 4)).astype(np.int8), RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    assert np.array_equal(dmlcli.run("matrix_multiply_integer", *ints, broadcast=True, backend="gpu"),
                          dmlcli.run("matrix_multiply_integer", *ints, broadcast=True))
