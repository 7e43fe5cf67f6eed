"""Option bundles, declared once and shared by the commands.

`call_options` describes a call: the feature level, the inputs' data type, the output type and Sizes,
broadcasting. `OperatorCommand` adds the named operator's own options (its parameters' kebab-case DESC field
names, `--infinity-mode`, `--axes`, with their choices for help and shell completion) once the operator is
known: a parameter added to the table appears here with no edit.
"""

from __future__ import annotations

import click

from ..backends import BACKEND_NAMES
from .. import operators as table
from ..operators.table.options import option_flag
from .operator_help import format_operator_help, parameter_help


class WholeNumbers(click.IntRange):
    """click's IntRange, read from ASCII digits only: int() also reads other scripts' digits ('١' is 1), and no
    number on the command line may be written so (issue 34)."""

    def convert(self, value, param, ctx):
        from ..scalars import is_whole_number

        if isinstance(value, str) and not is_whole_number(value.strip()):
            self.fail(f"{value!r} is not a whole number (write it with ASCII digits 0-9)", param, ctx)
        return super().convert(value, param, ctx)


def complete_operator(ctx, param, incomplete):
    from ..operators.table.index import SPELLINGS

    names = sorted({key.removeprefix("ELEMENT_WISE_").lower() for key, (full, _) in SPELLINGS.items() if key == full})
    return [name for name in names if name.startswith(incomplete.lower())]


def complete_path(ctx, param, incomplete):
    """Let the shell complete file names (INPUT, -o, --check, MODEL.json), as it does without dmlcli."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def complete_data_type(ctx, param, incomplete):
    from ..data_types import ALL11

    return [t.numpy_name for t in ALL11 if t.numpy_name.startswith(incomplete.lower())]


def complete_level(ctx, param, incomplete):
    from ..feature_levels import ALL_FEATURE_LEVELS

    return [fl.short for fl in ALL_FEATURE_LEVELS if fl.short.startswith(incomplete)]


def _completer(parameter, option: str):
    def complete(ctx, param, incomplete):
        return [c for c in parameter.choices(option) or () if c.startswith(incomplete.lower())]

    return complete


def operator_options(operator) -> list[click.Option]:
    """One click option per API keyword of this operator's parameters, in DESC order."""
    return [click.Option([option_flag(option), option], metavar=parameter.metavar(option), default=None,
                         help=parameter_help(parameter, option), shell_complete=_completer(parameter, option))
            for option, parameter in operator.options.items()]


class TensorCommand(click.Command):
    """A command whose positional arguments are tensors, one of which may be '-:NAME' (a named tensor of stdin).

    click reads an argument that starts with '-' as an option, and has no option '-:'; so each '-:NAME' in a
    positional place is held back while click parses (a placeholder stands in for it) and put back in the parsed
    values.
    """

    first_tensor = 0  # the first positional argument that is a tensor (OperatorCommand's come after the operator)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        held = {}
        given = list(args)
        for position in _positional_places(args, self.get_params(ctx))[self.first_tensor:]:
            if args[position].startswith("-:"):
                held[f"\0stdin{position}"] = args[position]
                given[position] = f"\0stdin{position}"
        rest = self.parse_held(ctx, given)
        if held:
            for key, value in ctx.params.items():
                if isinstance(value, tuple):
                    ctx.params[key] = tuple(held.get(item, item) if isinstance(item, str) else item for item in value)
                elif isinstance(value, str):
                    ctx.params[key] = held.get(value, value)
        return rest

    def parse_held(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, args)


class OperatorCommand(TensorCommand):
    """A command whose first argument names an operator, and whose options include that operator's own.

    The operator is found (importing its family module alone) before the options are parsed, so that
    `dmlcli run reduce --axes 1 ...` knows --axes, and `dmlcli run reduce --help` lists REDUCE's options with
    their meanings and defaults. Without an operator, the help lists the common options and says where the
    parameters are. An option of another operator is refused in one line naming the operator's own.
    """

    first_tensor = 1

    def __init__(self, *args, exit_codes: tuple[int, ...] = (), **kwargs) -> None:
        from .app import exit_codes_help

        super().__init__(*args, epilog=exit_codes_help(*exit_codes), **kwargs)
        self.exit_codes = exit_codes

    def get_params(self, ctx: click.Context) -> list:
        own = ctx.meta.get(self._meta_key, [])
        params = super().get_params(ctx)
        return params[:-1] + own + params[-1:] if params and params[-1].name == "help" else params + own

    @property
    def _meta_key(self) -> str:
        return f"dmlcli.operator_options.{self.name}"

    def parse_held(self, ctx: click.Context, args: list[str]) -> list[str]:
        operator = self._operator_in(ctx, args)
        if operator is not None:
            ctx.meta[self._meta_key] = operator_options(operator)
            ctx.meta["dmlcli.operator"] = operator
        try:
            return super().parse_held(ctx, _long_spellings(args, self.params))
        except click.NoSuchOption as error:
            raise self._not_a_parameter(error, operator, self.name) from None

    def _operator_in(self, ctx: click.Context, args: list[str]):
        """The operator the first positional argument names (in any spelling: an ONNX name's resolution is kept
        in ctx.meta["dmlcli.onnx"] for the help); None where there is none (help) or it is unknown (the command
        then says so in its own words)."""
        from ..errors import InputError
        from ..onnx_spellings import resolve

        name = _first_positional(args, self.params)
        if name is None:
            return None
        try:
            operator, ctx.meta["dmlcli.onnx"] = resolve(name)
            return operator
        except InputError:
            if ctx.resilient_parsing:  # shell completion: the options of no operator
                return None
            raise  # `run conv --help` too: the help of an unknown operator is its suggestions (exit 2)

    @staticmethod
    def _not_a_parameter(error: click.NoSuchOption, operator, command: str) -> Exception:
        from ..errors import InputError

        option = error.option_name.lstrip("-").split("=", 1)[0].replace("-", "_")
        if operator is None or table.option_owner(option) is None:
            return error
        own = ", ".join(option_flag(name) for name in operator.options) or "no parameters"
        return InputError(f"{operator.name} has no {option_flag(option)[2:]} parameter (it takes {own}; see "
                          f"dmlcli {command} {operator.cli_name} --help)")

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """With an operator named, one screen about it (operator_help.py); without, the command's whole help."""
        operator = ctx.meta.get("dmlcli.operator")
        if operator is None:
            return super().format_help(ctx, formatter)

        format_operator_help(self, ctx, formatter, operator, ctx.meta.get(self._meta_key, []), self.exit_codes,
                             ctx.meta.get("dmlcli.onnx"))

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The common options, then the operator's own in a section of their own."""
        own = ctx.meta.get(self._meta_key, [])
        common = [param for param in self.get_params(ctx) if param not in own]
        rows = [record for record in (param.get_help_record(ctx) for param in common) if record is not None]
        with formatter.section("Options"):
            formatter.write_dl(rows)
        operator = ctx.meta.get("dmlcli.operator")
        if operator is None:
            with formatter.section("Operator parameters"):
                formatter.write_text("Each operator's own options (--axes, --function, --alpha, ...) are listed by "
                                     f"'dmlcli {self.name} OPERATOR --help', with their meanings and defaults; "
                                     "'dmlcli describe OPERATOR' gives the whole entry.")
            return
        with formatter.section(f"{operator.name}'s parameters (dmlcli describe {operator.cli_name} for the whole entry)"):
            if own:
                formatter.write_dl([param.get_help_record(ctx) for param in own])
            else:
                formatter.write_text(f"{operator.name} has no parameters.")


def _long_spellings(args: list[str], params) -> list[str]:
    """`-o out.npy` given to click as `--output out.npy` (likewise -f, -q): the same option, parsed the same way.

    click tries every option as a long one first, and the failed try imports difflib and ranks every long
    option by likeness to the short one (a few ms of every `dmlcli run -o -`, issue 21). Only a short option in
    option position is respelled, and one that takes a value only where a value follows it, so that click's
    messages (a missing value names the option as typed) stay the same.
    """
    long_of: dict[str, str] = {}
    takes_value: dict[str, bool] = {}
    for param in params:
        if isinstance(param, click.Option):
            longs = [opt for opt in param.opts if opt.startswith("--")]
            for opt in param.opts + param.secondary_opts:
                takes_value[opt] = not (param.is_flag or param.count)
                if longs and len(opt) == 2 and opt[0] == "-" and opt[1] != "-":
                    long_of[opt] = longs[0]
    respelled = list(args)
    skip = False
    for position, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            break
        if arg.startswith("-") and len(arg) > 1 and not arg.lstrip("-").replace(".", "").isdigit():
            if "=" in arg:
                continue
            skip = takes_value.get(arg, True)  # an operator's own option takes a value, as every parameter does
            if arg in long_of and (not skip or position + 1 < len(args)):
                respelled[position] = long_of[arg]
    return respelled


def _first_positional(args: list[str], params) -> str | None:
    """The first argument that is not an option or an option's value."""
    places = _positional_places(args, params)
    return args[places[0]] if places else None


def _positional_places(args: list[str], params) -> list[int]:
    """Where the arguments that are not options or options' values are (all of them after a '--'); a '-:NAME'
    (a named tensor of stdin) is one of them."""
    takes_value = {}
    for param in params:
        if isinstance(param, click.Option):
            for opt in param.opts + param.secondary_opts:
                takes_value[opt] = not (param.is_flag or param.count)
    places = []
    skip = False
    for position, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            return places + list(range(position + 1, len(args)))
        if arg.startswith("-") and len(arg) > 1 and not arg.startswith("-:") \
                and not arg.lstrip("-").replace(".", "").isdigit():
            if "=" in arg:
                continue
            # An operator's own option (not declared yet) takes a value, as every parameter does.
            skip = takes_value.get(arg, True)
            continue
        places.append(position)
    return places


def feature_level_option(help_text: str = "DirectML feature level: 4.1, 4_1, DML_FEATURE_LEVEL_4_1 or 0x4100 "
                                          "[default: 6_4]."):
    return click.option("--feature-level", "-f", "feature_level", metavar="FL", default=None,
                        shell_complete=complete_level, help=help_text)


backend_option = click.option(
    "--backend", type=click.Choice(list(BACKEND_NAMES), case_sensitive=False), default="cpu", show_default=True,
    help="cpu (NumPy), gpu (CuPy), or auto: the GPU where one is usable, else the CPU.")


def quiet_option(help_text: str = "No warnings or progress on stderr."):
    return click.option("-q", "--quiet", is_flag=True, help=help_text)


def call_options(command):
    """The options that describe a call, shared by run and validate (the operator's own come with it)."""
    options = [
        feature_level_option(),
        click.option("--dtype", "dtype", metavar="TYPE", default=None, shell_complete=complete_data_type,
                     help="Data type of inputs given as bare JSON lists (uint8, UINT8, DML_TENSOR_DATA_TYPE_UINT8, ...)."),
        click.option("--convert", "convert", metavar="TYPE", multiple=True, shell_complete=complete_data_type,
                     help="Convert typed inputs (.npy, .npz, typed JSON) of another type of the same kind to TYPE: "
                          "floats rounded to nearest (NumPy's FLOAT64 to float32), integers exactly (int64 to "
                          "int32); one float and one integer type may be given. The run reads its inputs whole and "
                          "its caption says what was converted."),
        click.option("--output-dtype", metavar="TYPE", default=None, shell_complete=complete_data_type,
                     help="OutputTensor data type where the operator lets you choose (uint8 or uint32) [default: uint8]."),
        click.option("--output-shape", metavar="SIZES", default=None,
                     help="OutputTensor Sizes (2,3,4) for operators with no input to take them from "
                          "(FILL_VALUE_CONSTANT, FILL_VALUE_SEQUENCE, DIAGONAL_MATRIX, DIAGONAL_MATRIX1 without "
                          "InputTensor); for the others it must agree with the Sizes they compute."),
        click.option("--outputs", "asked_outputs", metavar="NAME[,NAME...]", default=None,
                     help="Compute only these outputs (DESC names, any case: OutputTensor,OutputStateTensor), as a "
                          "desc whose other _Maybenull_ outputs are NULL: those left out are neither computed nor "
                          "written, so the -o targets are one per output named (describe lists which may be left "
                          "out) [default: every output]."),
        click.option("--broadcast", is_flag=True,
                     help="Broadcast inputs of different shapes by NumPy's rules, as DirectML's zero strides do: an "
                          "element-wise operator's inputs; the matrix products' batch Sizes and GEMM's CTensor (ONNX's "
                          "MatMul and Gemm shapes; describe says what each operator broadcasts)."),
        click.option("--float-rules", type=click.Choice(["ieee", "d3d"], case_sensitive=False), default="ieee",
                     show_default=True,
                     help="ieee: IEEE-754 results; d3d: Direct3D's rules, as DirectML's GPU kernels run them "
                          "(FLOAT32 subnormals flushed to zero, NaN payloads not kept)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def parameter_values(operator, arguments: dict) -> dict:
    """The operator's own parameter options among a command's arguments (removed from `arguments`)."""
    return {option: arguments.pop(option) for option in list(operator.options) if option in arguments}


def dask_run_options(command):
    """--scheduler, --workers and --chunks: a run on Dask (see dmlcli.distributed); parsed without importing Dask."""
    options = [
        click.option("--scheduler", metavar="SCHEDULER", envvar="DMLCLI_SCHEDULER", default=None,
                     help="Run on Dask: threads, processes, sync, or a dask.distributed scheduler's address "
                          "(tcp://HOST:PORT) [default with a Zarr input: threads; env: DMLCLI_SCHEDULER]."),
        click.option("--workers", metavar="N", type=WholeNumbers(min=1), default=None,
                     help="Run on a Dask LocalCluster of N worker processes started and stopped for this run "
                          "(with --scheduler threads|processes: the pool's size)."),
        click.option("--chunks", metavar="SIZES", default=None,
                     help="Chunk shape of a Zarr output: auto, one size (256) or one per dimension (256,1024) "
                          "[default: the first Zarr input's]."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def dask_settings(scheduler, workers, chunks):
    """The run's DaskOptions, or None where none of the Dask options was given."""
    if scheduler is None and workers is None and chunks is None:
        return None
    from ..distributed.settings import dask_options

    return dask_options(scheduler, workers, chunks)
