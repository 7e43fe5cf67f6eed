"""The operator table: one declarative entry per DirectML operator, and finding an entry by any of its names.

The package is laid out by concern, each layer importing only the ones below it (tests/test_layout.py):
- table/: what an entry is and how the table is indexed: schema (an entry and its self-checks), options and
  parameters (the parameter kinds), shaped (what a shape rule works with), hooks (value checks that warn),
  index (which module holds each operator and option), directml_names (DirectML.h's alias) and onnx_names
  (ONNX's operator names, which never get spelling suggestions; what they mean is the suite's ONNX table).
- numerics/: what kernels of several families share: the float specials, Direct3D's float-to-integer
  conversions, ScaleBias, the compiled CPU loops and the CUDA prelude.
- elementwise/: the element-wise families (bitwise, logical, comparison, arithmetic, selection, math,
  activations), one module each: entries, NumPy kernels, CUDA bodies.
- one package per family of shaped operators (quantization, reduction, movement, indexing, pooling,
  generation, convolution, matmul, recurrent, normalization, resampling): entries.py holds the family's entries
  with their shape rules and the kernel written once for NumPy and CuPy; gpu.py, where there is one, the
  family's own CUDA kernels.
- this module: find_operator and the whole table; regenerate.py writes table/index.py from it.

The validator, the command line, the API, `dispatch`, `describe` and both backends read these entries; nothing
about a particular operator lives anywhere else. Adding an operator means adding its entry and kernel bodies to
its family's module (and regenerating the index: `python -m dmlcli.operators.regenerate`).

The table is loaded lazily: table/index.py declares which module holds each operator (by every spelling) and
which operator owns each parameter option, so that a one-operator run imports one family module, not all of
them. `OPERATORS` and `FAMILIES` (the whole table) load every module on first use; tests check the index
against them.
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING

from ..errors import InputError, quoted
from .table.index import FAMILY_MODULES, SPELLINGS
from .table.options import all_options
from .table.schema import Operator, SupportRow, TensorSupport

if TYPE_CHECKING:  # annotations only: the parameter kinds are loaded with the first operator that has parameters
    from .table.parameters import Parameter

__all__ = ["OPERATORS", "ELEMENTWISE_OPERATORS", "FAMILIES", "Operator", "SupportRow", "TensorSupport",
           "find_operator", "lookup_operator", "directml_key", "normalised_name", "known_options", "register_family",
           "all_operators"]

_registered: list[tuple[str, tuple[Operator, ...]]] = []  # families added by register_family (plug-ins, tests)
_registered_keys: dict[str, Operator] = {}
_whole: dict[str, object] = {}  # the whole table, once built: FAMILIES, OPERATORS, ELEMENTWISE_OPERATORS
# Spellings already looked up (find_operator's argument -> entry): every call of the API resolves its operator's
# name, by a regular expression and an import (issue 23). Emptied when a family is registered, whose spellings
# come before the table's.
_found: dict[str, Operator] = {}


def _module(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def _families() -> tuple[tuple[str, tuple[Operator, ...]], ...]:
    """Families in the order `dmlcli ops` shows them (every family module imported)."""
    found = tuple((family, tuple(op for module in modules for op in _module(module).OPERATORS if op.family == family))
                  for family, modules in FAMILY_MODULES)
    listed = sum(len(members) for _, members in found)
    held = len({id(op) for _, modules in FAMILY_MODULES for module in modules for op in _module(module).OPERATORS})
    if listed != held:  # an entry whose family is not one that FAMILY_MODULES gives its module
        raise ValueError("operator table: an entry's family is not listed for its module in index.FAMILY_MODULES")
    return found + tuple(_registered)


def _build_whole() -> None:
    families = _families()
    operators = tuple(op for _, members in families for op in members)
    _check_table(operators)
    _whole.update(FAMILIES=families, OPERATORS=operators,
                  ELEMENTWISE_OPERATORS=tuple(op for op in operators if op.is_elementwise))


def __getattr__(name: str):
    # FAMILIES, OPERATORS and ELEMENTWISE_OPERATORS are built on first use: a run of one operator never needs them.
    if name in ("FAMILIES", "OPERATORS", "ELEMENTWISE_OPERATORS"):
        if not _whole:
            _build_whole()
        return _whole[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def all_operators() -> tuple[Operator, ...]:
    return __getattr__("OPERATORS")


def known_options() -> dict[str, Parameter]:
    """Every API keyword (command-line option) any operator takes, with the first parameter that takes it."""
    found: dict[str, Parameter] = {}
    for op in all_operators():
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


def register_family(name: str, members: tuple[Operator, ...]) -> None:
    """Add a family of entries to the table (a plug-in, or a test's made-up operator).

    Call it before running the command line on them: the command line reads the table when it resolves an
    operator, so a registered operator gets its own options there too.
    """
    members = tuple(members)
    _check_table(all_operators() + members)
    _registered.append((name, members))
    _found.clear()
    for op in members:
        for key in spellings(op):
            _registered_keys[key] = op
    _whole.clear()


def _normalise(text: str) -> str:
    stripped = str(text).strip()
    # The usual spelling (bit_xor: letters, digits, _) has nothing to replace: compiling the expression would cost
    # each run about 0.05 ms (issue 23).
    joined = stripped if stripped.replace("_", "").isalnum() else re.sub(r"[\s\-.]+", "_", stripped)
    return joined.upper().removeprefix("DML_OPERATOR_")


def spellings(op: Operator) -> tuple[str, ...]:
    """Every accepted key: BIT_XOR and ELEMENT_WISE_BIT_XOR; ACTIVATION_RELU (and RELU, see index.py); REDUCE."""
    return (op.key,) + ((op.name,) if op.prefix == "ELEMENT_WISE" else ())


def option_owner(option: str) -> Parameter | None:
    """The parameter of the first operator that takes `option` (one module imported), or None."""
    from .table.index import OPTIONS

    if option in OPTIONS:
        return find_operator(OPTIONS[option][0]).options[option]
    for op in _registered_keys.values():
        if option in op.options:
            return op.options[option]
    return None


def lookup_operator(text: str | Operator) -> Operator | None:
    """The operator any DirectML spelling names (bit_xor, BIT_XOR, bit-xor, ELEMENT_WISE_BIT_XOR,
    DML_OPERATOR_ELEMENT_WISE_BIT_XOR), importing only the family module that holds it; None for any other name
    (no suggestions: find_operator words them)."""
    if isinstance(text, Operator):
        return text
    known = _found.get(text) if isinstance(text, str) else None
    if known is not None:
        return known
    key = _normalise(text)
    if key in _registered_keys:
        return _registered_keys[key]
    if key not in SPELLINGS:
        return None
    full, module = SPELLINGS[key]
    for op in _module(module).OPERATORS:
        if op.key == full:
            if isinstance(text, str):
                _found[text] = op
            return op
    raise AssertionError(f"index.py says {module} holds {full}: regenerate it (python -m dmlcli.operators.regenerate)")


def directml_key(text: str) -> str | None:
    """The key (DML_OPERATOR_<key>) of the operator a DirectML spelling names, without importing its module; None
    for any other name."""
    key = _normalise(text)
    if key in _registered_keys:
        return _registered_keys[key].key
    return SPELLINGS[key][0] if key in SPELLINGS else None


def find_operator(text: str | Operator) -> Operator:
    """Look an operator up by any spelling: bit_xor, BIT_XOR, bit-xor, ELEMENT_WISE_BIT_XOR, DML_OPERATOR_ELEMENT_WISE_BIT_XOR.

    Only the family module that holds it is imported. A name DirectML does not have gets the closest names
    suggested; an ONNX operator's name gets none (its neighbours in spelling mean other things): the command line
    and the API resolve ONNX's names through the suite's ONNX table (dmlcli/onnx_spellings.py), a layer above.
    """
    found = lookup_operator(text)
    if found is not None:
        return found
    key = _normalise(text)
    from .table.onnx_names import onnx_name

    onnx = onnx_name(key)
    if onnx is not None:
        raise InputError(f"unknown operator {quoted(text)}: that is ONNX's {onnx}, not a DirectML operator's name "
                         f"('dmlcli describe {onnx}' says what dmlcli's ONNX table maps it to; dmlcli run, validate "
                         "and dmlcli.run take it)")
    names = sorted({full.removeprefix("ELEMENT_WISE_") if full.startswith("ELEMENT_WISE_") else full
                    for full, _ in SPELLINGS.values()} | {op.cli_name.upper() for op in _registered_keys.values()})
    import difflib  # only to word an unknown name

    close = difflib.get_close_matches(key.removeprefix("ELEMENT_WISE_"), names, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(n.lower() for n in close)}?)" if close else " (run 'dmlcli ops' for the list)"
    raise InputError(f"unknown operator {quoted(text)}{hint}")


def normalised_name(text: str) -> str:
    """An operator's name as the table's keys are compared: upper case, separators as _, no DML_OPERATOR_."""
    return _normalise(text)
