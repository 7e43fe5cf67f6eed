"""CPU benchmark of the small-tensor kernels the Transformer encoder calls (a script, not a test): each kernel as it
was (kept here) against the kernel as it is, through the call a planned ONNX node makes.

Each case is validated once by dmlcli's API (dmlcli.validate) and run by the CPU executor's compiled call
(onnx_model/executors.py: CpuExecutor.compiled, under its running() context: NumPy's errstate and BLAS on the
calling thread), as `dmlcli onnx` runs a planned node (less the plan's wiring of the node's inputs), the
operator's kernel swapped for the old one for the baseline. The encoder's shapes (LayerNormalization {1,16,128}, Softmax {1,4,16,16}, the embedding's and the
attention's Gathers, Mul by a scalar, Add, a Transpose's strided IDENTITY) and the same operators on 4 Mi values
(the change must not slow large tensors). Times are medians of --samples samples of the thread's CPU time
(time.thread_time_ns) per call, a sample being as many calls as fill about 2 ms, old and new alternating sample
by sample; the ratio is old / new (above 1: the new kernel is faster). Each case's old and new results are also
compared bit for bit (the exit status is 1 where they differ). Set OPENBLAS_NUM_THREADS=1 before Python starts, as
the encoder's figures are taken.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python3 bench/small_kernels_bench.py [--samples 41] [--cases mvn1,...]
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python3 bench/small_kernels_bench.py --tiny   # one sample each: a check
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dmlcli  # noqa: E402
from dmlcli.onnx_model.executors import CpuExecutor  # noqa: E402
from dmlcli.operators.elementwise import arithmetic  # noqa: E402
from dmlcli.operators.indexing import entries as indexing  # noqa: E402
from dmlcli.operators.normalization import entries as normalization  # noqa: E402
from dmlcli.operators.reduction import entries as reduction  # noqa: E402
from dmlcli.operators.table.shaped import resolve_axes  # noqa: E402

SAMPLE_SECONDS = 0.002

# ---------------------------------------------------------------- the kernels as they were (commit 55594ec)
# tests/test_small_kernel_bits.py holds the new kernels to these bit for bit.


def old_normalise(xp, x, axes, scale, bias, normalize_variance: bool, epsilon, use_mean: bool = True):
    centred = x - xp.mean(x, axis=axes, keepdims=True, dtype=xp.float32) if use_mean else x
    if normalize_variance:
        variance = xp.mean(centred * centred, axis=axes, keepdims=True, dtype=xp.float32)
        centred = centred / xp.sqrt(variance + xp.float32(epsilon))
    if scale is not None:
        centred = centred * scale
    if bias is not None:
        centred = centred + bias
    return centred


def old_mvn_axes_kernel(xp, inputs, outputs, params):
    x, scale, bias = (normalization._f32(xp, t) for t in inputs)
    axes = resolve_axes(params["Axes"], x.ndim, "Axes")
    use_mean, use_variance = normalization._statistics(params)
    y = old_normalise(xp, x, axes, scale, bias, use_variance, params["Epsilon"], use_mean)
    return normalization._finish(xp, y, outputs[0], params["FusedActivation"])


def old_softmax_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    axes = reduction._group_axes(params, x.ndim)
    work = reduction._accumulator(xp, x)
    shifted = work - xp.max(work, axis=axes, keepdims=True)
    xp.exp(shifted, out=shifted)
    shifted /= xp.sum(shifted, axis=axes, keepdims=True, dtype=shifted.dtype)
    return (shifted.astype(out.data_type.numpy_dtype, copy=False),)


def old_log_softmax_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    (out,) = outputs
    axes = reduction._group_axes(params, x.ndim)
    work = reduction._accumulator(xp, x)
    shifted = work - xp.max(work, axis=axes, keepdims=True)
    shifted -= xp.log(xp.sum(xp.exp(shifted), axis=axes, keepdims=True, dtype=shifted.dtype))
    return (shifted.astype(out.data_type.numpy_dtype, copy=False),)


def old_gather_kernel(xp, inputs, outputs, params):
    data, indices = inputs
    (out,) = outputs
    axis = params["Axis"]
    count = params["IndexDimensions"]
    count = indices.ndim if count is None else count
    index_sizes = indices.shape[indices.ndim - count:]
    positions = indexing._clamped_positions(xp, indices.reshape(index_sizes), data.shape[axis])
    bits = data.view(np.dtype(f"uint{data.dtype.itemsize * 8}")) if data.dtype.kind == "f" else data
    taken = xp.take(bits, positions, axis=axis)
    return (indexing._as_type(xp, taken, out.data_type.numpy_dtype).reshape(out.shape),)


def old_binary(ufunc):
    def kernel(inputs, out_dtype, params):
        a, b = inputs
        with np.errstate(all="ignore"):
            if a.dtype.kind == "f":
                return ufunc(arithmetic._work(a), arithmetic._work(b)).astype(out_dtype, copy=False)
            return ufunc(a, b).astype(out_dtype, copy=False)

    return kernel


def old_identity(inputs, out_dtype, params):
    (x,) = inputs
    if params.get("ScaleBias") is None:
        return x.astype(out_dtype, copy=True)
    with np.errstate(all="ignore"):
        return arithmetic.scale_bias(x, params).astype(out_dtype, copy=False)


OLD_KERNELS = {
    "MEAN_VARIANCE_NORMALIZATION1": ("array_kernel", old_mvn_axes_kernel),
    "SOFTMAX1": ("array_kernel", old_softmax_kernel),
    "LOG_SOFTMAX1": ("array_kernel", old_log_softmax_kernel),
    "GATHER": ("array_kernel", old_gather_kernel),
    "ADD": ("cpu_kernel", old_binary(np.add)),
    "MULTIPLY": ("cpu_kernel", old_binary(np.multiply)),
    "IDENTITY": ("cpu_kernel", old_identity),
}


@contextlib.contextmanager
def old_kernel(operator):
    """The operator's kernel swapped for the old one while the baseline runs (an Operator keeps its fields in
    __dict__; the backend reads the kernel from it on every call)."""
    field, function = OLD_KERNELS[operator.name]
    new = vars(operator)[field]
    vars(operator)[field] = function
    try:
        yield
    finally:
        vars(operator)[field] = new


# ---------------------------------------------------------------- the cases


def _floats(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _transposed(shape) -> np.ndarray:
    """A transpose's view, as the ONNX adapter hands IDENTITY: the first two axes of a C-ordered array swapped."""
    return _floats((shape[1], shape[0]) + tuple(shape[2:]), 5).swapaxes(0, 1)


def cases() -> dict[str, tuple[str, list, dict]]:
    """name: (operator, the arrays, the API's keywords)."""
    rng = np.random.default_rng(1)
    found = {}
    for label, rows, width in (("", 16, 128), (" 4Mi", 1024, 4096)):
        found[f"mvn1 layer norm {{1,{rows},{width}}}{label}"] = (
            "mean_variance_normalization1", [_floats((1, rows, width), 0), _floats((1, 1, width), 1),
                                             _floats((1, 1, width), 2)], {"axes": [2]})
    for label, side in (("", 16), (" 4Mi", 1024)):
        found[f"softmax1 {{1,4,{side},{side}}} last axis{label}"] = (
            "activation_softmax1", [_floats((1, 4, side, side), 3)], {"axes": [3]})
    found["log_softmax1 {1,4,16,16} last axis"] = ("activation_log_softmax1", [_floats((1, 4, 16, 16), 3)],
                                                   {"axes": [3]})
    found["gather embedding {1,1000,128} by {1,1,16}"] = (
        "gather", [_floats((1, 1000, 128), 4), rng.integers(0, 1000, size=(1, 1, 16))],
        {"axis": 1, "index_dimensions": 2})
    found["gather {3,16,1,128} by a scalar"] = (
        "gather", [_floats((3, 16, 1, 128), 4), np.ones((1, 1, 1, 1), np.int64)],
        {"axis": 0, "index_dimensions": 0})
    found["gather {32768,128} by 32768 4Mi"] = (
        "gather", [_floats((32768, 128), 4), rng.integers(-32768, 32768, size=(1, 32768))],
        {"axis": 0, "index_dimensions": 2})
    for label, rows, width in (("", 16, 32), (" 4Mi", 1024, 1024)):
        found[f"multiply {{1,4,{rows},{width}}} by a scalar{label}"] = (
            "multiply", [_floats((1, 4, rows, width), 6), np.float32([[[[0.25]]]])], {"broadcast": True})
    for label, rows, width in (("", 16, 128), (" 4Mi", 1024, 4096)):
        found[f"add {{1,{rows},{width}}} + {{1,{rows},{width}}}{label}"] = (
            "add", [_floats((1, rows, width), 7), _floats((1, rows, width), 8)], {})
    for label, shape in (("", (4, 16, 32)), ("", (16, 1, 128)), (" 4Mi", (2048, 2048))):
        found[f"identity of a transpose {{{','.join(map(str, shape))}}}{label}"] = (
            "identity", [_transposed(shape)], {})
    return found


def compiled_call(name: str, arrays: list, keywords: dict) -> tuple[Callable[[], tuple], object]:
    """The planned node's call: validated once by the API, compiled by the CPU executor."""
    verdict = dmlcli.validate(name, *arrays, **keywords)
    call = CpuExecutor().compiled(verdict, arrays)
    return (lambda: call(arrays)), verdict.call.operator


def calls_per_sample(function) -> int:
    start = time.thread_time_ns()
    function()
    once = max(time.thread_time_ns() - start, 1)
    return max(1, min(2000, int(SAMPLE_SECONDS * 1e9 / once)))


def per_call_seconds(function, count: int) -> float:
    start = time.thread_time_ns()
    for _ in range(count):
        function()
    return (time.thread_time_ns() - start) / count / 1e9


def measure(function, operator, samples: int) -> tuple[float, float, bool]:
    """(old median, new median, same bits) in seconds per call, old and new alternating sample by sample."""
    with old_kernel(operator):
        old_result = function()
    new_result = function()
    same = all(np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
               for a, b in zip(old_result, new_result))
    count = calls_per_sample(function)
    old_times, new_times = [], []
    for _ in range(samples):
        with old_kernel(operator):
            old_times.append(per_call_seconds(function, count))
        new_times.append(per_call_seconds(function, count))
    return statistics.median(old_times), statistics.median(new_times), same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=41)
    parser.add_argument("--cases", default="", help="comma-separated substrings of the case names to run")
    parser.add_argument("--tiny", action="store_true", help="one sample of each case (a quick check that it runs)")
    args = parser.parse_args(argv)
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: OPENBLAS_NUM_THREADS is not 1 (set it before Python starts, as the encoder's figures are taken)")
    samples = 1 if args.tiny else args.samples
    wanted = [w for w in args.cases.split(",") if w]
    print(f"{'case':<48} {'old us':>10} {'new us':>10} {'old/new':>8}  bits")
    executor = CpuExecutor()
    differ = []
    with executor.running():
        for label, (name, arrays, keywords) in cases().items():
            if wanted and not any(w in label for w in wanted):
                continue
            function, operator = compiled_call(name, arrays, keywords)
            old, new, same = measure(function, operator, samples)
            bits = "same" if same else "DIFFER"
            print(f"{label:<48} {old * 1e6:>10.1f} {new * 1e6:>10.1f} {old / new:>8.2f}  {bits}")
            if not same:
                differ.append(label)
    if differ:
        print(f"the new kernels' bits differ from the old ones' in: {', '.join(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
