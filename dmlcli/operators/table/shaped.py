"""What a shaped operator's entry works with: the shape query its rule answers, and the rule helpers.

An element-wise operator's output has its inputs' Sizes. A shaped operator (REDUCE, JOIN, SLICE, ...)
declares a `shape_rule` that computes each output's Sizes from the inputs' Sizes and the typed
parameters, and refuses, with a RuleViolation, a call its DirectML page forbids (an axis past the rank,
Sizes that do not line up). Validation turns a RuleViolation into the operator's error (exit 3). Its
`array_kernel` then computes the outputs with NumPy or CuPy (the same function, given `xp`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ...data_types import DataType
from ...records import Frozen

Shape = tuple[int, ...]


class RuleViolation(Exception):
    """A call that the operator's rules refuse whatever the feature level (validation reports it, exit 3)."""


class ShapeQuery(Frozen):
    """What a shape rule may look at (an immutable record, records.py; compared by identity).

    `shapes`: each input's Sizes by DESC field name; a variadic input (JOIN's InputTensors) has a list.
    `data_types`: each tensor's DataType by DESC field name, and by its own name for the tensors of a variadic
    field (QuantizationTensors[0], QuantizationTensors[1]).
    `given_outputs`: output Sizes the caller stated (a DxDispatch desc's OutputTensor, --output-shape),
    by name; a rule uses them where DirectML takes the output's Sizes from its desc (FILL_VALUE_*, SPLIT)
    and otherwise the validator checks them against what the rule computes.
    `asked_outputs`: the outputs the call asks for where it leaves some optional ones out (outputs=, --outputs, a
    DxDispatch desc without them), by DESC field name; None: every output the call can give. A rule still gives
    every output's Sizes (validation keeps those asked); it may refuse an output its inputs cannot give.
    """

    shapes: Mapping[str, Shape | list[Shape]]
    data_types: Mapping[str, DataType]
    parameters: Mapping[str, object]
    given_outputs: Mapping[str, Shape | list[Shape]]
    asked_outputs: tuple[str, ...] | None

    def __init__(self, shapes: Mapping[str, Shape | list[Shape]], data_types: Mapping[str, DataType],
                 parameters: Mapping[str, object],
                 given_outputs: Mapping[str, Shape | list[Shape]] | None = None,
                 asked_outputs: tuple[str, ...] | None = None) -> None:
        vars(self).update(shapes=shapes, data_types=data_types, parameters=parameters,
                          given_outputs={} if given_outputs is None else given_outputs, asked_outputs=asked_outputs)

    def asks_for(self, name: str) -> bool:
        """Whether the call asks for the output `name`: it states its Sizes, or names it among the outputs it
        asks for."""
        return name in self.given_outputs or (self.asked_outputs is not None and name in self.asked_outputs)

    def shape(self, name: str) -> Shape:
        found = self.shapes[name]
        if isinstance(found, list):
            raise TypeError(f"{name} is variadic: use shapes_of")
        return found

    def shapes_of(self, name: str) -> list[Shape]:
        found = self.shapes[name]
        return list(found) if isinstance(found, list) else [found]

    def rank(self, name: str) -> int:
        return len(self.shapes_of(name)[0])


def asks_for_output(outputs: Sequence, name: str) -> bool:
    """Whether a kernel's `outputs` (the call's TensorInfo list: the outputs it asks for, an optional one left out
    being absent) hold the output `name`: a kernel skips the work of an output it is not asked for, and returns one
    array per entry of `outputs`, in their order."""
    return any(info.name == name for info in outputs)


def describe_sizes(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def onnx_layout_hint(given: Sequence[int], wanted: Sequence[int]) -> str:
    """Where an operand has ONNX's Sizes and DirectML wants the same values in another layout (ONNX's per-channel
    bias [C] for DirectML's {1, C, 1, 1}: `given` is `wanted` without its 1s), how to give it; else ""."""
    if tuple(given) != tuple(wanted) and [s for s in given if s != 1] == [s for s in wanted if s != 1]:
        return (f"; ONNX's {describe_sizes(given)} is that reshaped: give the same values with Sizes "
                f"{describe_sizes(wanted)}")
    return ""


def per_channel_sizes(given: Sequence[int], input_shape: Sequence[int]) -> tuple[int, ...] | None:
    """DirectML's {1, C, 1, ...} (the input's DimensionCount) for an operand of ONNX's per-channel Sizes [C] (C the
    input's Sizes[1]); None for any other operand."""
    if len(given) == 1 and len(input_shape) >= 2 and given[0] == input_shape[1]:
        return (1, input_shape[1]) + (1,) * (len(input_shape) - 2)
    return None


def check_axis(axis: int, rank: int, field_name: str, tensor: str = "InputTensor") -> int:
    """One UINT axis of a tensor of `rank` dimensions."""
    if not 0 <= axis < rank:
        raise RuleViolation(f"{field_name} {axis} is out of range for {tensor}'s {rank} dimensions "
                            f"(allowed: 0 to {rank - 1}; DirectML axes are unsigned, so ONNX's -1 is {rank - 1})")
    return axis


def resolve_axes(axes: Sequence[int] | None, rank: int, field_name: str, *, tensor: str = "InputTensor",
                 must_be_sorted: bool = False, allow_empty: bool = False) -> tuple[int, ...]:
    """Axes checked against the rank: each in range, none twice (sorted where the page says so).

    None (left out) means every axis, in order.
    """
    if axes is None:
        return tuple(range(rank))
    if not axes and not allow_empty:
        raise RuleViolation(f"{field_name} is empty; give at least one axis (0 to {rank - 1})")
    for axis in axes:
        check_axis(axis, rank, field_name, tensor)
    if len(set(axes)) != len(axes):
        raise RuleViolation(f"{field_name} {describe_sizes(axes)} names an axis twice")
    if must_be_sorted and list(axes) != sorted(axes):
        raise RuleViolation(f"{field_name} {describe_sizes(axes)} must be in increasing order")
    return tuple(axes)


def check_length(values: Sequence[int] | None, rank: int, field_name: str, tensor: str = "InputTensor") -> None:
    """An array field with one value per dimension of `tensor` (SLICE's Offsets, PADDING's StartPadding)."""
    if values is not None and len(values) != rank:
        raise RuleViolation(f"{field_name} has {len(values)} values but {tensor} has {rank} dimensions "
                            "(one value per dimension)")
