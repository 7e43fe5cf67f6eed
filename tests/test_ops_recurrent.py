"""The recurrent family (RNN, GRU, LSTM): support tables, rules, kernels against plain-loop references, ONNX vectors.

The references below are written from DirectML's pages' formulas (the older pages print them as text) with plain
Python loops over every index, in float64: H_t = f(X_t W^T + H_(t-1) R^T + W_b + R_b) for RNN; z, r, h for GRU
(both LinearBeforeReset forms); i, f, c, o with peepholes, clip and coupled gates for LSTM.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.errors import InputError, ValidationError
from dmlcli.feature_levels import level
from dmlcli.operators import find_operator

from conftest import SHARED, SHARED_MISSING  # noqa: E402  (../shared, or DMLCLI_SHARED)

ONNX = SHARED / "onnx_operators"
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
PER_DIRECTION = {"rnn": 1, "gru": 2, "lstm": 3}

# ---------------------------------------------------------------- independent references (float64, plain loops)


def _act(spec, v: float) -> float:
    """One activation: a name, or (name, alpha, beta) for one with fields."""
    name, alpha, beta = (spec, 1.0, 0.0) if isinstance(spec, str) else spec
    if name == "tanh":
        return math.tanh(v)
    if name == "sigmoid":
        return 1.0 / (1.0 + math.exp(-v))
    if name == "relu":
        return max(v, 0.0)
    if name == "elu":
        return v if v >= 0 else alpha * (math.exp(v) - 1.0)
    if name == "linear":
        return alpha * v + beta
    raise AssertionError(name)


def _matvec(matrix, row: int, vector, width: int) -> float:
    """sum_k matrix[row][k] * vector[k]: one element of vector * matrix^T."""
    return sum(float(matrix[row][k]) * float(vector[k]) for k in range(width))


def _order(direction: str, d: int, steps: int):
    backward = direction == "backward" or (direction == "bidirectional" and d == 1)
    return range(steps - 1, -1, -1) if backward else range(steps)


def reference(kind: str, x, w, r, b=None, h0=None, lengths=None, *, direction="forward", activations=None,
              linear_before_reset=False, c0=None, p=None, clip=None, couple=False):
    """(OutputSequenceTensor, OutputSingleTensor[, OutputCellSingleTensor]) as float64 arrays."""
    _, steps, batch, width = x.shape
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[kind]
    hidden = w.shape[2] // gates
    default = {"rnn": ["tanh"], "gru": ["sigmoid", "tanh"], "lstm": ["sigmoid", "tanh", "tanh"]}[kind]
    acts = activations or default * dirs
    seq = np.zeros((steps, dirs, batch, hidden))
    single = np.zeros((1, dirs, batch, hidden))
    cell_single = np.zeros((1, dirs, batch, hidden))
    for d in range(dirs):
        own = acts[d * PER_DIRECTION[kind]:(d + 1) * PER_DIRECTION[kind]]
        wb = [0.0] * (gates * hidden) if b is None else [float(v) for v in b[0, 0, d, :gates * hidden]]
        rb = [0.0] * (gates * hidden) if b is None else [float(v) for v in b[0, 0, d, gates * hidden:]]
        for n in range(batch):
            length = steps if lengths is None else min(int(lengths[0, 0, 0, n]), steps)
            h = [0.0] * hidden if h0 is None else [float(v) for v in h0[0, d, n]]
            c = [0.0] * hidden if c0 is None else [float(v) for v in c0[0, d, n]]
            for t in _order(direction, d, steps):
                if t >= length:
                    continue
                xt = x[0, t, n]

                def gate(g: int, j: int, state=None) -> float:
                    row = g * hidden + j
                    return (_matvec(w[0, d], row, xt, width) + wb[row] + _matvec(r[0, d], row, state or h, hidden)
                            + rb[row])

                if kind == "rnn":
                    h = [_act(own[0], gate(0, j)) for j in range(hidden)]
                elif kind == "gru":
                    z = [_act(own[0], gate(0, j)) for j in range(hidden)]
                    reset = [_act(own[0], gate(1, j)) for j in range(hidden)]
                    new = []
                    for j in range(hidden):
                        row = 2 * hidden + j
                        x_part = _matvec(w[0, d], row, xt, width) + wb[row]
                        if linear_before_reset:
                            value = x_part + reset[j] * (_matvec(r[0, d], row, h, hidden) + rb[row])
                        else:
                            rh = [reset[k] * h[k] for k in range(hidden)]
                            value = x_part + _matvec(r[0, d], row, rh, hidden) + rb[row]
                        new.append(_act(own[1], value))
                    h = [(1 - z[j]) * new[j] + z[j] * h[j] for j in range(hidden)]
                else:
                    pi = [0.0] * hidden if p is None else [float(v) for v in p[0, 0, d, :hidden]]
                    po = [0.0] * hidden if p is None else [float(v) for v in p[0, 0, d, hidden:2 * hidden]]
                    pf = [0.0] * hidden if p is None else [float(v) for v in p[0, 0, d, 2 * hidden:]]

                    def clipped(v: float) -> float:
                        return v if clip is None else min(max(v, -clip), clip)

                    i = [_act(own[0], clipped(gate(0, j) + pi[j] * c[j])) for j in range(hidden)]
                    f = [1 - i[j] if couple else _act(own[0], clipped(gate(2, j) + pf[j] * c[j]))
                         for j in range(hidden)]
                    cand = [_act(own[1], clipped(gate(3, j))) for j in range(hidden)]
                    new_c = [f[j] * c[j] + i[j] * cand[j] for j in range(hidden)]
                    o = [_act(own[0], clipped(gate(1, j) + po[j] * new_c[j])) for j in range(hidden)]
                    h = [o[j] * _act(own[2], new_c[j]) for j in range(hidden)]
                    c = new_c
                seq[t, d, n] = h
            single[0, d, n] = h
            cell_single[0, d, n] = c
    return (seq, single, cell_single) if kind == "lstm" else (seq, single)


def _random(rng, *shape, scale=1.0, dtype=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _case(kind: str, rng, *, steps=3, batch=2, width=3, hidden=4, direction="forward", dtype=np.float32,
          bias=True, h0=True, lengths=None, lstm_extra=True):
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[kind]
    inputs = {"x": _random(rng, 1, steps, batch, width, dtype=dtype),
              "w": _random(rng, 1, dirs, gates * hidden, width, scale=0.5, dtype=dtype),
              "r": _random(rng, 1, dirs, gates * hidden, hidden, scale=0.5, dtype=dtype)}
    inputs["b"] = _random(rng, 1, 1, dirs, 2 * gates * hidden, scale=0.3, dtype=dtype) if bias else None
    inputs["h0"] = _random(rng, 1, dirs, batch, hidden, scale=0.5, dtype=dtype) if h0 else None
    inputs["lengths"] = None if lengths is None else np.array(lengths, np.uint32).reshape(1, 1, 1, batch)
    if kind == "lstm":
        inputs["c0"] = _random(rng, 1, dirs, batch, hidden, scale=0.5, dtype=dtype) if lstm_extra else None
        inputs["p"] = _random(rng, 1, 1, dirs, 3 * hidden, scale=0.3, dtype=dtype) if lstm_extra else None
    return inputs


def _run(kind: str, inputs: dict, **params):
    order = ["x", "w", "r", "b", "h0", "c0", "lengths", "p"] if kind == "lstm" else ["x", "w", "r", "b", "h0",
                                                                                       "lengths"]
    arrays = [inputs.get(name) for name in order]
    while arrays[-1] is None:
        arrays.pop()
    return dmlcli.run(kind, *arrays, **params)


def _reference_for(kind: str, inputs: dict, **params):
    as64 = {k: None if v is None else v.astype(np.float64) for k, v in inputs.items()}
    names = {"direction": "direction", "activations": "activations", "linear_before_reset": "linear_before_reset"}
    extra = {names[k]: v for k, v in params.items() if k in names}
    if kind == "lstm":
        extra.update(c0=as64.get("c0"), p=as64.get("p"))
        if params.get("use_clip_threshold"):
            extra["clip"] = params["clip_threshold"]
        extra["couple"] = params.get("couple_input_forget", False)
    return reference(kind, as64["x"], as64["w"], as64["r"], as64["b"], as64["h0"], inputs["lengths"], **extra)


def _close(got, expected, dtype=np.float32):
    # float32 steps: a few ULP of values about 1 per step; float16: the single rounding of the output.
    atol = 2e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(np.asarray(got, np.float64), expected, rtol=atol, atol=atol)


# ---------------------------------------------------------------- support tables (a second transcription)

PAGE_TENSORS = {
    "RNN": ["InputTensor", "WeightTensor", "RecurrenceTensor", "BiasTensor", "HiddenInitTensor",
            "SequenceLengthsTensor", "OutputSequenceTensor", "OutputSingleTensor"],
    "GRU": ["InputTensor", "WeightTensor", "RecurrenceTensor", "BiasTensor", "HiddenInitTensor",
            "SequenceLengthsTensor", "OutputSequenceTensor", "OutputSingleTensor"],
    "LSTM": ["InputTensor", "WeightTensor", "RecurrenceTensor", "BiasTensor", "HiddenInitTensor",
             "CellMemInitTensor", "SequenceLengthsTensor", "PeepholeTensor", "OutputSequenceTensor",
             "OutputSingleTensor", "OutputCellSingleTensor"],
}


@pytest.mark.parametrize("name, value", [("RNN", 76), ("LSTM", 77), ("GRU", 78)])
def test_the_pages_one_support_row_and_enum_values(name, value):
    op = find_operator(name)
    assert op.enum_value == value and op.family == "recurrent"
    assert list(op.tensors) == PAGE_TENSORS[name]
    assert [row.level.short for row in op.support] == ["1_0"]
    for tensor, support in op.support[0].tensors.items():
        assert support.dims == (4,)
        expected = ["UINT32"] if tensor == "SequenceLengthsTensor" else ["FLOAT32", "FLOAT16"]
        assert [t.name for t in support.data_types] == expected
    # 'Tensor constraints': every tensor but the lengths shares one DataType.
    assert set(op.same_data_type) == set(PAGE_TENSORS[name]) - {"SequenceLengthsTensor"}
    params = {p.field: p for p in op.parameters}
    assert params["Direction"].values == (("FORWARD", 0), ("BACKWARD", 1), ("BIDIRECTIONAL", 2))


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
def test_lowest_level_is_1_0_and_types_outside_the_row_are_refused(kind):
    inputs = _case(kind, np.random.default_rng(1))
    verdict = dmlcli.validate(kind, inputs["x"], inputs["w"], inputs["r"], feature_level="1_0")
    assert verdict.lowest_feature_level == level("1_0")
    half = {k: None if v is None else v.astype(np.float16) for k, v in inputs.items()}
    assert dmlcli.validate(kind, half["x"], half["w"], half["r"]).lowest_feature_level == level("1_0")
    with pytest.raises(ValidationError, match="InputTensor data type FLOAT64 is not supported at"):
        dmlcli.validate(kind, inputs["x"].astype(np.float64), inputs["w"].astype(np.float64),
                        inputs["r"].astype(np.float64))
    with pytest.raises(ValidationError, match="must have the same DataType"):
        dmlcli.validate(kind, inputs["x"], half["w"], inputs["r"])
    lengths = np.ones((1, 1, 1, 2), np.int32)
    with pytest.raises(ValidationError, match=r"SequenceLengthsTensor data type INT32 .*allowed: UINT32"):
        dmlcli.validate(kind, inputs["x"], inputs["w"], inputs["r"], None, None, *([None] if kind == "lstm" else []),
                        lengths)


# ---------------------------------------------------------------- rule violations (exit 3)

def _json(array) -> str:
    return json.dumps({"dtype": str(array.dtype), "data": array.tolist()})


def _cli(kind: str, arrays, *options):
    return CliRunner().invoke(cli, ["run", kind, *[("none" if a is None else _json(a)) for a in arrays], *options,
                                    "-o", "-"])


VIOLATIONS = [
    ("rnn", lambda c: [np.concatenate([c["x"], c["x"]]), c["w"], c["r"]], "InputTensor Sizes [2, 3, 2, 3] must be"),
    ("rnn", lambda c: [c["x"], c["w"][:, :, :, :2], c["r"]], "WeightTensor Sizes [1, 1, 4, 2] must be"),
    ("gru", lambda c: [c["x"], c["w"][:, :, :10], c["r"]], "WeightTensor Sizes [1, 1, 10, 3] must be {1, num_directions, 3 * hidden_size"),
    ("rnn", lambda c: [c["x"], c["w"], c["r"][:, :, :, :3]], "RecurrenceTensor Sizes [1, 1, 4, 3] must be [1, 1, 4, 4]"),
    ("lstm", lambda c: [c["x"], c["w"], c["r"], c["b"][..., :8]], "BiasTensor Sizes [1, 1, 1, 8] must be [1, 1, 1, 32]"),
    ("gru", lambda c: [c["x"], c["w"], c["r"], None, c["h0"][:, :, :1]],
     "HiddenInitTensor Sizes [1, 1, 1, 4] must be [1, 1, 2, 4]"),
    ("rnn", lambda c: [c["x"], c["w"], c["r"], None, None, np.ones((1, 1, 1, 3), np.uint32)],
     "SequenceLengthsTensor Sizes [1, 1, 1, 3] must be [1, 1, 1, 2]"),
    ("lstm", lambda c: [c["x"], c["w"], c["r"], None, None, c["c0"][:, :, :, :2]],
     "CellMemInitTensor Sizes [1, 1, 2, 2] must be [1, 1, 2, 4]"),
    ("lstm", lambda c: [c["x"], c["w"], c["r"], None, None, None, None, c["p"][..., :4]],
     "PeepholeTensor Sizes [1, 1, 1, 4] must be [1, 1, 1, 12]"),
]


@pytest.mark.parametrize("kind, arrays, message", VIOLATIONS)
def test_rule_violations_exit_3_with_the_rule(kind, arrays, message):
    case = _case(kind, np.random.default_rng(2))
    result = _cli(kind, arrays(case))
    assert result.exit_code == 3, result.output
    assert f"dmlcli: error: {kind.upper()}: {message}" in result.output


def test_direction_sets_num_directions_and_the_activation_count():
    case = _case("gru", np.random.default_rng(3))
    result = _cli("gru", [case["x"], case["w"], case["r"]], "--direction", "bidirectional")
    assert result.exit_code == 3
    assert "with num_directions 2 (Direction BIDIRECTIONAL)" in result.output
    result = _cli("gru", [case["x"], case["w"], case["r"]], "--activations", "sigmoid")
    assert result.exit_code == 3
    assert ("GRU: ActivationDescs has 1 activations; Direction FORWARD needs 2 (f() and g() for each of 1 "
            "direction)") in result.output


@pytest.mark.parametrize("options, message", [
    (["--activations", "gelu"], "ActivationDescs: 'gelu' is not an activation this operator takes"),
    (["--activations", "elu(beta=1)"], "elu has no field 'beta' (write name=value; it takes alpha)"),
    (["--activations", "tanh(alpha)"], "tanh has no field 'alpha'"),
    (["--activations", ""], "ActivationDescs (--activations) is empty"),
])
def test_activation_spellings_that_are_refused_exit_2(options, message):
    case = _case("rnn", np.random.default_rng(4))
    result = _cli("rnn", [case["x"], case["w"], case["r"]], *options)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_required_input_cannot_be_left_out():
    case = _case("rnn", np.random.default_rng(5))
    result = _cli("rnn", [case["x"], None, case["r"]])
    assert result.exit_code == 2
    assert "RNN: WeightTensor is required and cannot be left out (none)" in result.output
    result = _cli("rnn", [case["x"], case["w"]])
    assert result.exit_code == 2 and "RNN takes 3 to 6 input tensors" in result.output


# ---------------------------------------------------------------- kernels against the references

@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("direction", ["forward", "backward", "bidirectional"])
def test_kernel_matches_the_pages_formulas(kind, direction):
    case = _case(kind, np.random.default_rng(10), direction=direction)
    got = _run(kind, case, direction=direction)
    for out, expected in zip(got, _reference_for(kind, case, direction=direction)):
        _close(out, expected)


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("direction", ["forward", "backward", "bidirectional"])
def test_sequence_lengths(kind, direction):
    case = _case(kind, np.random.default_rng(11), steps=4, batch=3, direction=direction, lengths=[2, 0, 7])
    got = _run(kind, case, direction=direction)
    expected = _reference_for(kind, case, direction=direction)
    for out, ref in zip(got, expected):
        _close(out, ref)
    sequence = got[0]
    assert not sequence[2:, :, 0].any() and not sequence[:, :, 1].any()  # zeros past each length
    np.testing.assert_array_equal(got[1][0, :, 1], case["h0"][0, :, 1])  # length 0: the initial state


def test_optional_inputs_left_out_in_the_middle_are_zeros():
    rng = np.random.default_rng(12)
    case = _case("lstm", rng, bias=False, h0=False, lstm_extra=False)
    case["p"] = _random(rng, 1, 1, 1, 12, scale=0.3)
    got = dmlcli.run("lstm", case["x"], case["w"], case["r"], None, None, None, None, case["p"])
    for out, ref in zip(got, _reference_for("lstm", case)):
        _close(out, ref)
    zeros = dmlcli.run("lstm", case["x"], case["w"], case["r"], np.zeros((1, 1, 1, 32), np.float32))
    trimmed = dmlcli.run("lstm", case["x"], case["w"], case["r"])
    for a, b in zip(zeros, trimmed):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_gru_linear_before_reset(linear_before_reset):
    case = _case("gru", np.random.default_rng(13), direction="bidirectional")
    got = _run("gru", case, direction="bidirectional", linear_before_reset=linear_before_reset,
               activations="sigmoid,tanh,relu,elu(alpha=0.5)")
    ref = reference("gru", *[case[k].astype(np.float64) for k in ("x", "w", "r", "b", "h0")],
                    direction="bidirectional", linear_before_reset=linear_before_reset,
                    activations=["sigmoid", "tanh", "relu", ("elu", 0.5, 0.0)])
    for out, expected in zip(got, ref):
        _close(out, expected)
    other = _run("gru", case, direction="bidirectional", linear_before_reset=not linear_before_reset,
                 activations="sigmoid,tanh,relu,elu(alpha=0.5)")
    assert not np.allclose(other[0], got[0])  # the two forms differ on these inputs


@pytest.mark.parametrize("couple", [False, True])
def test_lstm_clip_and_coupled_gates(couple):
    case = _case("lstm", np.random.default_rng(14), direction="backward")
    case["x"] *= 4
    params = dict(direction="backward", use_clip_threshold=True, clip_threshold=0.5, couple_input_forget=couple)
    got = _run("lstm", case, **params)
    for out, expected in zip(got, _reference_for("lstm", case, **params)):
        _close(out, expected)
    unclipped = _run("lstm", case, direction="backward", couple_input_forget=couple)
    assert not np.allclose(unclipped[0], got[0])  # the clip takes part


def test_float16_is_the_float32_computation_rounded_once():
    case = _case("gru", np.random.default_rng(15), direction="bidirectional", dtype=np.float16)
    half = _run("gru", case, direction="bidirectional")
    widened = {k: None if v is None or k == "lengths" else v.astype(np.float32) for k, v in case.items()}
    single = _run("gru", widened, direction="bidirectional")
    for h, s in zip(half, single):
        assert h.dtype == np.float16
        np.testing.assert_array_equal(h, s.astype(np.float16))


def test_activation_fields_reach_the_kernel():
    case = _case("rnn", np.random.default_rng(16))
    linear = dmlcli.run("rnn", case["x"], case["w"], case["r"], activations="linear(alpha=2, beta=0.5)")
    identity = dmlcli.run("rnn", case["x"], case["w"], case["r"], activations=["identity"])
    # With no bias and a zero initial state, step 0 is X W^T exactly, before the activation.
    np.testing.assert_allclose(linear[0][0], 2 * identity[0][0] + 0.5, rtol=1e-6, atol=1e-6)


def test_tolerance_grows_with_steps_and_the_dot_products():
    from dmlcli.checking.comparison import rule_for

    case = _case("lstm", np.random.default_rng(17), steps=5, width=3, hidden=4)
    verdict = dmlcli.validate("lstm", case["x"], case["w"], case["r"])
    rule = rule_for(verdict.call.operator, np.float32, call=verdict.call)
    assert rule.limit == 3 * 5 * (3 + 4 + 2)


# ---------------------------------------------------------------- ONNX's node tests as extra vectors


ONNX_CASES = sorted(ONNX.glob("onnx__test_*rnn*.json")) + sorted(ONNX.glob("onnx__test_gru*.json")) + sorted(
    ONNX.glob("onnx__test_lstm*.json"))


def _onnx_arrays(case):
    given = iter(case["inputs"])
    return {name: np.array(next(given)["data"], dtype=np.float32 if name != "sequence_lens" else np.int32)
            for name in case["input_names"] if name}


@pytest.mark.skipif(not ONNX_CASES, reason=SHARED_MISSING)
@pytest.mark.parametrize("path", ONNX_CASES, ids=lambda p: p.stem)
def test_onnx_node_tests(path):
    case = json.loads(path.read_text())
    kind = case["onnx_op"].lower()
    onnx = _onnx_arrays(case)
    attributes = case["attributes"]
    batch_major = attributes.get("layout", 0) == 1
    x = onnx["X"].swapaxes(0, 1) if batch_major else onnx["X"]  # ONNX layout=1: [batch, seq, input]
    by_name = {"b": onnx.get("B"), "h0": onnx.get("initial_h"), "c0": onnx.get("initial_c"), "p": onnx.get("P")}
    inputs = {"x": x[None], "w": onnx["W"][None], "r": onnx["R"][None],
              "b": None if by_name["b"] is None else by_name["b"][None, None],
              "h0": None if by_name["h0"] is None else by_name["h0"][None],
              "lengths": None if "sequence_lens" not in onnx else onnx["sequence_lens"].astype(np.uint32)[None, None, None]}
    if kind == "lstm":
        inputs["c0"] = None if by_name["c0"] is None else by_name["c0"][None]
        inputs["p"] = None if by_name["p"] is None else by_name["p"][None, None]
    direction = {"forward": "forward", "reverse": "backward", "bidirectional": "bidirectional"}[
        attributes.get("direction", "forward")]
    got = _run(kind, inputs, direction=direction, **(
        {"linear_before_reset": bool(attributes.get("linear_before_reset", 0))} if kind == "gru" else {}))
    outputs = [got[0], got[1][0]] + ([got[2][0]] if kind == "lstm" else [])
    if batch_major:
        outputs = [np.transpose(outputs[0], (2, 0, 1, 3)), outputs[1].swapaxes(0, 1)]
    named = [out for out, name in zip(outputs, case["output_names"]) if name]
    assert len(named) == len(case["expected"])
    for out, expected in zip(named, case["expected"]):
        np.testing.assert_allclose(out, np.array(expected["data"], np.float32), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- command line and DxDispatch


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
def test_cli_run_writes_every_output(kind):
    case = _case(kind, np.random.default_rng(20), steps=2, batch=1, width=2, hidden=2)
    result = _cli(kind, [case["x"], case["w"], case["r"], case["b"]], "--direction", "backward")
    assert result.exit_code == 0, result.output
    written = json.loads(result.output)
    names = list(written)
    expected = ["OutputSequenceTensor", "OutputSingleTensor"] + (["OutputCellSingleTensor"] if kind == "lstm" else [])
    assert names == expected
    for name, out in zip(expected, _run(kind, {**case, "h0": None, "c0": None, "p": None}, direction="backward")):
        np.testing.assert_array_equal(np.array(written[name]["data"], np.float32), out)


def _rnn_model(tmp_path, change) -> Path:
    if not (SHARED / "dxdispatch_models" / "dml_rnn.json").is_file():
        pytest.skip(SHARED_MISSING)
    model = json.loads((SHARED / "dxdispatch_models" / "dml_rnn.json").read_text())
    change(model["dispatchables"]["rnn"]["desc"], model)
    path = tmp_path / "rnn.json"
    path.write_text(json.dumps(model))
    return path


@pytest.mark.parametrize("change, message", [
    (lambda d, m: d.update(ActivationDescCount=3), "ActivationDescCount 3 does not match the 2 descs of ActivationDescs"),
    (lambda d, m: d.update(ActivationDescs=[{"Type": "ACTIVATION_ELU"}, {"Type": "ACTIVATION_TANH"}]),
     "ActivationDescs[0] DML_OPERATOR_ACTIVATION_ELU desc has no Alpha"),
    (lambda d, m: d.pop("OutputSingleTensor"), "desc has none of OutputSequenceTensor, OutputSingleTensor"),
    (lambda d, m: d.pop("ActivationDescs"), "desc has no ActivationDescs"),
])
def test_dispatch_desc_refusals_exit_2(tmp_path, monkeypatch, change, message):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", str(_rnn_model(tmp_path, change))])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_dispatch_with_an_activation_count_that_breaks_the_rule_exits_3(tmp_path, monkeypatch):
    def one(desc, model):
        desc["ActivationDescCount"] = 1
        desc["ActivationDescs"] = desc["ActivationDescs"][:1]

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", str(_rnn_model(tmp_path, one))])
    assert result.exit_code == 3, result.output
    assert "ActivationDescs has 1 activations; Direction BIDIRECTIONAL needs 2" in result.output


def test_dispatch_writes_both_outputs_where_the_desc_has_them(tmp_path, monkeypatch):
    def both(desc, model):
        desc["OutputSequenceTensor"] = {"DataType": "FLOAT32", "Sizes": [1, 2, 8, 5]}
        model["resources"]["sequence"] = {"initialValuesDataType": "FLOAT32",
                                          "initialValues": {"valueCount": 80, "value": 0}}
        model["commands"][0]["bindings"]["OutputSequenceTensor"] = "sequence"
        model["commands"].append({"type": "print", "resource": "sequence"})

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", str(_rnn_model(tmp_path, both)), "--no-timing"])
    assert result.exit_code == 0, result.output
    lines = [line.split(": ", 1)[1] for line in result.output.splitlines() if line.startswith("Resource")]
    assert lines[0] == lines[1]  # one step: the sequence is the single output


def test_activations_in_the_api_and_as_desc_objects_agree():
    case = _case("rnn", np.random.default_rng(21), direction="bidirectional")
    text = _run("rnn", case, direction="bidirectional", activations="elu(alpha=0.5),scaled_tanh(alpha=2, beta=0.5)")
    objects = _run("rnn", case, direction="bidirectional", activations=[
        {"Type": "ACTIVATION_ELU", "Alpha": 0.5}, {"Type": "ACTIVATION_SCALED_TANH", "Desc": {"Alpha": 2, "Beta": 0.5}}])
    for a, b in zip(text, objects):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(InputError, match="ActivationDescs"):
        _run("rnn", case, direction="bidirectional", activations=["tanh", "none"])


def test_none_on_the_command_line_leaves_out_an_input_in_the_middle():
    case = _case("rnn", np.random.default_rng(22), lengths=[1, 3])
    result = _cli("rnn", [case["x"], case["w"], case["r"], None, None, case["lengths"]])
    assert result.exit_code == 0, result.output
    expected = dmlcli.run("rnn", case["x"], case["w"], case["r"], None, None, case["lengths"])
    written = json.loads(result.output)
    np.testing.assert_array_equal(np.array(written["OutputSequenceTensor"]["data"], np.float32), expected[0])
    for out, ref in zip(expected, _reference_for("rnn", {**case, "b": None, "h0": None})):
        _close(out, ref)


def test_dispatch_binds_only_the_optional_tensors_its_desc_has(tmp_path, monkeypatch):
    def lengths_only(desc, model):
        # SequenceLengthsTensor without BiasTensor and HiddenInitTensor before it: batch entry 0 runs no step.
        desc["SequenceLengthsTensor"] = {"DataType": "UINT32", "Sizes": [1, 1, 1, 8]}
        model["resources"]["lengths"] = {"initialValuesDataType": "UINT32",
                                         "initialValues": [0, 1, 1, 1, 1, 1, 1, 1]}
        model["commands"][0]["bindings"]["SequenceLengthsTensor"] = "lengths"

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", str(_rnn_model(tmp_path, lengths_only)), "--no-timing"])
    assert result.exit_code == 0, result.output
    values = [float(v) for v in result.output.split("Resource 'output': ")[1].split(", ")]
    from test_dispatch_shaped import _rnn_model_by_hand

    by_hand = _rnn_model_by_hand()
    for d in range(2):
        start = d * 40
        assert values[start:start + 5] == [0.0] * 5  # length 0: the initial state, zeros
        assert values[start + 5:start + 40] == by_hand[start + 5:start + 40]


# ---------------------------------------------------------------- shapes and lengths drawn by hypothesis

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["rnn", "gru", "lstm"]), direction=st.sampled_from(["forward", "backward", "bidirectional"]),
       steps=st.integers(1, 4), batch=st.integers(1, 3), width=st.integers(1, 3), hidden=st.integers(1, 3),
       with_lengths=st.booleans(), seed=st.integers(0, 2**16))
def test_kernel_matches_the_reference_for_drawn_shapes(kind, direction, steps, batch, width, hidden, with_lengths,
                                                       seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, steps + 2, size=batch).tolist() if with_lengths else None
    case = _case(kind, rng, steps=steps, batch=batch, width=width, hidden=hidden, direction=direction,
                 lengths=lengths, bias=bool(seed % 2), h0=bool(seed % 3))
    got = _run(kind, case, direction=direction)
    expected = _reference_for(kind, case, direction=direction)
    assert [out.shape for out in got] == [ref.shape for ref in expected]
    for out, ref in zip(got, expected):
        _close(out, ref)


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
def test_describe_names_the_activations_and_their_defaults(kind):
    result = CliRunner().invoke(cli, ["describe", kind])
    assert result.exit_code == 0, result.output
    defaults = {"rnn": "tanh", "gru": "sigmoid, tanh", "lstm": "sigmoid, tanh, tanh"}[kind]
    assert f"default {defaults} (for each direction)" in result.output
    assert "DML_RECURRENT_NETWORK_DIRECTION_BIDIRECTIONAL = 2" in result.output
