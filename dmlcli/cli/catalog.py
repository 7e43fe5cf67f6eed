"""The commands that show the operator table: ops (every operator) and describe (one, in full)."""

from __future__ import annotations

import sys

import click

from .app import cli, exit_codes_help
from .json_output import echo_json, format_option
from ..operators.table.index import FAMILY_MODULES
from .options import complete_operator


def _parameter_summary(op) -> str:
    parts = []
    for parameter in op.parameters:
        choices = parameter.choices(parameter.options[0])
        parts.append(f"{parameter.field} ({'|'.join(choices)})" if choices else parameter.field)
    return ", ".join(parts) or "-"


def exactness_summary(op) -> str:
    """The operator's result class and tolerance, as describe and validate print them."""
    from ..operators.table.schema import EXACT

    if op.exactness == EXACT:
        return "exact (bit for bit on every backend); integer results are always exact"
    bound = f". Sum bound: {op.sum_bound.describe(op.tf32_products)}" if op.sum_bound is not None else ""
    return (f"{op.exactness} for float outputs, checked within {op.tolerance.describe(op.tolerance_scale is not None)}"
            f"{bound}; integer results are exact")


def check_summary(call) -> str:
    """The rule --check uses for a call's first output, with the figures of this call (validate prints it)."""
    from ..checking.bounds import bound_figures
    from ..checking.comparison import rule_for

    dtype = call.output.data_type.numpy_dtype
    rule = rule_for(call.operator, dtype, None, call.parameters, call)
    text = f"--check compares {call.output.name} {rule.describe()}"
    own = call.operator.tolerance
    if rule.kind == "ulp" and own is not None and call.operator.tolerance_scale is not None:
        text += f" ({own.for_dtype(dtype):g} ULP times this call's count, {call.operator.tolerance_scale(call)})"
    figures = bound_figures(call)
    if figures is not None:
        text += (f", or within each element's sum bound {figures.describe()}: K = {figures.terms}, u = "
                 f"{figures.roundoff:.3g}, u_out = {figures.output_roundoff:.3g}, M from the inputs "
                 f"({call.operator.sum_bound.magnitude_text})")
    return text


def tf32_summary(op) -> str:
    """What --allow-tf32 (DirectML's ALLOW_HALF_PRECISION_COMPUTATION) does to the operator, as describe prints it."""
    from ..operators.table.schema import TF32_FLAG

    if not op.tf32_products:
        return (f"--allow-tf32 ({TF32_FLAG}) changes nothing for {op.name}: no FLOAT32 matrix products (the flag "
                "only allows)")
    return (f"--allow-tf32 ({TF32_FLAG}): FLOAT32 matrix products on the GPU may run on TF32 tensor cores, and "
            f"FLOAT32 results are then checked within {op.tolerance.describe_tf32(op.tolerance_scale is not None)}"
            + ("; a sum bound takes TF32's unit roundoff, 2^-11" if op.sum_bound is not None else "")
            + "; the CPU's result and FLOAT16 calls do not change")


def optional_tensors_summary(op) -> str:
    """Which inputs a call may leave out (and from which level) and which outputs a DxDispatch desc may leave out."""
    parts = []
    if op.optional_inputs:
        names = ", ".join(name for name, _ in op.optional_inputs)
        parts.append(f"Optional inputs (_Maybenull_; may be left out from {op.optional_since}): {names}: give the "
                     "inputs in DESC order and stop, or write none (command line) or None (API) for one in the "
                     "middle; a DxDispatch desc leaves them out or sets them null.")
    if op.optional_outputs:
        parts.append(f"Optional outputs (_Maybenull_): {', '.join(op.optional_outputs)}: computed and returned "
                     "unless the call leaves them out (--outputs NAME[,NAME...], outputs= in the API, a DxDispatch "
                     "desc without them); those left out are neither computed nor written.")
    return " ".join(parts)


def _same_bare_name(op) -> str | None:
    from .. import operators as table_of

    twins = [other for other in table_of.OPERATORS if other.name == op.name and other is not op]
    if not twins:
        return None
    element_wise = op if op.prefix == "ELEMENT_WISE" else twins[0]
    return (f"The bare name {op.name.lower()} means {element_wise.dml_name}; "
            f"{', '.join(t.cli_name for t in [op] + twins if t is not element_wise)} is the other one.")


def output_type_summary(op) -> str:
    if not op.output_type_is_choice:
        tied = [name for name in op.same_data_type if name != op.output]
        return "as inputs" if not op.inputs or tied[0] == op.inputs[0] else f"as {tied[0]}"
    target = op.choice_output or op.output
    choices = []
    for row in op.all_rows():
        for data_type in row.tensors[target].data_types:
            if data_type not in choices:
                choices.append(data_type)
    if len(choices) == 1:
        return choices[0].name
    default = f" (default {op.default_output_type.name})" if op.default_output_type is not None else ""
    return f"{' or '.join(t.name for t in choices)}{default}"


def _matches(op, words: tuple[str, ...]) -> bool:
    """Every word is in the operator's name, family or summary, or in an ONNX name the suite's ONNX table maps onto
    it (`ops ReduceMean` finds REDUCE)."""
    if not words:
        return True
    from ..onnx_spellings import mapped_names

    text = " ".join((op.cli_name, op.dml_name, op.family, op.summary, *mapped_names(op))).lower()
    return all(word.lower() in text for word in words)


def onnx_summary(op) -> str | None:
    """The ONNX names that resolve to the operator and the table's other entries that map onto it, in a line (None
    where there are none)."""
    from ..onnx_spellings import names_for

    resolving, others = names_for(op)
    parts = []
    if resolving:
        named = ", ".join(spelling.name + (f" ({spelling.words()})" if spelling.changed() else "")
                          for spelling in resolving)
        parts.append(f"{named} {'resolves' if len(resolving) == 1 else 'resolve'} to {op.cli_name}")
    if others:
        parts.append(f"{'also ' if resolving else ''}mapped onto it: {'; '.join(others)}")
    if not parts:
        return None
    return f"ONNX (dmlcli's ONNX table, as dmlcli test and dmlcli onnx map it): {'; '.join(parts)}."


def onnx_section(spelling) -> list[str]:
    """describe's lines about an ONNX name: what it resolves to, where each DESC field comes from in ONNX, and what
    only `dmlcli onnx` does around the operator."""
    op = spelling.operator
    lines = [f"{spelling.line()} (dmlcli's ONNX table, as dmlcli test and dmlcli onnx map it): the tensors and "
             f"options are {op.name}'s, described below."]
    fixed = dict(spelling.entry.fixed)
    sources = [f"{field}: {source}" for field, source in spelling.entry.fields.items() if field not in fixed]
    sources += [f"{field}: {value} (fixed)" for field, value in fixed.items()]
    if sources:
        lines.append(f"ONNX's attributes and inputs as {op.name}'s: {'; '.join(sources)}.")
    if spelling.entry.outside:
        lines.append(f"Around the operator, in dmlcli onnx (run takes {op.name}'s tensors and options as they are): "
                     f"{'; '.join(spelling.entry.outside)}.")
    if spelling.others:
        lines.append(f"Other attributes of ONNX's {spelling.name} select "
                     f"{' or '.join(other.cli_name for other in spelling.others)}.")
    return lines


def _onnx_lines(typed: str, op, spelling) -> list[str]:
    """What describe says first about the name typed: an ONNX name's section, or the note for a name typed as ONNX
    spells one that means a DirectML operator (Softmax); nothing for a DirectML name."""
    if spelling is not None:
        return onnx_section(spelling)
    from ..onnx_spellings import clash_note

    note = clash_note(typed, op)
    return [] if note is None else [f"{note}."]


@cli.command(epilog=exit_codes_help(0, 2, 5))
@click.argument("words", nargs=-1, metavar="[WORD]...")
@click.option("--family", type=click.Choice([family for family, _ in FAMILY_MODULES]), default=None,
              help="Only this family.")
@format_option
def ops(words, family, output_format):
    """List the operators by family: inputs, parameters, output type and the level each came in.

    WORDs filter the list: an operator is shown when every word is in its name, family or summary.

    \b
    Examples:
      dmlcli ops
      dmlcli ops --family math
      dmlcli ops relu
      dmlcli ops --format json | jq -r '.operators[].name'
    """
    if output_format == "json":
        from .. import operators as table_of
        from .reports import operator_record

        return echo_json({"operators": [operator_record(op) for name, members in table_of.FAMILIES
                                        for op in sorted(members, key=lambda o: o.cli_name)
                                        if (family is None or family == name) and _matches(op, words)]})
    from .. import operators as table_of
    from ..display.rendering import make_console, show_records
    from ..onnx_spellings import word_note

    console = make_console(sys.stdout)
    for note in filter(None, map(word_note, words)):  # an ONNX name among the words: what it is here
        console.print(f"{note}.", markup=False)
    shown = 0
    for name, members in table_of.FAMILIES:
        chosen = [op for op in sorted(members, key=lambda o: o.cli_name)
                  if (family is None or family == name) and _matches(op, words)]
        if not chosen:
            continue
        rows = [[op.cli_name, ", ".join(op.inputs), _parameter_summary(op), output_type_summary(op),
                 op.introduced.short] for op in chosen]
        # Names and levels are never folded or cut (issue 12, bug 2); the other columns fold.
        show_records(console, f"{name} ({len(chosen)})", ["operator", "inputs", "parameters", "output type", "since"],
                     rows, whole=(0, 4))
        shown += len(chosen)
    if shown == 0:
        click.echo("dmlcli: no operator matches " + " ".join(words or (family or "",)), err=True)


@cli.command(epilog=exit_codes_help(0, 2, 5))
@click.argument("operator", shell_complete=complete_operator)
@format_option
def describe(operator, output_format):
    """Show OPERATOR's formula, parameters and support table at every feature level.

    \b
    Examples:
      dmlcli describe bit_shift_left
      dmlcli describe bit_shift_left --format json | jq '.support[-1]'
    """
    from ..onnx_spellings import resolve

    op, spelling = resolve(operator)
    if output_format == "json":
        from .reports import operator_details

        # Added with issue 31: the ONNX name's resolution (null for a DirectML name).
        return echo_json({**operator_details(op), "onnx": None if spelling is None else spelling.record()})
    from ..display.rendering import make_console

    console = make_console(sys.stdout)
    console.soft_wrap = False  # prose wraps between words on a terminal (a pipe's console has no width limit)
    print_description(console, operator, op, spelling)


def print_description(console, typed: str, op, spelling) -> None:
    """describe's text for an operator, printed on a rich console: the ONNX name's section where `typed` is one,
    then the formula, tensors, result class, parameters, constraints, notes and the support tables. The command
    prints it on stdout; dmlcli.docs.reference writes it into the operator's reference page at a fixed width."""
    from ..feature_levels import ALL_FEATURE_LEVELS
    from ..operators.table.options import option_flag
    from ..operators.table.parameters import EnumParameter
    from ..display.rendering import show_records

    for line in _onnx_lines(typed, op, spelling):
        console.print(line, markup=False)
    console.print(f"{op.dml_name} (DML_OPERATOR_TYPE {op.enum_value})", markup=False)
    console.print(op.summary, markup=False)
    console.print(f"  {op.formula}", markup=False)
    shown_tensors = [f"{name} (one or more)" if name == op.variadic else name for name in op.tensors]
    console.print(f"Introduced in {op.introduced}. Tensors: {', '.join(shown_tensors)}.", markup=False)
    if op.optional_inputs or op.optional_outputs:
        console.print(optional_tensors_summary(op), markup=False)
    console.print(f"Result: {exactness_summary(op)}", markup=False)
    console.print(f"TF32: {tf32_summary(op)}.", markup=False)
    from .reports import broadcast_summary

    broadcast = broadcast_summary(op)
    if broadcast is not None and not op.is_elementwise:
        console.print(f"Broadcast (--broadcast, broadcast=True): {broadcast}.", markup=False)
    same_name = _same_bare_name(op)
    if same_name is not None:
        console.print(same_name, markup=False)
    onnx = onnx_summary(op)
    if onnx is not None:
        console.print(onnx, markup=False)
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
    if op.same_sizes:  # shaped operators' Sizes follow their shape rules (the notes say how)
        constraints.append(f"{', '.join(op.same_sizes)} must have the same DimensionCount and Sizes.")
    if op.output_type_is_choice and op.default_output_type is not None:
        constraints.append(f"The {op.choice_output or op.output} data type is chosen with --output-dtype "
                           f"(default {op.default_output_type.name}).")
    if op.in_place:
        constraints.append("In-place: the output may alias an input.")
    for line in constraints + list(op.notes):
        console.print(line, markup=False)
    # One table per group of a parameter's values where the rows depend on it (REDUCE's by Function).
    groups = op.support_groups or ((None, op.support),)
    for values, group in groups:
        rows = []
        for fl in ALL_FEATURE_LEVELS:
            found = [row for row in group if row.level <= fl]
            row = max(found, key=lambda r: r.level) if found else None
            if row is None:
                rows.append([fl.short] + ["not available"] * len(op.tensors))
                continue
            rows.append([fl.short] + [f"{row.tensors[n].describe_dims()}; {row.tensors[n].describe_data_types()}"
                                      for n in op.tensors])
        which = f" with {op.support_by} {', '.join(values)}" if values else ""
        # Levels whole; the cells wrap between types, never cutting one (show_records lists them on a narrow
        # terminal).
        show_records(console, f"{op.name}{which}: tensor support by feature level (dimension counts; data types)",
                     ["feature level", *op.tensors], rows, whole=(0,))
