"""The CuPy backend: each operator's fused CUDA kernel, with copies and kernels overlapped.

CuPy is imported here only, when the GPU backend is asked for. The kernels are generated from
the operator table by dmlcli.gpu_kernels (one CUDA module per operator, compiled once and cached
by CuPy). Host data goes through a small ring of pipeline slots, each with its own CUDA stream,
pinned host staging buffers and device buffers: while one slot's piece is in the kernel, another's
is on its way to the GPU and a third's on its way back, so a large run is limited by the PCIe
transfers, and GPU memory use stays at a few pieces whatever the size of the tensors.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Iterable, Iterator

import numpy as np

from . import check_result_count, fused_activation, gpu_kernels
from ..data_types import from_kernel_array, to_kernel_array
from ..errors import BackendUnavailableError, InputError, raise_interruption
from ..operators import Operator
from ..operators.numerics import cudnn_graphs, products
from ..operators.table.schema import ActivationApplied
from ..io.npy import to_native

INSTALL_HINT = "pip install 'dmlcli[gpu]' (CUDA 12) or pip install 'dmlcli[gpu-cuda13]' (CUDA 13)"
PIECE_BYTES = 32 << 20  # the widest tensor's bytes per pipeline step
PIPELINE_SLOTS = 3  # pieces in flight: one copying in, one in the kernel, one copying out
THREADS_PER_BLOCK = 256
GEOMETRIES_KEPT = 4096  # broadcast geometries kept on the device (a few hundred bytes each)
HOST_COPY_THREADS = 8
PARALLEL_COPY_BYTES = 4 << 20  # below this a host copy is not worth splitting over threads
VECTOR_ALIGNMENT = 256  # device buffers the vector kernels read start on this boundary (CuPy's pool gives 512)

_CUDA_ERROR_INSUFFICIENT_DRIVER = 35
_CUDA_ERROR_NO_DEVICE = 100
_CUDA_MEMORY_TYPE_HOST = 1  # cudaMemoryTypeHost: pinned host memory
# cublasMath_t CUBLAS_TF32_TENSOR_OP_MATH (cublas_api.h), which CuPy does not name: FLOAT32 GEMMs may multiply on
# TF32 tensor cores. A mode of the cuBLAS handle, and CuPy keeps one handle per thread and device.
_CUBLAS_TF32_TENSOR_OP_MATH = 3


def _import_cupy():
    try:
        import cupy
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"GPU backend: CuPy is not installed; install it with {INSTALL_HINT}") from None
    except Exception as error:  # noqa: BLE001 - a CuPy that is installed but cannot load its CUDA libraries
        raise_interruption(error)
        raise BackendUnavailableError(
            f"GPU backend: CuPy is installed but cannot load ({_first_line(error)}); "
            f"reinstall the CuPy that matches your CUDA version: {INSTALL_HINT}") from None
    return cupy


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _cuda_version(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


def _check_device(cupy) -> None:
    """Raise BackendUnavailableError naming the missing piece: the driver or the device."""
    runtime = cupy.cuda.runtime
    try:
        driver = runtime.driverGetVersion()
    except Exception:  # noqa: BLE001 - no libcuda at all
        driver = 0
    if driver == 0:
        raise BackendUnavailableError(
            "GPU backend: no CUDA driver found; install the NVIDIA driver (nvidia-smi should then list the GPU)")
    try:
        count = runtime.getDeviceCount()
    except runtime.CUDARuntimeError as error:
        if error.status == _CUDA_ERROR_NO_DEVICE:
            count = 0
        elif error.status == _CUDA_ERROR_INSUFFICIENT_DRIVER:
            raise BackendUnavailableError(
                f"GPU backend: the CUDA driver supports CUDA {_cuda_version(driver)} but this CuPy needs "
                f"CUDA {_cuda_version(runtime.runtimeGetVersion())}; update the NVIDIA driver, or install the CuPy for your CUDA: {INSTALL_HINT}"
            ) from None
        else:
            raise BackendUnavailableError(f"GPU backend: CUDA cannot start ({_first_line(error)})") from None
    if count == 0:
        raise BackendUnavailableError(
            "GPU backend: no CUDA device found; the driver sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)")


class _Slot:
    """One pipeline slot: a stream, its completion event, and reusable staging and device buffers."""

    def __init__(self, cupy, tensors: int):
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.done = cupy.cuda.Event(disable_timing=True)
        self.done.record(self.stream)
        self.pinned = [None] * tensors  # host staging for each input
        self.device = [None] * (tensors + 1)  # each input, then the output


@contextmanager
def tf32_products(cupy, cublas):
    """cuBLAS may compute FLOAT32 products on TF32 tensor cores, on this thread and device, until the block ends
    (then its math mode is restored, also on an error).

    The handle's math mode, not CuPy's set_compute_type(float32, COMPUTE_TYPE_TF32): that one is a process-wide
    setting (another thread's GEMM would see it) and only CuPy's 2-D products read it, while its batched matmul
    (GEMM with batch dimensions, CONVOLUTION's grouped products, the recurrent operators') does not; the math mode
    reaches both (measured on an H100 with CuPy 14.2: tests/test_gpu_matmul.py)."""
    handle = cupy.cuda.device.get_cublas_handle()
    before = cublas.getMathMode(handle)
    cublas.setMathMode(handle, _CUBLAS_TF32_TENSOR_OP_MATH)
    try:
        with products.allowing_tf32():  # cuDNN's graphs read the permission there (they have no math mode)
            yield
    finally:
        cublas.setMathMode(handle, before)


class GpuBackend:
    name = "gpu"
    preferred_chunk_bytes = 64 << 20  # fewer, larger transfers and kernel launches per streamed run
    takes_allow_tf32 = True  # execute_shaped(..., allow_tf32=True): see backends/tf32.py
    # execute_chunks asks for the next chunk with at most this many outputs not yet yielded (its pinned input
    # chunks still in use): streamed .npy runs read straight into a ring of pinned buffers by it
    # (engine/file_pipeline.py).
    chunks_held = PIPELINE_SLOTS

    def __init__(self, cupy):
        self._cp = cupy
        self._modules: dict[tuple, object] = {}
        self._functions: dict[tuple, object] = {}
        self._geometries: dict[tuple, object] = {}
        self._lock = threading.Lock()
        self._copy_pool: ThreadPoolExecutor | None = None
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        self.device_name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.device_memory = int(props["totalGlobalMem"])

    # -- kernels --------------------------------------------------------------------------

    def _function(self, operator: Operator, kind: str, signature):
        """The compiled kernel for one type signature; each signature is compiled once, on first use, and its
        kernels are looked up by one dictionary read afterwards (the support table's signatures take 40-70 us to
        list: up to a tenth of a 1 GiB IDENTITY's time when they were listed on every launch)."""
        key = (operator.dml_name, signature)  # IDENTITY and TANH exist as ELEMENT_WISE and ACTIVATION
        function = self._functions.get((key, kind))
        if function is not None:
            return function
        if signature not in gpu_kernels.signatures(operator):
            raise InputError(f"{operator.name} has no GPU kernel for {', '.join(signature[:-1])} -> {signature[-1]}")
        with self._lock:
            module = self._modules.get(key)
            if module is None:
                module = self._cp.RawModule(code=gpu_kernels.module_source(operator, signature),
                                            options=gpu_kernels.COMPILE_OPTIONS)
                self._modules[key] = module
            function = self._functions[(key, kind)] = module.get_function(gpu_kernels.kernel_name(kind, signature))
        return function

    def run_resident(self, operator: Operator, device_inputs, device_out, parameters) -> None:
        """Launch the operator's kernel on contiguous same-sized device arrays, on the current stream.

        BIT_AND/OR/XOR/NOT run on the bytes as the widest words that divide them (64-bit words for
        any tensor of a multiple of 8 bytes); the other operators on their element types.
        """
        count = device_out.size
        if count == 0:
            return
        signature = gpu_kernels.signature_of(operator, [x.dtype for x in device_inputs], device_out.dtype)
        params = gpu_kernels.parameter_values(operator, signature, parameters)
        if gpu_kernels.runs_on_words(operator, device_inputs[0].dtype, device_out.dtype):
            word = _widest_word(device_out.nbytes, device_inputs[0].dtype.itemsize)
            device_inputs = [x.view(word) for x in device_inputs]
            device_out = device_out.view(word)
            signature = (np.dtype(word).name,) * len(signature)
            count = device_out.size
        # The kernel reads each tensor's bits through a pointer of its own type: a launch passes a CuPy array as its
        # address, whatever its dtype (the views to unsigned types that were made here cost 2 to 3 us each).
        function = self._function(operator, "vec", signature)
        vectors = count // gpu_kernels.operator_elements_per_thread(operator, signature)
        blocks = min(max(1, math.ceil(max(vectors, 1) / THREADS_PER_BLOCK)), 2**31 - 1)
        function((blocks,), (THREADS_PER_BLOCK,), (*device_inputs, device_out, np.int64(count), *params))

    def _geometry(self, in_shapes: tuple, out_shape: tuple):
        """The nd kernel's geometry on the device, copied once per shapes (up to GEOMETRIES_KEPT of them): a copy
        per call cost a host-to-device transfer, and one from pageable memory cannot be captured in a CUDA graph,
        which keeps reading the array it was given (so a kept one is never dropped)."""
        key = (in_shapes, tuple(out_shape))
        found = self._geometries.get(key)
        if found is None:
            found = self._cp.asarray(gpu_kernels.broadcast_geometry(list(in_shapes), out_shape))
            if len(self._geometries) < GEOMETRIES_KEPT:
                self._geometries[key] = found
        return found

    def _run_broadcast(self, operator: Operator, device_inputs, device_out, parameters) -> None:
        """Launch the broadcasting kernel: inputs of shapes that broadcast to device_out's shape."""
        cp = self._cp
        signature = gpu_kernels.signature_of(operator, [x.dtype for x in device_inputs], device_out.dtype)
        params = gpu_kernels.parameter_values(operator, signature, parameters)
        geometry = self._geometry(tuple(x.shape for x in device_inputs), device_out.shape)
        function = self._function(operator, "nd", signature)
        blocks = min(max(1, math.ceil(device_out.size / THREADS_PER_BLOCK)), 65536)
        function((blocks,), (THREADS_PER_BLOCK,),  # each array passed as its address (run_resident says why)
                 (*device_inputs, device_out, geometry, np.int64(device_out.size), *params))

    # -- the backend interface -------------------------------------------------------------

    def execute(self, operator: Operator, inputs, out_shape, out_dtype, parameters) -> np.ndarray:
        """Whole host tensors in, whole host tensor out (inputs are broadcast to `out_shape`)."""
        out_shape = tuple(int(d) for d in out_shape)
        arrays = [to_native(np.asarray(x)) for x in inputs]
        out = np.empty(out_shape, dtype=np.dtype(out_dtype))
        if out.size == 0:
            return out
        if any(a.shape != out_shape for a in arrays):
            self._execute_broadcast(operator, arrays, out, parameters)
            return out
        flat_in = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
        flat_out = out.reshape(-1)
        step = _piece_elements([a.dtype for a in arrays] + [out.dtype])
        pieces = ([a[start:start + step] for a in flat_in] for start in range(0, out.size, step))
        for start, piece in zip(range(0, out.size, step), self.execute_chunks(operator, pieces, out.dtype, parameters)):
            self._host_copy(flat_out[start:start + piece.size], piece)
        return out

    def execute_shaped(self, operator: Operator, inputs, outputs, parameters, *,
                       allow_tf32: bool = False) -> tuple[np.ndarray, ...]:
        """A shaped operator on the GPU: the inputs copied over once, its kernel (gpu_array_kernel, else its
        array_kernel on CuPy) run where they are, the outputs copied back. Nothing goes back and forth
        between the steps of one operator. `allow_tf32`: see execute_shaped_device."""
        results = self.execute_shaped_device(operator, [None if x is None else to_native(np.asarray(x))
                                                        for x in inputs], outputs, parameters, allow_tf32=allow_tf32)
        return tuple(from_kernel_array(self._cp.asnumpy(result), info.data_type)
                     for result, info in zip(results, outputs))

    def execute_shaped_device(self, operator: Operator, inputs, outputs, parameters, *, allow_tf32: bool = False):
        """The same with CuPy arrays in and out (host arrays are copied to the device first).

        CuPy has no 4-bit type: an INT4 or UINT4 tensor lives on the device as int8 or uint8 values (its
        kernel_dtype), a host array of ml_dtypes' int4/uint4 being converted before its copy, and a 4-bit output
        is returned so (execute_shaped turns it back into int4/uint4 on the host).

        With `allow_tf32`, the kernel of an operator whose FLOAT32 work is matrix products (tf32_products) and
        whose output is FLOAT32 runs with TF32 tensor cores allowed (tf32_products()); other calls as without."""
        cp = self._cp
        arrays = [None if x is None else _contiguous_on_device(cp, to_kernel_array(x) if isinstance(x, np.ndarray) else x)
                  for x in inputs]
        kernel = operator.gpu_array_kernel or operator.array_kernel
        with self._products(operator, outputs, allow_tf32):
            applied = kernel(cp, arrays, outputs, parameters)
            results = list(applied)
        check_result_count(operator, results, outputs)
        fused = fused_activation(operator, parameters)
        if isinstance(applied, ActivationApplied):
            fused = None  # the kernel's library applied it (cuDNN's fused RELU): not twice
        if fused is not None:  # the activation's own CUDA kernel, on the device result rounded to the output type
            activation, fields = fused
            first = cp.asarray(results[0])
            results[0] = self.execute_device(activation, [first], first.shape, first.dtype, fields)
        found = []
        for result, info in zip(results, outputs):
            result = _contiguous_on_device(cp, result)
            expected = info.data_type.kernel_dtype
            if result.dtype != expected or result.shape != tuple(info.shape):
                raise AssertionError(f"GPU kernel gave {result.dtype} {list(result.shape)} for {info.name} "
                                     f"({expected} {list(info.shape)})")
            found.append(result)
        return tuple(found)

    def _products(self, operator: Operator, outputs, allow_tf32: bool):
        """The context a shaped kernel's products run in: TF32 allowed, or cuBLAS as it is."""
        if not (allow_tf32 and outputs and operator.tf32_applies(outputs[0].data_type)):
            return _AS_IT_IS
        from cupy_backends.cuda.libs import cublas  # CuPy's own cuBLAS binding, beside cupy

        return tf32_products(self._cp, cublas)

    def execute_device(self, operator: Operator, inputs, out_shape, out_dtype, parameters):
        """CuPy arrays in (broadcastable to `out_shape`), a CuPy array out: blocks that already live on the GPU
        (a Dask array of CuPy blocks) are computed where they are, with no copy through the host."""
        cp = self._cp
        out = cp.empty(tuple(int(d) for d in out_shape), dtype=np.dtype(out_dtype))
        if out.size == 0:
            return out
        arrays = [_aligned(cp, cp.asarray(x)) for x in inputs]
        if any(a.shape != out.shape for a in arrays):
            arrays = [a.reshape((1,) * (out.ndim - a.ndim) + a.shape) for a in arrays]
            self._run_broadcast(operator, arrays, out, parameters)
        else:
            self.run_resident(operator, [a.reshape(-1) for a in arrays], out.reshape(-1), parameters)
        return out

    def _execute_broadcast(self, operator: Operator, arrays, out: np.ndarray, parameters) -> None:
        """Blocks of rows along the first axis, so GPU memory holds one block of the output at a time."""
        cp = self._cp
        ndim = out.ndim
        arrays = [a.reshape((1,) * (ndim - a.ndim) + a.shape) for a in arrays]
        row_bytes = max(1, math.prod(out.shape[1:])) * max(a.dtype.itemsize for a in arrays + [out])
        rows = max(1, PIECE_BYTES // row_bytes)
        for first in range(0, out.shape[0], rows):
            last = min(out.shape[0], first + rows)
            block = [np.ascontiguousarray(a if a.shape[0] == 1 else a[first:last]) for a in arrays]
            device_inputs = [cp.asarray(b) for b in block]
            device_out = cp.empty((last - first,) + out.shape[1:], dtype=out.dtype)
            self._run_broadcast(operator, device_inputs, device_out, parameters)
            out[first:last] = device_out.get()

    def execute_chunks(self, operator: Operator, chunks: Iterable[list[np.ndarray]], out_dtype,
                       parameters) -> Iterator[np.ndarray]:
        """The streaming interface: for each list of equal-shaped host input chunks, yield the output chunk.

        Chunks are cut into pieces of at most PIECE_BYTES that go round the pipeline slots; a chunk
        is yielded (in order) as soon as its last piece is back. Each yielded array is a fresh block
        of pinned host memory that the caller may keep. Input chunks are copied into pinned staging
        buffers before this returns to the iterator, so the caller may reuse them at once; except
        chunks that already are in pinned memory (from `pinned_empty`): those go to the GPU straight
        from where they are, and must stay unchanged until their output chunk has been yielded.
        """
        cp = self._cp
        out_dtype = np.dtype(out_dtype)
        slots: list[_Slot] = []
        waiting: deque = deque()  # (output chunk, events after its pieces), oldest first
        turn = 0
        try:
            for chunk in chunks:
                arrays = [np.ascontiguousarray(to_native(np.asarray(c))) for c in chunk]
                shape = arrays[0].shape
                if any(a.shape != shape for a in arrays):  # data types may differ (IF, POW, the quantizers)
                    raise InputError(f"{operator.name}: the input chunks of one step must have one shape")
                result = self.pinned_empty(shape, out_dtype)
                if result.size == 0:
                    waiting.append((result, []))
                else:
                    if not slots:
                        slots = [_Slot(cp, len(arrays)) for _ in range(PIPELINE_SLOTS)]
                    flat_in = [a.reshape(-1) for a in arrays]
                    flat_out = result.reshape(-1)
                    step = _piece_elements([a.dtype for a in arrays] + [out_dtype])
                    used = []
                    for start in range(0, result.size, step):
                        slot = slots[turn % PIPELINE_SLOTS]
                        turn += 1
                        self._submit(operator, slot, [a[start:start + step] for a in flat_in],
                                     flat_out[start:start + step], parameters)
                        if slot not in used:
                            used.append(slot)
                    waiting.append((result, [_mark(cp, slot) for slot in used]))
                while waiting and (len(waiting) > PIPELINE_SLOTS or _finished(waiting[0][1])):
                    yield _collect(waiting.popleft())
            while waiting:
                yield _collect(waiting.popleft())
        finally:
            # Also when the caller stops early or an error is raised: no copy may still be
            # writing into host memory that goes back to the pool.
            for slot in slots:
                slot.stream.synchronize()

    def _submit(self, operator: Operator, slot: _Slot, pieces, out_piece: np.ndarray, parameters) -> None:
        """Stage one piece in pinned memory, then queue copy in, kernel and copy out on the slot's stream."""
        cp = self._cp
        runtime = cp.cuda.runtime
        slot.done.synchronize()  # the slot's previous piece has left its buffers
        device_inputs, sources = [], []
        for i, piece in enumerate(pieces):
            if self._is_pinned(piece):
                sources.append(piece)  # the caller's pinned memory: no staging copy
            else:
                staging = slot.pinned[i]
                if staging is None or staging.nbytes < piece.nbytes:
                    staging = slot.pinned[i] = self.pinned_empty((PIECE_BYTES,), np.uint8)
                staged = staging[:piece.nbytes].view(piece.dtype)
                self._host_copy(staged, piece)
                sources.append(staged)
            device_inputs.append(self._device_view(slot, i, piece.size, piece.dtype))
        device_out = self._device_view(slot, len(pieces), out_piece.size, out_piece.dtype)
        with slot.stream:
            for source, device in zip(sources, device_inputs):
                runtime.memcpyAsync(device.data.ptr, source.ctypes.data, device.nbytes,
                                    runtime.memcpyHostToDevice, slot.stream.ptr)
            self.run_resident(operator, device_inputs, device_out, parameters)
            runtime.memcpyAsync(out_piece.ctypes.data, device_out.data.ptr, device_out.nbytes,
                                runtime.memcpyDeviceToHost, slot.stream.ptr)
            slot.done.record(slot.stream)

    def _device_view(self, slot: _Slot, index: int, count: int, dtype: np.dtype):
        cp = self._cp
        buffer = slot.device[index]
        if buffer is None:
            with slot.stream:
                buffer = slot.device[index] = cp.empty(PIECE_BYTES, dtype=cp.uint8)
        return cp.ndarray((count,), dtype=dtype, memptr=buffer.data)

    def _is_pinned(self, array: np.ndarray) -> bool:
        runtime = self._cp.cuda.runtime
        try:
            return runtime.pointerGetAttributes(array.ctypes.data).type == _CUDA_MEMORY_TYPE_HOST
        except runtime.CUDARuntimeError:
            return False

    def pinned_empty(self, shape, dtype) -> np.ndarray:
        """A host array in pinned (page-locked) memory, which the GPU copies from and to at full speed."""
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        memory = self._cp.cuda.alloc_pinned_memory(max(1, count * dtype.itemsize))
        return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)

    def _host_copy(self, destination: np.ndarray, source: np.ndarray) -> None:
        """np.copyto, split over threads for big blocks (NumPy releases the GIL while copying)."""
        if destination.nbytes < PARALLEL_COPY_BYTES:
            np.copyto(destination, source)
            return
        if self._copy_pool is None:
            self._copy_pool = ThreadPoolExecutor(HOST_COPY_THREADS, thread_name_prefix="dmlcli-copy")
        bounds = np.linspace(0, destination.size, HOST_COPY_THREADS + 1).astype(np.int64)
        parts = [self._copy_pool.submit(np.copyto, destination[lo:hi], source[lo:hi])
                 for lo, hi in zip(bounds[:-1], bounds[1:])]
        for part in parts:
            part.result()

    def describe(self) -> dict:
        cp = self._cp
        runtime = cp.cuda.runtime
        return {
            "backend": "gpu",
            "cupy": cp.__version__,
            "cuda_runtime": _cuda_version(runtime.runtimeGetVersion()),
            "cuda_driver": _cuda_version(runtime.driverGetVersion()),
            "device": self.device_name,
            "device_memory_bytes": self.device_memory,
            "products": products.describe(cp),
            "cudnn": cudnn_graphs.describe(),
        }


def _mark(cupy, slot: _Slot):
    """An event recorded after everything queued so far on the slot's stream."""
    event = cupy.cuda.Event(disable_timing=True)
    event.record(slot.stream)
    return event


def _finished(events) -> bool:
    return all(event.done for event in events)


def _collect(entry) -> np.ndarray:
    result, events = entry
    for event in events:
        event.synchronize()
    return result


# The context of a shaped kernel whose products run as cuBLAS is set (nullcontext can be entered again and again).
_AS_IT_IS = nullcontext()


def _contiguous_on_device(cp, x):
    """`x` as a C-contiguous CuPy array: itself where it already is one (each CuPy call costs a few microseconds,
    which a 100 MB operator's whole run can be 0.1 ms of), a copy or an upload otherwise. CuPy's own flag is read
    (`_c_contiguous`, every CuPy ndarray's since CuPy 4): `x.flags` builds a Flags object, 0.5 to 0.8 us of a small
    call's host time on the H200's machines, for each input and output."""
    if isinstance(x, cp.ndarray) and _c_ordered(x):
        return x
    return cp.ascontiguousarray(cp.asarray(x))


def _c_ordered(x) -> bool:
    """Whether a CuPy array is C-contiguous: its own flag, or its Flags object with a CuPy that has no such flag."""
    try:
        return x._c_contiguous
    except AttributeError:
        return x.flags.c_contiguous


def _aligned(cupy, array):
    """A C-contiguous device array whose data start on a VECTOR_ALIGNMENT boundary, copied where not.

    The kernels load 16 to 32 bytes per thread; a Dask block is often a view into a bigger array that
    starts at any byte (rows 2:4 of a (7, 9) uint8 array start at byte 18), which such loads cannot
    read (CUDA_ERROR_MISALIGNED_ADDRESS). A fresh allocation from CuPy's pool is aligned.
    """
    if array.flags.c_contiguous and array.data.ptr % VECTOR_ALIGNMENT == 0:
        return array
    fresh = cupy.empty(array.shape, dtype=array.dtype)
    fresh[...] = array
    return fresh


def _widest_word(nbytes: int, itemsize: int):
    """The widest unsigned integer dtype (at most 64 bits) whose size divides nbytes."""
    for size in (8, 4, 2, 1):
        if size >= itemsize and nbytes % size == 0:
            return np.dtype(f"uint{size * 8}")
    return np.dtype(f"uint{itemsize * 8}")


def _piece_elements(dtypes) -> int:
    """Elements per pipeline piece: PIECE_BYTES of the widest tensor, a multiple of 64 elements
    so that every piece but the last is a whole number of 64-bit words for BIT_AND/OR/XOR/NOT."""
    widest = max(np.dtype(t).itemsize for t in dtypes)
    return max(64, PIECE_BYTES // widest // 64 * 64)


def create() -> GpuBackend:
    """The GPU backend; raises BackendUnavailableError (exit 4) saying what is missing."""
    cupy = _import_cupy()
    _check_device(cupy)
    return GpuBackend(cupy)
