"""`dmlcli dispatch --backend gpu`: the same models and hand-worked values as test_dispatch.py, on CuPy.

Skipped where no GPU is usable (this machine and CI have none).
"""

import re

import pytest
from click.testing import CliRunner

from dmlcli.cli import cli

from test_dispatch import EXPECTED_OUTPUT, MODELS, printed


def _gpu_usable() -> bool:
    from dmlcli.backends import get_backend
    from dmlcli.errors import BackendUnavailableError

    try:
        get_backend("gpu")
    except (BackendUnavailableError, ImportError):
        return False
    return True


pytestmark = pytest.mark.skipif(not _gpu_usable(), reason="no usable GPU (CuPy and a CUDA device are needed)")


def gpu_dispatch(*args):
    return CliRunner().invoke(cli, ["dispatch", *[str(a) for a in args], "--backend", "gpu"])


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_model_on_the_gpu_prints_the_expected_values(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = gpu_dispatch(MODELS / name)
    assert result.exit_code == 0, result.output
    assert [line for line in printed(result) if "' written to '" not in line] == EXPECTED_OUTPUT[name]
    timing = [line for line in result.stdout.splitlines() if line.startswith("Dispatch '")]
    assert timing and all(re.fullmatch(r"Dispatch '\w+': 1 iterations, \d+\.\d{4} ms median \(CPU\), "
                                       r"\d+\.\d{6} ms median \(GPU\)", line) for line in timing)


def test_iterations_compound_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = gpu_dispatch(MODELS / "shift_in_place.json", "-i", "3")
    assert result.exit_code == 0, result.output
    # Three dispatch commands of three iterations: [1, 3, 5, 2^31] shifted left by 1 nine times.
    assert "Resource 'A': 512, 1536, 2560, 0" in result.stdout.splitlines()


def test_the_shared_serialized_graph_on_the_gpu(shared_dir, tmp_path, monkeypatch):
    from test_dispatch_serialized_graph import MODEL, SHARED_MODELS, resource_line

    monkeypatch.chdir(tmp_path)
    result = gpu_dispatch(SHARED_MODELS / MODEL)
    assert result.exit_code == 0, result.output
    assert printed(result) == [resource_line("model_output", [12.25] * 5)]  # 1.5 * 1.5 * 5 + 1, exact
    assert re.fullmatch(r"Dispatch 'matmul_add': 1 iterations, \d+\.\d{4} ms median \(CPU\)", result.stdout.splitlines()[0])


def test_a_serialized_graph_of_several_nodes_on_the_gpu(tmp_path, monkeypatch):
    import numpy as np

    from serialized_graphs import several_nodes_model
    from test_dispatch_serialized_graph import resource_line, several_nodes_expected

    monkeypatch.chdir(tmp_path)
    expected = several_nodes_expected()
    result = gpu_dispatch(several_nodes_model(tmp_path / "m"), "--no-timing")
    assert result.exit_code == 0, result.output
    assert printed(result)[:2] == [resource_line(name, expected[name]) for name in ("Prod", "Clipped")]
    np.testing.assert_allclose(np.load(tmp_path / "gemm.npy"), expected["G"], rtol=1e-6)
