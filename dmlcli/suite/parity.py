"""--backend all: one backend's result compared with another's, as the GPU parity tests compare them.

Bit for bit where the operator is exact or one rounding, or the output is an integer; within the
operator's tolerance for composite and approximate operators, with its sum bound where it sums terms (the
backends add in different orders: each is within the bound of the exact sum). Where an operator computes on values
(not on bit patterns), a NaN matches any NaN: IEEE-754 and Direct3D's rules fix no NaN payload, and
the GPU gives the canonical NaN. Bit for bit here is every bit (`EVERY_BIT`): both backends apply the
same float rules, so a flushed subnormal or a zero's sign that --check would let pass is a backend's bug.
"""

from __future__ import annotations

import numpy as np

from ..checking.comparison import EVERY_BIT, Rule, compare, rule_for, with_bound
from ..operators.table.schema import APPROXIMATE, COMPOSITE

# POW of an integer base by a float exponent is pow in double precision, truncated: where the power lies within
# a last-place error of an integer the CPU's and the GPU's pow may fall on either side (POW's notes say so).
_POW_INTEGER_BY_FLOAT = Rule("atol", 1.0, "POW of an integer base by a float exponent")


def backends_agree(operator, got: np.ndarray, reference: np.ndarray, parameters, inputs=(), call=None,
                   bound=None) -> tuple[str, bool]:
    """(report in --check's format, same) for `got` against `reference`, another backend's result. With the
    `call`, a shaped operator's tolerance is the call's (a reduction's grows with the elements reduced);
    `bound()`, where given, is the output's sum bound (asked for only where the results differ)."""
    rule = EVERY_BIT
    if operator.exactness in (APPROXIMATE, COMPOSITE):
        rule = rule_for(operator, reference.dtype, parameters=parameters, call=call)
        if bound is not None and not (got.dtype == reference.dtype and got.shape == reference.shape
                                      and np.array_equal(got, reference, equal_nan=reference.dtype.kind == "f")):
            rule = with_bound(rule, bound())
    if (operator.name == "POW" and reference.dtype.kind in "iu" and len(inputs) == 2
            and np.asarray(inputs[1]).dtype.kind == "f"):
        rule = _POW_INTEGER_BY_FLOAT
    if (rule.kind == "exact" and not operator.native_encoding and reference.dtype.kind == "f"
            and got.dtype == reference.dtype and got.shape == reference.shape):
        both_nan = np.isnan(got) & np.isnan(reference)
        got = np.where(both_nan, reference, got)
    return compare(got, reference, rule)
