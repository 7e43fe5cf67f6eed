"""RANDOM_GENERATOR: Philox 4x32-10 bits as DirectML lays them out.

Against Random123's published known-answer vectors, an independent scalar Philox written here with Python
integers (one counter at a time), the page's state layout and counter advance (carries across the 128 bits, two
calls chained = one larger call), validation around its level and rules, the command line, the API and a
DxDispatch model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.operators.generation import random as module
import shaped_cli  # noqa: E402 - tests/ is on the path

MASK = 0xFFFFFFFF

# Random123's examples/kat_vectors, the three "philox4x32 10" lines: counter (4 words), key (2 words), result.
KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def scalar_philox(counter, key):
    """Philox4x32-10 of one counter, from the SC11 paper's description: Python integers, no arrays."""
    c, k = list(counter), list(key)
    for round_index in range(10):
        if round_index:
            k = [(k[0] + 0x9E3779B9) & MASK, (k[1] + 0xBB67AE85) & MASK]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK]
    return tuple(c)


def reference_bits(state, count):
    """The page's layout: element i is word i mod 4 of Philox(counter + floor(i / 4), key), word 0 low."""
    counter = sum(word << (32 * i) for i, word in enumerate(state[:4]))
    out = []
    for block in range(-(-count // 4)):
        value = (counter + block) % (1 << 128)
        out.extend(scalar_philox([(value >> (32 * i)) & MASK for i in range(4)], state[4:6]))
    return np.array(out[:count], np.uint32)


def state_array(*words):
    return np.array(words, np.uint32).reshape(1, 1, 1, 6)


def test_the_entry():
    op = dmlcli.find_operator("random_generator")
    assert op is module.RANDOM_GENERATOR and op.enum_value == 132 and op.family == "generation"
    assert op.introduced.short == "3_0" and op.exactness == "exact"
    assert op.inputs == ("InputStateTensor",) and op.outputs == ("OutputTensor", "OutputStateTensor")
    assert op.optional_outputs == ("OutputStateTensor",)
    assert [p.field for p in op.parameters] == ["Type"] and op.parameters[0].values == (("PHILOX_4X32_10", 0),)


@pytest.mark.parametrize("counter, key, expected", KAT)
def test_known_answer_vectors(counter, key, expected):
    assert scalar_philox(counter, key) == expected  # the test's own Philox is right
    words = tuple(np.array([w], np.uint64) for w in counter)
    assert tuple(int(w[0]) for w in module.philox4x32_10(np, words, key)) == expected


@pytest.mark.parametrize("counter, key, expected", KAT)
def test_the_operator_gives_the_known_answers_as_its_first_four_elements(counter, key, expected):
    bits, _ = dmlcli.run("random_generator", state_array(*counter, *key), output_shape=(1, 1, 1, 4))
    assert tuple(int(v) for v in bits.reshape(-1)) == expected


@pytest.mark.parametrize("count", [1, 3, 4, 5, 17, 64])
def test_elements_follow_the_counter_four_at_a_time(count):
    state = (0xFFFFFFFE, 0xFFFFFFFF, 7, 0, 0x12345678, 0x9ABCDEF0)  # a carry out of words 0 and 1 in a few steps
    bits, next_state = dmlcli.run("random_generator", state_array(*state), output_shape=(1, 1, 1, count))
    assert np.array_equal(bits.reshape(-1), reference_bits(state, count))
    steps = -(-count // 4)
    counter = (sum(w << (32 * i) for i, w in enumerate(state[:4])) + steps) % (1 << 128)
    assert next_state.reshape(-1).tolist() == [(counter >> (32 * i)) & MASK for i in range(4)] + list(state[4:])


def test_the_counter_wraps_at_2_to_the_128():
    state = (MASK, MASK, MASK, MASK, 1, 2)
    bits, next_state = dmlcli.run("random_generator", state_array(*state), output_shape=(1, 1, 2, 5))
    assert np.array_equal(bits.reshape(-1), reference_bits(state, 10))
    assert next_state.reshape(-1).tolist() == [2, 0, 0, 0, 1, 2]  # 2^128 - 1 + 3 blocks


def test_two_calls_chained_through_the_state_are_one_larger_call():
    state = state_array(5, 0, 0, 0, 0xDEADBEEF, 0xCAFEF00D)
    first, middle = dmlcli.run("random_generator", state, output_shape=(1, 1, 3, 4))
    second, last = dmlcli.run("random_generator", middle, output_shape=(1, 1, 2, 4))
    whole, whole_next = dmlcli.run("random_generator", state, output_shape=(1, 1, 5, 4))
    assert np.array_equal(np.concatenate([first.reshape(-1), second.reshape(-1)]), whole.reshape(-1))
    assert np.array_equal(last, whole_next)
    assert middle.reshape(-1).tolist() == [8, 0, 0, 0, 0xDEADBEEF, 0xCAFEF00D]


def test_a_partial_block_advances_the_counter_by_a_whole_step():
    # 5 elements: ceil(5 / 4) = 2 steps; the next call starts at the third block, skipping words 5 to 7.
    state = state_array(0, 0, 0, 0, 3, 4)
    _, after_five = dmlcli.run("random_generator", state, output_shape=(1, 1, 1, 5))
    nxt, _ = dmlcli.run("random_generator", after_five, output_shape=(1, 1, 1, 4))
    whole, _ = dmlcli.run("random_generator", state, output_shape=(1, 1, 1, 12))
    assert np.array_equal(nxt.reshape(-1), whole.reshape(-1)[8:12])


def test_the_pages_example_counter_advance():
    # {3, 3, 20, 7219} elements advance by 324,855; the page prints ...746f776e, the sum is ...7479615c.
    start = (0x74746C65, 0x6D536561, 0x6F46726F, 0x48656C6C)
    assert module.advanced(start, -(-3 * 3 * 20 * 7219 // 4)) == (0x7479615C, 0x6D536561, 0x6F46726F, 0x48656C6C)


def test_the_output_may_have_any_4d_sizes_and_elements_are_row_major():
    state = (1, 2, 3, 4, 5, 6)
    bits, _ = dmlcli.run("random_generator", state_array(*state), output_shape=(2, 3, 1, 5))
    assert bits.shape == (2, 3, 1, 5) and bits.dtype == np.uint32
    assert np.array_equal(bits.reshape(-1), reference_bits(state, 30))


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("level, accepted", [("2_1", False), ("3_0", True), ("6_4", True)])
def test_introduced_at_3_0(level, accepted):
    call = lambda: dmlcli.validate("random_generator", state_array(0, 0, 0, 0, 0, 0),  # noqa: E731
                                   output_shape=(1, 1, 1, 4), feature_level=level)
    if accepted:
        assert call().lowest_feature_level.short == "3_0"
    else:
        with pytest.raises(dmlcli.ValidationError, match="introduced in DML_FEATURE_LEVEL_3_0"):
            call()


@pytest.mark.parametrize("state, shape, message", [
    (np.zeros((1, 1, 1, 5), np.uint32), (1, 1, 1, 4),
     "InputStateTensor Sizes [1, 1, 1, 5] are not Philox 4x32-10's state [1, 1, 1, 6]"),
    (np.zeros(6, np.uint32), (1, 1, 1, 4), "InputStateTensor Sizes [6] are not Philox 4x32-10's state"),
    (np.zeros((1, 1, 1, 6), np.int32), (1, 1, 1, 4), "InputStateTensor data type INT32 is not supported"),
    (np.zeros((1, 1, 1, 6), np.uint32), (4,), "OutputTensor dimension count 1 is not supported"),
    (np.zeros((1, 1, 1, 6), np.uint32), None, "OutputTensor Sizes are not given; RANDOM_GENERATOR fills an output "
                                              "of any Sizes, so give them with --output-shape"),
])
def test_refusals(state, shape, message):
    with pytest.raises(dmlcli.ValidationError, match=None) as raised:
        dmlcli.validate("random_generator", state, **({} if shape is None else {"output_shape": shape}))
    assert message in str(raised.value)


def test_only_uint32_output():
    with pytest.raises(dmlcli.ValidationError, match="OutputTensor data type FLOAT32 is not supported"):
        dmlcli.validate("random_generator", state_array(0, 0, 0, 0, 0, 0), output_shape=(1, 1, 1, 4),
                        output_dtype="float32")


def test_an_unknown_generator_type_is_a_usage_error():
    shaped_cli.refused_in_one_line(["run", "random_generator", '{"dtype": "uint32", "shape": [1, 1, 1, 6], "data": '
                                    '[[[[0, 0, 0, 0, 0, 0]]]]}', "--output-shape", "1,1,1,4", "--type", "mt19937",
                                    "-o", "-"], 2, "unknown Type 'mt19937' (expected one of philox_4x32_10)")


# ---------------------------------------------------------------- command line and DxDispatch

def test_command_line_run_writes_both_outputs():
    result = CliRunner().invoke(cli, ["run", "random_generator", '{"dtype": "uint32", "shape": [1, 1, 1, 6], '
                                      '"data": [[[[0, 0, 0, 0, 0, 0]]]]}', "--output-shape", "1,1,1,4", "--type",
                                      "philox_4x32_10", "-o", "-"])
    assert result.exit_code == 0, result.output
    written = json.loads(result.stdout)
    assert written["OutputTensor"]["data"] == [[[[0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]]]]
    assert written["OutputStateTensor"]["data"] == [[[[1, 0, 0, 0, 0, 0]]]]


MODEL = {
    "resources": {
        "state": {"initialValuesDataType": "UINT32", "initialValues": [0, 0, 0, 0, 0, 0]},
        "bits": {"initialValuesDataType": "UINT32", "initialValues": {"valueCount": 6, "value": 0}},
        "next": {"initialValuesDataType": "UINT32", "initialValues": {"valueCount": 6, "value": 0}},
        "more": {"initialValuesDataType": "UINT32", "initialValues": {"valueCount": 4, "value": 0}},
    },
    "dispatchables": {
        "first": {"type": "DML_OPERATOR_RANDOM_GENERATOR", "desc": {
            "InputStateTensor": {"DataType": "UINT32", "Sizes": [1, 1, 1, 6]},
            "OutputTensor": {"DataType": "UINT32", "Sizes": [1, 1, 2, 3]},
            "OutputStateTensor": {"DataType": "UINT32", "Sizes": [1, 1, 1, 6]},
            "Type": "DML_RANDOM_GENERATOR_TYPE_PHILOX_4X32_10"}},
        "second": {"type": "DML_OPERATOR_RANDOM_GENERATOR", "desc": {
            "InputStateTensor": {"DataType": "UINT32", "Sizes": [1, 1, 1, 6]},
            "OutputTensor": {"DataType": "UINT32", "Sizes": [1, 1, 1, 4]},
            "Type": "DML_RANDOM_GENERATOR_TYPE_PHILOX_4X32_10"}},
    },
    "commands": [
        # The first call's OutputStateTensor is the second's InputStateTensor; the second leaves its state out.
        {"type": "dispatch", "dispatchable": "first",
         "bindings": {"InputStateTensor": "state", "OutputTensor": "bits", "OutputStateTensor": "next"}},
        {"type": "dispatch", "dispatchable": "second",
         "bindings": {"InputStateTensor": "next", "OutputTensor": "more"}},
        {"type": "print", "resource": "bits"},
        {"type": "print", "resource": "next"},
        {"type": "print", "resource": "more"},
    ],
}


def test_a_dxdispatch_model_chains_two_calls_through_the_state(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.json").write_text(json.dumps(MODEL))
    result = CliRunner().invoke(cli, ["dispatch", "model.json", "--no-timing"])
    assert result.exit_code == 0, result.output
    whole = reference_bits((0, 0, 0, 0, 0, 0), 12)
    assert result.output.splitlines() == [
        "Resource 'bits': " + ", ".join(str(v) for v in whole[:6]),
        "Resource 'next': 2, 0, 0, 0, 0, 0",
        "Resource 'more': " + ", ".join(str(v) for v in whole[8:12]),  # the second call starts at block 2
    ]
