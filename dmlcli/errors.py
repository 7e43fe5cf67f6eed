"""Exceptions dmlcli raises, each carrying the exit code the command line documents."""

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


def first_line(error: BaseException) -> str:
    """The first line of an exception's text, or its type's name where it has none."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def quoted(text) -> str:
    """A name the user typed (a path, an option's value) as they typed it, in single quotes: not Python's
    repr, which doubles backslashes ('C:\\\\data') and switches quotes."""
    return f"'{text}'"


def cut(text, limit: int = 80) -> str:
    """Echoed input cut to a readable length: the first `limit` characters and an ellipsis."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"
