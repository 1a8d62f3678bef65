"""Estimates from right-censored counts: a run that ends before its cover (or a request that is not
served before the run ends) says only that the time exceeds what the run could see.

Times are integer slot counts T ≥ 0 (a cover iteration, a latency); a censored observation at c means
T > c. The Kaplan–Meier estimate of the survival function S(t) = P(T > t) is the product over event
times t_j ≤ t of (1 − d_j / n_j), with d_j events at t_j and n_j observations at risk (events at
t ≥ t_j, censorings at c ≥ t_j); it is computed in closed form with the arithmetic of SciPy's
``scipy.stats.ecdf`` (of the sample, or of ``CensoredData.right_censored`` where something is
censored), so its numbers are SciPy's bit for bit (tests/test_censoring.py compares them) without
SciPy's second of imports (``scipy.stats``) in every summary; where nothing is censored it is the
empirical survival function (:func:`empirical_survival`, what the latency figure draws). From it:

- the median: the smallest t with S(t) ≤ 1/2 (undefined when more than half of the mass lies
  beyond the last censoring: then only "> c" can be said), with the Brookmeyer–Crowley confidence
  interval: the times whose pointwise band of S (the log-log "exponential Greenwood" band SciPy
  gives) contains 1/2, i.e. from the first t with lower(t) ≤ 1/2 to the first t with upper(t) ≤ 1/2
  (unbounded when the upper band stays above 1/2 within the follow-up, which only censoring can
  leave it doing: where S reaches 0 its band is {0}, see :meth:`Survival.band`; so where nothing is
  censored the interval lies within the observed times, and a sample of equal times gives that time
  as a point interval);
- the restricted mean up to τ, E[min(T, τ)] = Σ_{t=0}^{τ−1} S(t): with every censoring at one time
  τ (runs of the same length) it is the mean of min(T_i, τ), a lower bound of the mean E[T]; without
  censoring and τ past the largest time it is the sample mean. Its variance is the Greenwood-type
  Σ_j A_j² d_j / (n_j (n_j − d_j)) with A_j = Σ_{t=t_j}^{τ−1} S(t), the area under S from t_j to τ
  (Klein & Moeschberger, *Survival Analysis*, 2nd ed., eq. 4.5.2; without censoring it is the plug-in
  variance of the mean, Σ (x_i − x̄)² / n²); its interval is taken on the log scale, so it stays
  positive for a skewed, positive quantity.

The naive mean over the uncensored runs is biased low whenever long times are censored: summaries
report it with these beside it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Survival:
    """The Kaplan–Meier step function: ``survival[i]`` = S(t) for ``times[i] ≤ t < times[i + 1]``
    (S = 1 before the first event time), with the numbers at risk ``at_risk[i]`` and the events
    ``events[i]`` at each event time (for Greenwood's variance); ``banded`` where :meth:`band` is
    defined (:func:`kaplan_meier`'s estimate, not :func:`empirical_survival`'s)."""

    times: np.ndarray
    survival: np.ndarray
    at_risk: np.ndarray
    events: np.ndarray
    banded: bool = field(default=False, repr=False, compare=False)

    def at(self, t: npt.ArrayLike) -> np.ndarray:
        """S(t) at integer times ``t``."""
        t = np.asarray(t, dtype=float)
        if not self.times.size:  # no event observed: S = 1 throughout the follow-up
            return np.ones(t.shape)
        idx = np.searchsorted(self.times, t, side="right") - 1
        return np.where(idx >= 0, self.survival[np.maximum(idx, 0)], 1.0)

    def band(self, level: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
        """The pointwise ``level`` band (lower, upper) of S at each event time: the log-log
        ("exponential Greenwood") interval, log(−log S) ± z sqrt(Σ_{t_j ≤ t} d_j / (n_j (n_j −
        d_j))) / |log S|, mapped back, with the arithmetic of SciPy's
        ``ecdf(...).sf.confidence_interval(level, method="log-log")`` (its numbers bit for bit).

        Where S = 0 (at the last event time, every observation still at risk having its event
        there; with nothing censored, at the largest time) the formula is 0/0 (log 0, and the term
        d_j / (n_j (n_j − d_j)) with n_j = d_j) and SciPy gives NaN. The band there is {0}:
        Greenwood's variance S² Σ d_j / (n_j (n_j − d_j)) is 0·∞ there and is taken as 0, its value
        without censoring (where it is the binomial S (1 − S) / n: 0 at S = 0 as at S = 1, where
        the band is {1} before the first event time). lifelines does the same (its Greenwood term
        with n_j = d_j is 0). So no time past the last event is in the Brookmeyer–Crowley
        interval, as none before the first is."""
        if not self.banded or not self.times.size:
            return np.zeros(0), np.zeros(0)
        from scipy import special  # (scipy.special, which the families import anyway)

        sf, d, n = self.survival, self.events, self.at_risk
        with np.errstate(divide="ignore", invalid="ignore"):  # undefined where S = 0 (below)
            var = 1 / np.log(sf) ** 2 * np.cumsum(d / (n * (n - d)))
            se = np.sqrt(var)
            z = special.ndtri(1 / 2 + level / 2)
            loglog = np.log(-np.log(sf))
            z_se = z * se
            lower = np.exp(-np.exp(loglog + z_se))
            upper = np.exp(-np.exp(loglog - z_se))
        zero = self.survival <= 0
        return np.where(zero, 0.0, lower), np.where(zero, 0.0, upper)


def _observations(
    times: npt.ArrayLike, censored_at: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """(time or censoring time, observed?) of every observation that says something: a censored
    one without a censoring time is left out."""
    t = np.asarray(times, dtype=float)
    c = np.asarray(censored_at, dtype=float)
    observed = np.isfinite(t)
    follow = np.where(observed, t, c)
    keep = np.isfinite(follow)
    return follow[keep], observed[keep]


def kaplan_meier(times: npt.ArrayLike, censored_at: npt.ArrayLike) -> Survival:
    """Kaplan–Meier estimate from observations: ``times[i]`` where observed (finite), NaN where
    censored, with ``censored_at[i]`` the time it exceeds (used only where ``times`` is NaN); kept
    at the event times.

    In closed form, with the arithmetic of ``scipy.stats.ecdf`` (SciPy 1.11+) so that the numbers
    are its own bit for bit: without censoring S(t_j) = 1 − (events up to t_j) / n; with censoring
    the product over the distinct times (censoring times included, where the factor is exactly 1)
    of (n_j − d_j) / n_j."""
    follow, observed = _observations(times, censored_at)
    if not observed.any():
        empty = np.zeros(0)
        return Survival(empty, empty, empty, empty)
    event_times, events = np.unique(follow[observed], return_counts=True)
    survival: np.ndarray
    if observed.all():
        survival = 1 - np.cumsum(events) / follow.size
    else:
        distinct = np.unique(follow)
        later = follow.size - np.searchsorted(np.sort(follow), distinct, side="left")
        deaths = np.zeros(distinct.size, dtype=np.int64)
        deaths[np.searchsorted(distinct, event_times)] = events
        product = np.cumprod((later - deaths) / later)
        survival = product[np.searchsorted(distinct, event_times)]
    at_risk = (follow[None, :] >= event_times[:, None]).sum(axis=1)
    return Survival(
        event_times,
        np.asarray(survival, dtype=float),
        at_risk.astype(float),
        events.astype(float),
        banded=True,
    )


def empirical_survival(times: npt.ArrayLike) -> Survival:
    """The Kaplan–Meier estimate of times none of which is censored (every one finite): the
    empirical survival function, S(t_j) = #{i: T_i > t_j} / n at each distinct time t_j, with
    the numbers at risk and the events; what :func:`kaplan_meier` gives for them (up to
    rounding), without SciPy, and without the confidence band (``ecdf`` None)."""
    t = np.asarray(times, dtype=float)
    if not np.isfinite(t).all():
        raise ValueError("empirical_survival: a time is censored (not finite); use kaplan_meier")
    event_times, events = np.unique(t, return_counts=True)
    beyond = t.size - np.cumsum(events)  # observations past each event time
    at_risk = beyond + events
    return Survival(event_times, beyond / t.size, at_risk.astype(float), events.astype(float))


def _first_at_or_below(s: Survival, curve: np.ndarray, level: float = 0.5) -> float:
    below = np.flatnonzero(curve <= level)
    return float(s.times[below[0]]) if below.size else float("nan")


def km_median(times: npt.ArrayLike, censored_at: npt.ArrayLike) -> float:
    """The Kaplan–Meier median (NaN when S never reaches 1/2 within the follow-up)."""
    s = kaplan_meier(times, censored_at)
    return _first_at_or_below(s, s.survival)


def _median_ci(s: Survival, level: float) -> tuple[float, float]:
    if not s.times.size:
        return float("nan"), float("inf")
    lower, upper = s.band(level)
    hi = _first_at_or_below(s, upper)
    return _first_at_or_below(s, lower), hi if math.isfinite(hi) else float("inf")


def km_median_ci(
    times: npt.ArrayLike, censored_at: npt.ArrayLike, level: float = CONFIDENCE
) -> tuple[float, float]:
    """Brookmeyer–Crowley ``level`` interval of the Kaplan–Meier median (Brookmeyer & Crowley,
    Biometrics 38, 1982): the times t whose pointwise band of S(t) (:meth:`Survival.band`) contains
    1/2, taken as from the first event time at which the lower band is ≤ 1/2 to the first at which
    the upper band is (lifelines' ``median_survival_times`` of its band takes the same
    crossings), so that it always holds the median. Both ends are event times; tied times
    are one step of S with d_j events (Greenwood's d_j / (n_j (n_j − d_j))).

    - The lower end is NaN when even the lower band stays above 1/2 (censoring only), the upper
      end ``inf`` when the upper band does: the data do not bound the median from above. That
      needs censoring: S reaches 0 at the last event time when no censoring is at or after it,
      and its band there is {0}.
    - Without censoring the interval lies within the smallest and the largest time; a sample of
      equal times c (all 0, say) gives [c, c]: Greenwood's variance is 0 on both sides of c.
    - It is a large-sample interval. Without censoring, the true median lies outside
      [min, max] with probability at most 2^(1−n) (all n times on one side of it; exactly that
      for a continuous law), so for n ≤ 5 no interval within the observations reaches 95%, and
      this one, like any Wald-type interval, is then narrower than ``level`` says: three times
      give [min, max] (75% for a continuous law), a single time x gives [x, x]."""
    return _median_ci(kaplan_meier(times, censored_at), level)


def restricted_mean(times: npt.ArrayLike, censored_at: npt.ArrayLike, tau: float) -> float:
    """E[min(T, τ)] = Σ_{t=0}^{τ−1} S(t) for integer times, from the Kaplan–Meier estimate."""
    return _restricted_mean(kaplan_meier(times, censored_at), tau)


def _restricted_mean(s: Survival, tau: float) -> float:
    if tau <= 0:
        return 0.0
    grid = np.arange(int(np.ceil(tau)), dtype=float)
    return float(s.at(grid).sum())


def restricted_mean_se(times: npt.ArrayLike, censored_at: npt.ArrayLike, tau: float) -> float:
    """Standard error of the restricted mean up to τ: the square root of the Greenwood-type
    variance Σ_{t_j < τ} A_j² d_j / (n_j (n_j − d_j)), A_j = Σ_{t=t_j}^{τ−1} S(t) (Klein &
    Moeschberger eq. 4.5.2 for integer times; a term with n_j = d_j has A_j = 0)."""
    return _restricted_mean_se(kaplan_meier(times, censored_at), tau)


def _restricted_mean_se(s: Survival, tau: float) -> float:
    n_tau = int(np.ceil(tau)) if tau > 0 else 0
    inside = s.times < n_tau
    if not inside.any():
        return 0.0
    grid = np.arange(n_tau, dtype=float)
    tail = np.cumsum(s.at(grid)[::-1])[::-1]  # tail[t] = Σ_{u=t}^{τ−1} S(u)
    t_j = s.times[inside].astype(int)
    area = tail[t_j]
    n, d = s.at_risk[inside], s.events[inside]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(area > 0, area**2 * d / (n * (n - d)), 0.0)
    return float(np.sqrt(terms.sum()))


def restricted_mean_ci(
    times: npt.ArrayLike, censored_at: npt.ArrayLike, tau: float, level: float = CONFIDENCE
) -> tuple[float, float]:
    """``level`` interval of the restricted mean up to τ, on the log scale: μ exp(∓ z se / μ) with
    se from :func:`restricted_mean_se` (a point when μ = 0)."""
    return _restricted_mean_ci(kaplan_meier(times, censored_at), tau, level)


def _restricted_mean_ci(s: Survival, tau: float, level: float) -> tuple[float, float]:
    mu = _restricted_mean(s, tau)
    se = _restricted_mean_se(s, tau)
    if mu <= 0:
        return mu, mu
    from scipy import special

    z = float(special.ndtri(0.5 + level / 2))
    factor = math.exp(z * se / mu)
    return mu / factor, mu * factor


@dataclass(frozen=True)
class Estimates:
    """What a figure says of censored counts: how many were observed of how many, the Kaplan–Meier
    median and restricted mean up to ``tau`` (the longest follow-up + 1), each with its interval."""

    observed: int
    total: int
    median: float
    median_ci: tuple[float, float]
    restricted_mean: float
    restricted_mean_ci: tuple[float, float]
    tau: float
    level: float

    @property
    def censored(self) -> bool:
        return self.observed < self.total


def estimates(
    times: npt.ArrayLike, censored_at: npt.ArrayLike, level: float = CONFIDENCE
) -> Estimates:
    """The Kaplan–Meier median and restricted mean with their ``level`` intervals
    (:func:`km_median_ci`, :func:`restricted_mean_ci`), τ the longest follow-up + 1; the
    Kaplan–Meier estimate computed once for all of them."""
    t = np.asarray(times, dtype=float)
    c = np.asarray(censored_at, dtype=float)
    tau = _tau(t, c)
    nan = float("nan")
    if not t.size:
        return Estimates(0, 0, nan, (nan, nan), nan, (nan, nan), tau, level)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        s = kaplan_meier(t, c)
        return Estimates(
            int(np.isfinite(t).sum()),
            int(t.size),
            _first_at_or_below(s, s.survival),
            _median_ci(s, level),
            _restricted_mean(s, tau),
            _restricted_mean_ci(s, tau, level),
            tau,
            level,
        )


def _tau(t: np.ndarray, c: np.ndarray) -> float:
    follow = np.where(np.isfinite(t), t, c)
    return float(np.nanmax(follow)) + 1 if follow.size and np.isfinite(follow).any() else 0.0


def censored_summary(times: npt.ArrayLike, censored_at: npt.ArrayLike) -> dict[str, float | int]:
    """What a summary reports of censored counts: how many were observed of how many, the naive
    mean of the observed ones, the Kaplan–Meier median and the restricted mean up to the longest
    follow-up (a lower bound of the mean; equal to it when nothing is censored), each with its
    95% interval (:func:`estimates`: ``km_median_lo`` / ``_hi``, ``restricted_mean_lo`` /
    ``_hi``)."""
    t = np.asarray(times, dtype=float)
    observed = np.isfinite(t)
    found = estimates(t, censored_at)
    return {
        "observed": found.observed,
        "total": found.total,
        "mean_of_observed": float(t[observed].mean()) if observed.any() else float("nan"),
        "km_median": found.median,
        "km_median_lo": found.median_ci[0],
        "km_median_hi": found.median_ci[1],
        "restricted_mean": found.restricted_mean,
        "restricted_mean_lo": found.restricted_mean_ci[0],
        "restricted_mean_hi": found.restricted_mean_ci[1],
        "restricted_to": found.tau,
    }


def _number(value: Any) -> float:
    """A number of a summary as JSON holds it (NaN as None, infinities as "inf" / "-inf")."""
    if value is None:
        return float("nan")
    if isinstance(value, str):
        return float(value)  # "inf", "-inf"
    return float(value)


def summary_estimates(
    entry: Any, times: npt.ArrayLike, censored_at: npt.ArrayLike
) -> Estimates | None:
    """The :class:`Estimates` of a :func:`censored_summary` (as summary.json holds it) of
    ``times`` none of which is censored, where it is theirs: the same count, all observed, the
    same mean and the same τ (the largest time + 1); None otherwise (``entry`` not such a
    summary, a time censored, or other times), then :func:`estimates` computes them."""
    t = np.asarray(times, dtype=float)
    keys = ("observed", "total", "km_median", "km_median_lo", "km_median_hi", "restricted_mean",
            "restricted_mean_lo", "restricted_mean_hi", "restricted_to", "mean_of_observed")  # fmt: skip
    if not isinstance(entry, dict) or not all(k in entry for k in keys):
        return None
    if not t.size or not np.isfinite(t).all():
        return None
    try:
        got = {k: _number(entry[k]) for k in keys}
    except (TypeError, ValueError):
        return None
    tau = _tau(t, np.asarray(censored_at, dtype=float))
    if (
        got["observed"] != t.size
        or got["total"] != t.size
        or got["restricted_to"] != tau
        or not math.isclose(got["mean_of_observed"], float(t.mean()), rel_tol=1e-12)
    ):
        return None
    return Estimates(
        t.size,
        t.size,
        got["km_median"],
        (got["km_median_lo"], got["km_median_hi"]),
        got["restricted_mean"],
        (got["restricted_mean_lo"], got["restricted_mean_hi"]),
        tau,
        CONFIDENCE,
    )
