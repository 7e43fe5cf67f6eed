"""`dmlcli run ... --save-case case.json`: a run written as a case file that `dmlcli test` replays.

Small tensors go inline as JSON tensors; large ones (or float tensors holding NaNs whose payload
JSON cannot keep) as .npy files beside the case, named `<case>.input1.npy`, `<case>.expected.npy`.
Every file is written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import InputError, quoted

# Up to this many elements a tensor is inline: readable in the case file, and small enough to diff.
MAX_INLINE_ELEMENTS = 1024


def check_case_path(target: str | None) -> str | None:
    """Refuse a --save-case path that could not be written, before anything runs (returns it)."""
    if target is None:
        return None
    path = Path(target)
    if path.suffix.lower() != ".json":
        raise InputError(f"--save-case {quoted(target)}: a case file is .json")
    if not path.parent.is_dir():
        raise InputError(f"--save-case {quoted(target)}: folder {quoted(path.parent)} does not exist")
    return target


def _tensor_entry(array: np.ndarray, path: Path, label: str):
    from ..io.atomic import write_output
    from ..io.json_tensor import lossy_nan_count, to_json_text

    if array.size <= MAX_INLINE_ELEMENTS and not lossy_nan_count(array):
        # Shortest texts of float16/32 values have at most 9 digits: a double writes them back unchanged.
        return json.loads(to_json_text(array))
    name = tensor_file_name(path, label)
    write_output(array, str(path.parent / name))
    return name


def tensor_file_name(case: Path, label: str) -> str:
    """The .npy file a large tensor of the case file `case` is written to, beside it: CASE.input1.npy,
    CASE.expected.npy."""
    return f"{case.stem}.{label}.npy"


def tensor_files(target: str, input_count: int) -> list[str]:
    """Every file --save-case `target` may write besides itself (the tensors too large to write inline)."""
    path = Path(target)
    labels = [f"input{i + 1}" for i in range(input_count)] + ["expected"]
    return [str(path.parent / tensor_file_name(path, label)) for label in labels]


def save_case(target: str, outcome, req) -> None:
    """Write the call of `req` and its result (`outcome` of a whole-tensor run) as the case file `target`."""
    from ..version import __version__
    from ..io.atomic import write_atomically

    check_case_path(target)
    path = Path(target)
    params = {key: value for key, value in req.options.items() if value is not None}
    if req.output_type is not None:
        params["output_dtype"] = req.output_type.numpy_name
    if req.output_shape is not None:  # the generators' Sizes (they have no input to take them from)
        params["output_shape"] = list(req.output_shape)
    if req.outputs is not None:  # the outputs asked for: "expected" holds the first of them
        params["outputs"] = list(req.outputs)
    document = {
        "source": "dmlcli run",
        "dmlcli_version": __version__,
        "case_name": path.stem,
        "op": req.operator.cli_name,
        "params": params,
        "feature_level": outcome.verdict.feature_level.short,
        "inputs": [_tensor_entry(np.asarray(a), path, f"input{i + 1}") for i, a in enumerate(outcome.inputs)],
        "expected": _tensor_entry(outcome.output, path, "expected"),
        "broadcast": req.broadcast,
    }
    if req.float_rules != "ieee":
        document["float_rules"] = req.float_rules
    if req.allow_tf32:
        document["allow_tf32"] = True
    # One key a line, each tensor on one line: as the shared conformance cases are laid out, and easy to diff.
    text = "{\n" + ",\n".join(f" {json.dumps(key)}: {json.dumps(value, default=_jsonable)}"
                               for key, value in document.items()) + "\n}\n"
    write_atomically(path, lambda handle: handle.write(text.encode("utf-8")))


def _jsonable(value):
    # A parameter given through the API may be a NumPy scalar; anything else is written as its text, which
    # parameters read exactly (as they read the command line's).
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
