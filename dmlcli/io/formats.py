"""What an input's bytes are: .npy, .npz, JSON text, or another format named so that the user knows.

Stdin is read once, as bytes, and sniffed: `\\x93NUMPY` is a .npy stream, anything else is JSON
text. A UTF-8 byte-order mark (PowerShell's `Out-File -Encoding utf8` writes one) is dropped. A
file that is neither gets a message naming what it looks like (a gzip file, HDF5, PNG, ...), so
that the user is not told "malformed JSON" about an image.

.npz archives: `file.npz` holding one array, or `file.npz:name` to pick one. Their members are
.npy files; the header is read from the start of the member's stream, so `validate` decompresses
only the first bytes.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError, first_line as _first_line, quoted
from .magic import SNIFF_BYTES, not_a_tensor
from .npy import read_npy_stream_header

if TYPE_CHECKING:
    import zipfile

UTF8_BOM = b"\xef\xbb\xbf"

def folder_kind(path: Path) -> str | None:
    """What a folder given as an input looks like (a Zarr store), or None."""
    for marker in (".zarray", ".zgroup", "zarr.json"):
        try:
            if (path / marker).exists():
                return "a Zarr folder"
        except OSError:
            return None
    return None


def decode_text(raw: bytes, *, where: str) -> str:
    """JSON bytes as text: UTF-8, with a leading byte-order mark dropped; other binary data named."""
    bad = not_a_tensor(where, raw[:SNIFF_BYTES])
    if bad is not None:
        raise bad
    try:
        return raw.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: is not UTF-8 text, so not a JSON tensor (nor a .npy file)") from None


def read_stdin_bytes(stream, *, where: str) -> bytes:
    """All of stdin as bytes: from its binary buffer where it has one (a .npy may come through)."""
    # Python sets sys.stdin to None when the shell closed it (`<&-`); a read can fail too (EBADF, EIO).
    if stream is None:
        raise InputError(f"{where}: stdin is closed, so there is nothing to read (give a file instead of -)")
    binary = getattr(stream, "buffer", None)
    try:
        data = binary.read() if binary is not None else stream.read()
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror or 'read failed'})") from None
    if isinstance(data, str):
        return data.encode("utf-8")
    return data


def npy_from_bytes(data: bytes, *, where: str) -> np.ndarray:
    """A .npy stream held in memory (stdin) as an array, header checked as a file's is; never unpickles."""
    handle = io.BytesIO(data)
    shape, fortran_order, dtype = read_npy_stream_header(handle, where=where)
    count = math.prod(shape)
    available = len(data) - handle.tell()
    if available < count * dtype.itemsize:
        raise InputError(f"{where}: the header promises {count} elements of {dtype} ({count * dtype.itemsize} "
                         f"bytes) but only {available} bytes of data follow (truncated?)")
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=handle.tell())
    return flat.reshape(shape, order="F" if fortran_order else "C")


# ---------------------------------------------------------------- .npz


def split_npz_source(source: str) -> tuple[str, str | None] | None:
    """('file.npz', 'name') for `file.npz:name`, ('file.npz', None) for `file.npz`; None for anything else.

    The name is split at the last colon after `.npz`, so Windows drive letters (C:\\a.npz) stay whole.
    """
    lowered = source.lower()
    if lowered.endswith(".npz"):
        return source, None
    position = lowered.rfind(".npz:")
    if position < 0:
        return None
    return source[:position + 4], source[position + 5:]


def _npz_member(archive: zipfile.ZipFile, path: str, name: str | None, where: str) -> str:
    members = {m[:-4] if m.endswith(".npy") else m: m for m in archive.namelist()}
    listed = ", ".join(members) or "none"
    if name is None:
        if len(members) != 1:
            raise InputError(f"{where}: holds {len(members)} arrays ({listed}); pick one as "
                             f"{quoted(path + ':NAME')}")
        return next(iter(members.values()))
    if name not in members:
        raise InputError(f"{where}: has no array named {quoted(name)} (it holds {listed})")
    return members[name]


def _open_npz(path: str, where: str) -> zipfile.ZipFile:
    import zipfile  # here, not at the top: it pulls in shutil, bz2 and lzma, which a JSON or .npy run never needs

    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{where}: is a directory, expected a .npz file") from None
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror or _first_line(error)})") from None
    except zipfile.BadZipFile:
        raise InputError(f"{where}: is not a .npz file (not a zip archive)") from None


def npz_header(path: str, name: str | None, *, where: str):
    """(shape, dtype) of one array in a .npz, from its member's .npy header alone (validate)."""
    import zipfile

    with _open_npz(path, where) as archive:
        member = _npz_member(archive, path, name, where)
        try:
            with archive.open(member) as handle:
                shape, _, dtype = read_npy_stream_header(handle, where=f"{where} array {quoted(member)}")
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise InputError(f"{where}: cannot be read ({_first_line(error)})") from None
    return shape, dtype


def read_npz(path: str, name: str | None, *, where: str) -> np.ndarray:
    """One array of a .npz (`name`, or the only one), read whole, header checked; never unpickles."""
    import zipfile

    with _open_npz(path, where) as archive:
        member = _npz_member(archive, path, name, where)
        try:
            with archive.open(member) as handle:
                data = handle.read()
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise InputError(f"{where}: cannot be read ({_first_line(error)})") from None
    return npy_from_bytes(data, where=f"{where} array {quoted(member)}")
