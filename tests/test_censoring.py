"""Censoring-aware estimates, checked against independent computations."""

from __future__ import annotations

import numpy as np
import pytest

from gossipsim.censoring import censored_summary, kaplan_meier, km_median, restricted_mean


def test_without_censoring_the_estimates_are_the_sample_s():
    rng = np.random.default_rng(0)
    t = rng.integers(0, 50, size=201).astype(float)
    assert km_median(t, np.full(t.size, np.nan)) == np.sort(t)[100]  # odd n: the middle value
    assert restricted_mean(t, np.zeros(t.size), 51) == pytest.approx(t.mean())
    s = kaplan_meier(t, np.zeros(t.size))
    grid = np.arange(-1, 52)
    np.testing.assert_allclose(s.at(grid), [(t > g).mean() for g in grid])  # 1 − ECDF


def test_censoring_at_one_time_gives_the_truncated_empirical_distribution():
    """Type I censoring (runs of one length τ): S is the empirical P(T > t) for t < τ and the
    restricted mean is the mean of min(T, τ): a brute-force check on simulated geometric times."""
    rng = np.random.default_rng(1)
    true = rng.geometric(0.01, size=5000).astype(float)
    tau = 120.0
    t = np.where(true <= tau, true, np.nan)
    c = np.full(t.size, tau)
    s = kaplan_meier(t, c)
    grid = np.arange(0, int(tau))
    np.testing.assert_allclose(s.at(grid), [(true > g).mean() for g in grid])
    assert restricted_mean(t, c, tau) == pytest.approx(np.minimum(true, tau).mean())
    assert km_median(t, c) == np.quantile(true, 0.5, method="inverted_cdf")
    # and the geometric law itself, within the standard error of the estimate
    se = np.sqrt(0.5 * 0.5 / true.size) / 0.01 / 0.5  # delta method, loose
    assert abs(km_median(t, c) - np.ceil(np.log(0.5) / np.log(0.99))) < 3 * se


def test_a_hand_computed_case_with_staggered_censoring():
    # events at 2, 3, 3, 6; censored beyond 3 and 5
    t = np.array([2, 3, 3, np.nan, np.nan, 6])
    c = np.array([0, 0, 0, 3, 5, 0])
    s = kaplan_meier(t, c)
    # at 2: 6 at risk, 1 event -> 5/6; at 3: 5 at risk (2, incl. the one censored beyond 3)
    # -> 5/6 * 3/5 = 1/2; at 6: 1 at risk -> 0
    np.testing.assert_allclose(s.times, [2, 3, 6])
    np.testing.assert_allclose(s.survival, [5 / 6, 0.5, 0.0])
    assert km_median(t, c) == 3
    assert restricted_mean(t, c, 7) == pytest.approx(1 + 1 + 5 / 6 + 0.5 * 3)


def test_the_median_is_undefined_when_most_runs_are_censored():
    t = np.array([1.0, np.nan, np.nan, np.nan])
    out = censored_summary(t, np.array([0, 10, 10, 10]))
    assert np.isnan(out["km_median"]) and out["observed"] == 1 and out["total"] == 4
    assert out["restricted_mean"] == pytest.approx((1 + 11 * 3) / 4)  # min(T, 11): 1, 11, 11, 11
    assert out["mean_of_observed"] == 1.0


def test_no_event_at_all():
    t = np.array([np.nan, np.nan])
    out = censored_summary(t, np.array([4, 9]))
    assert out["observed"] == 0 and np.isnan(out["km_median"]) and np.isnan(out["mean_of_observed"])
    assert out["restricted_mean"] == 10  # S = 1 on 0..9
    assert censored_summary(np.array([]), np.array([]))["total"] == 0
