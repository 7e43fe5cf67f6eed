"""`dmlcli dispatch`: DxDispatch models run on NumPy, checked against values worked out by hand.

The models in tests/models were written for these tests; every expected value below was worked
out by hand (or with plain Python integers and struct), never with dmlcli's kernels.
"""

import json
import warnings
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import dmlcli
import pytest

from conftest import SHARED as SHARED_ROOT
from click.testing import CliRunner

from dmlcli.cli import cli
from dmlcli.dispatch import load_model, run_model
from dmlcli.dispatch.jsonc import strip_comments_and_trailing_commas
from dmlcli.dispatch.model import parse_resource
from dmlcli.dispatch.printing import format_value
from dmlcli.dispatch.run import DispatchTiming
from dmlcli.io.strided import calc_buffer_tensor_size
from dmlcli.errors import InputError

from conftest import REPO

MODELS = REPO / "tests" / "models"
SHARED_MODELS = SHARED_ROOT / "dxdispatch_models"


def dispatch(*args):
    return CliRunner().invoke(cli, ["dispatch", *[str(a) for a in args]])


def printed(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if not line.startswith("Dispatch '")]


# ---------------------------------------------------------------- models for every operator

EXPECTED_OUTPUT = {
    # AND/OR/XOR of A = [[1, 2, 3], [0x0F0F, 0xFFFF, 256]] with the row [0x00FF, 0x0F00, 1] (zero stride).
    "bitwise_broadcast.json": [
        "Resource 'AndOut': 1, 0, 1, 15, 3840, 0",
        "Resource 'OrOut': 255, 3842, 3, 4095, 65535, 257",
        "Resource 'XorOut': 254, 3842, 2, 4080, 61695, 257",
    ],
    # [1, 3, 5, 2^31] shifted left by 1 three times, in place (2^31 << 3 wraps to 0); UINT64 right
    # shifts by the sequence 1, 21, 41, 61: 2^63 >> 1, 2^40 >> 21, 255 >> 41, (2^64 - 1) >> 61.
    "shift_in_place.json": [
        "Resource 'A': 8, 24, 40, 0",
        "Resource 'Counts': 1, 21, 41, 61",
        "Resource 'Right': 4611686018427387904, 524288, 0, 7",
    ],
    # INT8 [-1, 0, 127, -128] read from element 16: popcounts 8, 0, 7, 1; ~x = 0, -1, -128, 127.
    "bit_not_count_offsets.json": [
        "Resource 'Count': 8, 0, 7, 1",
        "Resource 'NotOut':",
        "[0] 0 (0x 0)",
        "[1] -1 (0xFF)",
        "[2] -128 (0x80)",
        "[3] 127 (0x7F)",
    ],
    # P = [[0, 1], [2, 0]]; Q = [5, 0, 7, 0] read transposed (Strides [1, 2]) = [[5, 7], [0, 0]].
    # XOR = [[1, 0], [1, 0]] written transposed: buffer [1, 1, 0, 0]. Flags negated in place twice.
    "logical_strided.json": [
        "Resource 'AndOut': 0, 1, 0, 0",
        "Resource 'OrOut': 1, 1, 1, 0",
        "Resource 'XorT': 1, 1, 0, 0",
        "Resource 'NotOut': 1, 0, 0, 1",
        "Resource 'Flags': 1, 0, 1, 0",
        "Resource 'Flags': 0, 1, 0, 1",
    ],
    # [inf, -inf, nan, 1.5, -0, 3.4e38] and the FLOAT16 sequence -1, -0.5, 0, 0.5.
    "float_classes.json": [
        "Resource 'F32': inf, -inf, nan, 1.5, -0, 3.4e+38",
        "Resource 'F16':",
        "[0] -1 (0xBC00)",
        "[1] -0.5 (0xB800)",
        "[2] 0 (0x   0)",
        "[3] 0.5 (0x3800)",
        "Resource 'Either': 1, 1, 0, 0, 0, 0",
        "Resource 'Positive': 1, 0, 0, 0, 0, 0",
        "Resource 'Negative': 0, 1, 0, 0, 0, 0",
        "Resource 'Nan32': 0, 0, 1, 0, 0, 0",
        "Resource 'Nan16': 0, 0, 0, 0",
    ],
    # INT32 A = [-5, 0, 7, min, max] vs B = [3, 0, 7, max, min]; FLOAT32 X = [-0, nan, 1, -inf] vs
    # Y = [0, nan, 2, -1e30] (-0 == 0, NaN compares false).
    "comparisons.json": [
        "Resource 'I_EQUALS': 0, 1, 1, 0, 0",
        "Resource 'I_GREATER_THAN': 0, 0, 0, 0, 1",
        "Resource 'I_LESS_THAN': 1, 0, 0, 1, 0",
        "Resource 'I_GREATER_THAN_OR_EQUAL': 0, 1, 1, 0, 1",
        "Resource 'I_LESS_THAN_OR_EQUAL': 1, 1, 1, 1, 0",
        "Resource 'F_EQUALS': 1, 0, 0, 0",
        "Resource 'F_GREATER_THAN': 0, 0, 0, 0",
        "Resource 'F_LESS_THAN': 0, 0, 1, 1",
        "Resource 'F_GREATER_THAN_OR_EQUAL': 1, 0, 0, 0",
        "Resource 'F_LESS_THAN_OR_EQUAL': 1, 0, 1, 1",
    ],
    # N from an .npy file, R from raw little-endian bytes [0x00FF, 0xF000, 3, 0].
    "file_sources.json": [
        "Resource 'N': 1, 2, 65535, 4096",
        "Resource 'R': 255, 61440, 3, 0",
        "Resource 'Out': 254, 61442, 65532, 4096",
    ],
}


def test_every_operator_has_a_model():
    """The hand-written models cover the bitwise, logical and comparison families (the others: generated below)."""
    from dmlcli.operators import OPERATORS

    used = set()
    for path in MODELS.glob("*.json"):
        used |= {d.operator.name for d in load_model(path).dispatchables.values()}
    assert used == {op.name for op in OPERATORS if op.family in ("bitwise", "logical", "comparison")}


def _desc_value(parameter, data_type):
    """A DESC field as a model writes it: each kind's default, spelled the DxDispatch way."""
    value = parameter.parse({}, {name: data_type for name in ("InputTensor", "OutputTensor", "ATensor")})
    if isinstance(value, str):
        return value
    if value is None:
        return None
    return float(value) if isinstance(value, np.floating) else int(value)


@pytest.mark.parametrize("op", [pytest.param(op, id=op.cli_name) for op in __import__("dmlcli").operators.ELEMENTWISE_OPERATORS])
def test_every_operator_runs_in_a_generated_model_as_in_run(op, tmp_path, monkeypatch):
    """Each operator through a DxDispatch model, DESC fields by their DirectML names, gives dmlcli.run's bytes."""
    from dmlcli.feature_levels import NEWEST

    row = op.row_at(NEWEST)
    data_types = {name: row.tensors[name].data_types[0] for name in op.tensors}
    for name in op.same_data_type:
        data_types[name] = row.tensors[op.same_data_type[0]].data_types[0]
    rng = np.random.default_rng(7)
    arrays = []
    for name in op.inputs:
        dtype = data_types[name].numpy_dtype
        values = rng.integers(0, 4, size=4) if dtype.kind in "iu" else rng.standard_normal(4) * 2
        arrays.append(values.astype(dtype))
    out_type = data_types[op.output]
    resources = {name: buffer(data_types[name].name, arrays[i].tolist()) for i, name in enumerate(op.inputs)}
    resources["Out"] = buffer(out_type.name, [0] * 4)
    desc = {name: tensor(data_types[name].name, [4]) for name in op.tensors}
    for parameter in op.parameters:
        if parameter.required_in_desc:
            desc[parameter.field] = _desc_value(parameter, out_type)
    bindings = {name: name for name in op.inputs}
    bindings[op.output] = "Out"
    commands = [{"type": "dispatch", "dispatchable": "op", "bindings": bindings},
                {"type": "writeFile", "targetPath": "out.npy", "resource": "Out", "dimensions": [4]}]
    model = {"op": {"type": op.dml_name, "desc": desc}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dmlcli.DmlcliWarning)
        result = run_generated(tmp_path, monkeypatch, resources, model, commands)
        expected = dmlcli.run(op.cli_name, *arrays, output_dtype=out_type.numpy_dtype if op.output_type_is_choice else None)
    assert result.exit_code == 0, result.output
    assert np.load(tmp_path / "out.npy").tobytes() == expected.tobytes()


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_model_prints_the_expected_values(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = dispatch(MODELS / name, "--no-timing")
    assert result.exit_code == 0, result.output
    assert [line for line in printed(result) if "' written to '" not in line] == EXPECTED_OUTPUT[name]


def test_written_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("bitwise_broadcast.json", "bit_not_count_offsets.json", "float_classes.json", "file_sources.json"):
        assert dispatch(MODELS / name, "--no-timing").exit_code == 0
    xor = np.load(tmp_path / "xor.npy")
    assert xor.dtype == np.uint16 and xor.tolist() == [[254, 3842, 2], [4080, 61695, 257]]
    # Raw bytes: the whole 16-byte buffer (sizeInBytes 16), popcounts first.
    assert (tmp_path / "count.bin").read_bytes() == bytes([8, 0, 7, 1] + [0] * 12)
    halves = np.load(tmp_path / "f16.npy")
    assert halves.dtype == np.float16 and halves.tolist() == [-1.0, -0.5, 0.0, 0.5]
    assert np.load(tmp_path / "out" / "xor.npy").tolist() == [254, 61442, 65532, 4096]  # folder created


def test_iterations_repeat_each_dispatch_and_compound(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = dispatch(MODELS / "shift_in_place.json", "-i", "2", "-w", "0")
    assert result.exit_code == 0, result.output
    # Three dispatch commands, two iterations each: six left shifts by 1.
    assert "Resource 'A': 64, 192, 320, 0" in result.stdout.splitlines()
    timing = [line for line in result.stdout.splitlines() if line.startswith("Dispatch '")]
    assert len(timing) == 4
    assert all(re.fullmatch(r"Dispatch '(shl|shr)': 2 iterations, \d+\.\d{4} ms median \(CPU\)", line) for line in timing)


def test_api_returns_final_buffers(tmp_path):
    model = load_model(MODELS / "logical_strided.json", output_dir=tmp_path)
    lines = []
    run = run_model(model, emit=lines.append, timing=False)
    assert bytes(run.buffers["XorT"]) == struct.pack("<4I", 1, 1, 0, 0)
    assert lines[-1] == "Resource 'Flags': 0, 1, 0, 1"
    assert len(run.timings) == 6


def test_timing_statistics_follow_dxdispatch():
    timing = DispatchTiming("x", (10.0, 1.0, 3.0, 2.0), warmup=1)
    assert timing.cpu_median_ms == 2.0  # hot samples 1, 3, 2: sorted[3 // 2]
    assert DispatchTiming("x", (5.0, 4.0), warmup=1).cpu_median_ms == 4.0
    assert DispatchTiming("x", (5.0,), warmup=3).cpu_median_ms == 5.0  # one sample always stays hot
    assert DispatchTiming("x", (5.0, 1.0, 2.0, 3.0), warmup=0).cpu_median_ms == 3.0
    assert DispatchTiming("x", (1.0,), warmup=1).gpu_median_ms is None


# ---------------------------------------------------------------- the shared DxDispatch models


SHARED = ["dml_element_wise_add.json", "dml_element_wise_clip.json", "dml_element_wise_identity.json",
          "dml_owned_tensors.json", "dml_scalar_union_fp16.json"]
ALL_SHARED_MODELS = [
    "dmlSerializedGraph_matmul_add.json", "dml_convolution_2d.json", "dml_convolution_3d.json",
    "dml_cumulative_product.json", "dml_element_wise_add.json", "dml_element_wise_add1.json",
    "dml_element_wise_add_npy.json", "dml_element_wise_clip.json", "dml_element_wise_identity.json",
    "dml_fill_value_sequence.json", "dml_gemm.json", "dml_gemm_graph.json", "dml_join.json",
    "dml_owned_tensors.json", "dml_reduce.json", "dml_rnn.json", "dml_scalar_union_fp16.json",
    "dml_slice.json", "dml_split.json", "dml_upsample_2d.json", "hlsl_add_fp16.json", "hlsl_add_fp32.json",
    "image_io.json", "onnx_dynamic_shapes.json", "onnx_gemm.json"]

# What DxDispatch's seven element-wise example models print, worked out by hand from their initial values:
# ADD 1+5, 2+8, 3-5; ADD1 with ELU (Alpha 0.5) of the same sums: 0.5*(e^-2 - 1) = -0.432332 (C++'s %g);
# the .npy/.dat inputs both hold 1..6; CLIP to [-2.5, 2.5] in place; IDENTITY with ScaleBias 2x+10;
# CLIP1 of the FLOAT16 sequence 1..5 to [2, 4].
ELEMENT_WISE_MODELS = {
    "dml_element_wise_add.json": ["Resource 'Out': 6, 10, -2"],
    "dml_element_wise_add1.json": ["Resource 'Out': 6, 10, -0.432332"],
    "dml_element_wise_add_npy.json": ["Resource 'Out': 2, 4, 6, 8, 10, 12",
                                      "Resource 'Out' written to '{folder}/dml_element_wise_add_output.npy'",
                                      "Resource 'Out' written to '{folder}/dml_element_wise_add_output.dat'"],
    "dml_element_wise_clip.json": ["Resource 'A': -2.5, -2.5, -2, -1, 0, 1, 2, 2.5, 2.5"],
    "dml_element_wise_identity.json": ["Resource 'Out': 12, 14, 16"],
    "dml_owned_tensors.json": ["Resource 'Out': 6, 10, -2"],
    "dml_scalar_union_fp16.json": ["Resource 'output': 2, 2, 3, 4, 4"],
}
# The shaped operators' models are in tests/test_dispatch_shaped.py. The others, and the words their refusal must contain (exit 2, before anything runs).
REFUSED_MODELS = {
    "hlsl_add_fp16.json": "need DirectX's shader compiler (dxc)",
    "hlsl_add_fp32.json": "need DirectX's shader compiler (dxc)",
}
# The ONNX and image models: tests/test_dispatch_formats.py (they need the [onnx] and [images] extras).
FORMAT_MODEL_NAMES = ["image_io.json", "onnx_dynamic_shapes.json", "onnx_gemm.json"]
# The serialized DirectML graph: tests/test_dispatch_serialized_graph.py.
SERIALIZED_GRAPH_MODELS = ["dmlSerializedGraph_matmul_add.json"]


def test_the_shared_models_are_all_there(shared_dir):
    # DxDispatch's 25 example models, and the JSON schema that describes them.
    found = sorted(p.name for p in (shared_dir / "dxdispatch_models").glob("*.json"))
    assert found == sorted(ALL_SHARED_MODELS + ["_schema.json"])
    from test_dispatch_shaped import SHAPED_MODELS

    assert sorted(list(ELEMENT_WISE_MODELS) + list(REFUSED_MODELS) + list(SHAPED_MODELS)
                  + FORMAT_MODEL_NAMES + SERIALIZED_GRAPH_MODELS) == sorted(ALL_SHARED_MODELS)


@pytest.mark.parametrize("name", sorted(ELEMENT_WISE_MODELS))
def test_shared_element_wise_models_run(name, tmp_path, monkeypatch, shared_dir):
    monkeypatch.chdir(tmp_path)
    result = dispatch(SHARED_MODELS / name, "--no-timing")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [line.format(folder=tmp_path) for line in ELEMENT_WISE_MODELS[name]]
    if name == "dml_element_wise_add_npy.json":
        assert np.load(tmp_path / "dml_element_wise_add_output.npy").tolist() == [2, 4, 6, 8, 10, 12]
        assert np.fromfile(tmp_path / "dml_element_wise_add_output.dat", np.float32).tolist() == [2, 4, 6, 8, 10, 12]


def test_a_count_field_must_match_its_array(tmp_path, monkeypatch, shared_dir):
    model = json.loads((SHARED_MODELS / "dml_reduce.json").read_text())
    model["dispatchables"]["sum"]["desc"]["AxisCount"] = 2
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    monkeypatch.chdir(tmp_path)
    result = dispatch(path)
    assert result.exit_code == 2
    assert "desc: AxisCount 2 does not match the 1 values of Axes" in result.stderr


@pytest.mark.parametrize("name", sorted(REFUSED_MODELS))
def test_shared_model_outside_the_family_fails_cleanly(name, tmp_path, monkeypatch, shared_dir):
    monkeypatch.chdir(tmp_path)
    result = dispatch(SHARED_MODELS / name)
    assert result.exit_code == 2
    assert result.stdout == "" and list(tmp_path.iterdir()) == []
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert REFUSED_MODELS[name] in result.stderr


def test_an_unknown_operator_name_is_not_called_a_directml_operator(tmp_path, monkeypatch):
    resources = {"A": buffer("UINT8", [1]), "Out": buffer("UINT8", [0])}
    commands = [{"type": "dispatch", "dispatchable": "op", "bindings": {"InputTensor": "A", "OutputTensor": "Out"}}]
    result = run_generated(tmp_path, monkeypatch, resources, {"op": unary("BIT_NOTT", "UINT8", [1])}, commands)
    assert result.exit_code == 2
    assert "unknown operator 'DML_OPERATOR_ELEMENT_WISE_BIT_NOTT' (did you mean bit_not" in result.stderr


@pytest.mark.parametrize("name", SHARED)
def test_shared_model_resources_parse(name, shared_dir):
    document = json.loads(strip_comments_and_trailing_commas((SHARED_MODELS / name).read_text()))
    for resource_name, value in document["resources"].items():
        resource = parse_resource(resource_name, value, model_dir=SHARED_MODELS, where=resource_name)
        assert resource.size_in_bytes % 4 == 0 and resource.size_in_bytes >= len(resource.initial_values)
    if name == "dml_scalar_union_fp16.json":
        # The FLOAT16 sequence 1, 2, 3, 4, 5: 10 bytes, 12 once rounded up to 4.
        resource = parse_resource("input", document["resources"]["input"], model_dir=SHARED_MODELS, where="input")
        assert resource.initial_values == struct.pack("<5e", 1, 2, 3, 4, 5) and resource.size_in_bytes == 12


def test_shared_owned_tensor_model_runs_once_its_operator_is_ours(tmp_path, monkeypatch, shared_dir):
    # dml_owned_tensors.json with ADD swapped for BIT_OR (same fields): ATensor is OWNED_BY_DML and
    # bound in the dispatchable's own bindings, so DirectML takes it at initialisation.
    text = (SHARED_MODELS / "dml_owned_tensors.json").read_text()
    model = tmp_path / "owned.json"
    model.write_text(text.replace("DML_OPERATOR_ELEMENT_WISE_ADD", "DML_OPERATOR_ELEMENT_WISE_BIT_OR"))
    monkeypatch.chdir(tmp_path)
    result = dispatch(model, "--no-timing")
    assert result.exit_code == 0, result.output

    def bit_or(a, b):
        bits = struct.unpack("<I", struct.pack("<f", a))[0] | struct.unpack("<I", struct.pack("<f", b))[0]
        return struct.unpack("<f", struct.pack("<I", bits))[0]

    # 1.0 | 5.0 is 0x7FA00000, a NaN; 2.0 | 8.0 = 8.0; 3.0 | -5.0 = -7.0.
    assert [bit_or(1, 5) != bit_or(1, 5), bit_or(2, 8), bit_or(3, -5)] == [True, 8.0, -7.0]
    assert result.stdout.splitlines() == ["Resource 'Out': nan, 8, -7"]


# ---------------------------------------------------------------- generated models: errors


def write_model(tmp_path: Path, resources, dispatchables, commands, name="model.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"resources": resources, "dispatchables": dispatchables, "commands": commands}))
    return path


def buffer(data_type, values):
    return {"initialValuesDataType": data_type, "initialValues": values}


def tensor(data_type, sizes, **extra):
    return {"DataType": data_type, "Sizes": sizes, **extra}


def binary(op, data_type, sizes, out_type=None, **tensors):
    desc = {"ATensor": tensor(data_type, sizes), "BTensor": tensor(data_type, sizes),
            "OutputTensor": tensor(out_type or data_type, sizes)}
    desc.update(tensors)
    return {"type": f"DML_OPERATOR_ELEMENT_WISE_{op}", "desc": desc}


def unary(op, data_type, sizes, out_type=None, **fields):
    desc = {"InputTensor": tensor(data_type, sizes), "OutputTensor": tensor(out_type or data_type, sizes)}
    desc.update(fields)
    return {"type": f"DML_OPERATOR_ELEMENT_WISE_{op}", "desc": desc}


def run_generated(tmp_path, monkeypatch, resources, dispatchables, commands, *options):
    monkeypatch.chdir(tmp_path)
    return dispatch(write_model(tmp_path, resources, dispatchables, commands), "--no-timing", *options)


PRINT_FIRST = {"type": "print", "resource": "A"}
AB = {"A": buffer("UINT8", [1, 2, 3, 4]), "B": buffer("UINT8", [5, 6, 7, 8]), "Out": buffer("UINT8", [0, 0, 0, 0])}
XOR_AB = {"type": "dispatch", "dispatchable": "op", "bindings": {"ATensor": "A", "BTensor": "B", "OutputTensor": "Out"}}


@pytest.mark.parametrize("resources,dispatchables,commands,message", [
    (AB, {"op": {"type": "hlsl", "sourcePath": "x.hlsl", "compilerArgs": []}}, [], "need DirectX's shader compiler"),
    (AB, {"op": {"type": "onnx", "sourcePath": "x.onnx"}}, [], "sourcePath 'x.onnx': no such file"),
    ({**AB, "T": {"type": "texture2d", "initialValues": [1]}}, {}, [], "no textures"),
    (AB, {}, [{"type": "present"}], "command type 'present' is not supported"),
    (AB, {}, [{"type": "writeFile", "resource": "A", "targetPath": "a.png"}], "as FLOAT32 or FLOAT16, not UINT8"),
    ({"A": {"initialValuesDataType": "UINT8", "initialValues": "deferred"}}, {}, [],
     "resource 'A' is deferred and the dispatch just before this command did not give it contents"),
    ({"A": {"initialValuesDataType": "UNKNOWN", "initialValues": [{"type": "UINT32", "value": 1}]}}, {}, [],
     "UNKNOWN is not supported"),
    (AB, {"op": {"type": "DML_OPERATOR_NOT_AN_OPERATOR", "desc": {}}}, [XOR_AB],
     "unknown operator 'DML_OPERATOR_NOT_AN_OPERATOR'"),
    (AB, {"op": binary("BIT_XOR", "UINT8", [4])}, [{**XOR_AB, "bindings": {"ATensor": "A", "OutputTensor": "Out"}}],
     "nothing bound for required tensor 'BTensor'"),
    (AB, {"op": binary("BIT_XOR", "UINT8", [4])}, [{**XOR_AB, "bindings": {**XOR_AB["bindings"], "BTensor": "Z"}}],
     "no resource named 'Z'"),
    (AB, {"op": binary("BIT_XOR", "UINT8", [4])}, [{**XOR_AB, "bindings": {**XOR_AB["bindings"], "CTensor": "A"}}],
     "has no tensor 'CTensor'"),
    (AB, {"op": {**binary("BIT_XOR", "UINT8", [4]), "desc": {**binary("BIT_XOR", "UINT8", [4])["desc"],
                                                            "ScaleBias": {"Scale": 1, "Bias": 0}}}}, [],
     "unknown key 'ScaleBias'"),
    (AB, {"op": unary("IS_INFINITY", "FLOAT32", [1], "UINT8")}, [], "desc has no InfinityMode"),
    (AB, {"op": binary("BIT_NOT", "UINT8", [4])}, [], "unknown key 'ATensor' in the DML_OPERATOR_ELEMENT_WISE_BIT_NOT desc"),
    (AB, {"op": unary("IS_INFINITY", "FLOAT32", [1], "UINT8", InfinityMode="SIDEWAYS")}, [], "unknown InfinityMode"),
    ({"A": buffer("UINT8", [1, 2.0])}, {}, [], "is not an integer"),
    ({"A": buffer("UINT8", [1, 256])}, {}, [], "256 is out of range for UINT8"),
    ({"A": buffer("FLOAT16", [1e6])}, {}, [], "out of range for FLOAT16"),
    ({"A": buffer("FLOAT32", ["infinity"])}, {}, [], "is not a number"),
    ({"A": {**buffer("UINT32", [1, 2]), "sizeInBytes": 4}}, {}, [], "too small for the initialValues"),
    ({"A": buffer("UINT8", [])}, {}, [], "must not be empty"),
    ({"A": {"initialValues": {"sourcePath": "missing.npy"}}}, {}, [], "no such file"),
])
def test_unsupported_or_malformed_items_fail_before_anything_runs(tmp_path, monkeypatch, resources, dispatchables,
                                                                 commands, message):
    resources = {"A": buffer("UINT8", [1]), **resources}
    result = run_generated(tmp_path, monkeypatch, resources, dispatchables, [PRINT_FIRST] + commands)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1


def aliasing(op_desc, bindings, resources=None):
    resources = resources or {"A": buffer("UINT8", list(range(36))), "B": buffer("UINT8", [1] * 36)}
    return resources, {"op": op_desc}, [{"type": "dispatch", "dispatchable": "op", "bindings": bindings}]


@pytest.mark.parametrize("case,message", [
    (({"A": buffer("INT32", [1]), "Out": buffer("INT32", [0])}, {"op": binary("BIT_SHIFT_LEFT", "INT32", [1])},
      [{"type": "dispatch", "dispatchable": "op", "bindings": {"ATensor": "A", "BTensor": "A", "OutputTensor": "Out"}}]),
     "ATensor data type INT32 is not supported"),
    (({"A": buffer("UINT32", [1, 2, 3, 4]), "Out": buffer("UINT32", [0] * 8)}, {"op": unary("BIT_NOT", "UINT32", [8])},
      [{"type": "dispatch", "dispatchable": "op", "bindings": {"InputTensor": "A", "OutputTensor": "Out"}}]),
     "but the tensor's TotalTensorSizeInBytes is 32"),
    (({"A": buffer("UINT32", [1] * 8), "Out": buffer("UINT32", [0] * 8)}, {"op": unary("BIT_NOT", "UINT32", [4])},
      [{"type": "dispatch", "dispatchable": "op",
        "bindings": {"InputTensor": {"name": "A", "elementOffset": 1}, "OutputTensor": "Out"}}]),
     "not a multiple of 16"),
    (({"A": buffer("UINT32", [1] * 4)}, {"op": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": {
        "InputTensor": tensor("UINT32", [4], TotalTensorSizeInBytes=8), "OutputTensor": tensor("UINT32", [4])}}}, []),
     "TotalTensorSizeInBytes 8 is smaller than the 16 bytes"),
    (({"A": buffer("UINT32", [1] * 4)}, {"op": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": {
        "InputTensor": tensor("UINT32", [4]), "OutputTensor": tensor("UINT32", [4], Strides=[0])}}}, []),
     "share one address"),
    (({"A": buffer("UINT32", [1] * 4)}, {"op": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": {
        "InputTensor": tensor("UINT32", [4]), "OutputTensor": tensor("UINT32", [2, 2])}}}, []),
     "OutputTensor Sizes [2, 2] differ"),
    (aliasing(binary("LOGICAL_EQUALS", "UINT8", [4]), {"ATensor": "A", "BTensor": "B", "OutputTensor": "A"}),
     "LOGICAL_EQUALS is not one of them"),
    (aliasing(unary("BIT_NOT", "UINT8", [20]), {"InputTensor": "A", "OutputTensor": {"name": "A", "elementOffset": 16}}),
     "partly overlaps InputTensor"),
    (({"A": buffer("UINT8", [1] * 4), "Out": buffer("UINT8", [0] * 4)},
      {"op": {**unary("BIT_NOT", "UINT8", [4]), "bindings": {"InputTensor": "A"}}},
      [{"type": "dispatch", "dispatchable": "op", "bindings": {"OutputTensor": "Out"}}]),
     "which DirectML reads only for inputs flagged OWNED_BY_DML"),
    (({"A": buffer("UINT8", [1] * 4), "Out": buffer("UINT8", [0] * 4)},
      {"op": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": {
          "InputTensor": tensor("UINT8", [4], Flags="OWNED_BY_DML"), "OutputTensor": tensor("UINT8", [4])},
          "bindings": {"InputTensor": "A"}}},
      [{"type": "dispatch", "dispatchable": "op", "bindings": {"InputTensor": "A", "OutputTensor": "Out"}}]),
     "bind it in the dispatchable's \"bindings\", not in the dispatch command"),
])
def test_calls_directml_would_refuse_fail_before_anything_runs(tmp_path, monkeypatch, case, message):
    resources, dispatchables, commands = case
    resources = {"A": buffer("UINT8", [1]), **resources}
    result = run_generated(tmp_path, monkeypatch, resources, dispatchables, [PRINT_FIRST] + commands)
    assert result.exit_code == 3, result.output
    assert result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_feature_level_decides(tmp_path, monkeypatch):
    resources = {"A": buffer("UINT64", [1, 2]), "B": buffer("UINT64", [3, 3]), "Out": buffer("UINT64", [0, 0])}
    dispatchables = {"op": binary("BIT_XOR", "UINT64", [2])}
    commands = [XOR_AB, {"type": "print", "resource": "Out"}]
    result = run_generated(tmp_path, monkeypatch, resources, dispatchables, commands, "--feature-level", "3_0")
    assert result.exit_code == 3 and "supported from DML_FEATURE_LEVEL_4_1" in result.stderr
    result = run_generated(tmp_path, monkeypatch, resources, dispatchables, commands, "--feature-level", "4.1")
    assert result.exit_code == 0 and result.stdout.splitlines() == ["Resource 'Out': 2, 1"]


def test_aligned_offsets_exact_aliasing_and_guaranteed_alignment(tmp_path, monkeypatch):
    resources = {"A": buffer("UINT32", [1, 2, 3, 4, 5, 6, 7, 8])}
    desc = {"InputTensor": tensor("UINT32", [2], GuaranteedBaseOffsetAlignment=4),
            "OutputTensor": tensor("UINT32", [2], GuaranteedBaseOffsetAlignment=4)}
    view = {"name": "A", "elementOffset": 1}  # byte 4: allowed by the 4-byte guaranteed alignment
    commands = [{"type": "dispatch", "dispatchable": "not", "bindings": {"InputTensor": view, "OutputTensor": view}},
                {"type": "print", "resource": "A"}]
    result = run_generated(tmp_path, monkeypatch, resources,
                           {"not": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": desc}}, commands)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"Resource 'A': 1, {2**32 - 1 - 2}, {2**32 - 1 - 3}, 4, 5, 6, 7, 8"]


def test_sequences_wrap_and_round_in_the_element_type(tmp_path, monkeypatch):
    resources = {"A": {"initialValuesDataType": "UINT8", "initialValues": {"valueCount": 4, "valueStart": 250, "valueDelta": 3}},
                 "B": {"initialValuesDataType": "INT8", "initialValues": {"valueCount": 4, "valueStart": 120, "valueDelta": 5}},
                 "H": {"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 6, "valueStart": 0.1, "valueDelta": 0.1}}}
    commands = [{"type": "print", "resource": name} for name in ("A", "B", "H")]
    result = run_generated(tmp_path, monkeypatch, resources, {}, commands)
    assert result.exit_code == 0, result.output
    half = lambda x: struct.unpack("<e", struct.pack("<e", x))[0]  # noqa: E731 - IEEE half rounding
    value, halves = half(0.1), []
    for _ in range(6):
        halves.append(value)
        value = half(value + half(0.1))
    assert result.stdout.splitlines() == [
        "Resource 'A': 250, 253, 0, 3",
        "Resource 'B': 120, 125, -126, -121",
        "Resource 'H': " + ", ".join(format(h, ".6g") for h in halves),
    ]


def test_padding_offsets_and_explicit_sizes(tmp_path, monkeypatch):
    resources = {"A": buffer("UINT8", [1, 2, 3]),  # 3 bytes, rounded up to 4
                 "B": {**buffer("UINT16", [7]), "initialValuesOffsetInBytes": 2, "sizeInBytes": 6}}
    commands = [{"type": "print", "resource": "A"}, {"type": "print", "resource": "B"},
                {"type": "writeFile", "resource": "A", "targetPath": "a.npy"},
                {"type": "writeFile", "resource": "B", "targetPath": "b.dat"}]
    result = run_generated(tmp_path, monkeypatch, resources, {}, commands)
    assert result.exit_code == 0, result.output
    # print shows the initial values' count from byte 0; writeFile covers the whole buffer (DxDispatch).
    assert printed(result)[:2] == ["Resource 'A': 1, 2, 3", "Resource 'B': 0"]
    assert np.load(tmp_path / "a.npy").tolist() == [1, 2, 3, 0]
    assert (tmp_path / "b.dat").read_bytes() == bytes([0, 0, 7, 0, 0, 0])


def test_shift_counts_past_the_width_warn(tmp_path, monkeypatch):
    resources = {"A": buffer("UINT8", [1, 1]), "B": buffer("UINT8", [1, 9]), "Out": buffer("UINT8", [0, 0])}
    commands = [XOR_AB, {"type": "print", "resource": "Out"}]
    result = run_generated(tmp_path, monkeypatch, resources, {"op": binary("BIT_SHIFT_LEFT", "UINT8", [2])}, commands)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["Resource 'Out': 2, 0"]
    assert "dispatch 'op': BIT_SHIFT_LEFT: 1 of 2 shift counts are >= the element width 8" in result.stderr


def test_json_with_comments_trailing_commas_and_duplicate_keys(tmp_path, monkeypatch):
    text = '{"a": "// not a comment, ]", /* block\n comment */ "b": [1, 2, ], } // end'
    assert json.loads(strip_comments_and_trailing_commas(text)) == {"a": "// not a comment, ]", "b": [1, 2]}
    model = tmp_path / "dup.json"
    model.write_text('{"resources": {"A": {"initialValuesDataType": "UINT8", "initialValues": [1]},'
                     ' "A": {"initialValuesDataType": "UINT8", "initialValues": [2]}}, "dispatchables": {}, "commands": []}')
    result = dispatch(model)
    assert result.exit_code == 2 and "the key 'A' appears twice" in result.stderr
    model.write_text('{"resources": {\n "A": [1,, 2]}}')
    result = dispatch(model)
    assert result.exit_code == 2 and "malformed JSON at line 2" in result.stderr


def test_missing_model_and_bad_options(tmp_path):
    result = dispatch(tmp_path / "nope.json")
    assert result.exit_code == 2 and "no such file" in result.stderr
    assert dispatch(MODELS / "shift_in_place.json", "-i", "0").exit_code == 2
    with pytest.raises(InputError):
        run_model(load_model(MODELS / "shift_in_place.json"), iterations=0)


def test_print_format_matches_cpp_streams():
    assert [format_value(np.float32(v)) for v in (0.1, 1e-7, 123456789.0, -0.0, 100000.0, 1e6)] == [
        "0.1", "1e-07", "1.23457e+08", "-0", "100000", "1e+06"]
    assert format_value(-np.float64("nan")) == "-nan" and format_value(np.float16("-inf")) == "-inf"
    assert format_value(np.int8(-5)) == "-5" and format_value(np.uint64(2**64 - 1)) == str(2**64 - 1)


def test_calc_buffer_tensor_size_as_directmlx():
    assert calc_buffer_tensor_size(8, [3]) == 4  # 3 bytes, rounded up to 4
    assert calc_buffer_tensor_size(16, [2, 3], [0, 1]) == 8  # last element at offset 2: 6 bytes -> 8
    assert calc_buffer_tensor_size(32, [2, 2], [1, 2]) == 16
    assert calc_buffer_tensor_size(4, [3]) == 4  # 12 bits -> 2 bytes -> 4


def test_gpu_backend_missing_is_exit_4(tmp_path, monkeypatch):
    pytest.importorskip("dmlcli.backends.gpu", reason="no GPU backend module in this tree")
    from dmlcli.backends import get_backend
    from dmlcli.errors import BackendUnavailableError

    try:
        get_backend("gpu")
    except BackendUnavailableError:
        monkeypatch.chdir(tmp_path)
        assert dispatch(MODELS / "logical_strided.json", "--backend", "gpu").exit_code == 4
    else:
        pytest.skip("a GPU is usable here; tests/test_gpu*.py cover it")


# ---------------------------------------------------------------- strided JSON tensors in `run`


def test_run_reads_json_tensors_through_strides():
    row = '{"dtype": "uint16", "shape": [2, 3], "strides": [0, 1], "data": [255, 3840, 1]}'
    transposed = '{"dtype": "uint16", "shape": [2, 3], "strides": [1, 2], "data": [1, 4, 2, 5, 3, 6]}'
    result = CliRunner().invoke(cli, ["run", "bit_xor", transposed, row, "--format", "json"])
    assert result.exit_code == 0, result.output
    # transposed reads [[1, 2, 3], [4, 5, 6]]; XOR with the repeated row [255, 3840, 1].
    assert json.loads(result.stdout)["data"] == [[1 ^ 255, 2 ^ 3840, 3 ^ 1], [4 ^ 255, 5 ^ 3840, 6 ^ 1]]


@pytest.mark.parametrize("document,message", [
    ('{"dtype": "uint8", "strides": [1], "data": [1, 2]}', '"strides" needs "shape"'),
    ('{"dtype": "uint8", "shape": [2], "strides": [1, 1], "data": [1, 2]}', "2 strides for 1 dimensions"),
    ('{"dtype": "uint8", "shape": [2], "strides": [-1], "data": [1, 2]}', "stride -1 is not an integer"),
    ('{"dtype": "uint8", "shape": [3], "strides": [1], "data": [1, 2]}', "reach element 2, but only 2 elements"),
])
def test_run_refuses_bad_strides(document, message):
    result = CliRunner().invoke(cli, ["run", "bit_not", document])
    assert result.exit_code == 2 and message in result.stderr


# ---------------------------------------------------------------- a real process


def test_dispatch_as_a_subprocess(tmp_path):
    completed = subprocess.run([sys.executable, "-m", "dmlcli", "dispatch", str(MODELS / "bitwise_broadcast.json")],
                               capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[3:6] == EXPECTED_OUTPUT["bitwise_broadcast.json"]
    assert re.fullmatch(r"Dispatch 'and': 1 iterations, \d+\.\d{4} ms median \(CPU\)", lines[0])
    assert np.load(tmp_path / "xor.npy").shape == (2, 3)


def test_interleaved_views_of_one_buffer_do_not_alias(tmp_path, monkeypatch):
    # A at bytes 0, 2, 4, 6; B at 16, 18, 20, 22; the output at 1, 3, 5, 7 (1-byte guaranteed alignment).
    values = [5, 0, 6, 0, 7, 0, 8, 0] + [0] * 8 + [5, 0, 9, 0, 7, 0, 1, 0]
    every_other = {"Strides": [2]}
    desc = {"ATensor": tensor("UINT8", [4], **every_other), "BTensor": tensor("UINT8", [4], **every_other),
            "OutputTensor": tensor("UINT8", [4], GuaranteedBaseOffsetAlignment=1, **every_other)}
    bindings = {"ATensor": "M", "BTensor": {"name": "M", "elementOffset": 16},
                "OutputTensor": {"name": "M", "elementOffset": 1}}
    result = run_generated(tmp_path, monkeypatch, {"M": buffer("UINT8", values)},
                           {"eq": {"type": "DML_OPERATOR_ELEMENT_WISE_LOGICAL_EQUALS", "desc": desc}},
                           [{"type": "dispatch", "dispatchable": "eq", "bindings": bindings},
                            {"type": "print", "resource": "M"}])
    assert result.exit_code == 0, result.output
    expected = [5, 1, 6, 0, 7, 1, 8, 0] + [0] * 8 + [5, 0, 9, 0, 7, 0, 1, 0]
    assert result.stdout.splitlines() == ["Resource 'M': " + ", ".join(map(str, expected))]


def test_verbose_print_aligns_indices_and_hex_as_dxdispatch():
    from dmlcli.data_types import UINT16
    from dmlcli.dispatch.model import BufferResource
    from dmlcli.dispatch.printing import format_resource

    resource = BufferResource("V", UINT16, struct.pack("<10H", *range(9), 0xABCD), 20)
    lines = format_resource(resource, resource.initial_contents(), verbose=True).splitlines()
    assert lines[0] == "Resource 'V':"
    assert lines[1] == "[ 0] 0 (0x   0)"
    assert lines[10] == "[ 9] 43981 (0xABCD)"


def test_overlap_check_needs_no_offsets_when_there_are_more_elements_than_addresses():
    from dmlcli.io.overlap import overlaps_itself

    assert overlaps_itself((20000, 20000), (1, 1))  # would be 3.2 GB of offsets if listed
    assert overlaps_itself((3, 2), (1, 1))
    assert not overlaps_itself((3, 2), (2, 1))
    assert not overlaps_itself((3, 2), (1, 3))


def test_an_optional_zero_point_left_out_of_a_desc_means_zeros(tmp_path, monkeypatch):
    """QUANTIZE_LINEAR's ZeroPointTensor is _Maybenull_ from 6_2: left out, the output is round(x / scale)."""
    resources = {"X": buffer("FLOAT32", [1.5, -2.5, 300, 7]), "S": buffer("FLOAT32", [1, 1, 1, 1]),
                 "Out": buffer("UINT8", [9, 9, 9, 9])}
    desc = {"InputTensor": tensor("FLOAT32", [4]), "ScaleTensor": tensor("FLOAT32", [4]),
            "OutputTensor": tensor("UINT8", [4])}
    commands = [{"type": "dispatch", "dispatchable": "q",
                 "bindings": {"InputTensor": "X", "ScaleTensor": "S", "OutputTensor": "Out"}},
                {"type": "print", "resource": "Out"}]
    model = {"q": {"type": "DML_OPERATOR_ELEMENT_WISE_QUANTIZE_LINEAR", "desc": desc}}
    result = run_generated(tmp_path, monkeypatch, resources, model, commands)
    assert result.exit_code == 0, result.output
    # 1.5 and -2.5 round half to even (2, -2 saturates to 0), 300 saturates to 255.
    assert result.stdout.splitlines() == ["Resource 'Out': 2, 0, 255, 7"]
    older = run_generated(tmp_path, monkeypatch, resources, model, commands, "--feature-level", "6_0")
    assert older.exit_code == 3 and "may be left out only from DML_FEATURE_LEVEL_6_2" in older.stderr
