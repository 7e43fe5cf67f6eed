"""Dask benchmark (issue 14): one operator on a Zarr pair, on a LocalCluster of 1, 2, 4 and 8 workers.

It makes its own inputs (random bytes, so compression cannot shrink them): a pair of Zarr stores of
--gib GiB together (default 4) and the same data as .npy files. Then it times, medians of --runs runs:

  stream      dmlcli.run_files on the .npy pair: the single-process streaming run (the baseline)
  cpu xN      dmlcli.dask.run_stores on the Zarr pair, on a LocalCluster of N worker processes (1 thread each)
  gpu xN      the same with backend="gpu" (each worker's blocks through CuPy), where CuPy finds a GPU
  ceiling xN  N processes each running the operator's NumPy ufunc over buffers in memory, together:
              the memory-bandwidth ceiling of this machine for N workers (no files, no codecs)
  pipeline xN N processes each decoding two chunks with Zarr's default codec, running the kernel and
              encoding the result, in memory: what the cores can do for the run's own work, together
  storage xN  N processes each reading its share of both .npy inputs and writing (fsync) as many bytes:
              what the files themselves can move

Throughput counts the bytes of both inputs and the output over the wall time of the run (GB/s,
10^9). Scaling efficiency: against linear (throughput xN / (N x throughput x1)) and against the
ceiling measured with N processes. Every run writes its output atomically (fsync, rename), as the
command line does. Results go to stdout and, with --json, to a file.

    .venv/bin/python bench/dask_bench.py --gib 0.25 --workers 1,2 --runs 1   # a quick local run
    python bench/dask_bench.py --json out.json                                # the issue's run (4 GiB)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GB = 1e9
ROW = 1 << 14  # bytes per row of the 2-D inputs


def make_inputs(folder: Path, total_bytes: int, dtype: np.dtype, chunk_rows: int) -> dict:
    """a.zarr, b.zarr, a.npy, b.npy with the same random contents, written chunk by chunk."""
    import zarr

    rows = max(chunk_rows, total_bytes // 2 // ROW)
    shape = (rows, ROW // dtype.itemsize)
    rng = np.random.default_rng(14)
    paths = {}
    for name in ("a", "b"):
        npy = np.lib.format.open_memmap(folder / f"{name}.npy", mode="w+", dtype=dtype, shape=shape)
        store = zarr.create_array(store=str(folder / f"{name}.zarr"), shape=shape, chunks=(chunk_rows, shape[1]),
                                  dtype=dtype, overwrite=True)
        for start in range(0, rows, chunk_rows):
            stop = min(rows, start + chunk_rows)
            block = rng.integers(0, 256, size=(stop - start) * ROW, dtype=np.uint8).view(dtype).reshape(-1, shape[1])
            npy[start:stop] = block
            store[start:stop] = block
        npy.flush()
        del npy
        paths[name] = (str(folder / f"{name}.zarr"), str(folder / f"{name}.npy"))
    return {"shape": shape, "paths": paths, "bytes": 3 * rows * ROW}


def timed(function, runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        os.sync()  # nobody pays for another run's dirty pages
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return seconds


def together(worker, jobs: list[tuple]) -> float:
    """Run worker(job + (barrier,)) in one spawned process per job, all released at once by a barrier;
    the seconds of the slowest, which is when the work of all of them is done."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(len(jobs))
        with context.Pool(len(jobs)) as pool:
            return max(pool.map(worker, [job + (barrier,) for job in jobs]))


def _ceiling_worker(args) -> float:
    op, dtype, nbytes, repeats, barrier = args
    a = np.random.default_rng().integers(0, 256, nbytes, dtype=np.uint8).view(dtype)
    b = a[::-1].copy()
    out = np.empty_like(a)
    ufunc = getattr(np, op)
    ufunc(a, b, out=out)  # pages touched before the clock starts
    barrier.wait()
    start = time.perf_counter()
    for _ in range(repeats):
        ufunc(a, b, out=out)
    return time.perf_counter() - start


def ceiling(workers: int, op: str, dtype: np.dtype, nbytes: int = 256 << 20, repeats: int = 8) -> float:
    """GB/s of `workers` processes running the ufunc over their own in-memory buffers at once."""
    seconds = together(_ceiling_worker, [(op, dtype, nbytes, repeats)] * workers)
    return workers * 3 * nbytes * repeats / seconds / GB


def _pipeline_worker(args) -> float:
    op, dtype, nbytes, repeats, barrier = args
    from zarr.codecs import ZstdCodec  # the codec a new Zarr v3 store gets by default (level 0)
    import numcodecs

    codec = numcodecs.Zstd(level=ZstdCodec().level)
    a = np.random.default_rng().integers(0, 256, nbytes, dtype=np.uint8)
    encoded_a, encoded_b = codec.encode(a), codec.encode(a[::-1].copy())
    ufunc = getattr(np, op)
    barrier.wait()
    start = time.perf_counter()
    for _ in range(repeats):
        left = np.frombuffer(codec.decode(encoded_a), dtype)
        right = np.frombuffer(codec.decode(encoded_b), dtype)
        codec.encode(ufunc(left, right))
    return time.perf_counter() - start


def pipeline_ceiling(workers: int, op: str, dtype: np.dtype, nbytes: int, repeats: int = 8) -> float:
    """GB/s of `workers` processes doing a run's per-chunk work at once, in memory: decode both input chunks
    with Zarr's default codec, the kernel, encode the output chunk. No files, no Dask: what this machine's
    cores can do for this pipeline, which hyper-threads and shared caches bound below linear."""
    seconds = together(_pipeline_worker, [(op, dtype, nbytes, repeats)] * workers)
    return workers * 3 * nbytes * repeats / seconds / GB


def _storage_worker(args) -> float:
    a_path, b_path, out_path, offset, length, barrier = args
    piece = 8 << 20
    barrier.wait()
    start = time.perf_counter()
    with open(a_path, "rb") as a, open(b_path, "rb") as b, open(out_path, "wb") as out:
        for at in range(offset, offset + length, piece):
            size = min(piece, offset + length - at)
            left, right = os.pread(a.fileno(), size, at), os.pread(b.fileno(), size, at)
            out.write(left if len(left) >= len(right) else right)
        out.flush()
        os.fsync(out.fileno())
    return time.perf_counter() - start


def storage_ceiling(workers: int, a_path: str, b_path: str, folder: Path) -> float:
    """GB/s of `workers` processes moving the run's bytes through this machine's storage at once: each reads
    its share of both input files and writes (and fsyncs) as many bytes to a new file, as a run's output
    is written. No codec, no kernel: the ceiling of the files themselves."""
    size = os.path.getsize(a_path)
    share = -(-size // workers)
    os.sync()
    seconds = together(_storage_worker, [(a_path, b_path, str(folder / f"storage_{i}.bin"), i * share,
                                          max(0, min(share, size - i * share))) for i in range(workers)])
    for i in range(workers):
        os.unlink(folder / f"storage_{i}.bin")
    return 3 * size / seconds / GB


def gpu_available() -> bool:
    try:
        from dmlcli.backends import gpu

        gpu.create()
        return True
    except Exception:  # noqa: BLE001 - any reason at all means no GPU rows
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=4.0, help="size of the Zarr pair, both inputs together")
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--gpu-workers", default=None, help="worker counts for GPU blocks (default: --workers)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--op", default="bit_xor", help="bit_xor (uint8 inputs) or add (float32)")
    parser.add_argument("--chunk-mib", type=float, default=32, help="Zarr chunk size (rows of 16 KiB)")
    parser.add_argument("--gpu", choices=["auto", "no"], default="auto")
    parser.add_argument("--dir", default=None, help="where the inputs go (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="write the figures here too")
    parser.add_argument("--ceiling-mib", type=float, default=256, help="each process's buffers for the memory ceiling")
    parser.add_argument("--ceiling-repeats", type=int, default=8, help="passes of each ceiling process")
    args = parser.parse_args(argv)

    import distributed

    import dmlcli
    import dmlcli.dask

    dtype = np.dtype(np.uint8 if args.op == "bit_xor" else np.float32)
    ufunc = {"bit_xor": "bitwise_xor", "add": "add"}[args.op]
    counts = [int(n) for n in args.workers.split(",")]
    folder = Path(args.dir or tempfile.mkdtemp(prefix="dask_bench."))
    folder.mkdir(parents=True, exist_ok=True)
    chunk_rows = max(1, int(args.chunk_mib * (1 << 20)) // ROW)
    begun = time.perf_counter()
    data = make_inputs(folder, int(args.gib * (1 << 30)), dtype, chunk_rows)
    total = data["bytes"]
    (a_zarr, a_npy), (b_zarr, b_npy) = data["paths"]["a"], data["paths"]["b"]
    # A small pair for each cluster's untimed first run: workers import dmlcli and zarr (and compile the GPU
    # kernel) once, as a long-lived cluster would have; the timed runs are the steady state.
    warm = {name: str(folder / f"warm_{name}.zarr") for name in "ab"}
    for name, path in warm.items():
        import zarr

        zarr.create_array(store=path, shape=(64, 64), chunks=(32, 64), dtype=dtype, overwrite=True)[...] = 1
    print(f"{args.op} {dtype} {list(data['shape'])} x2: {total / 2**30:.2f} GiB in and out per run; chunks "
          f"{args.chunk_mib:g} MiB; {os.cpu_count()} cores; inputs made in {time.perf_counter() - begun:.1f} s",
          flush=True)
    results = {"op": args.op, "dtype": str(dtype), "shape": list(data["shape"]), "bytes_per_run": total,
               "cores": os.cpu_count(), "runs": args.runs, "rows": []}

    def record(kind: str, workers: int, seconds: list[float], ceiling_gbs: float | None = None,
               pipeline_gbs: float | None = None) -> dict:
        row = {"kind": kind, "workers": workers, "seconds": seconds, "median_s": statistics.median(seconds),
               "gbs": total / statistics.median(seconds) / GB}
        if ceiling_gbs is not None:
            row["ceiling_gbs"] = ceiling_gbs
        if pipeline_gbs is not None:
            row["pipeline_gbs"] = pipeline_gbs
        results["rows"].append(row)
        print(f"  {kind:<6} x{workers:<2} {row['median_s']:8.3f} s  {row['gbs']:7.2f} GB/s"
              + (f"  (ceiling {ceiling_gbs:.1f} GB/s)" if ceiling_gbs else ""), flush=True)
        return row

    out_npy = str(folder / "out.npy")
    record("stream", 1, timed(lambda: dmlcli.run_files(args.op, [a_npy, b_npy], out_npy), args.runs))
    os.unlink(out_npy)
    kinds = ["cpu"] + (["gpu"] if args.gpu == "auto" and gpu_available() else [])
    ceilings = {n: ceiling(n, ufunc, dtype, int(args.ceiling_mib * (1 << 20)), args.ceiling_repeats) for n in counts}
    chunk_bytes = chunk_rows * ROW
    pipelines = {n: pipeline_ceiling(n, ufunc, dtype, chunk_bytes, args.ceiling_repeats) for n in counts}
    storage = {n: storage_ceiling(n, a_npy, b_npy, folder) for n in counts}
    for n in counts:
        print(f"  ceiling x{n:<2} memory {ceilings[n]:7.1f} GB/s   pipeline (codec + kernel, in memory) "
              f"{pipelines[n]:6.2f} GB/s   storage (read both, write + fsync) {storage[n]:6.2f} GB/s", flush=True)
    results["ceilings"] = {str(n): {"memory_gbs": ceilings[n], "pipeline_gbs": pipelines[n],
                                    "storage_gbs": storage[n]} for n in counts}
    gpu_counts = [int(n) for n in (args.gpu_workers or args.workers).split(",")]
    for kind in kinds:
        for n in counts if kind == "cpu" else gpu_counts:
            with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                          dashboard_address=":0") as cluster:
                address = cluster.scheduler_address
                out = str(folder / "out.zarr")

                def one_run(inputs=(a_zarr, b_zarr), target=out):
                    dmlcli.dask.run_stores(args.op, list(inputs), target, scheduler=address, backend=kind)

                one_run((warm["a"], warm["b"]), str(folder / "warm_out.zarr"))

                record(kind, n, timed(one_run, args.runs), *((ceilings[n], pipelines[n]) if kind == "cpu" else ()))
            shutil.rmtree(out, ignore_errors=True)
    print()
    print("| run | workers | median s | GB/s | x stream | efficiency vs linear | vs memory ceiling (ceiling GB/s) "
          "| pipeline ceiling GB/s | its scaling vs linear | run vs pipeline scaling | storage ceiling GB/s | run vs storage |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    stream = results["rows"][0]["gbs"]
    for kind in ["stream"] + kinds:
        rows = [r for r in results["rows"] if r["kind"] == kind]
        first = rows[0]["gbs"]
        for r in rows:
            linear = r["gbs"] / (r["workers"] * first)
            r["efficiency_linear"] = linear
            if "ceiling_gbs" in r:
                r["efficiency_ceiling"] = r["gbs"] / r["ceiling_gbs"]
            ceiling_text = (f"{r['efficiency_ceiling']:.2f} ({r['ceiling_gbs']:.1f})" if "ceiling_gbs" in r else "")
            pipeline_text = " | | | | |"
            if "pipeline_gbs" in r:
                # The cores' own scaling for this pipeline; the run's efficiency is judged against it.
                pipeline_linear = r["pipeline_gbs"] / (r["workers"] * pipelines[counts[0]] / counts[0])
                r["pipeline_efficiency_linear"] = pipeline_linear
                r["efficiency_vs_pipeline_scaling"] = linear / pipeline_linear
                pipeline_text = (f" {r['pipeline_gbs']:.2f} | {pipeline_linear:.2f} | {linear / pipeline_linear:.2f} | "
                                 f"{storage[r['workers']]:.2f} | {r['gbs'] / storage[r['workers']]:.2f} |")
                r["storage_gbs"] = storage[r["workers"]]
            print(f"| {kind} | {r['workers']} | {r['median_s']:.3f} | {r['gbs']:.2f} | {r['gbs'] / stream:.2f} | "
                  f"{linear:.2f} | {ceiling_text} |" + pipeline_text)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.dir is None:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
