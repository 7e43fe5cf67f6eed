"""Output targets that are stdout rather than a file: kept apart so that a run on stdout loads no file writer.

Also how a target is written (.npy or JSON): `written_suffix` is the one place that decides it.
"""

from __future__ import annotations

import os

# `-o -` is JSON on stdout; `-o -.npy` (what `-o - --format npy` becomes) is .npy on stdout, for pipelines.
STDOUT_TARGETS = {"-": ".json", "-.json": ".json", "-.npy": ".npy"}
OUTPUT_SUFFIXES = (".npy", ".json")
OUTPUT_FORMATS = ("npy", "json")  # run's --format for an -o file


def is_stdout(target: str | None) -> bool:
    """Whether an output target is stdout (`-`, `-.json`, `-.npy`) rather than a file."""
    return target in STDOUT_TARGETS


def suffix(name: str) -> str:
    """What `pathlib.Path(name).suffix` gives (".npy", "" for "a", ".hidden" or "a."), without importing pathlib:
    a run on inline tensors to stdout asks this of its arguments and needs nothing else of pathlib."""
    components = [part for part in str(name).split("/") if part and part != "."]
    last = components[-1] if components else ""
    dot = last.rfind(".")
    return last[dot:] if 0 < dot < len(last) - 1 else ""


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
    found = suffix(target).lower()  # pathlib's PurePath(target).suffix, without importing pathlib
    if found in OUTPUT_SUFFIXES:
        return found
    return ".npy" if is_null_device(target) else None
