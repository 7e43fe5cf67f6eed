"""MAX, MIN, CLIP, CLIP1, THRESHOLD, CLIP_GRAD, CLIP_GRAD1, IF, CEIL, FLOOR, ROUND: entries and kernels.

Every result here is one of the inputs, a bound, or a whole number, so all of them are exact
(EXACT class): the NumPy kernels are the bit-exact reference the CUDA bodies must match. Sources:
../shared/reference/directml_elementwise.md §B2/B4/C/D and DirectML's operator pages (sdk-api).

Numbers:
* MIN, MAX, CLIP, CLIP1, THRESHOLD follow D3D's min/max (reference §C row 4): a NaN operand loses
  to the other (np.fmin / np.fmax); of -0.0 and +0.0 max gives +0.0 and min -0.0 in either order.
* ScaleBias (CLIP, CLIP1, THRESHOLD, CEIL, FLOOR) is applied first as x*Scale + Bias in float32
  (two roundings) for FLOAT16/FLOAT32, and, for integer tensors, in float64 truncated and wrapped
  into the type: the convention arithmetic.py's IDENTITY and ABS use.
* Integer tensors meet FLOAT bounds (CLIP, THRESHOLD, CLIP_GRAD) exactly: a bound is turned into
  the whole number it admits (ceil / floor) with Python integers on the CPU, and from the float's
  bits on the GPU, so that INT64/UINT64 never go through a rounding double.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import ALL11, FLOATS, TYPES_8, TYPES_10, UINT8, as_bits
from ...feature_levels import level
from ..table.parameters import (DataTypeParameter, EnumParameter, FloatParameter, ScalarUnionParameter,
    ScaleBiasParameter)
from ..numerics import compiled_loops
from ..numerics.float_specials import (WHOLE_VECTORS, clip_keeps_nan_bits, fmax_fmin_follow_nan_rule,
    fmax_gives_positive_zero, has_nan, has_zero)
from ..numerics.scale_bias import cuda_scale_bias_helpers, float32_scale_bias, integer_scale_bias
from ..table.schema import DIMS_1_TO_8, DIMS_4, EXACT, Operator, rows

AB = ("ATensor", "BTensor")
ABO = ("ATensor", "BTensor", "OutputTensor")
X = ("InputTensor",)
XO = ("InputTensor", "OutputTensor")
GRAD = ("InputTensor", "InputGradientTensor")
GRAD_O = ("InputTensor", "InputGradientTensor", "OutputGradientTensor")
IF_INPUTS = ("ConditionTensor", "ATensor", "BTensor")
IF_ALL = IF_INPUTS + ("OutputTensor",)

_F32 = np.finfo(np.float32)


def _same(types, *tensors):
    return {name: types for name in tensors}


def _if(types):
    return {"ConditionTensor": (UINT8,), "ATensor": types, "BTensor": types, "OutputTensor": types}


# ---------------------------------------------------------------- support tables (newest first)

_MIN_MAX = rows(("5_0", DIMS_1_TO_8, _same(TYPES_10, *ABO)), ("3_0", DIMS_1_TO_8, _same(TYPES_8, *ABO)),
                ("2_1", DIMS_4, _same(TYPES_8, *ABO)), ("1_0", DIMS_4, _same(FLOATS, *ABO)))
_CLIP = rows(("5_0", DIMS_1_TO_8, _same(TYPES_10, *XO)), ("3_0", DIMS_1_TO_8, _same(TYPES_8, *XO)),
             ("2_1", DIMS_4, _same(TYPES_8, *XO)), ("1_0", DIMS_4, _same(FLOATS, *XO)))
_CLIP1 = rows(("5_0", DIMS_1_TO_8, _same(TYPES_10, *XO)))
_THRESHOLD = rows(("3_0", DIMS_1_TO_8, _same(TYPES_8, *XO)), ("2_1", DIMS_4, _same(TYPES_8, *XO)),
                  ("1_0", DIMS_4, _same(FLOATS, *XO)))
_CLIP_GRAD = rows(("5_0", DIMS_1_TO_8, _same(TYPES_10, *GRAD_O)), ("3_1", DIMS_1_TO_8, _same(TYPES_8, *GRAD_O)))
_CLIP_GRAD1 = rows(("5_0", DIMS_1_TO_8, _same(TYPES_10, *GRAD_O)))
# IF: the page has 5_0, 3_0 and a 2_0 row with FLOAT16 alone; see _IF_LEVELS_NOTE for the 2_0 and 2_1 rows.
_IF = rows(("5_0", DIMS_1_TO_8, _if(ALL11)), ("3_0", DIMS_1_TO_8, _if(TYPES_8)), ("2_1", DIMS_4, _if(TYPES_8)),
           ("2_0", DIMS_4, _if(FLOATS)))
_CEIL_FLOOR = rows(("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)), ("1_0", DIMS_4, _same(FLOATS, *XO)))
_ROUND = rows(("3_0", DIMS_1_TO_8, _same(FLOATS, *XO)), ("2_1", DIMS_4, _same(FLOATS, *XO)))


# ---------------------------------------------------------------- parameters

SCALE_BIAS = ScaleBiasParameter(
    field="ScaleBias",
    help="optional DML_SCALE_BIAS applied to the input first: x*Scale + Bias (both FLOAT)",
)
CLIP_MIN = FloatParameter(field="Min", help="the lower bound (FLOAT)", default_value=float(_F32.min))
CLIP_MAX = FloatParameter(field="Max", help="the upper bound (FLOAT)", default_value=float(_F32.max))
THRESHOLD_MIN = FloatParameter(field="Min", help="the lower bound (FLOAT)", default_value=float(_F32.min))
CLIP1_TYPE = DataTypeParameter(
    field="MinMaxDataType",
    help="the data type of Min and Max; must be OutputTensor's (given or not, it is checked)",
    tensor="OutputTensor",
)
CLIP1_MIN = ScalarUnionParameter(field="Min", help="the lower bound, a value of the tensor's data type",
                                 tensor="OutputTensor", default_limit="lowest")
CLIP1_MAX = ScalarUnionParameter(field="Max", help="the upper bound, a value of the tensor's data type",
                                 tensor="OutputTensor", default_limit="max")
# CLIP_GRAD1's page says MinMaxDataType "must match OutputTensor.DataType", a tensor it does not
# have; its three tensors share one data type, so the check reads InputTensor's.
CLIP_GRAD1_TYPE = DataTypeParameter(
    field="MinMaxDataType",
    help="the data type of Min and Max; must be the tensors' (given or not, it is checked)",
    tensor="InputTensor",
)
CLIP_GRAD1_MIN = ScalarUnionParameter(field="Min", help="the lower bound, a value of the tensors' data type",
                                      tensor="InputTensor", default_limit="lowest")
CLIP_GRAD1_MAX = ScalarUnionParameter(field="Max", help="the upper bound, a value of the tensors' data type",
                                      tensor="InputTensor", default_limit="max")
ROUNDING_MODE = EnumParameter(
    field="RoundingMode",
    help="halves_to_nearest_even (rint), toward_zero (trunc) or toward_infinity (nearest, halves away from zero)",
    enum_prefix="DML_ROUNDING_MODE_",
    values=(("HALVES_TO_NEAREST_EVEN", 0), ("TOWARD_ZERO", 1), ("TOWARD_INFINITY", 2)),
    default_value="HALVES_TO_NEAREST_EVEN",
)


# ---------------------------------------------------------------- notes

_NAN_ZERO_NOTE = (
    "NaN and signed zeros follow D3D's min/max (reference §C row 4, 'min/max(x, NaN) = x'), as np.fmax/np.fmin: "
    "a NaN operand loses to the other, so NaN comes out only when both are NaN (then the first operand). Of "
    "-0.0 and +0.0, max gives +0.0 and min gives -0.0 in either order (D3D leaves the order open; dmlcli "
    "orders them as IEEE 754-2019 maximum/minimum do). Integers compare exactly, 64-bit included."
)
_SCALE_BIAS_NOTE = (
    "ScaleBias (--scale/--bias, API scale=/bias=) is applied to the input first: g = x*Scale + Bias in float32, "
    "two roundings (FLOAT16 inputs widened exactly); the operator then runs on g in float32 and a FLOAT16 "
    "output is rounded once from that result. Without ScaleBias the input is used bit for bit."
)
_SCALE_BIAS_INTEGER_NOTE = (
    "DirectML does not say what ScaleBias does to an integer tensor. dmlcli follows the convention of its "
    "IDENTITY and ABS entries: x*Scale + Bias in float64 (each step rounded once), truncated toward zero and "
    "wrapped modulo 2^width into the tensor's type (NaN and infinities give 0); the operator then acts on "
    "that integer."
)
_INTEGER_FLOAT_BOUND_NOTE = (
    "DirectML does not say how FLOAT bounds meet integer tensors. dmlcli clamps to the whole numbers they "
    "admit, ceil(Min) and floor(Max), computed exactly from the float32 bounds and saturated to the type's "
    "range (INT64/UINT64 never go through a double); a NaN bound is no bound (the NaN rule), -inf/+inf "
    "bounds are the type's limits. Where no whole number lies between Min and Max, every element becomes "
    "floor(Max), as min(Max, max(Min, x)) gives."
)
_FLOAT_DEFAULT_BOUNDS_NOTE = (
    "DirectML requires Min and Max; dmlcli's API and command line default them to float32's lowest and "
    "largest finite values (-3.4028235e+38 and 3.4028235e+38, ONNX's and C++ numeric_limits' defaults), so "
    "a bound left out still turns -inf/+inf into those finite limits."
)
_THRESHOLD_INTEGER_NOTE = (
    "DirectML does not say how a FLOAT Min meets integer tensors. dmlcli raises each element to ceil(Min), "
    "computed exactly from the float32 bound and saturated to the type's range (INT64/UINT64 never go through "
    "a double); a NaN Min is no bound (the NaN rule), -inf the type's lowest value."
)
_CLIP_ORDER_NOTE = (
    "f(x) = min(Max, max(Min, x)) in that order (DirectML's CLIP page): with Min > Max every element becomes "
    "Max, as ONNX's test_clip_min_greater_than_max expects. By the NaN rule a NaN element becomes "
    "min(Max, Min): Min when Min <= Max."
)
_CLIP1_ORDER_NOTE = (
    "DirectML's CLIP1 page writes max(Min, min(x, Max)) while its CLIP page (and ONNX, and NumPy's clip) "
    "apply Max last, min(Max, max(Min, x)); they differ only when Min > Max. dmlcli gives CLIP1 CLIP's order "
    "(every element becomes Max), so that CLIP and CLIP1 agree; by the NaN rule a NaN element becomes "
    "min(Max, Min)."
)
_MIN_MAX_TYPE_NOTE = (
    "MinMaxDataType must be the tensors' own data type (DirectML: 'must match OutputTensor.DataType'). The "
    "API (min_max_data_type=) and the command line (--min-max-data-type) take it optionally, default the "
    "tensor's type, and refuse any other type; a DxDispatch model writes it ('FLOAT16' or "
    "'DML_TENSOR_DATA_TYPE_FLOAT16')."
)
_SCALAR_UNION_NOTE = (
    "Min and Max are DML_SCALAR_UNION values of that type, read exactly (INT64/UINT64 bounds never go through "
    "a double; FLOAT16 bounds are rounded once to float16). Left out in the API or on the command line they "
    "are the type's lowest and largest finite values (ONNX's defaults), so -inf/+inf become those limits. In "
    "a DxDispatch model a bound is a number or a one-member object ({\"Float32\": 1.5}, {\"UInt16\": "
    "<half bits>}, {\"Int8\": -3}, {\"Bytes\": [...]}): the member's value in the member's own type, its "
    "little-endian bytes (zero-filled to 8) read as the tensor's type."
)
_CLIP_GRAD_NOTE = (
    "The gradient passes where Min < x < Max (strict: DirectML gives 0 where x <= Min or x >= Max), else +0.0 "
    "(0 for integers). A NaN x gives 0: the page's pseudo-code (neither x <= Min nor x >= Max holds for NaN) "
    "would pass the gradient, but CLIP maps NaN to a constant (Min), whose gradient is 0, and comparisons with "
    "NaN are false. A NaN bound gives 0 everywhere. FLOAT16 is compared after widening exactly to float32; the "
    "gradient is copied bit for bit."
)
_CLIP_GRAD_INTEGER_NOTE = (
    "Integer tensors with FLOAT bounds compare exactly: x > Min as x > floor(Min) and x < Max as x < ceil(Max), "
    "with whole numbers that never go through a rounding double (INT64/UINT64 included)."
)
_IF_LEVELS_NOTE = (
    "IF's 2_0 row on DirectML's page lists FLOAT16 alone for ATensor/BTensor/OutputTensor (reference §D item 2). "
    "No other DirectML operator takes FLOAT16 without FLOAT32, so dmlcli reads the row as FLOAT32 and FLOAT16 "
    "(4 dimensions). The feature-level history says 2_1 added integer types to IF but the page has no 2_1 row: "
    "dmlcli adds one with the 3_0 row's eight types at 4 dimensions, as CLIP, MAX and MIN have."
)
_IF_VALUES_NOTE = (
    "Any nonzero condition byte selects A. The chosen element is copied bit for bit (NaN payloads, -0.0, FLOAT64). "
    "The page does not allow in-place execution, so a DxDispatch model may not alias the output."
)
_ROUND_NOTE = (
    "TOWARD_INFINITY means nearest with halves away from zero (C's round), not a ceiling (reference §D item 5). "
    "dmlcli computes it exactly from the fraction x - trunc(x) (exact in floating point), not as floor(x + 0.5), "
    "which is wrong for 0.49999997 (the sum rounds up to 1). HALVES_TO_NEAREST_EVEN is rint, TOWARD_ZERO trunc. "
    "Signs follow C: -0.4 rounds to -0.0, -0.5 to -1 away from zero, -0.0 stays -0.0; NaN and infinities pass."
)
_WHOLE_NOTE = (
    "Exact (the result is a whole number of the type): signed zeros follow C (ceil(-0.5) = -0.0), and float32 "
    "subnormals are not flushed (ceil(1e-45) = 1; D3D hardware may flush them, reference §C row 4)."
)
_IN_PLACE_NOTE = "The output may alias the input (DirectML's page permits in-place execution)."


# ---------------------------------------------------------------- NumPy kernels


def _pick(a, b, larger: bool):
    """max(a, b) or min(a, b) by the NaN and signed-zero rule (module docstring); ints exactly."""
    if a.dtype.kind != "f":
        return np.maximum(a, b) if larger else np.minimum(a, b)
    if np.shape(a) != np.shape(b):
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    with np.errstate(all="ignore"):
        if _whole_vectors_apply(a, b):
            return _pick_by_whole_vectors(a, b, larger)
        return _pick_checked(a, b, larger)


def _whole_vectors_apply(*operands: np.ndarray) -> bool:
    """Whether np.fmax/np.fmin's vector loops settle NaN for these operands by the rule themselves: large
    contiguous, aligned arrays of one type (no broadcast operand, no buffering) where the probe says so."""
    first = operands[0]
    return (first.size >= WHOLE_VECTORS
            and all(o.dtype == first.dtype and o.flags.c_contiguous and o.flags.aligned for o in operands)
            and fmax_fmin_follow_nan_rule(first.dtype))


# The part of the result checked for zeros right after it is written, while it is still in the core's own
# cache (a common L2 holds 1 MiB): a check of the whole result after the pass may read it back from memory,
# where other processes share the last-level cache (bench/cpu_ops_bench.py: up to a fifth of MAX's time).
_CHECKED_PART_BYTES = 1 << 20
# NumPy's clip ufunc itself: ndarray.clip and np.clip reach it through a Python wrapper (numpy/_core/_methods.py)
# whose checks cost about 28 us a call, 0.45 ms of a 16 MiB CLIP in 1 MiB parts (1.6x -> 1.35x np.clip's time).
# Private in NumPy 2 (numpy._core.umath); the method where it is not there.
_CLIP_UFUNC = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)


def _pick_by_whole_vectors(a, b, larger: bool):
    """The rule's result with one check, for zeros alone: np.fmax/np.fmin over the whole vectors, which settle
    NaN themselves (fmax_fmin_follow_nan_rule), _pick_checked over the few elements left. Then only a tie of
    zeros can be wrong, and only where the result holds the zero that loses it (-0.0 for max, +0.0 for min)."""
    out = np.empty(a.shape, a.dtype)
    flat, flat_a, flat_b = out.reshape(-1), a.reshape(-1), b.reshape(-1)
    whole = flat.size - flat.size % WHOLE_VECTORS
    pick = np.fmax if larger else np.fmin
    step = max(1, _CHECKED_PART_BYTES // (a.itemsize * WHOLE_VECTORS)) * WHOLE_VECTORS
    losing_zero = False
    for start in range(0, whole, step):
        part = flat[start:start + step]
        pick(flat_a[start:start + step], flat_b[start:start + step], out=part)
        losing_zero = losing_zero or has_zero(part, negative=larger)
    if whole < flat.size:
        flat[whole:] = _pick_checked(flat_a[whole:], flat_b[whole:], larger)
        losing_zero = losing_zero or has_zero(flat[whole:], negative=larger)
    if losing_zero:
        _settle_zero_ties(flat_a, flat_b, flat, larger)
    return out


def _settle_zero_ties(a, b, out, larger: bool) -> None:
    """Where a and b are both zeros, writes max's +0.0 unless both are -0.0 (AND of the bits) or min's -0.0
    unless both are +0.0 (OR): equal values have equal bits except -0.0 and +0.0."""
    zeros = a == 0
    zeros &= b == 0
    tie = np.bitwise_and if larger else np.bitwise_or
    tie(as_bits(a), as_bits(b), out=as_bits(out), where=zeros)


def _pick_checked(a, b, larger: bool):
    """_pick for any operands (broadcast ones too): np.fmax/np.fmin, kept where two reductions find neither
    NaN nor the zero that loses a tie in the result, else every element settled by the rule."""
    chosen = np.fmax(a, b) if larger else np.fmin(a, b)
    # fmax/fmin return an operand (or a NaN): without NaN in the result they are exact except where
    # they chose -0.0 over +0.0 (max) or +0.0 over -0.0 (min), so a result free of that zero is final.
    if not has_nan(chosen) and not has_zero(chosen, negative=larger):
        return chosen
    # NaN operands are settled here, not by fmax/fmin: NumPy's scalar loops (C's fmaxf: a remainder after
    # whole vectors, or a broadcast operand) may return a quiet NaN for a signalling one (IEEE 754-2008
    # maxNum), so the result would depend on the chunking. The other operand wins; where both are NaN, the
    # first (as on the GPU).
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if nan_a.any() or nan_b.any():
        chosen = np.where(nan_b, a, np.where(nan_a, b, chosen))
    # Equal values have equal bits except -0.0 and +0.0: AND of the bits gives +0.0, OR gives -0.0.
    zeros = (a == 0) & (b == 0)
    if zeros.any():
        tie = (as_bits(a) & as_bits(b)) if larger else (as_bits(a) | as_bits(b))
        chosen = np.where(zeros, tie.view(a.dtype), chosen)
    return chosen


def _work(x):
    """FLOAT16 and FLOAT32 arithmetic runs in float32 (FLOAT16 widened exactly)."""
    return x.astype(np.float32, copy=False)


def _scaled(x, params):
    """The input after the optional ScaleBias: float32 for FLOAT16/FLOAT32 (x*Scale + Bias, two roundings),
    the tensor's own type for integers (float64, truncated and wrapped); without ScaleBias floats are
    widened to float32 exactly and integers are returned as they are."""
    pair = params.get("ScaleBias")
    if x.dtype.kind == "f":
        work = _work(x)
        if pair is None:
            return work
        return float32_scale_bias(work, pair)
    if pair is None:
        return x
    return integer_scale_bias(x, pair)


def _whole_bound(bound, dtype, upper: bool) -> int:
    """The integer bound a FLOAT bound sets on an integer type: floor (upper) or ceil (lower), saturated."""
    info = np.iinfo(dtype)
    value = float(np.float32(bound))
    if math.isnan(value):
        return info.max if upper else info.min  # a NaN bound is no bound
    if math.isinf(value):
        return info.max if value > 0 else info.min
    whole = math.floor(value) if upper else math.ceil(value)
    return min(max(whole, info.min), info.max)


def _narrowed(values, out_dtype):
    """float32 results rounded once to the output type (a FLOAT16 overflow is an infinity, without a warning)."""
    if values.dtype == out_dtype:
        return values  # FLOAT32: no errstate to enter (0.03 ms of a call once NumPy's code is out of the caches)
    with np.errstate(all="ignore"):
        return values.astype(out_dtype, copy=False)


def _typed(value, dtype):
    return np.asarray(value).astype(dtype)


def max_(inputs, out_dtype, params):
    a, b = inputs
    return _pick(a, b, True).astype(out_dtype, copy=False)


def min_(inputs, out_dtype, params):
    a, b = inputs
    return _pick(a, b, False).astype(out_dtype, copy=False)


def _fast_clip(g, low, high):
    """np.clip(g, low, high) (float32 bounds, low < high) where it gives the NaN and signed-zero rule's
    result, else None. np.clip returns an operand, so only a NaN element (the rule gives it a bound) or a
    zero bound meeting g's zero of the other sign (a tie it may settle either way) could differ. Where
    np.clip keeps NaN as it is, NaN is looked for in its output, part by part as it is written; else in g
    first."""
    if not low < high:  # NaN bounds and Min >= Max: the careful path
        return None
    if any(bound == 0 and has_zero(g, negative=not np.signbit(bound)) for bound in (low, high)):
        return None
    if clip_keeps_nan_bits(g.dtype):
        return _clip_checked_by_parts(g, low, high)
    return None if has_nan(g) else np.clip(g, low, high)


def _clip_checked_by_parts(g, low, high):
    """np.clip(g, low, high), or None where it holds a NaN: each part of the result (_CHECKED_PART_BYTES) is
    looked for NaN right after it is written, while it is still in the core's cache; a check of the whole
    result after the pass reads it back from farther away (the kernel alone: about 1.55x -> 1.45x np.clip)."""
    if not g.flags.c_contiguous:
        clipped = np.clip(g, low, high)
        return None if has_nan(clipped) else clipped
    out = np.empty(g.shape, g.dtype)
    flat, flat_g = out.reshape(-1), g.reshape(-1)
    step = max(1, _CHECKED_PART_BYTES // g.itemsize)
    largest = np.maximum.reduce  # propagates NaN; called directly, as has_nan's checks cost a part a microsecond
    for start in range(0, flat.size, step):
        part = flat[start:start + step]
        if _CLIP_UFUNC is not None:
            _CLIP_UFUNC(flat_g[start:start + step], low, high, out=part)
        else:
            flat_g[start:start + step].clip(low, high, out=part)
        top = largest(part)
        if top != top:
            return None  # a NaN: the careful path settles every element
    return out


def _clamp_in_one_pass(g, low, high):
    """min(high, max(low, g)) by the NaN and zero rules in one pass (float32 bounds, low < high): the compiled
    loop where DMLCLI_COMPILED_LOOPS turns the loops on, else np.clip where _fast_clip finds it gives the rule's
    result; None where neither does (the careful path then)."""
    loops = compiled_loops.active()
    clamped = None if loops is None else loops.clamp(g, low, high)
    return clamped if clamped is not None else _fast_clip(g, low, high)


def _clamp_floats(g, low, high):
    """min(high, max(low, g)) in float32 by the NaN rule."""
    clipped = _clamp_in_one_pass(g, np.float32(low), np.float32(high))
    if clipped is not None:
        return clipped
    return _pick(_typed(high, np.float32), _pick(_typed(low, np.float32), g, True), False)


def clip(inputs, out_dtype, params):
    (x,) = inputs
    g = _scaled(x, params)
    if x.dtype.kind == "f":
        return _narrowed(_clamp_floats(g, params["Min"], params["Max"]), out_dtype)
    low = _typed(_whole_bound(params["Min"], x.dtype, False), x.dtype)
    high = _typed(_whole_bound(params["Max"], x.dtype, True), x.dtype)
    return np.minimum(high, np.maximum(low, g)).astype(out_dtype, copy=False)


def clip1(inputs, out_dtype, params):
    (x,) = inputs
    g = _scaled(x, params)
    if x.dtype.kind == "f":
        return _narrowed(_clamp_floats(g, params["Min"], params["Max"]), out_dtype)
    low, high = _typed(params["Min"], x.dtype), _typed(params["Max"], x.dtype)
    return np.minimum(high, np.maximum(low, g)).astype(out_dtype, copy=False)


def threshold(inputs, out_dtype, params):
    (x,) = inputs
    g = _scaled(x, params)
    if x.dtype.kind == "f":
        return _narrowed(_raise_floats(g, np.float32(params["Min"])), out_dtype)
    low = _typed(_whole_bound(params["Min"], x.dtype, False), x.dtype)
    return np.maximum(g, low).astype(out_dtype, copy=False)


def _raise_floats(g, low):
    """max(g, low) in float32 by the NaN and zero rules. Without the compiled loops, np.fmax against a vector of
    low where its vector loops follow the NaN rule (no NaN check then: a NaN every 97 elements cost the clamp's
    path, which sends a tensor with NaN to the careful one, 2x np.fmax's time). Else a clamp with +inf above in one
    pass (the compiled loop, or np.clip where it gives the rule's result; np.fmax by a scalar runs slower than
    either); else the careful path."""
    if compiled_loops.active() is None and low == low and _whole_vectors_apply(g):
        return _raise_by_whole_vectors(g, low)
    raised = _clamp_in_one_pass(g, low, np.float32(np.inf))
    return raised if raised is not None else _pick(g, _typed(low, np.float32), True)


# THRESHOLD's np.fmax runs against a vector of Min a part at a time: the input's part, Min's vector and the
# result's part (3 x 256 KiB) stay in the core's own cache (with 1 MiB parts, 3 MiB, the pass took 1.3x as long).
_BOUND_PART_BYTES = 1 << 18


def _raise_by_whole_vectors(g, low):
    """max(g, low) by the rule for a contiguous float array and a number low (not NaN), where np.fmax's vector
    loops settle NaN by the rule (_whole_vectors_apply): np.fmax against a vector of low, whole vectors at a time,
    the few elements left through _pick. A NaN element gets low from the loop itself, so no NaN is looked for.
    Only a zero low can meet a tie (a zero of the other sign, which the loop may settle either way). +0.0 needs no
    look where the probe fmax_gives_positive_zero shows the loop settles its ties by the rule (the look, a
    reduction of each part, cost 1.6x np.fmax's time against 1.2x without); -0.0 does: each part of the result is
    looked for -0.0, the zero that loses a tie, as it is written, and where one is found the ties are settled."""
    out = np.empty(g.shape, g.dtype)
    flat, flat_g = out.reshape(-1), g.reshape(-1)
    whole = flat.size - flat.size % WHOLE_VECTORS
    step = max(1, _BOUND_PART_BYTES // (g.itemsize * WHOLE_VECTORS)) * WHOLE_VECTORS
    bound = np.full(min(step, whole), low, g.dtype)
    low = _typed(low, g.dtype)
    ties_looked_for = bool(low == 0) and (bool(np.signbit(low)) or not fmax_gives_positive_zero(g.dtype))
    losing_zero = False
    for start in range(0, whole, step):
        stop = min(start + step, whole)
        part = flat[start:stop]
        np.fmax(flat_g[start:stop], bound[:stop - start], out=part)
        losing_zero = losing_zero or (ties_looked_for and has_zero(part, negative=True))
    if whole < flat.size:
        flat[whole:] = _pick(flat_g[whole:], low, True)
    if losing_zero:
        _settle_zero_ties(flat_g, low, flat, True)
    return out


def _integer_above(x, bound):
    """x > bound exactly, for an integer array and a float32 bound (x > floor(bound))."""
    value = float(np.float32(bound))
    if math.isnan(value):
        return np.zeros(x.shape, bool)
    if math.isinf(value):
        return np.full(x.shape, value < 0)
    whole, info = math.floor(value), np.iinfo(x.dtype)
    if whole < info.min:
        return np.ones(x.shape, bool)
    if whole > info.max:
        return np.zeros(x.shape, bool)
    return x > _typed(whole, x.dtype)


def _integer_below(x, bound):
    """x < bound exactly, for an integer array and a float32 bound (x < ceil(bound))."""
    value = float(np.float32(bound))
    if math.isnan(value):
        return np.zeros(x.shape, bool)
    if math.isinf(value):
        return np.full(x.shape, value > 0)
    whole, info = math.ceil(value), np.iinfo(x.dtype)
    if whole > info.max:
        return np.ones(x.shape, bool)
    if whole < info.min:
        return np.zeros(x.shape, bool)
    return x < _typed(whole, x.dtype)


def _pass_gradient(inside, gradient, out_dtype):
    return np.where(inside, gradient, np.zeros((), gradient.dtype)).astype(out_dtype, copy=False)


def clip_grad(inputs, out_dtype, params):
    x, gradient = inputs
    if x.dtype.kind == "f":
        with np.errstate(all="ignore"):
            w = _work(x)
            inside = (w > np.float32(params["Min"])) & (w < np.float32(params["Max"]))
    else:
        inside = _integer_above(x, params["Min"]) & _integer_below(x, params["Max"])
    return _pass_gradient(inside, gradient, out_dtype)


def clip_grad1(inputs, out_dtype, params):
    x, gradient = inputs
    low, high = _typed(params["Min"], x.dtype), _typed(params["Max"], x.dtype)
    with np.errstate(all="ignore"):
        inside = (x > low) & (x < high)  # one dtype on each side: exact (FLOAT16 compares exactly too)
    return _pass_gradient(inside, gradient, out_dtype)


def if_(inputs, out_dtype, params):
    condition, a, b = inputs
    return np.where(condition != 0, a, b).astype(out_dtype, copy=False)


def _whole(function):
    def kernel(inputs, out_dtype, params):
        (x,) = inputs
        if params.get("ScaleBias") is None:
            return function(x).astype(out_dtype, copy=False)  # exact in the input's own type
        return _narrowed(function(_scaled(x, params)), out_dtype)

    kernel.__name__ = function.__name__
    return kernel


ceil = _whole(np.ceil)
floor = _whole(np.floor)


def _round_half_away(x):
    """Nearest whole number, halves away from zero, exactly: trunc(x) +- 1 by the exact fraction x - trunc(x)."""
    with np.errstate(all="ignore"):
        w = _work(x)
        whole = np.trunc(w)
        fraction = w - whole  # exact; NaN for infinities (then the whole part, the infinity, stays)
        result = np.where(fraction >= 0.5, whole + np.float32(1), np.where(fraction <= -0.5, whole - np.float32(1), whole))
    return np.where(np.isnan(x), x, result.astype(x.dtype))


_ROUNDERS = {"HALVES_TO_NEAREST_EVEN": np.rint, "TOWARD_ZERO": np.trunc, "TOWARD_INFINITY": _round_half_away}


def round_(inputs, out_dtype, params):
    (x,) = inputs
    return _ROUNDERS[params["RoundingMode"]](x).astype(out_dtype, copy=False)


# ---------------------------------------------------------------- CUDA helpers
#
# Each operator's module holds its own helpers, named dml_<operator>_*, overloaded for dml_f32
# (FLOAT32 and FLOAT16 values) and, as templates, for every integer type. CuPy compiles with
# -ftz=true, so nothing here lets the compiler touch a float32 that may be subnormal: comparisons and
# arithmetic go through dml_f32 (IEEE, inline PTX), float -> double and rounding to a whole number
# are inline PTX without .ftz, NaN tests read the bits.


def _pick_helpers(p: str) -> str:
    return f"""
template <typename T>
__device__ __forceinline__ T {p}_max(T a, T b) {{ return a < b ? b : a; }}
template <typename T>
__device__ __forceinline__ T {p}_min(T a, T b) {{ return b < a ? b : a; }}
// FLOAT: a NaN operand loses to the other (both NaN: a); equal values have equal bits except -0.0 and
// +0.0, for which the AND of the bits (max) gives +0.0 and the OR (min) gives -0.0.
__device__ __forceinline__ dml_f32 {p}_max(dml_f32 a, dml_f32 b) {{
    if (isnan(b)) return a;
    if (isnan(a)) return b;
    if (a == b) return dml_f32{{__uint_as_float(__float_as_uint(a.v) & __float_as_uint(b.v))}};
    return a < b ? b : a;
}}
__device__ __forceinline__ dml_f32 {p}_min(dml_f32 a, dml_f32 b) {{
    if (isnan(b)) return a;
    if (isnan(a)) return b;
    if (a == b) return dml_f32{{__uint_as_float(__float_as_uint(a.v) | __float_as_uint(b.v))}};
    return b < a ? b : a;
}}
"""


def _integer_helpers(p: str) -> str:
    """Type limits, an exact floor/ceil of a FLOAT bound, saturation to a type's range."""
    return f"""
template <typename T>
__device__ __forceinline__ T {p}_highest() {{
    return ((T)-1 < (T)0) ? (T)((1ull << (sizeof(T) * 8 - 1)) - 1ull) : (T)~0ull;
}}
template <typename T>
__device__ __forceinline__ T {p}_lowest() {{
    return ((T)-1 < (T)0) ? (T)(-(long long)((1ull << (sizeof(T) * 8 - 1)) - 1ull) - 1ll) : (T)0;
}}
__device__ __forceinline__ bool {p}_is_nan(float f) {{ return (__float_as_uint(f) & 0x7fffffffu) > 0x7f800000u; }}
__device__ __forceinline__ double {p}_widen(float f) {{ return dml_widen(f); }}
// floor (down) or ceil of a float32 exactly, as a double (infinities pass; NaN is the caller's).
__device__ __forceinline__ double {p}_whole(float f, bool down) {{
    const double d = {p}_widen(f);
    return down ? floor(d) : ceil(d);
}}
// A whole-number double (or an infinity) saturated to T's range.
template <typename T>
__device__ __forceinline__ T {p}_saturate(double r) {{
    if (r < (double){p}_lowest<T>()) return {p}_lowest<T>();
    if (r >= (double){p}_highest<T>() + 1.0) return {p}_highest<T>();
    return (T)r;
}}
// The integer bound a FLOAT bound sets on T: ceil(Min) (lower) or floor(Max) (upper); NaN: no bound.
template <typename T>
__device__ __forceinline__ T {p}_bound(float f, bool upper) {{
    if ({p}_is_nan(f)) return upper ? {p}_highest<T>() : {p}_lowest<T>();
    return {p}_saturate<T>({p}_whole(f, upper));
}}
"""


def _scale_bias_helpers(p: str) -> str:
    """{p}_scale_bias: floats x*Scale + Bias in float32; integers in float64, truncated and wrapped."""
    return cuda_scale_bias_helpers(p)


_CLIP_HELPERS = _pick_helpers("dml_clip") + _integer_helpers("dml_clip") + _scale_bias_helpers("dml_clip") + """
__device__ __forceinline__ dml_f32 dml_clip_apply(dml_f32 x, int has, float scale, float bias, float lo, float hi) {
    return dml_clip_min(dml_f32{hi}, dml_clip_max(dml_f32{lo}, dml_clip_scale_bias(x, has, scale, bias)));
}
template <typename T>
__device__ __forceinline__ T dml_clip_apply(T x, int has, float scale, float bias, float lo, float hi) {
    const T g = dml_clip_scale_bias(x, has, scale, bias);
    return dml_clip_min(dml_clip_bound<T>(hi, true), dml_clip_max(dml_clip_bound<T>(lo, false), g));
}
"""

_CLIP1_HELPERS = _pick_helpers("dml_clip1") + _scale_bias_helpers("dml_clip1") + """
__device__ __forceinline__ dml_f32 dml_clip1_apply(dml_f32 x, int has, float scale, float bias, float lo, float hi) {
    return dml_clip1_min(dml_f32{hi}, dml_clip1_max(dml_f32{lo}, dml_clip1_scale_bias(x, has, scale, bias)));
}
template <typename T>
__device__ __forceinline__ T dml_clip1_apply(T x, int has, float scale, float bias, T lo, T hi) {
    return dml_clip1_min(hi, dml_clip1_max(lo, dml_clip1_scale_bias(x, has, scale, bias)));
}
"""

_THRESHOLD_HELPERS = (_pick_helpers("dml_threshold") + _integer_helpers("dml_threshold")
                      + _scale_bias_helpers("dml_threshold") + """
__device__ __forceinline__ dml_f32 dml_threshold_apply(dml_f32 x, int has, float scale, float bias, float lo) {
    return dml_threshold_max(dml_threshold_scale_bias(x, has, scale, bias), dml_f32{lo});
}
template <typename T>
__device__ __forceinline__ T dml_threshold_apply(T x, int has, float scale, float bias, float lo) {
    return dml_threshold_max(dml_threshold_scale_bias(x, has, scale, bias), dml_threshold_bound<T>(lo, false));
}
""")

_CLIP_GRAD_HELPERS = _integer_helpers("dml_clip_grad") + """
__device__ __forceinline__ dml_f32 dml_clip_grad_apply(dml_f32 x, dml_f32 g, float lo, float hi) {
    return (x > lo && x < hi) ? g : dml_f32{0.0f};
}
// x > lo  <=>  x > floor(lo), and x < hi  <=>  x < ceil(hi), for a whole number x (NaN bounds: false).
template <typename T>
__device__ __forceinline__ bool dml_clip_grad_above(T x, float f) {
    if (dml_clip_grad_is_nan(f)) return false;
    const double r = dml_clip_grad_whole(f, true);
    if (r < (double)dml_clip_grad_lowest<T>()) return true;
    if (r >= (double)dml_clip_grad_highest<T>() + 1.0) return false;
    return x > (T)r;
}
template <typename T>
__device__ __forceinline__ bool dml_clip_grad_below(T x, float f) {
    if (dml_clip_grad_is_nan(f)) return false;
    const double r = dml_clip_grad_whole(f, false);
    if (r >= (double)dml_clip_grad_highest<T>() + 1.0) return true;
    if (r < (double)dml_clip_grad_lowest<T>()) return false;
    return x < (T)r;
}
template <typename T>
__device__ __forceinline__ T dml_clip_grad_apply(T x, T g, float lo, float hi) {
    return (dml_clip_grad_above<T>(x, lo) && dml_clip_grad_below<T>(x, hi)) ? g : (T)0;
}
"""

_CLIP_GRAD1_HELPERS = """
__device__ __forceinline__ dml_f32 dml_clip_grad1_apply(dml_f32 x, dml_f32 g, float lo, float hi) {
    return (x > lo && x < hi) ? g : dml_f32{0.0f};
}
template <typename T>
__device__ __forceinline__ T dml_clip_grad1_apply(T x, T g, T lo, T hi) {
    return (x > lo && x < hi) ? g : (T)0;
}
"""


def _whole_helpers(p: str, ptx: str) -> str:
    """{p}_apply: the optional ScaleBias, then cvt.<ptx>.f32.f32 (rounding to a whole number, no .ftz)."""
    return f"""
__device__ __forceinline__ dml_f32 {p}_apply(dml_f32 x, int has, float scale, float bias) {{
    const dml_f32 g = has ? x * scale + bias : x;
    if (isnan(g)) return g;
    float r;
    asm("cvt.{ptx}.f32.f32 %0, %1;" : "=f"(r) : "f"(g.v));
    return dml_f32{{r}};
}}
"""


_ROUND_HELPERS = """
__device__ __forceinline__ dml_f32 dml_round_rni(dml_f32 x) {
    float r;
    asm("cvt.rni.f32.f32 %0, %1;" : "=f"(r) : "f"(x.v));
    return dml_f32{r};
}
__device__ __forceinline__ dml_f32 dml_round_rzi(dml_f32 x) {
    float r;
    asm("cvt.rzi.f32.f32 %0, %1;" : "=f"(r) : "f"(x.v));
    return dml_f32{r};
}
// RoundingMode 0: halves to even; 1: toward zero; 2: nearest, halves away from zero, from the exact
// fraction x - trunc(x) (an infinity's fraction is NaN: its whole part is returned).
__device__ __forceinline__ dml_f32 dml_round_apply(dml_f32 x, int mode) {
    if (isnan(x)) return x;
    if (mode == 0) return dml_round_rni(x);
    const dml_f32 t = dml_round_rzi(x);
    if (mode == 1) return t;
    const dml_f32 fraction = x - t;
    if (fraction >= 0.5f) return t + 1.0f;
    if (fraction <= -0.5f) return t - 1.0f;
    return t;
}
"""


# ---------------------------------------------------------------- entries


def _pick_entry(name: str, enum_value: int, word: str, kernel) -> Operator:
    return Operator(
        name=name, enum_value=enum_value, family="arithmetic",
        summary=f"The {word} of each pair of corresponding elements of ATensor and BTensor.",
        formula=f"f(a, b) = {name.lower()}(a, b)   (a NaN operand loses to the other)",
        introduced=level("1_0"), inputs=AB, support=_MIN_MAX, same_data_type=ABO, same_sizes=ABO,
        cpu_kernel=kernel, cuda_body=f"dml_{name.lower()}_{name.lower()}(a, b)", in_place=True,
        cuda_helpers=_pick_helpers(f"dml_{name.lower()}"), exactness=EXACT, notes=(_NAN_ZERO_NOTE, _IN_PLACE_NOTE),
    )


def _whole_entry(name: str, enum_value: int, word: str, ptx: str, kernel) -> Operator:
    return Operator(
        name=name, enum_value=enum_value, family="arithmetic",
        summary=f"Rounds each element (after the optional ScaleBias) {word}.",
        formula=f"f(x) = {name.lower()}(x)   (with ScaleBias: {name.lower()}(x*Scale + Bias))",
        introduced=level("1_0"), inputs=X, support=_CEIL_FLOOR, same_data_type=XO, same_sizes=XO,
        parameters=(SCALE_BIAS,), cpu_kernel=kernel, cuda_body=f"dml_{name.lower()}_apply(x, HasScaleBias, Scale, Bias)",
        cuda_helpers=_whole_helpers(f"dml_{name.lower()}", ptx), in_place=True, exactness=EXACT,
        notes=(_WHOLE_NOTE, _SCALE_BIAS_NOTE, _IN_PLACE_NOTE),
    )


OPERATORS: tuple[Operator, ...] = (
    _pick_entry("MAX", 21, "larger", max_),
    _pick_entry("MIN", 23, "smaller", min_),
    Operator(
        name="CLIP", enum_value=8, family="arithmetic",
        summary="Clamps each element (after the optional ScaleBias) to [Min, Max] (FLOAT bounds).",
        formula="f(x) = min(Max, max(Min, x))   (with ScaleBias: x*Scale + Bias first)",
        introduced=level("1_0"), inputs=X, support=_CLIP, same_data_type=XO, same_sizes=XO,
        parameters=(SCALE_BIAS, CLIP_MIN, CLIP_MAX), cpu_kernel=clip,
        cuda_body="dml_clip_apply(x, HasScaleBias, Scale, Bias, Min, Max)", cuda_helpers=_CLIP_HELPERS,
        in_place=True, exactness=EXACT,
        notes=(_CLIP_ORDER_NOTE, _NAN_ZERO_NOTE, _FLOAT_DEFAULT_BOUNDS_NOTE, _INTEGER_FLOAT_BOUND_NOTE,
               _SCALE_BIAS_NOTE, _SCALE_BIAS_INTEGER_NOTE, _IN_PLACE_NOTE),
    ),
    Operator(
        name="CLIP1", enum_value=153, family="arithmetic",
        summary="Clamps each element (after the optional ScaleBias) to [Min, Max], bounds in the tensor's own type.",
        formula="f(x) = min(Max, max(Min, x))   (Min, Max: DML_SCALAR_UNION of MinMaxDataType)",
        introduced=level("5_0"), inputs=X, support=_CLIP1, same_data_type=XO, same_sizes=XO,
        parameters=(SCALE_BIAS, CLIP1_TYPE, CLIP1_MIN, CLIP1_MAX), cpu_kernel=clip1,
        cuda_body="dml_clip1_apply(x, HasScaleBias, Scale, Bias, Min, Max)", cuda_helpers=_CLIP1_HELPERS,
        in_place=True, exactness=EXACT,
        notes=(_CLIP1_ORDER_NOTE, _MIN_MAX_TYPE_NOTE, _SCALAR_UNION_NOTE, _NAN_ZERO_NOTE, _SCALE_BIAS_NOTE,
               _SCALE_BIAS_INTEGER_NOTE, _IN_PLACE_NOTE),
    ),
    Operator(
        name="THRESHOLD", enum_value=32, family="arithmetic",
        summary="Raises each element (after the optional ScaleBias) to at least Min.",
        formula="f(x) = max(x, Min)   (with ScaleBias: max(x*Scale + Bias, Min))",
        introduced=level("1_0"), inputs=X, support=_THRESHOLD, same_data_type=XO, same_sizes=XO,
        parameters=(SCALE_BIAS, THRESHOLD_MIN), cpu_kernel=threshold,
        cuda_body="dml_threshold_apply(x, HasScaleBias, Scale, Bias, Min)", cuda_helpers=_THRESHOLD_HELPERS,
        in_place=True, exactness=EXACT,
        notes=(_NAN_ZERO_NOTE,
               "DirectML requires Min; dmlcli's API and command line default it to float32's lowest finite value "
               "(-3.4028235e+38), which still turns -inf into that value.",
               _THRESHOLD_INTEGER_NOTE,
               _SCALE_BIAS_NOTE, _SCALE_BIAS_INTEGER_NOTE, _IN_PLACE_NOTE),
    ),
    Operator(
        name="CLIP_GRAD", enum_value=142, family="arithmetic",
        summary="CLIP's backward pass: the incoming gradient where Min < x < Max, else 0 (FLOAT bounds).",
        formula="f(x, gradient) = (Min < x && x < Max) ? gradient : 0",
        introduced=level("3_1"), inputs=GRAD, output="OutputGradientTensor", support=_CLIP_GRAD,
        same_data_type=GRAD_O, same_sizes=GRAD_O, parameters=(CLIP_MIN, CLIP_MAX), cpu_kernel=clip_grad,
        cuda_names=("x", "g"), cuda_body="dml_clip_grad_apply(x, g, Min, Max)", cuda_helpers=_CLIP_GRAD_HELPERS,
        in_place=True, exactness=EXACT,
        notes=(_CLIP_GRAD_NOTE, _CLIP_GRAD_INTEGER_NOTE,
               "DirectML requires Min and Max; dmlcli's API and command line default them to float32's lowest and "
               "largest finite values.", _IN_PLACE_NOTE),
    ),
    Operator(
        name="CLIP_GRAD1", enum_value=154, family="arithmetic",
        summary="CLIP1's backward pass: the incoming gradient where Min < x < Max, else 0 (bounds in the tensors' type).",
        formula="f(x, gradient) = (Min < x && x < Max) ? gradient : 0   (Min, Max: DML_SCALAR_UNION)",
        introduced=level("5_0"), inputs=GRAD, output="OutputGradientTensor", support=_CLIP_GRAD1,
        same_data_type=GRAD_O, same_sizes=GRAD_O, parameters=(CLIP_GRAD1_TYPE, CLIP_GRAD1_MIN, CLIP_GRAD1_MAX),
        cpu_kernel=clip_grad1, cuda_names=("x", "g"), cuda_body="dml_clip_grad1_apply(x, g, Min, Max)",
        cuda_helpers=_CLIP_GRAD1_HELPERS, in_place=True, exactness=EXACT,
        notes=(_CLIP_GRAD_NOTE,
               "MinMaxDataType must be the tensors' data type (the page says 'must match OutputTensor.DataType', "
               "a tensor CLIP_GRAD1 does not have; its three tensors share one type, and dmlcli checks it "
               "against InputTensor). Optional in the API and on the command line (default: the tensors' type).",
               _SCALAR_UNION_NOTE, _IN_PLACE_NOTE),
    ),
    Operator(
        name="IF", enum_value=88, family="arithmetic",
        summary="Selects each element from ATensor where ConditionTensor is nonzero, else from BTensor.",
        formula="f(cond, a, b) = cond != 0 ? a : b",
        introduced=level("2_0"), inputs=IF_INPUTS, support=_IF, same_data_type=ABO, same_sizes=IF_ALL,
        # Native encoding: the chosen element's bits are copied, NaN payloads included, on the GPU too.
        cpu_kernel=if_, cuda_names=("c", "a", "b"), cuda_body="c != 0 ? a : b", exactness=EXACT, native_encoding=True,
        notes=(_IF_LEVELS_NOTE, _IF_VALUES_NOTE),
    ),
    _whole_entry("CEIL", 7, "up (toward +inf)", "rpi", ceil),
    _whole_entry("FLOOR", 12, "down (toward -inf)", "rmi", floor),
    Operator(
        name="ROUND", enum_value=99, family="arithmetic",
        summary="Rounds each element to a whole number by RoundingMode.",
        formula=("f(x) = rint(x) (HALVES_TO_NEAREST_EVEN) | trunc(x) (TOWARD_ZERO) | "
                 "round(x), halves away from zero (TOWARD_INFINITY)"),
        introduced=level("2_1"), inputs=X, support=_ROUND, same_data_type=XO, same_sizes=XO,
        parameters=(ROUNDING_MODE,), cpu_kernel=round_, cuda_body="dml_round_apply(x, RoundingMode)",
        cuda_helpers=_ROUND_HELPERS, in_place=True, exactness=EXACT, notes=(_ROUND_NOTE, _IN_PLACE_NOTE),
    ),
)
