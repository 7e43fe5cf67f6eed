"""What an input's bytes are: .npy, .npz, JSON text, or another format named so that the user knows.

Stdin is read once, as bytes, and sniffed: `\\x93NUMPY` is a .npy stream, anything else is JSON
text. A UTF-8 byte-order mark (PowerShell's `Out-File -Encoding utf8` writes one) is dropped. A
file that is neither gets a message naming what it looks like (a gzip file, HDF5, PNG, ...), so
that the user is not told "malformed JSON" about an image.

.npz archives: `file.npz` holding one array, or `file.npz:name` to pick one. Their members are
.npy files; the header is read from the start of the member's stream, so `validate` decompresses
only the first bytes, and checked against the member's uncompressed size in the zip directory
before any data are inflated (a small file whose header claims gigabytes costs nothing). The data
are then inflated a bounded read at a time: whole into one array (read_npz), or chunk by chunk by
the streaming path (streaming.py reads the member sequentially).
"""

from __future__ import annotations

import io
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

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
    """The member `name` names, as NumPy's np.load finds it: the exact member name first, then `name.npy`.

    Counted by member, not by name: an archive holding both `x` and `x.npy` holds two arrays.
    """
    members = archive.namelist()
    listed = ", ".join(m[:-4] if m.endswith(".npy") else m for m in members) or "none"
    if name is None:
        if len(members) != 1:
            raise InputError(f"{where}: holds {len(members)} arrays ({listed}); pick one as "
                             f"{quoted(path + ':NAME')}")
        return members[0]
    for member in (name, name + ".npy"):
        if member in members:
            return member
    raise InputError(f"{where}: has no array named {quoted(name)} (it holds {listed})")


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
    except (zipfile.LargeZipFile, NotImplementedError, ValueError, EOFError, OverflowError) as error:
        # A damaged zip directory: a version or a size zipfile cannot take, a name it cannot decode.
        raise InputError(f"{where}: is not a .npz file that can be read (a damaged zip directory: "
                         f"{_first_line(error)})") from None


def _member_errors() -> tuple[type[BaseException], ...]:
    """What a zip member's stream raises while it is opened or inflated: a bad CRC or local header, a corrupt
    deflate stream, an unsupported compression method or an encrypted member, a read that fails."""
    import zipfile
    import zlib

    return (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError, RuntimeError, ValueError,
            OverflowError)


@dataclass(frozen=True)
class NpzMember:
    """One array of a .npz as its member's .npy header and the zip directory describe it; nothing inflated
    beyond the header."""

    path: str
    member: str  # the name in the zip archive
    where: str  # the input as error messages name it
    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype  # as stored: may be big-endian
    header_bytes: int  # where the data start in the member's uncompressed stream

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def data_bytes(self) -> int:
        return self.count * self.dtype.itemsize


def inspect_npz(path: str, name: str | None, *, where: str) -> NpzMember:
    """Read and check one .npz array's header, and its size against the zip directory, inflating only the
    header: a member whose header promises more (or fewer) bytes than the directory lists is refused here."""
    with _open_npz(path, where) as archive:
        member = _npz_member(archive, path, name, where)
        with _member_stream(archive, member, where) as (handle, found):
            return found


@contextmanager
def _member_stream(archive: zipfile.ZipFile, member: str, where: str):
    """(the member's open stream, positioned after its header; its NpzMember), header and size checked."""
    errors = _member_errors()
    info = archive.getinfo(member)
    member_where = f"{where} array {quoted(member[:-4] if member.endswith('.npy') else member)}"
    try:
        handle = archive.open(info)
    except errors as error:
        raise InputError(f"{where}: cannot be read ({_first_line(error)})") from None
    with handle:
        try:
            shape, fortran_order, dtype = read_npy_stream_header(handle, where=member_where)
            header_bytes = handle.tell()
        except InputError:
            raise
        except errors as error:
            raise InputError(f"{where}: cannot be read ({_first_line(error)})") from None
        found = NpzMember(str(archive.filename), member, member_where, shape, fortran_order, dtype, header_bytes)
        _check_member_size(found, info.file_size)
        yield handle, found


def _check_member_size(found: NpzMember, listed: int) -> None:
    # The zip directory's uncompressed size is known before a byte is inflated; the header's promise must
    # match it, so that a small file claiming gigabytes costs nothing, and a member never inflates to more
    # than its data (zipfile stops at the listed size).
    data = listed - found.header_bytes
    if data != found.data_bytes:
        short = data < found.data_bytes
        raise InputError(f"{found.where}: the header promises {found.count} elements of {found.dtype} "
                         f"({found.data_bytes} bytes) but the zip directory lists {'only ' if short else ''}"
                         f"{max(data, 0)} bytes of data for the member "
                         f"({'truncated?' if short else 'more than the header describes'})")


@contextmanager
def open_npz_member(found: NpzMember) -> Iterator:
    """The member's stream, positioned at its data, read sequentially (streaming): checked again on opening,
    as the file may have been replaced since it was inspected."""
    with _open_npz(found.path, found.where) as archive:
        with _member_stream(archive, found.member, found.where) as (handle, again):
            if (again.shape, again.dtype, again.fortran_order) != (found.shape, found.dtype, found.fortran_order):
                raise InputError(f"{found.where}: changed while dmlcli was reading it")
            yield handle


def read_member_into(handle, buffer: memoryview, found: NpzMember) -> None:
    """Fill `buffer` from the member's stream (its next bytes), or InputError naming the member."""
    done = 0
    try:
        while done < len(buffer):
            got = handle.readinto(buffer[done:done + MEMBER_READ_BYTES])
            if not got:
                raise InputError(f"{found.where}: the member ended early (its compressed data are cut short)")
            done += got
    except InputError:
        raise
    except _member_errors() as error:
        raise InputError(f"{found.where}: cannot be read ({_first_line(error)})") from None


def finish_member(handle, found: NpzMember) -> None:
    """Read to the member's end, so that zipfile checks its CRC-32: corrupt data are refused, not computed on."""
    try:
        extra = handle.read(1)
    except _member_errors() as error:
        raise InputError(f"{found.where}: cannot be read ({_first_line(error)})") from None
    if extra:
        raise InputError(f"{found.where}: holds more data than its header describes")


# Bytes inflated per read: zipfile holds a few copies of each read (compressed, inflated, joined), so reads
# stay small; at this size the cost of a read call is negligible next to inflating its data.
MEMBER_READ_BYTES = 1 << 20


def npz_header(path: str, name: str | None, *, where: str):
    """(shape, dtype) of one array in a .npz, from its member's .npy header and the zip directory (validate)."""
    found = inspect_npz(path, name, where=where)
    return found.shape, found.dtype


def read_npz(path: str, name: str | None, *, where: str) -> np.ndarray:
    """One array of a .npz (`name`, or the only one), read whole; never unpickles.

    The header and the zip directory are checked, and the memory for the array, before anything is
    inflated; the data are then inflated straight into the array, a bounded read at a time.
    """
    from .room import check_room_to_read

    found = inspect_npz(path, name, where=where)
    check_room_to_read(found.data_bytes, where=found.where)
    with open_npz_member(found) as handle:
        return _inflated(handle, found)


def _inflated(handle, found: NpzMember) -> np.ndarray:
    """The member's data, from its stream positioned after the header, as one array (its CRC checked)."""
    flat = np.empty(found.count, found.dtype)
    read_member_into(handle, memoryview(flat.view(np.uint8).reshape(-1)), found)
    finish_member(handle, found)
    return flat.reshape(found.shape, order="F" if found.fortran_order else "C")


def npz_array_from_bytes(data: bytes, name: str | None, *, where: str) -> np.ndarray:
    """One array of an .npz held in memory (stdin: `-` or `-:NAME`), checked as a file's is before it is inflated."""
    from .room import check_room_to_read

    with _open_npz(io.BytesIO(data), where) as archive:
        member = _npz_member(archive, "-", name, where)
        with _member_stream(archive, member, where) as (handle, found):
            check_room_to_read(found.data_bytes, where=found.where)
            return _inflated(handle, found)
