"""ADAM_OPTIMIZER (family "training"): one Adam step, in the page's order of operations.

Sources: DirectML's page for DML_ADAM_OPTIMIZER_OPERATOR_DESC (MicrosoftDocs/sdk-api,
ns-directml-dml_adam_optimizer_operator_desc.md, stored versions 2db4b020 and 9ade0e62): the formula, the fields,
the constraints and the support table; DirectML.h at 0x6400 (DML_OPERATOR_ADAM_OPTIMIZER = 136); Microsoft's
TensorFlow-DirectML (microsoft/tensorflow-directml, tensorflow/core/kernels/dml_training_ops.cc, DmlApplyAdamKernel)
for the TrainingStepTensor's data type, where the page contradicts itself.

The arithmetic is the page's pseudo-code read as C++ in FLOAT32 (FLOAT16 widened exactly, each output rounded once
to FLOAT16 at the end), every operation correctly rounded, in this order:
    M' = (Beta1 * M) + ((1 - Beta1) * G)
    V' = (Beta2 * V) + (((1 - Beta2) * G) * G)
    Alpha = sqrt(1 - Beta2^T) / (1 - Beta1^T)            (once per call)
    X' = X - (((LearningRate * Alpha) * M') / (sqrt(V') + Epsilon))
Beta^T has no IEEE-defined result: dmlcli takes pow in double precision of the FLOAT32 Beta, rounded to FLOAT32.
The scalars (1 - Beta1, 1 - Beta2, Alpha, LearningRate * Alpha) are computed once on the host; the CPU runs the
element-wise part with NumPy, the GPU with a CUDA kernel over dmlcli's IEEE primitives (CuPy's own float32
arithmetic flushes subnormals to zero), so the two give the same bits.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOATS, UINT32
from ..numerics.cuda_prelude import elementwise_kernel
from ..table.parameters import FloatParameter
from ..table.schema import COMPOSITE, DIMS_4, Operator, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes

FAMILY = "training"
_STATE = ("InputParametersTensor", "InputFirstMomentTensor", "InputSecondMomentTensor", "GradientTensor")
_OUTPUTS = ("OutputParametersTensor", "OutputFirstMomentTensor", "OutputSecondMomentTensor")
_INPUTS = _STATE + ("TrainingStepTensor",)

_ROWS = rows(("3_0", DIMS_4, {**{name: FLOATS for name in _STATE + _OUTPUTS}, "TrainingStepTensor": (UINT32,)}))

LEARNING_RATE = FloatParameter(field="LearningRate", default_value=0.001,
                               help="the step size (default 0.001, Adam's usual value: the page gives none)")
BETA1 = FloatParameter(field="Beta1", default_value=0.9,
                       help="the first moment's decay rate, between 0 and 1 (default 0.9, the page's typical value)")
BETA2 = FloatParameter(field="Beta2", default_value=0.999,
                       help="the second moment's decay rate, between 0 and 1 (default 0.999, the page's typical "
                            "value)")
ADAM_EPSILON = FloatParameter(field="Epsilon", default_value=1e-8,
                              help="added to sqrt(V) against a division by zero (default 1e-8, a value the page "
                                   "names)")


def adam_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputParametersTensor")
    for name in _STATE[1:]:
        if query.shape(name) != shape:
            raise RuleViolation(f"InputParametersTensor Sizes {describe_sizes(shape)} and {name} Sizes "
                                f"{describe_sizes(query.shape(name))} differ; the parameters, moments and gradients "
                                "must have the same Sizes")
    step = query.shape("TrainingStepTensor")
    if any(size != 1 for size in step):
        raise RuleViolation(f"TrainingStepTensor Sizes {describe_sizes(step)} are not a scalar's (every size must "
                            "be 1)")
    return {name: shape for name in _OUTPUTS}


def training_step(tensor) -> int:
    """T, read on the host from TrainingStepTensor's one UINT32 element (a GPU array too)."""
    host = tensor.get() if hasattr(tensor, "get") else tensor
    return int(np.asarray(host).reshape(-1)[0])


def adam_scalars(params, step: int) -> tuple[np.float32, ...]:
    """(Beta1, 1 - Beta1, Beta2, 1 - Beta2, LearningRate * Alpha, Epsilon) as FLOAT32, each rounded once."""
    one = np.float32(1)
    beta1, beta2 = np.float32(params["Beta1"]), np.float32(params["Beta2"])
    with np.errstate(all="ignore"):  # T = 0: Alpha is 0 / 0, NaN, as the page's formula gives
        power1 = np.float32(math.pow(float(beta1), step))
        power2 = np.float32(math.pow(float(beta2), step))
        alpha = np.sqrt(one - power2) / (one - power1)
        rate = np.float32(params["LearningRate"]) * alpha
    return beta1, one - beta1, beta2, one - beta2, rate, np.float32(params["Epsilon"])


def _f32(xp, tensor):
    return tensor if tensor.dtype == np.float32 else tensor.astype(xp.float32)


def adam_kernel(xp, inputs, outputs, params):
    parameters, first, second, gradient = (_f32(xp, t) for t in inputs[:4])
    beta1, rest1, beta2, rest2, rate, epsilon = adam_scalars(params, training_step(inputs[4]))
    first = beta1 * first + rest1 * gradient
    second = beta2 * second + (rest2 * gradient) * gradient
    parameters = parameters - (rate * first) / (xp.sqrt(second) + epsilon)
    return tuple(xp.ascontiguousarray(value.astype(info.data_type.numpy_dtype, copy=False))
                 for value, info in zip((parameters, first, second), outputs))


_ADAM_BODY = """
float m = dml_add(dml_mul(beta1, first), dml_mul(rest1, g));
float v = dml_add(dml_mul(beta2, second), dml_mul(dml_mul(rest2, g), g));
out_x = dml_sub(x, dml_div(dml_mul(rate, m), dml_add(dml_sqrt_rn(v), epsilon)));
out_m = m;
out_v = v;
"""


def adam_gpu_kernel(cp, inputs, outputs, params):
    """adam_kernel's operations in one CUDA pass, each correctly rounded with subnormals kept (CuPy's float32
    arithmetic would flush them): the CPU's bits."""
    parameters, first, second, gradient = (_f32(cp, t) for t in inputs[:4])
    scalars = adam_scalars(params, training_step(inputs[4]))
    kernel = elementwise_kernel(
        cp, "dml_adam_optimizer",
        "float32 x, float32 first, float32 second, float32 g, float32 beta1, float32 rest1, float32 beta2, "
        "float32 rest2, float32 rate, float32 epsilon", "float32 out_x, float32 out_m, float32 out_v", _ADAM_BODY)
    results = kernel(parameters, first, second, gradient, *scalars)
    return tuple(cp.ascontiguousarray(value.astype(info.data_type.numpy_dtype, copy=False))
                 for value, info in zip(results, outputs))


ADAM_OPTIMIZER = Operator(
    name="ADAM_OPTIMIZER", enum_value=136, family=FAMILY, prefix="",
    summary="one Adam step: updated parameters and first and second moment estimates",
    formula="M' = Beta1 * M + (1 - Beta1) * G; V' = Beta2 * V + (1 - Beta2) * G * G; Alpha = sqrt(1 - Beta2^T) / "
            "(1 - Beta1^T); X' = X - LearningRate * Alpha * M' / (sqrt(V') + Epsilon)",
    introduced=_ROWS[-1].level, inputs=_INPUTS, support=_ROWS, same_data_type=_STATE + _OUTPUTS, same_sizes=(),
    cpu_kernel=None, cuda_body="", output=_OUTPUTS[0], extra_outputs=_OUTPUTS[1:], in_place=True,
    parameters=(LEARNING_RATE, BETA1, BETA2, ADAM_EPSILON), shape_rule=adam_shape, array_kernel=adam_kernel,
    gpu_array_kernel=adam_gpu_kernel, exactness=COMPOSITE,
    tolerance=Tolerance("ulp", 8, 8, "dmlcli's choice from the arithmetic (WebNN has no optimizer): each output is "
                                     "a few correctly rounded operations (M' 3, V' 4, X' 5 after them and the "
                                     "once-per-call Alpha), which a device may order or fuse otherwise; 8 ULP",
                        floor_float32=2.0 ** -20, floor_float16=2.0 ** -10,
                        floor_source="Beta1 * M and (1 - Beta1) * G (and X and the update) cancel where they are "
                                     "near opposite: the result's absolute error there stays near the terms' "
                                     "rounding, which 2^-20 (FLOAT32) and 2^-10 (FLOAT16) bound for unit-sized "
                                     "parameters"),
    notes=(
        "The order of operations (it decides the bits): M' = (Beta1 * M) + ((1 - Beta1) * G); V' = (Beta2 * V) + "
        "(((1 - Beta2) * G) * G); Alpha = sqrt(1 - Beta2^T) / (1 - Beta1^T); X' = X - (((LearningRate * Alpha) * "
        "M') / (sqrt(V') + Epsilon)): the page's pseudo-code as C++ groups it, every operation in FLOAT32 and "
        "correctly rounded, no fused multiply-add; FLOAT16 tensors are widened exactly and each output rounded "
        "once. Beta^T is pow in double precision of the FLOAT32 Beta, rounded to FLOAT32 (pow has no IEEE-defined "
        "result).",
        "TrainingStepTensor is a UINT32 scalar ({1, 1, 1, 1}): the page's field text says UINT32 and Microsoft's "
        "TensorFlow-DirectML binds a UINT32 scalar (dml_training_ops.cc), while the page's support table lists "
        "FLOAT32, FLOAT16 for it and one version's constraints tie its DataType to the others'; dmlcli follows "
        "the field text and TensorFlow-DirectML.",
        "T = 0 gives Alpha = 0 / 0 = NaN and so NaN parameters: the page's formula (it also says the step "
        "\"typically starts at 0\"; TensorFlow-DirectML's first step is T = 1). The operator does not advance T.",
        "InputFirstMomentTensor, InputSecondMomentTensor, GradientTensor and the three outputs have "
        "InputParametersTensor's DataType and Sizes; each output may alias its input in DirectML (in-place "
        "execution). 4 dimensions at every level: DirectML's feature-level history lists ADAM_OPTIMIZER among "
        "4_0's \"extended data type and dimension count support\", but no stored version of its page has a 4_0 "
        "row, so dmlcli keeps the page's 3_0 row.",
        "LearningRate, Beta1, Beta2 and Epsilon have no defaults in DirectML's desc; dmlcli's (0.001, 0.9, 0.999, "
        "1e-8) are Adam's usual values and the ones the page calls typical.",
        "ONNX's Adam (ai.onnx.preview.training) adds norm_coefficient * X to the gradient, scales X' by 1 - "
        "norm_coefficient_post and skips the bias correction at T = 0; ADAM_OPTIMIZER has none of these, so only "
        "calls with both coefficients 0 and T > 0 map onto it (then its alpha is Beta1, beta Beta2, R "
        "LearningRate).",
    ),
)

OPERATORS = (ADAM_OPTIMIZER,)
