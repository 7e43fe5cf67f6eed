"""Start-up time of `dmlcli run` on a tiny inline tensor, against `python -c "import numpy"`.

The goal (issue 4): the dmlcli run takes at most 1.5x the NumPy import. Both commands are run
alternately, several times, as real subprocesses of the same Python; the medians are compared.

    .venv/bin/python bench/stream_startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

GOAL_RATIO = 1.5

COMMANDS = {
    "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
    "dmlcli run (table on stdout)": [sys.executable, "-m", "dmlcli", "run", "bit_xor", "[[0,128],[42,255]]",
                                     "[[255,255],[1,1]]", "--dtype", "uint8"],
    "dmlcli run --format json": [sys.executable, "-m", "dmlcli", "run", "bit_xor", "[0,128]", "[255,1]",
                                 "--dtype", "uint8", "--format", "json"],
}


# As installed for a user: bytecode is cached (__pycache__, git-ignored). With PYTHONDONTWRITEBYTECODE
# set, as in some sandboxes, every run would compile dmlcli's modules from source (~70 ms).
ENVIRONMENT = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "COLUMNS": "80"}


def wall_time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=ENVIRONMENT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (medians are compared)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for name, command in COMMANDS.items():
        wall_time(command)  # warm the page cache and .pyc files
    for _ in range(args.runs):
        for name, command in COMMANDS.items():  # alternate, so that machine noise hits all alike
            times[name].append(wall_time(command))
    baseline = statistics.median(times["python -c 'import numpy'"])
    print(f"{'command':32} {'median s':>9} {'ratio':>6}  (goal: dmlcli <= {GOAL_RATIO}x import numpy)")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:32} {median:9.3f} {median / baseline:6.2f}")


if __name__ == "__main__":
    main()
