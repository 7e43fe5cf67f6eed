"""Optional outputs left out on the GPU (outputs=): the GPU kernels give only the outputs asked for, equal to the same
outputs of the GPU's full call bit for bit, and to the CPU's within the operator's rule (bit for bit where exact:
the present keys and values, which are copies, and RANDOM_GENERATOR). MULTIHEAD_ATTENTION1 in FLOAT16 without a mask
or bias maps onto cuDNN's fused attention where its frontend is installed (attention/cudnn.py), FLOAT32 runs
dmlcli's kernel: both paths are asked. Skipped without CuPy or a usable GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from dmlcli import api
from dmlcli.checking.comparison import compare_arrays, rule_for

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.usefixtures("gpu_usable")  # conftest: skips where no device can run


def data(shape, dtype, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def assert_within(op, arrays, options, got, expected, output=0):
    """`got` (the GPU's) against `expected` (the CPU's) by the operator's rule for the output at `output` of the
    call that gives every output (the rule of an output does not depend on the others being asked for)."""
    verdict = api.validate(op, *arrays, **options)
    rule = rule_for(verdict.call.operator, expected.dtype, parameters=verdict.call.parameters, call=verdict.call,
                    inputs=arrays, output=output)
    comparison = compare_arrays(np.asarray(got), expected, rule)
    assert comparison.passed, comparison.text()


def attention_call(dtype, causal: bool):
    """MULTIHEAD_ATTENTION1: query, key, value (grouped heads) and, for `causal`, a BOOLEAN mask of key <= query."""
    batch, sequence, heads, kv_heads, size = 2, 16, 4, 2, 32
    arrays = [data((batch, sequence, heads * size), dtype, 1), data((batch, sequence, kv_heads * size), dtype, 2),
              data((batch, sequence, kv_heads * size), dtype, 3)] + [None] * 9
    options = {"query_head_count": heads, "key_value_head_count": kv_heads, "scale": 1 / np.sqrt(size)}
    if causal:
        arrays[7] = np.broadcast_to(np.tril(np.ones((sequence, sequence), np.int32)), (batch, 1, sequence, sequence))
        options.update(mask_type="boolean", mask_filter_value=-10000.0)
    return arrays, options


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_without_the_presents_on_the_gpu(dtype, causal):
    arrays, options = attention_call(dtype, causal)
    op = "multihead_attention1"
    full_gpu = api.run(op, *arrays, backend="gpu", **options)
    (alone_gpu,) = api.run(op, *arrays, backend="gpu", outputs=("OutputTensor",), **options)
    (alone_cpu,) = api.run(op, *arrays, backend="cpu", outputs=("OutputTensor",), **options)
    assert alone_gpu.tobytes() == full_gpu[0].tobytes()
    assert_within(op, arrays, options, alone_gpu, alone_cpu)
    # One present asked for: a copy, the CPU's bit for bit.
    output, value = api.run(op, *arrays, backend="gpu", outputs=("OutputTensor", "OutputPresentValueTensor"),
                            **options)
    assert output.tobytes() == full_gpu[0].tobytes()
    cpu_value = api.run(op, *arrays, backend="cpu", outputs="OutputTensor,OutputPresentValueTensor", **options)[1]
    assert value.dtype == cpu_value.dtype and value.tobytes() == cpu_value.tobytes()


@pytest.mark.parametrize("asked", [("OutputSingleTensor",), ("OutputSequenceTensor", "OutputCellSingleTensor")])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_lstm_with_fewer_outputs_on_the_gpu(asked, dtype):
    steps, batch, width, hidden = 6, 3, 5, 8
    arrays = [data((1, steps, batch, width), dtype, 10), data((1, 2, 4 * hidden, width), dtype, 11, 0.5),
              data((1, 2, 4 * hidden, hidden), dtype, 12, 0.5), data((1, 1, 2, 8 * hidden), dtype, 13, 0.3),
              data((1, 2, batch, hidden), dtype, 14, 0.5), data((1, 2, batch, hidden), dtype, 15, 0.5),
              np.array([6, 2, 0], np.uint32).reshape(1, 1, 1, batch), data((1, 1, 2, 3 * hidden), dtype, 16, 0.3)]
    options = {"direction": "bidirectional"}
    names = ("OutputSequenceTensor", "OutputSingleTensor", "OutputCellSingleTensor")
    full_gpu = api.run("lstm", *arrays, backend="gpu", **options)
    got = api.run("lstm", *arrays, backend="gpu", outputs=asked, **options)
    cpu = api.run("lstm", *arrays, backend="cpu", outputs=asked, **options)
    assert len(got) == len(cpu) == len(asked)
    for name, gpu_result, cpu_result in zip(asked, got, cpu):
        position = names.index(name)
        assert gpu_result.tobytes() == full_gpu[position].tobytes(), name
        assert_within("lstm", arrays, options, gpu_result, cpu_result, output=position)


def test_random_generator_without_its_state_on_the_gpu():
    state = np.array([7, 0, 0, 0, 11, 13], np.uint32).reshape(1, 1, 1, 6)
    (gpu,) = api.run("random_generator", state, backend="gpu", output_shape=(1, 2, 3, 9), outputs=("OutputTensor",))
    (cpu,) = api.run("random_generator", state, backend="cpu", output_shape=(1, 2, 3, 9), outputs=("OutputTensor",))
    assert gpu.tobytes() == cpu.tobytes()


def test_roi_align_grad_regions_gradient_alone_on_the_gpu():
    x, incoming = data((2, 3, 6, 7), "float32", 20), data((3, 3, 2, 3), "float32", 21)
    rois = np.array([[0.5, 0.5, 4.5, 3.5], [1.0, 0.0, 6.0, 5.0], [0.2, 1.1, 3.3, 4.4]], np.float32)
    batches = np.array([0, 1, 0], np.uint32)
    options = {"minimum_samples_per_output": 2, "maximum_samples_per_output": 2}
    arrays = [x, incoming, rois, batches]
    (gpu,) = api.run("roi_align_grad", *arrays, backend="gpu", outputs=("OutputROIGradientTensor",), **options)
    full_gpu = api.run("roi_align_grad", *arrays, backend="gpu", **options)
    (cpu,) = api.run("roi_align_grad", *arrays, backend="cpu", outputs=("OutputROIGradientTensor",), **options)
    assert gpu.tobytes() == full_gpu[1].tobytes()
    assert_within("roi_align_grad", arrays, options, gpu, cpu, output=1)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_max_pooling2_without_its_indices_on_the_gpu(dtype):
    """Without the indices the GPU's one-read window kernel computes the maxima (pooling/gpu.py): the CPU's bits."""
    x = data((2, 3, 9, 8), dtype, 30)
    options = {"window_size": (3, 2), "strides": (2, 1), "dilations": (1, 2)}
    (gpu,) = api.run("max_pooling2", x, backend="gpu", outputs=("OutputTensor",), **options)
    (cpu,) = api.run("max_pooling2", x, backend="cpu", outputs=("OutputTensor",), **options)
    assert gpu.tobytes() == cpu.tobytes()
    assert gpu.tobytes() == api.run("max_pooling2", x, backend="gpu", **options)[0].tobytes()
