"""The maximum mean discrepancy against a brute-force sum and its Gaussian closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gossipsim.particles import gaussian_mmd, maximum_mean_discrepancy


def test_v_and_u_statistics_are_the_pairwise_sums() -> None:
    rng = np.random.default_rng(30)
    x, y, h = rng.normal(size=(5, 2)), rng.normal(size=(7, 2)) + 1.0, 1.4

    def k(a, b):
        return math.exp(-float(np.sum((a - b) ** 2)) / h)

    kxx = np.array([[k(a, b) for b in x] for a in x])
    kyy = np.array([[k(a, b) for b in y] for a in y])
    kxy = np.array([[k(a, b) for b in y] for a in x])
    v = kxx.mean() + kyy.mean() - 2 * kxy.mean()
    u = (kxx.sum() - 5) / 20 + (kyy.sum() - 7) / 42 - 2 * kxy.mean()
    assert maximum_mean_discrepancy(x, y, h) == pytest.approx(v, rel=1e-12)
    assert maximum_mean_discrepancy(x, y, h, statistic="u") == pytest.approx(u, rel=1e-12)


def test_the_u_statistic_averages_to_the_gaussian_closed_form() -> None:
    """400 U-statistics of 40 + 40 draws: mean within 4 standard errors of the closed form."""
    rng = np.random.default_rng(31)
    mp, sp = np.array([0.0, 0.5]), np.array([[1.0, 0.2], [0.2, 0.6]])
    mq, sq = np.array([0.4, 0.0]), np.array([[0.7, 0.0], [0.0, 1.1]])
    x = rng.multivariate_normal(mp, sp, size=(400, 40))
    y = rng.multivariate_normal(mq, sq, size=(400, 40))
    estimates = maximum_mean_discrepancy(x, y, 1.5, statistic="u")
    exact = gaussian_mmd(mp, sp, mq, sq, 1.5)
    standard_error = estimates.std(ddof=1) / math.sqrt(400)
    assert abs(estimates.mean() - exact) < 4 * standard_error
    assert exact > 10 * standard_error
    assert gaussian_mmd(mp, sp, mp, sp, 1.5) == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError, match="statistic must be"):
        maximum_mean_discrepancy(x, y, 1.0, statistic="w")  # type: ignore[arg-type]


def test_batches_of_sets_against_one_fixed_set_are_each_set_s_value() -> None:
    """Many sets x (3, N, d) against one set y, with one bandwidth or one per set: the values of
    each set alone (the fixed set's own term is computed once, and broadcast)."""
    rng = np.random.default_rng(32)
    x, y = rng.normal(size=(3, 6, 2)), rng.normal(size=(9, 2)) + 0.5
    one = maximum_mean_discrepancy(x, y, 1.3)
    each = maximum_mean_discrepancy(x, y, np.array([0.7, 1.3, 2.0]))
    assert one.shape == each.shape == (3,)
    for r, h in enumerate((0.7, 1.3, 2.0)):
        assert one[r] == pytest.approx(float(maximum_mean_discrepancy(x[r], y, 1.3)), rel=1e-13)
        assert each[r] == pytest.approx(float(maximum_mean_discrepancy(x[r], y, h)), rel=1e-13)
    assert maximum_mean_discrepancy(x[0], y, np.array([1.3, 1.3])).shape == (2,)
