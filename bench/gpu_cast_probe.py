# Where CuPy's own astype / array kernels differ from dmlcli's CPU results (why CAST has its own CUDA kernel).
import numpy as np, cupy as cp, sys
sys.path.insert(0, "tests")
from test_ops_generation import ALL, special_values
from dmlcli.operators import generation as g
for s in ALL:
    x = special_values(s)
    for t in ALL:
        want = g.cast_values(np, x, np.dtype(t))
        got = cp.asnumpy(cp.asarray(x).astype(t))
        w = want.view(f"uint{want.itemsize*8}"); h = got.view(f"uint{got.itemsize*8}")
        bad = np.nonzero(w != h)[0]
        if bad.size:
            print(f"cupy astype {s}->{t}: {bad.size} of {x.size} differ, e.g. {x[bad[0]]!r} -> cpu {want[bad[0]]!r} cupy {got[bad[0]]!r}")
