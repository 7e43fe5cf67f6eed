"""Messages that say what to do (issue 31, item 4): a negative axis is worded with the axis DirectML means; an
operand in ONNX's layout names DirectML's Sizes for the same values; a FLOAT64 input (NumPy's default) names the way
to convert it, and --convert (convert= in the API) converts typed inputs, said in the caption."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.errors import InputError, ValidationError

from conftest import REPO


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def typed(array: np.ndarray) -> str:
    return json.dumps({"dtype": str(array.dtype), "shape": list(array.shape), "data": array.reshape(-1).tolist()})


# ---------------------------------------------------------------- negative axes


@pytest.mark.parametrize("given,message", [
    ("-1", "Axes (--axes) = -1: DirectML's axes are unsigned; ONNX's -1 is 2 here (the input has 3 dimensions): "
           "give 2"),
    ("0,-1", "Axes (--axes) = 0,-1: DirectML's axes are unsigned; ONNX's 0,-1 is 0,2 here (the input has 3 "
             "dimensions): give 0,2"),
    ("-4", "Axes (--axes) = -4: DirectML's axes are unsigned (0 to 2 for the input's 3 dimensions)"),
])
def test_a_negative_axis_says_which_axis_it_is(given, message):
    """Was: 'out of range (0 to 4294967295)'."""
    for command in ("run", "validate"):
        result = invoke(command, "reduce", "[[[1, 2], [3, 4]]]", "--dtype", "float32", "--axes", given)
        assert result.exit_code == 2
        assert result.stderr.strip() == f"dmlcli: error: {message}"


def test_a_negative_axis_in_the_api_and_for_an_axis_field():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(InputError, match=r"^Axis \(--axis\) = -1: DirectML's axes are unsigned; ONNX's -1 is 1 here "
                                         r"\(the input has 2 dimensions\): give 1$"):
        dmlcli.run("cumulative_summation", x, axis=-1)
    with pytest.raises(InputError, match="ONNX's -2 is 0 here"):
        dmlcli.run("join", x, x, axis=-2)
    assert dmlcli.run("cumulative_summation", x, axis=1).tolist() == [[1, 2, 3], [1, 2, 3]]  # what the hint says


# ---------------------------------------------------------------- ONNX's layouts


def test_a_convolution_bias_in_onnx_s_shape():
    x = np.arange(75, dtype=np.float32).reshape(1, 3, 5, 5)
    w = np.linspace(-1, 1, 8 * 3 * 9, dtype=np.float32).reshape(8, 3, 3, 3)
    bias = np.arange(8, dtype=np.float32)
    result = invoke("run", "convolution", typed(x), typed(w), typed(bias))
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "dmlcli: error: CONVOLUTION: BiasTensor Sizes [8] must be [1, 8, 1, 1] ({1, OutputChannelCount, 1, ...}, the "
        "InputTensor's DimensionCount); ONNX's [8] is that reshaped: give the same values with Sizes [1, 8, 1, 1]")
    reshaped = dmlcli.run("convolution", x, w, bias.reshape(1, 8, 1, 1))  # as the message says
    assert np.array_equal(reshaped, dmlcli.run("convolution", x, w) + bias.reshape(1, 8, 1, 1))


def test_a_batch_normalization_mean_in_onnx_s_shape():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    per_channel = np.array([1, 2, 3], np.float32)
    with pytest.raises(ValidationError) as raised:
        dmlcli.validate("batch_normalization", x, per_channel, per_channel, per_channel, per_channel)
    assert str(raised.value) == (
        "BATCH_NORMALIZATION: MeanTensor Sizes [3] must be [1, 3, 1, 1] (InputTensor's DimensionCount, each size 1 or "
        "the input's); ONNX's [3] is that reshaped: give the same values with Sizes [1, 3, 1, 1]")
    channel = per_channel.reshape(1, 3, 1, 1)
    dmlcli.validate("batch_normalization", x, channel, channel, channel, channel)


# ---------------------------------------------------------------- FLOAT64 and --convert


@pytest.fixture()
def float64_npy(tmp_path):
    path = tmp_path / "x.npy"
    # 1 + 2^-24 is halfway between two FLOAT32s (ties to even: 1), 1 + 3 * 2^-24 rounds up, 1e39 is past FLOAT32.
    np.save(path, np.array([1 + 2**-24, 1 + 3 * 2**-24, -2.5, 1e39]))
    return path


def test_float64_says_how_to_convert(float64_npy):
    """Was: 'FLOAT64 is not supported', and with --dtype float32 'holds FLOAT64 but --dtype says FLOAT32'."""
    plain = invoke("run", "abs", float64_npy)
    assert plain.exit_code == 3
    assert plain.stderr.strip().endswith(
        "no feature level accepts this call; --convert float32 converts InputTensor, rounded to nearest "
        "(convert=\"float32\" in the API)")
    declared = invoke("run", "abs", float64_npy, "--dtype", "float32")
    assert declared.exit_code == 2
    assert declared.stderr.strip() == (
        f"dmlcli: error: input 1 '{float64_npy}': holds FLOAT64 but --dtype says FLOAT32; --dtype types bare lists, "
        "and --convert float32 converts it, rounded to nearest (convert=\"float32\" in the API)")
    inline = invoke("run", "abs", '{"dtype": "float64", "data": [1]}', "--dtype", "float32")
    assert inline.exit_code == 2 and "--convert float32 converts it" in inline.stderr


def test_convert_rounds_to_nearest_and_says_so(float64_npy, tmp_path):
    result = invoke("run", "abs", float64_npy, "--convert", "float32")
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith(
        "ABS · DML_FEATURE_LEVEL_6_4 · cpu · FLOAT32 · shape [4] · input 1 FLOAT64 → FLOAT32 (rounded to nearest)")
    written = invoke("run", "abs", float64_npy, "--convert", "float32", "-o", tmp_path / "out.npy")
    assert written.exit_code == 0
    got = np.load(tmp_path / "out.npy")
    assert got.dtype == np.float32
    assert got.tolist() == [1.0, 1 + 2**-22, 2.5, float("inf")]
    half = invoke("run", "add", float64_npy, "[1, 1, 1, 1]", "--dtype", "float16", "--convert", "float16", "-o", "-")
    assert half.exit_code == 0 and json.loads(half.stdout)["dtype"] == "float16"


def test_convert_beside_inputs_of_the_other_kind_and_integers(tmp_path):
    data, indices = tmp_path / "data.npy", tmp_path / "indices.npy"
    np.save(data, np.array([[1.5, 2.5], [3.5, 4.5]]))
    np.save(indices, np.array([[1, 0]]))  # INT64, NumPy's default: GATHER takes it as it is
    result = invoke("run", "gather", data, indices, "--convert", "float32", "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "float32", "shape": [2, 2], "data": [[3.5, 4.5], [1.5, 2.5]]}
    both = invoke("run", "gather", data, indices, "--convert", "float16", "--convert", "int32")
    assert both.exit_code == 0 and "input 2 INT64 → INT32 (exact)" in both.stdout
    np.save(indices, np.array([[2**33, 0]]))
    inexact = invoke("run", "gather", data, indices, "--convert", "float32", "--convert", "int32")
    assert inexact.exit_code == 2
    assert inexact.stderr.strip() == ("dmlcli: error: input 2: 8589934592 does not fit INT32 (-2147483648 to "
                                      "2147483647), so --convert int32 cannot convert it exactly")


def test_convert_is_checked_before_any_work(float64_npy):
    twice = invoke("run", "abs", float64_npy, "--convert", "float32", "--convert", "float16")
    assert twice.exit_code == 2 and "give at most one float type and one integer type" in twice.stderr
    four_bit = invoke("run", "abs", float64_npy, "--convert", "int4")
    assert four_bit.exit_code == 2 and "4-bit types are not a conversion target" in four_bit.stderr
    disagree = invoke("run", "abs", float64_npy, "--convert", "float16", "--dtype", "float32")
    assert disagree.exit_code == 2
    assert "holds FLOAT64 (after --convert: FLOAT16) but --dtype says FLOAT32" in disagree.stderr
    validated = invoke("validate", "abs", float64_npy, "--convert", "float16")
    assert validated.exit_code == 0 and "InputTensor FLOAT16 [4]" in validated.stdout


def test_convert_in_the_api():
    values = np.array([1 + 2**-24, -3.0])
    assert dmlcli.run("abs", values, convert="float32").tolist() == [1.0, 3.0]
    verdict = dmlcli.validate("gather", values.reshape(2, 1), np.array([[1]]), convert=("float16", "int32"))
    assert [t.data_type.name for t in verdict.call.inputs] == ["FLOAT16", "INT32"]
    assert dmlcli.check("abs", values, expected=np.array([1.0, 3.0], np.float32), convert="float32").passed
    with pytest.raises(ValidationError, match=r"--convert float32 converts InputTensor"):
        dmlcli.run("abs", values)


def test_a_real_subprocess_names_the_conversion(float64_npy):
    done = subprocess.run([sys.executable, "-m", "dmlcli", "run", "abs", str(float64_npy)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "--convert float32 converts InputTensor" in done.stderr
    converted = subprocess.run([sys.executable, "-m", "dmlcli", "run", "abs", str(float64_npy), "--convert",
                                "float32"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert converted.returncode == 0 and "input 1 FLOAT64 → FLOAT32 (rounded to nearest)" in converted.stdout
