"""ONNX Runtime's contrib operators (domain com.microsoft) that its graph fusions make for the DirectML provider
(dmlcli/onnx_model/fusions.py), mapped as the provider runs them (onnxruntime/core/providers/dml/
DmlExecutionProvider/src/Operators/):

- FusedMatMul (DmlOperatorFusedMatMul.cpp) is one GEMM: A and B read through Strides that apply transBatch, then
  trans (OperatorHelper.cpp, GetFusedMatMulSizesAndStrides), batch dimensions broadcast with zero Strides
  (FusedMatMulShapeMapping), TransA and TransB NONE, Alpha alpha, Beta 0, no CTensor;
- SkipLayerNormalization (DmlOperatorSkipLayerNormalization.cpp) is a DirectML graph of ELEMENT_WISE_ADD (input +
  skip), a second ELEMENT_WISE_ADD of the bias where there is one, and MEAN_VARIANCE_NORMALIZATION1 over the hidden
  axis (Axes {2, 3} of {batch, sequence, hidden, 1}, NormalizeVariance, epsilon, gamma and beta as Scale and Bias);
- FusedMatMulActivation (the same DmlOperatorFusedMatMul, its GraphFusedActivation from OperatorUtility.cpp's
  TryGetGraphFusedActivationDesc) is that GEMM with ACTIVATION_SOFTMAX1 as its FusedActivation, over the one axis
  `activation_axis` (default -1) made positive with A's rank.

A node of several DirectML calls is given as Parts: each an ONNX call that the table's own entry for that ONNX
operator maps (Add -> ELEMENT_WISE_ADD, LayerNormalization at axis -1 -> MEAN_VARIANCE_NORMALIZATION1 over the last
axis, Softmax (opset 13, one axis) -> ACTIVATION_SOFTMAX1, FusedMatMul -> GEMM), which is the provider's call with
the same fields. A fused activation is computed on the operator's rounded result, exactly as the activation
operator computes it (backends: Operator.fused_activation), so FusedMatMulActivation's GEMM then SOFTMAX1 gives the
values the provider's one fused call gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from .adapters import OnnxCall, Prepared, _matmul_operands, data_input, reshaped_to

# The provider's default epsilon where SkipLayerNormalization has none (OperatorUtility.h, Dml::DefaultEpsilon); the
# fusion always writes one (the LayerNormalization's, else contrib_defs.h's kDefaultSkipLayerNormEpsilon, 1e-12).
PROVIDER_EPSILON = 0.00001


@dataclass(frozen=True)
class Part:
    """One DirectML call of a node the provider runs as several: the ONNX operator whose table entry maps the call,
    its inputs and outputs by name (the node's own, or an intermediate value's), its attributes and the opset whose
    meaning the call takes (Softmax 13: one axis)."""

    onnx_op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: Mapping[str, object] = field(default_factory=dict)
    opset: int | None = None


@dataclass(frozen=True)
class Composition:
    """What a composed entry builds its Parts from: the node's input and output names ("" for one left out), its
    ONNX call (the arrays, for ranks) and the name of each intermediate value by its role."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    call: OnnxCall
    named: Callable[[str], str]

    def input(self, position: int) -> str:
        return self.inputs[position] if position < len(self.inputs) else ""

    def output(self, position: int) -> str:
        return self.outputs[position] if position < len(self.outputs) else ""


# ---------------------------------------------------------------- FusedMatMul -> GEMM


def fused_operand(x: np.ndarray, batch: bool, transposed: bool) -> np.ndarray:
    """A FusedMatMul operand as the provider's desc reads it (a view, permuted Strides): transBatch moves the first
    dimension to the rows' place ([M, b0, ..., K] is read as [b0, ..., M, K]), then trans swaps the last two."""
    if batch:
        x = np.moveaxis(x, 0, -2)
    if transposed and x.ndim > 1:
        x = np.swapaxes(x, -1, -2)
    return x


def batch_ranks_differ(call: OnnxCall) -> bool:
    """transBatchA or transBatchB with A and B of different ranks, or of rank 2 or less (the provider's check,
    as the CPU kernel's matmul_helper.h)."""
    if not (call.attr("transBatchA", 0) or call.attr("transBatchB", 0)):
        return False
    a, b = call.input(0), call.input(1)
    return a is None or b is None or a.ndim <= 2 or a.ndim != b.ndim


def adapt_fused_matmul(call: OnnxCall, fixed) -> Prepared:
    """FusedMatMul(A, B) -> GEMM(A', B') with Alpha alpha: A' and B' are the strided views of fused_operand, then
    NumPy's matmul rules (1-D operands, leading 1s, a broadcast batch) as MatMul's, without folding dimensions past
    4 (the provider keeps the ranks)."""
    a = fused_operand(data_input(call), bool(call.attr("transBatchA", 0)), bool(call.attr("transA", 0)))
    b = fused_operand(call.input(1), bool(call.attr("transBatchB", 0)), bool(call.attr("transB", 0)))
    a, b, out_shape = _matmul_operands(a, b, fold=False)
    values = {**fixed, "Alpha": float(call.attr("alpha", 1.0))}
    return Prepared(values, [a, b], finish=reshaped_to([out_shape]))


# ---------------------------------------------------------------- SkipLayerNormalization


def skip_statistics_asked(call: OnnxCall) -> bool:
    """The mean or inv_std_var output is asked for (QuerySkipLayerNormalization: the provider does not take them)."""
    names = call.output_names
    return any(position < len(names) and names[position] for position in (1, 2))


def skip_rank_unsupported(call: OnnxCall) -> bool:
    return data_input(call).ndim not in (2, 3)


def skip_shape_differs(call: OnnxCall) -> bool:
    """skip's Sizes differ from input's: the provider reads skip at input's Sizes."""
    skip = call.input(1)
    return skip is None or tuple(skip.shape) != tuple(data_input(call).shape)


def skip_vector_differs(call: OnnxCall) -> bool:
    """gamma, beta or bias does not hold exactly `hidden` values (the provider reads each as {1, 1, hidden, 1})."""
    hidden = data_input(call).shape[-1]
    return any(tensor is not None and tensor.size != hidden for tensor in (call.input(2), call.input(3), call.input(4)))


def skip_layer_normalization_parts(composition: Composition) -> tuple[Part, ...]:
    """ELEMENT_WISE_ADD(input, skip) [-> ELEMENT_WISE_ADD(sum, bias)] -> MEAN_VARIANCE_NORMALIZATION1 over the last
    axis with gamma and beta: the provider's graph. Output 3 (input_skip_bias_sum), where asked, is the last sum."""
    c = composition
    summed_output = c.output(3)
    bias = c.input(4)
    total = summed_output if summed_output and not bias else c.named("input_skip_sum")
    parts = [Part("Add", (c.input(0), c.input(1)), (total,), opset=14)]
    if bias:
        biased = summed_output or c.named("input_skip_bias_sum")
        parts.append(Part("Add", (total, bias), (biased,), opset=14))
        total = biased
    epsilon = float(c.call.attr("epsilon", PROVIDER_EPSILON))
    parts.append(Part("LayerNormalization", (total, c.input(2), c.input(3)), (c.output(0),),
                      {"axis": -1, "epsilon": epsilon}, opset=17))
    return tuple(parts)


# ---------------------------------------------------------------- FusedMatMulActivation


def activation_not_softmax(call: OnnxCall) -> bool:
    return str(call.attr("activation", "")) != "Softmax"


def fused_matmul_activation_parts(composition: Composition) -> tuple[Part, ...]:
    """GEMM (the node's FusedMatMul) then ACTIVATION_SOFTMAX1 over one axis: activation_axis (default -1), made
    positive with A's rank as the provider does (TryGetGraphFusedActivationDesc: HandleNegativeAxis on input 0's
    dimension count)."""
    c = composition
    matmul = {name: value for name, value in c.call.attributes.items() if not name.startswith("activation")}
    axis = int(c.call.attr("activation_axis", -1))
    if axis < 0:
        axis += data_input(c.call).ndim
    product = c.named("product")
    return (Part("FusedMatMul", (c.input(0), c.input(1)), (product,), matmul, opset=1),
            Part("Softmax", (product,), (c.output(0),), {"axis": axis}, opset=13))
