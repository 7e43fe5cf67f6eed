"""Tolerances that mean what users expect (issue 21): ULP or an absolute floor, and --check's kinds of difference.

The central test computes every approximate operator (and the composite ones) the way a GPU
computes it, in FLOAT32 and in FLOAT16 arithmetic, each step rounded to the type, over a wide range that
takes in the underflow and every root; that result must pass `--check` at the operator's default
tolerance, and the same result moved by 4 times the tolerance must fail.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli import operators as table
from dmlcli.cli import cli
from dmlcli.checking.comparison import (BY_BOUND, BY_FLOOR, D3D_ACCEPTS, IDENTICAL, NAN_VS_NUMBER, OUT, SUBNORMAL_OR_ZERO_SIGN, WITHIN,
                               EVERY_BIT, Rule, compare_arrays, parse_tolerance, rule_for)
from dmlcli.operators.table.schema import APPROXIMATE, COMPOSITE, Tolerance, smallest_normal

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


# ---------------------------------------------------------------- the formulas, as a GPU computes them


def _erf(x: np.ndarray) -> np.ndarray:
    """erf rounded to x's type (a device's erf at its best: correctly rounded)."""
    return np.array([math.erf(float(v)) for v in x.ravel()]).reshape(x.shape).astype(x.dtype)


def _k(dtype, value) -> np.generic:
    """A constant of the shader, in the type it computes in."""
    return dtype.type(value)


def _device(name: str, inputs: list[np.ndarray], t: np.dtype) -> np.ndarray:
    """The operator's formula in `t` arithmetic, each operation rounded to `t` (NumPy's float16 ufuncs
    compute in float32 and round, as a half-precision shader's intrinsics do)."""
    x = inputs[0]
    one, half, zero = _k(t, 1), _k(t, 0.5), _k(t, 0)
    formulas = {
        "activation_elu": lambda: np.where(x >= 0, x, _k(t, 1.0) * (np.exp(x) - one)),
        "activation_celu": lambda: np.maximum(zero, x) + np.minimum(zero, _k(t, 1.0) * (np.exp(x / one) - one)),
        "activation_scaled_elu": lambda: np.where(x > 0, _k(t, 1.0507) * x,
                                                  _k(t, 1.0507) * (_k(t, 1.6732) * np.exp(x) - _k(t, 1.6732))),
        "activation_gelu": lambda: half * x * (one + _erf(x / _k(t, math.sqrt(2)))),
        "activation_sigmoid": lambda: one / (one + np.exp(-x)),
        "activation_swish": lambda: x / (one + np.exp(-x)),
        "activation_softplus": lambda: np.log(one + np.exp(x)),
        "activation_parametric_softplus": lambda: one * np.log(one + np.exp(one * x)),
        "activation_scaled_tanh": lambda: one * np.tanh(half * x),
        "activation_tanh": lambda: np.tanh(x),
        "activation_hard_swish": lambda: x * np.maximum(zero, np.minimum(_k(t, np.float32(1) / np.float32(6)) * x
                                                                          + half, one)),
        "activation_hard_sigmoid": lambda: np.maximum(zero, np.minimum(_k(t, np.float32(0.2)) * x + half, one)),
        "activation_linear": lambda: one * x + zero,
        "activation_softsign": lambda: x / (one + np.abs(x)),
        "mean": lambda: (inputs[0] + inputs[1]) * half,
        "difference_square": lambda: (inputs[0] - inputs[1]) * (inputs[0] - inputs[1]),
        "modulus_truncate": lambda: np.fmod(inputs[0], inputs[1]),
        "acos": lambda: np.arccos(x), "asin": lambda: np.arcsin(x), "atan": lambda: np.arctan(x),
        "atan_yx": lambda: np.arctan2(inputs[0], inputs[1]),
        "cos": lambda: np.cos(x), "sin": lambda: np.sin(x), "tan": lambda: np.tan(x),
        "exp": lambda: np.exp(x), "log": lambda: np.log(x), "erf": lambda: _erf(x),
        "sinh": lambda: (np.exp(x) - np.exp(-x)) / _k(t, 2), "cosh": lambda: (np.exp(x) + np.exp(-x)) / _k(t, 2),
        "tanh": lambda: np.tanh(x), "asinh": lambda: np.arcsinh(x), "acosh": lambda: np.arccosh(x),
        "atanh": lambda: np.arctanh(x),
        "pow": lambda: np.power(inputs[0], inputs[1]),
        "constant_pow": lambda: np.power(x, _k(t, 3.0)),
    }
    with np.errstate(all="ignore"):
        return np.asarray(formulas[name](), t)


# (FLOAT32 range, FLOAT16 range) of the first input: wide, through the underflow and every root, short of the
# overflow of an intermediate (exp(x) in sinh, log(1 + exp(x)), ...), which no tolerance is about.
RANGES = {
    "activation_elu": ((-20, 10), (-20, 10)), "activation_celu": ((-20, 10), (-20, 10)),
    "activation_scaled_elu": ((-20, 10), (-20, 10)), "activation_gelu": ((-12, 12), (-12, 12)),
    "activation_sigmoid": ((-110, 30), (-17, 11)), "activation_swish": ((-110, 30), (-17, 11)),
    "activation_softplus": ((-110, 80), (-17, 10)), "activation_parametric_softplus": ((-110, 80), (-17, 10)),
    "activation_scaled_tanh": ((-20, 20), (-20, 20)), "activation_tanh": ((-20, 20), (-20, 20)),
    "activation_hard_swish": ((-8, 8), (-8, 8)), "activation_hard_sigmoid": ((-8, 8), (-8, 8)),
    "activation_linear": ((-1e30, 1e30), (-6e4, 6e4)), "activation_softsign": ((-1e30, 1e30), (-6e4, 6e4)),
    "mean": ((-1e30, 1e30), (-3e4, 3e4)), "difference_square": ((-1e18, 1e18), (-120, 120)),
    "modulus_truncate": ((-1e6, 1e6), (-1000, 1000)),
    "acos": ((-1, 1), (-1, 1)), "asin": ((-1, 1), (-1, 1)), "atan": ((-1e4, 1e4), (-1e4, 1e4)),
    "atan_yx": ((-10, 10), (-10, 10)), "cos": ((-100, 100), (-100, 100)), "sin": ((-100, 100), (-100, 100)),
    "tan": ((-1.5, 1.5), (-1.5, 1.5)), "exp": ((-110, 88), (-17, 11)), "log": ((0, 3e38), (0, 6e4)),
    "erf": ((-6, 6), (-6, 6)), "sinh": ((-88, 88), (-11, 11)), "cosh": ((-88, 88), (-11, 11)),
    "tanh": ((-20, 20), (-20, 20)), "asinh": ((-6e4, 6e4), (-6e4, 6e4)), "acosh": ((1, 6e4), (1, 6e4)),
    "atanh": ((-1, 1), (-1, 1)), "pow": ((0, 30), (0, 8)), "constant_pow": ((-40, 40), (-30, 30)),
}
# Roots and edges each operator's grid must hold densely: GELU, SWISH, ELU, ... at 0, HARD_SWISH at -3,
# LOG and ACOSH at 1, ACOS at 1.
ROOTS = {"activation_hard_swish": (-3.0,), "activation_hard_sigmoid": (-2.5, 2.5), "log": (1.0,), "acosh": (1.0,), "acos": (1.0,), "cos": (math.pi / 2,)}
PARAMETERS = {"constant_pow": {"exponent": 3.0}}
CHECKED = sorted(RANGES)


def _first_input(name: str, t: np.dtype) -> np.ndarray:
    low, high = RANGES[name][t == F16]
    tiny = float(np.finfo(t).smallest_subnormal)
    points = [np.linspace(low, high, 4001), [0.0, -0.0]]
    for root in ROOTS.get(name, (0.0,)):
        points.append(root + np.linspace(-0.02, 0.02, 801))
        magnitudes = np.geomspace(tiny, 1.0, 300)  # from the smallest subnormal up: underflow of x itself
        points += [root + magnitudes, root - magnitudes]
    x = np.concatenate(points)
    return np.clip(x, low, high).astype(t)


def _inputs(name: str, t: np.dtype) -> list[np.ndarray]:
    x = _first_input(name, t)
    if name == "atan_yx":  # y against a reversed x: every quadrant, y = 0 and x = 0 included
        return [x, x[::-1].copy()]
    if name in ("mean", "difference_square"):  # b near a (cancellation) and near -a
        return [x, np.concatenate([x[: x.size // 2] * _k(t, 1.001), -x[x.size // 2:]])]
    if name == "modulus_truncate":
        return [x, np.resize(np.array([3.0, -7.5, 0.1, 1e-3], t), x.shape)]
    if name == "pow":  # exponents through 0, small bases by large exponents (underflow) and the reverse
        low, high = (-20, 20) if t == F32 else (-4, 4)
        return [x, np.resize(np.linspace(low, high, 37), x.shape).astype(t)]
    return [x]


def _checked(name: str, t: np.dtype):
    inputs = _inputs(name, t)
    reference = dmlcli.run(name, *inputs, **PARAMETERS.get(name, {}))
    return reference, _device(name, inputs, t), rule_for(dmlcli.find_operator(name), t)


def test_the_test_covers_every_approximate_operator():
    # The element-wise ones: a shaped operator's tolerance grows with its call (tests/test_ops_reduction.py).
    approximate = {op.cli_name for op in table.ELEMENTWISE_OPERATORS if op.exactness == APPROXIMATE}
    assert approximate <= set(CHECKED), sorted(approximate - set(CHECKED))
    # and every composite one with float results (MODULUS_FLOOR's formula is MODULUS_TRUNCATE's plus a fix-up)
    composite = {op.cli_name for op in table.ELEMENTWISE_OPERATORS
                 if op.exactness == COMPOSITE and "quantiz" not in op.cli_name}
    assert composite - {"modulus_floor"} <= set(CHECKED), sorted(composite - set(CHECKED))


@pytest.mark.parametrize("t", [F32, F16], ids=["FLOAT32", "FLOAT16"])
@pytest.mark.parametrize("name", CHECKED)
def test_a_device_computing_the_formula_in_the_type_passes_and_4x_the_tolerance_fails(name, t):
    reference, device, rule = _checked(name, t)
    comparison = compare_arrays(reference, device, rule)
    assert comparison.passed, f"{name} {t}: {comparison.text()}"
    # Moved away by 4 times the tolerance (both measures, the larger), every finite element fails. Where that
    # is less than an ULP of the value (FLOAT16 LOG past 2: 1/1024 absolute is below its ULP), by one ULP, the
    # least a result can differ by.
    finite = np.isfinite(device)
    with np.errstate(all="ignore"):
        ulp = np.spacing(np.abs(device)).astype(np.float64)
        allowed = rule.limit * ulp if rule.kind == "ulp" else np.full(device.shape, rule.limit)
        if rule.kind == "ulp":
            allowed = np.maximum(allowed, rule.floor)
        moved = (device.astype(np.float64) + np.maximum(4 * allowed, ulp)).astype(t)
    moved = np.where(finite, moved, device)
    perturbed = compare_arrays(reference, moved, rule)
    assert not perturbed.passed
    assert perturbed.kinds[OUT] + perturbed.kinds[NAN_VS_NUMBER] == np.count_nonzero(finite), perturbed.text()


def test_the_issues_gelu_passes_on_the_command_line(tmp_path):
    """The report's case: erf in FLOAT32, then 0.5*x*(1+erf), on linspace(-8, 8, 12) failed 4 of 12 elements."""
    x = np.linspace(-8, 8, 12).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "gpu.npy", _device("activation_gelu", [x], F32))
    report = tmp_path / "r.json"
    result = invoke("run", "activation_gelu", tmp_path / "x.npy", "--check", tmp_path / "gpu.npy", "--report", report)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("PASSED: all 12 elements match within 18 ULP or 1.79e-07 absolute")
    document = json.loads(report.read_text())
    kinds = document["difference_kinds"]
    assert kinds[IDENTICAL] + kinds[WITHIN] + kinds[SUBNORMAL_OR_ZERO_SIGN] == 12 and kinds[BY_FLOOR] >= 1
    assert document["max_ulp"] <= 18 and "by the absolute floor alone)" in result.stdout
    assert document["tolerance"]["atol_floor"] == 3 * 2.0 ** -24 and "erf" in document["tolerance"]["floor_source"]
    # The ULP alone, as before, still fails it: the floor is what passes it.
    alone = invoke("run", "activation_gelu", tmp_path / "x.npy", "--check", tmp_path / "gpu.npy",
                   "--tolerance", "ulp:18")
    assert alone.exit_code == 1 and alone.stdout.startswith("FAILED: ") and "out of tolerance" in alone.stdout
    both = invoke("run", "activation_gelu", tmp_path / "x.npy", "--check", tmp_path / "gpu.npy",
                  "--tolerance", "ulp:18,atol:1e-7")
    assert both.exit_code == 0 and both.stdout.startswith("PASSED: all 12 elements match within 18 ULP or 1e-07 absolute")


# ---------------------------------------------------------------- --tolerance spellings


def test_tolerance_takes_ulp_and_atol_together_and_each_alone_means_one():
    both = parse_tolerance("ulp:4,atol:1e-6")
    assert (both.kind, both.limit, both.floor) == ("ulp", 4, 1e-6)
    assert both.describe() == "within 4 ULP or 1e-06 absolute"
    assert parse_tolerance(" ATOL:1e-6 , ulp:4 ").floor == 1e-6
    alone = parse_tolerance("ulp:4")
    assert (alone.kind, alone.floor) == ("ulp", 0.0) and alone.describe() == "within 4 ULP"
    assert parse_tolerance("atol:0.5").describe() == "within 0.5 absolute"
    for wrong in ("ulp:1,ulp:2", "exact,ulp:1", "ulp:1,", "ulp:1,atol:-1", "ulp:1;atol:2"):
        with pytest.raises(dmlcli.InputError, match="ulp:N,atol:X"):
            parse_tolerance(wrong)
    rejected = invoke("run", "exp", "[1]", "--dtype", "float32", "--check", "[2.7]", "--tolerance", "ulp:1,ulp:2")
    assert rejected.exit_code == 2 and "--tolerance 'ulp:1,ulp:2'" in rejected.stderr


def test_either_measure_passes_an_element():
    want = np.array([1.0, 1e-6], np.float32)
    got = np.array([np.nextafter(np.float32(1), np.float32(2)), 1.5e-6], np.float32)
    assert not compare_arrays(got, want, parse_tolerance("ulp:1")).passed  # 1e-6 off by 0.5e-6: ~4e6 ULP
    assert not compare_arrays(got, want, parse_tolerance("atol:1e-7")).passed  # 1 ULP of 1 is 1.2e-7
    both = compare_arrays(got, want, parse_tolerance("ulp:1,atol:1e-6"))
    assert both.passed and both.kinds[WITHIN] == 2 and both.kinds[BY_FLOOR] == 1
    # The largest ULP leaves out the element the floor alone passes: the ULP of a value near 0 means nothing.
    assert both.max_ulp == 1 and both.text().startswith("PASSED: all 2 elements match within 1 ULP or 1e-06 "
                                                         "absolute; largest error 1 ULP, 5e-07 absolute")
    assert "2 within tolerance (1 by the absolute floor alone)" in both.text()


# ---------------------------------------------------------------- the kinds of difference


def test_kinds_are_told_apart_and_only_nan_and_out_of_tolerance_fail():
    sub = np.float32(1e-40)
    got = np.array([1.0, 1.0, sub, -sub, 0.0, 1.0, 5.0], np.float32)
    want = np.array([1.0, np.nextafter(np.float32(1), np.float32(2)), 0.0, 0.0, -0.0, np.nan, 1.0], np.float32)
    comparison = compare_arrays(got, want, parse_tolerance("ulp:1"))
    assert comparison.kinds == {IDENTICAL: 1, WITHIN: 1, SUBNORMAL_OR_ZERO_SIGN: 3, NAN_VS_NUMBER: 1, OUT: 1,
                                D3D_ACCEPTS: 1, BY_FLOOR: 0, BY_BOUND: 0}
    assert comparison.mismatches == 2 and not comparison.passed
    text = comparison.text()
    assert text.splitlines()[0].startswith("FAILED: 2 of 7 elements are not within 1 ULP (28.6%)")
    assert ("1 identical, 1 within tolerance, 3 only by a flushed subnormal or the sign of a zero "
            "(--float-rules d3d gives 1 of them), 1 NaN against a number, 1 out of tolerance") in text
    assert "(NaN against a number)" in text
    # The largest error leaves the flushes out: it is the out-of-tolerance 5 against 1, and the NaN's inf.
    assert comparison.max_abs == math.inf
    without_nan = compare_arrays(got[:5], want[:5], parse_tolerance("ulp:1"))
    assert without_nan.passed and without_nan.max_ulp == 1 and "largest error 1 ULP" in without_nan.text()
    assert "--float-rules d3d gives 1 of them" in without_nan.text()


def test_d3d_gives_a_flush_to_a_zero_of_the_same_sign_in_float32_only():
    sub16 = np.float16(6e-8)
    half = compare_arrays(np.array([sub16], np.float16), np.array([0.0], np.float16), parse_tolerance("ulp:1"))
    assert half.passed and half.kinds[SUBNORMAL_OR_ZERO_SIGN] == 1 and half.kinds[D3D_ACCEPTS] == 0
    assert "--float-rules d3d gives none of them" in half.text()
    bits = compare_arrays(np.array([1e-40], np.float32), np.array([0.0], np.float32), d3d_flushes=False)
    assert bits.passed and bits.kinds[D3D_ACCEPTS] == 0 and "--float-rules d3d gives none of them" in bits.text()
    every = compare_arrays(np.array([1e-40], np.float32), np.array([0.0], np.float32), EVERY_BIT, d3d_flushes=False)
    assert not every.passed and every.kinds[D3D_ACCEPTS] == 0


def test_bit_for_bit_passes_a_flush_and_names_it_and_every_bit_fails_it():
    """An exact operator whose result differs from the expected one only by flushed subnormals passes (issue 21:
    exit 1 only for a NaN against a number or an element out of tolerance), the verdict saying how many and
    that --float-rules d3d gives them; --tolerance bits demands every bit and fails it."""
    args = ("run", "activation_relu", "[1e-40, 2]", "--dtype", "float32", "--check", "[0, 2]")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == ("PASSED: all 2 elements match bit for bit except 1 only by a flushed "
                                     "subnormal or the sign of a zero (--float-rules d3d gives them)")
    every = invoke(*args, "--tolerance", "bits")
    assert every.exit_code == 1
    assert every.stdout.startswith("FAILED: 1 of 2 elements differ (50%)")
    assert ("1 identical, 1 only by a flushed subnormal or the sign of a zero (--float-rules d3d gives them, which "
            "--tolerance bits does not accept)") in every.stdout
    assert "(only a flushed subnormal or the sign of a zero)" in every.stdout
    d3d = invoke(*args, "--float-rules", "d3d", "--tolerance", "bits")
    assert d3d.exit_code == 0 and d3d.stdout.strip() == "PASSED: all 2 elements match every bit", d3d.output


def test_exit_codes_by_kind_on_the_command_line(tmp_path):
    within = invoke("run", "add", "[1e-40, 1, 0]", "[0, 0, -0.0]", "--dtype", "float32", "--check", "[0, 1, -0.0]")
    assert within.exit_code == 0 and "2 only by a flushed subnormal or the sign of a zero" in within.stdout
    nan = invoke("run", "add", "[1]", "[0]", "--dtype", "float32", "--check", '["nan"]')
    assert nan.exit_code == 1 and "1 NaN against a number" in nan.stdout
    report = tmp_path / "r.json"
    out = invoke("run", "add", "[1, 1e-40]", "[0, 0]", "--dtype", "float32", "--check", "[2, 0]", "--report", report)
    assert out.exit_code == 1
    document = json.loads(report.read_text())
    assert document["difference_kinds"] == {IDENTICAL: 0, WITHIN: 0, SUBNORMAL_OR_ZERO_SIGN: 1, NAN_VS_NUMBER: 0,
                                            OUT: 1, D3D_ACCEPTS: 1, BY_FLOOR: 0, BY_BOUND: 0}
    assert document["mismatches"] == 1 and document["first_differences"][0]["kind"] == OUT
    assert document["tolerance"]["atol_floor"] == smallest_normal("float32")



def test_exact_check_with_flushed_outputs_reports_them_and_passes(tmp_path):
    """ADD is exact (one rounding): a device that flushes subnormals gives zeros where the expected tensor
    holds them, and a zero's sign may differ. --check passes (exit 0) and the report counts them; under
    --tolerance bits they fail, the report saying every_bit and listing each; NaN against a number fails."""
    args = ("run", "add", "[1e-40, -1e-40, 0, 2]", "[0, 0, 0, 1]", "--dtype", "float32",
            "--check", "[0, -0.0, -0.0, 3]", "--tolerance", "exact", "--report")
    report = tmp_path / "exact.json"
    passed = invoke(*args, report)
    assert passed.exit_code == 0, passed.output
    assert passed.stdout.strip() == ("PASSED: all 4 elements match bit for bit except 3 only by a flushed subnormal "
                                     "or the sign of a zero (--float-rules d3d gives 2 of them)")
    document = json.loads(report.read_text())
    assert document["verdict"] == "PASSED" and document["mismatches"] == 0 and document["first_differences"] == []
    assert document["difference_kinds"] == {IDENTICAL: 1, WITHIN: 0, SUBNORMAL_OR_ZERO_SIGN: 3, NAN_VS_NUMBER: 0,
                                            OUT: 0, D3D_ACCEPTS: 2, BY_FLOOR: 0, BY_BOUND: 0}
    assert document["tolerance"]["kind"] == "exact" and document["tolerance"]["every_bit"] is False
    every = tmp_path / "every.json"
    failed = invoke(*args[:-3], "--tolerance", "bits", "--report", every)
    assert failed.exit_code == 1 and failed.stdout.startswith("FAILED: 3 of 4 elements differ (75%)")
    document = json.loads(every.read_text())
    assert document["verdict"] == "FAILED" and document["mismatches"] == 3
    assert document["tolerance"]["every_bit"] is True and document["tolerance"]["text"] == "every bit"
    assert [d["kind"] for d in document["first_differences"]] == [SUBNORMAL_OR_ZERO_SIGN] * 3
    nan = invoke("run", "add", "[1e-40, 1]", "[0, 0]", "--dtype", "float32", "--check", '[0, "nan"]',
                 "--tolerance", "exact")
    assert nan.exit_code == 1 and nan.stdout.startswith("FAILED: 1 of 2 elements differ (50%)")
    assert ("1 only by a flushed subnormal or the sign of a zero (--float-rules d3d gives them), 1 NaN against a "
            "number") in nan.stdout and "(NaN against a number)" in nan.stdout


def test_a_streamed_exact_check_passes_a_flush_too(tmp_path):
    """.npy in, .npy out, .npy expected: the file-by-file comparison applies the same rule."""
    np.save(tmp_path / "a.npy", np.float32([1e-40, 2.0]))
    np.save(tmp_path / "e.npy", np.float32([0.0, 2.0]))
    args = ("run", "activation_relu", tmp_path / "a.npy", "-o", tmp_path / "out.npy", "--check", tmp_path / "e.npy")
    assert invoke(*args).exit_code == 0
    assert invoke(*args, "--tolerance", "bits").exit_code == 1


def test_bits_is_a_tolerance_spelling():
    assert parse_tolerance(" BITS ") is EVERY_BIT and EVERY_BIT.kind == "exact" and EVERY_BIT.every_bit
    assert parse_tolerance("exact").every_bit is False
    with pytest.raises(dmlcli.InputError, match="exact, or bits"):
        parse_tolerance("bit")
    refused = invoke("run", "add", "[1]", "[1]", "--dtype", "float32", "--check", "[2]", "--tolerance", "every")
    assert refused.exit_code == 2 and "exact, or bits" in refused.output

def test_a_shape_mismatch_has_no_kinds():
    comparison = compare_arrays(np.zeros(2, np.float32), np.zeros(3, np.float32), parse_tolerance("ulp:1"))
    assert comparison.to_json()["difference_kinds"] is None and comparison.text().startswith("FAILED: result shape")


# ---------------------------------------------------------------- the table's tolerances


def test_four_argument_tolerances_get_the_smallest_normal_as_their_floor():
    plain = Tolerance("ulp", 2, 2, "a helper's entry")
    assert plain.floor_for("float32") == float(np.finfo(np.float32).smallest_normal)
    assert plain.floor_for("float16") == float(np.finfo(np.float16).smallest_normal)
    assert "smallest normal" in plain.floor_reason and "smallest normal" in plain.describe()
    absolute = Tolerance("atol", 1 / 1024, 1 / 512, "WebNN")
    assert absolute.floor_for("float32") == 0.0 and absolute.floor_reason is None
    own = Tolerance("ulp", 18, 18, "x", floor_float32=1e-7, floor_float16=1e-3, floor_source="why")
    assert (own.floor_for("float32"), own.floor_for("float16")) == (1e-7, 1e-3)
    rule = rule_for(dmlcli.find_operator("activation_gelu"), np.float16)
    assert (rule.kind, rule.limit, rule.floor) == ("ulp", 18, 3 * 2.0 ** -11) and "erf" in rule.floor_source


@pytest.mark.parametrize("tolerance, why", [
    (Tolerance("ulp", 1, 1, "s", floor_float32=1e-7), "without floor_source"),
    (Tolerance("atol", 1, 1, "s", floor_float32=1e-7, floor_source="why"), "'ulp' tolerance only"),
    (Tolerance("ulp", 1, 1, "s", floor_float16=-1.0, floor_source="why"), "finite number >= 0"),
    (Tolerance("ulp", 1, 1, "s", floor_float32=math.inf, floor_source="why"), "finite number >= 0"),
])
def test_the_table_checks_its_floors(tolerance, why):
    from dmlcli.records import replace

    add = dmlcli.find_operator("add")
    with pytest.raises(ValueError, match=why):
        replace(add, tolerance=tolerance)


def test_every_rounding_operator_has_a_floor_with_a_reason():
    for op in table.OPERATORS:
        if op.tolerance is None or op.tolerance.kind != "ulp":
            continue
        for t in ("float32", "float16"):
            assert 0 < op.tolerance.floor_for(t) < 0.01, (op.name, t)
        assert op.tolerance.floor_reason, op.name


def test_describe_shows_the_floor_in_text_and_json():
    text = invoke("describe", "activation_gelu")
    assert "18 ULP, or an absolute difference up to 1.79e-07 (FLOAT32), 0.00146 (FLOAT16): 1 + erf" in text.stdout
    details = json.loads(invoke("describe", "activation_gelu", "--format", "json").stdout)["tolerance"]
    assert details["kind"] == "ulp" and details["float32"] == 18 and details["source"]
    assert details["atol_floor"] == {"float32": 3 * 2.0 ** -24, "float16": 3 * 2.0 ** -11}
    assert details["floor_source"].startswith("1 + erf")
    tanh = json.loads(invoke("describe", "activation_tanh", "--format", "json").stdout)["tolerance"]
    assert tanh["atol_floor"] is None and tanh["floor_source"] is None


def test_a_suite_case_without_a_tolerance_uses_the_operators_floor(tmp_path):
    from dmlcli.suite.runner import run_case

    x = np.linspace(-8, 8, 12).astype(np.float32)
    device = _device("activation_gelu", [x], F32)
    case = {"op": "activation_gelu", "inputs": [{"dtype": "float32", "data": x.tolist()}],
            "expected": {"dtype": "float32", "data": device.tolist()}}
    (tmp_path / "gelu.json").write_text(json.dumps(case))
    assert run_case(tmp_path / "gelu.json").passed
    case["tolerance"] = {"ulp": 18}  # the case's own tolerance: ULP alone, as written
    (tmp_path / "gelu.json").write_text(json.dumps(case))
    assert not run_case(tmp_path / "gelu.json").passed
    case["tolerance"] = {"ulp": 18, "atol": 1e-7}  # both, either holding
    (tmp_path / "gelu.json").write_text(json.dumps(case))
    assert run_case(tmp_path / "gelu.json").passed


def test_rule_objects_stay_comparable_and_describe_themselves():
    assert Rule("ulp", 2) == Rule("ulp", 2, floor=0.0) and Rule("ulp", 2).describe() == "within 2 ULP"
    assert Rule("ulp", 2, floor=1.5e-7).describe() == "within 2 ULP or 1.5e-07 absolute"
