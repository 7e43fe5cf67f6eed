"""`dmlcli show FILE` (alias `inspect`, issue 12): a tensor file's values, type, shape and counts of
special values; .npy files read in constant memory."""

import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner

from dmlcli.cli import cli
from dmlcli.checking.inspection import count_values

from conftest import REPO
from test_terminal import check_whole

SPECIAL = np.array([[1.5, np.nan, np.inf, -np.inf], [1e-45, 0.0, -0.0, 3.0]], dtype=np.float32)


def invoke(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def shown(stdout: str, caption: str, counts: str) -> list[str]:
    """The table's lines, after checking the caption and the counts that end the output."""
    lines = stdout.splitlines()
    assert lines[-2:] == [caption, counts], lines[-2:]
    return lines[:-2]


@pytest.mark.parametrize("style", ["table", "bits", "hex"])
@pytest.mark.parametrize("command", ["show", "inspect"])
def test_a_npy_file_is_shown_with_its_counts(tmp_path, style, command):
    path = tmp_path / "result.npy"
    np.save(path, SPECIAL)
    result = invoke(command, str(path), "--format", style)
    assert result.exit_code == 0, result.output
    lines = shown(result.stdout, f"{path} · FLOAT32 · shape [2, 4]",
                  "8 elements: 1 NaN, 1 +inf, 1 -inf, 1 subnormal, 2 zero")
    check_whole(SPECIAL, style, 10**6, lines)


def test_json_files_stdin_and_bare_lists(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"dtype": "int16", "data": [[-32768, 0], [7, 32767]]}')
    result = invoke("show", str(path))
    assert result.exit_code == 0
    check_whole(np.int16([[-32768, 0], [7, 32767]]), "table", 10**6,
                shown(result.stdout, f"{path} · INT16 · shape [2, 2]", "4 elements: 1 zero"))
    result = invoke("show", "-", "--dtype", "float16", input='[0.0, "nan", 6e-08]')
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-2:] == ["stdin · FLOAT16 · shape [3]",
                                               "3 elements: 1 NaN, 0 +inf, 0 -inf, 1 subnormal, 1 zero"]


def test_big_endian_files_show_their_values_and_bit_patterns(tmp_path):
    path = tmp_path / "be.npy"
    np.save(path, np.array([1, 256, 65535], dtype=">u2"))
    assert "0x0001   0x0100   0xffff" in invoke("show", str(path), "--format", "hex").stdout
    assert "1   256   65535" in invoke("show", str(path)).stdout


def test_json_format_puts_the_tensor_alone_on_stdout(tmp_path):
    path = tmp_path / "result.npy"
    np.save(path, SPECIAL)
    result = invoke("show", str(path), "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"dtype": "float32", "shape": [2, 4],
                                         "data": [[1.5, "nan", "inf", "-inf"], [1e-45, 0.0, -0.0, 3.0]]}
    assert result.stderr == "8 elements: 1 NaN, 1 +inf, 1 -inf, 1 subnormal, 2 zero\n"


def test_empty_and_zero_dimensional_files(tmp_path):
    np.save(tmp_path / "empty.npy", np.zeros((0, 3), np.uint8))
    result = invoke("show", str(tmp_path / "empty.npy"))
    assert result.exit_code == 0 and "(no elements)" in result.stdout and "shape [0, 3]" in result.stdout
    np.save(tmp_path / "scalar.npy", np.float64(2.5))
    result = invoke("show", str(tmp_path / "scalar.npy"))
    assert result.exit_code == 0 and "2.5" in result.stdout.split() and "shape []" in result.stdout


@pytest.mark.parametrize("make,words", [
    (lambda p: None, "no such file"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b"\x93NUMPY garbage"), "malformed .npy header"),
    (lambda p: np.save(p, np.array([True, False])), "tensor"),
])
def test_unreadable_files_exit_2_with_one_line(tmp_path, make, words):
    path = tmp_path / "bad.npy"
    make(path)
    result = invoke("show", str(path))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("dmlcli: error: tensor ") and words in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_bare_list_needs_its_type():
    result = invoke("show", "[1, 2]")
    assert result.exit_code == 2 and "--dtype" in result.stderr


def test_help_has_an_example_and_its_exit_codes():
    for command in ("show", "inspect"):
        text = invoke(command, "--help").stdout
        assert "Example" in text and "2  usage error" in text and "3  " not in text


def test_counts_match_numpy_in_small_pieces():
    rng = np.random.default_rng(1)
    for dtype in ("float16", "float32", "float64"):
        array = rng.integers(0, 256, 4099 * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
        array[:4] = [0, -0.0, np.inf, np.finfo(dtype).smallest_subnormal]
        counts = count_values(array.reshape(1, 4099).T, chunk_elements=100)
        tiny = np.finfo(dtype).tiny
        assert counts.as_dict() == {
            "elements": 4099, "zero": int(np.sum(array == 0)), "nan": int(np.sum(np.isnan(array))),
            "+inf": int(np.sum(array == np.inf)), "-inf": int(np.sum(array == -np.inf)),
            "subnormal": int(np.sum((np.abs(array) < tiny) & (array != 0)))}
    assert count_values(np.arange(-3, 3, dtype=np.int64)).as_dict() == {"elements": 6, "zero": 1}


def test_a_big_npy_file_is_shown_in_constant_memory(tmp_path):
    """64 MiB of float32: the counts read it in pieces and the summarised table reads only its corners."""
    path = tmp_path / "big.npy"
    big = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(4096, 4096))
    big[0, 0], big[100, 7], big[4095, 4095], big[2000, 2000] = np.nan, np.inf, -np.inf, 1e-40
    big[0, 1] = 42.0
    del big
    tracemalloc.start()
    try:
        result = invoke("show", str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-1] == f"{4096 * 4096} elements: 1 NaN, 1 +inf, 1 -inf, 1 subnormal, {4096 * 4096 - 5} zero"
    assert any(line.split()[:3] == ["0", "nan", "42.0"] for line in lines) and "…" in result.stdout
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.1f} MiB"


def test_a_real_subprocess(tmp_path):
    np.save(tmp_path / "r.npy", SPECIAL)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "dmlcli", "show", "r.npy", "--format", "bits"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "0b01111111_10000000_00000000_00000000" in done.stdout
    missing = subprocess.run([sys.executable, "-m", "dmlcli", "inspect", "missing.npy"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stderr == "dmlcli: error: tensor 'missing.npy': no such file\n"
