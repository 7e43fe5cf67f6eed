"""The sum bound of a call (issue 31): how far the rounding of an operator's sums may move each element.

An operator that sums terms declares how its magnitudes are obtained and how many terms an element sums
(operators/table/schema.py, SumBound). Here that declaration meets a call and its inputs: one extra run of the
operator (on the absolute values of its inputs, in float64, on the CPU) gives each element's sum of magnitudes M,
and the element's bound is BOUND_MULTIPLE x (K x u + u_out) x M, carried through a fused activation by its largest
slope. `--check`, the suite runner, `--backend all` and the GPU tests compare within it (comparison.py), `validate`
and `describe` state it.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..calls.validation import Call, TensorInfo
from ..data_types import FLOAT64, to_kernel_array
from ..io.npy import to_native
from ..operators.table.schema import BOUND_MULTIPLE, FLOAT32_ROUNDOFF, TF32_ROUNDOFF


class ElementBound:
    """The sum bound of one of a call's outputs, element by element (flat, C order), and its figures.

    An element passes by it where |got - expected| <= values[i] + ulp_allowance x ULP(expected) +
    absolute_allowance; the allowances are a fused activation's own tolerance (its figure in ULP of the result, or
    absolute), which adds to the error the activation carries from the sum.
    """

    def __init__(self, values: np.ndarray, figures: BoundFigures) -> None:
        self.values = values
        self.figures = figures

    def allowed(self, positions: np.ndarray, expected: np.ndarray) -> np.ndarray:
        """The bound of the elements at flat `positions`, whose expected values are `expected` (float64)."""
        found = self.values[positions]
        f = self.figures
        if f.ulp_allowance:
            dtype = np.dtype(f.output_dtype)
            found = found + f.ulp_allowance * np.spacing(np.abs(expected).astype(dtype)).astype(np.float64)
        return found + f.absolute_allowance

    def describe(self) -> str:
        return self.figures.describe()


class BoundFigures:
    """The figures of a call's sum bound, known before its data: K, u, u_out, the multiple and a fused activation's
    slope and own tolerance (validate states them; the data give M)."""

    def __init__(self, terms: int, roundoff: float, output_dtype: str, slope: float = 1.0,
                 ulp_allowance: float = 0.0, absolute_allowance: float = 0.0, activation: str | None = None) -> None:
        self.terms = terms
        self.roundoff = roundoff
        self.output_dtype = output_dtype
        self.output_roundoff = float(np.finfo(np.dtype(output_dtype)).eps) / 2
        self.multiple = BOUND_MULTIPLE
        self.slope = slope
        self.ulp_allowance = ulp_allowance
        self.absolute_allowance = absolute_allowance
        self.activation = activation

    @property
    def factor(self) -> float:
        """What M is multiplied by: multiple x (K x u + u_out) x slope."""
        return self.multiple * (self.terms * self.roundoff + self.output_roundoff) * self.slope

    def describe(self) -> str:
        """The bound of this call in words: '2 x (27 x 2^-24 + 2^-24) x M'."""
        text = (f"{self.multiple} x ({self.terms} x {_power_of_two(self.roundoff)} + "
                f"{_power_of_two(self.output_roundoff)}) x M")
        if self.activation is not None:
            text += f", x {self.slope:g} (the largest slope of {self.activation})"
            if self.ulp_allowance:
                text += f" + {self.ulp_allowance:g} ULP of the result ({self.activation}'s own figure)"
            if self.absolute_allowance:
                text += f" + {self.absolute_allowance:g} ({self.activation}'s own figure)"
        return text

    def to_json(self) -> dict:
        return {"multiple": self.multiple, "terms": self.terms, "roundoff": self.roundoff,
                "output_roundoff": self.output_roundoff, "activation": self.activation,
                "activation_slope": self.slope if self.activation is not None else None,
                "activation_ulp": self.ulp_allowance if self.activation is not None else None,
                "activation_atol": self.absolute_allowance if self.activation is not None else None,
                "text": self.describe()}


def _power_of_two(value: float) -> str:
    exponent = math.log2(value)
    return f"2^{exponent:.0f}" if exponent == round(exponent) else f"{value:.3g}"


def bounded_terms(call: Call) -> dict[int, int]:
    """{output position: K} for the outputs of the call its sum bound covers (float outputs, K > 0)."""
    declared = call.operator.sum_bound
    if declared is None:
        return {}
    found = declared.terms(call)
    if not isinstance(found, dict):
        found = {call.operator.output: found}
    terms = {}
    for position, tensor in enumerate(call.outputs):
        count = found.get(tensor.name)
        # K = 0: nothing summed (REDUCE's MAX and MIN select an element), the rule's figure alone.
        if count and tensor.data_type.numpy_dtype.kind == "f":
            terms[position] = int(count)
    return terms


def has_sum_bound(call: Call, output: int = 0) -> bool:
    """Whether the call's output at position `output` is checked with a sum bound."""
    return output in bounded_terms(call)


def bound_figures(call: Call, output: int = 0) -> BoundFigures | None:
    """The sum bound figures of the call's output at position `output`; None where it has none (no sum bound, an
    integer output, nothing summed, or a fused activation that jumps, which no slope bounds)."""
    operator = call.operator
    terms = bounded_terms(call).get(output)
    if terms is None:
        return None
    dtype = np.dtype(call.outputs[output].data_type.numpy_dtype)
    roundoff = TF32_ROUNDOFF if call.allow_tf32 and operator.tf32_applies(dtype) else FLOAT32_ROUNDOFF
    fused = call.parameters.get(operator.fused_activation) if operator.fused_activation and output == 0 else None
    if fused is None:
        return BoundFigures(terms, roundoff, dtype.name)
    activation, fields = fused
    slope = None if activation.largest_slope is None else activation.largest_slope(fields)
    if slope is None:
        return None
    own = activation.tolerance
    return BoundFigures(terms, roundoff, dtype.name, slope=float(slope),
                        ulp_allowance=own.for_dtype(dtype) if own is not None and own.kind == "ulp" else 0.0,
                        absolute_allowance=own.for_dtype(dtype) if own is not None and own.kind == "atol" else 0.0,
                        activation=activation.name)


def element_bounds(call: Call, arrays: Sequence[np.ndarray | None]) -> tuple[ElementBound | None, ...]:
    """The sum bound of each element of each of the call's outputs (None for an output without one), from the
    inputs it was run on: one run of the operator's kernel (or its declared magnitude kernel) on the CPU, in
    float64, for every output it covers."""
    figures = [bound_figures(call, position) for position in range(len(call.outputs))]
    if not any(f is not None for f in figures):
        return tuple(figures)
    found = magnitudes(call, arrays)
    bounds = []
    for position, (figure, magnitude) in enumerate(zip(figures, found)):
        if figure is None or magnitude is None:
            bounds.append(None)
            continue
        with np.errstate(all="ignore"):
            values = figure.factor * magnitude
        # An infinite or NaN magnitude (an infinity among the inputs) bounds nothing: such an element has its ULP
        # figure and floor alone, so an infinity against a number never passes by it.
        bounds.append(ElementBound(np.where(np.isfinite(values), values, 0.0), figure))
    return tuple(bounds)


def element_bound(call: Call, arrays: Sequence[np.ndarray | None], output: int = 0) -> ElementBound | None:
    """The sum bound of each element of the call's output at position `output` (None where it has none)."""
    if bound_figures(call, output) is None:
        return None
    return element_bounds(call, arrays)[output]


def magnitudes(call: Call, arrays: Sequence[np.ndarray | None]) -> list[np.ndarray | None]:
    """M for each element of each output (flat, float64; None where the run gives none): the declared run on the
    call's inputs."""
    operator = call.operator
    declared = operator.sum_bound
    inputs = []
    for name, array in zip(operator.inputs, call.complete(list(arrays))):
        if array is None:
            inputs.append(None)
            continue
        array = to_native(np.asarray(array))
        if array.dtype.kind != "f":
            inputs.append(to_kernel_array(array))
            continue
        value = array.astype(np.float64)
        inputs.append(np.abs(value) if name in declared.absolute else value)
    outputs = tuple(TensorInfo(t.name, FLOAT64 if t.data_type.numpy_dtype.kind == "f" else t.data_type, t.shape)
                    for t in call.outputs)
    parameters = declared.parameters(call.parameters) if declared.parameters is not None else call.parameters
    with np.errstate(all="ignore"):
        if declared.magnitude is not None:
            found = declared.magnitude(np, inputs, outputs, parameters)
        else:
            found = operator.array_kernel(np, inputs, outputs, parameters)
    found = list(found) if isinstance(found, (tuple, list)) else [found]
    found += [None] * (len(outputs) - len(found))
    flat = []
    for magnitude, tensor in zip(found, outputs):
        if magnitude is None:
            flat.append(None)
            continue
        magnitude = np.abs(np.asarray(magnitude, dtype=np.float64))
        if magnitude.size != math.prod(tensor.shape):
            raise AssertionError(f"{operator.name}'s magnitude run gave {magnitude.size} elements for {tensor.name} "
                                 f"{list(tensor.shape)}")
        flat.append(magnitude.reshape(-1))
    return flat


def finished_bounds(call: Call, arrays: Sequence[np.ndarray | None], finish, outputs: Sequence) -> list:
    """Each of `outputs`' sum bound (None where it has none): the call's outputs' bounds (from the `arrays` it ran
    on), carried through `finish` (an ONNX adapter's reshapes, transpositions and choice of outputs, which made
    `outputs` from the call's) as the outputs themselves are; `finish` `tuple` is none."""
    if call.operator.sum_bound is None:
        return [None] * len(outputs)
    bounds = element_bounds(call, arrays)
    if finish is tuple:
        return list(bounds)
    shapes = [tuple(tensor.shape) for tensor in call.outputs]
    values = finish(tuple(np.full(shape, np.nan) if bound is None else bound.values.reshape(shape)
                          for bound, shape in zip(bounds, shapes)))
    # Which of the call's outputs each finished one comes from: the finish of arrays that hold their own position.
    sources = finish(tuple(np.full(shape, float(position)) for position, shape in enumerate(shapes)))
    found = []
    for value, source, output in zip(values, sources, outputs):
        value, source = np.asarray(value, dtype=np.float64), np.asarray(source)
        bound = bounds[int(source.reshape(-1)[0])] if source.size else None
        fits = bound is not None and value.size == np.size(output) and not np.isnan(value).all()
        found.append(ElementBound(value.reshape(-1), bound.figures) if fits else None)
    return found
