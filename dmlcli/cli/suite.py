"""`dmlcli test`: run folders of case files as pytest runs tests; a thin layer over dmlcli/suite/."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_CHECK_FAILED, InputError, quoted
from .app import TEST_FAILED, cli, exit_codes_help
from .options import WholeNumbers, complete_path, feature_level_option


def _progress(quiet: bool):
    """A rich progress bar on stderr while cases run (a terminal only, not with -q); a no-op otherwise."""
    import contextlib

    @contextlib.contextmanager
    def bar():
        if quiet or not sys.stderr.isatty():
            yield lambda done, total, new: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from ..display.rendering import make_console

        with Progress(TextColumn("dmlcli test"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=make_console(sys.stderr), transient=True) as progress:
            task = None

            def advance(done: int, total: int, new) -> None:
                nonlocal task
                if task is None:
                    task = progress.add_task("cases", total=total)
                progress.update(task, completed=done)

            yield advance

    return bar()


@cli.command("test", epilog=exit_codes_help(0, 1, 2, 4, 5, meanings={1: TEST_FAILED}))
@click.argument("paths", nargs=-1, required=True, metavar="PATH...", shell_complete=complete_path)
@click.option("--backend", type=click.Choice(["cpu", "gpu", "auto", "all"]), default="cpu", show_default=True,
              help="cpu, gpu, auto (the GPU where usable), or all: every backend found, with their results "
                   "compared with each other.")
@click.option("-k", "keyword", metavar="EXPR", default=None,
              help="Only cases whose names match EXPR: words (substrings of the case id, file, folder or operator) "
                   "joined by and, or, not and parentheses, as pytest's -k.")
@click.option("-j", "--jobs", type=WholeNumbers(min=1), default=None,
              help="Worker processes [default: the number of cores]; 1 runs in this process.")
@click.option("--junit-xml", "junit_xml", metavar="FILE", default=None, shell_complete=complete_path,
              help="Write JUnit XML (one testsuite per operator, one testcase per case and backend).")
@click.option("--report", "report", metavar="FILE.json", default=None, shell_complete=complete_path,
              help="Write the results as JSON, with dmlcli's, NumPy's and CuPy's versions.")
@feature_level_option("Feature level for cases that do not name their own [default: 6_4].")
@click.option("--float-rules", type=click.Choice(["ieee", "d3d"], case_sensitive=False), default=None,
              help="Float rules for cases that do not name their own [default: ieee].")
@click.option("--allow-tf32", "allow_tf32", is_flag=True,
              help="For cases that do not set \"allow_tf32\": let FLOAT32 matrix products on the GPU use TF32 "
                   "tensor cores (DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION), checked against a TF32-wide "
                   "tolerance.")
@click.option("-x", "--exitfirst", "stop_first", is_flag=True, help="Stop at the first failing case.")
@click.option("-q", "--quiet", "quiet", count=True, help="Less output: no table, one line per failure.")
@click.option("-v", "--verbose", "verbose", count=True, help="One line per case and backend.")
def test(paths, backend, keyword, jobs, junit_xml, report, feature_level, float_rules, allow_tf32, stop_first, quiet,
         verbose):
    """Run test cases (case files, or folders searched for *.json) and report as pytest does.

    Each case (the format of ../shared/conformance; README "Test suites") runs through the same engine
    as dmlcli run, and passes when the result matches its expected tensor (bit for bit, or within the
    case's tolerance or else the operator's), or, with "expect_error": 3, when dmlcli refuses the call.

    \b
    Examples:
      dmlcli test ../shared/conformance
      dmlcli test suite/ --backend all -k 'bit_and and not int64' --junit-xml junit.xml
      dmlcli test suite/ --report results.json -q
    """
    from ..suite.runner import run_suite
    from .suite_summary import print_summary

    for option, target, suffix in (("--junit-xml", junit_xml, ".xml"), ("--report", report, ".json")):
        if target is not None:
            _check_target(option, target, suffix)
    from .check import check_distinct_outputs

    check_distinct_outputs([("--junit-xml", junit_xml), ("--report", report)])  # a link may join the two
    with _progress(quiet > 0) as advance:
        run = run_suite(paths, backend=backend, keyword=keyword, jobs=jobs, feature_level=feature_level,
                        float_rules=float_rules, allow_tf32=allow_tf32, stop_first=stop_first, on_progress=advance)
    if not run.results and run.deselected:
        raise InputError(f"-k {quoted(keyword)} selects none of the {run.files} cases")
    if junit_xml is not None:
        from ..suite.junit import write_junit

        write_junit(run, junit_xml)
    if report is not None:
        from ..suite.report import write_report

        write_report(run, report)
    print_summary(run, sys.stdout, verbosity=min(verbose, 1) - min(quiet, 1))
    if not run.ok:
        sys.exit(EXIT_CHECK_FAILED)


def _check_target(option: str, target: str, suffix: str) -> None:
    """Refuse an output that could not be written before any case runs (the results would be lost)."""
    from pathlib import Path

    from ..errors import quoted

    path = Path(target)
    if not path.parent.is_dir():
        raise InputError(f"{option} {quoted(target)}: folder {quoted(path.parent)} does not exist")
    if path.is_dir():
        raise InputError(f"{option} {quoted(target)}: is a directory")
    if path.suffix.lower() != suffix:
        raise InputError(f"{option} {quoted(target)}: expected a {suffix} file")
