"""Whether strided tensors share memory, decided by arithmetic on their Sizes and Strides, never by listing elements.

A tensor of Sizes n and Strides s (in elements) touches the element offsets sum(x_i * s_i), 0 <= x_i < n_i.
Whether two of its elements share an address, or two tensors share a byte, is whether a linear equation
sum(c_k * z_k) = target has an integer solution with each z_k in a range: a bounded knapsack problem (NumPy's
np.shares_memory solves the same problem by a depth-first search, which takes minutes for some strides).

It is solved here by meeting in the middle: the term with the widest range is eliminated arithmetically (for
each value the other terms sum to, the solutions for it form one residue class in one interval), and the other
terms are split into two halves whose sums are listed, sorted and matched by binary search. The work is about the
square root of the number of combinations of the other terms, at most WORK_LIMIT values a half (a tensor of at
most 2^32 elements with up to 8 dimensions stays far below it); past that the answer is None ("not decided"),
which callers treat as a possible overlap. Listing a 60-million-element tensor's offsets took 75 s and 3.6 GB;
this takes milliseconds.
"""

from __future__ import annotations

import math

import numpy as np

# The most sums one half may list (16 MiB of int64, sorted in well under a second).
WORK_LIMIT = 1 << 21
# Offsets and sums are int64: problems whose values could exceed this are not decided (None). No buffer that
# fits in memory comes near it.
_VALUE_LIMIT = 1 << 61

# (coefficient, lowest, highest): an integer variable z in [lowest, highest], times the coefficient.
Term = tuple[int, int, int]


def overlaps_itself(sizes, strides) -> bool | None:
    """Whether two elements of the tensor (Sizes, Strides in elements) share an address; None if not decided."""
    dims = [(int(stride), int(size)) for size, stride in zip(sizes, strides) if int(size) > 1]
    if any(int(size) == 0 for size in sizes) or not dims:
        return False
    strides_used = [stride for stride, _ in dims]
    if 0 in strides_used or len(set(strides_used)) < len(strides_used):
        return True  # a zero stride repeats elements; two dimensions of one stride swap into each other
    reach = 0
    for stride, size in sorted(dims):
        if stride <= reach:
            break
        reach += (size - 1) * stride
    else:
        return False  # each dimension steps past all the smaller ones reach (packed, padded, transposed)
    extent = sum((size - 1) * stride for stride, size in dims)
    if math.prod(size for _, size in dims) > extent + 1:
        return True  # more elements than addresses
    # Two index vectors x != y with sum((x_i - y_i) * s_i) = 0: a nonzero d, |d_i| < n_i, with sum(d_i * s_i) = 0.
    count = count_solutions([(stride, -(size - 1), size - 1) for stride, size in dims], 0)
    return None if count is None else count > 1  # d = 0 is always one


def views_overlap(first: tuple[int, tuple, tuple, int], second: tuple[int, tuple, tuple, int]) -> bool | None:
    """Whether two strided views of one buffer share a bit; None if not decided.

    Each view is (offset in bits, Sizes, Strides in elements, element size in bits).
    """
    terms: list[Term] = []
    spans = []
    for sign, (offset, sizes, strides, bits) in ((1, first), (-1, second)):
        if any(int(size) == 0 for size in sizes):
            return False
        last = 0
        for size, stride in zip(sizes, strides):
            size, stride = int(size), int(stride)
            last += (size - 1) * stride
            if size > 1 and stride:  # the second view's terms are subtracted: their ranges negated
                terms.append((stride * bits, 0, size - 1) if sign > 0 else (stride * bits, -(size - 1), 0))
        spans.append((offset, offset + last * bits + bits - 1))
    (first_low, first_high), (second_low, second_high) = spans
    if first_high < second_low or second_high < first_low:
        return False
    # first's offset + X + e = second's offset + Y + f, e and f the bits within each element.
    terms.append((1, -(second[3] - 1), first[3] - 1))
    if max(first_high, second_high) >= _VALUE_LIMIT:
        return None
    count = count_solutions(_merged(terms), second[0] - first[0])
    return None if count is None else count > 0


def _merged(terms: list[Term]) -> list[Term]:
    """Terms of one coefficient as one (their ranges add up): the same solutions exist, fewer to search."""
    by_coefficient: dict[int, list[int]] = {}
    for coefficient, lowest, highest in terms:
        if coefficient < 0:
            coefficient, lowest, highest = -coefficient, -highest, -lowest
        ranges = by_coefficient.setdefault(coefficient, [0, 0])
        ranges[0] += lowest
        ranges[1] += highest
    return [(coefficient, lowest, highest) for coefficient, (lowest, highest) in by_coefficient.items()]


def count_solutions(terms: list[Term], target: int) -> int | None:
    """How many integer vectors z, lowest_k <= z_k <= highest_k, give sum(coefficient_k * z_k) = target; None
    where that would take more than WORK_LIMIT values a half. Coefficients must be positive."""
    terms = [term for term in terms if term[1] != term[2] or term[1] != 0]
    if not terms:
        return int(target == 0)
    if sum(abs(c) * max(abs(low), abs(high)) for c, low, high in terms) + abs(target) >= _VALUE_LIMIT:
        return None
    widest = max(range(len(terms)), key=lambda k: terms[k][2] - terms[k][1])
    coefficient, lowest, highest = terms[widest]
    halves: tuple[list[Term], list[Term]] = ([], [])
    sizes = [1, 1]
    for term in sorted(terms[:widest] + terms[widest + 1:], key=lambda t: t[2] - t[1], reverse=True):
        side = 0 if sizes[0] <= sizes[1] else 1
        halves[side].append(term)
        sizes[side] *= term[2] - term[1] + 1
    if max(sizes) > WORK_LIMIT:
        return None
    left_values, left_counts = np.unique(_sums(halves[0]), return_counts=True)
    right_values, right_counts = np.unique(_sums(halves[1]), return_counts=True)
    # x + y + coefficient * z = target: x = t - coefficient * z with t = target - y, so x lies in t's residue
    # class modulo the coefficient, with quotient in [quotient(t) - highest, quotient(t) - lowest].
    left_residues = left_values % coefficient
    left_quotients = (left_values - left_residues) // coefficient
    low_quotient, high_quotient = int(left_quotients.min()), int(left_quotients.max())
    width = high_quotient - low_quotient + 1
    keys = left_residues * width + (left_quotients - low_quotient)
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    cumulative = np.concatenate(([0], np.cumsum(left_counts[order])))
    wanted = target - right_values
    residues = wanted % coefficient
    quotients = (wanted - residues) // coefficient
    first = np.maximum(quotients - highest, low_quotient)
    last = np.minimum(quotients - lowest, high_quotient)
    present = first <= last
    start = np.searchsorted(keys, residues * width + (first - low_quotient), side="left")
    stop = np.searchsorted(keys, residues * width + (last - low_quotient), side="right")
    matches = np.where(present, cumulative[stop] - cumulative[start], 0)
    return int(np.sum(matches * right_counts))


def _sums(terms: list[Term]) -> np.ndarray:
    """Every value sum(coefficient_k * z_k) over the terms' ranges (with repeats), as int64."""
    sums = np.zeros(1, dtype=np.int64)
    for coefficient, lowest, highest in terms:
        steps = np.arange(lowest, highest + 1, dtype=np.int64) * coefficient
        sums = (sums[:, None] + steps[None, :]).reshape(-1)
    return sums
