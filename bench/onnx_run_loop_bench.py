"""A model's run loop (a script, not a test): OnnxSession's planned run, its views and the nodes that only move data
read through (lean.py, planning/copies.py) and each other node through its runner (planning/planned.py's
planned_runner, steps.py's Step.advancer), against the baseline of each node through the session's run_step (the
node's `run`: Wiring, Signature and made_again on every call), on the same plan and the same values.

Both loops give the same bits (the first runs fewer steps: the views and copies its readers read through); the
difference is the machinery around each node's kernel. They are timed in turn in blocks (onnx_model_bench's timing:
--block runs of one, then of the other, each block after one untimed run), by the calling thread's CPU time (a busy
machine's other processes count in neither), and the medians are printed with their ratio (runner / run_step: below
1 is faster). Run with BLAS on one thread:

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python3 bench/onnx_run_loop_bench.py [--runs 200] [--models encoder_small]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from onnx_model_bench import BLOCK, FOLDER, _medians  # noqa: E402 - the whole-model bench's folder and timing

MODELS = ("encoder_small", "squeezenet1_1")


def _loops(session, feeds):
    """(the runner loop, the run_step loop): each a function that runs the model's plan once on `feeds`."""
    plan = session.plan_for(feeds)

    def values() -> dict:
        return {**session.model.constants, **feeds}

    def runners() -> None:
        with session.executor.running():
            session._execute(plan, values(), None, False)

    def run_steps() -> None:
        run = values()
        with session.executor.running():
            run.update(plan.folded)
            for _, step, frees in plan.running:
                run.update(session.run_step(step, run))
                for name in frees:
                    del run[name]

    return runners, run_steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="timed runs of each loop (default 200)")
    parser.add_argument("--block", type=int, default=BLOCK, help=f"timed runs of one loop in a row (default {BLOCK})")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    args = parser.parse_args(argv)
    from dmlcli.onnx_model import OnnxSession
    from dmlcli.operators.numerics import compiled_loops

    print(f"compiled CPU loops: {'on' if compiled_loops.active() is not None else 'off'}")
    print(f"| model | nodes run | runners (median of {args.runs}) | run_step | runners / run_step |")
    print("|---|---|---|---|---|")
    for name in args.models.split(","):
        session = OnnxSession(str(FOLDER / f"{name}.onnx"))
        feeds = {"input": np.load(FOLDER / f"{name}.npz")["input"]}
        session.run(feeds)  # the plan
        runners, run_steps = _loops(session, feeds)
        new, old = _medians((runners, run_steps), args.runs, clock=time.thread_time, block=args.block)
        nodes = len(session.plan_for(feeds).running)
        print(f"| {name} | {nodes} | {new * 1e3:.3f} ms | {old * 1e3:.3f} ms | {new / old:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
