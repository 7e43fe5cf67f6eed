"""Reading tensors from .npy, JSON files, stdin or inline JSON, and writing results atomically.

The JSON tensor format: {"dtype": "uint8", "shape": [2, 2], "data": [[0, 128], [42, 255]]}.
dtype in NumPy or DirectML spelling; shape optional when data is nested; a bare list takes its
dtype from the caller. Floats may be "inf", "-inf", "nan" or the JSON tokens Infinity / NaN.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import warnings
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np

from .data_types import DataType, from_numpy, parse_data_type
from .errors import DmlcliWarning, InputError

NPY_MAGIC = b"\x93NUMPY"
MAX_JSON_DEPTH = 64
_JSON_KEYS = ("dtype", "shape", "data", "strides")
_SPECIAL_FLOATS = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
                   "-inf": -math.inf, "-infinity": -math.inf, "nan": math.nan, "+nan": math.nan, "-nan": math.nan}
# The canonical quiet NaN of each float width: JSON's "nan" reads back as this pattern.
_CANONICAL_NAN_BITS = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}


class _Constant(str):
    """A JSON NaN / Infinity / -Infinity token, kept apart from strings written in quotes."""


# ---------------------------------------------------------------- reading


def read_tensor(source: str, *, label: str, dtype: DataType | None = None, stdin=None) -> np.ndarray:
    """Read one input: a .npy file, a JSON file, '-' for JSON on stdin, or an inline JSON literal.

    `label` names the input in error messages (e.g. "input 1"). `dtype` is used for inputs that
    carry no dtype of their own, and must agree with those that do.
    """
    if source == "-":
        stream = stdin if stdin is not None else sys.stdin
        text = stream.read()
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return parse_json_tensor(text, where=f"{label} (stdin)", dtype=dtype)
    path = Path(source)
    looks_like_file = path.suffix.lower() in (".npy", ".json") or _exists(path)
    if not looks_like_file:
        return parse_json_tensor(source, where=f"{label} (inline JSON)", dtype=dtype, inline=True)
    where = f"{label} {source!r}"
    if not path.exists():
        raise InputError(f"{where}: no such file")
    if path.is_dir():
        raise InputError(f"{where}: is a directory, expected a .npy or .json file")
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(NPY_MAGIC))
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror})") from None
    if head == NPY_MAGIC or path.suffix.lower() == ".npy":
        array = read_npy(path, where=where)
        _check_declared_dtype(array, dtype, where)
        return array
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: is not UTF-8 text, so not a JSON tensor") from None
    except OSError as error:
        raise InputError(f"{where}: cannot be read ({error.strerror})") from None
    return parse_json_tensor(text, where=where, dtype=dtype)


def _exists(path: Path) -> bool:
    # An inline JSON literal can be longer than a file name may be (ENAMETOOLONG).
    try:
        return path.exists()
    except OSError:
        return False


def _check_declared_dtype(array: np.ndarray, dtype: DataType | None, where: str) -> None:
    if dtype is not None and from_numpy(array.dtype) != dtype:
        raise InputError(f"{where}: holds {from_numpy(array.dtype).name} but --dtype says {dtype.name}")


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
            except (ValueError, SyntaxError, TypeError, EOFError, OverflowError) as error:
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
    count = int(np.prod(shape, dtype=object))
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


def parse_json_tensor(text: str, *, where: str, dtype: DataType | None = None, inline: bool = False) -> np.ndarray:
    document = _load_json(text, where=where, inline=inline)
    if isinstance(document, dict):
        return tensor_from_object(document, where=where, dtype=dtype)
    if dtype is None:
        raise InputError(f"{where}: a bare list or number needs its data type: give --dtype, or write "
                         '{"dtype": "uint8", "data": [...]}')
    return tensor_from_data(document, dtype, where=where)


def _load_json(text: str, *, where: str, inline: bool):
    if not text.strip():
        raise InputError(f"{where}: is empty, expected a JSON tensor")
    try:
        return json.loads(text, parse_float=Decimal, parse_constant=_Constant)
    except json.JSONDecodeError as error:
        hint = " (not an existing file either)" if inline else ""
        raise InputError(f"{where}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}{hint}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None


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
    return np.array(values, dtype=np_dtype).reshape(shape)


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
                raise _BadValue(f"= {value} is not an integer, as {np_dtype} needs")
            value = int(value)
        if not info.min <= value <= info.max:
            raise _BadValue(f"= {value} is out of range for {np_dtype} ({info.min} to {info.max})")
        return value

    return convert


def _float_converter(np_dtype: np.dtype):
    scalar = np_dtype.type

    def convert(value):
        if isinstance(value, str):
            special = _SPECIAL_FLOATS.get(value.strip().lower())
            if special is None:
                raise _BadValue(f"= {value!r} is not a number "
                                '(non-finite values are written "inf", "-inf" or "nan")')
            return scalar(special)
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise _BadValue(f"= {value!r} is not a number")
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
        raise _BadValue(f"= {exact} is out of range for {np_dtype}")
    with np.errstate(over="ignore"):
        nearest = scalar(as_double)
    if math.isinf(float(nearest)):
        raise _BadValue(f"= {exact} is out of range for {np_dtype} (write \"inf\" for infinity)")
    if np_dtype == np.float64 or float(nearest) == as_double or Decimal(as_double) == exact:
        return nearest
    toward = scalar(math.inf if as_double > float(nearest) else -math.inf)
    neighbour = np.nextafter(nearest, toward)
    halfway = (float(nearest) + float(neighbour)) / 2
    if as_double != halfway:
        return nearest
    if (exact > Decimal(halfway)) == (float(neighbour) > float(nearest)):
        return neighbour
    return nearest


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
    bits = np.ascontiguousarray(array).view(f"uint{array.dtype.itemsize * 8}")
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
    folder = path.parent if str(path.parent) else Path(".")
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
    """
    folder = path.parent if str(path.parent) else Path(".")
    try:
        mode = path.stat().st_mode & 0o7777 if path.exists() else _default_file_mode()
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise InputError(f"output {str(path)!r}: cannot create a file in {str(folder)!r} ({error.strerror})") from None
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
            raise InputError(f"output {str(path)!r}: write failed ({error.strerror or error}); "
                             "the target was left as it was") from None
        raise


def _default_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
