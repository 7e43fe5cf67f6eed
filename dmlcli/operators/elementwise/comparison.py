"""The comparisons (EQUALS, GREATER_THAN, LESS_THAN and the *_OR_EQUAL pair), IS_INFINITY and IS_NAN.

Each writes 1 where the condition holds and 0 elsewhere, in an output type that is a choice.
"""

from __future__ import annotations

import numpy as np

from ...data_types import CMP8, CMP10, FLOATS, UINT8, UINT32, UINT32_OR_UINT8
from ...feature_levels import level
from ..table.parameters import EnumParameter
from ..table.schema import DIMS_1_TO_8, DIMS_4, Operator, rows

AB = ("ATensor", "BTensor")
ABO = ("ATensor", "BTensor", "OutputTensor")
XO = ("InputTensor", "OutputTensor")


def _ab(types, output_types):
    return {"ATensor": types, "BTensor": types, "OutputTensor": output_types}


def _x(types, output_types):
    return {"InputTensor": types, "OutputTensor": output_types}


_COMPARISON = rows(
    ("4_1", DIMS_1_TO_8, _ab(CMP10, UINT32_OR_UINT8)),
    ("3_0", DIMS_1_TO_8, _ab(CMP8, UINT32_OR_UINT8)),
    ("2_1", DIMS_4, _ab(CMP8, UINT32_OR_UINT8)),
    ("2_0", DIMS_4, _ab(FLOATS, UINT32_OR_UINT8)),
    ("1_0", DIMS_4, _ab(FLOATS, (UINT32,))),
)
_COMPARISON_3_0 = rows(("4_1", DIMS_1_TO_8, _ab(CMP10, UINT32_OR_UINT8)), ("3_0", DIMS_1_TO_8, _ab(CMP8, UINT32_OR_UINT8)))
_IS_INFINITY = rows(("3_0", DIMS_1_TO_8, _x(FLOATS, (UINT8,))), ("2_1", DIMS_4, _x(FLOATS, (UINT8,))))
_IS_NAN = rows(("3_0", DIMS_1_TO_8, _x(FLOATS, UINT32_OR_UINT8)), ("2_0", DIMS_4, _x(FLOATS, UINT32_OR_UINT8)))

INFINITY_MODE = EnumParameter(
    field="InfinityMode",
    help="which infinities count: either (inf or -inf), positive (inf) or negative (-inf)",
    enum_prefix="DML_IS_INFINITY_MODE_",
    values=(("EITHER", 0), ("POSITIVE", 1), ("NEGATIVE", 2)),
    default_value="EITHER",
)

_IEEE = "IEEE-754 comparison: NaN compares false (and unequal to itself); -0.0 equals 0.0. Integers compare exactly, 64-bit included."


def is_infinity(inputs, out_dtype, params):
    (x,) = inputs
    mode = params["InfinityMode"]
    infinite = np.isinf(x)
    if mode == "POSITIVE":
        infinite &= x > 0
    elif mode == "NEGATIVE":
        infinite &= x < 0
    return infinite.astype(out_dtype, copy=False)


def is_nan(inputs, out_dtype, params):
    (x,) = inputs
    return np.isnan(x).astype(out_dtype, copy=False)


# NumPy compares two arrays of one dtype exactly (int64/uint64 never go through float64) and by
# IEEE-754 for floats, which is what DirectML specifies.
def _comparison_kernel(ufunc):
    def kernel(inputs, out_dtype, params):
        a, b = inputs
        return ufunc(a, b).astype(out_dtype, copy=False)

    kernel.__name__ = ufunc.__name__
    return kernel


def _comparison(name: str, enum_value: int, symbol: str, introduced: str, support, ufunc) -> Operator:
    return Operator(
        name=name, enum_value=enum_value, family="comparison",
        summary=f"1 where a {symbol} b, else 0, written as UINT8 or UINT32 (the output data type is a choice).",
        formula=f"f(a, b) = (a {symbol} b)", introduced=level(introduced), inputs=AB, support=support,
        same_data_type=AB, same_sizes=ABO, cpu_kernel=_comparison_kernel(ufunc), cuda_body=f"a {symbol} b",
        default_output_type=UINT8, notes=(_IEEE,),
    )


OPERATORS: tuple[Operator, ...] = (
    Operator(
        name="IS_INFINITY", enum_value=100, family="comparison",
        summary="1 where the element is an IEEE-754 infinity of the sign InfinityMode asks for, else 0 (NaN gives 0).",
        formula=(
            "f(x) = isinf(x) && ((x > 0 && InfinityMode == POSITIVE) || "
            "(x < 0 && InfinityMode == NEGATIVE) || InfinityMode == EITHER)"
        ),
        introduced=level("2_1"), inputs=("InputTensor",), support=_IS_INFINITY, same_data_type=(), same_sizes=XO,
        cpu_kernel=is_infinity, parameters=(INFINITY_MODE,), default_output_type=UINT8,
        cuda_body="isinf(x) && (InfinityMode == 0 || (InfinityMode == 1 && x > 0) || (InfinityMode == 2 && x < 0))",
    ),
    Operator(
        name="IS_NAN", enum_value=80, family="comparison",
        summary="1 where the element is an IEEE-754 NaN (any payload, either sign), else 0.",
        formula="f(x) = isnan(x)", introduced=level("2_0"), inputs=("InputTensor",), support=_IS_NAN,
        same_data_type=(), same_sizes=XO, cpu_kernel=is_nan, cuda_body="x != x", default_output_type=UINT8,
    ),
    _comparison("LOGICAL_EQUALS", 15, "==", "1_0", _COMPARISON, np.equal),
    _comparison("LOGICAL_GREATER_THAN", 16, ">", "1_0", _COMPARISON, np.greater),
    _comparison("LOGICAL_LESS_THAN", 17, "<", "1_0", _COMPARISON, np.less),
    # DirectML's LESS_THAN_OR_EQUAL page also claims 1_0; DirectML.h and the feature-level
    # history put both *_OR_EQUAL operators in 3_0, which is what dmlcli follows.
    _comparison("LOGICAL_GREATER_THAN_OR_EQUAL", 126, ">=", "3_0", _COMPARISON_3_0, np.greater_equal),
    _comparison("LOGICAL_LESS_THAN_OR_EQUAL", 127, "<=", "3_0", _COMPARISON_3_0, np.less_equal),
)
