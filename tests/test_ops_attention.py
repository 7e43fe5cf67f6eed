"""The attention family: MULTIHEAD_ATTENTION (6_1) and MULTIHEAD_ATTENTION1 (6_3).

Each operator against: its availability and support rows by level (a second transcription: DirectML.h's DESC
order, the page's table), every rule of the layouts, masks, biases and past tensors (exit 3 on the command line),
an independent reference written here from the page's steps with plain Python loops over batch, head, query row
and key (float64, math.fsum), grouped-query heads, past and present tensors and past lengths, optional inputs
left out, edge cases (a row with every key masked, NaN, sizes of 1, FLOAT16 rounded once), the command line, the
API, a DxDispatch model, PyTorch's scaled_dot_product_attention where torch is installed, and ONNX's Attention
node tests.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.checking.comparison import rule_for, ulp_distance
from dmlcli.cli import cli
from dmlcli.operators.attention import entries as module

from conftest import SHARED, SHARED_MISSING

# DirectML.h's DESC order (a second transcription: the entries' own tuples are not read here).
MHA_INPUTS = ("QueryTensor", "KeyTensor", "ValueTensor", "StackedQueryKeyTensor", "StackedKeyValueTensor",
              "StackedQueryKeyValueTensor", "BiasTensor", "MaskTensor", "RelativePositionBiasTensor", "PastKeyTensor",
              "PastValueTensor")
MHA1_INPUTS = MHA_INPUTS + ("PastSequenceLengthsTensor",)
OUTPUTS = ("OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor")
MHA, MHA1 = "multihead_attention", "multihead_attention1"


def inputs_for(op: str, tensors: dict) -> list:
    """The positional inputs of a call: each DESC tensor in order, None where left out."""
    names = MHA1_INPUTS if op == MHA1 else MHA_INPUTS
    assert set(tensors) <= set(names), set(tensors) - set(names)
    return [tensors.get(name) for name in names]


def heads_keywords(op: str, heads: int, kv_heads: int | None = None) -> dict:
    if op == MHA:
        assert kv_heads in (None, heads)
        return {"head_count": heads}
    return {"query_head_count": heads, "key_value_head_count": heads if kv_heads is None else kv_heads}


def run(op, tensors, **keywords):
    return dmlcli.run(op, *inputs_for(op, tensors), **keywords)


def validate(op, tensors, **keywords):
    return dmlcli.validate(op, *inputs_for(op, tensors), **keywords)


# ---------------------------------------------------------------- the entries


def test_the_family_holds_both_operators():
    assert [op.key for op in module.OPERATORS] == ["MULTIHEAD_ATTENTION", "MULTIHEAD_ATTENTION1"]
    assert [name for name, members in dmlcli.operators.FAMILIES if members == module.OPERATORS] == ["attention"]


@pytest.mark.parametrize("key, value, introduced, inputs, fields", [
    ("MULTIHEAD_ATTENTION", 164, "6_1", MHA_INPUTS, ("Scale", "MaskFilterValue", "HeadCount", "MaskType")),
    ("MULTIHEAD_ATTENTION1", 172, "6_3", MHA1_INPUTS,
     ("Scale", "MaskFilterValue", "QueryHeadCount", "KeyValueHeadCount", "MaskType")),
])
def test_entry(key, value, introduced, inputs, fields):
    op = dmlcli.find_operator(key)
    assert op.enum_value == value and op.introduced.short == introduced and op.family == "attention"
    assert op.inputs == inputs and op.outputs == OUTPUTS
    assert tuple(p.field for p in op.parameters) == fields
    # Every input is _Maybenull_ (DirectML.h), and so are the present outputs; OutputTensor is not.
    assert [name for name, _ in op.optional_inputs] == list(inputs) and op.optional_since.short == introduced
    assert op.optional_outputs == OUTPUTS[1:]
    assert op.tf32_products and op.exactness == "approximate" and op.notes
    mask_type = op.options["mask_type"]
    assert mask_type.values == (("NONE", 0), ("KEY_SEQUENCE_LENGTH", 1), ("KEY_SEQUENCE_END_START", 2),
                                ("KEY_QUERY_SEQUENCE_LENGTH_START_END", 3), ("BOOLEAN", 4))


def test_describe_names_the_optional_tensors():
    result = CliRunner().invoke(cli, ["describe", MHA1])
    assert result.exit_code == 0, result.output
    assert "Optional inputs (_Maybenull_; may be left out from DML_FEATURE_LEVEL_6_3): QueryTensor, " in result.output
    assert "Optional outputs (_Maybenull_): OutputPresentKeyTensor, OutputPresentValueTensor" in result.output
    document = json.loads(CliRunner().invoke(cli, ["describe", MHA, "--format", "json"]).output)
    assert document["optional_inputs"] == list(MHA_INPUTS) and document["optional_since"] == "DML_FEATURE_LEVEL_6_1"
    assert document["optional_outputs"] == list(OUTPUTS[1:])


# ---------------------------------------------------------------- layouts and masks by feature level

B, S, KV, P, H, HS, VHS = 2, 3, 4, 2, 2, 3, 5


def zeros(*shape, dtype="float32"):
    return np.zeros(shape, dtype)


LAYOUTS = {
    "separate": {"QueryTensor": zeros(B, S, H * HS), "KeyTensor": zeros(B, KV, H * HS),
                 "ValueTensor": zeros(B, KV, H * VHS)},
    "separate_5d": {"QueryTensor": zeros(1, 1, B, S, H * HS), "KeyTensor": zeros(1, B, KV, H * HS),
                    "ValueTensor": zeros(B, KV, H * VHS)},
    "stacked_query_key": {"StackedQueryKeyTensor": zeros(B, S, H, 2, HS), "ValueTensor": zeros(B, S, H * VHS)},
    "stacked_key_value": {"QueryTensor": zeros(B, S, H * HS), "StackedKeyValueTensor": zeros(B, KV, H, 2, HS)},
    "stacked_query_key_value": {"StackedQueryKeyValueTensor": zeros(B, S, H, 3, HS)},
    "past_only": {"QueryTensor": zeros(B, S, H * HS), "PastKeyTensor": zeros(B, H, P, HS),
                  "PastValueTensor": zeros(B, H, P, VHS)},
}


def total_keys(layout: str) -> int:
    return {"stacked_query_key": S, "stacked_query_key_value": S, "past_only": P}.get(layout, KV)


def mask_for(mask_type: str, total: int):
    return {"none": None, "boolean": zeros(B, 1, S, total, dtype="int32"),
            "key_sequence_length": zeros(1, B, dtype="int32"), "key_sequence_end_start": zeros(2, B, dtype="int32"),
            "key_query_sequence_length_start_end": zeros(3 * B + 2, dtype="int32")}[mask_type]


MASK_TYPES = ["none", "boolean", "key_sequence_length", "key_sequence_end_start",
              "key_query_sequence_length_start_end"]


@pytest.mark.parametrize("mask_type", MASK_TYPES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("op", [MHA, MHA1])
def test_each_layout_and_mask_type_by_level(op, layout, mask_type):
    tensors = dict(LAYOUTS[layout])
    mask = mask_for(mask_type, total_keys(layout))
    if mask is not None:
        tensors["MaskTensor"] = mask
    keywords = {**heads_keywords(op, H), "mask_type": mask_type}
    first = "6_1" if op == MHA else "6_3"
    for feature_level in ("6_0", "6_1", "6_2", "6_3"):
        if feature_level >= first:
            verdict = validate(op, tensors, feature_level=feature_level, **keywords)
            assert verdict.lowest_feature_level.short == first
        else:
            with pytest.raises(dmlcli.ValidationError, match=f"supported from DML_FEATURE_LEVEL_{first}"):
                validate(op, tensors, feature_level=feature_level, **keywords)


def test_the_present_outputs_have_the_past_and_this_calls_rows():
    tensors = {**LAYOUTS["separate"], "PastKeyTensor": zeros(B, H, P, HS), "PastValueTensor": zeros(B, H, P, VHS)}
    out, key, value = run(MHA, tensors, head_count=H)
    assert out.shape == (B, S, H * VHS) and key.shape == (B, H, P + KV, HS) and value.shape == (B, H, P + KV, VHS)


@pytest.mark.parametrize("tensors, keywords, words", [
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4)},
     {"head_count": 3}, "QueryTensor's hidden size 4 is not a multiple of HeadCount 3"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4)},
     {"head_count": 0}, "HeadCount is 0"),
    ({"KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4)}, {"head_count": 2}, "no queries"),
    ({"QueryTensor": zeros(1, 2, 4)}, {"head_count": 2}, "no keys"),
    ({"QueryTensor": zeros(1, 2, 4), "StackedQueryKeyValueTensor": zeros(1, 2, 2, 3, 2)}, {"head_count": 2},
     "QueryTensor and StackedQueryKeyValueTensor both give the queries"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "StackedKeyValueTensor": zeros(1, 3, 2, 2, 2)},
     {"head_count": 2}, "KeyTensor and StackedKeyValueTensor both give the keys"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "PastValueTensor": zeros(1, 2, 1, 2)},
     {"head_count": 2}, "one of each is not a layout"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "PastKeyTensor": zeros(1, 2, 1, 2)}, {"head_count": 2}, "PastKeyTensor and PastValueTensor go together"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "PastKeyTensor": zeros(1, 2, 1, 3), "PastValueTensor": zeros(1, 2, 1, 2)}, {"head_count": 2},
     "PastKeyTensor Sizes [1, 2, 1, 3] must be [1, 2, 1, 2]"),
    ({"QueryTensor": zeros(2, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4)},
     {"head_count": 2}, "KeyTensor Sizes [1, 3, 4] must be [2, 3, 4]"),
    ({"QueryTensor": zeros(2, 1, 2, 4), "KeyTensor": zeros(2, 3, 4), "ValueTensor": zeros(2, 3, 4)},
     {"head_count": 2}, "more dimensions are allowed only as leading sizes of 1"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 2, 4)},
     {"head_count": 2}, "ValueTensor Sizes [1, 2, 4] must be [1, 3, 4]"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "BiasTensor": zeros(8)}, {"head_count": 2}, "BiasTensor Sizes [8] must be [12]"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "RelativePositionBiasTensor": zeros(1, 2, 2, 2)}, {"head_count": 2},
     "RelativePositionBiasTensor Sizes [1, 2, 2, 2] must be [1, 2, 2, 3]"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "MaskTensor": zeros(1, 1, dtype="int32")}, {"head_count": 2}, "MaskTensor is given but MaskType is NONE"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4)},
     {"head_count": 2, "mask_type": "boolean"}, "MaskType BOOLEAN reads MaskTensor, which is not given"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "MaskTensor": zeros(2, 1, dtype="int32")}, {"head_count": 2, "mask_type": "key_sequence_length"},
     "MaskType KEY_SEQUENCE_LENGTH: {1, batchSize}"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "MaskTensor": zeros(1, 2, 2, 2, dtype="int32")}, {"head_count": 2, "mask_type": "boolean"},
     "MaskTensor Sizes [1, 2, 2, 2] must be [1, 2, 2, 3]"),
    ({"QueryTensor": zeros(1, 2, 4), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4),
      "MaskTensor": zeros(4, dtype="int32")}, {"head_count": 2, "mask_type": "key_query_sequence_length_start_end"},
     "{batchSize * 3 + 2}"),
])
def test_rules_refused(tensors, keywords, words):
    with pytest.raises(dmlcli.ValidationError) as refused:
        validate(MHA, tensors, **keywords)
    assert words in str(refused.value)


@pytest.mark.parametrize("tensors, keywords, words", [
    ({"QueryTensor": zeros(1, 2, 6), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4)},
     {"query_head_count": 3, "key_value_head_count": 2}, "QueryHeadCount 3 is not a multiple of KeyValueHeadCount 2"),
    ({"StackedQueryKeyValueTensor": zeros(1, 2, 2, 3, 2)}, {"query_head_count": 4, "key_value_head_count": 2},
     "a stack of the queries with the keys has one head count"),
    ({"QueryTensor": zeros(1, 2, 8), "KeyTensor": zeros(1, 3, 8), "ValueTensor": zeros(1, 3, 4)},
     {"query_head_count": 4, "key_value_head_count": 2}, "KeyTensor Sizes [1, 3, 8] must be [1, 3, 4]"),
    ({"QueryTensor": zeros(2, 2, 8), "KeyTensor": zeros(2, 3, 4), "ValueTensor": zeros(2, 3, 4),
      "PastSequenceLengthsTensor": zeros(1, dtype="int32")}, {"query_head_count": 4, "key_value_head_count": 2},
     "PastSequenceLengthsTensor Sizes [1] must be [2]"),
    ({"QueryTensor": zeros(1, 2, 8), "KeyTensor": zeros(1, 3, 4), "ValueTensor": zeros(1, 3, 4)},
     {"query_head_count": 4, "key_value_head_count": 0}, "KeyValueHeadCount is 0"),
])
def test_mha1_rules_refused(tensors, keywords, words):
    with pytest.raises(dmlcli.ValidationError) as refused:
        validate(MHA1, tensors, **keywords)
    assert words in str(refused.value)


@pytest.mark.parametrize("op, tensors, words", [
    (MHA, {"QueryTensor": zeros(1, 2, 4, dtype="int32"), "KeyTensor": zeros(1, 3, 4, dtype="int32"),
           "ValueTensor": zeros(1, 3, 4, dtype="int32")}, "QueryTensor data type INT32 is not supported"),
    (MHA, {**LAYOUTS["separate"], "MaskTensor": zeros(1, B, dtype="uint32")}, "MaskTensor data type UINT32"),
    (MHA1, {**LAYOUTS["separate"], "PastSequenceLengthsTensor": zeros(B, dtype="uint32")},
     "PastSequenceLengthsTensor data type UINT32"),
    (MHA, {"QueryTensor": zeros(B, S, H * HS), "KeyTensor": zeros(B, KV, H * HS, dtype="float16"),
           "ValueTensor": zeros(B, KV, H * VHS)}, "must have the same DataType"),
    (MHA, {"QueryTensor": zeros(1, 1, 1, B, S, H * HS), "KeyTensor": zeros(B, KV, H * HS),
           "ValueTensor": zeros(B, KV, H * VHS)}, "QueryTensor dimension count 6 is not supported"),
])
def test_data_types_and_ranks_refused(op, tensors, words):
    keywords = heads_keywords(op, H)
    if "MaskTensor" in tensors:
        keywords["mask_type"] = "key_sequence_length"
    with pytest.raises(dmlcli.ValidationError) as refused:
        validate(op, tensors, **keywords)
    assert words in str(refused.value)


def test_float16_is_accepted_and_the_outputs_take_the_inputs_type():
    tensors = {name: array.astype("float16") for name, array in LAYOUTS["separate"].items()}
    outputs = run(MHA1, tensors, query_head_count=H, key_value_head_count=H)
    assert [o.dtype for o in outputs] == [np.float16] * 3


# ---------------------------------------------------------------- the independent reference (float64, loops)


def _last(array, rank: int) -> np.ndarray:
    return np.asarray(array, np.float64).reshape(np.asarray(array).shape[-rank:])


def _split_heads(t: dict, name: str, heads: int) -> dict:
    """{(b, head, row): vector} of a {batchSize, rows, heads * size} tensor (any leading 1s), head-major."""
    array = _last(t[name], 3)
    size = array.shape[2] // heads
    return {(b, h, row): array[b, row, h * size:(h + 1) * size]
            for b, row, h in np.ndindex(array.shape[0], array.shape[1], heads)}


def _read_layout(t: dict, qh: int, kvh: int):
    """Queries q[b, h, i], keys k[b, g, j] and values v[b, g, j] (float64 vectors) of this call, as the page
    lays each layout out."""
    q = _split_heads(t, "QueryTensor", qh) if "QueryTensor" in t else {}
    k = _split_heads(t, "KeyTensor", kvh) if "KeyTensor" in t else {}
    v = _split_heads(t, "ValueTensor", kvh) if "ValueTensor" in t else {}
    # Stacks on the fourth dimension: {batchSize, rows, heads, 2 or 3, headSize}.
    stacks = {"StackedQueryKeyTensor": (q, k), "StackedKeyValueTensor": (k, v),
              "StackedQueryKeyValueTensor": (q, k, v)}
    for name, targets in stacks.items():
        if name in t:
            stack = _last(t[name], 5)
            for b, row, h in np.ndindex(stack.shape[:3]):
                for position, target in enumerate(targets):
                    target[b, h, row] = stack[b, row, h, position]
    return q, k, v


def _add_bias(t, q, k, v, qh, kvh):
    if "BiasTensor" not in t:
        return
    bias = np.asarray(t["BiasTensor"], np.float64).reshape(-1)
    hs = len(next(iter(q.values())))
    for (b, h, i), row in q.items():
        q[b, h, i] = row + bias[h * hs:(h + 1) * hs]
    for (b, g, j), row in k.items():
        k[b, g, j] = row + bias[qh * hs + g * hs:qh * hs + (g + 1) * hs]
    for (b, g, j), row in v.items():
        vhs = len(row)
        start = qh * hs + kvh * hs + g * vhs
        v[b, g, j] = row + bias[start:start + vhs]


def _masked(mask_type: str, mask, b, h, i, j, sequence: int, batch: int) -> bool:
    if mask_type == "none":
        return False
    m = np.asarray(mask).astype(np.int64)
    if mask_type == "boolean":
        m4 = m.reshape(m.shape[-4:])
        index = tuple(0 if size == 1 else x for size, x in zip(m4.shape, (b, h, i, j)))
        return int(m4[index]) == 0
    if mask_type == "key_sequence_length":
        return j >= int(m.reshape(-1)[b])
    if mask_type == "key_sequence_end_start":
        end, start = int(m.reshape(2, -1)[0, b]), int(m.reshape(2, -1)[1, b])
        return not start <= j < end
    values = [int(x) for x in m.reshape(-1)]
    key_length = values[b]
    query_rows = values[batch + b + 1] - values[batch + b]
    key_rows = values[2 * batch + 1 + b + 1] - values[2 * batch + 1 + b]
    return i >= query_rows or j >= min(key_length, key_rows)


def reference(t: dict, *, heads: int, kv_heads: int | None = None, scale=1.0, mask_type="none",
              mask_filter=-10000.0):
    """(Output, PresentKey, PresentValue) in float64 and the query rows whose every key is masked {B, S, QH}."""
    qh, kvh = heads, heads if kv_heads is None else kv_heads
    group = qh // kvh
    scale, mask_filter = float(np.float32(scale)), float(np.float32(mask_filter))
    q, k, v = _read_layout(t, qh, kvh)
    _add_bias(t, q, k, v, qh, kvh)
    batch = 1 + max(b for b, _, _ in q)
    sequence = 1 + max(i for _, _, i in q)
    kv = 1 + max((j for _, _, j in k), default=-1)
    past_k = _last(t["PastKeyTensor"], 4) if "PastKeyTensor" in t else None
    past_v = _last(t["PastValueTensor"], 4) if "PastValueTensor" in t else None
    past = 0 if past_k is None else past_k.shape[2]
    hs = len(q[0, 0, 0])
    vhs = len(v[0, 0, 0]) if v else past_v.shape[3]
    total = past + kv
    lengths = t.get("PastSequenceLengthsTensor")
    keys = np.zeros((batch, kvh, total, hs))
    values = np.zeros((batch, kvh, total, vhs))
    valid = np.ones((batch, total), bool)
    for b in range(batch):
        kept = past if lengths is None else min(max(int(lengths[b]), 0), past)
        for g in range(kvh):
            for p in range(kept):
                keys[b, g, p], values[b, g, p] = past_k[b, g, p], past_v[b, g, p]
            for j in range(kv):
                keys[b, g, kept + j], values[b, g, kept + j] = k[b, g, j], v[b, g, j]
        if lengths is not None:
            valid[b, kept + kv:] = False
    relative = _last(t["RelativePositionBiasTensor"], 4) if "RelativePositionBiasTensor" in t else None
    out = np.zeros((batch, sequence, qh * vhs))
    every_key_masked = np.zeros((batch, sequence, qh), bool)
    for b in range(batch):
        kept = None if lengths is None else min(max(int(lengths[b]), 0), past)
        for h in range(qh):
            g = h // group
            for i in range(sequence):
                scores, masked_count = [], 0
                for j in range(total):
                    score = math.fsum(float(x) * float(y) for x, y in zip(q[b, h, i], keys[b, g, j])) * scale
                    if relative is not None:
                        index = tuple(0 if size == 1 else x for size, x in zip(relative.shape, (b, h, i, j)))
                        score += float(relative[index])
                    masked = _masked(mask_type, t.get("MaskTensor"), b, h, i, j, sequence, batch)
                    if kept is not None:
                        masked = masked or not valid[b, j] or j > kept + i  # causal, as GroupQueryAttention
                    if masked:
                        score += mask_filter
                        masked_count += 1
                    scores.append(score)
                every_key_masked[b, i, h] = masked_count == total
                top = max(scores)
                weights = [math.exp(x - top) if not math.isnan(x - top) else math.nan for x in scores]
                whole = math.fsum(weights)
                for e in range(vhs):
                    out[b, i, h * vhs + e] = math.fsum(w * float(values[b, g, j, e])
                                                       for j, w in enumerate(weights)) / whole
    return (out, keys, values), every_key_masked


def assert_close(got, expected64, operator, call, context="", skip_rows=None):
    """Within the operator's rule for this call: ULP of the output type, or the rule's absolute floor."""
    expected64 = np.asarray(expected64, np.float64).reshape(got.shape)
    if skip_rows is not None:
        got, expected64 = np.where(skip_rows, 0, got), np.where(skip_rows, 0, expected64)
    expected = expected64.astype(got.dtype)
    rule = rule_for(operator, got.dtype, call=call)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), context
    distance = np.where(np.isnan(got), 0, ulp_distance(got, expected))
    absolute = np.where(np.isnan(got), 0, np.abs(got.astype(np.float64) - expected64))
    ok = (distance <= rule.limit) | (absolute <= rule.floor)
    assert ok.all(), f"{context}: {distance[~ok].max()} ULP > {rule.limit}, {absolute[~ok].max()} > {rule.floor}"


def check_against_reference(op, tensors, *, heads, kv_heads=None, scale=1.0, mask_type="none", mask_filter=-10000.0,
                            context=""):
    keywords = {**heads_keywords(op, heads, kv_heads), "scale": scale, "mask_type": mask_type,
                "mask_filter_value": mask_filter}
    verdict = validate(op, tensors, **keywords)
    outputs = run(op, tensors, **keywords)
    expected, every_key_masked = reference(tensors, heads=heads, kv_heads=kv_heads, scale=scale, mask_type=mask_type,
                                           mask_filter=mask_filter)
    # A finite MaskFilterValue shifts a row whose every key is masked: FLOAT32's rounding of score +
    # MaskFilterValue is the device's, not a float64 reference's, so such rows are compared by the edge-case tests.
    vhs = outputs[0].shape[-1] // every_key_masked.shape[2]
    skip = np.repeat(every_key_masked, vhs, axis=2) if math.isfinite(mask_filter) else None
    for index, (got, want) in enumerate(zip(outputs, expected)):
        assert_close(got, want, verdict.call.operator, verdict.call, f"{context} output {index}",
                     skip if index == 0 else None)
    return outputs


def _array(draw, shape, dtype, low=-2.0, high=2.0):
    size = math.prod(shape)
    values = draw(st.lists(st.integers(int(low * 16), int(high * 16)), min_size=size, max_size=size))
    return (np.array(values, np.float64) / 16).astype(dtype).reshape(shape)


def _mask(draw, mask_type: str, batch: int, heads: int, sequence: int, total: int):
    def ints(low, high, count):
        return draw(st.lists(st.integers(low, high), min_size=count, max_size=count))

    if mask_type == "boolean":
        shape = tuple(size if draw(st.booleans()) else 1 for size in (batch, heads, sequence, total))
        return np.array(ints(0, 2, math.prod(shape)), np.int32).reshape(shape)
    if mask_type == "key_sequence_length":
        return np.array([ints(-1, total + 1, batch)], np.int32)
    if mask_type == "key_sequence_end_start":
        return np.array([ints(0, total + 1, batch), ints(-1, total, batch)], np.int32)
    key_lengths = ints(0, total + 1, batch)
    query_offsets = np.cumsum([0] + ints(0, sequence, batch)).tolist()
    key_offsets = np.cumsum([0] + ints(0, total, batch)).tolist()
    return np.array(key_lengths + query_offsets + key_offsets, np.int32)


@st.composite
def attention_calls(draw):
    op = draw(st.sampled_from([MHA, MHA1]))
    dtype = draw(st.sampled_from(["float32", "float16"]))
    layout = draw(st.sampled_from(["separate", "stacked_query_key", "stacked_key_value", "stacked_query_key_value",
                                   "past_only"]))
    batch, sequence = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    kv_heads = draw(st.integers(1, 2))
    group = draw(st.integers(1, 2)) if op == MHA1 and layout not in ("stacked_query_key",
                                                                      "stacked_query_key_value") else 1
    heads, hs = kv_heads * group, draw(st.integers(1, 3))
    vhs = hs if layout in ("stacked_key_value", "stacked_query_key_value") else draw(st.integers(1, 3))
    past = draw(st.integers(1, 2)) if layout == "past_only" else draw(st.integers(0, 2))
    kv = {"stacked_query_key": sequence, "stacked_query_key_value": sequence, "past_only": 0}.get(
        layout, draw(st.integers(1, 3)))
    tensors = {}
    if layout in ("separate", "stacked_key_value", "past_only"):
        tensors["QueryTensor"] = _array(draw, (batch, sequence, heads * hs), dtype)
    if layout == "separate":
        tensors["KeyTensor"] = _array(draw, (batch, kv, kv_heads * hs), dtype)
    if layout in ("separate", "stacked_query_key"):
        tensors["ValueTensor"] = _array(draw, (batch, kv, kv_heads * vhs), dtype)
    if layout == "stacked_query_key":
        tensors["StackedQueryKeyTensor"] = _array(draw, (batch, sequence, heads, 2, hs), dtype)
    if layout == "stacked_key_value":
        tensors["StackedKeyValueTensor"] = _array(draw, (batch, kv, kv_heads, 2, hs), dtype)
    if layout == "stacked_query_key_value":
        tensors["StackedQueryKeyValueTensor"] = _array(draw, (batch, sequence, heads, 3, hs), dtype)
    if past:
        tensors["PastKeyTensor"] = _array(draw, (batch, kv_heads, past, hs), dtype)
        tensors["PastValueTensor"] = _array(draw, (batch, kv_heads, past, vhs), dtype)
    if draw(st.booleans()):
        tensors["BiasTensor"] = _array(draw, (heads * hs + kv_heads * hs + kv_heads * vhs,), dtype)
    total = past + kv
    if draw(st.booleans()):
        shape = tuple(size if draw(st.booleans()) else 1 for size in (batch, heads, sequence, total))
        tensors["RelativePositionBiasTensor"] = _array(draw, shape, dtype)
    if op == MHA1 and draw(st.booleans()):
        tensors["PastSequenceLengthsTensor"] = np.array(
            draw(st.lists(st.integers(-1, past + 1), min_size=batch, max_size=batch)), np.int32)
    mask_type = draw(st.sampled_from(MASK_TYPES))
    if mask_type != "none":
        tensors["MaskTensor"] = _mask(draw, mask_type, batch, heads, sequence, total)
    options = dict(heads=heads, kv_heads=kv_heads, mask_type=mask_type,
                   scale=draw(st.sampled_from([1.0, 0.5, 1 / math.sqrt(hs)])),
                   mask_filter=draw(st.sampled_from([-10000.0, -math.inf])))
    return op, tensors, options


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(call=attention_calls())
def test_against_the_reference(call):
    op, tensors, options = call
    if op == MHA:
        options.pop("kv_heads")
    context = f"{op} {sorted(tensors)} {options}"
    check_against_reference(op, tensors, context=context, **options)


# ---------------------------------------------------------------- the fields, one at a time


def data(shape, seed, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_optional_inputs_left_out_in_the_middle():
    tensors = {"QueryTensor": data((1, 2, 4), 1), "KeyTensor": data((1, 3, 4), 2), "ValueTensor": data((1, 3, 6), 3),
               "RelativePositionBiasTensor": data((1, 2, 2, 3), 4)}
    positional = dmlcli.run(MHA, tensors["QueryTensor"], tensors["KeyTensor"], tensors["ValueTensor"], None, None,
                            None, None, None, tensors["RelativePositionBiasTensor"], head_count=2)
    for got, want in zip(positional, check_against_reference(MHA, tensors, heads=2)):
        assert np.array_equal(got, want)
    # The inputs given in DESC order and stopped: the trailing ones are left out.
    three = dmlcli.run(MHA, tensors["QueryTensor"], tensors["KeyTensor"], tensors["ValueTensor"], head_count=2)
    assert len(three) == 3 and three[0].shape == (1, 2, 6)


def test_grouped_query_attention_reads_each_key_value_head_for_its_group():
    q, k, v = data((2, 3, 8), 5), data((2, 4, 4), 6), data((2, 4, 6), 7)
    grouped = check_against_reference(MHA1, {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v}, heads=4, kv_heads=2)
    # The same as MULTIHEAD_ATTENTION with each key/value head repeated for its two query heads (ONNX's GQA).
    repeated = {"QueryTensor": q, "KeyTensor": np.repeat(k.reshape(2, 4, 2, 2), 2, axis=2).reshape(2, 4, 8),
                "ValueTensor": np.repeat(v.reshape(2, 4, 2, 3), 2, axis=2).reshape(2, 4, 12)}
    plain = run(MHA, repeated, head_count=4)
    verdict = validate(MHA, repeated, head_count=4)
    assert_close(grouped[0], plain[0].astype(np.float64), verdict.call.operator, verdict.call)
    assert grouped[1].shape == (2, 2, 4, 2)  # the present keeps KeyValueHeadCount heads


def test_past_and_present_are_the_concatenation():
    q, k, v = data((1, 2, 4), 8), data((1, 3, 4), 9), data((1, 3, 4), 10)
    past_k, past_v = data((1, 2, 2, 2), 11), data((1, 2, 2, 2), 12)
    tensors = {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "PastKeyTensor": past_k, "PastValueTensor": past_v}
    _, present_k, present_v = check_against_reference(MHA, tensors, heads=2)
    assert np.array_equal(present_k, np.concatenate([past_k, np.transpose(k.reshape(1, 3, 2, 2), (0, 2, 1, 3))], 2))
    assert np.array_equal(present_v, np.concatenate([past_v, np.transpose(v.reshape(1, 3, 2, 2), (0, 2, 1, 3))], 2))
    # The past alone (ONNX Runtime's cross-attention cache): the present is the past.
    alone = run(MHA, {"QueryTensor": q, "PastKeyTensor": past_k, "PastValueTensor": past_v}, head_count=2)
    assert np.array_equal(alone[1], past_k) and np.array_equal(alone[2], past_v)


def test_past_sequence_lengths_keep_each_entrys_own_past_and_are_causal():
    q, k, v = data((2, 1, 8), 13), data((2, 1, 4), 14), data((2, 1, 4), 15)
    past_k, past_v = data((2, 2, 3, 2), 16), data((2, 2, 3, 2), 17)
    lengths = np.array([1, 3], np.int32)
    tensors = {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "PastKeyTensor": past_k, "PastValueTensor": past_v,
               "PastSequenceLengthsTensor": lengths}
    out, present_k, _ = check_against_reference(MHA1, tensors, heads=4, kv_heads=2)
    # A decoding step of entry b is the attention over its own past[:length] and the new row, nothing masked.
    for b, length in enumerate(lengths):
        own = {"QueryTensor": q[b:b + 1], "KeyTensor": k[b:b + 1], "ValueTensor": v[b:b + 1],
               "PastKeyTensor": past_k[b:b + 1, :, :length], "PastValueTensor": past_v[b:b + 1, :, :length]}
        alone = run(MHA1, own, query_head_count=4, key_value_head_count=2)
        verdict = validate(MHA1, own, query_head_count=4, key_value_head_count=2)
        assert_close(out[b:b + 1], alone[0].astype(np.float64), verdict.call.operator, verdict.call)
        assert np.array_equal(present_k[b, :, :length + 1], alone[1][0])
        assert not present_k[b, :, length + 1:].any()  # rows after this call's: zeros
    # A prompt (lengths 0) is causal: query i sees keys 0..i.
    prompt = {"QueryTensor": data((1, 3, 2), 18), "KeyTensor": data((1, 3, 2), 19), "ValueTensor": data((1, 3, 2), 20),
              "PastSequenceLengthsTensor": np.zeros(1, np.int32)}
    out = run(MHA1, prompt)
    assert np.array_equal(out[0][0, 0], prompt["ValueTensor"][0, 0])  # the first query sees the first key alone


def test_a_shared_past_present_buffer_keeps_the_pasts_sizes():
    from dmlcli import engine

    q, k, v = data((1, 1, 2), 21), data((1, 1, 2), 22), data((1, 1, 2), 23)
    past_k, past_v = data((1, 1, 4, 2), 24), data((1, 1, 4, 2), 25)
    inputs = inputs_for(MHA1, {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "PastKeyTensor": past_k,
                               "PastValueTensor": past_v, "PastSequenceLengthsTensor": np.array([2], np.int32)})
    shapes = {"OutputPresentKeyTensor": (1, 1, 4, 2), "OutputPresentValueTensor": (1, 1, 4, 2)}
    outcome = engine.run(engine.request(MHA1, output_shapes=shapes), inputs)
    present_k = outcome.all_outputs[1]
    assert present_k.shape == (1, 1, 4, 2)
    assert np.array_equal(present_k[0, 0, :2], past_k[0, 0, :2]) and np.array_equal(present_k[0, 0, 2], k[0, 0])
    with pytest.raises(dmlcli.ValidationError, match="do not match the Sizes its rule gives"):
        engine.run(engine.request(MHA1, output_shapes={"OutputPresentKeyTensor": (1, 1, 3, 2)}), inputs)


@pytest.mark.parametrize("mask_type, mask", [
    ("boolean", np.array([[[[1, 0, 1]]]], np.int32)),
    ("key_sequence_length", np.array([[2]], np.int32)),
    ("key_sequence_end_start", np.array([[3], [1]], np.int32)),
    ("key_query_sequence_length_start_end", np.array([2, 0, 1, 0, 3], np.int32)),
])
def test_each_mask_type_masks_what_its_page_says(mask_type, mask):
    q, k, v = data((1, 2, 2), 26), data((1, 3, 2), 27), data((1, 3, 2), 28)
    tensors = {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "MaskTensor": mask}
    out = check_against_reference(MHA, tensors, heads=1, mask_type=mask_type, mask_filter=-math.inf)[0]
    kept = {"boolean": [0, 2], "key_sequence_length": [0, 1], "key_sequence_end_start": [1, 2],
            "key_query_sequence_length_start_end": [0, 1]}[mask_type]
    # The row is the attention over the kept keys alone (-inf: the others weigh 0).
    alone = run(MHA, {"QueryTensor": q[:, :1], "KeyTensor": k[:, kept], "ValueTensor": v[:, kept]}, head_count=1)
    assert np.allclose(out[0, 0], alone[0][0, 0], rtol=1e-6, atol=1e-7)
    if mask_type == "key_query_sequence_length_start_end":
        assert np.isnan(out[0, 1]).all()  # query row 1 is padding (1 query row): every key masked, -inf: NaN


def test_a_row_with_every_key_masked():
    # Scores of a few bits and MaskFilterValue -8: score - 8 is exact, so the softmax is the unmasked one, bit for bit.
    q = np.array([[[0.5, 1.0], [1.0, -0.5]]], np.float32)
    k = np.array([[[1.0, 0.25], [0.5, 0.5], [-1.0, 0.0]]], np.float32)
    v = np.array([[[1.0, 2.0], [3.0, -4.0], [0.5, 0.25]]], np.float32)
    unmasked = run(MHA, {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v})[0]
    everything = {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "MaskTensor": np.zeros((1, 1, 1, 1), np.int32)}
    assert np.array_equal(run(MHA, everything, mask_type="boolean", mask_filter_value=-8)[0], unmasked)
    # -inf: every score of the row is -inf, and the softmax gives NaN (no row is zeroed).
    assert np.isnan(run(MHA, everything, mask_type="boolean", mask_filter_value="-inf")[0]).all()
    # A mask that masks nothing changes nothing.
    nothing = {**everything, "MaskTensor": np.ones((1, 1, 1, 1), np.int32)}
    assert np.array_equal(run(MHA, nothing, mask_type="boolean")[0], unmasked)


def test_nan_and_infinity_propagate():
    q, k, v = data((1, 2, 2), 29), data((1, 3, 2), 30), data((1, 3, 2), 31)
    v[0, 1, 0] = np.nan
    out = run(MHA, {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v})[0]
    assert np.isnan(out[..., 0]).all() and not np.isnan(out[..., 1]).any()
    k[0, 0, 0] = np.inf
    out = run(MHA, {"QueryTensor": np.abs(q) + 1, "KeyTensor": k, "ValueTensor": v})[0]
    assert np.isnan(out).all()  # inf - inf in the softmax of every row: IEEE's NaN


def test_sizes_of_one_give_the_value():
    value = np.array([[[0.75]]], np.float32)
    out = run(MHA, {"QueryTensor": np.array([[[3.0]]], np.float32), "KeyTensor": np.array([[[-2.0]]], np.float32),
                    "ValueTensor": value})
    assert np.array_equal(out[0], value) and out[1].shape == (1, 1, 1, 1)


def test_float16_is_computed_in_float32_and_rounded_once():
    tensors = {"QueryTensor": data((2, 3, 8), 32, "float16"), "KeyTensor": data((2, 5, 8), 33, "float16"),
               "ValueTensor": data((2, 5, 4), 34, "float16"), "BiasTensor": data((20,), 35, "float16")}
    half = run(MHA, tensors, head_count=2, scale=0.5)
    single = run(MHA, {n: a.astype(np.float32) for n, a in tensors.items()}, head_count=2, scale=0.5)
    for got, wide in zip(half, single):
        assert np.array_equal(got, wide.astype(np.float16))


def test_the_tolerance_grows_with_the_head_size_and_the_keys():
    tensors = {"QueryTensor": zeros(1, 2, 16), "KeyTensor": zeros(1, 7, 16), "ValueTensor": zeros(1, 7, 4),
               "PastKeyTensor": zeros(1, 2, 3, 8), "PastValueTensor": zeros(1, 2, 3, 2)}
    verdict = validate(MHA, tensors, head_count=2)
    assert rule_for(verdict.call.operator, np.float32, call=verdict.call).limit == 2 * 8 + 5 * (3 + 7) + 3


def test_blocks_of_query_rows_give_the_whole_result(monkeypatch):
    rng = np.random.default_rng(44)
    tensors = {"QueryTensor": data((2, 5, 8), 45), "KeyTensor": data((2, 5, 4), 46), "ValueTensor": data((2, 5, 4), 47),
               "PastKeyTensor": data((2, 2, 2, 2), 48), "PastValueTensor": data((2, 2, 2, 2), 49),
               "RelativePositionBiasTensor": data((2, 1, 5, 7), 50),
               "MaskTensor": (rng.random((1, 4, 5, 7)) > 0.3).astype(np.int32),
               "PastSequenceLengthsTensor": np.array([1, 2], np.int32)}
    keywords = dict(heads=4, kv_heads=2, mask_type="boolean", mask_filter=-math.inf)
    whole = check_against_reference(MHA1, tensors, **keywords)
    monkeypatch.setattr(module, "SCORE_BUDGET_BYTES", 1)  # one query row at a time
    rows = check_against_reference(MHA1, tensors, **keywords)
    for a, b in zip(whole, rows):
        assert np.array_equal(np.isnan(a), np.isnan(b)) and a.shape == b.shape


# ---------------------------------------------------------------- the command line, the API and DxDispatch


def test_command_line_run_with_none_in_the_middle():
    query = np.array([[[1, 0], [0, 1]]], np.float32)
    stacked = np.arange(12, dtype=np.float32).reshape(1, 3, 1, 2, 2) / 4  # StackedKeyValueTensor
    typed = [json.dumps({"dtype": "float32", "data": array.tolist()}) for array in (query, stacked)]
    arguments = ["run", MHA, typed[0], "none", "none", "none", typed[1], "none", "none",
                 '{"dtype": "int32", "data": [[2]]}', "--mask-type", "key_sequence_length", "--mask-filter-value",
                 "-inf", "-o", "-"]
    result = CliRunner().invoke(cli, arguments)
    assert result.exit_code == 0, result.output
    written = json.loads(result.output)
    assert list(written) == list(OUTPUTS)
    expected = run(MHA, {"QueryTensor": query, "StackedKeyValueTensor": stacked,
                         "MaskTensor": np.array([[2]], np.int32)}, mask_type="key_sequence_length",
                   mask_filter_value="-inf")
    for name, want in zip(OUTPUTS, expected):
        assert np.array_equal(np.array(written[name]["data"], np.float32).reshape(want.shape), want)


def test_command_line_refusal_exits_3():
    result = CliRunner().invoke(cli, ["run", MHA1, "[[[1, 0]]]", "[[[1, 0]]]", "[[[1, 0]]]", "--dtype", "float32",
                                      "--query-head-count", "2", "--key-value-head-count", "2", "-f", "6_2"])
    assert result.exit_code == 3, result.output
    assert "supported from DML_FEATURE_LEVEL_6_3" in result.output


def _model(tmp_path, desc: dict, resources: dict, bindings: dict, printed: list) -> str:
    model = {"resources": {name: {"initialValuesDataType": kind, "initialValues": values}
                           for name, (kind, values) in resources.items()},
             "dispatchables": {"mha": {"type": "DML_OPERATOR_MULTIHEAD_ATTENTION1", "desc": desc}},
             "commands": [{"type": "dispatch", "dispatchable": "mha", "bindings": bindings}]
             + [{"type": "print", "resource": name} for name in printed]}
    path = tmp_path / "mha.json"
    path.write_text(json.dumps(model))
    return str(path)


def test_dxdispatch_model_with_directmls_field_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    q, k, v = data((1, 2, 4), 36), data((1, 3, 2), 37), data((1, 3, 2), 38)
    lengths = np.array([0], np.int32)
    desc = {"QueryTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 4]},
            "KeyTensor": {"DataType": "FLOAT32", "Sizes": [1, 3, 2]},
            "ValueTensor": {"DataType": "FLOAT32", "Sizes": [1, 3, 2]},
            "StackedQueryKeyTensor": None, "MaskTensor": None,
            "PastSequenceLengthsTensor": {"DataType": "INT32", "Sizes": [1]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 4]},
            "Scale": 0.5, "MaskFilterValue": -10000, "QueryHeadCount": 2, "KeyValueHeadCount": 1,
            "MaskType": "DML_MULTIHEAD_ATTENTION_MASK_TYPE_NONE"}
    resources = {"q": ("FLOAT32", q.reshape(-1).tolist()), "k": ("FLOAT32", k.reshape(-1).tolist()),
                 "v": ("FLOAT32", v.reshape(-1).tolist()), "lengths": ("INT32", [0]),
                 "out": ("FLOAT32", {"valueCount": 8, "value": 0})}
    bindings = {"QueryTensor": "q", "KeyTensor": "k", "ValueTensor": "v", "PastSequenceLengthsTensor": "lengths",
                "OutputTensor": "out"}
    result = CliRunner().invoke(cli, ["dispatch", _model(tmp_path, desc, resources, bindings, ["out"]),
                                      "--no-timing"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("Resource 'out'"))
    printed = np.array([float(x) for x in line.split(": ", 1)[1].split(",")], np.float32)
    expected = run(MHA1, {"QueryTensor": q, "KeyTensor": k, "ValueTensor": v, "PastSequenceLengthsTensor": lengths},
                   query_head_count=2, key_value_head_count=1, scale=0.5)[0]
    assert np.allclose(printed, expected.reshape(-1), rtol=1e-5, atol=1e-7)  # printed with 6 digits
    # A desc whose Sizes break the layout is refused with the rule (exit 3).
    desc["KeyTensor"]["Sizes"] = [1, 3, 4]
    result = CliRunner().invoke(cli, ["dispatch", _model(tmp_path, desc, resources, bindings, ["out"])])
    assert result.exit_code == 3 and "KeyTensor Sizes [1, 3, 4] must be [1, 3, 2]" in result.output


# ---------------------------------------------------------------- PyTorch and ONNX


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_against_pytorch_scaled_dot_product_attention(causal, kv_heads):
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    q, k, v = data((2, 4, 3, 8), 40), data((2, kv_heads, 5, 8), 41), data((2, kv_heads, 5, 6), 42)
    allowed = np.random.default_rng(43).random((2, 1, 3, 5)) > 0.3
    allowed[..., 0] = True  # every row keeps a key: PyTorch and DirectML differ only on a row of nothing
    if causal:
        allowed &= np.arange(5)[None, :] <= np.arange(3)[:, None] + 2  # bottom-right, as ONNX's with 2 keys before
    group = 4 // kv_heads
    want = functional.scaled_dot_product_attention(
        torch.from_numpy(q.astype(np.float64)),
        torch.from_numpy(np.repeat(k, group, axis=1).astype(np.float64)),
        torch.from_numpy(np.repeat(v, group, axis=1).astype(np.float64)),
        attn_mask=torch.from_numpy(allowed), scale=0.25).numpy()
    hidden = {"QueryTensor": np.transpose(q, (0, 2, 1, 3)).reshape(2, 3, 32),
              "KeyTensor": np.transpose(k, (0, 2, 1, 3)).reshape(2, 5, kv_heads * 8),
              "ValueTensor": np.transpose(v, (0, 2, 1, 3)).reshape(2, 5, kv_heads * 6),
              "MaskTensor": allowed.astype(np.int32)}
    keywords = dict(query_head_count=4, key_value_head_count=kv_heads, scale=0.25, mask_type="boolean",
                    mask_filter_value="-inf")
    got = run(MHA1, hidden, **keywords)[0]
    verdict = validate(MHA1, hidden, **keywords)
    assert_close(got, np.transpose(want, (0, 2, 1, 3)).reshape(2, 3, 24), verdict.call.operator, verdict.call)


COMPLETE = SHARED / "onnx_operators_complete"


def test_onnx_attention_cases_pass_or_are_skipped_for_a_directml_reason():
    if not COMPLETE.is_dir():
        pytest.skip(SHARED_MISSING)
    from dmlcli.suite import run_suite

    outcome = run_suite([COMPLETE], backend="cpu", jobs=1, keyword="Attention")
    counts = outcome.counts()
    assert counts["failed"] == 0 and counts["error"] == 0, [
        (r.case_id, r.message) for r in outcome.results if r.verdict in ("failed", "error")]
    assert counts["passed"] + counts["skipped"] == 67 and counts["passed"] >= 38
    for result in outcome.results:
        if result.verdict == "skipped":
            assert "DirectML" in result.message, (result.case_id, result.message)
    by_case = {r.case_id: r for r in outcome.results}
    for name in ("4d_gqa_with_past_and_present", "4d_causal_with_past_and_present", "3d_gqa_causal",
                 "4d_gqa_causal_nonpad_decode_fp16", "4d_diff_heads_with_past_and_present_mask4d",
                 "local_window_rank1_boolean_mask"):
        assert by_case[f"onnx__test_attention_{name}"].passed, name
    assert "softcap" in by_case["onnx__test_attention_4d_softcap"].message
    assert "bfloat16" in by_case["onnx__test_attention_4d_causal_bf16"].message
    assert "qk_matmul_output" in by_case["onnx__test_attention_4d_with_qk_matmul"].message
    assert "every key masked" in by_case["onnx__test_attention_causal_boolmask_nan_robustness"].message
