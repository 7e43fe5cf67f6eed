"""dmlcli in a real pseudo-terminal of 80x24, as a person sees it (issue 12): whole numbers, row and
column indices, no line wider than the terminal once the colour escapes are stripped."""

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios

import numpy as np
import pytest

from conftest import REPO
from test_terminal import ANSI, check_whole

COLUMNS = 80


def in_a_terminal(*args: str, columns: int = COLUMNS, rows: int = 24, cwd=REPO) -> tuple[int, list[str]]:
    """Run dmlcli with stdin, stdout and stderr on a new pty of `columns` x `rows`; (exit code, lines seen)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {key: value for key, value in os.environ.items()
           if key not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM")}
    env["TERM"] = "xterm-256color"  # colours on, as in a person's terminal: the escapes are stripped below
    process = subprocess.Popen([sys.executable, "-m", "dmlcli", *args], stdin=slave, stdout=slave, stderr=slave,
                               cwd=cwd, env={**env, "PYTHONPATH": str(REPO)}, start_new_session=True)
    os.close(slave)
    received = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                os.killpg(process.pid, signal.SIGKILL)
                pytest.fail(f"dmlcli {' '.join(args)} wrote nothing for 120 s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            received += data
        code = process.wait(timeout=60)
    finally:
        os.close(master)
    text = ANSI.sub("", received.decode("utf-8")).replace("\r\n", "\n")
    assert "\x1b" not in text and "\r" not in text, repr(text)
    return code, text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def table_lines(lines: list[str], caption: str) -> list[str]:
    """The lines of the tables, after checking that the last one is the caption."""
    assert lines[-1] == caption, lines[-1]
    return lines[:-1]


@pytest.mark.parametrize("shape,dtype", [((16,), "uint32"), ((2, 16), "uint8"), ((30, 30), "uint8"),
                                         ((500,), "uint16"), ((2, 3, 40), "uint64")])
def test_tables_show_whole_numbers_with_their_indices(shape, dtype):
    values = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    code, lines = in_a_terminal("run", "bit_not", json.dumps(values.tolist()), "--dtype", dtype)
    assert code == 0
    caption = f"BIT_NOT · DML_FEATURE_LEVEL_6_4 · cpu · {dtype.upper()} · shape {list(shape)}"
    shown = table_lines(lines, caption)
    check_whole(~values, "table", COLUMNS, shown)
    assert all(len(line) <= COLUMNS for line in shown)


def test_float32_bit_patterns():
    values = np.array([1.5, -0.0, np.nan, np.inf, 1e-45, -3.4028235e38, 0.1, 2.0], dtype=np.float32)
    literal = json.dumps([str(v) if not np.isfinite(v) else float(v) for v in values])
    code, lines = in_a_terminal("run", "bit_not", literal, "--dtype", "float32", "--format", "bits")
    assert code == 0
    expected = (~values.view(np.uint32)).view(np.float32)
    caption = "BIT_NOT · DML_FEATURE_LEVEL_6_4 · cpu · FLOAT32 · shape [8]"
    check_whole(expected, "bits", COLUMNS, table_lines(lines, caption))


def test_ops_names_are_whole():
    from dmlcli import operators

    code, lines = in_a_terminal("ops")
    assert code == 0 and all(len(line) <= COLUMNS for line in lines)
    for op in operators.OPERATORS:
        # A family's title line ("convolution (3)") may start with an operator's name: it is not the row.
        [line] = [line for line in lines if line.split()[:1] == [op.cli_name]
                  and not re.fullmatch(r"\S+ \(\d+\)", line.strip())]
        assert op.introduced.short in line.split()


def test_an_error_is_one_whole_line():
    """A message is one line (so that it can be grepped); the terminal folds it, nothing is cut."""
    code, lines = in_a_terminal("run", "bit_xor", "[1.5]", "[2.5]", "--dtype", "float32", "--feature-level", "3_0")
    assert code == 3
    assert lines == ["dmlcli: error: BIT_XOR: ATensor data type FLOAT32 is not supported at DML_FEATURE_LEVEL_3_0 "
                     "(allowed: UINT32, UINT16, UINT8); supported from DML_FEATURE_LEVEL_4_1"]


def test_show_a_float_file(tmp_path):
    values = np.linspace(-1e30, 1e30, 900, dtype=np.float32).reshape(30, 30)
    values[0, :3] = [np.nan, -np.inf, 1e-45]
    np.save(tmp_path / "from_windows.npy", values)
    code, lines = in_a_terminal("show", "from_windows.npy", cwd=tmp_path)
    assert code == 0 and all(len(line) <= COLUMNS for line in lines)
    assert lines[-1] == "900 elements: 1 NaN, 0 +inf, 1 -inf, 1 subnormal, 0 zero"
    check_whole(values, "table", COLUMNS, table_lines(lines[:-1], "from_windows.npy · FLOAT32 · shape [30, 30]"))
