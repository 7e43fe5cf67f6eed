"""Output files written atomically: a temporary file beside the target, renamed over it once complete."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import InputError, quoted
from ..errors import first_line as _first_line
from .json_tensor import to_json_text
from .npy import to_native
from .targets import STDOUT_TARGETS, is_stdout

OUTPUT_SUFFIXES = (".npy", ".json")


def check_output_path(target: str) -> None:
    """Refuse an output the run could not write, before any work is done."""
    if is_stdout(target):
        return
    path = Path(target)
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise InputError(f"output {quoted(target)}: unknown extension {path.suffix!r} (expected .npy or .json, or - for JSON on stdout)")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"output {quoted(target)}: folder {quoted(folder)} does not exist")
    if path.is_dir():
        raise InputError(f"output {quoted(target)}: is a directory")
    if not os.access(folder, os.W_OK):
        raise InputError(f"output {quoted(target)}: folder {quoted(folder)} is not writable")


def write_output(array: np.ndarray, target: str, *, stdout=None) -> None:
    """Write `array` to `target` (.npy or .json by extension; '-' for JSON on stdout), atomically."""
    if is_stdout(target):
        write_stdout(array, STDOUT_TARGETS[target], stdout=stdout)
        return
    check_output_path(target)
    path = Path(target)
    if path.suffix.lower() == ".npy":
        write_atomically(path, lambda handle: np.save(handle, to_native(np.asarray(array)), allow_pickle=False))
    else:
        text = to_json_text(array)
        write_atomically(path, lambda handle: handle.write(text.encode("utf-8")))


def write_stdout(array: np.ndarray, suffix: str, *, stdout=None) -> None:
    """`array` on stdout: JSON text, or (suffix ".npy") the bytes np.save writes, in pieces of 16 MiB."""
    stream = stdout or sys.stdout
    if suffix != ".npy":
        stream.write(to_json_text(array))
        return
    from .npy import npy_header

    data = np.ascontiguousarray(to_native(np.asarray(array)))
    stream.flush()  # anything already written as text goes first
    binary = getattr(stream, "buffer", stream)
    binary.write(npy_header(data.shape, data.dtype))
    flat = data.reshape(-1).view(np.uint8)
    step = 16 << 20
    for start in range(0, flat.size, step):
        binary.write(flat[start:start + step].tobytes())
    binary.flush()


def write_atomically(path: Path, write) -> None:
    """Write through a temporary file in the target's folder, renamed over the target only once complete.

    A failure at any point leaves an existing target as it was and removes the temporary file.
    The temporary file is named `.NAME.PID.RANDOM.tmp`: a run killed outright (SIGKILL, power
    loss) cannot remove its own, so the next write to the same target removes those whose
    process is gone. A target that is a symbolic link keeps the link; the file it names is replaced.
    """
    shown = str(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    folder = path.parent
    remove_stale_temporaries(path)
    try:
        mode = path.stat().st_mode & 0o7777 if path.exists() else _default_file_mode()
        descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise InputError(f"output {quoted(shown)}: cannot create a file in {quoted(folder)} ({error.strerror})") from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise InputError(f"output {quoted(shown)}: write failed ({error.strerror or _first_line(error)}); "
                             "the target was left as it was and the partial file removed") from None
        raise
    _sync_folder(folder)


def _sync_folder(folder: Path) -> None:
    # Makes the rename itself durable; not every file system can sync a folder, and the data are safe anyway.
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def temporary_files_of(path: Path) -> list[tuple[Path, int]]:
    """(temporary file, writer's process id) for each `.NAME.PID.RANDOM.tmp` beside `path`."""
    folder = path.parent
    prefix = f".{path.name}."
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid_text = name[len(prefix):].split(".", 1)[0]
        if pid_text.isdigit():
            found.append((folder / name, int(pid_text)))
    return found


def remove_stale_temporaries(path: Path) -> None:
    """Remove temporary files of earlier writes to `path` whose process no longer exists."""
    for temporary, pid in temporary_files_of(path):
        if pid != os.getpid() and not _process_exists(pid):
            try:
                os.unlink(temporary)
            except OSError:
                pass


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or a number we cannot check: leave its file alone
    return True


def _default_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
