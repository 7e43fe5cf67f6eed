"""DxDispatch's text output: printed resources and dispatch timings.

Follows DxDispatch/src/dxdispatch/Executor.cpp: `Resource 'name': v0, v1, ...` with the values
written as C++'s `ostream << value` writes them (floats with 6 significant digits, %g style),
and a verbose form with one `[index] value (0xBITS)` line per element. One deliberate
difference: 8-bit values are printed as numbers, where C++ streams print int8_t/uint8_t as
characters.
"""

from __future__ import annotations

import math

import numpy as np

from .model import BufferResource
from ..data_types import as_bits, is_four_bit_dtype
from ..errors import printable
from ..io.strided import from_buffer_bytes


def resource_values(resource: BufferResource, contents: bytearray) -> np.ndarray:
    """The elements a print shows: as many as the initial values, from the buffer's start.

    DxDispatch trims the view to the initial values so that the 4-byte padding is not shown.
    """
    # A view, not a copy (but for 4-bit elements, unpacked): a print shows a few values of what may be a large buffer.
    return from_buffer_bytes(contents, resource.data_type, count=resource.initial_element_count)


def format_value(value) -> str:
    """One element as `std::ostream << value` writes it (half_float::half prints as float)."""
    if isinstance(value, (np.floating, float)):
        number = float(value)
        if math.isnan(number):
            return "-nan" if math.copysign(1.0, number) < 0 else "nan"
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return format(number, ".6g")
    return str(int(value))


def format_resource(resource: BufferResource, contents: bytearray, *, verbose: bool = False) -> str:
    return _format(resource.name, resource_values(resource, contents), verbose)


def format_values(name: str, data_type, contents: bytes, count: int, *, verbose: bool = False) -> str:
    """A deferred resource's print: `count` elements of the type its ONNX output gave it (Executor.cpp)."""
    return _format(name, from_buffer_bytes(contents, data_type, count=count), verbose)


def _format(name: str, values: np.ndarray, verbose: bool) -> str:
    name = printable(name)  # a model's names may hold ESC or BEL: escaped, never sent to the terminal
    if not verbose:
        return f"Resource '{name}': " + ", ".join(format_value(v) for v in values)
    # fmt's "[{:{}}] ... (0x{:{}X})": the index right-aligned to the width of the element count, and the
    # element's bytes as hex right-aligned (space-filled, as fmt pads numbers) to two digits per byte.
    index_width = int(math.floor(math.log10(len(values)))) + 1 if len(values) else 1
    if is_four_bit_dtype(values.dtype):  # a 4-bit element's four bits: one hex digit
        hex_width, bits = 1, as_bits(values)
    else:
        hex_width, bits = values.dtype.itemsize * 2, values.view(f"<u{values.dtype.itemsize}")
    lines = [f"Resource '{name}':"]
    for index, (value, pattern) in enumerate(zip(values, bits)):
        lines.append(f"[{index:>{index_width}}] {format_value(value)} (0x{int(pattern):>{hex_width}X})")
    return "\n".join(lines)


def format_timing(name: str, iterations: int, cpu_median_ms: float, gpu_median_ms: float | None,
                  gpu_note: str | None) -> str:
    """DxDispatch's one-line summary: `Dispatch 'x': N iterations, T ms median (CPU)[, G ms median (GPU)]`."""
    line = f"Dispatch '{printable(name)}': {iterations} iterations, {cpu_median_ms:.4f} ms median (CPU)"
    if gpu_median_ms is not None:
        line += f", {gpu_median_ms:.6f} ms median (GPU)"
    elif gpu_note:
        line += f", {gpu_note}"
    return line
