"""The training family's gradients of pooling, resampling, slicing and ROI align: AVERAGE_POOLING_GRAD,
MAX_POOLING_GRAD, RESAMPLE_GRAD, RESAMPLE_GRAD1, SLICE_GRAD and ROI_ALIGN_GRAD.

Each operator against: a second transcription of its page's support table (every level, data type and rank), its
rules (exit 3) and usage errors (exit 2), the page's example, and independent derivatives: references written here
with Python loops in float64 (each element's terms summed with math.fsum), the Jacobian of dmlcli's own forward
operator read column by column (a linear operator's finite differences with a step of 1, exact), the adjoint
identity <g, F v> = <F^T g, v>, and central differences of a float64 forward written here and of dmlcli's own
FLOAT32 forward. A sum of n FLOAT32 terms is checked within (its roundings) x 2^-24 x the sum of the terms'
magnitudes; a gradient whose elements receive one value each, bit for bit. The command line, the API and a
DxDispatch model (DESC fields as DirectML.h spells them) run each operator.
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
import shaped_cli  # noqa: E402 - tests/ is on the path

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL = "float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8".split()
F = ["float32", "float16"]
T8 = ["float32", "float16", "int32", "int16", "int8", "uint32", "uint16", "uint8"]
U = 2.0 ** -24  # FLOAT32's unit roundoff

# ---------------------------------------------------------------- the entries

ENTRIES = {  # key: (DML_OPERATOR_TYPE value, introduced, exactness, DESC fields)
    "AVERAGE_POOLING_GRAD": (130, "3_0", "composite",
                             ("Strides", "WindowSize", "StartPadding", "EndPadding", "IncludePadding")),
    "MAX_POOLING_GRAD": (131, "3_0", "composite", ("Strides", "WindowSize", "StartPadding", "EndPadding", "Dilations")),
    "RESAMPLE_GRAD": (134, "3_0", "composite", ("InterpolationMode", "Scales", "InputPixelOffsets",
                                                "OutputPixelOffsets")),
    "SLICE_GRAD": (135, "3_0", "exact", ("InputWindowOffsets", "InputWindowSizes", "InputWindowStrides")),
    "ROI_ALIGN_GRAD": (150, "4_1", "composite", ("ReductionFunction", "InterpolationMode", "SpatialScaleX",
                                                 "SpatialScaleY", "InputPixelOffset", "OutputPixelOffset",
                                                 "MinimumSamplesPerOutput", "MaximumSamplesPerOutput",
                                                 "AlignRegionsToCorners")),
    "RESAMPLE_GRAD1": (162, "5_1", "composite", ("InterpolationMode", "RoundingDirection", "Scales",
                                                 "InputPixelOffsets", "OutputPixelOffsets")),
}


def test_the_training_family_holds_these_gradients():
    found = dict(dmlcli.operators.FAMILIES)["training"]
    assert set(ENTRIES) <= {op.key for op in found}


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_entry(key):
    op = dmlcli.find_operator(key)
    value, introduced, exactness, fields = ENTRIES[key]
    assert op.key == key and op.enum_value == value and op.family == "training"
    assert op.introduced.short == introduced and op.exactness == exactness
    assert tuple(p.field for p in op.parameters) == fields
    assert op.notes and not op.is_elementwise


# ---------------------------------------------------------------- support tables, a second transcription


def _pool_plan(op, dtype, rank, level):
    spatial = rank - 2
    if op == "average_pooling_grad":
        return plan(op, [(dtype, (1, 2) + (2,) * spatial)], feature_level=level, window_size=[2] * spatial,
                    output_shape=(1, 2) + (3,) * spatial)
    return plan(op, [(dtype, (1, 2) + (3,) * spatial), (dtype, (1, 2) + (2,) * spatial)], feature_level=level,
                window_size=[2] * spatial)


def _one_input_plan(op, dtype, rank, level):
    if op == "slice_grad":
        return plan(op, [(dtype, (1,) * rank)], feature_level=level, output_shape=(2,) * rank)
    return plan(op, [(dtype, (2,) * rank)], feature_level=level, output_shape=(1,) * rank)


# op: (its page's one row: level, ranks, data types; the ranks tried; how a call is planned)
GRID = {
    "average_pooling_grad": (("3_0", (4, 5), F), (4, 5), _pool_plan),
    "max_pooling_grad": (("3_0", (4,), F), (4, 5), _pool_plan),
    "resample_grad": (("3_0", (4,), F), (1, 2, 3, 4, 5), _one_input_plan),
    "resample_grad1": (("5_1", (1, 2, 3, 4), F), (1, 2, 3, 4, 5), _one_input_plan),
    "slice_grad": (("3_0", tuple(range(1, 9)), T8), (1, 4, 8), _one_input_plan),
}


@pytest.mark.parametrize("op", sorted(GRID))
def test_validation_grid(op):
    (introduced, ranks, types), tried, planned = GRID[op]

    def accepts(level, dtype, rank):
        return LEVELS.index(level) >= LEVELS.index(introduced) and dtype in types and rank in ranks

    failures: list[str] = []
    for level, dtype, rank in itertools.product(LEVELS, ALL, tried):
        shaped_cli.judge_cell(f"{op} {level} {dtype} rank {rank}",
                              lambda: planned(op, parse_data_type(dtype), rank, level), accepts(level, dtype, rank),
                              lambda: next(lv for lv in LEVELS if accepts(lv, dtype, rank)), failures)
    assert not failures, "\n".join(failures[:20])


def _roi_plan(level, dtype="float32", batch_type="uint32", with_input=True):
    data_type, batch = parse_data_type(dtype), parse_data_type(batch_type)
    tensors = [(data_type, (2, 3, 4, 4))] if with_input else [None]
    tensors += [(data_type, (5, 3, 2, 2)), (data_type, (1, 5, 4)), (batch, (5,))]
    return plan("roi_align_grad", tensors, feature_level=level, output_shape=None if with_input else (2, 3, 4, 4))


def test_roi_align_grad_validation_grid():
    failures: list[str] = []
    for level, dtype, batch_type in itertools.product(LEVELS, ALL, ("uint32", "uint64", "int32")):
        def accepts(lv, dtype=dtype, batch_type=batch_type):
            return LEVELS.index(lv) >= LEVELS.index("4_1") and dtype in F and batch_type == "uint32"

        shaped_cli.judge_cell(f"roi_align_grad {level} {dtype} {batch_type}",
                              lambda: _roi_plan(level, dtype, batch_type), accepts(level),
                              lambda: next(lv for lv in LEVELS if accepts(lv)), failures)
    assert not failures, "\n".join(failures[:20])
    assert _roi_plan("4_1", with_input=False).lowest_feature_level.short == "4_1"


@pytest.mark.parametrize("op, below, introduced", [
    ("average_pooling_grad", "2_1", "3_0"), ("max_pooling_grad", "2_1", "3_0"), ("resample_grad", "2_1", "3_0"),
    ("slice_grad", "2_1", "3_0"), ("resample_grad1", "5_0", "5_1")])
def test_refused_below_its_level_naming_the_lowest(op, below, introduced):
    planned = GRID[op][2]
    rank = 1 if op == "resample_grad1" else 4
    with pytest.raises(dmlcli.ValidationError, match=f"not available at DML_FEATURE_LEVEL_{below} .*supported from "
                                                     f"DML_FEATURE_LEVEL_{introduced}"):
        planned(op, parse_data_type("float32"), rank, below)
    assert planned(op, parse_data_type("float32"), rank, introduced).lowest_feature_level.short == introduced


def test_roi_align_grad_refused_below_4_1():
    with pytest.raises(dmlcli.ValidationError, match="not available at DML_FEATURE_LEVEL_4_0 .*supported from "
                                                     "DML_FEATURE_LEVEL_4_1"):
        _roi_plan("4_0")


def test_gradients_and_inputs_share_one_data_type():
    f32, f16 = parse_data_type("float32"), parse_data_type("float16")
    with pytest.raises(dmlcli.ValidationError, match="must have the same DataType"):
        plan("max_pooling_grad", [(f32, (1, 1, 3, 3)), (f16, (1, 1, 2, 2))], window_size=[2, 2])
    with pytest.raises(dmlcli.ValidationError, match="must have the same DataType"):
        plan("roi_align_grad", [(f32, (1, 1, 4, 4)), (f32, (1, 1, 2, 2)), (f16, (1, 4)),
                                (parse_data_type("uint32"), (1,))])


# ---------------------------------------------------------------- rules (exit 3) and usage errors (exit 2)


def ramp(shape, dtype="float32"):
    return np.arange(1, math.prod(shape) + 1).astype(dtype).reshape(shape)


RULES = [
    ("average_pooling_grad", [ramp((1, 1, 2, 2))], {"window_size": [2, 2], "output_shape": (1, 1, 4, 4)},
     r"AVERAGE_POOLING_GRAD: InputGradientTensor Sizes \[1, 1, 2, 2\] are not the Sizes AVERAGE_POOLING gives an "
     r"input of OutputGradientTensor's Sizes \[1, 1, 4, 4\] with these windows, \[1, 1, 3, 3\]"),
    ("average_pooling_grad", [ramp((1, 1, 2, 2))], {"window_size": [2], "output_shape": (1, 1, 3, 3)},
     r"WindowSize has 1 values but OutputGradientTensor has 2 spatial dimensions"),
    ("average_pooling_grad", [ramp((1, 1, 2, 2))], {"window_size": [2, 2], "output_shape": (1, 1, 3, 3, 1)},
     r"OutputGradientTensor has 5 dimensions and InputGradientTensor 4; they must have the same DimensionCount"),
    ("max_pooling_grad", [ramp((1, 1, 3, 3)), ramp((1, 1, 3, 3))], {"window_size": [2, 2]},
     r"InputGradientTensor Sizes \[1, 1, 3, 3\] are not the Sizes MAX_POOLING2 gives an input of InputTensor's "
     r"Sizes \[1, 1, 3, 3\] with these windows, \[1, 1, 2, 2\]"),
    ("max_pooling_grad", [ramp((1, 1, 3, 3)), ramp((1, 1, 2, 2))], {"window_size": [2, 2], "dilations": [0, 1]},
     r"Dilations\[0\] is 0; it must be at least 1"),
    ("max_pooling_grad", [ramp((1, 1, 3, 3)), ramp((1, 1, 2, 2))],
     {"window_size": [2, 2], "output_shape": (1, 1, 3, 4)},
     r"OutputGradientTensor Sizes \[1, 1, 3, 4\] do not match the Sizes its rule gives"),
    ("resample_grad", [ramp((1, 1, 2, 2))], {"output_shape": (1, 1, 2)},
     r"InputGradientTensor has 4 dimensions but OutputGradientTensor has 3"),
    ("resample_grad1", [ramp((2, 2))], {"output_shape": (1, 1), "scales": [2, 0]},
     r"Scales\[1\] 0 is not a finite number above 0"),
    ("slice_grad", [ramp((2, 2))], {"output_shape": (3, 3), "input_window_offsets": [3, 0]},
     r"InputWindowOffsets\[0\] 3 is outside OutputGradientTensor's Sizes\[0\] 3"),
    ("slice_grad", [ramp((2, 2))], {"output_shape": (3, 3), "input_window_strides": [3, 3]},
     r"InputGradientTensor Sizes\[0\] 2 is outside 1 to MaxCopiedElements 1"),
    ("slice_grad", [ramp((2, 2))], {"output_shape": (3, 3), "input_window_strides": [0, 1]},
     r"InputWindowStrides\[0\] is 0; strides may not be 0"),
    ("roi_align_grad", [ramp((1, 1, 4, 4)), ramp((2, 1, 2, 2)), ramp((2, 5)), np.zeros(2, np.uint32)], {},
     r"ROITensor Sizes \[2, 5\] are not \{ NumROIs, 4 \}"),
    ("roi_align_grad", [ramp((1, 1, 4, 4)), ramp((2, 2, 2, 2)), ramp((2, 4)), np.zeros(2, np.uint32)], {},
     r"InputGradientTensor Sizes \[2, 2, 2, 2\] are not \{ NumROIs 2, ChannelCount 1, OutputHeight, OutputWidth \}"),
    ("roi_align_grad", [None, ramp((2, 1, 2, 2)), ramp((2, 4)), np.zeros(2, np.uint32)],
     {"reduction_function": "max", "output_shape": (1, 1, 4, 4)}, r"ReductionFunction MAX needs InputTensor"),
    ("roi_align_grad", [ramp((1, 1, 4, 4)), ramp((2, 1, 2, 2)), ramp((2, 4)), np.zeros(2, np.uint32)],
     {"minimum_samples_per_output": 3, "maximum_samples_per_output": 2},
     r"MinimumSamplesPerOutput 3 is above MaximumSamplesPerOutput 2"),
]


@pytest.mark.parametrize("op, inputs, parameters, message", RULES, ids=[f"{r[0]}-{i}" for i, r in enumerate(RULES)])
def test_rule_violations_name_the_tensor_and_what_is_allowed(op, inputs, parameters, message):
    with pytest.raises(dmlcli.ValidationError, match=message):
        dmlcli.run(op, *inputs, **parameters)


def _cli_args(op, inputs, parameters):
    args = ["run", op] + ["none" if x is None else shaped_cli.json_input(np.asarray(x)) for x in inputs]
    for key, value in parameters.items():
        text = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
        args += ["--" + key.replace("_", "-"), text]
    return args + ["-o", "-"]


@pytest.mark.parametrize("op, inputs, parameters, message", RULES[::3], ids=[r[0] for r in RULES[::3]])
def test_rule_violations_exit_3_in_one_line(op, inputs, parameters, message):
    shaped_cli.refused_in_one_line(_cli_args(op, inputs, parameters), 3, f"{op.upper()}: ")


@pytest.mark.parametrize("op, inputs, parameters", [
    ("average_pooling_grad", [ramp((1, 1, 2, 2))], {"window_size": [2, 2]}),
    ("resample_grad", [ramp((1, 1, 2, 2))], {}),
    ("resample_grad1", [ramp((2, 2))], {"scales": [0.5, 0.5]}),
    ("slice_grad", [ramp((2, 2))], {}),
    ("roi_align_grad", [None, ramp((2, 1, 2, 2)), ramp((2, 4)), np.zeros(2, np.uint32)], {}),
])
def test_the_forward_input_sizes_must_be_stated(op, inputs, parameters):
    """DirectML takes OutputGradientTensor's Sizes from its desc: without --output-shape, a usage error (exit 2)."""
    shaped_cli.refused_in_one_line(_cli_args(op, inputs, parameters), 2,
                                   "OutputGradientTensor's Sizes from its tensor desc: give them with --output-shape")


def test_window_size_is_required():
    shaped_cli.refused_in_one_line(_cli_args("max_pooling_grad", [ramp((1, 1, 3, 3)), ramp((1, 1, 2, 2))], {}), 2,
                                   "WindowSize is required")


# ---------------------------------------------------------------- the pages' examples


def test_average_pooling_grad_page_example():
    got = dmlcli.run("average_pooling_grad", np.array([[[[1, 2], [3, 4]]]], np.float32), window_size=[2, 2],
                     output_shape=(1, 1, 3, 3))
    assert got.tolist() == [[[[0.25, 0.75, 0.5], [1, 2.5, 1.5], [0.75, 1.75, 1]]]]


def test_max_pooling_grad_page_example():
    x = np.array([[[[1, 2, 3], [2, 4, 2], [5, 6, 7]]]], np.float32)
    got = dmlcli.run("max_pooling_grad", x, np.array([[[[1, 2], [4, 5]]]], np.float32), window_size=[2, 2])
    assert got.tolist() == [[[[0, 0, 0], [0, 3, 0], [0, 4, 5]]]]


def test_resample_grad_page_example_under_each_rounding():
    """The page's nearest 1.5x (width), 0.5x (height) example: RESAMPLE2's DECREASING gives the page's numbers;
    RESAMPLE1's floor(x + 0.5) (dmlcli's resampling family) takes the higher element at its two ties."""
    incoming = np.array([[[[4, 5, 6]]]], np.float32)
    common = dict(scales=[1, 1, 0.5, 1.5], output_shape=(1, 1, 2, 2))
    assert dmlcli.run("resample_grad1", incoming, rounding_direction="decreasing", **common).tolist() == \
        [[[[9, 6], [0, 0]]]]
    assert dmlcli.run("resample_grad", incoming, **common).tolist() == [[[[0, 0], [4, 11]]]]
    forward = dmlcli.run("resample1", np.array([[[[1, 2], [3, 4]]]], np.float32), scales=[1, 1, 0.5, 1.5])
    assert forward.tolist() == [[[[3, 4, 4]]]]  # the rule the gradient is the adjoint of


def test_slice_grad_page_example():
    incoming = np.array([[1, 3], [9, 11]], np.int32)
    got = dmlcli.run("slice_grad", incoming, input_window_strides=[2, 2], output_shape=(4, 4))
    assert got.dtype == np.int32 and got.tolist() == [[1, 0, 3, 0], [0, 0, 0, 0], [9, 0, 11, 0], [0, 0, 0, 0]]


def test_roi_align_grad_page_example():
    """4 nearest regions of a 4x4 input, one sample per output: the page rounds its ties (0.5) down, dmlcli's
    ROI_ALIGN1 reads floor(x + 0.5); the gradient is that forward's transpose."""
    x = ramp((1, 1, 4, 4))
    rois = np.array([[0, 0, 2, 2], [2, 0, 4, 2], [0, 2, 2, 4], [2, 2, 4, 4]], np.float32)
    batches = np.zeros(4, np.uint32)
    options = dict(interpolation_mode="nearest_neighbor", minimum_samples_per_output=1, maximum_samples_per_output=1)
    forward = dmlcli.run("roi_align1", x, rois, batches, output_shape=(4, 1, 1, 3), **options)
    assert forward.reshape(4, 3).tolist() == [[5, 6, 6], [7, 8, 8], [13, 14, 14], [15, 16, 16]]
    (got,) = dmlcli.run("roi_align_grad", None, ramp((4, 1, 1, 3)), rois, batches, output_shape=(1, 1, 4, 4),
                        **options)
    assert got.tolist() == [[[[0, 0, 0, 0], [1, 5, 4, 11], [0, 0, 0, 0], [7, 17, 10, 23]]]]
    both = dmlcli.run("roi_align_grad", x, ramp((4, 1, 1, 3)), rois, batches, **options)
    assert both[0].tolist() == got.tolist() and both[1].tolist() == [[0] * 4] * 4  # nearest: no corner gradient


# ---------------------------------------------------------------- checking sums


def assert_sum_close(got, reference, magnitude, roundings, context=""):
    """`got` within `roundings` x 2^-24 x `magnitude` (the sum of the terms' magnitudes, elementwise) of the float64
    `reference`; a FLOAT16 result also within half its ULP (one rounding from FLOAT32). NaN where it is NaN."""
    got = np.asarray(got)
    value = got.astype(np.float64)
    bound = roundings * U * np.asarray(magnitude, np.float64)
    if got.dtype == np.float16:
        bound = bound + np.abs(reference) * 2.0 ** -11 + 2.0 ** -25
    both_nan = np.isnan(reference) & np.isnan(value)
    with np.errstate(invalid="ignore"):
        ok = both_nan | (value == reference) | (np.abs(value - reference) <= bound)
    assert ok.all(), (f"{context}: {np.count_nonzero(~ok)} elements out, worst {np.abs(value - reference)[~ok].max()} "
                      f"vs bound {bound[~ok].min() if np.ndim(bound) else bound}")


def summed(shape, terms):
    """Each element's fsum and the fsum of the magnitudes of its terms (a dict: index -> list of floats)."""
    total, magnitude = np.zeros(shape), np.zeros(shape)
    for index, values in terms.items():
        total[index] = math.fsum(values) if all(map(math.isfinite, values)) else sum(values)
        magnitude[index] = math.fsum(abs(v) for v in values) if all(map(math.isfinite, values)) else 0.0
    return total, magnitude


# ---------------------------------------------------------------- AVERAGE_POOLING_GRAD and MAX_POOLING_GRAD


def window_elements(output_index, window, strides, start, dilations, input_spatial):
    """The input coordinates one window reads, row-major over the window (padding left out)."""
    found = []
    for offsets in itertools.product(*(range(w) for w in window)):
        coordinate = tuple(o * s + k * d - p for o, s, k, d, p in zip(output_index, strides, offsets, dilations, start))
        if all(0 <= c < n for c, n in zip(coordinate, input_spatial)):
            found.append(coordinate)
    return found


def average_grad_reference(incoming, input_shape, window, strides, start, include):
    terms: dict = {}
    for n, c, *o in itertools.product(*map(range, incoming.shape)):
        read = window_elements(o, window, strides, start, [1] * len(window), input_shape[2:])
        divisor = math.prod(window) if include else len(read)
        for coordinate in read:
            terms.setdefault((n, c) + coordinate, []).append(float(incoming[(n, c, *o)]) / divisor)
    return summed(input_shape, terms) + (max(map(len, terms.values())),)


def max_grad_reference(x, incoming, window, strides, start, dilations):
    terms: dict = {}
    for n, c, *o in itertools.product(*map(range, incoming.shape)):
        read = window_elements(o, window, strides, start, dilations, x.shape[2:])
        values = [float(x[(n, c) + r]) for r in read]
        numbers = [v for v in values if not math.isnan(v)]
        chosen = read[values.index(max(numbers))] if numbers else read[0]  # the first maximum (== finds -0.0 too)
        terms.setdefault((n, c) + chosen, []).append(float(incoming[(n, c, *o)]))
    return summed(x.shape, terms) + (max(map(len, terms.values())),)


@st.composite
def pooling_calls(draw, dilated):
    spatial = draw(st.integers(2, 3))
    window = [draw(st.integers(1, 3)) for _ in range(spatial)]
    strides = [draw(st.integers(1, 3)) for _ in range(spatial)]
    dilations = [draw(st.integers(1, 2)) if dilated else 1 for _ in range(spatial)]
    start = [draw(st.integers(0, w - 1)) for w in window]
    end = [draw(st.integers(0, w - 1)) for w in window]
    sizes = [draw(st.integers((w - 1) * d + 1, 5)) for w, d in zip(window, dilations)]
    input_shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) + tuple(sizes)
    pooled = input_shape[:2] + tuple((n + s + e - (w - 1) * d - 1) // t + 1
                                     for n, s, e, w, d, t in zip(sizes, start, end, window, dilations, strides))
    return dict(window=window, strides=strides, dilations=dilations, start=start, end=end,
                input_shape=input_shape, pooled=pooled)


@SETTINGS
@given(pooling_calls(dilated=False), st.booleans(), st.sampled_from(F), st.integers(0, 2**16))
def test_average_pooling_grad_matches_the_reference(call, include, dtype, seed):
    incoming = np.random.default_rng(seed).standard_normal(call["pooled"]).astype(dtype)
    options = dict(window_size=call["window"], strides=call["strides"], start_padding=call["start"],
                   end_padding=call["end"], include_padding=include)
    got = dmlcli.run("average_pooling_grad", incoming, output_shape=call["input_shape"], **options)
    reference, magnitude, most = average_grad_reference(incoming, call["input_shape"], call["window"],
                                                        call["strides"], call["start"], include)
    assert got.dtype == incoming.dtype and got.shape == call["input_shape"]
    assert_sum_close(got, reference, magnitude, most + 1, str(call))


@SETTINGS
@given(pooling_calls(dilated=True).filter(lambda c: len(c["window"]) == 2), st.sampled_from(F), st.integers(0, 2**16))
def test_max_pooling_grad_matches_the_reference(call, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, call["input_shape"]).astype(dtype)  # small integers: ties, and zeros of both signs
    x[x == 0] = np.where(rng.random(np.count_nonzero(x == 0)) < 0.5, -0.0, 0.0).astype(dtype)
    incoming = rng.standard_normal(call["pooled"]).astype(dtype)
    options = dict(window_size=call["window"], strides=call["strides"], start_padding=call["start"],
                   end_padding=call["end"], dilations=call["dilations"])
    got = dmlcli.run("max_pooling_grad", x, incoming, **options)
    reference, magnitude, most = max_grad_reference(x, incoming, call["window"], call["strides"], call["start"],
                                                    call["dilations"])
    assert got.dtype == x.dtype and got.shape == x.shape
    assert_sum_close(got, reference, magnitude, most - 1, str(call))
    if most == 1:  # each element receives one incoming gradient at most: exact
        assert np.array_equal(got, reference.astype(dtype))


def test_max_pooling_grad_ties_nan_and_padding():
    """Ties to the lowest index (the page); NaN skipped, a window of nothing but NaN to its first element; padding
    is never the maximum, even below every element."""
    x = np.array([[[[5, 5, 1], [np.nan, np.nan, 2], [np.nan, np.nan, -9]]]], np.float32)
    incoming = np.array([[[[10, 20], [30, 40]]]], np.float32)
    got = dmlcli.run("max_pooling_grad", x, incoming, window_size=[2, 2])
    assert got.tolist() == [[[[10, 20, 0], [30, 0, 40], [0, 0, 0]]]]
    low = np.full((1, 1, 2, 2), -1e30, np.float32)
    got = dmlcli.run("max_pooling_grad", low, np.ones((1, 1, 3, 3), np.float32), window_size=[2, 2],
                     start_padding=[1, 1], end_padding=[1, 1])
    assert got.tolist() == [[[[4, 2], [2, 1]]]]


def test_max_pooling_grad_equals_max_unpooling_of_max_pooling2_indices_where_windows_do_not_overlap():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    incoming = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    _, indices = dmlcli.run("max_pooling2", x, window_size=[2, 2], strides=[2, 2])
    unpooled = dmlcli.run("max_unpooling", incoming, indices, output_shape=x.shape)
    got = dmlcli.run("max_pooling_grad", x, incoming, window_size=[2, 2], strides=[2, 2])
    assert got.view(np.uint32).tolist() == unpooled.view(np.uint32).tolist()


def test_average_pooling_grad_float16_is_computed_in_float32_and_rounded_once():
    incoming = np.array([[[[1, 1], [1, 1]]]], np.float16) * np.float16(0.3)
    got = dmlcli.run("average_pooling_grad", incoming, window_size=[2, 2], strides=[1, 1], output_shape=(1, 1, 3, 3))
    centre = np.float32(incoming[0, 0, 0, 0]) / np.float32(4) * np.float32(4)  # four shares added in FLOAT32
    assert got[0, 0, 1, 1] == np.float16(centre)


def test_pooling_grads_propagate_nan_and_infinity():
    incoming = np.array([[[[np.nan, 1], [np.inf, 2]]]], np.float32)
    got = dmlcli.run("average_pooling_grad", incoming, window_size=[1, 1], strides=[2, 2], output_shape=(1, 1, 3, 3))
    assert np.isnan(got[0, 0, 0, 0]) and got[0, 0, 2, 0] == np.inf and got[0, 0, 1, 1] == 0
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    got = dmlcli.run("max_pooling_grad", x, np.array([[[[np.inf]]]], np.float32), window_size=[2, 2])
    assert got.tolist() == [[[[0, 0], [0, np.inf]]]]  # the other elements get 0, not 0 x inf


# The Jacobian of a linear forward operator, read from dmlcli's own forward one input element at a time (a finite
# difference with a step of 1: exact for a linear map, up to the forward's own FLOAT32 rounding).
def forward_jacobian(op, input_shape, **options) -> np.ndarray:
    columns = []
    for j in range(math.prod(input_shape)):
        unit = np.zeros(math.prod(input_shape), np.float32)
        unit[j] = 1
        columns.append(np.asarray(dmlcli.run(op, unit.reshape(input_shape), **options), np.float64).reshape(-1))
    return np.stack(columns, axis=1)


def check_against_jacobian(grad, jacobian, incoming, context):
    reference = jacobian.T @ incoming.astype(np.float64).reshape(-1)
    magnitude = np.abs(jacobian).T @ np.abs(incoming.astype(np.float64)).reshape(-1)
    terms = int((jacobian != 0).sum(axis=0).max())
    assert_sum_close(grad.reshape(-1), reference, magnitude, terms + 4, context)


@pytest.mark.parametrize("include", [False, True])
def test_average_pooling_grad_is_the_transpose_of_average_pooling(include):
    options = dict(window_size=[3, 2], strides=[2, 1], start_padding=[1, 0], end_padding=[1, 1],
                   include_padding=include)
    jacobian = forward_jacobian("average_pooling", (1, 1, 5, 4), **options)
    incoming = np.random.default_rng(5).standard_normal((1, 1, 3, 4)).astype(np.float32)
    got = dmlcli.run("average_pooling_grad", incoming, output_shape=(1, 1, 5, 4), **options)
    check_against_jacobian(got, jacobian, incoming, f"include {include}")


def test_max_pooling_grad_is_the_derivative_of_max_pooling2():
    """Central differences of dmlcli's MAX_POOLING2 (distinct values an eighth apart, a step of 1/64: no maximum
    changes, and every difference is exact)."""
    rng = np.random.default_rng(11)
    x = (rng.permutation(2 * 5 * 5) / 8).astype(np.float32).reshape(1, 2, 5, 5)
    incoming = rng.integers(-4, 5, (1, 2, 2, 3)).astype(np.float32)
    options = dict(window_size=[2, 3], strides=[2, 1], dilations=[2, 1], start_padding=[1, 0], end_padding=[0, 0])
    got = dmlcli.run("max_pooling_grad", x, incoming, **options)

    def loss(values):
        return float(np.sum(dmlcli.run("max_pooling2", values, **options)[0].astype(np.float64) * incoming))

    step = 1 / 64
    for index in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += step
        minus[index] -= step
        assert (loss(plus) - loss(minus)) / (2 * step) == got[index], index


# ---------------------------------------------------------------- RESAMPLE_GRAD and RESAMPLE_GRAD1


@SETTINGS
@given(st.integers(1, 4), st.sampled_from(["linear", "nearest_neighbor"]), st.integers(0, 2**16), st.data())
def test_resample_grad_is_the_transpose_of_resample1(rank, mode, seed, data):
    rng = np.random.default_rng(seed)
    input_shape = tuple(data.draw(st.integers(1, 4)) for _ in range(rank))
    output_shape = tuple(data.draw(st.integers(1, 5)) for _ in range(rank))
    scales = [data.draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 0.75])) for _ in range(rank)]
    offsets_in = [data.draw(st.sampled_from([0.5, 0.0, 0.25])) for _ in range(rank)]
    offsets_out = [data.draw(st.sampled_from([-0.5, 0.0, 1.0])) for _ in range(rank)]
    options = dict(interpolation_mode=mode, scales=scales, input_pixel_offsets=offsets_in,
                   output_pixel_offsets=offsets_out)
    jacobian = forward_jacobian("resample1", input_shape, output_shape=output_shape, **options)
    incoming = rng.standard_normal(output_shape).astype(np.float32)
    op = "resample_grad" if rank == 4 else "resample_grad1"  # RESAMPLE_GRAD takes 4 dimensions only
    extra = {} if op == "resample_grad" else {"rounding_direction": "decreasing"}
    if op == "resample_grad1" and mode == "nearest_neighbor":
        # RESAMPLE1's floor(x + 0.5) is RESAMPLE2's floor with InputPixelOffsets lowered by 0.5 (exact here: the
        # offsets are multiples of 1/4 and the coordinates short)
        extra["input_pixel_offsets"] = [o - 0.5 for o in offsets_in]
    got = dmlcli.run(op, incoming, output_shape=input_shape, **{**options, **extra})
    check_against_jacobian(got, jacobian, incoming, f"{op} {options}")


def nearest_reference(incoming, input_shape, scales, offsets_in, offsets_out, rounding):
    """RESAMPLE2's NEAREST_NEIGHBOR (its page) transposed, with the page's coordinate in FLOAT32, one element of the
    output at a time."""
    terms: dict = {}
    for out_index in np.ndindex(incoming.shape):
        source = []
        for o, n, s, i_off, o_off in zip(out_index, input_shape, scales, offsets_in, offsets_out):
            x = (np.float32(o) - np.float32(o_off)) / np.float32(s) - np.float32(i_off)
            x = min(max(float(x), 0.0), n - 1.0)
            source.append(int(math.floor(x) if rounding == "decreasing" else math.ceil(x)))
        terms.setdefault(tuple(source), []).append(float(incoming[out_index]))
    return summed(input_shape, terms) + (max(map(len, terms.values())),)


@SETTINGS
@given(st.integers(1, 4), st.sampled_from(["decreasing", "increasing"]), st.integers(0, 2**16), st.data())
def test_resample_grad1_nearest_follows_its_rounding_direction(rank, rounding, seed, data):
    input_shape = tuple(data.draw(st.integers(1, 4)) for _ in range(rank))
    output_shape = tuple(data.draw(st.integers(1, 6)) for _ in range(rank))
    scales = [data.draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 2.5])) for _ in range(rank)]
    offsets_in = [data.draw(st.sampled_from([0.5, 0.0, 1.0])) for _ in range(rank)]
    offsets_out = [data.draw(st.sampled_from([-0.5, 0.0])) for _ in range(rank)]
    incoming = np.random.default_rng(seed).standard_normal(output_shape).astype(np.float32)
    got = dmlcli.run("resample_grad1", incoming, output_shape=input_shape, interpolation_mode="nearest_neighbor",
                     rounding_direction=rounding, scales=scales, input_pixel_offsets=offsets_in,
                     output_pixel_offsets=offsets_out)
    reference, magnitude, most = nearest_reference(incoming, input_shape, scales, offsets_in, offsets_out, rounding)
    assert_sum_close(got, reference, magnitude, rank * most, f"{scales} {offsets_in} {offsets_out}")


def test_resample_grad1_linear_is_resample_grad_and_ignores_the_rounding_direction():
    incoming = np.random.default_rng(2).standard_normal((1, 2, 5, 7)).astype(np.float32)
    options = dict(interpolation_mode="linear", scales=[1, 1, 1.7, 2.3], output_shape=(1, 2, 3, 3))
    first = dmlcli.run("resample_grad", incoming, **options)
    for rounding in ("increasing", "decreasing"):
        assert dmlcli.run("resample_grad1", incoming, rounding_direction=rounding, **options).tobytes() == \
            first.tobytes()


def test_resample_grad_scales_default_to_the_sizes_ratio_and_float16_rounds_once():
    incoming = np.random.default_rng(4).standard_normal((1, 1, 4, 6)).astype(np.float16)
    stated = dmlcli.run("resample_grad", incoming, interpolation_mode="linear", scales=[1, 1, 2, 2],
                        output_shape=(1, 1, 2, 3))
    derived = dmlcli.run("resample_grad", incoming, interpolation_mode="linear", output_shape=(1, 1, 2, 3))
    assert stated.dtype == np.float16 and stated.tobytes() == derived.tobytes()
    widened = dmlcli.run("resample_grad", incoming.astype(np.float32), interpolation_mode="linear",
                         output_shape=(1, 1, 2, 3))
    assert stated.tobytes() == widened.astype(np.float16).tobytes()


# ---------------------------------------------------------------- SLICE_GRAD


@SETTINGS
@given(st.integers(1, 4), st.sampled_from(T8), st.integers(0, 2**16), st.data())
def test_slice_grad_writes_the_window_back_bit_for_bit(rank, dtype, seed, data):
    rng = np.random.default_rng(seed)
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(rank))
    offsets = [data.draw(st.integers(0, n - 1)) for n in shape]
    windows = [data.draw(st.integers(1, n - o)) for n, o in zip(shape, offsets)]
    strides = [data.draw(st.sampled_from([1, 2, 3, -1, -2])) for _ in range(rank)]
    counts = [1 + (w - 1) // abs(s) for w, s in zip(windows, strides)]
    incoming = (rng.standard_normal(counts) * 100).astype(dtype)
    if dtype.startswith("float"):
        incoming.reshape(-1)[::3] = np.array([np.nan, -0.0, np.inf], dtype)[: incoming.reshape(-1)[::3].size]
    got = dmlcli.run("slice_grad", incoming, output_shape=shape, input_window_offsets=offsets,
                     input_window_sizes=windows, input_window_strides=strides)
    expected = np.zeros(shape, dtype)
    for index in np.ndindex(*counts):
        target = tuple(o + (w - 1 if s < 0 else 0) + s * c for o, w, s, c in zip(offsets, windows, strides, index))
        expected[target] = incoming[index]
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
    # the adjoint identity with dmlcli's SLICE1: <g, S v> = <S^T g, v>, exact for small integers
    v = rng.integers(-5, 6, shape).astype(np.float64)
    g = rng.integers(-5, 6, counts).astype(np.float64)
    sliced = dmlcli.run("slice1", v.astype(np.float32), output_shape=counts, input_window_offsets=offsets,
                        input_window_sizes=windows, input_window_strides=strides).astype(np.float64)
    back = dmlcli.run("slice_grad", g.astype(np.float32), output_shape=shape, input_window_offsets=offsets,
                      input_window_sizes=windows, input_window_strides=strides).astype(np.float64)
    assert np.sum(g * sliced) == np.sum(back * v)


def test_slice_grad_takes_fewer_elements_than_the_window_holds():
    got = dmlcli.run("slice_grad", np.array([7, 8], np.float32), output_shape=(6,), input_window_offsets=[1],
                     input_window_sizes=[5], input_window_strides=[-2])
    assert got.tolist() == [0, 0, 0, 8, 0, 7]  # from the window's end backwards: elements 5, 3 (1 not reached)


# ---------------------------------------------------------------- ROI_ALIGN_GRAD


def roi_positions(first, last, out_size, samples, input_offset, output_offset, corners):
    """Each sample's position along one axis, in float64 (no FLOAT32 rounding: a reference to differentiate)."""
    total = out_size * samples
    if corners and total > 1:
        return [k * (last - first) / (total - 1) + first - input_offset for k in range(total)]
    return [(k - output_offset) * (last - first) / total + first - input_offset for k in range(total)]


def roi_taps(position, size, linear):
    """The elements one sample reads and their weights (ONNX's RoiAlign rules); None outside the input."""
    if position < -1 or position > size:
        return None
    position = max(position, 0.0)
    if not linear:
        return [(min(int(math.floor(position + 0.5)), size - 1), 1.0)]
    low = min(int(math.floor(position)), size - 1)
    if low >= size - 1:
        return [(size - 1, 1.0)]
    return [(low, 1.0 - (position - low)), (low + 1, position - low)]


def roi_samples(rois, r, params, out_hw, input_hw):
    scale_x, scale_y = params["spatial_scale_x"], params["spatial_scale_y"]
    x1, y1, x2, y2 = (float(v) for v in rois[r])
    samples = params["samples"]
    ys = roi_positions(y1 * scale_y, y2 * scale_y, out_hw[0], samples, params["input_pixel_offset"],
                       params["output_pixel_offset"], params["align_regions_to_corners"])
    xs = roi_positions(x1 * scale_x, x2 * scale_x, out_hw[1], samples, params["input_pixel_offset"],
                       params["output_pixel_offset"], params["align_regions_to_corners"])
    linear = params["interpolation_mode"] == "linear"
    return ([roi_taps(p, input_hw[0], linear) for p in ys], [roi_taps(p, input_hw[1], linear) for p in xs])


def roi_forward64(x, rois, batches, out_hw, params):
    """ROI_ALIGN1 in float64 with a fixed sample count, outside samples reading 0: values, and per output the sample
    (its y and x number) the MAX reduction picks."""
    samples = params["samples"]
    values = np.zeros((len(rois), x.shape[1]) + out_hw)
    picked = {}
    for r in range(len(rois)):
        ytaps, xtaps = roi_samples(rois, r, params, out_hw, x.shape[2:])
        plane = x[int(batches[r])].astype(np.float64)
        for c, i, j in itertools.product(range(x.shape[1]), range(out_hw[0]), range(out_hw[1])):
            read = []
            for sy in range(i * samples, (i + 1) * samples):
                for sx in range(j * samples, (j + 1) * samples):
                    if ytaps[sy] is None or xtaps[sx] is None:
                        read.append(((sy, sx), 0.0))
                        continue
                    read.append(((sy, sx), sum(wy * wx * plane[c, yi, xi] for yi, wy in ytaps[sy]
                                               for xi, wx in xtaps[sx])))
            if params["reduction_function"] == "max":
                best = max(v for _, v in read)
                picked[(r, c, i, j)] = next(s for s, v in read if v == best)
                values[r, c, i, j] = best
            else:
                values[r, c, i, j] = math.fsum(v for _, v in read) / len(read)
    return values, picked


def roi_input_grad_reference(x, incoming, rois, batches, params):
    """The transpose of roi_forward64 in x: each output's gradient to its samples and their taps."""
    out_hw = incoming.shape[2:]
    samples = params["samples"]
    _, picked = roi_forward64(x, rois, batches, out_hw, params)
    terms: dict = {}
    for r in range(len(rois)):
        ytaps, xtaps = roi_samples(rois, r, params, out_hw, x.shape[2:])
        for c, i, j in itertools.product(range(x.shape[1]), range(out_hw[0]), range(out_hw[1])):
            g = float(incoming[r, c, i, j])
            if params["reduction_function"] == "max":
                chosen = [picked[(r, c, i, j)]]
                share = g
            else:
                chosen = [(sy, sx) for sy in range(i * samples, (i + 1) * samples)
                          for sx in range(j * samples, (j + 1) * samples)]
                share = g / samples ** 2
            for sy, sx in chosen:
                if ytaps[sy] is None or xtaps[sx] is None:
                    continue
                for (yi, wy), (xi, wx) in itertools.product(ytaps[sy], xtaps[sx]):
                    terms.setdefault((int(batches[r]), c, yi, xi), []).append(share * wy * wx)
    return summed(x.shape, terms) + (max(map(len, terms.values())),)


def roi_options(params):
    return {key: value for key, value in params.items() if key != "samples"} | {
        "minimum_samples_per_output": params["samples"], "maximum_samples_per_output": params["samples"]}


ROI_CASES = [
    dict(reduction_function="average", interpolation_mode="linear", spatial_scale_x=0.9, spatial_scale_y=1.1,
         input_pixel_offset=0.5, output_pixel_offset=-0.5, align_regions_to_corners=False, samples=2),
    dict(reduction_function="max", interpolation_mode="linear", spatial_scale_x=1.0, spatial_scale_y=0.8,
         input_pixel_offset=0.0, output_pixel_offset=0.0, align_regions_to_corners=False, samples=2),
    dict(reduction_function="average", interpolation_mode="linear", spatial_scale_x=1.25, spatial_scale_y=1.0,
         input_pixel_offset=0.5, output_pixel_offset=-0.5, align_regions_to_corners=True, samples=3),
    dict(reduction_function="average", interpolation_mode="nearest_neighbor", spatial_scale_x=1.0,
         spatial_scale_y=1.0, input_pixel_offset=0.5, output_pixel_offset=-0.5, align_regions_to_corners=False,
         samples=2),
]
# Regions inside, across the edges, inverted (x2 < x1) and small, on two batches; chosen so that no sample of any
# case above sits within 0.004 of an integer coordinate (a kink of the bilinear reading or of the clamp), where
# a central difference would average two slopes (test_the_regions_samples_clear_the_kinks).
ROIS = np.array([[0.67, 1.42, 4.46, 4.2], [5.17, 4.0, 1.25, 0.56], [-1.73, -0.25, 2.13, 6.46],
                 [2.43, 1.99, 2.56, 2.77]], np.float32)
BATCHES = np.array([0, 1, 1, 0], np.uint32)
ROI_INPUT_HW, ROI_OUTPUT_HW = (6, 7), (2, 3)


def test_the_regions_samples_clear_the_kinks():
    """Bilinear reading and the clamp bend at integers (and at -1 and the size), NEAREST_NEIGHBOR jumps at halves."""
    for params, r in itertools.product(ROI_CASES, range(len(ROIS))):
        x1, y1, x2, y2 = (float(v) for v in ROIS[r])
        for first, last, out_size, size, scale in ((y1, y2, ROI_OUTPUT_HW[0], ROI_INPUT_HW[0], params["spatial_scale_y"]),
                                                   (x1, x2, ROI_OUTPUT_HW[1], ROI_INPUT_HW[1], params["spatial_scale_x"])):
            for p in roi_positions(first * scale, last * scale, out_size, params["samples"],
                                   params["input_pixel_offset"], params["output_pixel_offset"],
                                   params["align_regions_to_corners"]):
                if -1.05 <= p <= size + 0.05:
                    assert abs(p - round(p)) > 0.004, (params, r, p)
                    if params["interpolation_mode"] == "nearest_neighbor":
                        assert abs(p + 0.5 - round(p + 0.5)) > 0.004, (params, r, p)


@pytest.mark.parametrize("params", ROI_CASES, ids=lambda p: f"{p['reduction_function']}-{p['interpolation_mode']}-"
                                                           f"corners{p['align_regions_to_corners']}")
@pytest.mark.parametrize("dtype", F)
def test_roi_align_grad_input_gradient_matches_the_reference(params, dtype):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 6, 7)).astype(dtype)
    incoming = rng.standard_normal((4, 3, 2, 3)).astype(dtype)
    got = dmlcli.run("roi_align_grad", x, incoming, ROIS.astype(dtype), BATCHES, **roi_options(params))
    reference, magnitude, most = roi_input_grad_reference(x, incoming, ROIS.astype(dtype), BATCHES, params)
    # the terms' FLOAT32 roundings, and the sample positions' (dmlcli rounds them to FLOAT32; the reference does
    # not): a weight off by up to 8 x 2^-24 (positions below 8) moves a term by that much of its output's share
    share = np.abs(incoming.astype(np.float64)).max()
    assert_sum_close(got[0], reference, magnitude + 8 * most * share, most + 4, str(params))
    assert got[0].dtype == x.dtype and got[1].shape == ROIS.shape


def _loss64(x, rois, incoming, params):
    values, _ = roi_forward64(x, rois, BATCHES, incoming.shape[2:], params)
    return float(np.sum(values * incoming.astype(np.float64)))


@pytest.mark.parametrize("params", ROI_CASES, ids=lambda p: f"{p['reduction_function']}-{p['interpolation_mode']}-"
                                                           f"corners{p['align_regions_to_corners']}")
def test_roi_align_grad_corner_gradient_is_the_derivative(params):
    """Central differences of the float64 forward above (a step of 1e-6) and of dmlcli's own ROI_ALIGN1 (FLOAT32,
    a step of 2^-10) with respect to each corner."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    incoming = rng.standard_normal((4, 3, 2, 3)).astype(np.float32)
    _, got = dmlcli.run("roi_align_grad", x, incoming, ROIS, BATCHES, **roi_options(params))
    rois64 = ROIS.astype(np.float64)
    precise = np.zeros(ROIS.shape)
    step = 1e-6
    for index in np.ndindex(ROIS.shape):
        plus, minus = rois64.copy(), rois64.copy()
        plus[index] += step
        minus[index] -= step
        precise[index] = (_loss64(x, plus, incoming, params) - _loss64(x, minus, incoming, params)) / (2 * step)
    np.testing.assert_allclose(got, precise, rtol=1e-4, atol=1e-4 * (1 + np.abs(precise).max()))

    def loss32(rois):
        out = dmlcli.run("roi_align1", x, rois, BATCHES, output_shape=incoming.shape, **roi_options(params))
        return float(np.sum(out.astype(np.float64) * incoming))

    coarse = np.zeros(ROIS.shape)
    step32 = 2.0 ** -10
    for index in np.ndindex(ROIS.shape):
        plus, minus = ROIS.copy(), ROIS.copy()
        plus[index] += step32
        minus[index] -= step32
        coarse[index] = (loss32(plus) - loss32(minus)) / (2 * step32)
    np.testing.assert_allclose(got, coarse, rtol=0, atol=2e-3 * (1 + np.abs(coarse).max()))


def test_roi_align_grad_average_input_gradient_is_the_transpose_of_roi_align1():
    """<g, ROI_ALIGN1(v)> = <ROI_ALIGN_GRAD(g), v> for random v: the adjoint identity with dmlcli's forward."""
    rng = np.random.default_rng(12)
    v = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    incoming = rng.standard_normal((4, 3, 2, 3)).astype(np.float32)
    options = dict(spatial_scale_x=0.9, spatial_scale_y=1.1)  # the adaptive sample count, from the regions
    forward = dmlcli.run("roi_align1", v, ROIS, BATCHES, output_shape=incoming.shape, **options).astype(np.float64)
    (back,) = dmlcli.run("roi_align_grad", None, incoming, ROIS, BATCHES, output_shape=v.shape, **options)
    left, right = np.sum(incoming * forward), np.sum(back.astype(np.float64) * v)
    scale = np.sum(np.abs(incoming)) * np.abs(v).max()
    assert abs(left - right) <= 64 * U * scale


def test_roi_align_grad_without_input_gives_the_input_gradient_only():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    incoming = rng.standard_normal((4, 3, 2, 3)).astype(np.float32)
    both = dmlcli.run("roi_align_grad", x, incoming, ROIS, BATCHES)
    alone = dmlcli.run("roi_align_grad", None, incoming, ROIS, BATCHES, output_shape=x.shape)
    assert len(both) == 2 and len(alone) == 1 and alone[0].tobytes() == both[0].tobytes()
    verdict = dmlcli.validate("roi_align_grad", None, incoming, ROIS, BATCHES, output_shape=x.shape)
    assert [t.name for t in verdict.call.outputs] == ["OutputGradientTensor"]


def test_roi_align_grad_edges():
    """A batch index past the input and NaN corners carry nothing back; NaN gradients propagate to what they reach."""
    x = ramp((1, 1, 4, 4))
    incoming = np.array([[[[np.nan]]], [[[1.0]]], [[[2.0]]]], np.float32)
    rois = np.array([[0, 0, 1, 1], [np.nan, 0, 2, 2], [0, 0, 4, 4]], np.float32)
    gradient, corners = dmlcli.run("roi_align_grad", x, incoming, rois, np.array([0, 0, 5], np.uint32),
                                   minimum_samples_per_output=1, maximum_samples_per_output=1)
    # the NaN region's one sample sits on element (0, 0): its taps there and on the neighbours it weighs 0 (0 x NaN,
    # as the forward's 0 x value)
    assert np.isnan(gradient[0, 0, :2, :2]).all() and np.count_nonzero(np.isnan(gradient)) == 4
    assert np.isnan(corners[0]).all() and corners[1:].tolist() == [[0] * 4, [0] * 4]


def test_roi_align_grad_of_an_empty_region_is_still_the_derivative():
    """x1 == x2: every sample reads one column (the page: 'regions can be empty'); its corners still move them."""
    x = np.random.default_rng(21).standard_normal((1, 2, 5, 6)).astype(np.float32)
    rois = np.array([[2.3, 1.1, 2.3, 3.7]], np.float32)
    incoming = np.random.default_rng(22).standard_normal((1, 2, 2, 2)).astype(np.float32)
    params = dict(ROI_CASES[0], samples=2)
    _, got = dmlcli.run("roi_align_grad", x, incoming, rois, np.zeros(1, np.uint32), **roi_options(params))

    def loss(corners):
        values, _ = roi_forward64(x, corners, [0], (2, 2), params)
        return float(np.sum(values * incoming))

    for index in np.ndindex(rois.shape):
        plus, minus = rois.astype(np.float64), rois.astype(np.float64)
        plus[index] += 1e-6
        minus[index] -= 1e-6
        assert abs(got[index] - (loss(plus) - loss(minus)) / 2e-6) < 1e-4, index


# ---------------------------------------------------------------- the command line, the API and DxDispatch


def _cli(op, inputs, parameters):
    result = CliRunner().invoke(cli, _cli_args(op, inputs, parameters))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("op, inputs, parameters", [
    ("average_pooling_grad", [np.ones((1, 1, 2, 2), np.float32)], {"window_size": [2, 2], "output_shape": (1, 1, 3, 3)}),
    ("max_pooling_grad", [ramp((1, 1, 3, 3)), np.ones((1, 1, 2, 2), np.float32)], {"window_size": [2, 2]}),
    ("resample_grad", [ramp((1, 1, 2, 4))], {"interpolation_mode": "linear", "output_shape": (1, 1, 1, 2)}),
    ("resample_grad1", [ramp((4,))], {"rounding_direction": "increasing", "output_shape": (2,)}),
    ("slice_grad", [ramp((2,), "int8")], {"input_window_strides": [-1], "output_shape": (3,)}),
    ("roi_align_grad", [None, ramp((1, 1, 1, 1)), np.array([[0, 0, 2, 2]], np.float32), np.zeros(1, np.uint32)],
     {"output_shape": (1, 1, 2, 2), "maximum_samples_per_output": 1}),
])
def test_command_line_runs_each_operator(op, inputs, parameters):
    printed = _cli(op, inputs, parameters)
    expected = dmlcli.run(op, *inputs, **parameters)
    expected = expected[0] if isinstance(expected, tuple) else expected
    assert printed["dtype"] == str(expected.dtype) and printed["data"] == expected.tolist()


def test_command_line_prints_both_roi_align_gradients():
    x = np.array([[[[1, 2], [4, 8]]]], np.float32)
    printed = _cli("roi_align_grad", [x, np.full((1, 1, 1, 1), 4, np.float32), np.array([[0, 0, 2, 2]], np.float32),
                                      np.zeros(1, np.uint32)], {"maximum_samples_per_output": 1})
    assert printed["OutputGradientTensor"]["data"] == [[[[1, 1], [1, 1]]]]
    # d/dx: the image gradient (1 - 0.5)(2 - 1) + 0.5 (8 - 4) = 2.5, x 4, x 0.5 for each x corner; d/dy likewise 4.5
    assert printed["OutputROIGradientTensor"]["data"] == [[5, 9, 5, 9]]


def _tensor(data_type, sizes):
    return {"DataType": data_type, "Sizes": list(sizes)}


def _dispatch(tmp_path, operator, desc, resources, bindings, printed):
    model = {"resources": {name: {"initialValuesDataType": kind, "initialValues": values}
                           for name, (kind, values) in resources.items()},
             "dispatchables": {"g": {"type": f"DML_OPERATOR_{operator}", "desc": desc}},
             "commands": [{"type": "dispatch", "dispatchable": "g", "bindings": bindings}]
             + [{"type": "print", "resource": name} for name in printed]}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    return CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])


def _zeros(count):
    return ("FLOAT32", {"valueCount": count, "value": 0})


DISPATCHES = [
    ("AVERAGE_POOLING_GRAD",
     {"InputGradientTensor": _tensor("FLOAT32", (1, 1, 2, 2)), "OutputGradientTensor": _tensor("FLOAT32", (1, 1, 3, 3)),
      "DimensionCount": 2, "Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0],
      "IncludePadding": False},
     {"dy": ("FLOAT32", [1, 2, 3, 4]), "dx": _zeros(9)}, {"InputGradientTensor": "dy", "OutputGradientTensor": "dx"},
     "Resource 'dx': 0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1"),
    ("MAX_POOLING_GRAD",
     {"InputTensor": _tensor("FLOAT32", (1, 1, 3, 3)), "InputGradientTensor": _tensor("FLOAT32", (1, 1, 2, 2)),
      "OutputGradientTensor": _tensor("FLOAT32", (1, 1, 3, 3)), "DimensionCount": 2, "Strides": [1, 1],
      "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0], "Dilations": [1, 1]},
     {"x": ("FLOAT32", [1, 2, 3, 2, 4, 2, 5, 6, 7]), "dy": ("FLOAT32", [1, 2, 4, 5]), "dx": _zeros(9)},
     {"InputTensor": "x", "InputGradientTensor": "dy", "OutputGradientTensor": "dx"},
     "Resource 'dx': 0, 0, 0, 0, 3, 0, 0, 4, 5"),
    ("RESAMPLE_GRAD",
     {"InputGradientTensor": _tensor("FLOAT32", (1, 1, 1, 3)), "OutputGradientTensor": _tensor("FLOAT32", (1, 1, 2, 2)),
      "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR", "DimensionCount": 4, "Scales": [1, 1, 0.5, 1.5],
      "InputPixelOffsets": [0.5, 0.5, 0.5, 0.5], "OutputPixelOffsets": [-0.5, -0.5, -0.5, -0.5]},
     {"dy": ("FLOAT32", [4, 5, 6]), "dx": _zeros(4)}, {"InputGradientTensor": "dy", "OutputGradientTensor": "dx"},
     "Resource 'dx': 0, 0, 4, 11"),
    ("RESAMPLE_GRAD1",
     {"InputGradientTensor": _tensor("FLOAT32", (1, 3)), "OutputGradientTensor": _tensor("FLOAT32", (2, 2)),
      "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR",
      "RoundingDirection": "DML_AXIS_DIRECTION_DECREASING", "DimensionCount": 2, "Scales": [0.5, 1.5],
      "InputPixelOffsets": [0.5, 0.5], "OutputPixelOffsets": [-0.5, -0.5]},
     {"dy": ("FLOAT32", [4, 5, 6]), "dx": _zeros(4)}, {"InputGradientTensor": "dy", "OutputGradientTensor": "dx"},
     "Resource 'dx': 9, 6, 0, 0"),
    ("SLICE_GRAD",
     {"InputGradientTensor": _tensor("INT32", (2, 2)), "OutputGradientTensor": _tensor("INT32", (4, 4)),
      "DimensionCount": 2, "InputWindowOffsets": [0, 0], "InputWindowSizes": [4, 4], "InputWindowStrides": [2, 2]},
     {"dy": ("INT32", [1, 3, 9, 11]), "dx": ("INT32", {"valueCount": 16, "value": 5})},
     {"InputGradientTensor": "dy", "OutputGradientTensor": "dx"},
     "Resource 'dx': 1, 0, 3, 0, 0, 0, 0, 0, 9, 0, 11, 0, 0, 0, 0, 0"),
]


@pytest.mark.parametrize("operator, desc, resources, bindings, line", DISPATCHES, ids=[d[0] for d in DISPATCHES])
def test_dxdispatch_model(tmp_path, monkeypatch, operator, desc, resources, bindings, line):
    monkeypatch.chdir(tmp_path)
    result = _dispatch(tmp_path, operator, desc, resources, bindings, ["dx"])
    assert result.exit_code == 0, result.output
    assert line in result.output


def _roi_model(with_input, outputs):
    desc = {"InputGradientTensor": _tensor("FLOAT32", (1, 1, 1, 1)), "ROITensor": _tensor("FLOAT32", (1, 4)),
            "BatchIndicesTensor": _tensor("UINT32", (1,)), "ReductionFunction": "DML_REDUCE_FUNCTION_AVERAGE",
            "InterpolationMode": "DML_INTERPOLATION_MODE_LINEAR", "SpatialScaleX": 1.0, "SpatialScaleY": 1.0,
            "InputPixelOffset": 0.5, "OutputPixelOffset": -0.5, "MinimumSamplesPerOutput": 1,
            "MaximumSamplesPerOutput": 1, "AlignRegionsToCorners": False}
    resources = {"dy": ("FLOAT32", [4]), "rois": ("FLOAT32", [0, 0, 2, 2]), "b": ("UINT32", [0]),
                 "x": ("FLOAT32", [1, 2, 4, 8]), "dx": _zeros(4), "droi": _zeros(4)}
    bindings = {"InputGradientTensor": "dy", "ROITensor": "rois", "BatchIndicesTensor": "b"}
    if with_input:
        desc["InputTensor"] = _tensor("FLOAT32", (1, 1, 2, 2))
        bindings["InputTensor"] = "x"
    for name, resource, sizes in (("OutputGradientTensor", "dx", (1, 1, 2, 2)), ("OutputROIGradientTensor", "droi",
                                                                                  (1, 4))):
        if name in outputs:
            desc[name] = _tensor("FLOAT32", sizes)
            bindings[name] = resource
    return desc, resources, bindings


@pytest.mark.parametrize("with_input, outputs, lines", [
    (False, ["OutputGradientTensor"], ["Resource 'dx': 1, 1, 1, 1", "Resource 'droi': 0, 0, 0, 0"]),
    (True, ["OutputROIGradientTensor"], ["Resource 'dx': 0, 0, 0, 0", "Resource 'droi': 5, 9, 5, 9"]),
    (True, ["OutputGradientTensor", "OutputROIGradientTensor"], ["Resource 'dx': 1, 1, 1, 1",
                                                                  "Resource 'droi': 5, 9, 5, 9"]),
])
def test_dxdispatch_roi_align_grad_writes_the_outputs_its_desc_has(tmp_path, monkeypatch, with_input, outputs, lines):
    monkeypatch.chdir(tmp_path)
    result = _dispatch(tmp_path, "ROI_ALIGN_GRAD", *_roi_model(with_input, outputs), ["dx", "droi"])
    assert result.exit_code == 0, result.output
    assert all(line in result.output for line in lines), result.output


def test_dxdispatch_roi_align_grad_refuses_the_regions_gradient_without_the_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _dispatch(tmp_path, "ROI_ALIGN_GRAD", *_roi_model(False, ["OutputROIGradientTensor"]), ["droi"])
    assert result.exit_code == 3
    assert "OutputROIGradientTensor needs InputTensor" in result.output
    result = _dispatch(tmp_path, "ROI_ALIGN_GRAD", *_roi_model(True, []), ["dx"])
    assert result.exit_code == 2 and "needs at least one output tensor" in result.output
