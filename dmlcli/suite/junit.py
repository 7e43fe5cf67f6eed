"""JUnit XML, as Jenkins, GitLab and GitHub's test reporters read it (Ant's format), written with xml.etree.

One <testsuite> per operator, one <testcase> per case x backend (classname: the operator; name:
case id[backend]; time; file), with <failure>, <error> or <skipped> and its message; the first
differences as the element's text. Written atomically: a reader never sees half a file.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from pathlib import Path

from .runner import ERROR, FAILED, SKIPPED, CaseResult, SuiteRun

_ELEMENT = {FAILED: "failure", ERROR: "error", SKIPPED: "skipped"}


def _seconds(value: float) -> str:
    return f"{value:.6f}"


def _clean(text: str) -> str:
    # XML 1.0 cannot hold most control characters, whatever the escaping: a message must never break the file.
    return "".join(c if c in "\t\n\r" or ord(c) >= 0x20 else "?" for c in text)


def junit_tree(run: SuiteRun) -> ET.ElementTree:
    counts = run.counts()
    root = ET.Element("testsuites", name="dmlcli", tests=str(len(run.results)), failures=str(counts[FAILED]),
                      errors=str(counts[ERROR]), skipped=str(counts[SKIPPED]),
                      time=_seconds(sum(r.time for r in run.results)))
    by_op: dict[str, list[CaseResult]] = {}
    for result in run.results:
        by_op.setdefault(result.op, []).append(result)
    hostname = socket.gethostname() or "localhost"
    for index, (op, results) in enumerate(sorted(by_op.items())):
        suite = ET.SubElement(root, "testsuite", name=op, tests=str(len(results)),
                              failures=str(sum(r.verdict == FAILED for r in results)),
                              errors=str(sum(r.verdict == ERROR for r in results)),
                              skipped=str(sum(r.verdict == SKIPPED for r in results)),
                              time=_seconds(sum(r.time for r in results)), timestamp=run.started or "1970-01-01T00:00:00",
                              hostname=hostname, id=str(index), package="dmlcli")
        for result in results:
            case = ET.SubElement(suite, "testcase", classname=op, name=_clean(result.name),
                                 time=_seconds(result.time), file=_clean(result.file))
            if result.verdict in _ELEMENT:
                outcome = ET.SubElement(case, _ELEMENT[result.verdict], message=_clean(result.message),
                                        type=result.verdict)
                outcome.text = _clean(result.differences or result.message)
            if result.warnings:
                ET.SubElement(case, "system-err").text = _clean("\n".join(result.warnings))
    return ET.ElementTree(root)


def write_junit(run: SuiteRun, target: str | Path) -> None:
    from ..io.atomic import write_atomically

    tree = junit_tree(run)
    ET.indent(tree)
    write_atomically(Path(target), lambda handle: tree.write(handle, encoding="utf-8", xml_declaration=True))
