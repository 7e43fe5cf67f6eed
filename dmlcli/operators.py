"""The operator table: one declarative entry per DirectML operator.

Each entry carries what DirectML's documentation says of the operator (fields, formula,
feature level introduced, tensor constraints, the support table of every feature level) and
the kernel that computes it. The validator and the backends read these entries; nothing
about a specific operator lives anywhere else. Sources: ../shared/reference/directml_ops.md
and the pages in ../shared/seeds (the newer English page wins where two disagree).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from . import cpu_kernels
from .data_types import ALL11, CMP8, CMP10, FLOAT16, FLOAT32, UINT8, UINT16, UINT32, UINT64, DataType
from .errors import InputError
from .feature_levels import FeatureLevel, level

DIMS_1_TO_8 = tuple(range(1, 9))
DIMS_4 = (4,)


@dataclass(frozen=True)
class TensorSupport:
    """What one tensor of an operator accepts in one row of a support table."""

    dims: tuple[int, ...]
    data_types: tuple[DataType, ...]

    def describe_dims(self) -> str:
        if len(self.dims) > 1 and self.dims == tuple(range(self.dims[0], self.dims[-1] + 1)):
            return f"{self.dims[0]} to {self.dims[-1]}"
        return ", ".join(str(d) for d in self.dims)

    def describe_data_types(self) -> str:
        return ", ".join(t.name for t in self.data_types)


@dataclass(frozen=True)
class SupportRow:
    """One 'DML_FEATURE_LEVEL_x_y and above' section of a page's tensor-support table."""

    level: FeatureLevel
    tensors: Mapping[str, TensorSupport]


@dataclass(frozen=True)
class Parameter:
    """An enum field of an operator's DESC struct, such as IS_INFINITY's InfinityMode."""

    name: str  # the DESC field, e.g. "InfinityMode"
    option: str  # the CLI / API spelling, e.g. "infinity_mode"
    enum_prefix: str  # e.g. "DML_IS_INFINITY_MODE_"
    values: tuple[tuple[str, int], ...]  # (short name, enum value) in enum order
    default: str
    help: str

    def parse(self, text) -> str:
        """Accept `positive`, `POSITIVE`, `DML_IS_INFINITY_MODE_POSITIVE` or the enum value `1`."""
        key = str(text).strip().upper()
        if key.startswith(self.enum_prefix):
            key = key[len(self.enum_prefix):]
        for short, value in self.values:
            if key == short or key == str(value):
                return short
        allowed = ", ".join(short.lower() for short, _ in self.values)
        raise InputError(f"unknown {self.name} {text!r} (expected one of {allowed})")


@dataclass(frozen=True)
class Operator:
    name: str  # DirectML's name without prefix, e.g. "BIT_XOR"
    enum_value: int  # DML_OPERATOR_TYPE value
    summary: str
    formula: str
    introduced: FeatureLevel
    inputs: tuple[str, ...]  # DESC field names of the input tensors, in order
    support: tuple[SupportRow, ...]
    same_data_type: tuple[str, ...]  # tensors whose DataType must be equal
    same_sizes: tuple[str, ...]  # tensors whose DimensionCount and Sizes must be equal
    cpu_kernel: Callable
    # CUDA C++ expression of one element for the GPU backend (dmlcli/gpu_kernels.py): inputs a and b,
    # or x; W, the input width in bits; parameters by DESC name as their enum value. Native-encoding
    # operators see the unsigned bit pattern, the others the value (FLOAT16 widened to float).
    cuda_body: str
    output: str = "OutputTensor"
    parameters: tuple[Parameter, ...] = ()
    default_output_type: DataType | None = None  # when the output type is a free choice
    native_encoding: bool = False  # bitwise work on the bit pattern, whatever the data type
    in_place: bool = False
    shift_count_input: str | None = None  # the input holding shift counts, checked against the width
    notes: tuple[str, ...] = ()

    @property
    def dml_name(self) -> str:
        return f"DML_OPERATOR_ELEMENT_WISE_{self.name}"

    @property
    def tensors(self) -> tuple[str, ...]:
        return self.inputs + (self.output,)

    @property
    def output_type_is_choice(self) -> bool:
        return self.output not in self.same_data_type

    def row_at(self, feature_level: FeatureLevel) -> SupportRow | None:
        """The newest support row at or below `feature_level`; None where the operator is absent."""
        rows = [row for row in self.support if row.level <= feature_level]
        return max(rows, key=lambda row: row.level) if rows else None


def _rows(*sections: tuple[str, tuple[int, ...], tuple, tuple]) -> Callable[[tuple[str, ...], str], tuple[SupportRow, ...]]:
    """Build support rows from (level, dims, input types, output types) sections."""

    def build(inputs: tuple[str, ...], output: str = "OutputTensor") -> tuple[SupportRow, ...]:
        rows = []
        for short, dims, input_types, output_types in sections:
            tensors = {name: TensorSupport(dims, input_types) for name in inputs}
            tensors[output] = TensorSupport(dims, output_types)
            rows.append(SupportRow(level(short), tensors))
        return tuple(rows)

    return build


AB = ("ATensor", "BTensor")
ABO = ("ATensor", "BTensor", "OutputTensor")
X = ("InputTensor",)
XO = ("InputTensor", "OutputTensor")
U32_16_8 = (UINT32, UINT16, UINT8)
U32_8 = (UINT32, UINT8)

_BITWISE_BINARY = _rows(("4_1", DIMS_1_TO_8, ALL11, ALL11), ("3_0", DIMS_1_TO_8, U32_16_8, U32_16_8))(AB)
_BITWISE_UNARY = _rows(("4_1", DIMS_1_TO_8, ALL11, ALL11), ("3_0", DIMS_1_TO_8, U32_16_8, U32_16_8))(X)
_BIT_COUNT = _rows(("4_1", DIMS_1_TO_8, ALL11, U32_8), ("3_0", DIMS_1_TO_8, U32_16_8, U32_8))(X)
_SHIFTS = _rows(
    ("4_1", DIMS_1_TO_8, (UINT64,) + U32_16_8, (UINT64,) + U32_16_8),
    ("3_0", DIMS_1_TO_8, U32_16_8, U32_16_8),
    ("2_1", DIMS_4, U32_16_8, U32_16_8),
)(AB)
_LOGICAL_SECTIONS = (
    ("3_0", DIMS_1_TO_8, U32_8, U32_8),
    ("2_0", DIMS_4, U32_8, U32_8),
    ("1_0", DIMS_4, (UINT32,), (UINT32,)),
)
_LOGICAL_BINARY = _rows(*_LOGICAL_SECTIONS)(AB)
_LOGICAL_UNARY = _rows(*_LOGICAL_SECTIONS)(X)
_IS_INFINITY = _rows(
    ("3_0", DIMS_1_TO_8, (FLOAT32, FLOAT16), (UINT8,)),
    ("2_1", DIMS_4, (FLOAT32, FLOAT16), (UINT8,)),
)(X)
_IS_NAN = _rows(
    ("3_0", DIMS_1_TO_8, (FLOAT32, FLOAT16), U32_8),
    ("2_0", DIMS_4, (FLOAT32, FLOAT16), U32_8),
)(X)
_COMPARISON = _rows(
    ("4_1", DIMS_1_TO_8, CMP10, U32_8),
    ("3_0", DIMS_1_TO_8, CMP8, U32_8),
    ("2_1", DIMS_4, CMP8, U32_8),
    ("2_0", DIMS_4, (FLOAT32, FLOAT16), U32_8),
    ("1_0", DIMS_4, (FLOAT32, FLOAT16), (UINT32,)),
)(AB)
_COMPARISON_3_0 = _rows(("4_1", DIMS_1_TO_8, CMP10, U32_8), ("3_0", DIMS_1_TO_8, CMP8, U32_8))(AB)

INFINITY_MODE = Parameter(
    name="InfinityMode",
    option="infinity_mode",
    enum_prefix="DML_IS_INFINITY_MODE_",
    values=(("EITHER", 0), ("POSITIVE", 1), ("NEGATIVE", 2)),
    default="EITHER",
    help="which infinities count: either (inf or -inf), positive (inf) or negative (-inf)",
)

_NATIVE = "The operation is applied to the data in its native encoding: floats as their bit patterns, signed integers as two's complement."
_SHIFT_NOTE = (
    "DirectML's pages do not say what a shift count at or past the element width gives. dmlcli gives 0, "
    "as NumPy, PyTorch and CuPy do, and warns on stderr with the number of such counts: DirectML "
    "hardware is reported to mask them (count mod width), so such a result may differ on Windows."
)
_IEEE = "IEEE-754 comparison: NaN compares false (and unequal to itself); -0.0 equals 0.0. Integers compare exactly, 64-bit included."


def _bitwise_binary(name: str, enum_value: int, symbol: str, word: str, kernel: Callable) -> Operator:
    return Operator(
        name=name, enum_value=enum_value,
        summary=f"Bitwise {word} of each pair of corresponding elements of ATensor and BTensor.",
        formula=f"f(a, b) = a {symbol} b   (on the bit patterns)",
        introduced=level("3_0"), inputs=AB, support=_BITWISE_BINARY,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=kernel, cuda_body=f"a {symbol} b",
        native_encoding=True, in_place=True, notes=(_NATIVE,),
    )


def _logical_binary(name: str, enum_value: int, formula: str, word: str, kernel: Callable, cuda_body: str) -> Operator:
    return Operator(
        name=name, enum_value=enum_value,
        summary=f"Logical {word} of each pair of corresponding elements; 1 for true, 0 for false, in the inputs' data type.",
        formula=formula, introduced=level("1_0"), inputs=AB, support=_LOGICAL_BINARY,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=kernel, cuda_body=cuda_body, in_place=True,
    )


def _comparison(name: str, enum_value: int, symbol: str, introduced: str, support, kernel: Callable) -> Operator:
    return Operator(
        name=name, enum_value=enum_value,
        summary=f"1 where a {symbol} b, else 0, written as UINT8 or UINT32 (the output data type is a choice).",
        formula=f"f(a, b) = (a {symbol} b)", introduced=level(introduced), inputs=AB, support=support,
        same_data_type=AB, same_sizes=ABO, cpu_kernel=kernel, cuda_body=f"a {symbol} b",
        default_output_type=UINT8, notes=(_IEEE,),
    )


def _shift(name: str, enum_value: int, symbol: str, word: str, kernel: Callable) -> Operator:
    return Operator(
        name=name, enum_value=enum_value,
        summary=f"Logical {word} shift of each element of ATensor by the count in the matching element of BTensor.",
        formula=f"f(a, b) = (a {symbol} b)   (0 when b >= the element width)",
        introduced=level("2_1"), inputs=AB, support=_SHIFTS, same_data_type=ABO, same_sizes=ABO,
        cpu_kernel=kernel, cuda_body=f"b < W ? (a {symbol} b) : 0", native_encoding=True, in_place=True,
        shift_count_input="BTensor",
        notes=(_SHIFT_NOTE,),
    )


OPERATORS: tuple[Operator, ...] = (
    _bitwise_binary("BIT_AND", 121, "&", "AND", cpu_kernels.bit_and),
    _bitwise_binary("BIT_OR", 122, "|", "OR", cpu_kernels.bit_or),
    _bitwise_binary("BIT_XOR", 123, "^", "XOR (exclusive or)", cpu_kernels.bit_xor),
    Operator(
        name="BIT_NOT", enum_value=124,
        summary="Bitwise NOT (one's complement) of each element.",
        formula="f(x) = ~x   (on the bit pattern)", introduced=level("3_0"), inputs=X,
        support=_BITWISE_UNARY, same_data_type=XO, same_sizes=XO, cpu_kernel=cpu_kernels.bit_not,
        cuda_body="~x",
        native_encoding=True, in_place=True, notes=(_NATIVE,),
    ),
    Operator(
        name="BIT_COUNT", enum_value=125,
        summary="Population count: the number of bits set to 1 in each element's bit pattern.",
        formula="f(x) = popcount(x)   (two's complement for signed types: INT8 -1 gives 8)",
        introduced=level("3_0"), inputs=X, support=_BIT_COUNT, same_data_type=(), same_sizes=XO,
        cpu_kernel=cpu_kernels.bit_count, cuda_body="W == 64 ? __popcll(x) : __popc(x)",
        default_output_type=UINT8, native_encoding=True,
        notes=(_NATIVE,),
    ),
    _shift("BIT_SHIFT_LEFT", 97, "<<", "left", cpu_kernels.bit_shift_left),
    _shift("BIT_SHIFT_RIGHT", 98, ">>", "right", cpu_kernels.bit_shift_right),
    _logical_binary("LOGICAL_AND", 14, "f(a, b) = (a && b)", "AND", cpu_kernels.logical_and,
                   "(a != 0) && (b != 0)"),
    _logical_binary("LOGICAL_OR", 19, "f(a, b) = (a || b)", "OR", cpu_kernels.logical_or,
                   "(a != 0) || (b != 0)"),
    _logical_binary("LOGICAL_XOR", 20, "f(a, b) = (!!a) != (!!b)", "XOR (exclusive or)", cpu_kernels.logical_xor,
                   "(a != 0) != (b != 0)"),
    Operator(
        name="LOGICAL_NOT", enum_value=18,
        summary="Logical NOT of each element; 1 for true, 0 for false, in the input's data type.",
        formula="f(x) = !x", introduced=level("1_0"), inputs=X, support=_LOGICAL_UNARY,
        same_data_type=XO, same_sizes=XO, cpu_kernel=cpu_kernels.logical_not, cuda_body="x == 0",
        in_place=True,
    ),
    Operator(
        name="IS_INFINITY", enum_value=100,
        summary="1 where the element is an IEEE-754 infinity of the sign InfinityMode asks for, else 0 (NaN gives 0).",
        formula=(
            "f(x) = isinf(x) && ((x > 0 && InfinityMode == POSITIVE) || "
            "(x < 0 && InfinityMode == NEGATIVE) || InfinityMode == EITHER)"
        ),
        introduced=level("2_1"), inputs=X, support=_IS_INFINITY, same_data_type=(), same_sizes=XO,
        cpu_kernel=cpu_kernels.is_infinity, parameters=(INFINITY_MODE,), default_output_type=UINT8,
        cuda_body="isinf(x) && (InfinityMode == 0 || (InfinityMode == 1 && x > 0) || (InfinityMode == 2 && x < 0))",
    ),
    Operator(
        name="IS_NAN", enum_value=80,
        summary="1 where the element is an IEEE-754 NaN (any payload, either sign), else 0.",
        formula="f(x) = isnan(x)", introduced=level("2_0"), inputs=X, support=_IS_NAN,
        same_data_type=(), same_sizes=XO, cpu_kernel=cpu_kernels.is_nan, cuda_body="x != x",
        default_output_type=UINT8,
    ),
    _comparison("LOGICAL_EQUALS", 15, "==", "1_0", _COMPARISON, cpu_kernels.logical_equals),
    _comparison("LOGICAL_GREATER_THAN", 16, ">", "1_0", _COMPARISON, cpu_kernels.logical_greater_than),
    _comparison("LOGICAL_LESS_THAN", 17, "<", "1_0", _COMPARISON, cpu_kernels.logical_less_than),
    # DirectML's LESS_THAN_OR_EQUAL page also claims 1_0; DirectML.h and the feature-level
    # history put both *_OR_EQUAL operators in 3_0, which is what dmlcli follows.
    _comparison("LOGICAL_GREATER_THAN_OR_EQUAL", 126, ">=", "3_0", _COMPARISON_3_0, cpu_kernels.logical_greater_than_or_equal),
    _comparison("LOGICAL_LESS_THAN_OR_EQUAL", 127, "<=", "3_0", _COMPARISON_3_0, cpu_kernels.logical_less_than_or_equal),
)

_BY_NAME = {op.name: op for op in OPERATORS}
_PREFIXES = ("DML_OPERATOR_ELEMENT_WISE_", "DML_OPERATOR_", "ELEMENT_WISE_")


def _normalise(text: str) -> str:
    key = re.sub(r"[\s\-.]+", "_", str(text).strip()).upper()
    for prefix in _PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def find_operator(text: str | Operator) -> Operator:
    """Look an operator up by any spelling: bit_xor, BIT_XOR, bit-xor, ELEMENT_WISE_BIT_XOR, DML_OPERATOR_ELEMENT_WISE_BIT_XOR."""
    if isinstance(text, Operator):
        return text
    key = _normalise(text)
    if key in _BY_NAME:
        return _BY_NAME[key]
    close = difflib.get_close_matches(key, list(_BY_NAME), n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(n.lower() for n in close)}?)" if close else " (run 'dmlcli ops' for the list)"
    raise InputError(f"unknown operator {text!r}{hint}")
