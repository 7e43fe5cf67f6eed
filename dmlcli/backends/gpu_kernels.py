"""CUDA source for the GPU backend, generated from each operator's `cuda_body`.

This module only writes C++ text (it never imports CuPy), so the generated source can be
inspected and unit-tested anywhere. One CUDA module is built per operator; it holds two
kernels for every (input type, output type) pair the operator's support table allows:

* `dml_vec_<in>_<out>`: contiguous tensors of one shape. Each thread loads a small vector of
  elements per tensor (16 bytes of the narrowest tensor), so memory traffic comes in wide,
  coalesced transactions; the few elements past the last whole vector are done one by one.
* `dml_nd_<in>_<out>`: broadcast inputs, addressed through per-dimension strides (0 where an
  input is broadcast), for up to 8 dimensions.

Both kernels call one device function, `dml_apply`, made from the operator's body, so the two
paths cannot disagree. Inputs arrive as their raw bits (the unsigned integer of their width):
native-encoding operators work on those bits directly; the others first turn the bits into the
value (FLOAT32 and FLOAT16, widened exactly, as dml_f32: a float whose comparisons are IEEE
whatever the compiler's flush-to-zero setting).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..operators import Operator

MAX_DIMS = 8
VECTOR_BYTES = 16  # the widest single load a CUDA thread can issue
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

# Device primitives, in inline PTX so that the compiler's flags cannot change them: CuPy compiles
# every kernel with -ftz=true, under which a compiler-made FLOAT32 comparison treats subnormals as
# zero. The comparisons here are IEEE (no .ftz): ordered (false with NaN), except != (unordered).
# FLOAT16 <-> float uses the hardware conversion, exact for every half value.
DEVICE_BEGIN, DEVICE_END = "// dml-device-primitives-begin", "// dml-device-primitives-end"
_COMPARISONS = (("lt", "<", "lt"), ("gt", ">", "gt"), ("le", "<=", "le"), ("ge", ">=", "ge"),
                ("eq", "==", "eq"), ("ne", "!=", "neu"))
_DEVICE_PRIMITIVES = "\n".join([
    DEVICE_BEGIN,
    "__device__ __forceinline__ float dml_half_to_float(unsigned short h) {",
    "    float f;",
    '    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));',
    "    return f;",
    "}",
    "__device__ __forceinline__ unsigned short dml_float_to_half(float f) {",
    "    unsigned short h;",
    '    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));',
    "    return h;",
    "}",
    *[f"__device__ __forceinline__ bool dml_{name}(float a, float b) {{\n"
      f"    unsigned int r;\n"
      f'    asm("{{ .reg .pred p; setp.{ptx}.f32 p, %1, %2; selp.u32 %0, 1, 0, p; }}" : "=r"(r) : "f"(a), "f"(b));\n'
      f"    return r != 0;\n}}" for name, _, ptx in _COMPARISONS],
    DEVICE_END,
])
# FLOAT32 and FLOAT16 values reach the body as dml_f32, whose operators are the primitives above.
_PRELUDE = "\n".join([
    _DEVICE_PRIMITIVES,
    "struct dml_f32 { float v; };",
    *[f"__device__ __forceinline__ bool operator{op}(dml_f32 a, dml_f32 b) {{ return dml_{name}(a.v, b.v); }}\n"
      f"__device__ __forceinline__ bool operator{op}(dml_f32 a, int b) {{ return dml_{name}(a.v, (float)b); }}"
      for name, op, _ in _COMPARISONS],
    "__device__ __forceinline__ bool isinf(dml_f32 x) { return (__float_as_uint(x.v) & 0x7fffffffu) == 0x7f800000u; }",
    "__device__ __forceinline__ bool isnan(dml_f32 x) { return (__float_as_uint(x.v) & 0x7fffffffu) > 0x7f800000u; }",
])


# A body made only of &, |, ^, ~ and parentheses over the inputs acts on every bit on its own,
# so it gives the same bits on 64-bit words as on elements of any width.
_WORD_SAFE_BODY = re.compile(r"[abx\s&|^~()]+")


def input_names(operator: Operator) -> tuple[str, ...]:
    """The names the body uses for the inputs: x for one input, a and b for two."""
    return ("x",) if len(operator.inputs) == 1 else ("a", "b")[: len(operator.inputs)]


def parameter_values(operator: Operator, parameters) -> tuple[int, ...]:
    """The enum value of each parameter, in the order the kernels take them."""
    values = []
    for param in operator.parameters:
        short = parameters.get(param.name, param.default) if parameters else param.default
        values.append(dict(param.values)[short])
    return tuple(values)


def runs_on_words(operator: Operator, in_dtype: np.dtype, out_dtype: np.dtype) -> bool:
    """True where the operator may run on the tensors' bytes as 64-bit words (BIT_AND/OR/XOR/NOT)."""
    return (operator.native_encoding and np.dtype(in_dtype) == np.dtype(out_dtype)
            and _WORD_SAFE_BODY.fullmatch(operator.cuda_body) is not None)


def type_pairs(operator: Operator) -> tuple[tuple[str, str], ...]:
    """Every (input dtype, output dtype) pair any support row of the operator allows."""
    first = operator.inputs[0]
    pairs = []
    for row in operator.support:
        inputs = row.tensors[first].data_types
        outputs = row.tensors[operator.output].data_types
        for in_type in inputs:
            if in_type.numpy_name is None:
                continue
            if operator.output in operator.same_data_type:
                candidates = [in_type]
            else:
                candidates = [t for t in outputs if t.numpy_name is not None]
            for out_type in candidates:
                pair = (in_type.numpy_name, out_type.numpy_name)
                if pair not in pairs:
                    pairs.append(pair)
    if runs_on_words(operator, np.dtype("uint64"), np.dtype("uint64")) and ("uint64", "uint64") not in pairs:
        pairs.append(("uint64", "uint64"))
    return tuple(pairs)


def kernel_name(kind: str, in_dtype, out_dtype) -> str:
    return f"dml_{kind}_{np.dtype(in_dtype).name}_{np.dtype(out_dtype).name}"


def elements_per_thread(in_dtype, out_dtype) -> int:
    """Vector length: 16 bytes of the narrowest tensor, at most MAX_THREAD_BYTES of the widest."""
    sizes = (np.dtype(in_dtype).itemsize, np.dtype(out_dtype).itemsize)
    return max(1, min(VECTOR_BYTES // min(sizes), MAX_THREAD_BYTES // max(sizes)))


def _apply_function(operator: Operator, in_dtype: str, out_dtype: str) -> str:
    """`dml_apply_<in>_<out>`: raw input bits and parameters in, raw output bits out."""
    source, target = C_TYPES[in_dtype], C_TYPES[out_dtype]
    names = input_names(operator)
    width = np.dtype(in_dtype).itemsize * 8
    args = [f"{source.bits} {n}_bits" for n in names] + [f"int {p.name}" for p in operator.parameters]
    lines = [f"__device__ __forceinline__ {target.bits} dml_apply_{in_dtype}_{out_dtype}({', '.join(args)}) {{",
             f"    const int W = {width};",
             "    (void)W;"]
    if operator.native_encoding:
        lines += [f"    const {source.bits} {n} = {n}_bits;" for n in names]
        lines.append(f"    return ({target.bits})({operator.cuda_body});")
    else:
        lines += [f"    const {source.value} {n} = {source.load.format(f'{n}_bits')};" for n in names]
        lines.append(f"    return {target.store.format(f'({target.result})({operator.cuda_body})')};")
    lines.append("}")
    return "\n".join(lines)


def _vector_kernel(operator: Operator, in_dtype: str, out_dtype: str) -> str:
    source, target = C_TYPES[in_dtype], C_TYPES[out_dtype]
    names = input_names(operator)
    vec = elements_per_thread(in_dtype, out_dtype)
    in_bytes, out_bytes = vec * np.dtype(in_dtype).itemsize, vec * np.dtype(out_dtype).itemsize
    suffix = f"{in_dtype}_{out_dtype}"
    params = [f"int {p.name}" for p in operator.parameters]
    args = ([f"const vin_{suffix}* __restrict__ {n}_vec" for n in names]
            + [f"vout_{suffix}* __restrict__ out_vec", "long long n"] + params)
    param_names = "".join(f", {p.name}" for p in operator.parameters)
    call = ", ".join(f"{n}_v.v[j]" for n in names)
    scalar_call = ", ".join(f"{n}_s[k]" for n in names)
    return f"""
struct __align__({min(in_bytes, VECTOR_BYTES)}) vin_{suffix} {{ {source.bits} v[{vec}]; }};
struct __align__({min(out_bytes, VECTOR_BYTES)}) vout_{suffix} {{ {target.bits} v[{vec}]; }};
extern "C" __global__ void {kernel_name("vec", in_dtype, out_dtype)}({", ".join(args)}) {{
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    const long long vectors = n / {vec};
    for (long long i = first; i < vectors; i += step) {{
{"".join(f"        const vin_{suffix} {n}_v = {n}_vec[i];{chr(10)}" for n in names)}        vout_{suffix} o;
#pragma unroll
        for (int j = 0; j < {vec}; ++j) o.v[j] = dml_apply_{suffix}({call}{param_names});
        out_vec[i] = o;
    }}
{"".join(f"    const {source.bits}* {n}_s = (const {source.bits}*){n}_vec;{chr(10)}" for n in names)}    {target.bits}* out_s = ({target.bits}*)out_vec;
    for (long long k = vectors * {vec} + first; k < n; k += step) out_s[k] = dml_apply_{suffix}({scalar_call}{param_names});
}}
"""


def _nd_kernel(operator: Operator, in_dtype: str, out_dtype: str) -> str:
    """Broadcasting kernel. geometry = [ndim, sizes[ndim], then strides[ndim] per input], in elements."""
    source, target = C_TYPES[in_dtype], C_TYPES[out_dtype]
    names = input_names(operator)
    suffix = f"{in_dtype}_{out_dtype}"
    args = ([f"const {source.bits}* __restrict__ {n}_s" for n in names]
            + [f"{target.bits}* __restrict__ out_s", "const long long* __restrict__ geometry", "long long n"]
            + [f"int {p.name}" for p in operator.parameters])
    param_names = "".join(f", {p.name}" for p in operator.parameters)
    offsets = "".join(f"        long long {n}_at = 0;\n" for n in names)
    steps = "".join(f"            {n}_at += index * geometry[1 + {i + 1} * ndim + d];\n" for i, n in enumerate(names))
    call = ", ".join(f"{n}_s[{n}_at]" for n in names)
    return f"""
extern "C" __global__ void {kernel_name("nd", in_dtype, out_dtype)}({", ".join(args)}) {{
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


def module_source(operator: Operator) -> str:
    """The CUDA C++ of one operator's module: both kernels for every allowed type pair."""
    if not operator.cuda_body.strip():
        raise ValueError(f"{operator.name} has no cuda_body in the operator table")
    parts = [f"// {operator.dml_name}: {operator.formula}", _PRELUDE]
    for in_dtype, out_dtype in type_pairs(operator):
        parts.append(_apply_function(operator, in_dtype, out_dtype))
        parts.append(_vector_kernel(operator, in_dtype, out_dtype))
        parts.append(_nd_kernel(operator, in_dtype, out_dtype))
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
