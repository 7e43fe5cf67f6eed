"""Checks a call against an operator's entry in the operator table, for one feature level.

Nothing here knows any particular operator: every rule comes from the entry's support rows
and its constraint lists.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Callable, Mapping, Sequence

import numpy as np

from ..data_types import MAX_ELEMENTS, DataType
from ..errors import DmlcliError, InputError, ValidationError, quoted
from ..feature_levels import ALL_FEATURE_LEVELS, FeatureLevel
from ..operators import Operator
from ..records import Frozen


class TensorInfo(Frozen):
    """What validation needs of a tensor: its role, DataType and Sizes."""

    name: str
    data_type: DataType
    shape: tuple[int, ...]

    def __init__(self, name: str, data_type: DataType, shape: tuple[int, ...]) -> None:
        vars(self).update(name=name, data_type=data_type, shape=shape)

    def describe(self) -> str:
        return f"{self.name} {self.data_type.name} {list(self.shape)}"


class Call(Frozen):
    """One operator call: the tensors as DirectML would see them, and the parameters."""

    operator: Operator
    tensors: Mapping[str, TensorInfo]  # inputs and output, by DESC field name
    parameters: Mapping[str, object]  # typed values by DESC field name (see operators/parameters.py)
    broadcast: bool
    absent: tuple[str, ...]  # optional inputs the call leaves out (validation skips them)
    float_rules: str  # "ieee" or "d3d": which floating-point rules the result follows
    # Whether the call allows TF32 products (--allow-tf32; DirectML's ALLOW_HALF_PRECISION_COMPUTATION flag): it
    # changes the GPU's products and the --check tolerance of operators with tf32_products, nothing else.
    allow_tf32: bool

    def __init__(self, operator: Operator, tensors: Mapping[str, TensorInfo], parameters: Mapping[str, object],
                 broadcast: bool = False, absent: tuple[str, ...] = (), float_rules: str = "ieee",
                 allow_tf32: bool = False) -> None:
        vars(self).update(operator=operator, tensors=tensors, parameters=parameters, broadcast=broadcast, absent=absent,
                          float_rules=float_rules, allow_tf32=allow_tf32)

    @property
    def data_types(self) -> dict[str, DataType]:
        return {name: tensor.data_type for name, tensor in self.tensors.items()}

    def complete(self, arrays: Sequence) -> list:
        """Every input of the operator, in order: the given arrays, and for each optional input the call
        leaves out, zeros (one element, broadcast to any shape) of the declared type for an element-wise
        operator, None for a shaped one (its kernel knows what the missing tensor means). A shaped operator's
        broadcast call (Operator.input_broadcast) has each array broadcast to its tensor's Sizes: zero strides, as
        DirectML's descs give them."""
        if self.broadcast and not self.operator.is_elementwise:
            sizes = iter(self.inputs)
            arrays = [None if array is None else np.broadcast_to(array, next(sizes).shape) for array in arrays]
        if not self.absent:
            return list(arrays)
        given = iter([array for array in arrays if array is not None])  # None: a left-out input's place
        rank = len(self.output.shape)
        like = dict(self.operator.optional_inputs)
        if not self.operator.is_elementwise:
            return [None if name in self.absent else next(given) for name in self.operator.inputs]
        return [np.zeros((1,) * rank, self.tensors[like[name]].data_type.numpy_dtype) if name in self.absent
                else next(given) for name in self.operator.inputs]

    def completed_sources(self, arrays: Sequence) -> list[int | None]:
        """For each input `complete` gives, the position in `arrays` of the array it is or is made from; None for
        an input the call leaves out."""
        if not self.absent:
            return list(range(len(arrays)))
        given = iter([position for position, array in enumerate(arrays) if array is not None])
        return [None if name in self.absent else next(given) for name in self.operator.inputs]

    def completion(self, arrays: Sequence, constant_inputs: frozenset[int] = frozenset()
                   ) -> Callable[[Sequence], list]:
        """`complete` as planned on a first call's `arrays`, for later calls whose arrays have the same types, Sizes
        and Strides, and the same arrays at `constant_inputs` (a model's planned node): an input complete leaves as
        it is, or broadcasts to its own Sizes, passes as it comes; what it makes of constants (a constant's
        broadcast view, a left-out input's zeros) is the first call's (np.broadcast_to costs a few us an input); a
        runtime input is broadcast again."""
        first = self.complete(list(arrays))
        plan = []
        for made, source in zip(first, self.completed_sources(arrays)):
            given = None if source is None else arrays[source]
            if source is None or (source in constant_inputs and made is not given):
                plan.append((None, made, None))  # made once: None, zeros, or a constant's broadcast view
            elif made is given or (made.shape == given.shape and made.strides == given.strides):
                plan.append((source, None, None))  # as it comes (a broadcast to its own Sizes is itself)
            else:
                plan.append((source, None, made.shape))
        broadcast_to = np.broadcast_to

        def complete(arrays: Sequence) -> list:
            return [made if source is None else arrays[source] if shape is None else broadcast_to(arrays[source], shape)
                    for source, made, shape in plan]

        return complete

    @property
    def output(self) -> TensorInfo:
        """The first output (the only one of most operators)."""
        return self.outputs[0]

    # Kept once worked out (the call is immutable): a run asks for its outputs several times.
    @cached_property
    def outputs(self) -> tuple[TensorInfo, ...]:
        """Every output tensor in DESC order, a variadic output's tensors one by one."""
        names = set(self.operator.outputs)
        return tuple(tensor for name, tensor in self.tensors.items() if field_of(name) in names)

    @cached_property
    def inputs(self) -> tuple[TensorInfo, ...]:
        names = set(self.operator.inputs)
        return tuple(tensor for name, tensor in self.tensors.items() if field_of(name) in names)


def field_of(tensor_name: str) -> str:
    """The DESC field of a tensor: InputTensors[2] -> InputTensors (a variadic field's third tensor)."""
    return tensor_name.split("[", 1)[0]


class Problem:
    """One broken rule. `kind`: 'table' problems may go away at another feature level; 'rule' problems never do.

    A plain class with slots rather than a dataclass: it is internal to validation, and creating a dataclass
    costs every start-up a few tenths of a millisecond (issue 21).
    """

    __slots__ = ("message", "kind")

    def __init__(self, message: str, kind: str) -> None:
        self.message = message
        self.kind = kind

    def __repr__(self) -> str:
        return f"Problem(message={self.message!r}, kind={self.kind!r})"


_NOT_YET = object()


class Verdict(Frozen):
    """A call that passed validation at `feature_level`, and the lowest feature level that would also accept it.

    Immutable, like the records around it. `lowest_feature_level` is worked out when first asked for (and
    kept): finding it checks the support table at every level, which only `validate`, reports and messages show,
    while every run builds a Verdict.
    """

    def __init__(self, call: Call, feature_level: FeatureLevel, lowest_feature_level=_NOT_YET) -> None:
        vars(self).update(call=call, feature_level=feature_level, _lowest=lowest_feature_level)

    @property
    def lowest_feature_level(self) -> FeatureLevel | None:
        if self._lowest is _NOT_YET:
            vars(self)["_lowest"] = lowest_accepting_level(self.call)
        return self._lowest


def describe_shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _join_names(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _shape_problems(call: Call):
    op = call.operator
    yield from _size_problems(call.tensors.values())
    if not op.is_elementwise:
        return  # the shape rule has checked how the tensors' Sizes relate (build_call)
    yield from _elementwise_shape_problems(call)


def _size_problems(tensors):
    for tensor in tensors:
        if len(tensor.shape) == 0:
            yield Problem(f"{tensor.name} is 0-D (a bare scalar); DirectML tensors have 1 to 8 dimensions", "rule")
        elif 0 in tensor.shape:
            yield Problem(
                f"{tensor.name} Sizes {describe_shape(tensor.shape)} contain a zero; "
                "DirectML rejects a size of zero in any dimension", "rule")
        elif min(tensor.shape) < 0:  # Sizes stated for an output (a suite case's, a desc's) are not parsed as UINT
            yield Problem(f"{tensor.name} Sizes {describe_shape(tensor.shape)} contain a negative size; DirectML's "
                          "Sizes are UINT, each at least 1", "rule")
        elif math.prod(tensor.shape) > MAX_ELEMENTS:
            count = math.prod(tensor.shape)
            yield Problem(
                f"{tensor.name} has {count} elements; a DirectML tensor holds at most {MAX_ELEMENTS} (2^32-1)", "rule")


def _elementwise_shape_problems(call: Call):
    op = call.operator
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
    row = op.row_at(feature_level, call.parameters)
    if row is None:
        if op.support_by is not None and op.row_at(feature_level) is not None:
            value = call.parameters.get(op.support_by)
            first = min(r.level for r in op.rows_for(call.parameters))
            yield Problem(f"{op.support_by} {str(value).upper()} is not available at {feature_level} "
                          f"(introduced in {first})", "table")
            return
        yield Problem(f"the operator is not available at {feature_level} (introduced in {op.introduced})", "table")
        return
    if op.level_rule is not None:
        message = op.level_rule(call, feature_level)
        if message:
            yield Problem(message, "table")
    for field, activation, fields in _ruled_activations(call):
        message = activation.level_rule(Call(activation, {}, fields), feature_level)
        if message:
            yield Problem(f"{field} {activation.name}: {message}", "table")
    if call.absent and (op.optional_since is None or feature_level < op.optional_since):
        yield Problem(f"{_join_names(call.absent)} may be left out only from {op.optional_since} "
                      f"(it is required at {feature_level})", "table")
    yield from _mismatched_data_types(call, row.same_data_type, f"at {feature_level} ", "table")
    for name, tensor in call.tensors.items():
        support = row.tensors[field_of(name)]
        if tensor.data_type not in support.data_types:
            yield Problem(
                f"{name} data type {tensor.data_type.name} is not supported at {feature_level} "
                f"(allowed: {support.describe_data_types()})", "table")
        if len(tensor.shape) not in support.dims:
            yield Problem(
                f"{name} dimension count {len(tensor.shape)} is not supported at {feature_level} "
                f"(allowed: {support.describe_dims()})", "table")


def _ruled_activations(call: Call) -> list:
    """(field, activation entry, its FLOAT fields) of each activation desc among the call's parameters (a fused
    activation, a recurrent operator's) whose entry has a level rule: checked as the activation's own call is."""
    return [(parameter.field, activation, fields) for parameter in call.operator.parameters
            for activation, fields in parameter.activations_in(call.parameters.get(parameter.field))
            if activation.level_rule is not None]


def _type_problems(call: Call):
    op = call.operator
    yield from _mismatched_data_types(call, op.same_data_type, "", "rule")


def _mismatched_data_types(call: Call, names, qualifier: str, kind: str):
    """The tensors among `names` (those the call gives) whose DataType differs from the first one's. A name is a
    field (every tensor of it) or one place of a variadic field ("QuantizationTensors[1]")."""
    tied = [tensor for name, tensor in call.tensors.items() if field_of(name) in names or name in names]
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
# counts and the inputs left out -- except for an operator whose rows or level rule read the call's
# parameters or Sizes (REDUCE's rows by Function, PADDING's SYMMETRIC, BATCH_NORMALIZATION's Spatial, a fused
# SOFTPLUS's Steepness), which is searched every time; every run of an operator on like tensors asks it again,
# so its answers are kept (keyed by the operator's identity, which the value holds on to, so that the id is not
# reused).
_LOWEST_LEVELS: dict[tuple, tuple[Operator, FeatureLevel | None]] = {}
_LOWEST_LEVELS_LIMIT = 4096


def lowest_accepting_level(call: Call) -> FeatureLevel | None:
    if any(_shape_problems(call)) or any(_type_problems(call)):
        return None  # these rules hold at every level alike
    if call.operator.level_rule is not None or call.operator.support_by is not None or _ruled_activations(call):
        return next((candidate for candidate in ALL_FEATURE_LEVELS if not any(_table_problems(call, candidate))),
                    None)
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
    if not found:
        return Verdict(call, feature_level)  # the lowest accepting level is found when asked for
    lowest = lowest_accepting_level(call)
    first = found[0]
    message = f"{call.operator.name}: {first.message}"
    if lowest is not None:
        message += f"; supported from {lowest}"
    elif first.kind == "table":
        # No level takes the call: where an input's type is the reason, converting it is the way (NumPy's FLOAT64).
        message += "; no feature level accepts this call" + _conversion_hint(call, feature_level, first.message)
    error = ValidationError(message)
    error.lowest_feature_level = lowest  # for reports (validate --format json), as the message says it
    raise error


def _conversion_hint(call: Call, feature_level: FeatureLevel, refused: str) -> str:
    """Where the broken rule is an input's data type that the level takes in another of the same kind (NumPy's
    FLOAT64 where FLOAT32 is allowed): how to convert the input (--convert, convert=); "" otherwise."""
    row = call.operator.row_at(feature_level, call.parameters)
    if row is None:
        return ""
    for tensor in call.inputs:
        if not refused.startswith(f"{tensor.name} data type ") or tensor.data_type.is_four_bit:
            continue
        given = tensor.data_type
        kin = [t for t in row.tensors[field_of(tensor.name)].data_types
               if t.is_float == given.is_float and not t.is_four_bit]
        if not kin:
            return ""
        # FLOAT32 for a float; for an integer the widest of its signedness no wider than it, else the first allowed.
        alike = sorted((t for t in kin if t.name[0] == given.name[0] and t.bits <= given.bits), key=lambda t: -t.bits)
        target = next((t for t in kin if t.name == "FLOAT32"), None) if given.is_float else None
        target = target or (alike[0] if alike else kin[0])
        from ..io.convert import convert_hint

        return f"; {convert_hint(given, target).replace('converts it', f'converts {tensor.name}', 1)}"
    return ""


def output_data_types(operator: Operator, input_types: Mapping[str, DataType], requested: DataType | None,
                      feature_level: FeatureLevel | None = None,
                      parameters: Mapping[str, object] | None = None) -> dict[str, DataType]:
    """Each output's DataType: the requested type for the output the caller chooses (--output-dtype; the
    first output where every output is tied, so that a wrong request is reported like any tensor), else
    the type of the input it is tied to (or of an earlier output: DYNAMIC_QUANTIZE_LINEAR's zero point has its
    OutputTensor's), else the operator's default where the level allows it, else the first type the level's row
    allows (LOGICAL_EQUALS at 1_0 writes UINT32 only). `input_types` is by field, and by tensor name for the places
    of a variadic field (which a tie may name)."""
    row = operator.row_at(feature_level, parameters) if feature_level is not None else None
    # The ties of a level where the operator is absent are its newest row's: the call is typed as it would run.
    ties = row if row is not None else operator.rows_for(parameters)[0]
    target = operator.choice_output or operator.output
    found = {}
    for name in operator.outputs:
        if requested is not None and name == target:
            found[name] = requested
            continue
        tied = _tied_input(operator, ties, name, input_types)
        if tied is not None:
            found[name] = input_types[tied]
            continue
        earlier = _tied_input(operator, ties, name, found)
        if earlier is not None:
            found[name] = found[earlier]
            continue
        allowed = row.tensors[name].data_types if row is not None else ()
        if name == target and operator.default_output_type is not None and (
                not allowed or operator.default_output_type in allowed):
            found[name] = operator.default_output_type
        elif allowed:
            found[name] = allowed[0]
        else:
            found[name] = operator.support[0].tensors[name].data_types[0]  # the one type every row allows
    return found


def _tied_input(operator: Operator, row, output: str, input_types: Mapping[str, DataType]) -> str | None:
    for names in (operator.same_data_type, row.same_data_type if row is not None else ()):
        if output in names:
            tied = next((name for name in names if name in input_types), None)
            if tied is not None:
                return tied
    return None


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
    output_shapes: Mapping[str, object] | None = None,
    broadcast: bool = False,
    feature_level: FeatureLevel | None = None,
    parse_parameters=None,
    input_names: Sequence[str] | None = None,
    outputs: tuple[str, ...] | None = None,
) -> Call:
    """Assemble the call DirectML would see from the inputs' data types and shapes, with its parameters.

    An element-wise operator's output has the shape the inputs (broadcast or not) agree on, the first
    input's when they don't, unless `output_shape` gives it (a DxDispatch desc's OutputTensor Sizes): the
    same-Sizes rule then checks it like any tensor. A shaped operator's outputs have the Sizes its shape
    rule computes; Sizes given for them (`output_shapes` by name, or `output_shape` for the first) must
    agree. `parse_parameters(data types by tensor name)` gives the typed parameters (none without it).
    `input_names` names the inputs where the caller knows them (any optional inputs left out); by default
    a call gives every input or only the required ones, in DESC order. `outputs` (from named_outputs): the
    outputs the call asks for, the others being left out as a NULL desc leaves them (None: every output the
    call can give).
    """
    names = _named_inputs(operator, input_names) if input_names is not None else _given_inputs(operator, len(inputs))
    if input_names is None:
        # None stands for an optional input left out in the middle of the list (RNN's BiasTensor before its
        # HiddenInitTensor); a required input cannot be left out.
        for name, given in zip(names, inputs):
            if given is None and name not in dict(operator.optional_inputs):
                raise InputError(f"{operator.name}: {name} is required and cannot be left out (none)")
        names, inputs = zip(*[(n, g) for n, g in zip(names, inputs) if g is not None]) if any(
            g is not None for g in inputs) else ((), ())
    shapes = {name: tuple(int(s) for s in shape) for name, (_, shape) in zip(names, inputs)}
    if broadcast and operator.is_elementwise:
        common = broadcast_shape(operator, shapes)
        shapes = {name: common for name in shapes}
    types = {name: data_type for name, (data_type, _) in zip(names, inputs)}
    by_field = {field_of(name): data_type for name, data_type in types.items()}
    # Ties and parameters see a variadic field's tensors by their own names too (QuantizationTensors[1]).
    by_name = {**types, **by_field}
    out_types = output_data_types(operator, by_name, output_type, feature_level)
    rank = len(next(iter(shapes.values()))) if shapes else None
    parameters = _parsed(parse_parameters, {**by_name, **out_types}, rank)
    if operator.support_by is not None and parse_parameters is not None:
        # The support rows (and with them the output types) depend on a parameter (REDUCE's Function).
        out_types = output_data_types(operator, by_name, output_type, feature_level, parameters)
        parameters = _parsed(parse_parameters, {**by_name, **out_types}, rank)
    if broadcast and operator.input_broadcast is not None:
        shapes = _broadcast_inputs(operator, shapes, parameters)
    tensors = {name: TensorInfo(name, types[name], shapes[name]) for name in names}
    given = dict(output_shapes or {})
    if output_shape is not None:
        stated = tuple(int(s) for s in output_shape)
        # A variadic first output (SPLIT's OutputTensors) given one shape: one output tensor of those Sizes.
        given.setdefault(operator.output, [stated] if operator.output == operator.variadic else stated)
    if operator.is_elementwise:
        out_shape = given.get(operator.output, shapes[names[0]])
        tensors[operator.output] = TensorInfo(operator.output, out_types[operator.output], tuple(out_shape))
    else:
        for name, shape in _rule_shapes(operator, tensors, by_name, out_types, parameters, given, outputs).items():
            tensors[name] = TensorInfo(name, out_types[field_of(name)], shape)
    absent = tuple(name for name in operator.inputs if name not in by_field)
    return Call(operator, tensors, parameters, broadcast, absent)


def _parsed(parse_parameters, data_types: Mapping[str, DataType], rank: int | None) -> dict:
    """The typed parameters (none without a parser); a negative axis is worded with the rank of the first input
    (the tensor DirectML's Axis and Axes fields index), where ONNX's -1 is rank - 1."""
    if parse_parameters is None:
        return {}
    try:
        return parse_parameters(data_types)
    except InputError as error:
        # parameters.NegativeAxes, known by its words(rank): that module is not imported for an operator without
        # parameters (BIT_XOR, ADD), whose runs never reach it.
        words = getattr(error, "words", None)
        if words is None:
            raise
        raise InputError(words(rank)) from None


def _broadcast_inputs(operator: Operator, shapes: dict, parameters) -> dict:
    """The inputs' Sizes once broadcast by the operator's rule (Operator.input_broadcast), the Sizes the call is
    validated at."""
    from ..operators.table.shaped import RuleViolation

    try:
        return dict(operator.input_broadcast.rule(shapes, parameters))
    except RuleViolation as violation:
        raise ValidationError(f"{operator.name}: {violation}") from None


def _rule_shapes(operator: Operator, tensors: Mapping[str, TensorInfo], input_types, out_types, parameters,
                 given: Mapping[str, object], asked: tuple[str, ...] | None = None) -> dict[str, tuple[int, ...]]:
    """The outputs' Sizes from the operator's shape rule, each output tensor by its name: those the call asks for
    (`asked`; None: every one the rule gives)."""
    from ..operators.table.shaped import (RuleViolation, ShapeQuery)  # shaped operators only: element-wise ones go without

    found = list(_size_problems(tensors.values()))
    if found:  # a rule needs sane input Sizes: report the most fundamental problem first
        raise ValidationError(f"{operator.name}: {found[0].message}")
    shapes: dict[str, object] = {}
    for name, tensor in tensors.items():
        if name != field_of(name):
            shapes.setdefault(field_of(name), []).append(tensor.shape)
        else:
            shapes[name] = tensor.shape
    query = ShapeQuery(shapes, {**input_types, **out_types}, parameters, given, asked)
    try:
        computed = operator.shape_rule(query)
    except RuleViolation as violation:
        raise ValidationError(f"{operator.name}: {violation}") from None
    except (IndexError, TypeError, ValueError) as error:
        if isinstance(error, DmlcliError):
            raise
        # A rule reads its inputs' dimensions by position (VALUE_SCALE_2D's channels at dimension 1): an input of a
        # DimensionCount that no feature level takes may break it before the support rows are consulted (issue 34:
        # a 1-D input was an IndexError). Said as the rows would say it; any other failure stays a bug.
        _check_ranks_any_level(operator, tensors)
        raise
    expanded: dict[str, tuple[int, ...]] = {}
    for name in operator.outputs:
        if name not in computed and name in operator.optional_outputs:
            continue  # an optional output the call cannot give: it has none (see Operator.optional_outputs)
        value = computed[name]
        if name == operator.variadic:
            for index, shape in enumerate(value):
                expanded[f"{name}[{index}]"] = tuple(int(s) for s in shape)
        else:
            expanded[name] = tuple(int(s) for s in value)
    for name, stated in given.items():
        if name not in computed:
            continue
        pairs = ([(f"{name}[{i}]", s) for i, s in enumerate(stated)] if name == operator.variadic
                 else [(name, stated)])
        if name == operator.variadic and len(stated) != len(computed[name]):
            raise ValidationError(f"{operator.name}: {len(stated)} {name} given, but its rule gives "
                                  f"{len(computed[name])} for these inputs and parameters")
        for tensor_name, shape in pairs:
            if tuple(shape) != expanded[tensor_name]:
                raise ValidationError(f"{operator.name}: {tensor_name} Sizes {describe_shape(shape)} do not match "
                                      f"the Sizes its rule gives for these inputs and parameters, "
                                      f"{describe_shape(expanded[tensor_name])}")
    if asked is None:
        return expanded
    for name in asked:
        if name not in computed:
            raise ValidationError(f"{operator.name}: this call cannot give {name} (for these inputs and parameters "
                                  f"its rule gives {', '.join(computed) or 'no outputs'})")
    return {name: shape for name, shape in expanded.items() if field_of(name) in asked}


def _check_ranks_any_level(operator: Operator, tensors: Mapping[str, TensorInfo]) -> None:
    """ValidationError for the first tensor whose DimensionCount no feature level of the operator takes."""
    for name, tensor in tensors.items():
        allowed = sorted({dims for row in operator.all_rows() for dims in row.tensors[field_of(name)].dims})
        if len(tensor.shape) not in allowed:
            shown = ", ".join(str(dims) for dims in allowed)
            raise ValidationError(f"{operator.name}: {name} dimension count {len(tensor.shape)} is not supported at "
                                  f"any feature level (allowed: {shown}); no feature level accepts this call")


def named_outputs(operator: Operator, names) -> tuple[str, ...] | None:
    """The outputs a call asks for (outputs=, --outputs): DESC field names, matched in any case, given as a
    sequence or as one text of names between commas, returned in DESC order; None for None (every output the call
    can give). InputError where a name is not one of the operator's outputs, where none is named, or where an
    output that is not _Maybenull_ (Operator.optional_outputs) is left out."""
    if names is None:
        return None
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    elif not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise InputError(f"{operator.name}: outputs must be output names such as "
                         f"{', '.join(operator.outputs)} (found {quoted(repr(names))})")
    by_lower = {name.lower(): name for name in operator.outputs}
    found = set()
    for name in names:
        field = by_lower.get(name.strip().lower())
        if field is None:
            raise InputError(f"{operator.name} has no output {quoted(name)}: its outputs are "
                             f"{', '.join(operator.outputs)}{_optional_outputs_words(operator)}")
        found.add(field)
    if not found:
        raise InputError(f"{operator.name}: no output named; a call gives at least one of "
                         f"{', '.join(operator.outputs)}{_optional_outputs_words(operator)}")
    for name in operator.outputs:
        if name not in found and name not in operator.optional_outputs:
            raise InputError(f"{operator.name}: {name} cannot be left out (DirectML.h does not mark it _Maybenull_)"
                             f"{_optional_outputs_words(operator)}")
    return tuple(name for name in operator.outputs if name in found)


def _optional_outputs_words(operator: Operator) -> str:
    """The end of named_outputs' messages: which outputs a call may leave out."""
    if not operator.optional_outputs:
        return f"; {operator.name} has no optional outputs, so a call gives every one"
    return f"; those that may be left out: {', '.join(operator.optional_outputs)}"


def _named_inputs(operator: Operator, names: Sequence[str]) -> tuple[str, ...]:
    """Inputs named by the caller: each an input of the operator, in DESC order, every required one there."""
    names = tuple(names)
    order = [field_of(name) for name in names]
    optional = {name for name, _ in operator.optional_inputs}
    missing = [name for name in operator.inputs if name not in order and name not in optional]
    unknown = [name for name in order if name not in operator.inputs]
    in_desc_order = order == [name for name in operator.inputs if name in order]
    if unknown or missing or not in_desc_order:
        raise InputError(f"{operator.name} takes {', '.join(operator.inputs)} in that order (those of "
                         f"{', '.join(sorted(optional)) or 'none'} optional); got {', '.join(names) or 'none'}")
    return names


def _given_inputs(operator: Operator, count: int) -> tuple[str, ...]:
    """The inputs a call of `count` tensors gives: all of them, or only the required ones (a variadic
    input takes what the others leave, one or more, as InputTensors[0], InputTensors[1], ...)."""
    if operator.variadic in operator.inputs:
        fixed = len(operator.inputs) - 1
        if count <= fixed:
            raise InputError(f"{operator.name} takes {fixed + 1} or more input tensors ({', '.join(operator.inputs)}, "
                             f"{operator.variadic} being one or more tensors); got {count}")
        names: list[str] = []
        for name in operator.inputs:
            if name == operator.variadic:
                names.extend(f"{name}[{index}]" for index in range(count - fixed))
            else:
                names.append(name)
        return tuple(names)
    if count == len(operator.inputs):
        return operator.inputs
    if operator.optional_inputs and count == len(operator.required_inputs):
        return operator.required_inputs
    if _optional_inputs_trail(operator) and len(operator.required_inputs) < count < len(operator.inputs):
        return operator.inputs[:count]  # the trailing optional inputs after the last one given are left out
    noun = "input tensor" if len(operator.inputs) == 1 else "input tensors"
    if not operator.inputs:
        raise InputError(f"{operator.name} takes no input tensors (its output's Sizes come from --output-shape); "
                         f"got {count}")
    expected = str(len(operator.inputs))
    if operator.optional_inputs:
        expected = f"{len(operator.required_inputs)} or {len(operator.inputs)}"
        if _optional_inputs_trail(operator) and len(operator.inputs) - len(operator.required_inputs) > 1:
            expected = f"{len(operator.required_inputs)} to {len(operator.inputs)}"
    raise InputError(f"{operator.name} takes {expected} {noun} ({', '.join(operator.inputs)}); got {count}")


def _optional_inputs_trail(operator: Operator) -> bool:
    """Whether every optional input comes after every required one (RNN, GRU, LSTM): a call may then give
    any number of inputs from the required ones up, the others being left out (None in the API, `none` on
    the command line, leaves out one in the middle)."""
    required = len(operator.required_inputs)
    return bool(operator.optional_inputs) and operator.inputs[:required] == operator.required_inputs
