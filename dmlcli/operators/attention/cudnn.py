"""MULTIHEAD_ATTENTION and MULTIHEAD_ATTENTION1 through cuDNN's fused attention (the frontend's sdpa: flash attention,
the scores never stored), the GPU kernel's first choice where the call maps onto it; dmlcli's kernel otherwise
(entries.py). See operators/numerics/cudnn_graphs.py for the loading, the handles and the cache.

What maps (anything else raises Unsupported and runs dmlcli's kernel):
- FLOAT16 queries, keys and values (cuDNN's attention takes 16-bit and 8-bit types, not FLOAT32) from QueryTensor,
  KeyTensor and ValueTensor or their stacks, read where they lie: each is a {batch, heads, rows, headSize} view
  with its own strides (the stacks' too), so nothing is copied; grouped-query heads (MULTIHEAD_ATTENTION1) as
  cuDNN's own;
- no BiasTensor, RelativePositionBiasTensor or past keys and values;
- MaskType NONE, or BOOLEAN: any BOOLEAN MaskTensor, as cuDNN's additive bias (MaskFilterValue where the mask holds
  0, DirectML's own addition; see _bias_sizes: MaskFilterValue a FLOAT16, the bias at most 256 MiB), made on
  the device on each call with no read on the host; a mask learnt to hold the causal pattern as cuDNN's causal
  mode, each call's rows checked on the device and any that differ recomputed (causal_masks.py);
- MULTIHEAD_ATTENTION1's PastSequenceLengthsTensor without a past (then every length is 0 and the attention is
  causal, whatever the lengths hold) as cuDNN's causal mask. cuDNN leaves a key it masks out (weight 0); DirectML
  adds MaskFilterValue, which gives a weight of exp(score + MaskFilterValue - the row's largest score), exactly 0 in
  FLOAT32 wherever that exponent is below -104: such a call maps where MaskFilterValue <= -10000 (ONNX Runtime's
  default), i.e. where a row's scores span less than about 9896.

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
from . import causal_masks
from .layout import Layout, head_counts, layout, mask_sizes

_UNMAPPED = ("BiasTensor", "RelativePositionBiasTensor", "PastKeyTensor", "PastValueTensor")
_STACK_POSITION = {("StackedQueryKeyTensor", "q"): 0, ("StackedQueryKeyTensor", "k"): 1,
                   ("StackedKeyValueTensor", "k"): 0, ("StackedKeyValueTensor", "v"): 1,
                   ("StackedQueryKeyValueTensor", "q"): 0, ("StackedQueryKeyValueTensor", "k"): 1,
                   ("StackedQueryKeyValueTensor", "v"): 2}
# A causal call maps where MaskFilterValue is at most this (see the module's text).
CAUSAL_FILTER_LIMIT = -10000.0


class Signature(NamedTuple):
    """The key of a built attention graph: the {batch, heads, rows, size} Sizes and strides (in elements) of Q, K,
    V and O, the scale, whether it is causal and the Sizes of a BOOLEAN mask's bias."""

    q: tuple[tuple[int, ...], tuple[int, ...]]
    k: tuple[tuple[int, ...], tuple[int, ...]]
    v: tuple[tuple[int, ...], tuple[int, ...]]
    o: tuple[tuple[int, ...], tuple[int, ...]]
    scale: float
    causal: bool
    bias: tuple[int, ...] | None = None  # the additive FLOAT16 bias's {1|B, 1|QH, S, T} Sizes (C-ordered), if any


def attend(cupy, given: Mapping[str, object], outputs, params) -> tuple:
    """The outputs `outputs` names (OutputTensor, and OutputPresentKeyTensor and OutputPresentValueTensor where the
    call has them), in their order, through cuDNN; Unsupported where the call does not map."""
    cudnn = cudnn_graphs.frontend()
    prepared = _prepared(given, params)
    learnt = None  # a BOOLEAN mask that may hold the causal pattern: what is known of it (causal_masks.py)
    if prepared.causal is not None:
        learnt = causal_masks.state(cupy, given["MaskTensor"], prepared.plan.signature)
    ran = None
    if learnt is not None and learnt.causal:
        try:
            ran = _run_plan(cudnn, cupy, given, params, prepared.causal)
        except Unsupported:  # cuDNN plans no causal mode for this call: its bias, as for any mask
            pass
    causal = ran is not None
    attended, pointers, signature = ran if causal else _run_plan(cudnn, cupy, given, params, prepared.plan)
    if learnt is not None:
        causal_masks.check(cupy, learnt, given["MaskTensor"], signature, pointers if causal else None, params)
    results = []
    for out in outputs:
        if out.name == "OutputTensor":
            results.append(attended.reshape(out.shape))
        else:
            role = "k" if out.name == "OutputPresentKeyTensor" else "v"
            results.append(_present(given, prepared.found, role, out, cupy))
    return tuple(results)


def _run_plan(cudnn, cupy, given: Mapping[str, object], params, plan: "_Plan") -> tuple:
    """The attention of `plan` queued into a fresh output: (the output, the graph's pointers, its signature);
    Unsupported where cuDNN plans no graph for the signature (then nothing is queued)."""
    attended = cupy.empty(plan.attended, dtype=np.float16)
    pointers = {role: given[source].data.ptr + offset for role, source, offset in plan.views}
    pointers["O"] = attended.data.ptr
    signature = plan.signature
    if signature.bias is not None:  # kept alive until the execute is queued; the stream orders its reuse
        bias = _mask_bias(cupy, given["MaskTensor"], signature.bias, float(params["MaskFilterValue"]))
        pointers["B"] = bias.data.ptr
    built = cudnn_graphs.cached(cupy, signature, lambda module, handle: build_graph(module, handle, signature),
                                pointers)  # a new signature's plans are built and timed on these buffers
    built.execute(cudnn, cupy, pointers)
    return attended, pointers, signature


def _present(given, found, role: str, out, cupy):
    """OutputPresentKeyTensor or OutputPresentValueTensor: this call's keys or values in heads-major order, its
    first rows (ONNX Runtime's shared past/present buffer: the present may have fewer), gathered 16 bytes a thread
    by movement's strided copy (CuPy's copy of the transposed view, one element a thread, took 0.085 ms beside a
    0.12 ms attention on the H200 for {1, 32, 2048, 128} FLOAT16)."""
    source, size = (found.key_from, found.head_size) if role == "k" else (found.value_from, found.value_head_size)
    rows = _rows_by_heads(given, source, role, found.batch, found.kv_sequence, found.kv_heads, size)
    return strided_copy(cupy, rows.transpose(0, 2, 1, 3)[:, :, :out.shape[-2]]).reshape(out.shape)


# What a call's Sizes, strides, types and fields decide, worked out once per such signature: its layout, whether it
# maps at all, and its plan: where the queries, keys and values lie in the given tensors, the cuDNN graph's signature
# (causal or not, a mask's bias or none), the output's Sizes. A call made again (a loop, a model's node) then costs
# its host only the pointers, the output's allocation and cuDNN's execute: the layout, views and signatures made on
# every call were most of the 0.15 to 0.19 ms of host time per call that bounded back-to-back calls on the H200
# (cuDNN's own execute: 0.02 ms).
PLANS_KEPT = 64
_PREPARED: dict[tuple, "_Prepared"] = {}


class _Plan(NamedTuple):
    views: tuple[tuple[str, str, int], ...]  # (graph tensor, given tensor, byte offset from its data) for Q, K, V
    attended: tuple[int, ...]  # {batch, rows, heads, value size}
    signature: Signature


class _Prepared(NamedTuple):
    found: Layout
    plan: _Plan
    causal: _Plan | None = None  # a BOOLEAN mask's plan in cuDNN's causal mode, where the mask may stand for it


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
    bias = None
    if mask_type == "BOOLEAN":
        bias = _bias_sizes(given["MaskTensor"], params, found)
    elif mask_type != "NONE":
        raise Unsupported(f"MaskType {mask_type}")
    _check_filter(params, lengths)
    causal = None
    if bias is not None and not lengths and _may_be_causal(given["MaskTensor"], params, found):
        causal = _plan(given, params, found, True, None)
    return _Prepared(found, _plan(given, params, found, lengths, bias), causal)


def _may_be_causal(mask, params, found) -> bool:
    """Whether the mask's Sizes let it hold the causal pattern and cuDNN's causal mode stand for it (causal_masks.py):
    an INT32 mask of {[1|B,] [1|QH,] S, T} with no past, MaskFilterValue at most CAUSAL_FILTER_LIMIT, and head
    sizes the check's recomputation holds."""
    sizes = mask_sizes(mask.shape)
    return (mask.ndim <= 4 and mask.dtype == np.int32 and sizes[2:] == (found.sequence, found.total)
            and found.past == 0 and float(params["MaskFilterValue"]) <= CAUSAL_FILTER_LIMIT
            and max(found.head_size, found.value_head_size) <= causal_masks.LARGEST_HEAD_SIZE)


# A BOOLEAN mask becomes cuDNN's additive bias: MaskFilterValue where the mask holds 0, +0 elsewhere, added to the
# scaled scores as DirectML adds MaskFilterValue (the page: "added ... to the positions that the mask ..."), so any
# mask maps, with DirectML's weights for it (also where every key of a row is masked). The bias is FLOAT16 (cuDNN's
# bias takes the inputs' type), so MaskFilterValue must be one (-10000, ONNX Runtime's default, is), and it is made
# on each call from the mask (one pass, no read on the host: such a call can be captured into a CUDA graph). Its
# Sizes are {1|B, 1|QH, S, T} (cuDNN's forms): a mask broadcast along the rows is written out along them.
BIAS_BYTES_KEPT = 256 * 2**20


def _bias_sizes(mask, params, found) -> tuple[int, ...]:
    """The bias's Sizes for this mask; Unsupported where MaskFilterValue is no FLOAT16 or the bias would be larger
    than BIAS_BYTES_KEPT."""
    value = float(params["MaskFilterValue"])
    if not float(np.float16(value)) == value:  # -10000 and -inf (ONNX's Attention) are; NaN and -1e6 are not
        raise Unsupported(f"MaskFilterValue {value:g} is not a FLOAT16 (cuDNN's bias holds it as one)")
    sizes = mask_sizes(mask.shape)
    batch = found.batch if sizes[0] == found.batch else 1
    heads = found.query_heads if sizes[1] == found.query_heads else 1
    bias = (batch, heads, found.sequence, found.total)
    if 2 * batch * heads * found.sequence * found.total > BIAS_BYTES_KEPT:
        raise Unsupported(f"a BOOLEAN mask's bias of Sizes {list(bias)} (over {BIAS_BYTES_KEPT >> 20} MiB)")
    return bias


_BIAS = ("dml_attention_mask_bias", "int32 m, float32 f", "float16 z", "z = (float16)(m == 0 ? f : 0.0f)")


def _mask_bias(cupy, mask, sizes: tuple[int, ...], value: float):
    """The FLOAT16 bias of Sizes `sizes` (C-ordered): `value` where the mask (broadcast to them) holds 0, else +0."""
    from ..numerics.cuda_prelude import elementwise_kernel

    lead = mask_sizes(mask.shape)
    spread = cupy.broadcast_to(mask.reshape(lead), sizes)
    bias = cupy.empty(sizes, dtype=np.float16)
    elementwise_kernel(cupy, *_BIAS)(spread, np.float32(value), bias)
    return bias


def _plan(given, params, found, causal: bool, bias: tuple[int, ...] | None) -> _Plan:
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
                          causal=causal, bias=bias)
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


def build_graph(cudnn, handle, signature: Signature) -> cudnn_graphs.Built:
    """The planned graph: O = softmax(Q K^T * scale [+ bias] [causal]) V, FLOAT16 in and out, FLOAT32 inside."""
    half = cudnn.data_type.HALF
    graph = cudnn.pygraph(io_data_type=half, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    tensors = {name: graph.tensor(name=name, dim=list(sizes), stride=list(strides), data_type=half)
               for name, (sizes, strides) in (("Q", signature.q), ("K", signature.k), ("V", signature.v))}
    options = {"use_causal_mask": True} if signature.causal else {}
    if signature.bias is not None:
        sizes = list(signature.bias)
        strides = [sizes[1] * sizes[2] * sizes[3], sizes[2] * sizes[3], sizes[3], 1]
        tensors["B"] = options["bias"] = graph.tensor(name="B", dim=sizes, stride=strides, data_type=half)
    attended, _ = graph.sdpa(name="sdpa", q=tensors["Q"], k=tensors["K"], v=tensors["V"], generate_stats=False,
                             attn_scale=signature.scale, **options)
    sizes, strides = signature.o
    attended.set_output(True).set_dim(list(sizes)).set_stride(list(strides)).set_data_type(half)
    tensors["O"] = attended
    cudnn_graphs.plan_graph(cudnn, graph, ())
    return cudnn_graphs.Built(graph, tensors)
