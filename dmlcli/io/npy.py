""".npy files: headers read and checked without touching the data, arrays mapped, headers written."""

from __future__ import annotations

from typing import TYPE_CHECKING

import io
import math
import os

import numpy as np

from ..data_types import DataType, from_numpy
from ..errors import InputError, cut, first_line as _first_line

if TYPE_CHECKING:  # annotations only: the module is imported without it at run time
    from pathlib import Path

NPY_MAGIC = b"\x93NUMPY"


# The largest size one .npy dimension may claim (NumPy's own limit, intp).
_MAX_DIMENSION = int(np.iinfo(np.intp).max)


# NumPy's own sentences about a bad header (its format module); they echo the header, which is cut.
# Any other exception from the parser is Python's (a repr of an AST node, "too many values to unpack").
_NUMPY_HEADER_SENTENCES = ("Cannot parse header", "Header is not a dictionary", "Header does not contain the correct keys",
                           "shape is not valid", "fortran_order is not a valid bool", "descr is not a valid dtype descriptor",
                           "Header info length", "Header length", "EOF", "we only support format version",
                           "the magic string is not correct", "Invalid version")


def _header_problem(error: BaseException) -> str:
    text = _first_line(error)
    if isinstance(error, ValueError) and text.startswith(_NUMPY_HEADER_SENTENCES):
        return cut(text, 100)
    return "not a dictionary of plain 'descr', 'fortran_order' and 'shape' values that NumPy can read"


def check_declared_dtype(stored: np.dtype, dtype: DataType | None, *, where: str) -> None:
    """A file's own dtype must agree with --dtype where both are given."""
    if dtype is not None and from_numpy(stored) != dtype:
        raise InputError(f"{where}: holds {from_numpy(stored).name} but --dtype says {dtype.name}")


def check_npy_dtype(dtype: np.dtype, *, where: str) -> None:
    """A .npy's dtype must be a DirectML data type: no objects or records (never unpickled), no bool."""
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise InputError(f"{where}: holds Python objects or records ({dtype}); dmlcli reads only plain numeric "
                         "arrays and never unpickles")
    if dtype.kind == "b":
        # NumPy writes masks as bool; DirectML has no boolean type, and its logical operators take UINT8 0/1.
        raise InputError(f"{where}: holds bool values, and DirectML has no boolean data type (use uint8 0/1 for "
                         "booleans: convert it with numpy.save(p, numpy.load(p).astype(numpy.uint8)))")
    try:
        from_numpy(dtype)
    except InputError as error:
        raise InputError(f"{where}: {error}") from None


def read_npy_stream_header(handle, *, where: str):
    """(shape, fortran_order, dtype) from a .npy stream positioned at its start (a file, a pipe, a zip
    member), every field checked: a DirectML data type, whole sizes that NumPy can describe."""
    from numpy.lib import format as npy_format

    try:
        version = npy_format.read_magic(handle)
        if version == (1, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_1_0(handle, max_header_size=1 << 16)
        elif version in ((2, 0), (3, 0)):
            shape, fortran_order, dtype = npy_format.read_array_header_2_0(handle, max_header_size=1 << 16)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (InputError, OSError):
        raise
    except Exception as error:  # noqa: BLE001 - NumPy's header parser raises many kinds on hostile text
        raise InputError(f"{where}: malformed .npy header ({_header_problem(error)})") from None
    check_npy_dtype(dtype, where=where)
    # NumPy's reader lets booleans through as sizes ((True,) is a shape of (1,) to it): only whole numbers will do.
    odd = [s for s in shape if isinstance(s, bool) or not isinstance(s, int)]
    if odd:
        raise InputError(f"{where}: malformed .npy header (the 'shape' field holds {str(odd[0])[:40]}; expected "
                         f"whole numbers from 0 to {_MAX_DIMENSION})")
    bad = [s for s in shape if not 0 <= s <= _MAX_DIMENSION]
    if bad:
        raise InputError(f"{where}: malformed .npy header (size {bad[0]} in shape {tuple(shape)}; "
                         f"expected sizes from 0 to {_MAX_DIMENSION})")
    if math.prod(s for s in shape if s) * dtype.itemsize > _MAX_DIMENSION:
        raise InputError(f"{where}: malformed .npy header (shape {tuple(shape)} of {dtype} is larger than "
                         "NumPy can describe)")
    return tuple(shape), bool(fortran_order), dtype


def read_npy_header(path: Path, *, where: str):
    """Read and check an .npy header without touching the data: (shape, fortran_order, dtype, data offset)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            head = handle.read(8)
            if not head.startswith(NPY_MAGIC):
                from .magic import not_a_tensor

                other_format = not_a_tensor(where, head)
                if other_format is not None:
                    raise other_format
                raise InputError(f"{where}: is not a .npy file (no NumPy magic bytes at the start)")
            handle.seek(0)
            shape, fortran_order, dtype = read_npy_stream_header(handle, where=where)
            offset = handle.tell()
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror})") from None
    count = math.prod(shape)
    needed = count * dtype.itemsize
    if size - offset < needed:
        raise InputError(f"{where}: the header promises {count} elements of {dtype} ({needed} bytes) "
                         f"but the file holds only {max(size - offset, 0)} bytes of data (truncated?)")
    return shape, fortran_order, dtype, offset


def read_npy(path: Path, *, where: str, mmap: bool = True) -> np.ndarray:
    """Open an .npy file as a read-only memory map (or read it) after checking its header.

    Never unpickles; the data keep the file's byte order and layout (see `to_native`).
    """
    shape, fortran_order, dtype, offset = read_npy_header(path, where=where)
    if int(np.prod(shape, dtype=object)) == 0:
        return np.zeros(shape, dtype=dtype)
    order = "F" if fortran_order else "C"
    try:
        if mmap:
            return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)
        return read_exactly(path, offset, dtype, math.prod(shape), where=where).reshape(shape, order=order)
    except (OSError, ValueError) as error:
        raise InputError(f"{where}: cannot be read ({_first_line(error)})") from None


def read_exactly(path: Path, offset: int, dtype: np.dtype, count: int, *, where: str) -> np.ndarray:
    """`count` elements of `dtype` read from `offset` with pread, never mapped: a mapped file that another
    program truncates kills the reader with SIGBUS, where a short read is a clear error."""
    flat = np.empty(count, dtype)
    view = memoryview(flat.view(np.uint8).reshape(-1))
    with open(path, "rb", buffering=0) as handle:
        done = 0
        while done < len(view):
            got = os.preadv(handle.fileno(), [view[done:done + (1 << 30)]], offset + done)
            if got == 0:
                raise InputError(f"{where}: the file ended early (was it truncated while dmlcli was reading it?)")
            done += got
    return flat


def read_mapped(array: np.ndarray, *, where: str) -> np.ndarray:
    """A memory-mapped .npy array's data read into memory with pread (others are returned as they are).

    Mapping costs nothing until the data are used; reading them when they are about to be used means a
    file that another program truncates meanwhile gives "the file ended early", not SIGBUS.
    """
    mapped = array if isinstance(array, np.memmap) else getattr(array, "base", None)  # np.asarray makes a view
    if (not isinstance(mapped, np.memmap) or not mapped.filename or array.size == 0
            or (mapped.shape, mapped.dtype, mapped.strides) != (array.shape, array.dtype, array.strides)):
        return array
    from pathlib import Path  # only for a mapped file: arrays in memory come back without it

    order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
    flat = read_exactly(Path(mapped.filename), mapped.offset, array.dtype, array.size, where=where)
    return flat.reshape(array.shape, order=order)


def to_native(array: np.ndarray) -> np.ndarray:
    """The same values in native byte order (a no-op for arrays already native)."""
    if array.dtype.byteorder not in ("=", "|"):
        return array.astype(array.dtype.newbyteorder("="))
    return array


def npy_header(shape, dtype: np.dtype) -> bytes:
    """The header np.save writes for a C-order array of `shape` and `dtype` (the same bytes)."""
    from numpy.lib import format as npy_format

    header = {"descr": npy_format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def npy_file_bytes(shape, dtype: np.dtype) -> int:
    """The exact size of the .npy file np.save writes for a C-order array of `shape` and `dtype`."""
    return len(npy_header(shape, dtype)) + math.prod(shape) * np.dtype(dtype).itemsize


def iter_npy_chunks(path: Path, *, where: str, chunk_elements: int):
    """(flat start, native 1-D array) for consecutive C-order ranges of a .npy file's elements.

    Each range is read into a fresh array of at most `chunk_elements`, so memory stays one chunk
    whatever the file's size (a memory map would leave every page read in the process's resident
    memory). A Fortran-order file is gathered range by range through a map instead.
    """
    shape, fortran_order, dtype, offset = read_npy_header(path, where=where)
    count = math.prod(shape)
    non_unit = sum(1 for size in shape if size > 1)
    chunk_elements = max(1, int(chunk_elements))
    if fortran_order and non_unit > 1:
        mapped = read_npy(path, where=where)
        for start in range(0, count, chunk_elements):
            yield start, to_native(np.asarray(mapped.flat[start:start + chunk_elements]))
        return
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            for start in range(0, count, chunk_elements):
                wanted = min(chunk_elements, count - start)
                chunk = np.fromfile(handle, dtype=dtype, count=wanted)
                if chunk.size != wanted:
                    raise InputError(f"{where}: the file ended early (was it truncated while dmlcli was reading it?)")
                yield start, to_native(chunk)
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror or _first_line(error)})") from None
