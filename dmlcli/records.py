"""Immutable records without dataclass(): the classes a run makes as it starts (the table's entries and rows,
data types, feature levels, a call and its request).

dataclass() writes and compiles an __init__, a __repr__, a __setattr__ ... for each class when its module is
imported: 0.3 to 1.8 ms a class here, and the dozen on `dmlcli run`'s path were about 7 ms of its start-up
(issue 23). These are plain classes instead: each __init__ names its fields, and `Frozen` refuses any later
assignment or deletion, as a frozen dataclass does (with the same exception, FrozenInstanceError), and shows a
record as a dataclass would, from those same __init__ arguments.
"""

from __future__ import annotations

from functools import cached_property, lru_cache


class Frozen:
    """Attributes are set once, in __init__ (through `vars(self).update`), and never again.

    Records keep their fields in __dict__ (no __slots__): functools.cached_property writes there, and pickle
    (Dask's and the suite's worker processes) restores them there without calling __setattr__.
    """

    __slots__ = ()

    def __setattr__(self, name: str, value) -> None:
        raise _frozen(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise _frozen(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        """As a dataclass shows itself: the class and each __init__ argument's value, in order (the fields are
        named once, in __init__)."""
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in field_names(type(self)))
        return f"{type(self).__name__}({fields})"

    def __getstate__(self) -> dict:
        """The fields, without what cached_property derived from them (rebuilt on first use after unpickling; an
        operator entry's read-only `options` view, a mappingproxy, cannot be pickled at all)."""
        derived = type(self)
        return {name: value for name, value in vars(self).items()
                if not isinstance(getattr(derived, name, None), cached_property)}


def _frozen(message: str) -> Exception:
    from dataclasses import FrozenInstanceError  # loaded only for the mistake, not for every run

    return FrozenInstanceError(message)


@lru_cache(maxsize=None)
def field_names(kind: type) -> tuple[str, ...]:
    """A record class's fields: its __init__ arguments, in order (inspect is imported only when asked)."""
    import inspect

    return tuple(inspect.signature(kind).parameters)


def replace(record, **changes):
    """A new record like `record` with `changes` (dataclasses.replace for these classes): the class is called
    again with every __init__ argument, so an operator entry's self-checks run on the result."""
    names = field_names(type(record))
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)[0]!r}")
    return type(record)(**{name: changes[name] if name in changes else getattr(record, name) for name in names})
