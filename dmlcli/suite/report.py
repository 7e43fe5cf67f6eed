"""--report FILE.json: the run, machine-readable, with the versions that produced it; written atomically."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ..versions import versions
from .runner import SuiteRun

FORMAT_VERSION = 1


def report_document(run: SuiteRun) -> dict:
    return {
        "format": FORMAT_VERSION,
        "versions": versions(),
        "started": run.started,
        "duration": run.duration,
        "jobs": run.jobs,
        "backends": list(run.backends),
        "unavailable_backends": dict(run.unavailable),
        "settings": {"feature_level": run.settings.feature_level, "float_rules": run.settings.float_rules,
                     "keyword": run.settings.keyword, "allow_tf32": run.settings.allow_tf32},
        "totals": {**run.counts(), "files": run.files, "deselected": run.deselected, "not_run": run.not_run},
        "results": [{**asdict(r), "timings": dict(r.timings), "warnings": list(r.warnings), "name": r.name}
                    for r in run.results],
    }


def write_report(run: SuiteRun, target: str | Path) -> None:
    from ..io.atomic import write_atomically

    text = json.dumps(report_document(run), indent=1) + "\n"
    write_atomically(Path(target), lambda handle: handle.write(text.encode("utf-8")))
