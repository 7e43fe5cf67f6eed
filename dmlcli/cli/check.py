"""run's --check for CI (--max-diffs, --report) and its stdout formats (-o - --format npy|json).

Kept beside commands.py so that `run` stays a list of steps: each function here is one of them.
"""

from __future__ import annotations

import json

import click

from ..errors import InputError
from .options import WholeNumbers

STDOUT_STYLES = ("npy", "json")

max_diffs_option = click.option(
    "--max-diffs", "max_diffs", type=WholeNumbers(min=0), default=None, metavar="N",
    help="How many of the first differences --check shows (and --report lists) [default: 5]; 0 for none.")
report_option = click.option(
    "--report", "report", metavar="REPORT.json", default=None, type=click.Path(dir_okay=False),
    help="With --check: write a JSON report (verdict, counts, share, the kinds of difference, tolerance, first "
         "differences, operator, level, backend, versions), also on a PASS.")


def stdout_target(output: str | None, style: str | None) -> tuple[str | None, str | None]:
    """(output, style) with `-o - --format npy|json` turned into the stdout target it names.

    --format npy|json goes only with -o - (json is its default); `-o -.npy` says the same as
    `-o - --format npy`. Every other combination of --format with -o is left for run to refuse.
    """
    if output == "-" and style in STDOUT_STYLES:
        return ("-.npy" if style == "npy" else "-"), None
    if style == "npy" and output is None:
        raise InputError("--format npy writes binary .npy data: give -o - to send them to stdout "
                         "(dmlcli run ... -o - --format npy | ...) or -o out.npy for a file")
    return output, style


def file_format(output: str | None, style: str | None) -> str | None:
    """The format --format names for an -o file ("npy" or "json"), or None where it names none.

    -o PATH --format npy|json writes that format whatever PATH's extension; --format table|bits|hex show
    a result on a terminal and are refused with -o, as is --format with a Zarr store (always Zarr).
    """
    if output is None or style is None:
        return None
    from ..io.targets import OUTPUT_FORMATS, is_stdout
    from ..errors import quoted

    if style not in OUTPUT_FORMATS:
        raise InputError(f"--format {style} shows a result on stdout, but -o {quoted(output)} writes it; with -o, "
                         "--format takes npy or json (the output's format), or leave --format out")
    if is_stdout(output):
        raise InputError(f"--format {style}: -o {output} already names how stdout is written; give -o - --format "
                         "npy|json, or leave --format out")
    from ..io.zarr_names import is_zarr_source

    if is_zarr_source(output):
        raise InputError(f"--format {style}: -o {quoted(output)} is a Zarr store, written as Zarr; leave --format "
                         "out")
    return style


def check_distinct_outputs(named) -> None:
    """Refuse, before any work, two output options that name one file (after resolving links, '.' and '..', or two
    names of one existing file): one write would silently replace the other (issue 34: -o c.json --save-case
    c.json). `named`: (option, path) pairs; None and stdout (-) are left out."""
    import os

    from ..errors import quoted
    from ..io.targets import is_stdout

    seen: list[tuple[str, str, str]] = []
    for option, path in named:
        if path is None or is_stdout(path):
            continue
        resolved = os.path.realpath(path)
        for earlier_option, earlier, earlier_resolved in seen:
            if resolved == earlier_resolved or _same_file(earlier, path):
                raise InputError(f"{earlier_option} {quoted(earlier)} and {option} {quoted(path)} name the same file; "
                                 "each output needs a file of its own")
        seen.append((option, str(path), resolved))


def check_binary_stdout(output: str | None) -> None:
    """Refuse .npy bytes for a terminal: they are for a pipe or a file."""
    import sys

    if output == "-.npy" and sys.stdout.isatty():
        raise InputError("-o - --format npy writes binary .npy data, and stdout is a terminal; pipe it into "
                         "another command or write a file with -o out.npy")


def check_report_options(expected: str | None, report: str | None) -> None:
    """--report needs --check, and a .json path in an existing folder (refused before any work)."""
    if report is None:
        return
    from pathlib import Path

    if expected is None:
        raise InputError("--report writes the report of --check; give --check EXPECTED too")
    from ..errors import quoted

    path = Path(report)
    if path.suffix.lower() != ".json":
        raise InputError(f"--report {quoted(report)}: expected a .json file name")
    from ..io.atomic import check_output_path

    check_output_path(report)


def streams_with_check(inputs, output: str | None, expected: str | None, output_format: str | None = None) -> bool:
    """Whether a checked run can stream: .npy inputs into a .npy file, against an expected .npy file.

    The result is then compared with the expected file chunk by chunk, never loading either whole: so the
    output must be a file that can be read back, not a device or FIFO (-o /dev/null).
    """
    if expected is None or expected == "-":  # the usual run: nothing more is imported
        return False
    from pathlib import Path

    from ..engine.streaming import is_streamable

    if not (Path(expected).suffix.lower() == ".npy" and is_streamable(list(inputs), output, output_format)
            and _regular_or_new(output)):
        return False
    # `-o e.npy --check e.npy` would compare the new file with itself; the in-memory path maps the old one first.
    return not _same_file(output, expected)


def _regular_or_new(path: str) -> bool:
    import stat
    from pathlib import Path

    try:
        return stat.S_ISREG(Path(path).stat().st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _same_file(first: str, second: str) -> bool:
    from pathlib import Path

    try:
        return Path(first).exists() and Path(first).samefile(second)
    except OSError:
        return False


def check_expected_header(expected: str) -> None:
    """An expected .npy file's header, read before the run so that a bad EXPECTED costs nothing."""
    from pathlib import Path

    from ..errors import quoted
    from ..io.npy import read_npy_header
    from ..io.sources import check_input_file

    where = f"expected {quoted(expected)}"
    check_input_file(Path(expected), where=where)
    read_npy_header(Path(expected), where=where)


def read_expected_tensor(expected: str, bare_dtype):
    """(array, format) of EXPECTED; a bare scalar there is a malformed expectation (exit 2), not a call's 0-D."""
    from ..io.json_tensor import BareScalar
    from ..io.sources import read_tensor_and_format

    from ..io.npy import read_mapped

    try:
        array, form = read_tensor_and_format(expected, label="expected", bare_dtype=bare_dtype)
    except BareScalar as scalar:
        raise InputError(str(scalar)) from None
    # Read, not mapped: a file truncated by another program meanwhile is an error in words, not SIGBUS.
    return read_mapped(array, where=f"expected '{expected}'"), form


def write_report(report: str, comparison, outcome) -> None:
    """The --report file: the comparison and what produced it, written atomically."""
    from pathlib import Path

    from ..io.atomic import write_atomically
    from ..versions import versions

    call = outcome.verdict.call
    document = {
        **comparison.to_json(),
        "operator": call.operator.name,
        "feature_level": str(outcome.verdict.feature_level),
        "backend": outcome.backend,
        "output_dtype": call.output.data_type.numpy_name,
        "output_shape": list(call.output.shape),
    }
    found = versions()
    document.update(dmlcli_version=found["dmlcli"], numpy_version=found["numpy"])
    text = json.dumps(document, indent=2) + "\n"
    write_atomically(Path(report), lambda handle: handle.write(text.encode("utf-8")))


def bound_needs_inputs(req, sources, dtype, override) -> bool:
    """Whether the check of this call needs its inputs whole: a sum bound for its first output (an operator that sums
    terms, a float output, terms to sum), and no --tolerance. The call is planned from the inputs' headers."""
    if override is not None or req.operator.sum_bound is None:
        return False
    from ..checking.bounds import bound_figures
    from ..engine import plan_sources

    return bound_figures(plan_sources(req, sources, dtype).call) is not None


def inputs_for_bound(outcome, sources, dtype, override):
    """The input arrays a sum bound is computed from (None where the check needs none: --tolerance given, or an
    operator without one). A run in memory recorded them; a run on Dask did not, and they are read here (the
    magnitude run needs them whole, as the operator's own run on one machine would)."""
    call = outcome.verdict.call
    if override is not None or call.operator.sum_bound is None:
        return None
    if outcome.inputs:
        return outcome.inputs
    import numpy as np

    from ..engine import read_sources
    from ..io.zarr_names import is_zarr_source

    arrays = []
    for position, source in enumerate(sources):
        if is_zarr_source(source):
            from ..io.zarr_store import open_input

            arrays.append(np.asarray(open_input(source, label=f"input {position + 1}", dtype=dtype)[...]))
        else:
            arrays.extend(read_sources([source], dtype, operator=call.operator))
    return arrays
