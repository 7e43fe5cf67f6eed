""".npz benchmark: `dmlcli run bit_not x.npz -o out.npy` against `numpy.load` + the operator + `numpy.save`.

For each member size and kind it writes its own x.npz (one uint8 member, "x"), then times, as
subprocesses, with the child's peak resident memory (getrusage(RUSAGE_CHILDREN) in a small wrapper):
  dmlcli   dmlcli run bit_not x.npz -o out.npy -q    (the member streamed, inflated chunk by chunk)
  numpy    python -c "a = np.load('x.npz')['x']; np.save('ref.npy', np.invert(a))"
Runs alternate between the two; medians of --runs runs are printed with the ratios, and the two
outputs are compared byte for byte. Kinds: `deflated` (np.savez_compressed's ZIP_DEFLATED, of data
that compress about 2:1, so that inflating is real work) and `stored` (np.savez: no compression).

Goals (issue 22, item 1): dmlcli's peak RSS under 300 MiB at every size; its time within 1.5x numpy's.

    .venv/bin/python bench/npz_bench.py                         # 64 and 256 MiB, both kinds, 3 runs
    .venv/bin/python bench/npz_bench.py --sizes 1024 --kinds deflated --runs 3
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[1]

WRAPPER = """
import resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
seconds = time.perf_counter() - started
print(done.returncode, seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""

NUMPY_SCRIPT = "import numpy as np; a = np.load('x.npz')['x']; np.save('ref.npy', np.invert(a))"


def write_member(path: Path, size: int, kind: str) -> None:
    """x.npz with one uint8 member of `size` bytes, written a MiB at a time (as np.savez writes its members)."""
    from numpy.lib import format as npy_format

    compression = zipfile.ZIP_DEFLATED if kind == "deflated" else zipfile.ZIP_STORED
    generator = np.random.default_rng(22)
    with zipfile.ZipFile(path, "w", compression) as archive, \
            archive.open("x.npy", "w", force_zip64=True) as member:
        npy_format.write_array_header_1_0(member, {"descr": "|u1", "fortran_order": False, "shape": (size,)})
        for start in range(0, size, MiB):
            # Four random bits per byte: deflate halves them, as it does much measured data.
            member.write((generator.integers(0, 16, min(MiB, size - start), dtype=np.uint8) * 17).tobytes())


def timed(command: list[str], folder: Path) -> tuple[float, int]:
    """(seconds, peak RSS bytes) of one command, run in `folder` after dirty pages are synced."""
    os.sync()
    done = subprocess.run([sys.executable, "-c", WRAPPER, *command], cwd=folder, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    code, seconds, peak = done.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}): {done.stderr.strip()}")
    return float(seconds), int(peak)


def bench(size_mib: int, kind: str, runs: int, folder: Path) -> dict:
    write_member(folder / "x.npz", size_mib * MiB, kind)
    commands = {"dmlcli": [sys.executable, "-m", "dmlcli", "run", "bit_not", "x.npz", "-o", "out.npy", "-q"],
                "numpy": [sys.executable, "-c", NUMPY_SCRIPT]}
    figures: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():  # alternating, so that a busy moment hits both
            for leftover in ("out.npy", "ref.npy"):
                (folder / leftover).unlink(missing_ok=True)
            figures[name].append(timed(command, folder))
            if name == "dmlcli":
                os.replace(folder / "out.npy", folder / "dmlcli.npy")
    if not filecmp.cmp(folder / "dmlcli.npy", folder / "ref.npy", shallow=False):
        raise SystemExit(f"{size_mib} MiB {kind}: dmlcli's output differs from NumPy's")
    compressed = (folder / "x.npz").stat().st_size
    result = {"size_mib": size_mib, "kind": kind, "npz_mib": compressed / MiB}
    for name, values in figures.items():
        result[name] = (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
    for leftover in ("x.npz", "dmlcli.npy", "ref.npy"):
        (folder / leftover).unlink(missing_ok=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256", help="member sizes in MiB, comma-separated")
    parser.add_argument("--kinds", default="deflated,stored", help="deflated, stored or both")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command; medians are reported")
    parser.add_argument("--folder", default=None, help="where the files go (default: a temporary folder)")
    options = parser.parse_args(argv)
    sizes = [int(s) for s in options.sizes.split(",")]
    kinds = options.kinds.split(",")
    print(f"dmlcli run bit_not x.npz -o out.npy against numpy.load + np.invert + np.save; medians of "
          f"{options.runs} runs; {os.cpu_count()} CPUs")
    print(f"{'member':>8} {'kind':>9} {'.npz':>9} | {'dmlcli s':>9} {'RSS MiB':>8} | {'numpy s':>8} {'RSS MiB':>8} | "
          f"{'time ratio':>10}")
    with tempfile.TemporaryDirectory(dir=options.folder) as scratch:
        for size in sizes:
            for kind in kinds:
                started = time.perf_counter()
                r = bench(size, kind, options.runs, Path(scratch))
                (ours, our_peak), (theirs, their_peak) = r["dmlcli"], r["numpy"]
                print(f"{size:>5} MiB {kind:>9} {r['npz_mib']:>5.1f} MiB | {ours:>9.2f} {our_peak / MiB:>8.0f} | "
                      f"{theirs:>8.2f} {their_peak / MiB:>8.0f} | {ours / theirs:>9.2f}x"
                      f"   ({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
