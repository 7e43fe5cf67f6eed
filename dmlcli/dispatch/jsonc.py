"""Reading a DxDispatch model file: JSON with comments and trailing commas, as DxDispatch accepts.

DxDispatch parses models with RapidJSON's kParseCommentsFlag | kParseTrailingCommasFlag
(DxDispatch/src/model/JsonParsers.cpp, ParseModel). Python's json module knows neither, so the
comments are blanked out (keeping every line and column where it was, for error messages) and
the trailing commas dropped before json.loads sees the text.

A model is untrusted and may be 64 MiB, so every step takes time linear in its size: each scan is
one regular expression whose every part is possessive (a string or comment left open runs to the end
of the text instead of being retried from each later character, which took minutes), and what a scan
finds is applied with NumPy, not character by character. Long arrays of numbers (a resource's
initialValues) are not turned into one Python object per number (a 60 MB model took 1.8 GB and 30 s):
each is kept as its text (NumberList) and converted, a piece at a time, into an array of the
resource's type once that type is known.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import operator
import re
import secrets
from decimal import Decimal
from typing import Iterator

import numpy as np

from ..errors import InputError, cut, quoted

# Integers longer than this are kept as Decimal: Python refuses int() of very long digit strings
# (ValueError past 4300 digits), and no field or element of a model holds more than 20 digits.
_MAX_INT_DIGITS = 1000


def shown(value) -> str:
    """A value from a model as messages echo it: a string in quotes, anything else in JSON spelling
    (true, null, [1, 2]), never Python's repr; cut to a readable length."""
    if isinstance(value, str):
        return quoted(cut(value))
    if isinstance(value, NumberList):
        return f"an array of {len(value)} numbers"
    from ..scalars import json_spelling

    try:
        return cut(json_spelling(value))
    except RecursionError:  # a value nested as deep as the JSON reader allows
        return "a deeply nested value"


def _parse_int(text: str):
    return Decimal(text) if len(text) > _MAX_INT_DIGITS else int(text)


def _parse_float(text: str):
    # RapidJSON refuses a number beyond a double's range ("Number too big to be stored in double"), where
    # float() would give inf. It is kept as the exact Decimal, which every reader refuses as out of range.
    number = float(text)
    if not math.isinf(number):
        return number
    try:
        return Decimal(text)
    except ArithmeticError:  # an exponent beyond even Decimal's range
        raise InputError(f"the number {cut(text)} is too large for a double (DxDispatch's JSON reader refuses it)") from None


# ---------------------------------------------------------------- comments and trailing commas

_WHITESPACE = rb"[ \t\r\n]*+"
# A JSON string; one left open takes the rest of the text (json.loads then says where it began).
_STRING = rb'"(?:[^"\\]++|\\[\s\S])*+(?:"|\\?\Z)'
_COMMENT = rb"//[^\n]*+|/\*[\s\S]*?(?:\*/|\Z)"
# Text up to the next comments (strings skipped whole), then those comments and the whitespace between them (as
# one span: a model of nothing but comments is one match): each match ends at comments, or at the end.
_COMMENTS = re.compile(rb'(?:[^"/]++|' + _STRING + rb"|/(?![/*]))*+((?:" + _COMMENT + rb")(?:" + _WHITESPACE +
                       rb"(?:" + _COMMENT + rb"))*+|\Z)")
# Text up to the next comma that only whitespace separates from a closing bracket, then that comma.
_ONE_COMMENT = re.compile(_COMMENT)
_TRAILING_COMMAS = re.compile(rb'(?:[^",]++|' + _STRING + rb'|,(?!' + _WHITESPACE + rb'[\]}]))*+(,|\Z)')
_MAYBE_TRAILING_COMMA = re.compile(rb',' + _WHITESPACE + rb'[\]}]')
_GROUP_SPAN = operator.methodcaller("span", 1)
_SPANS_AT_ONCE = 1 << 20


def _group_spans(pattern: re.Pattern, data: bytes) -> Iterator[np.ndarray]:
    """(start, end) of group 1 of each match that is not empty, as (n, 2) int64 arrays of at most a million.

    Taken without a Python step per match (map, methodcaller and chain are C): a hostile model can hold
    millions of comments."""
    bounds = itertools.chain.from_iterable(map(_GROUP_SPAN, pattern.finditer(data)))
    while True:
        spans = np.fromiter(itertools.islice(bounds, 2 * _SPANS_AT_ONCE), dtype=np.int64).reshape(-1, 2)
        if not len(spans):
            return
        yield spans[spans[:, 1] > spans[:, 0]]


def _position(data: bytes, offset: int) -> str:
    line, line_start = data.count(b"\n", 0, offset) + 1, data.rfind(b"\n", 0, offset) + 1
    return f"line {line} column {offset - line_start + 1}"


def _blank_comments(raw: bytes, data: np.ndarray) -> None:
    """Every byte of every comment in `raw` made a space in `data` (its copy), but line breaks."""
    inside = None
    last = None
    for spans in _group_spans(_COMMENTS, raw):
        if not len(spans):
            continue
        if inside is None:
            inside = np.zeros(len(raw) + 1, dtype=np.int8)
        inside[spans[:, 0]] += 1  # spans never overlap, so each byte is in at most one
        inside[spans[:, 1]] -= 1
        last = (int(spans[-1, 0]), int(spans[-1, 1]))
    if inside is None:
        return
    if last[1] == len(raw):  # comments up to the end: the last may be left open
        final = collections.deque(_ONE_COMMENT.finditer(raw, *last), maxlen=1)[0]  # consumed in C
        if final.group().startswith(b"/*") and (len(final.group()) < 4 or not final.group().endswith(b"*/")):
            raise InputError(f"the /* comment at {_position(raw, final.start())} is never closed (no */ follows it)")
    blank = np.cumsum(inside[:-1], dtype=np.int8).view(np.bool_)
    del inside
    np.logical_and(blank, data != ord("\n"), out=blank)
    np.logical_and(blank, data != ord("\r"), out=blank)
    data[blank] = ord(" ")


def strict_json(raw: bytes) -> bytes:
    """The same document (UTF-8) as strict JSON: comments blanked and trailing commas dropped, every other byte
    where it was (a comment's line breaks stay, so json.loads's lines and columns are the model's)."""
    if b"/" in raw:
        data = np.frombuffer(raw, dtype=np.uint8).copy()
        _blank_comments(raw, data)
        blanked = data.tobytes()
    else:  # no comment: the text itself, no copy
        data, blanked = None, raw
    if _MAYBE_TRAILING_COMMA.search(blanked) is None:
        return blanked
    if data is None:
        data = np.frombuffer(raw, dtype=np.uint8).copy()
    for spans in _group_spans(_TRAILING_COMMAS, blanked):
        data[spans[:, 0]] = ord(" ")
    return data.tobytes()


def strip_comments_and_trailing_commas(text: str) -> str:
    """The same document as strict JSON, every remaining character at its original line and column."""
    return strict_json(text.encode("utf-8")).decode("utf-8")


# ---------------------------------------------------------------- long arrays of numbers

# Text up to the next object member whose value is an array (strings skipped whole), then the array where it holds
# only the characters of numbers, commas and whitespace: one pass of a character class, whatever its length.
# Whether those characters make valid numbers is json.loads's to say, as the array is converted (NumberList).
_NUMBER_ARRAYS = re.compile(rb'(?:[^":]++|' + _STRING + rb"|:(?!" + _WHITESPACE + rb"\[))*+(?::" + _WHITESPACE +
                            rb"(\[[-+0-9.eE, \t\r\n]*+\])?+|\Z)")
_EMPTY_ARRAY = re.compile(rb"\[" + _WHITESPACE + rb"\]")
# Arrays of numbers at least this long (in bytes) are kept as text; shorter ones cost little as Python objects.
LIFTED_ARRAY_BYTES = 64
# Elsewhere than initialValues an array of numbers holds a handful (Sizes, Strides, Axes, dimensions).
MAX_OTHER_ARRAY_LENGTH = 256
# Numbers converted at a time: their Python objects are all that a long array costs beyond its result.
_CHUNK_BYTES = 1 << 20


class NumberList:
    """A JSON array of numbers kept as its text, `source[start:end]` (valid JSON numbers separated by commas,
    between the brackets): `len()` elements, converted a piece at a time by `pieces()`."""

    def __init__(self, source: bytes, start: int, end: int, count: int):
        self.source, self.start, self.end, self.count = source, start, end, count

    def __len__(self) -> int:
        return self.count

    def pieces(self) -> Iterator[tuple[int, list]]:
        """(index of the first, the numbers) for consecutive pieces of about a megabyte of text, read as the
        model reader reads numbers (an integer too long for int(), or a float beyond a double, as Decimal).
        Text that is not numbers separated by commas is refused as json.loads would refuse it in place."""
        position, index = self.start, 0
        while position < self.end:
            end = self.source.find(b",", min(position + _CHUNK_BYTES, self.end), self.end)
            end = self.end if end < 0 else end
            numbers = self._numbers(position, end)
            yield index, numbers
            index += len(numbers)
            position = end + 1

    def _numbers(self, start: int, end: int) -> list:
        piece = b"[" + self.source[start:end] + b"]"
        try:
            return _numbers(piece)
        except json.JSONDecodeError as error:
            offset = start + min(max(error.pos - 1, 0), end - start)
            raise InputError(f"malformed JSON at {_position(self.source, offset)}: {error.msg}") from None

    def as_list(self) -> list:
        return [number for _, numbers in self.pieces() for number in numbers]


def _numbers(piece: bytes) -> list:
    """json.loads at C speed (int and float), again with the exact readers where that would lose what they keep."""
    try:
        numbers = json.loads(piece)
        if math.inf not in numbers and -math.inf not in numbers:
            return numbers
    except ValueError:  # an integer past Python's int() digit limit
        pass
    return json.loads(piece, parse_int=_parse_int, parse_float=_parse_float)


def _lift_number_arrays(strict: bytes) -> tuple[bytes, str, dict[str, NumberList]]:
    """(the text with each long array of numbers that is an object member's value replaced by a placeholder
    string, the placeholders' prefix, each placeholder's array).

    The placeholders hold a random prefix no model can know; each keeps the line breaks of the array it stands
    for, so json.loads's line numbers are the model's."""
    arrays = [(int(start), int(end)) for spans in _group_spans(_NUMBER_ARRAYS, strict) for start, end in spans
              if end - start >= LIFTED_ARRAY_BYTES and not _EMPTY_ARRAY.fullmatch(strict, start, end)]
    if not arrays:
        return strict, "", {}
    prefix = f"dmlcli-number-array-{secrets.token_hex(16)}:"
    view = memoryview(strict)
    pieces, lifted, position = [], {}, 0
    for number, (start, end) in enumerate(arrays):
        name = f"{prefix}{number}"
        lifted[name] = NumberList(strict, start + 1, end - 1, strict.count(b",", start, end) + 1)
        pieces += [view[position:start], b'"', name.encode("ascii"), b'"', b"\n" * strict.count(b"\n", start, end)]
        position = end
    pieces.append(view[position:])
    return b"".join(pieces), prefix, lifted


# ---------------------------------------------------------------- the document


class _DuplicateKey(Exception):
    pass


def _no_constants(token: str):
    # RapidJSON (without kParseNanAndInfFlag) refuses these tokens; DxDispatch spells them as strings.
    raise InputError(f"the JSON token {token} is not accepted by DxDispatch; write \"nan\", \"inf\" or \"-inf\" "
                     "(in quotes) for a floating-point buffer")


def _object_hook(prefix: str, lifted: dict):
    """Each object's members, keys unique; a lifted array back as a NumberList (initialValues) or a list."""
    def members(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            if prefix and type(value) is str and value.startswith(prefix) and value in lifted:
                value = _restored(key, lifted.pop(value))
            seen[key] = value
        return seen

    return members


def _restored(key: str, array: NumberList):
    if key == "initialValues":
        return array
    if len(array) > MAX_OTHER_ARRAY_LENGTH:
        raise InputError(f"{quoted(cut(key))} holds an array of {len(array)} numbers; a DxDispatch model's fields "
                         f"hold at most a few (Sizes, Strides, Axes), and only a resource's initialValues may hold more "
                         f"than {MAX_OTHER_ARRAY_LENGTH}")
    return array.as_list()


def load_model_json(text, *, where: str):
    """Parse a model's text (UTF-8 bytes, or str); errors name the line and column."""
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    if not raw or raw.isspace():  # (not strip(): a copy of the text)
        raise InputError(f"{where}: is empty, expected a DxDispatch model (JSON)")
    try:
        strict = strict_json(raw)
    except InputError as error:
        raise InputError(f"{where}: {error}") from None
    del raw
    strict, prefix, lifted = _lift_number_arrays(strict)
    try:
        text = strict.decode("utf-8")  # as str, so that a byte-order mark is refused as before
        del strict
        return json.loads(text, object_pairs_hook=_object_hook(prefix, lifted), parse_constant=_no_constants,
                          parse_int=_parse_int, parse_float=_parse_float)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}") from None
    except _DuplicateKey as duplicate:
        raise InputError(f"{where}: the key {shown(duplicate.args[0])} appears twice in one object; "
                         "names must be unique within their dictionary") from None
    except InputError as error:
        raise InputError(f"{where}: {error}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None
