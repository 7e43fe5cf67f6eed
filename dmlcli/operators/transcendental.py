"""the trigonometric, hyperbolic, exponential and power functions, ERF: entries and kernels (being filled in)."""

from __future__ import annotations

from .schema import Operator

OPERATORS: tuple[Operator, ...] = ()
