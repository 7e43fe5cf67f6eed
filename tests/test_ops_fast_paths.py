"""The one-call fast paths of MAX, MIN, CLIP, CLIP1, THRESHOLD, RELU and SIGN give the careful path's bits.

Each of these kernels first tries NumPy's single call (np.fmax, np.clip, np.sign) and keeps its result where
one reduction shows no NaN and no zero that the NaN and signed-zero rule could settle otherwise
(dmlcli/operators/float_specials.py); MIN, MAX and THRESHOLD on large contiguous arrays trust np.fmax/np.fmin's
vector loops with NaN where a probe shows that they follow the rule, and check for zeros alone; SIGN trusts np.sign
with NaN where a probe shows it returns NaN as it is, and checks each part of its result for zeros. The careful
path, which settles every element by the rule, is the one the per-family tests prove against independent
references; here every fast result is compared bit for bit with it (forced by making the NaN check always answer
yes and the probes no), and the new paths with the rule written element by element too, on arrays with and without
NaN, signed zeros, infinities and subnormals, and with zero, NaN and infinite bounds.
"""

import platform

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.operators.elementwise import activation, arithmetic, selection
from dmlcli.operators.numerics import float_specials

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FLOATS = ("float32", "float16")  # their float types (none takes FLOAT64)
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 5e-324, 2.0 ** -24, 65504.0, 1.0, -1.0]
MODULES = (selection, activation, arithmetic)


def _values(dtype: str, specials: bool):
    ordinary = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False).filter(lambda v: v != 0)
    element = st.one_of(ordinary, st.sampled_from(SPECIALS)) if specials else ordinary
    return st.lists(element, min_size=1, max_size=200).map(lambda xs: _as(xs, dtype))


def _as(values, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        array = np.array(values, dtype=np.float64).astype(dtype)
    if np.dtype(dtype).kind == "f" and not any(v == 0 or v != v for v in values):
        # Rounding to float16 may make a small ordinary value zero: keep such arrays free of zeros.
        array[array == 0] = 1
    return array


def _bits(array: np.ndarray) -> list[int]:
    return array.view(f"uint{array.dtype.itemsize * 8}").tolist()


def _careful(monkeypatch, function):
    """function() with every fast path turned down (the NaN check always says yes, np.clip and np.sign are not
    trusted with NaN bits, np.fmax's vector loops not with the NaN rule, SIGN's dot-product check always says no)."""
    with monkeypatch.context() as patch:
        for module in MODULES:
            patch.setattr(module, "has_nan", lambda values: True)
        patch.setattr(activation, "clip_keeps_nan_bits", lambda dtype: False)
        patch.setattr(selection, "clip_keeps_nan_bits", lambda dtype: False)
        patch.setattr(selection, "fmax_fmin_follow_nan_rule", lambda dtype: False)
        patch.setattr(arithmetic, "_all_plus_or_minus_one", lambda signs: False)
        patch.setattr(arithmetic, "sign_keeps_nan_bits", lambda dtype: False)
        return function()


CASES = {
    "max": lambda xs, p: dmlcli.run("max", xs, xs[::-1].copy()),
    "min": lambda xs, p: dmlcli.run("min", xs, xs[::-1].copy()),
    "clip": lambda xs, p: dmlcli.run("clip", xs, min=p[0], max=p[1]),
    "clip1": lambda xs, p: dmlcli.run("clip1", xs, min=p[0], max=p[1]),
    "threshold": lambda xs, p: dmlcli.run("threshold", xs, min=p[0]),
    "activation_relu": lambda xs, p: dmlcli.run("activation_relu", xs),
    "sign": lambda xs, p: dmlcli.run("sign", xs),
    "activation_hard_sigmoid": lambda xs, p: dmlcli.run("activation_hard_sigmoid", xs, alpha=p[0] or 0.2, beta=0.5),
}
BOUNDS = st.sampled_from([0.0, -0.0, 0.5, -0.5, 2.0, -3.0, np.inf, -np.inf, np.nan, 1e-45, 1e30])


def _bounds(data, name: str, dtype) -> list:
    """Two bounds in order (NaN last); CLIP1's in the tensor's own type, as its typed Min and Max are."""
    bounds = sorted([data.draw(BOUNDS), data.draw(BOUNDS)], key=lambda v: (v != v, v))
    if name == "clip1":
        with np.errstate(all="ignore"):
            bounds = [np.array(b).astype(dtype).item() for b in bounds]
    return bounds


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_fast_path_matches_the_careful_path(monkeypatch, name, dtype, data):
    xs = data.draw(_values(dtype, specials=data.draw(st.booleans())))
    bounds = _bounds(data, name, dtype)
    fast = CASES[name](xs, bounds)
    careful = _careful(monkeypatch, lambda: CASES[name](xs, bounds))
    assert fast.dtype == careful.dtype and _bits(fast) == _bits(careful), (name, dtype, xs, bounds)


def test_fast_paths_are_taken_for_ordinary_values(monkeypatch):
    """Arrays without NaN or zeros take the one-call path: the careful path's np.copysign / np.where never run."""
    xs = np.linspace(-3, 3, 1000, dtype=np.float32)
    xs[xs == 0] = 0.25
    calls = []
    for name in ("copysign", "where"):
        original = getattr(np, name)
        monkeypatch.setattr(np, name, lambda *a, _f=original, _n=name, **k: calls.append(_n) or _f(*a, **k))
    for name, case in CASES.items():
        case(xs, (-0.5, 0.5))
    assert calls == []


@pytest.mark.parametrize("dtype", FLOATS)
def test_relu_without_trusting_np_clip_with_nan_matches_too(monkeypatch, dtype):
    """Where np.clip would not keep NaN bits (clip_keeps_nan_bits False), RELU checks for NaN itself."""
    xs = np.array([1.5, -2.0, 3.0, np.nan, -0.0, 0.0, -np.inf], dtype)
    careful = _careful(monkeypatch, lambda: dmlcli.run("activation_relu", xs))
    monkeypatch.setattr(activation, "clip_keeps_nan_bits", lambda dtype: False)
    for values in (xs, xs[[0, 1, 2]], xs[[0, 1, 3]]):
        expected = careful[: len(values)] if values is xs else _careful(
            monkeypatch, lambda: dmlcli.run("activation_relu", values))
        assert _bits(dmlcli.run("activation_relu", values)) == _bits(expected)


@pytest.mark.parametrize("name", ["clip", "clip1", "threshold"])
@SETTINGS
@given(data=st.data())
def test_clip_paths_without_trusting_np_clip_with_nan(monkeypatch, name, data):
    """Where np.clip would not keep NaN bits, CLIP, CLIP1 and THRESHOLD look for NaN in the input first."""
    xs = data.draw(_values("float32", specials=data.draw(st.booleans())))
    bounds = sorted([data.draw(BOUNDS), data.draw(BOUNDS)], key=lambda v: (v != v, v))
    careful = _careful(monkeypatch, lambda: CASES[name](xs, bounds))
    with monkeypatch.context() as patch:
        patch.setattr(selection, "clip_keeps_nan_bits", lambda dtype: False)
        assert _bits(CASES[name](xs, bounds)) == _bits(careful)


def test_clip_keeps_nan_bits_on_this_numpy():
    """The probe's answer here (NumPy's clip returns a NaN operand as it is); RELU's one-check path rests on it."""
    assert float_specials.clip_keeps_nan_bits(np.dtype(np.float32))
    assert float_specials.clip_keeps_nan_bits(np.dtype(np.float16))


def test_sign_dot_check():
    ones = np.sign(np.linspace(-3, 3, 1000, dtype=np.float32) + np.float32(0.001))
    assert arithmetic._all_plus_or_minus_one(ones)
    for special in (0.0, np.nan):
        spoiled = ones.copy()
        spoiled[500] = special
        assert not arithmetic._all_plus_or_minus_one(spoiled)


def test_specials_checks():
    values = np.array([1.0, -2.0, np.inf], np.float32)
    assert not float_specials.has_nan(values) and not float_specials.has_zero(values, negative=False)
    assert float_specials.has_nan(np.append(values, np.float32(-np.nan)))
    assert float_specials.has_zero(np.append(values, np.float32(0.0)), negative=False)
    assert not float_specials.has_zero(np.append(values, np.float32(0.0)), negative=True)
    assert float_specials.has_zero(np.append(values, np.float32(-0.0)), negative=True)
    assert not float_specials.has_zero(np.append(values, np.float32(-0.0)), negative=False)
    assert not float_specials.has_nan(np.zeros(0, np.float16))


# ---------------------------------------------------------------- MIN and MAX by whole vectors


def _sprinkled(data, dtype: str, count: int) -> np.ndarray:
    """`count` ordinary values with NaN encodings (signalling ones and payloads too), signed zeros and
    infinities at drawn positions: every whole vector and the remainder may hold them."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    return _sprinkle(data, rng.uniform(-4, 4, count).astype(dtype))


def _any_bits(data, dtype: str, count: int) -> np.ndarray:
    """`count` elements of any bit pattern (subnormals, infinities and NaN of any payload among them) or ordinary
    values, drawn either way, with NaN encodings, signed zeros and infinities at drawn positions besides (random
    bits give a zero seldom)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    width = np.dtype(dtype).itemsize * 8
    if data.draw(st.booleans()):
        values = rng.integers(0, 2**width, count, dtype=f"uint{width}").view(dtype)
    else:
        values = rng.uniform(-4, 4, count).astype(dtype)
    if data.draw(st.booleans()):  # one special every few elements (the bench's NaN every 97), in every part
        special = _special(dtype, data.draw(st.integers(0, 7)))
        values.view(f"uint{width}")[data.draw(st.integers(0, 96))::data.draw(st.integers(2, 97))] = special
    return _sprinkle(data, values)


def _special(dtype, kind: int) -> int:
    """The bits of a special value: kind 0-3 a NaN encoding (nan_patterns), 4-7 +0.0, -0.0, +inf, -inf."""
    patterns = float_specials.nan_patterns(np.dtype(dtype))
    if kind < len(patterns):
        return patterns[kind]
    value = np.array((0.0, -0.0, np.inf, -np.inf)[kind - len(patterns)], dtype)
    return int(value.view(f"uint{value.itemsize * 8}"))


def _sprinkle(data, values: np.ndarray) -> np.ndarray:
    """values with NaN encodings, signed zeros and infinities written at drawn positions."""
    count, dtype = values.size, values.dtype
    specials = data.draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, 7)), max_size=40))
    for position, kind in specials:
        values.view(f"uint{values.itemsize * 8}")[position] = _special(dtype, kind)
    return values


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_whole_vector_path_matches_the_careful_path(monkeypatch, name, dtype, data):
    """Arrays of whole vectors, with and without a remainder, NaN against numbers and against NaN, zeros
    against zeros: the bits of the careful path, which settles every element by the rule. Parts of one
    vector are checked for zeros one by one here, so that a tie in any part is looked for."""
    monkeypatch.setattr(selection, "_CHECKED_PART_BYTES", 4 * float_specials.WHOLE_VECTORS)
    count = data.draw(st.sampled_from([float_specials.WHOLE_VECTORS, 2 * float_specials.WHOLE_VECTORS,
                                       2 * float_specials.WHOLE_VECTORS + 37, 3 * float_specials.WHOLE_VECTORS - 1]))
    a, b = _sprinkled(data, dtype, count), _sprinkled(data, dtype, count)
    if data.draw(st.booleans()):  # ties of zeros in the same places
        places = data.draw(st.lists(st.integers(0, count - 1), max_size=20))
        a[places], b[places] = np.array(0.0, dtype), np.array(-0.0, dtype)
    fast = dmlcli.run(name, a, b)
    careful = _careful(monkeypatch, lambda: dmlcli.run(name, a, b))
    assert _bits(fast) == _bits(careful)


def test_whole_vector_path_needs_no_nan_check(monkeypatch):
    """Where the probe says np.fmax/np.fmin follow the rule, MIN and MAX of large arrays never look for NaN
    (the check that made them cost two reductions), NaN operands included, and still settle a zero tie."""
    if not float_specials.fmax_fmin_follow_nan_rule(np.dtype(np.float32)):
        pytest.skip("np.fmax/np.fmin do not follow the NaN rule on this machine")
    monkeypatch.setattr(selection, "has_nan", lambda values: pytest.fail("a NaN check ran"))
    a = np.linspace(-3, 3, 4096, dtype=np.float32)
    b = a[::-1].copy()
    a[[5, 700]], b[[5, 900]] = np.nan, np.nan
    a[100], b[100] = 0.0, -0.0
    a[200], b[200] = -0.0, 0.0
    largest, smallest = dmlcli.run("max", a, b), dmlcli.run("min", a, b)
    assert np.isnan(largest[5]) and largest[700] == b[700] and largest[900] == a[900]
    assert smallest[700] == b[700] and smallest[900] == a[900]
    assert not np.signbit(largest[[100, 200]]).any() and np.signbit(smallest[[100, 200]]).all()


def _fmax_operands_swapped(a, b, out):
    """np.fmax(b, a): on x86-64 the second of two NaN, and the first operand of a tie of zeros."""
    np.fmax(b, a, out=out)


def test_the_nan_rule_probe_tells_loops_apart():
    """The probe accepts np.fmax/np.fmin where they follow the rule (x86-64's vector loops do) and refuses a
    loop that propagates NaN (np.maximum), one that returns the second of two NaN, and one that quiets a
    signalling NaN (what C's fmaxf and Arm's fmaxnm may do)."""
    float32 = np.dtype(np.float32)
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert float_specials.fmax_fmin_follow_nan_rule(float32)

    def quieting(a, b, out):
        np.fmax(a, b, out=out)
        bits = out.view(np.uint32)
        bits[np.isnan(out)] |= np.uint32(1 << 22)

    for offset in (0, 1):
        assert float_specials.follows_nan_rule(np.fmin, float32, offset)
        for loop in (np.maximum, _fmax_operands_swapped, quieting):
            assert not float_specials.follows_nan_rule(loop, float32, offset)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("count", [2 * float_specials.WHOLE_VECTORS + 37, float_specials.WHOLE_VECTORS + 3])
def test_whole_vector_path_settles_the_remainder_by_the_rule(monkeypatch, name, count):
    """NumPy's scalar remainder loop (C's fmaxf) may quiet a signalling NaN or return the second of two NaN:
    the elements after the last whole vector go through the careful path, so the first NaN's bits come out."""
    patterns = float_specials.nan_patterns(np.dtype(np.float32))
    a, b = np.ones(count, np.float32), np.full(count, 2, np.float32)
    tail = np.arange(count - 64, count)
    a.view(np.uint32)[tail] = [patterns[i % 4] for i in range(64)]
    b.view(np.uint32)[tail[::2]] = [patterns[(i + 1) % 4] for i in range(32)]
    result = dmlcli.run(name, a, b)
    assert _bits(result) == _bits(_careful(monkeypatch, lambda: dmlcli.run(name, a, b)))
    assert _bits(result[tail[::2]]) == _bits(a[tail[::2]]) and (result[tail[1::2]] == 2).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_zero_tie_in_any_part_is_settled(monkeypatch, dtype):
    """The result is checked for the losing zero part by part, as it is written: a tie in the last part alone
    (the first parts free of zeros) is found and settled, in either order of the operands."""
    monkeypatch.setattr(selection, "_CHECKED_PART_BYTES", 1)  # one vector per part
    count = 3 * float_specials.WHOLE_VECTORS
    a = np.linspace(1, 3, count).astype(dtype)
    b = a[::-1].copy()
    at = count - 5
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        a[at], b[at] = first, second
        assert not np.signbit(dmlcli.run("max", a, b)[at]) and np.signbit(dmlcli.run("min", a, b)[at])


# ---------------------------------------------------------------- CLIP, CLIP1, THRESHOLD part by part

PART_ELEMENTS = 7  # parts of 7 float32 elements here: the sizes below end inside, at and past part boundaries


@pytest.mark.parametrize("name", ["clip", "clip1", "threshold"])
@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_clip_by_parts_matches_the_careful_path(monkeypatch, name, dtype, data):
    """np.clip written part by part, each part looked for NaN as it is written: the careful path's bits for
    arrays with NaN encodings (signalling ones, payloads), signed zeros and infinities in any part, the
    first part or only the last, and bounds of either sign, zero or infinite."""
    monkeypatch.setattr(selection, "_CHECKED_PART_BYTES", 4 * PART_ELEMENTS)
    count = data.draw(st.sampled_from([1, 6, 7, 8, 13, 14, 15, 50]))
    xs = _sprinkled(data, dtype, count)
    bounds = _bounds(data, name, dtype)
    fast = CASES[name](xs, bounds)
    careful = _careful(monkeypatch, lambda: CASES[name](xs, bounds))
    assert _bits(fast) == _bits(careful), (name, dtype, xs, bounds)


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_nan_in_the_last_part_alone_is_found(monkeypatch, dtype):
    """The first parts free of NaN pass their checks; a NaN in the last part (a signalling one too) still sends
    the call to the careful path, which gives Min there."""
    monkeypatch.setattr(selection, "_CHECKED_PART_BYTES", 4 * PART_ELEMENTS)
    patterns = float_specials.nan_patterns(np.dtype(dtype))
    for pattern in patterns:
        xs = np.linspace(-3, 3, 5 * PART_ELEMENTS + 3).astype(dtype)
        xs.view(f"uint{xs.itemsize * 8}")[-2] = pattern
        result = dmlcli.run("clip", xs, min=-0.5, max=0.5)
        assert result[-2] == np.array(-0.5, dtype) and (np.abs(result[:-2]) <= 0.5).all()


def test_clip_of_a_strided_input_takes_the_whole_array_check(monkeypatch):
    """An input that is not C-contiguous (a transposed view) is clipped whole and checked whole: np.clip's
    result without NaN, None (the careful path) with one; through dmlcli.run, the careful path's bits."""
    monkeypatch.setattr(selection, "_CHECKED_PART_BYTES", 4 * PART_ELEMENTS)
    low, high = np.float32(-0.5), np.float32(0.5)
    xs = np.linspace(-3, 3, 60, dtype=np.float32).reshape(6, 10)
    for values in (xs.T, xs[:, ::2]):
        assert not values.flags.c_contiguous
        assert _bits(selection._clip_checked_by_parts(values, low, high)) == _bits(np.clip(values, low, high))
    xs[2, 3] = np.nan
    assert selection._clip_checked_by_parts(xs.T, low, high) is None
    careful = _careful(monkeypatch, lambda: dmlcli.run("clip", xs.T, min=-0.5, max=0.5))
    assert _bits(dmlcli.run("clip", xs.T, min=-0.5, max=0.5)) == _bits(careful)


def _rule_pick(a: np.float32, b: np.float32, larger: bool) -> np.float32:
    """max(a, b) or min(a, b) by the rule, written plainly on scalars: a NaN operand loses to the other (both NaN:
    the first); equal values have equal bits but -0.0 and +0.0, for which max gives the AND of the bits, min the
    OR; else the larger or the smaller."""
    if np.isnan(b):
        return a
    if np.isnan(a):
        return b
    if a == b:
        bits = a.view(np.uint32) & b.view(np.uint32) if larger else a.view(np.uint32) | b.view(np.uint32)
        return np.uint32(bits).view(np.float32)
    return (a if a > b else b) if larger else (a if a < b else b)


def _rule_clip(xs: np.ndarray, low, high) -> np.ndarray:
    """CLIP's result as the entry's notes give it, element by element: min(Max, max(Min, x)) in float32 (FLOAT16
    widened exactly), rounded once to the tensor's type; the oracle of the part-by-part kernel."""
    with np.errstate(all="ignore"):
        wide = xs.astype(np.float32)
        low32, high32 = np.float32(low), np.float32(high)
        picked = [_rule_pick(high32, _rule_pick(low32, value, True), False) for value in wide]
        return np.array(picked, np.float32).astype(xs.dtype)


def _with_subnormals(data, xs: np.ndarray) -> np.ndarray:
    """xs with the type's smallest subnormals (either sign) at drawn positions."""
    tiny = np.array(np.finfo(xs.dtype).smallest_subnormal, xs.dtype)
    for position in data.draw(st.lists(st.integers(0, xs.size - 1), max_size=4)):
        xs[position] = tiny if data.draw(st.booleans()) else -tiny
    return xs


@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_clip_by_parts_matches_the_rule_written_plainly(monkeypatch, dtype, data):
    """The part-by-part kernel against the rule written element by element: NaN encodings (signalling, payloads),
    signed zeros, infinities and subnormals anywhere, sizes inside, at and past the parts' boundaries, bounds of
    either sign, zero, subnormal or infinite (CLIP with Min < Max; Min >= Max and NaN bounds too)."""
    monkeypatch.setattr(selection, "_CHECKED_PART_BYTES", 4 * PART_ELEMENTS)
    count = data.draw(st.sampled_from([1, 6, 7, 8, 13, 14, 15, 50]))
    xs = _with_subnormals(data, _sprinkled(data, dtype, count))
    low, high = data.draw(BOUNDS), data.draw(BOUNDS)
    if data.draw(st.booleans()):
        low, high = sorted([low, high], key=lambda v: (v != v, v))
    assert _bits(dmlcli.run("clip", xs, min=low, max=high)) == _bits(_rule_clip(xs, low, high)), (xs, low, high)


@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_modulus_floor_by_np_remainder_matches_the_rule(monkeypatch, dtype, data):
    """MODULUS_FLOOR's float kernel takes np.remainder where the probe says it is the rule and its result holds no
    NaN: the same bits as the rule written out (arithmetic._floor_modulus), with and without NaN operands, zeros
    of both signs, infinities and subnormals on either side."""
    a = data.draw(_values(dtype, specials=True))
    b = data.draw(_values(dtype, specials=True).map(lambda y: np.resize(y, a.size)))
    fast = dmlcli.run("modulus_floor", a, b)
    with monkeypatch.context() as patch:
        patch.setattr(arithmetic, "remainder_is_floor_modulus", lambda: False)
        careful = dmlcli.run("modulus_floor", a, b)
    assert _bits(fast) == _bits(careful)


def test_remainder_probe_finds_a_different_rule(monkeypatch):
    """The probe answers no for a remainder that is not the floor rule (C's fmod, the truncating one)."""
    arithmetic.remainder_is_floor_modulus.cache_clear()
    try:
        monkeypatch.setattr(np, "remainder", np.fmod)
        assert arithmetic.remainder_is_floor_modulus() is False
    finally:
        monkeypatch.undo()
        arithmetic.remainder_is_floor_modulus.cache_clear()
    assert arithmetic.remainder_is_floor_modulus() in (True, False)


# ---------------------------------------------------------------- SIGN part by part


def _rule_sign(xs: np.ndarray) -> np.ndarray:
    """SIGN as the entry's notes give it, element by element: 1 above zero, -1 below, else the element itself (a
    zero keeps its sign, a NaN its bits); the oracle of the part-by-part kernel."""
    out = xs.copy().reshape(-1)
    for index, value in enumerate(xs.reshape(-1).tolist()):
        if value > 0:
            out[index] = 1
        elif value < 0:
            out[index] = -1
    return out.reshape(xs.shape)


@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_sign_by_parts_matches_the_rule_and_the_careful_path(monkeypatch, dtype, data):
    """np.sign written part by part (7 elements a part here), each part looked for zeros as it is written: the
    rule's bits and the careful path's for any bit pattern, NaN encodings (signalling ones, payloads) and zeros of
    either sign in any part, the first part or only the last, sizes inside, at and past the parts' boundaries."""
    monkeypatch.setattr(arithmetic, "_SIGN_PART_BYTES", np.dtype(dtype).itemsize * PART_ELEMENTS)
    count = data.draw(st.sampled_from([1, 6, 7, 8, 13, 14, 15, 50, 200]))
    xs = _any_bits(data, dtype, count)
    fast = dmlcli.run("sign", xs)
    assert fast.dtype == xs.dtype and _bits(fast) == _bits(_rule_sign(xs)), xs
    assert _bits(fast) == _bits(_careful(monkeypatch, lambda: dmlcli.run("sign", xs)))


@pytest.mark.parametrize("dtype", FLOATS)
def test_sign_settles_a_negative_zero_in_the_last_part_alone(dtype):
    """Parts of the default size, the first ones free of zeros: a -0.0 in the last part (after NaN in every part)
    is found and given back; a +0.0 stays."""
    xs = np.linspace(1, 3, 3 * arithmetic._SIGN_PART_BYTES // np.dtype(dtype).itemsize + 5).astype(dtype)
    xs[::97] = np.nan
    xs[-3], xs[-4] = -0.0, 0.0
    result = dmlcli.run("sign", xs)
    assert _bits(result) == _bits(_rule_sign(xs))
    assert np.signbit(result[-3]) and result[-3] == 0 and not np.signbit(result[-4])


def test_sign_with_nan_takes_neither_np_copysign_nor_np_where(monkeypatch):
    """Where the probe says np.sign returns NaN as it is, a NaN every 97 elements costs SIGN nothing: the settling
    path (np.copysign, np.isnan, np.where over the tensor) never runs."""
    if not float_specials.sign_keeps_nan_bits(np.dtype(np.float32)):
        pytest.skip("np.sign does not return NaN as it is here")
    xs = np.linspace(-3, 3, 5000, dtype=np.float32)
    xs[::97] = np.nan
    with monkeypatch.context() as patch:
        for name in ("copysign", "where", "isnan"):
            patch.setattr(np, name, lambda *a, _n=name, **k: pytest.fail(f"np.{_n} ran"))
        result = dmlcli.run("sign", xs)
    assert np.isnan(result[::97]).all() and set(np.unique(np.delete(result, np.s_[::97])).tolist()) == {-1.0, 1.0}


def test_sign_of_a_strided_input_takes_the_settling_path():
    """An input that is not C-contiguous (a transposed view, a stride) is settled whole: the rule's bits."""
    xs = np.linspace(-3, 3, 60, dtype=np.float32).reshape(6, 10)
    xs[1, 2], xs[3, 4], xs[4, 4] = -0.0, 0.0, np.nan
    xs.view(np.uint32)[5, 5] = float_specials.nan_patterns(np.dtype(np.float32))[1]  # a signalling NaN
    for values in (xs.T, xs[:, ::2]):
        assert not values.flags.c_contiguous
        assert _bits(dmlcli.run("sign", values)) == _bits(_rule_sign(np.ascontiguousarray(values)))


@pytest.mark.parametrize("dtype", FLOATS)
def test_sign_keeps_nan_bits_on_this_numpy(dtype):
    """The probe's answer here (NumPy 2's np.sign returns a NaN operand as it is); SIGN's parts rest on it."""
    assert float_specials.sign_keeps_nan_bits(np.dtype(dtype))


def test_the_nan_bits_probe_tells_functions_apart():
    """The probe accepts a function that returns NaN as it is and refuses one that quiets a signalling NaN, one
    that gives its own NaN, and one that does either only in the scalar tail of the array or only at an unaligned
    start."""
    float32 = np.dtype(np.float32)
    assert float_specials.returns_nan_as_is(np.copy, float32)
    assert float_specials.returns_nan_as_is(np.sign, float32)

    def quieting(values):
        out = values.copy()
        out.view(np.uint32)[np.isnan(out)] |= np.uint32(1 << 22)
        return out

    def own_nan(values):
        return np.where(np.isnan(values), np.float32(np.nan), values)

    def own_nan_in_the_tail(values):
        out = values.copy()
        out[-1:] = own_nan(out[-1:])
        return out

    def quieting_when_unaligned(values):
        return values.copy() if values.ctypes.data % 8 == 0 else quieting(values)

    for function in (quieting, own_nan, own_nan_in_the_tail, quieting_when_unaligned):
        assert not float_specials.returns_nan_as_is(function, float32), function.__name__


# ---------------------------------------------------------------- THRESHOLD by whole vectors


@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_threshold_by_whole_vectors_matches_the_rule_and_the_careful_path(monkeypatch, dtype, data):
    """np.fmax against a vector of Min (one vector a part here), the remainder by the checked path: the rule's bits
    and the careful path's, for any bit pattern, NaN encodings and zeros of either sign in any part, the last part
    alone, the remainder alone, and any Min (zero of either sign: ties; NaN; infinite; subnormal), FLOAT16 widened
    to float32 first as the kernel does."""
    monkeypatch.setattr(selection, "_BOUND_PART_BYTES", 4 * float_specials.WHOLE_VECTORS)
    vectors = float_specials.WHOLE_VECTORS
    count = data.draw(st.sampled_from([vectors, 2 * vectors, 2 * vectors + 37, 3 * vectors - 1]))
    xs = _any_bits(data, dtype, count)
    low = data.draw(BOUNDS)
    if low == 0 and data.draw(st.booleans()):  # ties with the bound, in any part
        places = data.draw(st.lists(st.integers(0, count - 1), max_size=20))
        xs[places] = np.array(-low, dtype)
    if data.draw(st.booleans()):  # +0.0's ties looked for too, as where the loop's ties are not known
        monkeypatch.setattr(selection, "fmax_gives_positive_zero", lambda dtype: False)
    fast = dmlcli.run("threshold", xs, min=low)
    with np.errstate(all="ignore"):
        wide, low32 = xs.astype(np.float32), np.float32(low)
        expected = np.array([_rule_pick(value, low32, True) for value in wide], np.float32).astype(dtype)
    assert _bits(fast) == _bits(expected), (xs, low)
    assert _bits(fast) == _bits(_careful(monkeypatch, lambda: dmlcli.run("threshold", xs, min=low)))


def test_threshold_by_whole_vectors_looks_for_no_nan(monkeypatch):
    """Where the probe says np.fmax's vector loops follow the NaN rule, THRESHOLD of a large array with a NaN every
    97 elements (signalling ones too) looks for NaN only in the remainder after the whole vectors (11 elements
    here) and never takes np.clip's path: the loop gives Min."""
    if not float_specials.fmax_fmin_follow_nan_rule(np.dtype(np.float32)):
        pytest.skip("np.fmax does not follow the NaN rule on this machine")
    checked = []
    monkeypatch.setattr(selection, "has_nan", lambda values: checked.append(values.size) or True)
    monkeypatch.setattr(selection, "_fast_clip", lambda *a: pytest.fail("np.clip's path ran"))
    xs = np.linspace(-3, 3, 4 * float_specials.WHOLE_VECTORS + 11, dtype=np.float32)
    xs[::97] = np.nan
    xs.view(np.uint32)[1::97] = float_specials.nan_patterns(np.dtype(np.float32))[1]
    result = dmlcli.run("threshold", xs, min=0.25)
    assert checked == [11]
    assert (result[::97] == 0.25).all() and (result[1::97] == 0.25).all()
    assert _bits(result) == _bits(np.maximum(np.where(np.isnan(xs), np.float32(0.25), xs), np.float32(0.25)))


@pytest.mark.parametrize("loop_settles_ties", [True, False])
@pytest.mark.parametrize("low", [0.0, -0.0])
def test_threshold_settles_a_zero_tie_in_the_last_part_alone(monkeypatch, low, loop_settles_ties):
    """A zero Min meets the zero of the other sign in the last part only (one vector a part, the first parts free
    of zeros): max(-0.0, +0.0) = +0.0 in either order, where the probe says np.fmax settles Min = +0.0's ties and
    where it does not (the tie then found as that part is written, and settled)."""
    if loop_settles_ties and not float_specials.fmax_gives_positive_zero(np.dtype(np.float32)):
        pytest.skip("np.fmax does not give +0.0 for -0.0 against +0.0 here")
    if not loop_settles_ties:
        monkeypatch.setattr(selection, "fmax_gives_positive_zero", lambda dtype: False)
    monkeypatch.setattr(selection, "_BOUND_PART_BYTES", 4 * float_specials.WHOLE_VECTORS)
    count = 3 * float_specials.WHOLE_VECTORS
    xs = np.linspace(1, 3, count, dtype=np.float32)
    xs[count - 5], xs[count - 6] = -low, low
    result = dmlcli.run("threshold", xs, min=low)
    assert result[count - 5] == 0 and not np.signbit(result[count - 5])
    assert result[count - 6] == 0 and np.signbit(result[count - 6]) == np.signbit(np.float32(low))


def test_the_zero_tie_probe_tells_loops_apart():
    """The probe accepts np.fmax with +0.0 second where x86-64's vector loops return the second operand of a tie,
    and refuses a loop that returns the first (-0.0) anywhere: at every lane, or in one lane only."""
    float32 = np.dtype(np.float32)
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert float_specials.fmax_gives_positive_zero(float32)

    def first_in_one_lane(a, b, out):
        np.fmax(a, b, out=out)
        out[5] = a[5]

    for loop in (_fmax_operands_swapped, first_in_one_lane):
        assert not float_specials.gives_positive_zero(loop, float32), loop.__name__
