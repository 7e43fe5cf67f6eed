"""`dmlcli run OP --help` (issue 31, item 3): one screen about one operator, its own options first with this
operator's defaults, a working example for every operator (each run here as the help prints it), the common options
as a short list, and an unknown operator's help is its error (exit 2)."""

from __future__ import annotations

import math
import shlex
import subprocess
import sys

import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.cli.examples import EXAMPLES
from dmlcli.cli.operator_help import SCREEN_LINES

from conftest import REPO

OPERATORS = dmlcli.operators.all_operators()


def help_of(*args: str, columns: int = 80) -> str:
    # click's help on a real terminal is 2 columns narrower than it (HelpFormatter); terminal_width is taken as is.
    result = CliRunner().invoke(cli, list(args), terminal_width=columns - 2, prog_name="dmlcli")
    assert result.exit_code == 0, result.output
    return result.stdout


def screen_lines(text: str, columns: int = 80) -> int:
    """The lines a terminal of `columns` shows for `text` (a longer line folds onto several)."""
    return sum(max(1, math.ceil(len(line) / columns)) for line in text.rstrip("\n").split("\n"))


def example_command(text: str) -> list[str]:
    """The example's command as the help prints it, read as a shell reads it: lines continued by a backslash, and
    a quoted JSON tensor going on past a line break (the shell keeps it; JSON reads it as a blank)."""
    lines = text.split("Example:\n", 1)[1].split("\n\n", 1)[0].split("\n")
    return shlex.split("\n".join(line.removesuffix("\\").strip() for line in lines))


def test_every_operator_has_an_example():
    assert sorted(EXAMPLES) == sorted(op.cli_name for op in OPERATORS)


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.cli_name)
def test_each_operator_s_help_fits_a_screen_and_its_example_runs(op):
    text = help_of("run", op.cli_name, "--help")
    assert screen_lines(text) <= SCREEN_LINES, text
    assert all(len(line) <= 80 for line in text.split("\n")), text
    assert text.index(f"{op.name}'s options") < text.index("Common options")
    command = example_command(text)
    assert command[:3] == ["dmlcli", "run", op.cli_name]
    result = CliRunner().invoke(cli, command[1:])
    assert result.exit_code == 0, (command, result.output)
    validated = help_of("validate", op.cli_name, "--help")
    assert screen_lines(validated) <= SCREEN_LINES
    assert example_command(validated)[:3] == ["dmlcli", "validate", op.cli_name]


def test_the_own_options_come_first_with_this_operator_s_defaults():
    cast = " ".join(help_of("run", "cast", "--help").split())
    assert ("--output-dtype TYPE OutputTensor's data type: float64, float32, float16, int64, int32, int16, int8, "
            "uint64, uint32, uint16, uint8 [default: float32]") in cast
    argmax = " ".join(help_of("run", "argmax", "--help").split())
    assert "--output-dtype TYPE OutputTensor's data type: int64, int32, uint64, uint32 [default: uint32]" in argmax
    assert argmax.index("--axes INTS") < argmax.index("--output-dtype TYPE") < argmax.index("Common options")
    bit_xor = help_of("run", "bit_xor", "--help")
    assert "--output-dtype" not in bit_xor and "BIT_XOR has no parameters of its own." in bit_xor
    generator = help_of("run", "fill_value_sequence", "--help")
    assert "--output-shape SIZES" in generator and "Inputs: none" in generator


def test_the_issue_s_convolution_help():
    """Was 192 lines: the options after 95 lines of generic ones, no example, one paragraph printed 7 times."""
    text = help_of("run", "convolution", "--help")
    lines = text.split("\n")
    assert lines[0] == "Usage: dmlcli run convolution [OPTIONS] InputTensor FilterTensor [BiasTensor]"
    assert text.count("an activation applied") + text.count("the activation applied") == 1
    own = text.index("CONVOLUTION's options")
    assert own < text.index("Example:") < text.index("Common options")
    assert text[:own].count("\n") < 10
    assert "--output, --feature-level, --dtype, --convert, --broadcast, --float-rules," in text
    assert "The whole entry (formula, support table, notes): dmlcli describe convolution." in " ".join(text.split())


def test_run_help_without_an_operator_keeps_every_option_whole():
    text = help_of("run", "--help")
    for described in ("--tolerance RULE", "Override the tolerance of --check", "--output-shape SIZES",
                      "1  --check found a mismatch", "dmlcli run OPERATOR --help"):
        assert described in text


@pytest.mark.parametrize("command", ["run", "validate"])
def test_an_unknown_operator_s_help_is_its_error(command):
    result = CliRunner().invoke(cli, [command, "no_such_operator", "--help"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("dmlcli: error: unknown operator 'no_such_operator'")


def test_a_real_subprocess_at_80_columns():
    done = subprocess.run([sys.executable, "-m", "dmlcli", "run", "convolution", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                                           "PYTHONPATH": str(REPO), "COLUMNS": "80"})
    assert done.returncode == 0 and done.stderr == ""
    assert screen_lines(done.stdout) <= SCREEN_LINES and max(len(line) for line in done.stdout.split("\n")) <= 80
    # (`conv` is ONNX's Conv since issue 31's item 2: tests/test_onnx_spellings.py.)
    unknown = subprocess.run([sys.executable, "-m", "dmlcli", "run", "convolutoin", "--help"], cwd=REPO,
                             capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                                              "PYTHONPATH": str(REPO)})
    assert unknown.returncode == 2 and unknown.stdout == "" and "unknown operator 'convolutoin'" in unknown.stderr


@pytest.mark.parametrize("name", ["convolution", "roi_align1", "multihead_attention1", "cast"])
def test_in_a_pseudo_terminal_of_80_columns(name):
    from test_terminal_pty import in_a_terminal

    code, lines = in_a_terminal("run", name, "--help", rows=100)
    assert code == 0
    assert len(lines) <= SCREEN_LINES and all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith(f"Usage: dmlcli run {name} [OPTIONS]")
