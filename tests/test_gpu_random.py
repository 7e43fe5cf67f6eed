"""RANDOM_GENERATOR on the GPU: the same xp kernel on CuPy gives the CPU's bits (integer arithmetic only), the
output and the advanced state. Needs CuPy and a CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest

from dmlcli import api
from dmlcli.errors import BackendUnavailableError

cupy = pytest.importorskip("cupy")


@pytest.fixture(scope="module", autouse=True)
def gpu_usable():
    from dmlcli.backends import gpu

    try:
        gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


STATES = [(0, 0, 0, 0, 0, 0), (0xFFFFFFF0, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xDEADBEEF, 1),
          (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0)]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 1, 3, 7), (2, 3, 64, 129), (4, 8, 256, 257)])
def test_the_gpu_gives_the_cpus_bits(state, shape):
    words = np.array(state, np.uint32).reshape(1, 1, 1, 6)
    cpu_bits, cpu_state = api.run("random_generator", words, output_shape=shape, backend="cpu")
    gpu_bits, gpu_state = api.run("random_generator", words, output_shape=shape, backend="gpu")
    assert gpu_bits.dtype == np.uint32 and gpu_bits.shape == shape
    assert np.array_equal(cpu_bits, gpu_bits) and np.array_equal(cpu_state, gpu_state)
