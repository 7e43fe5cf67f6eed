"""The element-wise DML_OPERATOR_ACTIVATION_* operators and ELEMENT_WISE_ADD1 (dmlcli/operators/activation.py).

Every expected value here comes from this file: an element-by-element reference on Python floats
(the math module; struct for rounding to float32 and float16) and a second transcription of
DirectML's support tables, so agreement with dmlcli's NumPy kernels and validator means something.
"""

import json
import math
import struct
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.api import plan
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.io.json_tensor import tensor_from_object
from dmlcli.operators.elementwise import activation as module
from dmlcli.operators.elementwise import gelu as gelu_module

from conftest import SHARED, shared_params

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# ---------------------------------------------------------------- rounding and distance (struct only)

_FMT = {"float32": ("<f", "<I", 32), "float16": ("<e", "<H", 16)}


def round_to(value: float, dtype: str) -> float:
    """value rounded once (to nearest, ties to even) to float32 or float16, as a Python float."""
    fmt = _FMT[dtype][0]
    try:
        return struct.unpack(fmt, struct.pack(fmt, value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def bits_of_value(value: float, dtype: str) -> int:
    fmt, ufmt, _ = _FMT[dtype]
    return struct.unpack(ufmt, struct.pack(fmt, value))[0]


def value_of_bits(bits: int, dtype: str) -> float:
    fmt, ufmt, _ = _FMT[dtype]
    return struct.unpack(fmt, struct.pack(ufmt, bits))[0]


def ulp_distance(a_bits: int, b_bits: int, width: int) -> int:
    def ordered(bits):
        magnitude = bits & ((1 << (width - 1)) - 1)
        return -magnitude if bits >> (width - 1) else magnitude

    return abs(ordered(a_bits) - ordered(b_bits))


def element_bits(array: np.ndarray) -> list[int]:
    return [int(b) for b in array.reshape(-1).view(f"uint{array.dtype.itemsize * 8}")]


# ---------------------------------------------------------------- the independent reference

INF, NAN = math.inf, math.nan


def _exp(t):
    return INF if t > 709.0 else math.exp(t)


def _expm1(t):
    return INF if t > 709.0 else math.expm1(t)


def _sigmoid(t):
    if math.isnan(t):
        return NAN
    if t >= 0:
        return 1.0 / (1.0 + _exp(-t))
    e = _exp(t)
    return e / (1.0 + e)


def _softplus(t):
    if math.isnan(t):
        return NAN
    if t > 0:
        return t + math.log1p(_exp(-t))
    return math.log1p(_exp(t))


def _hard_sigmoid(x, a, b):
    t = a * x + b
    if math.isnan(t):
        return NAN
    return max(0.0, min(t, 1.0))


def _hard_swish(x, a, b):
    h = _hard_sigmoid(x, a, b)
    return math.copysign(0.0, x) if h == 0.0 else x * h


def _celu(x, a):
    if math.isnan(x):
        return NAN
    q = a * _expm1(x / a)
    return (x if x > 0 else 0.0) + (q if q < 0 else 0.0)


def _gelu(x):
    if x == -INF:
        return -0.0
    return 0.5 * x * math.erfc(-x / math.sqrt(2.0))


def _softsign(x):
    if math.isinf(x):
        return math.copysign(1.0, x)
    return x / (1.0 + abs(x))


def _swish(x, s):
    sig = _sigmoid(s * x)
    return math.copysign(0.0, x) if sig == 0.0 else x * sig


# float64 formulas of the composite and approximate operators: (x, params) -> exact-ish value.
APPROX = {
    "activation_elu": lambda x, p: x if x >= 0 else p["alpha"] * _expm1(x),
    "activation_celu": lambda x, p: _celu(x, p["alpha"]),
    "activation_scaled_elu": lambda x, p: p["gamma"] * x if x > 0 else p["gamma"] * p["alpha"] * _expm1(x),
    "activation_gelu": lambda x, p: _gelu(x),
    "activation_sigmoid": lambda x, p: _sigmoid(x),
    "activation_swish": lambda x, p: _swish(x, p["sigmoid_input_scale"]),
    "activation_softplus": lambda x, p: _softplus(p["steepness"] * x) / p["steepness"],
    "activation_parametric_softplus": lambda x, p: p["alpha"] * _softplus(p["beta"] * x),
    "activation_tanh": lambda x, p: math.tanh(x),
    "activation_scaled_tanh": lambda x, p: p["alpha"] * math.tanh(p["beta"] * x),
    "activation_softsign": lambda x, p: _softsign(x),
    "activation_linear": lambda x, p: p["alpha"] * x + p["beta"],
    "activation_hard_sigmoid": lambda x, p: _hard_sigmoid(x, p["alpha"], p["beta"]),
    "activation_hard_swish": lambda x, p: _hard_swish(x, p["alpha"], p["beta"]),
}


def _sat_trunc(b: float) -> int:
    if math.isnan(b):
        return 0
    return max(-(2**63), min(2**63 - 1, int(b))) if math.isfinite(b) else (2**63 - 1 if b > 0 else -(2**63))


def _wrap(value: int, dtype: str) -> int:
    info = np.iinfo(dtype)
    span = 1 << info.bits
    value %= span
    return value - span if info.min < 0 and value > info.max else value


# exact and one-rounding operators: (input values, input bits, params, dtype) -> (bits or None, value)
# A result that is one of the inputs passes its bits through; a computed one is a Python value rounded
# by struct ("via float32" for FLOAT16: rounded to float32, then to float16).
def one_rounding(value: float, dtype: str) -> float:
    return round_to(round_to(value, "float32"), dtype) if dtype == "float16" else round_to(value, dtype)


def exact_reference(op: str, values, bits, params, dtype):
    """The expected element: ("bits", n) for a value copied or zero, ("value", v) for a rounded one."""
    zero = ("bits", 0)
    if op == "activation_relu":
        (x,), (xb,) = values, bits
        return ("bits", xb) if (x > 0 or math.isnan(x)) else zero
    if op == "activation_identity":
        return ("bits", bits[0])
    if op == "activation_thresholded_relu":
        return ("bits", bits[0]) if values[0] > params["alpha"] else zero
    if op == "activation_relu_grad":
        return ("bits", bits[1]) if values[0] > 0 else zero
    if op == "activation_leaky_relu":
        x = values[0]
        return ("bits", bits[0]) if x >= 0 else ("value", one_rounding(params["alpha"] * x, dtype))
    if op == "activation_parameterized_relu":
        x, s = values
        return ("bits", bits[0]) if x >= 0 else ("value", one_rounding(s * x, dtype))
    if op == "activation_shrink":
        x, t, b = values[0], params["threshold"], params["bias"]
        if x < -t:
            return ("value", one_rounding(x + b, dtype))
        if x > t:
            return ("value", one_rounding(x - b, dtype))
        return zero
    raise AssertionError(op)


def integer_reference(op: str, values, params, dtype) -> int:
    if op == "activation_relu":
        return max(values[0], 0)
    if op == "activation_parameterized_relu":
        x, s = values
        return x if x >= 0 else _wrap(x * s, dtype)
    if op == "activation_relu_grad":
        return values[1] if values[0] > 0 else 0
    if op == "activation_shrink":
        x, t, b = values[0], float(params["threshold"]), _sat_trunc(params["bias"])
        if x < -t:
            return _wrap(x + b, dtype)
        if x > t:
            return _wrap(x - b, dtype)
        return 0
    raise AssertionError(op)


# ---------------------------------------------------------------- what each entry must declare

# op: (DML name, enum, class, tolerance kind, float32, float16, {option: default})
DECLARED = {
    "activation_elu": ("ACTIVATION_ELU", 35, "approximate", "ulp", 18, 18, {"alpha": 1.0}),
    "activation_hard_sigmoid": ("ACTIVATION_HARD_SIGMOID", 37, "composite", "ulp", 2, 2, {"alpha": 0.2, "beta": 0.5}),
    "activation_identity": ("ACTIVATION_IDENTITY", 38, "exact", None, 0, 0, {}),
    "activation_leaky_relu": ("ACTIVATION_LEAKY_RELU", 39, "one rounding", "ulp", 1, 2, {"alpha": 0.01}),
    "activation_linear": ("ACTIVATION_LINEAR", 40, "composite", "ulp", 2, 2, {"alpha": 1.0, "beta": 0.0}),
    "activation_parameterized_relu": ("ACTIVATION_PARAMETERIZED_RELU", 42, "one rounding", "ulp", 1, 2, {}),
    "activation_parametric_softplus": ("ACTIVATION_PARAMETRIC_SOFTPLUS", 43, "approximate", "ulp", 18, 18,
                                       {"alpha": 1.0, "beta": 1.0}),
    "activation_relu": ("ACTIVATION_RELU", 44, "exact", None, 0, 0, {}),
    "activation_scaled_elu": ("ACTIVATION_SCALED_ELU", 45, "approximate", "ulp", 18, 18,
                              {"alpha": 1.6732, "gamma": 1.0507}),
    "activation_scaled_tanh": ("ACTIVATION_SCALED_TANH", 46, "approximate", "ulp", 16, 16, {"alpha": 1.0, "beta": 0.5}),
    "activation_sigmoid": ("ACTIVATION_SIGMOID", 47, "approximate", "ulp", 34, 10, {}),
    "activation_softplus": ("ACTIVATION_SOFTPLUS", 49, "approximate", "ulp", 18, 18, {"steepness": 1.0}),
    "activation_softsign": ("ACTIVATION_SOFTSIGN", 50, "composite", "ulp", 3, 3, {}),
    "activation_tanh": ("ACTIVATION_TANH", 51, "approximate", "atol", 1 / 1024, 1 / 512, {}),
    "activation_thresholded_relu": ("ACTIVATION_THRESHOLDED_RELU", 52, "exact", None, 0, 0, {"alpha": 1.0}),
    "activation_shrink": ("ACTIVATION_SHRINK", 90, "one rounding", "ulp", 1, 2, {"bias": 0.0, "threshold": 0.5}),
    "activation_celu": ("ACTIVATION_CELU", 128, "approximate", "ulp", 18, 18, {"alpha": 1.0}),
    "activation_relu_grad": ("ACTIVATION_RELU_GRAD", 129, "exact", None, 0, 0, {}),
    "activation_gelu": ("ACTIVATION_GELU", 157, "approximate", "ulp", 18, 18, {}),
    "activation_swish": ("ACTIVATION_SWISH", 167, "approximate", "ulp", 34, 10, {"sigmoid_input_scale": 1.0}),
    "activation_hard_swish": ("ACTIVATION_HARD_SWISH", 168, "composite", "ulp", 4, 4,
                              {"alpha": float(np.float32(1 / 6)), "beta": 0.5}),
    "add1": ("ELEMENT_WISE_ADD1", 89, "one rounding", "ulp", 1, 1, {"fused_activation": None}),
}
ACTIVATIONS = [op for op in DECLARED if op != "add1"]
TWO_INPUTS = {"activation_parameterized_relu", "activation_relu_grad", "add1"}
FUSABLE = ["linear", "sigmoid", "hard_sigmoid", "tanh", "scaled_tanh", "relu", "leaky_relu", "thresholded_relu",
           "elu", "celu", "scaled_elu", "softplus", "parametric_softplus", "softsign", "identity", "shrink", "gelu"]


def test_the_table_holds_every_operator_once():
    names = sorted(op.cli_name for op in module.OPERATORS)
    assert names == sorted(DECLARED)
    assert len(module.OPERATORS) == 22
    assert module.AXIS_WISE == ("SOFTMAX", "LOG_SOFTMAX", "HARDMAX", "SOFTMAX1", "LOG_SOFTMAX1", "HARDMAX1")


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_entry_declares_name_class_tolerance_and_defaults(name):
    op = dmlcli.find_operator(name)
    dml, enum_value, exactness, kind, f32, f16, defaults = DECLARED[name]
    assert op.dml_name == "DML_OPERATOR_" + dml
    assert op.enum_value == enum_value
    assert op.exactness == exactness
    assert op.in_place
    assert op.family == "activation"
    assert op.notes, "every entry documents its decisions"
    if kind is None:
        assert op.tolerance is None
    else:
        assert (op.tolerance.kind, op.tolerance.float32, op.tolerance.float16) == (kind, f32, f16)
        assert op.tolerance.source
    assert set(op.options) >= set(defaults)
    for option, value in defaults.items():
        parameter = op.options[option]
        default = parameter.default
        assert (default is None and value is None) or default == np.float32(value), option
    if name != "add1":
        assert set(op.options) == set(defaults)
        assert op.prefix == "ACTIVATION"


def test_registry_tells_the_prefixes_apart():
    assert dmlcli.find_operator("activation_identity").prefix == "ACTIVATION"
    assert dmlcli.find_operator("DML_OPERATOR_ACTIVATION_TANH").dml_name == "DML_OPERATOR_ACTIVATION_TANH"
    assert dmlcli.find_operator("relu").dml_name == "DML_OPERATOR_ACTIVATION_RELU"
    assert dmlcli.find_operator("ELEMENT_WISE_ADD1").name == "ADD1"
    # The axis-wise activations are shaped operators of the reduction family (tests/test_ops_reduction.py).
    for axis_wise in ("activation_softmax", "ACTIVATION_LOG_SOFTMAX1", "DML_OPERATOR_ACTIVATION_HARDMAX"):
        op = dmlcli.find_operator(axis_wise)
        assert op.family == "reduction" and not op.is_elementwise


# ---------------------------------------------------------------- values: hypothesis against the reference

def float_values(dtype: str):
    width = 32 if dtype == "float32" else 16
    specials = st.sampled_from([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 1e-40 if width == 32 else 6e-8, -3.0,
                                100.0, -100.0, 30.0, -30.0])
    return st.one_of(st.floats(width=width), st.floats(-12, 12, width=width), specials)


def moderate_parameter():
    return st.one_of(st.floats(0.0625, 4, width=32), st.floats(-4, -0.0625, width=32), st.sampled_from([0.5, 1.0, 2.0]))


def any_parameter():
    return st.one_of(st.floats(width=32), st.floats(-4, 4, width=32), st.sampled_from([0.0, -0.0, 1.0, INF, -INF]))


def parameters_for(name: str, draw_any: bool):
    strategy = any_parameter() if draw_any else moderate_parameter()
    fields = [option for option in DECLARED[name][6]]
    return st.fixed_dictionaries({option: strategy for option in fields})


def check_within(name, got: np.ndarray, expected: list[float], dtype: str, *, tolerance=None, where=""):
    op = dmlcli.find_operator(name)
    tolerance = tolerance or op.tolerance
    limit = tolerance.for_dtype(dtype)
    width = _FMT[dtype][2]
    for i, (g_bits, want) in enumerate(zip(element_bits(got), expected)):
        g = value_of_bits(g_bits, dtype)
        if math.isnan(want) or math.isnan(g):
            assert math.isnan(want) and math.isnan(g), f"{name} {where}[{i}]: got {g}, expected {want}"
            continue
        if tolerance.kind == "atol":
            ok = g == want or abs(g - want) <= limit
        else:
            ok = ulp_distance(g_bits, bits_of_value(want, dtype), width) <= limit
        assert ok, f"{name} {dtype} {where}[{i}]: got {g!r}, expected {want!r} (tolerance {tolerance.describe()})"


def check_exact(name, got: np.ndarray, expected, dtype: str, where=""):
    for i, (g_bits, (kind, want)) in enumerate(zip(element_bits(got), expected)):
        if kind == "bits" and math.isnan(value_of_bits(want, dtype)):
            kind, want = "value", NAN  # NaN payloads of computed NaNs are the hardware's (pinned elsewhere)
        if kind == "bits":
            assert g_bits == want, f"{name} {dtype} {where}[{i}]: got bits {g_bits:#x}, expected {want:#x}"
        else:
            g = value_of_bits(g_bits, dtype)
            if math.isnan(want):
                assert math.isnan(g), f"{name} {dtype} {where}[{i}]: got {g}, expected NaN"
            else:
                assert g_bits == bits_of_value(want, dtype), \
                    f"{name} {dtype} {where}[{i}]: got {g!r}, expected {want!r}"


def run(name, *arrays, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return dmlcli.run(name, *arrays, **params)


def newest_types(name):
    return [t.numpy_name for t in dmlcli.find_operator(name).support[0].tensors["InputTensor" if name != "add1"
                                                                                 else "ATensor"].data_types]


APPROX_CASES = [(op, dtype) for op in APPROX for dtype in newest_types(op)]
EXACT_OPS = [op for op in ACTIVATIONS if op not in APPROX]
EXACT_FLOAT_CASES = [(op, dtype) for op in EXACT_OPS for dtype in ("float32", "float16")]
INTEGER_CASES = [(op, dtype) for op in EXACT_OPS for dtype in newest_types(op) if dtype not in ("float32", "float16")]


def test_the_newest_rows_are_covered():
    covered = {(op, d) for op, d in APPROX_CASES + EXACT_FLOAT_CASES + INTEGER_CASES}
    for op in ACTIVATIONS:
        for dtype in newest_types(op):
            assert (op, dtype) in covered
    assert ("activation_shrink", "uint16") in covered and ("activation_relu", "int8") in covered


@pytest.mark.parametrize("name,dtype", APPROX_CASES)
@FAST
@given(data=st.data())
def test_float64_operators_against_the_reference(name, dtype, data):
    values = data.draw(st.lists(float_values(dtype), min_size=1, max_size=24), label="x")
    params = data.draw(parameters_for(name, draw_any=False), label="params")
    x = np.array(values, dtype=dtype)
    got = run(name, x, **params)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    p = {k: float(np.float32(v)) for k, v in params.items()}
    expected = [round_to(APPROX[name](float(v), p), dtype) for v in x.tolist()]
    check_within(name, got, expected, dtype, where=f"params={p} x={x.tolist()}")


@pytest.mark.parametrize("name,dtype", EXACT_FLOAT_CASES)
@FAST
@given(data=st.data())
def test_exact_and_one_rounding_operators_bit_for_bit(name, dtype, data):
    count = data.draw(st.integers(1, 24), label="n")
    arrays = [np.array(data.draw(st.lists(float_values(dtype), min_size=count, max_size=count)), dtype=dtype)
              for _ in range(2 if name in TWO_INPUTS else 1)]
    params = data.draw(parameters_for(name, draw_any=True), label="params")
    got = run(name, *arrays, **params)
    assert got.dtype == np.dtype(dtype) and got.shape == arrays[0].shape
    p = {k: float(np.float32(v)) for k, v in params.items()}
    columns = list(zip(*[a.tolist() for a in arrays]))
    bit_columns = list(zip(*[element_bits(a) for a in arrays]))
    expected = [exact_reference(name, v, b, p, dtype) for v, b in zip(columns, bit_columns)]
    check_exact(name, got, expected, dtype, where=f"params={p} inputs={[a.tolist() for a in arrays]}")
    if name in ("activation_leaky_relu", "activation_parameterized_relu", "activation_shrink"):
        # and so, a fortiori, within the declared tolerance
        computed = [value_of_bits(e[1], dtype) if e[0] == "bits" else e[1] for e in expected]
        check_within(name, got, computed, dtype)


@pytest.mark.parametrize("name,dtype", INTEGER_CASES)
@FAST
@given(data=st.data())
def test_integer_variants_exact_and_wrapping(name, dtype, data):
    info = np.iinfo(dtype)
    edge = st.sampled_from([int(info.min), int(info.max), 0, 1, -1 if info.min < 0 else 2])
    count = data.draw(st.integers(1, 24), label="n")
    arrays = [np.array(data.draw(st.lists(st.one_of(st.integers(int(info.min), int(info.max)), edge),
                                          min_size=count, max_size=count)), dtype=dtype)
              for _ in range(2 if name in TWO_INPUTS else 1)]
    params = data.draw(parameters_for(name, draw_any=True), label="params")
    got = run(name, *arrays, **params)
    assert got.dtype == np.dtype(dtype)
    p = {k: float(np.float32(v)) for k, v in params.items()}
    expected = [integer_reference(name, v, p, dtype) for v in zip(*[a.tolist() for a in arrays])]
    assert got.tolist() == expected, f"params={p} inputs={[a.tolist() for a in arrays]}"


# ---------------------------------------------------------------- special values, by hand

F32_MIN_SUBNORMAL = 2.0**-149


def one(name, value, dtype="float32", **params):
    return run(name, np.array([value], dtype=dtype), **params)[0]


def is_negative_zero(v) -> bool:
    return v == 0 and math.copysign(1.0, float(v)) < 0


def test_special_values():
    assert one("activation_sigmoid", -100.0) == np.float32(round_to(math.exp(-100) / (1 + math.exp(-100)), "float32"))
    assert 0 < one("activation_sigmoid", -100.0) < 2.0**-126  # a float32 subnormal, kept
    assert one("activation_sigmoid", -1000.0) == 0 and one("activation_sigmoid", INF) == 1
    assert one("activation_sigmoid", 100.0) == 1
    assert one("activation_softplus", 100.0) == 100
    assert one("activation_softplus", -100.0) == np.float32(round_to(math.exp(-100), "float32"))
    assert one("activation_softplus", INF) == INF and one("activation_softplus", -INF) == 0
    assert one("activation_elu", -INF) == -1 and one("activation_elu", -INF, alpha=0.5) == -0.5
    assert is_negative_zero(one("activation_elu", -0.0))
    assert one("activation_celu", -INF, alpha=2) == -2 and one("activation_celu", INF) == INF
    assert one("activation_scaled_elu", -INF, alpha=2, gamma=3) == -6
    assert is_negative_zero(one("activation_gelu", -INF)) and one("activation_gelu", INF) == INF
    assert one("activation_gelu", -40.0) == 0 and one("activation_gelu", 40.0) == 40
    assert one("activation_softsign", INF) == 1 and one("activation_softsign", -INF) == -1
    assert is_negative_zero(one("activation_swish", -INF)) and one("activation_swish", INF) == INF
    assert is_negative_zero(one("activation_hard_swish", -INF)) and one("activation_hard_swish", INF) == INF
    assert is_negative_zero(one("activation_hard_swish", -4.0))
    assert one("activation_tanh", INF) == 1 and one("activation_tanh", -INF) == -1
    assert one("activation_tanh", -400.0) == -1
    assert one("activation_scaled_tanh", -INF, alpha=3, beta=1) == -3
    assert one("activation_hard_sigmoid", INF) == 1 and one("activation_hard_sigmoid", -INF) == 0
    assert one("activation_linear", INF, alpha=0.0) != one("activation_linear", INF, alpha=0.0)  # 0*inf: NaN
    assert math.isnan(one("activation_parametric_softplus", NAN))
    for name in APPROX:
        assert math.isnan(one(name, NAN)), name
        assert math.isnan(one(name, NAN, "float16")), name
    # exact ones: signs of zero, NaN, subnormals
    relu_zero = run("activation_relu", np.array([-0.0], np.float32))
    assert element_bits(relu_zero) == [0]
    assert math.isnan(one("activation_relu", NAN)) and math.isnan(one("activation_relu", NAN, "float16"))
    assert one("activation_relu", F32_MIN_SUBNORMAL) == np.float32(F32_MIN_SUBNORMAL)
    assert one("activation_relu", -INF) == 0 and one("activation_relu", INF) == INF
    assert one("activation_thresholded_relu", NAN) == 0 and one("activation_thresholded_relu", 1.0) == 0
    assert one("activation_thresholded_relu", 1.0000001) == np.float32(1.0000001)
    assert is_negative_zero(one("activation_thresholded_relu", -0.0, alpha=-1))
    assert is_negative_zero(one("activation_leaky_relu", -0.0))
    assert math.isnan(one("activation_leaky_relu", NAN))
    assert one("activation_leaky_relu", -F32_MIN_SUBNORMAL * 1000, alpha=0.5) == np.float32(-F32_MIN_SUBNORMAL * 500)
    assert one("activation_shrink", NAN) == 0
    payload = np.array([0x7FC01234], np.uint32).view(np.float32)
    assert element_bits(run("activation_identity", payload)) == [0x7FC01234]
    assert element_bits(run("activation_relu", payload)) == [0x7FC01234]


def test_relu_grad_passes_the_gradient_bits():
    x = np.array([1.0, 0.0, -0.0, -1.0, NAN, INF, F32_MIN_SUBNORMAL], np.float32)
    dy = np.array([-0.0, 5.0, 5.0, 5.0, 5.0, NAN, 7.0], np.float32)
    got = run("activation_relu_grad", x, dy)
    assert element_bits(got)[0] == 0x80000000
    assert got.tolist()[1:5] == [0, 0, 0, 0]
    assert math.isnan(got[5]) and got[6] == 7


# ---------------------------------------------------------------- parameters: defaults and edges

SAMPLE = np.array([-5.0, -2.5, -1.0, -0.25, -0.0, 0.0, 0.3, 1.0, 1.1, 2.5, 7.0], np.float32)


@pytest.mark.parametrize("name", [op for op in ACTIVATIONS if DECLARED[op][6]])
def test_defaults_equal_the_documented_values(name):
    defaults = DECLARED[name][6]
    implicit = run(name, SAMPLE)
    explicit = run(name, SAMPLE, **defaults)
    assert implicit.tobytes() == explicit.tobytes()
    shifted = {option: value + 0.25 for option, value in defaults.items()}
    assert run(name, SAMPLE, **shifted).tobytes() != implicit.tobytes(), "every parameter changes the result"


def test_parameter_edges():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0], np.float32)
    assert run("activation_leaky_relu", x, alpha=0).tolist() == [0, 0, 0, 0.5, 2]
    assert run("activation_leaky_relu", x, alpha=-1).tolist() == [2, 0.5, 0, 0.5, 2]
    got = run("activation_leaky_relu", x, alpha="inf")
    assert got.tolist()[:2] == [-INF, -INF] and got.tolist()[2:] == [0, 0.5, 2]
    assert np.isnan(run("activation_leaky_relu", x, alpha="nan")[:2]).all()
    assert run("activation_thresholded_relu", x, alpha="-inf").tolist() == x.tolist()
    assert run("activation_thresholded_relu", x, alpha="inf").tolist() == [0] * 5
    assert run("activation_hard_sigmoid", x, alpha=0, beta=0.25).tolist() == [0.25] * 5
    assert run("activation_hard_sigmoid", x, alpha=1, beta=-3).tolist() == [0] * 5
    assert run("activation_linear", x, alpha=-2, beta=1).tolist() == [5, 2, 1, 0, -3]
    assert run("activation_scaled_tanh", x, alpha=0).tolist() == [0] * 5
    assert run("activation_softplus", np.float32([0.0]), steepness=0).tolist() == [INF]  # ln 2 / 0
    # Steepness below 1 is allowed (FL 6_4): ln(1 + e^(0.5*2))/0.5
    assert run("activation_softplus", np.float32([2.0]), steepness=0.5)[0] == np.float32(
        round_to(math.log1p(math.e) / 0.5, "float32"))
    assert run("activation_softplus", np.float32([2.0]), steepness=-1)[0] == np.float32(
        round_to(-math.log1p(math.exp(-2.0)), "float32"))
    assert run("activation_swish", x, sigmoid_input_scale=0).tolist() == (x / 2).tolist()
    # CELU with a negative Alpha: -1*expm1(1) below 0, and x alone above
    assert run("activation_celu", np.float32([-1.0, 1.0]), alpha=-1).tolist() == [
        round_to(-math.expm1(1.0), "float32"), 1.0]
    elu = run("activation_elu", x, alpha=0)
    assert elu.tolist() == [0, 0, 0, 0.5, 2] and all(is_negative_zero(v) for v in elu[:2])
    assert run("activation_scaled_elu", x, gamma=0).tolist() == [0] * 5
    assert run("activation_parametric_softplus", x, alpha=2, beta=0).tolist() == [
        round_to(2 * math.log(2), "float32")] * 5
    assert run("activation_hard_swish", x, alpha=0, beta=1).tolist() == x.tolist()
    assert run("activation_hard_swish", x, alpha=0, beta=-1).tolist() == [0] * 5
    # Alpha 0: x/0 is +-inf; 0*expm1(inf) is NaN, 0*expm1(-inf) is -0: IEEE's results
    celu = run("activation_celu", np.float32([1.0, -1.0]), alpha=0)
    assert math.isnan(celu[0]) and celu[1] == 0
    # shrink: negative Threshold: x < -Threshold is tested first
    assert run("activation_shrink", np.float32([0.0, 2.0, -2.0]), threshold=-1, bias=10).tolist() == [10, -8, 8]
    assert run("activation_shrink", x, threshold=0.5, bias=0.5).tolist() == [-1.5, 0, 0, 0, 1.5]
    assert run("activation_shrink", x, threshold="nan").tolist() == [0] * 5
    assert run("activation_shrink", x, threshold="inf").tolist() == [0] * 5


def test_shrink_on_integers_truncates_bias_and_wraps():
    x = np.array([-128, -3, -1, 0, 1, 3, 127], np.int8)
    assert run("activation_shrink", x, bias=2.7, threshold=1).tolist() == [-126, -1, 0, 0, 0, 1, 125]
    assert run("activation_shrink", x, bias=-2.7, threshold=1).tolist() == [126, -5, 0, 0, 0, 5, -127]
    assert run("activation_shrink", x, bias="inf", threshold=0).tolist() == [127, -4, -2, 0, 2, 4, -128]
    assert run("activation_shrink", x, bias="nan", threshold=0).tolist() == x.tolist()
    u = np.array([0, 1, 2, 4294967295], np.uint32)
    assert run("activation_shrink", u, bias=3, threshold=1.5).tolist() == [0, 0, 4294967295, 4294967292]
    assert run("activation_shrink", u, bias=1, threshold=-0.5).tolist() == [1, 0, 1, 4294967294]  # x < 0.5 first
    # the comparisons are exact: 2^24 + 1 > 2^24, though float32(2^24 + 1) is 2^24
    i32 = np.array([16777217, -16777217, 16777216], np.int32)
    assert run("activation_shrink", i32, bias=-1, threshold=16777216).tolist() == [16777218, -16777218, 0]
    assert run("activation_shrink", np.array([2**31 - 1], np.int32), bias=-1, threshold=0).tolist() == [-(2**31)]


def test_parameterized_relu_on_integers_wraps():
    x = np.array([-128, -2, 5, -1], np.int8)
    s = np.array([-1, 100, 3, 0], np.int8)
    assert run("activation_parameterized_relu", x, s).tolist() == [-128, 56, 5, 0]
    x32 = np.array([-(2**31), -3], np.int32)
    s32 = np.array([-1, 2**30], np.int32)
    assert run("activation_parameterized_relu", x32, s32).tolist() == [-(2**31), _wrap(-3 * 2**30, "int32")]


def test_parameterized_relu_broadcasts_its_slope_on_request():
    x = np.array([[-1.0, -2.0], [3.0, -4.0]], np.float32)
    slope = np.array([0.5, 0.25], np.float32)
    assert run("activation_parameterized_relu", x, slope, broadcast=True).tolist() == [[-0.5, -0.5], [3, -1]]
    with pytest.raises(dmlcli.ValidationError):
        run("activation_parameterized_relu", x, slope)


def test_wrong_parameters_are_refused():
    with pytest.raises(dmlcli.InputError, match="alpha"):
        run("activation_sigmoid", SAMPLE, alpha=0.5)
    with pytest.raises(dmlcli.InputError):
        run("activation_elu", SAMPLE, alpha="abc")
    with pytest.raises(dmlcli.InputError):
        run("activation_relu", SAMPLE, steepness=3)


# ---------------------------------------------------------------- ADD1 and its fused activation

FUSED_PARAMS = {name: [o for o in DECLARED["activation_" + name][6]] for name in FUSABLE}


def fused_reference(name: str, s: float, p: dict, dtype: str):
    """The activation's reference on the rounded sum: ('exact', expected tuple) or ('approx', value)."""
    op = "activation_" + name
    if op in APPROX:
        return "approx", round_to(APPROX[op](s, p), dtype)
    return "exact", exact_reference(op, (s,), (bits_of_value(s, dtype),), p, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@FAST
@given(data=st.data())
def test_add1_without_activation_is_one_rounding(dtype, data):
    n = data.draw(st.integers(1, 24))
    a = np.array(data.draw(st.lists(float_values(dtype), min_size=n, max_size=n)), dtype)
    b = np.array(data.draw(st.lists(float_values(dtype), min_size=n, max_size=n)), dtype)
    got = run("add1", a, b)
    expected = [one_rounding(x + y, dtype) for x, y in zip(a.tolist(), b.tolist())]
    check_exact("add1", got, [("value", e) for e in expected], dtype)
    check_within("add1", got, expected, dtype)


@pytest.mark.parametrize("name", FUSABLE)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_add1_with_each_fused_activation(name, dtype, data):
    n = data.draw(st.integers(1, 16))
    a = np.array(data.draw(st.lists(float_values(dtype), min_size=n, max_size=n)), dtype)
    b = np.array(data.draw(st.lists(st.floats(-4, 4, width=16), min_size=n, max_size=n)), dtype)
    params = data.draw(parameters_for("activation_" + name, draw_any=False))
    got = run("add1", a, b, fused_activation=name, **{"fused_" + k: v for k, v in params.items()})
    # the same function as the activation on the rounded sum, bit for bit
    total = run("add1", a, b)
    assert got.tobytes() == run("activation_" + name, total, **params).tobytes()
    # and the independent reference, within the activation's tolerance
    p = {k: float(np.float32(v)) for k, v in params.items()}
    sums = [one_rounding(x + y, dtype) for x, y in zip(a.tolist(), b.tolist())]
    expected = [fused_reference(name, s, p, dtype) for s in sums]
    activation = dmlcli.find_operator("activation_" + name)
    if activation.exactness in ("exact", "one rounding"):
        check_exact(name, got, [e for _, e in expected], dtype)
    else:
        check_within("activation_" + name, got, [e for _, e in expected], dtype, tolerance=activation.tolerance)


def test_add1_fused_parameter_errors_name_the_field():
    a = b = np.float32([1.0, 2.0])
    with pytest.raises(dmlcli.InputError, match="Gamma"):
        run("add1", a, b, fused_activation="elu", fused_gamma=2)
    with pytest.raises(dmlcli.InputError, match="fused-alpha"):
        run("add1", a, b, fused_alpha=2)
    with pytest.raises(dmlcli.InputError, match="fuse"):
        run("add1", a, b, fused_activation="swish")
    with pytest.raises(dmlcli.InputError, match="fuse"):
        run("add1", a, b, fused_activation="parameterized_relu")
    with pytest.raises(dmlcli.InputError):
        run("activation_relu", a, fused_activation="elu")
    assert run("add1", a, b, fused_activation="none").tolist() == [2, 4]
    for spelling in ("ACTIVATION_ELU", "DML_OPERATOR_ACTIVATION_ELU", "35", "Elu"):
        assert run("add1", a, -b * 2, fused_activation=spelling).tolist() == run(
            "activation_elu", -a).tolist()


def test_fused_activation_desc_forms():
    parameter = dmlcli.find_operator("add1").parameters[0]
    assert parameter.field == "FusedActivation" and not parameter.required_in_desc
    assert parameter.options == ("fused_activation", "fused_alpha", "fused_beta", "fused_gamma", "fused_steepness",
                                 "fused_bias", "fused_threshold")
    for form in ({"Type": "ACTIVATION_ELU", "Alpha": 0.5},
                 {"Type": "DML_OPERATOR_ACTIVATION_ELU", "Desc": {"Alpha": 0.5}},
                 {"type": "ACTIVATION_ELU", "desc": {"InputTensor": None, "OutputTensor": None, "Alpha": 0.5}}):
        activation, fields = parameter.parse_desc(form, {})
        assert activation.name == "ELU" and fields == {"Alpha": np.float32(0.5)}
    assert parameter.parse_desc(None, {}) is None
    assert parameter.parse_desc({"Type": "ACTIVATION_RELU"}, {})[1] == {}
    bad = [{"Type": "ACTIVATION_ELU"}, {"Type": "ACTIVATION_ELU", "Alpha": 1, "Beta": 2},
           {"Type": "ACTIVATION_ELU", "Alpha": 1, "InputTensor": {"DataType": "FLOAT32", "Sizes": [1]}},
           {"Type": "ACTIVATION_SWISH", "SigmoidInputScale": 1}, {"Type": "ELEMENT_WISE_ADD"}, {"Alpha": 1},
           {"Type": "ACTIVATION_ELU", "Desc": {"Alpha": 1}, "Alpha": 1}, "ACTIVATION_ELU"]
    for form in bad:
        with pytest.raises(dmlcli.InputError):
            parameter.parse_desc(form, {})


def test_fused_cuda_arguments():
    parameter = dmlcli.find_operator("add1").parameters[0]
    none = parameter.cuda_arguments(None, {})
    assert [(a.c_type, a.name) for a in none] == [("int", "FusedActivationType"), ("float", "FusedAlpha"),
                                                   ("float", "FusedBeta"), ("float", "FusedGamma"),
                                                   ("float", "FusedSteepness"), ("float", "FusedBias"),
                                                   ("float", "FusedThreshold")]
    assert int(none[0].value) == 0
    value = parameter.parse({"fused_activation": "scaled_elu", "fused_gamma": "3"}, {})
    arguments = {a.name: a.value for a in parameter.cuda_arguments(value, {})}
    assert arguments["FusedActivationType"] == 45 and arguments["FusedGamma"] == np.float32(3)
    assert arguments["FusedAlpha"] == np.float32(1.6732)  # SCALED_ELU's own default


def test_cuda_sources_are_generated_and_add1_switch_reuses_each_body():
    from dmlcli.backends.gpu_kernels import module_source, signatures

    add1 = dmlcli.find_operator("add1")
    for name in FUSABLE:
        activation = dmlcli.find_operator("activation_" + name)
        assert f"case {activation.enum_value}: return (float)({activation.cuda_body});" in add1.cuda_helpers
    for op in module.OPERATORS:
        for signature in signatures(op):
            source = module_source(op, signature)
            assert source.count("{") == source.count("}"), (op.name, signature)
            assert op.cuda_body in source
    assert {s for s in signatures(dmlcli.find_operator("activation_shrink"))} >= {
        ("uint8", "uint8"), ("int32", "int32"), ("float16", "float16")}


# ---------------------------------------------------------------- validation grid (a second transcription)

LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL_TYPES = ["FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8", "INT32", "INT16", "INT8", "FLOAT64", "UINT64", "INT64"]
F = {"FLOAT32", "FLOAT16"}
ONE_TO_EIGHT = set(range(1, 9))
CLASSIC_PAGE = [("3_0", ONE_TO_EIGHT, F), ("2_0", {4, 5}, F), ("1_0", {4}, F)]
WITH_INTS = [("5_1", ONE_TO_EIGHT, F | {"INT32", "INT16", "INT8"})] + CLASSIC_PAGE
PAGES = {op: CLASSIC_PAGE for op in ACTIVATIONS}
PAGES.update({
    "activation_relu": WITH_INTS,
    "activation_parameterized_relu": WITH_INTS,
    "activation_relu_grad": [("5_1", ONE_TO_EIGHT, F | {"INT32", "INT16", "INT8"}), ("3_0", ONE_TO_EIGHT, F)],
    "activation_shrink": [("5_1", ONE_TO_EIGHT, F | {"INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"}),
                          ("3_0", ONE_TO_EIGHT, F), ("2_0", {4, 5}, F)],
    "activation_celu": [("3_0", ONE_TO_EIGHT, F)],
    "activation_gelu": [("5_1", ONE_TO_EIGHT, F)],
    "activation_swish": [("6_2", ONE_TO_EIGHT, F)],
    "activation_hard_swish": [("6_2", ONE_TO_EIGHT, F)],
    "add1": [("3_0", ONE_TO_EIGHT, F), ("2_0", {4, 5}, F)],
})


def page_accepts(name, level, type_name, rank) -> bool:
    rows = [row for row in PAGES[name] if LEVELS.index(row[0]) <= LEVELS.index(level)]
    if not rows:
        return False
    _, ranks, types = max(rows, key=lambda row: LEVELS.index(row[0]))
    return type_name in types and rank in ranks


@pytest.mark.parametrize("name", sorted(PAGES))
def test_validation_grid(name):
    inputs = 2 if name in TWO_INPUTS else 1
    mismatches = []
    for level in LEVELS:
        for type_name in ALL_TYPES:
            data_type = parse_data_type(type_name)
            for shape in ((2, 1, 3, 2), (3,), (1, 2, 1, 2, 2), (2, 2)):
                expected = page_accepts(name, level, type_name, len(shape))
                try:
                    plan(name, [(data_type, shape)] * inputs, feature_level=level)
                    accepted = True
                except dmlcli.ValidationError:
                    accepted = False
                if accepted != expected:
                    mismatches.append((level, type_name, len(shape), accepted))
    assert not mismatches, mismatches[:10]


def test_tensors_must_agree():
    with pytest.raises(dmlcli.ValidationError):
        plan("activation_parameterized_relu", [(parse_data_type("FLOAT32"), (2,)), (parse_data_type("FLOAT16"), (2,))])
    with pytest.raises(dmlcli.ValidationError):
        plan("add1", [(parse_data_type("FLOAT32"), (2,)), (parse_data_type("FLOAT32"), (3,))])
    verdict = plan("activation_relu_grad", [(parse_data_type("INT8"), (2, 3))] * 2, feature_level="6_4")
    assert verdict.call.output.name == "OutputGradientTensor"
    assert verdict.lowest_feature_level.short == "5_1"


# ---------------------------------------------------------------- the command line

def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def test_command_line_parameters():
    result = invoke("run", "activation_elu", "[1.5, -3, 7]", "--dtype", "float32", "--alpha", "0.5", "--format", "json")
    assert result.exit_code == 0, result.output
    data = np.array(json.loads(result.output)["data"], np.float32)  # JSON holds the shortest float32 decimals
    assert data.tolist() == [1.5, round_to(0.5 * math.expm1(-3), "float32"), 7.0]
    result = invoke("run", "activation_shrink", "[-2, 0.2, 3]", "--dtype", "float16", "--bias", "1", "--threshold",
                    "0.5", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"dtype": "float16", "shape": [3], "data": [-1.0, 0.0, 2.0]}
    result = invoke("run", "activation_swish", "[2]", "--dtype", "float32", "--sigmoid-input-scale", "0",
                    "--format", "json")
    assert json.loads(result.output)["data"] == [1.0]
    result = invoke("run", "add1", "[1, 2, 3]", "[5, 8, -5]", "--dtype", "float32", "--fused-activation", "elu",
                    "--fused-alpha", "0.5", "--format", "json")
    assert result.exit_code == 0, result.output
    data = np.array(json.loads(result.output)["data"], np.float32)
    assert data.tolist() == [6.0, 10.0, round_to(0.5 * math.expm1(-2), "float32")]
    result = invoke("run", "add1", "[1]", "[2]", "--dtype", "float32", "--fused-activation", "elu", "--fused-beta", "1")
    assert result.exit_code == 2 and "Beta" in result.output
    result = invoke("run", "add1", "[1]", "[2]", "--dtype", "float32", "--fused-activation", "hardmax")
    assert result.exit_code == 2 and "fuse" in result.output
    result = invoke("run", "activation_gelu", "[1]", "--dtype", "float32", "--feature-level", "5_0")
    assert result.exit_code == 3 and "5_1" in result.output
    result = invoke("describe", "activation_hard_swish")
    assert result.exit_code == 0 and "0.2" in result.output and "Alpha" in result.output


# ---------------------------------------------------------------- DxDispatch model

def test_dxdispatch_add1_model(shared_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = shared_dir / "dxdispatch_models" / "dml_element_wise_add1.json"
    result = invoke("dispatch", str(model), "--no-timing")
    assert result.exit_code == 0, result.output
    # [1,2,3] + [5,8,-5] = [6, 10, -2]; ELU(Alpha 0.5): 6, 10, 0.5*(e^-2 - 1) = -0.43233235...
    assert "Resource 'Out': 6, 10, -0.432332" in result.output


def test_dxdispatch_fused_forms_and_errors(shared_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = json.loads((shared_dir / "dxdispatch_models" / "dml_element_wise_add1.json").read_text())
    desc = base["dispatchables"]["add"]["desc"]

    def dispatch(fused):
        if fused is None:
            desc.pop("FusedActivation", None)
        else:
            desc["FusedActivation"] = fused
        path = tmp_path / "model.json"
        path.write_text(json.dumps(base))
        return invoke("dispatch", str(path), "--no-timing")

    result = dispatch({"Type": "DML_OPERATOR_ACTIVATION_RELU", "Desc": {"InputTensor": None, "OutputTensor": None}})
    assert result.exit_code == 0 and "Resource 'Out': 6, 10, 0" in result.output, result.output
    result = dispatch(None)
    assert result.exit_code == 0 and "Resource 'Out': 6, 10, -2" in result.output, result.output
    result = dispatch({"Type": "ACTIVATION_LINEAR", "Alpha": 2, "Beta": 1})
    assert "Resource 'Out': 13, 21, -3" in result.output, result.output
    for bad in ({"Type": "ACTIVATION_LINEAR", "Alpha": 2}, {"Type": "ACTIVATION_SWISH", "SigmoidInputScale": 1},
                {"Type": "ACTIVATION_ELU", "Alpha": 1, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}):
        result = dispatch(bad)
        assert result.exit_code == 2, result.output


# ---------------------------------------------------------------- ONNX node-test vectors

ONNX = sorted((SHARED / "conformance" / "onnx_elementwise").glob("*.json")) if SHARED.is_dir() else []
ONNX_ACTIVATIONS = [p for p in ONNX if json.loads(p.read_text())["op"].startswith("activation_")]


def test_onnx_activation_vectors_are_there(shared_dir):
    assert len(ONNX_ACTIVATIONS) == 34


@pytest.mark.parametrize("path", shared_params(ONNX_ACTIVATIONS), ids=lambda p: p.stem)
def test_onnx_vectors(path):
    case = json.loads(path.read_text())
    inputs = [tensor_from_object(t, where=path.name) for t in case["inputs"]]
    expected = tensor_from_object(case["expected"], where=path.name)
    got = run(case["op"], *inputs, broadcast=case.get("broadcast", False), **case["params"])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    tolerance = case["tolerance"]
    assert np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=tolerance["rtol"],
                       atol=tolerance["atol"], equal_nan=True)
    # the feature level: the case's (types alone) and, with the ranks, this file's transcription
    verdict = dmlcli.validate(case["op"], *inputs, broadcast=case.get("broadcast", False), **case["params"])
    type_name = inputs[0].dtype.name.upper()
    by_types = next(level for level in LEVELS
                    if any(page_accepts(case["op"], level, type_name, rank) for rank in range(1, 9)))
    assert case["directml_support"] == f"DML_FEATURE_LEVEL_{by_types}"
    rank = len(verdict.call.output.shape)
    assert verdict.lowest_feature_level.short == next(
        level for level in LEVELS if page_accepts(case["op"], level, type_name, rank))


# ---------------------------------------------------------------- SOFTPLUS's Steepness below 1: from 6_4

FOUR_D = np.float32([[[[2.0, -1.0]]]])  # 4-D: FLOAT32 at every level


def softplus_reference(x: float, steepness: float) -> float:
    """ln(1 + exp(s*x)) / s in double precision, rounded once to FLOAT32."""
    t = steepness * x
    return round_to((max(t, 0.0) + math.log1p(math.exp(-abs(t)))) / steepness, "float32")


@pytest.mark.parametrize("level", ["1_0", "3_0", "6_2", "6_3"])
def test_softplus_steepness_below_one_is_refused_before_6_4(level):
    with pytest.raises(dmlcli.ValidationError, match=rf"^SOFTPLUS: Steepness 0.5 is less than 1, which DirectML "
                                                     rf"allows from DML_FEATURE_LEVEL_6_4 \(at DML_FEATURE_LEVEL_{level} "
                                                     r"it must be at least 1\); supported from DML_FEATURE_LEVEL_6_4$"):
        run("activation_softplus", FOUR_D, steepness=0.5, feature_level=level)
    for steepness in (1, 3.5):  # 1 and above: every level
        got = run("activation_softplus", FOUR_D, steepness=steepness, feature_level=level)
        assert got.reshape(-1).tolist() == [softplus_reference(v, steepness) for v in (2.0, -1.0)]


@pytest.mark.parametrize("steepness", [0.5, 0.125, 0.999, -2.0])
def test_softplus_steepness_below_one_at_6_4(steepness):
    verdict = dmlcli.validate("activation_softplus", FOUR_D, steepness=steepness)
    assert verdict.lowest_feature_level.short == "6_4"
    got = run("activation_softplus", FOUR_D, steepness=steepness, feature_level="6_4")
    assert got.reshape(-1).tolist() == [softplus_reference(v, steepness) for v in (2.0, -1.0)]


def test_fused_softplus_steepness_is_checked_at_the_level_too():
    """A SOFTPLUS desc fused into another operator's (ADD1's FusedActivation, a recurrent operator's
    ActivationDescs) is DirectML's same desc: Steepness below 1 needs 6_4 there too."""
    a = b = FOUR_D
    with pytest.raises(dmlcli.ValidationError, match=r"^ADD1: FusedActivation SOFTPLUS: Steepness 0.25 is less than "
                                                     r"1, which DirectML allows from DML_FEATURE_LEVEL_6_4 \(at "
                                                     r"DML_FEATURE_LEVEL_6_3 it must be at least 1\); supported from "
                                                     r"DML_FEATURE_LEVEL_6_4$"):
        run("add1", a, b, fused_activation="softplus", fused_steepness=0.25, feature_level="6_3")
    got = run("add1", a, b, fused_activation="softplus", fused_steepness=0.25)
    assert got.reshape(-1).tolist() == [softplus_reference(v, 0.25) for v in (4.0, -2.0)]
    assert run("add1", a, b, fused_activation="softplus", fused_steepness=2, feature_level="2_0").shape == a.shape
    # The lowest level is worked out per call, not kept per operator and tensors: the same ADD1 without the
    # fused activation goes back to ADD1's own 2_0.
    assert dmlcli.validate("add1", a, b).lowest_feature_level.short == "2_0"
    x, w, r = np.ones((1, 2, 1, 3), np.float32), np.ones((1, 1, 4, 3), np.float32), np.ones((1, 1, 4, 4), np.float32)
    with pytest.raises(dmlcli.ValidationError, match=r"^RNN: ActivationDescs SOFTPLUS: Steepness 0.5 is less than 1"):
        dmlcli.run("rnn", x, w, r, activations="softplus(steepness=0.5)", feature_level="6_2")
    assert dmlcli.validate("rnn", x, w, r, activations="softplus(steepness=0.5)").lowest_feature_level.short == "6_4"


def test_softplus_steepness_on_the_command_line_and_in_describe():
    result = invoke("run", "activation_softplus", "[[[[2.0]]]]", "--dtype", "float32", "--steepness", "0.5",
                    "--feature-level", "6_3")
    assert result.exit_code == 3 and "supported from DML_FEATURE_LEVEL_6_4" in result.output, result.output
    result = invoke("run", "activation_softplus", "[2.0]", "--dtype", "float32", "--steepness", "0.5", "-o", "-")
    assert result.exit_code == 0, result.output
    assert np.float32(json.loads(result.stdout)["data"]).tolist() == [softplus_reference(2.0, 0.5)]
    result = invoke("describe", "activation_softplus")
    text = " ".join(result.output.split())
    assert result.exit_code == 0 and "Steepness below 1 is refused before DML_FEATURE_LEVEL_6_4" in text


def test_dxdispatch_softplus_steepness(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tensor = {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 2]}
    model = {"resources": {"X": {"initialValuesDataType": "FLOAT32", "initialValues": [2.0, -1.0]},
                           "Out": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "value": 0}}},
             "dispatchables": {"softplus": {"type": "DML_OPERATOR_ACTIVATION_SOFTPLUS",
                                            "desc": {"InputTensor": tensor, "OutputTensor": tensor,
                                                     "Steepness": 0.5}}},
             "commands": [{"type": "dispatch", "dispatchable": "softplus", "bindings": {"InputTensor": "X",
                                                                                       "OutputTensor": "Out"}},
                          {"type": "print", "resource": "Out"}]}
    path = tmp_path / "softplus.json"
    path.write_text(json.dumps(model))
    result = invoke("dispatch", str(path), "--no-timing")
    assert result.exit_code == 0, result.output
    assert f"Resource 'Out': {softplus_reference(2.0, 0.5):.6g}" in result.output
    result = invoke("dispatch", str(path), "--no-timing", "--feature-level", "6_3")
    assert result.exit_code == 3 and "Steepness 0.5 is less than 1" in result.output, result.output


def test_onnx_softplus_cases_run_through_activation_softplus(shared_dir, tmp_path):
    """The two Softplus cases of ../shared/onnx_operators_complete, mapped onto ACTIVATION_SOFTPLUS with
    Steepness 1 (ONNX's Softplus is ln(exp(x) + 1)), pass within SOFTPLUS's tolerance."""
    import shutil

    from dmlcli.suite import run_suite
    from dmlcli.suite.onnx import TABLE

    cases = sorted((shared_dir / "onnx_operators_complete").glob("onnx__test_softplus*.json"))
    assert len(cases) == 2
    for case in cases:
        shutil.copy(case, tmp_path)
    assert TABLE["Softplus"].directml == "ACTIVATION_SOFTPLUS" and TABLE["Softplus"].fixed == {"Steepness": 1.0}
    results = run_suite([tmp_path], backend="cpu", jobs=1).results
    assert len(results) == 2 and all(r.passed for r in results), [(r.case_id, r.message) for r in results]


# ---------------------------------------------------------------- GELU's CPU kernel (elementwise/gelu.py)

def _gelu_by_libm(x: np.ndarray) -> np.ndarray:
    """0.5*x*erfc(-x/sqrt2) with C's erfc element by element (the kernel's arithmetic before Cody's erfc), as float64."""
    return np.array([0.5 * v * math.erfc(-v * 0.7071067811865476) if v != -INF else -0.0 for v in x.tolist()])


def _gelu_as_before(x: np.ndarray) -> np.ndarray:
    """The kernel's float64 values before the FLOAT32 polynomial and the FLOAT16 table, element by element on Python
    floats: t = -x * (1/sqrt2); below t = 0.5 (and above -4) 0.5*x*(1 - erf(t)) with erf by ERF's series, by Horner's
    rule at the degree its rule picks for the whole tensor (the largest 2t^2 there) and NumPy's exp; C's erfc from
    t = 0.5 on; x itself from t = -4 down; -0.0 for -inf and the input's NaN made quiet."""
    from dmlcli.operators.elementwise.transcendental import _ERF_COEFFICIENTS, _erf_degree

    values = [float(v) for v in x.astype(np.float64).ravel()]
    ts = [-v * 0.7071067811865476 for v in values]
    top = max((2.0 * (t * t) for t in ts if -4.0 < t < 0.5), default=0.0)
    first, rest = _erf_degree(min(top, 0.5)), _erf_degree(top)
    out = []
    for v, t in zip(values, ts):
        if v == -INF:
            out.append(-0.0)
        elif math.isnan(v):
            out.append(v + 0.0)  # quiet
        elif t <= -4.0:
            out.append(0.5 * v * 2.0)
        elif t < 0.5:
            square = t * t
            y = 2.0 * square
            degree = first if y <= 0.5 else rest
            total = y * _ERF_COEFFICIENTS[degree]
            for coefficient in _ERF_COEFFICIENTS[degree - 1:0:-1]:
                total += coefficient
                total *= y
            total += _ERF_COEFFICIENTS[0]
            erf = 1.1283791670955126 * float(np.exp(np.array([-square]))[0]) * t * total
            out.append(0.5 * v * (1.0 - erf))
        else:
            out.append(0.5 * v * math.erfc(t))
    return np.array(out, np.float64).reshape(x.shape)


def _same_bits(got: np.ndarray, expected: np.ndarray) -> bool:
    unsigned = f"u{got.itemsize}"
    return got.dtype == expected.dtype and np.array_equal(got.view(unsigned), expected.view(unsigned))


def _gelu_tail_sample() -> np.ndarray:
    """FLOAT32 x past t = -x/sqrt(2) >= 0.5: a random sample of bit patterns over [-38, -0.707], every value around
    the FLOAT32 result's saturation to -0 (x near -14.36), and the edges."""
    head, end = (int(np.float32(v).view(np.uint32)) for v in (-0.70703125, -38.0))
    patterns = np.random.default_rng(7).integers(head, end, 200_000, dtype=np.uint32)
    saturation = np.arange(int(np.float32(-14.35).view(np.uint32)), int(np.float32(-14.37).view(np.uint32)),
                           dtype=np.uint32)
    edges = np.array([-0.70710677, -0.7071068, -4 * 1.4142135, -5.656854, -5.6568546, -26.5 * 1.4142135, -37.6,
                      -38.5, -1e30, -3.4028235e38, -INF], np.float32)
    return np.concatenate([patterns.view(np.float32), saturation.view(np.float32), edges])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gelu_tail_has_the_bits_of_c_erfc(dtype):
    # Every FLOAT16 value, and FLOAT32 values over the tail: the same bits as with C's erfc element by element
    # (bench/gelu_erfc_check.py runs every FLOAT32 value).
    if dtype is np.float16:
        x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    else:
        x = _gelu_tail_sample()
    x = x[~np.isnan(x) & (x <= -0.70703125)]
    got = module.gelu([x], dtype, {})
    with np.errstate(over="ignore"):
        expected = _gelu_by_libm(x.astype(np.float64)).astype(dtype)
    assert _same_bits(got, expected)


def test_gelu_erfc_within_its_bound_of_c_erfc():
    t = np.concatenate([np.linspace(0.5, 26.5, 20_001), [0.5, 4.0, np.nextafter(4.0, 5.0), 26.5]])
    libm = np.array([math.erfc(v) for v in t.tolist()])
    assert np.max(np.abs(gelu_module._erfc_cody(t) - libm) / libm) < gelu_module._ERFC_APART / 64
    assert gelu_module._erfc_cody(np.array([28.0, 1e300, INF])).tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(gelu_module._erfc_cody(np.array([math.nan])))[0]


def test_gelu_redoes_cody_products_near_a_rounding_boundary(monkeypatch):
    # Past |x| = 1.5, 300 elements and more take Cody's erfc. With its bound widened to 2^-26 (a few FLOAT32 ULP),
    # an erfc off by half of it still gives C's erfc's bits: the products whose rounding it could move are made again
    # with C's erfc (without that step most bits differ).
    cody = gelu_module._erfc_cody
    monkeypatch.setattr(gelu_module, "_ERFC_APART", 2.0**-26)
    monkeypatch.setattr(gelu_module, "_erfc_cody", lambda t: cody(t) * (1 + 2.0**-27))
    x = _gelu_tail_sample()[:20_000]
    x = x[x < -1.5]
    expected = _gelu_by_libm(x.astype(np.float64)).astype(np.float32)
    assert x.size > gelu_module._ELEMENT_BY_ELEMENT_BELOW
    assert _same_bits(module.gelu([x], np.float32, {}), expected)


def test_gelu_float32_redoes_the_values_near_a_rounding_boundary(monkeypatch):
    # The polynomial pushed 2^-30 off and the bound widened to 2^-28: the check still finds every value whose
    # rounding that could move, and the reference makes them again (with the bound left at 2^-43, 1% differ).
    core = gelu_module._core
    monkeypatch.setattr(gelu_module, "_core",
                        lambda v, square, values: np.multiply(core(v, square, values), 1 + 2.0**-30, out=values))
    monkeypatch.setattr(gelu_module, "_APART", 2.0**-28)
    x = (np.random.default_rng(3).standard_normal(20_000) * 0.6).astype(np.float32)
    assert _same_bits(module.gelu([x], np.float32, {}), _gelu_as_before(x).astype(np.float32))


def _gelu_floats(width: int):
    """Finite and special values of one width: plain floats, raw bit patterns (NaN payloads, subnormals), and the
    edges of the kernel's paths (|x| = 1.5, x = 5.66 where erfc is taken as 2, the tail's saturation)."""
    edges = [0.0, -0.0, INF, -INF, NAN, 1.5, -1.5, 5.656854, 5.6568546, -0.7071068, -0.70710677, 3e38, -3e38,
             1e-40, -1e-40, 2.0**-149, -(2.0**-149), 2.0**-24, -14.36, -38.0]
    bits = st.integers(0, (1 << width) - 1).map(
        lambda b: float(np.array([b], f"u{width // 8}").view(f"f{width // 8}")[0]))
    return st.one_of(st.floats(width=width), st.floats(-6.0, 6.0, width=width), bits, st.sampled_from(edges))


@FAST
@given(st.lists(_gelu_floats(32), min_size=1, max_size=80), st.integers(0, 20))
def test_gelu_float32_has_the_bits_of_the_kernel_before(values, normal):
    # Random FLOAT32 tensors (with `normal` pre-activation-like values among them): the same bits as the kernel
    # before, whose series degree depends on the whole tensor.
    spread = np.random.default_rng(normal).standard_normal(normal) * 0.6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.array(values + spread.tolist(), np.float32)
        expected = _gelu_as_before(x).astype(np.float32)
    assert _same_bits(module.gelu([x], np.float32, {}), expected)


@FAST
@given(st.lists(_gelu_floats(16), min_size=1, max_size=80))
def test_gelu_float16_has_the_bits_of_the_kernel_before(values):
    # The FLOAT16 table holds for any tensor: its series degrees (the tensor's) change no FLOAT16 result.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.array(values, np.float16)
        expected = _gelu_as_before(x).astype(np.float16)
    assert _same_bits(module.gelu([x], np.float16, {}), expected)


def test_gelu_every_float16_value():
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16).reshape(256, 256)
    with np.errstate(all="ignore"):
        expected = _gelu_as_before(x).astype(np.float16)
    assert _same_bits(module.gelu([x], np.float16, {}), expected)


def test_gelu_in_blocks_and_views(monkeypatch):
    # A FLOAT32 tensor of several blocks (one element past 5.5, where the series' degree rises for the whole tensor),
    # a strided view and broadcast inputs: the reference's bits in the input's shape.
    monkeypatch.setattr(gelu_module, "_BLOCK", 1000)
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((7, 600)) * 1.5).astype(np.float32)
    x[3, 5] = 5.5
    expected = _gelu_as_before(x).astype(np.float32)
    assert _same_bits(module.gelu([x], np.float32, {}), expected)
    view = x[:, ::3]
    assert _same_bits(module.gelu([view], np.float32, {}), _gelu_as_before(view).astype(np.float32))
    row = np.broadcast_to(x[0], (4, 600))
    got = module.gelu([row], np.float32, {})
    assert got.shape == (4, 600) and _same_bits(got, _gelu_as_before(row).astype(np.float32))
    halves = np.broadcast_to(x[0, ::2].astype(np.float16), (3, 300))
    got = module.gelu([halves], np.float16, {})
    assert got.shape == (3, 300) and _same_bits(got, _gelu_as_before(halves).astype(np.float16))


def test_gelu_other_types_take_the_reference():
    x = np.array([-3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 7.0], np.float32)
    assert np.array_equal(module.gelu([x], np.float64, {}), _gelu_as_before(x))
    assert module.gelu([np.zeros((2, 0), np.float32)], np.float32, {}).shape == (2, 0)


@pytest.mark.parametrize("values", [
    [0.3, -0.2, 2.0], [-3.0, -0.5, -0.1], [-3.0, -2.0], [7.0, 1.0, -0.6], [NAN, 0.4, 3.0], [INF, -INF, 0.0],
    [5.6568546, 5.656854, -0.7071068, -0.70710677], [0.1, -0.7], [40.0, 6.0],
])
def test_gelu_series_degree_without_widening(values):
    # The redo's largest 2t^2 over the tensor, worked out on FLOAT32, is the one the whole float64 tensor gives.
    x = np.array(values, np.float32)
    assert gelu_module._top_factor_float32(x) == gelu_module._top_factor(x.astype(np.float64))
