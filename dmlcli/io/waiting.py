"""A note on the terminal while reading a FIFO waits: a named pipe nobody writes into blocks the read silently.

`dmlcli run x.json` where x.json is a FIFO, or `dmlcli test case.json` where the case is one, waits for a writer
as `cat` would, which is how pipes are meant to be used; but with nothing said, a forgotten FIFO looks like a hang.
When stderr is a terminal and the read has not finished after half a second, one line says what is awaited.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from typing import Iterator

NOTE_AFTER_SECONDS = 0.5


def is_fifo(path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def note_while_waiting(path, what: str) -> Iterator[None]:
    """Around the read of `path`: where it is a FIFO and stderr a terminal, a note naming `what` once the read
    has waited NOTE_AFTER_SECONDS (written by a timer thread: the read blocks this one)."""
    if not is_fifo(path) or not _stderr_is_terminal():
        yield
        return
    import threading

    note = (f"dmlcli: waiting for {what}: it is a FIFO (named pipe) and nothing has written into it yet; start the "
            "program that writes it, or press Ctrl-C\n")
    timer = threading.Timer(NOTE_AFTER_SECONDS, _say, (note,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _say(note: str) -> None:
    try:
        sys.stderr.write(note)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
