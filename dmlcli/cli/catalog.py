"""The commands that show the operator table: ops (every operator) and describe (one, in full)."""

from __future__ import annotations

import sys

import click

from .app import cli
from .options import complete_operator


def _parameter_summary(op) -> str:
    parts = []
    for parameter in op.parameters:
        choices = parameter.choices(parameter.options[0])
        parts.append(f"{parameter.field} ({'|'.join(choices)})" if choices else parameter.field)
    return ", ".join(parts) or "-"


def output_type_summary(op) -> str:
    if not op.output_type_is_choice:
        return "as inputs"
    choices = []
    for row in op.support:
        for data_type in row.tensors[op.output].data_types:
            if data_type not in choices:
                choices.append(data_type)
    if len(choices) == 1:
        return choices[0].name
    return f"{' or '.join(t.name for t in choices)} (default {op.default_output_type.name})"


@cli.command()
def ops():
    """List every operator: its inputs, parameters and the feature level it came in.

    \b
    Example:
      dmlcli ops
    """
    from rich.table import Table

    from ..operators import FAMILIES
    from ..rendering import make_console

    table = Table(title="DirectML element-wise operators in dmlcli")
    for column in ("operator", "inputs", "parameters", "output type", "introduced"):
        table.add_column(column, no_wrap=True)
    for _, members in FAMILIES:
        for op in sorted(members, key=lambda o: o.name):
            table.add_row(op.cli_name, ", ".join(op.inputs), _parameter_summary(op), output_type_summary(op),
                          op.introduced.short)
    make_console(sys.stdout).print(table)


@cli.command()
@click.argument("operator", shell_complete=complete_operator)
def describe(operator):
    """Show OPERATOR's formula, parameters and support table at every feature level.

    \b
    Example:
      dmlcli describe bit_shift_left
    """
    from rich.table import Table

    from ..feature_levels import ALL_FEATURE_LEVELS
    from ..operators import find_operator
    from ..operators.parameters import EnumParameter, option_flag
    from ..rendering import make_console

    op = find_operator(operator)
    console = make_console(sys.stdout)
    console.print(f"{op.dml_name} (DML_OPERATOR_TYPE {op.enum_value})", markup=False)
    console.print(op.summary, markup=False)
    console.print(f"  {op.formula}", markup=False)
    console.print(f"Introduced in {op.introduced}. Tensors: {', '.join(op.tensors)}.", markup=False)
    for param in op.parameters:
        flags = ", ".join(option_flag(option)[2:] for option in param.options)
        values = ""
        if isinstance(param, EnumParameter):
            values = "; " + ", ".join(f"{param.enum_prefix}{v} = {n}" for v, n in param.values)
        console.print(f"Parameter {param.field} ({flags}): {param.help}{values}; default {param.describe_default()}.",
                      markup=False)
    constraints = []
    if op.same_data_type:
        constraints.append(f"{', '.join(op.same_data_type)} must have the same DataType.")
    constraints.append(f"{', '.join(op.same_sizes)} must have the same DimensionCount and Sizes.")
    if op.output_type_is_choice and op.default_output_type is not None:
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
