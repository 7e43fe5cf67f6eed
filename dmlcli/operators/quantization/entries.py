"""QUANTIZE and DEQUANTIZE (6_3: per tensor, per axis and blocked scales and zero points, 4-bit types) and
DYNAMIC_QUANTIZE_LINEAR (4_0): entries, shape rules and kernels.

Sources: DirectML.h at 0x6400 (/work/ref/DirectML.h: the DESCs, DML_QUANTIZATION_TYPE, the DML_OPERATOR_TYPE
values); DirectML's pages (MicrosoftDocs/sdk-api ns-directml-dml_quantize_operator_desc.md, commit of 02/14/2025,
and the DEQUANTIZE page as learn.microsoft.com prints it, whose Tensor support table the stored copy cut after
InputTensor; ns-directml-dml_dynamic_quantize_linear_operator_desc.md): fields, availability, support tables, "TBD"
for the meaning. The meaning: ONNX Runtime's DirectML provider (DmlOperatorMatMulNBits.cpp: a blocked DEQUANTIZE
whose scale and zero point have Sizes {..., N, K / block_size}; DmlOperatorDynamicQuantizeLinear.cpp: ONNX's
DynamicQuantizeLinear mapped straight onto DYNAMIC_QUANTIZE_LINEAR), WebNN's DirectML back end (Chromium
services/webnn/dml/graph_impl_dml.cc: quantizeLinear/dequantizeLinear as QUANTIZE/DEQUANTIZE with
SCALE_ZERO_POINT, the scale and zero point broadcast to the input), ONNX's QuantizeLinear, DequantizeLinear and
DynamicQuantizeLinear (rounding halves to even, saturation), and the element-wise QUANTIZE_LINEAR /
DEQUANTIZE_LINEAR (linear.py), whose float32 steps these share. Each entry's notes say which rule comes from where.

The float32 steps are fixed (one IEEE operation each), so the CPU and the GPU give the same bits: the xp kernel on
NumPy, and on the GPU the same kernel with its element-by-element float steps in gpu.py's IEEE kernels.
"""

from __future__ import annotations

import numpy as np

from ...data_types import FLOAT32, FLOATS, INT8, QUANTIZED_8_4, UINT8, DataType, integer_limits
from ...feature_levels import level
from ..table.parameters import EnumParameter
from ..table.schema import COMPOSITE, DIMS_1_TO_8, ONE_ROUNDING, Operator, Tolerance, rows
from ..table.shaped import RuleViolation, ShapeQuery, describe_sizes
from . import gpu as quantization_gpu
from .linear import requantize

FAMILY = "quantization"
ARRAY = "QuantizationTensors"
SCALE, ZERO_POINT = f"{ARRAY}[0]", f"{ARRAY}[1]"
Q_TENSORS = ("InputTensor", ARRAY)
_I8_U8 = (INT8, UINT8)


# ---------------------------------------------------------------- QuantizationType


class QuantizationTypeParameter(EnumParameter):
    """DML_QUANTIZATION_TYPE QuantizationType. A DxDispatch desc states it (DirectML has no default); left out in
    the API and on the command line, it is read from the QuantizationTensors given: SCALE for one, SCALE_ZERO_POINT
    for two (dmlcli's choice: the count says which)."""

    def parse(self, given, data_types) -> str:
        value = given.get(self.options[0])
        if value is not None:
            return self.parse_value(value)
        return "SCALE_ZERO_POINT" if ZERO_POINT in data_types else "SCALE"

    def describe_default(self) -> str:
        return "scale with one QuantizationTensors, scale_zero_point with two"


QUANTIZATION_TYPE = QuantizationTypeParameter(
    field="QuantizationType", enum_prefix="DML_QUANTIZATION_TYPE_",
    values=(("NONE", 0), ("SCALE", 1), ("SCALE_ZERO_POINT", 2)), default_value="SCALE_ZERO_POINT",
    help="what QuantizationTensors hold: scale (the scale) or scale_zero_point (the scale, then the zero point)")

_TENSORS_BY_TYPE = {"SCALE": 1, "SCALE_ZERO_POINT": 2}


# ---------------------------------------------------------------- support tables (the pages)

_QUANTIZE_ROWS = rows(("6_3", DIMS_1_TO_8, {"InputTensor": FLOATS, ARRAY: FLOATS + QUANTIZED_8_4,
                                             "OutputTensor": QUANTIZED_8_4}))
# The zero point has the quantized input's type; the output the scale's (see _DEQUANTIZE_TIES_NOTE).
_DEQUANTIZE_ROWS = rows(("6_3", DIMS_1_TO_8, {"InputTensor": QUANTIZED_8_4, ARRAY: FLOATS + QUANTIZED_8_4,
                                               "OutputTensor": FLOATS}, ("InputTensor", ZERO_POINT)))
_DYNAMIC_OUTPUTS = ("OutputTensor", "OutputScaleTensor", "OutputZeroPointTensor")
_DYNAMIC_ROWS = rows(("4_0", DIMS_1_TO_8, {"InputTensor": FLOATS, "OutputTensor": _I8_U8, "OutputScaleTensor": (FLOAT32,),
                                            "OutputZeroPointTensor": _I8_U8}, ("OutputTensor", "OutputZeroPointTensor")))


# ---------------------------------------------------------------- shape rules


def check_blocks(name: str, sizes, shape) -> None:
    """A scale or zero point's Sizes against the input's: the same DimensionCount, and along each axis a size that
    divides the input's. Each of its elements then serves a block of input size / its size elements along that
    axis: 1 serves the whole axis (per tensor along it), the input's own size one element each (per axis), and
    anything between blocks of ONNX's block_size."""
    if len(sizes) != len(shape):
        raise RuleViolation(f"{name} has {len(sizes)} dimensions and InputTensor {len(shape)}; QuantizationTensors "
                            "have InputTensor's DimensionCount (sizes of 1 where one value serves a whole axis)")
    for axis, (size, full) in enumerate(zip(sizes, shape)):
        if full % size:
            raise RuleViolation(
                f"{name} Sizes {describe_sizes(sizes)} do not tile InputTensor Sizes {describe_sizes(shape)}: its "
                f"size {size} along axis {axis} does not divide {full}. Each value serves a block of InputTensor's "
                "size / its size elements along each axis (1: the whole axis), and DirectML takes whole blocks only")


def _check_quantization_tensors(query: ShapeQuery) -> None:
    shape = query.shape("InputTensor")
    given = query.shapes_of(ARRAY)
    kind = query.parameters["QuantizationType"]
    wanted = _TENSORS_BY_TYPE.get(kind)
    if wanted is None:
        raise RuleViolation("QuantizationType NONE gives no scale: QUANTIZE and DEQUANTIZE take SCALE (one "
                            "QuantizationTensors: the scale) or SCALE_ZERO_POINT (two: the scale, then the zero point)")
    if len(given) != wanted:
        other = {1: "scale", 2: "scale_zero_point"}.get(len(given))
        hint = f" (--quantization-type {other} for {len(given)})" if other else ""
        what = "the scale, then the zero point" if wanted == 2 else "the scale"
        raise RuleViolation(f"QuantizationType {kind} takes {wanted} tensor{'s' if wanted > 1 else ''} in "
                            f"QuantizationTensors ({what}); {len(given)} given{hint}")
    for index, sizes in enumerate(given):
        check_blocks(f"{ARRAY}[{index}]", sizes, shape)
    if len(given) == 2 and tuple(given[0]) != tuple(given[1]):
        raise RuleViolation(f"{SCALE} (the scale) Sizes {describe_sizes(given[0])} and {ZERO_POINT} (the zero point) "
                            f"Sizes {describe_sizes(given[1])} differ; they must be the same (one zero point per scale)")
    scale_type = query.data_types[SCALE]
    if scale_type not in FLOATS:
        raise RuleViolation(f"{SCALE} (the scale) data type {scale_type.name} is not a float type (allowed: "
                            f"{', '.join(t.name for t in FLOATS)})")


def quantization_shape(query: ShapeQuery) -> dict:
    """QUANTIZE and DEQUANTIZE: OutputTensor has InputTensor's Sizes."""
    _check_quantization_tensors(query)
    return {"OutputTensor": query.shape("InputTensor")}


def dynamic_quantize_shape(query: ShapeQuery) -> dict:
    """OutputTensor has InputTensor's Sizes; the scale and the zero point one element, in InputTensor's
    DimensionCount (the page: every tensor has the same DimensionCount, and one element each)."""
    shape = query.shape("InputTensor")
    one = (1,) * len(shape)
    return {"OutputTensor": shape, "OutputScaleTensor": one, "OutputZeroPointTensor": one}


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)


def expand_blocks(xp, tensor, shape):
    """A scale or zero point seen at every element of an input of `shape`: each element repeated over its block
    along each axis (xp.repeat), a size of 1 broadcast (a view)."""
    for axis, (size, full) in enumerate(zip(tensor.shape, shape)):
        if size not in (1, full):
            tensor = xp.repeat(tensor, full // size, axis=axis)
    return xp.broadcast_to(tensor, tuple(shape))


def type_limits(data_type: DataType) -> tuple[int, int]:
    """The saturation range of an integer output: INT4 -8..7 and UINT4 0..15 too (computed as int8/uint8)."""
    return integer_limits(data_type.numpy_dtype)


def quantize_values(xp, x, scale, zero_point, data_type: DataType):
    """saturate(rint(x / scale) + zero_point) into `data_type` (its kernel dtype): FLOAT32 `x` and `scale` that
    broadcast together, one IEEE division, halves to even, a NaN quotient giving the lowest value."""
    return requantize(xp, x / scale, zero_point, data_type.kernel_dtype, type_limits(data_type))


def quantize_values_gpu(cp, x, scale, zero_point, data_type: DataType):
    """quantize_values with the division and the rounding in IEEE CUDA (gpu.py)."""
    return quantization_gpu.quantize_values(cp, x, scale, zero_point, type_limits(data_type), data_type.kernel_dtype)


def dequantize_values(xp, x, scale, zero_point, out_dtype):
    """float32(x - zero_point) * scale: the difference exact (int32), one IEEE multiplication, then rounded once to
    `out_dtype` (FLOAT16) where it is narrower."""
    difference = x.astype(xp.int32) if zero_point is None else x.astype(xp.int32) - zero_point.astype(xp.int32)
    return (difference.astype(xp.float32) * scale).astype(out_dtype, copy=False)


def quantize_kernel(xp, inputs, outputs, params, values=quantize_values):
    x, scale, *zero = inputs
    shape = x.shape
    scale = expand_blocks(xp, scale.astype(xp.float32, copy=False), shape)
    zero_point = expand_blocks(xp, zero[0], shape) if zero else None
    return (values(xp, x.astype(xp.float32, copy=False), scale, zero_point, outputs[0].data_type),)


def quantize_gpu_kernel(cp, inputs, outputs, params):
    return quantize_kernel(cp, inputs, outputs, params, values=quantize_values_gpu)


def dequantize_kernel(xp, inputs, outputs, params, values=dequantize_values):
    x, scale, *zero = inputs
    shape = x.shape
    scale = expand_blocks(xp, scale.astype(xp.float32, copy=False), shape)
    zero_point = expand_blocks(xp, zero[0], shape) if zero else None
    return (values(xp, x, scale, zero_point, outputs[0].data_type.numpy_dtype),)


def dequantize_gpu_kernel(cp, inputs, outputs, params):
    return dequantize_kernel(cp, inputs, outputs, params, values=quantization_gpu.dequantize_values)


def _key(xp, x32):
    """An int32 per FLOAT32 element that orders as the floats do (-0.0 just below +0.0), NaN given +0.0's key: its
    minimum and maximum are exact on both libraries (CuPy's float reductions would flush subnormals)."""
    bits = x32.view(xp.int32)
    keys = xp.where(bits < 0, bits ^ xp.int32(0x7FFFFFFF), bits)
    return xp.where(xp.isnan(x32), xp.int32(0), keys)


def _from_key(key: int) -> np.float32:
    bits = key if key >= 0 else key ^ 0x7FFFFFFF
    return np.array([bits], dtype=np.int32).view(np.float32)[0]


def dynamic_range(xp, x32) -> tuple[np.float32, np.float32]:
    """(min(0, min(x)), max(0, max(x))) of a FLOAT32 array, NaN skipped: ONNX's DynamicQuantizeLinear range."""
    keys = _key(xp, x32)
    return _from_key(min(int(keys.min()), 0)), _from_key(max(int(keys.max()), 0))


def dynamic_parameters(low: np.float32, high: np.float32, data_type: DataType) -> tuple[np.float32, np.integer]:
    """The scale (high - low) / (Qmax - Qmin) and the zero point saturate(rint(Qmin - low / scale)), in float32
    on the host, a NaN (from a range of 0, or infinities) giving Qmin as any NaN quantizes to the lowest value."""
    lowest, highest = type_limits(data_type)
    with np.errstate(all="ignore"):
        scale = (high - low) / np.float32(highest - lowest)
        start = np.float32(lowest) - low / scale
    zero_point = requantize(np, np.array([start], np.float32), None, data_type.kernel_dtype, (lowest, highest))
    return np.float32(scale), zero_point[0]


def dynamic_quantize_kernel(xp, inputs, outputs, params, values=quantize_values):
    (x,) = inputs
    out, scale_info, zero_info = outputs
    x32 = x.astype(xp.float32, copy=False)
    scale, zero_point = dynamic_parameters(*dynamic_range(xp, x32), out.data_type)
    quantized = values(xp, x32, xp.full((1,) * x.ndim, scale, xp.float32),
                       xp.full((1,) * x.ndim, zero_point, out.data_type.kernel_dtype), out.data_type)
    return (quantized, xp.full(scale_info.shape, scale, xp.float32),
            xp.full(zero_info.shape, zero_point, zero_info.data_type.kernel_dtype))


def dynamic_quantize_gpu_kernel(cp, inputs, outputs, params):
    return dynamic_quantize_kernel(cp, inputs, outputs, params, values=quantize_values_gpu)


# ---------------------------------------------------------------- notes

_PAGE_NOTE = ("DirectML's page gives the fields, the level (6_3), the support table and one constraint (InputTensor, "
              "OutputTensor and QuantizationTensors have the same DimensionCount) and says 'TBD' for the rest; the "
              "rules below are dmlcli's reading of ONNX Runtime's and WebNN's DirectML back ends, each with its "
              "source.")
_TYPE_NOTE = ("QuantizationType SCALE takes one QuantizationTensors (the scale), SCALE_ZERO_POINT two (the scale, then "
              "the zero point), as ONNX Runtime's DmlOperatorMatMulNBits.cpp and WebNN's graph_impl_dml.cc build them; "
              "NONE is refused (no scale to quantize with; neither back end uses it). Left out in the API and on the "
              "command line, it follows the number of QuantizationTensors given; a DxDispatch desc states it, with "
              "QuantizationTensorCount.")
_BLOCKS_NOTE = ("Per tensor, per axis and blocked scales are one rule: a QuantizationTensors entry has InputTensor's "
                "DimensionCount and, along each axis, a size that divides InputTensor's; each of its values serves a "
                "block of (InputTensor's size / its size) elements along that axis (a size of 1: the whole axis). "
                "Source: ONNX Runtime's DmlOperatorMatMulNBits.cpp, which gives DEQUANTIZE a scale and zero point of "
                "Sizes {..., N, K / block_size} for a B of {..., N, K} and requires K % block_size == 0 ('DML only "
                "supports perfect blocks'); WebNN broadcasts per-tensor and per-axis ones to the input (zero strides, "
                "the same rule). The scale and the zero point have the same Sizes (as ONNX requires).")
_QUANTIZE_STEPS_NOTE = ("As QUANTIZE_LINEAR (linear.py), in float32 so that CPU and GPU agree bit for bit: x (FLOAT16 "
                        "widened exactly) / scale, one IEEE division; rounded half to even (ONNX's QuantizeLinear, "
                        "WebNN); plus the zero point (0 with SCALE), exactly; saturated to the output type: INT8 "
                        "-128..127, UINT8 0..255, INT4 -8..7, UINT4 0..15 (ONNX's saturation for int4/uint4). A NaN "
                        "quotient (NaN input, 0/0) gives the type's lowest value; x/0 = +-inf saturates (DirectML: a "
                        "scale of 0 is undefined behaviour). An exact reference may differ by 1 where the float32 "
                        "quotient rounds across a half (WebNN allows +-1).")
_QUANTIZE_TIES_NOTE = ("The zero point (QuantizationTensors[1]) has OutputTensor's data type (as QUANTIZE_LINEAR's "
                       "ZeroPointTensor; ONNX's y_zero_point sets y's type), so it sets the output's type; with SCALE "
                       "alone the output type is a choice (--output-dtype, UINT8 by default, as ONNX's). The scale "
                       "(QuantizationTensors[0]) is FLOAT32 or FLOAT16, of any float type whatever InputTensor's "
                       "(dmlcli's reading: the page lists every type for the array and ties none).")
_DEQUANTIZE_STEPS_NOTE = ("As DEQUANTIZE_LINEAR (linear.py): x - zero_point exactly as an integer, converted to float32 "
                          "(exact for 8- and 4-bit values), times the scale in float32 (one IEEE rounding; FLOAT16 "
                          "scales widened exactly), a FLOAT16 output rounded once from that product. A scale of 0, "
                          "NaN or infinity follows IEEE.")
_DEQUANTIZE_TIES_NOTE = ("OutputTensor has the scale's (QuantizationTensors[0]) data type and the zero point "
                         "(QuantizationTensors[1]) InputTensor's, as DEQUANTIZE_LINEAR's page ties them and ONNX "
                         "Runtime's DmlOperatorMatMulNBits.cpp builds them (the output in the scale's float type, the "
                         "zero point in the quantized type, UINT4). The stored page's Tensor support table stops after "
                         "InputTensor (INT8, INT4, UINT8, UINT4, 1 to 8 dimensions, as learn.microsoft.com prints it); "
                         "QuantizationTensors (FLOAT32, FLOAT16, INT8, INT4, UINT8, UINT4) and OutputTensor (FLOAT32, "
                         "FLOAT16) are dmlcli's reading, QUANTIZE's table mirrored.")
_FOUR_BIT_NOTE = ("INT4 and UINT4 tensors are ml_dtypes' int4 and uint4 arrays in the API (one element a byte); a "
                  "DxDispatch buffer packs two a byte, the first element in the low four bits (ONNX's int4 packing, "
                  "which ONNX Runtime's DirectML provider binds unchanged: onnxruntime/core/framework/int4.h stores "
                  "element 0 in bits 0-3).")
_DYNAMIC_NOTES = (
    "ONNX Runtime's DirectML provider maps ONNX's DynamicQuantizeLinear straight onto this operator "
    "(DmlOperatorDynamicQuantizeLinear.cpp), so dmlcli follows ONNX's rules where the page's formula is silent: the "
    "range is widened to include 0, InputMin = min(0, min(x)) and InputMax = max(0, max(x)); NaN inputs take no part "
    "in it (dmlcli's choice; the page and ONNX are silent).",
    "Steps in float32 (ONNX's reference computes in float32): OutputScale = (InputMax - InputMin) / (Max - Min) (a "
    "subtraction and a division, each rounded once); OutputZeroPoint = saturate(round(Min - InputMin / OutputScale)) "
    "with halves to even (ONNX's round); OutputTensor = saturate(round(x / OutputScale) + OutputZeroPoint), as "
    "QUANTIZE_LINEAR. Min, Max: 0, 255 for UINT8 and -128, 127 for INT8 (the page).",
    "A range of 0 (every input 0, or NaN) gives OutputScale 0 and 0/0 = NaN, which dmlcli quantizes as any NaN, to "
    "the lowest value: OutputZeroPoint = Min and every output Min (ONNX's reference is undefined there). An infinite "
    "input gives an infinite scale, likewise by IEEE.",
    "The output type is a choice (--output-dtype: UINT8 by default, as ONNX's; INT8), and OutputZeroPointTensor has "
    "it (the page's tie); OutputScaleTensor is FLOAT32. The scale and zero point outputs have InputTensor's "
    "DimensionCount and one element (the page: same DimensionCount, one element each).",
)

_QUANTIZE_TOLERANCE = Tolerance(
    kind="atol", float32=1, float16=1,
    source="WebNN conformance: quantizeLinear within +-1 for int8/uint8; dmlcli's outputs are integers and are "
           "always compared exactly, its float32 steps being fixed")
_DYNAMIC_TOLERANCE = Tolerance(
    kind="ulp", float32=2, float16=2,
    source="dmlcli's choice for OutputScaleTensor: (InputMax - InputMin) / (Max - Min) is two float32 roundings, "
           "1 ULP each; the quantized outputs are integers and always compared exactly")

def _quantization_entry(name: str, enum_value: int, summary: str, formula: str, support, tied: str, kernels,
                        notes: tuple[str, ...], **extra) -> Operator:
    """QUANTIZE or DEQUANTIZE: an input, the QuantizationTensors array and QuantizationType, the output tied to
    `tied` (the zero point's type, or the scale's)."""
    array_kernel, gpu_array_kernel = kernels
    return Operator(
        name=name, enum_value=enum_value, family=FAMILY, prefix="", summary=summary, formula=formula,
        introduced=level("6_3"), inputs=Q_TENSORS, support=support, same_data_type=(tied, "OutputTensor"),
        same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(QUANTIZATION_TYPE,), variadic=ARRAY,
        variadic_count="QuantizationTensorCount", shape_rule=quantization_shape, array_kernel=array_kernel,
        gpu_array_kernel=gpu_array_kernel, notes=(_PAGE_NOTE, _TYPE_NOTE, _BLOCKS_NOTE) + notes + (_FOUR_BIT_NOTE,),
        **extra)


QUANTIZE = _quantization_entry(
    "QUANTIZE", 173,
    "quantizes each element with its block's scale (and zero point): per tensor, per axis or blocked, to 8 or 4 bits",
    "OutputTensor = clamp(round(InputTensor / scale) + zero_point, Min, Max), scale and zero_point those of the "
    "element's block (QuantizationTensors)",
    _QUANTIZE_ROWS, ZERO_POINT, (quantize_kernel, quantize_gpu_kernel), (_QUANTIZE_STEPS_NOTE, _QUANTIZE_TIES_NOTE),
    default_output_type=UINT8, exactness=COMPOSITE, tolerance=_QUANTIZE_TOLERANCE)

DEQUANTIZE = _quantization_entry(
    "DEQUANTIZE", 174,
    "dequantizes each element with its block's scale (and zero point): per tensor, per axis or blocked, from 8 or "
    "4 bits",
    "OutputTensor = (InputTensor - zero_point) * scale, scale and zero_point those of the element's block "
    "(QuantizationTensors)",
    _DEQUANTIZE_ROWS, SCALE, (dequantize_kernel, dequantize_gpu_kernel),
    (_DEQUANTIZE_STEPS_NOTE, _DEQUANTIZE_TIES_NOTE), exactness=ONE_ROUNDING,
    tolerance=Tolerance(kind="ulp", float32=1, float16=1, source="WebNN conformance: dequantizeLinear 1 ULP"))

DYNAMIC_QUANTIZE_LINEAR = Operator(
    name="DYNAMIC_QUANTIZE_LINEAR", enum_value=148, family=FAMILY, prefix="",
    summary="quantizes the input to 8 bits with a scale and zero point computed from its range, and returns them",
    formula=("InputMin = min(0, min(x)), InputMax = max(0, max(x)); OutputScale = (InputMax - InputMin) / (Max - Min); "
             "OutputZeroPoint = clamp(round(Min - InputMin / OutputScale), Min, Max); OutputTensor = "
             "clamp(round(x / OutputScale) + OutputZeroPoint, Min, Max)"),
    introduced=level("4_0"), inputs=("InputTensor",), support=_DYNAMIC_ROWS, same_data_type=(), same_sizes=(),
    cpu_kernel=None, cuda_body="", output="OutputTensor", extra_outputs=_DYNAMIC_OUTPUTS[1:],
    default_output_type=UINT8, shape_rule=dynamic_quantize_shape, array_kernel=dynamic_quantize_kernel,
    gpu_array_kernel=dynamic_quantize_gpu_kernel, exactness=COMPOSITE, tolerance=_DYNAMIC_TOLERANCE,
    notes=_DYNAMIC_NOTES,
)

OPERATORS = (DYNAMIC_QUANTIZE_LINEAR, QUANTIZE, DEQUANTIZE)

