"""Sum bounds (issue 31): an element of an operator that sums terms passes within 2 x (K x u + u_out) x M.

The references here are FLOAT64 computations of each operator's formula (numpy float64 or the families' own
loop references), rounded once to the output type: a correctly rounded result must always pass, whatever the
shapes and however the terms cancel (hypothesis draws both); a reference with one element moved by 1e-3 of the
output's scale must fail (data of random signs, the cancellation of ordinary data). The issue's three cases are
reproduced, and the rule is stated by describe, validate and --check's report.
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
from dmlcli import engine
from dmlcli.checking.bounds import bound_figures, element_bounds
from dmlcli.checking.comparison import BY_BOUND, compare_arrays, parse_tolerance, rule_for
from dmlcli.cli import cli
from dmlcli.errors import InputError
from test_ops_attention import reference as attention_reference
from test_ops_recurrent import _case as recurrent_case
from test_ops_recurrent import _reference_for as recurrent_reference
from test_ops_training_grad import average_grad_reference, forward_jacobian, max_grad_reference

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.integers(0, 2 ** 32 - 1)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def outcome_of(op, arrays, **params):
    return engine.run(engine.request(op, **params), arrays)


def bounded_rule(outcome, output=0):
    call = outcome.verdict.call
    got = outcome.all_outputs[output]
    return rule_for(call.operator, got.dtype, None, call.parameters, call, inputs=outcome.inputs, output=output)


def assert_reference_passes(op, arrays, reference64, output=0, **params):
    """dmlcli's output at `output` passes against the FLOAT64 reference rounded once to its type."""
    outcome = outcome_of(op, arrays, **params)
    got = outcome.all_outputs[output]
    want = np.asarray(reference64, np.float64).reshape(got.shape).astype(got.dtype)
    comparison = compare_arrays(got, want, bounded_rule(outcome, output))
    assert comparison.passed, f"{op} {params}: {comparison.text()}"
    return outcome, want


def assert_moved_element_fails(op, arrays, reference64, output=0, **params):
    """The reference with one element moved by 1e-3 of the output's scale fails, and says by how much."""
    outcome, want = assert_reference_passes(op, arrays, reference64, output, **params)
    moved = want.copy().reshape(-1)
    at = int(np.argmax(np.abs(moved)))
    moved[(at + moved.size // 2) % moved.size] += np.asarray(1e-3 * np.abs(want).max(), want.dtype)
    comparison = compare_arrays(outcome.all_outputs[output], moved.reshape(want.shape), bounded_rule(outcome, output))
    assert not comparison.passed and comparison.mismatches == 1, f"{op} {params}: {comparison.text()}"
    assert "its sum bound" in comparison.text()


def signed(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def cancelling(rng, shape, axis, scale=1.0):
    """FLOAT32 values whose sums along `axis` nearly cancel: pairs v and -v (1 + 1e-3 noise), shuffled."""
    x = rng.standard_normal(shape) * scale
    half = shape[axis] // 2
    first = np.take(x, range(half), axis=axis)
    second = -first * (1 + 1e-3 * rng.standard_normal(first.shape))
    rest = np.take(x, range(2 * half, shape[axis]), axis=axis)
    joined = np.concatenate([first, second, rest], axis=axis)
    return np.take(joined, rng.permutation(shape[axis]), axis=axis).astype(np.float32)


def paired_product(rng, m, k, n, scale=1.0):
    """A {m, k} and B {k, n} whose products cancel in pairs: A's columns p and -p (1 + 1e-3 noise) meet equal rows
    of B, in a shuffled order."""
    half = k // 2
    p, q = rng.standard_normal((m, half)) * scale, rng.standard_normal((half, n))
    a = np.concatenate([p, -p * (1 + 1e-3 * rng.standard_normal(p.shape)), rng.standard_normal((m, k % 2)) * scale],
                       axis=1)
    b = np.concatenate([q, q, rng.standard_normal((k % 2, n))])
    order = rng.permutation(k)
    return a[:, order].astype(np.float32), b[order].astype(np.float32)


def saved(folder, **arrays):
    """Each array as folder/NAME.npy."""
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array)


def wide(*arrays):
    return [None if a is None else np.asarray(a, np.float64) for a in arrays]


# ---------------------------------------------------------------- the issue's three cases


def conv2d_reference(x, w, bias=None, strides=(1, 1), dilations=(1, 1), start=(0, 0), end=(0, 0), groups=1):
    """CROSS_CORRELATION, FORWARD, in float64: every tap's product added slice by slice."""
    x, w = wide(x, w)
    padded = np.pad(x, ((0, 0), (0, 0), (start[0], end[0]), (start[1], end[1])))
    n, _, height, width = padded.shape
    m, per_group, kh, kw = w.shape
    oh = (height - ((kh - 1) * dilations[0] + 1)) // strides[0] + 1
    ow = (width - ((kw - 1) * dilations[1] + 1)) // strides[1] + 1
    out = np.zeros((n, m, oh, ow))
    per_out = m // groups
    for g, i, j in itertools.product(range(groups), range(kh), range(kw)):
        rows = slice(i * dilations[0], i * dilations[0] + strides[0] * (oh - 1) + 1, strides[0])
        cols = slice(j * dilations[1], j * dilations[1] + strides[1] * (ow - 1) + 1, strides[1])
        patch = padded[:, g * per_group:(g + 1) * per_group, rows, cols]
        out[:, g * per_out:(g + 1) * per_out] += np.einsum("ncij,mc->nmij", patch,
                                                          w[g * per_out:(g + 1) * per_out, :, i, j])
    if bias is not None:
        out += np.asarray(bias, np.float64).reshape(1, -1, 1, 1)
    return out


def test_issue_convolution_with_a_correctly_rounded_reference_passes_on_the_command_line(tmp_path):
    """x 1x3x34x34, w 64x3x3x3, the reference a FLOAT64 convolution rounded to FLOAT32: 400-450 elements failed
    "54 ULP"; each is within its sum bound."""
    rng = np.random.default_rng(0)
    x, w = signed(rng, 1, 3, 34, 34), signed(rng, 64, 3, 3, 3)
    saved(tmp_path, x=x, w=w, ref=conv2d_reference(x, w).astype(np.float32))
    report = tmp_path / "report.json"
    result = invoke("run", "convolution", tmp_path / "x.npy", tmp_path / "w.npy", "--check", tmp_path / "ref.npy",
                    "--report", report)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("PASSED: all 65536 elements match within 54 ULP or 1.18e-38 absolute or the sum "
                                    "bound 2 x (27 x 2^-24 + 2^-24) x M")
    document = json.loads(report.read_text())
    assert document["difference_kinds"][BY_BOUND] > 100  # past 54 ULP: the cancelling elements
    assert document["tolerance"]["sum_bound"]["terms"] == 27 and 0 < document["max_sum_bound_share"] < 1
    # Without the bound (the ULP figure and the floor alone) the same reference fails, as the issue measured.
    outcome = outcome_of("convolution", [x, w])
    call = outcome.verdict.call
    plain = rule_for(call.operator, np.float32, None, call.parameters, call)
    assert not compare_arrays(outcome.output, np.load(tmp_path / "ref.npy"), plain).passed


@pytest.mark.parametrize("m, k, n", [(64, 27, 256), (128, 300, 64)])
def test_issue_gemm_with_a_correctly_rounded_reference_passes(m, k, n):
    rng = np.random.default_rng(1)
    a, b = signed(rng, m, k), signed(rng, k, n)
    assert_moved_element_fails("gemm", [a, b], a.astype(np.float64) @ b.astype(np.float64))


def test_a_moved_element_fails_saying_which_figures_it_is_past(tmp_path):
    rng = np.random.default_rng(2)
    a, b = signed(rng, 8, 30), signed(rng, 30, 5)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    want[3, 2] += np.float32(0.01)
    saved(tmp_path, a=a, b=b, want=want)
    report = tmp_path / "r.json"
    result = invoke("run", "gemm", tmp_path / "a.npy", tmp_path / "b.npy", "--check", tmp_path / "want.npy",
                    "--report", report)
    assert result.exit_code == 1
    line = next(text for text in result.output.splitlines() if text.startswith("  at [3, 2]"))
    assert "off (" in line and "past 60 ULP, the floor 9.54e-07 and its sum bound" in line
    failed = json.loads(report.read_text())["first_differences"][0]["failed"]
    assert failed["ulp_limit"] == 60 and failed["atol_floor"] == 2.0 ** -20
    assert 0 < failed["sum_bound"] < failed["abs_error"]


# ---------------------------------------------------------------- the rule, stated


def test_describe_states_the_rule_in_words_and_as_json():
    text = invoke("describe", "convolution").output
    assert "2 ULP times a count of the call" in text
    assert "Sum bound: an element also passes within its sum bound 2 x (K x u + u_out) x M" in text
    details = json.loads(invoke("describe", "gemm", "--format", "json").output)
    bound = details["tolerance"]["sum_bound"]
    assert details["tolerance"]["scaled_by_call"] is True and bound["multiple"] == 2
    assert "dot product" in bound["terms"] and "|A|" in bound["magnitude"]
    assert bound["roundoff"] == {"float32": 2.0 ** -24, "float16": 2.0 ** -24, "tf32": 2.0 ** -11}
    assert json.loads(invoke("describe", "add", "--format", "json").output)["tolerance"]["sum_bound"] is None


def test_validate_states_the_figures_of_the_call(tmp_path):
    rng = np.random.default_rng(3)
    saved(tmp_path, x=signed(rng, 1, 3, 8, 8), w=signed(rng, 4, 3, 3, 3))
    text = invoke("validate", "convolution", tmp_path / "x.npy", tmp_path / "w.npy").output
    assert ("check: --check compares OutputTensor within 54 ULP or 1.18e-38 absolute (2 ULP times this call's "
            "count, 27), or within each element's sum bound 2 x (27 x 2^-24 + 2^-24) x M: K = 27") in text
    report = json.loads(invoke("validate", "convolution", tmp_path / "x.npy", tmp_path / "w.npy", "--format",
                               "json").output)
    assert report["check"]["ulp_limit"] == 54 and report["check"]["sum_bound"]["terms"] == 27
    assert report["check"]["sum_bound"]["roundoff"] == 2.0 ** -24


def test_tf32_takes_tf32s_unit_roundoff():
    rng = np.random.default_rng(4)
    a, b = signed(rng, 4, 8), signed(rng, 8, 3)
    call = dmlcli.validate("gemm", a, b, allow_tf32=True).call
    assert bound_figures(call).roundoff == 2.0 ** -11
    assert bound_figures(dmlcli.validate("gemm", a.astype(np.float16), b.astype(np.float16),
                                         allow_tf32=True).call).roundoff == 2.0 ** -24


def test_a_fused_activation_carries_the_bound_through_its_slope():
    a, b = paired_product(np.random.default_rng(5), 6, 40, 5)
    for activation, slope in (("relu", 1.0), ("sigmoid", 0.25), ("leaky_relu", 1.0)):
        figures = bound_figures(dmlcli.validate("gemm", a, b, fused_activation=activation).call)
        assert figures.slope == slope and figures.activation
    figures = bound_figures(dmlcli.validate("gemm", a, b, fused_activation="elu", fused_alpha=3.0).call)
    assert figures.slope == 3.0
    assert bound_figures(dmlcli.validate("gemm", a, b, fused_activation="thresholded_relu").call) is None  # it jumps
    product = a.astype(np.float64) @ b.astype(np.float64)
    assert_reference_passes("gemm", [a, b], np.tanh(product), fused_activation="tanh")
    assert_reference_passes("gemm", [a, b], 1 / (1 + np.exp(-product)), fused_activation="sigmoid")
    assert_reference_passes("gemm", [a, b], np.maximum(product, 0), fused_activation="relu")


def test_selections_and_exact_outputs_have_no_bound():
    x = np.float32([[1, -2, 3]])
    assert bound_figures(dmlcli.validate("reduce", x, function="max", axes=[1]).call) is None
    assert bound_figures(dmlcli.validate("reduce", np.int32([[1, 2]]), function="sum", axes=[1]).call) is None
    assert bound_figures(dmlcli.validate("add", x, x).call) is None


def test_an_infinite_magnitude_bounds_nothing():
    a = np.float32([[np.inf, 1.0]])
    b = np.float32([[1.0], [1.0]])
    outcome = outcome_of("gemm", [a, b])
    rule = bounded_rule(outcome)
    assert rule.bound.values.tolist() == [0.0]
    assert not compare_arrays(outcome.output, np.float32([[1.0]]), rule).passed


def test_a_key_of_probability_zero_leaves_the_others_their_bound():
    x = np.float32([[0, -np.inf, 1, 2]])
    bound = bounded_rule(outcome_of("activation_softmax", [x])).bound.values
    assert bound[1] == 0 and (bound[[0, 2, 3]] > 0).all()
    tensors = [np.float32([[[1, 2]]]), np.float32([[[1, 0], [0, 1]]]), np.float32([[[1, -1], [2, 3]]])]
    outcome = outcome_of("multihead_attention", tensors + [None, None, None, None, np.int32([[[[1, 0]]]])],
                         head_count=1, mask_type="boolean", mask_filter_value=-np.inf)
    assert (bounded_rule(outcome).bound.values > 0).all()


# ---------------------------------------------------------------- --tolerance rtol:R,atol:A


def test_tolerance_rtol_atol_is_numpys_allclose():
    rule = parse_tolerance("rtol:1e-3,atol:1e-6")
    assert (rule.kind, rule.limit, rule.rtol) == ("allclose", 1e-6, 1e-3)
    assert parse_tolerance("rtol:0.5").limit == 0
    for bad in ("rtol:1,ulp:2", "rtol:-1", "rtol:x", "rtol:1,rtol:2"):
        with pytest.raises(InputError, match="rtol:R,atol:A"):
            parse_tolerance(bad)
    got = np.float32([1.0, 100.0])
    assert compare_arrays(got, np.float32([1.0000009, 100.09]), rule).passed
    assert not compare_arrays(got, np.float32([1.0, 100.2]), rule).passed


def test_tolerance_rtol_on_the_command_line_the_api_and_a_case(tmp_path):
    result = invoke("run", "add", "[1, 100]", "[0, 0]", "--dtype", "float32", "--check", "[1, 100.05]",
                    "--tolerance", "rtol:1e-3,atol:0")
    assert result.exit_code == 0 and "within 0 + 0.001*|expected|" in result.output
    failed = invoke("run", "add", "[1, 100]", "[0, 0]", "--dtype", "float32", "--check", "[1, 100.2]",
                    "--tolerance", "rtol:1e-3,atol:0")
    assert failed.exit_code == 1 and "past 0 + 0.001*|expected|" in failed.output
    comparison = dmlcli.check("add", np.float32([1, 100]), np.float32([0, 0]), expected=[1, 100.05],
                              tolerance="rtol:1e-3,atol:0")
    assert comparison.passed and comparison.rule.kind == "allclose"
    case = tmp_path / "case.json"
    case.write_text(json.dumps({"op": "add", "inputs": [{"dtype": "float32", "data": [1, 100]},
                                                        {"dtype": "float32", "data": [0, 0]}],
                                "expected": {"dtype": "float32", "data": [1, 100.05]},
                                "tolerance": "rtol:1e-3,atol:1e-6"}))
    assert dmlcli.run_case(case).passed
    case.write_text(case.read_text().replace("rtol:1e-3", "rtol:1e-5"))
    assert not dmlcli.run_case(case).passed
    case.write_text(case.read_text().replace("rtol:1e-5,atol:1e-6", "rtol:1e-5,ulp:3"))
    assert dmlcli.run_case(case).verdict == "error"


def test_the_api_check_uses_the_sum_bound():
    rng = np.random.default_rng(6)
    a, b = signed(rng, 16, 200), signed(rng, 200, 8)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    comparison = dmlcli.check("gemm", a, b, expected=want)
    assert comparison.passed and comparison.rule.bound is not None
    assert comparison.to_json()["tolerance"]["sum_bound"]["terms"] == 200


def test_a_case_without_a_tolerance_is_checked_with_the_sum_bound(tmp_path):
    rng = np.random.default_rng(7)
    x, w = signed(rng, 1, 3, 20, 20), signed(rng, 16, 3, 3, 3)
    saved(tmp_path, x=x, w=w, want=conv2d_reference(x, w).astype(np.float32))
    case = tmp_path / "conv.json"
    case.write_text(json.dumps({"op": "convolution", "inputs": ["x.npy", "w.npy"], "expected": "want.npy"}))
    result = dmlcli.run_case(case)
    assert result.passed and "or the sum bound 2 x (27 x 2^-24 + 2^-24) x M" in result.differences


def test_a_checked_reduce_runs_in_memory_where_its_bound_needs_the_inputs(tmp_path, monkeypatch):
    from dmlcli.checking import comparison

    streamed = []
    original = comparison.compare_npy_files
    monkeypatch.setattr(comparison, "compare_npy_files", lambda *a, **k: streamed.append(1) or original(*a, **k))
    rng = np.random.default_rng(8)
    x = cancelling(rng, (64, 512), 1)
    counts = rng.integers(-9, 9, (64, 512)).astype(np.int32)
    saved(tmp_path, x=x, want=x.astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32), counts=counts,
          total=counts.sum(axis=1, keepdims=True, dtype=np.int32))
    result = invoke("run", "reduce", tmp_path / "x.npy", "--function", "sum", "--axes", "1", "-o",
                    tmp_path / "out.npy", "--check", tmp_path / "want.npy")
    assert result.exit_code == 0 and "sum bound" in result.output and not streamed, result.output
    # An integer sum is compared bit for bit: no bound, and the check streams as before.
    result = invoke("run", "reduce", tmp_path / "counts.npy", "--function", "sum", "--axes", "1", "-o",
                    tmp_path / "out.npy", "--check", tmp_path / "total.npy")
    assert result.exit_code == 0 and streamed == [1], result.output


# ---------------------------------------------------------------- a correctly rounded reference always passes


@SETTINGS
@given(SEEDS, st.integers(1, 6), st.integers(1, 70), st.integers(1, 6), st.booleans(), st.booleans(),
       st.sampled_from([1e-3, 1.0, 1e3]))
def test_gemm(seed, m, k, n, with_c, transposed, scale):
    rng = np.random.default_rng(seed)
    a, b = paired_product(rng, m, k, n, scale)
    c = signed(rng, m, n, scale=scale) if with_c else None
    options = dict(alpha=0.75, beta=-1.5, trans_a="transpose" if transposed else "none")
    for dtype in (np.float32, np.float16) if scale <= 1 else (np.float32,):
        typed = [x.astype(dtype) for x in (a, b) + ((c,) if with_c else ())]
        a64, b64 = wide(*typed[:2])
        reference = 0.75 * (a64 @ b64) + (-1.5 * typed[2].astype(np.float64) if with_c else 0)
        arrays = [typed[0].T.copy() if transposed else typed[0]] + typed[1:]
        assert_reference_passes("gemm", arrays, reference, **options)


@SETTINGS
@given(SEEDS, st.integers(1, 4), st.integers(1, 40), st.integers(1, 4), st.booleans())
def test_matrix_multiply_integer_to_float(seed, m, k, n, with_bias):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a_zero, b_zero = np.int8([3]), np.int8([-5])
    a_scale, b_scale = np.float32([0.0123]), np.float32([-0.7])
    reference = ((a.astype(np.float64) - 3) * float(a_scale[0])) @ ((b.astype(np.float64) + 5) * float(b_scale[0]))
    bias = None
    if with_bias:
        bias = (-reference * (1 + 1e-4)).astype(np.float32)  # a bias that cancels the product
        reference = reference + bias.astype(np.float64)
    arrays = [a, a_scale, a_zero, b, b_scale, b_zero, bias]
    assert_reference_passes("matrix_multiply_integer_to_float", arrays, reference)


@SETTINGS
@given(SEEDS, st.integers(1, 3), st.integers(1, 3), st.integers(3, 7), st.sampled_from([1, 2]),
       st.sampled_from([1, 2]), st.booleans())
def test_convolution(seed, channels, groups, size, stride, dilation, with_bias):
    rng = np.random.default_rng(seed)
    per_group = 2 * channels  # channel pairs that cancel: the second half repeats the first, its filters negated
    x_half = rng.standard_normal((2, groups, channels, size, size))
    x = np.concatenate([x_half, x_half], axis=2).reshape(2, groups * per_group, size, size).astype(np.float32)
    w_half = rng.standard_normal((groups * 3, channels, 2, 2))
    w = np.concatenate([w_half, -w_half * (1 + 1e-3 * rng.standard_normal(w_half.shape))], axis=1).astype(np.float32)
    bias = signed(rng, 1, groups * 3, 1, 1) if with_bias else None
    options = dict(mode="cross_correlation", strides=[stride] * 2, dilations=[dilation] * 2, group_count=groups,
                   start_padding=[1, 0], end_padding=[0, 1])
    reference = conv2d_reference(x, w, bias, (stride,) * 2, (dilation,) * 2, (1, 0), (0, 1), groups)
    arrays = [x, w] + ([bias] if with_bias else [])
    assert_reference_passes("convolution", arrays, reference, **options)
    # BACKWARD (the transposed convolution) with the same filter is FORWARD's adjoint: the reference is that
    # adjoint, column by column of the forward map, and OutputPadding brings the result to the input's Sizes.
    incoming = cancelling(rng, reference.shape, 1)
    backward = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        unit = np.zeros(x.shape, np.float32)
        unit[index] = 1
        column = conv2d_reference(unit, w, None, (stride,) * 2, (dilation,) * 2, (1, 0), (0, 1), groups)
        backward[index] = np.sum(column * incoming.astype(np.float64))
    reach = [(n - 1) * stride + dilation + 1 - 1 for n in reference.shape[2:]]  # 2-tap filters, paddings 1 in all
    options["output_padding"] = [size - r for r in reach]
    assert_reference_passes("convolution", [incoming, w], backward, direction="backward", **options)


# The reductions: the function's float64 formula over the reduced axes.
_REDUCE = {
    "sum": lambda x, a: x.sum(axis=a, keepdims=True),
    "average": lambda x, a: x.mean(axis=a, keepdims=True),
    "l1": lambda x, a: np.abs(x).sum(axis=a, keepdims=True),
    "l2": lambda x, a: np.sqrt((x * x).sum(axis=a, keepdims=True)),
    "sum_square": lambda x, a: (x * x).sum(axis=a, keepdims=True),
    "multiply": lambda x, a: x.prod(axis=a, keepdims=True),
    "log_sum": lambda x, a: np.log(x.sum(axis=a, keepdims=True)),
    "log_sum_exp": lambda x, a: np.log(np.exp(x).sum(axis=a, keepdims=True)),
}


@SETTINGS
@given(SEEDS, st.sampled_from(sorted(_REDUCE)), st.integers(1, 40), st.integers(1, 4), st.booleans())
def test_reduce(seed, function, length, rows, half):
    rng = np.random.default_rng(seed)
    if function == "log_sum":  # a sum near 1 (a result near 0): the log's absolute error
        x = (np.abs(cancelling(rng, (rows, length), 1)) / length + np.float32(1 / length)).astype(np.float32)
    elif function == "multiply":
        x = (1 + 0.1 * signed(rng, rows, length)).astype(np.float32)
    else:
        x = cancelling(rng, (rows, length), 1)
    if function == "log_sum_exp":
        x = (x - np.log(length)).astype(np.float32)  # a sum of exponentials near 1
    if half:
        x = x.astype(np.float16)
    reference = _REDUCE[function](x.astype(np.float64), (1,))
    assert_reference_passes("reduce", [x], reference, function=function, axes=[1])


@SETTINGS
@given(SEEDS, st.integers(1, 30), st.sampled_from([1.0, 30.0]), st.booleans())
def test_softmax_and_log_softmax(seed, length, spread, one):
    rng = np.random.default_rng(seed)
    x = signed(rng, 3, length, scale=spread)
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    extra = {"axes": [1]} if one else {}
    suffix = "1" if one else ""
    assert_reference_passes(f"activation_softmax{suffix}", [x], np.exp(log_softmax), **extra)
    assert_reference_passes(f"activation_log_softmax{suffix}", [x], log_softmax, **extra)


@SETTINGS
@given(SEEDS, st.integers(1, 50), st.booleans(), st.booleans())
def test_cumulative_summation(seed, length, reverse, exclusive):
    rng = np.random.default_rng(seed)
    x = cancelling(rng, (2, length), 1)
    work = x.astype(np.float64)[:, ::-1] if reverse else x.astype(np.float64)
    run = np.cumsum(work, axis=1)
    if exclusive:
        run = np.concatenate([np.zeros((2, 1)), run[:, :-1]], axis=1)
    reference = run[:, ::-1] if reverse else run
    assert_reference_passes("cumulative_summation", [x], reference, axis=1,
                            axis_direction="decreasing" if reverse else "increasing", has_exclusive_sum=exclusive)


@SETTINGS
@given(SEEDS, st.integers(1, 4), st.sampled_from([1e-2, 1.0, 100.0]))
def test_batch_normalization(seed, channels, scale):
    rng = np.random.default_rng(seed)
    x = signed(rng, 2, channels, 3, 3, scale=scale)
    mean, variance = signed(rng, 1, channels, 1, 1, scale=scale), np.abs(signed(rng, 1, channels, 1, 1, scale=scale))
    gain = signed(rng, 1, channels, 1, 1)
    normalised = (x.astype(np.float64) - mean) / np.sqrt(variance.astype(np.float64) + float(np.float32(1e-5)))
    bias = (-gain * normalised[:1, :, :1, :1]).astype(np.float32)  # the first element of each channel cancels
    reference = gain.astype(np.float64) * normalised + bias
    assert_reference_passes("batch_normalization", [x, mean, variance, gain, bias], reference)


@SETTINGS
@given(SEEDS, st.sampled_from([[1], [2, 3], [1, 2, 3]]), st.sampled_from([0.0, 100.0]), st.booleans())
def test_mean_variance_normalization(seed, axes, offset, use_variance):
    rng = np.random.default_rng(seed)
    x = (signed(rng, 2, 3, 4, 5) + np.float32(offset)).astype(np.float32)  # an offset: x - mean cancels
    gain, bias = signed(rng, 1, 3, 1, 1), signed(rng, 1, 3, 1, 1)
    x64 = x.astype(np.float64)
    centred = x64 - x64.mean(axis=tuple(axes), keepdims=True)
    if use_variance:
        centred /= np.sqrt((centred * centred).mean(axis=tuple(axes), keepdims=True) + float(np.float32(1e-5)))
    reference = centred * gain + bias
    assert_reference_passes("mean_variance_normalization1", [x, gain, bias], reference, axes=axes,
                            normalize_variance=use_variance)
    assert_reference_passes("mean_variance_normalization2", [x, gain, bias], reference, axes=axes,
                            use_mean=True, use_variance=use_variance)


def average_pool_reference(x, window, strides, start, end, include):
    x64 = x.astype(np.float64)
    padded = np.pad(x64, ((0, 0), (0, 0), (start[0], end[0]), (start[1], end[1])))
    valid = np.pad(np.ones(x.shape), ((0, 0), (0, 0), (start[0], end[0]), (start[1], end[1])))
    oh = (padded.shape[2] - window[0]) // strides[0] + 1
    ow = (padded.shape[3] - window[1]) // strides[1] + 1
    total, count = np.zeros(x.shape[:2] + (oh, ow)), np.zeros(x.shape[:2] + (oh, ow))
    for i, j in itertools.product(range(window[0]), range(window[1])):
        rows = slice(i, i + strides[0] * (oh - 1) + 1, strides[0])
        cols = slice(j, j + strides[1] * (ow - 1) + 1, strides[1])
        total += padded[:, :, rows, cols]
        count += valid[:, :, rows, cols]
    return total / (math.prod(window) if include else count)


@SETTINGS
@given(SEEDS, st.integers(1, 4), st.integers(1, 3), st.booleans(), st.booleans())
def test_average_pooling(seed, window, stride, include, dilated_entry):
    rng = np.random.default_rng(seed)
    x = cancelling(rng, (1, 2, 6, 8), 3)
    start = (min(1, window - 1), 0)  # a window of 1 after padding would read padding alone
    options = dict(window_size=[window, window + 1], strides=[stride, stride], start_padding=list(start),
                   end_padding=[0, 1], include_padding=include)
    reference = average_pool_reference(x, (window, window + 1), (stride, stride), start, (0, 1), include)
    op = "average_pooling1" if dilated_entry else "average_pooling"
    assert_reference_passes(op, [x], reference, **options)


@SETTINGS
@given(SEEDS, st.integers(1, 3), st.integers(1, 2))
def test_fold(seed, window, stride):
    rng = np.random.default_rng(seed)
    size = 5
    blocks = ((size - window) // stride + 1) ** 2
    columns = signed(rng, 1, 2 * window * window, blocks)
    reference = np.zeros((1, 2, size, size))
    per_row = (size - window) // stride + 1
    for c, (ki, kj), block in itertools.product(range(2), itertools.product(range(window), repeat=2), range(blocks)):
        row, col = divmod(block, per_row)
        term = columns[0, c * window * window + ki * window + kj, block]
        reference[0, c, row * stride + ki, col * stride + kj] += float(term)
    assert_reference_passes("fold", [columns], reference, window_sizes=[window, window], strides=[stride, stride],
                            output_shape=(1, 2, size, size))


# ---------------------------------------------------------------- recurrent and attention: the families' references


@SETTINGS
@given(SEEDS, st.sampled_from(["rnn", "gru", "lstm"]), st.integers(1, 5), st.sampled_from([0.5, 1.5]),
       st.sampled_from(["forward", "bidirectional"]))
def test_recurrent(seed, kind, steps, weight_scale, direction):
    rng = np.random.default_rng(seed)
    inputs = recurrent_case(kind, rng, steps=steps, direction=direction)
    inputs["w"] = (inputs["w"] * np.float32(weight_scale / 0.5)).astype(np.float32)
    inputs["r"] = (inputs["r"] * np.float32(weight_scale / 0.5)).astype(np.float32)
    references = recurrent_reference(kind, inputs, direction=direction)
    order = ["x", "w", "r", "b", "h0", "c0", "lengths", "p"] if kind == "lstm" else ["x", "w", "r", "b", "h0",
                                                                                       "lengths"]
    arrays = [inputs.get(name) for name in order]
    while arrays[-1] is None:
        arrays.pop()
    for output, reference in enumerate(references):
        assert_reference_passes(kind, arrays, reference, output=output, direction=direction)


@SETTINGS
@given(SEEDS, st.integers(1, 3), st.integers(1, 6), st.sampled_from([1.0, 0.25]), st.sampled_from([1.0, 3.0]))
def test_multihead_attention(seed, sequence, kv, scale, size):
    rng = np.random.default_rng(seed)
    heads, head_size = 2, 8
    tensors = {"QueryTensor": signed(rng, 2, sequence, heads * head_size, scale=size),
               "KeyTensor": signed(rng, 2, kv, heads * head_size, scale=size),
               "ValueTensor": cancelling(rng, (2, kv, heads * head_size), 1)}
    (out, _, _), _ = attention_reference(tensors, heads=heads, scale=scale)
    arrays = [tensors["QueryTensor"], tensors["KeyTensor"], tensors["ValueTensor"]]
    assert_reference_passes("multihead_attention", arrays, out, head_count=heads, scale=scale)
    assert_reference_passes("multihead_attention1", arrays, out, query_head_count=heads, key_value_head_count=heads,
                            scale=scale)


# ---------------------------------------------------------------- the training gradients that sum


def _per_channel(shape):
    return tuple(1 if axis != 1 else size for axis, size in enumerate(shape))


@SETTINGS
@given(SEEDS, st.sampled_from([(2, 3, 4, 4), (4, 2, 3, 1)]))
def test_batch_normalization_training_and_gradients(seed, shape):
    rng = np.random.default_rng(seed)
    axes = (0, 2, 3)
    x, dy = (signed(rng, *shape) + np.float32(10)).astype(np.float32), signed(rng, *shape)
    gain, bias = signed(rng, *_per_channel(shape)), signed(rng, *_per_channel(shape))
    x64, dy64, gain64 = wide(x, dy, gain)
    epsilon = float(np.float32(1e-5))
    mean = x64.mean(axis=axes, keepdims=True)
    variance = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    root = np.sqrt(variance + epsilon)
    forward = gain64 * (x64 - mean) / root + bias
    for output, reference in enumerate((forward, mean, variance)):
        assert_reference_passes("batch_normalization_training", [x, gain, bias], reference, output=output)
    mean32, variance32 = mean.astype(np.float32), variance.astype(np.float32)
    m64, v64 = wide(mean32, variance32)
    root = np.sqrt(v64 + epsilon)
    scale_grad = (dy64 * (x64 - m64) / root).sum(axis=axes, keepdims=True)
    bias_grad = dy64.sum(axis=axes, keepdims=True)
    plain = dy64 * gain64 / root
    spread = v64 + epsilon
    trained = gain64 / root * ((dy64 - dy64.mean(axis=axes, keepdims=True))
                               - (x64 - m64) * (dy64 * (x64 - m64)).mean(axis=axes, keepdims=True) / spread)
    arrays = [x, dy, mean32, variance32, gain]
    for output, reference in enumerate((plain, scale_grad, bias_grad)):
        assert_reference_passes("batch_normalization_grad", arrays, reference, output=output)
    for output, reference in enumerate((trained, scale_grad, bias_grad)):
        assert_reference_passes("batch_normalization_training_grad", arrays, reference, output=output)


@SETTINGS
@given(SEEDS, st.booleans(), st.integers(1, 4))
def test_local_response_normalization_grad(seed, cross_channel, size):
    rng = np.random.default_rng(seed)
    x, dy = signed(rng, 1, 4, 3, 3), signed(rng, 1, 4, 3, 3)
    alpha, beta, bias = 0.5, 0.75, 1.5
    x64, dy64 = wide(x, dy)
    low, high = (size - 1) // 2, size - 1 - (size - 1) // 2

    def region(index):
        n, c, i, j = index
        if cross_channel:
            return [(n, q, i, j) for q in range(c - low, c + high + 1) if 0 <= q < 4]
        return [(n, c, p, q) for p in range(i - low, i + high + 1) for q in range(j - low, j + high + 1)
                if 0 <= p < 3 and 0 <= q < 3]

    base = {index: bias + alpha / size * math.fsum(x64[r] ** 2 for r in region(index)) for index in np.ndindex(x.shape)}
    reference = np.zeros(x.shape)
    for j in np.ndindex(x.shape):
        spread = math.fsum(dy64[i] * x64[i] * base[i] ** (-beta - 1) for i in np.ndindex(x.shape) if j in region(i))
        reference[j] = dy64[j] * base[j] ** -beta - 2 * alpha * beta / size * x64[j] * spread
    assert_reference_passes("local_response_normalization_grad", [x, dy], reference, cross_channel=cross_channel,
                            local_size=size, alpha=alpha, beta=beta, bias=bias)


@SETTINGS
@given(SEEDS, st.booleans())
def test_pooling_gradients(seed, include):
    rng = np.random.default_rng(seed)
    window, strides, start = [3, 2], [1, 1], [1, 0]
    incoming = signed(rng, 1, 2, 5, 4)
    reference, _, _ = average_grad_reference(incoming, (1, 2, 5, 5), window, strides, start, include)
    assert_reference_passes("average_pooling_grad", [incoming], reference, window_size=window, strides=strides,
                            start_padding=start, end_padding=[1, 0], include_padding=include, output_shape=(1, 2, 5, 5))
    x = (rng.permutation(2 * 5 * 5) / 8).astype(np.float32).reshape(1, 2, 5, 5)
    reference, _, _ = max_grad_reference(x, incoming, window, strides, start, [1, 1])
    assert_reference_passes("max_pooling_grad", [x, incoming], reference, window_size=window, strides=strides,
                            start_padding=start, end_padding=[1, 0])


@SETTINGS
@given(SEEDS, st.sampled_from(["linear", "nearest_neighbor"]), st.sampled_from([2.0, 4.0, 0.5]))
def test_resample_grad(seed, mode, scale):
    """The reference is the transpose of RESAMPLE1's map, read column by column from dmlcli's forward: with these
    scales and offsets every weight is a multiple of 1/64, exact in FLOAT32 (checked)."""
    rng = np.random.default_rng(seed)
    input_shape = (1, 2, 4, 4)
    output_shape = (1, 2) + (int(4 * scale),) * 2
    options = dict(interpolation_mode=mode, scales=[1, 1, scale, scale])
    jacobian = forward_jacobian("resample1", input_shape, output_shape=output_shape, **options)
    assert np.array_equal(jacobian * 64, np.round(jacobian * 64))
    incoming = signed(rng, *output_shape)
    reference = jacobian.T @ incoming.astype(np.float64).reshape(-1)
    assert_reference_passes("resample_grad", [incoming], reference, output_shape=input_shape, **options)


@SETTINGS
@given(SEEDS, st.sampled_from(["average", "max"]))
def test_roi_align_grad(seed, function):
    """AVERAGE: the transpose of ROI_ALIGN1's map (regions on quarter-pixels, two samples per output along each
    axis: every weight a multiple of 1/64, exact in FLOAT32, checked). MAX: all of an output's gradient to the
    sample ROI_ALIGN1 picks, here the one sample of a nearest read."""
    rng = np.random.default_rng(seed)
    input_shape = (1, 1, 6, 6)
    rois = np.float32([[0.5, 0.5, 4.5, 4.5], [1.0, 0.0, 5.0, 2.0]])
    batches = np.zeros(2, np.uint32)
    options = dict(reduction_function="average", interpolation_mode="linear", minimum_samples_per_output=2,
                   maximum_samples_per_output=2)
    incoming = signed(rng, 2, 1, 2, 2)
    if function == "max":
        options.update(reduction_function="max", interpolation_mode="nearest_neighbor",
                       minimum_samples_per_output=1, maximum_samples_per_output=1)
    columns = []
    for j in range(math.prod(input_shape)):
        unit = np.zeros(math.prod(input_shape), np.float32)
        unit[j] = 1
        columns.append(np.asarray(dmlcli.run("roi_align1", unit.reshape(input_shape), rois, batches,
                                             output_shape=(2, 1, 2, 2), **options), np.float64).reshape(-1))
    jacobian = np.stack(columns, axis=1)
    assert np.array_equal(jacobian * 64, np.round(jacobian * 64))
    reference = jacobian.T @ incoming.astype(np.float64).reshape(-1)
    x = (rng.permutation(36) / 8).astype(np.float32).reshape(input_shape) if function == "max" else None
    assert_reference_passes("roi_align_grad", [x, incoming, rois, batches], reference, output_shape=input_shape,
                            **options)


# ---------------------------------------------------------------- a reference off by 1e-3 of the output's scale fails


OFF_BY_A_THOUSANDTH = [
    ("gemm", lambda rng: [signed(rng, 16, 120), signed(rng, 120, 12)],
     lambda a, b: a.astype(np.float64) @ b.astype(np.float64), {}),
    ("convolution", lambda rng: [signed(rng, 1, 8, 10, 10), signed(rng, 6, 8, 3, 3)],
     lambda x, w: conv2d_reference(x, w), {"mode": "cross_correlation"}),
    ("reduce", lambda rng: [signed(rng, 8, 200)], lambda x: x.astype(np.float64).sum(axis=1, keepdims=True),
     {"function": "sum", "axes": [1]}),
    ("cumulative_summation", lambda rng: [signed(rng, 4, 100)], lambda x: np.cumsum(x.astype(np.float64), axis=1),
     {"axis": 1}),
    ("average_pooling", lambda rng: [signed(rng, 1, 2, 8, 8)],
     lambda x: average_pool_reference(x, (3, 3), (1, 1), (0, 0), (0, 0), True), {"window_size": [3, 3]}),
]


@pytest.mark.parametrize("op, make, formula, options", OFF_BY_A_THOUSANDTH, ids=[c[0] for c in OFF_BY_A_THOUSANDTH])
def test_a_reference_with_one_element_off_by_a_thousandth_of_the_scale_fails(op, make, formula, options):
    arrays = make(np.random.default_rng(9))
    assert_moved_element_fails(op, arrays, formula(*arrays), **options)


def test_an_attention_reference_off_by_a_thousandth_fails_with_unscaled_scores():
    rng = np.random.default_rng(10)
    tensors = {"QueryTensor": signed(rng, 2, 4, 32, scale=2), "KeyTensor": signed(rng, 2, 6, 32, scale=2),
               "ValueTensor": signed(rng, 2, 6, 32)}
    (out, _, _), _ = attention_reference(tensors, heads=2, scale=1.0)
    assert_moved_element_fails("multihead_attention", list(tensors.values()), out, head_count=2, scale=1.0)


def test_element_bounds_give_every_output_its_own():
    rng = np.random.default_rng(11)
    x, dy = signed(rng, 2, 3, 2, 2), signed(rng, 2, 3, 2, 2)
    mean, variance, gain = signed(rng, 1, 3, 1, 1), np.abs(signed(rng, 1, 3, 1, 1)), signed(rng, 1, 3, 1, 1)
    call = dmlcli.validate("batch_normalization_grad", x, dy, mean, variance, gain).call
    bounds = element_bounds(call, [x, dy, mean, variance, gain])
    assert [b.figures.terms for b in bounds] == [16, 12, 8]  # N = 8 elements per channel
    assert bounds[2].values.shape == (3,)
