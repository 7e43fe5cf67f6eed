"""Output targets that are stdout rather than a file: kept apart so that a run on stdout loads no file writer."""

from __future__ import annotations

# `-o -` is JSON on stdout; `-o -.npy` (what `-o - --format npy` becomes) is .npy on stdout, for pipelines.
STDOUT_TARGETS = {"-": ".json", "-.json": ".json", "-.npy": ".npy"}


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
