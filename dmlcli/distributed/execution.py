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

        # A pool of our own, left only when its running tasks have ended: after a failure no task may
        # still be writing into a store that is about to be removed.
        with self._pool() as pool, _progress(progress, total_bytes) as advance, _task_callback(advance, total_bytes):
            extra = {} if pool is None else {"pool": pool}
            return dask.compute(*collections, scheduler=self.name, **extra)

    def _pool(self):
        import os
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

        size = self.workers or os.cpu_count() or 1
        if self.name == "threads":
            return ThreadPoolExecutor(size, thread_name_prefix="dmlcli-dask")
        if self.name == "processes":
            import multiprocessing

            import dask

            context = multiprocessing.get_context(dask.config.get("multiprocessing.context", "spawn"))
            return ProcessPoolExecutor(size, mp_context=context)
        return contextlib.nullcontext()


class ClusterScheduler:
    """A dask.distributed Client: to a running scheduler, or to a LocalCluster dmlcli started."""

    def __init__(self, client, where: str):
        self.client = client
        self.where = where

    def describe(self) -> str:
        return self.where

    def compute(self, collections: Sequence, *, progress: ProgressFactory | None = None, total_bytes: int = 0):
        futures = []
        try:
            futures = self.client.compute(list(collections))
            with _progress(progress, total_bytes) as advance:
                if advance is not None:
                    _follow(self.client, futures, advance, total_bytes)
                return tuple(self.client.gather(futures))
        except BaseException as error:
            self._stop(futures)
            failure = self._failure(error)
            if failure is None:
                raise
            raise failure from None

    def _stop(self, futures, patience: float = 30.0) -> None:
        """Cancel a failed run's tasks and wait until none runs, so that none writes after the store is removed."""
        import time

        with contextlib.suppress(Exception):
            self.client.cancel(futures, force=True)
            deadline = time.monotonic() + patience
            while any(self.client.processing().values()) and time.monotonic() < deadline:
                time.sleep(0.05)

    def _failure(self, error: BaseException) -> DmlcliError | None:
        """The dmlcli error for a cluster's failure; None to re-raise `error` as it is (dmlcli's own, Ctrl-C)."""
        distributed = require_distributed()
        if isinstance(error, distributed.scheduler.KilledWorker):
            return BackendUnavailableError(
                f"Dask workers of {self.where} died while running {error.task!r} more often than Dask retries "
                "(distributed.scheduler.allowed-failures); the target was left as it was")
        if isinstance(error, (ConnectionError, distributed.comm.core.CommClosedError)):
            return BackendUnavailableError(f"lost the Dask scheduler at {self.where} ({first_line(error)}); "
                                           "the target was left as it was")
        return None


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
                                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
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


def _task_callback(advance, total_bytes: int):
    """Dask's local-scheduler callbacks: each finished task advances the bar by its share of the bytes."""
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

        def _finish(self, dsk, state, errored):
            if not errored and self.shown < total_bytes:  # the shares' rounding, made up at the end
                advance(total_bytes - self.shown)

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
