"""The CUDA text every generated kernel starts with: dmlcli's device primitives and the compiler options.

Kept in the table's package because the kernel bodies are written against it (a cuda_body uses dml_f32, dml_add,
dml_half_to_float, ...; CAST and FILL_VALUE_SEQUENCE build whole kernels on it) and because it is text only:
nothing here imports CuPy (launch takes the caller's). backends/gpu_kernels.py generates the element-wise kernels from it.
"""

from __future__ import annotations

# The C++ names of the integer types' values, and of an unsigned word of each width (a value's bits): what the
# kernels that operators build themselves (CAST, FILL_VALUE_SEQUENCE, GATHER, pooling, cumulative sums) declare
# their pointers and values with.
C_INTEGER_TYPES = {"int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
                   "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
                   "uint64": "unsigned long long"}
C_WORD_TYPES = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}
# The same for FLOAT32 and FLOAT16 values: FLOAT16 held as its bits (read with dml_half_to_float, written with
# dml_float_to_half).
C_FLOAT_TYPES = {"float32": "float", "float16": "unsigned short"}

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
# IEEE float32 arithmetic in inline PTX without .ftz, for the same reason: CuPy compiles with
# -ftz=true whatever options are passed (measured on an H100: bench/ftz_probe.py), which flushes
# subnormal inputs and results of every compiler-made float32 operation. Each is one correctly
# rounded operation (.rn), so FLOAT32 ADD/SUBTRACT/MULTIPLY/DIVIDE/SQRT/RECIP match NumPy bit for bit.
_ARITHMETIC = (("add", "add.rn.f32"), ("sub", "sub.rn.f32"), ("mul", "mul.rn.f32"), ("div", "div.rn.f32"))
_ARITHMETIC_PRIMITIVES = "\n".join([
    *[f"__device__ __forceinline__ float dml_{name}(float a, float b) {{\n"
      f"    float r;\n"
      f'    asm("{ptx} %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));\n'
      f"    return r;\n}}" for name, ptx in _ARITHMETIC],
    "__device__ __forceinline__ float dml_sqrt_rn(float a) {",
    "    float r;",
    '    asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(a));',
    "    return r;",
    "}",
    "__device__ __forceinline__ float dml_fma_rn(float a, float b, float c) {",
    "    float r;",
    '    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));',
    "    return r;",
    "}",
    # The special-function unit's exponential and reciprocal in their .ftz forms (about 2^-22 relative each; PTX ISA:
    # ex2.approx, rcp.approx), for the approximate operators' fast paths (FLOAT16 GELU and SIGMOID): the plain
    # forms (__expf and __fdividef under -ftz=false) spend a compare and two scalings on every value to keep the
    # float32 subnormals those paths never meet (issue 33).
    "__device__ __forceinline__ float dml_ex2_ftz(float u) {",
    "    float r;",
    '    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(u));',
    "    return r;",
    "}",
    "__device__ __forceinline__ float dml_rcp_ftz(float u) {",
    "    float r;",
    '    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(u));',
    "    return r;",
    "}",
])
# FLOAT32 and FLOAT16 values reach the body as dml_f32, whose operators are the primitives above:
# a body writes a + b, a * 0.5f, -x, a < b, and gets IEEE results. `(float)x` (or x.v) gives the
# plain float for CUDA's math functions (expf, sinf, ...), whose results the approximate
# operators' tolerances cover; dml_f32{...} wraps a float again.
_PRELUDE = "\n".join([
    _DEVICE_PRIMITIVES,
    _ARITHMETIC_PRIMITIVES,
    # Conversions between float and double in PTX too: under -ftz the compiler's own casts are
    # cvt.ftz.*, which flush FLOAT32 subnormals. dml_narrow_f16 rounds a double once to FLOAT16.
    "__device__ __forceinline__ double dml_widen(float f) {",
    "    double d;",
    '    asm("cvt.f64.f32 %0, %1;" : "=d"(d) : "f"(f));',
    "    return d;",
    "}",
    "__device__ __forceinline__ float dml_narrow(double d) {",
    "    float f;",
    '    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(f) : "d"(d));',
    "    return f;",
    "}",
    "// A double rounded once to an output of w bits (16: FLOAT16, else FLOAT32), as the float that stores",
    "// unchanged: the composite and approximate operators' last step, as the CPU's astype from float64.",
    "__device__ __forceinline__ float dml_round_to_output(double d, int w) {",
    "    float f;",
    "    if (w == 16) {",
    "        unsigned short h;",
    '        asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d));',
    '        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));',
    "    } else {",
    '        asm("cvt.rn.f32.f64 %0, %1;" : "=f"(f) : "d"(d));',
    "    }",
    "    return f;",
    "}",
    "struct dml_f32 {",
    "    float v;",
    "    __device__ __forceinline__ explicit operator float() const { return v; }",
    "    __device__ __forceinline__ explicit operator double() const { return dml_widen(v); }",
    "};",
    *[f"__device__ __forceinline__ bool operator{op}(dml_f32 a, dml_f32 b) {{ return dml_{name}(a.v, b.v); }}\n"
      f"__device__ __forceinline__ bool operator{op}(dml_f32 a, int b) {{ return dml_{name}(a.v, (float)b); }}\n"
      f"__device__ __forceinline__ bool operator{op}(dml_f32 a, float b) {{ return dml_{name}(a.v, b); }}\n"
      f"__device__ __forceinline__ bool operator{op}(float a, dml_f32 b) {{ return dml_{name}(a, b.v); }}"
      for name, op, _ in _COMPARISONS],
    *[f"__device__ __forceinline__ dml_f32 operator{op}(dml_f32 a, dml_f32 b) {{ return dml_f32{{dml_{name}(a.v, b.v)}}; }}\n"
      f"__device__ __forceinline__ dml_f32 operator{op}(dml_f32 a, float b) {{ return dml_f32{{dml_{name}(a.v, b)}}; }}\n"
      f"__device__ __forceinline__ dml_f32 operator{op}(float a, dml_f32 b) {{ return dml_f32{{dml_{name}(a, b.v)}}; }}"
      for name, op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/"))],
    "__device__ __forceinline__ dml_f32 operator-(dml_f32 a) { return dml_f32{__uint_as_float(__float_as_uint(a.v) ^ 0x80000000u)}; }",
    "__device__ __forceinline__ dml_f32 dml_sqrt(dml_f32 a) { return dml_f32{dml_sqrt_rn(a.v)}; }",
    "__device__ __forceinline__ dml_f32 dml_fma(dml_f32 a, dml_f32 b, dml_f32 c) { return dml_f32{dml_fma_rn(a.v, b.v, c.v)}; }",
    "__device__ __forceinline__ bool isinf(dml_f32 x) { return (__float_as_uint(x.v) & 0x7fffffffu) == 0x7f800000u; }",
    "__device__ __forceinline__ bool isnan(dml_f32 x) { return (__float_as_uint(x.v) & 0x7fffffffu) > 0x7f800000u; }",
])

# The device primitives and float helpers above, for kernels that operators build themselves (CAST's).
DEVICE_PRELUDE = _PRELUDE

# PTX max.f32 / min.f32 (no .ftz): the non-NaN operand where one is NaN, NaN only where both are, subnormals kept;
# one instruction, where a compiler-made fmaxf would flush subnormals under CuPy's -ftz=true. Which zero a tie of
# -0.0 and +0.0 gives is the hardware's: callers that must keep a rule for it check zero results themselves.
SELECT_PRIMITIVES = """
__device__ __forceinline__ float dml_fmax(float a, float b) {
    float r;
    asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ float dml_fmin(float a, float b) {
    float r;
    asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
"""

# Division of a 32-bit index by a value known only at run time, as a multiplication by a magic number computed on the
# host (fast_division): an integer division is a long instruction sequence on the GPU, and kernels that find an
# element's coordinates from its index (pooling, padding, per-channel normalization) were compute-bound on them.
FAST_DIVISION = """
__device__ __forceinline__ unsigned int dml_fast_divide(unsigned int n, unsigned int divisor, unsigned int magic,
                                                        unsigned int shift) {
    return divisor == 1 ? n : __umulhi(n, magic) >> shift;
}
"""


def fast_division(divisor: int) -> tuple[int, int]:
    """(magic, shift) with n // divisor == (n * magic >> 32) >> shift for every 0 <= n < 2^31 (a divisor of 1 is
    not divided: dml_fast_divide tests it). CUTLASS's FastDivmod: p = 31 + ceil(log2(divisor)),
    magic = ceil(2^p / divisor) < 2^32."""
    if divisor <= 1:
        return 0, 0
    log2 = (divisor - 1).bit_length()  # ceil(log2(divisor))
    return -(-(1 << (31 + log2)) // divisor), log2 - 1


# A block-wide combine of one float per thread (every thread gets the result), for the kernels that give each row
# of a reduction one block (softmax, mean-variance normalization). The maximum propagates NaN; `shared` holds 33
# floats. Warp by warp with shuffles, then the warps' results through shared memory.
BLOCK_COMBINE = """
__device__ __forceinline__ float dml_peak(float a, float b) {
    return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

__device__ float dml_block_combine(float v, float* shared, bool maximum) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float other = __shfl_down_sync(0xffffffffu, v, offset);
        v = maximum ? dml_peak(v, other) : dml_add(v, other);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x >> 5) ? shared[lane] : (maximum ? -__int_as_float(0x7f800000) : 0.0f);
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_down_sync(0xffffffffu, v, offset);
            v = maximum ? dml_peak(v, other) : dml_add(v, other);
        }
        if (lane == 0) shared[32] = v;
    }
    __syncthreads();
    const float total = shared[32];
    __syncthreads();
    return total;
}
"""

# NVRTC flags asking for IEEE float32. CuPy's own -ftz=true still wins for compiler-made float32
# operations, which is why the arithmetic above is inline PTX; these keep double precision and
# CUDA's math functions on their accurate paths, and forbid contracting a*b+c into one rounding.
COMPILE_OPTIONS = ("-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=false")



# Kernels that operators build themselves (CAST, FILL_VALUE_SEQUENCE, pooling), compiled once per source text.
_BUILT_KERNELS: dict = {}
_THREADS = 256


def compiled(cp, source: str):
    """`source`'s dml_kernel as a CuPy RawKernel, compiled once (CuPy caches it on disk too), for a caller that
    chooses its own grid. `cp` is the caller's CuPy module: this module stays text and never imports CuPy itself."""
    kernel = _BUILT_KERNELS.get(source)
    if kernel is None:
        kernel = _BUILT_KERNELS[source] = cp.RawKernel(source, "dml_kernel", options=COMPILE_OPTIONS)
    return kernel


def launch(cp, source: str, *arguments, count: int | None = None) -> None:
    """Compile `source` once and run its dml_kernel over `count` elements (the last argument's size by default), a
    grid-stride loop past 65535 blocks; `count` goes last as a long long."""
    kernel = compiled(cp, source)
    count = arguments[-1].size if count is None else count
    blocks = max(1, min((count + _THREADS - 1) // _THREADS, 65535))
    kernel((blocks,), (_THREADS,), (*arguments, cp.int64(count)))


def elementwise_kernel(cp, name: str, in_params: str, out_params: str, body: str, preamble: str = ""):
    """A CuPy ElementwiseKernel whose body is written against dmlcli's IEEE device primitives (DEVICE_PRELUDE: no
    flush to zero, no contraction), with `preamble`'s device functions after them; built once per name.

    For an operator's own element-by-element step on the GPU where CuPy's operators would flush subnormals
    (CuPy compiles with -ftz=true). `cp` is the caller's CuPy module."""
    kernel = _BUILT_KERNELS.get(name)
    if kernel is None:
        kernel = _BUILT_KERNELS[name] = cp.ElementwiseKernel(in_params, out_params, body, name,
                                                             preamble=DEVICE_PRELUDE + preamble,
                                                             options=COMPILE_OPTIONS)
    return kernel
