"""Censoring-aware estimates, checked against independent computations."""

from __future__ import annotations

import numpy as np
import pytest

from gossipsim.measurement.censoring import (
    censored_summary,
    empirical_survival,
    estimates,
    kaplan_meier,
    km_median,
    km_median_ci,
    restricted_mean,
    restricted_mean_se,
    summary_estimates,
)


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


# ---------------------------------------------------------------------------------------------------
# against a brute-force product-limit estimate, and the intervals


def _brute_force_km(t: np.ndarray, c: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """S(g) by the definition, one grid point at a time: the product over event times x ≤ g of
    1 − (events at x) / (observations still at risk at x: an event at ≥ x or a censoring at ≥ x)."""
    out = []
    for g in grid:
        s = 1.0
        for x in sorted({float(v) for v in t if np.isfinite(v) and v <= g}):
            deaths = sum(1 for v in t if v == x)
            at_risk = sum(
                1 for v, w in zip(t, c, strict=True) if (v >= x if np.isfinite(v) else w >= x)
            )
            s *= 1 - deaths / at_risk
        out.append(s)
    return np.array(out)


@pytest.mark.parametrize("seed", range(6))
def test_kaplan_meier_equals_the_product_limit_by_hand(seed):
    """Small samples with ties and staggered censoring (some at an event time): S, the median and
    the restricted mean equal the definitions evaluated by brute force."""
    rng = np.random.default_rng(seed)
    n = 12
    true = rng.integers(0, 15, size=n).astype(float)
    c = rng.integers(0, 15, size=n).astype(float)
    t = np.where(true <= c, true, np.nan)
    grid = np.arange(-1, 17)
    s_hand = _brute_force_km(t, c, grid)
    np.testing.assert_allclose(kaplan_meier(t, c).at(grid), s_hand, atol=1e-12)
    below = grid[s_hand <= 0.5]
    assert km_median(t, c) == (below[0] if below.size else pytest.approx(np.nan, nan_ok=True))
    tau = 13
    assert restricted_mean(t, c, tau) == pytest.approx(s_hand[(grid >= 0) & (grid < tau)].sum())


def test_an_even_sample_s_median_is_its_lower_middle_value_exactly():
    """With S reaching exactly 1/2 (half of an even sample at or below t), the median is that t:
    the hand-written product 1 − d/n rounded S to 0.5000000000000001 and gave the next time (in 13
    of 200 samples of 40; 140 instead of 134 for a request's retrain latency in a karate study)."""
    for seed in range(50):
        t = np.random.default_rng(seed).geometric(0.05, size=40).astype(float)
        assert km_median(t, np.full(40, np.nan)) == np.quantile(t, 0.5, method="inverted_cdf")


def test_without_censoring_median_and_mean_are_numpy_s():
    rng = np.random.default_rng(3)
    for n in (41, 40):
        t = rng.geometric(0.05, size=n).astype(float)
        c = np.full(n, np.nan)
        if n % 2:
            assert km_median(t, c) == np.median(t)
        else:  # an even sample: the lower middle value, the smallest t with S(t) <= 1/2
            assert km_median(t, c) == np.quantile(t, 0.5, method="inverted_cdf")
        out = estimates(t, c)
        assert out.restricted_mean == pytest.approx(np.mean(t))  # τ past the largest time
        # Greenwood's variance of the area is then the plug-in variance of the mean
        se = restricted_mean_se(t, c, out.tau)
        assert se == pytest.approx(np.sqrt(((t - t.mean()) ** 2).sum()) / n)
        lo, hi = out.restricted_mean_ci
        assert lo < np.mean(t) < hi and lo > 0
        assert out.median_ci[0] <= out.median <= out.median_ci[1]


def test_the_band_is_the_exponential_greenwood_formula():
    """The pointwise band, written out by hand: log(−log S) ± z sqrt(Σ d/(n(n−d))) / |log S|."""
    t = np.array([2, 3, 3, np.nan, np.nan, 6, 7, 7, 9, np.nan])
    c = np.array([0, 0, 0, 3, 5, 0, 0, 0, 0, 9])
    s = kaplan_meier(t, c)
    # event times 2, 3, 6, 7, 9 with at risk 10, 9, 5, 4, 2 (a censoring at 3 or 9 is at risk
    # there) and events 1, 2, 1, 2, 1
    np.testing.assert_array_equal(s.times, [2, 3, 6, 7, 9])
    np.testing.assert_array_equal(s.at_risk, [10, 9, 5, 4, 2])
    np.testing.assert_array_equal(s.events, [1, 2, 1, 2, 1])
    n, d = s.at_risk, s.events
    surv = np.cumprod(1 - d / n)
    np.testing.assert_allclose(s.survival, surv)
    z = 1.959963984540054
    half = z * np.sqrt(np.cumsum(d / (n * (n - d)))) / np.abs(np.log(surv))
    lower, upper = s.band(0.95)
    np.testing.assert_allclose(lower, np.exp(-np.exp(np.log(-np.log(surv)) + half)))
    np.testing.assert_allclose(upper, np.exp(-np.exp(np.log(-np.log(surv)) - half)))
    # Brookmeyer–Crowley: from the first time the lower band reaches 1/2 to the first the upper does
    lo, hi = km_median_ci(t, c)
    assert lo == s.times[np.flatnonzero(lower <= 0.5)[0]]
    assert hi == (s.times[np.flatnonzero(upper <= 0.5)[0]] if (upper <= 0.5).any() else np.inf)


def test_where_nobody_is_left_at_risk_the_band_is_zero():
    """At the last event time with nobody left at risk S = 0 and the log-log formula is 0/0
    (SciPy: NaN); the band there is {0}, so three uncensored times bound the median above."""
    t = np.array([1.0, 2.0, 3.0])
    s = kaplan_meier(t, np.zeros(3))
    lower, upper = s.band()
    assert s.survival[-1] == 0.0 and lower[-1] == 0.0 and upper[-1] == 0.0
    assert np.all(upper[:-1] > 0.5)  # the upper band stays above 1/2 before: the bound is 3
    assert km_median_ci(t, np.zeros(3)) == (1.0, 3.0)
    # a censoring after the last event: S stays above 0 and nothing bounds the median above
    t, c = np.array([1.0, 2.0, 3.0, np.nan]), np.array([0.0, 0.0, 0.0, 4.0])
    assert kaplan_meier(t, c).survival[-1] == 0.25 and km_median_ci(t, c) == (1.0, np.inf)


def _brookmeyer_crowley(
    follow: np.ndarray, observed: np.ndarray, level: float = 0.95
) -> tuple[float, float, float]:
    """(median, lower, upper) from first principles, written apart from gossipsim.measurement.censoring and
    SciPy: the product-limit estimate in exact fractions over the distinct event times (ties one
    step with d events; a censoring at t at risk at t), Greenwood's sum Σ d / (n (n − d)) (the
    term with n = d left out: S is then 0), the log-log band S^exp(±w), w = z sqrt(Σ) / |log S|,
    which is {0} where S = 0; the median the first time with S ≤ 1/2, the interval's ends the
    first times at which the lower and the upper band are ≤ 1/2 (NaN / inf where none is)."""
    import math
    from fractions import Fraction
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    pairs = list(zip(follow.tolist(), observed.tolist(), strict=True))
    surv, greenwood = Fraction(1), Fraction(0)
    median = lo = math.nan
    hi = math.inf
    for t in sorted({x for x, seen in pairs if seen}):
        n = sum(1 for x, _ in pairs if x >= t)
        d = sum(1 for x, seen in pairs if seen and x == t)
        surv *= Fraction(n - d, n)
        if n > d:
            greenwood += Fraction(d, n * (n - d))
        if surv == 0:
            lower = upper = 0.0
        else:
            w = z * math.sqrt(greenwood) / abs(math.log(surv))
            lower, upper = float(surv) ** math.exp(w), float(surv) ** math.exp(-w)
        if math.isnan(median) and surv <= Fraction(1, 2):
            median = t
        if math.isnan(lo) and lower <= 0.5:
            lo = t
        if math.isinf(hi) and upper <= 0.5:
            hi = t
    return median, lo, hi


def _small_samples_with_ties(seed: int, count: int, censored: bool):
    """Samples of 1 to 15 times in 0..6 (many ties, zeros), a third of them censored if asked."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, 16))
        follow = rng.integers(0, 7, size=n).astype(float)
        observed = rng.random(n) >= (0.3 if censored else 0.0)
        if observed.any():
            yield follow, observed


@pytest.mark.parametrize("censored", [False, True])
def test_the_median_interval_is_brookmeyer_crowley_computed_from_first_principles(censored):
    """Against :func:`_brookmeyer_crowley` on 300 small samples with ties; without censoring the
    interval lies within the observed times (the upper end finite) and holds the median."""
    unbounded = 0
    for follow, observed in _small_samples_with_ties(30 + censored, 300, censored):
        t = np.where(observed, follow, np.nan)
        c = np.where(observed, np.nan, follow)
        median, lo, hi = _brookmeyer_crowley(follow, observed)
        got = km_median_ci(t, c)
        np.testing.assert_array_equal(got, (lo, hi), err_msg=f"{follow} {observed}")
        unbounded += np.isinf(got[1])
        if not censored:
            assert follow.min() <= got[0] <= km_median(t, c) <= got[1] <= follow.max()
            assert km_median(t, c) == median
    # without censoring never unbounded; with it, often (the last time censored)
    assert unbounded == 0 if not censored else unbounded > 50


#: (times, observed, (median, lower, upper)): each interval as lifelines 0.30.3 gives it
#: (KaplanMeierFitter, median_survival_times of confidence_interval_), an implementation apart
#: from SciPy's band and this project's; lifelines needs pandas < 3, so it is not a dependency
LIFELINES_CASES = {
    "ties, 12 at 40 and 8 at 60 (dsvgd_mixture_2d)": ([40.0] * 12 + [60.0] * 8, [1] * 20,
                                                     (40.0, 40.0, 60.0)),
    "ties, 9 at 40 and 11 at 60: the median the largest": ([40.0] * 9 + [60.0] * 11, [1] * 20,
                                                          (60.0, 40.0, 60.0)),
    "all zero (a centralised removal)": ([0.0] * 20, [1] * 20, (0.0, 0.0, 0.0)),
    "all equal": ([20.0] * 3, [1] * 3, (20.0, 20.0, 20.0)),
    "a single time": ([5.0], [1], (5.0, 5.0, 5.0)),
    "three times": ([1.0, 2.0, 3.0], [1] * 3, (2.0, 1.0, 3.0)),
    "ties and censoring, the last time an event": (
        [0.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 4.0, 5.0, 5.0], [1, 1, 0, 1, 1, 0, 1, 0, 1, 1],
        (3.0, 0.0, 5.0)),
    "censored last: unbounded above": ([1.0, 2.0, 3.0, 3.0, 4.0, 4.0, 4.0],
                                      [1, 1, 1, 1, 0, 0, 0], (3.0, 1.0, np.inf)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(LIFELINES_CASES))
def test_the_median_interval_is_lifelines_on_named_cases(case):
    times, seen, expected = LIFELINES_CASES[case]
    follow, observed = np.asarray(times), np.asarray(seen, dtype=bool)
    t, c = np.where(observed, follow, np.nan), np.where(observed, np.nan, follow)
    got = (km_median(t, c), *km_median_ci(t, c))
    assert got == expected
    assert _brookmeyer_crowley(follow, observed) == expected
    # what the summary holds (the figure's legend reads it)
    entry = censored_summary(t, c)
    assert (entry["km_median"], entry["km_median_lo"], entry["km_median_hi"]) == expected


def test_restricted_mean_se_under_censoring_agrees_with_the_bootstrap():
    """Greenwood's variance of the area under S against the bootstrap variance of the same
    estimate (resampling the observations; fixed seed), within the bootstrap's own error."""
    rng = np.random.default_rng(11)
    n = 300
    true = rng.geometric(0.03, size=n).astype(float)
    c = rng.integers(20, 90, size=n).astype(float)
    t = np.where(true <= c, true, np.nan)
    tau = 80.0
    se = restricted_mean_se(t, c, tau)
    draws = 1500
    boot = np.empty(draws)
    for b in range(draws):
        i = rng.integers(0, n, size=n)
        boot[b] = restricted_mean(t[i], c[i], tau)
    sd = boot.std(ddof=1)
    # the sd of a sample sd of `draws` normal draws is about sd / sqrt(2 (draws − 1))
    assert abs(sd - se) < 4 * sd / np.sqrt(2 * (draws - 1)) + 0.05 * se


def _coverage(draw, truth_median, truth_rm, n, cens, reps, seed):
    rng = np.random.default_rng(seed)
    median_in = mean_in = 0
    for _ in range(reps):
        x = draw(rng, n)
        c = np.full(n, cens)
        out = estimates(np.where(x <= c, x, np.nan), c)
        median_in += out.median_ci[0] <= truth_median <= out.median_ci[1]
        lo, hi = out.restricted_mean_ci
        mean_in += lo <= truth_rm(out.tau) <= hi
    return median_in / reps, mean_in / reps


def _geometric_case(p: float = 0.02):
    def draw(rng, n):
        return rng.geometric(p, size=n).astype(float)

    median = np.ceil(np.log(0.5) / np.log(1 - p))  # smallest t with P(T > t) = (1 − p)^t <= 1/2

    def rm(tau):  # E[min(T, τ)] = Σ_{t<τ} (1 − p)^t
        return ((1 - p) ** np.arange(int(np.ceil(tau)))).sum()

    return draw, median, rm


def _lognormal_case(mu: float = 3.0, sigma: float = 1.2):
    """Heavy-tailed integer times ceil(exp(N(μ, σ²))): P(T > t) = P(X > t) at integer t."""
    from scipy import stats

    def draw(rng, n):
        return np.ceil(rng.lognormal(mu, sigma, size=n))

    def rm(tau):
        return stats.lognorm.sf(np.arange(int(np.ceil(tau))), sigma, scale=np.exp(mu)).sum()

    return draw, float(np.ceil(np.exp(mu))), rm


def _assert_covers(coverage: float, reps: int, level: float = 0.95) -> None:
    se = np.sqrt(level * (1 - level) / reps)
    assert abs(coverage - level) < 4 * se, (coverage, reps)


def test_the_intervals_cover_the_truth_geometric_censored():
    """40 geometric times (mean 50) censored at 80 slots: both intervals hold the true median and
    restricted mean in 95% of 400 samples, within 4 binomial standard errors."""
    draw, median, rm = _geometric_case()
    reps = 400
    cov_median, cov_mean = _coverage(draw, median, rm, 40, 80.0, reps, seed=21)
    _assert_covers(cov_median, reps)
    _assert_covers(cov_mean, reps)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["geometric", "lognormal"])
@pytest.mark.parametrize(("n", "cens"), [(40, np.inf), (40, 60.0), (100, np.inf), (100, 60.0)])
def test_the_intervals_cover_the_truth(case, n, cens):
    draw, median, rm = _geometric_case() if case == "geometric" else _lognormal_case()
    reps = 1000
    cov_median, cov_mean = _coverage(draw, median, rm, n, cens, reps, seed=n + int(min(cens, 1e3)))
    _assert_covers(cov_median, reps)
    _assert_covers(cov_mean, reps)


def test_without_censoring_the_empirical_survival_is_scipy_s_kaplan_meier():
    """What the latency figure draws where no run is censored (without importing SciPy) is SciPy's
    Kaplan–Meier estimate: the same event times, survival (to rounding), numbers at risk and
    events; a censored time is refused."""
    rng = np.random.default_rng(3)
    for t in (rng.geometric(0.1, size=500).astype(float), np.array([4.0]), np.full(7, 2.0)):
        km, empirical = kaplan_meier(t, np.full(t.size, np.nan)), empirical_survival(t)
        np.testing.assert_array_equal(empirical.times, km.times)
        np.testing.assert_allclose(empirical.survival, km.survival, rtol=0, atol=1e-14)
        np.testing.assert_array_equal(empirical.at_risk, km.at_risk)
        np.testing.assert_array_equal(empirical.events, km.events)
    with pytest.raises(ValueError, match="censored"):
        empirical_survival([1.0, np.nan])


def _as_json(entry: dict) -> dict:
    """A summary entry as summary.json holds it (NaN as None, infinities as text)."""
    import json
    import math

    def cell(v):
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, float) and math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v

    return json.loads(json.dumps({k: cell(v) for k, v in entry.items()}))


def test_summary_estimates_are_those_of_the_same_uncensored_times_only():
    """The estimates a figure takes from summary.json are :func:`estimates` of its times, NaN and
    unbounded intervals included; for other times (another mean, count or largest time), a
    censored time or an entry that is not a censored summary there are none."""
    rng = np.random.default_rng(5)
    t = rng.geometric(0.05, size=40).astype(float)
    bound = np.full(t.size, 500.0)
    entry = _as_json(censored_summary(t, bound))
    assert summary_estimates(entry, t, bound) == estimates(t, bound)
    few = np.array([3.0, 9.0])  # two times: the interval is the two (issue 30)
    got = summary_estimates(_as_json(censored_summary(few, few)), few, few)
    assert got == estimates(few, few) and got is not None and got.median_ci == (3.0, 9.0)
    other = t.copy()
    other[0] += 1  # another mean
    assert summary_estimates(entry, other, bound) is None
    assert summary_estimates(entry, t[:-1], bound[:-1]) is None
    assert summary_estimates(entry, np.append(t, t.max() + 5), np.append(bound, 500)) is None
    censored = t.copy()
    censored[3] = np.nan
    assert summary_estimates(_as_json(censored_summary(censored, bound)), censored, bound) is None
    assert summary_estimates({"observed": 40}, t, bound) is None
    assert summary_estimates(None, t, bound) is None
    assert summary_estimates({**entry, "km_median": "many"}, t, bound) is None


@pytest.mark.parametrize("censoring", ["none", "at one time", "at each run's own time"])
def test_the_closed_form_kaplan_meier_is_scipy_s_bit_for_bit(censoring):
    """kaplan_meier computes the product-limit estimate and its log-log band in closed form so that
    a summary imports no scipy.stats; they are scipy.stats.ecdf's numbers exactly (not to
    rounding), tied times, censoring at the event times and S reaching 0 included."""
    import warnings

    from scipy import stats

    rng = np.random.default_rng(
        {"none": 11, "at one time": 12, "at each run's own time": 13}[censoring]
    )
    for _ in range(200):
        n = int(rng.integers(1, 300))
        t = rng.geometric(rng.uniform(0.02, 0.5), size=n).astype(float)
        c = np.full(n, np.nan)
        if censoring != "none":
            cap = (
                np.full(n, float(rng.integers(1, 40)))
                if censoring == "at one time"
                else rng.integers(1, 40, size=n).astype(float)
            )
            cut = (t > cap) | (rng.random(n) < 0.2)
            t, c = np.where(cut, np.nan, t), np.where(cut, cap, np.nan)
        observed = np.isfinite(t)
        if not observed.any():
            continue
        s = kaplan_meier(t, c)
        follow = np.where(observed, t, c)
        sf = stats.ecdf(stats.CensoredData.right_censored(follow, ~observed)).sf
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ci = sf.confidence_interval(0.95, method="log-log")
        np.testing.assert_array_equal(s.survival, sf.evaluate(s.times))
        zero = s.survival <= 0  # SciPy's NaN where S = 0: the band is {0} there (Survival.band)
        lower, upper = s.band()
        np.testing.assert_array_equal(lower, np.where(zero, 0.0, ci.low.evaluate(s.times)))
        np.testing.assert_array_equal(upper, np.where(zero, 0.0, ci.high.evaluate(s.times)))


def test_a_summary_imports_no_scipy_stats():
    """The Kaplan–Meier estimates of a summary (censored or not) leave scipy.stats unimported."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from gossipsim.measurement.censoring import censored_summary\n"
        "censored_summary([1.0, 2.0, np.nan, 5.0], [np.nan, np.nan, 6.0, np.nan])\n"
        "censored_summary([1.0, 2.0, 2.0], [np.nan] * 3)\n"
        "assert 'scipy.stats' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
