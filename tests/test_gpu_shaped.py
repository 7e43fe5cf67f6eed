"""Shaped operators on the GPU: the CPU's result against the GPU's, operator by operator.

The same array_kernel runs with xp=numpy and xp=cupy: integer results and exact operators must be bit-identical,
float results within the operator's tolerance for the call (a reduction's grows with the elements reduced), twice
its ULP figure apart at most (each is within it of the exact value), or within each element's sum bound.
Skipped without CuPy or a CUDA device. Each family adds its operators to CASES: (operator, parameters, data
types, input shapes).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import dmlcli
from dmlcli.checking.comparison import compare_arrays, rule_for
from dmlcli.errors import BackendUnavailableError

FLOATS = ("float32", "float16")
SUM_TYPES = ("float32", "float16", "int32", "uint32", "int64", "uint64")
ALL_10 = ("float32", "float16", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8")
ROWS = ((7,), (3, 5), (1, 1, 4, 33))  # rank 1, 2 and 4 (the last with the leading 1s of a 4-D layout)
BLOCKS = ((3, 5), (2, 3, 4), (2, 1, 3, 2, 5))

# ---- the reduction family
CASES = [
    *[("reduce", {"function": f, "axes": axes}, types, shapes)
      for f, types in (("sum", SUM_TYPES), ("multiply", SUM_TYPES), ("l1", SUM_TYPES), ("sum_square", SUM_TYPES),
                       ("average", FLOATS), ("l2", FLOATS), ("log_sum_exp", FLOATS), ("max", ALL_10),
                       ("min", ALL_10))
      for axes, shapes in (([0], BLOCKS), (None, BLOCKS))],
    ("reduce", {"function": "log_sum", "axes": [0]}, FLOATS, BLOCKS),  # positive inputs below
    ("reduce", {"function": "argmax", "axes": [0], "output_dtype": "int64"}, ALL_10, BLOCKS),
    ("reduce", {"function": "argmin", "output_dtype": "uint32"}, ALL_10, BLOCKS),
    ("argmax", {"axes": [1], "axis_direction": "decreasing"}, ALL_10, BLOCKS),
    ("argmax", {"axes": [0, 1], "output_dtype": "int32"}, ALL_10, BLOCKS),
    ("argmin", {"axes": [1]}, ALL_10, BLOCKS),
    ("argmin", {"axes": [0], "axis_direction": "decreasing", "output_dtype": "uint64"}, ALL_10, BLOCKS),
    ("activation_softmax", {}, FLOATS, ROWS),
    ("activation_log_softmax", {}, FLOATS, ROWS),
    ("activation_hardmax", {}, FLOATS, ROWS),
    ("activation_softmax1", {"axes": [0, 1]}, FLOATS, BLOCKS),
    ("activation_log_softmax1", {"axes": [1]}, FLOATS, BLOCKS),
    ("activation_hardmax1", {"axes": [0]}, FLOATS, BLOCKS),
    ("cumulative_summation", {"axis": 1}, SUM_TYPES, BLOCKS),
    ("cumulative_summation", {"axis": 0, "axis_direction": "decreasing", "has_exclusive_sum": True}, SUM_TYPES,
     BLOCKS),
    ("cumulative_product", {"axis": 1, "has_exclusive_product": True}, SUM_TYPES, BLOCKS),
    ("cumulative_product", {"axis": 0, "axis_direction": "decreasing"}, SUM_TYPES, BLOCKS),
]

PARAMS = [pytest.param(name, params, dtype, shape, id=f"{name}-{'-'.join(f'{k}={v}' for k, v in params.items())}-"
                                                      f"{dtype}-{'x'.join(map(str, shape))}")
          for name, params, types, shapes in CASES for dtype in types for shape in shapes]


@pytest.fixture(scope="module")
def gpu_backend():
    pytest.importorskip("cupy")
    from dmlcli.backends import gpu

    try:
        return gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


def sample(dtype: str, shape, seed: int, positive: bool) -> np.ndarray:
    """Values with ties, and for floats a NaN and infinities in one group of their own (the rest stays finite)."""
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind
    if kind == "f":
        values = rng.integers(1 if positive else -16, 17, size=shape) / 4
        x = values.astype(dtype)
        if x.size >= 8 and not positive:
            flat = x.reshape(-1)
            flat[-1], flat[-2] = np.nan, np.inf  # the last group: NaN and inf handling on both backends
        return x
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max), size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("name, params, dtype, shape", PARAMS)
def test_gpu_matches_cpu(gpu_backend, name, params, dtype, shape):
    positive = params.get("function") in ("log_sum", "sum", "l1", "l2", "sum_square", "average", "multiply") or \
        name.startswith("cumulative")
    x = sample(dtype, shape, seed=len(shape) * 7 + len(dtype), positive=positive)
    verdict = dmlcli.validate(name, x, **params)
    on_cpu = dmlcli.run(name, x, **params)
    on_gpu = dmlcli.run(name, x, backend="gpu", **params)
    assert on_gpu.dtype == on_cpu.dtype and on_gpu.shape == on_cpu.shape
    if on_cpu.dtype.kind != "f":
        assert np.array_equal(on_gpu, on_cpu)
        return
    assert np.array_equal(np.isnan(on_gpu), np.isnan(on_cpu))
    assert_backends_agree(verdict, on_cpu, on_gpu, [x], name)


def assert_backends_agree(verdict, on_cpu, on_gpu, inputs, context):
    """Each result within the operator's rule of the exact value, so at most twice its figure apart; or within the
    sum bound of the call's inputs (the backends' summation orders each within it)."""
    rule = rule_for(verdict.call.operator, on_cpu.dtype, call=verdict.call, inputs=inputs)
    if rule.kind in ("ulp", "atol"):
        rule = replace(rule, limit=2 * rule.limit)
    comparison = compare_arrays(on_gpu, on_cpu, rule, nan_equal=True)  # NaN payloads aside (the GPU's canonical)
    assert comparison.passed, (context, comparison.text())


def test_every_shaped_operator_of_the_reduction_family_is_covered():
    from dmlcli.operators.reduction import entries as reduction

    assert {op.cli_name for op in reduction.OPERATORS} <= {name for name, _, _, _ in CASES}


LONG_ROWS = [
    ("cumulative_summation", {"axis": 1}, ("float32", "float16", "int32", "uint64")),
    ("cumulative_summation", {"axis": 1, "axis_direction": "decreasing", "has_exclusive_sum": True},
     ("float32", "int64")),
    ("cumulative_summation", {"axis": 1, "has_exclusive_sum": True}, ("float32", "uint32")),
    ("activation_softmax", {}, ("float32", "float16")),
    ("activation_log_softmax", {}, ("float32",)),
    ("activation_softmax1", {"axes": [1]}, ("float32",)),
    ("reduce", {"function": "max", "axes": [1]}, ("float32", "float16")),
    ("reduce", {"function": "min", "axes": [0]}, ("float32",)),
    ("reduce", {"function": "l2", "axes": [1]}, ("float32",)),
    ("reduce", {"function": "sum", "axes": [1]}, ("float32", "float16")),
    ("reduce", {"function": "average", "axes": [1]}, ("float32",)),
    ("reduce", {"function": "min", "axes": [1]}, ("float32",)),
    ("reduce", {"function": "l1", "axes": [0, 1]}, ("float32",)),
    ("reduce", {"function": "sum_square", "axes": [1]}, ("float16",)),
    ("join", {"axis": 1}, ("float32", "uint8")),
    ("join", {"axis": 0}, ("int64",)),
    ("argmax", {"axes": [1]}, ("float32", "float16", "int8", "int32")),
    ("argmin", {"axes": [1], "axis_direction": "decreasing"}, ("float32", "uint16")),
    ("reduce", {"function": "argmax", "axes": [0, 1], "output_dtype": "int64"}, ("float32",)),
    ("activation_hardmax", {}, ("float32",)),
]


@pytest.mark.parametrize("cols", [1, 33, 1500, 16384, 20000, 30000])
@pytest.mark.parametrize("name, params, types", LONG_ROWS,
                         ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in p.items())}" for n, p, _ in LONG_ROWS])
def test_gpu_own_kernels_on_long_rows(gpu_backend, name, params, types, cols):
    """The reduction family's own CUDA kernels (reduction_gpu.py) and JOIN's copies on rows from 1 to 30000
    elements (one warp to a block of 1024 threads, several rows per block; softmax rows staged in shared memory
    and past it, by float4 and one by one; cumulative sums of one tile and of two), NaN in some rows: the CPU's result
    within the tolerance, integers bit for bit."""
    for dtype in types:
        rng = np.random.default_rng(cols)
        if np.dtype(dtype).kind == "f":
            x = (rng.standard_normal((5, cols)) * (4 if "softmax" in name else 1)).astype(dtype)
            if "max" in params.get("function", "") or "min" in params.get("function", "") or \
                    name.startswith(("arg", "activation_hardmax")):
                x[1, ::3] = np.nan
                x[2, :] = np.nan  # a row of nothing but NaN
                x[3, 0] = -0.0
                x[4, :] = 1.0  # a row of ties
            if name.startswith("cumulative") or params.get("function") in ("l2", "l1", "sum_square", "sum", "average"):
                x = np.abs(x)  # one sign: no cancellation, so the ULP figure holds
        else:
            x = rng.integers(0, 100, (5, cols)).astype(dtype)  # ties: the first (or last) index wins
        inputs = [x, x[:, : max(1, cols // 2)] if params.get("axis") == 1 else x] if name == "join" else [x]
        verdict = dmlcli.validate(name, *inputs, **params)
        on_cpu = dmlcli.run(name, *inputs, **params)
        on_gpu = dmlcli.run(name, *inputs, backend="gpu", **params)
        assert on_gpu.dtype == on_cpu.dtype and on_gpu.shape == on_cpu.shape
        if on_cpu.dtype.kind != "f" or name == "join":
            assert np.array_equal(on_gpu, on_cpu, equal_nan=on_cpu.dtype.kind == "f"), (name, dtype)
            continue
        assert np.array_equal(np.isnan(on_gpu), np.isnan(on_cpu)), (name, dtype)
        assert_backends_agree(verdict, on_cpu, on_gpu, inputs, (name, dtype))


def test_gpu_row_kernels_take_views_that_start_anywhere(gpu_backend):
    """softmax_rows, cumsum_rows, reduce's rows and arg_rows read 16-byte vectors only from a 16-byte boundary: a contiguous view
    that starts one element in gives what the same values give from a fresh array (the one-by-one path adds in
    another order than the float4 one: within a few ULP for the sums, the same indices)."""
    from dmlcli.operators.reduction import gpu as reduction_gpu

    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(5)
    flat = cupy.asarray(np.abs(rng.standard_normal(3 * 4096 + 1)).astype(np.float32))
    view = flat[1:].reshape(3, 4096)
    fresh = view.copy()
    assert view.data.ptr % 16 != 0
    for log_form in (False, True):
        assert cupy.allclose(reduction_gpu.softmax_rows(cupy, view, log_form),
                             reduction_gpu.softmax_rows(cupy, fresh, log_form), rtol=1e-5, atol=0)
    for reverse in (False, True):
        for exclusive in (False, True):
            assert cupy.allclose(reduction_gpu.cumsum_rows(cupy, view, reverse, exclusive),
                                 reduction_gpu.cumsum_rows(cupy, fresh, reverse, exclusive), rtol=1e-5, atol=0)
    for function in ("SUM", "MAX", "L2"):
        assert cupy.allclose(reduction_gpu.reduce(cupy, function, view, (1,)),
                             reduction_gpu.reduce(cupy, function, fresh, (1,)), rtol=1e-5, atol=0)
    for largest in (False, True):
        for last in (False, True):
            assert cupy.array_equal(reduction_gpu.arg_rows(cupy, view, largest, last),
                                    reduction_gpu.arg_rows(cupy, fresh, largest, last))


@pytest.mark.parametrize("shape, axes", [((3000, 256), [0]), ((3000, 257), [0]), ((40, 50, 64), [0, 1]),
                                         ((70000, 1), [0])])
@pytest.mark.parametrize("function", ["sum", "average", "max", "min", "l1", "l2", "sum_square"])
def test_gpu_column_reductions(gpu_backend, shape, axes, function):
    """REDUCE over leading axes by reduction_gpu's column kernel (chunks of rows, then the chunks combined):
    the CPU's result within the tolerance, NaN where a column holds only NaN (MAX, MIN), and the kernel is the one
    that ran."""
    from dmlcli.operators.reduction import gpu as reduction_gpu

    x = np.abs(np.random.default_rng(len(shape)).standard_normal(shape)).astype(np.float32)
    if function in ("max", "min"):
        x[..., 0] = np.nan  # a column of nothing but NaN
        x[::3, ..., -1] = np.nan
    assert x.size >= reduction_gpu.COLUMN_MINIMUM
    verdict = dmlcli.validate("reduce", x, function=function, axes=axes)
    on_cpu = dmlcli.run("reduce", x, function=function, axes=axes)
    on_gpu = dmlcli.run("reduce", x, backend=gpu_backend, function=function, axes=axes)
    assert on_gpu.shape == on_cpu.shape and np.array_equal(np.isnan(on_gpu), np.isnan(on_cpu))
    rule = rule_for(verdict.call.operator, on_cpu.dtype, call=verdict.call, inputs=[x])
    comparison = compare_arrays(on_gpu, on_cpu, rule)
    assert comparison.passed, (function, shape, comparison.text())
    assert any(key[0] == "columns" and key[1] == function.upper() for key in reduction_gpu._KERNELS if
               isinstance(key, tuple))


@pytest.mark.parametrize("cols", [1, 4, 31, 32, 33, 124, 128, 132, 1000, 1020, 4100, 8192, 16384])
def test_gpu_cumulative_sums_of_many_rows(gpu_backend, cols):
    """CUMULATIVE_SUMMATION of CUMSUM_MANY_ROWS rows: one warp a row (reduction_gpu's dml_kernel_warp) for 4-byte
    types and rows of a multiple of 4 (less than one chunk of 128 elements, one, a part-filled one, several rounds
    of chunks with a carry between them), the shared-memory tiles for other lengths; every direction and form, every
    type the warp takes (FLOAT16 widened to FLOAT32). The CPU's result within the tolerance, integers bit for bit
    (wrapping sums), NaN and infinities where the CPU has them, and each row's first output (its element, -0.0
    included, or the exclusive 0) bit for bit."""
    from dmlcli.operators.reduction import gpu as reduction_gpu

    rows = reduction_gpu.CUMSUM_MANY_ROWS
    expected = "dml_kernel_warp" if cols % 4 == 0 else "dml_kernel"
    assert reduction_gpu.cumsum_kernel_name(np.dtype("float32"), cols, rows, 0) == expected
    rng = np.random.default_rng(cols)
    for dtype in ("float32", "float16", "int32", "uint32"):
        if np.dtype(dtype).kind == "f":
            x = np.abs(rng.standard_normal((rows, cols))).astype(dtype)
            x[0, 0] = x[1, -1] = -0.0  # the first element in each direction
            x[2, cols // 2] = np.nan
            x[3, cols // 3] = np.inf
            x[4, :] = -0.0
        else:
            x = rng.integers(0, 2**31 - 1, (rows, cols)).astype(dtype)  # wrapping sums, as on the CPU
        for params in ({}, {"axis_direction": "decreasing"}, {"has_exclusive_sum": True},
                       {"axis_direction": "decreasing", "has_exclusive_sum": True}):
            verdict = dmlcli.validate("cumulative_summation", x, axis=1, **params)
            on_cpu = dmlcli.run("cumulative_summation", x, axis=1, **params)
            on_gpu = dmlcli.run("cumulative_summation", x, axis=1, backend="gpu", **params)
            assert on_gpu.dtype == on_cpu.dtype and on_gpu.shape == on_cpu.shape
            if on_cpu.dtype.kind != "f":
                assert np.array_equal(on_gpu, on_cpu), (dtype, params)
                continue
            assert np.array_equal(np.isnan(on_gpu), np.isnan(on_cpu)), (dtype, params)
            assert np.array_equal(np.isinf(on_gpu), np.isinf(on_cpu)), (dtype, params)
            first = -1 if params.get("axis_direction") else 0
            # A NaN's payload is not kept through FLOAT16's widening (both give a NaN, checked above).
            numbers = ~np.isnan(on_cpu[:, first])
            assert on_gpu[numbers, first].tobytes() == on_cpu[numbers, first].tobytes(), (dtype, params)
            assert_backends_agree(verdict, on_cpu, on_gpu, [x], (dtype, params))
        assert ("cumsum", "float32" if dtype == "float16" else dtype, expected) in reduction_gpu._KERNELS


def test_gpu_cumulative_sums_on_the_bench_rows(gpu_backend):
    """The bench's rows (16384 FLOAT32 elements; 2048 of them rather than 16384) by the warp scan: the CPU's result
    within the tolerance in every direction and form, values of both signs within the sum bound."""
    rng = np.random.default_rng(16384)
    for x in (rng.random((2048, 16384), dtype=np.float32), rng.standard_normal((2048, 16384)).astype(np.float32)):
        for params in ({}, {"axis_direction": "decreasing", "has_exclusive_sum": True}):
            verdict = dmlcli.validate("cumulative_summation", x, axis=1, **params)
            on_cpu = dmlcli.run("cumulative_summation", x, axis=1, **params)
            on_gpu = dmlcli.run("cumulative_summation", x, axis=1, backend="gpu", **params)
            assert_backends_agree(verdict, on_cpu, on_gpu, [x], params)


def test_gpu_cumulative_sum_views_that_start_anywhere(gpu_backend):
    """Many rows from a view one element in (off a 16-byte boundary) take the shared-memory tiles, the same values
    from a fresh array the warp scan: the same sums within a few ULP, integers bit for bit."""
    from dmlcli.operators.reduction import gpu as reduction_gpu

    cupy = pytest.importorskip("cupy")
    rows = reduction_gpu.CUMSUM_MANY_ROWS
    rng = np.random.default_rng(6)
    for dtype in ("float32", "int32"):
        values = np.abs(rng.standard_normal(rows * 132 + 1)) * 100
        flat = cupy.asarray(values.astype(dtype))
        view = flat[1:].reshape(rows, 132)
        fresh = view.copy()
        assert reduction_gpu.cumsum_kernel_name(view.dtype, 132, rows, view.data.ptr) == "dml_kernel"
        assert reduction_gpu.cumsum_kernel_name(fresh.dtype, 132, rows, fresh.data.ptr) == "dml_kernel_warp"
        for reverse in (False, True):
            for exclusive in (False, True):
                a = reduction_gpu.cumsum_rows(cupy, view, reverse, exclusive)
                b = reduction_gpu.cumsum_rows(cupy, fresh, reverse, exclusive)
                if dtype == "int32":
                    assert bool(cupy.array_equal(a, b)), (reverse, exclusive)
                else:
                    assert bool(cupy.allclose(a, b, rtol=1e-5, atol=0)), (reverse, exclusive)


@pytest.mark.parametrize("cols", [4, 32, 1000, 4096, 16384])
def test_gpu_softmax_stage_copies_keep_the_bits(gpu_backend, cols, monkeypatch):
    """Softmax rows staged in shared memory (their float4 vectors copied there by cp.async) give the bits of the same
    rows read from device memory in every pass (SOFTMAX_STAGE_BYTES 0: no stage) by blocks of as many threads, NaN
    rows, -0.0, infinities and rows of ties included; and the CPU's result within the tolerance, 64 rows (the
    bench's rows, fewer of them)."""
    from dmlcli.operators.reduction import gpu as reduction_gpu

    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((64, cols)) * 4).astype(np.float32)
    x[1, ::3] = np.nan
    x[2, :] = -0.0
    x[3, 0] = np.inf
    x[4, :] = 1.0
    x[5, -1] = -np.inf
    device = cupy.asarray(x)
    for log_form in (False, True):
        staged = cupy.asnumpy(reduction_gpu.softmax_rows(cupy, device, log_form))
        with monkeypatch.context() as patch:
            threads = reduction_gpu.softmax_threads(cols, True)  # the same combining order as the staged run
            patch.setattr(reduction_gpu, "SOFTMAX_STAGE_BYTES", 0)
            patch.setattr(reduction_gpu, "softmax_threads", lambda count, staged: threads)
            unstaged = cupy.asnumpy(reduction_gpu.softmax_rows(cupy, device, log_form))
        assert np.array_equal(staged.view(np.uint32), unstaged.view(np.uint32)), log_form
    finite = np.where(np.isfinite(x), x, 0.5).astype(np.float32)
    verdict = dmlcli.validate("activation_softmax1", finite, axes=[1])
    on_cpu = dmlcli.run("activation_softmax1", finite, axes=[1])
    on_gpu = dmlcli.run("activation_softmax1", finite, axes=[1], backend="gpu")
    assert_backends_agree(verdict, on_cpu, on_gpu, [finite], cols)
