"""The compiled loops (dmlcli/operators/compiled_loops.py, Numba, turned on by DMLCLI_COMPILED_LOOPS) give the NumPy
kernels' bits: CLIP, CLIP1 and THRESHOLD's clamp, SIGN, ACTIVATION_RELU, ACTIVATION_GELU's FLOAT32 core, MVN,
ACTIVATION_SOFTMAX over the last axis, MAX_POOLING by 3 x 3 and 2 x 2 windows, CAST from FLOAT32/FLOAT64 to every
integer type and between FLOAT32 and FLOAT64, over any bit pattern (NaN of each sign and payload, subnormals,
infinities), the range edges of every integer type, zero and infinite bounds, and tensors past the NumPy kernels'
block size.
The NumPy kernels are proven against independent references in the per-family tests; a few cases here are
held against Python's arithmetic directly too. Skipped where Numba is not installed.
"""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

import dmlcli  # noqa: E402
from dmlcli.errors import DmlcliWarning, ValidationError  # noqa: E402
from dmlcli.operators.elementwise import gelu  # noqa: E402
from dmlcli.operators.numerics import compiled_loops  # noqa: E402
from dmlcli.operators.numerics.conversions import integer_bounds  # noqa: E402
from dmlcli.operators.numerics.float_specials import nan_patterns  # noqa: E402

from conftest import REPO  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
INTEGERS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
FLOATS = ("float32", "float64")
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1e-45, -1e-45, 5e-324, 0.5, -0.5, 0.999, -0.999,
            1e30, -1e30]


@pytest.fixture
def loops_state():
    """Restores whatever the loops were before the test (tests turn them on and off)."""
    saved = dict(compiled_loops._state)
    yield
    compiled_loops._state.clear()
    compiled_loops._state.update(saved)


def both_ways(function):
    """function() with the compiled loops on, then off: the two results."""
    assert compiled_loops.use(True) is not None
    compiled = function()
    compiled_loops.use(False)
    return compiled, function()


def bits(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    return array.view(f"uint{array.itemsize * 8}")


def edges(target: str) -> list[float]:
    """The values around each end of an integer type's range, as floats."""
    low, above = integer_bounds(target)
    near = [low - 1.0, low - 0.5, low, low + 0.5, above - 1.0, above - 0.5, above, above + 1.0, above * 2, low * 2]
    return near + [float(np.nextafter(np.float32(v), np.float32(s))) for v in (low, above) for s in (-np.inf, np.inf)]


def any_floats(dtype: str, extra: list[float]):
    """Arrays of `dtype` from any bit pattern, the specials and `extra` values, mixed."""
    width = np.dtype(dtype).itemsize * 8
    pattern = st.integers(0, 2 ** width - 1).map(lambda b: ("bits", b))
    value = st.sampled_from(SPECIALS + extra).map(lambda v: ("value", v))
    ordinary = st.floats(-1e4, 1e4).map(lambda v: ("value", v))

    def build(items) -> np.ndarray:
        out = np.empty(len(items), dtype)
        for index, (kind, item) in enumerate(items):
            if kind == "bits":
                bits(out)[index] = item
            else:
                with np.errstate(all="ignore"):
                    out[index] = np.float64(item).astype(dtype)
        return out

    return st.lists(st.one_of(pattern, value, ordinary), min_size=1, max_size=300).map(build)


@pytest.mark.parametrize("target", INTEGERS)
@pytest.mark.parametrize("source", FLOATS)
@SETTINGS
@given(data=st.data())
def test_cast_to_integers_gives_the_numpy_kernels_bits(loops_state, source, target, data):
    x = data.draw(any_floats(source, edges(target)))
    compiled, numpy = both_ways(lambda: dmlcli.run("cast", x, output_dtype=target))
    assert compiled.dtype == numpy.dtype == np.dtype(target)
    assert np.array_equal(compiled, numpy)


@pytest.mark.parametrize("source, target", [("float64", "float32"), ("float32", "float64")])
@SETTINGS
@given(data=st.data())
def test_float_casts_give_the_numpy_kernels_bits(loops_state, source, target, data):
    x = data.draw(any_floats(source, [3.4028235e38, 3.4028236e38, 1.4e-45, 7e-46, 1.1754942e-38]))
    compiled, numpy = both_ways(lambda: dmlcli.run("cast", x, output_dtype=target))
    assert np.array_equal(bits(compiled), bits(numpy))


BOUNDS = [0.0, -0.0, 0.5, -0.5, 1e-45, -1e-45, math.inf, -math.inf, math.nan, 3.0]


@SETTINGS
@given(data=st.data(), op=st.sampled_from(["clip", "clip1"]), dtype=st.sampled_from(["float32", "float16"]),
       low=st.sampled_from(BOUNDS), high=st.sampled_from(BOUNDS), scaled=st.booleans())
def test_clip_gives_the_numpy_kernels_bits(loops_state, data, op, dtype, low, high, scaled):
    x = data.draw(any_floats(dtype, [0.5, -0.5, 3.0] + [0.0, -0.0] * 4))
    options = {"min": low, "max": high}
    if scaled:
        options.update(scale=2.0, bias=-0.5)
    compiled, numpy = both_ways(lambda: dmlcli.run(op, x, **options))
    assert np.array_equal(bits(compiled), bits(numpy))


@SETTINGS
@given(data=st.data(), low=st.sampled_from(BOUNDS))
def test_threshold_gives_the_numpy_kernels_bits(loops_state, data, low):
    x = data.draw(any_floats("float32", [0.5, -0.5, 3.0] + [0.0, -0.0] * 4))
    compiled, numpy = both_ways(lambda: dmlcli.run("threshold", x, min=low))
    assert np.array_equal(bits(compiled), bits(numpy))


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(["float32", "float16"]), fused=st.booleans())
def test_relu_gives_the_numpy_kernels_bits(loops_state, data, dtype, fused):
    """ACTIVATION_RELU compiled (one pass instead of a clip and a search for -0.0), alone and as a convolution's
    fused activation: any bit pattern, signalling NaN and payloads of either sign, zeros of both signs often; the
    NumPy kernel's bits (FLOAT16 keeps NumPy's path), and the rule's: the element where above zero or NaN, else +0.0."""
    x = data.draw(any_floats(dtype, [0.5, -0.5, 3.0] + [0.0, -0.0] * 4))
    patterns = nan_patterns(np.dtype(dtype))
    for position in data.draw(st.lists(st.integers(0, x.size - 1), max_size=8)):
        bits(x)[position] = patterns[position % len(patterns)]
    if fused:
        shaped = x.reshape(1, 1, -1)
        weights = np.ones((1, 1, 1), dtype)
        run = lambda: dmlcli.run("convolution", shaped, weights, fused_activation="relu")  # noqa: E731
    else:
        run = lambda: dmlcli.run("activation_relu", x)  # noqa: E731
    compiled, numpy = both_ways(run)
    assert np.array_equal(bits(compiled), bits(numpy))
    if not fused:  # (the convolution's product by 1 quiets a signalling NaN first)
        rule = x.copy()
        with np.errstate(invalid="ignore"):
            rule[x <= 0] = 0.0
        assert np.array_equal(bits(compiled), bits(rule))


@SETTINGS
@given(data=st.data(), rows=st.integers(1, 4),
       n=st.sampled_from([1, 2, 7, 8, 9, 15, 16, 17, 64, 100, 127, 128, 129, 200, 264, 768, 1000, 3001]),
       operator=st.sampled_from(["mean_variance_normalization1", "mean_variance_normalization2"]),
       use_mean=st.booleans(), use_variance=st.booleans(), with_scale=st.booleans(), with_bias=st.booleans(),
       nan_at=st.sampled_from([None, "x", "scale", "bias"]))
def test_mvn_over_the_last_axis_gives_the_numpy_kernels_bits(loops_state, data, rows, n, operator, use_mean,
                                                             use_variance, with_scale, with_bias, nan_at):
    """MEAN_VARIANCE_NORMALIZATION1/2 over the last axis compiled (rows short and long: NumPy's pairwise sums split
    rows past 128 values into halves), with and without Scale and Bias, UseMean and UseVariance both ways: values of
    every magnitude, zeros of both signs, infinities, subnormals, rows of equal values; a NaN anywhere sends the call
    to NumPy's kernel. The NumPy kernel's bits each time (its pairwise sums' order, its identity +0.0, its
    roundings)."""
    x = data.draw(any_floats("float32", [0.0, -0.0, 1.0, 3.0, 1e-40, 1e30, -1e30]))
    with np.errstate(over="ignore"):
        x = np.resize(x, (rows, 1, n)) * np.float32(data.draw(st.sampled_from([1.0, 1e-3, 1e20])))
    if data.draw(st.booleans()):
        x[0] = x[0, 0, 0]  # a row of one value: its deviation 0
    vectors = {}
    for name, wanted in (("scale", with_scale), ("bias", with_bias)):
        if wanted or nan_at == name:
            vectors[name] = np.random.default_rng(n).standard_normal((1, 1, n)).astype(np.float32)
    if nan_at in vectors:
        vectors[nan_at][0, 0, n // 2] = np.nan
    elif nan_at == "x":
        x[-1, 0, n - 1] = np.nan
    options = {"axes": [2], "epsilon": data.draw(st.sampled_from([1e-5, 0.0, 1.0]))}
    if operator.endswith("1"):
        options["normalize_variance"] = use_variance
    else:
        options.update(use_mean=use_mean, use_variance=use_variance)
    arguments = [x, vectors.get("scale"), vectors.get("bias")]
    compiled, numpy = both_ways(lambda: dmlcli.run(operator, *arguments, **options))
    assert np.array_equal(bits(compiled), bits(numpy))


def test_the_mvn_loop_takes_only_its_cases(loops_state):
    loops = compiled_loops.use(True)
    x = np.ones((2, 128), np.float32)
    assert loops.mvn_rows(x, None, None, 1e-5, True, True) is not None
    assert loops.mvn_rows(np.ones((2, 129), np.float32), None, None, 1e-5, True, True) is not None
    assert loops.mvn_rows(x.astype(np.float64), None, None, 1e-5, True, True) is None
    assert loops.mvn_rows(x, np.ones((2, 128), np.float32), None, 1e-5, True, True) is None  # a Scale per row
    x[1, 5] = np.nan
    assert loops.mvn_rows(x, None, None, 1e-5, True, True) is None


@SETTINGS
@given(data=st.data(), rows=st.integers(1, 6), n=st.sampled_from([1, 2, 7, 8, 9, 16, 17, 64, 128, 129, 300, 1000]),
       operator=st.sampled_from(["activation_softmax", "activation_softmax1"]),
       special=st.sampled_from([None, "-inf", "+inf", "all -inf", "nan"]))
def test_softmax_over_the_last_axis_gives_the_numpy_kernels_bits(loops_state, data, rows, n, operator, special):
    """ACTIVATION_SOFTMAX/SOFTMAX1 over the last axis compiled (the maximum and difference, NumPy's exp, the pairwise
    sum and division): values of every magnitude, zeros of both signs, subnormals, a row's -inf (exp gives 0), +inf
    (inf - inf: the default NaN), a row of -inf; a NaN anywhere sends the call to NumPy's kernel. The NumPy kernel's
    bits each time."""
    x = data.draw(any_floats("float32", [0.0, -0.0, 1.0, 3.0, 1e-40, 80.0, -80.0]))
    x = np.resize(x[np.isfinite(x)] if np.isfinite(x).any() else np.zeros(1, np.float32), (1, rows, n))
    last = x.reshape(-1)
    if special == "-inf":
        last[n // 2] = -np.inf
    elif special == "+inf":
        last[-1] = np.inf
    elif special == "all -inf":
        x[0, 0] = -np.inf
    elif special == "nan":
        last[data.draw(st.integers(0, last.size - 1))] = np.nan
    options = {"axes": [2]} if operator.endswith("1") else {}
    compiled, numpy = both_ways(lambda: dmlcli.run(operator, x, **options))
    assert np.array_equal(bits(compiled), bits(numpy))


def test_the_softmax_loop_takes_only_its_cases(loops_state):
    loops = compiled_loops.use(True)
    x = np.ones((2, 16), np.float32)
    assert loops.softmax_rows(x) is not None
    assert loops.softmax_rows(x.astype(np.float64)) is None
    x[1, 5] = np.nan
    assert loops.softmax_rows(x) is None


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(["float32", "float16"]))
def test_sign_gives_the_numpy_kernels_bits(loops_state, data, dtype):
    """Any bit pattern (signalling NaN and payloads of either sign, subnormals, infinities), zeros of both signs
    often: the compiled loop's bits (FLOAT16 keeps NumPy's path: the loops take FLOAT32/FLOAT64) are np.sign's part by
    part; and the rule's, written here: 1 above zero, -1 below, the element itself otherwise."""
    x = data.draw(any_floats(dtype, [0.5, -0.5, 3.0] + [0.0, -0.0] * 4))
    patterns = nan_patterns(np.dtype(dtype))  # signalling NaN and payloads of either sign, often
    for position in data.draw(st.lists(st.integers(0, x.size - 1), max_size=8)):
        bits(x)[position] = patterns[position % len(patterns)]
    compiled, numpy = both_ways(lambda: dmlcli.run("sign", x))
    assert np.array_equal(bits(compiled), bits(numpy))
    rule = x.copy()
    with np.errstate(all="ignore"):
        rule[x > 0], rule[x < 0] = 1, -1
    assert np.array_equal(bits(compiled), bits(rule))


@SETTINGS
@given(data=st.data())
def test_gelu_gives_the_numpy_kernels_bits(loops_state, data):
    """ACTIVATION_GELU's FLOAT32 path compiled (one call instead of about 30 NumPy passes): any bit pattern, values
    inside and past the polynomial's |x| <= 1.5, the infinities and NaNs of every payload: the NumPy kernel's bits,
    element by element (bench/gelu_erfc_check.py holds all 2^32 patterns to the reference, with the loops on or
    off)."""
    x = data.draw(any_floats("float32", [1.5, -1.5, 1.5000001, -1.4999999, 5.7, -5.7, 0.3, -1.0]))
    patterns = nan_patterns(np.dtype("float32"))
    for position in data.draw(st.lists(st.integers(0, x.size - 1), max_size=6)):
        bits(x)[position] = patterns[position % len(patterns)]
    compiled, numpy = both_ways(lambda: dmlcli.run("activation_gelu", x))
    assert np.array_equal(bits(compiled), bits(numpy))


# FLOAT32 values inside GELU's polynomial whose double lies near a FLOAT32 rounding boundary (found by gelu.py's own
# _near_a_float32_boundary over 2^20 random values): the loop must give their positions, the reference their bits.
GELU_NEAR_A_BOUNDARY = (0.7897790670394897, -1.247696042060852, 0.21034960448741913, -1.4064174890518188)


def test_gelu_loop_gives_the_positions_near_a_boundary_in_every_block(loops_state):
    """Values near a rounding boundary in the first, second and third of GELU's blocks: the loop gives their
    positions in the whole tensor (each block's own, offset), and dmlcli.run the NumPy kernel's bits."""
    loops = compiled_loops.use(True)
    block = compiled_loops.GELU_BLOCK
    x = (np.random.default_rng(5).standard_normal(2 * block + 100) * 0.5).astype(np.float32)
    positions = [5, block + 7, 2 * block + 50, 2 * block + 99]
    x[positions] = GELU_NEAR_A_BOUNDARY
    window = gelu._midpoint_window(gelu._APART)
    _, near = loops.gelu_float32_of(gelu._CORE_COEFFICIENTS, gelu._CORE_EDGE, gelu._SQRT1_2, gelu._ERF_SATURATES,
                                    window[0], gelu._LOW_BITS, window[1])(x)
    assert set(positions) <= set(near.tolist())
    compiled, numpy = both_ways(lambda: dmlcli.run("activation_gelu", x))
    assert np.array_equal(bits(compiled), bits(numpy))


def test_large_gelu_past_the_block(loops_state):
    """More elements than the kernel's block (2^16), a tenth past the polynomial: the NumPy kernel's bits."""
    x = (np.random.default_rng(7).standard_normal(3 * 2**16 + 11) * 1.2).astype(np.float32)
    compiled, numpy = both_ways(lambda: dmlcli.run("activation_gelu", x))
    assert np.array_equal(bits(compiled), bits(numpy))
    loops = compiled_loops.use(True)
    assert loops.gelu_float32_of((1.0,), np.float32(1.5), 0.5, 4.0, np.uint64(0), np.uint64(0),
                                 np.uint64(0))(np.zeros(3, np.float16)) is None


def test_sign_loop_takes_float64_and_refuses_other_types(loops_state):
    """The loop itself on FLOAT64 (which no SIGN support row holds, so not through dmlcli.run): the rule's bits for
    a signalling NaN, zeros, subnormals, infinities; None for types it does not compile (NumPy's path then)."""
    loops = compiled_loops.use(True)
    x = np.array([0.0, -0.0, 5e-324, -5e-324, math.inf, -math.inf, 2.5, -2.5, 0.0], np.float64)
    bits(x)[-1] = 0x7FF0000000000001  # a signalling NaN
    expected = np.array([0.0, -0.0, 1, -1, 1, -1, 1, -1, 0.0], np.float64)
    bits(expected)[-1] = 0x7FF0000000000001
    assert bits(loops.sign(x)).tolist() == bits(expected).tolist()
    assert loops.sign(np.zeros(3, np.float16)) is None and loops.sign(np.zeros(3, np.int32)) is None


def test_large_sign_and_threshold_past_the_parts(loops_state):
    """More elements than the NumPy kernels' parts (SIGN's 256 KiB, THRESHOLD's vectors of Min), with a NaN every
    97 elements and zeros of both signs in some parts, contiguous and strided: the compiled loops give the bits of
    np.sign part by part and of np.fmax by whole vectors (and of the settling paths, for the strided views)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(3 * (1 << 18) + 5).astype(np.float32)
    x[::97] = np.nan
    x[1::4099] = -0.0
    x[2::5003] = 0.0
    for view in (x, x[::3], x[1:]):
        compiled, numpy = both_ways(lambda: dmlcli.run("sign", view))
        assert np.array_equal(bits(compiled), bits(numpy))
        for low in (0.25, 0.0, -0.0, -1.0):
            compiled, numpy = both_ways(lambda: dmlcli.run("threshold", view, min=low))
            assert np.array_equal(bits(compiled), bits(numpy))


@pytest.mark.parametrize("target", ["uint8", "int32", "int64"])
def test_large_casts_past_the_block_size(loops_state, target):
    """More elements than the NumPy kernels' block (2^18), with NaN and values past the range in some blocks:
    the blocks that take astype's result and the ones that take the rule."""
    rng = np.random.default_rng(5)
    low, above = integer_bounds(target)
    x = rng.uniform(max(low, -1e6), min(above, 1e6), 3 * (1 << 18) + 7).astype(np.float32)
    x[(1 << 18) + 3::997] = np.nan
    x[2 * (1 << 18):2 * (1 << 18) + 50] = above * 4
    compiled, numpy = both_ways(lambda: dmlcli.run("cast", x, output_dtype=target))
    assert np.array_equal(compiled, numpy)


def test_large_clip_and_strided_views(loops_state):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(3 * (1 << 20) + 5).astype(np.float32)
    x[::4099] = np.nan
    x[1::5003] = -0.0
    for view in (x, x[::3], x.reshape(-1, 5)[:, 1:4] if x.size % 5 == 0 else x[1:]):
        for low, high in ((-0.5, 0.5), (0.0, 1.0), (-1.0, -0.0)):
            compiled, numpy = both_ways(lambda: dmlcli.run("clip", view, min=low, max=high))
            assert np.array_equal(bits(compiled), bits(numpy))


def test_cast_follows_the_rule_written_in_python(loops_state):
    """Independent of the NumPy kernels: toward zero, saturating, NaN to 0."""
    values = [-1.5, -0.7, -0.0, 0.0, 0.9, 254.99, 255.0, 255.5, 256.0, 1e10, -1e10, math.inf, -math.inf, math.nan]
    x = np.array(values, np.float32)
    compiled_loops.use(True)
    for target in ("uint8", "int8", "int32"):
        info = np.iinfo(target)
        expected = [0 if v != v else info.max if v >= info.max + 1 else info.min if v <= info.min - 1 else math.trunc(v)
                    for v in x.astype(np.float64)]
        assert dmlcli.run("cast", x, output_dtype=target).tolist() == expected


def test_an_unknown_setting_warns_and_keeps_numpy(loops_state, monkeypatch):
    monkeypatch.setenv(compiled_loops.ENVIRONMENT_VARIABLE, "maybe")
    compiled_loops._state.pop("loops", None)
    with pytest.warns(DmlcliWarning, match="DMLCLI_COMPILED_LOOPS='maybe' is not one of"):
        assert compiled_loops.active() is None
    assert compiled_loops.state()["on"] is False


def test_turned_on_without_numba_warns_and_keeps_numpy(loops_state, monkeypatch):
    monkeypatch.setenv(compiled_loops.ENVIRONMENT_VARIABLE, "1")
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    compiled_loops._state.clear()
    with pytest.warns(DmlcliWarning, match="numba is not installed"):
        assert compiled_loops.active() is None
    x = np.array([np.nan, 300.0, -2.0], np.float32)
    assert dmlcli.run("cast", x, output_dtype="uint8").tolist() == [0, 255, 0]


def _cli(*args: str, setting: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != compiled_loops.ENVIRONMENT_VARIABLE}
    if setting is not None:
        env[compiled_loops.ENVIRONMENT_VARIABLE] = setting
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "dmlcli", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=REPO)


def test_the_command_line_reads_the_setting():
    args = ("run", "cast", "[-1.5, 300, NaN, 3.7, -0.0]", "--dtype", "float32", "--output-dtype", "uint8", "-o", "-")
    on, off = _cli(*args, setting="1"), _cli(*args, setting=None)
    assert on.returncode == off.returncode == 0, on.stderr + off.stderr
    assert on.stdout == off.stdout
    assert '"data": [0, 255, 0, 3, 0]' in on.stdout
    info_on, info_off = _cli("info", setting="yes"), _cli("info", setting=None)
    assert "compiled loops on (Numba " in info_on.stdout
    assert "compiled loops off (set DMLCLI_COMPILED_LOOPS=1 to use them)" in info_off.stdout
    odd = _cli(*args, setting="sometimes")
    assert odd.returncode == 0 and odd.stdout == off.stdout
    assert odd.stderr.count("\n") == 1 and "DMLCLI_COMPILED_LOOPS='sometimes' is not one of" in odd.stderr


@pytest.mark.parametrize("script, arguments", [("cpu_ops_bench", ["--mib", "0.01", "--repeats", "1", "--ops", "clip"]),
                                               ("generation_cpu_bench", ["--mib", "1", "--repeats", "1"])])
def test_the_benches_time_the_compiled_loops(loops_state, monkeypatch, capsys, script, arguments):
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "bench"))
    assert importlib.import_module(script).main([*arguments, "--compiled-loops"]) == 0
    assert "compiled loops" in capsys.readouterr().out


@pytest.mark.parametrize("n, leaves", [(5, [(0, 5)]), (128, [(0, 128)]), (129, [(0, 64), (64, 65)]),
                                       (300, [(0, 72), (72, 72), (144, 72), (216, 84)])])
def test_the_pairwise_program_halves_as_numpy_does(n, leaves):
    """compiled_loops._pairwise_program: NumPy's blocks (a half cut to a multiple of 8, halved again past 128)
    and the postfix order that adds them."""
    found_leaves, steps = compiled_loops._pairwise_program(n)
    assert [tuple(row) for row in found_leaves.tolist()] == leaves
    assert list(steps) == {1: [0], 2: [0, 1, -1], 4: [0, 1, -1, 2, 3, -1, -1]}[len(leaves)]


def _pooling_case(data, dtype: str, loops_windows: bool = False):
    """A 4-D input (zeros of both signs, infinities, subnormals among normal values) and a 2-D window: sizes,
    strides, dilations and start and end paddings drawn so that every window reads inside the padded input;
    `loops_windows`: the windows the max pooling loops take (3 x 3 and 2 x 2 without dilation) most of the time."""
    n, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
    if loops_windows and data.draw(st.integers(0, 3)):
        window, dilations = [data.draw(st.sampled_from([2, 3]))] * 2, [1, 1]
    else:
        window = [data.draw(st.integers(1, 4)) for _ in range(2)]
        dilations = [data.draw(st.integers(1, 2)) for _ in range(2)]
    strides = [data.draw(st.integers(1, 3)) for _ in range(2)]
    starts = [data.draw(st.integers(0, w - 1)) for w in window]
    ends = [data.draw(st.integers(0, w - 1)) for w in window]
    spatial = [data.draw(st.integers(max(1, (w - 1) * d + 1 - s - e), 9))
               for w, d, s, e in zip(window, dilations, starts, ends)]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, c, *spatial)).astype(dtype)
    if data.draw(st.booleans()):  # most maxima zeros of both signs (a ReLU's output negated, say): the first one's
        x = np.where(rng.random(x.shape) < 0.6, rng.choice(np.array([0.0, -0.0], dtype), x.shape), -np.abs(x))
    specials = np.array([0.0, -0.0, math.inf, -math.inf, 1e-45], dtype)
    mask = rng.random(x.shape) < 0.2
    x[mask] = rng.choice(specials, int(mask.sum()))
    keywords = dict(window_size=window, strides=strides, dilations=dilations, start_padding=starts, end_padding=ends)
    return x, keywords


def _assume_valid(name: str, x: np.ndarray, **keywords) -> None:
    """Leave out a drawn call DirectML refuses (a window that reads padding alone)."""
    try:
        dmlcli.validate(name, x, **keywords)
    except ValidationError:
        assume(False)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(["float32", "float16"]))
def test_max_pooling_gives_the_numpy_kernels_bits(loops_state, data, dtype):
    """MAX_POOLING2 over two spatial axes in one compiled pass: the maxima, and of equal zeros the first one's sign,
    as NumPy's passes give them; an input with a NaN, and FLOAT16, are left to NumPy's kernel."""
    x, keywords = _pooling_case(data, dtype, loops_windows=True)
    _assume_valid("max_pooling2", x, outputs=["OutputTensor"], **keywords)
    if data.draw(st.booleans()):
        x.reshape(-1)[data.draw(st.integers(0, x.size - 1))] = np.nan
    compiled, plain = both_ways(lambda: dmlcli.run("max_pooling2", x, outputs=["OutputTensor"], **keywords)[0])
    assert np.array_equal(bits(compiled), bits(plain))


def test_the_pooling_loops_take_only_their_cases(loops_state):
    loops = compiled_loops.use(True)
    square = {"WindowSize": (3, 3), "Strides": (1, 1), "Dilations": (1, 1), "StartPadding": (0, 0),
              "EndPadding": (0, 0)}
    x = np.ones((1, 1, 4, 4), np.float32)
    assert loops.max_pool_2d(x, square, (1, 1, 2, 2)).shape == (1, 1, 2, 2)
    assert loops.max_pool_2d(x.astype(np.float16), square, (1, 1, 2, 2)) is None
    assert loops.max_pool_2d(x, {**square, "Dilations": (2, 1)}, (1, 1, 2, 2)) is None
    assert loops.max_pool_2d(x, {**square, "WindowSize": (3, 2)}, (1, 1, 2, 3)) is None  # no loop of its own
    with_nan = x.copy()
    with_nan[0, 0, 3, 3] = np.nan
    assert loops.max_pool_2d(with_nan, square, (1, 1, 2, 2)) is None
    line = {field: value[:1] for field, value in square.items()}
    assert loops.max_pool_2d(np.ones((1, 1, 4), np.float32), line, (1, 1, 2)) is None  # one spatial axis
