"""Constant-memory runs from .npy files (and .npz arrays) to a .npy file: read, compute and write chunk by chunk.

The call is validated from the .npy headers alone. The output is then produced one "box" (a
rectangular block of the output's index space) at a time: each input's part of the box is read
into a reused buffer, converted to native byte order, broadcast to the box, handed to the
backend's `execute_chunks`, and the result is written out. Memory stays a few chunks whatever
the size of the files.

Two ways to cut the output into boxes:
- Inputs stored in C order (the usual case): each box is a run of whole rows, contiguous in the
  output and in every input, so inputs are read with `preadv` and the output is written in order.
- Any input stored in Fortran order (with two or more non-unit dimensions): reading it in the
  output's C order is a transposition, so boxes are near-cubic tiles, inputs and output are
  memory-mapped, and the mapped pages are dropped (MADV_DONTNEED) after each tile so that they
  do not pile up in the process's resident memory.

A .npz array (a zip member) can only be read from its start to its end, inflating as it goes: it is
read chunk by chunk where the boxes take it in that order (row boxes, the member in C order and of
the output's shape); otherwise (broadcast, Fortran order, tiles) it is inflated into memory first,
after a check that there is room (`held_bytes`).

The chunk size (bytes of the widest tensor per box) is DMLCLI_CHUNK_BYTES, default the backend's
preferred_chunk_bytes (1 MiB on the CPU, 64 MiB on the GPU).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import math
import mmap
import os
import stat
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Iterator, Sequence

import numpy as np

from ..data_types import DataType
from ..errors import InputError, quoted
from ..calls.validation import Call

if TYPE_CHECKING:
    from ..io.formats import NpzMember

CHUNK_BYTES_VARIABLE = "DMLCLI_CHUNK_BYTES"
DEFAULT_CHUNK_BYTES = 1 << 20
# Input buffers per input: a backend may hold on to this many chunks minus one while it works
# on the next (the GPU backend overlaps copies with kernels).
BUFFERS_PER_INPUT = 3
# Each input holds BUFFERS_PER_INPUT buffers of a chunk; beyond 1 GiB a chunk buys nothing but memory.
MAX_CHUNK_BYTES = 1 << 30
_SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

Box = tuple[slice, ...]
ProgressFactory = Callable[[int], ContextManager[Callable[[int], None]]]


@dataclass(frozen=True)
class NpyInput:
    """An input .npy file as its header describes it; the data are not touched until streaming."""

    path: Path
    label: str
    shape: tuple[int, ...]
    dtype: np.dtype  # as stored: may be big-endian
    fortran_order: bool
    offset: int  # where the data start in the file (in a .npz member: in its uncompressed stream)
    member: NpzMember | None = None  # where the input is a .npz array: its header and zip directory entry

    @property
    def stored_in_c_order(self) -> bool:
        # With at most one dimension above 1, Fortran and C order are the same bytes.
        return not self.fortran_order or sum(1 for size in self.shape if size > 1) <= 1


def is_streamable(sources: Sequence[str], output: str | None, output_format: str | None = None) -> bool:
    """Whether a run goes through the streaming path: .npy files or .npz arrays in, a .npy file out (by its
    extension or `output_format`, run's --format; /dev/null takes .npy)."""
    from ..io.sources import is_npz_source
    from ..io.targets import is_stdout, written_suffix

    def is_npy_file(name: str) -> bool:
        return name != "-" and Path(name).suffix.lower() == ".npy"

    return (output is not None and not is_stdout(output) and written_suffix(output, output_format) == ".npy"
            and bool(sources) and all(is_npy_file(source) or is_npz_source(source) for source in sources))


def chunk_bytes_from_environment(default: int = DEFAULT_CHUNK_BYTES) -> int:
    """DMLCLI_CHUNK_BYTES: a number of bytes from 1 to 1G, optionally with a K, M or G suffix (powers of 2)."""
    text = os.environ.get(CHUNK_BYTES_VARIABLE, "").strip()
    if not text:
        return default
    number, suffix = (text[:-1], text[-1].upper()) if text[-1].upper() in "KMG" else (text, "")
    # ASCII digits only: str.isdigit() also takes other scripts' digits and superscripts.
    size = int(number) * _SIZE_SUFFIXES[suffix] if number.isascii() and number.isdigit() else 0
    if not 1 <= size <= MAX_CHUNK_BYTES:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise InputError(f"{CHUNK_BYTES_VARIABLE}={quoted(shown)}: expected a whole number of bytes from 1 to 1G, "
                         "optionally followed by K, M or G (e.g. 4M)")
    return size


def streams_as_json(sources: Sequence[str], output: str | None, output_format: str | None = None) -> bool:
    """Whether a run streams into JSON text: .npy files in, a JSON file (by extension or `output_format`) or
    JSON on stdout out; the text is written piece by piece as the chunks are computed."""
    from ..io.targets import written_suffix

    return (output is not None and written_suffix(output, output_format) == ".json" and bool(sources)
            and all(source != "-" and Path(source).suffix.lower() == ".npy" for source in sources))


# What a streamed run loads beyond `dmlcli --version` (the engine, the operator table, the backend).
STREAMING_CODE_BYTES = 16 << 20


def memory_bound(inputs: Sequence[NpyInput], shape, out_dtype: np.dtype, chunk_bytes: int) -> int:
    """An upper bound of the memory a streamed run takes on top of the interpreter, whatever the files' sizes.

    Each input's buffers and its spanning-read buffer; the backend's chunks in flight and its float64
    scratch; on the tiled path the output pages of one tile (they are dropped after each); the code.
    tests/test_memory_bounds.py checks it against the peak resident memory of real runs.
    """
    out_dtype = np.dtype(out_dtype)
    widest = max([x.dtype.itemsize for x in inputs] + [out_dtype.itemsize])
    elements = max(1, chunk_bytes // widest)
    total = STREAMING_CODE_BYTES
    tiled = not all(x.stored_in_c_order for x in inputs)
    for source in inputs:
        part = elements * source.dtype.itemsize
        total += BUFFERS_PER_INPUT * part
        if source.member is not None:
            # zipfile's copies of one read (compressed, inflated, joined) and zlib's window; or the whole array.
            from ..io.formats import MEMBER_READ_BYTES

            total += (_MemberReader.COPIES * min(part, MEMBER_READ_BYTES) + (1 << 20)
                      + held_bytes([source], shape, in_order=not tiled))
        elif tiled:
            total += max(_GatherReader.SPAN_FACTOR * part, 1 << 20)
    total += (BUFFERS_PER_INPUT + 1) * elements * max(out_dtype.itemsize, 8)
    if tiled and shape:
        tile = _box_shape(next(tile_boxes(tuple(shape), elements, tile_weight(inputs, out_dtype))))
        page = mmap.PAGESIZE
        rows = math.prod(tile[:-1])
        total += rows * (tile[-1] * out_dtype.itemsize // page + 2) * page
    return total


def reads_in_order(source: NpyInput, out_shape, in_order: bool) -> bool:
    """Whether row boxes (`in_order`) take the input from its first byte to its last, each once."""
    padded = (1,) * (len(out_shape) - len(source.shape)) + tuple(source.shape)
    return in_order and source.stored_in_c_order and padded == tuple(out_shape)


def held_bytes(inputs: Sequence[NpyInput], out_shape, *, in_order: bool) -> int:
    """Memory for the .npz arrays that cannot be read in order, so are inflated whole before the run."""
    return sum(x.member.data_bytes for x in inputs
               if x.member is not None and not reads_in_order(x, out_shape, in_order))


def open_input(source: str, *, label: str, dtype: DataType | None = None) -> NpyInput:
    """Read and check one input's .npy header (or .npz array's); `dtype` (from --dtype) must agree with it."""
    from ..io.npy import check_declared_dtype, read_npy_header, stored_as
    from ..io.sources import check_input_file, npz_source

    where = f"{label} {quoted(source)}"
    npz = npz_source(source)
    if npz is not None:
        from ..io.formats import inspect_npz

        check_input_file(Path(npz[0]), where=where)
        found = inspect_npz(npz[0], npz[1], where=where)  # header and zip directory; nothing inflated
        check_declared_dtype(found.dtype, dtype, where=where)
        return NpyInput(Path(npz[0]), label, tuple(int(s) for s in found.shape),
                        stored_as(np.dtype(found.dtype), dtype, where=where), found.fortran_order, found.header_bytes,
                        found)
    path = Path(source)
    check_input_file(path, where=where)
    if not path.is_file():
        raise InputError(f"{where}: a .npy input must be a regular file (it is memory-mapped), not a pipe")
    shape, fortran_order, stored_dtype, offset = read_npy_header(path, where=where)
    check_declared_dtype(stored_dtype, dtype, where=where)
    # A '|V1' file (numpy.save of ml_dtypes' int4/uint4) is read as the 4-bit type --dtype names.
    return NpyInput(path, label, tuple(int(s) for s in shape), stored_as(np.dtype(stored_dtype), dtype, where=where),
                    bool(fortran_order), offset)


def stream(call: Call, inputs: list[NpyInput], output: Path, engine, *, chunk_bytes: int,
           progress: ProgressFactory | None = None, tally=None, pipeline=None) -> None:
    """Stream a validated call from the .npy `inputs` into `output`, chunk by chunk.

    The output is written atomically (a temporary file renamed over it once complete), so `output`
    may name one of the inputs. `progress(total_bytes)` may give a context manager yielding an
    `advance(bytes)` callable. `tally` (engine.HookTally) counts the operator's hooks chunk by chunk.
    `pipeline` (the module engine/file_pipeline.py, which the engine passes: it builds on this module, so this one
    does not import it) runs the job instead where its `applies` says so.
    """
    from ..io.atomic import write_atomically

    job = _Job(call, inputs, chunk_bytes, tally, pipeline)
    factory = progress or _no_progress
    with factory(job.total_bytes) as advance:
        write_atomically(output, lambda handle: job.run(engine, handle, advance))


def stream_json(call: Call, inputs: list[NpyInput], output: str, engine, *, chunk_bytes: int,
                progress: ProgressFactory | None = None, tally=None) -> None:
    """Stream a validated call from the .npy `inputs` into JSON text, chunk by chunk: into the file `output`
    (atomically, as stream does) or, for a stdout target (-, -.json), onto stdout. Only one piece of text
    is in memory at a time, so the run takes constant memory whatever the tensor's size."""
    from ..io.targets import is_stdout

    job = _Job(call, inputs, chunk_bytes, tally)
    factory = progress or _no_progress
    with factory(job.total_bytes) as advance:
        if is_stdout(output):
            job.run_json(engine, sys.stdout.write, advance)
            sys.stdout.flush()
            return
        from ..io.atomic import write_atomically

        write_atomically(Path(output), lambda handle: job.run_json(
            engine, lambda text: handle.write(text.encode("utf-8")), advance))


@contextlib.contextmanager
def _no_progress(total_bytes: int):
    yield lambda done: None


class _Job:
    """One streamed call: the box layout, the readers, and the hooks' running tally."""

    def __init__(self, call: Call, inputs: list[NpyInput], chunk_bytes: int, tally=None, pipeline=None):
        self.call = call
        self.pipeline = pipeline
        self.inputs = inputs
        self.tally = tally
        self.shape = tuple(call.output.shape)
        self.out_dtype = np.dtype(call.output.data_type.numpy_dtype)
        widest = max([x.dtype.itemsize for x in inputs] + [self.out_dtype.itemsize])
        self.chunk_elements = max(1, chunk_bytes // widest)
        self.tiled = not all(x.stored_in_c_order for x in inputs)
        self.total_bytes = math.prod(self.shape) * (sum(x.dtype.itemsize for x in inputs) + self.out_dtype.itemsize)

    def boxes(self, in_order: bool = False) -> Iterator[Box]:
        if self.tiled and not in_order:
            return tile_boxes(self.shape, self.chunk_elements, tile_weight(self.inputs, self.out_dtype))
        return row_boxes(self.shape, self.chunk_elements)

    def run(self, engine, handle, advance: Callable[[int], None]) -> None:
        from ..io.npy import npy_header

        header = npy_header(self.shape, self.out_dtype)
        handle.write(header)
        if self.pipeline is not None and self.pipeline.applies(engine, self.inputs, self.shape, handle):
            self.pipeline.run(self, engine, handle, len(header), advance)
            return
        per_element = sum(x.dtype.itemsize for x in self.inputs) + self.out_dtype.itemsize
        # A device, FIFO or socket cannot be mapped: it is written in order, whatever the inputs' layout.
        in_order = not self.tiled or not _is_regular_file(handle)
        with contextlib.ExitStack() as stack:
            readers = [stack.enter_context(self._reader_type(x, in_order)(x, self.shape, self.chunk_elements))
                       for x in self.inputs]
            writer = (_SequentialWriter(handle, self.out_dtype) if in_order
                      else _MappedWriter(handle, len(header), self.shape, self.out_dtype))
            stack.enter_context(writer)
            pending: deque[Box] = deque()
            chunks = self._chunks(readers, pending, in_order)
            results = engine.execute_chunks(self.call.operator, chunks, self.out_dtype, self.call.parameters)
            for result in results:
                box = pending.popleft()
                writer.write(box, result)
                advance(_box_size(box) * per_element)
            if pending:
                raise RuntimeError(f"the backend returned {len(pending)} fewer chunks than it was given")

    def _reader_type(self, source: NpyInput, in_order: bool) -> type[_Reader]:
        if source.member is not None:
            return _MemberReader if reads_in_order(source, self.shape, in_order) else _HeldReader
        return _GatherReader if self.tiled else _ContiguousReader

    def run_json(self, engine, write: Callable[[str], None], advance: Callable[[int], None]) -> None:
        """The output as JSON text through `write`: the chunks in C order (row boxes), each formatted as it
        comes back from the backend."""
        from ..io.json_tensor import JsonTextWriter

        text = JsonTextWriter(write, self.shape, self.out_dtype)
        per_element = sum(x.dtype.itemsize for x in self.inputs) + self.out_dtype.itemsize
        with contextlib.ExitStack() as stack:
            readers = [stack.enter_context(self._reader_type(x, True)(x, self.shape, self.chunk_elements))
                       for x in self.inputs]
            pending: deque[Box] = deque()
            chunks = self._chunks(readers, pending, in_order=True)
            for result in engine.execute_chunks(self.call.operator, chunks, self.out_dtype, self.call.parameters):
                box = pending.popleft()
                text.add(np.asarray(result))
                advance(_box_size(box) * per_element)
            if pending:
                raise RuntimeError(f"the backend returned {len(pending)} fewer chunks than it was given")
        text.close()

    def _chunks(self, readers, pending: deque, in_order: bool) -> Iterator[list[np.ndarray]]:
        for number, box in enumerate(self.boxes(in_order)):
            slot = number % BUFFERS_PER_INPUT
            chunk = [np.broadcast_to(x, _box_shape(box)) for x in self.call.complete(
                [reader.read(box, slot) for reader in readers])]
            if self.tally is not None:  # each chunk is already the box's shape: every element counts once
                self.tally.add(chunk, None)
            pending.append(box)
            yield chunk


# Tiles for Fortran-order inputs alone are taller than wide: each of an input's runs (down the first axis)
# is one pread, and each of the output's rows (along the last) one or two mapped pages; a pread costs
# more than a page, so the tile is cut across the last axis first, until its rows are this many bytes
# shorter than it is tall (measured: (40960, 4096) uint8 1.7 s at 1, 0.85 s at 16; float32 as good at 4).
FORTRAN_TILE_WEIGHT = 16


def tile_weight(inputs: Sequence[NpyInput], out_dtype: np.dtype) -> int:
    """The last axis's weight in tile_boxes: 1 where some input is read along rows (C order)."""
    row_major = [x for x in inputs if not x.fortran_order and sum(1 for size in x.shape if size > 1) > 1]
    return 1 if row_major else max(1, FORTRAN_TILE_WEIGHT // np.dtype(out_dtype).itemsize)


def _is_regular_file(handle) -> bool:
    return stat.S_ISREG(os.fstat(handle.fileno()).st_mode)


# ---------------------------------------------------------------- boxes


def row_boxes(shape: tuple[int, ...], chunk_elements: int) -> Iterator[Box]:
    """Runs of whole rows in C order, each at most `chunk_elements` (at least one element).

    Axis k is the outermost axis whose inner block fits a chunk; a box fixes the axes before k,
    takes a range of axis k and all of the axes after it, so it is contiguous in C order.
    """
    inner, axis = 1, len(shape) - 1
    while axis > 0 and inner * shape[axis] <= chunk_elements:
        inner *= shape[axis]
        axis -= 1
    rows = max(1, min(shape[axis], chunk_elements // inner))
    rest = tuple(slice(0, size) for size in shape[axis + 1:])
    for prefix in itertools.product(*(range(size) for size in shape[:axis])):
        fixed = tuple(slice(i, i + 1) for i in prefix)
        for start in range(0, shape[axis], rows):
            yield fixed + (slice(start, min(start + rows, shape[axis])),) + rest


def tile_boxes(shape: tuple[int, ...], chunk_elements: int, last_axis_weight: int = 1) -> Iterator[Box]:
    """Tiles of at most `chunk_elements`, in C order of their corners.

    A tile's contiguous runs are along the last axis in C order and along the first in Fortran
    order, so the middle axes are halved first, then the longer of the first and last (the last
    counted `last_axis_weight` times its length): both runs stay long, and a transposing read
    touches few pages per tile.
    """
    extent = list(shape)
    middle = list(range(1, len(shape) - 1))
    ends = sorted({0, len(shape) - 1})
    last = len(shape) - 1
    while math.prod(extent) > chunk_elements:
        candidates = [i for i in middle if extent[i] > 1] or [i for i in ends if extent[i] > 1]
        longest = max(candidates, key=lambda i: extent[i] * (last_axis_weight if i == last else 1))
        extent[longest] = (extent[longest] + 1) // 2
    corners = itertools.product(*(range(0, size, step) for size, step in zip(shape, extent)))
    for corner in corners:
        yield tuple(slice(c, min(c + e, size)) for c, e, size in zip(corner, extent, shape))


def _box_shape(box: Box) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in box)


def _box_size(box: Box) -> int:
    return math.prod(_box_shape(box))


# ---------------------------------------------------------------- reading


class _Reader:
    """Reads one input's part of each box into reused native-order buffers."""

    def __init__(self, source: NpyInput, out_shape: tuple[int, ...], chunk_elements: int):
        self.source = source
        self.out_shape = out_shape
        padding = len(out_shape) - len(source.shape)
        self.shape = (1,) * padding + source.shape  # the input's shape with the output's rank
        self.native = source.dtype.newbyteorder("=")
        self.swapped = not source.dtype.isnative
        self.buffers = [np.empty(chunk_elements * source.dtype.itemsize, np.uint8) for _ in range(BUFFERS_PER_INPUT)]

    def input_box(self, box: Box) -> Box:
        """The input's part of an output box: broadcast axes (size 1) contribute their one element."""
        return tuple(slice(0, 1) if size == 1 else s for s, size in zip(box, self.shape))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class _ContiguousReader(_Reader):
    """C-order inputs and row boxes: each box's part is one byte range of the file, read with preadv."""

    def __init__(self, source: NpyInput, out_shape, chunk_elements):
        super().__init__(source, out_shape, chunk_elements)
        try:
            self.descriptor = os.open(source.path, os.O_RDONLY)
        except OSError as error:
            raise InputError(f"{source.label} {quoted(source.path)}: cannot be read ({error.strerror})") from None
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self.descriptor, 0, 0, os.POSIX_FADV_SEQUENTIAL)

    def read(self, box: Box, slot: int) -> np.ndarray:
        part = self.input_box(box)
        part_shape = _box_shape(part)
        start = int(np.ravel_multi_index(tuple(s.start for s in part), self.shape))
        itemsize = self.source.dtype.itemsize
        count = math.prod(part_shape) * itemsize
        raw = self.buffers[slot][:count]
        self._read_exactly(raw, self.source.offset + start * itemsize)
        values = raw.view(self.source.dtype)
        if self.swapped:
            values = values.byteswap(inplace=True).view(self.native)
        return np.broadcast_to(values.reshape(part_shape), _box_shape(box))

    def _read_exactly(self, buffer: np.ndarray, position: int) -> None:
        view = memoryview(buffer)
        done = 0
        while done < len(view):
            got = os.preadv(self.descriptor, [view[done:]], position + done)
            if got == 0:
                raise InputError(f"{self.source.label} {quoted(self.source.path)}: the file ended early "
                                 "(was it truncated while dmlcli was reading it?)")
            done += got

    def close(self) -> None:
        os.close(self.descriptor)


class _GatherReader(_Reader):
    """Any layout and any box, read with pread: never a memory map, because a mapped file that another
    program truncates kills the reader with SIGBUS, where a short read says "the file ended early".

    The box's part is read either as one byte range spanning it, or run by run (a run is the longest
    stretch of it that is contiguous in the file), whichever costs less, into a reused buffer.
    """

    # A pread costs about what copying this many bytes does: below it per run, a spanning read is cheaper.
    RUN_COST_BYTES = 16 << 10
    # A spanning read's buffer stays within this many times the part's size (or 1 MiB), so memory stays constant.
    SPAN_FACTOR = 4

    def __init__(self, source: NpyInput, out_shape, chunk_elements):
        super().__init__(source, out_shape, chunk_elements)
        self.reader = _ContiguousReader(source, out_shape, 0)
        itemsize = source.dtype.itemsize
        # Element strides of the stored array, in the output's rank (padded axes have size 1).
        order = "F" if source.fortran_order else "C"
        probe = np.lib.stride_tricks.as_strided(np.empty(0, np.uint8), shape=source.shape,
                                                strides=_packed_byte_strides(source.shape, itemsize, order))
        self.strides = (0,) * (len(self.shape) - len(source.shape)) + probe.strides
        self.order = order
        self.scratch = np.empty(0, np.uint8)

    def read(self, box: Box, slot: int) -> np.ndarray:
        # Tiles are handed over in Fortran order: the order of the inputs that made tiling necessary,
        # so that their copy is a plain one and only the output needs transposing (elementwise
        # kernels take any layout).
        part = self.input_box(box)
        part_shape = _box_shape(part)
        itemsize = self.source.dtype.itemsize
        first = sum(s.start * stride for s, stride in zip(part, self.strides))
        span = sum((size - 1) * stride for size, stride in zip(part_shape, self.strides)) + itemsize
        run_elements, run_starts = self._runs(part, part_shape)
        count = math.prod(part_shape)
        if len(run_starts) * self.RUN_COST_BYTES < span or span > max(self.SPAN_FACTOR * count * itemsize, 1 << 20):
            packed = self._buffer(count * itemsize)
            run_bytes = run_elements * itemsize
            for index, start in enumerate(run_starts):
                self.reader._read_exactly(packed[index * run_bytes:(index + 1) * run_bytes],
                                          self.source.offset + int(start))
            stored = packed.view(self.source.dtype).reshape(part_shape, order=self.order)
        else:
            spanned = self._buffer(span)
            self.reader._read_exactly(spanned, self.source.offset + first)
            stored = np.lib.stride_tricks.as_strided(spanned.view(self.source.dtype), shape=part_shape,
                                                     strides=self.strides, writeable=False)
        flat = self.buffers[slot][:count * self.native.itemsize].view(self.native)
        destination = flat.reshape(part_shape, order="F")
        blocked_copy(destination, stored)  # converts the byte order too
        return np.broadcast_to(destination, _box_shape(box))

    def _runs(self, part: Box, part_shape) -> tuple[int, np.ndarray]:
        """(elements per run, byte offset of each run's start, in storage order) of a box's part.

        From the fastest-varying axis on, a run takes every axis the part covers whole, and then the
        part's range of the next one; the remaining axes number the runs.
        """
        axes = list(range(len(part_shape)))
        fastest_first = axes if self.order == "F" else axes[::-1]
        run, merging, outer = 1, True, []
        for axis in fastest_first:
            if self.shape[axis] == 1:  # size 1 (broadcast or padded): no effect on the layout
                continue
            if merging:
                run *= part_shape[axis]
                merging = part_shape[axis] == self.shape[axis]
            else:
                outer.append(axis)
        starts = np.zeros((), np.int64)
        for axis in reversed(outer):  # slowest first, so that the runs come in storage order
            offsets = np.arange(part[axis].start, part[axis].stop, dtype=np.int64) * self.strides[axis]
            starts = np.add.outer(starts, offsets)
        base = sum(part[axis].start * self.strides[axis] for axis in axes if axis not in outer)
        return run, starts.reshape(-1) + base

    def _buffer(self, size: int) -> np.ndarray:
        if self.scratch.size < size:
            self.scratch = np.empty(size, np.uint8)
        return self.scratch[:size]

    def close(self) -> None:
        self.reader.close()


class _MemberReader(_Reader):
    """A .npz array read from its start to its end, chunk by chunk, inflating as it goes (zip members
    cannot be read at an offset without inflating all that comes before it). Row boxes over an input of
    the output's shape ask for consecutive ranges; anything else is a bug, said so."""

    # zipfile holds about this many copies of one read while it inflates and joins it.
    COPIES = 4

    def __init__(self, source: NpyInput, out_shape, chunk_elements):
        from ..io.formats import open_npz_member

        super().__init__(source, out_shape, chunk_elements)
        self.opened = open_npz_member(source.member)
        self.handle = self.opened.__enter__()
        self.next_element = 0

    def read(self, box: Box, slot: int) -> np.ndarray:
        from ..io.formats import finish_member, read_member_into

        start = int(np.ravel_multi_index(tuple(s.start for s in box), self.shape))
        if start != self.next_element:
            raise RuntimeError(f"{self.source.label}: a .npz array was asked for element {start} after "
                               f"{self.next_element}; it can only be read in order")
        count = _box_size(box)
        raw = self.buffers[slot][:count * self.source.dtype.itemsize]
        read_member_into(self.handle, memoryview(raw), self.source.member)
        self.next_element += count
        if self.next_element == math.prod(self.shape):
            finish_member(self.handle, self.source.member)  # its CRC-32 checked before the last chunk is used
        values = raw.view(self.source.dtype)
        if self.swapped:
            values = values.byteswap(inplace=True).view(self.native)
        return values.reshape(_box_shape(box))

    def close(self) -> None:
        self.opened.__exit__(None, None, None)


class _HeldReader(_Reader):
    """A .npz array that the boxes do not take in order (broadcast, Fortran order, tiles): inflated whole
    into memory first (engine.run_files checked the room), then cut into boxes like a file."""

    def __init__(self, source: NpyInput, out_shape, chunk_elements):
        from ..io.formats import finish_member, open_npz_member, read_member_into

        super().__init__(source, out_shape, chunk_elements)
        member = source.member
        flat = np.empty(member.count, source.dtype)
        with open_npz_member(member) as handle:
            read_member_into(handle, memoryview(flat.view(np.uint8).reshape(-1)), member)
            finish_member(handle, member)
        array = flat.reshape(source.shape, order="F" if source.fortran_order else "C")
        self.array = array[(np.newaxis,) * (len(self.shape) - len(source.shape))]  # the output's rank

    def read(self, box: Box, slot: int) -> np.ndarray:
        part = self.input_box(box)
        part_shape = _box_shape(part)
        flat = self.buffers[slot][:math.prod(part_shape) * self.native.itemsize].view(self.native)
        destination = flat.reshape(part_shape)
        blocked_copy(destination, self.array[part])  # converts the byte order too
        return np.broadcast_to(destination, _box_shape(box))

    def close(self) -> None:
        del self.array


def _packed_byte_strides(shape, itemsize: int, order: str) -> tuple[int, ...]:
    step = itemsize
    axes = range(len(shape)) if order == "F" else reversed(range(len(shape)))
    found = {}
    for axis in axes:
        found[axis] = step
        step *= max(int(shape[axis]), 1)
    return tuple(found[axis] for axis in range(len(shape)))


def blocked_copy(destination: np.ndarray, source: np.ndarray) -> None:
    """np.copyto, in blocks along the first and last axes when the two layouts differ.

    NumPy copies a transposed array element by element across the whole of it, touching a new
    cache line (and page) at every step; blocks of about 64 KiB stay in the cache.
    """
    same_layout = ((destination.flags.c_contiguous and source.flags.c_contiguous)
                   or (destination.flags.f_contiguous and source.flags.f_contiguous))
    if destination.ndim < 2 or same_layout:
        np.copyto(destination, source, casting="equiv")
        return
    side = max(16, math.isqrt(65536 // destination.dtype.itemsize))
    first, last = destination.shape[0], destination.shape[-1]
    for i in range(0, first, side):
        for j in range(0, last, side):
            block = (slice(i, i + side), Ellipsis, slice(j, j + side))
            np.copyto(destination[block], source[block], casting="equiv")


def _drop_pages(mapping: mmap.mmap) -> None:
    # The data stay in the page cache; only this process's mapping of them goes.
    if hasattr(mapping, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        mapping.madvise(mmap.MADV_DONTNEED)


# ---------------------------------------------------------------- writing


def _result_array(result, box: Box, out_dtype: np.dtype) -> np.ndarray:
    """A backend's output chunk as a C-contiguous array of the box's shape, checked."""
    array = np.asarray(result)
    if array.dtype != out_dtype:
        raise RuntimeError(f"the backend returned a chunk of {array.dtype}, expected {out_dtype}")
    return np.ascontiguousarray(np.broadcast_to(array, _box_shape(box)))


class _SequentialWriter:
    """Row boxes come in C order, so the output is written straight through.

    Every WRITEBACK_BYTES, the kernel is asked to start writing the part already written to disk
    (POSIX_FADV_DONTNEED starts writeback of dirty pages without waiting for it), so that the
    final fsync has little left to do and the disk works while the CPU computes.
    """

    WRITEBACK_BYTES = 32 << 20

    def __init__(self, handle, out_dtype: np.dtype):
        self.handle = handle
        self.out_dtype = out_dtype
        self.written = self.advised = handle.tell()
        self.regular = _is_regular_file(handle)  # a device or pipe has no page cache to advise about

    def write(self, box: Box, result) -> None:
        data = _result_array(result, box, self.out_dtype).reshape(-1).view(np.uint8)
        self.handle.write(data)
        self.written += data.size
        if self.written - self.advised >= self.WRITEBACK_BYTES and self.regular and hasattr(os, "posix_fadvise"):
            self.handle.flush()
            os.posix_fadvise(self.handle.fileno(), self.advised, self.written - self.advised,
                             os.POSIX_FADV_DONTNEED)
            self.advised = self.written

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        pass


def reserve(descriptor: int, offset: int, length: int) -> None:
    """Allocate the disk blocks of a file's byte range, or raise OSError (ENOSPC when the disk is full).

    posix_fallocate where the file system supports it, else zeros written over the range (they are
    overwritten by the data later; what matters is that the blocks are taken now).
    """
    if length <= 0:
        return
    if hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(descriptor, offset, length)
            return
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
    zeros = bytes(min(length, 1 << 20))
    done = 0
    while done < length:
        done += os.pwrite(descriptor, zeros[:length - done], offset + done)


class _MappedWriter:
    """Tiles land anywhere in the output, so the output is memory-mapped (the file is sized first).

    Also file_pipeline's output: its chunks are copied into the map by threads at once, where pwrite takes the
    file's lock for each (tmpfs and most file systems write one file on one thread at a time).
    """

    def __init__(self, handle, header_size: int, shape, out_dtype: np.dtype, *, reserve_now: bool = True):
        handle.flush()
        self.out_dtype = out_dtype
        self.descriptor = handle.fileno()
        self.header_size = header_size
        size = header_size + math.prod(shape) * out_dtype.itemsize
        os.ftruncate(handle.fileno(), size)
        # A sparse file takes its blocks only when the map writes them: should the disk fill then, the
        # process gets SIGBUS. Reserved now, a full disk is an OSError that the atomic writer reports.
        # (reserve_now=False: the caller reserves each byte range before it writes there, with reserve().)
        if reserve_now:
            reserve(handle.fileno(), header_size, size - header_size)
        # mkstemp opened the temporary file read-write, as a shared writable map needs.
        self.map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_WRITE)
        self.array = np.ndarray(shape, out_dtype, buffer=self.map, offset=header_size)

    def write(self, box: Box, result) -> None:
        array = np.asarray(result)
        if array.dtype != self.out_dtype:
            raise RuntimeError(f"the backend returned a chunk of {array.dtype}, expected {self.out_dtype}")
        blocked_copy(self.array[box], np.broadcast_to(array, _box_shape(box)))
        _drop_pages(self.map)  # dirty pages go to the page cache, to be written back

    def data_bytes(self) -> np.ndarray:
        """The output's data, in C order, as bytes: a view of the map."""
        return self.array.reshape(-1).view(np.uint8)

    def release(self, first: int, count: int) -> None:
        """Bytes first..first+count of the data written: their pages leave this process's resident memory (they
        stay in the page cache) and their writeback to the disk starts, as _SequentialWriter's does (on tmpfs,
        whose pages are the file, the advice does nothing)."""
        page = mmap.PAGESIZE
        start = self.header_size + first
        aligned = start // page * page
        if hasattr(self.map, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            self.map.madvise(mmap.MADV_DONTNEED, aligned, start + count - aligned)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self.descriptor, start, count, os.POSIX_FADV_DONTNEED)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        del self.array
        if exc_info[0] is None:
            self.map.flush()
        try:
            self.map.close()
        except BufferError:
            # A view of the map is still held, by the traceback of an error raised while copying into it: the
            # mapping goes with that view (the temporary file is removed all the same).
            if exc_info[0] is None:
                raise
