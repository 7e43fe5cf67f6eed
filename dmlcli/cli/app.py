"""The command group: error handling, exit codes, --version and --debug.

Exit codes: 0 success; 1 --check found a mismatch; 2 usage error or unreadable/malformed input;
3 the call breaks the operator's rules at that feature level; 4 the requested backend is not
available; 5 an internal error (a bug: re-run with --debug and report it).
"""

from __future__ import annotations

import contextlib
import gc
import os
import _signal  # signal.py's C module: see signals.py
import sys
import warnings

import click

from ..version import __version__
from ..errors import EXIT_USAGE, DmlcliError, DmlcliWarning, printable
from .signals import note_handled, unwinding_signals, watchdog
from .stdio import StdoutFailed, guard_standard_streams

EXIT_INTERNAL = 5
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe
EXIT_TERMINATED = 143  # 128 + SIGTERM

_EXIT_MEANINGS = {
    0: "success",
    1: "--check found a mismatch",
    2: "usage error, or unreadable or malformed input",
    3: "the call breaks the operator's rules at that feature level",
    4: "the requested backend is not available",
    5: "internal error (re-run with --debug and report it)",
}


def exit_codes_help(*codes: int, meanings: dict[int, str] | None = None) -> str:
    """The epilog of a command's help: the exit codes that command can return, and only those;
    `meanings` words a code the command's own way (test's 1 is a failed case, not --check)."""
    worded = {**_EXIT_MEANINGS, **(meanings or {})}
    lines = [f"  {code}  {worded[code]}" for code in codes]
    return "\b\nExit codes:\n" + "\n".join(lines)


TEST_FAILED = "a case failed or could not be run (malformed case file)"
EXIT_CODES_HELP = exit_codes_help(0, 1, 2, 3, 4, 5, meanings={1: f"--check found a mismatch; test: {TEST_FAILED}"})


def _versions() -> str:
    from ..versions import versions

    found = versions()
    return f"dmlcli {found['dmlcli']} (NumPy {found['numpy']}, CuPy {found['cupy'] or 'not installed'})"


class Terminated(BaseException):
    """SIGTERM arrived (a CI job's timeout, `kill`): unwind like Ctrl-C, so temporary files are removed.

    A BaseException, so that no `except Exception` on the way swallows it.
    """


def _raise_terminated(signum, frame):
    note_handled(signum)
    raise Terminated()


def _raise_interrupted(signum, frame):
    note_handled(signum)
    raise KeyboardInterrupt()


def _debug_callback(ctx: click.Context, param, value) -> None:
    if value:
        ctx.find_root().ensure_object(dict)["debug"] = True


# Which module of this package registers each command: a command's module is imported when the command is
# looked up, so that `dmlcli run` does not import the table's catalog, the suite runner or `show`
# (tests/test_startup_imports.py checks this map against the commands the modules register).
COMMAND_MODULES = {
    "ops": "catalog", "describe": "catalog",
    "run": "commands", "validate": "commands", "dispatch": "commands", "info": "commands",
    "show": "inspect", "inspect": "inspect",
    "test": "suite",
    "onnx": "onnx",
}


class DmlcliGroup(click.Group):
    """Turns dmlcli's errors into one line on stderr and the documented exit code.

    With --debug (before or after the command's name) or DMLCLI_DEBUG=1, the Python traceback is
    printed first; the one line and the exit code stay the same. Commands load on first look-up
    (COMMAND_MODULES).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            import importlib

            importlib.import_module(f"{__package__}.{COMMAND_MODULES[cmd_name]}")
        return super().get_command(ctx, cmd_name)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.params.append(click.Option(["--debug"], is_flag=True, expose_value=False, is_eager=True,
                                       callback=_debug_callback,
                                       help="Print Python tracebacks (for bug reports); the exit code is the same."))
        super().add_command(cmd, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command's whole first sentence: click would cut a long one with '...' at the terminal's width."""
        rows = [(name, self.get_command(ctx, name).get_short_help_str(limit=1000)) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, *args, **kwargs):
        # Around click's own main, so that --help and --version, which print while the arguments are
        # parsed, report a failed stdout the same way as every command does.
        try:
            try:
                with unwinding_signals():
                    return super().main(*args, **kwargs)
            finally:
                sys.stdout.flush()  # what is still buffered must reach stdout before the exit status is known
        except StdoutFailed as failure:
            _exit_for_stdout(failure)

    def invoke(self, ctx: click.Context):
        try:
            previous_handler = _signal.signal(_signal.SIGTERM, _raise_terminated)
            # Ctrl-C as Python's own handler takes it (KeyboardInterrupt), noted for the watchdog; left alone where it
            # is ignored (a job started with & in a script).
            previous_interrupt = _signal.getsignal(_signal.SIGINT)
            if previous_interrupt is _signal.default_int_handler:
                _signal.signal(_signal.SIGINT, _raise_interrupted)
            installed = True
        except ValueError:  # not the main thread: leave signals alone
            installed = False
        try:
            with watchdog():  # a signal held back by a long C call still ends the run promptly
                return super().invoke(ctx)
        except Terminated:
            click.echo("dmlcli: terminated", err=True)
            ctx.exit(EXIT_TERMINATED)
        except DmlcliError as error:
            _traceback_if_debug(ctx)
            click.echo(f"dmlcli: error: {_one_line(str(error))}", err=True)
            ctx.exit(error.exit_code)
        except click.exceptions.UsageError as error:
            # click's own three-line usage message, made one line like every other failure.
            _traceback_if_debug(ctx)
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
            _traceback_if_debug(ctx)
            click.echo("dmlcli: error: ran out of memory; for large .npy inputs write the result to a .npy "
                       "file (-o out.npy), which is streamed in constant memory", err=True)
            ctx.exit(EXIT_USAGE)
        except Exception as error:  # noqa: BLE001 - the last line of defence against tracebacks
            _traceback_if_debug(ctx)
            first = _one_line(str(error))[:200]
            click.echo(f"dmlcli: internal error: {type(error).__name__}: {first} "
                       "(re-run with --debug for the traceback, and please report it)", err=True)
            ctx.exit(EXIT_INTERNAL)
        finally:
            if installed:
                _signal.signal(_signal.SIGTERM, previous_handler if previous_handler is not None else _signal.SIG_DFL)
                if previous_interrupt is _signal.default_int_handler:
                    _signal.signal(_signal.SIGINT, previous_interrupt)


def _traceback_if_debug(ctx: click.Context) -> None:
    """Under --debug, the exception being handled goes to stderr whole; the exit code does not change."""
    if _debug(ctx):
        import traceback

        traceback.print_exc(file=sys.stderr)


def _one_line(text: str) -> str:
    """A message as one line: its whitespace runs as spaces, other control characters escaped (a message may
    quote input that holds ESC or BEL)."""
    return printable(" ".join(text.split()))


def _exit_for_stdout(failure: StdoutFailed) -> None:
    """A failed write to stdout: exit 141 quietly where the reader went away, else one line and exit 2."""
    if failure.reader_went_away:
        sys.exit(EXIT_BROKEN_PIPE)
    click.echo(f"dmlcli: error: stdout: {failure.reason()}", err=True)
    sys.exit(EXIT_USAGE)


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


@contextlib.contextmanager
def warnings_reported(quiet: bool):
    """Collect the warnings of a successful block and print dmlcli's own as one line each on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        if issubclass(warning.category, DmlcliWarning):
            report_warnings([str(warning.message)], quiet)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def report_warnings(messages, quiet: bool) -> None:
    """An outcome's warnings, one line each on stderr (none with --quiet)."""
    if quiet:
        return
    for message in messages:
        click.echo(f"dmlcli: warning: {_one_line(str(message))}", err=True)


@click.group(cls=DmlcliGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, "--version", "-V", message="%(version)s", package_name="dmlcli")
@click.option("--debug", is_flag=True, envvar="DMLCLI_DEBUG", help="Show Python tracebacks (for bug reports).")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Run DirectML's operators on NumPy or CuPy, with DirectML's validation rules and results.

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


def main(argv=None) -> None:
    """The process's entry (the console script, python -m dmlcli): runs one command and exits."""
    guard_standard_streams()
    try:
        cli.main(args=argv, prog_name="dmlcli")
    finally:
        # The process ends here. At exit the interpreter's garbage collections walk, and tear down, every object
        # NumPy, click and dmlcli made to live as long as the process (tens of thousands: modules, classes,
        # functions): 5 to 15 ms of a one-operator run (issue 23), for memory the operating system takes back
        # anyway. Frozen, they are left out of those passes; what reference counting frees is still freed, and
        # atexit handlers and the final flush of stdout still run.
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()
