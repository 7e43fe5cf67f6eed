"""`dmlcli run OPERATOR --help` (and validate's): one screen about one operator (issue 31, item 3).

What a person asks for with an operator named: what it computes and which tensors it takes, its own options with
this operator's meanings and defaults (the output type where the caller chooses it, --output-shape where the
operator takes its output's Sizes from the caller, --outputs where it has optional outputs), a call that works,
and the common options by name only (`dmlcli run --help` describes each; `dmlcli describe OPERATOR` gives the
whole entry). At most SCREEN_LINES lines at 80 columns: tests/test_operator_help.py holds every operator to it.
"""

from __future__ import annotations

import click

from ..operators.table.options import option_flag
from .examples import example_words

SCREEN_LINES = 60
# The exit codes in one line each, shorter than the command's epilog (which `dmlcli run --help` keeps whole).
_EXIT_WORDS = {0: "success", 1: "--check mismatch", 2: "usage or input error", 3: "rule broken",
               4: "backend unavailable", 5: "internal error"}


def parameter_help(parameter, option: str) -> str:
    """An operator's own option, worded as `describe` words the parameter: meaning, choices, default."""
    choices = parameter.choices(option)
    text = f"{parameter.field}: {parameter.help}"
    # Listed unless the help names them already, or they are a BOOL's true and false (the metavar says BOOL).
    if choices and parameter.metavar(option) != "BOOL" and not all(choice in parameter.help.lower()
                                                                   for choice in choices):
        text += f" ({', '.join(choices)})"
    return text + f" [default: {parameter.describe_default()}]."


def input_words(operator) -> list[str]:
    """The operator's inputs in order, as a usage line names them: optional ones in brackets, a variadic one
    with '...'."""
    optional = {name for name, _ in operator.optional_inputs}
    words = []
    for name in operator.inputs:
        word = f"{name}..." if name == operator.variadic else name
        words.append(f"[{word}]" if name in optional else word)
    return words


def usage_arguments(operator, room: int) -> str:
    """The inputs by name where they fit in `room` characters (the usage line's one line), else [INPUT]... (the
    Inputs line names them)."""
    named = " ".join(input_words(operator))
    return named if len(named) <= room else "[INPUT]..."


def format_operator_help(command: click.Command, ctx: click.Context, formatter: click.HelpFormatter, operator,
                         own: list[click.Option], exit_codes: tuple[int, ...], spelling=None) -> None:
    """The help of `dmlcli COMMAND OPERATOR --help`, written into click's formatter (its width is the terminal's,
    at most 78 columns). Text is wrapped here, between words only: click's wrapping breaks at hyphens, which cut
    option names (--float-|rules). `spelling`: the ONNX name OPERATOR was given by (onnx_spellings.OnnxSpelling),
    or None."""
    path = f"{ctx.command_path} {operator.cli_name if spelling is None else spelling.name}"
    room = formatter.width - len(f"Usage: {path} [OPTIONS] ")
    formatter.write_usage(path, f"[OPTIONS] {usage_arguments(operator, room)}".rstrip())
    formatter.write_paragraph()
    if spelling is not None:
        _write_text(formatter, f"{spelling.line()} (dmlcli describe {spelling.name} maps its attributes):",
                    indent=2)
    summary = operator.summary.rstrip(".")
    _write_text(formatter, f"{operator.dml_name} (since {operator.introduced.short}): {summary}.", indent=2)
    _write_text(formatter, _tensors_line(operator), indent=2)
    rows = _own_rows(ctx, operator, own)
    with formatter.section(f"{operator.name}'s options"):
        if rows:
            _write_rows(formatter, rows)
        else:
            _write_text(formatter, f"{operator.name} has no parameters of its own.")
    words = example_words(operator.cli_name)
    if words is not None:
        with formatter.section("Example"):
            for line in _shell_lines(["dmlcli", command.name, operator.cli_name, *words], formatter.width - 2):
                formatter.write(f"{' ' * formatter.current_indent}{line}\n")
    every_command_s = command.get_help_option(ctx)
    common = [param for param in command.get_params(ctx) if isinstance(param, click.Option) and param not in own
              and param.name not in _LEFT_OUT and param is not every_command_s and not param.hidden]
    with formatter.section(f"Common options ('dmlcli {command.name} --help' describes each)"):
        _write_text(formatter, ", ".join(_spelling(param) for param in common) + ".")
    exits = ", ".join(f"{code} {_EXIT_WORDS[code]}" for code in exit_codes)
    _write_text(formatter, f"The whole entry (formula, support table, notes): dmlcli describe {operator.cli_name}. "
                           f"Exit codes: {exits}.")


OPTION_COLUMN = 28  # the widest option column; a longer option has its help on the next line
_GAP = 2


def _wrapped(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, max(width, 10), break_on_hyphens=False, break_long_words=False) or [""]


def _write_text(formatter: click.HelpFormatter, text: str, indent: int = 0) -> None:
    """A paragraph at the formatter's indent (plus `indent`), wrapped between words."""
    margin = " " * (formatter.current_indent + indent)
    for line in _wrapped(text, formatter.width - len(margin)):
        formatter.write(f"{margin}{line}\n")


def _write_rows(formatter: click.HelpFormatter, rows: list[tuple[str, str]]) -> None:
    """(option, help) rows as click's definition lists lay them out, the help wrapped between words."""
    margin = " " * formatter.current_indent
    first = min(max(len(option) for option, _ in rows), OPTION_COLUMN)
    help_width = formatter.width - len(margin) - first - _GAP
    for option, text in rows:
        lines = _wrapped(text, help_width)
        if len(option) > first:
            formatter.write(f"{margin}{option}\n")
            lines = [" " * (first + _GAP) + line for line in lines]
        else:
            lines = [option.ljust(first + _GAP) + lines[0]] + [" " * (first + _GAP) + line for line in lines[1:]]
        for line in lines:
            formatter.write(f"{margin}{line}\n")


# What the common options leave out: the call options the operator's own section shows where they apply to it,
# and --debug, which every command has (as --help, left out too).
_LEFT_OUT = ("output_dtype", "output_shape", "asked_outputs", "debug")


def _tensors_line(operator) -> str:
    outputs = ", ".join(f"{name}..." if name == operator.variadic else name for name in operator.outputs)
    if not operator.inputs:
        return f"Inputs: none (the output's Sizes come from --output-shape). Outputs: {outputs}."
    notes = [note for present, note in ((operator.optional_inputs, "[optional]"),
                                        (operator.variadic, "... one or more")) if present]
    qualifier = f" ({'; '.join(notes)})" if notes else ""
    return f"Inputs in order{qualifier}: {', '.join(input_words(operator))}. Outputs: {outputs}."


def _own_rows(ctx: click.Context, operator, own: list[click.Option]) -> list[tuple[str, str]]:
    """(option, help) rows: each parameter once (the fused activation's FLOAT fields as one row), then
    --output-dtype and --output-shape where the operator takes them."""
    rows = []
    for parameter in operator.parameters:
        if "fused_activation" in parameter.options:
            rows.extend(_fused_rows(parameter))
            continue
        for option in parameter.options:
            rows.append((f"{option_flag(option)} {parameter.metavar(option)}", parameter_help(parameter, option)))
    output_type = _output_type_row(operator)
    if output_type is not None:
        rows.append(output_type)
    if _takes_output_shape(operator):
        rows.append(("--output-shape SIZES", f"{operator.output}'s Sizes, such as 2,3,4 ({operator.name} takes them "
                                             "from the caller)."))
    if operator.optional_outputs:
        rows.append(("--outputs NAME[,NAME...]", f"The outputs to compute and write; "
                                                 f"{', '.join(operator.optional_outputs)} may be left out "
                                                 "[default: every output]."))
    return rows


def _fused_rows(parameter) -> list[tuple[str, str]]:
    """A fused activation's two rows: which activation, and its FLOAT fields by one pattern (seven options whose
    help would be the same sentence)."""
    choices = ", ".join(parameter.choices("fused_activation"))
    fields = ", ".join(option.removeprefix("fused_").replace("_", "-") for option in parameter.options[1:])
    return [("--fused-activation NAME", f"{parameter.field}: the activation applied to the result ({choices}) "
                                        f"[default: {parameter.describe_default()}]."),
            ("--fused-FIELD FLOAT", f"The activation's FLOAT fields, --fused-{{{fields}}} (each the activation's own "
                                    "default when left out).")]


def _output_type_row(operator) -> tuple[str, str] | None:
    """--output-dtype with this operator's choices and default, where its output type is the caller's choice."""
    if not operator.output_type_is_choice:
        return None
    target = operator.choice_output or operator.output
    choices: list[str] = []
    for row in operator.all_rows():
        for data_type in row.tensors[target].data_types:
            if data_type.numpy_name not in choices:
                choices.append(data_type.numpy_name)
    if len(choices) < 2:
        return None
    default = operator.default_output_type
    shown = f" [default: {default.numpy_name}]" if default is not None else ""
    return ("--output-dtype TYPE", f"{target}'s data type: {', '.join(choices)}{shown}.")


def _takes_output_shape(operator) -> bool:
    """Whether the operator takes its output's Sizes from the caller: it has no required input, or its entry says
    so (its notes or a parameter's help name --output-shape)."""
    if not operator.required_inputs:
        return True
    texts = list(operator.notes) + [parameter.help for parameter in operator.parameters]
    return any("--output-shape" in text for text in texts)


def _spelling(param: click.Option) -> str:
    """An option by its long name alone (--output for -o/--output): what it takes is the command's whole help's to
    say."""
    return max(param.opts, key=len)


CONTINUATION = "    "  # the indent of an example's continued lines


def _shell_lines(words: list[str], width: int) -> list[str]:
    """The command's words on lines of at most `width` characters as a shell reads them: continued with a
    backslash between words, and a quoted JSON tensor too long for a line broken after one of its commas
    (inside single quotes the shell keeps the line break, and JSON reads it as a blank)."""
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if not current or len(candidate) + 2 <= width:
            current = candidate
            continue
        lines.append(current + " \\")
        current = _break_inside(CONTINUATION + word, width, lines)
    lines.append(_break_inside(current, width, lines))
    return lines


def _break_inside(line: str, width: int, lines: list[str]) -> str:
    """`line` cut after a comma (inside a quoted word: the only place a word holds one) while it is too wide; the
    cut-off lines appended to `lines`, the rest returned."""
    while len(line) > width and ", " in line[len(CONTINUATION):width]:
        cut = line.rindex(", ", len(CONTINUATION), width - 1) + 1
        lines.append(line[:cut])
        line = CONTINUATION + line[cut:].lstrip()
    return line
