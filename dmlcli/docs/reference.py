"""The per-operator reference, docs/reference/: one page per operator, generated from the table.

Each page is what `dmlcli describe OP` prints (its own text builder, cli.catalog.print_description), rendered at a
fixed width so that the files do not depend on the terminal they were made on; docs/reference/README.md lists every
operator by family with links. `python -m dmlcli.docs.reference` rewrites the folder (and removes pages of
operators that are gone); tests/test_docs.py regenerates it in memory and fails when a file is stale, missing or
extra, so that a change to an entry comes with its page.

    python -m dmlcli.docs.reference [FOLDER]     # default: docs/reference beside the package
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

# Wide enough for the support tables of most operators on one line each; fixed, so the output never depends on the
# terminal (a narrower table's cells wrap between words, as describe's do on an 100-column terminal).
WIDTH = 120
FOLDER = Path(__file__).resolve().parents[2] / "docs" / "reference"
INDEX = "README.md"
COMMAND = "python -m dmlcli.docs.reference"
NOTICE = f"<!-- Generated from the operator table by `{COMMAND}`: edit the table, not this file. -->"


def table_families() -> list[tuple[str, tuple]]:
    """DirectML's families in `dmlcli ops` order, each with its entries sorted by name (no registered plug-ins)."""
    from .. import operators as table_of
    from ..operators.table.index import FAMILY_MODULES

    listed = {family for family, _ in FAMILY_MODULES}
    return [(family, tuple(sorted(members, key=lambda op: op.cli_name)))
            for family, members in table_of.FAMILIES if family in listed]


def description(op) -> str:
    """describe's text for the operator at WIDTH columns, without colour, trailing spaces stripped."""
    from ..cli.catalog import print_description
    from ..display.rendering import make_console

    stream = io.StringIO()
    console = make_console(stream, width=WIDTH)
    console.soft_wrap = False  # prose wraps between words at WIDTH, as describe's does on a terminal
    print_description(console, op.cli_name, op, None)
    return "\n".join(line.rstrip() for line in stream.getvalue().splitlines())


def operator_page(op) -> str:
    return "\n".join([
        f"# {op.cli_name}",
        "",
        NOTICE,
        "",
        f"[Operator reference](README.md) · family **{op.family}** · `{op.dml_name}` · since {op.introduced.short}",
        "",
        op.summary,
        "",
        f"What `dmlcli describe {op.cli_name}` prints (`--format json` gives the same as data; "
        f"`dmlcli run {op.cli_name} --help` shows a call that runs as printed):",
        "",
        "```text",
        description(op),
        "```",
        "",
    ])


def index_page(families: list[tuple[str, tuple]]) -> str:
    from ..feature_levels import ALL_FEATURE_LEVELS

    count = sum(len(members) for _, members in families)
    elementwise = sum(op.is_elementwise for _, members in families for op in members)
    lines = [
        "# Operator reference",
        "",
        NOTICE,
        "",
        f"All {count} operators of dmlcli's table, {elementwise} element-wise and {count - elementwise} shaped, "
        f"in {len(families)} families as `dmlcli ops` lists them; each page is what `dmlcli describe` prints "
        f"(formula, tensors, result class and tolerance, parameters with defaults, decisions and sources, and the "
        f"support table at all {len(ALL_FEATURE_LEVELS)} feature levels). The families' common rules: "
        "[Operators](../operators.md) and [Operator families](../operator-families.md).",
        "",
        " · ".join(f"[{family}](#{anchor(family)}) ({len(members)})" for family, members in families),
        "",
    ]
    for family, members in families:
        lines += [f"## {family}", "", "| operator | DirectML | since | result | summary |", "| --- | --- | --- | --- | --- |"]
        for op in members:
            summary = op.summary.replace("|", "\\|")
            lines.append(f"| [{op.cli_name}]({op.cli_name}.md) | `{op.dml_name}` | {op.introduced.short} | "
                         f"{op.exactness} | {summary} |")
        lines.append("")
    return "\n".join(lines)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading of words (lower case, spaces to hyphens)."""
    return "-".join(heading.lower().split())


def pages() -> dict[str, str]:
    """Every file of the reference folder by name, as the table gives it now."""
    families = table_families()
    found = {f"{op.cli_name}.md": operator_page(op) for _, members in families for op in members}
    found[INDEX] = index_page(families)
    return found


def write(folder: Path = FOLDER) -> list[str]:
    """Write every page whose text changed, remove pages of no operator; the names changed, sorted."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = pages()
    changed = []
    for name, text in wanted.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    for path in folder.glob("*.md"):
        if path.name not in wanted:
            path.unlink()
            changed.append(path.name)
    return sorted(changed)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    folder = Path(arguments[0]) if arguments else FOLDER
    changed = write(folder)
    print(f"{folder}: {len(changed)} file(s) written or removed" + (f": {', '.join(changed)}" if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
