"""Writes the generated part of table/index.py from the whole table: `python -m dmlcli.operators.regenerate`.

Run it after adding an operator or a parameter (tests/test_operator_index.py fails until it is run): every
accepted spelling of an operator -> (its key, the module that holds it), and every parameter option -> (the
first operator that takes it, its module). It imports every family, so nothing else imports it.
"""

from __future__ import annotations

from pathlib import Path

from . import _module, spellings
from .table import index
from .table.directml_names import OPERATOR_ALIASES

BEGIN = "# ---- generated: python -m dmlcli.operators.regenerate ----\n"
END = "# ---- end of generated part ----\n"


def spelling_index(modules) -> dict[str, tuple[str, str]]:
    """Every accepted spelling -> (the operator's key, the family module that holds it): what index.py holds.

    `modules`: (module name, its operators) pairs. An activation's bare name stands for it where no
    ELEMENT_WISE operator has that name (IDENTITY and TANH exist in both families: the bare name is the
    ELEMENT_WISE one).
    """
    by_key: dict[str, tuple[str, str]] = {}
    for module, operators in modules:
        for op in operators:
            for key in spellings(op):
                by_key[key] = (op.key, module)
    for module, operators in modules:
        for op in operators:
            if op.prefix not in ("ELEMENT_WISE", ""):
                by_key.setdefault(op.name, (op.key, module))
    # DirectML.h's other names for an operator (DML_OPERATOR_SCATTER is SCATTER_ELEMENTS).
    for alias, key in OPERATOR_ALIASES.items():
        if key in by_key:
            by_key.setdefault(alias, by_key[key])
    return by_key


def option_index(modules) -> dict[str, tuple[str, str]]:
    """Each API keyword -> (the first operator that takes it, its module), in table order: what index.py holds."""
    found: dict[str, tuple[str, str]] = {}
    for module, operators in modules:
        for op in operators:
            for option in op.options:
                found.setdefault(option, (op.key, module))
    return found


def family_modules() -> list[tuple[str, tuple]]:
    """(module name, its operators) for every module FAMILY_MODULES names, in its order."""
    names = list(dict.fromkeys(module for _, modules in index.FAMILY_MODULES for module in modules))
    return [(module, _module(module).OPERATORS) for module in names]


def generated_text() -> str:
    """The generated part of table/index.py, from the whole table."""
    modules = family_modules()
    lines = ["SPELLINGS: dict[str, tuple[str, str]] = {"]
    lines += [f"    {key!r}: {value!r}," for key, value in spelling_index(modules).items()]
    lines += ["}", "OPTIONS: dict[str, tuple[str, str]] = {"]
    lines += [f"    {key!r}: {value!r}," for key, value in option_index(modules).items()]
    lines += ["}"]
    return "\n".join(lines) + "\n"


def write() -> None:
    path = Path(index.__file__)
    head, rest = path.read_text().split(BEGIN)
    _, tail = rest.split(END)
    path.write_text(head + BEGIN + generated_text() + END + tail)


if __name__ == "__main__":
    write()
