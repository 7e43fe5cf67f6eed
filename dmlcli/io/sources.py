"""Where an input comes from: a .npy file, a JSON file, '-' for stdin, or an inline JSON literal."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import numpy as np

from ..data_types import DataType
from ..errors import InputError, quoted
from ..errors import first_line as _first_line
from .json_tensor import parse_json_tensor
from .npy import NPY_MAGIC, check_declared_dtype, read_npy

def read_tensor(source: str, *, label: str, dtype: DataType | None = None, stdin=None,
                bare_dtype: DataType | None = None) -> np.ndarray:
    """Read one input: a .npy file, a JSON file, '-' for JSON on stdin, or an inline JSON literal.

    `label` names the input in error messages (e.g. "input 1"). `dtype` (--dtype) is used for
    inputs that carry no dtype of their own, and must agree with those that do. `bare_dtype` is
    only a default for bare lists, with no agreement asked of tensors that name their own.
    """
    if source == "-":
        text = _read_stdin(stdin if stdin is not None else sys.stdin, label)
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return parse_json_tensor(text, where=f"{label} (stdin)", dtype=dtype, bare_dtype=bare_dtype)
    path = Path(source)
    looks_like_file = path.suffix.lower() in (".npy", ".json") or _exists(path)
    if not looks_like_file:
        return parse_json_tensor(source, where=f"{label} (inline JSON)", dtype=dtype, inline=True,
                                 bare_dtype=bare_dtype)
    where = f"{label} {quoted(source)}"
    check_input_file(path, where=where)
    # One open, so that a pipe given as a JSON file is read once, from its start.
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(NPY_MAGIC))
            is_npy = head == NPY_MAGIC or path.suffix.lower() == ".npy"
            raw = b"" if is_npy else head + handle.read()
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror})") from None
    if is_npy:
        if not path.is_file():
            raise InputError(f"{where}: a .npy input must be a regular file (it is memory-mapped), not a pipe")
        array = read_npy(path, where=where)
        _check_declared_dtype(array, dtype, where)
        return array
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: is not UTF-8 text, so not a JSON tensor") from None
    return parse_json_tensor(text, where=where, dtype=dtype, bare_dtype=bare_dtype)


def _read_stdin(stream, label: str):
    # Python sets sys.stdin to None when the shell closed it (`<&-`); a read can fail too (EBADF, EIO).
    if stream is None:
        raise InputError(f"{label} (stdin): stdin is closed, so there is nothing to read (give a file instead of -)")
    try:
        return stream.read()
    except OSError as error:
        raise InputError(f"{label} (stdin): cannot be read ({error.strerror or 'read failed'})") from None


def _exists(path: Path) -> bool:
    # An inline JSON literal can be longer than a file name may be (ENAMETOOLONG).
    try:
        return path.exists()
    except OSError:
        return False


def check_input_file(path: Path, *, where: str) -> None:
    """Refuse an input path that is missing, a directory, or a device or socket.

    Reading a device could block or never end. Pipes (`<(...)`, /dev/stdin) are allowed.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or _first_line(error)
        raise InputError(f"{where}: cannot be read ({reason})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{where}: is a directory, expected a .npy or .json file")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise InputError(f"{where}: is not a regular file (a device or socket), expected a .npy or .json file")


def _check_declared_dtype(array: np.ndarray, dtype: DataType | None, where: str) -> None:
    check_declared_dtype(array.dtype, dtype, where=where)
