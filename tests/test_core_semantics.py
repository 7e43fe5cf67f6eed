"""Hand-picked edge cases with their expected bits written out, per operator."""

import warnings

import numpy as np
import pytest

import dmlcli


def bits(array):
    array = np.asarray(array)
    return array.view(f"uint{array.dtype.itemsize * 8}").tolist()


def f16(*patterns):
    return np.array(patterns, np.uint16).view(np.float16)


def f32(*patterns):
    return np.array(patterns, np.uint32).view(np.float32)


def f64(*patterns):
    return np.array(patterns, np.uint64).view(np.float64)


class TestBitXor:
    def test_uint8_truth_table(self):
        a = np.array([[0, 128], [42, 255]], np.uint8)
        b = np.array([[255, 255], [15, 240]], np.uint8)
        assert dmlcli.run("bit_xor", a, b).tolist() == [[255, 127], [37, 15]]

    def test_float32_on_the_bit_pattern(self):
        # 1.0 ^ -1.0 leaves only the sign bit: -0.0.
        out = dmlcli.run("bit_xor", np.float32([1.0]), np.float32([-1.0]))
        assert out.dtype == np.float32 and bits(out) == [0x80000000]

    def test_nan_payloads_survive(self):
        out = dmlcli.run("bit_xor", f16(0x7E01, 0xFC00), f16(0x0001, 0x0000))
        assert bits(out) == [0x7E00, 0xFC00]
        out = dmlcli.run("bit_xor", f32(0x7FC00001), f32(0x00000003))
        assert bits(out) == [0x7FC00002]

    def test_float64_and_subnormals(self):
        out = dmlcli.run("bit_xor", f64(0x0000000000000001), f64(0x8000000000000000))
        assert bits(out) == [0x8000000000000001]

    def test_signed_is_twos_complement(self):
        assert dmlcli.run("bit_xor", np.int8([-1, -128]), np.int8([1, 127])).tolist() == [-2, -1]
        big = np.iinfo(np.int64)
        assert dmlcli.run("bit_xor", np.int64([big.min]), np.int64([-1])).tolist() == [big.max]

    @pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
    def test_all_ones(self, dtype):
        top = np.iinfo(dtype).max
        assert dmlcli.run("bit_xor", np.array([top, 0], dtype), np.array([top, top], dtype)).tolist() == [0, top]


class TestBitwiseFamily:
    def test_and_or_not_on_floats(self):
        a, b = f32(0xFFFFFFFF), f32(0x7F800000)
        assert bits(dmlcli.run("bit_and", a, b)) == [0x7F800000]
        assert bits(dmlcli.run("bit_or", f32(0x80000000), f32(0x00000001))) == [0x80000001]
        assert bits(dmlcli.run("bit_not", f16(0x0000, 0x7C00))) == [0xFFFF, 0x83FF]

    def test_bit_not_page_example(self):
        x = np.array([[0, 128], [42, 255]], np.uint8)
        assert dmlcli.run("bit_not", x).tolist() == [[255, 127], [213, 0]]

    def test_bit_count_page_example_and_twos_complement(self):
        assert dmlcli.run("bit_count", np.uint32([[0, 123], [456, 789]])).tolist() == [[0, 6], [4, 5]]
        assert dmlcli.run("bit_count", np.int8([-1, -128, 127])).tolist() == [8, 1, 7]
        assert dmlcli.run("bit_count", np.int64([-1])).tolist() == [64]
        assert dmlcli.run("bit_count", np.float32([-0.0, np.inf])).tolist() == [1, 8]
        out = dmlcli.run("bit_count", np.uint64([2**64 - 1]), output_dtype="uint32")
        assert out.dtype == np.uint32 and out.tolist() == [64]


class TestShifts:
    @pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
    def test_counts_at_and_past_the_width_give_zero(self, dtype):
        width = np.dtype(dtype).itemsize * 8
        top = np.iinfo(dtype).max
        a = np.array([1, 1, 1, top, top, top], dtype)
        counts = np.array([width - 1, width, width + 1, 0, width, top], dtype)
        with pytest.warns(dmlcli.DmlcliWarning, match=rf"4 of 6 shift counts are >= the element width {width}"):
            left = dmlcli.run("bit_shift_left", a, counts)
        assert left.tolist() == [1 << (width - 1), 0, 0, top, 0, 0]
        with pytest.warns(dmlcli.DmlcliWarning):
            right = dmlcli.run("bit_shift_right", a, counts)
        assert right.tolist() == [0, 0, 0, top, 0, 0]

    def test_in_range_shifts_wrap_modulo_the_width(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert dmlcli.run("bit_shift_left", np.uint8([255, 129]), np.uint8([1, 7])).tolist() == [254, 128]
            assert dmlcli.run("bit_shift_right", np.uint16([0x8000]), np.uint16([15])).tolist() == [1]
            assert dmlcli.run("bit_shift_left", np.uint64([1]), np.uint64([63])).tolist() == [2**63]

    def test_broadcast_counts_are_counted_per_output_element(self):
        with pytest.warns(dmlcli.DmlcliWarning, match="3 of 3 shift counts"):
            out = dmlcli.run("bit_shift_left", np.uint8([1, 2, 3]), np.uint8([9]), broadcast=True)
        assert out.tolist() == [0, 0, 0]


class TestLogical:
    def test_xor_in_the_input_type(self):
        out = dmlcli.run("logical_xor", np.uint32([0, 0, 7, 2**32 - 1]), np.uint32([0, 5, 0, 1]))
        assert out.dtype == np.uint32 and out.tolist() == [0, 1, 1, 0]

    def test_and_or_not(self):
        a, b = np.uint8([0, 0, 3, 255]), np.uint8([0, 9, 0, 1])
        assert dmlcli.run("logical_and", a, b).tolist() == [0, 0, 0, 1]
        assert dmlcli.run("logical_or", a, b).tolist() == [0, 1, 1, 1]
        assert dmlcli.run("logical_not", a).tolist() == [1, 1, 0, 0]


class TestIsInfinity:
    VALUES = [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1.0, -1.0]

    @pytest.mark.parametrize("dtype", [np.float16, np.float32])
    @pytest.mark.parametrize("mode,expected", [
        ("either", [1, 1, 0, 0, 0, 0, 0, 0]),
        ("positive", [1, 0, 0, 0, 0, 0, 0, 0]),
        ("negative", [0, 1, 0, 0, 0, 0, 0, 0]),
    ])
    def test_modes(self, dtype, mode, expected):
        out = dmlcli.run("is_infinity", np.array(self.VALUES, dtype), infinity_mode=mode)
        assert out.dtype == np.uint8 and out.tolist() == expected

    def test_largest_finite_and_subnormal_are_not_infinite(self):
        assert dmlcli.run("is_infinity", f32(0x7F7FFFFF, 0x00000001, 0xFF800000)).tolist() == [0, 0, 1]
        assert dmlcli.run("is_infinity", f16(0x7BFF, 0x0001, 0x7C00, 0x7C01)).tolist() == [0, 0, 1, 0]


class TestIsNan:
    def test_every_nan_pattern(self):
        x = f32(0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0x7F800000, 0x00000000)
        assert dmlcli.run("is_nan", x).tolist() == [1, 1, 1, 1, 0, 0]
        out = dmlcli.run("is_nan", f16(0x7C01, 0xFE00, 0x7C00), output_dtype="uint32")
        assert out.dtype == np.uint32 and out.tolist() == [1, 1, 0]


class TestComparisons:
    def test_ieee_rules(self):
        a = np.float32([np.nan, -0.0, 1.0, -np.inf, np.nan])
        b = np.float32([np.nan, 0.0, 2.0, -np.inf, 1.0])
        assert dmlcli.run("logical_equals", a, b).tolist() == [0, 1, 0, 1, 0]
        assert dmlcli.run("logical_less_than", a, b).tolist() == [0, 0, 1, 0, 0]
        assert dmlcli.run("logical_greater_than_or_equal", a, b).tolist() == [0, 1, 0, 1, 0]
        assert dmlcli.run("logical_less_than_or_equal", a, b).tolist() == [0, 1, 1, 1, 0]
        assert dmlcli.run("logical_greater_than", a, b).tolist() == [0, 0, 0, 0, 0]

    def test_64_bit_integers_compare_exactly(self):
        # These pairs are equal once rounded to float64; exact comparison tells them apart.
        a = np.int64([2**62 + 1, -(2**63)])
        b = np.int64([2**62, -(2**63) + 1])
        assert dmlcli.run("logical_greater_than", a, b).tolist() == [1, 0]
        assert dmlcli.run("logical_equals", a, b).tolist() == [0, 0]
        ua, ub = np.uint64([2**64 - 1]), np.uint64([2**64 - 2])
        assert dmlcli.run("logical_greater_than", ua, ub).tolist() == [1]

    def test_output_type_choice(self):
        out = dmlcli.run("logical_equals", np.uint8([1, 2]), np.uint8([1, 3]), output_dtype="UINT32")
        assert out.dtype == np.uint32 and out.tolist() == [1, 0]
        with pytest.raises(dmlcli.ValidationError, match="OutputTensor data type INT32 is not supported"):
            dmlcli.run("logical_equals", np.uint8([1]), np.uint8([1]), output_dtype="int32")

    def test_float16(self):
        a, b = np.float16([65504.0, -0.0]), np.float16([np.inf, 0.0])
        assert dmlcli.run("logical_less_than", a, b).tolist() == [1, 0]


def test_broadcast_matches_numpy_broadcasting():
    a = np.arange(6, dtype=np.uint8).reshape(2, 3)
    b = np.uint8([1, 2, 4])
    assert dmlcli.run("bit_or", a, b, broadcast=True).tolist() == (a | b).tolist()


def test_non_native_and_non_contiguous_inputs():
    a = np.arange(8, dtype=">u4")[::2]
    b = np.ones(4, dtype="<u4")
    with pytest.raises(dmlcli.ValidationError):
        dmlcli.run("bit_xor", a.astype(np.uint16), b)
    assert dmlcli.run("bit_xor", a, b).tolist() == [1, 3, 5, 7]
