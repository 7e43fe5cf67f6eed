"""The commands that check or run calls: run, validate, dispatch, info. Each is a thin layer over the engine."""

from __future__ import annotations

import sys

import click

from ..version import __version__
from ..errors import EXIT_CHECK_FAILED
from .app import cli, exit_codes_help, report_warnings, warnings_reported
from .json_output import echo_json, format_option, validate_as_json
from .check import max_diffs_option, report_option
from .options import (OperatorCommand, WholeNumbers, backend_option, call_options, complete_operator,
                      complete_path, dask_run_options, dask_settings, feature_level_option, parameter_values,
                      quiet_option)


def _request(operator, arguments: dict, quiet: bool = False):
    """The engine's request from a command's arguments (the call options and the operator's own options), and the
    ONNX spelling the operator was named in (None for a DirectML name). An ONNX name (ReduceMean) is its DirectML
    operator with the fields the suite's ONNX table fixes, said on stderr ("ONNX's ReduceMean is reduce --function
    average"; not with --quiet)."""
    from ..engine import request
    from ..onnx_spellings import clash_note, resolve

    found, spelling = resolve(operator)
    parameters = parameter_values(found, arguments)
    if spelling is not None:
        parameters = spelling.with_fixed(parameters)
    # A name typed as ONNX spells one that means a DirectML operator (Softmax) says what ONNX's would be.
    note = spelling.line() if spelling is not None else clash_note(operator, found)
    if note is not None and not quiet:
        click.echo(f"dmlcli: {note}", err=True)
    # validate has no --allow-tf32: it changes how a result is computed and checked, not whether DirectML
    # accepts the call.
    return request(found, feature_level=arguments.pop("feature_level"), broadcast=arguments.pop("broadcast"),
                   output_dtype=arguments.pop("output_dtype"), float_rules=arguments.pop("float_rules"),
                   output_shape=arguments.pop("output_shape"), allow_tf32=arguments.pop("allow_tf32", False),
                   outputs=arguments.pop("asked_outputs"), **parameters), spelling


def _declared_dtype(text):
    from ..data_types import parse_data_type

    return parse_data_type(text) if text else None


@cli.command(cls=OperatorCommand, exit_codes=(0, 1, 2, 3, 4, 5))
@click.argument("operator", shell_complete=complete_operator)
# No INPUT at all for the generators (FILL_VALUE_CONSTANT, ...): --output-shape gives their output's Sizes.
@click.argument("inputs", nargs=-1, metavar="[INPUT]...", shell_complete=complete_path)
@click.option("-o", "--output", "outputs", metavar="OUTPUT", multiple=True, shell_complete=complete_path,
              help="Write the result to a .npy or .json file (by extension, or as --format npy|json says), or - for "
                   "JSON on stdout. An operator with several outputs (SPLIT, TOP_K) takes one -o per output (those "
                   "--outputs names), or one .npz for all.")
@call_options
@click.option("--allow-tf32", "allow_tf32", is_flag=True,
              help="Let FLOAT32 matrix products on the GPU use TF32 tensor cores, as DirectML's "
                   "DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION allows; results are then checked against a "
                   "TF32-wide tolerance (GEMM, CONVOLUTION, RNN, GRU, LSTM; other operators and the CPU: no change).")
@click.option("--format", "style", type=click.Choice(["table", "bits", "hex", "json", "npy"]), default=None,
              help="How to show the result on stdout [default: table]; with -o, npy or json name the output's "
                   "format whatever its extension (-o /dev/null takes any); not with --check (which prints a "
                   "verdict).")
@click.option("--check", "expected", metavar="EXPECTED", default=None, shell_complete=complete_path,
              help="Compare the result with EXPECTED (.npy, .json or inline JSON): bit for bit for exact operators "
                   "and integer outputs, else within the operator's tolerance (see describe: ULP or an absolute "
                   "floor, and for an operator that sums terms each element's sum bound, K x u x the sum of the "
                   "terms' magnitudes); exit 1 for a NaN against a number or an element out of tolerance. An "
                   "element that differs only by a flushed subnormal or the sign of a zero passes, and the verdict "
                   "counts it.")
@click.option("--tolerance", metavar="RULE", default=None,
              help="Override the tolerance of --check for float outputs: ulp:N, atol:X, ulp:N,atol:X (either may "
                   "hold), rtol:R,atol:A (numpy.allclose: |got - expected| <= A + R*|expected|), exact, or bits "
                   "(bit for bit with no exception: a flushed subnormal or a zero's sign fails too).")
@max_diffs_option
@report_option
@backend_option
@dask_run_options
@quiet_option()
@click.option("--save-case", "save_case", metavar="CASE.json", default=None, shell_complete=complete_path,
              callback=lambda ctx, param, value: _checked_case_path(value),
              help="Also write the call and its result as a case file for dmlcli test (large tensors as .npy beside it).")
def run(operator, inputs, outputs, dtype, style, expected, tolerance, max_diffs, report, backend, quiet, save_case,
        scheduler, workers, chunks, **arguments):
    """Run OPERATOR on the INPUT tensors and show or write the result.

    INPUT is a .npy file, a .json file, a .npz file (file.npz:name), - (stdin: .npy or JSON) or an
    inline JSON literal. OPERATOR's own options: dmlcli run OPERATOR --help.
    With .npy inputs and a .npy -o, or JSON output (-o x.json, -o -, --format json), and no --check,
    the run streams in chunks in constant memory, with a progress bar on a terminal (chunk size:
    DMLCLI_CHUNK_BYTES, default 1M on the CPU, 64M on the GPU).

    \b
    Examples:
      dmlcli run bit_xor samples/bit_xor_a.json samples/bit_xor_b.json
      dmlcli run is_infinity '[1, "inf", "-inf", "nan"]' --dtype float32 --infinity-mode positive
      dmlcli run bit_shift_left a.npy b.npy -o out.npy --feature-level 4_1
      dmlcli run bit_not '[0, 1]' --dtype float16 --format bits
      dmlcli run bit_xor a.zarr b.zarr -o out.zarr --workers 4
      dmlcli run fill_value_sequence --output-shape 2,3 --output-dtype int32 --value-start 5 --value-delta -1
      dmlcli run gemm a.npy b.npy --backend gpu --allow-tf32 --check expected.npy
      dmlcli run convolution x.npy w.npy --check ref.npy --tolerance rtol:1e-5,atol:1e-6
    """
    from ..engine import run_sources
    from ..display.progress import progress_bar_factory
    from . import check as checking
    from ..io.sources import check_stdin_read_once

    checking.check_distinct_outputs(_output_options(outputs, report, save_case, len(inputs)))
    convert = _conversion_targets(arguments.pop("convert"))
    if len(outputs) > 1:
        return _run_to_several(operator, inputs, list(outputs), dtype, style, expected, save_case, backend, quiet,
                               (scheduler, workers, chunks), arguments, convert)
    output = outputs[0] if outputs else None
    output, style = checking.stdout_target(output, style)
    output_format = checking.file_format(output, style)
    if output_format is not None:
        style = None
    check_stdin_read_once([*inputs, expected])
    checking.check_report_options(expected, report)
    checking.check_binary_stdout(output)
    if style is not None and expected is not None:
        from ..errors import InputError

        raise InputError(f"--format {style} shows a result on stdout, but with --check the result is compared, "
                         "not shown; leave --format out")
    style = style or "table"
    req, _ = _request(operator, arguments, quiet)
    override = None
    if tolerance is not None:
        from ..checking.comparison import parse_tolerance

        override = parse_tolerance(tolerance)
    expected_array = []
    # --save-case needs the inputs and the result in memory, so a checked run with it does not stream; nor does the
    # check of an operator that sums terms by its own rule: its sum bound is computed from the inputs.
    streamed_check = (save_case is None and checking.streams_with_check(inputs, output, expected, output_format)
                      and not checking.bound_needs_inputs(req, inputs, _declared_dtype(dtype), override))
    if streamed_check:
        checking.check_expected_header(expected)

    def read_expected(verdict) -> None:  # before any work, so that a bad EXPECTED costs nothing
        expected_array.append(checking.read_expected_tensor(expected, verdict.call.output.data_type))

    if output is None and style == "json":
        output = "-"  # JSON on stdout, as -o - writes it: the same room check, the same writer
    with warnings_reported(quiet):
        outcome = run_sources(req, inputs, output=output, dtype=_declared_dtype(dtype), backend=backend,
                              progress=progress_bar_factory(quiet=quiet, description=req.operator.cli_name),
                              stream=(expected is None or streamed_check) and save_case is None,
                              before_execute=read_expected if expected else None,
                              dask=dask_settings(scheduler, workers, chunks), output_format=output_format,
                              convert=convert)
        report_warnings(outcome.warnings, quiet)
        if save_case is not None:
            from ..suite.save import save_case as write_case

            write_case(save_case, outcome, req)
        if style == "json":
            return
    if expected_array or streamed_check:
        from ..checking.comparison import MAX_LISTED, compare_arrays, compare_npy_files, rule_for
        from ..io.targets import is_stdout

        listed = MAX_LISTED if max_diffs is None else max_diffs
        out_dtype = outcome.verdict.call.output.data_type.numpy_dtype
        call = outcome.verdict.call
        declared = _declared_dtype(dtype)
        arrays = None if streamed_check else checking.inputs_for_bound(outcome, inputs, declared, override)
        rule = rule_for(req.operator, out_dtype, override, call.parameters, call, inputs=arrays)
        flushes = not req.operator.native_encoding  # --float-rules d3d leaves bit-pattern operators alone
        if streamed_check:  # both files chunk by chunk, in constant memory, as the run itself streamed
            from ..engine.streaming import chunk_bytes_from_environment

            comparison = compare_npy_files(output, expected, rule, chunk_bytes=chunk_bytes_from_environment(),
                                           max_listed=listed, d3d_flushes=flushes)
        else:
            array, form = expected_array[0]
            # JSON holds NaN only as "nan": against a JSON golden file any NaN matches any NaN.
            comparison = compare_arrays(outcome.output, array, rule, nan_equal=form == "json", max_listed=listed,
                                        d3d_flushes=flushes)
        click.echo(comparison.text(), err=is_stdout(output))  # where stdout carries the data, the verdict goes to stderr
        if report is not None:
            checking.write_report(report, comparison, outcome)
        if not comparison.passed:
            sys.exit(EXIT_CHECK_FAILED)
        return
    if output is None:
        _show(outcome, style)


def _output_options(outputs, report, save_case, input_count: int) -> list[tuple[str, str]]:
    """Every file a run may write, with the option that names it: each -o, --report, --save-case and the tensor
    files --save-case writes beside the case."""
    named = [("-o", output) for output in outputs] + [("--report", report), ("--save-case", save_case)]
    if save_case is not None:
        from ..suite.save import tensor_files

        named += [(f"--save-case {save_case}'s tensor file", path) for path in tensor_files(save_case, input_count)]
    return named


def _conversion_targets(given):
    """--convert's types (none: no import of io/convert.py)."""
    if not given:
        return ()
    from ..io.convert import conversion_targets

    return conversion_targets(given)


def _run_to_several(operator, inputs, outputs, dtype, style, expected, save_case, backend, quiet, dask, arguments,
                    convert):
    """`-o a.npy -o b.npy`: one target per output tensor of an operator with several (SPLIT, TOP_K)."""
    from ..engine import run_sources
    from ..errors import InputError

    for given, what in ((style, "--format"), (expected, "--check"), (save_case, "--save-case")):
        if given is not None:
            raise InputError(f"{what} goes with one output; with several -o, leave {what} out")
    req, _ = _request(operator, arguments, quiet)
    with warnings_reported(quiet):
        outcome = run_sources(req, inputs, output=outputs, dtype=_declared_dtype(dtype), backend=backend,
                              dask=dask_settings(*dask), convert=convert)
        report_warnings(outcome.warnings, quiet)


def _checked_case_path(value):
    if value is None:  # the usual run: the suite package (and multiprocessing) stays unimported
        return None
    from ..suite.save import check_case_path

    return check_case_path(value)


def _show(outcome, style):
    """The result as a table (each output with its name in the caption, where there are several)."""
    from ..display.rendering import show

    call = outcome.verdict.call
    tensors = call.outputs
    for position, (array, out) in enumerate(zip(outcome.all_outputs, tensors)):
        named = f"{out.name} · " if len(tensors) > 1 else ""
        caption = (f"{call.operator.name} · {named}{outcome.verdict.feature_level} · {outcome.backend} · "
                   f"{out.data_type.name} · shape {list(out.shape)}")
        caption += "".join(f" · {conversion.describe()}" for conversion in outcome.conversions)
        if position:
            click.echo("")
        show(array, caption=caption, style=style, stream=sys.stdout)


@cli.command(cls=OperatorCommand, exit_codes=(0, 2, 3, 5))
@click.argument("operator", shell_complete=complete_operator)
# No INPUT at all for the generators (FILL_VALUE_CONSTANT, ...): --output-shape gives their output's Sizes.
@click.argument("inputs", nargs=-1, metavar="[INPUT]...", shell_complete=complete_path)
@call_options
@format_option
def validate(operator, inputs, dtype, output_format, **arguments):
    """Check a call against OPERATOR's rules without running it.

    Prints the verdict and the lowest feature level that accepts these tensors; exit code 3
    and the broken rule on stderr when the call is not allowed. .npy inputs are checked from
    their headers alone.

    \b
    Examples:
      dmlcli validate bit_xor '[1.5]' '[2.5]' --dtype float32 --feature-level 3_0
      dmlcli validate bit_xor a.npy b.npy --format json | jq .verdict
    """
    from ..engine import plan_sources

    convert = _conversion_targets(arguments.pop("convert"))
    req, spelling = _request(operator, arguments)
    if output_format == "json":
        return validate_as_json(req, inputs, _declared_dtype(dtype), convert, spelling)
    verdict = plan_sources(req, inputs, _declared_dtype(dtype), convert)
    tensors = ", ".join(t.describe() for t in verdict.call.tensors.values())
    click.echo(f"valid: {req.operator.name} accepts {tensors} at {verdict.feature_level}")
    click.echo(f"lowest feature level that accepts this call: {verdict.lowest_feature_level}")
    from .reports import work_report

    work = work_report(verdict.call)
    if work is not None:
        click.echo(f"work: {work['element_reads']:,} element reads (output elements x window elements), "
                   f"{work['element_reads'] / work['tensor_elements']:,.0f} times the {work['tensor_elements']:,} "
                   "elements of its tensors")
    from .catalog import check_summary, exactness_summary

    click.echo(f"result: {exactness_summary(req.operator)}")
    click.echo(f"check: {check_summary(verdict.call)}")


@cli.command(epilog=exit_codes_help(0, 2, 3, 4, 5))
@click.argument("model", metavar="MODEL.json", shell_complete=complete_path)
@backend_option
@feature_level_option("DirectML feature level the dispatches are validated at [default: 6_4].")
@click.option("-i", "--iterations", type=WholeNumbers(min=1), default=1, show_default=True,
              help="Run each dispatch command this many times, as DxDispatch's -i (in-place models compound).")
@click.option("-w", "--warmup", type=WholeNumbers(min=0), default=1, show_default=True,
              help="Leave this many first samples out of the timing median, as DxDispatch's -w.")
@click.option("--no-timing", is_flag=True, help="Do not print the per-dispatch timing lines.")
@click.option("--output-dir", metavar="DIR", default=None, shell_complete=complete_path,
              help="Folder the model's writeFile targets are written in, and must stay in [default: the current folder].")
@click.option("--allow-paths-outside", is_flag=True,
              help="Let the model write outside the output folder and read files outside its own folder "
                   "(absolute paths, .., links), as DxDispatch does. Only for models you trust.")
@quiet_option("No warnings on stderr.")
def dispatch(model, backend, feature_level, iterations, warmup, no_timing, output_dir, allow_paths_outside, quiet):
    """Run a DxDispatch model (resources, dispatchables, commands) on Linux, CPU or GPU.

    Every dispatch is checked against DirectML's rules before anything runs; operators outside
    dmlcli's set, HLSL dispatchables and textures are refused (exit 2). ONNX dispatchables run
    through ONNX Runtime (the [onnx] extra), images through Pillow (the [images] extra), and
    serialized DirectML graphs (dmlSerializedGraph) as graphs of dmlcli's operators.

    \b
    Example:
      dmlcli dispatch tests/models/bitwise_broadcast.json -i 10
    """
    from ..dispatch import load_model, run_model

    parsed = load_model(model, output_dir=output_dir, allow_paths_outside=allow_paths_outside)
    with warnings_reported(quiet):
        run_model(parsed, backend=backend, feature_level=feature_level, iterations=iterations, warmup=warmup,
                  emit=click.echo, timing=not no_timing)


def _cudnn_text(found: dict) -> str:
    if found["available"]:
        return f"cuDNN {found['cudnn']} (frontend {found['frontend']}), dmlcli's kernels where cuDNN has no plan"
    return f"cuDNN not installed: convolution and attention use dmlcli's kernels ({found['reason']})"


@cli.command(epilog=exit_codes_help(0, 5))
@format_option
def info(output_format):
    """Show the backends found: NumPy for the CPU; CuPy, CUDA and the device for the GPU, with the paths its
    products (cuBLAS) and its convolution and attention (cuDNN, or dmlcli's own kernels) take.

    Exits 0 whether or not a GPU is usable; 'GPU: not available (reason)' says why not.

    \b
    \b
    Examples:
      dmlcli info
      dmlcli info --format json
    """
    from .reports import backends_report

    report = backends_report()
    if output_format == "json":
        return echo_json(report)
    cpu, gpu = report["backends"]
    found = [b["name"] for b in report["backends"] if b["available"]]
    click.echo(f"dmlcli {__version__}")
    loops = cpu["compiled_loops"]
    loops_text = f"on (Numba {loops['numba']})" if loops["on"] else f"off ({loops['reason']})"
    click.echo(f"CPU: NumPy {cpu['numpy']}; compiled loops {loops_text}")
    if not gpu["available"]:
        click.echo(f"GPU: not available ({gpu['reason']})")
    else:
        click.echo(f"GPU: {gpu['device']}, {gpu['device_memory_bytes'] / 2**30:.1f} GiB; CuPy {gpu['cupy']}, "
                   f"CUDA runtime {gpu['cuda_runtime']}, driver supports CUDA {gpu['cuda_driver']}")
        click.echo(f"GPU products: {gpu['products']}")
        click.echo(f"GPU convolution and attention: {_cudnn_text(gpu['cudnn'])}")
    click.echo(f"backends found: {', '.join(found)} (--backend auto picks {found[-1]})")
