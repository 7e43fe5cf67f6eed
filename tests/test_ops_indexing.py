"""The indexing family: GATHER, GATHER_ELEMENTS, GATHER_ND(1), SCATTER_ELEMENTS, SCATTER_ND, ONE_HOT, TOP_K(1),
NONZERO_COORDINATES.

Checked against a second transcription of the pages' support tables (the lowest accepting level in each
error message), every rule the shape rules enforce (exit 3 through the command line), the pages' own
examples, references written here with plain loops over indices (hypothesis draws shapes, axes, index types
and values in and out of range), DirectML's clamp of a gather's out-of-range indices, the rules dmlcli chose
(negative and out-of-range scatter indices, duplicate scatter targets, ties and NaN in TOP_K, -0 and NaN in
NONZERO_COORDINATES), and ONNX's node tests mapped by hand.
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
from dmlcli.api import plan
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.operators import find_operator

from conftest import SHARED

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ONNX = SHARED / "onnx_operators"
INDEX_DTYPES = ("int32", "int64", "uint32", "uint64")
DATA_DTYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
               "uint64")


# ---------------------------------------------------------------- the table


ENTRIES = {  # name: (DML_OPERATOR_TYPE, introduced, cli name) -- from DirectML.h and the pages
    "GATHER": (67, "1_0"), "GATHER_ELEMENTS": (107, "2_1"), "GATHER_ND": (108, "2_1"), "GATHER_ND1": (140, "3_0"),
    "SCATTER_ELEMENTS": (94, "2_0"), "SCATTER_ND": (109, "2_1"), "ONE_HOT": (95, "2_0"), "TOP_K": (71, "2_0"),
    "TOP_K1": (112, "2_1"), "NONZERO_COORDINATES": (133, "3_0"),
}


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_entries(name):
    op = find_operator(name.lower())
    value, introduced = ENTRIES[name]
    assert (op.name, op.enum_value, op.introduced.short, op.family) == (name, value, introduced, "indexing")
    assert op.exactness == "exact" and op.notes


def test_scatter_is_scatter_elements():
    for spelling in ("scatter", "SCATTER", "DML_OPERATOR_SCATTER", "scatter_elements"):
        assert find_operator(spelling).name == "SCATTER_ELEMENTS"


def accepted(op, inputs, level, **options):
    try:
        plan(op, [(parse_data_type(t), shape) for t, shape in inputs], feature_level=level, **options)
        return True
    except dmlcli.ValidationError:
        return False


def lowest(op, inputs, **options):
    """The lowest level the error message names (the call must fail at 1_0)."""
    with pytest.raises(dmlcli.ValidationError) as error:
        plan(op, [(parse_data_type(t), shape) for t, shape in inputs], feature_level="1_0", **options)
    text = str(error.value)
    return text.split("supported from DML_FEATURE_LEVEL_")[1][:3] if "supported from" in text else None


# A second transcription of the pages: (call, lowest level accepting it).
GATHER_CALLS = [
    ("gather", [("float32", (1, 1, 2, 3)), ("uint32", (1, 1, 1, 2))], {}, None),  # 1_0 accepts: no error
    ("gather", [("int8", (1, 1, 2, 3)), ("uint32", (1, 1, 1, 2))], {}, "2_1"),
    ("gather", [("int8", (2, 3)), ("uint32", (1, 2))], {}, "3_0"),
    ("gather", [("float32", (1, 1, 2, 3)), ("int32", (1, 1, 1, 2))], {}, "3_0"),
    ("gather", [("float32", (1, 1, 2, 3)), ("uint64", (1, 1, 1, 2))], {}, "3_0"),
    ("gather", [("float64", (2, 3)), ("int64", (1, 2))], {}, "4_1"),
    ("gather_elements", [("float32", (1, 1, 2, 3)), ("uint32", (1, 1, 2, 3))], {}, "2_1"),
    ("gather_elements", [("int16", (2, 3)), ("int64", (2, 3))], {}, "3_0"),
    ("gather_elements", [("uint64", (2, 3)), ("int64", (2, 3))], {}, "4_1"),
    ("gather_nd", [("float16", (1, 1, 2, 2)), ("uint32", (1, 1, 2, 1))], {}, "2_1"),
    ("gather_nd", [("int8", (2, 2)), ("int32", (2, 1))], {}, "3_0"),
    ("gather_nd", [("int64", (2, 2)), ("int32", (2, 1))], {}, "4_1"),
    ("gather_nd1", [("float32", (1, 1, 2, 2)), ("uint32", (1, 1, 2, 1))], {}, "3_0"),
    ("gather_nd1", [("float64", (2, 2)), ("uint32", (2, 1))], {}, "4_1"),
    ("scatter_elements", [("float32", (1, 1, 2, 3)), ("uint32", (1, 1, 1, 3)), ("float32", (1, 1, 1, 3))],
     {"axis": 2}, "2_0"),
    ("scatter_elements", [("uint8", (1, 1, 2, 3)), ("uint32", (1, 1, 1, 3)), ("uint8", (1, 1, 1, 3))], {"axis": 2},
     "2_1"),
    ("scatter_elements", [("uint8", (2, 3)), ("int32", (1, 3)), ("uint8", (1, 3))], {}, "3_0"),
    ("scatter_elements", [("int64", (2, 3)), ("int32", (1, 3)), ("int64", (1, 3))], {}, "4_1"),
    ("scatter_nd", [("float32", (1, 1, 2, 3)), ("uint32", (1, 1, 1, 1)), ("float32", (1, 1, 1, 3))],
     {"input_dimension_count": 2, "indices_dimension_count": 2}, "2_1"),
    ("scatter_nd", [("float32", (2, 3)), ("int64", (1, 1)), ("float32", (1, 3))], {}, "3_0"),
    ("scatter_nd", [("float64", (2, 3)), ("int64", (1, 1)), ("float64", (1, 3))], {}, "4_1"),
    ("one_hot", [("uint32", (1, 1, 3, 1)), ("float16", (1, 1, 1, 2))], {"axis": 3, "output_shape": (1, 1, 3, 4)},
     "2_0"),
    ("one_hot", [("uint32", (1, 1, 3, 1)), ("int8", (1, 1, 1, 2))], {"axis": 3, "output_shape": (1, 1, 3, 4)}, "2_1"),
    ("one_hot", [("int64", (3, 1)), ("int8", (1, 2))], {"axis": 1, "output_shape": (3, 4)}, "3_0"),
    ("one_hot", [("int64", (3, 1)), ("float64", (1, 2))], {"axis": 1, "output_shape": (3, 4)}, "4_1"),
    ("top_k", [("float32", (1, 1, 3, 4))], {"axis": 3, "k": 2}, "2_0"),
    ("top_k", [("int16", (1, 1, 3, 4))], {"axis": 3, "k": 2}, "2_1"),
    ("top_k", [("int16", (3, 4))], {"axis": 1, "k": 2}, "3_1"),
    ("top_k", [("int64", (3, 4))], {"axis": 1, "k": 2}, "5_0"),
    ("top_k", [("float32", (3, 4))], {"axis": 1, "k": 2, "output_dtype": "uint64"}, "5_0"),
    ("top_k1", [("float32", (1, 1, 3, 4))], {"axis": 3, "k": 2}, "2_1"),
    ("top_k1", [("uint8", (2, 4))], {"axis": 1, "k": 2}, "3_1"),
    ("top_k1", [("uint64", (2, 4))], {"axis": 1, "k": 2, "axis_direction": "increasing"}, "5_0"),
    ("nonzero_coordinates", [("float32", (1, 1, 2, 3))], {}, "3_0"),
    ("nonzero_coordinates", [("int8", (1, 2, 1, 2, 3))], {}, "3_0"),
    ("nonzero_coordinates", [("int8", (2, 3))], {}, "4_0"),
    ("nonzero_coordinates", [("uint16", (2, 1, 1, 1, 2, 3))], {}, "4_0"),
]


@pytest.mark.parametrize("op, inputs, options, level", GATHER_CALLS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GATHER_CALLS)])
def test_support_tables(op, inputs, options, level):
    if level is None:
        assert accepted(op, inputs, "1_0", **options)
        return
    assert lowest(op, inputs, **options) == level
    levels = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "6_4"]
    for candidate in levels:
        assert accepted(op, inputs, candidate, **options) == (levels.index(candidate) >= levels.index(level)), candidate


@pytest.mark.parametrize("op, inputs, options", [
    ("gather", [("float32", (2, 3)), ("int16", (1, 2))], {}),  # INT16 is no index type
    ("top_k", [("float64", (3, 4))], {"axis": 1, "k": 2}),  # TOP_K has no FLOAT64 row
    ("nonzero_coordinates", [("int64", (2, 3))], {}),  # no 64-bit input row
    ("one_hot", [("float32", (3, 1)), ("float32", (1, 2))], {"axis": 1, "output_shape": (3, 4)}),  # float indices
])
def test_calls_no_level_accepts(op, inputs, options):
    for level in ("2_1", "3_0", "4_1", "6_4"):
        assert not accepted(op, inputs, level, **options)


# ---------------------------------------------------------------- rule violations (exit 3)


def cli_run(*arguments):
    return CliRunner().invoke(cli, ["run", *arguments])


VIOLATIONS = [
    (["gather", "[[1,2],[3,4]]", "[0,1]", "--dtype", "int32"], "same DimensionCount"),
    (["gather", "[[1,2],[3,4]]", "[[0,1]]", "--dtype", "int32", "--axis", "2"], "Axis 2 is out of range"),
    (["gather", "[[1,2],[3,4]]", "[[0,1]]", "--dtype", "int32", "--index-dimensions", "3"],
     "IndexDimensions 3 is out of range"),
    (["gather", "[[1,2],[3,4]]", "[[0,1],[1,0]]", "--dtype", "int32", "--index-dimensions", "1"],
     "must be 1"),
    (["gather", "[[1,2],[3,4]]", "[[0,1],[1,0]]", "--dtype", "int32"], "more than the tensors' DimensionCount"),
    (["gather_elements", "[[1,2],[3,4]]", "[[0,1,1]]", "--dtype", "int32"], "differ outside Axis 0"),
    (["gather_nd", "[[1,2],[3,4]]", "[[0,1,1]]", "--dtype", "int32"], "index tuple size"),
    (["gather_nd", "[[1,2],[3,4]]", "[[0,1]]", "--dtype", "int32", "--input-dimension-count", "1"],
     "must be 1"),
    (["gather_nd1", "[[1,2],[3,4]]", "[[0],[1]]", "--dtype", "int32", "--batch-dimension-count", "2"],
     "BatchDimensionCount 2 leaves no dimension"),
    (["gather_nd1", "[[1,2],[3,4]]", "[[0],[1],[0]]", "--dtype", "int32", "--batch-dimension-count", "1"],
     "the batch Sizes differ"),
    (["one_hot", "[[0],[1]]", "[[0,1]]", "--dtype", "uint32", "--axis", "1", "--output-shape", "2,3,1"],
     "OutputTensor has 3 dimensions and IndicesTensor 2"),
    (["scatter_elements", "[[1,2],[3,4]]", "[[0,1]]", "[[5,6],[7,8]]", "--dtype", "int32"], "UpdatesTensor Sizes"),
    (["scatter_nd", "[[1,2],[3,4]]", "[[0]]", "[[5,6,7]]", "--dtype", "int32"], "UpdatesTensor Sizes [1, 3] are not"),
    (["one_hot", "[[0],[1]]", "[[0,1]]", "--dtype", "uint32", "--output-shape", "3,1"], "size along Axis must be 1"),
    (["one_hot", "[[0],[1]]", "[[1]]", "--dtype", "uint32", "--axis", "1", "--output-shape", "2,3"],
     "fewer than 2 elements"),
    (["one_hot", "[[0],[1]]", "[[0,1]]", "--dtype", "uint32", "--axis", "1", "--output-shape", "3,3"],
     "differ outside Axis 1"),
    (["top_k", "[[1,2],[3,4]]", "--dtype", "float32", "--axis", "1", "--k", "3"], "K 3 is out of range"),
    (["top_k1", "[[1,2],[3,4]]", "--dtype", "float32", "--axis", "2"], "Axis 2 is out of range"),
]


@pytest.mark.parametrize("arguments, message", VIOLATIONS, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(VIOLATIONS)])
def test_rule_violations_exit_3(arguments, message):
    result = cli_run(*arguments, "-o", "-")
    assert result.exit_code == 3, result.output
    assert message in result.output and "dmlcli: error:" in result.output
    assert "Traceback" not in result.output


def test_gather_nd1_cli_batch():
    result = cli_run("gather_nd1", "[[[1,2],[3,4]]]", "[[[1],[0]]]", "--dtype", "int32",
                     "--batch-dimension-count", "1", "--input-dimension-count", "2", "--indices-dimension-count", "2",
                     "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"] == [[[2, 3]]]


def test_one_hot_without_output_shape_is_a_usage_error():
    result = cli_run("one_hot", "[[0],[1]]", "[[0,1]]", "--dtype", "uint32", "--axis", "1", "-o", "-")
    assert result.exit_code == 2 and "--output-shape" in result.output and "Traceback" not in result.output


def test_output_shape_is_checked_where_the_rule_gives_the_sizes():
    result = cli_run("gather", "[1,2,3]", "[2]", "--dtype", "int32", "--output-shape", "2", "-o", "-")
    assert result.exit_code == 3 and "OutputTensor Sizes [2] do not match" in result.output
    result = cli_run("gather", "[1,2,3]", "[2]", "--dtype", "int32", "--output-shape", "1", "-o", "-")
    assert result.exit_code == 0 and json.loads(result.output)["data"] == [3]
    result = cli_run("gather", "[1,2,3]", "[2]", "--dtype", "int32", "--output-shape", "x", "-o", "-")
    assert result.exit_code == 2 and "--output-shape" in result.output


def test_nonzero_given_output_sizes_are_checked():
    x = np.float32([[1, 0], [0, 2]])
    for sizes, message in [({"OutputCoordinatesTensor": (3, 2)}, "M = 4"),
                           ({"OutputCoordinatesTensor": (4, 3)}, "N = 3 is out of range"),
                           ({"OutputCountTensor": (1, 2)}, "must all be 1")]:
        with pytest.raises(dmlcli.ValidationError, match=message):
            dmlcli.run("nonzero_coordinates", x, output_shapes=sizes)


# ---------------------------------------------------------------- the pages' examples


def run(op, *arrays, **options):
    return dmlcli.run(op, *arrays, **options)


def test_gather_page_examples():
    assert run("gather", np.float32([11, 12, 13, 14]), np.uint32([3, 1, 3, 0, 2]), index_dimensions=1).tolist() == \
        [14, 12, 14, 11, 13]
    data = np.float32([[1, 2], [3, 4], [5, 6]])
    assert run("gather", data, np.uint32([[0, 1, 1, 2]]), index_dimensions=1).tolist() == \
        [[1, 2], [3, 4], [3, 4], [5, 6]]
    assert run("gather", data, np.uint32([[1, 0]]), axis=1, index_dimensions=2).tolist() == [[2, 1], [4, 3], [6, 5]]
    cube = np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3)
    assert run("gather", cube, np.uint32([[[0, 2]]]), axis=2, index_dimensions=2).tolist() == \
        [[[1, 3]], [[4, 6]], [[7, 9]]]
    assert run("gather", data.reshape(1, 3, 2), np.uint32([[[0, 1], [1, 2]]]), axis=1, index_dimensions=2).tolist() \
        == [[[1, 2], [3, 4]], [[3, 4], [5, 6]]]


def test_gather_elements_and_nd_page_examples():
    assert run("gather_elements", np.float32([[1, 2, 3], [4, 5, 6], [7, 8, 9]]),
               np.uint32([[1, 2, 0], [2, 0, 0]])).tolist() == [[4, 8, 3], [7, 2, 3]]
    assert run("gather_nd", np.float32([[0, 1], [2, 3]]), np.uint32([[1], [0]])).tolist() == [[2, 3], [0, 1]]
    got = run("gather_nd", np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2), np.uint32([[[[0, 1], [1, 0]]]]),
              input_dimension_count=3, indices_dimension_count=2)
    assert got.tolist() == [[[[2, 3], [4, 5]]]]
    got = run("gather_nd1", np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2),
              np.uint32([[[[0, 0], [1, 1]], [[1, 1], [0, 0]], [[0, 1], [1, 0]]]]),
              input_dimension_count=3, indices_dimension_count=3, batch_dimension_count=1)
    assert got.tolist() == [[[[0, 3], [7, 4], [9, 10]]]]
    # GATHER_ND's Sizes example: {3,4,5,6,7} with {1,1,1,2,3} tuples of 3 -> {1,1,2,6,7}
    verdict = plan("gather_nd", [(parse_data_type("float32"), (3, 4, 5, 6, 7)), (parse_data_type("uint32"),
                                                                                 (1, 1, 1, 2, 3))],
                   indices_dimension_count=3)
    assert verdict.call.output.shape == (1, 1, 2, 6, 7)


def test_scatter_page_examples():
    assert run("scatter", np.float32([0, 1, 2, 3, 4]), np.uint32([3, 1, 3, 0]), np.float32([5, 6, 7, 8])).tolist() \
        == [8, 6, 2, 7, 4]
    got = run("scatter_elements", np.zeros((3, 3), np.float32), np.uint32([[1, 0, 2], [0, 2, 1]]),
              np.float32([[10, 11, 12], [20, 21, 22]]))
    assert got.tolist() == [[20, 11, 0], [10, 0, 22], [0, 21, 12]]
    # SCATTER_ND's example with its Updates given the same DimensionCount as the others ({1,4}, not {4})
    got = run("scatter_nd", np.arange(1, 9, dtype=np.float32)[None], np.uint32([[4], [3], [1], [7]]),
              np.float32([[9, 10, 11, 12]]), input_dimension_count=1)
    assert got.tolist() == [[1, 11, 3, 10, 9, 6, 7, 12]]


def test_one_hot_page_examples():
    values = np.float32([0, 1]).reshape(1, 1, 1, 2)
    shape = dict(output_shape=(1, 1, 3, 4))
    assert run("one_hot", np.uint32([0, 3, 2]).reshape(1, 1, 3, 1), values, axis=3, **shape)[0, 0].tolist() == \
        [[1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]
    assert run("one_hot", np.uint32([0, 2, 1, 0]).reshape(1, 1, 1, 4), values, axis=2, **shape)[0, 0].tolist() == \
        [[1, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0]]
    assert run("one_hot", np.uint32([0, 3, 2]).reshape(1, 1, 3, 1), np.float32([4, 2, 9]).reshape(1, 1, 3, 1),
               axis=3, **shape)[0, 0].tolist() == [[2, 4, 4, 4], [4, 4, 4, 2], [4, 4, 2, 4]]
    assert run("one_hot", np.int32([-3, 100, 3]).reshape(1, 1, 3, 1), values, axis=3, **shape)[0, 0].tolist() == \
        [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]]


def test_top_k_page_examples():
    x = np.float32([[0, 1, 10, 11], [3, 2, 9, 8], [4, 5, 6, 7]]).reshape(1, 1, 3, 4)
    values, index = run("top_k", x, axis=3, k=2)
    assert values[0, 0].tolist() == [[11, 10], [9, 8], [7, 6]] and index[0, 0].tolist() == [[3, 2], [2, 3], [3, 2]]
    assert index.dtype == np.uint32
    values, index = run("top_k", x, axis=2, k=2)
    assert values[0, 0].tolist() == [[4, 5, 10, 11], [3, 2, 9, 8]] and index[0, 0].tolist() == [[2, 2, 0, 0],
                                                                                                [1, 1, 1, 1]]
    tied = np.float32([[1, 2, 2, 3], [3, 4, 5, 5], [6, 6, 6, 6]]).reshape(1, 1, 3, 4)
    for op in ("top_k", "top_k1"):
        values, index = run(op, tied, axis=3, k=3)
        assert values[0, 0].tolist() == [[3, 2, 2], [5, 5, 4], [6, 6, 6]]
        assert index[0, 0].tolist() == [[3, 1, 2], [2, 3, 1], [0, 1, 2]]
    values, index = run("top_k1", tied, axis=3, k=3, axis_direction="increasing")
    assert values[0, 0].tolist() == [[1, 2, 2], [3, 4, 5], [6, 6, 6]] and index[0, 0].tolist() == [[0, 1, 2]] * 3


def test_nonzero_page_example():
    x = np.float32([[1.0, 0.0, 0.0, 2.0], [-0.0, 3.5, 0.0, -5.2]]).reshape(1, 1, 2, 4)
    count, coordinates = run("nonzero_coordinates", x, output_shapes={"OutputCoordinatesTensor": (1, 1, 8, 3)})
    assert count.shape == (1, 1, 1, 1) and count.dtype == np.uint32 and int(count.reshape(-1)[0]) == 4
    assert coordinates.dtype == np.uint32 and coordinates.shape == (1, 1, 8, 3)
    assert coordinates[0, 0, :4].tolist() == [[0, 0, 0], [0, 0, 3], [0, 1, 1], [0, 1, 3]]
    assert coordinates[0, 0, 4:].tolist() == [[0, 0, 0]] * 4  # dmlcli's zeros beyond the count
    count, coordinates = run("nonzero_coordinates", x)  # default N: the DimensionCount
    assert coordinates.shape == (1, 1, 8, 4) and coordinates[0, 0, 1].tolist() == [0, 0, 0, 3]


# ---------------------------------------------------------------- references (plain loops)


def position(index: int, size: int, signed: bool):
    """A scatter's (and ONE_HOT's) rule: negative signed indices count from the end; anything outside is None
    (the update is skipped)."""
    if signed and index < 0:
        index += size
    return index if 0 <= index < size else None


def gathered_position(index: int, size: int, signed: bool) -> int:
    """A gather's rule, DirectML's shader clamp: negative signed indices count from the end, then the index is
    clamped to the dimension (below it the first element, past it the last). Python integers: no overflow."""
    if signed and index < 0:
        index += size
    return min(max(index, 0), size - 1)


def bits_equal(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    width = np.dtype(f"uint{got.dtype.itemsize * 8}")
    assert np.array_equal(got.view(width), expected.view(width)), (got, expected)


def ref_gather(data, indices, axis):
    """numpy.take semantics with the clamp rule, over every index dimension."""
    signed = indices.dtype.kind == "i"
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    out = np.empty(shape, data.dtype)
    for a in itertools.product(*map(range, data.shape[:axis])):
        for j in itertools.product(*map(range, indices.shape)):
            p = gathered_position(int(indices[j]), data.shape[axis], signed)
            for b in itertools.product(*map(range, data.shape[axis + 1:])):
                out[a + j + b] = data[a + (p,) + b]
    return out


def ref_gather_elements(data, indices, axis):
    signed = indices.dtype.kind == "i"
    out = np.empty(indices.shape, data.dtype)
    for c in itertools.product(*map(range, indices.shape)):
        p = gathered_position(int(indices[c]), data.shape[axis], signed)
        out[c] = data[c[:axis] + (p,) + c[axis + 1:]]
    return out


def ref_gather_nd(data, indices, batch):
    """ONNX GatherND with batch_dims, and the clamp rule coordinate by coordinate."""
    signed = indices.dtype.kind == "i"
    q = indices.shape[-1]
    tail = data.shape[batch + q:]
    out = np.empty(indices.shape[:-1] + tail, data.dtype)
    for j in itertools.product(*map(range, indices.shape[:-1])):
        coords = [gathered_position(int(indices[j + (k,)]), data.shape[batch + k], signed) for k in range(q)]
        out[j] = data[j[:batch] + tuple(coords)]
    return out


def ref_scatter_elements(data, indices, updates, axis):
    signed = indices.dtype.kind == "i"
    out = data.copy()
    for c in itertools.product(*map(range, indices.shape)):  # row-major: a later duplicate overwrites
        p = position(int(indices[c]), data.shape[axis], signed)
        if p is not None:
            out[c[:axis] + (p,) + c[axis + 1:]] = updates[c]
    return out


def ref_scatter_nd(data, indices, updates):
    signed = indices.dtype.kind == "i"
    q = indices.shape[-1]
    out = data.copy()
    for j in itertools.product(*map(range, indices.shape[:-1])):
        coords = [position(int(indices[j + (k,)]), data.shape[k], signed) for k in range(q)]
        if None not in coords:
            out[tuple(coords)] = updates[j]
    return out


def ref_one_hot(indices, values, axis, depth):
    signed = indices.dtype.kind == "i"
    flat = values.reshape(-1)
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis + 1:]
    out = np.empty(shape, values.dtype)
    for c in itertools.product(*map(range, shape)):
        p = position(int(indices[c[:axis] + (0,) + c[axis + 1:]]), depth, signed)
        out[c] = flat[1] if p == c[axis] else flat[0]
    return out


def sort_key(value, decreasing):
    value = value.item()
    nan = isinstance(value, float) and math.isnan(value)
    if decreasing:
        return (0, 0) if nan else (1, -value)
    return (1, 0) if nan else (0, value)


def ref_top_k(x, axis, k, decreasing):
    moved = np.moveaxis(x, axis, -1)
    values = np.empty(moved.shape[:-1] + (k,), x.dtype)
    index = np.empty(moved.shape[:-1] + (k,), np.int64)
    for c in itertools.product(*map(range, moved.shape[:-1])):
        row = moved[c]
        order = sorted(range(row.size), key=lambda i: (sort_key(row[i], decreasing), i))[:k]
        index[c] = order
        values[c] = row[order]
    return np.moveaxis(values, -1, axis), np.moveaxis(index, -1, axis)


# ---------------------------------------------------------------- hypothesis


def array_of(draw, shape, dtype):
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    if dtype.kind == "f":
        pool = [0.0, -0.0, 1.5, -2.0, float("inf"), float("nan"), 3.0, 65504.0]
        items = draw(st.lists(st.sampled_from(pool), min_size=count, max_size=count))
    else:
        info = np.iinfo(dtype)
        items = draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=count, max_size=count))
    return np.array(items, dtype).reshape(shape)


def indices_of(draw, shape, dtype, size):
    """Indices mostly in range, some negative (signed types), some out of range either side, now and then the
    type's own extremes (INT64's lowest, UINT64's largest: past any dimension, and past INT64's range)."""
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    low = -size - 2 if dtype.kind == "i" else 0
    near = st.integers(low, size + 2)
    extreme = st.sampled_from([int(info.min), int(info.max)])
    items = draw(st.lists(st.one_of(near, near, near, extreme), min_size=math.prod(shape), max_size=math.prod(shape)))
    return np.array(items, dtype).reshape(shape)


shapes = st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple)


@SETTINGS
@given(st.data())
def test_gather_against_reference(data):
    shape = data.draw(shapes)
    dtype = data.draw(st.sampled_from(DATA_DTYPES))
    axis = data.draw(st.integers(0, len(shape) - 1))
    index_count = data.draw(st.integers(0, len(shape)))
    index_sizes = tuple(data.draw(st.lists(st.integers(1, 3), min_size=index_count, max_size=index_count)))
    # Room in the output: rank + IndexDimensions - 1 sizes must fit the rank once ones are dropped.
    full = shape[:axis] + index_sizes + shape[axis + 1:]
    if sum(1 for s in full if s != 1) > len(shape):
        return
    x = array_of(data.draw, shape, dtype)
    idx = indices_of(data.draw, index_sizes, data.draw(st.sampled_from(INDEX_DTYPES)), shape[axis])
    padded = idx.reshape((1,) * (len(shape) - index_count) + index_sizes)
    got = run("gather", x, padded, axis=axis, index_dimensions=index_count)
    expected = ref_gather(x, idx, axis)
    bits_equal(got, expected.reshape(got.shape))


@SETTINGS
@given(st.data())
def test_gather_elements_against_reference(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    x = array_of(data.draw, shape, data.draw(st.sampled_from(DATA_DTYPES)))
    index_shape = shape[:axis] + (data.draw(st.integers(1, 4)),) + shape[axis + 1:]
    idx = indices_of(data.draw, index_shape, data.draw(st.sampled_from(INDEX_DTYPES)), shape[axis])
    bits_equal(run("gather_elements", x, idx, axis=axis), ref_gather_elements(x, idx, axis))


@SETTINGS
@given(st.data())
def test_gather_nd_against_reference(data):
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple))
    batch = data.draw(st.integers(0, len(shape) - 1))
    q = data.draw(st.integers(1, len(shape) - batch))
    middle = tuple(data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    index_shape = shape[:batch] + middle + (q,)
    rank = max(len(shape), len(index_shape))
    out_meaningful = shape[:batch] + middle + shape[batch + q:]
    if sum(1 for s in out_meaningful if s != 1) > rank:
        return
    x = array_of(data.draw, shape, data.draw(st.sampled_from(DATA_DTYPES)))
    idx = indices_of(data.draw, index_shape, data.draw(st.sampled_from(INDEX_DTYPES)), min(shape))
    padded_x = x.reshape((1,) * (rank - x.ndim) + x.shape)
    padded_idx = idx.reshape((1,) * (rank - idx.ndim) + idx.shape)
    options = dict(input_dimension_count=x.ndim, indices_dimension_count=idx.ndim)
    expected = ref_gather_nd(x, idx, batch)
    got = run("gather_nd1", padded_x, padded_idx, batch_dimension_count=batch, **options)
    bits_equal(got, expected.reshape(got.shape))
    if batch == 0:
        bits_equal(run("gather_nd", padded_x, padded_idx, **options), got)


@SETTINGS
@given(st.data())
def test_scatter_elements_against_reference(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    dtype = data.draw(st.sampled_from(DATA_DTYPES))
    x = array_of(data.draw, shape, dtype)
    index_shape = shape[:axis] + (data.draw(st.integers(1, 4)),) + shape[axis + 1:]
    idx = indices_of(data.draw, index_shape, data.draw(st.sampled_from(INDEX_DTYPES)), shape[axis])
    updates = array_of(data.draw, index_shape, dtype)
    bits_equal(run("scatter_elements", x, idx, updates, axis=axis), ref_scatter_elements(x, idx, updates, axis))


@SETTINGS
@given(st.data())
def test_scatter_nd_against_reference(data):
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple))
    q = data.draw(st.integers(1, len(shape)))
    middle = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    updates_meaningful = middle + shape[q:]
    rank = max(len(shape), len(middle) + 1)
    if sum(1 for s in updates_meaningful if s != 1) > rank:
        return
    dtype = data.draw(st.sampled_from(DATA_DTYPES))
    x = array_of(data.draw, shape, dtype)
    idx = indices_of(data.draw, middle + (q,), data.draw(st.sampled_from(INDEX_DTYPES)), min(shape))
    updates = array_of(data.draw, updates_meaningful, dtype)
    padded = [a.reshape((1,) * (rank - a.ndim) + a.shape) for a in (x, idx)]
    expected_updates_shape = _fit(updates_meaningful, rank)
    got = run("scatter_nd", *padded, updates.reshape(expected_updates_shape), input_dimension_count=x.ndim,
              indices_dimension_count=idx.ndim)
    bits_equal(got, ref_scatter_nd(x, idx, updates).reshape(got.shape))


def _fit(sizes, rank):
    """Sizes fitted into `rank` dimensions as dmlcli's rule does (ones prepended, or dropped leftmost first)."""
    sizes = list(sizes)
    while len(sizes) > rank:
        sizes.remove(1)
    return (1,) * (rank - len(sizes)) + tuple(sizes)


@SETTINGS
@given(st.data())
def test_one_hot_against_reference(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    depth = data.draw(st.integers(1, 5))
    index_shape = shape[:axis] + (1,) + shape[axis + 1:]
    idx = indices_of(data.draw, index_shape, data.draw(st.sampled_from(INDEX_DTYPES)), depth)
    dtype = data.draw(st.sampled_from(DATA_DTYPES))
    values = array_of(data.draw, (1,) * (len(shape) - 1) + (data.draw(st.integers(2, 3)),), dtype)
    out_shape = shape[:axis] + (depth,) + shape[axis + 1:]
    got = run("one_hot", idx, values, axis=axis, output_shape=out_shape)
    bits_equal(got, ref_one_hot(idx, values, axis, depth))


@SETTINGS
@given(st.data())
def test_top_k_against_reference(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    dtype = data.draw(st.sampled_from([t for t in DATA_DTYPES if t != "float64"]))
    x = array_of(data.draw, shape, dtype)
    if np.dtype(dtype).kind != "f":  # few distinct values: ties
        x = (x % 3).astype(dtype)
    k = data.draw(st.integers(1, shape[axis]))
    direction = data.draw(st.sampled_from(["increasing", "decreasing"]))
    index_type = data.draw(st.sampled_from(["uint32", "uint64"]))
    values, index = run("top_k1", x, axis=axis, k=k, axis_direction=direction, output_dtype=index_type)
    expected_values, expected_index = ref_top_k(x, axis, k, direction == "decreasing")
    bits_equal(values, expected_values)
    assert index.dtype == np.dtype(index_type) and index.tolist() == expected_index.tolist()
    if direction == "decreasing":
        same_values, same_index = run("top_k", x, axis=axis, k=k, output_dtype=index_type)
        bits_equal(same_values, values)
        assert same_index.tolist() == index.tolist()


@SETTINGS
@given(st.data())
def test_nonzero_against_reference(data):
    shape = data.draw(shapes.map(lambda s: (1,) * max(0, 2 - len(s)) + s))
    x = array_of(data.draw, shape, data.draw(st.sampled_from(["float32", "float16", "int8", "uint32"])))
    if x.dtype.kind != "f":
        x = (x % 2).astype(x.dtype)
    count, coordinates = run("nonzero_coordinates", x)
    found = [c for c in itertools.product(*map(range, shape)) if x[c] != 0]
    assert int(count.reshape(-1)[0]) == len(found)
    rows = coordinates.reshape(-1, len(shape))
    assert rows[:len(found)].tolist() == [list(c) for c in found]
    assert not rows[len(found):].any()


# ---------------------------------------------------------------- the rules dmlcli chose


def test_negative_and_out_of_range_gather_indices_are_clamped():
    data = np.float32([10, 20, 30])
    assert run("gather", data, np.int64([-1, -3, 0])).tolist() == [30, 10, 10]
    # Outside the dimension: clamped into it (DirectML's shader clamp, which Chromium's WebNN relies on).
    assert run("gather", data, np.int32([3, -4, 1, 2**31 - 1, -2**31])).tolist() == [30, 10, 20, 30, 10]
    assert run("gather", data, np.uint64([2**64 - 1, 2**63, 2])).tolist() == [30, 30, 30]  # no wrap for unsigned
    assert run("gather", data, np.uint32([2**32 - 1, 0])).tolist() == [30, 10]
    assert run("gather_elements", data, np.int32([-1, 5, -7])).tolist() == [30, 30, 10]
    # GATHER_ND: coordinate by coordinate ([-1, 0] is [1, 0]; [0, 2] is [0, 1]; [-9, 9] is [0, 1]).
    table = np.float32([[1, 2], [3, 4]])
    tuples = np.int64([[-1, 0], [0, 2], [-9, 9]])
    assert run("gather_nd", table, tuples).tolist() == [[3, 2, 2]]
    assert run("gather_nd1", table, tuples).tolist() == [[3, 2, 2]]
    # Along an inner axis the index is clamped, not the flat address (which would read the next row).
    grid = np.float32([[1, 2, 3], [4, 5, 6]])
    assert run("gather", grid, np.uint32([[5]]), axis=1).tolist() == [[3], [6]]


def test_gather_describes_where_the_clamp_comes_from():
    result = CliRunner().invoke(cli, ["describe", "gather"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "clamped" in text and "graph_impl_dml.cc" in text and "clamping it in the shader" in text
    for name in ("gather_elements", "gather_nd", "gather_nd1"):
        notes = " ".join(find_operator(name).notes)
        assert "clamp" in notes and "graph_impl_dml.cc" in notes, name


def test_out_of_range_scatter_updates_are_skipped():
    data = np.float32([1, 2, 3])
    assert run("scatter", data, np.int32([-1, 7, -9]), np.float32([9, 8, 7])).tolist() == [1, 2, 9]
    assert run("scatter_nd", np.float32([[1, 2], [3, 4]]), np.int64([[0], [5], [-1]]),
               np.float32([[5, 6], [7, 8], [9, 9]])).tolist() == [[5, 6], [9, 9]]


def test_duplicate_scatter_targets_last_update_wins():
    targets = np.uint32([0, 2, 0, 2, 0])
    assert run("scatter", np.int32([0, 0, 0]), targets, np.int32([1, 2, 3, 4, 5])).tolist() == [5, 0, 4]
    got = run("scatter_nd", np.int32([[0, 0], [0, 0]]), np.uint32([[1], [1], [0], [1]]),
              np.int32([[1, 1], [2, 2], [3, 3], [4, 4]]))
    assert got.tolist() == [[3, 3], [4, 4]]
    many = np.zeros(7, np.uint8)
    rng = np.random.default_rng(7)
    idx = rng.integers(0, 7, 200).astype(np.uint32)
    updates = rng.integers(0, 255, 200).astype(np.uint8)
    bits_equal(run("scatter", many, idx, updates), ref_scatter_elements(many, idx, updates, 0))


def test_one_hot_below_minus_depth_and_at_depth_are_off():
    got = run("one_hot", np.int64([[5], [-6], [-1], [-5]]), np.float32([[0, 1]]), axis=1, output_shape=(4, 5))
    assert got.tolist() == [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0]]


def test_top_k_nan_and_signed_zero():
    x = np.float32([1, np.nan, -0.0, 0.0, np.inf, np.nan])
    values, index = run("top_k1", x, axis=0, k=6)
    assert index.tolist() == [1, 5, 4, 0, 2, 3]  # NaN first, -0 and +0 tie by index
    values, index = run("top_k1", x, axis=0, k=6, axis_direction="increasing")
    assert index.tolist() == [2, 3, 0, 4, 1, 5]


def test_nan_payloads_and_signed_zero_are_copied():
    payload = np.uint32([0x7FC00001, 0xFFC12345, 0x80000000]).view(np.float32)
    bits_equal(run("gather", payload, np.uint32([2, 1, 0])), payload[[2, 1, 0]])
    values, _ = run("top_k1", payload, axis=0, k=3, axis_direction="increasing")
    bits_equal(values, payload[[2, 0, 1]])  # -0 first, then the NaNs in index order
    half = np.uint16([0x7E01, 0x8000]).view(np.float16)
    bits_equal(run("scatter", np.float16([1, 2]), np.uint32([1, 0]), half), half[[1, 0]])


def test_nonzero_signed_zero_and_nan():
    count, coordinates = run("nonzero_coordinates", np.float16([[-0.0, np.nan], [0.0, 1.0]]))
    assert int(count.reshape(-1)[0]) == 2 and coordinates[:2].tolist() == [[0, 1], [1, 1]]


def test_top_k_k_equal_to_the_axis_size_sorts_everything():
    values, index = run("top_k", np.int8([3, -1, 7, 3]), axis=0, k=4)
    assert values.tolist() == [7, 3, 3, -1] and index.tolist() == [2, 0, 3, 1]


# ---------------------------------------------------------------- the command line, one run per operator


CLI_RUNS = [
    (["gather", '{"dtype":"float32","data":[[1,2],[3,4],[5,6]]}', '{"dtype":"int64","data":[[2,-3]]}',
      "--index-dimensions", "1"], [[5, 6], [1, 2]]),
    (["gather_elements", "[[1,2],[3,4]]", "[[1,0],[0,0]]", "--dtype", "uint32", "--axis", "1"], [[2, 1], [3, 3]]),
    (["gather_nd", "[[1,2],[3,4]]", "[[1,0],[0,1]]", "--dtype", "uint32"], [[3, 2]]),
    (["gather_nd1", "[[1,2],[3,4]]", "[[1],[0]]", "--dtype", "uint32", "--batch-dimension-count", "1"], [[2, 3]]),
    (["scatter", "[1,2,3]", "[2,0]", "[8,9]", "--dtype", "uint32"], [9, 2, 8]),
    (["scatter_elements", "[[1,2],[3,4]]", "[[1],[0]]", "[[7],[8]]", "--dtype", "uint32", "--axis", "1"],
     [[1, 7], [8, 4]]),
    (["scatter_nd", "[[1,2],[3,4]]", "[[1]]", "[[7,8]]", "--dtype", "uint32"], [[1, 2], [7, 8]]),
    (["one_hot", "[[2],[0]]", "[[0,5]]", "--dtype", "uint32", "--axis", "1", "--output-shape", "2,3"],
     [[0, 0, 5], [5, 0, 0]]),
]


@pytest.mark.parametrize("arguments, expected", CLI_RUNS, ids=[a[0] for a, _ in CLI_RUNS])
def test_cli_runs(arguments, expected):
    result = cli_run(*arguments, "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"] == expected


@pytest.mark.parametrize("op, extra", [("top_k", []), ("top_k1", ["--axis-direction", "increasing"])])
def test_cli_top_k_writes_both_outputs(op, extra, tmp_path):
    target = tmp_path / "out.npz"
    result = cli_run(op, "[[3,1,2]]", "--dtype", "float32", "--axis", "1", "--k", "2", *extra, "-o", str(target))
    assert result.exit_code == 0, result.output
    saved = np.load(target)
    values, index = saved["OutputValueTensor"], saved["OutputIndexTensor"]
    assert (values.tolist(), index.tolist()) == (([[3, 2]], [[0, 2]]) if not extra else ([[1, 2]], [[1, 2]]))
    assert index.dtype == np.uint32


def test_cli_nonzero_writes_both_outputs(tmp_path):
    target = tmp_path / "out.npz"
    result = cli_run("nonzero_coordinates", "[[0,3],[4,0]]", "--dtype", "int8", "-o", str(target))
    assert result.exit_code == 0, result.output
    saved = np.load(target)
    assert saved["OutputCountTensor"].tolist() == [[2]]
    assert saved["OutputCoordinatesTensor"].tolist() == [[0, 1], [1, 0], [0, 0], [0, 0]]


DXDISPATCH_MODEL = """{
  "resources": {
    "x": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 1, 10, 11, 3, 2, 9, 8, 4, 5, 6, 7]},
    "values": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 6, "value": 0}},
    "indices": {"initialValuesDataType": "UINT32", "initialValues": {"valueCount": 6, "value": 0}},
    "onehot": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 12, "value": 0}},
    "idx": {"initialValuesDataType": "UINT32", "initialValues": [0, 3, 2]},
    "vals": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 1]}
  },
  "dispatchables": {
    "topk": {"type": "DML_OPERATOR_TOP_K1", "desc": {
      "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 4]},
      "OutputValueTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 2]},
      "OutputIndexTensor": {"DataType": "UINT32", "Sizes": [1, 1, 3, 2]},
      "Axis": 3, "K": 2, "AxisDirection": "DML_AXIS_DIRECTION_DECREASING"}},
    "hot": {"type": "DML_OPERATOR_ONE_HOT", "desc": {
      "IndicesTensor": {"DataType": "UINT32", "Sizes": [1, 1, 3, 1]},
      "ValuesTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2]},
      "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 4]},
      "Axis": 3}}
  },
  "commands": [
    {"type": "dispatch", "dispatchable": "topk", "bindings": {"InputTensor": "x", "OutputValueTensor": "values", "OutputIndexTensor": "indices"}},
    {"type": "dispatch", "dispatchable": "hot", "bindings": {"IndicesTensor": "idx", "ValuesTensor": "vals", "OutputTensor": "onehot"}},
    {"type": "print", "resource": "values"},
    {"type": "print", "resource": "indices"},
    {"type": "print", "resource": "onehot"}
  ]
}
"""


def test_a_dxdispatch_model_runs_top_k1_and_one_hot(tmp_path, monkeypatch):
    # TOP_K1's two outputs bound to two resources; ONE_HOT's depth from its OutputTensor desc (the page's example 1).
    (tmp_path / "model.json").write_text(DXDISPATCH_MODEL)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", "model.json", "--no-timing"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["Resource 'values': 11, 10, 9, 8, 7, 6",
                                          "Resource 'indices': 3, 2, 2, 3, 3, 2",
                                          "Resource 'onehot': 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0"]


# ---------------------------------------------------------------- ONNX node tests, mapped by hand


def onnx_case(name):
    path = ONNX / f"onnx__{name}.json"
    if not path.exists():
        pytest.skip(f"{path} not found (the ONNX node tests live in ../shared/onnx_operators)")
    case = json.loads(path.read_text())

    def tensor(spec):
        def number(v):
            return float(v) if isinstance(v, str) else v
        flat = np.array([number(v) for v in np.array(spec["data"], dtype=object).reshape(-1).tolist()],
                        dtype=object)
        return np.array(flat.tolist(), dtype=spec["dtype"]).reshape(spec["shape"])
    return case, [tensor(s) for s in case["inputs"]], [tensor(s) for s in case["expected"]]


def padded(array, rank):
    return array.reshape((1,) * (rank - array.ndim) + array.shape)


@pytest.mark.parametrize("name", ["test_gather_0", "test_gather_1", "test_gather_negative_indices"])
def test_onnx_gather(name):
    case, (data, indices), (expected,) = onnx_case(name)
    axis = case["attributes"].get("axis", 0) % data.ndim
    # DirectML: one DimensionCount for all three tensors; indices padded with leading ones.
    got = run("gather", data, padded(indices, data.ndim), axis=axis, index_dimensions=indices.ndim)
    bits_equal(got, expected.reshape(got.shape))


@pytest.mark.parametrize("name", ["test_gather_elements_0", "test_gather_elements_1",
                                  "test_gather_elements_negative_indices"])
def test_onnx_gather_elements(name):
    case, (data, indices), (expected,) = onnx_case(name)
    got = run("gather_elements", data, indices, axis=case["attributes"].get("axis", 0) % data.ndim)
    bits_equal(got, expected)


@pytest.mark.parametrize("name", ["test_gathernd_example_int32", "test_gathernd_example_int32_batch_dim1"])
def test_onnx_gather_nd(name):
    case, (data, indices), (expected,) = onnx_case(name)
    batch = case["attributes"].get("batch_dims", 0)
    rank = max(data.ndim, indices.ndim)
    op = "gather_nd1" if batch else "gather_nd"
    options = {"batch_dimension_count": batch} if batch else {}
    got = run(op, padded(data, rank), padded(indices, rank), input_dimension_count=data.ndim,
              indices_dimension_count=indices.ndim, **options)
    bits_equal(got, expected.reshape(got.shape))


@pytest.mark.parametrize("name", ["test_scatter_elements_with_axis", "test_scatter_elements_without_axis",
                                  "test_scatter_elements_with_negative_indices"])
def test_onnx_scatter_elements(name):
    case, (data, indices, updates), (expected,) = onnx_case(name)
    got = run("scatter_elements", data, indices, updates, axis=case["attributes"].get("axis", 0) % data.ndim)
    bits_equal(got, expected)


@pytest.mark.parametrize("name", ["test_scatter_elements_with_duplicate_indices",
                                  "test_scatter_elements_with_reduction_max", "test_scatter_elements_with_reduction_min",
                                  "test_scatter_elements_with_reduction_mul", "test_scatternd_min_with_element_indices",
                                  "test_scatternd_multiply"])
def test_onnx_scatter_with_reduction_is_not_expressible(name):
    case, _, _ = onnx_case(name)
    # ONNX's `reduction` (add, mul, max, min) combines an update with the element it lands on; DirectML's
    # SCATTER_ELEMENTS and SCATTER_ND only overwrite (no such field), so these cases have no DirectML call.
    assert case["attributes"]["reduction"] in ("add", "mul", "max", "min")
    pytest.skip(f"ONNX reduction={case['attributes']['reduction']}: DirectML's scatter operators only overwrite")


@pytest.mark.parametrize("name", ["test_onehot_negative_indices", "test_onehot_out_of_range_indices",
                                  "test_onehot_without_axis", "test_onehot_with_axis"])
def test_onnx_one_hot(name):
    case, (indices, depth, values), (expected,) = onnx_case(name)
    if indices.dtype.kind == "f":
        pytest.skip("ONNX float indices: DirectML's IndicesTensor is integer-only")
    axis = case["attributes"].get("axis", -1) % expected.ndim
    # DirectML: IndicesTensor of the output's rank with size 1 at Axis; ValuesTensor of that rank too.
    got = run("one_hot", np.expand_dims(indices, axis), padded(values, expected.ndim), axis=axis,
              output_shape=expected.shape)
    assert int(depth) == expected.shape[axis]
    bits_equal(got, expected)


@pytest.mark.parametrize("name", ["test_top_k", "test_top_k_negative_axis", "test_top_k_same_values",
                                  "test_top_k_same_values_2d", "test_top_k_same_values_largest", "test_top_k_smallest",
                                  "test_top_k_uint64"])
def test_onnx_top_k(name):
    case, (x, k), (expected_values, expected_index) = onnx_case(name)
    attributes = case["attributes"]
    axis = attributes.get("axis", -1) % x.ndim
    direction = "decreasing" if attributes.get("largest", 1) else "increasing"
    # ONNX's index output is INT64; DirectML's UINT64 (from 5_0) has the same values for valid indices.
    values, index = run("top_k1", x, axis=axis, k=int(k.reshape(-1)[0]), axis_direction=direction,
                        output_dtype="uint64")
    bits_equal(values, expected_values)
    assert index.astype(np.int64).tolist() == expected_index.tolist()


def test_onnx_nonzero():
    _, (x,), (expected,) = onnx_case("test_nonzero_example")
    count, coordinates = run("nonzero_coordinates", x.astype(np.uint8))
    n = int(count.reshape(-1)[0])
    # ONNX: INT64 [rank, count], coordinates as columns; DirectML: UINT32 rows, the first `count` meaningful.
    assert coordinates[:n].T.astype(np.int64).tolist() == expected.tolist()


class _NumpyUnderAnotherName:
    """NumPy that is not `numpy` to the kernels: they take the branch they take on CuPy (the scatters' explicit
    last-wins selection instead of np.put), so that branch is checked here too, on any machine."""

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.mark.parametrize("seed", range(5))
def test_the_gpu_branch_of_the_scatters_gives_the_cpu_result(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 100, (6, 4)).astype(np.int16)
    cases = [("scatter_elements", [x, rng.integers(-7, 8, (30, 4)).astype(np.int64),
                                   rng.integers(0, 100, (30, 4)).astype(np.int16)], {}),
             ("scatter_nd", [x, rng.integers(-7, 8, (30, 1)).astype(np.int32),
                             rng.integers(0, 100, (30, 4)).astype(np.int16)], {})]
    for op, arrays, options in cases:
        verdict = dmlcli.validate(op, *arrays, **options)
        call = verdict.call
        (on_cpu,) = find_operator(op).array_kernel(np, arrays, call.outputs, call.parameters)
        (other,) = find_operator(op).array_kernel(_NumpyUnderAnotherName(), arrays, call.outputs, call.parameters)
        bits_equal(other, on_cpu)
        bits_equal(on_cpu, (ref_scatter_elements(x, arrays[1], arrays[2], 0) if op == "scatter_elements"
                            else ref_scatter_nd(x, arrays[1], arrays[2])))


def test_direct3d_float_rules_keep_moved_bits_and_flush_where_values_are_compared():
    x = np.uint32([1, 0x7FC00001, 0x80000000]).view(np.float32)  # a subnormal, a NaN with payload, -0
    moved = run("gather", x, np.uint32([0, 1, 2]), float_rules="d3d")
    bits_equal(moved, x)  # data movement: the bits, under either rule
    count, _ = run("nonzero_coordinates", x, float_rules="d3d")
    assert int(count[0]) == 1  # Direct3D flushes the subnormal before the comparison with zero: only NaN counts
    count, _ = run("nonzero_coordinates", x)
    assert int(count[0]) == 2


def test_npy_files_in_and_out(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    np.save(tmp_path / "i.npy", np.int64([[2, -1]]))
    result = cli_run("gather", str(tmp_path / "a.npy"), str(tmp_path / "i.npy"), "--index-dimensions", "1",
                     "-o", str(tmp_path / "out.npy"))
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "out.npy").tolist() == [[8, 9, 10, 11], [8, 9, 10, 11]]
    result = cli_run("top_k", str(tmp_path / "a.npy"), "--axis", "1", "--k", "2", "-o", str(tmp_path / "v.npy"),
                     "-o", str(tmp_path / "ix.npy"))
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "v.npy").tolist() == [[3, 2], [7, 6], [11, 10]]
    assert np.load(tmp_path / "ix.npy").tolist() == [[3, 2]] * 3


def test_gather_word_bytes_is_the_widest_whole_aligned_word():
    """GATHER's GPU kernel moves the widest word (16 bytes at most) that the slice after Axis is a whole number of
    and that the input's start is aligned to; never less than an element."""
    from dmlcli.operators.indexing.entries import gather_word_bytes

    assert gather_word_bytes(4, 16384, 256) == 16
    assert gather_word_bytes(4, 2, 256) == 8
    assert gather_word_bytes(4, 33, 256) == 4
    assert gather_word_bytes(4, 1, 256) == 4
    assert gather_word_bytes(4, 32, 260) == 4  # a view that starts 4 bytes past a 16-byte boundary
    assert gather_word_bytes(4, 32, 264) == 8
    assert gather_word_bytes(1, 3, 256) == 1
    assert gather_word_bytes(2, 1000, 256) == 16
    assert gather_word_bytes(8, 1, 256) == 8
    assert gather_word_bytes(1, 1000, 256) == 8
