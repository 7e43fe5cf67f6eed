"""Data movement: JOIN, SPLIT, SLICE, SLICE1, PADDING, PADDING1, TILE, DEPTH_TO_SPACE(1), SPACE_TO_DEPTH(1),
REVERSE_SUBSEQUENCES.

Every expected value comes from an independent reference written here with plain Python loops over output
coordinates (itertools.product), from the DirectML pages' own examples, or from ONNX's node tests (mapped by
hand onto the DESC fields), never from dmlcli's kernels. All results are exact copies, so they are compared bit
for bit (through an unsigned view, NaN payloads included). The support tables are transcribed a second time
below and checked against acceptance at every feature level.
"""

import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli import engine
from dmlcli.api import plan
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.operators import find_operator
from shaped_cli import cli_args, judge_cell, refused_in_one_line  # tests/ is on the path

from conftest import SHARED

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL = "float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8".split()
F = ["float32", "float16"]
T6 = F + ["int32", "int16", "uint32", "uint16"]
T8 = F + ["int32", "int16", "int8", "uint32", "uint16", "uint8"]
T10 = T8 + ["int64", "uint64"]
ANY = "1-8"

# ---------------------------------------------------------------- the support tables, transcribed again
# operator: [(level, dimension counts, data types of every tensor but REVERSE_SUBSEQUENCES's lengths)], newest first
TABLES = {
    "JOIN": [("4_1", ANY, ALL), ("3_0", "4-5", T8), ("2_1", "4", T8), ("1_0", "4", T6)],
    "SPLIT": [("4_1", ANY, ALL), ("3_0", ANY, T8), ("2_1", "4", T8), ("1_0", "4", T6)],
    "SLICE": [("4_1", ANY, ALL), ("3_0", ANY, T8), ("2_1", "4-5", T8), ("1_0", "4-5", T6)],
    "SLICE1": [("4_1", ANY, ALL), ("3_0", ANY, T8), ("2_1", "4-5", T8)],
    "PADDING": [("5_0", ANY, ALL), ("3_1", ANY, T8), ("2_1", "4-5", T8), ("1_0", "4-5", F)],
    "PADDING1": [("5_0", ANY, ALL)],
    "TILE": [("4_1", ANY, T10), ("3_1", ANY, T8), ("2_1", "4", T8), ("1_0", "4", F)],
    "DEPTH_TO_SPACE": [("5_0", "4", ALL), ("2_1", "4", T8), ("1_0", "4", F)],
    "DEPTH_TO_SPACE1": [("5_0", "4", ALL), ("2_1", "4", T8)],
    "SPACE_TO_DEPTH": [("5_0", "4", ALL), ("2_1", "4", T8), ("1_0", "4", F)],
    "SPACE_TO_DEPTH1": [("5_0", "4", ALL), ("2_1", "4", T8)],
    "REVERSE_SUBSEQUENCES": [("5_0", ANY, ALL), ("4_0", ANY, T8), ("3_0", "4-5", T8), ("2_1", "4", T8)],
}
ENUMS = {"JOIN": 63, "SPLIT": 62, "SLICE": 60, "SLICE1": 111, "PADDING": 64, "PADDING1": 155, "TILE": 70,
         "DEPTH_TO_SPACE": 69, "DEPTH_TO_SPACE1": 113, "SPACE_TO_DEPTH": 68, "SPACE_TO_DEPTH1": 114,
         "REVERSE_SUBSEQUENCES": 106}
BLOCK_OPS = ("DEPTH_TO_SPACE", "DEPTH_TO_SPACE1", "SPACE_TO_DEPTH", "SPACE_TO_DEPTH1")


def dims_allow(dims: str, rank: int) -> bool:
    low, _, high = dims.partition("-")
    return int(low) <= rank <= int(high or low)


def expected_accepts(op, level, dtype, rank):
    found = [row for row in TABLES[op] if LEVELS.index(row[0]) <= LEVELS.index(level)]
    return bool(found) and dtype in found[0][2] and dims_allow(found[0][1], rank)


def planned_call(op, dtype, rank):
    """A call of `op` that its rules accept, for inputs of `dtype` and `rank`: (inputs, parameters)."""
    t = parse_data_type(dtype)
    shape = (2,) * rank
    if op in ("DEPTH_TO_SPACE", "DEPTH_TO_SPACE1"):
        return [(t, (1, 4, 2, 2))], {"block_size": 2}
    if op in ("SPACE_TO_DEPTH", "SPACE_TO_DEPTH1"):
        return [(t, (1, 1, 2, 2))], {"block_size": 2}
    if op == "JOIN":
        return [(t, shape), (t, shape)], {"axis": rank - 1}
    if op == "REVERSE_SUBSEQUENCES":
        return [(t, shape), (parse_data_type("uint32"), (1,) + shape[1:])], {"axis": 0}
    parameters = {"SPLIT": {"output_count": 2}, "SLICE": {"offsets": [1] * rank},
                  "SLICE1": {"input_window_strides": [-1] * rank}, "PADDING": {"start_padding": [1] * rank},
                  "PADDING1": {"end_padding": [2] * rank}, "TILE": {"repeats": [2] * rank}}[op]
    return [(t, shape)], parameters


@pytest.mark.parametrize("op", sorted(TABLES))
def test_validation_grid(op):
    failures = []
    for level in LEVELS:
        for dtype in ALL:
            for rank in ((4,) if op in BLOCK_OPS else (1, 3, 4, 5, 8)):
                inputs, parameters = planned_call(op, dtype, rank)
                judge_cell(f"{op} {level} {dtype} rank {rank}",
                           lambda: plan(op, inputs, feature_level=level, **parameters),
                           expected_accepts(op, level, dtype, rank),
                           lambda: next(lv for lv in LEVELS if expected_accepts(op, lv, dtype, rank)), failures)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("op", sorted(TABLES))
def test_entry_names_enum_values_and_levels(op):
    entry = find_operator(op)
    assert entry.enum_value == ENUMS[op] and entry.family == "data movement"
    assert entry.introduced.short == TABLES[op][-1][0]
    assert entry.exactness == "exact" and entry.native_encoding


def test_rejected_level_names_the_lowest_accepting_one():
    inputs, parameters = planned_call("SLICE1", "float32", 1)
    with pytest.raises(dmlcli.ValidationError, match=r"not supported at DML_FEATURE_LEVEL_2_1 .*supported from "
                                                     r"DML_FEATURE_LEVEL_3_0"):
        plan("slice1", inputs, feature_level="2_1", **parameters)
    with pytest.raises(dmlcli.ValidationError, match=r"not available at DML_FEATURE_LEVEL_2_0 \(introduced in "
                                                     r"DML_FEATURE_LEVEL_2_1\)"):
        plan("slice1", [(parse_data_type("float32"), (1, 1, 2, 2))], feature_level="2_0")
    inputs, parameters = planned_call("TILE", "float64", 4)
    with pytest.raises(dmlcli.ValidationError, match="no feature level accepts"):  # TILE never takes FLOAT64
        plan("tile", inputs, **parameters)


def test_reverse_subsequences_length_types_by_level():
    x = parse_data_type("float32")
    for lengths, lowest in (("uint32", "2_1"), ("uint64", "5_0")):
        verdict = plan("reverse_subsequences", [(x, (2, 2, 2, 2)), (parse_data_type(lengths), (1, 2, 2, 2))])
        assert verdict.lowest_feature_level.short == lowest
    for signed in ("int32", "int64"):
        with pytest.raises(dmlcli.ValidationError, match=f"SequenceLengthsTensor data type {signed.upper()}"):
            plan("reverse_subsequences", [(x, (2, 2, 2, 2)), (parse_data_type(signed), (1, 2, 2, 2))])


def test_tensors_that_must_share_a_data_type():
    with pytest.raises(dmlcli.ValidationError, match=r"InputTensors\[0\] data type FLOAT32 and InputTensors\[1\] "
                                                     r"data type INT32 differ"):
        dmlcli.run("join", arr((2,)), arr((2,), "int32"))
    # REVERSE_SUBSEQUENCES's lengths have their own type; the output has the input's.
    got = dmlcli.run("reverse_subsequences", arr((3,), "int8"), np.array([3], np.uint64))
    assert got.dtype == np.int8 and got.tolist() == [2, 1, 0]
    assert all(piece.dtype == np.uint16 for piece in dmlcli.run("split", arr((4,), "uint16"), output_count=2))


def test_padding_symmetric_needs_3_0_the_other_modes_do_not():
    f32 = parse_data_type("float32")
    for mode in ("constant", "edge", "reflection"):
        assert plan("padding", [(f32, (1, 1, 2, 2))], padding_mode=mode, feature_level="1_0")
    with pytest.raises(dmlcli.ValidationError, match=r"PaddingMode SYMMETRIC is not available at "
                                                     r"DML_FEATURE_LEVEL_2_1 \(introduced in DML_FEATURE_LEVEL_3_0\); "
                                                     r"supported from DML_FEATURE_LEVEL_3_0"):
        plan("padding", [(f32, (1, 1, 2, 2))], padding_mode="symmetric", feature_level="2_1")
    assert plan("padding", [(f32, (1, 1, 2, 2))], padding_mode="DML_PADDING_MODE_SYMMETRIC",
                feature_level="3_0").lowest_feature_level.short == "3_0"
    with pytest.raises(dmlcli.InputError, match="unknown PaddingMode 'mirror'"):
        plan("padding", [(f32, (1, 1, 2, 2))], padding_mode="mirror")


@pytest.mark.parametrize("op", ["padding", "padding1"])
def test_padding_wrap_needs_6_4(op):
    """DML_PADDING_MODE_WRAP (4) came with 6_4 for both operators (DirectML 1.15.0's release notes)."""
    f32 = parse_data_type("float32")
    for spelling in ("wrap", "WRAP", "DML_PADDING_MODE_WRAP", "4"):
        verdict = plan(op, [(f32, (1, 1, 2, 2))], padding_mode=spelling, start_padding=[0, 0, 1, 2])
        assert verdict.call.parameters["PaddingMode"] == "WRAP" and verdict.lowest_feature_level.short == "6_4"
    for below in ("6_3", "6_2", "5_0"):
        with pytest.raises(dmlcli.ValidationError, match=rf"{op.upper()}: PaddingMode WRAP is not available at "
                                                         rf"DML_FEATURE_LEVEL_{below} \(introduced in "
                                                         r"DML_FEATURE_LEVEL_6_4\); supported from DML_FEATURE_LEVEL_6_4"):
            plan(op, [(f32, (1, 1, 2, 2))], padding_mode="wrap", feature_level=below)
    assert plan(op, [(f32, (1, 1, 2, 2))], padding_mode="wrap", feature_level="6_4")


@pytest.mark.parametrize("field, sizes", [("start_padding", [0, 3]), ("end_padding", [0, 4])])
def test_padding_wrap_past_one_copy_of_the_input_is_refused(field, sizes):
    name = "StartPadding" if field == "start_padding" else "EndPadding"
    with pytest.raises(dmlcli.ValidationError, match=rf"{name}\[1\] {sizes[1]} is larger than InputTensor's size 2 "
                                                     r"in that dimension; with PaddingMode WRAP"):
        dmlcli.run("padding1", arr((3, 2)), padding_mode="wrap", **{field: sizes})
    # Up to one copy on each side is taken, whatever the other dimensions' sizes.
    got = dmlcli.run("padding1", arr((3, 2)), padding_mode="wrap", start_padding=[3, 2], end_padding=[3, 2])
    assert got.shape == (9, 6)


# ---------------------------------------------------------------- the rules the pages state (exit 3)


def arr(shape, dtype="float32"):
    return np.arange(math.prod(shape)).astype(dtype).reshape(shape)


LENGTHS = np.ones((1, 3, 4), np.uint32)
# (operator, inputs, parameters, what the message must say)
RULES = [
    ("join", [arr((2, 3)), arr((2, 3))], {"axis": 2}, r"Axis 2 is out of range for InputTensors\[0\]'s 2 dimensions \(allowed: 0 to 1"),
    ("join", [arr((2, 3)), arr((3, 2))], {"axis": 0},
     r"InputTensors\[1\] Sizes \[3, 2\] and InputTensors\[0\] Sizes \[2, 3\] differ outside Axis 0"),
    ("join", [arr((2, 3)), arr((2, 3, 1))], {"axis": 0},
     r"InputTensors\[1\] has 3 dimensions but InputTensors\[0\] has 2; the InputTensors must have the same "
     "DimensionCount"),
    ("split", [arr((6,))], {"axis": 1, "output_count": 2}, r"Axis 1 is out of range for InputTensor's 1 dimensions"),
    ("split", [arr((6,))], {"output_sizes": [2, 3]}, r"OutputSizes \[2, 3\] add up to 5, but InputTensor's size "
                                                       r"along Axis 0 is 6"),
    ("split", [arr((6,))], {"output_sizes": [6, 0]}, r"OutputSizes\[1\] is 0"),
    ("split", [arr((6,))], {"output_sizes": [3, 3], "output_count": 3},
     r"OutputCount 3 does not match the 2 OutputTensors \[3, 3\]"),
    ("split", [arr((7,))], {"output_count": 2}, r"InputTensor's size along Axis 0, 7, is not divisible by "
                                                r"OutputCount 2"),
    ("split", [arr((7,))], {"output_sizes": ""}, r"OutputSizes is empty"),
    ("slice", [arr((4, 4))], {"offsets": [0]}, r"Offsets has 1 values but InputTensor has 2 dimensions"),
    ("slice", [arr((4, 4))], {"strides": [1, 0]}, r"Strides\[1\] is 0; strides must be at least 1"),
    ("slice", [arr((4, 4))], {"offsets": [0, 4]}, r"Offsets\[1\] 4 is outside InputTensor's Sizes\[1\] 4"),
    ("slice", [arr((4, 4))], {"sizes": [0, 1]}, r"Sizes\[0\] is 0"),
    ("slice", [arr((4, 4))], {"offsets": [1, 0], "sizes": [2, 1], "strides": [3, 1]},
     r"Offsets\[0\] 1 \+ Strides\[0\] 3 \* \(Sizes\[0\] 2 - 1\) = 4 reads past InputTensor's Sizes\[0\] 4 \(the last "
     r"element read must be at most 3"),
    ("slice1", [arr((4, 4))], {"input_window_strides": [1, 0]}, r"InputWindowStrides\[1\] is 0; strides may not be 0"),
    ("slice1", [arr((4, 4))], {"input_window_sizes": [4, 0]}, r"InputWindowSizes\[1\] is 0; the input window "
                                                                r"mustn't be empty"),
    ("slice1", [arr((4, 4))], {"input_window_offsets": [1, 0], "input_window_sizes": [4, 4]},
     r"InputWindowOffsets\[0\] 1 \+ InputWindowSizes\[0\] 4 = 5 is more than InputTensor's Sizes\[0\] 4"),
    ("slice1", [arr((4, 4))], {"input_window_offsets": [0, 5]}, r"InputWindowOffsets\[1\] 5 is outside"),
    ("slice1", [arr((4, 4))], {"input_window_strides": [1, 1, 1]}, r"InputWindowStrides has 3 values"),
    ("padding", [arr((2, 2))], {"start_padding": [1, 1, 1]}, r"StartPadding has 3 values but InputTensor has 2"),
    ("padding1", [arr((2, 2))], {"end_padding": [1]}, r"EndPadding has 1 values but InputTensor has 2"),
    ("tile", [arr((2, 2))], {"repeats": [1, 2, 3]}, r"RepeatsCount 3 \(the values of Repeats\) must be "
                                                     r"InputTensor's DimensionCount, 2"),
    ("tile", [arr((2, 2))], {"repeats": [1, 0]}, r"Repeats\[1\] is 0; values must be larger than 0"),
    ("depth_to_space", [arr((4, 2, 2))], {"block_size": 2}, r"InputTensor has 3 dimensions; DEPTH_TO_SPACE works "
                                                            r"on 4"),
    ("depth_to_space1", [arr((1, 4, 2, 2))], {"block_size": 0}, r"BlockSize is 0; it must be at least 1"),
    ("depth_to_space", [arr((1, 6, 2, 2))], {"block_size": 2}, r"InputTensor's channel count 6 is not divisible by BlockSize \* "
                                                               r"BlockSize = 4"),
    ("space_to_depth", [arr((1, 1, 3, 4))], {"block_size": 2}, r"InputTensor's height 3 is not divisible by "
                                                               r"BlockSize 2"),
    ("space_to_depth1", [arr((1, 1, 4, 3))], {"block_size": 2}, r"InputTensor's width 3 is not divisible"),
    ("reverse_subsequences", [arr((2, 3, 4)), LENGTHS], {"axis": 3}, r"Axis 3 is out of range for InputTensor's 3"),
    ("reverse_subsequences", [arr((2, 3, 4)), np.ones((3, 4), np.uint32)], {"axis": 0},
     r"SequenceLengthsTensor has 2 dimensions but InputTensor has 3"),
    ("reverse_subsequences", [arr((2, 3, 4)), LENGTHS], {"axis": 1},
     r"SequenceLengthsTensor Sizes \[1, 3, 4\] must be \[2, 1, 4\]: InputTensor's Sizes with 1 along Axis 1"),
]


@pytest.mark.parametrize("op, inputs, parameters, message", RULES)
def test_rule_violations_name_field_value_and_what_is_allowed(op, inputs, parameters, message):
    with pytest.raises(dmlcli.ValidationError, match=f"^{op.upper()}: {message}"):
        dmlcli.validate(op, *inputs, **parameters)


@pytest.mark.parametrize("op, inputs, parameters, message", RULES)
def test_rule_violations_exit_3_on_the_command_line(op, inputs, parameters, message):
    prefix = f"dmlcli: error: {op.upper()}: "
    result = refused_in_one_line(cli_args(op, inputs, parameters, "-o", "-"), 3, prefix)
    assert result.stderr.startswith(prefix)


@pytest.mark.parametrize("op, inputs, parameters, message", [
    ("tile", [arr((2, 2))], {}, r"TILE needs Repeats \(--repeats\)"),
    ("depth_to_space", [arr((1, 4, 1, 1))], {}, r"DEPTH_TO_SPACE needs BlockSize \(--block-size\)"),
    ("space_to_depth1", [arr((1, 1, 2, 2))], {}, r"SPACE_TO_DEPTH1 needs BlockSize"),
    ("split", [arr((4,))], {}, r"SPLIT needs --output-sizes .* or --output-count"),
    ("split", [arr((4,))], {"output_count": 0}, r"OutputCount \(--output-count\) = 0 is out of range \(1 to"),
    ("padding1", [arr((2,))], {"padding_value_data_type": "int32"},
     r"PaddingValueDataType INT32 must match OutputTensor data type FLOAT32"),
    ("padding1", [arr((2,), "int8")], {"padding_value": 128}, r"PaddingValue"),
    ("slice1", [arr((2,))], {"input_window_strides": [2**31]}, r"out of range \(-2147483648 to 2147483647\)"),
    ("slice", [arr((2,))], {"strides": [-1]}, r"out of range \(0 to 4294967295\)"),
])
def test_usage_errors_exit_2(op, inputs, parameters, message):
    with pytest.raises(dmlcli.InputError, match=message):
        dmlcli.run(op, *inputs, **parameters)
    result = CliRunner().invoke(cli, cli_args(op, inputs, parameters, "-o", "-"))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("dmlcli: error: ") and result.stderr.count("\n") == 1


# ---------------------------------------------------------------- independent references (loops over coordinates)


def ref_join(arrays, axis):
    out_shape = list(arrays[0].shape)
    out_shape[axis] = sum(a.shape[axis] for a in arrays)
    out = np.empty(out_shape, arrays[0].dtype)
    for c in itertools.product(*map(range, out_shape)):
        k = c[axis]
        for a in arrays:
            if k < a.shape[axis]:
                out[c] = a[c[:axis] + (k,) + c[axis + 1:]]
                break
            k -= a.shape[axis]
    return out


def ref_split(x, sizes, axis):
    pieces, start = [], 0
    for size in sizes:
        shape = x.shape[:axis] + (size,) + x.shape[axis + 1:]
        piece = np.empty(shape, x.dtype)
        for c in itertools.product(*map(range, shape)):
            piece[c] = x[c[:axis] + (c[axis] + start,) + c[axis + 1:]]
        pieces.append(piece)
        start += size
    return pieces


def ref_slice1(x, offsets, windows, strides, out_shape):
    out = np.empty(out_shape, x.dtype)
    start = [o + (w - 1 if s < 0 else 0) for o, w, s in zip(offsets, windows, strides)]
    for c in itertools.product(*map(range, out_shape)):
        out[c] = x[tuple(b + s * i for b, s, i in zip(start, strides, c))]
    return out


def fold(j, n, mode):
    """The input coordinate padded coordinate j copies, by folding step by step (the page's 'folding over
    previous padding regions'), not by a period formula."""
    if mode == "EDGE":
        return min(max(j, 0), n - 1)
    if mode == "WRAP":  # the input laid end to end, stepped one copy at a time
        while j < 0:
            j += n
        while j >= n:
            j -= n
        return j
    if n == 1:
        return 0
    while not 0 <= j < n:
        if mode == "REFLECTION":
            j = -j if j < 0 else 2 * (n - 1) - j
        else:  # SYMMETRIC
            j = -j - 1 if j < 0 else 2 * n - 1 - j
    return j


def ref_pad(x, start, end, mode, value):
    out_shape = tuple(s + n + e for s, n, e in zip(start, x.shape, end))
    out = np.empty(out_shape, x.dtype)
    for c in itertools.product(*map(range, out_shape)):
        inner = [i - s for i, s in zip(c, start)]
        if all(0 <= j < n for j, n in zip(inner, x.shape)):
            out[c] = x[tuple(inner)]
        elif mode == "CONSTANT":
            out[c] = value
        else:
            out[c] = x[tuple(fold(j, n, mode) for j, n in zip(inner, x.shape))]
    return out


def ref_tile(x, repeats):
    out_shape = tuple(n * r for n, r in zip(x.shape, repeats))
    out = np.empty(out_shape, x.dtype)
    for c in itertools.product(*map(range, out_shape)):
        out[c] = x[tuple(i % n for i, n in zip(c, x.shape))]
    return out


def depth_channel(c, bh, bw, channels, b, order):
    """The depth coordinate of channel c's element (bh, bw) of a block (DML_DEPTH_SPACE_ORDER's layouts)."""
    return (bh * b + bw) * channels + c if order == "DEPTH_COLUMN_ROW" else (c * b + bh) * b + bw


def ref_depth_to_space(x, b, order):
    n, depth, h, w = x.shape
    channels = depth // (b * b)
    out = np.empty((n, channels, h * b, w * b), x.dtype)
    for i, c, y, z in itertools.product(range(n), range(channels), range(h * b), range(w * b)):
        out[i, c, y, z] = x[i, depth_channel(c, y % b, z % b, channels, b, order), y // b, z // b]
    return out


def ref_space_to_depth(x, b, order):
    n, channels, h, w = x.shape
    out = np.empty((n, channels * b * b, h // b, w // b), x.dtype)
    for i, c, bh, bw, y, z in itertools.product(range(n), range(channels), range(b), range(b), range(h // b),
                                                range(w // b)):
        out[i, depth_channel(c, bh, bw, channels, b, order), y, z] = x[i, c, y * b + bh, z * b + bw]
    return out


def ref_reverse(x, lengths, axis):
    out = np.empty_like(x)
    for c in itertools.product(*map(range, x.shape)):
        length = min(int(lengths[c[:axis] + (0,) + c[axis + 1:]]), x.shape[axis])
        k = c[axis]
        out[c] = x[c[:axis] + ((length - 1 - k) if k < length else k,) + c[axis + 1:]]
    return out


def bits(array):
    array = np.asarray(array)
    return array.view(f"uint{array.dtype.itemsize * 8}") if array.dtype.kind == "f" else array


def assert_same_bits(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(bits(got), bits(expected))


DTYPES = st.sampled_from(["float32", "float16", "int8", "uint16", "int32", "uint64", "float64"])
SHAPES = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def random_array(draw_or_rng, shape, dtype):
    """Random bit patterns (NaN payloads and subnormals included for the float types)."""
    rng = draw_or_rng
    raw = rng.integers(0, 256, size=math.prod(shape) * np.dtype(dtype).itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


@st.composite
def array_of(draw, shape=None):
    shape = draw(SHAPES) if shape is None else shape
    dtype = draw(DTYPES)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return random_array(rng, shape, dtype)


@SETTINGS
@given(st.data())
def test_join_matches_the_reference(data):
    first = data.draw(array_of())
    axis = data.draw(st.integers(0, first.ndim - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    arrays = [first] + [random_array(rng, first.shape[:axis] + (int(rng.integers(1, 4)),) + first.shape[axis + 1:],
                                     first.dtype.name) for _ in range(data.draw(st.integers(0, 3)))]
    assert_same_bits(dmlcli.run("join", *arrays, axis=axis), ref_join(arrays, axis))


@SETTINGS
@given(st.data())
def test_split_matches_the_reference(data):
    x = data.draw(array_of())
    axis = data.draw(st.integers(0, x.ndim - 1))
    cuts = sorted(data.draw(st.sets(st.integers(1, x.shape[axis] - 1), max_size=3))) if x.shape[axis] > 1 else []
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [x.shape[axis]])]
    got = dmlcli.run("split", x, axis=axis, output_sizes=sizes)
    assert isinstance(got, tuple) and len(got) == len(sizes)
    for piece, expected in zip(got, ref_split(x, sizes, axis)):
        assert_same_bits(piece, expected)
        assert piece.flags.c_contiguous and not np.shares_memory(piece, x)  # each output is its own array


@SETTINGS
@given(st.data())
def test_split_into_equal_pieces(data):
    x = data.draw(array_of())
    axis = data.draw(st.integers(0, x.ndim - 1))
    count = data.draw(st.sampled_from([d for d in range(1, x.shape[axis] + 1) if x.shape[axis] % d == 0]))
    got = dmlcli.run("split", x, axis=axis, output_count=count)
    for piece, expected in zip(got, ref_split(x, [x.shape[axis] // count] * count, axis)):
        assert_same_bits(piece, expected)


@st.composite
def slice1_call(draw, negative=True):
    x = draw(array_of())
    offsets, windows, strides, out_shape = [], [], [], []
    for size in x.shape:
        offset = draw(st.integers(0, size - 1))
        window = draw(st.integers(1, size - offset))
        magnitude = draw(st.integers(1, 3))
        stride = -magnitude if negative and draw(st.booleans()) else magnitude
        offsets.append(offset), windows.append(window), strides.append(stride)
        out_shape.append(draw(st.integers(1, 1 + (window - 1) // magnitude)))
    return x, offsets, windows, strides, tuple(out_shape)


@SETTINGS
@given(slice1_call())
def test_slice1_matches_the_reference(call):
    x, offsets, windows, strides, out_shape = call
    most = tuple(1 + (w - 1) // abs(s) for w, s in zip(windows, strides))
    got = dmlcli.run("slice1", x, input_window_offsets=offsets, input_window_sizes=windows,
                     input_window_strides=strides)
    assert_same_bits(got, ref_slice1(x, offsets, windows, strides, most))
    fewer = dmlcli.run("slice1", x, input_window_offsets=offsets, input_window_sizes=windows,
                       input_window_strides=strides, output_shape=out_shape)  # DirectML's sizes from the desc
    assert_same_bits(fewer, ref_slice1(x, offsets, windows, strides, out_shape))


@SETTINGS
@given(slice1_call(negative=False))
def test_slice_matches_the_reference(call):
    x, offsets, _, strides, out_shape = call
    got = dmlcli.run("slice", x, offsets=offsets, sizes=list(out_shape), strides=strides)
    windows = [1 + s * (n - 1) for s, n in zip(strides, out_shape)]
    assert_same_bits(got, ref_slice1(x, offsets, windows, strides, out_shape))


def test_slice_defaults_take_what_fits():
    x = arr((5, 7))
    assert_same_bits(dmlcli.run("slice", x, offsets=[1, 2], strides=[2, 3]), x[1::2, 2::3])
    assert_same_bits(dmlcli.run("slice", x), x)
    assert_same_bits(dmlcli.run("slice1", x, input_window_strides=[-1, -2]), x[::-1, ::-2])
    assert_same_bits(dmlcli.run("slice1", x, input_window_offsets=[1, 1], input_window_strides=[-3, 1]), x[4:0:-3, 1:])


def test_slice1_output_sizes_outside_max_copied_elements_are_refused():
    with pytest.raises(dmlcli.ValidationError, match=r"OutputTensor Sizes\[1\] 3 is outside 1 to MaxCopiedElements 2 "
                                                     r"\(= 1 \+ \(InputWindowSizes\[1\] 4 - 1\) // "
                                                     r"\|InputWindowStrides\[1\]\| 2\)"):
        dmlcli.run("slice1", arr((4, 4)), input_window_strides=[1, -2], output_shape=(4, 3))


PAD_MODES = ["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]


def within_one_copy(mode, widths, shape):
    """WRAP takes padding up to the input's size in each dimension (dmlcli refuses more); the others any."""
    return [min(w, n) for w, n in zip(widths, shape)] if mode == "WRAP" else widths


@SETTINGS
@given(st.data())
def test_padding1_matches_the_reference_with_padding_longer_than_the_input(data):
    x = data.draw(array_of())
    mode = data.draw(st.sampled_from(PAD_MODES))
    start = within_one_copy(mode, data.draw(st.lists(st.integers(0, 9), min_size=x.ndim, max_size=x.ndim)), x.shape)
    end = within_one_copy(mode, data.draw(st.lists(st.integers(0, 9), min_size=x.ndim, max_size=x.ndim)), x.shape)
    value = random_array(np.random.default_rng(data.draw(st.integers(0, 99))), (1,), x.dtype.name)[0]
    got = dmlcli.run("padding1", x, padding_mode=mode, padding_value=value if x.dtype.kind != "f" else None,
                     start_padding=start, end_padding=end)
    expected = ref_pad(x, start, end, mode, value if x.dtype.kind != "f" else 0)
    assert_same_bits(got, expected)


@SETTINGS
@given(st.data())
def test_padding_matches_the_reference(data):
    x = data.draw(array_of())
    mode = data.draw(st.sampled_from(PAD_MODES))
    start = within_one_copy(mode, data.draw(st.lists(st.integers(0, 5), min_size=x.ndim, max_size=x.ndim)), x.shape)
    end = within_one_copy(mode, data.draw(st.lists(st.integers(0, 5), min_size=x.ndim, max_size=x.ndim)), x.shape)
    got = dmlcli.run("padding", x, padding_mode=mode, padding_value=-3.75, start_padding=start, end_padding=end)
    value = {"f": -3.75}.get(x.dtype.kind, -3 if x.dtype.kind == "i" else 0)  # truncated; unsigned saturates to 0
    assert_same_bits(got, ref_pad(x, start, end, mode, np.asarray(value).astype(x.dtype)))


@pytest.mark.parametrize("mode, numpy_mode", [("EDGE", "edge"), ("REFLECTION", "reflect"), ("SYMMETRIC", "symmetric")])
def test_padding_agrees_with_numpy_pad_on_long_padding(mode, numpy_mode):
    x = arr((3, 1, 4), "int32")
    start, end = [7, 2, 0], [1, 5, 9]
    got = dmlcli.run("padding", x, padding_mode=mode, start_padding=start, end_padding=end)
    assert_same_bits(got, np.pad(x, list(zip(start, end)), mode=numpy_mode))


@pytest.mark.parametrize("op", ["padding", "padding1"])
def test_padding_wrap_agrees_with_numpy_pad_and_onnx(op):
    """WRAP is ONNX's Pad mode wrap, numpy.pad's 'wrap', up to one copy of the input on each side; ONNX's own
    example (onnx.defs Pad, opset 19: pads [2, 1, 1, 1] on a 3 x 2 input)."""
    x = arr((3, 1, 4), "int32")
    start, end = [3, 1, 0], [1, 0, 4]
    got = dmlcli.run(op, x, padding_mode="wrap", start_padding=start, end_padding=end)
    assert_same_bits(got, np.pad(x, list(zip(start, end)), mode="wrap"))
    data = np.float32([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]])
    row = [[3.4, 2.3, 3.4, 2.3], [5.7, 4.5, 5.7, 4.5], [1.2, 1.0, 1.2, 1.0]]
    expected = np.float32(row + row)
    assert_same_bits(dmlcli.run(op, data, padding_mode="wrap", start_padding=[2, 1], end_padding=[1, 1]), expected)


@pytest.mark.parametrize("value, dtype, expected", [
    (10.6, "int32", 10), (-10.6, "int32", -10), (300.0, "uint8", 255), (-1.0, "uint8", 0), (-200.0, "int8", -128),
    ("nan", "int16", 0), ("inf", "int64", 2**63 - 1), ("-inf", "uint32", 0), (2.0**70, "uint64", 2**64 - 1),
    (65520.0, "float16", np.inf), (0.1, "float16", np.float16(np.float32(0.1))), (0.1, "float64", float(np.float32(0.1))),
])
def test_padding_float_value_in_each_type(value, dtype, expected):
    got = dmlcli.run("padding", np.zeros((1,), dtype), start_padding=[1])
    assert got[0] == 0
    got = dmlcli.run("padding", np.zeros((1,), dtype), padding_value=value, start_padding=[1])
    assert got.dtype == np.dtype(dtype) and got[0] == np.asarray(expected).astype(dtype) and got[1] == 0


def test_padding1_value_is_exact_in_64_bits_and_nan_payloads_are_kept():
    big = 2**63 - 3
    got = dmlcli.run("padding1", np.zeros((1,), np.int64), padding_value=big, start_padding=[2])
    assert got.tolist() == [big, big, 0]
    assert dmlcli.run("padding1", np.zeros((1,), np.uint64), padding_value="0xFFFFFFFFFFFFFFFF",
                      end_padding=[1]).tolist() == [0, 2**64 - 1]
    assert dmlcli.run("padding1", np.zeros((2,), np.int8), padding_value_data_type="INT8", padding_value=-128,
                      start_padding=[1]).tolist() == [-128, 0, 0]
    payload = np.array([0x7F800001], np.uint32).view(np.float32)  # a signalling NaN
    got = dmlcli.run("padding1", payload, padding_value=payload[0], start_padding=[1], end_padding=[1])
    assert bits(got).tolist() == [0x7F800001] * 3
    got = dmlcli.run("padding", payload, padding_value=payload[0], start_padding=[1])  # PADDING's FLOAT too
    assert bits(got).tolist() == [0x7F800001] * 2
    half = dmlcli.run("padding", np.zeros(1, np.float16), padding_value=payload[0], start_padding=[1])
    assert bits(half).tolist() == [0x7C01, 0]  # FLOAT32 to FLOAT16 keeps the payload's top bits, never 0x7C00 (inf)
    desc = {"PaddingMode": "CONSTANT", "PaddingValueDataType": "FLOAT32", "PaddingValue": {"UInt32": 0x7FA00001},
            "StartPadding": [1], "EndPadding": [0]}  # a DxDispatch desc's union member, read as FLOAT32
    verdict = engine.plan(engine.request("padding1", desc_fields=desc), [(parse_data_type("float32"), (1,))])
    got = engine.execute(verdict, [payload], "cpu").output
    assert bits(got).tolist() == [0x7FA00001, 0x7F800001]


@SETTINGS
@given(st.data())
def test_tile_matches_the_reference(data):
    x = data.draw(array_of().filter(lambda a: a.dtype != np.float64))  # TILE's tables have no FLOAT64
    repeats = data.draw(st.lists(st.integers(1, 3), min_size=x.ndim, max_size=x.ndim))
    assert_same_bits(dmlcli.run("tile", x, repeats=repeats), ref_tile(x, repeats))


@SETTINGS
@given(st.data())
def test_depth_and_space_match_the_reference(data):
    b = data.draw(st.integers(1, 3))
    n, c, h, w = (data.draw(st.integers(1, 2)) for _ in range(4))
    order = data.draw(st.sampled_from(["DEPTH_COLUMN_ROW", "COLUMN_ROW_DEPTH"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    dtype = data.draw(DTYPES)
    deep = random_array(rng, (n, c * b * b, h, w), dtype)
    wide = random_array(rng, (n, c, h * b, w * b), dtype)
    assert_same_bits(dmlcli.run("depth_to_space1", deep, block_size=b, order=order), ref_depth_to_space(deep, b, order))
    assert_same_bits(dmlcli.run("space_to_depth1", wide, block_size=b, order=order), ref_space_to_depth(wide, b, order))
    if order == "DEPTH_COLUMN_ROW":  # the first versions are *1 in this order (the pages' remarks)
        assert_same_bits(dmlcli.run("depth_to_space", deep, block_size=b), ref_depth_to_space(deep, b, order))
        assert_same_bits(dmlcli.run("space_to_depth", wide, block_size=b), ref_space_to_depth(wide, b, order))
    back = dmlcli.run("space_to_depth1", dmlcli.run("depth_to_space1", deep, block_size=b, order=order),
                      block_size=b, order=order)
    assert_same_bits(back, deep)  # each is the other's inverse


@SETTINGS
@given(st.data())
def test_reverse_subsequences_matches_the_reference(data):
    x = data.draw(array_of())
    axis = data.draw(st.integers(0, x.ndim - 1))
    length_type = data.draw(st.sampled_from([np.uint32, np.uint64]))
    shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    lengths = np.array(data.draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 5, 2**32 - 1]), min_size=math.prod(shape),
                                          max_size=math.prod(shape))), length_type).reshape(shape)
    if length_type == np.uint64 and lengths.size:
        lengths.flat[0] = 2**64 - 1  # clamped, never wrapped to a negative index
    got = dmlcli.run("reverse_subsequences", x, lengths, axis=axis)
    assert_same_bits(got, ref_reverse(x, lengths, axis))


def test_reverse_subsequences_whole_lines_and_no_op_lengths():
    x = random_array(np.random.default_rng(5), (3, 5, 2), "float32")
    for lengths, expected in ((np.full((3, 1, 2), 5, np.uint32), x[:, ::-1, :]),  # every line reversed whole
                              (np.full((3, 1, 2), 2**32 - 1, np.uint32), x[:, ::-1, :]),  # clamped to 5
                              (np.array([0, 1] * 3, np.uint64).reshape(3, 1, 2), x)):  # 0 and 1 copy the line
        got = dmlcli.run("reverse_subsequences", x, lengths, axis=1)
        assert_same_bits(got, np.ascontiguousarray(expected))
        assert not np.shares_memory(got, x)


# ---------------------------------------------------------------- the pages' own examples

PAGE_4X4 = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
PAGE_PAD = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [1, 2, 3, 4], [5, 6, 7, 8]], np.float32).reshape(1, 1, 4, 4)
PAGE_DEPTH = (np.arange(8)[:, None, None] * 9 + np.arange(6).reshape(2, 3)).astype(np.uint32).reshape(1, 8, 2, 3)
PAGE_DCR = [[[[0, 18, 1, 19, 2, 20], [36, 54, 37, 55, 38, 56], [3, 21, 4, 22, 5, 23], [39, 57, 40, 58, 41, 59]],
             [[9, 27, 10, 28, 11, 29], [45, 63, 46, 64, 47, 65], [12, 30, 13, 31, 14, 32], [48, 66, 49, 67, 50, 68]]]]
PAGE_CRD = [[[[0, 9, 1, 10, 2, 11], [18, 27, 19, 28, 20, 29], [3, 12, 4, 13, 5, 14], [21, 30, 22, 31, 23, 32]],
             [[36, 45, 37, 46, 38, 47], [54, 63, 55, 64, 56, 65], [39, 48, 40, 49, 41, 50], [57, 66, 58, 67, 59, 68]]]]


def test_page_examples_join_and_split():
    a = np.array([[[[1, 2, 3], [4, 5, 6]]]], np.float32)
    b = np.array([[[[7, 8, 9, 10], [11, 12, 13, 14]]]], np.float32)
    assert dmlcli.run("join", a, b, axis=3).tolist() == [[[[1, 2, 3, 7, 8, 9, 10], [4, 5, 6, 11, 12, 13, 14]]]]
    three = [np.arange(1, 5, dtype=np.float32).reshape(1, 1, 2, 2) + 4 * k for k in range(3)]
    assert dmlcli.run("join", *three, axis=3).tolist() == [[[[1, 2, 5, 6, 9, 10], [3, 4, 7, 8, 11, 12]]]]
    assert dmlcli.run("join", *three, axis=1).shape == (1, 3, 2, 2)
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 6, 2)
    rows = dmlcli.run("split", x, axis=2, output_sizes=[2, 1, 3])
    assert [p.shape for p in rows] == [(1, 1, 2, 2), (1, 1, 1, 2), (1, 1, 3, 2)]
    assert_same_bits(dmlcli.run("join", *rows, axis=2), x)  # the inverse of JOIN
    assert [p.tolist() for p in dmlcli.run("split", x, axis=3, output_count=2)] == [
        x[..., :1].tolist(), x[..., 1:].tolist()]


def test_page_examples_slice_and_slice1():
    assert dmlcli.run("slice", PAGE_4X4, offsets=[0, 0, 1, 2], sizes=[1, 1, 3, 2], strides=[1, 1, 1, 1]).tolist() == \
        [[[[7, 8], [11, 12], [15, 16]]]]
    assert dmlcli.run("slice", PAGE_4X4, offsets=[0, 0, 1, 0], sizes=[1, 1, 2, 2], strides=[1, 1, 2, 3]).tolist() == \
        [[[[5, 8], [13, 16]]]]
    window = {"input_window_offsets": [0, 0, 0, 1], "input_window_sizes": [1, 1, 4, 3]}
    assert dmlcli.run("slice1", PAGE_4X4, input_window_strides=[1, 1, 2, 2], **window).tolist() == \
        [[[[2, 4], [10, 12]]]]
    assert dmlcli.run("slice1", PAGE_4X4, input_window_strides=[1, 1, -2, 2], **window).tolist() == \
        [[[[14, 16], [6, 8]]]]


@pytest.mark.parametrize("op", ["padding", "padding1"])
def test_page_examples_padding(op):
    common = {"start_padding": [0, 0, 1, 2], "end_padding": [0, 0, 3, 4]}
    constant = dmlcli.run(op, PAGE_PAD, padding_mode="constant", padding_value=9, **common)[0, 0]
    assert constant.shape == (8, 10) and (constant[0] == 9).all() and (constant[5:] == 9).all()
    assert constant[1].tolist() == [9, 9, 1, 2, 3, 4, 9, 9, 9, 9]
    edge = dmlcli.run(op, PAGE_PAD, padding_mode="edge", **common)[0, 0]
    assert edge[0].tolist() == [1, 1, 1, 2, 3, 4, 4, 4, 4, 4]
    assert all(row.tolist() == [5, 5, 5, 6, 7, 8, 8, 8, 8, 8] for row in edge[5:])
    reflection = dmlcli.run(op, PAGE_PAD, padding_mode="reflection", **common)[0, 0]
    assert [row.tolist() for row in reflection] == [[7, 6, 5, 6, 7, 8, 7, 6, 5, 6], [3, 2, 1, 2, 3, 4, 3, 2, 1, 2]] * 4
    symmetric = dmlcli.run(op, PAGE_PAD, padding_mode="symmetric", **common)[0, 0]
    low, high = [2, 1, 1, 2, 3, 4, 4, 3, 2, 1], [6, 5, 5, 6, 7, 8, 8, 7, 6, 5]
    assert [row.tolist() for row in symmetric] == [low, low, high, low, high, high, low, high]


def test_page_examples_tile_depth_space_and_reverse():
    tiled = dmlcli.run("tile", np.array([[[[1, 2, 3], [4, 5, 6]]]], np.float32), repeats=[1, 1, 3, 3])
    assert tiled[0, 0].tolist() == [[1, 2, 3] * 3, [4, 5, 6] * 3] * 3
    assert dmlcli.run("depth_to_space", PAGE_DEPTH, block_size=2).tolist() == PAGE_DCR
    assert dmlcli.run("depth_to_space1", PAGE_DEPTH, block_size=2, order="depth_column_row").tolist() == PAGE_DCR
    assert dmlcli.run("depth_to_space1", PAGE_DEPTH, block_size=2, order="column_row_depth").tolist() == PAGE_CRD
    assert_same_bits(dmlcli.run("space_to_depth", np.array(PAGE_DCR, np.uint32), block_size=2), PAGE_DEPTH)
    assert_same_bits(dmlcli.run("space_to_depth1", np.array(PAGE_CRD, np.uint32), block_size=2, order=1), PAGE_DEPTH)
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4)
    lengths = np.array([2, 4, 3], np.uint32).reshape(1, 1, 3, 1)
    assert dmlcli.run("reverse_subsequences", x, lengths, axis=3)[0, 0].tolist() == \
        [[2, 1, 3, 4], [8, 7, 6, 5], [11, 10, 9, 12]]
    lengths = np.array([2, 3, 1, 0], np.uint32).reshape(1, 1, 1, 4)
    assert dmlcli.run("reverse_subsequences", x, lengths, axis=2)[0, 0].tolist() == \
        [[5, 10, 3, 4], [1, 6, 7, 8], [9, 2, 11, 12]]


# ---------------------------------------------------------------- bits: NaN payloads, -0.0 and subnormals copied


SPECIAL32 = np.array([0x7F800001, 0xFFC12345, 0x80000000, 0x00000001, 0x7FBFFFFF, 0x3F800000, 0xFF800000,
                      0x7FC00000], np.uint32)


@pytest.mark.parametrize("op, parameters, extra", [
    ("join", {"axis": 1}, "self"), ("split", {"axis": 1, "output_count": 2}, None),
    ("slice", {"offsets": [0, 1], "strides": [1, 2]}, None), ("slice1", {"input_window_strides": [-1, -3]}, None),
    ("padding", {"padding_mode": "reflection", "start_padding": [1, 3], "end_padding": [1, 5]}, None),
    ("padding1", {"padding_mode": "symmetric", "start_padding": [2, 9]}, None), ("tile", {"repeats": [2, 3]}, None),
    ("reverse_subsequences", {"axis": 1}, "lengths"),
])
def test_float_bits_are_copied_as_they_are(op, parameters, extra):
    x = SPECIAL32.reshape(2, 4).view(np.float32)
    inputs = [x, x] if extra == "self" else [x, np.array([[3], [9]], np.uint32)] if extra == "lengths" else [x]
    as_float = dmlcli.run(op, *inputs, **parameters)
    as_bits = dmlcli.run(op, *[i.view(np.uint32) if i.dtype == np.float32 else i for i in inputs], **parameters)
    for got, expected in zip(*(r if isinstance(r, tuple) else (r,) for r in (as_float, as_bits))):
        assert got.dtype == np.float32 and bits(got).tolist() == expected.tolist()


@pytest.mark.parametrize("op", ["depth_to_space1", "space_to_depth1"])
def test_float16_bits_are_copied_by_the_block_operators(op):
    x = np.array([0x7C01, 0xFE00, 0x8000, 0x0001] * 4, np.uint16).reshape(1, 4, 2, 2)
    if op == "space_to_depth1":
        x = x.reshape(1, 1, 4, 4)
    got = dmlcli.run(op, x.view(np.float16), block_size=2)
    assert_same_bits(got.view(np.uint16), dmlcli.run(op, x, block_size=2))


def test_d3d_float_rules_leave_data_movement_alone():
    x = np.array([0x00000001, 0x7F800001], np.uint32).view(np.float32)  # a subnormal and a signalling NaN
    got = dmlcli.run("tile", x, repeats=[2], float_rules="d3d")
    assert bits(got).tolist() == [1, 0x7F800001] * 2


# ---------------------------------------------------------------- SPLIT with the outputs' Sizes from a desc


def test_split_takes_the_outputs_sizes_from_their_descs():
    f32 = parse_data_type("float32")
    req = engine.request("split", axis=0, output_shapes={"OutputTensors": [(2, 3), (1, 3), (3, 3)]})
    verdict = engine.plan(req, [(f32, (6, 3))])
    assert [t.shape for t in verdict.call.outputs] == [(2, 3), (1, 3), (3, 3)]
    assert [t.name for t in verdict.call.outputs] == ["OutputTensors[0]", "OutputTensors[1]", "OutputTensors[2]"]
    bad = [((2, 3), (5, 3)), ((2, 3), (4, 2)), ((2, 3), (4,))]
    messages = [r"add up to 7, but InputTensor's size along Axis 0 is 6",
                r"OutputTensors\[1\] Sizes \[4, 2\] and InputTensor Sizes \[6, 3\] differ outside Axis 0",
                r"OutputTensors\[1\] has 1 dimensions but InputTensor has 2"]
    for shapes, message in zip(bad, messages):
        req = engine.request("split", axis=0, output_shapes={"OutputTensors": list(shapes)})
        with pytest.raises(dmlcli.ValidationError, match=message):
            engine.plan(req, [(f32, (6, 3))])
    one = engine.plan(engine.request("split", output_shape=(6, 3)), [(f32, (6, 3))])  # one piece: a copy
    assert [t.shape for t in one.call.outputs] == [(6, 3)]
    req = engine.request("split", axis=0, output_count=2, output_shapes={"OutputTensors": [(2, 3), (1, 3), (3, 3)]})
    with pytest.raises(dmlcli.ValidationError, match=r"OutputCount 2 does not match the 3 OutputTensors"):
        engine.plan(req, [(f32, (6, 3))])
    req = engine.request("split", axis=0, output_sizes=[3, 3], output_shapes={"OutputTensors": [(2, 3), (4, 3)]})
    with pytest.raises(dmlcli.ValidationError, match=r"OutputSizes \[3, 3\] differ from the OutputTensors' sizes "
                                                     r"along Axis 0, \[2, 4\]"):
        engine.plan(req, [(f32, (6, 3))])


def test_desc_fields_as_a_dxdispatch_model_writes_them():
    # DxDispatch's dml_slice.json: a 5x5 ramp 1..25, Offsets {0,0,1,1}, Sizes {1,1,3,2}, Strides {1,1,1,2}.
    f32 = parse_data_type("float32")
    desc = {"DimensionCount": 4, "Offsets": [0, 0, 1, 1], "Sizes": [1, 1, 3, 2], "Strides": [1, 1, 1, 2]}
    verdict = engine.plan(engine.request("slice", desc_fields=desc, output_shape=[1, 1, 3, 2]), [(f32, (1, 1, 5, 5))])
    ramp = np.arange(1, 26, dtype=np.float32).reshape(1, 1, 5, 5)
    assert engine.execute(verdict, [ramp], "cpu").output.tolist() == [[[[7, 9], [12, 14], [17, 19]]]]
    with pytest.raises(dmlcli.ValidationError, match=r"OutputTensor Sizes \[1, 1, 3, 3\] do not match"):
        engine.plan(engine.request("slice", desc_fields=desc, output_shape=[1, 1, 3, 3]), [(f32, (1, 1, 5, 5))])
    desc = {"InputWindowOffsets": [0, 1], "InputWindowSizes": [5, 4], "InputWindowStrides": [-2, 3]}
    verdict = engine.plan(engine.request("slice1", desc_fields=desc, output_shape=[2, 1]), [(f32, (5, 5))])
    assert engine.execute(verdict, [ramp[0, 0]], "cpu").output.tolist() == [[22], [12]]
    desc = {"BlockSize": 2, "Order": "DML_DEPTH_SPACE_ORDER_COLUMN_ROW_DEPTH"}
    verdict = engine.plan(engine.request("depth_to_space1", desc_fields=desc), [(parse_data_type("uint32"),
                                                                               PAGE_DEPTH.shape)])
    assert engine.execute(verdict, [PAGE_DEPTH], "cpu").output.tolist() == PAGE_CRD
    desc = {"PaddingMode": "DML_PADDING_MODE_WRAP", "PaddingValueDataType": "DML_TENSOR_DATA_TYPE_FLOAT32",
            "PaddingValue": 0, "DimensionCount": 2, "StartPadding": [1, 2], "EndPadding": [0, 1]}
    verdict = engine.plan(engine.request("padding1", desc_fields=desc), [(f32, (2, 3))])
    assert engine.execute(verdict, [ramp[0, 0, :2, :3]], "cpu").output.tolist() == [
        [7, 8, 6, 7, 8, 6], [2, 3, 1, 2, 3, 1], [7, 8, 6, 7, 8, 6]]
    with pytest.raises(dmlcli.ValidationError, match="PaddingMode WRAP is not available at DML_FEATURE_LEVEL_6_3"):
        engine.plan(engine.request("padding1", desc_fields=desc, feature_level="6_3"), [(f32, (2, 3))])


# ---------------------------------------------------------------- ONNX node tests as extra vectors


def onnx_case(name):
    path = SHARED / "onnx_operators" / f"onnx__test_{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (the ONNX node tests live in ../shared)")
    case = json.loads(path.read_text())
    tensors = [np.asarray(t["data"], dtype=t["dtype"]).reshape(t["shape"]) for t in case["inputs"]]
    expected = [np.asarray(t["data"], dtype=t["dtype"]).reshape(t["shape"]) for t in case["expected"]]
    return case, tensors, expected


CONCAT = ["concat_1d_axis_negative_1", "concat_2d_axis_0", "concat_2d_axis_1", "concat_2d_axis_negative_1",
          "concat_2d_axis_negative_2", "concat_3d_axis_1", "concat_3d_axis_2", "concat_3d_axis_negative_1",
          "concat_3d_axis_negative_2", "concat_3d_axis_negative_3"]


@pytest.mark.parametrize("name", CONCAT)
def test_onnx_concat(name):
    case, tensors, (expected,) = onnx_case(name)
    axis = case["attributes"]["axis"] % tensors[0].ndim  # DirectML's Axis is unsigned: ONNX's -1 is rank - 1
    assert_same_bits(dmlcli.run("join", *tensors, axis=axis), expected)


SPLITS = ["split_1d_uneven_split_opset18", "split_2d_uneven_split_opset18", "split_equal_parts_2d_opset13",
          "split_equal_parts_default_axis_opset18", "split_variable_parts_1d_opset13",
          "split_variable_parts_2d_opset13", "split_variable_parts_2d_opset18",
          "split_variable_parts_default_axis_opset13", "split_variable_parts_default_axis_opset18"]


@pytest.mark.parametrize("name", SPLITS)
def test_onnx_split(name):
    case, tensors, expected = onnx_case(name)
    axis = case["attributes"].get("axis", 0) % tensors[0].ndim
    # ONNX's split sizes (an input) or num_outputs (uneven: the last piece smaller) become the outputs' Sizes
    # along Axis, which DirectML reads from the output descs: here OutputSizes.
    got = dmlcli.run("split", tensors[0], axis=axis, output_sizes=[e.shape[axis] for e in expected])
    assert len(got) == len(expected)
    for piece, want in zip(got, expected):
        assert_same_bits(piece, want)


def test_onnx_split_into_zero_size_pieces_is_not_expressible():
    # split_zero_size_splits_opset13: a [0] input split into three [0] outputs. DirectML tensors have no zero
    # sizes, so the case is refused (exit 3), not bent to pass.
    _, tensors, _ = onnx_case("split_zero_size_splits_opset13")
    with pytest.raises(dmlcli.ValidationError, match=r"InputTensor Sizes \[0\] contain a zero"):
        dmlcli.run("split", tensors[0], output_sizes=[0, 0, 0])


def onnx_slice_to_slice1(shape, starts, ends, axes, steps):
    """ONNX Slice's clamped starts/ends/axes/steps as SLICE1's window: the span actually read and the stride."""
    offsets, windows, strides = [0] * len(shape), list(shape), [1] * len(shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= len(shape)
        size = shape[axis]
        start = min(max(start + size if start < 0 else start, 0), size - (step < 0))
        end = min(max(end + size if end < 0 else end, -1 if step < 0 else 0), size)
        count = max(0, -(-(end - start) // step))
        first, last = start, start + step * (count - 1)
        offsets[axis], windows[axis], strides[axis] = min(first, last), abs(last - first) + 1, step
    return offsets, windows, strides


@pytest.mark.parametrize("name", ["slice", "slice_default_axes", "slice_default_steps", "slice_end_out_of_bounds",
                                  "slice_negative_axes"])
def test_onnx_slice(name):
    case, tensors, (expected,) = onnx_case(name)
    x, starts, ends = tensors[:3]
    axes = tensors[3].tolist() if len(tensors) > 3 else list(range(len(starts)))
    steps = tensors[4].tolist() if len(tensors) > 4 else [1] * len(starts)
    offsets, windows, strides = onnx_slice_to_slice1(x.shape, starts.tolist(), ends.tolist(), axes, steps)
    got = dmlcli.run("slice1", x, input_window_offsets=offsets, input_window_sizes=windows,
                     input_window_strides=strides)
    assert_same_bits(got, expected)
    if all(s > 0 for s in strides):  # SLICE takes the same call with Sizes = the output's
        assert_same_bits(dmlcli.run("slice", x, offsets=offsets, sizes=list(expected.shape), strides=strides), expected)


@pytest.mark.parametrize("name", ["constant_pad", "constant_pad_axes", "constant_pad_negative_axes"])
def test_onnx_pad(name):
    case, tensors, (expected,) = onnx_case(name)
    x, pads = tensors[0], tensors[1].tolist()
    value = tensors[2] if len(tensors) > 2 else np.float32(0)
    axes = [a % x.ndim for a in tensors[3].tolist()] if len(tensors) > 3 else list(range(x.ndim))
    start, end = [0] * x.ndim, [0] * x.ndim
    for k, axis in enumerate(axes):  # ONNX's pads: every axis's begin, then every axis's end
        start[axis], end[axis] = pads[k], pads[k + len(axes)]
    assert min(start + end) >= 0  # negative ONNX pads (cropping) have no DirectML form; none here
    got = dmlcli.run("padding1", x, padding_mode="constant", padding_value=value[()], start_padding=start,
                     end_padding=end)
    assert_same_bits(got, expected)
    assert_same_bits(dmlcli.run("padding", x, padding_value=float(value), start_padding=start, end_padding=end),
                     expected)
    # ONNX's reflect/edge/wrap cases are not among the shared vectors (wrap: test_onnx_pad_wrap_through_the_suite).


def _onnx_pad_case(folder, name, x, pads, mode):
    """An ONNX node test of Pad (opset 19) in ../shared/onnx_operators's format, its expected output computed by
    ONNX's own reference implementation."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                             helper.make_tensor_value_info("pads", TensorProto.INT64, [len(pads)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    (y,) = ReferenceEvaluator(model).run(None, {"x": x, "pads": np.array(pads, np.int64)})
    case = {"onnx_op": "Pad", "case_name": name, "attributes": {"mode": mode}, "input_names": ["x", "pads"],
            "output_names": ["y"],
            "inputs": [{"dtype": "float32", "shape": list(x.shape), "data": x.tolist()},
                       {"dtype": "int64", "shape": [len(pads)], "data": pads}],
            "expected": [{"dtype": "float32", "shape": list(y.shape), "data": y.tolist()}]}
    (folder / f"onnx__{name}.json").write_text(json.dumps(case))


def test_onnx_pad_wrap_through_the_suite(tmp_path):
    """ONNX's Pad mode wrap runs as PADDING1 with PaddingMode WRAP (ONNX's own test_wrap_pad shape and pads); more
    padding than the input's size is skipped, saying that DirectML documents no result for it."""
    from dmlcli.suite import run_suite

    x = np.arange(60, dtype=np.float32).reshape(1, 3, 4, 5) / 7
    _onnx_pad_case(tmp_path, "test_wrap_pad", x, [0, 0, 1, 1, 0, 0, 1, 1], "wrap")
    _onnx_pad_case(tmp_path, "test_wrap_pad_one_copy", x, [0, 3, 4, 5, 0, 0, 4, 5], "wrap")
    _onnx_pad_case(tmp_path, "test_wrap_pad_past_one_copy", x, [0, 0, 5, 0, 0, 0, 0, 0], "wrap")
    results = {r.case_id: r for r in run_suite([tmp_path], backend="cpu", jobs=1).results}
    assert results["onnx__test_wrap_pad"].passed and results["onnx__test_wrap_pad_one_copy"].passed
    skipped = results["onnx__test_wrap_pad_past_one_copy"]
    assert skipped.verdict == "skipped" and "DirectML documents no result" in skipped.message


def test_onnx_tile():
    _, (x, repeats), (expected,) = onnx_case("tile_precomputed")
    assert_same_bits(dmlcli.run("tile", x, repeats=repeats.tolist()), expected)


def test_onnx_depth_to_space_and_space_to_depth():
    case, (x,), (expected,) = onnx_case("depthtospace_crd_mode_example")
    assert case["attributes"]["mode"] == "CRD"
    assert_same_bits(dmlcli.run("depth_to_space1", x, block_size=case["attributes"]["blocksize"],
                                order="column_row_depth"), expected)
    case, (x,), (expected,) = onnx_case("spacetodepth_example")  # one channel: DCR and CRD agree
    assert_same_bits(dmlcli.run("space_to_depth", x, block_size=case["attributes"]["blocksize"]), expected)
    case, (x,), (expected,) = onnx_case("spacetodepth_crd_mode_example")  # its expected output is CRD's layout
    assert_same_bits(dmlcli.run("space_to_depth1", x, block_size=case["attributes"]["blocksize"],
                                order="column_row_depth"), expected)


def test_onnx_reverse_sequence():
    case, (x, lens), (expected,) = onnx_case("reversesequence_time")
    batch_axis, time_axis = case["attributes"]["batch_axis"], case["attributes"]["time_axis"]
    # ONNX gives one int64 length per batch entry; DirectML needs an unsigned tensor of the input's rank with 1
    # along Axis (= ONNX's time axis) and the batch entries along batch_axis.
    shape = [1] * x.ndim
    shape[batch_axis] = lens.size
    lengths = lens.astype(np.uint32).reshape(shape)
    assert_same_bits(dmlcli.run("reverse_subsequences", x, lengths, axis=time_axis), expected)


# ---------------------------------------------------------------- the command line, once per operator

CLI_RUNS = [
    (["join", "[[1,2]]", "[[3,4]]", "--axis", "0"], [[1, 2], [3, 4]]),
    (["slice", "[1,2,3,4,5]", "--offsets", "1", "--strides", "2"], [2, 4]),
    (["slice1", "[1,2,3,4,5]", "--input-window-strides", "-2"], [5, 3, 1]),
    (["padding", "[1,2]", "--padding-mode", "symmetric", "--start-padding", "3"], [2, 2, 1, 1, 2]),
    (["padding1", "[1,2,3]", "--padding-mode", "wrap", "--start-padding", "2", "--end-padding", "3"],
     [2, 3, 1, 2, 3, 1, 2, 3]),
    (["padding1", "[1,2]", "--padding-value", "7", "--end-padding", "1", "--padding-value-data-type", "FLOAT32"],
     [1, 2, 7]),
    (["tile", "[1,2]", "--repeats", "2"], [1, 2, 1, 2]),
    (["depth_to_space", "[[[[1]],[[2]],[[3]],[[4]]]]", "--block-size", "2"], [[[[1, 2], [3, 4]]]]),
    (["depth_to_space1", "[[[[1]],[[2]],[[3]],[[4]]]]", "--block-size", "2", "--order", "column_row_depth"],
     [[[[1, 2], [3, 4]]]]),
    (["space_to_depth", "[[[[1,2],[3,4]]]]", "--block-size", "2"], [[[[1]], [[2]], [[3]], [[4]]]]),
    (["space_to_depth1", "[[[[1,2],[3,4]]]]", "--block-size", "2", "--order", "1"], [[[[1]], [[2]], [[3]], [[4]]]]),
]


@pytest.mark.parametrize("args, expected", CLI_RUNS, ids=[a[0] for a, _ in CLI_RUNS])
def test_cli_runs_each_operator(args, expected):
    result = CliRunner().invoke(cli, ["run", *args, "--dtype", "float32", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == expected


def test_cli_runs_split_and_reverse_subsequences(tmp_path):
    result = CliRunner().invoke(cli, ["run", "split", "[1,2,3,4,5,6]", "--dtype", "int8", "--output-sizes", "1,5",
                                      "-o", str(tmp_path / "pieces.npz")])
    assert result.exit_code == 0, result.output
    with np.load(tmp_path / "pieces.npz") as pieces:
        assert pieces["OutputTensors_0"].tolist() == [1] and pieces["OutputTensors_1"].tolist() == [2, 3, 4, 5, 6]
    lengths = json.dumps({"dtype": "uint32", "data": [[2], [9]]})
    result = CliRunner().invoke(cli, ["run", "reverse_subsequences", '{"dtype": "int16", "data": [[1,2,3],[4,5,6]]}',
                                      lengths, "--axis", "1", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[2, 1, 3], [6, 5, 4]]


def test_cli_padding_values_typed_and_float():
    # PADDING1's value is read exactly in the output's type; PADDING's is a FLOAT, truncated for integers.
    result = CliRunner().invoke(cli, ["run", "padding1", "[1,2]", "--dtype", "int64", "--padding-value",
                                      str(2**62 + 1), "--start-padding", "1", "-o", "-"])
    assert result.exit_code == 0 and json.loads(result.stdout)["data"] == [2**62 + 1, 1, 2]
    result = CliRunner().invoke(cli, ["run", "padding", "[1,2]", "--dtype", "int32", "--padding-value", "-10.6",
                                      "--end-padding", "1", "-o", "-"])
    assert result.exit_code == 0 and json.loads(result.stdout)["data"] == [1, 2, -10]


def test_cli_table_shows_every_output_of_split():
    result = CliRunner().invoke(cli, ["run", "split", "[1,2,3]", "--dtype", "uint8", "--output-sizes", "1,2"])
    assert result.exit_code == 0, result.output
    assert "SPLIT · OutputTensors[0] · DML_FEATURE_LEVEL_6_4 · cpu · UINT8 · shape [1]" in result.stdout
    assert "SPLIT · OutputTensors[1] · DML_FEATURE_LEVEL_6_4 · cpu · UINT8 · shape [2]" in result.stdout


def test_describe_and_ops_list_the_family():
    result = CliRunner().invoke(cli, ["describe", "padding1"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "DML_OPERATOR_PADDING1 (DML_OPERATOR_TYPE 155)" in text and "DML_PADDING_MODE_SYMMETRIC = 3" in text
    assert "DML_PADDING_MODE_WRAP = 4" in text and "Releases.md" in text
    assert "must have the same DimensionCount and Sizes" not in text  # a shaped operator's Sizes are its rule's
    result = CliRunner().invoke(cli, ["ops"])
    assert result.exit_code == 0 and "data movement (14)" in result.stdout  # with FOLD and UNFOLD (movement/fold.py)


def test_whole_word_reads_stay_inside_the_allocation():
    """SLICE's GPU gather reads a thread's 16-byte words whole only where they start on 16-byte boundaries and the
    last one ends inside the view's allocation (it reaches step - 1 elements past the last output)."""
    from types import SimpleNamespace

    from dmlcli.operators.movement.gpu import _reads_whole_words

    def view(ptr, start, size, itemsize=4):
        memory = SimpleNamespace(ptr=start, size=size)
        return SimpleNamespace(dtype=np.dtype(f"uint{itemsize * 8}"), data=SimpleNamespace(ptr=ptr, mem=memory))

    # 4 rows of 8 outputs, every other element of 16-element rows: the last output at element 62, its word to 63.
    assert _reads_whole_words(view(4096, 4096, 64 * 4), [4, 8], [16, 2], 4)
    assert not _reads_whole_words(view(4096, 4096, 63 * 4), [4, 8], [16, 2], 4)  # the last word would overrun
    assert not _reads_whole_words(view(4100, 4096, 4096), [4, 8], [16, 2], 4)  # off a 16-byte boundary
    assert not _reads_whole_words(view(4096, 4096, 4096), [4, 8], [18, 2], 4)  # a row step off the vectors
    assert not _reads_whole_words(view(4096, 4096, 4096), [4, 8], [16, 5], 4)  # a step past SPAN_MAX_STEP
    assert not _reads_whole_words(view(4096, 4096, 4096), [32], [-2], 4)  # backwards
    assert _reads_whole_words(view(4096 + 3 * 64, 4096, 64 * 4), [4, 8], [-16, 2], 4)  # rows backwards, from the last
