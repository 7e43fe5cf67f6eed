"""DirectML's rules for one operator dispatchable of a model, checked before anything runs.

The dispatchable is validated by the engine (its DESC fields, data types and Sizes, the output's included, at
the chosen feature level), and a dispatch command's bindings are checked as DirectML checks a binding table:
every tensor bound, the bound range at least TotalTensorSizeInBytes long, the offset aligned, OWNED_BY_DML inputs
bound at initialisation only, and the output aliasing an input only where the operator allows in-place
execution. plan.py applies these to every operator dispatchable of a model; serialized_graph/graph.py to each
node of a serialized graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..calls.validation import Verdict, field_of
from ..engine import plan, request
from ..errors import InputError, ValidationError
from ..io.overlap import overlaps_itself, views_overlap
from ..io.strided import calc_buffer_tensor_size, packed_strides
from .dispatchable import BindingSource, Dispatchable, DispatchCommand, TensorDesc
from .jsonc import shown

# DML_BUFFER_BINDING.Offset "must be aligned to a multiple of DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT or
# the GuaranteedBaseOffsetAlignment supplied as part of the DML_BUFFER_TENSOR_DESC" (learn.microsoft.com,
# ns-directml-dml_buffer_binding); DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16 (DirectML.h).
MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16


@dataclass(frozen=True)
class CheckedDispatchable:
    dispatchable: Dispatchable
    verdict: Verdict
    strides: dict[str, tuple[int, ...]]  # effective strides (packed where the desc has none)
    total_sizes: dict[str, int]  # effective TotalTensorSizeInBytes


@dataclass(frozen=True)
class BoundTensor:
    """A tensor of one dispatch, resolved to a byte range of a buffer."""

    desc: TensorDesc
    resource: str  # a model resource; in a serialized graph also a buffer of the graph's own (GraphBuffer)
    offset_in_bytes: int
    strides: tuple[int, ...]
    at_initialisation: bool  # OWNED_BY_DML: DirectML reads it once, when the operator is initialised


@dataclass(frozen=True)
class PlannedDispatch:
    command: DispatchCommand
    checked: CheckedDispatchable
    tensors: dict[str, BoundTensor]

    @property
    def name(self) -> str:
        return self.checked.dispatchable.name


# ---------------------------------------------------------------- dispatchables


def check_dispatchable(dispatchable: Dispatchable, feature_level=None, *, where: str | None = None,
                       ) -> CheckedDispatchable:
    """DirectML's rules for one operator dispatchable; `where` names it in messages (default: its name)."""
    op = dispatchable.operator
    prefix = where or f"dispatchable {shown(dispatchable.name)}"
    # An optional tensor the desc leaves out is not bound; a tensor array's tensors come one by one.
    inputs = [(desc.data_type, desc.sizes) for name, desc in dispatchable.tensors.items() if field_of(name) in op.inputs]
    # By name where the desc leaves out some _Maybenull_ inputs (a zero point but not the other).
    input_names = [name for name in dispatchable.tensors if field_of(name) in op.inputs] \
        if op.optional_inputs and op.variadic is None else None
    outputs = [name for name in dispatchable.tensors if field_of(name) in op.outputs]
    output = dispatchable.tensors[outputs[0]]
    chosen = dispatchable.tensors.get(op.choice_output or op.output, output)
    given_shapes: dict = {}
    for name in outputs:
        if name != field_of(name):
            given_shapes.setdefault(field_of(name), []).append(dispatchable.tensors[name].sizes)
        else:
            given_shapes[name] = dispatchable.tensors[name].sizes
    # The _Maybenull_ outputs the desc leaves out are neither computed nor written, as in DirectML.
    asked = tuple(dict.fromkeys(field_of(name) for name in outputs)) if op.optional_outputs else None
    try:
        req = request(op, feature_level=feature_level, output_dtype=chosen.data_type,
                      output_shape=output.sizes if op.is_elementwise else None,
                      output_shapes=None if op.is_elementwise else given_shapes, desc_fields=dispatchable.parameters,
                      allow_tf32=dispatchable.allow_tf32, outputs=asked)
        verdict = plan(req, inputs, input_names)
        _check_output_types(verdict, dispatchable)
    except ValidationError as error:
        raise ValidationError(f"{prefix}: {error}") from None
    except InputError as error:
        raise InputError(f"{prefix}: {error}") from None
    strides, totals = {}, {}
    for name, desc in dispatchable.tensors.items():
        strides[name] = desc.strides if desc.strides is not None else packed_strides(desc.sizes)
        totals[name] = _total_size(desc, f"{prefix}: {name}")
        _check_alignment_field(desc, f"{prefix}: {name}")
    for name in outputs:
        desc = dispatchable.tensors[name]
        if desc.owned_by_dml:
            raise ValidationError(f"{prefix}: {name} is flagged OWNED_BY_DML, which DirectML allows on input tensors only")
        # Arithmetic on Sizes and Strides, after TotalTensorSizeInBytes above: never a list of the elements.
        overlapping = overlaps_itself(desc.sizes, strides[name])
        if overlapping is None:
            raise ValidationError(
                f"{prefix}: {name} Strides {list(strides[name])}: dmlcli cannot rule out, within bounded work, that "
                "they make two elements share one address, so it refuses them as if they did (output strides that "
                "overlap would make the result depend on the order of the writes)")
        if overlapping:
            raise ValidationError(
                f"{prefix}: {name} Strides {list(strides[name])} make several elements share one address; "
                "dmlcli refuses output strides that overlap (zero strides broadcast inputs only), since the result "
                "would depend on the order of the writes")
    return CheckedDispatchable(dispatchable, verdict, strides, totals)


def _check_output_types(verdict: Verdict, dispatchable: Dispatchable) -> None:
    """Each output desc's DataType must be the one the call gives that output (a tied output, the second output)."""
    for tensor in verdict.call.outputs:
        desc = dispatchable.tensors.get(tensor.name)
        if desc is not None and desc.data_type != tensor.data_type:
            raise ValidationError(f"{verdict.call.operator.name}: {tensor.name} data type {desc.data_type.name} does "
                                  f"not match {tensor.data_type.name}, the type this call gives it")


def _total_size(desc: TensorDesc, where: str) -> int:
    """TotalTensorSizeInBytes, defaulted as DxDispatch does (0 -> DMLCalcBufferTensorSize) and checked."""
    minimum = calc_buffer_tensor_size(desc.data_type.bits, desc.sizes, desc.strides)
    if desc.total_size_in_bytes == 0:
        return minimum
    if desc.total_size_in_bytes < minimum:
        raise ValidationError(
            f"{where}: TotalTensorSizeInBytes {desc.total_size_in_bytes} is smaller than the {minimum} bytes its "
            "Sizes, Strides and DataType need (DMLCalcBufferTensorSize)")
    return desc.total_size_in_bytes


def _check_alignment_field(desc: TensorDesc, where: str) -> None:
    alignment = desc.base_offset_alignment
    element_size = max(1, desc.data_type.bits // 8)  # a 4-bit element lies within one byte
    if alignment and (alignment & (alignment - 1) or alignment < element_size):
        raise ValidationError(
            f"{where}: GuaranteedBaseOffsetAlignment {alignment} must be 0 or a power of two at least as large "
            f"as the element size ({element_size} bytes for {desc.data_type.name})")


# ---------------------------------------------------------------- dispatch commands


def bind_dispatch(command: DispatchCommand, checked: CheckedDispatchable, resources: dict) -> PlannedDispatch:
    dispatchable = checked.dispatchable
    prefix = f"command {command.index} (dispatch {shown(dispatchable.name)})"
    tensors = {}
    for name in list(command.bindings) + list(dispatchable.init_bindings):
        if name not in dispatchable.tensors:  # an array of tensors bound with more resources than it has
            raise InputError(f"{prefix}: {name} is bound, but the desc has no such tensor ({field_of(name)} has "
                             f"{sum(field_of(t) == field_of(name) for t in dispatchable.tensors)})")
    for name, desc in dispatchable.tensors.items():
        source, at_init = _binding_for(name, desc, command, dispatchable, prefix)
        tensors[name] = bind_tensor(name, desc, source, at_init, checked, resources, prefix)
    _check_aliasing(tensors, dispatchable, prefix)
    return PlannedDispatch(command, checked, tensors)


def _binding_for(name: str, desc: TensorDesc, command: DispatchCommand, dispatchable: Dispatchable, prefix: str):
    """The binding that supplies tensor `name`, and whether it is an initialisation binding.

    DxDispatch binds a dispatchable's own "bindings" when it initialises the operator; DirectML
    reads inputs there only when they are flagged OWNED_BY_DML, and such inputs must not be
    bound again at execution (DML_TENSOR_FLAGS documentation).
    """
    at_dispatch = command.bindings.get(name)
    at_init = dispatchable.init_bindings.get(name)
    if desc.owned_by_dml:
        if at_dispatch is not None:
            raise ValidationError(f"{prefix}: {name} is flagged OWNED_BY_DML, so DirectML takes it at initialisation "
                                  "only; bind it in the dispatchable's \"bindings\", not in the dispatch command")
        if at_init is None:
            raise InputError(f"{prefix}: {name} is flagged OWNED_BY_DML but the dispatchable's \"bindings\" do not bind it")
        return at_init, True
    if at_dispatch is not None:
        return at_dispatch, False
    if at_init is not None:
        raise ValidationError(f"{prefix}: {name} is bound only in the dispatchable's \"bindings\" (initialisation), "
                              "which DirectML reads only for inputs flagged OWNED_BY_DML; bind it in the dispatch command")
    raise InputError(f"{prefix}: nothing bound for required tensor {shown(name)}")


def bind_tensor(name: str, desc: TensorDesc, source: BindingSource, at_init: bool, checked: CheckedDispatchable,
                resources: dict, prefix: str) -> BoundTensor:
    """One tensor bound to a model resource (`resources`: the model's, by name), checked as DirectML checks a
    binding: not a deferred resource, the offset aligned, at least TotalTensorSizeInBytes bound."""
    resource = resources[source.resource]
    where = f"{prefix}: {name} bound to {shown(source.resource)}"
    if resource.deferred:
        raise InputError(f"{where}: the resource is deferred; a deferred resource receives an ONNX dispatchable's "
                         "output, and DirectML operators need a buffer")
    # The offset counts elements of the binding's element size, which defaults to the size of the
    # resource's initialValuesDataType, not the tensor's (Executor.cpp ResolveBindings, DmlDispatchable.cpp).
    # A 4-bit resource's elements are half bytes: its offset is elementOffset / 2 bytes (a whole number, as the
    # alignment below asks anyway).
    element_bits = 8 * source.element_size_in_bytes if source.element_size_in_bytes else resource.data_type.bits
    offset, part = divmod(source.element_offset * element_bits, 8)
    alignment = desc.base_offset_alignment or MINIMUM_BUFFER_TENSOR_ALIGNMENT
    if offset % alignment or part:
        size = f"{element_bits // 8} bytes" if element_bits >= 8 else f"{element_bits} bits"
        raise ValidationError(
            f"{where}: the binding starts at byte {offset}{'.5' if part else ''} (elementOffset "
            f"{source.element_offset} x {size}), which is not a multiple of {alignment}; DirectML needs binding "
            "offsets aligned to 16 bytes, or to the "
            "tensor's GuaranteedBaseOffsetAlignment")
    available = resource.size_in_bytes - offset
    needed = checked.total_sizes[name]
    if available < needed:
        raise ValidationError(
            f"{where}: {max(available, 0)} bytes are bound (buffer of {resource.size_in_bytes} bytes from byte {offset}), "
            f"but the tensor's TotalTensorSizeInBytes is {needed}")
    return BoundTensor(desc, source.resource, offset, checked.strides[name], at_init)


def _view(tensor: BoundTensor) -> tuple[int, tuple, tuple, int]:
    bits = tensor.desc.data_type.bits
    return tensor.offset_in_bytes * 8, tensor.desc.sizes, tensor.strides, bits


def _same_view(a: BoundTensor, b: BoundTensor) -> bool:
    return (a.resource == b.resource and a.offset_in_bytes == b.offset_in_bytes and a.strides == b.strides
            and a.desc.sizes == b.desc.sizes and a.desc.data_type == b.desc.data_type)


def tensors_overlap(a: BoundTensor, b: BoundTensor) -> bool | None:
    """Whether two bound tensors share a byte (exactly aliased views included), by arithmetic on their offsets,
    Sizes and Strides (dmlcli.io.overlap); None where that could not be decided within bounded work."""
    if a.resource != b.resource:
        return False
    if _same_view(a, b):
        return True
    return views_overlap(_view(a), _view(b))


def sharing(overlapping: bool | None) -> str:
    """How a message says tensors_overlap's answer: "share", or "may share" where it was not decided."""
    return "may share" if overlapping is None else "share"


def _check_aliasing(tensors: dict[str, BoundTensor], dispatchable: Dispatchable, prefix: str) -> None:
    """An output may alias inputs exactly, and only for operators whose pages permit in-place execution;
    several outputs (SPLIT's) may not share bytes with each other."""
    op = dispatchable.operator
    outputs = [name for name in tensors if field_of(name) in op.outputs]
    for output_name in outputs:
        _check_output_aliasing(tensors, output_name, op, prefix)
    for position, first in enumerate(outputs):
        for second in outputs[position + 1:]:
            overlapping = tensors_overlap(tensors[first], tensors[second])
            if overlapping is not False:
                raise ValidationError(f"{prefix}: {first} and {second} {sharing(overlapping)} bytes of buffer "
                                      f"{shown(tensors[first].resource)}; each output needs its own memory")


def _check_output_aliasing(tensors: dict[str, BoundTensor], output_name: str, op, prefix: str) -> None:
    output = tensors[output_name]
    for name in [name for name in tensors if field_of(name) in op.inputs]:
        tensor = tensors.get(name)
        if tensor is None or tensor.resource != output.resource or tensor.at_initialisation:
            continue
        overlapping = tensors_overlap(tensor, output)
        if overlapping is False:
            continue
        verb = "may overlap" if overlapping is None else "overlaps"
        if not op.in_place:
            raise ValidationError(
                f"{prefix}: {output_name} {verb} {name} in buffer {shown(output.resource)}; DirectML documents "
                f"in-place execution (the output aliasing an input) for some operators, and {op.name} is not one of them")
        if not _same_view(tensor, output):
            raise ValidationError(
                f"{prefix}: {output_name} {'may partly overlap' if overlapping is None else 'partly overlaps'} {name} "
                f"in buffer {shown(output.resource)}; {op.name} may run in place, but only with the output aliasing "
                "the input exactly (same offset, Sizes and Strides)")
