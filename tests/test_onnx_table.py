"""The ONNX table (dmlcli/suite/onnx/table.py) as one mapping for `dmlcli test` and `dmlcli onnx`: its reasons
word every placeholder, its element-wise entries agree with the names `dmlcli run` suggests for ONNX operators,
and the new mappings (free order, windows, folded ranks, the provider's Resize) behave as the entries say.
"""

from __future__ import annotations

import string

import numpy as np
import pytest

import dmlcli
from dmlcli.operators import find_operator
from dmlcli.suite.onnx import ENTRIES, TABLE, Planned, Skipped
from dmlcli.suite.onnx.adapters import OnnxCall, resize_differences, resize_plan
from dmlcli.suite.onnx.mapping import directml_operator, plan_call, planned_call, prepare
from dmlcli.suite.onnx.table import VARIANTS, Cannot


def _conditions():
    for entry in ENTRIES:
        for condition in entry.cannot + entry.differs:
            yield entry, condition


def test_every_reason_words_its_placeholders_without_a_default_marker():
    # A call that gives no attribute at all: each placeholder shows the default its condition declares (ONNX's),
    # never "(default)", and a literal brace stays a brace ("{BatchCount, ChannelCount, M, K}" once printed
    # "((default))").
    for entry, condition in _conditions():
        if callable(condition.reason):
            continue
        text = condition.describe(OnnxCall(entry.onnx_op, ()))
        assert "(default)" not in text and "((" not in text, (entry.onnx_op, text)
        named = [field for _, field, _, _ in string.Formatter().parse(condition.reason) if field]
        assert set(named) <= set(condition.defaults), (entry.onnx_op, named)


def test_a_placeholder_without_a_default_is_the_tables_error():
    condition = Cannot(lambda call: True, "ONNX's {surprise} is unknown")
    with pytest.raises(KeyError, match="placeholder {surprise} is no attribute"):
        condition.describe(OnnxCall("Relu", ()))
    assert condition.describe(OnnxCall("Relu", (), {"surprise": 7})) == "ONNX's 7 is unknown"


def test_every_entry_names_a_directml_operator_dmlcli_has_or_says_why_not():
    for entry in ENTRIES:
        if entry.directml is None:
            assert entry.reason and "DirectML" in entry.reason, entry.onnx_op
        else:
            find_operator(entry.directml)


def _planned(op, inputs, **attributes) -> Planned:
    planned = plan_call(OnnxCall(op, tuple(inputs), attributes, outputs=2 if op == "TopK" else 1))
    assert isinstance(planned, Planned), planned
    return planned


def _run(planned: Planned):
    outputs = dmlcli.run(planned.operator.name, *planned.inputs, output_dtype=planned.output_dtype,
                         broadcast=planned.broadcast, output_shapes=planned.output_shapes or None, **planned.keywords)
    return planned.finish(outputs if isinstance(outputs, tuple) else (outputs,))


def test_top_k_with_sorted_0_is_compared_by_index_on_both_sides():
    x = np.float32([[3, 9, 1, 7]])
    planned = _planned("TopK", [x, np.array([2], np.int64)], sorted=0)
    values, indices = _run(planned)
    assert indices.tolist() == [[1, 3]] and values.tolist() == [[9, 7]]  # sorted by index, as arranged
    written_in_any_order = (np.float32([[7, 9]]), np.int64([[3, 1]]))
    assert [a.tolist() for a in planned.arrange(written_in_any_order)] == [[[9, 7]], [[1, 3]]]
    assert _planned("TopK", [x, np.array([2], np.int64)]).arrange is tuple  # sorted=1: compared in place


def test_gather_elements_reads_a_window_and_scatter_elements_says_why_it_cannot():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.int64([[2, 0], [1, 2]])  # 2 x 2: smaller than data off axis 0
    (got,) = _run(_planned("GatherElements", [data, indices], axis=0))
    assert got.tolist() == np.take_along_axis(data[:, :2], indices, axis=0).tolist()
    skipped = plan_call(OnnxCall("ScatterElements", (data, indices, np.ones((2, 2), np.float32)), {"axis": 0}))
    assert isinstance(skipped, Skipped) and "must be all of data, unwritten" in skipped.reason


def test_rank_6_matmul_and_trilu_fold_their_leading_dimensions():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1, 3, 2, 4, 5)).astype(np.float32), rng.standard_normal((3, 1, 5, 2)).astype(np.float32)
    planned = _planned("MatMul", [a, b])
    assert all(x.ndim == 4 for x in planned.inputs)
    (got,) = _run(planned)
    assert got.shape == (2, 1, 3, 2, 4, 2) and np.allclose(got, a.astype(np.float64) @ b, atol=1e-5)
    x = np.ones((2, 2, 2, 3, 3), np.float32)
    (lower,) = _run(_planned("Trilu", [x, np.array(0, np.int64)], upper=0))
    assert lower.shape == x.shape and lower[1, 0, 1].tolist() == np.tril(np.ones((3, 3))).tolist()


def test_5d_resize_merges_the_axes_it_leaves_alone_and_1d_3d_max_unpool_reshape():
    x = np.arange(2 * 3 * 2 * 4 * 4, dtype=np.float32).reshape(2, 3, 2, 4, 4)
    planned = _planned("Resize", [x, None, np.float32([1, 1, 1, 2, 2])], mode="nearest")
    assert planned.inputs[0].shape == (6, 2, 4, 4)  # N and C read element for element: one axis (4 are enough)
    (got,) = _run(planned)
    assert got.shape == (2, 3, 2, 8, 8) and np.array_equal(got, x.repeat(2, axis=3).repeat(2, axis=4))
    values, positions = np.float32([[[5, 6]]]), np.int64([[[1, 2]]])
    (unpooled,) = _run(_planned("MaxUnpool", [values, positions, np.int64([1, 1, 4])], kernel_shape=[2], strides=[2]))
    assert unpooled.tolist() == [[[0, 5, 6, 0]]]


@pytest.mark.parametrize("attributes, scales, words", [
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 1, 0.6, 0.6], "length 2.4"),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, [1, 1, 0.25, 0.25],
     "output length 1"),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners", "antialias": 1}, [1, 1, 0.5, 0.5],
     "widens the filter"),
])
def test_resize_where_the_provider_differs_from_onnx_skips_node_tests_and_runs_in_models(attributes, scales, words):
    x = np.ones((1, 1, 4, 4), np.float32)
    call = OnnxCall("Resize", (x, None, np.float32(scales)), attributes)
    skipped = plan_call(call)
    assert isinstance(skipped, Skipped) and words in skipped.reason
    assert skipped.reason.startswith("ONNX Runtime's DirectML provider maps this Resize")
    entry = TABLE["Resize"]
    assert not any(condition.when(call) for condition in entry.cannot)  # a model's node runs it


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_every_nearest_mode_and_antialias_map_onto_resample3(nearest_mode):
    x = np.ones((1, 1, 4, 4), np.float32)
    planned = _planned("Resize", [x, None, np.float32([1, 1, 2, 2])], mode="nearest", nearest_mode=nearest_mode)
    assert planned.operator.name == "RESAMPLE3"
    linear = _planned("Resize", [x, None, np.float32([1, 1, 0.5, 0.5])], mode="linear", antialias=1)
    assert linear.operator.name == "RESAMPLE3" and linear.keywords["antialiased"] is True


# The divergence the ONNX differential found (tests/test_onnx_differential.py): a 1x1x2x3 input, scales
# [1, 1, 0.5, 1.5], nearest floor, half_pixel_symmetric. Output column 3's exact coordinate is
# 1.5 * (1 - 4 / 4.5) + (3 + 0.5) / 1.5 - 0.5 = 2.
TIE_X = np.float32([[[[0.12573022, -0.13210486, 0.64042264], [0.10490011, -0.5356694, 0.36159506]]]])
TIE_SCALES = np.float32([1, 1, 0.5, 1.5])
TIE_ATTRIBUTES = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric", "nearest_mode": "floor"}


def _provider_symmetric_offset(n: int, out: int, scale: float) -> np.float32:
    """ONNX Runtime's DirectML provider's half_pixel_symmetric InputPixelOffset (DmlOperatorResize.cpp), C++ float
    arithmetic: 0.5f - float((in / 2.0f) * (1.0f - out / (scale * in)))."""
    f = np.float32
    return f(0.5) - (f(n) / f(2)) * (f(1) - f(out) / (f(scale) * f(n)))


def test_half_pixel_symmetric_passes_the_providers_float_offsets_and_keeps_its_exact_tie():
    call = OnnxCall("Resize", (TIE_X, None, TIE_SCALES), TIE_ATTRIBUTES)
    plan = resize_plan(call)
    offset = _provider_symmetric_offset(3, 4, 1.5)
    assert plan.output_shape == (1, 1, 1, 4) and plan.scales[3] == 1.5 and plan.output_offsets[3] == -0.5
    assert np.float32(plan.input_offsets[3]).tobytes() == offset.tobytes()
    # DirectML's coordinate (o - OutputPixelOffset) / Scale - InputPixelOffset in FLOAT32 (the RESAMPLE2 page) at
    # o = 3: 2.3333333 - 0.33333334 = 1.9999999, floor 1; ONNX's exact 2 picks element 2.
    x = (np.float32(3) + np.float32(0.5)) / np.float32(1.5) - offset
    assert x < 2 and np.floor(x) == 1
    entry = TABLE["Resize"]
    as_in_a_model = planned_call(entry, directml_operator(entry), prepare(entry, call), call)  # differs not asked
    (resampled,) = _run(as_in_a_model)
    assert resampled[0, 0, 0].tolist() == TIE_X[0, 0, 0, [0, 0, 1, 1]].tolist()  # the provider's, not ONNX's x2
    words = resize_differences(call)
    assert words == ("nearest_mode floor on an exact tie: half_pixel_symmetric puts output element 3 of axis 3 "
                     "exactly on 2, where ONNX reads input element 2; DirectML computes the coordinate from the "
                     "provider's FLOAT32 Scale 1.5 and InputPixelOffset 0.333333343 as 1.99999988 and reads element 1")
    skipped = plan_call(call)
    assert isinstance(skipped, Skipped) and skipped.reason.endswith(words)
    assert not any(condition.when(call) for condition in entry.cannot)  # a model's node runs it


@pytest.mark.parametrize("changed", [{"nearest_mode": "ceil"}, {"nearest_mode": "round_prefer_floor"},
                                     {"coordinate_transformation_mode": "half_pixel"}, {"mode": "linear"}])
def test_the_tie_is_named_only_where_float_rounding_moves_an_exact_boundary(changed):
    assert resize_differences(OnnxCall("Resize", (TIE_X, None, TIE_SCALES), {**TIE_ATTRIBUTES, **changed})) is None


@pytest.mark.parametrize("nearest_mode, adjustment", [("floor", 0.0), ("round_prefer_floor", 0.5),
                                                      ("round_prefer_ceil", -0.5)])
def test_half_pixel_symmetric_offsets_are_the_providers_float_bits_not_a_rounded_double(nearest_mode, adjustment):
    # in 39, scale 3.3 -> out 128: the offset rounded once from float64 is 0.39393967, the provider's float
    # arithmetic gives 0.39393982; its nearest_mode adjustment is added in float too (offset += offsetAdjustment).
    x = np.zeros((1, 1, 1, 39), np.float32)
    attributes = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric",
                  "nearest_mode": nearest_mode}
    plan = resize_plan(OnnxCall("Resize", (x, None, np.float32([1, 1, 1, 3.3])), attributes))
    offset = _provider_symmetric_offset(39, 128, np.float32(3.3))
    assert offset != np.float32(0.5 - 39 / 2 * (1 - 128 / (39 * float(np.float32(3.3)))))
    assert plan.output_shape[3] == 128
    assert np.float32(plan.input_offsets[3]).tobytes() == (offset + np.float32(adjustment)).tobytes()
