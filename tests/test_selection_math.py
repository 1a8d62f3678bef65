"""The indicators of 003's client selection (gossipsim.particles.selection) against a brute-force
double sum of Theorem 1's Stein kernel, and the selection distribution's rules."""

from __future__ import annotations

import numpy as np
import pytest

from gossipsim.particles.selection import (
    inner_products,
    inner_products_with_average,
    selection_distribution,
    stein_discrepancies,
)
from gossipsim.particles.stein import kernel_stein_discrepancy


def _stein_kernel(x, y, s1, s2, h):
    """h_{p1,p2}(x, y) of Theorem 1 of 003, term by term, for κ = exp(−‖x − y‖²/h)."""
    d = x.size
    k = np.exp(-np.sum((x - y) ** 2) / h)
    grad_y = 2.0 / h * (x - y) * k  # ∇_y κ
    grad_x = -grad_y
    trace = k * (2.0 * d / h - 4.0 * np.sum((x - y) ** 2) / h**2)
    return s1 @ s2 * k + s1 @ grad_y + grad_x @ s2 + trace


def _brute(particles, left, right, h):
    n = len(particles)
    return (
        sum(
            _stein_kernel(particles[i], particles[j], left[i], right[j], h)
            for i in range(n)
            for j in range(n)
        )
        / n**2
    )


@pytest.fixture
def case():
    rng = np.random.default_rng(3)
    return rng.normal(size=(6, 3)), rng.normal(size=(4, 6, 3)), 1.3


def test_inner_products_are_the_double_sum_of_theorem_1(case):
    particles, scores, h = case
    target = np.random.default_rng(4).normal(size=particles.shape)
    expected = [_brute(particles, s, target, h) for s in scores]
    np.testing.assert_allclose(inner_products(particles, scores, target, h), expected, rtol=1e-12)
    average = scores.mean(axis=0)
    expected = [_brute(particles, s, average, h) for s in scores]
    np.testing.assert_allclose(inner_products_with_average(particles, scores, h), expected,
                               rtol=1e-12)  # fmt: skip


def test_stein_discrepancies_are_each_clients_own_inner_product(case):
    particles, scores, h = case
    expected = [_brute(particles, s, s, h) for s in scores]
    got = stein_discrepancies(particles, scores, h)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    batch = kernel_stein_discrepancy(np.broadcast_to(particles, scores.shape), scores, h)
    np.testing.assert_allclose(got, batch, rtol=1e-12)


def test_the_hip_indicators_add_up_to_k_times_the_averages_ksd(case):
    """Lemma 3: Σ_k ⟨φ_k, φ'⟩ = K⟨φ', φ'⟩ = K·S(q, p') ≥ 0."""
    particles, scores, h = case
    hip = inner_products_with_average(particles, scores, h)
    average = scores.mean(axis=0)[None]
    assert hip.sum() == pytest.approx(len(scores) * stein_discrepancies(particles, average, h)[0])


def test_the_selection_distribution_drops_non_positive_indicators():
    chosen = selection_distribution(np.array([1.0, -1.0, 3.0, 0.0]))
    np.testing.assert_array_equal(chosen.probabilities, [0.25, 0.0, 0.75, 0.0])
    assert not chosen.fallback
    assert chosen.entropy == pytest.approx(-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)))
    floored = selection_distribution(np.array([1.0, -1.0, 3.0, 0.0]), floor=0.2)
    np.testing.assert_allclose(floored.probabilities, [0.25, 0.05, 0.65, 0.05])


@pytest.mark.parametrize(
    "values", [[0.0, 0.0, 0.0], [-1.0, -2.0, 0.0], [1.0, np.nan, 2.0], [1.0, np.inf, 2.0]]
)
def test_no_distribution_from_the_indicators_falls_back_to_uniform(values):
    chosen = selection_distribution(np.array(values))
    assert chosen.fallback
    np.testing.assert_array_equal(chosen.probabilities, [1 / 3] * 3)
    assert chosen.entropy == pytest.approx(np.log(3))
