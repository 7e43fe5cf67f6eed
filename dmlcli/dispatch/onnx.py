"""ONNX dispatchables (`"type": "onnx"`): an ONNX model run through ONNX Runtime, bound as DxDispatch binds it.

The reference is DxDispatch's OnnxDispatchable.cpp and JsonParsers.cpp (ParseModelOnnxDispatchableDesc):

- the session: sequential execution, no memory pattern, the model's `graphOptimizationLevel` (default 99,
  all), `freeDimensionNameOverrides`, `freeDimensionDenotationOverrides` and `sessionOptionsConfigEntries`;
- each model input or output is bound by its ONNX name. Its shape is the model's, free dimensions of
  inputs fixed to 1, unless the binding gives a `"shape"`. A bound resource is wrapped as a tensor of the
  ONNX tensor's own element type (its bytes reinterpreted, from byte 0: binding offsets are refused);
  an unbound input is a zero-filled tensor (DxDispatch allocates a fresh, zeroed buffer); an unbound
  output is dropped. A bound tensor whose shape still has a free dimension is refused;
- an output bound to a `"deferred"` resource takes whatever shape and type the run gives it; the resource
  keeps that until the next dispatch command (Executor.cpp clears its deferred bindings at each dispatch).

ONNX Runtime runs on its CPU provider, or its CUDA provider under `--backend gpu` (onnxruntime-gpu).
The model is untrusted: its file and any external data it names must lie inside the model's folder (links
followed), their sizes are claimed from the memory budget before they are read, and session config entries
that make ONNX Runtime read or write files are refused.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data_types import DataType, from_numpy
from ..errors import BackendUnavailableError, InputError, ValidationError, first_line, raise_interruption
from .files import ALLOW_FLAG, PathRules, RegularFile, shown_path, source_file
from .jsonc import shown
from .memory import MemoryBudget

INSTALL_ONNX = "pip install 'dmlcli[onnx]'"
INSTALL_ONNX_GPU = "pip install onnxruntime-gpu"
ONNX_KEYS = ("type", "sourcePath", "freeDimensionNameOverrides", "freeDimensionDenotationOverrides",
             "sessionOptionsConfigEntries", "graphOptimizationLevel", "loggingLevel")
# ONNX Runtime's GraphOptimizationLevel values (DxDispatch casts the model's number to that enum).
GRAPH_OPTIMIZATION_LEVELS = {0: "ORT_DISABLE_ALL", 1: "ORT_ENABLE_BASIC", 2: "ORT_ENABLE_EXTENDED",
                             99: "ORT_ENABLE_ALL"}
# dmlcli reports ONNX Runtime's errors itself, as one line, so by default its own log shows fatal errors only
# (DxDispatch's default, 2, also prints warnings); a model's loggingLevel is honoured.
DEFAULT_LOGGING_LEVEL = 4
# Session config entries that name files ONNX Runtime would read or write (EP context models, saved or
# external initialisers, profiles, custom-op libraries): a model may not set them, as it may not name paths.
# The allocator entries are dmlcli's own (the memory cap below), which a model may not turn off.
_FILE_CONFIG = re.compile(r"file|path|dir|context|save|librar|dump|profil|external|allocator", re.IGNORECASE)
# ONNX Runtime's tensor type names -> NumPy types (bool is a byte, as DxDispatch maps it to UINT8).
_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}
# An ONNX file as protobuf in memory: the bytes, and the parsed message (about as large again, and more).
ONNX_PEAK_BYTES_PER_BYTE = 4


@dataclass(frozen=True)
class OnnxDispatchable:
    name: str
    source_path: Path  # resolved, inside the model's folder unless paths outside are allowed
    shown_source: str
    free_dimension_name_overrides: tuple[tuple[str, int], ...] = ()
    free_dimension_denotation_overrides: tuple[tuple[str, int], ...] = ()
    session_config_entries: tuple[tuple[str, str], ...] = ()
    graph_optimization_level: int = 99
    logging_level: int = DEFAULT_LOGGING_LEVEL
    # Each graph output whose shape ONNX's shape inference fixes: (element count, bytes), counted against the
    # memory available before ONNX Runtime makes it (a 99-byte ConstantOfShape model made 3 GB).
    known_outputs: tuple[tuple[str, int, int], ...] = ()


def import_runtime():
    """onnxruntime and onnx, or exit 4 with the command that installs them."""
    try:
        import onnx
        import onnxruntime
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"ONNX dispatchables need ONNX Runtime and the onnx package, which are not "
                                      f"installed: {INSTALL_ONNX}") from None
    return onnxruntime, onnx


# ---------------------------------------------------------------- parsing


def parse_onnx_dispatchable(name: str, value: dict, *, rules: PathRules, budget: MemoryBudget,
                            where: str) -> OnnxDispatchable:
    """ParseModelOnnxDispatchableDesc, and the model file checked: inside the folder, its external data too."""
    unknown = [key for key in value if key not in ONNX_KEYS]
    if unknown:
        raise InputError(f"{where}: unknown key {shown(unknown[0])} in the onnx dispatchable (expected "
                         f"{', '.join(ONNX_KEYS)})")
    source = value.get("sourcePath")
    if not isinstance(source, str) or not source:
        raise InputError(f"{where}: an onnx dispatchable needs a \"sourcePath\" (the .onnx file)")
    path = source_file(source, rules, where)
    _, onnx = import_runtime()
    shown_source = f"sourcePath {shown_path(source)}"
    known = _check_model_file(path, onnx, rules, budget, f"{where}: {shown_source}", shown_source)
    level = _uint_field(value, "graphOptimizationLevel", 99, where)
    if level not in GRAPH_OPTIMIZATION_LEVELS:
        raise InputError(f"{where}: graphOptimizationLevel {level} is not one of ONNX Runtime's levels "
                         f"({', '.join(f'{k} {v}' for k, v in GRAPH_OPTIMIZATION_LEVELS.items())})")
    logging = _uint_field(value, "loggingLevel", DEFAULT_LOGGING_LEVEL, where)
    if logging > 4:
        raise InputError(f"{where}: loggingLevel {logging} is not an ONNX Runtime severity (0 verbose to 4 fatal)")
    entries = _string_map(value, "sessionOptionsConfigEntries", where, str)
    for key, _ in entries:
        if _FILE_CONFIG.search(key):
            raise InputError(f"{where}: sessionOptionsConfigEntries {shown(key)} may make ONNX Runtime read or write "
                             "files, which a model may not ask for (dmlcli keeps a model's files inside its folders)")
    return OnnxDispatchable(name, path, shown_source,
                            _string_map(value, "freeDimensionNameOverrides", where, int),
                            _string_map(value, "freeDimensionDenotationOverrides", where, int),
                            entries, level, logging, known)


def _uint_field(value: dict, key: str, default: int, where: str) -> int:
    number = value.get(key, default)
    if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number <= 0xFFFFFFFF:
        raise InputError(f"{where}: {key} must be an unsigned integer, found {shown(number)}")
    return number


def _string_map(value: dict, key: str, where: str, kind: type) -> tuple:
    """An object of name -> unsigned integer (dimension overrides) or name -> string (config entries)."""
    mapping = value.get(key, {})
    if not isinstance(mapping, dict):
        raise InputError(f"{where}: {key} must be a JSON object")
    items = []
    for name, item in mapping.items():
        if kind is int:
            item = _uint_field(mapping, name, 0, f"{where}: {key}")
        elif not isinstance(item, str):
            raise InputError(f"{where}: {key}: {shown(name)} must be a string, found {shown(item)}")
        items.append((name, item))
    return tuple(items)


def _check_model_file(path: Path, onnx, rules: PathRules, budget: MemoryBudget, where: str,
                      shown_source: str) -> tuple[tuple[str, int, int], ...]:
    """Parse the ONNX file's structure (not its external data) and check every external data reference; the
    outputs whose sizes shape inference fixes (known_outputs)."""
    with RegularFile(path, where, shown_source) as handle:
        budget.claim(0, f"reading the ONNX model ({handle.size} bytes)", where,
                     peak=handle.size * ONNX_PEAK_BYTES_PER_BYTE)
        raw = handle.read_all()
    try:
        model = onnx.ModelProto.FromString(raw)
    except Exception:  # protobuf's DecodeError, or a RuntimeWarning-free failure of the C++ parser
        raise InputError(f"{where}: is not an ONNX model (its protobuf cannot be decoded)") from None
    del raw
    folder = Path(os.path.realpath(path.parent))
    external = 0
    for tensor in _all_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location", "")
        named = f"external data {shown_path(location)} of tensor {shown(tensor.name)}"
        if not location or "\0" in location:
            raise InputError(f"{where}: {named} names no file")
        target = Path(os.path.realpath(folder / location))
        if not rules.allow_outside and folder not in target.parents:
            raise InputError(f"{where}: {named} is outside the ONNX model's folder {shown_path(str(folder))}; a model "
                             f"reads only files beside it unless you pass {ALLOW_FLAG}")
        with RegularFile(target, where, named) as data:
            length = entries.get("length")
            external += int(length) if length and length.isdigit() else data.size
    if external:
        budget.claim(external, f"the ONNX model's external data ({external} bytes)", where)
    return _known_outputs(model, onnx)


def _known_outputs(model, onnx) -> tuple[tuple[str, int, int], ...]:
    """(name, elements, bytes) of each graph output whose shape and type shape inference fixes (constant shapes
    propagated); none where inference cannot run on the model (ONNX Runtime then says what is wrong with it)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 - onnx's InferenceError, or a model its checker cannot read
        return ()
    known = []
    for output in inferred.graph.output:
        tensor = output.type.tensor_type
        name = onnx.helper.tensor_dtype_to_string(tensor.elem_type) if tensor.elem_type else ""
        dtype = _ORT_TYPES.get(f"tensor({name.removeprefix('TensorProto.').lower()})") if name else None
        dims = [dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim]
        if dtype is None or not tensor.HasField("shape") or None in dims:
            continue
        count = math.prod(dims)
        known.append((output.name, count, count * np.dtype(dtype).itemsize))
    return tuple(known)


def _all_tensors(model):
    """Every TensorProto of the model: initialisers, constants in attributes, in subgraphs and functions too."""
    def of_graph(graph):
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield sparse.values
            yield sparse.indices
        yield from of_nodes(graph.node)

    def of_nodes(nodes):
        for node in nodes:
            for attribute in node.attribute:
                if attribute.HasField("t"):
                    yield attribute.t
                yield from attribute.tensors
                if attribute.HasField("g"):
                    yield from of_graph(attribute.g)
                for graph in attribute.graphs:
                    yield from of_graph(graph)

    yield from of_graph(model.graph)
    for function in model.functions:
        yield from of_nodes(function.node)


# ---------------------------------------------------------------- sessions


def providers_for(backend_name: str, explicit: bool) -> list[str]:
    """CPU, or CUDA then CPU for the GPU backend; exit 4 when --backend gpu was asked for and CUDA is missing."""
    onnxruntime, _ = import_runtime()
    if backend_name != "gpu":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if explicit:
        raise BackendUnavailableError("ONNX dispatchables on --backend gpu need ONNX Runtime's CUDA provider, which "
                                      f"this onnxruntime lacks: {INSTALL_ONNX_GPU}")
    return ["CPUExecutionProvider"]


_CAPPED_ARENA: list[int] = []  # the cap of the process-wide CPU arena, once registered (ONNX Runtime allows one)


def cap_cpu_memory(onnxruntime, limit: int | None) -> None:
    """Register a CPU arena of at most `limit` bytes for every session of this process, so that a model whose
    tensors outgrow the memory available fails its allocation (exit 3) instead of exhausting the machine."""
    if _CAPPED_ARENA or limit is None:
        return
    info = onnxruntime.OrtMemoryInfo("Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                     onnxruntime.OrtMemType.DEFAULT)
    onnxruntime.create_and_register_allocator(info, onnxruntime.OrtArenaCfg(max(limit, 1 << 20), -1, -1, -1))
    _CAPPED_ARENA.append(limit)


def open_session(dispatchable: OnnxDispatchable, providers: list[str], memory_limit: int | None = None):
    """An InferenceSession with the dispatchable's options, as OnnxDispatchable::Initialize makes it; its CPU
    tensors come from an arena capped at `memory_limit` bytes (the first cap registered in the process holds)."""
    onnxruntime, _ = import_runtime()
    cap_cpu_memory(onnxruntime, memory_limit)
    options = onnxruntime.SessionOptions()
    if _CAPPED_ARENA:
        options.add_session_config_entry("session.use_env_allocators", "1")
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.enable_mem_pattern = False
    options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel,
                                               GRAPH_OPTIMIZATION_LEVELS[dispatchable.graph_optimization_level])
    options.log_severity_level = dispatchable.logging_level
    where = f"dispatchable {shown(dispatchable.name)}: {dispatchable.shown_source}"
    try:
        for name, size in dispatchable.free_dimension_name_overrides:
            options.add_free_dimension_override_by_name(name, size)
        for denotation, size in dispatchable.free_dimension_denotation_overrides:
            options.add_free_dimension_override_by_denotation(denotation, size)
        for key, item in dispatchable.session_config_entries:
            options.add_session_config_entry(key, item)
        # Constant folding computes constant subgraphs while the session is made, outside the capped arena (up to
        # 1 GiB a node): a 99-byte ConstantOfShape model took a gigabyte before it ran. Unfolded, the same kernels
        # compute the same values when it runs, within the cap.
        return onnxruntime.InferenceSession(str(dispatchable.source_path), sess_options=options, providers=providers,
                                            disabled_optimizers=["ConstantFolding"])
    except Exception as error:  # onnxruntime's Fail / InvalidArgument / InvalidGraph ... are plain exceptions
        raise InputError(f"{where}: ONNX Runtime cannot load it ({first_line(error)})") from None


# ---------------------------------------------------------------- bindings


@dataclass(frozen=True)
class OnnxTensorBinding:
    """One model input or output as a dispatch binds it."""

    name: str
    is_input: bool
    dtype: np.dtype  # the ONNX tensor's element type (bool as numpy.bool_)
    shape: tuple[int, ...] | None  # None: free (a deferred or unbound output)
    resource: str | None  # None: unbound
    deferred: bool = False

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape or ()) * self.dtype.itemsize


@dataclass(frozen=True)
class PlannedOnnxDispatch:
    command: object  # the DispatchCommand
    dispatchable: OnnxDispatchable
    session: object
    tensors: tuple[OnnxTensorBinding, ...]

    @property
    def name(self) -> str:
        return self.dispatchable.name

    @property
    def bound_bytes(self) -> int:
        """The bytes the dispatch's inputs and preallocated outputs take (ONNX Runtime's temporaries not counted)."""
        return sum(tensor.nbytes for tensor in self.tensors if tensor.shape is not None)

    def deferred_outputs(self) -> dict[str, tuple[int, int]]:
        """Each deferred resource this dispatch fills whose size shape inference knows: (elements, bytes)."""
        known = {name: (count, size) for name, count, size in self.dispatchable.known_outputs}
        return {tensor.resource: known[tensor.name] for tensor in self.tensors
                if tensor.deferred and tensor.name in known}


def data_type_of(dtype: np.dtype) -> DataType:
    """The DML data type a deferred resource takes from an ONNX output (bool as UINT8, as DxDispatch maps it)."""
    return from_numpy(np.dtype(np.uint8) if dtype == np.bool_ else dtype)


def plan_onnx_dispatch(command, dispatchable: OnnxDispatchable, session, resources: dict) -> PlannedOnnxDispatch:
    """OnnxDispatchable::Bind's rules, checked before anything runs."""
    prefix = f"command {command.index} (dispatch {shown(dispatchable.name)})"
    inputs, outputs = session.get_inputs(), session.get_outputs()
    known = [arg.name for arg in inputs] + [arg.name for arg in outputs]
    for name in command.bindings:
        if name not in known:
            raise InputError(f"{prefix}: the ONNX model has no input or output {shown(name)} to bind (its tensors: "
                             f"{', '.join(known)})")
    tensors = []
    for arg, is_input in [(arg, True) for arg in inputs] + [(arg, False) for arg in outputs]:
        tensors.append(_bind_tensor(arg, is_input, command.bindings.get(arg.name), resources, prefix))
    return PlannedOnnxDispatch(command, dispatchable, session, tuple(tensors))


def _bind_tensor(arg, is_input: bool, binding, resources: dict, prefix: str) -> OnnxTensorBinding:
    kind = "input" if is_input else "output"
    where = f"{prefix}: {kind} {shown(arg.name)}"
    dtype = _ORT_TYPES.get(arg.type)
    if dtype is None:
        if binding is None and not is_input:
            return OnnxTensorBinding(arg.name, False, np.dtype(np.uint8), None, None)  # dropped, whatever it is
        raise InputError(f"{where} is of type {arg.type}, which DirectML buffers cannot hold (dmlcli binds tensors of "
                         f"{', '.join(t[7:-1] for t in _ORT_TYPES)})")
    dtype = np.dtype(dtype)
    # A dimension ONNX Runtime does not know (a name, None or -1) is free: fixed to 1 on inputs.
    shape = [d if isinstance(d, int) and d >= 0 else None for d in (arg.shape or [])]
    if is_input:
        shape = [1 if d is None else d for d in shape]
    if binding is not None and binding.shape is not None:
        shape = list(binding.shape)
    free = any(d is None for d in shape)
    if binding is None:
        if is_input:
            return OnnxTensorBinding(arg.name, True, dtype, tuple(shape), None)  # zeros, as a fresh buffer
        return OnnxTensorBinding(arg.name, False, dtype, None, None)
    resource = resources[binding.resource]
    shown_resource = shown(binding.resource)
    if binding.element_offset:
        raise InputError(f"{where}: bound to {shown_resource} at elementOffset {binding.element_offset}; ONNX "
                         "dispatchables do not support binding offsets (as in DxDispatch)")
    if resource.deferred:
        if is_input:
            raise InputError(f"{where}: resource {shown_resource} is deferred; a deferred resource receives an ONNX "
                             "output, it cannot be read as an input")
        return OnnxTensorBinding(arg.name, False, dtype, None, binding.resource, deferred=True)
    if free:
        raise InputError(f"{where}: binding resource {shown_resource} is invalid because the tensor shape "
                         f"{_shape_text(shape)} is not static; give the binding a \"shape\", or bind a deferred resource")
    tensor = OnnxTensorBinding(arg.name, is_input, dtype, tuple(shape), binding.resource)
    if tensor.nbytes > resource.size_in_bytes:
        raise ValidationError(f"{where}: shape {list(shape)} of {arg.type} needs {tensor.nbytes} bytes, but resource "
                              f"{shown_resource} holds {resource.size_in_bytes}")
    return tensor


def _shape_text(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


# ---------------------------------------------------------------- running


def run_onnx_dispatch(dispatch: PlannedOnnxDispatch, buffers: dict[str, bytearray], deferred: dict) -> None:
    """One run of the session on the buffers: inputs read from them, bound outputs written into them from byte 0,
    deferred outputs kept in `deferred` (resource name -> (DataType, shape, their bytes as a flat uint8 array)).

    No copy is made that is not needed: inputs are read in place where the buffer already holds the ONNX type's
    bytes, ONNX Runtime's outputs come back as arrays over its own memory (kept as they are for a deferred
    resource) and a bound output is copied once, into its buffer."""
    feeds, in_buffers = {}, []
    for tensor in dispatch.tensors:
        if not tensor.is_input:
            continue
        if tensor.resource is None:
            feeds[tensor.name] = np.zeros(tensor.shape, dtype=tensor.dtype)
            continue
        stored = np.uint8 if tensor.dtype == np.bool_ else tensor.dtype.newbyteorder("<")
        count = math.prod(tensor.shape)
        array = np.frombuffer(buffers[tensor.resource], dtype=stored, count=count).reshape(tensor.shape)
        feeds[tensor.name] = (array != 0) if tensor.dtype == np.bool_ else array.astype(tensor.dtype, copy=False)
        in_buffers.append(array)
    wanted = [t for t in dispatch.tensors if not t.is_input and t.resource is not None]
    for tensor in wanted:
        deferred.pop(tensor.resource, None)  # the last iteration's output goes before this one is made
    prefix = f"dispatch {shown(dispatch.name)}"
    options = run_options(dispatch.dispatchable)
    try:
        results = dispatch.session.run([t.name for t in wanted], feeds, options) if wanted else []
    except Exception as error:
        raise ValidationError(f"{prefix}: ONNX Runtime failed to run it ({first_line(error)})") from None
    del feeds
    for tensor, result in zip(wanted, results):
        result = np.asarray(result)
        if any(np.may_share_memory(result, array) for array in in_buffers):
            result = result.copy()  # an output over an input's buffer (an Identity may alias): it is ONNX's to keep
        if tensor.deferred:
            deferred[tensor.resource] = (data_type_of(result.dtype), tuple(result.shape), _little_bytes(result))
            continue
        if tuple(result.shape) != tensor.shape or result.dtype != tensor.dtype:
            raise ValidationError(f"{prefix}: output {shown(tensor.name)} came out with shape {list(result.shape)}, "
                                  f"but its binding to {shown(tensor.resource)} has shape {list(tensor.shape)}")
        stored = np.uint8 if tensor.dtype == np.bool_ else tensor.dtype.newbyteorder("<")
        np.frombuffer(buffers[tensor.resource], dtype=stored, count=result.size)[...] = result.reshape(-1)


def run_options(dispatchable: OnnxDispatchable):
    """The run's options: ONNX Runtime's log at the dispatchable's level (its errors are reported as one line)."""
    onnxruntime, _ = import_runtime()
    options = onnxruntime.RunOptions()
    options.log_severity_level = dispatchable.logging_level
    return options


def _little_bytes(array: np.ndarray) -> np.ndarray:
    """The array's bytes, little-endian, as a flat uint8 array: a view where they already are (no copy)."""
    if array.dtype == np.bool_:
        array = array.view(np.uint8)
    array = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
    return array.reshape(-1).view(np.uint8)
