"""The ``particles`` figure: the particle sets of one run over the contours of the exact posterior.

For each variant whose particles.csv rows are at least 2-D, one row of panels for its first run
kept (run 0 unless it failed): the protocol's particles *after learning* (its last record before the
first request), *after forgetting* (its last record) and the retrain baseline's at its last record,
each over the exact posterior's highest-density regions (50%, 90% and 99% of its mass) of the data
meant to be learned then: every node's after learning, without the forgotten nodes after (with
the 50% region of every node's dashed, where the forgotten data were). The
densities are those summary.json records (``theory.target_density``, on a grid:
:mod:`gossipsim.logdensity.densitygrid`); a folder without them (a model whose density is not known exactly,
data drawn per run) gets the particles without contours, and says so. For d > 2 the first two
coordinates are drawn, without contours (the marginal density is not recorded); d = 1 is not
drawn. Each panel gives the divergence of that set (the KSD) and, where the metrics table has it,
its MMD² to exact draws of the same target. :func:`plot_particles` writes it to a file or returns
the Figure, as the other figures do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gossipsim.figures import style as S
from gossipsim.figures.axes import Legend, line_handle, wrap
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.logdensity.densitygrid import highest_density_levels
from gossipsim.states.divergences import divergence, divergences

#: the mass of each highest-density region drawn, from the outside in
MASSES = (0.99, 0.9, 0.5)
#: their fills, light to dark
FILLS = ("#e6eef6", "#c4d6e8", "#95b4d3")
#: the protocol's and the retrain baseline's particles
MARKERS: dict[str, dict[str, Any]] = {
    "main": {"color": S.UNLEARNING["color"], "marker": "o", "s": 9},
    "retrain": {"color": S.RETRAIN["color"], "marker": "s", "s": 8},
}
PANEL_IN = 2.25
#: a row's height beyond its square panels: the panels' titles and x labels
ROW_EXTRA_IN = 0.2
REGIONS_LABEL = "exact posterior: 50%, 90%, 99% highest-density regions"
BEFORE_LABEL = "50% region of the exact posterior with every node"
PROTOCOL_LABEL = "particles of the protocol"
RETRAIN_LABEL = "particles of the retrain baseline"
NO_DENSITY = "no exact density recorded: particles only"


@dataclass(frozen=True)
class ParticlePanel:
    """One panel: a set of particles (``points``, n × 2) of ``world`` after slot ``slot``, over
    the density of the target without ``forgotten`` (None: none drawn)."""

    title: str
    world: str
    slot: int
    points: np.ndarray
    forgotten: tuple[str, ...]
    notes: str = ""


def particle_dimension(rows: pd.DataFrame) -> int:
    """d of a variant's particles.csv rows: its ``theta_i`` columns that hold values."""
    return sum(
        1
        for name in rows.columns
        if name.startswith("theta_") and name[6:].isdigit() and rows[name].notna().any()
    )


def _points(rows: pd.DataFrame, world: str, slot: int) -> np.ndarray:
    chosen = rows.loc[(rows["world"] == world) & (rows["iteration"] == slot)]
    chosen = chosen.sort_values("particle", kind="stable")
    return chosen[["theta_0", "theta_1"]].to_numpy(dtype=float)


def _metric_note(
    metrics: pd.DataFrame | None, variant: str, run: int, slot: int, columns: Sequence[str]
) -> str:
    """The values of ``columns`` (the divergence, then the MMD² to exact draws) of the run at
    ``slot``, as text (empty where the table has no such row)."""
    if metrics is None or not len(metrics):
        return ""
    row = metrics.loc[
        (metrics["variant"].astype(str) == variant)
        & (metrics["run"] == run)
        & (metrics["iteration"] == slot)
    ]
    if not len(row):
        return ""
    parts = []
    for column, name in zip(columns, (_name(columns[0]), "MMD²"), strict=False):
        if column in row.columns and pd.notna(row[column].iloc[-1]):
            parts.append(f"{name} {float(row[column].iloc[-1]):.3g}")
    return "\n".join(parts)


def _name(column: str) -> str:
    """The divergence's short name (``KSD``) from its column (``ksd``, ``retrain_ksd``)."""
    return divergence(column.removeprefix("retrain_")).name


def variant_panels(
    particles: pd.DataFrame,
    requests: pd.DataFrame | None,
    metrics: pd.DataFrame | None,
    variant: str,
) -> tuple[int, int, list[ParticlePanel]] | None:
    """The run drawn, d, and the panels of ``variant`` (None without 2-D particles)."""
    rows = particles.loc[particles["variant"].astype(str) == variant]
    if not len(rows):
        return None
    dimension = particle_dimension(rows)
    if dimension < 2:
        return None
    run = int(rows["run"].min())
    rows = rows.loc[rows["run"] == run]
    mine = (
        requests.loc[(requests["variant"].astype(str) == variant) & (requests["run"] == run)]
        if requests is not None and len(requests)
        else pd.DataFrame(columns=["request_iteration", "node"])
    )
    mine = mine.dropna(subset=["request_iteration"]).sort_values("request_iteration")
    main = np.unique(rows.loc[rows["world"] == "main", "iteration"].to_numpy(dtype=np.int64))
    retrain = np.unique(rows.loc[rows["world"] == "retrain", "iteration"].to_numpy(dtype=np.int64))
    if not main.size:
        return None
    kind = divergences(metrics, [variant])[variant].column if metrics is not None else "ksd"
    panels: list[ParticlePanel] = []

    def learned(slot: int) -> ParticlePanel:
        note = _metric_note(metrics, variant, run, slot, (kind, "mmd"))
        return ParticlePanel(
            f"after learning (slot {slot:,})", "main", slot, _points(rows, "main", slot), (), note
        )

    if not len(mine):
        panels.append(learned(int(main[-1])))
        return run, dimension, panels
    first = int(mine["request_iteration"].iloc[0])
    forgotten = tuple(dict.fromkeys(str(n) for n in mine["node"]))
    nodes = ", ".join(forgotten)
    before = main[main <= first - 1]
    if before.size:
        panels.append(learned(int(before[-1])))
    if main[-1] >= first:
        slot = int(main[-1])
        note = _metric_note(metrics, variant, run, slot, (kind, "mmd_unlearned"))
        word = "nodes" if len(forgotten) > 1 else "node"
        panels.append(
            ParticlePanel(f"after forgetting {word} {nodes} (slot {slot:,})", "main", slot,
                          _points(rows, "main", slot), forgotten, note)
        )  # fmt: skip
    if retrain.size:
        slot = int(retrain[-1])
        note = _metric_note(
            metrics, variant, run, slot, (f"retrain_{kind}", "retrain_mmd_unlearned")
        )
        panels.append(
            ParticlePanel(f"retrained without {nodes} (slot {slot:,})", "retrain", slot,
                          _points(rows, "retrain", slot), forgotten, note)
        )  # fmt: skip
    return run, dimension, panels


def recorded_density(
    summary: dict[str, Any] | None, variant: str
) -> tuple[np.ndarray, np.ndarray, dict[tuple[str, ...], np.ndarray]] | None:
    """The grid and each stage's relative log-density (by its forgotten nodes, sorted) that
    summary.json records for ``variant`` (``theory.target_density``), None without."""
    entry = (summary or {}).get("variants", {}).get(variant, {})
    grid = (entry.get("theory") or {}).get("target_density") if isinstance(entry, dict) else None
    if not isinstance(grid, dict):
        return None
    try:
        x = np.asarray(grid["x"], dtype=float)
        y = np.asarray(grid["y"], dtype=float)
        stages = {
            tuple(sorted(str(n) for n in stage["forgotten"])): np.asarray(
                stage["log_density"], dtype=float
            )
            for stage in grid["stages"]
        }
    except (KeyError, TypeError, ValueError):
        return None
    if any(v.shape != (y.size, x.size) for v in stages.values()):
        return None
    return x, y, stages


def _limits(
    panels: Sequence[ParticlePanel], grid: tuple[np.ndarray, np.ndarray] | None
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Axis limits holding every particle drawn and the density's grid, with a margin."""
    points = np.concatenate([p.points for p in panels if p.points.size] or [np.zeros((0, 2))])
    lows, highs = [], []
    if points.size:
        lows.append(points.min(axis=0))
        highs.append(points.max(axis=0))
    if grid is not None:
        lows.append(np.array([grid[0].min(), grid[1].min()]))
        highs.append(np.array([grid[0].max(), grid[1].max()]))
    low = np.min(lows, axis=0) if lows else np.array([-1.0, -1.0])
    high = np.max(highs, axis=0) if highs else np.array([1.0, 1.0])
    margin = 0.04 * np.maximum(high - low, 1e-9)
    low, high = low - margin, high + margin
    return (float(low[0]), float(high[0])), (float(low[1]), float(high[1]))


def _regions(ax: Axes, x: np.ndarray, y: np.ndarray, log_density: np.ndarray) -> None:
    """The highest-density regions of :data:`MASSES`, filled light to dark, outlined."""
    levels = highest_density_levels(log_density, MASSES)  # ascending: 99%, 90%, 50%
    # regions the grid cannot tell apart (a density narrower than its cells: every level the
    # peak's) share one level: each is drawn once, in the colour of the smallest mass
    kept = [i for i in range(levels.size) if i == levels.size - 1 or levels[i] < levels[i + 1]]
    top = float(np.max(log_density)) + 1.0
    bounds = [*levels[kept].tolist(), top]
    ax.contourf(x, y, log_density, levels=bounds, colors=[FILLS[i] for i in kept], zorder=0)
    ax.contour(x, y, log_density, levels=levels[kept].tolist(), colors="#5a7fa8",
               linewidths=0.5, linestyles="solid", zorder=1)  # fmt: skip


def _outline(ax: Axes, x: np.ndarray, y: np.ndarray, log_density: np.ndarray) -> None:
    """The 50% region of another target, dashed (the posterior before forgetting)."""
    levels = highest_density_levels(log_density, MASSES[-1:])
    ax.contour(x, y, log_density, levels=levels.tolist(), colors="0.35", linewidths=0.6,
               linestyles="--", zorder=1)  # fmt: skip


def plot_particles(
    particles: pd.DataFrame,
    requests: pd.DataFrame | None,
    variants: Sequence[str],
    path: Where = None,
    *,
    summary: dict[str, Any] | None = None,
    metrics: pd.DataFrame | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """The particle sets of each variant's first run kept (particles.csv, ``[metrics]
    particles``): after learning, after forgetting and retrained from scratch, over the exact
    posterior's 50/90/99% highest-density regions that summary.json records
    (``theory.target_density``), with each set's KSD and MMD² from ``metrics`` (drawn by
    :func:`draw_particles`). None without particle sets of d ≥ 2."""
    area = draw_particles(particles, requests, variants, summary=summary, metrics=metrics,
                          ax=ax, fig=fig)  # fmt: skip
    return None if area is None else finish(area, path)


def draw_particles(
    particles: pd.DataFrame,
    requests: pd.DataFrame | None,
    variants: Sequence[str],
    *,
    summary: dict[str, Any] | None = None,
    metrics: pd.DataFrame | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Figure | SubFigure | None:
    """The ``particles`` figure (see the module doc) in a drawing area, None when no variant has
    particle sets of d ≥ 2."""
    if particles is None or not len(particles) or "theta_0" not in particles.columns:
        return None
    rows: list[tuple[str, int, int, list[ParticlePanel]]] = []
    for variant in variants:
        found = variant_panels(particles, requests, metrics, variant)
        if found is not None and found[2]:
            rows.append((variant, *found))
    if not rows:
        return None
    cols = max(len(panels) for *_, panels in rows)
    width = min(S.DOUBLE_WIDTH_IN, max(S.COLUMN_WIDTH_IN, PANEL_IN * cols))
    panel_in = width / cols
    legend = Legend()
    notes: list[str] = []
    with mpl.rc_context(S.RC):
        row_in = panel_in + ROW_EXTRA_IN
        area = drawing_area(width, row_in * len(rows) + 1.0, ax=ax, fig=fig)
        specs = area.add_gridspec(len(rows), cols)
        for r, (variant, _run, dimension, panels) in enumerate(rows):
            density = recorded_density(summary, variant) if dimension == 2 else None
            if dimension > 2:
                notes.append(f"{variant}: θ₀, θ₁ of d = {dimension}, no density drawn")
            elif density is None:
                notes.append(f"{variant}: {NO_DENSITY}")
            grid = (density[0], density[1]) if density is not None else None
            xlim, ylim = _limits(panels, grid)
            for c, panel in enumerate(panels):
                pax = area.add_subplot(specs[r, c])
                if density is not None:
                    x, y, stages = density
                    here = stages.get(tuple(sorted(panel.forgotten)))
                    if here is not None:
                        _regions(pax, x, y, here)
                        legend.add(REGIONS_LABEL, Patch(facecolor=FILLS[1], edgecolor="#5a7fa8",
                                                        linewidth=0.5))  # fmt: skip
                    before = stages.get(())
                    if panel.forgotten and before is not None:
                        _outline(pax, x, y, before)
                        legend.add(BEFORE_LABEL, line_handle(color="0.35", linestyle="--",
                                                             linewidth=0.6))  # fmt: skip
                style = MARKERS[panel.world]
                label = PROTOCOL_LABEL if panel.world == "main" else RETRAIN_LABEL
                pax.scatter(panel.points[:, 0], panel.points[:, 1], c=style["color"],
                            marker=style["marker"], s=style["s"], linewidths=0.3,
                            edgecolors="white", zorder=3, label=label, gid=panel.world)  # fmt: skip
                legend.add(label, Line2D([], [], color=style["color"], marker=style["marker"],
                                         linestyle="none", markersize=4))  # fmt: skip
                pax.set_xlim(*xlim)
                pax.set_ylim(*ylim)
                pax.set_aspect("equal", adjustable="box")
                pax.set_title(wrap(panel.title, panel_in - 0.2, 8))
                if panel.notes:
                    pax.text(0.03, 0.97, panel.notes, transform=pax.transAxes, ha="left",
                             va="top", fontsize=6.5, zorder=4,
                             bbox={"facecolor": "white", "alpha": 0.75, "linewidth": 0,
                                   "pad": 1.5})  # fmt: skip
                pax.set_xlabel("θ₀")
                if c == 0:
                    pax.set_ylabel(f"{variant}\nθ₁" if len(rows) > 1 else "θ₁")
                pax.tick_params(labelsize=6.5)
        run_text = ", ".join(sorted({f"run {run}" for _, run, _, _ in rows}))
        heading = area.suptitle(
            wrap(
                f"{(summary or {}).get('name', '')}: particles ({run_text}) over the exact "
                "posterior" + (f" ({'; '.join(notes)})" if notes else ""),
                area.bbox.width / area.dpi - 0.2,
                9,
            )
        )
        key = legend.place(area, ncols=2)
        fit_height(area, ax is None and fig is None, row_in * len(rows), heading, key)
    return area
