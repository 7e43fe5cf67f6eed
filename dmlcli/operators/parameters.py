"""Parameter kinds: the non-tensor fields of an operator's DESC struct, declared once in the table.

Each parameter knows its DirectML field name, its command-line and API spellings (derived from the
field name), its default, how to read a value typed by a person or written in a DxDispatch model,
and what it looks like to a CUDA kernel. The command line, the Python API, `dispatch`, `describe`
and both backends read these declarations; none of them names a particular parameter.

Values after parsing ("typed values") are what both backends receive, in a dict by field name:
an enum's short name (str), a FLOAT field as numpy.float32, an integer as int, a typed scalar as
a NumPy scalar of the tensor's own type, ScaleBias as a (scale, bias) pair of float32 or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..data_types import FLOAT32, DataType
from ..errors import InputError

# C++ type of each NumPy dtype's value as a CUDA kernel argument.
CUDA_VALUE_TYPES = {
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "float16": "float", "float32": "float", "float64": "double",
}


def snake_case(field: str) -> str:
    """DirectML's field name in the API's spelling: InfinityMode -> infinity_mode, MinMaxDataType -> min_max_data_type."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", field).lower()


def option_flag(option: str) -> str:
    """The command-line spelling of an API keyword: infinity_mode -> --infinity-mode."""
    return "--" + option.replace("_", "-")


@dataclass(frozen=True)
class CudaArgument:
    """One scalar kernel argument a parameter contributes: its C++ type, its name in the body, its value."""

    c_type: str
    name: str
    value: object  # a NumPy scalar of the matching width


@dataclass(frozen=True)
class Parameter:
    """Base of every parameter kind. Subclasses say how values are read and passed to kernels."""

    field: str  # the DESC field, e.g. "InfinityMode"
    help: str

    # DxDispatch requires every DESC field that DirectML does not mark _Maybenull_.
    required_in_desc = True

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


def _given(given: Mapping[str, object], option: str):
    value = given.get(option)
    return None if value is None else value


@dataclass(frozen=True)
class EnumParameter(Parameter):
    """A DirectML enum field such as DML_IS_INFINITY_MODE InfinityMode; the typed value is the short name."""

    enum_prefix: str = ""  # e.g. "DML_IS_INFINITY_MODE_"
    values: tuple[tuple[str, int], ...] = ()  # (short name, enum value) in enum order
    default_value: str = ""

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
        raise InputError(f"unknown {self.field} {text!r} (expected one of {allowed})")

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


@dataclass(frozen=True)
class FloatParameter(Parameter):
    """A FLOAT (float32) field such as CLIP's Min or an activation's Alpha.

    Values are read exactly and rounded once to float32, which is what DirectML receives.
    """

    default_value: float = 0.0

    @property
    def default(self) -> np.float32:
        return np.float32(self.default_value)

    def metavar(self, option: str) -> str:
        return "FLOAT"

    def parse(self, given, data_types) -> np.float32:
        from ..io.json_tensor import parse_scalar

        value = _given(given, self.options[0])
        if value is None:
            return self.default
        return parse_scalar(value, FLOAT32, where=f"{self.field} ({option_flag(self.options[0])})")

    def describe(self, value) -> str:
        return np.format_float_positional(np.float32(value), trim="-") if np.isfinite(value) else str(value)

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return (CudaArgument("float", self.field, np.float32(value)),)


@dataclass(frozen=True)
class IntegerParameter(Parameter):
    """A UINT / INT field, checked against its range."""

    default_value: int = 0
    minimum: int = 0
    maximum: int = 2**32 - 1

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
        if isinstance(value, bool) or not text.lstrip("+-").isdigit() or len(text) > 30:
            raise InputError(f"{self.field} ({option_flag(self.options[0])}) = {text[:40]!r} is not a whole number")
        number = int(text)
        if not self.minimum <= number <= self.maximum:
            raise InputError(f"{self.field} ({option_flag(self.options[0])}) = {number} is out of range "
                             f"({self.minimum} to {self.maximum})")
        return number

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        return (CudaArgument("long long", self.field, np.int64(value)),)

    def check_declaration(self, tensors) -> None:
        if not self.minimum <= self.default_value <= self.maximum:
            raise ValueError(f"{self.field}: default {self.default_value} is outside {self.minimum}..{self.maximum}")


@dataclass(frozen=True)
class TypedScalarParameter(Parameter):
    """A DML_SCALAR_UNION field (CLIP1's Min and Max): a value of a tensor's own data type, read exactly.

    An INT64 or UINT64 bound is never routed through a double. `default_limit` is "lowest" or "max":
    the type's own limit, as an omitted bound means in DirectML's CLIP1 usage.
    """

    tensor: str = "OutputTensor"  # whose data type the value has (MinMaxDataType must match it)
    default_limit: str = "lowest"

    @property
    def default(self):
        return None  # depends on the tensor's type: see value_or_limit

    def metavar(self, option: str) -> str:
        return "VALUE"

    def _limit(self, data_type: DataType):
        dtype = data_type.numpy_dtype
        info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
        return dtype.type(info.min if self.default_limit == "lowest" else info.max)

    def parse(self, given, data_types):
        from ..io.json_tensor import parse_scalar

        data_type = data_types[self.tensor]
        value = _given(given, self.options[0])
        if value is None:
            return self._limit(data_type)
        return parse_scalar(value, data_type, where=f"{self.field} ({option_flag(self.options[0])}, {data_type.name})")

    def describe_default(self) -> str:
        return f"the {'lowest' if self.default_limit == 'lowest' else 'largest'} value of {self.tensor}'s data type"

    def cuda_arguments(self, value, data_types) -> tuple[CudaArgument, ...]:
        dtype = data_types[self.tensor].numpy_dtype
        return (CudaArgument(CUDA_VALUE_TYPES[dtype.name], self.field, np.asarray(value, dtype).astype(
            np.float32 if dtype == np.float16 else dtype)[()]),)

    def check_declaration(self, tensors) -> None:
        if self.tensor not in tensors:
            raise ValueError(f"{self.field}: takes its data type from {self.tensor}, which the operator does not have")
        if self.default_limit not in ("lowest", "max"):
            raise ValueError(f"{self.field}: default_limit must be 'lowest' or 'max'")


@dataclass(frozen=True)
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
        from ..io.json_tensor import parse_scalar

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


def all_options(parameters: tuple[Parameter, ...]) -> dict[str, Parameter]:
    """Each API keyword of `parameters`, mapped to the parameter that takes it."""
    return {option: parameter for parameter in parameters for option in parameter.options}
