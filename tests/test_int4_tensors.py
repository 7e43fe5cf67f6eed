"""INT4 and UINT4 tensors (DirectML 6_3) end to end: ml_dtypes' int4/uint4 in the API, their .npy convention
(descr 'int4'/'uint4' written; numpy.save's '<V1' read only under --dtype int4/uint4), .npz, JSON with its range,
DxDispatch buffers of two elements a byte (low half first), bits and hex of four bits, --check, and the refusals
where a 4-bit tensor cannot go (element-wise operators, Zarr)."""

from __future__ import annotations

import io
import json
import math

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.cli import cli
from dmlcli.data_types import INT4, UINT4, as_bits, from_numpy, integer_limits, parse_data_type
from dmlcli.errors import InputError
from dmlcli.io.json_tensor import parse_json_tensor, to_json_text
from dmlcli.io.npy import read_npy, read_npy_stream_header, save_npy
from dmlcli.io.outputs import archive_bytes
from dmlcli.io.sources import read_tensor
from dmlcli.io.strided import calc_buffer_tensor_size, from_buffer_bytes, store_four_bit, to_buffer_bytes

PROPERTIES = settings(max_examples=60, deadline=None)
FOUR_BIT = {"int4": (INT4, ml_dtypes.int4, -8, 7), "uint4": (UINT4, ml_dtypes.uint4, 0, 15)}


@st.composite
def four_bit_arrays(draw, name=None):
    name = name or draw(st.sampled_from(sorted(FOUR_BIT)))
    _, dtype, lowest, highest = FOUR_BIT[name]
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    values = draw(st.lists(st.integers(lowest, highest), min_size=math.prod(shape), max_size=math.prod(shape)))
    return np.array(values, dtype=dtype).reshape(shape)


def values_of(array) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]


# ---------------------------------------------------------------- the data types


@pytest.mark.parametrize("text, expected", [("int4", INT4), ("UINT4", UINT4), ("DML_TENSOR_DATA_TYPE_INT4", INT4),
                                            ("uint4", UINT4)])
def test_the_4_bit_types_are_named_and_held_as_ml_dtypes(text, expected):
    data_type = parse_data_type(text)
    assert data_type == expected and data_type.bits == 4 and data_type.value in (12, 13)
    assert data_type.numpy_dtype == np.dtype(getattr(ml_dtypes, expected.numpy_name))
    assert data_type.kernel_dtype == np.dtype("int8" if expected == INT4 else "uint8")
    assert from_numpy(data_type.numpy_dtype) == expected
    assert integer_limits(data_type.numpy_dtype) == ((-8, 7) if expected == INT4 else (0, 15))


def test_raw_bytes_say_how_to_read_them():
    with pytest.raises(InputError, match=r"'\|V1'.*numpy.save writes for ml_dtypes' int4.*--dtype int4"):
        from_numpy(np.dtype("V1"))


def test_as_bits_of_a_4_bit_array_is_its_four_bits_whatever_the_high_half():
    raw = np.frombuffer(bytes([0xF7, 0x38, 0x0F]), dtype=ml_dtypes.int4)  # high halves that are no part of a value
    assert values_of(raw) == [7, -8, -1]
    assert as_bits(raw).tolist() == [7, 8, 15]


# ---------------------------------------------------------------- .npy, .npz, JSON


@PROPERTIES
@given(four_bit_arrays())
def test_npy_round_trip_keeps_the_type(tmp_path_factory, array):
    path = tmp_path_factory.mktemp("npy") / "a.npy"
    with open(path, "wb") as handle:
        save_npy(handle, array)
    header = path.read_bytes()[:80]
    assert f"'descr': '{array.dtype.name}'".encode() in header
    back = read_npy(path, where="test")
    assert back.dtype == array.dtype and back.shape == array.shape and values_of(back) == values_of(array)
    assert values_of(np.load(path)) == values_of(array)  # NumPy reads it once ml_dtypes is imported


@PROPERTIES
@given(four_bit_arrays(), four_bit_arrays())
def test_npz_round_trip(tmp_path_factory, first, second):
    path = tmp_path_factory.mktemp("npz") / "outputs.npz"
    path.write_bytes(archive_bytes([first, second], ["A", "B"]))
    for name, array in (("A", first), ("B", second)):
        back = read_tensor(f"{path}:{name}", label="test")
        assert back.dtype == array.dtype and values_of(back) == values_of(array)


@PROPERTIES
@given(four_bit_arrays())
def test_json_round_trip(array):
    text = to_json_text(array)
    assert json.loads(text)["dtype"] == array.dtype.name
    back = parse_json_tensor(text, where="test")
    assert back.dtype == array.dtype and back.shape == array.shape and values_of(back) == values_of(array)


@PROPERTIES
@given(four_bit_arrays())
def test_buffer_packing_round_trip(array):
    data_type = from_numpy(array.dtype)
    packed = to_buffer_bytes(array, data_type)
    assert len(packed) == (array.size + 1) // 2
    back = from_buffer_bytes(packed, data_type, count=array.size)
    assert values_of(back) == values_of(array)
    for index, value in enumerate(values_of(array)):  # element 2k in the low half of byte k
        assert (packed[index // 2] >> (4 * (index % 2))) & 0xF == value & 0xF


@pytest.mark.parametrize("name, value", [("int4", 8), ("int4", -9), ("uint4", 16), ("uint4", -1)])
def test_json_values_out_of_range_name_the_value_and_the_range(name, value):
    lowest, highest = FOUR_BIT[name][2:]
    with pytest.raises(InputError, match=rf"data\[1\] = {value} is out of range for {name} \({lowest} to {highest}\)"):
        parse_json_tensor(json.dumps({"dtype": name, "data": [0, value]}), where="input 1")


def test_numpy_save_of_ml_dtypes_is_read_only_under_a_4_bit_dtype(tmp_path):
    array = np.array([[-8, -1], [0, 7]], dtype=ml_dtypes.int4)
    path = tmp_path / "saved.npy"
    np.save(path, array)  # descr '<V1': the type is lost
    with pytest.raises(InputError, match=r"'\|V1'.*--dtype int4 or --dtype uint4"):
        read_tensor(str(path), label="input 1")
    with pytest.raises(InputError, match=r"--dtype says UINT8"):
        read_tensor(str(path), label="input 1", dtype=parse_data_type("uint8"))
    read = read_tensor(str(path), label="input 1", dtype=INT4)
    assert read.dtype == np.dtype(ml_dtypes.int4) and values_of(read) == [-8, -1, 0, 7]
    assert values_of(read_tensor(str(path), label="input 1", dtype=UINT4)) == [8, 15, 0, 7]  # the same four bits


def test_a_4_bit_dtype_leaves_the_other_inputs_their_own_types(tmp_path):
    """--dtype int4 says what a '<V1' file holds; a float scale that names its type keeps it."""
    path = tmp_path / "saved.npy"
    np.save(path, np.array([-8, 1, 7], dtype=ml_dtypes.int4))
    result = CliRunner().invoke(cli, ["run", "dequantize", str(path), '{"dtype": "float32", "data": [0.5]}',
                                      "--dtype", "int4", "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "float32", "shape": [3], "data": [-4.0, 0.5, 3.5]}
    typed = CliRunner().invoke(cli, ["run", "dequantize", '{"dtype": "int8", "data": [1]}',
                                     '{"dtype": "float32", "data": [0.5]}', "--dtype", "int8"])
    assert typed.exit_code == 2 and "declares dtype FLOAT32 but --dtype says INT8" in typed.output  # as ever


def test_a_4_bit_npy_on_stdin_and_through_a_pipe():
    array = np.array([1, 2, 3], dtype=ml_dtypes.uint4)
    stream = io.BytesIO()
    save_npy(stream, array)
    stream.seek(0)
    shape, _, dtype = read_npy_stream_header(stream, where="stdin")
    assert shape == (3,) and dtype == array.dtype
    result = CliRunner().invoke(cli, ["show", "-"], input=stream.getvalue())
    assert result.exit_code == 0, result.output
    assert "UINT4 · shape [3]" in result.output


# ---------------------------------------------------------------- what a person sees


def test_bits_and_hex_show_four_bits():
    runner = CliRunner()
    literal = '{"dtype": "int4", "data": [-8, -1, 7]}'
    bits = runner.invoke(cli, ["show", literal, "--format", "bits"])
    assert bits.exit_code == 0 and "0b1000" in bits.output and "0b1111" in bits.output and "0b0111" in bits.output
    hexes = runner.invoke(cli, ["show", literal, "--format", "hex"])
    assert hexes.exit_code == 0 and "0x8" in hexes.output and "0xf" in hexes.output and "0x00" not in hexes.output
    table = runner.invoke(cli, ["show", literal])
    assert "INT4" in table.output and "-8" in table.output and "3 elements: 0 zero" in table.output


def test_check_compares_four_bits_exactly():
    runner = CliRunner()
    call = ["run", "quantize", '{"dtype": "float32", "data": [[1, 2, 3, 4]]}', '{"dtype": "float32", "data": [[0.5]]}',
            "--output-dtype", "int4"]
    passed = runner.invoke(cli, call + ["--check", '{"dtype": "int4", "data": [[2, 4, 6, 7]]}'])
    assert passed.exit_code == 0 and "PASSED" in passed.output
    failed = runner.invoke(cli, call + ["--check", '{"dtype": "int4", "data": [[2, 4, 6, 6]]}'])
    assert failed.exit_code == 1 and "got 7 (0x7), expected 6 (0x6)" in failed.output
    # Expected bytes that hold something in their high halves (a '<V1' file from elsewhere): the four bits count.
    from dmlcli.checking.comparison import compare_arrays

    expected = np.frombuffer(bytes([0xF2, 0x54, 0x06, 0x77]), dtype=ml_dtypes.int4).reshape(1, 4)
    got = np.array([[2, 4, 6, 7]], dtype=ml_dtypes.int4)
    assert compare_arrays(got, expected).passed
    assert not compare_arrays(got, np.array([[2, 4, 6, -7]], dtype=ml_dtypes.int4)).passed


# ---------------------------------------------------------------- where 4-bit tensors cannot go


def test_an_element_wise_operator_refuses_a_4_bit_npy_naming_the_type(tmp_path):
    path = tmp_path / "x.npy"
    with open(path, "wb") as handle:
        save_npy(handle, np.array([1, 2], dtype=ml_dtypes.int4))
    result = CliRunner().invoke(cli, ["run", "identity", str(path), "-o", str(tmp_path / "y.npy")])
    assert result.exit_code == 3
    assert "InputTensor data type INT4 is not supported" in result.output


def test_a_zarr_store_refuses_4_bit_data(tmp_path):
    from dmlcli.io.zarr_store import output_store

    with pytest.raises(InputError, match="Zarr has no 4-bit data type"):
        with output_store(str(tmp_path / "out.zarr"), shape=(4,), chunks=(4,), dtype=np.dtype(ml_dtypes.uint4)):
            pass


def test_the_api_takes_and_returns_ml_dtypes_arrays():
    x = np.array([[-1.0, 0.3, 2.6, 100.0]], np.float32)
    quantized = dmlcli.run("quantize", x, np.array([[0.5, 1.0]], np.float32),
                           np.array([[1, -2]], dtype=ml_dtypes.int4))
    assert quantized.dtype == np.dtype(ml_dtypes.int4) and values_of(quantized) == [-1, 2, 1, 7]
    back = dmlcli.run("dequantize", quantized, np.array([[0.5, 1.0]], np.float32),
                      np.array([[1, -2]], dtype=ml_dtypes.int4))
    assert back.tolist() == [[-1.0, 0.5, 3.0, 9.0]]


# ---------------------------------------------------------------- DxDispatch buffers


def test_total_tensor_size_counts_four_bits_an_element():
    assert calc_buffer_tensor_size(4, (3,)) == 4  # 12 bits: 2 bytes, rounded up to 4
    assert calc_buffer_tensor_size(4, (2, 9)) == 12  # 72 bits: 9 bytes -> 12
    assert calc_buffer_tensor_size(4, (2, 3), (8, 2)) == 8  # last element at 12: 13 half bytes, 7 bytes -> 8


def test_strided_4_bit_stores_keep_the_other_half_byte():
    raw = bytearray(b"\xAA\xAA\xAA\xAA")
    store_four_bit(raw, 0, (3,), (3,), np.array([1, 2, 3], dtype=ml_dtypes.uint4))  # elements 0, 3, 6
    assert raw == bytearray([0xA1, 0x2A, 0xAA, 0xA3])  # 0: byte 0 low; 3: byte 1 high; 6: byte 3 low


def _model(tmp_path, dispatchables, commands, resources):
    model = {"resources": resources, "dispatchables": dispatchables, "commands": commands}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    return path


def test_a_dxdispatch_model_quantizes_into_packed_int4_and_back(tmp_path):
    resources = {
        "X": {"initialValuesDataType": "FLOAT32", "initialValues": [-1.0, 0.25, 3.0, 100.0, -100.0, 2.5]},
        "S": {"initialValuesDataType": "FLOAT32", "initialValues": [0.5, 1.0]},
        "Z": {"initialValuesDataType": "INT4", "initialValues": [1, -2]},
        "Q": {"initialValuesDataType": "INT4", "initialValues": {"valueCount": 6, "value": 0}},
        "Y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 6, "value": 0}},
    }
    tensors = [{"DataType": "FLOAT32", "Sizes": [1, 2]}, {"DataType": "INT4", "Sizes": [1, 2]}]
    dispatchables = {
        "q": {"type": "DML_OPERATOR_QUANTIZE", "desc": {
            "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 6]}, "QuantizationType": "SCALE_ZERO_POINT",
            "QuantizationTensorCount": 2, "QuantizationTensors": tensors,
            "OutputTensor": {"DataType": "INT4", "Sizes": [1, 6]}}},
        "d": {"type": "DML_OPERATOR_DEQUANTIZE", "desc": {
            "InputTensor": {"DataType": "INT4", "Sizes": [1, 6]}, "QuantizationType": "SCALE_ZERO_POINT",
            "QuantizationTensorCount": 2, "QuantizationTensors": tensors,
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 6]}}},
    }
    commands = [
        {"type": "dispatch", "dispatchable": "q",
         "bindings": {"InputTensor": "X", "QuantizationTensors": ["S", "Z"], "OutputTensor": "Q"}},
        {"type": "print", "resource": "Q"},
        {"type": "dispatch", "dispatchable": "d",
         "bindings": {"InputTensor": "Q", "QuantizationTensors": ["S", "Z"], "OutputTensor": "Y"}},
        {"type": "print", "resource": "Y"},
        {"type": "writeFile", "resource": "Q", "targetPath": "q.bin"},
        {"type": "writeFile", "resource": "Q", "targetPath": "q.npy"},
    ]
    path = _model(tmp_path, dispatchables, commands, resources)
    result = CliRunner().invoke(cli, ["dispatch", str(path), "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Resource 'Q': -1, 1, 7, 7, -8, 0" in result.output
    assert "Resource 'Y': -1, 0, 3, 9, -6, 2" in result.output
    assert (tmp_path / "q.bin").read_bytes() == bytes([0x1F, 0x77, 0x08, 0x00])  # low half first; 4-byte buffer
    written = np.load(tmp_path / "q.npy")
    assert written.dtype == np.dtype(ml_dtypes.int4) and values_of(written) == [-1, 1, 7, 7, -8, 0, 0, 0]


def test_a_4_bit_count_field_that_disagrees_is_refused(tmp_path):
    resources = {"X": {"initialValuesDataType": "FLOAT32", "initialValues": [1.0, 2.0]},
                 "S": {"initialValuesDataType": "FLOAT32", "initialValues": [1.0]},
                 "Q": {"initialValuesDataType": "UINT4", "initialValues": {"valueCount": 2, "value": 0}}}
    dispatchables = {"q": {"type": "DML_OPERATOR_QUANTIZE", "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "QuantizationType": "SCALE",
        "QuantizationTensorCount": 2, "QuantizationTensors": [{"DataType": "FLOAT32", "Sizes": [1]}],
        "OutputTensor": {"DataType": "UINT4", "Sizes": [2]}}}}
    commands = [{"type": "dispatch", "dispatchable": "q",
                 "bindings": {"InputTensor": "X", "QuantizationTensors": ["S"], "OutputTensor": "Q"}}]
    result = CliRunner().invoke(cli, ["dispatch", str(_model(tmp_path, dispatchables, commands, resources))])
    assert result.exit_code == 2
    assert "QuantizationTensorCount 2 does not match the 1 tensor descs of QuantizationTensors" in result.output


def test_a_strided_4_bit_input_reads_half_bytes(tmp_path):
    """Strides count 4-bit elements: Strides [2] over a UINT4 buffer read every other half byte."""
    resources = {"Q": {"initialValuesDataType": "UINT4", "initialValues": [1, 9, 2, 9, 3, 9]},
                 "S": {"initialValuesDataType": "FLOAT32", "initialValues": [2.0]},
                 "Y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 3, "value": 0}}}
    dispatchables = {"d": {"type": "DML_OPERATOR_DEQUANTIZE", "desc": {
        "InputTensor": {"DataType": "UINT4", "Sizes": [3], "Strides": [2]}, "QuantizationType": "SCALE",
        "QuantizationTensorCount": 1, "QuantizationTensors": [{"DataType": "FLOAT32", "Sizes": [1]}],
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}}}
    commands = [{"type": "dispatch", "dispatchable": "d",
                 "bindings": {"InputTensor": "Q", "QuantizationTensors": ["S"], "OutputTensor": "Y"}},
                {"type": "print", "resource": "Y"}]
    result = CliRunner().invoke(cli, ["dispatch", str(_model(tmp_path, dispatchables, commands, resources))])
    assert result.exit_code == 0, result.output
    assert "Resource 'Y': 2, 4, 6" in result.output


def test_a_serialized_graph_passes_an_int4_edge_between_its_nodes(tmp_path):
    """QUANTIZE to INT4 then DEQUANTIZE inside a dmlSerializedGraph: the intermediate edge is a packed buffer of the
    graph's own, written and read half byte by half byte on every iteration."""
    import serialized_graphs as sg  # tests/ is on the path

    scale = {"name": "scale", "raw": sg.floats(0.5), "outputs": ["s"]}
    attributes = [("QuantizationType", "UInt32", 1), ("QuantizationTensorCount", "UInt32", 1)]
    nodes = [scale,
             {"name": "q", "op": "DML_OPERATOR_QUANTIZE", "inputs": ["x", "s"], "outputs": ["q4"],
              "in": [sg.tensor([1, 4]), sg.tensor([1, 1])], "out": [sg.tensor([1, 4], "INT4", total=4)],
              "attributes": attributes},
             {"name": "d", "op": "DML_OPERATOR_DEQUANTIZE", "inputs": ["q4", "s"], "outputs": ["y"],
              "in": [sg.tensor([1, 4], "INT4", total=4), sg.tensor([1, 1])], "out": [sg.tensor([1, 4])],
              "attributes": attributes}]
    (tmp_path / "graph.bin").write_bytes(sg.graph_file(nodes, ["x"], ["y"]))
    model = {"resources": {"X": {"initialValuesDataType": "FLOAT32", "initialValues": [-1.0, 0.3, 2.6, 100.0]},
                           "Y": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 0, 0, 0]}},
             "dispatchables": {"graph": {"type": "dmlSerializedGraph", "sourcePath": "graph.bin"}},
             "commands": [{"type": "dispatch", "dispatchable": "graph", "bindings": {"x": "X", "y": ["Y"]}},
                          {"type": "print", "resource": "Y"}]}
    (tmp_path / "model.json").write_text(json.dumps(model))
    result = CliRunner().invoke(cli, ["dispatch", str(tmp_path / "model.json"), "--no-timing"])
    assert result.exit_code == 0, result.output
    assert "Resource 'Y': -1, 0.5, 2.5, 3.5" in result.output  # -2, 1, 5, 7 (saturated) times 0.5
