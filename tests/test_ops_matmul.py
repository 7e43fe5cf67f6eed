"""The matrix multiplication family: GEMM, MATRIX_MULTIPLY_INTEGER, MATRIX_MULTIPLY_INTEGER_TO_FLOAT,
QUANTIZED_LINEAR_MATRIX_MULTIPLY.

Each operator against: a second transcription of its support table (spot checks by level), every rule its
shape rule enforces (exit 3 on the command line), an independent reference written here (float64 einsum or
Python loops for floats, Python ints and Fractions for the integer operators), the promises of its notes
(FLOAT16 accumulates in FLOAT32 and rounds once, CTensor broadcast, transposes, the fused activation as ADD1's,
INT32 wrap-around, half-to-even requantization), the tolerance's growth with K, and ONNX's node-test vectors.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

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
from dmlcli.operators.matmul import entries as module
import shaped_cli  # noqa: E402 - tests/ is on the path

from conftest import SHARED

F32, F16 = np.float32, np.float16
FAMILY = "matrix multiplication"

# ---------------------------------------------------------------- the entries

ENTRIES = {  # key: (DML_OPERATOR_TYPE value, introduced, exactness, parameters' fields, inputs)
    "GEMM": (54, "1_0", "composite", ("TransA", "TransB", "Alpha", "Beta", "FusedActivation"),
             ("ATensor", "BTensor", "CTensor")),
    "MATRIX_MULTIPLY_INTEGER": (117, "2_1", "exact", (),
                                ("ATensor", "AZeroPointTensor", "BTensor", "BZeroPointTensor")),
    "QUANTIZED_LINEAR_MATRIX_MULTIPLY": (118, "2_1", "exact", (),
                                         ("ATensor", "AScaleTensor", "AZeroPointTensor", "BTensor", "BScaleTensor",
                                          "BZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor")),
    "MATRIX_MULTIPLY_INTEGER_TO_FLOAT": (170, "6_2", "composite", (),
                                         ("ATensor", "AScaleTensor", "AZeroPointTensor", "BTensor", "BScaleTensor",
                                          "BZeroPointTensor", "BiasTensor")),
}


def test_the_family_holds_each_operator_once():
    assert sorted(op.key for op in module.OPERATORS) == sorted(ENTRIES)
    assert [name for name, members in dmlcli.operators.FAMILIES if members == module.OPERATORS] == [FAMILY]


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_entry(key):
    op = dmlcli.find_operator(key)
    value, introduced, exactness, fields, inputs = ENTRIES[key]
    assert op.key == key and op.enum_value == value and op.family == FAMILY and op.prefix == ""
    assert op.introduced.short == introduced and op.exactness == exactness
    assert tuple(p.field for p in op.parameters) == fields and op.inputs == inputs
    assert op.notes and not op.is_elementwise
    if op.tolerance is not None:
        assert "WebNN" in op.tolerance.source and op.tolerance_scale is not None


def test_gemm_shares_add1s_fused_activation_parameter():
    add1 = dmlcli.find_operator("add1")
    gemm = dmlcli.find_operator("gemm")
    ours, theirs = gemm.parameters[-1], add1.parameters[0]
    assert type(ours) is type(theirs) and ours.activations is theirs.activations and ours.options == theirs.options


# ---------------------------------------------------------------- support tables, a second transcription

def plan(op, inputs, **kwargs):
    return api_plan(op, [(parse_data_type(t), shape) for t, shape in inputs], **kwargs)


def _gemm(dtype, rank, c=True):
    shapes = [(1,) * (rank - 2) + (2, 3), (1,) * (rank - 2) + (3, 4), (1,) * (rank - 2) + (2, 4)]
    return [(dtype, s) for s in (shapes if c else shapes[:2])]


def _mmi(a_type, b_type, rank, zp_rank=None):
    batch = (1,) * (rank - 2)
    found = [(a_type, batch + (2, 3))]
    if zp_rank is not None:
        found.append((a_type, (1,) * (zp_rank - 1) + (1,)))
    found.append((b_type, batch + (3, 4)))
    if zp_rank is not None:
        found.append((b_type, (1,) * (zp_rank - 1) + (4,)))
    return found


def _qlmm(types, rank, scale_rank, zero_points=True):
    a, b, s = types
    batch = (1,) * (rank - 2)
    one = (1,) * scale_rank
    found = [(a, batch + (2, 3)), (s, one)] + ([(a, one)] if zero_points else []) + \
        [(b, batch + (3, 4)), (s, one)] + ([(b, one)] if zero_points else []) + [(s, one)] + \
        ([(a, one)] if zero_points else [])
    return found


# (operator, inputs, output dtype or None, lowest level that accepts it or None)
SUPPORT = [
    ("gemm", _gemm("float32", 4), None, "1_0"),
    ("gemm", _gemm("float16", 4, c=False), None, "1_0"),
    ("gemm", _gemm("float32", 2), None, "4_0"),
    ("gemm", _gemm("float16", 3), None, "4_0"),
    ("gemm", _gemm("int32", 4), None, None),
    ("gemm", [("float32", (1, 1, 1, 2, 3)), ("float32", (1, 1, 1, 3, 4))], None, None),
    ("matrix_multiply_integer", _mmi("int8", "uint8", 4, 4), None, "2_1"),
    ("matrix_multiply_integer", _mmi("uint8", "uint8", 4), None, "2_1"),
    ("matrix_multiply_integer", _mmi("int8", "int8", 2), None, "4_0"),
    ("matrix_multiply_integer", _mmi("int8", "int8", 3, 2), None, "4_0"),
    # A 1-D BZeroPointTensor: 4_0 takes 2 to 4 dimensions for it, 5_2 1 to 4.
    ("matrix_multiply_integer", [("int8", (2, 3)), ("int8", (2,)), ("int8", (3, 4)), ("int8", (4,))], None, "5_2"),
    ("matrix_multiply_integer", [("int8", (2, 3)), ("int8", (2,)), ("int8", (3, 4)), ("int8", (1, 4))], None, "4_0"),
    ("matrix_multiply_integer", _mmi("int16", "int16", 4), None, None),
    ("quantized_linear_matrix_multiply", _qlmm(("uint8", "int8", "float32"), 4, 4), "uint8", "2_1"),
    ("quantized_linear_matrix_multiply", _qlmm(("uint8", "uint8", "float32"), 4, 4, zero_points=False), "uint8",
     "2_1"),
    ("quantized_linear_matrix_multiply", _qlmm(("int8", "int8", "float32"), 3, 1), "int8", "4_0"),
    ("quantized_linear_matrix_multiply", _qlmm(("int8", "int8", "float16"), 4, 4), "int8", None),
    ("quantized_linear_matrix_multiply", _qlmm(("int16", "int16", "float32"), 4, 4), "int16", None),
    ("matrix_multiply_integer_to_float",
     [("int16", (2, 3)), ("float16", (1,)), ("int16", (1,)), ("int16", (3, 4)), ("float16", (1,)), ("int16", (1,)),
      ("float16", (2, 4))], None, "6_2"),
    ("matrix_multiply_integer_to_float",
     [("uint32", (1, 1, 2, 3)), ("float32", (1,)), ("uint32", (1, 1, 3, 4)), ("float32", (4,))], None, "6_2"),
    ("matrix_multiply_integer_to_float",
     [("int8", (1, 1, 1, 2, 3)), ("float32", (1,)), ("int8", (1, 1, 1, 3, 4)), ("float32", (1,))], None, None),
]
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2"]


@pytest.mark.parametrize("name, inputs, out_type, lowest", SUPPORT,
                         ids=[f"{c[0]}-{c[1][0][0]}-{len(c[1][0][1])}d-{len(c[1])}-{c[3]}" for c in SUPPORT])
def test_support_rows(name, inputs, out_type, lowest):
    if lowest is None:
        with pytest.raises(dmlcli.ValidationError, match="no feature level accepts this call"):
            plan(name, inputs, output_dtype=out_type)
        return
    assert plan(name, inputs, output_dtype=out_type).lowest_feature_level.short == lowest
    if lowest != "1_0":
        below = LEVELS[LEVELS.index(lowest) - 1]
        with pytest.raises(dmlcli.ValidationError, match=f"supported from DML_FEATURE_LEVEL_{lowest}"):
            plan(name, inputs, output_dtype=out_type, feature_level=below)


def test_output_types():
    assert plan("gemm", _gemm("float16", 2)).call.output.data_type.name == "FLOAT16"
    assert plan("matrix_multiply_integer", _mmi("uint8", "int8", 2)).call.output.data_type.name == "INT32"
    with_zero_points = _qlmm(("uint8", "uint8", "float32"), 2, 1)
    with_zero_points[-1] = ("int8", (1,))
    assert plan("quantized_linear_matrix_multiply", with_zero_points).call.output.data_type.name == "INT8"
    without = _qlmm(("uint8", "uint8", "float32"), 2, 1, zero_points=False)
    assert plan("quantized_linear_matrix_multiply", without).call.output.data_type.name == "UINT8"
    assert plan("quantized_linear_matrix_multiply", without, output_dtype="int8").call.output.data_type.name == "INT8"
    mmitf = [("int8", (2, 3)), ("float16", (1,)), ("int8", (3, 4)), ("float16", (1,))]
    assert plan("matrix_multiply_integer_to_float", mmitf).call.output.data_type.name == "FLOAT16"


# ---------------------------------------------------------------- rules: every RuleViolation, exit 3

def _t(dtype, data):
    return json.dumps({"dtype": dtype, "data": data})


RULES = [
    (["gemm", "[[1,2],[3,4]]", "[[1,2,3]]", "--dtype", "float32"],
     "GEMM: ATensor's K is 2 (Sizes [2, 2]) but BTensor's K is 1 (Sizes [1, 3]); they must be equal"),
    (["gemm", "[[1,2],[3,4]]", "[[1,2],[3,4]]", "--dtype", "float32", "--trans-a", "transpose",
      "--trans-b", "transpose"], None),
    (["gemm", "[[1,2,3]]", "[[1,2],[3,4]]", "--dtype", "float32", "--trans-a", "transpose"],
     "GEMM: ATensor's K is 1 (Sizes [1, 3], transposed) but BTensor's K is 2"),
    (["gemm", "[[[1,2]]]", "[[1],[2]]", "--dtype", "float32"],
     "GEMM: ATensor has 3 dimensions and BTensor 2; ATensor, BTensor and OutputTensor must have the same "
     "DimensionCount"),
    (["gemm", "[[[1,2]],[[3,4]]]", "[[[1],[2]]]", "--dtype", "float32"],
     "GEMM: ATensor's batch Sizes [2] and BTensor's [1] differ"),
    (["gemm", "[1,2]", "[[1],[2]]", "--dtype", "float32"],
     "GEMM: ATensor Sizes [2] have 1 dimension(s); a matrix needs at least 2"),
    (["gemm", "[[1,2],[3,4]]", "[[1,2],[3,4]]", "[[1,2,3]]", "--dtype", "float32"],
     "GEMM: CTensor Sizes [1, 3] do not broadcast to the output's [2, 2]"),
    (["gemm", "[[1,2],[3,4]]", "[[1,2],[3,4]]", "[1,2]", "--dtype", "float32"],
     "GEMM: CTensor Sizes [2] do not broadcast to the output's [2, 2] (same DimensionCount"),
    (["gemm", "[[1,2],[3,4]]", "[[1,2],[3,4]]", "--dtype", "float32", "--feature-level", "3_0"],
     "GEMM: ATensor dimension count 2 is not supported at DML_FEATURE_LEVEL_3_0 (allowed: 4); supported from "
     "DML_FEATURE_LEVEL_4_0"),
    (["matrix_multiply_integer", _t("int8", [[1, 2]]), _t("uint8", [1]), _t("int8", [[1], [2]]),
      _t("int8", [0])],
     "MATRIX_MULTIPLY_INTEGER: ATensor data type INT8 and AZeroPointTensor data type UINT8 differ; ATensor and "
     "AZeroPointTensor must have the same DataType"),
    (["matrix_multiply_integer", _t("int8", [[1, 2]]), _t("int8", [1]), _t("uint8", [[1], [2]]),
      _t("int8", [0])], "BTensor data type UINT8 and BZeroPointTensor data type INT8 differ"),
    (["matrix_multiply_integer", _t("int8", [[1, 2]]), _t("int8", [1, 2]), _t("int8", [[1], [2]]),
      _t("int8", [0])],
     "MATRIX_MULTIPLY_INTEGER: AZeroPointTensor Sizes [2] are neither per tensor ({1, 1, 1, 1}) nor per row "
     "({1, 1, M, 1}, M = 1"),
    (["matrix_multiply_integer", _t("int8", [[1, 2]]), _t("int8", [1]), _t("int8", [[1], [2]]),
      _t("int8", [[0], [1]])],
     "MATRIX_MULTIPLY_INTEGER: BZeroPointTensor Sizes [2, 1] are neither per tensor ({1, 1, 1, 1}) nor per column "
     "({1, 1, 1, N}, N = 1)"),
    (["matrix_multiply_integer_to_float", _t("int8", [[1, 2]]), _t("float32", [1]), _t("int8", [1]),
      _t("int8", [[1], [2]]), _t("float32", [1]), _t("int8", [1]), _t("float32", [[1, 2]])],
     "MATRIX_MULTIPLY_INTEGER_TO_FLOAT: BiasTensor Sizes [1, 2] differ from the output's [1, 1]"),
    (["matrix_multiply_integer_to_float", _t("int8", [[1, 2]]), _t("float32", [1]), _t("int8", [1]),
      _t("uint8", [[1], [2]]), _t("float32", [1]), _t("uint8", [1]), _t("float32", [[1]])],
     "ATensor data type INT8 and BTensor data type UINT8 differ; ATensor and AZeroPointTensor and BTensor and "
     "BZeroPointTensor must have the same DataType"),
    (["matrix_multiply_integer_to_float", _t("int8", [[1, 2]]), _t("float32", [[1]]), _t("int8", [1]),
      _t("int8", [[1], [2]]), _t("float32", [1]), _t("int8", [1]), _t("float32", [[1]])],
     "AScaleTensor has 2 dimensions and AZeroPointTensor 1; AScaleTensor, AZeroPointTensor, BScaleTensor, "
     "BZeroPointTensor must have the same DimensionCount"),
    (["quantized_linear_matrix_multiply", _t("uint8", [[1, 2]]), _t("float32", [1]), _t("uint8", [0]),
      _t("uint8", [[1], [2]]), _t("float32", [1, 1]), _t("uint8", [0]), _t("float32", [1]), _t("uint8", [0])],
     "QUANTIZED_LINEAR_MATRIX_MULTIPLY: BScaleTensor Sizes [2] are neither per tensor"),
    (["quantized_linear_matrix_multiply", _t("uint8", [[1, 2]]), _t("float32", [1]), _t("uint8", [0]),
      _t("uint8", [[1], [2]]), _t("float32", [1]), _t("uint8", [0]), _t("float32", [[1]]), _t("uint8", [[0]])],
     "AScaleTensor has 1 dimensions and OutputScaleTensor 2; AScaleTensor, AZeroPointTensor, BScaleTensor, "
     "BZeroPointTensor, OutputScaleTensor, OutputZeroPointTensor must have the same DimensionCount"),
]


@pytest.mark.parametrize("args, message", [r for r in RULES if r[1]], ids=[m[:60] for _, m in RULES if m])
def test_rules_exit_3(args, message):
    shaped_cli.refused_in_one_line(["run", *args, "-o", "-"], 3, message)


def test_both_transposes_give_k_from_the_other_side():
    (args, _), = [r for r in RULES if r[1] is None]
    result = CliRunner().invoke(cli, ["run", *args, "-o", "-"])
    assert result.exit_code == 0, result.output
    # A^T B^T = (B A)^T; A = B = [[1,2],[3,4]]: A A = [[7,10],[15,22]], transposed.
    assert json.loads(result.stdout)["data"] == [[7, 15], [10, 22]]


def test_a_fused_activation_dmlcli_cannot_fuse_exits_2():
    result = CliRunner().invoke(cli, ["run", "gemm", "[[1]]", "[[1]]", "--dtype", "float32", "--fused-activation",
                                      "swish", "-o", "-"])
    assert result.exit_code == 2 and "is not an activation DirectML can fuse" in result.stderr


def test_partial_optional_inputs_are_refused_saying_how_many():
    with pytest.raises(dmlcli.InputError, match="takes 2 or 4 input tensors"):
        dmlcli.run("matrix_multiply_integer", np.zeros((1, 2), np.int8), np.zeros((2, 1), np.int8),
                   np.zeros(1, np.int8))


# ---------------------------------------------------------------- float references (float64 einsum, loops)

def ref_gemm(a, b, c=None, alpha=1.0, beta=1.0, trans_a=False, trans_b=False) -> np.ndarray:
    """float64: alpha * op(A) x op(B) + beta * C (C broadcast), by einsum over explicit indices."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if trans_a:
        a64 = np.swapaxes(a64, -1, -2)
    if trans_b:
        b64 = np.swapaxes(b64, -1, -2)
    result = float(F32(alpha)) * np.einsum("...mk,...kn->...mn", a64, b64)
    if c is not None:
        result = result + float(F32(beta)) * c.astype(np.float64)
    return result


def dot_bound(a, b, c, alpha, beta, trans_a, trans_b, eps) -> np.ndarray:
    """The classic bound of a float dot product of K terms: (K + 3) eps (|alpha| |A| |B| + |beta| |C|)."""
    k = a.shape[-2] if trans_a else a.shape[-1]
    magnitude = ref_gemm(np.abs(a), np.abs(b), None if c is None else np.abs(c), abs(alpha), 1.0, trans_a, trans_b)
    if c is not None:
        magnitude = magnitude + abs(float(F32(beta))) * np.abs(c.astype(np.float64))
    return (k + 3) * eps * magnitude + np.finfo(F32).tiny


def assert_within_rule(got, expected64, op, call, context=""):
    """Within the operator's ULP rule for this call (inputs that do not cancel, so ULP measure the error)."""
    rule = rule_for(op, got.dtype, call=call)
    expected = expected64.astype(got.dtype)
    distance = ulp_distance(got, expected)
    assert distance.max(initial=0) <= rule.limit, f"{context}: {distance.max()} ULP > {rule.limit}"


def _call(name, arrays, **params):
    return api_plan(name, [(dmlcli.data_types.from_numpy(x.dtype), x.shape) for x in arrays], **params).call


SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def gemm_case(draw):
    rank = draw(st.integers(2, 4))
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=rank - 2, max_size=rank - 2)))
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 9)), draw(st.integers(1, 5))
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    c_kind = draw(st.sampled_from(["none", "full", "row", "column", "one"]))
    alpha = draw(st.sampled_from([1.0, 0.5, -2.0, 0.3]))
    beta = draw(st.sampled_from([1.0, 0.0, 0.25, -1.5]))
    dtype = draw(st.sampled_from([F32, F16]))
    return batch, m, k, n, trans_a, trans_b, c_kind, alpha, beta, dtype


def _c_shape(batch, m, n, kind):
    return {"none": None, "full": batch + (m, n), "row": (1,) * len(batch) + (1, n),
            "column": (1,) * len(batch) + (m, 1), "one": (1,) * (len(batch) + 2)}[kind]


def _operands(rng, batch, m, k, n, trans_a, trans_b, c_kind, dtype, positive: bool):
    low = 0.0 if positive else -2.0
    a = rng.uniform(low, 2.0, batch + ((k, m) if trans_a else (m, k))).astype(dtype)
    b = rng.uniform(low, 2.0, batch + ((n, k) if trans_b else (k, n))).astype(dtype)
    c_shape = _c_shape(batch, m, n, c_kind)
    c = None if c_shape is None else rng.uniform(low, 2.0, c_shape).astype(dtype)
    return a, b, c


@SETTINGS
@given(case=gemm_case(), seed=st.integers(0, 2**32 - 1), positive=st.booleans())
def test_gemm_against_the_reference(case, seed, positive):
    batch, m, k, n, trans_a, trans_b, c_kind, alpha, beta, dtype = case
    a, b, c = _operands(np.random.default_rng(seed), batch, m, k, n, trans_a, trans_b, c_kind, dtype, positive)
    arrays = [a, b] if c is None else [a, b, c]
    params = dict(alpha=alpha, beta=beta, trans_a="transpose" if trans_a else "none",
                  trans_b="transpose" if trans_b else "none")
    got = dmlcli.run("gemm", *arrays, **params)
    expected = ref_gemm(a, b, c, alpha, beta, trans_a, trans_b)
    assert got.dtype == dtype and got.shape == batch + (m, n)
    if positive and alpha > 0 and beta >= 0:  # nothing cancels: the ULP rule measures the error
        assert_within_rule(got, expected, dmlcli.find_operator("gemm"), _call("gemm", arrays, **params), str(case))
    # Always: within the dot-product bound of FLOAT32 accumulation, plus FLOAT16's one rounding.
    bound = dot_bound(a, b, c, alpha, beta, trans_a, trans_b, np.finfo(F32).eps)
    if dtype == F16:
        bound = bound + np.abs(expected) * np.finfo(F16).eps / 2 + np.finfo(F16).smallest_subnormal
    assert np.all(np.abs(got.astype(np.float64) - expected) <= bound), str(case)


def test_gemm_loops_reference_on_one_case():
    # A second, loop-written reference on one 4-D case with every option set.
    rng = np.random.default_rng(7)
    a = rng.uniform(0, 1, (2, 3, 4, 5)).astype(F32)  # transposed: M = 5, K = 4
    b = rng.uniform(0, 1, (2, 3, 6, 4)).astype(F32)  # transposed: N = 6
    c = rng.uniform(0, 1, (1, 3, 1, 6)).astype(F32)
    got = dmlcli.run("gemm", a, b, c, trans_a="transpose", trans_b="transpose", alpha=0.5, beta=2.0)
    for i, j, mm, nn in itertools.product(range(2), range(3), range(5), range(6)):
        total = sum(float(a[i, j, kk, mm]) * float(b[i, j, nn, kk]) for kk in range(4))
        expected = 0.5 * total + 2.0 * float(c[0, j, 0, nn])
        assert abs(float(got[i, j, mm, nn]) - expected) <= 13 * np.finfo(F32).eps * abs(expected)


def test_float16_accumulates_in_float32_and_rounds_once():
    # 2048 + 1 + 1: FLOAT16 steps would stay at 2048 (its spacing there is 2); FLOAT32 gives 2050, a FLOAT16.
    a = np.array([[2048, 1, 1]], F16)
    b = np.ones((3, 1), F16)
    assert dmlcli.run("gemm", a, b).tolist() == [[2050.0]]
    # C is added in FLOAT32 too: 2050 - 1 = 2049, a FLOAT16 tie, rounds once to even: 2048. (Rounding the
    # product to FLOAT16 first would give the same here; the next case tells them apart.)
    assert dmlcli.run("gemm", a, b, np.array([[-1]], F16)).tolist() == [[2048.0]]
    # 2048 + 1 + 1 - 0.5: FLOAT32 gives 2049.5, which rounds to 2050; rounding 2050 - 0.5 in steps would too,
    # but 2048 + 1 (FLOAT16: 2048) + 1 (2048) - 0.5 would give 2048.
    assert dmlcli.run("gemm", a, b, np.array([[-0.5]], F16)).tolist() == [[2050.0]]
    # A sum past FLOAT16's range on the way that comes back into it stays finite.
    big = np.array([[60000, 60000, -60000]], F16)
    assert dmlcli.run("gemm", big, b).tolist() == [[60000.0]]


def test_float32_result_is_within_k_ulp_of_exact_on_positive_data():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, (8, 300)).astype(F32)
    b = rng.uniform(0, 1, (300, 7)).astype(F32)
    got = dmlcli.run("gemm", a, b)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert ulp_distance(got, exact.astype(F32)).max() <= 600


@pytest.mark.parametrize("c_shape", [(1, 4), (3, 1), (1, 1), (3, 4)])
def test_ctensor_broadcasts_to_the_output(c_shape):
    rng = np.random.default_rng(1)
    a, b = rng.integers(-3, 4, (3, 2)).astype(F32), rng.integers(-3, 4, (2, 4)).astype(F32)
    c = rng.integers(-3, 4, c_shape).astype(F32)
    full = np.ascontiguousarray(np.broadcast_to(c, (3, 4)))
    got = dmlcli.run("gemm", a, b, c, beta=0.5)
    assert np.array_equal(got, dmlcli.run("gemm", a, b, full, beta=0.5))
    assert np.array_equal(got, (a.astype(np.float64) @ b + 0.5 * full).astype(F32))  # small integers: exact


def test_beta_zero_still_multiplies_c_as_ieee_does():
    a, b = np.ones((1, 1), F32), np.ones((1, 1), F32)
    assert np.isnan(dmlcli.run("gemm", a, b, np.array([[np.inf]], F32), beta=0.0)[0, 0])
    assert dmlcli.run("gemm", a, b, np.array([[5]], F32), beta=0.0).tolist() == [[1.0]]
    assert dmlcli.run("gemm", a, b, beta=7.0).tolist() == [[1.0]]  # no CTensor: Beta is ignored


# ---------------------------------------------------------------- the fused activation, as ADD1's

@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("activation, fields", [("elu", {"alpha": 0.5}), ("relu", {}), ("sigmoid", {}),
                                                ("leaky_relu", {"alpha": 0.1}), ("linear", {"alpha": 2, "beta": 1})])
def test_fused_activation_is_the_activation_of_the_rounded_result(activation, fields, dtype):
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-2, 2, (3, 4)).astype(dtype), rng.uniform(-2, 2, (4, 5)).astype(dtype)
    plain = dmlcli.run("gemm", a, b, alpha=0.5)
    fused = dmlcli.run("gemm", a, b, alpha=0.5, fused_activation=activation,
                       **{f"fused_{name}": value for name, value in fields.items()})
    assert np.array_equal(fused, dmlcli.run(f"activation_{activation}", plain, **fields), equal_nan=True)


def test_fused_activation_on_the_command_line():
    result = CliRunner().invoke(cli, ["run", "gemm", "[[1,0],[0,1]]", "[[-2,1],[3,-4]]", "--dtype", "float32",
                                      "--fused-activation", "elu", "--fused-alpha", "0.5", "-o", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["data"]
    assert np.allclose(data, [[0.5 * math.expm1(-2), 1], [3, 0.5 * math.expm1(-4)]], rtol=1e-6)
    # The option names an activation the call must have: --fused-alpha alone is a usage error.
    alone = CliRunner().invoke(cli, ["run", "gemm", "[[1]]", "[[1]]", "--dtype", "float32", "--fused-alpha", "0.5",
                                     "-o", "-"])
    assert alone.exit_code == 2 and "--fused-alpha needs --fused-activation" in alone.stderr


def _gemm_model(fused) -> dict:
    desc = {"ATensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
            "BTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
            "TransA": "DML_MATRIX_TRANSFORM_NONE", "TransB": "DML_MATRIX_TRANSFORM_TRANSPOSE",
            "Alpha": 1.0, "Beta": 0.0, "FusedActivation": fused}
    return {"resources": {"A": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 0, 0, 1]},
                          "B": {"initialValuesDataType": "FLOAT32", "initialValues": [-2, 3, 1, -4]},
                          "Out": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}}},
            "dispatchables": {"gemm": {"type": "DML_OPERATOR_GEMM", "desc": desc}},
            "commands": [{"type": "dispatch", "dispatchable": "gemm",
                          "bindings": {"ATensor": "A", "BTensor": "B", "OutputTensor": "Out"}},
                         {"type": "print", "resource": "Out"}]}


def test_fused_activation_in_a_dxdispatch_desc(tmp_path):
    path = tmp_path / "gemm.json"
    path.write_text(json.dumps(_gemm_model({"Type": "ACTIVATION_RELU"})))
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 0, result.output
    # B transposed: [[-2, 1], [3, -4]]; ReLU of I x that.
    assert "Resource 'Out': 0, 1, 3, 0" in result.output
    path.write_text(json.dumps(_gemm_model(None)))
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 0 and "Resource 'Out': -2, 1, 3, -4" in result.output


def _model(dispatchable: dict, resources: dict, bindings: dict, printed: str) -> dict:
    return {"resources": {name: {"initialValuesDataType": t, "initialValues": v} for name, (t, v) in resources.items()},
            "dispatchables": {"op": dispatchable},
            "commands": [{"type": "dispatch", "dispatchable": "op", "bindings": bindings},
                         {"type": "print", "resource": printed}]}


def _dispatch(tmp_path, model: dict):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    return CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])


def test_a_desc_may_leave_out_one_zero_point_of_two(tmp_path):
    desc = {"ATensor": {"DataType": "UINT8", "Sizes": [1, 1, 2, 2]}, "AZeroPointTensor": None,
            "BTensor": {"DataType": "UINT8", "Sizes": [1, 1, 2, 2]},
            "BZeroPointTensor": {"DataType": "UINT8", "Sizes": [1, 1, 1, 2]},
            "OutputTensor": {"DataType": "INT32", "Sizes": [1, 1, 2, 2]}}
    resources = {"A": ("UINT8", [1, 2, 3, 4]), "B": ("UINT8", [10, 20, 30, 40]), "BZP": ("UINT8", [10, 20]),
                 "Out": ("INT32", {"valueCount": 4, "value": 0})}
    bindings = {"ATensor": "A", "BTensor": "B", "BZeroPointTensor": "BZP", "OutputTensor": "Out"}
    result = _dispatch(tmp_path, _model({"type": "DML_OPERATOR_MATRIX_MULTIPLY_INTEGER", "desc": desc}, resources,
                                        bindings, "Out"))
    assert result.exit_code == 0, result.output
    # [[1, 2], [3, 4]] x ([[10, 20], [30, 40]] - [10, 20]) = [[1, 2], [3, 4]] x [[0, 0], [20, 20]]
    assert "Resource 'Out': 40, 40, 80, 80" in result.output


def test_a_desc_broadcasts_c_with_zero_strides_and_checks_k(tmp_path):
    def desc(b_sizes):
        return {"ATensor": {"DataType": "FLOAT32", "Sizes": [2, 2]}, "BTensor": {"DataType": "FLOAT32", "Sizes": b_sizes},
                "CTensor": {"DataType": "FLOAT32", "Sizes": [2, 2], "Strides": [0, 1]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 2]},
                "TransA": "DML_MATRIX_TRANSFORM_NONE", "TransB": "DML_MATRIX_TRANSFORM_NONE", "Alpha": 1.0, "Beta": 1.0}
    resources = {"A": ("FLOAT32", [1, 2, 3, 4]), "B": ("FLOAT32", [1, 0, 0, 1]), "C": ("FLOAT32", [10, 20]),
                 "Out": ("FLOAT32", {"valueCount": 4, "value": 0})}
    bindings = {"ATensor": "A", "BTensor": "B", "CTensor": "C", "OutputTensor": "Out"}
    result = _dispatch(tmp_path, _model({"type": "DML_OPERATOR_GEMM", "desc": desc([2, 2])}, resources, bindings, "Out"))
    assert result.exit_code == 0, result.output
    assert "Resource 'Out': 11, 22, 13, 24" in result.output  # C's row [10, 20] repeated by its zero stride
    wrong = _dispatch(tmp_path, _model({"type": "DML_OPERATOR_GEMM", "desc": desc([1, 4])}, resources, bindings,
                                       "Out"))
    assert wrong.exit_code == 3 and "ATensor's K is 2" in wrong.output


def test_named_inputs_must_come_in_desc_order():
    from dmlcli import engine
    from dmlcli.data_types import UINT8

    req = engine.request("matrix_multiply_integer")
    inputs = [(UINT8, (2, 2)), (UINT8, (2, 2)), (UINT8, (2,))]
    verdict = engine.plan(req, inputs, ["ATensor", "BTensor", "BZeroPointTensor"])
    assert verdict.call.absent == ("AZeroPointTensor",)
    with pytest.raises(dmlcli.InputError, match="takes ATensor, AZeroPointTensor, BTensor, BZeroPointTensor in that "
                                                "order"):
        engine.plan(req, inputs, ["BTensor", "ATensor", "BZeroPointTensor"])


# ---------------------------------------------------------------- the tolerance grows with K

@pytest.mark.parametrize("params, c, limit", [
    ({}, False, 20), ({"alpha": 2.0}, False, 21), ({}, True, 21), ({"beta": 0.5}, True, 22),
    ({"alpha": 3.0, "beta": 0.0}, True, 23), ({"trans_a": "transpose"}, False, 6),
])
def test_gemm_tolerance_scales_with_k(params, c, limit):
    inputs = [("float32", (3, 10)), ("float32", (10, 4))] + ([("float32", (3, 4))] if c else [])
    if params.get("trans_a"):
        inputs[1] = ("float32", (3, 4))
        if c:
            inputs[2] = ("float32", (10, 4))
    verdict = plan("gemm", inputs, **params)
    rule = rule_for(verdict.call.operator, np.dtype("float32"), call=verdict.call)
    assert (rule.kind, rule.limit) == ("ulp", limit)


def test_check_uses_the_scaled_tolerance(tmp_path):
    a, b = np.full((1, 16), 0.1, F32), np.full((16, 1), 0.3, F32)  # K = 16: 32 ULP
    result = dmlcli.run("gemm", a, b)[0, 0]
    for steps, code in ((20, 0), (40, 1)):
        expected = result
        for _ in range(steps):
            expected = np.nextafter(expected, F32(np.inf))
        path = tmp_path / "expected.json"
        path.write_text(json.dumps({"dtype": "float32", "shape": [1, 1], "data": [[float(expected)]]}))
        outcome = CliRunner().invoke(cli, ["run", "gemm", json.dumps(a.tolist()), json.dumps(b.tolist()), "--dtype",
                                           "float32", "--check", str(path)])
        assert outcome.exit_code == code, outcome.output


def test_mmitf_tolerance_and_the_exact_ones():
    inputs = [("int8", (2, 7)), ("float32", (1,)), ("int8", (7, 3)), ("float32", (1,))]
    verdict = plan("matrix_multiply_integer_to_float", inputs)
    assert rule_for(verdict.call.operator, np.dtype("float32"), call=verdict.call).limit == 16
    integer = plan("matrix_multiply_integer", _mmi("int8", "int8", 2))
    assert rule_for(integer.call.operator, np.dtype("int32"), call=integer.call).kind == "exact"


# ---------------------------------------------------------------- integer references (Python ints)

def _per_row(values, m):
    flat = [int(v) for v in np.asarray(values).reshape(-1)]
    return flat * m if len(flat) == 1 else flat


def ref_integer_sums(a, azp, b, bzp) -> list:
    """Nested lists over batch, rows, columns of exact Python-int sums of (a - azp)(b - bzp)."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    azps = _per_row(0 if azp is None else azp, m)
    bzps = _per_row(0 if bzp is None else bzp, n)
    out = np.empty(tuple(batch) + (m, n), dtype=object)
    for index in itertools.product(*(range(s) for s in batch)):
        for i, j in itertools.product(range(m), range(n)):
            out[index + (i, j)] = sum((int(a[index + (i, kk)]) - azps[i]) * (int(b[index + (kk, j)]) - bzps[j])
                                      for kk in range(k))
    return out


def _wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


@st.composite
def integer_case(draw):
    rank = draw(st.integers(2, 4))
    batch = tuple(draw(st.lists(st.integers(1, 2), min_size=rank - 2, max_size=rank - 2)))
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 4))
    a_type, b_type = draw(st.sampled_from([np.int8, np.uint8])), draw(st.sampled_from([np.int8, np.uint8]))
    zero_points = draw(st.sampled_from(["none", "tensor", "row_column"]))
    return batch, m, k, n, a_type, b_type, zero_points


def _integer_operands(rng, batch, m, k, n, a_type, b_type, zero_points):
    def draw(dtype, shape):
        info = np.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    a, b = draw(a_type, batch + (m, k)), draw(b_type, batch + (k, n))
    if zero_points == "none":
        return a, None, b, None
    if zero_points == "tensor":
        return a, draw(a_type, (1,)), b, draw(b_type, (1,))
    return a, draw(a_type, (m,)), b, draw(b_type, (n,))


@SETTINGS
@given(case=integer_case(), seed=st.integers(0, 2**32 - 1))
def test_matrix_multiply_integer_against_python_ints(case, seed):
    a, azp, b, bzp = _integer_operands(np.random.default_rng(seed), *case)
    arrays = [a, b] if azp is None else [a, azp, b, bzp]
    got = dmlcli.run("matrix_multiply_integer", *arrays)
    expected = ref_integer_sums(a, azp, b, bzp)
    assert got.dtype == np.int32 and got.shape == expected.shape
    assert got.tolist() == np.vectorize(_wrap32, otypes=[object])(expected).tolist()


def test_matrix_multiply_integer_extremes_and_wrap():
    # (-128 - 127)^2 * K: 65025 per term; 33026 terms pass 2^31 and wrap modulo 2^32.
    k = 33026
    a = np.full((1, k), -128, np.int8)
    b = np.full((k, 1), -128, np.int8)
    azp, bzp = np.array([127], np.int8), np.array([127], np.int8)
    exact = 65025 * k
    assert exact > 2**31 - 1
    assert int(dmlcli.run("matrix_multiply_integer", a, azp, b, bzp)[0, 0]) == _wrap32(exact)


def ref_requantize(total: int, a_scale, b_scale, out_scale, out_zp: int, dtype) -> int:
    """round-half-to-even(total * a_scale * b_scale / out_scale) + zp, saturated: exact Fractions."""
    real = Fraction(total) * Fraction(float(a_scale)) * Fraction(float(b_scale)) / Fraction(float(out_scale))
    info = np.iinfo(dtype)
    return min(max(round(real) + out_zp, int(info.min)), int(info.max))  # round(Fraction): halves to even


@SETTINGS
@given(case=integer_case(), seed=st.integers(0, 2**32 - 1), out_type=st.sampled_from([np.int8, np.uint8]),
       per_row=st.booleans())
def test_quantized_linear_matrix_multiply_against_fractions(case, seed, out_type, per_row):
    rng = np.random.default_rng(seed)
    batch, m, k, n = case[:4]
    a, azp, b, bzp = _integer_operands(rng, *case)
    if azp is None:
        azp, bzp = np.zeros(1, a.dtype), np.zeros(1, b.dtype)
    a_scale = rng.uniform(0.001, 0.1, (m,) if per_row else (1,)).astype(F32)
    b_scale = rng.uniform(0.001, 0.1, (n,)).astype(F32)
    out_scale = rng.uniform(0.005, 0.05, (m,) if per_row else (1,)).astype(F32)
    out_zp = rng.integers(0, 100, out_scale.shape).astype(out_type)
    got = dmlcli.run("quantized_linear_matrix_multiply", a, a_scale, azp, b, b_scale, bzp, out_scale, out_zp)
    sums = ref_integer_sums(a, azp, b, bzp)
    expected = np.empty(sums.shape, dtype=object)
    for index in np.ndindex(*sums.shape):
        row = index[-2]
        pick = (lambda t, i: t.reshape(-1)[i if t.size > 1 else 0])
        expected[index] = ref_requantize(sums[index], pick(a_scale, row), pick(b_scale, index[-1]),
                                         pick(out_scale, row), int(pick(out_zp, row)), out_type)
    assert got.dtype == out_type and got.tolist() == expected.tolist()


def test_requantization_rounds_halves_to_even_and_saturates():
    a = np.array([[1, 3, 5, 7]], np.uint8).reshape(4, 1)  # M = 4, K = 1
    b = np.array([[1]], np.uint8)
    one = np.array([1.0], F32)
    half = np.array([0.5], F32)
    zero = np.zeros(1, np.uint8)
    # (1, 3, 5, 7) * 0.5 = 0.5, 1.5, 2.5, 3.5 -> 0, 2, 2, 4
    got = dmlcli.run("quantized_linear_matrix_multiply", a, half, zero, b, one, zero, one, zero)
    assert got.reshape(-1).tolist() == [0, 2, 2, 4]
    big = np.array([[200]], np.uint8)
    saturated = dmlcli.run("quantized_linear_matrix_multiply", big, one, zero, big, one, zero, one,
                           np.array([0], np.int8))
    assert saturated.tolist() == [[127]]
    # A scale of 0 (undefined on the page): x/0 = inf saturates; 0/0 = NaN gives the type's lowest.
    zero_scale = np.zeros(1, F32)
    assert dmlcli.run("quantized_linear_matrix_multiply", big, one, zero, big, one, zero, zero_scale,
                      zero).tolist() == [[255]]
    assert dmlcli.run("quantized_linear_matrix_multiply", np.zeros((1, 1), np.uint8), one, zero, big, one, zero,
                      zero_scale, np.array([0], np.int8)).tolist() == [[-128]]


@SETTINGS
@given(case=integer_case(), seed=st.integers(0, 2**32 - 1), out=st.sampled_from([F32, F16]),
       bias=st.booleans())
def test_matrix_multiply_integer_to_float_against_fractions(case, seed, out, bias):
    rng = np.random.default_rng(seed)
    a, azp, b, bzp = _integer_operands(rng, *case)
    a, b = a.astype(np.int16), b.astype(np.int16)  # one DataType for A, B and both zero points
    if azp is None:
        azp, bzp = np.zeros(1, np.int16), np.zeros(1, np.int16)
    azp, bzp = azp.astype(np.int16), bzp.astype(np.int16)
    m, n = a.shape[-2], b.shape[-1]
    a_scale = rng.uniform(0.01, 1, (m,)).astype(out)
    b_scale = rng.uniform(0.01, 1, (n,)).astype(out)
    bias_tensor = None
    if bias:  # every input
        bias_tensor = rng.uniform(-10, 10, a.shape[:-1] + (n,)).astype(out)
        arrays = [a, a_scale, azp, b, b_scale, bzp, bias_tensor]
    else:  # the required ones only: no zero points, no bias
        arrays, azp, bzp = [a, a_scale, b, b_scale], None, None
    got = dmlcli.run("matrix_multiply_integer_to_float", *arrays)
    sums = ref_integer_sums(a, azp, b, bzp)
    expected = np.empty(sums.shape, np.float64)
    for index in np.ndindex(*sums.shape):
        value = Fraction(sums[index]) * Fraction(float(a_scale[index[-2]])) * \
            Fraction(float(b_scale[index[-1]]))
        if bias_tensor is not None:
            value += Fraction(float(bias_tensor[index]))
        expected[index] = float(value)
    assert got.dtype == out
    call = _call("matrix_multiply_integer_to_float", arrays)
    rule = rule_for(call.operator, got.dtype, call=call)
    distance = np.where(np.abs(expected) < rule.floor, 0, ulp_distance(got, expected.astype(out)))
    # The kernel rounds (nearly) once: 1 ULP, far inside the rule's 2K + 2.
    assert distance.max(initial=0) <= 1 and rule.limit >= 1


# ---------------------------------------------------------------- one command-line run per operator

CLI_RUNS = [
    (["gemm", "[[1,2],[3,4]]", "[[5,6],[7,8]]", "[[1],[100]]", "--dtype", "float32", "--alpha", "2", "--beta",
      "0.5", "--trans-b", "transpose"], "float32", [[34.5, 46.5], [128, 156]]),
    (["matrix_multiply_integer", _t("uint8", [[1, 2], [3, 4]]), _t("uint8", [1]), _t("int8", [[-1], [2]]),
      _t("int8", [0])], "int32", [[2], [4]]),
    (["matrix_multiply_integer_to_float", _t("int8", [[1, 2]]), _t("float32", [0.5]), _t("int8", [[3], [4]]),
      _t("float32", [0.25])], "float32", [[1.375]]),
    (["quantized_linear_matrix_multiply", _t("uint8", [[1, 2]]), _t("float32", [1]), _t("uint8", [0]),
      _t("uint8", [[3], [4]]), _t("float32", [1]), _t("uint8", [0]), _t("float32", [2]), _t("uint8", [10])],
     "uint8", [[16]]),
]


@pytest.mark.parametrize("args, dtype, data", CLI_RUNS, ids=[a[0] for a, _, _ in CLI_RUNS])
def test_command_line_run(args, dtype, data):
    result = CliRunner().invoke(cli, ["run", *args, "-o", "-"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dtype"] == dtype and document["data"] == data


def test_every_operator_has_a_command_line_run():
    assert sorted({args[0] for args, _, _ in CLI_RUNS}) == sorted(op.cli_name for op in module.OPERATORS)


# ---------------------------------------------------------------- ONNX's node tests, mapped by hand

ONNX_DIR = SHARED / "onnx_operators"
ONNX_OPS = ("Gemm", "MatMul", "MatMulInteger", "QLinearMatMul")
ONNX_CASES = sorted(p for p in ONNX_DIR.glob("onnx__test_*.json") if json.loads(p.read_text())["onnx_op"] in ONNX_OPS) \
    if ONNX_DIR.is_dir() else []


def test_the_onnx_cases_are_there(shared_dir):
    assert len(ONNX_CASES) == 22


def _matmul_operands(a, b):
    """NumPy's matmul rules by hand: 1-D operands as a row / a column, batches broadcast to one shape."""
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    rank = max(a2.ndim, b2.ndim)
    a2 = a2.reshape((1,) * (rank - a2.ndim) + a2.shape)
    b2 = b2.reshape((1,) * (rank - b2.ndim) + b2.shape)
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    return (np.ascontiguousarray(np.broadcast_to(a2, batch + a2.shape[-2:])),
            np.ascontiguousarray(np.broadcast_to(b2, batch + b2.shape[-2:])))


def run_onnx(case) -> np.ndarray | None:
    """The case through dmlcli's API, its attributes mapped here by hand; None where DirectML cannot take it."""
    op, x, at = case["onnx_op"], case["inputs"], case["attributes"]
    if op == "Gemm":
        c = x[2].reshape((1,) * (2 - x[2].ndim) + x[2].shape) if len(x) > 2 else None
        return dmlcli.run("gemm", *([x[0], x[1]] + ([] if c is None else [c])),
                          trans_a="transpose" if at.get("transA") else "none",
                          trans_b="transpose" if at.get("transB") else "none",
                          alpha=at.get("alpha", 1.0), beta=at.get("beta", 1.0))
    if op == "MatMul":
        a, b = _matmul_operands(x[0], x[1])
        return dmlcli.run("gemm", a, b)
    if op == "MatMulInteger":
        a, b = _matmul_operands(x[0], x[1])
        return dmlcli.run("matrix_multiply_integer", a, x[2].reshape(-1), b, x[3].reshape(-1))
    a, b = _matmul_operands(x[0], x[3])
    if x[1].dtype != F32:
        return None  # DirectML's QUANTIZED_LINEAR_MATRIX_MULTIPLY takes FLOAT32 scales only
    flat = [t.reshape(-1) for t in x]
    return dmlcli.run("quantized_linear_matrix_multiply", a, flat[1], flat[2], b, flat[4], flat[5], flat[6], flat[7])


@pytest.mark.parametrize("path", ONNX_CASES, ids=[p.stem.removeprefix("onnx__test_") for p in ONNX_CASES])
def test_onnx_vectors(path):
    from dmlcli.io.json_tensor import tensor_from_object

    document = json.loads(path.read_text())
    case = {"onnx_op": document["onnx_op"], "attributes": document["attributes"],
            "inputs": [tensor_from_object(t, where="input") for t in document["inputs"]]}
    expected = tensor_from_object(document["expected"][0], where="expected")
    got = run_onnx(case)
    if got is None:
        pytest.skip("FLOAT16 scales: DirectML's QUANTIZED_LINEAR_MATRIX_MULTIPLY takes FLOAT32 only")
    got = got.reshape(expected.shape)
    if expected.dtype.kind == "f":
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-6)
    else:
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_the_suite_runs_them_through_the_onnx_table(shared_dir):
    from dmlcli.suite import run_suite

    run = run_suite([ONNX_DIR], backend="cpu", jobs=1, keyword="Gemm or MatMul")
    assert len(run.results) == 22
    skipped = [r for r in run.results if not r.passed]
    assert all("FLOAT16 for AScaleTensor" in r.message for r in skipped) and len(skipped) == 3


@pytest.mark.parametrize("a_shape, b_shape, broadcast_b", [
    ((16, 1, 128), (1, 128, 24), False),  # B's batch of 1: one product of A's 16 rows
    ((2, 3, 4, 5), (2, 3, 5, 6), True),  # B broadcast to A's batch by zero Strides (the ONNX adapter's)
    ((2, 3, 4, 5), (2, 3, 5, 6), False),  # B's own batches: batch by batch
    ((1, 4, 5), (3, 5, 6), False),  # A's batch of 1 against B's 3: not a shared B
])
def test_gemm_product_of_a_batch_by_a_shared_matrix_keeps_each_dot_product(a_shape, b_shape, broadcast_b):
    # A batch of A by one matrix B runs as one product of A's stacked rows on NumPy: the same Sizes as NumPy's
    # matmul, each element the same dot product (within the sum bound of its K terms).
    from dmlcli.operators.matmul.entries import _product

    rng = np.random.default_rng(5)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    if broadcast_b:
        b = np.broadcast_to(b[(0,) * (b.ndim - 2)], b_shape)
    got = _product(np, a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape and got.dtype == np.float32
    bound = a_shape[-1] * 2.0**-24 * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert np.all(np.abs(got - want) <= bound)
