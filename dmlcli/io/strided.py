"""Strided tensor views of a flat buffer, read and written the way DirectML addresses them.

DirectML's DML_BUFFER_TENSOR_DESC gives Sizes and optional Strides, both in elements: element
(i0, i1, ...) lives at element offset dot(index, Strides) from the binding's start, a stride of 0
repeats (broadcasts) the lower dimensions, and no Strides means packed row-major
(../shared/reference/directml_ops.md §4). This module is the one place that turns such a
description into NumPy views; both `dmlcli dispatch` and JSON tensors with "strides" use it.

4-bit types (INT4, UINT4) count elements of four bits: a buffer holds two a byte, element 2k in the low four
bits of byte k and element 2k + 1 in the high four (ONNX's int4 packing, which ONNX Runtime's DirectML provider
binds unchanged: its Int4x2 stores element 0 in bits 0-3), so Strides and offsets count half bytes and
TotalTensorSizeInBytes is DMLCalcBufferTensorSize's (bits counted, rounded up to a byte, then to 4 bytes). In
memory dmlcli holds them one a byte (ml_dtypes): to_buffer_bytes and from_buffer_bytes pack and unpack them.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..data_types import MAX_ELEMENTS, DataType, to_kernel_array
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


def buffer_bytes_for(count: int, bits: int) -> int:
    """The bytes `count` packed elements of `bits` each take (two 4-bit elements a byte)."""
    return (count * bits + 7) // 8


def to_buffer_bytes(array: np.ndarray, data_type: DataType) -> memoryview:
    """Elements as a D3D12 buffer holds them, in C order: little-endian; 4-bit ones two a byte, the first in the
    low four bits (an odd count leaves the last byte's high half 0). Read-only, and without a copy where the
    array already is such a buffer (a model's initial values can be most of its memory)."""
    if data_type.is_four_bit:
        nibbles = (to_kernel_array(np.asarray(array)).astype(np.uint8) & np.uint8(0xF)).reshape(-1)
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        packed = nibbles[0::2] | (nibbles[1::2] << np.uint8(4))
    else:
        packed = np.ascontiguousarray(array).astype(little_endian(array.dtype), copy=False).reshape(-1).view(np.uint8)
    return memoryview(packed).toreadonly()


def from_buffer_bytes(raw, data_type: DataType, count: int | None = None, offset: int = 0) -> np.ndarray:
    """The elements in a buffer's bytes from byte `offset` (`count` of them, or as many as there are): a view for
    the byte-sized types, a fresh unpacked array (ml_dtypes' int4/uint4, one element a byte) for the 4-bit ones."""
    if data_type.is_four_bit:
        whole = (len(raw) - offset) if count is None else buffer_bytes_for(count, 4)
        packed = np.frombuffer(raw, dtype=np.uint8, count=whole, offset=offset)
        nibbles = np.empty(packed.size * 2, dtype=np.uint8)
        nibbles[0::2] = packed & np.uint8(0xF)
        nibbles[1::2] = packed >> np.uint8(4)
        return nibbles[:count].view(data_type.numpy_dtype)  # ml_dtypes reads a byte's low four bits, signed or not
    dtype = little_endian(data_type.numpy_dtype)
    if count is None:
        count = (len(raw) - offset) // dtype.itemsize
    return np.frombuffer(raw, dtype=dtype, count=count, offset=offset)


def element_offsets(sizes, strides) -> np.ndarray:
    """The element offset of every element, as an int64 array of shape `sizes` (as large as the tensor: for
    writing its elements, never for checking a desc, which io/overlap.py does by arithmetic)."""
    offsets = np.zeros(tuple(sizes), dtype=np.int64)
    for axis, (size, stride) in enumerate(zip(sizes, strides)):
        shape = [1] * len(sizes)
        shape[axis] = size
        offsets = offsets + (np.arange(size, dtype=np.int64) * stride).reshape(shape)
    return offsets


def store_four_bit(raw: bytearray, offset: int, sizes, strides, values: np.ndarray) -> None:
    """Write a 4-bit tensor (`values`, C order, of `sizes`) into `raw` at byte `offset` with element `strides`,
    each element into its half byte, the other half of its byte kept. The tensor must not overlap itself."""
    positions = offset * 2 + element_offsets(sizes, strides).reshape(-1)
    nibbles = (to_kernel_array(np.asarray(values)).astype(np.uint8) & np.uint8(0xF)).reshape(-1)
    buffer = np.frombuffer(raw, dtype=np.uint8)
    for half, keep, shift in ((0, 0xF0, 0), (1, 0x0F, 4)):
        chosen = positions % 2 == half
        where = positions[chosen] // 2
        buffer[where] = (buffer[where] & np.uint8(keep)) | (nibbles[chosen] << np.uint8(shift))
