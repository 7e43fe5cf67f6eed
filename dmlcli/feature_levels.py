"""DirectML feature levels (DML_FEATURE_LEVEL), in order, and the spellings users may type."""

from __future__ import annotations

import re

from .errors import InputError, quoted
from .records import Frozen

_PREFIX = "DML_FEATURE_LEVEL_"


class FeatureLevel(Frozen):
    """One DML_FEATURE_LEVEL: equal to another of the same numbers, hashable, ordered (an immutable record)."""

    major: int
    minor: int

    def __init__(self, major: int, minor: int) -> None:
        vars(self).update(major=major, minor=minor)

    def __eq__(self, other) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.major == other.major and self.minor == other.minor

    def __hash__(self) -> int:
        return hash((self.major, self.minor))

    @property
    def value(self) -> int:
        return (self.major << 12) | (self.minor << 8)

    @property
    def short(self) -> str:
        return f"{self.major}_{self.minor}"

    @property
    def name(self) -> str:
        return _PREFIX + self.short

    # All four written out (functools.total_ordering derived <= and >= from < and the generated ==, which a
    # validation calls dozens of times: issue 23). `value` orders levels exactly as (major, minor) does.
    def __lt__(self, other: "FeatureLevel") -> bool:
        return self.value < other.value

    def __le__(self, other: "FeatureLevel") -> bool:
        return self.value <= other.value

    def __gt__(self, other: "FeatureLevel") -> bool:
        return self.value > other.value

    def __ge__(self, other: "FeatureLevel") -> bool:
        return self.value >= other.value

    def __str__(self) -> str:
        return self.name


ALL_FEATURE_LEVELS = tuple(
    FeatureLevel(major, minor)
    for major, minor in [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0), (4, 1),
                         (5, 0), (5, 1), (5, 2), (6, 0), (6, 1), (6, 2), (6, 3), (6, 4)]
)
NEWEST = ALL_FEATURE_LEVELS[-1]
_BY_VALUE = {level.value: level for level in ALL_FEATURE_LEVELS}
_BY_NUMBERS = {(level.major, level.minor): level for level in ALL_FEATURE_LEVELS}
_BY_SHORT = {level.short: level for level in ALL_FEATURE_LEVELS}  # "4_1": how the table and most users write them
# Compiled on first use (re caches it), not at import: a run at the default level never reads a spelling.
_SPELLING = r"^(?:DML_FEATURE_LEVEL_|FL)?(\d+)[._](\d+)$"


def level(short: str) -> FeatureLevel:
    """The level named `short` ("4_1"), for use in tables."""
    return parse_feature_level(short)


def parse_feature_level(text) -> FeatureLevel:
    """Accept `4.1`, `4_1`, `DML_FEATURE_LEVEL_4_1`, `0x4100` (and a FeatureLevel or None for the newest)."""
    if text is None:
        return NEWEST
    if isinstance(text, FeatureLevel):
        return text
    spelled = str(text).strip()
    found = _BY_SHORT.get(spelled)  # without the regular expression, which a run would compile (issue 23)
    if found is not None:
        return found
    if not spelled.isascii():  # int() and the pattern's \d read other scripts' digits: '٤_١' would be 4_1
        found = None
    elif spelled.lower().startswith("0x"):
        try:
            found = _BY_VALUE.get(int(spelled, 16))
        except ValueError:
            found = None
    else:
        match = re.match(_SPELLING, spelled, re.IGNORECASE)
        if match:
            found = _BY_NUMBERS.get((int(match.group(1)), int(match.group(2))))
    if found is None:
        known = ", ".join(fl.short for fl in ALL_FEATURE_LEVELS)
        raise InputError(
            f"unknown feature level {quoted(spelled)} (expected one of {known}; "
            f"also spelled like 4.1, DML_FEATURE_LEVEL_4_1 or 0x4100)"
        )
    return found
