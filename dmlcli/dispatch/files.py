"""The files a model names: where it may read and write, and reading them safely.

A model is input from elsewhere, so by default its reads stay inside the model's folder and its
writes inside the output folder (--output-dir, default the current folder). Paths are resolved
(symbolic links followed, `..` collapsed) before they are compared, so a link inside the folder
that points out of it is refused too. --allow-paths-outside lifts both rules, which is what
DxDispatch itself does. Every file read is a regular file, checked before it is opened and again
on the open descriptor (opened non-blocking, so a FIFO swapped in meanwhile cannot hang the read).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, cut, quoted

ALLOW_FLAG = "--allow-paths-outside"

# A model is JSON text: anything larger is refused before it is read (json.loads takes about
# 5 to 16 times the text in memory). Large initial values belong in .npy or raw files (sourcePath).
MAX_MODEL_BYTES = 64 << 20
JSON_PEAK_BYTES_PER_BYTE = 16


@dataclass(frozen=True)
class PathRules:
    """Where a model may read (`model_dir`) and write (`output_dir`), unless `allow_outside`.

    `replace_existing`: the output folder was named (--output-dir), so a file there may be replaced. Without it
    the folder is the current one, which the model's author did not choose to be written into: an existing
    file is never replaced there (a shared model replaced .git/hooks/pre-commit, keeping it executable).
    """

    model_dir: Path
    output_dir: Path
    allow_outside: bool = False
    replace_existing: bool = False


def shown_path(text: str) -> str:
    """A path from a model as messages show it: quoted, cut to a readable length."""
    return quoted(cut(text))


def _check_path_text(text: str, field: str, where: str) -> None:
    if "\0" in text:
        printable = text.replace("\0", "\\0")
        raise InputError(f"{where}: {field} {shown_path(printable)} contains a NUL character, which no file name may hold")


def _resolved(path: Path, where: str, shown: str) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError) as error:
        raise InputError(f"{where}: {shown} cannot be resolved ({_reason(error)})") from None


def _reason(error: BaseException) -> str:
    if isinstance(error, ValueError):  # what os.stat says of a NUL in a name passed from Python
        return "not a valid file name"
    return getattr(error, "strerror", None) or "the system refused it"


def _via(named: Path, resolved: Path) -> str:
    """Where a path really leads, when links make that differ from what it says."""
    plain = Path(os.path.normpath(os.path.abspath(named)))
    return "" if plain == resolved else f" (a link to {shown_path(str(resolved))})"


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_output_dir(output_dir) -> Path:
    """The output folder. One that does not exist yet is created when the first file is written into it (so
    a model that fails writes no folder either), as DxDispatch's writeFile creates the folders of its targets
    (std::filesystem::create_directories); what exists of its path must be folders."""
    folder = Path(output_dir) if output_dir is not None else Path.cwd()
    shown = quoted(cut(str(folder)))
    existing = folder
    while True:
        try:
            mode = os.stat(existing).st_mode
        except FileNotFoundError:
            if existing.parent == existing:
                raise InputError(f"output folder {shown}: cannot be used (no part of its path exists)") from None
            existing = existing.parent
            continue
        except NotADirectoryError:
            raise InputError(f"output folder {shown}: a part of its path is a file, not a folder") from None
        except (OSError, ValueError) as error:
            raise InputError(f"output folder {shown}: cannot be used ({_reason(error)})") from None
        break
    if not stat.S_ISDIR(mode):
        what = "is not a folder" if existing == folder else f"cannot be created: {quoted(cut(str(existing)))} is a file"
        raise InputError(f"output folder {shown}: {what}")
    return folder


def write_target(target: str, rules: PathRules, where: str) -> tuple[Path, Path]:
    """(the path as the model names it, from the output folder; the resolved path that will be written).

    Refused, unless paths outside are allowed: anything that resolves outside the output folder, a hidden file
    or folder inside it (a name starting with "."), and, where the output folder was not named (--output-dir),
    an existing file. Always: a NUL, a name longer than the file system takes, a directory.
    """
    _check_path_text(target, "targetPath", where)
    shown = f"targetPath {shown_path(target)}"
    named = rules.output_dir / target
    check_name_lengths(named, where, shown)
    resolved = _resolved(named, where, shown)
    folder = _resolved(rules.output_dir, where, "the output folder")
    if not rules.allow_outside:
        if folder not in resolved.parents:
            raise InputError(f"{where}: {shown}{_via(named, resolved)} is outside the output folder "
                             f"{shown_path(str(folder))}; a model writes only inside it (--output-dir) unless you pass "
                             f"{ALLOW_FLAG}")
        hidden = [part for part in resolved.relative_to(folder).parts if part.startswith(".")]
        if hidden:
            raise InputError(f"{where}: {shown}{_via(named, resolved)} names the hidden {shown_path(hidden[0])} "
                             f"inside the output folder; a model writes no hidden file or folder (such as .git or "
                             f".bashrc) unless you pass {ALLOW_FLAG}")
    try:
        mode = os.stat(resolved).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        raise InputError(f"{where}: {shown}: a part of the path is a file, not a folder") from None
    except (OSError, ValueError) as error:
        raise InputError(f"{where}: {shown} cannot be written ({_reason(error)})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(f"{where}: {shown} is a directory")
    if mode is not None and not (rules.replace_existing or rules.allow_outside):
        raise InputError(existing_file_refusal(where, shown, named, resolved, folder))
    return named, resolved


def existing_file_refusal(where: str, shown: str, named: Path, resolved: Path, folder: Path) -> str:
    return (f"{where}: {shown}{_via(named, resolved)} exists, and a model run without --output-dir replaces no file "
            f"in the current folder; name the folder (--output-dir {shown_path(str(folder))}) to let it replace files "
            "there, or remove the file")


def check_name_lengths(path: Path, where: str, shown: str) -> None:
    """Each name of the path within what its file system takes (usually 255 bytes), and the whole path within
    PATH_MAX, before anything is created (a writeFile to a name too long left the folders made for it)."""
    existing = Path(os.path.abspath(path))
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    try:
        name_limit = os.pathconf(existing if existing.is_dir() else existing.parent, "PC_NAME_MAX")
        path_limit = os.pathconf(existing if existing.is_dir() else existing.parent, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_limit, path_limit = 255, 4096
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > name_limit:
            raise InputError(f"{where}: {shown}: the name {shown_path(part)} is {size} bytes long; the file system "
                             f"allows at most {name_limit}")
    size = len(os.fsencode(os.path.abspath(path)))
    if size >= path_limit:
        raise InputError(f"{where}: {shown}: the path is {size} bytes long; the system allows at most "
                         f"{path_limit - 1}")


def source_file(source: str, rules: PathRules, where: str) -> Path:
    """The resolved path of a sourcePath: beside the model, else from the current folder (as DxDispatch
    looks), inside the model's folder unless allowed, and a regular file."""
    _check_path_text(source, "sourcePath", where)
    shown = f"sourcePath {shown_path(source)}"
    candidates = [rules.model_dir / source, Path(source)]
    found = None
    for candidate in candidates:
        try:
            os.stat(candidate)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as error:
            raise InputError(f"{where}: {shown} cannot be read ({_reason(error)})") from None
        found = candidate
        break
    if found is None:
        raise InputError(f"{where}: {shown}: no such file (looked beside the model and in the current folder)")
    resolved = _resolved(found, where, shown)
    folder = _resolved(rules.model_dir, where, "the model's folder")
    if not rules.allow_outside and not _inside(resolved, folder):
        raise InputError(f"{where}: {shown}{_via(found, resolved)} is outside the model's folder "
                         f"{shown_path(str(folder))}; a model reads only files beside it unless you pass {ALLOW_FLAG}")
    check_regular(resolved, where, shown)
    return resolved


def file_beside(folder: Path, name: str, rules: PathRules, where: str, shown: str) -> Path:
    """The resolved path of the file `name` in `folder` (a serialized graph's constant NAME.bin, which DxDispatch
    reads beside the graph): inside the model's folder unless allowed, and a regular file."""
    _check_path_text(name, "name", where)
    named = folder / name
    resolved = _resolved(named, where, shown)
    model_folder = _resolved(rules.model_dir, where, "the model's folder")
    if not rules.allow_outside and not _inside(resolved, model_folder):
        raise InputError(f"{where}: {shown}{_via(named, resolved)} is outside the model's folder "
                         f"{shown_path(str(model_folder))}; a model reads only files beside it unless you pass "
                         f"{ALLOW_FLAG}")
    check_regular(resolved, where, shown)
    return resolved


def check_regular(path: Path, where: str, shown: str) -> int:
    """The size of `path`, which must be a regular file (not a device, FIFO, socket or directory)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{where}: {shown}: no such file") from None
    except (OSError, ValueError) as error:
        raise InputError(f"{where}: {shown} cannot be read ({_reason(error)})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{where}: {shown} is {_kind_of(info.st_mode)}, expected a regular file")
    return info.st_size


class RegularFile:
    """An open regular file: opened non-blocking and checked again on the descriptor (closing the race
    between the check and the open), so a FIFO or device swapped in cannot hang or flood the read."""

    def __init__(self, path: Path, where: str, shown: str):
        check_regular(path, where, shown)
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError) as error:
            raise InputError(f"{where}: {shown} cannot be read ({_reason(error)})") from None
        info = os.fstat(self.fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(self.fd)
            raise InputError(f"{where}: {shown} is {_kind_of(info.st_mode)}, expected a regular file")
        self.size = info.st_size
        self.path, self.where, self.shown = path, where, shown

    def __enter__(self) -> "RegularFile":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)

    @property
    def reopenable_path(self) -> Path:
        """A path naming this very file (Linux's /proc/self/fd), for readers that take a path."""
        linked = Path(f"/proc/self/fd/{self.fd}")
        return linked if linked.exists() else self.path

    def read_all(self) -> bytes:
        """The file's bytes, at most the size it had when opened (a file growing meanwhile is not followed)."""
        chunks, left = [], self.size
        try:
            while left > 0:
                chunk = os.read(self.fd, min(left, 1 << 24))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except OSError as error:
            raise InputError(f"{self.where}: {self.shown} cannot be read ({_reason(error)})") from None
        return b"".join(chunks)
