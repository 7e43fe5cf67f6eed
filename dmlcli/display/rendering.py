"""Showing tensors to people: rich tables of values, bit patterns or hex, summarised when large."""

from __future__ import annotations

import itertools
import os

import numpy as np

from ..scalars import format_value  # noqa: F401 - tables show values as --check reports them

FORMATS = ("table", "bits", "hex", "json")
SUMMARY_THRESHOLD = 1000  # as NumPy's print options: above this many elements, show the edges
EDGE_ITEMS = 3


def _edge_indices(length: int, summarise: bool) -> list[int | None]:
    """Indices to show along one axis; None marks the '...' gap."""
    if summarise and length > 2 * EDGE_ITEMS:
        return list(range(EDGE_ITEMS)) + [None] + list(range(length - EDGE_ITEMS, length))
    return list(range(length))


def slices_of(array: np.ndarray):
    """(label, 2-D array or None for a '...' gap) for each 2-D slice of a tensor of rank >= 2."""
    summarise = array.size > SUMMARY_THRESHOLD
    leading = [_edge_indices(n, summarise) for n in array.shape[:-2]]
    for index in itertools.product(*leading):
        if None in index:
            if all(i is None or i == 0 for i in index[index.index(None) + 1:]):
                yield "...", None
            continue
        label = "[" + ", ".join([str(i) for i in index] + [":", ":"]) + "]"
        yield label, array[index]


def grid_rows(matrix: np.ndarray, style: str, summarise: bool):
    """(column headers, rows of (row label, cells)) for one 2-D slice."""
    rows_shown = _edge_indices(matrix.shape[0], summarise)
    cols_shown = _edge_indices(matrix.shape[1], summarise)
    headers = ["…" if c is None else str(c) for c in cols_shown]
    rows = []
    for r in rows_shown:
        if r is None:
            rows.append(("…", ["…"] * len(cols_shown)))
            continue
        cells = ["…" if c is None else format_value(matrix[r, c], matrix.dtype, style) for c in cols_shown]
        rows.append((str(r), cells))
    return headers, rows


def tables_of(array: np.ndarray, style: str):
    """(slice label, column headers, rows) for each 2-D table a tensor is shown as; None for a '...' gap."""
    summarise = array.size > SUMMARY_THRESHOLD
    view = array.reshape(1, -1) if array.ndim == 1 else array
    slices = [("", view)] if view.ndim == 2 else slices_of(view)
    for label, matrix in slices:
        if matrix is None:
            yield None
            continue
        headers, rows = grid_rows(matrix, style, summarise)
        if array.ndim == 1:
            rows = [("", cells) for _, cells in rows]
        yield label, headers, rows


def show(array: np.ndarray, *, caption: str, style: str, stream) -> None:
    """Print `array` as tables: a 2-D grid, higher ranks as labelled 2-D slices.

    On a terminal through rich, at the terminal's width: a grid wider than the terminal is wrapped
    into column blocks on element boundaries, each keeping the row indices and its column indices,
    so no value is ever cut. In a pipe or file as plain text of the same layout, never wrapped, which
    saves rich's import time for scripts.
    """
    if array.ndim == 0:  # a 0-D .npy file (DirectML has no 0-D tensors, but `show` may meet one)
        array = array.reshape(1)
    tables = [] if array.size == 0 else list(tables_of(array, style))
    if _is_terminal(stream):
        console = make_console(stream)
        _print_lines(layout_lines(tables, caption, console.width), console)
    else:
        stream.write("\n".join(text for text in _plain(layout_lines(tables, caption, None))) + "\n")


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# A line is a list of (text, role) pieces; the role picks the style on a terminal and is dropped in a pipe.
Line = list[tuple[str, str]]
_STYLES = {"label": "italic", "header": "bold", "index": "dim", "rule": "", "cell": "", "caption": "dim italic",
           "": ""}
COLUMN_GAP = 3  # spaces between columns


def column_blocks(widths: list[int], label_width: int, width: int | None) -> list[range]:
    """Consecutive runs of columns whose line, with the row-index column, fits in `width`.

    Breaks only between columns, so a value is never cut. A column wider than `width` on its own
    (a 64-bit bit pattern is 73 characters; a 32-bit one with a row index is over 40) gets a block of its own
    and that one line is wider than the terminal: the terminal folds it, the value stays whole.
    """
    if width is None:
        return [range(len(widths))]
    blocks, start, used = [], 0, label_width
    for index, column_width in enumerate(widths):
        if index > start and used + COLUMN_GAP + column_width > width:
            blocks.append(range(start, index))
            start, used = index, label_width
        used += COLUMN_GAP + column_width
    blocks.append(range(start, len(widths)))
    if len(blocks) == 1 or len(blocks[-1]) > 1:
        return blocks
    # The last block would hold one column alone (issue 31: a summarised 40x30 table left column 29 by itself):
    # the same number of blocks, the columns shared out evenly, where they fit.
    return _even_blocks(widths, label_width, width, len(blocks)) or blocks


def _even_blocks(widths: list[int], label_width: int, width: int, count: int) -> list[range] | None:
    """`count` consecutive blocks whose column counts differ by at most one, or None where one would not fit."""
    base, extra = divmod(len(widths), count)
    blocks, start = [], 0
    for number in range(count):
        end = start + base + (1 if number < extra else 0)
        if label_width + sum(COLUMN_GAP + widths[i] for i in range(start, end)) > width:
            return None
        blocks.append(range(start, end))
        start = end
    return blocks


def _wrapped(text: str, width: int | None) -> list[str]:
    """Words wrapped at `width` (never inside a word); the whole text where there is no width."""
    import textwrap

    if width is None:
        return [text]
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def layout_lines(tables, caption: str, width: int | None) -> list[Line]:
    """The lines that show `tables` (from `tables_of`) and `caption` within `width` columns (None: no limit)."""
    lines: list[Line] = [] if tables else [[("(no elements)", "")]]
    for table in tables:
        if table is None:
            lines.append([("...", "")])
            continue
        label, headers, rows = table
        label_width = max(len(row_label) for row_label, _ in rows)
        widths = [max([len(header)] + [len(cells[i]) for _, cells in rows]) for i, header in enumerate(headers)]
        if label:
            lines.extend([(text, "label")] for text in _wrapped(label, width))
        blocks = column_blocks(widths, label_width, width)
        for number, block in enumerate(blocks):
            if number:
                lines.append([])  # a blank line between column blocks
            lines.append(_joined([(" " * label_width, "")] + [(headers[i].rjust(widths[i]), "header") for i in block]))
            rule = label_width + sum(COLUMN_GAP + widths[i] for i in block)
            lines.append([("─" * rule, "rule")])
            for row_label, cells in rows:
                lines.append(_joined([(row_label.rjust(label_width), "index")]
                                     + [(cells[i].rjust(widths[i]), "cell") for i in block]))
    lines.extend([(text, "caption")] for text in _wrapped(caption, width))
    return lines


def _joined(pieces: Line) -> Line:
    """Pieces separated by the column gap, with the line's trailing blanks removed."""
    line: Line = []
    for position, (text, role) in enumerate(pieces):
        if position:
            line.append((" " * COLUMN_GAP, ""))
        line.append((text, role))
    while line and not line[-1][0].strip():
        line.pop()
    if line:
        line[-1] = (line[-1][0].rstrip(), line[-1][1])
    return line


def _plain(lines: list[Line]):
    for line in lines:
        yield "".join(text for text, _ in line)


def _print_lines(lines: list[Line], console) -> None:
    from rich.text import Text

    for line in lines:
        text = Text()
        for piece, role in line:
            text.append(piece, style=_STYLES[role] or None)
        # The lines already fit (see column_blocks): rich must neither wrap nor crop them.
        console.print(text, soft_wrap=True, crop=False, overflow="ignore", no_wrap=True)


_RECORD_GAP = 3  # rich's SIMPLE_HEAD box without edges: padding, divider, padding between two columns


def text_pieces(text: str) -> list[tuple[str, str]]:
    """(separator, piece) for the places a cell may break: between words, and after each '|' of a list of
    choices ("(none|linear|sigmoid)"), never inside a name."""
    pieces = []
    for word in text.split():
        parts = [part + "|" for part in word.split("|")]
        parts[-1] = parts[-1][:-1]
        pieces.extend((" " if index == 0 else "", part) for index, part in enumerate(parts) if part)
    return pieces


def longest_piece(text: str) -> int:
    return max((len(piece) for _, piece in text_pieces(text)), default=0)


def wrap_pieces(text: str, width: int) -> str:
    """`text` on lines of at most `width` characters, broken only where text_pieces allows (a piece wider than
    `width` on a line of its own, whole)."""
    lines: list[str] = []
    line = ""
    for separator, piece in text_pieces(text):
        joined = line + (separator if line else "") + piece
        if line and len(joined) > width:
            lines.append(line)
            line = piece
        else:
            line = joined
    lines.append(line)
    return "\n".join(lines)


def _shared_out(natural: list[int], available: int, minimum: list[int]) -> list[int]:
    """Widths for folded columns: each at least its minimum (its longest piece), the rest shared out evenly
    towards each column's natural width (a column that needs less than its share leaves the rest to the others)."""
    widths = list(minimum)
    spare = available - sum(minimum)
    order = sorted(range(len(natural)), key=lambda i: natural[i] - minimum[i])
    for taken, i in enumerate(order):
        grow = min(natural[i] - minimum[i], spare // (len(order) - taken))
        widths[i] += grow
        spare -= grow
    return widths


def show_records(console, title: str, headers: list[str], rows: list[list[str]], whole: tuple[int, ...] = (0,)) -> None:
    """A titled table of text records whose `whole` columns (names, levels) are never cut or folded.

    The other columns wrap to fit the console's width, between words and after a '|' of a list of choices, never
    inside a word (issue 31: "cross_corre|lation"). Where even each column's longest word cannot fit (a narrow
    terminal), each record is printed as its own lines instead, `whole` columns first on one line and the others
    as `header: value` lines that wrap the same way.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    natural = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(headers)]
    folded = [i for i in range(len(headers)) if i not in whole]
    minimum = [max([len(headers[i])] + [longest_piece(row[i]) for row in rows]) for i in folded]
    available = console.width - _RECORD_GAP * (len(headers) - 1) - sum(natural[i] for i in whole)
    if available >= sum(minimum):
        # Widths are fixed here and the cells wrapped here rather than by rich, whose last resort when a table is
        # too wide is to narrow every column, the no_wrap ones too, which cut names, and whose folding cuts words.
        widths = dict(zip(folded, _shared_out([natural[i] for i in folded], available, minimum)))
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for i, header in enumerate(headers):
            table.add_column(header, no_wrap=True, overflow="ignore", width=natural[i] if i in whole else widths[i])
        for row in rows:
            table.add_row(*[cell if i in whole else wrap_pieces(cell, widths[i]) for i, cell in enumerate(row)])
        console.print(table)
        return
    from rich.padding import Padding

    console.print(Text(title, style="italic"), soft_wrap=False)  # wraps between words
    for row in rows:
        console.print(Text("  ".join(row[i] for i in whole), style="bold"), soft_wrap=True)
        for i, header in enumerate(headers):
            if i not in whole:
                wrapped = wrap_pieces(f"{header}: {row[i]}", max(console.width - 4, 1))
                console.print(Padding(Text(wrapped, no_wrap=True, overflow="ignore"), (0, 0, 0, 4), expand=False),
                              soft_wrap=True)


def make_console(stream=None, *, stderr: bool = False, width: int | None = None):
    """A rich console that never wraps tables; colour only on a terminal and never with NO_COLOR.

    With `width`, a plain console of that many columns whatever the stream is (no colour, no terminal queries):
    text that must not depend on where it is made, such as the generated operator reference."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1; the command line's own handler ends a closed pipe quietly with 141.
            self.quiet = True
            raise BrokenPipeError()

    if width is not None:
        return _Console(file=stream, stderr=stderr, highlight=False, soft_wrap=True, width=width, no_color=True,
                        color_system=None, force_terminal=False, legacy_windows=False)
    console = _Console(file=stream, stderr=stderr, highlight=False, soft_wrap=True)
    if console.is_terminal and os.environ.get("NO_COLOR"):
        # rich's own NO_COLOR support drops colours but keeps bold, dim and italic: no-color.org asks for
        # no styling at all, so no colour system, and so no escape sequences.
        console = _Console(file=stream, stderr=stderr, highlight=False, soft_wrap=True, no_color=True,
                           color_system=None)
    if not console.is_terminal:
        # In a pipe or file, lines are as long as the table needs: nothing is cut or folded.
        console = _Console(file=stream, stderr=stderr, highlight=False, soft_wrap=True,
                           width=100_000, no_color=True, color_system=None)
    return console
