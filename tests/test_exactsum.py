"""Correctly rounded sums (gossipsim.families.exactsum) against exact rational arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from gossipsim.families.exactsum import exact_sum, running_sums, sum_bounds, sums_are_exact


def _reference_running(values: np.ndarray) -> np.ndarray:
    """Partial sums along the first axis in exact rationals, each rounded once to float64
    (``float(Fraction)`` is correctly rounded: an integer division of its numerator by its
    denominator)."""
    out = np.empty(values.shape)
    totals = [Fraction(0)] * values.shape[1]
    for i, row in enumerate(values):
        totals = [t + Fraction(float(x)) for t, x in zip(totals, row, strict=True)]
        out[i] = [float(t) for t in totals]
    return out


def _values(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Rows of two statistics spread over float64's exponents, with signs, zeros and whole numbers."""
    v = rng.normal(size=(rows, 2)) * 10.0 ** rng.integers(-300, 300, size=(rows, 2))
    v[rng.random(v.shape) < 0.1] = 0.0
    whole = rng.random(rows) < 0.3
    v[whole] = np.round(rng.normal(size=(whole.sum(), 2)) * 1e3)
    return v


def test_running_sums_are_the_correctly_rounded_exact_partial_sums():
    rng = np.random.default_rng(2026)
    for _ in range(200):
        v = _values(rng, int(rng.integers(1, 25)))
        assert np.array_equal(running_sums(v, axis=0), _reference_running(v))


def test_a_batch_of_traces_is_summed_along_its_axis():
    rng = np.random.default_rng(7)
    batch = np.stack([_values(rng, 9) for _ in range(5)])  # runs × records × statistics
    got = running_sums(batch, axis=1)
    for b in range(5):
        assert np.array_equal(got[b], _reference_running(batch[b]))
    assert np.array_equal(exact_sum(batch[2], axis=0), _reference_running(batch[2])[-1])


def test_the_sum_does_not_depend_on_the_order_and_a_factor_removed_leaves_no_trace():
    """(η₀ + s) − s = η₀ and every order of the same factors gives the same bits: the cancellation
    a temperature of 1e-100 makes in float64's own sums (their cumulative sum loses the prior)."""
    prior = np.array([1.0, 1.0])
    factors = np.array([[3e101, 1e101], [7e101, 9e100], [2e100, 4e101]]) / 3.0
    steps = np.vstack([prior, factors[0], factors[1], -factors[0]])
    assert not np.array_equal(np.cumsum(steps, axis=0)[-1], prior + factors[1])  # float64's
    assert np.array_equal(
        running_sums(steps, axis=0)[-1], exact_sum(np.vstack([prior, factors[1]]))
    )
    back = running_sums(np.vstack([prior, factors[2], -factors[2]]), axis=0)
    assert np.array_equal(back[-1], prior)
    rng = np.random.default_rng(3)
    total = exact_sum(np.vstack([prior, factors]))
    for _ in range(6):
        order = rng.permutation(3)
        assert np.array_equal(running_sums(np.vstack([prior, factors[order]]), 0)[-1], total)


def test_where_float64_is_exact_already_the_bits_are_numpys():
    """Counts with a prior of whole or half numbers: every partial sum is representable, the check
    says so, and the result is np.cumsum's (the tables of such scenarios keep their bits)."""
    rng = np.random.default_rng(11)
    v = np.vstack([[0.5, -1.5], rng.integers(0, 10**6, size=(50, 2)).astype(float)])
    assert sums_are_exact(v, axis=0)
    assert np.array_equal(running_sums(v, axis=0), np.cumsum(v, axis=0))
    # units summing below 2^53 are; a sum of 2^53 + 1 units is not (float64 cannot hold it)
    assert sums_are_exact(np.array([[2.0**51, 1.0], [2.0**51 - 1, 1.0]]), axis=0)
    assert not sums_are_exact(np.array([[2.0**53, 1.0], [1.0, 1.0]]), axis=0)
    assert sums_are_exact(np.array([[2.0**60, 1.0], [2.0**60, 1.0]]), axis=0)  # units of 2^60
    assert not sums_are_exact(np.array([[0.1, 1.0], [0.2, 1.0]]), axis=0)
    assert not sums_are_exact(np.array([[np.inf, 1.0]]), axis=0)


def test_sums_beyond_float64_round_to_infinity_and_the_bounds_say_so():
    big = np.finfo(float).max
    v = np.array([[big, -big], [big, -big], [-big, big]])
    assert np.array_equal(running_sums(v, axis=0)[:, 0], [big, np.inf, big])
    assert np.array_equal(exact_sum(v, axis=0), [big, -big])
    low, high = sum_bounds(np.array([1.0, 0.0]), v)
    assert np.array_equal(low, [-big + 1.0, -np.inf]) and np.array_equal(high, [np.inf, big])
    low, high = sum_bounds(np.array([1.0, -2.0]), np.array([[3.0, 4.0], [-5.0, 0.5]]))
    assert np.array_equal(low, [-4.0, -2.0]) and np.array_equal(high, [4.0, 2.5])


@pytest.mark.parametrize("value", [5e-324, -5e-324, 2.2250738585072014e-308, 1e-310])
def test_subnormal_sums_are_rounded_once(value):
    v = np.array([[value, 1.0], [value / 3, 0.1], [-value, 0.2]])
    assert np.array_equal(running_sums(v, axis=0), _reference_running(v))
