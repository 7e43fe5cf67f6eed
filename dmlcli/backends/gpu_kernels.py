"""CUDA source for the GPU backend, generated from each operator's `cuda_body`.

This module only writes C++ text (it never imports CuPy), so the generated source can be
inspected and unit-tested anywhere. One CUDA module is built per operator; it holds two
kernels for every (input type, output type) pair the operator's support table allows:

* `dml_vec_<in>_<out>`: contiguous tensors of one shape. Each thread loads a small vector of
  elements per tensor (THREAD_BYTES, 16, of the narrowest tensor; LONG_THREAD_BYTES, 32, for some), so memory
  traffic comes in wide, coalesced transactions; the few elements past the last whole vector are done one by one.
  An approximate body on FLOAT16, and a body on byte lanes (below), takes its vector as 16-byte chunks a block's
  width apart (_vector_loads), so that each load and store of a warp covers consecutive bytes.
  Where every tensor's type is 1 byte and the entry gives a cuda_byte_lanes_body, the vector is read as 32-bit words
  and that body does four elements at once (BIT_COUNT, the shifts: one element at a time, the byte unpacking and
  repacking held them under the H200's copy).
* `dml_nd_<in>_<out>`: broadcast inputs, addressed through per-dimension strides (0 where an
  input is broadcast), for up to 8 dimensions.

Both kernels call one device function, `dml_apply`, made from the operator's body, so the two
paths cannot disagree (a byte-lanes body is a second one, which tests/test_gpu.py holds to the first's bits for
every byte and pair of bytes in every lane). Inputs arrive as their raw bits (the unsigned integer of their width):
native-encoding operators work on those bits directly; the others first turn the bits into the
value (FLOAT32 and FLOAT16, widened exactly, as dml_f32: a float whose comparisons are IEEE
whatever the compiler's flush-to-zero setting).
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np

from ..data_types import DataType, from_numpy
from ..operators import Operator
from ..operators.numerics.cuda_prelude import COMPILE_OPTIONS, DEVICE_BEGIN, DEVICE_END, DEVICE_PRELUDE, _PRELUDE
from ..operators.table.parameters import CudaArgument
from ..operators.table.schema import APPROXIMATE

MAX_DIMS = 8
VECTOR_BYTES = 16  # the widest single load a CUDA thread can issue
# Bytes of the narrowest tensor per thread (more than VECTOR_BYTES: several loads a thread): one 16-byte load for
# exact and one-rounding bodies on types of 2 bytes or more; two for tensors of 1-byte types and for approximate
# (transcendental) bodies, whose long arithmetic the second load in flight hides. Measured on the H200 (1 GiB,
# bench/gpu_bench.py --thread-bytes, --long-thread-bytes), as a fraction of the copy: LOGICAL_NOT uint8 0.80 -> 0.92,
# BIT_SHIFT_LEFT uint8 0.72 -> 0.81, EXP 0.66-0.76 -> 0.83, ERF 0.81 -> 0.94, SIGMOID 0.68-0.72 -> 0.77; RECIP (a
# one-rounding division) fell 0.87-0.96 -> 0.70 with two loads, ADD and IDENTITY stayed within the noise.
THREAD_BYTES = 16
LONG_THREAD_BYTES = 32
MAX_THREAD_BYTES = 32  # per tensor and thread: wider types get fewer elements (measured best on an H100)


@dataclass(frozen=True)
class CType:
    """How one NumPy dtype looks in the generated C++."""

    bits: str  # the unsigned integer of the same width: what the kernels load and store
    value: str  # the C++ type the body sees
    load: str  # C++ expression turning bits `{}` into the value
    store: str  # C++ expression turning a result `{}` of type `result` into bits
    result: str  # the C++ type a result is converted to before it is stored


C_TYPES: dict[str, CType] = {
    "uint8": CType("unsigned char", "unsigned char", "{}", "{}", "unsigned char"),
    "uint16": CType("unsigned short", "unsigned short", "{}", "{}", "unsigned short"),
    "uint32": CType("unsigned int", "unsigned int", "{}", "{}", "unsigned int"),
    "uint64": CType("unsigned long long", "unsigned long long", "{}", "{}", "unsigned long long"),
    "int8": CType("unsigned char", "signed char", "(signed char)({})", "(unsigned char)({})", "signed char"),
    "int16": CType("unsigned short", "short", "(short)({})", "(unsigned short)({})", "short"),
    "int32": CType("unsigned int", "int", "(int)({})", "(unsigned int)({})", "int"),
    "int64": CType("unsigned long long", "long long", "(long long)({})", "(unsigned long long)({})", "long long"),
    "float16": CType("unsigned short", "dml_f32", "dml_f32{{dml_half_to_float({})}}", "dml_float_to_half({})",
                     "float"),
    "float32": CType("unsigned int", "dml_f32", "dml_f32{{__uint_as_float({})}}", "__float_as_uint({})", "float"),
    # -ftz does not touch FLOAT64, so doubles compare with the compiler's own instructions.
    "float64": CType("unsigned long long", "double", "__longlong_as_double((long long)({}))",
                     "(unsigned long long)__double_as_longlong({})", "double"),
}

# A body made only of &, |, ^, ~ and parentheses over the inputs acts on every bit on its own,
# so it gives the same bits on 64-bit words as on elements of any width.
_WORD_SAFE_BODY = re.compile(r"[abx\s&|^~()]+")

Signature = tuple[str, ...]  # NumPy dtype names: each input's, then the output's


def input_names(operator: Operator) -> tuple[str, ...]:
    """The names the body uses for the inputs: x for one input, a and b for two (or the entry's cuda_names)."""
    return operator.kernel_input_names


@functools.lru_cache(maxsize=1024)  # asked on every launch (kernel_arguments): a few us of np.dtype lookups otherwise
def data_types_of(operator: Operator, signature: Signature) -> Mapping[str, DataType]:
    """Each tensor's DataType for a signature (read-only: the mapping is shared by every launch that asks)."""
    return MappingProxyType({name: from_numpy(np.dtype(dtype)) for name, dtype in zip(operator.tensors, signature)})


def kernel_arguments(operator: Operator, signature: Signature, parameters) -> tuple[CudaArgument, ...]:
    """The scalar arguments the kernels take, in order, with the values of these typed `parameters`."""
    data_types = data_types_of(operator, signature)
    found = []
    for parameter in operator.parameters:
        value = parameters[parameter.field] if parameters and parameter.field in parameters else \
            parameter.parse({}, data_types)
        found.extend(parameter.cuda_arguments(value, data_types))
    return tuple(found)


def parameter_values(operator: Operator, signature: Signature, parameters) -> tuple:
    """The scalar argument values for a launch, NumPy scalars of the declared widths."""
    return tuple(argument.value for argument in kernel_arguments(operator, signature, parameters))


def runs_on_words(operator: Operator, in_dtype: np.dtype, out_dtype: np.dtype) -> bool:
    """True where the operator may run on the tensors' bytes as 64-bit words (BIT_AND/OR/XOR/NOT)."""
    return (operator.native_encoding and np.dtype(in_dtype) == np.dtype(out_dtype)
            and _WORD_SAFE_BODY.fullmatch(operator.cuda_body) is not None)


def _row_signatures(operator: Operator, row) -> list[Signature]:
    """Every signature one support row allows: tensors tied by same_data_type take one type together."""
    groups: list[list[str]] = []
    for name in operator.tensors:
        tied = name in operator.same_data_type
        group = next((g for g in groups if tied and g[0] in operator.same_data_type), None)
        if group is None:
            groups.append([name])
        else:
            group.append(name)
    choices = []
    for group in groups:
        allowed = [t for t in row.tensors[group[0]].data_types if t.numpy_name is not None
                   and all(t in row.tensors[other].data_types for other in group[1:])]
        choices.append(allowed)
    found = []
    for picked in itertools.product(*choices):
        by_name = {name: data_type for group, data_type in zip(groups, picked) for name in group}
        found.append(tuple(by_name[name].numpy_name for name in operator.tensors))
    return found


def signatures(operator: Operator) -> tuple[Signature, ...]:
    """Every (input dtypes..., output dtype) combination any support row of the operator allows."""
    found: list[Signature] = []
    for row in operator.support:
        for signature in _row_signatures(operator, row):
            if signature not in found:
                found.append(signature)
    words = ("uint64",) * len(operator.tensors)
    if runs_on_words(operator, np.dtype("uint64"), np.dtype("uint64")) and words not in found:
        found.append(words)
    return tuple(found)


def signature_of(operator: Operator, in_dtypes, out_dtype) -> Signature:
    return tuple(dtype_name(d) for d in in_dtypes) + (dtype_name(out_dtype),)


# A dtype's name by the dtype (or what np.dtype takes): NumPy's .name is a Python property that builds the string on
# each read, 1 to 1.5 us, which signature_of asked for every tensor of every launch.
_DTYPE_NAMES: dict = {}


def dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


def kernel_name(kind: str, signature: Signature) -> str:
    return f"dml_{kind}_" + "_".join(signature)


def operator_elements_per_thread(operator: Operator, signature: Signature) -> int:
    """The vector length of `operator`'s kernel for `signature` (elements_per_thread)."""
    return elements_per_thread(signature, operator.exactness == APPROXIMATE)


@functools.lru_cache(maxsize=512)  # asked on every launch; a few microseconds of np.dtype lookups otherwise
def elements_per_thread(signature: Signature, approximate: bool = False) -> int:
    """Vector length: THREAD_BYTES of the narrowest tensor (LONG_THREAD_BYTES where that tensor's type is 1 byte or
    the body `approximate`), at most MAX_THREAD_BYTES of the widest."""
    sizes = [np.dtype(d).itemsize for d in signature]
    narrow = LONG_THREAD_BYTES if approximate or min(sizes) == 1 else THREAD_BYTES
    return max(1, min(narrow // min(sizes), MAX_THREAD_BYTES // max(sizes)))


def _suffix(signature: Signature) -> str:
    return "_".join(signature)


def _declarations(operator: Operator, signature: Signature) -> list[str]:
    return [f"{argument.c_type} {argument.name}" for argument in kernel_arguments(operator, signature, None)]


def _argument_names(operator: Operator, signature: Signature) -> str:
    return "".join(f", {argument.name}" for argument in kernel_arguments(operator, signature, None))


def _apply_function(operator: Operator, signature: Signature) -> str:
    """`dml_apply_<signature>`: raw input bits and parameters in, raw output bits out."""
    names = input_names(operator)
    sources = [C_TYPES[d] for d in signature[:-1]]
    target = C_TYPES[signature[-1]]
    width = np.dtype(signature[0]).itemsize * 8
    args = [f"{source.bits} {n}_bits" for n, source in zip(names, sources)] + _declarations(operator, signature)
    lines = [f"__device__ __forceinline__ {target.bits} dml_apply_{_suffix(signature)}({', '.join(args)}) {{",
             f"    const int W = {width};",
             "    (void)W;"]
    if operator.native_encoding:
        lines += [f"    const {source.bits} {n} = {n}_bits;" for n, source in zip(names, sources)]
        lines.append(f"    return ({target.bits})({operator.cuda_body});")
    else:
        lines += [f"    const {source.value} {n} = {source.load.format(f'{n}_bits')};" for n, source in zip(names, sources)]
        lines.append(f"    return {target.store.format(f'({target.result})({operator.cuda_body})')};")
    lines.append("}")
    return "\n".join(lines)


def runs_on_byte_lanes(operator: Operator, signature: Signature) -> bool:
    """True where the vector kernel applies the entry's cuda_byte_lanes_body to four 1-byte elements at once."""
    return bool(operator.cuda_byte_lanes_body) and all(np.dtype(d).itemsize == 1 for d in signature)


def _byte_lanes_function(operator: Operator, signature: Signature) -> str:
    """`dml_apply4_<signature>`: four elements of each input, a byte each, in an unsigned int; four results out."""
    args = [f"unsigned int {n}" for n in input_names(operator)] + _declarations(operator, signature)
    return (f"__device__ __forceinline__ unsigned int dml_apply4_{_suffix(signature)}({', '.join(args)}) {{\n"
            f"    const int W = 8;\n    (void)W;\n    return {operator.cuda_byte_lanes_body};\n}}")


def _loads_per_thread(signature: Signature, elements: int) -> int:
    """How many loads of the widest tensor a thread's `elements` take: VECTOR_BYTES each (one where they fit)."""
    return max(1, elements * max(np.dtype(d).itemsize for d in signature) // VECTOR_BYTES)


def _vector_loads(operator: Operator, signature: Signature, elements: int) -> int:
    """The chunks a thread's `elements` come in. An approximate body on FLOAT16, and a body on byte lanes, takes its
    elements as two 16-byte chunks, blockDim.x chunks apart, so that each load and store of a warp covers consecutive
    bytes, where 32 contiguous bytes a thread took two loads that each used half of every sector. H200,
    bench/gpu_bench.py: FLOAT16 SIGMOID 0.76-0.80 of the copy -> 0.87-0.92, GELU 0.75-0.80 -> 0.91-0.94 (three runs
    each); BIT_COUNT uint8 0.87-0.91 -> 0.88-0.94 (three A/B runs on two machines; 35 registers). FLOAT32 ones no
    better (GELU 0.83-0.89 -> 0.74-0.79), and exact bodies element by element worse (LOGICAL_AND uint8 0.95 -> 0.58:
    with two chunks in flight the compiler held a 1-byte comparison's 32 predicates at once, 106 registers): one
    contiguous vector a thread."""
    halves = operator.exactness == APPROXIMATE and min(np.dtype(d).itemsize for d in signature) == 2
    return _loads_per_thread(signature, elements) if halves or runs_on_byte_lanes(operator, signature) else 1


def _contiguous_loop(names, suffix: str, out_struct: str, vec: int, words: int, apply: str) -> str:
    """One vector of `vec` elements a thread, consecutive threads on consecutive vectors; `chunks` is their count."""
    reads = "".join(f"        const v{i}_{suffix} {n}_v = {n}_vec[i];\n" for i, n in enumerate(names))
    return f"""    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    const long long chunks = n / {vec};
    for (long long i = first; i < chunks; i += step) {{
{reads}        {out_struct} o;
#pragma unroll
        for (int j = 0; j < {words}; ++j) o.v[j] = {apply.format(element="_v.v[j]")};
        out_vec[i] = o;
    }}
"""


def _chunked_loop(names, suffix: str, out_struct: str, chunk: int, loads: int, words: int, apply: str) -> str:
    """`loads` chunks of `chunk` elements a thread, blockDim.x chunks apart, all read before any is computed."""
    held = "".join(f"        v{i}_{suffix} {n}_v[{loads}];\n" for i, n in enumerate(names))
    reads = "".join(f" {n}_v[c] = {n}_vec[i];" for n in names)
    return f"""    const long long chunks = n / {chunk};
    const long long stride = (long long)gridDim.x * blockDim.x * {loads};
#pragma unroll 1
    for (long long first = (long long)blockIdx.x * blockDim.x * {loads} + threadIdx.x; first < chunks;
         first += stride) {{
{held}#pragma unroll
        for (int c = 0; c < {loads}; ++c) {{
            const long long i = first + (long long)c * blockDim.x;
            if (i < chunks) {{{reads} }}
        }}
#pragma unroll
        for (int c = 0; c < {loads}; ++c) {{
            const long long i = first + (long long)c * blockDim.x;
            if (i >= chunks) continue;
            {out_struct} o;
#pragma unroll
            for (int j = 0; j < {words}; ++j) o.v[j] = {apply.format(element="_v[c].v[j]")};
            out_vec[i] = o;
        }}
    }}
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
"""


def _vector_kernel(operator: Operator, signature: Signature) -> str:
    names = input_names(operator)
    sources = [C_TYPES[d] for d in signature[:-1]]
    target = C_TYPES[signature[-1]]
    vec = operator_elements_per_thread(operator, signature)
    loads = _vector_loads(operator, signature, vec)
    chunk = vec // loads
    suffix = _suffix(signature)
    lanes = runs_on_byte_lanes(operator, signature)
    # Byte lanes: each chunk of 1-byte elements read as chunk / 4 words, a body call a word.
    words, word_type, function = (chunk // 4, "unsigned int", "dml_apply4") if lanes else (chunk, None, "dml_apply")
    structs = [f"struct __align__({min(chunk * np.dtype(d).itemsize, VECTOR_BYTES)}) v{i}_{suffix} "
               f"{{ {word_type or C_TYPES[d].bits} v[{words}]; }};" for i, d in enumerate(signature)]
    out_struct = f"v{len(names)}_{suffix}"
    args = ([f"const v{i}_{suffix}* __restrict__ {n}_vec" for i, n in enumerate(names)]
            + [f"{out_struct}* __restrict__ out_vec", "long long n"] + _declarations(operator, signature))
    param_names = _argument_names(operator, signature)
    # the body's call on one element (or word) of each input, `{element}` naming where it is held
    apply = f"{function}_{suffix}(" + ", ".join(f"{n}{{element}}" for n in names) + f"{param_names})"
    loop = (_contiguous_loop(names, suffix, out_struct, vec, words, apply) if loads == 1
            else _chunked_loop(names, suffix, out_struct, chunk, loads, words, apply))
    scalar_call = ", ".join(f"{n}_s[k]" for n in names)
    scalars = "".join(f"    const {source.bits}* {n}_s = (const {source.bits}*){n}_vec;\n"
                      for n, source in zip(names, sources))
    return f"""
{chr(10).join(structs)}
extern "C" __global__ void {kernel_name("vec", signature)}({", ".join(args)}) {{
{loop}{scalars}    {target.bits}* out_s = ({target.bits}*)out_vec;
    for (long long k = chunks * {chunk} + first; k < n; k += step)
        out_s[k] = dml_apply_{suffix}({scalar_call}{param_names});
}}
"""


def _nd_kernel(operator: Operator, signature: Signature) -> str:
    """Broadcasting kernel. geometry = [ndim, sizes[ndim], then strides[ndim] per input], in elements."""
    names = input_names(operator)
    sources = [C_TYPES[d] for d in signature[:-1]]
    target = C_TYPES[signature[-1]]
    suffix = _suffix(signature)
    args = ([f"const {source.bits}* __restrict__ {n}_s" for n, source in zip(names, sources)]
            + [f"{target.bits}* __restrict__ out_s", "const long long* __restrict__ geometry", "long long n"]
            + _declarations(operator, signature))
    param_names = _argument_names(operator, signature)
    offsets = "".join(f"        long long {n}_at = 0;\n" for n in names)
    steps = "".join(f"            {n}_at += index * geometry[1 + {i + 1} * ndim + d];\n" for i, n in enumerate(names))
    call = ", ".join(f"{n}_s[{n}_at]" for n in names)
    return f"""
extern "C" __global__ void {kernel_name("nd", signature)}({", ".join(args)}) {{
    const int ndim = (int)geometry[0];
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += step) {{
{offsets}        long long rest = k;
        for (int d = ndim - 1; d >= 0; --d) {{
            const long long size = geometry[1 + d];
            const long long index = rest % size;
            rest /= size;
{steps}        }}
        out_s[k] = dml_apply_{suffix}({call}{param_names});
    }}
}}
"""


def module_source(operator: Operator, signature: Signature | None = None) -> str:
    """The CUDA C++ of one operator's kernels: both kernels for `signature`, or for every allowed one.

    The backend compiles one signature at a time, on first use (an operator such as POW allows
    dozens of type combinations; compiling all of them for one call would take seconds).
    """
    if not operator.cuda_body.strip():
        raise ValueError(f"{operator.name} has no cuda_body in the operator table")
    parts = [f"// {operator.dml_name}: {operator.formula}", _PRELUDE, operator.cuda_helpers]
    for each in ([signature] if signature is not None else signatures(operator)):
        parts.append(_apply_function(operator, each))
        if runs_on_byte_lanes(operator, each):
            parts.append(_byte_lanes_function(operator, each))
        parts.append(_vector_kernel(operator, each))
        parts.append(_nd_kernel(operator, each))
    return "\n".join(parts)


def broadcast_geometry(in_shapes, out_shape) -> np.ndarray:
    """The nd kernel's geometry array: ndim, the output sizes, then each input's element strides."""
    ndim = len(out_shape)
    geometry = [ndim, *out_shape]
    for shape in in_shapes:
        padded = (1,) * (ndim - len(shape)) + tuple(shape)
        strides, step = [0] * ndim, 1
        for d in range(ndim - 1, -1, -1):
            strides[d] = step if padded[d] != 1 else 0
            step *= padded[d]
        geometry += strides
    return np.asarray(geometry, dtype=np.int64)
