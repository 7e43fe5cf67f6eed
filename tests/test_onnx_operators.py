"""`dmlcli test ../shared/onnx_operators`: ONNX node tests mapped onto DirectML operators (dmlcli/suite/onnx).

The folder must run green: every case passes or is skipped with a DirectML reason. The table is checked
against dmlcli's operator entries (each DESC field it sets exists), and every adapter against a NumPy model
of the DirectML operator it targets, written here from the pages' transcriptions, so that a mapping is
proven before the operator it needs is merged.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.suite import load_case, run_suite
from dmlcli.suite.case import CaseError
from dmlcli.suite.onnx import ENTRIES, TABLE, Planned, Skipped, plan
from dmlcli.suite.onnx.adapters import OnnxCall, onnx_call
from dmlcli.suite.onnx.mapping import SIZES, directml_operator, keyword_for
from dmlcli.suite.onnx.table import entry_for
from dmlcli.suite.runner import _compared_all

from conftest import SHARED, SHARED_MISSING

FOLDER = SHARED / "onnx_operators"
CASES = sorted(FOLDER.glob("onnx__*.json")) if FOLDER.is_dir() else []
needs_folder = pytest.mark.skipif(not FOLDER.is_dir(), reason=SHARED_MISSING)
PRESENT_NOW = ("Reduce", "Concat", "Where")  # ONNX operators whose DirectML operator this branch has


@pytest.fixture(scope="module")
def suite_run():
    if not FOLDER.is_dir():
        pytest.skip(SHARED_MISSING)
    return run_suite([FOLDER], backend="cpu", jobs=1)


@needs_folder
def test_the_folder_runs_green_through_the_api(suite_run):
    counts = suite_run.counts()
    assert counts["failed"] == 0 and counts["error"] == 0, [
        (r.case_id, r.message) for r in suite_run.results if r.verdict in ("failed", "error")]
    assert counts["passed"] + counts["skipped"] == len(CASES) == 369
    table = Counter((r.op, r.verdict) for r in suite_run.results)
    print("\n" + "\n".join(f"{op:26} passed {table[op, 'passed']:3}  skipped {table[op, 'skipped']:3}"
                           for op in sorted({r.op for r in suite_run.results})))


@needs_folder
def test_every_skip_names_a_directml_fact(suite_run):
    for result in suite_run.results:
        if result.verdict == "skipped":
            assert "DirectML" in result.message, (result.case_id, result.message)


@needs_folder
def test_the_operators_this_branch_has_pass_or_are_skipped_for_a_directml_reason(suite_run):
    by_case = {r.case_id: r for r in suite_run.results}
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceSumSquare", "Concat", "Where"):
        results = [r for r in suite_run.results if r.op == op]
        assert results and any(r.passed for r in results), op
        for result in results:
            assert "not implemented" not in result.message, (result.case_id, result.message)
    assert all(r.passed for r in suite_run.results if r.op == "Concat")
    # The skipped ones, each for its own reason:
    assert "size of zero" in by_case["onnx__test_reduce_sum_empty_set"].message
    assert "noop_with_empty_axes" in by_case["onnx__test_reduce_sum_empty_axes_input_noop"].message
    assert "FLOAT64" in by_case["onnx__test_reduce_log_sum_exp_keepdims_example"].message
    for name in ("onnx__test_reduce_sum_do_not_keepdims_random", "onnx__test_reduce_max_bool_inputs",
                 "onnx__test_reduce_mean_negative_axes_keepdims_random", "onnx__test_concat_3d_axis_negative_3"):
        assert by_case[name].passed, by_case[name].message


@needs_folder
def test_transpose_and_expand_run_as_element_wise_identity_of_a_strided_view(suite_run):
    # ONNX Runtime's DirectML provider copies the input read through permuted (zero) Strides by
    # ELEMENT_WISE_IDENTITY: every case passes, bit for bit.
    for op in ("Transpose", "Expand"):
        results = [r for r in suite_run.results if r.op == op]
        assert results and all(r.passed for r in results), [(r.case_id, r.message) for r in results if not r.passed]


@needs_folder
def test_col2im_and_resize_run_through_fold_and_resample3(suite_run):
    by_case = {r.case_id: r for r in suite_run.results}
    assert all(by_case[f"onnx__test_col2im_{name}"].passed for name in ("5d", "dilations", "pads"))
    resize = [r for r in suite_run.results if r.op == "Resize"]
    assert sum(r.passed for r in resize) == 20
    # What DirectML lacks (cubic), or where ONNX Runtime's DirectML provider maps the call to other values than
    # ONNX's reference (align_corners and tf_crop_and_resize lengths, pytorch_half_pixel's length 1): three cases.
    provider = [r for r in resize if "ONNX Runtime's DirectML provider maps this Resize" in r.message]
    assert len(provider) == 3
    assert all("mode cubic" in r.message for r in resize if not r.passed and r not in provider)


@needs_folder
def test_the_folder_runs_green_through_the_cli():
    outcome = CliRunner().invoke(cli, ["test", str(FOLDER), "--jobs", "1"])
    assert outcome.exit_code == 0, outcome.output
    assert "0 failed, 0 errors" in outcome.output.splitlines()[-1]
    for line in ("Concat               10       0       0        0", "Gemm                 10       0       0        0"):
        assert any(row.split() == line.split() for row in outcome.output.splitlines()), line


@needs_folder
def test_k_matches_the_onnx_operator():
    run = run_suite([FOLDER], backend="cpu", jobs=1, keyword="ReduceL2")
    assert {r.op for r in run.results} == {"ReduceL2"} and len(run.results) == 7


# ---------------------------------------------------------------- case files


def _write(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document))
    return path


def f32(data, shape=None):
    tensor = {"dtype": "float32", "data": data}
    return {**tensor, "shape": shape} if shape is not None else tensor


def test_an_onnx_case_reads_its_keys(tmp_path):
    case = load_case(_write(tmp_path / "c.json", {
        "onnx_op": "ReduceSum", "attributes": {"keepdims": 0, "alpha": 0.25}, "input_names": ["data", ""],
        "output_names": ["y"], "source_version": "1.23.2", "inputs": [f32([[1, 2], [3, 4]])],
        "expected": [f32([10])]}))
    assert case.onnx_op == "ReduceSum" and case.op == ""
    assert case.attributes == {"keepdims": 0, "alpha": 0.25} and isinstance(case.attributes["keepdims"], int)
    assert case.input_names == ("data", "") and case.output_names == ("y",) and case.source_version == "1.23.2"
    assert len(case.all_expected) == 1 and case.expected.shape == (1,)


@pytest.mark.parametrize("document, words", [
    ({"onnx_op": "Split", "output_names": ["a", "b"], "inputs": [f32([1, 2])], "expected": [f32([1])]},
     "names 2 outputs"),
    ({"onnx_op": "Split", "input_names": ["x", "split"], "inputs": [f32([1, 2])], "expected": [f32([1])]},
     "names 2 inputs"),
    ({"op": "add", "onnx_op": "Add", "inputs": [f32([1])], "expected": f32([1])}, "not both"),
    ({"op": "add", "attributes": {}, "inputs": [f32([1])], "expected": f32([1])}, "onnx_op"),
    ({"onnx_op": 3, "inputs": [f32([1])], "expected": f32([1])}, "onnx_op"),
    ({"onnx_op": "Add", "attributes": [], "inputs": [f32([1])], "expected": f32([1])}, "attributes"),
    ({"onnx_op": "Add", "inputs": [f32([1])], "expected": []}, "empty list"),
])
def test_a_malformed_onnx_case_is_a_case_error(tmp_path, document, words):
    with pytest.raises(CaseError, match=words):
        load_case(_write(tmp_path / "c.json", document))


def test_a_zero_size_tensor_reads_with_its_shape(tmp_path):
    case = load_case(_write(tmp_path / "c.json", {"onnx_op": "ReduceSum", "inputs": [f32([[], []], [2, 0, 4])],
                                                   "expected": [f32([[], []], [2, 0, 4])]}))
    assert case.inputs[0].shape == case.expected.shape == (2, 0, 4)
    with pytest.raises(CaseError, match="does not match the data"):
        load_case(_write(tmp_path / "d.json", {"onnx_op": "ReduceSum", "inputs": [f32([[], []], [3, 0, 4])],
                                               "expected": [f32([0])]}))


def test_an_onnx_operator_outside_the_table_is_the_cases_error(tmp_path):
    path = _write(tmp_path / "c.json", {"onnx_op": "Frobnicate", "inputs": [f32([1])], "expected": [f32([1])]})
    run = run_suite([path], jobs=1)
    assert run.results[0].verdict == "error" and "no entry in dmlcli's ONNX table" in run.results[0].message


def test_every_expected_output_is_compared():
    from dmlcli.operators import find_operator

    join = find_operator("join")
    a, b = np.array([1.0, 2.0], np.float32), np.array([3.0], np.float32)

    class NoCall:
        parameters = {}

    report, same = _compared_all(join, (a, b), (a, b), None, NoCall())
    assert same and report.count("PASSED") == 2
    report, same = _compared_all(join, (a, b), (a, b + 1), None, NoCall())
    assert not same and report.splitlines()[0].startswith("FAILED: output 2 of 2")
    report, same = _compared_all(join, (a,), (a, b), None, NoCall())
    assert not same and "gave 1 outputs but the case expects 2" in report


def test_a_directml_case_with_a_list_of_expected_outputs(tmp_path):
    good = _write(tmp_path / "good.json", {"op": "join", "params": {"axis": 0}, "inputs": [f32([1]), f32([2])],
                                           "expected": [f32([1, 2])]})
    extra = _write(tmp_path / "extra.json", {"op": "join", "params": {"axis": 0}, "inputs": [f32([1]), f32([2])],
                                             "expected": [f32([1, 2]), f32([1, 2])]})
    verdicts = {Path(r.file).name: (r.verdict, r.message) for r in run_suite([good, extra], jobs=1).results}
    assert verdicts["good.json"][0] == "passed"
    assert verdicts["extra.json"] == ("failed", "JOIN gave 1 outputs but the case expects 2")


# ---------------------------------------------------------------- the table


def _entry_params():
    return [pytest.param(entry, id=entry.onnx_op) for entry in ENTRIES]


@needs_folder
def test_every_onnx_operator_of_the_folder_has_an_entry():
    operators = {json.loads(path.read_text())["onnx_op"] for path in CASES}
    assert operators <= set(TABLE), sorted(operators - set(TABLE))


@pytest.mark.parametrize("entry", _entry_params())
def test_an_entry_says_what_computes_it(entry):
    if entry.directml is None:
        assert "DirectML" in entry.reason and entry.adapter is None
    else:
        assert entry.adapter is not None and entry.destinations
        assert dmlcli.find_operator(entry.directml).key == entry.directml


@pytest.mark.parametrize("entry", _entry_params())
def test_every_desc_field_of_an_entry_exists_on_its_operator(entry):
    operator = directml_operator(entry)
    if entry.directml is None:
        assert not entry.destinations  # nothing to check: no DirectML operator computes it
        return
    fields = {parameter.field for parameter in operator.parameters}
    for destination in entry.destinations:
        if destination.endswith(SIZES):
            assert destination[:-len(SIZES)] in operator.outputs, destination
        elif destination in operator.inputs:
            continue
        else:
            assert destination in fields, (destination, sorted(fields))
            assert keyword_for(entry, operator, destination)


@pytest.mark.parametrize("entry", _entry_params())
def test_every_condition_names_a_directml_fact(entry):
    for condition in entry.cannot:
        assert "DirectML" in condition.reason, condition.reason


def f32_array(*values):
    return np.array(values, np.float32)


@pytest.mark.parametrize("onnx_op, inputs, attributes, words", [
    ("Tile", (f32_array(1, 2), np.array([0], np.int64)), {}, "TILE Repeats must be larger than 0"),
    ("Pad", (f32_array(1, 2), np.array([-1, 0], np.int64)), {}, "UINT (padding only)"),
    ("Pad", (f32_array(1, 2), np.array([1, 0], np.int64)), {"mode": "mirror"}, "for ONNX's Pad mode mirror"),
    ("Slice", (f32_array(1, 2, 3), np.array([2]), np.array([1])), {}, "SLICE1 window must not be empty"),
    ("TopK", (f32_array(1, 2, 3), np.array([3], np.int64)), {}, "K must be less than"),
    ("Trilu", (np.ones((2, 2), np.int64), np.array(2 ** 31, np.int64)), {"upper": 0}, "INT range"),
    ("ScatterND", (f32_array(1, 2), np.array([[0]]), f32_array(5)), {"reduction": "add"}, "reduction=add"),
    ("OneHot", (np.array([-4], np.int64), np.array(3.0, np.float32), f32_array(0, 1)), {}, "below -depth"),
    ("Gather", (np.ones((1,) * 8, np.float32), np.zeros((2, 2), np.int64)), {}, "more than 8 dimensions"),
    ("ReduceSum", (f32_array(1, 2), np.zeros((0,), np.int64)), {"noop_with_empty_axes": 1}, "no such mode"),
    ("Resize", (np.ones((1, 1, 2, 2), np.float32), f32_array(0, 0, -0.5, 0, 1, 1, 1, 1), None,
                np.array([1, 1, 3, 2], np.int64)),
     {"coordinate_transformation_mode": "tf_crop_and_resize", "mode": "linear"}, "no extrapolation value"),
    ("Resize", (np.ones((1, 1, 2, 2), np.float32), None, f32_array(1, 1, 2, 2)), {"mode": "linear",
                                                                                 "exclude_outside": 1},
     "repeats the edge element"),
    ("GroupNormalization", (np.ones((1, 2) + (1,) * 6, np.float32), f32_array(1, 1), f32_array(0, 0)),
     {"num_groups": 2}, "more than 8 dimensions"),
])
def test_a_condition_directml_cannot_express_is_found(onnx_op, inputs, attributes, words):
    entry = TABLE[onnx_op]
    call = OnnxCall(onnx_op, inputs, attributes)
    reasons = [condition.describe(call) for condition in entry.cannot if condition.when(call)]
    assert reasons and words in reasons[0], reasons


def _mapped_cases():
    params = []
    for path in CASES:
        case = load_case(path)
        entry = entry_for(onnx_call(case))
        if entry is not None and entry.adapter is not None:
            params.append(pytest.param(case, entry, id=path.stem.removeprefix("onnx__test_")))
    return params or [pytest.param(None, None, id="no-shared", marks=pytest.mark.skip(reason=SHARED_MISSING))]


def _expressible(entry, call) -> bool:
    return not any(condition.when(call) for condition in entry.cannot)


@pytest.mark.parametrize("case, entry", _mapped_cases())
def test_an_adapter_sets_only_fields_its_entry_documents(case, entry):
    call = onnx_call(case)
    if not _expressible(entry, call):
        return
    prepared = entry.adapter(call, dict(entry.fixed))
    assert set(prepared.values) <= set(entry.destinations), (set(prepared.values) - set(entry.destinations))


# ---------------------------------------------------------------- adapters against models of DirectML


def _slice1(v, x):
    index = []
    for offset, size, stride, out in zip(v["InputWindowOffsets"], v["InputWindowSizes"], v["InputWindowStrides"],
                                         _slice_out(v)):
        start = offset + size - 1 if stride < 0 else offset
        index.append(np.array([start + stride * i for i in range(out)]))
    return (x[np.ix_(*index)],)


def _slice_out(v):
    return [1 + (size - 1) // abs(stride) for size, stride in zip(v["InputWindowSizes"], v["InputWindowStrides"])]


def _gather(v, x, idx):
    # GATHER on tensors of one rank: the trailing IndexDimensions of idx replace Axis; right-aligned output.
    axis, q = v["Axis"], v["IndexDimensions"]
    meaningful = idx.reshape(idx.shape[idx.ndim - q:]) if q else idx.reshape(())
    return (np.take(x, meaningful.astype(np.int64), axis=axis),)


def _gather_nd1(v, x, idx):
    x = x.reshape(x.shape[x.ndim - v["InputDimensionCount"]:])
    idx = idx.reshape(idx.shape[idx.ndim - v["IndicesDimensionCount"]:])
    b = v["BatchDimensionCount"]
    out = []
    for batch in np.ndindex(*idx.shape[:b]) if b else [()]:
        sub_x, sub_i = x[batch], idx[batch]
        out.append(np.stack([sub_x[tuple(t)] for t in sub_i.reshape(-1, sub_i.shape[-1])]).reshape(
            sub_i.shape[:-1] + sub_x.shape[sub_i.shape[-1]:]))
    return (np.stack(out).reshape(idx.shape[:b] + out[0].shape) if b else out[0],)


def _one_hot(v, idx, values):
    depth = v["OutputTensor.Sizes"][v["Axis"]]
    off, on = values.reshape(-1)[0], values.reshape(-1)[1]
    k = idx.astype(np.int64)
    k = np.where(k < 0, k + depth, k)
    positions = np.arange(depth).reshape([-1 if a == v["Axis"] else 1 for a in range(idx.ndim)])
    return (np.where(positions == k, on, off).astype(values.dtype),)


def _top_k1(v, x):
    axis, k = v["Axis"], v["K"]
    keys = -x.astype(np.float64) if v["AxisDirection"] == "DECREASING" else x.astype(np.float64)
    order = np.argsort(keys, axis=axis, kind="stable").take(range(k), axis=axis)
    return np.take_along_axis(x, order, axis=axis), order.astype(np.uint64)


def _depth_to_space1(v, x):
    b, (n, c, h, w) = v["BlockSize"], x.shape
    if v["Order"] == "DEPTH_COLUMN_ROW":
        y = x.reshape(n, b, b, c // b ** 2, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // b ** 2, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return (y.reshape(n, c // b ** 2, h * b, w * b),)


def _space_to_depth1(v, x):
    b, (n, c, h, w) = v["BlockSize"], x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 3, 5, 1, 2, 4) if v["Order"] == "DEPTH_COLUMN_ROW" else y.transpose(0, 1, 3, 5, 2, 4)
    return (y.reshape(n, c * b * b, h // b, w // b),)


def _cumulative(function, exclusive_field):
    def model(v, x):
        axis = v["Axis"]
        y = np.flip(x, axis) if v["AxisDirection"] == "DECREASING" else x
        total = function(y, axis=axis, dtype=x.dtype)
        if v[exclusive_field]:
            identity = np.ones_like if function is np.cumprod else np.zeros_like
            first = identity(np.take(y, [0], axis=axis))
            total = np.concatenate([first, np.take(total, range(y.shape[axis] - 1), axis=axis)], axis=axis)
        return (np.flip(total, axis) if v["AxisDirection"] == "DECREASING" else total,)
    return model


def _reverse_subsequences(v, x, lengths):
    axis, y = v["Axis"], x.copy()
    for position in np.ndindex(*x.shape):
        length = min(int(lengths[tuple(0 if a == axis else p for a, p in enumerate(position))]), x.shape[axis])
        k = position[axis]
        if k < length:
            source = list(position)
            source[axis] = length - 1 - k
            y[position] = x[tuple(source)]
    return (y,)


def _nonzero_coordinates(v, x):
    coordinates = np.argwhere(x != 0).astype(np.uint32)
    table = np.zeros((x.size, x.ndim), np.uint32)
    table[:len(coordinates)] = coordinates
    return np.array([len(coordinates)], np.uint32), table


def _diagonal(v, dtype):
    rows, cols = v["OutputTensor.Sizes"][-2:]
    y = (np.arange(cols)[None, :] - np.arange(rows)[:, None] == v["Offset"]) * float(v["Value"])
    return (np.broadcast_to(y, v["OutputTensor.Sizes"]).astype(dtype),)


def _diagonal1(v, x):
    top_x = np.arange(x.shape[-1])[None, :] - np.arange(x.shape[-2])[:, None]
    begin, end = v["DiagonalFillBegin"], v["DiagonalFillEnd"]
    use = (end >= begin) ^ (top_x >= begin) ^ (top_x < end)
    return (np.where(use, x.dtype.type(float(v["Value"])), x),)


def _fill_sequence(v, dtype):
    count = v["OutputTensor.Sizes"][0]
    value, delta, out = np.dtype(dtype).type(float(v["ValueStart"])), np.dtype(dtype).type(float(v["ValueDelta"])), []
    for _ in range(count):
        out.append(value)
        value = value + delta
    return (np.array(out, dtype),)


def _arg(function):
    def model(v, x):
        axis = v["Axes"][0]
        y = np.flip(x, axis) if v["AxisDirection"] == "DECREASING" else x
        found = function(y, axis=axis, keepdims=True)
        return ((x.shape[axis] - 1 - found if v["AxisDirection"] == "DECREASING" else found).astype(np.int64),)
    return model


def _softmax(v, x):
    e = np.exp(x - x.max(axis=v["Axes"], keepdims=True))
    return (e / e.sum(axis=v["Axes"], keepdims=True),)


def _hardmax(v, x):
    axis = v["Axes"][0]
    first = np.argmax(x, axis=axis, keepdims=True)
    positions = np.arange(x.shape[axis]).reshape([-1 if a == axis else 1 for a in range(x.ndim)])
    return ((positions == first).astype(x.dtype),)


def _padding1(v, x):
    mode = {"CONSTANT": "constant", "EDGE": "edge", "REFLECTION": "reflect", "WRAP": "wrap"}[v["PaddingMode"]]
    widths = list(zip(v["StartPadding"], v["EndPadding"]))
    if mode == "constant":
        return (np.pad(x, widths, constant_values=x.dtype.type(float(v["PaddingValue"]))),)
    return (np.pad(x, widths, mode=mode),)


def _scatter_elements(v, x, idx, updates):
    y = x.copy()
    np.put_along_axis(y, np.where(idx < 0, idx + x.shape[v["Axis"]], idx), updates, axis=v["Axis"])
    return (y,)


def _convolution(v, x, w, b=None):
    """CONVOLUTION by the loop references of tests/test_ops_convolution.py (FORWARD or BACKWARD)."""
    from test_ops_convolution import ref_backward, ref_forward

    reference = ref_backward if v["Direction"] == "BACKWARD" else ref_forward
    out = reference(x, w, b, strides=list(v["Strides"]), dilations=list(v["Dilations"]),
                    start=list(v["StartPadding"]), end=list(v["EndPadding"]), groups=v["GroupCount"],
                    outpad=list(v["OutputPadding"]), flip=v["Mode"] == "CONVOLUTION")
    return (out.astype(x.dtype),)


def _integer_sum(v, x, xzp, w, wzp):
    from test_ops_convolution import ref_integer

    return ref_integer(x, xzp, w, wzp, strides=list(v["Strides"]), dilations=list(v["Dilations"]),
                       start=list(v["StartPadding"]), end=list(v["EndPadding"]), groups=v["GroupCount"])


def _qlinear_conv(v, x, xs, xzp, w, ws, wzp, bias, ys, yzp):
    """The page's 'dequantize, convolve, quantize', in float64 (ONNX's test values leave no tie to break)."""
    acc = _integer_sum(v, x, xzp, w, wzp) + bias.astype(np.int64)
    real = acc * (float(xs.reshape(-1)[0]) * ws.astype(np.float64)) / float(ys.reshape(-1)[0])
    info = np.iinfo(yzp.dtype)
    return (np.clip(np.rint(real) + int(yzp.reshape(-1)[0]), info.min, info.max).astype(yzp.dtype),)


# Each DirectML operator's behaviour as its page (the transcriptions) describes it: (values by DESC field,
# input arrays in DESC order, output dtype) -> outputs in DESC order.
MODELS = {
    "CONVOLUTION": lambda v, d, *inputs: _convolution(v, *inputs),
    "CONVOLUTION_INTEGER": lambda v, d, *inputs: (_integer_sum(v, *inputs).astype(np.int32),),
    "QUANTIZED_LINEAR_CONVOLUTION": lambda v, d, *inputs: _qlinear_conv(v, *inputs),
    "SPLIT": lambda v, d, x: tuple(np.split(x, np.cumsum([s[v["Axis"]] for s in v["OutputTensors.Sizes"]])[:-1],
                                            axis=v["Axis"])),
    "SLICE1": lambda v, d, x: _slice1(v, x),
    "PADDING1": lambda v, d, x: _padding1(v, x),
    "TILE": lambda v, d, x: (np.tile(x, v["Repeats"]),),
    "GATHER": lambda v, d, x, i: _gather(v, x, i),
    "GATHER_ELEMENTS": lambda v, d, x, i: (np.take_along_axis(x, np.where(i < 0, i + x.shape[v["Axis"]], i),
                                                              axis=v["Axis"]),),
    "GATHER_ND1": lambda v, d, x, i: _gather_nd1(v, x, i),
    "SCATTER_ELEMENTS": lambda v, d, x, i, u: _scatter_elements(v, x, i, u),
    "ONE_HOT": lambda v, d, i, values: _one_hot(v, i, values),
    "TOP_K1": lambda v, d, x: _top_k1(v, x),
    "DEPTH_TO_SPACE1": lambda v, d, x: _depth_to_space1(v, x),
    "SPACE_TO_DEPTH1": lambda v, d, x: _space_to_depth1(v, x),
    "CUMULATIVE_SUMMATION": lambda v, d, x: _cumulative(np.cumsum, "HasExclusiveSum")(v, x),
    "CUMULATIVE_PRODUCT": lambda v, d, x: _cumulative(np.cumprod, "HasExclusiveProduct")(v, x),
    "REVERSE_SUBSEQUENCES": lambda v, d, x, lengths: _reverse_subsequences(v, x, lengths),
    "NONZERO_COORDINATES": lambda v, d, x: _nonzero_coordinates(v, x),
    "DIAGONAL_MATRIX": lambda v, d: _diagonal(v, d),
    "DIAGONAL_MATRIX1": lambda v, d, x: _diagonal1(v, x),
    "FILL_VALUE_SEQUENCE": lambda v, d: _fill_sequence(v, d),
    "ARGMAX": lambda v, d, x: _arg(np.argmax)(v, x),
    "ARGMIN": lambda v, d, x: _arg(np.argmin)(v, x),
    "ACTIVATION_SOFTMAX1": lambda v, d, x: _softmax(v, x),
    "ACTIVATION_LOG_SOFTMAX1": lambda v, d, x: (np.log(_softmax(v, x)[0]),),
    "ACTIVATION_HARDMAX1": lambda v, d, x: _hardmax(v, x),
}


def _modelled_cases():
    params = [p for p in _mapped_cases() if p.values[1] is not None and p.values[1].directml in MODELS]
    return params or [pytest.param(None, None, id="no-shared", marks=pytest.mark.skip(reason=SHARED_MISSING))]


@pytest.mark.parametrize("case, entry", _modelled_cases())
def test_an_adapter_gives_onnx_results_through_a_model_of_its_directml_operator(case, entry):
    """The adapter's DESC values and reshapes, run through the DirectML operator's documented behaviour,
    give ONNX's expected outputs: the mapping is right before the operator itself is merged."""
    call = onnx_call(case)
    if not _expressible(entry, call):
        pytest.skip("DirectML cannot express this case")
    prepared = entry.adapter(call, dict(entry.fixed))
    dtype = prepared.output_dtype or (prepared.inputs[0].dtype if prepared.inputs else None)
    with np.errstate(all="ignore"):
        outputs = MODELS[entry.directml](prepared.values, dtype, *prepared.inputs)
    finished = prepared.finish(outputs)
    assert len(finished) == len(case.all_expected)
    for got, want in zip(finished, case.all_expected):
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
        if want.dtype.kind == "f" and entry.directml.startswith("ACTIVATION_"):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(got, want)


@needs_folder
def test_the_mapping_of_a_present_operator_is_a_planned_call():
    planned = plan(load_case(FOLDER / "onnx__test_reduce_sum_do_not_keepdims_random.json"))
    assert isinstance(planned, Planned) and planned.operator.name == "REDUCE"
    assert planned.keywords == {"function": "SUM", "axes": (1,)}
    skipped = plan(load_case(FOLDER / "onnx__test_scatter_elements_with_reduction_mul.json"))
    assert isinstance(skipped, Skipped)


# ---------------------------------------------------------------- what the GPU run found in REDUCE


def test_max_and_min_skip_nan_alike_on_a_backend_without_fmax_reduce():
    """CuPy has no fmax.reduce: REDUCE's kernel run with another array module gives NumPy's values."""
    import types

    from dmlcli.operators import find_operator
    from dmlcli.calls.validation import TensorInfo
    from dmlcli.data_types import FLOAT32, INT32

    kernel = find_operator("reduce").array_kernel
    other = types.ModuleType("not_numpy")  # NumPy's calls under another name: the path CuPy takes
    other.__dict__.update({k: v for k, v in vars(np).items() if k != "__name__"})
    x = np.array([[np.nan, 1.0, -np.inf], [np.nan, np.nan, np.nan], [2.0, np.nan, 3.0]], np.float32)
    ints = np.array([[3, -1], [2, 7]], np.int32)
    for array, data_type in ((x, FLOAT32), (ints, INT32)):
        for function in ("MAX", "MIN"):
            for axes in ((0,), (1,), (0, 1)):
                shape = tuple(1 if axis in axes else size for axis, size in enumerate(array.shape))
                out = TensorInfo("OutputTensor", data_type, shape)
                params = {"Function": function, "Axes": axes}
                (want,) = kernel(np, [array], [out], params)
                (got,) = kernel(other, [array], [out], params)
                np.testing.assert_array_equal(got, want)
                if array is x and axes == (1,):  # NaN skipped; NaN only where every element is NaN
                    np.testing.assert_array_equal(want.reshape(-1), [1.0 if function == "MAX" else -np.inf, np.nan,
                                                                     3.0 if function == "MAX" else 2.0])


def test_log_sum_on_the_gpu_is_within_reduces_tolerance():
    """The H100's LOG_SUM of 4 elements (a sum near 1.085, so a result near 0.08): 14 ULP of the result,
    1.2e-7 absolute, from a sum within 1 ULP -- REDUCE's tolerance for the call must accept it."""
    from dmlcli import engine
    from dmlcli.checking.comparison import compare, rule_for
    from dmlcli.operators import find_operator

    reduce = find_operator("reduce")
    x = np.ones((3, 4, 5), np.float32)
    call = engine.plan_arrays(engine.request("reduce", function="log_sum", axes=(1,)), [x]).call
    rule = rule_for(reduce, np.float32, None, call.parameters, call)
    got, want = np.float32(0.08170252), np.float32(0.08170263)
    assert compare(np.array([got]), np.array([want]), rule)[1]
    assert not compare(np.array([got + np.float32(2e-6)]), np.array([want]), rule)[1]  # ~250 ULP: still wrong
