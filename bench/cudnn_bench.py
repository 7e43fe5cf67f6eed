"""GPU probe (a script, not a test): CONVOLUTION and MULTIHEAD_ATTENTION through cuDNN (issue 33 items 3 and 5)
against PyTorch's calls on the same device memory.

Each case runs dmlcli's GPU kernel (GpuBackend.execute_shaped_device on resident CuPy arrays, the call validated
once beforehand) and PyTorch's call for the same thing, checks dmlcli's result against PyTorch's, then times both
with CUDA events: medians of --repeats calls each timed alone, and calls back to back (--repeats in a row timed
together: the GPU's throughput, the host's work for one call overlapping the GPU's on the one before). It prints
both times, the ratio torch / dmlcli (back to back), the goal, and the path dmlcli took ("cudnn", or "dmlcli: why
cuDNN did not run it"). Each case runs in its own try/except: a failure prints its exception and the next case runs.

PyTorch runs as it runs best: torch.backends.cudnn.benchmark on (its engines timed per shape), TF32 off for FLOAT32
as in dmlcli (allow_tf32 False), FP32 accumulation for FLOAT16.

Goals (issue 33): convolution at >= 1.0 of PyTorch (cuDNN) for the bench's 3x3 case and for 1-D, 3-D, grouped,
depthwise, dilated and backward-direction convolutions with a fused activation; MULTIHEAD_ATTENTION FLOAT16
[1, 32, 2048, 128] at >= 0.9 of scaled_dot_product_attention, with and without a causal mask. The causal mask of a
MULTIHEAD_ATTENTION call is a tensor (DirectML's desc has no causal flag), so that case runs twice: against PyTorch
told it is causal (is_causal=True, which skips the masked half of the work) and against PyTorch given the same mask
as a tensor (attn_mask=, as a DirectML call gives it).

    PYTHONPATH=. python3 bench/cudnn_bench.py [--repeats 10] [--batch 32] [--only conv|attention]
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_bench import gpu_median_seconds, gpu_stream_seconds, torch_and_gpu, warm_up  # noqa: E402


def _convolution_cases(cp, torch, batch: int):
    """(label, goal, DirectML parameters, CuPy inputs, PyTorch's call on tensors sharing their memory)."""
    F = torch.nn.functional
    rng = cp.random.default_rng(0)

    def normal(shape, dtype, scale=1.0):
        return (rng.standard_normal(shape, dtype=cp.float32) * scale).astype(dtype)

    def relu_of(call):
        return lambda x, w, b: F.relu(call(x, w, b))

    h16, h32 = cp.float16, cp.float32
    n = batch
    cases = [
        ("conv 3x3 pad 1 FLOAT32 (bench)", 1.0, {"start_padding": [1, 1], "end_padding": [1, 1]},
         [normal((n, 256, 56, 56), h32), normal((256, 256, 3, 3), h32, 0.05), None],
         lambda x, w, b: F.conv2d(x, w, padding=1)),
        ("conv 3x3 pad 1 FLOAT16", 1.0, {"start_padding": [1, 1], "end_padding": [1, 1]},
         [normal((n, 256, 56, 56), h16), normal((256, 256, 3, 3), h16, 0.05), None],
         lambda x, w, b: F.conv2d(x, w, padding=1)),
    ]
    relu = {"fused_activation": "relu"}
    fused = [
        ("3x3 + bias + relu FLOAT16", (n, 256, 56, 56), (256, 256, 3, 3), {"start_padding": [1, 1], "end_padding": [1, 1]},
         lambda x, w, b: F.conv2d(x, w, b.reshape(-1), padding=1)),
        ("3x3 + bias + relu FLOAT32", (n, 256, 56, 56), (256, 256, 3, 3), {"start_padding": [1, 1], "end_padding": [1, 1]},
         lambda x, w, b: F.conv2d(x, w, b.reshape(-1), padding=1)),
        ("1x1 + bias + relu FLOAT16", (n, 256, 56, 56), (64, 256, 1, 1), {},
         lambda x, w, b: F.conv2d(x, w, b.reshape(-1))),
        ("1-D k3 + bias + relu FLOAT16", (n, 256, 4096), (256, 256, 3), {"start_padding": [1], "end_padding": [1]},
         lambda x, w, b: F.conv1d(x, w, b.reshape(-1), padding=1)),
        ("3-D 3x3x3 + bias + relu FLOAT16", (max(1, n // 8), 64, 16, 56, 56), (64, 64, 3, 3, 3),
         {"start_padding": [1, 1, 1], "end_padding": [1, 1, 1]},
         lambda x, w, b: F.conv3d(x, w, b.reshape(-1), padding=1)),
        ("grouped g=32 + bias + relu FLOAT16", (n, 256, 56, 56), (256, 8, 3, 3),
         {"group_count": 32, "start_padding": [1, 1], "end_padding": [1, 1]},
         lambda x, w, b: F.conv2d(x, w, b.reshape(-1), padding=1, groups=32)),
        ("depthwise + bias + relu FLOAT16", (n, 256, 56, 56), (256, 1, 3, 3),
         {"group_count": 256, "start_padding": [1, 1], "end_padding": [1, 1]},
         lambda x, w, b: F.conv2d(x, w, b.reshape(-1), padding=1, groups=256)),
        ("dilated 2 + bias + relu FLOAT16", (n, 256, 56, 56), (256, 256, 3, 3),
         {"dilations": [2, 2], "start_padding": [2, 2], "end_padding": [2, 2]},
         lambda x, w, b: F.conv2d(x, w, b.reshape(-1), padding=2, dilation=2)),
        ("backward s2 + bias + relu FLOAT16", (n, 256, 28, 28), (256, 128, 3, 3),
         {"direction": "backward", "strides": [2, 2], "start_padding": [1, 1], "end_padding": [1, 1],
          "output_padding": [1, 1]},
         lambda x, w, b: F.conv_transpose2d(x, w, b.reshape(-1), stride=2, padding=1, output_padding=1)),
    ]
    for label, x_shape, w_shape, parameters, call in fused:
        dtype = h32 if "FLOAT32" in label else h16
        backward = parameters.get("direction") == "backward"
        channels = w_shape[1] * parameters.get("group_count", 1) if backward else w_shape[0]
        taps = math.prod(w_shape[1:]) if not backward else w_shape[0] * math.prod(w_shape[2:])
        bias = normal((1, channels) + (1,) * (len(x_shape) - 2), dtype)
        cases.append((label, 1.0, dict(parameters, **relu),
                      [normal(x_shape, dtype), normal(w_shape, dtype, 1 / math.sqrt(taps)), bias], relu_of(call)))
    return [("convolution",) + case for case in cases]


def _attention_cases(cp, torch):
    """MULTIHEAD_ATTENTION FLOAT16 [1, 32, 2048, 128]: QueryTensor, KeyTensor, ValueTensor {1, 2048, 4096}."""
    F = torch.nn.functional
    rng = cp.random.default_rng(1)
    batch, heads, sequence, size = 1, 32, 2048, 128
    q, k, v = (rng.standard_normal((batch, sequence, heads * size), dtype=cp.float32).astype(cp.float16)
               for _ in range(3))
    scale = 1 / math.sqrt(size)

    def heads_major(t):
        return t.view(batch, sequence, heads, size).transpose(1, 2)

    def sdpa(causal):
        return lambda q, k, v, *rest: F.scaled_dot_product_attention(heads_major(q), heads_major(k), heads_major(v),
                                                                      is_causal=causal, scale=scale)

    def sdpa_masked(q, k, v, *rest):
        """The same mask given to PyTorch as a tensor (True: the key takes part), as a DirectML call gives it: neither
        side is told that it is causal, so neither can skip the masked half."""
        return F.scaled_dot_product_attention(heads_major(q), heads_major(k), heads_major(v), attn_mask=boolean_mask,
                                              scale=scale)

    none = [None] * 8
    causal_mask = cp.tri(sequence, dtype=cp.int32).reshape(1, 1, sequence, sequence)
    boolean_mask = torch.from_dlpack(causal_mask) != 0
    # scaled_dot_product_attention gives the attention alone: the goal's calls leave the present keys and values out
    # (outputs=, as a DirectML call whose desc has no present tensors); one call with them shows what they cost.
    alone = {"outputs": "OutputTensor"}
    return [
        ("multihead_attention", "attention [1,32,2048,128] FLOAT16", 0.9,
         {"head_count": heads, "scale": scale, **alone}, [q, k, v] + none, sdpa(False)),
        ("multihead_attention", "the same with the present keys and values", None,
         {"head_count": heads, "scale": scale}, [q, k, v] + none, sdpa(False)),
        ("multihead_attention", "attention causal (BOOLEAN mask) FLOAT16", 0.9,
         {"head_count": heads, "scale": scale, "mask_type": "boolean", **alone},
         [q, k, v, None, None, None, None, causal_mask, None, None, None], sdpa(True)),
        ("multihead_attention", "the same against PyTorch given the mask", 0.9,
         {"head_count": heads, "scale": scale, "mask_type": "boolean", **alone},
         [q, k, v, None, None, None, None, causal_mask, None, None, None], sdpa_masked),
        ("multihead_attention1", "attention1 causal (past lengths) FLOAT16", 0.9,
         {"query_head_count": heads, "key_value_head_count": heads, "scale": scale, **alone},
         [q, k, v] + none + [cp.zeros(batch, dtype=cp.int32)], sdpa(True)),
    ]


def _compare(cp, ours, theirs) -> float:
    """The largest difference relative to the largest value of PyTorch's result."""
    theirs_cp = cp.from_dlpack(theirs.contiguous()).astype(cp.float32)
    ours = ours.astype(cp.float32)
    if ours.ndim == 3 and theirs_cp.ndim == 4:  # attention: dmlcli's {B, S, H * vhs} against PyTorch's {B, H, S, vhs}
        b, h, s, d = theirs_cp.shape
        ours = ours.reshape(b, s, h, d).transpose(0, 2, 1, 3)
    scale = float(cp.abs(theirs_cp).max()) or 1.0
    return float(cp.abs(ours - theirs_cp).max()) / scale


def _run_case(cp, torch, backend, engine_api, cudnn_graphs, case, repeats: int) -> str:
    operator, label, goal, parameters, inputs, baseline = case
    host_like = [None if x is None else np.empty(x.shape, dtype=np.dtype(x.dtype)) for x in inputs]
    call = engine_api.validate(operator, *host_like, **parameters).call
    run = lambda: backend.execute_shaped_device(call.operator, inputs, call.outputs, call.parameters)  # noqa: E731
    tensors = [None if x is None else torch.from_dlpack(x) for x in inputs]
    ours = run()[0]
    family = "attention" if "attention" in operator else "convolution"
    path = cudnn_graphs.LAST_CHOICE.get(family, "?")
    theirs = baseline(*tensors)
    error = _compare(cp, ours, theirs)
    limit = 2e-2 if ours.dtype == cp.float16 else 1e-3
    if not error <= limit:
        return f"{label:42} MISMATCH against PyTorch (largest error {error:.3g} of the largest value); path {path}"
    ours_s = gpu_median_seconds(cp, run, repeats)
    theirs_s = gpu_median_seconds(cp, lambda: baseline(*tensors), repeats)
    ours_b2b = gpu_stream_seconds(cp, run, repeats)
    theirs_b2b = gpu_stream_seconds(cp, lambda: baseline(*tensors), repeats)
    ratio = theirs_b2b / ours_b2b
    verdict = "no goal" if goal is None else f">= {goal}: " + ("met" if ratio >= goal else "NOT met")
    return (f"{label:42} {ours_s * 1e3:9.3f} {theirs_s * 1e3:9.3f} {theirs_s / ours_s:7.2f} {ours_b2b * 1e3:9.3f} "
            f"{theirs_b2b * 1e3:9.3f} {ratio:7.2f}  {verdict}; path {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32, help="the 2-D convolutions' N")
    parser.add_argument("--only", choices=("conv", "attention"), default=None)
    args = parser.parse_args(argv)
    found = torch_and_gpu()
    if found is None:
        return 0
    cp, torch, backend = found
    import dmlcli
    from dmlcli.operators.numerics import cudnn_graphs

    print(warm_up(cp))
    print(f"GPU: {backend.device_name}; CuPy {cp.__version__}; PyTorch {torch.__version__} (its cuDNN "
          f"{torch.backends.cudnn.version()}); dmlcli's cuDNN: {cudnn_graphs.describe()}")
    print(f"CUDA-event medians of {args.repeats} calls; ratio = torch / dmlcli (back to back)")
    print(f"{'case':42} {'dmlcli ms':>9} {'torch ms':>9} {'ratio':>7} {'b2b dml':>9} {'b2b torch':>9} {'ratio':>7}  "
          "goal; path")
    cases = []
    for family, make in (("conv", lambda: _convolution_cases(cp, torch, args.batch)),
                         ("attention", lambda: _attention_cases(cp, torch))):
        if args.only in (None, family):
            try:
                cases += make()
            except Exception:  # noqa: BLE001 - the inputs of a family could not be made: say so, go on
                print(f"{family}: the cases could not be made:\n{traceback.format_exc()}")
    failures = 0
    for case in cases:
        try:
            print(_run_case(cp, torch, backend, dmlcli, cudnn_graphs, case, args.repeats), flush=True)
        except Exception as error:  # noqa: BLE001 - one case's failure must not hide the others
            failures += 1
            print(f"{case[1]:42} FAILED: {type(error).__name__}: {error}\n{traceback.format_exc(limit=-4)}",
                  flush=True)
        cp.get_default_memory_pool().free_all_blocks()
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
