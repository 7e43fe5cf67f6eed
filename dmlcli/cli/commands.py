"""The commands that check or run calls: run, validate, dispatch, info. Each is a thin layer over the engine."""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..errors import EXIT_CHECK_FAILED
from .app import cli, exit_codes_help, report_warnings, warnings_reported
from .options import (backend_option, call_options, complete_operator, complete_path, feature_level_option,
                      parameter_values, quiet_option)


def _request(operator, arguments: dict):
    """The engine's request from a command's arguments: the call options and the parameter options."""
    from ..engine import request

    parameters = parameter_values(arguments)
    return request(operator, feature_level=arguments.pop("feature_level"), broadcast=arguments.pop("broadcast"),
                   output_dtype=arguments.pop("output_dtype"), float_rules=arguments.pop("float_rules"), **parameters)


def _declared_dtype(text):
    from ..data_types import parse_data_type

    return parse_data_type(text) if text else None


@cli.command(epilog=exit_codes_help(0, 1, 2, 3, 4, 5))
@click.argument("operator", shell_complete=complete_operator)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT [INPUT]", shell_complete=complete_path)
@click.option("-o", "--output", "output", metavar="OUTPUT", default=None, shell_complete=complete_path,
              help="Write the result to a .npy or .json file (by extension), or - for JSON on stdout.")
@call_options
@click.option("--format", "style", type=click.Choice(["table", "bits", "hex", "json"]), default=None,
              help="How to show the result on stdout [default: table]; not with -o (the extension decides) "
                   "or --check (which prints a verdict).")
@click.option("--check", "expected", metavar="EXPECTED", default=None, shell_complete=complete_path,
              help="Compare the result with EXPECTED (.npy, .json or inline JSON): bit for bit for exact operators "
                   "and integer outputs, else within the operator's tolerance (see describe); exit 1 on a mismatch.")
@click.option("--tolerance", metavar="RULE", default=None,
              help="Override the tolerance of --check for float outputs: ulp:N, atol:X or exact.")
@backend_option
@quiet_option()
def run(operator, inputs, output, dtype, style, expected, tolerance, backend, quiet, **arguments):
    """Run OPERATOR on the INPUT tensors and show or write the result.

    INPUT is a .npy file, a .json file, - (JSON on stdin) or an inline JSON literal.
    With .npy inputs and a .npy -o (and no --check), the run streams in chunks in constant
    memory, with a progress bar on a terminal (chunk size: DMLCLI_CHUNK_BYTES, default 1M on
    the CPU, 64M on the GPU).

    \b
    Examples:
      dmlcli run bit_xor samples/bit_xor_a.json samples/bit_xor_b.json
      dmlcli run is_infinity '[1, "inf", "-inf", "nan"]' --dtype float32 --infinity-mode positive
      dmlcli run bit_shift_left a.npy b.npy -o out.npy --feature-level 4_1
      dmlcli run bit_not '[0, 1]' --dtype float16 --format bits
    """
    from ..engine import run_sources
    from ..progress import progress_bar_factory

    if style is not None and (output is not None or expected is not None):
        from ..errors import InputError

        raise InputError(f"--format {style} shows a result on stdout, but with "
                         f"{'-o the output file decides its format by its extension' if output is not None else '--check the result is compared, not shown'}"
                         "; leave --format out")
    style = style or "table"
    req = _request(operator, arguments)
    override = None
    if tolerance is not None:
        from ..comparison import parse_tolerance

        override = parse_tolerance(tolerance)
    expected_array = []

    def read_expected(verdict) -> None:  # before any work, so that a bad EXPECTED costs nothing
        from ..io.sources import read_tensor

        array = read_tensor(expected, label="expected", bare_dtype=verdict.call.output.data_type)
        from ..io.npy import read_mapped  # read, not mapped: no SIGBUS should it be truncated meanwhile

        expected_array.append(read_mapped(array, where=f"expected '{expected}'"))

    if output is None and style == "json":
        output = "-"  # JSON on stdout, as -o - writes it: the same room check, the same writer
    with warnings_reported(quiet):
        outcome = run_sources(req, inputs, output=output, dtype=_declared_dtype(dtype), backend=backend,
                              progress=progress_bar_factory(quiet=quiet, description=req.operator.cli_name),
                              stream=expected is None, before_execute=read_expected if expected else None)
        report_warnings(outcome.warnings, quiet)
        if style == "json":
            return
    if expected_array:
        from ..comparison import compare, rule_for

        rule = rule_for(req.operator, outcome.output.dtype, override, outcome.verdict.call.parameters)
        report, same = compare(outcome.output, expected_array[0], rule)
        click.echo(report, err=output == "-")  # where stdout carries the data, the verdict goes to stderr
        if not same:
            sys.exit(EXIT_CHECK_FAILED)
        return
    if output is None:
        _show(outcome, style)


def _show(outcome, style):
    from ..rendering import show

    call = outcome.verdict.call
    out = call.output
    caption = (f"{call.operator.name} · {outcome.verdict.feature_level} · {outcome.backend} · "
               f"{out.data_type.name} · shape {list(out.shape)}")
    show(outcome.output, caption=caption, style=style, stream=sys.stdout)


@cli.command(epilog=exit_codes_help(0, 2, 3, 5))
@click.argument("operator", shell_complete=complete_operator)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...", shell_complete=complete_path)
@call_options
def validate(operator, inputs, dtype, **arguments):
    """Check a call against OPERATOR's rules without running it.

    Prints the verdict and the lowest feature level that accepts these tensors; exit code 3
    and the broken rule on stderr when the call is not allowed. .npy inputs are checked from
    their headers alone.

    \b
    Example:
      dmlcli validate bit_xor '[1.5]' '[2.5]' --dtype float32 --feature-level 3_0
    """
    from ..engine import plan_sources

    req = _request(operator, arguments)
    verdict = plan_sources(req, inputs, _declared_dtype(dtype))
    tensors = ", ".join(t.describe() for t in verdict.call.tensors.values())
    click.echo(f"valid: {req.operator.name} accepts {tensors} at {verdict.feature_level}")
    click.echo(f"lowest feature level that accepts this call: {verdict.lowest_feature_level}")
    from .catalog import exactness_summary

    click.echo(f"result: {exactness_summary(req.operator)}")


@cli.command(epilog=exit_codes_help(0, 2, 3, 4, 5))
@click.argument("model", metavar="MODEL.json", shell_complete=complete_path)
@backend_option
@feature_level_option("DirectML feature level the dispatches are validated at [default: 6_4].")
@click.option("-i", "--iterations", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each dispatch command this many times, as DxDispatch's -i (in-place models compound).")
@click.option("-w", "--warmup", type=click.IntRange(min=0), default=1, show_default=True,
              help="Leave this many first samples out of the timing median, as DxDispatch's -w.")
@click.option("--no-timing", is_flag=True, help="Do not print the per-dispatch timing lines.")
@quiet_option("No warnings on stderr.")
def dispatch(model, backend, feature_level, iterations, warmup, no_timing, quiet):
    """Run a DxDispatch model (resources, dispatchables, commands) on Linux, CPU or GPU.

    Every dispatch is checked against DirectML's rules before anything runs; operators outside
    dmlcli's set, HLSL or ONNX dispatchables and textures are refused (exit 2).

    \b
    Example:
      dmlcli dispatch tests/models/bitwise_broadcast.json -i 10
    """
    from ..dispatch import load_model, run_model

    parsed = load_model(model)
    with warnings_reported(quiet):
        run_model(parsed, backend=backend, feature_level=feature_level, iterations=iterations, warmup=warmup,
                  emit=click.echo, timing=not no_timing)


@cli.command(epilog=exit_codes_help(0, 5))
def info():
    """Show the backends found: NumPy for the CPU; CuPy, CUDA and the device for the GPU.

    Exits 0 whether or not a GPU is usable; 'GPU: not available (reason)' says why not.

    \b
    Example:
      dmlcli info
    """
    from ..backends import cpu, gpu
    from ..errors import BackendUnavailableError

    found = ["cpu"]
    cpu_facts = cpu.create().describe()
    click.echo(f"dmlcli {__version__}")
    click.echo(f"CPU: NumPy {cpu_facts['numpy']}")
    try:
        facts = gpu.create().describe()
    except BackendUnavailableError as why:
        click.echo(f"GPU: not available ({str(why).removeprefix('GPU backend: ')})")
    else:
        found.append("gpu")
        click.echo(f"GPU: {facts['device']}, {facts['device_memory_bytes'] / 2**30:.1f} GiB; CuPy {facts['cupy']}, "
                   f"CUDA runtime {facts['cuda_runtime']}, driver supports CUDA {facts['cuda_driver']}")
    click.echo(f"backends found: {', '.join(found)} (--backend auto picks {found[-1]})")
