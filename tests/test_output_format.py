"""run's --format with -o (issue 21c): --format npy|json names the output file's format whatever its extension.

-o PATH --format npy|json writes that format; a path without .npy or .json and without --format is refused
with a message that names --format; a FIFO or character device needs --format too (its name says nothing),
except /dev/null, which takes any (without --format it is written .npy: the bytes are thrown away);
--format table|bits|hex stay refused with -o, and so does --format with a Zarr store. Through CliRunner
and as a real subprocess (a FIFO read by another process, /dev/null).
"""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dmlcli.cli import cli

ROOT = Path(__file__).resolve().parents[1]
A, B = "[[1,2],[3,200]]", "[[255,7],[3,1]]"
CALL = ["run", "bit_xor", A, B, "--dtype", "uint8"]


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def written(tmp_path: Path, name: str, *extra: str) -> bytes:
    result = invoke(*CALL, "-o", str(tmp_path / name), *extra)
    assert result.exit_code == 0, result.output
    return (tmp_path / name).read_bytes()


def test_format_names_the_file_format_whatever_the_extension(tmp_path):
    as_json = written(tmp_path, "reference.json")
    as_npy = written(tmp_path, "reference.npy")
    assert written(tmp_path, "out.txt", "--format", "json") == as_json
    assert written(tmp_path, "out", "--format", "json") == as_json
    assert written(tmp_path, "out.bin", "--format", "npy") == as_npy
    assert written(tmp_path, "swapped.json", "--format", "npy") == as_npy  # the format wins over the extension
    assert written(tmp_path, "swapped.npy", "--format", "json") == as_json
    assert written(tmp_path, "same.npy", "--format", "npy") == as_npy
    assert np.load(tmp_path / "out.bin").tolist() == [[254, 5], [0, 201]]


def test_streamed_npy_run_into_a_file_named_by_format(tmp_path):
    """.npy inputs into `-o out.dat --format npy` stream (constant memory) and give np.save's bytes."""
    a = np.arange(3000, dtype=np.uint16)
    np.save(tmp_path / "a.npy", a)
    result = invoke("run", "bit_not", str(tmp_path / "a.npy"), "-o", str(tmp_path / "out.dat"), "--format", "npy",
                    "-q")
    assert result.exit_code == 0, result.output
    assert np.array_equal(np.load(tmp_path / "out.dat"), ~a)
    expected = tmp_path / "expected.npy"
    np.save(expected, ~a)
    checked = invoke("run", "bit_not", str(tmp_path / "a.npy"), "-o", str(tmp_path / "o.txt"), "--format", "json",
                     "--check", str(expected))
    assert checked.exit_code == 0 and "PASSED" in checked.stdout, checked.output
    assert json.loads((tmp_path / "o.txt").read_text())["data"][:2] == [65535, 65534]


@pytest.mark.parametrize("name, words", [
    ("out", "output '{}': no extension; name the format with --format npy or --format json"),
    ("out.txt", "output '{}': unknown extension '.txt'; name the format with --format npy or --format json"),
])
def test_an_unknown_extension_without_format_is_refused_naming_format(tmp_path, name, words):
    target = str(tmp_path / name)
    result = invoke(*CALL, "-o", target)
    assert result.exit_code == 2 and words.format(target) in result.stderr and result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("extra, words", [
    (["-o", "out.npy", "--format", "table"], "--format table shows a result on stdout"),
    (["-o", "out", "--format", "bits"], "with -o, --format takes npy or json"),
    (["-o", "out.json", "--format", "hex"], "with -o, --format takes npy or json"),
    (["-o", "out.zarr", "--format", "npy"], "is a Zarr store, written as Zarr; leave --format out"),
    (["-o", "-.json", "--format", "npy"], "-o -.json already names how stdout is written"),
])
def test_format_refusals(tmp_path, monkeypatch, extra, words):
    monkeypatch.chdir(tmp_path)
    result = invoke(*CALL, *extra)
    assert result.exit_code == 2 and words in result.stderr and result.stderr.count("\n") == 1, result.output
    assert list(tmp_path.iterdir()) == []


def test_dev_null_takes_any_format():
    for extra in ([], ["--format", "npy"], ["--format", "json"]):
        result = invoke(*CALL, "-o", os.devnull, *extra)
        assert result.exit_code == 0 and result.stdout == "", result.output


def test_dev_null_with_check_compares_in_memory(tmp_path):
    """A streamed check reads its output back; /dev/null cannot be, so the check runs in memory."""
    a = np.arange(100, dtype=np.uint8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "e.npy", ~a)
    result = invoke("run", "bit_not", str(tmp_path / "a.npy"), "-o", os.devnull, "--check", str(tmp_path / "e.npy"))
    assert result.exit_code == 0 and "PASSED" in result.stdout, result.output


def _dmlcli(*args, timeout=60):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dmlcli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_needs_format_and_then_takes_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused = _dmlcli(*CALL, "-o", str(fifo))
    assert refused.returncode == 2
    assert refused.stderr == (f"dmlcli: error: output '{fifo}': is a FIFO, whose name does not say how to write the "
                              "result: give --format npy or --format json\n")
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    done = _dmlcli(*CALL, "-o", str(fifo), "--format", "json")
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert json.loads(received[0]) == {"dtype": "uint8", "shape": [2, 2], "data": [[254, 5], [0, 201]]}


def test_dev_null_in_a_real_process(tmp_path):
    a = np.arange(5000, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    for extra in ([], ["--format", "json"]):
        done = _dmlcli("run", "negate", str(tmp_path / "a.npy"), "-o", os.devnull, "-q", *extra)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
