"""Output targets that are stdout rather than a file: kept apart so that a run on stdout loads no file writer.

Also how a target is written (.npy or JSON): `written_suffix` is the one place that decides it.
"""

from __future__ import annotations

import os
from pathlib import PurePath

# `-o -` is JSON on stdout; `-o -.npy` (what `-o - --format npy` becomes) is .npy on stdout, for pipelines.
STDOUT_TARGETS = {"-": ".json", "-.json": ".json", "-.npy": ".npy"}
OUTPUT_SUFFIXES = (".npy", ".json")
OUTPUT_FORMATS = ("npy", "json")  # run's --format for an -o file


def is_stdout(target: str | None) -> bool:
    """Whether an output target is stdout (`-`, `-.json`, `-.npy`) rather than a file."""
    return target in STDOUT_TARGETS


def is_null_device(target: str) -> bool:
    """Whether `target` is (or links to) /dev/null, which takes any format: what is written there is lost."""
    return os.path.realpath(target) == os.devnull


def written_suffix(target: str, output_format: str | None = None) -> str | None:
    """What `target` is written as, ".npy" or ".json": stdout's own format, else `output_format` (--format
    npy|json, whatever the extension), else the extension; /dev/null without either takes .npy. None where
    none of these says (the caller refuses the target)."""
    if is_stdout(target):
        return STDOUT_TARGETS[target]
    if output_format is not None:
        return f".{output_format}"
    suffix = PurePath(target).suffix.lower()
    if suffix in OUTPUT_SUFFIXES:
        return suffix
    return ".npy" if is_null_device(target) else None
