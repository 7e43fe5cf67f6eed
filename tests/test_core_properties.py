"""Property tests: dmlcli against the independent element-by-element reference in reference.py."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dmlcli
from dmlcli.feature_levels import NEWEST

from reference import evaluate

# reference.py covers the bitwise, logical and comparison families; the other families have their own
# independent references in tests/test_ops_*.py.
OPERATORS = sorted(op.name.lower() for op in dmlcli.OPERATORS if op.family in ("bitwise", "logical", "comparison"))


def input_types(op_name):
    op = dmlcli.find_operator(op_name)
    return [t.numpy_name for t in op.row_at(NEWEST).tensors[op.inputs[0]].data_types]


def output_types(op_name):
    op = dmlcli.find_operator(op_name)
    return [t.numpy_name for t in op.row_at(NEWEST).tensors[op.output].data_types]


@st.composite
def raw_arrays(draw, dtype, shape):
    """Arrays whose bit patterns are drawn freely: NaN payloads, subnormals, -0.0, infinities."""
    dtype = np.dtype(dtype)
    unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
    special = [0, 1, np.iinfo(unsigned).max, 1 << (dtype.itemsize * 8 - 1)]
    elements = st.one_of(st.sampled_from(special), st.integers(0, int(np.iinfo(unsigned).max)))
    patterns = draw(hnp.arrays(unsigned, shape, elements=elements))
    return patterns.view(dtype)


@st.composite
def shift_counts(draw, dtype, shape):
    width = np.dtype(dtype).itemsize * 8
    elements = st.one_of(st.integers(0, width + 1), st.integers(0, int(np.iinfo(dtype).max)))
    return draw(hnp.arrays(dtype, shape, elements=elements))


@st.composite
def calls(draw, op_name):
    op = dmlcli.find_operator(op_name)
    dtype = draw(st.sampled_from(input_types(op_name)))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    arrays = [draw(raw_arrays(dtype, shape))]
    if len(op.inputs) == 2:
        second = shift_counts(dtype, shape) if op.hooks else raw_arrays(dtype, shape)  # the shifts' count check
        arrays.append(draw(second))
    out_dtype = None
    if op.output_type_is_choice:
        out_dtype = draw(st.sampled_from(output_types(op_name)))
    mode = draw(st.sampled_from(["EITHER", "POSITIVE", "NEGATIVE"])) if op.parameters else "EITHER"
    return arrays, out_dtype, mode


@pytest.mark.parametrize("op_name", OPERATORS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_matches_reference(op_name, data):
    arrays, out_dtype, mode = data.draw(calls(op_name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dmlcli.DmlcliWarning)
        got = dmlcli.run(op_name, *arrays, output_dtype=out_dtype, infinity_mode=mode.lower())
    op = dmlcli.find_operator(op_name)
    expected_dtype = np.dtype(out_dtype) if out_dtype else (
        arrays[0].dtype if not op.output_type_is_choice else np.dtype("uint8"))
    expected = evaluate(op_name, arrays, expected_dtype, mode)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    width = f"uint{got.dtype.itemsize * 8}"
    assert got.view(width).tolist() == expected.view(width).tolist()


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_broadcast_equals_explicit_tiling(data):
    """--broadcast gives what running on inputs tiled out to the common shape gives."""
    op_name = data.draw(st.sampled_from(["bit_and", "logical_or", "logical_less_than", "bit_shift_right"]))
    dtype = data.draw(st.sampled_from(input_types(op_name)))
    shape_a, shape_b = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=4, max_side=4)).input_shapes
    a = data.draw(raw_arrays(dtype, shape_a))
    b = data.draw(raw_arrays(dtype, shape_b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dmlcli.DmlcliWarning)
        got = dmlcli.run(op_name, a, b, broadcast=True)
        tiled = np.broadcast_arrays(a, b)
        expected = dmlcli.run(op_name, *[np.array(t) for t in tiled])
    assert got.shape == expected.shape and got.tobytes() == expected.tobytes()
