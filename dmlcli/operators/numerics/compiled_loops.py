"""Compiled CPU loops (Numba) for the rules NumPy cannot run in one pass: CLIP's and THRESHOLD's clamp with
DirectML's NaN and signed-zero rule, RELU's (-0.0 gives +0.0, a NaN its own bits), SIGN (a zero keeps its sign, a
NaN its bits), CAST's float-to-integer (Direct3D's: toward zero, saturating, NaN to 0) and FLOAT32/FLOAT64
conversions (a NaN becomes the quiet NaN of its sign); GELU's FLOAT32 formula (its polynomial, C's erfc past it,
the rounding and the check for rounding boundaries), which NumPy runs as about 30 passes over float64 arrays;
MEAN_VARIANCE_NORMALIZATION over the last axis, which NumPy runs as about nine; and MAX_POOLING by a CNN's 3 x 3 or
2 x 2 window, which NumPy runs as a pass a tap and two more for the sign of zero maxima.

NumPy's kernels give the same bits with a pass and a check: np.clip keeps NaN, so its result is searched for NaN;
np.sign gives -0.0 the bits of +0.0, so its result is searched for zeros; astype wraps or marks values past the
range, so each block's range is read. The check costs 0.1 to 1.2 times the pass (issues 21, 23 and 33: CLIP
1.5-1.8x np.clip, SIGN 1.3x np.sign, CAST float32 -> uint8 about 2x astype); a compiled loop applies the rule as it
goes, in one pass at np.clip's and astype's own speed, and SIGN's in less time than np.sign's own loop, which runs
element by element with branches (bench/cpu_ops_bench.py and bench/generation_cpu_bench.py time the kernels with
--compiled-loops). MAX and MIN keep NumPy's path: np.fmax's pass and a zero check measured as fast as a compiled
loop (both bound by memory at 16 MiB).

Opt-in, with the `compiled` extra installed (pip install 'dmlcli[compiled]'): DMLCLI_COMPILED_LOOPS=1 in the
environment (read once per process). Off by default because importing Numba and loading its machine code
(compiled once per signature, then kept in Numba's cache) costs 0.3-0.5 s in each new process: more than a
whole one-shot command-line run of most tensors. A program that runs many large calls gains.

Every loop gives the NumPy kernels' bits: tests/test_compiled_loops.py holds them to it over random values and
every special value (NaN of each sign and payload, zeros of both signs, infinities, subnormals, range edges).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import warnings
from typing import Callable

import numpy as np

from ...errors import raise_interruption
from .float_specials import has_nan

ENVIRONMENT_VARIABLE = "DMLCLI_COMPILED_LOOPS"
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")

# MEAN_VARIANCE_NORMALIZATION's loop takes rows up to this long: the counts a FLOAT32 holds exactly (past them
# _normalise's mean divides by an intp). Its pairwise program then keeps at most 18 sums on its stack (of 64).
MVN_LONGEST_ROW = 1 << 24
# GELU's loop takes this many values a call: their doubles (512 KiB) stay in the processor's second-level cache.
GELU_BLOCK = 1 << 16

# The loops' input types: FLOAT16 has no arithmetic in Numba (the NumPy kernels widen it first, exactly).
FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))

# "loops": the loops in use, None where they are off (decided at the first call); "built": the loops once built.
_state: dict[str, object] = {}


def active() -> "CompiledLoops | None":
    """The compiled loops, where DMLCLI_COMPILED_LOOPS turns them on and Numba is installed; else None.
    Decided once per process (use() changes it, for tests and benchmarks)."""
    try:
        return _state["loops"]  # type: ignore[return-value]
    except KeyError:
        _state["loops"] = _from_environment()
        return _state["loops"]  # type: ignore[return-value]


def use(on: bool) -> "CompiledLoops | None":
    """Turn the compiled loops on or off for this process, whatever the environment says; returns them (None:
    off, or Numba missing)."""
    _state["loops"] = _load() if on else None
    return _state["loops"]  # type: ignore[return-value]


def state() -> dict:
    """What `dmlcli info` shows: {"on": bool, "numba": its version or None, "reason": why off (where off)}."""
    from ...versions import installed_version

    numba_version = installed_version("numba")
    if "loops" in _state:  # decided already (by a call, or by use())
        on = _state["loops"] is not None
    else:
        on = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower() in _ON and numba_version is not None
    if on:
        return {"on": True, "numba": numba_version}
    if numba_version is None:
        reason = "numba is not installed (pip install 'dmlcli[compiled]')"
    else:
        reason = f"set {ENVIRONMENT_VARIABLE}=1 to use them"
    return {"on": False, "numba": numba_version, "reason": reason}


def _from_environment() -> "CompiledLoops | None":
    setting = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower()
    if setting in _OFF:
        return None
    if setting not in _ON:
        _warn(f"{ENVIRONMENT_VARIABLE}={os.environ[ENVIRONMENT_VARIABLE]!r} is not one of 1, true, yes, on, 0, "
              "false, no, off: NumPy's loops are used")
        return None
    loops = _load()
    if loops is None:
        _warn(f"{ENVIRONMENT_VARIABLE} asks for compiled loops but numba is not installed "
              "(pip install 'dmlcli[compiled]'): NumPy's loops are used")
    return loops


def _warn(message: str) -> None:
    from ...errors import DmlcliWarning

    warnings.warn(message, DmlcliWarning, stacklevel=3)


def _load() -> "CompiledLoops | None":
    """The loops, built once per process (each is compiled at its first call), or None without Numba."""
    if "built" not in _state:
        try:
            import numba
        except ImportError as error:
            raise_interruption(error)
            return None
        _state["built"] = CompiledLoops(numba)
    return _state["built"]  # type: ignore[return-value]


# ---------------------------------------------------------------- the loops, as plain Python (Numba compiles them)


def _clamp_loop(values, low, high, low_takes_zero_ties, high_takes_zero_ties, out):
    """out = min(high, max(low, values)) by the NaN rule (max and min give the operand that is not NaN) and the
    zero rule (max(-0.0, +0.0) is +0.0, min is -0.0). `low` < `high`, neither NaN. A tie of equal values can
    only differ in bits for zeros: `low_takes_zero_ties` where low is +0.0 (max's +0.0 wins), `high_takes...`
    where high is -0.0 (min's -0.0 wins)."""
    for i in range(values.size):
        v = values[i]
        above_low = v > low or (v == low and not low_takes_zero_ties)  # False for NaN: low
        w = v if above_low else low
        below_high = w < high or (w == high and not high_takes_zero_ties)
        out[i] = w if below_high else high


def _relu_loop(values, zero, out):
    """out = max(+0.0, values) by RELU's rule: the element itself above zero and where NaN (its bits, signalling and
    payload kept: a copy), +0.0 elsewhere (-0.0 included). One select per element, which Numba runs in SIMD lanes."""
    for i in range(values.size):
        v = values[i]
        out[i] = zero if v <= zero else v


def _mvn_rows_loop(x, n, scale, bias, epsilon, use_mean, normalize_variance, leaves, steps, out, centred):
    """MEAN_VARIANCE_NORMALIZATION over the last axis of x (rows of n FLOAT32 values, C-ordered), with
    normalization/entries.py's _normalise's FLOAT32 operations in its order: each row's sums as NumPy's add.reduce
    makes them, +0.0 plus its pairwise sum (_pairwise_program: blocks of at most 128 values, each the sum of eight
    running sums combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) then the rest in turn, or under 8
    values one by one from -0.0; the blocks' sums added as NumPy's halving adds them), divided by n; x - mean; the
    mean of the squares plus epsilon, its square root; the division, then Scale, then Bias (either of size 0: none).
    Returns False, out unfinished, where x, Scale or Bias holds a NaN (which NaN a sum carries then depends on the
    order NumPy's vector loops take operands in: the caller runs NumPy's kernel instead)."""
    rows = x.size // n
    count = np.float32(n)
    for j in range(scale.size):
        if scale[j] != scale[j]:
            return False
    for j in range(bias.size):
        if bias[j] != bias[j]:
            return False
    stack = np.empty(64, np.float32)

    for r in range(rows):
        base = r * n
        row = out[base:base + n]
        for j in range(n):
            value = x[base + j]
            if value != value:
                return False
            centred[j] = value
        if use_mean:
            mean = _pairwise_row_sum(centred, leaves, steps, stack) / count
            for j in range(n):
                centred[j] = centred[j] - mean
        if normalize_variance:
            for j in range(n):
                row[j] = centred[j] * centred[j]
            deviation = np.sqrt(_pairwise_row_sum(row, leaves, steps, stack) / count + epsilon)
            for j in range(n):
                centred[j] = centred[j] / deviation
        for j in range(n):
            value = centred[j]
            if scale.size:
                value = value * scale[j]
            if bias.size:
                value = value + bias[j]
            row[j] = value
    return True


def _pairwise_row_sum(source, leaves, steps, stack):
    """NumPy's add.reduce of one row of FLOAT32 values (`source`, C-ordered): +0.0 plus the blocks' sums in
    _pairwise_program's order (`leaves`, `steps`), `stack` a scratch of at least 64 values. Compiled into the loops
    that call it (numba.extending.register_jitable, in CompiledLoops)."""
    top = 0
    for step in steps:
        if step < 0:  # the two sums on top added, the earlier block's first
            stack[top - 2] = stack[top - 2] + stack[top - 1]
            top -= 1
            continue
        start, length = leaves[step, 0], leaves[step, 1]
        if length < 8:
            total = np.float32(-0.0)
            for i in range(start, start + length):
                total = total + source[i]
        else:  # eight running sums in locals (an array of them kept Numba's loop out of registers)
            s0, s1, s2, s3 = source[start], source[start + 1], source[start + 2], source[start + 3]
            s4, s5, s6, s7 = source[start + 4], source[start + 5], source[start + 6], source[start + 7]
            i = 8
            while i < length - length % 8:
                at = start + i
                s0, s1 = s0 + source[at], s1 + source[at + 1]
                s2, s3 = s2 + source[at + 2], s3 + source[at + 3]
                s4, s5 = s4 + source[at + 4], s5 + source[at + 5]
                s6, s7 = s6 + source[at + 6], s7 + source[at + 7]
                i += 8
            total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
            while i < length:
                total = total + source[start + i]
                i += 1
        stack[top] = total
        top += 1
    return np.float32(0.0) + stack[0]


def _softmax_shift_loop(x, n, out):
    """The first half of ACTIVATION_SOFTMAX over the last axis (rows of n FLOAT32 values, C-ordered), as
    reduction/entries.py's softmax_kernel computes it: each value minus its row's maximum (NumPy's maximum.reduce:
    the largest value, whatever the order, where no value is a NaN; an infinity's differences are IEEE's, the NaN
    of inf - inf the processor's one default NaN, as NumPy's). Returns False, out unfinished, where a value is a NaN
    (which NaN a row's maximum carries then depends on the order NumPy's vector loops take: the caller runs NumPy's
    kernel instead)."""
    for base in range(0, x.size, n):
        peak = x[base]
        for i in range(base, base + n):
            value = x[i]
            if value != value:
                return False
            if value > peak:
                peak = value
        for i in range(base, base + n):
            out[i] = x[i] - peak
    return True


def _softmax_divide_loop(exponentials, n, leaves, steps):
    """The second half, after NumPy's exp of the first's values: each value divided by its row's sum, NumPy's
    add.reduce of the row (_pairwise_row_sum), in place."""
    stack = np.empty(64, np.float32)
    for base in range(0, exponentials.size, n):
        row = exponentials[base:base + n]
        total = _pairwise_row_sum(row, leaves, steps, stack)
        for i in range(n):
            row[i] = row[i] / total


def _max_pool_windows(x, strides, starts, out, height_taps, width_taps):
    """MAX_POOLING over the last two axes of x ({rows, H, W} C-ordered floats, no NaN) into out ({rows, OH, OW}),
    windows of height_taps x width_taps without dilation: each window's largest element, its taps in row-major
    order, a later tap taken only where it is larger (so of equal zeros the first, as pooling/entries.py's
    window_maxima and _keep_the_first_zero give); a tap in the padding read as nothing (a window of padding alone
    gives NaN, _lowest). Compiled into each caller with its window's sizes as constants (register_jitable,
    inline="always"), so that the taps unroll: with the sizes as arguments the loop took 3.5x as long."""
    height, width = x.shape[1], x.shape[2]
    for row in range(x.shape[0]):
        for oh in range(out.shape[1]):
            top = oh * strides[0] - starts[0]
            rows_inside = top >= 0 and top + height_taps <= height
            for ow in range(out.shape[2]):
                left = ow * strides[1] - starts[1]
                if rows_inside and left >= 0 and left + width_taps <= width:
                    best = x[row, top, left]
                    for kh in range(height_taps):
                        for kw in range(width_taps):
                            value = x[row, top + kh, left + kw]
                            best = value if value > best else best
                else:  # a window over the padding: its taps there left out
                    best = x.dtype.type(np.nan)
                    for kh in range(height_taps):
                        ih = top + kh
                        if 0 <= ih < height:
                            for kw in range(width_taps):
                                iw = left + kw
                                if 0 <= iw < width:
                                    value = x[row, ih, iw]
                                    best = value if (value > best) | (best != best) else best
                out[row, oh, ow] = best


def _max_pool_3x3_loop(x, strides, starts, out):
    _max_pool_windows(x, strides, starts, out, 3, 3)


def _max_pool_2x2_loop(x, strides, starts, out):
    _max_pool_windows(x, strides, starts, out, 2, 2)


@functools.lru_cache(maxsize=64)
def _pairwise_program(n: int) -> tuple[np.ndarray, np.ndarray]:
    """How NumPy's pairwise sum adds n contiguous values, as _mvn_rows_loop runs it: the blocks it sums directly
    ({start, length} rows: n itself up to 128, else NumPy's halves, each cut to a multiple of 8, halved again), and
    the order as a postfix program (an index: push that block's sum; -1: add the top two)."""
    leaves: list[tuple[int, int]] = []
    steps: list[int] = []

    def visit(start: int, length: int) -> None:
        if length <= 128:
            steps.append(len(leaves))
            leaves.append((start, length))
            return
        half = length // 2
        half -= half % 8
        visit(start, half)
        visit(start + half, length - half)
        steps.append(-1)

    visit(0, n)
    return np.array(leaves, np.int64).reshape(-1, 2), np.array(steps, np.int64)


def _sign_loop(values, zero, one, minus_one, out):
    """SIGN: 1 above zero, -1 below, the element itself otherwise (a zero keeps its sign, a NaN its bits: it is
    copied, never computed with). The constants are of the values' type, so that nothing is widened."""
    for i in range(values.size):
        v = values[i]
        out[i] = one if v > zero else (minus_one if v < zero else v)


def _to_integer_loop(values, low, top, above, zero, largest, out):
    """Direct3D's float-to-integer conversion: toward zero, saturating, NaN to 0. `low` is the type's lowest value,
    `above` the first value past its largest, `top` the largest float below `above` (it truncates into the range),
    all in the values' float type; `largest` the type's largest value."""
    for i in range(values.size):
        v = values[i]
        w = v if v > low else low
        w = w if w < top else top
        w = w if v == v else zero
        whole = out.dtype.type(w)  # in the range: the C conversion truncates, as the rule does
        out[i] = largest if v >= above else whole


def _convert_float_loop(values, signs, positive_nan, negative_nan, out):
    """A float in another float type (rounded to nearest even where narrower, subnormals kept); a NaN becomes the
    target type's quiet NaN of its sign (the quiet NaNs given), whatever its payload. `signs` is `values`
    read as signed integers of its width: negative where the sign bit is set."""
    for i in range(values.size):
        v = values[i]
        nan = negative_nan if signs[i] < 0 else positive_nan
        out[i] = out.dtype.type(v) if v == v else nan


def _gelu_float32_loop(values, coefficients, edge, sqrt1_2, saturates, shift, low_bits, width, doubles, out, near):
    """GELU of FLOAT32 values into the FLOAT32 `out` by elementwise/gelu.py's cheaper formula (its _approximate,
    the rounding and _near_a_float32_boundary), `doubles` a float64 workspace of their size:
    - the polynomial for every value, v (1/2 + v S(v^2)), S by Horner's rule in _core's order of operations (the same
      double roundings: Numba contracts nothing into fused multiply-adds without fastmath); no branch, so in SIMD
      lanes;
    - the values past |x| = `edge` replaced by _outside_core's element-by-element product (0.5 v erfc(t) with C's
      erfc, v where t <= -`saturates`, -0.0 for -inf); a NaN is not past it, its core keeps its payload;
    - each double rounded to FLOAT32, and the positions of those whose low bits lie within `width` of a FLOAT32
      rounding boundary written to `near` (looked for only where the rounding pass found one: about one value in
      2^18). Returns how many positions it wrote (the caller makes those values again by the reference).
    A loop a step: one loop doing all three for each value (its branches kept it out of SIMD lanes) took 64 us for
    the encoder's 8192 values where these take 22."""
    last = len(coefficients) - 1
    for i in range(values.size):
        v = np.float64(values[i])
        square = v * v
        total = square * coefficients[last]
        for j in range(last - 1, 0, -1):
            total = total + coefficients[j]
            total = total * square
        total = total + coefficients[0]
        total = total * v
        total = total + 0.5
        doubles[i] = total * v
    for i in range(values.size):
        if abs(values[i]) > edge:
            v = np.float64(values[i])
            t = v * -sqrt1_2
            half = 0.5 * v
            if v == -np.inf:
                doubles[i] = -0.0
            elif t <= -saturates:
                doubles[i] = half * 2.0
            else:
                doubles[i] = half * math.erfc(t)
    doubles_bits = doubles.view(np.uint64)
    anywhere = False
    for i in range(values.size):
        out[i] = np.float32(doubles[i])
        anywhere |= ((doubles_bits[i] + shift) & low_bits) <= width
    count = 0
    if anywhere:
        for i in range(values.size):
            if ((doubles_bits[i] + shift) & low_bits) <= width:
                near[count] = i
                count += 1
    return count


class CompiledLoops:
    """The loops compiled by Numba (each signature when first called; cached on disk where Numba can write)."""

    def __init__(self, numba):
        self.numba_version = numba.__version__
        numba.extending.register_jitable(_pairwise_row_sum)  # compiled into the loops that call it
        self._clamp = _compiled(numba, _clamp_loop)
        self._sign = _compiled(numba, _sign_loop)
        self._relu = _compiled(numba, _relu_loop)
        self._mvn_rows = _compiled(numba, _mvn_rows_loop, error_model="numpy")
        self._to_integer = _compiled(numba, _to_integer_loop)
        self._convert_float = _compiled(numba, _convert_float_loop)
        self._gelu_float32 = _compiled(numba, _gelu_float32_loop)
        self._softmax_shift = _compiled(numba, _softmax_shift_loop)
        self._softmax_divide = _compiled(numba, _softmax_divide_loop, error_model="numpy")
        numba.extending.register_jitable(inline="always")(_max_pool_windows)  # unrolled into each window's loop
        self._max_pool_by_window = {(3, 3): _compiled(numba, _max_pool_3x3_loop),
                                    (2, 2): _compiled(numba, _max_pool_2x2_loop)}

    def clamp(self, values: np.ndarray, low, high) -> np.ndarray | None:
        """min(high, max(low, values)) by DirectML's NaN and zero rules, for FLOAT32/FLOAT64 values and bounds of
        that type with low < high; None where that does not hold (NaN bounds, low >= high, another type)."""
        if values.dtype not in FLOAT_TYPES:
            return None
        kind = values.dtype.type
        low, high = kind(low), kind(high)
        if not low < high:
            return None
        flat = _flat_input(values)
        out = np.empty(flat.shape, values.dtype)
        self._clamp(flat, low, high, bool(low == 0 and not np.signbit(low)), bool(high == 0 and np.signbit(high)),
                    out)
        return out.reshape(values.shape)

    def sign(self, values: np.ndarray) -> np.ndarray | None:
        """SIGN of FLOAT32/FLOAT64 values by DirectML's rule as dmlcli gives it (arithmetic.sign); None for another
        type."""
        if values.dtype not in FLOAT_TYPES:
            return None
        kind = values.dtype.type
        flat = _flat_input(values)
        out = np.empty(flat.shape, values.dtype)
        self._sign(flat, kind(0), kind(1), kind(-1), out)
        return out.reshape(values.shape)

    def relu(self, values: np.ndarray) -> np.ndarray | None:
        """ACTIVATION_RELU of FLOAT32/FLOAT64 values by activation.relu's rule in one pass (NumPy's path: a clip
        and a search of its result for -0.0, 1.6x np.maximum on 788 Ki FLOAT32 values); None for another type."""
        if values.dtype not in FLOAT_TYPES:
            return None
        flat = _flat_input(values)
        out = np.empty(flat.shape, values.dtype)
        self._relu(flat, values.dtype.type(0), out)
        return out.reshape(values.shape)

    def mvn_rows(self, x: np.ndarray, scale, bias, epsilon: float, use_mean: bool,
                 normalize_variance: bool) -> np.ndarray | None:
        """MEAN_VARIANCE_NORMALIZATION of a FLOAT32 tensor over its last axis (rows of at most MVN_LONGEST_ROW
        values), Scale and Bias FLOAT32 of that axis's size or None: _normalise's bits (normalization/entries.py) in
        one pass a row; None where the loop does not take the call (other types, longer rows, NaN anywhere)."""
        if x.dtype != np.float32 or x.size == 0:
            return None
        rows = self.mvn_rows_of(x.shape[-1] if x.ndim else 0, scale, bias, epsilon, use_mean, normalize_variance)
        return None if rows is None else rows(x)

    def mvn_rows_of(self, n: int, scale, bias, epsilon: float, use_mean: bool, normalize_variance: bool
                    ) -> Callable[[np.ndarray], np.ndarray | None] | None:
        """mvn_rows with Scale, Bias and the fields worked out once (a model's planned call: operators/normalization
        /entries.py's mvn_planned): a function of a non-empty FLOAT32 x whose last axis has n values, None where
        the loop does not take these (n past MVN_LONGEST_ROW, Scale or Bias of another type or size)."""
        if not 0 < n <= MVN_LONGEST_ROW:
            return None
        vectors = []
        for operand in (scale, bias):
            if operand is None:
                vectors.append(np.empty(0, np.float32))
            elif operand.dtype == np.float32 and operand.size == n and operand.shape[-1:] == (n,):
                vectors.append(np.ascontiguousarray(operand).reshape(n))
            else:
                return None
        leaves, steps = _pairwise_program(n)
        loop, scale_vector, bias_vector, epsilon = self._mvn_rows, vectors[0], vectors[1], np.float32(epsilon)

        def rows(x: np.ndarray) -> np.ndarray | None:
            flat = _flat_input(x)
            out = np.empty(flat.shape, np.float32)
            if not loop(flat, n, scale_vector, bias_vector, epsilon, use_mean, normalize_variance, leaves, steps, out,
                        np.empty(n, np.float32)):
                return None
            return out.reshape(x.shape)

        return rows

    def softmax_rows(self, x: np.ndarray) -> np.ndarray | None:
        """ACTIVATION_SOFTMAX of a FLOAT32 tensor over its last axis, softmax_kernel's bits (its maximum, difference,
        NumPy's exp, pairwise sum and division, in that order): two compiled passes around NumPy's exp, where the
        kernel's maximum.reduce and add.reduce take NumPy's inner loop once a row (a {1, 4, 16, 16} call: 18 of its
        30 us). None where the loops do not take the call (another type, a row past MVN_LONGEST_ROW, a NaN)."""
        if x.dtype != np.float32 or x.size == 0:
            return None
        rows = self.softmax_rows_of(x.shape[-1] if x.ndim else 0)
        return None if rows is None else rows(x)

    def softmax_rows_of(self, n: int) -> Callable[[np.ndarray], np.ndarray | None] | None:
        """softmax_rows with the row's summation program worked out once (a model's planned call: operators/
        reduction/entries.py's softmax_planned): a function of a non-empty FLOAT32 x whose last axis has n values
        (None where it finds a NaN), or None where the loops do not take rows of n (past MVN_LONGEST_ROW)."""
        if not 0 < n <= MVN_LONGEST_ROW:
            return None
        leaves, steps = _pairwise_program(n)
        shift, divide, exp = self._softmax_shift, self._softmax_divide, np.exp

        def rows(x: np.ndarray) -> np.ndarray | None:
            flat = _flat_input(x)
            out = np.empty(flat.shape, np.float32)
            if not shift(flat, n, out):
                return None
            exp(out, out=out)
            divide(out, n, leaves, steps)
            return out.reshape(x.shape)

        return rows

    def max_pool_2d(self, x: np.ndarray, geometry: dict, out_shape: tuple[int, ...]) -> np.ndarray | None:
        """MAX_POOLING's maxima of a 4-D FLOAT32/FLOAT64 tensor (two spatial axes; `geometry`: pooling/entries.py's
        window_geometry) by a 3 x 3 or 2 x 2 window without dilation (a CNN's), in one pass and one more for NaN:
        window_maxima's values with _keep_the_first_zero's signs, where NumPy's path takes a pass a tap and two
        more for the zeros (SqueezeNet's 3 x 3, stride 2 window over {1, 64, 111, 111}: 2.2 ms in a model's run).
        None where the loops do not take the call (another rank, type, window or dilation; a NaN anywhere: which
        NaN a window of NaN gives follows NumPy's fmax order)."""
        window, dilations = tuple(geometry["WindowSize"]), tuple(geometry["Dilations"])
        loop = self._max_pool_by_window.get(window) if dilations == (1, 1) else None
        if loop is None or x.ndim != 4 or x.dtype not in FLOAT_TYPES or x.size == 0:
            return None
        rows = np.ascontiguousarray(x).reshape((-1,) + x.shape[2:])
        if has_nan(rows):
            return None
        out = np.empty((rows.shape[0],) + tuple(out_shape[2:]), x.dtype)
        loop(rows, _pair(geometry["Strides"]), _pair(geometry["StartPadding"]), out)
        return out.reshape(out_shape)

    def to_integer(self, values: np.ndarray, dtype: np.dtype, low: float, above: float) -> np.ndarray | None:
        """FLOAT32/FLOAT64 values as the integer type `dtype` by Direct3D's rule (conversions.float_to_integer);
        `low` the type's lowest value, `above` the first value past its largest. None for another input type."""
        if values.dtype not in FLOAT_TYPES:
            return None
        kind = values.dtype.type
        dtype = np.dtype(dtype)
        flat = _flat_input(values)
        out = np.empty(flat.shape, dtype)
        top = np.nextafter(kind(above), kind(0))
        self._to_integer(flat, kind(low), top, kind(above), kind(0), dtype.type(np.iinfo(dtype).max), out)
        return out.reshape(values.shape)

    def convert_float(self, values: np.ndarray, dtype: np.dtype, positive_nan: int, negative_nan: int):
        """FLOAT32 values as FLOAT64 or back (conversions' float_to_float rule); `positive_nan`/`negative_nan`
        the bits of the target type's quiet NaNs. None for another pair of types (FLOAT16: NumPy's loops)."""
        dtype = np.dtype(dtype)
        if values.dtype not in FLOAT_TYPES or dtype not in FLOAT_TYPES or values.dtype == dtype:
            return None
        flat = _flat_input(values)
        out = np.empty(flat.shape, dtype)
        bits = np.dtype(f"uint{dtype.itemsize * 8}")
        nans = np.array([positive_nan, negative_nan], bits).view(dtype)
        self._convert_float(flat, flat.view(f"int{flat.itemsize * 8}"), nans[0], nans[1], out)
        return out.reshape(values.shape)


    def gelu_float32_of(self, coefficients: tuple[float, ...], edge: np.float32, sqrt1_2: float, saturates: float,
                        shift: np.uint64, low_bits: np.uint64, width: np.uint64
                        ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray] | None]:
        """GELU of FLOAT32 values by elementwise/gelu.py's cheaper formula in one compiled call a block of
        GELU_BLOCK values (its _approximate, the rounding and _near_a_float32_boundary: about 30 NumPy passes over
        float64 arrays and their Python calls), as a function of the values alone: the FLOAT32 results, flat, and
        the positions the caller must make again by the reference (their doubles near a rounding boundary: `shift`,
        `low_bits` and `width` are _near_a_float32_boundary's window); None for values not FLOAT32. The constants
        are converted to the loop's types once (gelu.py keeps the function: a {1, 16, 512} call's conversions were
        a tenth of its cost)."""
        constants = (tuple(float(c) for c in coefficients), np.float32(edge), float(sqrt1_2), float(saturates),
                     np.uint64(shift), np.uint64(low_bits), np.uint64(width))
        loop = self._gelu_float32

        def gelu(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
            if values.dtype != np.float32:
                return None
            flat = _flat_input(values)
            out = np.empty(flat.shape, np.float32)
            if flat.size <= GELU_BLOCK:  # one block: its positions are the block's own
                doubles, near = _gelu_workspace(flat.size)
                count = loop(flat, *constants, doubles[:flat.size], out, near)
                return out, near[:count].copy()
            doubles, near = _gelu_workspace(GELU_BLOCK)
            found = []
            for start in range(0, flat.size, GELU_BLOCK):
                stop = min(start + GELU_BLOCK, flat.size)
                count = loop(flat[start:stop], *constants, doubles[:stop - start], out[start:stop], near)
                if count:
                    found.append(near[:count] + start)
            return out, np.concatenate(found) if found else np.zeros(0, np.intp)

        return gelu


def _pair(values) -> tuple[int, int]:
    """A 2-D pooling window's field (its Strides, StartPadding) as the loops take it: two Python ints."""
    return int(values[0]), int(values[1])


def planned_rows(rows: Callable[[np.ndarray], np.ndarray | None] | None, kernel: Callable, outputs, params
                 ) -> Callable[[list], tuple[np.ndarray]] | None:
    """An operator's planned call (Operator.planned_kernel) through a loop's function of the first input, `rows`
    (mvn_rows_of's, softmax_rows_of's: None for values it declines, a NaN), and the operator's array kernel,
    `kernel`, for those: the kernel's bits either way. None where there is no such function."""
    if rows is None:
        return None

    def run(arrays: list) -> tuple[np.ndarray]:
        y = rows(arrays[0])
        return (y,) if y is not None else kernel(np, arrays, outputs, params)

    return run


def _gelu_workspace(size: int) -> tuple[np.ndarray, np.ndarray]:
    """GELU's loop's doubles and near positions for `size` values, this thread's own and kept between calls (as
    gelu.py's _workspace): a block's fresh 512 KiB of doubles would be mapped by the C library and faulted in on every
    call."""
    kept = getattr(_gelu_scratch, "arrays", None)
    if kept is None or kept[0].size < size:
        kept = _gelu_scratch.arrays = (np.empty(size), np.empty(size, np.intp))
    return kept


_gelu_scratch = threading.local()


def _flat_input(values: np.ndarray) -> np.ndarray:
    """An input as the loops read it: one C-ordered row, read-only (one compiled signature per type, whether the
    caller's array was writable or not; a view of np.broadcast_arrays' also warns when its flags are read)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    flat.flags.writeable = False
    return flat


def _compiled(numba, loop, **options):
    """`loop` compiled without the GIL, its machine code cached on disk; without a cache where Numba finds no
    writable place for it (it raises at decoration then). `options` go to numba.njit (error_model="numpy": a
    division by zero gives IEEE's infinity or NaN, not Python's ZeroDivisionError)."""
    try:
        return numba.njit(nogil=True, cache=True, **options)(loop)
    except RuntimeError:
        return numba.njit(nogil=True, **options)(loop)

