"""The reduction family's own CUDA kernels, where CuPy's calls read the input more than once or compute an index
per element (issue 23: reductions at >= 0.7 of the copy bandwidth and never slower than CuPy's own call).

- REDUCE of FLOAT32 (FLOAT16 widened) rows over trailing axes: one block per row, float4 loads,
  SUM, AVERAGE, MAX, MIN, L1, L2 and SUM_SQUARE; over leading axes: a column kernel (chunks of rows, then the
  chunks' partial results combined); MAX, MIN, L1, L2 and SUM_SQUARE over other axes by a CuPy reduction kernel.
  MAX and MIN combine by PTX's max.f32/min.f32, which is ELEMENT_WISE_MAX/MIN's rule (a NaN gives way to any
  number; NaN only where every element is NaN), without flush to zero; CuPy has no fmax.reduce.
- ARGMAX/ARGMIN (REDUCE's, HARDMAX's) of rows: one block per row, NaN skipped, ties by the direction.
- Softmax and log-softmax over the last axis: one block per row, the row staged in shared memory where it fits
  (one read and one write of device memory; CuPy's expression makes five passes).
- CUMULATIVE_SUMMATION along the last axis: for 4-byte types and rows of a multiple of 4, one warp per row where
  there are many rows (16-byte vectors, a carry in registers), a block scan per row where there are few (16
  elements a thread in registers); shared-memory tiles otherwise.
The sums add in another order than the CPU's (as CuPy's do), within the operators' tolerances that grow with the
reduced length; MAX, MIN and the ARG functions select, so the values are the CPU's.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics.cuda_prelude import BLOCK_COMBINE, C_INTEGER_TYPES, COMPILE_OPTIONS, DEVICE_PRELUDE, SELECT_PRIMITIVES

_KERNELS: dict = {}

_REDUCTION_PRIMITIVES = SELECT_PRIMITIVES + """
__device__ __forceinline__ float dml_quiet_nan() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ float dml_magnitude(float v) { return __uint_as_float(__float_as_uint(v) & 0x7fffffffu); }
"""

# REDUCE's functions on FLOAT32 values as (map of x, combine of a and b, identity, finish of a). Long rows over
# trailing axes: one block per row (rows of ROW_MINIMUM elements or more), float4 loads where the rows allow, the
# threads' partial results combined by warp shuffles and shared memory: one read of the input, no index arithmetic
# per element (CuPy's reduction kernels compute one). AVERAGE divides the FLOAT32 sum by the FLOAT32 count, as the
# xp kernel does. Over other axes, the functions of _ANY_AXES run as CuPy reduction kernels built from the same
# texts (CuPy substitutes the parameter names in them, even inside a literal such as 0x7f..., so constants live in
# the preamble's functions).
_FUNCTIONS = {
    "SUM": ("x", "dml_add(a, b)", "0.0f", "a"),
    "AVERAGE": ("x", "dml_add(a, b)", "0.0f", "dml_div(a, (float)count)"),
    "MAX": ("x", "dml_fmax(a, b)", "dml_quiet_nan()", "a"),
    "MIN": ("x", "dml_fmin(a, b)", "dml_quiet_nan()", "a"),
    "L1": ("dml_magnitude(x)", "dml_add(a, b)", "0.0f", "a"),
    "SUM_SQUARE": ("dml_mul(x, x)", "dml_add(a, b)", "0.0f", "a"),
    "L2": ("dml_mul(x, x)", "dml_add(a, b)", "0.0f", "dml_sqrt_rn(a)"),
}
_ANY_AXES = ("MAX", "MIN", "L1", "SUM_SQUARE", "L2")  # their finish needs no count
ROW_MINIMUM = 1024
# A block's threads for the row reductions: 512 for rows of 8192 elements or more, 256 for shorter ones (on the
# H100, 1 GiB of 16384-element rows: 0.93 to 0.98 of the copy for SUM, MAX and L2; SUM's kernel 0.3635 ms with 512
# threads, 0.3668 with 256 and 0.3686 with 1024 in one run, MAX's alike).
ROW_THREADS, SHORT_ROW_THREADS = 512, 256
# For ARGMAX/ARGMIN rows: small blocks, many of them resident on each SM, so that one block's final combine and
# barrier overlap the others' loads (1 GiB of 16384-element rows, two probes: 128 threads 0.85 to 0.97 of the copy,
# 1024 threads 0.44 to 0.68).
ARG_THREADS = 128
_ROW_FUNCTIONS = """
__device__ __forceinline__ float dml_row_combine(float a, float b) { return DML_COMBINE(a, b); }
__device__ __forceinline__ float dml_row_map(float x) { return DML_MAP(x); }
__device__ __forceinline__ float dml_row_finish(float a, long long count) { return DML_FINISH(a); }
"""
_ROW_REDUCE_BODY = """

extern "C" __global__ void dml_kernel(const float* xs, float* ys, const long long count, const long long rows) {
    __shared__ float shared[32];
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* x = xs + row * count;
        float a = DML_IDENTITY;
#if DML_VECTOR == 4
        #pragma unroll 4
        for (long long j = threadIdx.x; j < count / 4; j += blockDim.x) {
            const float4 f = reinterpret_cast<const float4*>(x)[j];
            a = dml_row_combine(a, dml_row_map(f.x));
            a = dml_row_combine(a, dml_row_map(f.y));
            a = dml_row_combine(a, dml_row_map(f.z));
            a = dml_row_combine(a, dml_row_map(f.w));
        }
#else
        for (long long i = threadIdx.x; i < count; i += blockDim.x) a = dml_row_combine(a, dml_row_map(x[i]));
#endif
        for (int offset = 16; offset > 0; offset >>= 1) a = dml_row_combine(a, __shfl_down_sync(0xffffffffu, a, offset));
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane == 0) shared[warp] = a;
        __syncthreads();
        if (warp == 0) {
            a = lane < (int)(blockDim.x >> 5) ? shared[lane] : DML_IDENTITY;
            for (int offset = 16; offset > 0; offset >>= 1) {
                a = dml_row_combine(a, __shfl_down_sync(0xffffffffu, a, offset));
            }
            if (lane == 0) ys[row] = dml_row_finish(a, count);
        }
        __syncthreads();
    }
}
"""


# REDUCE over leading axes (columns of a row-major array): a thread per column (four by float4 where the rows
# allow) adds a chunk of rows, the chunks' partial results go to a small buffer that a second kernel combines,
# so that about 2^18 threads read the input once, coalesced, whatever the number of columns.
_COLUMN_REDUCE_BODY = """
extern "C" __global__ void dml_columns(const float* xs, float* partials, const long long rows, const long long cols,
                                       const long long rows_per_chunk) {
    const long long chunk = blockIdx.y, first = chunk * rows_per_chunk;
    const long long last = rows < first + rows_per_chunk ? rows : first + rows_per_chunk;
    const long long stride = (long long)gridDim.x * blockDim.x;
#if DML_VECTOR == 4
    for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < cols / 4; g += stride) {
        float4 a = make_float4(DML_IDENTITY, DML_IDENTITY, DML_IDENTITY, DML_IDENTITY);
        #pragma unroll 4
        for (long long r = first; r < last; ++r) {
            const float4 f = reinterpret_cast<const float4*>(xs + r * cols)[g];
            a.x = dml_row_combine(a.x, dml_row_map(f.x));
            a.y = dml_row_combine(a.y, dml_row_map(f.y));
            a.z = dml_row_combine(a.z, dml_row_map(f.z));
            a.w = dml_row_combine(a.w, dml_row_map(f.w));
        }
        reinterpret_cast<float4*>(partials + chunk * cols)[g] = a;
    }
#else
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < cols; c += stride) {
        float a = DML_IDENTITY;
        #pragma unroll 4
        for (long long r = first; r < last; ++r) a = dml_row_combine(a, dml_row_map(xs[r * cols + c]));
        partials[chunk * cols + c] = a;
    }
#endif
}

extern "C" __global__ void dml_columns_finish(const float* partials, float* ys, const long long chunks,
                                              const long long cols, const long long count) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < cols; c += stride) {
        float a = partials[c];
        for (long long k = 1; k < chunks; ++k) a = dml_row_combine(a, partials[k * cols + c]);
        ys[c] = dml_row_finish(a, count);
    }
}
"""
COLUMN_MINIMUM = 2**16  # elements: below it the CuPy reduction's single launch costs less
_COLUMN_THREADS = 2**18  # threads the column kernel aims at (about 2048 per SM on an H100)


def reduce(cp, function: str, work, axes):
    """REDUCE `function` of a FLOAT32 (or widened FLOAT16) CuPy array over `axes` in one pass: long rows over
    trailing axes by the one-block-per-row kernel, leading axes by the column kernel, MAX, MIN, L1, L2 and SUM_SQUARE otherwise by a CuPy
    reduction kernel; None for a call neither takes (the shared xp kernel then runs). The result keeps the kept
    axes only (the caller reshapes)."""
    axes = tuple(sorted(axes))
    first = work.ndim - len(axes)
    count = math.prod(work.shape[first:])
    if function in _FUNCTIONS and axes == tuple(range(first, work.ndim)) and count >= ROW_MINIMUM:
        return _reduce_rows(cp, function, cp.ascontiguousarray(work), count).reshape(work.shape[:first])
    if (function in _FUNCTIONS and axes == tuple(range(len(axes))) and len(axes) < work.ndim
            and work.size >= COLUMN_MINIMUM):
        leading = math.prod(work.shape[:len(axes)])
        columns = cp.ascontiguousarray(work).reshape(leading, -1)
        return _reduce_columns(cp, function, columns).reshape(work.shape[len(axes):])
    if function not in _ANY_AXES:
        return None
    kernel = _KERNELS.get(function)
    if kernel is None:
        map_expr, combine, identity, finish = _FUNCTIONS[function]
        kernel = _KERNELS[function] = cp.ReductionKernel(
            "float32 x", "float32 y", map_expr, combine, f"y = {finish}", identity, f"dml_reduce_{function.lower()}",
            preamble=DEVICE_PRELUDE + _REDUCTION_PRIMITIVES, options=COMPILE_OPTIONS)
    return kernel(work, axis=axes[0] if len(axes) == 1 else axes)


def _reduce_rows(cp, function: str, rows, count: int):
    """`function` of each row of `count` elements of a C-contiguous FLOAT32 CuPy array (any shape: the kernel reads
    its memory as rows; no reshape, which costs a microsecond before the launch)."""
    total = rows.size // count
    result = cp.ndarray((total,), dtype=cp.float32)  # cp.empty's checks cost 2 us more, before the launch
    if total == 0:
        return result
    vector = 4 if count % 4 == 0 and rows.data.ptr % 16 == 0 else 1  # a view may start anywhere
    kernel = _KERNELS.get(("rows", function, vector))
    if kernel is None:
        kernel = _KERNELS[("rows", function, vector)] = cp.RawKernel(
            _reduction_source(function, vector, _ROW_REDUCE_BODY), "dml_kernel", options=COMPILE_OPTIONS)
    threads = ROW_THREADS if count >= 8192 else SHORT_ROW_THREADS
    kernel((int(min(total, 65535)),), (threads,), (rows, result, np.int64(count), np.int64(total)))
    return result


def _reduction_source(function: str, vector: int, body: str) -> str:
    """A kernel text of the row and column reductions for `function`: its map, combine, identity and finish."""
    map_expr, combine, identity, finish = _FUNCTIONS[function]
    return (DEVICE_PRELUDE + _REDUCTION_PRIMITIVES + f"\n#define DML_MAP(x) {map_expr}\n"
            f"#define DML_COMBINE(a, b) {combine}\n#define DML_IDENTITY {identity}\n"
            f"#define DML_FINISH(a) {finish}\n#define DML_VECTOR {vector}\n" + _ROW_FUNCTIONS + body)


def _reduce_columns(cp, function: str, columns):
    """`function` of each column of a C-contiguous 2-D FLOAT32 CuPy array."""
    rows, cols = columns.shape
    result = cp.empty(cols, dtype=cp.float32)
    vector = 4 if cols % 4 == 0 and columns.data.ptr % 16 == 0 else 1  # a view may start anywhere
    kernels = _KERNELS.get(("columns", function, vector))
    if kernels is None:
        module = cp.RawModule(code=_reduction_source(function, vector, _COLUMN_REDUCE_BODY), options=COMPILE_OPTIONS)
        kernels = _KERNELS[("columns", function, vector)] = (module.get_function("dml_columns"),
                                                             module.get_function("dml_columns_finish"))
    threads = 256
    lanes = cols // vector
    chunks = int(max(1, min(rows, 65535, _COLUMN_THREADS // max(lanes, 1))))
    rows_per_chunk = -(-rows // chunks)
    chunks = -(-rows // rows_per_chunk)
    partials = cp.empty((chunks, cols), dtype=cp.float32)
    kernels[0]((int(min(-(-lanes // threads), 65535)), chunks), (threads,),
               (columns, partials, np.int64(rows), np.int64(cols), np.int64(rows_per_chunk)))
    kernels[1]((int(min(-(-cols // threads), 65535)),), (threads,),
               (partials, result, np.int64(chunks), np.int64(cols), np.int64(rows)))
    return result


# One block per row of `count` FLOAT32 elements (rows contiguous). Pass 1: the row's maximum (NaN propagates, as x -
# max does in the xp kernel); pass 2: the sum of exp(x - max); pass 3: the output. Block-wide combines go through
# shared memory (cuda_prelude.BLOCK_COMBINE). Compiled with the IEEE primitives for the subtraction and division; exp
# is CUDA's expf (2 ULP), within the softmax tolerance as CuPy's exp is; the division by the sum is a product with its
# reciprocal (1.5 ULP at most, against 3N + 3 allowed), one division a row instead of one an element. A row that fits
# SOFTMAX_STAGE_BYTES is staged in shared memory by pass 1 (and holds exp(x - max) after pass 2), so device memory
# sees one read and one write; a longer row is read three times, the second and third mostly from the L2 cache. Every
# thread reads and writes only its own elements of the stage (the same indices in every pass), so the passes need no
# barrier of their own. Rows of a multiple of 4 elements go by float4 (DML_VECTOR 4): a thread's 4 neighbours are
# combined left to right. A staged float4 row is copied to the stage by cp.async (sm_80 on): pass 1's loop, one
# float4 a thread and iteration through a register, kept one 16-byte load in flight per thread (2 blocks of 1024
# threads an SM: 32 KiB, and only while both blocks were in pass 1), and 1 GiB of 16384-element rows went at 0.70
# of the H200's copy bandwidth; every copy of the row is now issued before the thread waits (the block's 64 KiB in
# flight at once, no registers: batching the loads in registers would take 16 more and leave one block an SM). The
# maximum is then read from the stage: the same elements, and a maximum does not depend on the order, so the
# results keep their bits.
_SOFTMAX_BODY = """
#if DML_VECTOR == 4
typedef float4 V;
__device__ __forceinline__ float dml_v_peak(V v) { return dml_peak(dml_peak(dml_peak(v.x, v.y), v.z), v.w); }
__device__ __forceinline__ V dml_v_exp(V v, float peak) {
    return make_float4(expf(dml_sub(v.x, peak)), expf(dml_sub(v.y, peak)), expf(dml_sub(v.z, peak)),
                       expf(dml_sub(v.w, peak)));
}
__device__ __forceinline__ float dml_v_sum(V v) { return ((v.x + v.y) + v.z) + v.w; }
__device__ __forceinline__ V dml_v_log_out(V v, float peak, float log_total) {
    return make_float4(dml_sub(dml_sub(v.x, peak), log_total), dml_sub(dml_sub(v.y, peak), log_total),
                       dml_sub(dml_sub(v.z, peak), log_total), dml_sub(dml_sub(v.w, peak), log_total));
}
__device__ __forceinline__ V dml_v_scale(V e, float inverse) {
    return make_float4(dml_mul(e.x, inverse), dml_mul(e.y, inverse), dml_mul(e.z, inverse), dml_mul(e.w, inverse));
}
#else
typedef float V;
__device__ __forceinline__ float dml_v_peak(V v) { return v; }
__device__ __forceinline__ V dml_v_exp(V v, float peak) { return expf(dml_sub(v, peak)); }
__device__ __forceinline__ float dml_v_sum(V v) { return v; }
__device__ __forceinline__ V dml_v_log_out(V v, float peak, float log_total) {
    return dml_sub(dml_sub(v, peak), log_total);
}
__device__ __forceinline__ V dml_v_scale(V e, float inverse) { return dml_mul(e, inverse); }
#endif

extern "C" __global__ void dml_kernel(const float* xs, float* ys, const long long count, const int log_form,
                                      const long long rows, const int staged) {
    __shared__ float shared[33];
    extern __shared__ unsigned char stage_bytes[];
    V* stage = reinterpret_cast<V*>(stage_bytes);
    const long long vectors = count / DML_VECTOR;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const V* x = reinterpret_cast<const V*>(xs + row * count);
        V* y = reinterpret_cast<V*>(ys + row * count);
        float peak = -__int_as_float(0x7f800000);
#if DML_VECTOR == 4 && __CUDA_ARCH__ >= 800
        if (staged) {
            // Every 16-byte vector of the thread's share copied to the stage at once, without registers
            // (cp.async, sm_80 on); the thread waits for its own copies only: it alone reads those indices.
            for (long long i = threadIdx.x; i < vectors; i += blockDim.x) {
                const unsigned int to = (unsigned int)__cvta_generic_to_shared(stage + i);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(to), "l"(x + i) : "memory");
            }
            asm volatile("cp.async.wait_all;" ::: "memory");
            for (long long i = threadIdx.x; i < vectors; i += blockDim.x) peak = dml_peak(peak, dml_v_peak(stage[i]));
        } else
#endif
        for (long long i = threadIdx.x; i < vectors; i += blockDim.x) {
            const V v = x[i];
            if (staged) stage[i] = v;
            peak = dml_peak(peak, dml_v_peak(v));
        }
        peak = dml_block_combine(peak, shared, true);
        float total = 0.0f;
        for (long long i = threadIdx.x; i < vectors; i += blockDim.x) {
            const V e = dml_v_exp(staged ? stage[i] : x[i], peak);
            if (staged && !log_form) stage[i] = e;
            total += dml_v_sum(e);
        }
        total = dml_block_combine(total, shared, false);
        const float log_total = logf(total), inverse = dml_div(1.0f, total);
        for (long long i = threadIdx.x; i < vectors; i += blockDim.x) {
            const V v = staged ? stage[i] : x[i];
            y[i] = log_form ? dml_v_log_out(v, peak, log_total)
                            : dml_v_scale(staged ? v : dml_v_exp(v, peak), inverse);
        }
    }
}
"""
SOFTMAX_STAGE_BYTES = 96 * 1024  # two blocks of 1024 threads per SM still fit the H100's 228 KiB
SOFTMAX_THREADS = 1024  # a block's threads for rows of 8192 elements or more (shorter rows: 256)
# Staged rows of 8192 to 16384 elements (32 to 64 KiB of stage): blocks of 512 threads, so that 3 or 4 blocks share
# an SM (3 x 65 KiB of shared memory fit 228 KiB; 4 x 512 threads the SM's 2048) where 1024-thread blocks allowed 2
# (2048 threads). A block's passes go load, exp (about 25 instructions an element: as long as the load at the SM's
# share of the bandwidth), store: with 2 blocks an SM's memory idles while both compute, with 3 or 4 one of them is
# mostly loading or storing.
SOFTMAX_SHARED_THREADS = 512
SOFTMAX_SHARED_ROWS = (8192, 16384)


def softmax_threads(count: int, staged: bool) -> int:
    """A softmax block's threads for rows of `count` elements, staged in shared memory or not."""
    if staged and SOFTMAX_SHARED_ROWS[0] <= count <= SOFTMAX_SHARED_ROWS[1]:
        return SOFTMAX_SHARED_THREADS
    return SOFTMAX_THREADS if count >= 8192 else SHORT_ROW_THREADS


def softmax_rows(cp, work, log_form: bool):
    """Softmax (or log-softmax) of a C-contiguous FLOAT32 CuPy array over its last axis."""
    result = cp.empty_like(work)
    count = work.shape[-1] if work.ndim else 1
    rows = work.size // max(count, 1)
    if work.size == 0:
        return result
    vector = 4 if count % 4 == 0 and work.data.ptr % 16 == 0 else 1  # a view may start anywhere
    staged = count * 4 <= SOFTMAX_STAGE_BYTES
    shared_bytes = count * 4 if staged else 0
    kernel = _KERNELS.get(("softmax", vector))
    if kernel is None:
        source = DEVICE_PRELUDE + BLOCK_COMBINE + f"\n#define DML_VECTOR {vector}\n" + _SOFTMAX_BODY
        kernel = _KERNELS[("softmax", vector)] = cp.RawKernel(source, "dml_kernel", options=COMPILE_OPTIONS)
        kernel.max_dynamic_shared_size_bytes = SOFTMAX_STAGE_BYTES
    threads = softmax_threads(count, staged)
    blocks = int(min(rows, 65535))
    kernel((blocks,), (threads,), (work, result, np.int64(count), np.int32(bool(log_form)), np.int64(rows),
                                   np.int32(staged)), shared_mem=shared_bytes)
    return result


# CUMULATIVE_SUMMATION along the last axis: one block per row, the row in tiles through shared memory (one read and
# one write of device memory); the block scans its threads' totals with warp shuffles, then the warps' totals
# through shared memory. Reverse and exclusive sums are index mappings (no flipped copy). FLOAT32 adds in PTX (dml_add: no flush to zero, as the CPU); integers wrap as on the CPU.
_CUMSUM_TYPES = ("float32", "int32", "uint32", "int64", "uint64")  # FLOAT16 is widened to FLOAT32 first
_CUMSUM_BODY = """
__device__ __forceinline__ T dml_scan_add(T a, T b) { return DML_ADD(a, b); }

__device__ T dml_block_exclusive_scan(T v, T* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    T inclusive = v;
    for (int offset = 1; offset < 32; offset <<= 1) {
        const T other = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive = dml_scan_add(other, inclusive);
    }
    T exclusive = __shfl_up_sync(0xffffffffu, inclusive, 1);
    if (lane == 0) exclusive = (T)0;
    if (lane == 31) shared[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const T total = lane < warps ? shared[lane] : (T)0;
        T running = total;
        for (int offset = 1; offset < 32; offset <<= 1) {
            const T other = __shfl_up_sync(0xffffffffu, running, offset);
            if (lane >= offset) running = dml_scan_add(other, running);
        }
        T before = __shfl_up_sync(0xffffffffu, running, 1);
        if (lane == 0) before = (T)0;
        shared[lane] = before;
    }
    __syncthreads();
    const T result = warp == 0 ? exclusive : dml_scan_add(shared[warp], exclusive);
    __syncthreads();
    return result;
}

#define DML_ITEMS 4
extern "C" __global__ void dml_kernel(const T* xs, T* ys, const long long count, const int reverse,
                                      const int exclusive, const long long rows) {
    // Tiles of blockDim.x * DML_ITEMS elements go through shared memory, so that reads and writes are coalesced;
    // each thread scans DML_ITEMS neighbours, the block scans the threads' totals, a carry joins the tiles.
    __shared__ T shared[32];
    extern __shared__ unsigned char tile_bytes[];
    T* tile = reinterpret_cast<T*>(tile_bytes);
    __shared__ T carry_shared;
    const long long width = (long long)blockDim.x * DML_ITEMS;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* x = xs + row * count;
        T* y = ys + row * count;
        T carry = (T)0;
        for (long long start = 0; start < count; start += width) {
            const long long length = count - start < width ? count - start : width;
            for (long long k = threadIdx.x; k < length; k += blockDim.x) {
                const long long j = start + k;
                tile[k] = x[reverse ? count - 1 - j : j];
            }
            __syncthreads();
            const long long mine = (long long)threadIdx.x * DML_ITEMS;
            T run = (T)0;
            for (int k = 0; k < DML_ITEMS && mine + k < length; ++k) run = dml_scan_add(run, tile[mine + k]);
            const T before = dml_block_exclusive_scan(run, shared);
            const bool row_start = start == 0 && threadIdx.x == 0;
            T running = start == 0 ? before : dml_scan_add(carry, before);
            for (int k = 0; k < DML_ITEMS && mine + k < length; ++k) {
                const T v = tile[mine + k];
                const T next = (row_start && k == 0) ? v : dml_scan_add(running, v);
                tile[mine + k] = exclusive ? running : next;
                running = next;
            }
            if (mine < length && (mine + DML_ITEMS >= length)) carry_shared = running;  // the tile's last thread
            __syncthreads();
            carry = carry_shared;
            for (long long k = threadIdx.x; k < length; k += blockDim.x) {
                const long long j = start + k;
                y[reverse ? count - 1 - j : j] = tile[k];
            }
            __syncthreads();
        }
    }
}

// The same scan for 4-byte types and rows of a multiple of 4 elements: each thread holds DML_VECTOR_ITEMS
// neighbours in registers, read and written as 16-byte vectors straight from device memory (no shared-memory
// tile), so that a row of blockDim.x * DML_VECTOR_ITEMS elements is one tile. In reverse, a thread's vectors are
// read from the mirrored positions and their lanes taken last to first.
#define DML_VECTOR_ITEMS 16
__device__ __forceinline__ void dml_load4(const V4* x, long long count, long long first, int reverse, T* v) {
    const V4 f = x[(reverse ? count - first - 4 : first) >> 2];
    if (reverse) { v[0] = f.w; v[1] = f.z; v[2] = f.y; v[3] = f.x; }
    else { v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w; }
}
__device__ __forceinline__ void dml_store4(V4* y, long long count, long long first, int reverse, const T* v) {
    V4 f;
    if (reverse) { f.w = v[0]; f.z = v[1]; f.y = v[2]; f.x = v[3]; }
    else { f.x = v[0]; f.y = v[1]; f.z = v[2]; f.w = v[3]; }
    y[(reverse ? count - first - 4 : first) >> 2] = f;
}

extern "C" __global__ void dml_kernel_vector(const T* xs, T* ys, const long long count, const int reverse,
                                             const int exclusive, const long long rows) {
    __shared__ T shared[32];
    __shared__ T carry_shared;
    const long long width = (long long)blockDim.x * DML_VECTOR_ITEMS;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const V4* x = reinterpret_cast<const V4*>(xs + row * count);
        V4* y = reinterpret_cast<V4*>(ys + row * count);
        T carry = (T)0;
        for (long long start = 0; start < count; start += width) {
            const long long mine = start + (long long)threadIdx.x * DML_VECTOR_ITEMS;
            T v[DML_VECTOR_ITEMS];
            #pragma unroll
            for (int q = 0; q < DML_VECTOR_ITEMS; q += 4) {
                if (mine + q < count) dml_load4(x, count, mine + q, reverse, v + q);
                else v[q] = v[q + 1] = v[q + 2] = v[q + 3] = (T)0;
            }
            T run = (T)0;
            #pragma unroll
            for (int k = 0; k < DML_VECTOR_ITEMS; ++k) if (mine + k < count) run = dml_scan_add(run, v[k]);
            const T before = dml_block_exclusive_scan(run, shared);
            const bool row_start = start == 0 && threadIdx.x == 0;
            T running = start == 0 ? before : dml_scan_add(carry, before);
            #pragma unroll
            for (int k = 0; k < DML_VECTOR_ITEMS; ++k) {
                const T next = (row_start && k == 0) ? v[k] : dml_scan_add(running, v[k]);
                v[k] = exclusive ? running : next;
                running = next;
            }
            const long long tile_end = count - start < width ? count : start + width;
            if (mine < tile_end && mine + DML_VECTOR_ITEMS >= tile_end) carry_shared = running;  // the tile's last
            #pragma unroll
            for (int q = 0; q < DML_VECTOR_ITEMS; q += 4) {
                if (mine + q < count) dml_store4(y, count, mine + q, reverse, v + q);
            }
            __syncthreads();
            carry = carry_shared;
            __syncthreads();
        }
    }
}

// The same scan for many rows (the same 4-byte types and rows): one warp per row, no shared memory and no barrier.
// Lane l holds vector l of each chunk of 128 elements, so that each load and store instruction of the warp moves 512
// contiguous bytes (dml_kernel_vector's lanes are 64 bytes apart, four instructions to a line). The warp reads
// DML_WARP_CHUNKS chunks before it scans them; a lane scans its four values, the warp its lanes' totals by shuffles,
// and a carry in registers joins the chunks. The row's first element is stored as it is (no 0 added: -0.0 and NaN
// payloads kept, as on the CPU) and every sum takes only elements before its own. Four chunks (2 KiB a warp) and at
// most 64 registers (48 for FLOAT32, ptxas sm_90; eight chunks took 90): 40 warps on each SM, so that the last wave
// of rows still has loads enough in flight.
#define DML_WARP_CHUNKS 4
extern "C" __global__ void __launch_bounds__(DML_WARP_THREADS, 8)
dml_kernel_warp(const T* __restrict__ xs, T* __restrict__ ys, const long long count, const int reverse,
                const int exclusive, const long long rows) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long vectors = count >> 2;
    for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < rows; row += warps) {
        const V4* x = reinterpret_cast<const V4*>(xs + row * count);
        V4* y = reinterpret_cast<V4*>(ys + row * count);
        T carry = (T)0;
        bool started = false;  // whether the row has elements before the chunk (their sum is carry)
        for (long long base = 0; base < vectors; base += 32 * DML_WARP_CHUNKS) {
            T v[DML_WARP_CHUNKS][4];
            #pragma unroll
            for (int c = 0; c < DML_WARP_CHUNKS; ++c) {
                const long long at = base + c * 32 + lane;
                if (at < vectors) dml_load4(x, count, at * 4, reverse, v[c]);
                else v[c][0] = v[c][1] = v[c][2] = v[c][3] = (T)0;  // past the row: after every element of it
            }
            #pragma unroll
            for (int c = 0; c < DML_WARP_CHUNKS; ++c) {
                if (base + c * 32 >= vectors) break;  // past the row (short rows): the same for the whole warp
                T own[4];  // the lane's running sums of its four values
                own[0] = v[c][0];
                own[1] = dml_scan_add(own[0], v[c][1]);
                own[2] = dml_scan_add(own[1], v[c][2]);
                own[3] = dml_scan_add(own[2], v[c][3]);
                T through = own[3];  // becomes the sum of lanes 0 to this one
                #pragma unroll
                for (int offset = 1; offset < 32; offset <<= 1) {
                    const T other = __shfl_up_sync(0xffffffffu, through, offset);
                    if (lane >= offset) through = dml_scan_add(other, through);
                }
                const T lanes_before = __shfl_up_sync(0xffffffffu, through, 1);  // lanes 0 to lane - 1
                const T chunk = __shfl_sync(0xffffffffu, through, 31);
                const bool any_before = started || lane > 0;
                const T before = lane == 0 ? carry : (started ? dml_scan_add(carry, lanes_before) : lanes_before);
                T inclusive[4];
                #pragma unroll
                for (int k = 0; k < 4; ++k) inclusive[k] = any_before ? dml_scan_add(before, own[k]) : own[k];
                if (exclusive) {
                    v[c][0] = any_before ? before : (T)0;
                    v[c][1] = inclusive[0];
                    v[c][2] = inclusive[1];
                    v[c][3] = inclusive[2];
                } else {
                    #pragma unroll
                    for (int k = 0; k < 4; ++k) v[c][k] = inclusive[k];
                }
                carry = started ? dml_scan_add(carry, chunk) : chunk;
                started = true;
            }
            #pragma unroll
            for (int c = 0; c < DML_WARP_CHUNKS; ++c) {
                const long long at = base + c * 32 + lane;
                if (at < vectors) dml_store4(y, count, at * 4, reverse, v[c]);
            }
        }
    }
}
"""


# The vector scan's block for fewer rows than CUMSUM_MANY_ROWS (a few blocks per SM of the largest GPUs): up to 1024
# threads, so that more of each row's loads are in flight where the rows do not fill the GPU. From CUMSUM_MANY_ROWS
# rows on, one warp a row (dml_kernel_warp) in blocks of CUMSUM_WARP_THREADS. The block scans for many rows measured
# short of the copy on 1 GiB of 16384-element rows (H200): one block of 1024 threads a row 0.58 (46 registers a
# thread: alone on its SM, its phases one after the other), blocks of 256 threads (tiles of 4096 elements, five rows
# on each SM) 0.61. Their lanes read 16-byte vectors 64 bytes apart (each instruction touching half of every sector
# it asks for) and each tile paid three block barriers; a warp's row needs neither. With 1024 rows, 1024 warps with
# 2 KiB of loads each in flight cover about 1 us of the H200's latency at its copy bandwidth.
CUMSUM_MANY_ROWS = 1024
CUMSUM_WARP_THREADS = 128


def cumsum_types() -> tuple[str, ...]:
    """The types cumsum_rows runs (FLOAT16 is widened to FLOAT32 first)."""
    return _CUMSUM_TYPES


def _cumsum_source(dtype: np.dtype) -> str:
    """The scan kernel for one type: its value type T and its addition (PTX for FLOAT32, wrapping for integers)."""
    c_type = "float" if dtype.kind == "f" else C_INTEGER_TYPES[dtype.name]
    add = "dml_add(a, b)" if dtype.kind == "f" else "((a) + (b))"
    # The 16-byte vector of four values (dml_kernel_vector): CUDA's float4/int4/uint4; 8-byte types get a plain
    # struct only so that the source compiles (cumsum_rows never runs them vectorised).
    vector = {"float32": "typedef float4 V4;", "int32": "typedef int4 V4;", "uint32": "typedef uint4 V4;"}.get(
        dtype.name, "struct V4 { T x, y, z, w; };")
    return (DEVICE_PRELUDE + f"\ntypedef {c_type} T;\n{vector}\n#define DML_ADD(a, b) {add}\n"
            f"#define DML_WARP_THREADS {CUMSUM_WARP_THREADS}\n" + _CUMSUM_BODY)


def cumsum_rows(cp, work, reverse: bool, exclusive: bool):
    """CUMULATIVE_SUMMATION of a C-contiguous CuPy array along its last axis."""
    dtype = np.dtype(work.dtype)
    result = cp.empty_like(work)
    if work.size == 0:
        return result
    count = work.shape[-1]
    rows = work.size // count
    name = cumsum_kernel_name(dtype, count, rows, work.data.ptr)
    kernel = _KERNELS.get(("cumsum", dtype.name, name))
    if kernel is None:
        kernel = _KERNELS[("cumsum", dtype.name, name)] = cp.RawKernel(_cumsum_source(dtype), name,
                                                                       options=COMPILE_OPTIONS)
    arguments = (work, result, np.int64(count), np.int32(bool(reverse)), np.int32(bool(exclusive)), np.int64(rows))
    if name == "dml_kernel_warp":
        rows_per_block = CUMSUM_WARP_THREADS // 32
        kernel((int(min(-(-rows // rows_per_block), 65535)),), (CUMSUM_WARP_THREADS,), arguments)
        return result
    if name == "dml_kernel_vector":  # a row of up to 16384 elements in one tile
        threads = int(min(1024, max(32, -(-count // 512) * 32)))
        kernel((int(min(rows, 65535)),), (threads,), arguments)
        return result
    threads = 256 if count >= 1024 else 32
    kernel((int(min(rows, 65535)),), (threads,), arguments,
           shared_mem=threads * 4 * dtype.itemsize)  # DML_ITEMS elements per thread
    return result


def cumsum_kernel_name(dtype: np.dtype, count: int, rows: int, address: int) -> str:
    """Which scan cumsum_rows runs on `rows` rows of `count` elements from device address `address`: 4-byte values,
    rows of a multiple of 4 and a 16-byte boundary (a view may start anywhere) take 16-byte vectors, one warp a row
    from CUMSUM_MANY_ROWS rows on (dml_kernel_warp), one block a row below (dml_kernel_vector); anything else the
    shared-memory tiles (dml_kernel)."""
    if np.dtype(dtype).itemsize != 4 or count % 4 or address % 16:
        return "dml_kernel"
    return "dml_kernel_warp" if rows >= CUMSUM_MANY_ROWS else "dml_kernel_vector"


# ARGMAX/ARGMIN over the last axis of rows: one block per row, each thread keeps the best (value, index) of the
# elements it reads, the block combines them. NaN is skipped (a row of nothing but NaN gives its first index, or
# its last with `last`); ties keep the first index, or the last with `last`, as arg_index does on the CPU.
# Comparisons in PTX without flush to zero, so that subnormals order as on the CPU.
_ARG_BODY = """
__device__ __forceinline__ bool dml_arg_better(float v, long long i, float best, long long at, int largest,
                                               int last) {
    if (at < 0) return true;
    if (largest ? dml_gt(v, best) : dml_lt(v, best)) return true;
    if (dml_eq(v, best)) return last ? i > at : i < at;
    return false;
}

// A thread's own elements come in increasing index order, so a tie is settled by the comparison alone: strict for
// the first index, or-equal for the last. The first number a thread sees is taken whatever it is (at < 0).
__device__ __forceinline__ void dml_arg_step(float v, long long i, float& best, long long& at, int largest,
                                             int last) {
    const bool better = largest ? (last ? dml_ge(v, best) : dml_gt(v, best))
                                : (last ? dml_le(v, best) : dml_lt(v, best));
    if (better || (at < 0 && !DML_IS_NAN(v))) { best = v; at = i; }
}

extern "C" __global__ void dml_kernel(const T* xs, long long* indices, const long long count, const int largest,
                                      const int last, const long long rows) {
    __shared__ float best_values[32];
    __shared__ long long best_indices[32];
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* x = xs + row * count;
        float best = 0.0f;
        long long at = -1;
#if DML_VECTOR == 4
        #pragma unroll 4
        for (long long j = threadIdx.x; j < count / 4; j += blockDim.x) {
            const float4 f = reinterpret_cast<const float4*>(x)[j];
            dml_arg_step(f.x, 4 * j, best, at, largest, last);
            dml_arg_step(f.y, 4 * j + 1, best, at, largest, last);
            dml_arg_step(f.z, 4 * j + 2, best, at, largest, last);
            dml_arg_step(f.w, 4 * j + 3, best, at, largest, last);
        }
#else
        for (long long i = threadIdx.x; i < count; i += blockDim.x) dml_arg_step(DML_VALUE(x[i]), i, best, at, largest, last);
#endif
        for (int offset = 16; offset > 0; offset >>= 1) {
            const float other = __shfl_down_sync(0xffffffffu, best, offset);
            const long long other_at = __shfl_down_sync(0xffffffffu, at, offset);
            if (other_at >= 0 && dml_arg_better(other, other_at, best, at, largest, last)) {
                best = other;
                at = other_at;
            }
        }
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane == 0) { best_values[warp] = best; best_indices[warp] = at; }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < (int)((blockDim.x + 31) >> 5); ++w) {
                if (best_indices[w] >= 0 && dml_arg_better(best_values[w], best_indices[w], best, at, largest, last)) {
                    best = best_values[w];
                    at = best_indices[w];
                }
            }
            indices[row] = at >= 0 ? at : (last ? count - 1 : 0);
        }
        __syncthreads();
    }
}
"""
_FLOAT_IS_NAN = "((__float_as_uint(v) & 0x7fffffffu) > 0x7f800000u)"
_ARG_VALUE = {"float32": ("float", "(v)", _FLOAT_IS_NAN),
              "float16": ("unsigned short", "dml_half_to_float(v)", _FLOAT_IS_NAN),
              "int8": ("signed char", "(float)(v)", "false"), "uint8": ("unsigned char", "(float)(v)", "false"),
              "int16": ("short", "(float)(v)", "false"), "uint16": ("unsigned short", "(float)(v)", "false")}


def arg_rows(cp, rows, largest: bool, last: bool):
    """The ARGMAX (ARGMIN) index of each row of a C-contiguous 2-D CuPy array, as int64; None for a type the kernel
    does not take (32- and 64-bit integers do not all fit a float exactly: the shared xp path runs)."""
    dtype = np.dtype(rows.dtype)
    if dtype.name not in _ARG_VALUE:
        return None
    count, total = rows.shape[-1], rows.shape[0]
    result = cp.empty(total, dtype=cp.int64)
    if total == 0:
        return result
    # FLOAT32 rows of a multiple of 4 from a 16-byte boundary go by float4 (a view may start anywhere).
    vector = 4 if dtype == np.float32 and count % 4 == 0 and rows.data.ptr % 16 == 0 else 1
    kernel = _KERNELS.get(("arg", dtype.name, vector))
    if kernel is None:
        c_type, value, is_nan = _ARG_VALUE[dtype.name]
        source = (DEVICE_PRELUDE + f"\ntypedef {c_type} T;\n#define DML_VALUE(v) {value}\n"
                  f"#define DML_IS_NAN(v) {is_nan}\n#define DML_VECTOR {vector}\n" + _ARG_BODY)
        kernel = _KERNELS[("arg", dtype.name, vector)] = cp.RawKernel(source, "dml_kernel", options=COMPILE_OPTIONS)
    threads = ARG_THREADS if count >= 256 else 32
    bits = rows.view(np.uint16) if dtype == np.float16 else rows
    kernel((int(min(total, 65535)),), (threads,),
           (bits, result, np.int64(count), np.int32(bool(largest)), np.int32(bool(last)), np.int64(total)))
    return result
