"""Option bundles, declared once and shared by the commands.

`call_options` describes a call: the feature level, the inputs' data type, the output type,
broadcasting, and one option per parameter of the operator table (its kebab-case DESC field name,
`--infinity-mode`, with its choices for help and shell completion). A parameter added to the table
appears here with no edit.
"""

from __future__ import annotations

import click

from ..backends import BACKEND_NAMES
from .. import operators as table
from ..operators.parameters import option_flag

# Built once, when the command line is imported: a family registered later has no options here.
KNOWN_OPTIONS = table.known_options()


def complete_operator(ctx, param, incomplete):
    return [op.cli_name for op in table.OPERATORS if op.cli_name.startswith(incomplete.lower())]


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


def _owners(option: str) -> list:
    return [op for op in table.OPERATORS if option in op.options]


def _names(operators: list) -> str:
    names = [op.name for op in operators]
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _parameter_help(option: str) -> str:
    """One option may stand for several operators' fields: say so where their meanings or defaults differ."""
    owners = _owners(option)
    parameters = [op.options[option] for op in owners]
    first = parameters[0]
    choices = first.choices(option)
    alike = all(p.help == first.help and p.describe_default() == first.describe_default() for p in parameters)
    if alike:
        text = f"{_names(owners)}'s {first.field}: {first.help}"
        if choices:
            text += f" ({', '.join(choices)})"
        return text + f" [default: {first.describe_default()}]."
    fields = sorted({p.field for p in parameters})
    return (f"The {'/'.join(fields)} field of {_names(owners)}; its meaning and default differ by operator: "
            "see dmlcli describe OPERATOR.")


def _completer(option: str):
    def complete(ctx, param, incomplete):
        choices = KNOWN_OPTIONS[option].choices(option) or ()
        return [c for c in choices if c.startswith(incomplete.lower())]

    return complete


def parameter_options() -> list:
    """One click option per API keyword of the table's parameters, in table order."""
    return [click.option(option_flag(option), option, metavar=parameter.metavar(option), default=None,
                         help=_parameter_help(option), shell_complete=_completer(option))
            for option, parameter in KNOWN_OPTIONS.items()]


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
    """The options that describe a call, shared by run and validate."""
    options = [
        feature_level_option(),
        *parameter_options(),
        click.option("--dtype", "dtype", metavar="TYPE", default=None, shell_complete=complete_data_type,
                     help="Data type of inputs given as bare JSON lists (uint8, UINT8, DML_TENSOR_DATA_TYPE_UINT8, ...)."),
        click.option("--output-dtype", metavar="TYPE", default=None, shell_complete=complete_data_type,
                     help="OutputTensor data type where the operator lets you choose (uint8 or uint32) [default: uint8]."),
        click.option("--output-shape", metavar="SIZES", default=None,
                     help="OutputTensor Sizes (2,3,4) for operators with no input to take them from "
                          "(FILL_VALUE_CONSTANT, FILL_VALUE_SEQUENCE, DIAGONAL_MATRIX, DIAGONAL_MATRIX1 without "
                          "InputTensor); for the others it must agree with the Sizes they compute."),
        click.option("--broadcast", is_flag=True,
                     help="Broadcast inputs of different shapes by NumPy's rules (DirectML's zero strides)."),
        click.option("--float-rules", type=click.Choice(["ieee", "d3d"], case_sensitive=False), default="ieee",
                     show_default=True,
                     help="ieee: IEEE-754 results; d3d: Direct3D's rules, as DirectML's GPU kernels run them "
                          "(FLOAT32 subnormals flushed to zero, NaN payloads not kept)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def parameter_values(arguments: dict) -> dict:
    """The parameter options among a command's arguments (removed from `arguments`)."""
    return {option: arguments.pop(option) for option in list(KNOWN_OPTIONS) if option in arguments}


def dask_run_options(command):
    """--scheduler, --workers and --chunks: a run on Dask (see dmlcli.distributed); parsed without importing Dask."""
    options = [
        click.option("--scheduler", metavar="SCHEDULER", envvar="DMLCLI_SCHEDULER", default=None,
                     help="Run on Dask: threads, processes, sync, or a dask.distributed scheduler's address "
                          "(tcp://HOST:PORT) [default with a Zarr input: threads; env: DMLCLI_SCHEDULER]."),
        click.option("--workers", metavar="N", type=click.IntRange(min=1), default=None,
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
