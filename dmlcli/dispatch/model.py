"""The DxDispatch model format: resources, dispatchables and commands, parsed and checked.

The reference is DxDispatch itself (microsoft/DirectML, DxDispatch/doc/Guide.md and
DxDispatch/src/model/JsonParsers.cpp); comments below name the behaviour followed. Parsing
checks the model's structure and refuses, naming the item, whatever dmlcli cannot run (other
operators, HLSL dispatchables, textures, mixed-type list-initialised buffers) so that nothing runs
before the whole model is known to be runnable. Operator dispatchables are dispatch/dispatchable.py,
ONNX dispatchables dispatch/onnx.py, serialized DirectML graphs dispatch/serialized_graph/, image files
dispatch/images.py; the numbers and names in the JSON are read as dispatch/fields.py reads them.
DirectML's own rules (data types, dimension counts, buffer sizes, alignment) are checked later,
per dispatch, by dispatch/plan.py.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..data_types import DataType, from_numpy
from .dispatchable import (BindingSource, Dispatchable, DispatchCommand, binding_source, parse_bindings,
                           parse_dispatchable)
from .fields import UINT64_MAX, check_keys, element_value, element_values, parse_data_type_name, parse_uint
from .files import (JSON_PEAK_BYTES_PER_BYTE, MAX_MODEL_BYTES, PathRules, RegularFile, check_output_dir,
                    shown_path, source_file, write_target)
from .jsonc import NumberList, load_model_json, shown
from .images import check_image_type, check_image_write, image_suffix, parse_resample_size, read_image
from .memory import DISPATCH_BYTES_PER_ELEMENT, INITIALISER_PEAK_FACTOR, PRINT_BYTES_PER_ELEMENT, MemoryBudget
from .onnx import OnnxDispatchable, parse_onnx_dispatchable
from ..io.strided import buffer_bytes_for, to_buffer_bytes
from ..errors import InputError

if TYPE_CHECKING:  # annotations only: reading a serialized graph imports it (and FlatBuffers) when needed
    from .serialized_graph.graph import GraphDispatchable

# HLSL is the one kind dmlcli cannot run at all: it needs DirectX's shader compiler and a Direct3D device.
HLSL_REFUSAL = ("HLSL dispatchables are compute shaders that need DirectX's shader compiler (dxc) and a Direct3D 12 "
                "device, which dmlcli does not have; dmlcli runs DirectML operators and ONNX models")
_RESOURCE_KEYS = ("initialValuesDataType", "initialValues", "sizeInBytes", "initialValuesOffsetInBytes",
                  "resampleSize", "resampleMode", "type")


# ---------------------------------------------------------------- the model's parts


@dataclass(frozen=True)
class BufferResource:
    """A buffer resource: its initial bytes and size, and the data type it was initialised with."""

    name: str
    data_type: DataType  # initialValuesDataType (or the .npy file's type)
    initial_values: bytes | memoryview  # bytes-like (a read-only view of the array they were made as)
    size_in_bytes: int
    initial_offset: int = 0  # initialValuesOffsetInBytes
    deferred: bool = False  # "initialValues": "deferred": no buffer; an ONNX output gives it contents, shape and type
    initial_size: int | None = None  # the initial values' bytes, known before they are made (None: len(initial_values))

    @property
    def initial_element_count(self) -> int:
        size = len(self.initial_values) if self.initial_size is None else self.initial_size
        return size * 8 // self.data_type.bits  # a 4-bit type's: two a byte

    def initial_contents(self) -> bytearray:
        contents = bytearray(self.size_in_bytes)
        # Through a memoryview: a bytearray's slice assignment copies anything but bytes to a temporary first.
        memoryview(contents)[self.initial_offset:self.initial_offset + len(self.initial_values)] = self.initial_values
        return contents


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
    may_replace: bool = True  # False: an existing file there is refused (no --output-dir), checked again at the end


@dataclass
class Model:
    path: Path
    resources: dict[str, BufferResource] = field(default_factory=dict)
    dispatchables: dict[str, Dispatchable | OnnxDispatchable | GraphDispatchable] = field(default_factory=dict)
    commands: list = field(default_factory=list)


def room_for_contents(model: Model) -> dict[str, int]:
    """What a run of `model` holds whatever its dispatches compute, by part: every buffer, a copy of the buffer
    for each writeFile (staged until the end) and the largest file's byte-order copy while it is written, and
    the longest print's text."""
    sizes = {name: resource.size_in_bytes for name, resource in model.resources.items()}
    writes = [sizes[c.resource] for c in model.commands if isinstance(c, WriteFileCommand)]
    prints = [model.resources[c.resource].initial_element_count for c in model.commands if isinstance(c, PrintCommand)]
    return {"buffers": sum(sizes.values()), "files to write": sum(writes) + max(writes, default=0),
            "the longest print": PRINT_BYTES_PER_ELEMENT * max(prints, default=0)}


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
    # A folder the user named may have its files replaced; the current folder, by default, may not.
    rules = PathRules(path.parent, check_output_dir(output_dir), allow_paths_outside,
                      replace_existing=output_dir is not None)
    budget = MemoryBudget()
    with RegularFile(path, where, "the model file") as handle:
        if handle.size > MAX_MODEL_BYTES:
            raise InputError(f"{where}: is {handle.size} bytes, more than the {MAX_MODEL_BYTES >> 20} MiB a model may "
                             "be (keep large initial values in .npy or raw files named by sourcePath)")
        budget.claim(0, "reading the model's JSON", where, peak=handle.size * JSON_PEAK_BYTES_PER_BYTE)
        raw = handle.read_all()
    _check_utf8(raw, where)
    document = load_model_json(raw, where=where)
    del raw
    return parse_model(document, rules=rules, path=path, budget=budget)


def _check_utf8(raw: bytes, where: str) -> None:
    """Refuse text that is not UTF-8, decoding a megabyte at a time (not a second copy of a 64 MiB model)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(raw), 1 << 20):
            decoder.decode(raw[start:start + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise InputError(f"{where}: is not UTF-8 text, so not a DxDispatch model") from None


def parse_model(document, *, path: Path, rules: PathRules | None = None, budget: MemoryBudget | None = None,
                model_dir: Path | None = None, output_dir: Path | None = None) -> Model:
    """Build the Model from parsed JSON. Unknown top-level keys (such as "$schema") are ignored, as DxDispatch does.

    `rules` say where the model may read and write (default: beside `path`, and in `output_dir` or cwd).
    """
    if rules is None:
        rules = PathRules(model_dir if model_dir is not None else Path(path).parent, Path(output_dir or Path.cwd()),
                          replace_existing=output_dir is not None)
    budget = budget or MemoryBudget()
    prefix = f"model {shown(str(path))}"
    if not isinstance(document, dict):
        raise InputError(f"{prefix}: the root must be a JSON object with resources, dispatchables and commands")
    model = Model(path=path)
    resources = _member(document, "resources", dict, prefix)
    dispatchables = _member(document, "dispatchables", dict, prefix)
    _refuse_hlsl(dispatchables, prefix)  # first: an HLSL model's resources (mixed-type lists) would fail before it
    pending = {}  # resource -> how to make its initial values, once the whole model is known to fit
    for name, value in resources.items():
        model.resources[name], pending[name] = _prepare_resource(
            name, value, rules=rules, budget=budget, where=f"{prefix}: resource {shown(name)}")
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
    # Nothing is made (numbers converted, files read, images decoded) before what running the model will hold
    # is known to fit: a 1x1 image resampled to 8192 x 8192 took 3.7 GB before the run's check refused it.
    check_room_to_load(model, budget)
    for name, make in pending.items():
        if make is not None:
            model.resources[name] = _made(model.resources[name], make, f"{prefix}: resource {shown(name)}")
    return model


def check_room_to_load(model: Model, budget: MemoryBudget) -> None:
    """Refuse a model whose run could not fit, before its initial values are made: what the resources' making
    claimed, with what the run holds whatever it computes (room_for_contents) and the largest operator
    dispatch's temporaries as run_commands counts them (its check, before the run, adds the rest)."""
    elements = {name: sum(math.prod(desc.sizes) for desc in dispatchable.tensors.values())
                for name, dispatchable in model.dispatchables.items() if isinstance(dispatchable, Dispatchable)}
    largest = max((elements.get(command.dispatchable, 0) for command in model.commands
                   if isinstance(command, DispatchCommand)), default=0)
    parts = {"initial values": budget.claimed, **room_for_contents(model),
             "the largest dispatch": DISPATCH_BYTES_PER_ELEMENT * largest}
    MemoryBudget(budget.available).check_total(parts, where=f"model {shown(str(model.path))}")


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


# ---------------------------------------------------------------- resources


@dataclass(frozen=True)
class _Initialiser:
    """Initial values before they are made: their type and size, and how to make them."""

    data_type: DataType
    size_in_bytes: int
    make: Callable[[], bytes]


def parse_resource(name: str, value, *, model_dir: Path, where: str, rules: PathRules | None = None,
                   budget: MemoryBudget | None = None) -> BufferResource:
    """A buffer resource (JsonParsers.cpp, ParseModelBufferDesc), its initial values made.

    The sizes are read first and claimed from `budget` (the memory available) before the initial
    values or the buffer are made, so a huge valueCount or sizeInBytes costs nothing.
    """
    resource, make = _prepare_resource(name, value, rules=rules or PathRules(model_dir, Path.cwd()),
                                       budget=budget or MemoryBudget(), where=where)
    return resource if make is None else _made(resource, make, where)


def _prepare_resource(name: str, value, *, rules: PathRules, budget: MemoryBudget,
                      where: str) -> tuple[BufferResource, Callable[[], bytes] | None]:
    """The resource with its sizes and types checked and claimed, its initial values not made yet (empty), and
    what makes them (None for a deferred resource)."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: must be a JSON object with initialValuesDataType and initialValues")
    kind = value.get("type", "buffer")
    if not isinstance(kind, str) or kind.lower() != "buffer":
        raise InputError(f"{where}: resource type {shown(kind)} is not supported: dmlcli, like DxDispatch, "
                         "has buffer resources only (no textures)")
    check_keys(value, _RESOURCE_KEYS, where, "resource")
    declared = None
    if "initialValuesDataType" in value:
        declared = parse_data_type_name(value["initialValuesDataType"], f"{where}: initialValuesDataType")
    if "initialValues" not in value:
        raise InputError(f"{where}: has no initialValues")
    if isinstance(value["initialValues"], str):
        return _deferred(name, value, declared, where), None
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
    return BufferResource(name, initialiser.data_type, b"", size, offset, initial_size=initial_bytes), initialiser.make


def _made(resource: BufferResource, make: Callable[[], bytes], where: str) -> BufferResource:
    initial = make()
    if len(initial) != resource.initial_size:  # a source file that changed size while it was read
        raise InputError(f"{where}: initialValues changed size while being read ({len(initial)} bytes, "
                         f"expected {resource.initial_size})")
    return dataclasses.replace(resource, initial_values=initial, initial_size=None)


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
    if isinstance(initial, NumberList):  # a long array of numbers, still text: converted a piece at a time
        if declared is None:
            raise InputError(f"{where}: an array of values needs initialValuesDataType")
        return _Initialiser(declared, buffer_bytes_for(len(initial), declared.bits),
                            lambda: to_buffer_bytes(_number_list_values(initial, declared, where), declared))
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


def _number_list_values(numbers: NumberList, data_type: DataType, where: str) -> np.ndarray:
    """The array's values in `data_type`, filled a piece at a time: its result and one piece's numbers at once."""
    values = np.empty(len(numbers), dtype=data_type.numpy_dtype)
    try:
        for first, piece in numbers.pieces():
            values[first:first + len(piece)] = element_values(piece, data_type, where, first_index=first)
    except InputError as error:
        raise InputError(f"{where}: {error}") if str(error).startswith("malformed") else error from None
    return values


def _need_type(declared: DataType | None, kind: str, where: str) -> DataType:
    if declared is None:
        raise InputError(f"{where}: a {kind} initialiser needs initialValuesDataType")
    return declared


def _constant(initial: dict, declared, where: str) -> _Initialiser:
    """{ "valueCount": N, "value": v } (GenerateInitialValuesFromConstant)."""
    check_keys(initial, ("valueCount", "value"), where, "constant initialiser")
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
    check_keys(initial, ("valueCount", "valueStart", "valueDelta"), where, "sequence initialiser")
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

    check_keys(initial, ("sourcePath",), where, "file initialiser")
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


# ---------------------------------------------------------------- bindings and commands


def parse_command(index: int, value, model: Model, *, where: str, rules: PathRules | None = None,
                  output_dir: Path | None = None):
    """dispatch, print or writeFile (ParseModelCommandDesc; the type is matched ignoring case)."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise InputError(f"{where}: must be an object with a string 'type' (dispatch, print or writeFile)")
    kind = value["type"].lower()
    if kind == "dispatch":
        return _dispatch_command(index, value, model, where=f"{where} (dispatch)")
    if kind == "print":
        check_keys(value, ("type", "resource", "verbose"), where, "print command")
        verbose = value.get("verbose", False)
        if not isinstance(verbose, bool):
            raise InputError(f"{where}: verbose must be true or false")
        return PrintCommand(index, _resource_name(value, model, where), verbose)
    if kind == "writefile":
        rules = rules or PathRules(model.path.parent, Path(output_dir or Path.cwd()),
                                   replace_existing=output_dir is not None)
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
    check_keys(value, ("type", "dispatchable", "bindings", "threadGroupCount"), where, "dispatch command")
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
    check_keys(value, ("type", "resource", "targetPath", "dimensions"), where, "writeFile command")
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
    return WriteFileCommand(index, resource, path, dimensions, resolved, rules.replace_existing or rules.allow_outside)
