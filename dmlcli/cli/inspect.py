"""`dmlcli show FILE` (alias `inspect`): look at a tensor file that came from elsewhere, such as a Windows
machine's result: its values as `run` shows them, its type and shape, and counts of special values."""

from __future__ import annotations

import copy
import sys

import click

from .app import cli, exit_codes_help, warnings_reported
from .options import TensorCommand, complete_data_type, complete_path


@click.command("show", cls=TensorCommand, epilog=exit_codes_help(0, 2, 5))
@click.argument("source", metavar="FILE", shell_complete=complete_path)
@click.option("--format", "style", type=click.Choice(["table", "bits", "hex", "json"]), default="table",
              show_default=True,
              help="table, bits or hex: the values, type, shape and counts on stdout; json: the JSON tensor "
                   "alone on stdout (the counts go to stderr).")
@click.option("--dtype", "dtype", metavar="TYPE", default=None, shell_complete=complete_data_type,
              help="Data type of a bare JSON list (uint8, UINT8, DML_TENSOR_DATA_TYPE_UINT8, ...), or int4/uint4 "
                   "for a .npy that numpy.save wrote from ml_dtypes' int4/uint4 ('<V1').")
def show(source, style, dtype):
    """Show the tensor in FILE: its values, data type, shape, and how many elements are zero,
    NaN, +inf, -inf or subnormal (floats).

    FILE is a .npy or .json file, - (stdin) or an inline JSON literal, read as run reads its
    inputs. A .npy file is memory-mapped: the counts read it once in constant memory and a
    summarised table (more than 1000 elements) reads only the elements it shows.

    \b
    Examples:
      dmlcli show result_from_windows.npy
      dmlcli show samples/is_nan_x.json --format bits
      dmlcli show out.npy --format json | jq .shape
    """
    from ..data_types import from_numpy, parse_data_type
    from ..checking.inspection import count_values
    from ..io.sources import read_tensor

    array = read_tensor(source, label="tensor", dtype=parse_data_type(dtype) if dtype else None)
    counts = count_values(array)
    if style == "json":
        from ..io.atomic import write_output
        from ..io.room import check_room_for_output

        check_room_for_output("-", array.shape, array.dtype, in_memory=True)
        with warnings_reported(quiet=False):
            write_output(array, "-")
        click.echo(counts.describe(), err=True)  # stdout carries the JSON tensor and nothing else
        return
    from ..display.rendering import show as show_tensor

    from ..errors import printable

    name = "stdin" if source == "-" else printable(source)
    caption = f"{name} · {from_numpy(array.dtype).name} · shape {list(array.shape)}"
    show_tensor(array, caption=caption, style=style, stream=sys.stdout)
    click.echo(counts.describe())


cli.add_command(show)
# `inspect` is the same command under a second name; its own copy, so that the group's --debug option is
# added to it once, not twice to one shared list.
inspect_alias = copy.copy(show)
inspect_alias.params = [param for param in show.params if param.name != "debug"]
inspect_alias.short_help = "The same as show."
cli.add_command(inspect_alias, "inspect")
