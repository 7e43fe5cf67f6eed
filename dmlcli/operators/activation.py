"""the element-wise DML_OPERATOR_ACTIVATION_* operators, and ADD1 with its fused activation: entries and kernels (being filled in)."""

from __future__ import annotations

from .schema import Operator

OPERATORS: tuple[Operator, ...] = ()
