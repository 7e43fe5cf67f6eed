"""`--format json` of validate, ops, describe and info (issue 12): one JSON object on stdout, keys as
the README's "JSON reports" documents them."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dmlcli import operators
from dmlcli.cli import cli
from dmlcli.feature_levels import ALL_FEATURE_LEVELS

from conftest import REPO

VALIDATE_KEYS = {"verdict", "operator", "feature_level", "lowest_feature_level", "message", "exit_code", "tensors",
                 "check", "work",  # check: issue 31; work: issue 34 (keys are added, never renamed or removed)
                 "onnx"}  # issue 31: the ONNX name's resolution
OPS_KEYS = {"name", "dml_name", "family", "summary", "inputs", "parameters", "output_type_same_as", "output_types",
            "default_output_type", "introduced",
            "onnx_names"}  # issue 31: the ONNX names that resolve to the operator
DESCRIBE_KEYS = OPS_KEYS | {"enum_value", "formula", "tensors", "output", "exactness", "tolerance", "same_data_type",
                            "same_sizes", "in_place", "notes", "support",
                            # added with the shaped operators (keys are added, never renamed or removed)
                            "outputs", "variadic", "support_by", "support_groups", "tf32_products",
                            # added with the attention family
                            "optional_inputs", "optional_since", "optional_outputs",
                            # added with issue 31: what --broadcast does to the inputs; an ONNX name's resolution
                            "broadcast", "onnx"}


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def test_validate_ok():
    result = invoke("validate", "bit_shift_left", "[[[[1]]]]", "[[[[2]]]]", "--dtype", "uint8", "-f", "2_1",
                    "--format", "json")
    assert result.exit_code == 0 and result.stderr == ""
    report = json.loads(result.stdout)
    assert set(report) == VALIDATE_KEYS
    assert report["verdict"] == "ok" and report["exit_code"] == 0
    assert report["operator"] == "DML_OPERATOR_ELEMENT_WISE_BIT_SHIFT_LEFT"
    assert report["feature_level"] == "DML_FEATURE_LEVEL_2_1"
    assert report["lowest_feature_level"] == "DML_FEATURE_LEVEL_2_1"
    assert report["tensors"]["OutputTensor"] == {"data_type": "UINT8", "shape": [1, 1, 1, 1]}
    assert report["message"].startswith("valid: BIT_SHIFT_LEFT accepts")


def test_validate_rejected_prints_the_report_and_exits_3():
    result = invoke("validate", "bit_xor", "[1.5]", "[2.5]", "--dtype", "float32", "-f", "3_0", "--format", "json")
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert set(report) == VALIDATE_KEYS
    assert report["verdict"] == "rejected" and report["exit_code"] == 3 and report["tensors"] is None
    assert report["feature_level"] == "DML_FEATURE_LEVEL_3_0"
    assert report["lowest_feature_level"] == "DML_FEATURE_LEVEL_4_1"
    assert "ATensor data type FLOAT32 is not supported" in report["message"]
    assert result.stderr == f"dmlcli: error: {report['message']}\n"  # the usual line for people, too


def test_validate_rejected_at_every_level_has_no_lowest_level():
    result = invoke("validate", "bit_xor", '{"dtype": "uint8", "data": [1]}', '{"dtype": "uint16", "data": [1]}',
                    "--format", "json")
    assert result.exit_code == 3 and json.loads(result.stdout)["lowest_feature_level"] is None


def test_usage_errors_stay_on_stderr():
    result = invoke("validate", "no_such_op", "[1]", "--format", "json")
    assert result.exit_code == 2 and result.stdout == "" and result.stderr.count("\n") == 1


def test_ops_lists_every_operator_with_its_facts():
    result = invoke("ops", "--format", "json")
    assert result.exit_code == 0
    records = json.loads(result.stdout)["operators"]
    assert sorted(r["name"] for r in records) == sorted(op.cli_name for op in operators.OPERATORS)
    by_name = {r["name"]: r for r in records}
    for op in operators.OPERATORS:
        record = by_name[op.cli_name]
        assert set(record) == OPS_KEYS
        assert record["introduced"] == op.introduced.name and record["inputs"] == list(op.inputs)
        assert record["family"] == op.family
    equals = by_name["logical_equals"]
    assert sorted(equals["output_types"]) == ["UINT32", "UINT8"] and equals["default_output_type"] == "UINT8"
    assert equals["output_type_same_as"] is None
    assert by_name["bit_xor"]["output_type_same_as"] == "ATensor"
    [mode] = by_name["is_infinity"]["parameters"]
    assert mode["field"] == "InfinityMode" and mode["options"] == ["--infinity-mode"]
    assert mode["choices"] == ["either", "positive", "negative"] and mode["default"] == "either"
    assert mode["enum"]["DML_IS_INFINITY_MODE_NEGATIVE"] == 2


def test_ops_filters_apply():
    logical = json.loads(invoke("ops", "--family", "logical", "--format", "json").stdout)["operators"]
    names = [r["name"] for r in logical]
    assert names == ["logical_and", "logical_not", "logical_or", "logical_xor"]
    assert json.loads(invoke("ops", "nothing_is_called_this", "--format", "json").stdout) == {"operators": []}


@pytest.mark.parametrize("name", ["bit_shift_left", "add", "activation_relu", "quantize_linear"])
def test_describe_gives_the_whole_entry(name):
    op = operators.find_operator(name)
    result = invoke("describe", name, "--format", "json")
    assert result.exit_code == 0
    details = json.loads(result.stdout)
    assert set(details) == DESCRIBE_KEYS
    assert details["formula"] == op.formula and details["enum_value"] == op.enum_value
    assert [entry["feature_level"] for entry in details["support"]] == [fl.name for fl in ALL_FEATURE_LEVELS]
    for entry, level in zip(details["support"], ALL_FEATURE_LEVELS):
        row = op.row_at(level)
        assert entry["available"] == (row is not None)
        if row is not None:
            for tensor in op.tensors:
                assert entry["tensors"][tensor] == {"dimension_counts": list(row.tensors[tensor].dims),
                                                    "data_types": [t.name for t in row.tensors[tensor].data_types]}
    assert (details["tolerance"] is None) == (op.tolerance is None)


def test_describe_bit_shift_left_gains_uint64_at_4_1():
    support = json.loads(invoke("describe", "bit_shift_left", "--format", "json").stdout)["support"]
    by_level = {entry["feature_level"]: entry for entry in support}
    assert not by_level["DML_FEATURE_LEVEL_2_0"]["available"]
    assert "UINT64" not in by_level["DML_FEATURE_LEVEL_4_0"]["tensors"]["ATensor"]["data_types"]
    assert "UINT64" in by_level["DML_FEATURE_LEVEL_4_1"]["tensors"]["ATensor"]["data_types"]


def test_info_lists_the_backends():
    result = invoke("info", "--format", "json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert set(report) == {"dmlcli", "backends", "auto"}
    cpu, gpu = report["backends"]
    assert cpu == {"name": "cpu", "available": True, "numpy": np.__version__,
                   "compiled_loops": cpu["compiled_loops"]}
    assert set(cpu["compiled_loops"]) in ({"on", "numba"}, {"on", "numba", "reason"})
    assert gpu["name"] == "gpu" and isinstance(gpu["available"], bool)
    assert ("reason" in gpu) != gpu["available"]
    assert report["auto"] == ("gpu" if gpu["available"] else "cpu")


def test_a_script_reads_the_verdict_from_a_real_subprocess():
    done = subprocess.run([sys.executable, "-m", "dmlcli", "validate", "bit_xor", "[1.5]", "[2.5]", "--dtype",
                           "float32", "-f", "3_0", "--format", "json"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 3 and json.loads(done.stdout)["verdict"] == "rejected"
