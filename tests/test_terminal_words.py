"""What a person sees on a terminal, issue 31 item 7: `dmlcli ops` never splits a word ("cross_corre|lation" was
printed at 80 columns), and a table wrapped into column blocks never leaves one column alone in a block (a
summarised 40x30 table left column 29 by itself)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from dmlcli.display.rendering import (COLUMN_GAP, column_blocks, make_console, show, show_records, text_pieces,
                                      wrap_pieces)

from test_terminal import ANSI, Terminal, check_whole
from test_terminal_pty import in_a_terminal

WORD = re.compile(r"[A-Za-z0-9_\[\]]+")


def vocabulary(texts) -> set[str]:
    return {word for text in texts for word in WORD.findall(text)}


def ops_vocabulary() -> set[str]:
    """Every word `dmlcli ops` can print: names, families, tensor names, fields, choices, types, levels."""
    import json

    from click.testing import CliRunner

    from dmlcli.cli import cli

    listed = json.loads(CliRunner().invoke(cli, ["ops", "--format", "json"]).stdout)["operators"]
    found = vocabulary(json.dumps(listed).replace("\\", " ").split('"'))
    from dmlcli.feature_levels import ALL_FEATURE_LEVELS

    levels = {level.short for level in ALL_FEATURE_LEVELS}
    return found | levels | vocabulary(["operator inputs parameters output type since as or default none"])


@pytest.mark.parametrize("columns", [80, 100, 60])
def test_ops_never_splits_a_word(columns):
    code, lines = in_a_terminal("ops", columns=columns, rows=3000)
    assert code == 0 and all(len(line) <= columns for line in lines)
    known = ops_vocabulary()
    fragments = {word for line in lines for word in WORD.findall(line) if word not in known and not word.isdigit()}
    assert not fragments, sorted(fragments)[:20]
    text = "\n".join(lines)
    assert "cross_correlation" in text and "(none|linear|sigmoid|" in text.replace("\n", "")


def test_cells_break_between_words_and_after_a_choice():
    assert text_pieces("Mode (convolution|cross_correlation), Strides") == [
        (" ", "Mode"), (" ", "(convolution|"), ("", "cross_correlation),"), (" ", "Strides")]
    assert wrap_pieces("Mode (convolution|cross_correlation), Strides", 20) == (
        "Mode (convolution|\ncross_correlation),\nStrides")
    assert wrap_pieces("a_very_long_single_name", 5) == "a_very_long_single_name"  # whole, on its own line


@pytest.mark.parametrize("width", [30, 50, 80])
def test_records_keep_every_word_whole_at_any_width(width):
    rows = [["convolution", "Mode (convolution|cross_correlation), Direction (forward|backward)", "1_0"],
            ["gemm", "TransA (none|transpose), Alpha, Beta", "1_0"]]
    stream = io.StringIO()
    console = make_console(stream)
    console.width = width  # a console on a StringIO: give it the terminal's width
    show_records(console, "convolution (2)", ["operator", "parameters", "since"], rows, whole=(0, 2))
    shown = stream.getvalue()
    for word in ("cross_correlation", "convolution", "transpose", "Direction", "backward"):
        assert word in shown
    assert vocabulary([shown]) <= vocabulary([" ".join(" ".join(row) for row in rows),
                                              "convolution (2) operator parameters since"])


def test_a_summarised_40x30_table_leaves_no_column_alone(monkeypatch):
    """The issue's table: 7 columns shown (0 1 2 … 27 28 29), 6 fitting in 80 columns: two blocks of 4 and 3."""
    values = np.random.default_rng(0).standard_normal((40, 30)).astype(np.float32)
    monkeypatch.setenv("COLUMNS", "80")
    stream = Terminal()
    show(values, caption="CAPTION", style="table", stream=stream)
    lines = ANSI.sub("", stream.getvalue()).split("\n")[:-1]
    headers = [line.split() for position, line in enumerate(lines[:-1])
               if lines[position + 1] and set(lines[position + 1]) == {"─"}]
    assert headers == [["0", "1", "2", "…"], ["27", "28", "29"]]
    check_whole(values, "table", 80, lines)


@pytest.mark.parametrize("count,width", [(7, 80), (21, 80), (13, 50), (13, 40), (31, 200), (2, 20)])
def test_column_blocks_never_leave_a_column_alone_where_they_need_not(count, width):
    """A lone column is unavoidable only where no more than two fit a block and the count is odd (13 at 40)."""
    widths = [11] * count
    blocks = column_blocks(widths, 2, width)
    assert [i for block in blocks for i in block] == list(range(count))
    fitting = max(number for number in range(1, count + 1) if number == 1 or 2 + number * (COLUMN_GAP + 11) <= width)
    if fitting >= 3:
        assert all(len(block) > 1 for block in blocks), blocks
    elif fitting == 2:
        assert sum(len(block) == 1 for block in blocks) == count % 2
    else:  # not even two fit: a column a block
        assert all(len(block) == 1 for block in blocks)
    assert all(2 + sum(COLUMN_GAP + widths[i] for i in block) <= width for block in blocks if len(block) > 1)


def test_the_summarised_table_in_a_pseudo_terminal(tmp_path):
    values = np.random.default_rng(0).standard_normal((40, 30)).astype(np.float32)
    np.save(tmp_path / "x.npy", values)
    code, lines = in_a_terminal("show", "x.npy", cwd=tmp_path)
    assert code == 0 and all(len(line) <= 80 for line in lines)
    header_lines = [line.split() for position, line in enumerate(lines[:-1])
                    if lines[position + 1] and set(lines[position + 1]) == {"─"}]
    assert all(len(headers) > 1 for headers in header_lines), header_lines
