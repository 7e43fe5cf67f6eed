"""cuDNN on the GPU through NVIDIA's frontend (the nvidia-cudnn-frontend package, imported as `cudnn`): its loading,
one handle per device and thread, and the built graphs kept by each call's signature.

The convolution and attention families choose cuDNN at call time (operators/convolution/cudnn.py,
operators/attention/cudnn.py) where the frontend imports and cuDNN builds a plan for the call; anything else runs
dmlcli's own kernels, so the GPU backend runs every operator with or without cuDNN. Nothing here is imported before a
GPU call needs it, and `cudnn` itself is imported on the first such call only.

A graph is built once per signature (its tensors' Sizes, strides and types and the call's parameters): the frontend's
validate, build_operation_graph and create_execution_plans (heuristics mode A, then the fallback list), then up to
TUNED_PLANS of the backend's plans are built and, outside a CUDA-graph capture, each is timed on the call's own data
and the fastest kept (what PyTorch's cudnn.benchmark does). A signature cuDNN refuses is remembered too, so a
repeated call costs one dictionary read and one execute either way.

A capture (onnx_model/graphs.py) runs each node eagerly just before capturing it, so the graph is built and tuned by
then; the captured call is an execute on the capturing stream with a workspace from CuPy's current allocator (the
capture's private pool), which a CUDA graph replays. A graph that would have to be built while a stream captures
raises instead (the capture then ends and the plan stays eager).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Hashable

from ...errors import raise_interruption

# Plans built and timed for a new signature (PyTorch's cudnn.benchmark_limit is 10): more finds a faster plan less
# and less often while each costs a build (a runtime-compiled engine: a second or more).
# DMLCLI_CUDNN_TUNED_PLANS=1 keeps the heuristics' first plan that builds (no timing: the GPU tests, a quick start).
TUNED_PLANS = max(1, int(os.environ.get("DMLCLI_CUDNN_TUNED_PLANS", "6") or 6))
TIMED_RUNS = 3
GRAPHS_KEPT = 512  # signatures kept (a graph holds a few kB of host memory and its compiled plans)
# Set to 1 to run dmlcli's own kernels where cuDNN would run (a comparison, or a cuDNN that misbehaves).
DISABLE_ENVIRONMENT = "DMLCLI_NO_CUDNN"


class Unsupported(Exception):
    """cuDNN cannot run this call (the frontend is absent, or no plan builds for the configuration): the family's own
    kernel runs instead."""


# ---------------------------------------------------------------- the frontend


@dataclass
class _Loaded:
    module: object | None = None
    reason: str = ""


_LOADED: list[_Loaded] = []
_LOCK = threading.RLock()


def frontend():
    """The `cudnn` module (nvidia-cudnn-frontend) with its cuDNN library loaded; Unsupported saying why not."""
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                _LOADED.append(_load())
    loaded = _LOADED[0]
    if loaded.module is None:
        raise Unsupported(loaded.reason)
    return loaded.module


def _load() -> _Loaded:
    if os.environ.get(DISABLE_ENVIRONMENT, "") not in ("", "0"):
        return _Loaded(None, f"turned off ({DISABLE_ENVIRONMENT}={os.environ[DISABLE_ENVIRONMENT]})")
    _preload_library()
    try:
        import cudnn
    except ImportError as error:
        raise_interruption(error)
        return _Loaded(None, f"nvidia-cudnn-frontend is not installed ({_first_line(error)})")
    except Exception as error:  # noqa: BLE001 - a frontend that is installed but cannot load
        raise_interruption(error)
        return _Loaded(None, f"nvidia-cudnn-frontend cannot load ({type(error).__name__}: {_first_line(error)})")
    try:
        cudnn.backend_version()
    except Exception as error:  # noqa: BLE001 - the frontend without a cuDNN library to call
        return _Loaded(None, f"the cuDNN library was not found (install nvidia-cudnn-cu12 or -cu13: "
                             f"{_first_line(error)})")
    return _Loaded(cudnn, "")


def _preload_library() -> None:
    """Map libcudnn.so.9 from a site-packages wheel (nvidia-cudnn-cu12: nvidia/cudnn/lib; the CUDA 13 wheels may use
    nvidia/cu13/lib) into the process before the frontend looks for it: the frontend searches the interpreter's own
    site-packages only, not a --target folder or PYTHONPATH, and then asks the loader for the library by name."""
    for folder in sys.path:
        for inside in ("nvidia/cudnn/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"):
            path = os.path.join(folder or ".", inside, "libcudnn.so.9")
            if os.path.exists(path):
                try:
                    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    return
                except OSError:
                    continue


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def describe() -> dict:
    """What `dmlcli info` says of cuDNN: {"available": True, "cudnn": version, "frontend": version} or
    {"available": False, "reason": ...}."""
    try:
        cudnn = frontend()
    except Unsupported as why:
        return {"available": False, "reason": str(why)}
    version = int(cudnn.backend_version())
    return {"available": True, "cudnn": f"{version // 10000}.{version // 100 % 100}.{version % 100}",
            "frontend": str(getattr(cudnn, "__version__", "?"))}


# ---------------------------------------------------------------- what the last call chose (benches and tests read it)

LAST_CHOICE: dict[str, str] = {}


def record(family: str, choice: str) -> None:
    """`choice` ("cudnn", or "dmlcli: why") for the family's last GPU call."""
    LAST_CHOICE[family] = choice


# ---------------------------------------------------------------- handles


_HANDLES = threading.local()


def _handle(cudnn, cupy, stream=None):
    """This thread's cuDNN handle for the current device (cuDNN forbids sharing one between threads), bound to
    CuPy's current stream, or `stream` where the caller has read it already (by_device holds [handle, the stream it
    was last bound to]). Handles live as long as the process: destroying one while another stream captures would
    break that capture."""
    by_device = getattr(_HANDLES, "by_device", None)
    if by_device is None:
        by_device = _HANDLES.by_device = {}
    device = cupy.cuda.Device().id
    found = by_device.get(device)
    if found is None:
        found = by_device[device] = [cudnn.create_handle(), None]
    handle, bound_stream = found
    pointer = (cupy.cuda.get_current_stream() if stream is None else stream).ptr
    if pointer != bound_stream:  # cuDNN keeps the stream it was given: set it again only when it changes
        cudnn.set_stream(handle, pointer)
        found[1] = pointer
    return handle


def capturing(cupy) -> bool:
    return stream_capturing(cupy.cuda.get_current_stream())


def stream_capturing(stream) -> bool:
    """Whether a CUDA graph is being captured on `stream` (False with a CuPy that cannot capture)."""
    is_capturing = getattr(stream, "is_capturing", None)
    return bool(is_capturing()) if is_capturing is not None else False


# ---------------------------------------------------------------- built graphs


@dataclass
class Built:
    """A graph built for one signature: its tensors by name, the plan chosen (an index in graph.plans) and the
    workspace bytes that plan needs."""

    graph: object
    tensors: dict[str, object]
    plan: int = 0
    workspace: int = 0
    plans_tried: list[str] = field(default_factory=list)
    # plan -> its direct execute (None: the public one); a plan is missing until its first public execute ran
    direct: dict[int, "_DirectExecute | None"] = field(default_factory=dict)

    # stream -> a workspace of the chosen plan's size kept for the eager calls queued on that stream (their order on it
    # keeps them from sharing it at once); only where the plan needs at most WORKSPACE_KEPT bytes
    workspaces: dict[int, object] = field(default_factory=dict)

    def execute(self, cudnn, cupy, pointers: dict[str, int]) -> None:
        stream = cupy.cuda.get_current_stream()
        handle = _handle(cudnn, cupy, stream)
        workspace = None
        if 0 < self.workspace <= WORKSPACE_KEPT and not stream_capturing(stream):
            workspace = self.workspaces.get(stream.ptr)
            if workspace is None:
                workspace = self.workspaces[stream.ptr] = cupy.empty(self.workspace, dtype=cupy.uint8)
        self._run(cupy, handle, pointers, self.plan, self.workspace, workspace)

    def _run(self, cupy, handle, pointers: dict[str, int], plan: int, workspace_bytes: int, workspace=None) -> None:
        """The plan's execute on the current stream, with `workspace` (of at least `workspace_bytes`), or one of its
        own from CuPy's pool (a capture's pool while a CUDA graph is captured: a kept workspace would tie the
        graph to another stream's buffer)."""
        if workspace is None and workspace_bytes:
            workspace = cupy.empty(workspace_bytes, dtype=cupy.uint8)
        direct = self.direct.get(plan)
        if direct is not None:
            try:
                direct.execute(pointers, workspace.data.ptr if workspace is not None else 0, handle)
                return
            except Exception:  # the frontend's internals differ from 1.32's: its public execute from now on
                self.direct[plan] = None
        pack = {self.tensors[name]: pointer for name, pointer in pointers.items()}
        self.graph.execute_plan_at_index(pack, workspace, index=plan, handle=handle)
        if plan not in self.direct:
            self.direct[plan] = _DirectExecute.of(self.graph, self.tensors, plan)


@dataclass
class _DirectExecute:
    """One built plan's execute as the frontend's own backend path makes it, worked out once: the frontend's public
    execute checks and normalises its variant pack in Python on every call (0.1 ms and more: a small convolution's
    whole time, measured on the H200 with frontend 1.32), then hands the backend a map of tensor ids to device
    addresses, which is what this builds directly. Made only after a public execute of the plan ran (so the plan is
    built and placed) and only where the frontend has the internals of 1.32's backend path; any error on a later
    call sends the plan back to the public execute."""

    launch: Callable
    ids: dict[str, int]
    bound: dict[int, int]
    index: int

    @classmethod
    def of(cls, graph, tensors: dict[str, object], plan: int) -> "_DirectExecute | None":
        try:
            config = graph._plans[plan]
            if config.cpp_index is None or graph._engine_for(config) is not None:
                return None  # a plan the backend does not hold, or one of the frontend's Python engines
            bound, _ = graph._native_var_pack(dict(graph._data_bindings), None)
            return cls(graph._lowered_graph._execute_plan_at_index, {name: t.uid for name, t in tensors.items()},
                       bound, config.cpp_index)
        except Exception:  # another frontend version: its public execute stays
            return None

    def execute(self, pointers: dict[str, int], workspace: int, handle) -> None:
        pack = dict(self.bound)
        for name, pointer in pointers.items():
            pack[self.ids[name]] = pointer
        self.launch(pack, workspace, self.index, handle.backend_handle, None, None, None)


_GRAPHS: dict[Hashable, Built | str] = {}
# The largest workspace a built plan keeps per stream for its eager calls (Built.workspaces): a small convolution's
# plan takes a few hundred bytes, whose allocation from CuPy's pool cost 3 to 5 us of a 40 to 70 us call's host time
# on the H200's machines (the 1x1 case of bench/cudnn_bench.py); larger ones come from the pool on each call.
WORKSPACE_KEPT = 1 << 20


def cached(cupy, signature: Hashable, build: Callable[[object, object], Built], pointers: dict[str, int]) -> Built:
    """The graph built for `signature` (build(cudnn, handle) makes and plans it; its plans are then built and tuned
    on `pointers`, the call's own device buffers); Unsupported where cuDNN refused it, now or before."""
    cudnn = frontend()
    key = (cupy.cuda.Device().id, signature)
    found = _GRAPHS.get(key)
    if isinstance(found, Built):
        return found
    if isinstance(found, str):
        raise Unsupported(found)
    if capturing(cupy):
        raise RuntimeError("a cuDNN graph would be built while a CUDA graph is being captured")
    with _LOCK:
        handle = _handle(cudnn, cupy)
        try:
            built = build(cudnn, handle)
            _choose_plan(cudnn, cupy, handle, built, pointers)
        except Unsupported as why:
            _keep(key, str(why))
            raise
        except Exception as error:  # noqa: BLE001 - the frontend's refusals come as several exception types
            reason = f"cuDNN refused the graph ({type(error).__name__}: {_first_line(error)})"
            _keep(key, reason)
            raise Unsupported(reason) from None
        _keep(key, built)
    return built


def _keep(key, value) -> None:
    keep(_GRAPHS, key, value, GRAPHS_KEPT)


def keep(cache: dict, key, value, limit: int) -> None:
    """cache[key] = value, the oldest entry dropped first where the cache holds `limit` already."""
    if len(cache) >= limit:
        cache.pop(next(iter(cache)))
    cache[key] = value


# Caches a family keeps beside the built graphs, by its own keys (convolution/cudnn.py's routes, which hold graphs;
# attention/causal_masks.py's mask states, which hold device buffers): forget() clears them too.
_KEPT_WITH_GRAPHS: list[dict] = []


def kept_with_graphs(cache: dict) -> dict:
    """`cache`, registered to be cleared with the built graphs; returned for the caller to hold."""
    _KEPT_WITH_GRAPHS.append(cache)
    return cache


def forget() -> None:
    """Drop every built graph, and the caches that hold them (tests)."""
    _GRAPHS.clear()
    for cache in _KEPT_WITH_GRAPHS:
        cache.clear()


def plan_graph(cudnn, graph, excluded_notes) -> None:
    """validate, build_operation_graph and the heuristics' plans (mode A, then the fallback list), without the plans
    whose numerical notes are in `excluded_notes`."""
    graph.validate()
    graph.build_operation_graph()
    if excluded_notes:
        graph.deselect_numeric_notes(list(excluded_notes))
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])


def _backend_plans(graph) -> list[int]:
    """The indices of graph.plans that are cuDNN's own engines (the frontend may also rank Python engines, which
    need packages dmlcli does not bring), best first."""
    plans = list(getattr(graph, "plans", ()))
    try:
        from cudnn.engines.engine_ids import is_backend_engine
    except ImportError as error:
        raise_interruption(error)
        return list(range(len(plans) or graph.get_execution_plan_count()))
    return [index for index, plan in enumerate(plans) if is_backend_engine(plan.engine_id)]


def _choose_plan(cudnn, cupy, handle, built: Built, pointers: dict[str, int]) -> None:
    """Build up to TUNED_PLANS of the backend's plans; keep the fastest on this call's data (the first that builds
    where only one does)."""
    graph = built.graph
    ready: list[tuple[int, int]] = []  # (plan index, workspace bytes)
    failures = []
    for index in _backend_plans(graph):
        if len(ready) >= TUNED_PLANS:
            break
        try:
            graph.build_plan_at_index(index)
            ready.append((index, int(graph.get_workspace_size_plan_at_index(index))))
        except Exception as error:  # noqa: BLE001 - a plan that does not build: the next one
            failures.append(f"plan {index}: {type(error).__name__}: {_first_line(error)}")
    if not ready:
        raise Unsupported("no cuDNN plan builds for this call" + (f" ({'; '.join(failures[:3])})" if failures else ""))
    if len(ready) == 1:
        built.plan, built.workspace = ready[0]
    else:
        built.plan, built.workspace = min(ready, key=lambda plan: median_seconds(
            cupy, lambda: built._run(cupy, handle, pointers, *plan)))
    built.plans_tried = [str(index) for index, _ in ready]


def median_seconds(cupy, run: Callable[[], None]) -> float:
    """The median time on the GPU of TIMED_RUNS calls of `run` (after one untimed), in seconds: CUDA events around
    each call on the current stream."""
    return back_to_back_seconds(cupy, run, calls=1)


def back_to_back_seconds(cupy, run: Callable[[], None], calls: int = 5) -> float:
    """The time per call of `calls` calls of `run` in a row (CUDA events around them all on the current stream,
    after one untimed call), the median of TIMED_RUNS such rows, in seconds: the GPU's time where the host keeps
    ahead of it, the host's where it does not (as a caller's calls back to back see it)."""
    run()
    stream = cupy.cuda.get_current_stream()
    times = []
    for _ in range(TIMED_RUNS):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(calls):
            run()
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / calls)
    return sorted(times)[len(times) // 2] / 1e3


def data_type(cudnn, dtype):
    """cuDNN's data type for a NumPy/CuPy dtype of FLOAT16 or FLOAT32; Unsupported for others."""
    name = getattr(dtype, "name", str(dtype))
    if name == "float16":
        return cudnn.data_type.HALF
    if name == "float32":
        return cudnn.data_type.FLOAT
    raise Unsupported(f"cuDNN's graphs here take FLOAT16 and FLOAT32, not {name}")


def element_strides(array) -> list[int]:
    """A CuPy array's strides in elements (cuDNN's unit)."""
    return [stride // array.itemsize for stride in array.strides]


def contiguous_strides(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return list(reversed(strides))
