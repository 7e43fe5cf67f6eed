"""stdout and stdin that fail (issue 13, item 13), as a real process sees them.

A full stdout (`> /dev/full`) is one line and exit 2; a closed stdout (`>&-`) too; a reader that went
away (`| head`) is a quiet exit 141; a closed stdin is exit 2 only where `-` asks for it. For every
command, --help and --version included, and never a traceback.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

MODEL = Path(__file__).parent / "models" / "bitwise_broadcast.json"

COMMANDS = {
    "--version": ["--version"],
    "--help": ["--help"],
    "run --help": ["run", "--help"],
    "ops": ["ops"],
    "describe": ["describe", "bit_xor"],
    "info": ["info"],
    "validate": ["validate", "bit_not", "[1]", "--dtype", "uint8"],
    "run (table)": ["run", "bit_not", "[1, 2]", "--dtype", "uint8"],
    "run --format hex": ["run", "bit_not", "[1, 2]", "--dtype", "uint8", "--format", "hex"],
    "run --format json": ["run", "bit_not", "[1, 2]", "--dtype", "uint8", "--format", "json"],
    "run -o -": ["run", "bit_not", "[1, 2]", "--dtype", "uint8", "-o", "-"],
    "run --check": ["run", "bit_not", "[1, 2]", "--dtype", "uint8", "--check", "[254, 253]"],
    "dispatch": ["dispatch", str(MODEL), "--no-timing"],
}


def environment() -> dict:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    return env


def dmlcli(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dmlcli", *args], env=environment(), stderr=subprocess.PIPE,
                          timeout=120, **kwargs)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("command", COMMANDS)
def test_full_stdout_is_one_line_and_exit_2(tmp_path, command):
    with open("/dev/full", "w") as full:
        result = dmlcli(COMMANDS[command], stdout=full, cwd=tmp_path)
    assert result.stderr.decode() == "dmlcli: error: stdout: no space left on device\n"
    assert result.returncode == 2


@pytest.mark.parametrize("command", COMMANDS)
def test_closed_stdout_is_one_line_and_exit_2(tmp_path, command):
    result = dmlcli(COMMANDS[command], preexec_fn=lambda: os.close(1), cwd=tmp_path)
    assert result.stderr.decode() == "dmlcli: error: stdout: is closed (nowhere to write the output)\n"
    assert result.returncode == 2


@pytest.mark.parametrize("command", COMMANDS)
def test_reader_gone_is_a_quiet_141(tmp_path, command):
    reading, writing = os.pipe()
    os.close(reading)  # before dmlcli writes: the reader has gone whatever the output's size
    try:
        result = dmlcli(COMMANDS[command], stdout=writing, cwd=tmp_path)
    finally:
        os.close(writing)
    assert (result.returncode, result.stderr) == (141, b"")


def test_large_output_through_head_exits_141(tmp_path):
    """`dmlcli run ... -o - | head -c 10`: the data stop at the pipe, and so does dmlcli, with 141 (not 0)."""
    np.save(tmp_path / "big.npy", np.arange(1_000_000, dtype=np.uint32))
    command = f"{sys.executable} -m dmlcli run bit_not big.npy -o - 2>err.txt | head -c 10; echo \" $?\" >>err.txt"
    shell = subprocess.run(["bash", "-c", "set -o pipefail; " + command], cwd=tmp_path, env=environment(),
                           capture_output=True, timeout=120)
    assert shell.stdout == b'{"dtype": '
    assert (tmp_path / "err.txt").read_text() == " 141\n"


def test_closed_stdin_with_dash_names_stdin(tmp_path):
    result = dmlcli(["run", "bit_not", "-", "-o", "out.npy"], preexec_fn=lambda: os.close(0), cwd=tmp_path,
                    stdout=subprocess.PIPE)
    assert result.returncode == 2
    assert result.stderr.decode() == ("dmlcli: error: input 1 (stdin): stdin is closed, so there is nothing to read "
                                      "(give a file instead of -)\n")
    assert os.listdir(tmp_path) == []


def test_closed_stdin_and_stdout_do_not_matter_when_unused(tmp_path):
    def close_both():
        os.close(0)
        os.close(1)

    result = dmlcli(["run", "bit_not", "[1, 2]", "--dtype", "uint8", "-o", "out.npy"], preexec_fn=close_both,
                    cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, b"")
    # Files opened while 0 and 1 were closed did not take those numbers: the output is whole and alone.
    assert sorted(os.listdir(tmp_path)) == ["out.npy"]
    assert np.array_equal(np.load(tmp_path / "out.npy"), [254, 253])
