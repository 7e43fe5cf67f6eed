"""The JSON tensor format, read exactly and written as the shortest text that reads back the same.

{"dtype": "uint8", "shape": [2, 2], "data": [[0, 128], [42, 255]]}: dtype in NumPy or DirectML
spelling; shape optional when data is nested; a bare list takes its dtype from the caller. Floats
may be "inf", "-inf", "nan" or the JSON tokens Infinity / NaN.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from decimal import Decimal, InvalidOperation

import numpy as np

from ..data_types import DataType, as_bits, from_numpy, parse_data_type
from ..errors import DmlcliWarning, InputError, ValidationError, first_line as _first_line
from .npy import to_native

MAX_JSON_DEPTH = 64


# Integers longer than this are kept as Decimal: Python refuses int() of very long digit strings,
# and no integer type dmlcli holds has more than 20 digits anyway.
_MAX_INT_DIGITS = 1000


_JSON_KEYS = ("dtype", "shape", "data", "strides")


_SPECIAL_FLOATS = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
                   "-inf": -math.inf, "-infinity": -math.inf, "nan": math.nan, "+nan": math.nan, "-nan": math.nan}


# The canonical quiet NaN of each float width: JSON's "nan" reads back as this pattern.
_CANONICAL_NAN_BITS = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}


# Integer literals in hex, binary or octal, as strings ("0x10", "-0x80", "0b1010", "0o17"): the output's
# --format hex|bits shows bit patterns, and a tensor should be writable the same way. Prefix and hex digits
# in either case; an optional sign; no underscores or spaces. Integer types only.
# Patterns are compiled on first use (re caches them), not at import: most tensors hold neither.
_INTEGER_LITERAL = r"[+-]?0(?:[xX][0-9a-fA-F]+|[bB][01]+|[oO][0-7]+)"
_LOOKS_LIKE_LITERAL = r"[+-]?0[xXbBoO]"


def integer_literal(text: str) -> int | None:
    """The value of a hex/binary/octal literal such as "0x1F" or "-0b101", exactly; None for other text."""
    if re.fullmatch(_INTEGER_LITERAL, text) is None:
        return None
    return int(text, 0)


class _Constant(str):
    """A JSON NaN / Infinity / -Infinity token, kept apart from strings written in quotes."""


def parse_json_tensor(text: str, *, where: str, dtype: DataType | None = None, inline: bool = False,
                      bare_dtype: DataType | None = None) -> np.ndarray:
    document = _load_json(text, where=where, inline=inline)
    if isinstance(document, dict):
        return tensor_from_object(document, where=where, dtype=dtype)
    _refuse_bare_scalar(document, where)
    dtype = dtype or bare_dtype
    if dtype is None:
        raise BareListWithoutType(document, where)
    return tensor_from_data(document, dtype, where=where)


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
    # Refused here, where the text is known, so that the message can show the fix: [5] for 5.
    if isinstance(document, (int, float, Decimal, str)) and not isinstance(document, bool):
        shown = str(document) if isinstance(document, _Constant) else json_spelling(document)
        raise BareScalar(_shorten(shown), where)


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


# The smallest positive Decimal (the least exponent Decimal holds): it stands in for a number whose
# exponent is more negative still, since every dmlcli type reads both alike (a float as the zero they
# round to, an integer type refuses both as fractional).
_TINIEST = Decimal(f"1E{-(10**18 - 1)}")
_NUMBER = r"(-?)(\d+)(?:\.(\d*))?[eE]([+-]?\d+)"


def _parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:  # an exponent beyond what Decimal holds (about 10**18 digits)
        pass
    match = re.fullmatch(_NUMBER, text)
    if match is not None:
        sign, whole, fraction, exponent = match.groups()
        if not (whole + (fraction or "")).strip("0"):
            return Decimal(f"{sign}0")  # zero, whatever the exponent
        if exponent.startswith("-"):
            return -_TINIEST if sign else _TINIEST
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


def json_spelling(value) -> str:
    """A JSON value as the user wrote it: true, false, null, "text" (not Python's True, None, 'text')."""
    if isinstance(value, (bool, type(None), str, list, dict)):
        return json.dumps(value, default=str)
    return str(value)


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
        shown_literal = None
        if isinstance(value, str) and not isinstance(value, _Constant):
            literal = integer_literal(value)
            if literal is not None:
                shown_literal, value = _shorten(json_spelling(value)), literal
            elif re.match(_LOOKS_LIKE_LITERAL, value):
                raise _BadValue(f"= {_shorten(json_spelling(value))} is not an integer, as {np_dtype} needs "
                                '(hex, binary and octal are written "0x1f", "0b101", "0o17", optionally signed)')
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            shown = str(value) if isinstance(value, _Constant) else json_spelling(value)
            raise _BadValue(f"= {shown} is not an integer, as {np_dtype} needs")
        if isinstance(value, float):
            value = Decimal(value) if math.isfinite(value) else Decimal("NaN")
        if isinstance(value, Decimal):
            if not value.is_finite() or value != value.to_integral_value():
                raise _BadValue(f"= {_shorten(str(value))} is not an integer, as {np_dtype} needs")
        # Compared before int(): int(Decimal("1e999999999")) would build a billion-digit number.
        if not info.min <= value <= info.max:
            shown = shown_literal or _shorten(str(value))
            raise _BadValue(f"= {shown} is out of range for {np_dtype} ({info.min} to {info.max})")
        return int(value)

    return convert


def _float_converter(np_dtype: np.dtype):
    scalar = np_dtype.type

    def convert(value):
        if isinstance(value, str):
            special = _SPECIAL_FLOATS.get(value.strip().lower())
            if special is None and integer_literal(value) is not None:
                raise _BadValue(f"= {_shorten(json_spelling(value))} is a hex, binary or octal integer literal, "
                                f"which only integer types take; {np_dtype} needs a decimal number")
            if special is None:
                raise _BadValue(f"= {_shorten(json_spelling(value))} is not a number "
                                '(non-finite values are written "inf", "-inf" or "nan")')
            return scalar(special)
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise _BadValue(f"= {_shorten(json_spelling(value))} is not a number")
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


def parse_scalar(value, dtype: DataType, *, where: str):
    """One value as a scalar of `dtype`, read exactly as a JSON tensor's data are read.

    `value` is a number, a NumPy scalar, or text as typed on a command line ("0.5", "-3", "inf",
    "1e-3"); integers of any size are compared with the type's range before conversion, and
    decimals are rounded once, correctly, to float16 or float32.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        value = _scalar_text(value, where)
    np_dtype = dtype.numpy_dtype
    convert = _float_converter(np_dtype) if np_dtype.kind == "f" else _integer_converter(np_dtype)
    try:
        return np_dtype.type(convert(value))
    except _BadValue as error:
        raise InputError(f"{where} {error}") from None


def _scalar_text(text: str, where: str):
    stripped = text.strip()
    if stripped.lower() in _SPECIAL_FLOATS or integer_literal(stripped) is not None:
        return stripped
    try:
        if stripped.lstrip("+-").isdigit():
            return _parse_integer(stripped.lstrip("+"))
        number = Decimal(stripped)
    except (InvalidOperation, ValueError):
        raise InputError(f"{where} = {_shorten(text)!r} is not a number") from None
    except _UnreadableJson as error:
        raise InputError(f"{where}: {error}") from None
    if not number.is_finite():
        raise InputError(f"{where} = {_shorten(text)!r} is not a number (write inf, -inf or nan)")
    return number
