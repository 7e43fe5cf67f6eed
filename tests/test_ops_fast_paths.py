"""The one-call fast paths of MAX, MIN, CLIP, CLIP1, THRESHOLD, RELU and SIGN give the careful path's bits.

Each of these kernels first tries NumPy's single call (np.fmax, np.clip, np.sign) and keeps its result where
one reduction shows no NaN and no zero that the NaN and signed-zero rule could settle otherwise
(dmlcli/operators/float_specials.py). The careful path, which settles every element by the rule, is the one
the per-family tests prove against independent references; here every fast result is compared bit for bit
with it (forced by making the NaN check always answer yes), on arrays with and without NaN, signed zeros,
infinities and subnormals, and with zero, NaN and infinite bounds.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.operators import activation, arithmetic, float_specials, selection

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
    """function() with every fast path turned down (the NaN check always says yes, np.clip is not trusted
    with NaN bits, SIGN's dot-product check always says no)."""
    with monkeypatch.context() as patch:
        for module in MODULES:
            patch.setattr(module, "has_nan", lambda values: True)
        patch.setattr(activation, "clip_keeps_nan_bits", lambda dtype: False)
        patch.setattr(selection, "clip_keeps_nan_bits", lambda dtype: False)
        patch.setattr(arithmetic, "_all_plus_or_minus_one", lambda signs: False)
        return function()


CASES = {
    "max": lambda xs, p: dmlcli.run("max", xs, xs[::-1].copy()),
    "min": lambda xs, p: dmlcli.run("min", xs, xs[::-1].copy()),
    "clip": lambda xs, p: dmlcli.run("clip", xs, min=p[0], max=p[1]),
    "clip1": lambda xs, p: dmlcli.run("clip1", xs, min=p[0], max=p[1]),
    "threshold": lambda xs, p: dmlcli.run("threshold", xs, min=p[0]),
    "activation_relu": lambda xs, p: dmlcli.run("activation_relu", xs),
    "sign": lambda xs, p: dmlcli.run("sign", xs),
}
BOUNDS = st.sampled_from([0.0, -0.0, 0.5, -0.5, 2.0, -3.0, np.inf, -np.inf, np.nan, 1e-45, 1e30])


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", FLOATS)
@SETTINGS
@given(data=st.data())
def test_fast_path_matches_the_careful_path(monkeypatch, name, dtype, data):
    xs = data.draw(_values(dtype, specials=data.draw(st.booleans())))
    bounds = sorted([data.draw(BOUNDS), data.draw(BOUNDS)], key=lambda v: (v != v, v))
    if name == "clip1":
        with np.errstate(all="ignore"):
            bounds = [np.array(b).astype(dtype).item() for b in bounds]
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
