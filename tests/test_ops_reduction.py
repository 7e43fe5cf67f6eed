"""The reduction family: REDUCE, ARGMIN/ARGMAX, the axis-wise activations, CUMULATIVE_SUMMATION/PRODUCT.

Each operator against: a second transcription of its support table (spot checks by level), every rule its
shape rule enforces (exit 3 on the command line), an independent reference written here with plain Python
loops over indices (hypothesis draws shapes, axes and values), the edge cases its notes promise (ties, NaN,
integer wrap-around, FLOAT16 computed in FLOAT32), the pages' own examples, and ONNX's node-test vectors.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.api import plan as api_plan
from dmlcli.cli import cli
from dmlcli.checking.comparison import rule_for, ulp_distance
from dmlcli.data_types import parse_data_type
from dmlcli.io.json_tensor import tensor_from_object
from dmlcli.operators.reduction import entries as module
import shaped_cli  # noqa: E402 - tests/ is on the path

from conftest import SHARED, shared_params

F32, F16 = np.float32, np.float16
NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------- the entries

ENTRIES = {  # key: (DML_OPERATOR_TYPE value, introduced, exactness, parameters' fields)
    "REDUCE": (55, "1_0", "approximate", ("Function", "Axes")),
    "ARGMIN": (137, "3_0", "exact", ("Axes", "AxisDirection")),
    "ARGMAX": (138, "3_0", "exact", ("Axes", "AxisDirection")),
    "ACTIVATION_SOFTMAX": (48, "1_0", "approximate", ()),
    "ACTIVATION_SOFTMAX1": (158, "5_1", "approximate", ("Axes",)),
    "ACTIVATION_LOG_SOFTMAX": (41, "1_0", "approximate", ()),
    "ACTIVATION_LOG_SOFTMAX1": (159, "5_1", "approximate", ("Axes",)),
    "ACTIVATION_HARDMAX": (36, "1_0", "exact", ()),
    "ACTIVATION_HARDMAX1": (160, "5_1", "exact", ("Axes",)),
    "CUMULATIVE_SUMMATION": (105, "2_1", "composite", ("Axis", "AxisDirection", "HasExclusiveSum")),
    "CUMULATIVE_PRODUCT": (145, "3_1", "composite", ("Axis", "AxisDirection", "HasExclusiveProduct")),
}


def test_the_family_holds_each_operator_once():
    assert sorted(op.key for op in module.OPERATORS) == sorted(ENTRIES)
    assert [name for name, members in dmlcli.operators.FAMILIES if members == module.OPERATORS] == ["reduction"]


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_entry(key):
    op = dmlcli.find_operator(key)
    value, introduced, exactness, fields = ENTRIES[key]
    assert op.key == key and op.enum_value == value and op.family == "reduction"
    assert op.introduced.short == introduced
    assert op.exactness == exactness
    assert tuple(p.field for p in op.parameters) == fields
    assert op.notes and not op.is_elementwise
    assert (op.tolerance is None) == (exactness == "exact")
    if op.tolerance is not None:
        assert "WebNN" in op.tolerance.source and op.tolerance_scale is not None


def test_spellings():
    assert dmlcli.find_operator("softmax").key == "ACTIVATION_SOFTMAX"
    assert dmlcli.find_operator("activation_log_softmax1").key == "ACTIVATION_LOG_SOFTMAX1"
    assert dmlcli.find_operator("DML_OPERATOR_ACTIVATION_HARDMAX").key == "ACTIVATION_HARDMAX"
    assert dmlcli.find_operator("cumulative-summation").key == "CUMULATIVE_SUMMATION"
    assert dmlcli.find_operator("activation_softmax").cli_name == "activation_softmax"
    assert dmlcli.find_operator("argmax").cli_name == "argmax"


# ---------------------------------------------------------------- support tables, a second transcription

# (operator, parameters, input type, output type or None, rank, lowest level that accepts it or None)
SUPPORT = [
    ("reduce", {"function": "sum"}, "float32", None, 4, "1_0"),
    ("reduce", {"function": "sum"}, "float16", None, 3, "3_0"),
    ("reduce", {"function": "sum"}, "int32", None, 4, "2_1"),
    ("reduce", {"function": "multiply"}, "uint32", None, 2, "3_0"),
    ("reduce", {"function": "sum"}, "int64", None, 2, "5_0"),
    ("reduce", {"function": "sum"}, "int16", None, 4, None),
    ("reduce", {"function": "l1"}, "int32", None, 2, "5_0"),
    ("reduce", {"function": "sum_square"}, "uint64", None, 4, "5_0"),
    ("reduce", {"function": "l1"}, "float16", None, 4, "1_0"),
    ("reduce", {"function": "average"}, "int32", None, 2, None),
    ("reduce", {"function": "l2"}, "float32", None, 5, "3_0"),
    ("reduce", {"function": "log_sum_exp"}, "float16", None, 4, "1_0"),
    ("reduce", {"function": "max"}, "int8", None, 2, "3_0"),
    ("reduce", {"function": "min"}, "int8", None, 4, "3_0"),
    ("reduce", {"function": "min"}, "uint32", None, 4, "2_1"),
    ("reduce", {"function": "max"}, "uint64", None, 3, "5_0"),
    ("reduce", {"function": "argmax"}, "float32", "uint32", 4, "1_0"),
    ("reduce", {"function": "argmin"}, "int8", "uint32", 4, "2_1"),
    ("reduce", {"function": "argmax"}, "float32", "int64", 4, "3_0"),
    ("reduce", {"function": "argmax"}, "int64", "uint32", 2, "4_1"),
    ("reduce", {"function": "argmax"}, "float32", "int16", 4, None),
    ("argmin", {}, "float32", "uint32", 4, "3_0"),
    ("argmin", {}, "uint16", "int32", 7, "3_0"),
    ("argmax", {}, "int64", "uint64", 2, "4_1"),
    ("argmax", {}, "float32", "uint16", 2, None),
    ("activation_softmax", {}, "float32", None, 4, "1_0"),
    ("activation_softmax", {}, "float16", None, 5, "2_0"),
    ("activation_softmax", {}, "float32", None, 2, "3_0"),
    ("activation_log_softmax", {}, "float16", None, 4, "1_0"),
    ("activation_hardmax", {}, "float32", None, 1, "3_0"),
    ("activation_hardmax", {}, "int32", None, 4, None),
    ("activation_softmax1", {}, "float32", None, 4, "5_1"),
    ("activation_log_softmax1", {}, "float16", None, 8, "5_1"),
    ("activation_hardmax1", {}, "float32", None, 3, "5_1"),
    ("cumulative_summation", {}, "float32", None, 4, "2_1"),
    ("cumulative_summation", {}, "uint32", None, 4, "2_1"),
    ("cumulative_summation", {}, "float16", None, 2, "4_0"),
    ("cumulative_summation", {}, "int64", None, 4, "5_0"),
    ("cumulative_summation", {}, "int16", None, 4, None),
    ("cumulative_product", {}, "float32", None, 4, "3_1"),
    ("cumulative_product", {}, "int32", None, 3, "4_0"),
    ("cumulative_product", {}, "uint64", None, 1, "5_0"),
    ("cumulative_product", {}, "uint8", None, 4, None),
]
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0"]


def plan(op, inputs, **kwargs):
    """api.plan with the inputs' data types by name."""
    return api_plan(op, [(parse_data_type(t), shape) for t, shape in inputs], **kwargs)


def _shape(rank: int) -> tuple[int, ...]:
    # Leading sizes of 1 keep the softmax family's effective rank at 2 or below; the last two vary.
    return (1,) * (rank - 2) + (2, 3) if rank >= 2 else (3,)


@pytest.mark.parametrize("name, params, in_type, out_type, rank, lowest", SUPPORT,
                         ids=[f"{c[0]}-{c[1].get('function', '')}-{c[2]}-{c[3]}-{c[4]}" for c in SUPPORT])
def test_support_rows(name, params, in_type, out_type, rank, lowest):
    inputs = [(in_type, _shape(rank))]
    if lowest is None:
        with pytest.raises(dmlcli.ValidationError, match="no feature level accepts this call"):
            plan(name, inputs, output_dtype=out_type, **params)
        return
    assert plan(name, inputs, output_dtype=out_type, **params).lowest_feature_level.short == lowest
    below = LEVELS[LEVELS.index(lowest) - 1] if lowest != "1_0" else None
    if below is not None:
        with pytest.raises(dmlcli.ValidationError, match=f"supported from DML_FEATURE_LEVEL_{lowest}"):
            plan(name, inputs, output_dtype=out_type, feature_level=below, **params)


def test_reduce_output_type_follows_the_function():
    assert plan("reduce", [("float16", (2, 3))], function="sum").call.output.data_type.name == "FLOAT16"
    assert plan("reduce", [("float16", (2, 3))], function="argmax").call.output.data_type.name == "UINT32"
    with pytest.raises(dmlcli.ValidationError, match="InputTensor data type FLOAT32 and OutputTensor data type "
                                                     "INT32 differ"):
        plan("reduce", [("float32", (2, 3))], function="sum", output_dtype="int32")
    assert plan("argmin", [("int8", (2, 3))], output_dtype="int64").call.output.data_type.name == "INT64"


# ---------------------------------------------------------------- rules: every RuleViolation, exit 3

RULES = [
    (["reduce", "[[1,2],[3,4]]", "--dtype", "float32", "--axes", "2"],
     "REDUCE: Axes 2 is out of range for InputTensor's 2 dimensions (allowed: 0 to 1"),
    (["reduce", "[[1,2],[3,4]]", "--dtype", "float32", "--axes", "1,1"], "REDUCE: Axes [1, 1] names an axis twice"),
    (["argmax", "[[1,2],[3,4]]", "--dtype", "float32", "--axes", ""], "ARGMAX: Axes is empty"),
    (["argmin", "[1,2]", "--dtype", "float32", "--axes", "1"], "ARGMIN: Axes 1 is out of range"),
    (["softmax", "[[[1,2],[3,4]],[[1,2],[3,4]]]", "--dtype", "float32"],
     "SOFTMAX: InputTensor Sizes [2, 2, 2] have an effective rank of 3"),
    (["activation_hardmax", "[[[1,2]],[[3,4]]]", "--dtype", "float32"], "HARDMAX: InputTensor Sizes [2, 1, 2] have "
                                                                         "an effective rank of 3"),
    (["activation_log_softmax1", "[[1,2]]", "--dtype", "float32", "--axes", "0,5"],
     "LOG_SOFTMAX1: Axes 5 is out of range"),
    (["cumulative_product", "[[1,2]]", "--dtype", "float32", "--axis", "2"],
     "CUMULATIVE_PRODUCT: Axis 2 is out of range for InputTensor's 2 dimensions"),
    (["reduce", "[[1,2]]", "--dtype", "int32", "--function", "average"],
     "REDUCE: InputTensor data type INT32 is not supported at DML_FEATURE_LEVEL_6_4"),
    (["reduce", "[[1,2]]", "--dtype", "float32", "--function", "sum_square", "--feature-level", "1_0"],
     "REDUCE: InputTensor dimension count 2 is not supported at DML_FEATURE_LEVEL_1_0"),
    (["activation_softmax1", "[[1,2]]", "--dtype", "float32", "--feature-level", "5_0"],
     "SOFTMAX1: the operator is not available at DML_FEATURE_LEVEL_5_0 (introduced in DML_FEATURE_LEVEL_5_1)"),
]


@pytest.mark.parametrize("args, message", RULES, ids=[" ".join(a[:1] + a[2:]) for a, _ in RULES])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_softmax_effective_rank_skips_leading_ones_only():
    assert plan("softmax", [("float32", (1, 1, 2, 3))]).lowest_feature_level.short == "1_0"
    assert plan("softmax", [("float32", (1, 1, 1, 1))]).lowest_feature_level.short == "1_0"
    with pytest.raises(dmlcli.ValidationError, match="effective rank of 3"):
        plan("softmax", [("float32", (2, 1, 3))])


def test_a_stated_output_size_must_match_the_rule():
    from dmlcli import engine

    req = engine.request("reduce", axes=[1], output_shape=(2, 2))
    with pytest.raises(dmlcli.ValidationError, match=r"REDUCE: OutputTensor Sizes \[2, 2\] do not match the Sizes "
                                                     r"its rule gives for these inputs and parameters, \[2, 1\]"):
        engine.plan(req, [(dmlcli.data_types.FLOAT32, (2, 2))])


# ---------------------------------------------------------------- an independent reference (plain loops)

def groups(shape, axes):
    """For each output position (reduced axes at 0): the input positions of its group, row-major over the reduced
    axes in dimension order."""
    axes = sorted(axes)
    kept = [range(1) if axis in axes else range(size) for axis, size in enumerate(shape)]
    for out in itertools.product(*kept):
        members = []
        for inner in itertools.product(*[range(shape[axis]) for axis in axes]):
            position = list(out)
            for axis, index in zip(axes, inner):
                position[axis] = index
            members.append(tuple(position))
        yield out, members


def wrap(value: int, dtype) -> int:
    info = np.iinfo(dtype)
    span = 1 << info.bits
    value %= span
    return value - span if info.min < 0 and value > info.max else value


def ref_reduce(x: np.ndarray, axes, function: str, out_dtype) -> np.ndarray:
    out_shape = tuple(1 if axis in axes else size for axis, size in enumerate(x.shape))
    out = np.zeros(out_shape, out_dtype)
    integer = x.dtype.kind in "iu"
    for position, members in groups(x.shape, axes):
        values = [int(x[m]) if integer else float(x[m]) for m in members]
        if function in ("ARGMAX", "ARGMIN"):
            out[position] = ref_arg(values, function == "ARGMAX", last=False)
            continue
        if function == "SUM":
            result = sum(values)
        elif function == "MULTIPLY":
            result = math.prod(values)
        elif function == "MAX":
            kept = [v for v in values if v == v]
            result = max(kept) if kept else NAN
        elif function == "MIN":
            kept = [v for v in values if v == v]
            result = min(kept) if kept else NAN
        elif function == "AVERAGE":
            result = sum(values) / len(values)
        elif function == "L1":
            result = sum(abs(v) for v in values)
        elif function == "L2":
            result = math.sqrt(sum(v * v for v in values))
        elif function == "SUM_SQUARE":
            result = sum(v * v for v in values)
        elif function == "LOG_SUM":
            result = math.log(sum(values))
        else:  # LOG_SUM_EXP
            result = math.log(sum(math.exp(v) for v in values))
        out[position] = wrap(result, out_dtype) if integer else result
    return out


def ref_arg(values, largest: bool, last: bool) -> int:
    order = range(len(values) - 1, -1, -1) if last else range(len(values))
    best = None
    for index in order:
        value = values[index]
        if value != value:
            continue
        if best is None or (value > values[best] if largest else value < values[best]):
            best = index
    if best is None:  # only NaN: the first index (the last for DECREASING)
        return len(values) - 1 if last else 0
    return best


def ref_arg_tensor(x, axes, largest, last, out_dtype):
    out_shape = tuple(1 if axis in axes else size for axis, size in enumerate(x.shape))
    out = np.zeros(out_shape, out_dtype)
    integer = x.dtype.kind in "iu"
    for position, members in groups(x.shape, list(axes)):
        out[position] = ref_arg([int(x[m]) if integer else float(x[m]) for m in members], largest, last)
    return out


def ref_softmax(x, axes, kind: str) -> np.ndarray:
    out = np.zeros(x.shape, np.float64)
    for _, members in groups(x.shape, list(axes)):
        values = [float(x[m]) for m in members]
        if kind == "hardmax":
            winner = ref_arg(values, True, False)
            for index, m in enumerate(members):
                out[m] = 1.0 if index == winner else 0.0
            continue
        peak = max(values)
        total = sum(math.exp(v - peak) for v in values)
        for v, m in zip(values, members):
            out[m] = (v - peak) - math.log(total) if kind == "log" else math.exp(v - peak) / total
    return out


def ref_cumulative(x, axis, reverse, exclusive, product) -> np.ndarray:
    out = np.zeros(x.shape, x.dtype)
    integer = x.dtype.kind in "iu"
    n = x.shape[axis]
    for position, members in groups(x.shape, [axis]):
        order = list(reversed(members)) if reverse else members
        tally = 1 if product else 0
        for m in order:
            value = int(x[m]) if integer else float(x[m])
            if exclusive:
                out[m] = wrap(tally, x.dtype) if integer else tally
            tally = tally * value if product else tally + value
            if not exclusive:
                out[m] = wrap(tally, x.dtype) if integer else tally
    assert n >= 1
    return out


def assert_close(got: np.ndarray, expected: np.ndarray, op, call, context=""):
    """Integers exactly; floats within the operator's rule for this call (NaN matches NaN)."""
    assert got.dtype == expected.dtype and got.shape == expected.shape, context
    if got.dtype.kind != "f":
        assert np.array_equal(got, expected), context
        return
    rule = rule_for(op, got.dtype, call=call)
    both_nan = np.isnan(got) & np.isnan(expected)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), context
    distance = np.where(both_nan, 0, ulp_distance(got, expected))
    limit = rule.limit if rule.kind == "ulp" else 0
    assert distance.max(initial=0) <= limit, f"{context}: {distance.max()} ULP > {limit} ({rule.kind})"


# ---------------------------------------------------------------- hypothesis: shapes, axes, values

@st.composite
def shapes_and_axes(draw, max_rank=4):
    rank = draw(st.integers(1, max_rank))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return shape, tuple(axes)


def draw_array(draw, shape, dtype, low=-4.0, high=4.0):
    size = math.prod(shape)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        values = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=size, max_size=size))
        return np.array(values, dtype).reshape(shape)
    # Quarter steps: exact in FLOAT16, and ties among equal values are common.
    values = draw(st.lists(st.integers(int(low * 4), int(high * 4)), min_size=size, max_size=size))
    return (np.array(values, np.float64) / 4).astype(dtype).reshape(shape)


REDUCE_TYPES = {  # the types each function takes at 6_4, as the page groups them
    "SUM": ["float32", "float16", "int32", "uint32", "int64", "uint64"],
    "MULTIPLY": ["float32", "float16", "int32", "uint32", "int64", "uint64"],
    "L1": ["float32", "float16", "int32", "uint32", "int64", "uint64"],
    "SUM_SQUARE": ["float32", "float16", "int32", "uint32", "int64", "uint64"],
    "MAX": ["float32", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"],
    "MIN": ["float32", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"],
    "AVERAGE": ["float32", "float16"], "L2": ["float32", "float16"], "LOG_SUM": ["float32", "float16"],
    "LOG_SUM_EXP": ["float32", "float16"],
    "ARGMAX": ["float32", "float16", "int8", "uint16", "int32", "uint64"],
    "ARGMIN": ["float32", "float16", "uint8", "int16", "uint32", "int64"],
}
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("function", sorted(REDUCE_TYPES))
@SETTINGS
@given(data=st.data())
def test_reduce_against_the_reference(function, data):
    shape, axes = data.draw(shapes_and_axes())
    dtype = data.draw(st.sampled_from(REDUCE_TYPES[function]))
    # Sums of positive values (no cancellation, which no ULP figure covers); LOG_SUM needs them positive.
    positive = function in ("SUM", "AVERAGE", "L1", "L2", "SUM_SQUARE", "LOG_SUM")
    x = draw_array(data.draw, shape, dtype, low=0.25 if positive else -4.0)
    out_dtype = "uint32" if function.startswith("ARG") else None
    verdict = dmlcli.validate("reduce", x, function=function, axes=list(axes), output_dtype=out_dtype)
    got = dmlcli.run("reduce", x, function=function, axes=list(axes), output_dtype=out_dtype)
    expected = ref_reduce(x, axes, function, got.dtype)
    assert_close(got, expected, verdict.call.operator, verdict.call, f"{function} {dtype} {shape} {axes}")


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@SETTINGS
@given(data=st.data())
def test_arg_against_the_reference(name, data):
    shape, axes = data.draw(shapes_and_axes())
    dtype = data.draw(st.sampled_from(["float32", "float16", "int8", "uint8", "int32", "uint64", "int64"]))
    x = draw_array(data.draw, shape, dtype, low=-1.0, high=1.0)  # few values: many ties
    if dtype.startswith("float") and data.draw(st.booleans()):
        x.flat[data.draw(st.integers(0, x.size - 1))] = np.nan
    direction = data.draw(st.sampled_from(["increasing", "decreasing"]))
    out_dtype = data.draw(st.sampled_from(["int64", "int32", "uint64", "uint32"]))
    got = dmlcli.run(name, x, axes=list(axes), axis_direction=direction, output_dtype=out_dtype)
    expected = ref_arg_tensor(x, axes, name == "argmax", direction == "decreasing", np.dtype(out_dtype))
    assert got.dtype == np.dtype(out_dtype) and np.array_equal(got, expected), (x, axes, direction)


@pytest.mark.parametrize("kind", ["softmax", "log", "hardmax"])
@SETTINGS
@given(data=st.data())
def test_softmax1_family_against_the_reference(kind, data):
    shape, axes = data.draw(shapes_and_axes())
    dtype = data.draw(st.sampled_from(["float32", "float16"]))
    x = draw_array(data.draw, shape, dtype, low=-8.0, high=8.0)
    name = {"softmax": "activation_softmax1", "log": "activation_log_softmax1", "hardmax": "activation_hardmax1"}[kind]
    verdict = dmlcli.validate(name, x, axes=list(axes))
    got = dmlcli.run(name, x, axes=list(axes))
    expected = ref_softmax(x, axes, kind).astype(dtype)
    if kind == "log":  # results near 0 carry log(sum)'s absolute error (the tolerance's source says so)
        assert np.allclose(got.astype(np.float64), ref_softmax(x, axes, kind), rtol=0,
                           atol=4 * float(np.finfo(dtype).eps) * max(1.0, float(np.abs(x).max())))
        far = np.abs(expected.astype(np.float64)) >= 0.5
        assert_close(np.where(far, got, expected), expected, verdict.call.operator, verdict.call)
        return
    assert_close(got, expected, verdict.call.operator, verdict.call, f"{name} {dtype} {shape} {axes}")


@pytest.mark.parametrize("kind", ["softmax", "log", "hardmax"])
@SETTINGS
@given(data=st.data())
def test_last_axis_forms_equal_the_1_forms_on_the_last_axis(kind, data):
    rows = data.draw(st.integers(1, 4))
    width = data.draw(st.integers(1, 6))
    leading = data.draw(st.integers(0, 2))
    x = draw_array(data.draw, (1,) * leading + (rows, width), data.draw(st.sampled_from(["float32", "float16"])))
    plain = {"softmax": "softmax", "log": "log_softmax", "hardmax": "hardmax"}[kind]
    got = dmlcli.run(plain, x)
    one = dmlcli.run(plain + "1", x, axes=[x.ndim - 1])
    assert np.array_equal(got, one)
    assert np.array_equal(one, dmlcli.run(plain + "1", x))  # Axes left out: the last axis


@pytest.mark.parametrize("name", ["cumulative_summation", "cumulative_product"])
@SETTINGS
@given(data=st.data())
def test_cumulative_against_the_reference(name, data):
    shape, _ = data.draw(shapes_and_axes())
    axis = data.draw(st.integers(0, len(shape) - 1))
    dtype = data.draw(st.sampled_from(["float32", "float16", "int32", "uint32", "int64", "uint64"]))
    product = name == "cumulative_product"
    x = draw_array(data.draw, shape, dtype, low=0.25 if not product else -2.0, high=2.0)
    reverse = data.draw(st.booleans())
    exclusive = data.draw(st.booleans())
    field = "has_exclusive_product" if product else "has_exclusive_sum"
    params = {"axis": axis, "axis_direction": "decreasing" if reverse else "increasing", field: exclusive}
    verdict = dmlcli.validate(name, x, **params)
    got = dmlcli.run(name, x, **params)
    expected = ref_cumulative(x, axis, reverse, exclusive, product)
    assert_close(got, expected, verdict.call.operator, verdict.call, f"{name} {dtype} {shape} {params}")


# ---------------------------------------------------------------- the pages' examples

PAGE_INPUT = np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], F32)  # ARGMIN/ARGMAX pages
CUMULATIVE_INPUT = np.array([[[[2, 1, 3, 5], [3, 8, 7, 3], [9, 6, 2, 4]]]], F32)


def test_reduce_page_examples():
    x = np.array([[1, 2, 3], [3, 0, 4], [2, 4, 2]], F32)
    assert dmlcli.run("reduce", x, function="sum", axes=[0]).tolist() == [[6, 6, 9]]
    assert dmlcli.run("reduce", x, function="sum", axes=[1]).tolist() == [[6], [7], [8]]
    assert dmlcli.run("reduce", x, function="sum", axes=[0, 1]).tolist() == [[21]]
    assert dmlcli.run("reduce", x, function="sum").tolist() == [[21]]  # Axes left out: every axis


def test_argmin_argmax_page_examples():
    assert dmlcli.run("argmin", PAGE_INPUT, axes=[0]).tolist() == [[0, 1, 2]]
    assert dmlcli.run("argmin", PAGE_INPUT, axes=[1]).tolist() == [[0], [1], [0]]
    assert dmlcli.run("argmin", PAGE_INPUT, axes=[0, 1]).tolist() == [[4]]
    assert dmlcli.run("argmax", PAGE_INPUT, axes=[0]).tolist() == [[1, 2, 1]]
    assert dmlcli.run("argmax", PAGE_INPUT, axes=[1]).tolist() == [[2], [2], [1]]
    assert dmlcli.run("argmax", PAGE_INPUT, axes=[0, 1]).tolist() == [[7]]
    assert dmlcli.run("argmax", PAGE_INPUT, axes=[0, 1]).dtype == np.uint32
    # The AxisDirection examples: argmin({1,2,3,2,1}) and argmax({3,2,1,2,3}).
    assert dmlcli.run("argmin", np.array([1, 2, 3, 2, 1], F32), axes=[0]).tolist() == [0]
    assert dmlcli.run("argmin", np.array([1, 2, 3, 2, 1], F32), axes=[0], axis_direction="decreasing").tolist() == [4]
    assert dmlcli.run("argmax", np.array([3, 2, 1, 2, 3], F32), axes=[0]).tolist() == [0]
    assert dmlcli.run("argmax", np.array([3, 2, 1, 2, 3], F32), axes=[0], axis_direction="decreasing").tolist() == [4]
    # REDUCE's ARGMAX/ARGMIN equal the operators with INCREASING.
    assert dmlcli.run("reduce", PAGE_INPUT, function="argmax", axes=[0, 1]).tolist() == [[7]]


def test_hardmax1_page_examples():
    x = np.array([[[12, 0], [-101, 11]], [[3, 234], [0, -101]]], F32)
    assert dmlcli.run("hardmax1", x, axes=[1]).tolist() == [[[1, 0], [0, 1]], [[1, 1], [0, 0]]]
    assert dmlcli.run("hardmax1", x, axes=[0]).tolist() == [[[1, 0], [0, 1]], [[0, 1], [1, 0]]]
    assert dmlcli.run("hardmax1", x, axes=[0, 2]).tolist() == [[[0, 0], [0, 1]], [[0, 1], [0, 0]]]


def test_cumulative_page_examples():
    run = dmlcli.run
    assert run("cumulative_summation", CUMULATIVE_INPUT, axis=3)[0, 0].tolist() == [
        [2, 3, 6, 11], [3, 11, 18, 21], [9, 15, 17, 21]]
    assert run("cumulative_summation", CUMULATIVE_INPUT, axis=3, has_exclusive_sum=True)[0, 0].tolist() == [
        [0, 2, 3, 6], [0, 3, 11, 18], [0, 9, 15, 17]]
    assert run("cumulative_summation", CUMULATIVE_INPUT, axis=3, axis_direction="decreasing")[0, 0].tolist() == [
        [11, 9, 8, 5], [21, 18, 10, 3], [21, 12, 6, 4]]
    assert run("cumulative_summation", CUMULATIVE_INPUT, axis=2)[0, 0].tolist() == [
        [2, 1, 3, 5], [5, 9, 10, 8], [14, 15, 12, 12]]
    # Exclusive and decreasing together (no page example; from the fields' texts): the last output is 0.
    assert run("cumulative_summation", CUMULATIVE_INPUT, axis=3, axis_direction="decreasing",
               has_exclusive_sum=True)[0, 0].tolist() == [[9, 8, 5, 0], [18, 10, 3, 0], [12, 6, 4, 0]]
    assert run("cumulative_product", CUMULATIVE_INPUT, axis=3)[0, 0].tolist() == [
        [2, 2, 6, 30], [3, 24, 168, 504], [9, 54, 108, 432]]
    assert run("cumulative_product", CUMULATIVE_INPUT, axis=3, has_exclusive_product=True)[0, 0].tolist() == [
        [1, 2, 2, 6], [1, 3, 24, 168], [1, 9, 54, 108]]
    assert run("cumulative_product", CUMULATIVE_INPUT, axis=3, axis_direction="decreasing")[0, 0].tolist() == [
        [30, 15, 15, 5], [504, 168, 21, 3], [432, 48, 8, 4]]
    assert run("cumulative_product", CUMULATIVE_INPUT, axis=2)[0, 0].tolist() == [
        [2, 1, 3, 5], [6, 8, 21, 15], [54, 48, 42, 60]]


# ---------------------------------------------------------------- the notes' promises: ties, NaN, wrap, FLOAT16

def test_ties_follow_the_axis_direction_and_hardmax_takes_the_first():
    x = np.array([[5, 1, 5, 5], [0, 0, 0, 0]], F32)
    assert dmlcli.run("argmax", x, axes=[1]).ravel().tolist() == [0, 0]
    assert dmlcli.run("argmax", x, axes=[1], axis_direction="decreasing").ravel().tolist() == [3, 3]
    assert dmlcli.run("argmin", x, axes=[1], axis_direction="decreasing").ravel().tolist() == [1, 3]
    assert dmlcli.run("reduce", x, function="argmin", axes=[1]).ravel().tolist() == [1, 0]
    assert dmlcli.run("hardmax", x).tolist() == [[1, 0, 0, 0], [1, 0, 0, 0]]
    # ONNX's test_hardmax_one_hot: [[3, 3, 3, 1]] -> the first 3.
    assert dmlcli.run("hardmax", np.array([[3, 3, 3, 1]], F16)).tolist() == [[1, 0, 0, 0]]


def test_nan_selections_skip_it():
    x = np.array([[NAN, 1, 3, NAN], [NAN, NAN, NAN, NAN], [NAN, -INF, NAN, -INF]], F32)
    assert dmlcli.run("argmax", x, axes=[1]).ravel().tolist() == [2, 0, 1]
    assert dmlcli.run("argmax", x, axes=[1], axis_direction="decreasing").ravel().tolist() == [2, 3, 3]
    assert dmlcli.run("argmin", x, axes=[1]).ravel().tolist() == [1, 0, 1]
    assert dmlcli.run("reduce", x, function="argmax", axes=[1]).ravel().tolist() == [2, 0, 1]
    maxima = dmlcli.run("reduce", x, function="max", axes=[1]).ravel()
    assert maxima[0] == 3 and np.isnan(maxima[1]) and maxima[2] == -INF
    minima = dmlcli.run("reduce", x.astype(F16), function="min", axes=[1]).ravel()
    assert minima[0] == 1 and np.isnan(minima[1]) and minima[2] == -INF
    assert dmlcli.run("hardmax", x).tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]


def test_nan_arithmetic_propagates_it():
    x = np.array([[1, NAN, 2], [1, 2, 3]], F32)
    sums = dmlcli.run("reduce", x, function="sum", axes=[1]).ravel()
    assert np.isnan(sums[0]) and sums[1] == 6
    soft = dmlcli.run("softmax", x)
    assert np.isnan(soft[0]).all() and not np.isnan(soft[1]).any()
    assert np.isnan(dmlcli.run("log_softmax", x)[0]).all()
    running = dmlcli.run("cumulative_summation", x, axis=1)
    assert running[0, 0] == 1 and np.isnan(running[0, 1:]).all()


def test_softmax_infinities_and_large_numbers():
    x = np.array([[0, -INF, 1], [INF, 0, 1], [-INF, -INF, -INF]], F32)
    soft = dmlcli.run("softmax", x)
    assert soft[0, 1] == 0 and np.isnan(soft[1]).all() and np.isnan(soft[2]).all()
    assert dmlcli.run("log_softmax", x)[0, 1] == -INF
    # exp(10003) overflows FLOAT32; the shift by the maximum keeps the result (ONNX's large-number case).
    big = np.array([[10000, 10001, 10002, 10003]], F32)
    expected = np.exp(np.arange(4.0) - 3) / np.exp(np.arange(4.0) - 3).sum()
    assert np.allclose(dmlcli.run("softmax", big), expected, rtol=1e-6)
    lse = dmlcli.run("reduce", big, function="log_sum_exp", axes=[1])
    assert np.isclose(float(lse[0, 0]), 10003 + math.log(expected.sum() / expected[3]), rtol=1e-7)


def test_integer_sums_and_products_wrap():
    top = np.iinfo(np.int32).max
    x = np.array([[top, 1], [-(2 ** 31), -1]], np.int32)
    assert dmlcli.run("reduce", x, function="sum", axes=[1]).ravel().tolist() == [-(2 ** 31), top]
    assert dmlcli.run("reduce", np.array([[65536, 65537]], np.uint32), function="multiply",
                      axes=[1]).ravel().tolist() == [65536]
    assert dmlcli.run("reduce", np.array([[-(2 ** 31)]], np.int32), function="l1", axes=[1]).ravel().tolist() == [
        -(2 ** 31)]
    assert dmlcli.run("reduce", np.array([[2 ** 16]], np.int32), function="sum_square",
                      axes=[1]).ravel().tolist() == [0]
    assert dmlcli.run("cumulative_summation", np.array([top, 1, 1], np.int32)).tolist() == [top, -(2 ** 31),
                                                                                            -(2 ** 31) + 1]
    assert dmlcli.run("cumulative_product", np.array([2 ** 32 - 1, 2], np.uint32)).tolist() == [2 ** 32 - 1,
                                                                                                2 ** 32 - 2]
    u64 = np.array([2 ** 64 - 1, 2], np.uint64)
    assert dmlcli.run("cumulative_summation", u64).tolist() == [2 ** 64 - 1, 1]


def test_float16_computes_in_float32_and_rounds_once():
    # In FLOAT16, 2048 + 1 rounds back to 2048 every time; in FLOAT32 the tally reaches 2050 (a FLOAT16 value).
    x = np.array([2048, 1, 1], F16)
    assert dmlcli.run("reduce", x, function="sum", axes=[0]).tolist() == [2050]
    assert dmlcli.run("cumulative_summation", x).tolist() == [2048, 2048, 2050]
    assert dmlcli.run("reduce", x, function="average", axes=[0]).dtype == np.float16
    # 300 * 300 overflows FLOAT16 (max 65504) but not FLOAT32: the square root comes back into range.
    assert dmlcli.run("reduce", np.array([300, 300], F16), function="l2", axes=[0]).tolist() == [
        float(np.float16(300 * math.sqrt(2)))]


# ---------------------------------------------------------------- the tolerances grow with the group

@pytest.mark.parametrize("name, params, shape, limit", [
    ("reduce", {"function": "sum", "axes": [1]}, (3, 10), 10),
    ("reduce", {"function": "multiply", "axes": [0, 1]}, (3, 10), 30),
    ("reduce", {"function": "average"}, (3, 10), 32),
    ("reduce", {"function": "l2", "axes": [1]}, (3, 10), 21),
    ("reduce", {"function": "sum_square", "axes": [1]}, (3, 10), 20),
    ("reduce", {"function": "log_sum", "axes": [1]}, (3, 10), 28),
    ("reduce", {"function": "log_sum_exp", "axes": [1]}, (3, 10), 38),
    ("reduce", {"function": "max", "axes": [1]}, (3, 10), 0),
    ("softmax", {}, (3, 10), 33),
    ("activation_softmax1", {"axes": [0, 1]}, (3, 10), 93),
    ("activation_log_softmax1", {}, (3, 10), 33),
    ("cumulative_summation", {"axis": 1}, (3, 10), 9),
    ("cumulative_product", {"axis": 0}, (3, 10), 3),
])
def test_tolerance_scales_with_the_group(name, params, shape, limit):
    verdict = plan(name, [("float32", shape)], **params)
    rule = rule_for(verdict.call.operator, np.dtype("float32"), call=verdict.call)
    assert (rule.kind, rule.limit) == ("ulp", limit)
    assert rule_for(verdict.call.operator, np.dtype("int32"), call=verdict.call).kind == "exact"


def test_check_uses_the_scaled_tolerance(tmp_path):
    x = np.full((1, 16), 0.1, F32)
    exact = float(np.sum(x.astype(np.float64)))
    result = float(dmlcli.run("reduce", x, function="sum", axes=[1])[0, 0])
    near = np.nextafter(F32(result), F32(np.inf))  # within 16 ULP
    for offset in range(5):
        near = np.nextafter(near, F32(np.inf))
    far = F32(result)
    for offset in range(40):
        far = np.nextafter(far, F32(np.inf))
    assert abs(result - exact) < 1e-5
    for expected, code in ((near, 0), (far, 1)):
        path = tmp_path / "expected.json"
        path.write_text(json.dumps({"dtype": "float32", "shape": [1, 1], "data": [[float(expected)]]}))
        result_cli = CliRunner().invoke(cli, ["run", "reduce", json.dumps(x.tolist()), "--dtype", "float32",
                                              "--axes", "1", "--check", str(path)])
        assert result_cli.exit_code == code, result_cli.output


# ---------------------------------------------------------------- one command-line run per operator

CLI_RUNS = [
    (["reduce", "[[1,2],[3,4]]", "--dtype", "float32", "--axes", "1"], "float32", [[3], [7]]),
    (["reduce", "[[1,2],[3,4]]", "--dtype", "int32", "--function", "max"], "int32", [[4]]),
    (["argmin", "[[4,2],[3,9]]", "--dtype", "float16", "--axes", "0", "--output-dtype", "int64"], "int64", [[1, 0]]),
    (["argmax", "[[4,4],[3,9]]", "--dtype", "uint8", "--axes", "1", "--axis-direction", "decreasing"], "uint32",
     [[1], [1]]),
    (["activation_softmax", "[[0,0]]", "--dtype", "float32"], "float32", [[0.5, 0.5]]),
    (["activation_softmax1", "[[0],[0]]", "--dtype", "float32", "--axes", "0"], "float32", [[0.5], [0.5]]),
    (["activation_log_softmax", "[[0,0,0,0]]", "--dtype", "float32"], "float32", [[-1.3862944] * 4]),
    (["activation_log_softmax1", "[[0,0]]", "--dtype", "float16", "--axes", "0,1"], "float16",
     [[-0.6931] * 2]),
    (["activation_hardmax", "[[1,3,3]]", "--dtype", "float16"], "float16", [[0, 1, 0]]),
    (["activation_hardmax1", "[[1,3],[5,2]]", "--dtype", "float32", "--axes", "0,1"], "float32", [[0, 0], [1, 0]]),
    (["cumulative_summation", "[1,2,3]", "--dtype", "int32", "--has-exclusive-sum", "true"], "int32", [0, 1, 3]),
    (["cumulative_product", "[1,2,3]", "--dtype", "uint32", "--axis-direction", "decreasing"], "uint32", [6, 6, 3]),
]


@pytest.mark.parametrize("args, dtype, data", CLI_RUNS, ids=[a[0] for a, _, _ in CLI_RUNS])
def test_command_line_run(args, dtype, data):
    result = CliRunner().invoke(cli, ["run", *args, "-o", "-"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dtype"] == dtype
    assert np.allclose(np.array(document["data"], np.float64), np.array(data, np.float64), rtol=1e-3)


def test_every_operator_has_a_command_line_run():
    assert sorted({args[0] for args, _, _ in CLI_RUNS}) == sorted(op.cli_name for op in module.OPERATORS)


# ---------------------------------------------------------------- ONNX's node tests, mapped by hand

ONNX_DIR = SHARED / "onnx_operators"
ONNX_OPS = ("ReduceSum", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
            "ReduceMin", "ReduceProd", "ReduceSumSquare", "ArgMax", "ArgMin", "Softmax", "LogSoftmax", "Hardmax",
            "CumSum", "CumProd")
ONNX_CASES = sorted(p for p in ONNX_DIR.glob("onnx__test_*.json") if json.loads(p.read_text())["onnx_op"] in ONNX_OPS) \
    if ONNX_DIR.is_dir() else []
REDUCE_FUNCTIONS = {"ReduceSum": "sum", "ReduceL1": "l1", "ReduceL2": "l2", "ReduceLogSum": "log_sum",
                    "ReduceLogSumExp": "log_sum_exp", "ReduceMax": "max", "ReduceMean": "average", "ReduceMin": "min",
                    "ReduceProd": "multiply", "ReduceSumSquare": "sum_square"}


def test_the_onnx_cases_are_there(shared_dir):
    assert len(ONNX_CASES) == 118


def map_onnx(case) -> tuple[str, dict, list] | str:
    """The DirectML call for an ONNX case: (operator, parameters, inputs), or why DirectML cannot express it."""
    op = case["onnx_op"]
    attributes = case["attributes"]
    if 0 in case["inputs"][0]["shape"]:
        return "a size of 0: DirectML rejects zero-size tensors"
    inputs = [tensor_from_object(t, where=case["case_name"]) for t in case["inputs"]]
    data = inputs[0]
    if data.dtype == np.float64:
        return "FLOAT64: no DirectML row of this operator takes it"
    rank = data.ndim

    def axis_of(value) -> int:  # ONNX counts from the end with negatives; DirectML's axes are unsigned
        return int(value) % rank

    if op in REDUCE_FUNCTIONS:
        axes = None
        if len(inputs) > 1:
            given = [axis_of(a) for a in inputs[1].ravel()]
            if not given and attributes.get("noop_with_empty_axes"):
                return "noop_with_empty_axes: DirectML's REDUCE has no no-op mode"
            axes = given or None
        return "reduce", {"function": REDUCE_FUNCTIONS[op], "axes": axes}, [data]
    if op in ("ArgMax", "ArgMin"):
        direction = "decreasing" if attributes.get("select_last_index") else "increasing"
        return op.lower(), {"axes": [axis_of(attributes.get("axis", 0))], "axis_direction": direction,
                            "output_dtype": "int64"}, [data]
    if op in ("Softmax", "LogSoftmax", "Hardmax"):
        name = {"Softmax": "activation_softmax1", "LogSoftmax": "activation_log_softmax1",
                "Hardmax": "activation_hardmax1"}[op]
        return name, {"axes": [axis_of(attributes.get("axis", -1))]}, [data]
    # CumSum, CumProd: the axis is an input tensor
    field = "has_exclusive_sum" if op == "CumSum" else "has_exclusive_product"
    return ("cumulative_summation" if op == "CumSum" else "cumulative_product"), {
        "axis": axis_of(inputs[1].ravel()[0]), "axis_direction": "decreasing" if attributes.get("reverse") else
        "increasing", field: bool(attributes.get("exclusive", 0))}, [data]


@pytest.mark.parametrize("path", shared_params(ONNX_CASES), ids=lambda p: getattr(p, "stem", str(p)))
def test_onnx_vector(path):
    case = json.loads(path.read_text())
    mapped = map_onnx(case)
    if isinstance(mapped, str):
        pytest.skip(mapped)
    name, params, inputs = mapped
    expected = tensor_from_object(case["expected"][0], where=path.name)
    verdict = dmlcli.validate(name, *inputs, **params)
    got = dmlcli.run(name, *inputs, **params)
    # keepdims=0 is a reshape after DirectML's operator, which always keeps the rank.
    got = got.reshape(expected.shape)
    if name == "activation_log_softmax1":  # near-0 results: absolute error (the tolerance's source)
        assert np.allclose(got, expected, rtol=1e-6, atol=1e-6)
        return
    assert_close(got, expected, verdict.call.operator, verdict.call, case["case_name"])
    if name.startswith("activation_") and params["axes"] == [inputs[0].ndim - 1] and \
            module.effective_rank(inputs[0].shape) <= 2:
        plain = name.removesuffix("1")  # the operator without 1 computes the same on the last axis
        assert np.array_equal(dmlcli.run(plain, *inputs).reshape(expected.shape), got)


def test_onnx_skips_are_only_what_directml_cannot_express(shared_dir):
    reasons = {}
    for path in ONNX_CASES:
        mapped = map_onnx(json.loads(path.read_text()))
        if isinstance(mapped, str):
            reasons[path.stem] = mapped
    assert all(r.startswith(("FLOAT64", "a size of 0", "noop_with_empty_axes")) for r in reasons.values())
    assert len(reasons) < len(ONNX_CASES) / 3


# ---------------------------------------------------------------- DxDispatch models

def _model(dispatchable: dict, resources: dict, bindings: dict, printed: list[str]) -> dict:
    return {"resources": resources, "dispatchables": {"op": dispatchable},
            "commands": [{"type": "dispatch", "dispatchable": "op", "bindings": bindings}]
            + [{"type": "print", "resource": name} for name in printed]}


def _dispatch(tmp_path, model: dict):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    return CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])


def test_dispatch_argmax_with_axis_count_and_direction(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = _model(
        {"type": "DML_OPERATOR_ARGMAX", "desc": {
            "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3]},
            "OutputTensor": {"DataType": "INT64", "Sizes": [2, 1]},
            "AxisCount": 1, "Axes": [1], "AxisDirection": "DML_AXIS_DIRECTION_DECREASING"}},
        {"in": {"initialValuesDataType": "FLOAT32", "initialValues": [5, 1, 5, 2, 2, 0]},
         "out": {"initialValuesDataType": "INT64", "initialValues": {"valueCount": 2, "value": 0}}},
        {"InputTensor": "in", "OutputTensor": "out"}, ["out"])
    result = _dispatch(tmp_path, model)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Resource 'out': 2, 1"]
    model["dispatchables"]["op"]["desc"]["OutputTensor"]["Sizes"] = [2, 3]  # not what the rule gives
    result = _dispatch(tmp_path, model)
    assert result.exit_code == 3 and "ARGMAX: OutputTensor Sizes [2, 3] do not match" in result.stderr


def test_dispatch_cumulative_summation_in_place(tmp_path, monkeypatch):
    # The page allows the output to alias the input: one resource bound to both.
    monkeypatch.chdir(tmp_path)
    model = _model(
        {"type": "DML_OPERATOR_CUMULATIVE_SUMMATION", "desc": {
            "InputTensor": {"DataType": "INT32", "Sizes": [1, 1, 1, 4]},
            "OutputTensor": {"DataType": "INT32", "Sizes": [1, 1, 1, 4]},
            "Axis": 3, "AxisDirection": "DML_AXIS_DIRECTION_DECREASING", "HasExclusiveSum": True}},
        {"A": {"initialValuesDataType": "INT32", "initialValues": [1, 2, 3, 4]}},
        {"InputTensor": "A", "OutputTensor": "A"}, ["A"])
    result = _dispatch(tmp_path, model)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Resource 'A': 9, 7, 4, 0"]


def test_dispatch_softmax_refuses_in_place_aliasing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = _model(
        {"type": "DML_OPERATOR_ACTIVATION_SOFTMAX", "desc": {
            "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2]}}},
        {"A": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 0]}},
        {"InputTensor": "A", "OutputTensor": "A"}, ["A"])
    result = _dispatch(tmp_path, model)
    assert result.exit_code == 3 and "SOFTMAX is not one of them" in result.stderr
    model["commands"][0]["bindings"] = {"InputTensor": "A", "OutputTensor": "B"}
    model["resources"]["B"] = {"initialValuesDataType": "FLOAT32", "initialValues": [0, 0]}
    model["commands"][1]["resource"] = "B"
    result = _dispatch(tmp_path, model)
    assert result.exit_code == 0 and result.stdout.splitlines() == ["Resource 'B': 0.5, 0.5"]
