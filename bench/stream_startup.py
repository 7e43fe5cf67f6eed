"""Start-up time of `dmlcli run` on a tiny inline tensor, against `python -c "import numpy"`.

Goal: at most 1.25x the NumPy import with a regular install (issue 10; 1.5x before). The commands
are run alternately, several times, as real subprocesses; the medians are compared, each against
the `import numpy` of the same interpreter. Two installs are measured: the editable one of the
development venv (the interpreter running this script) and a regular one (`pip install .` into
bench/out/regular-venv, made on the first run; --rebuild makes it again).

    .venv/bin/python bench/stream_startup.py [--runs 21] [--rebuild] [--installs editable,regular]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_RATIO = 1.25
REPO = Path(__file__).resolve().parents[1]
REGULAR_VENV = REPO / "bench" / "out" / "regular-venv"


def commands_for(python: str, label: str) -> dict[str, list[str]]:
    return {
        f"{label}: python -c 'import numpy'": [python, "-c", "import numpy"],
        f"{label}: dmlcli run (table)": [python, "-m", "dmlcli", "run", "bit_xor", "[[0,128],[42,255]]",
                                         "[[255,255],[1,1]]", "--dtype", "uint8"],
        f"{label}: dmlcli run --format json": [python, "-m", "dmlcli", "run", "bit_xor", "[0,128]", "[255,1]",
                                               "--dtype", "uint8", "--format", "json"],
    }


def regular_install(rebuild: bool) -> str:
    """A venv with dmlcli installed as a user installs it (not editable); made once."""
    python = REGULAR_VENV / "bin" / "python"
    if rebuild or not python.exists():
        if REGULAR_VENV.exists():
            shutil.rmtree(REGULAR_VENV)
        subprocess.run([sys.executable, "-m", "venv", str(REGULAR_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(REPO)], check=True)
    return str(python)


# As installed for a user: bytecode is cached (__pycache__, git-ignored). With PYTHONDONTWRITEBYTECODE
# set, as in some sandboxes, every run would compile dmlcli's modules from source (~70 ms).
ENVIRONMENT = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "COLUMNS": "80"}


def wall_time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=ENVIRONMENT)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (medians are compared)")
    parser.add_argument("--rebuild", action="store_true", help="make the regular-install venv again")
    parser.add_argument("--installs", default="editable,regular",
                        help="which installs to time: editable (this interpreter), regular (made with pip) [both]")
    args = parser.parse_args(argv)
    chosen = set(args.installs.split(","))
    if not chosen or not chosen <= {"editable", "regular"}:
        parser.error(f"--installs: expected editable, regular or both, got {args.installs!r}")
    installs = {label: python for label, python in (("editable", sys.executable), ("regular", None))
                if label in chosen}
    if "regular" in installs:
        installs["regular"] = regular_install(args.rebuild)
    commands: dict[str, list[str]] = {}
    for label, python in installs.items():
        commands.update(commands_for(python, label))
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():
        wall_time(command)  # warm the page cache and .pyc files
    for _ in range(args.runs):
        for name, command in commands.items():  # alternate, so that machine noise hits all alike
            times[name].append(wall_time(command))
    print(f"{'command':40} {'median s':>9} {'ratio':>6}  (goal: dmlcli <= {GOAL_RATIO}x import numpy, regular install)")
    for label in installs:
        baseline = statistics.median(times[f"{label}: python -c 'import numpy'"])
        for name, samples in times.items():
            if name.startswith(label + ":"):
                median = statistics.median(samples)
                print(f"{name:40} {median:9.3f} {median / baseline:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
