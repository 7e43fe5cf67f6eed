"""Backends run a validated call's kernel: NumPy on the CPU, CuPy on an NVIDIA GPU.

The GPU backend is imported only when asked for, so the CPU path never pays for CuPy.
"""

from __future__ import annotations

import functools
import importlib
from typing import Iterable, Iterator, Mapping, Protocol

import numpy as np

from ..errors import InputError

BACKEND_NAMES = ("cpu", "gpu", "auto")


class Backend(Protocol):
    """What the engine needs of a backend. `operator` is a table entry; `parameters` its typed values by
    DESC field name; inputs come in the order of the entry's inputs, each of its own data type."""

    name: str
    preferred_chunk_bytes: int  # the streaming chunk size that suits it

    def execute(self, operator, inputs: list[np.ndarray], out_shape: tuple[int, ...], out_dtype: np.dtype,
                parameters: Mapping[str, object]) -> np.ndarray:
        """Whole tensors in (broadcastable to `out_shape`), the whole output out."""

    def execute_chunks(self, operator, chunks: Iterable[list[np.ndarray]], out_dtype: np.dtype,
                       parameters: Mapping[str, object]) -> Iterator[np.ndarray]:
        """For each list of equal-shaped input chunks, the output chunk, in order (it may pipeline)."""

    def describe(self) -> dict:
        """Versions and device facts, for `dmlcli info`."""

    # Optional, for a backend that copies from pinned host memory (the GPU's): with both, a streamed .npy run reads
    # each input chunk straight into such memory and writes each output chunk from where it is yielded, overlapped
    # with the backend's work (engine/file_pipeline.py).
    # - pinned_empty(shape, dtype) -> np.ndarray: host memory the backend copies from at full speed; input chunks
    #   in it are used where they are, and must stay unchanged until their output chunk has been yielded.
    # - chunks_held: int: the most chunks whose outputs execute_chunks has not yet yielded when it asks for the
    #   next one.
_MODULES = {"cpu": "dmlcli.backends.cpu", "gpu": "dmlcli.backends.gpu"}


def fused_activation(operator, parameters):
    """The activation fused into a shaped call (Operator.fused_activation's field: the activation's operator and its
    fields), or None; the backends run it on the kernel's first result, rounded to the output type."""
    return parameters.get(operator.fused_activation) if operator.fused_activation else None


def check_result_count(operator, results, outputs) -> None:
    """A shaped kernel gives one array per output it is asked for (`outputs`, the call's TensorInfo list: an
    optional output the call leaves out is not there); more or fewer is a bug, which zipping them would hide."""
    if len(results) != len(outputs):
        names = ", ".join(info.name for info in outputs)
        raise AssertionError(f"{operator.name}'s kernel gave {len(results)} results for {len(outputs)} outputs "
                             f"({names})")


def get_backend(name: str) -> Backend:
    """The backend object for `name`; raises BackendUnavailableError (exit 4) where it cannot run."""
    key = str(name).strip().lower()
    if key not in BACKEND_NAMES:
        raise InputError(f"unknown backend {name!r} (expected one of {', '.join(BACKEND_NAMES)})")
    if key == "auto":
        return _auto_backend()
    if key == "cpu":
        return _cpu_backend()
    # import_module, not a look in sys.modules: a module another thread is still importing is there already,
    # without its create(); import_module waits for it.
    return importlib.import_module(_MODULES[key]).create()


@functools.lru_cache(maxsize=None)
def _cpu_backend():
    """The CPU backend holds no state: made once. (import_module's lookup cost a run about 10 us once a large
    tensor had pushed the interpreter out of the caches.) The GPU backend is made anew, as create() checks the
    device."""
    return importlib.import_module(_MODULES["cpu"]).create()


def _auto_backend():
    import warnings

    from ..errors import BackendUnavailableError, DmlcliWarning

    try:
        return importlib.import_module(_MODULES["gpu"]).create()
    except (BackendUnavailableError, ImportError) as why:
        warnings.warn(f"--backend auto: no usable GPU ({why}); running on the CPU", DmlcliWarning, stacklevel=3)
        return importlib.import_module(_MODULES["cpu"]).create()


def survey() -> list[dict]:
    """Every backend with what it says of itself (describe()), or why it cannot run: what `dmlcli info` and its
    JSON report show. [{"name", "available", and "reason" or the backend's facts}], the CPU first."""
    from ..errors import BackendUnavailableError

    found = []
    for name in ("cpu", "gpu"):
        try:
            facts = get_backend(name).describe()
        except BackendUnavailableError as why:
            found.append({"name": name, "available": False, "reason": str(why).removeprefix("GPU backend: ")})
        else:
            found.append({"name": name, "available": True, **{k: v for k, v in facts.items() if k != "backend"}})
    return found
