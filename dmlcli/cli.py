"""The command line: a thin layer over dmlcli.api.

Exit codes: 0 success; 1 --check found a mismatch; 2 usage error or unreadable/malformed input;
3 the call breaks the operator's rules at that feature level; 4 the requested backend is not
available; 5 an internal error (a bug: re-run with --debug and report it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings

import click

from . import __version__
from .errors import EXIT_CHECK_FAILED, EXIT_USAGE, DmlcliError, DmlcliWarning, InputError

EXIT_INTERNAL = 5
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe
EXIT_TERMINATED = 143  # 128 + SIGTERM

EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  --check found a mismatch
  2  usage error, or unreadable or malformed input
  3  the call breaks the operator's rules at that feature level
  4  the requested backend is not available
  5  internal error (re-run with --debug and report it)"""


def _versions() -> str:
    from importlib import metadata

    import numpy

    cupy = "not installed"
    for dist in ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"):
        try:
            cupy = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:
            continue
    return f"dmlcli {__version__} (NumPy {numpy.__version__}, CuPy {cupy})"


class Terminated(BaseException):
    """SIGTERM arrived (a CI job's timeout, `kill`): unwind like Ctrl-C, so temporary files are removed.

    A BaseException, so that no `except Exception` on the way swallows it.
    """


def _raise_terminated(signum, frame):
    raise Terminated()


class DmlcliGroup(click.Group):
    """Turns dmlcli's errors into one line on stderr and the documented exit code."""

    def invoke(self, ctx: click.Context):
        try:
            previous_handler = signal.signal(signal.SIGTERM, _raise_terminated)
            installed = True
        except ValueError:  # not the main thread: leave signals alone
            installed = False
        try:
            return super().invoke(ctx)
        except Terminated:
            click.echo("dmlcli: terminated", err=True)
            ctx.exit(EXIT_TERMINATED)
        except DmlcliError as error:
            if _debug(ctx):
                raise
            click.echo(f"dmlcli: error: {_one_line(str(error))}", err=True)
            ctx.exit(error.exit_code)
        except click.exceptions.UsageError as error:
            # click's own three-line usage message, made one line like every other failure.
            if _debug(ctx):
                raise
            where = error.ctx.command_path if error.ctx is not None else ctx.command_path
            click.echo(f"dmlcli: error: {_one_line(error.format_message())} (see '{where} --help')", err=True)
            ctx.exit(error.exit_code)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("dmlcli: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # The reader of stdout went away (e.g. `| head`): stop quietly, as other Unix tools do.
            _silence_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except MemoryError:
            if _debug(ctx):
                raise
            click.echo("dmlcli: error: ran out of memory; for large .npy inputs write the result to a .npy "
                       "file (-o out.npy), which is streamed in constant memory", err=True)
            ctx.exit(EXIT_USAGE)
        except Exception as error:  # noqa: BLE001 - the last line of defence against tracebacks
            if _debug(ctx):
                raise
            first = _one_line(str(error))[:200]
            click.echo(f"dmlcli: internal error: {type(error).__name__}: {first} "
                       "(re-run with --debug for the traceback, and please report it)", err=True)
            ctx.exit(EXIT_INTERNAL)
        finally:
            if installed:
                signal.signal(signal.SIGTERM, previous_handler if previous_handler is not None else signal.SIG_DFL)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _silence_stdout() -> None:
    # Python flushes stdout at exit; with the pipe gone that would fail again, so point it at /dev/null.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a real file (as under CliRunner): nothing will be flushed to a pipe


def _debug(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool((root.obj or {}).get("debug")) or os.environ.get("DMLCLI_DEBUG") == "1"


def _complete_operator(ctx, param, incomplete):
    from .operators import OPERATORS

    return [op.name.lower() for op in OPERATORS if op.name.lower().startswith(incomplete.lower())]


def _complete_level(ctx, param, incomplete):
    from .feature_levels import ALL_FEATURE_LEVELS

    return [fl.short for fl in ALL_FEATURE_LEVELS if fl.short.startswith(incomplete)]


def tensor_options(command):
    """The options that describe a call, shared by run and validate."""
    options = [
        click.option("--feature-level", "-f", "feature_level", metavar="FL", default=None,
                     shell_complete=_complete_level,
                     help="DirectML feature level: 4.1, 4_1, DML_FEATURE_LEVEL_4_1 or 0x4100 [default: 6_4]."),
        click.option("--infinity-mode", metavar="MODE", default=None,
                     help="IS_INFINITY's InfinityMode: either (default), positive or negative."),
        click.option("--dtype", "dtype", metavar="TYPE", default=None,
                     help="Data type of inputs given as bare JSON lists (uint8, UINT8, DML_TENSOR_DATA_TYPE_UINT8, ...)."),
        click.option("--output-dtype", metavar="TYPE", default=None,
                     help="OutputTensor data type where the operator lets you choose (uint8 or uint32) [default: uint8]."),
        click.option("--broadcast", is_flag=True,
                     help="Broadcast inputs of different shapes by NumPy's rules (DirectML's zero strides)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@click.group(cls=DmlcliGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, "--version", "-V", message="%(version)s", package_name="dmlcli")
@click.option("--debug", is_flag=True, envvar="DMLCLI_DEBUG", help="Show Python tracebacks (for bug reports).")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Run DirectML's element-wise operators bit for bit, with DirectML's validation rules.

    \b
    Example:
      dmlcli run bit_xor '[[0,128],[42,255]]' '[[255,255],[1,1]]' --dtype uint8
    \b
    Shell completion (bash; zsh and fish likewise):
      eval "$(_DMLCLI_COMPLETE=bash_source dmlcli)"
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# click's version_option prints only our template; give it the library versions too.
def _version_callback(ctx, param, value):
    if value and not ctx.resilient_parsing:
        click.echo(_versions())
        ctx.exit(0)


for _param in cli.params:
    if _param.name == "version":
        _param.callback = _version_callback


def _read_inputs(sources, dtype_text):
    from .data_types import parse_data_type
    from .io.sources import read_tensor

    dtype = parse_data_type(dtype_text) if dtype_text else None
    return [read_tensor(source, label=f"input {i + 1}", dtype=dtype) for i, source in enumerate(sources)]


def _plan(operator, arrays, feature_level, infinity_mode, output_dtype, broadcast):
    from .api import plan
    from .data_types import from_numpy

    return plan(operator, [(from_numpy(a.dtype), a.shape) for a in arrays], feature_level=feature_level,
                parameters={"infinity_mode": infinity_mode}, output_dtype=output_dtype, broadcast=broadcast)


@contextlib.contextmanager
def _warnings_reported(quiet: bool):
    """Collect the warnings of a successful block and print dmlcli's own as one line each on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    _report_warnings(caught, quiet)


def _report_warnings(caught, quiet: bool) -> None:
    for warning in caught:
        if issubclass(warning.category, DmlcliWarning) and not quiet:
            click.echo(f"dmlcli: warning: {warning.message}", err=True)
        elif not issubclass(warning.category, DmlcliWarning):
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("operator", shell_complete=_complete_operator)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT [INPUT]")
@click.option("-o", "--output", "output", metavar="OUTPUT", default=None,
              help="Write the result to a .npy or .json file (by extension), or - for JSON on stdout.")
@tensor_options
@click.option("--format", "style", type=click.Choice(["table", "bits", "hex", "json"]), default="table",
              show_default=True, help="How to show the result on stdout when there is no -o.")
@click.option("--check", "expected", metavar="EXPECTED", default=None,
              help="Compare the result bit for bit with EXPECTED (.npy, .json or inline JSON); exit 1 on a mismatch.")
@click.option("--backend", type=click.Choice(["cpu", "gpu", "auto"]), default="cpu", show_default=True,
              help="cpu (NumPy), gpu (CuPy), or auto: the GPU where one is usable, else the CPU.")
@click.option("-q", "--quiet", is_flag=True, help="No warnings or progress on stderr.")
def run(operator, inputs, output, feature_level, infinity_mode, dtype, output_dtype, broadcast, style,
        expected, backend, quiet):
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
    from .api import execute
    from .operators import find_operator
    from .io.atomic import check_output_path, write_output
    from .io.room import check_room_for_output

    op = find_operator(operator)
    if output is not None:
        check_output_path(output)
        if expected is None and _run_streaming(op, inputs, output, feature_level, infinity_mode, dtype,
                                               output_dtype, broadcast, backend, quiet):
            return
    arrays = _read_inputs(inputs, dtype)
    verdict = _plan(op, arrays, feature_level, infinity_mode, output_dtype, broadcast)
    out = verdict.call.output
    check_room_for_output(output, out.shape, out.data_type.numpy_dtype, in_memory=True)  # before any work
    expected_array = _read_expected(expected, verdict) if expected is not None else None
    with _warnings_reported(quiet):
        result = execute(verdict, arrays, backend=backend)
        if output is not None:
            write_output(result.output, output)
    if expected_array is not None:
        from .comparison import compare

        report, same = compare(result.output, expected_array)
        click.echo(report)
        if not same:
            sys.exit(EXIT_CHECK_FAILED)
        return
    if output is None:
        _show(result, style, quiet)


def _run_streaming(op, inputs, output, feature_level, infinity_mode, dtype, output_dtype, broadcast, backend,
                   quiet) -> bool:
    """.npy files in, a .npy file out: stream in chunks (constant memory). False: not such a run."""
    from .streaming import is_streamable

    if not is_streamable(inputs, output):
        return False
    from .data_types import parse_data_type
    from .progress import progress_bar_factory
    from .streaming import stream_run

    with _warnings_reported(quiet):
        stream_run(op, inputs, output, dtype=parse_data_type(dtype) if dtype else None, feature_level=feature_level,
                   parameters={"infinity_mode": infinity_mode}, output_dtype=output_dtype, broadcast=broadcast,
                   backend=backend, progress=progress_bar_factory(quiet=quiet, description=op.name.lower()))
    return True


def _read_expected(source, verdict):
    from .io.sources import read_tensor

    return read_tensor(source, label="expected", bare_dtype=verdict.call.output.data_type)


def _show(result, style, quiet):
    from .rendering import show
    from .io.json_tensor import to_json_text

    if style == "json":
        with _warnings_reported(quiet):
            sys.stdout.write(to_json_text(result.output))
        return
    call = result.verdict.call
    out = call.output
    caption = (f"{call.operator.name} · {result.verdict.feature_level} · {result.backend} · "
               f"{out.data_type.name} · shape {list(out.shape)}")
    show(result.output, caption=caption, style=style, stream=sys.stdout)


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("operator", shell_complete=_complete_operator)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@tensor_options
def validate(operator, inputs, feature_level, infinity_mode, dtype, output_dtype, broadcast):
    """Check a call against OPERATOR's rules without running it.

    Prints the verdict and the lowest feature level that accepts these tensors; exit code 3
    and the broken rule on stderr when the call is not allowed. .npy inputs are checked from
    their headers alone.

    \b
    Example:
      dmlcli validate bit_xor '[1.5]' '[2.5]' --dtype float32 --feature-level 3_0
    """
    from .operators import find_operator

    op = find_operator(operator)
    arrays = _read_inputs(inputs, dtype)
    verdict = _plan(op, arrays, feature_level, infinity_mode, output_dtype, broadcast)
    tensors = ", ".join(t.describe() for t in verdict.call.tensors.values())
    click.echo(f"valid: {op.name} accepts {tensors} at {verdict.feature_level}")
    click.echo(f"lowest feature level that accepts this call: {verdict.lowest_feature_level}")


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("model", metavar="MODEL.json")
@click.option("--backend", type=click.Choice(["cpu", "gpu", "auto"]), default="cpu", show_default=True,
              help="cpu (NumPy), gpu (CuPy), or auto: the GPU where one is usable, else the CPU.")
@click.option("--feature-level", "-f", "feature_level", metavar="FL", default=None, shell_complete=_complete_level,
              help="DirectML feature level the dispatches are validated at [default: 6_4].")
@click.option("-i", "--iterations", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each dispatch command this many times, as DxDispatch's -i (in-place models compound).")
@click.option("-w", "--warmup", type=click.IntRange(min=0), default=1, show_default=True,
              help="Leave this many first samples out of the timing median, as DxDispatch's -w.")
@click.option("--no-timing", is_flag=True, help="Do not print the per-dispatch timing lines.")
@click.option("-q", "--quiet", is_flag=True, help="No warnings on stderr.")
def dispatch(model, backend, feature_level, iterations, warmup, no_timing, quiet):
    """Run a DxDispatch model (resources, dispatchables, commands) on Linux, CPU or GPU.

    Every dispatch is checked against DirectML's rules before anything runs; operators outside
    dmlcli's set, HLSL or ONNX dispatchables and textures are refused (exit 2).

    \b
    Example:
      dmlcli dispatch tests/models/bitwise_broadcast.json -i 10
    """
    from .dispatch import load_model, run_model

    parsed = load_model(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run_model(parsed, backend=backend, feature_level=feature_level, iterations=iterations, warmup=warmup,
                      emit=click.echo, timing=not no_timing)
        finally:
            _report_warnings(caught, quiet)


@cli.command()
def ops():
    """List every operator: its inputs, parameters and the feature level it came in.

    \b
    Example:
      dmlcli ops
    """
    from rich.table import Table

    from .operators import OPERATORS
    from .rendering import make_console

    table = Table(title="DirectML element-wise operators in dmlcli")
    for column in ("operator", "inputs", "parameters", "output type", "introduced"):
        table.add_column(column, no_wrap=True)
    for op in sorted(OPERATORS, key=lambda o: o.name):
        params = ", ".join(f"{p.name} ({'|'.join(v.lower() for v, _ in p.values)})" for p in op.parameters)
        output_type = "choice, default " + op.default_output_type.name if op.output_type_is_choice else "as inputs"
        if op.output_type_is_choice and len(op.row_at(op.introduced).tensors[op.output].data_types) == 1:
            output_type = op.default_output_type.name
        table.add_row(op.name.lower(), ", ".join(op.inputs), params or "-", output_type, op.introduced.short)
    make_console(sys.stdout).print(table)


@cli.command()
@click.argument("operator", shell_complete=_complete_operator)
def describe(operator):
    """Show OPERATOR's formula, parameters and support table at every feature level.

    \b
    Example:
      dmlcli describe bit_shift_left
    """
    from rich.table import Table

    from .feature_levels import ALL_FEATURE_LEVELS
    from .operators import find_operator
    from .rendering import make_console

    op = find_operator(operator)
    console = make_console(sys.stdout)
    console.print(f"{op.dml_name} (DML_OPERATOR_TYPE {op.enum_value})", markup=False)
    console.print(op.summary, markup=False)
    console.print(f"  {op.formula}", markup=False)
    console.print(f"Introduced in {op.introduced}. Tensors: {', '.join(op.tensors)}.", markup=False)
    for param in op.parameters:
        values = ", ".join(f"{param.enum_prefix}{v} = {n}" for v, n in param.values)
        console.print(f"Parameter {param.name} ({param.option.replace('_', '-')}): {param.help}; {values}; "
                      f"default {param.default.lower()}.", markup=False)
    constraints = []
    if op.same_data_type:
        constraints.append(f"{', '.join(op.same_data_type)} must have the same DataType.")
    constraints.append(f"{', '.join(op.same_sizes)} must have the same DimensionCount and Sizes.")
    if op.output_type_is_choice:
        constraints.append(f"The {op.output} data type is chosen with --output-dtype "
                           f"(default {op.default_output_type.name}).")
    if op.in_place:
        constraints.append("In-place: the output may alias an input.")
    for line in constraints + list(op.notes):
        console.print(line, markup=False)
    table = Table(title=f"{op.name}: tensor support by feature level (dimension counts; data types)")
    table.add_column("feature level", no_wrap=True)
    for name in op.tensors:
        table.add_column(name)
    for fl in ALL_FEATURE_LEVELS:
        row = op.row_at(fl)
        if row is None:
            table.add_row(fl.short, *(["not available"] * len(op.tensors)))
            continue
        cells = [f"{row.tensors[n].describe_dims()}; {row.tensors[n].describe_data_types()}" for n in op.tensors]
        table.add_row(fl.short, *cells)
    console.print(table)


@cli.command()
def info():
    """Show the backends found: NumPy for the CPU; CuPy, CUDA and the device for the GPU.

    Exits 0 whether or not a GPU is usable; 'GPU: not available (reason)' says why not.

    \b
    Example:
      dmlcli info
    """
    from .backends import cpu, gpu
    from .errors import BackendUnavailableError

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


def main(argv=None) -> None:
    cli.main(args=argv, prog_name="dmlcli")


if __name__ == "__main__":  # pragma: no cover
    main()
