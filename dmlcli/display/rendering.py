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


FOLDED_MIN_WIDTH = 8  # the narrowest a folded column of a record table may get before the list layout is used
_RECORD_GAP = 3  # rich's SIMPLE_HEAD box without edges: padding, divider, padding between two columns


def _shared_out(natural: list[int], available: int) -> list[int]:
    """Widths for folded columns: each its natural width where all fit, else an even share of what is left
    (a column narrower than its share keeps its width and leaves the rest to the others)."""
    widths = [0] * len(natural)
    order = sorted(range(len(natural)), key=lambda i: natural[i])
    for taken, i in enumerate(order):
        widths[i] = min(natural[i], available // (len(order) - taken))
        available -= widths[i]
    return widths


def show_records(console, title: str, headers: list[str], rows: list[list[str]], whole: tuple[int, ...] = (0,)) -> None:
    """A titled table of text records whose `whole` columns (names, levels) are never cut or folded.

    The other columns fold to fit the console's width. Where even that cannot fit (a narrow terminal),
    each record is printed as its own lines instead, `whole` columns first on one line and the others
    as `header: value` lines that wrap: a name is never cut.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    natural = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(headers)]
    folded = [i for i in range(len(headers)) if i not in whole]
    available = console.width - _RECORD_GAP * (len(headers) - 1) - sum(natural[i] for i in whole)
    if available >= sum(min(natural[i], FOLDED_MIN_WIDTH) for i in folded):
        # Widths are fixed here rather than left to rich, whose last resort when a table is too wide
        # is to narrow every column, the no_wrap ones too, which cut names.
        widths = dict(zip(folded, _shared_out([natural[i] for i in folded], available)))
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for i, header in enumerate(headers):
            if i in whole:
                table.add_column(header, no_wrap=True, width=natural[i])
            else:
                table.add_column(header, overflow="fold", width=widths[i])
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    from rich.padding import Padding

    console.print(Text(title, style="italic"), soft_wrap=False)  # wraps between words
    for row in rows:
        console.print(Text("  ".join(row[i] for i in whole), style="bold"), soft_wrap=True)
        for i, header in enumerate(headers):
            if i not in whole:
                console.print(Padding(Text(f"{header}: {row[i]}", overflow="fold"), (0, 0, 0, 4), expand=False),
                              soft_wrap=False)


def make_console(stream=None, *, stderr: bool = False):
    """A rich console that never wraps tables; colour only on a terminal and never with NO_COLOR."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1; the command line's own handler ends a closed pipe quietly with 141.
            self.quiet = True
            raise BrokenPipeError()

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
