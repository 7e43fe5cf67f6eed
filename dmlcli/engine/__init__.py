"""One path for every call: resolve, validate, check room, choose the backend, execute, run hooks, report.

A call is one value, a `Request` (the operator, its parameters, the feature level, broadcasting,
the output's type and, from a DxDispatch desc, its Sizes). `plan` validates it against the inputs'
data types and shapes; `execute` runs a validated call on whole tensors; `run_files` streams .npy
files in constant memory; `run_sources` is what the command line's `run` does with its arguments.
The Python API (api.py), every command and `dispatch` go through these functions, and the
operator's hooks (such as the shift-count check) run on every route, so the warnings read the same.
Results come back as an `Outcome` with their warnings: callers decide how to show them.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from ..data_types import DataType, from_numpy, parse_data_type
from ..errors import InputError, quoted
from ..scalars import is_digits
# Imported here, not in the functions that use them: every run needs them, and an import statement in a function
# costs each call a few microseconds (issue 23).
from ..backends import get_backend
from ..backends.float_rules import parse_float_rules, with_float_rules
from ..feature_levels import FeatureLevel, parse_feature_level
from ..io.room import check_room_for_output
from ..io.targets import is_stdout
from .. import operators as table
from ..operators import Operator, find_operator
from ..operators.table.options import option_flag
from ..calls.validation import Call, Verdict, build_call, check, named_outputs
from ..records import Frozen

if TYPE_CHECKING:  # annotations only: the parameter kinds load with the first operator that has parameters
    from ..operators.table.parameters import Parameter


class Request(Frozen):
    """One call, before its tensors are known."""

    operator: Operator
    feature_level: FeatureLevel
    options: Mapping[str, object]  # parameter values by API keyword (infinity_mode=...); None: the default
    desc_fields: Mapping[str, object] | None  # or by DESC field name, as a DxDispatch desc writes them
    broadcast: bool
    output_type: DataType | None
    output_shape: tuple[int, ...] | None
    float_rules: str  # "ieee" (default) or "d3d": Direct3D's float rules (backends/float_rules.py)
    output_shapes: Mapping[str, object] | None  # several outputs' Sizes by name (a DxDispatch desc's)
    allow_tf32: bool  # --allow-tf32: TF32 products allowed (Operator.tf32_products, backends/tf32.py)
    # The outputs the call asks for, by DESC field name in DESC order (outputs=, --outputs, the output tensors a
    # DxDispatch desc has): the optional ones it leaves out are neither computed nor returned. None: every output
    # the call can give.
    outputs: tuple[str, ...] | None
    # What tells this request apart from every other whose verdicts could differ (see _frozen), taken when it was
    # made; None where a value has no such key: each call is then validated afresh.
    key: tuple | None

    def __init__(self, operator: Operator, feature_level: FeatureLevel, options: Mapping[str, object],
                 desc_fields: Mapping[str, object] | None = None, broadcast: bool = False,
                 output_type: DataType | None = None, output_shape: tuple[int, ...] | None = None,
                 float_rules: str = "ieee", output_shapes: Mapping[str, object] | None = None, allow_tf32: bool = False,
                 key: tuple | None = None, outputs: tuple[str, ...] | None = None) -> None:
        vars(self).update(operator=operator, feature_level=feature_level, options=options, desc_fields=desc_fields,
                          broadcast=broadcast, output_type=output_type, output_shape=output_shape,
                          float_rules=float_rules, output_shapes=output_shapes, allow_tf32=allow_tf32, outputs=outputs,
                          key=key)

    def typed_parameters(self, data_types: Mapping[str, DataType]) -> dict[str, object]:
        """Each parameter's typed value by DESC field name (what both backends receive)."""
        typed = {}
        for parameter in self.operator.parameters:
            if self.desc_fields is not None:
                typed[parameter.field] = parameter.parse_desc(self.desc_fields.get(parameter.field), data_types)
            else:
                typed[parameter.field] = parameter.parse(self.options, data_types)
        return typed


class Outcome(Frozen):
    """A finished call: the output (None when it went to a file), the verdict, the backend, the warnings."""

    output: np.ndarray | None
    verdict: Verdict
    backend: str
    warnings: tuple[str, ...]
    inputs: tuple[np.ndarray, ...]  # the arrays a whole-tensor run was given (--save-case records them)
    outputs: tuple[np.ndarray, ...] | None  # every output, in DESC order (None: the one `output`)
    conversions: tuple  # the inputs --convert converted (io/convert.py's Conversion), for the caption

    def __init__(self, output: np.ndarray | None, verdict: Verdict, backend: str, warnings: tuple[str, ...] = (),
                 inputs: tuple[np.ndarray, ...] = (), outputs: tuple[np.ndarray, ...] | None = None,
                 conversions: tuple = ()) -> None:
        vars(self).update(output=output, verdict=verdict, backend=backend, warnings=warnings, inputs=inputs,
                          outputs=outputs, conversions=conversions)

    @property
    def all_outputs(self) -> tuple:
        """Every output array in DESC order (one for most operators)."""
        return self.outputs if self.outputs is not None else (self.output,)


def request(op, *, feature_level=None, broadcast: bool = False, output_dtype=None, output_shape=None,
            desc_fields: Mapping[str, object] | None = None, float_rules=None, output_shapes=None,
            allow_tf32: bool = False, outputs=None, **options) -> Request:
    """Resolve a call's operator, level, output type and parameters (not yet their values' types). `outputs`: the
    output names the call asks for (validation.named_outputs), None for every output it can give."""
    if not isinstance(allow_tf32, bool):  # a truthy string such as "false" must not turn TF32 on
        raise InputError(f"allow_tf32 must be True or False (found {quoted(repr(allow_tf32))})")
    operator = find_operator(op)
    _check_options(operator, options)
    output_type = None if output_dtype is None else data_type_of(output_dtype)
    if broadcast and not operator.is_elementwise and operator.input_broadcast is None:
        raise InputError(_not_broadcast(operator))
    level = parse_feature_level(feature_level)
    shape = None if output_shape is None else parse_shape(output_shape, "--output-shape")
    rules = parse_float_rules(float_rules)
    asked = named_outputs(operator, outputs)
    try:  # the values as they are now: the key a verdict is kept under (see plan)
        key = (operator, level, bool(broadcast), output_type, shape, rules, allow_tf32, _frozen(options),
               _frozen(desc_fields), _frozen(output_shapes), asked)
    except _Unkeyed:
        key = None
    return Request(operator, level, dict(options), desc_fields, bool(broadcast), output_type, shape, rules,
                   output_shapes, allow_tf32, key, asked)


def _not_broadcast(operator: Operator) -> str:
    """Why --broadcast is refused for `operator`, and which shaped operators take it (Operator.input_broadcast)."""
    takers = ", ".join(op.name for op in table.OPERATORS if op.input_broadcast is not None)
    return (f"{operator.name}'s inputs are not broadcast: DirectML reads them at their own Sizes (--broadcast is for "
            f"the element-wise operators and {takers})")


def parse_shape(value, where: str) -> tuple[int, ...]:
    """Sizes given as a sequence of integers or as text: 2,3,4 or [2, 3, 4]."""
    if isinstance(value, str):
        text = value.strip().strip("[]()")
        items = [item.strip() for item in text.split(",")] if text else []
    else:
        try:
            items = list(value)
        except TypeError:
            raise InputError(f"{where} must be sizes such as 2,3,4 (found {quoted(str(value))})") from None
    sizes = []
    for item in items:
        text = str(item).strip()
        if isinstance(item, bool) or not is_digits(text) or len(text) > 12:
            raise InputError(f"{where}: {quoted(text)} is not a size (a whole number from 0)")
        sizes.append(int(text))
    if not 1 <= len(sizes) <= 8:
        raise InputError(f"{where} has {len(sizes)} sizes; DirectML tensors have 1 to 8 dimensions")
    return tuple(sizes)


def _check_options(operator: Operator, options: Mapping[str, object]) -> None:
    """Unknown keywords are errors; another operator's parameter is one too, unless None or its default.

    (So that one call site may serve several operators, as `infinity_mode="either"` always could.)
    """
    own = operator.options
    for option, value in options.items():
        if option in own or value is None:
            continue
        owner = table.option_owner(option)
        if owner is None:
            raise InputError(f"{operator.name}: unknown parameter {quoted(option)} (it takes "
                             f"{', '.join(own) or 'no parameters'})")
        if not _is_default(owner, option, value):
            raise InputError(f"{operator.name} has no {option_flag(option)[2:]} parameter")


def _is_default(parameter: Parameter, option: str, value) -> bool:
    try:
        return parameter.describe(parameter.parse({option: value}, {})) == parameter.describe_default()
    except (InputError, KeyError):
        return False


def data_type_of(value) -> DataType:
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        return parse_data_type(value)
    return from_numpy(np.dtype(value))


# ---------------------------------------------------------------- validate


def plan(req: Request, inputs: Sequence[tuple[DataType, tuple[int, ...]]],
         input_names: Sequence[str] | None = None) -> Verdict:
    """Validate the call for inputs of these data types and shapes (no data needed). `input_names`: which
    inputs they are, where the caller knows (a DxDispatch desc that leaves out some optional inputs)."""
    key = _plan_key(req, inputs, input_names)
    if key is not None:
        known = _VERDICTS.get(key)
        if known is not None:
            return known
    call: Call = build_call(req.operator, inputs, output_type=req.output_type, output_shape=req.output_shape,
                            output_shapes=req.output_shapes, broadcast=req.broadcast,
                            feature_level=req.feature_level, parse_parameters=req.typed_parameters,
                            input_names=input_names, outputs=req.outputs)
    if (call.float_rules, call.allow_tf32) != (req.float_rules, req.allow_tf32):
        call = Call(call.operator, call.tensors, call.parameters, call.broadcast, call.absent, req.float_rules,
                    req.allow_tf32)
    verdict = check(call, req.feature_level)
    if key is not None:
        if len(_VERDICTS) >= _VERDICTS_LIMIT:
            _VERDICTS.clear()
        _VERDICTS[key] = verdict
    return verdict


# A verdict depends on nothing but the request and the inputs' data types and Sizes: the operator entry (held
# by the key, so its identity is not reused), the level, the parameters' values, the output's type and Sizes.
# A program that runs one operator on like tensors again and again (a loop of dmlcli.run, a suite's cases, a
# benchmark) validated each call from scratch: build_call, the shape rule, the support rows, about 60 µs, the
# larger part of a small call's fixed cost (issue 23). Calls that fail validation are not kept (each raises anew).
_VERDICTS: dict[tuple, Verdict] = {}
_VERDICTS_LIMIT = 1024


def _plan_key(req: Request, inputs, input_names) -> tuple | None:
    """A hashable key that tells apart every pair of calls whose verdicts could differ; None where the request
    has no key (a value without an exact one: an array as a parameter, an object of another kind)."""
    if req.key is None:
        return None
    try:
        described = tuple(None if given is None else (given[0], tuple(given[1])) for given in inputs)
        key = (req.key, described, None if input_names is None else tuple(input_names))
        hash(key)
    except TypeError:  # an unhashable data type or size: not ours to judge here, build_call words it
        return None
    return key


_PLAIN_KINDS = frozenset((type(None), bool, int, str))  # keyed as they are, with their type


class _Unkeyed(Exception):
    """A parameter value _frozen cannot key exactly."""


# Deeper parameter values (a model's fused activation desc nested 300 deep) are not kept as keys: a call with them
# is planned without the cache, and its validation says what is wrong with them.
_FROZEN_DEPTH = 32


def _frozen(value, depth: int = 0):
    """`value` as a hashable key that keeps its type and its exact value: 1, 1.0, True, numpy.float32(1) and
    -0.0 against 0.0 read differently as parameters, so they must not share a key (equal Python values do)."""
    if depth > _FROZEN_DEPTH:
        raise _Unkeyed
    kind = type(value)
    if kind in _PLAIN_KINDS:
        return (kind, value)
    if kind is float:
        return (kind, value.hex())  # -0.0 and 0.0 differ, a NaN equals itself
    if isinstance(value, np.generic):
        return (kind, value.tobytes())
    if kind is list or kind is tuple:
        return (kind, tuple(_frozen(item, depth + 1) for item in value))
    if kind is dict or isinstance(value, Mapping):
        return (dict, tuple((name, _frozen(item, depth + 1)) for name, item in value.items()))
    if isinstance(value, (DataType, FeatureLevel, Operator, np.dtype, type)):  # immutable and hashable
        return (kind, value)
    raise _Unkeyed


def as_input_array(value, position: int) -> np.ndarray | None:
    if value is None:
        return None  # an optional input left out in the middle of the list (validation checks it may be)
    array = np.asarray(value)
    try:
        from_numpy(array.dtype)
    except InputError as error:
        raise InputError(f"input {position}: {error}") from None
    return array


def plan_arrays(req: Request, arrays: Sequence[np.ndarray | None]) -> Verdict:
    return plan(req, [None if a is None else (from_numpy(a.dtype), a.shape) for a in arrays])


# ---------------------------------------------------------------- hooks


class HookTally:
    """The operator's hooks, counted over whole tensors, chunks or repeated dispatches."""

    def __init__(self, call: Call):
        self.call = call
        self.counts = [0] * len(call.operator.hooks)
        self.elements = 0

    def add(self, arrays: Sequence[np.ndarray], out_shape) -> None:
        """Count one set of inputs; `out_shape` broadcasts them (None: they are already the output's shape)."""
        hooks = self.call.operator.hooks
        shape = tuple(out_shape) if out_shape is not None else np.shape(arrays[0])
        self.elements += math.prod(shape)  # np.prod costs a run 0.1 ms once its code is out of the caches
        if not hooks:
            return
        by_name = dict(zip(self.call.operator.inputs, arrays))
        for index, hook in enumerate(hooks):
            self.counts[index] += hook.count(by_name, self.call.data_types, out_shape)

    def warnings(self, prefix: str = "") -> tuple[str, ...]:
        return tuple(prefix + hook.message(self.call.operator.name, count, self.elements, self.call.data_types)
                     for hook, count in zip(self.call.operator.hooks, self.counts) if count)


# ---------------------------------------------------------------- run


def choose_backend(backend, float_rules: str = "ieee", allow_tf32: bool = False):
    """A backend object for a name ("cpu", "gpu", "auto"), or the object itself, under `float_rules`, allowed
    TF32 products where `allow_tf32` (the TF32 wrapper innermost: it speaks to the backend itself)."""
    if isinstance(backend, str):
        backend = get_backend(backend)
    if allow_tf32:  # imported only then: most runs never load it
        from ..backends.tf32 import with_tf32

        backend = with_tf32(backend, allow_tf32)
    return with_float_rules(backend, float_rules)


def execute(verdict: Verdict, arrays: Sequence[np.ndarray], backend, *, tally: HookTally | None = None,
            recorded: tuple = ()) -> Outcome:
    """Run a validated call on whole tensors. With `tally`, hooks are counted there (the caller reports).
    `recorded`: the Outcome's `inputs` (given here rather than by a copy of the Outcome, which costs each run
    several microseconds)."""
    call = verdict.call
    engine = choose_backend(backend, call.float_rules, call.allow_tf32)
    out = call.output
    arrays = call.complete(arrays)
    if not call.operator.is_elementwise:
        outputs = tuple(engine.execute_shaped(call.operator, arrays, call.outputs, call.parameters))
        return Outcome(outputs[0], verdict, engine.name, (), recorded, outputs)
    own_tally = tally or HookTally(call)
    own_tally.add(arrays, out.shape)  # before the kernel: an in-place caller may overwrite the inputs
    output = engine.execute(call.operator, arrays, out.shape, out.data_type.numpy_dtype, call.parameters)
    return Outcome(output, verdict, engine.name, () if tally is not None else own_tally.warnings(), recorded)


def run(req: Request, arrays: Sequence, *, backend="cpu", output: str | Sequence[str] | None = None,
        before_execute: Callable[[Verdict], None] | None = None,
        read_mapped: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None,
        output_format: str | None = None, progress=None) -> Outcome:
    """Validate, check room for the output, execute and (with `output`, a path or '-', or one per output
    tensor, or an .npz for all) write the result.

    `read_mapped` turns memory-mapped inputs into arrays in memory, once the checks have passed.
    `output_format` ("npy" or "json") names the output file's format whatever its extension.
    `progress` (display/progress.py's factory): a kernel whose work is far past its data shows how far it got.
    """
    targets = output_targets(output)
    # One target on stdout fits any outputs (one, or several as one JSON object): outputs.py is not needed.
    checked = bool(targets) and not (len(targets) == 1 and is_stdout(targets[0]))
    if checked:
        from ..io.outputs import check_targets

        check_targets(targets, None, output_format)
    arrays = [as_input_array(a, i + 1) for i, a in enumerate(arrays)]
    verdict = plan_arrays(req, arrays)
    out = verdict.call.output
    names = [tensor.name for tensor in verdict.call.outputs]
    if checked:
        check_targets(targets, names, output_format)
    # Before any work; the inputs count too, as they are read into memory (or, mapped, paged in) to run.
    # A shaped operator's other outputs and its kernel's scratch are counted with them.
    input_bytes = sum(int(a.nbytes) for a in arrays if a is not None)
    if not req.operator.is_elementwise:
        input_bytes += sum(tensor_bytes(t) for t in verdict.call.outputs[1:]) + kernel_scratch_bytes(verdict.call,
                                                                                                     arrays)
    check_room_for_output(targets[0] if len(targets) == 1 else None, out.shape, out.data_type.numpy_dtype,
                          in_memory=True, input_bytes=input_bytes, output_format=output_format)
    if before_execute is not None:
        before_execute(verdict)
    if read_mapped is not None:
        arrays = read_mapped(arrays)
    with metered_work(verdict.call, progress):
        outcome = execute(verdict, arrays, backend, recorded=tuple(arrays))
    if targets:
        write_results(outcome, names, targets, output_format)
    return outcome


# The bounded working sets of the blocked shaped kernels: convolution's column buffer (32 MiB) and its tile's
# product, attention's scores (64 MiB), resampling's blocks (8 MiB). A block is never larger than a few times the
# call's own tensors, so a small call counts that much instead (a 1 MiB call needs no 64 MiB to be let run).
KERNEL_WORKING_BYTES = 64 << 20


def kernel_scratch_bytes(call: Call, arrays: Sequence) -> int:
    """What a shaped kernel holds besides its inputs and outputs: its entry's estimate (Operator.scratch: a padded
    copy of the input, FLOAT32 sums) where it has one, else about twice its largest input as FLOAT64 work; and the
    blocked kernels' bounded working set."""
    if call.operator.scratch is not None:
        own = call.operator.scratch(call)
    else:
        own = 2 * max([int(a.size) * 8 for a in arrays if a is not None] + [0])
    held = sum(int(a.nbytes) for a in arrays if a is not None) + sum(tensor_bytes(t) for t in call.outputs)
    return own + min(KERNEL_WORKING_BYTES, 4 * held)


def work_reads(call: Call) -> int | None:
    """The element reads the call's kernel makes where its entry says (Operator.work), else None."""
    return None if call.operator.work is None else int(call.operator.work(call))


def tensor_elements(call: Call) -> int:
    """The elements of every tensor of the call, inputs and outputs (what `work_reads` is measured against)."""
    return sum(math.prod(tensor.shape) for tensor in call.tensors.values())


# A run whose kernel reads this many times its tensors' elements shows progress (where `progress` shows any):
# its time goes with the reads, not with the data a streamed run's bar counts.
WORK_FAR_PAST_DATA = 64


def metered_work(call: Call, progress):
    """Around a kernel: where the call's reads are far past its data and `progress` is given, a progress bar
    advanced by the kernel (operators/numerics/work.py) in bytes read (the reads times the input's element size,
    so the bar's units are a streamed run's); else nothing."""
    reads = work_reads(call) if progress is not None else None
    if reads is None or reads < WORK_FAR_PAST_DATA * tensor_elements(call):
        return contextlib.nullcontext()
    return _metered(progress, reads, call.inputs[0].data_type.numpy_dtype.itemsize)


@contextlib.contextmanager
def _metered(progress, reads: int, item: int):
    from ..operators.numerics.work import metered

    with progress(reads * item) as advance, metered(lambda done: advance(done * item)):
        yield


def tensor_bytes(tensor) -> int:
    return int(np.prod(tensor.shape, dtype=np.int64)) * tensor.data_type.numpy_dtype.itemsize


def output_targets(output: str | Sequence[str] | None) -> list[str]:
    if output is None:
        return []
    # os.PathLike stands for pathlib.Path (which a run to stdout does not import).
    return [output] if isinstance(output, (str, os.PathLike)) else [str(target) for target in output]


def write_results(outcome: Outcome, names: Sequence[str], targets: Sequence[str],
                  output_format: str | None = None) -> None:
    """The outcome's outputs written to their targets: one as ever, several one per target or as one .npz."""
    if len(names) == 1 and len(targets) == 1 and (output_format is not None or not targets[0].lower().endswith(".npz")):
        from ..io.atomic import write_output

        write_output(outcome.output, str(targets[0]), output_format=output_format)
        return
    from ..io.outputs import write_outputs

    write_outputs(outcome.all_outputs, names, [str(t) for t in targets])


def run_files(req: Request, sources: Sequence[str], output: str, *, dtype: DataType | None = None, backend="cpu",
              chunk_bytes: int | None = None, progress=None, output_format: str | None = None) -> Outcome:
    """Stream .npy `sources` (or .npz arrays) into the .npy `output` in constant memory, validated from the
    headers alone; into JSON text instead where `output` is a .json file (or any file with `output_format`
    "json") or JSON on stdout (-, -.json), as constant in memory."""
    from pathlib import Path

    from . import streaming
    from ..io.atomic import check_output_path
    from ..io.room import check_room_for_output
    from ..io.targets import written_suffix

    check_output_path(output, output_format)
    inputs = [streaming.open_input(source, label=f"input {i + 1}", dtype=dtype) for i, source in enumerate(sources)]
    verdict = plan(req, [(from_numpy(x.dtype), x.shape) for x in inputs])
    out = verdict.call.output
    check_room_for_output(output, out.shape, out.data_type.numpy_dtype, in_memory=False,  # disk space, before work
                          output_format=output_format)
    held = streaming.held_bytes(inputs, out.shape, in_order=all(x.stored_in_c_order for x in inputs))
    if held:  # .npz arrays the boxes cannot take in order are inflated whole: room for them, before any work
        from ..io.room import check_room_to_read

        check_room_to_read(held, where="the .npz inputs that are broadcast or in Fortran order")
    engine = choose_backend(backend, verdict.call.float_rules)
    # Each backend says what chunk size suits it: a GPU wants big transfers, the CPU small buffers.
    size = chunk_bytes or streaming.chunk_bytes_from_environment(
        getattr(engine, "preferred_chunk_bytes", streaming.DEFAULT_CHUNK_BYTES))
    tally = HookTally(verdict.call)
    if written_suffix(output, output_format) == ".json":
        streaming.stream_json(verdict.call, inputs, output, engine, chunk_bytes=size, progress=progress, tally=tally)
    else:
        from . import file_pipeline  # the GPU's overlapped file path, which builds on streaming.py

        streaming.stream(verdict.call, inputs, Path(output), engine, chunk_bytes=size, progress=progress,
                         tally=tally, pipeline=file_pipeline)
    return Outcome(None, verdict, getattr(engine, "name", "custom"), tally.warnings())


def run_shaped_files(req: Request, sources: Sequence[str], output: str, *, dtype: DataType | None = None,
                     backend="cpu", chunk_bytes: int | None = None, progress=None) -> Outcome | None:
    """A shaped operator from .npy files into a .npy file in constant memory, where its call can be cut into
    pieces (REDUCE over leading or trailing axes, JOIN along axis 0: see streaming_shaped.py); None where it
    cannot, and the run goes on in memory."""
    from pathlib import Path

    from . import streaming
    from ..io.room import available_memory, check_room_for_output
    from .streaming_shaped import memory_bound, stream_shaped, streamable_layout

    inputs = [streaming.open_input(source, label=f"input {i + 1}", dtype=dtype) for i, source in enumerate(sources)]
    verdict = plan(req, [(from_numpy(x.dtype), x.shape) for x in inputs])
    layout = streamable_layout(verdict.call, inputs)
    if layout is None or len(verdict.call.outputs) != 1:
        return None
    out = verdict.call.output
    check_room_for_output(output, out.shape, out.data_type.numpy_dtype, in_memory=False)  # disk space, before work
    engine = choose_backend(backend, verdict.call.float_rules, verdict.call.allow_tf32)
    size = chunk_bytes or streaming.chunk_bytes_from_environment(streaming.DEFAULT_CHUNK_BYTES)
    needed, available = memory_bound(inputs, verdict.call, size), available_memory()
    if available is not None and needed > available:
        return None  # the in-memory path's room check words the refusal
    stream_shaped(verdict.call, layout, inputs, Path(output), engine, chunk_bytes=size, progress=progress)
    return Outcome(None, verdict, getattr(engine, "name", "custom"))


def read_sources(sources: Sequence[str], dtype: DataType | None, *, header_only: bool = False,
                 operator: Operator | None = None, bare_dtype: DataType | None = None) -> list[np.ndarray]:
    """The inputs read; a bare list with no --dtype takes the type of the other inputs (see type_bare_lists).

    `header_only` (validate): a .npz array's data are not read (.npy files are mapped anyway).
    `operator` names the tensor a bare scalar stands for, in the words of the 0-D rule.
    `bare_dtype`: the type of bare lists alone, where typed inputs need not agree with it (they are converted).
    """
    from ..errors import ValidationError
    from ..io.json_tensor import BareListWithoutType, BareScalar, type_bare_lists
    from ..io.sources import check_stdin_read_once, read_tensor_and_format

    check_stdin_read_once(sources)
    labels = [f"input {i + 1}" for i in range(len(sources))]
    arrays: list = []
    pending = []
    for position, (source, label) in enumerate(zip(sources, labels)):
        if _leaves_out(operator, source):
            arrays.append(None)  # validation checks that this input may be left out
            continue
        try:
            arrays.append(read_tensor_and_format(source, label=label, dtype=dtype, header_only=header_only,
                                                 bare_dtype=bare_dtype)[0])
        except BareListWithoutType as bare:
            arrays.append(None)
            pending.append((position, bare))
        except BareScalar as scalar:
            if operator is None or position >= len(operator.inputs):
                raise
            raise ValidationError(f"{operator.name}: {operator.inputs[position]} is 0-D (the bare scalar "
                                  f"{scalar.shown}, {label}); DirectML tensors have 1 to 8 dimensions: write "
                                  f"[{scalar.shown}] for a one-element tensor") from None
    if pending:
        type_bare_lists(arrays, pending, labels)
    return arrays


def _leaves_out(operator: Operator | None, source: str) -> bool:
    """`none` in place of an input: an optional input left out (RNN's BiasTensor before its HiddenInitTensor)."""
    return operator is not None and bool(operator.optional_inputs) and str(source).strip().lower() == "none"


def run_sources(req: Request, sources: Sequence[str], *, output: str | None = None, dtype: DataType | None = None,
                backend="cpu", progress=None, stream: bool = True,
                before_execute: Callable[[Verdict], None] | None = None, dask=None,
                output_format: str | None = None, convert: Sequence[DataType] = ()) -> Outcome:
    """A run from input arguments (.npy/.json files, '-', inline JSON, Zarr stores): on Dask where a Zarr
    store is involved or `dask` (DaskOptions) asks for it, streamed where it can be (.npy files in, a .npy
    file out, `stream` allowed), else read whole. `output_format` ("npy" or "json", run's --format) names
    the output file's format whatever its extension. `convert` (--convert): the types typed inputs are converted
    to (io/convert.py); such a run reads its inputs whole."""
    if isinstance(output, (list, tuple)) and len(output) == 1:
        output = output[0]  # one -o, as the command line gives it
    if convert:
        if _wants_dask(sources, output, dask):
            raise InputError("--convert converts inputs read whole: not a run on Dask or with Zarr stores (convert "
                             "the store's data instead)")
        return _run_converted(req, sources, convert, dtype, backend=backend, output=output,
                              before_execute=before_execute, output_format=output_format, progress=progress)
    if _wants_dask(sources, output, dask):
        return run_dask(req, sources, output=output, dtype=dtype, backend=backend, progress=progress,
                        options=dask, before_execute=before_execute, output_format=output_format)
    if dask is not None and dask.chunks is not None:
        raise InputError("--chunks sets the chunk shape of a Zarr output (-o out.zarr) or of a run on Dask "
                         "(--scheduler, --workers); this run has neither")
    targets = output_targets(output)
    if len(targets) == 1 and (output_format is not None or not targets[0].lower().endswith(".npz")):
        from ..io.atomic import check_output_path

        target = targets[0]
        check_output_path(target, output_format)
        # Only .npy files and .npz arrays stream (a cheap test first: streaming.py is imported only for them).
        if stream and _may_stream(sources):
            from .streaming import is_streamable, streams_as_json

            if req.operator.is_elementwise and (is_streamable(sources, target, output_format)
                                                or streams_as_json(sources, target, output_format)):
                return run_files(req, sources, target, dtype=dtype, backend=backend, progress=progress,
                                 output_format=output_format)
            if not req.operator.is_elementwise and is_streamable(sources, target, output_format):
                streamed = run_shaped_files(req, sources, target, dtype=dtype, backend=backend, progress=progress)
                if streamed is not None:
                    return streamed
    # header_only: .npz arrays are checked from their headers with the call and the room for it, and
    # inflated only then (a small file claiming 2^32 elements is refused without inflating a byte).
    return run(req, read_sources(sources, dtype, header_only=True, operator=req.operator), backend=backend,
               output=output, before_execute=before_execute,
               read_mapped=lambda arrays: _read_mapped_sources(arrays, sources, dtype), output_format=output_format,
               progress=progress)


def _run_converted(req: Request, sources: Sequence[str], targets: Sequence[DataType], dtype: DataType | None,
                   **options) -> Outcome:
    """A run whose typed inputs are converted first (--convert): validated at the converted types (and the room
    for them checked) from the inputs' headers, then read and converted; the Outcome names the conversions."""
    from ..io.convert import convert_inputs
    from ..records import replace

    held, typed, labels = _converted_headers(req, sources, targets, dtype)
    done: list = []

    def read_converted(_) -> list[np.ndarray]:
        arrays, conversions = convert_inputs(_read_mapped_sources(held, sources), targets, labels)
        done.extend(conversions)
        return arrays

    outcome = run(req, typed, read_mapped=read_converted, **options)
    return replace(outcome, conversions=tuple(done))


def _converted_headers(req: Request, sources: Sequence[str], targets: Sequence[DataType], dtype: DataType | None):
    """(the inputs as read from their headers, stand-ins of the converted types and the same Sizes, their labels);
    --dtype types the bare lists and must agree with the converted types."""
    from ..io.convert import converted_type

    held = read_sources(sources, None, header_only=True, operator=req.operator, bare_dtype=dtype)
    labels = [f"input {i + 1}" for i in range(len(sources))]
    typed = []
    for array, label in zip(held, labels):
        if array is None:
            typed.append(None)
            continue
        target = converted_type(from_numpy(array.dtype), targets)
        if dtype is not None and target != dtype:
            raise InputError(f"{label}: holds {from_numpy(array.dtype).name} (after --convert: {target.name}) but "
                             f"--dtype says {dtype.name}")
        typed.append(np.broadcast_to(np.zeros((), target.numpy_dtype), array.shape))
    return held, typed, labels


def _may_stream(sources: Sequence[str]) -> bool:
    """False where no source can be a .npy file or an .npz array (what is_streamable and streams_as_json need
    of every source): inline tensors, JSON files, stdin."""
    return bool(sources) and all(".np" in str(source).lower() for source in sources)


def _read_mapped_sources(arrays: Sequence[np.ndarray], sources: Sequence[str],
                         dtype: DataType | None = None) -> list[np.ndarray]:
    # .npy inputs are mapped while the call is checked (headers alone), then read before the run: a mapped
    # file that another program truncates during the run would end it by SIGBUS, a read says so in words.
    # .npz arrays were read from their headers alone: inflated now.
    from ..errors import quoted
    from ..io.npy import read_mapped
    from ..io.sources import is_npz_source, read_tensor

    return [None if array is None
            else read_tensor(source, label=f"input {i + 1}", dtype=dtype) if is_npz_source(source)
            else read_mapped(array, where=f"input {i + 1} {quoted(source)}")
            for i, (array, source) in enumerate(zip(arrays, sources))]


def plan_sources(req: Request, sources: Sequence[str], dtype: DataType | None,
                 convert: Sequence[DataType] = ()) -> Verdict:
    """Validate a call from input arguments (.npy inputs are mapped, not read; Zarr stores' metadata only), at the
    types `convert` (--convert) gives the typed inputs."""
    from ..io.zarr_names import is_zarr_source

    if convert:
        return plan_arrays(req, _converted_headers(req, sources, convert, dtype)[1])

    if any(is_zarr_source(source) for source in sources):
        from ..io.zarr_store import open_input

        arrays = [open_input(source, label=f"input {i + 1}", dtype=dtype) if is_zarr_source(source)
                  else read_sources([source], dtype, header_only=True, operator=req.operator)[0] for i, source in enumerate(sources)]
        return plan(req, [(from_numpy(np.dtype(a.dtype)), tuple(a.shape)) for a in arrays])
    return plan_arrays(req, read_sources(sources, dtype, header_only=True, operator=req.operator))


# ---------------------------------------------------------------- Dask


def _wants_dask(sources: Sequence[str], output: str | None, options) -> bool:
    from ..io.zarr_names import is_zarr_source

    return ((options is not None and options.requested) or any(is_zarr_source(s) for s in sources)
            or any(target != "-" and is_zarr_source(target) for target in output_targets(output)))


def run_dask(req: Request, sources: Sequence[str], *, output: str | None = None, dtype: DataType | None = None,
             backend="cpu", progress=None, options=None,
             before_execute: Callable[[Verdict], None] | None = None, output_format: str | None = None) -> Outcome:
    """A run on Dask: validated once from the inputs' metadata, then block by block on the chosen scheduler
    (distributed/); into a Zarr store chunk by chunk, or gathered for any other output."""
    from ..distributed import runner
    from ..distributed.settings import DaskOptions, require_dask
    from ..io.atomic import check_output_path, write_output
    from ..io.room import check_room_for_output
    from ..io.zarr_store import check_output_store

    require_dask()
    options = options or DaskOptions()
    to_store = runner.is_store(output)
    if to_store:
        check_output_store(output)
    elif output is not None:
        check_output_path(output, output_format)
    inputs = runner.open_inputs(sources, dtype=dtype, chunks=options.chunks)
    verdict = plan(req, [(from_numpy(np.dtype(x.array.dtype)), tuple(x.array.shape)) for x in inputs])
    out = verdict.call.output
    if not to_store:
        check_room_for_output(output, out.shape, out.data_type.numpy_dtype, in_memory=True,  # before any work
                              output_format=output_format)
    if before_execute is not None:
        before_execute(verdict)
    name = choose_backend(backend).name if backend == "auto" else str(backend)
    result, counts = runner.run(verdict.call, inputs, output, options=options, backend=name, progress=progress)
    if output is not None and not to_store:
        write_output(result, output, output_format=output_format)
    tally = HookTally(verdict.call)
    tally.counts, tally.elements = list(counts), int(np.prod(out.shape, dtype=np.int64))
    return Outcome(result, verdict, name, tally.warnings())
