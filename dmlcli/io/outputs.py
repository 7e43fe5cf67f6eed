"""Where the outputs of an operator with several outputs (SPLIT, TOP_K) go.

`-o a.npy -o b.npy` (one target per output tensor, in DESC order), `-o out.npz` (one archive holding one array per
output, named after DirectML's tensor fields: OutputValueTensor, OutputTensors_0, ...), or `-o -` (one JSON object
on stdout mapping those names to JSON tensors). An operator with one output takes one target, as always. The outputs
are those the call gives: --outputs leaves optional ones out (MULTIHEAD_ATTENTION's present keys and values).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import InputError, quoted
from .npy import save_npy


def member_name(tensor_name: str) -> str:
    """A tensor's name as an .npz member or JSON key: OutputTensors[1] -> OutputTensors_1."""
    return tensor_name.replace("[", "_").replace("]", "")


def is_archive(target: str) -> bool:
    from .targets import suffix

    return suffix(target).lower() == ".npz"


def check_targets(targets: Sequence[str], names: Sequence[str] | None, output_format: str | None = None) -> None:
    """Refuse, before any work, targets that do not fit the outputs (`names`; None: not yet known);
    `output_format` (--format npy|json) names a single target's format whatever its extension."""
    from .atomic import check_output_path
    from .targets import is_stdout

    for target in targets:
        if is_archive(target) and output_format is None:
            _check_archive_path(target)
        elif not is_stdout(target):
            check_output_path(target, output_format)
    if names is None:
        return
    if len(targets) == 1 and (is_archive(targets[0]) or (len(names) > 1 and is_stdout(targets[0]))):
        return
    if len(targets) != len(names):
        shown = ", ".join(names)
        raise InputError(f"{len(targets)} outputs given (-o) but the call writes {len(names)} ({shown}): give one "
                         f"-o per output tensor, in that order, or one -o out.npz for all of them")


def _check_archive_path(target: str) -> None:
    import os
    from pathlib import Path

    path = Path(target)
    if not path.parent.is_dir():
        raise InputError(f"output {quoted(target)}: folder {quoted(path.parent)} does not exist")
    if path.is_dir():
        raise InputError(f"output {quoted(target)}: is a directory")
    if not os.access(path.parent, os.W_OK):
        raise InputError(f"output {quoted(target)}: folder {quoted(path.parent)} is not writable")


def write_outputs(arrays: Sequence[np.ndarray], names: Sequence[str], targets: Sequence[str]) -> None:
    """Write every output to its target (see the module's docstring), each file atomically."""
    from pathlib import Path

    from .atomic import write_atomically, write_output
    from .targets import is_stdout

    check_targets(targets, names)
    if len(targets) == 1 and is_archive(targets[0]):
        data = archive_bytes(arrays, names)
        write_atomically(Path(targets[0]), lambda handle: handle.write(data))
        return
    if len(targets) == 1 and len(names) > 1 and is_stdout(targets[0]):
        if targets[0] == "-.npy":
            raise InputError("several outputs cannot go to stdout as .npy (one stream holds one array): "
                             "use -o out.npz, or -o - for one JSON object")
        import sys

        sys.stdout.write(json_object_text(arrays, names) + "\n")
        return
    for array, target in zip(arrays, targets):
        write_output(array, target)


def archive_bytes(arrays: Sequence[np.ndarray], names: Sequence[str]) -> bytes:
    """An .npz archive (uncompressed, as numpy.savez writes it) of the arrays, each under its member name."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for array, name in zip(arrays, names):
            member = io.BytesIO()
            save_npy(member, array)
            archive.writestr(member_name(name) + ".npy", member.getvalue())
    return buffer.getvalue()


def json_object_text(arrays: Sequence[np.ndarray], names: Sequence[str]) -> str:
    """One JSON object mapping each output's name to its JSON tensor (what `-o -` prints for several outputs)."""
    import json

    from .json_tensor import to_json_text

    parts = [f"{json.dumps(member_name(name))}: {to_json_text(array)}" for array, name in zip(arrays, names)]
    return "{" + ", ".join(parts) + "}"
