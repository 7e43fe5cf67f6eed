"""ONNX operator -> DirectML operator: one declarative entry per ONNX operator of ../shared/onnx_operators.

Each entry names the DirectML operator that computes the ONNX operator (its key in dmlcli's operator table),
which DESC field each ONNX attribute or input becomes (`fields`: DESC field -> where its value comes from),
the fields every case sets alike (`fixed`), what the adapter does outside the operator (`outside`: pure
reshapes and normalisations, never a change of value), and the adapter (adapters.py) that builds the call.
`cannot` lists the conditions under which DirectML cannot compute a case, each with the DirectML fact that is
printed as the skip reason; they are checked before anything else, so that a case DirectML can never compute
says why even while dmlcli lacks the operator. The generic ones (a data type or rank that no feature level of
the operator takes, a size of zero) are checked for every entry from the operator's own support rows
(mapping.py), once dmlcli has the operator.

A DESC destination "<Tensor>.Sizes" is an output's Sizes the caller states (DirectML takes them from the
output's tensor desc); `keywords` routes a destination to another API keyword where dmlcli's operator
takes it as a parameter (fix it here when an operator's entry names a field differently).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from . import adapters as a
from . import adapters_attention as aa
from . import adapters_contrib as ac
from . import adapters_elementwise as ae
from . import adapters_normalization as an
from . import adapters_quantization as aq
from . import adapters_training as t


class _Attributes(dict):
    """An ONNX call's attributes for a reason's {placeholders}; one the call leaves out shows as the default the
    condition declares for it (ONNX's), and a placeholder with neither is the table's error (a literal brace is
    written {{ }})."""

    def __init__(self, attributes: Mapping[str, object], defaults: Mapping[str, object]):
        super().__init__(attributes)
        self.defaults = defaults

    def __missing__(self, key: str) -> object:
        if key in self.defaults:
            return self.defaults[key]
        raise KeyError(f"ONNX table: the reason's placeholder {{{key}}} is no attribute of the call and has no "
                       "default in its Cannot (write a literal brace as {{ }})")


@dataclass(frozen=True)
class Cannot:
    """A condition under which DirectML cannot compute the case, and the DirectML fact that says why."""

    when: Callable[[a.OnnxCall], bool]
    # The skip message: {name} is the ONNX attribute's value; or a function of the call that words it.
    reason: str | Callable[[a.OnnxCall], str]
    defaults: Mapping[str, object] = field(default_factory=dict)  # ONNX's default of each {name} a call may leave out

    def describe(self, call: a.OnnxCall) -> str:
        if callable(self.reason):
            return self.reason(call)
        return self.reason.format_map(_Attributes(call.attributes, self.defaults))


@dataclass(frozen=True)
class Entry:
    onnx_op: str
    directml: str | None  # the DirectML operator's key (DML_OPERATOR_<key>); None: no DirectML operator does it
    fields: Mapping[str, str] = field(default_factory=dict)  # DESC field (or "<Tensor>.Sizes") -> ONNX source
    fixed: Mapping[str, object] = field(default_factory=dict)  # DESC field -> the value every case gets
    adapter: Callable | None = None  # (OnnxCall, fixed) -> adapters.Prepared
    outside: tuple[str, ...] = ()  # what the adapter does outside the operator, in words
    keywords: Mapping[str, str] = field(default_factory=dict)  # destination -> API keyword, where not snake_case
    cannot: tuple[Cannot, ...] = ()  # the conditions under which DirectML cannot compute a case
    reason: str = ""  # directml None: why DirectML cannot compute the operator at all
    # ONNX case names whose expected values the ONNX test writes rounded (so no ULP rule can hold), each with
    # what is rounded: compared as ONNX's backend tests compare (mapping.ROUNDED_RTOL, ROUNDED_ATOL).
    rounded_expected: Mapping[str, str] = field(default_factory=dict)
    # A variant: the entry stands for its ONNX operator only on the calls `selects` picks, which another DirectML
    # operator computes (BatchNormalization with training_mode=1 is BATCH_NORMALIZATION_TRAINING). None: the
    # operator's plain entry, for every call no variant picks.
    selects: Callable[[a.OnnxCall], bool] | None = None
    # directml None: where ONNX Runtime's DirectML provider runs the operator with no DirectML operator at all
    # (Reshape reuses the buffer, Shape reads the Sizes), the ONNX outputs computed so, with no value changed.
    # The model runner runs it; a node test of it is skipped with `reason`.
    view: Callable[[a.OnnxCall], tuple] | None = None
    # Where ONNX leaves the order of the outputs free along an axis (TopK's sorted=0): the axis, or None where the
    # call's order is fixed; such outputs are compared as sets of (value, index) pairs (adapters.in_index_order).
    free_order: Callable[[a.OnnxCall], int | None] | None = None
    # The conditions under which ONNX Runtime's DirectML provider maps a call to other values than ONNX defines
    # (Resize's align_corners with a length that is not whole): a node test is skipped with the reason, as it
    # cannot match ONNX's expected values; a model's node runs as the provider runs it (dmlcli onnx), and
    # --compare ort shows the difference.
    differs: tuple[Cannot, ...] = ()
    # The ONNX inputs (by position) whose values the entry's conditions, adapter, finish or view read: Reshape's
    # shape, Clip's min and max. Every other input is read for its type and Sizes only, and reaches the DirectML
    # call (or a view's outputs) as itself or a view of it (a reshape, a broadcast, permuted Strides), never as a
    # copy or a converted array. A model's plan works such a node's call out once for its inputs' types and Sizes
    # where the inputs listed are constants (onnx_model/planning/planned.py). None: not stated (the node is mapped
    # again on every call, as a node test's case is).
    value_inputs: tuple[int, ...] | None = None
    # directml None: where ONNX Runtime's DirectML provider runs the operator as several DirectML calls (a contrib
    # operator its fusions make: SkipLayerNormalization), the calls as Parts, each an ONNX call whose own entry maps
    # it (adapters_contrib.py). The model runner runs them in order, as one node; `cannot` is checked on the node.
    composed: Callable[[ac.Composition], tuple[ac.Part, ...]] | None = None
    # Where `dmlcli run` (validate, describe, the API) cannot stand for the ONNX operator by its name, though a
    # DirectML operator computes it here: why, and what to run instead; the name then points to `dmlcli onnx`.
    # Empty: the name resolves to `directml` with the `fixed` fields (dmlcli/onnx_spellings.py).
    command_line: str = ""

    @property
    def destinations(self) -> tuple[str, ...]:
        """Every DESC field (or output Sizes) the entry sets."""
        return tuple(dict.fromkeys((*self.fields, *self.fixed)))


KEEPDIMS = "keepdims=0: ONNX removes the reduced axes, DirectML keeps them with size 1: compared after reshaping"
NEGATIVE_AXIS = "a negative axis counts from the end in ONNX; DirectML's axes are UINT: axis + rank"
INT64_INDICES = "ONNX's int64 indices are given as DirectML's INT64 IndicesTensor (from 3_0)"
PADDED_RANK = ("DirectML's tensors of one call share a DimensionCount: inputs get leading size-1 axes up to the "
               "output's rank, and the output is reshaped to ONNX's Sizes")


NOOP = Cannot(lambda c: bool(c.attr("noop_with_empty_axes", 0)) and a.given_axes(c) is None,
              "ONNX's noop_with_empty_axes=1 with no axes returns the input unchanged; DirectML's REDUCE has no "
              "such mode (left-out Axes reduce every axis)")


def _reduce(onnx_op: str, function: str) -> Entry:
    return Entry(
        onnx_op, "REDUCE", fields={"Axes": "the axes input (opset 18) or attribute; empty or left out: every axis"},
        fixed={"Function": function}, adapter=a.adapt_reduce, cannot=(NOOP,), value_inputs=(1,),
        outside=(KEEPDIMS, NEGATIVE_AXIS, "empty axes (shape [0]) leave Axes out: every axis is reduced"))


def _reduction_attribute(directml: str) -> Cannot:
    return Cannot(lambda c: str(c.attr("reduction", "none")) != "none",
                  "ONNX's reduction={reduction} combines updates with the data; DirectML's " + directml
                  + " only overwrites (no reduction field)", {"reduction": "none"})


def _past_rank_8(shape_of) -> Cannot:
    return Cannot(lambda c: a.common_rank(c, shape_of(c)) > a.MAX_RANK,
                  "the output and the inputs' leading 1s need more than 8 dimensions; DirectML tensors have 1 to 8")


def _top_k_whole_axis(call) -> bool:
    """k equal to the axis's size (MappingError past it: ONNX requires k at most the size, as ONNX Runtime checks)."""
    data = call.input(0)
    axis = a.normalised_axis(call.attr("axis", -1), data.ndim)
    count = a.top_k_count(call)
    if count > data.shape[axis]:
        raise a.MappingError(f"ONNX's TopK k {count} is larger than axis {axis}'s {data.shape[axis]} elements")
    return count == data.shape[axis]


def _arg(onnx_op: str, directml: str) -> Entry:
    return Entry(
        onnx_op, directml, fields={"Axes": "{axis} (default 0)",
                                   "AxisDirection": "select_last_index: 0 INCREASING (first index), 1 DECREASING"},
        adapter=a.adapt_arg_reduce, value_inputs=(),
        outside=(KEEPDIMS, NEGATIVE_AXIS, "ONNX's int64 indices: OutputTensor INT64 (--output-dtype int64, from 3_0)"))


def _axis_activation(onnx_op: str, directml: str) -> Entry:
    return Entry(onnx_op, directml, fields={"Axes": "{axis} (opset 13: one axis, default -1)"},
                 adapter=a.adapt_axis_activation, outside=(NEGATIVE_AXIS,), value_inputs=())


_POOL_FIELDS = {"WindowSize": "kernel_shape", "Strides": "strides (default 1)",
                "StartPadding": "pads' first half, or auto_pad SAME_UPPER/SAME_LOWER's share",
                "EndPadding": "pads' second half, or auto_pad's share, plus what ceil_mode=1 adds"}
_GLOBAL_FIELDS = {"WindowSize": "the input's spatial Sizes", "Strides": "1", "StartPadding": "0", "EndPadding": "0"}
_ONE_D = "a 1-D pool's { N, C, W } is DirectML's { N, C, 1, W } (window 1 along the added axis; reshapes)"
_POOL_OUTSIDE = (
    "ONNX's auto_pad SAME_UPPER/SAME_LOWER becomes explicit padding: total = (ceil(n / s) - 1) * s + (k - 1) * d "
    "+ 1 - n, the odd element at the end (SAME_UPPER) or the start (SAME_LOWER); VALID: none",
    "ceil_mode=1: DirectML's output count is a floor, so EndPadding grows until the floor gives ONNX's ceil "
    "count (a last window that would start in the end padding dropped, as ONNX drops it); that padding is never "
    "a maximum, adds 0 to an Lp sum and is left out of an average's divisor with IncludePadding false",
    _ONE_D)
_AVERAGE_CEIL = Cannot(
    lambda c: bool(c.attr("count_include_pad", 0)) and any(a.pool_windows(c).ceil_extra),
    "ceil_mode=1 with count_include_pad=1 needs padding past the end that ONNX leaves out of the divisor while "
    "counting the explicit pads; DirectML's AVERAGE_POOLING1 has one IncludePadding for all padding")
_COLUMN_MAJOR = Cannot(
    lambda c: c.outputs > 1 and bool(c.attr("storage_order", 0)),
    "storage_order=1 asks for column-major indices; DirectML's OutputIndicesTensor counts the input as a "
    "contiguous row-major array")
_RECURRENT_FIELDS = {
    "InputTensor": "X, with a leading size-1 axis", "WeightTensor": "W", "RecurrenceTensor": "R",
    "BiasTensor": "B", "HiddenInitTensor": "initial_h", "SequenceLengthsTensor": "sequence_lens (as UINT32)",
    "Direction": "direction: forward FORWARD, reverse BACKWARD, bidirectional BIDIRECTIONAL",
    "ActivationDescs": "activations with activation_alpha and activation_beta (default: ONNX's, which are dmlcli's)",
}
_RECURRENT_OWN = {
    "RNN": {},
    "GRU": {"LinearBeforeReset": "linear_before_reset"},
    "LSTM": {"CellMemInitTensor": "initial_c", "PeepholeTensor": "P", "UseClipThreshold": "clip given",
             "ClipThreshold": "clip", "CoupleInputForget": "input_forget"},
}


def _recurrent(onnx_op: str) -> Entry:
    cannot = () if onnx_op == "LSTM" else (
        Cannot(lambda c: c.attr("clip") is not None,
               f"ONNX's clip ({{clip}}) bounds the activations' inputs; DirectML's {onnx_op} has no clip threshold "
               "(only LSTM has ClipThreshold)", {"clip": "none"}),)
    return Entry(onnx_op, onnx_op, fields={**_RECURRENT_FIELDS, **_RECURRENT_OWN[onnx_op]},
                 keywords={"ActivationDescs": "activations"}, adapter=a.adapt_recurrent, cannot=cannot,
                 outside=(PADDED_RANK, "layout=1 (batch-major X, Y, Y_h): X's first two axes are swapped before the "
                          "call and the outputs' after it (DirectML would read them through Strides)",
                          "ONNX's outputs Y, Y_h (Y_c) are OutputSequenceTensor, OutputSingleTensor "
                          "(OutputCellSingleTensor) without its leading size-1 axis; the gate orders are the same"))


_QUANTIZATION_FIELDS = {
    "QuantizationType": "SCALE_ZERO_POINT with the zero point input, else SCALE",
    "QuantizationTensors": "the scale, then the zero point: per tensor { 1, ..., 1 }, per axis { 1, ..., C, ..., 1 } "
                           "(axis), blocked as ONNX gives them (the input's rank, D / block_size along axis)",
}
_QUANTIZATION_OUTSIDE = ("ONNX's 0-D or one-element (per tensor) and 1-D (per axis) scales and zero points take the "
                         "input's rank with sizes of 1 (reshapes)",)
_PARTIAL_BLOCKS = Cannot(aq.partial_blocks,
                         "block_size {block_size} does not divide the input's size along axis {axis}: ONNX pads the "
                         "last block, DirectML takes whole blocks only (ONNX Runtime's DirectML provider asks "
                         "K % block_size == 0: 'DML only supports perfect blocks')", {"block_size": 0, "axis": 1})
QUANTIZATION_ENTRIES = (
    Entry("QuantizeLinear", "QUANTIZE", fields=_QUANTIZATION_FIELDS, adapter=aq.adapt_quantize,
          outside=_QUANTIZATION_OUTSIDE + ("without a zero point the output type is ONNX's output_dtype (uint8 by "
                                           "default): --output-dtype",),
          cannot=(_PARTIAL_BLOCKS,
                  Cannot(aq.unwritable_output_type,
                         "ONNX's output_dtype {output_dtype} (a TensorProto code) is not a type DirectML's QUANTIZE "
                         "writes: 3 INT8, 22 INT4, 2 UINT8, 21 UINT4", {"output_dtype": 0}))),
    Entry("DequantizeLinear", "DEQUANTIZE", fields=_QUANTIZATION_FIELDS, adapter=aq.adapt_dequantize,
          outside=_QUANTIZATION_OUTSIDE,
          cannot=(_PARTIAL_BLOCKS,
                  Cannot(aq.other_dequantized_type,
                         "ONNX's output_dtype {output_dtype} differs from the scale's type; DirectML's DEQUANTIZE "
                         "writes the scale's type", {"output_dtype": 0}))),
    Entry("DynamicQuantizeLinear", "DYNAMIC_QUANTIZE_LINEAR", adapter=aq.adapt_dynamic_quantize,
          fields={"InputTensor": "x"},
          outside=("ONNX's 0-D y_scale and y_zero_point are one-element tensors of the input's rank in DirectML "
                   "(reshaped back); the output type is UINT8, ONNX's one",)),
)

_WINDOW = ("indices smaller than data off the axis: DirectML reads data through a window of the indices' Sizes "
           "(data's Strides), as ONNX Runtime's DirectML provider binds it; dmlcli gives the same view")
_STRIDED = ("DirectML has no {what} operator: ONNX Runtime's DirectML provider copies the input, read through an "
            "input DML_TENSOR_DESC with {strides} Strides, by ELEMENT_WISE_IDENTITY; dmlcli gives "
            "ELEMENT_WISE_IDENTITY the same strided view of the input")
_VIEW_ONLY = ("ELEMENT_WISE_IDENTITY does it only by reading the input through {strides} Strides, which dmlcli run "
              "does not take (it reads each tensor whole, at its own Sizes)")

PER_CHANNEL = "ONNX's 1-D per-channel tensors become {1, C, 1, ...} of the input's rank (a reshape)"


_PROVIDER_RESIZE = Cannot(lambda c: a.resize_differences(c) is not None,
                          lambda c: "ONNX Runtime's DirectML provider maps this Resize to other values than ONNX's "
                                    "reference: " + a.resize_differences(c))


def _resize(onnx_op: str) -> Entry:
    """Resize -> RESAMPLE3 and the deprecated Upsample (asymmetric coordinates, nearest_mode floor) -> RESAMPLE2, as
    ONNX Runtime's DirectML provider maps them (DmlOperatorResize.cpp: RESAMPLE3 from DML_TARGET_VERSION 0x6300)."""
    attr = (lambda c, name, default: c.attr(name, default)) if onnx_op == "Resize" else (lambda c, n, d: d)
    directml = "RESAMPLE3" if onnx_op == "Resize" else "RESAMPLE2"
    fields = {"InterpolationMode": "mode: nearest NEAREST_NEIGHBOR, linear LINEAR",
              "RoundingDirection": "nearest_mode: round_prefer_floor and ceil INCREASING (ceil), round_prefer_ceil "
                                   "and floor DECREASING (floor); linear: DECREASING (ignored)",
              "Scales": "scales, or sizes / input Sizes (keep_aspect_ratio_policy's common scale; align_corners: "
                        "(out - 1) / (in - 1); tf_crop_and_resize: (out - 1) / ((end - start) * (in - 1)))",
              "InputPixelOffsets": "coordinate_transformation_mode: half_pixel 0.5, asymmetric and align_corners 0, "
                                   "half_pixel_symmetric 0.5 - its offset, tf_crop_and_resize -start * (in - 1), "
                                   "each in float arithmetic in the provider's order; nearest_mode "
                                   "round_prefer_floor adds 0.5, round_prefer_ceil -0.5 (in float)",
              "OutputPixelOffsets": "half_pixel -0.5, asymmetric, align_corners and tf_crop_and_resize 0",
              "OutputTensor.Sizes": "floor(input Sizes * scales), or sizes (keep_aspect_ratio_policy applied)"}
    if onnx_op == "Resize":
        fields["Antialiased"] = "antialias (mode linear)"
    return Entry(
        onnx_op, directml, fields=fields, adapter=a.adapt_resize, differs=(_PROVIDER_RESIZE,),
        outside=("axes: the dimensions not named keep scale 1",
                 "tf_crop_and_resize: the roi input becomes Scales and InputPixelOffsets",
                 "past 4 dimensions: axes of size 1 in and out are dropped (as ONNX Runtime's DirectML provider "
                 "drops them), then neighbouring axes the resample leaves alone are merged (reshapes)",
                 "the Scales and offsets ONNX Runtime's DirectML provider computes (ComputePixelOffsetsAndScales), "
                 "bit for bit (its float arithmetic), where they differ from ONNX's reference too (differs: a "
                 "nearest coordinate exactly on its rounding boundary that the float fields move across is one)"),
        cannot=(
            Cannot(lambda c: str(attr(c, "mode", "nearest")) == "cubic",
                   "ONNX's mode cubic has no DirectML counterpart: DML_INTERPOLATION_MODE has NEAREST_NEIGHBOR and "
                   "LINEAR only"),
            Cannot(lambda c: bool(attr(c, "exclude_outside", 0)),
                   "ONNX's exclude_outside=1 gives the weights outside the input zero and renormalises; DirectML's "
                   f"{directml} repeats the edge element (it has no such field)"),
            Cannot(a.resize_extrapolates,
                   "ONNX's tf_crop_and_resize writes extrapolation_value where a coordinate falls outside the input, "
                   f"as one does here; DirectML's {directml} clamps coordinates to the input (it has no "
                   "extrapolation value)"),
        ))

_CONV_FIELDS = {"Strides": "strides (default 1)", "Dilations": "dilations (default 1)",
                "StartPadding": "pads[:n], or auto_pad's (SAME_UPPER: the smaller half first; SAME_LOWER: the "
                                "larger; VALID: 0)",
                "EndPadding": "pads[n:], or auto_pad's", "GroupCount": "group (default 1)"}
_CONV_OUTSIDE = ("auto_pad is ONNX-only: it is turned into StartPadding and EndPadding with ONNX's formula",
                 "kernel_shape is ONNX-only: the filter's Sizes give it",
                 "B (1-D, one value per output channel) becomes BiasTensor {1, M, 1, ...} (a reshape)")
_NEGATIVE_PADS = Cannot(lambda c: any(p < 0 for p in a.conv_paddings(c)[0] + a.conv_paddings(c)[1]),
                        "the paddings ONNX's attributes give are negative (a crop); DirectML's StartPadding and "
                        "EndPadding are UINT")
_MATMUL_OPERANDS = ("NumPy's matmul operands as GEMM's: a 1-D A is a row [1, K], a 1-D B a column [K, 1] (the "
                    "added axis removed from the result); leading 1s up to one rank; a broadcast batch is read at "
                    "its full Sizes, as DirectML reads a desc with zero Strides; past 4 dimensions the leading "
                    "batch dimensions are folded into one (DirectML's products take {BatchCount, ChannelCount, M, "
                    "K}; ONNX Runtime's DirectML provider folds them so, DmlOperatorMatMul.cpp)")

# ---- element-wise operators: ONNX's inputs broadcast (adapters_elementwise.py), each attribute a FLOAT field
BROADCAST = "ONNX's multidirectional broadcasting is NumPy's, which dmlcli's broadcast applies (zero Strides)"
# ONNX operator -> (DirectML operator, (DESC field, ONNX attribute, ONNX's default) ...)
_ELEMENTWISE: dict[str, tuple[str, tuple[tuple[str, str, float], ...]]] = {
    "Add": ("ELEMENT_WISE_ADD", ()), "Sub": ("ELEMENT_WISE_SUBTRACT", ()), "Mul": ("ELEMENT_WISE_MULTIPLY", ()),
    "Div": ("ELEMENT_WISE_DIVIDE", ()), "Pow": ("ELEMENT_WISE_POW", ()), "Max": ("ELEMENT_WISE_MAX", ()),
    "Min": ("ELEMENT_WISE_MIN", ()), "Mean": ("ELEMENT_WISE_MEAN", ()), "Sum": ("ELEMENT_WISE_ADD", ()),
    "Abs": ("ELEMENT_WISE_ABS", ()), "Neg": ("ELEMENT_WISE_NEGATE", ()), "Reciprocal": ("ELEMENT_WISE_RECIP", ()),
    "Sqrt": ("ELEMENT_WISE_SQRT", ()), "Exp": ("ELEMENT_WISE_EXP", ()), "Log": ("ELEMENT_WISE_LOG", ()),
    "Erf": ("ELEMENT_WISE_ERF", ()), "Floor": ("ELEMENT_WISE_FLOOR", ()), "Ceil": ("ELEMENT_WISE_CEIL", ()),
    "Sign": ("ELEMENT_WISE_SIGN", ()), "Sin": ("ELEMENT_WISE_SIN", ()), "Cos": ("ELEMENT_WISE_COS", ()),
    "Tan": ("ELEMENT_WISE_TAN", ()), "Asin": ("ELEMENT_WISE_ASIN", ()), "Acos": ("ELEMENT_WISE_ACOS", ()),
    "Atan": ("ELEMENT_WISE_ATAN", ()), "Sinh": ("ELEMENT_WISE_SINH", ()), "Cosh": ("ELEMENT_WISE_COSH", ()),
    "Asinh": ("ELEMENT_WISE_ASINH", ()), "Acosh": ("ELEMENT_WISE_ACOSH", ()), "Atanh": ("ELEMENT_WISE_ATANH", ()),
    "IsNaN": ("ELEMENT_WISE_IS_NAN", ()), "Not": ("ELEMENT_WISE_LOGICAL_NOT", ()),
    "And": ("ELEMENT_WISE_LOGICAL_AND", ()), "Or": ("ELEMENT_WISE_LOGICAL_OR", ()),
    "Xor": ("ELEMENT_WISE_LOGICAL_XOR", ()), "Equal": ("ELEMENT_WISE_LOGICAL_EQUALS", ()),
    "Less": ("ELEMENT_WISE_LOGICAL_LESS_THAN", ()), "Greater": ("ELEMENT_WISE_LOGICAL_GREATER_THAN", ()),
    "LessOrEqual": ("ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL", ()),
    "GreaterOrEqual": ("ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL", ()),
    "BitwiseAnd": ("ELEMENT_WISE_BIT_AND", ()), "BitwiseOr": ("ELEMENT_WISE_BIT_OR", ()),
    "BitwiseXor": ("ELEMENT_WISE_BIT_XOR", ()), "BitwiseNot": ("ELEMENT_WISE_BIT_NOT", ()),
    "Relu": ("ACTIVATION_RELU", ()), "Sigmoid": ("ACTIVATION_SIGMOID", ()), "Tanh": ("ACTIVATION_TANH", ()),
    "Softsign": ("ACTIVATION_SOFTSIGN", ()), "PRelu": ("ACTIVATION_PARAMETERIZED_RELU", ()),
    "Gelu": ("ACTIVATION_GELU", ()),
    "LeakyRelu": ("ACTIVATION_LEAKY_RELU", (("Alpha", "alpha", 0.01),)),
    "Elu": ("ACTIVATION_ELU", (("Alpha", "alpha", 1.0),)), "Celu": ("ACTIVATION_CELU", (("Alpha", "alpha", 1.0),)),
    "ThresholdedRelu": ("ACTIVATION_THRESHOLDED_RELU", (("Alpha", "alpha", 1.0),)),
    "Selu": ("ACTIVATION_SCALED_ELU", (("Alpha", "alpha", 1.67326319217681884765625),
                                       ("Gamma", "gamma", 1.05070102214813232421875))),
    "HardSigmoid": ("ACTIVATION_HARD_SIGMOID", (("Alpha", "alpha", 0.2), ("Beta", "beta", 0.5))),
    "HardSwish": ("ACTIVATION_HARD_SWISH", (("Alpha", "alpha", 1 / 6), ("Beta", "beta", 0.5))),
    "Shrink": ("ACTIVATION_SHRINK", (("Bias", "bias", 0.0), ("Threshold", "lambd", 0.5))),
}
_TWO_INPUTS = Cannot(lambda c: ae.variadic_count(c) != 2,
                     "dmlcli's ONNX table maps this node onto one two-input DirectML call; ONNX Runtime's DirectML "
                     "provider chains N - 1 of them for N inputs (the model runner's --fallback cpu runs it)")
_OWN_CANNOT: dict[str, tuple[Cannot, ...]] = {
    "Gelu": (Cannot(lambda c: str(c.attr("approximate", "none")) != "none",
                    "ONNX's approximate={approximate} asks for the tanh form of GELU; DirectML's ACTIVATION_GELU "
                    "computes the erf form only (it has no approximation field)", {"approximate": "none"}),),
    **{name: (_TWO_INPUTS,) for name in ("Sum", "Max", "Min", "Mean")},
}


_BINARY = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Mean", "Sum", "And", "Or", "Xor", "Equal", "Less", "Greater",
           "LessOrEqual", "GreaterOrEqual", "BitwiseAnd", "BitwiseOr", "BitwiseXor"}
_OWN_TENSORS = {"Pow": {"InputTensor": "X", "ExponentTensor": "Y"},
                "PRelu": {"InputTensor": "X", "SlopeTensor": "slope"}}


def _elementwise(onnx_op: str, directml: str, attributes) -> Entry:
    tensors = ({"ATensor": "A (or the first input)", "BTensor": "B (or the second)"} if onnx_op in _BINARY
               else _OWN_TENSORS.get(onnx_op, {"InputTensor": "X"}))
    fields = {**tensors, **{field: f"{name} (default {default:g})" for field, name, default in attributes}}
    return Entry(onnx_op, directml, fields=fields, adapter=ae.elementwise(*attributes), outside=(BROADCAST,),
                 cannot=_OWN_CANNOT.get(onnx_op, ()), value_inputs=())


ELEMENTWISE_ENTRIES: tuple[Entry, ...] = (
    *(_elementwise(name, directml, attributes) for name, (directml, attributes) in _ELEMENTWISE.items()),
    Entry("Mod", "ELEMENT_WISE_MODULUS_FLOOR", adapter=ae.elementwise(), outside=(BROADCAST,), value_inputs=(),
          fields={"ATensor": "A", "BTensor": "B (fmod=0: the remainder takes the divisor's sign)"}),
    Entry("Mod", "ELEMENT_WISE_MODULUS_TRUNCATE", selects=lambda c: bool(c.attr("fmod", 0)), adapter=ae.elementwise(),
          outside=(BROADCAST,), value_inputs=(),
          fields={"ATensor": "A", "BTensor": "B (fmod=1: the remainder takes the dividend's sign)"}),
    Entry("BitShift", "ELEMENT_WISE_BIT_SHIFT_LEFT", adapter=ae.elementwise(), outside=(BROADCAST,),
          selects=lambda c: str(c.attr("direction", "")) == "LEFT", fields={"ATensor": "X", "BTensor": "Y"},
          value_inputs=()),
    Entry("BitShift", "ELEMENT_WISE_BIT_SHIFT_RIGHT", adapter=ae.elementwise(), outside=(BROADCAST,),
          fields={"ATensor": "X", "BTensor": "Y (direction RIGHT)"}, value_inputs=(),
          command_line="its direction attribute, which has no default, picks the operator: run bit_shift_left "
                       "(LEFT) or bit_shift_right (RIGHT)"),
    Entry("Round", "ELEMENT_WISE_ROUND", fields={"InputTensor": "X"}, fixed={"RoundingMode": "HALVES_TO_NEAREST_EVEN"},
          adapter=ae.elementwise(), value_inputs=()),
    Entry("IsInf", "ELEMENT_WISE_IS_INFINITY",
          fields={"InputTensor": "X",
                  "InfinityMode": "detect_positive and detect_negative: both EITHER, one POSITIVE or NEGATIVE"},
          adapter=ae.adapt_is_inf, value_inputs=(),
          cannot=(Cannot(ae.detects_nothing, "ONNX's detect_positive=0 and detect_negative=0 ask for all false; "
                                             "DirectML's IS_INFINITY has no InfinityMode that detects nothing"),)),
    Entry("Clip", "ELEMENT_WISE_CLIP1",
          fields={"InputTensor": "input", "MinMaxDataType": "the input's type",
                  "Min": "the min input (opset 11; an attribute before), "
                  "default the type's lowest", "Max": "the max input, default the type's highest"},
          adapter=ae.adapt_clip, value_inputs=(1, 2)),
    Entry("Cast", "CAST", fields={"InputTensor": "input (OutputTensor's type is `to`, a TensorProto code)"},
          adapter=ae.adapt_cast, value_inputs=(),
          cannot=(Cannot(ae.casts_to_bool,
                         "ONNX's Cast to bool gives 1 for every non-zero value; DirectML has no bool type and its CAST "
                         "to UINT8 converts the value (0.5 becomes 0)"),
                  Cannot(ae.casts_to_another_type,
                         "ONNX's Cast to type {to} (a TensorProto code: strings, bfloat16, the float8 types) has no "
                         "DirectML data type (DML_TENSOR_DATA_TYPE: FLOAT16/32/64, 8- to 64-bit integers, INT4/UINT4)",
                         {"to": 0}))),
    Entry("ConstantOfShape", "FILL_VALUE_CONSTANT",
          fields={"Value": "value (default float32 0)", "OutputTensor.Sizes": "the input"},
          adapter=ae.adapt_constant_of_shape,
          cannot=(Cannot(ae.fills_nothing, "ONNX's shape holds a zero (an empty output); DirectML rejects a size of "
                                           "zero in any dimension"),)),
)

# ---- the graph's plumbing, which ONNX Runtime's DirectML provider runs with no DirectML operator
_NO_OPERATOR = ("ONNX Runtime's DirectML provider runs {op} with no DirectML operator ({how}); the model runner "
                "(dmlcli onnx) does the same, and there is no DirectML operator for a node test to check")
_BUFFER = "the output is the input's buffer with other Sizes"


def _view(onnx_op: str, view, how: str = _BUFFER, cannot: tuple[Cannot, ...] = (),
          value_inputs: tuple[int, ...] | None = None) -> Entry:
    return Entry(onnx_op, None, view=view, reason=_NO_OPERATOR.format(op=onnx_op, how=how), cannot=cannot,
                 value_inputs=value_inputs)


VIEW_ENTRIES: tuple[Entry, ...] = (
    _view("Reshape", ae.view_reshape, value_inputs=(1,)), _view("Flatten", ae.view_flatten, value_inputs=()),
    _view("Squeeze", ae.view_squeeze, value_inputs=(1,)), _view("Unsqueeze", ae.view_unsqueeze, value_inputs=(1,)),
    _view("Identity", ae.view_identity, value_inputs=()),
    _view("Dropout", ae.view_dropout, "in inference it is its input, and its mask all true",
          (Cannot(ae.trains, "ONNX's Dropout with training_mode true drops elements at random; DirectML has no "
                             "random dropout operator"),)),
    _view("Shape", ae.view_shape, "the Sizes are known on the CPU"),
    _view("Size", ae.view_size, "the Sizes are known on the CPU"),
    _view("Constant", ae.view_constant, "the value is an initializer"),
)

ENTRIES: tuple[Entry, ...] = (
    _reduce("ReduceSum", "SUM"), _reduce("ReduceMean", "AVERAGE"), _reduce("ReduceMax", "MAX"),
    _reduce("ReduceMin", "MIN"), _reduce("ReduceProd", "MULTIPLY"), _reduce("ReduceL1", "L1"),
    _reduce("ReduceL2", "L2"), _reduce("ReduceLogSum", "LOG_SUM"), _reduce("ReduceLogSumExp", "LOG_SUM_EXP"),
    _reduce("ReduceSumSquare", "SUM_SQUARE"),
    _arg("ArgMax", "ARGMAX"), _arg("ArgMin", "ARGMIN"),
    _axis_activation("Softmax", "ACTIVATION_SOFTMAX1"), _axis_activation("LogSoftmax", "ACTIVATION_LOG_SOFTMAX1"),
    _axis_activation("Hardmax", "ACTIVATION_HARDMAX1"),
    Entry("Concat", "JOIN", fields={"InputTensors": "the inputs, in order", "Axis": "axis"},
          adapter=a.adapt_concat, outside=(NEGATIVE_AXIS,), value_inputs=()),
    Entry("Split", "SPLIT", fields={"Axis": "axis (default 0)",
                                    "OutputTensors.Sizes": "the split input; else num_outputs (opset 18: pieces of "
                                                           "ceil(n / num_outputs), the last smaller); else equal "
                                                           "pieces, one per output"},
          adapter=a.adapt_split,
          outside=(NEGATIVE_AXIS, "the pieces' sizes, which DirectML reads from the OutputTensors' Sizes, are "
                                  "computed from split/num_outputs as ONNX defines them")),
    Entry("Slice", "SLICE1",
          fields={"InputWindowOffsets": "starts (clamped as ONNX clamps them), per axis in axes",
                  "InputWindowSizes": "the span from the first to the last element read (ends, steps)",
                  "InputWindowStrides": "steps (negative: SLICE1 copies from the window's end)"},
          adapter=a.adapt_slice, value_inputs=(1, 2, 3, 4),
          cannot=(Cannot(lambda c: any(count == 0 for _, _, count, _ in a.slice_ranges(c)),
                         "ONNX's slice is empty along an axis; DirectML's SLICE1 window must not be empty (its "
                         "OutputTensor Sizes are at least 1)"),),
          outside=("ONNX's out-of-range starts/ends are clamped to the axis (ONNX's own rule) before the window is "
                   "computed", NEGATIVE_AXIS)),
    Entry("Pad", "PADDING1",
          fields={"PaddingMode": "mode: constant CONSTANT, edge EDGE, reflect REFLECTION, wrap WRAP (6_4)",
                  "StartPadding": "pads[:n], per axis in axes (others 0)", "EndPadding": "pads[n:]",
                  "PaddingValue": "the constant_value input (default 0), in the tensor's own type"},
          adapter=a.adapt_pad,
          cannot=(Cannot(lambda c: any(pad < 0 for pad in a.pad_amounts(c)),
                         "ONNX's negative pads crop the input; DirectML's StartPadding and EndPadding are UINT "
                         "(padding only)"),
                  Cannot(lambda c: str(c.attr("mode", "constant")) not in a.PAD_MODES,
                         "DirectML has no padding mode for ONNX's Pad mode {mode} (DML_PADDING_MODE: CONSTANT, "
                         "EDGE, REFLECTION, SYMMETRIC, WRAP)", {"mode": "constant"}),
                  Cannot(a.wraps_past_the_input,
                         "ONNX's wrap pads more than the input's size along an axis (numpy.pad repeats the input); "
                         "DirectML documents no result for PADDING1's WRAP past one copy of the input")),
          outside=(NEGATIVE_AXIS, "pads given for some axes are expanded to every axis")),
    Entry("Tile", "TILE", fields={"Repeats": "the repeats input"}, adapter=a.adapt_tile,
          cannot=(Cannot(lambda c: bool((c.input(1) == 0).any()),
                         "ONNX's repeats of 0 empty an axis; DirectML's TILE Repeats must be larger than 0"),)),
    Entry("Gather", "GATHER", fields={"Axis": "axis (+ the leading 1s added)", "IndexDimensions": "the indices' rank"},
          adapter=a.adapt_gather, cannot=(_past_rank_8(a.gather_shape),), value_inputs=(),
          outside=(NEGATIVE_AXIS, PADDED_RANK, INT64_INDICES)),
    Entry("GatherElements", "GATHER_ELEMENTS", fields={"Axis": "axis"}, adapter=a.adapt_gather_elements,
          outside=(NEGATIVE_AXIS, INT64_INDICES, _WINDOW)),
    Entry("GatherND", "GATHER_ND1", fields={"InputDimensionCount": "data's rank",
                                            "IndicesDimensionCount": "the indices' rank",
                                            "BatchDimensionCount": "batch_dims"},
          adapter=a.adapt_gather_nd, cannot=(_past_rank_8(a.gather_nd_shape),),
          outside=(PADDED_RANK, INT64_INDICES)),
    Entry("ScatterElements", "SCATTER_ELEMENTS", fields={"Axis": "axis (reduction must be none)"},
          adapter=a.adapt_scatter_elements, outside=(NEGATIVE_AXIS, INT64_INDICES),
          cannot=(_reduction_attribute("SCATTER_ELEMENTS"),
                  Cannot(lambda c: a.indices_window(c) is not None,
                         "ONNX's indices are smaller than data off the axis; DirectML's SCATTER_ELEMENTS wants "
                         "IndicesTensor's Sizes equal to InputTensor's off Axis, and reading data through a window "
                         "of the indices' Sizes (as GatherElements does) would leave the rest of the output, which "
                         "must be all of data, unwritten"))),
    Entry("ScatterND", "SCATTER_ND", fields={"InputDimensionCount": "data's rank",
                                             "IndicesDimensionCount": "the indices' rank (reduction must be none)"},
          adapter=a.adapt_scatter_nd, cannot=(_reduction_attribute("SCATTER_ND"),), outside=(PADDED_RANK, INT64_INDICES)),
    Entry("OneHot", "ONE_HOT", fields={"Axis": "axis (default -1, of the output's rank)",
                                       "OutputTensor.Sizes": "the depth input, as the axis' size"},
          adapter=a.adapt_one_hot,
          cannot=(Cannot(lambda c: c.input(0).dtype.kind == "f",
                         "ONNX's indices here are float; DirectML's ONE_HOT IndicesTensor is an integer tensor at "
                         "every level (INT64, INT32, UINT64, UINT32)"),
                  Cannot(lambda c: bool((c.input(0).astype(np.int64) < -a.one_hot_depth(c)).any()),
                         "an index lies below -depth, where ONNX gives off_value throughout; DirectML's ONE_HOT "
                         "page says only that indices past the sequence are ignored and negative ones count from "
                         "the end")),
          outside=(NEGATIVE_AXIS, "ONNX inserts the one-hot axis: IndicesTensor gets a size-1 axis there and "
                                  "ValuesTensor [off, on] the output's rank (reshapes)")),
    Entry("TopK", "TOP_K1", fields={"Axis": "axis (default -1)", "K": "the k input",
                                    "AxisDirection": "largest: 1 DECREASING, 0 INCREASING"},
          adapter=a.adapt_top_k,
          cannot=(Cannot(_top_k_whole_axis, "ONNX's k is the whole axis; DirectML's TOP_K1 says K must be less "
                                            "than the number of elements along Axis"),),
          outside=(NEGATIVE_AXIS, "ONNX's int64 indices: OutputIndexTensor UINT64 (from 5_0), the same bits for "
                                  "indices below 2^63, compared as int64",
                   "sorted=0 leaves the order free in ONNX (DirectML always sorts): values and indices are "
                   "compared as sets of (value, index) pairs, each slice ordered by index on both sides"),
          free_order=a.top_k_free_order),
    Entry("DepthToSpace", "DEPTH_TO_SPACE1", fields={"BlockSize": "blocksize",
                                                     "Order": "mode: DCR DEPTH_COLUMN_ROW, CRD COLUMN_ROW_DEPTH"},
          adapter=a.adapt_depth_space),
    Entry("SpaceToDepth", "SPACE_TO_DEPTH1", fields={"BlockSize": "blocksize",
                                                     "Order": "mode (default DCR): DCR DEPTH_COLUMN_ROW, CRD "
                                                              "COLUMN_ROW_DEPTH"},
          adapter=a.adapt_depth_space),
    Entry("CumSum", "CUMULATIVE_SUMMATION", fields={"Axis": "the axis input", "AxisDirection": "reverse: 1 DECREASING",
                                                    "HasExclusiveSum": "exclusive"},
          adapter=a.adapt_cumulative, outside=(NEGATIVE_AXIS,)),
    Entry("CumProd", "CUMULATIVE_PRODUCT", fields={"Axis": "the axis input", "AxisDirection": "reverse: 1 DECREASING",
                                                   "HasExclusiveProduct": "exclusive"},
          adapter=a.adapt_cumulative, outside=(NEGATIVE_AXIS,)),
    Entry("ReverseSequence", "REVERSE_SUBSEQUENCES",
          fields={"Axis": "time_axis", "SequenceLengthsTensor": "sequence_lens along batch_axis"},
          adapter=a.adapt_reverse_sequence,
          outside=("ONNX's 1-D sequence_lens becomes a tensor of the input's rank (size 1 on the time axis, each "
                   "length repeated over the other axes), int64 lengths as UINT64 (the same values)",)),
    Entry("NonZero", "NONZERO_COORDINATES", fields={"InputTensor": "X"}, adapter=a.adapt_nonzero,
          outside=("DirectML writes a count and M rows of UINT32 coordinates: the first `count` rows, transposed "
                   "and read as int64, are ONNX's output",)),
    Entry("EyeLike", "DIAGONAL_MATRIX", fields={"Offset": "k", "Value": "1",
                                                "OutputTensor.Sizes": "the input's Sizes"},
          adapter=a.adapt_eye_like, outside=("the output type is dtype (a TensorProto code) or the input's",)),
    Entry("Trilu", "DIAGONAL_MATRIX1",
          fields={"InputTensor": "the input", "Value": "0",
                  "DiagonalFillBegin": "upper=1: INT32_MIN; upper=0: k + 1",
                  "DiagonalFillEnd": "upper=1: k; upper=0: INT32_MAX"},
          adapter=a.adapt_trilu,
          cannot=(Cannot(lambda c: not all(a.INT32_MIN <= v <= a.INT32_MAX for v in a.trilu_bounds(c)),
                         "ONNX's k lies outside the INT range of DirectML's DiagonalFillBegin and "
                         "DiagonalFillEnd"),)),
    Entry("Range", "FILL_VALUE_SEQUENCE", fields={"ValueStart": "start", "ValueDelta": "delta",
                                                  "OutputTensor.Sizes": "max(ceil((limit - start) / delta), 0)"},
          adapter=a.adapt_range,
          outside=("ONNX's output length depends on the values; DirectML takes it from the OutputTensor's Sizes, "
                   "computed as ONNX defines it",)),
    # ONNX's Softplus is ln(exp(x) + 1): DirectML's ln(1 + exp(Steepness * x)) / Steepness at Steepness 1.
    Entry("Softplus", "ACTIVATION_SOFTPLUS", fields={"InputTensor": "X"}, fixed={"Steepness": 1.0},
          adapter=a.adapt_one_input, value_inputs=()),
    Entry("Where", "ELEMENT_WISE_IF", fields={"ConditionTensor": "condition (bool, stored as UINT8 0/1)", "ATensor": "X",
                                 "BTensor": "Y"},
          adapter=a.adapt_where,
          outside=("ONNX's multidirectional broadcasting is NumPy's, which dmlcli's broadcast applies",)),
    Entry("Expand", "ELEMENT_WISE_IDENTITY", fields={"InputTensor": "the input at the broadcast Sizes, zero Strides"},
          adapter=ae.adapt_expand, outside=(_STRIDED.format(what="broadcasting", strides="zero"),),
          value_inputs=(1,), command_line=_VIEW_ONLY.format(strides="zero")),
    Entry("Transpose", "ELEMENT_WISE_IDENTITY", fields={"InputTensor": "the input through permuted Strides (perm)"},
          adapter=ae.adapt_transpose, outside=(_STRIDED.format(what="transpose", strides="permuted"),),
          value_inputs=(), command_line=_VIEW_ONLY.format(strides="permuted")),
    Entry("RotaryEmbedding", None,
          reason="DirectML has no rotary embedding operator (DML_OPERATOR_TYPE up to 0x6400 has none): ONNX Runtime's "
                 "DirectML provider builds it from other operators (slices, multiplications, additions, joins) in a "
                 "graph, which `dmlcli test` does not run"),
    # ---- normalization and resampling
    Entry("BatchNormalization", "BATCH_NORMALIZATION",
          fields={"InputTensor": "X", "MeanTensor": "input_mean", "VarianceTensor": "input_var",
                  "ScaleTensor": "scale", "BiasTensor": "B", "Epsilon": "epsilon (default 1e-5)"},
          fixed={"Spatial": True}, adapter=a.adapt_batch_normalization, outside=(PER_CHANNEL,), value_inputs=()),
    Entry("BatchNormalization", "BATCH_NORMALIZATION_TRAINING", selects=lambda c: bool(c.attr("training_mode", 0)),
          fields={"InputTensor": "X", "ScaleTensor": "scale", "BiasTensor": "B", "Epsilon": "epsilon (default 1e-5)"},
          adapter=t.adapt_batch_normalization_training,
          outside=(PER_CHANNEL, "ONNX's running_mean and running_var are OutputMeanTensor and OutputVarianceTensor "
                                "{1, C, 1, ...}, reshaped to 1-D; input_mean and input_var are not read (momentum 0)"),
          cannot=(Cannot(t.blends_running_statistics,
                         "ONNX's training_mode=1 blends running_mean and running_var with momentum {momentum}: "
                         "input_mean * momentum + batch mean * (1 - momentum); DirectML's "
                         "BATCH_NORMALIZATION_TRAINING writes the batch's own mean and variance and has no momentum "
                         "or running statistics", {"momentum": 0.9}),)),
    Entry("InstanceNormalization", "MEAN_VARIANCE_NORMALIZATION1",
          fields={"InputTensor": "input", "ScaleTensor": "scale", "BiasTensor": "B",
                  "Axes": "{2, ..., rank - 1}", "Epsilon": "epsilon (default 1e-5)"},
          fixed={"NormalizeVariance": True}, adapter=a.adapt_instance_normalization, outside=(PER_CHANNEL,),
          value_inputs=()),
    Entry("LayerNormalization", "MEAN_VARIANCE_NORMALIZATION1",
          fields={"InputTensor": "X", "ScaleTensor": "Scale", "BiasTensor": "B (zeros where left out)",
                  "Axes": "{axis, ..., rank - 1} (axis default -1)", "Epsilon": "epsilon (default 1e-5)"},
          fixed={"NormalizeVariance": True}, adapter=a.adapt_layer_normalization, value_inputs=(),
          outside=(NEGATIVE_AXIS, "Scale and B get leading size-1 axes up to X's rank (a reshape)"),
          cannot=(Cannot(lambda c: c.outputs > 1,
                         "ONNX's LayerNormalization case also expects the Mean and InvStdDev outputs; DirectML's "
                         "MEAN_VARIANCE_NORMALIZATION1 writes only the normalised output"),)),
    Entry("RMSNormalization", "MEAN_VARIANCE_NORMALIZATION2",
          fields={"InputTensor": "X", "ScaleTensor": "scale", "Axes": "{axis, ..., rank - 1} (axis default -1)",
                  "Epsilon": "epsilon (default 1e-5)"},
          fixed={"UseMean": False, "UseVariance": True}, adapter=an.adapt_rms_normalization,
          outside=(NEGATIVE_AXIS, "scale gets leading size-1 axes up to X's rank (a reshape); BiasTensor is left "
                                  "out (null)")),
    Entry("GroupNormalization", "MEAN_VARIANCE_NORMALIZATION1",
          fields={"InputTensor": "X as {N, num_groups, C / num_groups, D1, ...}",
                  "ScaleTensor": "scale as {1, num_groups, C / num_groups, 1, ...} (opset 18's one value per group: "
                                 "{1, num_groups, 1, ...})",
                  "BiasTensor": "bias, as scale", "Axes": "{2, ..., rank}", "Epsilon": "epsilon (default 1e-5)"},
          fixed={"NormalizeVariance": True}, adapter=an.adapt_group_normalization,
          outside=("X's channel axis is split into num_groups groups of C / num_groups channels (a reshape), the "
                   "output joined back to X's Sizes", "scale and bias, one per channel, are reshaped to the grouped "
                   "view's channel axes"),
          cannot=(Cannot(lambda c: an.group_normalization_rank(c) > a.MAX_RANK,
                         "X split into groups needs more than 8 dimensions; DirectML tensors have 1 to 8"),)),
    Entry("MeanVarianceNormalization", "MEAN_VARIANCE_NORMALIZATION1",
          fields={"InputTensor": "X", "Axes": "axes (default {0, 2, 3})"},
          fixed={"NormalizeVariance": True, "Epsilon": 0.0}, adapter=a.adapt_mean_variance_normalization,
          outside=(NEGATIVE_AXIS, "ONNX divides by sqrt(Variance) + 1e-9; Epsilon 0 gives sqrt(Variance), the same "
                                  "within the tolerance for any non-constant input")),
    Entry("LRN", "LOCAL_RESPONSE_NORMALIZATION",
          fields={"LocalSize": "size", "Alpha": "alpha (default 1e-4)", "Beta": "beta (default 0.75)",
                  "Bias": "bias (default 1)"},
          fixed={"CrossChannel": True}, adapter=a.adapt_lrn),
    Entry("LpNormalization", "LP_NORMALIZATION", fields={"Axis": "axis (default -1)", "P": "p (default 2)"},
          adapter=a.adapt_lp_normalization,
          outside=(NEGATIVE_AXIS, "Epsilon keeps its default 1e-5: ONNX divides by the norm itself, the same "
                                  "wherever the norm exceeds 1e-5")),
    _resize("Resize"), _resize("Upsample"),
    # ---- matrix multiplication
    Entry("Gemm", "GEMM", fields={"ATensor": "A", "BTensor": "B", "CTensor": "C (leading 1s up to 2-D)",
                                  "TransA": "transA", "TransB": "transB", "Alpha": "alpha", "Beta": "beta"},
          adapter=a.adapt_gemm, value_inputs=(),
          outside=("C gets leading size-1 axes up to 2-D; GEMM broadcasts its sizes of 1 to [M, N] (DirectML: a "
                   "CTensor desc with zero Strides)",)),
    # ONNX's Gemm takes a 2-D A; one of another rank comes only from ONNX Runtime's MatMulAddFusion
    # (onnxruntime/core/optimizer/matmul_add_fusion.cc), which wraps the Gemm in Reshape nodes (dmlcli onnx's
    # fusions.py, on by default: the DirectML provider runs what that fusion leaves).
    Entry("Gemm", "GEMM", fields={"ATensor": "A reshaped to [M, K]", "BTensor": "B", "CTensor": "C (1-D [N])",
                                  "TransA": "transA (the fusion sets none: 0)", "TransB": "transB (0)",
                                  "Alpha": "alpha (1)", "Beta": "beta (1)"},
          adapter=a.adapt_gemm_of_rank, value_inputs=(),
          selects=lambda c: c.input(0) is not None and c.input(0).ndim != 2,
          outside=("MatMulAddFusion's Reshape nodes: A of Sizes [..., K] viewed as [M, K] (M the product of the "
                   "leading Sizes), the [M, N] result as [..., N]",
                   "C gets a leading size-1 axis (GEMM broadcasts it to [M, N] with zero Strides)")),
    Entry("MatMul", "GEMM", fields={"ATensor": "A", "BTensor": "B"},
          fixed={"TransA": "NONE", "TransB": "NONE", "Alpha": 1.0, "Beta": 1.0}, adapter=a.adapt_matmul,
          value_inputs=(),
          outside=(_MATMUL_OPERANDS,)),
    Entry("MatMulInteger", "MATRIX_MULTIPLY_INTEGER",
          fields={"ATensor": "A", "BTensor": "B", "AZeroPointTensor": "a_zero_point (0 when left out)",
                  "BZeroPointTensor": "b_zero_point (0 when left out)"},
          adapter=a.adapt_matmul_integer,
          outside=(_MATMUL_OPERANDS, "a left-out zero point is given as a zero of its tensor's type")),
    Entry("QLinearMatMul", "QUANTIZED_LINEAR_MATRIX_MULTIPLY",
          fields={"ATensor": "a", "AScaleTensor": "a_scale", "AZeroPointTensor": "a_zero_point", "BTensor": "b",
                  "BScaleTensor": "b_scale", "BZeroPointTensor": "b_zero_point", "OutputScaleTensor": "y_scale",
                  "OutputZeroPointTensor": "y_zero_point"},
          adapter=a.adapt_qlinear_matmul,
          outside=(_MATMUL_OPERANDS, "scalar scales and zero points are 1-D {1}")),
    # ---- convolution
    Entry("Conv", "CONVOLUTION", fields={**_CONV_FIELDS, "OutputPadding": "0 (ONNX's Conv has none)"}, fixed={"Mode": "CROSS_CORRELATION", "Direction": "FORWARD"},
          adapter=a.adapt_conv, cannot=(_NEGATIVE_PADS,), outside=_CONV_OUTSIDE, value_inputs=()),
    Entry("ConvTranspose", "CONVOLUTION",
          fields={**_CONV_FIELDS, "OutputPadding": "output_padding; with output_shape (or auto_pad SAME_*), any "
                                                   "negative end padding ONNX's formula gives, as a lengthening"},
          fixed={"Mode": "CROSS_CORRELATION", "Direction": "BACKWARD"}, adapter=a.adapt_conv,
          cannot=(_NEGATIVE_PADS,), value_inputs=(),
          outside=_CONV_OUTSIDE + ("output_shape is ONNX-only: the paddings it implies are computed with ONNX's "
                                   "formula (total = stride x (in - 1) + output_padding + dilated kernel - "
                                   "output_shape, split by auto_pad); DirectML then computes the same Sizes",)),
    Entry("ConvInteger", "CONVOLUTION_INTEGER", fields={k: v for k, v in _CONV_FIELDS.items()},
          adapter=a.adapt_conv_integer, cannot=(_NEGATIVE_PADS,),
          outside=_CONV_OUTSIDE + ("left-out zero points are given as one zero of the tensor's type (the same "
                                   "result); w_zero_point per channel becomes {1, M, 1, 1}",)),
    Entry("QLinearConv", "QUANTIZED_LINEAR_CONVOLUTION", fields=_CONV_FIELDS, adapter=a.adapt_qlinear_conv,
          cannot=(_NEGATIVE_PADS,),
          outside=_CONV_OUTSIDE + ("scales and zero points become {1, 1, 1, 1} (per channel: {1, M, 1, 1}); a "
                                   "left-out B is an INT32 zero bias {1, M, 1, 1} (the same result)",)),
    # ---- pooling
    Entry("AveragePool", "AVERAGE_POOLING1", fields=_POOL_FIELDS | {"Dilations": "dilations (default 1)",
                                                                   "IncludePadding": "count_include_pad"},
          adapter=a.adapt_pool, cannot=(_AVERAGE_CEIL,), outside=_POOL_OUTSIDE, value_inputs=(),
          rounded_expected={"test_averagepool_2d_ceil_last_window_starts_on_pad":
                            "ONNX's expected values are written with 4 decimals (0.1511 for 1.3595 / 9)"}),
    Entry("MaxPool", "MAX_POOLING2", fields=_POOL_FIELDS | {"Dilations": "dilations (default 1)"},
          adapter=a.adapt_pool, cannot=(_COLUMN_MAJOR,), value_inputs=(),
          outside=_POOL_OUTSIDE + ("MAX_POOLING2 (dmlcli's) always writes OutputIndicesTensor (UINT64, 5_0): ONNX's "
                                   "Indices read as int64 (the same bits)",)),
    # ONNX Runtime's DirectML provider (DmlOperatorPooling.cpp) takes MAX_POOLING2 only for the Indices output or
    # dilations, and the plain MAX_POOLING otherwise ("the old pooling command, which supports potential
    # metacommands").
    Entry("MaxPool", "MAX_POOLING", selects=a.plain_max_pool, fields=_POOL_FIELDS, adapter=a.adapt_pool,
          value_inputs=(),
          outside=_POOL_OUTSIDE + ("Y alone, no dilations: MAX_POOLING, as ONNX Runtime's DirectML provider "
                                   "chooses",)),
    Entry("LpPool", "LP_POOLING1", fields=_POOL_FIELDS | {"Dilations": "dilations (default 1)", "P": "p (default 2)"},
          adapter=a.adapt_pool, outside=_POOL_OUTSIDE, value_inputs=()),
    Entry("GlobalAveragePool", "AVERAGE_POOLING",
          fields=_GLOBAL_FIELDS, fixed={"IncludePadding": False},
          adapter=a.adapt_pool, outside=(_ONE_D,), value_inputs=()),
    Entry("GlobalMaxPool", "MAX_POOLING", fields=_GLOBAL_FIELDS,
          adapter=a.adapt_pool, outside=(_ONE_D,), value_inputs=()),
    Entry("MaxUnpool", "MAX_UNPOOLING", fields={"OutputTensor.Sizes": "output_shape, else (in - 1) * strides + "
                                                                      "kernel_shape - pads"},
          adapter=a.adapt_max_unpool, outside=(INT64_INDICES.replace("INT64", "UINT64 (5_0)"),)),
    Entry("RoiAlign", "ROI_ALIGN1",
          fields={"SpatialScaleX": "spatial_scale", "SpatialScaleY": "spatial_scale",
                  "InputPixelOffset": "coordinate_transformation_mode: half_pixel 0.5, output_half_pixel 0",
                  "ReductionFunction": "mode: avg AVERAGE, max MAX",
                  "MinimumSamplesPerOutput": "sampling_ratio (0: 1)",
                  "MaximumSamplesPerOutput": "sampling_ratio (0: UINT_MAX, ONNX's adaptive count)",
                  "OutputTensor.Sizes": "{ num_rois, C, output_height, output_width }"},
          fixed={"OutputPixelOffset": -0.5, "InterpolationMode": "LINEAR", "OutOfBoundsInputValue": 0.0,
                 "AlignRegionsToCorners": False},
          adapter=a.adapt_roi_align,
          cannot=(Cannot(lambda c: str(c.attr("mode", "avg")) == "max",
                         "ONNX's max mode takes the largest of each sample's four weighted bilinear terms (w * v), "
                         "not the largest interpolated value that DirectML's ROI_ALIGN1 pseudo-code reduces"),
                  Cannot(a.roi_align_small_region,
                         "output_half_pixel widens a region narrower than 1 to 1 in ONNX; DirectML's ROI_ALIGN1 "
                         "samples the region as it is")),
          outside=("ONNX's int64 batch_indices are given as DirectML's UINT64 BatchIndicesTensor (5_0), the same "
                   "bits",),
          rounded_expected={name: "ONNX's expected values are written with 4 decimals"
                            for name in ("test_roialign_aligned_false", "test_roialign_aligned_true")}),
    # ---- attention
    Entry("Attention", "MULTIHEAD_ATTENTION1",
          fields={"QueryTensor": "Q (4-D: {B, heads, S, size} transposed to {B, S, heads * size})",
                  "KeyTensor": "K (likewise)", "ValueTensor": "V (likewise)",
                  "RelativePositionBiasTensor": "a float attn_mask (leading 1s up to 4-D; keys past a short "
                                                "mask: -inf, ONNX's rule)",
                  "MaskTensor": "a boolean attn_mask, is_causal, left/right_window_size and nonpad_kv_seqlen as "
                                "one INT32 mask (1: attend), or nonpad_kv_seqlen alone as {1, B} key lengths",
                  "MaskType": "BOOLEAN, KEY_SEQUENCE_LENGTH (nonpad_kv_seqlen alone) or NONE",
                  "MaskFilterValue": "-inf (ONNX adds -inf where a boolean mask is false)",
                  "PastKeyTensor": "past_key", "PastValueTensor": "past_value",
                  "Scale": "scale (default 1 / sqrt(head size))",
                  "QueryHeadCount": "q_num_heads, or Q's heads (4-D)", "KeyValueHeadCount": "kv_num_heads, or K's "
                                                                                           "heads (4-D)"},
          adapter=aa.adapt_attention,
          outside=("4-D Q, K, V are transposed to DirectML's {batch, sequence, heads * size} and Y back (ONNX's "
                   "own reshape of 3-D inputs is DirectML's layout); present_key and present_value are DirectML's "
                   "{batch, heads, past + sequence, size} as they are",
                   "ONNX's causal frontier (bottom-right: query i sees key j <= i + past, or + nonpad_kv_seqlen - "
                   "sequence), its windows and nonpad_kv_seqlen's padding are written into the boolean mask, as "
                   "ONNX Runtime's DirectML provider hands causality to MULTIHEAD_ATTENTION as a mask",
                   "ONNX's bool attn_mask (written as uint8) is the INT32 mask's 0/1; a mask of rank below 4 gets "
                   "leading 1s (ONNX's right-aligned broadcast)"),
          cannot=(
              Cannot(lambda c: c.attr("softcap") is not None and float(c.attr("softcap")) > 0,
                     "ONNX's softcap={softcap} caps the scores with softcap * tanh(score / softcap) before the mask; "
                     "DirectML's MULTIHEAD_ATTENTION1 has no such step (Scale, biases and the mask only)",
                     {"softcap": 0.0}),
              Cannot(aa.asks_for_qk_output,
                     "ONNX's fourth output, qk_matmul_output, exposes the scores (qk_matmul_output_mode="
                     "{qk_matmul_output_mode}); DirectML's MULTIHEAD_ATTENTION1 writes only OutputTensor, "
                     "OutputPresentKeyTensor and OutputPresentValueTensor", {"qk_matmul_output_mode": 0}),
              Cannot(aa.softmax_precision_differs,
                     "ONNX's softmax_precision={softmax_precision} asks for the softmax in another type than the "
                     "inputs'; DirectML's MULTIHEAD_ATTENTION1 has no field for the softmax's precision",
                     {"softmax_precision": "the inputs' type"}),
              Cannot(aa.fully_masked_row,
                     "a query row has every key masked: ONNX zeroes such a row, while DirectML's "
                     "MULTIHEAD_ATTENTION1 adds MaskFilterValue (-inf, ONNX's masking value) to every score of it "
                     "and takes the softmax, which has no such guard (NaN)"),
          )),
    # ---- training
    Entry("Adam", "ADAM_OPTIMIZER",
          fields={"InputParametersTensor": "X", "InputFirstMomentTensor": "V", "InputSecondMomentTensor": "H",
                  "GradientTensor": "G", "TrainingStepTensor": "T (as UINT32)", "LearningRate": "R",
                  "Beta1": "alpha (default 0.9)", "Beta2": "beta (default 0.999)", "Epsilon": "epsilon (default 0)"},
          adapter=t.adapt_adam,
          outside=("X, V, H and G are read as {1, 1, 1, size} (ADAM_OPTIMIZER takes 4 dimensions and works element "
                   "by element) and X_new, V_new, H_new reshaped back",
                   "the int64 T is given as a UINT32 TrainingStepTensor {1, 1, 1, 1} (the same value)"),
          cannot=(Cannot(lambda c: t.adam_groups(c) > 1,
                         "ONNX's Adam updates several tensors in one call; DirectML's ADAM_OPTIMIZER updates one "
                         "InputParametersTensor"),
                  Cannot(lambda c: float(c.attr("norm_coefficient", 0.0)) != 0.0,
                         "ONNX's norm_coefficient ({norm_coefficient}) adds norm_coefficient * X to the gradient; "
                         "DirectML's ADAM_OPTIMIZER has no regularisation term", {"norm_coefficient": 0.0}),
                  Cannot(lambda c: float(c.attr("norm_coefficient_post", 0.0)) != 0.0,
                         "ONNX's norm_coefficient_post ({norm_coefficient_post}) scales the updated X by 1 - "
                         "norm_coefficient_post; DirectML's ADAM_OPTIMIZER has no such term",
                         {"norm_coefficient_post": 0.0}),
                  Cannot(lambda c: t.adam_step(c) == 0,
                         "ONNX's Adam at T = 0 skips the bias correction; DirectML's ADAM_OPTIMIZER always applies "
                         "it, and 1 - Beta1^0 = 0 divides by zero"),
                  Cannot(t.adam_step_outside_uint32,
                         "ONNX's T lies outside UINT32; DirectML's TrainingStepTensor is UINT32"))),
    # ---- recurrent networks, FOLD
    _recurrent("RNN"), _recurrent("GRU"), _recurrent("LSTM"),
    Entry("Col2Im", "FOLD", fields={"WindowSizes": "block_shape", "Strides": "strides (default 1)",
                                    "Dilations": "dilations (default 1)", "StartPadding": "pads[:n] (default 0)",
                                    "EndPadding": "pads[n:] (default 0)",
                                    "OutputTensor.Sizes": "{N, C, image_shape...}, C = input's C x prod(block_shape) "
                                                          "/ prod(block_shape)"},
          adapter=an.adapt_col2im,
          outside=("image_shape and block_shape are ONNX inputs; DirectML takes the image's Sizes from the output's "
                   "tensor desc and the block's from WindowSizes",)),
    # ---- quantization (adapters_quantization.py)
    *QUANTIZATION_ENTRIES,
)


# ---- ONNX Runtime's contrib operators (domain com.microsoft) that its fusions make for the DirectML provider
# (dmlcli onnx's fusions.py: MatmulTransposeFusion, MatMulScaleFusion, MatMulActivationFusion, SkipLayerNormFusion).
# They are no ONNX operators: a model's fused node finds its entry here by name, after ONNX's (entry_for); `dmlcli
# run`, `ops` and the node tests, which read ONNX's names (TABLE), do not list them.
CONTRIB_ENTRIES: tuple[Entry, ...] = (
    Entry("FusedMatMul", "GEMM",
          fields={"ATensor": "A, read through Strides: transBatchA moves its first dimension to the rows' place, then "
                             "transA swaps the last two (GetFusedMatMulSizesAndStrides)",
                  "BTensor": "B, likewise with transBatchB and transB", "Alpha": "alpha (default 1)"},
          fixed={"TransA": "NONE", "TransB": "NONE", "Beta": 0.0}, adapter=ac.adapt_fused_matmul, value_inputs=(),
          outside=("the transposes are a view of A and B (permuted Strides), as the provider's descs read them; then "
                   "NumPy's matmul rules as MatMul's (1-D operands, leading 1s, a batch broadcast with zero "
                   "Strides), the ranks kept past 4 (the provider does not fold FusedMatMul's dimensions)",),
          cannot=(Cannot(ac.batch_ranks_differ,
                         "transBatchA or transBatchB with A and B of different ranks or of rank 2: ONNX Runtime's "
                         "DirectML provider requires one rank above 2 (DmlOperatorFusedMatMul.cpp)"),)),
    Entry("FusedMatMulActivation", None, composed=ac.fused_matmul_activation_parts,
          reason="ONNX Runtime's DirectML provider runs its contrib FusedMatMulActivation (MatMulActivationFusion: "
                 "a FusedMatMul and the Softmax reading it) as one GEMM whose FusedActivation is ACTIVATION_SOFTMAX1 "
                 "over activation_axis; dmlcli onnx runs the GEMM (FusedMatMul's mapping) then ACTIVATION_SOFTMAX1 "
                 "(Softmax's), the same values: a fused activation runs on the rounded product, as the activation "
                 "operator would",
          cannot=(Cannot(ac.activation_not_softmax,
                         "ONNX Runtime's DirectML provider fuses only Softmax into FusedMatMulActivation "
                         "(TryGetGraphFusedActivationDesc), not {activation}", {"activation": "none"}),)),
    Entry("SkipLayerNormalization", None, composed=ac.skip_layer_normalization_parts,
          reason="ONNX Runtime's DirectML provider runs its contrib SkipLayerNormalization as a DirectML graph: "
                 "ELEMENT_WISE_ADD of input and skip, ELEMENT_WISE_ADD of the bias where given, then "
                 "MEAN_VARIANCE_NORMALIZATION1 over the hidden axis with gamma and beta "
                 "(DmlOperatorSkipLayerNormalization.cpp); dmlcli onnx runs those calls, each through Add's and "
                 "LayerNormalization's entries",
          cannot=(Cannot(ac.skip_statistics_asked,
                         "SkipLayerNormalization's mean or inv_std_var output is asked for; ONNX Runtime's DirectML "
                         "provider does not compute them (QuerySkipLayerNormalization)"),
                  Cannot(ac.skip_rank_unsupported,
                         "SkipLayerNormalization's input is neither 2-D nor 3-D; ONNX Runtime's DirectML provider "
                         "takes {{batch, hidden}} or {{batch, sequence, hidden}}"),
                  Cannot(ac.skip_shape_differs,
                         "skip's Sizes differ from input's; ONNX Runtime's DirectML provider reads skip at input's "
                         "Sizes (ELEMENT_WISE_ADD of two {{batch, sequence, hidden, 1}} tensors)"),
                  Cannot(ac.skip_vector_differs,
                         "gamma, beta or bias does not hold one value per hidden element; ONNX Runtime's DirectML "
                         "provider reads each as {{1, 1, hidden, 1}}"))),
)

ENTRIES = ENTRIES + ELEMENTWISE_ENTRIES + VIEW_ENTRIES

TABLE: dict[str, Entry] = {entry.onnx_op: entry for entry in ENTRIES if entry.selects is None}
CONTRIB: dict[str, Entry] = {entry.onnx_op: entry for entry in CONTRIB_ENTRIES}
if set(CONTRIB) & set(TABLE) or len(CONTRIB) != len(CONTRIB_ENTRIES):
    raise ValueError("ONNX table: a contrib operator's name is ONNX's, or it has two entries")
VARIANTS: dict[str, tuple[Entry, ...]] = {}
for _variant in (entry for entry in ENTRIES if entry.selects is not None):
    VARIANTS[_variant.onnx_op] = VARIANTS.get(_variant.onnx_op, ()) + (_variant,)
if len(TABLE) + sum(map(len, VARIANTS.values())) != len(ENTRIES) or not set(VARIANTS) <= set(TABLE):
    # A table typo fails at import.
    raise ValueError("ONNX table: an ONNX operator has two plain entries, or a variant without its plain entry")


def fused_activation_keywords(op: str, attributes: Mapping[str, object]) -> dict[str, object]:
    """The API keywords of the FusedActivation ONNX Runtime's DirectML provider makes of an ONNX activation it
    fuses into the operator before it (OperatorUtility.cpp, FusionHelpers::TryGetFusedActivationDesc): the
    activation's DirectML operator as its own entry maps it, with its FLOAT fields from the ONNX attributes
    (ONNX's defaults where left out; Softplus at Steepness 1). KeyError for an activation the table maps otherwise."""
    from ...operators.table.options import snake_case

    if op == "Softplus":
        directml, fields = "ACTIVATION_SOFTPLUS", {"Steepness": 1.0}
    else:
        directml, attribute_fields = _ELEMENTWISE[op]
        fields = {name: float(attributes.get(attribute, default)) for name, attribute, default in attribute_fields}
    return {"fused_activation": directml, **{f"fused_{snake_case(name)}": value for name, value in fields.items()}}


def entry_for(call: a.OnnxCall) -> Entry | None:
    """The entry that maps this call: the first variant of its ONNX operator that selects it, else the plain
    entry, else a contrib operator's of that name (None for an operator outside both tables)."""
    for variant in VARIANTS.get(call.op, ()):
        if variant.selects(call):
            return variant
    return TABLE.get(call.op) or CONTRIB.get(call.op)
