"""Which of the shaped operators' own GPU kernels a call gets: the host's choice, tested without CuPy or a GPU (the
kernels themselves: tests/test_gpu_shaped.py, test_gpu_pooling.py and test_gpu_movement.py on a GPU).

The choices read an array's shape, strides, type and device address only, so NumPy arrays stand in for CuPy's here,
their addresses and allocations given as CuPy gives them (data.ptr, data.mem).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dmlcli.operators.movement import gpu as movement_gpu
from dmlcli.operators.pooling import gpu as pooling_gpu
from dmlcli.operators.reduction import gpu as reduction_gpu


def device_like(view: np.ndarray, base: np.ndarray, base_address: int = 2**20):
    """`view` (of `base`) as the choices see a CuPy array: its shape, strides and type, its address and its
    allocation's (base at `base_address`, which CuPy's pool aligns to 256 bytes)."""
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    memory = SimpleNamespace(ptr=base_address, size=base.nbytes)
    return SimpleNamespace(shape=view.shape, strides=view.strides, dtype=view.dtype, ndim=view.ndim, size=view.size,
                           data=SimpleNamespace(ptr=base_address + offset, mem=memory))


def test_cumulative_sum_kernel_choice():
    """16-byte vectors only for 4-byte types, rows of a multiple of 4 and a 16-byte boundary; one warp a row from
    CUMSUM_MANY_ROWS rows on, one block a row below; the shared-memory tiles otherwise."""
    many, few = reduction_gpu.CUMSUM_MANY_ROWS, reduction_gpu.CUMSUM_MANY_ROWS - 1
    choose = reduction_gpu.cumsum_kernel_name
    assert choose(np.dtype("float32"), 16384, 16384, 256) == "dml_kernel_warp"  # the bench's
    assert choose(np.dtype("uint32"), 4, many, 0) == "dml_kernel_warp"
    assert choose(np.dtype("int32"), 16384, few, 256) == "dml_kernel_vector"
    assert choose(np.dtype("float32"), 16384, many, 260) == "dml_kernel"  # off a 16-byte boundary
    assert choose(np.dtype("float32"), 16386, many, 256) == "dml_kernel"  # not a multiple of 4 a row
    assert choose(np.dtype("int64"), 16384, many, 256) == "dml_kernel"  # 8-byte values


def test_max_pooling_slide_choice():
    """The slide kernel: FLOAT32 N C H W, stride 1, no dilation, 3 to 7 window rows (strip_fits), an output as wide as
    the input, at most SLIDE_MAX_SIDE columns of padding on either side, rows of a multiple of 4 from a 16-byte
    boundary."""
    base = np.zeros(2 * 16 * 256 * 256 + 4, np.float32)
    x = base[:-4].reshape(2, 16, 256, 256)

    def fits(array, window, start, end, out_dtype=np.float32, strides=(1, 1), dilations=(1, 1)):
        shape = array.shape[2:]
        out = [(size + s + e - (w - 1) * d - 1) // stride + 1
               for size, w, s, e, stride, d in zip(shape, window, start, end, strides, dilations)]
        geometry = {"WindowSize": tuple(window), "StartPadding": tuple(start), "EndPadding": tuple(end),
                    "Strides": tuple(strides), "Dilations": tuple(dilations)}
        return pooling_gpu.slide_fits(device_like(array, base), geometry, (*array.shape[:2], *out), out_dtype)

    assert fits(x, (3, 3), (1, 1), (1, 1))  # the bench's
    assert fits(x, (5, 5), (2, 2), (2, 2)) and fits(x, (7, 5), (6, 4), (6, 0)) and fits(x, (3, 1), (0, 0), (0, 0))
    assert not fits(x, (3, 3), (1, 1), (1, 1), strides=(1, 2))
    assert not fits(x, (3, 3), (1, 1), (1, 1), dilations=(2, 1))
    assert not fits(x, (2, 2), (0, 0), (1, 1))  # two window rows: the generic kernel's
    assert not fits(x, (3, 3), (1, 0), (1, 0))  # an output narrower than the input
    assert not fits(x, (3, 7), (1, 5), (1, 1))  # five columns of padding on the left
    assert not fits(x, (3, 3), (1, 1), (1, 1), out_dtype=np.float16)
    assert not fits(base[1:-3].reshape(x.shape), (3, 3), (1, 1), (1, 1))  # one element in
    assert not fits(base[: 2 * 16 * 256 * 254].reshape(2, 16, 256, 254), (3, 3), (1, 1), (1, 1))  # rows of 254
    assert not fits(x.astype(np.float16), (3, 3), (1, 1), (1, 1))


def test_every_other_element_choice():
    """_pairs takes a last step of 2 over at most two merged dimensions of whole 16-byte output vectors, each row
    from a 16-byte boundary, its last word inside the allocation."""
    base = np.zeros((64, 4096), np.float32)
    planes = base.reshape(8, 8, 64, 64)
    taken = [base[:, ::2], base[:, 8:1032:2], base[::-1, ::2], base[3:60:5, 8:4000:2],
             base.reshape(-1)[: 4096 * 63][::2], base.reshape(-1)[-8:][::2], planes[:, ::2, 1:, ::2]]
    left = [base[:, 1::2], base[:, ::4], base[:, ::3], base[:, ::-2], base.reshape(-1)[:2001][::2],
            base[:, 4:1000:2], planes[:, :3, 1:, ::2]]
    assert all(movement_gpu.pairs_fit(device_like(view, base)) for view in taken)
    assert not any(movement_gpu.pairs_fit(device_like(view, base)) for view in left)
    for dtype in ("uint8", "float16", "float64"):
        other = np.zeros((40, 512), dtype)
        assert movement_gpu.pairs_fit(device_like(other[:, 16:272:2], other))
        assert not movement_gpu.pairs_fit(device_like(other[:, ::2][:, :33], other))
    # The last word read reaches one element past the last output: it must lie inside the allocation.
    short = np.zeros(127, np.float32)
    inside = device_like(short[:127:2][:60], short)  # 60 outputs: words up to element 119
    assert movement_gpu.pairs_fit(inside)
    assert not movement_gpu.pairs_fit(SimpleNamespace(**{**vars(inside), "data": SimpleNamespace(
        ptr=inside.data.ptr, mem=SimpleNamespace(ptr=inside.data.ptr, size=4 * 119))}))
