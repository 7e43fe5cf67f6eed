"""Where a model's DirectML calls run: on the CPU through the engine (engine.execute, as `dmlcli run` runs a
validated call), or on the GPU with every tensor kept on the device from one node to the next.

On the CPU a model runs with NumPy's BLAS on the calling thread alone (threadpoolctl, where it is installed) unless
the environment sets BLAS's thread count: a model's products are small (tens of MFLOP), and BLAS's own threads,
which wait for a core at every product and spin for a while after it, made SqueezeNet 1.7x slower beside one busy
process on two cores (20x on a busier machine), against at most 1.15x faster on an idle one.

On the GPU the model's inputs go to the device once per run, its outputs come back once, and its initializers
(and folded constants) are copied over the first time a node reads them and kept for the session: the weights
are converted once per session, not per call. A node's kernels are the operator's own (the GPU backend's
execute_device and execute_shaped_device, which `dmlcli run --backend gpu` uses between its own copies).
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Callable, ContextManager, Sequence

import numpy as np

from .. import engine
from ..calls.validation import Verdict
from ..errors import raise_interruption
from .graphs import c_ordered


# The environment variables that set a BLAS's thread count: where one is set, a model run keeps that count.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """threadpoolctl's controller of the BLAS libraries loaded (looked up once: 2-3 ms), or None without
    threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError as error:
        raise_interruption(error)
        return None
    return ThreadpoolController()


def one_blas_thread() -> ContextManager:
    """A context in which NumPy's BLAS runs on the calling thread alone (threadpoolctl's limit, 5 us to set and
    restore), unless the environment sets BLAS's thread count (BLAS_THREAD_VARIABLES) or threadpoolctl is not
    installed (then BLAS keeps its own threads)."""
    if any(os.environ.get(name) for name in BLAS_THREAD_VARIABLES):
        return contextlib.nullcontext()
    controller = _blas_controller()
    if controller is None:
        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")


class CpuExecutor:
    """The CPU backend through the engine: arrays are NumPy's."""

    name = "cpu"
    captures_graphs = False

    def __init__(self) -> None:
        self.backend = engine.choose_backend("cpu")
        self.warnings: list[str] = []

    def running(self) -> ContextManager:
        """Around a model's run: BLAS on the calling thread (one_blas_thread), and NaN and infinity taken as values
        (the errstate each backend call would otherwise enter and leave: a planned call runs without its own)."""
        stack = contextlib.ExitStack()
        stack.enter_context(one_blas_thread())
        stack.enter_context(np.errstate(all="ignore"))
        return stack

    def execute(self, verdict: Verdict, arrays: Sequence[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        outcome = engine.execute(verdict, arrays, self.backend)
        if outcome.warnings:
            self.warnings.extend(outcome.warnings)
        return outcome.all_outputs

    def compiled(self, verdict: Verdict, arrays: Sequence[np.ndarray | None],
                 constant_inputs: frozenset[int] = frozenset()
                 ) -> Callable[[Sequence[np.ndarray | None]], tuple[np.ndarray, ...]]:
        """The verdict's call as a function of its input arrays, what engine.execute looks up on every call read
        once (the backend under the call's float rules, the output's Sizes and type, the parameters): the call of a
        planned node (planning/planned.py), whose every call has inputs of the types of `arrays`, its first call's, and
        the same arrays at `constant_inputs` (the plan's constants: what the call makes of them is made once). An
        element-wise operator with hooks (counted per call, for the warnings) keeps engine.execute."""
        call = verdict.call
        operator = call.operator
        if operator.is_elementwise and operator.hooks:
            return lambda arrays: self.execute(verdict, arrays)
        backend = engine.choose_backend(self.backend, call.float_rules, call.allow_tf32)
        parameters = call.parameters
        # Call.complete adds nothing to a call that leaves no input out and broadcasts no shaped operator's input;
        # elsewhere it is planned on these arrays (Call.completion: what it makes of constants, made once).
        completes = call.absent or (call.broadcast and not operator.is_elementwise)
        complete = list
        if completes:
            complete = call.completion(arrays, constant_inputs)
            constant_inputs = frozenset(position for position, source in enumerate(call.completed_sources(arrays))
                                        if source is None or source in constant_inputs)
        plain = backend is self.backend  # NumPy's backend itself, not a wrapper (Direct3D's float rules, TF32)
        if operator.is_elementwise:
            shape, dtype = tuple(call.output.shape), np.dtype(call.output.data_type.numpy_dtype)
            if plain:  # the backend's own planned call, under running()'s errstate
                planned = backend.planned_elementwise(operator, complete(list(arrays)), shape, dtype, parameters)
                return planned if complete is list else lambda arrays: planned(complete(arrays))
            return lambda arrays: (backend.execute(operator, complete(arrays), shape, dtype, parameters),)
        outputs = call.outputs
        if plain:  # the backend's own planned call, on the arrays as they come (completed where the call says)
            planned = backend.planned_shaped(operator, complete(list(arrays)), outputs, parameters, constant_inputs)
            return planned if complete is list else lambda arrays: planned(complete(arrays))
        return lambda arrays: tuple(backend.execute_shaped(operator, complete(arrays), outputs, parameters))

    def to_device(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    def keep(self, arrays) -> None:
        """Constants the session holds for its whole life (nothing to do on the CPU)."""


class GpuExecutor:
    """The GPU backend with device-resident tensors (CuPy arrays from one node to the next)."""

    name = "gpu"
    captures_graphs = True  # a plan's run can be replayed as a CUDA graph (graphs.py)

    def __init__(self) -> None:
        from ..backends import get_backend

        self.backend = get_backend("gpu")  # BackendUnavailableError (exit 4) without CuPy or a device
        import cupy

        self.cupy = cupy
        self.warnings: list[str] = []
        self._kept: dict[int, np.ndarray] = {}  # the session's constants by id: their device copies are cached
        self._device: dict[tuple, object] = {}
        self.uploads = None  # graphs.Uploads while a run is recorded or captured for a CUDA graph

    def keep(self, arrays) -> None:
        for array in arrays:
            if isinstance(array, np.ndarray):
                self._kept[id(memory_owner(array))] = array

    def to_device(self, array):
        """A host array on the device: a view of a kept constant (an initializer, a folded value, or a reshape
        of one an adapter made) is copied once per session; anything else once per call."""
        if not isinstance(array, np.ndarray):
            return array
        owner = memory_owner(array)
        if id(owner) not in self._kept:
            if self.uploads is not None:
                return self.uploads.upload(array)
            return self.cupy.asarray(c_ordered(array))
        key = (id(owner), array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)
        found = self._device.get(key)
        if found is None:
            found = self._device[key] = self.cupy.asarray(c_ordered(array))
        return found

    def to_host(self, array) -> np.ndarray:
        return array if isinstance(array, np.ndarray) else self.cupy.asnumpy(array)

    def compiled(self, verdict: Verdict, arrays: Sequence, constant_inputs: frozenset[int] = frozenset()) -> None:
        """None: a GPU run's nodes are not planned (planning/planned.py makes NumPy views; the device arrays are
        CuPy's)."""
        return None

    def running(self) -> ContextManager:
        return contextlib.nullcontext()

    def execute(self, verdict: Verdict, arrays: Sequence) -> tuple:
        call = verdict.call
        arrays = [None if array is None else self.to_device(array) for array in call.complete(arrays)]
        operator = call.operator
        if operator.is_elementwise:
            out = call.output
            return (self.backend.execute_device(operator, arrays, out.shape, out.data_type.numpy_dtype,
                                                call.parameters),)
        return tuple(self.backend.execute_shaped_device(operator, arrays, call.outputs, call.parameters))


def memory_owner(array: np.ndarray) -> np.ndarray:
    """The array that owns a view's memory (a reshape of a reshape of an initializer: the initializer)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def executor_for(backend: str):
    """The executor of a backend name: cpu, gpu, or auto (the GPU where one is usable, else the CPU)."""
    from ..errors import BackendUnavailableError, InputError, quoted

    name = str(backend).strip().lower()
    if name == "cpu":
        return CpuExecutor()
    if name == "gpu":
        return GpuExecutor()
    if name == "auto":
        try:
            return GpuExecutor()
        except (BackendUnavailableError, ImportError):
            return CpuExecutor()
    raise InputError(f"unknown backend {quoted(backend)} (expected cpu, gpu or auto)")
