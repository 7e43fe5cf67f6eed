"""What a Dask worker runs: one block of a validated call, through a dmlcli backend.

These functions travel to the workers inside Dask's task graph, with the validated `Call` (operator
entry and typed parameters): nothing is validated again per block. Blocks arrive as Dask's blockwise
aligns them, NumPy's broadcasting rules included (a size-1 dimension's one block meets every block of
the other inputs), so each block is broadcast to its own output block here, as the backends do for
whole tensors.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import InputError
from ..calls.validation import Call

# One backend per (name, float rules) per worker process: the GPU backend compiles each kernel once
# and keeps its pipeline buffers, so it must outlive a block.
_BACKENDS: dict[tuple[str, str], object] = {}


def backend_for(name: str, float_rules: str):
    key = (name, float_rules)
    backend = _BACKENDS.get(key)
    if backend is None:
        from ..backends import get_backend
        from ..backends.float_rules import with_float_rules

        backend = _BACKENDS[key] = with_float_rules(get_backend(name), float_rules)
    return backend


def is_device_array(block) -> bool:
    """A CuPy block (checked by type name, so that NumPy-only workers never import CuPy)."""
    return type(block).__module__.split(".", 1)[0] == "cupy"


def run_block(*blocks, call: Call, backend: str, out_dtype: np.dtype):
    """The output block for one set of input blocks: NumPy in, NumPy out; CuPy in, CuPy out (on that GPU)."""
    arrays = call.complete(list(blocks))
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    if any(is_device_array(a) for a in arrays):
        return _run_on_device(call, arrays, shape, out_dtype)
    engine = backend_for(backend, call.float_rules)
    return engine.execute(call.operator, arrays, shape, out_dtype, call.parameters)


def _run_on_device(call: Call, arrays, shape, out_dtype):
    if call.float_rules != "ieee":
        raise InputError("float_rules='d3d' runs on NumPy blocks (with backend='gpu' they still run on the GPU); "
                         "CuPy blocks get the IEEE-754 result only")
    gpu = backend_for("gpu", "ieee")
    return gpu.execute_device(call.operator, arrays, shape, out_dtype, call.parameters)


def count_block(*blocks, call: Call, hook_index: int, ndim: int) -> np.ndarray:
    """One hook's count over one output block, as a (1, ..., 1) array: Dask sums the blocks' counts."""
    arrays = call.complete(list(blocks))
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    if any(is_device_array(a) for a in arrays):
        arrays = [a.get() if is_device_array(a) else a for a in arrays]
    by_name: Mapping[str, np.ndarray] = dict(zip(call.operator.inputs, arrays))
    count = call.operator.hooks[hook_index].count(by_name, call.data_types, shape)
    return np.full((1,) * ndim, count, dtype=np.int64)


def to_host(block):
    """A block as a NumPy array (a Zarr store or a .npy file takes host memory)."""
    return block.get() if is_device_array(block) else block


def run_shaped_block(block, *, call: Call, backend: str):
    """A shaped operator on one block that holds whole the axes its kernel works along: the call re-planned for
    the block's Sizes (its parameters as validated), NumPy in and out, or CuPy in and out on the GPU."""
    from ..data_types import from_numpy
    from ..calls.validation import build_call

    operator = call.operator
    piece = build_call(operator, [(from_numpy(np.dtype(block.dtype)), tuple(block.shape))],
                       output_type=call.output.data_type, parse_parameters=lambda types: dict(call.parameters))
    if is_device_array(block):
        if call.float_rules != "ieee":
            raise InputError("float_rules='d3d' runs on NumPy blocks; CuPy blocks get the IEEE-754 result only")
        return backend_for("gpu", "ieee").execute_shaped_device(operator, [block], piece.outputs, piece.parameters)[0]
    engine = backend_for(backend, call.float_rules)
    return engine.execute_shaped(operator, [block], piece.outputs, piece.parameters)[0]
