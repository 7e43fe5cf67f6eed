"""Every example in README.md and docs/*.md runs, and what it prints is what the page shows.

The pages are README.md and every page of docs/ but the generated operator reference (docs/reference/, which
holds describe's text and no examples; tests/test_docs.py keeps it fresh).

- ```console blocks: each `$ command` runs in a shell; the lines after it, up to the next `$`, are its
  output (stdout and stderr together, as a terminal shows them). In an expected line `...` stands for any
  text (timings, paths); a line that is only `...` stands for any number of lines.
- ```bash blocks: each command runs and must exit 0 (a trailing `# comment` is the shell's own).
- ```python blocks run as a script.

They run in a scratch folder that has the repository's samples/ and tests/models/ and the small files the
examples name (a.npy, b.npy, x.npy, big.npy, repro.json, and ../shared), with `dmlcli` and `python` on PATH meaning this
interpreter's. A fence is preceded by `<!-- readme-test: REASON -->` when it is not run here:
`skip <why>` (installing, hour-long benchmarks), `gpu` (needs CuPy and a GPU: run where there is one),
`no-gpu` (what a machine without CuPy prints). A bash line naming an object store or a remote scheduler
(`s3://`, `gs://`, `tcp://`) is not run; Zarr examples run where the `[dask]` extra is installed.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SHARED, SHARED_MISSING

README = REPO / "README.md"
# README first, then docs/ by name; docs/reference/ is generated (tests/test_docs.py) and holds no examples.
PAGES = [README] + sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\w*)\s*$")
REMOTE = re.compile(r"\b(?:s3|gs|tcp)://")
MARKER = re.compile(r"^<!-- readme-test: (\S+)(?: (.*))? -->\s*$")


@dataclass(frozen=True)
class Block:
    page: str          # the page's path below the repository, README.md or docs/NAME.md
    language: str
    line: int          # of the opening fence, 1-based
    text: str
    marker: str        # "" when the block runs everywhere

    reason: str = ""   # the marker's words after its kind: why the block is not run here

    @property
    def id(self) -> str:
        return f"{self.page}-{self.language}-line{self.line}"

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line}"


def page_blocks(path: Path) -> list[Block]:
    page = path.relative_to(REPO).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(j for j in range(index + 1, len(lines)) if lines[j].startswith("```"))
        marker = MARKER.match(lines[index - 1]) if index else None
        blocks.append(Block(page, opening.group(1), index + 1, "\n".join(lines[index + 1:end]),
                            marker.group(1) if marker else "", (marker.group(2) or "") if marker else ""))
        index = end + 1
    return blocks


@functools.cache  # a GPU backend is made once, not once per example line
def gpu_usable() -> bool:
    from dmlcli.backends import gpu
    from dmlcli.errors import BackendUnavailableError
    try:
        gpu.create()
    except BackendUnavailableError:
        return False
    return True


def runnable(block: Block) -> None:
    if "../shared" in block.text and not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)
    if block.marker == "skip":
        pytest.skip(f"marked not to run here in {block.page}: {block.reason}")
    if block.marker == "gpu" and not gpu_usable():
        pytest.skip("needs a usable GPU")
    if block.marker == "no-gpu" and gpu_usable():
        pytest.skip("shows what a machine without a GPU prints")


@pytest.fixture
def scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, command in (("dmlcli", f'"{sys.executable}" -m dmlcli'), ("python", f'"{sys.executable}"'),
                          ("python3", f'"{sys.executable}"')):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        script.chmod(0o755)
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "samples").symlink_to(REPO / "samples")
    (work / "tests" / "models").symlink_to(REPO / "tests" / "models")
    rng = np.random.default_rng(0)
    for name in ("a.npy", "b.npy", "big.npy"):
        np.save(work / name, rng.integers(0, 256, (64, 64), dtype=np.uint8))
    np.save(work / "x.npy", np.float32([1, np.nan, np.inf, -0.0]))
    (work / "repro.json").write_text((REPO / "tests" / "models" / "bitwise_broadcast.json").read_text())
    if importlib.util.find_spec("zarr") is not None:  # the "Dask and Zarr" examples' stores
        import zarr
        for name, shape in (("a.zarr", (64, 64)), ("b.zarr", (64, 64)), ("row.zarr", (1, 64))):
            store = zarr.create_array(str(work / name), shape=shape, dtype=np.uint8, chunks=(32, 32))
            store[...] = rng.integers(0, 256, shape, dtype=np.uint8)
    if SHARED.is_dir():  # the examples name ../shared, as from a clone with the reference data beside it
        (tmp_path / "shared").symlink_to(SHARED)
    python_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=python_path,
               COLUMNS="200", TERM="dumb")
    return work, env


def shell(command: str, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120)


def console_examples(text: str) -> list[tuple[str, list[str]]]:
    examples: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            examples.append((line[2:], []))
        elif examples:
            examples[-1][1].append(line)
    return examples


def line_pattern(expected: str) -> str:
    return ".*".join(re.escape(piece) for piece in expected.rstrip().split("..."))


def matches(expected: list[str], got: list[str]) -> bool:
    pattern = "".join("(?:.*\n)*?" if line.strip() == "..." else line_pattern(line) + r"[ \t]*\n"
                      for line in expected)
    return re.fullmatch(pattern, "".join(line + "\n" for line in got)) is not None


def bash_commands(text: str) -> list[str]:
    joined = text.replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


BLOCKS = [block for path in PAGES for block in page_blocks(path) if block.language in ("console", "bash", "python")]


def test_the_readme_has_runnable_examples():
    languages = [block.language for block in BLOCKS if block.page == "README.md" and not block.marker]
    assert languages.count("console") >= 2 and "bash" in languages and "python" in languages


def test_every_docs_page_is_read_for_examples():
    """Every docs page is in PAGES (the generated reference aside), and most of them show runnable examples."""
    pages = {block.page for block in BLOCKS if not block.marker}
    assert {"README.md", "docs/cli.md", "docs/checking.md", "docs/operator-families.md", "docs/test-suites.md",
            "docs/dxdispatch.md", "docs/python-api.md"} <= pages
    assert not any(path.parent.name == "reference" for path in PAGES)


def test_every_marker_says_why():
    """A block is left unrun only for a reason a reader can weigh: `skip` and `gpu` markers carry their words."""
    for path in PAGES:
        for block in page_blocks(path):
            if block.marker:
                assert block.marker in ("skip", "gpu", "no-gpu"), f"{block.where}: unknown marker {block.marker}"
            if block.marker == "skip":
                assert block.reason.strip(), f"{block.where}: a skip marker without its reason"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.id)
def test_documented_example(block: Block, scratch):
    runnable(block)
    work, env = scratch
    if block.language == "python":
        result = subprocess.run([sys.executable, "-c", block.text], cwd=work, env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return
    if block.language == "bash":
        for command in bash_commands(block.text):
            if "--backend gpu" in command and not gpu_usable():
                continue
            if REMOTE.search(command):  # an object store or a cluster elsewhere: nothing to reach from a test
                continue
            result = shell(command, work, env)
            assert result.returncode == 0, f"{block.where}: {command}\n{result.stderr}"
        return
    examples = console_examples(block.text)
    assert examples, f"{block.where}: a console block with no `$ ` command"
    for command, expected in examples:
        while expected and not expected[-1].strip():
            expected.pop()
        result = shell(command, work, env)
        got = (result.stdout + result.stderr).rstrip("\n").splitlines() if (result.stdout + result.stderr) else []
        if block.marker == "gpu":
            assert result.returncode == 0, f"{command}\n{result.stderr}"
            continue
        assert matches(expected, got), (f"{block.where}: {command}\n--- the page shows:\n"
                                        + "\n".join(expected) + "\n--- dmlcli printed:\n" + "\n".join(got))


def test_matching_rules():
    assert matches(["a ... b"], ["a 1.5 ms b"])
    assert matches(["x", "...", "y"], ["x", "1", "2", "y"])
    assert matches(["x", "...", "y"], ["x", "y"])
    assert not matches(["x", "y"], ["x", "z"])
    assert not matches(["x"], ["x", "extra"])
    assert bash_commands("a \\\n  b  # c\n# only a comment\n") == ["a    b  # c"]


def test_without_shared_the_tests_that_need_it_skip_saying_why(tmp_path):
    """The README promises: no ../shared, those tests skip with a reason, the rest run."""
    env = dict(os.environ, DMLCLI_SHARED=str(tmp_path / "absent"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                             "tests/test_core_conformance.py", "tests/test_ops_arithmetic.py", "-k", "onnx or case"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "failed" not in result.stdout
    assert f"{tmp_path / 'absent'} not found: these tests read the reference data in ../shared" in result.stdout
