"""Test cases: one JSON file per case, in the format of ../shared/conformance (README "Test suites").

A case names an operator, its parameters, its input tensors and the expected output (JSON tensor
objects, or .npy file names relative to the case file), whether inputs broadcast, and optionally a
tolerance, the exit code of an expected rejection, a feature level, float rules or a reason to skip.
"expected" may be a list, one tensor per output. An ONNX node test (../shared/onnx_operators) names its
"onnx_op" instead, with its attributes and input/output names: suite/onnx maps it onto a DirectML call.
Anything wrong with a case file is a `CaseError` naming the file and what is wrong: the runner
reports it as that case's error, never as the end of the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from ..checking.comparison import EVERY_BIT, EXACT, Rule
from ..errors import InputError, quoted

# The conformance README's fields (source, notes, ... are kept for people, not read), plus dmlcli's own.
KNOWN_KEYS = frozenset({
    "op", "params", "inputs", "expected", "broadcast", "tolerance", "expect_error", "feature_level",
    "float_rules", "allow_tf32", "skip", "source", "source_commit", "case_name", "notes", "also_in", "tolerance_source",
    "directml_support", "dmlcli_version",
    # ONNX node tests (../shared/onnx_operators): the ONNX operator, its attributes, the inputs' and outputs'
    # names in ONNX's order ("" for an optional input left out) and the version of onnx that generated them.
    "onnx_op", "attributes", "input_names", "output_names", "source_version",
    # The ONNX operator's domain (ai.onnx, ai.onnx.preview.training: ../shared/onnx_operators_complete), for people.
    "domain",
})
# ONNX's tensor types that no DirectML data type holds: an ONNX case with such a tensor is skipped saying so.
ONNX_TYPES_DIRECTML_LACKS = {
    "bfloat16": "bfloat16", "float8_e4m3fn": "float8 (E4M3FN)", "float8_e4m3fnuz": "float8 (E4M3FNUZ)",
    "float8_e5m2": "float8 (E5M2)", "float8_e5m2fnuz": "float8 (E5M2FNUZ)", "float4_e2m1": "float4 (E2M1)",
    "complex64": "complex", "complex128": "complex", "string": "string",
}
# What a call can be rejected with: 2 a malformed call (an unknown parameter value), 3 a call DirectML refuses.
REJECTION_CODES = (2, 3)


class CaseError(InputError):
    """A case file that cannot be read as a case (the runner reports it as that case's error)."""


@dataclass(frozen=True)
class Case:
    """One case, its tensors read."""

    path: Path
    case_id: str
    op: str  # the DirectML operator as written ("" for an ONNX case: see onnx_op)
    params: Mapping[str, object]
    inputs: tuple[np.ndarray, ...]
    expected: np.ndarray | None  # the first (or only) expected output
    broadcast: bool = False
    tolerance: Rule | None = None  # None: the operator's own rule (comparison.rule_for)
    expect_error: int | None = None
    feature_level: str | None = None
    float_rules: str | None = None
    allow_tf32: bool | None = None  # None: the run's setting (--allow-tf32)
    skip: str | None = None
    name: str = ""
    document: Mapping[str, object] = field(default_factory=dict, repr=False)
    # Every expected output in DESC (or ONNX) order, where "expected" is a list: SPLIT, TOP_K, ONNX's Split...
    expected_outputs: tuple[np.ndarray, ...] = ()
    # An ONNX node test: its operator, attributes and names; suite/onnx maps it onto a DirectML operator.
    onnx_op: str | None = None
    attributes: Mapping[str, object] = field(default_factory=dict)
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    source_version: str | None = None

    @property
    def all_expected(self) -> tuple[np.ndarray, ...]:
        """Every expected output in order (the one `expected` for a single-output case)."""
        if self.expected_outputs:
            return self.expected_outputs
        return () if self.expected is None else (self.expected,)


def case_id_for(path: Path, root: Path | None) -> str:
    """The case's name: its path below the folder it was found in, without .json (the file's stem alone when
    the file was named directly)."""
    if root is None or root == path:
        return path.stem
    return path.relative_to(root).with_suffix("").as_posix()


def discover(paths: Iterable[str | Path]) -> list[tuple[Path, str]]:
    """(case file, case id) for each file named and each *.json under each folder named (recursively,
    hidden files and folders left out), sorted by file; InputError for a path that does not exist."""
    found: dict[Path, str] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for file in sorted(path.rglob("*.json")):
                hidden = any(part.startswith(".") for part in file.relative_to(path).parts)
                if file.is_file() and not hidden:
                    found.setdefault(file, case_id_for(file, path))
        elif path.exists():
            _check_case_file(path, given)
            found.setdefault(path, case_id_for(path, None))
        else:
            raise InputError(f"test path {quoted(given)}: no such file or folder")
    return sorted(found.items(), key=lambda item: (str(item[0]), item[1]))


def _check_case_file(path: Path, given) -> None:
    """A case named directly is a file or a FIFO (read as it comes): a device such as /dev/zero would be read
    until memory runs out, a socket cannot be read as a file."""
    import stat

    mode = path.stat().st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        kind = "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise InputError(f"test path {quoted(given)}: is {kind}, expected a case file (.json) or a folder of them")


def read_document(path: Path) -> dict:
    """The case file's JSON object (decimals kept exact, as tensors are read)."""
    # The tensor reader's own JSON parsing (decimals exact, repeated keys refused), so that a case's tensors and
    # numbers read exactly as `dmlcli run` reads them.
    from ..io.json_tensor import _load_json

    from ..io.waiting import note_while_waiting

    try:
        with note_while_waiting(path, f"the case {quoted(path)}"):
            text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CaseError(f"{quoted(path)}: is not UTF-8 text, so not a JSON case") from None
    except OSError as error:
        raise CaseError(f"{quoted(path)}: cannot be read ({error.strerror})") from None
    try:
        document = _load_json(text, where=quoted(path), inline=False)
    except InputError as error:
        raise CaseError(str(error)) from None
    if not isinstance(document, dict):
        raise CaseError(f"{quoted(path)}: a case is a JSON object with \"op\", \"inputs\" and \"expected\", "
                        f"found a {type(document).__name__}")
    return document


def load_case(path: str | Path, case_id: str | None = None, document: dict | None = None) -> Case:
    """Read and check one case file; CaseError (an InputError) says what is wrong and where."""
    path = Path(path)
    document = read_document(path) if document is None else document
    where = quoted(path)
    unknown = sorted(set(document) - KNOWN_KEYS)
    if unknown:
        raise CaseError(f"{where}: unknown key {quoted(unknown[0])} (a case has {', '.join(sorted(KNOWN_KEYS))})")
    onnx = _onnx_fields(document, where)
    op = document.get("op", "" if onnx else None)
    if onnx and "op" in document:
        raise CaseError(f"{where}: a case names either \"op\" (a DirectML operator) or \"onnx_op\", not both")
    if not isinstance(op, str) or (not op and not onnx):
        raise CaseError(f"{where}: \"op\" must name the operator, such as \"bit_xor\"")
    params = _params(document.get("params", {}), where)
    raw_inputs = document.get("inputs")
    if not isinstance(raw_inputs, list):  # empty for the generators (fill_value_constant), which take no input
        raise CaseError(f"{where}: \"inputs\" must be a list of tensors or .npy file names")
    lacking = _type_directml_lacks(document) if onnx else None
    if lacking is not None:
        return Case(path=path, case_id=case_id or path.stem, op=op, params=params, inputs=(), expected=None,
                    skip=lacking, name=str(document.get("case_name") or ""), document=document, **onnx)
    inputs = tuple(_tensor(t, path, f"input {i + 1}") for i, t in enumerate(raw_inputs))
    expect_error = _expect_error(document, where)
    expected, expected_outputs = None, ()
    if "expected" in document and expect_error is None:
        expected_outputs = _expected_list(document["expected"], path, where)
        expected = expected_outputs[0]
        if not isinstance(document["expected"], list):
            expected_outputs = ()
    elif expect_error is None:
        raise CaseError(f"{where}: no \"expected\" tensor (or \"expect_error\": 3 for a call that must be refused)")
    if onnx:
        _check_onnx_names(onnx, len(inputs), len(expected_outputs) or (expected is not None), where)
    broadcast = document.get("broadcast", False)
    if not isinstance(broadcast, bool):
        raise CaseError(f"{where}: \"broadcast\" must be true or false")
    return Case(path=path, case_id=case_id or path.stem, op=op, params=params, inputs=inputs, expected=expected,
                broadcast=broadcast, tolerance=_tolerance(document.get("tolerance"), where),
                expect_error=expect_error, feature_level=_level(document.get("feature_level"), where),
                float_rules=_float_rules(document.get("float_rules"), where),
                allow_tf32=_allow_tf32(document.get("allow_tf32"), where), skip=_skip(document.get("skip"), where),
                name=str(document.get("case_name") or ""), document=document, expected_outputs=expected_outputs,
                **onnx)


def _type_directml_lacks(document: dict) -> str | None:
    """The skip reason of an ONNX case with a tensor of a type DirectML has none of (float8, bfloat16), or None."""
    expected = document.get("expected")
    tensors = list(document.get("inputs") or []) + (expected if isinstance(expected, list) else [expected])
    for tensor in tensors:
        name = tensor.get("dtype") if isinstance(tensor, dict) else None
        if isinstance(name, str) and name.lower() in ONNX_TYPES_DIRECTML_LACKS:
            return (f"ONNX's {name} tensor has no DirectML data type: DML_TENSOR_DATA_TYPE has no "
                    f"{ONNX_TYPES_DIRECTML_LACKS[name.lower()]} (its types: FLOAT16/32/64, 8- to 64-bit integers, "
                    "INT4/UINT4 from 6_3)")
    return None


def _expected_list(value, path: Path, where: str) -> tuple[np.ndarray, ...]:
    """"expected" as one tensor, or a list of them (one per output, in order)."""
    if isinstance(value, list):
        if not value:
            raise CaseError(f"{where}: \"expected\" is an empty list; give one tensor per output")
        return tuple(_tensor(t, path, f"expected output {i + 1}") for i, t in enumerate(value))
    return (_tensor(value, path, "expected"),)


def _onnx_fields(document: dict, where: str) -> dict:
    """The ONNX keys of a node-test case as Case fields ({} for a DirectML case), their types checked."""
    if "onnx_op" not in document:
        stray = sorted({"attributes", "input_names", "output_names"} & set(document))
        if stray:
            raise CaseError(f"{where}: {quoted(stray[0])} belongs to an ONNX case, which names its \"onnx_op\"")
        return {}
    onnx_op = document["onnx_op"]
    if not isinstance(onnx_op, str) or not onnx_op:
        raise CaseError(f"{where}: \"onnx_op\" must name an ONNX operator, such as \"ReduceSum\"")
    attributes = document.get("attributes", {})
    if not isinstance(attributes, dict):
        raise CaseError(f"{where}: \"attributes\" must be an object of ONNX attribute values")
    names = {}
    for key in ("input_names", "output_names"):
        value = document.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise CaseError(f"{where}: {quoted(key)} must be a list of names (strings)")
        names[key] = tuple(value)
    version = document.get("source_version")
    if version is not None and not isinstance(version, str):
        raise CaseError(f"{where}: \"source_version\" must be text, such as \"1.23.2\"")
    if not isinstance(document.get("domain", ""), str):
        raise CaseError(f"{where}: \"domain\" must be text, such as \"ai.onnx\"")
    return {"onnx_op": onnx_op, "attributes": _attribute_values(attributes), "source_version": version, **names}


def _attribute_values(attributes: dict) -> dict:
    """Attribute values as Python numbers: JSON's decimals (read exactly, as Decimal) become the nearest
    double, which holds ONNX's float32 attributes exactly; integers stay integers."""
    def plain(value):
        if isinstance(value, Decimal):
            return float(value)
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    return {key: plain(value) for key, value in attributes.items()}


def _check_onnx_names(onnx: dict, inputs: int, outputs: int, where: str) -> None:
    given = [name for name in onnx["input_names"] if name]
    if onnx["input_names"] and len(given) != inputs:
        raise CaseError(f"{where}: \"input_names\" names {len(given)} inputs (leaving out the empty ones) but "
                        f"\"inputs\" holds {inputs} tensors")
    named = [name for name in onnx["output_names"] if name]  # "": an optional output the test does not check
    if onnx["output_names"] and len(named) != outputs:
        raise CaseError(f"{where}: \"output_names\" names {len(named)} outputs (leaving out the empty ones) but "
                        f"\"expected\" holds {outputs} tensors")


def _params(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise CaseError(f"{where}: \"params\" must be an object of parameter values")
    # Decimals go on as text, as the command line passes them: parameters are read exactly from text.
    return {key: (str(v) if isinstance(v, Decimal) else v) for key, v in value.items()}


def _tensor(value, case_path: Path, label: str) -> np.ndarray:
    from ..io.json_tensor import tensor_from_object

    where = f"{quoted(case_path)} {label}"
    if isinstance(value, dict):
        try:
            return tensor_from_object(value, where=where)
        except InputError as error:
            raise CaseError(str(error)) from None
    if isinstance(value, str) and value.lower().endswith(".npy"):
        from ..io.npy import read_npy
        from ..io.sources import check_input_file

        file = case_path.parent / value
        try:
            check_input_file(file, where=f"{where} {quoted(value)}")
            return read_npy(file, where=f"{where} {quoted(value)}")
        except InputError as error:
            raise CaseError(str(error)) from None
    raise CaseError(f"{where}: expected a tensor object {{\"dtype\": ..., \"data\": ...}} or a .npy file name "
                    "relative to the case file")


def _expect_error(document: dict, where: str) -> int | None:
    code = document.get("expect_error")
    if code is None:
        # onnx_elementwise/README: a case no level's table accepts says so, and must be refused (exit 3).
        support = document.get("directml_support")
        return 3 if isinstance(support, str) and support.startswith("unsupported") else None
    if isinstance(code, bool) or code not in REJECTION_CODES:
        raise CaseError(f"{where}: \"expect_error\" must be an exit code of a refused call: "
                        f"{' or '.join(map(str, REJECTION_CODES))}, found {code!r}")
    return int(code)


def _number(value, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
        raise CaseError(f"{where}: tolerance \"{key}\" must be a number >= 0")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise CaseError(f"{where}: tolerance \"{key}\" must be a finite number >= 0, found {value}")
    return number


def _tolerance(value, where: str) -> Rule | None:
    """{"exact": true}, {"bits": true} (every bit, as --tolerance bits), {"rtol": R, "atol": A} (NumPy's allclose),
    {"ulp": N}, {"atol": A} or {"ulp": N, "atol": A} (either may hold, as --tolerance ulp:N,atol:X), or the same
    as --tolerance's text ("rtol:1e-5,atol:1e-6"); absent or null: the operator's own rule."""
    if value is None:
        return None
    if isinstance(value, str):
        from ..checking.comparison import parse_tolerance

        try:
            return parse_tolerance(value, "the case's tolerance")
        except InputError as error:
            raise CaseError(f"{where}: {error}") from None
    if not isinstance(value, dict) or not value:
        raise CaseError(f"{where}: \"tolerance\" must be an object: {{\"exact\": true}}, {{\"rtol\": R, \"atol\": A}} "
                        "or {\"ulp\": N}, or --tolerance's text (\"rtol:R,atol:A\")")
    keys = set(value)
    if keys == {"exact"} and value["exact"] is True:
        return EXACT
    if keys == {"bits"} and value["bits"] is True:
        return EVERY_BIT
    if keys == {"ulp"}:
        return Rule("ulp", _number(value["ulp"], where, "ulp"), "the case's tolerance")
    if keys == {"atol"}:
        return Rule("atol", _number(value["atol"], where, "atol"), "the case's tolerance")
    if keys == {"ulp", "atol"}:
        return Rule("ulp", _number(value["ulp"], where, "ulp"), "the case's tolerance",
                    floor=_number(value["atol"], where, "atol"), floor_source="the case's tolerance")
    if keys == {"rtol", "atol"} or keys == {"rtol"}:
        return Rule("allclose", _number(value.get("atol", 0), where, "atol"), "the case's tolerance",
                    rtol=_number(value["rtol"], where, "rtol"))
    raise CaseError(f"{where}: \"tolerance\" {sorted(keys)} is not one of {{\"exact\": true}}, {{\"bits\": true}}, "
                    "{\"rtol\": R, \"atol\": A}, {\"ulp\": N}, {\"atol\": A}, {\"ulp\": N, \"atol\": A}")


def _level(value, where: str) -> str | None:
    if value is None:
        return None
    from ..feature_levels import parse_feature_level

    try:
        return parse_feature_level(str(value)).short
    except InputError as error:
        raise CaseError(f"{where}: \"feature_level\": {error}") from None


def _float_rules(value, where: str) -> str | None:
    if value is None:
        return None
    from ..backends.float_rules import parse_float_rules

    try:
        return parse_float_rules(value)
    except InputError as error:
        raise CaseError(f"{where}: \"float_rules\": {error}") from None


def _allow_tf32(value, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise CaseError(f"{where}: \"allow_tf32\" must be true or false")


def _skip(value, where: str) -> str | None:
    if value is None or value is False:
        return None
    if value is True:
        return "the case says skip"
    if isinstance(value, str) and value:
        return value
    raise CaseError(f"{where}: \"skip\" must be a reason (text) or true")
