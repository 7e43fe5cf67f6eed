"""ONNX's Attention (opset 23, 24 and its window attributes) as one DirectML MULTIHEAD_ATTENTION1 call.

What lies outside the operator changes no value: 4-D Q, K, V {batch, heads, sequence, size} are transposed to
DirectML's {batch, sequence, heads * size} (and the output back); a mask gets leading size-1 axes up to 4-D;
ONNX's own masking rules (a boolean attn_mask, is_causal, the windows, nonpad_kv_seqlen, a mask shorter than the
keys) become one BOOLEAN MaskTensor (0: masked), with MaskFilterValue -inf, ONNX's additive value for a masked
position; a float attn_mask is RelativePositionBiasTensor, which DirectML adds to the scores the same way.
ONNX Runtime's DirectML provider expresses a causal attention the same way: as a mask (its Attention and
QAttention kernels hand MULTIHEAD_ATTENTION a mask, and DirectML has no causal field).
"""

from __future__ import annotations

import math

import numpy as np

from .adapters import MappingError, OnnxCall, Prepared, exact_text

_Q, _K, _V, _MASK, _PAST_KEY, _PAST_VALUE, _NONPAD = range(7)
_INPUTS = 12  # MULTIHEAD_ATTENTION1's DESC inputs, in order
_QUERY, _KEY, _VALUE, _BIAS, _MASK_TENSOR, _RELATIVE_BIAS, _PAST_K, _PAST_V = 0, 1, 2, 6, 7, 8, 9, 10
_ONNX_FLOAT_CODES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}  # TensorProto codes


class Heads:
    """The sizes of an ONNX Attention call: batch, query/key/value heads, sequences and head sizes."""

    def __init__(self, call: OnnxCall) -> None:
        q, k, v = call.input(_Q), call.input(_K), call.input(_V)
        if q is None or k is None or v is None:
            raise MappingError("ONNX's Attention needs Q, K and V")
        if not q.ndim == k.ndim == v.ndim or q.ndim not in (3, 4):
            raise MappingError(f"ONNX's Attention takes Q, K and V all 3-D or all 4-D, found ranks {q.ndim}, "
                               f"{k.ndim}, {v.ndim}")
        self.four_d = q.ndim == 4
        self.batch = q.shape[0]
        if self.four_d:
            self.query_heads, self.sequence, self.head_size = q.shape[1:]
            self.kv_heads, self.kv_sequence, _ = k.shape[1:]
            self.value_head_size = v.shape[3]
        else:
            self.query_heads = int(call.attr("q_num_heads", 0))
            self.kv_heads = int(call.attr("kv_num_heads", 0))
            if self.query_heads <= 0 or self.kv_heads <= 0:
                raise MappingError("ONNX's 3-D Attention needs q_num_heads and kv_num_heads")
            self.sequence, self.kv_sequence = q.shape[1], k.shape[1]
            self.head_size = q.shape[2] // self.query_heads
            self.value_head_size = v.shape[2] // self.kv_heads
        past = call.input(_PAST_KEY)
        self.past = 0 if past is None else past.shape[2]

    @property
    def total(self) -> int:
        return self.past + self.kv_sequence


def _hidden(array: np.ndarray, four_d: bool) -> np.ndarray:
    """ONNX's {B, heads, S, size} as DirectML's {B, S, heads * size} (a transpose outside the operator); 3-D as is."""
    if not four_d:
        return array
    batch, heads, sequence, size = array.shape
    return np.ascontiguousarray(np.transpose(array, (0, 2, 1, 3))).reshape(batch, sequence, heads * size)


def _as_4d(array: np.ndarray) -> np.ndarray:
    """A mask of rank below 4 with leading size-1 axes (ONNX broadcasts it right-aligned; a reshape)."""
    return array.reshape((1,) * (4 - array.ndim) + array.shape)


def _padded_keys(mask: np.ndarray, total: int, fill) -> np.ndarray:
    """ONNX's rule for a mask shorter than the keys: the missing keys are masked (-inf, or False)."""
    short = total - mask.shape[-1]
    if short <= 0:
        return mask
    return np.concatenate([mask, np.full(mask.shape[:-1] + (short,), fill, mask.dtype)], axis=-1)


def _causal_offsets(call: OnnxCall, heads: Heads) -> np.ndarray:
    """Per batch entry, how many keys come before query 0's own position (ONNX's bottom-right causal frontier):
    the past's length, or nonpad_kv_seqlen - sequence for an external cache, or 0."""
    nonpad = call.input(_NONPAD)
    if heads.past == 0 and nonpad is not None:
        return nonpad.astype(np.int64).reshape(heads.batch) - heads.sequence
    return np.full(heads.batch, heads.past, np.int64)


def allowed_keys(call: OnnxCall, heads: Heads) -> np.ndarray | None:
    """Where a query may attend a key by ONNX's boolean rules, {B or 1, H or 1, S, T}: the boolean attn_mask,
    is_causal, the windows and nonpad_kv_seqlen together; None where none applies."""
    rules = []
    mask = call.input(_MASK)
    if mask is not None and _is_boolean_mask(call):
        rules.append(_padded_keys(_as_4d(mask != 0), heads.total, False))
    row = np.arange(heads.sequence).reshape(1, 1, -1, 1)
    key = np.arange(heads.total).reshape(1, 1, 1, -1)
    offsets = _causal_offsets(call, heads).reshape(-1, 1, 1, 1)
    if call.attr("is_causal", 0):
        rules.append(key <= row + offsets)
    left, right = int(call.attr("left_window_size", -1)), int(call.attr("right_window_size", -1))
    if left >= 0:
        rules.append(row + offsets - key <= left)
    if right >= 0:
        rules.append(key - (row + offsets) <= right)
    nonpad = call.input(_NONPAD)
    if nonpad is not None:
        rules.append(key < nonpad.astype(np.int64).reshape(-1, 1, 1, 1))
    if not rules:
        return None
    allowed = rules[0]
    for rule in rules[1:]:
        allowed = allowed & rule
    return allowed


def _is_boolean_mask(call: OnnxCall) -> bool:
    # ONNX's attn_mask is bool or of Q's type; the case files write bool as uint8 0/1.
    mask = call.input(_MASK)
    return mask is not None and mask.dtype.kind in "bu"


def _float_mask(call: OnnxCall, heads: Heads) -> np.ndarray | None:
    mask = call.input(_MASK)
    if mask is None or _is_boolean_mask(call):
        return None
    return _padded_keys(_as_4d(mask), heads.total, -np.inf)


def fully_masked_row(call: OnnxCall) -> bool:
    """Whether some query row has every key masked (ONNX's -inf or False everywhere in it): ONNX zeroes such a
    row; DirectML's softmax of scores all -inf has no such guard."""
    heads = Heads(call)
    blocked = np.zeros((1, 1, heads.sequence, heads.total), bool)
    allowed = allowed_keys(call, heads)
    if allowed is not None:
        blocked = blocked | ~allowed
    float_mask = _float_mask(call, heads)
    if float_mask is not None:
        blocked = blocked | np.isneginf(float_mask)
    return bool(np.all(blocked, axis=-1).any())


def _key_lengths_only(call: OnnxCall) -> bool:
    """Whether nonpad_kv_seqlen is the call's only boolean rule (then MaskType KEY_SEQUENCE_LENGTH says it)."""
    return (call.input(_NONPAD) is not None and not call.attr("is_causal", 0) and not _is_boolean_mask(call)
            and int(call.attr("left_window_size", -1)) < 0 and int(call.attr("right_window_size", -1)) < 0)


def softmax_precision_differs(call: OnnxCall) -> bool:
    """softmax_precision asks for a type other than the inputs' own (ONNX's default)."""
    code = call.attr("softmax_precision")
    q = call.input(_Q)
    return code is not None and q is not None and _ONNX_FLOAT_CODES.get(int(code)) != str(q.dtype)


def asks_for_qk_output(call: OnnxCall) -> bool:
    return len(call.output_names) > 3 and bool(call.output_names[3])


_PRESENTS = ("OutputPresentKeyTensor", "OutputPresentValueTensor")


def adapt_attention(call: OnnxCall, fixed) -> Prepared:
    heads = Heads(call)
    inputs: list = [None] * _INPUTS
    inputs[_QUERY] = _hidden(call.input(_Q), heads.four_d)
    inputs[_KEY] = _hidden(call.input(_K), heads.four_d)
    inputs[_VALUE] = _hidden(call.input(_V), heads.four_d)
    inputs[_PAST_K], inputs[_PAST_V] = call.input(_PAST_KEY), call.input(_PAST_VALUE)
    float_mask = _float_mask(call, heads)
    if float_mask is not None:
        inputs[_RELATIVE_BIAS] = float_mask
    values = dict(fixed)
    scale = call.attr("scale")
    values.update(Scale=exact_text(float(scale) if scale is not None else 1 / math.sqrt(heads.head_size)),
                  QueryHeadCount=heads.query_heads, KeyValueHeadCount=heads.kv_heads, MaskType="NONE",
                  MaskFilterValue="-inf")
    if _key_lengths_only(call):
        inputs[_MASK_TENSOR] = call.input(_NONPAD).astype(np.int32).reshape(1, heads.batch)
        values["MaskType"] = "KEY_SEQUENCE_LENGTH"
    else:
        allowed = allowed_keys(call, heads)
        if allowed is not None:
            inputs[_MASK_TENSOR] = allowed.astype(np.int32)
            values["MaskType"] = "BOOLEAN"
    while inputs and inputs[-1] is None:
        inputs.pop()  # the trailing inputs left out
    names = call.output_names or ("Y",)
    # Y, present_key and present_value are MULTIHEAD_ATTENTION1's OutputTensor and its _Maybenull_ presents: the
    # call asks for those the node has.
    asked = ("OutputTensor",) + tuple(output for output, name in zip(_PRESENTS, names[1:3]) if name)

    def finish(outputs):
        given = dict(zip(asked, outputs))
        y = given["OutputTensor"]
        if heads.four_d:
            y = np.transpose(y.reshape(heads.batch, heads.sequence, heads.query_heads, heads.value_head_size),
                             (0, 2, 1, 3))
        onnx = (y,) + tuple(given.get(output) for output in _PRESENTS)
        return tuple(array for array, name in zip(onnx, names) if name)

    return Prepared(values, inputs, finish=finish, outputs=asked)
