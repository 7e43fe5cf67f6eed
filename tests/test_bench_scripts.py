"""Every script in bench/ runs: each is imported and its entry point, main(argv), called on a tiny input.

The figures of such runs mean nothing; what is checked is that the script gets to its end (exit status 0)
and prints its report. The GPU scripts say "skipped" and exit 0 where CuPy or a GPU is missing.
"""

import importlib
import sys
from pathlib import Path

import pytest

from conftest import SHARED, SHARED_MISSING

BENCH = Path(__file__).resolve().parents[1] / "bench"
try:
    from dmlcli.backends import gpu

    gpu.create()
    HAS_GPU = True
except Exception:  # noqa: BLE001 - any reason at all: the GPU scripts must skip
    HAS_GPU = False
try:
    import torch

    HAS_TORCH_GPU = HAS_GPU and torch.cuda.is_available()
except Exception:  # noqa: BLE001 - PyTorch missing or broken: torch_gpu_bench and cudnn_bench must skip
    HAS_TORCH_GPU = False


def _dask_installed() -> bool:
    try:
        import distributed  # noqa: F401
        import zarr  # noqa: F401
    except ImportError:
        return False
    return True


# script -> (its arguments for a tiny run (a function of a temporary folder), text its report must hold)
TINY = {
    "api_overhead": (lambda tmp: ["--batches", "1", "--calls", "2"], "µs per call"),
    "check_bench": (lambda tmp: ["--millions", "0.001", "--repeats", "1"], "all differ by 1-2 ULP"),
    "conv_cpu_bench": (lambda tmp: ["--repeats", "1"], "worst ratio"),
    "cpu_ops_bench": (lambda tmp: ["--mib", "0.01", "--repeats", "1"], "median ratio"),
    "dask_bench": (lambda tmp: ["--gib", "0.0005", "--workers", "1", "--runs", "1", "--gpu", "no", "--chunk-mib",
                                "0.0625", "--ceiling-mib", "1", "--ceiling-repeats", "1", "--dir", str(tmp / "d"),
                                "--json", str(tmp / "dask.json")], "| cpu | 1 |"),
    "dispatch_formats_bench": (lambda tmp: ["--repeats", "1", "--iterations", "1", "--image-size", "16"],
                               "per dispatch"),
    "dispatch_bench": (lambda tmp: ["--repeats", "1", "--models", "dml_gemm,dml_rnn,onnx_dynamic_shapes,hlsl_add_fp32,"
                                    "dmlSerializedGraph_matmul_add"], "median ratio"),
    "dispatch_overhead_bench": (lambda tmp: ["--rows", "4", "--cols", "8", "--iterations", "2"],
                                "ratio dispatch / baseline"),
    "ftz_probe": (lambda tmp: ["--elements", "64"], "bit-exact with NumPy"),
    "gelu_cpu_bench": (lambda tmp: ["--repeats", "2"], "same bits in every case: yes"),
    "gelu_erfc_check": (lambda tmp: ["--step", "65536"], "differing bits in all: 0"),
    "generation_cpu_bench": (lambda tmp: ["--mib", "1", "--repeats", "1"], "geometric mean"),
    "gpu_cast_probe": (lambda tmp: [], "type pairs where CuPy's astype differs"),
    "indexing_cpu_bench": (lambda tmp: ["--mib", "1", "--repeats", "1"], "worst ratio"),
    "matmul_cpu_bench": (lambda tmp: ["--size", "16", "--repeats", "1"], "worst ratio"),
    "matmul_gpu_bench": (lambda tmp: ["--size", "16", "--repeats", "1"], "GEMM on"),
    "products_gpu_bench": (lambda tmp: ["--size", "16", "--repeats", "1"], "torch / products"),
    "movement_cpu_bench": (lambda tmp: ["--mib", "1", "--repeats", "1"], "worst ratio"),
    "normalization_cpu_bench": (lambda tmp: ["--mib", "0.25", "--repeats", "1"], "worst ratio"),
    "npz_bench": (lambda tmp: ["--sizes", "1", "--kinds", "deflated", "--runs", "1", "--folder", str(tmp)], "ratio"),
    "onnx_model_bench": (lambda tmp: ["--repeats", "1", "--models", "encoder_small"], "dmlcli / ORT"),
    "onnx_run_loop_bench": (lambda tmp: ["--runs", "1", "--block", "1", "--models", "encoder_small"],
                            "runners / run_step"),
    "onnx_products_bench": (lambda tmp: ["--repeats", "2", "--shapes", "4x8x16"], "| 4x8 by 8x16 |"),
    "pooling_cpu_bench": (lambda tmp: ["--mib", "0.05", "--repeats", "1"], "ratio: dmlcli"),
    "recurrent_cpu_bench": (lambda tmp: ["--repeats", "1"], "lstm"),
    "shaped_cpu_bench": (lambda tmp: ["--mib", "0.1", "--repeats", "1"], "worst ratio"),
    "shaped_gpu_bench": (lambda tmp: ["--gib", "0.001", "--repeats", "1"], "dmlcli / CuPy time"),
    "small_kernels_bench": (lambda tmp: ["--tiny", "--cases", "{1,16,128},{1,4,16,16},by a scalar,{4,16,32}"],
                            "old/new"),
    "shaped_paths_gpu_bench": (lambda tmp: ["--mib", "0.01", "--repeats", "1"], "fraction of the copy"),
    "gpu_bench": (lambda tmp: ["--gib", "0.001", "--repeats", "1", "--e2e-repeats", "1", "--chunk-mib", "1",
                               "--ops", "bit_xor", "--dir", str(tmp)], "End to end"),
    "gpu_compile_all": (lambda tmp: ["--processes", "1", "--ops", "bit_xor"], "compiled"),
    "gpu_parity": (lambda tmp: ["--ops", "bit_xor", "--elements", "17"], "operators match"),
    "gpu_stream_run": (lambda tmp: ["--runs", "1", "--mib", "0.01"], "the CPU"),
    "stream_bench": (lambda tmp: ["--ops", "bit_xor", "--sizes", "1", "--runs", "1", "--workdir", str(tmp),
                                  "--plot", str(tmp / "plot.png"), "--json", str(tmp / "rows.json")], "| bit_xor"),
    "stream_startup": (lambda tmp: ["--runs", "1", "--installs", "editable"], "dmlcli run (table)"),
    "torch_gpu_bench": (lambda tmp: ["--size", "64", "--batch", "1", "--repeats", "1"], "torch/dmlcli"),
    "cudnn_bench": (lambda tmp: ["--batch", "1", "--repeats", "1"], "path"),
    "causal_check_bench": (lambda tmp: ["--rounds", "1", "--rows", "1", "--calls", "2", "--size", "256"],
                           "check launched plain: adds"),
    "suite_bench": (lambda tmp: ["--skip-conformance", "--cases", "2", "--elements", "16", "--runs", "1"],
                    "speed-up"),
}
NEEDS_SHARED = {"dispatch_bench", "dispatch_formats_bench", "onnx_model_bench", "onnx_run_loop_bench"}  # they read ../shared
GPU_SCRIPTS = {"ftz_probe", "gpu_bench", "gpu_cast_probe", "gpu_compile_all", "gpu_parity", "gpu_stream_run",
               "matmul_gpu_bench", "shaped_gpu_bench", "shaped_paths_gpu_bench", "torch_gpu_bench", "cudnn_bench",
               "products_gpu_bench", "causal_check_bench"}
NEEDS_TORCH = {"torch_gpu_bench", "cudnn_bench", "products_gpu_bench", "causal_check_bench"}


def test_every_bench_script_has_a_tiny_run():
    assert sorted(TINY) == sorted(path.stem for path in BENCH.glob("*.py"))


@pytest.mark.parametrize("name", sorted(TINY))
def test_bench_script_runs_on_a_tiny_input(name, tmp_path, capsys, monkeypatch):
    if name == "dask_bench" and not _dask_installed():
        pytest.skip("the dask extra is not installed")
    if name == "stream_startup" and not (Path(sys.executable).parent / "dmlcli").exists():
        pytest.skip("dmlcli's console script is not installed beside this Python (a checkout run with PYTHONPATH=.)")
    if name in NEEDS_SHARED and not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)
    monkeypatch.syspath_prepend(str(BENCH))  # spawned workers import the script by its module name too
    module = importlib.import_module(name)
    arguments, expected = TINY[name]
    status = module.main(arguments(tmp_path))
    out = capsys.readouterr().out
    assert status == 0, out
    if name in GPU_SCRIPTS and not (HAS_TORCH_GPU if name in NEEDS_TORCH else HAS_GPU):
        assert out.startswith("skipped: "), out
    else:
        assert expected in out, out


def test_cpu_ops_bench_puts_a_nan_every_n_elements(capsys, monkeypatch):
    """--nan-every 97 (issue 33's SIGN and THRESHOLD case): the report says so, and every 97th element of an input
    is a NaN, the others not; 0 leaves the input alone and a negative count is refused."""
    import numpy as np

    monkeypatch.syspath_prepend(str(BENCH))
    module = importlib.import_module("cpu_ops_bench")
    assert module.main(["--mib", "0.01", "--repeats", "1", "--ops", "sign,threshold", "--nan-every", "97"]) == 0
    assert "a NaN every 97 elements" in capsys.readouterr().out
    values = module.with_nans(np.ones(1000, np.float32), 97)
    assert np.flatnonzero(np.isnan(values)).tolist() == list(range(0, 1000, 97))
    assert not np.isnan(module.with_nans(np.ones(10, np.float32), 0)).any()
    with pytest.raises(SystemExit):
        module.main(["--nan-every", "-1"])


def test_gpu_bench_pipeline_files_runs_on_the_cpu_backend(tmp_path, monkeypatch):
    """The crash of issue 21: in end_to_end a local `from dmlcli import run_files` hid the script's own
    seven-argument helper. The helper (now pipeline_files) runs here through the CPU backend, given
    ordinary memory for its pinned buffers, and writes BIT_XOR's result."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from dmlcli.backends import cpu
    from dmlcli.operators import find_operator

    monkeypatch.syspath_prepend(str(BENCH))
    module = importlib.import_module("gpu_bench")

    class HostMemoryBackend:
        def __init__(self):
            self.inner = cpu.create()

        def pinned_empty(self, shape, dtype):
            return np.empty(shape, dtype)

        def execute_chunks(self, operator, chunks, out_dtype, parameters):
            return self.inner.execute_chunks(operator, chunks, out_dtype, parameters)

    rng = np.random.default_rng(21)
    inputs = [rng.integers(0, 256, 5000, dtype=np.uint8) for _ in range(2)]
    sources = []
    for index, array in enumerate(inputs):
        sources.append(tmp_path / f"in{index}.npy")
        np.save(sources[-1], array)
    output = tmp_path / "out.npy"
    with ThreadPoolExecutor(4) as pool:
        module.pipeline_files(HostMemoryBackend(), find_operator("bit_xor"), sources, output, np.uint8, 1024, pool)
    assert np.array_equal(np.load(output), inputs[0] ^ inputs[1])


# ---------------------------------------------------------------- bench/dispatch_bench.py: its check and its refusals


@pytest.fixture
def dispatch_bench(monkeypatch):
    if not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("dispatch_bench")


def test_dispatch_bench_fails_when_a_script_disagrees_with_dmlcli(dispatch_bench, monkeypatch, capsys):
    """CLIP is exact: one element a little off (2.4 for 2.5) is a mismatch, the bench's failure (exit 1)."""
    import numpy as np

    wrong = np.float32([-2.5, -2.5, -2, -1, 0, 1, 2, 2.5, 2.4])
    monkeypatch.setitem(dispatch_bench.SCRIPTS, "dml_element_wise_clip", lambda work: {"A": wrong})
    status = dispatch_bench.main(["--repeats", "1", "--models", "dml_element_wise_clip,dml_element_wise_add"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "MISMATCH: A: FAILED: 1 of 9 elements differ" in out and "at [8]" in out, out
    assert "1 models timed" in out and "1 mismatches" in out, out


def test_dispatch_bench_accepts_a_difference_within_the_operators_tolerance(dispatch_bench, monkeypatch, capsys):
    """GEMM's tolerance (WebNN: 2K + 1 ULP with C, K = 1, and an absolute floor): one ULP off passes, and the check
    column says within what; 16 ULP off fails."""
    import numpy as np

    exact = np.float32([6, 7, 8, 10, 12, 14, 14, 17, 20])
    monkeypatch.setitem(dispatch_bench.SCRIPTS, "dml_gemm",
                        lambda work: {"output": np.nextafter(exact, np.float32(100))})
    assert dispatch_bench.main(["--repeats", "1", "--models", "dml_gemm"]) == 0
    assert "within 3 ULP" in capsys.readouterr().out
    monkeypatch.setitem(dispatch_bench.SCRIPTS, "dml_gemm",
                        lambda work: {"output": (exact.view(np.uint32) + 16).view(np.float32)})
    assert dispatch_bench.main(["--repeats", "1", "--models", "dml_gemm"]) == 1


def test_dispatch_bench_refuses_an_unknown_model_in_one_line(dispatch_bench, capsys):
    assert dispatch_bench.main(["--models", "dml_gemm,dml_gem"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "no model dml_gem in" in captured.err, captured.err


def test_dispatch_bench_json_lists_every_model(dispatch_bench, capsys):
    """--json: one object per model; the HLSL ones not run, the rest timed or refused by dmlcli with its sentence."""
    import json

    assert dispatch_bench.main(["--repeats", "1", "--json", "--models",
                                "hlsl_add_fp16,dml_split,dmlSerializedGraph_matmul_add"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {row["model"]: row for row in report["models"]}
    assert rows["hlsl_add_fp16"]["status"] == "not run"
    assert rows["dml_split"]["status"] == "timed" and rows["dml_split"]["check"] == "bit for bit"
    assert rows["dml_split"]["ratio"] == pytest.approx(rows["dml_split"]["dmlcli_ms"] / rows["dml_split"]["script_ms"])
    graph = rows["dmlSerializedGraph_matmul_add"]
    assert graph["status"] == "timed" or (graph["status"] == "refused" and "dmlSerializedGraph" in graph["reason"])
    assert report["summary"]["worst_model"] in rows


def test_dispatch_bench_matmul_add_script_is_the_onnx_graph(dispatch_bench, tmp_path):
    """The serialized graph's script (timed once dmlcli runs the model) computes what matmul_add.onnx, the graph it
    was serialized from, computes on the model's input."""
    import numpy as np

    onnxruntime = pytest.importorskip("onnxruntime")
    folder = SHARED / "dxdispatch_models"
    work = dispatch_bench.Work(np, folder, tmp_path, "cpu")
    session = onnxruntime.InferenceSession(str(folder / "matmul_add" / "matmul_add.onnx"),
                                           providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"model_input": np.full((1, 5), 1.5, np.float32)})
    got = dispatch_bench.serialized_matmul_add(work)["model_output"]
    assert got.dtype == np.float32 and np.array_equal(got, expected)


def test_dispatch_bench_gpu_skips_without_a_gpu(dispatch_bench, capsys):
    status = dispatch_bench.main(["--repeats", "1", "--backend", "gpu", "--models", "dml_element_wise_add"])
    out = capsys.readouterr().out
    assert status == 0, out
    if HAS_GPU:
        assert "dml_element_wise_add" in out and "CuPy script" in out, out
    else:
        assert out.startswith("skipped: "), out
