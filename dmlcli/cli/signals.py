"""Terminating signals other than SIGINT and SIGTERM: unwind (so temporary files are removed), then die by them.

SIGINT (Ctrl-C, exit 130) and SIGTERM (exit 143) are the command group's own. Every other signal whose
default action ends the process and that can be caught (a closed terminal's SIGHUP, SIGQUIT, the user
signals, timers) would end dmlcli on the spot and leave an output's temporary file behind. Here they
raise `Signalled`, which unwinds through the writers' cleanup like Ctrl-C; then the signal's default
action is restored and the signal sent again, so the exit status is the signal's, as the sender expects.
SIGPIPE is left alone: Python ignores it and a write to a closed pipe fails with EPIPE (exit 141).
"""

from __future__ import annotations

import contextlib
import os
# The C module under signal.py: the same functions and numbers, without the enum classes signal.py makes at
# import (about a millisecond of every start-up, issue 21); signal.py is loaded only to name a signal that came.
import _signal
import sys
from typing import Iterator

_NAMES = ("SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGIO",
          "SIGPWR", "SIGSTKFLT")
CAUGHT = tuple(getattr(_signal, name) for name in _NAMES if hasattr(_signal, name))


class Signalled(BaseException):
    """A terminating signal arrived. A BaseException, so that no `except Exception` on the way swallows it."""

    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


def _raise_signalled(number, frame):
    raise Signalled(number)


@contextlib.contextmanager
def unwinding_signals() -> Iterator[None]:
    """Within the block, the signals of CAUGHT unwind it; after the unwinding the process dies by the signal."""
    previous = {}
    try:
        for number in CAUGHT:
            previous[number] = _signal.signal(number, _raise_signalled)
    except (ValueError, OSError):  # not the main thread, or a signal this system will not let be caught
        pass
    try:
        yield
    except Signalled as received:
        if os.environ.get("DMLCLI_DEBUG") == "1":  # where it struck, for bug reports (--debug sets this too)
            import traceback

            traceback.print_exc(file=sys.stderr)
        _restore(previous)
        _die_by(received.number)
    finally:
        _restore(previous)


def _restore(previous: dict) -> None:
    for number, handler in previous.items():
        _signal.signal(number, handler if handler is not None else _signal.SIG_DFL)
    previous.clear()


def _die_by(number: int) -> None:
    import signal  # for the signal's name

    try:
        sys.stderr.write(f"dmlcli: stopped by {signal.Signals(number).name}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass  # a closed terminal (SIGHUP) may take stderr with it
    if number == getattr(_signal, "SIGQUIT", None):
        try:  # SIGQUIT's default action dumps core: a Python process's core helps no one
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
    _signal.signal(number, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {number})
    os.kill(os.getpid(), number)
    sys.exit(128 + number)  # only where the signal did not end the process (its default is to be ignored)
