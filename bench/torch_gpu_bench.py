"""GPU benchmark (a script, not a test): issue 19's operators on resident data against PyTorch's calls.

Each case runs dmlcli's GPU kernel (GpuBackend.execute_shaped_device, the call validated once beforehand) and
PyTorch's call for the same thing on the same device memory (shared through DLPack), timed with CUDA events
(medians of --repeats runs after a warm-up). Both sides keep FP32 arithmetic for FLOAT32: TF32 is off in cuBLAS
and cuDNN (torch.backends.*.allow_tf32 = False) as it is in dmlcli, and FLOAT16 matmuls accumulate in FP32 on both
(allow_fp16_reduced_precision_reduction = False). Each result is checked against PyTorch's before it is timed.

Issue 19's goals, printed beside each figure:
- GEMM FLOAT32 4096^3 at >= 0.8 of torch.matmul's throughput (torch time / dmlcli time);
- a ResNet-50-sized 3x3 convolution (N=32, C=K=256, 56x56, padding 1) at >= 0.5 of torch.nn.functional.conv2d's
  with cuDNN;
- pooling and normalization at >= 0.6 of the device-to-device copy bandwidth (bytes read + written per second,
  against cudaMemcpy of 1 GiB measured in the same run), each call timed alone (the GPU idle while the host
  prepares the launch: 50-70 us of Python and CuPy, half of a 100 MB normalization) and back to back (calls in a
  row timed together, as operators in a pipeline run: the GPU's throughput).

    PYTHONPATH=. python3 bench/torch_gpu_bench.py [--size 4096] [--batch 32] [--repeats 10]
    PYTHONPATH=. python3 bench/torch_gpu_bench.py --size 256 --batch 2 --repeats 2      # a quick look
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_bench import gpu_median_seconds, gpu_stream_seconds, moved_bytes, torch_and_gpu, warm_up  # noqa: E402 - CUDA-event medians, one helper for the GPU benches


def _copy_bandwidth(cp, repeats: int) -> float:
    """Bytes per second of cudaMemcpy device to device of 1 GiB, reads and writes counted."""
    source = cp.zeros(2**28, dtype=cp.float32)
    target = cp.empty_like(source)
    seconds = gpu_median_seconds(cp, lambda: cp.cuda.runtime.memcpy(target.data.ptr, source.data.ptr, source.nbytes,
                                                                    cp.cuda.runtime.memcpyDeviceToDevice), repeats)
    return 2 * source.nbytes / seconds


def _cases(cp, torch, size: int, batch: int):
    """(label, goal kind, operator, parameters, inputs as CuPy arrays (None: an absent optional input), PyTorch's
    call on tensors sharing those arrays' memory)."""
    F = torch.nn.functional
    rng = cp.random.default_rng(0)
    normal = lambda shape, dtype=cp.float32: rng.standard_normal(shape, dtype=cp.float32).astype(dtype)  # noqa: E731
    side = max(8, size * 56 // 4096)  # 56 at --size 4096 (ResNet-50's stage 2)
    channels = max(8, size // 16)  # 256 at --size 4096
    image = (batch, channels, side, side)
    big_image = (10 * batch, channels, side, side)
    pool_input = (batch, 32, max(8, size // 8), max(8, size // 8))  # 1 GiB at the defaults, as the copy
    per_channel = (1, channels, 1, 1)

    def batch_normalization(label, shape):
        return (label, "copy 0.6", "batch_normalization", {"epsilon": 1e-5},
                [normal(shape), normal(per_channel), cp.abs(normal(per_channel)) + 0.5, normal(per_channel),
                 normal(per_channel)],
                lambda x, m, v, s, b: F.batch_norm(x, m.reshape(-1), v.reshape(-1), s.reshape(-1), b.reshape(-1),
                                                   training=False, eps=1e-5))

    def instance_normalization(label, shape):
        return (label, "copy 0.6", "mean_variance_normalization1", {"axes": [2, 3], "epsilon": 1e-5},
                [normal(shape), None, None], lambda x, s, b: F.instance_norm(x, eps=1e-5))

    return [
        ("gemm FLOAT32", "torch 0.8", "gemm", {}, [normal((size, size)), normal((size, size)), None],
         lambda a, b, c: torch.matmul(a, b)),
        ("gemm FLOAT16", "torch", "gemm", {}, [normal((size, size), cp.float16), normal((size, size), cp.float16),
                                               None], lambda a, b, c: torch.matmul(a, b)),
        # Issue 33's GEMM with a bias and a fused activation: CTensor {1, N} against addmm's bias, then RELU.
        ("gemm FLOAT16 + bias + relu", "torch 0.95", "gemm", {"fused_activation": "relu"},
         [normal((size, size), cp.float16), normal((size, size), cp.float16), normal((1, size), cp.float16)],
         lambda a, b, c: F.relu(torch.addmm(c, a, b))),
        ("gemm FLOAT32 + bias + relu", "torch 1.0", "gemm", {"fused_activation": "relu"},
         [normal((size, size)), normal((size, size)), normal((1, size))],
         lambda a, b, c: F.relu(torch.addmm(c, a, b))),
        ("convolution 3x3, pad 1", "torch 0.5", "convolution", {"start_padding": [1, 1], "end_padding": [1, 1]},
         [normal(image), normal((channels, channels, 3, 3)) * np.float32(0.05), None],
         lambda x, w, bias: F.conv2d(x, w, padding=1)),
        ("max_pooling 2x2 stride 2", "copy 0.6", "max_pooling", {"window_size": [2, 2], "strides": [2, 2]},
         [normal(pool_input)], lambda x: F.max_pool2d(x, 2)),
        ("average_pooling 2x2 stride 2", "copy 0.6", "average_pooling", {"window_size": [2, 2], "strides": [2, 2]},
         [normal(pool_input)], lambda x: F.avg_pool2d(x, 2)),
        ("max_pooling 3x3 stride 1 pad 1", "copy 0.6", "max_pooling",
         {"window_size": [3, 3], "start_padding": [1, 1], "end_padding": [1, 1]}, [normal(pool_input)],
         lambda x: F.max_pool2d(x, 3, stride=1, padding=1)),
        batch_normalization("batch_normalization", image),
        instance_normalization("mean_variance_normalization1 (H, W)", image),
        # The same at 1 GiB, the copy's size (at 100 MB the host side of a call, about 60 us, is half the time):
        # ten times the batch of 56 x 56 images, and the pooling input's 512 x 512 images (rows past shared memory).
        batch_normalization("batch_normalization, 10x batch", big_image),
        instance_normalization("mean_variance_normalization1, 10x batch", big_image),
        instance_normalization("mean_variance_normalization1, 512x512", pool_input),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="GEMM's M = N = K; the other cases scale with it")
    parser.add_argument("--batch", type=int, default=32, help="the convolution's and normalization's N")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    found = torch_and_gpu()
    if found is None:
        return 0
    cp, torch, backend = found
    from dmlcli import engine
    from dmlcli.data_types import from_numpy

    clocks = warm_up(cp)
    copy_bandwidth = max(_copy_bandwidth(cp, args.repeats) for _ in range(3))  # the best of three: the strictest
    print(clocks)
    print(f"GPU: {backend.device_name}; CuPy {cp.__version__}; PyTorch {torch.__version__} (cuDNN "
          f"{torch.backends.cudnn.version()}); TF32 off; device-to-device copy {copy_bandwidth / 1e9:.0f} GB/s; "
          f"CUDA-event medians of {args.repeats} runs")
    print(f"{'case':38} {'dmlcli ms':>10} {'torch ms':>9} {'torch/dmlcli':>13} {'dmlcli/copy':>12} "
          f"{'torch/copy':>11} {'b2b dmlcli':>13} {'b2b torch':>12}  goal")
    print("(b2b: back to back, --repeats calls in a row timed together, the host's work for one call overlapping the "
          "GPU's on the one before)")
    failures = 0
    for label, goal, op, params, inputs, baseline in _cases(cp, torch, args.size, args.batch):
        req = engine.request(op, **params)
        present = [x for x in inputs if x is not None]
        call = engine.plan(req, [(from_numpy(np.dtype(x.dtype)), tuple(x.shape)) for x in present]).call
        run = lambda: backend.execute_shaped_device(call.operator, inputs, call.outputs, call.parameters)  # noqa
        tensors = [None if x is None else torch.from_dlpack(x) for x in inputs]
        ours, theirs = run()[0], baseline(*tensors)
        theirs_cp = cp.from_dlpack(theirs.contiguous())
        scale = float(cp.abs(theirs_cp.astype(cp.float32)).max()) or 1.0
        error = float(cp.abs(ours.astype(cp.float32) - theirs_cp.astype(cp.float32)).max()) / scale
        if not error <= (2e-2 if ours.dtype == cp.float16 else 1e-3):
            print(f"{label:38} MISMATCH against PyTorch's result (largest error {error:.3g} of the largest value); "
                  "not timed")
            failures += 1
            continue
        ours_s = gpu_median_seconds(cp, run, args.repeats)
        theirs_s = gpu_median_seconds(cp, lambda: baseline(*tensors), args.repeats)
        ours_stream = gpu_stream_seconds(cp, run, args.repeats)
        theirs_stream = gpu_stream_seconds(cp, lambda: baseline(*tensors), args.repeats)
        moved = moved_bytes(inputs, call)
        against, share = goal.split()[0], goal.split()[1:] if " " in goal else []
        met = ""
        if share:
            verdict = lambda figure: "met" if figure >= float(share[0]) else "NOT met"  # noqa: E731
            if against == "torch":
                met = f">= {share[0]} of torch: {verdict(theirs_s / ours_s)}"
            else:
                met = (f">= {share[0]} of copy: {verdict(moved / ours_s / copy_bandwidth)}, back to back: "
                       f"{verdict(moved / ours_stream / copy_bandwidth)}")
        print(f"{label:38} {ours_s * 1e3:10.3f} {theirs_s * 1e3:9.3f} {theirs_s / ours_s:13.2f} "
              f"{moved / ours_s / copy_bandwidth:12.2f} {moved / theirs_s / copy_bandwidth:11.2f} "
              f"{moved / ours_stream / copy_bandwidth:13.2f} {moved / theirs_stream / copy_bandwidth:12.2f}  {met}")
        del ours, theirs, theirs_cp
        cp.get_default_memory_pool().free_all_blocks()
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
