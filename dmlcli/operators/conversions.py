"""Value conversions that several operators share: float to integer as Direct3D converts it.

Direct3D's float-to-integer conversion (the rule dmlcli follows wherever a float becomes an integer and
DirectML's pages are silent: CAST, POW with an integer base and a float exponent, DIAGONAL_MATRIX's FLOAT
Value): toward zero; values past the type's range saturate to its limits (+inf to the largest, -inf to the
lowest); NaN gives 0. The result never depends on the host's C cast, whose out-of-range results are
undefined (x86 gives INT_MIN for int32 and wraps for the narrow types; CUDA saturates).
"""

from __future__ import annotations

import numpy as np

# Elements converted at a time on the CPU: small enough that the range check reads the block from the cache
# (L2), large enough that the per-block Python calls do not count (measured: 2^16 was slower than 2^18).
_BLOCK_ELEMENTS = 1 << 18


def integer_bounds(dtype) -> tuple[float, float]:
    """The lowest value of an integer type and the first value past its largest, both exact as floats."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    if dtype.kind == "i":
        return -(2.0 ** (width - 1)), 2.0 ** (width - 1)
    return 0.0, 2.0 ** width


def float_to_integer(xp, values, dtype):
    """Float values (FLOAT16/32/64) as an integer type: toward zero, saturating, NaN -> 0 (see the module).

    `xp` is numpy or cupy. On NumPy, blocks whose values all lie inside the range (the usual case) take a
    plain astype; the others the full rule.
    """
    dtype = np.dtype(dtype)
    if values.dtype == np.float16:
        values = values.astype(np.float32)  # exact; the bounds (2^63, ...) would overflow FLOAT16
    low, above = integer_bounds(dtype)

    def inside(block) -> bool:
        # Every value v with low - 1 < v < above truncates into the range (NaN fails both tests).
        return float(block.min()) > low - 1.0 and float(block.max()) < above

    return blockwise(xp, values, dtype, inside, lambda block: _saturate(xp, block, dtype))


def blockwise(xp, values, dtype: np.dtype, plain, convert):
    """values converted to `dtype`: by `convert(block)`, except that on NumPy each block of which
    `plain(block)` says that astype gives the rule's result is converted by astype (one pass, from the cache)."""
    if xp is not np or values.size <= _BLOCK_ELEMENTS:
        return convert(values)
    flat = np.ascontiguousarray(values).reshape(-1)
    out = np.empty(flat.shape, dtype)
    with np.errstate(all="ignore"):
        for start in range(0, flat.size, _BLOCK_ELEMENTS):
            block = flat[start:start + _BLOCK_ELEMENTS]
            # astype first, then the check on the block now in the cache (this order measured 2-5x faster
            # than checking first); where the check fails the rule overwrites the block.
            np.copyto(out[start:start + block.size], block, casting="unsafe")
            if not plain(block):
                out[start:start + block.size] = convert(block)
    return out.reshape(values.shape)


def _saturate(xp, values, dtype: np.dtype):
    info = np.iinfo(dtype)
    low, above = integer_bounds(dtype)
    whole = xp.trunc(values)
    inside = (whole >= low) & (whole < above)  # false for NaN
    result = xp.where(inside, whole, 0).astype(dtype)  # only in-range values reach the C cast
    result = xp.where(whole >= above, dtype.type(info.max), result)
    return xp.where(whole < low, dtype.type(info.min), result)
