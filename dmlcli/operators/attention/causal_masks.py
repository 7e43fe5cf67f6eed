"""A BOOLEAN MaskTensor that holds the causal pattern (key <= query row) runs cuDNN's causal mode, which skips the
masked half of the work, instead of cuDNN's additive bias; every call checks every row of its mask on the device, so
a wrong guess never reaches a result, and no value is read on the host but a new mask's first check.

DirectML's desc has no causal flag: a causal attention gives its mask as data, which the host cannot know to be
causal without reading it, and reading it back on every call left the call waiting for the GPU each time (0.59 of
PyTorch told is_causal=True on the H200), while the bias (any mask, no read) runs the whole work (0.37). So a mask is
learnt instead, by where it lies (its device address, Sizes and strides):
- a mask seen for the first time is checked at once (one pass over it, the host waiting for that check alone), so
  its first call takes the route its contents call for;
- a mask known to be causal runs cuDNN's causal mode, and one kernel after it checks each of the mask's rows against
  the causal pattern and recomputes, by DirectML's formula (the scaled scores plus MaskFilterValue where the mask
  holds 0, their softmax, the weighted values, in FLOAT32), the output rows of every mask row that is no longer
  causal: a mask written over in place, or a buffer freed and reused for another mask, still gives DirectML's
  result, only slower for that call;
- a mask known not to be causal runs the bias, and the same kernel checks its rows without recomputing any;
- either check writes the call's number into a flag where a row differs; the flag is copied to pinned host memory
  behind the call, and a later call with the same mask reads it once the copy is done (an event queried, never
  waited on), which moves the mask to the other route where its contents have changed.
The causal mode stands in for the mask only where cuDNN's causal route does (cudnn.py's CAUSAL_FILTER_LIMIT: a
masked key's weight is then 0 in FLOAT32 either way). A CUDA-graph capture keeps the route its host state chose and
replays the check with it (no copy, no event), so a replay is right whatever its mask then holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..numerics import cudnn_graphs
from ..numerics.cuda_prelude import compiled
from ..numerics.driver_launch import DEPENDENT_LAUNCH_WAIT, EARLY_LAUNCH_CAPABILITY, DriverLaunch
from .layout import mask_sizes

# The largest head sizes the recomputation holds in registers (8 FLOAT32 values a lane of a warp per row).
LARGEST_HEAD_SIZE = 256
MASKS_KEPT = 64
_THREADS = 256
_BLOCKS = 2048  # 8 mask rows a block, up to this many blocks (a grid-stride loop past them)

# The geometry the kernels read from one small device array, made once per mask and attention signature (where 39
# scalar arguments cost CuPy's launch about 10 us of host time a call): the mask's four strides in elements and its
# batch and head counts, then batch, heads, group, rows, keys, head_size, value_size, then the {b, h, row, d} element
# strides of Q, K, V and O.
_GEOMETRY = r"""
#include <cuda_fp16.h>
#define MINUS_INFINITY __int_as_float(0xff800000)  // NVRTC has no math.h
#define PER_LANE 8
struct Geometry {
    long long msb, msh, msi, msj, mask_batch, mask_heads, batch, heads, group, rows, keys, head_size, value_size;
    long long qsb, qsh, qsi, qsd, ksb, ksh, ksj, ksd, vsb, vsh, vsj, vsd, osb, osh, osi, osd;
};
"""

# The remaking of output row i of batch b, head h, by one warp: each lane holds up to 8 of the head's elements.
_REMAKE = r"""
__device__ void remake_row(const Geometry* g, const int* row, int b, int h, int i, int lane, float scale,
                           float filter, const __half* q, const __half* k, const __half* v, __half* o)
{
    const int keys = (int)g->keys, head_size = (int)g->head_size, value_size = (int)g->value_size;
    const long long kvh = h / g->group;
    const __half* qb = q + b * g->qsb + h * g->qsh + i * g->qsi;
    const __half* kb = k + b * g->ksb + kvh * g->ksh;
    const __half* vb = v + b * g->vsb + kvh * g->vsh;
    float qv[PER_LANE], acc[PER_LANE];
    #pragma unroll
    for (int t = 0; t < PER_LANE; ++t) {
        const int d = lane + 32 * t;
        qv[t] = d < head_size ? __half2float(qb[d * g->qsd]) : 0.0f;
        acc[t] = 0.0f;
    }
    float largest = MINUS_INFINITY, total = 0.0f;
    for (int j = 0; j < keys; ++j) {
        float part = 0.0f;
        #pragma unroll
        for (int t = 0; t < PER_LANE; ++t) {
            const int d = lane + 32 * t;
            if (d < head_size) part += qv[t] * __half2float(kb[j * g->ksj + d * g->ksd]);
        }
        #pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) part += __shfl_xor_sync(0xffffffffu, part, offset);
        part = __shfl_sync(0xffffffffu, part, 0);  // one sum for every lane (the butterfly's orders differ)
        const float score = part * scale + (row[j * g->msj] != 0 ? 0.0f : filter);
        if (score == MINUS_INFINITY) continue;  // weight 0 (a row of -inf alone ends 0 / 0: NaN)
        const float grown = fmaxf(largest, score);
        const float kept = expf(largest - grown), weight = expf(score - grown);
        total = total * kept + weight;
        #pragma unroll
        for (int t = 0; t < PER_LANE; ++t) {
            const int d = lane + 32 * t;
            if (d < value_size) acc[t] = acc[t] * kept + weight * __half2float(vb[j * g->vsj + d * g->vsd]);
        }
        largest = grown;
    }
    __half* ob = o + b * g->osb + h * g->osh + i * g->osi;
    #pragma unroll
    for (int t = 0; t < PER_LANE; ++t) {
        const int d = lane + 32 * t;
        if (d < value_size) ob[d * g->osd] = __float2half(acc[t] / total);
    }
}
"""

# One kernel a call (a launch costs the H200 machine's host 9 to 11 us, as much as the check's pass on the device):
# one warp per mask row {mb, mh, i}, which reads the row (16 bytes a lane a step where the mask is C-ordered on a
# 16-byte boundary with rows of 4n keys) against the causal pattern (nonzero exactly where key j <= i). Where the row
# differs, the call's number goes to *flag and, with `fix` (the attention ran cuDNN's causal mode), every output row
# that mask row masks is made again by DirectML's formula in FLOAT32 (an online softmax over the keys). By ncu, a
# {2048, 2048} INT32 mask is read in 7.3 us (48% of the H200's memory bandwidth); a block a row, 2 loads a thread
# and a barrier per row, took 13.1 us. On a device of compute capability 9.0 and up the kernel is launched early
# (driver_launch.py: its blocks scheduled as the attention's end, each thread first waiting for the attention to have
# completed), which hides the gap between the two kernels: the check added 9.7 us to PyTorch's causal attention
# launched plainly and 7.5 us launched early (bench/causal_check_bench.py, 6 rounds of 7 x 50 calls on the H200).
_SOURCE = _GEOMETRY + _REMAKE + r"""
extern "C" __global__ void dml_kernel(const int* mask, const Geometry* g, unsigned long long* flag,
                                      unsigned long long number, int vector, int fix, float scale, float filter,
                                      const __half* q, const __half* k, const __half* v, __half* o)
{""" + DEPENDENT_LAUNCH_WAIT + r"""
    const int lane = threadIdx.x & 31;
    const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const int rows = (int)g->rows, keys = (int)g->keys, mask_heads = (int)g->mask_heads;
    const int mask_batch = (int)g->mask_batch;
    const long long mask_rows = (long long)mask_batch * mask_heads * rows;
    for (long long r = first; r < mask_rows; r += warps) {
        const int i = (int)(r % rows);
        const int mh = (int)((r / rows) % mask_heads);
        const int mb = (int)(r / ((long long)rows * mask_heads));
        const int* row = mask + mb * g->msb + mh * g->msh + i * g->msi;
        bool differs = false;
        if (vector) {
            const int4* row4 = (const int4*)row;
            #pragma unroll 16
            for (int j4 = lane; j4 < keys / 4; j4 += 32) {
                const int4 m = __ldcs(row4 + j4);  // evict-first: the mask does not push the attention's data out of L2
                const int j = 4 * j4;
                differs |= ((m.x != 0) != (j <= i)) | ((m.y != 0) != (j + 1 <= i)) | ((m.z != 0) != (j + 2 <= i))
                           | ((m.w != 0) != (j + 3 <= i));
            }
        } else {
            for (int j = lane; j < keys; j += 32) differs |= (row[j * g->msj] != 0) != (j <= i);
        }
        if (!__any_sync(0xffffffffu, differs)) continue;
        if (lane == 0) *flag = number;
        if (!fix) continue;
        const int b0 = mask_batch == 1 ? 0 : mb, h0 = mask_heads == 1 ? 0 : mh;
        const int batches = mask_batch == 1 ? (int)g->batch : 1, heads = mask_heads == 1 ? (int)g->heads : 1;
        for (int pair = 0; pair < batches * heads; ++pair) {
            remake_row(g, row, b0 + pair / heads, h0 + pair % heads, i, lane, scale, filter, q, k, v, o);
        }
    }
}
"""



@dataclass
class MaskState:
    """What is known of the mask at one place: whether it held the causal pattern at its last copied-back check, the
    device flag its checks write, the pinned word the flag is copied to, the copy still on its way,
    and the kernels' geometry for each attention signature the mask has served."""

    flag: object  # a one-element uint64 device array: the number of the last call that found a row not causal
    word: np.ndarray  # one uint64 in pinned host memory, where the flag is copied
    event: object  # recorded after each copy of the flag
    vector: bool  # the check reads 16 bytes a thread (a C-ordered mask on a 16-byte boundary, rows of 4n keys)
    causal: bool = False
    number: int = 0  # the number of this mask's latest call
    pending: int | None = None  # the number of the call whose flag's copy is on its way
    launch: DriverLaunch | None = None  # the kernel's launch through the driver (None: CuPy's RawKernel call)
    early: bool = False  # the launch may be early (driver_launch.py: compute capability 9.0 and up)
    geometries: dict = field(default_factory=dict)  # attention signature -> (its geometry array, the grid)


# The kernel's arguments' kinds (driver_launch.KINDS), and the same as NumPy types for CuPy's own launch.
_ARGUMENT_KINDS = ("u64", "u64", "u64", "u64", "i32", "i32", "f32", "f32", "u64", "u64", "u64", "u64")
_NUMPY_KINDS = tuple({"u64": "uint64", "i32": "int32", "f32": "float32"}[kind] for kind in _ARGUMENT_KINDS)

_STATES: dict[tuple, MaskState] = cudnn_graphs.kept_with_graphs({})
GEOMETRIES_KEPT = 8
# The flag is copied back after every COPY_EVERY-th call of a mask (none while a copy is on its way): the copy and its
# event cost the host about 7 us, and a mask whose contents change is then moved within that many calls (each of
# them right, the changed rows remade).
COPY_EVERY = 4


def state(cupy, mask, signature) -> MaskState | None:
    """The mask's state, brought up to date where a copied-back check has arrived. A mask seen for the first time is
    checked at once, the host waiting for that one check (so a fresh mask's first call takes the route its
    contents call for, as every later call does while they stay); None while a CUDA graph is captured and the mask
    has no state yet (the capture keeps the bias)."""
    key = (cupy.cuda.Device().id, mask.data.ptr, mask.shape, mask.strides)
    found = _STATES.get(key)
    if found is None:
        if cudnn_graphs.capturing(cupy):
            return None
        launch = DriverLaunch.of(compiled(cupy, _SOURCE), _ARGUMENT_KINDS)
        found = MaskState(flag=cupy.zeros(1, np.uint64),
                          word=np.frombuffer(cupy.cuda.alloc_pinned_memory(8), np.uint64, 1),
                          event=cupy.cuda.Event(block=False, disable_timing=True), launch=launch,
                          early=launch is not None and launch.can_launch_early
                          and int(cupy.cuda.Device().compute_capability) >= EARLY_LAUNCH_CAPABILITY,
                          vector=bool(mask.flags.c_contiguous and mask.shape[-1] % 4 == 0 and mask.data.ptr % 16 == 0))
        _queue(cupy, found, mask, signature, None, {}, copy_back=True)
        found.event.synchronize()
        cudnn_graphs.keep(_STATES, key, found, MASKS_KEPT)
    if found.pending is not None and found.event.done:
        found.causal = int(found.word[0]) != found.pending
        found.pending = None
    return found


def check(cupy, found: MaskState, mask, signature, pointers: dict[str, int] | None, params) -> None:
    """Queue the check of every row of `mask` behind the attention just queued and, where `pointers` are given (the
    attention ran cuDNN's causal mode into pointers["O"]), the recomputation of the output rows of any mask row not
    causal; then, every COPY_EVERY-th call, the flag's copy to the host where none is on its way and no capture is
    made."""
    _queue(cupy, found, mask, signature, pointers, params)


def _queue(cupy, found: MaskState, mask, signature, pointers: dict[str, int] | None, params,
           copy_back: bool = False) -> None:
    found.number += 1
    geometry, blocks = _geometry(cupy, found, mask, signature)
    fix = pointers is not None
    q, k, v, o = (pointers["Q"], pointers["K"], pointers["V"], pointers["O"]) if fix else (0, 0, 0, 0)
    stream = cupy.cuda.get_current_stream()
    capturing = cudnn_graphs.stream_capturing(stream)
    arguments = (mask.data.ptr, geometry.data.ptr, found.flag.data.ptr, found.number, int(found.vector), int(fix),
                 float(params.get("Scale", 0.0)), float(params.get("MaskFilterValue", 0.0)), q, k, v, o)
    if found.launch is not None:  # early outside a capture (a captured graph keeps plain dependencies)
        found.launch(blocks, _THREADS, stream.ptr, arguments, early=found.early and not capturing)
    else:
        compiled(cupy, _SOURCE)((blocks,), (_THREADS,), tuple(
            np.dtype(kind).type(value) for kind, value in zip(_NUMPY_KINDS, arguments)))
    copy_back = copy_back or found.number % COPY_EVERY == 0
    if found.pending is None and copy_back and not capturing:
        runtime = cupy.cuda.runtime
        runtime.memcpyAsync(found.word.ctypes.data, found.flag.data.ptr, 8, runtime.memcpyDeviceToHost, stream.ptr)
        found.event.record(stream)
        found.pending = found.number


def _geometry(cupy, found: MaskState, mask, signature):
    """The geometry array (see _GEOMETRY) and the grid for `signature`, the mask read as {1|B, 1|QH, S, T} (its Sizes
    lead-padded: its strides as they are, 0 for a dimension of 1). Only the geometry is kept, never the mask (the
    state's key is where the mask lies, not a hold on it)."""
    kept = found.geometries.get(signature)
    if kept is not None:
        return kept
    sizes = mask_sizes(mask.shape)
    strides = ((0,) * 4 + tuple(stride // mask.itemsize for stride in mask.strides))[-4:]
    mask_strides = [stride if size > 1 else 0 for size, stride in zip(sizes, strides)]
    (batch, heads, rows, head_size), q_strides = signature.q
    (_, kv_heads, keys, _), k_strides = signature.k
    (_, _, _, value_size), v_strides = signature.v
    values = [*mask_strides, sizes[0], sizes[1], batch, heads, heads // kv_heads, rows, keys, head_size, value_size,
              *q_strides, *k_strides, *v_strides, *signature.o[1]]
    blocks = max(1, min(_BLOCKS, -(-sizes[0] * sizes[1] * rows * 32 // _THREADS)))
    kept = (cupy.asarray(np.array(values, np.int64)), blocks)
    cudnn_graphs.keep(found.geometries, signature, kept, GEOMETRIES_KEPT)
    return kept
