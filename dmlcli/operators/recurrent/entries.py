"""The recurrent family: RNN, GRU and LSTM, one layer each, forward, backward or both directions.

Sources: DirectML's pages (MicrosoftDocs/sdk-api, ns-directml-dml_rnn_operator_desc.md, ..._gru_..., ..._lstm_...:
the fields, Sizes, "Tensor constraints" and the one support row each, from the 2023 versions; the formulas from
the older versions that print them as text, the newer ones showing them as images), DML_RECURRENT_NETWORK_DIRECTION
(FORWARD 0, BACKWARD 1, BIDIRECTIONAL 2) and the DML_OPERATOR_TYPE values of DirectML.h (RNN 76, LSTM 77, GRU 78).

Layouts, as the pages give them (D = num_directions, 2 for BIDIRECTIONAL; H = hidden_size; G = the gates, 1 for
RNN, 3 for GRU in the order z, r, h, 4 for LSTM in the order i, o, f, c):
InputTensor {1, seq_length, batch_size, input_size}; WeightTensor {1, D, G*H, input_size}; RecurrenceTensor
{1, D, G*H, H}; BiasTensor {1, 1, D, 2*G*H} (the G weight biases, then the G recurrence biases, per direction);
HiddenInitTensor and CellMemInitTensor {1, D, batch_size, H}; SequenceLengthsTensor {1, 1, 1, batch_size} (UINT32);
PeepholeTensor {1, 1, D, 3*H} (i, o, f); OutputSequenceTensor {seq_length, D, batch_size, H}; OutputSingleTensor
and OutputCellSingleTensor {1, D, batch_size, H}.

Numbers: one kernel for both backends (xp is numpy or cupy): FLOAT16 inputs are widened to FLOAT32, every step
(the xp.matmul products, the additions, the activations, the state) runs in FLOAT32, and the outputs are rounded
once to the tensors' type. The hidden (and cell) state is carried in FLOAT32 between steps, not rounded.
"""

from __future__ import annotations

import numpy as np

from ...data_types import FLOATS, UINT32
from ...feature_levels import level
from ..elementwise.activation import ACTIVATIONS
from ..table.parameters import ActivationsParameter, BoolParameter, EnumParameter, FloatParameter
from ..table.schema import APPROXIMATE, DIMS_4, Operator, SumBound, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, asks_for_output, describe_sizes
from ..numerics import products

# ---------------------------------------------------------------- tensors and support tables (one row each)

_RNN_INPUTS = ("InputTensor", "WeightTensor", "RecurrenceTensor", "BiasTensor", "HiddenInitTensor",
               "SequenceLengthsTensor")
_LSTM_INPUTS = ("InputTensor", "WeightTensor", "RecurrenceTensor", "BiasTensor", "HiddenInitTensor",
                "CellMemInitTensor", "SequenceLengthsTensor", "PeepholeTensor")
_OUTPUTS = ("OutputSequenceTensor", "OutputSingleTensor")
_LSTM_OUTPUTS = _OUTPUTS + ("OutputCellSingleTensor",)


def _support(inputs: tuple[str, ...], outputs: tuple[str, ...]):
    tensors = {name: (DIMS_4, (UINT32,) if name == "SequenceLengthsTensor" else FLOATS) for name in inputs + outputs}
    return rows(("1_0", tensors))


def _float_tensors(inputs, outputs) -> tuple[str, ...]:
    """'Tensor constraints': every tensor but SequenceLengthsTensor must have the same DataType."""
    return tuple(name for name in inputs + outputs if name != "SequenceLengthsTensor")


# ---------------------------------------------------------------- parameters

DIRECTIONS = (("FORWARD", 0), ("BACKWARD", 1), ("BIDIRECTIONAL", 2))
DIRECTION = EnumParameter(
    field="Direction", help="forward (t = 0 up), backward (t = seq_length - 1 down) or bidirectional (both, "
                            "num_directions 2)",
    enum_prefix="DML_RECURRENT_NETWORK_DIRECTION_", values=DIRECTIONS, default_value="FORWARD")

# The activations an ActivationDescs entry may name: the one-input activations whose fields are all FLOAT,
# but GELU (erf has no NumPy function for the shared NumPy/CuPy kernel). DirectML's pages list none.
_ACCEPTED = tuple(op for op in ACTIVATIONS if len(op.inputs) == 1 and op.name != "GELU")


def _activations(defaults: tuple[str, ...], places: str) -> ActivationsParameter:
    return ActivationsParameter(
        field="ActivationDescs", defaults=defaults, activations=_ACCEPTED,
        help=f"the activations {places} for each direction, forward's then backward's (--activations "
             f"{','.join(d.lower() for d in defaults)}; fields in parentheses: elu(alpha=0.5)); left out: "
             f"{', '.join(d.lower() for d in defaults)} for each direction (ONNX's defaults)")


RNN_ACTIVATIONS = _activations(("TANH",), "f()")
GRU_ACTIVATIONS = _activations(("SIGMOID", "TANH"), "f() and g()")
LSTM_ACTIVATIONS = _activations(("SIGMOID", "TANH", "TANH"), "f(), g() and h()")
LINEAR_BEFORE_RESET = BoolParameter(
    field="LinearBeforeReset", help="true: the hidden gate multiplies r by (H*R_h^T + R_bh) (the linear "
                                    "transformation before the reset gate), false: it multiplies H by r first")
CLIP_THRESHOLD = FloatParameter(field="ClipThreshold", help="the cell clip threshold c: the inputs of the "
                                "activations are clamped to [-c, c] where UseClipThreshold is true",
                                default_value=0.0)
USE_CLIP_THRESHOLD = BoolParameter(field="UseClipThreshold", help="true: clip the activations' inputs to "
                                   "[-ClipThreshold, ClipThreshold]")
COUPLE_INPUT_FORGET = BoolParameter(field="CoupleInputForget", help="true: the forget gate is 1 - the input "
                                    "gate (f_t = 1 - i_t)")

# ---------------------------------------------------------------- shape rules

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_PER_DIRECTION = {"RNN": 1, "GRU": 2, "LSTM": 3}  # activations per direction: f; f, g; f, g, h


def directions(parameters) -> int:
    return 2 if parameters["Direction"] == "BIDIRECTIONAL" else 1


def _expect(query: ShapeQuery, name: str, expected: tuple[int, ...], meaning: str) -> None:
    if name not in query.shapes:
        return  # an optional input left out
    found = query.shape(name)
    if tuple(found) != expected:
        raise RuleViolation(f"{name} Sizes {describe_sizes(found)} must be {describe_sizes(expected)} ({meaning})")


def _recurrent_shape(kind: str):
    gates = _GATES[kind]

    def rule(query: ShapeQuery) -> dict:
        x = query.shape("InputTensor")
        if x[0] != 1:
            raise RuleViolation(f"InputTensor Sizes {describe_sizes(x)} must be {{1, seq_length, batch_size, "
                                f"input_size}}: its first size is {x[0]}, not 1")
        _, steps, batch, width = x
        d = directions(query.parameters)
        w = query.shape("WeightTensor")
        if w[0] != 1 or w[1] != d or w[3] != width or w[2] % gates:
            raise RuleViolation(
                f"WeightTensor Sizes {describe_sizes(w)} must be {{1, num_directions, {_gate_text(gates)}hidden_size, "
                f"input_size}} with num_directions {d} (Direction {query.parameters['Direction']}) and input_size "
                f"{width} (InputTensor's last size)")
        hidden = w[2] // gates
        where = f"hidden_size {hidden}, from WeightTensor"
        _expect(query, "RecurrenceTensor", (1, d, gates * hidden, hidden),
                f"{{1, num_directions, {_gate_text(gates)}hidden_size, hidden_size}}; {where}")
        _expect(query, "BiasTensor", (1, 1, d, 2 * gates * hidden),
                f"{{1, 1, num_directions, {2 * gates} * hidden_size}}; {where}")
        for name in ("HiddenInitTensor", "CellMemInitTensor"):
            _expect(query, name, (1, d, batch, hidden), f"{{1, num_directions, batch_size, hidden_size}}; {where}")
        _expect(query, "SequenceLengthsTensor", (1, 1, 1, batch), "{1, 1, 1, batch_size}")
        _expect(query, "PeepholeTensor", (1, 1, d, 3 * hidden), f"{{1, 1, num_directions, 3 * hidden_size}}; {where}")
        _check_activation_count(kind, query.parameters, d)
        single = (1, d, batch, hidden)
        found = {"OutputSequenceTensor": (steps, d, batch, hidden), "OutputSingleTensor": single}
        if kind == "LSTM":
            found["OutputCellSingleTensor"] = single
        return found

    return rule


def _gate_text(gates: int) -> str:
    return "" if gates == 1 else f"{gates} * "


def _check_activation_count(kind: str, parameters, d: int) -> None:
    given = parameters["ActivationDescs"]
    expected = _PER_DIRECTION[kind] * d
    if given is not None and len(given) != expected:
        places = {"RNN": "f()", "GRU": "f() and g()", "LSTM": "f(), g() and h()"}[kind]
        raise RuleViolation(f"ActivationDescs has {len(given)} activations; Direction {parameters['Direction']} "
                            f"needs {expected} ({places} for each of {d} direction{'s' if d > 1 else ''})")


def resolved_activations(kind: str, parameter: ActivationsParameter, parameters) -> tuple:
    """The call's activations, or the operator's defaults (each with its own default fields) for each direction."""
    given = parameters["ActivationDescs"]
    if given is not None:
        return tuple(given)
    by_name = {op.name: op for op in parameter.activations}
    one = tuple((by_name[name], {p.field: p.default for p in by_name[name].parameters}) for name in parameter.defaults)
    return one * directions(parameters)


# ---------------------------------------------------------------- activations in FLOAT32, on NumPy or CuPy


def _f32(value) -> np.float32:
    return np.float32(value)


def _sigmoid(xp, v):
    return 1 / (1 + xp.exp(-v))


def _softplus(xp, v):
    return xp.maximum(v, 0) + xp.log1p(xp.exp(-xp.abs(v)))


def _hard_sigmoid(xp, v, alpha, beta):
    return xp.minimum(xp.maximum(alpha * v + beta, 0), 1)


# Each activation's formula as its page gives it (activation.py has the same in float64 for the operators
# themselves); here float32 operations on float32 arrays, the fields float32 scalars.
_FORMULAS = {
    "ELU": lambda xp, v, f: xp.where(v >= 0, v, f["Alpha"] * xp.expm1(v)),
    "HARD_SIGMOID": lambda xp, v, f: _hard_sigmoid(xp, v, f["Alpha"], f["Beta"]),
    "IDENTITY": lambda xp, v, f: v,
    "LEAKY_RELU": lambda xp, v, f: xp.where(v >= 0, v, f["Alpha"] * v),
    "LINEAR": lambda xp, v, f: f["Alpha"] * v + f["Beta"],
    "PARAMETRIC_SOFTPLUS": lambda xp, v, f: f["Alpha"] * _softplus(xp, f["Beta"] * v),
    "RELU": lambda xp, v, f: xp.maximum(v, 0),
    "SCALED_ELU": lambda xp, v, f: xp.where(v > 0, f["Gamma"] * v, f["Gamma"] * (f["Alpha"] * xp.expm1(v))),
    "SCALED_TANH": lambda xp, v, f: f["Alpha"] * xp.tanh(f["Beta"] * v),
    "SIGMOID": lambda xp, v, f: _sigmoid(xp, v),
    "SOFTPLUS": lambda xp, v, f: _softplus(xp, f["Steepness"] * v) / f["Steepness"],
    "SOFTSIGN": lambda xp, v, f: v / (1 + xp.abs(v)),
    "TANH": lambda xp, v, f: xp.tanh(v),
    "THRESHOLDED_RELU": lambda xp, v, f: xp.where(v > f["Alpha"], v, 0),
    "SHRINK": lambda xp, v, f: xp.where(v < -f["Threshold"], v + f["Bias"],
                                        xp.where(v > f["Threshold"], v - f["Bias"], 0)),
    "CELU": lambda xp, v, f: xp.maximum(v, 0) + xp.minimum(0, f["Alpha"] * xp.expm1(v / f["Alpha"])),
    "SWISH": lambda xp, v, f: v * _sigmoid(xp, f["SigmoidInputScale"] * v),
    "HARD_SWISH": lambda xp, v, f: v * _hard_sigmoid(xp, v, f["Alpha"], f["Beta"]),
}


def prepared_activation(entry):
    """(formula, FLOAT32 fields) of one ActivationDescs entry, looked up once per call, not once per step."""
    activation, fields = entry
    return _FORMULAS[activation.name], {name: _f32(value) for name, value in fields.items()}


def apply_activation(xp, prepared, v):
    """One prepared activation on a FLOAT32 array: FLOAT32 in, FLOAT32 out."""
    formula, typed = prepared
    return formula(xp, v, typed).astype(np.float32, copy=False)


# ---------------------------------------------------------------- the kernels


def _direction_steps(parameters, d: int, steps: int) -> range:
    backward = parameters["Direction"] == "BACKWARD" or (parameters["Direction"] == "BIDIRECTIONAL" and d == 1)
    return range(steps - 1, -1, -1) if backward else range(steps)


def recurrent_inputs(xp, kind: str, inputs, dtype=np.float32) -> tuple:
    """A call's inputs in `dtype` (FLOAT32 for the kernel, float64 for the sum bound's run), those left out as zeros:
    x (S, B, I), w (D, G*H, I), r (D, G*H, H), bias (D, 2*G*H), h_init and c_init (D, B, H), peephole (D, 3*H), and
    the steps each batch entry runs (None: every one)."""
    if kind == "LSTM":
        x, w, r, bias, h_init, c_init, lengths, peephole = inputs
    else:
        x, w, r, bias, h_init, lengths = inputs
        c_init = peephole = None

    def typed(array):
        return xp.asarray(array).astype(dtype)

    x, w, r = typed(x)[0], typed(w)[0], typed(r)[0]
    steps, batch = x.shape[0], x.shape[1]
    d_count, hidden = w.shape[0], w.shape[1] // _GATES[kind]
    bias = xp.zeros((d_count, 2 * _GATES[kind] * hidden), dtype) if bias is None else typed(bias)[0, 0]
    zero_state = xp.zeros((d_count, batch, hidden), dtype)
    h_init = zero_state if h_init is None else typed(h_init)[0]
    c_init = zero_state if c_init is None else typed(c_init)[0]
    peephole = xp.zeros((d_count, 3 * hidden), dtype) if peephole is None else typed(peephole)[0, 0]
    # A length past seq_length counts as seq_length (the lengths are data: no rule can refuse them).
    valid_steps = None if lengths is None else xp.minimum(xp.asarray(lengths).reshape(batch).astype(np.int64), steps)
    return x, w, r, bias, h_init, c_init, peephole, valid_steps


def _recurrent_kernel(kind: str, parameter: ActivationsParameter):
    gates, per_direction = _GATES[kind], _PER_DIRECTION[kind]
    lstm = kind == "LSTM"

    def kernel(xp, inputs, outputs, params):
        x, w, r, bias, h_init, c_init, peephole, valid_steps = recurrent_inputs(xp, kind, inputs)
        steps, batch = x.shape[0], x.shape[1]
        d_count, hidden = w.shape[0], w.shape[1] // gates
        activations = [prepared_activation(entry) for entry in resolved_activations(kind, parameter, params)]
        # Every step's hidden state is kept only where the call asks for OutputSequenceTensor (_Maybenull_).
        sequence = (xp.zeros((steps, d_count, batch, hidden), np.float32)
                    if asks_for_output(outputs, "OutputSequenceTensor") else None)
        singles, cells = [], []
        for d in range(d_count):
            own = activations[d * per_direction:(d + 1) * per_direction]
            # X_t * W^T + W_b for every t at once: one matmul; the recurrence is a loop over time.
            projected = products.matmul(xp, x, w[d].T) + bias[d, :gates * hidden]
            state = (h_init[d], c_init[d])
            step = _STEPS[kind]
            for t in _direction_steps(params, d, steps):
                new_h, new_c = step(xp, projected[t], state, r[d], bias[d, gates * hidden:], peephole[d], own, params,
                                    hidden)
                if valid_steps is not None:
                    # Past a sequence's length nothing changes and the output sequence holds zeros (ONNX's rule).
                    keep = (t < valid_steps)[:, None]
                    new_h = xp.where(keep, new_h, state[0])
                    new_c = xp.where(keep, new_c, state[1])
                    if sequence is not None:
                        sequence[t, d] = xp.where(keep, new_h, 0)
                elif sequence is not None:
                    sequence[t, d] = new_h
                state = (new_h, new_c)
            singles.append(state[0])
            cells.append(state[1])
        return _asked(xp, outputs, sequence, singles, cells, lstm)

    return kernel


def _asked(xp, outputs, sequence, singles: list, cells: list, lstm: bool) -> tuple:
    """The outputs the call asks for, in its order, each in its type (float64 for the sum bound's run): the sequence
    (None where not asked for), the last hidden state and (LSTM) the last cell state of each direction."""
    found = {"OutputSequenceTensor": sequence, "OutputSingleTensor": xp.stack(singles)[None]}
    if lstm:
        found["OutputCellSingleTensor"] = xp.stack(cells)[None]
    return tuple(found[out.name].astype(out.data_type.numpy_dtype) for out in outputs)


def _rnn_step(xp, projected, state, r, recurrence_bias, peephole, own, params, hidden):
    h, c = state
    (f,) = own
    return apply_activation(xp, f, projected + products.matmul(xp, h, r.T) + recurrence_bias), c


def _gru_step(xp, projected, state, r, recurrence_bias, peephole, own, params, hidden):
    h, c = state
    f, g = own
    zr = products.matmul(xp, h, r[:2 * hidden].T) + recurrence_bias[:2 * hidden]
    z = apply_activation(xp, f, projected[:, :hidden] + zr[:, :hidden])
    reset = apply_activation(xp, f, projected[:, hidden:2 * hidden] + zr[:, hidden:])
    r_h, rb_h = r[2 * hidden:], recurrence_bias[2 * hidden:]
    if params["LinearBeforeReset"]:
        candidate = projected[:, 2 * hidden:] + reset * (products.matmul(xp, h, r_h.T) + rb_h)
    else:
        candidate = projected[:, 2 * hidden:] + products.matmul(xp, reset * h, r_h.T) + rb_h
    new = apply_activation(xp, g, candidate)
    return (1 - z) * new + z * h, c


def _lstm_step(xp, projected, state, r, recurrence_bias, peephole, own, params, hidden):
    h, c = state
    f, g, h_activation = own
    pre = projected + products.matmul(xp, h, r.T) + recurrence_bias  # gates i, o, f, c
    limit = _f32(params["ClipThreshold"])

    def clip(v):
        return xp.clip(v, -limit, limit) if params["UseClipThreshold"] else v

    p_i, p_o, p_f = peephole[:hidden], peephole[hidden:2 * hidden], peephole[2 * hidden:]
    i = apply_activation(xp, f, clip(pre[:, :hidden] + p_i * c))
    if params["CoupleInputForget"]:
        forget = 1 - i
    else:
        forget = apply_activation(xp, f, clip(pre[:, 2 * hidden:3 * hidden] + p_f * c))
    cell_input = apply_activation(xp, g, clip(pre[:, 3 * hidden:]))
    new_c = forget * c + i * cell_input
    o = apply_activation(xp, f, clip(pre[:, hidden:2 * hidden] + p_o * new_c))
    return o * apply_activation(xp, h_activation, new_c), new_c


_STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}

# ---------------------------------------------------------------- the sum bound (checking/bounds.py)
#
# A first-order error analysis run alongside the recurrence in float64. Each gate's pre-activation sums K =
# input_size + hidden_size + 3 terms (X W^T, H R^T, the two biases, a peephole), so its rounding error is at most
# K x u x G, G the sum of their magnitudes; the error already in H (and C) adds |R| (|P|) times itself; an
# activation carries an error of its input through its largest slope (Operator.largest_slope) and adds its own
# rounding; a product a.b carries |a| x (b's error) + |b| x (a's error). Every error is kept in units of K x u,
# so the outputs' M is the error each element may carry, and their bound 2 x (K x u + u_out) x M.


def recurrent_terms(call) -> dict:
    """K of the recurrence's sum bound: input_size + hidden_size + 3, the terms of a gate's pre-activation, for
    every output."""
    width = call.tensors["InputTensor"].shape[3]
    hidden = call.tensors["RecurrenceTensor"].shape[3]  # an input: every output may be left out
    return {name: width + hidden + 3 for name in call.operator.outputs}


def _carried(xp, errors, weights):
    """The error a product with `weights` carries: errors x |weights|^T."""
    return products.matmul(xp, errors, xp.abs(weights).T)


def _sized(xp, values, weights, bias):
    """The magnitudes of values x weights^T + bias: |values| x |weights|^T + |bias|."""
    return products.matmul(xp, xp.abs(values), xp.abs(weights).T) + xp.abs(bias)


def _through(xp, activation, value, error):
    """An activation of `value` (float64) and its error: its largest slope times the input's, plus its rounding."""
    (formula, fields), slope = activation
    found = formula(xp, value, fields)
    return found, slope * error + xp.abs(found)


def _rnn_magnitude_step(xp, projected, size, state, errors, r, recurrence_bias, peephole, own, params, hidden):
    h, c = state
    error_h, error_c = errors
    (f,) = own
    pre = projected + products.matmul(xp, h, r.T) + recurrence_bias
    new_h, error = _through(xp, f, pre, size + _sized(xp, h, r, recurrence_bias) + _carried(xp, error_h, r))
    return (new_h, c), (error, error_c)


def _gru_magnitude_step(xp, projected, size, state, errors, r, recurrence_bias, peephole, own, params, hidden):
    h, c = state
    error_h, error_c = errors
    f, g = own
    r_zr, rb_zr = r[:2 * hidden], recurrence_bias[:2 * hidden]
    pre = projected[:, :2 * hidden] + products.matmul(xp, h, r_zr.T) + rb_zr
    pre_error = size[:, :2 * hidden] + _sized(xp, h, r_zr, rb_zr) + _carried(xp, error_h, r_zr)
    z, error_z = _through(xp, f, pre[:, :hidden], pre_error[:, :hidden])
    reset, error_r = _through(xp, f, pre[:, hidden:], pre_error[:, hidden:])
    r_h, rb_h = r[2 * hidden:], recurrence_bias[2 * hidden:]
    if params["LinearBeforeReset"]:
        linear = products.matmul(xp, h, r_h.T) + rb_h
        error_linear = _sized(xp, h, r_h, rb_h) + _carried(xp, error_h, r_h)
        candidate = projected[:, 2 * hidden:] + reset * linear
        error_candidate = (size[:, 2 * hidden:] + xp.abs(reset) * error_linear + xp.abs(linear) * error_r
                           + xp.abs(reset * linear))
    else:
        reset_h = reset * h
        error_reset_h = xp.abs(reset) * error_h + xp.abs(h) * error_r + xp.abs(reset_h)
        candidate = projected[:, 2 * hidden:] + products.matmul(xp, reset_h, r_h.T) + rb_h
        error_candidate = size[:, 2 * hidden:] + _sized(xp, reset_h, r_h, rb_h) + _carried(xp, error_reset_h, r_h)
    new, error_new = _through(xp, g, candidate, error_candidate)
    new_h = (1 - z) * new + z * h
    error = (xp.abs(1 - z) * (error_new + xp.abs(new)) + xp.abs(z) * (error_h + xp.abs(h))
             + (xp.abs(new) + xp.abs(h)) * error_z)
    return (new_h, c), (error, error_c)


def _lstm_magnitude_step(xp, projected, size, state, errors, r, recurrence_bias, peephole, own, params, hidden):
    h, c = state
    error_h, error_c = errors
    f, g, h_activation = own
    pre = projected + products.matmul(xp, h, r.T) + recurrence_bias  # gates i, o, f, c
    pre_error = size + _sized(xp, h, r, recurrence_bias) + _carried(xp, error_h, r)
    limit = float(params["ClipThreshold"])

    def clip(v):  # a clamp moves no value further: the error stays
        return xp.clip(v, -limit, limit) if params["UseClipThreshold"] else v

    def gate(index, with_cell, cell_error):
        part = slice(index * hidden, (index + 1) * hidden)
        peep = peephole[part] if index < 3 else 0
        error = pre_error[:, part] + xp.abs(peep) * (xp.abs(with_cell) + cell_error)
        return _through(xp, f if index < 3 else g, clip(pre[:, part] + peep * with_cell), error)

    i, error_i = gate(0, c, error_c)
    forget, error_forget = (1 - i, error_i) if params["CoupleInputForget"] else gate(2, c, error_c)
    cell_input, error_cell_input = gate(3, c, error_c)
    new_c = forget * c + i * cell_input
    error_new_c = (xp.abs(forget) * (error_c + xp.abs(c)) + xp.abs(c) * error_forget
                   + xp.abs(i) * (error_cell_input + xp.abs(cell_input)) + xp.abs(cell_input) * error_i)
    o, error_o = gate(1, new_c, error_new_c)
    squashed, error_squashed = _through(xp, h_activation, new_c, error_new_c)
    new_h = o * squashed
    error = xp.abs(o) * error_squashed + xp.abs(squashed) * error_o + xp.abs(new_h)
    return (new_h, new_c), (error, error_new_c)


_MAGNITUDE_STEPS = {"RNN": _rnn_magnitude_step, "GRU": _gru_magnitude_step, "LSTM": _lstm_magnitude_step}


def _recurrent_magnitude(kind: str, parameter: ActivationsParameter):
    gates, per_direction = _GATES[kind], _PER_DIRECTION[kind]
    lstm = kind == "LSTM"

    def magnitude(xp, inputs, outputs, params):
        x, w, r, bias, h_init, c_init, peephole, valid_steps = recurrent_inputs(xp, kind, inputs, np.float64)
        steps, batch = x.shape[0], x.shape[1]
        d_count, hidden = w.shape[0], w.shape[1] // gates
        entries = resolved_activations(kind, parameter, params)
        slopes = [None if a.largest_slope is None else a.largest_slope(fields) for a, fields in entries]
        if any(slope is None for slope in slopes):  # an activation that jumps: no slope bounds it, no bound
            return (None,) * len(outputs)
        activations = [((_FORMULAS[a.name], fields), slope) for (a, fields), slope in zip(entries, slopes)]
        sequence = (xp.zeros((steps, d_count, batch, hidden)) if asks_for_output(outputs, "OutputSequenceTensor")
                    else None)
        singles, cells = [], []
        for d in range(d_count):
            own = activations[d * per_direction:(d + 1) * per_direction]
            projected = products.matmul(xp, x, w[d].T) + bias[d, :gates * hidden]
            size = _sized(xp, x, w[d], bias[d, :gates * hidden])
            state, errors = (h_init[d], c_init[d]), (xp.zeros_like(h_init[d]), xp.zeros_like(h_init[d]))
            for t in _direction_steps(params, d, steps):
                new_state, new_errors = _MAGNITUDE_STEPS[kind](xp, projected[t], size[t], state, errors, r[d],
                                                               bias[d, gates * hidden:], peephole[d], own, params,
                                                               hidden)
                if valid_steps is not None:  # past a sequence's length nothing changes, the output holds zeros
                    keep = (t < valid_steps)[:, None]
                    new_state = tuple(xp.where(keep, new, old) for new, old in zip(new_state, state))
                    new_errors = tuple(xp.where(keep, new, old) for new, old in zip(new_errors, errors))
                    if sequence is not None:
                        sequence[t, d] = xp.where(keep, new_errors[0], 0)
                elif sequence is not None:
                    sequence[t, d] = new_errors[0]
                state, errors = new_state, new_errors
            singles.append(errors[0])
            cells.append(errors[1])
        return _asked(xp, outputs, sequence, singles, cells, lstm)

    return magnitude


_RECURRENT_MAGNITUDE_TEXT = (
    "the error each element may carry, in units of K x u, from a first-order analysis run alongside the recurrence "
    "in float64: a gate's sum of magnitudes |X| |W|^T + |H| |R|^T + |biases| (+ |P| |C|), plus |R| times the "
    "error already in H (and C), through each activation's largest slope plus its rounding, and through the state "
    "updates' products (|a| x b's error + |b| x a's error)")


# ---------------------------------------------------------------- tolerance


def recurrent_tolerance_scale(call) -> int:
    """How the tolerance grows: with the steps (errors carry through the state) and the length of each dot
    product (input_size + hidden_size terms, plus the two biases)."""
    _, steps, _, width = call.tensors["InputTensor"].shape
    hidden = call.tensors["RecurrenceTensor"].shape[3]  # an input: every output may be left out
    return steps * (width + hidden + 2)


_TOLERANCE = Tolerance(
    "ulp", 3, 3,
    "WebNN's figures are for a few small fixed cases (WPT gru.https.any.js 3 ULP, lstm.https.any.js 1 ULP, "
    "FLOAT32 only; none for a simple RNN): dmlcli takes the larger, 3 ULP, for each step and each term of a "
    "gate's dot product, so the figure is multiplied by seq_length * (input_size + hidden_size + 2); the same for "
    "RNN, GRU and LSTM, and for FLOAT16 (computed in FLOAT32, rounded once)",
    floor_float32=2.0 ** -16, floor_float16=2.0 ** -10,
    floor_source=("an absolute 2^-16 (FLOAT32; 512 ULP of 1) or 2^-10 (FLOAT16; one ULP of 1): outputs near 0 "
                  "(tanh and sigmoid gates of values about 1) carry the rounding of terms about 1, which their "
                  "own ULP cannot measure"))

_NOTES_COMMON = (
    "FLOAT16 tensors are computed in FLOAT32 (xp.matmul, the additions, the activations, the hidden and cell "
    "state between steps) and the outputs rounded once; the tolerance grows with seq_length and the gates' "
    "dot-product length. With --allow-tf32 a FLOAT32 call's products (xp.matmul) on the GPU may run on TF32 "
    "tensor cores (checked within 2^13 times the tolerance); FLOAT16 calls keep FLOAT32 products.",
    "Every output is _Maybenull_: a call may leave out any of them as long as it keeps one (outputs= in the API, "
    "--outputs on the command line, a DxDispatch desc without them), and then gives only those it asks for; without "
    "OutputSequenceTensor the steps' hidden states are not kept. By default every output is computed and returned.",
    "Optional inputs may be left out: give the inputs in DESC order and stop, or write none (command line) or "
    "None (API) for one in the middle. Left out, BiasTensor, HiddenInitTensor (and CellMemInitTensor, "
    "PeepholeTensor) are zeros and every sequence has length seq_length.",
    "SequenceLengthsTensor (UINT32, one length per batch entry): DirectML's pages say only that each entry has "
    "its own seq_length. dmlcli follows ONNX: a sequence runs over t < length (the backward direction starts "
    "at t = length - 1), OutputSequenceTensor holds zeros at t >= length, OutputSingleTensor the last state "
    "computed (HiddenInitTensor for a length of 0); a length past seq_length counts as seq_length.",
    "ActivationDescs (ActivationDescCount is its length): each an activation desc with NULL tensors. dmlcli "
    "takes the one-input activations but GELU; left out, ONNX's defaults for each direction.",
)


def _entry(name: str, enum_value: int, summary: str, formula: str, inputs, outputs, parameters, notes) -> Operator:
    kind = name
    activations = parameters[0]
    # Every input after the first three is _Maybenull_; a shaped kernel receives None for one left out (the
    # "like" tensor matters only to element-wise operators, which get zeros of its type).
    optional = tuple((tensor, "InputTensor") for tensor in inputs[3:])
    return Operator(
        name=name, enum_value=enum_value, family="recurrent", prefix="", summary=summary, formula=formula,
        introduced=level("1_0"), inputs=inputs, output=outputs[0], extra_outputs=outputs[1:],
        support=_support(inputs, outputs), same_data_type=_float_tensors(inputs, outputs), same_sizes=(),
        cpu_kernel=None, cuda_body="", parameters=parameters, shape_rule=_recurrent_shape(kind),
        array_kernel=_recurrent_kernel(kind, activations), exactness=APPROXIMATE, tolerance=_TOLERANCE,
        tolerance_scale=recurrent_tolerance_scale, optional_inputs=optional, optional_since=level("1_0"),
        optional_outputs=outputs, notes=tuple(notes) + _NOTES_COMMON, tf32_products=True,
        sum_bound=SumBound(recurrent_terms, "input_size + hidden_size + 3, the terms of a gate's pre-activation",
                           _RECURRENT_MAGNITUDE_TEXT, magnitude=_recurrent_magnitude(kind, activations)),
    )


OPERATORS: tuple[Operator, ...] = (
    _entry(
        "RNN", 76, "One-layer simple recurrent network: H_t = f(X_t*W^T + H_(t-1)*R^T + W_b + R_b) over the sequence.",
        "H_t = f(X_t * W_i^T + H_(t-1) * R_i^T + W_bi + R_bi), t = 0 .. seq_length - 1 (backward: down to 0)",
        _RNN_INPUTS, _OUTPUTS, (RNN_ACTIVATIONS, DIRECTION),
        ("One activation f() per direction (2 for BIDIRECTIONAL), the forward direction's first.",),
    ),
    _entry(
        "LSTM", 77, "One-layer long short-term memory: input, output, forget and cell gates over the sequence.",
        ("i = f(clip(X W_i^T + H R_i^T + P_i.C + W_bi + R_bi)); f_t = f(clip(... P_f.C ...)) or 1 - i; "
         "c = g(clip(X W_c^T + H R_c^T + W_bc + R_bc)); C' = f_t.C + i.c; o = f(clip(... P_o.C' ...)); H' = o.h(C')"),
        _LSTM_INPUTS, _LSTM_OUTPUTS,
        (LSTM_ACTIVATIONS, DIRECTION, CLIP_THRESHOLD, USE_CLIP_THRESHOLD, COUPLE_INPUT_FORGET),
        ("Gates in the order i, o, f, c (W, R, the biases); PeepholeTensor in the order i, o, f. Three activations "
         "f(), g(), h() per direction.",
         "The output gate's peephole multiplies the new cell state C_t, as ONNX's LSTM does (DirectML's older page "
         "prints P_o.C_(t-1), and H_t = o_t.h(ct) for h(C_t)); ONNX's lstm_with_peepholes case checks it.",
         "clip() clamps the input of each gate's activation (i, f, c, o) to [-ClipThreshold, ClipThreshold] where "
         "UseClipThreshold is true; h(C_t) is not clipped (the page's formula). CoupleInputForget: f_t = 1 - i_t."),
    ),
    _entry(
        "GRU", 78, "One-layer gated recurrent unit: update (z), reset (r) and hidden (h) gates over the sequence.",
        ("z = f(X W_z^T + H R_z^T + W_bz + R_bz); r = f(X W_r^T + H R_r^T + W_br + R_br); "
         "h = g(X W_h^T + (r.H) R_h^T + R_bh + W_bh) or g(X W_h^T + r.(H R_h^T + R_bh) + W_bh); H' = (1 - z).h + z.H"),
        _RNN_INPUTS, _OUTPUTS, (GRU_ACTIVATIONS, DIRECTION, LINEAR_BEFORE_RESET),
        ("Gates in the order z, r, h (W, R and the biases); two activations f() (z and r) and g() (h) per "
         "direction.",),
    ),
)
