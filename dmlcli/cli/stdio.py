"""stdout and stdin as the command line uses them: every failed write reported, closed streams handled.

Python's own stdout loses data silently when a pipe closes in the middle of a large write (its
buffered writer reports the bytes of the first partial write and drops the rest), prints a
traceback when the final flush fails (`> /dev/full`), and becomes None when the shell closed the
descriptor (`>&-`). `guard_standard_streams` replaces it with a small writer that writes with
os.write until every byte is out and turns any failure into `StdoutFailed`, which the command
group reports as one line (exit 2) or, for a reader that went away, as a quiet exit 141.
"""

from __future__ import annotations

import errno
import os
import sys

# What stdout buffers before it writes; a terminal gets every line at once.
_BUFFER_CHARS = 1 << 16


class StdoutFailed(BaseException):
    """Writing to stdout failed. A BaseException, so that no `except Exception` on the way swallows it."""

    def __init__(self, error_number: int):
        super().__init__(error_number)
        self.errno = error_number

    @property
    def reader_went_away(self) -> bool:
        return self.errno == errno.EPIPE

    def reason(self) -> str:
        if self.errno == errno.EBADF:
            return "is closed (nowhere to write the output)"
        text = os.strerror(self.errno) if self.errno else "write failed"
        return text[:1].lower() + text[1:]


class GuardedStdout:
    """A text stream on descriptor 1 that writes every byte or raises StdoutFailed.

    After a failure it discards what is left, so that Python's flush at exit has nothing to fail on.
    """

    def __init__(self, original, descriptor: int = 1):
        self._original = original
        self._descriptor = descriptor
        self._pending: list[str] = []
        self._pending_chars = 0
        self._failed = False
        self.encoding = getattr(original, "encoding", None) or "utf-8"
        self.errors = getattr(original, "errors", None) or "strict"
        self._line_buffered = self.isatty()

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes with b"" to tell text streams from binary ones
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self._failed or not text:
            return len(text)
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars >= _BUFFER_CHARS or (self._line_buffered and "\n" in text):
            self.flush()
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._failed or not self._pending:
            return
        data = memoryview("".join(self._pending).encode(self.encoding, self.errors))
        self._pending.clear()
        self._pending_chars = 0
        try:
            while data:
                data = data[os.write(self._descriptor, data):]
        except OSError as error:
            self._failed = True
            raise StdoutFailed(error.errno or 0) from None

    def fileno(self) -> int:
        return self._descriptor

    def isatty(self) -> bool:
        try:
            return os.isatty(self._descriptor)
        except OSError:
            return False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return False

    def close(self) -> None:
        self.flush()

    def __getattr__(self, name):
        # Anything else (buffer, line_buffering, ...) as the stream Python made, where there is one.
        if self._original is None:
            raise AttributeError(name)
        return getattr(self._original, name)


def _occupy_if_closed(descriptor: int, flags: int) -> bool:
    """Put /dev/null opened with `flags` on a closed standard descriptor; True if it was closed.

    Otherwise the next file dmlcli opens would get that number and a stray write to "stdout" would
    land in it. Opened the wrong way round (read-only for stdout, write-only for stdin), every
    read or write on it still fails with EBADF, as on the closed descriptor.
    """
    try:
        os.fstat(descriptor)
        return False
    except OSError:
        pass
    try:
        opened = os.open(os.devnull, flags)
    except OSError:
        return True
    if opened != descriptor:
        os.dup2(opened, descriptor, inheritable=True)
        os.close(opened)
    return True


def guard_standard_streams() -> None:
    """Make failures on stdout and closed standard streams visible (see the module's text)."""
    _occupy_if_closed(0, os.O_WRONLY)
    _occupy_if_closed(1, os.O_RDONLY)
    _occupy_if_closed(2, os.O_WRONLY)
    if isinstance(sys.stdout, GuardedStdout):
        return
    original = sys.stdout
    if original is not None:
        try:
            original.flush()
        except (OSError, ValueError):
            pass
    sys.stdout = GuardedStdout(original)
