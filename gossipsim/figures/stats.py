"""What a figure draws across runs: the runs × slots matrices of a table column, their centre line and
band (the latencies, censored by the end of a run, are estimated by :mod:`gossipsim.measurement.censoring`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

STATISTICS = ("median", "mean")
PERCENTILES = (12.5, 87.5)  # the paper's 75% band
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Band:
    """A centre line across runs and the band around it, with what they are in words."""

    center: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    statistic: str  # "median" or "mean"

    @property
    def description(self) -> str:
        """The legend's words for the line and band: a median goes with the spread of the runs, a
        mean with its confidence interval (a mean inside a percentile band would mix the two)."""
        if self.statistic == "mean":
            return f"mean, {CONFIDENCE:.0%} confidence interval"
        return f"median, {PERCENTILES[0]:g}-{PERCENTILES[1]:g}th percentile band"


def band_matrix(
    table: pd.DataFrame, variant: str, column: str, x: str = "iteration"
) -> tuple[np.ndarray, np.ndarray]:
    """Runs × recorded-slot matrix of ``column`` for one variant, each run carried forward past its end
    (a run stopped once done keeps its final state): rows are the variant's runs in ascending
    order, columns the slots ``x`` any of its runs recorded (the grid, returned first). An entry
    holds the run's last non-NaN value recorded at that slot, else (no row there, or only NaN) the
    run's value at its latest slot before it, NaN before its first value.

    What ``pivot_table(index=x, columns="run", aggfunc="last", dropna=False).ffill()`` gives, in
    NumPy: a pivot table sorts and groups every row in pandas, the larger part of drawing a figure
    of thousands of runs."""
    mask = (table["variant"] == variant).to_numpy(dtype=bool, na_value=False)
    runs = table["run"].to_numpy()[mask]
    xs = table[x].to_numpy()[mask]
    values = table[column].to_numpy(dtype=float, na_value=np.nan)[mask]
    grid, col = _sorted_codes(xs)
    run_ids, row = _sorted_codes(runs)
    cell = row * grid.size + col
    known = ~np.isnan(values)
    cell, values = cell[known], values[known]
    if cell.size > 1 and not (np.diff(cell) > 0).all():  # not one row per cell in order
        last = cell.size - 1 - np.unique(cell[::-1], return_index=True)[1]  # the latest row
        cell, values = cell[last], values[last]
    wide = np.full((run_ids.size, grid.size), np.nan)
    wide.flat[cell] = values
    # carry each run's latest value forward: the index of the latest filled slot so far
    latest = np.where(np.isnan(wide), 0, np.arange(grid.size))
    np.maximum.accumulate(latest, axis=1, out=latest)
    return grid, np.take_along_axis(wide, latest, axis=1)


def _sorted_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values in ascending order and each value's position among them
    (``np.unique(values, return_inverse=True)``); for non-negative integers (slots, runs) by a
    table of the values present, without sorting."""
    if values.dtype.kind in "iu" and values.size and values.min() >= 0:
        top = int(values.max())
        if top <= 4 * values.size + 1_000_000:  # a table no larger than a few times the values
            present = np.zeros(top + 1, dtype=bool)
            present[values] = True
            distinct = np.flatnonzero(present).astype(values.dtype)
            return distinct, (np.cumsum(present) - 1)[values]
    distinct = np.unique(values)
    return distinct, np.searchsorted(distinct, values)


def step_values_on_grid(
    runs: np.ndarray, times: np.ndarray, values: np.ndarray, grid: np.ndarray
) -> np.ndarray:
    """Runs × grid matrix of step functions: row r holds, at each grid time g, the value of run r's
    last row with time ≤ g (NaN before its first row); rows are in ascending run order, and each
    run's times are non-decreasing in table order.

    All runs at once, with exact comparisons and no search per grid point: a row covers the grid
    points from the first one at or after its time (``searchsorted(grid, t, "left")``, an exact
    float comparison), so each run's latest row at each grid point is the running maximum, along
    the grid, of the latest row that starts covering there (a runs × grid table of row numbers, as
    :func:`band_matrix` carries values forward). (Ranking the times and the grid together sorted
    every row again: most of a KL-vs-time figure of thousands of runs; a search of every run's
    rows for every grid point was still about a third of it.)"""
    runs = np.asarray(runs)
    order = np.argsort(runs, kind="stable")  # each run's rows together, in table order
    times = np.asarray(times, dtype=float)[order]
    values = np.asarray(values, dtype=float)[order]
    grid = np.asarray(grid, dtype=float)
    run_ids, row_run = _sorted_codes(runs[order])
    width = grid.size + 1  # a last column for rows after the grid's end
    # non-decreasing: runs in ascending order, each run's rows in time order
    cell = row_run * width + np.searchsorted(grid, times, side="left")
    starts = np.full(run_ids.size * width, -1, dtype=np.int64)  # the latest row starting there
    ends = np.flatnonzero(np.diff(cell, append=cell[-1] + 1 if cell.size else 0))  # last of each
    starts[cell[ends]] = ends
    latest = starts.reshape(run_ids.size, width)
    np.maximum.accumulate(latest, axis=1, out=latest)
    latest = latest[:, : grid.size]
    return np.where(latest >= 0, values[np.clip(latest, 0, None)], np.nan)


def across_runs(values: np.ndarray, statistic: str = "median") -> Band:
    """``statistic`` of a runs × points matrix at each point and its band: the 12.5th-87.5th
    percentiles around a median, the 95% confidence interval (Student t) around a mean. NaN entries
    (runs without a value there) are left out; a point without runs is NaN."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    if statistic == "mean":
        center, lo, hi = mean_ci(values)
        return Band(center, lo, hi, statistic)
    if values.shape[0] == 0:
        nothing = np.full(values.shape[1:], np.nan)
        return Band(nothing, nothing, nothing, statistic)
    q = [PERCENTILES[0], 50.0, PERCENTILES[1]]
    gaps = np.isnan(values).any(axis=0)  # the points where some run has no value
    if not gaps.any():
        lo, center, hi = np.percentile(values, q, axis=0)
        return Band(center, lo, hi, statistic)
    # the nan-aware reduction (much slower: a column at a time) only where it is needed; on a
    # column without NaN it gives np.percentile's values, bit for bit
    out = np.empty((len(q), values.shape[1]))
    out[:, ~gaps] = np.percentile(values[:, ~gaps], q, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out[:, gaps] = np.nanpercentile(values[:, gaps], q, axis=0)
    lo, center, hi = out
    return Band(center, lo, hi, statistic)


def mean_ci(
    values: np.ndarray, level: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean of each column of a runs × points matrix and its two-sided ``level`` confidence interval,
    mean ± t(level, n − 1) · s / √n over the n finite values of the column (NaN where n < 2 for the
    interval, where n = 0 for the mean)."""
    from scipy import special  # imported by the figures that draw a mean's interval

    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    finite = np.isfinite(values)
    n = finite.sum(axis=0)
    filled = np.where(finite, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(axis=0) / n
        sq = np.where(finite, (values - mean) ** 2, 0.0).sum(axis=0)
        sd = np.sqrt(sq / (n - 1))
        t = special.stdtrit(np.maximum(n - 1, 1), 0.5 + level / 2)  # Student t quantile
        half = np.where(n >= 2, t * sd / np.sqrt(n), np.nan)
    mean = np.where(n > 0, mean, np.nan)
    return mean, mean - half, mean + half


def mean_and_half_width(
    samples: np.ndarray, level: float = CONFIDENCE, *, recorded: Any = None
) -> tuple[float, float]:
    """Mean of the finite samples and the half-width of its ``level`` confidence interval (NaN
    without two samples). ``recorded``: these numbers as summary.json holds them
    (:func:`interval_record`), taken when they are of these samples (the same count, the same
    mean to the bit, the same level), so that no Student t quantile is computed (SciPy's import,
    about 0.1 s of a figure command); else computed again."""
    samples = np.asarray(samples, dtype=float)
    if isinstance(recorded, dict) and recorded.get("level") == level:
        n = int(np.isfinite(samples).sum())
        mean = _finite_mean(samples)
        half = recorded.get("half_width")
        if (
            recorded.get("samples") == n
            and recorded.get("mean") == mean
            and (isinstance(half, float) or (half is None and n < 2))
        ):
            return mean, float("nan") if half is None else half
    mean_, lo, hi = mean_ci(samples[:, None], level)
    return float(mean_[0]), float((hi[0] - lo[0]) / 2)


def _finite_mean(samples: np.ndarray) -> float:
    """:func:`mean_ci`'s mean of one column, by the same arithmetic (NaN without samples)."""
    values = samples[:, None]
    finite = np.isfinite(values)
    n = finite.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite, values, 0.0).sum(axis=0) / n
    return float(np.where(n > 0, mean, np.nan)[0])


def interval_record(samples: np.ndarray, level: float = CONFIDENCE) -> dict[str, Any]:
    """A mean's ``level`` confidence interval as summary.json records it (the cover figure's,
    ``cover_mean``): the number of finite samples, their mean and the half-width
    (:func:`mean_and_half_width`; None without two samples)."""
    samples = np.asarray(samples, dtype=float)
    mean, half = mean_and_half_width(samples, level)
    return {
        "samples": int(np.isfinite(samples).sum()),
        "mean": mean,
        "half_width": half if np.isfinite(half) else None,
        "level": level,
    }


def cover_moves(runs: pd.DataFrame) -> tuple[np.ndarray, int]:
    """The cover times (moves: the cover iteration − 1) of the runs of ``runs`` that covered the
    graph, and the number of runs (tables of older folders lack ``cover_moves``)."""
    moves = (
        runs["cover_moves"].to_numpy(dtype=float, na_value=np.nan)
        if "cover_moves" in runs
        else runs["cover_iteration"].to_numpy(dtype=float, na_value=np.nan) - 1
    )
    return moves[np.isfinite(moves)], moves.size
