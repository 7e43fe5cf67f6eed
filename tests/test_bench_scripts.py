"""Every script in bench/ runs: each is imported and its entry point, main(argv), called on a tiny input.

The figures of such runs mean nothing; what is checked is that the script gets to its end (exit status 0)
and prints its report. The GPU scripts say "skipped" and exit 0 where CuPy or a GPU is missing.
"""

import importlib
from pathlib import Path

import pytest

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
except Exception:  # noqa: BLE001 - PyTorch missing or broken: torch_gpu_bench must skip
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
    "dispatch_bench": (lambda tmp: ["--rows", "4", "--cols", "8", "--iterations", "2"], "ratio dispatch / baseline"),
    "ftz_probe": (lambda tmp: ["--elements", "64"], "bit-exact with NumPy"),
    "generation_cpu_bench": (lambda tmp: ["--mib", "1", "--repeats", "1"], "geometric mean"),
    "gpu_cast_probe": (lambda tmp: [], "type pairs where CuPy's astype differs"),
    "indexing_cpu_bench": (lambda tmp: ["--mib", "1", "--repeats", "1"], "worst ratio"),
    "matmul_cpu_bench": (lambda tmp: ["--size", "16", "--repeats", "1"], "worst ratio"),
    "matmul_gpu_bench": (lambda tmp: ["--size", "16", "--repeats", "1"], "GEMM on"),
    "movement_cpu_bench": (lambda tmp: ["--mib", "1", "--repeats", "1"], "worst ratio"),
    "normalization_cpu_bench": (lambda tmp: ["--mib", "0.25", "--repeats", "1"], "worst ratio"),
    "npz_bench": (lambda tmp: ["--sizes", "1", "--kinds", "deflated", "--runs", "1", "--folder", str(tmp)], "ratio"),
    "pooling_cpu_bench": (lambda tmp: ["--mib", "0.05", "--repeats", "1"], "ratio: dmlcli"),
    "recurrent_cpu_bench": (lambda tmp: ["--repeats", "1"], "lstm"),
    "shaped_cpu_bench": (lambda tmp: ["--mib", "0.1", "--repeats", "1"], "worst ratio"),
    "shaped_gpu_bench": (lambda tmp: ["--gib", "0.001", "--repeats", "1"], "dmlcli / CuPy time"),
    "gpu_bench": (lambda tmp: ["--gib", "0.001", "--repeats", "1", "--e2e-repeats", "1", "--chunk-mib", "1",
                               "--ops", "bit_xor", "--dir", str(tmp)], "End to end"),
    "gpu_compile_all": (lambda tmp: ["--processes", "1", "--ops", "bit_xor"], "compiled"),
    "gpu_parity": (lambda tmp: ["--ops", "bit_xor", "--elements", "17"], "operators match"),
    "gpu_stream_run": (lambda tmp: ["--runs", "1", "--mib", "0.01"], "the CPU"),
    "stream_bench": (lambda tmp: ["--ops", "bit_xor", "--sizes", "1", "--runs", "1", "--workdir", str(tmp),
                                  "--plot", str(tmp / "plot.png"), "--json", str(tmp / "rows.json")], "| bit_xor"),
    "stream_startup": (lambda tmp: ["--runs", "1", "--installs", "editable"], "dmlcli run (table)"),
    "torch_gpu_bench": (lambda tmp: ["--size", "64", "--batch", "1", "--repeats", "1"], "torch/dmlcli"),
    "suite_bench": (lambda tmp: ["--skip-conformance", "--cases", "2", "--elements", "16", "--runs", "1"],
                    "speed-up"),
}
GPU_SCRIPTS = {"ftz_probe", "gpu_bench", "gpu_cast_probe", "gpu_compile_all", "gpu_parity", "gpu_stream_run",
               "matmul_gpu_bench", "shaped_gpu_bench", "torch_gpu_bench"}


def test_every_bench_script_has_a_tiny_run():
    assert sorted(TINY) == sorted(path.stem for path in BENCH.glob("*.py"))


@pytest.mark.parametrize("name", sorted(TINY))
def test_bench_script_runs_on_a_tiny_input(name, tmp_path, capsys, monkeypatch):
    if name == "dask_bench" and not _dask_installed():
        pytest.skip("the dask extra is not installed")
    monkeypatch.syspath_prepend(str(BENCH))  # spawned workers import the script by its module name too
    module = importlib.import_module(name)
    arguments, expected = TINY[name]
    status = module.main(arguments(tmp_path))
    out = capsys.readouterr().out
    assert status == 0, out
    if name in GPU_SCRIPTS and not (HAS_TORCH_GPU if name == "torch_gpu_bench" else HAS_GPU):
        assert out.startswith("skipped: "), out
    else:
        assert expected in out, out


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
