"""The figures of a slot axis drawn against what the slots cost instead (``gossipsim plot --x``,
``Results.plot(x=...)``): cumulative bits or simulated seconds.

``x = "iteration"`` (the default) draws every figure as always. With ``x = "bits"`` or ``"time"``
the figures with a slot axis (:data:`SLOT_FIGURES`) are drawn against the metrics table's
``bits`` column (the payload sent by the slot's end, cumulative: on the walk every hop before the
slot, with the server both transfers of every slot so far) or its ``time`` column (the slot's
end, simulated seconds). Their files are named for the axis (:func:`figure_name`:
``kl_vs_bits``, ``evaluation_vs_bits``, ``unlearning_kl_vs_time``, ...), beside the slot figures.

**Runs across a cost axis.** Runs of a variant spend different bits and seconds by the same slot
(a walk's rejections send nothing; links and rounds differ by holder), so their values are not
averaged slot by slot. Each run's metric is a step function of its cost: at cost g it is the
value of the run's last slot whose cost is ≤ g (the state the run holds once it has spent g,
before it spends more; NaN rows of a column skipped, NaN before the run's first value). Every run
of a variant is read on one grid, :data:`POINTS` evenly spaced costs from 0 to the largest cost
any of its runs reached (its end a point of its own), and the centre line and band (median with
the 12.5th-87.5th percentile band, or mean with its 95% interval) are taken across runs at each
point, exactly as across slots. A run that ended sooner keeps its last value up to the line's end
(what it had for that budget: the rule of ``stop_when_done`` and of ``kl_vs_time``), which the
legend says when some run did. Each variant has a grid of its own, so protocols whose slots cost
bits of different orders of magnitude are each resolved over their own range and compared on the
common axis. For a comparison at equal cost, give the runs a budget (``[scenario] max_bits`` or
``max_time``): every run then ends just past it and almost nothing is carried.

An unlearning request is marked on a time axis at its arrival (``request_time``) and on a bits
axis at the bits sent by the end of the last recorded slot before it arrives (``request_bits``),
the cost of the last state made before it; a request arriving at different costs in different
runs is shaded from its first to its last arrival. The unlearning figures start at the earliest
arrival (on the slot axis, one slot before the first request).

``kl_vs_iteration`` against time is the ``kl_vs_time`` figure (drawn as always, on one time grid
for every variant); ``kl_vs_time`` and ``kl_vs_local_iterations`` keep their axes, and the
figures without a slot axis (``latency``, ``cover_time``, ``particles``, ``visits``) are not drawn
against a cost: naming one of them with ``--x bits`` or ``time`` is refused in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axis import Axis
from matplotlib.ticker import EngFormatter, MaxNLocator

from gossipsim.figures.stats import step_values_on_grid

#: what ``--x`` may be
X_AXES = ("iteration", "bits", "time")
#: the axis label of each
X_LABELS = {
    "iteration": "iteration (slot)",
    "bits": "cumulative bits",
    "time": "simulated time (s)",
}
#: the figures with a slot axis, which ``--x bits`` and ``--x time`` draw against the cost
SLOT_FIGURES = ("kl_vs_iteration", "evaluation", "unlearning_kl", "unlearning_accuracy")
#: costs per variant at which the runs are read
POINTS = 400
#: what a figure against a cost says of runs that end before their variant's line does
COST_RUNS_END = (
    "a line ends where its variant's last run ends; runs that ended sooner keep their last value"
)
#: the metrics columns not read on a cost grid (the grid's own columns, and the holder)
_NOT_RESAMPLED = frozenset({"variant", "run", "holder"})


def figure_name(name: str, x: str) -> str:
    """The file name (without suffix) of figure ``name`` drawn against ``x``."""
    if x == "iteration":
        return name
    if name == "kl_vs_iteration":
        return f"kl_vs_{x}"
    return f"{name}_vs_{x}"


def request_column(x: str) -> str:
    """The requests table's column of a request's place on the ``x`` axis."""
    return f"request_{x}"


def style_x_axis(axis: Axis, x: str, nbins: int) -> None:
    """Ticks of an ``x`` axis: whole slots, seconds, or bits with an SI prefix (k, M, G)."""
    axis.set_major_locator(MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]))
    if x == "bits":
        axis.set_major_formatter(EngFormatter(sep=""))


@dataclass(frozen=True)
class CostTables:
    """The tables a slot figure is drawn from, against a cost: ``metrics`` holds one row per run
    and point of its variant's grid (the grid in column ``x``, ``iteration`` the run's slot
    there), ``requests`` a ``request_bits`` column where ``x`` is bits; ``ended_sooner`` says
    whether some run ended before its variant's line."""

    metrics: pd.DataFrame
    requests: pd.DataFrame | None
    ended_sooner: bool


def spends(metrics: pd.DataFrame, x: str) -> bool:
    """Whether some slot of ``metrics`` costs anything on the ``x`` axis (bits sent, seconds)."""
    return x in metrics.columns and bool(metrics[x].max() > 0)


def on_cost_axis(
    metrics: pd.DataFrame,
    requests: pd.DataFrame | None,
    variants: Sequence[str],
    x: str,
    points: int = POINTS,
) -> CostTables:
    """``metrics`` read on each variant's grid of ``x`` (bits or time; the module's rule) and
    ``requests`` with their place on it."""
    columns = [
        str(c)
        for c in metrics.columns
        if str(c) not in _NOT_RESAMPLED
        and str(c) != x
        and "." not in str(c)
        and pd.api.types.is_numeric_dtype(metrics[c])
        and not pd.api.types.is_bool_dtype(metrics[c])
    ]
    runs_all = metrics["run"].to_numpy()
    cost_all = metrics[x].to_numpy(dtype=float, na_value=np.nan)
    parts: list[pd.DataFrame] = []
    ended_sooner = False
    for variant in variants:
        mask = (metrics["variant"] == variant).to_numpy(dtype=bool, na_value=False)
        if not mask.any():
            continue
        runs, cost = runs_all[mask], cost_all[mask]
        ids = np.unique(runs)
        ends = np.full(ids.size, -np.inf)
        np.maximum.at(ends, np.searchsorted(ids, runs), cost)
        end = float(ends.max())
        grid = np.linspace(0.0, end, points)
        grid = np.append(grid[grid < end], end)
        ended_sooner = ended_sooner or bool((ends < end).any())
        data: dict[str, np.ndarray] = {
            "run": np.repeat(ids, grid.size),
            x: np.tile(grid, ids.size),
        }
        for column in columns:
            values = metrics[column].to_numpy(dtype=float, na_value=np.nan)[mask]
            data[column] = _steps(ids, runs, cost, values, grid).ravel()
        part = pd.DataFrame(data)
        part.insert(0, "variant", variant)
        parts.append(part)
    table = pd.concat(parts, ignore_index=True) if parts else metrics.iloc[:0]
    if isinstance(metrics["variant"].dtype, pd.CategoricalDtype) and parts:
        table["variant"] = pd.Categorical(table["variant"], dtype=metrics["variant"].dtype)
    return CostTables(table, _placed(requests, metrics, x), ended_sooner)


def _steps(
    ids: np.ndarray, runs: np.ndarray, cost: np.ndarray, values: np.ndarray, grid: np.ndarray
) -> np.ndarray:
    """Runs (``ids``) × grid: each run's last non-NaN value at a cost ≤ the grid point."""
    out = np.full((ids.size, grid.size), np.nan)
    known = ~np.isnan(values)
    if not known.any():
        return out
    present = np.unique(runs[known])
    out[np.searchsorted(ids, present)] = step_values_on_grid(
        runs[known], cost[known], values[known], grid
    )
    return out


def on_axis(
    metrics: pd.DataFrame, requests: pd.DataFrame | None, variants: Sequence[str], x: str
) -> tuple[pd.DataFrame, pd.DataFrame | None, list[str]] | None:
    """What a slot figure draws against ``x``: the tables as given on the slot axis; against a
    cost, the metrics read on each variant's grid (:func:`on_cost_axis`), the requests placed on
    it and the note of runs that ended sooner; None when no slot costs any."""
    if x == "iteration":
        return metrics, requests, []
    if not spends(metrics, x):
        return None
    cost = on_cost_axis(metrics, requests, variants, x)
    return cost.metrics, cost.requests, [COST_RUNS_END] if cost.ended_sooner else []


def _placed(requests: pd.DataFrame | None, metrics: pd.DataFrame, x: str) -> pd.DataFrame | None:
    """``requests`` with ``request_bits`` where ``x`` is bits: the bits of each request's run at
    the end of its last recorded slot before the request arrived (0 before slot 1)."""
    if requests is None or x != "bits" or "request_iteration" not in requests:
        return requests
    out = requests.copy()
    if metrics.empty:
        out["request_bits"] = np.nan
        return out
    labels = pd.Index(pd.unique(metrics["variant"].astype(str)))
    runs = metrics["run"].to_numpy(dtype=np.int64)
    slots = metrics["iteration"].to_numpy(dtype=np.int64)
    width = int(max(runs.max(initial=0), out["run"].max() if len(out) else 0)) + 1
    depth = int(slots.max(initial=0)) + 2
    # each row's (variant, run, slot) as one ordered integer, the metrics' rows sorted by it
    run_key = labels.get_indexer(pd.Index(metrics["variant"].astype(str))) * width + runs
    order = np.argsort(run_key * depth + slots, kind="stable")
    keys = (run_key * depth + slots)[order]
    bits = metrics["bits"].to_numpy(dtype=float)[order]
    wanted = labels.get_indexer(pd.Index(out["variant"].astype(str))) * width + out["run"].to_numpy(
        dtype=np.int64
    )
    before = out["request_iteration"].to_numpy(dtype=float, na_value=np.nan) - 1
    arrived = np.isfinite(before) & (wanted >= 0)
    slot_before = np.where(arrived, before, 0).astype(np.int64)
    at = np.searchsorted(keys, wanted * depth + slot_before, side="right") - 1
    same_run = (at >= 0) & (keys[np.clip(at, 0, None)] // depth == wanted)
    placed = np.where(same_run, bits[np.clip(at, 0, None)], 0.0)  # no slot before it: 0 bits
    placed = np.where(arrived, placed, np.nan)
    out["request_bits"] = placed
    return out
