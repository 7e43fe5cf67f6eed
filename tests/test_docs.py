"""The documentation states what the code does: the generated operator reference is fresh, the counts written in
the pages are the table's, the README stays a front page, and every link between the pages resolves.

(Every example in the pages runs in tests/test_readme.py.)
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO, SHARED

DOCS = REPO / "docs"
README = REPO / "README.md"
REFERENCE = DOCS / "reference"
# Written pages: the README and docs/*.md; docs/reference/ is generated.
PAGES = [README] + sorted(DOCS.glob("*.md"))
# A count stated in the prose: the number, then a comment naming what it counts: 177<!-- count: operators -->.
COUNT = re.compile(r"(\d[\d,]*)<!-- count: ([^>]+?) -->")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")


def table_counts() -> dict[str, int]:
    """What each count key means, computed from the operator table and the data types here, not by the code that
    writes the reference."""
    from dmlcli import operators as table_of
    from dmlcli.data_types import ALL_DATA_TYPES
    from dmlcli.feature_levels import ALL_FEATURE_LEVELS
    from dmlcli.operators.table.index import FAMILY_MODULES

    families = {family for family, _ in FAMILY_MODULES}
    operators = [op for family, members in table_of.FAMILIES if family in families for op in members]
    elementwise = [op for op in operators if op.is_elementwise]
    counts = {
        "operators": len(operators),
        "element-wise": len(elementwise),
        "shaped": len(operators) - len(elementwise),
        "element-wise-prefixed": sum(op.dml_name.startswith("DML_OPERATOR_ELEMENT_WISE_") for op in elementwise),
        "element-wise-activations": sum(op.dml_name.startswith("DML_OPERATOR_ACTIVATION_") for op in elementwise),
        "feature-levels": len(ALL_FEATURE_LEVELS),
        "data-types": len(ALL_DATA_TYPES),
        "families": len(families),
        "scale-bias": sum(any(parameter.field == "ScaleBias" for parameter in op.parameters) for op in operators),
        "samples": len({path.name.rsplit("_", 1)[0] for path in (REPO / "samples").glob("*_expected.json")}),
    }
    for family, members in table_of.FAMILIES:
        if family in families:
            counts[f"family:{family}"] = len(members)
    return counts


def shared_count(paths: str) -> int:
    """`shared:A+B`: the case files (*.json) under ../shared/A and ../shared/B."""
    return sum(len(list((SHARED / path).rglob("*.json"))) for path in paths.split("+"))


def stated_counts() -> list[tuple[str, int, str, int]]:
    """(page, line, key, number) for every marked count in the written pages."""
    found = []
    for path in PAGES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in COUNT.finditer(line):
                found.append((path.relative_to(REPO).as_posix(), number, match.group(2),
                              int(match.group(1).replace(",", ""))))
    return found


def test_the_generated_reference_is_fresh():
    from dmlcli.docs import reference

    wanted = reference.pages()
    present = {path.name for path in REFERENCE.glob("*.md")} if REFERENCE.is_dir() else set()
    stale = sorted(name for name in wanted if name in present
                   and (REFERENCE / name).read_text(encoding="utf-8") != wanted[name])
    missing = sorted(set(wanted) - present)
    extra = sorted(present - set(wanted))
    problems = [f"{kind}: {', '.join(f'docs/reference/{name}' for name in names)}"
                for kind, names in (("stale", stale), ("missing", missing), ("extra", extra)) if names]
    assert not problems, ("the operator reference is not what the table gives; run "
                          f"`{reference.COMMAND}` and commit docs/reference/\n" + "\n".join(problems))


def test_the_reference_lists_every_operator_once_by_family():
    from dmlcli.docs import reference

    index = (REFERENCE / reference.INDEX).read_text(encoding="utf-8")
    linked = re.findall(r"^\| \[([a-z0-9_]+)\]\(\1\.md\) \|", index, flags=re.M)
    counts = table_counts()
    assert len(linked) == len(set(linked)) == counts["operators"]
    headings = re.findall(r"^## (.+)$", index, flags=re.M)
    assert len(headings) == counts["families"]


def test_the_reference_does_not_depend_on_the_terminal(monkeypatch):
    """The pages are made at a fixed width, whatever COLUMNS says or where stdout goes."""
    from dmlcli.docs import reference
    from dmlcli.operators import find_operator

    op = find_operator("lstm")
    monkeypatch.setenv("COLUMNS", "40")
    narrow = reference.operator_page(op)
    monkeypatch.setenv("COLUMNS", "300")
    assert reference.operator_page(op) == narrow
    lines = narrow.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert max(map(len, lines)) <= reference.WIDTH


def test_the_reference_writer_removes_pages_of_no_operator(tmp_path):
    from dmlcli.docs import reference

    (tmp_path / "no_such_operator.md").write_text("old\n")
    changed = reference.write(tmp_path)
    assert "no_such_operator.md" in changed and not (tmp_path / "no_such_operator.md").exists()
    assert reference.write(tmp_path) == []  # written once, nothing changes the second time
    assert (tmp_path / "bit_xor.md").read_text(encoding="utf-8") == (REFERENCE / "bit_xor.md").read_text(
        encoding="utf-8")


def test_counts_in_the_pages_are_the_tables():
    counts = table_counts()
    stated = stated_counts()
    keys = {key for _, _, key, _ in stated}
    # The front page and the operators page state the table's size; the tests page the shared data's.
    assert {"operators", "element-wise", "shaped", "feature-levels", "data-types", "families"} <= keys
    wrong = []
    for page, line, key, number in stated:
        if key.startswith("shared:"):
            if not SHARED.is_dir():
                continue
            actual = shared_count(key.removeprefix("shared:"))
        else:
            assert key in counts, f"{page} line {line}: unknown count key {key!r} (tests/test_docs.py table_counts)"
            actual = counts[key]
        if number != actual:
            wrong.append(f"{page} line {line}: says {number} for {key}, the table gives {actual}")
    assert not wrong, "\n".join(wrong)


# Phrases that state how many operators, families or levels there are: each must carry a count marker, so that
# no such figure can go stale unnoticed (an operator count in the text is either marked and tested, or not there).
UNMARKED = re.compile(r"(?<![\w.<>-])(\d+) (?:of DirectML's operators|operators\b(?! in)|element-wise ones|"
                      r"shaped operators|with shapes|families|feature levels|levels from)")


def test_operator_counts_in_prose_are_marked():
    unmarked = []
    for path in PAGES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in UNMARKED.finditer(line):
                following = line[match.end(1):match.end(1) + 4]
                if not following.startswith("<!--"):
                    unmarked.append(f"{path.relative_to(REPO)} line {number}: {match.group(0)!r}")
    assert not unmarked, ("counts stated without a <!-- count: KEY --> marker (tests/test_docs.py):\n"
                          + "\n".join(unmarked))


def test_the_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    lines = text.splitlines()
    # CI's .ci/run and the quick start rely on these two commands, first in the README.
    assert lines[2].startswith("<!-- readme-test: skip ")
    assert lines[4] == ("python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/dmlcli run bit_xor "
                        "samples/bit_xor_a.json samples/bit_xor_b.json")
    assert lines[5] == "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q"
    for heading in ("## Install", "## Quick start", "## Commands", "## Exit codes", "## Where to read more"):
        assert heading in lines, heading


def test_the_readme_and_the_index_link_every_docs_page():
    pages = {path.name for path in DOCS.glob("*.md")}
    readme_links = {Path(target).name for target in LINK.findall(README.read_text(encoding="utf-8"))
                    if target.startswith("docs/")}
    index_links = {Path(target.split("#")[0]).name for target in LINK.findall((DOCS / "README.md").read_text())}
    assert pages <= readme_links, sorted(pages - readme_links)
    assert pages - {"README.md"} <= index_links, sorted(pages - {"README.md"} - index_links)


def test_the_readme_lists_every_command():
    from dmlcli.cli import cli

    text = README.read_text(encoding="utf-8")
    for name in cli.list_commands(None):
        assert f"`dmlcli {name}" in text or f"alias `{name}`" in text, name


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation but hyphens and underscores dropped,
    spaces to hyphens."""
    found, fence = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        match = None if fence else HEADING.match(line)
        if match:
            text = re.sub(r"[^\w\- ]", "", match.group(2).lower())
            found.add(text.replace(" ", "-"))
    return found


@pytest.mark.parametrize("path", PAGES + [REFERENCE / "README.md"], ids=lambda path: path.relative_to(REPO).as_posix())
def test_links_resolve(path: Path):
    broken = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(REPO)}")
    assert not broken, f"{path.relative_to(REPO)}:\n" + "\n".join(broken)
