"""Streamed .npy runs on a backend with pinned memory (engine/file_pipeline.py), on the CPU through a fake backend
that behaves as the GPU's execute_chunks does: it holds `chunks_held` chunks before yielding, yields outputs in its
own pinned blocks, and checks that no input chunk it holds is overwritten."""

from __future__ import annotations

import errno
import mmap
import os
import subprocess
import sys
import threading
import weakref
from collections import deque
from pathlib import Path

import numpy as np
import pytest

import dmlcli
from dmlcli.engine import file_pipeline, streaming
from dmlcli.errors import InputError


class PinnedFake:
    """execute_chunks as the GPU backend's: up to `chunks_held` chunks in flight, each output yielded only after
    the next chunks are taken; its 'pinned' memory (pinned_empty) counted while alive."""

    name = "pinned-fake"
    preferred_chunk_bytes = 1 << 20

    def __init__(self, chunks_held: int = 3, fail_at: int | None = None, claims: int | None = None):
        self.chunks_held = chunks_held if claims is None else claims
        self.holds = chunks_held
        self.fail_at = fail_at
        self.lock = threading.Lock()
        self.live = self.peak = 0
        self.chunk_sizes: list[int] = []
        self.all_pinned = True

    def _freed(self, nbytes: int) -> None:
        with self.lock:
            self.live -= nbytes

    def pinned_empty(self, shape, dtype) -> np.ndarray:
        array = np.empty(shape, dtype)
        with self.lock:
            self.live += array.nbytes
            self.peak = max(self.peak, self.live)
        weakref.finalize(array, self._freed, array.nbytes)
        return array

    def execute_chunks(self, operator, chunks, out_dtype, parameters):
        held: deque = deque()
        for number, chunk in enumerate(chunks):
            if number == self.fail_at:
                raise OSError(5, "Input/output error")
            self.chunk_sizes.append(chunk[0].size)
            self.all_pinned &= all(x.base is not None for x in chunk)
            kept = [np.array(x) for x in chunk]  # what the device would have copied, checked when yielded
            result = self.pinned_empty(chunk[0].shape, out_dtype)
            result[...] = operator.cpu_kernel(kept, np.dtype(out_dtype), parameters)
            held.append((chunk, kept, result))
            while len(held) > self.holds:
                yield self._release(held.popleft())
        while held:
            yield self._release(held.popleft())

    @staticmethod
    def _release(entry) -> np.ndarray:
        chunk, kept, result = entry
        for given, copy in zip(chunk, kept):
            assert np.array_equal(given, copy, equal_nan=True), "an input chunk changed while the backend held it"
        return result


def save(tmp_path: Path, arrays, order: str = "C", byteorder: str = "=") -> list[str]:
    paths = []
    for i, array in enumerate(arrays):
        path = tmp_path / f"in{i}.npy"
        np.save(path, np.asarray(array.astype(array.dtype.newbyteorder(byteorder)), order=order))
        paths.append(str(path))
    return paths


def inputs_of(dtype, shape, count: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
            .view(dtype).reshape(shape) for _ in range(count)]


def cpu_bytes(tmp_path: Path, op: str, paths, **options) -> bytes:
    target = tmp_path / "cpu.npy"
    dmlcli.run_files(op, paths, str(target), **options)
    return target.read_bytes()


@pytest.mark.parametrize("shape,chunk_bytes", [((1000,), 64), ((37, 29), 1000), ((5, 3, 7), 40), ((1,), 8),
                                               ((3000,), 1 << 20)])
@pytest.mark.parametrize("byteorder", ["=", ">"])
def test_the_pipeline_gives_the_general_paths_bytes(tmp_path, shape, chunk_bytes, byteorder):
    paths = save(tmp_path, inputs_of(np.uint32, shape), byteorder=byteorder)
    backend = PinnedFake()
    target = tmp_path / "out.npy"
    dmlcli.run_files("bit_xor", paths, str(target), backend=backend, chunk_bytes=chunk_bytes)
    assert backend.chunk_sizes and backend.all_pinned
    assert backend.peak >= (3 + 1) * min(chunk_bytes // 4, int(np.prod(shape))) * 4 * 2  # the rings: this path
    assert sum(backend.chunk_sizes) == int(np.prod(shape))
    assert target.read_bytes() == cpu_bytes(tmp_path, "bit_xor", paths, chunk_bytes=chunk_bytes)


def test_chunks_come_in_order_and_every_part_is_read_in_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(file_pipeline, "PART_BYTES", 16)  # many parts per chunk: offsets inside a chunk are tested
    monkeypatch.setattr(file_pipeline, "IO_THREADS", 4)
    arrays = [np.arange(5000, dtype=np.float32), np.arange(5000, dtype=np.float32)[::-1].copy()]
    paths = save(tmp_path, arrays)
    target = tmp_path / "out.npy"
    dmlcli.run_files("add", paths, str(target), backend=PinnedFake(), chunk_bytes=400)
    np.testing.assert_array_equal(np.load(target), np.full(5000, 4999, np.float32))


def test_the_pipeline_counts_hooks_over_every_chunk(tmp_path):
    arrays = [np.arange(90, dtype=np.uint8).reshape(30, 3), np.full((30, 3), 9, np.uint8)]
    paths = save(tmp_path, arrays)
    with pytest.warns(dmlcli.DmlcliWarning, match=" of 90 shift counts are >= the element width 8"):
        dmlcli.run_files("bit_shift_right", paths, str(tmp_path / "out.npy"), backend=PinnedFake(), chunk_bytes=7)


def test_the_pinned_memory_stays_within_the_bound(tmp_path):
    """The rings (chunks_held + 1 chunks per input) and the outputs: the backend's chunks_held + 1 and WRITES_HELD
    being written; whatever the file's size. The bound also counts the mapped pages of the chunk being copied."""
    chunk = 4096
    arrays = inputs_of(np.uint8, (64 * chunk,))
    paths = save(tmp_path, arrays)
    backend = PinnedFake(chunks_held=3)
    dmlcli.run_files("bit_xor", paths, str(tmp_path / "out.npy"), backend=backend, chunk_bytes=chunk)
    inputs = [streaming.open_input(p, label="input") for p in paths]
    ours = file_pipeline.pipeline_memory_bound(backend, inputs, np.uint8, chunk)
    pinned = (3 + 1) * chunk * 2 + file_pipeline.WRITES_HELD * chunk
    assert ours == pinned + chunk + 2 * mmap.PAGESIZE
    backends_own = (backend.chunks_held + 1) * chunk  # the outputs it holds, one of them just yielded
    assert backend.peak <= pinned + backends_own
    assert backend.peak >= (3 + 1) * chunk * 2  # the rings were allocated: the path was taken
    assert backend.live == 0  # and all of it given back


def test_a_backend_that_holds_more_than_it_says_is_stopped_before_a_buffer_is_overwritten(tmp_path):
    paths = save(tmp_path, inputs_of(np.uint8, (1000,)))
    target = tmp_path / "out.npy"
    target.write_bytes(b"previous")
    with pytest.raises(RuntimeError, match="whose pinned buffer it would overwrite"):
        dmlcli.run_files("bit_xor", paths, str(target), backend=PinnedFake(chunks_held=4, claims=2), chunk_bytes=50)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in0.npy", "in1.npy", "out.npy"]


@pytest.mark.parametrize("fail_at", [0, 1, 5])
def test_an_error_mid_stream_leaves_no_output(tmp_path, fail_at):
    paths = save(tmp_path, inputs_of(np.uint16, (1000,)))
    target = tmp_path / "out.npy"
    target.write_bytes(b"previous")
    with pytest.raises(InputError, match="left as it was"):
        dmlcli.run_files("bit_or", paths, str(target), backend=PinnedFake(fail_at=fail_at), chunk_bytes=64)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in0.npy", "in1.npy", "out.npy"]


def test_an_input_truncated_during_the_run_is_said_in_words(tmp_path, monkeypatch):
    paths = save(tmp_path, inputs_of(np.uint8, (4000,)))
    real = file_pipeline._Ring.read

    def read_then_truncate(self, pool, number, first, count, shape):
        if number == 2:
            with open(paths[1], "r+b") as handle:
                handle.truncate(200)
        return real(self, pool, number, first, count, shape)

    monkeypatch.setattr(file_pipeline._Ring, "read", read_then_truncate)
    target = tmp_path / "out.npy"
    with pytest.raises(InputError, match="the file ended early"):
        dmlcli.run_files("bit_and", paths, str(target), backend=PinnedFake(), chunk_bytes=500)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in0.npy", "in1.npy"]


def test_ctrl_c_during_a_write_leaves_no_output(tmp_path, monkeypatch):
    paths = save(tmp_path, inputs_of(np.uint8, (4000,)))
    writes = []

    def interrupted(output, part, first):
        writes.append(first)
        if len(writes) == 3:
            mapped = output.data_bytes()  # a view of the map, kept alive by the error's traceback
            raise KeyboardInterrupt(mapped.size)
        return real(output, part, first)

    real = file_pipeline._copy_part
    monkeypatch.setattr(file_pipeline, "_copy_part", interrupted)
    target = tmp_path / "out.npy"
    with pytest.raises(KeyboardInterrupt):
        dmlcli.run_files("bit_and", paths, str(target), backend=PinnedFake(), chunk_bytes=500)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in0.npy", "in1.npy"]


def test_the_output_may_be_an_input(tmp_path):
    arrays = inputs_of(np.uint8, (3000,))
    paths = save(tmp_path, arrays)
    dmlcli.run_files("bit_xor", paths, paths[0], backend=PinnedFake(), chunk_bytes=256)
    np.testing.assert_array_equal(np.load(paths[0]), arrays[0] ^ arrays[1])


@pytest.mark.parametrize("case", ["broadcast", "fortran", "npz", "cpu", "empty"])
def test_other_runs_take_the_general_path(tmp_path, case):
    arrays = inputs_of(np.uint8, (40, 30))
    if case == "broadcast":
        arrays[1] = arrays[1][:1]
    if case == "empty":
        arrays = [a[:0] for a in arrays]
    paths = save(tmp_path, arrays, order="F" if case == "fortran" else "C")
    if case == "npz":
        np.savez(tmp_path / "in.npz", x=arrays[1])
        paths[1] = f"{tmp_path / 'in.npz'}:x"
    inputs = [streaming.open_input(p, label="input") for p in paths]
    with open(tmp_path / "probe", "wb") as handle:
        backend = dmlcli.backends.get_backend("cpu") if case == "cpu" else PinnedFake()
        assert not file_pipeline.applies(backend, inputs, tuple(np.broadcast_shapes(*[a.shape for a in arrays])),
                                         handle)


def test_each_chunk_is_copied_into_a_reserved_range_and_a_full_disk_is_an_error_not_sigbus(tmp_path, monkeypatch):
    """The output is mapped: a chunk copied into a range whose blocks were not reserved would get SIGBUS on a full
    disk. Every copy lands in a range reserved before it; a reservation that fails (ENOSPC) is the atomic writer's
    message, the target left as it was."""
    monkeypatch.setattr(file_pipeline, "RESERVE_BYTES", 300)
    monkeypatch.setattr(file_pipeline, "RESERVED_AHEAD", 1)
    paths = save(tmp_path, inputs_of(np.uint8, (5000,)))
    reserved: list[tuple[int, int]] = []
    lock = threading.Lock()

    def recorded(descriptor, offset, length):
        streaming.reserve(descriptor, offset, length)
        with lock:
            reserved.append((offset, offset + length))

    def checked(output, part, first):
        start = output.header_size + first
        with lock:
            covered = sum(min(hi, start + part.size) - max(lo, start) for lo, hi in reserved
                          if lo < start + part.size and hi > start)
        assert covered == part.size, "a part was copied into a range not yet reserved"
        real_copy(output, part, first)

    real_copy = file_pipeline._copy_part
    monkeypatch.setattr(file_pipeline, "reserve", recorded)
    monkeypatch.setattr(file_pipeline, "_copy_part", checked)
    target = tmp_path / "out.npy"
    dmlcli.run_files("bit_xor", paths, str(target), backend=PinnedFake(), chunk_bytes=700)
    assert target.read_bytes() == cpu_bytes(tmp_path, "bit_xor", paths, chunk_bytes=700)
    assert len(reserved) == 17  # 5000 bytes in spans of 300

    def full(descriptor, offset, length):
        if len(reserved) >= 4:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        recorded(descriptor, offset, length)

    reserved.clear()
    monkeypatch.setattr(file_pipeline, "reserve", full)
    target.write_bytes(b"previous")
    with pytest.raises(InputError, match="No space left on device.*left as it was"):
        dmlcli.run_files("bit_xor", paths, str(target), backend=PinnedFake(), chunk_bytes=700)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu.npy", "in0.npy", "in1.npy", "out.npy"]


RESIDENT_GROWTH = """
import resource, sys
import numpy as np
import dmlcli
from dmlcli.backends import get_backend

class Pinned:
    # The CPU backend's results, offered as a pinned backend would: the pipeline's path is taken.
    name = "pinned"
    preferred_chunk_bytes = 1 << 20
    chunks_held = 0

    def __init__(self):
        self.cpu = get_backend("cpu")

    def pinned_empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def execute_chunks(self, *arguments):
        return self.cpu.execute_chunks(*arguments)

backend = Pinned()
small, big, target = sys.argv[1:]
dmlcli.run_files("bit_not", [small], target, backend=backend, chunk_bytes=1 << 20)  # the code loaded, at a small peak
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
dmlcli.run_files("bit_not", [big], target, backend=backend, chunk_bytes=1 << 20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before)
"""


def test_the_mapped_output_pages_do_not_pile_up_in_resident_memory(tmp_path):
    """A mapped page counts in the process's resident memory until it is unmapped: each chunk's pages are released
    after its copy, so the growth stays near the pipeline's bound (a few MiB), far below the 96 MiB output."""
    path = tmp_path / "a.npy"
    np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(96 << 20,)).flush()  # zeros, sparse
    np.save(tmp_path / "small.npy", np.zeros(4096, np.uint8))
    env = dict(os.environ, PYTHONPATH=str(Path(dmlcli.__file__).parents[1]))
    done = subprocess.run([sys.executable, "-c", RESIDENT_GROWTH, str(tmp_path / "small.npy"), str(path),
                           str(tmp_path / "out.npy")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    growth = int(done.stdout)
    inputs = [streaming.open_input(str(path), label="a.npy")]
    bound = file_pipeline.pipeline_memory_bound(PinnedFake(chunks_held=0), inputs, np.uint8, 1 << 20)
    assert np.load(tmp_path / "out.npy", mmap_mode="r")[-1] == 255
    # The bound; the CPU backend's result chunks (a few MiB); the code a first large run still loads.
    assert growth <= bound + streaming.STREAMING_CODE_BYTES, (growth, bound)
