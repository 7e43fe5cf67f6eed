"""RANDOM_GENERATOR (family "generation"): Philox 4x32-10 random bits, bit for bit as DirectML lays them out.

Sources: DirectML's page for DML_RANDOM_GENERATOR_OPERATOR_DESC (MicrosoftDocs/sdk-api,
ns-directml-dml_random_generator_operator_desc.md, stored version 2db4b020): the state's layout (elements 0 to 3 a
128-bit counter, 4 and 5 the 64-bit key), the counter's advance (ceil(outputSize / 4) per execution), the support
table and the constraints; DirectML.h (DML_OPERATOR_RANDOM_GENERATOR = 132, DML_RANDOM_GENERATOR_TYPE_PHILOX_4X32_10
= 0). The generator is Salmon, Moraes, Dror and Shaw's Philox 4x32-10 ("Parallel random numbers: as easy as 1, 2,
3", SC11, the paper the page links), as Random123 implements it: its known-answer vectors (Random123's
examples/kat_vectors, the three "philox4x32 10" lines) are checked in tests/test_ops_random.py.

Where the page is silent, Microsoft's own TensorFlow-DirectML fills in (microsoft/tensorflow-directml,
tensorflow/core/kernels/dml_random_ops.cc): it copies TensorFlow's PhiloxRandom counter words 0 to 3 and key words
0 and 1 into state elements 0 to 5 as they are, and reads the output's 32-bit values in order, four per counter
value, where TensorFlow's CPU kernels take Philox's four results of one counter, then the counter plus one (word 0
the least significant, as Random123's and TensorFlow's counters carry). So element 0 is the counter's low word, and
OutputTensor's element i (row-major) is word i mod 4 of Philox4x32-10(counter + floor(i / 4), key).

The kernel is written once for NumPy and CuPy: 32-bit words held in UINT64 arrays, each 32 x 32-bit product taken
whole in 64 bits and split into its high and low words, so both give the same bits.
"""

from __future__ import annotations

import numpy as np

from ...data_types import UINT32
from ..table.parameters import EnumParameter
from ..table.schema import DIMS_4, EXACT, Operator, rows
from ..table.shaped import RuleViolation, ShapeQuery, asks_for_output, describe_sizes
from .entries import output_sizes_given

# Philox 4x32's multipliers and Weyl key increments (Salmon et al. 2011, Random123's philox.h).
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10
WORD = 0xFFFFFFFF
STATE_SIZES = (1, 1, 1, 6)  # the page: "must be of type UINT32, and have sizes {1,1,1,6}"
OUTPUTS_PER_COUNTER = 4


def round_keys(key0: int, key1: int) -> list[tuple[int, int]]:
    """The key of each of the ten rounds: the first is the key itself, each next one adds (W0, W1) modulo 2^32."""
    keys = [(key0 & WORD, key1 & WORD)]
    for _ in range(ROUNDS - 1):
        k0, k1 = keys[-1]
        keys.append(((k0 + PHILOX_W0) & WORD, (k1 + PHILOX_W1) & WORD))
    return keys


def _mulhilo(xp, multiplier: int, words):
    """(high, low) 32-bit words of multiplier * words: the whole 64-bit product, then split."""
    product = xp.uint64(multiplier) * words
    return product >> xp.uint64(32), product & xp.uint64(WORD)


def philox4x32_10(xp, counter: tuple, key: tuple[int, int]) -> tuple:
    """Philox 4x32-10 of each counter (four arrays of 32-bit words in UINT64, word 0 first) under one key:
    the four 32-bit result words, as UINT64 arrays. Random123's philox4x32round, ten times, the key bumped
    before each round after the first."""
    c0, c1, c2, c3 = counter
    for k0, k1 in round_keys(*key):
        hi0, lo0 = _mulhilo(xp, PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(xp, PHILOX_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ xp.uint64(k0), lo1, hi0 ^ c3 ^ xp.uint64(k1), lo0
    return c0, c1, c2, c3


def counters_from(xp, start: tuple[int, int, int, int], count: int) -> tuple:
    """The 128-bit counters start, start + 1, ..., start + count - 1 (modulo 2^128), as four word arrays, word 0
    the least significant: each word is the start's word plus the carry from below."""
    offsets = xp.arange(count, dtype=xp.uint64)  # count <= 2^30: each word's sum fits 64 bits
    words, carry = [], offsets
    for word in start:
        total = xp.uint64(word) + carry
        words.append(total & xp.uint64(WORD))
        carry = total >> xp.uint64(32)
    return tuple(words)


def advanced(start: tuple[int, int, int, int], steps: int) -> tuple[int, int, int, int]:
    """The counter `steps` later, modulo 2^128, word 0 the least significant."""
    value = sum(word << (32 * index) for index, word in enumerate(start)) + steps
    value %= 1 << 128
    return tuple((value >> (32 * index)) & WORD for index in range(4))


def random_bits(xp, state: tuple[int, ...], count: int):
    """`count` random UINT32 values from a state (counter words 0-3, key words 4-5): four per counter value."""
    blocks = -(-count // OUTPUTS_PER_COUNTER)
    results = philox4x32_10(xp, counters_from(xp, state[:4], blocks), state[4:6])
    # (blocks, 4) in row-major order: result word j of counter + k is output element 4k + j.
    interleaved = xp.stack(results, axis=1).reshape(-1)[:count]
    return interleaved.astype(xp.uint32)


def random_generator_shape(query: ShapeQuery) -> dict:
    state = query.shape("InputStateTensor")
    if tuple(state) != STATE_SIZES:
        raise RuleViolation(f"InputStateTensor Sizes {describe_sizes(state)} are not Philox 4x32-10's state "
                            f"{describe_sizes(STATE_SIZES)} (four counter words and two key words)")
    # OutputStateTensor has the state's Sizes (the page's constraint); Sizes a desc states for it are checked
    # against these by validation.
    sizes = output_sizes_given(query, "RANDOM_GENERATOR", "fills an output of any Sizes")
    return {"OutputTensor": sizes, "OutputStateTensor": state}


def random_generator_kernel(xp, inputs, outputs, params):
    """OutputTensor, and OutputStateTensor where the call asks for it (_Maybenull_)."""
    (state_tensor,) = inputs
    out = outputs[0]  # OutputTensor: never left out
    # Six words: read once to the host (a GPU array too), where the counters' start and the round keys are made.
    host = state_tensor.get() if hasattr(state_tensor, "get") else state_tensor
    state = tuple(int(word) for word in np.asarray(host).reshape(-1))
    count = int(np.prod(out.shape))
    values = random_bits(xp, state, count).reshape(out.shape)
    if not asks_for_output(outputs, "OutputStateTensor"):
        return (values,)
    next_counter = advanced(state[:4], -(-count // OUTPUTS_PER_COUNTER))
    return values, xp.asarray(np.array(next_counter + state[4:6], np.uint32).reshape(outputs[1].shape))


_ROWS = rows(("3_0", DIMS_4, {"InputStateTensor": (UINT32,), "OutputTensor": (UINT32,),
                              "OutputStateTensor": (UINT32,)}))

GENERATOR_TYPE = EnumParameter(
    field="Type", enum_prefix="DML_RANDOM_GENERATOR_TYPE_", values=(("PHILOX_4X32_10", 0),),
    default_value="PHILOX_4X32_10",
    help="the generator: PHILOX_4X32_10 (the only DML_RANDOM_GENERATOR_TYPE)")

RANDOM_GENERATOR = Operator(
    name="RANDOM_GENERATOR", enum_value=132, family="generation", prefix="",
    summary="fills the output with Philox 4x32-10 random bits from a counter and key, and gives the advanced state",
    formula="OutputTensor[i] = Philox4x32-10(counter + floor(i / 4), key)[i mod 4]; OutputStateTensor = "
            "{counter + ceil(outputSize / 4), key}",
    introduced=_ROWS[-1].level, inputs=("InputStateTensor",), support=_ROWS,
    same_data_type=("InputStateTensor", "OutputTensor", "OutputStateTensor"), same_sizes=(),
    cpu_kernel=None, cuda_body="", extra_outputs=("OutputStateTensor",), optional_outputs=("OutputStateTensor",),
    parameters=(GENERATOR_TYPE,), shape_rule=random_generator_shape, array_kernel=random_generator_kernel,
    exactness=EXACT,
    notes=(
        "InputStateTensor is UINT32 {1, 1, 1, 6}: elements 0 to 3 a 128-bit counter, element 0 its least "
        "significant 32 bits (the page draws the words in order but does not say which is low; Random123, "
        "TensorFlow and Microsoft's TensorFlow-DirectML, which copies TensorFlow's Philox counter into the state "
        "word for word, carry from word 0 up); elements 4 and 5 the key (Random123's key words 0 and 1).",
        "OutputTensor (UINT32, 4 dimensions, any Sizes: --output-shape, output_shape=, a DxDispatch desc's "
        "OutputTensor) holds the random bits in row-major order: element i is result word i mod 4 of "
        "Philox4x32-10(counter + floor(i / 4), key), the counter added to modulo 2^128 (TensorFlow-DirectML's "
        "uniform distributions read them so, as TensorFlow's CPU kernels read Philox's results).",
        "OutputStateTensor (_Maybenull_: outputs=(\"OutputTensor\",), --outputs OutputTensor or a DxDispatch desc "
        "without it leave it out; by default it is returned) is the counter advanced by ceil(outputSize / 4), as "
        "the page says, modulo 2^128, and the key unchanged. The page's example adds 324,855 to 0x...'74746c65 and "
        "prints 0x...'746f776e (its four words spell \"HelloFromSeatown\"): the sum is 0x...'7479615c, which dmlcli "
        "gives.",
        "Philox 4x32-10 is Random123's philox4x32_R(10, ctr, key): ten rounds of ((hi(M0*c0), lo(M0*c0)), "
        "(hi(M1*c2), lo(M1*c2))) mixing, M0 = 0xD2511F53, M1 = 0xCD9E8D57, the key bumped by (0x9E3779B9, "
        "0xBB67AE85) before each round after the first; it reproduces Random123's known-answer vectors.",
        "Exact: integer arithmetic only, the same bits on the CPU and the GPU. The support table is the page's "
        "(3_0, 4 dimensions, UINT32); DirectML's feature-level history lists RANDOM_GENERATOR among 4_0's "
        "\"extended data type and dimension count support\" but no stored version of its page has a 4_0 row, so "
        "dmlcli keeps the 3_0 row at every level.",
    ),
)

OPERATORS_RANDOM = (RANDOM_GENERATOR,)
OPERATORS = OPERATORS_RANDOM
