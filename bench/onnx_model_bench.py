"""Whole-model benchmark (a script, not a test): `dmlcli onnx`'s runner against ONNX Runtime's CPU provider, and on
the GPU against PyTorch eager, for the shared models (../shared/onnx_models: SqueezeNet 1.1, a 2-layer Transformer
encoder).

Each side is set up once (dmlcli's OnnxSession reads the model and converts its weights once, the first run makes
its plan; ONNX Runtime's session; PyTorch's module on the device) and then timed over --repeats runs, the two sides
alternating, medians reported. Issue 32's goals, printed beside each figure:
- CPU: dmlcli within 3x of ONNX Runtime's CPU provider (dmlcli time / ONNX Runtime time <= 3);
- GPU (--backend gpu): at least half of PyTorch eager's speed for the same network (PyTorch time / dmlcli time >=
  0.5), PyTorch's networks built here with the shared models' architectures (torchvision's squeezenet1_1, and the
  encoder: an embedding of 1000 tokens, 2 TransformerEncoderLayers of d=128, 4 heads, feed-forward 512, GELU, and
  a linear head), timed with the device synchronised after each run. Without PyTorch (or torchvision, for
  SqueezeNet) that comparison says skipped.

On a busy machine wall times say more about the other processes than about either side (OpenBLAS's threads
wait for a core): `--cpu-time` times each run by the calling thread's CPU time instead, with ONNX Runtime on one
thread and NumPy's BLAS on one (OPENBLAS_NUM_THREADS=1, which must be set before Python starts): the work each
side does for a run, whatever the load.

    PYTHONPATH=. python3 bench/onnx_model_bench.py [--repeats 20] [--models squeezenet1_1,encoder_small]
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python3 bench/onnx_model_bench.py --cpu-time
    PYTHONPATH=. python3 bench/onnx_model_bench.py --backend gpu      # on a GPU machine, with CuPy and PyTorch
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


FOLDER = Path(os.environ.get("DMLCLI_SHARED") or Path(__file__).resolve().parents[2] / "shared") / "onnx_models"
MODELS = ("squeezenet1_1", "encoder_small")
CPU_GOAL, GPU_GOAL = 3.0, 0.5
BLOCK = 5  # timed runs of one side in a row (see the module's docstring)


def _medians(first, second, repeats: int, clock=time.perf_counter, block: int = 1) -> tuple[float, float]:
    """Median seconds of two callables, timed by `clock`, after one warm-up run each: the sides alternate in blocks
    of `block` timed runs (1: run by run), a block of more than one run after an untimed one, which lets the other
    side's threads go back to sleep."""
    first(), second()
    ours, theirs = [], []
    for _ in range(-(-repeats // block)):
        for function, times in ((first, ours), (second, theirs)):
            if block > 1:
                function()
            for _ in range(block):
                started = clock()
                function()
                times.append(clock() - started)
    return statistics.median(ours), statistics.median(theirs)


def _torch_network(name: str, torch):
    """PyTorch's network of the same architecture as the shared model, in eval mode; None without torchvision."""
    if name == "squeezenet1_1":
        try:
            import torchvision
        except ImportError:
            return None
        return torchvision.models.squeezenet1_1(weights=None).eval()

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(1000, 128)
            layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, activation="gelu", batch_first=True)
            self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = torch.nn.Linear(128, 1000)

        def forward(self, tokens):
            return self.head(self.enc(self.emb(tokens)))

    return Encoder().eval()


def _cpu_row(name: str, repeats: int, cpu_time: bool, block: int) -> str:
    import onnxruntime

    from dmlcli.onnx_model import OnnxSession

    data = np.load(FOLDER / f"{name}.npz")
    feeds = {"input": data["input"]}
    session = OnnxSession(str(FOLDER / f"{name}.onnx"))
    options = onnxruntime.SessionOptions()
    if cpu_time:  # ONNX Runtime's work on the calling thread, where thread_time sees it
        options.intra_op_num_threads = options.inter_op_num_threads = 1
    reference = onnxruntime.InferenceSession(str(FOLDER / f"{name}.onnx"), options,
                                             providers=["CPUExecutionProvider"])
    ours, theirs = _medians(lambda: session.run(feeds), lambda: reference.run(None, feeds), repeats,
                            time.thread_time if cpu_time else time.perf_counter, block)
    ratio = ours / theirs
    verdict = "meets" if ratio <= CPU_GOAL else "misses"
    return (f"| {name} | cpu{' (CPU time)' if cpu_time else ''} | {ours * 1e3:.2f} ms | ONNX Runtime CPU "
            f"{theirs * 1e3:.2f} ms | dmlcli / ORT {ratio:.2f}x | {verdict} the goal (<= {CPU_GOAL:g}x) |")


def _gpu_row(name: str, repeats: int) -> str:
    import cupy

    from dmlcli.onnx_model import OnnxSession

    data = np.load(FOLDER / f"{name}.npz")
    feeds = {"input": data["input"]}
    session = OnnxSession(str(FOLDER / f"{name}.onnx"), backend="gpu")

    def ours():
        session.run(feeds)
        cupy.cuda.Device().synchronize()

    try:
        import torch
    except ImportError:
        torch = None
    network = _torch_network(name, torch) if torch is not None and torch.cuda.is_available() else None
    if network is None:
        seconds = _medians(ours, lambda: None, repeats)[0]
        return (f"| {name} | gpu | {seconds * 1e3:.2f} ms | PyTorch eager: skipped (PyTorch, torchvision or CUDA "
                "missing) | | |")
    network = network.cuda()
    tokens = torch.from_numpy(data["input"]).cuda()

    def theirs():
        with torch.no_grad():
            network(tokens)
        torch.cuda.synchronize()

    mine, torch_seconds = _medians(ours, theirs, repeats)
    speed = torch_seconds / mine
    verdict = "meets" if speed >= GPU_GOAL else "misses"
    return (f"| {name} | gpu | {mine * 1e3:.2f} ms | PyTorch eager {torch_seconds * 1e3:.2f} ms | speed PyTorch / dmlcli "
            f"{speed:.2f} | {verdict} the goal (>= {GPU_GOAL:g}) |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--backend", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--block", type=int, default=BLOCK,
                        help=f"timed runs of one side before the other's (default {BLOCK}; 1: alternate run by run)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="CPU time of the calling thread, both sides on one thread (needs OPENBLAS_NUM_THREADS=1)")
    args = parser.parse_args(argv)
    if args.cpu_time and os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("--cpu-time needs OPENBLAS_NUM_THREADS=1 in the environment (BLAS's own threads are not the calling "
              "thread's time)")
        return 2
    if not FOLDER.is_dir():
        print(f"skipped: {FOLDER} not found (the shared models)")
        return 0
    try:
        import onnx  # noqa: F401
        if args.backend == "cpu":
            import onnxruntime  # noqa: F401
    except ImportError as missing:
        print(f"skipped: {missing.name} is not installed (pip install 'dmlcli[onnx]')")
        return 0
    if args.backend == "gpu":
        try:
            from dmlcli.backends import gpu

            gpu.create()
        except Exception as why:  # noqa: BLE001 - any reason: the GPU comparison is skipped, saying why
            print(f"skipped: no usable GPU ({why})")
            return 0
    print(f"| model | backend | dmlcli (median of {args.repeats}) | against | ratio | goal |")
    print("|---|---|---|---|---|---|")
    for name in args.models.split(","):
        row = _cpu_row(name, args.repeats, args.cpu_time, max(1, args.block)) if args.backend == "cpu" else _gpu_row(name, args.repeats)
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
