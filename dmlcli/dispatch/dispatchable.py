"""A DirectML operator dispatchable as a DxDispatch model writes it: its tensor descs, its DESC fields and its
bindings, parsed as DxDispatch parses them (DxDispatch/src/model/JsonParsers.cpp, ParseModelDmlDispatchableDesc),
and the records a dispatch of it is made of (DispatchCommand, BindingSource).

model.py reads a model's operator dispatchables here; serialized_graph/graph.py turns each node of a serialized
graph into one. DirectML's rules for them (types, Sizes, binding ranges) are binding.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..data_types import DataType
from ..errors import InputError
from ..io.strided import check_strides
from ..operators import Operator, find_operator
from .fields import UINT64_MAX, check_keys, parse_data_type_name, parse_uint
from .jsonc import shown

_COMPILE_TYPES = ("DmlCompileOp", "DmlCompileGraph")
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
    check_keys(value, _DISPATCHABLE_KEYS + expected, where, "dispatchable")
    desc = value.get("Desc", value.get("desc"))
    if desc is None:
        desc = {key: item for key, item in value.items() if key not in _DISPATCHABLE_KEYS}
    if not isinstance(desc, dict):
        raise InputError(f"{where}: desc must be a JSON object with the operator's fields")
    check_keys(desc, expected, f"{where}: desc", f"{operator.dml_name} desc")
    tensors = {}
    optional = {name for name, _ in operator.optional_inputs}
    for tensor_field in operator.tensors:
        if tensor_field in optional and desc.get(tensor_field) is None:
            continue  # a _Maybenull_ tensor (a zero point) left out: the engine supplies zeros
        if tensor_field in operator.optional_outputs and desc.get(tensor_field) is None:
            continue  # a _Maybenull_ output (RNN's OutputSequenceTensor) left out: neither computed nor written
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
        check_keys(value, ("Type", "Desc"), where, "tensor desc")
        value = value["Desc"]
        if not isinstance(value, dict):
            raise InputError(f"{where}: Desc must be a buffer tensor desc object")
    check_keys(value, _TENSOR_KEYS, where, "tensor desc")
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
        check_keys(source, ("name", "elementOffset", "elementSizeInBytes") + _BINDING_KEYS_IGNORED_FOR_DML,
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
