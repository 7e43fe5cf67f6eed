"""Where an input comes from: a .npy file, a JSON file, '-' for stdin, or an inline JSON literal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import os
import stat
import sys

import numpy as np

from ..data_types import DataType
from ..errors import InputError, quoted
from ..errors import first_line as _first_line
from .json_tensor import parse_json_tensor
from .npy import NPY_MAGIC, as_declared, read_npy

ZIP_MAGIC = b"PK\x03\x04"  # an .npz archive (a zip file's first local header)

if TYPE_CHECKING:  # annotations only: the module is imported without it at run time
    from pathlib import Path

def read_tensor(source: str, *, label: str, dtype: DataType | None = None, stdin=None,
                bare_dtype: DataType | None = None) -> np.ndarray:
    """Read one input: a .npy file, a JSON file, '-' for JSON on stdin, or an inline JSON literal.

    `label` names the input in error messages (e.g. "input 1"). `dtype` (--dtype) is used for
    inputs that carry no dtype of their own, and must agree with those that do. `bare_dtype` is
    only a default for bare lists, with no agreement asked of tensors that name their own.
    """
    return read_tensor_and_format(source, label=label, dtype=dtype, stdin=stdin, bare_dtype=bare_dtype)[0]


def read_tensor_and_format(source: str, *, label: str, dtype: DataType | None = None, stdin=None,
                           bare_dtype: DataType | None = None, header_only: bool = False) -> tuple[np.ndarray, str]:
    """read_tensor, and the format the tensor came in: "npy", "npz" or "json" (--check compares NaNs by it).

    '-' is stdin, sniffed: a .npy stream or JSON text. `header_only` (validate): a .npz array comes
    back as a read-only broadcast of one zero with the header's dtype and shape, its data not read.
    """
    if is_stdin(source):
        return _read_stdin(source, label=label, dtype=dtype, stdin=stdin, bare_dtype=bare_dtype)
    npz = npz_source(source)
    if npz is not None:
        return _read_npz(npz, source, label=label, dtype=dtype, header_only=header_only), "npz"
    from .targets import suffix

    named = json_member_source(source)
    looks_like_file = named is not None or suffix(source).lower() in (".npy", ".json") or _exists(source)
    if not looks_like_file:
        return parse_json_tensor(source, where=f"{label} (inline JSON)", dtype=dtype, inline=True,
                                 bare_dtype=bare_dtype), "json"
    from pathlib import Path  # only for a file: inline tensors go without pathlib

    path = Path(source if named is None else named[0])
    where = f"{label} {quoted(source)}"
    check_input_file(path, where=where)
    # One open, so that a pipe given as a JSON file is read once, from its start.
    from .waiting import note_while_waiting

    try:
        with note_while_waiting(path, where), open(path, "rb") as handle:
            head = handle.read(len(NPY_MAGIC))
            is_npy = head == NPY_MAGIC or path.suffix.lower() == ".npy"
            raw = b"" if is_npy else head + handle.read()
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror})") from None
    if is_npy:
        if not path.is_file():
            raise InputError(f"{where}: a .npy input must be a regular file (it is memory-mapped), not a pipe")
        return as_declared(read_npy(path, where=where), dtype, where=where), "npy"
    from .formats import decode_text

    text = decode_text(raw, where=where)
    name, file = (None, source) if named is None else (named[1], named[0])
    return parse_json_tensor(text, where=where, dtype=dtype, bare_dtype=bare_dtype, name=name,
                             pick_as=quoted(file + ":NAME")), "json"


def is_stdin(source: str) -> bool:
    """'-' (stdin), or '-:NAME': one tensor of the named ones stdin holds (a JSON object of outputs, an .npz)."""
    return source == "-" or (source.startswith("-:") and len(source) > 2)


# Stdin as read for the first `-:NAME` of a run, kept with the stream it came from: several named tensors of one
# stdin (`-:OutputValueTensor -:OutputIndexTensor`) are read from one read of it.
_NAMED_STDIN: list = []


def _read_stdin(source: str, *, label: str, dtype: DataType | None, stdin, bare_dtype: DataType | None):
    """A tensor from stdin: a .npy stream, JSON text, or with a name (`-:NAME`) one of the tensors of a JSON object
    (what `-o -` writes for several outputs) or of an .npz archive."""
    from .formats import decode_text, npy_from_bytes, npz_array_from_bytes, read_stdin_bytes

    stream = stdin if stdin is not None else sys.stdin
    name = source[2:] if source != "-" else None
    where = f"{label} (stdin)"
    if name is not None and _NAMED_STDIN and _NAMED_STDIN[0] is stream:
        raw = _NAMED_STDIN[1]
    else:
        raw = read_stdin_bytes(stream, where=where)
        if name is not None:
            _NAMED_STDIN[:] = [stream, raw]
    if raw.startswith(NPY_MAGIC):
        if name is not None:
            raise InputError(f"{where}: holds one .npy array, which has no names: give - rather than {quoted(source)}")
        return as_declared(npy_from_bytes(raw, where=where), dtype, where=where), "npy"
    if raw.startswith(ZIP_MAGIC):
        return as_declared(npz_array_from_bytes(raw, name, where=where), dtype, where=where), "npz"
    return parse_json_tensor(decode_text(raw, where=where), where=where, dtype=dtype, bare_dtype=bare_dtype,
                             name=name, pick_as=quoted("-:NAME")), "json"


def json_member_source(source: str) -> tuple[str, str] | None:
    """('out.json', 'NAME') for `out.json:NAME`, where out.json is a file: one tensor of a JSON object of named
    tensors (what `-o -` prints for several outputs, saved to a file)."""
    position = source.lower().rfind(".json:")
    if position < 0 or len(source) == position + 6 or source.lstrip().startswith(("[", "{")):
        return None
    path = source[:position + 5]
    return (path, source[position + 6:]) if _exists(path) else None


def npz_source(source: str) -> tuple[str, str | None] | None:
    """(path, array name or None) where `source` names a .npz file (`a.npz`, `a.npz:name`)."""
    if ".npz" not in source.lower():  # what split_npz_source needs: other inputs go without formats.py
        return None
    from .formats import split_npz_source

    if source == "-":
        return None
    split = split_npz_source(source)
    if split is None or (split[1] is not None and not _exists(split[0])):
        return None  # "x.npz:y" that names no file may still be inline JSON or a file with a colon
    return split


def is_npz_source(source: str) -> bool:
    return npz_source(source) is not None


def _read_npz(npz: tuple[str, str | None], source: str, *, label: str, dtype: DataType | None,
              header_only: bool) -> np.ndarray:
    from .formats import npz_header, read_npz

    path, name = npz
    from pathlib import Path

    where = f"{label} {quoted(source)}"
    check_input_file(Path(path), where=where)
    if header_only:
        shape, stored = npz_header(path, name, where=where)
        array = np.broadcast_to(np.zeros((), stored), shape)
    else:
        array = read_npz(path, name, where=where)
    return as_declared(array, dtype, where=where)


def check_stdin_read_once(sources) -> None:
    """Stdin can be read only once: refuse '-' given twice among the inputs (and --check's EXPECTED), or beside a
    named tensor of stdin ('-:NAME'); several names are one read of it."""
    read = [s for s in sources if s is not None and is_stdin(s)]
    if len(read) > 1 and "-" in read:
        raise InputError("'-' (stdin) is given more than once, but stdin can be read only once; "
                         "save all but one of those tensors to files (or, where stdin holds several named tensors, "
                         "pick each as '-:NAME')")


def _exists(name: str) -> bool:
    """Whether pathlib.Path(name).exists(); a name of one component (an inline JSON literal) is asked of the
    system directly, so that a run on inline tensors does not import pathlib."""
    try:
        if name and "/" not in name:  # pathlib would normalise nothing in it
            os.stat(name)
            return True
        from pathlib import Path

        return Path(name).exists()
    except (OSError, ValueError):  # an inline JSON literal can be longer than a file name may be (ENAMETOOLONG)
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
        from .formats import folder_kind

        kind = folder_kind(path)
        if kind is not None:
            raise InputError(f"{where}: is {kind}, not a .npy or JSON tensor")
        raise InputError(f"{where}: is a directory, expected a .npy or .json file")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise InputError(f"{where}: is not a regular file (a device or socket), expected a .npy or .json file")

