"""What the gradients of the pooling, resampling, slicing and ROI align operators share.

- The forward operator's shape rule run on a gradient's tensors: a gradient's OutputGradientTensor has the
  Sizes of the forward operator's InputTensor and its InputGradientTensor those of the forward's OutputTensor,
  so the forward's rule checks how they relate; its messages are worded with the gradient's tensor names.
- The adjoint of a one-dimensional linear map along an axis (the transpose of what RESAMPLE and ROI_ALIGN
  do along each resampled dimension), summed in a stated order that NumPy and CuPy follow alike: the taps that
  land on one element are added one after another, in the order they are given, each product rounded to
  FLOAT32 first. No scatter with atomics: each pass adds to distinct elements, so both backends give the same
  bits.
- The tolerance of a gradient that sums several FLOAT32 terms.
"""

from __future__ import annotations

import re

import numpy as np

from ...errors import InputError
from ...records import Frozen
from ..table.schema import SumBound, Tolerance
from ..table.shaped import RuleViolation, ShapeQuery

FAMILY = "training"

# A gradient's tensors under the names its forward operator's rule uses.
FORWARD_NAMES = {"InputTensor": "OutputGradientTensor", "OutputTensor": "InputGradientTensor"}


def forward_rule(rule, query: ShapeQuery, forward_input: tuple[int, ...], forward_output: tuple[int, ...] | None,
                 names: dict[str, str] = FORWARD_NAMES) -> dict:
    """The forward operator's shape `rule` for an input of `forward_input` Sizes (the gradient's
    OutputGradientTensor), with `forward_output` (the gradient's InputGradientTensor) as the output Sizes its
    desc states; a RuleViolation's message names the gradient's tensors (`names`: the forward's name -> the
    gradient's) instead of the forward's."""
    # The gradient's other tensors (ROI_ALIGN_GRAD's ROITensor) keep their names; its gradients take the forward's.
    shapes = {name: shape for name, shape in query.shapes.items() if name not in names.values()}
    types = {name: kind for name, kind in query.data_types.items() if name not in names.values()}
    types.update({forward: query.data_types[grad] for forward, grad in names.items() if grad in query.data_types})
    stated = {} if forward_output is None else {"OutputTensor": tuple(forward_output)}
    forward = ShapeQuery({**shapes, "InputTensor": tuple(forward_input)}, types, query.parameters, stated)
    try:
        return rule(forward)
    except RuleViolation as violation:
        raise RuleViolation(re.sub(r"\b(InputTensor|OutputTensor)\b", lambda m: names[m.group(1)],
                                   str(violation))) from None


def stated_gradient_sizes(query: ShapeQuery, operator: str, forward: str) -> tuple[int, ...]:
    """OutputGradientTensor's Sizes as the call states them: DirectML takes them from the tensor's desc, and the
    incoming gradient's Sizes do not determine them (a pooling's strides, a resampling's scales and a slice's
    window drop the input's size)."""
    given = query.given_outputs.get("OutputGradientTensor")
    if given is None:
        raise InputError(f"{operator} takes OutputGradientTensor's Sizes from its tensor desc: give them with "
                         f"--output-shape (output_shape= in the API), the Sizes of the forward {forward}'s "
                         "InputTensor")
    return tuple(given)


# ---------------------------------------------------------------- the adjoint of a map along one axis


class AxisTaps(Frozen):
    """A linear map along one axis: output element sources[k] reads input element targets[k] with weights[k]
    (FLOAT32; None: every weight is 1, a copy), summed over its taps. Host NumPy arrays, in the order the
    adjoint adds them."""

    sources: np.ndarray
    targets: np.ndarray
    weights: np.ndarray | None

    def __init__(self, sources: np.ndarray, targets: np.ndarray, weights: np.ndarray | None) -> None:
        vars(self).update(sources=sources, targets=targets, weights=weights)

    @classmethod
    def linear(cls, low: np.ndarray, high: np.ndarray, weight: np.ndarray) -> AxisTaps:
        """Each output o reads low[o] with 1 - weight[o] and high[o] with weight[o] (both FLOAT32): o's two taps
        one after the other, low first."""
        count = len(low)
        one = np.float32(1)
        weights = np.stack([one - weight.astype(np.float32), weight.astype(np.float32)], axis=1).reshape(-1)
        return cls(np.repeat(np.arange(count), 2), np.stack([low, high], axis=1).reshape(-1).astype(np.int64),
                   weights.astype(np.float32))

    @classmethod
    def nearest(cls, index: np.ndarray) -> AxisTaps:
        """Each output o copies element index[o]."""
        return cls(np.arange(len(index)), np.asarray(index, np.int64), None)

    def keep(self, sources_kept: np.ndarray) -> AxisTaps:
        """The taps of the outputs where `sources_kept` (a bool per output) is true (ROI_ALIGN's samples inside
        the input: the others read a constant)."""
        chosen = sources_kept[self.sources]
        return AxisTaps(self.sources[chosen], self.targets[chosen],
                        None if self.weights is None else self.weights[chosen])

    def most_per_element(self) -> int:
        """The most taps that land on one input element: the terms its adjoint sums."""
        return int(np.bincount(self.targets).max()) if self.targets.size else 0


def adjoint_along_axis(xp, g, axis: int, size: int, taps: AxisTaps):
    """The adjoint of the map `taps` along `axis` of `g` (FLOAT32): an array with `size` elements along `axis`,
    element i = sum over the taps k that land on i of weights[k] * g[..., sources[k], ...].

    Each product is rounded to FLOAT32 and the products are added to a FLOAT32 zero in the order of the taps
    (a stable sort by element keeps it): pass r adds each element's r-th tap, to distinct elements, so NumPy
    and CuPy compute the same sums in the same order."""
    moved = xp.moveaxis(g, axis, -1)
    result = xp.zeros(moved.shape[:-1] + (size,), dtype=xp.float32)
    if taps.targets.size:
        order = np.argsort(taps.targets, kind="stable")
        targets, sources = taps.targets[order], taps.sources[order]
        weights = None if taps.weights is None else taps.weights[order]
        positions = np.arange(targets.size)
        starts = np.maximum.accumulate(np.where(np.r_[True, targets[1:] != targets[:-1]], positions, 0))
        rank = positions - starts
        for r in range(int(rank.max()) + 1):
            chosen = rank == r
            term = xp.take(moved, xp.asarray(sources[chosen]), axis=-1)
            if weights is not None:
                term = term * xp.asarray(weights[chosen])
            result[..., xp.asarray(targets[chosen])] += term
    return xp.moveaxis(result, -1, axis)


# ---------------------------------------------------------------- tolerances

SUM_FLOOR = 2.0 ** -16


def sum_tolerance(what: str) -> Tolerance:
    """1 ULP per FLOAT32 rounding of a gradient's sum (the call's tolerance_scale counts them), or an absolute
    2^-16: the gradients sum terms of both signs that may cancel, where a ULP of the result measures nothing."""
    return Tolerance(
        "ulp", 1, 1, f"dmlcli's figure (WebNN has no gradients): 1 ULP for each FLOAT32 rounding of {what}, "
                     "counted for the call; FLOAT16 is computed in FLOAT32 and rounded once",
        floor_float32=SUM_FLOOR, floor_float16=SUM_FLOOR,
        floor_source="dmlcli's choice, 2^-16 (1.5e-5) for both types: a gradient sums incoming gradients of both "
                     "signs, whose FLOAT32 rounding error is relative to the sum of their magnitudes, not to the "
                     "result; the floor covers unit-scale gradients summed over a few hundred terms")


def gradient_sum_bound(terms, what: str) -> SumBound:
    """The sum bound of a gradient that spreads InputGradientTensor with weights of one sign (an average's shares, a
    maximum's copies, interpolation weights): the operator itself on |InputGradientTensor| gives each element's sum
    of magnitudes (any other input, which picks or places the terms, as it is)."""
    return SumBound(terms, what, "the operator itself run on |InputGradientTensor| in float64 (its weights are of "
                                 "one sign: each element's sum of magnitudes)", absolute=("InputGradientTensor",))
