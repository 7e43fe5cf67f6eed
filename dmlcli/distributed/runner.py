"""A run from input arguments to an output on Dask: open, build, compute on the scheduler, write.

Inputs: Zarr stores (their own chunks; each chunk read on the worker that needs it), .npy files
(memory-mapped) and JSON tensors (read whole). Outputs: a Zarr store (written chunk by chunk by
the workers, atomically: io/zarr_store.py), or the result gathered into memory (.npy, .json, a table).
Validation is the engine's, before anything here computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..data_types import DataType
from ..errors import quoted
from ..io import zarr_store
from ..calls.validation import Call
from . import graph
from .execution import ProgressFactory, scheduler
from .settings import DaskOptions, require_dask


@dataclass(frozen=True, eq=False)
class Input:
    """One input as a Dask array, with its store's chunk shape and Zarr format where it is a Zarr array."""

    array: object  # dask.array.Array
    chunks: tuple[int, ...] | None = None
    zarr_format: int | None = None


def is_store(target: str | None) -> bool:
    return target is not None and target != "-" and zarr_store.is_zarr_source(target)


def open_inputs(sources: Sequence[str], *, dtype: DataType | None, chunks=None) -> list[Input]:
    """Each source as a lazy Dask array, from its metadata (a Zarr store) or its mapped data (.npy)."""
    da = require_dask()
    inputs = []
    for position, source in enumerate(sources, start=1):
        label = f"input {position}"
        if zarr_store.is_zarr_source(source):
            array = zarr_store.open_input(source, label=label, dtype=dtype)
            # Read by the store's own chunks (by shard where sharded): one task reads one object.
            stored = tuple(getattr(array, "shards", None) or array.chunks)
            reader = zarr_store.ChunkReader(array, f"{label} {quoted(source)}",
                                            source if zarr_store.is_url(source) else None)
            # name=False: a random key instead of a hash of the reader (hashing a .npy input would read it all).
            lazy = da.from_array(reader, chunks=stored, asarray=False, fancy=False,
                                 meta=np.empty((0,) * reader.ndim, reader.dtype), name=False)
            inputs.append(Input(lazy, tuple(array.chunks), zarr_store.zarr_format(array)))
        else:
            from ..io.sources import read_tensor

            data = read_tensor(source, label=label, dtype=dtype)
            inputs.append(Input(da.from_array(data, chunks=_input_chunks(chunks, data.ndim), name=False)))
    return inputs


def _input_chunks(chunks, ndim: int):
    if chunks is None or chunks == "auto":
        return "auto"
    return tuple(chunks) * ndim if len(chunks) == 1 else ("auto" if len(chunks) != ndim else tuple(chunks))


def run(call: Call, inputs: Sequence[Input], output: str | None, *, options: DaskOptions, backend: str,
        progress: ProgressFactory | None = None):
    """Compute a validated call: into the Zarr store `output`, or into memory (returned) for any other output.

    Returns (the result array or None, the hooks' counts).
    """
    da = require_dask()
    lazy = graph.build(call, [x.array for x in inputs], backend)
    out = call.output
    out_dtype = np.dtype(out.data_type.numpy_dtype)
    total_bytes = int(np.prod(out.shape, dtype=np.int64)) * (
        out_dtype.itemsize + sum(np.dtype(x.array.dtype).itemsize for x in inputs))
    with scheduler(options) as where:
        if not is_store(output):
            result, *counts = where.compute([lazy.output.map_blocks(_host_block, dtype=out_dtype,
                                                                    meta=np.empty((0,) * len(out.shape), out_dtype)),
                                             *lazy.hook_counts], progress=progress, total_bytes=total_bytes)
            return np.asarray(result), [int(c) for c in counts]
        chunks = graph.output_chunks(tuple(out.shape), options.chunks,
                                     [(x.chunks, tuple(x.array.shape)) for x in inputs if x.chunks is not None],
                                     lazy.output.chunks)
        formats = [x.zarr_format for x in inputs if x.zarr_format is not None]
        host = lazy.output.map_blocks(_host_block, dtype=out_dtype, meta=np.empty((0,) * len(out.shape), out_dtype))
        with zarr_store.output_store(output, shape=out.shape, chunks=chunks, dtype=out_dtype,
                                     zarr_format=formats[0] if formats else 3) as store:
            # Regular chunks that match the store's: each task writes whole Zarr chunks, so no locks are needed.
            stored = da.store(host.rechunk(chunks), store.array, lock=False, compute=False)
            _, *counts = where.compute([stored, *lazy.hook_counts], progress=progress, total_bytes=total_bytes)
        return None, [int(c) for c in counts]


def _host_block(block):
    from .blocks import to_host

    return to_host(block)
