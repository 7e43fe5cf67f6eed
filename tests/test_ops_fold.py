"""FOLD and UNFOLD (6_4): im2col and col2im over 1 to 6 spatial dimensions.

Against: the support rows (6_3 refused naming 6_4; the data types dmlcli reads into the pages' empty cells), every
rule of the shape rules (exit 3), the pages' five examples, an independent reference written here with loops over
index tuples (UNFOLD exact; FOLD's sums with math.fsum, within the tolerance for floats, exact for integers),
fold(unfold(x)) = x times the number of windows that read each position, PyTorch's nn.functional.fold and unfold
(skipped without torch), edge cases (NaN payloads, padding zeros, positions no window reads, sizes 1), the command
line, the API and a DxDispatch desc with DirectML.h's field names.
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
from dmlcli.checking.comparison import rule_for, ulp_distance
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
import shaped_cli  # noqa: E402 - tests/ is on the path

F = np.float32


@pytest.mark.parametrize("key, value, exactness", [("FOLD", 176, "composite"), ("UNFOLD", 177, "exact")])
def test_entries(key, value, exactness):
    op = dmlcli.find_operator(key)
    assert op.enum_value == value and op.introduced.short == "6_4" and op.family == "data movement"
    assert op.exactness == exactness and not op.is_elementwise
    assert tuple(p.field for p in op.parameters) == ("WindowSizes", "Strides", "Dilations", "StartPadding",
                                                     "EndPadding")
    assert all(p.count_field == "DimensionCount" for p in op.parameters)


# ---------------------------------------------------------------- validation


def test_unfold_takes_every_type_from_6_4():
    for dtype in ("float32", "float16", "int8", "uint64", "float64"):
        inputs = [(parse_data_type(dtype), (1, 2, 3, 3))]
        assert api_plan("unfold", inputs, window_sizes=[2, 2]).lowest_feature_level.short == "6_4"
    with pytest.raises(dmlcli.ValidationError, match="introduced in DML_FEATURE_LEVEL_6_4"):
        api_plan("unfold", [(parse_data_type("float32"), (1, 2, 3, 3))], window_sizes=[2, 2], feature_level="6_3")


@pytest.mark.parametrize("dtype, accepted", [("float32", True), ("float16", True), ("int32", True), ("uint64", True),
                                             ("int8", False), ("float64", False)])
def test_fold_takes_the_types_directml_sums(dtype, accepted):
    inputs = [(parse_data_type(dtype), (1, 4, 4))]
    params = dict(window_sizes=[2, 2], output_shape=(1, 1, 3, 3))
    if accepted:
        assert api_plan("fold", inputs, **params).lowest_feature_level.short == "6_4"
        with pytest.raises(dmlcli.ValidationError, match="introduced in DML_FEATURE_LEVEL_6_4"):
            api_plan("fold", inputs, feature_level="6_3", **params)
    else:
        with pytest.raises(dmlcli.ValidationError, match="no feature level accepts this call"):
            api_plan("fold", inputs, **params)


R33 = json.dumps([[[[0] * 3] * 3]])  # {1, 1, 3, 3}
RULES = [
    (["unfold", R33, "--dtype", "float32", "--window-sizes", "4,1"],
     "UNFOLD: the window spans 4 elements in spatial dimension 0"),
    (["unfold", R33, "--dtype", "float32", "--window-sizes", "2"],
     "UNFOLD: WindowSizes has 1 values but InputTensor [1, 1, 3, 3] has 2 spatial dimensions"),
    (["unfold", R33, "--dtype", "float32", "--window-sizes", "2,2", "--strides", "0,1"],
     "UNFOLD: Strides[0] is 0; it must be at least 1"),
    (["unfold", R33, "--dtype", "float32", "--window-sizes", "2,2", "--dilations", "3,1"],
     "UNFOLD: the window spans 4 elements in spatial dimension 0 (Dilations[0] * (WindowSizes[0] - 1) + 1)"),
    (["unfold", "[[1,2]]", "--dtype", "float32", "--window-sizes", "1"],
     "UNFOLD: InputTensor Sizes [1, 2] are not {N, C, S1, ..., Sd}"),
    (["unfold", R33, "--dtype", "float32", "--window-sizes", "2,2", "--output-shape", "1,4,5"],
     "UNFOLD: OutputTensor Sizes [1, 4, 5] end in [1, 4, 5], not {N, C x prod(WindowSizes), BlockCount} = [1, 4, 4]"),
    (["unfold", R33, "--dtype", "float32", "--window-sizes", "2,2", "--output-shape", "2,1,4,4"],
     "UNFOLD: OutputTensor Sizes [2, 1, 4, 4] are not {N, C x prod(WindowSizes), BlockCount}"),
    (["fold", "[[[1,2,3,4]]]", "--dtype", "float32", "--window-sizes", "1,1"],
     "FOLD: give the OutputTensor's Sizes {N, C, S1, ..., Sd} (--output-shape"),
    (["fold", "[[[1,2,3,4]]]", "--dtype", "float32", "--window-sizes", "1,1", "--output-shape", "1,1,2,3"],
     "FOLD: InputTensor Sizes [1, 1, 4] end in [1, 1, 4], not {N, C x prod(WindowSizes), BlockCount} = [1, 1, 6]"),
    (["fold", "[[[1,2,3,4]]]", "--dtype", "float32", "--window-sizes", "2,1", "--output-shape", "1,1,2,2"],
     "FOLD: InputTensor Sizes [1, 1, 4] end in [1, 1, 4], not {N, C x prod(WindowSizes), BlockCount} = [1, 2, 2]"),
]


@pytest.mark.parametrize("args, message", RULES, ids=[str(i) for i in range(len(RULES))])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_window_sizes_are_required_and_bounded():
    result = CliRunner().invoke(cli, ["run", "unfold", R33, "--dtype", "float32", "-o", "-"])
    assert result.exit_code == 2 and "WindowSizes is required" in result.stderr
    result = CliRunner().invoke(cli, ["run", "unfold", R33, "--dtype", "float32", "--window-sizes", "1,1,1,1,1,1,1",
                                      "-o", "-"])
    assert result.exit_code == 2 and "at most 6" in result.stderr


# ---------------------------------------------------------------- the pages' examples


def test_unfold_page_examples():
    x = np.arange(25, dtype=F).reshape(1, 1, 5, 5)
    got = dmlcli.run("unfold", x, window_sizes=[3, 3])
    assert got.shape == (1, 9, 9)
    assert got[0, 0].tolist() == [0, 1, 2, 5, 6, 7, 10, 11, 12] and got[0, 8].tolist() == [12, 13, 14, 17, 18, 19,
                                                                                           22, 23, 24]
    padded = dmlcli.run("unfold", x, window_sizes=[3, 3], start_padding=[1, 0], end_padding=[1, 0])
    assert padded.shape == (1, 9, 15)
    assert padded[0, 0].tolist() == [0, 0, 0, 0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17]
    assert padded[0, 8].tolist() == [7, 8, 9, 12, 13, 14, 17, 18, 19, 22, 23, 24, 0, 0, 0]


def test_fold_page_examples():
    one = dmlcli.run("fold", np.arange(36, dtype=F).reshape(1, 9, 4), window_sizes=[3, 3], output_shape=(1, 1, 4, 4))
    assert one.tolist() == [[[[0, 5, 13, 9], [14, 38, 54, 32], [38, 86, 102, 56], [26, 57, 65, 35]]]]
    pads = dict(window_sizes=[3, 3], start_padding=[1, 0], end_padding=[1, 0])
    two = dmlcli.run("fold", np.arange(72, dtype=F).reshape(1, 9, 8), output_shape=(1, 1, 4, 4), **pads)
    assert two.tolist() == [[[[26, 70, 102, 60], [78, 183, 231, 129], [84, 195, 243, 135], [82, 182, 214, 116]]]]
    three = dmlcli.run("fold", np.arange(144, dtype=F).reshape(1, 18, 8), output_shape=(1, 2, 4, 4), **pads)
    assert three[0, 0].tolist() == two[0, 0].tolist()
    assert three[0, 1].tolist() == [[170, 358, 390, 204], [294, 615, 663, 345], [300, 627, 675, 351],
                                    [226, 470, 502, 260]]


# ---------------------------------------------------------------- the reference


def _geometry(spatial, window, strides, dilations, start, end):
    blocks = [(s + a + b - d * (k - 1) - 1) // t + 1
              for s, k, t, d, a, b in zip(spatial, window, strides, dilations, start, end)]
    return blocks


def _source(block, element, strides, dilations, start):
    """The spatial position (possibly in the padding) that window element `element` of block `block` reads."""
    return tuple(b * t + k * d - a for b, k, t, d, a in zip(block, element, strides, dilations, start))


def ref_unfold(x, window, strides, dilations, start, end):
    n, c, *spatial = x.shape
    blocks = _geometry(spatial, window, strides, dilations, start, end)
    out = np.zeros((n, c * math.prod(window), math.prod(blocks)), x.dtype)
    for b, ch in itertools.product(range(n), range(c)):
        for k, element in enumerate(itertools.product(*map(range, window))):
            for col, block in enumerate(itertools.product(*map(range, blocks))):
                p = _source(block, element, strides, dilations, start)
                if all(0 <= q < s for q, s in zip(p, spatial)):
                    out[b, ch * math.prod(window) + k, col] = x[(b, ch) + p]
    return out


def ref_fold(columns, out_shape, window, strides, dilations, start, end):
    """Each output position's terms, summed exactly (math.fsum) for floats, as Python integers for integers."""
    n, c, *spatial = out_shape
    blocks = _geometry(spatial, window, strides, dilations, start, end)
    terms = {index: [] for index in itertools.product(*map(range, out_shape))}
    for b, ch in itertools.product(range(n), range(c)):
        for k, element in enumerate(itertools.product(*map(range, window))):
            for col, block in enumerate(itertools.product(*map(range, blocks))):
                p = _source(block, element, strides, dilations, start)
                if all(0 <= q < s for q, s in zip(p, spatial)):
                    terms[(b, ch) + p].append(columns[b, ch * math.prod(window) + k, col].item())
    if columns.dtype.kind == "f":
        out = np.zeros(out_shape, np.float64)
        for index, values in terms.items():
            out[index] = math.fsum(values)
        return out
    out = np.zeros(out_shape, columns.dtype)
    info = np.iinfo(columns.dtype)
    for index, values in terms.items():
        out[index] = (sum(values) - info.min) % (info.max - info.min + 1) + info.min  # wrapping, as the notes say
    return out


def window_counts(spatial, window, strides, dilations, start, end) -> np.ndarray:
    """How many (block, window element) pairs read each spatial position."""
    blocks = _geometry(spatial, window, strides, dilations, start, end)
    counts = np.zeros(spatial, np.int64)
    for block in itertools.product(*map(range, blocks)):
        for element in itertools.product(*map(range, window)):
            p = _source(block, element, strides, dilations, start)
            if all(0 <= q < s for q, s in zip(p, spatial)):
                counts[p] += 1
    return counts


@st.composite
def fold_calls(draw, dtypes=("float32", "float16", "int32", "uint64")):
    count = draw(st.integers(1, 3))
    window = [draw(st.integers(1, 3)) for _ in range(count)]
    strides = [draw(st.integers(1, 3)) for _ in range(count)]
    dilations = [draw(st.integers(1, 2)) for _ in range(count)]
    start = [draw(st.integers(0, 2)) for _ in range(count)]
    end = [draw(st.integers(0, 2)) for _ in range(count)]
    spatial = [max(draw(st.integers(1, 5)), d * (k - 1) + 1 - a - b)
               for k, d, a, b in zip(window, dilations, start, end)]
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)), *spatial)
    dtype = draw(st.sampled_from(dtypes))
    params = dict(window_sizes=window, strides=strides, dilations=dilations, start_padding=start, end_padding=end)
    return shape, dtype, params


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (rng.integers(-64, 64, shape) / 8).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _geometry_of(params):
    return (params["window_sizes"], params["strides"], params["dilations"], params["start_padding"],
            params["end_padding"])


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(call=fold_calls(("float32", "float16", "int8", "uint64", "float64")), seed=st.integers(0, 1000))
def test_unfold_against_the_reference(call, seed):
    shape, dtype, params = call
    x = _values(shape, dtype, seed)
    got = dmlcli.run("unfold", x, **params)
    expected = ref_unfold(x, *_geometry_of(params))
    assert got.dtype == x.dtype and np.array_equal(got.view(np.uint8), expected.view(np.uint8))


def assert_sum_close(got, expected, call):
    if got.dtype.kind != "f":
        assert np.array_equal(got, expected)
        return
    rule = rule_for(call.operator, got.dtype, call=call)
    distance = ulp_distance(got, expected.astype(got.dtype))
    ok = (distance <= rule.limit) | (np.abs(got.astype(np.float64) - expected) <= rule.floor)
    assert ok.all(), f"{distance[~ok].max()} ULP > {rule.limit}"


@SETTINGS
@given(call=fold_calls(), seed=st.integers(0, 1000))
def test_fold_against_the_reference(call, seed):
    shape, dtype, params = call
    window, strides, dilations, start, end = _geometry_of(params)
    blocks = _geometry(shape[2:], window, strides, dilations, start, end)
    columns = _values((shape[0], shape[1] * math.prod(window), math.prod(blocks)), dtype, seed)
    verdict = dmlcli.validate("fold", columns, output_shape=shape, **params)
    got = dmlcli.run("fold", columns, output_shape=shape, **params)
    assert got.shape == shape and got.dtype == columns.dtype
    assert_sum_close(got, ref_fold(columns, shape, *_geometry_of(params)), verdict.call)


@SETTINGS
@given(call=fold_calls(("float32", "int32")), seed=st.integers(0, 1000))
def test_fold_of_unfold_is_x_times_the_window_count(call, seed):
    shape, dtype, params = call
    x = _values(shape, dtype, seed) if dtype == "float32" else np.random.default_rng(seed).integers(
        -1000, 1000, shape).astype(dtype)
    back = dmlcli.run("fold", dmlcli.run("unfold", x, **params), output_shape=shape, **params)
    counts = window_counts(shape[2:], *_geometry_of(params))
    expected = x.astype(np.float64) * counts
    verdict = dmlcli.validate("fold", dmlcli.run("unfold", x, **params), output_shape=shape, **params)
    assert_sum_close(back, expected if dtype == "float32" else expected.astype(dtype), verdict.call)


def test_the_sum_order_is_the_window_elements():
    # Window 3, stride 1, 5 outputs: 3 blocks, and position 2 sums (element 0, block 2), (element 1, block 1),
    # (element 2, block 0), in that order: (0 + 1) + 2^24 rounds to 2^24 (a tie, to even), then - 2^24 gives 0.
    # Block order (or any order that adds -2^24 before 1) would give 1.
    columns = np.zeros((1, 3, 3), F)
    columns[0, 0, 2], columns[0, 1, 1], columns[0, 2, 0] = 1, 2 ** 24, -(2 ** 24)
    got = dmlcli.run("fold", columns, window_sizes=[3], output_shape=(1, 1, 5))
    assert got[0, 0, 2] == 0 and got.dtype == F
    columns[0, 0, 2], columns[0, 2, 0] = -(2 ** 24), 1  # the terms the other way round: -2^24 + 2^24 + 1
    assert dmlcli.run("fold", columns, window_sizes=[3], output_shape=(1, 1, 5))[0, 0, 2] == 1


def test_edge_cases():
    # UNFOLD copies NaN payloads and writes +0.0 for padding.
    x = np.array([0x7FC00123, 0xFF800001], np.uint32).view(F).reshape(1, 1, 2)
    got = dmlcli.run("unfold", x, window_sizes=[2], start_padding=[1], end_padding=[1])
    bits = got.view(np.uint32).reshape(-1).tolist()
    assert bits == [0, 0x7FC00123, 0xFF800001, 0x7FC00123, 0xFF800001, 0]
    # FOLD: a position no window reads (stride 3, window 1) is 0; sizes 1 everywhere.
    assert dmlcli.run("fold", F([[[5, 7]]]), window_sizes=[1], strides=[3], output_shape=(1, 1, 5)).tolist() == \
        [[[5, 0, 0, 7, 0]]]
    assert dmlcli.run("fold", F([[[4]]]), window_sizes=[1], output_shape=(1, 1, 1)).tolist() == [[[4]]]
    assert dmlcli.run("unfold", F([[[4]]]), window_sizes=[1]).tolist() == [[[4]]]
    # A term that falls in the padding is dropped: window element 0 of the one block reads StartPadding.
    dropped = dmlcli.run("fold", np.array([[[2 ** 31 - 1], [1]]], np.int32), window_sizes=[2], start_padding=[1],
                         output_shape=(1, 1, 1))
    assert dropped.tolist() == [[[1]]]
    # INT32 sums wrap: position 1 adds (element 0, block 1) and (element 1, block 0).
    summed = dmlcli.run("fold", np.array([[[2 ** 31 - 1, 2 ** 31 - 1], [1, 5]]], np.int32), window_sizes=[2],
                        output_shape=(1, 1, 3))
    assert summed.tolist() == [[[2 ** 31 - 1, -(2 ** 31), 5]]]


def test_column_tensors_with_leading_ones():
    x = np.arange(2 * 3 * 4 * 5, dtype=F).reshape(2, 3, 4, 5)
    plain = dmlcli.run("unfold", x, window_sizes=[2, 3])
    padded = dmlcli.run("unfold", x, window_sizes=[2, 3], output_shape=(1,) + plain.shape)
    assert padded.shape == (1,) + plain.shape and np.array_equal(padded[0], plain)
    assert np.array_equal(dmlcli.run("fold", padded, window_sizes=[2, 3], output_shape=x.shape),
                          dmlcli.run("fold", plain, window_sizes=[2, 3], output_shape=x.shape))


@pytest.mark.parametrize("spatial, window, stride, dilation, padding", [
    ((6, 7), (3, 2), (1, 2), (1, 2), (1, 0)), ((5, 5), (2, 2), (2, 2), (1, 1), (0, 1)), ((9, 4), (3, 3), (2, 1),
                                                                                         (2, 1), (2, 1))])
def test_against_pytorch(spatial, window, stride, dilation, padding):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(8).standard_normal((2, 3) + spatial).astype(F)
    params = dict(window_sizes=list(window), strides=list(stride), dilations=list(dilation),
                  start_padding=list(padding), end_padding=list(padding))
    theirs = torch.nn.functional.unfold(torch.from_numpy(x), window, dilation=dilation, padding=padding,
                                        stride=stride).numpy()
    ours = dmlcli.run("unfold", x, **params)
    assert np.array_equal(ours, theirs)
    folded = torch.nn.functional.fold(torch.from_numpy(ours), spatial, window, dilation=dilation, padding=padding,
                                      stride=stride).numpy()
    got = dmlcli.run("fold", ours, output_shape=x.shape, **params)
    call = dmlcli.validate("fold", ours, output_shape=x.shape, **params).call
    assert_sum_close(got, folded.astype(np.float64), call)


# ---------------------------------------------------------------- the command line, the API, DxDispatch


def test_command_line_runs():
    result = CliRunner().invoke(cli, ["run", "unfold", "[[[1,2,3]]]", "--dtype", "int16", "--window-sizes", "2",
                                      "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "int16", "shape": [1, 2, 2], "data": [[[1, 2], [2, 3]]]}
    result = CliRunner().invoke(cli, ["run", "fold", "[[[1,2],[2,3]]]", "--dtype", "float32", "--window-sizes", "2",
                                      "--output-shape", "1,1,3", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[[1.0, 4.0, 3.0]]]


def test_describe_names_the_decisions():
    result = CliRunner().invoke(cli, ["describe", "fold"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "BlocksPerDimension" in text and "window-element order" in text and "leave them empty" in text


@pytest.mark.parametrize("operator, in_sizes, out_sizes, values, expected", [
    ("UNFOLD", [1, 1, 2, 2], [1, 4, 1], [1, 2, 3, 4], "1, 2, 3, 4"),
    ("FOLD", [1, 4, 1], [1, 1, 2, 2], [1, 2, 3, 4], "1, 2, 3, 4"),
])
def test_dxdispatch_desc_with_directml_field_names(tmp_path, monkeypatch, operator, in_sizes, out_sizes, values,
                                                   expected):
    monkeypatch.chdir(tmp_path)
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": in_sizes},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": out_sizes}, "DimensionCount": 2,
            "WindowSizes": [2, 2], "Strides": [1, 1], "Dilations": [1, 1], "StartPadding": [0, 0],
            "EndPadding": [0, 0]}
    result = shaped_cli.dispatch_one(tmp_path, operator, desc, {"InputTensor": values}, math.prod(out_sizes))
    assert result.exit_code == 0, result.output
    assert f"Resource 'OutputTensor': {expected}" in result.output
    desc["DimensionCount"] = 1
    result = shaped_cli.dispatch_one(tmp_path, operator, desc, {"InputTensor": values}, math.prod(out_sizes))
    assert result.exit_code == 2 and "DimensionCount 1 does not match the 2 values of WindowSizes" in result.output
