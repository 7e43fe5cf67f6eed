"""Where a Dask graph runs: a local scheduler, a LocalCluster started for the run, or a running cluster.

Progress comes from Dask's own reporting (a dask.callbacks.Callback on local schedulers, the
scheduler's progress feed on a cluster, as distributed.progress uses) drawn as dmlcli's streaming
bar (progress.py): bytes done, throughput, time left. Cluster failures (an unreachable scheduler, a
worker that died more often than Dask retries) become one-line dmlcli errors (exit 4).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Callable, ContextManager, Iterator, Sequence

from ..errors import BackendUnavailableError, DmlcliError, first_line
from .settings import DaskOptions, require_dask, require_distributed

ProgressFactory = Callable[[int], ContextManager[Callable[[int], None]]]


class LocalScheduler:
    """Dask's threaded, multiprocessing or synchronous scheduler on this machine."""

    def __init__(self, name: str, workers: int | None):
        self.name = name
        self.workers = workers

    def describe(self) -> str:
        return f"dask {self.name}" + (f" x{self.workers}" if self.workers else "")

    def compute(self, collections: Sequence, *, progress: ProgressFactory | None = None, total_bytes: int = 0):
        import dask

        extra = {"num_workers": self.workers} if self.workers and self.name != "sync" else {}
        with _progress(progress, total_bytes) as advance, _TaskCallback(advance, total_bytes):
            return dask.compute(*collections, scheduler=self.name, **extra)


class ClusterScheduler:
    """A dask.distributed Client: to a running scheduler, or to a LocalCluster dmlcli started."""

    def __init__(self, client, where: str):
        self.client = client
        self.where = where

    def describe(self) -> str:
        return self.where

    def compute(self, collections: Sequence, *, progress: ProgressFactory | None = None, total_bytes: int = 0):
        distributed = require_distributed()
        try:
            futures = self.client.compute(list(collections))
            with _progress(progress, total_bytes) as advance:
                if progress is not None and total_bytes:
                    _follow(self.client, futures, advance, total_bytes)
                return tuple(self.client.gather(futures))
        except distributed.scheduler.KilledWorker as error:
            raise BackendUnavailableError(
                f"Dask workers of {self.where} died while running {error.task!r} more often than Dask retries "
                f"(distributed.scheduler.allowed-failures); nothing was written") from None
        except (OSError, distributed.comm.core.CommClosedError) as error:
            if isinstance(error, DmlcliError):
                raise
            raise BackendUnavailableError(f"lost the Dask scheduler at {self.where} ({first_line(error)}); "
                                          "nothing was written") from None


@contextlib.contextmanager
def scheduler(options: DaskOptions) -> Iterator[LocalScheduler | ClusterScheduler]:
    """The scheduler the options name, started and stopped around the run where dmlcli starts it."""
    require_dask()
    if options.address is not None:
        client = connect(options.address, options.timeout)
        try:
            yield ClusterScheduler(client, options.address)
        finally:
            client.close()
    elif options.workers is not None and options.scheduler is None:
        distributed = require_distributed()
        # Processes, one thread each: the kernels hold the GIL in places (NumPy's ufunc loops release it,
        # the glue does not), and a process per worker is what a cluster of machines looks like.
        with distributed.LocalCluster(n_workers=options.workers, threads_per_worker=1, processes=True,
                                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
                distributed.Client(cluster) as client:
            yield ClusterScheduler(client, f"a LocalCluster of {options.workers} workers")
    else:
        yield LocalScheduler(options.local_scheduler, options.workers)


def connect(address: str, timeout: float):
    """A Client of the scheduler at `address`, or exit 4 naming the address and the time waited."""
    distributed = require_distributed()
    try:
        return distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise BackendUnavailableError(
            f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({first_line(error)}); check the "
            "address and that the scheduler runs (DMLCLI_CONNECT_TIMEOUT sets the wait)") from None


# ---------------------------------------------------------------- progress


@contextlib.contextmanager
def _progress(factory: ProgressFactory | None, total_bytes: int):
    if factory is None or not total_bytes:
        yield None
        return
    with factory(total_bytes) as advance:
        yield advance


class _TaskCallback:
    """Dask's local-scheduler callbacks: each finished task advances the bar by its share of the bytes."""

    def __new__(cls, advance, total_bytes: int):
        if advance is None:
            return contextlib.nullcontext()
        from dask.callbacks import Callback

        class Bar(Callback):
            def _start_state(self, dsk, state):
                self.share = total_bytes / max(1, len(dsk))
                self.done = 0.0
                self.shown = 0

            def _posttask(self, key, result, dsk, state, worker_id):
                self.done += self.share
                step = int(self.done) - self.shown
                if step > 0:
                    self.shown += step
                    advance(step)

        return Bar()


def _follow(client, futures, advance, total_bytes: int) -> None:
    """Draw the scheduler's progress feed (the one distributed.progress reads) until the run ends."""
    from distributed.diagnostics.progressbar import ProgressBar

    class Bar(ProgressBar):
        shown = 0

        def _draw_bar(self, remaining=0, all=0, **kwargs):  # noqa: A002 - the feed's own name
            done = int(total_bytes * (all - remaining) / max(1, all))
            if done > self.shown:
                advance(done - self.shown)
                self.shown = done

    bar = Bar(futures, scheduler=client.scheduler.address, interval="200ms", complete=True)
    client.sync(bar.listen)
