""".npy files: headers read and checked without touching the data, arrays mapped, headers written."""

from __future__ import annotations

from typing import TYPE_CHECKING

import io
import math
import os

import numpy as np

from ..data_types import (RAW_BYTES_HINT, DataType, four_bit_dtype, from_numpy, is_four_bit_dtype,
                          is_raw_byte_dtype)
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
    """A file's own dtype must agree with --dtype where both are given; except a 4-bit --dtype, which says what
    '|V1' files (and bare lists) hold, a file of a type of its own keeping it (DEQUANTIZE's float scale beside a
    numpy.save'd INT4 input)."""
    stored = stored_as(stored, dtype, where=where)
    if dtype is not None and not dtype.is_four_bit and from_numpy(stored) != dtype:
        raise InputError(f"{where}: holds {from_numpy(stored).name} but --dtype says {dtype.name}; --dtype types bare "
                         f"lists, and {_convert_hint(from_numpy(stored), dtype)}")


def _convert_hint(stored: DataType, wanted: DataType) -> str:
    """How a typed input of `stored` type becomes `wanted` (--convert), where both are of one kind; else how to
    give it in its own type."""
    if stored.is_float == wanted.is_float and not (stored.is_four_bit or wanted.is_four_bit):
        from .convert import convert_hint

        return convert_hint(stored, wanted)
    return "a typed input keeps its own type (leave --dtype out)"


def stored_as(stored: np.dtype, dtype: DataType | None, *, where: str) -> np.dtype:
    """The dtype a file's data are read as: its own, except one-byte voids ('|V1', what numpy.save writes for
    ml_dtypes' int4 and uint4 arrays), which are read as the 4-bit type --dtype names and refused without it."""
    if not is_raw_byte_dtype(stored):
        return stored
    if dtype is not None and dtype.is_four_bit:
        return dtype.numpy_dtype
    said = f" (--dtype says {dtype.name})" if dtype is not None else ""
    raise InputError(f"{where}: holds no DirectML data type{said}: {RAW_BYTES_HINT}")


def as_declared(array: np.ndarray, dtype: DataType | None, *, where: str) -> np.ndarray:
    """`array` checked against --dtype (check_declared_dtype), one-byte voids seen as the 4-bit type it names."""
    check_declared_dtype(array.dtype, dtype, where=where)
    wanted = stored_as(array.dtype, dtype, where=where)
    return array if wanted == array.dtype else array.view(wanted)


def check_npy_dtype(dtype: np.dtype, *, where: str) -> None:
    """A .npy's dtype must be a DirectML data type: no objects or records (never unpickled), no bool."""
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise InputError(f"{where}: holds Python objects or records ({dtype}); dmlcli reads only plain numeric "
                         "arrays and never unpickles")
    if is_raw_byte_dtype(dtype):
        return  # read as the 4-bit type --dtype names, or refused saying so (stored_as)
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
        # The header is read first and parsed from memory: a descr of 'int4' or 'uint4' (dmlcli's 4-bit .npy
        # files) needs ml_dtypes loaded before NumPy parses it, and a pipe cannot be read twice.
        raw = _raw_header(handle)
        if b"int4" in raw:
            four_bit_dtype("int4")  # imports ml_dtypes, which gives NumPy the names int4 and uint4
        header = io.BytesIO(raw)
        version = npy_format.read_magic(header)
        if version == (1, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_1_0(header, max_header_size=_MAX_HEADER)
        else:
            shape, fortran_order, dtype = npy_format.read_array_header_2_0(header, max_header_size=_MAX_HEADER)
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


_MAX_HEADER = 1 << 16  # the longest .npy header dmlcli reads (NumPy's own default limit is 10000)


def _raw_header(handle) -> bytes:
    """The magic string, the version, the header's length and the header itself, read from `handle` (which is
    left at the data); ValueError in NumPy's words where they are short or of an unknown version."""
    head = _read_fully(handle, 8, "magic string")
    if head[:6] != NPY_MAGIC:
        raise ValueError(f"the magic string is not correct; expected {NPY_MAGIC!r}, got {head[:6]!r}")
    version = (head[6], head[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"we only support format version (1,0), (2,0), and (3,0), not {version}")
    length_bytes = _read_fully(handle, 2 if version == (1, 0) else 4, "array header length")
    length = int.from_bytes(length_bytes, "little")
    if length > _MAX_HEADER:
        raise ValueError(f"Header length {length} is larger than dmlcli reads ({_MAX_HEADER} bytes)")
    return head + length_bytes + _read_fully(handle, length, "array header")


def _read_fully(handle, count: int, what: str) -> bytes:
    data = handle.read(count)
    while len(data) < count:
        more = handle.read(count - len(data))
        if not more:
            raise ValueError(f"EOF: reading {what}, expected {count} bytes got {len(data)}")
        data += more
    return data


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
            or (mapped.shape, mapped.dtype.itemsize, mapped.strides) != (array.shape, array.dtype.itemsize,
                                                                          array.strides)):
        # (A view of another dtype of one size, as a '|V1' file seen as int4 is, reads the same bytes.)
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
    """The header np.save writes for a C-order array of `shape` and `dtype` (the same bytes), except for ml_dtypes'
    int4 and uint4: their descr is 'int4' or 'uint4', which np.load reads once ml_dtypes is imported, where
    np.save writes '<V1' and loses the type."""
    from numpy.lib import format as npy_format

    dtype = np.dtype(dtype)
    descr = dtype.name if is_four_bit_dtype(dtype) else npy_format.dtype_to_descr(dtype)
    header = {"descr": descr, "fortran_order": False, "shape": tuple(shape)}
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def save_npy(handle, array: np.ndarray) -> None:
    """np.save(handle, array) in native byte order, never pickling; a 4-bit array with its type kept (npy_header)."""
    array = to_native(np.asarray(array))
    if not is_four_bit_dtype(array.dtype):
        np.save(handle, array, allow_pickle=False)
        return
    handle.write(npy_header(array.shape, array.dtype))
    handle.write(np.ascontiguousarray(array).tobytes())


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
