"""GPU parity report (a diagnostic script): every operator x every type signature of its newest support row,
GPU against CPU, one operator per subprocess (so that a crash names its operator and the others still run).

For each operator it prints OK, or the first failing signature with the parameters, the element and both
values, by the GPU tests' own rule (tests/test_gpu.py _assert_parity): exact and one-rounding operators bit
for bit (a NaN matches any NaN where the operator computes on values), the others within their tolerance.

    PYTHONPATH=. python3 bench/gpu_parity.py [--ops add,sin] [--elements 4099]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/tests")
from test_gpu import _assert_parity, _inputs_for, _parameter_sets, _signatures_at_newest
from dmlcli.backends import cpu, gpu
from dmlcli.operators import find_operator

op = find_operator(sys.argv[2])
count = int(sys.argv[3])
rng = np.random.default_rng(1)
reference, backend = cpu.create(), gpu.create()
for signature in _signatures_at_newest(op):
    for shape in ((count,), (3, 5, 7)):
        inputs = _inputs_for(op, None, shape, rng, signature)
        for params in _parameter_sets(op, signature):
            with np.errstate(all="ignore"):
                want = reference.execute(op, inputs, shape, np.dtype(signature[-1]), params)
            got = backend.execute(op, inputs, shape, np.dtype(signature[-1]), params)
            try:
                _assert_parity(op, got, want, params, "")
            except BaseException as failure:  # pytest's Failed and AssertionError alike
                differ = got.view(f"uint{got.itemsize * 8}") != want.view(f"uint{want.itemsize * 8}")
                if got.dtype.kind == "f":
                    differ &= ~(np.isnan(got) & np.isnan(want))
                first = int(np.flatnonzero(differ.reshape(-1))[0]) if differ.any() else 0
                flat_in = [x.reshape(-1) for x in np.broadcast_arrays(*inputs)]
                shown = {k: (v if not isinstance(v, tuple) else str(v)) for k, v in params.items()}
                print(f"FAIL {op.cli_name} {signature} {shape} {shown}: {str(failure).strip().splitlines()[0][:200]}; "
                      f"first at {first}: inputs {[repr(x[first]) for x in flat_in]} "
                      f"gpu {got.reshape(-1)[first]!r} cpu {want.reshape(-1)[first]!r}")
                sys.exit(1)
print(f"OK {op.cli_name}: {len(_signatures_at_newest(op))} signatures")
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="")
    parser.add_argument("--elements", type=int, default=4099)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from dmlcli.backends import gpu
    from dmlcli.errors import BackendUnavailableError

    try:
        gpu.create()
    except BackendUnavailableError as why:
        print(f"skipped: {why}")
        return 0
    from dmlcli.operators import OPERATORS

    names = [op.cli_name for op in OPERATORS if not args.ops or op.cli_name in args.ops.split(",")]
    failed = 0
    for name in names:
        done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), name, str(args.elements)],
                              capture_output=True, text=True, timeout=300)
        lines = (done.stdout.strip().splitlines() or [""])
        if done.returncode == 0:
            print(lines[-1], flush=True)
            continue
        failed += 1
        reason = lines[-1] if lines[-1] else f"crashed (exit {done.returncode}): {done.stderr.strip()[-300:]}"
        print(reason[:700], flush=True)
    print(f"{len(names) - failed} of {len(names)} operators match")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
