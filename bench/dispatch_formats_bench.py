"""What `dmlcli dispatch` costs on DxDispatch's ONNX, serialized-graph and image models, against plain scripts.

For each model, the median over --repeats runs of:
  - dmlcli:   load_model + run_model (parse, session, bindings, run, print), the way `dmlcli dispatch` runs it;
  - baseline: a plain script of the same work: for the ONNX models an onnxruntime.InferenceSession made and run
              on NumPy arrays, plus the same work in NumPy alone (matmuls, concatenations); for the serialized
              graph (dmlSerializedGraph_matmul_add.json: FlatBuffers read, one GEMM node, two constants) a session
              of the ONNX model it was made from, and x @ B + C in NumPy; for the image model, Pillow decode +
              resize + /255 + a NumPy identity + encode.
and, for the dispatch alone, the median per-dispatch time dmlcli reports (-i --iterations) against the median
of session.run / the NumPy operation on the same arrays.

    PYTHONPATH=. python bench/dispatch_formats_bench.py [--repeats 9] [--iterations 50] [--backend cpu]

Needs the [onnx] and [images] extras and ../shared/dxdispatch_models.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from dmlcli.dispatch import load_model, run_model

SHARED = Path(os.environ.get("DMLCLI_SHARED") or Path(__file__).resolve().parents[1].parent / "shared") / "dxdispatch_models"


def median_ms(work, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples)


def dmlcli_run(path: Path, backend: str, iterations: int, out: Path):
    model = load_model(path, output_dir=out)
    return run_model(model, backend=backend, iterations=iterations, emit=lambda line: None)


# ---------------------------------------------------------------- plain scripts of the same work


def gemm_inputs():
    a = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    b = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    return a, b


def gemm_onnx_script() -> None:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(SHARED / "onnx_gemm.onnx"), providers=["CPUExecutionProvider"])
    a, b = gemm_inputs()
    session.run(None, {"A0": a, "B0": b, "A1": a, "B1": b})


def gemm_numpy() -> None:
    a, b = gemm_inputs()
    _ = a @ b + a @ b


def concat_onnx_script() -> None:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(SHARED / "onnx_dynamic_shapes.onnx"),
                                           providers=["CPUExecutionProvider"])
    a = np.arange(1, 7, dtype=np.float32)
    b = np.arange(7, 13, dtype=np.float32)
    for rows in (1, 3, 3):
        session.run(None, {"x0": a[:rows * 2].reshape(rows, 2), "x1": b[:rows * 2].reshape(rows, 2)})


def concat_numpy() -> None:
    a = np.arange(1, 7, dtype=np.float32)
    b = np.arange(7, 13, dtype=np.float32)
    for rows in (1, 3, 3):
        np.concatenate([a[:rows * 2].reshape(rows, 2), b[:rows * 2].reshape(rows, 2)])


def matmul_add_onnx_script() -> None:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(SHARED / "matmul_add" / "matmul_add.onnx"),
                                           providers=["CPUExecutionProvider"])
    session.run(None, {"model_input": np.full((1, 5), 1.5, dtype=np.float32)})


def matmul_add_numpy() -> None:
    b = np.fromfile(SHARED / "matmul_add" / "matmul_b_tensor.bin", dtype="<f4").reshape(5, 5)
    c = np.fromfile(SHARED / "matmul_add" / "add_b_tensor.bin", dtype="<f4")
    _ = np.full((1, 5), 1.5, dtype=np.float32) @ b + c


def image_model(folder: Path, size: int) -> Path:
    """chihuahua.jpg read at size x size RGB, IDENTITY, written back as a PNG: image_io.json's I/O without CONVOLUTION."""
    (folder / "chihuahua.jpg").write_bytes((SHARED / "chihuahua.jpg").read_bytes())
    sizes = [1, 3, size, size]
    tensor = {"DataType": "FLOAT32", "Sizes": sizes}
    model = {"resources": {"input": {"initialValues": {"sourcePath": "chihuahua.jpg"},
                                     "initialValuesDataType": "FLOAT32", "resampleSize": sizes},
                           "output": {"initialValuesDataType": "FLOAT32",
                                      "initialValues": {"valueCount": 3 * size * size, "value": 0}}},
             "dispatchables": {"copy": {"type": "DML_OPERATOR_ELEMENT_WISE_IDENTITY",
                                        "desc": {"InputTensor": tensor, "OutputTensor": tensor}}},
             "commands": [{"type": "dispatch", "dispatchable": "copy",
                           "bindings": {"InputTensor": "input", "OutputTensor": "output"}},
                          {"type": "writeFile", "resource": "output", "targetPath": "output.png", "dimensions": sizes}]}
    path = folder / "image_identity.json"
    path.write_text(json.dumps(model))
    return path


def image_script(size: int) -> None:
    from PIL import Image

    image = Image.open(SHARED / "chihuahua.jpg").convert("RGB").resize((size, size), Image.Resampling.BICUBIC)
    planar = (np.asarray(image).astype(np.float32) / np.float32(255)).transpose(2, 0, 1).copy()
    out = planar.copy()  # the identity
    pixels = np.trunc(np.clip(out, 0, 1) * np.float32(255)).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(np.ascontiguousarray(pixels)).save(io.BytesIO(), format="PNG")


def session_run(onnx_name: str, feeds: dict):
    """session.run alone, on a session made beforehand: the baseline for dmlcli's per-dispatch time."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(SHARED / onnx_name), providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--image-size", type=int, default=512)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out"
        image = image_model(Path(folder), args.image_size)
        cases = [
            ("onnx_gemm.json", SHARED / "onnx_gemm.json", gemm_onnx_script, gemm_numpy,
             session_run("onnx_gemm.onnx", dict(zip(["A0", "B0", "A1", "B1"], gemm_inputs() * 2)))),
            ("onnx_dynamic_shapes.json", SHARED / "onnx_dynamic_shapes.json", concat_onnx_script, concat_numpy,
             session_run("onnx_dynamic_shapes.onnx", {"x0": np.ones((3, 2), np.float32),
                                                      "x1": np.ones((3, 2), np.float32)})),
            ("dmlSerializedGraph_matmul_add.json", SHARED / "dmlSerializedGraph_matmul_add.json",
             matmul_add_onnx_script, matmul_add_numpy,
             session_run("matmul_add/matmul_add.onnx", {"model_input": np.full((1, 5), 1.5, dtype=np.float32)})),
            (f"image {args.image_size}x{args.image_size} (jpg -> IDENTITY -> png)", image,
             lambda: image_script(args.image_size), None, None),
        ]
        print(f"backend {args.backend}; medians of {args.repeats} runs (ms); per-dispatch: -i {args.iterations}")
        for name, path, script, numpy_only, dispatch_only in cases:
            whole = median_ms(lambda: dmlcli_run(path, args.backend, 1, out), args.repeats)
            baseline = median_ms(script, args.repeats)
            line = f"{name}: dmlcli {whole:.3f} ms, plain script {baseline:.3f} ms, ratio {whole / baseline:.2f}"
            if numpy_only is not None:
                numpy_ms = median_ms(numpy_only, args.repeats)
                line += f"; NumPy alone {numpy_ms:.4f} ms, ratio {whole / numpy_ms:.0f}"
            print(line)
            run = dmlcli_run(path, args.backend, args.iterations, out)
            per_dispatch = statistics.median(t.cpu_median_ms for t in run.timings)
            line = f"  per dispatch (median of dmlcli's medians): {per_dispatch:.4f} ms"
            if dispatch_only is not None:
                alone = median_ms(dispatch_only, args.iterations)
                line += f", session.run alone {alone:.4f} ms, ratio {per_dispatch / alone:.2f}"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
