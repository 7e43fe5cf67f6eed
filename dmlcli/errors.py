"""Exceptions dmlcli raises, each carrying the exit code the command line documents."""

import re

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INVALID_CALL = 3
EXIT_NO_BACKEND = 4


class DmlcliError(Exception):
    """Base class: a problem reported to the user as one line, never a traceback."""

    exit_code = EXIT_USAGE


class InputError(DmlcliError, ValueError):
    """Unreadable or malformed input, or a bad option value (exit code 2)."""

    exit_code = EXIT_USAGE


class ValidationError(DmlcliError, ValueError):
    """The call breaks the operator's rules at the chosen feature level (exit code 3)."""

    exit_code = EXIT_INVALID_CALL
    lowest_feature_level = None  # the lowest FeatureLevel that accepts the call, where validation found one


class BackendUnavailableError(DmlcliError, RuntimeError):
    """The requested backend cannot run on this machine (exit code 4)."""

    exit_code = EXIT_NO_BACKEND


class DmlcliWarning(UserWarning):
    """Results are produced, but something about them deserves the user's attention."""


def raise_interruption(error: BaseException) -> None:
    """Raise the signal's exception behind `error` (KeyboardInterrupt, or the BaseException the command line raises
    for SIGTERM), where there is one; else return.

    An extension module whose initialisation a signal interrupts reports it as ImportError("initialization
    failed") caused by the KeyboardInterrupt (pybind11's modules do: onnx, onnxruntime). Caught as a missing
    package, a Ctrl-C during a slow import would be answered with the command that installs what is installed.
    """
    seen: set[int] = set()
    link = error.__cause__ or error.__context__
    while link is not None and id(link) not in seen:
        if not isinstance(link, Exception):
            raise link from None
        seen.add(id(link))
        link = link.__cause__ or link.__context__


def first_line(error: BaseException) -> str:
    """The first line of an exception's text, or its type's name where it has none."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def quoted(text) -> str:
    """A name the user typed (a path, an option's value) as they typed it, in single quotes: not Python's
    repr, which doubles backslashes ('C:\\\\data') and switches quotes. Control characters are escaped
    (printable)."""
    return f"'{printable(str(text))}'"


# C0 and C1 control characters and DEL (ESC begins a terminal's control sequences, BEL rings it, a carriage
# return hides what came before), and the bidirectional formatting characters (they reorder what is shown).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Text from input as it may be printed on a terminal: each control character as an escape (ESC as \\x1b,
    U+202E as \\u202e), as JSON output escapes them; the rest as it is."""
    return text if text.isprintable() else _CONTROL.sub(_escape, text)


def cut(text, limit: int = 80) -> str:
    """Echoed input cut to a readable length: the first `limit` characters and an ellipsis."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"
