"""The attention family on the GPU: the same xp kernel on CuPy (cuBLAS products) as on NumPy (BLAS).

The GPU's result agrees with the CPU's within the operator's tolerance for the call (the products add in another
order): its ULP figure, its floor or each element's sum bound (the scores' magnitudes, which the softmax turns into
the output's error); the present outputs bit for bit (copies of the inputs); with --allow-tf32, FLOAT32 within the
TF32-wide rule. They need CuPy and a CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest

from dmlcli import api
from dmlcli.checking.comparison import compare_arrays, rule_for

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.usefixtures("gpu_usable")  # conftest: skips where no device can run

MHA1_INPUTS = ("QueryTensor", "KeyTensor", "ValueTensor", "StackedQueryKeyTensor", "StackedKeyValueTensor",
               "StackedQueryKeyValueTensor", "BiasTensor", "MaskTensor", "RelativePositionBiasTensor", "PastKeyTensor",
               "PastValueTensor", "PastSequenceLengthsTensor")


def data(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def assert_within(arrays, options, context=""):
    cpu_outputs = api.run("multihead_attention1", *arrays, backend="cpu", **options)
    gpu_outputs = api.run("multihead_attention1", *arrays, backend="gpu", **options)
    verdict = api.validate("multihead_attention1", *arrays, **options)
    for index, (cpu_result, gpu_result) in enumerate(zip(cpu_outputs, gpu_outputs)):
        assert cpu_result.dtype == gpu_result.dtype and cpu_result.shape == gpu_result.shape, context
        assert np.array_equal(np.isnan(cpu_result), np.isnan(gpu_result)), context
        if index > 0:  # the present key and value: copies (with BiasTensor, one FLOAT32 addition)
            assert np.array_equal(cpu_result, gpu_result), context
            continue
        rule = rule_for(verdict.call.operator, cpu_result.dtype, call=verdict.call, inputs=arrays)
        comparison = compare_arrays(gpu_result, cpu_result, rule)
        assert comparison.passed, f"{context}: {comparison.text()}"


def call(batch, sequence, kv, past, heads, kv_heads, head_size, value_size, dtype, mask_type="none", lengths=False,
         bias=False, relative=False):
    tensors = {"QueryTensor": data((batch, sequence, heads * head_size), dtype, 1),
               "KeyTensor": data((batch, kv, kv_heads * head_size), dtype, 2),
               "ValueTensor": data((batch, kv, kv_heads * value_size), dtype, 3)}
    total = past + kv
    if past:
        tensors["PastKeyTensor"] = data((batch, kv_heads, past, head_size), dtype, 4)
        tensors["PastValueTensor"] = data((batch, kv_heads, past, value_size), dtype, 5)
    if bias:
        tensors["BiasTensor"] = data((heads * head_size + kv_heads * (head_size + value_size),), dtype, 6)
    if relative:
        tensors["RelativePositionBiasTensor"] = data((batch, 1, sequence, total), dtype, 7)
    if lengths:
        tensors["PastSequenceLengthsTensor"] = np.arange(batch, dtype=np.int32) % (past + 1)
    rng = np.random.default_rng(8)
    if mask_type == "boolean":
        tensors["MaskTensor"] = (rng.random((batch, heads, sequence, total)) > 0.2).astype(np.int32)
    elif mask_type == "key_sequence_length":
        tensors["MaskTensor"] = rng.integers(1, total + 1, (1, batch)).astype(np.int32)
    elif mask_type == "key_sequence_end_start":
        tensors["MaskTensor"] = np.array([[total] * batch, [0] * batch], np.int32)
    elif mask_type == "key_query_sequence_length_start_end":
        tensors["MaskTensor"] = np.array([total] * batch + list(range(0, (batch + 1) * sequence, sequence))
                                         + list(range(0, (batch + 1) * total, total)), np.int32)
    arrays = [tensors.get(name) for name in MHA1_INPUTS]
    options = {"query_head_count": heads, "key_value_head_count": kv_heads, "scale": 1 / np.sqrt(head_size),
               "mask_type": mask_type}
    return arrays, options


SHAPES = [(1, 1, 1, 0, 1, 1, 1, 1), (2, 7, 9, 0, 4, 4, 16, 8), (2, 33, 65, 3, 8, 2, 64, 64),
          (1, 1, 1, 127, 32, 8, 128, 128)]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mask_type", ["none", "boolean", "key_sequence_length", "key_sequence_end_start",
                                       "key_query_sequence_length_start_end"])
def test_the_gpu_agrees_with_the_cpu(shape, dtype, mask_type):
    arrays, options = call(*shape, dtype, mask_type=mask_type, bias=True, relative=True)
    assert_within(arrays, options, f"{shape} {dtype} {mask_type}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_past_lengths_on_the_gpu(dtype):
    arrays, options = call(3, 1, 1, 6, 8, 2, 32, 32, dtype, lengths=True)
    assert_within(arrays, options, f"decode {dtype}")
    arrays, options = call(2, 5, 5, 0, 4, 2, 16, 16, dtype, lengths=True)
    assert_within(arrays, options, f"prompt {dtype}")


@pytest.mark.parametrize("scale", [1.0, 1 / np.sqrt(32)])
def test_stacked_layouts_on_the_gpu(scale):
    # Unscaled scores of 32 standard normal products (about 25 in magnitude) carry an absolute error that the
    # softmax turns into a relative one, past the WebNN figure: the sum bound, from the scores' magnitudes, holds it.
    stacked = data((2, 9, 4, 3, 32), "float32", 9)
    arrays = [None, None, None, None, None, stacked]
    assert_within(arrays, {"query_head_count": 4, "key_value_head_count": 4, "scale": scale},
                  f"stacked query/key/value, scale {scale}")


def test_tf32_stays_within_the_widened_rule():
    arrays, options = call(2, 33, 65, 3, 8, 2, 64, 64, "float32")
    cpu_result = api.run("multihead_attention1", *arrays, backend="cpu", **options)[0]
    gpu_result = api.run("multihead_attention1", *arrays, backend="gpu", allow_tf32=True, **options)[0]
    verdict = api.validate("multihead_attention1", *arrays, allow_tf32=True, **options)
    rule = rule_for(verdict.call.operator, cpu_result.dtype, call=verdict.call, inputs=arrays)
    assert rule.bound.figures.roundoff == 2.0 ** -11  # TF32's unit roundoff
    comparison = compare_arrays(gpu_result, cpu_result, rule)
    assert comparison.passed, comparison.text()
