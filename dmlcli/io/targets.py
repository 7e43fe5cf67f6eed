"""Output targets that are stdout rather than a file: kept apart so that a run on stdout loads no file writer."""

from __future__ import annotations

# `-o -` is JSON on stdout; `-o -.npy` (what `-o - --format npy` becomes) is .npy on stdout, for pipelines.
STDOUT_TARGETS = {"-": ".json", "-.json": ".json", "-.npy": ".npy"}


def is_stdout(target: str | None) -> bool:
    """Whether an output target is stdout (`-`, `-.json`, `-.npy`) rather than a file."""
    return target in STDOUT_TARGETS
