"""CAST (family "conversion") and the generators FILL_VALUE_CONSTANT, FILL_VALUE_SEQUENCE, DIAGONAL_MATRIX and
DIAGONAL_MATRIX1 (family "generation"): entries and kernels.

Sources: DirectML's pages for DML_CAST_OPERATOR_DESC, DML_FILL_VALUE_CONSTANT_OPERATOR_DESC,
DML_FILL_VALUE_SEQUENCE_OPERATOR_DESC, DML_DIAGONAL_MATRIX_OPERATOR_DESC and DML_DIAGONAL_MATRIX1_OPERATOR_DESC
(MicrosoftDocs/sdk-api): fields, formulas, examples and support tables.

The generators have no input tensor (DIAGONAL_MATRIX1's is optional): their output's Sizes come from the
caller (--output-shape, output_shape=, a DxDispatch desc's OutputTensor Sizes), its type from --output-dtype.

Every result is exact (a conversion rounds once, by a rule written in the entry's notes), so the CPU and the
GPU give the same bits. The CPU runs the array kernels with NumPy. On the GPU, CAST and FILL_VALUE_SEQUENCE
have kernels of their own (CUDA C++ compiled by CuPy), since CuPy's astype and float32 arithmetic would not
give NumPy's bits: CuPy compiles with flush-to-zero (FLOAT32 subnormals become 0 in its float conversions and
arithmetic) and its out-of-range float-to-integer casts are the C cast's (undefined). The kernels below make
every conversion explicit, with PTX instructions that round to nearest even and keep subnormals.
"""

from __future__ import annotations

import math

import numpy as np

from ...data_types import ALL11, FLOAT16, FLOAT32, INT8, INT16, TYPES_8, TYPES_10, UINT8, UINT16
from ...errors import InputError
from ...feature_levels import level
from ...scalars import is_digits
from ..numerics import compiled_loops
from ..numerics.conversions import blockwise, float_to_integer, integer_bounds
from ..numerics.cuda_prelude import C_INTEGER_TYPES, C_WORD_TYPES, launch
from ..table.options import INT32_RANGE, option_flag
from ..table.parameters import DataTypeParameter, FloatParameter, IntegerParameter, ScalarUnionParameter
from ..table.schema import DIMS_1_TO_8, DIMS_4, EXACT, Operator, rows
from ..table.shaped import RuleViolation, ShapeQuery

_DIMS_2_TO_4 = (2, 3, 4)


# ---------------------------------------------------------------- CAST

_CAST_1_0 = (FLOAT32, FLOAT16, INT16, INT8, UINT16, UINT8)  # (sic: no INT32/UINT32 at 1_0 on the page)


def _cast_row(level_name, dims, types):
    return (level_name, dims, {"InputTensor": types, "OutputTensor": types})


_CAST_ROWS = rows(
    _cast_row("4_1", DIMS_1_TO_8, ALL11),
    _cast_row("3_1", DIMS_1_TO_8, TYPES_10),
    _cast_row("3_0", DIMS_4, TYPES_10),
    _cast_row("1_0", DIMS_4, _CAST_1_0),
)


def same_sizes_shape(query: ShapeQuery) -> dict:
    """CAST: "InputTensor and OutputTensor must have the same DimensionCount and Sizes"."""
    return {"OutputTensor": query.shape("InputTensor")}


def cast_values(xp, x, target: np.dtype):
    """x converted to `target` by CAST's rules (the entry's notes)."""
    target = np.dtype(target)
    if x.dtype.kind == "f" and target.kind in "iu":
        return float_to_integer(xp, x, target)
    if x.dtype.kind == "f" and target.kind == "f" and x.dtype != target:
        return float_to_float(xp, x, target)
    # int -> int wraps (two's complement), int -> float rounds to nearest even (overflow to inf), a type to
    # itself copies: the C conversions NumPy's astype makes, which the tests check against Python's arithmetic.
    return x.astype(target)


def quiet_nan_bits(dtype: np.dtype, negative: bool) -> int:
    """The bits of a type's quiet NaN with no payload: FLOAT16 0x7E00, FLOAT32 0x7FC00000, FLOAT64
    0x7FF8000000000000, with the sign bit where `negative`."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    mantissa = np.finfo(dtype).nmant
    bits = ((1 << (width - 1 - mantissa)) - 1) << mantissa | 1 << (mantissa - 1)
    return bits | (1 << (width - 1) if negative else 0)


def float_to_float(xp, x, target: np.dtype):
    """Between two float types: rounded to nearest even (astype); a NaN becomes the target's quiet NaN with
    the input's sign and no payload (hardware keeps different payload bits; this way both backends agree)."""
    loops = compiled_loops.active() if xp is np else None
    if loops is not None:  # one pass that applies the rule itself (DMLCLI_COMPILED_LOOPS): FLOAT32 <-> FLOAT64
        converted = loops.convert_float(x, target, quiet_nan_bits(target, False), quiet_nan_bits(target, True))
        if converted is not None:
            return converted
    bits = _bits_dtype(target)
    positive, negative = (bits.type(quiet_nan_bits(target, sign)) for sign in (False, True))

    def with_quiet_nans(block):
        found = block.astype(target)
        nan = xp.where(xp.signbit(block), negative, positive)
        return xp.where(xp.isnan(block), nan, found.view(bits)).view(target)

    # A NaN stays a NaN through astype, so either side's minimum finds one: the narrower side's, which has less
    # to read (FLOAT64 -> FLOAT32: the output), except FLOAT16, whose reductions NumPy runs element by element.
    narrower_is_output = target.itemsize < x.dtype.itemsize and target != np.float16 or x.dtype == np.float16

    def settled(block, converted) -> bool:
        if not math.isnan(float(np.minimum.reduce(converted if narrower_is_output else block))):
            return True
        nan = np.isnan(block)  # astype kept the NaNs' payloads: the rule's quiet NaNs there
        converted.view(bits)[nan] = np.where(np.signbit(block[nan]), negative, positive)
        return True

    return blockwise(xp, x, target, settled, with_quiet_nans)


def cast_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    return (cast_values(xp, x, out.data_type.numpy_dtype),)


def cast_gpu_kernel(cp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    target = np.dtype(out.data_type.numpy_dtype)
    result = cp.empty(x.shape, target)
    if x.size:
        vector = cast_vector(x.dtype, target) if x.data.ptr % 16 == 0 else 1  # a view may start anywhere
        launch(cp, cast_source(x.dtype, target, vector), x.view(_bits_dtype(x.dtype)),
               result.view(_bits_dtype(target)))
    return (result,)


CAST = Operator(
    name="CAST", enum_value=61, family="conversion", prefix="",
    summary="converts each element to the output's data type",
    formula="OutputTensor[i] = (OutputTensor.DataType) InputTensor[i]",
    introduced=_CAST_ROWS[-1].level, inputs=("InputTensor",), support=_CAST_ROWS, same_data_type=(),
    same_sizes=(), cpu_kernel=None, cuda_body="", default_output_type=FLOAT32,
    shape_rule=same_sizes_shape, array_kernel=cast_kernel, gpu_array_kernel=cast_gpu_kernel, exactness=EXACT,
    notes=(
        "OutputTensor has InputTensor's Sizes (the page: same DimensionCount and Sizes). "
        "The output type is chosen with --output-dtype (default FLOAT32): any type of the level's row to any "
        "type of it, the same type included (a copy). The page says nothing of how values convert; dmlcli "
        "takes one rule per kind of pair, after what a DirectML developer wrote of DirectML's own scalar casts "
        "(\"for integers means truncating toward zero and for floating point values rounding to nearest "
        "even\", MicrosoftDocs/sdk-api PR 1134) and Direct3D's conversion rules:",
        "float -> integer: toward zero; values past the type's range saturate to its limits (+inf to the "
        "largest, -inf to the lowest, -1.5 to UINT8 is 0); NaN gives 0 (Direct3D's float-to-integer "
        "conversion, as POW's integer results). DirectML hardware is reported to differ here (WebNN issue 489: "
        "-1.0 to UINT8 gave 255 on one CPU path and 0 on a GPU): results for out-of-range values may differ on "
        "Windows.",
        "integer -> integer: modulo 2^width (two's complement): 300 to UINT8 is 44, -1 to UINT32 is 4294967295, "
        "UINT32 4294967295 to INT32 is -1.",
        "integer -> float and float -> narrower float (FLOAT64 -> FLOAT32 or FLOAT16, FLOAT32 -> FLOAT16): "
        "rounded once to nearest even; past the largest finite value, infinity (INT32 65520 -> FLOAT16 inf, "
        "UINT64 2^64-1 -> FLOAT32 2^64); subnormals are kept. float -> wider float is exact. Between two float "
        "types a NaN becomes the target's quiet NaN with the input's sign and no payload (FLOAT16 0x7E00, "
        "FLOAT32 0x7FC00000, FLOAT64 0x7FF8000000000000, sign bit set for a negative NaN): hardware keeps "
        "different payload bits, so dmlcli promises one pattern.",
        "Results are bit-identical on the CPU and the GPU (the GPU's kernel makes each conversion explicit "
        "in PTX: CuPy's own astype flushes FLOAT32 subnormals and leaves out-of-range casts undefined).",
    ),
)


# ---------------------------------------------------------------- shared by the generators


def output_sizes_given(query: ShapeQuery, op_name: str,
                       why: str = "has no input to take them from") -> tuple[int, ...]:
    """The Sizes a generator's caller gave for OutputTensor (DirectML takes them from the output's desc); `why`
    says why no input gives them."""
    given = query.given_outputs.get("OutputTensor")
    if given is None:
        raise RuleViolation(f"OutputTensor Sizes are not given; {op_name} {why}, so give "
                            f"them with {option_flag('output_shape')} (output_shape= in the API, the OutputTensor's "
                            "Sizes in a DxDispatch model)")
    return tuple(int(size) for size in given)


def _bits_dtype(dtype) -> np.dtype:
    """The unsigned integer type of the same width (what exact kernels move)."""
    return np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")


def _as_bits(value, dtype) -> np.generic:
    """A scalar of `dtype` as the unsigned integer of its bits (NaN payloads and -0.0 kept)."""
    return np.asarray(value, dtype=dtype).view(_bits_dtype(dtype))[()]


VALUE_DATA_TYPE = DataTypeParameter(
    field="ValueDataType", tensor="OutputTensor",
    help="the data type of the value fields, which must be OutputTensor's (left out: OutputTensor's)")


# ---------------------------------------------------------------- FILL_VALUE_CONSTANT

_FILL_CONSTANT_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"OutputTensor": ALL11}),
    ("4_0", DIMS_1_TO_8, {"OutputTensor": TYPES_8}),
    ("2_1", DIMS_4, {"OutputTensor": TYPES_8}),
)


def fill_constant_shape(query: ShapeQuery) -> dict:
    return {"OutputTensor": output_sizes_given(query, "FILL_VALUE_CONSTANT")}


def fill_constant_kernel(xp, inputs, outputs, params):
    (out,) = outputs
    dtype = np.dtype(out.data_type.numpy_dtype)
    bits = _bits_dtype(dtype)
    # Filled as bits, so that every value (a NaN's payload, -0.0) arrives exactly.
    return (xp.full(out.shape, _as_bits(params["Value"], dtype), dtype=bits).view(dtype),)


FILL_VALUE_CONSTANT = Operator(
    name="FILL_VALUE_CONSTANT", enum_value=103, family="generation", prefix="",
    summary="fills the output with a constant Value",
    formula="OutputTensor[coordinate] = Value for every coordinate",
    introduced=_FILL_CONSTANT_ROWS[-1].level, inputs=(), support=_FILL_CONSTANT_ROWS, same_data_type=(),
    same_sizes=(), cpu_kernel=None, cuda_body="", default_output_type=FLOAT32,
    parameters=(VALUE_DATA_TYPE,
                ScalarUnionParameter(field="Value", tensor="OutputTensor", default_limit="zero",
                                     help="the value, in OutputTensor's data type (read exactly)")),
    shape_rule=fill_constant_shape, array_kernel=fill_constant_kernel, exactness=EXACT,
    notes=(
        "No input tensor: OutputTensor's Sizes are given with --output-shape (output_shape= in the API; a "
        "DxDispatch model's OutputTensor), its type with --output-dtype (default FLOAT32).",
        "Value is read exactly in OutputTensor's type (a decimal rounded once to FLOAT16/FLOAT32); left out, "
        "it is 0 (DirectML's desc needs it). In a DxDispatch model it may name a union member, "
        "{\"Float32\": 13} or {\"Bytes\": [0, 60]}; the union has no FLOAT16 member, so a FLOAT16 value is "
        "its bits in UInt16 or Bytes. Every bit of the value is written (NaN payloads, -0.0).",
    ),
)


# ---------------------------------------------------------------- FILL_VALUE_SEQUENCE

_SEQUENCE_ROWS = rows(
    ("5_0", DIMS_1_TO_8, {"OutputTensor": TYPES_10}),
    ("4_0", DIMS_1_TO_8, {"OutputTensor": TYPES_8}),
    ("2_1", DIMS_4, {"OutputTensor": TYPES_8}),
)


class WrappingDeltaParameter(ScalarUnionParameter):
    """ValueDelta: a negative step for an unsigned type is taken modulo 2^width (its two's complement bits).

    The page's second example fills UINT8 from 10 with ValueDelta -2 ([10, 8, 6, 4]): in C that is the
    union's UInt8 = (UINT8)-2 = 254, and 10 + 254 wraps to 8. So `--value-delta -2` with a UINT8 output is
    read as 254 (a DxDispatch model may write {"Int8": -2} or 254 for the same bits).
    """

    def parse(self, given, data_types):
        data_type = data_types[self.tensor]
        dtype = data_type.numpy_dtype
        value = given.get(self.options[0])
        number = _negative_integer(value)
        if number is None or dtype.kind != "u":
            return super().parse(given, data_types)
        width = dtype.itemsize * 8
        if number < -(2 ** (width - 1)):
            raise InputError(f"{self.field} ({option_flag(self.options[0])}) = {number} is out of range for "
                             f"{data_type.name} (0 to {2**width - 1}, or a negative step from {-(2 ** (width - 1))} "
                             f"to -1, taken modulo 2^{width})")
        return dtype.type(number + 2**width)


def _negative_integer(value) -> int | None:
    """`value` as a negative whole number, if it is one (a number or text such as "-2"); None otherwise."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return int(value) if int(value) < 0 else None
    text = str(value).strip()
    if text.startswith("-") and is_digits(text[1:]) and len(text) <= 40:
        return int(text)
    return None


def fill_sequence_shape(query: ShapeQuery) -> dict:
    return {"OutputTensor": output_sizes_given(query, "FILL_VALUE_SEQUENCE")}


def _integer_sequence(count: int, start: int, delta: int, dtype: np.dtype) -> np.ndarray:
    """start + i*delta modulo 2^width for i in 0..count-1 (NumPy)."""
    width = dtype.itemsize * 8
    info = np.iinfo(dtype)
    # The step as the signed number with the same bits (UINT8 254 is -2), so that a sequence that stays inside
    # the type is one np.arange, the library's own loop.
    step = delta - 2**width if dtype.kind == "u" and delta >= 2 ** (width - 1) else delta
    last = start + (count - 1) * step
    if step != 0 and info.min <= last <= info.max:
        found = np.arange(start, last + (1 if step > 0 else -1), step, dtype=dtype)
        if found.size == count:
            return found
    # Else by doubling, in the unsigned type of the same width (its arithmetic is modulo 2^width):
    # value[n + j] = value[j] + n*delta for the n values already written.
    bits = _bits_dtype(dtype)
    out = np.empty(count, bits)
    out[0] = start % 2**width
    written = 1
    with np.errstate(all="ignore"):
        while written < count:
            more = min(written, count - written)
            np.add(out[:more], bits.type(written * delta % 2**width), out=out[written:written + more])
            written += more
    return out.view(dtype)


_SEQUENCE_BLOCK = 1 << 16  # float32 elements per step on the CPU: each block stays in the cache
_EXACT_FLOAT32_INDEX = 2**24  # every index below is a FLOAT32 exactly


def _float_sequence(count: int, start: np.float32, delta: np.float32, dtype: np.dtype) -> np.ndarray:
    """fl32(start + fl32(fl32(i) * delta)) for i in 0..count-1, rounded once more to FLOAT16 where asked (NumPy)."""
    out = np.empty(count, dtype)
    offsets = np.arange(min(count, _SEQUENCE_BLOCK), dtype=np.float32)  # 0, 1, ...: exact
    scratch = out if dtype == np.float32 else np.empty(min(count, _SEQUENCE_BLOCK), np.float32)
    for first in range(0, count, _SEQUENCE_BLOCK):
        last = min(count, first + _SEQUENCE_BLOCK)
        index = scratch[first:last] if scratch is out else scratch[:last - first]
        if last <= _EXACT_FLOAT32_INDEX:
            np.add(offsets[:last - first], np.float32(first), out=index)  # exact: integers below 2^24
        else:  # i rounded to FLOAT32, to nearest even
            index[...] = np.arange(first, last, dtype=np.float64)
        np.multiply(index, delta, out=index)
        np.add(index, start, out=index)
        if scratch is not out:
            out[first:last] = index
    if not (math.isfinite(start) and math.isfinite(delta)):  # only then can a NaN come out (0 * inf, inf - inf)
        out.view(_bits_dtype(dtype))[np.isnan(out)] = quiet_nan_bits(dtype, negative=False)
    return out


def fill_sequence_kernel(xp, inputs, outputs, params):
    (out,) = outputs
    dtype = np.dtype(out.data_type.numpy_dtype)
    count = math.prod(out.shape)
    if dtype.kind == "f":
        start, delta = np.float32(params["ValueStart"]), np.float32(params["ValueDelta"])  # FLOAT16: exact
        flat = _float_sequence(count, start, delta, dtype)
    else:
        flat = _integer_sequence(count, int(params["ValueStart"]), int(params["ValueDelta"]), dtype)
    return (xp.asarray(flat).reshape(out.shape),)


def fill_sequence_gpu_kernel(cp, inputs, outputs, params):
    (out,) = outputs
    dtype = np.dtype(out.data_type.numpy_dtype)
    result = cp.empty(out.shape, dtype)
    if dtype.kind == "f":
        start, delta = np.float32(params["ValueStart"]), np.float32(params["ValueDelta"])
    else:  # the bits of start and delta, as unsigned 64-bit numbers: the kernel wraps modulo 2^64
        start, delta = (np.uint64(int(params[name]) % 2**64) for name in ("ValueStart", "ValueDelta"))
    launch(cp, sequence_source(dtype), start, delta, result.view(_bits_dtype(dtype)))
    return (result,)


FILL_VALUE_SEQUENCE = Operator(
    name="FILL_VALUE_SEQUENCE", enum_value=104, family="generation", prefix="",
    summary="fills the output with ValueStart, ValueStart + ValueDelta, ... in row-major order",
    formula="OutputTensor[i] = ValueStart + i * ValueDelta, i counting the output's elements in row-major order",
    introduced=_SEQUENCE_ROWS[-1].level, inputs=(), support=_SEQUENCE_ROWS, same_data_type=(), same_sizes=(),
    cpu_kernel=None, cuda_body="", default_output_type=FLOAT32,
    parameters=(VALUE_DATA_TYPE,
                ScalarUnionParameter(field="ValueStart", tensor="OutputTensor", default_limit="zero",
                                     help="the first value, in OutputTensor's data type"),
                WrappingDeltaParameter(field="ValueDelta", tensor="OutputTensor", default_limit="one",
                                       help="the step, in OutputTensor's data type (negative for an unsigned "
                                            "type: taken modulo 2^width)")),
    shape_rule=fill_sequence_shape, array_kernel=fill_sequence_kernel, gpu_array_kernel=fill_sequence_gpu_kernel,
    exactness=EXACT,
    notes=(
        "No input tensor: OutputTensor's Sizes come from --output-shape (output_shape= in the API; a DxDispatch "
        "model's OutputTensor), its type from --output-dtype (default FLOAT32). ValueStart defaults to 0 and "
        "ValueDelta to 1 (DirectML's desc needs both).",
        "Each element is computed from its index, value[i] = ValueStart + i*ValueDelta in the output's type, as "
        "ONNX's Range defines it (the page's pseudo-code adds ValueDelta again and again, which rounds "
        "differently for floats; its examples agree with both).",
        "Integers: modulo 2^width (two's complement). The page's UINT8 example (10, -2 -> [10, 8, 6, 4]) only "
        "works so: a negative --value-delta for an unsigned type is read as its two's complement (UINT8 -2 is "
        "254) and 10 + 254 wraps to 8. A sequence that runs past the type's range wraps too.",
        "FLOAT32: fl(ValueStart + fl(fl(i) * ValueDelta)), each step rounded to nearest even, no fused "
        "multiply-add, subnormals kept (i rounded to FLOAT32 past 2^24). FLOAT16: the same in FLOAT32 from the "
        "exactly widened ValueStart and ValueDelta, rounded once to FLOAT16. So element 0 is ValueStart + "
        "0*ValueDelta: ValueStart, except that -0.0 becomes +0.0 and an infinite or NaN ValueDelta gives NaN.",
    ),
)


# ---------------------------------------------------------------- DIAGONAL_MATRIX and DIAGONAL_MATRIX1

_DIAGONAL_ROWS = rows(
    ("5_1", _DIMS_2_TO_4, {"OutputTensor": ALL11}),
    ("4_0", _DIMS_2_TO_4, {"OutputTensor": TYPES_8}),
    ("2_1", DIMS_4, {"OutputTensor": TYPES_8}),
    ("2_0", DIMS_4, {"OutputTensor": (FLOAT32, FLOAT16)}),
)
_DIAGONAL1_ROWS = rows(
    ("5_1", {"InputTensor": (_DIMS_2_TO_4, ALL11), "OutputTensor": (_DIMS_2_TO_4, ALL11)}),
)


def diagonal_shape(query: ShapeQuery) -> dict:
    return {"OutputTensor": output_sizes_given(query, "DIAGONAL_MATRIX")}


def diagonal1_shape(query: ShapeQuery) -> dict:
    """DIAGONAL_MATRIX1: the input's Sizes where there is one (the pseudo-code reads InputTensor[coordinate]
    for every output coordinate), else the Sizes the caller gives."""
    if "InputTensor" in query.shapes:
        return {"OutputTensor": query.shape("InputTensor")}
    return {"OutputTensor": output_sizes_given(query, "DIAGONAL_MATRIX1")}


def _columns_from(xp, shape, shift: int):
    """x >= y + shift for each element (y, x) of the last two axes (row y, column x), a (height, width) boolean:
    compared by broadcasting a row of columns against a column of rows, so no plane of offsets is made (an INT64
    plane took twice a FLOAT32 output's memory)."""
    height, width = shape[-2], shape[-1]
    return xp.arange(width, dtype=xp.int64)[None, :] >= xp.arange(height, dtype=xp.int64)[:, None] + shift


def diagonal_value(value: np.float32, dtype: np.dtype):
    """DIAGONAL_MATRIX's FLOAT Value in the output's type, by CAST's rules (integers toward zero, saturating,
    NaN -> 0; FLOAT16 rounded to nearest even; FLOAT64 exact)."""
    return cast_values(np, np.asarray([value], np.float32), dtype)[0]


def diagonal_kernel(xp, inputs, outputs, params):
    """Zeros, then Value's bits written on the diagonal x = y + Offset of every matrix: the output's memory and a
    row of indices, nothing of the output's size besides."""
    (out,) = outputs
    dtype = np.dtype(out.data_type.numpy_dtype)
    bits = _bits_dtype(dtype)
    result = xp.zeros(out.shape, dtype=bits)
    offset = params["Offset"]
    height, width = out.shape[-2], out.shape[-1]
    rows = xp.arange(max(0, -offset), max(0, min(height, width - offset)), dtype=xp.int64)
    result[..., rows, rows + offset] = bits.type(_as_bits(diagonal_value(params["Value"], dtype), dtype))
    return (result.view(dtype),)


def diagonal1_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    dtype = np.dtype(out.data_type.numpy_dtype)
    begin, end = params["DiagonalFillBegin"], params["DiagonalFillEnd"]
    # The page's pseudo-code, with top_x = x - y: an inverted range (begin > end) fills everything outside [end,
    # begin). top_x >= begin is x >= y + begin; top_x < end is the negation of x >= y + end.
    use_value = _columns_from(xp, out.shape, begin) ^ ~_columns_from(xp, out.shape, end) ^ (end >= begin)
    bits = _bits_dtype(dtype)
    value_bits = bits.type(_as_bits(params["Value"], dtype))
    if x is None:  # no InputTensor (Sizes from the desc): zeros elsewhere, the mask written into them in place
        result = xp.zeros(out.shape, dtype=bits)
        result[..., use_value] = value_bits
        return (result.view(dtype),)
    return (xp.where(use_value, value_bits, x.view(bits)).view(dtype),)


DIAGONAL_MATRIX = Operator(
    name="DIAGONAL_MATRIX", enum_value=93, family="generation", prefix="",
    summary="fills the output with Value on a diagonal shifted by Offset and 0 elsewhere, for each matrix of "
            "the last two axes",
    formula="OutputTensor[..., y, x] = Value if x == y + Offset else 0",
    introduced=_DIAGONAL_ROWS[-1].level, inputs=(), support=_DIAGONAL_ROWS, same_data_type=(), same_sizes=(),
    cpu_kernel=None, cuda_body="", default_output_type=FLOAT32,
    parameters=(IntegerParameter(field="Offset", default_value=0, minimum=INT32_RANGE[0], maximum=INT32_RANGE[1],
                                 help="shifts the diagonal: positive to the right (x = y + Offset), negative to "
                                      "the left"),
                FloatParameter(field="Value", default_value=1.0, help="the FLOAT value written on the diagonal")),
    shape_rule=diagonal_shape, array_kernel=diagonal_kernel, exactness=EXACT,
    notes=(
        "No input tensor: OutputTensor's Sizes come from --output-shape (output_shape= in the API; a DxDispatch "
        "model's OutputTensor), its type from --output-dtype (default FLOAT32). The last two axes are the "
        "matrix (height, width: they need not be square); the axes before them count matrices.",
        "Value is a FLOAT (float32). For other output types it is converted by CAST's rules: FLOAT16 rounded "
        "to nearest even, FLOAT64 exact, integers toward zero as the page says (10.6 becomes 10), saturating "
        "past the type's range and NaN -> 0 (the page is silent there; Direct3D's rule, as CAST).",
    ),
)

DIAGONAL_MATRIX1 = Operator(
    name="DIAGONAL_MATRIX1", enum_value=163, family="generation", prefix="",
    summary="fills diagonals DiagonalFillBegin to DiagonalFillEnd - 1 with Value and the rest with InputTensor "
            "(or 0), for each matrix of the last two axes",
    formula="OutputTensor[..., y, x] = Value if ((End >= Begin) ^ (x - y >= Begin) ^ (x - y < End)) else "
            "(InputTensor[..., y, x] or 0)",
    introduced=_DIAGONAL1_ROWS[-1].level, inputs=("InputTensor",), support=_DIAGONAL1_ROWS,
    same_data_type=("InputTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    default_output_type=FLOAT32, optional_inputs=(("InputTensor", "OutputTensor"),), optional_since=level("5_1"),
    parameters=(VALUE_DATA_TYPE,
                ScalarUnionParameter(field="Value", tensor="OutputTensor", default_limit="one",
                                     help="the value written on the filled diagonals, in OutputTensor's data type"),
                IntegerParameter(field="DiagonalFillBegin", default_value=0, minimum=INT32_RANGE[0],
                                 maximum=INT32_RANGE[1], help="the first diagonal filled (x - y, inclusive)"),
                IntegerParameter(field="DiagonalFillEnd", default_value=1, minimum=INT32_RANGE[0],
                                 maximum=INT32_RANGE[1], help="the diagonal after the last one filled (exclusive); "
                                                              "below DiagonalFillBegin the fill is inverted")),
    shape_rule=diagonal1_shape, array_kernel=diagonal1_kernel, native_encoding=True, exactness=EXACT,
    notes=(
        "InputTensor is optional: given, OutputTensor has its Sizes and data type, and its elements off the "
        "filled diagonals are copied bit for bit; left out, they are 0 and OutputTensor's Sizes come from "
        "--output-shape (output_shape= in the API; a DxDispatch model's OutputTensor), its type from "
        "--output-dtype (default FLOAT32).",
        "Value is read exactly in OutputTensor's type; left out, it is 1 and the fill range [0, 1), so that the "
        "defaults give the identity matrix (DirectML's desc needs every field). The page's first example shows "
        "1s for Value 7 (a page error: its pseudo-code, which dmlcli follows, writes 7).",
        "An inverted range (DiagonalFillBegin > DiagonalFillEnd) fills every diagonal outside [End, Begin), "
        "by the page's pseudo-code; Begin == End fills nothing. DIAGONAL_MATRIX's Offset k is Begin k, End k + 1.",
    ),
)

OPERATORS_CONVERSION = (CAST,)
OPERATORS_GENERATION = (FILL_VALUE_CONSTANT, FILL_VALUE_SEQUENCE, DIAGONAL_MATRIX, DIAGONAL_MATRIX1)
OPERATORS = OPERATORS_CONVERSION + OPERATORS_GENERATION


# ---------------------------------------------------------------- CUDA kernels (compiled by CuPy on first use)

_CUDA_HELPERS = r"""
__device__ __forceinline__ unsigned short dml_cast_to_half(double d) {
    unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d));
    return h;
}
// Direct3D's float-to-integer conversion: toward zero, saturating, NaN -> 0. `low` and `above` are the
// type's lowest value and the first value past its largest, both exact as doubles.
template <typename T>
__device__ __forceinline__ T dml_cast_saturate(double d, double low, double above, T lowest, T highest) {
    const double whole = trunc(d);
    if (whole >= above) return highest;
    if (whole < low) return lowest;
    if (whole != whole) return (T)0;
    return (T)whole;
}
"""



def _load_source(dtype: np.dtype) -> str:
    """C++ for the value of input bits `x`: a double for the float types (exact), the integer itself else."""
    if dtype.name == "float16":
        return "dml_widen(dml_half_to_float(x))"
    if dtype.name == "float32":
        return "dml_widen(__uint_as_float(x))"
    if dtype.name == "float64":
        return "__longlong_as_double((long long)x)"
    return f"(({C_INTEGER_TYPES[dtype.name]})x)"


def _store_source(source: np.dtype, target: np.dtype) -> str:
    """C++ for the output bits of `v` (a double for a float source, an integer otherwise)."""
    bits = C_WORD_TYPES[target.itemsize * 8]
    from_float = source.kind == "f"
    if target.name == "float64":
        return "(unsigned long long)__double_as_longlong((double)v)"
    if target.name == "float32":
        # A double narrows in PTX (no flush to zero); an integer converts once, rounding to nearest even.
        return "__float_as_uint(dml_narrow(v))" if from_float else "__float_as_uint((float)v)"
    if target.name == "float16":
        # From a double once to FLOAT16; an integer is exact as a double wherever FLOAT16 does not overflow.
        return "dml_cast_to_half((double)v)"
    value = C_INTEGER_TYPES[target.name]
    if from_float:
        info = np.iinfo(target)
        low, above = integer_bounds(target)
        lowest = f"(({value})(-{info.max}ll - 1))" if target.kind == "i" else "0"  # a literal INT64_MIN overflows
        return f"({bits})dml_cast_saturate<{value}>(v, {low!r}, {above!r}, {lowest}, ({value}){info.max}ull)"
    return f"({bits})({value})v"  # integer to integer: modulo 2^width


def _prelude() -> str:
    from ..numerics.cuda_prelude import DEVICE_PRELUDE

    return DEVICE_PRELUDE + _CUDA_HELPERS


def _kernel_source(parameters: str, output_bits: str, body: str) -> str:
    """One CUDA kernel, dml_kernel(parameters..., output bits* ys, n): `body` sets `y` for element `i`."""
    return (_prelude() + f'\nextern "C" __global__ void dml_kernel({parameters}{output_bits}* ys, long long n) {{\n'
            "    const long long stride = (long long)gridDim.x * blockDim.x;\n"
            "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {\n"
            f"        {output_bits} &y = ys[i];\n        {body}\n    }}\n}}\n")


def cast_vector(source: np.dtype, target: np.dtype) -> int:
    """Elements a thread of CAST's kernel converts at once: 16 bytes of the narrower type, at most 32 of the wider
    (a FLOAT32 -> FLOAT16 thread loads a float4 and stores 8 bytes; one element a thread stored 2 bytes at a time)."""
    sizes = (np.dtype(source).itemsize, np.dtype(target).itemsize)
    return max(1, min(16 // min(sizes), 32 // max(sizes)))


def cast_source(source: np.dtype, target: np.dtype, vector: int = 1) -> str:
    """CAST's kernel for one pair: the input's bits in (xs), the output's bits out; `vector` elements a thread from
    a vector load into a vector store (both arrays on 16-byte boundaries), the tail past the last whole vector one
    element at a time."""
    source, target = np.dtype(source), np.dtype(target)
    bits_in, bits_out = C_WORD_TYPES[source.itemsize * 8], C_WORD_TYPES[target.itemsize * 8]
    operation = _cast_operation(source, target)
    if vector == 1:
        return _kernel_source(f"const {bits_in}* xs, ", bits_out, f"const {bits_in} x = xs[i]; {operation}")
    align_in, align_out = (min(16, vector * size) for size in (source.itemsize, target.itemsize))
    return (_prelude() + f"""
struct __align__({align_in}) dml_in {{ {bits_in} v[{vector}]; }};
struct __align__({align_out}) dml_out {{ {bits_out} v[{vector}]; }};
extern "C" __global__ void dml_kernel(const dml_in* xv, dml_out* yv, long long n) {{
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long vectors = n / {vector};
    for (long long i = first; i < vectors; i += stride) {{
        const dml_in a = xv[i];
        dml_out b;
        #pragma unroll
        for (int j = 0; j < {vector}; ++j) {{
            const {bits_in} x = a.v[j];
            {bits_out} &y = b.v[j];
            {operation}
        }}
        yv[i] = b;
    }}
    const {bits_in}* xs = (const {bits_in}*)xv;
    {bits_out}* ys = ({bits_out}*)yv;
    for (long long i = vectors * {vector} + first; i < n; i += stride) {{
        const {bits_in} x = xs[i];
        {bits_out} &y = ys[i];
        {operation}
    }}
}}
""")


def _cast_operation(source: np.dtype, target: np.dtype) -> str:
    """One element of CAST in C++: `x` the input's bits, `y` the output's."""
    if source == target:
        return "y = x;"  # a copy, every bit kept
    value_type = "double" if source.kind == "f" else C_INTEGER_TYPES[source.name]
    operation = f"const {value_type} v = {_load_source(source)}; "
    if source.kind == "f" and target.kind == "f":  # a NaN: the target's quiet NaN with the input's sign
        bits = C_WORD_TYPES[target.itemsize * 8]
        negative, positive = (quiet_nan_bits(target, sign) for sign in (True, False))
        sign = f"(x >> {source.itemsize * 8 - 1})"
        return operation + (f"y = (v != v) ? ({sign} ? ({bits}){negative}ull : ({bits}){positive}ull) "
                            f": {_store_source(source, target)};")
    return operation + f"y = {_store_source(source, target)};"


def sequence_source(dtype: np.dtype) -> str:
    """FILL_VALUE_SEQUENCE's kernel for one type: (start, delta) as float or as the bits of 64-bit integers."""
    dtype = np.dtype(dtype)
    bits = C_WORD_TYPES[dtype.itemsize * 8]
    if dtype.kind == "f":
        # fl(start + fl(fl(i) * delta)) in PTX (round to nearest even, no flush to zero, no contraction); a NaN
        # (told by its bits, whatever the compiler makes of r != r) is the positive quiet NaN.
        body = ("const float r = dml_add(start, dml_mul((float)(unsigned long long)i, delta)); "
                f"y = (__float_as_uint(r) & 0x7fffffffu) > 0x7f800000u ? ({bits}){quiet_nan_bits(dtype, False)}u "
                f": ({bits}){'__float_as_uint(r)' if dtype.name == 'float32' else 'dml_float_to_half(r)'};")
        return _kernel_source("const float start, const float delta, ", bits, body)
    body = f"y = ({bits})(start + (unsigned long long)i * delta);"  # modulo 2^64, then 2^width
    return _kernel_source("const unsigned long long start, const unsigned long long delta, ", bits, body)


