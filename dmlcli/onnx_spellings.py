"""ONNX's operator names wherever dmlcli takes an operator's name: `run`, `validate`, `describe`, `ops WORD`,
`run OP --help` and the API (dmlcli.run, validate, check, plan, run_files).

What a name means comes from the one ONNX table, the suite's (dmlcli/suite/onnx/table.py), by which `dmlcli test`
maps ONNX's node tests and `dmlcli onnx` runs whole models. The operator table sits far below the suite and never
imports it (tests/test_layout.py); this module sits above both, and reads the suite's table only once a name is
no DirectML name, so that a run by a DirectML name loads nothing of the suite.

The rule:
- A DirectML spelling always wins, in any case: `relu` and `Relu` are ACTIVATION_RELU; `softmax` and `Softmax` are
  ACTIVATION_SOFTMAX, though the table maps ONNX's Softmax (opset 13) onto ACTIVATION_SOFTMAX1; `clip` is
  ELEMENT_WISE_CLIP, `slice` SLICE. dmlcli's names are case-insensitive, so ONNX's (case-sensitive) names are too,
  and a name that means a DirectML operator keeps that meaning. Typed exactly as ONNX spells it, such a name gets
  a note where the table means something else ("ONNX's Softmax is activation_softmax1").
- Any other name of the table, in any case and with or without separators (ReduceMean, reducemean, reduce_mean),
  is the entry a call with ONNX's default attributes selects (Mod: MODULUS_FLOOR, fmod being 0 by default): the
  call runs that DirectML operator with the DESC fields the entry fixes (`fixed`) as options, and a line says so,
  naming the fixed options the operator's defaults do not give ("ONNX's ReduceMean is reduce --function average";
  "ONNX's MatMul is gemm": GEMM's defaults are MatMul's). An option given that contradicts a fixed one is a usage
  error naming both. The tensors and the other options are the DirectML operator's own, as `run OP --help` lists
  them; what the suite's adapter does around the operator for ONNX's own attributes (keepdims=0, auto_pad,
  negative axes, ONNX's shapes: the entry's `outside`) is `dmlcli onnx`'s, and `describe NAME` lists it.
- A name whose entry has no DirectML operator (ONNX's Reshape: the same buffer with other Sizes) or says why it
  cannot run by its name alone (`command_line`: Transpose and Expand are ELEMENT_WISE_IDENTITY reading a strided
  view; BitShift's direction has no default) is a usage error that gives the reason and points to `dmlcli onnx`.
- Any other of ONNX's operator names (operators/table/onnx_names.py) is unknown with that said, never answered
  with DirectML names spelt like it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Mapping

from .errors import InputError, quoted
from .operators import Operator, directml_key, find_operator, lookup_operator, normalised_name
from .operators.table.options import option_flag
from .records import Frozen

MODEL_RUNNER = "a model holding it runs with dmlcli onnx MODEL.onnx"
WITH_FALLBACK = " --fallback cpu (that node on ONNX Runtime's CPU provider)"


class OnnxSpelling(Frozen):
    """An ONNX operator's name resolved: the DirectML operator its table entry names, the options the entry fixes
    (API keyword, value as the table gives it) and the operators other attributes of ONNX's select."""

    name: str
    operator: Operator
    fixed: tuple[tuple[str, object], ...]
    entry: object  # the suite's table Entry
    others: tuple[Operator, ...]

    def __init__(self, name: str, operator: Operator, fixed: tuple[tuple[str, object], ...], entry,
                 others: tuple[Operator, ...]) -> None:
        vars(self).update(name=name, operator=operator, fixed=fixed, entry=entry, others=others)

    def _parsed(self, keyword: str, value):
        return self.operator.options[keyword].parse({keyword: value}, {})

    def _shown(self, keyword: str, value) -> str:
        return self.operator.options[keyword].describe(self._parsed(keyword, value))

    def options(self) -> dict[str, str]:
        """Every fixed option as the command line spells it: {"--function": "average"}."""
        return {option_flag(keyword): self._shown(keyword, value) for keyword, value in self.fixed}

    def changed(self) -> tuple[tuple[str, object], ...]:
        """The fixed fields the operator's defaults do not give (MatMul's TransA NONE, TransB NONE, Alpha 1 and
        Beta 1 are GEMM's defaults: none)."""
        return tuple((keyword, value) for keyword, value in self.fixed
                     if self._parsed(keyword, value) != self.operator.options[keyword].default)

    def words(self) -> str:
        """The options the operator's defaults do not give, as typed: "--function average" ("" for none)."""
        return " ".join(f"{option_flag(keyword)} {self._shown(keyword, value)}" for keyword, value in self.changed())

    def line(self) -> str:
        """What the name runs, as the command line says it: "ONNX's ReduceMean is reduce --function average"."""
        words = self.words()
        return f"ONNX's {self.name} is {self.operator.cli_name}" + (f" {words}" if words else "")

    def with_fixed(self, options: Mapping[str, object]) -> dict:
        """`options` (API keywords; None where not given) with each fixed field set; an option given another value
        than a fixed field's is a usage error naming both."""
        merged = dict(options)
        for keyword, value in self.fixed:
            given = merged.get(keyword)
            if given is None:
                merged[keyword] = value
                continue
            parameter = self.operator.options[keyword]
            chosen = self._parsed(keyword, given)
            if chosen != self._parsed(keyword, value):
                flag = option_flag(keyword)
                raise InputError(f"ONNX's {self.name} is {self.operator.cli_name} with {parameter.field} "
                                 f"{self._shown(keyword, value)}, but {flag} {parameter.describe(chosen)} was given: "
                                 f"leave {flag} out, or name {self.operator.cli_name} to choose another "
                                 f"{parameter.field}")
        return merged

    def record(self) -> dict:
        """The JSON form (validate's and describe's "onnx" key): the line, the fixed options, the operators other
        attributes select, where each DESC field comes from in ONNX, and what `dmlcli onnx` does around the
        operator."""
        return {"name": self.name, "operator": self.operator.dml_name, "line": self.line(),
                "options": self.options(), "others": [other.dml_name for other in self.others],
                "fields": dict(self.entry.fields), "outside": list(self.entry.outside)}


def resolve(text) -> tuple[Operator, OnnxSpelling | None]:
    """The operator a name means, and the ONNX spelling it was given in (None for a DirectML name). InputError for
    a name that means no operator: an ONNX name that cannot run by its name alone (with the reason and `dmlcli
    onnx`), or an unknown name (with the DirectML names spelt alike, unless it is one of ONNX's)."""
    found = lookup_operator(text)
    if found is not None:
        return found, None
    from .operators.table.onnx_names import onnx_name

    name = onnx_name(normalised_name(text))
    if name is None:
        return find_operator(text), None  # raises: unknown, with the DirectML names spelt alike
    spelling = spelling_of(name, text)
    return spelling.operator, spelling


def request(op, parameters: Mapping[str, object], **call):
    """engine.request for an operator named in any spelling (the API's entry points): an ONNX name (ReduceMean) is
    its DirectML operator with the fields its entry fixes (function="AVERAGE")."""
    from . import engine

    operator, spelling = resolve(op)
    options = dict(parameters) if spelling is None else spelling.with_fixed(parameters)
    return engine.request(operator, **call, **options)


def _table():
    """The suite's ONNX table, imported on the first ONNX name (a DirectML name never loads the suite)."""
    from .suite.onnx import table

    return table


def table_names() -> tuple[str, ...]:
    """Every ONNX operator the suite's table maps, in its order."""
    return tuple(_table().TABLE)


def default_entry(name: str):
    """The entry a call of ONNX's `name` with ONNX's default attributes selects (None: the table has none)."""
    from .suite.onnx.adapters import OnnxCall

    return _table().entry_for(OnnxCall(name, ()))


def pointer_reason(entry) -> str | None:
    """Why the entry's ONNX operator cannot run by its name alone, ending in where it runs; None where it can."""
    if entry.directml is None:
        return f"{entry.reason}; {MODEL_RUNNER}{'' if entry.view is not None else WITH_FALLBACK}"
    if entry.command_line:
        return f"{entry.command_line}; {MODEL_RUNNER}"
    return None


def spelling_of(name: str, typed=None) -> OnnxSpelling:
    """ONNX's operator `name` resolved through the suite's table, or InputError saying why it cannot be."""
    shown = quoted(name if typed is None else typed)
    entry = default_entry(name)
    if entry is None:
        raise InputError(f"unknown operator {shown}: dmlcli's ONNX table (which dmlcli test and dmlcli onnx map "
                         f"with) has no entry for ONNX's {name}; {MODEL_RUNNER}{WITH_FALLBACK}")
    reason = pointer_reason(entry)
    if reason is not None:
        raise InputError(f"{shown} is ONNX's {name}, which its name alone cannot run: {reason}")
    return _spelling(entry)


def _spelling(entry) -> OnnxSpelling:
    """The resolution of an entry that names a DirectML operator."""
    from .suite.onnx.mapping import keyword_for

    table = _table()
    operator = find_operator(entry.directml)
    fixed = tuple((keyword_for(entry, operator, field), value) for field, value in entry.fixed.items())
    siblings = (table.TABLE[entry.onnx_op], *table.VARIANTS.get(entry.onnx_op, ()))
    others = tuple(dict.fromkeys(find_operator(other.directml) for other in siblings
                                 if other is not entry and other.directml is not None))
    return OnnxSpelling(entry.onnx_op, operator, fixed, entry, others)


def _same_meaning(spelling: OnnxSpelling, operator: Operator) -> bool:
    """Whether `operator` run with its defaults is what the spelling runs (its operator, fixed fields at their
    defaults: ONNX's Round is ELEMENT_WISE_ROUND with the default RoundingMode)."""
    return spelling.operator is operator and not spelling.changed()


def clash_note(text, operator: Operator) -> str | None:
    """For a name typed exactly as ONNX spells an operator that means a DirectML operator (a DirectML name wins)
    where the suite's table maps ONNX's otherwise (Softmax, Slice, Clip): the note that says both; else None."""
    from .operators.table.onnx_names import ONNX_OPERATORS

    if not isinstance(text, str) or text not in ONNX_OPERATORS:
        return None
    entry = default_entry(text)
    if entry is None or pointer_reason(entry) is not None:
        return None
    onnx = _spelling(entry)
    if _same_meaning(onnx, operator):
        return None
    return f"{text} is DirectML's {operator.cli_name} (a DirectML name wins over ONNX's); {onnx.line()}"


@lru_cache(maxsize=None)
def _entries_by_operator() -> dict[str, tuple]:
    """The suite's table entries (variants too) by the key of the DirectML operator each maps onto."""
    found: dict[str, tuple] = {}
    for entry in _table().ENTRIES:
        if entry.directml is not None:
            key = directml_key(entry.directml)
            found[key] = found.get(key, ()) + (entry,)
    return found


def mapped_names(operator: Operator) -> tuple[str, ...]:
    """Every ONNX operator the suite's table maps onto `operator` (by any attributes, under any name)."""
    return tuple(dict.fromkeys(entry.onnx_op for entry in _entries_by_operator().get(operator.key, ())))


def names_for(operator: Operator) -> tuple[list[OnnxSpelling], list[str]]:
    """The table's ONNX names that mean `operator` (`dmlcli run NAME` runs it as ONNX's operator), and, in words,
    the other entries that map onto it (selected by other attributes, in a model only, a name that means another
    DirectML operator)."""
    resolving, others = [], []
    for entry in _entries_by_operator().get(operator.key, ()):
        name = entry.onnx_op
        spelled = lookup_operator(name)
        if default_entry(name) is not entry:
            others.append(f"{name} with the attributes that select it (dmlcli describe {name})")
        elif pointer_reason(entry) is not None:
            others.append(f"{name} in a model only (dmlcli describe {name} says why)")
        elif spelled is not None and not _same_meaning(_spelling(entry), spelled):
            others.append(f"{name}, though the name {name} means DirectML's {spelled.cli_name} (a DirectML name "
                          "wins)")
        else:
            resolving.append(_spelling(entry))
    return resolving, others


def word_note(word: str) -> str | None:
    """What an ONNX name among `ops`'s words means (its line, or why it cannot run by its name alone); None for a
    word that is no ONNX name of the table, or that DirectML spells."""
    from .operators.table.onnx_names import onnx_name

    name = onnx_name(normalised_name(word))
    if directml_key(word) is not None or name is None or name not in _table().TABLE:
        return None
    try:
        return spelling_of(name).line()
    except InputError as error:
        return str(error)
