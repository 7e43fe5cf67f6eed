"""Start-up time of `dmlcli run` on a tiny inline tensor, against `python -c "import numpy"`.

Goal (issues 10, 21, 23): `dmlcli run bit_xor '[1,2]' '[3,4]' --dtype uint8 -o -` at most 1.25x the NumPy import
with a regular install. Two runs of operators with parameters are timed beside it, as the same goal applies to
them: `dmlcli run clip '[1,2,3]' --dtype float32 --min 0 --max 2 -o -` and the shaped
`dmlcli run reduce '[[1,2],[3,4]]' --dtype float32 --function sum --axes 1 -o -`. The commands run alternately, several times, as real subprocesses (stdout a pipe); the
medians are compared, each against the `import numpy` of the same interpreter, measured in the same loop.

Two figures per command: wall time, and the child's CPU time (user + sys, from getrusage(RUSAGE_CHILDREN)). On a
shared, loaded machine the wall time waits for a core as often as it works; the CPU time counts only the work, so
its ratio is the steadier one (both are printed).

Two installs are measured: the editable one of the development venv (the interpreter running this script) and a
regular one (bench/out/regular-venv: made on the first run with its dependencies; dmlcli's files are copied from
this checkout into it on every run (and byte-compiled, as pip does), so that the figures are of the code as it is;
--rebuild makes the venv again).

    .venv/bin/python bench/stream_startup.py [--runs 21] [--rebuild] [--installs editable,regular]
                                             [--other LABEL=VENV ...]

--other measures another venv's install in the same loop (e.g. one made by this script in an older checkout:
--other before=../old/bench/out/regular-venv), for a before/after comparison on the same machine at the same time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_RATIO = 1.25
REPO = Path(__file__).resolve().parents[1]
REGULAR_VENV = REPO / "bench" / "out" / "regular-venv"
BASELINE = "python -c 'import numpy'"


def commands_for(python: str) -> dict[str, list[str]]:
    # The console script pip writes (bin/dmlcli), as a user types `dmlcli run ...`.
    run = [str(Path(python).parent / "dmlcli"), "run"]
    dmlcli = run + ["bit_xor"]
    return {
        BASELINE: [python, "-c", "import numpy"],
        "dmlcli run -o - (the goal's)": dmlcli + ["[1,2]", "[3,4]", "--dtype", "uint8", "-o", "-"],
        "dmlcli run (table)": dmlcli + ["[[0,128],[42,255]]", "[[255,255],[1,1]]", "--dtype", "uint8"],
        "dmlcli run --format json": dmlcli + ["[0,128]", "[255,1]", "--dtype", "uint8", "--format", "json"],
        # BIT_XOR has no parameters; these load the parameter kinds (and REDUCE a shape rule's query too).
        "dmlcli run clip --min --max -o -": run + ["clip", "[1,2,3]", "--dtype", "float32", "--min", "0",
                                                    "--max", "2", "-o", "-"],
        "dmlcli run reduce --axes -o -": run + ["reduce", "[[1,2],[3,4]]", "--dtype", "float32", "--function",
                                                 "sum", "--axes", "1", "-o", "-"],
    }


def regular_install(rebuild: bool) -> str:
    """A venv with dmlcli installed as a user installs it (not editable): the venv and its dependencies made
    once, dmlcli reinstalled from this checkout each time (no network needed)."""
    python = REGULAR_VENV / "bin" / "python"
    if rebuild or not python.exists():
        if REGULAR_VENV.exists():
            shutil.rmtree(REGULAR_VENV)
        subprocess.run([sys.executable, "-m", "venv", str(REGULAR_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(REPO)], check=True)
    else:  # the package's files replaced by this checkout's, as pip lays them out, and byte-compiled as pip does
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        installed = Path(site) / "dmlcli"
        shutil.rmtree(installed)
        shutil.copytree(REPO / "dmlcli", installed, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run([str(python), "-m", "compileall", "-q", str(installed)], check=True)
    return str(python)


# As installed for a user: bytecode is cached (__pycache__, git-ignored). With PYTHONDONTWRITEBYTECODE
# set, as in some sandboxes, every run would compile dmlcli's modules from source (~70 ms). The regular install
# runs without PYTHONPATH; the editable one with this checkout first on it (the development venv's own editable
# install may point at another checkout).
ENVIRONMENT = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")},
               "COLUMNS": "80"}
ENVIRONMENTS = {"regular": ENVIRONMENT, "editable": {**ENVIRONMENT, "PYTHONPATH": str(REPO)}}


def timed(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, the child's user + sys CPU seconds) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.PIPE, env=environment)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (medians are compared)")
    parser.add_argument("--rebuild", action="store_true", help="make the regular-install venv again")
    parser.add_argument("--installs", default="editable,regular",
                        help="which installs to time: editable (this interpreter), regular (made with pip) [both]")
    parser.add_argument("--other", action="append", default=[], metavar="LABEL=VENV",
                        help="also measure the install in VENV (run as it is, without PYTHONPATH)")
    args = parser.parse_args(argv)
    chosen = set(args.installs.split(","))
    if not chosen or not chosen <= {"editable", "regular"}:
        parser.error(f"--installs: expected editable, regular or both, got {args.installs!r}")
    installs = {}
    if "regular" in chosen:
        installs["regular"] = regular_install(args.rebuild)
    if "editable" in chosen:
        installs["editable"] = sys.executable
    for other in args.other:
        label, _, venv = other.partition("=")
        installs[label] = str(Path(venv).resolve() / "bin" / "python")
        ENVIRONMENTS.setdefault(label, ENVIRONMENT)
    commands = {(label, name): command for label, python in installs.items()
                for name, command in commands_for(python).items()}
    walls: dict = {key: [] for key in commands}
    cpus: dict = {key: [] for key in commands}
    for (label, _), command in commands.items():
        timed(command, ENVIRONMENTS[label])  # warm the page cache and .pyc files
    for _ in range(args.runs):
        for key, command in commands.items():  # alternate, so that machine noise hits all alike
            wall, cpu = timed(command, ENVIRONMENTS[key[0]])
            walls[key].append(wall)
            cpus[key].append(cpu)
    print(f"medians of {args.runs} alternating runs; ratios against {BASELINE} of the same install "
          f"(goal: the -o - runs <= {GOAL_RATIO}x, regular install)")
    print(f"{'install: command':44} {'wall s':>7} {'ratio':>6} {'cpu s':>7} {'ratio':>6}")
    for label in installs:
        base_wall = statistics.median(walls[(label, BASELINE)])
        base_cpu = statistics.median(cpus[(label, BASELINE)])
        for (install, name) in commands:
            if install == label:
                wall, cpu = statistics.median(walls[(label, name)]), statistics.median(cpus[(label, name)])
                print(f"{label + ': ' + name:44} {wall:7.3f} {wall / base_wall:6.2f} {cpu:7.3f} {cpu / base_cpu:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
