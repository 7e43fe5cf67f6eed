"""What a plan works out once for a node and reuses on every later call with the same inputs, as ONNX Runtime's
DirectML provider compiles a graph once: the DirectML call (the table's conditions, the adapter's fields and
reshapes, the verdict, the executor's per-call choices) or a view's outputs.

A node qualifies where its table entry says which inputs' values it reads (Entry.value_inputs), those inputs are
constants of the plan, and everything the adapter (or view) gave is a view of an input or of a constant: every
other input is then read for its type, Sizes and Strides alone, so a later call whose inputs have the same (and
whose constant inputs are the same arrays) needs the same call. Its arrays are made again from the new inputs by
the views the adapter made: the input itself, a reshape of it, or the same Sizes and Strides at the same offset
in its memory. Any other call (other Sizes; --compare ort's reference values, which are not the plan's constants)
takes the general path, and so does a node whose adapter made a new array (a copy, a conversion, zeros): those
are made again on every call. On the GPU nothing is planned (the executor's device arrays are CuPy's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from ...calls.validation import Verdict
from ...suite.onnx.adapters import planned_finish
from .derived import Copied, Derived, composed
from ..executors import memory_owner

_MADE_AGAIN = (Derived, Copied)  # the planned arrays made of the call's inputs (the others are the plan's constants)


class Unplanned(Exception):
    """An array the plan cannot make again from the node's inputs alone (a new array, a view of two inputs)."""


@dataclass(frozen=True)
class Signature:
    """The inputs a node was planned on: each runtime input's position, type, Sizes and Strides, and each constant
    input (by position) itself."""

    runtime: tuple[tuple[int, np.dtype, tuple[int, ...], tuple[int, ...]], ...]
    constants: tuple[tuple[int, object], ...]

    def matches(self, inputs: Sequence) -> bool:
        for position, dtype, shape, strides in self.runtime:
            array = inputs[position]
            if not isinstance(array, np.ndarray) or array.dtype != dtype or array.shape != shape \
                    or array.strides != strides:
                return False
        for position, value in self.constants:
            if inputs[position] is not value:
                return False
        return True


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _view_of(array: np.ndarray, source: np.ndarray, position: int) -> Derived:
    """How `array`, a view of `source`'s memory, is made again from an input of source's type, Sizes and
    Strides."""
    if array is source:
        return Derived(position)
    if not source.flags.c_contiguous:
        raise Unplanned  # np.ndarray reads a buffer's memory C-ordered
    offset = _address(array) - _address(source)
    if offset == 0 and array.dtype == source.dtype and array.size == source.size and array.flags.c_contiguous:
        return Derived(position, array.shape)
    low = offset + sum(min(0, (n - 1) * s) for n, s in zip(array.shape, array.strides))
    high = offset + sum(max(0, (n - 1) * s) for n, s in zip(array.shape, array.strides)) + array.itemsize
    if array.size == 0 or low < 0 or high > source.nbytes:
        raise Unplanned  # not within the input's own memory (a view of what the input is a view of)
    return Derived(position, array.shape, array.strides, offset, array.dtype)


def derivation(array, inputs: Sequence, runtime: Sequence[int], constant: Sequence[int]):
    """What the plan keeps for one array an adapter or a view gave: None for None, the array itself where it is
    a view of a constant input (the same on every call), else a Derived from the runtime input it is a view of.
    Unplanned for anything else."""
    if array is None:
        return None
    if not isinstance(array, np.ndarray):
        raise Unplanned
    owner = memory_owner(array)
    sources = [position for position in runtime if memory_owner(inputs[position]) is owner]
    if sources:
        return _view_of(array, inputs[sources[0]], sources[0])
    if any(memory_owner(inputs[position]) is owner for position in constant):
        return array
    raise Unplanned


def planned_arrays(value_inputs: tuple[int, ...] | None, names: Sequence[str], inputs: Sequence,
                   constants: set[str], arrays: Sequence) -> tuple[Signature, tuple] | None:
    """The signature of a node's inputs and how `arrays` (what its adapter or view gave) are made from them, or
    None where the node cannot be planned (its entry does not say which values it reads, one of those is not a
    constant, an input is not a NumPy array, two inputs share memory, an array is not a view)."""
    if value_inputs is None:
        return None
    given = [position for position, name in enumerate(names) if name]
    constant = [position for position in given if names[position] in constants]
    runtime = [position for position in given if names[position] not in constants]
    if any(position in runtime for position in value_inputs):
        return None
    if not all(isinstance(inputs[position], np.ndarray) for position in given):
        return None
    owners = {}
    for position in runtime:
        owner = id(memory_owner(inputs[position]))
        if owners.setdefault(owner, names[position]) != names[position]:
            return None  # two inputs of one memory: which one an array is a view of is not told by the Sizes
    if any(id(memory_owner(inputs[position])) in owners for position in constant):
        return None
    try:
        made = tuple(derivation(array, inputs, runtime, constant) for array in arrays)
    except Unplanned:
        return None
    signature = Signature(tuple((p, inputs[p].dtype, inputs[p].shape, inputs[p].strides) for p in runtime),
                          tuple((p, inputs[p]) for p in constant))
    return signature, made


def constant_positions(made: tuple) -> frozenset[int]:
    """The positions of the planned arrays that are the plan's constants (the same array on every call)."""
    return frozenset(position for position, item in enumerate(made)
                     if item is not None and type(item) not in _MADE_AGAIN)


def made_again(made: tuple, inputs: Sequence) -> list:
    """The planned arrays for this call's inputs."""
    return [item.of(inputs) if type(item) in _MADE_AGAIN else item for item in made]


# A step run into a run's values: its outputs stored there by name (Step.advancer, planned_runner).
Advance = Callable[[dict], None]


def _maker(item, names: Sequence[str], sources: dict[int, tuple]) -> Callable[[dict], object]:
    """A function of the run's values that makes one planned array again: `item` as planned (None, a constant's
    array, or a Derived of the node's input at its position, read here by that input's name; `sources`: each
    runtime input's type and Sizes by position, as the signature holds them; a Copied: its view's array copied)."""
    if type(item) is Copied:
        return _copy_maker(item, _maker(item.source, names, sources))
    if type(item) is not Derived:
        return lambda values: item
    name, shape, strides, offset, dtype = names[item.position], item.shape, item.strides, item.offset, item.dtype
    if shape is None:
        return lambda values: values[name]
    if strides is None:
        return lambda values: values[name].reshape(shape)
    order = _transposition(item, *sources[item.position])
    if order is not None:  # a reshape's axes permuted (a Transpose's read): 0.7 us, where np.ndarray takes 1.7
        grouped, permutation = order
        return lambda values: values[name].reshape(grouped).transpose(permutation)
    return lambda values: np.ndarray(shape, dtype, buffer=values[name], offset=offset, strides=strides)


def _copy_maker(item: Copied, view: Callable[[dict], np.ndarray]) -> Callable[[dict], np.ndarray]:
    """A Copied array's maker: `view` (its source's maker) copied C-ordered, then its `then` made of the copy."""
    then = item.then
    if then is None or then.shape is None:
        return lambda values: view(values).copy()
    if then.strides is None:
        shape = then.shape
        return lambda values: view(values).copy().reshape(shape)
    return lambda values: then.on(view(values).copy())


def _transposition(item: Derived, dtype: np.dtype, source_shape: tuple[int, ...]
                   ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(Sizes, permutation) such that a C-ordered input of `source_shape` reshaped to those Sizes and transposed by
    that permutation is the view `item` (its Sizes and Strides exactly, at offset 0); None where there are none."""
    if item.offset != 0 or item.dtype != dtype or 0 in item.strides:
        return None
    # C order: the larger Strides first; a size-1 axis after the others of its Stride (C order gives it the product
    # of the Sizes after it, which a size-1 axis leaves as it is)
    by_stride = sorted(range(len(item.shape)), key=lambda axis: (-item.strides[axis], item.shape[axis] == 1))
    grouped = tuple(item.shape[axis] for axis in by_stride)
    if math.prod(grouped) != math.prod(source_shape):
        return None
    permutation = tuple(int(axis) for axis in np.argsort(by_stride))
    probe = np.empty(source_shape, dtype).reshape(grouped).transpose(permutation)
    if probe.shape != item.shape or probe.strides != item.strides:
        return None
    return grouped, permutation


def planned_runner(wiring: Wiring, signature: Signature, made: tuple, work: Callable[[list], Sequence] | None,
                   otherwise: Advance, marked: object | None = None, verdict: Verdict | None = None
                   ) -> Advance | None:
    """The node as one function of the run's values, the only one a model's run calls for it (Wiring, Signature and
    made_again's steps for this node alone, its names and checks read once, the outputs stored in the values
    themselves), `work` the DirectML call and its finish (None for a view, whose arrays are its outputs). Where the
    inputs are not those it was planned for, nothing is done but `otherwise` (the general path). After a planned
    call, `marked`'s last_verdict is `verdict` (a DirectML step's: --compare reads its tolerance rule). None where
    ONNX's bool tensors pass (Wiring's views of them: the general path's own)."""
    if wiring.bool_inputs or wiring.bool_outputs:
        return None
    names = wiring.inputs
    runtime = tuple((names[position], dtype, shape, strides) for position, dtype, shape, strides in signature.runtime)
    constants = tuple((names[position], value) for position, value in signature.constants)
    sources = {position: (dtype, shape) for position, dtype, shape, _ in signature.runtime}
    makers = tuple(_maker(item, names, sources) for item in made)
    outputs = wiring.outputs
    ndarray = np.ndarray

    def run(values: dict) -> None:
        for name, dtype, shape, strides in runtime:
            array = values[name]
            if not isinstance(array, ndarray) or array.shape != shape or array.strides != strides \
                    or array.dtype != dtype:
                return otherwise(values)
        for name, value in constants:
            if values[name] is not value:
                return otherwise(values)
        arrays = [make(values) for make in makers]
        results = arrays if work is None else work(arrays)
        for index, name in outputs:
            values[name] = results[index]
        if marked is not None:
            marked.last_verdict = verdict
        return None

    return run


@dataclass(frozen=True)
class Wiring:
    """Where a planned node's inputs come from and where its results go: the node's input names (empty for one
    left out), the positions ONNX holds as bool and DirectML as UINT8 (the same bytes), and (result index, output
    name) pairs with the outputs to view as bool again."""

    inputs: tuple[str, ...]
    bool_inputs: tuple[int, ...]
    outputs: tuple[tuple[int, str], ...]
    bool_outputs: tuple[str, ...] = ()

    def inputs_of(self, values) -> list:
        inputs = [values[name] if name else None for name in self.inputs]
        for position in self.bool_inputs:
            if inputs[position].dtype == np.bool_:
                inputs[position] = inputs[position].view(np.uint8)
        return inputs

    def outputs_of(self, results: Sequence) -> dict:
        outputs = {name: results[index] for index, name in self.outputs}
        for name in self.bool_outputs:
            outputs[name] = outputs[name].view(np.bool_)
        return outputs


@dataclass(frozen=True)
class PlannedCall:
    """A node's DirectML call as planned: its DirectML inputs made from the node's inputs, the executor's
    compiled call, the adapter's finish and the verdict (the tolerance rule --compare reads)."""

    wiring: Wiring
    signature: Signature
    made: tuple
    execute: Callable[[list], tuple]
    finish: Callable[[Sequence[np.ndarray]], tuple]
    verdict: Verdict

    def run(self, values) -> dict | None:
        """The node's outputs by name, or None where its inputs are not those it was planned for."""
        inputs = self.wiring.inputs_of(values)
        if not self.signature.matches(inputs):
            return None
        return self.wiring.outputs_of(self.finish(self.execute(made_again(self.made, inputs))))

    def runner(self, otherwise: Advance, marked: object | None = None) -> Advance | None:
        """`run` as planned_runner makes it (None where it cannot), `otherwise` where the inputs are not the plan's,
        `marked` the step whose last_verdict is this verdict after a planned call; the adapter's finish as planned
        for the outputs' Sizes (left out where it hands them back as they are: the executor's compiled call is then
        the whole work)."""
        execute = self.execute
        finish = planned_finish(self.finish, [info.shape for info in self.verdict.call.outputs])
        work = execute if finish is None else (lambda arrays: finish(execute(arrays)))
        return planned_runner(self.wiring, self.signature, self.made, work, otherwise, marked, self.verdict)


@dataclass(frozen=True)
class PlannedView:
    """A view node's outputs as planned: each made from the node's inputs (or a constant)."""

    wiring: Wiring
    signature: Signature
    made: tuple

    def run(self, values) -> dict | None:
        inputs = self.wiring.inputs_of(values)
        if not self.signature.matches(inputs):
            return None
        return self.wiring.outputs_of(made_again(self.made, inputs))

    def runner(self, otherwise: Advance, marked: object | None = None) -> Advance | None:
        """`run` as planned_runner makes it (None where it cannot), `otherwise` where the inputs are not the plan's
        (`marked`: unused, a view has no verdict)."""
        return planned_runner(self.wiring, self.signature, self.made, None, otherwise)


def read_through(planned: PlannedCall | PlannedView, name: str, view: PlannedView
                 ) -> PlannedCall | PlannedView | None:
    """`planned` reading the view node's input wherever it read the view's output `name`: the arrays it makes of
    that output made of the view's input instead (the same arrays), and that input checked for the Sizes and Strides
    the view was planned on. The view is that input itself or a C-ordered reshape of it (a Reshape: a reshape or a
    view of its memory reads the same elements), or a C-ordered copy of a view of it (a node that moves data, as
    copies.py finds it: the reader's array is made of such a copy, or of one copy of the composed views where a
    chain of them is read through). A run that keeps only the model's outputs then need not make the view's output
    at all (lean.py). None where the view is neither, `planned` is not a runner's, or a chain's views do not compose
    into one."""
    if len(view.wiring.outputs) != 1 or view.wiring.bool_inputs or view.wiring.bool_outputs:
        return None
    (made,) = view.made
    if not (type(made) is Derived and made.strides is None) and not (type(made) is Copied and made.then is None):
        return None
    source = next((entry for entry in view.signature.runtime if entry[0] == made.position), None)
    if source is None or planned.wiring.bool_inputs or planned.wiring.bool_outputs:
        return None
    source_name = view.wiring.inputs[made.position]
    positions = {position for position, input_name in enumerate(planned.wiring.inputs) if input_name == name}
    if not positions:
        return None
    items = []
    for item in planned.made:
        if type(item) in _MADE_AGAIN and item.position in positions:
            item = _through(item, made, source[2], source[1])
            if item is None:
                return None
        items.append(item)
    inputs = tuple(source_name if position in positions else input_name
                   for position, input_name in enumerate(planned.wiring.inputs))
    runtime = tuple((entry[0],) + source[1:] if entry[0] in positions else entry for entry in planned.signature.runtime)
    return replace(planned, wiring=replace(planned.wiring, inputs=inputs),
                   signature=Signature(runtime, planned.signature.constants), made=tuple(items))


def _through(item: Derived | Copied, view: Derived | Copied, shape: tuple[int, ...], dtype: np.dtype
             ) -> Derived | Copied | None:
    """A planned array made of a view's output (`item`) made of the view's input (of `shape` and `dtype`, C-ordered)
    instead: `view` is the input itself or a reshape of it (a Derived), or a copy of a view of it (a Copied)."""
    if type(view) is Derived:
        if type(item) is Copied:
            return Copied(_through_reshape(item.source, view), item.then)
        return _through_reshape(item, view)
    source = replace(view.source, position=item.position)
    if type(item) is Copied:  # a copy of a view of the copy: one copy of the views composed, where they compose
        found = composed(item.source, source, shape, dtype)
        return None if found is None else Copied(found, item.then)
    if item.shape is None:  # the copy itself
        return Copied(source)
    return Copied(source, replace(item, position=0))


def _through_reshape(item: Derived, view: Derived) -> Derived:
    """A planned array made of a view's output (`item`) made of the view's input instead (`view`: the input itself
    or a C-ordered reshape of it)."""
    if item.shape is None and view.shape is not None:  # the output itself: the input's reshape
        return Derived(item.position, view.shape)
    return item  # a reshape, or the same Sizes and Strides at the same offset of the same memory
