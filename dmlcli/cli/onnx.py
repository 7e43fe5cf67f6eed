"""`dmlcli onnx`: an ONNX model run as ONNX Runtime's DirectML provider runs it; a thin layer over
dmlcli/onnx_model/."""

from __future__ import annotations

import contextlib
import sys
import time

import click

from ..errors import EXIT_CHECK_FAILED, InputError
from .app import cli, exit_codes_help, report_warnings
from .options import backend_option, complete_path, feature_level_option, quiet_option


@contextlib.contextmanager
def _node_progress(quiet: bool, what: str):
    """A progress bar over the nodes on stderr (a terminal only, not with -q); a no-op otherwise."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..display.rendering import make_console

    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=make_console(sys.stderr), transient=True) as bar:
        task = bar.add_task(what, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def _check_report_target(report: str | None) -> None:
    from pathlib import Path

    from ..errors import quoted

    if report is None:
        return
    path = Path(report)
    if not path.parent.is_dir():
        raise InputError(f"--report {quoted(report)}: folder {quoted(str(path.parent))} does not exist")
    if path.is_dir() or path.suffix.lower() != ".json":
        raise InputError(f"--report {quoted(report)}: expected a .json file")


@cli.command("onnx", epilog=exit_codes_help(0, 1, 2, 3, 4, 5, meanings={
    1: "--check found a mismatch, or --compare ort a node that diverges",
    4: "the backend, or the onnx / onnxruntime package, is not available"}))
@click.argument("model", metavar="MODEL.onnx", shell_complete=complete_path)
@click.option("-i", "--input", "inputs", metavar="NAME=FILE", multiple=True, shell_complete=complete_path,
              help="An input by the model's name: .npy, .npz[:member], .json or inline JSON. FILE alone: an .npz "
                   "whose arrays are named as the model's inputs, or any input of a model with one.")
@click.option("-o", "--output", "output", metavar="OUT.npz|DIR", default=None, shell_complete=complete_path,
              help="Write every output: one .npz (arrays by output name), or one .npy per output in an existing "
                   "folder; each file written atomically.")
@backend_option
@feature_level_option("DirectML feature level every node's call is validated at [default: 6_4].")
@click.option("--compare", type=click.Choice(["ort"]), default=None,
              help="Compare every node's outputs with ONNX Runtime's CPU provider, each within its DirectML "
                   "operator's tolerance; name the first node that diverges (exit 1).")
@click.option("--check", "expected", metavar="EXPECTED.npz", default=None, shell_complete=complete_path,
              help="Compare the outputs with the arrays of the same names (rtol 1e-4, atol 1e-4 x the largest "
                   "expected magnitude); exit 1 on a mismatch.")
@click.option("--tolerance", metavar="RULE", default=None,
              help="--check's rule instead: ulp:N, atol:X, ulp:N,atol:X, exact or bits.")
@click.option("--report", metavar="R.json", default=None, shell_complete=complete_path,
              help="Write a JSON report: settings, outputs, fallbacks, --check's and --compare's results.")
@click.option("--fallback", type=click.Choice(["cpu"]), default=None,
              help="Run the nodes DirectML cannot run on ONNX Runtime's CPU provider (as the DirectML provider "
                   "falls back), and list them, instead of refusing the model (exit 3).")
@click.option("--no-fusions", "no_fusions", is_flag=True, default=False,
              help="Run the model's nodes as they are, without the graph fusions ONNX Runtime applies for its "
                   "DirectML provider (MatMul + Add -> Gemm, the Erf form of GELU -> Gelu, activations into "
                   "Conv and Gemm).")
@quiet_option("No warnings or progress on stderr.")
def onnx(model, inputs, output, backend, feature_level, compare, expected, tolerance, report, fallback, no_fusions,
         quiet):
    """Run an ONNX model as ONNX Runtime's DirectML provider runs it: every node on DirectML's operator, validated
    at the feature level, through the ONNX table `dmlcli test` uses.

    \b
    Examples:
      dmlcli onnx squeezenet1_1.onnx --input input=x.npy -o out.npz
      dmlcli onnx encoder_small.onnx --input encoder_small.npz --check encoder_small.npz
      dmlcli onnx model.onnx --input x.npy --compare ort --report nodes.json
    """
    from ..checking.comparison import parse_tolerance
    from ..onnx_model import OnnxSession
    from ..onnx_model.files import check_output_target, read_expected, read_inputs

    rule = parse_tolerance(tolerance) if tolerance is not None else None
    if tolerance is not None and expected is None:
        raise InputError("--tolerance sets --check's rule; give --check EXPECTED.npz too")
    if output is not None:
        check_output_target(output)
    _check_report_target(report)
    started = time.perf_counter()
    session = OnnxSession(model, backend=backend, feature_level=feature_level, fallback=fallback,
                          fusions=not no_fusions)
    feeds = read_inputs(session, inputs)
    session.checked_inputs(feeds)
    wanted = read_expected(expected, [d.name for d in session.model.outputs]) if expected is not None else None
    comparison = None
    with _node_progress(quiet, "dmlcli onnx") as advance:
        if compare is not None:
            from ..onnx_model.compare import compare_with_ort

            outputs, comparison = compare_with_ort(session, feeds, progress=advance)
        else:
            outputs = session.run(feeds, progress=advance)
    report_warnings(sorted(set(session.executor.warnings)), quiet)
    _finish(session, feeds, outputs, wanted, rule, comparison, output, report, quiet, time.perf_counter() - started)


def _finish(session, feeds, outputs, wanted, rule, comparison, output, report, quiet, seconds) -> None:
    from ..onnx_model.files import check_outputs, report_document, write_outputs

    fallbacks = session.fallbacks(feeds)
    for node, reason in fallbacks:
        if not quiet:
            click.echo(f"dmlcli: fallback: {node.label} ran on ONNX Runtime's CPU provider: {reason}", err=True)
    checks = check_outputs(outputs, wanted, rule) if wanted is not None else None
    if output is not None:
        write_outputs(outputs, output)
    if comparison is not None:
        _print_comparison(comparison)
    if checks is not None:
        for name, check in checks.items():
            click.echo(f"{name}: {check.text()}")
    if output is None and comparison is None and checks is None:
        _show_outputs(session, outputs)
    if report is not None:
        import json
        from pathlib import Path

        from ..io.atomic import write_atomically

        text = json.dumps(report_document(session, outputs, checks=checks, comparison=comparison,
                                          fallbacks=fallbacks, seconds=seconds), indent=2) + "\n"
        write_atomically(Path(report), lambda handle: handle.write(text.encode()))
    failed = (checks is not None and not all(c.passed for c in checks.values())) or \
        (comparison is not None and comparison.first_divergence is not None)
    if failed:
        sys.exit(EXIT_CHECK_FAILED)


def _show_outputs(session, outputs) -> None:
    from ..display.rendering import show

    for position, (name, array) in enumerate(outputs.items()):
        if position:
            click.echo("")
        caption = (f"{name} · {session.feature_level.name} · {session.backend} · {array.dtype} · "
                   f"shape {list(array.shape)}")
        show(array, caption=caption, style="table", stream=sys.stdout)


def _print_comparison(comparison) -> None:
    from ..display.rendering import make_console, show_records

    rows = []
    for node in comparison.nodes:
        step = node.step
        rows.append([str(step.node.index), step.node.proto.name or "", step.node.op, step.directml,
                     _number(node.max_ulp), _number(node.max_abs, "{:.3g}"), node.verdict])
        for member in step.node.fused:  # the model's nodes a fusion replaced: their tensors are gone, not missing
            rows.append([str(member.index), member.proto.name or "", member.op, f"(fused: {step.node.fusion})",
                         "", "", "fused"])
    console = make_console(sys.stdout)
    show_records(console, "every node against ONNX Runtime's CPU provider (each on ONNX Runtime's inputs)",
                 ["#", "node", "ONNX op", "DirectML", "max ULP", "max abs", "verdict"], rows, whole=(0, 2, 3, 6))
    first = comparison.first_divergence
    fused = sum(len(node.step.node.fused) for node in comparison.nodes)
    if fused:
        click.echo(f"{fused} of the model's nodes are fused into {sum(1 for n in comparison.nodes if n.step.node.fusion)}"
                   " (each fused node's outputs compared with ONNX Runtime's tensors of the same names)")
    if first is None:
        click.echo(f"MATCHES: all {len(comparison.nodes)} nodes within their operators' tolerances")
    else:
        output = next(o for o in first.outputs if o.verdict == "DIVERGES")
        click.echo(f"DIVERGES: {len(comparison.diverging)} of {len(comparison.nodes)} nodes; the first is "
                   f"{first.step.node.label} on {first.step.directml}: output {output.name!r} "
                   f"{output.comparison.text().splitlines()[0].removeprefix('FAILED: ')}")
    for name, difference in comparison.outputs.items():
        click.echo(f"output {name!r}: largest difference from ONNX Runtime after the whole chain "
                   f"{_number(difference, '{:.3g}')}")


def _number(value: float, style: str = "{:.0f}") -> str:
    return "inf" if value == float("inf") else style.format(value)
