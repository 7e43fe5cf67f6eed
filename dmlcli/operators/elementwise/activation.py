"""The 21 element-wise DML_OPERATOR_ACTIVATION_* operators, and ELEMENT_WISE_ADD1 with its fused activation.

Sources: ../shared/reference/directml_elementwise.md (B3: fields, formulas, defaults; C row 7: the
WebNN tolerances; D item 3) and the operator pages it cites (MicrosoftDocs/sdk-api at the commits
listed there; windows-ai-docs for GELU, SWISH and HARD_SWISH), whose tensor-support tables are
transcribed below row by row.

Numbers. The CPU kernels are the reference the GPU must match within each entry's tolerance:
exact operators return an input value (or zero) bit for bit; one-rounding ones compute in float32
(FLOAT16 widened exactly, the float32 result rounded to FLOAT16); composite and approximate ones are
evaluated in float64 from the inputs and rounded once to the output type. Integer variants are exact
and wrap. The CUDA bodies follow the same formulas, in double precision for the float64 ones, with
float <-> double conversions in inline PTX so that CuPy's -ftz=true cannot flush float32 subnormals.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOAT16, FLOAT32, FLOATS, INT8, INT16, INT32, TYPES_8, as_bits
from ...feature_levels import level
from ..numerics import compiled_loops
from ..numerics.float_specials import clip_keeps_nan_bits, has_nan, has_zero
from ..table.parameters import FloatParameter, FusedActivationParameter
from ..table.schema import (APPROXIMATE, COMPOSITE, DIMS_1_TO_8, DIMS_4, DIMS_4_TO_5, EXACT, ONE_ROUNDING, Operator,
    Tolerance, rows)
from .gelu import gelu

# The activations that normalise across axes (not element-wise): they live in the reduction family (reduction.py).
AXIS_WISE = ("SOFTMAX", "LOG_SOFTMAX", "HARDMAX", "SOFTMAX1", "LOG_SOFTMAX1", "HARDMAX1")

X = ("InputTensor",)
XO = ("InputTensor", "OutputTensor")
F_INT3 = (FLOAT32, FLOAT16, INT32, INT16, INT8)  # the 5_1 rows of RELU, PARAMETERIZED_RELU, RELU_GRAD


def _same(types, *tensors):
    return {name: types for name in tensors}


# ---------------------------------------------------------------- support tables (the pages, newest row first)

_CLASSIC = rows(  # every 1_0 activation without integer types (each page has these three rows)
    ("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)),
    ("2_0", DIMS_4_TO_5, _same(FLOATS, *XO)),
    ("1_0", DIMS_4, _same(FLOATS, *XO)),
)
_RELU = rows(
    ("5_1", DIMS_1_TO_8, _same(F_INT3, *XO)),
    ("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)),
    ("2_0", DIMS_4_TO_5, _same(FLOATS, *XO)),
    ("1_0", DIMS_4, _same(FLOATS, *XO)),
)
_PRELU_TENSORS = ("InputTensor", "SlopeTensor", "OutputTensor")
_PARAMETERIZED_RELU = rows(
    ("5_1", DIMS_1_TO_8, _same(F_INT3, *_PRELU_TENSORS)),
    ("3_0", DIMS_1_TO_8, _same(FLOATS, *_PRELU_TENSORS)),
    ("2_0", DIMS_4_TO_5, _same(FLOATS, *_PRELU_TENSORS)),
    ("1_0", DIMS_4, _same(FLOATS, *_PRELU_TENSORS)),
)
_GRAD_TENSORS = ("InputTensor", "InputGradientTensor", "OutputGradientTensor")
_RELU_GRAD = rows(  # the page repeats the 3_0 row at 4_0
    ("5_1", DIMS_1_TO_8, _same(F_INT3, *_GRAD_TENSORS)),
    ("4_0", DIMS_1_TO_8, _same(FLOATS, *_GRAD_TENSORS)),
    ("3_0", DIMS_1_TO_8, _same(FLOATS, *_GRAD_TENSORS)),
)
_SHRINK = rows(
    ("5_1", DIMS_1_TO_8, _same(TYPES_8, *XO)),
    ("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)),
    ("2_0", DIMS_4_TO_5, _same(FLOATS, *XO)),
)
_FROM_3_0 = rows(("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)))  # CELU
_FROM_5_1 = rows(("5_1", DIMS_1_TO_8, _same(FLOATS, *XO)))  # GELU
_FROM_6_2 = rows(("6_2", DIMS_1_TO_8, _same(FLOATS, *XO)))  # SWISH, HARD_SWISH
_ABO = ("ATensor", "BTensor", "OutputTensor")
_ADD1 = rows(
    ("3_0", DIMS_1_TO_8, _same(FLOATS, *_ABO)),
    ("2_0", DIMS_4_TO_5, _same(FLOATS, *_ABO)),
)


# ---------------------------------------------------------------- parameters (B3 defaults)

def _alpha(help_text: str, default: float) -> FloatParameter:
    return FloatParameter(field="Alpha", help=help_text, default_value=default)


def _beta(help_text: str, default: float) -> FloatParameter:
    return FloatParameter(field="Beta", help=help_text, default_value=default)


# ELU's and HARD_SIGMOID's come first in the table, so the command line's --alpha and --beta show their text.
_ELU_ALPHA = _alpha("the Alpha of the operator's formula (ELU: the scale of the negative part; 'dmlcli describe OP' "
                    "gives each operator's meaning and default)", 1.0)
_CELU_ALPHA = _alpha("the Alpha of CELU's formula (scale and divisor of the negative part)", 1.0)
_HARD_SIGMOID_ALPHA = _alpha("the slope Alpha of Alpha*x + Beta", 0.2)
_HARD_SIGMOID_BETA = _beta("the Beta of the operator's formula (HARD_SIGMOID: the offset of Alpha*x + Beta; "
                           "'dmlcli describe OP' gives each operator's meaning and default)", 0.5)
_HARD_SWISH_ALPHA = _alpha("the slope Alpha of the hard sigmoid Alpha*x + Beta", float(np.float32(1) / np.float32(6)))
_HARD_SWISH_BETA = _beta("the offset Beta of the hard sigmoid Alpha*x + Beta", 0.5)
_LEAKY_ALPHA = _alpha("the slope Alpha of the negative part", 0.01)
_LINEAR_ALPHA = _alpha("the factor Alpha of Alpha*x + Beta", 1.0)
_LINEAR_BETA = _beta("the offset Beta of Alpha*x + Beta", 0.0)
_PSOFTPLUS_ALPHA = _alpha("the outer factor Alpha of Alpha*ln(1 + exp(Beta*x))", 1.0)
_PSOFTPLUS_BETA = _beta("the inner factor Beta of Alpha*ln(1 + exp(Beta*x))", 1.0)
_SELU_ALPHA = _alpha("the Alpha of Gamma*(Alpha*exp(x) - Alpha)", 1.6732)
_SELU_GAMMA = FloatParameter(field="Gamma", help="the overall scale Gamma", default_value=1.0507)
_STANH_ALPHA = _alpha("the outer factor Alpha of Alpha*tanh(Beta*x)", 1.0)
_STANH_BETA = _beta("the inner factor Beta of Alpha*tanh(Beta*x)", 0.5)
_THRESHOLDED_ALPHA = _alpha("the threshold Alpha: x passes where x > Alpha", 1.0)
_STEEPNESS = FloatParameter(field="Steepness", help="the steepness s of ln(1 + exp(s*x))/s", default_value=1.0)
_SHRINK_BIAS = FloatParameter(field="Bias", help="the amount Bias moved towards zero past the threshold",
                              default_value=0.0)
_SHRINK_THRESHOLD = FloatParameter(field="Threshold", help="the threshold below which |x| gives 0",
                                   default_value=0.5)
_SIGMOID_INPUT_SCALE = FloatParameter(field="SigmoidInputScale", help="the scale s of sigmoid(s*x)",
                                      default_value=1.0)


# ---------------------------------------------------------------- tolerances (section C row 7)

_WEBNN = "WebNN conformance (WPT PrecisionMetrics, from DirectML's list in webnn#265)"
_TOL_ONE = Tolerance("ulp", 1, 2, f"{_WEBNN}: leakyRelu/prelu 1 ULP; FLOAT16 2 as the later WPT leakyRelu")
_TOL_SHRINK = Tolerance("ulp", 1, 2, "dmlcli's choice: one subtraction or addition, as WebNN's sub (1 ULP); "
                                     "FLOAT16 2 as WebNN's later leakyRelu")
_TOL_LINEAR = Tolerance("ulp", 2, 2, f"{_WEBNN}: linear and hardSigmoid 2 ULP")
_TOL_SOFTSIGN = Tolerance("ulp", 3, 3, f"{_WEBNN}: softsign 3 ULP")
_TOL_HARD_SIGMOID = Tolerance(
    "ulp", 2, 2, f"{_WEBNN}: linear and hardSigmoid 2 ULP", floor_float32=2.0 ** -23, floor_float16=2.0 ** -10,
    floor_source="near the root x = -Beta/Alpha = -2.5, Alpha*x + Beta cancels: the product rounded near 0.5 errs "
                 "by up to half an ULP of 0.5 (2^-25 FLOAT32, 2^-12 FLOAT16) and in FLOAT16 Alpha's own rounding "
                 "adds 2.5*|0.2 - half(0.2)| = 1.2e-4; an ULP of 1 (2^-23 FLOAT32, 2^-10 FLOAT16) covers both, "
                 "at the default Alpha and Beta")

# Absolute floors (schema.Tolerance): where a device computing the formula in the output type cancels or
# underflows, its error is absolute and the ULP of the tiny true result measures nothing. Each floor is
# derived from the formula at the defaults of its parameters (a larger Alpha scales it: give --tolerance).
# ULP(1) is 2^-23 in FLOAT32, 2^-10 in FLOAT16 (half that just below 1).
_ULP_OF_ONE = (2.0 ** -23, 2.0 ** -10)
_EXP_MINUS_ONE = ("exp(x) - 1 near x = 0: a device's exp(x) rounded near 1 errs by up to an ULP of 1 (2^-23 FLOAT32, "
                  "2^-10 FLOAT16), which the subtraction keeps in full while the true result goes to 0; times "
                  "|Alpha| (1, the default)")
_TOL_ELU = Tolerance("ulp", 18, 18, f"{_WEBNN}: elu 18 ULP", floor_float32=_ULP_OF_ONE[0],
                     floor_float16=_ULP_OF_ONE[1], floor_source=_EXP_MINUS_ONE)
_TOL_CELU = Tolerance("ulp", 18, 18, "dmlcli's choice: WebNN's elu figure (18 ULP), the same exp(x) - 1 shape, scaled",
                      floor_float32=_ULP_OF_ONE[0], floor_float16=_ULP_OF_ONE[1],
                      floor_source=_EXP_MINUS_ONE.replace("exp(x) - 1 near x = 0", "exp(x/Alpha) - 1 near x = 0"))
_SELU_ALPHA_GAMMA = 1.6732 * 1.0507
_TOL_SCALED_ELU = Tolerance(
    "ulp", 18, 18, "dmlcli's choice: WebNN's elu figure (18 ULP), the same exp(x) - 1 shape, scaled",
    floor_float32=2 * _SELU_ALPHA_GAMMA * _ULP_OF_ONE[0], floor_float16=2 * _SELU_ALPHA_GAMMA * _ULP_OF_ONE[1],
    floor_source="Alpha*exp(x) - Alpha near x = 0: Alpha*exp(x) rounded near Alpha errs by up to an ULP of Alpha "
                 "(an ULP of 1 for Alpha in [1, 2)) on top of exp's own error near 1, and the subtraction keeps "
                 "both while the true result goes to 0; times Gamma: 2*Alpha*Gamma*ULP(1) at the default Alpha "
                 "and Gamma (4.2e-7 FLOAT32, 3.4e-3 FLOAT16)")
_LOG_ONE_PLUS = ("ln(1 + exp(t)) for t < 0: 1 + exp(t) rounded to the output type loses exp(t) below half an ULP of "
                 "1, so a device gives 0 where the true result is up to that; an ULP of 1 (2^-23 FLOAT32, 2^-10 "
                 "FLOAT16) covers it and the logarithm's own error (at Steepness, Alpha and Beta 1, the defaults)")
_TOL_SOFTPLUS = Tolerance("ulp", 18, 18, f"{_WEBNN}: softplus 18 ULP", floor_float32=_ULP_OF_ONE[0],
                          floor_float16=_ULP_OF_ONE[1], floor_source=_LOG_ONE_PLUS)
_TOL_PSOFTPLUS = Tolerance("ulp", 18, 18, "dmlcli's choice: WebNN's softplus figure (18 ULP), the same "
                                          "function, scaled", floor_float32=_ULP_OF_ONE[0],
                           floor_float16=_ULP_OF_ONE[1], floor_source=_LOG_ONE_PLUS)
_TOL_GELU = Tolerance(
    "ulp", 18, 18, f"{_WEBNN}: gelu 18 ULP", floor_float32=3 * 2.0 ** -24, floor_float16=3 * 2.0 ** -11,
    floor_source="1 + erf(x/sqrt(2)) for x < 0 cancels: a device's erf rounded near -1 errs by up to an ULP of 1 "
                 "from below (2^-24 FLOAT32, 2^-11 FLOAT16), and 0.5*x scales that by up to 3 (for x < -6 the "
                 "sum is 0 in either type): 3*2^-24 = 1.8e-7 FLOAT32, 3*2^-11 = 1.5e-3 FLOAT16")
_TOL_SIGMOID = Tolerance("ulp", 34, 10, f"{_WEBNN}: sigmoid 34 ULP (FLOAT32); FLOAT16 10 from the later WPT "
                                        "(the first table's 3 was relaxed)")
# Past x = -ln(max) exp(-x) overflows in the output type and x/(1 + inf) is -0: the true |x|*exp(x) is at most
# ln(max)/max there (2.6e-37 FLOAT32, 1.7e-4 FLOAT16).
_OVERFLOWING_SIGMOID = tuple(2 * float(np.log(np.finfo(t).max)) / float(np.finfo(t).max)
                             for t in (np.float32, np.float16))
_TOL_SWISH = Tolerance("ulp", 34, 10, "dmlcli's choice: WebNN's sigmoid figures (34 ULP FLOAT32, 10 FLOAT16): "
                                      "x times a sigmoid adds one exact-input multiplication",
                       floor_float32=_OVERFLOWING_SIGMOID[0], floor_float16=_OVERFLOWING_SIGMOID[1],
                       floor_source="x*sigmoid(x) for x < -ln(max) (-88.7 FLOAT32, -11.1 FLOAT16): exp(-x) "
                                    "overflows in the output type and x/(1 + inf) is -0, while the true "
                                    "|x|*exp(x) is up to ln(max)/max; twice that (5.2e-37 FLOAT32, 3.4e-4 FLOAT16)")
_TOL_HARD_SWISH = Tolerance(
    "ulp", 4, 4, f"{_WEBNN}: hardSwish 4 ULP", floor_float32=3 * 2.0 ** -24, floor_float16=3 * 2.0 ** -11,
    floor_source="near the root x = -Beta/Alpha = -3, Alpha*x + Beta cancels: the product rounded near 0.5 errs "
                 "by up to an ULP of 0.5 (2^-24 FLOAT32; 2^-11 FLOAT16, Alpha rounded to FLOAT16 included), "
                 "times |x| = 3 (at the default Alpha and Beta)")
_TOL_TANH = Tolerance("atol", 1 / 1024, 1 / 512, f"{_WEBNN}: tanh absolute 1/1024 (FLOAT32), 1/512 (FLOAT16)")
_TOL_SCALED_TANH = Tolerance("ulp", 16, 16, "dmlcli's choice: WebNN's later tanh figure (16 ULP, WPT/servo); "
                                            "Alpha scales the result, so no absolute bound fits every Alpha")
_TOL_ADD = Tolerance("ulp", 1, 1, f"{_WEBNN}: add 1 ULP. With a FusedActivation, that activation's own "
                                  "tolerance applies instead")


# ---------------------------------------------------------------- NumPy kernels

def _as64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _out(values, out_dtype) -> np.ndarray:
    """float64 (or float32) values rounded once to the output type."""
    return np.asarray(values).astype(out_dtype, copy=False)


def _zero(x) -> np.ndarray:
    return np.zeros((), x.dtype)


def _sigmoid64(t):
    return 1.0 / (1.0 + np.exp(-t))


def _softplus64(t):
    # ln(1 + exp(t)) without overflow: max(t, 0) + log1p(exp(-|t|)); NaN stays NaN.
    return np.where(t > 0, t, 0.0) + np.log1p(np.exp(-np.abs(t)))


def _hard_sigmoid64(v, alpha, beta):
    t = np.multiply(v, np.float64(alpha))
    np.add(t, np.float64(beta), out=t)  # in place: one array of the tensor's size, not three
    # np.clip in place where it keeps a NaN as it is (a probe) and t holds no -0.0: the one tie it may settle
    # otherwise (max(0, -0.0) must stay -0.0). Else np.minimum / np.maximum, which return a NaN operand itself,
    # in one pass each, where np.where with a mask that changes element by element is several times slower.
    if clip_keeps_nan_bits(t.dtype) and not has_zero(t, negative=True):
        return np.clip(t, 0.0, 1.0, out=t)
    m = np.minimum(t, 1.0)  # min(t, 1), NaN kept
    if has_zero(m, negative=True):
        return np.where(m < 0.0, 0.0, m)  # max(0, m), NaN kept, -0.0 kept
    return np.maximum(m, 0.0)


def relu(inputs, out_dtype, params):
    (x,) = inputs
    if x.dtype.kind != "f":
        return np.maximum(x, _zero(x)).astype(out_dtype, copy=False)  # integers compare exactly
    loops = compiled_loops.active()
    computed = None if loops is None else loops.relu(x)
    if computed is not None:
        return computed.astype(out_dtype, copy=False)
    if clip_keeps_nan_bits(x.dtype) or not has_nan(x):
        # A clip to [+0, +inf] is max(0, x) exactly, in one pass at memory speed, NaN kept bit for bit where
        # np.clip returns it as it is (else without NaN), but for -0.0, which must give +0.0 (a tie np.clip may
        # settle either way): a -0.0 in its output shows that.
        clipped = np.clip(x, _zero(x), np.array(np.inf, x.dtype))
        if not has_zero(clipped, negative=True):
            return clipped.astype(out_dtype, copy=False)
    keep = ~(x <= 0)  # positives and NaN
    # The kept elements' bits, else +0.0: an AND with an all-ones or all-zeros mask (NaN payloads and all).
    # Branch-free: np.where with a random mask runs about five times slower.
    bits = as_bits(x)
    mask = np.negative(keep.astype(bits.dtype))
    return np.bitwise_and(bits, mask).view(x.dtype).astype(out_dtype, copy=False)


def identity(inputs, out_dtype, params):
    (x,) = inputs
    return np.array(x, dtype=out_dtype, copy=True)


def thresholded_relu(inputs, out_dtype, params):
    (x,) = inputs
    return np.where(x > params["Alpha"], x, _zero(x)).astype(out_dtype, copy=False)


def relu_grad(inputs, out_dtype, params):
    x, dy = inputs
    return np.where(x > 0, dy, _zero(dy)).astype(out_dtype, copy=False)


def leaky_relu(inputs, out_dtype, params):
    (x,) = inputs
    xf = x.astype(np.float32)
    with np.errstate(all="ignore"):
        return _out(np.where(xf >= 0, xf, xf * params["Alpha"]), out_dtype)


def parameterized_relu(inputs, out_dtype, params):
    x, slope = inputs
    if x.dtype.kind != "f":  # integers: exact, the product wraps in the tensor's type
        return np.where(x >= 0, x, x * slope).astype(out_dtype, copy=False)
    xf, sf = x.astype(np.float32), slope.astype(np.float32)
    with np.errstate(all="ignore"):
        return _out(np.where(xf >= 0, xf, xf * sf), out_dtype)


def _integer_bias(bias) -> int:
    """SHRINK's Bias for an integer tensor: truncated toward zero, saturated to int64, NaN as 0."""
    value = float(bias)
    if math.isnan(value):
        return 0
    if value >= 2.0**63:
        return 2**63 - 1
    if value <= -(2.0**63):
        return -(2**63)
    return int(value)


def shrink(inputs, out_dtype, params):
    (x,) = inputs
    bias, threshold = params["Bias"], params["Threshold"]
    if x.dtype.kind != "f":
        xd, t = x.astype(np.float64), np.float64(threshold)  # exact: integers up to 32 bits, a float32
        b = np.int64(_integer_bias(bias))
        xi = x.astype(np.int64)
        with np.errstate(all="ignore"):
            plus, minus = (xi + b).astype(out_dtype, copy=False), (xi - b).astype(out_dtype, copy=False)
        return np.where(xd < -t, plus, np.where(xd > t, minus, np.zeros((), out_dtype)))
    xf = x.astype(np.float32)
    with np.errstate(all="ignore"):
        return _out(np.where(xf < -threshold, xf + bias, np.where(xf > threshold, xf - bias, np.float32(0))),
                    out_dtype)


def linear(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return _out(np.float64(params["Alpha"]) * _as64(x) + np.float64(params["Beta"]), out_dtype)


def hard_sigmoid(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return _out(_hard_sigmoid64(_as64(x), params["Alpha"], params["Beta"]), out_dtype)


def hard_swish(inputs, out_dtype, params):
    (x,) = inputs
    v = _as64(x)
    with np.errstate(all="ignore"):
        h = _hard_sigmoid64(v, params["Alpha"], params["Beta"])
        return _out(np.where(h == 0.0, np.copysign(0.0, v), v * h), out_dtype)


def softsign(inputs, out_dtype, params):
    (x,) = inputs
    v = _as64(x)
    with np.errstate(all="ignore"):
        quotient = v / (1.0 + np.abs(v))
        infinite = np.isinf(v)
        if infinite.any():  # the limit, +-1, only where some element needs it (inf/inf is NaN)
            quotient = np.where(infinite, np.copysign(1.0, v), quotient)
        return _out(quotient, out_dtype)


def elu(inputs, out_dtype, params):
    (x,) = inputs
    v = _as64(x)
    with np.errstate(all="ignore"):
        return _out(np.where(v >= 0.0, v, np.float64(params["Alpha"]) * np.expm1(v)), out_dtype)


def celu(inputs, out_dtype, params):
    (x,) = inputs
    v, a = _as64(x), np.float64(params["Alpha"])
    with np.errstate(all="ignore"):
        positive = np.where(0.0 >= v, 0.0, v)  # max(0, x), NaN kept
        q = a * np.expm1(v / a)
        negative = np.where(0.0 <= q, 0.0, q)  # min(0, q), NaN kept
        return _out(positive + negative, out_dtype)


def scaled_elu(inputs, out_dtype, params):
    (x,) = inputs
    v, a, g = _as64(x), np.float64(params["Alpha"]), np.float64(params["Gamma"])
    with np.errstate(all="ignore"):
        return _out(np.where(v > 0.0, g * v, g * (a * np.expm1(v))), out_dtype)


def sigmoid(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return _out(_sigmoid64(_as64(x)), out_dtype)


def swish(inputs, out_dtype, params):
    (x,) = inputs
    v = _as64(x)
    with np.errstate(all="ignore"):
        s = _sigmoid64(np.float64(params["SigmoidInputScale"]) * v)
        return _out(np.where(s == 0.0, np.copysign(0.0, v), v * s), out_dtype)


def softplus(inputs, out_dtype, params):
    (x,) = inputs
    s = np.float64(params["Steepness"])
    with np.errstate(all="ignore"):
        return _out(_softplus64(s * _as64(x)) / s, out_dtype)


def parametric_softplus(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return _out(np.float64(params["Alpha"]) * _softplus64(np.float64(params["Beta"]) * _as64(x)), out_dtype)


def tanh(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return _out(np.tanh(_as64(x)), out_dtype)


def scaled_tanh(inputs, out_dtype, params):
    (x,) = inputs
    with np.errstate(all="ignore"):
        return _out(np.float64(params["Alpha"]) * np.tanh(np.float64(params["Beta"]) * _as64(x)), out_dtype)


# ---------------------------------------------------------------- CUDA helpers
#
# Float activations take the value as dml_f32 and return dml_f32 (one-rounding and exact ones, on
# the prelude's IEEE float32 operations) or float (the float64 ones, narrowed by hand). Each body is
# one call, and ADD1's switch makes the very same calls, so the two compute one function.

def _horner(coefficients: tuple[str, ...]) -> str:
    """CUDA lines that evaluate p(t) by Horner's rule, one FMA a coefficient, the highest degree's first."""
    steps = "".join(f"    p = __fmaf_rn(p, t, {c});\n" for c in coefficients[1:])
    return f"    float p = {coefficients[0]};\n" + steps


# Numerical Recipes' erfcc: erfc(z) = t exp(p(t) - z^2), t = 1 / (1 + z/2), relative error below 1.2e-7 at every
# z >= 0 (FLOAT32 GELU).
_ERFCC = ("0.17087277f", "-0.82215223f", "1.48851587f", "-1.13520398f", "0.27886807f", "-0.18628806f", "0.09678418f",
          "0.37409196f", "1.00002368f", "-1.26551223f")
# The same form of degree 6 for FLOAT16 GELU: a least-squares fit on Chebyshev nodes of log(erfc(z) / t) + z^2 for z
# up to 6, relative error about 3e-6.
_GELU_HALF_ERFC = ("-0.07221402f", "0.5016234f", "-1.1232476f", "0.7960336f", "0.12038261f", "1.0463208f",
                   "-1.2688965f")


_COMMON_CUDA = r"""
// float <-> double through the prelude's PTX: the compiler's conversions follow -ftz and would flush
// float32 subnormals.
__device__ __forceinline__ double dml_activation_widen(float f) { return dml_widen(f); }
__device__ __forceinline__ float dml_activation_narrow(double d) { return dml_narrow(d); }
__device__ __forceinline__ double dml_activation_value(dml_f32 x) { return dml_activation_widen(x.v); }
__device__ __forceinline__ bool dml_activation_isinf(double v) {
    return (__double_as_longlong(v) & 0x7fffffffffffffffLL) == 0x7ff0000000000000LL;
}
__device__ __forceinline__ double dml_activation_sigmoid(double t) { return 1.0 / (1.0 + exp(-t)); }
__device__ __forceinline__ double dml_activation_softplus(double t) {
    return (t > 0.0 ? t : 0.0) + log1p(exp(-fabs(t)));
}
__device__ __forceinline__ double dml_activation_hard_sigmoid(double v, float Alpha, float Beta) {
    const double t = dml_activation_widen(Alpha) * v + dml_activation_widen(Beta);
    const double m = t > 1.0 ? 1.0 : t;
    return m < 0.0 ? 0.0 : m;
}
"""


_CUDA = {
    "RELU": r"""
template <typename T> __device__ __forceinline__ T dml_relu_apply(T x) { return (x > 0 || x != x) ? x : T{0}; }
""",
    "THRESHOLDED_RELU": r"""
__device__ __forceinline__ dml_f32 dml_thresholded_relu_apply(dml_f32 x, float Alpha) {
    return x > Alpha ? x : dml_f32{0.0f};
}
""",
    "RELU_GRAD": r"""
template <typename T> __device__ __forceinline__ T dml_relu_grad_apply(T x, T dy) { return x > 0 ? dy : T{0}; }
""",
    "LEAKY_RELU": r"""
__device__ __forceinline__ dml_f32 dml_leaky_relu_apply(dml_f32 x, float Alpha) { return x >= 0 ? x : x * Alpha; }
""",
    "PARAMETERIZED_RELU": r"""
__device__ __forceinline__ dml_f32 dml_parameterized_relu_apply(dml_f32 x, dml_f32 slope) {
    return x >= 0 ? x : x * slope;
}
template <typename T> __device__ __forceinline__ T dml_parameterized_relu_apply(T x, T slope) {
    return x >= 0 ? x : (T)((unsigned long long)(long long)x * (unsigned long long)(long long)slope);
}
""",
    "SHRINK": r"""
__device__ __forceinline__ dml_f32 dml_shrink_apply(dml_f32 x, float Bias, float Threshold) {
    return x < -dml_f32{Threshold} ? x + Bias : (x > Threshold ? x - Bias : dml_f32{0.0f});
}
__device__ __forceinline__ long long dml_shrink_integer_bias(float Bias) {
    if (Bias != Bias) return 0LL;
    if (Bias >= 9223372036854775808.0f) return 0x7fffffffffffffffLL;
    if (Bias <= -9223372036854775808.0f) return -0x7fffffffffffffffLL - 1LL;
    return (long long)Bias;
}
template <typename T> __device__ __forceinline__ T dml_shrink_apply(T x, float Bias, float Threshold) {
    const double v = (double)x;
    const double t = dml_activation_widen(Threshold);
    const unsigned long long b = (unsigned long long)dml_shrink_integer_bias(Bias);
    if (v < -t) return (T)((unsigned long long)(long long)x + b);
    if (v > t) return (T)((unsigned long long)(long long)x - b);
    return T{0};
}
""",
    "LINEAR": r"""
__device__ __forceinline__ float dml_linear_apply(dml_f32 x, float Alpha, float Beta) {
    return dml_activation_narrow(dml_activation_widen(Alpha) * dml_activation_value(x) + dml_activation_widen(Beta));
}
""",
    "HARD_SIGMOID": r"""
__device__ __forceinline__ float dml_hard_sigmoid_apply(dml_f32 x, float Alpha, float Beta) {
    return dml_activation_narrow(dml_activation_hard_sigmoid(dml_activation_value(x), Alpha, Beta));
}
""",
    "HARD_SWISH": r"""
__device__ __forceinline__ float dml_hard_swish_apply(dml_f32 x, float Alpha, float Beta) {
    const double v = dml_activation_value(x);
    const double h = dml_activation_hard_sigmoid(v, Alpha, Beta);
    return dml_activation_narrow(h == 0.0 ? copysign(0.0, v) : v * h);
}
""",
    "SOFTSIGN": r"""
__device__ __forceinline__ float dml_softsign_apply(dml_f32 x) {
    const double v = dml_activation_value(x);
    return dml_activation_narrow(dml_activation_isinf(v) ? copysign(1.0, v) : v / (1.0 + fabs(v)));
}
""",
    "ELU": r"""
// x < 0 and a normal float32 (or -inf): float32 arithmetic on CUDA's expm1f (1 ULP), at most 2 ULP in all against
// 18 (the double path ran at 0.67 of the H200's copy); x >= 0, NaN and subnormal inputs (-ftz would flush them)
// in double precision as on the CPU.
__device__ __forceinline__ float dml_elu_apply(dml_f32 x, float Alpha) {
    const unsigned int bits = __float_as_uint(x.v);
    if ((bits & 0x80000000u) != 0u && (bits & 0x7f800000u) != 0u && (bits & 0x7fffffffu) <= 0x7f800000u) {
        return dml_mul(Alpha, expm1f(x.v));
    }
    const double v = dml_activation_value(x);
    return dml_activation_narrow(v >= 0.0 ? v : dml_activation_widen(Alpha) * expm1(v));
}
""",
    "CELU": r"""
__device__ __forceinline__ float dml_celu_apply(dml_f32 x, float Alpha) {
    const double v = dml_activation_value(x);
    const double a = dml_activation_widen(Alpha);
    const double positive = 0.0 >= v ? 0.0 : v;
    const double q = a * expm1(v / a);
    const double negative = 0.0 <= q ? 0.0 : q;
    return dml_activation_narrow(positive + negative);
}
""",
    "SCALED_ELU": r"""
__device__ __forceinline__ float dml_scaled_elu_apply(dml_f32 x, float Alpha, float Gamma) {
    const double v = dml_activation_value(x);
    const double a = dml_activation_widen(Alpha);
    const double g = dml_activation_widen(Gamma);
    return dml_activation_narrow(v > 0.0 ? g * v : g * (a * expm1(v)));
}
""",
    "GELU": r"""
// 0.5 * x * erfc(-x / sqrt(2)) in float32 (issue 21: in double it ran at 0.37 of the copy on an H100). erfc has no
// cancellation where 1 + erf has it (x < 0), and the argument's rounding (2^-24 relative) costs about 2t^2 ULP of
// erfc(t) for large t = -x/sqrt(2), where the result is far under the absolute floor (1.8e-7) anyway: within
// 18 ULP or the floor everywhere. Subnormal inputs keep the double path (-ftz would flush them).
// FLOAT16 (w 16): 0.5 x erfc(-x/sqrt 2) as t exp(p(t) - z^2) / 2, z = |x|/sqrt 2, t = 1/(1 + z/2), with p a degree-6
// least-squares fit on Chebyshev nodes of log(erfc(z)/t) + z^2 for z up to 6 (the form of Numerical Recipes' erfcc;
// relative error about 3e-6, where a FLOAT16 ULP is 2^-10 and GELU(x) rounds to -0 or x past |x| = 6), on the
// hardware's reciprocal and exponential: within one FLOAT16 ULP of the CPU's value for every FLOAT16 input (a NumPy
// model of these lines gave 124 of 65536 one ULP off, none further; tests/test_gpu.py checks it on the GPU). About
// 20 instructions a value, where erfcc's degree 9 and the subnormal-keeping __expf and __fdividef took 39 and held
// the kernel to 0.84 of the H200's copy. m is Phi(-|x|): x < 0 gives x m (-inf as -65504: -0, the limit), x >= 0
// x (1 - m) (+inf gives inf, NaN NaN).
__device__ __forceinline__ float dml_gelu_half(float v) {
    const float z = fabsf(v) * 0.70710678118654752f;
    const float t = dml_rcp_ftz(__fmaf_rn(0.5f, z, 1.0f));
""" + _horner(_GELU_HALF_ERFC) + r"""    const float m = t * dml_ex2_ftz(__fmaf_rn(__fmaf_rn(-z, z, p), 1.4426950408889634f, -1.0f));
    return v < 0.0f ? fmaxf(v, -65504.0f) * m : v * (1.0f - m);
}
// FLOAT32 for -12.5 <= x <= 9 (normal): the same erfcc, its exponent exact to float32's precision twice over (z^2
// split as hi + lo by an FMA, the rounding of P - hi kept by Knuth's TwoSum) and CUDA's expf (2 ULP): within a third
// of GELU's rule (18 ULP, or 3 * 2^-24 absolutely) of the CPU's value, where erfcf held the kernel to 0.77 of the
// H200's copy. Past 9, erfc(-x/sqrt 2) is 2 less 1e-19 and the product x itself; below -12.5 (a result near
// float32's smallest normal) and for subnormal inputs, NaN and -inf the erfcf and double paths below stay.
__device__ __forceinline__ float dml_gelu_single(float v) {
    const float z = fabsf(v) * 0.70710678118654752f;
    // Numerical Recipes' erfcc (a Chebyshev fit, relative error below 1.2e-7 at every z >= 0): erfc(z) = t exp(p -
    // z^2), t = 1 / (1 + z/2), p by Horner's rule.
    const float t = __fdividef(1.0f, __fmaf_rn(0.5f, z, 1.0f));
""" + _horner(_ERFCC) + r"""    const float hi = __fmul_rn(z, z);
    const float lo = __fmaf_rn(z, z, -hi);  // z^2 - hi, exactly
    const float a = __fsub_rn(p, hi);
    const float b = __fsub_rn(a, p);
    const float rounding = __fadd_rn(__fsub_rn(p, __fsub_rn(a, b)), __fsub_rn(-hi, b));  // (p - hi) - a, exactly
    const float tail = __fmul_rn(t, __fmul_rn(expf(a), __fadd_rn(1.0f, __fsub_rn(rounding, lo))));  // erfc(z)
    const float half = __fmul_rn(0.5f, v);
    return signbit(v) ? __fmul_rn(half, tail) : __fsub_rn(v, __fmul_rn(half, tail));
}
__device__ __forceinline__ float dml_gelu_apply(dml_f32 x, int w) {
    if (w == 16) return dml_gelu_half(x.v);
    const unsigned int bits = __float_as_uint(x.v);
    if ((bits & 0x7f800000u) == 0u && (bits & 0x007fffffu) != 0u) {  // subnormal: -ftz would flush it
        const double v = dml_activation_value(x);
        return dml_activation_narrow(0.5 * v * erfc(-v * 0.7071067811865476));
    }
    if (x.v > 9.0f) return x.v;
    if (x.v >= -12.5f) return dml_gelu_single(x.v);
    if (bits == 0xff800000u) return -0.0f;  // -inf * erfc(+inf) would be NaN; the limit is -0
    return dml_mul(dml_mul(0.5f, x.v), erfcf(dml_mul(-x.v, 0.70710678118654752f)));
}
""",
    "SIGMOID": r"""
// Where the result is a normal float32 (x > -87: exp(-x) finite, the result above 2^-126), float32 arithmetic on
// CUDA's expf (2 ULP): about 4 ULP in all, against 34 (FLOAT32) and 10 FLOAT16 ULP; the double path (a fraction of
// the H200's memory bandwidth: 0.72 of the copy in FLOAT32, 0.38 in FLOAT16) for the rest, NaN included.
// FLOAT16 (w 16): the hardware's exponential and reciprocal (about 2^-21 relative in all, for the arguments a FLOAT16
// value gives), against 10 FLOAT16 ULP (2^-10 relative each): IEEE division held it to 0.77 of the copy, the
// subnormal-keeping __expf and __fdividef to 0.82 (13 instructions a value; 6 now). The .ftz forms flush only what
// FLOAT16 cannot hold: exp(-x) under 2^-126 (x > 87) gives 1, a result under 2^-126 gives 0, as they round anyway.
__device__ __forceinline__ float dml_sigmoid_apply(dml_f32 x, int w) {
    if (w == 16) return dml_rcp_ftz(1.0f + dml_ex2_ftz(x.v * -1.4426950408889634f));
    if (x.v > -87.0f) return (1.0f / (1.0f + dml_f32{expf(-x.v)})).v;
    return dml_activation_narrow(dml_activation_sigmoid(dml_activation_value(x)));
}
""",
    "SWISH": r"""
__device__ __forceinline__ float dml_swish_apply(dml_f32 x, float SigmoidInputScale) {
    const double v = dml_activation_value(x);
    const double s = dml_activation_sigmoid(dml_activation_widen(SigmoidInputScale) * v);
    return dml_activation_narrow(s == 0.0 ? copysign(0.0, v) : v * s);
}
""",
    "SOFTPLUS": r"""
__device__ __forceinline__ float dml_softplus_apply(dml_f32 x, float Steepness) {
    const double s = dml_activation_widen(Steepness);
    return dml_activation_narrow(dml_activation_softplus(s * dml_activation_value(x)) / s);
}
""",
    "PARAMETRIC_SOFTPLUS": r"""
__device__ __forceinline__ float dml_parametric_softplus_apply(dml_f32 x, float Alpha, float Beta) {
    const double t = dml_activation_widen(Beta) * dml_activation_value(x);
    return dml_activation_narrow(dml_activation_widen(Alpha) * dml_activation_softplus(t));
}
""",
    "TANH": r"""
__device__ __forceinline__ float dml_tanh_apply(dml_f32 x) {
    return dml_activation_narrow(tanh(dml_activation_value(x)));
}
""",
    "SCALED_TANH": r"""
__device__ __forceinline__ float dml_scaled_tanh_apply(dml_f32 x, float Alpha, float Beta) {
    const double t = dml_activation_widen(Beta) * dml_activation_value(x);
    return dml_activation_narrow(dml_activation_widen(Alpha) * tanh(t));
}
""",
    "IDENTITY": "",
}


# ---------------------------------------------------------------- notes

_NAN_INF = ("Special values follow the formula in IEEE arithmetic (NaN gives NaN, infinities their limits); "
            "float32 subnormals are kept (DirectML on D3D hardware may flush them to zero).")
_FLOAT64 = ("Evaluated in float64 from the inputs and rounded once to the output type, so the result is the "
            "correctly rounded value but for rare ties; DirectML documents no error bound (the tolerance is "
            "what dmlcli checks against).")
_INTEGER_51 = ("Integer tensors (INT32, INT16, INT8, from DML_FEATURE_LEVEL_5_1) are exact; a product wraps in the "
               "tensor's type.")
_FUSABLE = "May be fused into ELEMENT_WISE_ADD1 (--fused-activation) as its FusedActivation."


def _activation(name, enum_value, summary, formula, introduced, support, kernel, cuda_body, *, exactness,
                tolerance=None, parameters=(), notes=(), inputs=X, output="OutputTensor", cuda_names=(),
                fusable=True, level_rule=None, slope=None) -> Operator:
    tensors = inputs + (output,)
    return Operator(
        name=name, enum_value=enum_value, family="activation", summary=summary, formula=formula,
        introduced=level(introduced), inputs=inputs, output=output, support=support, same_data_type=tensors,
        same_sizes=tensors, cpu_kernel=kernel, cuda_body=cuda_body, prefix="ACTIVATION", parameters=parameters,
        in_place=True, cuda_names=cuda_names, cuda_helpers=_COMMON_CUDA + _CUDA[name],
        notes=tuple(notes) + ((_FUSABLE,) if fusable else ()), exactness=exactness, tolerance=tolerance,
        level_rule=level_rule, largest_slope=slope,
    )


# SOFTPLUS's Steepness below 1: refused before 6_4 (the page: 'This value cannot be less than 1'), accepted from it
# (microsoft/DirectML Releases.md, DirectML 1.15.0: FL 6.4 updated ACTIVATION_SOFTPLUS 'to allow Steepness < 1').
STEEPNESS_BELOW_ONE_SINCE = level("6_4")


def softplus_level_rule(call, feature_level) -> str | None:
    steepness = call.parameters["Steepness"]
    if steepness < 1 and feature_level < STEEPNESS_BELOW_ONE_SINCE:
        return (f"Steepness {_STEEPNESS.describe(steepness)} is less than 1, which DirectML allows from "
                f"{STEEPNESS_BELOW_ONE_SINCE} (at {feature_level} it must be at least 1)")
    return None


# Each activation's largest slope sup |f'(x)| (Operator.largest_slope), from its formula, for its typed fields: how far
# it carries a change of its input (a sum bound through a fused activation, a recurrence's error from step to step).
# None: it jumps, and no slope bounds that.
def _slope_one(fields) -> float:
    return 1.0


def _slope_alpha(fields) -> float:
    """LINEAR, HARD_SIGMOID: |Alpha|."""
    return abs(float(fields["Alpha"]))


def _slope_alpha_or_one(fields) -> float:
    """ELU (Alpha exp(x) below 0), LEAKY_RELU: the larger of 1 and |Alpha|."""
    return max(1.0, abs(float(fields["Alpha"])))


def _slope_alpha_beta(fields) -> float:
    """SCALED_TANH, PARAMETRIC_SOFTPLUS: |Alpha x Beta|."""
    return abs(float(fields["Alpha"]) * float(fields["Beta"]))


def _slope_scaled_elu(fields) -> float:
    return abs(float(fields["Gamma"])) * max(1.0, abs(float(fields["Alpha"])))


def _slope_sigmoid(fields) -> float:
    return 0.25


def _slope_celu(fields) -> float | None:
    """exp(x / Alpha) below 0: at most 1 for Alpha > 0, unbounded for Alpha < 0."""
    return 1.0 if fields["Alpha"] > 0 else None


def _slope_gelu(fields) -> float:
    return 1.13  # Phi(x) + x phi(x) peaks at x = sqrt(2): 1.1289


def _slope_swish(fields) -> float:
    return 1.1  # sigmoid(t) + t sigmoid(t) (1 - sigmoid(t)) peaks at t = 2.40: 1.0998, whatever the scale


def _slope_hard_swish(fields) -> float:
    """2 (Alpha x + Beta) - Beta where the hard sigmoid is between 0 and 1, 1 above, 0 below."""
    beta = float(fields["Beta"])
    return max(1.0, abs(beta), abs(2.0 - beta))


def _shrink_slope(fields) -> float | None:
    """SHRINK jumps by |Threshold - Bias| at +-Threshold; slope 1 where they are equal (no jump)."""
    return 1.0 if fields["Bias"] == fields["Threshold"] else None


ACTIVATIONS: tuple[Operator, ...] = (
    _activation(
        "ELU", 35, "Exponential linear unit: x where x >= 0, else Alpha*(exp(x) - 1).",
        "f(x) = x if x >= 0, else Alpha * (exp(x) - 1)", "1_0", _CLASSIC, elu, "dml_elu_apply(x, Alpha)",
        exactness=APPROXIMATE, tolerance=_TOL_ELU, parameters=(_ELU_ALPHA,),
        notes=(_FLOAT64, "exp(x) - 1 is evaluated as expm1(x): the same value, without cancellation near 0. "
               "ELU(-inf) = -Alpha; -0.0 stays -0.0 (x >= 0 holds).", _NAN_INF,
               "On the GPU, a normal negative x is computed in float32 with CUDA's expm1f (1 ULP; at most 2 ULP in "
               "all, far within the tolerance); the rest in double precision as on the CPU."),
        slope=_slope_alpha_or_one,
    ),
    _activation(
        "HARD_SIGMOID", 37, "Hard sigmoid: Alpha*x + Beta clamped to [0, 1].",
        "f(x) = max(0, min(Alpha * x + Beta, 1))", "1_0", _CLASSIC, hard_sigmoid,
        "dml_hard_sigmoid_apply(x, Alpha, Beta)", exactness=COMPOSITE, tolerance=_TOL_HARD_SIGMOID,
        parameters=(_HARD_SIGMOID_ALPHA, _HARD_SIGMOID_BETA),
        notes=(_FLOAT64, "NaN gives NaN: dmlcli's min and max keep a NaN (D3D's min/max would return the other "
               "operand, 0 or 1, so DirectML hardware may differ).", _NAN_INF),
        slope=_slope_alpha,
    ),
    _activation(
        "IDENTITY", 38, "Copies every element unchanged.", "f(x) = x", "1_0", _CLASSIC, identity, "x",
        exactness=EXACT,
        notes=("Bit for bit: -0.0, NaN payloads and subnormals are copied as they are. (Not ELEMENT_WISE_IDENTITY, "
               "which has ScaleBias: the bare name 'identity' means that one; write activation_identity.)",
               "DirectML's page describes InputTensor as 'the output tensor to write the results to' (a copy "
               "slip, reference D item 7); it is the input."),
        slope=_slope_one,
    ),
    _activation(
        "LEAKY_RELU", 39, "Leaky rectified linear unit: x where x >= 0, else Alpha*x.",
        "f(x) = x if x >= 0, else Alpha * x", "1_0", _CLASSIC, leaky_relu, "dml_leaky_relu_apply(x, Alpha)",
        exactness=ONE_ROUNDING, tolerance=_TOL_ONE, parameters=(_LEAKY_ALPHA,),
        notes=("Alpha*x is one correctly rounded float32 multiplication (FLOAT16 inputs widened exactly, the "
               "float32 product rounded to FLOAT16). -0.0 stays -0.0; NaN gives NaN.",),
        slope=_slope_alpha_or_one,
    ),
    _activation(
        "LINEAR", 40, "Linear function: Alpha*x + Beta.", "f(x) = Alpha * x + Beta", "1_0", _CLASSIC, linear,
        "dml_linear_apply(x, Alpha, Beta)", exactness=COMPOSITE, tolerance=_TOL_LINEAR,
        parameters=(_LINEAR_ALPHA, _LINEAR_BETA),
        notes=("DirectML's page gives Alpha and Beta no default; dmlcli takes Alpha 1 and Beta 0 (the identity "
               "line, except that -0.0 + 0 gives +0.0).", _FLOAT64,
               "Alpha*x is exact in float64, so the only double rounding is the addition's."),
        slope=_slope_alpha,
    ),
    _activation(
        "PARAMETERIZED_RELU", 42, "Parametric ReLU: x where x >= 0, else SlopeTensor's element times x.",
        "f(x, slope) = x if x >= 0, else slope * x", "1_0", _PARAMETERIZED_RELU, parameterized_relu,
        "dml_parameterized_relu_apply(x, slope)", exactness=ONE_ROUNDING, tolerance=_TOL_ONE,
        inputs=("InputTensor", "SlopeTensor"), cuda_names=("x", "slope"), fusable=False,
        notes=("slope*x is one correctly rounded float32 multiplication (FLOAT16 via float32). -0.0 stays "
               "-0.0; NaN gives NaN.", _INTEGER_51,
               "SlopeTensor must have InputTensor's DataType and Sizes (broadcast it with --broadcast, as "
               "DirectML does with zero strides)."),
    ),
    _activation(
        "PARAMETRIC_SOFTPLUS", 43, "Parametric softplus: Alpha*ln(1 + exp(Beta*x)).",
        "f(x) = Alpha * ln(1 + exp(Beta * x))", "1_0", _CLASSIC, parametric_softplus,
        "dml_parametric_softplus_apply(x, Alpha, Beta)", exactness=APPROXIMATE, tolerance=_TOL_PSOFTPLUS,
        parameters=(_PSOFTPLUS_ALPHA, _PSOFTPLUS_BETA),
        notes=("DirectML's page gives Alpha and Beta no default; dmlcli takes 1 and 1 (plain softplus).",
               _FLOAT64, "ln(1 + exp(t)) is evaluated as max(t, 0) + log1p(exp(-|t|)), so exp never overflows: "
               "f(100) = 100*Alpha, not inf.", _NAN_INF),
        slope=_slope_alpha_beta,
    ),
    _activation(
        "RELU", 44, "Rectified linear unit: max(0, x).", "f(x) = max(0, x)", "1_0", _RELU, relu,
        "dml_relu_apply(x)", exactness=EXACT,
        notes=("RELU(-0.0) is +0.0 (the 0 of max(0, x); DirectML leaves max of two zeros to the hardware). "
               "NaN gives NaN, as in ONNX and NumPy's maximum; D3D's max returns the non-NaN operand, so "
               "DirectML hardware may give 0.", _INTEGER_51),
        slope=_slope_one,
    ),
    _activation(
        "SCALED_ELU", 45, "Scaled ELU (SELU): Gamma*x where x > 0, else Gamma*(Alpha*exp(x) - Alpha).",
        "f(x) = Gamma * x if x > 0, else Gamma * (Alpha * exp(x) - Alpha)", "1_0", _CLASSIC, scaled_elu,
        "dml_scaled_elu_apply(x, Alpha, Gamma)", exactness=APPROXIMATE, tolerance=_TOL_SCALED_ELU,
        parameters=(_SELU_ALPHA, _SELU_GAMMA),
        notes=("Defaults are the page's 'typical' 1.6732 and 1.0507 (SELU's constants to 5 digits; ONNX's Selu "
               "uses 1.67326319... and 1.05070102...: pass them for SELU exactly).", _FLOAT64,
               "Alpha*exp(x) - Alpha is evaluated as Alpha*expm1(x): the same value, without cancellation. "
               "-0.0 takes the second branch and gives -0.0.", _NAN_INF),
        slope=_slope_scaled_elu,
    ),
    _activation(
        "SCALED_TANH", 46, "Scaled hyperbolic tangent: Alpha*tanh(Beta*x).", "f(x) = Alpha * tanh(Beta * x)",
        "1_0", _CLASSIC, scaled_tanh, "dml_scaled_tanh_apply(x, Alpha, Beta)", exactness=APPROXIMATE,
        tolerance=_TOL_SCALED_TANH, parameters=(_STANH_ALPHA, _STANH_BETA), notes=(_FLOAT64, _NAN_INF),
        slope=_slope_alpha_beta,
    ),
    _activation(
        "SIGMOID", 47, "Logistic sigmoid: 1/(1 + exp(-x)).", "f(x) = 1 / (1 + exp(-x))", "1_0", _CLASSIC,
        sigmoid, "dml_sigmoid_apply(x, W)", exactness=APPROXIMATE, tolerance=_TOL_SIGMOID,
        notes=(_FLOAT64, "exp(-x) may overflow to inf in float64 (x < -709): 1/inf gives 0, the limit; "
               "sigmoid(-100) is a float32 subnormal, kept.", _NAN_INF,
               "On the GPU, FLOAT32 x > -87 (a normal float32 result) is computed in float32 with CUDA's expf (2 "
               "ULP; about 4 ULP in all, far within the tolerance), the rest in double precision as on the CPU; "
               "FLOAT16 in float32 with the hardware's exponential and reciprocal (PTX's ex2.approx.ftz and "
               "rcp.approx.ftz: about 2^-21 relative, where a FLOAT16 ULP is 2^-10), within one FLOAT16 ULP of the "
               "CPU's value."),
        slope=_slope_sigmoid,
    ),
    _activation(
        "SOFTPLUS", 49, "Softplus: ln(1 + exp(Steepness*x)) / Steepness.",
        "f(x) = ln(1 + exp(Steepness * x)) / Steepness", "1_0", _CLASSIC, softplus,
        "dml_softplus_apply(x, Steepness)", exactness=APPROXIMATE, tolerance=_TOL_SOFTPLUS, parameters=(_STEEPNESS,),
        level_rule=softplus_level_rule,
        notes=("Steepness below 1 is refused before DML_FEATURE_LEVEL_6_4 (the page: 'This value cannot be less "
               "than 1') and accepted from 6_4 (microsoft/DirectML Releases.md, DirectML 1.15.0: FL 6.4 updated "
               "ACTIVATION_SOFTPLUS 'to allow Steepness < 1'; the page was not updated); the same holds for a "
               "SOFTPLUS fused into another operator's desc. No source bounds it below at 6_4: Steepness 0 divides "
               "by zero (inf), a negative one mirrors the curve. The absolute floor is an ULP of 1 at Steepness 1; "
               "the division by a Steepness below 1 scales that error by 1/Steepness (pass --tolerance).", _FLOAT64,
               "ln(1 + exp(t)) is evaluated as max(t, 0) + log1p(exp(-|t|)), so exp never overflows: "
               "softplus(100) = 100, not inf.", _NAN_INF),
        slope=_slope_one,
    ),
    _activation(
        "SOFTSIGN", 50, "Softsign: x/(1 + |x|).", "f(x) = x / (1 + abs(x))", "1_0", _CLASSIC, softsign,
        "dml_softsign_apply(x)", exactness=COMPOSITE, tolerance=_TOL_SOFTSIGN,
        notes=(_FLOAT64, "softsign(+-inf) = +-1, the limit (inf/inf in IEEE arithmetic would be NaN, which "
               "DirectML hardware may give).", "NaN gives NaN."),
        slope=_slope_one,
    ),
    _activation(
        "TANH", 51, "Hyperbolic tangent.", "f(x) = (1 - exp(-2x)) / (1 + exp(-2x)) = tanh(x)", "1_0", _CLASSIC,
        tanh, "dml_tanh_apply(x)", exactness=APPROXIMATE, tolerance=_TOL_TANH,
        notes=("Computed as tanh(x), the page's quotient's value without its overflow (exp(-2x) is inf for "
               "x < -355 in float64; tanh(-inf) = -1).", _FLOAT64, _NAN_INF,
               "Not ELEMENT_WISE_TANH (with ScaleBias): the bare name 'tanh' means that one; write activation_tanh."),
        slope=_slope_one,
    ),
    _activation(
        "THRESHOLDED_RELU", 52, "Thresholded ReLU: x where x > Alpha, else 0.",
        "f(x) = x if x > Alpha, else 0", "1_0", _CLASSIC, thresholded_relu,
        "dml_thresholded_relu_apply(x, Alpha)", exactness=EXACT, parameters=(_THRESHOLDED_ALPHA,),
        notes=("NaN gives 0: the comparison x > Alpha is false, as the formula reads (ONNX's ThresholdedRelu "
               "agrees). The 0 is +0.0; an x that passes is copied bit for bit.",),
    ),
    _activation(
        "SHRINK", 90, "Shrink: x + Bias where x < -Threshold, x - Bias where x > Threshold, else 0.",
        "f(x) = x + Bias if x < -Threshold, else x - Bias if x > Threshold, else 0", "2_0", _SHRINK, shrink,
        "dml_shrink_apply(x, Bias, Threshold)", exactness=ONE_ROUNDING, tolerance=_TOL_SHRINK,
        parameters=(_SHRINK_BIAS, _SHRINK_THRESHOLD),
        notes=("Integer types (INT32, INT16, INT8, UINT32, UINT16, UINT8) from DML_FEATURE_LEVEL_5_1, as the "
               "page's table has them; the feature-level history says 2_1 (reference D item 3). dmlcli follows "
               "the operator's own table: a call it accepts is one DirectML documents for that level.",
               "With a negative Threshold both conditions can hold: x < -Threshold is tested first, as the "
               "older page's pseudocode and ONNX's Shrink do (the newer page lists the branches the other way "
               "round without saying which wins).",
               "NaN gives 0 (both comparisons are false, as the formula reads; PyTorch's hardshrink would keep "
               "the NaN). Float results: one float32 addition or subtraction, FLOAT16 via float32.",
               "Integer tensors: the comparisons with -Threshold and Threshold are exact; Bias is truncated "
               "toward zero (HLSL's float-to-int conversion; NaN as 0, saturated to the int64 range), then "
               "added or subtracted with wrap-around in the tensor's type. DirectML's pages say nothing of "
               "this.",
               "Default Bias 0 and Threshold 0.5 as the current page ('typical default'; an older page "
               "suggested Bias 1.0)."),
        slope=_shrink_slope,
    ),
    _activation(
        "CELU", 128, "Continuously differentiable ELU: max(0, x) + min(0, Alpha*(exp(x/Alpha) - 1)).",
        "f(x) = max(0, x) + min(0, Alpha * (exp(x / Alpha) - 1))", "3_0", _FROM_3_0, celu,
        "dml_celu_apply(x, Alpha)", exactness=APPROXIMATE, tolerance=_TOL_CELU, parameters=(_CELU_ALPHA,),
        notes=(_FLOAT64, "exp(x/Alpha) - 1 is evaluated as expm1(x/Alpha). max and min keep a NaN. Alpha 0 "
               "divides by zero, and the formula's IEEE result is returned (NaN for x >= 0, 0 below).", _NAN_INF),
        slope=_slope_celu,
    ),
    _activation(
        "RELU_GRAD", 129, "ReLU's backpropagation: InputGradientTensor where InputTensor > 0, else 0.",
        "dX = (X > 0) ? dY : 0   (X = InputTensor, dY = InputGradientTensor)", "3_0", _RELU_GRAD, relu_grad,
        "dml_relu_grad_apply(x, dy)", exactness=EXACT, inputs=("InputTensor", "InputGradientTensor"),
        output="OutputGradientTensor", cuda_names=("x", "dy"), fusable=False,
        notes=("dY is copied bit for bit where X > 0; elsewhere (X <= 0, -0.0 or NaN) the result is +0.0.",
               _INTEGER_51.replace("; a product wraps in the tensor's type", "")),
    ),
    _activation(
        "GELU", 157, "Gaussian error linear unit: 0.5*x*(1 + erf(x/sqrt(2))).",
        "f(x) = 0.5 * x * (1 + erf(x / sqrt(2)))", "5_1", _FROM_5_1, gelu, "dml_gelu_apply(x, W)",
        exactness=APPROXIMATE, tolerance=_TOL_GELU,
        notes=("The erf form only (ONNX's approximate='tanh' GELU is not this operator).",
               "On the CPU evaluated in float64 and rounded once. On the GPU, in float32 with erfc by Numerical "
               "Recipes' erfcc (relative error below 1.2e-7): FLOAT32 from -12.5 to 9 with its exponent kept exact "
               "(a split square, TwoSum) and CUDA's expf, within a third of the rule; FLOAT16 by a degree-6 fit of "
               "the same form (relative error about 3e-6) on the hardware's reciprocal and exponential, within one "
               "FLOAT16 ULP of the CPU's value. FLOAT32 past 9 gives x; "
               "below -12.5 CUDA's erfcf (within the 18 ULP or the absolute floor); subnormal inputs in float64.",
               "Evaluated as 0.5*x*erfc(-x/sqrt(2)), the same value without cancellation for negative x. "
               "GELU(-inf) = -0.0, the limit (-inf * 0 in IEEE arithmetic would be NaN, which DirectML "
               "hardware may give).", _NAN_INF),
        slope=_slope_gelu,
    ),
    _activation(
        "SWISH", 167, "Swish (SiLU): x*sigmoid(SigmoidInputScale*x).",
        "f(x) = x * sigmoid(SigmoidInputScale * x)", "6_2", _FROM_6_2, swish,
        "dml_swish_apply(x, SigmoidInputScale)", exactness=APPROXIMATE, tolerance=_TOL_SWISH,
        parameters=(_SIGMOID_INPUT_SCALE,), fusable=False,
        notes=(_FLOAT64, "Where the sigmoid is 0 the result is a zero of x's sign, so swish(-inf) = -0.0, the "
               "limit (-inf * 0 would be NaN in IEEE arithmetic).", _NAN_INF),
        slope=_slope_swish,
    ),
    _activation(
        "HARD_SWISH", 168, "Hard swish: x*max(0, min(Alpha*x + Beta, 1)).",
        "f(x) = x * max(0, min(Alpha * x + Beta, 1))", "6_2", _FROM_6_2, hard_swish,
        "dml_hard_swish_apply(x, Alpha, Beta)", exactness=COMPOSITE, tolerance=_TOL_HARD_SWISH,
        parameters=(_HARD_SWISH_ALPHA, _HARD_SWISH_BETA), fusable=False,
        notes=("Defaults Alpha = float32(1/6) and Beta = 0.5 (ONNX HardSwish). The page gives Alpha a 'typical "
               "default' of 0.2, copied from HARD_SIGMOID, and Beta none; with 0.2 it would not be hard swish.",
               _FLOAT64, "Where the hard sigmoid is 0 the result is a zero of x's sign, so hard_swish(-inf) = "
               "-0.0, the limit (-inf * 0 would be NaN in IEEE arithmetic). NaN gives NaN.", _NAN_INF),
        slope=_slope_hard_swish,
    ),
)

# The activations DirectML can fuse (W dml-fused-activations), in that page's order. SWISH, HARD_SWISH,
# PARAMETERIZED_RELU (a second tensor) and RELU_GRAD are not among them.
FUSABLE_NAMES = ("LINEAR", "SIGMOID", "HARD_SIGMOID", "TANH", "SCALED_TANH", "RELU", "LEAKY_RELU", "THRESHOLDED_RELU",
                 "ELU", "CELU", "SCALED_ELU", "SOFTPLUS", "PARAMETRIC_SOFTPLUS", "SOFTSIGN", "IDENTITY", "SHRINK",
                 "GELU")
_BY_NAME = {op.name: op for op in ACTIVATIONS}
FUSABLE = tuple(_BY_NAME[name] for name in FUSABLE_NAMES)

# RELU's rule as a device function, dml_relu_apply (x where x > 0 or x is NaN, else +0), for a kernel that applies a
# fused RELU in its own pass (CONVOLUTION's depthwise kernel, GEMM's FLOAT16 finish). Applied before a rounding it
# gives what it gives after it: a rounding keeps a value's sign, and a NaN stays a NaN.
RELU_DEVICE = _CUDA["RELU"]


def fused_relu(params) -> bool:
    """Whether the call's fused activation (its FusedActivation field) is RELU."""
    activation = params.get("FusedActivation")
    return activation is not None and activation[0].name == "RELU"


FUSED_ACTIVATION = FusedActivationParameter(
    field="FusedActivation",
    help="an activation applied to the sum (--fused-activation NAME), with its FLOAT fields as --fused-alpha, "
         "--fused-beta, ... (each the activation's own default when left out)",
    activations=FUSABLE,
)


def _add1_cuda() -> tuple[str, str]:
    """ADD1's helpers (every fusable activation's, then a switch by DML_OPERATOR_TYPE value) and its body.

    The switch's arguments carry the activations' field names, so each case is that activation's own
    cuda_body, converted to float as the kernel generator converts a body's result.
    """
    fields = FUSED_ACTIVATION.float_fields
    declared = ", ".join(f"float {name}" for name in fields)
    cases = "\n".join(f"    case {op.enum_value}: return (float)({op.cuda_body});" for op in FUSABLE)
    unused = " ".join(f"(void){name};" for name in fields)
    helpers = _COMMON_CUDA + "".join(_CUDA[op.name] for op in FUSABLE) + f"""
__device__ __forceinline__ dml_f32 dml_add1_round(dml_f32 s, int W) {{
    // FLOAT16: the float32 sum of two halves rounded to half (exactly the correctly rounded half sum).
    return W == 16 ? dml_f32{{dml_half_to_float(dml_float_to_half(s.v))}} : s;
}}
__device__ __forceinline__ float dml_add1_activate(dml_f32 x, int W, int FusedActivationType, {declared}) {{
    (void)W;  // the sum's width in bits, as an activation's own kernel has it (FLOAT16 paths: GELU, SIGMOID)
    {unused}
    switch (FusedActivationType) {{
{cases}
    default: return x.v;
    }}
}}
"""
    body = (f"dml_add1_activate(dml_add1_round(a + b, W), W, FusedActivationType, "
            f"{', '.join('Fused' + name for name in fields)})")
    return helpers, body


def add1(inputs, out_dtype, params):
    a, b = inputs
    with np.errstate(all="ignore"):  # overflow to inf is the IEEE result
        total = (a.astype(np.float32) + b.astype(np.float32)).astype(out_dtype, copy=False)  # one addition, then the type
    fused = params.get("FusedActivation")
    if fused is None:
        return total
    activation, fields = fused
    return activation.cpu_kernel([total], np.dtype(out_dtype), fields)


_ADD1_HELPERS, _ADD1_BODY = _add1_cuda()

ADD1 = Operator(
    name="ADD1", enum_value=89, family="activation",
    summary="a + b, then optionally a fused activation (FusedActivation) on the sum.",
    formula="f(a, b) = activation(a + b)   (activation: the identity when FusedActivation is NULL)",
    introduced=level("2_0"), inputs=("ATensor", "BTensor"), support=_ADD1, same_data_type=_ABO, same_sizes=_ABO,
    cpu_kernel=add1, cuda_body=_ADD1_BODY, cuda_helpers=_ADD1_HELPERS, parameters=(FUSED_ACTIVATION,),
    in_place=True, exactness=ONE_ROUNDING, tolerance=_TOL_ADD,
    notes=(
        "The sum is one correctly rounded float32 addition, rounded to the output type (FLOAT16: the same as "
        "adding in half precision); the fused activation then runs on that rounded sum, exactly as the "
        "activation operator would on it.",
        "Without FusedActivation the result is ELEMENT_WISE_ADD's (1 ULP tolerance); with one, that activation's "
        "exactness and tolerance apply to the result (dmlcli's conformance checks use them).",
        "Fusable activations (dml-fused-activations): " + ", ".join(n.lower() for n in FUSABLE_NAMES) + ". "
        "\"Fused activation may be used only when the output datatype is FLOAT16 or FLOAT32\": ADD1 has no "
        "other types.",
        "In a DxDispatch model: \"FusedActivation\": {\"Type\": \"ACTIVATION_ELU\", \"Alpha\": 0.5} (or with "
        "\"Desc\"); its InputTensor and OutputTensor must be absent or null, its FLOAT fields present.",
    ),
)

OPERATORS: tuple[Operator, ...] = ACTIVATIONS + (ADD1,)
