"""Streaming benchmark: `dmlcli run a.npy b.npy -o out.npy` against plain NumPy and `cp`.

For each operator and input size it makes its own inputs, then times, as subprocesses, with the
child's peak resident memory (getrusage(RUSAGE_CHILDREN) in a small wrapper process):
  dmlcli   dmlcli run OP a.npy [b.npy] -o out.npy -q   (streams; writes atomically with fsync)
  numpy    a python script: np.load the inputs, the NumPy operation, np.save the result
  cp       cp a.npy copy.npy: copying one input file, the I/O floor
Runs alternate between the three; medians of --runs runs are reported, with the ratios, and a
PNG plot of time and memory against size is written (matplotlib: pip install -e '.[bench]').
Dirty pages are synced before every timed command, and its output file deleted, so none pays
for another's writes.

Goals (issue 4, on a 2-core machine): dmlcli <= 1.0x numpy at >= 256 MiB; dmlcli's peak RSS
<= 100 MiB at every size; time growing linearly with size.

    .venv/bin/python bench/stream_bench.py                         # all operators, 1 MiB .. 2 GiB
    .venv/bin/python bench/stream_bench.py --ops bit_xor --sizes 1,256 --runs 3
    .venv/bin/python bench/stream_bench.py --report all.json,rerun.json   # tables and plot from saved runs
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MiB = 1 << 20
DEFAULT_SIZES_MIB = (1, 4, 16, 64, 256, 1024, 2048)

# Operator -> (input dtype, the plain NumPy expression of the NumPy script; `out` is dmlcli's output dtype).
NUMPY_EXPRESSIONS = {
    "bit_and": ("uint32", "np.bitwise_and(a, b)"),
    "bit_or": ("uint32", "np.bitwise_or(a, b)"),
    "bit_xor": ("uint32", "np.bitwise_xor(a, b)"),
    "bit_not": ("uint32", "np.invert(a)"),
    "bit_count": ("uint32", "np.bitwise_count(a).astype(out)"),
    "bit_shift_left": ("uint32", "np.left_shift(a, b)"),
    "bit_shift_right": ("uint32", "np.right_shift(a, b)"),
    "logical_and": ("uint32", "np.logical_and(a, b).astype(out)"),
    "logical_or": ("uint32", "np.logical_or(a, b).astype(out)"),
    "logical_xor": ("uint32", "np.logical_xor(a, b).astype(out)"),
    "logical_not": ("uint32", "np.logical_not(a).astype(out)"),
    "is_infinity": ("float32", "np.isinf(a).astype(out)"),
    "is_nan": ("float32", "np.isnan(a).astype(out)"),
    "logical_equals": ("float32", "np.equal(a, b).astype(out)"),
    "logical_greater_than": ("float32", "np.greater(a, b).astype(out)"),
    "logical_less_than": ("float32", "np.less(a, b).astype(out)"),
    "logical_greater_than_or_equal": ("float32", "np.greater_equal(a, b).astype(out)"),
    "logical_less_than_or_equal": ("float32", "np.less_equal(a, b).astype(out)"),
}

NUMPY_SCRIPT = """
import sys
import numpy as np
out = np.dtype(sys.argv[1])
target = sys.argv[2]
a = np.load(sys.argv[3])
b = np.load(sys.argv[4]) if len(sys.argv) > 4 else None
np.save(target, {expression})
"""

# Runs a command and prints its wall time and the peak RSS of it (the wrapper's only child).
MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - start
print(json.dumps({"rc": done.returncode, "seconds": seconds, "stderr": done.stderr[-500:],
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def measure(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of `command`, run as a child of a fresh wrapper."""
    os.sync()
    report = json.loads(subprocess.run([sys.executable, "-c", MEASURE, *command], check=True,
                                       capture_output=True, text=True).stdout)
    if report["rc"] != 0:
        raise SystemExit(f"{' '.join(command)} failed ({report['rc']}): {report['stderr']}")
    return report["seconds"], report["peak_kib"] / 1024


def make_input(path: Path, dtype: str, size_bytes: int, seed: int, small_values: bool) -> None:
    """An .npy file of `size_bytes` of data, written a piece at a time (never all in memory)."""
    count = size_bytes // np.dtype(dtype).itemsize
    array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(count,))
    rng = np.random.default_rng(seed)
    step = 16 * MiB
    for start in range(0, count, step):
        stop = min(start + step, count)
        if small_values:  # shift counts, mostly in range
            array[start:stop] = rng.integers(0, 40, stop - start, dtype=np.uint32).astype(dtype)
        else:
            array[start:stop] = rng.integers(0, 2**32, stop - start, dtype=np.uint32).view(dtype)
    array.flush()
    del array


def output_dtype(operator: str) -> str:
    import dmlcli

    op = dmlcli.find_operator(operator)
    if op.output in op.same_data_type:
        return NUMPY_EXPRESSIONS[operator][0]
    return op.default_output_type.numpy_name


def bench_size(workdir: Path, operators: list[str], size_mib: int, runs: int) -> list[dict]:
    rows = []
    for dtype in sorted({NUMPY_EXPRESSIONS[name][0] for name in operators}):
        a, b = workdir / "a.npy", workdir / "b.npy"
        make_input(a, dtype, size_mib * MiB, seed=1, small_values=False)
        make_input(b, dtype, size_mib * MiB, seed=2, small_values=dtype == "uint32")
        for name in (n for n in operators if NUMPY_EXPRESSIONS[n][0] == dtype):
            rows.append(bench_operator(workdir, name, [a, b], size_mib, runs))
        for path in workdir.iterdir():
            path.unlink()
    return rows


def bench_operator(workdir: Path, name: str, inputs: list[Path], size_mib: int, runs: int) -> dict:
    import dmlcli

    arity = len(dmlcli.find_operator(name).inputs)
    used = [str(p) for p in inputs[:arity]]
    out_dtype = output_dtype(name)
    script = NUMPY_SCRIPT.format(expression=NUMPY_EXPRESSIONS[name][1])
    commands = {
        "dmlcli": [sys.executable, "-m", "dmlcli", "run", name, *used, "-o", str(workdir / "dmlcli_out.npy"), "-q"],
        "numpy": [sys.executable, "-c", script, out_dtype, str(workdir / "numpy_out.npy"), *used],
        "cp": ["cp", used[0], str(workdir / "copy.npy")],
    }
    outputs = {"dmlcli": workdir / "dmlcli_out.npy", "numpy": workdir / "numpy_out.npy", "cp": workdir / "copy.npy"}
    samples: dict[str, list[tuple[float, float]]] = {tool: [] for tool in commands}
    for _ in range(runs):
        for tool, command in commands.items():
            # Each tool writes a new file: freeing an old one's blocks (slow with ext4's discard) is no one's cost.
            outputs[tool].unlink(missing_ok=True)
            samples[tool].append(measure(command))
    if not filecmp.cmp(outputs["dmlcli"], outputs["numpy"], shallow=False):
        print(f"note: {name}: dmlcli's output differs from the NumPy script's (shift counts >= width)",
              file=sys.stderr)
    row = {"operator": name, "dtype": NUMPY_EXPRESSIONS[name][0], "size_mib": size_mib}
    for tool, values in samples.items():
        row[f"{tool}_s"] = statistics.median(v[0] for v in values)
        row[f"{tool}_rss_mib"] = statistics.median(v[1] for v in values)
    return row


def print_table(rows: list[dict]) -> None:
    header = (f"| {'operator':29} | {'input':>8} | {'dmlcli s':>8} | {'numpy s':>8} | {'cp s':>6} | "
              f"{'dmlcli/numpy':>12} | {'dmlcli/cp':>9} | {'dmlcli RSS MiB':>14} | {'numpy RSS MiB':>13} |")
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    for row in rows:
        print(f"| {row['operator']:29} | {_size(row['size_mib']):>8} | {row['dmlcli_s']:8.3f} | {row['numpy_s']:8.3f} | "
              f"{row['cp_s']:6.3f} | {row['dmlcli_s'] / row['numpy_s']:12.2f} | {row['dmlcli_s'] / row['cp_s']:9.1f} | "
              f"{row['dmlcli_rss_mib']:14.0f} | {row['numpy_rss_mib']:13.0f} |")


def print_summary(rows: list[dict]) -> None:
    """Per size: medians over the operators, the worst ratio and RSS, and seconds per GiB (linearity)."""
    print()
    print("| input | dmlcli s (median op) | numpy s | dmlcli/numpy median (worst) | dmlcli s per GiB | "
          "dmlcli peak RSS MiB (worst) | numpy peak RSS MiB (worst) |")
    print("|---|---|---|---|---|---|---|")
    for size in sorted({row["size_mib"] for row in rows}):
        group = [row for row in rows if row["size_mib"] == size]
        ratios = [row["dmlcli_s"] / row["numpy_s"] for row in group]
        dmlcli_s = statistics.median(row["dmlcli_s"] for row in group)
        print(f"| {_size(size)} | {dmlcli_s:.3f} | {statistics.median(row['numpy_s'] for row in group):.3f} | "
              f"{statistics.median(ratios):.2f} ({max(ratios):.2f}) | {dmlcli_s / (size / 1024):.2f} | "
              f"{max(row['dmlcli_rss_mib'] for row in group):.0f} | {max(row['numpy_rss_mib'] for row in group):.0f} |")


def _size(mib: int) -> str:
    return f"{mib // 1024} GiB" if mib >= 1024 else f"{mib} MiB"


def plot(rows: list[dict], target: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr)
        return
    sizes = sorted({row["size_mib"] for row in rows})
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    for tool, style in (("dmlcli", "o-"), ("numpy", "s--"), ("cp", "^:")):
        times = [statistics.median(r[f"{tool}_s"] for r in rows if r["size_mib"] == s) for s in sizes]
        time_axes.plot(sizes, times, style, label=tool)
        if tool != "cp":
            memory = [max(r[f"{tool}_rss_mib"] for r in rows if r["size_mib"] == s) for s in sizes]
            memory_axes.plot(sizes, memory, style, label=tool)
    for axes, title, label in ((time_axes, "wall time (median over operators)", "seconds"),
                               (memory_axes, "peak RSS (worst operator)", "MiB")):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel("size of one input (MiB)")
        axes.set_ylabel(label)
        axes.set_title(title)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    memory_axes.axhline(100, color="red", linewidth=0.8, label="goal: 100 MiB")
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    print(f"plot: {target}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default=",".join(NUMPY_EXPRESSIONS), help="comma-separated operators [all 18]")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES_MIB)), help="input sizes in MiB")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command; medians are reported")
    parser.add_argument("--workdir", default=None, help="where inputs and outputs go (default: a temporary folder)")
    parser.add_argument("--plot", default="bench/stream_bench.png", help="PNG to write")
    parser.add_argument("--json", default=None, help="also write the rows as JSON here")
    parser.add_argument("--report", default=None, metavar="A.json[,B.json]",
                        help="run nothing: print the tables and plot from --json files (a later file's rows "
                             "replace an earlier's for the same operator and size)")
    args = parser.parse_args(argv)
    if args.report:
        merged: dict[tuple[str, int], dict] = {}
        for name in args.report.split(","):
            for row in json.loads(Path(name).read_text()):
                merged[(row["operator"], row["size_mib"])] = row
        rows = sorted(merged.values(), key=lambda r: (r["size_mib"], r["dtype"] != "float32", r["operator"]))
        print_table(rows)
        print_summary(rows)
        plot(rows, Path(args.plot))
        return 0
    operators = [name.strip().lower() for name in args.ops.split(",") if name.strip()]
    unknown = [name for name in operators if name not in NUMPY_EXPRESSIONS]
    if unknown:
        raise SystemExit(f"unknown operators: {', '.join(unknown)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="dmlcli-stream-bench-", dir=args.workdir))
    needed = 4 * max(sizes) * MiB + 64 * MiB  # two inputs, two outputs, a copy (outputs are at most as big)
    free = shutil.disk_usage(workdir).free
    if free < needed * 1.25:
        raise SystemExit(f"{workdir}: {free / MiB:.0f} MiB free, the benchmark needs about {needed / MiB:.0f} MiB")
    print(f"# {len(operators)} operators, sizes {sizes} MiB, {args.runs} runs each, in {workdir}; "
          f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    rows: list[dict] = []
    try:
        for size in sizes:
            started = time.perf_counter()
            rows += bench_size(workdir, operators, size, args.runs)
            print(f"# {_size(size)} done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(rows)
    print_summary(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    plot(rows, Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
