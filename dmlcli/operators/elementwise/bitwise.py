"""BIT_AND, BIT_OR, BIT_XOR, BIT_NOT, BIT_COUNT, BIT_SHIFT_LEFT, BIT_SHIFT_RIGHT: entries and kernels.

Sources: ../shared/reference/directml_ops.md and the pages in ../shared/seeds (the newer English
page wins where two disagree).
"""

from __future__ import annotations

import numpy as np

from ...data_types import ALL11, UINT8, UINT32_OR_UINT8, UNSIGNED_32_16_8, UNSIGNED_64_32_16_8, as_bits
from ...feature_levels import level
from ..table.hooks import ShiftCountCheck
from ..table.schema import DIMS_1_TO_8, DIMS_4, Operator, rows

AB = ("ATensor", "BTensor")
ABO = ("ATensor", "BTensor", "OutputTensor")
XO = ("InputTensor", "OutputTensor")

_NATIVE = "The operation is applied to the data in its native encoding: floats as their bit patterns, signed integers as two's complement."
_SHIFT_NOTE = (
    "DirectML's pages do not say what a shift count at or past the element width gives. dmlcli gives 0, "
    "as NumPy, PyTorch and CuPy do, and warns on stderr with the number of such counts: DirectML "
    "hardware is reported to mask them (count mod width), so such a result may differ on Windows."
)


def _same(types, *tensors):
    return {name: types for name in tensors}


_BITWISE_BINARY = rows(("4_1", DIMS_1_TO_8, _same(ALL11, *ABO)), ("3_0", DIMS_1_TO_8, _same(UNSIGNED_32_16_8, *ABO)))
_BITWISE_UNARY = rows(("4_1", DIMS_1_TO_8, _same(ALL11, *XO)), ("3_0", DIMS_1_TO_8, _same(UNSIGNED_32_16_8, *XO)))
_BIT_COUNT = rows(
    ("4_1", DIMS_1_TO_8, {"InputTensor": ALL11, "OutputTensor": UINT32_OR_UINT8}),
    ("3_0", DIMS_1_TO_8, {"InputTensor": UNSIGNED_32_16_8, "OutputTensor": UINT32_OR_UINT8}),
)
_SHIFTS = rows(
    ("4_1", DIMS_1_TO_8, _same(UNSIGNED_64_32_16_8, *ABO)),
    ("3_0", DIMS_1_TO_8, _same(UNSIGNED_32_16_8, *ABO)),
    ("2_1", DIMS_4, _same(UNSIGNED_32_16_8, *ABO)),
)


# ---------------------------------------------------------------- NumPy kernels


def bit_and(inputs, out_dtype, params):
    a, b = inputs
    return np.bitwise_and(as_bits(a), as_bits(b)).view(out_dtype)


def bit_or(inputs, out_dtype, params):
    a, b = inputs
    return np.bitwise_or(as_bits(a), as_bits(b)).view(out_dtype)


def bit_xor(inputs, out_dtype, params):
    a, b = inputs
    return np.bitwise_xor(as_bits(a), as_bits(b)).view(out_dtype)


def bit_not(inputs, out_dtype, params):
    (x,) = inputs
    return np.invert(as_bits(x)).view(out_dtype)


def bit_count(inputs, out_dtype, params):
    # np.bitwise_count counts |x| for signed types, so count the unsigned view instead.
    (x,) = inputs
    return np.bitwise_count(as_bits(x)).astype(out_dtype, copy=False)


def _shift(shift, a, b):
    # Counts at or past the element width give 0 (dmlcli's documented choice; DirectML does not
    # say). NumPy's shift ufuncs define exactly that for unsigned types (numpy PR #13739: npy_lshift
    # and npy_rshift), in one pass; tests/test_core_semantics.py pins it for every width.
    return shift(a, b.astype(a.dtype, copy=False))


def bit_shift_left(inputs, out_dtype, params):
    a, b = inputs
    return _shift(np.left_shift, a, b).astype(out_dtype, copy=False)


def bit_shift_right(inputs, out_dtype, params):
    a, b = inputs
    return _shift(np.right_shift, a, b).astype(out_dtype, copy=False)


# ---------------------------------------------------------------- CUDA on four bytes at once
#
# The vector kernels' bodies for 1-byte tensors (Operator.cuda_byte_lanes_body): four elements in a 32-bit word. One
# element at a time, unpacking and repacking the bytes took 9 to 10 instructions an element (SASS on sm_90), which
# held BIT_COUNT and BIT_SHIFT_LEFT on uint8 to 0.76-0.85 of the H200's copy (issue 33).

# Each byte's own population count, in its byte (the first three steps of the classic SWAR count): three shifts,
# three masks, two adds and a subtraction for four elements, where __popc is a quarter-rate instruction an element.
_BIT_COUNT_LANES = r"""
__device__ __forceinline__ unsigned int dml_bit_count_lanes(unsigned int x) {
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    return (x + (x >> 4)) & 0x0f0f0f0fu;
}
"""


def _shift_lanes(word: str, instruction: str) -> str:
    """Each byte of a shifted in place by the count in the same byte of b: a count of 8 or more moves every bit out
    of the byte's lane (PTX's shl and shr take counts past 32 as 32, where C++'s shift would be undefined), so it
    gives 0, as the element body's `b < W` test does."""
    return rf"""
__device__ __forceinline__ unsigned int dml_bit_shift_{word}_lanes(unsigned int a, unsigned int b) {{
    unsigned int r = 0u;
#pragma unroll
    for (int k = 0; k < 32; k += 8) {{
        const unsigned int lane = 0xffu << k;
        unsigned int moved;
        asm("{instruction}.b32 %0, %1, %2;" : "=r"(moved) : "r"(a & lane), "r"((b >> k) & 0xffu));
        r |= moved & lane;
    }}
    return r;
}}
"""


# ---------------------------------------------------------------- entries


def _bitwise_binary(name: str, enum_value: int, symbol: str, word: str, kernel) -> Operator:
    return Operator(
        name=name, enum_value=enum_value, family="bitwise",
        summary=f"Bitwise {word} of each pair of corresponding elements of ATensor and BTensor.",
        formula=f"f(a, b) = a {symbol} b   (on the bit patterns)",
        introduced=level("3_0"), inputs=AB, support=_BITWISE_BINARY,
        same_data_type=ABO, same_sizes=ABO, cpu_kernel=kernel, cuda_body=f"a {symbol} b",
        native_encoding=True, in_place=True, notes=(_NATIVE,),
    )


def _shift_entry(name: str, enum_value: int, symbol: str, word: str, kernel) -> Operator:
    return Operator(
        name=name, enum_value=enum_value, family="bitwise",
        summary=f"Logical {word} shift of each element of ATensor by the count in the matching element of BTensor.",
        formula=f"f(a, b) = (a {symbol} b)   (0 when b >= the element width)",
        introduced=level("2_1"), inputs=AB, support=_SHIFTS, same_data_type=ABO, same_sizes=ABO,
        cpu_kernel=kernel, cuda_body=f"b < W ? (a {symbol} b) : 0", native_encoding=True, in_place=True,
        cuda_helpers=_shift_lanes(word, "shl" if symbol == "<<" else "shr"),
        cuda_byte_lanes_body=f"dml_bit_shift_{word}_lanes(a, b)",
        hooks=(ShiftCountCheck("BTensor"),), notes=(_SHIFT_NOTE,),
    )


OPERATORS: tuple[Operator, ...] = (
    _bitwise_binary("BIT_AND", 121, "&", "AND", bit_and),
    _bitwise_binary("BIT_OR", 122, "|", "OR", bit_or),
    _bitwise_binary("BIT_XOR", 123, "^", "XOR (exclusive or)", bit_xor),
    Operator(
        name="BIT_NOT", enum_value=124, family="bitwise",
        summary="Bitwise NOT (one's complement) of each element.",
        formula="f(x) = ~x   (on the bit pattern)", introduced=level("3_0"), inputs=("InputTensor",),
        support=_BITWISE_UNARY, same_data_type=XO, same_sizes=XO, cpu_kernel=bit_not, cuda_body="~x",
        native_encoding=True, in_place=True, notes=(_NATIVE,),
    ),
    Operator(
        name="BIT_COUNT", enum_value=125, family="bitwise",
        summary="Population count: the number of bits set to 1 in each element's bit pattern.",
        formula="f(x) = popcount(x)   (two's complement for signed types: INT8 -1 gives 8)",
        introduced=level("3_0"), inputs=("InputTensor",), support=_BIT_COUNT, same_data_type=(), same_sizes=XO,
        cpu_kernel=bit_count, cuda_body="W == 64 ? __popcll(x) : __popc(x)", cuda_helpers=_BIT_COUNT_LANES,
        cuda_byte_lanes_body="dml_bit_count_lanes(x)",
        default_output_type=UINT8, native_encoding=True, notes=(_NATIVE,),
    ),
    _shift_entry("BIT_SHIFT_LEFT", 97, "<<", "left", bit_shift_left),
    _shift_entry("BIT_SHIFT_RIGHT", 98, ">>", "right", bit_shift_right),
)
