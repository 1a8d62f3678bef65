"""Correctly rounded sums of natural parameters: states that depend on the set of factors they
hold, not on the order in which the factors came and went (eqs. 13-14 and 21 of the core paper).

A conjugate G-FVL posterior holding the factors of a set S of nodes is η₀ + Σ_{k∈S} s_k. Summed in
floating point in the order the walk brings the factors, that state depends on the order, and a
factor added and removed again need not cancel: (η₀ + s) − s ≠ η₀ when s dwarfs η₀ (catastrophic
cancellation: a temperature of 1e-100 multiplies the counts by 1e100, and the prior's digits are
lost). Two states holding the same factors can then differ in their last bits, and a KL between
members with large parameters (a log-partition of 1e19, say) turns those bits into a divergence of
thousands: a run that has every node's factor does not end at KL 0.

The functions here return, for every partial sum, the float64 nearest to the *exact* sum (ties to
even): a function of the multiset of values summed alone. A run holding every factor is then, bit for
bit, the target computed the same way, and a factor added and removed leaves the state exactly as
it was.

Where float64 addition is exact already (every partial sum representable: the values are multiples
of a common power of two 2^q per statistic and their absolute sum is below 2^53·2^q, as counts with a
prior of whole or half numbers are), NumPy's own sum *is* that exact value and is returned (the
same bits as ever, at NumPy's speed); otherwise the values are summed as Python integers (multiples
of 2^q, exactly) and each partial sum is rounded once.
"""

from __future__ import annotations

import math

import numpy as np

_MANTISSA_BITS = 53
_NO_BITS = np.iinfo(np.int64).max  # the lowest-bit exponent of 0 (it has none)


def _split(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite ``values`` as odd integers times powers of two: ``values = odd · 2**exponent``
    exactly (``odd`` 0 and ``exponent`` :data:`_NO_BITS` for zeros)."""
    fraction, exponent = np.frexp(values)
    whole = (fraction * 2.0**_MANTISSA_BITS).astype(np.int64)  # exact: |fraction| in [0.5, 1)
    lowest = np.abs(whole & -whole)  # the lowest set bit (0 for zero)
    zeros = np.frexp(lowest.astype(float))[1].astype(np.int64) - 1  # its position
    odd = np.where(whole != 0, whole >> np.maximum(zeros, 0), 0)
    shift = exponent.astype(np.int64) - _MANTISSA_BITS + zeros
    return odd, np.where(whole != 0, shift, _NO_BITS)


def sums_are_exact(values: np.ndarray, axis: int) -> bool:
    """Whether every sum of entries of ``values`` along ``axis`` (any of them, with any signs, in
    any order: each statistic, the last axis, on its own) is exactly a float64, so that float64
    addition of them never rounds.

    True when, per statistic j, all values are multiples of 2^q_j (q_j: the lowest set bit of any
    of them) and the absolute sum along ``axis`` is below 2^(53 + q_j): every partial sum is then a
    multiple of 2^q_j below 2^53·2^q_j, which float64 holds exactly. A sufficient condition only
    (False may still be exact), and False for any value that is not finite."""
    v = np.asarray(values, dtype=float)
    if v.ndim < 2 or axis % v.ndim == v.ndim - 1:
        raise ValueError("the statistics are the last axis: sum along another one")
    if v.size == 0:
        return True
    if not np.all(np.isfinite(v)):
        return False
    _, shift = _split(v)
    dim = v.shape[-1]
    lowest = shift.reshape(-1, dim).min(axis=0)
    length = v.shape[axis]
    with np.errstate(over="ignore"):
        total = np.abs(v).sum(axis=axis)
        # an upper bound of the exact absolute sum (NumPy's sum of n terms errs by < n·2^-53)
        bound = total.reshape(-1, dim).max(axis=0) * (1.0 + length * 2.0**-52)
    if not np.all(np.isfinite(bound)):
        return False
    top = np.frexp(bound)[1].astype(np.int64)  # bound < 2**top
    ok = (bound == 0) | (lowest == _NO_BITS) | (top <= _MANTISSA_BITS + lowest)
    return bool(np.all(ok))


def as_integers(v: np.ndarray) -> tuple[np.ndarray, int]:
    """``v`` (finite) as Python integers N and one exponent q with ``v = N · 2**q`` exactly."""
    odd, shift = _split(v)
    present = shift != _NO_BITS
    q = int(shift[present].min()) if present.any() else 0
    steps = np.where(present, shift - q, 0).astype(object)
    return np.left_shift(odd.astype(object), steps), q


def _rounded(n: int, q: int) -> float:
    """The float64 nearest to n·2^q (ties to even; ±inf beyond float64's range): CPython's int to
    float conversion and its int / int division are both correctly rounded."""
    try:
        return float(n << q) if q >= 0 else n / (1 << -q)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _to_floats(integers: np.ndarray, q: int) -> np.ndarray:
    """Each n·2^q correctly rounded (:func:`_rounded`), all at once where none overflows."""
    try:
        if q >= 0:
            return np.asarray(np.left_shift(integers, q), dtype=float)
        return np.asarray(np.true_divide(integers, 1 << -q), dtype=float)
    except OverflowError:  # some beyond float64's range: ±inf, one by one
        rounded = np.frompyfunc(lambda n: _rounded(n, q), 1, 1)(integers)
        return np.asarray(rounded, dtype=float).reshape(integers.shape)


def running_sums(values: np.ndarray, axis: int) -> np.ndarray:
    """``np.cumsum(values, axis)`` with every partial sum correctly rounded: entry i along ``axis``
    is the float64 nearest to the exact sum of entries 0..i. The same bits as ``np.cumsum`` where
    float64 addition is exact (:func:`sums_are_exact`); otherwise summed as integers. Values
    that are not finite are summed by NumPy (IEEE rules: the states are then not finite either)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or sums_are_exact(v, axis) or not np.all(np.isfinite(v)):
        return np.cumsum(v, axis=axis)
    integers, q = as_integers(v)
    return _to_floats(np.cumsum(integers, axis=axis), q)


def exact_sum(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """``values.sum(axis)`` correctly rounded: the float64 nearest to the exact sum, whatever the
    order of the entries (NumPy's own sum where that is exact already, :func:`sums_are_exact`)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or sums_are_exact(v, axis) or not np.all(np.isfinite(v)):
        return v.sum(axis=axis)
    integers, q = as_integers(v)
    return _to_floats(np.sum(integers, axis=axis), q)


def sum_bounds(start: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The least and the greatest value, per statistic, of ``start`` plus the steps (rows) of any
    subset, each correctly rounded: ``start`` plus every negative (positive) entry of a column.
    Every state a run can hold lies between them; an infinite bound is a state float64 cannot
    hold."""
    rows = np.asarray(steps, dtype=float).reshape(-1, np.size(start))
    first = np.asarray(start, dtype=float)[None, :]
    low = exact_sum(np.concatenate([first, np.minimum(rows, 0.0)]), axis=0)
    high = exact_sum(np.concatenate([first, np.maximum(rows, 0.0)]), axis=0)
    return low, high
