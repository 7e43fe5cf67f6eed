"""`dmlcli run a.npy b.npy -o out.npy` end to end on the GPU backend, by chunk size, against the CPU.

Makes two 1 GiB uint8 inputs in /dev/shm (memory-backed, so the disk is out of the picture),
then times the real command as a subprocess: --backend cpu, --backend gpu with the old 1 MiB
chunks, and --backend gpu with the backend's own default (64 MiB). Medians of --runs runs.

    PYTHONPATH=. python3 bench/gpu_stream_run.py [--runs 3] [--mib 1024]

Without CuPy (or a GPU) it says so and exits 0.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(command, env) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mib", type=float, default=1024, help="MiB per input (0.01 for a quick check)")
    args = parser.parse_args(argv)
    from dmlcli.backends import gpu
    from dmlcli.errors import BackendUnavailableError

    try:
        gpu.create()
    except BackendUnavailableError as why:
        print(f"skipped: {why}")
        return 0
    folder = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    rng = np.random.default_rng(0)
    paths = []
    for name in ("a", "b"):
        path = os.path.join(folder, f"{name}.npy")
        np.save(path, rng.integers(0, 256, int(args.mib * (1 << 20)), dtype=np.uint8))
        paths.append(path)
    out = os.path.join(folder, "out.npy")
    base = {k: v for k, v in os.environ.items() if k != "DMLCLI_CHUNK_BYTES"}
    cases = {
        "cpu (1 MiB chunks)": (["--backend", "cpu"], base),
        "gpu, 1 MiB chunks": (["--backend", "gpu"], {**base, "DMLCLI_CHUNK_BYTES": "1M"}),
        "gpu, backend default (64 MiB)": (["--backend", "gpu"], base),
    }
    command = [sys.executable, "-m", "dmlcli", "run", "bit_xor", *paths, "-o", out, "-q"]
    times = {name: [] for name in cases}
    for name, (extra, env) in cases.items():
        timed(command + extra, env)  # warm-up: kernel compilation, page cache
    for _ in range(args.runs):
        for name, (extra, env) in cases.items():
            times[name].append(timed(command + extra, env))
    assert np.array_equal(np.load(out), np.load(paths[0]) ^ np.load(paths[1]))
    cpu = statistics.median(times["cpu (1 MiB chunks)"])
    print(f"bit_xor uint8, {args.mib:g} MiB per input, files in {folder}; medians of {args.runs}")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:32} {median:7.3f} s  {3 * args.mib / 1024 / median:6.2f} GiB/s moved  {cpu / median:5.2f}x the CPU")
    for path in paths + [out]:
        os.unlink(path)
    os.rmdir(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
