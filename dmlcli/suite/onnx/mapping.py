"""An ONNX case through the table: the DirectML call that computes it, or the DirectML reason it cannot.

`plan(case)` gives a `Planned` call (the operator, API keywords, inputs, the output type and Sizes the
caller states, and `finish`, which turns DirectML's outputs into ONNX's) or a `Skipped` reason. Besides
each adapter's own conditions, every mapped case is checked here against the operator's support rows
(a data type or a rank that no feature level takes) and DirectML's rule that no size is zero.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np

from ...errors import DmlcliError, InputError
from ..case import Case
from .adapters import MappingError, OnnxCall, Prepared, check_attribute_kinds, data_input, in_index_order, onnx_call
from .table import TABLE, Entry, entry_for

SIZES = ".Sizes"
# ONNX's backend tests compare with np.testing.assert_allclose(rtol=1e-3, atol=1e-7) (onnx/backend/test/runner):
# the rule for a case whose expected values the ONNX test writes rounded (the table's rounded_expected).
ROUNDED_RTOL, ROUNDED_ATOL = 1e-3, 1e-7


@dataclass(frozen=True)
class Skipped:
    reason: str


@dataclass
class Planned:
    operator: object  # dmlcli's Operator entry
    keywords: dict  # API keywords (snake_case of the DESC fields, or the table's `keywords`)
    inputs: list[np.ndarray]
    output_dtype: str | None = None
    output_shapes: dict = field(default_factory=dict)  # an output's Sizes by tensor name, where stated
    broadcast: bool = False
    finish: Callable[[Sequence[np.ndarray]], tuple] = tuple
    tolerance: object = None  # a Rule for a case whose expected values ONNX prints rounded
    # ONNX's outputs (or the expected ones) in the order they are compared in: as they are, or, where ONNX leaves
    # the order free (the entry's free_order), each slice ordered by index. `finish` applies it already.
    arrange: Callable[[Sequence[np.ndarray]], tuple] = tuple


class TableError(Exception):
    """The table names a DESC field that dmlcli's entry for the operator does not have (fix at merge)."""


def directml_operator(entry: Entry):
    """dmlcli's entry for the DirectML operator the table names (None where no DirectML operator computes it)."""
    if entry.directml is None:
        return None
    from ...operators import find_operator

    return find_operator(entry.directml)


def keyword_for(entry: Entry, operator, destination: str) -> str:
    """The API keyword that sets a DESC field of `operator`: the table's override, else the parameter whose
    field it is (its snake_case name)."""
    if destination in entry.keywords:
        return entry.keywords[destination]
    for parameter in operator.parameters:
        if parameter.field == destination:
            return parameter.options[0]
    raise TableError(f"ONNX table entry {entry.onnx_op}: dmlcli's {operator.name} has no parameter for the DESC "
                     f"field {destination} (its parameters: "
                     f"{', '.join(p.field for p in operator.parameters) or 'none'}); fix the entry's fields or keywords")


def plan(case: Case) -> Planned | Skipped:
    """The DirectML call for an ONNX case, or why DirectML cannot compute it. InputError for a case the
    table cannot read (an unknown ONNX operator, a malformed ONNX call, a table out of step with dmlcli)."""
    return plan_call(onnx_call(case), case.all_expected, case.document.get("case_name", ""))


def entry_of(call: OnnxCall) -> Entry:
    """The table's entry for the call (InputError where the table has none)."""
    entry = entry_for(call)
    if entry is None:
        raise InputError(f"ONNX operator {call.op!r} has no entry in dmlcli's ONNX table "
                         "(dmlcli/suite/onnx/table.py)")
    return entry


def cannot_reason(entry: Entry, call: OnnxCall, conditions=None) -> str | None:
    """The DirectML reason the entry cannot compute the call (its own conditions, or the `conditions` given), or
    None. What DirectML can never compute says so first, whether or not dmlcli has the operator yet. InputError for
    a malformed call."""
    try:
        for condition in entry.cannot if conditions is None else conditions:
            if condition.when(call):
                return condition.describe(call)
    except MappingError as error:
        raise InputError(f"ONNX {call.op}: {error}") from None
    return None


def prepare(entry: Entry, call: OnnxCall) -> Prepared:
    """The entry's adapter on the call (InputError for a malformed call)."""
    with _malformed_calls(call):
        return entry.adapter(call, dict(entry.fixed))


def viewed(entry: Entry, call: OnnxCall) -> tuple:
    """The entry's view on the call: its outputs, views of its inputs (InputError for a malformed call, as
    `prepare`)."""
    with _malformed_calls(call):
        return entry.view(call)


@contextlib.contextmanager
def _malformed_calls(call: OnnxCall) -> Iterator[None]:
    """An adapter's or a view's failure on the call as the call's InputError: its MappingError in its own words; a
    value of the right kind that no ONNX call holds (a NaN where a size follows, an index past a list) where no
    adapter words it (issue 34's rule, which plan_call applies to a node test's case), never an internal error."""
    try:
        yield
    except MappingError as error:
        raise InputError(f"ONNX {call.op}: {error}") from None
    except DmlcliError:
        raise
    except (TypeError, ValueError, ArithmeticError, LookupError) as error:
        raise InputError(f"ONNX {call.op}: dmlcli cannot map these attributes and inputs onto a DirectML call "
                         f"({type(error).__name__}: {error})") from None


def plan_call(call: OnnxCall, expected: Sequence[np.ndarray] = (), case_name: str = "") -> Planned | Skipped:
    """The DirectML call for an ONNX call (a node test's, or a model's node), or why DirectML cannot compute it:
    the entry's own conditions and those where ONNX Runtime's DirectML provider gives other values than ONNX
    defines (a node test cannot match them), then the operator's support rows (a data type or rank no level takes,
    a size of zero among the inputs or the `expected` outputs)."""
    with _malformed_calls(call):  # a value no ONNX call holds (a size of 10^300): this call's error (issue 34)
        check_attribute_kinds(call)
        entry = entry_of(call)
        if entry.directml is None:
            return Skipped(entry.reason)
        reason = cannot_reason(entry, call, entry.cannot + entry.differs)
        if reason is not None:
            return Skipped(reason)
        operator = directml_operator(entry)
        prepared = prepare(entry, call)
    unsupported = unsupported_reason(operator, prepared, expected)
    if unsupported is not None:
        return Skipped(unsupported)
    try:
        planned = planned_call(entry, operator, prepared, call)
    except TableError as error:
        raise InputError(str(error)) from None
    rounded = entry.rounded_expected.get(case_name)
    if rounded is not None:
        from ...checking.comparison import Rule

        planned.tolerance = Rule("allclose", ROUNDED_ATOL, f"the ONNX table: {rounded}", rtol=ROUNDED_RTOL)
    return planned


def arrangement(entry: Entry, call: OnnxCall) -> Callable[[Sequence[np.ndarray]], tuple]:
    """How the call's outputs are ordered to be compared (see Planned.arrange)."""
    axis = None if entry.free_order is None else entry.free_order(call)
    if axis is None:
        return tuple
    return lambda outputs: in_index_order(outputs, axis) + tuple(outputs[2:])


def planned_call(entry: Entry, operator, prepared: Prepared, call: OnnxCall | None = None) -> Planned:
    """The Planned call for a prepared one: DESC fields as API keywords, outputs' Sizes, the arrangement."""
    planned = _planned(entry, operator, prepared)
    if call is not None:
        arrange = arrangement(entry, call)
        if arrange is not tuple:
            finish = planned.finish
            planned.finish, planned.arrange = (lambda outputs: arrange(finish(outputs))), arrange
    return planned


def _planned(entry: Entry, operator, prepared: Prepared) -> Planned:
    keywords, shapes = {}, {}
    for destination, value in prepared.values.items():
        if destination.endswith(SIZES) and destination not in entry.keywords:
            shapes[destination[:-len(SIZES)]] = value
        elif destination in operator.inputs:
            continue  # a tensor: the adapter gave it among the inputs, in DESC order
        else:
            keywords[keyword_for(entry, operator, destination)] = value
    if prepared.outputs is not None:
        keywords["outputs"] = prepared.outputs
    return Planned(operator, keywords, prepared.inputs, prepared.output_dtype, shapes, prepared.broadcast,
                   prepared.finish)


def _input_fields(operator, count: int) -> list[str]:
    from ...calls.validation import _given_inputs, field_of

    try:
        return [field_of(name) for name in _given_inputs(operator, count)]
    except InputError:
        return []  # the engine reports a wrong input count as the case's failure


def unsupported_reason(operator, prepared: Prepared, expected: Sequence[np.ndarray] = ()) -> str | None:
    """A DirectML fact that rules the call out at every feature level: a zero size, a rank or a data type that
    none of the operator's support rows takes (the rows of the call's Function, for REDUCE)."""
    from ...data_types import from_numpy

    for label, array in [*(("input", a) for a in prepared.inputs), *(("expected output", e) for e in expected)]:
        if array is not None and 0 in array.shape:
            return (f"ONNX's {label} has Sizes {list(array.shape)}; DirectML rejects a size of zero in any "
                    "dimension")
    typed = {}
    if operator.support_by is not None and operator.support_by in prepared.values:
        typed[operator.support_by] = str(prepared.values[operator.support_by]).upper()
    rows = operator.rows_for(typed or None)
    for name, array in zip(_input_fields(operator, len(prepared.inputs)), prepared.inputs):
        if array is None:
            continue  # an optional input left out in the middle
        try:
            data_type = from_numpy(array.dtype)
        except InputError:
            return f"DirectML has no data type for ONNX's {array.dtype} tensors"
        function = f" ({typed[operator.support_by]})" if typed else ""
        if not any(data_type in row.tensors[name].data_types for row in rows):
            newest = max(rows, key=lambda row: row.level)
            return (f"no feature level of DirectML's {operator.name}{function} takes {data_type.name} for {name} "
                    f"(its newest row, {newest.level.short}, allows {newest.tensors[name].describe_data_types()})")
        if not any(array.ndim in row.tensors[name].dims for row in rows):
            return (f"no feature level of DirectML's {operator.name} takes {array.ndim} dimensions for {name}")
    return None


def resize_mapping(onnx_op: str, attributes, input_names, inputs, expected_shape):
    """For tests: the API keywords of the DirectML operator the table maps ONNX's Resize or Upsample onto
    (RESAMPLE3, RESAMPLE2) and the data for a case, or the reason DirectML cannot compute it."""
    given = iter(inputs)
    call = OnnxCall(onnx_op, tuple(None if not name else next(given) for name in input_names), dict(attributes))
    entry = TABLE[onnx_op]
    for condition in entry.cannot + entry.differs:  # a node test: ONNX's values, where the provider's differ
        if condition.when(call):
            return condition.describe(call)
    planned = _planned(entry, directml_operator(entry), entry.adapter(call, dict(entry.fixed)))
    shape = tuple(planned.output_shapes["OutputTensor"])
    if shape != tuple(expected_shape):
        raise MappingError(f"the mapped output Sizes {shape} are not ONNX's {tuple(expected_shape)}")
    return {**planned.keywords, "output_shape": shape}, data_input(call)
