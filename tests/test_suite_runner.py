"""`dmlcli test`: case files run as a suite (dmlcli/suite/), JUnit XML, the JSON report, --jobs, -k, -x,
--save-case and dmlcli.run_case."""

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

import dmlcli
from dmlcli.cli import cli
from dmlcli.errors import InputError
from dmlcli.suite import load_case, run_suite
from dmlcli.suite.case import CaseError, discover
from dmlcli.suite.parity import backends_agree
from dmlcli.suite.runner import run_loaded
from dmlcli.suite.select import Both, Either, Not, Word, evaluate, parse

from conftest import REPO, SHARED

XSD = REPO / "tests" / "data" / "junit.xsd"
CONFORMANCE = SHARED / "conformance"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def write(path: Path, document) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def u8(data):
    return {"dtype": "uint8", "data": data}


@pytest.fixture
def planted(tmp_path):
    """A suite with 4 passing cases, 3 failing, 2 malformed and 1 skipped."""
    root = tmp_path / "suite"
    write(root / "good.json", {"op": "bit_xor", "inputs": [u8([1, 2]), u8([3, 3])], "expected": u8([2, 1])})
    write(root / "wrong_value.json", {"op": "bit_xor", "inputs": [u8([1, 2]), u8([3, 3])], "expected": u8([2, 7])})
    write(root / "wrong_dtype.json", {"op": "bit_xor", "inputs": [u8([1, 2]), u8([3, 3])],
                                      "expected": {"dtype": "uint16", "data": [2, 1]}})
    write(root / "malformed.json", '{"op": "bit_xor", "inputs": [')
    write(root / "no_op.json", {"inputs": [u8([1])], "expected": u8([1])})
    write(root / "accepted.json", {"op": "bit_xor", "inputs": [u8([1]), u8([3])], "expect_error": 3})
    write(root / "refused.json", {"op": "bit_xor", "feature_level": "3_0", "expect_error": 3,
                                  "inputs": [{"dtype": "float32", "data": [1.5]}, {"dtype": "float32", "data": [2.5]}]})
    write(root / "tolerance.json", {"op": "add", "tolerance": {"rtol": 1e-3, "atol": 1e-7},
                                    "inputs": [{"dtype": "float32", "data": [1.0]}, {"dtype": "float32", "data": [2.0]}],
                                    "expected": {"dtype": "float32", "data": [3.0001]}})
    write(root / "skip.json", {"op": "bit_not", "skip": "not today", "inputs": [u8([1])], "expected": u8([254])})
    (root / "npy").mkdir()
    np.save(root / "npy" / "a.npy", np.arange(100, dtype=np.uint16))
    np.save(root / "npy" / "want.npy", np.arange(100, dtype=np.uint16) ^ np.uint16(7))
    write(root / "npy" / "case.json", {"op": "bit_xor", "broadcast": True,
                                       "inputs": ["a.npy", {"dtype": "uint16", "data": [7]}], "expected": "want.npy"})
    return root


VERDICTS = {"good": "passed", "wrong_value": "failed", "wrong_dtype": "failed", "malformed": "error",
            "no_op": "error", "accepted": "failed", "refused": "passed", "tolerance": "passed", "skip": "skipped",
            "npy/case": "passed"}


# ---------------------------------------------------------------- the shipped conformance vectors


def test_the_shared_conformance_folders_pass(shared_dir):
    result = invoke("test", shared_dir / "conformance", "--jobs", "1", "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1].startswith("323 passed, 0 failed, 0 errors, 0 skipped")


def test_discovery_finds_every_shared_case_in_file_order(shared_dir):
    found = discover([shared_dir / "conformance"])
    assert len(found) == 96 + 50 + 177
    assert [p for p, _ in found] == sorted(p for p, _ in found)
    assert found[0][1].count("/") == 1  # ids are paths below the folder given: numpy/numpy__...


def test_unsupported_elementwise_vectors_must_be_refused(shared_dir):
    case = load_case(shared_dir / "conformance" / "onnx_elementwise" / "onnx__test_pow_types_int64_int64.json")
    assert case.expect_error == 3 and case.expected is None


# ---------------------------------------------------------------- planted failures


def test_planted_failures_give_the_right_verdicts(planted):
    run = run_suite([planted], jobs=1)
    got = {r.case_id: r.verdict for r in run.results}
    assert got == VERDICTS
    assert run.counts() == {"passed": 4, "failed": 3, "error": 2, "skipped": 1}
    by_id = {r.case_id: r for r in run.results}
    assert "1 of 2 elements differ" in by_id["wrong_value"].message
    assert "at [1]: got 1 (0x01), expected 7 (0x07)" in by_id["wrong_value"].differences
    assert "dtype uint8 differs from expected dtype uint16" in by_id["wrong_dtype"].message
    assert "malformed.json" in by_id["malformed"].message and "malformed JSON" in by_id["malformed"].message
    assert '"op" must name the operator' in by_id["no_op"].message
    assert "accepted the call" in by_id["accepted"].message
    assert "exit code 3 as expected" in by_id["refused"].message


def test_planted_failures_on_the_command_line(planted, tmp_path):
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    result = invoke("test", planted, "--junit-xml", junit, "--report", report, "--jobs", "1")
    assert result.exit_code == 1
    out = result.stdout
    assert out.strip().splitlines()[-1].startswith("4 passed, 3 failed, 2 errors, 1 skipped in ")
    assert "FAILED wrong_value[cpu]" in out and "at [1]: got 1 (0x01), expected 7 (0x07)" in out
    assert "ERROR malformed[cpu]" in out and str(planted / "malformed.json") in out
    table = [line.split() for line in out.splitlines() if line.startswith(("bit_xor", "total"))]
    assert ["bit_xor", "3", "3", "0", "0"] in table and ["total", "4", "3", "2", "1"] in table
    document = json.loads(report.read_text())
    assert document["totals"]["passed"] == 4 and document["totals"]["error"] == 2
    assert set(document["versions"]) >= {"dmlcli", "numpy", "cupy"}
    assert document["versions"]["numpy"] == np.__version__
    assert {r["case_id"]: r["verdict"] for r in document["results"]} == VERDICTS
    assert_schema_valid(junit)


def assert_schema_valid(junit: Path):
    etree = pytest.importorskip("lxml.etree")
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    document = etree.parse(str(junit))
    assert schema.validate(document), schema.error_log
    return document


def test_junit_xml_has_a_suite_per_operator_and_a_case_per_case_and_backend(planted, tmp_path):
    junit = tmp_path / "junit.xml"
    assert invoke("test", planted, "--junit-xml", junit, "-q").exit_code == 1
    document = assert_schema_valid(junit)
    root = document.getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("10", "3", "2", "1")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"bit_xor", "add", "bit_not", "(unreadable)", "(no operator)"}
    xor = suites["bit_xor"]
    assert (xor.get("tests"), xor.get("failures")) == ("6", "3")
    case = next(c for c in xor.findall("testcase") if c.get("name") == "wrong_value[cpu]")
    assert case.get("classname") == "bit_xor" and case.get("file").endswith("wrong_value.json")
    assert float(case.get("time")) >= 0
    failure = case.find("failure")
    assert "1 of 2 elements differ" in failure.get("message") and "expected 7" in failure.text
    assert suites["(unreadable)"].find("testcase/error") is not None
    assert suites["bit_not"].find("testcase/skipped").get("message") == "not today"


def test_a_bad_junit_document_is_rejected_by_the_schema(tmp_path):
    """The schema test can fail: a testcase without a time, or a count that is not a number, is refused."""
    etree = pytest.importorskip("lxml.etree")
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    bad = etree.fromstring(b'<testsuites><testsuite name="a" tests="x" failures="0" errors="0" time="0" '
                           b'timestamp="2026-01-01T00:00:00" hostname="h"><testcase name="c" classname="a"/>'
                           b'</testsuite></testsuites>')
    assert not schema.validate(bad)


def _without_timings(document: dict) -> dict:
    for key in ("duration", "started", "jobs"):
        document.pop(key)
    for result in document["results"]:
        result.pop("time")
        result.pop("timings")
    return document


def test_jobs_2_gives_the_same_report_as_jobs_1(planted, tmp_path):
    for n in (1, 2):
        assert invoke("test", planted, "--jobs", n, "--report", tmp_path / f"r{n}.json", "-q").exit_code == 1
    one, two = (json.loads((tmp_path / f"r{n}.json").read_text()) for n in (1, 2))
    assert two["jobs"] == 2 and one["jobs"] == 1
    assert _without_timings(one) == _without_timings(two)


def test_jobs_2_on_the_shared_suite_matches_in_order(shared_dir):
    serial = run_suite([shared_dir / "conformance"], jobs=1, keyword="bit_and or add or pow")
    parallel = run_suite([shared_dir / "conformance"], jobs=2, keyword="bit_and or add or pow")
    strip = [(r.case_id, r.backend, r.verdict, r.message) for r in serial.results]
    assert strip == [(r.case_id, r.backend, r.verdict, r.message) for r in parallel.results]
    assert len(strip) > 30 and parallel.deselected == serial.deselected


@pytest.mark.parametrize("jobs", [1, 2])
def test_exitfirst_stops_after_the_first_failure_in_file_order(planted, jobs):
    run = run_suite([planted], jobs=jobs, stop_first=True)
    ids = [r.case_id for r in run.results]
    assert ids == ["accepted"]  # the first file in sorted order fails
    assert run.not_run == len(VERDICTS) - 1
    result = invoke("test", planted, "-x", "--jobs", jobs, "-q")
    assert result.exit_code == 1 and "not run (-x)" in result.stdout


# ---------------------------------------------------------------- case format


@pytest.mark.parametrize("document, reason", [
    ("[1, 2]", "a case is a JSON object"),
    ({"op": "bit_not", "inputs": [u8([1])], "expected": u8([254]), "tolerence": {"exact": True}}, "unknown key 'tolerence'"),
    ({"op": "bit_not", "inputs": {}, "expected": u8([254])}, "\"inputs\" must be a list"),
    ({"op": "bit_not", "inputs": [], "expected": u8([254])}, "BIT_NOT takes 1 input tensor"),
    ({"op": "bit_not", "inputs": [u8([1])]}, "no \"expected\" tensor"),
    ({"op": "bit_not", "inputs": ["missing.npy"], "expected": u8([254])}, "no such file"),
    ({"op": "bit_not", "inputs": [u8([1])], "expected": u8([254]), "tolerance": {"rtol": -1}}, "finite number >= 0"),
    ({"op": "bit_not", "inputs": [u8([1])], "expected": u8([254]), "tolerance": {"ulp": 1, "rtol": 1}}, "is not one of"),
    ({"op": "bit_not", "inputs": [u8([1])], "expect_error": 7}, "\"expect_error\" must be an exit code"),
    ({"op": "bit_not", "inputs": [u8([1])], "expected": u8([254]), "feature_level": "9_9"}, "\"feature_level\""),
    ({"op": "bit_not", "inputs": [{"dtype": "uint8", "data": [300]}], "expected": u8([254])}, "out of range"),
    ({"op": "bit_not", "inputs": ["a.json"], "expected": u8([254])}, "or a .npy file name"),
    ({"op": "no_such_op", "inputs": [u8([1])], "expected": u8([254])}, "no_such_op"),
    ({"op": "bit_not", "params": {"alpha": 0.5}, "inputs": [u8([1])], "expected": u8([254])}, "alpha"),
])
def test_a_malformed_case_is_an_error_of_that_case(tmp_path, document, reason):
    path = write(tmp_path / "case.json", document)
    result = dmlcli.run_case(path)
    assert result.verdict == "error" and not result.passed
    assert reason in result.message and "case.json" in result.message


def test_load_case_raises_case_error(tmp_path):
    with pytest.raises(CaseError, match="a case is a JSON object"):
        load_case(write(tmp_path / "x.json", "3"))


def test_settings_apply_to_cases_that_do_not_set_their_own(tmp_path):
    floats = [{"dtype": "float32", "data": [1.5]}, {"dtype": "float32", "data": [2.5]}]
    expected = {"dtype": "float32", "data": [0.0]}  # 0x3FC00000 & 0x40200000
    write(tmp_path / "plain.json", {"op": "bit_and", "inputs": floats, "expected": expected})
    write(tmp_path / "own.json", {"op": "bit_and", "inputs": floats, "expected": expected, "feature_level": "6_4"})
    assert run_suite([tmp_path], jobs=1).counts()["passed"] == 2
    at_3_0 = {r.case_id: r for r in run_suite([tmp_path], jobs=1, feature_level="3_0").results}
    assert at_3_0["plain"].verdict == "failed" and "refused the call" in at_3_0["plain"].message
    assert at_3_0["own"].verdict == "passed"
    assert invoke("test", tmp_path, "--feature-level", "3_0", "-q").exit_code == 1


def test_float_rules_setting_applies(tmp_path):
    subnormal = float(np.float32(1e-40))
    write(tmp_path / "c.json", {"op": "add", "inputs": [{"dtype": "float32", "data": [subnormal]},
                                                        {"dtype": "float32", "data": [0.0]}],
                                "expected": {"dtype": "float32", "data": [subnormal]}, "tolerance": {"exact": True}})
    assert dmlcli.run_case(tmp_path / "c.json").passed
    flushed = dmlcli.run_case(tmp_path / "c.json", float_rules="d3d")  # flushed to zero under d3d
    # Bit for bit, a flush alone passes, counted (issue 21); {"bits": true} demands every bit.
    assert flushed.passed and flushed.differences == ("PASSED: all 1 elements match bit for bit except 1 only by a "
                                                      "flushed subnormal or the sign of a zero (--float-rules d3d "
                                                      "gives them)")
    case = json.loads((tmp_path / "c.json").read_text())
    write(tmp_path / "c.json", {**case, "tolerance": {"bits": True}})
    every = dmlcli.run_case(tmp_path / "c.json", float_rules="d3d")
    assert not every.passed and "which --tolerance bits does not accept" in every.differences
    # Within ADD's own tolerance a flushed subnormal is no failure (ULP or the absolute floor; issue 21).
    write(tmp_path / "c.json", {"op": "add", "inputs": [{"dtype": "float32", "data": [subnormal]},
                                                        {"dtype": "float32", "data": [0.0]}],
                                "expected": {"dtype": "float32", "data": [subnormal]}})
    assert dmlcli.run_case(tmp_path / "c.json", float_rules="d3d").passed



def test_a_flushed_subnormal_passes_an_exact_case_and_reads_right_in_every_output(tmp_path):
    """A conformance vector whose expected value is a subnormal and whose result is a zero (a device that
    flushes, here --float-rules d3d) passes bit for bit, the kind counted in the case's differences, the
    summary, the JUnit file (no failure element) and the JSON report; a NaN against a number still fails."""
    subnormal = float(np.float32(1e-40))
    folder = tmp_path / "cases"
    folder.mkdir()
    write(folder / "flush.json", {"op": "add", "inputs": [{"dtype": "float32", "data": [subnormal, 1.0]},
                                                          {"dtype": "float32", "data": [0.0, 1.0]}],
                                  "expected": {"dtype": "float32", "data": [subnormal, 2.0]},
                                  "tolerance": {"exact": True}})
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    result = invoke("test", folder, "--float-rules", "d3d", "--junit-xml", junit, "--report", report)
    assert result.exit_code == 0, result.output
    assert "1 passed" in result.output and "FAILED" not in result.output
    root = assert_schema_valid(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("1", "0", "0")
    assert root.find("testsuite/testcase/failure") is None
    [case] = json.loads(report.read_text())["results"]
    assert case["verdict"] == "passed" and case["differences"] == (
        "PASSED: all 2 elements match bit for bit except 1 only by a flushed subnormal or the sign of a zero "
        "(--float-rules d3d gives them)")
    write(folder / "flush.json", {**json.loads((folder / "flush.json").read_text()),
                                  "expected": {"dtype": "float32", "data": [subnormal, "nan"]}})
    failed = invoke("test", folder, "--float-rules", "d3d")
    assert failed.exit_code == 1
    assert "1 NaN against a number" in failed.output and "only by a flushed subnormal" in failed.output

# ---------------------------------------------------------------- -k


def test_k_selects_by_operator_and_name(shared_dir):
    result = invoke("test", shared_dir / "conformance", "-k", "is_nan and not float16", "-v", "--jobs", "1")
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.stdout.splitlines() if line.endswith("PASSED")]
    assert names and all("float16" not in n for n in names)
    assert "numpy/numpy__TestFPClass.test_fpclass_stride_1_isnan_float32[cpu]" in names
    assert "onnx/onnx__test_isnan_float16[cpu]" not in names and "onnx/onnx__test_isnan[cpu]" in names


def test_k_that_selects_nothing_and_a_malformed_k_are_usage_errors(planted):
    nothing = invoke("test", planted / "npy", planted / "good.json", "-k", "nothing_is_called_this")
    assert nothing.exit_code == 2 and "selects none of the 2 cases" in nothing.stderr
    # A file that cannot be read is reported whatever -k says, as pytest reports collection errors.
    unreadable = invoke("test", planted, "-k", "nothing_is_called_this", "-q")
    assert unreadable.exit_code == 1 and "ERROR malformed[cpu]" in unreadable.stdout
    bad = invoke("test", planted, "-k", "good and (")
    assert bad.exit_code == 2
    assert bad.stderr.strip().splitlines() == [
        "dmlcli: error: -k 'good and (': expected a word at column 11, found end of expression "
        "(expected words joined by and, or, not and parentheses)"]


WORDS = st.sampled_from(["bit_and", "float16", "xor", "onnx", "u8", "nan"])
TREES = st.recursive(WORDS.map(Word), lambda inner: st.one_of(
    inner.map(Not), st.tuples(inner, inner).map(lambda p: Both(*p)), st.tuples(inner, inner).map(lambda p: Either(*p))),
    max_leaves=8)


def render(node) -> str:
    """The tree as text, fully parenthesised."""
    if isinstance(node, Word):
        return node.text
    if isinstance(node, Not):
        return f"not ({render(node.operand)})"
    joiner = "and" if isinstance(node, Both) else "or"
    return f"({render(node.left)}) {joiner} ({render(node.right)})"


def reference(node, names) -> bool:
    if isinstance(node, Word):
        return any(node.text in n for n in names)
    if isinstance(node, Not):
        return not reference(node.operand, names)
    if isinstance(node, Both):
        return reference(node.left, names) and reference(node.right, names)
    return reference(node.left, names) or reference(node.right, names)


@given(TREES, st.lists(st.sampled_from(["bit_and", "onnx__x_float16", "xor_u8", "nan", "other"]), max_size=3))
def test_k_parser_round_trips_and_evaluates_like_boolean_logic(tree, names):
    assert parse(render(tree)) == tree
    assert evaluate(parse(render(tree)), names) == reference(tree, names)


def test_k_precedence_is_not_then_and_then_or():
    assert parse("a or b and not c") == Either(Word("a"), Both(Word("b"), Not(Word("c"))))
    assert parse("not a and b") == Both(Not(Word("a")), Word("b"))
    assert evaluate(parse("BIT_AND"), ["onnx__test_bitwise_bit_and"])  # case-insensitive substrings


@pytest.mark.parametrize("text, column", [("(" * 5000 + "a" + ")" * 5000, 101), ("not " * 5000 + "a", 401),
                                          ("a and " + "(not " * 3000 + "b", 7 + 5 * 50)])
def test_deeply_nested_k_is_a_usage_error_naming_the_column(planted, text, column):
    """Issue 22, item 2: 5000 nested parentheses ended in 'internal error: RecursionError' (exit 5)."""
    result = invoke("test", planted, "-k", text)
    assert result.exit_code == 2, result.stderr
    line = result.stderr.strip()
    assert "\n" not in line and line.startswith("dmlcli: error: -k '")
    assert f"nested more than 100 deep at column {column}" in line
    assert len(line) < 300  # the expression's echo is cut


def test_k_chains_of_any_length_parse_and_evaluate():
    """and/or chains are left-deep trees as long as the chain: walked in loops, never recursion."""
    chain = parse(" or ".join(f"w{i}" for i in range(20000)))
    assert evaluate(chain, ["w19999"]) and not evaluate(chain, ["x"])
    assert evaluate(parse(" and ".join(["a"] * 20000) + " or b"), ["b"])
    assert evaluate(parse("(" * 100 + "a" + ")" * 100), ["a"])  # the limit itself is allowed


@given(st.text(alphabet="() anotdrb", max_size=400))
def test_k_parser_refuses_or_evaluates_any_mix_of_operators(text):
    """Fuzz (issue 22, item 4): any expression parses and evaluates, or is one InputError line."""
    try:
        tree = parse(text)
    except InputError as error:
        assert str(error).startswith("-k ") and "\n" not in str(error)
        return
    assert evaluate(tree, ["a", "b"]) in (True, False)


@given(st.text(max_size=30))
def test_k_parser_never_crashes(text):
    try:
        parse(text)
    except InputError as error:
        assert str(error).startswith("-k ")


# ---------------------------------------------------------------- --save-case and run_case


def test_save_case_round_trips_through_dmlcli_test(tmp_path):
    small = tmp_path / "small.json"
    result = invoke("run", "activation_elu", '[1.5, -2.25, "nan"]', "--dtype", "float16", "--alpha", "0.5",
                    "--save-case", small)
    assert result.exit_code == 0, result.output
    document = json.loads(small.read_text())
    assert document["op"] == "activation_elu" and document["params"] == {"alpha": "0.5"}
    assert document["inputs"][0]["dtype"] == "float16" and document["feature_level"] == "6_4"
    big = np.random.default_rng(1).integers(0, 2**32, 5000, dtype=np.uint32)
    np.save(tmp_path / "big.npy", big)
    result = invoke("run", "bit_shift_left", tmp_path / "big.npy", '[3]', "--dtype", "uint32", "--broadcast",
                    "--save-case", tmp_path / "large.json", "-o", tmp_path / "out.npy")
    assert result.exit_code == 0, result.output
    large = json.loads((tmp_path / "large.json").read_text())
    assert large["inputs"][0] == "large.input1.npy" and large["expected"] == "large.expected.npy"
    assert large["broadcast"] is True
    assert np.array_equal(np.load(tmp_path / "large.expected.npy"), np.load(tmp_path / "out.npy"))
    replay = invoke("test", tmp_path, "-v", "--jobs", "1")
    assert replay.exit_code == 0, replay.output
    assert "large[cpu] PASSED" in replay.stdout and "small[cpu] PASSED" in replay.stdout
    np.save(tmp_path / "large.expected.npy", np.load(tmp_path / "out.npy") ^ np.uint32(1))
    assert invoke("test", tmp_path, "-q").exit_code == 1


def test_save_case_keeps_the_output_type_and_refuses_a_bad_path_before_running(tmp_path):
    target = tmp_path / "cmp.json"
    assert invoke("run", "logical_equals", "[1, 2]", "[1, 3]", "--dtype", "int32", "--output-dtype", "uint32",
                  "--save-case", target).exit_code == 0
    assert json.loads(target.read_text())["params"] == {"output_dtype": "uint32"}
    assert dmlcli.run_case(target).passed
    bad = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "--save-case", tmp_path / "no" / "c.json")
    assert bad.exit_code == 2 and "does not exist" in bad.stderr


def test_run_case_returns_verdict_differences_and_timings(planted):
    result = dmlcli.run_case(planted / "wrong_value.json")
    assert result.verdict == "failed" and not result.passed
    assert result.differences.startswith("FAILED: 1 of 2 elements differ")
    assert set(result.timings) == {"load", "run", "compare"} and result.time >= 0
    assert dmlcli.run_case(planted / "npy" / "case.json").passed
    case = load_case(planted / "good.json")
    assert dmlcli.run_case(case).passed


# ---------------------------------------------------------------- backends


def test_backend_comparison_rules():
    from dmlcli import find_operator

    add, bit_not, sin = find_operator("add"), find_operator("bit_not"), find_operator("sin")
    nan_a = np.array([np.nan, 1], np.float32)
    nan_b = nan_a.copy()
    nan_b.view(np.uint32)[0] |= 5  # another payload
    assert backends_agree(add, nan_b, nan_a, {})[1]  # computed values: a NaN matches any NaN
    assert not backends_agree(bit_not, nan_b, nan_a, {})[1]  # bit patterns: every bit counts
    one_ulp = np.nextafter(np.float32(1), np.float32(2))
    assert not backends_agree(add, np.float32([one_ulp]), np.float32([1]), {})[1]  # one rounding: bit for bit
    # Both backends apply the same float rules: a flush or a zero's sign between them is a bug, not a pass.
    assert not backends_agree(add, np.float32([0.0]), np.float32([1e-40]), {})[1]
    assert not backends_agree(add, np.float32([-0.0]), np.float32([0.0]), {})[1]
    assert backends_agree(sin, np.float32([1.0004]), np.float32([1]), {})[1]  # approximate: within 1/1024


def test_two_backends_are_compared_with_each_other(planted):
    results = run_loaded(load_case(planted / "good.json", "good"), ("cpu", "cpu"))
    assert [r.backend for r in results] == ["cpu", "cpu", "cpu-vs-cpu"]
    assert all(r.passed for r in results) and results[-1].differences.startswith("PASSED")


@pytest.fixture
def hide_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)


def test_backend_gpu_without_cupy_is_exit_4_and_all_runs_the_cpu(planted, hide_cupy):
    gpu = invoke("test", planted, "--backend", "gpu")
    assert gpu.exit_code == 4 and "CuPy is not installed" in gpu.stderr
    every = invoke("test", planted / "good.json", "--backend", "all", "-v")
    assert every.exit_code == 0
    assert "gpu: not available (CuPy is not installed" in every.stdout and "good[cpu] PASSED" in every.stdout


def test_backend_all_on_the_gpu_compares_every_shared_case(shared_dir):
    pytest.importorskip("cupy")
    from dmlcli.backends import gpu
    from dmlcli.errors import BackendUnavailableError

    try:
        gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")
    run = run_suite([shared_dir / "conformance"], backend="all", jobs=1)
    assert run.backends == ("cpu", "gpu")
    bad = [(r.name, r.message) for r in run.results if not r.passed]
    assert not bad
    assert sum(r.backend == "cpu-vs-gpu" for r in run.results) == 323 - 4  # the four refused POW cases have none


# ---------------------------------------------------------------- command line


def test_usage_errors_are_one_line_and_exit_2(planted, tmp_path):
    for args, words in [((tmp_path / "nothing",), "no such file or folder"),
                        ((tmp_path / "empty_dir_is_made",), "no case files"),
                        ((planted, "--junit-xml", tmp_path / "no" / "j.xml"), "does not exist"),
                        ((planted, "--report", tmp_path / "r.txt"), "expected a .json file"),
                        ((planted, "--feature-level", "9_9"), "9_9")]:
        if "empty_dir_is_made" in str(args[0]):
            args[0].mkdir()
        result = invoke("test", *args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.output


def test_quiet_gives_one_line_per_failure_and_no_table(planted):
    result = invoke("test", planted, "-q", "--jobs", "1")
    lines = result.stdout.strip().splitlines()
    assert "total" not in result.stdout
    assert lines[0].startswith("FAILED accepted[cpu] - dmlcli accepted the call")
    assert len(lines) == 5 + 1


def test_summary_on_a_terminal_is_a_rich_table(planted):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    from dmlcli.cli.suite_summary import print_summary

    stream = Terminal()
    print_summary(run_suite([planted], jobs=1), stream)
    text = stream.getvalue()
    assert "dmlcli test · cpu" in text and ("┃" in text or "│" in text)
    assert "4 passed, 3 failed, 2 errors, 1 skipped" in text


def test_a_real_process_in_a_pipe(planted, tmp_path):
    junit = tmp_path / "j.xml"
    done = subprocess.run([sys.executable, "-m", "dmlcli", "test", str(planted), "--junit-xml", str(junit)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "\x1b[" not in done.stdout and done.stderr == ""
    assert done.stdout.strip().splitlines()[-1].startswith("4 passed, 3 failed, 2 errors, 1 skipped")
    assert_schema_valid(junit)


def test_a_case_tolerance_is_numpys_allclose():
    from dmlcli.checking.comparison import Rule, compare

    rule = Rule("allclose", 1e-7, "case", rtol=1e-3)
    assert compare(np.float32([3.0, np.nan]), np.float32([3.0029, np.nan]), rule)[1]  # 0.0029 <= 1e-7 + 0.0030029
    report, same = compare(np.float32([3.0]), np.float32([3.004]), rule)
    assert not same and "1 of 1 elements are not within 1e-07 + 0.001*|expected|" in report


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(monkeypatch):
    from dmlcli.cli.suite import _progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for quiet, stream, shown in ((False, Terminal(), True), (True, Terminal(), False), (False, io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        with _progress(quiet) as advance:
            advance(1, 3, [])
            advance(3, 3, [])
        assert ("3/3" in stream.getvalue()) == shown, (quiet, type(stream).__name__)
