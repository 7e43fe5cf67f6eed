"""Checks a call against an operator's entry in the operator table, for one feature level.

Nothing here knows any particular operator: every rule comes from the entry's support rows
and its constraint lists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .data_types import MAX_ELEMENTS, DataType
from .errors import InputError, ValidationError
from .feature_levels import ALL_FEATURE_LEVELS, FeatureLevel
from .operators import Operator


@dataclass(frozen=True, eq=False)  # compared by identity: generated __eq__ and __hash__ cost start-up time
class TensorInfo:
    """What validation needs of a tensor: its role, DataType and Sizes."""

    name: str
    data_type: DataType
    shape: tuple[int, ...]

    def describe(self) -> str:
        return f"{self.name} {self.data_type.name} {list(self.shape)}"


@dataclass(frozen=True, eq=False)
class Call:
    """One operator call: the tensors as DirectML would see them, and the parameters."""

    operator: Operator
    tensors: Mapping[str, TensorInfo]  # inputs and output, by DESC field name
    parameters: Mapping[str, object]  # typed values by DESC field name (see operators/parameters.py)
    broadcast: bool = False
    absent: tuple[str, ...] = ()  # optional inputs the call leaves out (validation skips them)
    float_rules: str = "ieee"  # "ieee" or "d3d": which floating-point rules the result follows

    @property
    def data_types(self) -> dict[str, DataType]:
        return {name: tensor.data_type for name, tensor in self.tensors.items()}

    def complete(self, arrays: Sequence) -> list:
        """Every input of the operator, in order: the given arrays, and zeros (one element, broadcast to any
        shape) of the declared type for each optional input the call leaves out."""
        if not self.absent:
            return list(arrays)
        given = iter(arrays)
        rank = len(self.output.shape)
        like = dict(self.operator.optional_inputs)
        return [np.zeros((1,) * rank, self.tensors[like[name]].data_type.numpy_dtype) if name in self.absent
                else next(given) for name in self.operator.inputs]

    @property
    def output(self) -> TensorInfo:
        return self.tensors[self.operator.output]


@dataclass(frozen=True, eq=False)
class Problem:
    message: str
    # 'table' problems may go away at another feature level; 'rule' problems never do.
    kind: str


@dataclass(frozen=True, eq=False)
class Verdict:
    """A call that passed validation, with the lowest feature level that would also accept it."""

    call: Call
    feature_level: FeatureLevel
    lowest_feature_level: FeatureLevel


def describe_shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _join_names(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _shape_problems(call: Call):
    op = call.operator
    for tensor in call.tensors.values():
        if len(tensor.shape) == 0:
            yield Problem(f"{tensor.name} is 0-D (a bare scalar); DirectML tensors have 1 to 8 dimensions", "rule")
        elif 0 in tensor.shape:
            yield Problem(
                f"{tensor.name} Sizes {describe_shape(tensor.shape)} contain a zero; "
                "DirectML rejects a size of zero in any dimension", "rule")
        elif math.prod(tensor.shape) > MAX_ELEMENTS:
            count = math.prod(tensor.shape)
            yield Problem(
                f"{tensor.name} has {count} elements; a DirectML tensor holds at most {MAX_ELEMENTS} (2^32-1)", "rule")
    output = call.output
    for name in op.inputs:
        tensor = call.tensors.get(name)
        if name in op.same_sizes or tensor is None or not tensor.shape:
            continue
        # A tensor outside the same-Sizes rule (a quantizer's scale or zero point) must still reach every
        # output element: its Sizes broadcast to the output's.
        if len(tensor.shape) > len(output.shape) or any(
                size not in (1, out) for size, out in zip(tensor.shape[::-1], output.shape[::-1])):
            yield Problem(f"{name} Sizes {describe_shape(tensor.shape)} do not broadcast to {op.output} Sizes "
                          f"{describe_shape(output.shape)}; each of its sizes must be 1 or the output's", "rule")
    tied = [call.tensors[name] for name in op.same_sizes if name in call.tensors]
    for tensor in tied[1:]:
        if tensor.shape != tied[0].shape:
            # Inputs of different shapes may be meant to broadcast; an output of the wrong shape (a
            # DxDispatch desc's) cannot be helped by that.
            hint = (" (pass --broadcast, or broadcast=True in the API, to broadcast inputs by NumPy's rules)"
                    if tensor.name in op.inputs else "")
            yield Problem(
                f"{tied[0].name} Sizes {describe_shape(tied[0].shape)} and {tensor.name} Sizes "
                f"{describe_shape(tensor.shape)} differ; {_join_names(op.same_sizes)} must have the same "
                f"DimensionCount and Sizes{hint}", "rule")


def _table_problems(call: Call, feature_level: FeatureLevel):
    op = call.operator
    row = op.row_at(feature_level)
    if row is None:
        yield Problem(f"the operator is not available at {feature_level} (introduced in {op.introduced})", "table")
        return
    if call.absent and (op.optional_since is None or feature_level < op.optional_since):
        yield Problem(f"{_join_names(call.absent)} may be left out only from {op.optional_since} "
                      f"(it is required at {feature_level})", "table")
    yield from _mismatched_data_types(call, row.same_data_type, f"at {feature_level} ", "table")
    for name in op.tensors:
        if name not in call.tensors:
            continue
        tensor, support = call.tensors[name], row.tensors[name]
        if tensor.data_type not in support.data_types:
            yield Problem(
                f"{name} data type {tensor.data_type.name} is not supported at {feature_level} "
                f"(allowed: {support.describe_data_types()})", "table")
        if len(tensor.shape) not in support.dims:
            yield Problem(
                f"{name} dimension count {len(tensor.shape)} is not supported at {feature_level} "
                f"(allowed: {support.describe_dims()})", "table")


def _type_problems(call: Call):
    op = call.operator
    yield from _mismatched_data_types(call, op.same_data_type, "", "rule")


def _mismatched_data_types(call: Call, names, qualifier: str, kind: str):
    """The tensors among `names` (those the call gives) whose DataType differs from the first one's."""
    tied = [call.tensors[name] for name in names if name in call.tensors]
    for tensor in tied[1:]:
        if tensor.data_type != tied[0].data_type:
            yield Problem(
                f"{tied[0].name} data type {tied[0].data_type.name} and {tensor.name} data type "
                f"{tensor.data_type.name} differ; {qualifier}{_join_names(names)} must have the same DataType",
                kind)


def problems(call: Call, feature_level: FeatureLevel) -> list[Problem]:
    """Every rule the call breaks at `feature_level`, most fundamental first."""
    return list(_shape_problems(call)) + list(_table_problems(call, feature_level)) + list(_type_problems(call))


# The support-table search below depends only on the operator, its tensors' data types and dimension
# counts and the inputs left out; every run of an operator on like tensors asks it again, so its answers
# are kept (keyed by the operator's identity, which the value holds on to, so that the id is not reused).
_LOWEST_LEVELS: dict[tuple, tuple[Operator, FeatureLevel | None]] = {}
_LOWEST_LEVELS_LIMIT = 4096


def lowest_accepting_level(call: Call) -> FeatureLevel | None:
    if any(_shape_problems(call)) or any(_type_problems(call)):
        return None  # these rules hold at every level alike
    key = (id(call.operator), call.absent,
           tuple((name, tensor.data_type, len(tensor.shape)) for name, tensor in call.tensors.items()))
    known = _LOWEST_LEVELS.get(key)
    if known is not None and known[0] is call.operator:
        return known[1]
    lowest = next((candidate for candidate in ALL_FEATURE_LEVELS if not any(_table_problems(call, candidate))),
                  None)
    if len(_LOWEST_LEVELS) >= _LOWEST_LEVELS_LIMIT:
        _LOWEST_LEVELS.clear()
    _LOWEST_LEVELS[key] = (call.operator, lowest)
    return lowest


def check(call: Call, feature_level: FeatureLevel) -> Verdict:
    """Raise ValidationError naming the first broken rule; return the verdict otherwise."""
    found = problems(call, feature_level)
    lowest = lowest_accepting_level(call)
    if not found:
        return Verdict(call, feature_level, lowest)
    first = found[0]
    message = f"{call.operator.name}: {first.message}"
    if lowest is not None:
        message += f"; supported from {lowest}"
    elif first.kind == "table":
        message += "; no feature level accepts this call"
    error = ValidationError(message)
    error.lowest_feature_level = lowest  # for reports (validate --format json), as the message says it
    raise error


def output_data_type(operator: Operator, input_types: Mapping[str, DataType], requested: DataType | None) -> DataType:
    """The OutputTensor's DataType: as requested, else tied to the inputs, else the operator's default."""
    if requested is not None:
        return requested
    tied = next((name for name in operator.same_data_type if name in input_types), None)
    if operator.output in operator.same_data_type and tied is not None:
        return input_types[tied]
    if operator.default_output_type is not None:  # a choice, or tied only to an optional input left out
        return operator.default_output_type
    return operator.support[0].tensors[operator.output].data_types[0]  # the one type every row allows


def broadcast_shape(operator: Operator, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        described = ", ".join(f"{name} Sizes {describe_shape(shape)}" for name, shape in shapes.items())
        raise ValidationError(f"{operator.name}: {described} cannot be broadcast together by NumPy's rules") from None


def build_call(
    operator: Operator,
    inputs: Sequence[tuple[DataType, tuple[int, ...]]],
    *,
    output_type: DataType | None = None,
    output_shape: tuple[int, ...] | None = None,
    broadcast: bool = False,
) -> Call:
    """Assemble the call DirectML would see from the inputs' data types and shapes (parameters come later).

    The output has the shape the inputs (broadcast or not) agree on, the first input's when they
    don't, unless `output_shape` gives it (a DxDispatch desc's OutputTensor Sizes): the same-Sizes
    rule then checks it like any tensor.
    """
    names = _given_inputs(operator, len(inputs))
    shapes = {name: tuple(int(s) for s in shape) for name, (_, shape) in zip(names, inputs)}
    if broadcast:
        common = broadcast_shape(operator, shapes)
        shapes = {name: common for name in shapes}
    types = {name: data_type for name, (data_type, _) in zip(names, inputs)}
    tensors = {name: TensorInfo(name, types[name], shapes[name]) for name in names}
    out_shape = tuple(int(s) for s in output_shape) if output_shape is not None else shapes[names[0]]
    tensors[operator.output] = TensorInfo(operator.output, output_data_type(operator, types, output_type), out_shape)
    absent = tuple(name for name in operator.inputs if name not in names)
    return Call(operator, tensors, {}, broadcast, absent)


def _given_inputs(operator: Operator, count: int) -> tuple[str, ...]:
    """The inputs a call of `count` tensors gives: all of them, or only the required ones."""
    if count == len(operator.inputs):
        return operator.inputs
    if operator.optional_inputs and count == len(operator.required_inputs):
        return operator.required_inputs
    noun = "input tensor" if len(operator.inputs) == 1 else "input tensors"
    expected = str(len(operator.inputs))
    if operator.optional_inputs:
        expected = f"{len(operator.required_inputs)} or {len(operator.inputs)}"
    raise InputError(f"{operator.name} takes {expected} {noun} ({', '.join(operator.inputs)}); got {count}")
