"""Room for the output, checked before any work: free disk in the target's folder, available memory."""

from __future__ import annotations

import math
import os
import re
import time

import numpy as np

from ..errors import InputError, quoted
from .npy import npy_file_bytes

# Peak Python memory of turning one element into JSON text (tracemalloc over 2^20 elements of uint8, float32,
# float64: 64, 76 and 93 bytes), rounded up.
JSON_PEAK_BYTES_PER_ELEMENT = 100


# What a run loads beyond `dmlcli --version` (the engine, the operator table, the writers): measured 1 to 2 MiB.
RUN_CODE_BYTES = 8 << 20


def _least_json_bytes(count: int) -> int:
    # Every element takes at least one digit and a ", " separator.
    return 3 * count


_MEMINFO_FIELD = rb"^(MemAvailable|SwapFree):[ \t]*([0-9]+)"  # compiled on first use (re caches it)


def available_memory() -> int | None:
    """Bytes this process could still allocate: available RAM plus free swap, within a cgroup limit.

    None where the system does not say.
    """
    found = None
    try:
        with open("/proc/meminfo", "rb") as handle:
            text = handle.read()
        # Only the two fields are parsed: every run asks, and a whole-file parse cost more than a small
        # reduction itself (about 0.15 ms).
        fields = {match.group(1): int(match.group(2)) * 1024 for match in re.finditer(_MEMINFO_FIELD, text, re.MULTILINE)}
        if b"MemAvailable" in fields:
            found = fields[b"MemAvailable"] + fields.get(b"SwapFree", 0)
    except OSError:
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    try:
        with open("/sys/fs/cgroup/memory.max") as handle:
            limit = handle.read().strip()
        with open("/sys/fs/cgroup/memory.current") as handle:
            used = handle.read().strip()
        if limit.isdigit() and used.isdigit():
            found = min(found, int(limit) - int(used))
    except OSError:
        pass
    return max(found, 0)


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


def is_json_target(target: str | None) -> bool:
    """Whether -o TARGET is written as JSON text: a .json file, or stdout as JSON (-, -.json)."""
    if target is None:
        return False
    from .targets import STDOUT_TARGETS, suffix

    return (STDOUT_TARGETS.get(target) or suffix(target).lower()) == ".json"


def in_memory_bytes(target: str | None, shape, dtype: np.dtype, *, input_bytes: int = 0) -> int:
    """The memory an in-memory run needs on top of the interpreter: its inputs read into memory
    (`input_bytes`), the output array, and for JSON output (`-o x.json`, `-o -`) the text.

    JSON text is built in memory from Python strings, one per element, before it is written:
    JSON_PEAK_BYTES_PER_ELEMENT is the measured peak of that (an upper bound). tests/test_memory_bounds.py
    checks the whole estimate against the peak resident memory of real runs.
    """
    count = math.prod(shape)
    per_element = np.dtype(dtype).itemsize + (JSON_PEAK_BYTES_PER_ELEMENT if is_json_target(target) else 0)
    return RUN_CODE_BYTES + input_bytes + count * per_element


def check_room_for_output(target: str | None, shape, dtype: np.dtype, *, in_memory: bool,
                          input_bytes: int = 0) -> None:
    """Refuse, before any work, an output that needs more disk than its folder has free, or more memory than
    there is (`in_memory`: the whole result is held in memory; False for the streaming path).

    `target` is None for a result shown on stdout. The memory counted is `in_memory_bytes` (the
    inputs, `input_bytes`, the output and its JSON text); the backend's scratch is not, so a run that
    passes may still run short; one that fails could never have finished.
    """
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    from .targets import STDOUT_TARGETS

    stdout_suffix = STDOUT_TARGETS.get(target) if target is not None else None
    as_json = is_json_target(target)
    described = f"{dtype} {list(shape)}"
    if in_memory:
        needed = in_memory_bytes(target, shape, dtype, input_bytes=input_bytes)
        available = _available_for(needed)
        if available is not None and needed > available:
            hint = ("write it as .npy instead (-o out.npy), which is exact and, from .npy inputs, streamed in "
                    "constant memory" if as_json else
                    ".npy inputs written to a .npy output are streamed in constant memory")
            raise InputError(f"the output ({described}) needs about {_bytes_text(needed)} of memory"
                             f"{' as JSON text' if as_json else ''}{' with its inputs' if input_bytes else ''} but only {_bytes_text(available)} is available; "
                             f"nothing was run ({hint})")
    if target is None or stdout_suffix is not None:
        return
    from pathlib import Path

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


def _bytes_text(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"
