"""QUANTIZE_LINEAR, DEQUANTIZE_LINEAR, QUANTIZED_LINEAR_ADD: entries and kernels (being filled in)."""

from __future__ import annotations

from .schema import Operator

OPERATORS: tuple[Operator, ...] = ()
