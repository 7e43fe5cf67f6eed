"""Strided tensor views of a flat buffer, read and written the way DirectML addresses them.

DirectML's DML_BUFFER_TENSOR_DESC gives Sizes and optional Strides, both in elements: element
(i0, i1, ...) lives at element offset dot(index, Strides) from the binding's start, a stride of 0
repeats (broadcasts) the lower dimensions, and no Strides means packed row-major
(../shared/reference/directml_ops.md §4). This module is the one place that turns such a
description into NumPy views; both `dmlcli dispatch` and JSON tensors with "strides" use it.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..data_types import MAX_ELEMENTS
from ..errors import InputError, ValidationError


def little_endian(dtype) -> np.dtype:
    """`dtype` as D3D12 buffers hold it (little-endian), in native spelling where the host is little-endian.

    NumPy treats an explicit '<' dtype as non-native-looking in places (dmlcli's to_native copies it),
    so the native dtype is used wherever it already is little-endian.
    """
    dtype = np.dtype(dtype)
    return dtype if sys.byteorder == "little" else dtype.newbyteorder("<")


def packed_strides(sizes) -> tuple[int, ...]:
    """Row-major strides, in elements, of a packed tensor of `sizes`."""
    strides = []
    step = 1
    for size in reversed(tuple(sizes)):
        strides.append(step)
        step *= int(size)
    return tuple(reversed(strides))


def last_element_index(sizes, strides) -> int:
    """dot(Sizes - 1, Strides): the element offset of the tensor's last element."""
    return sum((int(size) - 1) * int(stride) for size, stride in zip(sizes, strides))


def calc_buffer_tensor_size(element_bits: int, sizes, strides=None) -> int:
    """DMLCalcBufferTensorSize (DirectMLX.h): the minimum TotalTensorSizeInBytes, rounded up to 4.

    Counted in bits so that 4-bit types come out as DirectMLX computes them; Python integers, so
    the 32-bit wrap DirectMLX has for huge strided tensors does not happen here.
    """
    if strides is None:
        element_count = int(np.prod([int(s) for s in sizes], dtype=object))
    else:
        element_count = last_element_index(sizes, strides) + 1
    size_in_bytes = (element_count * element_bits + 7) // 8
    return (size_in_bytes + 3) & ~3


def check_strides(sizes, strides, *, where: str) -> tuple[int, ...]:
    """Strides as a tuple of non-negative ints matching `sizes` (DirectML's strides are UINT)."""
    if not isinstance(strides, (list, tuple)):
        raise InputError(f"{where}: strides must be a list of non-negative integers, found {strides!r}")
    if len(strides) != len(sizes):
        raise InputError(f"{where}: {len(strides)} strides for {len(sizes)} dimensions "
                         f"(sizes {list(sizes)}); give one stride per dimension")
    for stride in strides:
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0 or stride > 0xFFFFFFFF:
            raise InputError(f"{where}: stride {stride!r} is not an integer from 0 to 4294967295 "
                             "(strides are in elements; 0 repeats the lower dimensions)")
    return tuple(int(s) for s in strides)


def strided_view(flat: np.ndarray, sizes, strides, *, offset: int = 0, where: str) -> np.ndarray:
    """A view of the 1-D array `flat` as the tensor (`sizes`, `strides`) starting at element `offset`.

    Raises InputError when the last element would fall outside `flat`. The view may repeat
    elements (zero strides); callers copy it before handing it on, and write through it only
    after checking that it does not overlap itself.
    """
    sizes = tuple(int(s) for s in sizes)
    needed = offset + last_element_index(sizes, strides) + 1
    if any(s == 0 for s in sizes):
        needed = offset
    if needed > flat.shape[0]:
        raise InputError(f"{where}: sizes {list(sizes)} with strides {list(strides)} reach element "
                         f"{needed - 1}, but only {flat.shape[0]} elements are there")
    item = flat.itemsize
    base = flat[offset:]
    return as_strided(base, shape=sizes, strides=tuple(s * item for s in strides), writeable=flat.flags.writeable)


def gather(flat: np.ndarray, sizes, strides, *, offset: int = 0, where: str) -> np.ndarray:
    """A contiguous copy of the strided tensor read from `flat`."""
    return np.ascontiguousarray(strided_view(flat, sizes, strides, offset=offset, where=where))


def tensor_from_buffer(data: np.ndarray, shape, strides, *, where: str) -> np.ndarray:
    """The JSON tensor form: `data` (any nesting, read flat) seen as `shape` with `strides`."""
    if shape is None:
        raise InputError(f"{where}: \"strides\" needs \"shape\" too (the data are read as a flat buffer)")
    strides = check_strides(shape, strides, where=where)
    count = math.prod(int(s) for s in shape)
    if count > MAX_ELEMENTS:  # NumPy could not even describe such a view
        raise ValidationError(f"{where}: shape {list(shape)} has {count} elements; a DirectML tensor holds at "
                              f"most {MAX_ELEMENTS} (2^32-1)")
    flat = np.array(data).reshape(-1)
    flat.setflags(write=False)
    return strided_view(flat, shape, strides, where=where)
