"""Where CuPy's own astype differs from dmlcli's CPU CAST results (why CAST has its own CUDA kernel).

    PYTHONPATH=. python3 bench/gpu_cast_probe.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main(argv: list[str] | None = None) -> int:
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
    except Exception as why:  # noqa: BLE001 - no CuPy or no device: nothing to probe
        print(f"skipped: no usable GPU ({str(why).splitlines()[0] if str(why) else type(why).__name__})")
        return 0
    from test_ops_generation import ALL, special_values

    from dmlcli.operators.generation import entries as g

    differing = 0
    for source in ALL:
        x = special_values(source)
        for target in ALL:
            want = g.cast_values(np, x, np.dtype(target))
            got = cp.asnumpy(cp.asarray(x).astype(target))
            bad = np.nonzero(want.view(f"uint{want.itemsize * 8}") != got.view(f"uint{got.itemsize * 8}"))[0]
            if bad.size:
                differing += 1
                print(f"cupy astype {source}->{target}: {bad.size} of {x.size} differ, e.g. {x[bad[0]]!r} -> "
                      f"cpu {want[bad[0]]!r} cupy {got[bad[0]]!r}")
    print(f"{differing} type pairs where CuPy's astype differs from dmlcli's CAST")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
