"""The DxDispatch model format: resources, dispatchables and commands, parsed and checked.

The reference is DxDispatch itself (microsoft/DirectML, DxDispatch/doc/Guide.md and
DxDispatch/src/model/JsonParsers.cpp); comments below name the behaviour followed. Parsing
checks the model's structure and refuses, naming the item, whatever dmlcli cannot run (other
operators, HLSL dispatchables, textures, mixed-type list-initialised buffers) so that nothing runs
before the whole model is known to be runnable. ONNX dispatchables are dispatch/onnx.py, serialized
DirectML graphs dispatch/serialized_graph/, image files dispatch/images.py.
DirectML's own rules (data types, dimension counts, buffer sizes, alignment) are checked later,
per dispatch, by dispatch_plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..data_types import ALL_DATA_TYPES, DataType, from_numpy, integer_limits
from .files import (JSON_PEAK_BYTES_PER_BYTE, MAX_MODEL_BYTES, PathRules, RegularFile, check_output_dir,
                    shown_path, source_file, write_target)
from .jsonc import load_model_json, shown
from .images import check_image_type, check_image_write, image_suffix, parse_resample_size, read_image
from .memory import INITIALISER_PEAK_FACTOR, MemoryBudget
from .onnx import OnnxDispatchable, parse_onnx_dispatchable
from ..io.strided import buffer_bytes_for, check_strides, to_buffer_bytes
from ..errors import InputError
from ..operators import Operator, find_operator

if TYPE_CHECKING:  # annotations only: reading a serialized graph imports it (and FlatBuffers) when needed
    from .serialized_graph.graph import GraphDispatchable

_DATA_TYPE_PREFIX = "DML_TENSOR_DATA_TYPE_"
# HLSL is the one kind dmlcli cannot run at all: it needs DirectX's shader compiler and a Direct3D device.
HLSL_REFUSAL = ("HLSL dispatchables are compute shaders that need DirectX's shader compiler (dxc) and a Direct3D 12 "
                "device, which dmlcli does not have; dmlcli runs DirectML operators and ONNX models")
_COMPILE_TYPES = ("DmlCompileOp", "DmlCompileGraph")
_RESOURCE_KEYS = ("initialValuesDataType", "initialValues", "sizeInBytes", "initialValuesOffsetInBytes",
                  "resampleSize", "resampleMode", "type")
_TENSOR_KEYS = ("Type", "Desc", "DataType", "Flags", "DimensionCount", "Sizes", "Strides",
                "TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment")
# Dispatchable keys DxDispatch reads besides the operator's fields. dmlCompileType (operator or one-node graph)
# does not change what an operator computes; executionFlags may (parse_execution_flags).
_DISPATCHABLE_KEYS = ("type", "Type", "desc", "Desc", "bindings", "dmlCompileType", "executionFlags")
# DML_EXECUTION_FLAGS as DxDispatch reads them (JsonParsersGenerated.cpp, ParseSingleFlagFromDmlExecutionFlags):
# each with or without its DML_EXECUTION_FLAG_ prefix. Only ALLOW_HALF_PRECISION_COMPUTATION changes a result
# (--allow-tf32); meta commands and descriptor lifetimes are Direct3D matters dmlcli has no counterpart of.
_EXECUTION_FLAGS = ("NONE", "ALLOW_HALF_PRECISION_COMPUTATION", "DISABLE_META_COMMANDS", "DESCRIPTORS_VOLATILE")
_EXECUTION_FLAG_PREFIX = "DML_EXECUTION_FLAG_"
# Binding keys DxDispatch uses only for HLSL / ONNX bindings (Guide.md, "Advanced Binding").
_BINDING_KEYS_IGNORED_FOR_DML = ("format", "elementCount", "elementStride", "counter", "counterOffsetBytes", "shape")
UINT32_MAX = 0xFFFFFFFF
UINT64_MAX = 0xFFFFFFFFFFFFFFFF


# ---------------------------------------------------------------- the model's parts


@dataclass(frozen=True)
class BufferResource:
    """A buffer resource: its initial bytes and size, and the data type it was initialised with."""

    name: str
    data_type: DataType  # initialValuesDataType (or the .npy file's type)
    initial_values: bytes
    size_in_bytes: int
    initial_offset: int = 0  # initialValuesOffsetInBytes
    deferred: bool = False  # "initialValues": "deferred": no buffer; an ONNX output gives it contents, shape and type

    @property
    def initial_element_count(self) -> int:
        return len(self.initial_values) * 8 // self.data_type.bits  # a 4-bit type's: two a byte

    def initial_contents(self) -> bytearray:
        contents = bytearray(self.size_in_bytes)
        contents[self.initial_offset:self.initial_offset + len(self.initial_values)] = self.initial_values
        return contents


@dataclass(frozen=True)
class TensorDesc:
    """A DML_BUFFER_TENSOR_DESC as the model gives it (TotalTensorSizeInBytes 0 when left out)."""

    field: str  # the operator DESC field, e.g. "ATensor"
    data_type: DataType
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None
    total_size_in_bytes: int  # as written; 0 means "compute it" (JsonParsers.cpp does the same)
    base_offset_alignment: int  # GuaranteedBaseOffsetAlignment
    owned_by_dml: bool


@dataclass(frozen=True)
class BindingSource:
    """One resource bound to a tensor: a resource name, optionally an offset in elements."""

    resource: str
    element_offset: int = 0
    element_size_in_bytes: int | None = None  # None: the resource's initialValuesDataType size
    shape: tuple[int, ...] | None = None  # ONNX bindings only: the tensor's shape (overrides the model's)


@dataclass(frozen=True)
class Dispatchable:
    name: str
    operator: Operator
    tensors: dict[str, TensorDesc]  # by DESC field name, inputs then output
    parameters: dict[str, object]  # DESC fields as written, by field name, e.g. {"InfinityMode": "POSITIVE"}
    init_bindings: dict[str, BindingSource]  # the dispatchable's own "bindings" (initialisation)
    allow_tf32: bool = False  # executionFlags has ALLOW_HALF_PRECISION_COMPUTATION


@dataclass(frozen=True)
class DispatchCommand:
    index: int
    dispatchable: str
    bindings: dict[str, BindingSource]


@dataclass(frozen=True)
class PrintCommand:
    index: int
    resource: str
    verbose: bool = False


@dataclass(frozen=True)
class WriteFileCommand:
    index: int
    resource: str
    target_path: Path  # as the model names it, from the output folder (what messages show)
    dimensions: tuple[int, ...] | None = None
    resolved_path: Path | None = None  # links followed: the file written, checked to be inside the output folder


@dataclass
class Model:
    path: Path
    resources: dict[str, BufferResource] = field(default_factory=dict)
    dispatchables: dict[str, Dispatchable | OnnxDispatchable | GraphDispatchable] = field(default_factory=dict)
    commands: list = field(default_factory=list)


# ---------------------------------------------------------------- entry point


def read_model(path, *, output_dir=None, allow_paths_outside: bool = False) -> Model:
    """Parse the model file at `path`.

    writeFile targets resolve against `output_dir` (default: cwd) and must stay inside it; sourcePath
    files must stay inside the model's folder; `allow_paths_outside` lifts both rules. The model and
    its sources must be regular files, and every buffer is claimed from the available memory before
    it is made.
    """
    path = Path(path)
    where = f"model {shown(str(path))}"
    rules = PathRules(path.parent, check_output_dir(output_dir), allow_paths_outside)
    budget = MemoryBudget()
    with RegularFile(path, where, "the model file") as handle:
        if handle.size > MAX_MODEL_BYTES:
            raise InputError(f"{where}: is {handle.size} bytes, more than the {MAX_MODEL_BYTES >> 20} MiB a model may "
                             "be (keep large initial values in .npy or raw files named by sourcePath)")
        budget.claim(0, "reading the model's JSON", where, peak=handle.size * JSON_PEAK_BYTES_PER_BYTE)
        raw = handle.read_all()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: is not UTF-8 text, so not a DxDispatch model") from None
    del raw
    document = load_model_json(text, where=where)
    return parse_model(document, rules=rules, path=path, budget=budget)


def parse_model(document, *, path: Path, rules: PathRules | None = None, budget: MemoryBudget | None = None,
                model_dir: Path | None = None, output_dir: Path | None = None) -> Model:
    """Build the Model from parsed JSON. Unknown top-level keys (such as "$schema") are ignored, as DxDispatch does.

    `rules` say where the model may read and write (default: beside `path`, and in `output_dir` or cwd).
    """
    if rules is None:
        rules = PathRules(model_dir if model_dir is not None else Path(path).parent, Path(output_dir or Path.cwd()))
    budget = budget or MemoryBudget()
    prefix = f"model {shown(str(path))}"
    if not isinstance(document, dict):
        raise InputError(f"{prefix}: the root must be a JSON object with resources, dispatchables and commands")
    model = Model(path=path)
    resources = _member(document, "resources", dict, prefix)
    dispatchables = _member(document, "dispatchables", dict, prefix)
    _refuse_hlsl(dispatchables, prefix)  # first: an HLSL model's resources (mixed-type lists) would fail before it
    for name, value in resources.items():
        model.resources[name] = parse_resource(name, value, model_dir=rules.model_dir, rules=rules, budget=budget,
                                               where=f"{prefix}: resource {shown(name)}")
    for name, value in dispatchables.items():
        where = f"{prefix}: dispatchable {shown(name)}"
        kind = value["type"].lower() if isinstance(value, dict) and isinstance(value.get("type"), str) else None
        if kind == "onnx":
            model.dispatchables[name] = parse_onnx_dispatchable(name, value, rules=rules, budget=budget, where=where)
            continue
        if kind == "dmlserializedgraph":
            from .serialized_graph.graph import parse_graph_dispatchable  # FlatBuffers, only for such a model

            model.dispatchables[name] = parse_graph_dispatchable(name, value, rules=rules, budget=budget, where=where)
            continue
        model.dispatchables[name] = parse_dispatchable(name, value, model.resources, where=where)
    commands = _member(document, "commands", list, prefix)
    for index, value in enumerate(commands):
        model.commands.append(parse_command(index, value, model, rules=rules, where=f"{prefix}: command {index}"))
    return model


def _refuse_hlsl(dispatchables: dict, where: str) -> None:
    for name, value in dispatchables.items():
        kind = value.get("type", value.get("Type")) if isinstance(value, dict) else None
        if isinstance(kind, str) and kind.lower() == "hlsl":
            raise InputError(f"{where}: dispatchable {shown(name)}: {HLSL_REFUSAL}")


def _member(document: dict, key: str, kind: type, where: str):
    if key not in document:
        raise InputError(f"{where}: has no {shown(key)} member (a model has resources, dispatchables and commands)")
    value = document[key]
    if not isinstance(value, kind):
        expected = "an object" if kind is dict else "an array"
        raise InputError(f"{where}: {shown(key)} must be {expected}")
    return value


def _check_keys(value: dict, allowed, where: str, what: str) -> None:
    unknown = [key for key in value if key not in allowed]
    if unknown:
        raise InputError(f"{where}: unknown key {shown(unknown[0])} in the {what} (expected {', '.join(allowed)})")


# ---------------------------------------------------------------- numbers as DxDispatch reads them


def _is_integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_long_integer(value) -> bool:
    """An integer too long for int() (kept as Decimal by the JSON reader): out of every range."""
    return isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value()


def parse_uint(value, where: str, *, maximum: int = UINT32_MAX) -> int:
    if not _is_integer(value) or not 0 <= value <= maximum:
        raise InputError(f"{where}: expected an unsigned integer (0 to {maximum}), found {shown(value)}")
    return value


def parse_data_type_name(value, where: str) -> DataType:
    """DML_TENSOR_DATA_TYPE_X or X (Guide.md, "Abbreviated Enum Values")."""
    if not isinstance(value, str):
        raise InputError(f"{where}: a data type must be a string such as \"FLOAT32\", found {shown(value)}")
    key = value.strip().upper()
    if key.startswith(_DATA_TYPE_PREFIX):
        key = key[len(_DATA_TYPE_PREFIX):]
    for data_type in ALL_DATA_TYPES:
        if data_type.name == key:
            return data_type
    if key == "UNKNOWN":
        raise InputError(f"{where}: data type UNKNOWN is not supported by dmlcli (DxDispatch uses it for "
                         "mixed-type list initialisers, which only HLSL constant buffers need)")
    names = ", ".join(t.name for t in ALL_DATA_TYPES)
    raise InputError(f"{where}: unknown data type {shown(value)} (expected one of {names}, optionally with the "
                     f"{_DATA_TYPE_PREFIX} prefix)")


def element_values(values: list, data_type: DataType, where: str) -> np.ndarray:
    """JSON values as an array of `data_type`, converted as DxDispatch's JsonParsers.cpp does.

    Floats: a number, or "nan" / "inf" / "-inf" in any case; the number is read as a double and
    cast to float (FLOAT16 goes double -> float -> half, as ParseFloat16 does). Integers: JSON
    integers only (1.0 is refused, as RapidJSON's IsInt64/IsUint64 refuse it), in range
    (gsl::narrow throws otherwise).
    """
    np_dtype = data_type.numpy_dtype
    if data_type.is_float:
        doubles = [_as_double(value, data_type, f"{where}[{i}]") for i, value in enumerate(values)]
        return _doubles_to(np.array(doubles, dtype=np.float64), values, data_type, where)
    lowest, highest = integer_limits(np_dtype)
    for i, value in enumerate(values):
        if _is_long_integer(value):
            raise InputError(f"{where}[{i}]: {shown(value)} is out of range for {data_type.name} "
                             f"({lowest} to {highest})")
        if not _is_integer(value):
            raise InputError(f"{where}[{i}]: {shown(value)} is not an integer, as {data_type.name} needs "
                             "(DxDispatch refuses numbers written with a decimal point or exponent here)")
        if not lowest <= value <= highest:
            raise InputError(f"{where}[{i}]: {shown(value)} is out of range for {data_type.name} ({lowest} to {highest})")
    return np.array(values, dtype=np_dtype)


def _out_of_range(value, data_type: DataType, where: str) -> InputError:
    # The wording of `run`'s JSON reader for the same value ("= 1e400 is out of range for float32").
    return InputError(f"{where}: {shown(value)} is out of range for {data_type.name} (write \"inf\" for infinity)")


def _as_double(value, data_type: DataType, where: str) -> float:
    if isinstance(value, str):
        special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(value.lower())
        if special is None:
            raise InputError(f"{where}: {shown(value)} is not a number (expected a number, \"nan\", \"inf\" or \"-inf\")")
        return special
    if isinstance(value, Decimal) and not value.is_nan():
        # Beyond a double's range (the JSON reader keeps those exact): RapidJSON refuses them.
        raise _out_of_range(value, data_type, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {shown(value)} is not a number")
    try:
        return float(value)
    except OverflowError:
        raise _out_of_range(value, data_type, where) from None


def _doubles_to(doubles: np.ndarray, values: list, data_type: DataType, where: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        result = doubles
        if data_type.bits <= 32:
            result = result.astype(np.float32)  # static_cast<float>(value.GetDouble())
        if data_type.bits == 16:
            result = result.astype(np.float16)  # half_float::half(float), round to nearest even
    overflow = np.isfinite(doubles) & ~np.isfinite(result)
    if overflow.any():
        index = int(np.flatnonzero(overflow)[0])
        raise _out_of_range(values[index], data_type, f"{where}[{index}]")
    return result


def element_value(value, data_type: DataType, where: str):
    """One JSON value as a NumPy scalar of `data_type`."""
    return element_values([value], data_type, where)[0]


# ---------------------------------------------------------------- resources


@dataclass(frozen=True)
class _Initialiser:
    """Initial values before they are made: their type and size, and how to make them."""

    data_type: DataType
    size_in_bytes: int
    make: Callable[[], bytes]


def parse_resource(name: str, value, *, model_dir: Path, where: str, rules: PathRules | None = None,
                   budget: MemoryBudget | None = None) -> BufferResource:
    """A buffer resource (JsonParsers.cpp, ParseModelBufferDesc).

    The sizes are read first and claimed from `budget` (the memory available) before the initial
    values or the buffer are made, so a huge valueCount or sizeInBytes costs nothing.
    """
    rules = rules or PathRules(model_dir, Path.cwd())
    budget = budget or MemoryBudget()
    if not isinstance(value, dict):
        raise InputError(f"{where}: must be a JSON object with initialValuesDataType and initialValues")
    kind = value.get("type", "buffer")
    if not isinstance(kind, str) or kind.lower() != "buffer":
        raise InputError(f"{where}: resource type {shown(kind)} is not supported: dmlcli, like DxDispatch, "
                         "has buffer resources only (no textures)")
    _check_keys(value, _RESOURCE_KEYS, where, "resource")
    declared = None
    if "initialValuesDataType" in value:
        declared = parse_data_type_name(value["initialValuesDataType"], f"{where}: initialValuesDataType")
    if "initialValues" not in value:
        raise InputError(f"{where}: has no initialValues")
    if isinstance(value["initialValues"], str):
        return _deferred(name, value, declared, where)
    _check_resample_fields(value, where)
    initialiser = _initial_values(value["initialValues"], declared, rules=rules, where=f"{where}: initialValues",
                                  resample_size=value.get("resampleSize"), budget=budget)
    if initialiser.size_in_bytes == 0:
        raise InputError(f"{where}: initialValues must not be empty")
    initial_bytes = initialiser.size_in_bytes
    offset = parse_uint(value.get("initialValuesOffsetInBytes", 0), f"{where}: initialValuesOffsetInBytes",
                        maximum=UINT64_MAX)
    if "sizeInBytes" in value:
        # An explicit size is taken as written; only the implied size is rounded up to 4 bytes.
        size = parse_uint(value["sizeInBytes"], f"{where}: sizeInBytes", maximum=UINT64_MAX)
    else:
        size = (initial_bytes + 3) & ~3
    if initial_bytes + offset > size:
        raise InputError(f"{where}: the buffer size ({size} bytes) is too small for the initialValues "
                         f"({initial_bytes} bytes) at offset {offset} bytes")
    # The initial values stay with the model; the buffer itself is made when the model runs (claimed then).
    budget.claim(initial_bytes, f"making its initialValues ({initial_bytes} bytes)", where,
                 peak=initial_bytes * INITIALISER_PEAK_FACTOR)
    budget.claim(0, f"its buffer of {size} bytes (sizeInBytes)", where, peak=size)
    initial = initialiser.make()
    if len(initial) != initial_bytes:  # a source file that changed size while it was read
        raise InputError(f"{where}: initialValues changed size while being read ({len(initial)} bytes, "
                         f"expected {initial_bytes})")
    return BufferResource(name, initialiser.data_type, initial, size, offset)


def _deferred(name: str, value: dict, declared: DataType | None, where: str) -> BufferResource:
    """"initialValues": "deferred" (ParseModelBufferDesc): no buffer until an ONNX output is bound to it."""
    if value["initialValues"] != "deferred":
        raise InputError(f"{where}: initialValues {shown(value['initialValues'])} is not \"deferred\", the one "
                         "string DxDispatch accepts there")
    extra = [key for key in ("sizeInBytes", "initialValuesOffsetInBytes", "resampleSize", "resampleMode") if key in value]
    if extra:
        raise InputError(f"{where}: a deferred resource takes its size from the ONNX output it receives; "
                         f"{extra[0]} does not apply")
    data_type = declared or parse_data_type_name("UINT8", where)
    return BufferResource(name, data_type, b"", 0, 0, deferred=True)


def _check_resample_fields(value: dict, where: str) -> None:
    """resampleSize and resampleMode apply to image files only; resampleMode must be "scale" (JsonParsers.cpp)."""
    initial = value["initialValues"]
    is_image = isinstance(initial, dict) and image_suffix(initial.get("sourcePath", "")) is not None
    for key in ("resampleSize", "resampleMode"):
        if key in value and not is_image:
            raise InputError(f"{where}: {key} applies only to an image file (.jpg, .png) in initialValues' sourcePath")
    mode = value.get("resampleMode", "scale")
    if mode != "scale":
        raise InputError(f"{where}: resampleMode must be \"scale\" for image files, found {shown(mode)}")


def _initial_values(initial, declared: DataType | None, *, rules: PathRules, where: str, resample_size=None,
                    budget: MemoryBudget | None = None) -> _Initialiser:
    if isinstance(initial, list):
        if declared is None:
            raise InputError(f"{where}: an array of values needs initialValuesDataType")
        return _Initialiser(declared, buffer_bytes_for(len(initial), declared.bits),
                            lambda: to_buffer_bytes(element_values(initial, declared, where), declared))
    if not isinstance(initial, dict):
        raise InputError(f"{where}: must be an array of numbers or an object (constant, sequence or sourcePath)")
    if "value" in initial:
        return _constant(initial, declared, where)
    if "valueStart" in initial:
        return _sequence(initial, declared, where)
    if "sourcePath" in initial:
        return _from_file(initial, declared, rules=rules, where=where, resample_size=resample_size,
                          budget=budget or MemoryBudget())
    raise InputError(f"{where}: unknown initialiser (expected \"value\", \"valueStart\" or \"sourcePath\")")


def _need_type(declared: DataType | None, kind: str, where: str) -> DataType:
    if declared is None:
        raise InputError(f"{where}: a {kind} initialiser needs initialValuesDataType")
    return declared


def _constant(initial: dict, declared, where: str) -> _Initialiser:
    """{ "valueCount": N, "value": v } (GenerateInitialValuesFromConstant)."""
    _check_keys(initial, ("valueCount", "value"), where, "constant initialiser")
    data_type = _need_type(declared, "constant", where)
    count = parse_uint(initial.get("valueCount"), f"{where}: valueCount")
    value = element_value(initial["value"], data_type, f"{where}: value")
    return _Initialiser(data_type, buffer_bytes_for(count, data_type.bits),
                        lambda: to_buffer_bytes(np.full(count, value, dtype=data_type.numpy_dtype), data_type))


def _sequence(initial: dict, declared, where: str) -> _Initialiser:
    """{ "valueCount": N, "valueStart": s, "valueDelta": d } (GenerateInitialValuesFromSequence).

    DxDispatch adds the delta repeatedly in the element type (`value += valueDelta`), so floats
    accumulate rounding step by step and integers wrap; both are reproduced here. np.add.accumulate
    is that loop (sequential, rounding to the element type at each step, unlike np.sum's pairwise
    sums), at NumPy's speed: 4 billion elements are seconds, not hours.
    """
    _check_keys(initial, ("valueCount", "valueStart", "valueDelta"), where, "sequence initialiser")
    data_type = _need_type(declared, "sequence", where)
    count = parse_uint(initial.get("valueCount"), f"{where}: valueCount")
    if "valueDelta" not in initial:
        raise InputError(f"{where}: a sequence initialiser needs valueDelta")
    start = element_value(initial["valueStart"], data_type, f"{where}: valueStart")
    delta = element_value(initial["valueDelta"], data_type, f"{where}: valueDelta")

    def make() -> bytes:
        if count == 0:
            return b""
        # A 4-bit sequence adds in int64 and wraps to its four bits at the end (ml_dtypes' conversion wraps).
        work = np.dtype(np.int64) if data_type.is_four_bit else data_type.numpy_dtype
        steps = np.full(count, delta, dtype=work)
        steps[0] = start
        with np.errstate(all="ignore"):  # floats may overflow to inf step by step, as in C++
            values = np.add.accumulate(steps, dtype=work)  # integers wrap, as C++'s do
        del steps
        return to_buffer_bytes(values.astype(data_type.numpy_dtype, copy=False), data_type)

    return _Initialiser(data_type, buffer_bytes_for(count, data_type.bits), make)


def _from_image(path: Path, declared, resample_size, *, budget: MemoryBudget, where: str,
                shown_source: str) -> _Initialiser:
    """A .jpg or .png, read as DxDispatch reads it (dispatch/images.py): NCHW, FLOAT32 or FLOAT16, 0 to 1."""
    data_type = _need_type(declared, "image file", where)
    check_image_type(data_type, f"{where}: initialValuesDataType")
    channels, height, width = parse_resample_size(resample_size, f"{where}: resampleSize")
    size = channels * height * width * (data_type.bits // 8)
    with RegularFile(path, where, shown_source) as handle:
        file_size = handle.size
    budget.claim(0, f"reading the image file ({file_size} bytes)", where, peak=file_size)

    def make_from_image() -> bytes:
        with RegularFile(path, where, shown_source) as again:
            if again.size != file_size:
                raise InputError(f"{where}: {shown_source} changed size while being read")
            data = again.read_all()
        return read_image(data, data_type, (channels, height, width), budget=budget, where=f"{where}: {shown_source}")

    return _Initialiser(data_type, size, make_from_image)


def _from_file(initial: dict, declared, *, rules: PathRules, where: str, resample_size=None,
               budget: MemoryBudget | None = None) -> _Initialiser:
    """{ "sourcePath": "x.npy" } or raw .dat/.bin bytes (GenerateInitialValuesFromFile).

    The path is tried relative to the model's folder first, then to the current folder; either way
    it must resolve inside the model's folder (unless paths outside are allowed) to a regular file.
    """
    from ..io.npy import as_declared, read_npy, read_npy_header, stored_as

    _check_keys(initial, ("sourcePath",), where, "file initialiser")
    source = initial["sourcePath"]
    if not isinstance(source, str) or not source:
        raise InputError(f"{where}: sourcePath must be a file name")
    shown_source = f"sourcePath {shown_path(source)}"
    shown_where = f"{where}: {shown_source}"
    suffix = Path(source).suffix.lower()
    path = source_file(source, rules, where)
    if image_suffix(source):
        return _from_image(path, declared, resample_size, budget=budget or MemoryBudget(), where=where,
                           shown_source=shown_source)
    if suffix == ".npy":
        with RegularFile(path, where, shown_source) as handle:
            shape, _, dtype, _ = read_npy_header(handle.reopenable_path, where=shown_where)
        file_type = from_numpy(stored_as(dtype, declared, where=shown_where))  # '<V1': INT4/UINT4 if declared so
        if declared is not None and declared != file_type:
            raise InputError(f"{shown_where}: holds {file_type.name} but initialValuesDataType says {declared.name}")

        def make_from_npy() -> bytes:
            with RegularFile(path, where, shown_source) as again:
                array = as_declared(np.asarray(read_npy(again.reopenable_path, where=shown_where, mmap=False)),
                                    declared, where=shown_where)
            if from_numpy(array.dtype) != file_type:
                raise InputError(f"{shown_where}: changed while being read")
            return to_buffer_bytes(array, file_type)

        return _Initialiser(file_type, buffer_bytes_for(math.prod(shape), file_type.bits), make_from_npy)
    data_type = _need_type(declared, "raw binary file", where)
    with RegularFile(path, where, shown_source) as handle:
        size = handle.size

    def make_from_raw() -> bytes:
        with RegularFile(path, where, shown_source) as again:
            if again.size != size:
                raise InputError(f"{shown_where}: changed size while being read")
            return again.read_all()

    return _Initialiser(data_type, size, make_from_raw)


# ---------------------------------------------------------------- dispatchables


def parse_dispatchable(name: str, value, resources: dict, *, where: str) -> Dispatchable:
    """A DirectML operator dispatchable (ParseModelDmlDispatchableDesc)."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: must be a JSON object with a type")
    type_name = value.get("Type", value.get("type"))
    if not isinstance(type_name, str):
        raise InputError(f"{where}: needs a string 'type' (an operator such as DML_OPERATOR_ELEMENT_WISE_BIT_XOR)")
    operator = find_model_operator(type_name, where)
    compile_type = value.get("dmlCompileType", "DmlCompileOp")
    if compile_type not in _COMPILE_TYPES:
        # A one-node graph (DmlCompileGraph) computes what the operator does, so both run the operator.
        raise InputError(f"{where}: dmlCompileType must be DmlCompileOp or DmlCompileGraph, found {shown(compile_type)}")
    flags = parse_execution_flags(value.get("executionFlags", "NONE"), f"{where}: executionFlags")
    # An array field comes with its count field (SLICE's Offsets with DimensionCount), as DirectML reads them.
    expected = operator.tensors + _count_fields(operator) + tuple(
        dict.fromkeys(field for p in operator.parameters for field in p.desc_fields))
    _check_keys(value, _DISPATCHABLE_KEYS + expected, where, "dispatchable")
    desc = value.get("Desc", value.get("desc"))
    if desc is None:
        desc = {key: item for key, item in value.items() if key not in _DISPATCHABLE_KEYS}
    if not isinstance(desc, dict):
        raise InputError(f"{where}: desc must be a JSON object with the operator's fields")
    _check_keys(desc, expected, f"{where}: desc", f"{operator.dml_name} desc")
    tensors = {}
    optional = {name for name, _ in operator.optional_inputs}
    for tensor_field in operator.tensors:
        if tensor_field in optional and desc.get(tensor_field) is None:
            continue  # a _Maybenull_ tensor (a zero point) left out: the engine supplies zeros
        if tensor_field in operator.optional_outputs and desc.get(tensor_field) is None:
            continue  # a _Maybenull_ output (RNN's OutputSequenceTensor) left out: not written
        if tensor_field not in desc:
            raise InputError(f"{where}: desc has no {tensor_field} (a {operator.dml_name} desc needs "
                             f"{', '.join(expected)})")
        if tensor_field == operator.variadic:
            tensors.update(_tensor_array(operator, desc, where))
            continue
        tensors[tensor_field] = parse_tensor_desc(tensor_field, desc[tensor_field], where=f"{where}: {tensor_field}")
    if operator.optional_outputs and not any(name in tensors for name in operator.outputs):
        raise InputError(f"{where}: desc has none of {', '.join(operator.outputs)}; a {operator.dml_name} desc "
                         "needs at least one output tensor")
    for parameter in operator.parameters:
        check_count = getattr(parameter, "check_desc_count", None)
        if check_count is not None:
            try:
                check_count(desc)
            except InputError as error:
                raise InputError(f"{where}: desc: {error}") from None
    # DESC fields as the model writes them; the engine reads them with each parameter's own kind.
    parameters = {}
    for parameter in operator.parameters:
        if parameter.field not in desc:
            if not parameter.required_in_desc:
                continue
            choices = parameter.choices(parameter.options[0])
            choice_text = f" (one of {', '.join(c.upper() for c in choices)})" if choices else ""
            raise InputError(f"{where}: desc has no {parameter.field}{choice_text}; DxDispatch requires every "
                             "field that DirectML does not mark optional")
        parameters[parameter.field] = desc[parameter.field]
    init_bindings = {}
    if "bindings" in value:
        init_bindings = parse_bindings(value["bindings"], operator, resources, where=f"{where}: bindings")
    return Dispatchable(name, operator, tensors, parameters, init_bindings,
                        allow_tf32="ALLOW_HALF_PRECISION_COMPUTATION" in flags)


def parse_execution_flags(value, where: str) -> frozenset[str]:
    """DML_EXECUTION_FLAGS as DxDispatch takes them (ParseFlags): one flag as a string, or an array of them
    (OR'd together), each as DirectML names it with or without DML_EXECUTION_FLAG_; returns the short names.
    What DxDispatch refuses is refused (exit 2): another name, a "|"-joined string, null or a number."""
    flags = value if isinstance(value, list) else [value]
    found = set()
    for flag in flags:
        key = flag.strip().upper().removeprefix(_EXECUTION_FLAG_PREFIX) if isinstance(flag, str) else None
        if key in _EXECUTION_FLAGS:
            found.add(key)
            continue
        hint = (" (DxDispatch takes several flags as an array, not joined by |: [\"ALLOW_HALF_PRECISION_COMPUTATION\", "
                "\"DESCRIPTORS_VOLATILE\"])" if isinstance(flag, str) and "|" in flag else "")
        raise InputError(f"{where}: unknown execution flag {shown(flag)}{hint}; expected a string or an array of "
                         f"strings, each one of {', '.join(_EXECUTION_FLAG_PREFIX + name for name in _EXECUTION_FLAGS)}"
                         " (the prefix may be left out)")
    return frozenset(found)


def _count_fields(operator: Operator) -> tuple[str, ...]:
    """The count field of the operator's tensor array: InputCount (JOIN), OutputCount (SPLIT), or the entry's own
    (QUANTIZE's QuantizationTensorCount)."""
    count = operator.variadic_count_field
    return () if count is None else (count,)


def _tensor_array(operator: Operator, desc: dict, where: str) -> dict[str, TensorDesc]:
    """A tensor array field (JOIN's InputTensors): one tensor desc each, named InputTensors[0], ...; the
    count field, where given, must equal the array's length, as DirectML reads that many descs."""
    field_name = operator.variadic
    values = desc[field_name]
    if not isinstance(values, list) or not values:
        raise InputError(f"{where}: {field_name} must be a non-empty array of tensor descs")
    (count_field,) = _count_fields(operator)
    if count_field in desc and parse_uint(desc[count_field], f"{where}: {count_field}") != len(values):
        raise InputError(f"{where}: {count_field} {desc[count_field]} does not match the {len(values)} tensor descs "
                         f"of {field_name}")
    return {f"{field_name}[{i}]": parse_tensor_desc(f"{field_name}[{i}]", item, where=f"{where}: {field_name}[{i}]")
            for i, item in enumerate(values)}


def find_model_operator(type_name: str, where: str) -> Operator:
    try:
        return find_operator(type_name)
    except InputError as error:
        raise InputError(f"{where}: {error}") from None


def parse_tensor_desc(tensor_field: str, value, *, where: str) -> TensorDesc:
    """A DML_TENSOR_DESC with DxDispatch's defaults (Guide.md, "DML_TENSOR_DESC"; ParseDmlBufferTensorDesc)."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: must be a tensor desc object with DataType and Sizes")
    tensor_type = value.get("Type", "BUFFER")
    if not isinstance(tensor_type, str) or tensor_type.upper().removeprefix("DML_TENSOR_TYPE_") != "BUFFER":
        raise InputError(f"{where}: tensor Type {shown(tensor_type)} is not supported (only DML_TENSOR_TYPE_BUFFER exists)")
    if "Desc" in value:
        _check_keys(value, ("Type", "Desc"), where, "tensor desc")
        value = value["Desc"]
        if not isinstance(value, dict):
            raise InputError(f"{where}: Desc must be a buffer tensor desc object")
    _check_keys(value, _TENSOR_KEYS, where, "tensor desc")
    if "DataType" not in value:
        raise InputError(f"{where}: has no DataType")
    data_type = parse_data_type_name(value["DataType"], f"{where}: DataType")
    sizes = value.get("Sizes")
    if not isinstance(sizes, list):
        raise InputError(f"{where}: Sizes must be a list of unsigned integers")
    sizes = tuple(parse_uint(s, f"{where}: Sizes") for s in sizes)
    if "DimensionCount" in value:
        count = parse_uint(value["DimensionCount"], f"{where}: DimensionCount")
        if count != len(sizes):
            raise InputError(f"{where}: DimensionCount {count} does not match the {len(sizes)} Sizes")
    strides = value.get("Strides")
    if strides == []:
        strides = None  # DxDispatch passes an empty Strides array as nullptr (packed)
    if strides is not None:
        strides = check_strides(sizes, strides, where=f"{where}: Strides")
    total = parse_uint(value.get("TotalTensorSizeInBytes", 0), f"{where}: TotalTensorSizeInBytes", maximum=UINT64_MAX)
    alignment = parse_uint(value.get("GuaranteedBaseOffsetAlignment", 0), f"{where}: GuaranteedBaseOffsetAlignment")
    owned = _parse_flags(value.get("Flags", "NONE"), f"{where}: Flags")
    return TensorDesc(tensor_field, data_type, sizes, strides, total, alignment, owned)


def _parse_flags(value, where: str) -> bool:
    """DML_TENSOR_FLAGS as a string or an array of strings (ParseFlags); True when OWNED_BY_DML is set."""
    flags = value if isinstance(value, list) else [value]
    owned = False
    for flag in flags:
        key = flag.strip().upper().removeprefix("DML_TENSOR_FLAG_") if isinstance(flag, str) else None
        if key == "OWNED_BY_DML":
            owned = True
        elif key != "NONE":
            raise InputError(f"{where}: unknown tensor flag {shown(flag)} (expected NONE or OWNED_BY_DML)")
    return owned


# ---------------------------------------------------------------- bindings and commands


def parse_bindings(value, operator: Operator, resources: dict, *, where: str) -> dict[str, BindingSource]:
    """Bindings by tensor field name: a resource name, {"name", "elementOffset"}, or a one-item array of those."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: must be an object mapping tensor names to resources")
    bindings = {}
    for tensor_field, source in value.items():
        if tensor_field not in operator.tensors:
            raise InputError(f"{where}: {operator.dml_name} has no tensor {shown(tensor_field)} to bind "
                             f"(its tensors: {', '.join(operator.tensors)})")
        if tensor_field == operator.variadic:
            # A tensor array binds one resource per tensor, in order (DxDispatch's array of bindings).
            items = source if isinstance(source, list) else [source]
            for index, item in enumerate(items):
                name = f"{tensor_field}[{index}]"
                bindings[name] = binding_source(item, resources, where=f"{where}: {name}")
            continue
        if isinstance(source, list):
            if len(source) != 1:
                raise InputError(f"{where}: bind point {shown(tensor_field)} requires 1 resource, but {len(source)} were bound")
            source = source[0]
        bindings[tensor_field] = binding_source(source, resources, where=f"{where}: {tensor_field}")
    return bindings


def binding_source(source, resources: dict, *, where: str) -> BindingSource:
    if isinstance(source, str):
        binding = BindingSource(source)
    elif isinstance(source, dict):
        _check_keys(source, ("name", "elementOffset", "elementSizeInBytes") + _BINDING_KEYS_IGNORED_FOR_DML,
                    where, "binding")
        if not isinstance(source.get("name"), str):
            raise InputError(f"{where}: a binding object needs a \"name\" (the resource)")
        size = source.get("elementSizeInBytes")
        binding = BindingSource(
            source["name"],
            parse_uint(source.get("elementOffset", 0), f"{where}: elementOffset", maximum=UINT64_MAX),
            None if size in (None, 0) else parse_uint(size, f"{where}: elementSizeInBytes"),
        )
    else:
        raise InputError(f"{where}: a binding is a resource name or an object with \"name\" and \"elementOffset\"")
    if binding.resource not in resources:
        raise InputError(f"{where}: there is no resource named {shown(binding.resource)}")
    return binding


def parse_command(index: int, value, model: Model, *, where: str, rules: PathRules | None = None,
                  output_dir: Path | None = None):
    """dispatch, print or writeFile (ParseModelCommandDesc; the type is matched ignoring case)."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise InputError(f"{where}: must be an object with a string 'type' (dispatch, print or writeFile)")
    kind = value["type"].lower()
    if kind == "dispatch":
        return _dispatch_command(index, value, model, where=f"{where} (dispatch)")
    if kind == "print":
        _check_keys(value, ("type", "resource", "verbose"), where, "print command")
        verbose = value.get("verbose", False)
        if not isinstance(verbose, bool):
            raise InputError(f"{where}: verbose must be true or false")
        return PrintCommand(index, _resource_name(value, model, where), verbose)
    if kind == "writefile":
        rules = rules or PathRules(model.path.parent, Path(output_dir or Path.cwd()))
        return _write_file_command(index, value, model, rules=rules, where=f"{where} (writeFile)")
    raise InputError(f"{where}: command type {shown(value['type'])} is not supported (expected dispatch, print or writeFile)")


def _resource_name(value: dict, model: Model, where: str) -> str:
    name = value.get("resource")
    if not isinstance(name, str):
        raise InputError(f"{where}: needs a \"resource\" name")
    if name not in model.resources:
        raise InputError(f"{where}: there is no resource named {shown(name)}")
    return name


def _dispatch_command(index: int, value: dict, model: Model, *, where: str) -> DispatchCommand:
    _check_keys(value, ("type", "dispatchable", "bindings", "threadGroupCount"), where, "dispatch command")
    name = value.get("dispatchable")
    if not isinstance(name, str):
        raise InputError(f"{where}: needs a \"dispatchable\" name")
    if name not in model.dispatchables:
        raise InputError(f"{where}: there is no dispatchable named {shown(name)}")
    if not isinstance(value.get("bindings"), dict):
        raise InputError(f"{where}: expected an object field named 'bindings'")
    dispatchable = model.dispatchables[name]
    if isinstance(dispatchable, OnnxDispatchable):
        bindings = parse_onnx_bindings(value["bindings"], model.resources, where=f"{where}: bindings")
    elif not isinstance(dispatchable, Dispatchable):  # a serialized graph: bound by its inputs' and outputs' names
        from .serialized_graph.graph import parse_graph_bindings

        bindings = parse_graph_bindings(value["bindings"], dispatchable, model.resources, where=f"{where}: bindings")
    else:
        bindings = parse_bindings(value["bindings"], dispatchable.operator, model.resources, where=f"{where}: bindings")
    return DispatchCommand(index, name, bindings)


def parse_onnx_bindings(value: dict, resources: dict, *, where: str) -> dict[str, BindingSource]:
    """ONNX bindings by the model's tensor names: one resource each, optionally with a "shape" (int64s)."""
    bindings = {}
    for tensor_name, source in value.items():
        here = f"{where}: {tensor_name}"
        if isinstance(source, list):
            if len(source) != 1:
                raise InputError(f"{here}: ONNX dispatchables' tensors must map to a single binding source, "
                                 f"found {len(source)}")
            source = source[0]
        binding = binding_source(source, resources, where=here)
        shape = source.get("shape") if isinstance(source, dict) else None
        if shape is not None:
            if not isinstance(shape, list):
                raise InputError(f"{here}: shape must be a list of non-negative integers")
            shape = tuple(parse_uint(d, f"{here}: shape", maximum=2**63 - 1) for d in shape)
            binding = BindingSource(binding.resource, binding.element_offset, binding.element_size_in_bytes, shape)
        bindings[tensor_name] = binding
    return bindings


def _write_file_command(index: int, value: dict, model: Model, *, rules: PathRules, where: str) -> WriteFileCommand:
    _check_keys(value, ("type", "resource", "targetPath", "dimensions"), where, "writeFile command")
    resource = _resource_name(value, model, where)
    target = value.get("targetPath")
    if not isinstance(target, str) or not target:
        raise InputError(f"{where}: needs a \"targetPath\"")
    path, resolved = write_target(target, rules, where)
    dimensions = value.get("dimensions")
    if dimensions is not None:
        if not isinstance(dimensions, list) or not dimensions:
            raise InputError(f"{where}: dimensions must be a non-empty list of unsigned integers")
        dimensions = tuple(parse_uint(d, f"{where}: dimensions") for d in dimensions)
    buffer = model.resources[resource]
    if image_suffix(target) and not buffer.deferred:  # a deferred one is checked once its shape is known
        check_image_write(dimensions, buffer.data_type, buffer.size_in_bytes, where)
    return WriteFileCommand(index, resource, path, dimensions, resolved)
