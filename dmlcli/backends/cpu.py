"""The NumPy backend: runs each operator's cpu_kernel on host arrays."""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from . import check_result_count, fused_activation
from ..data_types import from_kernel_array, is_four_bit_dtype, to_kernel_array
from ..operators import Operator
from ..operators.numerics import compiled_loops
from ..io.npy import to_native


class CpuBackend:
    name = "cpu"
    preferred_chunk_bytes = 1 << 20  # small buffers keep a streamed run's memory to a few tens of MiB

    def execute(self, operator: Operator, inputs, out_shape, out_dtype: np.dtype, parameters) -> np.ndarray:
        """Whole tensors in, whole tensor out (inputs are broadcast to `out_shape`)."""
        with np.errstate(all="ignore"):  # NaN and infinity are values here, not errors
            return self.elementwise([np.asarray(x) for x in inputs], operator, tuple(out_shape), np.dtype(out_dtype),
                                    parameters)

    def elementwise(self, inputs: list[np.ndarray], operator: Operator, out_shape: tuple, out_dtype: np.dtype,
                    parameters) -> np.ndarray:
        """execute's work on NumPy arrays, for a caller that holds np.errstate(all="ignore") around many calls (a
        model's planned calls: onnx_model/executors.py), with the output's Sizes a tuple and its type a dtype."""
        arrays = [_read_only(to_native(x), out_shape) for x in inputs]
        return _elementwise_output(operator.cpu_kernel(arrays, out_dtype, parameters), out_shape, arrays)

    def planned_elementwise(self, operator: Operator, inputs: list[np.ndarray], out_shape: tuple, out_dtype: np.dtype,
                            parameters):
        """`elementwise` as a function of the input arrays alone giving a 1-tuple, for a call made again and again on
        inputs of the types, Sizes and Strides of `inputs` (a model's planned node, under the caller's
        np.errstate): where every input is native and of the output's Sizes, the kernel runs on the arrays as they
        come, without `elementwise`'s read-only views and byte-order checks (kernels write no input: every one has
        run on read-only views); any other call takes `elementwise` itself."""
        if any(x is None or not x.dtype.isnative or x.shape != out_shape for x in inputs):
            elementwise = self.elementwise
            return lambda arrays: (elementwise(arrays, operator, out_shape, out_dtype, parameters),)
        kernel = operator.cpu_kernel

        def run(arrays: list) -> tuple[np.ndarray]:
            return (_elementwise_output(kernel(arrays, out_dtype, parameters), out_shape, arrays),)

        return run

    def execute_chunks(self, operator: Operator, chunks: Iterable[list[np.ndarray]], out_dtype: np.dtype,
                       parameters) -> Iterator[np.ndarray]:
        """The streaming interface: for each list of equal-shaped input chunks, yield the output chunk.

        Kernels are elementwise, so chunks may be any slices; a backend may pipeline (the GPU
        backend overlaps copies and kernels), but must yield results in the order of `chunks`.
        """
        out_dtype = np.dtype(out_dtype)
        for chunk in chunks:
            with np.errstate(all="ignore"):
                result = operator.cpu_kernel([to_native(c) for c in chunk], out_dtype, parameters)
            yield result

    def execute_shaped(self, operator: Operator, inputs, outputs, parameters) -> tuple[np.ndarray, ...]:
        """A shaped operator's array_kernel on NumPy: every output, as its own C-ordered array."""
        with np.errstate(all="ignore"):
            return self.shaped([None if x is None else np.asarray(x) for x in inputs], operator, outputs, parameters)

    def shaped(self, inputs: list, operator: Operator, outputs, parameters) -> tuple[np.ndarray, ...]:
        """execute_shaped's work on NumPy arrays (None for an input left out), for a caller that holds
        np.errstate(all="ignore") around many calls (as `elementwise`)."""
        # 4-bit tensors (ml_dtypes' int4, uint4) reach the kernel as int8/uint8 values and leave it as such.
        arrays = [None if x is None else to_kernel_array(to_native(x)) for x in inputs]
        results = list(operator.array_kernel(np, arrays, outputs, parameters))
        check_result_count(operator, results, outputs)
        fused = fused_activation(operator, parameters)
        if fused is not None:  # the activation's own kernel, on the result rounded to the output type
            activation, fields = fused
            first = np.asarray(results[0])
            results[0] = activation.cpu_kernel([first], first.dtype, fields)
        return tuple(_own_result(result, info, arrays) for result, info in zip(results, outputs))

    def planned_shaped(self, operator: Operator, inputs: list, outputs, parameters,
                       constant_inputs: frozenset[int] = frozenset()):
        """`shaped` as a function of the input arrays alone, for a call made again and again with inputs of the
        types of `inputs` (a model's planned node: onnx_model/planning/planned.py holds every later call's types,
        Sizes and Strides to the first's): where no input needs converting (every one native and not 4-bit) and no
        output is 4-bit, the kernel runs on the arrays as they come and its results are checked only for what can change
        from call to call (a fresh C-ordered array, no input's memory). A kernel's call then costs a model's node a
        few µs less: the per-input conversions and the per-output type checks were most of the planned call's own
        cost. Where the operator has a planned_kernel for the call, that function is the call: it gives fresh C-ordered
        arrays of the outputs' types itself, and may work out once what it reads of the inputs at `constant_inputs`
        (positions whose array is the same, with the same values, on every call: a model's weights and indices).
        Any other call takes `shaped` itself, under the caller's np.errstate."""
        as_given = all(x is None or (x.dtype.isnative and not is_four_bit_dtype(x.dtype)) for x in inputs)
        four_bit_out = any(info.data_type.is_four_bit for info in outputs)
        if not as_given or four_bit_out or fused_activation(operator, parameters) is not None:
            return lambda arrays: self.shaped(arrays, operator, outputs, parameters)
        if operator.planned_kernel is not None:  # the operator's own call for this case, worked out once
            planned = operator.planned_kernel(inputs, outputs, parameters, constant_inputs)
            if planned is not None:
                return planned
        kernel = operator.array_kernel

        def run(arrays: list) -> tuple[np.ndarray, ...]:
            results = tuple(_fresh(result, arrays) for result in kernel(np, arrays, outputs, parameters))
            check_result_count(operator, results, outputs)
            return results

        return run

    def describe(self) -> dict:
        return {"backend": "cpu", "numpy": np.__version__, "compiled_loops": compiled_loops.state()}


def _elementwise_output(result, out_shape: tuple, inputs) -> np.ndarray:
    """An element-wise kernel's result as the call's output: broadcast to the output's Sizes (a kernel may give a
    constant), C-ordered, and its own memory (a kernel may hand an input back, IDENTITY)."""
    if getattr(result, "shape", None) != out_shape:  # broadcast_to costs a small call a few µs
        result = np.broadcast_to(result, out_shape)
    result = np.ascontiguousarray(result)
    if _aliases(result, inputs):
        result = result.copy()
    return result


def _read_only(array: np.ndarray, shape: tuple) -> np.ndarray:
    """The input as the kernel sees it: broadcast to the output's shape, read-only. An input of that shape
    already gets a read-only view, not np.broadcast_to (which builds an iterator: 0.06 ms of a run's fixed
    cost once its code is out of the caches, as after a pass over tens of MiB)."""
    if array.shape != shape:
        return np.broadcast_to(array, shape)
    view = array.view()
    view.flags.writeable = False
    return view


def create() -> CpuBackend:
    return CpuBackend()


def _own_result(result, info, inputs) -> np.ndarray:
    """The kernel's result as a fresh C-ordered array of the output's type and Sizes (never an input's buffer);
    a 4-bit output, which the kernel gives as int8/uint8 values, as ml_dtypes' int4/uint4."""
    result = np.asarray(result)
    expected = np.dtype(info.data_type.kernel_dtype)
    if result.dtype != expected or tuple(result.shape) != tuple(info.shape):
        raise AssertionError(f"kernel gave {result.dtype} {list(result.shape)} for {info.name} "
                             f"({expected} {list(info.shape)})")
    if info.data_type.is_four_bit:
        return from_kernel_array(result, info.data_type)  # a fresh array
    return _fresh(result, inputs)


def _fresh(result, inputs) -> np.ndarray:
    """The result as a C-ordered array that shares no input's memory (a copy only where it is not one)."""
    if type(result) is not np.ndarray:
        result = np.asarray(result)
    if not result.flags.c_contiguous or _aliases(result, inputs):
        return np.ascontiguousarray(result).copy()
    return result


def _aliases(result: np.ndarray, inputs) -> bool:
    """Whether a kernel's result is one of its inputs or a view of an input's memory. A result that owns its memory
    (a new array, what kernels give) can share it only by being an input itself, so only a view pays NumPy's
    may_share_memory (a few µs a model's node, where a planned call's whole cost is tens)."""
    if result.base is None:
        for x in inputs:  # (a loop: a generator's frame is most of this check's cost)
            if x is result:
                return True
        return False
    return any(x is not None and np.may_share_memory(result, x) for x in inputs)
