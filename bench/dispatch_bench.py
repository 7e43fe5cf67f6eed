"""Each of DxDispatch's example models through `dmlcli dispatch`, against a plain NumPy script of the same work.

For every model in ../shared/dxdispatch_models (DMLCLI_SHARED, or --models-dir), the median over --repeats
runs, the two sides alternating, of:
  - dmlcli: load_model + run_model, as `dmlcli dispatch MODEL.json` runs them (parse, validate, initial values,
    the dispatches, DxDispatch's timing line and prints, here into a text buffer, and the writeFile targets, here
    into a temporary folder);
  - the script: the same work written by hand for that model: the initial values made as DxDispatch makes them,
    the operator's math on them in NumPy (CuPy with --backend gpu: the values go to the GPU and the results come
    back, as dmlcli's do), the same files written; for the ONNX models an onnxruntime session made and run, for
    image_io Pillow's decode and resize, the 1x1 convolution and Pillow's encode.
Before it is timed, each script's result is checked against what dmlcli left for that model (the bytes of every
resource it prints or writes; the printed text for a deferred one): bit for bit, or within the operator's
tolerance, the rule `dmlcli run --check` applies (the "check" column). A mismatch fails the bench: exit 1.
The two HLSL models are not run (DirectX's shader compiler); a model dmlcli refuses is listed with its sentence.

    PYTHONPATH=. python bench/dispatch_bench.py [--repeats 7] [--backend cpu|gpu] [--models dml_gemm,dml_rnn] [--json]

What one large dispatch costs over dmlcli.api.run is bench/dispatch_overhead_bench.py's measurement.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dmlcli.checking.comparison import EXACT, Rule, compare_arrays, rule_for  # noqa: E402
from dmlcli.dispatch import check, load_model, run_model  # noqa: E402
from dmlcli.errors import DmlcliError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = Path(os.environ.get("DMLCLI_SHARED") or REPO.parent / "shared").resolve() / "dxdispatch_models"
NOT_RUN = {
    "hlsl_add_fp16": "HLSL: needs DirectX's shader compiler",
    "hlsl_add_fp32": "HLSL: needs DirectX's shader compiler",
}
# Where no operator of dmlcli's table computes a resource (a serialized graph), the rule is the bench's:
# WebNN's gemm figure, 2K + 1 ULP for K = 5 products and a bias.
FALLBACK_RULES = {"dmlSerializedGraph_matmul_add": Rule("ulp", 11, "WebNN gemm: 2K + 1 ULP, K = 5")}


@dataclass
class Work:
    """What a script needs: the array module (numpy or cupy), the models' folder and a folder to write in."""

    xp: object
    models: Path
    folder: Path
    backend: str

    def device(self, array: np.ndarray):
        return self.xp.asarray(array)

    def host(self, array) -> np.ndarray:
        return array.get() if hasattr(array, "get") else np.asarray(array)


# ---------------------------------------------------------------- initial values, as DxDispatch makes them


def listed(values: list[float], dtype=np.float32) -> np.ndarray:
    """A JSON list: each number read as a double, cast to float (then half)."""
    return np.array(values, dtype=np.float64).astype(np.float32).astype(dtype)


def constant(count: int, value: float, dtype=np.float32) -> np.ndarray:
    return np.full(count, listed([value], dtype)[0], dtype=dtype)


def sequence(count: int, start: float, delta: float, dtype=np.float32) -> np.ndarray:
    """{"valueStart", "valueDelta"}: the delta added in the element type at each step, so that rounding compounds."""
    steps = np.full(count, listed([delta], dtype)[0], dtype=dtype)
    steps[0] = listed([start], dtype)[0]
    return np.add.accumulate(steps, dtype=dtype)  # in order, one rounding per step


# ---------------------------------------------------------------- the scripts: one per model, the same work by hand


def elu(xp, x, alpha: float):
    # expm1 of the negative part alone: where() evaluates both branches, and expm1 of a large x overflows.
    return xp.where(x >= 0, x, np.float32(alpha) * xp.expm1(xp.minimum(x, 0)))


def correlate(xp, x, w):
    """CROSS_CORRELATION, forward, strides and dilations 1, no padding, one group: each output point the dot
    product of the filter with the window of the input under it (sliding_window_view, then tensordot)."""
    spatial = tuple(range(2, x.ndim))
    windows = xp.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=spatial)
    channel_and_taps = [1, *range(x.ndim, windows.ndim)]
    out = xp.tensordot(windows, w, axes=(channel_and_taps, list(range(1, w.ndim))))  # N, spatial..., M
    return xp.moveaxis(out, -1, 1)


def convolution_2d(work: Work) -> dict:
    x = work.device(sequence(9, 1, 1).reshape(1, 1, 3, 3))
    w = work.device(listed([0.5] * 4).reshape(1, 1, 2, 2))
    return {"output": work.host(correlate(work.xp, x, w))}


def convolution_3d(work: Work) -> dict:
    x = work.device(sequence(27, 1, 0).reshape(1, 1, 3, 3, 3))
    w = work.device(listed([0.5] * 8).reshape(1, 1, 2, 2, 2))
    return {"output": work.host(correlate(work.xp, x, w))}


def cumulative_product(work: Work) -> dict:
    a = work.device(listed([2, 4, 8, 3]).reshape(1, 1, 1, 4))
    return {"Out": work.host(work.xp.cumprod(a, axis=3))}


def element_wise_add(work: Work) -> dict:
    a, b = work.device(listed([1, 2, 3])), work.device(listed([5, 8, -5]))
    return {"Out": work.host(a + b)}


def element_wise_add1(work: Work) -> dict:
    a, b = work.device(listed([1, 2, 3])), work.device(listed([5, 8, -5]))
    return {"Out": work.host(elu(work.xp, a + b, 0.5))}


def element_wise_add_npy(work: Work) -> dict:
    a = work.device(np.load(work.models / "dml_element_wise_add_input.npy"))
    b = work.device(np.fromfile(work.models / "dml_element_wise_add_input.dat", dtype="<f4"))
    out = work.host(a + b)
    np.save(work.folder / "dml_element_wise_add_output.npy", out)
    out.tofile(work.folder / "dml_element_wise_add_output.dat")
    return {"Out": out}


def element_wise_clip(work: Work) -> dict:
    a = work.device(listed([-4, -3, -2, -1, 0, 1, 2, 3, 4]))
    return {"A": work.host(work.xp.clip(a, np.float32(-2.5), np.float32(2.5)))}


def element_wise_identity(work: Work) -> dict:
    a = work.device(listed([1, 2, 3]))
    return {"Out": work.host(a * np.float32(2) + np.float32(10))}


def fill_value_sequence(work: Work) -> dict:
    index = work.xp.arange(5, dtype=np.float32).reshape(1, 1, 1, 5)
    return {"Out": work.host(np.float32(3.2) + index * np.float32(1.5))}


def gemm(work: Work) -> dict:
    a, b = work.device(listed([1, 2, 3]).reshape(3, 1)), work.device(listed([4, 5, 6]).reshape(1, 3))
    c = work.device(constant(9, 2).reshape(3, 3))
    alpha, beta = np.float32(1.0), np.float32(1.0)
    return {"output": work.host(alpha * (a @ b) + beta * c)}


def gemm_graph(work: Work) -> dict:
    a = work.device(constant(1024, 1).reshape(1, 1, 32, 32))
    b = work.device(constant(1024, 1).reshape(1, 1, 32, 32))
    return {"output": work.host(np.float32(1.0) * (a @ b))}  # no CTensor: Beta multiplies nothing


def join(work: Work) -> dict:
    a, b = work.device(sequence(10, 1, 1)), work.device(sequence(3, 100, 15))
    # The bindings: A's elements 0-2, B, A's elements 4-8.
    return {"Out": work.host(work.xp.concatenate([a[0:3], b[0:2], a[4:9]]))}


def owned_tensors(work: Work) -> dict:
    return element_wise_add(work)


def reduce_sum(work: Work) -> dict:
    x = work.device(sequence(9, 1, 1).reshape(1, 1, 3, 3))
    return {"input": work.host(x), "output": work.host(work.xp.sum(x, axis=3, keepdims=True))}


def rnn(work: Work) -> dict:
    """Bidirectional simple RNN, no bias or initial state: for each direction, H = f(X[t] W^T + H R^T) over the
    sequence (forwards, then backwards), f the direction's ELU; OutputSingleTensor is each direction's last H."""
    xp = work.xp
    x = work.device(sequence(32, 1, 1).reshape(1, 1, 8, 4))  # seq_length 1, 1, batch 8, input 4
    w = work.device(sequence(40, 1, 0.4).reshape(1, 2, 5, 4))  # 1, directions, hidden 5, input 4
    r = work.device(constant(50, 0.3).reshape(1, 2, 5, 5))
    seq_length, batch, hidden = x.shape[0], x.shape[2], w.shape[2]
    out = xp.zeros((1, 2, batch, hidden), dtype=np.float32)
    for direction, (alpha, steps) in enumerate([(0.5, range(seq_length)), (3.5, range(seq_length - 1, -1, -1))]):
        h = xp.zeros((batch, hidden), dtype=np.float32)
        for t in steps:
            h = elu(xp, x[t, 0] @ w[0, direction].T + h @ r[0, direction].T, alpha)
        out[0, direction] = h
    return {"output": work.host(out)}


def scalar_union_fp16(work: Work) -> dict:
    x = work.device(sequence(5, 1, 1, np.float16))
    return {"output": work.host(work.xp.clip(x, np.float16(2), np.float16(4)))}


def slice_(work: Work) -> dict:
    x = work.device(sequence(25, 1, 1).reshape(1, 1, 5, 5))
    # Offsets [0, 0, 1, 1], Sizes [1, 1, 3, 2], Strides [1, 1, 1, 2].
    return {"output": work.host(x[0:1, 0:1, 1:4:1, 1:5:2])}


def split(work: Work) -> dict:
    a = work.device(listed([1, 2, 3, 4, 5, 6]))
    out1, out2, out3 = work.xp.split(a, 3)
    return {"Out1": work.host(out1), "Out2": work.host(out2), "Out3": work.host(out3)}


def linear_weights(xp, size_in: int, scale: int):
    """Bilinear upsampling along one axis: half-pixel centres, source positions clamped to the input."""
    position = xp.clip((xp.arange(size_in * scale, dtype=np.float32) + np.float32(0.5)) / np.float32(scale)
                       - np.float32(0.5), 0, size_in - 1)
    low = xp.floor(position).astype(np.int64)
    high = xp.minimum(low + 1, size_in - 1)
    return low, high, position - low.astype(np.float32)


def upsample_2d(work: Work) -> dict:
    xp = work.xp
    x = work.device(sequence(4, 1, 1).reshape(1, 1, 2, 2))
    low, high, frac = linear_weights(xp, 2, 2)
    rows = x[:, :, low, :] + frac[:, None] * (x[:, :, high, :] - x[:, :, low, :])
    out = rows[:, :, :, low] + frac * (rows[:, :, :, high] - rows[:, :, :, low])
    return {"output": work.host(out)}


def image_io(work: Work) -> dict:
    """Pillow's decode and bicubic resize to 512 x 512, c / 255 planar, the 1x1 grey filter, Pillow's PNG encode."""
    from PIL import Image

    image = Image.open(work.models / "chihuahua.jpg").convert("RGB")
    if image.size != (512, 512):
        image = image.resize((512, 512), Image.Resampling.BICUBIC)
    planar = (np.asarray(image).astype(np.float32) / np.float32(255.0)).transpose(2, 0, 1)[None]
    w = listed([0.2989, 0.5870, 0.1140]).reshape(1, 3, 1, 1)
    grey = work.host(correlate(work.xp, work.device(np.ascontiguousarray(planar)), work.device(w)))
    pixels = np.trunc(np.where(np.isnan(grey), np.float32(1), np.clip(grey, 0, 1)) * np.float32(255)).astype(np.uint8)
    Image.fromarray(pixels[0, 0]).save(work.folder / "output.png", format="PNG")
    return {"output": grey}


def onnx_session(work: Work, name: str):
    import onnxruntime

    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if work.backend == "gpu" else ["CPUExecutionProvider"]
    return onnxruntime.InferenceSession(str(work.models / name), providers=providers)


def onnx_gemm(work: Work) -> dict:
    session = onnx_session(work, "onnx_gemm.onnx")
    a, b = listed([1, 2, 3, 4, 5, 6]).reshape(3, 2), listed([1, 2, 3, 4, 5, 6, 7, 8]).reshape(2, 4)
    (out,) = session.run(["add"], {"A0": a, "B0": b, "A1": a, "B1": b})
    return {"Out": out}


def onnx_dynamic_shapes(work: Work) -> dict:
    """Three runs of one session (x0, x1 [N, 2] concatenated along rows): N = 1 and 3 into c, then 3 into deferredY."""
    session = onnx_session(work, "onnx_dynamic_shapes.onnx")
    a, b = listed([1, 2, 3, 4, 5, 6]), listed([7, 8, 9, 10, 11, 12])
    c = constant(12, 0)
    for rows in (1, 3):
        (y,) = session.run(["y"], {"x0": a[:rows * 2].reshape(rows, 2), "x1": b[:rows * 2].reshape(rows, 2)})
        c[:y.size] = y.reshape(-1)
    (deferred,) = session.run(["y"], {"x0": a.reshape(3, 2), "x1": b.reshape(3, 2)})
    return {"c": c, "deferredY": deferred}


def serialized_matmul_add(work: Work) -> dict:
    """matmul_add/matmul_add.onnx's graph: model_input [1, 5] @ matmul_b_tensor [5, 5] + add_b_tensor [1, 5]."""
    x = work.device(constant(5, 1.5).reshape(1, 5))
    b = work.device(np.fromfile(work.models / "matmul_add" / "matmul_b_tensor.bin", dtype="<f4").reshape(5, 5))
    bias = work.device(np.fromfile(work.models / "matmul_add" / "add_b_tensor.bin", dtype="<f4").reshape(1, 5))
    return {"model_output": work.host(x @ b + bias)}


SCRIPTS: dict[str, Callable[[Work], dict]] = {
    "dmlSerializedGraph_matmul_add": serialized_matmul_add,
    "dml_convolution_2d": convolution_2d,
    "dml_convolution_3d": convolution_3d,
    "dml_cumulative_product": cumulative_product,
    "dml_element_wise_add": element_wise_add,
    "dml_element_wise_add1": element_wise_add1,
    "dml_element_wise_add_npy": element_wise_add_npy,
    "dml_element_wise_clip": element_wise_clip,
    "dml_element_wise_identity": element_wise_identity,
    "dml_fill_value_sequence": fill_value_sequence,
    "dml_gemm": gemm,
    "dml_gemm_graph": gemm_graph,
    "dml_join": join,
    "dml_owned_tensors": owned_tensors,
    "dml_reduce": reduce_sum,
    "dml_rnn": rnn,
    "dml_scalar_union_fp16": scalar_union_fp16,
    "dml_slice": slice_,
    "dml_split": split,
    "dml_upsample_2d": upsample_2d,
    "image_io": image_io,
    "onnx_dynamic_shapes": onnx_dynamic_shapes,
    "onnx_gemm": onnx_gemm,
}


# ---------------------------------------------------------------- dmlcli's side, and the check


def run_dmlcli(path: Path, backend: str, out: Path):
    """`dmlcli dispatch PATH --output-dir OUT`, its printing kept in a buffer rather than shown."""
    sink = io.StringIO()
    run = run_model(load_model(path, output_dir=out), backend=backend, emit=lambda line: sink.write(line + "\n"))
    return run


def rules_by_resource(path: Path, name: str, script_values: dict) -> dict[str, Rule]:
    """The rule each resource is checked by: the tolerance of the operator whose output it is, for that call (as
    `--check` takes it); exact for what no operator of dmlcli's table writes (ONNX Runtime runs both sides)."""
    rules = {resource: FALLBACK_RULES.get(name, EXACT) for resource in script_values}
    for planned in check(load_model(path)):
        call = getattr(getattr(getattr(planned, "checked", None), "verdict", None), "call", None)
        if call is None:
            continue
        for field_name, tensor in planned.tensors.items():
            if field_name.startswith("Output") and tensor.resource in script_values:
                dtype = script_values[tensor.resource].dtype
                rules[tensor.resource] = rule_for(call.operator, dtype, parameters=call.parameters, call=call)
    return rules


def printed_values(lines: list[str], resource: str) -> list[str] | None:
    """The values of the last `Resource 'NAME': v, v, ...` line dmlcli printed for `resource`."""
    prefix = f"Resource '{resource}': "
    found = [line[len(prefix):] for line in lines if line.startswith(prefix)]
    return found[-1].split(", ") if found else None


def check_result(run, rules: dict[str, Rule], script_values: dict) -> tuple[bool, str]:
    """(passed, verdict): each resource the script computed against the same resource after dmlcli's run."""
    verdicts = []
    for resource, value in script_values.items():
        value = np.ascontiguousarray(value)
        contents = run.buffers.get(resource)
        if not contents:  # a deferred resource has no buffer: what was printed is what dmlcli gave
            shown = printed_values(run.lines, resource)
            expected_text = [format(float(v), "g") for v in value.reshape(-1)]
            if shown != expected_text:
                return False, f"{resource}: printed {shown}, the script gives {expected_text}"
            verdicts.append("bit for bit")
            continue
        got = np.frombuffer(bytes(contents), dtype=value.dtype.newbyteorder("<"), count=value.size)
        comparison = compare_arrays(value.reshape(-1), got, rules[resource])
        if not comparison.passed:  # "got" is the script's value, "expected" dmlcli's
            return False, f"{resource}: " + "; ".join(line.strip() for line in comparison.text().splitlines()[:3])
        same = np.array_equal(value.reshape(-1).view(np.uint8), got.astype(value.dtype).view(np.uint8))
        verdicts.append("bit for bit" if same else rules[resource].describe())
    loosest = sorted(set(verdicts), key=lambda v: v != "bit for bit")[-1]
    return True, loosest


# ---------------------------------------------------------------- timing and the report


@dataclass
class Row:
    """One model's line of the report (and its JSON object)."""

    model: str
    status: str  # "timed", "mismatch", "refused", "not run", "no script"
    dmlcli_ms: float | None = None
    script_ms: float | None = None
    ratio: float | None = None  # dmlcli_ms / script_ms
    check: str = ""  # "bit for bit", or the tolerance the results were within
    reason: str = ""  # why it was not timed: the mismatch, dmlcli's refusal, ...


def time_pair(dmlcli: Callable[[], object], script: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Medians of `repeats` runs of each, alternating, so that a load on the machine weighs on both alike."""
    dmlcli_samples, script_samples = [], []
    for _ in range(repeats):
        for work, samples in ((dmlcli, dmlcli_samples), (script, script_samples)):
            start = time.perf_counter()
            work()
            samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(dmlcli_samples), statistics.median(script_samples)


def bench_model(path: Path, backend: str, xp, repeats: int, folder: Path) -> Row:
    name = path.stem
    if name in NOT_RUN:
        return Row(name, "not run", reason=NOT_RUN[name])
    script = SCRIPTS.get(name)
    if script is None:
        return Row(name, "no script", reason="the bench has no NumPy script for this model")
    out = folder / f"{name}.dmlcli"
    work = Work(xp, path.parent, folder / f"{name}.script", backend)
    out.mkdir()
    work.folder.mkdir()
    try:
        run = run_dmlcli(path, backend, out)
    except DmlcliError as error:
        return Row(name, "refused", reason=str(error))
    values = script(work)
    passed, verdict = check_result(run, rules_by_resource(path, name, values), values)
    if not passed:
        return Row(name, "mismatch", check="mismatch", reason=verdict)
    dmlcli_ms, script_ms = time_pair(lambda: run_dmlcli(path, backend, out), lambda: script(work), repeats)
    return Row(name, "timed", dmlcli_ms, script_ms, dmlcli_ms / script_ms, verdict)


def summary(rows: list[Row]) -> dict:
    timed = [row for row in rows if row.status == "timed"]
    worst = max(timed, key=lambda row: row.ratio, default=None)
    return {"timed": len(timed), "mismatches": sum(row.status == "mismatch" for row in rows),
            "refused": sum(row.status == "refused" for row in rows),
            "not_run": sum(row.status in ("not run", "no script") for row in rows),
            "median_ratio": statistics.median(row.ratio for row in timed) if timed else None,
            "worst_model": worst.model if worst else None, "worst_ratio": worst.ratio if worst else None}


def print_table(rows: list[Row], backend: str, repeats: int) -> None:
    baseline = "CuPy script" if backend == "gpu" else "NumPy script"
    print(f"backend {backend}; medians of {repeats} runs (ms); the check: the script's result against dmlcli's")
    width = max(len(row.model) for row in rows)
    print(f"{'model':<{width}}  {'dmlcli':>9}  {baseline:>12}  {'ratio':>7}  check")
    for row in rows:
        if row.status == "timed":
            print(f"{row.model:<{width}}  {row.dmlcli_ms:9.3f}  {row.script_ms:12.4f}  {row.ratio:7.1f}  {row.check}")
        else:
            label = "MISMATCH" if row.status == "mismatch" else row.status
            print(f"{row.model:<{width}}  {'-':>9}  {'-':>12}  {'-':>7}  {label}: {row.reason}")
    total = summary(rows)
    if total["timed"]:
        print(f"{total['timed']} models timed: median ratio {total['median_ratio']:.1f}, worst "
              f"{total['worst_model']} ({total['worst_ratio']:.1f}); {total['mismatches']} mismatches, "
              f"{total['refused']} refused, {total['not_run']} not run")
    else:
        print(f"no model timed; {total['mismatches']} mismatches, {total['refused']} refused, "
              f"{total['not_run']} not run")


def array_module(backend: str):
    """numpy, or cupy where the GPU backend works; None, with the reason, where it does not."""
    if backend == "cpu":
        return np, None
    try:
        from dmlcli.backends import gpu

        gpu.create()
        import cupy
    except Exception as error:  # noqa: BLE001 - any reason at all: the run is skipped, saying why
        return None, str(error).splitlines()[0] if str(error) else type(error).__name__
    return cupy, None


def chosen_models(folder: Path, names: str | None) -> tuple[list[Path], str | None]:
    """The models' files, all or those --models names (stems, .json optional); else the refusal's sentence."""
    models = sorted(path for path in folder.glob("*.json") if path.name != "_schema.json")
    if not names:
        return models, None
    wanted = [name.strip().removesuffix(".json") for name in names.split(",") if name.strip()]
    known = {path.stem: path for path in models}
    unknown = [name for name in wanted if name not in known]
    if unknown or not wanted:
        return [], (f"--models {names!r}: no model {', '.join(unknown) or 'named'} in {folder} "
                    f"(expected names from: {', '.join(sorted(known))})")
    return [known[name] for name in wanted], None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each side (default 7)")
    parser.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--models", default=None, metavar="NAME,NAME", help="only these models (file stems)")
    parser.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS)
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not args.models_dir.is_dir():
        print(f"dispatch_bench: {args.models_dir} not found: it is ../shared/dxdispatch_models beside the clone "
              "(or set DMLCLI_SHARED, or pass --models-dir)", file=sys.stderr)
        return 2
    paths, refusal = chosen_models(args.models_dir, args.models)
    if refusal:
        print(f"dispatch_bench: {refusal}", file=sys.stderr)
        return 2
    xp, why = array_module(args.backend)
    if xp is None:
        print(json.dumps({"skipped": why}) if args.json else f"skipped: no usable GPU ({why})")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        rows = [bench_model(path, args.backend, xp, args.repeats, Path(folder)) for path in paths]
    if args.json:
        print(json.dumps({"backend": args.backend, "repeats": args.repeats,
                          "models": [vars(row) for row in rows], "summary": summary(rows)}, indent=2))
    else:
        print_table(rows, args.backend, args.repeats)
    return 1 if any(row.status == "mismatch" for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
