"""`dmlcli test` against one `dmlcli run --check` process per case, and --jobs 2 against --jobs 1.

1. The conformance vectors of ../shared/conformance (146 in onnx/ and numpy/, 177 in onnx_elementwise/):
   one `dmlcli test` process over all of them (median of --runs runs) against one `dmlcli run ... --check`
   subprocess per case. The per-case processes are timed on a sample of the cases (every --every-th, each
   --runs times, the median per case) and extrapolated to all of them: the script says so when it prints.
   Goal: at least 50x.
2. --jobs 2 against --jobs 1 on a generated suite (--cases cases of --elements elements each, .npy inputs and
   expected values in a temporary folder; float32 math, activations and integer bitwise operators); medians
   of --runs runs of each, alternated. Goal: at least 1.6x on 2 cores.

    .venv/bin/python bench/suite_bench.py [--runs 5] [--every 4] [--cases 240] [--elements 262144]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CONFORMANCE = REPO.parent / "shared" / "conformance"
DMLCLI = [sys.executable, "-m", "dmlcli"]


def timed(command: list[str], expect=(0, 1)) -> float:
    return timed_with_cpu(command, expect)[0]


def timed_with_cpu(command: list[str], expect=(0, 1)) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in expect:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_check_command(case_path: Path, folder: Path) -> list[str]:
    """The `dmlcli run ... --check` command a CI step would run for one case (tensors written as JSON files)."""
    case = json.loads(case_path.read_text())
    files = []
    for i, tensor in enumerate(case["inputs"]):
        files.append(folder / f"{case_path.stem}.in{i}.json")
        files[-1].write_text(json.dumps(tensor))
    expected = folder / f"{case_path.stem}.expected.json"
    expected.write_text(json.dumps(case["expected"]))
    command = [*DMLCLI, "run", case["op"], *map(str, files), "--check", str(expected), "--quiet"]
    if case.get("broadcast"):
        command.append("--broadcast")
    for key, value in case.get("params", {}).items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    return command


def one_process_against_many(runs: int, every: int) -> None:
    cases = sorted(CONFORMANCE.glob("*/*.json"))
    suite = statistics.median(timed([*DMLCLI, "test", str(CONFORMANCE), "-q"]) for _ in range(runs))
    suite_jobs1 = statistics.median(timed([*DMLCLI, "test", str(CONFORMANCE), "-q", "--jobs", "1"])
                                    for _ in range(runs))
    sample = cases[::every]
    with tempfile.TemporaryDirectory() as tmp:
        commands = [run_check_command(path, Path(tmp)) for path in sample]
        per_case = [statistics.median(timed(c, expect=(0, 1, 3)) for _ in range(runs)) for c in commands]
    extrapolated = statistics.mean(per_case) * len(cases)
    print(f"conformance vectors: {len(cases)} cases ({CONFORMANCE})")
    print(f"  one `dmlcli test` process (default --jobs):  {suite:.2f} s (median of {runs})")
    print(f"  one `dmlcli test` process, --jobs 1:         {suite_jobs1:.2f} s (median of {runs})")
    print(f"  one `dmlcli run --check` process per case:   {extrapolated:.1f} s "
          f"(extrapolated: {len(sample)} sampled cases, every {every}th, median of {runs} each, "
          f"mean {statistics.mean(per_case) * 1000:.0f} ms a case, x {len(cases)})")
    print(f"  ratio: {extrapolated / suite:.0f}x (goal: at least 50x)")


OPERATORS = [("sin", 1, "float32"), ("exp", 1, "float32"), ("activation_gelu", 1, "float32"),
             ("pow", 2, "float32"), ("divide", 2, "float32"), ("activation_sigmoid", 1, "float32"),
             ("bit_xor", 2, "uint32"), ("atan", 1, "float32")]


def generate_suite(folder: Path, cases: int, elements: int) -> None:
    import dmlcli

    rng = np.random.default_rng(15)
    for index in range(cases):
        op, arity, dtype = OPERATORS[index % len(OPERATORS)]
        if dtype == "float32":
            inputs = [rng.uniform(0.5, 2.0, elements).astype(np.float32) for _ in range(arity)]
        else:
            inputs = [rng.integers(0, 2**32, elements, dtype=np.uint32) for _ in range(arity)]
        names = []
        for i, array in enumerate(inputs):
            names.append(f"case{index:04d}.in{i}.npy")
            np.save(folder / names[-1], array)
        np.save(folder / f"case{index:04d}.expected.npy", dmlcli.run(op, *inputs))
        (folder / f"case{index:04d}.json").write_text(json.dumps(
            {"op": op, "inputs": names, "expected": f"case{index:04d}.expected.npy"}))


def jobs_two_against_one(runs: int, cases: int, elements: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        generate_suite(folder, cases, elements)
        timed([*DMLCLI, "test", tmp, "-q", "--jobs", "2"], expect=(0,))  # files into the page cache
        times, cpu = {1: [], 2: []}, {1: [], 2: []}
        for _ in range(runs):
            for jobs in (1, 2):
                wall, used = timed_with_cpu([*DMLCLI, "test", tmp, "-q", "--jobs", str(jobs)], expect=(0,))
                times[jobs].append(wall)
                cpu[jobs].append(used / wall)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(f"generated suite: {cases} cases of {elements} elements (.npy), {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} after the runs (other work on the machine takes cores too)")
    print(f"  --jobs 1: {one:.2f} s, --jobs 2: {two:.2f} s (medians of {runs}, alternated); cores kept busy "
          f"(CPU time / wall time): {statistics.median(cpu[1]):.2f} and {statistics.median(cpu[2]):.2f}")
    print(f"  speed-up: {one / two:.2f}x (goal: at least 1.6x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--every", type=int, default=4, help="time every N-th case as its own process")
    parser.add_argument("--cases", type=int, default=240)
    parser.add_argument("--elements", type=int, default=256 * 1024)
    parser.add_argument("--skip-conformance", action="store_true")
    parser.add_argument("--skip-jobs", action="store_true")
    args = parser.parse_args(argv)
    if not args.skip_conformance:
        one_process_against_many(args.runs, args.every)
    if not args.skip_jobs:
        jobs_two_against_one(args.runs, args.cases, args.elements)
    return 0


if __name__ == "__main__":
    sys.exit(main())
