"""Output files written atomically: a temporary file beside the target, renamed over it once complete."""

from __future__ import annotations

from typing import TYPE_CHECKING

import contextlib
import errno
import os
import stat
import sys

import numpy as np

from ..errors import InputError, quoted
from ..errors import first_line as _first_line
from .json_tensor import write_json_text
from .npy import to_native
from .targets import STDOUT_TARGETS, is_stdout, written_suffix

if TYPE_CHECKING:  # annotations only: the module is imported without it at run time
    from pathlib import Path


def check_output_path(target: str, output_format: str | None = None) -> None:
    """Refuse an output the run could not write, before any work is done.

    `output_format` ("npy" or "json", run's --format) names the format whatever the extension; without it
    the extension decides, and a path with neither .npy nor .json is refused, except /dev/null.
    """
    if is_stdout(target):
        return
    from pathlib import Path  # only for a file: a run to stdout goes without pathlib

    path = Path(target)
    if written_suffix(target, output_format) is None:
        raise InputError(_unknown_format_message(target, path))
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"output {quoted(target)}: folder {quoted(folder)} does not exist")
    check_name_length(path, target)
    written, kind = output_target(path)
    if kind == WRITTEN_INTO:
        if not os.access(written, os.W_OK):
            raise InputError(f"output {quoted(target)}: {quoted(written)} is not writable")
        return
    if not os.access(written.parent, os.W_OK):
        raise InputError(f"output {quoted(target)}: folder {quoted(written.parent)} is not writable")


def _unknown_format_message(target: str, path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError:
        mode = 0
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a character device"
        return (f"output {quoted(target)}: is {kind}, whose name does not say how to write the result: give "
                "--format npy or --format json")
    extension = f"unknown extension {path.suffix!r}" if path.suffix else "no extension"
    return (f"output {quoted(target)}: {extension}; name the format with --format npy or --format json, or end "
            "the name in .npy or .json (- for JSON on stdout)")


# What output_target finds at the output's path.
NEW_FILE = "new"  # nothing there: a file is created, through a temporary file
REPLACED = "replaced"  # a regular file: replaced atomically, keeping its owner, group, mode and attributes
WRITTEN_INTO = "written into"  # a character device, FIFO or socket: written directly, in order


def output_target(path: Path, shown: str | None = None) -> tuple[Path, str]:
    """(the path that is written, NEW_FILE / REPLACED / WRITTEN_INTO), following symbolic links.

    A dangling or looping link, a directory and a block device are refused: a link names the file
    to replace (dmlcli creates none through a link), and a disk is never written raw.
    """
    from pathlib import Path

    shown = str(path) if shown is None else shown
    written = path
    if path.is_symlink():
        try:
            written = Path(os.path.realpath(path, strict=True))
        except FileNotFoundError:
            raise InputError(f"output {quoted(shown)}: is a symbolic link to {quoted(os.readlink(path))}, which "
                             "does not exist (dmlcli replaces the file a link names, but creates none)") from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise InputError(f"output {quoted(shown)}: is a symbolic link that loops and never reaches a "
                                 "file") from None
            raise InputError(f"output {quoted(shown)}: cannot follow the symbolic link ({error.strerror})") from None
    try:
        mode = written.stat().st_mode
    except FileNotFoundError:
        return written, NEW_FILE
    except OSError as error:
        raise InputError(f"output {quoted(shown)}: cannot be examined ({error.strerror})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"output {quoted(shown)}: is a directory")
    if stat.S_ISREG(mode):
        return written, REPLACED
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return written, WRITTEN_INTO
    raise InputError(f"output {quoted(shown)}: is a block device; dmlcli writes files, pipes and character "
                     "devices, never a disk directly")


def check_name_length(path: Path, shown: str) -> None:
    """A name longer than the file system allows (usually 255 bytes) is refused before any work."""
    limit = _name_limit(path.parent)
    size = len(os.fsencode(path.name))
    if size > limit:
        raise InputError(f"output {quoted(shown)}: the file name is {size} bytes long; the file system allows "
                         f"at most {limit}")


def _name_limit(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def write_output(array: np.ndarray, target: str, *, stdout=None, output_format: str | None = None) -> None:
    """Write `array` to `target` (.npy or .json by extension or `output_format`; '-' for JSON on stdout),
    atomically."""
    if is_stdout(target):
        write_stdout(array, STDOUT_TARGETS[target], stdout=stdout)
        return
    from pathlib import Path

    check_output_path(target, output_format)
    path = Path(target)
    if written_suffix(target, output_format) == ".npy":
        from .npy import save_npy

        write_atomically(path, lambda handle: save_npy(handle, array))
    else:  # the text piece by piece: never the whole of it in memory
        write_atomically(path, lambda handle: write_json_text(array, lambda text: handle.write(text.encode("utf-8"))))


def write_stdout(array: np.ndarray, suffix: str, *, stdout=None) -> None:
    """`array` on stdout: JSON text, or (suffix ".npy") the bytes np.save writes, in pieces of 16 MiB."""
    stream = stdout or sys.stdout
    if suffix != ".npy":
        write_json_text(array, stream.write)
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


# What a run must take back if the process ends without unwinding: cli/signals.py ends it itself when a signal
# comes while a long C call (NumPy, ONNX Runtime) keeps the main thread from raising. The temporary files being
# written, and callbacks (a model's files written before a later one failed).
_IN_FLIGHT: set[str] = set()
_CLEANUPS: list = []


@contextlib.contextmanager
def cleanup_if_abandoned(callback):
    """Within the block, `callback()` runs if the process is ended by abandon()."""
    _CLEANUPS.append(callback)
    try:
        yield
    finally:
        _CLEANUPS.remove(callback)


def abandon() -> None:
    """Remove the temporary files being written and run the cleanups, last registered first: the process is
    about to end without unwinding. Called from another thread while the main one is stuck; never raises."""
    for temporary in list(_IN_FLIGHT):
        try:
            os.unlink(temporary)
        except OSError:
            pass
    for callback in reversed(list(_CLEANUPS)):
        try:
            callback()
        except Exception:  # noqa: BLE001 - the process is ending: take back what can be taken back
            pass


def write_atomically(path: Path, write) -> None:
    """Write through a temporary file in the target's folder, renamed over the target only once complete.

    A failure at any point leaves an existing target as it was and removes the temporary file.
    The temporary file is named `.NAME.PID.RANDOM.tmp` (`.dmlcli.PID.RANDOM.tmp` where that would be
    too long a name): a run killed outright (SIGKILL, power loss) cannot remove its own, so the next
    write to the same folder removes those whose process is gone. A target that is a symbolic link
    keeps the link; the file it names is replaced, keeping its owner, group, mode and extended
    attributes. A character device, FIFO or socket is written into directly, in order.
    """
    shown = str(path)
    path, kind = output_target(path, shown)
    if kind == WRITTEN_INTO:
        _write_into(path, write, shown)
        return
    import tempfile  # only where a file is written: a run to stdout goes without it (and without shutil)

    folder = path.parent
    remove_stale_temporaries(path)
    temporary = None
    try:
        try:
            descriptor, temporary = tempfile.mkstemp(prefix=_temporary_prefix(path), suffix=".tmp", dir=folder)
        except OSError as error:
            raise InputError(f"output {quoted(shown)}: cannot create a file in {quoted(folder)} "
                             f"({error.strerror})") from None
        _IN_FLIGHT.add(temporary)
        with os.fdopen(descriptor, "wb") as handle:
            _keep_identity(path if kind == REPLACED else None, handle.fileno())
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        if temporary is None:
            # Ctrl-C or another signal can strike inside mkstemp, after it made the file and before its name
            # is known here (a signal may reach any thread, so masking it in this one would not do).
            _remove_own_temporaries(path)
            raise
        removed = _remove(temporary)
        if isinstance(error, OSError):
            raise InputError(f"output {quoted(shown)}: write failed ({error.strerror or _first_line(error)}); "
                             f"the target was left as it was {removed}") from None
        raise
    finally:
        _IN_FLIGHT.discard(temporary)
    sync_folder(folder)


def _temporary_prefix(path: Path) -> str:
    # mkstemp adds 8 random characters and the suffix; the name must fit whatever the target's length.
    prefix = f".{path.name}.{os.getpid()}."
    if len(os.fsencode(prefix)) + 8 + len(".tmp") <= _name_limit(path.parent):
        return prefix
    return f"{_SHORT_PREFIX}{os.getpid()}."


_SHORT_PREFIX = ".dmlcli."


def _remove(temporary: str) -> str:
    """Remove a temporary file; the words that say what happened (an append-only folder refuses)."""
    try:
        os.unlink(temporary)
    except FileNotFoundError:
        return "and the partial file removed"
    except OSError as error:
        return f"but the partial file {quoted(temporary)} could not be removed ({error.strerror})"
    return "and the partial file removed"


def _keep_identity(replaced: Path | None, descriptor: int) -> None:
    """Give the temporary file the replaced file's owner, group, mode and extended attributes (as `sed -i`
    does), or for a new file the mode the umask gives. Owner and attributes are kept where allowed
    (a user cannot give a file away; some attributes are the system's): a failure there is not an error.
    """
    if replaced is None:
        os.fchmod(descriptor, _default_file_mode())
        return
    facts = replaced.stat()
    if hasattr(os, "fchown"):
        try:
            os.fchown(descriptor, facts.st_uid, facts.st_gid)
        except OSError:
            try:
                os.fchown(descriptor, -1, facts.st_gid)  # a user may still keep a group they belong to
            except OSError:
                pass
    os.fchmod(descriptor, stat.S_IMODE(facts.st_mode))  # after chown, which clears set-id bits
    _copy_extended_attributes(replaced, descriptor)


def _copy_extended_attributes(source: Path, descriptor: int) -> None:
    # ACLs are the attributes system.posix_acl_*; security.* and trusted.* need privileges: skipped quietly.
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError:
        return
    for name in names:
        try:
            os.setxattr(descriptor, name, os.getxattr(source, name))
        except OSError:
            pass


class _FullWriter:
    """A binary stream over a descriptor whose every write goes out whole (pipes and sockets take part of
    a large write at a time; Python's buffered writer can drop the rest when the reader goes away)."""

    def __init__(self, descriptor: int):
        self.descriptor = descriptor
        self.position = 0

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            view = view[os.write(self.descriptor, view):]
        self.position += total
        return total

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self.descriptor


def _write_into(path: Path, write, shown: str) -> None:
    """Write into a character device, FIFO or socket, in order: no rename is possible there (as cp does)."""
    try:
        if stat.S_ISSOCK(path.stat().st_mode):
            import socket

            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                connection.connect(str(path))
            except OSError:
                connection.close()
                raise
            descriptor = os.dup(connection.fileno())
            connection.close()
        else:
            # No O_CREAT: if the device or FIFO went away since it was checked, nothing is created in its place.
            descriptor = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise InputError(f"output {quoted(shown)}: cannot be opened for writing ({error.strerror})") from None
    try:
        write(_FullWriter(descriptor))
    except OSError as error:
        raise InputError(f"output {quoted(shown)}: write failed ({error.strerror or _first_line(error)}); it is "
                         "a device, pipe or socket, written in place, so what was written before the failure stays "
                         "written") from None
    finally:
        os.close(descriptor)


def sync_folder(folder: Path) -> None:
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
    """(temporary file, writer's process id) for each `.NAME.PID.RANDOM.tmp` and `.dmlcli.PID.RANDOM.tmp`
    beside `path`."""
    folder = path.parent
    prefix = f".{path.name}."
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        if not name.endswith(".tmp"):
            continue
        if name.startswith(prefix):
            pid_text = name[len(prefix):].split(".", 1)[0]
        elif name.startswith(_SHORT_PREFIX):  # a temporary whose target's name was too long to include
            pid_text = name[len(_SHORT_PREFIX):].split(".", 1)[0]
        else:
            continue
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


def _remove_own_temporaries(path: Path) -> None:
    for temporary, pid in temporary_files_of(path):
        if pid == os.getpid():
            _remove(str(temporary))


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
