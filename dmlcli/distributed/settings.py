"""A run's Dask options, parsed and checked without importing Dask (so bad options cost nothing)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..errors import BackendUnavailableError, InputError, quoted, raise_interruption
from ..scalars import is_digits

INSTALL_HINT = "pip install 'dmlcli[dask]'"
SCHEDULER_VARIABLE = "DMLCLI_SCHEDULER"
TIMEOUT_VARIABLE = "DMLCLI_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 10.0  # seconds: long enough for a scheduler across a network, short enough to fail fast

LOCAL_SCHEDULERS = {"threads": "threads", "threaded": "threads", "processes": "processes",
                    "multiprocessing": "processes", "sync": "sync", "synchronous": "sync",
                    "single-threaded": "sync"}
_ADDRESS = re.compile(r"^([a-z][a-z0-9+.-]*://)?[^\s/:]+:\d+/?$|^[a-z][a-z0-9+.-]*://\S+$", re.IGNORECASE)


@dataclass(frozen=True)
class DaskOptions:
    """`scheduler`: threads, processes, sync, or a dask.distributed address (None: threads, or a LocalCluster
    when `workers` is given); `workers`: a LocalCluster's worker processes, or the local pool's size;
    `chunks`: the output's chunk shape (None: the inputs'); `connect_timeout`: seconds to reach a scheduler."""

    scheduler: str | None = None
    workers: int | None = None
    chunks: tuple[int, ...] | str | None = None
    connect_timeout: float | None = None

    @property
    def requested(self) -> bool:
        """Whether the user asked for Dask (a run of .npy or JSON inputs then goes through Dask too)."""
        return self.scheduler is not None or self.workers is not None

    @property
    def address(self) -> str | None:
        return None if self.scheduler is None or self.scheduler.lower() in LOCAL_SCHEDULERS else self.scheduler

    @property
    def local_scheduler(self) -> str:
        return LOCAL_SCHEDULERS[(self.scheduler or "threads").lower()]

    @property
    def timeout(self) -> float:
        return self.connect_timeout if self.connect_timeout is not None else connect_timeout_from_environment()


def dask_options(scheduler=None, workers=None, chunks=None, connect_timeout=None) -> DaskOptions:
    """Checked options: an unknown scheduler, a bad worker count or chunk shape is an InputError (exit 2)."""
    if scheduler is not None:
        scheduler = str(scheduler).strip()
        if scheduler.lower() not in LOCAL_SCHEDULERS and not _ADDRESS.match(scheduler):
            raise InputError(f"--scheduler {quoted(scheduler)}: expected threads, processes, sync, or a Dask "
                             "scheduler's address such as tcp://10.0.0.5:8786")
    if workers is not None:
        if isinstance(workers, bool) or int(workers) != workers or int(workers) < 1:
            raise InputError(f"--workers {workers}: expected a whole number of at least 1")
        workers = int(workers)
        if scheduler is not None and scheduler.lower() not in LOCAL_SCHEDULERS:
            raise InputError(f"--workers starts a cluster on this machine, but --scheduler {quoted(scheduler)} "
                             "names one that runs already; give one or the other")
    if connect_timeout is not None and not float(connect_timeout) > 0:
        raise InputError(f"connect timeout {connect_timeout}: expected a positive number of seconds")
    return DaskOptions(scheduler, workers, parse_chunks(chunks),
                       None if connect_timeout is None else float(connect_timeout))


def parse_chunks(value) -> tuple[int, ...] | str | None:
    """`auto`, one size for every dimension (`256`), or one per dimension (`256,1024`)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        parts = [part.strip() for part in text.split(",")]
        if not all(is_digits(part) and int(part) > 0 for part in parts):
            raise InputError(f"--chunks {quoted(value)}: expected auto, a chunk size (256) or one per dimension "
                             "(256,1024), each a positive whole number")
        return tuple(int(part) for part in parts)
    sizes = (value,) if isinstance(value, int) else tuple(value)
    if not sizes or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        raise InputError(f"chunks {value!r}: expected positive whole numbers")
    return tuple(sizes)


def connect_timeout_from_environment() -> float:
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise InputError(f"{TIMEOUT_VARIABLE}={text!r}: expected a positive number of seconds")
    return seconds


def require_dask():
    """dask.array, or exit 4 with the install command."""
    try:
        import dask.array as da
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"Dask runs need dask, which is not installed; install it with "
                                      f"{INSTALL_HINT}") from None
    return da


def require_distributed():
    try:
        import distributed
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"--scheduler ADDRESS and --workers need dask.distributed, which is not "
                                      f"installed; install it with {INSTALL_HINT}") from None
    return distributed
