"""CPU benchmark (a script, not a test): the indexing operators through dmlcli.run against the NumPy call a user
would write for the same result (goal: at most 1.3x).

Inputs of --mib MiB (16 by default): FLOAT32 data, INT64 or UINT32 indices in range (the common case: no
out-of-range or negative rule to apply). Baselines: np.take, np.take_along_axis, fancy indexing (gather and
scatter), np.argpartition + a sort of the K (top-k), np.nonzero, an np.where against an arange (one-hot).
Times are medians of --repeats runs, alternating dmlcli.run, the operator's kernel alone (validated once
beforehand) and NumPy; dmlcli.run's include its per-call validation, room and result checks.

    .venv/bin/python bench/indexing_cpu_bench.py [--mib 16] [--repeats 7] [--cases gather_rows,top_k,...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dmlcli  # noqa: E402

GOAL = 1.3


def _top_k_numpy(x: np.ndarray, k: int):
    """The usual NumPy top-k: argpartition for the K largest, then a sort of those K (largest first)."""
    part = np.argpartition(-x, k - 1, axis=1)[:, :k]
    chosen = np.take_along_axis(x, part, axis=1)
    order = np.argsort(-chosen, axis=1, kind="stable")
    return np.take_along_axis(chosen, order, axis=1), np.take_along_axis(part, order, axis=1)


def _scatter_numpy(data, index, updates):
    out = data.copy()
    out[index] = updates
    return out


Case = tuple[str, tuple, dict, Callable]  # operator, input arrays, keyword arguments, the NumPy call


def cases(mib: int, rng: np.random.Generator) -> dict[str, Case]:
    """name -> (operator, inputs, options for dmlcli.run, the NumPy call on the same inputs)."""
    elements = mib * (1 << 20) // 4
    width = 1024
    rows = elements // width
    table = rng.random((rows, width), dtype=np.float32)
    flat = table.reshape(-1)
    row_picks = rng.integers(0, rows, rows).astype(np.uint32)
    element_picks = rng.integers(0, elements, elements)  # int64
    square = int(elements ** 0.5)
    grid = flat[:square * square].reshape(square, square)
    along = rng.integers(0, square, (square, square))
    scatter_targets = rng.permutation(elements)[:elements // 4]
    scatter_updates = rng.random(scatter_targets.size, dtype=np.float32)
    row_targets = rng.permutation(rows)[:rows // 2]
    row_updates = rng.random((row_targets.size, width), dtype=np.float32)
    depth = 256
    hot_index = rng.integers(0, depth, (elements // depth, 1)).astype(np.uint32)
    hot_values = np.float32([[0, 1]])
    scores = rng.random((64, elements // 64), dtype=np.float32)
    sparse = np.where(rng.random(grid.shape) < 0.1, grid, np.float32(0))
    return {
        "gather_rows": ("gather", (table, row_picks[None]), {"axis": 0, "index_dimensions": 1},
                        lambda: np.take(table, row_picks, axis=0)),
        "gather_elements_1d": ("gather", (flat, element_picks), {}, lambda: np.take(flat, element_picks)),
        "gather_elements": ("gather_elements", (grid, along), {"axis": 1},
                            lambda: np.take_along_axis(grid, along, axis=1)),
        "gather_nd_rows": ("gather_nd", (table, row_picks[:, None]), {}, lambda: table[row_picks]),
        "scatter_elements": ("scatter", (flat, scatter_targets, scatter_updates), {},
                             lambda: _scatter_numpy(flat, scatter_targets, scatter_updates)),
        "scatter_nd_rows": ("scatter_nd", (table, row_targets[:, None], row_updates), {},
                            lambda: _scatter_numpy(table, row_targets, row_updates)),
        "one_hot": ("one_hot", (hot_index, hot_values), {"axis": 1, "output_shape": (hot_index.shape[0], depth)},
                    lambda: np.where(np.arange(depth) == hot_index, hot_values[0, 1], hot_values[0, 0])),
        "top_k_16": ("top_k", (scores,), {"axis": 1, "k": 16}, lambda: _top_k_numpy(scores, 16)),
        "top_k_1024": ("top_k", (scores,), {"axis": 1, "k": 1024}, lambda: _top_k_numpy(scores, 1024)),
        "nonzero": ("nonzero_coordinates", (sparse,), {}, lambda: np.nonzero(sparse)),
    }


def kernel_only(op: str, arrays: tuple, options: dict) -> Callable:
    """The operator's array_kernel on NumPy, validated once beforehand: dmlcli's work without the per-call
    validation, room checks and result checks of dmlcli.run."""
    call = dmlcli.validate(op, *arrays, **options).call
    kernel = dmlcli.find_operator(op).array_kernel
    return lambda: kernel(np, list(arrays), call.outputs, call.parameters)


def timed(function: Callable) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cases", default="")
    arguments = parser.parse_args(argv)
    table = cases(arguments.mib, np.random.default_rng(0))
    chosen = [name for name in table if not arguments.cases or name in arguments.cases.split(",")]
    print(f"{'case':<20} {'dmlcli ms':>10} {'kernel ms':>10} {'numpy ms':>10} {'ratio':>7} {'kernel ratio':>13}"
          f"  (medians of {arguments.repeats}, {arguments.mib} MiB inputs, goal <= {GOAL}x)")
    worst = 0.0
    for name in chosen:
        op, arrays, options, theirs = table[name]
        ours = lambda: dmlcli.run(op, *arrays, **options)  # noqa: E731 - one call, timed
        kernel = kernel_only(op, arrays, options)
        ours(), kernel(), theirs()  # warm-up: page faults, first-call imports
        mine, bare, numpy = [], [], []
        for _ in range(arguments.repeats):
            mine.append(timed(ours))
            bare.append(timed(kernel))
            numpy.append(timed(theirs))
        a, k, b = statistics.median(mine), statistics.median(bare), statistics.median(numpy)
        worst = max(worst, a / b)
        print(f"{name:<20} {a * 1e3:>10.2f} {k * 1e3:>10.2f} {b * 1e3:>10.2f} {a / b:>7.2f} {k / b:>13.2f}"
              f"{'' if a / b <= GOAL else '  over goal'}")
    print(f"worst ratio {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
