"""The small-tensor kernels made cheaper per call give the bits of the kernels they replaced, for every input.

MEAN_VARIANCE_NORMALIZATION (and its 1 and 2 forms), SOFTMAX and LOG_SOFTMAX (and their 1 forms), GATHER, ADD,
SUBTRACT, MULTIPLY and IDENTITY were rewritten with fewer NumPy calls and temporaries. The kernels as they were
are kept in bench/small_kernels_bench.py (the baseline it times the new ones against); each new kernel's result is
compared with the old one's bit for bit (NaN payloads and the sign of zero included) over drawn shapes (sizes 0 and
1, rows long enough for NumPy's vector loops), values (NaN of both signs with payloads, infinities, zeros of both
signs, subnormals, the type's extremes, ordinary values of many scales), FLOAT16 and FLOAT32, and layouts (C order,
transposed, strided slices, broadcast views). Correctness against independent references stays with each family's tests.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.operators.elementwise import arithmetic
from dmlcli.operators.indexing import entries as indexing
from dmlcli.operators.normalization import entries as normalization
from dmlcli.operators.reduction import entries as reduction

BENCH = Path(__file__).resolve().parents[1] / "bench"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLOATS = ("float32", "float16")
SIZES = st.sampled_from([0, 1, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 130])  # 130: past NumPy's pairwise block


# ---------------------------------------------------------------- the kernels as they were
# Kept once, in the bench that times them against the new ones (its baseline).
_spec = importlib.util.spec_from_file_location("small_kernels_bench", BENCH / "small_kernels_bench.py")
baseline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(baseline)
old_normalise, old_softmax_kernel, old_log_softmax_kernel = (baseline.old_normalise, baseline.old_softmax_kernel,
                                                             baseline.old_log_softmax_kernel)
old_gather_kernel, old_binary, old_identity = baseline.old_gather_kernel, baseline.old_binary, baseline.old_identity


# ---------------------------------------------------------------- drawn inputs


def _special_bits(dtype: np.dtype) -> np.ndarray:
    """Every value class by its bits: NaN of both signs (quiet with payloads; signalling ones are quietened by any
    arithmetic and kept by copies), infinities, zeros of both signs, the smallest and largest subnormals, the
    extremes, one."""
    if dtype == np.float32:
        words = [0x7FC00000, 0xFFC00000, 0x7FC00001, 0xFFE12345, 0x7F800001, 0x7F800000, 0xFF800000, 0x00000000,
                 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000]
        return np.array(words, dtype=np.uint32).view(np.float32)
    words = [0x7E00, 0xFE00, 0x7E01, 0xFE35, 0x7C01, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF,
             0x3C00]
    return np.array(words, dtype=np.uint16).view(np.float16)


@st.composite
def values(draw, shape, dtype: str, specials: bool = True) -> np.ndarray:
    """A C-ordered array of `shape`: ordinary values of a drawn scale, and (with `specials`) special values at
    drawn places."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([1e-6, 1.0, 30.0, 1e4] + ([1e30] if dtype == np.float32 else [])))
    with np.errstate(all="ignore"):
        array = (rng.standard_normal(shape) * scale).astype(dtype)
    if specials and array.size and draw(st.booleans()):
        flat = array.reshape(-1)
        places = rng.integers(0, flat.size, size=draw(st.integers(1, 3)))
        flat[places] = rng.choice(_special_bits(dtype), size=places.size)
    return array


@st.composite
def laid_out(draw, array: np.ndarray) -> np.ndarray:
    """`array`'s values in a drawn layout: C order, transposed (the memory of the reversed-axes array), a strided
    slice of a larger array, or a broadcast (zero strides) of its first slice along a drawn axis (the values then
    repeat along it)."""
    layout = draw(st.sampled_from(["c", "transposed", "strided", "broadcast"]))
    if layout == "transposed" and array.ndim >= 2:
        return np.ascontiguousarray(array.transpose()).transpose()
    if layout == "strided":
        wide = np.zeros(tuple(2 * n for n in array.shape), dtype=array.dtype)
        view = wide[tuple(slice(None, None, 2) for _ in array.shape)]
        view[...] = array
        return view
    if layout == "broadcast" and array.ndim:
        axis = draw(st.integers(0, array.ndim - 1))
        if array.shape[axis]:
            return np.broadcast_to(array.take([0], axis=axis), array.shape)
    return array


def shapes(min_rank: int = 1, max_rank: int = 4):
    return st.lists(SIZES, min_size=min_rank, max_size=max_rank).map(tuple).filter(lambda s: math.prod(s) <= 20000)


def output(dtype, shape=None) -> SimpleNamespace:
    return SimpleNamespace(data_type=SimpleNamespace(numpy_dtype=np.dtype(dtype)), shape=shape)


def assert_same_bits(new: np.ndarray, old: np.ndarray) -> None:
    assert new.dtype == old.dtype and new.shape == old.shape
    width = f"uint{new.dtype.itemsize * 8}" if new.dtype.kind == "f" else None
    got, want = (np.ascontiguousarray(a) for a in (new, old))
    if width:
        got, want = got.view(width), want.view(width)
    assert np.array_equal(got, want)


def quiet(function):
    """function() under the backend's errstate, and without NumPy's 'Mean of empty slice' warning."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return function()


def assert_same_outcome(new, old) -> np.ndarray | None:
    """The new kernel's call `new()` gives the old one's `old()` bits, or refuses the call as it did (a reduction
    of an empty axis that has no identity); the new result, or None after a refusal."""
    try:
        want = quiet(old)[0]
    except ValueError as refusal:
        with pytest.raises(type(refusal)):
            quiet(new)
        return None
    got = quiet(new)[0]
    assert_same_bits(got, want)
    return got


# ---------------------------------------------------------------- MEAN_VARIANCE_NORMALIZATION (1, 2)


def _per_element(draw, shape, dtype):
    """Scale or Bias: absent, or each size 1 or the input's (the rule the validator applies), in a drawn layout."""
    if draw(st.booleans()):
        return None
    sizes = tuple(n if draw(st.booleans()) else 1 for n in shape)
    return draw(laid_out(draw(values(sizes, dtype, specials=draw(st.booleans())))))


@st.composite
def mvn_calls(draw):
    dtype = draw(st.sampled_from(FLOATS))
    shape = draw(shapes())
    x = draw(laid_out(draw(values(shape, dtype))))
    axes = tuple(draw(st.permutations(range(len(shape))))[:draw(st.integers(1, len(shape)))])
    epsilon = np.float32(draw(st.sampled_from([1e-5, 0.0, 1e-3])))
    form = draw(st.sampled_from(["1", "2"]))
    params = {"Axes": axes, "Epsilon": epsilon, "FusedActivation": None}
    if form == "1":
        params["NormalizeVariance"] = draw(st.booleans())
    else:
        params["UseMean"], params["UseVariance"] = draw(st.booleans()), draw(st.booleans())
    return x, _per_element(draw, shape, dtype), _per_element(draw, shape, dtype), params


def _with_old_normalise(function):
    with mock.patch.object(normalization, "_normalise", old_normalise):
        return function()


@SETTINGS
@given(mvn_calls())
def test_mean_variance_normalization_axes_keeps_its_bits(call):
    x, scale, bias, params = call
    inputs, outputs = [x, scale, bias], [output(x.dtype)]
    new = assert_same_outcome(lambda: normalization.mvn_axes_kernel(np, inputs, outputs, params),
                              lambda: _with_old_normalise(lambda: normalization.mvn_axes_kernel(np, inputs, outputs,
                                                                                                params)))
    assert new is None or new.flags.c_contiguous


@SETTINGS
@given(st.data())
def test_mean_variance_normalization_keeps_its_bits(data):
    dtype = data.draw(st.sampled_from(FLOATS))
    shape = data.draw(shapes(4, 4))
    x = data.draw(laid_out(data.draw(values(shape, dtype))))
    scale, bias = _per_element(data.draw, shape, dtype), _per_element(data.draw, shape, dtype)
    params = {"CrossChannel": data.draw(st.booleans()), "NormalizeVariance": data.draw(st.booleans()),
              "Epsilon": np.float32(1e-5), "FusedActivation": None}
    inputs, outputs = [x, scale, bias], [output(dtype)]
    assert_same_outcome(lambda: normalization.mvn_kernel(np, inputs, outputs, params),
                        lambda: _with_old_normalise(lambda: normalization.mvn_kernel(np, inputs, outputs, params)))


def test_a_one_element_normalisation_keeps_the_nan_it_gave():
    """The case behind _in_place's exception: x - mean is 0, 0 / sqrt(0 + 0) a NaN, and Bias another NaN. NumPy
    adds a one-element array in place by its reduction loop, which gives Bias's NaN where the new array got the
    quotient's: written into a new array, as before."""
    x = np.array([1.2573022e-07], np.float32)
    bias = np.array([0xFFE12345], np.uint32).view(np.float32)
    params = {"Axes": (0,), "Epsilon": np.float32(0.0), "FusedActivation": None, "NormalizeVariance": True}
    assert_same_outcome(lambda: normalization.mvn_axes_kernel(np, [x, None, bias], [output(np.float32)], params),
                        lambda: _with_old_normalise(lambda: normalization.mvn_axes_kernel(
                            np, [x, None, bias], [output(np.float32)], params)))


NAN_LAYOUT_SHAPES = [(2,), (3,), (1, 5), (5, 1), (4, 17), (17, 4), (1, 16, 128), (3, 1, 1), (2, 3, 33), (64,)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("operation", [np.add, np.subtract, np.multiply, np.divide])
def test_numpy_gives_in_place_operations_the_new_arrays_nans(dtype, operation):
    """What _in_place stands on: NumPy writes an operation on arrays of more than one element into its first operand
    with the bits it gives a new array, NaN payloads included where both operands are NaN of different payloads
    (the loop is the same: only a single element takes the reduction loop), for operands of every layout and
    broadcast."""
    rng = np.random.default_rng(13)
    width = np.uint32 if dtype == "float32" else np.uint16
    signs = (0xFFC00000, 0x7FC00000) if dtype == "float32" else (0xFE00, 0x7E00)
    for shape in NAN_LAYOUT_SHAPES:
        for kept in range(2 ** len(shape)):
            other_shape = tuple(n if kept >> axis & 1 else 1 for axis, n in enumerate(shape))
            first, second = ((sign | rng.integers(1, 256, size=s)).astype(width).view(dtype)
                             for sign, s in zip(signs, (shape, other_shape)))
            for a in (first, np.ascontiguousarray(first.T).T, np.repeat(first, 2, axis=-1)[..., ::2]):
                for b in (second, np.ascontiguousarray(second.T).T):
                    made = operation(a, np.zeros((), dtype))  # the kernel's own array, laid out as `a`
                    kept_copy = made.copy(order="K")
                    want = operation(made, b)
                    got = operation(kept_copy, b, out=kept_copy)
                    assert np.array_equal(np.ascontiguousarray(got).view(width),
                                          np.ascontiguousarray(want).view(width)), (shape, other_shape)


def test_the_float32_division_of_a_mean_is_numpys_float64_one():
    """_mean divides a FLOAT32 sum by a count up to 2^24 in FLOAT32 where np.mean divides in float64 and rounds:
    the same bits (double rounding is innocuous for division from 53 bits to 24), checked here on every special
    value and random bit patterns against counts of every magnitude, the limit 2^24 included, and 0 / 0."""
    rng = np.random.default_rng(7)
    sums = np.concatenate([_special_bits(np.dtype(np.float32)),
                           rng.integers(0, 2**32, size=1 << 16, dtype=np.uint32).view(np.float32)])
    counts = np.concatenate([np.arange(0, 300), 2 ** np.arange(9, 25), 2 ** np.arange(9, 25) - 1,
                             rng.integers(1, 2**24 + 1, size=200)])
    with np.errstate(all="ignore"):
        for count in counts:
            numpy_way = np.true_divide(sums, np.intp(count), out=np.empty_like(sums), casting="unsafe")
            float32_way = sums / np.float32(count)
            assert np.array_equal(numpy_way.view(np.uint32), float32_way.view(np.uint32)), count
    empty = np.zeros((2, 0), np.float32)
    assert_same_bits(quiet(lambda: normalization._mean(np, empty, (1,))),
                     quiet(lambda: np.mean(empty, axis=(1,), keepdims=True, dtype=np.float32)))


def test_mean_beyond_float32_counts_keeps_numpys_division():
    """Past 2^24 the count is not a FLOAT32: _mean keeps NumPy's float64 division (a broadcast view: no memory)."""
    x = np.broadcast_to(np.float32(0.1), (1, 2**24 + 1))
    with np.errstate(all="ignore"):
        assert_same_bits(normalization._mean(np, x, (1,)), np.mean(x, axis=(1,), keepdims=True, dtype=np.float32))


def test_layer_normalization_through_the_api_keeps_its_bits():
    rng = np.random.default_rng(3)
    x, scale, bias = (rng.standard_normal(shape).astype(np.float32) for shape in ((1, 16, 128), (1, 1, 128),
                                                                                  (1, 1, 128)))
    got = dmlcli.run("mean_variance_normalization1", x, scale, bias, axes=[2])
    want = quiet(lambda: old_normalise(np, x, (2,), scale, bias, True, np.float32(1e-5)))
    assert_same_bits(got, want)


# ---------------------------------------------------------------- SOFTMAX, LOG_SOFTMAX (and their 1 forms)


@st.composite
def softmax_calls(draw):
    dtype = draw(st.sampled_from(FLOATS))
    shape = draw(shapes())
    x = draw(laid_out(draw(values(shape, dtype))))
    if draw(st.booleans()):
        return x, {}
    axes = tuple(draw(st.permutations(range(len(shape))))[:draw(st.integers(1, len(shape)))])
    return x, {"Axes": axes}


@SETTINGS
@given(softmax_calls(), st.sampled_from(["softmax", "log_softmax"]))
def test_softmax_kernels_keep_their_bits(call, form):
    x, params = call
    new_kernel, old_kernel = {"softmax": (reduction.softmax_kernel, old_softmax_kernel),
                              "log_softmax": (reduction.log_softmax_kernel, old_log_softmax_kernel)}[form]
    outputs = [output(x.dtype)]
    new = assert_same_outcome(lambda: new_kernel(np, [x], outputs, params),
                              lambda: old_kernel(np, [x], outputs, params))
    assert new is None or not np.may_share_memory(new, x)


def test_softmax_through_the_api_keeps_its_bits():
    x = np.random.default_rng(5).standard_normal((1, 4, 16, 16)).astype(np.float32)
    got = dmlcli.run("activation_softmax1", x, axes=[3])
    assert_same_bits(got, quiet(lambda: old_softmax_kernel(np, [x], [output(np.float32)], {"Axes": (3,)}))[0])


# ---------------------------------------------------------------- GATHER

INDEX_TYPES = ("int64", "int32", "uint64", "uint32")
DATA_TYPES = ("float32", "float16", "int64", "int8", "uint16")


@st.composite
def gather_calls(draw):
    dtype = draw(st.sampled_from(DATA_TYPES))
    # No size 0 (the validator refuses one in any tensor: DirectML has none): where the old kernel met an empty
    # axis, its clamp failed for unsigned indices (size - 1 overflows their type) and not for signed ones.
    shape = draw(shapes().filter(lambda s: 0 < math.prod(s)))
    axis = draw(st.integers(0, len(shape) - 1))
    if np.dtype(dtype).kind == "f":
        data = draw(values(shape, dtype))
    else:
        data = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(-100, 100, size=shape).astype(dtype)
    data = draw(laid_out(data))
    index_dtype = np.dtype(draw(st.sampled_from(INDEX_TYPES)))
    size = shape[axis]
    info = np.iinfo(index_dtype)
    edges = [0, 1, size - 1, size, size + 1, -1, -size, -size - 1, info.min, info.max, info.max - 3, 2**31, 2**63]
    edges = st.sampled_from([v for v in edges if info.min <= v <= info.max])
    # Mostly indices within [-size, size) (np.take's own range), with an edge among them now and then.
    within = st.one_of(*[st.integers(max(-size, info.min), size - 1)] * (4 if size else 0), edges)
    index_shape = draw(st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple))
    indices = np.array(draw(st.lists(within, min_size=math.prod(index_shape), max_size=math.prod(index_shape))),
                       dtype=index_dtype).reshape(index_shape)
    # The validator's form: indices padded with leading 1s to the data's rank (IndexDimensions: the trailing ones
    # that count), or any rank with IndexDimensions left out.
    count = None
    if len(index_shape) <= len(shape) and draw(st.booleans()):
        count = len(index_shape)
        indices = indices.reshape((1,) * (len(shape) - len(index_shape)) + index_shape)
    out_shape = shape[:axis] + index_shape + shape[axis + 1:]
    return data, indices, {"Axis": axis, "IndexDimensions": count}, out_shape


@SETTINGS
@given(gather_calls())
def test_gather_keeps_its_bits(call):
    data, indices, params, out_shape = call
    outputs = [output(data.dtype, out_shape)]
    assert_same_outcome(lambda: indexing.gather_kernel(np, [data, indices], outputs, params),
                        lambda: old_gather_kernel(np, [data, indices], outputs, params))


@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
def test_gather_clamps_indices_np_take_would_read_otherwise(index_dtype):
    """The indices np.take reads differently from DirectML's clamp: UINT64 past INT64's range (np.take's intp would
    count them from the end), each type's extremes, and one past either end among valid ones."""
    data = np.arange(6, dtype=np.float32).reshape(1, 6)
    info = np.iinfo(index_dtype)
    for bad in (info.max, info.max - 3, info.min, info.min + 2, 6, -7, 2**63 + 2):
        if info.min <= bad <= info.max:
            indices = np.array([1, bad, 2], dtype=index_dtype)
            outputs = [output(np.float32, (1, 3))]
            params = {"Axis": 1, "IndexDimensions": None}
            assert_same_bits(indexing.gather_kernel(np, [data, indices], outputs, params)[0],
                             old_gather_kernel(np, [data, indices], outputs, params)[0])


def test_gather_through_the_api_keeps_its_bits():
    table = np.random.default_rng(9).standard_normal((1, 1000, 128)).astype(np.float32)
    table[0, 3, 5] = np.array(0x7FC01234, np.uint32).view(np.float32)  # a payload NaN, copied as it is
    indices = np.array([[[3, -1, 999, 1000, -1001, 0, 2**40]]], dtype=np.int64)
    got = dmlcli.run("gather", table, indices, axis=1, index_dimensions=2)
    want = old_gather_kernel(np, [table, indices], [output(np.float32, got.shape)],
                             {"Axis": 1, "IndexDimensions": 2})[0]
    assert_same_bits(got, want)


# ---------------------------------------------------------------- ADD, SUBTRACT, MULTIPLY, IDENTITY

ELEMENTWISE_TYPES = ("float32", "float16", "int32", "uint8", "int64")


@st.composite
def operand(draw, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return draw(laid_out(draw(values(shape, dtype))))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    info = np.iinfo(dtype)
    return draw(laid_out(rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)))


@SETTINGS
@given(st.data(), st.sampled_from(["add", "subtract", "multiply"]), st.sampled_from(ELEMENTWISE_TYPES))
def test_binary_kernels_keep_their_bits(data, name, dtype):
    shape = data.draw(shapes())
    a = data.draw(operand(shape, dtype))
    # The backend hands a kernel its inputs broadcast to the output's Sizes: b is often one value broadcast.
    b_shape = tuple(n if data.draw(st.booleans()) else 1 for n in shape)
    b = np.broadcast_to(data.draw(operand(b_shape, dtype)), shape)
    with np.errstate(all="ignore"):
        new = getattr(arithmetic, name)([a, b], np.dtype(dtype), {})
    assert_same_bits(new, old_binary(getattr(np, name))([a, b], np.dtype(dtype), {}))


@SETTINGS
@given(st.data(), st.sampled_from(ELEMENTWISE_TYPES))
def test_identity_keeps_its_bits_in_c_order(data, dtype):
    x = data.draw(operand(data.draw(shapes()), dtype))
    new = arithmetic.identity([x], np.dtype(dtype), {"ScaleBias": None})
    assert_same_bits(new, old_identity([x], np.dtype(dtype), {"ScaleBias": None}))
    assert new.flags.c_contiguous and new.flags.owndata and not np.may_share_memory(new, x)


def test_transpose_through_the_api_keeps_its_bits():
    x = np.random.default_rng(11).standard_normal((16, 4, 32)).astype(np.float32)
    strided = np.lib.stride_tricks.as_strided(x, (4, 16, 32), (128, 512, 4))  # a transpose's view
    got = dmlcli.run("identity", strided)
    assert_same_bits(got, old_identity([strided], np.dtype(np.float32), {}))


# ---------------------------------------------------------------- the branches CuPy takes


class _ArrayModule:
    """NumPy under another name: the kernels' `xp is np` tests fail, so they take the branch CuPy takes (there
    without NumPy's faster calls), here on NumPy arrays."""

    def __getattr__(self, name):
        return getattr(np, name)


@SETTINGS
@given(st.data())
def test_the_cupy_branches_keep_the_bits(data):
    other = _ArrayModule()
    x, scale, bias, params = data.draw(mvn_calls())
    assert_same_outcome(lambda: normalization.mvn_axes_kernel(other, [x, scale, bias], [output(x.dtype)], params),
                        lambda: _with_old_normalise(lambda: normalization.mvn_axes_kernel(np, [x, scale, bias],
                                                                                          [output(x.dtype)], params)))
    x, params = data.draw(softmax_calls())
    for new_kernel, old_kernel in ((reduction.softmax_kernel, old_softmax_kernel),
                                   (reduction.log_softmax_kernel, old_log_softmax_kernel)):
        assert_same_outcome(lambda: new_kernel(other, [x], [output(x.dtype)], params),
                            lambda: old_kernel(np, [x], [output(x.dtype)], params))
    table, indices, params, out_shape = data.draw(gather_calls())
    outputs = [output(table.dtype, out_shape)]
    assert_same_outcome(lambda: indexing.gather_kernel(other, [table, indices], outputs, params),
                        lambda: old_gather_kernel(np, [table, indices], outputs, params))
