"""The attention family: MULTIHEAD_ATTENTION (6_1) and MULTIHEAD_ATTENTION1 (6_3).

Sources (each rule's own source is in the entries' notes):
- DirectML.h 0x6400: both DESCs (every tensor but OutputTensor _Maybenull_), DML_MULTIHEAD_ATTENTION_MASK_TYPE
  (NONE 0, KEY_SEQUENCE_LENGTH 1, KEY_SEQUENCE_END_START 2, KEY_QUERY_SEQUENCE_LENGTH_START_END 3, BOOLEAN 4) and
  the DML_OPERATOR_TYPE values (MULTIHEAD_ATTENTION 164, MULTIHEAD_ATTENTION1 172).
- MULTIHEAD_ATTENTION's page (MicrosoftDocs/sdk-api ns-directml-dml_multihead_attention_operator_desc.md, ms.date
  07/20/2022): the layouts and their Sizes, the order of the steps, the mask types, the tensor constraint and
  the support table (one row, 6_1).
- MULTIHEAD_ATTENTION1's page (learn.microsoft.com, DirectML 1.15.0) says "TBD" and repeats MULTIHEAD_ATTENTION's
  member texts; its meaning comes from ONNX Runtime's DirectML provider, which builds it for GroupQueryAttention
  (onnxruntime/core/providers/dml/DmlExecutionProvider/src/Operators/DmlOperatorGroupQueryAttention.cpp) and
  builds MULTIHEAD_ATTENTION for MultiHeadAttention, Attention and QAttention (DmlOperatorMultiHeadAttention.cpp,
  DmlOperatorAttention.cpp, DmlOperatorQAttention.cpp).

The kernel is one function for NumPy and CuPy: the inputs widened to FLOAT32, the biases added, the past
concatenated, two batched xp.matmul products (the query heads of one key/value head as one batch, so grouped-query
attention needs no copy of the keys), a stable softmax (the row's maximum subtracted) and one rounding at the end.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ...data_types import FLOATS, INT32
from ...feature_levels import level
from ..table.parameters import EnumParameter, FloatParameter, IntegerParameter
from ..table.schema import APPROXIMATE, Operator, SumBound, Tolerance, rows
from ..table.shaped import ShapeQuery
from ..numerics import products
from .layout import STACKS, Layout, strip_leading_ones, layout

FAMILY = "attention"

# ---------------------------------------------------------------- tensors and support tables

_LAYOUT_INPUTS = ("QueryTensor", "KeyTensor", "ValueTensor", "StackedQueryKeyTensor", "StackedKeyValueTensor",
                  "StackedQueryKeyValueTensor")
_MHA_INPUTS = _LAYOUT_INPUTS + ("BiasTensor", "MaskTensor", "RelativePositionBiasTensor", "PastKeyTensor",
                                "PastValueTensor")
_MHA1_INPUTS = _MHA_INPUTS + ("PastSequenceLengthsTensor",)
_OUTPUTS = ("OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor")
_INTEGER_INPUTS = ("MaskTensor", "PastSequenceLengthsTensor")

# The page's "Tensor support" table, one row: (dimension counts, data types) of each tensor.
_MHA_SUPPORT = {
    "QueryTensor": ((3, 4, 5), FLOATS), "KeyTensor": ((3, 4, 5), FLOATS), "ValueTensor": ((3, 4, 5), FLOATS),
    "StackedQueryKeyTensor": ((5,), FLOATS), "StackedKeyValueTensor": ((5,), FLOATS),
    "StackedQueryKeyValueTensor": ((5,), FLOATS), "BiasTensor": ((1, 2, 3, 4, 5), FLOATS),
    "MaskTensor": ((1, 2, 3, 4, 5), (INT32,)), "RelativePositionBiasTensor": ((4, 5), FLOATS),
    "PastKeyTensor": ((4, 5), FLOATS), "PastValueTensor": ((4, 5), FLOATS), "OutputTensor": ((3, 4, 5), FLOATS),
    "OutputPresentKeyTensor": ((4, 5), FLOATS), "OutputPresentValueTensor": ((4, 5), FLOATS),
}
# MULTIHEAD_ATTENTION1's page has no table: MULTIHEAD_ATTENTION's rows, and PastSequenceLengthsTensor as ONNX
# Runtime's GroupQueryAttention gives it (an INT32 tensor of Sizes {batchSize}: TensorDesc of
# MLOperatorTensorDataType::Int32 and shape {batchSize}, or seqlens_k of DimensionCount 1).
_MHA1_SUPPORT = {**_MHA_SUPPORT, "PastSequenceLengthsTensor": ((1,), (INT32,))}


def _float_tensors(inputs: tuple[str, ...]) -> tuple[str, ...]:
    """The page's "Tensor constraints": every tensor but the integer ones has the same DataType (outputs last, so
    that the outputs take the type of the first floating-point input given)."""
    return tuple(name for name in inputs + _OUTPUTS if name not in _INTEGER_INPUTS)


# ---------------------------------------------------------------- parameters

MASK_TYPES = (("NONE", 0), ("KEY_SEQUENCE_LENGTH", 1), ("KEY_SEQUENCE_END_START", 2),
              ("KEY_QUERY_SEQUENCE_LENGTH_START_END", 3), ("BOOLEAN", 4))
MASK_TYPE = EnumParameter(
    field="MaskType", enum_prefix="DML_MULTIHEAD_ATTENTION_MASK_TYPE_", values=MASK_TYPES, default_value="NONE",
    help="how MaskTensor is read: none (no MaskTensor), key_sequence_length ({1, batchSize} valid key counts), "
         "key_sequence_end_start ({2, batchSize}: ends, then starts), key_query_sequence_length_start_end "
         "({batchSize * 3 + 2}), boolean (0: MaskFilterValue added, 1: nothing)")
SCALE = FloatParameter(
    field="Scale", default_value=1.0,
    help="multiplies Query x Key^T before the softmax (usually 1 / sqrt(headSize); left out: 1, the plain product)")
MASK_FILTER_VALUE = FloatParameter(
    field="MaskFilterValue", default_value=-10000.0,
    help="added to the scores at the positions the mask marks as padding (left out: -10000, the page's usual "
         "value and ONNX Runtime's default)")
HEAD_COUNT = IntegerParameter(field="HeadCount", default_value=1,
                              help="the number of attention heads (hiddenSize = HeadCount * headSize)")
QUERY_HEAD_COUNT = IntegerParameter(field="QueryHeadCount", default_value=1,
                                    help="the number of query heads (hiddenSize = QueryHeadCount * headSize)")
KEY_VALUE_HEAD_COUNT = IntegerParameter(
    field="KeyValueHeadCount", default_value=1,
    help="the number of key and value heads; fewer than QueryHeadCount (a divisor of it) is grouped-query "
         "attention: query head h reads key/value head h / (QueryHeadCount / KeyValueHeadCount)")


def _given_rank(query: ShapeQuery, name: str, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """An output's Sizes: these, or the caller's with leading sizes of 1 added (3 to 5 dimensions, 4 to 5)."""
    given = query.given_outputs.get(name)
    if given is not None and strip_leading_ones(given, len(sizes)) == sizes:
        return tuple(given)
    return sizes


def attention_shape(query: ShapeQuery) -> dict:
    found = layout(query.shapes, query.parameters)
    present_length = found.total
    stated = query.given_outputs.get("OutputPresentKeyTensor")
    if ("PastSequenceLengthsTensor" in query.shapes and stated is not None and len(stated) >= 2
            and stated[-2] == found.past):
        present_length = found.past  # ONNX Runtime's shared past/present buffer: the present has the past's Sizes
    return {
        "OutputTensor": _given_rank(query, "OutputTensor",
                                    (found.batch, found.sequence, found.query_heads * found.value_head_size)),
        "OutputPresentKeyTensor": _given_rank(query, "OutputPresentKeyTensor",
                                              (found.batch, found.kv_heads, present_length, found.head_size)),
        "OutputPresentValueTensor": _given_rank(query, "OutputPresentValueTensor",
                                                (found.batch, found.kv_heads, present_length, found.value_head_size)),
    }


# ---------------------------------------------------------------- the kernel (NumPy or CuPy)


def _as_float32(xp, array, dtype=np.float32):
    """An input in the computation's type: FLOAT32 (FLOAT16 widened exactly), or float64 for the sum bound's run."""
    return xp.asarray(array).astype(dtype)


def _heads_major(xp, rows_by_hidden, batch: int, length: int, heads: int, size: int):
    """{batch, length, heads * size} (any leading 1s) as {batch, heads, length, size}."""
    return xp.transpose(rows_by_hidden.reshape(batch, length, heads, size), (0, 2, 1, 3))


def _projections(xp, given: Mapping[str, object], found: Layout, dtype=np.float32):
    """The queries {B, QH, S, hs}, keys {B, KVH, kv, hs} and values {B, KVH, kv, vhs} of this call, in FLOAT32 (or
    `dtype`) with BiasTensor added (None for keys and values that come from the past alone)."""
    b, s, kv = found.batch, found.sequence, found.kv_sequence
    qh, kvh, hs, vhs = found.query_heads, found.kv_heads, found.head_size, found.value_head_size
    stacked = {name: _as_float32(xp, given[name], dtype) for name in STACKS if name in given}
    if found.query_from == "QueryTensor":
        queries = _as_float32(xp, given["QueryTensor"], dtype).reshape(b, s, qh * hs)
    else:
        queries = stacked[found.query_from][:, :, :, 0, :].reshape(b, s, qh * hs)
    keys = values = None
    if found.key_from == "KeyTensor":
        keys = _as_float32(xp, given["KeyTensor"], dtype).reshape(b, kv, kvh * hs)
    elif found.key_from is not None:
        position = 0 if found.key_from == "StackedKeyValueTensor" else 1
        keys = stacked[found.key_from][:, :, :, position, :].reshape(b, kv, kvh * hs)
    if found.value_from == "ValueTensor":
        values = _as_float32(xp, given["ValueTensor"], dtype).reshape(b, kv, kvh * vhs)
    elif found.value_from is not None:
        position = 1 if found.value_from == "StackedKeyValueTensor" else 2
        values = stacked[found.value_from][:, :, :, position, :].reshape(b, kv, kvh * vhs)
    if "BiasTensor" in given:
        bias = _as_float32(xp, given["BiasTensor"], dtype).reshape(-1)
        queries = queries + bias[:qh * hs]
        if keys is not None:
            keys = keys + bias[qh * hs:(qh + kvh) * hs]
            values = values + bias[(qh + kvh) * hs:]
    queries = _heads_major(xp, queries, b, s, qh, hs)
    if keys is not None:
        keys = _heads_major(xp, keys, b, kv, kvh, hs)
        values = _heads_major(xp, values, b, kv, kvh, vhs)
    return queries, keys, values


def _with_past(xp, past, new, found: Layout, past_lengths, dtype=np.float32):
    """The present: the past rows then this call's rows, {B, KVH, past + kv, size}. With past lengths
    (MULTIHEAD_ATTENTION1's PastSequenceLengthsTensor), batch entry b keeps its first past_lengths[b] past rows and
    puts this call's rows right after them; the rows after those hold zeros."""
    batch, heads, size = found.batch, found.kv_heads, (past if past is not None else new).shape[-1]
    if past is None:
        past = xp.zeros((batch, heads, 0, size), dtype)
    else:
        past = _as_float32(xp, past, dtype).reshape(batch, heads, found.past, size)
    if new is None:
        new = xp.zeros((batch, heads, 0, size), dtype)
    joined = xp.concatenate([past, new], axis=2)
    if past_lengths is None:
        return joined
    position = xp.arange(found.total)[None, :]  # {1, T}
    start = past_lengths[:, None]  # {B, 1}: where this call's rows go
    from_past = (position < start)[:, None, :, None]
    kept = xp.where(from_past, joined, np.dtype(dtype).type(0))
    if found.kv_sequence == 0:
        return kept
    from_new = ((position >= start) & (position < start + found.kv_sequence))[:, None, :, None]
    new_index = xp.clip(position - start, 0, found.kv_sequence - 1) + found.past  # this call's row in `joined`
    gathered = xp.take_along_axis(joined, xp.broadcast_to(new_index[:, None, :, None], (batch, heads, found.total, 1)),
                                  axis=2)
    return xp.where(from_new, gathered, kept)


def _past_lengths(xp, given, found: Layout):
    """PastSequenceLengthsTensor as past row counts in [0, pastSequenceLength] (None where not given): a length
    past the PastKeyTensor's rows counts as all of them, a negative one as none (lengths are data: no rule can
    refuse them)."""
    if "PastSequenceLengthsTensor" not in given:
        return None
    lengths = xp.asarray(given["PastSequenceLengthsTensor"]).reshape(found.batch).astype(np.int64)
    return xp.clip(lengths, 0, found.past)


def masked_positions(xp, given, params, found: Layout, past_lengths, rows: range):
    """True where MaskFilterValue is added to a score of the query rows `rows`, {B or 1, QH or 1, len(rows), T};
    None where nothing is masked."""
    batch, total = found.batch, found.total
    row = xp.arange(rows.start, rows.stop)[:, None]  # query index i
    key = xp.arange(total)[None, :]  # key index j
    masked = None
    mask_type = params["MaskType"]
    if mask_type != "NONE":
        mask = xp.asarray(given["MaskTensor"]).astype(np.int64)
        if mask_type == "BOOLEAN":
            mask = mask.reshape(mask.shape[-4:])
            masked = (_query_rows(mask, found, rows) == 0)
        elif mask_type == "KEY_SEQUENCE_LENGTH":
            masked = (key >= mask.reshape(batch)[:, None, None])[:, None]
        elif mask_type == "KEY_SEQUENCE_END_START":
            ends, starts = mask.reshape(2, batch)
            masked = ((key >= ends[:, None, None]) | (key < starts[:, None, None]))[:, None]
        else:
            masked = _start_end_mask(xp, mask.reshape(-1), batch, row, key)
    if past_lengths is not None:
        # MULTIHEAD_ATTENTION1 with past lengths (ONNX Runtime's GroupQueryAttention, which is causal): query i of
        # batch entry b sits at position past_lengths[b] + i and sees the keys up to it; the rows after this call's
        # (past_lengths[b] + kv on) hold no key.
        start = past_lengths[:, None, None]
        causal = ((key > start + row) | (key >= start + found.kv_sequence))[:, None]
        masked = causal if masked is None else (masked | causal)
    return masked


def _query_rows(array, found: Layout, rows: range):
    """The query rows `rows` of a {.., .., sequenceLength or 1, ..} tensor (a size of 1 is every row's)."""
    return array if array.shape[2] == 1 else array[:, :, rows.start:rows.stop]


def _start_end_mask(xp, values, batch: int, row, key):
    """KEY_QUERY_SEQUENCE_LENGTH_START_END: [keyLength[0..B-1], queryStart[0..B-1], queryEnd, keyStart[0..B-1],
    keyEnd]; the starts (with the end after the last) are each batch entry's offsets in a packed sequence, so
    entry b has queryStart[b+1] - queryStart[b] query rows and keyStart[b+1] - keyStart[b] key rows, of which the
    first keyLength[b] are valid. In the dense layout the rows past those counts are padding: a padded key row is
    masked, and so is every key of a padded query row."""
    key_lengths = values[:batch]
    query_offsets, key_offsets = values[batch:2 * batch + 1], values[2 * batch + 1:3 * batch + 2]
    query_rows = query_offsets[1:] - query_offsets[:-1]
    key_rows = xp.minimum(key_offsets[1:] - key_offsets[:-1], key_lengths)
    padded_key = key >= key_rows[:, None, None]
    padded_query = row >= query_rows[:, None, None]
    return (padded_key | padded_query)[:, None]


def attention_kernel(names: tuple[str, ...]):
    """The kernel of an entry whose inputs are `names` (None for each left out)."""
    def kernel(xp, inputs, outputs, params):
        given = {name: array for name, array in zip(names, inputs) if array is not None}
        return attend(xp, given, outputs, params)

    return kernel


def attention_gpu_kernel(names: tuple[str, ...]):
    """The GPU kernel of an entry whose inputs are `names`: cuDNN's fused attention (attention/cudnn.py) where its
    frontend is installed and the call maps onto it, else the kernel above. Which one ran is recorded
    (numerics/cudnn_graphs.LAST_CHOICE)."""
    def kernel(xp, inputs, outputs, params):
        from ..numerics import cudnn_graphs  # imported by the GPU path only
        from . import cudnn

        given = {name: array for name, array in zip(names, inputs) if array is not None}
        try:
            results = cudnn.attend(xp, given, outputs, params)
        except cudnn_graphs.Unsupported as why:
            cudnn_graphs.record(FAMILY, f"dmlcli: {why}")
            return attend(xp, given, outputs, params)
        cudnn_graphs.record(FAMILY, "cudnn")
        return results

    return kernel


# The scores of one block of query rows, {B, QH, rows, T} FLOAT32, and the two arrays the softmax makes of them stay
# within this many bytes (at least one row at a time): like CONVOLUTION's column buffer, the scratch is bounded
# whatever the sequence lengths (the room check counts about twice the largest input as scratch). The GPU's
# budget is larger: fewer, larger cuBLAS products.
SCORE_BUDGET_BYTES = 64 * 2 ** 20
GPU_SCORE_BUDGET_BYTES = 1024 * 2 ** 20


def attend(xp, given: Mapping[str, object], outputs, params) -> tuple:
    """The outputs the call asks for (`outputs`: OutputTensor, and OutputPresentKeyTensor and OutputPresentValueTensor
    where it has them) from the inputs given, in that order. A present output left out is not made (no copy of
    the keys or values is taken for it)."""
    found = layout({name: tuple(array.shape) for name, array in given.items()}, params)
    past_lengths = _past_lengths(xp, given, found)
    queries, keys, values = _projections(xp, given, found)
    keys = _with_past(xp, given.get("PastKeyTensor"), keys, found, past_lengths)
    values = _with_past(xp, given.get("PastValueTensor"), values, found, past_lengths)
    b, qh, s = found.batch, found.query_heads, found.sequence
    budget = SCORE_BUDGET_BYTES if xp is np else GPU_SCORE_BUDGET_BYTES
    block = max(1, budget // (3 * 4 * b * qh * found.total))
    attended = xp.empty((b, s, qh, found.value_head_size), np.float32)
    for first in range(0, s, block):
        rows = range(first, min(first + block, s))
        attended[:, rows.start:rows.stop] = _attend_rows(xp, given, params, found, past_lengths, queries, keys, values,
                                                         rows)
    return tuple(_output(attended, keys, values, out).astype(np.dtype(out.data_type.numpy_dtype)) for out in outputs)


def _output(attended, keys, values, out):
    """One output in FLOAT32 at its Sizes: the attention, or the present keys or values ({B, KVH, rows, size}: the
    first rows of the past and this call's, as many as the output has; fewer for ONNX Runtime's shared buffer)."""
    if out.name == "OutputTensor":
        return attended.reshape(out.shape)
    present = keys if out.name == "OutputPresentKeyTensor" else values
    return present[:, :, :out.shape[-2]].reshape(out.shape)


def _attend_rows(xp, given, params, found: Layout, past_lengths, queries, keys, values, rows: range):
    """The attention of the query rows `rows`: {B, rows, QH, vhs} in FLOAT32."""
    b, qh, kvh, t, count = found.batch, found.query_heads, found.kv_heads, found.total, len(rows)
    # The query heads of one key/value head as one batch of rows: {B, KVH, group * rows, hs} x {B, KVH, hs, T}.
    grouped = queries[:, :, rows.start:rows.stop].reshape(b, kvh, found.group * count, found.head_size)
    scores = products.matmul(xp, grouped, xp.swapaxes(keys, 2, 3)).reshape(b, qh, count, t) * np.float32(params["Scale"])
    if "RelativePositionBiasTensor" in given:
        bias = _as_float32(xp, given["RelativePositionBiasTensor"])
        scores = scores + _query_rows(bias.reshape(bias.shape[-4:]), found, rows)
    masked = masked_positions(xp, given, params, found, past_lengths, rows)
    if masked is not None:
        scores = xp.where(masked, scores + np.float32(params["MaskFilterValue"]), scores)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf in a row of infinities: NaN, as IEEE gives it
        scores = xp.exp(scores - xp.max(scores, axis=-1, keepdims=True))
        scores = scores / xp.sum(scores, axis=-1, keepdims=True)
    attended = products.matmul(xp, scores.reshape(b, kvh, found.group * count, t), values)  # {B, KVH, group * rows, vhs}
    return xp.transpose(attended.reshape(b, qh, count, found.value_head_size), (0, 2, 1, 3))


# ---------------------------------------------------------------- the sum bound (checking/bounds.py)


def attention_terms(call) -> int:
    """K of the attention's sum bound: headSize + T + 4 for T = pastSequenceLength + keyValueSequenceLength keys
    (the terms of a score, those of the product with Value, and the softmax's few roundings)."""
    shapes = {name: tensor.shape for name, tensor in call.tensors.items() if name in call.operator.inputs}
    found = layout(shapes, call.parameters)
    return {"OutputTensor": found.head_size + found.total + 4}


def attention_magnitude(names: tuple[str, ...]):
    """M of an entry whose inputs are `names`: for each output element (query row i, value column v),
    P (1 + B) + A with P = sum_j p_ij |v_j|, A = sum_j p_ij S_ij |v_j| and B = sum_j p_ij S_ij, in float64: p the
    softmax of the scores, S_ij the magnitude of score ij (|Scale| x |q_i| . |k_j| + |RelativePositionBias| +
    |MaskFilterValue| where masked + |s_ij - max_j s_ij|). A score's rounding error, about headSize x u x S_ij,
    moves p_ij by p_ij times it (the softmax turns the scores' absolute errors into the probabilities' relative
    ones), and the output by p_ij |v_j| times it: where the scores are large (unscaled) that is far past the
    output's own ULP. The present key and value outputs are copies: no bound."""
    def magnitude(xp, inputs, outputs, params):
        given = {name: array for name, array in zip(names, inputs) if array is not None}
        found = layout({name: tuple(array.shape) for name, array in given.items()}, params)
        past_lengths = _past_lengths(xp, given, found)
        queries, keys, values = _projections(xp, given, found, np.float64)
        keys = _with_past(xp, given.get("PastKeyTensor"), keys, found, past_lengths, np.float64)
        values = _with_past(xp, given.get("PastValueTensor"), values, found, past_lengths, np.float64)
        b, qh, s = found.batch, found.query_heads, found.sequence
        block = max(1, SCORE_BUDGET_BYTES // (6 * 8 * b * qh * max(found.total, 1)))
        found_magnitude = xp.empty((b, s, qh, found.value_head_size), np.float64)
        for first in range(0, s, block):
            rows = range(first, min(first + block, s))
            found_magnitude[:, rows.start:rows.stop] = _magnitude_rows(xp, given, params, found, past_lengths,
                                                                       queries, keys, values, rows)
        # One per output asked for: the present keys and values (copies) have none.
        return tuple(found_magnitude.reshape(out.shape) if out.name == "OutputTensor" else None for out in outputs)

    return magnitude


def _magnitude_rows(xp, given, params, found: Layout, past_lengths, queries, keys, values, rows: range):
    """The magnitudes of the query rows `rows`: {B, rows, QH, vhs} in float64."""
    b, qh, kvh, t, count = found.batch, found.query_heads, found.kv_heads, found.total, len(rows)
    grouped = queries[:, :, rows.start:rows.stop].reshape(b, kvh, found.group * count, found.head_size)
    scale = float(params["Scale"])
    scores = products.matmul(xp, grouped, xp.swapaxes(keys, 2, 3)).reshape(b, qh, count, t) * scale
    sizes = products.matmul(xp, xp.abs(grouped), xp.swapaxes(xp.abs(keys), 2, 3)).reshape(b, qh, count, t) * abs(scale)
    if "RelativePositionBiasTensor" in given:
        bias = _query_rows(_as_float32(xp, given["RelativePositionBiasTensor"], np.float64).reshape(
            given["RelativePositionBiasTensor"].shape[-4:]), found, rows)
        scores = scores + bias
        sizes = sizes + xp.abs(bias)
    masked = masked_positions(xp, given, params, found, past_lengths, rows)
    if masked is not None:
        filter_value = float(params["MaskFilterValue"])
        scores = xp.where(masked, scores + filter_value, scores)
        sizes = xp.where(masked, sizes + abs(filter_value), sizes)
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = scores - xp.max(scores, axis=-1, keepdims=True)
        sizes = sizes + xp.abs(shifted)  # the shift's own rounding, which exp turns into a relative error of p
        weights = xp.exp(shifted)
        weights = weights / xp.sum(weights, axis=-1, keepdims=True)
        weighted = xp.where(weights > 0, weights * sizes, 0)  # a key of weight 0 (masked by -inf) adds nothing
        spread = xp.sum(weighted, axis=-1, keepdims=True)  # B: {B, QH, rows, 1}
        magnitudes = xp.abs(values)
        plain = products.matmul(xp, weights.reshape(b, kvh, found.group * count, t), magnitudes)  # P
        grown = products.matmul(xp, weighted.reshape(b, kvh, found.group * count, t), magnitudes)  # A
        vhs = found.value_head_size
        total = plain.reshape(b, qh, count, vhs) * (1 + spread) + grown.reshape(b, qh, count, vhs)
    return xp.transpose(total, (0, 2, 1, 3))


# ---------------------------------------------------------------- tolerance


def attention_tolerance_scale(call) -> int:
    """2 * headSize + 5 * T + 3 for T = pastSequenceLength + keyValueSequenceLength keys (see the tolerance)."""
    shapes = {name: tensor.shape for name, tensor in call.tensors.items() if name in call.operator.inputs}
    found = layout(shapes, call.parameters)
    return 2 * found.head_size + 5 * found.total + 3


_TOLERANCE = Tolerance(
    "ulp", 1, 1,
    "WebNN's conformance tolerances (web-platform-tests webnn/conformance_tests) for the steps, added: matmul's 2K "
    "ULP for the K = headSize terms of Query x Key^T, softmax's 3N + 3 for its N = T keys, and 2T for the T terms "
    "of the product with Value: (2 * headSize + 5 * T + 3) ULP for T = pastSequenceLength + keyValueSequenceLength "
    "keys; the same count of FLOAT16 ULP, as DirectML may compute a FLOAT16 attention in half precision (ONNX "
    "Runtime's DmlOperatorGroupQueryAttention.cpp: casts to FLOAT32 'replaced with half precision computation')",
    floor_float32=2.0 ** -20, floor_float16=2.0 ** -10,
    floor_source="an output that cancels (values of both signs averaging near 0) carries the rounding error of its "
                 "terms, about T ULP of the values rather than of the result; 2^-20 (FLOAT16 2^-10, an ULP of 1) "
                 "covers values of about unit scale, as GEMM's floor")

# ---------------------------------------------------------------- notes

_NOTES = (
    "Steps (the page): [Query, Key, Value + BiasTensor] -> Query x Key^T * Scale -> [+ RelativePositionBiasTensor] "
    "-> [+ MaskFilterValue where the mask says padding] -> softmax over the keys -> x Value. dmlcli widens FLOAT16 "
    "exactly to FLOAT32, computes every step in FLOAT32 (two batched xp.matmul products, BLAS or cuBLAS; the "
    "softmax subtracts the row's maximum) and rounds once to the output type; with --allow-tf32 a FLOAT32 call's "
    "products on the GPU may run on TF32 tensor cores (checked within 2^13 times the tolerance).",
    "Layouts (the page): QueryTensor {batchSize, sequenceLength, hiddenSize}, KeyTensor {batchSize, "
    "keyValueSequenceLength, hiddenSize}, ValueTensor {batchSize, keyValueSequenceLength, valueHiddenSize} (4 or 5 "
    "dimensions with leading 1s); StackedQueryKeyTensor {batchSize, sequenceLength, headCount, 2, headSize}, "
    "StackedKeyValueTensor {batchSize, keyValueSequenceLength, headCount, 2, headSize}, StackedQueryKeyValueTensor "
    "{batchSize, sequenceLength, headCount, 3, headSize}, stacked on the fourth dimension. Exactly one tensor gives "
    "the queries, one the keys and one the values. hiddenSize = headCount * headSize, valueHiddenSize = headCount * "
    "valueHeadSize; a stack with the keys gives the values the keys' head size.",
    "Keys and values from the past alone: KeyTensor and ValueTensor (and their stacks) may both be left out where "
    "PastKeyTensor and PastValueTensor are given: ONNX Runtime's DmlOperatorMultiHeadAttention.cpp passes a 4-D "
    "key and value (a cross-attention cache) as PastKeyTensor and PastValueTensor with KeyTensor and ValueTensor "
    "null. PastKeyTensor and PastValueTensor come together (dmlcli's rule: the keys and values need one length).",
    "BiasTensor {hiddenSize + hiddenSize + valueHiddenSize} (2 to 5 dimensions with leading 1s) is added to the "
    "queries, keys and values of this call (not to the past), each in its hidden layout (head-major, as QueryTensor "
    "holds it), whatever layout they come in.",
    "PastKeyTensor {batchSize, headCount, pastSequenceLength, headSize} and PastValueTensor (valueHeadSize last) come "
    "before this call's keys and values: OutputPresentKeyTensor and OutputPresentValueTensor are the concatenations "
    "{batchSize, headCount, pastSequenceLength + keyValueSequenceLength, ...} (this call's rows alone without a "
    "past; the page's 'present state for cross attention'). Both present outputs are _Maybenull_: a call that leaves "
    "them out (outputs=(\"OutputTensor\",) in the API, --outputs OutputTensor, a DxDispatch desc without them) does "
    "not make them (no copy of the keys and values); by default both are computed and returned.",
    "RelativePositionBiasTensor {batchSize, headCount, sequenceLength, pastSequenceLength + keyValueSequenceLength} "
    "(ONNX Runtime checks these Sizes; 5 dimensions with a leading 1) is added to the scaled scores; sizes of 1 "
    "are read for every index (a DirectML desc's zero Strides; the API and the command line take them, as GEMM's "
    "CTensor).",
    "MaskType (the page): BOOLEAN: MaskTensor {batchSize, headCount, sequenceLength, pastSequenceLength + "
    "keyValueSequenceLength} (ONNX Runtime's broadcast 4-D desc; sizes of 1 broadcast), 0 adds MaskFilterValue, "
    "any other value nothing; KEY_SEQUENCE_LENGTH {1, batchSize}: keys at and after the length are masked; "
    "KEY_SEQUENCE_END_START {2, batchSize}: the end (exclusive) then the start (inclusive) of the valid keys; "
    "KEY_QUERY_SEQUENCE_LENGTH_START_END {batchSize * 3 + 2}: keyLength[0..B-1], queryStart[0..B-1], queryEnd, "
    "keyStart[0..B-1], keyEnd, which dmlcli reads as ONNX Runtime's contrib MultiHeadAttention documents that mask "
    "(each entry's offsets in a packed sequence): entry b has queryStart[b+1] - queryStart[b] query rows and "
    "min(keyLength[b], keyStart[b+1] - keyStart[b]) valid keys; the other keys, and every key of a padded query "
    "row, are masked. Key positions count the past first. MaskTensor is INT32 (the support table).",
    "MaskFilterValue is added (the member's text: 'Value that gets added ... to the positions that the mask "
    "defined as padding'; ONNX Runtime's own Attention adds its mask_filter_value the same way), once per position "
    "whatever masks it; the MaskTensor text's 'set to' would differ only where a whole row is masked. A row whose "
    "every key is masked is therefore the softmax of its scores plus MaskFilterValue: with a finite value the "
    "unmasked softmax (as the shifted scores round), with -inf NaN (-inf - -inf), as the page's formula gives it; "
    "no row is zeroed. NaN and infinite inputs propagate by IEEE arithmetic.",
    "Scale and MaskFilterValue have no default in DirectML (every DESC field is given); dmlcli's API and command "
    "line default to 1 and -10000 (the page's usual value). HeadCount 0 is refused (exit 3), and so are a "
    "MaskTensor with MaskType NONE and a MaskType without MaskTensor (dmlcli's rules: the page gives neither a "
    "meaning).",
    "On the GPU with cuDNN installed (nvidia-cudnn-frontend, the gpu extras), a FLOAT16 call without BiasTensor, "
    "RelativePositionBiasTensor or past, unmasked or causal (a BOOLEAN MaskTensor of key <= query, or "
    "MULTIHEAD_ATTENTION1's past lengths without a past, MaskFilterValue <= -10000), runs as cuDNN's fused "
    "attention (attention/cudnn.py): FLOAT32 scores and softmax, the weights rounded to FLOAT16 for the product "
    "with Value (FLOAT32 accumulation), within the FLOAT16 tolerance above. Any other BOOLEAN mask runs there too, "
    "as cuDNN's additive bias. A BOOLEAN mask is data, so which of the two a mask takes is learnt where it lies "
    "(attention/causal_masks.py): checked on the device on its first call, then on every call behind the attention; "
    "a mask that stops holding the causal pattern has the rows it changed made again by the formula above on that "
    "call, and moves to the bias within a few calls. Other calls run the steps above.",
    "The scores are computed for blocks of query rows whose {batchSize, headCount, rows, T} FLOAT32 scores stay "
    "within 64 MiB (1 GiB on the GPU; one row at least), so the kernel's scratch is bounded whatever the sequence "
    "lengths; each row's result is the same computation.",
)
_NOTES_MHA1 = (
    "MULTIHEAD_ATTENTION1's page is 'TBD' (its member texts are MULTIHEAD_ATTENTION's); its support table is taken "
    "as MULTIHEAD_ATTENTION's, with PastSequenceLengthsTensor INT32 {batchSize}, as ONNX Runtime's "
    "DmlOperatorGroupQueryAttention.cpp gives it (the only user of the operator found).",
    "QueryHeadCount and KeyValueHeadCount (ONNX Runtime's GroupQueryAttention: num_heads and kv_num_heads): "
    "QueryTensor is {batchSize, sequenceLength, QueryHeadCount * headSize}, KeyTensor and ValueTensor and the past "
    "and present tensors have KeyValueHeadCount heads; QueryHeadCount must be a multiple of KeyValueHeadCount and "
    "query head h reads key/value head h / (QueryHeadCount / KeyValueHeadCount) (GroupQueryAttention's and ONNX's "
    "Attention's grouping). Stacks of the queries with the keys need equal counts.",
    "PastSequenceLengthsTensor (INT32 {batchSize}; dmlcli's reading of ONNX Runtime's GroupQueryAttention, which "
    "passes its seqlens_k there, or zeros for a prompt): batch entry b keeps the first PastSequenceLengths[b] rows "
    "of PastKeyTensor and PastValueTensor (a length is clamped to [0, pastSequenceLength]; without a past tensor "
    "to 0), this call's rows follow them and the rows after those are zeros in the present outputs and masked; and "
    "the attention is causal, as GroupQueryAttention always is (its DirectML prompt path sets the lengths to 0 and "
    "adds no mask): query i of entry b sees the keys up to position PastSequenceLengths[b] + i. A "
    "OutputPresentKeyTensor and OutputPresentValueTensor desc may have pastSequenceLength rows instead of "
    "pastSequenceLength + keyValueSequenceLength (GroupQueryAttention's shared past/present buffer): rows past its "
    "end are not written.",
)


def _entry(name: str, enum_value: int, introduced: str, inputs: tuple[str, ...], support, heads, summary: str,
           notes: tuple[str, ...]) -> Operator:
    return Operator(
        name=name, enum_value=enum_value, family=FAMILY, prefix="", summary=summary,
        formula=("Output = softmax((Query + Bq) x (Key + Bk)^T * Scale + RelativePositionBias [+ MaskFilterValue "
                 "where masked]) x (Value + Bv), per head, over past + present keys"),
        introduced=level(introduced), inputs=inputs, output="OutputTensor", extra_outputs=_OUTPUTS[1:],
        support=rows((introduced, {tensor: support[tensor] for tensor in inputs + _OUTPUTS})),
        same_data_type=_float_tensors(inputs), same_sizes=(), cpu_kernel=None, cuda_body="",
        parameters=(SCALE, MASK_FILTER_VALUE) + heads + (MASK_TYPE,), shape_rule=attention_shape,
        array_kernel=attention_kernel(inputs), gpu_array_kernel=attention_gpu_kernel(inputs), exactness=APPROXIMATE, tolerance=_TOLERANCE,
        tolerance_scale=attention_tolerance_scale, tf32_products=True,
        sum_bound=SumBound(
            attention_terms, "headSize + T + 4, T = pastSequenceLength + keyValueSequenceLength keys (OutputTensor; "
                             "the present keys and values are copies, without a bound)",
            "P (1 + B) + A in float64, P = sum_j p_ij |v_j|, A = sum_j p_ij S_ij |v_j|, B = sum_j p_ij S_ij: p the "
            "softmax of the scores and S_ij the magnitude of score ij (|Scale| x |q_i| . |k_j| + "
            "|RelativePositionBias| + |MaskFilterValue| where masked + |s_ij - max_j s_ij|), since the softmax turns "
            "the scores' absolute rounding errors into relative errors of the probabilities",
            magnitude=attention_magnitude(inputs)),
        optional_inputs=tuple((tensor, "OutputTensor") for tensor in inputs), optional_since=level(introduced),
        optional_outputs=_OUTPUTS[1:], notes=_NOTES + notes,
    )


OPERATORS: tuple[Operator, ...] = (
    _entry("MULTIHEAD_ATTENTION", 164, "6_1", _MHA_INPUTS, _MHA_SUPPORT, (HEAD_COUNT,),
           "multi-head attention: softmax(Q K^T * Scale + biases, masks) V per head, with past and present keys "
           "and values", ()),
    _entry("MULTIHEAD_ATTENTION1", 172, "6_3", _MHA1_INPUTS, _MHA1_SUPPORT, (QUERY_HEAD_COUNT, KEY_VALUE_HEAD_COUNT),
           "multi-head attention with grouped-query heads (KeyValueHeadCount) and per-entry past lengths",
           _NOTES_MHA1),
)
