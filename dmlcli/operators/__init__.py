"""The operator table: one declarative entry per DirectML operator, one module per family.

schema.py says what an entry holds (and checks each one as it is built), parameters.py the
parameter kinds, hooks.py the value checks that warn. Each family module (bitwise, logical,
comparison, ...) holds its entries and their NumPy kernels. The validator, the command line, the
API, `dispatch`, `describe` and both backends read these entries; nothing about a particular
operator lives anywhere else. Adding an operator means adding its entry and kernel bodies to its
family module.
"""

from __future__ import annotations

import difflib
import re

from ..errors import InputError, quoted
from . import (activation, arithmetic, bitwise, comparison, generation, logical, movement, quantization, reduction,
               selection, transcendental)
from .directml_names import AXIS_WISE_ACTIVATIONS, OTHER_OPERATORS
from .parameters import Parameter, all_options
from .schema import Operator, SupportRow, TensorSupport

__all__ = ["OPERATORS", "ELEMENTWISE_OPERATORS", "FAMILIES", "Operator", "SupportRow", "TensorSupport", "find_operator", "known_options",
           "register_family", "table_summary"]

# Families in the order `dmlcli ops` shows them.
FAMILIES: tuple[tuple[str, tuple[Operator, ...]], ...] = (
    ("bitwise", bitwise.OPERATORS),
    ("logical", logical.OPERATORS),
    ("comparison", comparison.OPERATORS),
    ("arithmetic", arithmetic.OPERATORS + selection.OPERATORS),
    ("math", transcendental.OPERATORS),
    ("activation", activation.OPERATORS),
    ("quantization", quantization.OPERATORS),
    ("reduction", reduction.OPERATORS),
    ("data movement", movement.OPERATORS),
    ("conversion", generation.OPERATORS_CONVERSION),
    ("generation", generation.OPERATORS_GENERATION),
)
OPERATORS: tuple[Operator, ...] = tuple(op for _, members in FAMILIES for op in members)
# The element-wise operators: those that stream chunk by chunk, broadcast, and run on Dask blockwise.
ELEMENTWISE_OPERATORS: tuple[Operator, ...] = tuple(op for op in OPERATORS if op.is_elementwise)


def table_summary() -> str:
    """What the table as a whole covers, for messages that must not name operators themselves."""
    return "DirectML's element-wise operators (" + ", ".join(name for name, _ in FAMILIES) + ")"


def known_options() -> dict[str, Parameter]:
    """Every API keyword (command-line option) any operator takes, with the first parameter that takes it."""
    found: dict[str, Parameter] = {}
    for op in OPERATORS:
        for option, parameter in all_options(op.parameters).items():
            found.setdefault(option, parameter)
    return found


def _check_table(operators: tuple[Operator, ...]) -> None:
    """Self-checks across entries: names and DML_OPERATOR_TYPE values are unique."""
    for attribute in ("dml_name", "enum_value"):
        seen: dict = {}
        for op in operators:
            key = getattr(op, attribute)
            if key in seen:
                raise ValueError(f"operator table: {op.name} and {seen[key]} share {attribute} {key}")
            seen[key] = op.name


_check_table(OPERATORS)


def register_family(name: str, members: tuple[Operator, ...]) -> None:
    """Add a family of entries to the table (a plug-in, or a test's made-up operator).

    Call it before importing dmlcli.cli: the command line builds its options from the table once.
    """
    global FAMILIES, OPERATORS, ELEMENTWISE_OPERATORS, _BY_KEY
    operators = OPERATORS + tuple(members)
    _check_table(operators)
    FAMILIES = FAMILIES + ((name, tuple(members)),)
    OPERATORS = operators
    ELEMENTWISE_OPERATORS = tuple(op for op in OPERATORS if op.is_elementwise)
    _BY_KEY = _index(OPERATORS)


def _normalise(text: str) -> str:
    return re.sub(r"[\s\-.]+", "_", str(text).strip()).upper().removeprefix("DML_OPERATOR_")


def _spellings(op: Operator) -> tuple[str, ...]:
    """Every accepted key: BIT_XOR and ELEMENT_WISE_BIT_XOR; ACTIVATION_RELU (and RELU, see below)."""
    return (op.key,) + ((op.name,) if op.prefix == "ELEMENT_WISE" else ())


def _index(operators: tuple[Operator, ...]) -> dict[str, Operator]:
    by_key: dict[str, Operator] = {}
    for op in operators:
        for key in _spellings(op):
            by_key[key] = op
    # An activation's bare name stands for it where no ELEMENT_WISE operator has that name
    # (IDENTITY and TANH exist in both families: the bare name is the ELEMENT_WISE one).
    for op in operators:
        if op.prefix not in ("ELEMENT_WISE", ""):
            by_key.setdefault(op.name, op)
    return by_key


_BY_KEY = _index(OPERATORS)


def find_operator(text: str | Operator) -> Operator:
    """Look an operator up by any spelling: bit_xor, BIT_XOR, bit-xor, ELEMENT_WISE_BIT_XOR, DML_OPERATOR_ELEMENT_WISE_BIT_XOR.

    A DirectML operator outside the element-wise family (CONVOLUTION, ACTIVATION_SOFTMAX) gets a
    message saying so; a name DirectML does not have gets the closest names suggested.
    """
    if isinstance(text, Operator):
        return text
    key = _normalise(text)
    if key in _BY_KEY:
        return _BY_KEY[key]
    bare = key.removeprefix("ACTIVATION_")
    if bare in AXIS_WISE_ACTIVATIONS:
        raise InputError(f"DML_OPERATOR_ACTIVATION_{bare} normalises across axes, so it is not element-wise: "
                         f"dmlcli runs {table_summary()}")
    if key in OTHER_OPERATORS:
        raise InputError(f"DML_OPERATOR_{key} is a DirectML operator that dmlcli does not implement: dmlcli runs "
                         f"{table_summary()} (see 'dmlcli ops')")
    onnx = _onnx_suggestion(text, key)
    if onnx is not None:
        raise InputError(onnx)
    names = sorted({op.cli_name.upper() for op in OPERATORS})
    close = difflib.get_close_matches(key.removeprefix("ELEMENT_WISE_"), names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(n.lower() for n in close)}?)" if close else " (run 'dmlcli ops' for the list)"
    raise InputError(f"unknown operator {quoted(text)}{hint}")


def _onnx_suggestion(text: str, key: str) -> str | None:
    """For an ONNX operator name dmlcli does not accept (Xor, Equal, BitShift): the DirectML operator(s) to use."""
    from .onnx_names import ONNX_NOTES, ONNX_TO_DIRECTML, onnx_name

    name = onnx_name(key)
    if name is None:
        return None
    targets = [_BY_KEY[target] for target in ONNX_TO_DIRECTML[name] if target in _BY_KEY]
    if not targets:
        return None
    note = f" ({ONNX_NOTES[name]})" if name in ONNX_NOTES else ""
    uses = " or ".join(op.cli_name for op in targets)
    return f"unknown operator {quoted(text)}: that is ONNX's {name}, which DirectML calls {uses}{note}"
