"""What one entry of the operator table holds, and the checks every entry passes as it is built.

An entry is data: DirectML's names, the tensors, the parameters (parameters.py), the formula, the
feature level introduced, the support table of every level, the constraints, the hooks that look at
a call's inputs (hooks.py) and the two kernel bodies (NumPy and CUDA). Like NumPy's generate_umath
type tables, an entry checks itself when it is built, so that a typo in the table fails at import
(and in the tests), not in a user's run.
"""

from __future__ import annotations

import math
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING

from ...data_types import DataType
from ...feature_levels import FeatureLevel, level
from ...records import Frozen
from .options import all_options

if TYPE_CHECKING:  # annotations only: a run imports neither typing's aliases nor the parameter kinds for them
    from typing import Callable, Mapping

    from .hooks import Hook
    from .parameters import Parameter

DIMS_1_TO_8 = tuple(range(1, 9))
DIMS_4 = (4,)
DIMS_4_TO_5 = (4, 5)


class TensorSupport(Frozen):
    """What one tensor of an operator accepts in one row of a support table."""

    dims: tuple[int, ...]
    data_types: tuple[DataType, ...]

    def __init__(self, dims: tuple[int, ...], data_types: tuple[DataType, ...]) -> None:
        vars(self).update(dims=dims, data_types=data_types)

    def describe_dims(self) -> str:
        if len(self.dims) > 1 and self.dims == tuple(range(self.dims[0], self.dims[-1] + 1)):
            return f"{self.dims[0]} to {self.dims[-1]}"
        return ", ".join(str(d) for d in self.dims)

    def describe_data_types(self) -> str:
        return ", ".join(t.name for t in self.data_types)


class SupportRow(Frozen):
    """One 'DML_FEATURE_LEVEL_x_y and above' section of a page's tensor-support table."""

    level: FeatureLevel
    tensors: Mapping[str, TensorSupport]
    # Tensors this row alone ties to one DataType, on top of the operator's same_data_type (POW below
    # 3_0: "Until 3_0 ExponentTensor must match the type of InputTensor").
    same_data_type: tuple[str, ...]

    def __init__(self, level: FeatureLevel, tensors: Mapping[str, TensorSupport],
                 same_data_type: tuple[str, ...] = ()) -> None:
        vars(self).update(level=level, tensors=tensors, same_data_type=same_data_type)


def rows(*sections) -> tuple[SupportRow, ...]:
    """Support rows, newest first as the pages print them, from sections of either form:
    (level, dims, {tensor: data types}[, tensors this row ties]) where every tensor has the same dimension
    counts, or (level, {tensor: (dims, data types)}[, tensors this row ties]) where they differ."""
    return tuple(_row(section) for section in sections)


def _row(section) -> SupportRow:
    if isinstance(section[1], dict):
        tensors = {name: TensorSupport(tuple(dims), tuple(types)) for name, (dims, types) in section[1].items()}
        tied = section[2] if len(section) > 2 else ()
    else:
        tensors = {name: TensorSupport(section[1], tuple(types)) for name, types in section[2].items()}
        tied = section[3] if len(section) > 3 else ()
    return SupportRow(level(section[0]), tensors, tuple(tied))


# How a float result relates to the exact value (the operator's "class", shown by describe and validate).
EXACT = "exact"  # no rounding: an input value, a sign or bit manipulation, a comparison, a count
ONE_ROUNDING = "one rounding"  # one correctly rounded IEEE-754 operation (a+b, a/b, sqrt)
COMPOSITE = "composite"  # several IEEE operations: each rounded, order matters (MEAN, MODULUS_*)
APPROXIMATE = "approximate"  # transcendental: no IEEE-defined result, checked against a tolerance
EXACTNESS_CLASSES = (EXACT, ONE_ROUNDING, COMPOSITE, APPROXIMATE)


def smallest_normal(dtype) -> float:
    """The output type's smallest normal value (FLOAT32 1.18e-38, FLOAT16 6.1e-05): the default absolute floor."""
    import numpy as np

    return float(np.finfo(np.dtype(str(dtype))).smallest_normal)


# --allow-tf32 (DirectML's DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION): an operator whose FLOAT32 work is
# matrix products (Operator.tf32_products) may have them computed by TF32 tensor cores, which keep 10 of
# FLOAT32's 23 mantissa bits; its FLOAT32 results are then checked within 2^13 times its ULP figure and floor.
TF32_WIDENING = 2 ** 13
TF32_FLAG = "DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION"


def is_float32(dtype) -> bool:
    """Whether a DataType or a NumPy dtype (or its name) is FLOAT32."""
    return str(getattr(dtype, "numpy_dtype", dtype)) == "float32"


PLAIN_UNDERFLOW = ("the output type's smallest normal value: a result that underflows there (a subnormal, or a zero "
                   "from a device that flushes or loses the tail of an exponential) is no error the ULP can measure")


class Tolerance(Frozen):
    """How far a float result may be from the reference and still match (`--check`, the conformance tests).

    kind "ulp": at most that many units in the last place of the output type, OR an absolute difference
    up to the floor (an element passes when either holds, as WebNN's and Polygraphy's checks do): near
    an underflow or a root ULP measure nothing a device can promise, so a FLOAT32 GELU that rounds
    to -0.0 where the float64 reference gives -4.98e-15 is within the floor, not 8e8 ULP out.
    The floor is the output type's smallest normal value unless the entry gives its own, derived from
    the formula (`floor_source` says how). kind "atol": an absolute difference, no floor needed.
    Integer outputs are always compared exactly, whatever the operator's tolerance.
    """

    kind: str  # "ulp" or "atol"
    float32: float
    float16: float
    source: str  # where the figure comes from (WebNN's conformance table, or dmlcli's own choice and why)
    # The absolute floors of a "ulp" tolerance; None: the output type's smallest normal (plain underflow).
    floor_float32: float | None
    floor_float16: float | None
    floor_source: str  # why the entry's floors are what they are, where it gives them

    def __init__(self, kind: str, float32: float, float16: float, source: str, floor_float32: float | None = None,
                 floor_float16: float | None = None, floor_source: str = "") -> None:
        vars(self).update(kind=kind, float32=float32, float16=float16, source=source, floor_float32=floor_float32,
                          floor_float16=floor_float16, floor_source=floor_source)

    def for_dtype(self, dtype) -> float:
        return self.float16 if str(dtype) == "float16" else self.float32

    def floor_for(self, dtype) -> float:
        """The absolute floor for a result in `dtype` (0 for an "atol" tolerance, which is absolute already)."""
        if self.kind != "ulp":
            return 0.0
        given = self.floor_float16 if str(dtype) == "float16" else self.floor_float32
        if given is not None and str(dtype) in ("float16", "float32"):
            return float(given)
        return smallest_normal(dtype)

    @property
    def floor_reason(self) -> str | None:
        """Why the floor is what it is (None for an "atol" tolerance)."""
        if self.kind != "ulp":
            return None
        return self.floor_source or PLAIN_UNDERFLOW

    def describe(self, scaled: bool = False) -> str:
        """The figures, their floors and where they come from. `scaled`: the operator multiplies the figure by a
        count of each call (Operator.tolerance_scale), which the source describes."""
        unit = " ULP" if self.kind == "ulp" else " absolute"
        if scaled:
            unit += " times a count of the call (the source below says which; validate gives a call's figure)"
        same = self.float32 == self.float16
        figures = (f"{self.float32:g}{unit}" if same else
                   f"{self.float32:g}{unit} (FLOAT32), {self.float16:g}{unit} (FLOAT16)")
        if self.kind == "ulp":
            figures += (f", or an absolute difference up to {self.floor_for('float32'):.3g} (FLOAT32), "
                        f"{self.floor_for('float16'):.3g} (FLOAT16): {self.floor_reason}")
        return f"{figures}; {self.source}"

    def describe_tf32(self, scaled: bool = False) -> str:
        """The FLOAT32 figures a call with --allow-tf32 is checked by (an operator with tf32_products); `scaled` as
        describe's."""
        unit = " ULP" if self.kind == "ulp" else " absolute"
        if scaled:
            unit += " times the call's count"
        floor = (f" or an absolute difference up to {self.floor_for('float32') * TF32_WIDENING:.3g}"
                 if self.kind == "ulp" else "")
        return (f"{self.float32 * TF32_WIDENING:g}{unit}{floor} (FLOAT32; 2^13 = {TF32_WIDENING} times the figures "
                "above, as TF32 keeps 10 of FLOAT32's 23 mantissa bits)")


# The multiple of the sum bound (SumBound): an element of an operator that sums terms passes where its difference is
# within BOUND_MULTIPLE x (K x u + u_out) x M (see SumBound). The error of any order of summation stays within
# K x u x M to first order; the multiple leaves room for the second-order terms and for the few roundings around
# the sum (a scale, a bias) that K does not count.
BOUND_MULTIPLE = 2
# The unit roundoff u of the accumulation: FLOAT32 (FLOAT16 calls are widened and accumulate in FLOAT32), and TF32
# where a call allows TF32 products (10 mantissa bits: u = 2^-11, the TF32_WIDENING of FLOAT32's).
FLOAT32_ROUNDOFF = 2.0 ** -24
TF32_ROUNDOFF = FLOAT32_ROUNDOFF * TF32_WIDENING


class SumBound(Frozen):
    """How far the rounding of its sums may move an element of an operator that sums terms (issue 31).

    The ULP of a result measures nothing where its terms cancel: a dot product of terms about 1 that sums to 1e-6
    carries the rounding error of its partial sums, K x u x sum|term| (u the accumulation's unit roundoff, K the
    terms), however the device orders them, and that is millions of ULP of the result. So an element of such an
    operator also passes where |got - expected| <= BOUND_MULTIPLE x (K x u + u_out) x M, M the element's sum of
    magnitudes and u_out the output type's unit roundoff (the final roundings, the device's and the
    reference's). The entry declares how M is obtained and what K is; the checker (checking/bounds.py) computes
    the bound per element from the call's own inputs, with one extra run:
    - by default M is the operator itself run on the absolute values of the inputs in `absolute` (the others as
      they are), in float64, with the parameters `parameters(params)` gives (|Alpha|, |Beta|); for a product
      that is |A| x |B|, for a sum of terms the sum of their magnitudes;
    - `magnitude`, where that is not M: a kernel (xp, inputs, outputs, params) -> M for the first output, given
      the float inputs in float64 (attention: the scores' magnitudes, which the softmax turns into the output's
      error; a recurrence: the error carried from step to step).
    The bound covers the first output, or each output `terms` names (a gradient's sums, a recurrence's states); a
    fused activation carries it through its largest slope (Operator.largest_slope); one that jumps
    (THRESHOLDED_RELU, SHRINK) leaves the operator with its ULP figure alone. K = 0 (a selection: REDUCE's MAX and
    MIN) means no bound.
    """

    # (call) -> K, the terms summed into an element of the first output (the most any element sums), or
    # {output name: K} for each output the bound covers
    terms: Callable
    terms_text: str  # what K is, in words (describe)
    magnitude_text: str  # what M is, in words (describe)
    absolute: tuple[str, ...]  # the inputs the run takes as absolute values
    parameters: Callable | None  # (typed parameters) -> the run's; None: the call's
    # The run's kernel where it is not the operator's own: M of the first output, or a tuple with one M per output
    # (None where an output has none)
    magnitude: Callable | None

    def __init__(self, terms: Callable, terms_text: str, magnitude_text: str, absolute: tuple[str, ...] = (),
                 parameters: Callable | None = None, magnitude: Callable | None = None) -> None:
        vars(self).update(terms=terms, terms_text=terms_text, magnitude_text=magnitude_text, absolute=absolute,
                          parameters=parameters, magnitude=magnitude)

    def describe(self, tf32: bool = False) -> str:
        """The rule in words, as describe prints it; `tf32`: the operator's products may run on TF32 tensor cores."""
        tf32_roundoff = "; TF32's 2^-11 with --allow-tf32" if tf32 else ""
        return (f"an element also passes within its sum bound {BOUND_MULTIPLE} x (K x u + u_out) x M, where K is "
                f"{self.terms_text}; u the unit roundoff of the accumulation (FLOAT32's 2^-24, for FLOAT16 calls too"
                f"{tf32_roundoff}) and u_out the output type's (2^-24 FLOAT32, 2^-11 FLOAT16); M is "
                f"{self.magnitude_text} (any order of summation stays within K x u x M)")


class InputBroadcast(Frozen):
    """How --broadcast (broadcast=True) broadcasts a shaped operator's inputs, where DirectML expresses ONNX's
    broadcast with zero Strides on its tensor descs, as it does for the element-wise operators (issue 31: ONNX's
    MatMul [2, 3, 4, 5] @ [1, 1, 5, 6]). The call is validated at the broadcast Sizes and its kernel reads the inputs
    broadcast to them (zero strides; Call.complete).

    `rule(shapes by input name, typed parameters)` -> each input's Sizes once broadcast (a RuleViolation where they
    do not broadcast); `text` says it in words (describe, and the refusal without --broadcast).
    """

    rule: Callable
    text: str

    def __init__(self, rule: Callable, text: str) -> None:
        vars(self).update(rule=rule, text=text)


class ActivationApplied(tuple):
    """A kernel's results (a tuple like any other) with the operator's fused activation already applied: a GPU
    kernel whose library fused it into its own kernel (cuDNN's RELU after a convolution) returns this, and the backend
    does not run the activation again (Operator.fused_activation)."""


class Operator(Frozen):
    """One entry of the operator table (an immutable record: records.py); it checks itself as it is made."""

    name: str  # DirectML's name without prefix, e.g. "BIT_XOR"
    enum_value: int  # DML_OPERATOR_TYPE value
    family: str  # how `dmlcli ops` groups it: bitwise, logical, comparison, ...
    summary: str
    formula: str
    introduced: FeatureLevel
    inputs: tuple[str, ...]  # DESC field names of the input tensors, in order
    support: tuple[SupportRow, ...]
    same_data_type: tuple[str, ...]  # tensors whose DataType must be equal
    same_sizes: tuple[str, ...]  # tensors whose DimensionCount and Sizes must be equal
    # NumPy kernel of an element-wise operator: (input arrays broadcast to one shape, output dtype, typed
    # parameters by field) -> output. Kernels are element-wise, so the streaming executor may call them on
    # any slice of the inputs. None for shaped operators, which have an array_kernel instead.
    cpu_kernel: Callable | None
    # CUDA C++ expression of one element (backends/gpu_kernels.py): inputs by cuda_names; W, the
    # first input's width in bits; each parameter by the names its kind gives (parameters.py).
    # Native-encoding operators see the unsigned bit pattern, the others the value. "" for shaped operators.
    cuda_body: str
    output: str
    prefix: str  # DML_OPERATOR_<prefix>_<name>
    parameters: tuple[Parameter, ...]
    default_output_type: DataType | None  # when the output type is a free choice
    native_encoding: bool  # bitwise work on the bit pattern, whatever the data type
    in_place: bool
    hooks: tuple[Hook, ...]  # checks of the inputs' values that may warn (see hooks.py)
    cuda_names: tuple[str, ...]  # the body's names for the inputs; default x, or a and b
    # CUDA device functions the body calls (emitted once per kernel module, before the body): for
    # results that need more than one expression. Names start with dml_<operator name>_ to stay apart.
    cuda_helpers: str
    # The same function on four 1-byte elements held in one 32-bit word (each input an unsigned int of four
    # elements, the first in the lowest byte; the result likewise), in the same names as cuda_body: the vector
    # kernel's body where every tensor's type is 1 byte, so that integer work is done on four lanes at once (SIMD
    # within a register). "": one element at a time. It must give cuda_body's bits in every lane.
    cuda_byte_lanes_body: str
    notes: tuple[str, ...]
    exactness: str  # one of EXACTNESS_CLASSES, for float results (integer results are always exact)
    tolerance: Tolerance | None  # for float outputs of operators that are not exact
    # Inputs that may be left out (QUANTIZE_LINEAR's ZeroPoint), each with the tensor whose data type
    # it then takes: a call gives every input or only the required ones, in order. A left-out input
    # is skipped by validation and given to the kernels as zeros of that type (DirectML's meaning of
    # a NULL zero point), so kernels always see every input. `optional_since`: the first level that
    # lets them be left out.
    optional_inputs: tuple[tuple[str, str], ...]
    optional_since: FeatureLevel | None
    # Outputs a call may leave out (RNN's OutputSequenceTensor, OutputSingleTensor: _Maybenull_ in DirectML.h), as a
    # DESC leaves them NULL: outputs= in the API, --outputs on the command line, a DxDispatch desc without them. The
    # call then has only the outputs it asks for (Call.outputs, in DESC order; at least one), and the kernel is
    # asked for those alone: it returns one array per entry of its `outputs` and skips the work of the others
    # (shaped.asks_for_output). By default a call gives every output it can. The shape rule may leave an optional
    # output out of its result where the call's inputs cannot give it (ROI_ALIGN_GRAD's OutputROIGradientTensor
    # without its optional InputTensor): the call then has no such tensor (and asking for it is refused).
    optional_outputs: tuple[str, ...]
    # ---- shaped operators (everything beyond element-wise; see shaped.py) ----
    # The output-shape rule: (ShapeQuery) -> {output name: Sizes} (a list of Sizes for a variadic output).
    # It raises RuleViolation for a call the operator's rules refuse (exit 3). None: element-wise, where the
    # output has the inputs' (broadcast) Sizes.
    shape_rule: Callable | None
    # The kernel of a shaped operator, for both backends: (xp, inputs, outputs, typed parameters) -> a tuple of
    # output arrays, where xp is numpy or cupy, inputs are arrays of xp in DESC order (a variadic input is
    # several arrays in a row), and outputs the TensorInfo of each output (Sizes and DataType).
    array_kernel: Callable | None
    # The GPU's own kernel where array_kernel run on CuPy would not give the CPU's result (same signature).
    gpu_array_kernel: Callable | None
    # The CPU's call worked out once, for calls made again and again on inputs of the first's types, Sizes and
    # Strides (a model's planned node): (inputs, outputs, typed parameters, constant input positions: those whose
    # array is the same, with the same values, on every call, which it may read once) -> a function of the input
    # arrays that gives array_kernel's outputs on NumPy, bit for bit, as fresh C-ordered arrays; or None where the
    # call has no such form. None: array_kernel on every call.
    planned_kernel: Callable | None
    extra_outputs: tuple[str, ...]  # output tensors after `output` (TOP_K's OutputIndexTensor)
    # The one tensor field that is an array of tensors (JOIN's InputTensors, SPLIT's OutputTensors): a call
    # gives (or gets) one or more tensors for it, named InputTensors[0], InputTensors[1], ... A data-type tie
    # (same_data_type, a support row's) may name one of them by its place (QUANTIZE's "QuantizationTensors[1]",
    # its zero point): the tensor the call gives there, where it gives one.
    variadic: str | None
    # The DESC field that counts the array's tensors (QUANTIZE's QuantizationTensorCount); None: DirectML's usual
    # InputCount (an array of inputs) or OutputCount (of outputs).
    variadic_count: str | None
    # Support rows picked by a parameter's value (REDUCE's tables by Function): the parameter's field and,
    # per group of its values, the rows. `support` then holds the rows of the first group (for describe's
    # summary); validation uses the group of the call's value.
    support_by: str | None
    support_groups: tuple[tuple[tuple[str, ...], tuple[SupportRow, ...]], ...]
    # Rules that depend on the feature level beyond the support rows (an enum value that came later):
    # (call, feature level) -> a message, or None where the call is fine at that level.
    level_rule: Callable | None
    # How the tolerance grows with a call (a reduction's with the elements reduced): (call) -> a factor.
    tolerance_scale: Callable | None
    # How a shaped operator runs on Dask (distributed/graph.py); None: it does not. "whole_axes": each block
    # holds whole `dask_axes(call)` axes of the (single) input and goes through the kernel on its own, the
    # other axes keeping their chunks; "concatenate": the inputs are joined along the Axis parameter;
    dask_layout: str | None
    dask_axes: Callable | None
    # "index": the output is the input indexed with `dask_index(call)` (a tuple of slices: SLICE, SLICE1).
    dask_index: Callable | None
    # The parameter (a FusedActivationParameter's field, "FusedActivation") whose activation the backend runs on
    # the first output once the kernel has written it, rounded to the output type (GEMM, CONVOLUTION, the
    # normalizations): the activation's own kernel, the CPU's or the GPU's, as ADD1's runs. None: no such field.
    fused_activation: str | None
    # Whether the FLOAT32 work of its kernel is matrix products (xp.matmul: cuBLAS on the GPU), which TF32 tensor
    # cores may compute when the call allows it (--allow-tf32, allow_tf32=True, DxDispatch's executionFlags
    # DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION): the GPU backend then runs the kernel with TF32 allowed
    # and its FLOAT32 results are checked within TF32_WIDENING times the tolerance. False: the switch is accepted
    # and changes nothing (DirectML's flag only allows).
    tf32_products: bool
    # The per-element bound of an operator that sums terms (SumBound): an element also passes within it. None: the
    # ULP figure and the floor alone.
    sum_bound: SumBound | None
    # An activation's largest slope, sup |f'(x)|, for its typed parameters: how far it can carry a change of its
    # input (a sum bound through a fused activation, the error of a recurrence's step). None: not an activation,
    # or one that jumps (THRESHOLDED_RELU at Alpha, SHRINK at its thresholds), which no slope bounds.
    largest_slope: Callable | None
    # ---- what a shaped kernel costs beyond its data (issue 34) ----
    # (call) -> the element reads its kernel makes, where they can be far more than its data: a window's output
    # elements times the window's elements. `validate` states it; a run whose reads are many times its data shows
    # progress on a terminal (the kernel reports through operators/numerics/work.py). None: about its data.
    work: Callable | None
    # (call) -> the bytes its kernel holds at its peak besides the inputs and outputs (a padded copy of the input,
    # FLOAT32 accumulators), where the engine's default (twice the largest input as FLOAT64) does not cover it:
    # the room check counts it before any work. None: the default.
    scratch: Callable | None
    # How --broadcast broadcasts a shaped operator's inputs (InputBroadcast); None: a shaped operator's inputs are
    # not broadcast (an element-wise operator's are, all together, by NumPy's rules, without an entry of its own).
    input_broadcast: InputBroadcast | None
    # ---- data movement ----
    # The input whose elements, each copied with its bits, are every element of the output (a call that moves data:
    # GATHER's InputTensor; IDENTITY's where no ScaleBias is given: moved_input). A model's run may read such a
    # call's output as a strided view of that input, where the plan finds one (onnx_model/planning/copies.py). None:
    # the output is computed.
    moves_input: str | None

    def __init__(self, *, name: str, enum_value: int, family: str, summary: str, formula: str, introduced: FeatureLevel,
                 inputs: tuple[str, ...], support: tuple[SupportRow, ...], same_data_type: tuple[str, ...],
                 same_sizes: tuple[str, ...], cpu_kernel: Callable | None, cuda_body: str, output: str = "OutputTensor",
                 prefix: str = "ELEMENT_WISE", parameters: tuple[Parameter, ...] = (),
                 default_output_type: DataType | None = None, native_encoding: bool = False, in_place: bool = False,
                 hooks: tuple[Hook, ...] = (), cuda_names: tuple[str, ...] = (), cuda_helpers: str = "",
                 cuda_byte_lanes_body: str = "", notes: tuple[str, ...] = (), exactness: str = EXACT,
                 tolerance: Tolerance | None = None,
                 optional_inputs: tuple[tuple[str, str], ...] = (), optional_since: FeatureLevel | None = None,
                 optional_outputs: tuple[str, ...] = (), shape_rule: Callable | None = None,
                 array_kernel: Callable | None = None, gpu_array_kernel: Callable | None = None,
                 planned_kernel: Callable | None = None, extra_outputs: tuple[str, ...] = (),
                 variadic: str | None = None,
                 variadic_count: str | None = None, support_by: str | None = None,
                 support_groups: tuple[tuple[tuple[str, ...], tuple[SupportRow, ...]], ...] = (),
                 level_rule: Callable | None = None, tolerance_scale: Callable | None = None,
                 dask_layout: str | None = None, dask_axes: Callable | None = None, dask_index: Callable | None = None,
                 fused_activation: str | None = None, tf32_products: bool = False,
                 sum_bound: SumBound | None = None, largest_slope: Callable | None = None,
                 work: Callable | None = None, scratch: Callable | None = None,
                 input_broadcast: InputBroadcast | None = None, moves_input: str | None = None) -> None:
        vars(self).update(name=name, enum_value=enum_value, family=family, summary=summary, formula=formula,
                          introduced=introduced, inputs=inputs, support=support, same_data_type=same_data_type,
                          same_sizes=same_sizes, cpu_kernel=cpu_kernel, cuda_body=cuda_body, output=output,
                          prefix=prefix, parameters=parameters, default_output_type=default_output_type,
                          native_encoding=native_encoding, in_place=in_place, hooks=hooks, cuda_names=cuda_names,
                          cuda_helpers=cuda_helpers, cuda_byte_lanes_body=cuda_byte_lanes_body, notes=notes,
                          exactness=exactness, tolerance=tolerance,
                          optional_inputs=optional_inputs, optional_since=optional_since,
                          optional_outputs=optional_outputs, shape_rule=shape_rule, array_kernel=array_kernel,
                          gpu_array_kernel=gpu_array_kernel, planned_kernel=planned_kernel,
                          extra_outputs=extra_outputs, variadic=variadic,
                          variadic_count=variadic_count,
                          support_by=support_by, support_groups=support_groups, level_rule=level_rule,
                          tolerance_scale=tolerance_scale, dask_layout=dask_layout, dask_axes=dask_axes,
                          dask_index=dask_index, fused_activation=fused_activation, tf32_products=tf32_products,
                          sum_bound=sum_bound, largest_slope=largest_slope, work=work, scratch=scratch,
                          input_broadcast=input_broadcast, moves_input=moves_input)
        check_entry(self)

    def __repr__(self) -> str:
        return f"Operator(name={self.name!r})"

    def tf32_applies(self, output_type) -> bool:
        """Whether a call that allows TF32 is computed (GPU) and checked (--check) differently: an operator with
        tf32_products whose output is FLOAT32. FLOAT16 calls keep their products in FLOAT32 (DirectML's flag
        concerns FLOAT32 work, and dmlcli's FLOAT16 results accumulate in FLOAT32 as without it)."""
        return self.tf32_products and is_float32(output_type)

    def moved_input(self, parameters: Mapping[str, object]) -> str | None:
        """The input a call with these parameters copies into its output bit for bit (moves_input), or None: an
        element-wise operator's ScaleBias, where given, computes x*Scale + Bias instead (-0.0 + 0 is +0.0)."""
        if self.moves_input is None or parameters.get("ScaleBias") is not None:
            return None
        return self.moves_input

    @property
    def required_inputs(self) -> tuple[str, ...]:
        optional = {name for name, _ in self.optional_inputs}
        return tuple(name for name in self.inputs if name not in optional)

    def __post_init__(self) -> None:
        check_entry(self)

    @property
    def dml_name(self) -> str:
        return f"DML_OPERATOR_{self.key}"

    @property
    def key(self) -> str:
        """DirectML's name without DML_OPERATOR_: ELEMENT_WISE_BIT_XOR, ACTIVATION_RELU, REDUCE."""
        return f"{self.prefix}_{self.name}" if self.prefix else self.name

    @property
    def cli_name(self) -> str:
        return self.name.lower() if self.prefix in ("ELEMENT_WISE", "") else self.key.lower()

    @property
    def outputs(self) -> tuple[str, ...]:
        return (self.output,) + self.extra_outputs

    @property
    def tensors(self) -> tuple[str, ...]:
        return self.inputs + self.outputs

    @property
    def variadic_count_field(self) -> str | None:
        """The DESC field that counts the variadic tensor array's descs (None without one)."""
        if self.variadic is None:
            return None
        return self.variadic_count or ("InputCount" if self.variadic in self.inputs else "OutputCount")

    def names_tensor(self, name: str) -> bool:
        """Whether `name` is one of its tensor fields, or one place of its variadic array ("InputTensors[1]")."""
        if name in self.tensors:
            return True
        field, _, index = name.partition("[")
        return field == self.variadic and index.endswith("]") and index[:-1].isdigit()

    @property
    def is_elementwise(self) -> bool:
        return self.shape_rule is None

    @property
    def choice_output(self) -> str | None:
        """The output whose data type the caller chooses (--output-dtype); None where every output is tied."""
        return next((name for name in self.outputs if name not in self.same_data_type), None)

    @property
    def output_type_is_choice(self) -> bool:
        return self.output not in self.same_data_type

    @property
    def kernel_input_names(self) -> tuple[str, ...]:
        if self.cuda_names:
            return self.cuda_names
        return ("x",) if len(self.inputs) == 1 else ("a", "b")

    @cached_property  # the entry is immutable; every API call checks its keywords against these
    def options(self) -> Mapping[str, Parameter]:
        """Each API keyword (command-line option) of this operator, mapped to its parameter (read-only)."""
        return MappingProxyType(all_options(self.parameters))

    def rows_for(self, parameters: Mapping[str, object] | None = None) -> tuple[SupportRow, ...]:
        """The support rows that apply to a call with these typed parameters (all groups' first without)."""
        if self.support_by is None or parameters is None:
            return self.support
        value = parameters.get(self.support_by)
        for values, group in self.support_groups:
            if value in values:
                return group
        return self.support

    def row_at(self, feature_level: FeatureLevel, parameters: Mapping[str, object] | None = None) -> SupportRow | None:
        """The newest support row at or below `feature_level`; None where the operator is absent."""
        found = [row for row in self.rows_for(parameters) if row.level <= feature_level]
        return max(found, key=lambda row: row.level) if found else None

    def all_rows(self) -> tuple[SupportRow, ...]:
        """Every support row of every group."""
        if not self.support_groups:
            return self.support
        return tuple(row for _, group in self.support_groups for row in group)


def check_entry(op: Operator) -> None:
    """The table's self-checks: raise ValueError naming the entry and what is wrong with it."""
    def fail(why: str) -> None:
        raise ValueError(f"operator table entry {op.name}: {why}")

    tensors = op.tensors
    if len(set(tensors)) != len(tensors):
        fail(f"a tensor is named twice in {tensors}")
    for constraint, names in (("same_data_type", op.same_data_type), ("same_sizes", op.same_sizes)):
        for name in names:
            if not (op.names_tensor(name) if constraint == "same_data_type" else name in tensors):
                fail(f"{constraint} names {name}, which is not one of its tensors {tensors}")
    if not op.support:
        fail("has no support rows")
    every_row = op.all_rows()
    if min(row.level for row in every_row) != op.introduced:
        fail(f"introduced at {op.introduced} but its oldest support row is at "
             f"{min(row.level for row in every_row)}")
    for group in ([op.support] if not op.support_groups else [g for _, g in op.support_groups]):
        if len({row.level for row in group}) != len(group):
            fail("two support rows for the same feature level")
    if op.support_groups:
        _check_support_groups(op, fail)
    for row in every_row:
        for name in row.same_data_type:
            if not op.names_tensor(name):
                fail(f"the {row.level.short} row ties {name}, which is not one of its tensors")
        if set(row.tensors) != set(tensors):
            fail(f"the {row.level.short} support row covers {sorted(row.tensors)}, not every tensor {sorted(tensors)}")
        for name, support in row.tensors.items():
            if not support.data_types or not support.dims:
                fail(f"the {row.level.short} row gives {name} no data types or no dimension counts")
    if op.output_type_is_choice and op.default_output_type is None and not _output_follows_a_rule(op):
        fail("its output type is a choice, so it needs a default_output_type")
    choice = op.choice_output or op.output
    if op.default_output_type is not None and not any(op.default_output_type in row.tensors[choice].data_types
                                                      for row in every_row):
        fail(f"default output type {op.default_output_type.name} is in no support row")
    if op.input_broadcast is not None and op.is_elementwise:
        fail("an element-wise operator's inputs broadcast all together: it needs no input_broadcast")
    options = [option for parameter in op.parameters for option in parameter.options]
    if len(set(options)) != len(options):
        fail(f"two parameters take the same option in {options}")
    for parameter in op.parameters:
        try:
            parameter.check_declaration(tensors)
        except ValueError as error:
            fail(str(error))
    for hook in op.hooks:
        for name in hook.tensors:
            if name not in op.inputs:
                fail(f"hook {type(hook).__name__} reads {name}, which is not one of its inputs")
    if op.cuda_names and len(op.cuda_names) != len(op.inputs):
        fail(f"cuda_names {op.cuda_names} do not name each of the inputs {op.inputs}")
    if op.is_elementwise:
        if not op.cuda_body.strip() or op.cpu_kernel is None:
            fail("is element-wise, so it needs a cpu_kernel and a cuda_body")
        if op.extra_outputs or op.variadic or op.array_kernel is not None:
            fail("has several outputs, a variadic tensor or an array_kernel, so it needs a shape_rule")
        if op.work is not None or op.scratch is not None:
            fail("is element-wise (streamed, one read per element), so it has no work or scratch estimate")
    elif op.array_kernel is None:
        fail("has a shape_rule, so it needs an array_kernel")
    if op.fused_activation is not None and op.fused_activation not in {p.field for p in op.parameters}:
        fail(f"fused_activation names {op.fused_activation}, which is not one of its parameters")
    if op.dask_layout not in (None, "whole_axes", "concatenate", "index"):
        fail(f"dask_layout {op.dask_layout!r} is not 'whole_axes', 'concatenate' or 'index'")
    if op.dask_layout == "index" and op.dask_index is None:
        fail("runs on Dask by indexing, so it needs dask_index")
    if op.dask_layout == "whole_axes" and op.dask_axes is None:
        fail("runs on Dask with whole axes, so it needs dask_axes")
    if op.variadic is not None and op.variadic not in tensors:
        fail(f"variadic names {op.variadic}, which is not one of its tensors {tensors}")
    if op.variadic_count is not None and op.variadic is None:
        fail(f"variadic_count names {op.variadic_count}, but it has no variadic tensor")
    if op.exactness not in EXACTNESS_CLASSES:
        fail(f"exactness {op.exactness!r} is not one of {EXACTNESS_CLASSES}")
    if op.exactness == EXACT and op.tolerance is not None:
        fail("is exact, so it takes no tolerance")
    if op.exactness != EXACT and op.tolerance is None:
        fail(f"is {op.exactness}, so its float results need a tolerance")
    if op.tolerance is not None and op.tolerance.kind not in ("ulp", "atol"):
        fail(f"tolerance kind {op.tolerance.kind!r} is not 'ulp' or 'atol'")
    if op.tolerance is not None:
        _check_floors(op.tolerance, fail)
    for name, like in op.optional_inputs:
        if name not in op.inputs or like not in tensors:
            fail(f"optional input {name} (typed like {like}) is not one of its tensors")
    for name in op.optional_outputs:
        if name not in op.outputs:
            fail(f"optional output {name} is not one of its outputs {op.outputs}")
    if op.optional_inputs and op.optional_since is None:
        fail("has optional inputs but no optional_since level")
    if op.tf32_products and (op.tolerance is None or op.is_elementwise):
        fail("has tf32_products, so it needs a tolerance (widened for TF32) and an array_kernel (its products)")
    if op.sum_bound is not None:
        _check_sum_bound(op, fail)
    if op.moves_input is not None and (op.moves_input not in op.inputs or op.exactness != EXACT):
        fail(f"moves_input names {op.moves_input}, which is not one of its inputs {op.inputs} of an exact operator")


def _check_sum_bound(op: Operator, fail) -> None:
    """A sum bound goes with a ULP tolerance (the figure it is looser than) of a shaped operator, and its absolute
    values are of its inputs."""
    if op.is_elementwise or op.tolerance is None or op.tolerance.kind != "ulp":
        fail("has a sum_bound, so it needs a shape_rule and a 'ulp' tolerance")
    for name in op.sum_bound.absolute:
        if name not in op.inputs:
            fail(f"sum_bound takes |{name}|, which is not one of its inputs {op.inputs}")
    if not (op.sum_bound.terms_text.strip() and op.sum_bound.magnitude_text.strip()):
        fail("sum_bound needs terms_text and magnitude_text (describe states the rule)")


def _output_follows_a_rule(op: Operator) -> bool:
    # An output tied to no input and with one allowed type in every row needs no default.
    choice = op.choice_output or op.output
    return all(len(row.tensors[choice].data_types) == 1 for row in op.all_rows())


def _check_support_groups(op: Operator, fail) -> None:
    parameter = next((p for p in op.parameters if p.field == op.support_by), None)
    if parameter is None:
        fail(f"support_by names {op.support_by}, which is not one of its parameters")
        return
    values = dict(getattr(parameter, "values", ()))
    grouped = [value for group, _ in op.support_groups for value in group]
    if sorted(grouped) != sorted(values):
        fail(f"support_groups cover {sorted(grouped)}, not each value of {op.support_by} once {sorted(values)}")
    if op.support is not op.support_groups[0][1]:
        fail("support must be the first support group's rows")


def _check_floors(tolerance: Tolerance, fail) -> None:
    """A floor is a finite number >= 0, only on a "ulp" tolerance, and an entry's own floor says why."""
    given = [f for f in (tolerance.floor_float32, tolerance.floor_float16) if f is not None]
    if given and tolerance.kind != "ulp":
        fail("an absolute floor goes with a 'ulp' tolerance only (an 'atol' tolerance is absolute already)")
    for floor in given:
        if not (isinstance(floor, (int, float)) and math.isfinite(floor) and floor >= 0):
            fail(f"absolute floor {floor!r} is not a finite number >= 0")
    if given and not tolerance.floor_source.strip():
        fail("gives its own absolute floor without floor_source saying where it comes from")
