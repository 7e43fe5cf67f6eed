"""What a person sees on a terminal (issue 12, bugs 1 and 2): tables wrapped on element boundaries at the
terminal's width, never a cut value; `ops` with whole names. Rendered through a forced terminal here, and
in a real pseudo-terminal in tests/test_terminal_pty.py."""

import io
import re

import numpy as np
import pytest

from dmlcli.display.rendering import show

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
DTYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float32", "float64"]
SHAPES = [(16,), (2, 16), (30, 30), (500,), (2, 3, 40), (5000,), (40, 40), (3, 4, 5, 60)]


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as a real one does."""

    def isatty(self):
        return True


def random_tensor(shape, dtype: str, seed: int = 0) -> np.ndarray:
    """Random bit patterns: every value of the type is possible (floats: NaN, inf, -0.0, subnormals)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    array = raw.view(dtype).reshape(shape)
    if dtype.kind == "f":  # and the special values for sure, at the start where they are always shown
        flat = array.reshape(-1)
        flat[:6] = [np.nan, np.inf, -np.inf, -0.0, np.finfo(dtype).smallest_subnormal, np.finfo(dtype).max]
    return array


def on_terminal(array, style: str, width: int, monkeypatch, caption: str = "CAPTION") -> list[str]:
    monkeypatch.setenv("COLUMNS", str(width))
    stream = Terminal()
    show(array, caption=caption, style=style, stream=stream)
    return ANSI.sub("", stream.getvalue()).split("\n")[:-1]


def cell_matches(cell: str, value, dtype: np.dtype, style: str) -> bool:
    """Whether `cell` is the whole text of `value`, parsed back."""
    bits = dtype.itemsize * 8
    pattern = int(np.asarray(value, dtype=dtype).reshape(1).view(f"uint{bits}")[0])
    if style == "hex":
        return re.fullmatch(f"0x[0-9a-f]{{{bits // 4}}}", cell) is not None and int(cell, 16) == pattern
    if style == "bits":
        groups = "_".join(["[01]{8}"] * (bits // 8))
        return re.fullmatch(f"0b{groups}", cell) is not None and int(cell[2:].replace("_", ""), 2) == pattern
    if dtype.kind == "f":
        parsed = dtype.type(cell)
        if np.isnan(value):
            return cell == "nan"
        return np.asarray(parsed).view(f"uint{bits}") == pattern  # -0.0 and 0.0 told apart
    return re.fullmatch(r"-?[0-9]+", cell) is not None and int(cell) == int(value)


def parse_tables(lines: list[str], ndim: int):
    """(slice index, column indices, [(row index, cells)]) for every column block, from the lines shown
    (the caption, if any, starts with CAPTION)."""
    blocks, index, position = [], (), 0
    while position < len(lines):
        line = lines[position]
        if line.startswith("["):
            index = tuple(int(part) for part in line.strip("[]").split(", ") if part != ":")
            position += 1
            continue
        if line in ("", "..."):
            position += 1
            continue
        if position + 1 < len(lines) and lines[position + 1] and set(lines[position + 1]) == {"─"}:
            headers = line.split()
            rows = []
            position += 2
            while position < len(lines) and lines[position] and not lines[position].startswith("[") \
                    and lines[position] != "..." and not lines[position].startswith("CAPTION"):
                tokens = lines[position].split()
                row = tokens.pop(0) if ndim >= 2 else "0"
                assert len(tokens) == len(headers), lines[position]
                rows.append((row, tokens))
                position += 1
            blocks.append((index, headers, rows))
            continue
        assert line.startswith("CAPTION"), f"unexpected line {line!r}"
        position += 1
    return blocks


def check_whole(array: np.ndarray, style: str, width: int, lines: list[str]) -> None:
    """Every cell shown is '…' or the whole value at its indices; no line wider than `width` but one
    that holds a single cell too wide for any terminal of that width; every element is shown unless
    the tensor is summarised."""
    matrix_of = (lambda index: array.reshape(1, -1)) if array.ndim == 1 else (lambda index: array[index])
    seen = set()
    blocks = parse_tables(lines, array.ndim)
    assert blocks
    for index, headers, rows in blocks:
        matrix = matrix_of(index)
        for row, cells in rows:
            for header, cell in zip(headers, cells):
                if cell == "…":
                    assert row == "…" or header == "…"
                    continue
                assert cell_matches(cell, matrix[int(row), int(header)], array.dtype, style), (row, header, cell)
                seen.add((index, int(row), int(header)))
    if array.size <= 1000:
        assert len(seen) == array.size
    else:
        assert "…" in "".join(lines)
    for line in lines:
        if len(line) > width:
            cells = line.split()
            assert style == "bits" and array.dtype.itemsize >= 4, line  # 32 or 64 bits and a row index
            assert len(cells) <= (2 if array.ndim >= 2 else 1), f"{len(line)} > {width}: {line!r}"


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize("style", ["table", "bits", "hex"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_cell_is_a_whole_value_at_any_width(dtype, style, width, monkeypatch):
    for number, shape in enumerate(SHAPES):
        array = random_tensor(shape, dtype, seed=number)
        check_whole(array, style, width, on_terminal(array, style, width, monkeypatch))


@pytest.mark.parametrize("width", [40, 80])
def test_wrapped_blocks_keep_row_and_column_indices(width, monkeypatch):
    """The issue's cases: 16 uint32 at 80 columns were all `4…`, a 2x16 uint8 `2…` without row indices."""
    values = np.arange(16, dtype=np.uint32) + 4294967280
    lines = on_terminal(values, "table", width, monkeypatch)
    assert "4294967295" in "\n".join(lines) and "…" not in "\n".join(lines)
    grid = np.arange(32, dtype=np.uint8).reshape(2, 16) + 200
    lines = on_terminal(grid, "table", width, monkeypatch)
    blocks = parse_tables(lines, 2)
    assert len(blocks) > 1  # wrapped into column blocks, each with both row indices
    assert all([row for row, _ in rows] == ["0", "1"] for _, _, rows in blocks)
    assert [int(h) for _, headers, _ in blocks for h in headers] == list(range(16))


def test_the_caption_wraps_between_words(monkeypatch):
    caption = "LOGICAL_GREATER_THAN_OR_EQUAL · DML_FEATURE_LEVEL_6_4 · cpu · UINT8 · shape [2, 16]"
    lines = on_terminal(np.zeros((2, 16), np.uint8), "table", 40, monkeypatch, caption=caption)
    tail = [line for line in lines if "·" in line or "shape" in line]
    assert len(tail) > 1 and all(len(line) <= 40 for line in tail)
    assert " ".join(tail).split() == caption.split()


def test_a_pipe_is_never_wrapped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    stream = io.StringIO()
    show(np.arange(16, dtype=np.uint32), caption="CAPTION", style="table", stream=stream)
    lines = stream.getvalue().splitlines()
    assert lines[0].split() == [str(i) for i in range(16)] and len(lines) == 4


@pytest.mark.parametrize("width", [40, 60, 80, 100, 200])
def test_ops_shows_every_name_and_level_whole(width, monkeypatch):
    """Issue 12, bug 2: at 80 columns `since` shrank to nothing and names were cut (`logical_greater_th…`)."""
    from click.testing import CliRunner

    from dmlcli import operators
    from dmlcli.cli import cli

    monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes CliRunner's stdout for a terminal of COLUMNS
    monkeypatch.setenv("COLUMNS", str(width))
    result = CliRunner().invoke(cli, ["ops"])
    assert result.exit_code == 0
    lines = ANSI.sub("", result.stdout).splitlines()
    assert all(len(line.rstrip()) <= width for line in lines)
    for op in operators.OPERATORS:
        # A family's title ("convolution (3)") may start with an operator's name: it is not that operator's row.
        [line] = [line for line in lines if line.split()[:1] == [op.cli_name]
                  and not re.fullmatch(r"\(\d+\)", (line.split() + [""])[1])]
        assert op.introduced.short in line.split(), line
    assert "…" not in result.stdout


@pytest.mark.parametrize("width", [40, 80, 120])
@pytest.mark.parametrize("name", ["bit_xor", "quantize_linear", "logical_greater_than_or_equal"])
def test_describe_never_cuts_a_data_type_or_level(name, width, monkeypatch):
    from click.testing import CliRunner

    from dmlcli import operators
    from dmlcli.cli import cli

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", str(width))
    result = CliRunner().invoke(cli, ["describe", name])
    assert result.exit_code == 0 and "…" not in result.stdout
    lines = ANSI.sub("", result.stdout).splitlines()
    assert all(len(line.rstrip()) <= width for line in lines if " " in line.strip())  # one long word may fold
    words = {word.strip(",;") for line in lines for word in line.split()}
    op = operators.find_operator(name)
    for row in op.support:
        assert row.level.short in words
        for support in row.tensors.values():
            assert {t.name for t in support.data_types} <= words
