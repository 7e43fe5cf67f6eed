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


# Signals the main thread has begun to act on (its Python-level handler ran): the watchdog leaves those to it.
_HANDLED: set[int] = set()
# How long the main thread has to act on a signal before the watchdog ends the process itself.
GRACE_SECONDS = 1.0


def note_handled(number: int) -> None:
    """Called by each Python-level handler: the main thread is unwinding for signal `number`."""
    _HANDLED.add(number)


class Signalled(BaseException):
    """A terminating signal arrived. A BaseException, so that no `except Exception` on the way swallows it."""

    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


def _raise_signalled(number, frame):
    note_handled(number)
    raise Signalled(number)


@contextlib.contextmanager
def watchdog() -> Iterator[None]:
    """Within the block (in the main thread), a terminating signal that the main thread cannot act on within
    GRACE_SECONDS ends the process from a thread of its own.

    Python runs signal handlers in the main thread between two bytecodes, so a long C call (a NumPy kernel,
    ONNX Runtime running a graph that never ends, a large write) holds Ctrl-C and SIGTERM back until it
    returns, perhaps never. The C-level handler still writes the signal's number to a wakeup descriptor at
    once; this thread reads it, gives the main thread GRACE_SECONDS to start unwinding, and otherwise takes
    back what the run was writing (io.atomic.abandon: temporary files, a model's files written so far),
    prints the line the main thread would have printed and exits 130 (SIGINT), 143 (SIGTERM) or 128 + the
    signal's number. (A C call that keeps the GIL would keep this thread from running too; NumPy's kernels
    and ONNX Runtime release it.)
    """
    try:
        reader, writer = os.pipe()
    except OSError:
        yield
        return
    os.set_blocking(writer, False)
    try:
        previous = _signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    except (ValueError, OSError):  # not the main thread
        os.close(reader)
        os.close(writer)
        yield
        return
    _HANDLED.clear()
    import _thread

    _thread.start_new_thread(_watch, (reader,))
    try:
        yield
    finally:
        try:
            _signal.set_wakeup_fd(previous)
        except (ValueError, OSError):
            pass
        os.close(writer)  # the watching thread reads the end of the pipe and closes its side


def _watch(reader: int) -> None:
    try:
        while True:
            data = os.read(reader, 64)
            if not data:
                return  # the block ended
            import select  # only once a signal came: a run that gets none imports nothing here

            for number in data:
                if number not in (_signal.SIGINT, _signal.SIGTERM) + CAUGHT:
                    continue
                ready, _, _ = select.select([reader], [], [], GRACE_SECONDS)
                if ready:  # another signal, or the block's end: looked at in turn
                    more = os.read(reader, 64)
                    if not more:
                        return
                if number not in _HANDLED:
                    _end_now(number)
    except OSError:
        return
    finally:
        try:
            os.close(reader)
        except OSError:
            pass


def _end_now(number: int) -> None:
    """Take back what the run was writing, say why in one line, and exit without waiting for the main thread.

    Nothing is imported here (the main thread may hold an import's lock): where io.atomic was never imported,
    nothing was being written."""
    atomic = sys.modules.get(f"{__package__.rsplit('.', 1)[0]}.io.atomic")
    if atomic is not None:
        atomic.abandon()
    if number == _signal.SIGINT:
        line, code = "dmlcli: interrupted", 130
    elif number == _signal.SIGTERM:
        line, code = "dmlcli: terminated", 143
    else:
        name = next((name for name in _NAMES if getattr(_signal, name, None) == number), f"signal {number}")
        line, code = f"dmlcli: stopped by {name}", 128 + number
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass
    os._exit(code)


@contextlib.contextmanager
def unwinding_signals() -> Iterator[None]:
    """Within the block, the signals of CAUGHT unwind it; after the unwinding the process dies by the signal."""
    previous = {}
    try:
        for number in CAUGHT:
            if _signal.getsignal(number) == _signal.SIG_IGN:
                continue  # ignored on purpose (SIGHUP under nohup): left so
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
