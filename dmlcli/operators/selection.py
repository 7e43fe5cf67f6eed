"""MAX, MIN, CLIP, CLIP1, THRESHOLD, CLIP_GRAD, CLIP_GRAD1, IF, CEIL, FLOOR, ROUND: entries and kernels (being filled in)."""

from __future__ import annotations

from .schema import Operator

OPERATORS: tuple[Operator, ...] = ()
