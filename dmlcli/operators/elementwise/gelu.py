"""ACTIVATION_GELU's CPU kernel: 0.5*x*erfc(-x/sqrt(2)) in float64, rounded once to the output type.

The reference (the bits). For t = -x/sqrt(2) (the double product -x * _SQRT1_2):
- -4 < t < 0.5: 0.5*x*(1 - erf(t)), erf by the series of transcendental's ERF kernel in Horner's form at the degree
  its tensor-wide rule picks (_erf_degree of the largest 2t^2 of the tensor's elements in that range, the first
  band's degree for 2t^2 <= 0.5): 1 - erf has no cancellation below t = 0.5 (erf(0.5) = 0.52);
- t <= -4: 0.5*x*2, that is x (erfc(-4) = 2 - 1.5e-8, and x >= 5.66 takes it within half a FLOAT32 ULP);
- t >= 0.5 (and NaN): 0.5*x*erfc(t) with C's erfc (math.erfc); x = -inf gives -0.0, the limit.
_reference gives those float64 values; they are what the kernel gave before (bench/gelu_erfc_check.py proves the
kernel's bits equal them).

The kernel. FLOAT16 takes a table of all 65536 results (made once by the reference): no FLOAT16 result depends on the
series' degree, so the tensor-wide rule changes none of them (bench/gelu_erfc_check.py tries every degree the rule can
pick for every FLOAT16 value). FLOAT32 takes a cheaper formula within _APART of the reference's value: where that
value's neighbourhood of relative size _APART holds no FLOAT32 rounding boundary (all but about one value in 2^18),
both round to the same FLOAT32; the others are made again by the reference. NumPy's cost is about one pass over the
float64 arrays per operation, so the formula is the one with fewest: x^2, a polynomial of degree 10 in x^2 where
|x| <= 1.5 (99% of the encoder's feed-forward pre-activations, whose deviation is 0.58), C's erfc element by element
or Cody's approximations where |x| > 1.5, a check of the low bits, the rounding: 2.9-3x faster than the kernel before
for 8192 such values, 5.8x for 1 Mi (bench/gelu_cpu_bench.py). Other output types take the reference itself.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from ..numerics import compiled_loops
from .transcendental import _ERF_FIRST_BAND, _ERF_SATURATES, _TWO_OVER_SQRT_PI, _erf_degree, _horner

_SQRT1_2 = 0.7071067811865476  # 1/sqrt(2), the double nearest

# Below this t, erfc(t) = 1 - erf(t) by the series (the reference); from it on, C's erfc.
_ERFC_BY_ERF = 0.5

# ---------------------------------------------------------------- W. J. Cody's erfc (vectorised)

# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969) 631-637, as in his
# SPECFUN routine CALERF (netlib specfun/erf), whose coefficients these are (lowest degree first): erfc(t) =
# exp(-t^2) P(t)/Q(t) for 0.46875 < t <= 4, and exp(-t^2)/t (1/sqrt(pi) - R(1/t^2)/t^2) past 4, both to about
# 1e-18 in exact arithmetic, so to a few double ULP in double's.
_CODY_MIDDLE_P = (1.23033935479799725e3, 2.05107837782607147e3, 1.71204761263407058e3, 8.81952221241769090e2,
                  2.98635138197400131e2, 6.61191906371416295e1, 8.88314979438837594e0, 5.64188496988670089e-1,
                  2.15311535474403846e-8)
_CODY_MIDDLE_Q = (1.23033935480374942e3, 3.43936767414372164e3, 4.36261909014324716e3, 3.29079923573345963e3,
                  1.62138957456669019e3, 5.37181101862009858e2, 1.17693950891312499e2, 1.57449261107098347e1, 1.0)
_CODY_TAIL_P = (6.58749161529837803e-4, 1.60837851487422766e-2, 1.25781726111229246e-1, 3.60344899949804439e-1,
                3.05326634961232344e-1, 1.63153871373020978e-2)
_CODY_TAIL_Q = (2.33520497626869185e-3, 6.05183413124413191e-2, 5.27905102951428412e-1, 1.87295284992346047e0,
                2.56852019228982242e0, 1.0)
_CODY_MIDDLE_END = 4.0
_ONE_OVER_SQRT_PI = 0.5641895835477563  # 1/sqrt(pi), the double nearest
# erfc(t) is 0 in double (below its least subnormal) from t = 27.3 on; clamping there keeps +inf out of exp's split.
_ERFC_ZERO_FROM = 28.0


def _polynomial(coefficients: tuple[float, ...], y: np.ndarray) -> np.ndarray:
    """sum_i coefficients[i] y^i by Horner's rule."""
    total = np.full_like(y, coefficients[-1])
    for coefficient in coefficients[-2::-1]:
        total *= y
        total += coefficient
    return total


def _erfc_cody(t: np.ndarray) -> np.ndarray:
    """erfc(t) in float64 for t >= 0.46875 (NaN stays NaN), by Cody's approximations. exp(-t^2) is taken as
    exp(-s^2) exp(-(t - s)(t + s)) with s = t rounded down to 1/16: s^2 is exact, so no rounding of t^2 (whose
    error exp would magnify by t^2, up to 784) reaches the result (Cody's own split)."""
    t = np.minimum(t, _ERFC_ZERO_FROM)
    beyond = np.flatnonzero(~(t <= _CODY_MIDDLE_END))  # past 4 (and NaN): the asymptotic form
    if beyond.size == t.size:
        factor = _cody_asymptotic(t)
    else:
        factor = _polynomial(_CODY_MIDDLE_P, t) / _polynomial(_CODY_MIDDLE_Q, t)
        if beyond.size:
            factor[beyond] = _cody_asymptotic(t[beyond])
    s = np.trunc(t * 16.0) / 16.0
    return np.exp(-s * s) * np.exp(-(t - s) * (t + s)) * factor


def _cody_asymptotic(t: np.ndarray) -> np.ndarray:
    """Cody's erfc(t) exp(t^2) for t > 4: (1/sqrt(pi) - R(1/t^2)/t^2) / t."""
    inverse_square = 1.0 / (t * t)
    return (_ONE_OVER_SQRT_PI - _polynomial(_CODY_TAIL_P, inverse_square) * inverse_square
            / _polynomial(_CODY_TAIL_Q, inverse_square)) / t


# Relative distance within which _erfc_cody and C's erfc (glibc's: a few ULP) lie for every t in [0.5, 26.5]: the
# largest measured over every t = -x/sqrt(2) of a FLOAT32 x (bench/gelu_erfc_check.py) is 1.2e-15 (2^-49.6);
# 2^-40 leaves a factor of 800. Past 26.5 erfc < 2^-1000, and any such product rounds to zero in FLOAT32 and FLOAT16.
_ERFC_APART = 2.0**-40


def _erfc_libm(values: np.ndarray) -> np.ndarray:
    """C's erfc through the math module, element by element: the reference's erfc from t = 0.5 on."""
    return np.fromiter(map(math.erfc, values.tolist()), np.float64, values.size)


def _near_a_rounding_boundary(values: np.ndarray, out_dtype) -> np.ndarray:
    """Where a float64 value's neighbourhood of relative size _ERFC_APART does not round to one out_dtype number
    (about 2^-15 of the values for FLOAT32): there, and only there, another erfc within _ERFC_APART of this one
    could round the product elsewhere."""
    low = (values * (1.0 - _ERFC_APART)).astype(out_dtype)
    return low != (values * (1.0 + _ERFC_APART)).astype(out_dtype)


# ---------------------------------------------------------------- the reference

def _series_degrees(top: float) -> tuple[int, int]:
    """The erf series' Horner degrees for a tensor whose largest 2t^2 in -4 < t < 0.5 is `top` (0 where none is):
    the first band's (2t^2 <= 0.5) and the rest's, as transcendental's _erf_horner picks them."""
    return _erf_degree(min(top, _ERF_FIRST_BAND)), _erf_degree(top)


def _series_factor(t: np.ndarray) -> np.ndarray:
    """2t^2 as the series takes it: 2 * (t * t)."""
    return 2.0 * (t * t)


def _top_factor(v: np.ndarray) -> float:
    """The largest 2t^2 over the elements of float64 v (flat) with -4 < t < 0.5, t = -v/sqrt(2); 0 where none."""
    t = -v * _SQRT1_2
    inside = (t < _ERFC_BY_ERF) & (t > -_ERF_SATURATES)
    return float(np.max(_series_factor(t), where=inside, initial=0.0))


def _reference(v: np.ndarray, degrees: tuple[int, int]) -> np.ndarray:
    """The reference's float64 values for the float64 values v (flat) of a tensor whose series degrees are
    `degrees` (_series_degrees of the whole tensor's _top_factor)."""
    t = -v * _SQRT1_2
    half = 0.5 * v
    values = half * 2.0  # t <= -4 (and t = -inf): x itself
    series = np.flatnonzero((t > -_ERF_SATURATES) & (t < _ERFC_BY_ERF))
    if series.size:
        values[series] = half[series] * (1.0 - _erf_by_series(t[series], degrees))
    tail = np.flatnonzero(~(t <= -_ERF_SATURATES) & ~(t < _ERFC_BY_ERF))  # t >= 0.5 and NaN
    if tail.size:
        values[tail] = half[tail] * _erfc_libm(t[tail])
    return _special_values(v, values)


def _special_values(v: np.ndarray, values: np.ndarray) -> np.ndarray:
    """-inf gives -0.0 (the limit; -inf * erfc(inf) would be NaN) and a NaN the input's NaN made quiet (its sign
    and payload kept, as 0.5*x gives it; a product of two NaNs may carry either, by the order NumPy's loop takes them
    in)."""
    values[v == -np.inf] = -0.0
    nan = np.flatnonzero(np.isnan(v))
    values[nan] = v[nan] + 0.0  # an arithmetic operation quiets a signalling NaN (FLOAT16's widening keeps it)
    return values


def _erf_by_series(t: np.ndarray, degrees: tuple[int, int]) -> np.ndarray:
    """transcendental's erf series for -4 < t < 0.5 at the tensor's degrees: 2/sqrt(pi) exp(-t^2) t P(2t^2), P by
    Horner's rule, in the order of operations of _erfc before (the same bits)."""
    square = t * t
    factor = 2.0 * square
    first, rest = degrees
    horner = _horner(factor, first)
    beyond = np.flatnonzero(factor > _ERF_FIRST_BAND)
    if beyond.size:
        horner[beyond] = _horner(factor[beyond], rest)
    return _TWO_OVER_SQRT_PI * np.exp(-square) * t * horner


def _reference_rounded(x: np.ndarray, out_dtype) -> np.ndarray:
    """The reference for any input and output types, rounded once."""
    v = np.asarray(x, dtype=np.float64).reshape(-1)
    values = _reference(v, _series_degrees(_top_factor(v)))
    return values.astype(out_dtype).reshape(np.shape(x))


# ---------------------------------------------------------------- FLOAT16: one table

@functools.lru_cache(maxsize=None)
def _float16_table() -> np.ndarray:
    """GELU of every FLOAT16 value, indexed by its bits (made once: about 5 ms)."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        table = _reference_rounded(every, np.float16)
    table.flags.writeable = False
    return table


# ---------------------------------------------------------------- FLOAT32: a cheaper formula, checked

# Phi(x) - 1/2 = x S(x^2), S(u) = (1/sqrt(2 pi)) sum_n (-u/2)^n / (n! (2n+1)): these are S's Taylor series to degree
# 60 economised to degree 10 by Chebyshev's polynomials on [0, 9/4] in exact arithmetic, times 1/sqrt(2 pi), rounded
# to double (lowest degree first; bench/gelu_erfc_check.py derives them again). The terms dropped sum to 2^-49.1 of
# S's least value there; Horner's rule adds a few roundings (no term is larger than S(0)).
_CORE_COEFFICIENTS = (
    0.3989422804014322, -0.06649038006685533, 0.009973557009140375, -0.0011873282092338484,
    0.00011543466523441708, -9.44460937466724e-06, 6.65907920988242e-07, -4.117470606679098e-08,
    2.245021265426092e-09, -1.0311653443273488e-10, 3.0805601820427083e-12)
# The polynomial serves x^2 <= 9/4 (|x| <= 1.5). GELU = x (1/2 + x S(x^2)) loses up to 3 bits to the sum for x near
# -1.5 (Phi(-1.5) = 0.067): still within 2^-45 of the true value.
_CORE_BOUND = 2.25
_CORE_EDGE = np.float32(1.5)  # sqrt(_CORE_BOUND): a FLOAT32's square is exact, so |x| > 1.5 iff x^2 > 9/4

# Relative distance within which the FLOAT32 path's values lie from the reference's: the largest measured over every
# FLOAT32 value and every degree the series' rule can pick (bench/gelu_erfc_check.py) is 2^-46.3, near x = -1.48
# (where 1/2 + x S(x^2) cancels); 2^-43 leaves a factor of 9 and about one value in 2^18 to the reference.
_APART = 2.0**-43
_LOW_BITS = np.uint64((1 << 29) - 1)  # the bits a double loses in its rounding to FLOAT32
# Where fewer elements than this lie outside the polynomial's range, C's erfc element by element (about 60 ns a value
# through the math module) costs less than Cody's vectorised approximations (about 25 us a call, 40 NumPy passes).
_ELEMENT_BY_ELEMENT_BELOW = 300
# Tensors are taken in blocks of this many elements: a block's three float64 arrays (1.5 MiB, kept by each thread that
# runs the kernel: _workspace) stay in the processor's caches.
_BLOCK = 1 << 16


def _float32(x: np.ndarray) -> np.ndarray:
    """GELU of a FLOAT32 tensor, the reference's bits."""
    flat = x.reshape(-1)
    loops = compiled_loops.active()
    compiled = None if loops is None else _compiled(loops)(flat)
    if compiled is not None:
        # The steps below in one compiled call, with C's erfc past the core however many values lie there (where
        # the NumPy path takes Cody's from _ELEMENT_BY_ELEMENT_BELOW on): both lie within _APART of the reference,
        # so either rounds to the reference's FLOAT32 wherever the check finds no rounding boundary near.
        result, near = compiled
    elif flat.size <= _BLOCK:
        values, spare = _approximate(flat)
        result = values.astype(np.float32)
        near = _near_a_float32_boundary(values, spare)
    else:
        result = np.empty(flat.size, np.float32)
        found = []
        for start in range(0, flat.size, _BLOCK):
            values, spare = _approximate(flat[start:start + _BLOCK])
            result[start:start + values.size] = values
            found.append(_near_a_float32_boundary(values, spare) + start)
        near = np.concatenate(found)
    if near.size:
        result[near] = _reference_at(flat, near).astype(np.float32)
    return result.reshape(x.shape)


@functools.lru_cache(maxsize=4)
def _compiled(loops: compiled_loops.CompiledLoops):
    """The compiled loop's call with this module's constants (CompiledLoops.gelu_float32_of), made once."""
    shift, width = _midpoint_window(_APART)
    return loops.gelu_float32_of(_CORE_COEFFICIENTS, _CORE_EDGE, _SQRT1_2, _ERF_SATURATES, shift, _LOW_BITS, width)


def _approximate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 values within _APART of the reference's for the flat FLOAT32 x, and a spare float64 array of their
    size: both this thread's workspace, valid until its next call."""
    v, square, values = _workspace(x.size)
    np.copyto(v, x)
    np.multiply(v, v, out=square)  # exact: a FLOAT32's square fits a double
    values = _core(v, square, values)  # a NaN's is its own (every operation keeps the widened input's NaN)
    (outside,) = np.nonzero(square > _CORE_BOUND)  # |x| > 1.5 and the infinities
    if outside.size:
        values[outside] = _outside_core(v[outside])
    return values, square


def _workspace(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three float64 arrays of `size` elements, this thread's own, kept between calls: fresh arrays of a block's size
    would cost page faults on every call (the C library gives the memory freed at its heap's top back to the system):
    8% of a call for 8192 values."""
    arrays = getattr(_scratch, "arrays", None)
    if arrays is None or arrays[0].size != size:
        space = getattr(_scratch, "space", None)
        if space is None or space.shape[1] < size:
            space = _scratch.space = np.empty((3, size))
        arrays = _scratch.arrays = (space[0, :size], space[1, :size], space[2, :size])
    return arrays


_scratch = threading.local()


def _core(v: np.ndarray, square: np.ndarray, values: np.ndarray) -> np.ndarray:
    """x (1/2 + x S(x^2)) into `values`, S by Horner's rule in place."""
    np.multiply(square, _CORE_CONSTANTS[-1], out=values)
    for coefficient in _CORE_CONSTANTS[-2:0:-1]:
        np.add(values, coefficient, out=values)
        np.multiply(values, square, out=values)
    np.add(values, _CORE_CONSTANTS[0], out=values)
    np.multiply(values, v, out=values)
    np.add(values, _HALF, out=values)
    np.multiply(values, v, out=values)  # x * (...): a zero keeps its sign
    return values


# The constants as 0-d arrays: NumPy would convert a Python float at each of the 23 calls (3% of the kernel's time).
_CORE_CONSTANTS = tuple(np.array(coefficient) for coefficient in _CORE_COEFFICIENTS)
_HALF = np.array(0.5)


def _outside_core(v: np.ndarray) -> np.ndarray:
    """The reference's products 0.5*x*erfc(t) past the polynomial (|x| > 1.5 and the infinities) with C's erfc, or
    with Cody's within _ERFC_APART of it (C's erfc again near a rounding boundary, the reference's bits for x < 0).
    For x in (1.5, 5.66) the reference sums erf's series instead: C's erfc(t) = 2 - erfc(|t|) is within _APART."""
    t = v * -_SQRT1_2  # -(v * 1/sqrt2), the reference's t
    half = 0.5 * v
    if v.size < _ELEMENT_BY_ELEMENT_BELOW:
        each = t.tolist()
        values = half * np.fromiter(map(math.erfc, each), np.float64, len(each))
        usual = min(each) > -_ERF_SATURATES and max(each) < math.inf  # (Python's min and max: no NaN reaches here)
    else:
        erfc = _erfc_cody(np.abs(t))
        values = half * np.where(t >= 0.0, erfc, 2.0 - erfc)
        redo = np.flatnonzero(_near_a_rounding_boundary(values, np.float32))
        if redo.size:
            values[redo] = half[redo] * _erfc_libm(t[redo])
        usual = np.min(t) > -_ERF_SATURATES and np.max(t) < np.inf
    if usual:
        return values
    saturated = np.flatnonzero(t <= -_ERF_SATURATES)  # erfc taken as 2 there: x itself
    values[saturated] = half[saturated] * 2.0
    return _special_values(v, values)


def _near_a_float32_boundary(values: np.ndarray, spare: np.ndarray) -> np.ndarray:
    """Positions of the float64 values whose neighbourhood of relative size _APART may hold a FLOAT32 rounding
    boundary; `spare`, a float64 array of their size, is overwritten. A double rounds to a (normal) FLOAT32 by its
    low 29 mantissa bits, the boundary being a midpoint (those bits 2^28): the value lies within _APART of one only
    where they lie within _APART * 2^53 of 2^28 (its ULP is at least 2^-53 of it). Valid where the FLOAT32 result is
    normal, as it is for every value approximated."""
    shift, width = _midpoint_window(_APART)
    low = np.add(values.view(np.uint64), shift, out=spare.view(np.uint64))
    low &= _LOW_BITS  # the window moved to [0, width] (modulo 2^29)
    if low.size == 0 or low.min() > width:
        return np.zeros(0, np.intp)
    return np.flatnonzero(low <= width)


@functools.lru_cache(maxsize=None)
def _midpoint_window(apart: float) -> tuple[np.uint64, np.uint64]:
    """For _near_a_float32_boundary: what to add to a double's bits to move the window of low bits within
    apart * 2^53 of 2^28 to [0, width], and the width."""
    window = int(apart * 2.0**53)
    return np.uint64((window - (1 << 28)) % (1 << 64)), np.uint64(2 * window)


def _reference_at(flat: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The reference's float64 values at some positions of a flat FLOAT32 tensor: the series' degrees are the
    whole tensor's, worked out only where some position needs them."""
    v = flat[positions].astype(np.float64)
    t = -v * _SQRT1_2
    if np.any((t > -_ERF_SATURATES) & (t < _ERFC_BY_ERF)):
        degrees = _series_degrees(_top_factor_float32(flat))
    else:
        degrees = (0, 0)  # unused
    return _reference(v, degrees)


def _top_factor_float32(flat: np.ndarray) -> float:
    """_top_factor of a flat FLOAT32 tensor without widening it. -4 < t < 0.5 holds for the x of an interval of
    FLOAT32 values (t falls as x grows) and 2t^2 grows with |t|: the largest is at the tensor's greatest x where that
    lies in the interval at or past |its lower end| (every x of the interval below 0 is nearer 0): one pass. Else
    (a tensor of negative values, x >= 5.66 or NaN) at the least or greatest element in the interval."""
    above, below = _series_interval_float32()
    greatest = flat.max()
    if -above <= greatest < below:
        ends = np.array([greatest])
    else:
        inside = flat[(flat > above) & (flat < below)]
        if inside.size == 0:
            return 0.0
        ends = np.array([inside.min(), inside.max()])
    return float(np.max(_series_factor(-ends.astype(np.float64) * _SQRT1_2)))


@functools.lru_cache(maxsize=None)
def _series_interval_float32() -> tuple[np.float32, np.float32]:
    """The FLOAT32 values x just outside -4 < t < 0.5 (t = -x * _SQRT1_2 in double): the series takes x exactly
    where above < x < below."""
    def t_of(x: np.float32) -> float:
        return float(-np.float64(x) * _SQRT1_2)

    above = np.float32(-_ERFC_BY_ERF / _SQRT1_2)
    while t_of(above) < _ERFC_BY_ERF:  # step down to the first x whose t is at least 0.5
        above = np.nextafter(above, np.float32(-np.inf))
    while t_of(np.nextafter(above, np.float32(0))) >= _ERFC_BY_ERF:
        above = np.nextafter(above, np.float32(0))
    below = np.float32(_ERF_SATURATES / _SQRT1_2)
    while t_of(below) > -_ERF_SATURATES:  # step up to the first x whose t is at most -4
        below = np.nextafter(below, np.float32(np.inf))
    while t_of(np.nextafter(below, np.float32(0))) <= -_ERF_SATURATES:
        below = np.nextafter(below, np.float32(0))
    return above, below


# ---------------------------------------------------------------- the kernel

def gelu(inputs, out_dtype, params):
    (x,) = inputs
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype)
    if x.dtype == np.float16 and out_dtype == np.float16:
        return np.take(_float16_table(), x.view(np.uint16), mode="clip")  # (every index is in range)
    with np.errstate(all="ignore"):
        if x.dtype == np.float32 and out_dtype == np.float32:
            return _float32(x)
        return _reference_rounded(x, out_dtype)
