"""Room for the output, checked before any work: free disk in the target's folder, available memory."""

from __future__ import annotations

import math
import os
import time

import numpy as np

from ..errors import InputError, quoted
from .npy import npy_file_bytes
# At module level, not in the functions: an import statement costs each in-memory run a few microseconds (issue 23),
# and the engine imports targets.py anyway.
from .targets import STDOUT_TARGETS, written_suffix

# JSON text is written piece by piece (io/json_tensor.JsonTextWriter, 65536 elements at a time): what the
# writer holds at once, the piece's strings and its text, whatever the tensor's size (measured: under 10 MiB
# for float64), with room to spare.
JSON_WRITER_BYTES = 16 << 20


# What a run loads beyond `dmlcli --version` (the engine, the operator table, the writers): measured 1 to 2 MiB.
RUN_CODE_BYTES = 8 << 20


def _least_json_bytes(count: int) -> int:
    # Every element takes at least one digit and a ", " separator.
    return 3 * count


def _meminfo_bytes(text: str, field: str) -> int | None:
    """One field of /proc/meminfo ("MemAvailable:   123 kB") in bytes; None where it is missing or malformed."""
    key = f"{field}:"
    start = text.find(f"\n{key}") + 1
    if start == 0 and not text.startswith(key):
        return None
    end = text.find("\n", start)
    line = text[start:] if end < 0 else text[start:end]
    words = line.split()
    if line.count(":") != 1 or len(words) < 2 or not words[1].isdigit():
        return None
    return int(words[1]) * 1024


def _read_text(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def available_memory() -> int | None:
    """Bytes this process could still allocate: available RAM plus free swap, within a cgroup limit (its share of
    them in a suite's worker: share_memory) and within its own RLIMIT_AS and RLIMIT_DATA.

    None where the system does not say. Every in-memory run asks, so /proc/meminfo's two fields are found
    by a search, not a parse of every line (a tenth of a millisecond saved a call).
    """
    found = None
    try:
        meminfo = _read_text("/proc/meminfo")
        available = _meminfo_bytes(meminfo, "MemAvailable")
        if available is not None:
            found = available + (_meminfo_bytes(meminfo, "SwapFree") or 0)
    except OSError:
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    global _cgroup_limited
    if _cgroup_limited:
        try:
            limit = _read_text("/sys/fs/cgroup/memory.max").strip()
            used = _read_text("/sys/fs/cgroup/memory.current").strip()
            if limit.isdigit() and used.isdigit():
                found = min(found, int(limit) - int(used))
        except FileNotFoundError:
            _cgroup_limited = False  # no cgroup v2 memory controller here: a process's cgroup does not change
        except OSError:
            pass
    found = max(found, 0) // _share  # the machine's and the cgroup's memory, shared with a suite's other workers
    limited = _rlimit_room()  # this process's own
    return found if limited is None else min(found, limited)


# The part of the available memory this process counts on: all of it, or 1/N in each of a test suite's N worker
# processes, whose cases run at the same time (each checks room for its own case as `run` does: issue 34).
_share = 1


def share_memory(processes: int) -> None:
    """Count on 1/`processes` of the available memory from now on (a suite's worker, one of `processes`)."""
    global _share
    _share = max(1, int(processes))


_cgroup_limited = True  # until /sys/fs/cgroup/memory.max is found missing


def _rlimit_room() -> int | None:
    """What this process's own limits leave it: RLIMIT_AS less the address space it has mapped (VmSize), RLIMIT_DATA
    less its data (VmData); None where neither is set (the usual case). A run under `ulimit -v` (a CI job's, a
    suite's worker) that the machine's memory would hold still fails to allocate: counted, it is refused up
    front instead of ending in MemoryError (issue 34)."""
    import resource

    found = None
    for limit, field in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft = resource.getrlimit(limit)[0]
        if soft == resource.RLIM_INFINITY:
            continue
        try:
            used = _meminfo_bytes(_read_text("/proc/self/status"), field)  # the same "Name:  123 kB" lines
        except OSError:
            used = None
        room = max(soft - (used or 0), 0)
        found = room if found is None else min(found, room)
    return found

# The last reading of available_memory(): [the function that read it, its answer, time.monotonic() then].
_last_reading: list = []
RECENT_SECONDS = 1.0
SMALL_SHARE = 16


def _available_for(needed: int) -> int | None:
    """available_memory(), or its reading of under RECENT_SECONDS ago where `needed` is at most 1/SMALL_SHARE of it.

    Reading /proc/meminfo (and the cgroup's files) was most of a small API call's fixed cost (issue 23). A call
    that needs a sixteenth of what was available a moment ago would pass against a new reading too (unless the
    machine lost 15/16 of its memory within that second); a call that could be refused always gets a new reading,
    so a refusal's message is the same. A replaced available_memory (tests monkeypatch it) is always called.
    """
    now = time.monotonic()
    if _last_reading:
        reader, found, when = _last_reading
        if (reader is available_memory and found is not None and now - when < RECENT_SECONDS
                and needed * SMALL_SHARE <= found):
            return found
    found = available_memory()
    _last_reading[:] = [available_memory, found, now]
    return found


def is_json_target(target: str | None, output_format: str | None = None) -> bool:
    """Whether -o TARGET is written as JSON text: a .json file (or any file with --format json), or stdout
    as JSON (-, -.json)."""
    if target is None:
        return False
    return written_suffix(target, output_format) == ".json"


def in_memory_bytes(target: str | None, shape, dtype: np.dtype, *, input_bytes: int = 0,
                    output_format: str | None = None) -> int:
    """The memory an in-memory run needs on top of the interpreter: its inputs read into memory
    (`input_bytes`), the output array, and for JSON output (`-o x.json`, `-o -`) the text writer's pieces.

    JSON text is written piece by piece, never whole: JSON_WRITER_BYTES, a constant, bounds what it holds.
    tests/test_memory_bounds.py checks the whole estimate against the peak resident memory of real runs.
    """
    count = math.prod(shape)
    text = JSON_WRITER_BYTES if is_json_target(target, output_format) else 0
    return RUN_CODE_BYTES + input_bytes + count * np.dtype(dtype).itemsize + text


def check_room_for_output(target: str | None, shape, dtype: np.dtype, *, in_memory: bool,
                          input_bytes: int = 0, output_format: str | None = None) -> None:
    """Refuse, before any work, an output that needs more disk than its folder has free, or more memory than
    there is (`in_memory`: the whole result is held in memory; False for the streaming path).

    `target` is None for a result shown on stdout. The memory counted is `in_memory_bytes` (the
    inputs, `input_bytes`, the output and its JSON text); the backend's scratch is not, so a run that
    passes may still run short; one that fails could never have finished.
    """
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    stdout_suffix = STDOUT_TARGETS.get(target) if target is not None else None
    as_json = is_json_target(target, output_format)
    if in_memory:
        needed = in_memory_bytes(target, shape, dtype, input_bytes=input_bytes, output_format=output_format)
        available = _available_for(needed)
        if available is not None and needed > available:
            described = f"{dtype} {list(shape)}"
            hint = ".npy inputs written to a .npy or JSON output (or JSON on stdout) are streamed in constant memory"
            raise InputError(f"the output ({described}) needs about {_bytes_text(needed)} of memory"
                             f"{' with its inputs' if input_bytes else ''} but only {_bytes_text(available)} is "
                             f"available; nothing was run ({hint})")
    if target is None or stdout_suffix is not None:
        return
    from pathlib import Path  # only for a file target: a run to stdout goes without pathlib

    from .atomic import WRITTEN_INTO, output_target

    written, kind = output_target(Path(target))
    if kind == WRITTEN_INTO:  # a device, FIFO or socket: written into, no disk space taken here
        return
    needed = _least_json_bytes(count) if as_json else npy_file_bytes(shape, dtype)
    folder = written.parent  # through a symbolic link, the folder of the file that is replaced
    try:
        import shutil  # only for a file target: it pulls in bz2 and lzma, which a run on stdout need not load

        usage = shutil.disk_usage(folder)
    except OSError:
        return
    if usage.total == 0:  # a file system that does not report its size (some FUSE mounts): nothing to judge by
        return
    free = usage.free
    if needed > free:
        raise InputError(f"output {quoted(target)}: needs {'at least ' if as_json else ''}{_bytes_text(needed)} of disk "
                         f"but {quoted(folder)} has {_bytes_text(free)} free; nothing was run or written")


def check_room_to_read(data_bytes: int, *, where: str) -> None:
    """Refuse, before it is inflated, an input array (a .npz member) that needs more memory than there is."""
    available = available_memory()
    if available is not None and data_bytes > available:
        raise InputError(f"{where}: needs {_bytes_text(data_bytes)} of memory to be read but only "
                         f"{_bytes_text(available)} is available; nothing was read (.npz members written to a "
                         ".npy output are streamed in constant memory)")


def _bytes_text(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"
