"""The Python API: `run` and `validate`, which the command line is a thin layer over."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .data_types import DataType, from_numpy, parse_data_type
from .errors import DmlcliWarning, InputError
from .feature_levels import FeatureLevel, parse_feature_level
from .operators import Operator, find_operator
from .validation import Call, Verdict, build_call, check


@dataclass(frozen=True)
class Result:
    """A finished run: the output and the validated call that produced it."""

    output: np.ndarray
    verdict: Verdict
    backend: str


def resolve_parameters(operator: Operator, given: Mapping[str, object]) -> dict[str, str]:
    """The operator's parameters by DESC field name, from options named like `infinity_mode`.

    A value given for a parameter the operator does not have is an error, except None.
    """
    known = {p.option: p for p in operator.parameters}
    for option, value in given.items():
        if value is not None and option not in known:
            raise InputError(f"{operator.name} has no {option.replace('_', '-')} parameter")
    return {p.name: p.parse(given[p.option] if given.get(p.option) is not None else p.default)
            for p in operator.parameters}


def plan(
    operator: str | Operator,
    inputs: list[tuple[DataType, tuple[int, ...]]],
    *,
    feature_level=None,
    parameters: Mapping[str, object] | None = None,
    output_dtype=None,
    broadcast: bool = False,
) -> Verdict:
    """Validate a call described by its inputs' data types and shapes (no data needed)."""
    op = find_operator(operator)
    level: FeatureLevel = parse_feature_level(feature_level)
    output_type = None if output_dtype is None else _data_type_of(output_dtype)
    call: Call = build_call(op, inputs, parameters=resolve_parameters(op, parameters or {}),
                            output_type=output_type, broadcast=broadcast)
    return check(call, level)


def _data_type_of(value) -> DataType:
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        return parse_data_type(value)
    return from_numpy(np.dtype(value))


def _as_array(value, position: int) -> np.ndarray:
    array = np.asarray(value)
    try:
        from_numpy(array.dtype)
    except InputError as error:
        raise InputError(f"input {position}: {error}") from None
    return array


def _api_parameters(operator: Operator, infinity_mode) -> dict:
    # The API's infinity_mode defaults to "either" for every operator; only a deliberate
    # other value for an operator without the parameter is an error.
    has_mode = any(p.option == "infinity_mode" for p in operator.parameters)
    if not has_mode and str(infinity_mode).strip().lower() == "either":
        return {}
    return {"infinity_mode": infinity_mode}


def validate(op, *arrays, feature_level=None, infinity_mode="either", broadcast=False, output_dtype=None) -> Verdict:
    """Check a call without running it; raise dmlcli.ValidationError if DirectML would reject it.

    Returns the Verdict, whose `lowest_feature_level` is the first level that accepts the call.
    """
    operator = find_operator(op)
    arrays = [_as_array(a, i + 1) for i, a in enumerate(arrays)]
    return plan(operator, [(from_numpy(a.dtype), a.shape) for a in arrays], feature_level=feature_level,
                parameters=_api_parameters(operator, infinity_mode), output_dtype=output_dtype, broadcast=broadcast)


def execute(verdict: Verdict, arrays, *, backend="cpu") -> Result:
    """Run an already validated call on `backend` ("cpu", "gpu" or "auto")."""
    from .backends import get_backend

    call = verdict.call
    engine = backend if hasattr(backend, "execute") else get_backend(backend)
    out = call.output
    output = engine.execute(call.operator, arrays, out.shape, out.data_type.numpy_dtype, call.parameters)
    _warn_shift_counts(call, arrays)
    return Result(output, verdict, engine.name)


def _warn_shift_counts(call: Call, arrays) -> None:
    op = call.operator
    if op.shift_count_input is None:
        return
    counts = arrays[op.inputs.index(op.shift_count_input)]
    too_big = count_large_shifts(call, counts, broadcast_to=call.output.shape)
    if too_big:
        warnings.warn(shift_count_warning(call, too_big), DmlcliWarning, stacklevel=3)


def count_large_shifts(call: Call, counts, *, broadcast_to=None) -> int:
    """How many of `counts` (the shift-count input, or a chunk of it) are at or past the element width.

    With `broadcast_to`, each count is counted once per output element it reaches.
    """
    width = call.tensors[call.operator.shift_count_input].data_type.bits
    too_big = np.asarray(counts) >= width
    if broadcast_to is not None:
        too_big = np.broadcast_to(too_big, broadcast_to)
    return int(np.count_nonzero(too_big))


def shift_count_warning(call: Call, too_big: int) -> str:
    """The warning's text; the streaming executor counts chunk by chunk and says the same."""
    width = call.tensors[call.operator.shift_count_input].data_type.bits
    return (f"{call.operator.name}: {too_big} of {int(np.prod(call.output.shape))} shift counts are >= the "
            f"element width {width}; dmlcli gives 0 for them (DirectML hardware is reported to mask such counts)")


def run(op, *arrays, feature_level=None, infinity_mode="either", broadcast=False, output_dtype=None,
        backend="cpu") -> np.ndarray:
    """Validate and run a DirectML element-wise operator; return the output as a NumPy array.

    Raises dmlcli.ValidationError when the call breaks the operator's rules at `feature_level`
    (default: the newest, 6_4), and dmlcli.BackendUnavailableError when `backend` cannot run.
    """
    operator = find_operator(op)
    arrays = [_as_array(a, i + 1) for i, a in enumerate(arrays)]
    verdict = validate(operator, *arrays, feature_level=feature_level, infinity_mode=infinity_mode,
                       broadcast=broadcast, output_dtype=output_dtype)
    return execute(verdict, arrays, backend=backend).output
