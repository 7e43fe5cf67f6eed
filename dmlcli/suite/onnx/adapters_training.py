"""The adapters of ONNX's training operators: Adam (ai.onnx.preview.training) onto ADAM_OPTIMIZER, and
BatchNormalization with training_mode=1 onto BATCH_NORMALIZATION_TRAINING.

As in adapters.py, an adapter only reshapes and renames: what DirectML cannot compute (ONNX's regularisation
terms, Adam's step 0 without bias correction, running statistics blended with a momentum) is the table's
`cannot`, checked before the adapter runs, with the conditions below.
"""

from __future__ import annotations

import math

import numpy as np

from .adapters import (MappingError, OnnxCall, Prepared, data_input, per_channel, reshaped_to, scalar_of,
                       whole_scalar)

UINT32_MAX = 2 ** 32 - 1


# ---------------------------------------------------------------- Adam -> ADAM_OPTIMIZER

def adam_groups(call: OnnxCall) -> int:
    """How many tensors ONNX's Adam updates: its inputs are R, T, then X, G, V and H for each (variadic)."""
    count = len(call.inputs) - 2
    if count < 4 or count % 4:
        raise MappingError(f"ONNX's Adam takes R, T and four tensors (X, G, V, H) per updated tensor; got "
                           f"{len(call.inputs)} inputs")
    return count // 4


def adam_step(call: OnnxCall) -> int:
    return whole_scalar(call.input(1), "T")


def adam_step_outside_uint32(call: OnnxCall) -> bool:
    return not 0 <= adam_step(call) <= UINT32_MAX


def adapt_adam(call: OnnxCall, fixed) -> Prepared:
    """R becomes LearningRate, alpha Beta1, beta Beta2, epsilon Epsilon; X, V (the first moment), H (the second)
    and G are read as {1, 1, 1, size} (ADAM_OPTIMIZER takes 4 dimensions and works element by element), T as
    a UINT32 {1, 1, 1, 1}; the outputs are reshaped back to X's Sizes."""
    rate, step, x, gradient, first, second = call.inputs[:6]
    flat = (1, 1, 1, max(x.size, 1))
    tensors = [np.asarray(t).reshape(flat) for t in (x, first, second, gradient)]
    values = {**fixed, "LearningRate": float(scalar_of(rate, "R")), "Beta1": call.attr("alpha", 0.9),
              "Beta2": call.attr("beta", 0.999), "Epsilon": call.attr("epsilon", 0.0)}
    training_step = np.array(adam_step(call), np.uint32).reshape(1, 1, 1, 1)
    return Prepared(values, tensors + [training_step], finish=reshaped_to([x.shape] * 3))


# ---------------------------------------------------------------- BatchNormalization, training_mode=1

def blends_running_statistics(call: OnnxCall) -> bool:
    """Whether ONNX's expected running_mean and running_var differ from the batch's own statistics: they are
    input_mean * momentum + mean * (1 - momentum), the batch's mean exactly only for momentum 0 and finite
    input statistics (0 * inf is NaN)."""
    if call.outputs < 2:
        return False
    if float(call.attr("momentum", 0.9)) != 0.0:
        return True
    return not all(np.isfinite(call.input(i)).all() for i in (3, 4))


def adapt_batch_normalization_training(call: OnnxCall, fixed) -> Prepared:
    """X, scale and B as BATCH_NORMALIZATION_TRAINING's InputTensor, ScaleTensor, BiasTensor ({1, C, 1, ...}); its
    OutputMeanTensor and OutputVarianceTensor are ONNX's running_mean and running_var (momentum 0), 1-D again."""
    data = data_input(call)
    scale, bias = (per_channel(call.input(i), data.ndim) for i in (1, 2))
    channels = (data.shape[1],) if data.ndim > 1 else (math.prod(scale.shape),)
    wanted = [data.shape, channels, channels][:max(call.outputs, 1)]
    return Prepared({**fixed, "Epsilon": call.attr("epsilon", 1e-5)}, [data, scale, bias],
                    finish=lambda outputs: reshaped_to(wanted)(outputs[:len(wanted)]))
