"""Parameter kinds: the non-tensor fields of an operator's DESC struct, declared once in the table.

Each parameter knows its DirectML field name, its command-line and API spellings (derived from the
field name), its default, how to read a value typed by a person or written in a DxDispatch model,
and what it looks like to a CUDA kernel. The command line, the Python API, `dispatch`, `describe`
and both backends read these declarations; none of them names a particular parameter.

Values after parsing ("typed values") are what both backends receive, in a dict by field name:
an enum's short name (str), a FLOAT field as numpy.float32, an integer as int, a typed scalar as
a NumPy scalar of the tensor's own type, ScaleBias as a (scale, bias) pair of float32 or None.

The kinds are: enum, float, integer, typed scalar, ScaleBias, bool, integer array, fused activation, data type,
scalar union, activations, and their base, Parameter. What they share (field spellings, ranges) is options.py,
so that an operator with no parameters (BIT_XOR, ADD) runs without making these classes. They are
immutable records (records.Frozen), not dataclasses: dataclass() wrote and compiled an __init__, __repr__ ... for
each kind as the module was imported, about 8 ms of every run of an operator with parameters (issue 23). Each
__init__ takes the fields in the order the dataclasses did (the base's field and help first), by position or by
name; the kinds compare by identity (as with eq=False) and `records.replace` stands for dataclasses.replace.
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from ...data_types import FLOAT32, DataType
from ...errors import InputError, cut, quoted
from ...records import Frozen
from ...scalars import is_whole_number
from .options import CUDA_VALUE_TYPES, UINT32_RANGE, _given, option_flag, snake_case


class Parameter(Frozen):
    """Base of every parameter kind. Subclasses say how values are read and passed to kernels.

    Compared by identity (no __eq__ or __hash__ of their own), as the table's declarations are.
    """

    field: str  # the DESC field, e.g. "InfinityMode"
    help: str

    # DxDispatch requires every DESC field that DirectML does not mark _Maybenull_.
    required_in_desc = True
    # Fields the repr leaves out (FusedActivationParameter's entries: each repr would print a whole operator).
    _not_in_repr: tuple[str, ...] = ()

    def __init__(self, field: str, help: str) -> None:
        vars(self).update(field=field, help=help)

    def __repr__(self) -> str:
        # As the dataclass wrote it: every field, in the order __init__ stored them (the declaration order).
        shown = ", ".join(f"{name}={value!r}" for name, value in vars(self).items() if name not in self._not_in_repr)
        return f"{type(self).__qualname__}({shown})"

    @property
    def options(self) -> tuple[str, ...]:
        """The API keywords (and, with dashes, the command-line options) this parameter takes."""
        return (snake_case(self.field),)

    @property
    def default(self):
        raise NotImplementedError

    def choices(self, option: str) -> tuple[str, ...] | None:
        """The values an option may take, for help and shell completion; None for free values."""
        return None

    def metavar(self, option: str) -> str:
        return "VALUE"

    def parse(self, given: Mapping[str, object], data_types: Mapping[str, DataType]):
        """The typed value from the API keywords / options in `given` (None or absent: the default)."""
        raise NotImplementedError

    def parse_desc(self, value, data_types: Mapping[str, DataType]):
        """The typed value from a DxDispatch model's DESC field, as DxDispatch writes it."""
        return self.parse({self.options[0]: value}, data_types)

    def describe(self, value) -> str:
        """A typed value as `describe` and messages show it."""
        return str(value)

    def describe_default(self) -> str:
        return self.describe(self.default)

    def cuda_arguments(self, value, data_types: Mapping[str, DataType]) -> tuple[CudaArgument, ...]:
        raise NotImplementedError

    def check_declaration(self, tensors: tuple[str, ...]) -> None:
        """Table self-check: raise ValueError where the declaration cannot be right."""

    @property
    def desc_fields(self) -> tuple[str, ...]:
        """The DESC fields this parameter reads in a DxDispatch model (an array's count field too)."""
        return (self.field,)

    def activations_in(self, value) -> tuple:
        """The operator descs a typed value holds, each (activation entry, {FLOAT field: value}): validation checks
        them at the call's feature level as the activation's own calls are. None for most kinds."""
        return ()


# DirectML's fields that index a tensor's dimensions (REDUCE's Axes, GATHER's Axis, ...): UINT, so ONNX's negative
# axes (-1 for the last) are refused, in words that give the axis DirectML means (NegativeAxes).
AXIS_FIELDS = ("Axis", "Axes")


class NegativeAxes(InputError):
    """A negative value for an axis field: DirectML's axes are unsigned. Validation, which knows the input's rank,
    words it with the axes ONNX's negative ones are (`words(rank)`); without one, in general terms."""

    def __init__(self, where: str, values: tuple[int, ...]) -> None:
        self.where = where
        self.values = values
        super().__init__(self.words(None))

    def words(self, rank: int | None) -> str:
        given = ",".join(str(value) for value in self.values)
        text = f"{self.where} = {given}: DirectML's axes are unsigned"
        if rank is None:
            return text + " (0 to the input's DimensionCount - 1; ONNX's -1 is the last)"
        counted = [value + rank if value < 0 else value for value in self.values]
        if not all(0 <= value < rank for value in counted):
            return text + f" (0 to {rank - 1} for the input's {rank} dimensions)"
        meant = ",".join(str(value) for value in counted)
        return text + f"; ONNX's {given} is {meant} here (the input has {rank} dimensions): give {meant}"


class CudaArgument(Frozen):
    """One scalar kernel argument a parameter contributes: its C++ type, its name in the body, its value.
    Compared by identity."""

    c_type: str
    name: str
    value: object  # a NumPy scalar of the matching width

    def __init__(self, c_type: str, name: str, value: object) -> None:
        vars(self).update(c_type=c_type, name=name, value=value)


class EnumParameter(Parameter):
    """A DirectML enum field such as DML_IS_INFINITY_MODE InfinityMode; the typed value is the short name."""

    enum_prefix: str  # e.g. "DML_IS_INFINITY_MODE_"
    values: tuple[tuple[str, int], ...]  # (short name, enum value) in enum order
    default_value: str

    def __init__(self, field: str, help: str, enum_prefix: str = "", values: tuple[tuple[str, int], ...] = (),
                 default_value: str = "") -> None:
        vars(self).update(field=field, help=help, enum_prefix=enum_prefix, values=values, default_value=default_value)

    @property
    def default(self) -> str:
        return self.default_value

    def choices(self, option: str) -> tuple[str, ...]:
        return tuple(short.lower() for short, _ in self.values)

    def metavar(self, option: str) -> str:
        return "MODE"

    def parse_value(self, text) -> str:
        """Accept `positive`, `POSITIVE`, `DML_IS_INFINITY_MODE_POSITIVE` or the enum value `1`."""
        key = str(text).strip().upper()
        if key.startswith(self.enum_prefix):
            key = key[len(self.enum_prefix):]
        for short, number in self.values:
            if key == short or key == str(number):
                return short
        allowed = ", ".join(short.lower() for short, _ in self.values)
        raise InputError(f"unknown {self.field} {quoted(text)} (expected one of {allowed})")

    def parse(self, given, data_types) -> str:
        value = _given(given, self.options[0])
        return self.default if value is None else self.parse_value(value)

    def describe(self, value) -> str:
        return str(value).lower()

    def number(self, short: str) -> int:
        return dict(self.values)[short]

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return (CudaArgument("int", self.field, np.int32(self.number(value))),)

    def check_declaration(self, tensors) -> None:
        if self.default_value not in dict(self.values):
            raise ValueError(f"{self.field}: default {self.default_value!r} is not one of its values")


class FloatParameter(Parameter):
    """A FLOAT (float32) field such as CLIP's Min or an activation's Alpha.

    Values are read exactly and rounded once to float32, which is what DirectML receives.
    """

    default_value: float

    def __init__(self, field: str, help: str, default_value: float = 0.0) -> None:
        vars(self).update(field=field, help=help, default_value=default_value)

    @property
    def default(self) -> np.float32:
        return np.float32(self.default_value)

    def metavar(self, option: str) -> str:
        return "FLOAT"

    def parse(self, given, data_types) -> np.float32:
        from ...scalars import parse_scalar

        value = _given(given, self.options[0])
        if value is None:
            return self.default
        return parse_scalar(value, FLOAT32, where=f"{self.field} ({option_flag(self.options[0])})")

    def describe(self, value) -> str:
        return np.format_float_positional(np.float32(value), trim="-") if np.isfinite(value) else str(value)

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return (CudaArgument("float", self.field, np.float32(value)),)


class IntegerParameter(Parameter):
    """A UINT / INT field, checked against its range."""

    default_value: int
    minimum: int
    maximum: int

    def __init__(self, field: str, help: str, default_value: int = 0, minimum: int = 0,
                 maximum: int = 2**32 - 1) -> None:
        vars(self).update(field=field, help=help, default_value=default_value, minimum=minimum, maximum=maximum)

    @property
    def default(self) -> int:
        return self.default_value

    def metavar(self, option: str) -> str:
        return "INT"

    def parse(self, given, data_types) -> int:
        value = _given(given, self.options[0])
        if value is None:
            return self.default
        text = str(value).strip()
        if isinstance(value, bool) or not is_whole_number(text) or len(text) > 30:
            raise InputError(f"{self.field} ({option_flag(self.options[0])}) = {quoted(cut(text, 40))} is not a whole number")
        number = int(text)
        if number < 0 <= self.minimum and self.field in AXIS_FIELDS:
            raise NegativeAxes(f"{self.field} ({option_flag(self.options[0])})", (number,))
        if not self.minimum <= number <= self.maximum:
            raise InputError(f"{self.field} ({option_flag(self.options[0])}) = {number} is out of range "
                             f"({self.minimum} to {self.maximum})")
        return number

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return (CudaArgument("long long", self.field, np.int64(value)),)

    def check_declaration(self, tensors) -> None:
        if not self.minimum <= self.default_value <= self.maximum:
            raise ValueError(f"{self.field}: default {self.default_value} is outside {self.minimum}..{self.maximum}")


class TypedScalarParameter(Parameter):
    """A DML_SCALAR_UNION field (CLIP1's Min and Max): a value of a tensor's own data type, read exactly.

    An INT64 or UINT64 bound is never routed through a double. `default_limit` is "lowest" or "max":
    the type's own limit, as an omitted bound means in DirectML's CLIP1 usage; or "zero" or "one", that
    number in the tensor's type (FILL_VALUE_SEQUENCE's ValueStart and ValueDelta).
    """

    tensor: str  # whose data type the value has (MinMaxDataType must match it)
    default_limit: str

    def __init__(self, field: str, help: str, tensor: str = "OutputTensor", default_limit: str = "lowest") -> None:
        vars(self).update(field=field, help=help, tensor=tensor, default_limit=default_limit)

    @property
    def default(self):
        return None  # depends on the tensor's type: see value_or_limit

    def metavar(self, option: str) -> str:
        return "VALUE"

    def _limit(self, data_type: DataType):
        dtype = data_type.numpy_dtype
        if self.default_limit in _DEFAULT_NUMBERS:
            return dtype.type(_DEFAULT_NUMBERS[self.default_limit])
        info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
        return dtype.type(info.min if self.default_limit == "lowest" else info.max)

    def parse(self, given, data_types):
        from ...scalars import parse_scalar

        data_type = data_types[self.tensor]
        value = _given(given, self.options[0])
        if value is None:
            return self._limit(data_type)
        return parse_scalar(value, data_type, where=f"{self.field} ({option_flag(self.options[0])}, {data_type.name})")

    def describe_default(self) -> str:
        if self.default_limit in _DEFAULT_NUMBERS:
            return f"{_DEFAULT_NUMBERS[self.default_limit]} (in {self.tensor}'s data type)"
        return f"the {'lowest' if self.default_limit == 'lowest' else 'largest'} value of {self.tensor}'s data type"

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        dtype = data_types[self.tensor].numpy_dtype
        return (CudaArgument(CUDA_VALUE_TYPES[dtype.name], self.field, np.asarray(value, dtype).astype(
            np.float32 if dtype == np.float16 else dtype)[()]),)

    def check_declaration(self, tensors) -> None:
        if self.tensor not in tensors:
            raise ValueError(f"{self.field}: takes its data type from {self.tensor}, which the operator does not have")
        if self.default_limit not in ("lowest", "max", *_DEFAULT_NUMBERS):
            raise ValueError(f"{self.field}: default_limit must be 'lowest', 'max', 'zero' or 'one'")


_DEFAULT_NUMBERS = {"zero": 0, "one": 1}  # TypedScalarParameter defaults that are a number, not a type's limit


class ScaleBiasParameter(Parameter):
    """DML_SCALE_BIAS* ScaleBias: optional {FLOAT Scale; FLOAT Bias}, applied to the input first.

    Two options, --scale and --bias; giving either turns ScaleBias on (the other takes 1 or 0).
    Without either it is NULL and the input is used as it is (bit for bit: -0.0 + 0 would be +0.0).
    """

    required_in_desc = False

    @property
    def options(self) -> tuple[str, ...]:
        return ("scale", "bias")

    @property
    def default(self):
        return None

    def metavar(self, option: str) -> str:
        return "FLOAT"

    def parse(self, given, data_types):
        from ...scalars import parse_scalar

        scale, bias = _given(given, "scale"), _given(given, "bias")
        if scale is None and bias is None:
            return None
        return (np.float32(1) if scale is None else parse_scalar(scale, FLOAT32, where="ScaleBias.Scale (--scale)"),
                np.float32(0) if bias is None else parse_scalar(bias, FLOAT32, where="ScaleBias.Bias (--bias)"))

    def parse_desc(self, value, data_types):
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) - {"Scale", "Bias"}:
            raise InputError(f"{self.field} must be null or an object with Scale and Bias")
        return self.parse({"scale": value.get("Scale", 1.0), "bias": value.get("Bias", 0.0)}, data_types)

    def describe(self, value) -> str:
        if value is None:
            return "none"
        return f"scale {FloatParameter.describe(self, value[0])}, bias {FloatParameter.describe(self, value[1])}"

    def describe_default(self) -> str:
        return "none (the input as it is)"

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        on, scale, bias = (0, 1.0, 0.0) if value is None else (1, value[0], value[1])
        return (CudaArgument("int", "HasScaleBias", np.int32(on)), CudaArgument("float", "Scale", np.float32(scale)),
                CudaArgument("float", "Bias", np.float32(bias)))


class BoolParameter(Parameter):
    """A BOOL field such as CUMULATIVE_SUMMATION's HasExclusiveSum: true/false, 1/0, yes/no."""

    default_value: bool

    def __init__(self, field: str, help: str, default_value: bool = False) -> None:
        vars(self).update(field=field, help=help, default_value=default_value)

    @property
    def default(self) -> bool:
        return self.default_value

    def choices(self, option: str) -> tuple[str, ...]:
        return ("true", "false")

    def metavar(self, option: str) -> str:
        return "BOOL"

    def parse(self, given, data_types) -> bool:
        value = _given(given, self.options[0])
        if value is None:
            return self.default
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
            return bool(value)
        key = str(value).strip().lower()
        if key in ("true", "1", "yes", "on"):
            return True
        if key in ("false", "0", "no", "off"):
            return False
        raise InputError(f"{self.field} ({option_flag(self.options[0])}) = {quoted(cut(str(value), 40))} is not "
                         "a boolean (expected true or false, 1 or 0)")

    def describe(self, value) -> str:
        return "true" if value else "false"

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return (CudaArgument("int", self.field, np.int32(1 if value else 0)),)


class IntArrayParameter(Parameter):
    """An array field with its count field, such as REDUCE's Axes (with AxisCount) or SLICE's Offsets.

    The typed value is a tuple of ints, or None where the field is left out and `default_text` says what
    that means (REDUCE's Axes: every axis): the shape rule resolves it, as it depends on the input's rank.
    On the command line `--axes 1,2` (or `--axes ""` for an empty array); in the API any sequence of
    integers; in a DxDispatch model a JSON array, with the count field (AxisCount) equal to its length.
    Ranges and lengths that depend on the tensors (an axis below the rank) are the shape rule's to check.
    """

    count_field: str | None  # the DESC field that holds the array's length, e.g. "AxisCount"
    minimum: int
    maximum: int
    default_value: tuple[int, ...] | None
    default_text: str  # what leaving it out means, where default_value is None ("every axis")
    max_length: int

    def __init__(self, field: str, help: str, count_field: str | None = None, minimum: int = UINT32_RANGE[0],
                 maximum: int = UINT32_RANGE[1], default_value: tuple[int, ...] | None = None, default_text: str = "",
                 max_length: int = 8) -> None:
        vars(self).update(field=field, help=help, count_field=count_field, minimum=minimum, maximum=maximum,
                          default_value=default_value, default_text=default_text, max_length=max_length)

    @property
    def default(self):
        return self.default_value

    @property
    def desc_fields(self) -> tuple[str, ...]:
        return (self.field,) + ((self.count_field,) if self.count_field else ())

    def metavar(self, option: str) -> str:
        return "INTS"

    def parse(self, given, data_types):
        value = _given(given, self.options[0])
        if value is None:
            return self.default
        return self.parse_items(value, f"{self.field} ({option_flag(self.options[0])})")

    def parse_items(self, value, where: str) -> tuple[int, ...]:
        if isinstance(value, str):
            text = value.strip().strip("[]()")
            items: list = [item.strip() for item in text.split(",")] if text.strip() else []
        elif isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1):
            items = list(value)
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            items = [value]
        else:
            raise InputError(f"{where} must be a list of whole numbers such as 1,2 (found {quoted(cut(str(value), 40))})")
        if len(items) > self.max_length:
            raise InputError(f"{where} has {len(items)} values; at most {self.max_length} (one per dimension)")
        numbers = []
        for item in items:
            text = str(item).strip()
            if isinstance(item, (bool, np.bool_, float, np.floating)) or not is_whole_number(text) \
                    or len(text) > 30:
                raise InputError(f"{where}: {quoted(cut(text, 40))} is not a whole number")
            numbers.append(int(text))
        if min(numbers, default=0) < 0 <= self.minimum and self.field in AXIS_FIELDS:
            raise NegativeAxes(where, tuple(numbers))
        for number in numbers:
            if not self.minimum <= number <= self.maximum:
                raise InputError(f"{where}: {number} is out of range ({self.minimum} to {self.maximum})")
        return tuple(numbers)

    def parse_desc(self, value, data_types):
        if value is None:
            return self.default
        if not isinstance(value, list):
            raise InputError(f"{self.field} must be a JSON array of whole numbers")
        return self.parse_items(value, self.field)

    def check_desc_count(self, desc: Mapping[str, object]) -> None:
        """A DxDispatch desc's count field (AxisCount) must equal the array's length, as DirectML reads it."""
        if self.count_field is None or self.count_field not in desc or not isinstance(desc.get(self.field), list):
            return
        count = desc[self.count_field]
        if isinstance(count, bool) or not isinstance(count, int) or count != len(desc[self.field]):
            raise InputError(f"{self.count_field} {count} does not match the {len(desc[self.field])} values of "
                             f"{self.field}")

    def describe(self, value) -> str:
        if value is None:
            return self.default_text or "none"
        return "{" + ", ".join(str(v) for v in value) + "}"

    def describe_default(self) -> str:
        return self.describe(self.default_value)

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return ()  # shaped operators' kernels take their parameters whole (array_kernel)

    def check_declaration(self, tensors) -> None:
        if self.default_value is not None and any(not self.minimum <= v <= self.maximum for v in self.default_value):
            raise ValueError(f"{self.field}: default {self.default_value} is outside {self.minimum}..{self.maximum}")


class FloatArrayParameter(Parameter):
    """A FLOAT array field with its count field, such as RESAMPLE's Scales (with ScaleCount).

    The same interface as IntArrayParameter: the typed value is a tuple of numpy.float32 (each value read
    exactly and rounded once to float32, as DirectML receives it), or None where the field is left out and
    `default_text` says what that means (the shape rule resolves it). On the command line `--scales 2,2.5`;
    in the API any sequence of numbers; in a DxDispatch model a JSON array, with the count field equal to its
    length. Ranges that depend on the tensors (one value per dimension, a scale above 0) are the shape rule's.
    """

    count_field: str | None  # the DESC field that holds the array's length, e.g. "ScaleCount"
    default_value: tuple[float, ...] | None
    default_text: str
    max_length: int

    def __init__(self, field: str, help: str, count_field: str | None = None,
                 default_value: tuple[float, ...] | None = None, default_text: str = "", max_length: int = 8) -> None:
        vars(self).update(field=field, help=help, count_field=count_field, default_value=default_value,
                          default_text=default_text, max_length=max_length)

    @property
    def default(self):
        return None if self.default_value is None else tuple(np.float32(v) for v in self.default_value)

    @property
    def desc_fields(self) -> tuple[str, ...]:
        return (self.field,) + ((self.count_field,) if self.count_field else ())

    def metavar(self, option: str) -> str:
        return "FLOATS"

    def parse(self, given, data_types):
        value = _given(given, self.options[0])
        if value is None:
            return self.default
        return self.parse_items(value, f"{self.field} ({option_flag(self.options[0])})")

    def parse_items(self, value, where: str) -> tuple[np.float32, ...]:
        from ...scalars import parse_scalar

        if isinstance(value, str):
            text = value.strip().strip("[]()")
            items: list = [item.strip() for item in text.split(",")] if text.strip() else []
        elif isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim == 1):
            items = list(value)
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            items = [value]
        else:
            raise InputError(f"{where} must be a list of numbers such as 0.5,2 (found {quoted(cut(str(value), 40))})")
        if len(items) > self.max_length:
            raise InputError(f"{where} has {len(items)} values; at most {self.max_length} (one per dimension)")
        numbers = []
        for item in items:
            if isinstance(item, (bool, np.bool_)) or item is None or (isinstance(item, str) and not item):
                raise InputError(f"{where}: {quoted(cut(str(item), 40))} is not a number")
            numbers.append(parse_scalar(item, FLOAT32, where=where))
        return tuple(numbers)

    def parse_desc(self, value, data_types):
        if value is None:
            return self.default
        if not isinstance(value, list):
            raise InputError(f"{self.field} must be a JSON array of numbers")
        return self.parse_items(value, self.field)

    check_desc_count = IntArrayParameter.check_desc_count

    def describe(self, value) -> str:
        if value is None:
            return self.default_text or "none"
        return "{" + ", ".join(FloatParameter.describe(self, v) for v in value) + "}"

    def describe_default(self) -> str:
        return self.describe(self.default)

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return ()  # shaped operators' kernels take their parameters whole (array_kernel)


# ---------------------------------------------------------------- fused activations (ELEMENT_WISE_ADD1)

class FusedActivationParameter(Parameter):
    """`_Maybenull_ const DML_OPERATOR_DESC* FusedActivation`: an activation applied to the operator's result.

    The typed value is None (no activation) or (activation entry, {FLOAT field: numpy.float32}), the
    fields being the activation's own parameters with its own defaults. The entries that may be fused
    are handed over by the module that declares the operator (`activations`), so this module imports
    no operator. Options: fused_activation (--fused-activation elu, ACTIVATION_ELU, DML_OPERATOR_ACTIVATION_ELU,
    the enum value 35, or none) and one fused_<field> (--fused-alpha, ...) per FLOAT field any fusable
    activation has; giving one the chosen activation lacks is an error that names it. In a DxDispatch
    model the field reads {"Type": "ACTIVATION_ELU", "Alpha": 0.5} or {"Type": ..., "Desc": {...}};
    its InputTensor and OutputTensor must be absent or null (DirectML requires NULL in a fused desc),
    and every FLOAT field must be there (DxDispatch requires them, as in any desc).
    Kernels receive an int FusedActivationType (the activation's DML_OPERATOR_TYPE value, 0 for none)
    and one float Fused<Field> per FLOAT field (0 where the activation has no such field).
    """

    activations: tuple  # the fusable entries

    required_in_desc = False
    _not_in_repr = ("activations",)

    def __init__(self, field: str, help: str, activations: tuple = ()) -> None:
        vars(self).update(field=field, help=help, activations=activations)

    @property
    def float_fields(self) -> tuple[str, ...]:
        """Every FLOAT field of the fusable activations, in the order they first appear."""
        found: list[str] = []
        for activation in self.activations:
            for parameter in activation.parameters:
                if parameter.field not in found:
                    found.append(parameter.field)
        return tuple(found)

    @property
    def options(self) -> tuple[str, ...]:
        return ("fused_activation",) + tuple("fused_" + snake_case(name) for name in self.float_fields)

    @property
    def default(self):
        return None

    def choices(self, option: str) -> tuple[str, ...] | None:
        if option == "fused_activation":
            return ("none",) + tuple(activation.name.lower() for activation in self.activations)
        return None

    def metavar(self, option: str) -> str:
        return "ACTIVATION" if option == "fused_activation" else "FLOAT"

    def find(self, text):
        """The fusable entry named `text` (elu, ACTIVATION_ELU, DML_OPERATOR_ACTIVATION_ELU or 35); None for none."""
        key = re.sub(r"[\s\-.]+", "_", str(text).strip()).upper()
        if key in ("NONE", "0", "NULL", ""):
            return None
        bare = key.removeprefix("DML_OPERATOR_").removeprefix("ACTIVATION_")
        for activation in self.activations:
            if bare == activation.name or key == str(activation.enum_value):
                return activation
        allowed = ", ".join(activation.name.lower() for activation in self.activations)
        raise InputError(f"{self.field}: {quoted(cut(text, 60))} is not an activation DirectML can fuse "
                         f"(expected none or one of {allowed})")

    def _typed(self, activation, values: Mapping[str, object], spelled) -> dict:
        from ...scalars import parse_scalar

        typed = {}
        for parameter in activation.parameters:
            value = values.get(parameter.field)
            typed[parameter.field] = parameter.default if value is None else parse_scalar(
                value, FLOAT32, where=f"{self.field} {activation.name} {parameter.field} ({spelled(parameter.field)})")
        return typed

    def parse(self, given, data_types):
        fields = {name: _given(given, "fused_" + snake_case(name)) for name in self.float_fields}
        extra = [name for name, value in fields.items() if value is not None]
        name = _given(given, "fused_activation")
        activation = None if name is None else self.find(name)
        if activation is None:
            if extra:
                raise InputError(f"{option_flag('fused_' + snake_case(extra[0]))} needs --fused-activation "
                                 f"(an activation that has {extra[0]})")
            return None
        own = {parameter.field for parameter in activation.parameters}
        for field_name in extra:
            if field_name not in own:
                takes = ", ".join(option_flag("fused_" + snake_case(f)) for f in own) or "no parameters"
                raise InputError(f"{self.field} {activation.name} has no {field_name} "
                                 f"({option_flag('fused_' + snake_case(field_name))}); it takes {takes}")
        return (activation, self._typed(activation, fields, lambda f: option_flag("fused_" + snake_case(f))))

    def parse_desc(self, value, data_types):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InputError(f"{self.field} must be null or an operator desc object such as "
                             '{"Type": "ACTIVATION_ELU", "Alpha": 0.5}')
        type_key = "Type" if "Type" in value else "type"
        type_name = value.get(type_key)
        if not isinstance(type_name, str):
            raise InputError(f"{self.field} needs a string Type (an activation such as ACTIVATION_ELU)")
        activation = self.find(type_name)
        if activation is None:
            raise InputError(f"{self.field} Type {quoted(type_name)} is not an activation (write null for none)")
        desc_key = "Desc" if "Desc" in value else "desc"
        desc = value.get(desc_key)
        top = set(value) - {type_key}
        if desc is None:
            desc = {key: item for key, item in value.items() if key != type_key}
        elif not isinstance(desc, dict):
            raise InputError(f"{self.field} Desc must be a JSON object with the activation's fields")
        elif top - {desc_key}:
            raise InputError(f"{self.field}: unexpected {', '.join(sorted(top - {desc_key}))} beside Type and Desc")
        own = [parameter.field for parameter in activation.parameters]
        unknown = sorted(set(desc) - set(own) - {"InputTensor", "OutputTensor"})
        if unknown:
            raise InputError(f"{self.field} {activation.dml_name} desc has no field {', '.join(unknown)} "
                             f"(it takes {', '.join(own) or 'no fields'})")
        for tensor in ("InputTensor", "OutputTensor"):
            if desc.get(tensor) is not None:
                raise InputError(f"{self.field} {activation.dml_name}: {tensor} must be absent or null "
                                 "(DirectML requires NULL tensors in a fused activation desc)")
        missing = [name for name in own if name not in desc]
        if missing:
            raise InputError(f"{self.field} {activation.dml_name} desc has no {', '.join(missing)}; DxDispatch "
                             "requires every field that DirectML does not mark optional")
        return (activation, self._typed(activation, desc, lambda f: f"{self.field}.{f}"))

    def describe(self, value) -> str:
        if value is None:
            return "none"
        activation, typed = value
        shown = ", ".join(f"{name} {FloatParameter.describe(self, number)}" for name, number in typed.items())
        return f"{activation.name.lower()}" + (f" ({shown})" if shown else "")

    def describe_default(self) -> str:
        return "none"

    def activations_in(self, value) -> tuple:
        return () if value is None else (value,)

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        activation, typed = (None, {}) if value is None else value
        number = 0 if activation is None else activation.enum_value
        found = [CudaArgument("int", "FusedActivationType", np.int32(number))]
        for name in self.float_fields:
            found.append(CudaArgument("float", "Fused" + name, np.float32(typed.get(name, 0.0))))
        return tuple(found)

    def check_declaration(self, tensors) -> None:
        if not self.activations:
            raise ValueError(f"{self.field}: no fusable activations given")
        names = [activation.name for activation in self.activations]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.field}: an activation is listed twice in {names}")
        for activation in self.activations:
            if len(activation.inputs) != 1 or not all(isinstance(p, FloatParameter) for p in activation.parameters):
                raise ValueError(f"{self.field}: {activation.name} is not a one-input activation with FLOAT "
                                 "fields only")


# ---------------------------------------------------------------- typed scalars (CLIP1, CLIP_GRAD1)


def _data_type_from(value, where: str) -> DataType:
    """A data type given as a DataType, a DirectML or NumPy name, or a NumPy dtype."""
    from ...data_types import from_numpy, parse_data_type

    if isinstance(value, DataType):
        return value
    try:
        if isinstance(value, str):
            return parse_data_type(value)
        return from_numpy(np.dtype(value))
    except InputError as error:
        raise InputError(f"{where}: {error}") from None
    except TypeError:
        raise InputError(f"{where}: {value!r} is not a data type") from None


class DataTypeParameter(Parameter):
    """A DML_TENSOR_DATA_TYPE field that must repeat a tensor's data type (CLIP1's MinMaxDataType).

    Optional in the API and on the command line (the tensor's own type when left out); a DxDispatch
    model writes it as "FLOAT16" or "DML_TENSOR_DATA_TYPE_FLOAT16". The typed value is DirectML's
    short name (a str). Kernels get nothing from it: the tensor's type already says it.
    """

    tensor: str

    def __init__(self, field: str, help: str, tensor: str = "OutputTensor") -> None:
        vars(self).update(field=field, help=help, tensor=tensor)

    @property
    def default(self):
        return None  # the tensor's data type: see parse

    def metavar(self, option: str) -> str:
        return "TYPE"

    def parse(self, given, data_types) -> str:
        expected = data_types[self.tensor]
        value = _given(given, self.options[0])
        if value is None:
            return expected.name
        named = _data_type_from(value, f"{self.field} ({option_flag(self.options[0])})")
        if named != expected:
            raise InputError(f"{self.field} {named.name} must match {self.tensor} data type {expected.name}")
        return named.name

    def describe_default(self) -> str:
        return f"{self.tensor}'s data type"

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return ()

    def check_declaration(self, tensors) -> None:
        if self.tensor not in tensors:
            raise ValueError(f"{self.field}: names {self.tensor}, which the operator does not have")


# DML_SCALAR_UNION's members (DirectML.h) and the data type each holds; Bytes is BYTE[8].
_SCALAR_UNION_MEMBERS = {"int8": "INT8", "uint8": "UINT8", "int16": "INT16", "uint16": "UINT16",
                         "int32": "INT32", "uint32": "UINT32", "int64": "INT64", "uint64": "UINT64",
                         "float32": "FLOAT32", "float64": "FLOAT64", "bytes": None}
_SCALAR_UNION_SPELLING = "Bytes, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64, Float32, Float64"


class ScalarUnionParameter(TypedScalarParameter):
    """A DML_SCALAR_UNION field as DxDispatch writes it, typed by the tensor's data type (= MinMaxDataType).

    In a model: a plain number (read exactly in the tensor's type, as the API and the command line
    read it), or an object naming one union member: {"Float32": 1.5}, {"Int8": -3}, {"UInt16": 15360}
    (a half's bits), {"Bytes": [0, 60]}. The member's value is converted to the member's own type and
    its little-endian bytes, in a union zero-filled to 8 bytes (DML_SCALAR_UNION{}), are read as the
    tensor's type. DxDispatch itself reads only the member that matches the data type (UInt16 for
    FLOAT16); dmlcli also reads the others, by those bytes.
    """

    def parse_desc(self, value, data_types):
        if not isinstance(value, dict):
            return super().parse_desc(value, data_types)
        from ...data_types import parse_data_type
        from ...scalars import parse_scalar

        data_type = data_types[self.tensor]
        where = f"{self.field} (DML_SCALAR_UNION read as {data_type.name})"
        if len(value) != 1:
            raise InputError(f"{where} must be a number or an object with one union member "
                             f"({_SCALAR_UNION_SPELLING}); found {len(value)} keys")
        (key, member_value), = value.items()
        lowered = str(key).lower()
        if lowered not in _SCALAR_UNION_MEMBERS:
            raise InputError(f"{where}: unknown union member {key!r} (expected one of {_SCALAR_UNION_SPELLING})")
        member = _SCALAR_UNION_MEMBERS[lowered]
        if member is None:
            if (not isinstance(member_value, list) or len(member_value) > 8
                    or any(isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= 255 for b in member_value)):
                raise InputError(f"{where}: Bytes must be a list of at most 8 integers from 0 to 255")
            raw = bytes(member_value)
        else:
            member_type = parse_data_type(member)
            scalar = parse_scalar(member_value, member_type, where=f"{where}: {key}")
            raw = np.asarray(scalar, dtype=member_type.numpy_dtype.newbyteorder("<")).tobytes()
        dtype = data_type.numpy_dtype
        raw = raw.ljust(8, b"\0")[:dtype.itemsize]
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype)[0]


# ---------------------------------------------------------------- activation arrays (RNN, GRU, LSTM)


def _split_outside_parentheses(text: str) -> list[str]:
    """`elu(alpha=0.5),tanh` -> ['elu(alpha=0.5)', 'tanh']: commas inside parentheses separate fields."""
    items, depth, current = [], 0, ""
    for character in text:
        if character == "(":
            depth += 1
        elif character == ")":
            depth -= 1
        if character == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += character
    items.append(current)
    return [item.strip() for item in items]


class ActivationsParameter(FusedActivationParameter):
    """`ActivationDescCount` + `_Field_size_(ActivationDescCount) const DML_OPERATOR_DESC* ActivationDescs`.

    The typed value is a tuple of (activation entry, {FLOAT field: numpy.float32}), one per activation in
    the order DirectML reads them, or None where the call leaves the field out (the operator's own default,
    which depends on Direction: the shape rule resolves it, `defaults` per direction). Activations are found
    and their FLOAT fields parsed as FusedActivationParameter does. On the command line `--activations
    sigmoid,tanh` or with fields `--activations "elu(alpha=0.5),elu(alpha=3.5)"`; in the API a sequence of
    such names (or one comma-separated string); in a DxDispatch desc the array of {"Type": "ACTIVATION_ELU",
    "Alpha": 0.5} (or {"Type": ..., "Desc": {...}}) objects, ActivationDescCount equal to its length.
    """

    defaults: tuple[str, ...]  # the activations of one direction when the field is left out

    required_in_desc = True

    def __init__(self, field: str, help: str, activations: tuple = (), defaults: tuple[str, ...] = ()) -> None:
        vars(self).update(field=field, help=help, activations=activations, defaults=defaults)

    @property
    def options(self) -> tuple[str, ...]:
        return ("activations",)

    @property
    def desc_fields(self) -> tuple[str, ...]:
        return (self.field, "ActivationDescCount")

    def choices(self, option: str) -> tuple[str, ...] | None:
        return None

    def metavar(self, option: str) -> str:
        return "ACTIVATIONS"

    def find(self, text):
        """The activation named `text` (tanh, ACTIVATION_TANH, DML_OPERATOR_ACTIVATION_TANH or 51); None for none."""
        try:
            return super().find(text)
        except InputError:
            allowed = ", ".join(activation.name.lower() for activation in self.activations)
            raise InputError(f"{self.field}: {quoted(cut(str(text), 60))} is not an activation this operator takes "
                             f"(expected one of {allowed})") from None

    def _one(self, text, where: str):
        text = str(text).strip()
        match = re.fullmatch(r"([^()]+?)\s*(?:\((.*)\))?", text, re.S)
        if match is None or not match.group(1).strip():
            raise InputError(f"{where}: {quoted(cut(text, 60))} is not an activation such as tanh or elu(alpha=0.5)")
        activation = self.find(match.group(1))
        if activation is None:
            raise InputError(f"{where}: an activation is needed for each place (none is not one)")
        own = {parameter.field.lower(): parameter.field for parameter in activation.parameters}
        values = {}
        for item in _split_outside_parentheses(match.group(2) or ""):
            if not item:
                continue
            key, equals, value = item.partition("=")
            field_name = own.get(key.strip().lower().replace("_", ""))
            if not equals or field_name is None:
                takes = ", ".join(parameter.field.lower() for parameter in activation.parameters) or "no fields"
                raise InputError(f"{where}: {activation.name.lower()} has no field {quoted(cut(key.strip(), 30))} "
                                 f"(write name=value; it takes {takes})")
            values[field_name] = value.strip()
        return (activation, self._typed(activation, values, lambda f: f"{where} {f.lower()}"))

    def parse(self, given, data_types):
        value = _given(given, "activations")
        if value is None:
            return None
        where = f"{self.field} (--activations)"
        items = _split_outside_parentheses(value) if isinstance(value, str) else list(value)
        if not items or items == [""]:
            raise InputError(f"{where} is empty; give one activation per place, such as tanh or sigmoid,tanh")
        found = []
        for item in items:
            if isinstance(item, dict):
                found.append(self._from_desc(item, where))
            elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Mapping):
                activation = self.find(item[0])
                if activation is None:
                    raise InputError(f"{where}: an activation is needed for each place (none is not one)")
                found.append((activation, self._typed(activation, item[1], lambda f: f"{where} {f}")))
            else:
                found.append(self._one(item, where))
        return tuple(found)

    def _from_desc(self, value, where: str):
        single = FusedActivationParameter(field=where, help="", activations=self.activations)
        parsed = single.parse_desc(value, {})
        if parsed is None:
            raise InputError(f"{where}: each entry must be an activation desc, not null")
        return parsed

    def parse_desc(self, value, data_types):
        if not isinstance(value, list) or not value:
            raise InputError(f"{self.field} must be a non-empty JSON array of activation descs such as "
                             '{"Type": "ACTIVATION_TANH"}')
        return tuple(self._from_desc(item, f"{self.field}[{index}]") for index, item in enumerate(value))

    def check_desc_count(self, desc: Mapping[str, object]) -> None:
        """ActivationDescCount must equal the length of ActivationDescs, as DirectML reads that many descs."""
        if "ActivationDescCount" not in desc or not isinstance(desc.get(self.field), list):
            return
        count = desc["ActivationDescCount"]
        if isinstance(count, bool) or not isinstance(count, int) or count != len(desc[self.field]):
            raise InputError(f"ActivationDescCount {count} does not match the {len(desc[self.field])} descs of "
                             f"{self.field}")

    def describe(self, value) -> str:
        if value is None:
            return self.describe_default()
        return ", ".join(FusedActivationParameter.describe(self, item) for item in value)

    def describe_default(self) -> str:
        return ", ".join(name.lower() for name in self.defaults) + " (for each direction)"

    def activations_in(self, value) -> tuple:
        # Left out (None), the defaults apply: activations without FLOAT fields, so nothing to check.
        return () if value is None else tuple(value)

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return ()  # shaped operators' kernels take their parameters whole (array_kernel)

    def check_declaration(self, tensors) -> None:
        super().check_declaration(tensors)
        names = {activation.name for activation in self.activations}
        if not self.defaults or any(name not in names for name in self.defaults):
            raise ValueError(f"{self.field}: defaults {self.defaults} must be activations it accepts")
