"""Immutable records without dataclass(): the classes a run makes as it starts (the table's entries and rows,
data types, feature levels, a call and its request).

dataclass() writes and compiles an __init__, a __repr__, a __setattr__ ... for each class when its module is
imported: 0.3 to 1.8 ms a class here, and the dozen on `dmlcli run`'s path were about 7 ms of its start-up
(issue 23). These are plain classes instead: each __init__ names its fields, and `Frozen` refuses any later
assignment or deletion, as a frozen dataclass does (with the same exception, FrozenInstanceError).
"""

from __future__ import annotations

from functools import cached_property


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

    def __getstate__(self) -> dict:
        """The fields, without what cached_property derived from them (rebuilt on first use after unpickling; an
        operator entry's read-only `options` view, a mappingproxy, cannot be pickled at all)."""
        derived = type(self)
        return {name: value for name, value in vars(self).items()
                if not isinstance(getattr(derived, name, None), cached_property)}


def _frozen(message: str) -> Exception:
    from dataclasses import FrozenInstanceError  # loaded only for the mistake, not for every run

    return FrozenInstanceError(message)


def replace(record, **changes):
    """A new record like `record` with `changes` (dataclasses.replace for these classes): the class is called
    again with every __init__ argument, so an operator entry's self-checks run on the result."""
    import inspect

    names = inspect.signature(type(record)).parameters
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)[0]!r}")
    return type(record)(**{name: changes[name] if name in changes else getattr(record, name) for name in names})
