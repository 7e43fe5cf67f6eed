"""The lazy result: inputs as Dask arrays, one map_blocks over dmlcli's kernels, the output's chunking.

`build` takes a call that engine.plan has validated from the arrays' metadata and returns Dask
arrays: the output, and one count per hook of the operator (the shift-count check), summed over
blocks. Computed together, both read each input block once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Sequence

import numpy as np

from ..errors import InputError
from ..calls.validation import Call
from . import blocks
from .settings import require_dask


@dataclass(frozen=True, eq=False)
class LazyRun:
    """A validated call as Dask arrays: `output`, and `hook_counts` (one 0-D array per hook of the operator)."""

    call: Call
    output: object  # dask.array.Array
    hook_counts: tuple = ()

    def warnings(self, counts: Sequence[int]) -> tuple[str, ...]:
        """The hooks' warnings for the computed `counts`, worded as a whole or streamed run words them."""
        elements = math.prod(self.call.output.shape)
        operator = self.call.operator
        return tuple(hook.message(operator.name, int(count), elements, self.call.data_types)
                     for hook, count in zip(operator.hooks, counts) if count)


def as_dask_array(value, position: int):
    """A Dask array of a type dmlcli accepts; anything dask.array.asarray takes (NumPy, CuPy, Zarr, lists)."""
    da = require_dask()
    array = value if isinstance(value, da.Array) else da.asarray(value)
    if any(math.isnan(size) for size in array.shape):
        raise InputError(f"input {position}: a Dask array of unknown shape {array.shape}; call "
                         ".compute_chunk_sizes() first (validation needs every size)")
    return array


def metadata(arrays) -> list[tuple[np.dtype, tuple[int, ...]]]:
    return [(np.dtype(a.dtype), tuple(int(s) for s in a.shape)) for a in arrays]


def build(call: Call, arrays: Sequence, backend: str = "cpu") -> LazyRun:
    """The output as a lazy Dask array: each block through the backend's kernel (see blocks.run_block)."""
    da = require_dask()
    if not call.operator.is_elementwise:
        return LazyRun(call, _build_shaped(da, call, arrays, backend))
    out = call.output
    ndim = len(out.shape)
    out_dtype = np.dtype(out.data_type.numpy_dtype)
    meta = _meta_like(arrays, ndim, out_dtype)
    # Indices aligned from the right, as NumPy broadcasts: blockwise unifies the inputs' chunkings (mixed
    # chunkings meet on common block boundaries) and hands a size-1 dimension's one block to every block.
    out_index = tuple(range(ndim))
    operands = [part for a in arrays for part in (a, out_index[ndim - a.ndim:])]
    output = da.blockwise(partial(blocks.run_block, call=call, backend=str(backend), out_dtype=out_dtype),
                          out_index, *operands, dtype=out_dtype, meta=meta, token=f"dmlcli-{call.operator.cli_name}")
    if tuple(output.shape) != tuple(out.shape):  # blockwise and validation disagree: a bug, not bad input
        raise RuntimeError(f"Dask's result shape {output.shape} differs from the validated {out.shape}")
    counts = []
    for index, _hook in enumerate(call.operator.hooks):
        per_block = da.blockwise(partial(blocks.count_block, call=call, hook_index=index, ndim=ndim), out_index,
                                 *operands, dtype=np.int64, meta=np.empty((0,) * ndim, np.int64),
                                 adjust_chunks={axis: (lambda size: 1) for axis in out_index},
                                 token=f"dmlcli-{call.operator.cli_name}-hook{index}")
        counts.append(per_block.sum())
    return LazyRun(call, output, tuple(counts))


def _meta_like(arrays, ndim: int, dtype: np.dtype):
    """An empty block of the output's type: CuPy where any input's blocks are CuPy, else NumPy."""
    for array in arrays:
        meta = getattr(array, "_meta", None)
        if meta is not None and blocks.is_device_array(meta):
            import cupy

            return cupy.empty((0,) * ndim, dtype=dtype)
    return np.empty((0,) * ndim, dtype=dtype)


def output_chunks(shape: tuple[int, ...], requested, preferred: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
                  current: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """One chunk shape for the output store (Zarr chunks are regular).

    `requested` (--chunks) wins; else each dimension takes the first Zarr input's chunk along it where that
    input spans it (so the output keeps the inputs' chunking), else the Dask result's first block.
    """
    if requested == "auto":
        da = require_dask()
        current = da.core.normalize_chunks("auto", shape, dtype=np.uint8)
    elif requested is not None:
        sizes = tuple(requested) * len(shape) if len(requested) == 1 else tuple(requested)
        if len(sizes) != len(shape):
            raise InputError(f"--chunks {','.join(map(str, requested))}: {len(sizes)} sizes for an output of "
                             f"{len(shape)} dimensions {list(shape)}")
        return tuple(min(size, dim) for size, dim in zip(sizes, shape))
    chunks = []
    for axis, dim in enumerate(shape):
        size = current[axis][0] if current[axis] else dim
        for input_chunks, input_shape in preferred:
            offset = len(shape) - len(input_shape)
            if input_chunks is not None and axis >= offset and input_shape[axis - offset] == dim:
                size = input_chunks[axis - offset]
                break
        chunks.append(max(1, min(size, dim)))
    return tuple(chunks)


def shaped_on_dask() -> list[str]:
    """The shaped operators that run on Dask (for the message that refuses the others)."""
    from ..operators import all_operators

    return [op.cli_name for op in all_operators() if not op.is_elementwise and op.dask_layout is not None]


def _build_shaped(da, call: Call, arrays: Sequence, backend: str):
    """A shaped operator as a Dask array, by its entry's dask_layout: JOIN is Dask's concatenate (exact copies);
    "whole_axes" rechunks the input so that each block holds the axes the kernel works along whole, then runs
    the kernel block by block (the same kernel on the same elements as in memory, so the same result)."""
    op = call.operator
    if op.dask_layout is None or len(call.outputs) != 1:
        raise InputError(f"{op.name} does not run on Dask; the shaped operators that do are "
                         f"{', '.join(shaped_on_dask())} (and every element-wise operator)")
    out = call.output
    out_dtype = np.dtype(out.data_type.numpy_dtype)
    if op.dask_layout == "concatenate":
        return da.concatenate(list(arrays), axis=call.parameters["Axis"]).astype(out_dtype)
    if op.dask_layout == "index":
        return arrays[0][op.dask_index(call)].astype(out_dtype)
    (array,) = arrays
    axes = tuple(op.dask_axes(call))
    whole = array.rechunk({axis: -1 for axis in axes})
    chunks = tuple((out.shape[axis],) if axis in axes else whole.chunks[axis] for axis in range(len(out.shape)))
    result = whole.map_blocks(partial(blocks.run_shaped_block, call=call, backend=str(backend)), dtype=out_dtype,
                              chunks=chunks, meta=_meta_like([array], len(out.shape), out_dtype),
                              token=f"dmlcli-{op.cli_name}")
    if tuple(result.shape) != tuple(out.shape):
        raise RuntimeError(f"Dask's result shape {result.shape} differs from the validated {out.shape}")
    return result
