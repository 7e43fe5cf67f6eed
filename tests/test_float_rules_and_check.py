"""--float-rules (IEEE-754 or Direct3D's) and --check within an operator's tolerance."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.checking.comparison import compare, parse_tolerance, rule_for, ulp_distance

SUBNORMAL = np.float32(1e-40)
PAYLOAD_NAN = np.array([0x7FC00123], np.uint32).view(np.float32)[0]


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


# ---------------------------------------------------------------- float rules


def test_ieee_keeps_subnormals_and_d3d_flushes_them_in_and_out():
    a = np.array([SUBNORMAL, -SUBNORMAL, 1.0, np.float32(2e-38)], np.float32)
    b = np.array([0.0, 0.0, 1e-45, np.float32(-1.9e-38)], np.float32)
    ieee = dmlcli.run("add", a, b)
    assert ieee.tolist() == [float(SUBNORMAL), float(-SUBNORMAL), 1.0, float(np.float32(2e-38) + np.float32(-1.9e-38))]
    d3d = dmlcli.run("add", a, b, float_rules="d3d")
    # Subnormal inputs count as zero of their sign (-0 + +0 is +0), 1 + 1e-45 is 1, and a subnormal sum
    # (2e-38 - 1.9e-38) becomes zero too.
    assert d3d.view(np.uint32).tolist() == [0, 0, np.float32(1.0).view(np.uint32), 0]
    negative = dmlcli.run("multiply", np.array([-SUBNORMAL], np.float32), np.array([1.0], np.float32), float_rules="d3d")
    assert negative.view(np.uint32).tolist() == [0x80000000]


def test_d3d_comparisons_see_subnormals_as_zero():
    a = np.array([SUBNORMAL, -SUBNORMAL], np.float32)
    zero = np.zeros(2, np.float32)
    assert dmlcli.run("logical_equals", a, zero).tolist() == [0, 0]
    assert dmlcli.run("logical_equals", a, zero, float_rules="d3d").tolist() == [1, 1]


def test_d3d_nans_lose_their_payload_and_bitwise_operators_are_untouched():
    x = np.array([PAYLOAD_NAN, SUBNORMAL], np.float32)
    assert dmlcli.run("sqrt", x[:1], float_rules="d3d").view(np.uint32).tolist() == [0x7FC00000]
    # BIT_* work on bit patterns: the rules do not apply, the subnormal's bits stay.
    assert dmlcli.run("bit_not", x, float_rules="d3d").tobytes() == dmlcli.run("bit_not", x).tobytes()
    # IF copies bits too.
    chosen = dmlcli.run("if", np.array([1, 1], np.uint8), x, x, float_rules="d3d")
    assert chosen.tobytes() == x.tobytes()


def test_float_rules_on_the_command_line_and_streamed(tmp_path):
    np.save(tmp_path / "a.npy", np.array([SUBNORMAL, 2.0], np.float32))
    np.save(tmp_path / "b.npy", np.array([1.0, 3.0], np.float32))
    result = invoke("run", "multiply", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--float-rules", "d3d",
                    "-o", str(tmp_path / "out.npy"))
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "out.npy").tolist() == [0.0, 6.0]
    shown = invoke("run", "multiply", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--format", "json")
    assert json.loads(shown.stdout)["data"][0] != 0.0
    bad = invoke("run", "add", "[1]", "[2]", "--dtype", "float32", "--float-rules", "hlsl")
    assert bad.exit_code == 2 and "'hlsl' is not one of 'ieee', 'd3d'" in bad.stderr


# ---------------------------------------------------------------- tolerance


def test_ulp_distance_counts_representable_values_and_ignores_the_sign_of_zero():
    a = np.array([1.0, 0.0, -0.0, 1.0, -1e-45], np.float32)
    b = np.array([np.nextafter(np.float32(1), np.float32(2)), -0.0, 0.0, np.float32(1.0000005), 1e-45], np.float32)
    assert ulp_distance(a, b).tolist() == [1, 0, 0, 4, 2]


def test_rules_come_from_the_table():
    exp, add = dmlcli.find_operator("exp"), dmlcli.find_operator("add")
    assert rule_for(exp, np.float32).kind == "ulp" and rule_for(exp, np.float32).limit == 32
    assert rule_for(exp, np.float16).limit == 1
    assert rule_for(add, np.int32).kind == "exact"  # integer outputs: always exact
    assert rule_for(dmlcli.find_operator("bit_xor"), np.float32).kind == "exact"
    assert rule_for(exp, np.float32, parse_tolerance("atol:0.5")).limit == 0.5
    add1 = dmlcli.find_operator("add1")
    elu = dmlcli.find_operator("activation_elu")
    assert rule_for(add1, np.float32, parameters={"FusedActivation": (elu, {})}).limit == elu.tolerance.float32
    with pytest.raises(dmlcli.InputError, match="expected ulp:N"):
        parse_tolerance("ulps:3")


def test_compare_within_tolerance_reports_counts_and_largest_errors():
    want = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    near = np.array([np.float32(1.0000001), 2.0, np.nan, np.inf], np.float32)
    report, same = compare(near, want, parse_tolerance("ulp:1"))
    assert same and report.startswith("PASSED: all 4 elements match within 1 ULP; largest error 1 ULP")
    far = np.array([1.5, 2.0, 0.0, np.inf], np.float32)
    report, same = compare(far, want, parse_tolerance("ulp:1"))
    assert not same
    assert report.splitlines()[0].startswith("FAILED: 2 of 4 elements are not within 1 ULP (50%)")
    assert "at [0]: got 1.5" in report and "at [2]: got 0" in report
    # A NaN never matches a number, however close its bits.
    report, same = compare(np.array([np.nan], np.float32), np.array([np.inf], np.float32), parse_tolerance("ulp:1e9"))
    assert not same


def test_check_uses_the_operators_tolerance_and_the_override():
    expected = json.dumps({"dtype": "float32", "data": [float(np.float32(np.exp(np.float32(1.0)))) * (1 + 1e-7)]})
    close = invoke("run", "exp", "[1]", "--dtype", "float32", "--check", expected)
    assert close.exit_code == 0 and close.stdout.startswith("PASSED: all 1 elements match within 32 ULP")
    exact = invoke("run", "exp", "[1]", "--dtype", "float32", "--check", expected, "--tolerance", "exact")
    assert exact.exit_code == 1 and exact.stdout.startswith("FAILED: 1 of 1 elements differ")
    loose = invoke("run", "exp", "[1]", "--dtype", "float32", "--check", "[2.7]", "--tolerance", "atol:0.1")
    assert loose.exit_code == 0
    wrong = invoke("run", "exp", "[1]", "--dtype", "float32", "--check", "[2.7]", "--tolerance", "ulp:x")
    assert wrong.exit_code == 2 and "--tolerance 'ulp:x': expected ulp:N" in wrong.stderr


def test_describe_and_validate_show_the_class_and_tolerance():
    described = invoke("describe", "exp")
    assert "Result: approximate for float outputs, checked within 32 ULP (FLOAT32), 1 ULP (FLOAT16)" in described.stdout
    validated = invoke("validate", "add", "[1]", "[2]", "--dtype", "float32")
    assert "result: one rounding for float outputs, checked within 1 ULP" in validated.stdout
    assert "The bare name identity means DML_OPERATOR_ELEMENT_WISE_IDENTITY" in invoke("describe", "activation_identity").stdout
