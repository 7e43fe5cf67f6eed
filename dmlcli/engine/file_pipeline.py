"""Streamed .npy runs on a backend that copies from pinned host memory (the GPU's): file reads, the backend's work
and file writes overlapped, with no host copy in between.

streaming.py's general path reads each chunk on one thread into a NumPy buffer, which the GPU backend then copies
into its pinned staging memory, and writes each output chunk on the same thread before the next is read: every
step waits for the one before (1 GiB bit_xor on an H200: 1.08 s, where the file reads and writes alone take
0.27 s). Here, for a backend that offers

- `pinned_empty(shape, dtype)`: host memory its copies run from at full speed (page-locked), and
- `chunks_held`: the most input chunks it holds, their outputs not yet yielded, when it asks for the next chunk
  (execute_chunks's contract: a pinned input chunk goes to the device from where it is, so it must stay unchanged
  until its output chunk has been yielded),

each input chunk is read by a pool of threads, each with pread at its own offset, straight into one of a ring of
`chunks_held + 1` pinned buffers per input, and handed to execute_chunks as it is; each output chunk the backend
yields is copied by the pool, in parts, into the output file mapped in memory, at its place, while the next chunks
are read and computed. (Not pwrite: the kernel writes one file on one thread at a time, tmpfs and most file systems
under the file's lock, so eight threads' pwrites of one chunk took as long as one's: 1 GiB BIT_XOR on the H200,
0.46 s where the reads and mapped writes of bench/gpu_bench.py's pipeline_files take 0.27 s. Copies into a shared
map run side by side, each page faulted in on its own thread.) The ring is safe by the backend's contract: chunk k
goes into buffer k mod (chunks_held + 1), and the backend asks for chunk k only once it has yielded the output of
chunk k - chunks_held - 1, the buffer's last user; a backend that breaks its word is stopped with an error before a
buffer in use is overwritten.

What pipeline_files (the bench's floor) does not do, kept here: reserving the output (below); unmapping each chunk's
pages and POSIX_FADV_DONTNEED on its range (the memory bound; on a disk the writeback starts while the rest is
computed, on tmpfs the advice costs a system call and does nothing); msync and fsync at the end (the atomic writer's
promise; nothing to do on tmpfs). Reads are made when the backend asks for a chunk, not by a thread of their own one
chunk ahead: the GPU backend asks for chunk k + 1 while chunk k is on the device, so reads and the GPU overlap as
they do there; reading before the backend asks would take another pinned buffer per input (or tracking which
buffers its yields have freed), for the time the main thread waits on a write, which the copies' threads keep short.

The output file is sized first (ftruncate) and its data range reserved (streaming.reserve: posix_fallocate, else
zeros written) span by span by a thread of its own, ahead of the copies: a chunk is copied only into a reserved
range, so a full disk is an OSError that the atomic writer reports, never a SIGBUS from the map. (On tmpfs
reserving allocates the pages, about 0.2 s a GiB on one thread: done up front, or before each chunk's copy, it would
add that to the run.)

Memory (pipeline_memory_bound): the rings, (chunks_held + 1) chunks per input, in pinned memory; the output chunks
the backend holds (its own business, as on the general path) and at most WRITES_HELD being written; and the pages of
the one output chunk being copied, mapped into the process (resident memory, though they are the page cache's, the
file's own pages on tmpfs): unmapped after each chunk (MADV_DONTNEED; they stay in the page cache, written back to
the disk from there), as the tiled path does after each tile. No staging copies: the GPU backend's pinned staging
buffers (PIPELINE_SLOTS pieces per input) are never allocated.

It applies where each input is a .npy file stored in C order with the output's Sizes (no broadcast, no .npz
array: those take the general path, as do the CPU backend and backends without the two attributes) and the output
is a regular file. The output is still written into write_atomically's temporary file, the map flushed (msync)
before its fsync, and renamed over the target only once complete: an error or Ctrl-C anywhere leaves the target as
it was.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterator, Sequence

import numpy as np

from .streaming import (Box, NpyInput, _box_shape, _ContiguousReader, _is_regular_file, _MappedWriter, _result_array,
                        reads_in_order, reserve)

# Threads that read or write one chunk's parts at once (a pread, or a copy into the mapped output, moves the bytes
# on the calling thread, so one thread moves a few GB/s where several move the memory's bandwidth).
IO_THREADS = max(1, min(8, os.cpu_count() or 1))
# Below this, a part is not worth a thread of its own (a chunk of 16 MiB still goes to 8 threads, as in
# bench/gpu_bench.py's pipeline_files: FLOAT32 -> UINT8 outputs are a quarter of the 64 MiB input chunks).
PART_BYTES = 2 << 20
# Output chunks being written while the next are read and computed (beyond those the backend holds).
WRITES_HELD = 2
# The output's data are reserved in spans of this many bytes, at most RESERVED_AHEAD spans beyond the chunk being
# written (a span waited for is one the copies need now; the thread works ahead of them).
RESERVE_BYTES = 64 << 20
RESERVED_AHEAD = 4


def applies(engine, inputs: Sequence[NpyInput], shape: tuple[int, ...], handle) -> bool:
    """Whether a streamed run takes this path (see the module's docstring)."""
    held = getattr(engine, "chunks_held", None)
    return (callable(getattr(engine, "pinned_empty", None)) and isinstance(held, int) and held >= 0
            and math.prod(shape) > 0 and _is_regular_file(handle)
            and all(x.member is None and reads_in_order(x, shape, True) for x in inputs))


def ring_size(engine) -> int:
    """Pinned buffers per input: the chunks the backend may hold, and the one it asks for."""
    return int(engine.chunks_held) + 1


def pipeline_memory_bound(engine, inputs: Sequence[NpyInput], out_dtype: np.dtype, chunk_elements: int) -> int:
    """The host memory this path itself takes: the input rings (pinned), the output chunks being written, and the
    mapped pages of the one being copied into the output (two more pages where it does not start and end on page
    boundaries). The output chunks the backend holds are counted with the backend, as on the general path."""
    rings = ring_size(engine) * chunk_elements * sum(x.dtype.itemsize for x in inputs)
    out_chunk = chunk_elements * np.dtype(out_dtype).itemsize
    return rings + WRITES_HELD * out_chunk + out_chunk + 2 * mmap.PAGESIZE


def run(job, engine, handle, header_bytes: int, advance: Callable[[int], None]) -> None:
    """Stream `job` (streaming._Job) through `engine` into `handle` (the temporary output file, its header
    already written), chunk by chunk in C order."""
    boxes = list(job.boxes(in_order=True))
    per_element = sum(x.dtype.itemsize for x in job.inputs) + job.out_dtype.itemsize
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(_ContiguousReader(x, job.shape, 0)) for x in job.inputs]
        rings = [_Ring(engine, reader, job.chunk_elements, ring_size(engine)) for reader in readers]
        # Sized and mapped; flushed (on success) and unmapped only after every thread below has ended.
        output = stack.enter_context(_MappedWriter(handle, header_bytes, job.shape, job.out_dtype, reserve_now=False))
        # On leaving (in the reverse order): the backend's copies to and from pinned memory end, the writes not
        # started are dropped and those started end, then every part a pool still runs (after Ctrl-C during a
        # read), the reservations not started are dropped and the one running ends, and only then are the map and
        # the files closed: nothing reads or writes after that.
        reserver = ThreadPoolExecutor(1, thread_name_prefix="dmlcli-reserve")
        stack.callback(reserver.shutdown, cancel_futures=True)
        reservations = _Reservations(reserver, output, math.prod(job.shape) * job.out_dtype.itemsize)
        pool = stack.enter_context(ThreadPoolExecutor(2 * IO_THREADS, thread_name_prefix="dmlcli-io"))
        writer = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="dmlcli-writer"))
        writes: deque[Future] = deque()
        stack.callback(_finish, writes)
        received = [0]  # output chunks the backend has yielded
        chunks = _chunks(job, boxes, rings, pool, received)
        results = stack.enter_context(contextlib.closing(
            engine.execute_chunks(job.call.operator, chunks, job.out_dtype, job.call.parameters)))
        for number, result in enumerate(results):
            if number >= len(boxes):
                raise RuntimeError("the backend returned more chunks than it was given")
            box = boxes[number]
            received[0] = number + 1
            data = _result_array(result, box, job.out_dtype).reshape(-1).view(np.uint8)
            first = _first_element(box, job.shape) * job.out_dtype.itemsize
            while len(writes) >= WRITES_HELD:
                writes.popleft().result()
            writes.append(writer.submit(_write_chunk, pool, output, reservations, data, first))
            advance(data.size // job.out_dtype.itemsize * per_element)
        while writes:
            writes.popleft().result()
        if received[0] != len(boxes):
            raise RuntimeError(f"the backend returned {len(boxes) - received[0]} fewer chunks than it was given")


class _Reservations:
    """The output's data range reserved (streaming.reserve) span by span, in order, by a thread of its own, up to
    RESERVED_AHEAD spans beyond the chunk being written. Used by the one writer thread, chunks in order."""

    def __init__(self, executor: ThreadPoolExecutor, output: _MappedWriter, total: int):
        self.executor = executor
        self.output = output
        self.total = total
        self.submitted = 0  # bytes of the data whose reservation is queued
        self.spans: deque[tuple[int, Future]] = deque()  # (first byte, its reservation), not yet waited for
        self._queue_until(0)

    def wait(self, first: int, count: int) -> None:
        """Return once bytes first..first+count of the data are reserved; raise the error if one could not be."""
        end = first + count
        self._queue_until(end)
        while self.spans and self.spans[0][0] < end:
            self.spans.popleft()[1].result()

    def _queue_until(self, end: int) -> None:
        limit = min(self.total, end + RESERVED_AHEAD * RESERVE_BYTES)
        while self.submitted < limit:
            length = min(RESERVE_BYTES, self.total - self.submitted)
            position = self.output.header_size + self.submitted
            self.spans.append((self.submitted, self.executor.submit(reserve, self.output.descriptor, position,
                                                                    length)))
            self.submitted += length


class _Ring:
    """One input's pinned chunk buffers, read into in turn."""

    def __init__(self, engine, reader: _ContiguousReader, chunk_elements: int, size: int):
        self.reader = reader
        itemsize = reader.source.dtype.itemsize
        self.buffers = [engine.pinned_empty((chunk_elements * itemsize,), np.uint8) for _ in range(size)]

    def read(self, pool: ThreadPoolExecutor, number: int, first: int, count: int, shape) -> np.ndarray:
        """Chunk `number` (elements first..first+count of the file), read by the pool into its buffer."""
        source = self.reader.source
        itemsize = source.dtype.itemsize
        raw = self.buffers[number % len(self.buffers)][:count * itemsize]
        parts = [pool.submit(self._read_part, raw[lo:hi], source.offset + first * itemsize + lo)
                 for lo, hi in _parts(count, itemsize)]
        _wait_all(parts)
        return raw.view(self.reader.native).reshape(shape)

    def _read_part(self, part: np.ndarray, position: int) -> None:
        self.reader._read_exactly(part, position)
        if self.reader.swapped:  # a big-endian file: native order in place, in the pinned buffer itself
            part.view(self.reader.source.dtype).byteswap(inplace=True)


def _chunks(job, boxes: Sequence[Box], rings: Sequence[_Ring], pool: ThreadPoolExecutor,
            received: list[int]) -> Iterator[list[np.ndarray]]:
    """Each box's input chunks, read into the rings as the backend asks for them."""
    size = len(rings[0].buffers) if rings else 1
    for number, box in enumerate(boxes):
        # The buffer's last user was chunk number - size: its output must have come back.
        if number - size >= received[0]:
            raise RuntimeError(f"the backend asked for chunk {number + 1} before yielding the output of chunk "
                               f"{number - size + 1}, whose pinned buffer it would overwrite (it holds at most "
                               f"chunks_held = {size - 1}, it says)")
        first, shape = _first_element(box, job.shape), _box_shape(box)
        arrays = [ring.read(pool, number, first, math.prod(shape), shape) for ring in rings]
        chunk = job.call.complete(arrays)
        if job.tally is not None:
            job.tally.add(chunk, None)
        yield chunk


def _first_element(box: Box, shape: tuple[int, ...]) -> int:
    return int(np.ravel_multi_index(tuple(s.start for s in box), shape)) if shape else 0


def _parts(count: int, itemsize: int) -> list[tuple[int, int]]:
    """Byte ranges that split `count` elements over the threads, on element boundaries, none under PART_BYTES."""
    total = count * itemsize
    pieces = max(1, min(IO_THREADS, total // PART_BYTES))
    bounds = [count * i // pieces * itemsize for i in range(pieces + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _write_chunk(pool: ThreadPoolExecutor, output: _MappedWriter, reservations: _Reservations, data: np.ndarray,
                 first: int) -> None:
    """One output chunk copied into the mapped output at byte `first` of its data, by the pool in parts, once that
    range is reserved; then its pages released (_MappedWriter.release)."""
    reservations.wait(first, data.size)
    _wait_all([pool.submit(_copy_part, output, data[lo:hi], first + lo) for lo, hi in _parts(data.size, 1)])
    output.release(first, data.size)


def _copy_part(output: _MappedWriter, part: np.ndarray, first: int) -> None:
    # The map's view is made here, on the pool's thread, so that none outlives the copy (the map closes after it).
    np.copyto(output.data_bytes()[first:first + part.size], part)


def _wait_all(futures: Sequence[Future]) -> None:
    """Wait for every one, then raise the first one's error: no part may still be running when this returns."""
    for future in futures:
        future.exception()
    for future in futures:
        future.result()


def _finish(writes: deque) -> None:
    """On leaving (done, an error or Ctrl-C): the writes in flight end before the file is closed or removed."""
    for future in writes:
        future.cancel()
    for future in writes:
        if not future.cancelled():
            future.exception()
