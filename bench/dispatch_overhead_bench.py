"""What running a DxDispatch model costs over calling the operator directly.

Builds a model in a temporary folder: BIT_XOR of a UINT32 matrix (sequence initialiser) with a
row broadcast through a zero stride (constant initialiser), written to a third buffer. Prints
the median time per dispatch as `dmlcli dispatch` measures it (gather through the strides,
kernel, scatter back into the buffer), and, as the baseline measured in the same run, the median
of dmlcli.api.run on the same values already laid out as NumPy arrays, with the ratio.

    .venv/bin/python bench/dispatch_overhead_bench.py [--rows 4096] [--cols 1024] [--iterations 20] [--backend cpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmlcli.api import run  # noqa: E402
from dmlcli.dispatch import load_model, run_model  # noqa: E402


def build_model(folder: Path, rows: int, cols: int) -> Path:
    model = {
        "resources": {
            "A": {"initialValuesDataType": "UINT32",
                  "initialValues": {"valueCount": rows * cols, "valueStart": 0, "valueDelta": 7}},
            "Row": {"initialValuesDataType": "UINT32", "initialValues": {"valueCount": cols, "value": 0x5A5A5A5A}},
            "Out": {"initialValuesDataType": "UINT32", "initialValues": {"valueCount": rows * cols, "value": 0}},
        },
        "dispatchables": {
            "xor": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_XOR", "desc": {
                "ATensor": {"DataType": "UINT32", "Sizes": [rows, cols]},
                "BTensor": {"DataType": "UINT32", "Sizes": [rows, cols], "Strides": [0, 1]},
                "OutputTensor": {"DataType": "UINT32", "Sizes": [rows, cols]}}},
        },
        "commands": [{"type": "dispatch", "dispatchable": "xor",
                      "bindings": {"ATensor": "A", "BTensor": "Row", "OutputTensor": "Out"}}],
    }
    path = folder / "xor_broadcast.json"
    path.write_text(json.dumps(model))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--backend", default="cpu")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        path = build_model(Path(folder), args.rows, args.cols)
        start = time.perf_counter()
        model = load_model(path)
        parse_ms = (time.perf_counter() - start) * 1000
        result = run_model(model, backend=args.backend, iterations=args.iterations, warmup=1, emit=lambda line: None)
    timing = result.timings[0]
    dispatch_ms = timing.cpu_median_ms

    a = (np.arange(args.rows * args.cols, dtype=np.uint64) * 7 % 2**32).astype(np.uint32).reshape(args.rows, args.cols)
    row = np.full((1, args.cols), 0x5A5A5A5A, dtype=np.uint32)
    expected = np.bitwise_xor(a, row)
    assert np.array_equal(np.frombuffer(result.buffers["Out"], dtype="<u4").reshape(a.shape), expected)
    samples = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        run("bit_xor", a, row, broadcast=True, backend=args.backend)
        samples.append((time.perf_counter() - start) * 1000)
    baseline_ms = statistics.median(samples[1:] or samples)

    megabytes = a.nbytes / 2**20
    print(f"model: BIT_XOR UINT32 [{args.rows}, {args.cols}] ({megabytes:.0f} MiB per tensor), row broadcast "
          f"by a zero stride, backend {args.backend}, {args.iterations} iterations")
    print(f"parse + initialise buffers:          {parse_ms:9.2f} ms")
    print(f"dmlcli dispatch, per dispatch:       {dispatch_ms:9.2f} ms median (CPU)"
          + (f", {timing.gpu_median_ms:.4f} ms median (GPU kernel)" if timing.gpu_median_ms is not None else ""))
    print(f"baseline dmlcli.api.run (NumPy in):  {baseline_ms:9.2f} ms median")
    print(f"ratio dispatch / baseline:           {dispatch_ms / baseline_ms:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
