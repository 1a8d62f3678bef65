"""Estimates from right-censored counts: a run that ends before its cover (or a request that is not
served before the run ends) says only that the time exceeds what the run could see.

Times are integer slot counts T ≥ 0 (a cover iteration, a latency); a censored observation at c means
T > c. The Kaplan–Meier estimate of the survival function S(t) = P(T > t) is the product over event
times t_j ≤ t of (1 − d_j / n_j), with d_j events at t_j and n_j observations at risk (events at
t ≥ t_j, censorings at c ≥ t_j). From it:

- the median: the smallest t with S(t) ≤ 1/2 (undefined when more than half of the mass lies
  beyond the last censoring: then only "> c" can be said);
- the restricted mean up to τ, E[min(T, τ)] = Σ_{t=0}^{τ−1} S(t): with every censoring at one time
  τ (runs of the same length) it is the mean of min(T_i, τ), a lower bound of the mean E[T].

The naive mean over the uncensored runs is biased low whenever long times are censored: summaries
report it with these beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Survival:
    """The Kaplan–Meier step function: ``survival[i]`` = S(t) for ``times[i] ≤ t < times[i + 1]``
    (S = 1 before the first event time)."""

    times: np.ndarray
    survival: np.ndarray

    def at(self, t: npt.ArrayLike) -> np.ndarray:
        """S(t) at integer times ``t``."""
        t = np.asarray(t, dtype=float)
        if not self.times.size:  # no event observed: S = 1 throughout the follow-up
            return np.ones(t.shape)
        idx = np.searchsorted(self.times, t, side="right") - 1
        return np.where(idx >= 0, self.survival[np.maximum(idx, 0)], 1.0)


def kaplan_meier(times: npt.ArrayLike, censored_at: npt.ArrayLike) -> Survival:
    """Kaplan–Meier estimate from observations: ``times[i]`` where observed (finite), NaN where
    censored, with ``censored_at[i]`` the time it exceeds (used only where ``times`` is NaN)."""
    t = np.asarray(times, dtype=float)
    c = np.asarray(censored_at, dtype=float)
    observed = np.isfinite(t)
    events = np.sort(t[observed])
    follow = np.where(observed, t, c)  # last time each observation is at risk
    event_times, deaths = np.unique(events, return_counts=True)
    at_risk = np.array([(follow >= x).sum() for x in event_times], dtype=float)
    survival = np.cumprod(1.0 - deaths / at_risk) if event_times.size else np.empty(0)
    return Survival(event_times, survival)


def km_median(times: npt.ArrayLike, censored_at: npt.ArrayLike) -> float:
    """The Kaplan–Meier median (NaN when S never reaches 1/2 within the follow-up)."""
    s = kaplan_meier(times, censored_at)
    below = np.flatnonzero(s.survival <= 0.5)
    return float(s.times[below[0]]) if below.size else float("nan")


def restricted_mean(times: npt.ArrayLike, censored_at: npt.ArrayLike, tau: float) -> float:
    """E[min(T, τ)] = Σ_{t=0}^{τ−1} S(t) for integer times, from the Kaplan–Meier estimate."""
    s = kaplan_meier(times, censored_at)
    if tau <= 0:
        return 0.0
    grid = np.arange(int(np.ceil(tau)), dtype=float)
    return float(s.at(grid).sum())


def censored_summary(times: npt.ArrayLike, censored_at: npt.ArrayLike) -> dict[str, float | int]:
    """What a summary reports of censored counts: how many were observed of how many, the naive
    mean of the observed ones, the Kaplan–Meier median and the restricted mean up to the longest
    follow-up (a lower bound of the mean; equal to it when nothing is censored)."""
    t = np.asarray(times, dtype=float)
    c = np.asarray(censored_at, dtype=float)
    observed = np.isfinite(t)
    follow = np.where(observed, t, c)
    tau = float(np.nanmax(follow)) + 1 if follow.size and np.isfinite(follow).any() else 0.0
    return {
        "observed": int(observed.sum()),
        "total": int(t.size),
        "mean_of_observed": float(t[observed].mean()) if observed.any() else float("nan"),
        "km_median": km_median(t, c) if t.size else float("nan"),
        "restricted_mean": restricted_mean(t, c, tau) if t.size else float("nan"),
        "restricted_to": tau,
    }
