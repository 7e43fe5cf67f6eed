"""Accept/reject for every operator x feature level x data type x rank, with message text.

The expected support tables below are a second, independent transcription of DirectML's pages
(../shared/reference/directml_ops.md §1b), written in a different shape from dmlcli's table so
that a slip in either shows up as a failure.
"""

import re

import numpy as np
import pytest

import dmlcli
from dmlcli.api import plan
from dmlcli.data_types import parse_data_type

LEVELS = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"]
ALL11 = "FLOAT64 FLOAT32 FLOAT16 INT64 INT32 INT16 INT8 UINT64 UINT32 UINT16 UINT8"
CMP10 = "FLOAT32 FLOAT16 INT64 INT32 INT16 INT8 UINT64 UINT32 UINT16 UINT8"
CMP8 = "FLOAT32 FLOAT16 INT32 INT16 INT8 UINT32 UINT16 UINT8"
U3 = "UINT32 UINT16 UINT8"
ANY = "1-8"

# operator: [(from level, dims, input types, output types)], newest first; output type
# "same" means the output takes the inputs' type.
TABLES = {
    "BIT_AND": [("4_1", ANY, ALL11, "same"), ("3_0", ANY, U3, "same")],
    "BIT_OR": [("4_1", ANY, ALL11, "same"), ("3_0", ANY, U3, "same")],
    "BIT_XOR": [("4_1", ANY, ALL11, "same"), ("3_0", ANY, U3, "same")],
    "BIT_NOT": [("4_1", ANY, ALL11, "same"), ("3_0", ANY, U3, "same")],
    "BIT_COUNT": [("4_1", ANY, ALL11, "UINT32 UINT8"), ("3_0", ANY, U3, "UINT32 UINT8")],
    "BIT_SHIFT_LEFT": [("4_1", ANY, "UINT64 " + U3, "same"), ("3_0", ANY, U3, "same"), ("2_1", "4", U3, "same")],
    "BIT_SHIFT_RIGHT": [("4_1", ANY, "UINT64 " + U3, "same"), ("3_0", ANY, U3, "same"), ("2_1", "4", U3, "same")],
    "LOGICAL_AND": [("3_0", ANY, "UINT32 UINT8", "same"), ("2_0", "4", "UINT32 UINT8", "same"), ("1_0", "4", "UINT32", "same")],
    "LOGICAL_OR": [("3_0", ANY, "UINT32 UINT8", "same"), ("2_0", "4", "UINT32 UINT8", "same"), ("1_0", "4", "UINT32", "same")],
    "LOGICAL_XOR": [("3_0", ANY, "UINT32 UINT8", "same"), ("2_0", "4", "UINT32 UINT8", "same"), ("1_0", "4", "UINT32", "same")],
    "LOGICAL_NOT": [("3_0", ANY, "UINT32 UINT8", "same"), ("2_0", "4", "UINT32 UINT8", "same"), ("1_0", "4", "UINT32", "same")],
    "IS_INFINITY": [("3_0", ANY, "FLOAT32 FLOAT16", "UINT8"), ("2_1", "4", "FLOAT32 FLOAT16", "UINT8")],
    "IS_NAN": [("3_0", ANY, "FLOAT32 FLOAT16", "UINT32 UINT8"), ("2_0", "4", "FLOAT32 FLOAT16", "UINT32 UINT8")],
}
_COMPARISON = [("4_1", ANY, CMP10, "UINT32 UINT8"), ("3_0", ANY, CMP8, "UINT32 UINT8"), ("2_1", "4", CMP8, "UINT32 UINT8"),
               ("2_0", "4", "FLOAT32 FLOAT16", "UINT32 UINT8"), ("1_0", "4", "FLOAT32 FLOAT16", "UINT32")]
for _name in ("LOGICAL_EQUALS", "LOGICAL_GREATER_THAN", "LOGICAL_LESS_THAN"):
    TABLES[_name] = _COMPARISON
for _name in ("LOGICAL_GREATER_THAN_OR_EQUAL", "LOGICAL_LESS_THAN_OR_EQUAL"):
    TABLES[_name] = [("4_1", ANY, CMP10, "UINT32 UINT8"), ("3_0", ANY, CMP8, "UINT32 UINT8")]

UNARY = {"BIT_NOT", "BIT_COUNT", "LOGICAL_NOT", "IS_INFINITY", "IS_NAN"}
INTRODUCED = {"BIT_AND": "3_0", "BIT_OR": "3_0", "BIT_XOR": "3_0", "BIT_NOT": "3_0", "BIT_COUNT": "3_0",
              "BIT_SHIFT_LEFT": "2_1", "BIT_SHIFT_RIGHT": "2_1", "LOGICAL_AND": "1_0", "LOGICAL_OR": "1_0",
              "LOGICAL_XOR": "1_0", "LOGICAL_NOT": "1_0", "IS_INFINITY": "2_1", "IS_NAN": "2_0",
              "LOGICAL_EQUALS": "1_0", "LOGICAL_GREATER_THAN": "1_0", "LOGICAL_LESS_THAN": "1_0",
              "LOGICAL_GREATER_THAN_OR_EQUAL": "3_0", "LOGICAL_LESS_THAN_OR_EQUAL": "3_0"}
TYPES = ALL11.split()
RANKS = range(0, 10)


def expected_row(op, level):
    rows = [r for r in TABLES[op] if LEVELS.index(r[0]) <= LEVELS.index(level)]
    return rows[0] if rows else None


def dims_allowed(dims, rank):
    return 1 <= rank <= 8 if dims == ANY else rank == int(dims)


def expected_problem(op, level, dtype, rank, out_type):
    """None if accepted, else a regex the error message must match (before the suffix)."""
    input_names = ["InputTensor"] if op in UNARY else ["ATensor", "BTensor"]
    if rank == 0:
        return rf"{input_names[0]} is 0-D"
    row = expected_row(op, level)
    if row is None:
        return rf"the operator is not available at DML_FEATURE_LEVEL_{level} \(introduced in DML_FEATURE_LEVEL_{INTRODUCED[op]}\)"
    _, dims, inputs, outputs = row
    allowed_dims = "1 to 8" if dims == ANY else dims
    for name in input_names:
        if dtype not in inputs.split():
            return (rf"{name} data type {dtype} is not supported at DML_FEATURE_LEVEL_{level} "
                    rf"\(allowed: {', '.join(inputs.split())}\)")
        if not dims_allowed(dims, rank):
            return rf"{name} dimension count {rank} is not supported at DML_FEATURE_LEVEL_{level} \(allowed: {allowed_dims}\)"
    out_allowed = inputs if outputs == "same" else outputs
    if out_type not in out_allowed.split():
        return (rf"OutputTensor data type {out_type} is not supported at DML_FEATURE_LEVEL_{level} "
                rf"\(allowed: {', '.join(out_allowed.split())}\)")
    if outputs == "same" and out_type != dtype:
        return rf"{input_names[0]} data type {dtype} and OutputTensor data type {out_type} differ"
    return None


def lowest_level(op, dtype, rank, out_type):
    for level in LEVELS:
        if expected_problem(op, level, dtype, rank, out_type) is None:
            return level
    return None


def check_one(op, level, dtype, rank, out_type, output_dtype_arg):
    n_inputs = 1 if op in UNARY else 2
    shape = (2,) * rank
    data_type = parse_data_type(dtype)
    problem = expected_problem(op, level, dtype, rank, out_type)
    try:
        verdict = plan(op, [(data_type, shape)] * n_inputs, feature_level=level, output_dtype=output_dtype_arg)
    except dmlcli.ValidationError as error:
        message = str(error)
        if problem is None:
            return f"{op} {level} {dtype} rank {rank} out {out_type}: rejected unexpectedly: {message}"
        if not re.match(rf"^{op}: {problem}", message):
            return f"{op} {level} {dtype} rank {rank} out {out_type}: message {message!r} does not match {problem!r}"
        lowest = lowest_level(op, dtype, rank, out_type)
        suffix = f"; supported from DML_FEATURE_LEVEL_{lowest}" if lowest else None
        if suffix and not message.endswith(suffix):
            return f"{op} {level} {dtype} rank {rank}: message {message!r} lacks {suffix!r}"
        if not suffix and "supported from" in message:
            return f"{op} {level} {dtype} rank {rank}: message {message!r} names a level, none accepts"
        return None
    if problem is not None:
        return f"{op} {level} {dtype} rank {rank} out {out_type}: accepted, expected {problem!r}"
    if verdict.lowest_feature_level.short != lowest_level(op, dtype, rank, out_type):
        return f"{op} {level} {dtype} rank {rank}: lowest level {verdict.lowest_feature_level} is wrong"
    return None


@pytest.mark.parametrize("op", sorted(TABLES))
def test_every_level_type_and_rank(op):
    """Default output type: the inputs' own (tied operators), or for operators with a choice UINT8 where the
    level allows it, else the type the level allows (UINT32 for the comparisons at 1_0)."""
    failures = []
    for level in LEVELS:
        row = expected_row(op, level)
        choice = row[3].split() if row is not None and row[3] != "same" else ["UINT8"]
        for dtype in TYPES:
            for rank in RANKS:
                out_type = dtype if TABLES[op][0][3] == "same" else ("UINT8" if "UINT8" in choice else choice[0])
                failure = check_one(op, level, dtype, rank, out_type, None)
                if failure:
                    failures.append(failure)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("op", sorted(TABLES))
def test_every_output_data_type(op):
    failures = []
    for level in ("1_0", "2_0", "2_1", "3_0", "4_1", "6_4"):  # every level where a row starts, and the newest
        for dtype in TYPES:
            for out_type in TYPES:
                for rank in (1, 4):
                    failure = check_one(op, level, dtype, rank, out_type, out_type.lower())
                    if failure:
                        failures.append(failure)
    assert not failures, "\n".join(failures[:20])


def test_the_issue_example_message():
    a = np.zeros(2, np.float32)
    with pytest.raises(dmlcli.ValidationError) as error:
        dmlcli.validate("bit_xor", a, a, feature_level="3_0")
    assert str(error.value) == ("BIT_XOR: ATensor data type FLOAT32 is not supported at DML_FEATURE_LEVEL_3_0 "
                                "(allowed: UINT32, UINT16, UINT8); supported from DML_FEATURE_LEVEL_4_1")


def test_mixed_input_types_are_rejected():
    with pytest.raises(dmlcli.ValidationError, match=r"ATensor data type UINT8 and BTensor data type UINT16 differ"):
        dmlcli.validate("bit_and", np.zeros(2, np.uint8), np.zeros(2, np.uint16))
    with pytest.raises(dmlcli.ValidationError, match=r"ATensor data type FLOAT32 and BTensor data type FLOAT16 differ"):
        dmlcli.validate("logical_equals", np.zeros(2, np.float32), np.zeros(2, np.float16))


def test_different_shapes_need_broadcast():
    a, b = np.zeros((2, 3), np.uint8), np.zeros(3, np.uint8)
    with pytest.raises(dmlcli.ValidationError, match=r"ATensor Sizes \[2, 3\] and BTensor Sizes \[3\] differ.*--broadcast"):
        dmlcli.validate("bit_xor", a, b)
    verdict = dmlcli.validate("bit_xor", a, b, broadcast=True)
    assert verdict.call.output.shape == (2, 3)
    with pytest.raises(dmlcli.ValidationError, match="cannot be broadcast together"):
        dmlcli.validate("bit_xor", np.zeros(2, np.uint8), b, broadcast=True)


def test_broadcast_is_validated_at_the_broadcast_shape():
    # Each input is 2-D, but they broadcast to 4-D, which 2_1 requires for shifts.
    a, b = np.zeros((1, 1, 2, 2), np.uint8), np.zeros((2, 2), np.uint8)
    assert dmlcli.validate("bit_shift_left", a, b, broadcast=True, feature_level="2_1")
    with pytest.raises(dmlcli.ValidationError, match="dimension count 2"):
        dmlcli.validate("bit_shift_left", b, b, broadcast=True, feature_level="2_1")


def test_zero_size_and_element_limit():
    with pytest.raises(dmlcli.ValidationError, match=r"ATensor Sizes \[2, 0\] contain a zero"):
        dmlcli.validate("bit_xor", np.zeros((2, 0), np.uint8), np.zeros((2, 0), np.uint8))
    big = parse_data_type("uint8"), (65536, 65536)
    with pytest.raises(dmlcli.ValidationError, match=r"InputTensor has 4294967296 elements; a DirectML tensor holds at most 4294967295"):
        plan("bit_not", [big])
    assert plan("bit_not", [(parse_data_type("uint8"), (65535, 65537))])


def test_feature_level_spellings():
    from dmlcli.feature_levels import parse_feature_level

    for spelling in ("4.1", "4_1", "DML_FEATURE_LEVEL_4_1", "dml_feature_level_4_1", "0x4100", " 4.1 "):
        assert parse_feature_level(spelling).short == "4_1"
    assert parse_feature_level(None).short == "6_4"
    assert len(dmlcli.ALL_FEATURE_LEVELS) == 15
    for bad in ("4.2", "7_0", "0x4200", "latest", ""):
        with pytest.raises(dmlcli.InputError, match="unknown feature level"):
            parse_feature_level(bad)


def test_operator_spellings():
    for spelling in ("bit_xor", "BIT_XOR", "bit-xor", "ELEMENT_WISE_BIT_XOR", "DML_OPERATOR_ELEMENT_WISE_BIT_XOR", "Bit_Xor"):
        assert dmlcli.find_operator(spelling).name == "BIT_XOR"
    with pytest.raises(dmlcli.InputError, match=r"unknown operator 'bit_xro' \(did you mean bit_xor"):
        dmlcli.find_operator("bit_xro")
    # DirectML's 65 ELEMENT_WISE operators and its 21 element-wise ACTIVATION operators.
    assert len(dmlcli.operators.ELEMENTWISE_OPERATORS) == 86
    assert sum(op.prefix == "ACTIVATION" for op in dmlcli.operators.ELEMENTWISE_OPERATORS) == 21
    for spelling in ("relu", "activation_relu", "ACTIVATION_RELU", "DML_OPERATOR_ACTIVATION_RELU"):
        assert dmlcli.find_operator(spelling).dml_name == "DML_OPERATOR_ACTIVATION_RELU"
    # IDENTITY and TANH are in both families: the bare name is the ELEMENT_WISE one.
    assert dmlcli.find_operator("tanh").dml_name == "DML_OPERATOR_ELEMENT_WISE_TANH"
    assert dmlcli.find_operator("activation_tanh").dml_name == "DML_OPERATOR_ACTIVATION_TANH"
    assert dmlcli.find_operator("identity").dml_name == "DML_OPERATOR_ELEMENT_WISE_IDENTITY"


def test_operators_outside_the_family_are_named_as_such():
    # The axis-wise activations are shaped operators of the reduction family, found by every spelling.
    assert dmlcli.find_operator("softmax").dml_name == "DML_OPERATOR_ACTIVATION_SOFTMAX"
    assert dmlcli.find_operator("DML_OPERATOR_ACTIVATION_LOG_SOFTMAX1").family == "reduction"
    with pytest.raises(dmlcli.InputError, match=r"unknown operator 'adam_optimiserr' \(did you mean adam_optimizer\?\)"):
        dmlcli.find_operator("adam_optimiserr")
    with pytest.raises(dmlcli.InputError, match=r"unknown operator 'qqzzxx' \(run 'dmlcli ops' for the list\)"):
        dmlcli.find_operator("qqzzxx")


def test_wrong_number_of_inputs_is_a_usage_error():
    with pytest.raises(dmlcli.InputError, match=r"BIT_XOR takes 2 input tensors \(ATensor, BTensor\); got 1"):
        dmlcli.validate("bit_xor", np.zeros(2, np.uint8))


def test_infinity_mode_only_where_the_operator_has_it():
    with pytest.raises(dmlcli.InputError, match="BIT_XOR has no infinity-mode parameter"):
        dmlcli.validate("bit_xor", np.zeros(2, np.uint8), np.zeros(2, np.uint8), infinity_mode="positive")
    with pytest.raises(dmlcli.InputError, match="unknown InfinityMode 'sideways'"):
        dmlcli.validate("is_infinity", np.zeros(2, np.float32), infinity_mode="sideways")
    for spelling in ("positive", "POSITIVE", "DML_IS_INFINITY_MODE_POSITIVE", "1"):
        verdict = dmlcli.validate("is_infinity", np.zeros(2, np.float32), infinity_mode=spelling)
        assert verdict.call.parameters == {"InfinityMode": "POSITIVE"}


def test_enum_values_match_directml_header():
    """DML_OPERATOR_TYPE values, counted in the order DirectML.h declares them (DML_OPERATOR_INVALID = 0)."""
    expected = {
    "ELEMENT_WISE_IDENTITY": 1, "ELEMENT_WISE_ABS": 2, "ELEMENT_WISE_ACOS": 3, "ELEMENT_WISE_ADD": 4,
        "ELEMENT_WISE_ASIN": 5, "ELEMENT_WISE_ATAN": 6, "ELEMENT_WISE_CEIL": 7, "ELEMENT_WISE_CLIP": 8,
        "ELEMENT_WISE_COS": 9, "ELEMENT_WISE_DIVIDE": 10, "ELEMENT_WISE_EXP": 11, "ELEMENT_WISE_FLOOR": 12,
        "ELEMENT_WISE_LOG": 13, "ELEMENT_WISE_LOGICAL_AND": 14, "ELEMENT_WISE_LOGICAL_EQUALS": 15,
        "ELEMENT_WISE_LOGICAL_GREATER_THAN": 16, "ELEMENT_WISE_LOGICAL_LESS_THAN": 17,
        "ELEMENT_WISE_LOGICAL_NOT": 18, "ELEMENT_WISE_LOGICAL_OR": 19, "ELEMENT_WISE_LOGICAL_XOR": 20,
        "ELEMENT_WISE_MAX": 21, "ELEMENT_WISE_MEAN": 22, "ELEMENT_WISE_MIN": 23, "ELEMENT_WISE_MULTIPLY": 24,
        "ELEMENT_WISE_POW": 25, "ELEMENT_WISE_CONSTANT_POW": 26, "ELEMENT_WISE_RECIP": 27, "ELEMENT_WISE_SIN": 28,
        "ELEMENT_WISE_SQRT": 29, "ELEMENT_WISE_SUBTRACT": 30, "ELEMENT_WISE_TAN": 31, "ELEMENT_WISE_THRESHOLD": 32,
        "ELEMENT_WISE_QUANTIZE_LINEAR": 33, "ELEMENT_WISE_DEQUANTIZE_LINEAR": 34, "ACTIVATION_ELU": 35,
        "ACTIVATION_HARDMAX": 36, "ACTIVATION_HARD_SIGMOID": 37, "ACTIVATION_IDENTITY": 38,
        "ACTIVATION_LEAKY_RELU": 39, "ACTIVATION_LINEAR": 40, "ACTIVATION_LOG_SOFTMAX": 41,
        "ACTIVATION_PARAMETERIZED_RELU": 42, "ACTIVATION_PARAMETRIC_SOFTPLUS": 43, "ACTIVATION_RELU": 44,
        "ACTIVATION_SCALED_ELU": 45, "ACTIVATION_SCALED_TANH": 46, "ACTIVATION_SIGMOID": 47,
        "ACTIVATION_SOFTMAX": 48, "ACTIVATION_SOFTPLUS": 49, "ACTIVATION_SOFTSIGN": 50, "ACTIVATION_TANH": 51,
        "ACTIVATION_THRESHOLDED_RELU": 52, "ELEMENT_WISE_SIGN": 79, "ELEMENT_WISE_IS_NAN": 80,
        "ELEMENT_WISE_ERF": 81, "ELEMENT_WISE_SINH": 82, "ELEMENT_WISE_COSH": 83, "ELEMENT_WISE_TANH": 84,
        "ELEMENT_WISE_ASINH": 85, "ELEMENT_WISE_ACOSH": 86, "ELEMENT_WISE_ATANH": 87, "ELEMENT_WISE_IF": 88,
        "ELEMENT_WISE_ADD1": 89, "ACTIVATION_SHRINK": 90, "ELEMENT_WISE_BIT_SHIFT_LEFT": 97,
        "ELEMENT_WISE_BIT_SHIFT_RIGHT": 98, "ELEMENT_WISE_ROUND": 99, "ELEMENT_WISE_IS_INFINITY": 100,
        "ELEMENT_WISE_MODULUS_TRUNCATE": 101, "ELEMENT_WISE_MODULUS_FLOOR": 102, "ELEMENT_WISE_BIT_AND": 121,
        "ELEMENT_WISE_BIT_OR": 122, "ELEMENT_WISE_BIT_XOR": 123, "ELEMENT_WISE_BIT_NOT": 124,
        "ELEMENT_WISE_BIT_COUNT": 125, "ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL": 126,
        "ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL": 127, "ACTIVATION_CELU": 128, "ACTIVATION_RELU_GRAD": 129,
        "ELEMENT_WISE_ATAN_YX": 141, "ELEMENT_WISE_CLIP_GRAD": 142, "ELEMENT_WISE_DIFFERENCE_SQUARE": 143,
        "ELEMENT_WISE_QUANTIZED_LINEAR_ADD": 147, "ELEMENT_WISE_CLIP1": 153, "ELEMENT_WISE_CLIP_GRAD1": 154,
        "ELEMENT_WISE_NEGATE": 156, "ACTIVATION_GELU": 157, "ACTIVATION_SOFTMAX1": 158,
        "ACTIVATION_LOG_SOFTMAX1": 159, "ACTIVATION_HARDMAX1": 160, "ACTIVATION_SWISH": 167,
        "ACTIVATION_HARD_SWISH": 168,
    }
    axis_wise = {"ACTIVATION_HARDMAX", "ACTIVATION_LOG_SOFTMAX", "ACTIVATION_SOFTMAX", "ACTIVATION_SOFTMAX1",
                 "ACTIVATION_LOG_SOFTMAX1", "ACTIVATION_HARDMAX1"}
    implemented = {op.dml_name.removeprefix("DML_OPERATOR_"): op.enum_value for op in dmlcli.operators.ELEMENTWISE_OPERATORS}
    assert implemented == {name: value for name, value in expected.items() if name not in axis_wise}
    shaped = {op.dml_name.removeprefix("DML_OPERATOR_"): op.enum_value for op in dmlcli.operators.OPERATORS
              if not op.is_elementwise}
    assert {name: shaped[name] for name in axis_wise} == {name: expected[name] for name in axis_wise}


def test_feature_level_numbers_do_not_spill_into_each_other():
    from dmlcli.feature_levels import parse_feature_level

    for bad in ("2.17", "1_16", "3.256"):
        with pytest.raises(dmlcli.InputError, match="unknown feature level"):
            parse_feature_level(bad)
