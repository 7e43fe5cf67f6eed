"""Value conversions that several operators share: float to integer as Direct3D converts it.

Direct3D's float-to-integer conversion (the rule dmlcli follows wherever a float becomes an integer and
DirectML's pages are silent: CAST, POW with an integer base and a float exponent, DIAGONAL_MATRIX's FLOAT
Value): toward zero; values past the type's range saturate to its limits (+inf to the largest, -inf to the
lowest); NaN gives 0. The result never depends on the host's C cast, whose out-of-range results are
undefined (x86 gives INT_MIN for int32 and wraps for the narrow types; CUDA saturates).
"""

from __future__ import annotations

import functools
from functools import partial

import numpy as np

from . import compiled_loops
from .float_specials import has_nan, nan_patterns

# Elements converted at a time on the CPU: small enough that the range check reads the block from the cache
# (L2), large enough that the per-block Python calls do not count (measured: 2^16 was slower than 2^18).
_BLOCK_ELEMENTS = 1 << 18


# A block with at most 1/_FEW_MARKS of its elements marked by astype mends those alone (by the rule, gathered):
# with a NaN every 1000 elements, 4.5x -> 3.1x astype's time (bench/generation_cpu_bench.py).
_FEW_MARKS = 16


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
    low, above = integer_bounds(dtype)
    loops = compiled_loops.active() if xp is np else None
    if loops is not None:  # one pass that applies the rule itself (DMLCLI_COMPILED_LOOPS)
        converted = loops.to_integer(values, dtype, low, above)
        if converted is not None:
            return converted
    # FLOAT16 is widened to FLOAT32 (exactly) first: the bounds (2^63, ...) would overflow FLOAT16, and NumPy's
    # FLOAT16 reductions and casts run element by element (80 times a FLOAT32 reduction's time).
    widen = np.dtype(np.float32) if values.dtype == np.float16 else None
    marked = xp is np and values.size > _BLOCK_ELEMENTS and astype_marks_misfits(
        values.dtype if widen is None else widen, dtype)
    mark = np.iinfo(dtype).min if marked else None

    def settled(block, converted) -> bool:
        # Where astype gives every NaN and out-of-range value either the rule's result or the mark (the
        # type's lowest value), a result without the mark is the rule's: one reduction, of the output. One
        # with the mark takes the rule (a NaN, a value past the range, or the lowest value itself, in range).
        if marked and block.flags.aligned:
            if np.minimum.reduce(converted) > mark:
                return True
            # The few marked places take the rule (a NaN in a block of data with gaps); many, the whole block.
            places = np.flatnonzero(converted == mark)
            if places.size > converted.size // _FEW_MARKS:
                return False
            converted[places] = _saturate_by_clipping(block[places], dtype)
            return True
        # Every value v with low - 1 < v < above truncates into the range (NaN fails both tests, as the
        # reductions propagate it). The ufuncs' own reductions: ndarray.min goes through two more Python calls.
        return float(np.minimum.reduce(block)) > low - 1.0 and float(np.maximum.reduce(block)) < above

    rule = _saturate_by_clipping if xp is np else partial(_saturate, xp)
    return blockwise(xp, values, dtype, settled, lambda block: rule(block, dtype), widen=widen)


@functools.lru_cache(maxsize=None)
def astype_marks_misfits(source: np.dtype, target: np.dtype) -> bool:
    """Whether NumPy's cast from the float type `source` to the integer type `target` gives each NaN and each
    value past the target's range either the rule's result or the mark, the target's lowest value. x86's
    conversions do for 32- and 64-bit targets (cvttss2si, cvttps2dq, cvttpd2qq, ...: the "integer indefinite"
    value 0x80...0, which C leaves undefined and NumPy passes on); Arm's saturate, which is the rule but for
    NaN. Narrower and unsigned targets go through a wider conversion and wrap (300.0 to UINT8 is 44): no mark.
    Asked once per pair (see marks_misfits)."""
    return marks_misfits(partial(np.copyto, casting="unsafe"), np.dtype(source), np.dtype(target))


def marks_misfits(cast, source: np.dtype, target: np.dtype) -> bool:
    """The probe for one conversion `cast(out, values)`: every NaN encoding, the infinities, the largest finite
    values and the first values past either end of the range, at every position of a vector and in the scalar
    remainder, on buffers that start at two offsets; True where each comes out as the rule's result or the
    mark."""
    probe = _misfits(source, target)
    expected = _saturate_by_clipping(probe, target)  # the rule, for these values
    mark = np.iinfo(target).min
    count = 2 * 1024 + 37
    with np.errstate(all="ignore"):
        for offset in (0, 1):
            values = np.resize(probe, count + offset)[offset:]
            want = np.resize(expected, count + offset)[offset:]
            got = np.empty(count + offset, target)[offset:]
            cast(got, values)
            if not np.all((got == want) | (got == mark)):
                return False
    return True


def _misfits(source: np.dtype, target: np.dtype) -> np.ndarray:
    """Values of `source` that the C cast to `target` leaves undefined: NaN (four encodings), infinities, the
    largest finite values and the first values past each end of the target's range."""
    low, above = integer_bounds(target)
    kind = source.type
    with np.errstate(over="ignore"):
        edges = [kind(above), np.nextafter(kind(above), kind(np.inf)), kind(above) * kind(2),
                 np.nextafter(kind(low - 1.0), kind(-np.inf)), kind(low) * kind(2)]
    numbers = np.array(edges + [kind(np.inf), kind(-np.inf), np.finfo(source).max, np.finfo(source).min], source)
    nans = np.array(nan_patterns(source), f"uint{source.itemsize * 8}").view(source)
    return np.concatenate([numbers, nans])


def blockwise(xp, values, dtype: np.dtype, settled, convert, *, widen: np.dtype | None = None):
    """values converted to `dtype`: by `convert(block)` (the rule), except on NumPy, where each block is converted
    by astype (one pass, from the cache) and `settled(block, converted)` then says whether that is the rule's
    result, having mended `converted` in place where that is cheap (a few NaNs); where it is not, `convert`
    overwrites the block. `widen`: a type each block is converted to first, exactly (FLOAT16 to FLOAT32), which
    `settled` and `convert` see; on NumPy one block at a time, into a buffer that stays in the cache."""
    if xp is not np or values.size <= _BLOCK_ELEMENTS:
        if widen is not None:
            values = values.astype(widen)
        return convert(values)
    flat = np.ascontiguousarray(values).reshape(-1)
    out = np.empty(flat.shape, dtype)
    wide = None if widen is None else np.empty(_BLOCK_ELEMENTS, widen)
    with np.errstate(all="ignore"):
        for start in range(0, flat.size, _BLOCK_ELEMENTS):
            block = flat[start:start + _BLOCK_ELEMENTS]
            if wide is not None:
                np.copyto(wide[:block.size], block)
                block = wide[:block.size]
            # astype first, then the check on the block now in the cache (this order measured 2-5x faster
            # than checking first).
            converted = out[start:start + block.size]
            np.copyto(converted, block, casting="unsafe")
            if not settled(block, converted):
                converted[...] = convert(block)
    return out.reshape(values.shape)


def _saturate_by_clipping(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The rule on NumPy: clipped into the range in the float type (np.clip, one pass), NaN (which np.clip keeps)
    set to 0, then cast (every value in range, so the C cast truncates as the rule does, without a warning);
    then, for the wide types, values past the range set to the type's largest (the float below 2^31 in FLOAT32
    truncates to 2^31 - 128, not 2^31 - 1). Masks by np.copyto(where=), not boolean indexing, which gathers the
    positions first (16 MiB a third past UINT8's range: 25x astype's time before, 4x now); np.where with a
    scalar, which _saturate uses, runs element by element in NumPy 2.4: 30 times as long."""
    low, above = integer_bounds(dtype)
    kind = values.dtype.type
    top = np.nextafter(kind(above), kind(0))  # the largest float below `above`: truncates into the range
    clipped = np.clip(values, kind(low), top)  # low is exact in every float type
    if has_nan(clipped):
        np.copyto(clipped, 0, where=np.isnan(clipped))
    result = clipped.astype(dtype)
    largest = np.iinfo(dtype).max
    if int(top) != largest:
        np.copyto(result, largest, where=values >= above)
    return result


def _saturate(xp, values, dtype: np.dtype):
    info = np.iinfo(dtype)
    low, above = integer_bounds(dtype)
    whole = xp.trunc(values)
    inside = (whole >= low) & (whole < above)  # false for NaN
    result = xp.where(inside, whole, 0).astype(dtype)  # only in-range values reach the C cast
    result = xp.where(whole >= above, dtype.type(info.max), result)
    return xp.where(whole < low, dtype.type(info.min), result)
