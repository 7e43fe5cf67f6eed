"""An ONNX model read for dmlcli onnx: its graph, its declared inputs and outputs, and its initializers as arrays.

The onnx package is imported only here and only when a model is read (an optional dependency: the `onnx` extra).
The protobuf is parsed without its external data; each external initializer is memory-mapped from its file
(read-only), so a model whose weights exceed memory runs in about the weights' memory, paged in as nodes read
them. External files must lie inside the model's folder (links followed), as DxDispatch models' files must
(dispatch/onnx.py). Initializers stored in the protobuf are converted to arrays once, when the model is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailableError, InputError, first_line, quoted, raise_interruption

INSTALL_ONNX = "pip install 'dmlcli[onnx]'"
# The default domain's opsets whose operators the table maps (the range; ONNX 1.23 writes 23).
OPSETS = range(7, 24)
DEFAULT_DOMAINS = ("", "ai.onnx")


def require_onnx():
    """The onnx package, or exit 4 saying how to install it."""
    try:
        import onnx
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"dmlcli onnx needs the onnx package, which is not installed: {INSTALL_ONNX}") \
            from None
    return onnx


def require_onnxruntime(purpose: str):
    """onnxruntime, or exit 4 naming what needed it (--compare ort, --fallback cpu) and how to install it."""
    try:
        import onnxruntime
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"{purpose} needs ONNX Runtime, which is not installed: {INSTALL_ONNX}") \
            from None
    return onnxruntime


@dataclass(frozen=True)
class Declared:
    """A graph input or output as the model declares it: its name, ONNX element type and dimensions (an int, a
    symbolic name, or None where left open)."""

    name: str
    elem_type: int
    dims: tuple[int | str | None, ...] | None  # None: no shape declared

    @property
    def dtype(self) -> np.dtype | None:
        return numpy_type(self.elem_type)

    def describe(self) -> str:
        type_name = type_name_of(self.elem_type)
        if self.dims is None:
            return f"{self.name} ({type_name}, any shape)"
        sizes = ", ".join("?" if d is None else str(d) for d in self.dims)
        return f"{self.name} ({type_name} [{sizes}])"


@dataclass
class LoadedModel:
    proto: object  # onnx.ModelProto without its external data
    shown: str  # how messages name the model
    folder: Path | None  # external data is read from here
    constants: dict[str, np.ndarray]  # initializers by name (external ones memory-mapped)
    opsets: dict[str, int]  # domain -> version ("" for ONNX's default domain)
    inputs: tuple[Declared, ...]  # the graph inputs that are not initializers
    outputs: tuple[Declared, ...]
    mapped: set[str] = field(default_factory=set)  # the initializers read from external files (memory-mapped)
    source: str = ""  # the path as given ("" for a ModelProto)

    @property
    def opset(self) -> int:
        return self.opsets.get("", self.opsets.get("ai.onnx", 0))


def numpy_type(elem_type: int) -> np.dtype | None:
    """The NumPy type of an ONNX element type (bfloat16 and the float8 types as ml_dtypes', which DirectML has no
    type for); None for strings and undefined."""
    onnx = require_onnx()
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def type_name_of(elem_type: int) -> str:
    onnx = require_onnx()
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type {elem_type}"


def load_model(model) -> LoadedModel:
    """Read a model: a path to an .onnx file, or an onnx.ModelProto (its external data, if any, read from the
    current folder). InputError (exit 2) for a file that is not a readable ONNX model."""
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        return _loaded(model, "the model", Path.cwd(), "")
    path = Path(os.fspath(model))
    shown = quoted(str(model))
    if not path.exists():
        raise InputError(f"model {shown}: no such file")
    if path.is_dir():
        raise InputError(f"model {shown}: is a directory, not an .onnx file")
    try:
        proto = onnx.load_model(str(path), load_external_data=False)
    except OSError as error:
        raise InputError(f"model {shown}: cannot be read ({first_line(error)})") from None
    except Exception:  # protobuf's DecodeError and its kin
        raise InputError(f"model {shown}: is not an ONNX model (its protobuf cannot be decoded)") from None
    return _loaded(proto, f"model {shown}", Path(os.path.realpath(path.parent)), str(model))


def _loaded(proto, shown: str, folder: Path, source: str) -> LoadedModel:
    opsets = {entry.domain: entry.version for entry in proto.opset_import}
    default = next((opsets[d] for d in DEFAULT_DOMAINS if d in opsets), None)
    if default is None or default not in OPSETS:
        found = "no opset of ONNX's default domain" if default is None else f"opset {default}"
        raise InputError(f"{shown}: declares {found}; dmlcli onnx runs opsets {OPSETS.start} to {OPSETS.stop - 1}")
    graph = proto.graph
    if graph.sparse_initializer:
        raise InputError(f"{shown}: has sparse initializers ({graph.sparse_initializer[0].values.name!r}), which "
                         "dmlcli onnx does not read")
    constants, mapped = {}, set()
    for tensor in graph.initializer:
        constants[tensor.name] = tensor_array(tensor, folder, shown)
        if _is_external(tensor):
            mapped.add(tensor.name)
    inputs = tuple(_declared(info) for info in graph.input if info.name not in constants)
    outputs = tuple(_declared(info) for info in graph.output)
    return LoadedModel(proto, shown, folder, constants, opsets, inputs, outputs, mapped, source)


def _declared(info) -> Declared:
    tensor = info.type.tensor_type
    if not info.type.HasField("tensor_type"):
        return Declared(info.name, 0, None)
    dims = None
    if tensor.HasField("shape"):
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
    return Declared(info.name, tensor.elem_type, dims)


def _is_external(tensor) -> bool:
    onnx = require_onnx()
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def tensor_array(tensor, folder: Path | None, shown: str) -> np.ndarray:
    """A TensorProto as an array: memory-mapped where its data is external, converted otherwise."""
    onnx = require_onnx()
    if not _is_external(tensor):
        try:
            return onnx.numpy_helper.to_array(tensor)
        except Exception as error:  # noqa: BLE001 - a malformed tensor: the model's error, in words
            raise InputError(f"{shown}: tensor {tensor.name!r} cannot be read ({first_line(error)})") from None
    return _mapped(tensor, folder, shown)


def _mapped(tensor, folder: Path | None, shown: str) -> np.ndarray:
    """An external initializer memory-mapped read-only from its file, after the checks dispatch makes: the file
    inside the model's folder, the offset and length inside the file, the length the tensor's size."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    location = entries.get("location", "")
    named = f"{shown}: external data {quoted(location)} of tensor {tensor.name!r}"
    if not location or "\0" in location or folder is None:
        raise InputError(f"{named} names no file")
    target = Path(os.path.realpath(folder / location))
    if folder not in target.parents:
        raise InputError(f"{named} lies outside the model's folder {quoted(str(folder))}; a model reads only files "
                         "beside it")
    if not target.is_file():
        raise InputError(f"{named}: no such file")
    dtype = numpy_type(tensor.data_type)
    if dtype is None:
        raise InputError(f"{named} is of type {type_name_of(tensor.data_type)}, which dmlcli onnx does not read")
    shape = tuple(int(d) for d in tensor.dims)
    count = int(np.prod(shape, dtype=np.int64))
    offset = int(entries.get("offset", 0) or 0)
    length = int(entries.get("length", count * dtype.itemsize) or 0)
    size = target.stat().st_size
    if length != count * dtype.itemsize or offset < 0 or offset + length > size:
        raise InputError(f"{named}: offset {offset} and length {length} do not hold Sizes {list(shape)} of "
                         f"{type_name_of(tensor.data_type)} in a file of {size} bytes")
    if count == 0:
        return np.empty(shape, dtype)
    return np.memmap(target, dtype=dtype.newbyteorder("<"), mode="r", offset=offset, shape=shape)
