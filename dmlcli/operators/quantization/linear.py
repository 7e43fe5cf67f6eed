"""QUANTIZE_LINEAR, DEQUANTIZE_LINEAR, QUANTIZED_LINEAR_ADD: entries and kernels.

Sources: ../shared/reference/directml_elementwise.md §B2 and §C row 7, and DirectML's three pages
(sdk-api: tensor constraints and support tables, "a scale value of 0 results in undefined behavior").

Every step is fixed in float32 (IEEE, one rounding per operation: NumPy float32 on the CPU, dml_f32
on the GPU), so the integer outputs of QUANTIZE_LINEAR and QUANTIZED_LINEAR_ADD, which are always
compared exactly, come out the same on both backends:

    quantize(v, zero_point) = saturate(rint(v) + zero_point)   rint: halves to even; NaN -> lowest
    QUANTIZE_LINEAR         = quantize(float32(x) / scale, zp)
    DEQUANTIZE_LINEAR       = float32(x - zp) * scale          (x - zp exact, as an integer)
    QUANTIZED_LINEAR_ADD    = quantize((float32(a - azp) * ascale + float32(b - bzp) * bscale) / oscale, ozp)
"""

from __future__ import annotations


import numpy as np

from ...data_types import FLOAT16, FLOAT32, FLOATS, INT8, INT32, INTS_32_16_8, UINT8, integer_limits
from ...feature_levels import level
from ...records import Frozen
from ..table.schema import COMPOSITE, DIMS_1_TO_8, DIMS_4, ONE_ROUNDING, Operator, Tolerance, rows

Q_INPUTS = ("InputTensor", "ScaleTensor", "ZeroPointTensor")
Q_ALL = Q_INPUTS + ("OutputTensor",)
QLA_INPUTS = ("ATensor", "AScaleTensor", "AZeroPointTensor", "BTensor", "BScaleTensor", "BZeroPointTensor",
              "OutputScaleTensor", "OutputZeroPointTensor")
I8_U8 = (INT8, UINT8)


# ---------------------------------------------------------------- hooks


class UndefinedScaleCheck(Frozen):
    """Scales of 0 (DirectML: undefined behaviour) or NaN: dmlcli's result is its own choice, so it warns.
    An immutable record (records.py), compared by identity."""

    scales: tuple[str, ...]  # the scale inputs
    meaning: str  # what dmlcli gives for them

    def __init__(self, scales: tuple[str, ...], meaning: str) -> None:
        vars(self).update(scales=scales, meaning=meaning)

    @property
    def tensors(self) -> tuple[str, ...]:
        return self.scales

    def count(self, arrays, data_types, out_shape) -> int:
        found = None
        for name in self.scales:
            scale = np.asarray(arrays[name])
            bad = (scale == 0) | np.isnan(scale)
            found = bad if found is None else (found | bad)
        if out_shape is not None:
            found = np.broadcast_to(found, out_shape)
        return int(np.count_nonzero(found))

    def message(self, operator_name, total, elements, data_types) -> str:
        return (f"{operator_name}: {total} of {elements} output elements use a scale of 0 or NaN, for which "
                f"DirectML's result is undefined; dmlcli gives {self.meaning}")


_QUANTIZE_SCALE_MEANING = ("IEEE's x/0 = +-inf, saturated to the type's limits, and the type's lowest value for a "
                           "NaN quotient (0/0)")


# ---------------------------------------------------------------- support tables (newest first)


def _quantize_row(inputs, scales, zero_points, outputs):
    return {"InputTensor": inputs, "ScaleTensor": scales, "ZeroPointTensor": zero_points, "OutputTensor": outputs}


_QUANTIZE = rows(
    ("6_2", DIMS_1_TO_8, _quantize_row((FLOAT32, FLOAT16, INT32), FLOATS, I8_U8, I8_U8)),
    ("6_0", DIMS_1_TO_8, _quantize_row((FLOAT32, FLOAT16, INT32), FLOATS, I8_U8, I8_U8)),
    ("3_0", DIMS_1_TO_8, _quantize_row((FLOAT32, INT32), (FLOAT32,), I8_U8, I8_U8)),
    ("2_1", DIMS_4, _quantize_row((FLOAT32, INT32), (FLOAT32,), I8_U8, I8_U8)),
    ("1_0", DIMS_4, _quantize_row((FLOAT32,), (FLOAT32,), (UINT8,), (UINT8,))),
)
_DEQUANTIZE = rows(
    ("6_2", DIMS_1_TO_8, _quantize_row(INTS_32_16_8, FLOATS, INTS_32_16_8, FLOATS)),
    ("6_0", DIMS_1_TO_8, _quantize_row(INTS_32_16_8, FLOATS, INTS_32_16_8, FLOATS)),
    ("3_0", DIMS_1_TO_8, _quantize_row(INTS_32_16_8, (FLOAT32,), INTS_32_16_8, (FLOAT32,))),
    ("2_1", DIMS_4, _quantize_row(INTS_32_16_8, (FLOAT32,), INTS_32_16_8, (FLOAT32,))),
    ("1_0", DIMS_4, _quantize_row((UINT8,), (FLOAT32,), (UINT8,), (FLOAT32,))),
)
_QUANTIZED_LINEAR_ADD = rows(
    ("4_0", DIMS_1_TO_8, {name: ((FLOAT32,) if "Scale" in name else I8_U8) for name in QLA_INPUTS + ("OutputTensor",)}),
)


# ---------------------------------------------------------------- notes

_QUANTIZE_ROUNDING_NOTE = (
    "round() rounds halves to even: DirectML's page leaves it unstated; ONNX's QuantizeLinear (and WebNN's) "
    "round halves to even. The result saturates to [0, 255] (UINT8) or [-128, 127] (INT8)."
)
_QUANTIZE_STEPS_NOTE = (
    "dmlcli fixes the steps in float32 so that CPU and GPU agree bit for bit: x (FLOAT16 widened exactly, INT32 "
    "rounded to the nearest float32) / scale (one IEEE division), rounded half to even, then the zero point is "
    "added exactly and the sum saturated. Rounding the quotient before rint can move a value across a half, so "
    "DirectML hardware (or an exact reference) may differ by 1 (WebNN allows +-1)."
)
_QUANTIZE_SCALE_NOTE = (
    "DirectML: 'A scale value of 0 results in undefined behavior'. dmlcli follows IEEE and the clamp's NaN rule "
    "(max(NaN, Min) = Min, as in CLIP): x/0 = +-inf saturates to the type's largest or lowest value, and a NaN "
    "quotient (0/0, a NaN input or scale) gives the type's lowest value (0 for UINT8, -128 for INT8); +-inf "
    "inputs saturate. dmlcli warns with the number of output elements that use a scale of 0 or NaN."
)
_QUANTIZE_OPTIONAL_NOTE = (
    "ZeroPointTensor may be left out from 6_2 (DirectML's 'optional input'): it is then 0, and the output data "
    "type is a choice (--output-dtype / output_dtype=, UINT8 or INT8). Given, it sets the output's type."
)
_QUANTIZE_TYPE_RULE_NOTE = (
    "DirectML also requires ScaleTensor to have InputTensor's data type, or FLOAT32 when InputTensor is INT32. "
    "dmlcli's table ties one group of tensors per operator (ZeroPointTensor and OutputTensor here), so that rule "
    "is not checked yet; the kernels compute every combination the support rows allow."
)
_SIZES_NOTE = (
    "All tensors must have the same Sizes (DirectML); a per-tensor or per-channel scale is broadcast with "
    "--broadcast (broadcast=True), which DirectML itself does with zero strides."
)
_DEQUANTIZE_STEPS_NOTE = (
    "x - zero_point is computed exactly as an integer, converted to float32 (exact for 8- and 16-bit inputs; "
    "rounded to nearest for 32-bit differences past 2^24), then multiplied by the scale in float32 (one IEEE "
    "rounding); a FLOAT16 output is rounded once from that float32 product. FLOAT16 scales are widened exactly."
)
_DEQUANTIZE_SCALE_NOTE = (
    "DirectML: a scale of 0 is undefined behaviour. dmlcli follows IEEE: (x - zero_point) * 0 = +-0, a NaN or "
    "infinite scale gives NaN or +-inf (0 * inf = NaN), and warns with the number of such output elements."
)
_DEQUANTIZE_OPTIONAL_NOTE = (
    "ZeroPointTensor may be left out from 6_2 (DirectML's 'optional input'): it is then 0 of InputTensor's type."
)
_DEQUANTIZE_TYPE_RULE_NOTE = (
    "DirectML requires InputTensor and ZeroPointTensor to share a data type, and OutputTensor and ScaleTensor "
    "to share another. dmlcli's table ties one group per operator: ScaleTensor and OutputTensor (so the output "
    "type follows the scale's); the InputTensor/ZeroPointTensor rule is not checked yet, and the kernels "
    "compute any pair of integer types exactly."
)
_QLA_STEPS_NOTE = (
    "Step by step in float32, so that CPU and GPU agree bit for bit: AValue = float32(A - AZeroPoint) * AScale, "
    "BValue likewise (the integer differences are exact), their float32 sum divided by OutputScale, rounded "
    "half to even (unstated by DirectML; as QUANTIZE_LINEAR), plus OutputZeroPoint, saturated to [0, 255] or "
    "[-128, 127]. A NaN quotient gives the type's lowest value; a scale of 0 (undefined in DirectML) follows "
    "IEEE, and dmlcli warns with the number of output elements that use a scale of 0 or NaN."
)
_QLA_OPTIONAL_NOTE = (
    "AZeroPointTensor, BZeroPointTensor and OutputZeroPointTensor are optional (_Maybenull_, 0 when left out) "
    "from 4_0. dmlcli takes all three or none (a call gives every input or only the required ones); with none, "
    "the output data type is a choice (--output-dtype, UINT8 or INT8)."
)
_QLA_SHAPE_RULE_NOTE = (
    "DirectML: every tensor has the same DimensionCount, each scale and zero point holds 1 element, and A/AZeroPoint, "
    "B/BZeroPoint and Output/OutputZeroPoint share data types. dmlcli checks that ATensor, BTensor and OutputTensor "
    "have the same Sizes and that OutputZeroPointTensor has OutputTensor's type; the other rules are not checked "
    "yet (one-element scales and zero points are broadcast to the output)."
)


# ---------------------------------------------------------------- NumPy kernels


def requantize(xp, value, zero_point, out_dtype, limits: tuple[int, int] | None = None):
    """saturate(rint(value) + zero_point) into `out_dtype`; a NaN value gives the lowest value. NumPy or CuPy (xp).

    `value` is float32; `zero_point` an integer array (None: 0); `limits` the (lowest, highest) to saturate to,
    by default `out_dtype`'s (a 4-bit type, computed as int8/uint8, passes its own: -8..7, 0..15). Clamping
    rint(value) to +-1024 first changes nothing (the zero point is within -128..255) and keeps the sum an exact
    int32. Every step is exact but the rounding, half to even in both libraries.
    """
    lowest, highest = limits or integer_limits(out_dtype)
    whole = xp.rint(value)
    nan = xp.isnan(whole)
    limited = xp.clip(xp.where(nan, xp.float32(0), whole), xp.float32(-1024), xp.float32(1024)).astype(xp.int32)
    total = limited if zero_point is None else limited + zero_point.astype(xp.int32)
    total = xp.clip(total, lowest, highest)
    return xp.where(nan, lowest, total).astype(out_dtype, copy=False)


def quantize_linear(inputs, out_dtype, params):
    x, scale, zero_point = inputs
    with np.errstate(all="ignore"):
        quotient = x.astype(np.float32) / scale.astype(np.float32)
    return requantize(np, quotient, zero_point, out_dtype)


def dequantize_linear(inputs, out_dtype, params):
    x, scale, zero_point = inputs
    difference = (x.astype(np.int64) - zero_point.astype(np.int64)).astype(np.float32)
    with np.errstate(all="ignore"):
        return (difference * scale.astype(np.float32)).astype(out_dtype, copy=False)


def _dequantized(values, scale, zero_point):
    difference = (values.astype(np.int32) - zero_point.astype(np.int32)).astype(np.float32)
    return difference * scale.astype(np.float32)


def quantized_linear_add(inputs, out_dtype, params):
    a, a_scale, a_zero, b, b_scale, b_zero, out_scale, out_zero = inputs
    with np.errstate(all="ignore"):
        total = _dequantized(a, a_scale, a_zero) + _dequantized(b, b_scale, b_zero)
        quotient = total / out_scale.astype(np.float32)
    return requantize(np, quotient, out_zero, out_dtype)


# ---------------------------------------------------------------- CUDA helpers
#
# Scales arrive as dml_f32 (FLOAT32, FLOAT16 widened exactly), so / and * are IEEE float32 without
# flush-to-zero; integer inputs and zero points as their C types. Rounding to a whole number is
# inline PTX without .ftz (CuPy compiles with -ftz=true).


def _requantize_helpers(p: str) -> str:
    return f"""
// saturate(rint(v) + zero_point) into the 8-bit type Z (signed char or unsigned char); NaN -> lowest.
template <typename Z>
__device__ __forceinline__ Z {p}_requantize(dml_f32 v, Z zero_point) {{
    const bool is_signed = (Z)-1 < (Z)0;
    const int lowest = is_signed ? -128 : 0;
    const int highest = is_signed ? 127 : 255;
    if (isnan(v)) return (Z)lowest;
    float r;
    asm("cvt.rni.f32.f32 %0, %1;" : "=f"(r) : "f"(v.v));
    const dml_f32 q = dml_f32{{r}};
    const int whole = q < -1024.0f ? -1024 : (q > 1024.0f ? 1024 : (int)r);
    const int total = whole + (int)zero_point;
    return (Z)(total < lowest ? lowest : (total > highest ? highest : total));
}}
"""


_QUANTIZE_HELPERS = _requantize_helpers("dml_quantize_linear") + """
__device__ __forceinline__ dml_f32 dml_quantize_linear_value(dml_f32 x) { return x; }
template <typename T>
__device__ __forceinline__ dml_f32 dml_quantize_linear_value(T x) { return dml_f32{(float)x}; }  // INT32: RNE
template <typename X, typename Z>
__device__ __forceinline__ Z dml_quantize_linear_apply(X x, dml_f32 s, Z z) {
    return dml_quantize_linear_requantize(dml_quantize_linear_value(x) / s, z);
}
"""

_DEQUANTIZE_HELPERS = """
template <typename X, typename Z>
__device__ __forceinline__ dml_f32 dml_dequantize_linear_apply(X x, dml_f32 s, Z z) {
    return dml_f32{(float)((long long)x - (long long)z)} * s;
}
"""

_QLA_HELPERS = _requantize_helpers("dml_quantized_linear_add") + """
template <typename T, typename Z>
__device__ __forceinline__ dml_f32 dml_quantized_linear_add_value(T v, dml_f32 s, Z z) {
    return dml_f32{(float)((int)v - (int)z)} * s;
}
template <typename A, typename ZA, typename B, typename ZB, typename Z>
__device__ __forceinline__ Z dml_quantized_linear_add_apply(A a, dml_f32 sa, ZA za, B b, dml_f32 sb, ZB zb,
                                                            dml_f32 so, Z zo) {
    const dml_f32 total = dml_quantized_linear_add_value(a, sa, za) + dml_quantized_linear_add_value(b, sb, zb);
    return dml_quantized_linear_add_requantize(total / so, zo);
}
"""

_QUANTIZE_TOLERANCE = Tolerance(
    kind="atol", float32=1, float16=1,
    source="WebNN conformance: quantizeLinear within +-1 for int8/uint8 (reference §C row 7); dmlcli's outputs are "
           "integers and are always compared exactly, its float32 steps being fixed",
)


OPERATORS: tuple[Operator, ...] = (
    Operator(
        name="QUANTIZE_LINEAR", enum_value=33, family="quantization",
        summary="Quantizes each element: x / scale, rounded half to even, plus the zero point, saturated to 8 bits.",
        formula="f(x, scale, zero_point) = clamp(round(x / scale) + zero_point, Min, Max)   (Min, Max: the output type's)",
        introduced=level("1_0"), inputs=Q_INPUTS, support=_QUANTIZE, same_data_type=("ZeroPointTensor", "OutputTensor"),
        same_sizes=Q_ALL, cpu_kernel=quantize_linear, cuda_names=("x", "s", "z"),
        cuda_body="dml_quantize_linear_apply(x, s, z)", cuda_helpers=_QUANTIZE_HELPERS, default_output_type=UINT8,
        optional_inputs=(("ZeroPointTensor", "OutputTensor"),), optional_since=level("6_2"),
        hooks=(UndefinedScaleCheck(("ScaleTensor",), _QUANTIZE_SCALE_MEANING),),
        exactness=COMPOSITE, tolerance=_QUANTIZE_TOLERANCE,
        notes=(_QUANTIZE_ROUNDING_NOTE, _QUANTIZE_STEPS_NOTE, _QUANTIZE_SCALE_NOTE, _QUANTIZE_OPTIONAL_NOTE,
               _QUANTIZE_TYPE_RULE_NOTE, _SIZES_NOTE),
    ),
    Operator(
        name="DEQUANTIZE_LINEAR", enum_value=34, family="quantization",
        summary="Dequantizes each element: (x - zero_point) * scale.",
        formula="f(x, scale, zero_point) = (x - zero_point) * scale",
        introduced=level("1_0"), inputs=Q_INPUTS, support=_DEQUANTIZE, same_data_type=("ScaleTensor", "OutputTensor"),
        same_sizes=Q_ALL, cpu_kernel=dequantize_linear, cuda_names=("x", "s", "z"),
        cuda_body="dml_dequantize_linear_apply(x, s, z)", cuda_helpers=_DEQUANTIZE_HELPERS,
        optional_inputs=(("ZeroPointTensor", "InputTensor"),), optional_since=level("6_2"),
        hooks=(UndefinedScaleCheck(("ScaleTensor",), "IEEE's (x - zero_point) * 0 = +-0 (NaN scales give NaN)"),),
        exactness=ONE_ROUNDING,
        tolerance=Tolerance(kind="ulp", float32=1, float16=1,
                            source="WebNN conformance: dequantizeLinear 1 ULP (reference §C row 7)"),
        notes=(_DEQUANTIZE_STEPS_NOTE, _DEQUANTIZE_SCALE_NOTE, _DEQUANTIZE_OPTIONAL_NOTE, _DEQUANTIZE_TYPE_RULE_NOTE,
               _SIZES_NOTE),
    ),
    Operator(
        name="QUANTIZED_LINEAR_ADD", enum_value=147, family="quantization",
        summary="Adds two quantized tensors: dequantizes A and B, adds them, requantizes with the output's scale and zero point.",
        formula=("f = clamp(round(((A - AZeroPoint) * AScale + (B - BZeroPoint) * BScale) / OutputScale) "
                 "+ OutputZeroPoint, Min, Max)"),
        introduced=level("4_0"), inputs=QLA_INPUTS, support=_QUANTIZED_LINEAR_ADD,
        same_data_type=("OutputZeroPointTensor", "OutputTensor"), same_sizes=("ATensor", "BTensor", "OutputTensor"),
        cpu_kernel=quantized_linear_add, cuda_names=("a", "sa", "za", "b", "sb", "zb", "so", "zo"),
        cuda_body="dml_quantized_linear_add_apply(a, sa, za, b, sb, zb, so, zo)", cuda_helpers=_QLA_HELPERS,
        default_output_type=UINT8,
        optional_inputs=(("AZeroPointTensor", "ATensor"), ("BZeroPointTensor", "BTensor"),
                         ("OutputZeroPointTensor", "OutputTensor")),
        optional_since=level("4_0"),
        hooks=(UndefinedScaleCheck(("AScaleTensor", "BScaleTensor", "OutputScaleTensor"), _QUANTIZE_SCALE_MEANING),),
        exactness=COMPOSITE,
        tolerance=Tolerance(kind="atol", float32=1, float16=1,
                            source="no WebNN figure; dmlcli takes quantizeLinear's +-1 (reference §C row 7). The "
                                   "outputs are integers and are always compared exactly, the float32 steps being fixed"),
        notes=(_QLA_STEPS_NOTE, _QLA_OPTIONAL_NOTE, _QLA_SHAPE_RULE_NOTE),
    ),
)
