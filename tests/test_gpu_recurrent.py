"""RNN, GRU and LSTM on the GPU: the same xp kernel on CuPy (xp.matmul per time step) within the operators'
tolerance of the CPU backend's result.

Both backends compute in FLOAT32 (FLOAT16 widened, the outputs rounded once); cuBLAS and NumPy's BLAS sum the
products in different orders, so the results agree within the tolerance (rule_for: 3 ULP times seq_length *
(input_size + hidden_size + 2), the absolute floor, or each element's sum bound, the error the recurrence may carry
from its inputs' magnitudes), not bit for bit. Skipped without CuPy or a usable GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dmlcli
from dmlcli.checking.comparison import compare_arrays, rule_for
from dmlcli.errors import BackendUnavailableError

cupy = pytest.importorskip("cupy")

GATES = {"rnn": 1, "gru": 3, "lstm": 4}
SHAPES = [(1, 1, 2, 3), (5, 3, 4, 6), (12, 8, 16, 32)]  # (seq_length, batch, input_size, hidden_size)


@pytest.fixture(scope="module")
def gpu_backend():
    from dmlcli.backends import gpu

    try:
        return gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


def _inputs(kind, shape, direction, dtype, seed):
    steps, batch, width, hidden = shape
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[kind]
    rng = np.random.default_rng(seed)

    def rand(*sizes, scale=0.5):
        return (rng.standard_normal(sizes) * scale).astype(dtype)

    arrays = [rand(1, steps, batch, width, scale=1.0), rand(1, dirs, gates * hidden, width),
              rand(1, dirs, gates * hidden, hidden), rand(1, 1, dirs, 2 * gates * hidden, scale=0.3),
              rand(1, dirs, batch, hidden)]
    lengths = rng.integers(0, steps + 2, size=(1, 1, 1, batch)).astype(np.uint32)
    if kind == "lstm":
        arrays += [rand(1, dirs, batch, hidden), lengths, rand(1, 1, dirs, 3 * hidden, scale=0.3)]
    else:
        arrays.append(lengths)
    return arrays


def _within(kind, got, expected, arrays, params, output):
    verdict = dmlcli.validate(kind, *arrays, **params)
    rule = rule_for(verdict.call.operator, got.dtype, parameters=verdict.call.parameters, call=verdict.call,
                    inputs=arrays, output=output)
    comparison = compare_arrays(got, expected, rule)
    assert comparison.passed, comparison.text()


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("direction", ["forward", "backward", "bidirectional"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gpu_matches_cpu_within_the_tolerance(gpu_backend, kind, direction, dtype, shape):
    arrays = _inputs(kind, shape, direction, dtype, seed=len(kind) * 7 + shape[0])
    params = {"direction": direction}
    if kind == "gru":
        params["linear_before_reset"] = shape[0] % 2 == 1
    if kind == "lstm":
        params.update(use_clip_threshold=True, clip_threshold=2.0)
    cpu = dmlcli.run(kind, *arrays, backend="cpu", **params)
    gpu = dmlcli.run(kind, *arrays, backend=gpu_backend, **params)
    for output, (c, g) in enumerate(zip(cpu, gpu)):
        assert g.dtype == c.dtype and g.shape == c.shape
        _within(kind, np.asarray(g), c, arrays, params, output)

# dml_rnn.json on the GPU: tests/test_dispatch_shaped.py (its hand-computed values, both backends).
