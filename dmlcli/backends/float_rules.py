"""Direct3D's floating-point rules, applied around any backend (`--float-rules d3d`).

DirectML's GPU kernels run under Direct3D's rules (../shared/reference/directml_elementwise.md,
section C row 4), which allow results that IEEE-754 does not: FLOAT32 subnormals are flushed to a
zero of the same sign on the input and the output of float math, and NaN bit patterns are not
preserved. dmlcli gives the IEEE-754 result by default; with the d3d rules it gives the result
those rules produce, so that a user comparing with a Windows GPU can tell which differences the
rules allow. (MIN, MAX, CLIP and THRESHOLD return the non-NaN operand under both rules: that is
the operators' own definition, in their kernels.)

The rules apply to operators that compute on values (not to BIT_* operators, which work on bit
patterns): FLOAT32 inputs are flushed before the kernel, FLOAT32 outputs are flushed and every
float NaN output becomes the canonical quiet NaN after it. The same wrapper serves the CPU and
GPU backends, whole tensors and streamed chunks, so both give the same bits.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

FLOAT_RULES = ("ieee", "d3d")
_CANONICAL_NAN = {np.dtype(np.float32): np.uint32(0x7FC00000), np.dtype(np.float16): np.uint16(0x7E00)}


def parse_float_rules(text) -> str:
    key = "ieee" if text is None else str(text).strip().lower()
    if key not in FLOAT_RULES:
        from ..errors import InputError

        raise InputError(f"unknown float rules {text!r} (expected ieee or d3d)")
    return key


def flush_subnormals(array: np.ndarray) -> np.ndarray:
    """FLOAT32 subnormals replaced by a zero of the same sign (a copy where anything changes)."""
    array = np.asarray(array)
    if array.dtype != np.float32:
        return array
    bits = array.view(np.uint32)
    subnormal = ((bits & np.uint32(0x7F800000)) == 0) & ((bits & np.uint32(0x007FFFFF)) != 0)
    if not subnormal.any():
        return array
    return np.where(subnormal, bits & np.uint32(0x80000000), bits).view(np.float32)


def canonical_nans(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    canonical = _CANONICAL_NAN.get(array.dtype)
    if canonical is None:
        return array
    nan = np.isnan(array)
    if not nan.any():
        return array
    out = array.copy()
    out.view(canonical.dtype)[nan] = canonical
    return out


class D3DFloatRules:
    """A backend that gives `inner`'s results under Direct3D's float rules."""

    def __init__(self, inner):
        self.inner = inner
        self.name = getattr(inner, "name", "custom")
        self.preferred_chunk_bytes = getattr(inner, "preferred_chunk_bytes", 1 << 20)

    @staticmethod
    def _applies(operator) -> bool:
        return not operator.native_encoding

    def execute(self, operator, inputs, out_shape, out_dtype, parameters):
        if not self._applies(operator):
            return self.inner.execute(operator, inputs, out_shape, out_dtype, parameters)
        output = self.inner.execute(operator, [flush_subnormals(x) for x in inputs], out_shape, out_dtype, parameters)
        return canonical_nans(flush_subnormals(output))

    def execute_chunks(self, operator, chunks: Iterable[list[np.ndarray]], out_dtype, parameters) -> Iterator[np.ndarray]:
        if not self._applies(operator):
            yield from self.inner.execute_chunks(operator, chunks, out_dtype, parameters)
            return
        flushed = ([flush_subnormals(x) for x in chunk] for chunk in chunks)
        for output in self.inner.execute_chunks(operator, flushed, out_dtype, parameters):
            yield canonical_nans(flush_subnormals(output))

    def execute_shaped(self, operator, inputs, outputs, parameters):
        if not self._applies(operator):
            return self.inner.execute_shaped(operator, inputs, outputs, parameters)
        flushed = [None if x is None else flush_subnormals(x) for x in inputs]
        results = self.inner.execute_shaped(operator, flushed, outputs, parameters)
        return tuple(canonical_nans(flush_subnormals(result)) for result in results)

    def describe(self) -> dict:
        return dict(self.inner.describe(), float_rules="d3d")


def with_float_rules(backend, rules: str):
    return D3DFloatRules(backend) if rules == "d3d" else backend
