"""SIGKILL at any moment of a large run leaves the target either exactly as it was or complete.

A real `python -m dmlcli run bit_not big.npy -o out.npy` over 256 MiB (the streaming path) is
killed at several moments: before it writes anything, the instant its temporary file
`.out.npy.PID.RANDOM.tmp` appears, and at fractions of the time the write takes. A killed
process cannot remove its temporary file; the only file allowed beside the target afterwards
is that one, and the next write to the same target removes it.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

ELEMENTS = 1 << 28  # 256 MiB of uint8
PATTERN = bytes(range(251))
OLD_OUTPUT = np.arange(7, dtype=np.uint16)


@pytest.fixture(scope="module")
def big_input(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kill")
    path = folder / "big.npy"
    with open(path, "wb") as handle:
        npy_format.write_array_header_1_0(handle, {"descr": "|u1", "fortran_order": False, "shape": (ELEMENTS,)})
        repeats = ELEMENTS // len(PATTERN) + 1
        handle.write((PATTERN * repeats)[:ELEMENTS])
    return path


def start_run(source: Path, target: Path, chunk: str) -> subprocess.Popen:
    env = dict(os.environ, DMLCLI_CHUNK_BYTES=chunk, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "dmlcli", "run", "bit_not", str(source), "-o", str(target), "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def temporary_files(folder: Path, target: Path, pid: int | None = None) -> list[str]:
    prefix = f".{target.name}." + (f"{pid}." if pid is not None else "")
    return [name for name in os.listdir(folder) if name.startswith(prefix) and name.endswith(".tmp")]


def wait_for_temporary(process: subprocess.Popen, folder: Path, target: Path, limit: float = 30.0) -> float:
    """Poll until the run's temporary file appears; the time it appeared (None if the run ended first)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if temporary_files(folder, target, process.pid):
            return time.monotonic()
        if process.poll() is not None:
            return None
    raise AssertionError("the run neither wrote a temporary file nor finished")


def check_target(target: Path, source: Path, old_bytes: bytes) -> str:
    """'old' or 'complete'; fails on anything else."""
    if target.stat().st_size == len(old_bytes):
        assert target.read_bytes() == old_bytes, "the old output was changed"
        return "old"
    result = np.load(target, mmap_mode="r")
    assert result.dtype == np.uint8 and result.shape == (ELEMENTS,), (result.dtype, result.shape)
    assert np.array_equal(result, np.bitwise_not(np.load(source, mmap_mode="r"))), "partial or wrong result"
    return "complete"


def check_folder(folder: Path, target: Path, killed: list[int]) -> None:
    """Only the input, the target, and at most one temporary file of the last killed run that got to write.

    (A run removes the temporary files of dead runs before it writes, so earlier ones are gone
    unless the last run was killed before it got that far.)
    """
    extra = sorted(set(os.listdir(folder)) - {"big.npy", target.name})
    owners = [name[len(f".{target.name}."):].split(".")[0] for name in extra]
    assert all(name.endswith(".tmp") for name in extra), extra
    assert all(owner.isdigit() and int(owner) in killed for owner in owners), (extra, killed)
    assert len(extra) <= 1, extra


def test_sigkill_at_any_moment_leaves_old_or_complete_output(big_input, tmp_path):
    folder = big_input.parent
    target = folder / "out.npy"
    np.save(target, OLD_OUTPUT)
    old_bytes = target.read_bytes()

    # An undisturbed run, for its timing: how long after the temporary file appears does it end?
    process = start_run(big_input, folder / "timing.npy", "256K")
    appeared = wait_for_temporary(process, folder, folder / "timing.npy")
    assert process.wait(timeout=60) == 0, process.stderr.read().decode()
    writing = max(time.monotonic() - appeared, 0.05) if appeared else 0.05
    assert check_target(folder / "timing.npy", big_input, b"") == "complete"
    (folder / "timing.npy").unlink()

    outcomes = []
    killed = []
    # Before anything is written: killed while Python is still starting.
    process = start_run(big_input, target, "256K")
    time.sleep(0.05)
    process.kill()
    process.wait()
    killed.append(process.pid)
    outcomes.append(("at start", check_target(target, big_input, old_bytes)))
    check_folder(folder, target, killed)

    moments = [0.0, 0.15, 0.5, 0.85]
    for fraction in moments:
        process = start_run(big_input, target, "256K")
        appeared = wait_for_temporary(process, folder, target)
        if appeared is not None:
            delay = fraction * writing - (time.monotonic() - appeared)
            if delay > 0:
                time.sleep(delay)
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        killed.append(process.pid)
        state = check_target(target, big_input, old_bytes)
        outcomes.append((fraction, state))
        check_folder(folder, target, killed)
        if state == "complete":  # later moments need the old file back
            target.write_bytes(old_bytes)
    # The instant the temporary file appears, the run has not finished: the old file must be there.
    assert outcomes[1] == (0.0, "old"), outcomes
    assert any(state == "old" for _, state in outcomes[2:]), outcomes

    # A later run to the same target completes and removes the killed runs' temporary files.
    process = start_run(big_input, target, "1M")
    assert process.wait(timeout=60) == 0, process.stderr.read().decode()
    assert check_target(target, big_input, old_bytes) == "complete"
    assert temporary_files(folder, target) == []


def test_sigkill_of_an_in_memory_run(tmp_path):
    """The in-memory path (JSON inputs broadcast to a 64 MiB .npy) killed the instant its temporary file appears."""
    side = 8192
    column = [[value % 256] for value in range(side)]
    row = [[(value * 7) % 256 for value in range(side)]]
    (tmp_path / "column.json").write_text(json.dumps({"dtype": "uint8", "data": column}))
    (tmp_path / "row.json").write_text(json.dumps({"dtype": "uint8", "data": row}))
    target = tmp_path / "out.npy"
    np.save(target, OLD_OUTPUT)
    old_bytes = target.read_bytes()
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    command = [sys.executable, "-m", "dmlcli", "run", "bit_and", "column.json", "row.json", "--broadcast",
               "-o", "out.npy", "-q"]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    appeared = wait_for_temporary(process, tmp_path, target)
    assert appeared is not None, "the run finished before its temporary file was seen"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert target.read_bytes() == old_bytes
    extra = sorted(set(os.listdir(tmp_path)) - {"column.json", "row.json", "out.npy"})
    assert all(name.startswith(f".out.npy.{process.pid}.") for name in extra) and len(extra) <= 1, extra
    # Run to the end, the same command gives the complete result.
    finished = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    expected = np.array(column, np.uint8) & np.array(row, np.uint8)
    assert np.array_equal(np.load(target), expected)
    assert sorted(os.listdir(tmp_path)) == ["column.json", "out.npy", "row.json"]


def test_sigterm_removes_the_temporary_file(big_input):
    """SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C: exit 143, target untouched, no temporary file."""
    folder = big_input.parent
    target = folder / "terminated.npy"
    np.save(target, OLD_OUTPUT)
    old_bytes = target.read_bytes()
    process = start_run(big_input, target, "256K")
    appeared = wait_for_temporary(process, folder, target)
    assert appeared is not None, "the run finished before it could be terminated"
    process.terminate()
    assert process.wait(timeout=30) == 143
    assert process.stderr.read().decode().strip() == "dmlcli: terminated"
    assert target.read_bytes() == old_bytes
    assert temporary_files(folder, target) == []
