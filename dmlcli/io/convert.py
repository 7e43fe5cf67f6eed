"""Converting typed inputs to the type a call needs, when asked (issue 31, item 4): --convert TYPE on the command
line, convert= in the API.

NumPy writes FLOAT64 and INT64 by default, and few DirectML operators take FLOAT64: a .npy made by `numpy.save(p,
numpy.array([1.5, 2]))` is refused. --dtype cannot help (it names the type of bare JSON lists, and must agree with a
tensor that names its own). --convert float32 converts each typed input of another float type to FLOAT32, rounding
to nearest (ties to even, IEEE-754's default; beyond the type's range, +-inf), and --convert int32 each integer
input of another integer type, exactly (a value the type cannot hold is an error). Both may be given. An input of
the other kind keeps its type (GATHER's INT64 indices beside --convert float32), as do 4-bit inputs. The run says
what was converted in its caption.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..data_types import DataType, from_numpy, parse_data_type
from ..errors import InputError
from ..records import Frozen


class Conversion(Frozen):
    """One input converted: which, from and to which type, and how (rounded to nearest, or exact)."""

    label: str
    source: DataType
    target: DataType

    def __init__(self, label: str, source: DataType, target: DataType) -> None:
        vars(self).update(label=label, source=source, target=target)

    def describe(self) -> str:
        how = "rounded to nearest" if self.target.is_float else "exact"
        return f"{self.label} {self.source.name} → {self.target.name} ({how})"


def conversion_targets(values) -> tuple[DataType, ...]:
    """The types --convert (convert=) names: one, or a sequence of them, at most one float type and one integer
    type; none for None."""
    if values is None:
        return ()
    given = [values] if isinstance(values, (str, DataType, np.dtype, type)) else list(values)
    targets = tuple(_data_type(value) for value in given)
    for kind in (True, False):
        same = [t.name for t in targets if t.is_float == kind]
        if len(same) > 1:
            raise InputError(f"--convert names {' and '.join(same)}: give at most one float type and one integer "
                             "type (each converts the inputs of its kind)")
    return targets


def _data_type(value) -> DataType:
    target = value if isinstance(value, DataType) else (
        parse_data_type(value) if isinstance(value, str) else from_numpy(np.dtype(value)))
    if target.is_four_bit:
        raise InputError(f"--convert {target.name.lower()}: 4-bit types are not a conversion target (give the "
                         "values as a 4-bit .npy, or as a bare list with --dtype)")
    return target


def converted_type(data_type: DataType, targets: Sequence[DataType]) -> DataType:
    """The type an input of `data_type` has once converted (its own where no target is of its kind)."""
    if data_type.is_four_bit:
        return data_type
    return next((target for target in targets if target.is_float == data_type.is_float), data_type)


def convert_inputs(arrays: Sequence, targets: Sequence[DataType],
                   labels: Sequence[str]) -> tuple[list, tuple[Conversion, ...]]:
    """The arrays with each converted where a target of its kind differs from its type, and what was converted.
    Floats round to nearest; integers convert exactly or not at all (an InputError names the input and value)."""
    if not targets:
        return list(arrays), ()
    converted, done = [], []
    for array, label in zip(arrays, labels):
        if array is None:
            converted.append(None)
            continue
        source = from_numpy(array.dtype)
        target = converted_type(source, targets)
        if target == source:
            converted.append(array)
            continue
        converted.append(_converted(np.asarray(array), target, label))
        done.append(Conversion(label, source, target))
    return converted, tuple(done)


def _converted(array: np.ndarray, target: DataType, label: str) -> np.ndarray:
    dtype = target.numpy_dtype
    if target.is_float:
        with np.errstate(over="ignore"):  # past the type's range is +-inf, as rounding to nearest gives it
            return array.astype(dtype)
    info = np.iinfo(dtype)
    if array.size:
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise InputError(f"{label}: {int(bad)} does not fit {target.name} ({info.min} to {info.max}), so --convert "
                             f"{target.name.lower()} cannot convert it exactly")
    return array.astype(dtype)


def convert_hint(data_type: DataType, target: DataType | None = None) -> str:
    """How to convert a typed input of `data_type`: the option and the API keyword (a message's last words)."""
    target = target or (parse_data_type("float32") if data_type.is_float else parse_data_type("int32"))
    how = "rounded to nearest" if target.is_float else "exactly"
    name = target.numpy_name
    return f"--convert {name} converts it, {how} (convert=\"{name}\" in the API)"
