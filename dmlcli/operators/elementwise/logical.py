"""LOGICAL_AND, LOGICAL_OR, LOGICAL_XOR, LOGICAL_NOT: entries and kernels (1 for true, 0 for false)."""

from __future__ import annotations

import numpy as np

from ...data_types import UINT32, UINT32_OR_UINT8
from ...feature_levels import level
from ..table.schema import DIMS_1_TO_8, DIMS_4, Operator, rows

AB = ("ATensor", "BTensor")
ABO = ("ATensor", "BTensor", "OutputTensor")
XO = ("InputTensor", "OutputTensor")


def _sections(*tensors):
    return (("3_0", DIMS_1_TO_8, {name: UINT32_OR_UINT8 for name in tensors}),
            ("2_0", DIMS_4, {name: UINT32_OR_UINT8 for name in tensors}),
            ("1_0", DIMS_4, {name: (UINT32,) for name in tensors}))


_LOGICAL_BINARY = rows(*_sections(*ABO))
_LOGICAL_UNARY = rows(*_sections(*XO))


def logical_and(inputs, out_dtype, params):
    a, b = inputs
    return np.logical_and(a != 0, b != 0).astype(out_dtype, copy=False)


def logical_or(inputs, out_dtype, params):
    a, b = inputs
    return np.logical_or(a != 0, b != 0).astype(out_dtype, copy=False)


def logical_xor(inputs, out_dtype, params):
    a, b = inputs
    return np.not_equal(a != 0, b != 0).astype(out_dtype, copy=False)


def logical_not(inputs, out_dtype, params):
    (x,) = inputs
    return (x == 0).astype(out_dtype, copy=False)


def _logical_binary(name: str, enum_value: int, formula: str, word: str, kernel, cuda_body: str) -> Operator:
    return Operator(
        name=name, enum_value=enum_value, family="logical",
        summary=f"Logical {word} of each pair of corresponding elements; 1 for true, 0 for false, in the inputs' data type.",
        formula=formula, introduced=level("1_0"), inputs=AB, support=_LOGICAL_BINARY,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=kernel, cuda_body=cuda_body, in_place=True,
    )


OPERATORS: tuple[Operator, ...] = (
    _logical_binary("LOGICAL_AND", 14, "f(a, b) = (a && b)", "AND", logical_and, "(a != 0) && (b != 0)"),
    _logical_binary("LOGICAL_OR", 19, "f(a, b) = (a || b)", "OR", logical_or, "(a != 0) || (b != 0)"),
    _logical_binary("LOGICAL_XOR", 20, "f(a, b) = (!!a) != (!!b)", "XOR (exclusive or)", logical_xor,
                    "(a != 0) != (b != 0)"),
    Operator(
        name="LOGICAL_NOT", enum_value=18, family="logical",
        summary="Logical NOT of each element; 1 for true, 0 for false, in the input's data type.",
        formula="f(x) = !x", introduced=level("1_0"), inputs=("InputTensor",), support=_LOGICAL_UNARY,
        same_data_type=XO, same_sizes=XO, cpu_kernel=logical_not, cuda_body="x == 0", in_place=True,
    ),
)
