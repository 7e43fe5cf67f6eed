"""The Transformer encoder's matrix products through NumPy's BLAS (as gemm_planned calls it: np.matmul of the rows by
the weight) against ONNX Runtime's CPU provider (MLAS) running a model of that MatMul alone (a script, not a test).

OpenBLAS packs the weight into its own layout on every call; ONNX Runtime packs an initializer once, when the
session is made. For a product of few rows (the encoder's 16 tokens) by a wide weight, that packing is much of the
call: what is left of the encoder's gap to ONNX Runtime on the CPU (docs/onnx.md, Speed). Each side is timed by the
calling thread's CPU time, one thread each (OPENBLAS_NUM_THREADS=1; ONNX Runtime's intra-op threads 1), in turn
run by run; a session of an Identity of the product's output (ONNX Runtime's own cost of a run) is timed too, and
the ratio is given both raw and against ONNX Runtime's run less that cost.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python3 bench/onnx_products_bench.py [--repeats 2000] [--shapes 16x128x1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from onnx_model_bench import _medians  # noqa: E402 - the whole-model bench's timing

# (M, K, N) of the encoder's products: the attention's input projection, its output projection, the feed-forward's
# two, the head.
SHAPES = ((16, 128, 384), (16, 128, 128), (16, 128, 512), (16, 512, 128), (16, 128, 1000))


def _session(nodes, inputs, outputs, initializers):
    import onnxruntime
    from onnx import helper

    graph = helper.make_graph(nodes, "product", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _row(m: int, k: int, n: int, repeats: int) -> str:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    rows = rng.standard_normal((m, k)).astype(np.float32)
    weight = rng.standard_normal((k, n)).astype(np.float32)
    product = _session([helper.make_node("MatMul", ["a", "w"], ["y"])],
                       [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                       [numpy_helper.from_array(weight, "w")])
    identity = _session([helper.make_node("Identity", ["a"], ["y"])],
                        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, n])],
                        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [])
    same_size = np.zeros((m, n), np.float32)
    ours, theirs, overhead = _medians([lambda: np.matmul(rows, weight), lambda: product.run(None, {"a": rows}),
                                       lambda: identity.run(None, {"a": same_size})], repeats, time.thread_time)
    net = max(theirs - overhead, 1e-9)
    return (f"| {m}x{k} by {k}x{n} | {ours * 1e6:.1f} us | {theirs * 1e6:.1f} us | {overhead * 1e6:.1f} us | "
            f"{ours / theirs:.2f}x | {ours / net:.2f}x |")


def _shape(text: str) -> tuple[int, int, int]:
    try:
        m, k, n = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MxKxN (three whole numbers)") from None
    if min(m, k, n) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be at least 1")
    return m, k, n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000, help="timed runs of each side (default 2000)")
    parser.add_argument("--shapes", type=lambda text: [_shape(part) for part in text.split(",")], default=SHAPES,
                        help="MxKxN,... (default: the encoder's products)")
    args = parser.parse_args(argv)
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("skipped: onnxruntime is not installed")
        return 0
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("note: OPENBLAS_NUM_THREADS is not 1: BLAS's own threads are not the calling thread's CPU time")
    print(f"CPU time per call, median of {args.repeats}, one thread each")
    print("| product | NumPy's BLAS | ONNX Runtime MatMul | ONNX Runtime's run alone | BLAS / ORT "
          "| BLAS / (ORT less its run) |")
    print("|---|---|---|---|---|---|")
    for m, k, n in args.shapes:
        print(_row(m, k, n, max(1, args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
