"""Reading a DxDispatch model file: JSON with comments and trailing commas, as DxDispatch accepts.

DxDispatch parses models with RapidJSON's kParseCommentsFlag | kParseTrailingCommasFlag
(DxDispatch/src/model/JsonParsers.cpp, ParseModel). Python's json module knows neither, so the
comments are blanked out (keeping every line and column where it was, for error messages) and
the trailing commas dropped before json.loads sees the text.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

from ..errors import InputError, cut, quoted

# Integers longer than this are kept as Decimal: Python refuses int() of very long digit strings
# (ValueError past 4300 digits), and no field or element of a model holds more than 20 digits.
_MAX_INT_DIGITS = 1000


def shown(value) -> str:
    """A value from a model as messages echo it: a string in quotes, anything else in JSON spelling
    (true, null, [1, 2]), never Python's repr; cut to a readable length."""
    if isinstance(value, str):
        return quoted(cut(value))
    from ..scalars import json_spelling

    return cut(json_spelling(value))


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

# A JSON string (kept), a // or /* */ comment (blanked).
_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*[\s\S]*?\*/')
# A JSON string (kept), or a comma that only whitespace separates from a closing bracket (dropped).
_STRINGS_AND_TRAILING_COMMAS = re.compile(r'"(?:[^"\\]|\\.)*"|,(?=\s*[\]}])')


def _blank(match: re.Match) -> str:
    text = match.group(0)
    if text.startswith('"'):
        return text
    return re.sub(r"[^\r\n]", " ", text)


def _drop_comma(match: re.Match) -> str:
    text = match.group(0)
    return text if text.startswith('"') else " "


def strip_comments_and_trailing_commas(text: str) -> str:
    """The same document as strict JSON, every remaining character at its original line and column."""
    without_comments = _STRINGS_AND_COMMENTS.sub(_blank, text)
    return _STRINGS_AND_TRAILING_COMMAS.sub(_drop_comma, without_comments)


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _no_constants(token: str):
    # RapidJSON (without kParseNanAndInfFlag) refuses these tokens; DxDispatch spells them as strings.
    raise InputError(f"the JSON token {token} is not accepted by DxDispatch; write \"nan\", \"inf\" or \"-inf\" "
                     "(in quotes) for a floating-point buffer")


def load_model_json(text: str, *, where: str):
    """Parse a model's text; errors name the line and column."""
    if not text.strip():
        raise InputError(f"{where}: is empty, expected a DxDispatch model (JSON)")
    strict = strip_comments_and_trailing_commas(text)
    try:
        return json.loads(strict, object_pairs_hook=_unique_keys, parse_constant=_no_constants, parse_int=_parse_int,
                          parse_float=_parse_float)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}") from None
    except _DuplicateKey as duplicate:
        raise InputError(f"{where}: the key {shown(duplicate.args[0])} appears twice in one object; "
                         "names must be unique within their dictionary") from None
    except InputError as error:
        raise InputError(f"{where}: {error}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply") from None
