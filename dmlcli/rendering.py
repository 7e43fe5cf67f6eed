"""Showing tensors to people: rich tables of values, bit patterns or hex, summarised when large."""

from __future__ import annotations

import itertools
import os

import numpy as np

FORMATS = ("table", "bits", "hex", "json")
SUMMARY_THRESHOLD = 1000  # as NumPy's print options: above this many elements, show the edges
EDGE_ITEMS = 3


def format_value(value, dtype: np.dtype, style: str) -> str:
    """One element as text: its value ("table"), bit pattern ("bits") or hex encoding ("hex")."""
    if style in ("bits", "hex"):
        width = dtype.itemsize * 8
        pattern = int(np.asarray(value, dtype=dtype).reshape(1).view(f"uint{width}")[0])
        if style == "hex":
            return f"0x{pattern:0{width // 4}x}"
        binary = f"{pattern:0{width}b}"
        return "0b" + "_".join(binary[i:i + 8] for i in range(0, width, 8))
    if dtype.kind == "f":
        return str(value)  # NumPy's shortest round-trip text: nan, inf, -0.0, 1e-45 ...
    return str(int(value))


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

    On a terminal through rich; in a pipe or file as plain text of the same layout, which never
    wraps and saves rich's import time for scripts.
    """
    tables = list(tables_of(array, style))
    if _is_terminal(stream):
        _show_rich(tables, caption, make_console(stream))
    else:
        stream.write("\n".join(_plain_lines(tables, caption)) + "\n")


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _plain_lines(tables, caption: str):
    for table in tables:
        if table is None:
            yield "..."
            continue
        label, headers, rows = table
        columns = [[""] + [r for r, _ in rows]] + [[h] + [cells[i] for _, cells in rows] for i, h in enumerate(headers)]
        widths = [max(len(text) for text in column) for column in columns]
        if label:
            yield label
        for line in range(len(rows) + 1):
            yield "   ".join(column[line].rjust(width) for column, width in zip(columns, widths)).rstrip()
            if line == 0:
                yield "─" * (sum(widths) + 3 * (len(widths) - 1))
    yield caption


def _show_rich(tables, caption: str, console) -> None:
    from rich import box
    from rich.table import Table

    for position, table in enumerate(tables):
        if table is None:
            console.print("...")
            continue
        label, headers, rows = table
        last = position == len(tables) - 1
        grid = Table(title=label or None, caption=caption if last else None, box=box.SIMPLE_HEAD,
                     show_edge=False, pad_edge=False)
        grid.add_column("", style="dim", justify="right", no_wrap=True)
        for header in headers:
            grid.add_column(header, justify="right", no_wrap=True)
        for row_label, cells in rows:
            grid.add_row(row_label, *cells)
        console.print(grid)


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
