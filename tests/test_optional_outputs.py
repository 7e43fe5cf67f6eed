"""Optional outputs left out (outputs= in the API, --outputs on the command line, a DxDispatch desc without them).

DirectML.h marks some outputs _Maybenull_ (MULTIHEAD_ATTENTION's present keys and values, RNN/GRU/LSTM's outputs,
RANDOM_GENERATOR's OutputStateTensor, ROI_ALIGN_GRAD's two outputs): a DESC may give them as NULL, and DirectML then
neither computes nor writes them. Each operator here: the outputs asked for equal those of a full call bit for bit,
the call returns only those (in DESC order), the kernel is asked for only those and skips the work of the others
(recorded by patching the kernel's own steps), the refusals (a name that is not an output, a required output left
out, none named, an output the inputs cannot give) say what is wrong and which outputs may be left out; None gives
every output as before. Then the command line (-o per output named, .npz, JSON, --check, --save-case, help and
describe), DxDispatch models that leave outputs out, and the backends' check that a kernel gives one array per output.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli import records
from dmlcli.backends import cpu
from dmlcli.cli import cli
from dmlcli.errors import InputError, ValidationError
from dmlcli.operators import find_operator
from dmlcli.operators.attention import entries as attention
from dmlcli.operators.recurrent import entries as recurrent
from dmlcli.operators.training import roi_align_grad

from conftest import SHARED, SHARED_MISSING

ATTENTION_OUTPUTS = ("OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor")
LSTM_OUTPUTS = ("OutputSequenceTensor", "OutputSingleTensor", "OutputCellSingleTensor")


def data(shape, seed, dtype=np.float32, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def same_bits(got, want) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def attention_inputs(dtype=np.float32) -> list:
    """Query, key, value, then the past keys and values (positions 9 and 10): the present is past + this call."""
    q, k, v = data((2, 3, 8), 1, dtype), data((2, 4, 8), 2, dtype), data((2, 4, 8), 3, dtype)
    past_k, past_v = data((2, 2, 2, 4), 4, dtype), data((2, 2, 2, 4), 5, dtype)
    return [q, k, v, None, None, None, None, None, None, past_k, past_v]


def lstm_inputs(direction_count: int = 2, lengths: bool = True) -> list:
    """x, w, r, bias, h0, c0, lengths, peephole: 3 steps, batch 2, input 3, hidden 4."""
    d, hidden = direction_count, 4
    arrays = [data((1, 3, 2, 3), 10), data((1, d, 4 * hidden, 3), 11, scale=0.5),
              data((1, d, 4 * hidden, hidden), 12, scale=0.5), data((1, 1, d, 8 * hidden), 13, scale=0.3),
              data((1, d, 2, hidden), 14, scale=0.5), data((1, d, 2, hidden), 15, scale=0.5),
              np.array([2, 3], np.uint32).reshape(1, 1, 1, 2) if lengths else None,
              data((1, 1, d, 3 * hidden), 16, scale=0.3)]
    return arrays


LSTM_OPTIONS = {"direction": "bidirectional"}
STATE = np.array([1, 2, 3, 4, 5, 6], np.uint32).reshape(1, 1, 1, 6)
ROIS = np.array([[0.5, 0.5, 4.5, 3.5], [1.0, 0.0, 6.0, 5.0], [0.2, 1.1, 3.3, 4.4]], np.float32)
BATCHES = np.array([0, 1, 0], np.uint32)
ROI_OPTIONS = {"minimum_samples_per_output": 2, "maximum_samples_per_output": 2}


def roi_inputs() -> list:
    return [data((2, 3, 6, 7), 20), data((3, 3, 2, 3), 21), ROIS, BATCHES]


# DirectML.h at 0x6400, a second transcription: every output field marked _Maybenull_ (QUANTIZED_LINEAR_*'s
# OutputZeroPointTensor is _Maybenull_ too, but an input: the output's zero point).
MAYBENULL_OUTPUTS = {
    "RNN": ("OutputSequenceTensor", "OutputSingleTensor"),
    "LSTM": ("OutputSequenceTensor", "OutputSingleTensor", "OutputCellSingleTensor"),
    "GRU": ("OutputSequenceTensor", "OutputSingleTensor"),
    "MAX_POOLING1": ("OutputIndicesTensor",),
    "MAX_POOLING2": ("OutputIndicesTensor",),
    "RANDOM_GENERATOR": ("OutputStateTensor",),
    "ROI_ALIGN_GRAD": ("OutputGradientTensor", "OutputROIGradientTensor"),
    "MULTIHEAD_ATTENTION": ("OutputPresentKeyTensor", "OutputPresentValueTensor"),
    "MULTIHEAD_ATTENTION1": ("OutputPresentKeyTensor", "OutputPresentValueTensor"),
}


def test_the_table_has_every_maybenull_output_of_directml_h():
    from dmlcli import operators

    found = {op.name: op.optional_outputs for op in operators.OPERATORS if op.optional_outputs}
    assert found == MAYBENULL_OUTPUTS


# ---------------------------------------------------------------- the API: the outputs asked for, bit for bit


@pytest.mark.parametrize("asked", [("OutputTensor",), ("OutputTensor", "OutputPresentValueTensor"),
                                   ("OutputPresentKeyTensor", "OutputTensor")])
def test_attention_gives_the_outputs_asked_for_in_desc_order(asked):
    arrays = attention_inputs()
    full = dmlcli.run("multihead_attention", *arrays, head_count=2)
    got = dmlcli.run("multihead_attention", *arrays, head_count=2, outputs=asked)
    wanted = [name for name in ATTENTION_OUTPUTS if name in asked]  # DESC order, whatever order they were named in
    assert isinstance(got, tuple) and len(got) == len(wanted) < len(full)
    for array, name in zip(got, wanted):
        assert same_bits(array, full[ATTENTION_OUTPUTS.index(name)]), name


def test_attention_float16_without_the_presents_and_without_a_past():
    arrays = attention_inputs(np.float16)[:3]
    full = dmlcli.run("multihead_attention1", *arrays, query_head_count=2, key_value_head_count=2)
    (alone,) = dmlcli.run("multihead_attention1", *arrays, query_head_count=2, key_value_head_count=2,
                          outputs=["outputtensor"])
    assert same_bits(alone, full[0])


def test_attention_makes_no_present_it_is_not_asked_for(monkeypatch):
    made = []
    original = attention._output

    def recording(attended, keys, values, out):
        made.append(out.name)
        return original(attended, keys, values, out)

    monkeypatch.setattr(attention, "_output", recording)
    dmlcli.run("multihead_attention", *attention_inputs(), head_count=2, outputs=("OutputTensor",))
    assert made == ["OutputTensor"]
    made.clear()
    dmlcli.run("multihead_attention", *attention_inputs(), head_count=2)
    assert made == list(ATTENTION_OUTPUTS)


@pytest.mark.parametrize("asked", [("OutputSingleTensor",), ("OutputSequenceTensor", "OutputCellSingleTensor"),
                                   ("OutputCellSingleTensor",), ("OutputSingleTensor", "OutputCellSingleTensor")])
def test_lstm_gives_the_outputs_asked_for(asked):
    arrays = lstm_inputs()
    full = dmlcli.run("lstm", *arrays, **LSTM_OPTIONS)
    got = dmlcli.run("lstm", *arrays, **LSTM_OPTIONS, outputs=asked)
    wanted = [name for name in LSTM_OUTPUTS if name in asked]
    assert len(got) == len(wanted)
    for array, name in zip(got, wanted):
        assert same_bits(array, full[LSTM_OUTPUTS.index(name)]), name


@pytest.mark.parametrize("kind", ["rnn", "gru"])
def test_rnn_and_gru_give_the_last_state_alone(kind):
    gates = 1 if kind == "rnn" else 3
    arrays = [data((1, 4, 2, 3), 30), data((1, 1, gates * 5, 3), 31, scale=0.5),
              data((1, 1, gates * 5, 5), 32, scale=0.5), None, None, np.array([[[[4, 1]]]], np.uint32)]
    full = dmlcli.run(kind, *arrays)
    (single,) = dmlcli.run(kind, *arrays, outputs="OutputSingleTensor")
    assert same_bits(single, full[1])


@pytest.fixture
def recurrent_results(monkeypatch) -> list:
    """What each run of the recurrent kernel made: (whether it kept the steps' states, the outputs it was asked
    for)."""
    kept = []
    original = recurrent._asked

    def recording(xp, outputs, sequence, singles, cells, lstm):
        kept.append((sequence is not None, [out.name for out in outputs]))
        return original(xp, outputs, sequence, singles, cells, lstm)

    monkeypatch.setattr(recurrent, "_asked", recording)
    return kept


def test_lstm_does_not_keep_the_steps_without_the_sequence(recurrent_results):
    dmlcli.run("lstm", *lstm_inputs(), **LSTM_OPTIONS, outputs=("OutputSingleTensor",))
    assert recurrent_results == [(False, ["OutputSingleTensor"])]
    dmlcli.run("lstm", *lstm_inputs(), **LSTM_OPTIONS)
    assert recurrent_results[1] == (True, list(LSTM_OUTPUTS))


def test_random_generator_without_its_state():
    full = dmlcli.run("random_generator", STATE, output_shape=(1, 1, 3, 5))
    (alone,) = dmlcli.run("random_generator", STATE, output_shape=(1, 1, 3, 5), outputs=("OutputTensor",))
    assert len(full) == 2 and same_bits(alone, full[0])
    with pytest.raises(InputError, match="OutputTensor cannot be left out .*those that may be left out: "
                                         "OutputStateTensor"):
        dmlcli.run("random_generator", STATE, output_shape=(1, 1, 3, 5), outputs=("OutputStateTensor",))


@pytest.mark.parametrize("asked, position", [("OutputGradientTensor", 0), ("OutputROIGradientTensor", 1)])
def test_roi_align_grad_gives_either_gradient_alone(asked, position):
    full = dmlcli.run("roi_align_grad", *roi_inputs(), **ROI_OPTIONS)
    (alone,) = dmlcli.run("roi_align_grad", *roi_inputs(), **ROI_OPTIONS, outputs=(asked,))
    assert same_bits(alone, full[position])


def test_roi_align_grad_skips_the_input_gradient_it_is_not_asked_for(monkeypatch):
    calls = []
    original = roi_align_grad._input_gradient
    monkeypatch.setattr(roi_align_grad, "_input_gradient", lambda *args: calls.append(1) or original(*args))
    dmlcli.run("roi_align_grad", *roi_inputs(), **ROI_OPTIONS, outputs=("OutputROIGradientTensor",))
    assert calls == []
    dmlcli.run("roi_align_grad", *roi_inputs(), **ROI_OPTIONS)
    assert len(calls) == len(ROIS)


def test_roi_align_grad_refuses_the_regions_gradient_without_its_input():
    x, incoming, rois, batches = roi_inputs()
    with pytest.raises(ValidationError, match="OutputROIGradientTensor needs InputTensor"):
        dmlcli.run("roi_align_grad", None, incoming, rois, batches, output_shape=x.shape,
                   outputs=("OutputROIGradientTensor",))
    (alone,) = dmlcli.run("roi_align_grad", None, incoming, rois, batches, output_shape=x.shape,
                          outputs="OutputGradientTensor")
    assert alone.shape == x.shape


@pytest.mark.parametrize("op, options", [("max_pooling1", {}), ("max_pooling2", {"dilations": (2, 1)}),
                                         ("max_pooling2", {"output_dtype": "uint64"})])
def test_max_pooling_without_its_indices(op, options):
    x = data((2, 3, 7, 6), 50)
    x[0, 0, :2, :2] = np.nan
    common = {"window_size": (3, 2), "strides": (2, 1), **options}
    full = dmlcli.run(op, x, **common)
    (alone,) = dmlcli.run(op, x, **common, outputs=("OutputTensor",))
    assert len(full) == 2 and same_bits(alone, full[0])
    # The maxima alone are MAX_POOLING's (MAX_POOLING has no dilations).
    if "dilations" not in options:
        assert same_bits(alone, dmlcli.run("max_pooling", x, window_size=(3, 2), strides=(2, 1)))


def test_none_keeps_every_output_the_call_can_give():
    arrays = lstm_inputs()
    for a, b in zip(dmlcli.run("lstm", *arrays, **LSTM_OPTIONS),
                    dmlcli.run("lstm", *arrays, **LSTM_OPTIONS, outputs=None)):
        assert same_bits(a, b)
    verdict = dmlcli.validate("lstm", *arrays, **LSTM_OPTIONS)
    assert [t.name for t in verdict.call.outputs] == list(LSTM_OUTPUTS)
    # Every output named is the same call as none named.
    named = dmlcli.run("lstm", *arrays, **LSTM_OPTIONS, outputs=LSTM_OUTPUTS)
    assert all(same_bits(a, b) for a, b in zip(named, dmlcli.run("lstm", *arrays, **LSTM_OPTIONS)))


def test_validate_and_plan_have_only_the_outputs_asked_for():
    verdict = dmlcli.validate("lstm", *lstm_inputs(), **LSTM_OPTIONS, outputs=("outputsingletensor",))
    assert [t.name for t in verdict.call.outputs] == ["OutputSingleTensor"]
    assert verdict.call.output.name == "OutputSingleTensor"
    from dmlcli.data_types import FLOAT32

    planned = dmlcli.api.plan("multihead_attention", [(FLOAT32, (2, 3, 8)), (FLOAT32, (2, 4, 8)), (FLOAT32, (2, 4, 8))],
                              head_count=2, outputs=("OutputTensor",))
    assert [t.name for t in planned.call.outputs] == ["OutputTensor"]


def test_check_compares_the_first_output_asked_for():
    arrays = lstm_inputs()
    full = dmlcli.run("lstm", *arrays, **LSTM_OPTIONS)
    comparison = dmlcli.check("lstm", *arrays, **LSTM_OPTIONS, expected=full[1], outputs=("OutputSingleTensor",))
    assert comparison.passed, comparison.text()
    wrong = dmlcli.check("lstm", *arrays, **LSTM_OPTIONS, expected=full[2], outputs=("OutputSingleTensor",))
    assert not wrong.passed
    # The attention's sum bound covers OutputTensor, which a call without the presents still has.
    arrays = attention_inputs()
    expected = dmlcli.run("multihead_attention", *arrays, head_count=2)[0]
    assert dmlcli.check("multihead_attention", *arrays, head_count=2, expected=expected,
                        outputs=("OutputTensor",)).passed


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("op, arrays, options, asked, words", [
    ("multihead_attention", attention_inputs(), {"head_count": 2}, ("OutputTensor", "PresentKey"),
     "MULTIHEAD_ATTENTION has no output 'PresentKey': its outputs are OutputTensor, OutputPresentKeyTensor, "
     "OutputPresentValueTensor; those that may be left out: OutputPresentKeyTensor, OutputPresentValueTensor"),
    ("multihead_attention", attention_inputs(), {"head_count": 2}, ("OutputPresentKeyTensor",),
     "MULTIHEAD_ATTENTION: OutputTensor cannot be left out (DirectML.h does not mark it _Maybenull_); those that "
     "may be left out: OutputPresentKeyTensor, OutputPresentValueTensor"),
    ("lstm", lstm_inputs(), LSTM_OPTIONS, (), "LSTM: no output named; a call gives at least one of "
     "OutputSequenceTensor, OutputSingleTensor, OutputCellSingleTensor"),
    ("lstm", lstm_inputs(), LSTM_OPTIONS, " , ", "LSTM: no output named"),
    ("lstm", lstm_inputs(), LSTM_OPTIONS, [1], "LSTM: outputs must be output names such as OutputSequenceTensor"),
    ("add", [np.ones(2, np.float32)] * 2, {}, ("OutputTensor", "Extra"),
     "ADD has no output 'Extra': its outputs are OutputTensor; ADD has no optional outputs, so a call gives every one"),
    ("top_k", [np.ones((1, 1, 1, 4), np.float32)], {"k": 1, "axis": 3}, ("OutputValueTensor",),
     "TOP_K: OutputIndexTensor cannot be left out (DirectML.h does not mark it _Maybenull_); TOP_K has no optional "
     "outputs, so a call gives every one"),
])
def test_refusals_name_what_was_found_and_what_may_be_left_out(op, arrays, options, asked, words):
    for entry in (dmlcli.run, dmlcli.validate):
        with pytest.raises(InputError) as raised:
            entry(op, *arrays, **options, outputs=asked)
        assert str(raised.value) == words or str(raised.value).startswith(words), str(raised.value)
    with pytest.raises(InputError, match=words.split(":")[0]):
        dmlcli.check(op, *arrays, **options, expected=np.zeros(1, np.float32), outputs=asked)


def test_a_single_output_operator_takes_its_one_output_by_name():
    a = np.arange(4, dtype=np.float32)
    assert same_bits(dmlcli.run("add", a, a, outputs="outputtensor"), dmlcli.run("add", a, a))


# ---------------------------------------------------------------- the command line


def _json(array) -> str:
    return json.dumps({"dtype": str(array.dtype), "data": array.tolist()})


def _lstm_arguments() -> list[str]:
    return ["run", "lstm", *["none" if a is None else _json(a) for a in lstm_inputs()], "--direction",
            "bidirectional"]


def test_cli_writes_only_the_outputs_named(tmp_path):
    full = dmlcli.run("lstm", *lstm_inputs(), **LSTM_OPTIONS)
    result = CliRunner().invoke(cli, [*_lstm_arguments(), "--outputs", "outputsingletensor,OutputCellSingleTensor",
                                      "-o", "-"])
    assert result.exit_code == 0, result.output
    written = json.loads(result.output)
    assert list(written) == ["OutputSingleTensor", "OutputCellSingleTensor"]
    for name, want in zip(written, full[1:]):
        assert np.array_equal(np.array(written[name]["data"], np.float32), want)
    # One output named: one -o, one .npy.
    target = tmp_path / "single.npy"
    result = CliRunner().invoke(cli, [*_lstm_arguments(), "--outputs", "OutputSingleTensor", "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert same_bits(np.load(target), full[1])
    # Two named: two -o, or one .npz with those members alone.
    archive = tmp_path / "two.npz"
    result = CliRunner().invoke(cli, [*_lstm_arguments(), "--outputs", "OutputSequenceTensor,OutputSingleTensor",
                                      "-o", str(archive)])
    assert result.exit_code == 0, result.output
    with np.load(archive) as members:
        assert sorted(members.files) == ["OutputSequenceTensor", "OutputSingleTensor"]
        assert same_bits(members["OutputSequenceTensor"], full[0])


def test_cli_counts_the_targets_against_the_outputs_named(tmp_path):
    result = CliRunner().invoke(cli, [*_lstm_arguments(), "--outputs", "OutputSingleTensor", "-o",
                                      str(tmp_path / "a.npy"), "-o", str(tmp_path / "b.npy")])
    assert result.exit_code == 2, result.output
    assert "2 outputs given (-o) but the call writes 1 (OutputSingleTensor)" in result.output


@pytest.mark.parametrize("command, shown", [("run", "shape [1, 1, 1, 4]"),  # the table's caption
                                            ("validate", "OutputTensor UINT32 [1, 1, 1, 4]")])
def test_cli_shows_only_the_outputs_named(command, shown):
    result = CliRunner().invoke(cli, [command, "random_generator", _json(STATE), "--output-shape", "1,1,1,4",
                                      "--outputs", "OutputTensor"])
    assert result.exit_code == 0, result.output
    assert shown in result.output and "OutputStateTensor" not in result.output


@pytest.mark.parametrize("command", ["run", "validate"])
def test_cli_refusals_exit_2_and_3(command):
    usage = CliRunner().invoke(cli, [command, "random_generator", _json(STATE), "--output-shape", "1,1,1,4",
                                     "--outputs", "OutputState"])
    assert usage.exit_code == 2, usage.output
    assert "RANDOM_GENERATOR has no output 'OutputState'" in usage.output and "Traceback" not in usage.output
    x, incoming, rois, batches = roi_inputs()
    rule = CliRunner().invoke(cli, [command, "roi_align_grad", "none", _json(incoming), _json(rois), _json(batches),
                                    "--output-shape", "2,3,6,7", "--outputs", "OutputROIGradientTensor"])
    assert rule.exit_code == 3, rule.output
    assert "OutputROIGradientTensor needs InputTensor" in rule.output


def test_cli_check_and_save_case_keep_the_outputs_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    full = dmlcli.run("lstm", *lstm_inputs(), **LSTM_OPTIONS)
    np.save("expected.npy", full[1])
    checked = CliRunner().invoke(cli, [*_lstm_arguments(), "--outputs", "OutputSingleTensor", "--check",
                                       "expected.npy", "--save-case", "case.json"])
    assert checked.exit_code == 0, checked.output
    case = json.loads((tmp_path / "case.json").read_text())
    assert case["params"]["outputs"] == ["OutputSingleTensor"]
    result = dmlcli.run_case(str(tmp_path / "case.json"))
    assert result.passed, result.message


def test_run_help_and_describe_name_the_optional_outputs():
    help_text = CliRunner().invoke(cli, ["run", "multihead_attention", "--help"]).output
    assert "--outputs NAME[,NAME...]" in help_text
    assert "OutputPresentKeyTensor, OutputPresentValueTensor may be left out" in " ".join(help_text.split())
    described = " ".join(CliRunner().invoke(cli, ["describe", "lstm"]).output.split())
    assert "computed and returned unless the call leaves them out (--outputs NAME[,NAME...]" in described
    assert "always computed" not in described
    plain = CliRunner().invoke(cli, ["run", "add", "--help"]).output
    assert "--outputs" not in plain  # no optional outputs: not this operator's option


# ---------------------------------------------------------------- DxDispatch


def _write_model(tmp_path, name: str, dispatchable: dict, resources: dict, bindings: dict, printed: list) -> str:
    model = {"resources": {key: {"initialValuesDataType": kind, "initialValues": values}
                           for key, (kind, values) in resources.items()},
             "dispatchables": {name: dispatchable},
             "commands": [{"type": "dispatch", "dispatchable": name, "bindings": bindings}]
             + [{"type": "print", "resource": key} for key in printed]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(model))
    return str(path)


def _printed(output: str, resource: str) -> np.ndarray:
    line = next(line for line in output.splitlines() if line.startswith(f"Resource '{resource}'"))
    return np.array([float(x) for x in line.split(": ", 1)[1].split(",")])


def test_dispatch_of_an_attention_desc_without_presents_asks_for_the_output_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    q, k, v = data((1, 2, 4), 40), data((1, 3, 4), 41), data((1, 3, 4), 42)
    desc = {"QueryTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 4]},
            "KeyTensor": {"DataType": "FLOAT32", "Sizes": [1, 3, 4]},
            "ValueTensor": {"DataType": "FLOAT32", "Sizes": [1, 3, 4]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 4]},
            "Scale": 0.5, "MaskFilterValue": -10000, "HeadCount": 2,
            "MaskType": "DML_MULTIHEAD_ATTENTION_MASK_TYPE_NONE"}
    resources = {"q": ("FLOAT32", q.reshape(-1).tolist()), "k": ("FLOAT32", k.reshape(-1).tolist()),
                 "v": ("FLOAT32", v.reshape(-1).tolist()), "out": ("FLOAT32", {"valueCount": 8, "value": 0})}
    bindings = {"QueryTensor": "q", "KeyTensor": "k", "ValueTensor": "v", "OutputTensor": "out"}
    asked = []
    original = attention.attend

    def recording(xp, given, outputs, params):
        asked.append([out.name for out in outputs])
        return original(xp, given, outputs, params)

    monkeypatch.setattr(attention, "attend", recording)
    model = _write_model(tmp_path, "mha", {"type": "DML_OPERATOR_MULTIHEAD_ATTENTION", "desc": desc}, resources,
                         bindings, ["out"])
    result = CliRunner().invoke(cli, ["dispatch", model, "--no-timing"])
    assert result.exit_code == 0, result.output
    assert asked == [["OutputTensor"]]
    expected = dmlcli.run("multihead_attention", q, k, v, head_count=2, scale=0.5, outputs=("OutputTensor",))[0]
    assert np.allclose(_printed(result.output, "out"), expected.reshape(-1), rtol=1e-5, atol=1e-7)  # 6 digits


def test_dispatch_of_directmls_rnn_model_asks_for_the_last_state_alone(tmp_path, monkeypatch, recurrent_results):
    """DirectML's own dml_rnn.json leaves OutputSequenceTensor out: the kernel keeps no step's state."""
    source = SHARED / "dxdispatch_models" / "dml_rnn.json"
    if not source.is_file():
        pytest.skip(SHARED_MISSING)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "rnn.json"
    path.write_text(source.read_text())
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
    assert result.exit_code == 0, result.output
    assert recurrent_results == [(False, ["OutputSingleTensor"])]


def test_dispatch_of_a_random_generator_without_its_state_writes_the_bits_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    asked = []
    backend = type(cpu.create())
    original = backend.execute_shaped

    def recording(self, operator, inputs, outputs, parameters):
        asked.append([out.name for out in outputs])
        return original(self, operator, inputs, outputs, parameters)

    monkeypatch.setattr(backend, "execute_shaped", recording)
    desc = {"InputStateTensor": {"DataType": "UINT32", "Sizes": [1, 1, 1, 6]},
            "OutputTensor": {"DataType": "UINT32", "Sizes": [1, 1, 2, 4]},
            "Type": "DML_RANDOM_GENERATOR_TYPE_PHILOX_4X32_10"}
    resources = {"state": ("UINT32", STATE.reshape(-1).tolist()), "bits": ("UINT32", {"valueCount": 8, "value": 0})}
    model = _write_model(tmp_path, "random", {"type": "DML_OPERATOR_RANDOM_GENERATOR", "desc": desc}, resources,
                         {"InputStateTensor": "state", "OutputTensor": "bits"}, ["bits", "state"])
    result = CliRunner().invoke(cli, ["dispatch", model, "--no-timing"])
    assert result.exit_code == 0, result.output
    assert asked == [["OutputTensor"]]
    bits = dmlcli.run("random_generator", STATE, output_shape=(1, 1, 2, 4))[0]
    assert _printed(result.output, "bits").tolist() == bits.reshape(-1).astype(float).tolist()
    assert _printed(result.output, "state").tolist() == STATE.reshape(-1).astype(float).tolist()  # not advanced


# ---------------------------------------------------------------- the backends' check of a kernel's results


def test_a_kernel_that_gives_an_array_per_output_of_the_operator_is_caught():
    """A kernel must give one array per output it is asked for: one that ignores `outputs` is a bug, caught."""
    entry = find_operator("random_generator")

    def every_output(xp, inputs, outputs, params):  # as the kernel was before: both outputs, whatever is asked
        full = outputs + (records.replace(outputs[0], name="OutputStateTensor", shape=(1, 1, 1, 6)),)
        return entry.array_kernel(xp, inputs, full, params)

    broken = records.replace(entry, array_kernel=every_output)
    verdict = dmlcli.validate("random_generator", STATE, output_shape=(1, 1, 1, 4), outputs=("OutputTensor",))
    with pytest.raises(AssertionError, match="RANDOM_GENERATOR's kernel gave 2 results for 1 outputs"):
        cpu.create().execute_shaped(broken, [STATE], verdict.call.outputs, verdict.call.parameters)
