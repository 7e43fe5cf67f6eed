"""Several outputs through a pipe (issue 31, item 6): `run top_k ... -o - | run abs -` said "unknown key
'OutputIndexTensor'". Stdin holding a JSON object of outputs (what `-o -` prints for several) or an .npz is read
with a name, `-:OutputValueTensor` as `file.npz:name`; without one, the message lists the names."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dmlcli.cli import cli
from dmlcli.io.sources import read_tensor

from conftest import REPO

TOP_K = ["run", "top_k", "[[3, 1, 2, 5]]", "--dtype", "float32", "--k", "2", "--axis", "1"]


def invoke(*args, stdin=None):
    return CliRunner().invoke(cli, list(args), input=stdin)


@pytest.fixture(scope="module")
def outputs_json() -> str:
    result = invoke(*TOP_K, "-o", "-")
    assert result.exit_code == 0
    return result.stdout


@pytest.fixture(scope="module")
def outputs_npz(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("npz") / "top_k.npz"
    assert invoke(*TOP_K, "-o", str(path)).exit_code == 0
    return path.read_bytes()


def test_a_named_output_of_stdin_s_json(outputs_json):
    result = invoke("run", "abs", "-:OutputValueTensor", "-o", "-", stdin=outputs_json)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "float32", "shape": [1, 2], "data": [[5.0, 3.0]]}


def test_without_a_name_the_message_lists_the_names(outputs_json):
    result = invoke("run", "abs", "-", stdin=outputs_json)
    assert result.exit_code == 2
    assert result.stderr.strip() == ("dmlcli: error: input 1 (stdin): holds 2 tensors (OutputValueTensor, "
                                     "OutputIndexTensor); pick one as '-:NAME'")
    wrong = invoke("run", "abs", "-:OutputValue", stdin=outputs_json)
    assert wrong.exit_code == 2 and wrong.stderr.strip() == (
        "dmlcli: error: input 1 (stdin): has no tensor named 'OutputValue' (it holds OutputValueTensor, "
        "OutputIndexTensor)")


def test_two_names_are_one_read_of_stdin(outputs_json):
    result = invoke("run", "multiply", "-:OutputValueTensor", "-:OutputValueTensor", "-o", "-", stdin=outputs_json)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[25.0, 9.0]]
    both = invoke("run", "abs", "-", "-:OutputValueTensor", stdin=outputs_json)
    assert both.exit_code == 2 and "stdin can be read only once" in both.stderr


def test_an_npz_on_stdin(outputs_npz):
    result = invoke("run", "bit_not", "-:OutputIndexTensor", "-o", "-", stdin=outputs_npz)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[2**32 - 4, 2**32 - 1]]
    listed = invoke("run", "abs", "-", stdin=outputs_npz)
    assert listed.exit_code == 2 and listed.stderr.strip() == (
        "dmlcli: error: input 1 (stdin): holds 2 arrays (OutputValueTensor, OutputIndexTensor); pick one as '-:NAME'")


def test_a_name_for_a_single_tensor_is_refused_in_words():
    plain = invoke("run", "abs", "-:OutputTensor", "--dtype", "float32", stdin="[1, -2]")
    assert plain.exit_code == 2
    assert plain.stderr.strip() == ("dmlcli: error: input 1 (stdin): holds one tensor, not an object of named "
                                    "tensors: leave out :OutputTensor")
    buffer = io.BytesIO()
    np.save(buffer, np.array([1, 2], np.float32))
    npy = invoke("run", "abs", "-:x", stdin=buffer.getvalue())
    assert npy.exit_code == 2 and "holds one .npy array, which has no names: give - rather than '-:x'" in npy.stderr


def test_a_saved_object_of_outputs_is_read_by_name(outputs_json, tmp_path):
    saved = tmp_path / "top_k.json"
    saved.write_text(outputs_json)
    result = invoke("run", "abs", f"{saved}:OutputValueTensor", "-o", "-")
    assert result.exit_code == 0 and json.loads(result.stdout)["data"] == [[5.0, 3.0]]
    listed = invoke("run", "abs", str(saved))
    assert listed.exit_code == 2 and f"pick one as '{saved}:NAME'" in listed.stderr


def test_check_and_show_take_a_name_too(outputs_json):
    checked = invoke("run", "abs", "[[-5, 3]]", "--dtype", "float32", "--check", "-:OutputValueTensor",
                     stdin=outputs_json)
    assert checked.exit_code == 0 and checked.stdout.startswith("PASSED")
    shown = invoke("show", "-:OutputIndexTensor", stdin=outputs_json)
    assert shown.exit_code == 0 and "-:OutputIndexTensor · UINT32 · shape [1, 2]" in shown.stdout


def test_the_api_reader():
    document = json.dumps({"A": {"dtype": "int8", "data": [1]}, "B": {"dtype": "uint8", "data": [2, 3]}})
    assert read_tensor("-:B", label="x", stdin=io.StringIO(document)).tolist() == [2, 3]
    single = json.dumps({"A": {"dtype": "int8", "data": [1]}})
    assert read_tensor("-", label="x", stdin=io.StringIO(single)).tolist() == [1]  # the one tensor of the object


def test_the_issue_s_pipe_in_real_processes():
    """`run top_k ... -o - | run abs -:OutputValueTensor`, as a shell runs it."""
    command = [sys.executable, "-m", "dmlcli"]
    producer = subprocess.Popen([*command, *TOP_K, "-o", "-"], cwd=REPO, stdout=subprocess.PIPE)
    consumer = subprocess.run([*command, "run", "abs", "-:OutputValueTensor", "-o", "-"], cwd=REPO,
                              stdin=producer.stdout, capture_output=True, text=True, timeout=60)
    producer.stdout.close()
    assert producer.wait(timeout=60) == 0
    assert consumer.returncode == 0, consumer.stderr
    assert json.loads(consumer.stdout)["data"] == [[5.0, 3.0]]
    unnamed = subprocess.run(f"{sys.executable} -m dmlcli {' '.join(repr(a) for a in TOP_K)} -o - | "
                             f"{sys.executable} -m dmlcli run abs -", shell=True, cwd=REPO, capture_output=True,
                             text=True, timeout=60)
    assert unnamed.returncode == 2 and "pick one as '-:NAME'" in unnamed.stderr
