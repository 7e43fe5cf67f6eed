"""The GPU backend: bit-for-bit parity with the CPU backend, broadcasting, streaming, and exit 4.

The parity tests need CuPy and a CUDA device and skip cleanly without them; the tests of the
error paths, the generated CUDA source and `dmlcli info` run everywhere (CuPy is hidden from
them where it is installed).
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.backends import gpu_kernels
from dmlcli.backends import cpu
from dmlcli.cli import cli
from dmlcli.errors import BackendUnavailableError, DmlcliWarning
from dmlcli.feature_levels import level
from dmlcli.operators import ELEMENTWISE_OPERATORS as OPERATORS, find_operator

NEWEST = level("6_4")
NO_CUPY = "CuPy is not installed; install it with pip install 'dmlcli[gpu]'"


# -- helpers ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_backend():
    pytest.importorskip("cupy")
    from dmlcli.backends import gpu

    try:
        return gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


@pytest.fixture
def hide_cupy(monkeypatch):
    """Make `import cupy` fail, as on a machine without CuPy."""
    monkeypatch.setitem(sys.modules, "cupy", None)


def _float_specials(dtype) -> np.ndarray:
    """inf, -inf, NaNs with payloads and either sign, +-0, subnormals, extremes: as bit patterns."""
    info = np.finfo(dtype)
    bits = info.bits
    exponent = ((1 << (info.nexp)) - 1) << info.nmant
    sign = 1 << (bits - 1)
    patterns = [exponent, exponent | sign,  # inf, -inf
                exponent | 1, exponent | (1 << (info.nmant - 1)), exponent | sign | 0x155,  # NaN payloads
                (1 << bits) - 1,  # NaN, all bits set
                0, sign,  # 0.0, -0.0
                1, sign | 1, (1 << info.nmant) - 1,  # smallest and largest subnormals
                1 << info.nmant, exponent - 1, sign | (exponent - 1)]  # smallest normal, +-max
    return np.array(patterns, dtype=f"uint{bits}").view(dtype)


def _random_tensor(rng, dtype, shape) -> np.ndarray:
    """Random bit patterns, with the dtype's special values sprinkled in."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    raw = rng.integers(0, 256, size=count * dtype.itemsize, dtype=np.uint8).view(dtype).copy()
    if dtype.kind == "f":
        specials = _float_specials(dtype)
        picks = rng.random(count) < 0.4
        raw[picks] = specials[rng.integers(0, len(specials), size=int(picks.sum()))]
    else:
        info = np.iinfo(dtype)
        specials = np.array([0, 1, info.max, info.min, info.min + 1, info.max - 1], dtype=dtype)
        picks = rng.random(count) < 0.2
        raw[picks] = specials[rng.integers(0, len(specials), size=int(picks.sum()))]
    return raw.reshape(shape)


def _signatures_at_newest(operator):
    """Every (input dtypes..., output dtype) the newest support row allows."""
    return gpu_kernels._row_signatures(operator, operator.row_at(NEWEST))


def _inputs_for(operator, dtype, shape, rng, signature=None) -> list[np.ndarray]:
    from dmlcli.operators.table.hooks import ShiftCountCheck

    dtypes = [np.dtype(each) for each in signature[:-1]] if signature is not None else [np.dtype(dtype)] * len(
        operator.inputs)
    dtype = dtypes[-1]
    arrays = [_random_tensor(rng, each, shape) for each in dtypes]
    if len(arrays) == 2 and dtypes[0] == dtypes[1]:
        a, b = arrays
        same = rng.random(shape) < 0.25  # equal pairs: NaN == NaN, x == x, ...
        b[same] = a[same]
        if np.dtype(dtype).kind == "f":
            zeros = rng.random(shape) < 0.05
            a[zeros], b[zeros] = np.array(-0.0, dtype), np.array(0.0, dtype)
    if any(isinstance(hook, ShiftCountCheck) for hook in operator.hooks):  # counts at, below and past the width
        width = np.dtype(dtype).itemsize * 8
        counts = np.array([0, 1, width - 1, width, width + 1, 2 * width, np.iinfo(dtype).max], dtype=dtype)
        b = arrays[1]
        b[...] = rng.integers(0, width, size=shape, dtype=dtype)
        picks = rng.random(shape) < 0.4
        b[picks] = counts[rng.integers(0, len(counts), size=int(picks.sum()))]
    return arrays


def _shapes(rng):
    """One shape of each rank 1 to 8, of 1 to about 3000 elements (so vectors and tails both run)."""
    shapes = []
    for ndim in range(1, 9):
        budget = 3000 if ndim < 8 else 300
        dims = []
        for _ in range(ndim):
            dims.append(int(rng.integers(1, max(2, int(budget ** (1 / ndim)) * 2))))
        shapes.append(tuple(dims))
    return shapes + [(1,), (17,), (4099,)]


def _assert_same_bits(gpu_out: np.ndarray, cpu_out: np.ndarray, context: str, inputs=()) -> None:
    assert gpu_out.dtype == cpu_out.dtype and gpu_out.shape == cpu_out.shape, context
    if gpu_out.tobytes() != cpu_out.tobytes():
        flat_g = gpu_out.reshape(-1).view(f"uint{gpu_out.itemsize * 8}")
        flat_c = cpu_out.reshape(-1).view(f"uint{cpu_out.itemsize * 8}")
        where = np.flatnonzero(flat_g != flat_c)
        given = [repr(np.broadcast_to(x, gpu_out.shape).reshape(-1)[where[0]]) for x in inputs]
        pytest.fail(f"{context}: {where.size} elements differ, first at {where[0]}: "
                    f"gpu {flat_g[where[0]]:#x} cpu {flat_c[where[0]]:#x} (inputs {', '.join(given)})")


def _parameter_sets(operator, signature):
    """The defaults, then each parameter changed on its own: every enum value, another FLOAT value,
    ScaleBias on, a fused activation."""
    from dmlcli.operators.table.parameters import EnumParameter, FloatParameter, ScaleBiasParameter

    data_types = gpu_kernels.data_types_of(operator, signature)
    defaults = {p.field: p.parse({}, data_types) for p in operator.parameters}
    sets = [defaults]
    for param in operator.parameters:
        if isinstance(param, EnumParameter):
            sets += [dict(defaults, **{param.field: short}) for short, _ in param.values if short != param.default]
        elif isinstance(param, FloatParameter):
            sets.append(dict(defaults, **{param.field: np.float32(0.75)}))
        elif isinstance(param, ScaleBiasParameter):
            sets.append(dict(defaults, **{param.field: (np.float32(1.5), np.float32(-0.25))}))
        elif "fused_activation" in param.options:
            sets.append(dict(defaults, **{param.field: param.parse({"fused_activation": "elu"}, data_types)}))
    return sets


def _assert_parity(operator, got, expected, params, context, inputs=()):
    """Bit for bit where the operator is exact or one rounding, or the output is an integer; within the
    operator's tolerance otherwise (NaN matches NaN).

    Operators that compute on values may return a NaN with another payload than NumPy's (PTX arithmetic
    gives the canonical NaN, and FLOAT16 values pass through float): IEEE-754 does not fix payloads, nor
    do Direct3D's rules. So there a NaN matches any NaN; every other element, and every bit of the
    bitwise operators' results, must be equal.
    """
    from dmlcli.checking.comparison import EXACT, compare, rule_for
    from dmlcli.operators.table.schema import APPROXIMATE, COMPOSITE

    rule = EXACT
    fused = [value[0] for value in params.values() if isinstance(value, tuple) and value
             and getattr(value[0], "exactness", None) in (APPROXIMATE, COMPOSITE)]  # ADD1's fused ELU, say
    if operator.exactness in (APPROXIMATE, COMPOSITE) or fused:
        rule = rule_for(operator, expected.dtype, parameters=params)
    if (operator.name == "POW" and got.dtype.kind in "iu" and len(inputs) == 2 and np.asarray(inputs[1]).dtype.kind == "f"
            and got.shape == expected.shape):
        # An integer base with a float exponent is pow in double precision, truncated: where the power lies
        # within a last-place error of the snapping window around an integer, the CPU's and the GPU's pow
        # may fall on either side (POW's notes say so). Those results may differ by one; no others.
        assert np.all(np.abs(got.astype(np.float64) - expected.astype(np.float64)) <= 1), context
        return
    if rule.kind == "exact":
        if not operator.native_encoding and got.dtype.kind == "f" and got.shape == expected.shape:
            both_nan = np.isnan(got) & np.isnan(expected)
            got, expected = np.where(both_nan, expected, got), expected
        _assert_same_bits(got, expected, context, inputs)
        return
    report, same = compare(got, expected, rule)
    assert same, f"{context}: {report}"


# -- parity on the GPU ------------------------------------------------------------------------

@pytest.mark.parametrize("operator", OPERATORS, ids=lambda op: op.cli_name)
def test_gpu_matches_cpu_bit_for_bit(gpu_backend, operator):
    rng = np.random.default_rng(sum(map(ord, operator.name)))
    reference = cpu.create()
    for signature in _signatures_at_newest(operator):
        out_dtype = np.dtype(signature[-1])
        for shape in _shapes(rng):
            inputs = _inputs_for(operator, None, shape, rng, signature)
            for params in _parameter_sets(operator, signature):
                with np.errstate(all="ignore"):
                    expected = reference.execute(operator, inputs, shape, out_dtype, params)
                got = gpu_backend.execute(operator, inputs, shape, out_dtype, params)
                _assert_parity(operator, got, expected, params, f"{operator.cli_name} {signature} {shape}", inputs)


FLOAT32_FUNCTION_INPUTS = {  # where CUDA's float32 functions run on the GPU, the values at the edges of their use
    "exp": np.concatenate([np.linspace(-110, -80, 30001), np.linspace(80, 90, 1001), [-87.33, -87.3365, -87.34]]),
    "sin": np.concatenate([np.geomspace(1e-37, 1e38, 20001), -np.geomspace(1e-30, 1e30, 2001),
                           np.arange(-1000, 1000) * np.pi]),
    "cos": np.concatenate([np.geomspace(1e-37, 1e38, 20001), np.arange(-1000, 1000) * np.pi + np.pi / 2]),
    "activation_sigmoid": np.concatenate([np.linspace(-120, 120, 240001), [-87.0, -86.99, -87.01, np.inf, -np.inf]]),
    "activation_elu": np.concatenate([np.linspace(-120, 10, 130001), -np.geomspace(1e-37, 1e30, 10001), [-np.inf]]),
    "activation_gelu": np.concatenate([np.linspace(-20, 12, 640001), np.geomspace(1e-37, 1e38, 10001),
                                       -np.geomspace(1e-37, 1e38, 10001),
                                       [-12.5, -12.5001, 9.0, 9.0001, np.inf, -np.inf, np.nan]]),
}
FLOAT32_FUNCTION_CASES = [(name, np.float32) for name in sorted(FLOAT32_FUNCTION_INPUTS)] + [
    ("activation_sigmoid", np.float16), ("activation_elu", np.float16), ("exp", np.float16),
    ("activation_gelu", np.float16)]
# FLOAT16 results the GPU computes in float32 from its fast functions (activation.py): each within one FLOAT16 ULP of
# the CPU's once-rounded value, which the operator's rule alone (18 ULP, or an absolute floor) would not show.
WITHIN_ONE_FLOAT16_ULP = {"activation_gelu", "activation_sigmoid", "exp"}


@pytest.mark.parametrize("name, dtype", FLOAT32_FUNCTION_CASES, ids=[f"{n}-{np.dtype(t).name}"
                                                                     for n, t in FLOAT32_FUNCTION_CASES])
def test_float32_functions_on_the_gpu_stay_within_the_rule_at_their_edges(gpu_backend, name, dtype):
    """EXP and SIGMOID where their results turn subnormal (-ftz would flush a float32 function's result: such inputs
    take the double path), SIN and COS at huge arguments and at multiples of pi, subnormal inputs: within the
    operator's rule of the CPU's double-precision results."""
    from dmlcli.checking.comparison import compare, rule_for

    tiny = np.finfo(np.float32).smallest_subnormal
    with np.errstate(over="ignore"):
        x = np.concatenate([FLOAT32_FUNCTION_INPUTS.get(name, []), [tiny, -tiny, tiny * 77, 0.0, -0.0]]).astype(dtype)
    if dtype == np.float16:  # every FLOAT16 value
        x = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    expected = dmlcli.run(name, x, backend="cpu")
    got = dmlcli.run(name, x, backend="gpu")
    report, same = compare(got, expected, rule_for(dmlcli.find_operator(name), expected.dtype))
    assert same, f"{name}: {report}"
    if name in WITHIN_ONE_FLOAT16_ULP and dtype == np.float16:
        finite = np.isfinite(expected) & np.isfinite(got)
        assert np.array_equal(np.isnan(got), np.isnan(expected))
        assert np.array_equal(got[~finite & ~np.isnan(got)], expected[~finite & ~np.isnan(expected)])
        ordered = [np.where(v.view(np.int16) < 0, -(v.view(np.int16).astype(np.int32) & 0x7FFF),
                            v.view(np.int16).astype(np.int32)) for v in (got[finite], expected[finite])]
        steps = np.abs(ordered[0] - ordered[1])
        assert steps.max() <= 1, f"{name}: {int((steps > 1).sum())} values more than one FLOAT16 ULP from the CPU's"
    if name in ("exp", "activation_sigmoid") and dtype == np.float32:  # subnormal results themselves, not flushed
        subnormal = (expected > 0) & (expected < np.finfo(np.float32).tiny)
        steps = np.abs(got[subnormal].view(np.int32).astype(np.int64) - expected[subnormal].view(np.int32))
        assert subnormal.sum() > 1000 and steps.max() <= 1


def _pow_edge_inputs(rng) -> tuple[np.ndarray, np.ndarray]:
    """Bases and exponents where a float32 pow is hardest: bases over float32's whole normal range, bases next to 1
    with large exponents, bases next to sqrt(2) and sqrt(1/2) (where dml_pow_fast's reduction turns, its series
    longest) with powers near the ends of the normal range, negative bases with integer exponents, results next to
    overflow, subnormal results, and 1, 0 and subnormal exponents, the largest and smallest normal bases."""
    count = 200_000
    wide = np.exp2(rng.uniform(-126, 128, count)), rng.uniform(-4, 4, count)
    near_one = 1 + rng.uniform(-1e-3, 1e-3, count), rng.uniform(-8e4, 8e4, count)
    big = rng.uniform(1.5, 3.0, count)
    overflow = big, 127.9 / np.log2(big) * rng.uniform(0.98, 1.003, count)
    turn = np.sqrt(2) ** rng.choice([-1, 1], count) * (1 + rng.uniform(-1e-6, 1e-6, count))
    turning = turn, rng.uniform(-125, 125, count) / np.log2(turn)
    negative = -rng.uniform(0.5, 4.0, count), rng.integers(-40, 41, count).astype(np.float64)
    small = rng.uniform(0.01, 0.5, count)
    subnormal = small, -140.0 / np.log2(small) * rng.uniform(0.95, 1.1, count)
    edges = np.array([1.0, 2.0, 0.5, np.finfo(np.float32).max, np.finfo(np.float32).tiny, 3.0, 10.0]), \
        np.array([1e30, -1e30, 0.0, -0.5, 0.5, np.finfo(np.float32).smallest_subnormal, 1.0])
    pairs = (wide, near_one, turning, negative, overflow, subnormal, edges)
    with np.errstate(over="ignore"):
        return tuple(np.concatenate([pair[i] for pair in pairs]).astype(np.float32) for i in (0, 1))


def test_pow_on_the_gpu_is_within_a_few_ulp_of_the_cpu_at_its_edges(gpu_backend):
    """FLOAT32 POW (dml_pow_fast for a normal positive base whose power is a normal float, about 3 ULP; CUDA's powf
    for the other normal operands, at most 4 ULP by CUDA's documentation): within the operator's rule (32 ULP) of the
    CPU's double result, and within 8 ULP wherever that result is a normal float32."""
    from dmlcli.checking.comparison import compare, rule_for

    base, exponent = _pow_edge_inputs(np.random.default_rng(33))
    with np.errstate(all="ignore"):
        expected = dmlcli.run("pow", base, exponent, backend="cpu")
    got = dmlcli.run("pow", base, exponent, backend="gpu")
    report, same = compare(got, expected, rule_for(find_operator("pow"), expected.dtype))
    assert same, report
    normal = np.isfinite(expected) & (np.abs(expected) >= np.finfo(np.float32).tiny) & np.isfinite(got)
    steps = np.abs(got[normal].view(np.int32).astype(np.int64) - expected[normal].view(np.int32))
    assert normal.sum() > 800_000 and steps.max() <= 8, f"{int(steps.max())} ULP at worst"


@pytest.mark.parametrize("operator", [op for op in OPERATORS if len(op.inputs) == 2], ids=lambda op: op.cli_name)
def test_gpu_broadcast_matches_cpu(gpu_backend, operator):
    rng = np.random.default_rng(7)
    reference = cpu.create()
    cases = [((3, 1, 5), (1, 4, 5), (3, 4, 5)), ((7,), (2, 3, 7), (2, 3, 7)), ((1,), (6, 1), (6, 1)),
             ((2, 1, 3, 1, 2, 1, 2, 1), (1, 3, 1, 2, 1, 2, 1, 3), (2, 3, 3, 2, 2, 2, 2, 3))]
    for signature in _signatures_at_newest(operator)[:6]:
        out_dtype = np.dtype(signature[-1])
        params = _parameter_sets(operator, signature)[0]
        for a_shape, b_shape, out_shape in cases:
            a = _random_tensor(rng, signature[0], a_shape)
            b = _random_tensor(rng, signature[1], b_shape)
            with np.errstate(all="ignore"):
                expected = reference.execute(operator, [a, b], out_shape, out_dtype, params)
            got = gpu_backend.execute(operator, [a, b], out_shape, out_dtype, params)
            _assert_parity(operator, got, expected, params, f"{operator.cli_name} {signature} {a_shape} x {b_shape}")


def test_gpu_pipeline_with_many_pieces(gpu_backend, monkeypatch):
    """Small pieces: every slot is reused many times, and the last piece is a short one."""
    from dmlcli.backends import gpu

    monkeypatch.setattr(gpu, "PIECE_BYTES", 4096)
    rng = np.random.default_rng(3)
    reference = cpu.create()
    for name, dtype, out_dtype in [("bit_xor", np.uint8, np.uint8), ("bit_xor", np.float16, np.float16),
                                   ("logical_equals", np.int64, np.uint32), ("is_nan", np.float32, np.uint8)]:
        operator = find_operator(name)
        shape = (50_001,)
        inputs = _inputs_for(operator, dtype, shape, rng)
        _assert_same_bits(gpu_backend.execute(operator, inputs, shape, out_dtype, {}),
                          reference.execute(operator, inputs, shape, out_dtype, {}), f"{name} {np.dtype(dtype)}")
    operator = find_operator("bit_and")  # broadcast, several blocks of rows
    a, b = _random_tensor(rng, np.int32, (3000, 7)), _random_tensor(rng, np.int32, (1, 7))
    _assert_same_bits(gpu_backend.execute(operator, [a, b], (3000, 7), np.int32, {}),
                      reference.execute(operator, [a, b], (3000, 7), np.int32, {}), "bit_and broadcast rows")


def test_gpu_execute_chunks_yields_every_chunk_in_order(gpu_backend, monkeypatch):
    from dmlcli.backends import gpu

    monkeypatch.setattr(gpu, "PIECE_BYTES", 1024)
    rng = np.random.default_rng(11)
    operator = find_operator("bit_shift_left")
    sizes = [5000, 0, 1, 3333, 1024, 77, 20000]
    chunks = [_inputs_for(operator, np.uint16, (n,), rng) for n in sizes]
    outputs = list(gpu_backend.execute_chunks(operator, iter(chunks), np.uint16, {}))
    assert [o.shape for o in outputs] == [(n,) for n in sizes]
    expected = cpu.create().execute_chunks(operator, chunks, np.uint16, {})
    for got, want, n in zip(outputs, expected, sizes):
        _assert_same_bits(got, want, f"chunk of {n}")


def test_gpu_execute_chunks_takes_pinned_chunks_without_staging(gpu_backend, monkeypatch):
    from dmlcli.backends import gpu

    monkeypatch.setattr(gpu, "PIECE_BYTES", 2048)
    rng = np.random.default_rng(5)
    operator = find_operator("logical_xor")
    chunks = []
    for size in (3000, 4096, 1):
        pinned = [gpu_backend.pinned_empty((size,), np.uint32) for _ in operator.inputs]
        for target, source in zip(pinned, _inputs_for(operator, np.uint32, (size,), rng)):
            target[...] = source
        chunks.append(pinned)
    outputs = list(gpu_backend.execute_chunks(operator, chunks, np.uint32, {}))
    for got, chunk in zip(outputs, chunks):
        _assert_same_bits(got, cpu.create().execute(operator, chunk, chunk[0].shape, np.uint32, {}), "pinned chunk")


def test_gpu_api_and_cli_run(gpu_backend, tmp_path):
    a = np.array([0, 1, 0x80, 0xFF], np.uint8)
    with pytest.warns(DmlcliWarning, match="2 of 4 shift counts"):
        got = dmlcli.run("bit_shift_left", a, np.array([1, 7, 8, 9], np.uint8), backend="gpu")
    assert got.tolist() == [0, 0x80, 0, 0]
    result = CliRunner().invoke(cli, ["run", "is_infinity", '[1, "inf", "-inf", "nan"]', "--dtype", "float16",
                                      "--infinity-mode", "negative", "--backend", "gpu", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert '"data": [0, 0, 1, 0]' in result.output
    info = CliRunner().invoke(cli, ["info"])
    assert info.exit_code == 0 and f"GPU: {gpu_backend.device_name}" in info.output


def test_gpu_cli_streams_npy_files(gpu_backend, tmp_path):
    rng = np.random.default_rng(9)
    a, b = _random_tensor(rng, np.float32, (300, 70)), _random_tensor(rng, np.float32, (300, 70))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    outputs = {}
    for backend in ("cpu", "gpu"):
        target = tmp_path / f"{backend}.npy"
        result = CliRunner().invoke(cli, ["run", "logical_greater_than_or_equal", str(tmp_path / "a.npy"),
                                          str(tmp_path / "b.npy"), "-o", str(target), "--output-dtype", "uint32",
                                          "--backend", backend, "-q"])
        assert result.exit_code == 0, result.output
        outputs[backend] = np.load(target)
    _assert_same_bits(outputs["gpu"], outputs["cpu"], "run a.npy b.npy -o out.npy --backend gpu")


# -- everywhere: errors, info, generated source -------------------------------------------------

def test_no_cupy_is_exit_4_with_the_install_command(hide_cupy):
    from dmlcli.backends import gpu

    with pytest.raises(BackendUnavailableError, match="CuPy is not installed") as caught:
        gpu.create()
    assert caught.value.exit_code == 4
    result = CliRunner().invoke(cli, ["run", "bit_xor", "[1]", "[3]", "--dtype", "uint8", "--backend", "gpu"])
    assert result.exit_code == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and NO_CUPY in lines[0] and "Traceback" not in result.output


def test_no_cupy_auto_falls_back_to_cpu_and_says_so(hide_cupy):
    result = CliRunner().invoke(cli, ["run", "bit_xor", "[1]", "[3]", "--dtype", "uint8", "--backend", "auto",
                                      "--format", "json"])
    assert result.exit_code == 0
    assert "running on the CPU" in result.stderr and "CuPy is not installed" in result.stderr
    assert "2" in result.stdout


def test_no_cupy_exit_4_in_a_real_process():
    code = ("import sys; sys.modules['cupy'] = None; from dmlcli.cli import main; "
            "main(['run', 'bit_not', '[1]', '--dtype', 'uint8', '--backend', 'gpu'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 4
    assert done.stderr.strip().splitlines() == [f"dmlcli: error: GPU backend: {NO_CUPY} (CUDA 12) or pip install "
                                                "'dmlcli[gpu-cuda13]' (CUDA 13)"]


def test_cpu_path_never_imports_cupy():
    code = ("import sys, numpy as np, dmlcli; from dmlcli.cli import cli; "
            "dmlcli.run('bit_xor', np.uint8([1]), np.uint8([3])); assert 'cupy' not in sys.modules, 'cupy imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _fake_cupy(driver=12040, runtime_version=12040, count=1, error=None):
    class CUDARuntimeError(RuntimeError):
        def __init__(self, status):
            super().__init__(f"cuda error {status}")
            self.status = status

    def get_device_count():
        if error is not None:
            raise CUDARuntimeError(error)
        return count

    runtime = SimpleNamespace(driverGetVersion=lambda: driver, runtimeGetVersion=lambda: runtime_version,
                              getDeviceCount=get_device_count, CUDARuntimeError=CUDARuntimeError)
    return SimpleNamespace(cuda=SimpleNamespace(runtime=runtime))


@pytest.mark.parametrize("fake, message", [
    (_fake_cupy(driver=0), "no CUDA driver found"),
    (_fake_cupy(error=100), "no CUDA device found"),
    (_fake_cupy(count=0), "no CUDA device found"),
    (_fake_cupy(driver=12020, runtime_version=13000, error=35), "driver supports CUDA 12.2 but this CuPy needs CUDA 13.0"),
    (_fake_cupy(error=999), "CUDA cannot start"),
])
def test_missing_driver_or_device_is_named(fake, message):
    from dmlcli.backends import gpu

    with pytest.raises(BackendUnavailableError, match=message):
        gpu._check_device(fake)
    gpu._check_device(_fake_cupy())  # a driver and a device: no error


def test_info_says_why_there_is_no_gpu(hide_cupy):
    result = CliRunner().invoke(cli, ["info"])
    assert result.exit_code == 0
    assert "CPU: NumPy " + np.__version__ in result.output
    assert "GPU: not available (CuPy is not installed" in result.output
    assert "backends found: cpu " in result.output


def test_every_operator_has_a_cuda_body_and_kernels_for_its_types():
    for operator in OPERATORS:
        assert operator.cuda_body.strip(), operator.name
        for signature in _signatures_at_newest(operator)[:3]:
            source = gpu_kernels.module_source(operator, signature)
            for kind in ("vec", "nd"):
                assert f"void {gpu_kernels.kernel_name(kind, signature)}(" in source
            for argument in gpu_kernels.kernel_arguments(operator, signature, None):
                assert f"{argument.c_type} {argument.name}" in source


def test_only_pure_bitwise_operators_run_on_64_bit_words():
    on_words = {op.name for op in OPERATORS
                if gpu_kernels.runs_on_words(op, np.dtype("float16"), np.dtype("float16"))}
    assert on_words == {"BIT_AND", "BIT_OR", "BIT_XOR", "BIT_NOT"}
    assert not gpu_kernels.runs_on_words(find_operator("bit_count"), np.dtype("uint8"), np.dtype("uint8"))


BYTE_LANES = [(name, signature) for name, signature in (
    ("bit_count", ("uint8", "uint8")), ("bit_count", ("int8", "uint8")),
    ("bit_shift_left", ("uint8", "uint8", "uint8")), ("bit_shift_right", ("uint8", "uint8", "uint8")))]


def test_a_launch_s_signature_and_data_types_are_looked_up_not_rebuilt():
    """signature_of names each tensor's type by NumPy's own name, from dtypes or what np.dtype takes, byte order
    left aside as NumPy's names leave it; data_types_of gives one shared, read-only mapping per operator and
    signature (asked on every launch)."""
    add = find_operator("add")
    assert gpu_kernels.signature_of(add, [np.dtype(np.float32), "float32"], np.float16) == ("float32", "float32",
                                                                                             "float16")
    assert gpu_kernels.signature_of(add, [np.dtype(">f4"), np.dtype("<f4")], "i4") == ("float32", "float32", "int32")
    found = gpu_kernels.data_types_of(add, ("float32", "float32", "float32"))
    assert found is gpu_kernels.data_types_of(add, ("float32", "float32", "float32"))
    assert dict(found) == {name: dmlcli.data_types.FLOAT32 for name in add.tensors}
    with pytest.raises(TypeError):
        found["ATensor"] = dmlcli.data_types.FLOAT16


def test_byte_lanes_serve_the_signatures_whose_tensors_are_all_one_byte():
    with_lanes = {op.name for op in OPERATORS if op.cuda_byte_lanes_body}
    assert with_lanes == {"BIT_COUNT", "BIT_SHIFT_LEFT", "BIT_SHIFT_RIGHT"}
    for name, signature in BYTE_LANES:
        operator = find_operator(name)
        names = gpu_kernels.input_names(operator)
        assert gpu_kernels.runs_on_byte_lanes(operator, signature)
        source = gpu_kernels.module_source(operator, signature)
        suffix = "_".join(signature)
        # 32 elements a thread as two chunks of 16, a block's width apart, each read as 4 words
        assert f"struct __align__(16) v0_{suffix} {{ unsigned int v[4]; }};" in source
        assert f"{names[0]}_v[c] = {names[0]}_vec[i];" in source
        assert "const long long i = first + (long long)c * blockDim.x;" in source
        assert f"o.v[j] = dml_apply4_{suffix}({names[0]}_v[c].v[j]" in source
        assert f"out_s[k] = dml_apply_{suffix}(" in source  # the elements past the last whole vector, one by one
    for name, signature in (("bit_count", ("uint8", "uint32")), ("bit_shift_left", ("uint16",) * 3),
                            ("bit_and", ("uint8",) * 3)):
        source = gpu_kernels.module_source(find_operator(name), signature)
        assert not gpu_kernels.runs_on_byte_lanes(find_operator(name), signature) and "dml_apply4_" not in source


@pytest.mark.parametrize("name, signature", BYTE_LANES, ids=[f"{n}-{s[0]}" for n, s in BYTE_LANES])
def test_byte_lanes_give_the_element_body_s_bits_for_every_input(gpu_backend, name, signature):
    """Every byte (BIT_COUNT) and every pair of bytes (the shifts, counts 0 to 255), each in every one of a word's four
    lanes (a block of them and one element more moves them a lane on), and 17 elements past the last whole vector:
    the CPU's bits."""
    operator = find_operator(name)
    values = np.arange(256, dtype=np.uint8)
    blocks = [values] if len(operator.inputs) == 1 else [x.ravel() for x in np.meshgrid(values, values, indexing="ij")]
    pad = np.zeros(1, np.uint8)
    inputs = [np.concatenate([block, pad] * 4 + [values[:13]]).view(signature[0]) for block in blocks]
    shape = inputs[0].shape
    expected = cpu.create().execute(operator, inputs, shape, np.dtype(signature[-1]), {})
    got = gpu_backend.execute(operator, inputs, shape, np.dtype(signature[-1]), {})
    _assert_same_bits(got, expected, f"{name} {signature}", inputs)


def test_vectors_are_16_bytes_of_the_narrowest_tensor_and_at_most_32_of_the_widest():
    assert gpu_kernels.elements_per_thread(("uint8", "uint8")) == 32  # a 1-byte type: two 16-byte loads
    assert gpu_kernels.elements_per_thread(("float32", "float32")) == 4
    assert gpu_kernels.elements_per_thread(("float32", "float32"), approximate=True) == 8
    assert gpu_kernels.elements_per_thread(("float16", "float16"), approximate=True) == 16
    assert gpu_kernels.elements_per_thread(("uint64", "uint64")) == 2
    assert gpu_kernels.elements_per_thread(("float16", "uint32")) == 8
    assert gpu_kernels.elements_per_thread(("float32", "uint8")) == 8
    assert gpu_kernels.elements_per_thread(("int64", "uint8")) == 4


def test_an_operator_s_vectors_follow_its_exactness():
    signature = ("float32", "float32")
    assert gpu_kernels.operator_elements_per_thread(find_operator("exp"), signature) == 8
    assert gpu_kernels.operator_elements_per_thread(find_operator("recip"), signature) == 4
    assert "unsigned int v[8];" in gpu_kernels.module_source(find_operator("exp"), signature)
    assert "unsigned int v[4];" in gpu_kernels.module_source(find_operator("recip"), signature)
    # an approximate body on FLOAT16: its 16 elements a thread as two 16-byte chunks, a block's width apart
    half_source = gpu_kernels.module_source(find_operator("exp"), ("float16", "float16"))
    assert "unsigned short v[8];" in half_source and "x_v[2];" in half_source
    assert "first + (long long)c * blockDim.x" in half_source


def test_more_thread_bytes_give_several_aligned_loads_a_thread(monkeypatch):
    # bench/gpu_bench.py --thread-bytes 32 (a tuning knob): two 16-byte loads of the narrowest tensor a thread, each
    # struct aligned to the 16 bytes a single load takes.
    monkeypatch.setattr(gpu_kernels, "THREAD_BYTES", 32)
    gpu_kernels.elements_per_thread.cache_clear()
    try:
        assert gpu_kernels.elements_per_thread(("float32", "float32")) == 8
        assert gpu_kernels.elements_per_thread(("uint16", "uint16")) == 16
        source = gpu_kernels.module_source(find_operator("identity"), ("float32", "float32"))
        assert "struct __align__(16) v0_float32_float32 { unsigned int v[8]; };" in source
        assert "const v0_float32_float32 x_v = x_vec[i];" in source
    finally:
        gpu_kernels.elements_per_thread.cache_clear()


def test_broadcast_geometry_gives_zero_strides_to_broadcast_dimensions():
    geometry = gpu_kernels.broadcast_geometry([(3, 1, 5), (4, 5)], (3, 4, 5))
    assert geometry.tolist() == [3, 3, 4, 5, 5, 0, 1, 0, 5, 1]


@pytest.mark.parametrize("name", ["add", "multiply", "sqrt", "logical_equals", "max", "activation_sigmoid"])
def test_direct3d_float_rules_give_the_same_bits_on_the_gpu(gpu_backend, name):
    """--float-rules d3d: FLOAT32 subnormals flushed in and out, canonical NaNs, on either backend alike."""
    rng = np.random.default_rng(11)
    op = find_operator(name)
    inputs = [_random_tensor(rng, "float32", (4099,)) for _ in op.inputs]
    on_cpu = dmlcli.run(name, *inputs, float_rules="d3d", backend="cpu")
    on_gpu = dmlcli.run(name, *inputs, float_rules="d3d", backend="gpu")
    if op.exactness in ("exact", "one rounding"):
        _assert_same_bits(on_gpu, on_cpu, name, inputs)
    else:
        _assert_parity(op, on_gpu, on_cpu, {}, name, inputs)
    if on_cpu.dtype == np.float32:
        bits = on_gpu.view(np.uint32)
        assert not np.any(((bits & 0x7F800000) == 0) & ((bits & 0x007FFFFF) != 0)), "a subnormal came out"
