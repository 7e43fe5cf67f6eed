"""Where a model's DirectML calls run: on the CPU through the engine (engine.execute, as `dmlcli run` runs a
validated call), or on the GPU with every tensor kept on the device from one node to the next.

On the GPU the model's inputs go to the device once per run, its outputs come back once, and its initializers
(and folded constants) are copied over the first time a node reads them and kept for the session: the weights
are converted once per session, not per call. A node's kernels are the operator's own (the GPU backend's
execute_device and execute_shaped_device, which `dmlcli run --backend gpu` uses between its own copies).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import engine
from ..calls.validation import Verdict


class CpuExecutor:
    """The CPU backend through the engine: arrays are NumPy's."""

    name = "cpu"

    def __init__(self) -> None:
        self.backend = engine.choose_backend("cpu")
        self.warnings: list[str] = []

    def execute(self, verdict: Verdict, arrays: Sequence[np.ndarray | None]) -> tuple[np.ndarray, ...]:
        outcome = engine.execute(verdict, arrays, self.backend)
        if outcome.warnings:
            self.warnings.extend(outcome.warnings)
        return outcome.all_outputs

    def to_device(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    def keep(self, arrays) -> None:
        """Constants the session holds for its whole life (nothing to do on the CPU)."""


class GpuExecutor:
    """The GPU backend with device-resident tensors (CuPy arrays from one node to the next)."""

    name = "gpu"

    def __init__(self) -> None:
        from ..backends import get_backend

        self.backend = get_backend("gpu")  # BackendUnavailableError (exit 4) without CuPy or a device
        import cupy

        self.cupy = cupy
        self.warnings: list[str] = []
        self._kept: dict[int, np.ndarray] = {}  # the session's constants by id: their device copies are cached
        self._device: dict[tuple, object] = {}

    def keep(self, arrays) -> None:
        for array in arrays:
            if isinstance(array, np.ndarray):
                self._kept[id(_owner(array))] = array

    def to_device(self, array):
        """A host array on the device: a view of a kept constant (an initializer, a folded value, or a reshape
        of one an adapter made) is copied once per session; anything else once per call."""
        if not isinstance(array, np.ndarray):
            return array
        owner = _owner(array)
        if id(owner) not in self._kept:
            return self.cupy.asarray(c_ordered(array))
        key = (id(owner), array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)
        found = self._device.get(key)
        if found is None:
            found = self._device[key] = self.cupy.asarray(c_ordered(array))
        return found

    def to_host(self, array) -> np.ndarray:
        return array if isinstance(array, np.ndarray) else self.cupy.asnumpy(array)

    def execute(self, verdict: Verdict, arrays: Sequence) -> tuple:
        call = verdict.call
        arrays = [None if array is None else self.to_device(array) for array in call.complete(arrays)]
        operator = call.operator
        if operator.is_elementwise:
            out = call.output
            return (self.backend.execute_device(operator, arrays, out.shape, out.data_type.numpy_dtype,
                                                call.parameters),)
        return tuple(self.backend.execute_shaped_device(operator, arrays, call.outputs, call.parameters))


def c_ordered(array: np.ndarray) -> np.ndarray:
    """The array in C order, keeping its shape: numpy.ascontiguousarray gives a 0-D array (an ONNX scalar: Gather's
    index) one dimension, which made a Gather on the GPU keep an axis ONNX drops."""
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def _owner(array: np.ndarray) -> np.ndarray:
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
