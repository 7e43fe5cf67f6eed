"""MULTIHEAD_ATTENTION and MULTIHEAD_ATTENTION1 through cuDNN's fused attention (the frontend's sdpa: flash attention,
the scores never stored), the GPU kernel's first choice where the call maps onto it; dmlcli's kernel otherwise
(entries.py). See operators/numerics/cudnn_graphs.py for the loading, the handles and the cache.

What maps (anything else raises Unsupported and runs dmlcli's kernel):
- FLOAT16 queries, keys and values (cuDNN's attention takes 16-bit and 8-bit types, not FLOAT32) from QueryTensor,
  KeyTensor and ValueTensor or their stacks, read where they lie: each is a {batch, heads, rows, headSize} view
  with its own strides (the stacks' too), so nothing is copied; grouped-query heads (MULTIHEAD_ATTENTION1) as
  cuDNN's own;
- no BiasTensor, RelativePositionBiasTensor or past keys and values;
- no mask (MaskType NONE, or a BOOLEAN MaskTensor of ones), or a causal one: a BOOLEAN MaskTensor that holds
  exactly key j <= query i (checked on the device, one value read back, so such a call is not captured into a CUDA
  graph), or MULTIHEAD_ATTENTION1's PastSequenceLengthsTensor without a past (then every length is 0 and the
  attention is causal, whatever the lengths hold). cuDNN leaves a masked key out (weight 0); DirectML adds
  MaskFilterValue, which gives a weight of exp(score + MaskFilterValue - the row's largest score), exactly 0 in
  FLOAT32 wherever that exponent is below -104: a causal call maps where MaskFilterValue <= -10000 (ONNX
  Runtime's default), i.e. where a row's scores span less than about 9896.

Numbers: cuDNN computes the scores and the softmax in FLOAT32 and multiplies the FLOAT16-rounded weights by the
values with FLOAT32 accumulation, then rounds once: within MULTIHEAD_ATTENTION's FLOAT16 tolerance (its note: DirectML
may compute a FLOAT16 attention in half precision).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from ..movement.gpu import strided_copy
from ..numerics import cudnn_graphs
from ..numerics.cudnn_graphs import Unsupported
from .layout import Layout, head_counts, layout

_UNMAPPED = ("BiasTensor", "RelativePositionBiasTensor", "PastKeyTensor", "PastValueTensor")
_STACK_POSITION = {("StackedQueryKeyTensor", "q"): 0, ("StackedQueryKeyTensor", "k"): 1,
                   ("StackedKeyValueTensor", "k"): 0, ("StackedKeyValueTensor", "v"): 1,
                   ("StackedQueryKeyValueTensor", "q"): 0, ("StackedQueryKeyValueTensor", "k"): 1,
                   ("StackedQueryKeyValueTensor", "v"): 2}
# A causal call maps where MaskFilterValue is at most this (see the module's text).
CAUSAL_FILTER_LIMIT = -10000.0


class Signature(NamedTuple):
    """The key of a built attention graph: the {batch, heads, rows, size} Sizes and strides (in elements) of Q, K,
    V and O, the scale and whether it is causal."""

    q: tuple[tuple[int, ...], tuple[int, ...]]
    k: tuple[tuple[int, ...], tuple[int, ...]]
    v: tuple[tuple[int, ...], tuple[int, ...]]
    o: tuple[tuple[int, ...], tuple[int, ...]]
    scale: float
    causal: bool


def attend(cupy, given: Mapping[str, object], outputs, params) -> tuple:
    """The outputs `outputs` names (OutputTensor, and OutputPresentKeyTensor and OutputPresentValueTensor where the
    call has them), in their order, through cuDNN; Unsupported where the call does not map."""
    cudnn = cudnn_graphs.frontend()
    prepared = _prepared(given, params)
    causal = prepared.causal
    if causal is None:  # a BOOLEAN mask: its values decide, on every call
        causal = _causal_by_mask(cupy, given, params, prepared.found)
    plan = prepared.plans.get(causal)
    if plan is None:
        plan = prepared.plans[causal] = _plan(given, params, prepared.found, causal)
    attended = cupy.empty(plan.attended, dtype=np.float16)
    pointers = {role: given[source].data.ptr + offset for role, source, offset in plan.views}
    pointers["O"] = attended.data.ptr
    signature = plan.signature
    built = cudnn_graphs.cached(cupy, signature, lambda module, handle: build_graph(module, handle, signature),
                                pointers)
    built.execute(cudnn, cupy, pointers)
    results = []
    for out in outputs:
        if out.name == "OutputTensor":
            results.append(attended.reshape(out.shape))
        else:
            role = "k" if out.name == "OutputPresentKeyTensor" else "v"
            results.append(_present(given, prepared.found, role, out, cupy))
    return tuple(results)


def _present(given, found, role: str, out, cupy):
    """OutputPresentKeyTensor or OutputPresentValueTensor: this call's keys or values in heads-major order, its
    first rows (ONNX Runtime's shared past/present buffer: the present may have fewer), gathered 16 bytes a thread
    by movement's strided copy (CuPy's copy of the transposed view, one element a thread, took 0.085 ms beside a
    0.12 ms attention on the H200 for {1, 32, 2048, 128} FLOAT16)."""
    source, size = (found.key_from, found.head_size) if role == "k" else (found.value_from, found.value_head_size)
    rows = _rows_by_heads(given, source, role, found.batch, found.kv_sequence, found.kv_heads, size)
    return strided_copy(cupy, rows.transpose(0, 2, 1, 3)[:, :, :out.shape[-2]]).reshape(out.shape)


# What a call's Sizes, strides, types and fields decide, worked out once per such signature: its layout, whether it
# maps at all and whether it is causal (None where a BOOLEAN mask's values decide, read on every call), and its plan
# per causal answer: where the queries, keys and values lie in the given tensors, the cuDNN graph's signature, the
# output's Sizes. A call made again (a loop, a model's node) then costs its host only the pointers, the output's
# allocation and cuDNN's execute: the layout, views and signatures made on every call were most of the 0.15 to 0.19
# ms of host time per call that bounded back-to-back calls on the H200 (cuDNN's own execute: 0.02 ms).
PLANS_KEPT = 64
_PREPARED: dict[tuple, "_Prepared"] = {}


class _Plan(NamedTuple):
    views: tuple[tuple[str, str, int], ...]  # (graph tensor, given tensor, byte offset from its data) for Q, K, V
    attended: tuple[int, ...]  # {batch, rows, heads, value size}
    signature: Signature


class _Prepared(NamedTuple):
    found: Layout
    causal: bool | None  # None: the BOOLEAN mask's values decide, on each call
    plans: dict[bool, _Plan]  # by causal: filled as calls come


def _prepared(given, params) -> _Prepared:
    """The call's prepared layout and plans, looked up by its tensors' Sizes, strides and types and the fields that
    shape the attention (HeadCount is a field: the same tensors split into other heads lie elsewhere)."""
    key = (tuple((name, array.shape, array.strides, array.dtype.char) for name, array in given.items()),
           head_counts(params), float(params["Scale"]), params["MaskType"], float(params["MaskFilterValue"]))
    found = _PREPARED.get(key)
    if found is None:
        found = _prepare(given, params)
        cudnn_graphs.keep(_PREPARED, key, found, PLANS_KEPT)
    return found


def _prepare(given, params) -> _Prepared:
    """The layout and what the Sizes, types and fields alone say: Unsupported where the call does not map."""
    found = layout({name: tuple(array.shape) for name, array in given.items()}, params)
    present = [name for name in _UNMAPPED if name in given]
    if present:
        raise Unsupported(f"{present[0]} (cuDNN's attention here takes none)")
    if found.key_from is None:
        raise Unsupported("keys and values from the past alone")
    floats = [array for name, array in given.items() if name not in ("MaskTensor", "PastSequenceLengthsTensor")]
    if any(array.dtype != np.float16 for array in floats):
        raise Unsupported("cuDNN's attention takes FLOAT16 here (not FLOAT32)")
    lengths = "PastSequenceLengthsTensor" in given
    if lengths and found.past:
        raise Unsupported("PastSequenceLengthsTensor with past keys (per-entry positions)")
    mask_type = params["MaskType"]
    if mask_type == "NONE":
        causal = lengths
        _check_filter(params, causal)
    elif mask_type == "BOOLEAN":
        causal = None
    else:
        raise Unsupported(f"MaskType {mask_type}")
    return _Prepared(found, causal, {})


def _plan(given, params, found, causal: bool) -> _Plan:
    b, s, kv = found.batch, found.sequence, found.kv_sequence
    sources = {"Q": (found.query_from, "q", s, found.query_heads, found.head_size),
               "K": (found.key_from, "k", kv, found.kv_heads, found.head_size),
               "V": (found.value_from, "v", kv, found.kv_heads, found.value_head_size)}
    views, shapes = [], {}
    for role, (source, letter, rows, heads, size) in sources.items():
        view = _rows_by_heads(given, source, letter, b, rows, heads, size)
        views.append((role, source, view.data.ptr - given[source].data.ptr))
        shapes[role] = _heads_major(view)
    attended = (b, s, found.query_heads, found.value_head_size)
    # The output is a fresh C-ordered array of these Sizes: its heads-major strides, in elements.
    shapes["O"] = ((b, found.query_heads, s, found.value_head_size),
                   (s * found.query_heads * found.value_head_size, found.value_head_size,
                    found.query_heads * found.value_head_size, 1))
    signature = Signature(shapes["Q"], shapes["K"], shapes["V"], shapes["O"], scale=float(params["Scale"]),
                          causal=causal)
    return _Plan(tuple(views), attended, signature)


def _rows_by_heads(given, source: str, role: str, batch: int, rows: int, heads: int, size: int):
    """A {batch, rows, heads, size} view of the queries, keys or values where they lie (no copy)."""
    array = given[source]
    if (source, role) in _STACK_POSITION:
        stack = array.shape[3]
        return array.reshape(batch, rows, heads, stack, size)[:, :, :, _STACK_POSITION[(source, role)]]
    return array.reshape(batch, rows, heads, size)


def _heads_major(view) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The Sizes and element strides of a {batch, rows, heads, size} view read as {batch, heads, rows, size}."""
    sizes, strides = view.shape, cudnn_graphs.element_strides(view)
    order = (0, 2, 1, 3)
    return tuple(int(sizes[axis]) for axis in order), tuple(int(strides[axis]) for axis in order)


def _check_filter(params, causal: bool) -> None:
    if causal and not float(params["MaskFilterValue"]) <= CAUSAL_FILTER_LIMIT:
        raise Unsupported(f"a causal mask with MaskFilterValue {params['MaskFilterValue']} above "
                          f"{CAUSAL_FILTER_LIMIT:g} (masked keys would keep a weight)")


def _causal_by_mask(cupy, given, params, found) -> bool:
    """Whether the BOOLEAN MaskTensor makes the call causal (True) or keeps every key (False); Unsupported for any
    other mask. With PastSequenceLengthsTensor (and no past) a mask of ones is causal too."""
    pattern = _boolean_pattern(cupy, given["MaskTensor"], found)
    if pattern == "other":
        raise Unsupported("a BOOLEAN mask that is neither all ones nor causal")
    causal = pattern == "causal" or "PastSequenceLengthsTensor" in given
    _check_filter(params, causal)
    return causal


# One pass over an INT32 mask, read as rows of its last two Sizes: bit 0 where a key is masked (a 0), bit 1 where a
# value differs from the causal pattern (kept exactly where column j <= row i). A block takes whole rows.
_PATTERN_SOURCE = r"""
extern "C" __global__ void mask_pattern(const int* mask, long long row_count, int rows, int cols, int* found) {
    int bits = 0;
    for (long long r = blockIdx.x; r < row_count; r += gridDim.x) {
        const int i = (int)(r % rows);
        const int* row = mask + r * cols;
        for (int j = threadIdx.x; j < cols; j += blockDim.x) {
            const bool kept = row[j] != 0;
            bits |= (kept ? 0 : 1) | ((kept != (j <= i)) ? 2 : 0);
        }
    }
    const int masked = __any_sync(0xffffffffu, bits & 1), uncausal = __any_sync(0xffffffffu, bits & 2);
    if ((threadIdx.x & 31) == 0 && (masked || uncausal)) {
        atomicOr(found, (masked ? 1 : 0) | (uncausal ? 2 : 0));
    }
}
"""
_PATTERN_KERNEL: list = []  # the RawKernel, made on the first call (CuPy compiles it for each device it runs on)


def _boolean_pattern(cupy, mask, found) -> str:
    """"none" (every key kept), "causal" (key j kept for query i exactly where j <= i) or "other", read from the
    device: one pass over the mask and four bytes copied back (the copy waits for the GPU, and a CUDA-graph capture
    cannot hold it: the capture then ends)."""
    if cudnn_graphs.capturing(cupy):
        raise RuntimeError("a BOOLEAN mask's pattern is read on the host, which a CUDA graph capture cannot replay")
    if not _PATTERN_KERNEL:
        _PATTERN_KERNEL.append(cupy.RawKernel(_PATTERN_SOURCE, "mask_pattern"))
    kernel = _PATTERN_KERNEL[0]
    mask = cupy.ascontiguousarray(mask)
    rows, cols = (1,) * (2 - mask.ndim) + tuple(mask.shape[-2:])
    row_count = mask.size // cols
    bits = cupy.zeros(1, dtype=np.int32)
    kernel((min(row_count, 1024),), (256,), (mask, np.int64(row_count), np.int32(rows), np.int32(cols), bits))
    found_bits = int(bits.get()[0])
    if not found_bits & 1:
        return "none"
    causal_shape = (rows, cols) == (found.sequence, found.total)
    return "causal" if causal_shape and not found_bits & 2 else "other"


def build_graph(cudnn, handle, signature: Signature) -> cudnn_graphs.Built:
    """The planned graph: O = softmax(Q K^T * scale [causal]) V, FLOAT16 in and out, FLOAT32 inside."""
    half = cudnn.data_type.HALF
    graph = cudnn.pygraph(io_data_type=half, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    tensors = {name: graph.tensor(name=name, dim=list(sizes), stride=list(strides), data_type=half)
               for name, (sizes, strides) in (("Q", signature.q), ("K", signature.k), ("V", signature.v))}
    options = {"use_causal_mask": True} if signature.causal else {}
    attended, _ = graph.sdpa(name="sdpa", q=tensors["Q"], k=tensors["K"], v=tensors["V"], generate_stats=False,
                             attn_scale=signature.scale, **options)
    sizes, strides = signature.o
    attended.set_output(True).set_dim(list(sizes)).set_stride(list(strides)).set_data_type(half)
    tensors["O"] = attended
    cudnn_graphs.plan_graph(cudnn, graph, ())
    return cudnn_graphs.Built(graph, tensors)
