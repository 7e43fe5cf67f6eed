"""Reading tensors from .npy, JSON files, stdin or inline JSON, and writing results atomically.

The JSON tensor format: {"dtype": "uint8", "shape": [2, 2], "data": [[0, 128], [42, 255]]}.
dtype in NumPy or DirectML spelling; shape optional when data is nested; a bare list takes its
dtype from the caller. Floats may be "inf", "-inf", "nan" or the JSON tokens Infinity / NaN.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import stat
import sys
import tempfile
import warnings
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np

from .data_types import DataType, as_bits, from_numpy, parse_data_type
from .errors import DmlcliWarning, InputError

NPY_MAGIC = b"\x93NUMPY"
MAX_JSON_DEPTH = 64
# Integers longer than this are kept as Decimal: Python refuses int() of very long digit strings,
# and no integer type dmlcli holds has more than 20 digits anyway.
_MAX_INT_DIGITS = 1000
# The largest size one .npy dimension may claim (NumPy's own limit, intp).
_MAX_DIMENSION = int(np.iinfo(np.intp).max)
_JSON_KEYS = ("dtype", "shape", "data", "strides")
_SPECIAL_FLOATS = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
                   "-inf": -math.inf, "-infinity": -math.inf, "nan": math.nan, "+nan": math.nan, "-nan": math.nan}
# The canonical quiet NaN of each float width: JSON's "nan" reads back as this pattern.
_CANONICAL_NAN_BITS = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}


class _Constant(str):
    """A JSON NaN / Infinity / -Infinity token, kept apart from strings written in quotes."""


# ---------------------------------------------------------------- reading


def read_tensor(source: str, *, label: str, dtype: DataType | None = None, stdin=None,
                bare_dtype: DataType | None = None) -> np.ndarray:
    """Read one input: a .npy file, a JSON file, '-' for JSON on stdin, or an inline JSON literal.

    `label` names the input in error messages (e.g. "input 1"). `dtype` (--dtype) is used for
    inputs that carry no dtype of their own, and must agree with those that do. `bare_dtype` is
    only a default for bare lists, with no agreement asked of tensors that name their own.
    """
    if source == "-":
        stream = stdin if stdin is not None else sys.stdin
        text = stream.read()
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return parse_json_tensor(text, where=f"{label} (stdin)", dtype=dtype, bare_dtype=bare_dtype)
    path = Path(source)
    looks_like_file = path.suffix.lower() in (".npy", ".json") or _exists(path)
    if not looks_like_file:
        return parse_json_tensor(source, where=f"{label} (inline JSON)", dtype=dtype, inline=True,
                                 bare_dtype=bare_dtype)
    where = f"{label} {source!r}"
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


def check_declared_dtype(stored: np.dtype, dtype: DataType | None, *, where: str) -> None:
    """A file's own dtype must agree with --dtype where both are given."""
    if dtype is not None and from_numpy(stored) != dtype:
        raise InputError(f"{where}: holds {from_numpy(stored).name} but --dtype says {dtype.name}")


def read_npy_header(path: Path, *, where: str):
    """Read and check an .npy header without touching the data: (shape, fortran_order, dtype, data offset)."""
    from numpy.lib import format as npy_format

    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if handle.read(len(NPY_MAGIC)) != NPY_MAGIC:
                raise InputError(f"{where}: is not a .npy file (no NumPy magic bytes at the start)")
            handle.seek(0)
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
                raise InputError(f"{where}: malformed .npy header ({_first_line(error)})") from None
            offset = handle.tell()
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror})") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise InputError(f"{where}: holds Python objects or records ({dtype}); dmlcli reads only plain numeric "
                         "arrays and never unpickles")
    try:
        from_numpy(dtype)
    except InputError as error:
        raise InputError(f"{where}: {error}") from None
    bad = [s for s in shape if not 0 <= s <= _MAX_DIMENSION]
    if bad:
        raise InputError(f"{where}: malformed .npy header (size {bad[0]} in shape {tuple(shape)}; "
                         f"expected sizes from 0 to {_MAX_DIMENSION})")
    if math.prod(s for s in shape if s) * dtype.itemsize > _MAX_DIMENSION:
        raise InputError(f"{where}: malformed .npy header (shape {tuple(shape)} of {dtype} is larger than "
                         "NumPy can describe)")
    count = math.prod(shape)
    needed = count * dtype.itemsize
    if size - offset < needed:
        raise InputError(f"{where}: the header promises {count} elements of {dtype} ({needed} bytes) "
                         f"but the file holds only {max(size - offset, 0)} bytes of data (truncated?)")
    return tuple(shape), fortran_order, dtype, offset


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
        with open(path, "rb") as handle:
            handle.seek(offset)
            flat = np.fromfile(handle, dtype=dtype, count=int(np.prod(shape)))
        return flat.reshape(shape, order=order)
    except (OSError, ValueError) as error:
        raise InputError(f"{where}: cannot be read ({_first_line(error)})") from None


def to_native(array: np.ndarray) -> np.ndarray:
    """The same values in native byte order (a no-op for arrays already native)."""
    if array.dtype.byteorder not in ("=", "|"):
        return array.astype(array.dtype.newbyteorder("="))
    return array


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def parse_json_tensor(text: str, *, where: str, dtype: DataType | None = None, inline: bool = False,
                      bare_dtype: DataType | None = None) -> np.ndarray:
    document = _load_json(text, where=where, inline=inline)
    if isinstance(document, dict):
        return tensor_from_object(document, where=where, dtype=dtype)
    dtype = dtype or bare_dtype
    if dtype is None:
        raise InputError(f"{where}: a bare list or number needs its data type: give --dtype, or write "
                         '{"dtype": "uint8", "data": [...]}')
    return tensor_from_data(document, dtype, where=where)


def _load_json(text: str, *, where: str, inline: bool):
    if not text.strip():
        raise InputError(f"{where}: is empty, expected a JSON tensor")
    try:
        return json.loads(text, parse_float=_parse_decimal, parse_int=_parse_integer, parse_constant=_Constant,
                          object_pairs_hook=_object_without_duplicates)
    except json.JSONDecodeError as error:
        hint = " (not an existing file either)" if inline else ""
        raise InputError(f"{where}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}{hint}") from None
    except _UnreadableJson as error:
        raise InputError(f"{where}: {error}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None


class _UnreadableJson(Exception):
    """Well-formed JSON that dmlcli still cannot take: a number beyond any range, a repeated key."""


def _parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:  # an exponent beyond what Decimal holds (about 10**18 digits)
        raise _UnreadableJson(f"number {_shorten(text)} is too large to read") from None


def _parse_integer(text: str):
    # Python refuses int() of very long digit strings; Decimal reads them, and range checks refuse them later.
    # "-0" stays a Decimal so that a float tensor keeps its sign bit (int("-0") is plain 0).
    if len(text) > _MAX_INT_DIGITS or text == "-0":
        return _parse_decimal(text)
    return int(text)


def _object_without_duplicates(pairs) -> dict:
    document = {}
    for key, value in pairs:
        if key in document:
            raise _UnreadableJson(f"key {_shorten(key)!r} appears twice in one object")
        document[key] = value
    return document


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def tensor_from_object(document: dict, *, where: str, dtype: DataType | None = None, extra_keys=()) -> np.ndarray:
    unknown = sorted(set(document) - set(_JSON_KEYS) - set(extra_keys))
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} in the tensor object (expected dtype, shape, data, strides)")
    if "data" not in document:
        raise InputError(f"{where}: the tensor object has no \"data\"")
    declared = document.get("dtype")
    if declared is None and dtype is None:
        raise InputError(f"{where}: the tensor object has no \"dtype\" (or give --dtype)")
    if declared is not None:
        if not isinstance(declared, str):
            raise InputError(f"{where}: \"dtype\" must be a string such as \"uint8\", found {declared!r}")
        try:
            declared_type = parse_data_type(declared)
        except InputError as error:
            raise InputError(f"{where}: {error}") from None
        if dtype is not None and dtype != declared_type:
            raise InputError(f"{where}: declares dtype {declared_type.name} but --dtype says {dtype.name}")
        dtype = declared_type
    shape = document.get("shape")
    if shape is not None:
        if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise InputError(f"{where}: \"shape\" must be a list of non-negative integers, found {shape!r}")
    if "strides" in document:
        # DirectML-style strides (elements; 0 broadcasts): "data" is the flat buffer they index.
        from .dispatch_strides import tensor_from_buffer

        buffer = tensor_from_data(document["data"], dtype, where=where)
        return tensor_from_buffer(buffer, shape, document["strides"], where=where)
    return tensor_from_data(document["data"], dtype, where=where, shape=shape)


def tensor_from_data(data, dtype: DataType, *, where: str, shape=None) -> np.ndarray:
    """Turn nested JSON values into an array of `dtype`, refusing anything that would not be exact."""
    np_dtype = dtype.numpy_dtype
    nested_shape, flat = _flatten(data, where)
    if shape is None:
        shape = nested_shape
    elif list(nested_shape) != list(shape):
        if len(nested_shape) == 1 and int(np.prod(shape, dtype=object)) == nested_shape[0]:
            pass  # flat data with an explicit shape
        else:
            raise InputError(f"{where}: \"shape\" {list(shape)} does not match the data, whose shape is {list(nested_shape)}")
    convert = _float_converter(np_dtype) if dtype.is_float else _integer_converter(np_dtype)
    values = []
    for value in flat:
        try:
            values.append(convert(value))
        except _BadValue as bad:
            raise InputError(f"{where}: {_element_path(len(values), nested_shape)} {bad}") from None
    try:
        return np.array(values, dtype=np_dtype).reshape(shape)
    except ValueError as error:  # e.g. a size beyond NumPy's limit next to a zero
        raise InputError(f"{where}: \"shape\" {list(shape)} cannot be used ({_first_line(error)})") from None


class _BadValue(Exception):
    """A JSON value that the tensor's dtype cannot hold exactly; the caller adds where it is."""


def _flatten(data, where: str):
    """(shape, flat values) of a nested list, checking that it is rectangular."""
    if not isinstance(data, list):
        return (), [data]
    shape = []
    level = [data]
    depth = 0
    while level and all(isinstance(item, list) for item in level):
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise InputError(f"{where}: data nested more than {MAX_JSON_DEPTH} levels deep")
        lengths = {len(item) for item in level}
        if len(lengths) != 1:
            raise InputError(f"{where}: ragged data: lists at depth {depth} have lengths {sorted(lengths)}")
        shape.append(lengths.pop())
        level = [element for item in level for element in item]
    if any(isinstance(item, list) for item in level):
        raise InputError(f"{where}: ragged data: lists and numbers mixed at depth {depth + 1}")
    return tuple(shape), level


def _element_path(flat_index: int, shape) -> str:
    if not shape:
        return "data"
    index = np.unravel_index(flat_index, shape) if all(shape) else ()
    return "data" + "".join(f"[{int(i)}]" for i in index)


def _integer_converter(np_dtype: np.dtype):
    info = np.iinfo(np_dtype)

    def convert(value) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            shown = str(value) if isinstance(value, _Constant) else repr(value)
            raise _BadValue(f"= {shown} is not an integer, as {np_dtype} needs")
        if isinstance(value, float):
            value = Decimal(value) if math.isfinite(value) else Decimal("NaN")
        if isinstance(value, Decimal):
            if not value.is_finite() or value != value.to_integral_value():
                raise _BadValue(f"= {_shorten(str(value))} is not an integer, as {np_dtype} needs")
        # Compared before int(): int(Decimal("1e999999999")) would build a billion-digit number.
        if not info.min <= value <= info.max:
            raise _BadValue(f"= {_shorten(str(value))} is out of range for {np_dtype} ({info.min} to {info.max})")
        return int(value)

    return convert


def _float_converter(np_dtype: np.dtype):
    scalar = np_dtype.type

    def convert(value):
        if isinstance(value, str):
            special = _SPECIAL_FLOATS.get(value.strip().lower())
            if special is None:
                raise _BadValue(f"= {_shorten(repr(value))} is not a number "
                                '(non-finite values are written "inf", "-inf" or "nan")')
            return scalar(special)
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise _BadValue(f"= {_shorten(repr(value))} is not a number")
        if isinstance(value, float) and not math.isfinite(value):
            return scalar(value)
        return round_decimal(Decimal(value), np_dtype)

    return convert


def round_decimal(exact: Decimal, np_dtype: np.dtype):
    """The `np_dtype` value nearest to the decimal `exact`, ties to even, with no double rounding.

    Python rounds the decimal correctly to float64; a second rounding to float32 or float16 can
    only go wrong when the float64 lies exactly half-way between two neighbours, and then the
    exact decimal decides.
    """
    scalar = np_dtype.type
    as_double = float(exact)
    if math.isinf(as_double):
        raise _BadValue(f"= {_shorten(str(exact))} is out of range for {np_dtype}")
    with np.errstate(over="ignore"):
        nearest = scalar(as_double)
    if math.isinf(float(nearest)):
        return _largest_or_overflow(exact, as_double, np_dtype)
    if np_dtype == np.float64 or float(nearest) == as_double or Decimal(as_double) == exact:
        return nearest
    toward = scalar(math.inf if as_double > float(nearest) else -math.inf)
    with np.errstate(over="ignore"):  # the neighbour of the largest finite value is infinity
        neighbour = np.nextafter(nearest, toward)
    halfway = (float(nearest) + float(neighbour)) / 2
    if as_double != halfway:
        return nearest
    if (exact > Decimal(halfway)) == (float(neighbour) > float(nearest)):
        return neighbour
    return nearest


def _largest_or_overflow(exact: Decimal, as_double: float, np_dtype: np.dtype):
    """A float64 that rounds to infinity in `np_dtype`: only the half-way value itself can still
    stand for a decimal just below it, which rounds to the largest finite value."""
    largest = np_dtype.type(np.finfo(np_dtype).max)
    spacing = float(largest) - float(np.nextafter(largest, np_dtype.type(0)))
    threshold = float(largest) + spacing / 2
    if abs(as_double) == threshold and abs(exact) < Decimal(threshold):
        return largest if exact > 0 else -largest
    raise _BadValue(f"= {_shorten(str(exact))} is out of range for {np_dtype} (write \"inf\" for infinity)")


# ---------------------------------------------------------------- writing


def format_json_value(value, np_dtype: np.dtype) -> str:
    if np_dtype.kind == "f":
        if np.isnan(value):
            return '"nan"'
        if np.isinf(value):
            return '"inf"' if value > 0 else '"-inf"'
        text = str(value)  # NumPy's shortest text that reads back to the same value in this dtype
        return text
    return str(int(value))


def lossy_nan_count(array: np.ndarray) -> int:
    """How many NaNs carry a sign or payload that JSON's "nan" cannot keep."""
    if array.dtype.kind != "f":
        return 0
    nan = np.isnan(array)
    if not nan.any():
        return 0
    bits = as_bits(array)
    return int(np.count_nonzero(nan & (bits != _CANONICAL_NAN_BITS[array.dtype.itemsize])))


def to_json_text(array: np.ndarray) -> str:
    """The JSON tensor format, values exact (shortest round-trip text for floats)."""
    array = to_native(np.asarray(array))
    lost = lossy_nan_count(array)
    if lost:
        warnings.warn(f"JSON keeps NaN only as \"nan\": {lost} NaN value(s) lose their sign or payload bits; "
                      "write .npy to keep them", DmlcliWarning, stacklevel=2)
    dtype = array.dtype

    def nested(sub) -> str:
        if sub.ndim == 0:
            return format_json_value(sub[()], dtype)
        if sub.ndim == 1:
            return "[" + ", ".join(format_json_value(v, dtype) for v in sub) + "]"
        return "[" + ", ".join(nested(part) for part in sub) + "]"

    data_type = from_numpy(dtype)
    shape = ", ".join(str(s) for s in array.shape)
    return f'{{"dtype": "{data_type.numpy_name}", "shape": [{shape}], "data": {nested(array)}}}\n'


OUTPUT_SUFFIXES = (".npy", ".json")


def check_output_path(target: str) -> None:
    """Refuse an output the run could not write, before any work is done."""
    if target == "-":
        return
    path = Path(target)
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise InputError(f"output {target!r}: unknown extension {path.suffix!r} (expected .npy or .json, or - for JSON on stdout)")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"output {target!r}: folder {str(folder)!r} does not exist")
    if path.is_dir():
        raise InputError(f"output {target!r}: is a directory")
    if not os.access(folder, os.W_OK):
        raise InputError(f"output {target!r}: folder {str(folder)!r} is not writable")


def write_output(array: np.ndarray, target: str, *, stdout=None) -> None:
    """Write `array` to `target` (.npy or .json by extension; '-' for JSON on stdout), atomically."""
    if target == "-":
        (stdout or sys.stdout).write(to_json_text(array))
        return
    check_output_path(target)
    path = Path(target)
    if path.suffix.lower() == ".npy":
        write_atomically(path, lambda handle: np.save(handle, to_native(np.asarray(array)), allow_pickle=False))
    else:
        text = to_json_text(array)
        write_atomically(path, lambda handle: handle.write(text.encode("utf-8")))


def write_atomically(path: Path, write) -> None:
    """Write through a temporary file in the target's folder, renamed over the target only once complete.

    A failure at any point leaves an existing target as it was and removes the temporary file.
    The temporary file is named `.NAME.PID.RANDOM.tmp`: a run killed outright (SIGKILL, power
    loss) cannot remove its own, so the next write to the same target removes those whose
    process is gone. A target that is a symbolic link keeps the link; the file it names is replaced.
    """
    shown = str(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    folder = path.parent
    remove_stale_temporaries(path)
    try:
        mode = path.stat().st_mode & 0o7777 if path.exists() else _default_file_mode()
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise InputError(f"output {shown!r}: cannot create a file in {str(folder)!r} ({error.strerror})") from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise InputError(f"output {shown!r}: write failed ({error.strerror or _first_line(error)}); "
                             "the target was left as it was and the partial file removed") from None
        raise
    _sync_folder(folder)


def _sync_folder(folder: Path) -> None:
    # Makes the rename itself durable; not every file system can sync a folder, and the data are safe anyway.
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def temporary_files_of(path: Path) -> list[tuple[Path, int]]:
    """(temporary file, writer's process id) for each `.NAME.PID.RANDOM.tmp` beside `path`."""
    folder = path.parent
    prefix = f".{path.name}."
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid_text = name[len(prefix):].split(".", 1)[0]
        if pid_text.isdigit():
            found.append((folder / name, int(pid_text)))
    return found


def remove_stale_temporaries(path: Path) -> None:
    """Remove temporary files of earlier writes to `path` whose process no longer exists."""
    for temporary, pid in temporary_files_of(path):
        if pid != os.getpid() and not _process_exists(pid):
            try:
                os.unlink(temporary)
            except OSError:
                pass


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or a number we cannot check: leave its file alone
    return True


# ---------------------------------------------------------------- room for the output


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


def _least_json_bytes(count: int) -> int:
    # Every element takes at least one digit and a ", " separator.
    return 3 * count


def available_memory() -> int | None:
    """Bytes this process could still allocate: available RAM plus free swap, within a cgroup limit.

    None where the system does not say.
    """
    found = None
    try:
        with open("/proc/meminfo") as handle:
            fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in handle if line.count(":") == 1
                      and len(line.split()) >= 2 and line.split()[1].isdigit()}
        if "MemAvailable" in fields:
            found = fields["MemAvailable"] + fields.get("SwapFree", 0)
    except OSError:
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        if limit.isdigit() and used.isdigit():
            found = min(found, int(limit) - int(used))
    except OSError:
        pass
    return max(found, 0)


def check_room_for_output(target: str | None, shape, dtype: np.dtype, *, in_memory: bool) -> None:
    """Refuse, before any work, an output that needs more disk than its folder has free, or more memory than
    there is (`in_memory`: the whole result is held in memory; False for the streaming path).

    `target` is None for a result shown on stdout. Only the output itself is counted, so a run that
    passes may still run short; one that fails could never have finished.
    """
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    as_json = target is not None and (target == "-" or Path(target).suffix.lower() == ".json")
    described = f"{dtype} {list(shape)}"
    if in_memory:
        # JSON text is built in memory from its pieces before it is written: both are held at once.
        needed = count * dtype.itemsize + (2 * _least_json_bytes(count) if as_json else 0)
        available = available_memory()
        if available is not None and needed > available:
            raise InputError(f"the output ({described}) needs at least {_bytes_text(needed)} of memory but only "
                             f"{_bytes_text(available)} is available; nothing was run (.npy inputs written to a "
                             ".npy output are streamed in constant memory)")
    if target is None or target == "-":
        return
    path = Path(target)
    needed = _least_json_bytes(count) if as_json else npy_file_bytes(shape, dtype)
    folder = path.parent
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return
    if usage.total == 0:  # a file system that does not report its size (some FUSE mounts): nothing to judge by
        return
    free = usage.free
    if needed > free:
        raise InputError(f"output {target!r}: needs {'at least ' if as_json else ''}{_bytes_text(needed)} of disk "
                         f"but {str(folder)!r} has {_bytes_text(free)} free; nothing was run or written")


def _bytes_text(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


def _default_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
