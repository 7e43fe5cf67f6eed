"""The progress bar of long streamed runs: bytes done, throughput and time left, on stderr.

Shown only when stderr is a terminal and the run handles enough data to take a noticeable
while; rich is imported only then, so short runs do not pay for it.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator, TextIO

# Inputs plus output: below this a streamed run takes well under a second on a laptop.
MIN_BYTES_FOR_PROGRESS = 256 << 20


def wants_progress_bar(total_bytes: int, *, quiet: bool, stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return not quiet and total_bytes >= MIN_BYTES_FOR_PROGRESS and bool(isatty and isatty())


def progress_bar_factory(*, quiet: bool, stream: TextIO | None = None, description: str = "dmlcli"):
    """A factory for dmlcli.run_files's `progress`: (total_bytes) -> context yielding advance(bytes)."""

    @contextlib.contextmanager
    def progress(total_bytes: int) -> Iterator[Callable[[int], None]]:
        target = stream if stream is not None else sys.stderr
        if not wants_progress_bar(total_bytes, quiet=quiet, stream=target):
            yield lambda done: None
            return
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        columns = (TextColumn(description), BarColumn(), DownloadColumn(binary_units=True),
                   TransferSpeedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(file=target), transient=True) as bar:
            task = bar.add_task(description, total=total_bytes)
            yield lambda done: bar.advance(task, done)

    return progress
