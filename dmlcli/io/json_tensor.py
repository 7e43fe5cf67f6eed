"""The JSON tensor format, read exactly and written as the shortest text that reads back the same.

{"dtype": "uint8", "shape": [2, 2], "data": [[0, 128], [42, 255]]}: dtype in NumPy or DirectML
spelling; shape optional when data is nested; a bare list takes its dtype from the caller. Floats
may be "inf", "-inf", "nan" or the JSON tokens Infinity / NaN.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Callable

import numpy as np

from ..data_types import DataType, as_bits, from_numpy, parse_data_type
from ..errors import DmlcliWarning, InputError, ValidationError, first_line as _first_line, quoted
from .npy import to_native
from ..scalars import (BadValue, JsonConstant, UnreadableJson, float_converter, integer_converter, parse_decimal,
                       parse_integer, shorten, json_spelling)

MAX_JSON_DEPTH = 64


_JSON_KEYS = ("dtype", "shape", "data", "strides")


# The canonical quiet NaN of each float width: JSON's "nan" reads back as this pattern.
_CANONICAL_NAN_BITS = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}


def parse_json_tensor(text: str, *, where: str, dtype: DataType | None = None, inline: bool = False,
                      bare_dtype: DataType | None = None, name: str | None = None,
                      pick_as: str = "'-:NAME'") -> np.ndarray:
    """A JSON tensor; or, with `name`, the tensor of that name in a JSON object of named tensors (what `-o -`
    prints for an operator with several outputs). Such an object given without a name is its one tensor, or an
    error that lists the names and says how to pick one (`pick_as`: '-:NAME', 'out.json:NAME')."""
    document = _load_json(text, where=where, inline=inline)
    if isinstance(document, dict):
        named = named_tensors(document)
        if name is not None or named is not None:
            document = _picked(named, name, where, pick_as)
        return tensor_from_object(document, where=where if name is None else f"{where} {name}", dtype=dtype)
    if name is not None:
        raise InputError(f"{where}: holds one tensor, not an object of named tensors: leave out :{name}")
    _refuse_bare_scalar(document, where)
    dtype = dtype or bare_dtype
    if dtype is None:
        raise BareListWithoutType(document, where)
    return tensor_from_data(document, dtype, where=where)


def named_tensors(document: dict) -> dict | None:
    """The tensors of a JSON object of named tensors ({"OutputValueTensor": {...}, "OutputIndexTensor": {...}}),
    or None where `document` is a tensor object itself (its keys are a tensor's: dtype, shape, data, strides)."""
    if not document or set(document) & set(_JSON_KEYS) or not all(isinstance(v, dict) for v in document.values()):
        return None
    return document


def _picked(named: dict | None, name: str | None, where: str, pick_as: str) -> dict:
    """The tensor object `name` names among `named` (the only one where no name is given)."""
    if named is None:
        raise InputError(f"{where}: holds one tensor, not an object of named tensors: leave out :{name}")
    listed = ", ".join(named)
    if name is None:
        if len(named) == 1:
            return next(iter(named.values()))
        raise InputError(f"{where}: holds {len(named)} tensors ({listed}); pick one as {pick_as}")
    if name not in named:
        raise InputError(f"{where}: has no tensor named {quoted(name)} (it holds {listed})")
    return named[name]


class BareListWithoutType(InputError):
    """A bare list with no --dtype: the caller may still give it the type of the call's other inputs."""

    def __init__(self, data, where: str):
        super().__init__(f"{where}: a bare list or number needs its data type: give --dtype, or write "
                         '{"dtype": "uint8", "data": [...]}')
        self.data = data
        self.where = where


class BareScalar(ValidationError):
    """A bare number where a tensor goes: DirectML has no 0-D tensors (exit 3, as for any 0-D tensor)."""

    def __init__(self, shown: str, where: str):
        super().__init__(f"{where}: {shown} is a bare scalar (0-D), and DirectML tensors have 1 to 8 dimensions; "
                         f"write [{shown}] for a one-element tensor")
        self.shown = shown
        self.where = where


def _refuse_bare_scalar(document, where: str) -> None:
    # Refused here, where the text is known, so that the message can show the fix: [5] for 5. A JSON document
    # that is not an object is a list, true, false, null, or a scalar: a number (int, or Decimal from
    # parse_decimal) or a string (asked without naming Decimal, so that decimal is not imported: scalars.py).
    if not isinstance(document, (list, bool)) and document is not None:
        shown = str(document) if isinstance(document, JsonConstant) else json_spelling(document)
        raise BareScalar(shorten(shown), where)


def type_bare_lists(arrays: list, pending: list[tuple[int, BareListWithoutType]], labels: list[str]) -> None:
    """Give each bare list (`pending`: position, error) the data type of the other inputs, in place.

    The type is borrowed only where the inputs that name one all name the same; otherwise, or where
    the borrowed type cannot hold the values, the error says which type and which input.
    """
    typed = {i: from_numpy(a.dtype) for i, a in enumerate(arrays) if a is not None}
    kinds = sorted(set(typed.values()), key=lambda t: t.name)
    for position, bare in pending:
        if not kinds:
            raise bare
        if len(kinds) > 1:
            others = ", ".join(f"{labels[i]} is {t.name}" for i, t in typed.items())
            raise InputError(f"{bare.where}: a bare list needs its data type, and the other inputs differ "
                             f"({others}): give --dtype, or write {{\"dtype\": \"...\", \"data\": [...]}}")
        data_type = kinds[0]
        source = next(labels[i] for i, t in typed.items() if t == data_type)
        try:
            arrays[position] = tensor_from_data(bare.data, data_type, where=bare.where)
        except InputError as error:
            raise InputError(f"{error} (the bare list took {data_type.name} from {source}; give --dtype to "
                             "choose its type)") from None


def _load_json(text: str, *, where: str, inline: bool):
    if not text.strip():
        raise InputError(f"{where}: is empty, expected a JSON tensor")
    try:
        return json.loads(text, parse_float=parse_decimal, parse_int=parse_integer, parse_constant=JsonConstant,
                          object_pairs_hook=_object_without_duplicates)
    except json.JSONDecodeError as error:
        hint = " (not an existing file either)" if inline else ""
        raise InputError(f"{where}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}{hint}") from None
    except UnreadableJson as error:
        raise InputError(f"{where}: {error}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None


def _object_without_duplicates(pairs) -> dict:
    document = {}
    for key, value in pairs:
        if key in document:
            raise UnreadableJson(f"key {shorten(key)!r} appears twice in one object")
        document[key] = value
    return document


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
        # A 4-bit --dtype is for '|V1' files and bare lists: a tensor naming its own type keeps it (io/npy.py).
        if dtype is not None and dtype != declared_type and not dtype.is_four_bit:
            from .npy import _convert_hint

            raise InputError(f"{where}: declares dtype {declared_type.name} but --dtype says {dtype.name}; --dtype "
                             f"types bare lists, and {_convert_hint(declared_type, dtype)}")
        dtype = declared_type
    shape = document.get("shape")
    if shape is not None:
        if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise InputError(f"{where}: \"shape\" must be a list of non-negative integers, found {shape!r}")
    if "strides" in document:
        # DirectML-style strides (elements; 0 broadcasts): "data" is the flat buffer they index.
        from .strided import tensor_from_buffer

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
        elif 0 in nested_shape and list(shape[:len(nested_shape)]) == list(nested_shape):
            pass  # nested lists cannot show the sizes after a zero ([[], []] for [2, 0, 4]): "shape" gives them
        else:
            raise InputError(f"{where}: \"shape\" {list(shape)} does not match the data, whose shape is {list(nested_shape)}")
    convert = float_converter(np_dtype) if dtype.is_float else integer_converter(np_dtype)
    values = []
    for value in flat:
        try:
            values.append(convert(value))
        except BadValue as bad:
            raise InputError(f"{where}: {_element_path(len(values), nested_shape)} {bad}") from None
    try:
        return np.array(values, dtype=np_dtype).reshape(shape)
    except ValueError as error:  # e.g. a size beyond NumPy's limit next to a zero
        raise InputError(f"{where}: \"shape\" {list(shape)} cannot be used ({_first_line(error)})") from None


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


# Elements formatted at a time: the text of one piece (at most a few MiB) is all a writer holds.
JSON_PIECE_ELEMENTS = 1 << 16


def _lossy_nan_warning(lost: int) -> None:
    warnings.warn(f"JSON keeps NaN only as \"nan\": {lost} NaN value(s) lose their sign or payload bits; "
                  "write .npy to keep them", DmlcliWarning, stacklevel=3)


def _value_texts(values: np.ndarray) -> list[str]:
    """format_json_value of each element of a 1-D native array, element by element as it does, but with the
    NaN and infinity tests made once for the whole piece."""
    if values.dtype.kind != "f":
        return [str(value) for value in values.tolist()]  # Python ints: exact for 64-bit types too
    texts = [str(value) for value in values]  # NumPy's shortest text that reads back in this dtype
    for index in np.flatnonzero(~np.isfinite(values)).tolist():
        value = values[index]
        texts[index] = '"nan"' if np.isnan(value) else ('"inf"' if value > 0 else '"-inf"')
    return texts


class JsonTextWriter:
    """The JSON tensor text of a tensor whose elements come in C order, piece by piece: the same text as
    to_json_text, in memory bounded by one piece (JSON_PIECE_ELEMENTS elements) whatever the tensor's size.

    `write` receives the text in pieces. Give the elements in order with add() (1-D arrays of any length),
    then call close(), which writes the end and warns (DmlcliWarning) if NaNs lost their sign or payload.
    """

    def __init__(self, write: Callable[[str], None], shape, dtype):
        self.write_text = write
        self.shape = tuple(int(size) for size in shape)
        self.dtype = np.dtype(dtype).newbyteorder("=")  # elements are written from native-order copies
        self.count = math.prod(self.shape)
        self.position = 0
        self.lost_nans = 0
        # The sizes of the blocks below each axis but the first: an element that starts such a block closes
        # and opens that many brackets.
        self.blocks = [math.prod(self.shape[axis:]) for axis in range(len(self.shape) - 1, 0, -1)]
        self.row = self.shape[-1] if self.shape else 1
        data_type = from_numpy(self.dtype)
        sizes = ", ".join(str(size) for size in self.shape)
        self.write_text(f'{{"dtype": "{data_type.numpy_name}", "shape": [{sizes}], "data": ')

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values).reshape(-1)
        for start in range(0, values.size, JSON_PIECE_ELEMENTS):
            self._add_piece(to_native(values[start:start + JSON_PIECE_ELEMENTS]))

    def _add_piece(self, values: np.ndarray) -> None:
        if self.position + values.size > self.count:
            raise ValueError(f"{self.position + values.size} elements given for a tensor of {self.count}")
        self.lost_nans += lossy_nan_count(values)
        texts = _value_texts(values)
        if not self.shape:  # 0-D: the value alone
            self.write_text(texts[0] if texts else "")
            self.position += len(texts)
            return
        parts = []
        done = 0
        while done < len(texts):
            parts.append(self._before(self.position))
            take = min(len(texts) - done, self.row - self.position % self.row)
            parts.append(", ".join(texts[done:done + take]))
            done += take
            self.position += take
        self.write_text("".join(parts))

    def _before(self, index: int) -> str:
        """What comes before element `index`: the opening brackets, a separator, or the brackets that one row
        closes and the next opens around it."""
        if index == 0:
            return "[" * len(self.shape)
        if index % self.row:
            return ", "
        depth = sum(1 for block in self.blocks if index % block == 0)
        return "]" * depth + ", " + "[" * depth

    def close(self) -> None:
        if self.position != self.count:
            raise ValueError(f"{self.position} elements given for a tensor of {self.count}")
        self.write_text("]" * len(self.shape) + "}\n")
        if self.lost_nans:
            _lossy_nan_warning(self.lost_nans)


def write_json_text(array: np.ndarray, write: Callable[[str], None]) -> None:
    """The JSON tensor text of `array` through `write`, piece by piece (see JsonTextWriter)."""
    array = np.asarray(array)
    if array.size == 0:  # a zero size: no elements to stream, and brackets JsonTextWriter does not lay out
        write(_small_json_text(array))
        return
    writer = JsonTextWriter(write, array.shape, array.dtype)
    if array.ndim == 0 or array.flags.c_contiguous:
        flat = array.reshape(-1)  # a view
        for start in range(0, flat.size, JSON_PIECE_ELEMENTS):
            writer.add(flat[start:start + JSON_PIECE_ELEMENTS])
    else:
        for start in range(0, array.size, JSON_PIECE_ELEMENTS):
            writer.add(array.flat[start:start + JSON_PIECE_ELEMENTS])  # a copy of that piece, in C order
    writer.close()


def _small_json_text(array: np.ndarray) -> str:
    """The whole text at once, nesting by recursion: for tensors with a zero size (no elements)."""
    array = to_native(array)
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


def to_json_text(array: np.ndarray) -> str:
    """The JSON tensor format, values exact (shortest round-trip text for floats)."""
    pieces: list[str] = []
    write_json_text(array, pieces.append)
    return "".join(pieces)


