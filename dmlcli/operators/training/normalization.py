"""Batch normalization's training forms and the normalization gradients (family "training"):
BATCH_NORMALIZATION_TRAINING, BATCH_NORMALIZATION_GRAD, BATCH_NORMALIZATION_TRAINING_GRAD and
LOCAL_RESPONSE_NORMALIZATION_GRAD.

Sources: DirectML's pages (MicrosoftDocs/sdk-api, sdk-api-src/content/directml/ns-directml-dml_<name>_operator_desc.md,
the stored versions: batch_normalization_training 7f3e3abf, batch_normalization_grad 70e6b394 and b5f9f4f4 (the
same rules), batch_normalization_training_grad 7f3e3abf, local_response_normalization_grad 2b9dc59b): fields,
formulas, broadcasting rules, constraints and support tables; DirectML.h at 0x6400 for the DESCs and the
DML_OPERATOR_TYPE values (LOCAL_RESPONSE_NORMALIZATION_GRAD 144, BATCH_NORMALIZATION_GRAD 146,
BATCH_NORMALIZATION_TRAINING 151, BATCH_NORMALIZATION_TRAINING_GRAD 152). LOCAL_RESPONSE_NORMALIZATION_GRAD's page
gives no formula: it is the exact derivative of dmlcli's LOCAL_RESPONSE_NORMALIZATION (operators/normalization),
whose window and scaling it reuses.

One arithmetic rule for the module: the FLOAT32 and FLOAT16 inputs are widened exactly to FLOAT64, every formula
(the means, variances and sums too) is computed there, and each output is rounded once to its type, as dmlcli's
composite operators are (README "Numbers"); the GPU runs the same kernel in double precision, so the two agree but
for the order of the sums' additions, far below a FLOAT32 ULP. NaN propagates.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOATS
from ...feature_levels import level
from ..normalization.entries import (CROSS_CHANNEL_LRN, EPSILON, FUSED_ACTIVATION, LOCAL_SIZE, LRN_ALPHA, LRN_BETA,
                                     LRN_BIAS, check_broadcastable, lrn_window, window_sum)
from ..table.schema import APPROXIMATE, COMPOSITE, DIMS_1_TO_8, DIMS_4, Operator, SumBound, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes

FAMILY = "training"
_TRAINING_INPUTS = ("InputTensor", "ScaleTensor", "BiasTensor", "FusedAddTensor")
_TRAINING_OUTPUTS = ("OutputTensor", "OutputMeanTensor", "OutputVarianceTensor")
_GRAD_INPUTS = ("InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor")
_GRAD_OUTPUTS = ("OutputGradientTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor")
_STATISTICS = ("MeanTensor", "VarianceTensor", "ScaleTensor")
_LRN_GRAD_TENSORS = ("InputTensor", "InputGradientTensor", "OutputGradientTensor")


def _floats(level_name: str, dims, tensors):
    return (level_name, dims, {name: FLOATS for name in tensors})


# ---------------------------------------------------------------- support tables (the pages: one section each)

_TRAINING_ROWS = rows(_floats("4_1", DIMS_1_TO_8, _TRAINING_INPUTS + _TRAINING_OUTPUTS))
_GRAD_ROWS = rows(_floats("3_1", DIMS_1_TO_8, _GRAD_INPUTS + _GRAD_OUTPUTS))
_TRAINING_GRAD_ROWS = rows(_floats("4_1", DIMS_1_TO_8, _GRAD_INPUTS + _GRAD_OUTPUTS))
_LRN_GRAD_ROWS = rows(_floats("3_1", DIMS_4, _LRN_GRAD_TENSORS))


# ---------------------------------------------------------------- shape rules

def _same_sizes(query: ShapeQuery, names: tuple[str, ...]) -> None:
    """The given tensors among `names` have the first one's Sizes (the pages' "must have the same Sizes")."""
    given = [name for name in names if name in query.shapes]
    first = query.shape(given[0])
    for name in given[1:]:
        if query.shape(name) != first:
            raise RuleViolation(f"{given[0]} Sizes {describe_sizes(first)} and {name} Sizes "
                                f"{describe_sizes(query.shape(name))} differ; {', '.join(names[:-1])} and "
                                f"{names[-1]} must have the same Sizes")


def _per_channel_sizes(query: ShapeQuery, names: tuple[str, ...]) -> tuple[int, ...]:
    """The Sizes the per-channel tensors share: the input's DimensionCount, each size 1 (broadcast, and a
    dimension the statistics reduce) or the input's."""
    shape = query.shape("InputTensor")
    for name in names:
        check_broadcastable(query, name, shape)
    _same_sizes(query, names)
    return query.shape(names[0])


def batch_normalization_training_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    per_channel = _per_channel_sizes(query, ("ScaleTensor", "BiasTensor"))
    _same_sizes(query, ("InputTensor", "FusedAddTensor"))
    return {"OutputTensor": shape, "OutputMeanTensor": per_channel, "OutputVarianceTensor": per_channel}


def batch_normalization_grad_shape(query: ShapeQuery) -> dict:
    _same_sizes(query, ("InputTensor", "InputGradientTensor"))
    per_channel = _per_channel_sizes(query, _STATISTICS)
    return {"OutputGradientTensor": query.shape("InputTensor"), "OutputScaleGradientTensor": per_channel,
            "OutputBiasGradientTensor": per_channel}


def lrn_grad_shape(query: ShapeQuery) -> dict:
    _same_sizes(query, ("InputTensor", "InputGradientTensor"))
    return {"OutputGradientTensor": query.shape("InputTensor")}


# ---------------------------------------------------------------- how the tolerances grow

def reduced_axes(per_channel_shape) -> tuple[int, ...]:
    """The dimensions the statistics and sums run over: those where the per-channel tensors' size is 1."""
    return tuple(axis for axis, size in enumerate(per_channel_shape) if size == 1)


def reduced_count(call, per_channel: str) -> int:
    """N: the input elements each mean, variance or sum combines."""
    shape = call.tensors["InputTensor"].shape
    return math.prod(shape[axis] for axis in reduced_axes(call.tensors[per_channel].shape))


def training_tolerance_scale(call) -> int:
    """MEAN_VARIANCE_NORMALIZATION's figure, 3N + 840 ULP (N the elements each mean reduces)."""
    return 3 * reduced_count(call, "ScaleTensor") + 840


def grad_tolerance_scale(call) -> int:
    """N + 8 ULP: WebNN's reduceSum N for the sums, 8 for each element's few operations."""
    return reduced_count(call, "MeanTensor") + 8


def lrn_grad_tolerance_scale(call) -> int:
    """Twice LOCAL_RESPONSE_NORMALIZATION's 2N + 18: two window sums and two powers."""
    return 4 * lrn_window(call) + 36


# ---------------------------------------------------------------- kernels (xp is numpy or cupy; FLOAT64 inside)

def _wide(xp, tensor):
    return None if tensor is None else tensor.astype(xp.float64)


def _rounded(xp, values, info):
    """A FLOAT64 result rounded once to the output's type, C-contiguous."""
    return xp.ascontiguousarray(values.astype(info.data_type.numpy_dtype))


def _sums(xp, values, axes):
    return xp.sum(values, axis=axes, keepdims=True)


def batch_normalization_training_kernel(xp, inputs, outputs, params):
    x, scale, bias, fused_add = (_wide(xp, t) for t in inputs)
    axes = reduced_axes(scale.shape)
    epsilon = xp.float64(params["Epsilon"])
    mean = xp.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    # The population variance, the mean of the squared deviations: the one whose derivative
    # BATCH_NORMALIZATION_TRAINING_GRAD's formula is.
    variance = xp.mean(centred * centred, axis=axes, keepdims=True)
    y = scale * (centred / xp.sqrt(variance + epsilon)) + bias
    if fused_add is not None:
        y = y + fused_add
    out, out_mean, out_variance = outputs
    # A fused activation then runs in the backend on the rounded OutputTensor (Operator.fused_activation).
    return _rounded(xp, y, out), _rounded(xp, mean, out_mean), _rounded(xp, variance, out_variance)


def _scale_and_bias_gradients(xp, x, dy, mean, variance, epsilon, axes):
    """The pages' OutputScaleGradient = sum(InputGradient * (Input - Mean) / sqrt(Variance + Epsilon)) and
    OutputBiasGradient = sum(InputGradient), over the dimensions where the statistics' size is 1."""
    return _sums(xp, dy * (x - mean) / xp.sqrt(variance + epsilon), axes), _sums(xp, dy, axes)


def batch_normalization_grad_kernel(xp, inputs, outputs, params):
    x, dy, mean, variance, scale = (_wide(xp, t) for t in inputs)
    axes = reduced_axes(mean.shape)
    epsilon = xp.float64(params["Epsilon"])
    dx = dy * (scale / xp.sqrt(variance + epsilon))
    dscale, dbias = _scale_and_bias_gradients(xp, x, dy, mean, variance, epsilon, axes)
    return tuple(_rounded(xp, value, info) for value, info in zip((dx, dscale, dbias), outputs))


def batch_normalization_training_grad_kernel(xp, inputs, outputs, params):
    x, dy, mean, variance, scale = (_wide(xp, t) for t in inputs)
    axes = reduced_axes(mean.shape)
    epsilon = xp.float64(params["Epsilon"])
    # The page's lines in order, mean(Input) read as MeanTensor (the notes say why).
    spread = variance + epsilon
    coef0 = 1.0 / xp.sqrt(spread)
    centred = x - mean
    coef1 = dy * centred
    dy_centred = dy - xp.mean(dy, axis=axes, keepdims=True)
    dx = scale * coef0 * (dy_centred - centred * xp.mean(coef1, axis=axes, keepdims=True) / spread)
    dscale, dbias = _scale_and_bias_gradients(xp, x, dy, mean, variance, epsilon, axes)
    return tuple(_rounded(xp, value, info) for value, info in zip((dx, dscale, dbias), outputs))


def _adjoint_window_sum(xp, values, axis: int, size: int):
    """Each j's sum over the outputs whose LRN window holds j: [j - ceil((size - 1) / 2), j + floor((size - 1) /
    2)], the window reflected (the same window for an odd size). The reflected array's window sum, reflected."""
    return xp.flip(window_sum(xp, xp.flip(values, axis), axis, size), axis)


def _lrn_window_axes(params) -> tuple[int, ...]:
    return (1,) if params["CrossChannel"] else (2, 3)


def lrn_grad_kernel(xp, inputs, outputs, params):
    x, dy = (_wide(xp, t) for t in inputs)
    size = params["LocalSize"]
    alpha, beta, bias = (float(params[name]) for name in ("Alpha", "Beta", "Bias"))
    total = x * x
    for axis in _lrn_window_axes(params):
        total = window_sum(xp, total, axis, size)
    base = bias + (alpha / size) * total  # LOCAL_RESPONSE_NORMALIZATION's denominator before the power
    # d/dx_j of sum_i dy_i * x_i * base_i^-Beta: the direct term, and base_i's dependence on x_j^2 for every i
    # whose window holds j.
    spread = dy * x * base ** (-beta - 1.0)
    for axis in _lrn_window_axes(params):
        spread = _adjoint_window_sum(xp, spread, axis, size)
    dx = dy * base ** (-beta) - (2.0 * alpha * beta / size) * x * spread
    return (_rounded(xp, dx, outputs[0]),)


# ---------------------------------------------------------------- sum bounds (checking/bounds.py)
#
# What a device computing in FLOAT32 may carry: each mean or sum of N terms K = N + a few roundings, times the sum of
# its terms' magnitudes (dmlcli computes in FLOAT64, far inside it).


def training_terms(call) -> dict:
    """K of BATCH_NORMALIZATION_TRAINING's outputs: N + 6 for OutputTensor (the statistics' N terms, the
    subtraction, the root, the division, Scale, Bias, FusedAdd), N + 1 for the mean, N + 2 for the variance."""
    n = reduced_count(call, "ScaleTensor")
    return {"OutputTensor": n + 6, "OutputMeanTensor": n + 1, "OutputVarianceTensor": n + 2}


def training_magnitude(xp, inputs, outputs, params):
    """M of BATCH_NORMALIZATION_TRAINING: |Scale| (mean|x| + |x - mean|) / sqrt(variance + Epsilon) + |Bias| +
    |FusedAdd| (x - mean carries the mean's rounding), mean|x| for the mean, the variance itself (a sum of
    squares)."""
    x, scale, bias, fused_add = inputs
    axes = reduced_axes(scale.shape)
    mean = xp.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    variance = xp.mean(centred * centred, axis=axes, keepdims=True)
    spread = xp.mean(xp.abs(x), axis=axes, keepdims=True)
    root = xp.sqrt(variance + np.float64(params["Epsilon"]))
    found = xp.abs(scale) * (spread + xp.abs(centred)) / root + xp.abs(bias)
    if fused_add is not None:
        found = found + xp.abs(fused_add)
    return found, spread, variance


def grad_terms(call) -> dict:
    """K of the gradients: N + 8 for OutputGradientTensor (the means it subtracts, a few roundings), N + 4 for the
    scale's gradient, N for the bias's (sums of N terms)."""
    n = reduced_count(call, "MeanTensor")
    return {"OutputGradientTensor": n + 8, "OutputScaleGradientTensor": n + 4, "OutputBiasGradientTensor": n}


def _gradient_sum_magnitudes(xp, x, dy, mean, variance, epsilon, axes):
    """M of the scale's and the bias's gradients: sum |dy| |x - Mean| / sqrt(Variance + Epsilon), sum |dy|."""
    return (xp.sum(xp.abs(dy) * xp.abs(x - mean), axis=axes, keepdims=True) / xp.sqrt(variance + epsilon),
            xp.sum(xp.abs(dy), axis=axes, keepdims=True))


def grad_magnitude(xp, inputs, outputs, params):
    """M of BATCH_NORMALIZATION_GRAD: |dy| |Scale| / sqrt(Variance + Epsilon) (a product: no cancellation) and the
    two sums' magnitudes."""
    x, dy, mean, variance, scale = inputs
    epsilon = np.float64(params["Epsilon"])
    axes = reduced_axes(mean.shape)
    return (xp.abs(dy) * xp.abs(scale) / xp.sqrt(variance + epsilon),
            *_gradient_sum_magnitudes(xp, x, dy, mean, variance, epsilon, axes))


def training_grad_magnitude(xp, inputs, outputs, params):
    """M of BATCH_NORMALIZATION_TRAINING_GRAD: |Scale| Coef0 (|dy| + mean|dy| + |x - Mean| mean(|dy| |x - Mean|) /
    (Variance + Epsilon)): dy - mean(dy) and the second term cancel where they are near equal; and the two sums'."""
    x, dy, mean, variance, scale = inputs
    epsilon = np.float64(params["Epsilon"])
    axes = reduced_axes(mean.shape)
    spread = variance + epsilon
    centred = xp.abs(x - mean)
    inner = (xp.abs(dy) + xp.mean(xp.abs(dy), axis=axes, keepdims=True)
             + centred * xp.mean(xp.abs(dy) * centred, axis=axes, keepdims=True) / spread)
    sums = _gradient_sum_magnitudes(xp, x, dy, mean, variance, epsilon, axes)
    return (xp.abs(scale) / xp.sqrt(spread) * inner, *sums)


def lrn_grad_terms(call) -> int:
    """K of LOCAL_RESPONSE_NORMALIZATION_GRAD: two window sums of N terms and a few roundings."""
    return 2 * lrn_window(call) + 8


def lrn_grad_magnitude(xp, inputs, outputs, params):
    """M of LOCAL_RESPONSE_NORMALIZATION_GRAD: its two terms' magnitudes added (|dy| D^-Beta + (2 Alpha Beta /
    LocalSize) |x| sum |dy| |x| D^(-Beta - 1)), which cancel where they are near equal."""
    x, dy = inputs
    size = params["LocalSize"]
    alpha, beta, bias = (float(params[name]) for name in ("Alpha", "Beta", "Bias"))
    total = x * x
    for axis in _lrn_window_axes(params):
        total = window_sum(xp, total, axis, size)
    base = bias + (alpha / size) * total
    spread = xp.abs(dy * x) * base ** (-beta - 1.0)
    for axis in _lrn_window_axes(params):
        spread = _adjoint_window_sum(xp, spread, axis, size)
    return xp.abs(dy) * base ** (-beta) + abs(2.0 * alpha * beta / size) * xp.abs(x) * spread


_STATISTICS_TEXT = "N + 6 for OutputTensor, N + 1 for the mean, N + 2 for the variance (N the elements each reduces)"
_GRAD_TERMS_TEXT = ("N + 8 for OutputGradientTensor, N + 4 for the scale's gradient, N for the bias's (N the elements "
                    "each sum reduces)")


# ---------------------------------------------------------------- entries

_ARITHMETIC = ("FLOAT32 and FLOAT16 inputs are widened exactly to FLOAT64, every formula (means, variances and "
               "sums included) is computed there, and each output is rounded once to its type (dmlcli's rule for "
               "composite operators); the GPU runs the same kernel in double precision. NaN propagates.")
_EPSILON_DEFAULT = "Epsilon defaults to 0.00001 (the page gives none), as BATCH_NORMALIZATION's."
_STATISTICS_FLOOR = ("the results are sums or normalised values of about unit size that may cancel (x - mean, "
                     "sums of signed gradients): near 0 their absolute error stays near the terms' FLOAT32 (FLOAT16) "
                     "rounding, which 2^-16 (2^-8) bounds for sums of up to a few hundred unit-sized terms, however "
                     "many ULP of the small result that is")
_GRAD_TOLERANCE = Tolerance(
    "ulp", 1, 1,
    "dmlcli's choice (WebNN has no gradients): N + 8 ULP for FLOAT32 and FLOAT16, N the input elements each sum "
    "reduces (WebNN's reduceSum figure, N ULP) and 8 for each element's subtraction, products, square root and "
    "division",
    floor_float32=2.0 ** -16, floor_float16=2.0 ** -8, floor_source=_STATISTICS_FLOOR)
_PER_CHANNEL = ("Every dimension of {tensors} is 1 (broadcast) or InputTensor's, with InputTensor's DimensionCount, "
                "and they have the same Sizes; the {what} run over the dimensions where their size is 1.")
_MEAN_READ = ("The page writes mean(Input) in the OutputGradient lines (and InputCentered = InputCentered - "
              "mean(InputCentered), a typo for Input - mean(Input)); dmlcli reads mean(Input) as MeanTensor, \"the "
              "tensor that was returned by MeanTensor from BATCH_NORMALIZATION_TRAINING\" (the page), the mean the "
              "scale gradient's formula uses too; mean(InputGradient) and mean(Coef1) are means over the reduced "
              "dimensions. With BATCH_NORMALIZATION_TRAINING's OutputMeanTensor and OutputVarianceTensor the "
              "formula is the exact derivative of its OutputTensor.")

BATCH_NORMALIZATION_TRAINING = Operator(
    name="BATCH_NORMALIZATION_TRAINING", enum_value=151, family=FAMILY, prefix="",
    summary="normalises the input by its own mean and variance over the dimensions Scale broadcasts, and outputs "
            "them",
    formula="OutputTensor = FusedActivation(Scale * ((Input - Mean) / sqrt(Variance + Epsilon)) + Bias + FusedAdd), "
            "Mean and Variance over the dimensions where ScaleTensor's size is 1 (OutputMeanTensor, "
            "OutputVarianceTensor)",
    introduced=_TRAINING_ROWS[-1].level, inputs=_TRAINING_INPUTS, support=_TRAINING_ROWS,
    same_data_type=_TRAINING_INPUTS + _TRAINING_OUTPUTS, same_sizes=(), cpu_kernel=None, cuda_body="",
    extra_outputs=_TRAINING_OUTPUTS[1:], parameters=(EPSILON, FUSED_ACTIVATION),
    optional_inputs=(("FusedAddTensor", "InputTensor"),), optional_since=level("4_1"),
    shape_rule=batch_normalization_training_shape, fused_activation="FusedActivation",
    array_kernel=batch_normalization_training_kernel, exactness=COMPOSITE,
    tolerance=Tolerance("ulp", 1, 1, "dmlcli's choice, MEAN_VARIANCE_NORMALIZATION's figure (after WebNN's "
                                     "instance/layerNormalization 840 ULP): 3N + 840 ULP for FLOAT32 and FLOAT16, "
                                     "N the elements each mean and variance reduce; for every output",
                        floor_float32=2.0 ** -20, floor_float16=2.0 ** -10,
                        floor_source="the outputs are normalised to about unit size and x - mean cancels near the "
                                     "mean: 2^-20 (FLOAT32) and 2^-10 (FLOAT16) bound the absolute error there"),
    tolerance_scale=training_tolerance_scale,
    sum_bound=SumBound(training_terms, _STATISTICS_TEXT,
                       "|Scale| (mean|x| + |x - mean|) / sqrt(variance + Epsilon) + |Bias| + |FusedAdd| for "
                       "OutputTensor (x - mean carries the mean's rounding), mean|x| for the mean, the variance "
                       "itself, in float64",
                       magnitude=training_magnitude),
    notes=(_PER_CHANNEL.format(tensors="ScaleTensor and BiasTensor", what="mean and variance"),
           "OutputMeanTensor and OutputVarianceTensor have ScaleTensor's Sizes; FusedAddTensor (optional, "
           "_Maybenull_) and OutputTensor have InputTensor's (the page's constraints).",
           "The variance is the population variance, the mean of the squared deviations (the page says only "
           "\"the variance of the input\"): the one whose derivative BATCH_NORMALIZATION_TRAINING_GRAD's formula "
           "is, and ONNX's training-mode batch variance.",
           "The sum is ((Scale * normalised) + Bias) + FusedAdd, in the page's order; the fused activation "
           "(--fused-activation NAME, with --fused-alpha, ...) then runs on OutputTensor rounded to its type, "
           "exactly as the activation operator would; OutputMeanTensor and OutputVarianceTensor are not activated.",
           _EPSILON_DEFAULT,
           "ONNX's BatchNormalization with training_mode=1 also returns running statistics blended with momentum "
           "(input_mean * momentum + mean * (1 - momentum)); DirectML outputs the batch's own mean and variance, "
           "which are ONNX's running ones only for momentum 0.", _ARITHMETIC),
)

def _batch_normalization_gradient(*, name: str, enum_value: int, summary: str, formula: str, support, kernel,
                                  reduced: str, reading: str, sum_bound: SumBound) -> Operator:
    """BATCH_NORMALIZATION_GRAD and BATCH_NORMALIZATION_TRAINING_GRAD share their DESC, shape rule and tolerance;
    their formulas, kernels and levels differ."""
    return Operator(
        name=name, enum_value=enum_value, family=FAMILY, prefix="", summary=summary, formula=formula,
        introduced=support[-1].level, inputs=_GRAD_INPUTS, support=support, same_data_type=_GRAD_INPUTS + _GRAD_OUTPUTS,
        same_sizes=(), cpu_kernel=None, cuda_body="", output=_GRAD_OUTPUTS[0], extra_outputs=_GRAD_OUTPUTS[1:],
        parameters=(EPSILON,), shape_rule=batch_normalization_grad_shape, array_kernel=kernel, exactness=COMPOSITE,
        tolerance=_GRAD_TOLERANCE, tolerance_scale=grad_tolerance_scale, sum_bound=sum_bound,
        notes=(_PER_CHANNEL.format(tensors="MeanTensor, VarianceTensor and ScaleTensor", what=reduced),
               "InputGradientTensor and OutputGradientTensor have InputTensor's Sizes; OutputScaleGradientTensor and "
               "OutputBiasGradientTensor MeanTensor's (the page's constraints).", reading, _EPSILON_DEFAULT,
               _ARITHMETIC))


BATCH_NORMALIZATION_GRAD = _batch_normalization_gradient(
    name="BATCH_NORMALIZATION_GRAD", enum_value=146,
    summary="backpropagates through BATCH_NORMALIZATION: the input's, the scale's and the bias's gradients",
    formula="OutputGradient = InputGradient * (Scale / sqrt(Variance + Epsilon)); OutputScaleGradient = "
            "sum(InputGradient * (Input - Mean) / sqrt(Variance + Epsilon)); OutputBiasGradient = "
            "sum(InputGradient), the sums over the dimensions where MeanTensor's size is 1",
    support=_GRAD_ROWS, kernel=batch_normalization_grad_kernel, reduced="sums",
    reading="Mean and Variance are constants here (BATCH_NORMALIZATION's inputs): OutputGradient is the derivative "
            "of BATCH_NORMALIZATION's output with them held fixed, in the page's grouping InputGradient * (Scale / "
            "sqrt(Variance + Epsilon)).",
    sum_bound=SumBound(grad_terms, _GRAD_TERMS_TEXT,
                       "|dy| |Scale| / sqrt(Variance + Epsilon) for OutputGradientTensor, sum |dy| |x - Mean| / "
                       "sqrt(Variance + Epsilon) and sum |dy| for the others, in float64", magnitude=grad_magnitude))

BATCH_NORMALIZATION_TRAINING_GRAD = _batch_normalization_gradient(
    name="BATCH_NORMALIZATION_TRAINING_GRAD", enum_value=152,
    summary="backpropagates through BATCH_NORMALIZATION_TRAINING (the batch's own statistics): the input's, the "
            "scale's and the bias's gradients",
    formula="Coef0 = 1 / sqrt(Variance + Epsilon); Coef1 = InputGradient * (Input - Mean); OutputGradient = Scale * "
            "Coef0 * ((InputGradient - mean(InputGradient)) - (Input - Mean) * mean(Coef1) / (Variance + Epsilon)); "
            "OutputScaleGradient = sum(InputGradient * (Input - Mean) / sqrt(Variance + Epsilon)); "
            "OutputBiasGradient = sum(InputGradient); means and sums over the dimensions where MeanTensor's size is 1",
    support=_TRAINING_GRAD_ROWS, kernel=batch_normalization_training_grad_kernel, reduced="means and sums",
    reading=_MEAN_READ,
    sum_bound=SumBound(grad_terms, _GRAD_TERMS_TEXT,
                       "|Scale| / sqrt(Variance + Epsilon) x (|dy| + mean|dy| + |x - Mean| mean(|dy| |x - Mean|) / "
                       "(Variance + Epsilon)) for OutputGradientTensor (its differences cancel), sum |dy| |x - Mean| "
                       "/ sqrt(Variance + Epsilon) and sum |dy| for the others, in float64",
                       magnitude=training_grad_magnitude))

LOCAL_RESPONSE_NORMALIZATION_GRAD = Operator(
    name="LOCAL_RESPONSE_NORMALIZATION_GRAD", enum_value=144, family=FAMILY, prefix="",
    summary="backpropagates through LOCAL_RESPONSE_NORMALIZATION: the input's gradient",
    formula="OutputGradient[j] = InputGradient[j] * D[j]^-Beta - (2 * Alpha * Beta / LocalSize) * Input[j] * "
            "sum(InputGradient[i] * Input[i] * D[i]^(-Beta - 1) for every i whose local region holds j), "
            "D = Bias + (Alpha / LocalSize) * sum(Input^2 over the local region)",
    introduced=_LRN_GRAD_ROWS[-1].level, inputs=_LRN_GRAD_TENSORS[:2], support=_LRN_GRAD_ROWS,
    same_data_type=_LRN_GRAD_TENSORS, same_sizes=(), cpu_kernel=None, cuda_body="",
    output="OutputGradientTensor", parameters=(CROSS_CHANNEL_LRN, LOCAL_SIZE, LRN_ALPHA, LRN_BETA, LRN_BIAS),
    shape_rule=lrn_grad_shape, array_kernel=lrn_grad_kernel, exactness=APPROXIMATE,
    tolerance=Tolerance("ulp", 1, 1, "dmlcli's choice (WebNN has no gradients): twice "
                                     "LOCAL_RESPONSE_NORMALIZATION's 2N + 18 ULP, 4N + 36 ULP for a region of N "
                                     "elements (two window sums and two powers)",
                        floor_float32=2.0 ** -16, floor_float16=2.0 ** -8,
                        floor_source="the direct term and the window term cancel where they are near equal: the "
                                     "absolute error there stays near the terms' rounding, which 2^-16 (2^-8) "
                                     "bounds for unit-sized gradients"),
    tolerance_scale=lrn_grad_tolerance_scale,
    sum_bound=SumBound(lrn_grad_terms, "2N + 8, N the elements of a local region",
                       "|dy| D^-Beta + (2 Alpha Beta / LocalSize) |x| sum |dy| |x| D^(-Beta - 1) in float64, the two "
                       "terms' magnitudes (they cancel where they are near equal)", magnitude=lrn_grad_magnitude),
    notes=("The page gives no formula. OutputGradient is the exact derivative of dmlcli's "
           "LOCAL_RESPONSE_NORMALIZATION applied to InputGradient: the same local region (along an axis from i - "
           "floor((LocalSize - 1) / 2) to i + ceil((LocalSize - 1) / 2), clipped to the tensor as the page says; "
           "CrossChannel TRUE along the channels, FALSE a LocalSize x LocalSize window of Height and Width) and "
           "the same Alpha / LocalSize scaling. Element j's sum runs over the outputs whose region holds j, the "
           "region reflected (the same for an odd LocalSize).",
           "The page's LocalSize text calls it the width and height of the region for CrossChannel TRUE and the "
           "number of elements for FALSE, the reverse of its CrossChannel field (\"TRUE if the LRN layer sums "
           "across channels\") and of LOCAL_RESPONSE_NORMALIZATION; dmlcli follows the field and the forward "
           "operator.",
           "InputTensor, InputGradientTensor and OutputGradientTensor have the same DataType and Sizes, "
           "{ BatchCount, ChannelCount, Height, Width }. LocalSize is at least 1; Alpha, Beta and Bias default to "
           "the page's recommended 0.0001, 0.75 and 1, LocalSize to 5 (LOCAL_RESPONSE_NORMALIZATION's).",
           _ARITHMETIC),
)

OPERATORS = (BATCH_NORMALIZATION_TRAINING, BATCH_NORMALIZATION_GRAD, BATCH_NORMALIZATION_TRAINING_GRAD,
             LOCAL_RESPONSE_NORMALIZATION_GRAD)
