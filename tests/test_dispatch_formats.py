"""DxDispatch's other formats: ONNX dispatchables (ONNX Runtime), deferred resources, image resources and image
outputs (Pillow), DmlCompileGraph, HLSL refused, and hostile files of each kind refused.

Every expected value is worked out here by hand or with plain NumPy / Pillow, never with dmlcli's kernels.
"""

from __future__ import annotations

import json
import math
import os
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings, strategies as st

import dmlcli
from dmlcli.cli import cli

from conftest import SHARED

SHARED_MODELS = SHARED / "dxdispatch_models"
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
Image = pytest.importorskip("PIL.Image")
from onnx import TensorProto, helper  # noqa: E402


def dispatch(*args):
    return CliRunner().invoke(cli, ["dispatch", *[str(a) for a in args]])


def printed(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if not line.startswith("Dispatch '")]


def one_line_error(result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dmlcli: error: ")
    assert "Traceback" not in result.stderr


def _gpu_usable() -> bool:
    try:
        from dmlcli.backends import gpu

        gpu.create()
    except Exception:  # noqa: BLE001 - no CuPy or no device
        return False
    return True


def _backend_or_skip(backend: str) -> None:
    if backend == "gpu":
        if not _gpu_usable():
            pytest.skip("needs a usable GPU (CuPy and a device)")
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            pytest.skip("needs onnxruntime-gpu (ONNX Runtime's CUDA provider)")


# ---------------------------------------------------------------- the shared models

# onnx_gemm: Out = A0 @ B0 + A1 @ B1 with A = 1..6 as 3x2 and B = 1..8 as 2x4 (both pairs equal).
_A = [[1, 2], [3, 4], [5, 6]]
_B = [[1, 2, 3, 4], [5, 6, 7, 8]]
_GEMM = [2 * sum(_A[i][k] * _B[k][j] for k in range(2)) for i in range(3) for j in range(4)]
# onnx_dynamic_shapes: y = concat(x0, x1) along axis 0, x0 from a = 1..6 and x1 from b = 7..12, read as
# [1, 2] (first two values), then [3, 2] (all six); c holds 12 zeros before; deferredY takes the [6, 2] result.
FORMAT_MODELS = {
    "onnx_gemm.json": ["Resource 'Out': " + ", ".join(str(v) for v in _GEMM)],
    "onnx_dynamic_shapes.json": [
        "Resource 'c': 1, 2, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0",
        "Resource 'c': 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12",
        "Resource 'deferredY': 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12",
    ],
    "image_io.json": ["Resource 'output' written to '{folder}/output.png'"],
}


def test_the_gemm_values_by_hand():
    assert _GEMM[:4] == [22, 28, 34, 40] and _GEMM[-1] == 2 * (5 * 4 + 6 * 8)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("name", ["onnx_gemm.json", "onnx_dynamic_shapes.json"])
def test_shared_onnx_model_prints_the_hand_worked_values(name, backend, shared_dir, tmp_path, monkeypatch):
    _backend_or_skip(backend)
    monkeypatch.chdir(tmp_path)
    result = dispatch(SHARED_MODELS / name, "--backend", backend)
    assert result.exit_code == 0, result.output
    assert printed(result) == FORMAT_MODELS[name]
    timing = [line for line in result.stdout.splitlines() if line.startswith("Dispatch '")]
    assert len(timing) == (1 if name == "onnx_gemm.json" else 3)
    assert list(tmp_path.iterdir()) == []


def _grayscale_expected(path: Path) -> np.ndarray:
    """image_io.json by hand: the JPEG as Pillow decodes it, scaled to 512 x 512 (bicubic), each component / 255
    in float32, weighted 0.2989 R + 0.5870 G + 0.1140 B (a 1x1 convolution), written as trunc(clamp * 255)."""
    image = Image.open(path).convert("RGB")
    if image.size != (512, 512):
        image = image.resize((512, 512), Image.Resampling.BICUBIC)
    rgb = np.asarray(image).astype(np.float32) / np.float32(255)
    weights = np.array([0.2989, 0.5870, 0.1140], dtype=np.float32)
    grey = (rgb.astype(np.float64) @ weights.astype(np.float64)).astype(np.float32)
    return np.trunc(np.clip(grey, 0, 1) * np.float32(255)).astype(np.int16)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_shared_image_model_writes_the_grayscale_png(backend, shared_dir, tmp_path, monkeypatch):
    _backend_or_skip(backend)
    monkeypatch.chdir(tmp_path)
    result = dispatch(SHARED_MODELS / "image_io.json", "--no-timing", "--backend", backend)
    assert result.exit_code == 0, result.output
    assert printed(result) == [line.format(folder=tmp_path) for line in FORMAT_MODELS["image_io.json"]]
    written = Image.open(tmp_path / "output.png")
    assert written.mode == "L" and written.size == (512, 512)
    # The sum's rounding may differ from float64's in the last bit, moving a pixel across a step of 1/255.
    difference = np.abs(np.asarray(written).astype(np.int16) - _grayscale_expected(SHARED_MODELS / "chihuahua.jpg"))
    assert difference.max() <= 1 and (difference == 0).mean() > 0.99


def test_hlsl_models_are_refused_saying_they_need_the_shader_compiler(shared_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("hlsl_add_fp16.json", "hlsl_add_fp32.json"):
        result = dispatch(SHARED_MODELS / name)
        one_line_error(result, 2)
        assert "need DirectX's shader compiler (dxc)" in result.stderr
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- models written here


def write_model(folder: Path, resources: dict, dispatchables: dict, commands: list, name="model.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps({"resources": resources, "dispatchables": dispatchables, "commands": commands}))
    return path


def buffer(data_type: str, values) -> dict:
    return {"initialValuesDataType": data_type, "initialValues": values}


def onnx_file(path: Path, nodes, inputs, outputs, initializers=()) -> str:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path.name


def float_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def relu_model(folder: Path, shape=("N", 2)) -> str:
    return onnx_file(folder / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])], [float_info("x", list(shape))],
                     [float_info("y", list(shape))])


def test_free_dimension_name_override_fixes_the_shape(folder):
    # x is [N, 2]; N overridden to 3, so x reads all six values and y (bound with no shape) is static too.
    dispatchables = {"relu": {"type": "onnx", "sourcePath": relu_model(folder),
                              "freeDimensionNameOverrides": {"N": 3}, "graphOptimizationLevel": 0,
                              "sessionOptionsConfigEntries": {"session.intra_op.allow_spinning": "0"}}}
    resources = {"X": buffer("FLOAT32", [-1, 2, -3, 4, -5, 6]), "Y": buffer("FLOAT32", [9] * 8)}
    commands = [{"type": "dispatch", "dispatchable": "relu", "bindings": {"x": "X", "y": "Y"}},
                {"type": "print", "resource": "Y"}]
    result = dispatch(write_model(folder, resources, dispatchables, commands), "--no-timing")
    assert result.exit_code == 0, result.output
    assert printed(result) == ["Resource 'Y': 0, 2, 0, 4, 0, 6, 9, 9"]


def test_without_override_an_input_free_dimension_is_one_and_a_bound_output_needs_a_shape(folder):
    dispatchables = {"relu": {"type": "onnx", "sourcePath": relu_model(folder)}}
    resources = {"X": buffer("FLOAT32", [-1, 2, -3, 4]), "Y": buffer("FLOAT32", [9, 9, 9, 9])}
    commands = [{"type": "dispatch", "dispatchable": "relu", "bindings": {"x": "X", "y": "Y"}}]
    result = dispatch(write_model(folder, resources, dispatchables, commands))
    one_line_error(result, 2)
    assert "output 'y': binding resource 'Y' is invalid because the tensor shape [?, 2] is not static" in result.stderr
    commands[0]["bindings"]["y"] = {"name": "Y", "shape": [1, 2]}
    commands.append({"type": "print", "resource": "Y"})
    result = dispatch(write_model(folder, resources, dispatchables, commands), "--no-timing")
    assert result.exit_code == 0, result.output
    assert printed(result) == ["Resource 'Y': 0, 2, 9, 9"]  # x fixed to [1, 2]: the first two values


def test_an_unbound_input_is_zeros_and_iterations_compound(folder):
    # y = x + w where w is an unbound input (zeros, as DxDispatch's fresh buffer), then y = y + 1 in place.
    name = onnx_file(folder / "add.onnx", [helper.make_node("Add", ["x", "w"], ["y"])],
                     [float_info("x", [3]), float_info("w", [3])], [float_info("y", [3])])
    one = onnx_file(folder / "inc.onnx", [helper.make_node("Add", ["x", "one"], ["y"])], [float_info("x", [3])],
                    [float_info("y", [3])], [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    dispatchables = {"add": {"type": "onnx", "sourcePath": name}, "inc": {"type": "onnx", "sourcePath": one}}
    resources = {"X": buffer("FLOAT32", [1.5, -2, 3]), "Y": buffer("FLOAT32", [0, 0, 0])}
    commands = [{"type": "dispatch", "dispatchable": "add", "bindings": {"x": "X", "y": "Y"}},
                {"type": "print", "resource": "Y"},
                {"type": "dispatch", "dispatchable": "inc", "bindings": {"x": "Y", "y": "Y"}},
                {"type": "print", "resource": "Y"}]
    result = dispatch(write_model(folder, resources, dispatchables, commands), "--no-timing", "-i", "3")
    assert result.exit_code == 0, result.output
    assert printed(result) == ["Resource 'Y': 1.5, -2, 3", "Resource 'Y': 4.5, 1, 6"]


def test_a_deferred_output_is_written_with_the_shape_and_type_it_came_with(folder):
    # Shape of x as INT64: deferred, it becomes an INT64 [2] tensor (4, 2), written to .npy and .bin.
    name = onnx_file(folder / "m" / "shape.onnx", [helper.make_node("Shape", ["x"], ["s"])], [float_info("x", [4, 2])],
                     [helper.make_tensor_value_info("s", TensorProto.INT64, [2])])
    resources = {"X": buffer("FLOAT32", [0] * 8), "S": {"initialValues": "deferred"}}
    commands = [{"type": "dispatch", "dispatchable": "shape", "bindings": {"x": "X", "s": "S"}},
                {"type": "print", "resource": "S", "verbose": True},
                {"type": "writeFile", "resource": "S", "targetPath": "out/s.npy"},
                {"type": "writeFile", "resource": "S", "targetPath": "out/s.bin"}]
    model = write_model(folder / "m", resources, {"shape": {"type": "onnx", "sourcePath": name}}, commands)
    result = dispatch(model, "--no-timing")
    assert result.exit_code == 0, result.output
    assert printed(result)[:3] == ["Resource 'S':", "[0] 4 (0x               4)", "[1] 2 (0x               2)"]
    written = np.load(folder / "out" / "s.npy")
    assert written.dtype == np.int64 and written.tolist() == [4, 2]
    assert (folder / "out" / "s.bin").read_bytes() == struct.pack("<2q", 4, 2)


@pytest.mark.parametrize("change, code, message", [
    (lambda m: m["commands"].insert(0, {"type": "print", "resource": "D"}), 2,
     "resource 'D' is deferred and the dispatch just before this command did not give it contents"),
    (lambda m: m["commands"].insert(1, {"type": "dispatch", "dispatchable": "relu2",
                                        "bindings": {"x": "X", "y": {"name": "Y", "shape": [2]}}}), 2,
     "resource 'D' is deferred and the dispatch just before"),
    (lambda m: m["commands"][0]["bindings"].update(x="D"), 2, "a deferred resource receives an ONNX output"),
    (lambda m: m["commands"][0]["bindings"].update(x={"name": "X", "elementOffset": 4}), 2,
     "ONNX dispatchables do not support binding offsets"),
    (lambda m: m["commands"][0]["bindings"].update(z="X"), 2, "the ONNX model has no input or output 'z' to bind"),
    (lambda m: m["commands"][0]["bindings"].update(x={"name": "X", "shape": [3]}), 3,
     "shape [3] of tensor(float) needs 12 bytes, but resource 'X' holds 8"),
    (lambda m: m.update(commands=[{"type": "dispatch", "dispatchable": "relu",
                                   "bindings": {"x": "X", "y": {"name": "Y", "shape": [1]}}}]), 3,
     "output 'y' came out with shape [2], but its binding to 'Y' has shape [1]"),
    (lambda m: m["dispatchables"]["relu"].update(graphOptimizationLevel=7), 2,
     "graphOptimizationLevel 7 is not one of ONNX Runtime's levels"),
    (lambda m: m["dispatchables"]["relu"].update(sessionOptionsConfigEntries={"ep.context_file_path": "/tmp/x"}), 2,
     "may make ONNX Runtime read or write files"),
    (lambda m: m["dispatchables"]["relu"].update(freeDimensionNameOverrides={"N": -1}), 2,
     "must be an unsigned integer"),
    (lambda m: m["dispatchables"]["relu"].update(sourcePath="../elsewhere.onnx"), 2, "is outside the model's folder"),
    (lambda m: m["dispatchables"]["relu"].update(extra=1), 2, "unknown key 'extra' in the onnx dispatchable"),
    (lambda m: m["resources"].update(D={"initialValues": "later"}), 2, "is not \"deferred\""),
    (lambda m: m["dispatchables"].update(add={"type": "ELEMENT_WISE_IDENTITY", "desc": {
        "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2]}}})
     or m["commands"].append({"type": "dispatch", "dispatchable": "add",
                              "bindings": {"InputTensor": "X", "OutputTensor": "D"}}), 2,
     "the resource is deferred; a deferred resource receives an ONNX dispatchable's output"),
])
def test_onnx_binding_rules(change, code, message, folder):
    name = onnx_file(folder / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])], [float_info("x", [2])],
                     [float_info("y", [2])])
    (folder / "elsewhere.onnx").write_bytes((folder / "relu.onnx").read_bytes())
    document = {"resources": {"X": buffer("FLOAT32", [-1, 1]), "Y": buffer("FLOAT32", [0, 0]),
                              "D": {"initialValuesDataType": "FLOAT32", "initialValues": "deferred"}},
                "dispatchables": {"relu": {"type": "onnx", "sourcePath": name},
                                  "relu2": {"type": "onnx", "sourcePath": name}},
                "commands": [{"type": "dispatch", "dispatchable": "relu", "bindings": {"x": "X", "y": "D"}},
                             {"type": "print", "resource": "D"},
                             {"type": "writeFile", "resource": "D", "targetPath": "d.npy"}]}
    change(document)
    (folder / "m").mkdir()
    path = folder / "m" / "model.json"
    (folder / "m" / name).write_bytes((folder / name).read_bytes())
    path.write_text(json.dumps(document))
    out = folder / "out"
    result = dispatch(path, "--output-dir", out)
    one_line_error(result, code)
    assert message in result.stderr
    assert not out.exists() and result.stdout == ""


def test_the_unchanged_binding_model_runs(folder):
    # The base of test_onnx_binding_rules: relu into a deferred FLOAT32 [2], printed and written.
    name = onnx_file(folder / "m" / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])], [float_info("x", [2])],
                     [float_info("y", [2])])
    model = write_model(folder / "m", {"X": buffer("FLOAT32", [-1, 1]), "D": {"initialValues": "deferred"}},
                        {"relu": {"type": "onnx", "sourcePath": name}},
                        [{"type": "dispatch", "dispatchable": "relu", "bindings": {"x": "X", "y": "D"}},
                         {"type": "print", "resource": "D"}, {"type": "writeFile", "resource": "D", "targetPath": "d.npy"}])
    result = dispatch(model, "--no-timing", "--output-dir", folder / "new" / "out")
    assert result.exit_code == 0, result.output
    assert printed(result)[0] == "Resource 'D': 0, 1"
    assert np.load(folder / "new" / "out" / "d.npy").tolist() == [0.0, 1.0]


def test_onnx_without_the_extra_exits_4_with_the_install_command(folder, monkeypatch):
    name = relu_model(folder)
    model = write_model(folder, {"X": buffer("FLOAT32", [1, 2])}, {"relu": {"type": "onnx", "sourcePath": name}}, [])
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    result = dispatch(model)
    one_line_error(result, 4)
    assert "pip install 'dmlcli[onnx]'" in result.stderr


def test_onnx_on_the_gpu_without_the_cuda_provider_exits_4(folder, shared_dir):
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    if not _gpu_usable():
        pytest.skip("needs a usable GPU for --backend gpu to get as far as ONNX Runtime")
    result = dispatch(SHARED_MODELS / "onnx_gemm.json", "--backend", "gpu")
    one_line_error(result, 4)
    assert "pip install onnxruntime-gpu" in result.stderr


# ---------------------------------------------------------------- hostile ONNX files


def _external_model(path: Path, location: str) -> str:
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", "0"), ("length", "16")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return onnx_file(path, [helper.make_node("Add", ["x", "w"], ["y"])], [float_info("x", [4])],
                     [float_info("y", [4])], [tensor])


@pytest.mark.parametrize("location", ["../secret.bin", "link.bin", "/etc/hostname"])
def test_external_data_outside_the_model_folder_is_refused(location, folder):
    (folder / "secret.bin").write_bytes(struct.pack("<4f", 1, 2, 3, 4))
    (folder / "m").mkdir()
    (folder / "m" / "link.bin").symlink_to(folder / "secret.bin")
    name = _external_model(folder / "m" / "ext.onnx", location)
    model = write_model(folder / "m", {"X": buffer("FLOAT32", [0, 0, 0, 0]), "Y": buffer("FLOAT32", [0, 0, 0, 0])},
                        {"ext": {"type": "onnx", "sourcePath": name}},
                        [{"type": "dispatch", "dispatchable": "ext", "bindings": {"x": "X", "y": "Y"}},
                         {"type": "writeFile", "resource": "Y", "targetPath": "y.bin"}])
    result = dispatch(model, "--output-dir", folder / "out")
    one_line_error(result, 2)
    assert "is outside the ONNX model's folder" in result.stderr
    assert not (folder / "out").exists()


def test_external_data_inside_the_model_folder_is_read(folder):
    (folder / "m").mkdir()
    (folder / "m" / "w.bin").write_bytes(struct.pack("<4f", 1, 2, 3, 4))
    name = _external_model(folder / "m" / "ext.onnx", "w.bin")
    model = write_model(folder / "m", {"X": buffer("FLOAT32", [10, 20, 30, 40]), "Y": buffer("FLOAT32", [0] * 4)},
                        {"ext": {"type": "onnx", "sourcePath": name}},
                        [{"type": "dispatch", "dispatchable": "ext", "bindings": {"x": "X", "y": "Y"}},
                         {"type": "print", "resource": "Y"}])
    result = dispatch(model, "--no-timing")
    assert result.exit_code == 0, result.output
    assert printed(result) == ["Resource 'Y': 11, 22, 33, 44"]


FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(data=st.binary(max_size=300) | st.sampled_from([b"", b"\x08\x08\x12\x00", b"\x0a\xff\xff\xff\xff\x0f"]))
def test_random_bytes_as_an_onnx_file_are_refused_cleanly(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "bad.onnx").write_bytes(data)
    model = write_model(folder, {"X": buffer("FLOAT32", [1])}, {"bad": {"type": "onnx", "sourcePath": "bad.onnx"}},
                        [{"type": "writeFile", "resource": "X", "targetPath": "x.bin"}])
    result = dispatch(model, "--output-dir", folder / "out")
    one_line_error(result, 2)
    assert not (folder / "out").exists()


# ---------------------------------------------------------------- images


def png_file(path: Path, pixels: np.ndarray) -> str:
    Image.fromarray(pixels).save(path)
    return path.name


def identity_model(folder: Path, source: str, channels: int, height: int, width: int, data_type="FLOAT32",
                   target="out.png", scale=1.0, bias=0.0, dimensions=None) -> Path:
    count = channels * height * width
    sizes = [1, channels, height, width]
    tensor = {"DataType": data_type, "Sizes": sizes}
    resources = {"image": {"initialValues": {"sourcePath": source}, "initialValuesDataType": data_type,
                           "resampleSize": sizes},
                 "out": buffer(data_type, {"valueCount": count, "value": 0})}
    dispatchables = {"copy": {"type": "DML_OPERATOR_ELEMENT_WISE_IDENTITY", "dmlCompileType": "DmlCompileGraph",
                              "desc": {"InputTensor": tensor, "OutputTensor": tensor,
                                       "ScaleBias": {"Scale": scale, "Bias": bias}}}}
    commands = [{"type": "dispatch", "dispatchable": "copy", "bindings": {"InputTensor": "image", "OutputTensor": "out"}},
                {"type": "writeFile", "resource": "out", "targetPath": "out.npy", "dimensions": sizes},
                {"type": "writeFile", "resource": "out", "targetPath": target, "dimensions": dimensions or sizes}]
    return write_model(folder, resources, dispatchables, commands)


PIXELS = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 14 + 3  # H 2, W 3, RGB


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("data_type", ["FLOAT32", "FLOAT16"])
def test_an_image_is_read_planar_and_scaled_to_0_1_and_written_back(data_type, backend, folder):
    if backend == "gpu" and not _gpu_usable():
        pytest.skip("needs a usable GPU (CuPy and a device)")
    name = png_file(folder / "in.png", PIXELS)
    result = dispatch(identity_model(folder, name, 3, 2, 3, data_type), "--no-timing", "--backend", backend)
    assert result.exit_code == 0, result.output
    # DxDispatch: float(component) / 255.0f, in NCHW order (all R, then all G, then all B).
    expected = (PIXELS.astype(np.float32) / np.float32(255)).transpose(2, 0, 1)[None]
    if data_type == "FLOAT16":
        expected = expected.astype(np.float16)
    read = np.load(folder / "out.npy")
    assert read.dtype == expected.dtype and read.shape == (1, 3, 2, 3)
    assert np.array_equal(read, expected)
    # Written back: trunc(v * 255.0f), which for v = c / 255 is c or, where the float product falls short, c - 1.
    back = np.trunc(expected.astype(np.float32) * np.float32(255)).astype(np.uint8)[0].transpose(1, 2, 0)
    assert np.array_equal(np.asarray(Image.open(folder / "out.png")), back)
    assert np.abs(back.astype(int) - PIXELS).max() <= 1


def test_grey_output_clamps_and_nan_becomes_white(folder):
    # out = 3 * x - 1 over a grey 1x4 image of components 0, 51, 102, 255 read as RGB channel 0:
    # 3 * 0 - 1 = -1 -> 0; 3 * 0.2 - 1 = -0.4 -> 0; 3 * 0.4 - 1 = 0.2 -> 51 (0.2 * 255 = 51, less a float step: 50
    # or 51); 3 * 1 - 1 = 2 -> 255.
    pixels = np.zeros((1, 4, 3), dtype=np.uint8)
    pixels[0, :, 0] = [0, 51, 102, 255]
    name = png_file(folder / "in.png", pixels)
    result = dispatch(identity_model(folder, name, 3, 1, 4, scale=3.0, bias=-1.0, dimensions=[1, 1, 1, 4]), "--no-timing")
    assert result.exit_code == 0, result.output
    values = (np.float32(3) * (pixels[0, :, 0].astype(np.float32) / np.float32(255)) - np.float32(1))
    expected = np.trunc(np.clip(values, 0, 1) * np.float32(255)).astype(np.uint8)
    written = Image.open(folder / "out.png")
    assert written.mode == "L" and np.asarray(written)[0].tolist() == expected.tolist()
    assert expected[0] == 0 and expected[1] == 0 and expected[3] == 255
    # NaN: std::max(0, std::min(1, NaN)) is 1, so 255.
    resources = {"A": buffer("FLOAT32", ["nan", "-inf", "inf", 0.5])}
    commands = [{"type": "writeFile", "resource": "A", "targetPath": "nan.png", "dimensions": [1, 1, 2, 2]}]
    result = dispatch(write_model(folder, resources, {}, commands, name="nan.json"))
    assert result.exit_code == 0, result.output
    assert np.asarray(Image.open(folder / "nan.png")).tolist() == [[255, 0], [255, 127]]


def test_a_different_size_is_scaled_bicubic_and_rgba_keeps_alpha(folder):
    rgba = np.random.default_rng(5).integers(0, 256, size=(6, 8, 4), dtype=np.uint8)
    name = png_file(folder / "in.png", rgba)
    result = dispatch(identity_model(folder, name, 4, 3, 4), "--no-timing")
    assert result.exit_code == 0, result.output
    scaled = np.asarray(Image.fromarray(rgba).resize((4, 3), Image.Resampling.BICUBIC))
    expected = (scaled.astype(np.float32) / np.float32(255)).transpose(2, 0, 1)[None]
    assert np.array_equal(np.load(folder / "out.npy"), expected)
    assert Image.open(folder / "out.png").mode == "RGBA"


def test_a_jpeg_output_is_written(folder):
    name = png_file(folder / "in.png", PIXELS)
    result = dispatch(identity_model(folder, name, 3, 2, 3, target="sub/out.jpg"), "--no-timing")
    assert result.exit_code == 0, result.output
    written = Image.open(folder / "sub" / "out.jpg")
    assert written.format == "JPEG" and written.size == (3, 2)


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header declares width x height pixels and which holds no pixel data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) +
                     chunk(b"IEND", b""))


@pytest.mark.parametrize("setup, message", [
    (lambda f: _png_header_only(f / "in.png", 40000, 25000), "more than the 67108864 pixels an image may have"),
    (lambda f: _png_header_only(f / "in.png", 9000, 9000), "9000 x 9000 pixels, more than the 67108864 pixels"),
    (lambda f: (f / "in.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really"), "is not an image Pillow can read"),
    (lambda f: _png_header_only(f / "in.png", 3, 2), "is not an image Pillow can read"),
])
def test_hostile_images_are_refused_before_anything_runs(setup, message, folder):
    setup(folder)
    model = identity_model(folder, "in.png", 3, 2, 3)
    result = dispatch(model, "--output-dir", folder / "out")
    one_line_error(result, 2)
    assert message in result.stderr
    assert not (folder / "out").exists()


@pytest.mark.parametrize("change, message", [
    (lambda m: m["resources"]["image"].update(resampleSize=[1, 2, 2, 3]), "resampleSize's C must be 3 (RGB) or 4"),
    (lambda m: m["resources"]["image"].update(resampleSize=[2, 3, 2, 3]), "resampleSize's N must be 1"),
    (lambda m: m["resources"]["image"].update(resampleSize=[1, 3, 100000, 100000]), "more than the 67108864 pixels"),
    (lambda m: m["resources"]["image"].pop("resampleSize"), "an image needs \"resampleSize\" [1, C, H, W]"),
    (lambda m: m["resources"]["image"].update(resampleMode="crop"), "resampleMode must be \"scale\""),
    (lambda m: m["resources"]["out"].update(resampleMode="scale"), "resampleMode applies only to an image file"),
    (lambda m: m["resources"]["image"].update(initialValuesDataType="UINT8"), "FLOAT32 or FLOAT16, not UINT8"),
    (lambda m: m["commands"][2].update(dimensions=[1, 2, 2, 3]), "an image has 1, 3 or 4 channels"),
    (lambda m: m["commands"][2].update(dimensions=[1, 3, 20, 30]), "needs 7200 bytes, but the buffer holds 72"),
    (lambda m: m["dispatchables"]["copy"].update(dmlCompileType="DmlCompileFancy"), "dmlCompileType must be"),
])
def test_image_model_rules(change, message, folder):
    png_file(folder / "in.png", PIXELS)
    path = identity_model(folder, "in.png", 3, 2, 3)
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    result = dispatch(path, "--output-dir", folder / "out")
    one_line_error(result, 2)
    assert message in result.stderr
    assert not (folder / "out").exists()


def test_images_without_pillow_exit_4_with_the_install_command(folder, monkeypatch):
    png_file(folder / "in.png", PIXELS)
    monkeypatch.setitem(sys.modules, "PIL", None)
    result = dispatch(identity_model(folder, "in.png", 3, 2, 3))
    one_line_error(result, 4)
    assert "pip install 'dmlcli[images]'" in result.stderr


@FUZZ
@given(data=st.binary(max_size=200).map(lambda tail: b"\x89PNG\r\n\x1a\n" + tail) | st.binary(max_size=200))
def test_random_bytes_as_an_image_are_refused_cleanly(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "in.png").write_bytes(data)
    result = dispatch(identity_model(folder, "in.png", 3, 2, 3), "--output-dir", folder / "out")
    one_line_error(result, 2)
    assert not (folder / "out").exists()


def test_an_onnx_model_whose_tensors_outgrow_memory_fails_cleanly(folder):
    # ConstantOfShape [50000, 50000] of FLOAT: a 10 GB tensor from a 200-byte model. With 256 MiB available, ONNX
    # Runtime's CPU arena (capped by dmlcli) refuses the allocation: exit 3, one line, nothing written. The
    # process also runs under a 4 GiB address-space limit, so that a cap that failed cannot exhaust the machine.
    import resource
    import subprocess

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [50000, 50000])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0)]
    name = onnx_file(folder / "bomb.onnx", nodes, [float_info("x", [1])], [float_info("y", [])], [shape])
    model = write_model(folder, {"X": buffer("FLOAT32", [0]), "Y": buffer("FLOAT32", [0])},
                        {"bomb": {"type": "onnx", "sourcePath": name}},
                        [{"type": "dispatch", "dispatchable": "bomb", "bindings": {"x": "X", "y": "Y"}},
                         {"type": "writeFile", "resource": "Y", "targetPath": "y.bin"}])
    script = ("import sys, dmlcli.dispatch.memory as memory; memory.available_memory = lambda: 256 << 20; "
              "from dmlcli.cli import main; sys.argv = ['dmlcli', 'dispatch', sys.argv[1]]; main()")
    repo = Path(dmlcli.__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", script, str(model)], capture_output=True, text=True, cwd=folder,
                            timeout=120, env={**os.environ, "PYTHONPATH": str(repo)},
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)))
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1 and "ONNX Runtime failed to run it" in result.stderr
    assert "Available memory of" in result.stderr  # the arena's cap, not the address-space limit, refused it
    assert not (folder / "y.bin").exists()


@pytest.fixture(scope="module")
def concat_folder(tmp_path_factory):
    """onnx_dynamic_shapes.onnx's twin (concat of two [N, 2] FLOAT inputs along axis 0), beside the random models."""
    folder = tmp_path_factory.mktemp("bindings")
    onnx_file(folder / "concat.onnx", [helper.make_node("Concat", ["x0", "x1"], ["y"], axis=0)],
              [float_info("x0", ["N", 2]), float_info("x1", ["N", 2])], [float_info("y", [None, 2])])
    return folder


SHAPES = (st.none() | st.sampled_from([[1, 2], [2, 2], [3, 2], [4, 2], [6, 2]]) | st.lists(st.integers(0, 4), max_size=3)
          | st.sampled_from([[2**40, 2], [-1, 2], "2", [1.5]]))
BOUND = st.sampled_from(["a", "b", "c", "d", "missing"])
BINDING = BOUND | st.fixed_dictionaries({"name": BOUND}, optional={"shape": SHAPES, "elementOffset": st.just(0) | st.integers(0, 4)})


@FUZZ
@given(bindings=st.dictionaries(st.sampled_from(["x0", "x1", "y", "z"]), BINDING, max_size=4),
       shown=st.lists(st.sampled_from(["a", "c", "d"]), max_size=3), iterations=st.integers(1, 3))
def test_random_onnx_bindings_run_or_fail_cleanly(bindings, shown, iterations, concat_folder):
    """Whatever the bindings: exit 0, 2 or 3, one line on failure, and where it runs, every bound output holds
    NumPy's concatenation of the inputs as bound."""
    resources = {"a": buffer("FLOAT32", list(range(1, 7))), "b": buffer("FLOAT32", list(range(7, 13))),
                 "c": buffer("FLOAT32", {"valueCount": 12, "value": 0}), "d": {"initialValues": "deferred"}}
    commands = [{"type": "dispatch", "dispatchable": "concat", "bindings": bindings}]
    commands += [{"type": "print", "resource": name} for name in shown]
    model = write_model(concat_folder, resources, {"concat": {"type": "onnx", "sourcePath": "concat.onnx"}}, commands)
    result = dispatch(model, "--no-timing", "-i", iterations, "--output-dir", concat_folder / "out")
    assert result.exit_code in (0, 2, 3), result.output
    event(f"exit {result.exit_code}")
    if result.exit_code:
        one_line_error(result, result.exit_code)
        return
    values = {"a": np.arange(1, 7, dtype=np.float32), "b": np.arange(7, 13, dtype=np.float32)}

    def bound(name):
        source = bindings.get(name)
        return source if isinstance(source, dict) else {"name": source} if source else None

    def read(name):
        source = bound(name)
        if source is None:
            return np.zeros((1, 2), np.float32)  # unbound: a fresh zeroed [1, 2]
        shape = source.get("shape") or [1, 2]
        return values[source["name"]][:math.prod(shape)].reshape(shape)

    y = bound("y")
    inputs = {bound(name)["name"] for name in ("x0", "x1") if bound(name) is not None}
    if y is None or y["name"] not in shown or y["name"] in inputs:
        return
    expected = np.concatenate([read("x0"), read("x1")]).reshape(-1)
    if y["name"] == "c":  # written from byte 0 over the 12 zeros
        expected = np.concatenate([expected, np.zeros(12 - expected.size, np.float32)])
    line = f"Resource '{y['name']}': " + ", ".join(f"{v:g}" for v in expected)
    assert line in result.stdout.splitlines()


def test_a_deferred_output_written_as_an_image_takes_its_shape(folder):
    # Sigmoid of [[-inf, 0], [inf, nan]] as a deferred [1, 1, 2, 2]: 0, 0.5, 1, nan -> bytes 0, 127, 255, 255.
    name = onnx_file(folder / "sigmoid.onnx", [helper.make_node("Sigmoid", ["x"], ["y"])],
                     [float_info("x", [1, 1, 2, 2])], [float_info("y", [1, 1, 2, 2])])
    model = write_model(folder, {"X": buffer("FLOAT32", ["-inf", 0, "inf", "nan"]), "D": {"initialValues": "deferred"}},
                        {"sigmoid": {"type": "onnx", "sourcePath": name}},
                        [{"type": "dispatch", "dispatchable": "sigmoid", "bindings": {"x": "X", "y": "D"}},
                         {"type": "writeFile", "resource": "D", "targetPath": "d.png"}])
    result = dispatch(model, "--no-timing")
    assert result.exit_code == 0, result.output
    assert np.asarray(Image.open(folder / "d.png")).tolist() == [[0, 127], [255, 255]]


def test_a_jpeg_extension_is_raw_bytes_as_in_dxdispatch(folder):
    # DxDispatch reads and writes images only for .jpg and .png; .jpeg is a raw file both ways.
    (folder / "in.jpeg").write_bytes(bytes([1, 2, 3, 4]))
    model = write_model(folder, {"A": {"initialValuesDataType": "UINT8", "initialValues": {"sourcePath": "in.jpeg"}}},
                        {}, [{"type": "print", "resource": "A"},
                             {"type": "writeFile", "resource": "A", "targetPath": "out.jpeg"}])
    result = dispatch(model)
    assert result.exit_code == 0, result.output
    assert printed(result)[0] == "Resource 'A': 1, 2, 3, 4"
    assert (folder / "out.jpeg").read_bytes() == bytes([1, 2, 3, 4])
