"""A model run's files: inputs by the model's names (.npy, .npz, JSON, inline JSON, as `dmlcli run` reads them),
outputs to one .npz or one .npy per output in a folder (each written atomically), --check against an expected
.npz, and the --report JSON.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..checking.comparison import Comparison, Rule, compare_arrays
from ..errors import InputError, quoted
from .session import OnnxSession

# The rule outputs are checked by (--check): NumPy's allclose with rtol 1e-4 and atol 1e-4 times the expected
# output's largest magnitude (issue 32's figure for whole networks: a network's output carries the rounding of
# every node before it, so no operator's ULP figure bounds it).
CHECK_RTOL, CHECK_ATOL_SHARE = 1e-4, 1e-4


def read_inputs(session: OnnxSession, specs: Sequence[str]) -> dict[str, np.ndarray]:
    """The inputs from --input NAME=SOURCE (SOURCE as `dmlcli run` reads an INPUT: .npy, .npz[:member], .json,
    inline JSON), or SOURCE alone: an .npz whose members named as the model's inputs give them, or any source for
    a model of one input. A bare JSON list takes the input's declared type."""
    from ..io.sources import read_tensor

    declared = {d.name: d for d in session.model.inputs}
    inputs: dict[str, np.ndarray] = {}
    for spec in specs:
        name, source = _split(spec, declared)
        if name is None and str(source).lower().endswith(".npz"):
            inputs.update(_npz_inputs(source, declared))
            continue
        if name is None:
            if len(declared) != 1:
                names = ", ".join(declared) or "none"
                raise InputError(f"--input {quoted(spec)}: give NAME=FILE; the model has {len(declared)} inputs "
                                 f"({names})")
            name = next(iter(declared))
        if name in inputs:
            raise InputError(f"--input: {name!r} is given twice")
        dtype = declared[name].dtype
        bare = _data_type(dtype)
        inputs[name] = read_tensor(source, label=f"input {name!r}", bare_dtype=bare)
    return inputs


def _split(spec: str, declared: Mapping) -> tuple[str | None, str]:
    name, equals, source = spec.partition("=")
    if equals and name in declared:
        return name, source
    if equals and not os.path.exists(spec):
        names = ", ".join(declared) or "none"
        raise InputError(f"--input {quoted(spec)}: the model has no input {name!r} (its inputs: {names})")
    return None, spec


def _data_type(dtype):
    from ..data_types import from_numpy

    if dtype is None:
        return None
    try:
        return from_numpy(np.dtype(np.uint8) if dtype == np.bool_ else dtype)
    except InputError:
        return None


def _npz_inputs(source: str, declared: Mapping) -> dict[str, np.ndarray]:
    return _named_arrays(source, list(declared), "--input", "input")


def _named_arrays(path: str, names: Sequence[str], option: str, what: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz named as the model's inputs or outputs (`what`); others are left aside."""
    from ..io.sources import read_tensor

    members = _npz_members(path)
    found = {name: read_tensor(f"{path}:{name}", label=f"{option} {name!r}") for name in names if name in members}
    if not found:
        raise InputError(f"{option} {quoted(path)}: holds none of the model's {what}s ({', '.join(names)}) among its "
                         f"arrays ({', '.join(members) or 'none'})")
    return found


def _npz_members(source: str) -> list[str]:
    import zipfile

    try:
        with zipfile.ZipFile(source) as archive:
            return [name[:-4] if name.endswith(".npy") else name for name in archive.namelist()]
    except FileNotFoundError:
        raise InputError(f"{quoted(source)}: no such file") from None
    except (OSError, zipfile.BadZipFile) as error:
        raise InputError(f"{quoted(source)}: is not a readable .npz file ({error})") from None


# ---------------------------------------------------------------- outputs


def check_output_target(target: str) -> None:
    """Refuse, before the model runs, an -o that cannot be written: an .npz whose folder is missing, or a folder
    that does not exist or is not writable."""
    path = Path(target)
    if target.lower().endswith(".npz"):
        if not path.parent.is_dir():
            raise InputError(f"-o {quoted(target)}: folder {quoted(str(path.parent))} does not exist")
        if path.is_dir():
            raise InputError(f"-o {quoted(target)}: is a directory (give OUT.npz, or a folder without .npz)")
        return
    if not path.is_dir():
        raise InputError(f"-o {quoted(target)}: no such folder (give an existing folder for one .npy per output, "
                         "or OUT.npz)")
    if not os.access(path, os.W_OK):
        raise InputError(f"-o {quoted(target)}: the folder is not writable")


def file_name(name: str) -> str:
    """An output's name as a file name in the folder (path separators and other awkward characters as _)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name).lstrip(".")
    return (safe or "output") + ".npy"


def write_outputs(outputs: Mapping[str, np.ndarray], target: str) -> list[str]:
    """Every output to `target` (an .npz of all, or one .npy per output in a folder), each file written
    atomically; the paths written."""
    from ..io.atomic import write_atomically, write_output
    from ..io.outputs import archive_bytes

    check_output_target(target)
    names = list(outputs)
    arrays = [np.asarray(outputs[name]) for name in names]
    if target.lower().endswith(".npz"):
        data = archive_bytes(arrays, names)
        write_atomically(Path(target), lambda handle: handle.write(data))
        return [target]
    paths = [str(Path(target) / file_name(name)) for name in names]
    if len(set(paths)) != len(paths):
        raise InputError(f"-o {quoted(target)}: two outputs have the same file name; give -o OUT.npz")
    for array, path in zip(arrays, paths):
        write_output(array, path, output_format="npy")
    return paths


# ---------------------------------------------------------------- --check


def check_rule(expected: np.ndarray) -> Rule:
    """rtol 1e-4 and atol 1e-4 x the expected output's largest finite magnitude (floats); exact for integers."""
    finite = np.abs(expected[np.isfinite(expected)]) if expected.dtype.kind == "f" else np.zeros(0)
    largest = float(finite.max()) if finite.size else 0.0
    return Rule("allclose", CHECK_ATOL_SHARE * largest, "dmlcli onnx --check: rtol 1e-4, atol 1e-4 x the expected "
                "output's largest magnitude", rtol=CHECK_RTOL)


def read_expected(path: str, outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """The expected outputs: the arrays of an .npz named as the model's outputs (others, such as its inputs, are
    left aside), or an .npy for a model of one output."""
    from ..io.sources import read_tensor

    if not path.lower().endswith(".npz"):
        if len(outputs) != 1:
            raise InputError(f"--check {quoted(path)}: the model has {len(outputs)} outputs; give an .npz of them by "
                             "name")
        return {outputs[0]: read_tensor(path, label="--check")}
    return _named_arrays(path, outputs, "--check", "output")


def check_outputs(outputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                  tolerance: Rule | None = None) -> dict[str, Comparison]:
    """Each expected output against the model's, by --check's rule (or `tolerance`)."""
    found = {}
    for name, want in expected.items():
        got = np.asarray(outputs[name])
        if got.dtype == np.bool_:
            got, want = got.astype(np.uint8), np.asarray(want).astype(np.uint8)
        found[name] = compare_arrays(got, want, tolerance or check_rule(np.asarray(want)))
    return found


def report_document(session: OnnxSession, outputs: Mapping[str, np.ndarray], *, checks=None, comparison=None,
                    fallbacks=(), seconds: float = 0.0) -> dict:
    """The --report JSON: the model, the settings, the outputs, the fallbacks, --check's verdicts and the node
    comparison (--compare ort), each where given."""
    from ..versions import installed_version, versions

    found = {
        "model": session.model.source or None, "backend": session.backend,
        "feature_level": session.feature_level.name, "opset": session.model.opset, "nodes": len(session.nodes),
        "versions": {**versions(), "onnx": installed_version("onnx"), "onnxruntime": installed_version("onnxruntime")},
        "seconds": seconds,
        "outputs": [{"name": name, "dtype": str(np.asarray(array).dtype), "shape": list(np.shape(array))}
                    for name, array in outputs.items()],
        "fallbacks": [{"node": node.label, "op": node.op, "reason": reason} for node, reason in fallbacks],
        "check": None if checks is None else {name: check.to_json() for name, check in checks.items()},
        "compare": None if comparison is None else comparison.to_json(),
    }
    return found
