"""Issue 12, what users expect: .npy through stdin and stdout, --check for CI (--max-diffs, --report,
big .npy files compared in constant memory), and JSON golden files whose NaNs cannot hold payloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dmlcli.cli import cli
from dmlcli.checking.comparison import Rule, compare_arrays, compare_npy_files
from dmlcli.engine.streaming import CHUNK_BYTES_VARIABLE

from conftest import REPO

DMLCLI = f"'{sys.executable}' -m dmlcli"


def invoke(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def shell(script: str, folder) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(["bash", "-c", "set -o pipefail; " + script], cwd=folder, capture_output=True, env=env,
                          timeout=120)


# ---------------------------------------------------------------- stdin and stdout carry .npy


def test_npy_goes_through_a_real_shell_pipe(tmp_path):
    np.save(tmp_path / "x.npy", np.array([[0, 1], [128, 255]], np.uint8))
    done = shell(f"{DMLCLI} run bit_not x.npy -o - --format npy | {DMLCLI} run bit_not - -o out.npy", tmp_path)
    assert done.returncode == 0, done.stderr
    out = np.load(tmp_path / "out.npy")
    assert out.dtype == np.uint8 and out.tolist() == [[0, 1], [128, 255]]
    # -o -.npy says the same; the bytes are exactly what np.save writes.
    done = shell(f"{DMLCLI} run bit_not x.npy -o -.npy > piped.npy", tmp_path)
    assert done.returncode == 0, done.stderr
    np.save(tmp_path / "saved.npy", ~np.load(tmp_path / "x.npy"))
    assert (tmp_path / "piped.npy").read_bytes() == (tmp_path / "saved.npy").read_bytes()
    assert not (tmp_path / "-.npy").exists()


def test_float_npy_with_nan_payloads_keeps_every_bit_through_a_pipe(tmp_path):
    bits = np.array([0x7FC00123, 0xFF800001, 0x80000000, 0x00000001], np.uint32)
    np.save(tmp_path / "x.npy", bits.view(np.float32))
    done = shell(f"{DMLCLI} run bit_not x.npy -o - --format npy | {DMLCLI} run bit_not - -o - --format npy "
                 "> out.npy", tmp_path)
    assert done.returncode == 0, done.stderr
    assert np.load(tmp_path / "out.npy").view(np.uint32).tolist() == bits.tolist()


def test_stdin_npy_and_json_are_told_apart_by_the_magic_bytes(tmp_path):
    np.save(tmp_path / "x.npy", np.array([1, 2], np.uint16))
    as_npy = invoke("run", "bit_not", "-", "--format", "json", input=(tmp_path / "x.npy").read_bytes())
    assert as_npy.exit_code == 0, as_npy.output
    assert json.loads(as_npy.stdout)["data"] == [65534, 65533]
    as_json = invoke("run", "bit_not", "-", "--format", "json", input='{"dtype": "uint16", "data": [1, 2]}')
    assert json.loads(as_json.stdout)["data"] == [65534, 65533]
    truncated = invoke("run", "bit_not", "-", input=(tmp_path / "x.npy").read_bytes()[:-1])
    assert truncated.exit_code == 2 and "input 1 (stdin)" in truncated.stderr and "truncated" in truncated.stderr
    declared = invoke("run", "bit_not", "-", "--dtype", "uint8", input=(tmp_path / "x.npy").read_bytes())
    assert declared.exit_code == 2 and "--dtype says UINT8" in declared.stderr


def test_stdin_can_be_read_only_once():
    for args in (["bit_xor", "-", "-"], ["bit_not", "-", "--check", "-"]):
        result = invoke("run", *args, input="[1]")
        assert result.exit_code == 2
        assert result.stderr.count("\n") == 1 and "stdin can be read only once" in result.stderr
    validated = invoke("validate", "bit_xor", "-", "-", input="[1]")
    assert validated.exit_code == 2 and "stdin can be read only once" in validated.stderr


# -o FILE --format npy|json name the file's format (issue 21c: tests/test_output_format.py); the rest stay refused.
@pytest.mark.parametrize("extra", [["-o", "out.npy", "--format", "hex"], ["-o", "out.json", "--format", "table"],
                                   ["-o", "-", "--format", "hex"], ["-o", "-", "--format", "table"],
                                   ["-o", "-.json", "--format", "npy"],
                                   ["--format", "npy"], ["--check", "[254]", "--format", "npy"]])
def test_format_with_an_output_stays_refused_except_npy_or_json(tmp_path, monkeypatch, extra):
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", *extra)
    assert result.exit_code == 2 and result.stderr.startswith("dmlcli: error: --format")
    assert not list(tmp_path.iterdir())


def test_json_stays_the_default_of_dash_and_format_json_is_allowed_with_it():
    for extra in ([], ["--format", "json"]):
        result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "-o", "-", *extra)
        assert result.exit_code == 0 and json.loads(result.stdout)["data"] == [254]


def test_npy_on_stdout_with_check_sends_the_verdict_to_stderr():
    result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "-o", "-", "--format", "npy", "--check", "[254]")
    assert result.exit_code == 0 and "PASSED" in result.stderr
    assert result.stdout_bytes.startswith(b"\x93NUMPY")


# ---------------------------------------------------------------- --check for CI


def _expected_with_two_mismatches(tmp_path, size=1000):
    np.save(tmp_path / "a.npy", np.arange(size, dtype=np.uint32))
    expected = ~np.arange(size, dtype=np.uint32)
    expected[7], expected[size - 3] = 1, 2
    np.save(tmp_path / "e.npy", expected)


@pytest.mark.parametrize("streamed", [False, True], ids=["in memory", "streamed"])
def test_max_diffs_and_the_count_and_share_of_mismatches(tmp_path, streamed):
    _expected_with_two_mismatches(tmp_path)
    output = ["-o", str(tmp_path / "o.npy")] if streamed else []
    base = ["run", "bit_not", str(tmp_path / "a.npy"), "--check", str(tmp_path / "e.npy"), *output]
    default = invoke(*base)
    assert default.exit_code == 1
    assert "FAILED: 2 of 1000 elements differ (0.2%)" in default.output
    assert "at [7]: got 4294967288 (0xfffffff8), expected 1 (0x00000001)" in default.output
    assert "at [997]" in default.output
    one = invoke(*base, "--max-diffs", "1")
    assert "at [7]" in one.output and "at [997]" not in one.output and "... and 1 more" in one.output
    none = invoke(*base, "--max-diffs", "0")
    assert none.exit_code == 1 and none.output.strip() == "FAILED: 2 of 1000 elements differ (0.2%)"


def test_checking_against_the_output_file_itself_compares_the_old_contents(tmp_path):
    _expected_with_two_mismatches(tmp_path)
    result = invoke("run", "bit_not", str(tmp_path / "a.npy"), "-o", str(tmp_path / "e.npy"),
                    "--check", str(tmp_path / "e.npy"))
    assert result.exit_code == 1 and "FAILED: 2 of 1000" in result.output
    assert np.load(tmp_path / "e.npy").tolist() == (~np.arange(1000, dtype=np.uint32)).tolist()


def test_report_is_written_on_a_failure_and_on_a_pass(tmp_path):
    _expected_with_two_mismatches(tmp_path)
    report = tmp_path / "report.json"
    failed = invoke("run", "bit_not", str(tmp_path / "a.npy"), "--check", str(tmp_path / "e.npy"),
                    "--report", str(report), "--max-diffs", "1")
    assert failed.exit_code == 1
    document = json.loads(report.read_text())
    assert document["verdict"] == "FAILED" and document["mismatches"] == 2 and document["elements"] == 1000
    assert document["mismatch_share"] == 0.002
    assert document["first_differences"] == [{"index": [7], "expected": 1, "got": 4294967288}]
    assert document["operator"] == "BIT_NOT" and document["feature_level"] == "DML_FEATURE_LEVEL_6_4"
    assert document["backend"] == "cpu" and document["output_dtype"] == "uint32" and document["output_shape"] == [1000]
    assert document["tolerance"]["kind"] == "exact"
    assert document["dmlcli_version"] and document["numpy_version"] == np.__version__
    passed = invoke("run", "add", "[1.5, 2.5]", "[1, 1]", "--dtype", "float32", "--check", "[2.5, 3.5]",
                    "--report", str(report))
    assert passed.exit_code == 0
    document = json.loads(report.read_text())
    assert document["verdict"] == "PASSED" and document["mismatches"] == 0 and document["first_differences"] == []
    assert document["tolerance"] == {"kind": "ulp", "limit": 1.0, "source": document["tolerance"]["source"],
                                     "text": "within 1 ULP or 1.18e-38 absolute",
                                     "atol_floor": float(np.finfo(np.float32).smallest_normal),
                                     "floor_source": document["tolerance"]["floor_source"], "every_bit": False,
                                     "rtol": None, "sum_bound": None}
    assert "smallest normal" in document["tolerance"]["floor_source"]
    assert document["difference_kinds"] == {"identical": 2, "within_tolerance": 0, "subnormal_or_zero_sign": 0,
                                            "nan_vs_number": 0, "out_of_tolerance": 0,
                                            "subnormal_or_zero_sign_d3d_accepts": 0,
                                            "within_tolerance_by_floor_alone": 0,
                                            "within_tolerance_by_sum_bound_alone": 0}
    assert document["max_ulp"] == 0 and document["max_abs_error"] == 0


def test_report_gives_floats_in_json_spelling_with_their_bits(tmp_path):
    report = tmp_path / "r.json"
    result = invoke("run", "add", '["nan", 1]', "[0, 1]", "--dtype", "float16", "--check", '[1, "inf"]',
                    "--report", str(report))
    assert result.exit_code == 1
    document = json.loads(report.read_text())
    assert document["first_differences"][0] == {"index": [0], "expected": 1.0, "got": "nan",
                                                "expected_bits": "0x3c00", "got_bits": "0x7e00", "kind": "nan_vs_number"}
    assert document["max_abs_error"] == "inf"


def test_report_without_check_or_with_a_bad_path_is_a_usage_error(tmp_path):
    alone = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "--report", str(tmp_path / "r.json"))
    assert alone.exit_code == 2 and "--check" in alone.stderr
    missing = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "--check", "[254]",
                     "--report", str(tmp_path / "no" / "r.json"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_report_that_cannot_be_written_leaves_the_old_one(tmp_path, monkeypatch):
    from dmlcli.io import atomic

    report = tmp_path / "r.json"
    report.write_text("old")

    def broken(handle):
        raise OSError(28, "No space left on device")

    real = atomic.write_atomically
    monkeypatch.setattr(atomic, "write_atomically", lambda path, write: real(path, broken))
    result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "--check", "[254]", "--report", str(report))
    assert result.exit_code == 2 and "No space left" in result.stderr
    assert report.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_chunked_comparison_gives_the_whole_comparisons_answer(tmp_path):
    rng = np.random.default_rng(1)
    got = rng.standard_normal(5000).astype(np.float32)
    want = got.copy()
    want[[3, 1200, 4999]] = np.nextafter(want[[3, 1200, 4999]], np.float32(np.inf))
    want[2000] = np.nan
    np.save(tmp_path / "got.npy", got)
    np.save(tmp_path / "want.npy", want.astype(">f4"))  # big-endian too
    for rule in (Rule("exact"), Rule("ulp", 0.0), Rule("ulp", 1.0)):
        whole = compare_arrays(got, want, rule)
        chunked = compare_npy_files(tmp_path / "got.npy", tmp_path / "want.npy", rule, chunk_bytes=64)
        assert chunked.text() == whole.text()
        assert chunked.mismatches == whole.mismatches and chunked.to_json() == whole.to_json()


MEASURE_CHILD = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.stderr.strip())
"""


def _peak_mib(command, env) -> tuple[int, float, str]:
    returncode, peak_kib, stderr = subprocess.run([sys.executable, "-c", MEASURE_CHILD, *command], capture_output=True,
                                                   text=True, env=env, check=True).stdout.split(" ", 2)
    return int(returncode), int(peak_kib) / 1024, stderr


def test_a_streamed_check_of_big_npy_files_runs_in_constant_memory(tmp_path):
    """64 MiB in, 64 MiB expected, 256 KiB chunks: the streamed check peaks far below the in-memory one."""
    shape = (16384, 4096)  # 64 MiB of uint8: 256 chunks of 256 KiB
    source = np.lib.format.open_memmap(tmp_path / "a.npy", mode="w+", dtype=np.uint8, shape=shape)
    source[:] = 0x0F
    source.flush()
    del source
    expected = np.lib.format.open_memmap(tmp_path / "e.npy", mode="w+", dtype=np.uint8, shape=shape)
    expected[:] = 0xF0
    expected[-1, -1] = 0
    expected.flush()
    del expected
    env = {**os.environ, CHUNK_BYTES_VARIABLE: "256K", "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "dmlcli", "run", "bit_not", str(tmp_path / "a.npy"), "--check", str(tmp_path / "e.npy")]
    code, streamed, stderr = _peak_mib(run + ["-o", str(tmp_path / "out.npy")], env)
    assert code == 1, stderr
    code, whole, stderr = _peak_mib(run, env)
    assert code == 1, stderr
    assert streamed < 80, f"streamed check peaked at {streamed:.0f} MiB for 128 MiB of files"
    assert whole > streamed + 100, f"in memory {whole:.0f} MiB, streamed {streamed:.0f} MiB"


# ---------------------------------------------------------------- NaN in JSON golden files


def _nan_payload_input(tmp_path):
    # BIT_NOT of 0x81FE is 0x7E01: a float16 NaN with a payload, which JSON writes as "nan" (0x7E00).
    np.save(tmp_path / "x.npy", np.array([0x81FE, 0x3C00], np.uint16).view(np.float16))
    return str(tmp_path / "x.npy")


def test_a_json_golden_file_written_by_dmlcli_passes_against_the_same_result(tmp_path):
    source = _nan_payload_input(tmp_path)
    golden = str(tmp_path / "golden.json")
    assert invoke("run", "bit_not", source, "-o", golden, "-q").exit_code == 0
    result = invoke("run", "bit_not", source, "--check", golden)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == ("PASSED: all 2 elements match bit for bit "
                                     "(NaN payloads not compared: JSON cannot hold them)")
    inline = invoke("run", "bit_not", source, "--check", '{"dtype": "float16", "data": ["nan", -3.998]}')
    assert inline.exit_code == 0 and "NaN payloads not compared" in inline.stdout
    wrong = invoke("run", "bit_not", source, "--check", '{"dtype": "float16", "data": ["nan", -3.996]}')
    assert wrong.exit_code == 1 and "1 of 2" in wrong.stdout
    number_for_nan = invoke("run", "bit_not", source, "--check", '{"dtype": "float16", "data": [1, -3.998]}')
    assert number_for_nan.exit_code == 1


def test_npy_golden_files_still_compare_nan_bits(tmp_path):
    source = _nan_payload_input(tmp_path)
    np.save(tmp_path / "canonical.npy", np.array([0x7E00, 0xC3FF], np.uint16).view(np.float16))
    result = invoke("run", "bit_not", source, "--check", str(tmp_path / "canonical.npy"))
    assert result.exit_code == 1 and "got nan (0x7e01), expected nan (0x7e00)" in result.stdout
    np.save(tmp_path / "same.npy", np.array([0x7E01, 0xC3FF], np.uint16).view(np.float16))
    passed = invoke("run", "bit_not", source, "--check", str(tmp_path / "same.npy"))
    assert passed.exit_code == 0 and "NaN payloads" not in passed.stdout
