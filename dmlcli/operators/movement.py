"""JOIN: entries and kernels of data movement (every result an exact copy of input elements).

Source: DirectML's page for DML_JOIN_OPERATOR_DESC (MicrosoftDocs/sdk-api, ns-directml-dml_join_operator_desc.md).
The kernel is one function for both backends (`xp` is numpy or cupy).
"""

from __future__ import annotations

from ..data_types import ALL11, TYPES_8
from .parameters import IntegerParameter
from .schema import DIMS_1_TO_8, DIMS_4, DIMS_4_TO_5, EXACT, Operator, rows
from .shaped import RuleViolation, ShapeQuery, check_axis, describe_sizes

_JOIN_16 = tuple(t for t in TYPES_8 if t.name not in ("INT8", "UINT8"))


def _join_row(level, dims, types):
    return (level, dims, {"InputTensors": types, "OutputTensor": types})


_JOIN_ROWS = rows(
    _join_row("4_1", DIMS_1_TO_8, ALL11),
    _join_row("3_0", DIMS_4_TO_5, TYPES_8),
    _join_row("2_1", DIMS_4, TYPES_8),
    _join_row("1_0", DIMS_4, _JOIN_16),
)

AXIS = IntegerParameter(field="Axis", help="the dimension to join along (0 to DimensionCount - 1)", default_value=0)


def join_shape(query: ShapeQuery) -> dict:
    shapes = query.shapes_of("InputTensors")
    first = shapes[0]
    axis = check_axis(query.parameters["Axis"], len(first), "Axis", "the InputTensors")
    for index, shape in enumerate(shapes[1:], start=1):
        if len(shape) != len(first) or any(a != b for d, (a, b) in enumerate(zip(shape, first)) if d != axis):
            raise RuleViolation(f"InputTensors[{index}] Sizes {describe_sizes(shape)} and InputTensors[0] Sizes "
                                f"{describe_sizes(first)} differ outside Axis {axis}; every input must have the same "
                                "Sizes except along the join axis")
    joined = sum(shape[axis] for shape in shapes)
    return {"OutputTensor": first[:axis] + (joined,) + first[axis + 1:]}


def join_kernel(xp, inputs, outputs, params):
    return (xp.concatenate(inputs, axis=params["Axis"]),)


JOIN = Operator(
    name="JOIN", enum_value=63, family="data movement", prefix="",
    summary="concatenates one or more input tensors along Axis",
    formula="OutputTensor = InputTensors[0], InputTensors[1], ... one after the other along Axis",
    introduced=_JOIN_ROWS[-1].level, inputs=("InputTensors",), support=_JOIN_ROWS,
    same_data_type=("InputTensors", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(AXIS,), native_encoding=True, variadic="InputTensors", shape_rule=join_shape,
    array_kernel=join_kernel, exactness=EXACT, dask_layout="concatenate",
    notes=("InputTensors is an array of one or more tensors (InputCount in DirectML's desc): give them as the "
           "inputs, in order. Joining one tensor copies it.",),
)

OPERATORS = (JOIN,)
