"""The kernelized Stein discrepancy (issue 22, item 2) against brute force, quadrature and Monte
Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gossipsim.particles import gaussian_stein_discrepancy, kernel_stein_discrepancy
from gossipsim.particles.kernels import pairwise_squared_distances


def _stein_kernel_by_differences(x, y, sx, sy, h, step=1e-5):
    """u_p(x, y) from its definition, the kernel's derivatives by central differences."""
    d = x.shape[0]

    def k(a, b):
        return math.exp(-float(np.sum((a - b) ** 2)) / h)

    grad_x = np.zeros(d)
    grad_y = np.zeros(d)
    trace = 0.0
    for c in range(d):
        e = np.zeros(d)
        e[c] = step
        grad_x[c] = (k(x + e, y) - k(x - e, y)) / (2 * step)
        grad_y[c] = (k(x, y + e) - k(x, y - e)) / (2 * step)
        trace += (k(x + e, y + e) - k(x + e, y - e) - k(x - e, y + e) + k(x - e, y - e)) / (
            4 * step**2
        )
    return float(sx @ sy) * k(x, y) + sx @ grad_y + grad_x @ sy + trace


def test_v_and_u_statistics_equal_the_pairwise_sum_of_the_stein_kernel() -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(size=(7, 3))
    s = rng.normal(size=(7, 3))
    h = 2.3
    u = np.array(
        [
            [_stein_kernel_by_differences(x[i], x[j], s[i], s[j], h) for j in range(7)]
            for i in range(7)
        ]
    )
    v_expected = u.sum() / 49
    u_expected = (u.sum() - np.trace(u)) / 42
    assert kernel_stein_discrepancy(x, s, h) == pytest.approx(v_expected, rel=1e-6)
    assert kernel_stein_discrepancy(x, s, h, statistic="u") == pytest.approx(u_expected, rel=1e-6)


def test_the_gaussian_closed_form_is_zero_at_the_target_and_matches_quadrature() -> None:
    covariance = np.array([[1.0, 0.3], [0.3, 0.5]])
    assert gaussian_stein_discrepancy(np.zeros(2), covariance, np.zeros(2), covariance, 1.3) == (
        pytest.approx(0.0, abs=1e-14)
    )
    # One dimension: E over x, x' ~ N(m, s²) of the Stein kernel of N(mu, sigma²), by a tensor
    # Gauss-Hermite rule (x = m + √2·s·t), the Stein kernel written from its textbook definition.
    m, s, mu, sigma, h = 0.4, 0.8, -0.3, 1.2, 0.9

    def expectation(nodes: int) -> float:
        t, w = np.polynomial.hermite.hermgauss(nodes)
        x = (m + math.sqrt(2) * s * t)[:, None]
        y = (m + math.sqrt(2) * s * t)[None, :]
        k = np.exp(-((x - y) ** 2) / h)
        sx, sy = -(x - mu) / sigma**2, -(y - mu) / sigma**2
        u = sx * sy * k + sx * (2 / h) * (x - y) * k - (2 / h) * (x - y) * k * sy
        u += (2 / h) * k - (4 / h**2) * (x - y) ** 2 * k
        return float(w @ u @ w / math.pi)

    closed = gaussian_stein_discrepancy([m], [[s**2]], [mu], [[sigma**2]], h)
    assert expectation(120) == pytest.approx(expectation(80), rel=1e-12)  # the rule has converged
    assert closed == pytest.approx(expectation(120), rel=1e-10)
    assert closed > 0.1


def test_the_u_statistic_is_unbiased_for_the_gaussian_closed_form() -> None:
    """Mean of 300 independent U-statistics (60 particles each) within 4 standard errors."""
    rng = np.random.default_rng(12)
    mean = np.array([0.5, -0.2])
    covariance = np.array([[0.8, 0.1], [0.1, 0.4]])
    target_covariance = np.array([[1.0, 0.3], [0.3, 0.5]])
    precision = np.linalg.inv(target_covariance)
    sets = rng.multivariate_normal(mean, covariance, size=(300, 60))
    estimates = kernel_stein_discrepancy(sets, -sets @ precision, 1.3, statistic="u")
    assert estimates.shape == (300,)
    standard_error = estimates.std(ddof=1) / math.sqrt(300)
    exact = gaussian_stein_discrepancy(mean, covariance, np.zeros(2), target_covariance, 1.3)
    assert abs(estimates.mean() - exact) < 4 * standard_error
    assert exact > 20 * standard_error  # the check can tell q from p


def test_v_statistic_is_never_negative_and_batches_alike() -> None:
    rng = np.random.default_rng(13)
    x = rng.normal(size=(4, 9, 2))
    s = -x
    h = np.array([0.5, 1.0, 2.0, 4.0])
    batched = kernel_stein_discrepancy(x, s, h)
    assert np.all(batched >= 0.0)
    for b in range(4):
        assert batched[b] == pytest.approx(kernel_stein_discrepancy(x[b], s[b], h[b]), rel=1e-13)
    with pytest.raises(ValueError, match="statistic must be"):
        kernel_stein_discrepancy(x, s, 1.0, statistic="w")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2 particles"):
        kernel_stein_discrepancy(x[:, :1], s[:, :1], 1.0, statistic="u")


@pytest.mark.parametrize("statistic", ["v", "u"])
def test_a_set_s_ksd_is_the_same_bits_alone_or_in_a_batch(statistic) -> None:
    """Sets of N·d > 8,192 numbers (NumPy's buffer): an einsum summing over both axes at once
    added a stack of sets in another order than a set alone, which changed the last bit of the
    ``bnn`` KSD between the engines (d = 511, N = 40; issue 30, item 9). Every sum now runs over one
    axis at a time. Sets near their target N(0, I) (scores −θ plus a little noise): the KSD is then
    a small difference of large terms, whose last bits show (before: 3 of these 8 sets differed
    in the V-statistic, 6 in the U-statistic)."""
    rng = np.random.default_rng(35)
    x = rng.normal(size=(8, 30, 300))
    s = -x + 0.01 * rng.normal(size=x.shape)
    h = np.median(pairwise_squared_distances(x, x).reshape(8, -1), axis=1)
    batched = kernel_stein_discrepancy(x, s, h, statistic=statistic)
    alone = [kernel_stein_discrepancy(x[b], s[b], h[b], statistic=statistic) for b in range(8)]
    np.testing.assert_array_equal(np.array(alone), batched)
