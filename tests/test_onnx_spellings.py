"""ONNX's operator names wherever dmlcli takes a name (issue 31, item 2): run, validate, describe, ops WORD, run OP
--help and the API resolve each name of the suite's ONNX table to its DirectML operator with the fields the entry
fixes, or point to `dmlcli onnx` with the reason; a DirectML spelling always wins; no ONNX name gets spelling
neighbours. A run by an ONNX name gives what the suite's adapter gives for the same attributes, wherever the
mapping needs no adapter work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.cli.operator_help import SCREEN_LINES
from dmlcli.errors import InputError
from dmlcli.feature_levels import ALL_FEATURE_LEVELS
from dmlcli.onnx_spellings import default_entry, pointer_reason, resolve, table_names
from dmlcli.operators import find_operator, lookup_operator
from dmlcli.operators.table.onnx_names import ONNX_OPERATORS
from dmlcli.operators.table.options import option_flag
from dmlcli.suite import load_case
from dmlcli.suite.onnx.adapters import OnnxCall, onnx_call
from dmlcli.suite.onnx.mapping import Planned, keyword_for, plan_call
from dmlcli.suite.onnx.table import TABLE, entry_for

from conftest import SHARED, SHARED_MISSING
from test_json_reports import DESCRIBE_KEYS, OPS_KEYS, VALIDATE_KEYS
from test_operator_help import screen_lines

# The table's names that cannot run by their name alone: no DirectML operator (the graph's plumbing, RotaryEmbedding),
# a strided view of ELEMENT_WISE_IDENTITY (Transpose, Expand), an operator picked by an attribute without a default.
POINTERS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout", "Shape", "Size", "Constant", "RotaryEmbedding",
            "Transpose", "Expand", "BitShift"}
# The table's names that DirectML spells (in any case) for another operator than the table's, or with other fields.
SHADOWED = {"Clip": "ELEMENT_WISE_CLIP", "Hardmax": "ACTIVATION_HARDMAX", "Slice": "SLICE",
            "Softmax": "ACTIVATION_SOFTMAX", "Tanh": "ELEMENT_WISE_TANH"}


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


# ---------------------------------------------------------------- the names and the rule


def test_the_names_are_onnxs_every_operator():
    defs = pytest.importorskip("onnx.defs")
    assert ONNX_OPERATORS == {schema.name for schema in defs.get_all_schemas_with_history()}


def test_every_name_of_the_suite_table_is_onnxs():
    assert set(TABLE) <= ONNX_OPERATORS


def test_every_entry_resolves_or_points_to_the_model_runner():
    pointers = set()
    for name in table_names():
        entry = default_entry(name)
        directml = lookup_operator(name)
        if directml is not None:  # a DirectML spelling always wins (Identity is ELEMENT_WISE_IDENTITY)
            assert resolve(name) == (directml, None), name
            continue
        if pointer_reason(entry) is not None:
            pointers.add(name)
            with pytest.raises(InputError) as raised:
                resolve(name)
            message = str(raised.value)
            assert message.startswith(f"'{name}' is ONNX's {name}, which its name alone cannot run: ")
            assert "dmlcli onnx MODEL.onnx" in message and (entry.reason or entry.command_line) in message
            assert ("--fallback cpu" in message) == (entry.directml is None and entry.view is None)
            continue
        operator, spelling = resolve(name)
        assert operator is find_operator(entry.directml) and spelling.name == name and spelling.entry is entry
        assert dict(spelling.fixed) == {keyword_for(entry, operator, field): value
                                        for field, value in entry.fixed.items()}
        assert spelling.line().startswith(f"ONNX's {name} is {operator.cli_name}")
        assert set(spelling.record()["options"]) == {option_flag(keyword) for keyword, _ in spelling.fixed}
    assert pointers == POINTERS


def test_a_call_with_default_attributes_picks_the_entry():
    # Mod's fmod is 0 by default: MODULUS_FLOOR; MaxPool asking for Y alone: MAX_POOLING (as ONNX Runtime's
    # DirectML provider chooses); BatchNormalization's training_mode 0: inference.
    for name, key, others in (("Mod", "ELEMENT_WISE_MODULUS_FLOOR", ["ELEMENT_WISE_MODULUS_TRUNCATE"]),
                              ("MaxPool", "MAX_POOLING", ["MAX_POOLING2"]),
                              ("BatchNormalization", "BATCH_NORMALIZATION", ["BATCH_NORMALIZATION_TRAINING"])):
        operator, spelling = resolve(name)
        assert operator.key == key and [other.key for other in spelling.others] == others


@pytest.mark.parametrize("text", ["ReduceMean", "reducemean", "REDUCEMEAN", "reduce_mean", "reduce-mean",
                                  "Reduce Mean"])
def test_onnx_names_are_case_insensitive_as_dmlcli_names_are(text):
    operator, spelling = resolve(text)
    assert operator.key == "REDUCE" and spelling.name == "ReduceMean"
    assert spelling.line() == "ONNX's ReduceMean is reduce --function average"


@pytest.mark.parametrize("text, key", [
    ("relu", "ACTIVATION_RELU"), ("Relu", "ACTIVATION_RELU"), ("RELU", "ACTIVATION_RELU"), ("Add", "ELEMENT_WISE_ADD"),
    ("Identity", "ELEMENT_WISE_IDENTITY"), ("Round", "ELEMENT_WISE_ROUND"), ("Gemm", "GEMM"),
    *SHADOWED.items(), ("softmax", "ACTIVATION_SOFTMAX"), ("scatter", "SCATTER_ELEMENTS")])
def test_a_directml_spelling_always_wins(text, key):
    operator, spelling = resolve(text)
    assert operator.key == key and spelling is None


def test_the_shadowed_names_are_the_ones_whose_table_meaning_differs():
    shadowed = {name for name in table_names() if lookup_operator(name) is not None
                and default_entry(name).directml is not None
                and lookup_operator(name) is not find_operator(default_entry(name).directml)}
    assert shadowed == set(SHADOWED)


def test_an_onnx_spelling_of_a_directml_name_says_what_onnxs_would_be():
    result = invoke("run", "Softmax", "[1, 2]", "--dtype", "float32", "-o", "-")
    assert result.exit_code == 0
    assert result.stderr == ("dmlcli: Softmax is DirectML's activation_softmax (a DirectML name wins over ONNX's); "
                             "ONNX's Softmax is activation_softmax1\n")
    assert invoke("run", "Softmax", "[1, 2]", "--dtype", "float32", "-o", "-", "-q").stderr == ""
    # The same meaning either way: nothing to say (Round's HALVES_TO_NEAREST_EVEN is ROUND's default).
    for name in ("Relu", "Round"):
        result = invoke("run", name, "[1.5, 2.5]", "--dtype", "float32", "-o", "-")
        assert result.exit_code == 0 and result.stderr == "", name
    assert invoke("describe", "Slice").stdout.startswith(
        "Slice is DirectML's slice (a DirectML name wins over ONNX's); ONNX's Slice is slice1.\nDML_OPERATOR_SLICE ")


@pytest.mark.parametrize("spell", [str, str.lower, str.upper])
def test_no_onnx_name_gets_spelling_neighbours(spell):
    for name in sorted(ONNX_OPERATORS):
        for look_up in (find_operator, resolve):
            try:
                look_up(spell(name))
            except InputError as error:
                assert "did you mean" not in str(error), (name, str(error))
                assert f"ONNX's {name}" in str(error), (name, str(error))


def test_an_onnx_name_outside_the_table_says_so():
    result = invoke("run", "Einsum", "[1]")
    assert result.exit_code == 2
    assert result.stderr == (
        "dmlcli: error: unknown operator 'Einsum': dmlcli's ONNX table (which dmlcli test and dmlcli onnx map with) "
        "has no entry for ONNX's Einsum; a model holding it runs with dmlcli onnx MODEL.onnx --fallback cpu (that "
        "node on ONNX Runtime's CPU provider)\n")
    # Below the suite (the operator table's own lookup, as a DxDispatch model or find_operator meets a name):
    with pytest.raises(InputError, match=r"^unknown operator 'Concat': that is ONNX's Concat, not a DirectML "
                                         r"operator's name \('dmlcli describe Concat' says"):
        find_operator("Concat")
    # A misspelt DirectML name still gets its neighbours.
    assert "did you mean bit_xor" in invoke("run", "bit_xro", "[1]").stderr


# ---------------------------------------------------------------- the issue's examples on the command line


def test_reduce_mean_runs_reduce_with_average_and_says_so(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
    np.save(tmp_path / "x.npy", x)
    result = invoke("run", "ReduceMean", str(tmp_path / "x.npy"), "--axes", "1", "-o", str(tmp_path / "out.npy"))
    assert result.exit_code == 0 and result.stderr == "dmlcli: ONNX's ReduceMean is reduce --function average\n"
    expected = dmlcli.run("reduce", x, axes=[1], function="average")
    assert np.load(tmp_path / "out.npy").tobytes() == expected.tobytes()
    # The same value given again is no conflict; --quiet leaves the line out.
    again = invoke("run", "ReduceMean", str(tmp_path / "x.npy"), "--axes", "1", "--function", "AVERAGE", "-q",
                   "-o", "-")
    assert again.exit_code == 0 and again.stderr == "" and json.loads(again.stdout)["shape"] == [3, 1]


def test_a_conflicting_option_is_a_usage_error_naming_both():
    result = invoke("run", "ReduceMean", "[[1, 2]]", "--dtype", "float32", "--function", "max")
    assert result.exit_code == 2
    assert result.stderr == ("dmlcli: error: ONNX's ReduceMean is reduce with Function average, but --function max "
                             "was given: leave --function out, or name reduce to choose another Function\n")
    # GEMM's defaults are MatMul's fixed fields: the line names none of them, the conflict both.
    result = invoke("validate", "MatMul", "[[1]]", "[[1]]", "--dtype", "float32", "--trans-a", "transpose")
    assert result.exit_code == 2 and result.stderr == (
        "dmlcli: error: ONNX's MatMul is gemm with TransA none, but --trans-a transpose was given: leave --trans-a "
        "out, or name gemm to choose another TransA\n")
    assert invoke("validate", "MatMul", "[[1]]", "[[1]]", "--dtype", "float32").stderr == "dmlcli: ONNX's MatMul is " \
                                                                                         "gemm\n"


@pytest.mark.parametrize("name, operator", [("Conv", "convolution"), ("MatMul", "gemm"),
                                            ("ConvTranspose", "convolution"), ("Concat", "join"),
                                            ("ReduceMean", "reduce"), ("Resize", "resample3"),
                                            ("CumSum", "cumulative_summation")])
def test_the_names_the_issue_found_unknown_resolve(name, operator):
    help_text = CliRunner().invoke(cli, ["run", name, "--help"], terminal_width=78, prog_name="dmlcli")
    assert help_text.exit_code == 0 and help_text.stderr == ""
    assert help_text.stdout.startswith(f"Usage: dmlcli run {name} [OPTIONS] ")
    assert f"ONNX's {name} is {operator}" in " ".join(help_text.stdout.split())
    described = invoke("describe", name)
    assert described.exit_code == 0 and described.stdout.startswith(f"ONNX's {name} is {operator}")


def test_transpose_points_to_the_model_runner():
    for command in (["run", "Transpose", "[[1, 2]]", "--dtype", "float32"], ["run", "Transpose", "--help"],
                    ["describe", "Transpose"], ["validate", "transpose", "[1]"]):
        result = invoke(*command)
        assert result.exit_code == 2 and result.stdout == ""
        assert "is ONNX's Transpose, which its name alone cannot run: ELEMENT_WISE_IDENTITY does it only by reading " \
               "the input through permuted Strides" in result.stderr
        assert result.stderr.rstrip().endswith("a model holding it runs with dmlcli onnx MODEL.onnx")


def test_split_takes_its_pieces_as_split_does():
    planned = plan_call(OnnxCall("Split", (np.arange(6, dtype=np.float32), np.array([2, 4], np.int64)), {},
                                 outputs=2))
    # (split is DirectML's name too: the same operator, nothing said)
    result = invoke("run", "Split", "[0, 1, 2, 3, 4, 5]", "--dtype", "float32", "--output-sizes", "2,4", "-o", "-")
    assert result.exit_code == 0 and result.stderr == ""
    pieces = json.loads(result.stdout)
    expected = planned.finish(dmlcli.run("split", *planned.inputs, output_shapes=planned.output_shapes,
                                         **planned.keywords))
    assert [piece["data"] for piece in pieces.values()] == [array.tolist() for array in expected]


# ---------------------------------------------------------------- describe, ops, validate, --help


def test_describe_an_onnx_name():
    text = invoke("describe", "ReduceMean").stdout
    lines = text.splitlines()
    assert lines[0] == ("ONNX's ReduceMean is reduce --function average (dmlcli's ONNX table, as dmlcli test and "
                        "dmlcli onnx map it): the tensors and options are REDUCE's, described below.")
    assert lines[1].startswith("ONNX's attributes and inputs as REDUCE's: Axes: the axes input (opset 18) or "
                               "attribute") and lines[1].endswith("Function: AVERAGE (fixed).")
    assert lines[2].startswith("Around the operator, in dmlcli onnx (run takes REDUCE's tensors and options as they "
                               "are): keepdims=0: ONNX removes the reduced axes")
    assert lines[3] == "DML_OPERATOR_REDUCE (DML_OPERATOR_TYPE 55)"
    assert "Other attributes of ONNX's Mod select modulus_truncate." in invoke("describe", "Mod").stdout


def test_describe_a_directml_operator_names_the_onnx_operators_mapped_onto_it():
    text = " ".join(invoke("describe", "reduce").stdout.split())
    assert "ReduceSum, ReduceMean (--function average), ReduceMax (--function max)" in text  # (SUM: the default)
    text = " ".join(invoke("describe", "activation_softmax1").stdout.split())
    assert ("mapped onto it: Softmax, though the name Softmax means DirectML's activation_softmax (a DirectML name "
            "wins).") in text
    text = " ".join(invoke("describe", "modulus_truncate").stdout.split())
    assert "mapped onto it: Mod with the attributes that select it (dmlcli describe Mod)." in text
    text = " ".join(invoke("describe", "identity").stdout.split())
    assert "Expand in a model only (dmlcli describe Expand says why); Transpose in a model only" in text


def test_describe_json_adds_the_resolution():
    details = json.loads(invoke("describe", "ReduceMean", "--format", "json").stdout)
    assert set(details) == DESCRIBE_KEYS and details["name"] == "reduce"
    onnx = details["onnx"]
    assert onnx["name"] == "ReduceMean" and onnx["operator"] == "DML_OPERATOR_REDUCE"
    assert onnx["line"] == "ONNX's ReduceMean is reduce --function average"
    assert onnx["options"] == {"--function": "average"} and onnx["others"] == []
    assert "Axes" in onnx["fields"] and "Function" not in onnx["fields"]  # (fixed: in options)
    assert any("keepdims=0" in item for item in onnx["outside"])
    plain = json.loads(invoke("describe", "reduce", "--format", "json").stdout)
    assert plain["onnx"] is None
    assert plain["onnx_names"] == ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                   "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def test_ops_finds_an_operator_by_its_onnx_name():
    result = invoke("ops", "CumSum")
    assert result.exit_code == 0
    assert result.stdout.startswith("ONNX's CumSum is cumulative_summation.\n") and "cumulative_summation" in \
        result.stdout.split("\n", 1)[1]
    records = json.loads(invoke("ops", "CumSum", "--format", "json").stdout)["operators"]
    assert [record["name"] for record in records] == ["cumulative_summation"]
    assert set(records[0]) == OPS_KEYS and records[0]["onnx_names"] == ["CumSum"]
    pointed = invoke("ops", "Reshape")
    assert pointed.exit_code == 0 and pointed.stdout.startswith("'Reshape' is ONNX's Reshape, which its name alone "
                                                                "cannot run: ")


def test_validate_says_the_resolution():
    result = invoke("validate", "Conv", "[[[[1, 2], [3, 4]]]]", "[[[[1]]]]", "--dtype", "float32", "--format", "json")
    assert result.exit_code == 0
    assert result.stderr == "dmlcli: ONNX's Conv is convolution\n"  # (CONVOLUTION's defaults are Conv's fixed fields)
    report = json.loads(result.stdout)
    assert set(report) == VALIDATE_KEYS and report["operator"] == "DML_OPERATOR_CONVOLUTION"
    assert report["onnx"]["options"] == {"--mode": "cross_correlation", "--direction": "forward"}
    rejected = invoke("validate", "Conv", "[[[[1, 2], [3, 4]]]]", "[[[[1]]]]", "--dtype", "float32", "-f", "1_0",
                      "--format", "json")  # (FLOAT32 at 1_0 is fine: a 4-D call is accepted there)
    assert json.loads(rejected.stdout)["onnx"]["name"] == "Conv"


def test_every_resolving_names_help_fits_a_screen():
    for name in table_names():
        if name in POINTERS or lookup_operator(name) is not None:
            continue
        result = CliRunner().invoke(cli, ["run", name, "--help"], terminal_width=78, prog_name="dmlcli")
        assert result.exit_code == 0, (name, result.output)
        assert screen_lines(result.stdout) <= SCREEN_LINES, (name, screen_lines(result.stdout))


# ---------------------------------------------------------------- the API


def test_the_api_takes_onnx_names():
    x = np.float32([[1, 2, 4], [3, 5, 9]])
    assert dmlcli.run("ReduceMean", x, axes=[1]).tobytes() == \
        dmlcli.run("reduce", x, axes=[1], function="average").tobytes()
    assert dmlcli.validate("MatMul", x, x.T.copy()).call.operator.key == "GEMM"
    with pytest.raises(InputError, match="with Function average, but --function max was given"):
        dmlcli.run("ReduceMean", x, function="max")
    with pytest.raises(InputError, match="which its name alone cannot run"):
        dmlcli.run("Transpose", x)


def test_the_dask_api_takes_onnx_names():
    da = pytest.importorskip("dask.array")
    import dmlcli.dask

    a, b = np.uint8([[1, 2], [3, 255]]), np.uint8([[7, 7], [0, 1]])
    lazy = dmlcli.dask.run("BitwiseXor", da.from_array(a, chunks=1), da.from_array(b, chunks=1))
    assert lazy.compute().tolist() == (a ^ b).tolist()


# ---------------------------------------------------------------- the command line against the suite's adapter


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _option_text(value) -> str | None:
    """A keyword's value as the command line writes it (None: no command-line form)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and value and all(_option_text(item) is not None and not isinstance(item, str)
                                                          for item in value):
        return ",".join(_option_text(item) for item in value)
    return None


def _without_adapter_work(name: str, call: OnnxCall) -> tuple[Planned, list[str]] | None:
    """The suite's call for an ONNX call of `name`'s own entry, and the options `dmlcli run NAME` takes for it, where
    the adapter leaves the tensors alone: the DirectML inputs are ONNX's (those DirectML takes as fields left out),
    the options are the fields' values (the entry's fixed ones left to the name) and ONNX's outputs are DirectML's.
    None where the mapping needs the adapter."""
    operator, spelling = resolve(name)
    if entry_for(call) is not default_entry(name):
        return None
    try:
        planned = plan_call(call)
    except InputError:
        return None
    if not isinstance(planned, Planned) or planned.operator is not operator:
        return None
    given = iter(array for array in call.inputs if array is not None)
    if not all(array is not None and any(_same(array, onnx) for onnx in given) for array in planned.inputs):
        return None  # reshaped, reordered or made by the adapter
    fixed = dict(spelling.fixed) if spelling is not None else {}
    words = []
    for keyword, value in planned.keywords.items():
        if value is None or keyword in fixed:
            continue
        text = _option_text(value)
        if text is None:
            return None
        words.append(f"{option_flag(keyword)}={text}")
    if planned.output_dtype:
        words.append(f"--output-dtype={planned.output_dtype}")
    if planned.broadcast:
        words.append("--broadcast")
    if planned.output_shapes:
        if set(planned.output_shapes) != {operator.output} or operator.output == operator.variadic:
            return None  # (--output-shape gives one output's Sizes)
        words.append("--output-shape=" + ",".join(map(str, planned.output_shapes[operator.output])))
    return planned, words


def _suite_outputs(planned: Planned) -> tuple | None:
    """What the suite's mapping gives: DirectML's outputs, where its finish leaves them as they are (None where it
    changes them: adapter work, or a call DirectML refuses)."""
    try:
        raw = dmlcli.run(planned.operator.name, *planned.inputs, output_dtype=planned.output_dtype,
                         broadcast=planned.broadcast, output_shapes=planned.output_shapes or None, **planned.keywords)
    except dmlcli.ValidationError:
        return None
    raw = raw if isinstance(raw, tuple) else (raw,)
    finished = planned.finish(raw)
    return raw if len(finished) == len(raw) and all(map(_same, finished, raw)) else None


def _compare_on_the_command_line(name: str, calls, folder: Path) -> bool:
    """Runs `dmlcli run NAME` on the first call the mapping needs no adapter work for, and asserts it gives the
    suite's outputs bit for bit; False where there is none."""
    for call in calls:
        found = _without_adapter_work(name, call)
        expected = None if found is None else _suite_outputs(found[0])
        if expected is None:
            continue
        planned, words = found
        files = []
        for position, array in enumerate(planned.inputs):
            files.append(str(folder / f"{name}-{position}.npy"))
            np.save(files[-1], array)
        target = folder / f"{name}-out.npz"
        result = invoke("run", name, *files, *words, "-q", "-o", str(target))
        assert result.exit_code == 0, (name, words, result.output)
        with np.load(target) as got:
            outputs = [got[key] for key in got.files]
        assert len(outputs) == len(expected) and all(map(_same, outputs, expected)), (name, words)
        return True
    return False


# A generated call (2x3 inputs of a type the DirectML operator takes, ONNX's default attributes) for the element-wise
# operators and these, whose ONNX inputs are their DirectML inputs too; and the attribute some need.
GENERATED = {"Cast", "ReduceLogSumExp"}
GENERATED_ATTRIBUTES = {"Cast": {"to": 10}}


def _generated_call(name: str) -> OnnxCall:
    operator = find_operator(default_entry(name).directml)
    row = operator.row_at(ALL_FEATURE_LEVELS[-1])
    rng = np.random.default_rng(31)
    inputs = []
    for tensor in operator.required_inputs:
        types = [data_type.numpy_dtype for data_type in row.tensors[tensor].data_types]
        dtype = np.dtype(np.float32) if np.dtype(np.float32) in types else np.dtype(types[0])
        values = rng.uniform(-2, 2, (2, 3)) if dtype.kind == "f" else rng.integers(0, 4, (2, 3))
        inputs.append(values.astype(dtype))
    return OnnxCall(name, tuple(inputs), GENERATED_ATTRIBUTES.get(name, {}))


def _resolving_names() -> list[str]:
    """The table's names `dmlcli run NAME` runs as the table maps them (no pointer, no other DirectML meaning)."""
    return [name for name in table_names()
            if name not in POINTERS | set(SHADOWED) and default_entry(name).directml is not None]


def _element_wise(name: str) -> bool:
    return find_operator(default_entry(name).directml).is_elementwise


def test_element_wise_names_run_as_the_suite_maps_them(tmp_path):
    element_wise = set(filter(_element_wise, _resolving_names()))
    compared = {name for name in element_wise if _compare_on_the_command_line(name, [_generated_call(name)], tmp_path)}
    assert compared == element_wise - {"ConstantOfShape"}  # (its shape input is the output's Sizes: adapter work)
    assert len(compared) > 60


# Every example of these in ../shared needs the adapter (their entries' `outside`): inputs reshaped or reordered
# (BatchNormalization's, the recurrent networks'), ONNX's inputs or outputs in other types or layouts (the integer
# indices, quantization's scales, TopK's, NonZero's), outputs finished (keepdims=0 where no case keeps them), values
# the adapter computes (ConstantOfShape's shape, Split's pieces: test_split_takes_its_pieces_as_split_does).
ADAPTER_WORK = {"GatherND", "ScatterND", "OneHot", "TopK", "ReverseSequence", "NonZero", "BatchNormalization",
                "InstanceNormalization", "LayerNormalization", "GroupNormalization", "MatMulInteger", "ConvInteger",
                "QLinearConv", "MaxUnpool", "RoiAlign", "Attention", "Adam", "RNN", "GRU", "LSTM", "QuantizeLinear",
                "DequantizeLinear", "DynamicQuantizeLinear", "ConstantOfShape", "Split"}


def test_every_resolving_name_runs_as_the_suite_maps_it_where_no_adapter_work_is_needed(tmp_path):
    if not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)
    calls: dict[str, list[OnnxCall]] = {}
    for folder in ("onnx_operators", "onnx_operators_complete"):
        for path in sorted((SHARED / folder).glob("onnx__*.json"), key=lambda path: path.stat().st_size):
            try:
                case = load_case(path)
                calls.setdefault(case.onnx_op, []).append(onnx_call(case))
            except (InputError, StopIteration, RuntimeError):
                continue  # a type DirectML has not (float8, bfloat16): no example
    names = _resolving_names()
    compared = {name for name in names if _compare_on_the_command_line(
        name, calls.get(name, []) + ([_generated_call(name)] if _element_wise(name) or name in GENERATED else []),
        tmp_path)}
    assert set(names) - compared == ADAPTER_WORK
    for name in ("Conv", "ConvTranspose", "MatMul", "Gemm", "Concat", "ReduceMean", "ReduceSum", "Resize", "CumSum",
                 "GlobalAveragePool", "MeanVarianceNormalization", "RMSNormalization", "LRN"):
        assert name in compared, name
