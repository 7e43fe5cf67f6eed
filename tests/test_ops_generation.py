"""CAST, FILL_VALUE_CONSTANT, FILL_VALUE_SEQUENCE, DIAGONAL_MATRIX, DIAGONAL_MATRIX1.

Every expected value comes from a reference written here on Python integers and floats (struct for the
FLOAT16/FLOAT32/FLOAT64 encodings, exact integer rounding for integer -> float), never from dmlcli's kernels
or NumPy's astype. All five operators are exact, so results are compared bit for bit (NaN included: dmlcli
promises one NaN pattern). The support tables are transcribed a second time below and checked against what
validation accepts at every feature level.
"""

from __future__ import annotations

import json
import math
import platform
import struct

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli import api, engine
from dmlcli.api import plan
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.errors import InputError

from conftest import SHARED, SHARED_MISSING

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL = "float64 float32 float16 int64 int32 int16 int8 uint64 uint32 uint16 uint8".split()
T8 = ["float32", "float16", "int32", "int16", "int8", "uint32", "uint16", "uint8"]
T10 = T8 + ["int64", "uint64"]
CAST_1_0 = ["float32", "float16", "int16", "int8", "uint16", "uint8"]
ANY = tuple(range(1, 9))
D234 = (2, 3, 4)

# ---------------------------------------------------------------- the support tables, transcribed again
# operator: [(level, dimension counts, types of every tensor)], oldest first
TABLES = {
    "CAST": [("1_0", (4,), CAST_1_0), ("3_0", (4,), T10), ("3_1", ANY, T10), ("4_1", ANY, ALL)],
    "FILL_VALUE_CONSTANT": [("2_1", (4,), T8), ("4_0", ANY, T8), ("4_1", ANY, ALL)],
    "FILL_VALUE_SEQUENCE": [("2_1", (4,), T8), ("4_0", ANY, T8), ("5_0", ANY, T10)],
    "DIAGONAL_MATRIX": [("2_0", (4,), ["float32", "float16"]), ("2_1", (4,), T8), ("4_0", D234, T8),
                        ("5_1", D234, ALL)],
    "DIAGONAL_MATRIX1": [("5_1", D234, ALL)],
}
ENUMS = {"CAST": 61, "FILL_VALUE_CONSTANT": 103, "FILL_VALUE_SEQUENCE": 104, "DIAGONAL_MATRIX": 93,
         "DIAGONAL_MATRIX1": 163}
OPTIONS = {"CAST": [], "FILL_VALUE_CONSTANT": ["value_data_type", "value"],
           "FILL_VALUE_SEQUENCE": ["value_data_type", "value_start", "value_delta"],
           "DIAGONAL_MATRIX": ["offset", "value"],
           "DIAGONAL_MATRIX1": ["value_data_type", "value", "diagonal_fill_begin", "diagonal_fill_end"]}


def accepts(op, level, types, rank) -> bool:
    found = [row for row in TABLES[op] if LEVELS.index(row[0]) <= LEVELS.index(level)]
    if not found:
        return False
    _, dims, allowed = found[-1]
    return all(t in allowed for t in types) and rank in dims


def plan_call(op, level, in_type, out_type, rank):
    shape = (2,) * rank
    inputs = [] if in_type is None else [(parse_data_type(in_type), shape)]
    return plan(op, inputs, feature_level=level, output_dtype=out_type,
                **({"output_shape": shape} if in_type is None else {}))


def check_grid(op, cases):
    failures = []
    for level in LEVELS:
        for in_type, out_type, rank in cases:
            types = [t for t in (in_type, out_type) if t is not None]
            want = accepts(op, level, types, rank)
            try:
                verdict = plan_call(op, level, in_type, out_type, rank)
                got = True
            except dmlcli.ValidationError as error:
                got = False
                lowest = next((lv for lv in LEVELS if accepts(op, lv, types, rank)), None)
                expected_tail = (f"supported from DML_FEATURE_LEVEL_{lowest}" if lowest
                                 else "no feature level accepts this call")
                if not want and expected_tail not in str(error):
                    failures.append(f"{op} {level} {types} {rank}: message {error}")
            if got != want:
                failures.append(f"{op} {level} {types} rank {rank}: accepted={got}, expected {want}")
            elif got:
                lowest = next(lv for lv in LEVELS if accepts(op, lv, types, rank))
                if verdict.lowest_feature_level.short != lowest:
                    failures.append(f"{op} {level} {types} {rank}: lowest {verdict.lowest_feature_level}")
    assert not failures, "\n".join(failures[:20])


def test_cast_support_grid():
    check_grid("CAST", [(a, b, rank) for a in ALL for b in ALL for rank in (1, 4)])


@pytest.mark.parametrize("op", ["FILL_VALUE_CONSTANT", "FILL_VALUE_SEQUENCE", "DIAGONAL_MATRIX"])
def test_generator_support_grid(op):
    check_grid(op, [(None, t, rank) for t in ALL for rank in (1, 2, 3, 4, 5)])


def test_diagonal_matrix1_support_grid():
    check_grid("DIAGONAL_MATRIX1", [(t, t, rank) for t in ALL for rank in (1, 2, 4, 5)]
               + [(None, t, rank) for t in ALL for rank in (2, 5)])


def test_entries():
    for name, enum in ENUMS.items():
        op = dmlcli.find_operator(name)
        assert op.enum_value == enum
        assert op.dml_name == f"DML_OPERATOR_{name}"
        assert op.family == ("conversion" if name == "CAST" else "generation")
        assert op.exactness == "exact" and op.tolerance is None
        assert list(op.options) == OPTIONS[name]
        assert op.introduced.short == TABLES[name][0][0]
        assert op.notes
    assert dmlcli.find_operator("fill_value_constant").inputs == ()
    assert dmlcli.find_operator("diagonal_matrix1").required_inputs == ()


# ---------------------------------------------------------------- the reference: Python numbers and struct

FORMATS = {"float16": "<e", "float32": "<f", "float64": "<d"}
MANTISSA = {"float16": 11, "float32": 24, "float64": 53}
FLOAT16_MAX = 65504.0


def width(dtype: str) -> int:
    return np.dtype(dtype).itemsize * 8


def int_range(dtype: str) -> tuple[int, int]:
    w = width(dtype)
    return (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if dtype.startswith("int") else (0, 2**w - 1)


def value_of(bits: int, dtype: str):
    """The Python number a type's bits stand for."""
    w = width(dtype)
    if dtype in FORMATS:
        return struct.unpack(FORMATS[dtype], bits.to_bytes(w // 8, "little"))[0]
    return bits - 2**w if dtype.startswith("int") and bits >= 2 ** (w - 1) else bits


def bits_of_float(value: float, dtype: str) -> int:
    """A Python float rounded to nearest even into a float type (overflow to inf), as its bits."""
    try:
        packed = struct.pack(FORMATS[dtype], value)
    except OverflowError:  # struct refuses what rounds past the largest finite value
        packed = struct.pack(FORMATS[dtype], math.copysign(math.inf, value))
    return int.from_bytes(packed, "little")


def quiet_nan(dtype: str, negative: bool) -> int:
    w, m = width(dtype), MANTISSA[dtype] - 1
    return (((1 << (w - 1 - m)) - 1) << m) | (1 << (m - 1)) | ((1 << (w - 1)) if negative else 0)


def round_integer(value: int, digits: int) -> int:
    """An integer rounded to nearest even at `digits` significant bits, exactly."""
    magnitude = abs(value)
    length = magnitude.bit_length()
    if length <= digits:
        return value
    shift = length - digits
    kept, rest = divmod(magnitude, 1 << shift)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and kept & 1):
        kept += 1
    return (kept << shift) * (1 if value > 0 else -1)


def ref_cast(bits: int, source: str, target: str) -> int:
    """CAST of one element, bits in, bits out, by the rules the entry's notes promise."""
    value = value_of(bits, source)
    if source == target:
        return bits
    if target not in FORMATS:
        low, high = int_range(target)
        if isinstance(value, float):
            if math.isnan(value):
                number = 0
            elif math.isinf(value):
                number = high if value > 0 else low
            else:
                number = min(max(math.trunc(value), low), high)
        else:
            number = value
        return number % 2 ** width(target)
    if isinstance(value, float):
        if math.isnan(value):
            return quiet_nan(target, math.copysign(1.0, value) < 0)
        return bits_of_float(value, target)
    rounded = round_integer(value, MANTISSA[target])
    if target == "float16" and abs(rounded) > FLOAT16_MAX:
        return bits_of_float(math.copysign(math.inf, rounded), target)
    return bits_of_float(float(rounded), target)


def as_bits(array: np.ndarray) -> list[int]:
    return [int(b) for b in array.reshape(-1).view(f"uint{array.dtype.itemsize * 8}")]


def from_bits(bits: list[int], dtype: str) -> np.ndarray:
    return np.array(bits, dtype=f"uint{width(dtype)}").view(dtype)


def test_reference_itself():
    """A few conversions worked out by hand, so that the reference is not trusted blindly."""
    f32 = lambda v: bits_of_float(v, "float32")  # noqa: E731
    assert ref_cast(f32(-1.5), "float32", "uint8") == 0
    assert ref_cast(f32(300.0), "float32", "uint8") == 255
    assert ref_cast(f32(-2.9), "float32", "int8") == 256 - 2
    assert ref_cast(f32(float("nan")), "float32", "int32") == 0
    assert ref_cast(f32(float("-inf")), "float32", "int64") == 2**63
    assert ref_cast(300, "int32", "uint8") == 44
    assert ref_cast(2**32 - 1, "uint32", "int32") == 2**32 - 1
    assert ref_cast(65520, "int32", "float16") == 0x7C00
    assert ref_cast(65519, "int32", "float16") == 0x7BFF
    assert ref_cast(2**24 + 1, "int32", "float32") == f32(2.0**24)
    assert ref_cast(2**24 + 3, "int32", "float32") == f32(2.0**24 + 4)
    assert ref_cast(2**64 - 1, "uint64", "float32") == f32(2.0**64)
    assert ref_cast(2**53 + 1, "int64", "float64") == bits_of_float(2.0**53, "float64")
    assert ref_cast(bits_of_float(1 + 2**-11, "float64"), "float64", "float16") == 0x3C00  # a tie, to even
    assert ref_cast(bits_of_float(2.0**-25, "float64"), "float64", "float16") == 0  # half the least subnormal
    assert ref_cast(bits_of_float(-(2.0**-149), "float32"), "float32", "float16") == 0x8000
    assert ref_cast(0xFFC00001, "float32", "float16") == 0xFE00


# ---------------------------------------------------------------- CAST against the reference


def special_values(dtype: str) -> np.ndarray:
    """Zeros, limits, NaNs, infinities, subnormals, rounding ties and the values just past every range."""
    if dtype in FORMATS:
        numbers = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.9999, -0.9999, 1.5, -1.5, 2.5, -2.5, 10.6, -10.6,
                   math.inf, -math.inf, 65504.0, 65519.99, 65520.0, -65520.0, 1 + 2.0**-11, 1 + 3 * 2.0**-11,
                   2.0**-24, 2.0**-25, 3 * 2.0**-25, 2.0**-14, 2.0**-126, 2.0**-149, -(2.0**-149),
                   2.0**24 + 1, 3.4028234663852886e38, 3.4028235677973366e38, 1e300, -1e300, 5e-324]
        for target in ALL:
            if target not in FORMATS:
                low, high = int_range(target)
                numbers += [low, high, low - 1, high + 1, low - 0.5, high + 0.5, low - 1.5, high + 0.75,
                            float(high) * 2, float(low) * 2 - 1]
        with np.errstate(all="ignore"):
            values = np.array(numbers, np.float64).astype(dtype)
        nans = {"float16": [0x7E00, 0xFE00, 0x7C01, 0x7FFF], "float32": [0x7FC00000, 0xFFC00000, 0x7F800001,
                                                                             0x7FC12345],
                "float64": [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF8123456789ABC]}[dtype]
        return np.concatenate([values, from_bits(nans, dtype)])
    low, high = int_range(dtype)
    candidates = [0, 1, -1, 2, -2, 44, 127, 128, -128, -129, 255, 256, 300, -300, 32767, 32768, -32769, 65535,
                  65519, 65520, 65536, 2**24 + 1, 2**24 + 3, 2**31 - 1, 2**31, -(2**31) - 1, 2**32 - 1, 2**32,
                  2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 2**63 + 2**40 + 1, low, high, low + 1, high - 1]
    return np.array([v for v in candidates if low <= v <= high], dtype)


CAST_PAIRS = [(a, b) for a in ALL for b in ALL]


def check_cast(x: np.ndarray, target: str, **options) -> None:
    got = api.run("cast", x, output_dtype=target, **options)
    assert got.dtype == np.dtype(target) and got.shape == x.shape
    source = x.dtype.name
    want = [ref_cast(b, source, target) for b in as_bits(x)]
    found = as_bits(got)
    wrong = [(value_of(b, source), hex(f), hex(w)) for b, f, w in zip(as_bits(x), found, want) if f != w]
    assert not wrong, f"{source} -> {target}: (input, got, expected) {wrong[:8]}"


@pytest.mark.parametrize("source", ALL)
def test_cast_special_values_every_pair(source):
    x = special_values(source)
    for target in ALL:
        check_cast(x, target)


def bit_patterns(dtype: str):
    return st.integers(0, 2 ** width(dtype) - 1)


@SETTINGS
@given(st.sampled_from(CAST_PAIRS), st.data())
def test_cast_random_bits(pair, data):
    source, target = pair
    specials = as_bits(special_values(source))
    bits = data.draw(st.lists(st.one_of(bit_patterns(source), st.sampled_from(specials)), min_size=1, max_size=40))
    rank = data.draw(st.integers(1, 3))
    x = from_bits(bits, source)
    x = x.reshape((len(bits),) + (1,) * (rank - 1))
    check_cast(x, target)


@pytest.mark.parametrize("source,target", [("float32", "int32"), ("float64", "uint8"), ("float16", "int64"),
                                           ("float64", "float16"), ("float32", "float64")])
def test_cast_blocks_of_a_large_tensor(source, target):
    """Tensors past one block of 2^18 elements: blocks wholly inside the range keep astype's result, the others
    take the rule. Drawn from a pool of values, so that the reference runs once per distinct value."""
    rng = np.random.default_rng(7)
    pool = (rng.random(400) * 200 - 50).astype(source)
    x = pool[rng.integers(0, pool.size, 2 * 2**18 + 11)]
    x[300000] = np.nan  # the second block needs the rule
    x[-1] = -np.inf  # and the last
    x[140000] = 1e4 if source == "float16" else 1e30  # and the first
    got = as_bits(api.run("cast", x, output_dtype=target))
    distinct = {bits: ref_cast(bits, source, target) for bits in set(as_bits(x))}
    assert got == [distinct[bits] for bits in as_bits(x)]


def old_formulation(x: np.ndarray, target: str) -> np.ndarray:
    """CAST as the kernel computed it before its blocks were mended in place (issue 23): the whole rule on the
    whole array, written out here (FLOAT16 widened first; trunc, saturate, NaN -> 0; quiet NaNs by sign)."""
    target = np.dtype(target)
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f" and target.kind in "iu":
            values = x.astype(np.float32) if x.dtype == np.float16 else x
            width = target.itemsize * 8
            low, above = (-(2.0 ** (width - 1)), 2.0 ** (width - 1)) if target.kind == "i" else (0.0, 2.0**width)
            whole = np.trunc(values)
            result = np.where((whole >= low) & (whole < above), whole, 0).astype(target)
            result = np.where(whole >= above, target.type(np.iinfo(target).max), result)
            return np.where(whole < low, target.type(np.iinfo(target).min), result)
        if x.dtype.kind == "f" and target.kind == "f" and x.dtype != target:
            bits = np.dtype(f"uint{target.itemsize * 8}")
            quiet = [bits.type(ref_cast(as_bits(np.array([np.copysign(np.nan, sign)], x.dtype))[0], x.dtype.name,
                                        target.name)) for sign in (1.0, -1.0)]
            nan = np.where(np.signbit(x), quiet[1], quiet[0])
            return np.where(np.isnan(x), nan, x.astype(target).view(bits)).view(target)
        return x.astype(target)


FLOAT_SOURCE_PAIRS = [(a, b) for a in ("float64", "float32", "float16") for b in ALL if b != a]


def block_values(source: str, target: str):
    """One block's values: inside the target's range (astype's result stands), or mixed with NaNs (payloads
    and signs), infinities and values past the range, or inside but for a NaN."""
    specials = st.sampled_from(as_bits(special_values(source)))
    if target in FORMATS:
        inside = st.floats(-60000, 60000)
    else:
        low, high = int_range(target)
        limit = 60000 if source == "float16" else 2.0**60
        inside = st.floats(max(low - 0.99, -limit), min(high + 0.99, limit))
    # Rounded to the source type (mostly still inside; a value rounded past the range is a fine case too).
    inside_bits = inside.map(lambda v: as_bits(np.array([v]).astype(source))[0])
    nan_bits = st.sampled_from(as_bits(special_values(source))[-4:])  # the four NaN patterns
    return st.one_of(st.lists(inside_bits, min_size=8, max_size=8),
                     st.lists(st.one_of(inside_bits, specials), min_size=8, max_size=8),
                     st.lists(inside_bits, min_size=7, max_size=7).flatmap(
                         lambda rest: nan_bits.map(lambda nan: rest + [nan])))


@pytest.mark.parametrize("trust_marks", [True, False], ids=["marks-as-probed", "marks-not-trusted"])
@SETTINGS
@given(st.sampled_from(FLOAT_SOURCE_PAIRS), st.data())
def test_cast_blocks_match_the_old_formulation(trust_marks, pair, data):
    """The blocked kernel (astype, then each block's check: the output's minimum where the cast marks what it
    gets wrong, else the input's extremes; NaNs mended in place, the rule only where a value is past the range)
    gives the whole-array rule's bits for every float source, with blocks of 8 elements and a last block of
    any length; with the probe's answer and with the marks not trusted (the input's extremes everywhere); marked
    places mended alone or the whole block taking the rule."""
    from dmlcli.operators.numerics import conversions
    from dmlcli.operators.generation.entries import cast_values

    source, target = pair
    blocks = data.draw(st.lists(block_values(source, target), min_size=2, max_size=6))
    bits = [bits for block in blocks for bits in block]
    x = from_bits(bits[:len(bits) - data.draw(st.integers(0, 7))], source)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conversions, "_BLOCK_ELEMENTS", 8)
        # Marked places mended alone (every block, up to half of it, never), or the whole block by the rule.
        patch.setattr(conversions, "_FEW_MARKS", data.draw(st.sampled_from([1, 2, 10**6])))
        if not trust_marks:
            patch.setattr(conversions, "astype_marks_misfits", lambda source, target: False)
        got = cast_values(np, x, np.dtype(target))
    assert as_bits(got) == as_bits(old_formulation(x, target))
    assert as_bits(got) == [ref_cast(bits, source, target) for bits in as_bits(x)]


def test_the_mark_probe_tells_casts_apart():
    """x86's float -> INT32/INT64 conversions give the type's lowest value for every NaN and every value past
    the range (the mark that lets CAST check its output once instead of the input twice); the narrower and
    unsigned targets wrap and are refused. The probe itself accepts the rule and refuses a cast that wraps
    or that saturates +inf to 0."""
    from dmlcli.operators.numerics import conversions

    if platform.machine().lower() in ("x86_64", "amd64"):
        for source in ("float32", "float64"):
            for target in ("int32", "int64"):
                assert conversions.astype_marks_misfits(np.dtype(source), np.dtype(target)), (source, target)
    for source in ("float32", "float64"):
        for target in ("int8", "uint8", "int16", "uint16", "uint32"):
            assert not conversions.astype_marks_misfits(np.dtype(source), np.dtype(target)), (source, target)

    def rule(out, values):
        out[...] = conversions._saturate_by_clipping(values, out.dtype)

    def wrapping(out, values):  # through INT64, then modulo 2^32: -2^31 - 256 gives 2^31 - 256
        out[...] = conversions._saturate_by_clipping(values, np.dtype(np.int64)).astype(out.dtype)

    def infinity_to_zero(out, values):
        rule(out, values)
        out[np.isposinf(values)] = 0

    float32, int32 = np.dtype(np.float32), np.dtype(np.int32)
    assert conversions.marks_misfits(rule, float32, int32)
    assert not conversions.marks_misfits(wrapping, float32, int32)
    assert not conversions.marks_misfits(infinity_to_zero, float32, int32)


def test_cast_large_tensor_with_marks_in_place():
    """Past one block, a block whose astype result holds the mark only because a value is the type's lowest
    (-2^31, -2^63, in range) or just below it, or holds a NaN, takes the careful path and still gives the rule."""
    for source, target in (("float32", "int32"), ("float64", "int64"), ("float16", "int32"), ("float64", "int32")):
        x = np.linspace(-1000, 1000, 3 * 2**18 + 5).astype(source)
        low = np.iinfo(target).min
        with np.errstate(over="ignore"):
            x[10] = np.array(float(low), np.float64).astype(source)  # in range: the mark is the right answer
            x[2**18 + 7] = np.array(float(low) * 2, np.float64).astype(source)  # below: saturates to low
            x[2 * 2**18 + 3] = np.nan
        got = as_bits(api.run("cast", x, output_dtype=target))
        distinct = {bits: ref_cast(bits, source, target) for bits in set(as_bits(x))}
        assert got == [distinct[bits] for bits in as_bits(x)], (source, target)


def test_cast_page_rows_and_rule_messages():
    four = np.zeros((1, 1, 2, 2), np.int32)
    with pytest.raises(dmlcli.ValidationError, match="INT32 is not supported at DML_FEATURE_LEVEL_1_0.*"
                                                     "supported from DML_FEATURE_LEVEL_3_0"):
        api.run("cast", four, output_dtype="int8", feature_level="1_0")
    with pytest.raises(dmlcli.ValidationError, match="dimension count 2 is not supported at DML_FEATURE_LEVEL_3_0"):
        api.run("cast", np.zeros((2, 2), np.float32), output_dtype="int8", feature_level="3_0")
    with pytest.raises(dmlcli.ValidationError, match=r"OutputTensor Sizes \[4\] do not match .* \[2, 2\]"):
        api.run("cast", np.zeros((2, 2), np.float32), output_dtype="int8", output_shape=(4,))
    assert api.run("cast", np.array([1.5], np.float64), output_dtype="float64").tolist() == [1.5]


# ---------------------------------------------------------------- FILL_VALUE_CONSTANT


def test_fill_constant_page_example_and_every_type():
    got = api.run("fill_value_constant", output_shape=(1, 1, 2, 4), value=13.0)
    assert got.dtype == np.float32 and got.tolist() == [[[[13.0] * 4] * 2]]
    for dtype in ALL:
        value = "-0.0" if dtype in FORMATS else str(int_range(dtype)[1])
        got = api.run("fill_value_constant", output_shape=(3, 2), output_dtype=dtype, value=value)
        expected_bits = (bits_of_float(-0.0, dtype) if dtype in FORMATS else int_range(dtype)[1] % 2 ** width(dtype))
        assert got.dtype == np.dtype(dtype) and as_bits(got) == [expected_bits] * 6
    assert api.run("fill_value_constant", output_shape=(2,), output_dtype="uint64").tolist() == [0, 0]  # default 0
    assert api.run("fill_value_constant", output_shape=(1,), output_dtype="int64",
                   value=str(-(2**63))).tolist() == [-(2**63)]  # read exactly, never through a double


def test_fill_constant_desc_union_bits_and_value_data_type():
    """A DxDispatch desc's DML_SCALAR_UNION: the bytes as they are (a FLOAT16 NaN payload kept)."""
    req = engine.request("fill_value_constant", output_shape=(2, 2), output_dtype="float16",
                         desc_fields={"ValueDataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "Value": {"Bytes": [0x01, 0x7E]}})
    got = engine.run(req, []).output
    assert as_bits(got) == [0x7E01] * 4
    req = engine.request("fill_value_constant", output_shape=(1, 3), output_dtype="uint8",
                         desc_fields={"ValueDataType": "UINT8", "Value": {"Int8": -1}})
    assert engine.run(req, []).output.tolist() == [[255, 255, 255]]
    with pytest.raises(InputError, match="ValueDataType FLOAT16 must match OutputTensor data type FLOAT32"):
        api.run("fill_value_constant", output_shape=(2,), value_data_type="float16")


def test_fill_constant_needs_output_sizes():
    with pytest.raises(dmlcli.ValidationError, match="FILL_VALUE_CONSTANT: OutputTensor Sizes are not given.*"
                                                     "--output-shape"):
        api.run("fill_value_constant", value=1)
    with pytest.raises(dmlcli.ValidationError, match=r"Sizes \[2, 0\] contain a zero"):
        api.run("fill_value_constant", output_shape=(2, 0))
    with pytest.raises(InputError, match="takes no input tensors"):
        api.run("fill_value_constant", np.zeros(2, np.float32), output_shape=(2,))


# ---------------------------------------------------------------- FILL_VALUE_SEQUENCE


def f32(value: float) -> float:
    return value_of(bits_of_float(value, "float32"), "float32")


def ref_sequence(count: int, start_bits: int, delta_bits: int, dtype: str, indices=None) -> list[int]:
    """value[i] = start + i*delta in the output's type, as the entry's notes define it, as bits (at `indices`,
    or every index below `count`)."""
    start, delta = value_of(start_bits, dtype), value_of(delta_bits, dtype)  # FLOAT16: exact as FLOAT32
    found = []
    for i in range(count) if indices is None else indices:
        if dtype not in FORMATS:
            found.append((start + i * delta) % 2 ** width(dtype))
            continue
        index = float(round_integer(i, 24))  # i as FLOAT32
        product = index * delta  # exact in a double (24 + 24 bits); 0 * inf is NaN
        product = f32(product) if math.isfinite(product) else product
        total = start + product  # rounded to double, then to FLOAT32: innocuous (53 >= 2 * 24 + 2)
        total = f32(total) if math.isfinite(total) else total
        found.append(quiet_nan(dtype, negative=False) if math.isnan(total) else bits_of_float(total, dtype))
    return found


def scalar_text(bits: int, dtype: str) -> str:
    value = value_of(bits, dtype)
    return repr(value) if isinstance(value, float) else str(value)


def run_sequence(count_shape, dtype, start_bits, delta_bits):
    """Through a DxDispatch-style desc (the union's bytes), so that any bit pattern reaches the operator."""
    member = {"float16": "UInt16", "float32": "UInt32"}.get(dtype)
    def union(bits):
        if member is not None:
            return {member: bits}
        return {"Bytes": list(bits.to_bytes(8, "little"))}
    req = engine.request("fill_value_sequence", output_shape=count_shape, output_dtype=dtype,
                         desc_fields={"ValueDataType": dtype.upper(), "ValueStart": union(start_bits),
                                      "ValueDelta": union(delta_bits)})
    return engine.run(req, []).output


def test_fill_sequence_page_examples():
    got = api.run("fill_value_sequence", output_shape=(1, 1, 1, 3), value_start=3, value_delta=2)
    assert got.dtype == np.float32 and got.tolist() == [[[[3.0, 5.0, 7.0]]]]
    got = api.run("fill_value_sequence", output_shape=(1, 1, 2, 2), output_dtype="uint8", value_start=10,
                  value_delta=-2)
    assert got.tolist() == [[[[10, 8], [6, 4]]]]
    # The desc's UInt8 254 (or Int8 -2: the same byte) gives the same.
    req = engine.request("fill_value_sequence", output_shape=(1, 1, 2, 2), output_dtype="uint8",
                         desc_fields={"ValueDataType": "UINT8", "ValueStart": 10, "ValueDelta": {"Int8": -2}})
    assert engine.run(req, []).output.tolist() == [[[[10, 8], [6, 4]]]]
    assert api.run("fill_value_sequence", output_shape=(3,), output_dtype="int32").tolist() == [0, 1, 2]


@SETTINGS
@given(st.sampled_from(T10), st.data())
def test_fill_sequence_random(dtype, data):
    count = data.draw(st.integers(1, 200))
    interesting = [0, 1, 2 ** (width(dtype) - 1), 2 ** width(dtype) - 1]
    start = data.draw(st.one_of(bit_patterns(dtype), st.sampled_from(interesting)))
    delta = data.draw(st.one_of(bit_patterns(dtype), st.sampled_from(interesting)))
    got = run_sequence((count,), dtype, start, delta)
    assert as_bits(got) == ref_sequence(count, start, delta, dtype)


@SETTINGS
@given(st.sampled_from(["float32", "float16"]), st.integers(1, 300),
       st.floats(-100, 100, width=32), st.floats(-100, 100, width=32).filter(lambda v: abs(v) > 0.01))
def test_fill_sequence_ordinary_floats(dtype, count, start, delta):
    """Steps of ordinary size, where two roundings (product, then sum) and one fused rounding differ."""
    start_bits, delta_bits = bits_of_float(start, dtype), bits_of_float(delta, dtype)
    got = run_sequence((count,), dtype, start_bits, delta_bits)
    assert as_bits(got) == ref_sequence(count, start_bits, delta_bits, dtype)


def test_fill_sequence_rounds_twice():
    """1 + fl(i * 0.1): the product is rounded to FLOAT32 before the sum (no fused multiply-add)."""
    got = api.run("fill_value_sequence", output_shape=(200,), value_start="1", value_delta="0.1")
    expected = ref_sequence(200, bits_of_float(1.0, "float32"), bits_of_float(0.1, "float32"), "float32")
    assert as_bits(got) == expected
    delta = np.float32(0.1)
    fused = [bits_of_float(f32(1.0 + i * float(delta)), "float32") for i in range(200)]
    assert fused != expected  # so the test above tells the two apart


def test_fill_sequence_wraps_and_float_edges():
    assert api.run("fill_value_sequence", output_shape=(4,), output_dtype="int8", value_start=126,
                   value_delta=1).tolist() == [126, 127, -128, -127]
    assert api.run("fill_value_sequence", output_shape=(3,), output_dtype="uint64", value_start=str(2**64 - 2),
                   value_delta=1).tolist() == [2**64 - 2, 2**64 - 1, 0]
    assert api.run("fill_value_sequence", output_shape=(3,), output_dtype="int64", value_start=str(2**63 - 1),
                   value_delta=str(2**63 - 1)).tolist() == [2**63 - 1, -2, 2**63 - 3]
    # -0.0 + 0*delta is +0.0; an infinite delta gives NaN at index 0 (0 * inf), one NaN pattern.
    got = api.run("fill_value_sequence", output_shape=(3,), value_start="-0.0", value_delta="1")
    assert as_bits(got)[0] == 0
    got = api.run("fill_value_sequence", output_shape=(2,), value_start="1", value_delta="inf")
    assert as_bits(got) == [0x7FC00000, 0x7F800000]
    # Subnormal steps are kept (no flush to zero).
    got = api.run("fill_value_sequence", output_shape=(3,), value_start="0", value_delta=str(2.0**-149))
    assert as_bits(got) == [0, 1, 2]
    # FLOAT16: computed in FLOAT32, rounded once: 2048 + 1 is not FLOAT16's, ties go to even.
    got = api.run("fill_value_sequence", output_shape=(4,), output_dtype="float16", value_start=2048, value_delta=1)
    assert got.tolist() == [2048, 2048, 2050, 2052]
    with pytest.raises(InputError, match="out of range for UINT8 .*negative step from -128 to -1"):
        api.run("fill_value_sequence", output_shape=(2,), output_dtype="uint8", value_delta=-129)


def test_fill_sequence_blocks_and_indices_past_2_24():
    """The CPU works by blocks, and rounds i to FLOAT32 past 2^24: both against the reference."""
    count = 2**24 + 6
    got = api.run("fill_value_sequence", output_shape=(count,), value_start="0.5", value_delta="3")
    indices = [0, 1, 65535, 65536, 65537, 2**20 + 3, 2**24 - 1, 2**24, 2**24 + 1, 2**24 + 3, count - 1]
    expected = ref_sequence(count, bits_of_float(0.5, "float32"), bits_of_float(3.0, "float32"), "float32", indices)
    assert as_bits(got[indices]) == expected
    assert got[2**24 + 1] == got[2**24]  # i = 2^24 + 1 is 2^24 in FLOAT32
    got = api.run("fill_value_sequence", output_shape=(2**16 + 5,), output_dtype="uint16", value_start=7,
                  value_delta=-3)
    assert as_bits(got) == ref_sequence(2**16 + 5, 7, 2**16 - 3, "uint16")


ONNX = SHARED / "onnx_operators"


def onnx_case(name: str) -> dict:
    path = ONNX / f"onnx__{name}.json"
    if not path.is_file():
        pytest.skip(SHARED_MISSING)
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", ["test_range_float_type_positive_delta", "test_range_float16_type_positive_delta"])
def test_onnx_range(name):
    """ONNX Range(start, limit, delta) is FILL_VALUE_SEQUENCE with Sizes {ceil((limit - start) / delta)}."""
    case = onnx_case(name)
    start, limit, delta = (tensor["data"] for tensor in case["inputs"])
    dtype = case["inputs"][0]["dtype"]
    count = max(0, math.ceil((limit - start) / delta))
    got = api.run("fill_value_sequence", output_shape=(count,), output_dtype=dtype, value_start=start,
                  value_delta=delta, feature_level="4_0")
    expected = case["expected"][0]
    assert got.dtype == np.dtype(expected["dtype"]) and got.tolist() == expected["data"]


# ---------------------------------------------------------------- DIAGONAL_MATRIX and DIAGONAL_MATRIX1


def ref_diagonal1(shape, dtype, value_bits, begin, end, input_bits=None) -> list[int]:
    """The page's pseudo-code, element by element in row-major order."""
    found = []
    for flat in range(math.prod(shape)):
        y, x = (flat // shape[-1]) % shape[-2], flat % shape[-1]
        top_x = x - y
        use_value = (end >= begin) ^ (top_x >= begin) ^ (top_x < end)
        found.append(value_bits if use_value else (input_bits[flat] if input_bits is not None else 0))
    return found


def test_diagonal_matrix_page_examples():
    run = lambda shape, offset: api.run("diagonal_matrix", output_shape=shape, offset=offset).tolist()  # noqa: E731
    assert run((1, 1, 3, 3), 0) == [[[[1, 0, 0], [0, 1, 0], [0, 0, 1]]]]
    assert run((1, 1, 3, 3), 1) == [[[[0, 1, 0], [0, 0, 1], [0, 0, 0]]]]
    assert run((1, 1, 3, 2), -1) == [[[[0, 0], [1, 0], [0, 1]]]]
    assert run((1, 1, 3, 2), -3) == [[[[0, 0], [0, 0], [0, 0]]]]


@SETTINGS
@given(st.sampled_from(ALL), st.lists(st.integers(1, 5), min_size=2, max_size=4), st.integers(-6, 6),
       st.sampled_from([1.0, -2.5, 10.6, -10.6, 300.0, 1e10, -1e10, math.nan, math.inf, 0.1, 1 + 2.0**-11]))
def test_diagonal_matrix_against_reference(dtype, shape, offset, value):
    got = api.run("diagonal_matrix", output_shape=shape, output_dtype=dtype, offset=offset, value=repr(value))
    value_bits = ref_cast(bits_of_float(value, "float32"), "float32", dtype)  # FLOAT Value, CAST's rules
    assert as_bits(got) == ref_diagonal1(tuple(shape), dtype, value_bits, offset, offset + 1)


def test_diagonal_matrix_value_conversions():
    run = lambda dtype, value: api.run("diagonal_matrix", output_shape=(2, 2), output_dtype=dtype,  # noqa: E731
                                       value=value)[0, 0].item()
    assert run("int32", "10.6") == 10 and run("int32", "-10.6") == -10  # the page: truncated
    assert run("uint8", "300") == 255 and run("uint8", "-3") == 0 and run("int8", "nan") == 0
    assert run("float64", "0.1") == float(np.float32(0.1))  # a FLOAT, widened exactly
    with pytest.raises(dmlcli.ValidationError, match="FLOAT64 is not supported at DML_FEATURE_LEVEL_4_0.*5_1"):
        api.run("diagonal_matrix", output_shape=(2, 2), output_dtype="float64", feature_level="4_0")


@pytest.mark.parametrize("name", ["test_eyelike_populate_off_main_diagonal", "test_eyelike_with_dtype",
                                  "test_eyelike_without_dtype"])
def test_onnx_eyelike(name):
    """ONNX EyeLike(input, k, dtype): DIAGONAL_MATRIX with the input's Sizes, Offset k, the output type (dtype
    attribute, else the input's); and DIAGONAL_MATRIX1 with Begin k, End k + 1 and no input."""
    case = onnx_case(name)
    k = case["attributes"].get("k", 0)
    shape = tuple(case["inputs"][0]["shape"])
    expected = case["expected"][0]
    got = api.run("diagonal_matrix", output_shape=shape, output_dtype=expected["dtype"], offset=k)
    assert got.dtype == np.dtype(expected["dtype"]) and got.tolist() == expected["data"]
    got = api.run("diagonal_matrix1", output_shape=shape, output_dtype=expected["dtype"], diagonal_fill_begin=k,
                  diagonal_fill_end=k + 1)
    assert got.tolist() == expected["data"]


PAGE_INPUT = [[4, 7, 3, 7, 9], [1, 2, 8, 6, 9], [9, 4, 1, 8, 7], [4, 3, 4, 2, 4]]


def test_diagonal_matrix1_page_examples():
    got = api.run("diagonal_matrix1", output_shape=(4, 5), value=7, diagonal_fill_begin=0, diagonal_fill_end=1)
    assert got.tolist() == [[7 if x == y else 0 for x in range(5)] for y in range(4)]  # example 1, corrected
    got = api.run("diagonal_matrix1", output_shape=(4, 5), value=7, diagonal_fill_begin=0, diagonal_fill_end=3)
    assert got.tolist() == [[7, 7, 7, 0, 0], [0, 7, 7, 7, 0], [0, 0, 7, 7, 7], [0, 0, 0, 7, 7]]
    page_input = np.array(PAGE_INPUT, np.float32)
    got = api.run("diagonal_matrix1", page_input, value=0, diagonal_fill_begin=-(2**31), diagonal_fill_end=1)
    assert got.tolist() == [[0, 7, 3, 7, 9], [0, 0, 8, 6, 9], [0, 0, 0, 8, 7], [0, 0, 0, 0, 4]]
    got = api.run("diagonal_matrix1", page_input, value=0, diagonal_fill_begin=1, diagonal_fill_end=0)
    assert got.tolist() == [[4, 0, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 2, 0]]
    # The defaults: the identity; Offset k of DIAGONAL_MATRIX is Begin k, End k + 1.
    assert api.run("diagonal_matrix1", output_shape=(3, 3)).tolist() == np.eye(3).tolist()
    for k in (-2, 0, 1, 4):
        assert (api.run("diagonal_matrix1", output_shape=(2, 3, 4), diagonal_fill_begin=k, diagonal_fill_end=k + 1)
                .tolist() == api.run("diagonal_matrix", output_shape=(2, 3, 4), offset=k).tolist())


@SETTINGS
@given(st.sampled_from(ALL), st.lists(st.integers(1, 5), min_size=2, max_size=4), st.integers(-7, 7),
       st.integers(-7, 7), st.booleans(), st.data())
def test_diagonal_matrix1_against_reference(dtype, shape, begin, end, with_input, data):
    count = math.prod(shape)
    value_bits = data.draw(bit_patterns(dtype))
    options = {"value": scalar_text(value_bits, dtype), "diagonal_fill_begin": begin, "diagonal_fill_end": end}
    if dtype in FORMATS and math.isnan(value_of(value_bits, dtype)):
        options["value"] = "0"
        value_bits = 0
    if with_input:
        input_bits = data.draw(st.lists(bit_patterns(dtype), min_size=count, max_size=count))
        x = from_bits(input_bits, dtype).reshape(shape)
        got = api.run("diagonal_matrix1", x, **options)
    else:
        input_bits = None
        got = api.run("diagonal_matrix1", output_shape=shape, output_dtype=dtype, **options)
    assert got.dtype == np.dtype(dtype)
    assert as_bits(got) == ref_diagonal1(tuple(shape), dtype, value_bits, begin, end, input_bits)


def test_diagonal_matrix1_rules():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(dmlcli.ValidationError, match="InputTensor data type FLOAT32 and OutputTensor data type INT32 "
                                                     "differ"):
        api.run("diagonal_matrix1", x, output_dtype="int32")
    with pytest.raises(dmlcli.ValidationError, match=r"OutputTensor Sizes \[3, 2\] do not match .* \[2, 3\]"):
        api.run("diagonal_matrix1", x, output_shape=(3, 2))
    with pytest.raises(dmlcli.ValidationError, match="DIAGONAL_MATRIX1: OutputTensor Sizes are not given"):
        api.run("diagonal_matrix1")
    with pytest.raises(dmlcli.ValidationError, match="not available at DML_FEATURE_LEVEL_5_0"):
        api.run("diagonal_matrix1", x, feature_level="5_0")
    with pytest.raises(dmlcli.ValidationError, match="dimension count 1 is not supported"):
        api.run("diagonal_matrix1", np.zeros(3, np.float32))
    # The input's bits are copied, a NaN's payload included.
    odd_nan = from_bits([0x7FC12345, 0], "float32").reshape(1, 2)
    got = api.run("diagonal_matrix1", odd_nan, diagonal_fill_begin=5, diagonal_fill_end=6)
    assert as_bits(got) == [0x7FC12345, 0]


# ---------------------------------------------------------------- the command line


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_runs_each_operator():
    result = invoke("run", "cast", '[1.5, -2.5, "nan", 300]', "--dtype", "float32", "--output-dtype", "uint8",
                    "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"] == [1, 0, 0, 255]
    result = invoke("run", "fill_value_constant", "--output-shape", "1,1,2,4", "--value", "13", "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"dtype": "float32", "shape": [1, 1, 2, 4], "data": [[[[13.0] * 4] * 2]]}
    result = invoke("run", "fill_value_sequence", "--output-shape", "1,1,2,2", "--output-dtype", "uint8",
                    "--value-start", "10", "--value-delta", "-2", "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"] == [[[[10, 8], [6, 4]]]]
    result = invoke("run", "diagonal_matrix", "--output-shape", "3,2", "--offset", "-1", "--output-dtype", "int8",
                    "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"] == [[0, 0], [1, 0], [0, 1]]
    result = invoke("run", "diagonal_matrix1", json.dumps(PAGE_INPUT), "--dtype", "int32", "--value", "0",
                    "--diagonal-fill-begin", "1", "--diagonal-fill-end", "0", "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["data"] == [[4, 0, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 2, 0]]


@pytest.mark.parametrize("args,code,message", [
    (["run", "fill_value_constant"], 3, "FILL_VALUE_CONSTANT: OutputTensor Sizes are not given"),
    (["run", "fill_value_sequence", "--output-dtype", "int32"], 3, "give them with --output-shape"),
    (["run", "diagonal_matrix"], 3, "DIAGONAL_MATRIX: OutputTensor Sizes are not given"),
    (["run", "diagonal_matrix1", "[[1, 2]]", "--dtype", "float32", "--output-shape", "2,1"], 3, "do not match"),
    (["run", "fill_value_constant", "--output-shape", "2,0"], 3, "contain a zero"),
    (["run", "diagonal_matrix", "--output-shape", "2,2", "-f", "2_1"], 3, "supported from DML_FEATURE_LEVEL_4_0"),
    (["run", "cast", "[[1, 2]]", "--dtype", "int32", "--output-dtype", "int8", "-f", "1_0"], 3,
     "supported from DML_FEATURE_LEVEL_3_1"),
    (["run", "diagonal_matrix1", "[[1, 2]]", "--dtype", "float32", "--output-dtype", "int8"], 3,
     "must have the same DataType"),
    (["run", "fill_value_constant", "--output-shape", "2", "--value-data-type", "int8"], 2,
     "ValueDataType INT8 must match OutputTensor data type FLOAT32"),
    (["run", "fill_value_constant", "--output-shape", "2", "--output-dtype", "uint8", "--value", "256"], 2,
     "out of range"),
    (["run", "fill_value_constant", "--output-shape", "2,x"], 2, "is not a size"),
    (["run", "bit_xor"], 2, "BIT_XOR takes 2 input tensors"),
])
def test_cli_errors(args, code, message):
    result = invoke(*args)
    assert result.exit_code == code, result.output
    assert message in result.output and "Traceback" not in result.output


def test_cli_validate_and_ops():
    result = invoke("validate", "fill_value_sequence", "--output-shape", "2,3", "--output-dtype", "int64")
    assert result.exit_code == 0, result.output
    assert "lowest feature level that accepts this call: DML_FEATURE_LEVEL_5_0" in result.output
    result = invoke("ops")
    assert result.exit_code == 0
    assert "conversion" in result.output and "generation" in result.output and "fill_value_sequence" in result.output
    for name in ENUMS:
        result = invoke("describe", name.lower())
        assert result.exit_code == 0, result.output
        assert "--output-shape" in result.output or name == "CAST"


def test_dxdispatch_model_runs_the_generators_and_cast():
    """A DxDispatch model: FILL_VALUE_SEQUENCE with the page's UINT8 example (ValueDelta as the union's Int8 -2),
    CAST of its result to FLOAT32, FILL_VALUE_CONSTANT of FLOAT16 1.0 given as the union's UInt16 bits."""
    from conftest import REPO

    result = invoke("dispatch", REPO / "tests" / "data" / "generation_model.json", "--no-timing")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["Resource 'Seq': 10, 8, 6, 4", "Resource 'Casted': 10, 8, 6, 4",
                                          "Resource 'Fill': 1, 1, 1, 1"]


def test_save_case_and_dmlcli_test_with_no_inputs(tmp_path):
    """--save-case records a generator's output_shape; `dmlcli test` runs the case with "inputs": []."""
    case = tmp_path / "sequence.json"
    result = invoke("run", "fill_value_sequence", "--output-shape", "2,2", "--output-dtype", "int16", "--value-start",
                    "4", "--value-delta", "-3", "--save-case", case, "-q")
    assert result.exit_code == 0, result.output
    document = json.loads(case.read_text())
    assert document["inputs"] == [] and document["params"]["output_shape"] == [2, 2]
    assert document["expected"]["data"] == [[4, 1], [-2, -5]]
    result = invoke("test", case, "-q")
    assert result.exit_code == 0 and "1 passed, 0 failed" in result.output, result.output
