"""A MULTIHEAD_ATTENTION(1) call's layout from its Sizes and head counts: the sizes of the attention and where the
queries, keys and values come from, every rule of the page on them checked. The shape rule (entries.py), the
kernels and cuDNN's plan (cudnn.py) read it."""

from __future__ import annotations

from typing import Mapping

from ...records import Frozen
from ..table.shaped import RuleViolation, describe_sizes


class Layout(Frozen):
    """What a call's Sizes say: the sizes of the attention and where query, keys and values come from."""

    batch: int
    sequence: int  # sequenceLength: query rows
    kv_sequence: int  # keyValueSequenceLength: key/value rows given in this call (0: only the past)
    past: int  # pastSequenceLength
    query_heads: int
    kv_heads: int
    head_size: int
    value_head_size: int
    query_from: str  # the tensor the queries come from
    key_from: str | None  # None: the keys are PastKeyTensor alone
    value_from: str | None

    def __init__(self, batch: int, sequence: int, kv_sequence: int, past: int, query_heads: int, kv_heads: int,
                 head_size: int, value_head_size: int, query_from: str, key_from: str | None,
                 value_from: str | None) -> None:
        vars(self).update(batch=batch, sequence=sequence, kv_sequence=kv_sequence, past=past,
                          query_heads=query_heads, kv_heads=kv_heads, head_size=head_size,
                          value_head_size=value_head_size, query_from=query_from, key_from=key_from,
                          value_from=value_from)

    @property
    def total(self) -> int:
        """The key positions each query row scores: pastSequenceLength + keyValueSequenceLength."""
        return self.past + self.kv_sequence

    @property
    def group(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return self.query_heads // self.kv_heads


# The layouts a role may come from; the page: "Exactly one Query, Key and Value tensor must be present, whether or
# not they're stacked" (its list of mutually exclusive tensors is these sets: at most one of each).
_QUERY_SOURCES = ("QueryTensor", "StackedQueryKeyTensor", "StackedQueryKeyValueTensor")
_KEY_SOURCES = ("KeyTensor", "StackedQueryKeyTensor", "StackedKeyValueTensor", "StackedQueryKeyValueTensor")
_VALUE_SOURCES = ("ValueTensor", "StackedKeyValueTensor", "StackedQueryKeyValueTensor")
STACKS = {"StackedQueryKeyTensor": 2, "StackedKeyValueTensor": 2, "StackedQueryKeyValueTensor": 3}


def head_counts(parameters: Mapping[str, object]) -> tuple[int, int]:
    """(query heads, key/value heads): MULTIHEAD_ATTENTION's HeadCount for both, or MULTIHEAD_ATTENTION1's two."""
    if "HeadCount" in parameters:
        return int(parameters["HeadCount"]), int(parameters["HeadCount"])
    return int(parameters["QueryHeadCount"]), int(parameters["KeyValueHeadCount"])


def mask_sizes(shape) -> tuple[int, ...]:
    """A MaskTensor's Sizes (at most 4) read as {1|B, 1|QH, S, T}: lead-padded with 1s."""
    return ((1,) * 4 + tuple(shape))[-4:]


def strip_leading_ones(shape, keep: int) -> tuple[int, ...]:
    """The last `keep` sizes of a tensor that may have leading 1s ("4 or 5 dimensions, as long as the leading
    dimensions are 1's"); RuleViolation where a leading size is not 1."""
    shape = tuple(shape)
    if len(shape) < keep or any(s != 1 for s in shape[:len(shape) - keep]):
        return ()
    return shape[len(shape) - keep:]


def _plain(shapes, name: str, keep: int, meaning: str) -> tuple[int, ...]:
    found = shapes[name]
    stripped = strip_leading_ones(found, keep)
    if len(stripped) != keep:
        raise RuleViolation(f"{name} Sizes {describe_sizes(found)} must be {meaning}; more dimensions are allowed "
                            "only as leading sizes of 1")
    return stripped


def _one_source(shapes, sources: tuple[str, ...], role: str) -> str | None:
    given = [name for name in sources if name in shapes]
    if len(given) > 1:
        raise RuleViolation(f"{' and '.join(given)} both give the {role}; exactly one tensor may (they are mutually "
                            "exclusive)")
    return given[0] if given else None


def _divide(hidden: int, heads: int, name: str, field: str) -> int:
    if hidden % heads:
        raise RuleViolation(f"{name}'s hidden size {hidden} is not a multiple of {field} {heads} (hiddenSize = "
                            f"{field} * headSize)")
    return hidden // heads


def _expect(shapes, name: str, expected: tuple[int, ...], meaning: str, leading_ones: bool = True) -> None:
    """A tensor of exactly these Sizes (with leading sizes of 1 where the page allows more dimensions)."""
    if name not in shapes:
        return
    found = tuple(shapes[name])
    stripped = strip_leading_ones(found, len(expected)) if leading_ones else found
    if stripped != expected:
        raise RuleViolation(f"{name} Sizes {describe_sizes(found)} must be {describe_sizes(expected)} ({meaning})")


def _broadcasts(shapes, name: str, full: tuple[int, ...], meaning: str) -> None:
    """A tensor of these Sizes or of sizes of 1 where it is the same for every index (DirectML reads it through
    zero Strides; the API and the command line take the sizes of 1, as GEMM's CTensor)."""
    if name not in shapes:
        return
    found = tuple(shapes[name])
    stripped = strip_leading_ones(found, len(full))
    if len(stripped) != len(full) or any(s not in (1, f) for s, f in zip(stripped, full)):
        raise RuleViolation(f"{name} Sizes {describe_sizes(found)} must be {describe_sizes(full)} ({meaning}), each "
                            "size 1 or that size (a size of 1 is read for every index)")


def layout(shapes: Mapping[str, tuple[int, ...]], parameters: Mapping[str, object]) -> Layout:
    """The call's Layout from the inputs' Sizes (every rule of the page checked: RuleViolation)."""
    query_heads, kv_heads = head_counts(parameters)
    q_field, kv_field = ("HeadCount", "HeadCount") if "HeadCount" in parameters else ("QueryHeadCount",
                                                                                      "KeyValueHeadCount")
    for field, count in ((q_field, query_heads), (kv_field, kv_heads)):
        if count == 0:
            raise RuleViolation(f"{field} is 0; an attention has at least one head")
    if query_heads % kv_heads:
        raise RuleViolation(f"QueryHeadCount {query_heads} is not a multiple of KeyValueHeadCount {kv_heads} (each "
                            "key/value head serves QueryHeadCount / KeyValueHeadCount query heads)")
    query_from = _one_source(shapes, _QUERY_SOURCES, "queries")
    key_from = _one_source(shapes, _KEY_SOURCES, "keys")
    value_from = _one_source(shapes, _VALUE_SOURCES, "values")
    if query_from is None:
        raise RuleViolation("no queries: give QueryTensor, StackedQueryKeyTensor or StackedQueryKeyValueTensor")
    for role, source, past in (("keys", key_from, "PastKeyTensor"), ("values", value_from, "PastValueTensor")):
        if source is None and past not in shapes:
            raise RuleViolation(f"no {role}: give {' or '.join(_KEY_SOURCES if role == 'keys' else _VALUE_SOURCES)} "
                                f"(or {past} alone)")
    if (key_from is None) != (value_from is None):
        raise RuleViolation("the keys and the values come from this call or both from PastKeyTensor and "
                            "PastValueTensor alone; one of each is not a layout")
    if ("PastKeyTensor" in shapes) != ("PastValueTensor" in shapes):
        raise RuleViolation("PastKeyTensor and PastValueTensor go together (the keys and the values need the same "
                            "past)")
    if query_heads != kv_heads and any(name in shapes for name in ("StackedQueryKeyTensor",
                                                                    "StackedQueryKeyValueTensor")):
        raise RuleViolation(f"a stack of the queries with the keys has one head count; QueryHeadCount {query_heads} "
                            f"and KeyValueHeadCount {kv_heads} differ")
    batch, sequence, head_size = _query_sizes(shapes, query_from, query_heads, q_field)
    kv_sequence, value_head_size = 0, None
    if key_from is not None:
        kv_sequence, value_head_size = _key_value_sizes(shapes, key_from, value_from, batch, sequence, kv_heads,
                                                        head_size, kv_field)
    past = 0
    if "PastKeyTensor" in shapes:
        past_key = _plain(shapes, "PastKeyTensor", 4, "{batchSize, headCount, pastSequenceLength, headSize}")
        past = past_key[2]
        _expect(shapes, "PastKeyTensor", (batch, kv_heads, past, head_size),
                f"{{batchSize, {kv_field}, pastSequenceLength, headSize}}")
        past_value = _plain(shapes, "PastValueTensor", 4, "{batchSize, headCount, pastSequenceLength, headSize}")
        if value_head_size is None:
            value_head_size = past_value[3]
        _expect(shapes, "PastValueTensor", (batch, kv_heads, past, value_head_size),
                f"{{batchSize, {kv_field}, pastSequenceLength, valueHeadSize}}")
    found = Layout(batch, sequence, kv_sequence, past, query_heads, kv_heads, head_size, value_head_size,
                   query_from, key_from, value_from)
    _check_extras(shapes, parameters, found)
    return found


def _query_sizes(shapes, query_from: str, query_heads: int, field: str) -> tuple[int, int, int]:
    if query_from == "QueryTensor":
        batch, sequence, hidden = _plain(shapes, "QueryTensor", 3, "{batchSize, sequenceLength, hiddenSize}")
        return batch, sequence, _divide(hidden, query_heads, "QueryTensor", field)
    batch, sequence, heads, stacked, head_size = shapes[query_from]
    if heads != query_heads or stacked != STACKS[query_from]:
        raise RuleViolation(f"{query_from} Sizes {describe_sizes(shapes[query_from])} must be {{batchSize, "
                            f"sequenceLength, {query_heads} ({field}), {STACKS[query_from]}, headSize}}")
    return batch, sequence, head_size


def _key_value_sizes(shapes, key_from: str, value_from: str, batch: int, sequence: int, kv_heads: int,
                     head_size: int, field: str) -> tuple[int, int]:
    """(keyValueSequenceLength, valueHeadSize) of the keys and values given in this call."""
    if key_from == "KeyTensor":
        _, kv_sequence, _ = _plain(shapes, "KeyTensor", 3, "{batchSize, keyValueSequenceLength, hiddenSize}")
        _expect(shapes, "KeyTensor", (batch, kv_sequence, kv_heads * head_size),
                f"{{batchSize, keyValueSequenceLength, {field} * headSize}}, the queries' batchSize and headSize")
    elif key_from == "StackedKeyValueTensor":
        kv_sequence = shapes[key_from][1]
        _expect(shapes, key_from, (batch, kv_sequence, kv_heads, 2, head_size),
                f"{{batchSize, keyValueSequenceLength, {field}, 2, headSize}}", leading_ones=False)
    else:  # stacked with the queries: the same sequence
        kv_sequence = sequence
    if value_from == "ValueTensor":
        _, _, v_hidden = _plain(shapes, "ValueTensor", 3, "{batchSize, keyValueSequenceLength, valueHiddenSize}")
        value_head_size = _divide(v_hidden, kv_heads, "ValueTensor", field)
        _expect(shapes, "ValueTensor", (batch, kv_sequence, kv_heads * value_head_size),
                "{batchSize, keyValueSequenceLength, valueHiddenSize}: the keys' batchSize and "
                "keyValueSequenceLength")
    else:  # stacked with the keys: values have the keys' head size
        value_head_size = head_size
    return kv_sequence, value_head_size


def _check_extras(shapes, parameters, found: Layout) -> None:
    """BiasTensor, RelativePositionBiasTensor, MaskTensor and PastSequenceLengthsTensor against the layout."""
    hidden = found.query_heads * found.head_size
    _expect(shapes, "BiasTensor",
            (hidden + found.kv_heads * found.head_size + found.kv_heads * found.value_head_size,),
            "{hiddenSize + hiddenSize + valueHiddenSize}: the query's, the key's and the value's biases")
    _broadcasts(shapes, "RelativePositionBiasTensor",
                (found.batch, found.query_heads, found.sequence, found.total),
                "{batchSize, headCount, sequenceLength, pastSequenceLength + keyValueSequenceLength}")
    _expect(shapes, "PastSequenceLengthsTensor", (found.batch,), "{batchSize}: one past length per batch entry",
            leading_ones=False)
    mask_type = parameters["MaskType"]
    if mask_type == "NONE":
        if "MaskTensor" in shapes:
            raise RuleViolation("MaskTensor is given but MaskType is NONE; give the MaskType that says how to read "
                                "it")
        return
    if "MaskTensor" not in shapes:
        raise RuleViolation(f"MaskType {mask_type} reads MaskTensor, which is not given")
    if mask_type == "BOOLEAN":
        _broadcasts(shapes, "MaskTensor", (found.batch, found.query_heads, found.sequence, found.total),
                    "MaskType BOOLEAN: {batchSize, headCount, sequenceLength, pastSequenceLength + "
                    "keyValueSequenceLength}")
    elif mask_type == "KEY_SEQUENCE_LENGTH":
        _expect(shapes, "MaskTensor", (1, found.batch), "MaskType KEY_SEQUENCE_LENGTH: {1, batchSize}")
    elif mask_type == "KEY_SEQUENCE_END_START":
        _expect(shapes, "MaskTensor", (2, found.batch), "MaskType KEY_SEQUENCE_END_START: {2, batchSize}")
    else:
        _expect(shapes, "MaskTensor", (found.batch * 3 + 2,),
                "MaskType KEY_QUERY_SEQUENCE_LENGTH_START_END: {batchSize * 3 + 2}")
