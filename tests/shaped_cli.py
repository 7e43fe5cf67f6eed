"""What the shaped families' tests share: a call's tensors and parameters as `dmlcli run` arguments."""

from __future__ import annotations

import json

import numpy as np


def json_input(array: np.ndarray) -> str:
    """A tensor as an inline JSON INPUT, exactly (its dtype, shape and values)."""
    return json.dumps({"dtype": array.dtype.name, "shape": list(array.shape), "data": array.tolist()})


def cli_args(op, inputs, parameters, *extra) -> list[str]:
    """`dmlcli run OP INPUT... --option value ...` for API keywords and values (sequences as 1,2,3)."""
    args = ["run", op, *[json_input(np.asarray(x)) for x in inputs]]
    for key, value in parameters.items():
        text = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
        args += ["--" + key.replace("_", "-"), text]
    return args + list(extra)
