"""Pooling's own CUDA kernels: one thread per output element walks its window in the input, which is read once
from memory and never padded or copied (issue 19: pooling at >= 0.6 of the copy bandwidth on the GPU).

They compute what pooling.py's xp kernels compute, in the same order, with the same FLOAT32 operations (inline PTX,
no flush to zero, no contraction: cuda_prelude.py), so the GPU's results equal the CPU's:
- the maximum starts at the window's first input element and takes each later one that is greater, NaN skipped
  (xp.fmax's rule: a NaN is replaced by any number after it; ties keep the value they have). A window that reads
  only padding cannot occur (pooling.py refuses it before the kernel runs).
- the average and the Lp sums start at the window's first element (padding included, which reads as +0) and
  add each later one in row-major window order in FLOAT32, then divide by the window's size (IncludePadding) or
  by the product of the per-dimension counts of input elements read, as FLOAT32 (exact for any real window).
A window inside the input takes a path without bounds tests (the maximum's PTX max.f32, the sums' unconditional
loads), with the same bits. A FLOAT32 maximum with stride 1 and windows of 3 to 7 rows runs the slide kernel where
the output is as wide as the input and its rows are whole 16-byte vectors (max_slide_kernel: a warp walks down 128
columns, each input row read once), the strip kernel otherwise (max_strip_kernel: a thread takes STRIP_ROWS outputs
down a column), with the same bits.
MAX_POOLING1/2's indices and LP_POOLING's P other than 1 and 2 keep the xp kernels (pooling.py chooses).
Up to three spatial dimensions; a 4-D input has a leading spatial size of 1.
"""

from __future__ import annotations

import functools

import numpy as np

from ..numerics.cuda_prelude import (C_FLOAT_TYPES, C_INTEGER_TYPES, DEVICE_PRELUDE, FAST_DIVISION, SELECT_PRIMITIVES,
                                     fast_division, launch)

_C_VALUE = {**C_INTEGER_TYPES, **C_FLOAT_TYPES}
_NAN_BITS = {"float32": "0x7fc00000u", "float16": "0x7e00u"}  # what pooling.py pads a maximum with


@functools.lru_cache(maxsize=256)  # the text is built once per geometry, not on every call (about 0.1 ms)
def _source(kind: str, in_dtype: np.dtype, out_dtype: np.dtype, wide_indices: bool, window, strides,
            dilations) -> str:
    """The kernel for `kind` ("max", "average", "l1", "l2") from `in_dtype` to `out_dtype`; `wide_indices`: 64-bit
    index arithmetic (an input or output of 2^31 elements or more); window, strides, dilations: three values each."""
    in_c, out_c = _C_VALUE[in_dtype.name], _C_VALUE[out_dtype.name]
    # Index arithmetic in 32 bits where every index fits: 64-bit division and modulo are emulated on the GPU
    # and cost more than the memory traffic of a 2x2 window.
    index = "long long" if wide_indices else "int"
    # WindowSize, Strides and Dilations are compile-time constants, so that the window's loops unroll (a kernel
    # per geometry, compiled once and cached by CuPy on disk); the sizes and paddings are arguments.
    constants = "".join(f"    constexpr idx_t {name}{dim} = {value};\n"
                        for name, values in (("w", window), ("s", strides), ("d", dilations))
                        for dim, value in enumerate(values))
    header = (DEVICE_PRELUDE + SELECT_PRIMITIVES + FAST_DIVISION + f'\ntypedef {index} idx_t;\n'
              f'extern "C" __global__ void dml_kernel(const {in_c}* xs, {out_c}* ys,\n'
              "    const long long li0, const long long li1, const long long li2,\n"
              "    const long long lo0, const long long lo1, const long long lo2,\n"
              "    const long long lp0, const long long lp1, const long long lp2,\n"
              "    const int include_padding, const unsigned int m0, const unsigned int m1, const unsigned int m2,\n"
              "    const unsigned int r0, const unsigned int r1, const unsigned int r2, const long long n) {\n"
              "    const idx_t i0 = (idx_t)li0, i1 = (idx_t)li1, i2 = (idx_t)li2;\n"
              "    const idx_t o0 = (idx_t)lo0, o1 = (idx_t)lo1, o2 = (idx_t)lo2;\n"
              "    const idx_t p0 = (idx_t)lp0, p1 = (idx_t)lp1, p2 = (idx_t)lp2;\n"
              f"{constants}"
              "    const idx_t stride = (idx_t)gridDim.x * blockDim.x;\n"
              "    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {\n"
              "        idx_t t = i;\n"
              f"{_coordinates(wide_indices)}"
              f"        const {in_c}* plane = xs + (long long)t * (i0 * i1 * i2);\n")
    loops = ("        for (idx_t a = 0; a < w0; ++a) {\n"
             "            const idx_t x0 = c0 * s0 - p0 + a * d0;\n"
             "            const bool in0 = x0 >= 0 && x0 < i0;\n"
             "            for (idx_t b = 0; b < w1; ++b) {\n"
             "                const idx_t x1 = c1 * s1 - p1 + b * d1;\n"
             "                const bool in1 = in0 && x1 >= 0 && x1 < i1;\n"
             "                for (idx_t c = 0; c < w2; ++c) {\n"
             "                    const idx_t x2 = c2 * s2 - p2 + c * d2;\n"
             "                    const bool inside = in1 && x2 >= 0 && x2 < i2;\n"
             "{step}"
             "                }\n            }\n        }\n")
    if kind == "max":
        body = _max_body(in_dtype, loops)
    else:
        body = _sum_body(kind, in_dtype, out_dtype, loops)
    return header + body + "    }\n}\n"


# A float maximum whose window lies inside the input takes PTX max.f32 over it first (two instructions an element:
# a load and a max, no bounds). Where that maximum is a nonzero number it is the rule's value bit for bit (a NaN
# gives way to any number, and equal nonzero floats have one bit pattern); a zero (which zero wins a tie is the
# rule's, not the hardware's) or an all-NaN window (which NaN) falls through to the element-by-element loop.
_INSIDE_MAX = """        {
        const idx_t b0 = c0 * s0 - p0, b1 = c1 * s1 - p1, b2 = c2 * s2 - p2;
        if (b0 >= 0 && b0 + (w0 - 1) * d0 < i0 && b1 >= 0 && b1 + (w1 - 1) * d1 < i1 && b2 >= 0
                && b2 + (w2 - 1) * d2 < i2) {
            const RAW_T* corner = plane + (b0 * i1 + b1) * i2 + b2;
            float m = VALUE(corner[0]);
            #pragma unroll
            for (idx_t a = 0; a < w0; ++a)
                #pragma unroll
                for (idx_t b = 0; b < w1; ++b)
                    #pragma unroll
                    for (idx_t c = 0; c < w2; ++c)
                        m = dml_fmax(m, VALUE(corner[(a * d0 * i1 + b * d1) * i2 + c * d2]));
            if ((__float_as_uint(m) & 0x7fffffffu) - 1u < 0x7f800000u) {  // neither a zero nor a NaN
                ys[i] = STORE(m);
                continue;
            }
        }
        }
"""


def _coordinates(wide_indices: bool) -> str:
    """The output element's coordinates c2, c1, c0 and plane t from its index i. In 32 bits, each division is a
    multiplication by a precomputed magic number (cuda_prelude.fast_division's m and r): three integer divisions
    were most of a 3x3 window's work (the kernel was compute-bound, the memory a fifth busy)."""
    if wide_indices:
        return ("        const idx_t c2 = t % o2; t /= o2;\n"
                "        const idx_t c1 = t % o1; t /= o1;\n"
                "        const idx_t c0 = t % o0; t /= o0;\n")
    lines = []
    for d in (2, 1, 0):
        lines.append(f"        const unsigned int q{d} = dml_fast_divide((unsigned int)t, (unsigned int)o{d}, m{d},"
                     f" r{d});\n"
                     f"        const idx_t c{d} = t - (idx_t)q{d} * o{d}; t = (idx_t)q{d};\n")
    return "".join(lines)


# The maximum's rule for one element v against the best so far, as C++ conditions: whether v is a NaN, and whether it
# takes the best's place (the first element; a number after NaN; a greater number). The generic kernel's loop and
# the strip kernel's out-of-line fallback both use them.
_V_IS_NAN = "(__float_as_uint(v) & 0x7fffffffu) > 0x7f800000u"
_V_TAKES_OVER = "!seen || (best_nan && !v_nan) || (!v_nan && dml_gt(v, best))"


def _max_body(dtype: np.dtype, loops: str) -> str:
    if dtype.kind == "f":
        value = "dml_half_to_float(raw)" if dtype.name == "float16" else "raw"
        inside = (_INSIDE_MAX.replace("RAW_T", _C_VALUE[dtype.name])
                  .replace("VALUE(", "dml_half_to_float(" if dtype.name == "float16" else "(")
                  .replace("STORE(m)", "dml_float_to_half(m)" if dtype.name == "float16" else "m"))
        step = ("                    if (!inside) continue;\n"
                f"                    const {_C_VALUE[dtype.name]} raw = plane[(x0 * i1 + x1) * i2 + x2];\n"
                f"                    const float v = {value};\n"
                f"                    const bool v_nan = {_V_IS_NAN};\n"
                f"                    if ({_V_TAKES_OVER}) {{\n"
                "                        best = v; best_raw = raw; best_nan = v_nan; seen = true;\n"
                "                    }\n")
        return (inside + f"        {_C_VALUE[dtype.name]} best_raw = {_NAN_BITS[dtype.name]};\n"
                "        float best = 0.0f; bool best_nan = true, seen = false;\n"
                + loops.replace("{step}", step) + "        ys[i] = best_raw;\n")
    c_type = _C_VALUE[dtype.name]
    step = ("                    if (!inside) continue;\n"
            f"                    const {c_type} v = plane[(x0 * i1 + x1) * i2 + x2];\n"
            "                    if (!seen || v > best) { best = v; seen = true; }\n")
    return (f"        {c_type} best = 0; bool seen = false;\n" + loops.replace("{step}", step)
            + "        ys[i] = best;\n")


def _sum_body(kind: str, in_dtype: np.dtype, out_dtype: np.dtype, loops: str) -> str:
    value = "dml_half_to_float(plane[(x0 * i1 + x1) * i2 + x2])" if in_dtype.name == "float16" else \
        "plane[(x0 * i1 + x1) * i2 + x2]"
    # |v| by its bits: under CuPy's -ftz=true a compiler-made fabsf is abs.ftz, which would flush a subnormal.
    magnitude = "__uint_as_float(__float_as_uint(v) & 0x7fffffffu)"
    term = {"average": "v", "l1": magnitude, "l2": f"dml_mul({magnitude}, {magnitude})"}[kind]
    step = (f"                    const float v = inside ? {value} : 0.0f;\n"
            f"                    const float term = {term};\n"
            "                    total = first ? term : dml_add(total, term);\n"
            "                    first = false;\n")
    # The divisor without IncludePadding: each dimension's count of input elements read, multiplied in FLOAT32
    # in pooling.py's order (valid_counts; exact for any real window).
    counts = ("        idx_t n0 = 0, n1 = 0, n2 = 0;\n"
              "        for (idx_t a = 0; a < w0; ++a) { const idx_t x0 = c0 * s0 - p0 + a * d0; "
              "n0 += (x0 >= 0 && x0 < i0); }\n"
              "        for (idx_t b = 0; b < w1; ++b) { const idx_t x1 = c1 * s1 - p1 + b * d1; "
              "n1 += (x1 >= 0 && x1 < i1); }\n"
              "        for (idx_t c = 0; c < w2; ++c) { const idx_t x2 = c2 * s2 - p2 + c * d2; "
              "n2 += (x2 >= 0 && x2 < i2); }\n")
    if kind == "average":
        divisor = ("include_padding ? (float)(w0 * w1 * w2) : "
                   "dml_mul(dml_mul((float)n0, (float)n1), (float)n2)")
        finish = (counts + f"        const float divisor = {divisor};\n"
                  "        const float result = dml_div(total, divisor);\n")
    elif kind == "l1":
        finish = "        const float result = total;\n"
    else:
        finish = "        const float result = dml_sqrt_rn(total);\n"
    store = "dml_float_to_half(result)" if out_dtype.name == "float16" else "result"
    # A window inside the input: every count is the window's own size (n0 = w0, ...), so the same divisor.
    inside_finish = finish.replace(counts, "        const idx_t n0 = w0, n1 = w1, n2 = w2;\n") if kind == "average" \
        else finish
    at = "corner[(a * d0 * i1 + b * d1) * i2 + c * d2]"
    inside = (_INSIDE_SUM.replace("RAW_T", _C_VALUE[in_dtype.name])
              .replace("VALUE", f"dml_half_to_float({at})" if in_dtype.name == "float16" else at)
              .replace("TERM", term).replace("FINISH", inside_finish).replace("STORE", store))
    return (inside + "        float total = 0.0f; bool first = true;\n"
            + loops.replace("{step}", step) + finish + f"        ys[i] = {store};\n")


# An average or Lp sum whose window lies inside the input: the window's loads without bounds tests or padding terms
# (the same elements, added in the same row-major order from the same first element, so the same bits). The generic
# loop's tests, padding selects and per-dimension counts were most of a 2x2 window's instructions: AVERAGE 2x2
# stride 2 moved 0.76 of the H200's copy bandwidth where MAX 2x2, whose inside windows already skip them, reached
# 0.8 (issue 33).
_INSIDE_SUM = """        {
        const idx_t b0 = c0 * s0 - p0, b1 = c1 * s1 - p1, b2 = c2 * s2 - p2;
        if (b0 >= 0 && b0 + (w0 - 1) * d0 < i0 && b1 >= 0 && b1 + (w1 - 1) * d1 < i1 && b2 >= 0
                && b2 + (w2 - 1) * d2 < i2) {
            const RAW_T* corner = plane + (b0 * i1 + b1) * i2 + b2;
            float total = 0.0f;
            #pragma unroll
            for (idx_t a = 0; a < w0; ++a)
                #pragma unroll
                for (idx_t b = 0; b < w1; ++b)
                    #pragma unroll
                    for (idx_t c = 0; c < w2; ++c) {
                        const float v = VALUE;
                        const float term = TERM;
                        total = (a == 0 && b == 0 && c == 0) ? term : dml_add(total, term);
                    }
FINISH            ys[i] = STORE;
            continue;
        }
        }
"""


# FLOAT32 max pooling with stride 1 and no dilation over two spatial dimensions and windows of 3 to 7 rows (a "same"
# 3x3 or 5x5 maximum): a thread takes STRIP_ROWS outputs down one column. Each input row it reads gives one
# horizontal maximum of the window's width, which serves every output of the strip whose window covers that row:
# (STRIP_ROWS + h - 1) * w loads for STRIP_ROWS outputs instead of h * w each. The maxima are PTX max.f32
# (cuda_prelude's dml_fmax: a NaN gives way to any number), padding reads as NaN; an output whose maximum is a zero or
# a NaN takes the rule element by element (the first zero of a tie in window order; NaN bits as the generic kernel
# gives them), so every output is the generic kernel's bit for bit. On the H100 (1 GiB of 512 x 512 planes, one
# run): 3x3 0.71 of the copy with strips of 8 rows (4: 0.72, 2: 0.54; the generic kernel 0.58), 5x5 0.55 (4: 0.40;
# generic 0.32); 2x2 windows keep the generic kernel (0.72 against 0.68 for strips). A shared-memory tile of 32 x 32
# outputs measured slower (3x3 0.49, 2x2 0.52).
STRIP_ROWS = 8
STRIP_MIN_ROWS, STRIP_MAX_WINDOW = 3, 7


# The rule element by element over a window of WH x WW of one plane (its top row and left column given, padding
# skipped), for an output whose fast maximum is a zero or a NaN: the strip and slide kernels' fallback (rare: kept out
# of line, so that their loops keep few registers).
_WINDOW_RULE = f"""
__device__ __noinline__ float dml_window_rule(const float* plane, idx_t h, idx_t w, idx_t top_row, idx_t left) {{
    unsigned int best_raw = 0x7fc00000u;
    float best = 0.0f; bool best_nan = true, seen = false;
    for (int a = 0; a < WH; ++a) {{
        const idx_t row = top_row + a;
        if (row < 0 || row >= h) continue;
        for (int k = 0; k < WW; ++k) {{
            const idx_t col = left + k;
            if (col < 0 || col >= w) continue;
            const float v = plane[row * w + col];
            const bool v_nan = {_V_IS_NAN};
            if ({_V_TAKES_OVER}) {{
                best = v; best_raw = __float_as_uint(v); best_nan = v_nan; seen = true;
            }}
        }}
    }}
    return __uint_as_float(best_raw);
}}
"""


@functools.lru_cache(maxsize=64)
def _strip_source(window_rows: int, window_cols: int, wide_indices: bool) -> str:
    index = "long long" if wide_indices else "int"
    rows = STRIP_ROWS + window_rows - 1
    division = ("        const idx_t c = t % wo; t /= wo;\n        const idx_t strip = t % strips; t /= strips;\n"
                if wide_indices else
                "        idx_t q = (idx_t)dml_fast_divide((unsigned int)t, (unsigned int)wo, m_wo, r_wo);\n"
                "        const idx_t c = t - q * wo; t = q;\n"
                "        q = (idx_t)dml_fast_divide((unsigned int)t, (unsigned int)strips, m_strips, r_strips);\n"
                "        const idx_t strip = t - q * strips; t = q;\n")
    return (DEVICE_PRELUDE + SELECT_PRIMITIVES + FAST_DIVISION + f"""
typedef {index} idx_t;
#define WH {window_rows}
#define WW {window_cols}
#define ROWS {rows}
{_WINDOW_RULE}
extern "C" __global__ void dml_kernel(const float* __restrict__ xs, float* __restrict__ ys, const long long lh,
        const long long lw, const long long lho, const long long lwo, const long long lpt, const long long lpl,
        const long long lstrips, const unsigned int m_wo, const unsigned int r_wo, const unsigned int m_strips,
        const unsigned int r_strips, const long long n) {{
    const idx_t h = (idx_t)lh, w = (idx_t)lw, ho = (idx_t)lho, wo = (idx_t)lwo, pt = (idx_t)lpt, pl = (idx_t)lpl;
    const idx_t strips = (idx_t)lstrips;
    const float nan = __int_as_float(0x7fc00000);
    const idx_t stride = (idx_t)gridDim.x * blockDim.x;
    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {{
        idx_t t = i;
{division}        const float* plane = xs + (long long)t * (h * w);
        float* out = ys + (long long)t * (ho * wo);
        const idx_t top = strip * {STRIP_ROWS}, left = c - pl;
        // Every load unconditional, from a row and column clamped into the input (a padding element's value is
        // then replaced by NaN): the strip's loads issue back to back instead of one bounds test at a time
        // (Nsight Compute showed the kernel latency-bound, memory 52% and compute well under it).
        idx_t cols[WW];
        bool col_in[WW];
        #pragma unroll
        for (int k = 0; k < WW; ++k) {{
            const idx_t col = left + k;
            col_in[k] = col >= 0 && col < w;
            cols[k] = col < 0 ? 0 : (col >= w ? w - 1 : col);
        }}
        float across[ROWS];
        #pragma unroll
        for (int r = 0; r < ROWS; ++r) {{
            const idx_t row = top - pt + r;
            const bool row_in = row >= 0 && row < h;
            const float* line = plane + (row < 0 ? 0 : (row >= h ? h - 1 : row)) * w;
            float m = nan;
            #pragma unroll
            for (int k = 0; k < WW; ++k) {{
                const float v = line[cols[k]];
                m = dml_fmax(m, row_in && col_in[k] ? v : nan);
            }}
            across[r] = m;
        }}
        #pragma unroll
        for (int o = 0; o < {STRIP_ROWS}; ++o) {{
            const idx_t y = top + o;
            if (y >= ho) break;
            float m = across[o];
            #pragma unroll
            for (int a = 1; a < WH; ++a) m = dml_fmax(m, across[o + a]);
            if ((__float_as_uint(m) & 0x7fffffffu) - 1u >= 0x7f800000u) m = dml_window_rule(plane, h, w, y - pt, left);
            out[y * wo + c] = m;
        }}
    }}
}}
""")


def strip_fits(x, geometry: dict, out_dtype) -> bool:
    """Whether the strip kernel takes a max pooling: FLOAT32 in and out, two spatial dimensions, stride 1, no
    dilation, a window of STRIP_MIN_ROWS to STRIP_MAX_WINDOW rows and at most STRIP_MAX_WINDOW columns."""
    window_rows, window_cols = geometry["WindowSize"] if len(geometry["WindowSize"]) == 2 else (0, 0)
    return (x.ndim == 4 and x.dtype == np.float32 and np.dtype(out_dtype) == np.float32
            and tuple(geometry["Strides"]) == (1, 1) and tuple(geometry["Dilations"]) == (1, 1)
            and STRIP_MIN_ROWS <= window_rows <= STRIP_MAX_WINDOW and 1 <= window_cols <= STRIP_MAX_WINDOW)


def max_strip_kernel(cp, x, geometry: dict, out_shape):
    """MAX_POOLING of `x` (C-contiguous FLOAT32 CuPy array, N C H W) by the strip kernel into a new array."""
    result = cp.empty(tuple(out_shape), dtype=cp.float32)
    if result.size == 0:
        return result
    (h, w), (ho, wo) = x.shape[2:], out_shape[2:]
    strips = -(-ho // STRIP_ROWS)
    count = x.shape[0] * x.shape[1] * strips * wo
    wide = max(x.size, result.size, count) >= 2**31 - 2**24
    window_rows, window_cols = geometry["WindowSize"]
    magic = [np.uint32(v) for size in (wo, strips) for v in fast_division(size)]
    launch(cp, _strip_source(window_rows, window_cols, wide), x, result,
           *(np.int64(v) for v in (h, w, ho, wo, geometry["StartPadding"][0], geometry["StartPadding"][1], strips)),
           *magic, count=count)
    return result


# FLOAT32 max pooling with stride 1, no dilation and the output as wide as the input (StartPadding + EndPadding of the
# columns = the window's width - 1: the "same" 3x3 and 5x5 maxima), rows of a multiple of 4 from a 16-byte boundary:
# a separable maximum that reads each input row once, in 16-byte vectors. A warp takes SLIDE_ROWS output rows of 128
# columns (32 lanes x 4) of one plane and walks down its input rows: lane l loads the row's vector l (512 contiguous
# bytes a warp), takes the PL columns before it and the PR after it from the lanes beside (warp shuffles; lane 0 and
# lane 31 load the columns beyond the warp themselves), and keeps the maximum across the window's width for its four
# columns; the last WH - 1 of those row maxima stay in registers, so that each output row is the maximum of WH of
# them, stored as one 16-byte vector. SLIDE_BATCH rows are loaded before any is used (80 registers for 3x3, ptxas
# sm_90: 24 warps an SM, 48 KiB of loads in flight). Padding reads as NaN (PTX max.f32 gives any number over it); an
# output whose maximum is a zero or a NaN takes the rule element by element (_WINDOW_RULE), so the bits are the
# generic kernel's. The strip kernel (a thread a column, 4-byte loads from three columns of each row: three load
# instructions an input element, most touching two lines) measured 0.58 of the H200's copy for 3x3 over
# { 256, 16, 256, 256 }.
SLIDE_ROWS = 32
SLIDE_BATCH = 4
SLIDE_MAX_SIDE = 4  # columns taken from each neighbouring vector at most


@functools.lru_cache(maxsize=64)
def _slide_source(window_rows: int, window_cols: int, left: int, wide_indices: bool) -> str:
    index = "long long" if wide_indices else "int"
    return (DEVICE_PRELUDE + SELECT_PRIMITIVES + f"""
typedef {index} idx_t;
#define WH {window_rows}
#define WW {window_cols}
#define PL {left}
#define PR (WW - 1 - PL)
#define SIDE (PL > PR ? (PL > 0 ? PL : 1) : (PR > 0 ? PR : 1))
#define SLIDE_ROWS {SLIDE_ROWS}
#define SLIDE_BATCH {SLIDE_BATCH}
{_WINDOW_RULE}
// The vector `group` of an input row, or NaN (padding) outside the row or the plane.
__device__ __forceinline__ float4 dml_row_vector(const float* line, idx_t group, idx_t groups, bool present) {{
    const float nan = __int_as_float(0x7fc00000);
    return present && group >= 0 && group < groups ? reinterpret_cast<const float4*>(line)[group]
                                                   : make_float4(nan, nan, nan, nan);
}}
extern "C" __global__ void dml_kernel(const float* __restrict__ xs, float* __restrict__ ys, const long long lh,
        const long long lw, const long long lho, const long long lpt, const long long lstrips,
        const long long lsegments, const long long n) {{
    const idx_t h = (idx_t)lh, w = (idx_t)lw, ho = (idx_t)lho, pt = (idx_t)lpt;
    const idx_t strips = (idx_t)lstrips, segments = (idx_t)lsegments, groups = w >> 2;
    const int lane = threadIdx.x & 31;
    // n is a multiple of 32 and so is the stride: a warp's lanes share each task and leave the loop together (the
    // shuffles need all 32).
    const idx_t stride = (idx_t)gridDim.x * blockDim.x;
    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {{
        idx_t t = i >> 5;
        const idx_t segment = t % segments; t /= segments;
        const idx_t strip = t % strips; t /= strips;
        const float* plane = xs + (long long)t * ((long long)h * w);
        float* out = ys + (long long)t * ((long long)ho * w);
        const idx_t group = segment * 32 + lane;  // this lane's four columns: 4 group to 4 group + 3
        const idx_t y0 = strip * SLIDE_ROWS;
        const idx_t outputs = ho - y0 < SLIDE_ROWS ? ho - y0 : SLIDE_ROWS;
        const idx_t inputs = outputs + (WH - 1);  // input rows y0 - pt to y0 - pt + inputs - 1
        float ring[WH][4];  // the last WH - 1 row maxima, oldest first
        for (idx_t k0 = 0; k0 < inputs; k0 += SLIDE_BATCH) {{
            float4 loaded[SLIDE_BATCH];
            float beside[SLIDE_BATCH][SIDE];  // lane 0: the PL columns before its vector; lane 31: the PR after
            #pragma unroll
            for (int b = 0; b < SLIDE_BATCH; ++b) {{
                const idx_t row = y0 - pt + k0 + b;
                const bool present = k0 + b < inputs && row >= 0 && row < h;
                const float* line = plane + (long long)(present ? row : 0) * w;
                loaded[b] = dml_row_vector(line, group, groups, present);
                #pragma unroll
                for (int q = 0; q < SIDE; ++q) {{
                    const idx_t col = lane == 0 ? group * 4 - PL + q : group * 4 + 4 + q;
                    const bool wanted = lane == 0 ? q < PL : (lane == 31 && q < PR);
                    beside[b][q] = present && wanted && col >= 0 && col < w ? line[col] : __int_as_float(0x7fc00000);
                }}
            }}
            #pragma unroll
            for (int b = 0; b < SLIDE_BATCH; ++b) {{
                const idx_t k = k0 + b;
                if (k >= inputs) break;  // the same for the whole warp
                // Columns 4 group - 4 to 4 group + 7 of the row: the vector before, this lane's, the one after.
                float r[12];
                r[4] = loaded[b].x; r[5] = loaded[b].y; r[6] = loaded[b].z; r[7] = loaded[b].w;
                #pragma unroll
                for (int q = 4 - PL; q < 4; ++q) {{
                    const float other = __shfl_up_sync(0xffffffffu, r[4 + q], 1);
                    r[q] = lane == 0 ? beside[b][q - (4 - PL)] : other;
                }}
                #pragma unroll
                for (int q = 0; q < PR; ++q) {{
                    const float other = __shfl_down_sync(0xffffffffu, r[4 + q], 1);
                    r[8 + q] = lane == 31 ? beside[b][q] : other;
                }}
                float across[4];
                #pragma unroll
                for (int j = 0; j < 4; ++j) {{
                    float m = r[4 + j - PL];
                    #pragma unroll
                    for (int c = 1; c < WW; ++c) m = dml_fmax(m, r[4 + j - PL + c]);
                    across[j] = m;
                }}
                if (k >= WH - 1 && group < groups) {{
                    const idx_t y = y0 + k - (WH - 1);
                    float m[4];
                    #pragma unroll
                    for (int j = 0; j < 4; ++j) {{
                        m[j] = across[j];
                        #pragma unroll
                        for (int a = 0; a < WH - 1; ++a) m[j] = dml_fmax(ring[a][j], m[j]);
                        if ((__float_as_uint(m[j]) & 0x7fffffffu) - 1u >= 0x7f800000u) {{  // a zero or a NaN
                            m[j] = dml_window_rule(plane, h, w, y - pt, group * 4 + j - PL);
                        }}
                    }}
                    reinterpret_cast<float4*>(out + (long long)y * w)[group] = make_float4(m[0], m[1], m[2], m[3]);
                }}
                #pragma unroll
                for (int a = 0; a + 2 < WH; ++a) {{
                    #pragma unroll
                    for (int j = 0; j < 4; ++j) ring[a][j] = ring[a + 1][j];
                }}
                #pragma unroll
                for (int j = 0; j < 4; ++j) ring[WH - 2 < 0 ? 0 : WH - 2][j] = across[j];
            }}
        }}
    }}
}}
""")


def slide_fits(x, geometry: dict, out_shape, out_dtype) -> bool:
    """Whether the slide kernel takes a max pooling: what strip_fits takes, with an output as wide as the input, at
    most SLIDE_MAX_SIDE columns of padding on either side, and rows of a multiple of 4 elements from a 16-byte
    boundary (a view may start anywhere)."""
    if not strip_fits(x, geometry, out_dtype):
        return False
    window_cols, left = geometry["WindowSize"][1], geometry["StartPadding"][1]
    right = window_cols - 1 - left
    return (out_shape[3] == x.shape[3] and x.shape[3] % 4 == 0 and x.data.ptr % 16 == 0
            and 0 <= left <= SLIDE_MAX_SIDE and 0 <= right <= SLIDE_MAX_SIDE)


def max_slide_kernel(cp, x, geometry: dict, out_shape):
    """MAX_POOLING of `x` (C-contiguous FLOAT32 CuPy array, N C H W) by the slide kernel into a new array."""
    result = cp.empty(tuple(out_shape), dtype=cp.float32)
    if result.size == 0:
        return result
    h, w = x.shape[2:]
    ho = out_shape[2]
    strips = -(-ho // SLIDE_ROWS)
    segments = -(-(w // 4) // 32)
    threads = x.shape[0] * x.shape[1] * strips * segments * 32
    wide = max(x.size, result.size, threads) >= 2**31 - 2**24
    window_rows, window_cols = geometry["WindowSize"]
    launch(cp, _slide_source(window_rows, window_cols, geometry["StartPadding"][1], wide), x, result,
           *(np.int64(v) for v in (h, w, ho, geometry["StartPadding"][0], strips, segments)), count=threads)
    return result


def _spatial3(values, fill: int) -> list[int]:
    """A per-spatial-dimension tuple as three values, the missing leading ones `fill`."""
    values = list(values)
    return [fill] * (3 - len(values)) + values


def window_kernel(cp, kind: str, x, geometry: dict, out_shape, out_dtype, include_padding: bool = False):
    """Run the `kind` kernel of `x` (a C-contiguous CuPy array, rank 3 to 5) over `geometry` into a new array of
    `out_shape` and `out_dtype`."""
    out_dtype = np.dtype(out_dtype)
    result = cp.empty(tuple(out_shape), dtype=out_dtype)
    if result.size == 0:
        return result
    wide = max(x.size, result.size) >= 2**31 - 2**24  # room for the grid-stride step past the last element
    source = _source(kind, np.dtype(x.dtype), out_dtype, wide, tuple(_spatial3(geometry["WindowSize"], 1)),
                     tuple(_spatial3(geometry["Strides"], 1)), tuple(_spatial3(geometry["Dilations"], 1)))
    sizes = _spatial3(x.shape[2:], 1) + _spatial3(out_shape[2:], 1) + _spatial3(geometry["StartPadding"], 0)
    arguments = [np.int64(v) for v in sizes]
    magic = [fast_division(d) for d in _spatial3(out_shape[2:], 1)]
    in_view = x.view(np.uint16) if x.dtype == np.float16 else x
    out_view = result.view(np.uint16) if out_dtype == np.float16 else result
    launch(cp, source, in_view, out_view, *arguments, np.int32(bool(include_padding)),
           *(np.uint32(m) for m, _ in magic), *(np.uint32(r) for _, r in magic), count=result.size)
    return result


def fits(x) -> bool:
    """Whether the kernels take this input: rank 3 to 5 (1 to 3 spatial dimensions)."""
    return 3 <= x.ndim <= 5
