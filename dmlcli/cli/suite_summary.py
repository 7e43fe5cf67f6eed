"""The end of a run on stdout: per-case lines (-v), the table per operator, each failure, the closing line.

On a terminal the table is rich's; in a pipe or file every line is plain text (no colour, never cut).
-q leaves out the table and gives one line per failure; -v adds one line per case, in the run's order.
"""

from __future__ import annotations

from typing import TextIO

from ..errors import printable
from ..suite.runner import ERROR, FAILED, PASSED, SKIPPED, VERDICTS, SuiteRun

_LABEL = {PASSED: "PASSED", FAILED: "FAILED", ERROR: "ERROR", SKIPPED: "SKIPPED"}


def per_operator(run: SuiteRun) -> list[tuple[str, dict[str, int]]]:
    table: dict[str, dict[str, int]] = {}
    for result in run.results:
        row = table.setdefault(printable(result.op), dict.fromkeys(VERDICTS, 0))
        row[result.verdict] += 1
    return sorted(table.items())


def closing_line(run: SuiteRun) -> str:
    """pytest's last line: '3 passed, 1 failed, 0 errors, 0 skipped in 0.52s'."""
    counts = run.counts()
    parts = [f"{counts[PASSED]} passed", f"{counts[FAILED]} failed", f"{counts[ERROR]} errors",
             f"{counts[SKIPPED]} skipped"]
    if run.deselected:
        parts.append(f"{run.deselected} deselected")
    if run.not_run:
        parts.append(f"{run.not_run} not run (-x)")
    return ", ".join(parts) + f" in {run.duration:.2f}s"


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def print_summary(run: SuiteRun, stream: TextIO, verbosity: int = 0) -> None:
    """verbosity -1 (-q), 0 or 1 (-v). What comes from the case files (names, operators, messages) is printed with
    its control characters escaped (a case's "op" may hold ESC or BEL)."""
    lines: list[str] = []
    for backend, reason in run.unavailable.items():
        lines.append(f"{backend}: not available ({reason}); ran on {', '.join(run.backends)}")
    if verbosity > 0:
        lines += [f"{printable(r.name)} {_LABEL[r.verdict]}" + (f" ({printable(r.message)})" if r.verdict == SKIPPED
                                                                else "") for r in run.results]
    bad = [r for r in run.results if r.verdict in (FAILED, ERROR)]
    terminal = _is_terminal(stream)
    if verbosity >= 0:
        if lines:
            stream.write("\n".join(lines) + "\n")
            lines = []
        _table(run, stream, terminal)
        for result in bad:
            lines.append("")
            lines.append(f"{_LABEL[result.verdict]} {printable(result.name)}  ({printable(str(result.file))}, backend "
                         f"{result.backend})")
            lines.append(f"  {printable(result.message)}")
            if result.differences and result.verdict == FAILED:
                lines += ["  " + printable(line) for line in result.differences.splitlines()[1:]]
        if bad:
            lines.append("")
    else:
        lines += [f"{_LABEL[r.verdict]} {printable(r.name)} - {printable(r.message)}" for r in bad]
    lines.append(closing_line(run))
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def _table(run: SuiteRun, stream: TextIO, terminal: bool) -> None:
    rows = per_operator(run)
    if not rows:
        return
    totals = {v: sum(row[v] for _, row in rows) for v in VERDICTS}
    headers = ("operator", "passed", "failed", "errors", "skipped")
    if terminal:
        from rich.table import Table
        from rich.text import Text

        from ..display.rendering import make_console

        table = Table(title=f"dmlcli test · {', '.join(run.backends)}")
        table.add_column(headers[0])
        for header in headers[1:]:
            table.add_column(header, justify="right")
        for name, row in rows + [("total", totals)]:
            cells = [str(row[v]) for v in VERDICTS]
            style = "red" if row[FAILED] or row[ERROR] else None
            table.add_row(Text(name), *cells, style=style, end_section=name == rows[-1][0])  # Text: no markup
        make_console(stream).print(table)
        return
    body = [(name, *(str(row[v]) for v in VERDICTS)) for name, row in rows + [("total", totals)]]
    widths = [max(len(line[i]) for line in [headers, *body]) for i in range(len(headers))]
    out = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    for line in body:
        if line[0] == "total":
            out.append("-" * len(out[0]))
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    stream.write("\n".join(out) + "\n")
