"""Numbers as text, read exactly into a DirectML data type, and values shown as text.

A data-type concern shared by the JSON tensor reader (io/json_tensor.py), the typed parameters of the
operator table (operators/parameters.py) and --check's reports: integers of any size are compared with the
type's range before conversion, hex/binary/octal literals are exact at 64 bits, decimals are rounded once,
correctly, to float16 or float32 (no double rounding through float64).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from .data_types import DataType, integer_limits, is_four_bit_dtype
from .errors import InputError

# decimal is imported where a number needs it (a fraction, an exponent, a float value, a huge integer): a tensor of
# JSON integers in range, as most runs on integer types give, never does, and importing it costs a run 0.8 ms
# (issue 23). Where a Decimal exists, decimal is loaded already.
if TYPE_CHECKING:
    from decimal import Decimal


@lru_cache(maxsize=None)  # an import statement costs each number a microsecond or two; this, a dict look-up
def _decimal():
    """(Decimal, InvalidOperation), decimal imported on first use."""
    from decimal import Decimal, InvalidOperation

    return Decimal, InvalidOperation


# Integers longer than this are kept as Decimal: Python refuses int() of very long digit strings,
# and no integer type dmlcli holds has more than 20 digits anyway.
_MAX_INT_DIGITS = 1000


_SPECIAL_FLOATS = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
                   "-inf": -math.inf, "-infinity": -math.inf, "nan": math.nan, "+nan": math.nan, "-nan": math.nan}


# Integer literals in hex, binary or octal, as strings ("0x10", "-0x80", "0b1010", "0o17"): the output's
# --format hex|bits shows bit patterns, and a tensor should be writable the same way. Prefix and hex digits
# in either case; an optional sign; no underscores or spaces. Integer types only.
# Patterns are compiled on first use (re caches them), not at import: most tensors hold no such literal.
_INTEGER_LITERAL = r"[+-]?0(?:[xX][0-9a-fA-F]+|[bB][01]+|[oO][0-7]+)"


_LOOKS_LIKE_LITERAL = r"[+-]?0[xXbBoO]"


def is_digits(text: str) -> bool:
    """Whether `text` is ASCII digits 0-9 only: str.isdigit() also takes other scripts' digits (int() reads the
    Arabic-Indic '١' as 1) and superscripts, which no number on dmlcli's command line may hold (issue 34)."""
    return text.isascii() and text.isdigit()


def is_whole_number(text: str) -> bool:
    """Whether `text` is an optional sign and ASCII digits (is_digits): what int() may read."""
    return is_digits(text[1:] if text[:1] in "+-" else text)


def integer_literal(text: str) -> int | None:
    """The value of a hex/binary/octal literal such as "0x1F" or "-0b101", exactly; None for other text."""
    if re.fullmatch(_INTEGER_LITERAL, text) is None:
        return None
    return int(text, 0)


class JsonConstant(str):
    """A JSON NaN / Infinity / -Infinity token, kept apart from strings written in quotes."""


class UnreadableJson(Exception):
    """Well-formed JSON that dmlcli still cannot take: a number beyond any range, a repeated key."""


# The smallest positive Decimal, as text (the least exponent Decimal holds): it stands in for a number whose
# exponent is more negative still, since every dmlcli type reads both alike (a float as the zero they
# round to, an integer type refuses both as fractional).
_TINIEST = f"1E{-(10**18 - 1)}"


_NUMBER = r"(-?)(\d+)(?:\.(\d*))?[eE]([+-]?\d+)"  # compiled on first use


def parse_decimal(text: str) -> Decimal:
    Decimal, InvalidOperation = _decimal()
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
            return Decimal(f"-{_TINIEST}" if sign else _TINIEST)
    raise UnreadableJson(f"number {shorten(text)} is too large to read") from None


def parse_integer(text: str):
    # Python refuses int() of very long digit strings; Decimal reads them, and range checks refuse them later.
    # "-0" stays a Decimal so that a float tensor keeps its sign bit (int("-0") is plain 0).
    if len(text) > _MAX_INT_DIGITS or text == "-0":
        return parse_decimal(text)
    return int(text)


def json_spelling(value) -> str:
    """A JSON value as the user wrote it: true, false, null, "text" (not Python's True, None, 'text')."""
    if isinstance(value, (bool, type(None), str, list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class BadValue(Exception):
    """A JSON value that the tensor's dtype cannot hold exactly; the caller adds where it is."""


def integer_converter(np_dtype: np.dtype):
    lowest, highest = integer_limits(np_dtype)

    def convert(value) -> int:
        if type(value) is int and lowest <= value <= highest:
            return value  # a JSON integer in range: what most integer tensors hold
        return _other_integer(value, np_dtype, lowest, highest)

    return convert


def _other_integer(value, np_dtype: np.dtype, lowest: int, highest: int) -> int:
    """integer_converter's reading of anything but an int in range: literals, floats, Decimals, refusals."""
    Decimal = _decimal()[0]
    shown_literal = None
    if isinstance(value, str) and not isinstance(value, JsonConstant):
        literal = integer_literal(value)
        if literal is not None:
            shown_literal, value = shorten(json_spelling(value)), literal
        elif re.match(_LOOKS_LIKE_LITERAL, value):
            raise BadValue(f"= {shorten(json_spelling(value))} is not an integer, as {np_dtype} needs "
                            '(hex, binary and octal are written "0x1f", "0b101", "0o17", optionally signed)')
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        shown = str(value) if isinstance(value, JsonConstant) else json_spelling(value)
        raise BadValue(f"= {shown} is not an integer, as {np_dtype} needs")
    if isinstance(value, float):
        value = Decimal(value) if math.isfinite(value) else Decimal("NaN")
    if isinstance(value, Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            raise BadValue(f"= {shorten(str(value))} is not an integer, as {np_dtype} needs")
    # Compared before int(): int(Decimal("1e999999999")) would build a billion-digit number.
    if not lowest <= value <= highest:
        shown = shown_literal or shorten(str(value))
        raise BadValue(f"= {shown} is out of range for {np_dtype} ({lowest} to {highest})")
    return int(value)


def float_converter(np_dtype: np.dtype):
    Decimal = _decimal()[0]
    scalar = np_dtype.type

    def convert(value):
        if isinstance(value, str):
            special = _SPECIAL_FLOATS.get(value.strip().lower())
            if special is None and integer_literal(value) is not None:
                raise BadValue(f"= {shorten(json_spelling(value))} is a hex, binary or octal integer literal, "
                                f"which only integer types take; {np_dtype} needs a decimal number")
            if special is None:
                raise BadValue(f"= {shorten(json_spelling(value))} is not a number "
                                '(non-finite values are written "inf", "-inf" or "nan")')
            return scalar(special)
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise BadValue(f"= {shorten(json_spelling(value))} is not a number")
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
    Decimal = _decimal()[0]
    scalar = np_dtype.type
    as_double = float(exact)
    if math.isinf(as_double):
        raise BadValue(f"= {shorten(str(exact))} is out of range for {np_dtype}")
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
    Decimal = _decimal()[0]
    largest = np_dtype.type(np.finfo(np_dtype).max)
    spacing = float(largest) - float(np.nextafter(largest, np_dtype.type(0)))
    threshold = float(largest) + spacing / 2
    if abs(as_double) == threshold and abs(exact) < Decimal(threshold):
        return largest if exact > 0 else -largest
    raise BadValue(f"= {shorten(str(exact))} is out of range for {np_dtype} (write \"inf\" for infinity)")


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
    convert = float_converter(np_dtype) if np_dtype.kind == "f" else integer_converter(np_dtype)
    try:
        return np_dtype.type(convert(value))
    except BadValue as error:
        raise InputError(f"{where} {error}") from None


def _scalar_text(text: str, where: str):
    Decimal, InvalidOperation = _decimal()
    stripped = text.strip()
    if not stripped.isascii():  # Decimal() and int() read other scripts' digits too: '١' would be 1
        raise InputError(f"{where} = {shorten(text)!r} is not a number (write it with ASCII digits 0-9)")
    if stripped.lower() in _SPECIAL_FLOATS or integer_literal(stripped) is not None:
        return stripped
    try:
        if is_whole_number(stripped):
            return parse_integer(stripped.lstrip("+"))
        number = Decimal(stripped)
    except (InvalidOperation, ValueError):
        raise InputError(f"{where} = {shorten(text)!r} is not a number") from None
    except UnreadableJson as error:
        raise InputError(f"{where}: {error}") from None
    if not number.is_finite():
        raise InputError(f"{where} = {shorten(text)!r} is not a number (write inf, -inf or nan)")
    return number


def format_value(value, dtype: np.dtype, style: str) -> str:
    """One element as text: its value ("table"), bit pattern ("bits") or hex encoding ("hex")."""
    if style in ("bits", "hex"):
        if is_four_bit_dtype(dtype):
            # Four bits, as a DirectML buffer holds them (ml_dtypes keeps them in the low half of a byte).
            width = 4
            pattern = int(np.asarray(value, dtype=dtype).reshape(1).view(np.uint8)[0]) & 0xF
        else:
            width = dtype.itemsize * 8
            # In native byte order first: a big-endian file's bytes seen as a native integer would be swapped.
            pattern = int(np.asarray(value, dtype=dtype.newbyteorder("=")).reshape(1).view(f"uint{width}")[0])
        if style == "hex":
            return f"0x{pattern:0{width // 4}x}"
        binary = f"{pattern:0{width}b}"
        return "0b" + "_".join(binary[i:i + 8] for i in range(0, width, 8))
    if dtype.kind == "f":
        return str(value)  # NumPy's shortest round-trip text: nan, inf, -0.0, 1e-45 ...
    return str(int(value))
