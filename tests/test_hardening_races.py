"""Things other programs do during a run (issue 13, items 9 and 10), as a real process meets them.

An input truncated while it is read is "the file ended early" and exit 2 on every path (no SIGBUS), and
the temporary file goes. Every terminating signal that can be caught removes the temporary file, as
SIGINT and SIGTERM do, and the process then dies by that signal.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

OLD = b"old output: must survive"
SIDE = 8192  # 64 MiB of uint8: a streamed run takes a good second, long enough to be caught in the middle


def environment(**extra) -> dict:
    env = dict(os.environ, NO_COLOR="1", **extra)
    env.pop("DMLCLI_DEBUG", None)
    return env


def start(args, cwd: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dmlcli", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=environment(DMLCLI_CHUNK_BYTES="64K"), **kwargs)


def wait_until(condition, process: subprocess.Popen, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            raise AssertionError(f"the run ended ({process.returncode}) before {what}: "
                                 f"{process.stderr.read().decode()}")
        time.sleep(0.001)
    raise AssertionError(f"gave up waiting for {what}")


def temporaries(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


@pytest.fixture(scope="module")
def square(tmp_path_factory) -> np.ndarray:
    return np.arange(SIDE * SIDE, dtype=np.uint8).reshape(SIDE, SIDE)


def save(folder: Path, array: np.ndarray, fortran: bool) -> Path:
    path = folder / "input.npy"
    np.save(path, np.asfortranarray(array) if fortran else array)
    return path


# ---------------------------------------------------------------- 9: an input truncated during the run


@pytest.mark.parametrize("fortran", [False, True], ids=["C order", "Fortran order"])
def test_input_truncated_while_streaming(tmp_path, square, fortran):
    source = save(tmp_path, square, fortran)
    (tmp_path / "out.npy").write_bytes(OLD)
    process = start(["run", "bit_not", "input.npy", "-o", "out.npy"], tmp_path)
    wait_until(lambda: temporaries(tmp_path), process, "its temporary file appeared")
    os.truncate(source, 4096)  # the header stays; nearly all of the data go
    assert process.wait(timeout=120) == 2, process.stderr.read().decode()
    assert process.stderr.read().decode() == ("dmlcli: error: input 1 'input.npy': the file ended early (was it "
                                              "truncated while dmlcli was reading it?)\n")
    assert (tmp_path / "out.npy").read_bytes() == OLD
    assert temporaries(tmp_path) == []


def mapped_by(process: subprocess.Popen, path: Path) -> bool:
    try:
        return str(path) in Path(f"/proc/{process.pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/PID/maps to see the input mapped")
@pytest.mark.parametrize("fortran", [False, True], ids=["C order", "Fortran order"])
@pytest.mark.parametrize("output", [["--format", "hex"], ["-o", "out.npy"], ["-o", "out.json"]],
                         ids=["--format hex", "-o out.npy", "-o out.json"])
def test_input_truncated_during_an_in_memory_run(tmp_path, square, fortran, output):
    """The in-memory path maps the .npy to check it; the second input, JSON on stdin, holds the run there
    until the test has cut the first one."""
    source = save(tmp_path, square[:64, :1024], fortran)
    (tmp_path / "out.npy").write_bytes(OLD)
    (tmp_path / "out.json").write_bytes(OLD)
    process = start(["run", "bit_xor", "input.npy", "-", "--broadcast", *output], tmp_path, stdin=subprocess.PIPE)
    wait_until(lambda: mapped_by(process, source), process, "the input was mapped")
    os.truncate(source, 4096)
    process.stdin.write(b'{"dtype": "uint8", "data": [1]}')
    process.stdin.close()
    assert process.wait(timeout=120) == 2, process.stderr.read().decode()
    assert process.stderr.read().decode() == ("dmlcli: error: input 1 'input.npy': the file ended early (was it "
                                              "truncated while dmlcli was reading it?)\n")
    assert (tmp_path / "out.npy").read_bytes() == OLD and (tmp_path / "out.json").read_bytes() == OLD
    assert temporaries(tmp_path) == []


# ---------------------------------------------------------------- 10: terminating signals


SIGNALS = [name for name in ("SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM") if hasattr(signal, name)]


@pytest.mark.parametrize("name", SIGNALS)
@pytest.mark.parametrize("fortran", [False, True], ids=["C order", "Fortran order"])
def test_signal_during_a_streamed_write_removes_the_temporary_file(tmp_path, square, name, fortran):
    number = getattr(signal, name)
    save(tmp_path, square, fortran)
    (tmp_path / "out.npy").write_bytes(OLD)
    process = start(["run", "bit_not", "input.npy", "-o", "out.npy"], tmp_path)
    wait_until(lambda: temporaries(tmp_path), process, "its temporary file appeared")
    process.send_signal(number)
    assert process.wait(timeout=60) == -number  # died by the signal, as its sender expects
    assert process.stderr.read().decode() == f"dmlcli: stopped by {name}\n"
    assert (tmp_path / "out.npy").read_bytes() == OLD
    assert temporaries(tmp_path) == []


def test_signal_during_an_in_memory_write_removes_the_temporary_file(tmp_path, square):
    np.save(tmp_path / "input.npy", square)
    (tmp_path / "out.npy").write_bytes(OLD)
    # --check takes the in-memory path; the 64 MiB result is written (and fsynced) before it is compared.
    process = start(["run", "bit_not", "input.npy", "-o", "out.npy", "--check", "input.npy"], tmp_path)
    wait_until(lambda: temporaries(tmp_path), process, "its temporary file appeared")
    process.send_signal(signal.SIGHUP)
    assert process.wait(timeout=60) == -signal.SIGHUP
    assert (tmp_path / "out.npy").read_bytes() == OLD
    assert temporaries(tmp_path) == []


def test_sigint_and_sigterm_keep_their_exit_codes(tmp_path, square):
    save(tmp_path, square, fortran=False)
    for number, code, message in ((signal.SIGINT, 130, "dmlcli: interrupted\n"),
                                  (signal.SIGTERM, 143, "dmlcli: terminated\n")):
        process = start(["run", "bit_not", "input.npy", "-o", "out.npy"], tmp_path)
        wait_until(lambda: temporaries(tmp_path), process, "its temporary file appeared")
        process.send_signal(number)
        assert process.wait(timeout=60) == code
        assert process.stderr.read().decode() == message
        assert temporaries(tmp_path) == []
