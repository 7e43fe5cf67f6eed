"""Pooling: AVERAGE_POOLING(1), LP_POOLING(1), MAX_POOLING(1, 2) and MAX_UNPOOLING.

Every expected value comes from an independent reference written here with plain Python loops over output
coordinates and window elements (in float64), from the pages' rules, or from ONNX's node tests (their
auto_pad, ceil_mode and count_include_pad mapped by hand below onto explicit paddings and IncludePadding),
never from dmlcli's kernels. Maxima are selections: compared bit for bit. Averages and Lp norms are checked
within WebNN's pool2d tolerance (N + 2 ULP for a window of N elements). The support tables are transcribed a
second time below and checked against acceptance at every feature level.
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
from dmlcli.api import plan
from dmlcli.cli import cli
from dmlcli.checking.comparison import ulp_distance
from dmlcli.data_types import parse_data_type
from dmlcli.operators import find_operator
import shaped_cli  # noqa: E402 - tests/ is on the path

from conftest import SHARED

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL = "float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8".split()
F = ["float32", "float16"]
T4 = F + ["int8", "uint8"]
T10 = ALL[1:]

# ---------------------------------------------------------------- the support tables, transcribed again
# operator: [(level, the input's and output's data types)], newest first; every row takes 4 to 5 dimensions
# (MAX_UNPOOLING: 4 only)
TABLES = {
    "AVERAGE_POOLING": [("1_0", F)],
    "AVERAGE_POOLING1": [("6_2", F)],
    "LP_POOLING": [("1_0", F)],
    "LP_POOLING1": [("6_2", F)],
    "MAX_POOLING": [("5_0", T10), ("3_0", T4), ("1_0", F)],
    "MAX_POOLING1": [("5_0", T10), ("3_0", T4), ("2_0", F)],
    "MAX_POOLING2": [("5_0", T10), ("3_0", T4), ("2_1", F)],
}
INDEX_TYPES = {"MAX_POOLING1": [("5_0", ["uint64", "uint32"]), ("2_0", ["uint32"])],
               "MAX_POOLING2": [("5_0", ["uint64", "uint32"]), ("2_1", ["uint32"])]}
ENUMS = {"AVERAGE_POOLING": 56, "LP_POOLING": 57, "MAX_POOLING": 58, "MAX_POOLING1": 91, "MAX_UNPOOLING": 92,
         "MAX_POOLING2": 110, "LP_POOLING1": 165, "AVERAGE_POOLING1": 166, "ROI_POOLING": 59}


def row_at(table, level):
    found = [row for row in table if LEVELS.index(row[0]) <= LEVELS.index(level)]
    return found[0] if found else None


def expected_accepts(op, level, dtype, rank):
    row = row_at(TABLES[op], level)
    return row is not None and dtype in row[1] and rank in (4, 5)


@pytest.mark.parametrize("op", sorted(TABLES))
def test_validation_grid(op):
    failures = []
    for level in LEVELS:
        for dtype in ALL:
            for rank in (3, 4, 5):
                shape = (1, 2) + (3,) * (rank - 2)
                # rank 3 is refused for its DimensionCount, in other words than a type's or a level's
                shaped_cli.judge_cell(f"{op} {level} {dtype} rank {rank}",
                                      lambda: plan(op, [(parse_data_type(dtype), shape)], feature_level=level,
                                                   window_size=[2] * (rank - 2)),
                                      expected_accepts(op, level, dtype, rank),
                                      lambda: next(lv for lv in LEVELS if expected_accepts(op, lv, dtype, rank)),
                                      failures, any_message=rank == 3)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("op", sorted(INDEX_TYPES))
def test_index_output_types_by_level(op):
    f32 = parse_data_type("float32")
    for level in LEVELS:
        for index_type in ("uint32", "uint64", "int32", "int64"):
            row = row_at(INDEX_TYPES[op], level)
            want = row is not None and index_type in row[1]
            try:
                plan(op, [(f32, (1, 1, 3, 3))], feature_level=level, window_size=[2, 2], output_dtype=index_type)
                got = True
            except dmlcli.ValidationError:
                got = False
            assert got == want, (op, level, index_type)


def test_max_unpooling_support_by_level():
    f32, f64, i8 = (parse_data_type(t) for t in ("float32", "float64", "int8"))
    u32, u64 = parse_data_type("uint32"), parse_data_type("uint64")
    assert plan("max_unpooling", [(f32, (1, 1, 2, 2)), (u32, (1, 1, 2, 2))],
                output_shape=(1, 1, 4, 4)).lowest_feature_level.short == "3_0"
    assert plan("max_unpooling", [(f32, (1, 1, 2, 2)), (u64, (1, 1, 2, 2))],
                output_shape=(1, 1, 4, 4)).lowest_feature_level.short == "5_0"
    assert plan("max_unpooling", [(i8, (1, 1, 2, 2)), (u32, (1, 1, 2, 2))],
                output_shape=(1, 1, 4, 4)).lowest_feature_level.short == "5_0"
    with pytest.raises(dmlcli.ValidationError, match="not available at DML_FEATURE_LEVEL_2_1"):
        plan("max_unpooling", [(f32, (1, 1, 2, 2)), (u32, (1, 1, 2, 2))], output_shape=(1, 1, 4, 4),
             feature_level="2_1")
    with pytest.raises(dmlcli.ValidationError, match="no feature level accepts"):
        plan("max_unpooling", [(f64, (1, 1, 2, 2)), (u32, (1, 1, 2, 2))], output_shape=(1, 1, 4, 4))
    with pytest.raises(dmlcli.ValidationError):  # 5-D: the page's table takes 4 dimensions only
        plan("max_unpooling", [(f32, (1, 1, 2, 2, 2)), (u32, (1, 1, 2, 2, 2))], output_shape=(1, 1, 4, 4, 4))


@pytest.mark.parametrize("op", sorted(ENUMS))
def test_entry_names_enum_values_and_levels(op):
    entry = find_operator(op)
    assert entry.enum_value == ENUMS[op] and entry.family == "pooling"
    if op in TABLES:
        assert entry.introduced.short == TABLES[op][-1][0]
    assert entry.exactness == ("exact" if "MAX" in op or op == "ROI_POOLING" else "approximate")


def test_array_fields_share_dimension_count():
    for op in ("AVERAGE_POOLING1", "MAX_POOLING2", "LP_POOLING1"):
        arrays = [p for p in find_operator(op).parameters if p.field in
                  ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations")]
        assert len(arrays) == 5 and {p.count_field for p in arrays} == {"DimensionCount"}


# ---------------------------------------------------------------- the rules (exit 3) and usage errors (exit 2)


def arr(shape, dtype="float32"):
    return np.arange(math.prod(shape)).astype(dtype).reshape(shape)


X = arr((1, 1, 4, 4))
RULES = [
    ("max_pooling", [X], {"window_size": [5, 2]},
     r"MAX_POOLING: the window spans 5 elements in spatial dimension 0 \(WindowSize\[0\]\) but the padded input has "
     r"4 .*the window must fit the padded input"),
    ("max_pooling2", [X], {"window_size": [2, 2], "dilations": [1, 4]},
     r"the window spans 5 elements in spatial dimension 1 \(\(WindowSize\[1\] - 1\) \* Dilations\[1\] \+ 1\)"),
    ("average_pooling", [X], {"window_size": [2]},
     r"WindowSize has 1 values but InputTensor has 2 spatial dimensions \(DimensionCount must be 2 for a 4-D "
     r"input, 3 for a 5-D input"),
    ("lp_pooling", [X], {"window_size": [2, 2], "strides": [1, 1, 1]}, r"Strides has 3 values but InputTensor has 2"),
    ("average_pooling", [X], {"window_size": [2, 2], "strides": [0, 1]}, r"Strides\[0\] is 0; it must be at least 1"),
    ("average_pooling1", [X], {"window_size": [2, 0]}, r"WindowSize\[1\] is 0; it must be at least 1"),
    ("max_pooling2", [X], {"window_size": [2, 2], "dilations": [0, 1]}, r"Dilations\[0\] is 0"),
    ("average_pooling", [X], {"window_size": [2, 2], "end_padding": [0, 2]},
     r"output position 4 of spatial dimension 1 reads only padding .*every window must read at least one input "
     "element"),
    ("max_unpooling", [arr((1, 1, 2, 2)), arr((1, 1, 2, 1), "uint32")], {"output_shape": (1, 1, 4, 4)},
     r"IndicesTensor Sizes \[1, 1, 2, 1\] differ from InputTensor Sizes \[1, 1, 2, 2\]"),
    ("max_unpooling", [arr((1, 1, 2, 2)), arr((1, 1, 2, 2), "uint32")], {"output_shape": (1, 2, 4, 4)},
     r"OutputTensor Sizes \[1, 2, 4, 4\] and InputTensor Sizes \[1, 1, 2, 2\] differ in the batch or channel"),
    ("max_unpooling", [arr((1, 1, 2, 2)), arr((1, 1, 2, 2), "uint32")], {"output_shape": (1, 1, 16)},
     r"OutputTensor has 3 dimensions and InputTensor 4"),
]


@pytest.mark.parametrize("op, inputs, parameters, message", RULES)
def test_rule_violations_name_field_value_and_what_is_allowed(op, inputs, parameters, message):
    with pytest.raises(dmlcli.ValidationError, match=message):
        dmlcli.run(op, *inputs, **parameters)


def tensor_text(array):
    return json.dumps({"dtype": str(array.dtype), "data": array.tolist()})


def cli_args(op, inputs, parameters):
    return shaped_cli.cli_args(op, inputs, parameters, "-o", "-")


@pytest.mark.parametrize("op, inputs, parameters, message", RULES)
def test_rule_violations_exit_3_on_the_command_line(op, inputs, parameters, message):
    result = CliRunner().invoke(cli, cli_args(op, inputs, parameters))
    assert result.exit_code == 3, result.output
    assert result.output.startswith("dmlcli: error: ") and result.output.count("\n") == 1
    assert "Traceback" not in result.output


USAGE = [
    ("max_pooling", [X], {}, r"WindowSize is required"),
    ("lp_pooling", [X], {"window_size": [2, 2], "p": [0]}, r"P .*out of range"),
    ("max_unpooling", [arr((1, 1, 2, 2)), arr((1, 1, 2, 2), "uint32")], {}, r"give them with --output-shape"),
]


@pytest.mark.parametrize("op, inputs, parameters, message", USAGE)
def test_usage_errors_exit_2(op, inputs, parameters, message):
    result = CliRunner().invoke(cli, cli_args(op, inputs, parameters))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


# ---------------------------------------------------------------- the references (plain loops, float64)


def windows(shape, window, strides, start, end, dilations):
    """Yield (output coordinate, [input coordinates the window reads, or None for padding]) in row-major window
    order, with the output's spatial Sizes computed from the pages' formula (the dilated extent)."""
    spatial = len(shape) - 2
    out = [(shape[d + 2] + start[d] + end[d] - ((window[d] - 1) * dilations[d] + 1)) // strides[d] + 1
           for d in range(spatial)]
    for n, c in itertools.product(range(shape[0]), range(shape[1])):
        for o in itertools.product(*(range(s) for s in out)):
            taps = []
            for k in itertools.product(*(range(w) for w in window)):
                coords = [o[d] * strides[d] + k[d] * dilations[d] - start[d] for d in range(spatial)]
                inside = all(0 <= coords[d] < shape[d + 2] for d in range(spatial))
                taps.append((n, c, *coords) if inside else None)
            yield (n, c, *o), taps
    return out


def out_shape(shape, window, strides, start, end, dilations):
    return tuple(shape[:2]) + tuple((shape[d + 2] + start[d] + end[d] - ((window[d] - 1) * dilations[d] + 1))
                                    // strides[d] + 1 for d in range(len(shape) - 2))


def reference(kind, x, window, strides, start, end, dilations, include_padding=False, p=2):
    shape = out_shape(x.shape, window, strides, start, end, dilations)
    result = np.zeros(shape, np.float64)
    indices = np.zeros(shape, np.int64)
    for o, taps in windows(x.shape, window, strides, start, end, dilations):
        read = [t for t in taps if t is not None]
        values = [float(x[t]) for t in read]
        if kind == "average":
            result[o] = sum(values) / (len(taps) if include_padding else len(read))
        elif kind == "lp":
            result[o] = sum(abs(v) ** p for v in values) ** (1.0 / p)
        else:
            best = None
            for t, v in zip(read, values):  # NaN skipped; the first of equal values wins
                if best is None or (math.isnan(best[1]) and not math.isnan(v)) or v > best[1]:
                    best = (t, v)
            result[o] = best[1]
            indices[o] = np.ravel_multi_index(best[0], x.shape)
    return result, indices


@st.composite
def pooling_calls(draw, dilated=True):
    spatial = draw(st.sampled_from([2, 3]))
    sizes = [draw(st.integers(2, 6)) for _ in range(spatial)]
    window = [draw(st.integers(1, 3)) for _ in range(spatial)]
    dilations = [draw(st.integers(1, 2)) if dilated else 1 for _ in range(spatial)]
    strides = [draw(st.integers(1, 3)) for _ in range(spatial)]
    start, end = [], []
    for d in range(spatial):
        extent = (window[d] - 1) * dilations[d] + 1
        start.append(draw(st.integers(0, extent - 1)))  # below the extent: every window reads an input element
        end.append(draw(st.integers(0, extent - 1)))
        if sizes[d] + start[d] + end[d] < extent:
            sizes[d] = extent
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *sizes)
    return shape, dict(window_size=window, strides=strides, start_padding=start, end_padding=end,
                       **({"dilations": dilations} if dilated else {}))


def geometry_of(parameters):
    spatial = len(parameters["window_size"])
    return (parameters["window_size"], parameters["strides"], parameters["start_padding"],
            parameters["end_padding"], parameters.get("dilations", [1] * spatial))


def reads_only_input(shape, parameters):
    for _, taps in windows(shape, *geometry_of(parameters)):
        if all(t is None for t in taps):
            return False
    return True


def assert_within_ulp(got, want, limit, floor=0.0):
    want = want.astype(got.dtype)
    ulps = ulp_distance(got, want)
    close = (ulps <= limit) | (np.abs(got.astype(np.float64) - want.astype(np.float64)) <= floor)
    assert close.all(), f"largest error {ulps.max()} ULP (limit {limit}) at {np.argwhere(~close)[:3].tolist()}"


@SETTINGS
@given(pooling_calls(), st.booleans(), st.sampled_from(["float32", "float16"]), st.sampled_from([0, 1]))
def test_average_pooling_matches_the_reference(call, include_padding, dtype, seed):
    shape, parameters = call
    if not reads_only_input(shape, parameters):
        return
    x = np.random.default_rng(seed).uniform(0.5, 2.0, shape).astype(dtype)  # one sign: no cancellation
    want, _ = reference("average", x, *geometry_of(parameters), include_padding=include_padding)
    got = dmlcli.run("average_pooling1", x, include_padding=include_padding, **parameters)
    assert got.dtype == x.dtype and got.shape == want.shape
    assert_within_ulp(got, want, math.prod(parameters["window_size"]) + 2)


@SETTINGS
@given(pooling_calls(), st.sampled_from([1, 2, 3]), st.sampled_from(["float32", "float16"]))
def test_lp_pooling_matches_the_reference(call, p, dtype):
    shape, parameters = call
    if not reads_only_input(shape, parameters):
        return
    x = np.random.default_rng(p).uniform(-2.0, 2.0, shape).astype(dtype)
    want, _ = reference("lp", x, *geometry_of(parameters), p=p)
    got = dmlcli.run("lp_pooling1", x, p=p, **parameters)
    count = math.prod(parameters["window_size"])
    assert_within_ulp(got, want, count + 2 if p in (1, 2) else 2 * count + 4)


@SETTINGS
@given(pooling_calls(), st.sampled_from(["float32", "float16", "int8", "uint8", "int64"]))
def test_max_pooling2_matches_the_reference_values_and_indices(call, dtype):
    shape, parameters = call
    if not reads_only_input(shape, parameters):
        return
    rng = np.random.default_rng(len(shape))
    x = rng.integers(-3, 4, shape).astype(dtype) if dtype != "uint8" else rng.integers(0, 4, shape).astype(dtype)
    want, want_indices = reference("max", x, *geometry_of(parameters))  # small integers: many ties
    values, indices = dmlcli.run("max_pooling2", x, output_dtype="uint64", **parameters)
    assert values.dtype == x.dtype and indices.dtype == np.uint64
    np.testing.assert_array_equal(values, want.astype(dtype))
    np.testing.assert_array_equal(indices.astype(np.int64), want_indices)


@SETTINGS
@given(pooling_calls(dilated=False))
def test_plain_operators_equal_their_dilated_forms_with_dilations_1(call):
    shape, parameters = call
    if not reads_only_input(shape, parameters):
        return
    x = np.random.default_rng(3).uniform(0.5, 2.0, shape).astype(np.float32)
    assert np.array_equal(dmlcli.run("max_pooling", x, **parameters),
                          dmlcli.run("max_pooling2", x, **parameters)[0])
    assert np.array_equal(dmlcli.run("max_pooling1", x, **parameters)[1],
                          dmlcli.run("max_pooling2", x, **parameters)[1])
    assert np.array_equal(dmlcli.run("average_pooling", x, include_padding=True, **parameters),
                          dmlcli.run("average_pooling1", x, include_padding=True, **parameters))
    assert np.array_equal(dmlcli.run("lp_pooling", x, p=2, **parameters),
                          dmlcli.run("lp_pooling1", x, p=2, **parameters))


def test_include_padding_changes_only_the_divisor():
    x = np.ones((1, 1, 2, 2), np.float32)
    common = dict(window_size=[3, 3], start_padding=[1, 1], end_padding=[1, 1])
    assert dmlcli.run("average_pooling", x, include_padding=False, **common).tolist() == [[[[1, 1], [1, 1]]]]
    assert (dmlcli.run("average_pooling", x, include_padding=True, **common) == np.float32(4) / np.float32(9)).all()


def test_float16_average_is_summed_in_float32_and_rounded_once():
    # 2048 + 1 + 1 + 1: FLOAT16 adding one at a time would stay at 2048 (its spacing there is 2).
    x = np.array([[[[2048, 1], [1, 1]]]], np.float16)
    got = dmlcli.run("average_pooling", x, window_size=[2, 2])
    assert got.dtype == np.float16 and float(got[0, 0, 0, 0]) == float(np.float16(2051 / 4))


def test_mixed_signs_average_within_the_floor():
    x = np.random.default_rng(5).standard_normal((1, 3, 9, 9)).astype(np.float32)
    parameters = dict(window_size=[3, 3], start_padding=[2, 2], end_padding=[2, 2])
    want, _ = reference("average", x, [3, 3], [1, 1], [2, 2], [2, 2], [1, 1])
    got = dmlcli.run("average_pooling", x, **parameters)
    assert_within_ulp(got, want, 11, floor=2.0 ** -20)


def test_max_pooling_nan_and_ties():
    nan = np.nan
    x = np.array([[[[nan, 1.0, 1.0], [nan, nan, 0.5], [nan, nan, nan]]]], np.float32)
    values, indices = dmlcli.run("max_pooling1", x, window_size=[2, 2])
    # NaN skipped; the tie of 1.0 at flat 1 and 2 gives the first; a window of nothing but NaN gives NaN
    # and its first element.
    assert values[0, 0, 0, 0] == 1.0 and indices[0, 0, 0, 0] == 1
    assert values[0, 0, 0, 1] == 1.0 and indices[0, 0, 0, 1] == 1
    assert np.isnan(values[0, 0, 1, 0]) and indices[0, 0, 1, 0] == 3
    assert values[0, 0, 1, 1] == 0.5 and indices[0, 0, 1, 1] == 5


def test_max_pooling_padding_is_never_the_maximum():
    x = np.full((1, 1, 2, 2), -100, np.int8)
    values, indices = dmlcli.run("max_pooling2", x, window_size=[2, 2], start_padding=[1, 1], end_padding=[1, 1])
    assert (values == -100).all() and indices.tolist() == [[[[0, 0, 1], [0, 0, 1], [2, 2, 3]]]]
    x = np.full((1, 1, 2, 2), -np.inf, np.float32)
    values, _ = dmlcli.run("max_pooling1", x, window_size=[3, 3], start_padding=[1, 1], end_padding=[1, 1])
    assert (values == -np.inf).all()


def test_max_pooling_indices_count_the_whole_tensor():
    x = np.random.default_rng(1).permutation(2 * 3 * 4 * 4).astype(np.float32).reshape(2, 3, 4, 4)
    values, indices = dmlcli.run("max_pooling1", x, window_size=[2, 2], strides=[2, 2])
    assert np.array_equal(x.reshape(-1)[indices.astype(np.int64)], values)
    assert indices.max() >= 3 * 16  # past the first channel: batch and channel are part of the flat index


def test_max_unpooling_undoes_max_pooling_and_its_edge_rules():
    x = np.random.default_rng(2).permutation(16).astype(np.float32).reshape(1, 1, 4, 4)
    values, indices = dmlcli.run("max_pooling2", x, window_size=[2, 2], strides=[2, 2])
    got = dmlcli.run("max_unpooling", values, indices, output_shape=(1, 1, 4, 4))
    want = np.zeros(16, np.float32)
    for v, i in zip(values.reshape(-1), indices.reshape(-1)):
        want[i] = v
    assert np.array_equal(got.reshape(-1), want)
    # Several values for one index: the last in row-major order; an index past the output is skipped.
    source = np.array([[[[1, 2], [3, 4]]]], np.int32)
    index = np.array([[[[5, 5], [99, 0]]]], np.uint32)
    got = dmlcli.run("max_unpooling", source, index, output_shape=(1, 1, 2, 3))
    assert got.tolist() == [[[[4, 0, 0], [0, 0, 2]]]]


# ---------------------------------------------------------------- ONNX node tests as extra vectors


def onnx_case(name):
    path = SHARED / "onnx_operators" / f"onnx__test_{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (the ONNX node tests live in ../shared)")
    case = json.loads(path.read_text())
    tensors = [np.asarray(t["data"], dtype=t["dtype"]).reshape(t["shape"]) for t in case["inputs"]]
    expected = [np.asarray(t["data"], dtype=t["dtype"]).reshape(t["shape"]) for t in case["expected"]]
    return case, tensors, expected


def onnx_paddings(attributes, sizes):
    """ONNX's auto_pad / pads / ceil_mode as DirectML's explicit (StartPadding, EndPadding), by hand."""
    spatial = len(sizes)
    kernel = attributes["kernel_shape"]
    strides = attributes.get("strides", [1] * spatial)
    dilations = attributes.get("dilations", [1] * spatial)
    pads = attributes.get("pads", [0] * 2 * spatial)
    start, end = list(pads[:spatial]), list(pads[spatial:])
    mode = attributes.get("auto_pad", "NOTSET")
    for d in range(spatial):
        extent = (kernel[d] - 1) * dilations[d] + 1
        if mode in ("SAME_UPPER", "SAME_LOWER"):
            total = max((math.ceil(sizes[d] / strides[d]) - 1) * strides[d] + extent - sizes[d], 0)
            start[d], end[d] = ((total // 2, total - total // 2) if mode == "SAME_UPPER"
                                else (total - total // 2, total // 2))
        if attributes.get("ceil_mode"):
            padded = sizes[d] + start[d] + end[d]
            count = math.ceil((padded - extent) / strides[d]) + 1
            if (count - 1) * strides[d] >= sizes[d] + start[d]:
                count -= 1
            end[d] += max((count - 1) * strides[d] + extent - padded, 0)
    return dict(window_size=kernel, strides=strides, start_padding=start, end_padding=end), dilations


AVERAGE_CASES = ["averagepool_2d_default", "averagepool_2d_pads", "averagepool_2d_pads_count_include_pad",
                 "averagepool_2d_precomputed_pads", "averagepool_2d_precomputed_same_upper",
                 "averagepool_2d_precomputed_strides", "averagepool_2d_same_lower", "averagepool_2d_same_upper",
                 "averagepool_3d_dilations_small", "averagepool_2d_ceil"]
MAX_CASES = ["maxpool_2d_default", "maxpool_2d_dilations", "maxpool_2d_pads", "maxpool_2d_precomputed_pads",
             "maxpool_2d_precomputed_same_upper", "maxpool_2d_precomputed_strides", "maxpool_2d_same_lower",
             "maxpool_2d_same_upper", "maxpool_2d_strides", "maxpool_2d_uint8", "maxpool_3d_dilations_use_ref_impl",
             "maxpool_2d_ceil_output_size_reduce_by_one", "maxpool_with_argmax_2d_precomputed_pads"]
LP_CASES = ["lppool_2d_default", "lppool_2d_dilations", "lppool_2d_pads", "lppool_2d_same_lower",
            "lppool_2d_same_upper"]


@pytest.mark.parametrize("name", AVERAGE_CASES)
def test_onnx_average_pool(name):
    case, (x,), (expected,) = onnx_case(name)
    parameters, dilations = onnx_paddings(case["attributes"], x.shape[2:])
    include = bool(case["attributes"].get("count_include_pad", 0))
    got = dmlcli.run("average_pooling1", x, dilations=dilations, include_padding=include, **parameters)
    assert got.shape == expected.shape
    assert_within_ulp(got, expected, math.prod(parameters["window_size"]) + 2, floor=2.0 ** -20)


@pytest.mark.parametrize("name", MAX_CASES)
def test_onnx_max_pool(name):
    case, (x,), expected = onnx_case(name)
    parameters, dilations = onnx_paddings(case["attributes"], x.shape[2:])
    values, indices = dmlcli.run("max_pooling2", x, dilations=dilations, output_dtype="uint64", **parameters)
    assert np.array_equal(values, expected[0])
    if len(expected) > 1:  # storage_order 0: row-major indices into the whole tensor, as DirectML's
        assert np.array_equal(indices.astype(np.int64), expected[1])


@pytest.mark.parametrize("name", LP_CASES)
def test_onnx_lp_pool(name):
    case, (x,), (expected,) = onnx_case(name)
    parameters, dilations = onnx_paddings(case["attributes"], x.shape[2:])
    p = case["attributes"].get("p", 2)
    got = dmlcli.run("lp_pooling1", x, dilations=dilations, p=p, **parameters)
    count = math.prod(parameters["window_size"])
    assert_within_ulp(got, expected, count + 2 if p in (1, 2) else 2 * count + 4)


@pytest.mark.parametrize("name, op", [("globalaveragepool", "average_pooling"), ("globalmaxpool", "max_pooling"),
                                      ("globalaveragepool_precomputed", "average_pooling"),
                                      ("globalmaxpool_precomputed", "max_pooling")])
def test_onnx_global_pools(name, op):
    _, (x,), (expected,) = onnx_case(name)
    got = dmlcli.run(op, x, window_size=list(x.shape[2:]))
    assert_within_ulp(got, expected, math.prod(x.shape[2:]) + 2)


def test_onnx_max_unpool():
    case, (x, indices), (expected,) = onnx_case("maxunpool_export_without_output_shape")
    got = dmlcli.run("max_unpooling", x, indices.astype(np.uint64), output_shape=expected.shape)
    assert np.array_equal(got, expected)


def test_onnx_storage_order_1_is_not_expressible():
    case, _, _ = onnx_case("maxpool_with_argmax_2d_precomputed_strides")
    assert case["attributes"]["storage_order"] == 1  # column-major indices: DirectML's are row-major


POOL_FILES = sorted(p for p in SHARED.glob("onnx_operators/onnx__test_*pool*.json")) if SHARED.is_dir() else []


@pytest.mark.parametrize("path", POOL_FILES, ids=[p.stem for p in POOL_FILES])
def test_onnx_pool_cases_pass_through_the_table_or_skip_with_a_directml_reason(path):
    result = dmlcli.run_case(str(path))
    assert result.verdict in ("passed", "skipped"), result.message
    if result.verdict == "skipped":
        assert "not implemented in dmlcli" not in result.message and "DirectML" in result.message


# ---------------------------------------------------------------- the command line, once per operator

CLI_RUNS = [
    (["average_pooling", "[[[[1,2],[3,4]]]]", "--window-size", "2,2"], [[[[2.5]]]]),
    (["average_pooling1", "[[[[1,2],[3,4]]]]", "--window-size", "2,2", "--start-padding", "1,0",
      "--include-padding", "true"], [[[[0.75], [2.5]]]]),
    (["lp_pooling", "[[[[3,4],[0,0]]]]", "--window-size", "1,2", "--p", "2"], [[[[5.0], [0.0]]]]),
    (["lp_pooling1", "[[[[1,2],[3,4]]]]", "--window-size", "2,1", "--dilations", "1,1", "--p", "1"],
     [[[[4.0, 6.0]]]]),
    (["max_pooling", "[[[[1,5],[3,4]]]]", "--window-size", "2,2"], [[[[5.0]]]]),
]


@pytest.mark.parametrize("args, expected", CLI_RUNS, ids=[a[0] for a, _ in CLI_RUNS])
def test_cli_runs_each_operator(args, expected):
    result = CliRunner().invoke(cli, ["run", *args, "--dtype", "float32", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == expected


@pytest.mark.parametrize("op", ["max_pooling1", "max_pooling2"])
def test_cli_max_pooling_with_indices_prints_both_outputs(op):
    result = CliRunner().invoke(cli, ["run", op, "[[[[1,5],[3,4]]]]", "--dtype", "float32", "--window-size", "1,2",
                                      "--output-dtype", "uint64", "-o", "-"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["OutputTensor"]["data"] == [[[[5.0], [4.0]]]]
    assert printed["OutputIndicesTensor"] == {"dtype": "uint64", "shape": [1, 1, 2, 1], "data": [[[[1], [3]]]]}


def test_cli_max_unpooling():
    result = CliRunner().invoke(cli, ["run", "max_unpooling", '{"dtype": "float32", "data": [[[[7]]]]}',
                                      '{"dtype": "uint32", "data": [[[[2]]]]}', "--output-shape", "1,1,2,2",
                                      "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[[[0.0, 0.0], [7.0, 0.0]]]]


# ---------------------------------------------------------------- ROI_POOLING


def c_round(value):
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def roi_pooling_reference(x, rois, scale, pooled_h, pooled_w):
    """The page's equations element by element (integer divisions, clamped); empty bins and bad batches 0."""
    out = np.zeros((rois.shape[2], x.shape[1], pooled_h, pooled_w), x.dtype)
    for r, (batch, *corners) in enumerate(rois[0, 0].astype(np.float64)):
        if not 0 <= int(batch) < x.shape[0]:
            continue
        x1, y1, x2, y2 = (c_round(float(np.float32(v) * np.float32(scale))) for v in corners)
        height, width = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for c, i, j in itertools.product(range(x.shape[1]), range(pooled_h), range(pooled_w)):
            ys = min(max(i * height // pooled_h + y1, 0), x.shape[2])
            ye = min(max(((i + 1) * height + pooled_h - 1) // pooled_h + y1, 0), x.shape[2])
            xs = min(max(j * width // pooled_w + x1, 0), x.shape[3])
            xe = min(max(((j + 1) * width + pooled_w - 1) // pooled_w + x1, 0), x.shape[3])
            values = [float(x[int(batch), c, yy, xx]) for yy in range(ys, ye) for xx in range(xs, xe)]
            numbers = [v for v in values if not math.isnan(v)]
            if values:
                out[r, c, i, j] = max(numbers) if numbers else np.nan
    return out


@SETTINGS
@given(st.integers(1, 3), st.integers(3, 9), st.integers(3, 9), st.integers(1, 4), st.integers(1, 4),
       st.sampled_from([1.0, 0.5, 0.25]), st.sampled_from(["float32", "float16"]), st.integers(0, 3))
def test_roi_pooling_matches_the_reference(batch, height, width, pooled_h, pooled_w, scale, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 2, height, width)).astype(dtype)
    x.reshape(-1)[::7] = np.nan
    corners = rng.uniform(-2, 2 * max(height, width) / scale, (4, 4))
    corners[:, 2:] = np.maximum(corners[:, 2:], corners[:, :2])  # x2 >= x1, y2 >= y1, as the page requires
    batches = rng.integers(0, batch + 1, (4, 1))  # one past the last batch now and then: 0s
    rois = np.concatenate([batches, corners], axis=1).astype(dtype).reshape(1, 1, 4, 5)
    got = dmlcli.run("roi_pooling", x, rois, spatial_scale=scale, pooled_size=[pooled_h, pooled_w])
    want = roi_pooling_reference(x, rois, scale, pooled_h, pooled_w)
    assert got.dtype == x.dtype and np.array_equal(got, want, equal_nan=True)


def test_roi_pooling_support_and_rules():
    f32, f16, i32 = (parse_data_type(t) for t in ("float32", "float16", "int32"))
    assert plan("roi_pooling", [(f16, (1, 2, 4, 4)), (f16, (1, 1, 3, 5))],
                pooled_size=[2, 2]).lowest_feature_level.short == "1_0"
    with pytest.raises(dmlcli.ValidationError, match="no feature level accepts"):
        plan("roi_pooling", [(i32, (1, 2, 4, 4)), (i32, (1, 1, 3, 5))], pooled_size=[2, 2])
    with pytest.raises(dmlcli.ValidationError, match="differ"):
        plan("roi_pooling", [(f32, (1, 2, 4, 4)), (f16, (1, 1, 3, 5))], pooled_size=[2, 2])
    with pytest.raises(dmlcli.ValidationError, match=r"ROITensor Sizes \[1, 1, 3, 4\] are not \{ 1, 1, NumROIs, 5 \}"):
        plan("roi_pooling", [(f32, (1, 2, 4, 4)), (f32, (1, 1, 3, 4))], pooled_size=[2, 2])
    with pytest.raises(dmlcli.ValidationError, match=r"PooledSize.Width is 0; it must be at least 1"):
        plan("roi_pooling", [(f32, (1, 2, 4, 4)), (f32, (1, 1, 3, 5))], pooled_size=[2, 0])
    result = CliRunner().invoke(cli, ["run", "roi_pooling", "[[[[1,2],[3,4]]]]", "[[[[0,0,0,1]]]]", "--dtype",
                                      "float32", "--pooled-size", "1,1", "-o", "-"])
    assert result.exit_code == 3 and result.output.startswith("dmlcli: error: ROI_POOLING: ROITensor Sizes")
    result = CliRunner().invoke(cli, ["run", "roi_pooling", "[[[[1,2],[3,4]]]]", "[[[[0,0,0,1,1]]]]", "--dtype",
                                      "float32", "-o", "-"])
    assert result.exit_code == 2 and "PooledSize is required" in result.output


def test_cli_roi_pooling_and_the_desc_size_object():
    result = CliRunner().invoke(cli, ["run", "roi_pooling", "[[[[1,2],[3,4]]]]", "[[[[0,0,0,1,1]]]]", "--dtype",
                                      "float32", "--pooled-size", "1,2", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[[[3.0, 4.0]]]]
    pooled = find_operator("roi_pooling").parameters[1]
    assert pooled.parse_desc({"Width": 3, "Height": 2}, {}) == (2, 3)


def test_desc_fields_as_a_dxdispatch_model_writes_them():
    from dmlcli import engine

    f32 = parse_data_type("float32")
    ramp = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    desc = {"DimensionCount": 2, "Strides": [2, 2], "WindowSize": [2, 2], "StartPadding": [0, 0],
            "EndPadding": [0, 0], "Dilations": [1, 1]}
    verdict = engine.plan(engine.request("max_pooling2", desc_fields=desc), [(f32, (1, 1, 4, 4))])
    outputs = engine.execute(verdict, [ramp], "cpu").all_outputs
    assert outputs[0].tolist() == [[[[5, 7], [13, 15]]]] and outputs[1].tolist() == [[[[5, 7], [13, 15]]]]
    desc = {"SpatialScale": 1.0, "PooledSize": {"Width": 1, "Height": 2}}
    verdict = engine.plan(engine.request("roi_pooling", desc_fields=desc), [(f32, (1, 1, 4, 4)), (f32, (1, 1, 1, 5))])
    rois = np.array([[[[0, 0, 0, 3, 3]]]], np.float32)
    assert engine.execute(verdict, [ramp, rois], "cpu").output.tolist() == [[[[7.0], [15.0]]]]


# ---------------------------------------------------------------- ROI_ALIGN and ROI_ALIGN1


def roi_align_reference(x, rois, batches, out_h, out_w, *, function="AVERAGE", linear=True, scale=(1.0, 1.0),
                        input_offset=0.5, output_offset=-0.5, fill=0.0, minimum=1, maximum=2**32 - 1, corners=False):
    """Element by element, in float64 from FLOAT32 sample positions, as the entry's notes describe the reading."""
    out = np.zeros((len(rois), x.shape[1], out_h, out_w))
    for r, ((rx1, ry1, rx2, ry2), batch) in enumerate(zip(rois.astype(np.float32), batches)):
        axes = []
        for first, last, count, size, s in ((ry1, ry2, out_h, x.shape[2], scale[1]),
                                            (rx1, rx2, out_w, x.shape[3], scale[0])):
            first, last = float(np.float32(first) * np.float32(s)), float(np.float32(last) * np.float32(s))
            region = last - first
            samples = int(min(max(math.ceil(abs(region) / count), minimum), maximum))
            total = count * samples
            if corners and total > 1:
                positions = [k * (region / (total - 1)) + first - input_offset for k in range(total)]
            else:
                positions = [(k - output_offset) * (region / total) + first - input_offset for k in range(total)]
            axes.append((samples, [float(np.float32(p)) for p in positions], size))
        (sy, ys, height), (sx, xs, width) = axes
        for c, i, j in itertools.product(range(x.shape[1]), range(out_h), range(out_w)):
            values = []
            for y in ys[i * sy:(i + 1) * sy]:
                for xx in xs[j * sx:(j + 1) * sx]:
                    if y < -1 or y > height or xx < -1 or xx > width or batch >= x.shape[0]:
                        values.append(fill)
                        continue
                    y, xx = max(y, 0.0), max(xx, 0.0)
                    plane = x[int(batch), c].astype(np.float64)
                    if not linear:
                        values.append(plane[min(int(math.floor(y + 0.5)), height - 1),
                                            min(int(math.floor(xx + 0.5)), width - 1)])
                        continue
                    yl, xl = min(int(y), height - 1), min(int(xx), width - 1)
                    yh, xh = min(yl + 1, height - 1), min(xl + 1, width - 1)
                    fy = 0.0 if yl >= height - 1 else y - yl
                    fx = 0.0 if xl >= width - 1 else xx - xl
                    values.append((1 - fy) * (1 - fx) * plane[yl, xl] + (1 - fy) * fx * plane[yl, xh]
                                  + fy * (1 - fx) * plane[yh, xl] + fy * fx * plane[yh, xh])
            out[r, c, i, j] = max(values) if function == "MAX" else sum(values) / len(values)
    return out


@SETTINGS
@given(st.integers(1, 2), st.integers(2, 8), st.integers(2, 8), st.integers(1, 4), st.integers(1, 4),
       st.sampled_from(["AVERAGE", "MAX"]), st.booleans(), st.booleans(), st.sampled_from([(0.5, -0.5), (0.0, 0.0)]),
       st.sampled_from([(1, 2**32 - 1), (2, 2), (1, 3)]), st.sampled_from(["float32", "float16"]), st.integers(0, 3))
def test_roi_align1_matches_the_reference(batch, height, width, out_h, out_w, function, linear, corners, offsets,
                                          bounds, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.5, 2.0, (batch, 2, height, width)).astype(dtype)
    rois = rng.uniform(-2, max(height, width) + 2, (3, 4)).astype(dtype)  # inverted and outside regions too
    batches = rng.integers(0, batch, 3).astype(np.uint32)
    parameters = dict(reduction_function=function, interpolation_mode="linear" if linear else "nearest_neighbor",
                      spatial_scale_x=0.75, spatial_scale_y=1.25, input_pixel_offset=offsets[0],
                      output_pixel_offset=offsets[1], out_of_bounds_input_value=-1.5,
                      minimum_samples_per_output=bounds[0], maximum_samples_per_output=bounds[1],
                      align_regions_to_corners=corners)
    got = dmlcli.run("roi_align1", x, rois, batches, output_shape=(3, 2, out_h, out_w), **parameters)
    want = roi_align_reference(x, rois, batches, out_h, out_w, function=function, linear=linear, scale=(0.75, 1.25),
                               input_offset=offsets[0], output_offset=offsets[1], fill=-1.5, minimum=bounds[0],
                               maximum=bounds[1], corners=corners)
    assert got.dtype == x.dtype and got.shape == want.shape
    assert_within_ulp(got, want, 32, floor=2.0 ** -20 if dtype == "float32" else 0.0)


def test_roi_align_is_roi_align1_with_centred_pixels():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    rois = rng.uniform(0, 6, (4, 4)).astype(np.float32)
    batches = np.array([0, 1, 1, 0], np.uint32)
    common = dict(output_shape=(4, 3, 2, 3), minimum_samples_per_output=2, maximum_samples_per_output=2)
    assert np.array_equal(dmlcli.run("roi_align", x, rois, batches, **common),
                          dmlcli.run("roi_align1", x, rois, batches, **common))


def test_roi_align_support_and_rules():
    f32, f16, u32, u64 = (parse_data_type(t) for t in ("float32", "float16", "uint32", "uint64"))
    x, rois, batches = (f32, (1, 2, 4, 4)), (f32, (3, 4)), (u32, (3,))
    assert plan("roi_align", [x, rois, batches], output_shape=(3, 2, 2, 2)).lowest_feature_level.short == "3_0"
    assert plan("roi_align1", [x, rois, batches], output_shape=(3, 2, 2, 2)).lowest_feature_level.short == "4_0"
    assert plan("roi_align1", [x, (f32, (1, 1, 3, 4)), (u64, (1, 1, 1, 3))],
                output_shape=(3, 2, 2, 2)).lowest_feature_level.short == "5_0"
    with pytest.raises(dmlcli.ValidationError, match="differ"):
        plan("roi_align", [x, (f16, (3, 4)), batches], output_shape=(3, 2, 2, 2))
    for inputs, shape, message in [
        ([x, (f32, (3, 5)), batches], (3, 2, 2, 2), r"ROITensor Sizes \[3, 5\] are not \{ NumROIs, 4 \}"),
        ([x, rois, (u32, (2,))], (3, 2, 2, 2), r"BatchIndicesTensor Sizes \[2\] are not \{ NumROIs \}"),
        ([x, rois, batches], (3, 1, 2, 2), r"OutputTensor Sizes \[3, 1, 2, 2\] are not \{ NumROIs 3, ChannelCount 2"),
    ]:
        with pytest.raises(dmlcli.ValidationError, match=message):
            plan("roi_align1", inputs, output_shape=shape)
    with pytest.raises(dmlcli.ValidationError, match="MinimumSamplesPerOutput 3 is above MaximumSamplesPerOutput 2"):
        plan("roi_align", [x, rois, batches], output_shape=(3, 2, 2, 2), minimum_samples_per_output=3,
             maximum_samples_per_output=2)
    with pytest.raises(dmlcli.InputError, match="--output-shape"):
        plan("roi_align", [x, rois, batches])


def test_cli_roi_align():
    args = ["run", "roi_align1", '{"dtype": "float32", "data": [[[[1, 2], [3, 4]]]]}',
            '{"dtype": "float32", "data": [[0, 0, 2, 2]]}', '{"dtype": "uint32", "data": [0]}',
            "--output-shape", "1,1,1,1", "--minimum-samples-per-output", "2", "--maximum-samples-per-output", "2",
            "-o", "-"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[[[2.5]]]]  # the four pixel centres, averaged
    result = CliRunner().invoke(cli, args[:5] + ["--output-shape", "1,2,1,1", "-o", "-"])
    assert result.exit_code == 3 and "OutputTensor Sizes [1, 2, 1, 1]" in result.output


@pytest.mark.parametrize("name", ["roialign_aligned_false", "roialign_aligned_true"])
def test_onnx_roi_align(name):
    case, (x, rois, batches), (expected,) = onnx_case(name)
    a = case["attributes"]
    half_pixel = a.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    got = dmlcli.run("roi_align1", x, rois, batches.astype(np.uint64), output_shape=expected.shape,
                     spatial_scale_x=a["spatial_scale"], spatial_scale_y=a["spatial_scale"],
                     input_pixel_offset=0.5 if half_pixel else 0.0, output_pixel_offset=-0.5,
                     minimum_samples_per_output=a["sampling_ratio"], maximum_samples_per_output=a["sampling_ratio"])
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-7)  # ONNX writes these with 4 decimals


def test_roi_operators_with_nan_or_infinite_corners():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    rois = np.array([[[[0, np.nan, 0, 3, 3], [0, 0, 0, np.inf, 3], [0, 0, 0, 1, 1]]]], np.float32)
    got = dmlcli.run("roi_pooling", x, rois, pooled_size=[1, 1])
    assert got.reshape(-1).tolist() == [0.0, 0.0, 5.0]
    boxes = np.array([[np.nan, 0, 2, 2], [0, 0, np.inf, 2], [0, 0, 2, 2]], np.float32)
    got = dmlcli.run("roi_align1", x, boxes, np.zeros(3, np.uint32), output_shape=(3, 1, 1, 1),
                     out_of_bounds_input_value=-7.0, minimum_samples_per_output=1, maximum_samples_per_output=1)
    assert got.reshape(-1).tolist()[:2] == [-7.0, -7.0] and got.reshape(-1)[2] == np.float32(x[0, 0, 0:2, 0:2].mean())


def test_roi_align_refuses_a_sample_grid_too_big_to_hold():
    x = np.ones((1, 1, 4, 4), np.float32)
    boxes = np.array([[0, 0, 1e9, 1e9]], np.float32)
    result = CliRunner().invoke(cli, ["run", "roi_align", tensor_text(x), tensor_text(boxes),
                                      tensor_text(np.zeros(1, np.uint32)), "--output-shape", "1,1,1,1", "-o", "-"])
    assert result.exit_code == 2 and "lower MaximumSamplesPerOutput" in result.output, result.output
    got = dmlcli.run("roi_align", x, boxes, np.zeros(1, np.uint32), output_shape=(1, 1, 1, 1),
                     maximum_samples_per_output=4)
    assert got.tolist() == [[[[0.0]]]]  # every sample past the input reads OutOfBoundsInputValue 0


@settings(max_examples=400, deadline=None)
@given(divisor=st.integers(1, 2**31 - 1), dividend=st.integers(0, 2**31 - 1))
def test_fast_division_divides_every_32_bit_index(divisor, dividend):
    """The GPU kernels (pooling, padding, per-channel normalization) divide a 32-bit index by a size as
    (n * m >> 32) >> r (a divisor of 1 is skipped in the kernel): the quotient is exact for every index below 2^31,
    the multiplier fits 32 bits."""
    from dmlcli.operators.numerics.cuda_prelude import fast_division

    multiplier, shift = fast_division(divisor)
    assert 0 <= multiplier < 2**32
    if divisor > 1:
        assert (dividend * multiplier >> 32) >> shift == dividend // divisor
    for edge in (divisor - 1, divisor, 2**31 - 1):  # around a multiple and at the top
        if divisor > 1 and edge < 2**31:
            assert (edge * multiplier >> 32) >> shift == edge // divisor


def _max_pool_by_the_rule(x, window, strides, start):
    """MAX_POOLING written out: each window in row-major order, padding skipped, NaN skipped, and of equal
    values (-0.0 and +0.0 among them) the first kept."""
    n, c, h, w = x.shape
    out_h = (h + 2 * start[0] - window[0]) // strides[0] + 1
    out_w = (w + 2 * start[1] - window[1]) // strides[1] + 1
    out = np.full((n, c, out_h, out_w), np.nan, dtype=x.dtype)
    for b, ch, i, j in itertools.product(range(n), range(c), range(out_h), range(out_w)):
        best = None
        for a, e in itertools.product(range(window[0]), range(window[1])):
            row, col = i * strides[0] - start[0] + a, j * strides[1] - start[1] + e
            if 0 <= row < h and 0 <= col < w:
                value = x[b, ch, row, col]
                if not np.isnan(value) and (best is None or value > best):
                    best = value
        if best is not None:
            out[b, ch, i, j] = best
    return out


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("window, strides, start", [((2, 2), (2, 2), (0, 0)), ((3, 3), (1, 1), (1, 1))])
def test_max_pooling_keeps_the_first_of_two_zeros(dtype, window, strides, start):
    """Windows whose maximum is a zero give the window's first zero, -0.0 or +0.0, whichever loop of NumPy's fmax
    (vector or scalar) met them; rows long enough that the vector loops run."""
    rng = np.random.default_rng(4)
    x = -np.abs(rng.standard_normal((2, 2, 9, 40))).astype(dtype)
    pick = rng.random(x.shape)
    x[pick < 0.35] = -0.0
    x[(pick >= 0.35) & (pick < 0.7)] = 0.0
    x[pick > 0.95] = np.nan
    got = dmlcli.run("max_pooling", x, window_size=list(window), strides=list(strides),
                     start_padding=list(start), end_padding=list(start))
    want = _max_pool_by_the_rule(x, window, strides, start)
    bits = np.uint32 if dtype == "float32" else np.uint16
    same = (got.view(bits) == want.view(bits)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (got[~same][:4], want[~same][:4])
    assert ((want == 0) & np.signbit(want)).any() and ((want == 0) & ~np.signbit(want)).any()


@pytest.mark.parametrize("op, parameters, term", [
    ("average_pooling", {"include_padding": False}, lambda v: v),
    ("lp_pooling", {"p": 2}, lambda v: v * v),
])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_global_pool_adds_its_window_in_row_major_order(op, parameters, term, dtype):
    """One window per channel: its elements are added one after another in FLOAT32 (row-major window order), as
    every other window is, not pairwise (np.sum's order would differ in the last bits)."""
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((2, 3, 13, 11)) * 100).astype(dtype)
    got = dmlcli.run(op, x, window_size=[13, 11], strides=[1, 1], start_padding=[0, 0], end_padding=[0, 0],
                     **parameters)
    for b, ch in itertools.product(range(2), range(3)):
        total = np.float32(0)
        for value in np.abs(x[b, ch]).reshape(-1) if op == "lp_pooling" else x[b, ch].reshape(-1):
            total = np.float32(total + term(np.float32(value)))
        want = np.sqrt(total) if op == "lp_pooling" else total / np.float32(13 * 11)
        assert got[b, ch, 0, 0] == np.asarray(want, np.float32).astype(dtype), (b, ch)


@pytest.mark.parametrize("window, strides, dilations, start, end", [
    ((3, 3), (2, 2), (1, 1), (0, 0), (1, 1)),  # SqueezeNet's ceil mode: end padding past the last element
    ((3, 2), (3, 2), (1, 2), (1, 0), (2, 1)),  # strides 3 and 2 on the last axis (its elements taken by phase)
    ((2, 3), (1, 3), (2, 1), (1, 2), (0, 2)),
])
def test_window_maxima_without_a_padded_copy_match_each_windows_maximum(window, strides, dilations, start, end):
    # window_maxima leaves a tap's padding out rather than reading a padded copy: each output is still the NaN-
    # skipping maximum of its window's input elements (NaN where it reads only NaN), as a loop over windows says.
    from dmlcli.operators.pooling.entries import _geometry_of, window_maxima

    rng = np.random.default_rng(sum(window) + sum(strides))
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = np.nan
    params = {"WindowSize": window, "Strides": strides, "Dilations": dilations, "StartPadding": start,
              "EndPadding": end}
    geometry, out_shape = _geometry_of(x.shape, params)
    got = window_maxima(np, x, geometry, out_shape)
    want = np.full(out_shape, np.nan, np.float32)
    for i, j in itertools.product(range(out_shape[2]), range(out_shape[3])):
        rows = [i * strides[0] + k * dilations[0] - start[0] for k in range(window[0])]
        cols = [j * strides[1] + k * dilations[1] - start[1] for k in range(window[1])]
        for n, c in itertools.product(range(2), range(3)):
            values = [x[n, c, r, q] for r in rows for q in cols if 0 <= r < 9 and 0 <= q < 11]
            values = [v for v in values if not np.isnan(v)]
            if values:
                want[n, c, i, j] = max(values)
    assert np.array_equal(got, want, equal_nan=True)
