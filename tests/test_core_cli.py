"""The command line through click's CliRunner, and once as a real subprocess."""

import io
import json
import re
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli

from conftest import REPO

A = "[[0,128],[42,255]]"
B = "[[255,255],[15,240]]"


def invoke(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def stdout_of(result):
    return result.stdout


def test_run_prints_a_table_with_a_caption():
    result = invoke("run", "bit_xor", A, B, "--dtype", "uint8")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.split() == ["0", "255", "127"] for line in lines)
    assert any(line.split() == ["1", "37", "15"] for line in lines)
    assert "BIT_XOR · DML_FEATURE_LEVEL_6_4 · cpu · UINT8 · shape [2, 2]" in result.stdout
    assert "\x1b[" not in result.stdout  # no colour codes in a pipe


@pytest.mark.parametrize("style,cell", [("bits", "0b01111111"), ("hex", "0x7f")])
def test_bit_pattern_formats(style, cell):
    result = invoke("run", "bit_xor", A, B, "--dtype", "uint8", "--format", style)
    assert result.exit_code == 0 and cell in result.stdout


def test_float_bits_format_shows_the_encoding():
    result = invoke("run", "bit_not", '[0.0, "nan"]', "--dtype", "float16", "--format", "hex")
    assert "0xffff" in result.stdout and "0x81ff" in result.stdout


def test_json_to_stdout_round_trips():
    result = invoke("run", "bit_and", A, B, "--dtype", "uint8", "-o", "-")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"dtype": "uint8", "shape": [2, 2], "data": [[0, 128], [10, 240]]}
    assert invoke("run", "bit_and", A, B, "--dtype", "uint8", "--format", "json").stdout == result.stdout


def test_higher_ranks_print_as_labelled_slices():
    data = json.dumps(np.arange(8).reshape(2, 2, 2).tolist())
    result = invoke("run", "logical_not", data, "--dtype", "uint32")
    assert "[0, :, :]" in result.stdout and "[1, :, :]" in result.stdout


def test_large_tensors_are_summarised():
    data = json.dumps(list(range(5000)))
    result = invoke("run", "bit_count", data, "--dtype", "uint32")
    assert result.exit_code == 0
    assert "…" in result.stdout and "4999" in result.stdout and "2500" not in result.stdout


def test_output_files(tmp_path):
    npy, js = tmp_path / "out.npy", tmp_path / "out.json"
    assert invoke("run", "bit_or", A, B, "--dtype", "uint8", "-o", str(npy)).exit_code == 0
    assert np.load(npy).tolist() == [[255, 255], [47, 255]]
    assert invoke("run", "is_nan", '["nan", 1.5]', "--dtype", "float32", "-o", str(js)).exit_code == 0
    assert json.loads(js.read_text())["data"] == [1, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "out.npy"]


def test_inputs_from_files_and_stdin(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.array([1, 2, 3], np.uint16))
    json_path = tmp_path / "b.json"
    json_path.write_text('{"dtype": "UINT16", "data": [3, 3, 3]}')
    result = invoke("run", "bit_xor", str(path), str(json_path), "-o", "-")
    assert json.loads(result.stdout)["data"] == [2, 1, 0]
    result = invoke("run", "bit_xor", "-", str(path), "-o", "-", input='{"dtype": "uint16", "data": [1, 1, 1]}')
    assert json.loads(result.stdout)["data"] == [0, 3, 2]


def test_float_values_and_tokens():
    result = invoke("run", "is_infinity", '[1, "inf", "-inf", "nan", Infinity, -Infinity, NaN]', "--dtype", "float32",
                    "--infinity-mode", "negative", "-o", "-")
    assert json.loads(result.stdout)["data"] == [0, 0, 1, 0, 0, 1, 0]


def test_check_passes_and_fails(tmp_path):
    passed = invoke("run", "bit_xor", A, B, "--dtype", "uint8", "--check", "[[255,127],[37,15]]")
    assert passed.exit_code == 0 and passed.stdout.startswith("PASSED: all 4 elements match bit for bit")
    failed = invoke("run", "bit_xor", A, B, "--dtype", "uint8", "--check", "[[255,127],[37,16]]")
    assert failed.exit_code == 1
    assert "FAILED: 1 of 4 elements differ" in failed.stdout
    assert "at [1, 1]: got 15 (0x0f), expected 16 (0x10)" in failed.stdout
    wrong_type = invoke("run", "bit_xor", A, B, "--dtype", "uint8", "--check", '{"dtype": "int8", "data": [[1,1],[1,1]]}')
    assert wrong_type.exit_code == 1 and "dtype" in wrong_type.stdout


def test_check_uses_bits_so_nan_payloads_count(tmp_path):
    expected = tmp_path / "expected.npy"
    np.save(expected, np.array([0x7E01], np.uint16).view(np.float16))
    inputs = tmp_path / "x.npy"
    np.save(inputs, np.array([0x81FE], np.uint16).view(np.float16))
    assert invoke("run", "bit_not", str(inputs), "--check", str(expected)).exit_code == 0
    np.save(expected, np.array([0x7E00], np.uint16).view(np.float16))
    assert invoke("run", "bit_not", str(inputs), "--check", str(expected)).exit_code == 1


def test_validation_error_exit_3_with_the_lowest_level():
    result = invoke("run", "bit_xor", "[1.5]", "[2.5]", "--dtype", "float32", "--feature-level", "3.0")
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "dmlcli: error: BIT_XOR: ATensor data type FLOAT32 is not supported at DML_FEATURE_LEVEL_3_0 "
        "(allowed: UINT32, UINT16, UINT8); supported from DML_FEATURE_LEVEL_4_1")
    assert result.stdout == ""


def test_shape_mismatch_suggests_broadcast():
    result = invoke("run", "logical_and", "[1,0,1]", "[[1],[0]]", "--dtype", "uint8")
    assert result.exit_code == 3 and "--broadcast" in result.stderr
    result = invoke("run", "logical_and", "[1,0,1]", "[[1],[0]]", "--dtype", "uint8", "--broadcast", "-o", "-")
    assert json.loads(result.stdout)["data"] == [[1, 0, 1], [0, 0, 0]]


@pytest.mark.parametrize("args,message", [
    (["run", "bit_xro", "[1]", "[1]", "--dtype", "uint8"], "unknown operator 'bit_xro' (did you mean bit_xor"),
    (["run", "bit_xor", "[1]", "--dtype", "uint8"], "BIT_XOR takes 2 input tensors (ATensor, BTensor); got 1"),
    (["run", "bit_xor", "[1]", "[1]"], "needs its data type: give --dtype"),
    (["run", "bit_xor", "[1]", "[1]", "--dtype", "uint8", "-f", "9.9"], "unknown feature level '9.9'"),
    (["run", "is_infinity", "[1]", "--dtype", "float32", "--infinity-mode", "up"], "unknown InfinityMode 'up'"),
    (["run", "bit_xor", "[1]", "[1]", "--dtype", "uint8", "--infinity-mode", "positive"], "BIT_XOR has no infinity-mode parameter"),
    (["run", "bit_xor", "[256]", "[1]", "--dtype", "uint8"], "data[0] = 256 is out of range for uint8 (0 to 255)"),
    (["run", "bit_xor", "[1.5]", "[1]", "--dtype", "uint8"], "data[0] = 1.5 is not an integer"),
    (["run", "bit_xor", "[[1],[2,3]]", "[1]", "--dtype", "uint8"], "ragged data"),
    (["run", "bit_xor", "[1]", "[1]", "--dtype", "bool"], "unknown data type 'bool'"),
    (["run", "bit_xor", "missing.npy", "[1]"], "input 1 'missing.npy': no such file"),
    (["run", "bit_xor", "[1]", "[1]", "--dtype", "uint8", "-o", "out.txt"], "unknown extension '.txt'"),
    (["run", "bit_xor", "[1]", "[1]", "--dtype", "uint8", "-o", "no/such/dir/out.npy"], "does not exist"),
])
def test_usage_errors_exit_2_with_one_line(args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_shift_warning_on_stderr_and_quiet():
    result = invoke("run", "bit_shift_left", "[1, 1]", "[8, 1]", "--dtype", "uint8", "-o", "-")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["data"] == [0, 2]
    assert "warning: BIT_SHIFT_LEFT: 1 of 2 shift counts are >= the element width 8" in result.stderr
    quiet = invoke("run", "bit_shift_left", "[1, 1]", "[8, 1]", "--dtype", "uint8", "-o", "-", "--quiet")
    assert quiet.stderr == ""


def test_json_nan_payload_warning():
    result = invoke("run", "bit_xor", '{"dtype":"uint32","data":[2143289345]}', "[0]", "--dtype", "uint32", "-o", "-")
    assert "warning" not in result.stderr  # integers never lose anything
    result = invoke("run", "bit_or", "[0.0]", '["nan"]', "--dtype", "float32", "-o", "-")
    assert result.stderr == ""  # a canonical NaN is exactly what "nan" reads back as
    result = invoke("run", "bit_not", "[0.0]", "--dtype", "float32", "-o", "-")  # 0xffffffff: a negative NaN
    assert "1 NaN value(s) lose their sign or payload bits" in result.stderr
    result = invoke("run", "bit_xor", '["nan"]', "[1.401298464324817e-45]", "--dtype", "float32", "-o", "-")
    assert json.loads(result.stdout)["data"] == ["nan"]
    assert "1 NaN value(s) lose their sign or payload bits" in result.stderr


def test_output_dtype_option():
    result = invoke("run", "logical_greater_than", "[1, 5]", "[2, 2]", "--dtype", "int32", "--output-dtype", "uint32", "-o", "-")
    assert json.loads(result.stdout) == {"dtype": "uint32", "shape": [2], "data": [0, 1]}
    result = invoke("run", "is_infinity", "[1]", "--dtype", "float32", "--output-dtype", "uint32")
    assert result.exit_code == 3 and "OutputTensor data type UINT32 is not supported" in result.stderr


def test_validate_command():
    result = invoke("validate", "bit_shift_left", "[[[[1]]]]", "[[[[2]]]]", "--dtype", "uint8", "-f", "2_1")
    assert result.exit_code == 0
    assert "valid: BIT_SHIFT_LEFT accepts" in result.stdout
    assert "lowest feature level that accepts this call: DML_FEATURE_LEVEL_2_1" in result.stdout
    result = invoke("validate", "bit_shift_left", "[1]", "[2]", "--dtype", "uint8", "-f", "2_1")
    assert result.exit_code == 3
    assert "dimension count 1 is not supported at DML_FEATURE_LEVEL_2_1 (allowed: 4); supported from DML_FEATURE_LEVEL_3_0" in result.stderr


def test_ops_lists_every_operator():
    result = invoke("ops")
    assert result.exit_code == 0
    for name in ("bit_xor", "is_infinity", "logical_xor", "bit_shift_left", "logical_less_than_or_equal"):
        assert name in result.stdout
    assert "InfinityMode (either|positive|negative)" in result.stdout


def test_describe_shows_every_level():
    result = invoke("describe", "BIT_SHIFT_LEFT")
    assert result.exit_code == 0
    out = result.stdout
    assert "DML_OPERATOR_ELEMENT_WISE_BIT_SHIFT_LEFT" in out and "f(a, b) = (a << b)" in out
    assert "not available" in out  # 1_0 and 2_0
    assert "4; UINT32, UINT16, UINT8" in out and "1 to 8; UINT64, UINT32, UINT16, UINT8" in out
    for level in ("1_0", "3_1", "6_4"):
        assert level in out


def test_version_and_help():
    version = invoke("--version")
    assert version.exit_code == 0 and version.stdout.startswith("dmlcli ") and "NumPy" in version.stdout
    for command in ("run", "validate", "ops", "describe"):
        help_text = invoke(command, "--help").stdout
        assert "Example" in help_text, command
    assert "Exit codes" in invoke("--help").stdout and "_DMLCLI_COMPLETE" in invoke("--help").stdout
    assert "3  the call breaks the operator's rules" in invoke("run", "-h").stdout


def test_real_subprocess_runs_a_sample(tmp_path):
    env = dict(os.environ, NO_COLOR="1")
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "dmlcli", "run", "bit_xor", "samples/bit_xor_a.json", "samples/bit_xor_b.json",
         "--check", "samples/bit_xor_expected.json", "-o", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("PASSED")
    assert json.loads(out.read_text())["data"] == [[255, 127], [37, 15]]
    failed = subprocess.run([sys.executable, "-m", "dmlcli", "run", "bit_xor", "[1]", "[1]", "--dtype", "float32", "-f", "3_0"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 3 and "Traceback" not in failed.stderr
    assert failed.stderr.count("\n") == 1


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("terminal", [False, True])
def test_tables_look_the_same_on_a_terminal_and_in_a_pipe(terminal, monkeypatch):
    from dmlcli.display.rendering import show

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("NO_COLOR")  # set by conftest; the test of NO_COLOR itself is below
    stream = _Terminal() if terminal else io.StringIO()
    show(np.arange(8, dtype=np.uint8).reshape(2, 2, 2), caption="CAPTION", style="hex", stream=stream)
    text = re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue())
    lines = [line.strip() for line in text.splitlines()]
    assert "[1, :, :]" in lines and "CAPTION" in lines
    assert any(line.split() == ["1", "0x06", "0x07"] for line in lines)
    # Styles (bold headers, dim labels) only on a terminal, and never with NO_COLOR.
    assert ("\x1b[" in stream.getvalue()) == terminal
    monkeypatch.setenv("NO_COLOR", "1")
    plain = _Terminal() if terminal else io.StringIO()
    show(np.arange(8, dtype=np.uint8).reshape(2, 2, 2), caption="CAPTION", style="hex", stream=plain)
    assert "\x1b[" not in plain.getvalue() and plain.getvalue() == text


def test_negative_zero_keeps_its_sign_in_json():
    result = invoke("run", "bit_not", "[-0, -0.0, 0]", "--dtype", "float32", "--format", "hex")
    assert result.stdout.count("0x7fffffff") == 2 and "0xffffffff" in result.stdout


def test_decimals_just_under_the_overflow_threshold_round_to_the_largest_value():
    result = invoke("run", "bit_not", "[65519.99999999999999999, -65519.99999999999999999]", "--dtype", "float16", "--format", "hex")
    assert result.exit_code == 0, result.stderr
    assert "0x8400" in result.stdout and "0x0400" in result.stdout  # ~0x7bff and ~0xfbff
    for too_big in ("65520", "65520.0000000000000001", "1e5"):
        result = invoke("run", "bit_not", f"[{too_big}]", "--dtype", "float16")
        assert result.exit_code == 2 and "out of range for float16" in result.stderr


def test_check_takes_the_expected_tensors_own_dtype(tmp_path):
    expected = tmp_path / "e.json"
    expected.write_text('{"dtype": "uint32", "data": [1, 0]}')
    result = invoke("run", "logical_equals", "[1, 2]", "[1, 3]", "--dtype", "uint8", "--check", str(expected))
    assert result.exit_code == 1
    assert "FAILED: result dtype uint8 differs from expected dtype uint32" in result.stdout
    result = invoke("run", "logical_equals", "[1, 2]", "[1, 3]", "--dtype", "uint8", "--check", "[1, 0]")
    assert result.exit_code == 0 and result.stdout.startswith("PASSED")


def test_strided_json_tensors_are_views_so_huge_broadcasts_are_refused_without_memory():
    result = invoke("run", "bit_not", '{"dtype":"uint8","shape":[4294967295,4294967295],"strides":[0,0],"data":[1]}')
    assert result.exit_code == 3
    assert "has 18446744065119617025 elements; a DirectML tensor holds at most 4294967295" in result.stderr
    # Within the limit a zero-stride tensor stays a view of its one-element buffer.
    from dmlcli.io.json_tensor import tensor_from_object

    view = tensor_from_object({"dtype": "uint8", "shape": [65535, 65535], "strides": [0, 0], "data": [7]}, where="x")
    assert view.shape == (65535, 65535) and view.base is not None and view[65534, 65534] == 7


# ---------------------------------------------------------------- the command line in pipelines (issue 12)


def test_check_with_json_on_stdout_sends_the_verdict_to_stderr():
    result = invoke("run", "bit_xor", A, B, "--dtype", "uint8", "-o", "-", "--check", "[[255,127],[37,15]]")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"dtype": "uint8", "shape": [2, 2], "data": [[255, 127], [37, 15]]}
    assert result.stderr.startswith("PASSED: all 4 elements match bit for bit")
    failed = invoke("run", "bit_xor", A, B, "--dtype", "uint8", "-o", "-", "--check", "[[0,127],[37,15]]")
    assert failed.exit_code == 1 and json.loads(failed.stdout)["data"] == [[255, 127], [37, 15]]
    assert failed.stderr.startswith("FAILED: 1 of 4 elements differ")


def test_the_output_type_follows_the_level_when_it_was_not_chosen():
    """LOGICAL_EQUALS at 1_0 writes UINT32 only: with no --output-dtype that is what it writes."""
    four_d = "[[[[1.5, 2]]]]"
    result = invoke("run", "logical_equals", four_d, four_d, "--dtype", "float32", "-f", "1_0", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "uint32", "shape": [1, 1, 1, 2], "data": [[[[1, 1]]]]}
    chosen = invoke("run", "logical_equals", four_d, four_d, "--dtype", "float32", "-f", "1_0", "--output-dtype", "uint8")
    assert chosen.exit_code == 3 and "OutputTensor data type UINT8 is not supported" in chosen.stderr
    assert dmlcli.run("logical_equals", np.float32([1]), np.float32([1])).dtype == np.uint8  # the default where allowed


@pytest.mark.parametrize("extra, words", [
    (["-o", "out.npy"], "with -o, --format takes npy or json (the output's format)"),
    (["--check", "[[255,127],[37,15]]"], "with --check the result is compared, not shown"),
])
def test_format_with_an_output_file_or_check_is_refused(tmp_path, monkeypatch, extra, words):
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "bit_xor", A, B, "--dtype", "uint8", "--format", "hex", *extra)
    assert result.exit_code == 2 and words in result.stderr and result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_no_color_removes_every_style_on_a_terminal(monkeypatch):
    """NO_COLOR: no colour, and no bold, dim or italic either (issue 12, bug 9)."""
    from dmlcli.display.rendering import make_console

    stream = io.StringIO()
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then takes the StringIO for a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    console = make_console(stream)
    assert console.is_terminal
    console.print("[bold]heavy[/bold] [dim]faint[/dim] [italic]slanted[/italic] [red]red[/red]")
    assert stream.getvalue() == "heavy faint slanted red\n"
    monkeypatch.delenv("NO_COLOR")
    styled = io.StringIO()
    make_console(styled).print("[bold]heavy[/bold]")
    assert "\x1b[" in styled.getvalue()  # the same console styles when NO_COLOR is not set


@pytest.mark.parametrize("command", [["describe", "bit_xor"], ["ops"], ["run", "bit_not", "[1, 2, 3]", "--dtype", "uint8"]])
def test_a_closed_pipe_ends_quietly_with_141(command):
    """`dmlcli describe bit_xor | head -1`: the reader goes away; dmlcli exits 141 with nothing on stderr."""
    quoted = " ".join("'" + part + "'" for part in command)
    script = f"'{sys.executable}' -m dmlcli {quoted} 2>err.txt | head -c 1 > /dev/null; echo ${{PIPESTATUS[0]}}"
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(["bash", "-c", script], cwd=folder, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "NO_COLOR": "1", "COLUMNS": "80"})
        errors = open(os.path.join(folder, "err.txt")).read()
    assert done.stdout.strip() in ("141", "0")  # 0 only if everything fitted in the pipe before head left
    assert errors == ""


def test_each_commands_help_lists_its_own_exit_codes_and_the_summaries_are_whole(monkeypatch):
    """Issue 12, bug 11: validate and dispatch cannot return 1, so their help does not list it."""
    monkeypatch.setenv("COLUMNS", "80")
    assert "1  --check found a mismatch" in invoke("run", "--help").stdout
    for command, codes in (("validate", "0235"), ("dispatch", "02345"), ("ops", "025"), ("describe", "025"),
                           ("info", "05"), ("show", "025"), ("test", "01245")):
        text = invoke(command, "--help").stdout
        listed = "".join(re.findall(r"^\s+(\d)  ", text.split("Exit codes:")[1], re.MULTILINE))
        assert listed == codes, command
    assert "1  a case failed or could not be run" in invoke("test", "--help").stdout
    top = invoke("--help").stdout
    assert "1  --check found a mismatch; test: a case failed or could not be run" in top
    assert "..." not in top.split("Commands:")[1]
    assert "Show the backends found: NumPy for the CPU; CuPy, CUDA and the" in top


def test_messages_show_what_the_user_wrote(tmp_path, monkeypatch):
    """Issue 12, bug 10: no Python reprs (doubled backslashes, True for JSON's true)."""
    monkeypatch.chdir(tmp_path)
    missing = invoke("run", "bit_not", "C:\\data\\a.npy")
    assert missing.exit_code == 2 and "input 1 'C:\\data\\a.npy': no such file" in missing.stderr
    boolean = invoke("run", "bit_not", "[true, 1]", "--dtype", "uint8")
    assert boolean.exit_code == 2 and "data[0] = true is not an integer" in boolean.stderr
    text = invoke("run", "bit_not", '[1, "x"]', "--dtype", "float32")
    assert text.exit_code == 2 and 'data[1] = "x" is not a number' in text.stderr
    # Names typed with a backslash are echoed with one, in every kind of "unknown ..." message.
    for args, echoed in ((["run", "bit\\not", "[1]"], "unknown operator 'bit\\not'"),
                         (["run", "bit_not", "[1]", "--dtype", "u\\8"], "unknown data type 'u\\8'"),
                         (["run", "bit_not", "[1]", "--dtype", "uint8", "--feature-level", "4\\1"],
                          "unknown feature level '4\\1'"),
                         (["run", "is_infinity", "[1]", "--dtype", "float32", "--infinity-mode", "n\\eg"],
                          "unknown InfinityMode 'n\\eg'")):
        result = invoke(*args)
        assert result.exit_code == 2 and echoed in result.stderr, (args, result.stderr)


def _completions(args, incomplete):
    from click.shell_completion import ShellComplete

    return ShellComplete(cli, {}, "dmlcli", "_DMLCLI_COMPLETE").get_completions(args, incomplete)


def test_shell_completion_completes_paths_as_paths_and_choices_as_choices():
    """Issue 12, bug 8: INPUT, -o, --check and MODEL.json leave file names to the shell; choices complete."""
    for args, incomplete in ((["run", "bit_xor"], "sam"), (["run", "bit_xor", "a.npy", "-o"], "ou"),
                             (["run", "bit_xor", "a.npy", "--check"], ""), (["validate", "bit_xor"], "x"),
                             (["dispatch"], "mod")):
        items = _completions(args, incomplete)
        assert [(item.type, item.value) for item in items] == [("file", incomplete)], args
    assert [item.value for item in _completions(["run", "bit_xor", "a.npy", "--dtype"], "uint")] == [
        "uint64", "uint32", "uint16", "uint8"]
    assert [item.value for item in _completions(["run", "is_infinity", "a.npy", "--infinity-mode"], "")] == [
        "either", "positive", "negative"]
    assert [item.value for item in _completions(["run", "round", "a.npy", "--rounding-mode"], "toward")] == [
        "toward_zero", "toward_infinity"]
    assert [item.value for item in _completions(["run", "bit_xor", "a.npy", "--backend"], "")] == ["cpu", "gpu", "auto"]
    assert "bit_xor" in [item.value for item in _completions(["run"], "bit_x")]


def test_bash_completion_in_a_real_shell_names_files(tmp_path):
    (tmp_path / "sample.npy").write_bytes(b"")
    env = {**os.environ, "_DMLCLI_COMPLETE": "bash_complete", "COMP_WORDS": "dmlcli run bit_xor sam", "COMP_CWORD": "3"}
    done = subprocess.run([sys.executable, "-m", "dmlcli"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip().splitlines() == ["file,sam"]  # bash's own file completion takes over from here
