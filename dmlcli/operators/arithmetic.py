"""ADD, SUBTRACT, MULTIPLY, DIVIDE, MEAN, DIFFERENCE_SQUARE, the MODULUS pair, RECIP, SQRT, NEGATE, ABS, SIGN, IDENTITY: entries and kernels (being filled in)."""

from __future__ import annotations

from .schema import Operator

OPERATORS: tuple[Operator, ...] = ()
