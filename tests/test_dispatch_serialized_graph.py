"""DxDispatch's `dmlSerializedGraph` dispatchables: serialized DirectML graphs (FlatBuffers) run as graphs of
dmlcli's operators, and hostile graph files refused.

Expected values are worked out here: the shared model's with ONNX Runtime from the ONNX model it was made from
(and with NumPy from its .bin constants), the graphs written here (tests/serialized_graphs.py) with NumPy.
Hostile files exit 2 (a DirectML rule broken by a well-formed graph: 3) with one line and write nothing.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings, strategies as st

from dmlcli.cli import cli
from dmlcli.dispatch import load_model, run_model

from conftest import REPO, SHARED
import serialized_graphs as sg
from serialized_graphs import floats, graph_file, several_nodes, several_nodes_model, tensor

SHARED_MODELS = SHARED / "dxdispatch_models"
MODEL = "dmlSerializedGraph_matmul_add.json"
PARTITION = SHARED_MODELS / "matmul_add" / "Partition_0.bin"


def dispatch(*args):
    return CliRunner().invoke(cli, ["dispatch", *[str(a) for a in args]])


def printed(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if not line.startswith("Dispatch '")]


def one_line_error(result, code: int, *words: str) -> None:
    assert result.exit_code == code, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dmlcli: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def resource_line(name: str, values) -> str:
    """DxDispatch's print of FLOAT32 values: C++'s `<<`, six significant digits (%g)."""
    return f"Resource '{name}': " + ", ".join(format(float(v), ".6g") for v in np.asarray(values).ravel())


# ---------------------------------------------------------------- the shared model


def _model_input() -> np.ndarray:
    # dmlSerializedGraph_matmul_add.json: model_input is { "valueCount": 5, "value": 1.5 }, FLOAT32.
    model = json.loads((SHARED_MODELS / MODEL).read_text())
    values = model["resources"]["model_input"]["initialValues"]
    return np.full((1, values["valueCount"]), values["value"], dtype=np.float32)


def test_the_shared_graph_prints_what_onnx_runtime_computes_from_its_onnx_source(shared_dir, tmp_path, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(SHARED_MODELS / "matmul_add" / "matmul_add.onnx"),
                                   providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"model_input": _model_input()})
    monkeypatch.chdir(tmp_path)
    result = dispatch(SHARED_MODELS / MODEL)
    assert result.exit_code == 0, result.output
    assert printed(result) == [resource_line("model_output", expected)]
    assert result.stdout.splitlines()[0].startswith("Dispatch 'matmul_add': 1 iterations, ")
    assert list(tmp_path.iterdir()) == []


def test_the_shared_graph_gives_matmul_plus_add_of_its_bin_constants_bit_for_bit(shared_dir, tmp_path):
    b = np.fromfile(SHARED_MODELS / "matmul_add" / "matmul_b_tensor.bin", dtype="<f4").reshape(5, 5)
    c = np.fromfile(SHARED_MODELS / "matmul_add" / "add_b_tensor.bin", dtype="<f4")
    expected = (_model_input().astype(np.float64) @ b + c).astype(np.float32)  # exact: 1.5 * 1.5 * 5 + 1
    run = run_model(load_model(SHARED_MODELS / MODEL, output_dir=tmp_path), emit=lambda line: None)
    assert bytes(run.buffers["model_output"]) == expected.tobytes()


def test_the_reader_finds_the_onnx_models_inputs_outputs_and_initialisers(shared_dir):
    onnx = pytest.importorskip("onnx")
    from dmlcli.dispatch.serialized_graph.reader import read_graph

    source = onnx.load(str(SHARED_MODELS / "matmul_add" / "matmul_add.onnx"))
    graph = read_graph(PARTITION.read_bytes(), "Partition_0.bin")
    assert graph.input_names == tuple(i.name for i in source.graph.input)
    assert graph.output_names == tuple(o.name for o in source.graph.output)
    constants = {node.constant.name: node for node in graph.nodes if node.constant is not None}
    assert set(constants) == {i.name for i in source.graph.initializer}
    (operator,) = [node for node in graph.nodes if node.operator is not None]
    # MatMul then Add, fused by ONNX Runtime's DirectML provider into one GEMM: A @ B + C.
    assert operator.operator.type_name == "DML_OPERATOR_GEMM"
    assert operator.input_names[0] == "model_input" and operator.output_names == ("model_output",)
    fed = dict(zip(operator.input_names, operator.operator.inputs))
    for initialiser in source.graph.initializer:
        (edge,) = constants[initialiser.name].output_names
        assert np.prod(fed[edge].sizes) == np.prod(initialiser.dims)
    assert dict(operator.operator.attributes) == {"TransA": 0, "TransB": 0, "Alpha": 1.0, "Beta": 1.0}


def test_the_shared_graph_runs_in_a_real_process(shared_dir, tmp_path):
    result = subprocess.run([sys.executable, "-m", "dmlcli", "dispatch", str(SHARED_MODELS / MODEL), "--no-timing"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [resource_line("model_output", [12.25] * 5)]  # 1.5 * 1.5 * 5 + 1


# ---------------------------------------------------------------- a graph of several nodes


def several_nodes_expected() -> dict[str, np.ndarray]:
    x = np.array(sg.X, np.float32).reshape(2, 3)
    total = x + np.array(sg.BIAS, np.float32).reshape(2, 3)
    product = total * np.array(sg.SCALE, np.float32)  # the zero strides repeat scale on each row
    clipped = np.clip(product, np.float32(-1.5), np.float32(1.5))
    gemm = np.float32(0.5) * (np.maximum(total, 0).astype(np.float64) @ np.array(sg.W, np.float64).reshape(3, 2))
    leaky = np.where(gemm < 0, gemm * np.float64(np.float32(0.1)), gemm).astype(np.float32)
    return {"Prod": product, "Clipped": clipped, "G": leaky}


def test_the_expected_values_by_hand():
    expected = several_nodes_expected()
    assert expected["Prod"].ravel().tolist() == [3, 3, 2.5, -14, -9, -5.5]
    assert expected["G"].ravel().tolist() == pytest.approx([13.25, -1.65, 13.5, 18])


def test_a_graph_of_several_nodes_runs_each_node_and_edge(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    expected = several_nodes_expected()
    result = dispatch(several_nodes_model(tmp_path / "m"), "--no-timing")
    assert result.exit_code == 0, result.output
    assert printed(result) == [resource_line(name, expected[name]) for name in ("Prod", "Clipped", "G")] + [
        f"Resource 'G' written to '{tmp_path}/gemm.npy'"]
    np.testing.assert_allclose(np.load(tmp_path / "gemm.npy"), expected["G"], rtol=1e-6)


def test_the_api_gives_the_final_buffers_and_iterations_time_the_whole_graph(tmp_path):
    expected = several_nodes_expected()
    lines = []
    model = load_model(several_nodes_model(tmp_path / "m"), output_dir=tmp_path)
    run = run_model(model, iterations=3, warmup=1, emit=lines.append)
    assert bytes(run.buffers["Prod"]) == expected["Prod"].tobytes()  # exact operators: bit for bit
    assert bytes(run.buffers["Clipped"]) == expected["Clipped"].tobytes()
    assert len(run.timings) == 1 and run.timings[0].sample_count == 3
    assert lines[0].startswith("Dispatch 'graph': 3 iterations, ") and lines[0].endswith(" ms median (CPU)")


# ---------------------------------------------------------------- hostile and malformed graphs


@pytest.fixture
def shared_copy(shared_dir, tmp_path, monkeypatch):
    """The shared model in a folder of its own, with a writeFile added (so that 'nothing written' can fail)."""
    folder = tmp_path / "model"
    shutil.copytree(SHARED_MODELS / "matmul_add", folder / "matmul_add")
    model = json.loads((SHARED_MODELS / MODEL).read_text())
    model["commands"].append({"type": "writeFile", "resource": "model_output", "targetPath": "out.npy"})
    (folder / MODEL).write_text(json.dumps(model))
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    return folder / MODEL


def u32(data, position: int) -> int:
    return struct.unpack_from("<I", data, position)[0]


def field_position(data, table: int, slot: int) -> int:
    """Where a table's field is (read here by hand, independently of dmlcli's reader): its vtable entry."""
    vtable = table - struct.unpack_from("<i", data, table)[0]
    return table + struct.unpack_from("<H", data, vtable + slot)[0]


def node_position(data, index: int) -> int:
    nodes = field_position(data, u32(data, 0), 4)
    vector = nodes + u32(data, nodes)
    element = vector + 4 + 4 * index
    return element + u32(data, element)


def patched(position_of, value: bytes):
    def patch(data: bytearray) -> bytearray:
        position = position_of(data)
        data[position:position + len(value)] = value
        return data
    return patch


def _nodes_length(data) -> int:
    nodes = field_position(data, u32(data, 0), 4)
    return nodes + u32(data, nodes)


def _node_name_length(data) -> int:
    name = field_position(data, node_position(data, 2), 8)
    return name + u32(data, name)


HOSTILE_BYTES = {
    "empty": (lambda data: bytearray(), "the root table: an offset or length points outside the file's 0 bytes"),
    "three bytes": (lambda data: data[:3], "outside the file's 3 bytes"),
    "cut to 100 bytes": (lambda data: data[:100], "outside the file's 100 bytes"),
    "cut to 600 bytes": (lambda data: data[:600], "outside the file's 600 bytes"),
    "root offset past the end": (patched(lambda d: 0, struct.pack("<I", 4096)), "the root table: an offset"),
    "nodes length past the end": (patched(_nodes_length, struct.pack("<I", 2**31 - 1)),
                                  "nodes: its length 2147483647 needs more than the file's 1152 bytes"),
    "a name running past the end": (patched(_node_name_length, struct.pack("<I", 10**6)),
                                    "nodes[2].name: an offset or length points outside the file's 1152 bytes"),
    "an unknown node kind": (patched(lambda d: field_position(d, node_position(d, 2), 4), b"\x07"),
                             "nodes[2] ('model_output_dmlEp_0').desc: unknown NodeDesc type code 7"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_BYTES))
def test_a_damaged_graph_file_exits_2_in_one_line_and_writes_nothing(name, shared_copy):
    damage, words = HOSTILE_BYTES[name]
    path = shared_copy.parent / "matmul_add" / "Partition_0.bin"
    path.write_bytes(bytes(damage(bytearray(path.read_bytes()))))
    result = dispatch(shared_copy)
    one_line_error(result, 2, "sourcePath 'matmul_add/Partition_0.bin'", words)
    assert list(Path.cwd().iterdir()) == []


def _node(nodes: list[dict], name: str) -> dict:
    return next(node for node in nodes if node["name"] == name)


def _change(**changes):
    """A change to several_nodes(): {node name: {key: new value}}; a key 'order' swaps two nodes."""
    def change(nodes):
        for name, fields in changes.items():
            if name == "order":
                first, second = (nodes.index(_node(nodes, n)) for n in fields)
                nodes[first], nodes[second] = nodes[second], nodes[first]
            else:
                _node(nodes, name).update(fields)
        return nodes
    return change


def _join_node(inputs: list[str]) -> dict:
    """JOIN of two [1, 1, 2, 3] tensors along axis 2: InputTensors, a tensor array, with InputCount."""
    return {"name": "join", "op": "DML_OPERATOR_JOIN", "inputs": inputs, "outputs": ["joined"],
            "in": [tensor([1, 1, 2, 3])] * 2, "out": [tensor([1, 1, 4, 3])],
            "attributes": [("InputCount", "UInt32", 2), ("Axis", "UInt32", 2)]}


def test_a_tensor_array_takes_the_remaining_tensors_in_order(tmp_path, monkeypatch):
    # joined = JOIN(x, bias) along axis 2: x's two rows, then the raw constant's.
    monkeypatch.chdir(tmp_path)
    nodes = [several_nodes()[0], _join_node(["x", "bias"])]
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "graph.bin").write_bytes(graph_file(nodes, ["x"], ["joined"]))
    model = {"resources": {"X": {"initialValuesDataType": "FLOAT32", "initialValues": sg.X},
                           "J": {"initialValuesDataType": "FLOAT32", "initialValues": [0] * 12}},
             "dispatchables": {"graph": {"type": "dmlSerializedGraph", "sourcePath": "graph.bin"}},
             "commands": [{"type": "dispatch", "dispatchable": "graph", "bindings": {"x": "X", "joined": ["J"]}},
                          {"type": "print", "resource": "J"}]}
    (folder / "model.json").write_text(json.dumps(model))
    result = dispatch(folder / "model.json", "--no-timing")
    assert result.exit_code == 0, result.output
    assert printed(result) == [resource_line("J", sg.X + sg.BIAS)]


MALFORMED_GRAPHS = {
    "an input no node makes": (_change(mul={"inputs": ["sum", "nope"]}), 2,
                               "nodes[3] ('mul'): inputNames[1] 'nope' is neither a graph input nor an output of an "
                               "earlier node"),
    "a consumer before its producer": (_change(order=("add", "mul")), 2, "inputNames[0] 'sum' is neither"),
    "more input names than tensors": (_change(gemm={"inputs": ["relu_out", "w", "", "x"]}), 2,
                                      "inputNames has 4 names and inputs 2 tensor descs, more than "
                                      "DML_OPERATOR_GEMM's input tensors ATensor, BTensor, CTensor take"),
    "fewer tensor descs than names": (_change(gemm={"in": [tensor([1, 1, 2, 3])]}), 2,
                                      "inputs has 1 tensor descs, fewer than the names in inputNames"),
    "an unknown operator": (_change(relu={"op": "DML_OPERATOR_NOT_AN_OPERATOR"}), 2, "nodes[4] ('relu'): "),
    "an unknown attribute": (_change(clip={"attributes": [("Min", "Float32", -1.0), ("Max", "Float32", 1.0),
                                                          ("Gamma", "Float32", 2.0)]}), 2, "unknown key 'Gamma'"),
    "an edge read as another type": (_change(relu={"in": [tensor([1, 1, 2, 3], "FLOAT16")],
                                                   "out": [tensor([1, 1, 2, 3], "FLOAT16")]}), 2,
                                     "InputTensor reads 'sum' as FLOAT16, but its producer writes FLOAT32"),
    "an edge read past its producer's bytes": (_change(relu={"in": [tensor([1, 1, 2, 3], total=64)]}), 2,
                                               "reads 64 bytes (TotalTensorSizeInBytes) of 'sum', but its producer's "
                                               "tensor has 24"),
    "a constant shorter than its tensor": (_change(mul={"in": [tensor([1, 1, 2, 3]), tensor([1, 1, 2, 3])]}), 2,
                                           "BTensor reads 24 bytes (TotalTensorSizeInBytes) from the constant "
                                           "'scale_out', which holds 12"),
    "a node breaking its operator's rules": (_change(mul={"out": [tensor([1, 1, 3, 2])]}), 3, "nodes[3] ('mul')"),
    "a nameless node": (_change(relu={"name": ""}), 2, "nodes[4]: a node needs a name"),
    "a constant node with inputs": (_change(bias_node={"inputs": ["x"]}), 2, "a constant node has no inputs"),
    "an attribute naming a tensor": (_change(clip={"attributes": [("Min", "Float32", -1.0), ("Max", "Float32", 1.0),
                                                                  ("OutputTensor", "UInt32", 2)]}), 2,
                                     "attribute 'OutputTensor' names a tensor field"),
    "an unnamed tensor of an array": (lambda nodes: nodes + [_join_node(["x", ""])], 2,
                                      "inputs has 2 tensor descs, but inputNames does not name each tensor of "
                                      "InputTensors"),
    "an output made twice": (_change(relu={"outputs": ["sum"]}), 2, "outputNames[0] 'sum' is also nodes[2] ('add')'s "
                                                                     "output"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED_GRAPHS))
def test_a_malformed_graph_is_refused_naming_the_node_and_field(name, tmp_path, monkeypatch):
    change, code, words = MALFORMED_GRAPHS[name]
    monkeypatch.chdir(tmp_path)
    result = dispatch(several_nodes_model(tmp_path / "m", nodes=change(several_nodes())))
    one_line_error(result, code, words)
    assert not (tmp_path / "gemm.npy").exists()


def test_a_graph_output_no_node_makes_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "m"
    path = several_nodes_model(folder)
    (folder / "graph.bin").write_bytes(graph_file(several_nodes(), ["x", "w"], ["prod", "clipped", "gemm_out", "zzz"]))
    one_line_error(dispatch(path), 2, "graphOutputNames[3] 'zzz' is not an output of any node")


@pytest.mark.parametrize("name, link", [("../outside/scale", False), ("/etc/passwd", False), ("scale", True)])
def test_a_constant_outside_the_models_folder_is_refused(name, link, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "scale.bin").write_bytes(floats(*sg.SCALE))
    nodes = _change(scale_node={"constant": name})(several_nodes())
    path = several_nodes_model(tmp_path / "m", nodes=nodes)
    if link:
        (tmp_path / "m" / "scale.bin").unlink()
        (tmp_path / "m" / "scale.bin").symlink_to(tmp_path / "outside" / "scale.bin")
    result = dispatch(path)
    one_line_error(result, 2, "nodes[1] ('scale_node'): the constant's file", "is outside the model's folder",
                   "--allow-paths-outside")
    assert not (tmp_path / "gemm.npy").exists()
    if name != "/etc/passwd":  # a model you trust may read there
        assert dispatch(path, "--allow-paths-outside", "--no-timing").exit_code == 0


def test_a_missing_constant_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = several_nodes_model(tmp_path / "m")
    (tmp_path / "m" / "scale.bin").unlink()
    one_line_error(dispatch(path), 2, "the constant's file 'scale.bin': no such file")


def test_objects_shared_over_and_over_are_refused_quickly(tmp_path, monkeypatch):
    # 200,000 graph inputs all naming one 1000-character string: 800 KB of file, 200 MB of names to read.
    import flatbuffers

    from dmlcli.dispatch.serialized_graph.generated import dml_graph_generated as fb

    builder = flatbuffers.Builder(1 << 20)
    name = builder.CreateString("n" * 1000)
    fb.DmlGraphDescStartGraphInputNamesVector(builder, 200_000)
    for _ in range(200_000):
        builder.PrependUOffsetTRelative(name)
    names = builder.EndVector()
    fb.DmlGraphDescStart(builder)
    fb.DmlGraphDescAddGraphInputNames(builder, names)
    builder.Finish(fb.DmlGraphDescEnd(builder))
    monkeypatch.chdir(tmp_path)
    path = several_nodes_model(tmp_path / "m")
    (tmp_path / "m" / "graph.bin").write_bytes(bytes(builder.Output()))
    start = time.perf_counter()
    result = dispatch(path)
    assert time.perf_counter() - start < 20
    one_line_error(result, 2, "objects shared over and over")


BINDINGS = {"x": "X", "w": "W", "prod": "Prod", "clipped": "Clipped", "gemm_out": "G"}
BINDING_ERRORS = {
    "a name the graph lacks": ({**BINDINGS, "nope": "X"}, 2, "the graph has no input or output named 'nope' (inputs: "
                                                            "'x', 'w'; outputs: 'prod', 'clipped', 'gemm_out')"),
    "a constant bound": ({**BINDINGS, "scale_node": "X"}, 2, "scale_node: is a constant of the graph"),
    "an output left unbound": ({k: v for k, v in BINDINGS.items() if k != "clipped"}, 2,
                               "nothing bound for graph output 'clipped'"),
    "an input left unbound": ({k: v for k, v in BINDINGS.items() if k != "w"}, 2, "nothing bound for graph input 'w'"),
    "a resource too small": ({**BINDINGS, "w": "G"}, 3, "16 bytes are bound", "TotalTensorSizeInBytes is 24"),
    "an output over an input": ({**BINDINGS, "prod": "X"}, 3, "graph output 'prod' and graph input 'x' share bytes "
                                                             "of buffer 'X'"),
    "two outputs over one buffer": ({**BINDINGS, "clipped": "Prod"}, 3, "graph output 'prod' and graph output "
                                                                       "'clipped' share bytes of buffer 'Prod'"),
    "an unknown resource": ({**BINDINGS, "x": "nope"}, 2, "there is no resource named 'nope'"),
}


@pytest.mark.parametrize("name", sorted(BINDING_ERRORS))
def test_binding_rules(name, tmp_path, monkeypatch):
    bindings, code, *words = BINDING_ERRORS[name]
    monkeypatch.chdir(tmp_path)
    result = dispatch(several_nodes_model(tmp_path / "m", bindings=bindings))
    one_line_error(result, code, *words)
    assert not (tmp_path / "gemm.npy").exists()


def test_the_dispatchable_takes_no_bindings_and_no_unknown_keys(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = several_nodes_model(tmp_path / "m")
    model = json.loads(path.read_text())
    model["dispatchables"]["graph"]["bindings"] = {"x": "X"}
    path.write_text(json.dumps(model))
    one_line_error(dispatch(path), 2, "a dmlSerializedGraph dispatchable takes no \"bindings\"")
    del model["dispatchables"]["graph"]["bindings"]
    model["dispatchables"]["graph"]["desc"] = {}
    path.write_text(json.dumps(model))
    one_line_error(dispatch(path), 2, "unknown key 'desc' in the dmlSerializedGraph dispatchable")


def test_without_flatbuffers_a_graph_exits_4_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = several_nodes_model(tmp_path / "m")
    from dmlcli.dispatch.serialized_graph import generated

    # As if never installed: its module blocked, the generated module (which imports it) not yet loaded.
    monkeypatch.setitem(sys.modules, "flatbuffers", None)
    monkeypatch.delitem(sys.modules, "dmlcli.dispatch.serialized_graph.generated.dml_graph_generated", raising=False)
    monkeypatch.delattr(generated, "dml_graph_generated", raising=False)
    one_line_error(dispatch(path), 4, "pip install flatbuffers")


def test_flatbuffers_is_loaded_only_for_a_serialized_graph(tmp_path):
    from test_startup_imports import modules_after

    plain, _ = modules_after("dispatch", str(REPO / "tests" / "models" / "bitwise_broadcast.json"), "--output-dir",
                             str(tmp_path), "--no-timing")
    assert "flatbuffers" not in plain and "dmlcli.dispatch.serialized_graph" not in plain
    graph, stdout = modules_after("dispatch", str(several_nodes_model(tmp_path / "m")), "--output-dir", str(tmp_path),
                                  "--no-timing")
    assert "Resource 'Prod': 3, 3, 2.5, -14, -9, -5.5" in stdout
    assert "flatbuffers" in graph


# ---------------------------------------------------------------- fuzzing the reader

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SIZE = 1152  # Partition_0.bin's length
DAMAGE = st.fixed_dictionaries({
    "bytes": st.lists(st.tuples(st.integers(0, SIZE - 1), st.integers(0, 255)), max_size=6),
    "words": st.lists(st.tuples(st.integers(0, SIZE - 4), st.sampled_from([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, SIZE])
                                | st.integers(0, 2**32 - 1)), max_size=2),
    "cut": st.none() | st.integers(0, SIZE),
})


@pytest.fixture(scope="module")
def fuzz_folder(tmp_path_factory):
    if not SHARED.is_dir():
        pytest.skip("needs ../shared")
    folder = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(SHARED_MODELS / "matmul_add", folder / "matmul_add")
    model = json.loads((SHARED_MODELS / MODEL).read_text())
    model["commands"].append({"type": "writeFile", "resource": "model_output", "targetPath": "out.npy"})
    (folder / MODEL).write_text(json.dumps(model))
    (folder / "out").mkdir()
    return folder


@FUZZ
@given(damage=DAMAGE)
def test_damaged_bytes_of_the_real_graph_run_or_are_refused_in_one_line(damage, fuzz_folder):
    data = bytearray(PARTITION.read_bytes())
    for position, value in damage["bytes"]:
        data[position] = value
    for position, value in damage["words"]:
        data[position:position + 4] = struct.pack("<I", value)
    if damage["cut"] is not None:
        data = data[:damage["cut"]]
    (fuzz_folder / "matmul_add" / "Partition_0.bin").write_bytes(bytes(data))
    out = fuzz_folder / "out"
    start = time.perf_counter()
    result = dispatch(fuzz_folder / MODEL, "--no-timing", "--output-dir", out)
    assert time.perf_counter() - start < 10
    event(f"exit {result.exit_code}")
    # 3: a graph that reads but breaks its operator's rules (sizes that no longer match, say).
    assert result.exit_code in (0, 2, 3), result.output
    if result.exit_code == 0:
        assert result.stdout.splitlines()[0].startswith("Resource 'model_output': ")
        (out / "out.npy").unlink()
    else:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("dmlcli: error: "), result.stderr
        assert list(out.iterdir()) == []
