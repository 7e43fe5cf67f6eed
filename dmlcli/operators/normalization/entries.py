"""The normalization family: BATCH_NORMALIZATION, MEAN_VARIANCE_NORMALIZATION (its "1" form with Axes, its "2"
form with UseMean and UseVariance), LOCAL_RESPONSE_NORMALIZATION and LP_NORMALIZATION.

Sources: DirectML's pages for each DESC (MicrosoftDocs/sdk-api, ns-directml-dml_<name>_operator_desc.md, the
newest stored version of each: batch_normalization 9ade0e62, mean_variance_normalization db7dd4d9,
mean_variance_normalization1 5b9c53c5, local_response_normalization 2cd469d9, lp_normalization f4acb9bc): fields,
formulas, broadcasting rules and support tables; the DML_OPERATOR_TYPE values of DirectML.h (BATCH_NORMALIZATION 72,
MEAN_VARIANCE_NORMALIZATION 73, LOCAL_RESPONSE_NORMALIZATION 74, LP_NORMALIZATION 75,
MEAN_VARIANCE_NORMALIZATION1 115, MEAN_VARIANCE_NORMALIZATION2 171). MEAN_VARIANCE_NORMALIZATION2 (6_3) has no
stored page: its fields are DirectML.h's, its meaning ONNX Runtime's DirectML provider's (the entry's notes). Each
kernel is one function for both backends (`xp` is numpy or cupy).

One arithmetic rule for the family: FLOAT32 and FLOAT16 tensors are computed in FLOAT32 (FLOAT16 widened
exactly) and rounded once to the output type; a fused activation then runs on that rounded result, exactly as
the activation operator would on it (as ELEMENT_WISE_ADD1 does). NaN propagates through every formula.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import FLOATS
from ...feature_levels import level
from ..elementwise.activation import FUSABLE, FUSABLE_NAMES
from ..numerics import compiled_loops
from ..numerics.cuda_prelude import elementwise_kernel
from ..table.parameters import (BoolParameter, FloatParameter, FusedActivationParameter, IntArrayParameter,
    IntegerParameter)
from ..table.schema import APPROXIMATE, COMPOSITE, DIMS_1_TO_8, DIMS_4, Operator, SumBound, Tolerance, rows
from ..table.shaped import (RuleViolation, ShapeQuery, check_axis, describe_sizes, onnx_layout_hint, per_channel_sizes,
                            resolve_axes)

FAMILY = "normalization"
IO = ("InputTensor", "OutputTensor")
_BN_TENSORS = ("InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor", "OutputTensor")
_MVN_TENSORS = ("InputTensor", "ScaleTensor", "BiasTensor", "OutputTensor")


def _all(level_name, dims, tensors):
    return (level_name, dims, {name: FLOATS for name in tensors})


# ---------------------------------------------------------------- support tables (the pages, newest row first)

_BN_ROWS = rows(_all("3_1", DIMS_1_TO_8, _BN_TENSORS), _all("1_0", DIMS_4, _BN_TENSORS))
_MVN_ROWS = rows(_all("1_0", DIMS_4, _MVN_TENSORS))
_MVN1_ROWS = rows(_all("3_1", DIMS_1_TO_8, _MVN_TENSORS), _all("2_1", DIMS_4, _MVN_TENSORS))
# No stored page: MEAN_VARIANCE_NORMALIZATION1's newest row (1 to 8 dimensions, FLOAT32 and FLOAT16) at the level
# DirectML.h declares it (`#if DML_TARGET_VERSION >= 0x6300`).
_MVN2_ROWS = rows(_all("6_3", DIMS_1_TO_8, _MVN_TENSORS))
_LRN_ROWS = rows(_all("1_0", DIMS_4, IO))
_LP_ROWS = rows(_all("3_1", DIMS_1_TO_8, IO), _all("1_0", DIMS_4, IO))

# ---------------------------------------------------------------- parameters

FUSED_ACTIVATION = FusedActivationParameter(
    field="FusedActivation",
    help="an activation applied to the normalised result (--fused-activation NAME), with its FLOAT fields as "
         "--fused-alpha, --fused-beta, ... (each the activation's own default when left out)",
    activations=FUSABLE,
)
EPSILON = FloatParameter(field="Epsilon", help="added to the variance to avoid a division by zero "
                                               "(default 0.00001, the value the pages recommend)",
                         default_value=1e-5)
SPATIAL = BoolParameter(field="Spatial", help="true: locations are spatial (below 4_0 false requires MeanTensor's "
                                              "and VarianceTensor's Height and Width not to be broadcast; no effect "
                                              "from 4_0)", default_value=True)
CROSS_CHANNEL_MVN = BoolParameter(field="CrossChannel", help="true: mean and variance over {Channel, Height, "
                                                             "Width}; false: over {Height, Width}, each channel apart")
NORMALIZE_VARIANCE = BoolParameter(field="NormalizeVariance", help="true: divide by sqrt(Variance + Epsilon); "
                                                                   "false: only subtract the mean", default_value=True)
USE_MEAN = BoolParameter(field="UseMean", help="true: subtract the mean over Axes; false: subtract nothing (and the "
                                                "variance is the mean of the squares: RMS normalization)",
                         default_value=True)
USE_VARIANCE = BoolParameter(field="UseVariance", help="true: divide by sqrt(Variance + Epsilon); false: do not",
                             default_value=True)
MVN_AXES = IntArrayParameter(field="Axes", count_field="AxisCount", default_text="every axis",
                             help="the axes the mean and variance are computed over, each from 0 to the input's "
                                  "DimensionCount - 1")
CROSS_CHANNEL_LRN = BoolParameter(field="CrossChannel", help="true: sum over LocalSize channels; false: over a "
                                                             "LocalSize x LocalSize window of Height and Width")
LOCAL_SIZE = IntegerParameter(field="LocalSize", help="the number of elements summed per dimension (at least 1)",
                              default_value=5, minimum=1)
LRN_ALPHA = FloatParameter(field="Alpha", help="the scaling parameter (default 0.0001, as the page recommends)",
                           default_value=1e-4)
LRN_BETA = FloatParameter(field="Beta", help="the exponent (default 0.75, as the page recommends)", default_value=0.75)
LRN_BIAS = FloatParameter(field="Bias", help="the bias (default 1, as the page recommends)", default_value=1.0)
LP_AXIS = IntegerParameter(field="Axis", help="the axis the norm runs along (0 to DimensionCount - 1)")
LP_EPSILON = FloatParameter(field="Epsilon", help="the smallest norm divided by (default 0.00001, as the page "
                                                  "recommends)", default_value=1e-5)
LP_ORDER = IntegerParameter(field="P", help="the order of the norm: 1 or 2", default_value=2)


# ---------------------------------------------------------------- shape rules

def check_broadcastable(query: ShapeQuery, name: str, input_shape) -> None:
    """A per-element tensor (Mean, Scale, ...): the input's DimensionCount, each size 1 or the input's."""
    if name not in query.shapes:
        return
    shape = query.shape(name)
    if len(shape) != len(input_shape):
        wanted = per_channel_sizes(shape, input_shape)
        if wanted is not None:
            raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} must be {describe_sizes(wanted)} (InputTensor's "
                                f"DimensionCount, each size 1 or the input's){onnx_layout_hint(shape, wanted)}")
        raise RuleViolation(f"{name} has {len(shape)} dimensions but InputTensor has {len(input_shape)} (the same "
                            "DimensionCount is required)")
    for axis, (size, wanted) in enumerate(zip(shape, input_shape)):
        if size not in (1, wanted):
            raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} do not broadcast to InputTensor Sizes "
                                f"{describe_sizes(input_shape)} (dimension {axis} is {size}; allowed: 1 or {wanted})")


def batch_normalization_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    for name in ("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"):
        check_broadcastable(query, name, shape)
    return {"OutputTensor": shape}


def mvn_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    for name in ("ScaleTensor", "BiasTensor"):
        check_broadcastable(query, name, shape)
    return {"OutputTensor": shape}


def mvn1_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    resolve_axes(query.parameters["Axes"], len(shape), "Axes")
    return mvn_shape(query)


def lp_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    check_axis(query.parameters["Axis"], len(shape), "Axis")
    if query.parameters["P"] not in (1, 2):
        raise RuleViolation(f"P {query.parameters['P']} is not an order DirectML takes (allowed: 1 or 2)")
    return {"OutputTensor": shape}


def same_shape(query: ShapeQuery) -> dict:
    return {"OutputTensor": query.shape("InputTensor")}


# ---------------------------------------------------------------- rules that change with the level

_NO_SPATIAL_BROADCAST_UNTIL = level("4_0")
_CHANNEL_BROADCAST_SINCE = level("4_0")


def batch_normalization_level_rule(call, feature_level) -> str | None:
    """Below 4_0, Spatial FALSE requires MeanTensor's and VarianceTensor's Height and Width unbroadcast."""
    if call.parameters["Spatial"] or feature_level >= _NO_SPATIAL_BROADCAST_UNTIL:
        return None
    wanted = call.tensors["InputTensor"].shape[-2:]
    for name in ("MeanTensor", "VarianceTensor"):
        if tuple(call.tensors[name].shape[-2:]) != tuple(wanted):
            return (f"Spatial FALSE requires {name}'s Height and Width to equal InputTensor's {describe_sizes(wanted)}"
                    f" (not broadcast) below {_NO_SPATIAL_BROADCAST_UNTIL}; found "
                    f"{describe_sizes(call.tensors[name].shape[-2:])}")
    return None


_ONE_OF_SCALE_BIAS_SINCE = level("5_2")


def mvn_level_rule(call, feature_level) -> str | None:
    """ScaleTensor without BiasTensor, or the reverse, came with 5_2 (before it: both or neither)."""
    given = [name for name in ("ScaleTensor", "BiasTensor") if name in call.tensors]
    if len(given) == 1 and feature_level < _ONE_OF_SCALE_BIAS_SINCE:
        missing = "BiasTensor" if given[0] == "ScaleTensor" else "ScaleTensor"
        return (f"{given[0]} without {missing} is allowed from {_ONE_OF_SCALE_BIAS_SINCE} (below it ScaleTensor "
                "and BiasTensor come together, or not at all)")
    return None


def mvn1_level_rule(call, feature_level) -> str | None:
    """MVN's rule, and below 4_0, ScaleTensor's and BiasTensor's ChannelCount must be the input's (only the others
    broadcast)."""
    paired = mvn_level_rule(call, feature_level)
    if paired is not None or feature_level >= _CHANNEL_BROADCAST_SINCE:
        return paired
    channels = call.tensors["InputTensor"].shape[1] if len(call.tensors["InputTensor"].shape) > 1 else None
    for name in ("ScaleTensor", "BiasTensor"):
        tensor = call.tensors.get(name)
        if tensor is not None and channels is not None and tensor.shape[1] != channels:
            return (f"{name} ChannelCount {tensor.shape[1]} must equal InputTensor's {channels} below "
                    f"{_CHANNEL_BROADCAST_SINCE} (broadcasting the channel dimension came with 4_0)")
    return None


# ---------------------------------------------------------------- how the tolerances grow

def _mvn_axes(call) -> tuple[int, ...]:
    rank = len(call.tensors["InputTensor"].shape)
    if "Axes" in call.parameters:
        return resolve_axes(call.parameters["Axes"], rank, "Axes")
    return (1, 2, 3) if call.parameters["CrossChannel"] else (2, 3)


def mvn_reduced_count(call) -> int:
    shape = call.tensors["InputTensor"].shape
    return math.prod(shape[axis] for axis in _mvn_axes(call))


def mvn_tolerance_scale(call) -> int:
    """WebNN's instance/layerNormalization figure (840 ULP) plus 3 ULP per element of the mean and variance."""
    return 3 * mvn_reduced_count(call) + 840


def lrn_window(call) -> int:
    size = call.parameters["LocalSize"]
    return size if call.parameters["CrossChannel"] else size * size


def lrn_tolerance_scale(call) -> int:
    return 2 * lrn_window(call) + 18


def lp_tolerance_scale(call) -> int:
    return 2 * call.tensors["InputTensor"].shape[call.parameters["Axis"]] + 2


def lrn_axes(call) -> tuple[int, ...]:
    """The axes a local region spans: what a Dask block must hold whole."""
    return (1,) if call.parameters["CrossChannel"] else (2, 3)


def lp_axes(call) -> tuple[int, ...]:
    return (call.parameters["Axis"],)


# ---------------------------------------------------------------- sum bounds (checking/bounds.py)


def batch_normalization_magnitude(xp, inputs, outputs, params):
    """M of BATCH_NORMALIZATION: |Scale| x |x - Mean| / sqrt(Variance + Epsilon) + |Bias|: the result cancels where
    the scaled term and Bias are near opposite."""
    x, mean, variance, scale, bias = inputs
    return xp.abs(scale) * xp.abs(x - mean) / xp.sqrt(variance + np.float64(params["Epsilon"])) + xp.abs(bias)


def batch_normalization_terms(call) -> int:
    """K of BATCH_NORMALIZATION's sum bound: its five roundings (subtraction, square root of the sum, division,
    Scale, Bias)."""
    return 5


BATCH_NORMALIZATION_SUM_BOUND = SumBound(
    batch_normalization_terms, "5, the roundings of an element (Mean and Variance are given: nothing is reduced)",
    "|Scale| x |x - Mean| / sqrt(Variance + Epsilon) + |Bias| in float64 (Scale x t + Bias cancels where the two are "
    "near opposite)", magnitude=batch_normalization_magnitude)


def mvn_terms(call) -> int:
    """K of the normalisations' sum bound: the N elements of each mean and variance, + 5 for the subtraction, the
    square root, the division, Scale and Bias."""
    return mvn_reduced_count(call) + 5


def mvn_magnitude(xp, inputs, outputs, params):
    """M of MEAN_VARIANCE_NORMALIZATION(1, 2): |Scale| x (mean|x| + |x - mean|) / sqrt(variance + Epsilon) + |Bias|.
    The mean's rounding error, N x u x mean|x|, stays in x - mean, which is near 0 where x is near its mean (a
    result many ULP of itself off); the variance's is relative (a sum of squares). Without UseMean nothing is
    subtracted; without the variance nothing divides."""
    x, scale, bias = inputs
    axes = (resolve_axes(params["Axes"], x.ndim, "Axes") if "Axes" in params
            else (1, 2, 3) if params["CrossChannel"] else (2, 3))
    use_mean, use_variance = _statistics(params)
    if use_mean:
        centred = x - xp.mean(x, axis=axes, keepdims=True)
        spread = xp.mean(xp.abs(x), axis=axes, keepdims=True) + xp.abs(centred)
    else:
        centred = x
        spread = xp.abs(x)
    if use_variance:
        spread = spread / xp.sqrt(xp.mean(centred * centred, axis=axes, keepdims=True) + np.float64(params["Epsilon"]))
    if scale is not None:
        spread = spread * xp.abs(scale)
    if bias is not None:
        spread = spread + xp.abs(bias)
    return spread


MVN_SUM_BOUND = SumBound(
    mvn_terms, "N + 5, N the elements each mean and variance reduce",
    "|Scale| x (mean|x| + |x - mean|) / sqrt(variance + Epsilon) + |Bias| in float64, the statistics the call's "
    "(x - mean carries the mean's rounding error, N x u x mean|x|)", magnitude=mvn_magnitude)


# ---------------------------------------------------------------- kernels (xp is numpy or cupy)

def _f32(xp, x):
    return x if x is None or x.dtype == np.float32 else x.astype(xp.float32)


def _finish(xp, y, out, fused):
    # FLOAT32 results are already the output (no copy); FLOAT16 ones are rounded once here. A fused activation
    # (`fused`) then runs in the backend on this rounded result (Operator.fused_activation), as the activation's
    # own kernel, the CPU's or the GPU's.
    return (xp.ascontiguousarray(y.astype(out.data_type.numpy_dtype, copy=False)),)


def batch_normalization_kernel(xp, inputs, outputs, params):
    x, mean, variance, scale, bias = (_f32(xp, t) for t in inputs)
    epsilon = xp.float32(params["Epsilon"])
    y = scale * ((x - mean) / xp.sqrt(variance + epsilon)) + bias
    return _finish(xp, y, outputs[0], params["FusedActivation"])


_GPU_KERNELS: dict = {}


def batch_normalization_gpu_kernel(cp, inputs, outputs, params):
    """batch_normalization_kernel's four FLOAT32 operations per element in one pass over the input (the xp kernel
    makes a temporary per operation): Scale * ((x - Mean) / sqrt(Variance + Epsilon)) + Bias, each operation
    correctly rounded, so the GPU gives the CPU's bits."""
    x, mean, variance, scale, bias = (_f32(cp, t) for t in inputs)
    epsilon = cp.float32(params["Epsilon"])
    if (x.ndim >= 2 and x.shape[1] <= BATCH_NORMALIZATION_TABLE_CHANNELS
            and all(_per_channel(t, x) for t in (mean, variance, scale, bias))):
        y = _batch_normalization_by_channel(cp, cp.ascontiguousarray(x), mean, variance, scale, bias, epsilon)
    else:
        kernel = elementwise_kernel(
            cp, "dml_batch_normalization", "float32 x, float32 m, float32 v, float32 s, float32 b, float32 e",
            "float32 y", "y = dml_add(dml_mul(s, dml_div(dml_sub(x, m), dml_sqrt_rn(dml_add(v, e)))), b)")
        y = kernel(x, mean, variance, scale, bias, epsilon)
    return _finish(cp, y, outputs[0], params["FusedActivation"])


def _per_channel(tensor, x) -> bool:
    """Whether `tensor` holds one value per channel of `x` ({1, C, 1, 1}: Spatial's usual layout)."""
    return tensor.shape[1:2] == x.shape[1:2] and tensor.size == x.shape[1] and tensor.ndim == x.ndim


# One thread per four elements of one channel (a plane of a multiple of 4: 16-byte loads and stores; else one
# element a thread). Each block first puts every channel's Mean, sqrt(Variance + Epsilon), Scale and Bias in
# shared memory, then walks the input in a grid-stride loop: the element's channel from its index (two divisions
# by magic numbers in 32 bits where they fit). The square root is the one the elementwise kernel takes per
# element (the same operation on the same values), so the results keep the CPU's bits.
_BATCH_NORMALIZATION_BY_CHANNEL = """
__device__ __forceinline__ float dml_bn(float x, const float* table, long long c) {
    return dml_add(dml_mul(table[4 * c + 2], dml_div(dml_sub(x, table[4 * c]), table[4 * c + 1])), table[4 * c + 3]);
}

extern "C" __global__ void dml_kernel(const float* xs, const float* means, const float* variances,
                                      const float* scales, const float* biases, const float epsilon, float* ys,
                                      const long long plane, const long long channels, const long long n,
                                      const int vector, const unsigned int plane_magic,
                                      const unsigned int plane_shift, const unsigned int channel_magic,
                                      const unsigned int channel_shift) {
    extern __shared__ float table[];
    for (long long c = threadIdx.x; c < channels; c += blockDim.x) {
        table[4 * c] = means[c];
        table[4 * c + 1] = dml_sqrt_rn(dml_add(variances[c], epsilon));
        table[4 * c + 2] = scales[c];
        table[4 * c + 3] = biases[c];
    }
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    const bool narrow = n < 2147483647ll;
    const long long width = vector ? 4 : 1, items = n / width;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < items; j += stride) {
        const long long i = j * width;
        long long c;
        if (narrow) {  // two divisions by magic numbers (cuda_prelude.fast_division)
            const unsigned int q = dml_fast_divide((unsigned int)i, (unsigned int)plane, plane_magic, plane_shift);
            c = q - dml_fast_divide(q, (unsigned int)channels, channel_magic, channel_shift) * (unsigned int)channels;
        } else {
            c = (i / plane) % channels;
        }
        if (vector) {
            const float4 v = reinterpret_cast<const float4*>(xs)[j];
            reinterpret_cast<float4*>(ys)[j] = make_float4(dml_bn(v.x, table, c), dml_bn(v.y, table, c),
                                                           dml_bn(v.z, table, c), dml_bn(v.w, table, c));
        } else {
            ys[i] = dml_bn(xs[i], table, c);
        }
    }
}
"""
BATCH_NORMALIZATION_TABLE_CHANNELS = 4096  # 64 KiB of per-channel values in shared memory; more: elementwise
_BN_BLOCKS = 2048  # enough blocks to fill the GPU; each fills its channel table once


def _batch_normalization_by_channel(cp, x, mean, variance, scale, bias, epsilon):
    """BATCH_NORMALIZATION with per-channel tensors: the same operations in the same order as the elementwise
    kernel (so the same bits)."""
    y = cp.ndarray(x.shape, dtype=cp.float32)  # x is C-ordered FLOAT32; cp.empty_like costs 2-3 us more a call
    if x.size:
        kernel = _GPU_KERNELS.get("dml_batch_normalization_by_channel")
        if kernel is None:
            from ..numerics.cuda_prelude import COMPILE_OPTIONS, DEVICE_PRELUDE, FAST_DIVISION

            kernel = cp.RawKernel(DEVICE_PRELUDE + FAST_DIVISION + _BATCH_NORMALIZATION_BY_CHANNEL, "dml_kernel",
                                  options=COMPILE_OPTIONS)
            kernel.max_dynamic_shared_size_bytes = BATCH_NORMALIZATION_TABLE_CHANNELS * 16
            _GPU_KERNELS["dml_batch_normalization_by_channel"] = kernel
        flat = [cp.ascontiguousarray(t) for t in (mean, variance, scale, bias)]  # C channels each: read as flat
        plane, channels = math.prod(x.shape[2:]), x.shape[1]
        vector = plane % 4 == 0 and x.data.ptr % 16 == 0  # a view may start anywhere
        threads = 256
        blocks = int(max(1, min(_BN_BLOCKS, -(-x.size // (threads * (4 if vector else 1))))))
        from ..numerics.cuda_prelude import fast_division

        magic = [np.uint32(v) for size in (plane, channels) for v in fast_division(size)]
        kernel((blocks,), (threads,), (x, *flat, epsilon, y, np.int64(plane), np.int64(channels), np.int64(x.size),
                                       np.int32(vector), *magic), shared_mem=channels * 16)
    return y


def _mean(xp, x, axes: tuple[int, ...]):
    """xp.mean(x, axis=axes, keepdims=True, dtype=float32). On NumPy its own two steps without the Python wrapper
    around them: the FLOAT32 sum, then the division by the count, which NumPy's mean makes a float64 division
    (the count an intp) rounded to FLOAT32. Where the count is a FLOAT32 (up to 2^24) that is the FLOAT32 division's
    result: both operands are exact in float64, and float64's 53 bits are at least 2 x 24 + 2, where rounding twice
    gives the once-rounded quotient (Figueroa, "When is double rounding innocuous?", 1995), NaN, infinity and
    0 / 0 included; the FLOAT32 division takes half the time of the mixed one."""
    if xp is not np:
        return xp.mean(x, axis=axes, keepdims=True, dtype=xp.float32)
    total = np.add.reduce(x, axis=axes, dtype=np.float32, keepdims=True)
    count = 1
    for axis in axes:
        count *= x.shape[axis]
    if count <= 1 << 24:
        return np.true_divide(total, np.float32(count), out=total)
    return np.true_divide(total, np.intp(count), out=total, casting="unsafe")


def _normalise(xp, x, axes, scale, bias, normalize_variance: bool, epsilon, use_mean: bool = True):
    """(x - mean) [/ sqrt(variance + epsilon)], then Scale and Bias where given; all in FLOAT32. Without
    `use_mean` (MEAN_VARIANCE_NORMALIZATION2's UseMean FALSE) nothing is subtracted and the variance is the mean
    of the squares (about 0: RMS normalization). The operations after the variance write into the array the first
    of them made (the same elementwise operations, one array instead of one each: _in_place); the arrays the two
    means reduce are laid out as the input is, which fixes their order of summation."""
    centred = x - _mean(xp, x, axes) if use_mean else x
    deviation = None
    if normalize_variance:
        # The mean of the squared deviations (two passes): the page's E[X^2] - E[X]^2 without its cancellation.
        deviation = _mean(xp, centred * centred, axes)
        deviation = xp.add(deviation, xp.float32(epsilon), out=_in_place(deviation))
        xp.sqrt(deviation, out=deviation)  # one operand: no other NaN to give
    owned = use_mean  # whether `centred` is the kernel's own array (not the input), free to be overwritten
    for operation, operand in ((xp.divide, deviation), (xp.multiply, scale), (xp.add, bias)):
        if operand is not None:
            centred = operation(centred, operand, out=_in_place(centred) if owned else None)
            owned = True
    return centred


def _in_place(array):
    """The `out` of a two-operand operation on an array of the kernel's own: the array itself (no new one), except
    where it holds a single element. NumPy runs a one-element operation written in place by its reduction loop, and
    where both operands are NaN that loop may give the other NaN's payload (FLOAT32 addition does: NumPy 2.4), so
    such an operation keeps the new array it always had (tests/test_small_kernel_bits.py compares the bits)."""
    return array if array.size > 1 else None


def mvn_kernel(xp, inputs, outputs, params):
    x, scale, bias = (_f32(xp, t) for t in inputs)
    axes = (1, 2, 3) if params["CrossChannel"] else (2, 3)
    y = _normalise(xp, x, axes, scale, bias, params["NormalizeVariance"], params["Epsilon"])
    return _finish(xp, y, outputs[0], params["FusedActivation"])


def _statistics(params) -> tuple[bool, bool]:
    """(subtract the mean, divide by the standard deviation): MEAN_VARIANCE_NORMALIZATION1's NormalizeVariance
    (the mean always), MEAN_VARIANCE_NORMALIZATION2's UseMean and UseVariance."""
    if "UseMean" in params:
        return params["UseMean"], params["UseVariance"]
    return True, params["NormalizeVariance"]


def mvn_axes_kernel(xp, inputs, outputs, params):
    """MEAN_VARIANCE_NORMALIZATION1 and 2: the statistics over Axes."""
    x, scale, bias = (_f32(xp, t) for t in inputs)
    axes = resolve_axes(params["Axes"], x.ndim, "Axes")
    use_mean, use_variance = _statistics(params)
    loops = compiled_loops.active() if xp is np and axes == (x.ndim - 1,) else None
    y = None if loops is None else loops.mvn_rows(x, scale, bias, params["Epsilon"], use_mean, use_variance)
    if y is None:
        y = _normalise(xp, x, axes, scale, bias, use_variance, params["Epsilon"], use_mean)
    return _finish(xp, y, outputs[0], params["FusedActivation"])


def mvn_planned(inputs, outputs, params, constant_inputs: frozenset[int] = frozenset()):
    """mvn_axes_kernel's CPU call worked out once (Operator.planned_kernel: a model's planned node, such as a
    LayerNormalization's): FLOAT32 over the last axis, Scale and Bias constants, in the compiled loop, whose
    Scale, Bias, fields and summation program are made here once (mvn_rows made them on every call: half of a
    {1, 16, 128} call's 18 us); a call the loop declines (NaN anywhere) takes mvn_axes_kernel, as it would. None
    where the kernel would not take the loop, or the loops are off."""
    loops = compiled_loops.active()
    x, scale, bias = inputs
    if loops is None or x.dtype != np.float32 or x.size == 0 or outputs[0].data_type.numpy_dtype != np.float32:
        return None
    if any(t is not None and position not in constant_inputs for position, t in ((1, scale), (2, bias))):
        return None
    try:
        if resolve_axes(params["Axes"], x.ndim, "Axes") != (x.ndim - 1,):
            return None
    except RuleViolation:
        return None
    use_mean, use_variance = _statistics(params)
    rows = loops.mvn_rows_of(x.shape[-1], scale, bias, params["Epsilon"], use_mean, use_variance)
    return compiled_loops.planned_rows(rows, mvn_axes_kernel, outputs, params)


# MEAN_VARIANCE_NORMALIZATION over trailing axes, one block per row (a row: the elements one mean and variance
# cover), the row staged in shared memory while its mean is taken, so that device memory sees one read and one
# write: the mean, the mean of the squared deviations and the output come from the stage. The same FLOAT32
# operations as _normalise in another summation order, and a product with 1 / sqrt(variance + epsilon) for the
# division (1.5 ULP at most): within the operator's tolerance (3N + 840 ULP), as CuPy's mean is;
# Scale and Bias are one value per row here (their reduced dimensions are 1).
_MVN_ROWS_SOURCE = """
extern "C" __global__ void dml_kernel(const float* xs, float* ys, const float* scales, const float* biases,
                                      const long long count, const int normalize_variance, const int has_scale,
                                      const int has_bias, const float epsilon, const long long rows,
                                      const int use_mean) {
    __shared__ float shared[33];
    extern __shared__ float stage[];
    const float divisor = (float)count;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* x = xs + row * count;
        float* y = ys + row * count;
        float total = 0.0f;
        for (long long i = threadIdx.x; i < count; i += blockDim.x) {
            const float v = x[i];
            stage[i] = v;
            total = dml_add(total, v);
        }
        const float sum = dml_block_combine(total, shared, false);  // every thread takes part, used or not
        const float mean = use_mean ? dml_div(sum, divisor) : 0.0f;  // x - 0 is x: UseMean FALSE subtracts nothing
        float inverse = 1.0f;
        if (normalize_variance) {
            float squares = 0.0f;
            for (long long i = threadIdx.x; i < count; i += blockDim.x) {
                const float c = dml_sub(stage[i], mean);
                squares = dml_add(squares, dml_mul(c, c));
            }
            const float variance = dml_div(dml_block_combine(squares, shared, false), divisor);
            inverse = dml_div(1.0f, dml_sqrt_rn(dml_add(variance, epsilon)));
        }
        const float s = has_scale ? scales[row] : 1.0f, b = has_bias ? biases[row] : 0.0f;
        for (long long i = threadIdx.x; i < count; i += blockDim.x) {
            float c = dml_sub(stage[i], mean);
            if (normalize_variance) c = dml_mul(c, inverse);
            if (has_scale) c = dml_mul(c, s);
            if (has_bias) c = dml_add(c, b);
            y[i] = c;
        }
    }
}
"""
MVN_STAGE_BYTES = 48 * 1024  # a row of up to 12288 FLOAT32 elements; longer rows take _MVN_LONG_ROWS_SOURCE

# Rows past MVN_STAGE_BYTES (an instance normalization of 512 x 512 images): each row in chunks of MVN_CHUNK
# elements, a block per chunk, in two kernels: dml_mvn_partials sums the chunk's x - k and (x - k)^2 in FLOAT64 (k:
# the row's first element, so that a mean far from zero does not cancel the variance away); dml_mvn_apply combines
# its row's partial sums (mean = k + S1 / n, variance = S2 / n - (S1 / n)^2) and writes its chunk with the row
# kernel's FLOAT32 operations. Two reads and one write of device memory, where CuPy's mean, the squared deviations
# and an elementwise kernel took about 16 times the copy's time (1 GiB of 512 x 512 rows on the H100).
_MVN_LONG_ROWS_SOURCE = """
__device__ __forceinline__ void dml_warp_sums(double& a, double& b) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, offset);
        b += __shfl_down_sync(0xffffffffu, b, offset);
    }
}

extern "C" __global__ void dml_mvn_partials(const float* xs, double* partials, const long long count,
                                            const long long chunk, const long long chunks, const int use_mean) {
    __shared__ double shared[64];
    const long long row = blockIdx.x / chunks, part = blockIdx.x % chunks;
    const float* x = xs + row * count;
    const double k = use_mean ? (double)x[0] : 0.0;  // UseMean FALSE: the raw sums of x and x^2
    const long long first = part * chunk, last = count < first + chunk ? count : first + chunk;
    double s1 = 0.0, s2 = 0.0;
#if DML_VECTOR == 4
    for (long long i = first / 4 + threadIdx.x; i < last / 4; i += blockDim.x) {
        const float4 f = reinterpret_cast<const float4*>(x)[i];
        const double a = (double)f.x - k, b = (double)f.y - k, c = (double)f.z - k, d = (double)f.w - k;
        s1 += (a + b) + (c + d);
        s2 += (a * a + b * b) + (c * c + d * d);
    }
#else
    for (long long i = first + threadIdx.x; i < last; i += blockDim.x) {
        const double a = (double)x[i] - k;
        s1 += a;
        s2 += a * a;
    }
#endif
    dml_warp_sums(s1, s2);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { shared[warp] = s1; shared[32 + warp] = s2; }
    __syncthreads();
    if (warp == 0) {
        s1 = lane < (int)(blockDim.x >> 5) ? shared[lane] : 0.0;
        s2 = lane < (int)(blockDim.x >> 5) ? shared[32 + lane] : 0.0;
        dml_warp_sums(s1, s2);
        if (lane == 0) { partials[2 * blockIdx.x] = s1; partials[2 * blockIdx.x + 1] = s2; }
    }
}

extern "C" __global__ void dml_mvn_apply(const float* xs, float* ys, const double* partials, const float* scales,
                                         const float* biases, const long long count, const long long chunk,
                                         const long long chunks, const int normalize_variance, const int has_scale,
                                         const int has_bias, const float epsilon, const int use_mean) {
    __shared__ float stats[2];
    const long long row = blockIdx.x / chunks, part = blockIdx.x % chunks;
    const float* x = xs + row * count;
    float* y = ys + row * count;
    if (threadIdx.x < 32) {
        double s1 = 0.0, s2 = 0.0;
        for (long long j = threadIdx.x; j < chunks; j += 32) {
            s1 += partials[2 * (row * chunks + j)];
            s2 += partials[2 * (row * chunks + j) + 1];
        }
        dml_warp_sums(s1, s2);
        if (threadIdx.x == 0) {
            const double n = (double)count, m = use_mean ? s1 / n : 0.0, variance = s2 / n - m * m;
            stats[0] = use_mean ? (float)((double)x[0] + m) : 0.0f;
            stats[1] = (float)(variance > 0.0 ? variance : 0.0);
        }
    }
    __syncthreads();
    const float mean = stats[0];
    const float inverse = normalize_variance ? dml_div(1.0f, dml_sqrt_rn(dml_add(stats[1], epsilon))) : 1.0f;
    const float s = has_scale ? scales[row] : 1.0f, b = has_bias ? biases[row] : 0.0f;
    const long long first = part * chunk, last = count < first + chunk ? count : first + chunk;
#if DML_VECTOR == 4
    for (long long i = first / 4 + threadIdx.x; i < last / 4; i += blockDim.x) {
        float4 f = reinterpret_cast<const float4*>(x)[i];
        float* v = &f.x;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            float c = dml_sub(v[j], mean);
            if (normalize_variance) c = dml_mul(c, inverse);
            if (has_scale) c = dml_mul(c, s);
            if (has_bias) c = dml_add(c, b);
            v[j] = c;
        }
        reinterpret_cast<float4*>(y)[i] = f;
    }
#else
    for (long long i = first + threadIdx.x; i < last; i += blockDim.x) {
        float c = dml_sub(x[i], mean);
        if (normalize_variance) c = dml_mul(c, inverse);
        if (has_scale) c = dml_mul(c, s);
        if (has_bias) c = dml_add(c, b);
        y[i] = c;
    }
#endif
}
"""
MVN_CHUNK = 16384  # elements a block of the long-row kernels covers (64 KiB)


def _nothing(cp):
    """An empty FLOAT32 array of the current device, made once (the kernels take one for an absent Scale or Bias and
    never read it; an allocation per call cost about 4 us before the launch)."""
    key = ("nothing", cp.cuda.Device().id)
    empty = _GPU_KERNELS.get(key)
    if empty is None:
        empty = _GPU_KERNELS[key] = cp.empty(0, dtype=cp.float32)
    return empty


def _per_row(cp, tensor, x, first: int):
    """Scale or Bias as one contiguous value per row of `x` (rows: the axes before `first`); None where it varies
    along a reduced axis. An absent tensor gives an empty array (the kernel does not read it)."""
    if tensor is None:
        return _nothing(cp)
    shape = (1,) * (x.ndim - tensor.ndim) + tuple(tensor.shape)
    if any(d != 1 for d in shape[first:]):
        return None
    return cp.ascontiguousarray(cp.broadcast_to(tensor.reshape(shape), x.shape[:first] + shape[first:])).reshape(-1)


def _normalise_rows(cp, x, axes, scale, bias, normalize_variance: bool, epsilon, use_mean: bool):
    """_normalise by the one-block-per-row kernel (rows past MVN_STAGE_BYTES: the long-row kernels), or None where
    they do not take the call (axes that do not trail, a Scale or Bias that varies within a row)."""
    first = x.ndim - len(axes)
    count = math.prod(x.shape[first:])
    if tuple(sorted(axes)) != tuple(range(first, x.ndim)) or x.size == 0:
        return None
    scales, biases = _per_row(cp, scale, x, first), _per_row(cp, bias, x, first)
    if scales is None or biases is None:
        return None
    if count * 4 > MVN_STAGE_BYTES:
        return _normalise_long_rows(cp, cp.ascontiguousarray(x), count, scales, biases, normalize_variance,
                                    epsilon, scale is not None, bias is not None, use_mean)
    kernel = _GPU_KERNELS.get("dml_mvn_rows")
    if kernel is None:
        from ..numerics.cuda_prelude import BLOCK_COMBINE, COMPILE_OPTIONS, DEVICE_PRELUDE

        kernel = _GPU_KERNELS["dml_mvn_rows"] = cp.RawKernel(DEVICE_PRELUDE + BLOCK_COMBINE + _MVN_ROWS_SOURCE,
                                                             "dml_kernel", options=COMPILE_OPTIONS)
    x = cp.ascontiguousarray(x)
    y = cp.ndarray(x.shape, dtype=cp.float32)
    rows = x.size // count
    threads = 1024 if count >= 8192 else 256 if count >= 1024 else 64
    kernel((int(min(rows, 65535)),), (threads,),
           (x, y, scales, biases, np.int64(count), np.int32(bool(normalize_variance)), np.int32(scale is not None),
            np.int32(bias is not None), np.float32(epsilon), np.int64(rows), np.int32(bool(use_mean))),
           shared_mem=count * 4)
    return y


def _normalise_long_rows(cp, x, count: int, scales, biases, normalize_variance: bool, epsilon, has_scale: bool,
                         has_bias: bool, use_mean: bool):
    """_normalise_rows for rows past MVN_STAGE_BYTES: the two kernels of _MVN_LONG_ROWS_SOURCE."""
    vector = 4 if count % 4 == 0 and x.data.ptr % 16 == 0 else 1
    module = _GPU_KERNELS.get(("dml_mvn_long_rows", vector))
    if module is None:
        from ..numerics.cuda_prelude import COMPILE_OPTIONS, DEVICE_PRELUDE

        module = _GPU_KERNELS[("dml_mvn_long_rows", vector)] = cp.RawModule(
            code=DEVICE_PRELUDE + f"\n#define DML_VECTOR {vector}\n" + _MVN_LONG_ROWS_SOURCE, options=COMPILE_OPTIONS)
    rows, chunks = x.size // count, -(-count // MVN_CHUNK)
    partials = cp.empty(2 * rows * chunks, dtype=cp.float64)
    y = cp.empty_like(x)
    grid, threads = (rows * chunks,), (256,)
    sizes = (np.int64(count), np.int64(MVN_CHUNK), np.int64(chunks))
    module.get_function("dml_mvn_partials")(grid, threads, (x, partials, *sizes, np.int32(bool(use_mean))))
    module.get_function("dml_mvn_apply")(grid, threads, (x, y, partials, scales, biases, *sizes,
                                                         np.int32(bool(normalize_variance)), np.int32(has_scale),
                                                         np.int32(has_bias), np.float32(epsilon),
                                                         np.int32(bool(use_mean))))
    return y


def _gpu_normalise(cp, x, axes, scale, bias, normalize_variance: bool, epsilon, use_mean: bool = True):
    """_normalise on the GPU: one block per row where the kernel takes the call (_normalise_rows), else three
    passes over the input instead of about ten: the mean (CuPy's, as the xp kernel's), the variance as one
    reduction of the squared deviations (no temporary), and one elementwise kernel for (x - mean) /
    sqrt(variance + epsilon) * Scale + Bias, each operation correctly rounded as on the CPU."""
    by_rows = _normalise_rows(cp, x, axes, scale, bias, normalize_variance, epsilon, use_mean)
    if by_rows is not None:
        return by_rows
    if use_mean:
        mean = cp.mean(x, axis=axes, keepdims=True, dtype=cp.float32)
    else:  # x - 0 is x, and the squared deviations from 0 are the squares
        mean = cp.zeros(tuple(1 if axis in axes else size for axis, size in enumerate(x.shape)), dtype=cp.float32)
    variance = mean  # unused by the final kernel without NormalizeVariance
    if normalize_variance:
        squares = _GPU_KERNELS.get("dml_squared_deviations")
        if squares is None:
            from ..numerics.cuda_prelude import COMPILE_OPTIONS, DEVICE_PRELUDE

            squares = _GPU_KERNELS["dml_squared_deviations"] = cp.ReductionKernel(
                "float32 x, float32 m", "float32 y", "dml_mul(dml_sub(x, m), dml_sub(x, m))", "a + b", "y = a",
                "0", "dml_squared_deviations", preamble=DEVICE_PRELUDE, options=COMPILE_OPTIONS)
        count = x.size // max(mean.size, 1)
        variance = squares(x, mean, axis=axes, keepdims=True) / cp.float32(count)
    body = "float c = dml_sub(x, m);"
    if normalize_variance:
        body += " c = dml_div(c, dml_sqrt_rn(dml_add(v, e)));"
    if scale is not None:
        body += " c = dml_mul(c, s);"
    if bias is not None:
        body += " c = dml_add(c, b);"
    name = f"dml_normalise_{int(normalize_variance)}{int(scale is not None)}{int(bias is not None)}"
    kernel = elementwise_kernel(cp, name, "float32 x, float32 m, float32 v, float32 s, float32 b, float32 e",
                              "float32 y", body + " y = c;")
    unused = cp.float32(0)  # an absent Scale or Bias: the kernel's body does not read it
    return kernel(x, mean, variance, unused if scale is None else scale, unused if bias is None else bias,
                  cp.float32(epsilon))


def mvn_gpu_kernel(cp, inputs, outputs, params):
    x, scale, bias = (_f32(cp, t) for t in inputs)
    axes = (1, 2, 3) if params["CrossChannel"] else (2, 3)
    y = _gpu_normalise(cp, x, axes, scale, bias, params["NormalizeVariance"], params["Epsilon"])
    return _finish(cp, y, outputs[0], params["FusedActivation"])


def mvn_axes_gpu_kernel(cp, inputs, outputs, params):
    """mvn_axes_kernel on the GPU: MEAN_VARIANCE_NORMALIZATION1 and 2."""
    x, scale, bias = (_f32(cp, t) for t in inputs)
    axes = resolve_axes(params["Axes"], x.ndim, "Axes")
    use_mean, use_variance = _statistics(params)
    y = _gpu_normalise(cp, x, axes, scale, bias, use_variance, params["Epsilon"], use_mean)
    return _finish(cp, y, outputs[0], params["FusedActivation"])


def window_sum(xp, values, axis: int, size: int):
    """The sum over a window of `size` along `axis`, from i - floor((size - 1) / 2) to i + ceil((size - 1) / 2),
    the part outside the tensor counting as 0 (ONNX LRN's window)."""
    before = (size - 1) // 2
    after = size - 1 - before
    pad = [(0, 0)] * values.ndim
    pad[axis] = (before, after)
    padded = xp.pad(values, pad)
    length = values.shape[axis]
    total = None
    for start in range(size):  # LocalSize shifted slices: a handful of vectorised additions
        index = [slice(None)] * values.ndim
        index[axis] = slice(start, start + length)
        part = padded[tuple(index)]
        total = part if total is None else total + part
    return total


def lrn_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    x = _f32(xp, x)
    size = params["LocalSize"]
    squares = x * x
    if params["CrossChannel"]:
        total = window_sum(xp, squares, 1, size)
    else:
        total = window_sum(xp, window_sum(xp, squares, 2, size), 3, size)
    scale = xp.float32(params["Alpha"]) / xp.float32(size)
    y = x / (xp.float32(params["Bias"]) + scale * total) ** xp.float32(params["Beta"])
    return _finish(xp, y, outputs[0], None)


def lp_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    x = _f32(xp, x)
    axis = params["Axis"]
    if params["P"] == 1:
        norm = xp.sum(xp.abs(x), axis=axis, keepdims=True, dtype=xp.float32)
    else:
        norm = xp.sqrt(xp.sum(x * x, axis=axis, keepdims=True, dtype=xp.float32))
    y = x / xp.maximum(norm, xp.float32(params["Epsilon"]))
    return _finish(xp, y, outputs[0], None)


# ---------------------------------------------------------------- entries

_ARITHMETIC = ("FLOAT16 and FLOAT32 are computed in FLOAT32 (FLOAT16 widened exactly) and rounded once to the "
               "output type. NaN propagates.")
_FUSED = ("FusedActivation (--fused-activation NAME, with --fused-alpha, ...; fusable: "
          + ", ".join(n.lower() for n in FUSABLE_NAMES) + ") runs on the result rounded to the output type, "
          "exactly as the activation operator would; with one, the looser of the operator's tolerance for the "
          "call and the activation's applies, figure by figure (ULP count and absolute floor). In a DxDispatch model: \"FusedActivation\": {\"Type\": \"ACTIVATION_RELU\"} or null.")
_BROADCAST = ("Every dimension of {tensors} is 1 (broadcast) or the input's; the DimensionCount is the input's.")
_MVN_FLOOR = ("the outputs are normalised to about unit size, and x - mean carries the mean's absolute error: a "
              "result near 0 (x near its mean) is many ULP of itself off while its absolute error stays near the "
              "FLOAT32 (FLOAT16) epsilon of 1; 2^-20 (FLOAT32) and 2^-10 (FLOAT16) bound it")
_MVN_TOLERANCE = Tolerance(
    "ulp", 1, 10,
    "dmlcli's choice after WebNN's instanceNormalization and layerNormalization tolerance (web-platform-tests "
    "webnn/resources/utils.js: 840 ULP FLOAT32, 8400 FLOAT16, whatever the size): 3N + 840 ULP for FLOAT32 and "
    "10 times that for FLOAT16, N the elements each mean and variance reduce (REDUCE's SUM N and SUM_SQUARE 2N "
    "figures for the two sums)",
    floor_float32=2.0 ** -20, floor_float16=2.0 ** -10, floor_source=_MVN_FLOOR)
_MVN_VARIANCE = ("The variance is the mean of the squared deviations (two passes over the data), which equals the "
                 "page's E[X^2] - E[X]^2 in exact arithmetic without its cancellation; the formula is the newest "
                 "page's (x - mean) / sqrt(Variance + Epsilon) (an older version of the MEAN_VARIANCE_NORMALIZATION "
                 "page added Epsilon to the standard deviation). NormalizeVariance FALSE: Scale * (x - mean) + Bias.")
_SCALE_BIAS = ("ScaleTensor and BiasTensor are optional: both, neither, or from 5_2 one alone (the pages require "
               "both together below 5_2); give ScaleTensor alone as the second input, BiasTensor alone after 'none' "
               "(API: None) in ScaleTensor's place. Left out: no scale, no bias.")

BATCH_NORMALIZATION = Operator(
    name="BATCH_NORMALIZATION", enum_value=72, family=FAMILY, prefix="",
    summary="normalises the input with a given mean and variance, then scales and biases it",
    formula="OutputTensor = FusedActivation(Scale * ((Input - Mean) / sqrt(Variance + Epsilon)) + Bias)",
    introduced=_BN_ROWS[-1].level, inputs=_BN_TENSORS[:-1], support=_BN_ROWS, same_data_type=_BN_TENSORS,
    same_sizes=(), cpu_kernel=None, cuda_body="", parameters=(SPATIAL, EPSILON, FUSED_ACTIVATION),
    shape_rule=batch_normalization_shape, fused_activation="FusedActivation",
    array_kernel=batch_normalization_kernel, gpu_array_kernel=batch_normalization_gpu_kernel,
    level_rule=batch_normalization_level_rule, exactness=COMPOSITE, sum_bound=BATCH_NORMALIZATION_SUM_BOUND,
    tolerance=Tolerance("ulp", 6, 6, "WebNN's batchNormalization tolerance (web-platform-tests webnn/resources/"
                                     "utils.js): 6 ULP for FLOAT32 and FLOAT16 (the mean and variance are given: "
                                     "nothing is reduced, so the figure does not grow)",
                        floor_float32=2.0 ** -20, floor_float16=2.0 ** -10,
                        floor_source="Scale * t + Bias cancels where the two are near opposite: the result's "
                                     "absolute error is then that of Bias, about unit size in a normalisation; "
                                     "2^-20 (FLOAT32) and 2^-10 (FLOAT16) bound it"),
    notes=(_BROADCAST.format(tensors="MeanTensor, VarianceTensor, ScaleTensor and BiasTensor"),
           "Spatial (default true) has no effect from 4_0 (the page: deprecated); below 4_0, false requires "
           "MeanTensor's and VarianceTensor's last two dimensions (Height and Width) to equal the input's.",
           "Epsilon defaults to 0.00001 (the page gives no default; the other normalisations' pages recommend it).",
           _ARITHMETIC, _FUSED),
)

MEAN_VARIANCE_NORMALIZATION = Operator(
    name="MEAN_VARIANCE_NORMALIZATION", enum_value=73, family=FAMILY, prefix="",
    summary="normalises the input by its own mean and variance over {H, W} or {C, H, W}",
    formula="OutputTensor = FusedActivation(Scale * ((Input - Mean) / sqrt(Variance + Epsilon)) + Bias), Mean and "
            "Variance over {Height, Width} (CrossChannel: {Channel, Height, Width})",
    introduced=_MVN_ROWS[-1].level, inputs=_MVN_TENSORS[:-1], support=_MVN_ROWS, same_data_type=_MVN_TENSORS,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(CROSS_CHANNEL_MVN, NORMALIZE_VARIANCE, EPSILON, FUSED_ACTIVATION),
    optional_inputs=(("ScaleTensor", "InputTensor"), ("BiasTensor", "InputTensor")), optional_since=level("1_0"),
    shape_rule=mvn_shape, fused_activation="FusedActivation", array_kernel=mvn_kernel, gpu_array_kernel=mvn_gpu_kernel,
    level_rule=mvn_level_rule,
    exactness=APPROXIMATE,
    tolerance=_MVN_TOLERANCE,
    tolerance_scale=mvn_tolerance_scale, sum_bound=MVN_SUM_BOUND,
    notes=(_BROADCAST.format(tensors="ScaleTensor and BiasTensor"), _SCALE_BIAS, _MVN_VARIANCE,
           "CrossChannel FALSE is MEAN_VARIANCE_NORMALIZATION1 with Axes {2, 3}; TRUE with Axes {1, 2, 3}.",
           _ARITHMETIC, _FUSED),
)

MEAN_VARIANCE_NORMALIZATION1 = Operator(
    name="MEAN_VARIANCE_NORMALIZATION1", enum_value=115, family=FAMILY, prefix="",
    summary="normalises the input by its own mean and variance over Axes",
    formula="OutputTensor = FusedActivation(Scale * ((Input - Mean) / sqrt(Variance + Epsilon)) + Bias), Mean and "
            "Variance over Axes",
    introduced=_MVN1_ROWS[-1].level, inputs=_MVN_TENSORS[:-1], support=_MVN1_ROWS, same_data_type=_MVN_TENSORS,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(MVN_AXES, NORMALIZE_VARIANCE, EPSILON, FUSED_ACTIVATION),
    optional_inputs=(("ScaleTensor", "InputTensor"), ("BiasTensor", "InputTensor")), optional_since=level("2_1"),
    shape_rule=mvn1_shape, fused_activation="FusedActivation", array_kernel=mvn_axes_kernel,
    planned_kernel=mvn_planned,
    gpu_array_kernel=mvn_axes_gpu_kernel, level_rule=mvn1_level_rule,
    exactness=APPROXIMATE,
    tolerance=_MVN_TOLERANCE, tolerance_scale=mvn_tolerance_scale, sum_bound=MVN_SUM_BOUND,
    notes=("Axes may be left out in the API and on the command line: every axis (DirectML's desc needs them). Each "
           "axis below the DimensionCount, none twice, at least one (dmlcli's rule where the page is silent).",
           _BROADCAST.format(tensors="ScaleTensor and BiasTensor") + " Below 4_0 their ChannelCount (dimension 1) "
           "must be the input's.", _SCALE_BIAS, _MVN_VARIANCE,
           "ONNX's InstanceNormalization is Axes {2, 3, ...}; LayerNormalization is Axes {axis, ..., last}; "
           "MeanVarianceNormalization is Axes {0, 2, 3} with Epsilon 0.", _ARITHMETIC, _FUSED),
)

_MVN2_MEANING = (
    "No stored page (the 6_3 operators' pages are not published): the fields are DirectML.h's; the meaning of UseMean "
    "and UseVariance is ONNX Runtime's DirectML provider's, which builds MEAN_VARIANCE_NORMALIZATION2 for "
    "LayerNormalization with UseMean TRUE, UseVariance TRUE and for SimplifiedLayerNormalization and "
    "SkipSimplifiedLayerNormalization (RMS normalization: x / sqrt(mean(x^2) + epsilon) * scale) with UseMean "
    "FALSE, UseVariance TRUE (microsoft/onnxruntime onnxruntime/core/providers/dml/DmlExecutionProvider/src/"
    "Operators/DmlOperatorSkipLayerNormalization.cpp: UseMean = !simplified; DmlOperatorLayerNormalization.cpp at "
    "b19adb63, where the fields were still named NormalizeMean and NormalizeVariance: NormalizeMean = !simplified).")
_MVN2_FORMULAS = (
    "The four combinations, M and V over Axes, in FLOAT32: UseMean TRUE, UseVariance TRUE: Scale * (x - M) / "
    "sqrt(V + Epsilon) + Bias, V the mean of (x - M)^2 (MEAN_VARIANCE_NORMALIZATION1 with NormalizeVariance TRUE); "
    "UseMean FALSE, UseVariance TRUE: Scale * x / sqrt(mean(x^2) + Epsilon) + Bias (RMS normalization, as the "
    "provider's SimplifiedLayerNormalization needs); UseMean TRUE, UseVariance FALSE: Scale * (x - M) + Bias "
    "(NormalizeVariance FALSE); UseMean FALSE, UseVariance FALSE: Scale * x + Bias (dmlcli's reading: the two "
    "flags switch the centring and the scaling independently; no source builds this case).")

MEAN_VARIANCE_NORMALIZATION2 = Operator(
    name="MEAN_VARIANCE_NORMALIZATION2", enum_value=171, family=FAMILY, prefix="",
    summary="normalises the input over Axes, the mean and the variance each optional (RMS normalization)",
    formula="OutputTensor = FusedActivation(Scale * ((Input - [Mean]) / [sqrt(Variance + Epsilon)]) + Bias) over "
            "Axes; UseMean FALSE: no mean subtracted, Variance = mean(Input^2)",
    introduced=_MVN2_ROWS[-1].level, inputs=_MVN_TENSORS[:-1], support=_MVN2_ROWS, same_data_type=_MVN_TENSORS,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(MVN_AXES, USE_MEAN, USE_VARIANCE, EPSILON, FUSED_ACTIVATION),
    optional_inputs=(("ScaleTensor", "InputTensor"), ("BiasTensor", "InputTensor")), optional_since=level("6_3"),
    shape_rule=mvn1_shape, fused_activation="FusedActivation", array_kernel=mvn_axes_kernel,
    planned_kernel=mvn_planned,
    gpu_array_kernel=mvn_axes_gpu_kernel, exactness=APPROXIMATE,
    tolerance=_MVN_TOLERANCE, tolerance_scale=mvn_tolerance_scale, sum_bound=MVN_SUM_BOUND,
    notes=(_MVN2_MEANING, _MVN2_FORMULAS,
           "Axes may be left out in the API and on the command line: every axis. Each axis below the "
           "DimensionCount, none twice, at least one (MEAN_VARIANCE_NORMALIZATION1's rule). UseMean and UseVariance "
           "default to TRUE in the API and on the command line (a DxDispatch desc needs both).",
           _BROADCAST.format(tensors="ScaleTensor and BiasTensor"),
           "ScaleTensor and BiasTensor are optional, each on its own (_Maybenull_ in DirectML.h; the provider gives "
           "Scale without Bias): give ScaleTensor alone as the second input, BiasTensor alone after 'none' (API: "
           "None). Left out: no scale, no bias.",
           "Support table: no page, so MEAN_VARIANCE_NORMALIZATION1's newest row (1 to 8 dimensions, FLOAT32 and "
           "FLOAT16) from 6_3, the level DirectML.h declares it at.",
           "ONNX's RMSNormalization is UseMean FALSE, UseVariance TRUE over Axes {axis, ..., last}; "
           "LayerNormalization UseMean TRUE.", _ARITHMETIC, _FUSED),
)

LOCAL_RESPONSE_NORMALIZATION = Operator(
    name="LOCAL_RESPONSE_NORMALIZATION", enum_value=74, family=FAMILY, prefix="",
    summary="divides each element by a power of the sum of squares in its local region",
    formula="OutputTensor = Input / (Bias + (Alpha / LocalSize) * sum(Input^2 over the local region))^Beta",
    introduced=_LRN_ROWS[-1].level, inputs=("InputTensor",), support=_LRN_ROWS, same_data_type=IO,
    same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(CROSS_CHANNEL_LRN, LOCAL_SIZE, LRN_ALPHA, LRN_BETA, LRN_BIAS), shape_rule=same_shape,
    array_kernel=lrn_kernel, exactness=APPROXIMATE,
    tolerance=Tolerance("ulp", 1, 1, "dmlcli's choice (WebNN has no local response normalization), after WebNN's "
                                     "l2Pool2d (N + 2) and pow figures: 2N + 18 ULP for a region of N elements "
                                     "(LocalSize channels, or LocalSize x LocalSize)"),
    tolerance_scale=lrn_tolerance_scale, dask_layout="whole_axes", dask_axes=lrn_axes,
    notes=("The local region (page silent on where it lies): along an axis, from i - floor((LocalSize - 1) / 2) to "
           "i + ceil((LocalSize - 1) / 2), as ONNX's LRN; the part outside the tensor counts as 0. CrossChannel "
           "TRUE: along the channels (dimension 1); FALSE: a LocalSize x LocalSize window of Height and Width. "
           "The sum is divided by LocalSize in both cases, as the page's formula writes it.",
           "LocalSize must be at least 1 (the page); a region larger than the tensor is allowed.",
           "Alpha, Beta and Bias default to the page's recommended 0.0001, 0.75 and 1; LocalSize to 5 (page silent).",
           _ARITHMETIC),
)

LP_NORMALIZATION = Operator(
    name="LP_NORMALIZATION", enum_value=75, family=FAMILY, prefix="",
    summary="divides each element by the L1 or L2 norm of its row along Axis",
    formula="OutputTensor = Input / max(norm_P(Input along Axis), Epsilon)",
    introduced=_LP_ROWS[-1].level, inputs=("InputTensor",), support=_LP_ROWS, same_data_type=IO, same_sizes=(),
    cpu_kernel=None, cuda_body="", parameters=(LP_AXIS, LP_EPSILON, LP_ORDER), shape_rule=lp_shape,
    array_kernel=lp_kernel, exactness=APPROXIMATE,
    tolerance=Tolerance("ulp", 1, 1, "dmlcli's choice after WebNN's reduceL2 tolerance (2N + 1 ULP for N "
                                     "elements; WebNN has no Lp normalization) plus the division: 2N + 2 ULP, N "
                                     "the size of Axis"),
    tolerance_scale=lp_tolerance_scale, dask_layout="whole_axes", dask_axes=lp_axes,
    notes=("P must be 1 or 2 (the page); Axis below the DimensionCount.",
           "How Epsilon enters is page silent: dmlcli divides by max(norm, Epsilon), which is ONNX's "
           "LpNormalization (x / norm) wherever the norm exceeds Epsilon, and finite where the norm is 0 "
           "(a row of zeros gives zeros).", _ARITHMETIC),
)

OPERATORS = (BATCH_NORMALIZATION, MEAN_VARIANCE_NORMALIZATION, MEAN_VARIANCE_NORMALIZATION1,
             MEAN_VARIANCE_NORMALIZATION2, LOCAL_RESPONSE_NORMALIZATION, LP_NORMALIZATION)
