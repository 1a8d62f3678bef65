"""The ``unlearning_kl`` figure: a panel per variant from its first request, the divergence of the
unlearning protocol (blue, solid) against that of retraining from scratch (vermillion, dashed), the
best in family and the tolerance marked; a sweep's factors as a grid of panels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure

from gossipsim.figures import style as S
from gossipsim.figures.axes import (
    Legend,
    LogPanel,
    RequestNames,
    add_request_entries,
    band_handle,
    draw_request_marks,
    line_handle,
    request_marks,
    runs_text,
    wrap,
)
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.costaxis import (
    X_LABELS,
    on_axis,
    request_column,
    style_x_axis,
)
from gossipsim.figures.divergence_curves import Tolerance, best_lines, common_scales, tolerance_line
from gossipsim.figures.layout import (
    facets,
    figure_width,
    label_cells,
    variant_cells,
)
from gossipsim.figures.stats import (
    across_runs,
    band_matrix,
)
from gossipsim.states.divergences import divergences

if TYPE_CHECKING:
    pass


def plot_unlearning_kl(
    metrics: pd.DataFrame,
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    excess: bool = False,
    summary: dict[str, Any] | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
    x: str = "iteration",
) -> Path | Figure | None:
    """One panel per variant, from its first request: KL of unlearning (blue, solid) and of
    retraining from scratch on the same walk (vermillion, dashed), each with its band; the
    best-in-family KL (black, dashed) where the target is outside the family; request slots marked.
    A sweep of two or more dimensions is laid out by its factors (rows: its first dimension,
    columns: the others); the panels share their scales. A panel whose retrain baseline recorded
    no KL says so. Each variant's own divergence is drawn (KL, or the KSD of particle
    protocols: :mod:`gossipsim.states.divergences`); panels of different divergences have scales of
    their own.

    ``x = "bits"`` or ``"time"``: against cumulative bits or simulated seconds, from the earliest
    cost at which the first request arrived in any run (:mod:`gossipsim.figures.costaxis`: the
    rule); None when no slot costs any."""
    if requests.empty or "request_iteration" not in requests:
        return None
    if requests["request_iteration"].isna().all():  # no request arrived within any run
        return None
    read = on_axis(metrics, requests, variants, x)
    if read is None:
        return None
    metrics, on_grid, notes = read
    requests = requests if on_grid is None else on_grid
    arrived = requests.dropna(subset=["request_iteration"])
    drawn = [v for v in variants if (arrived["variant"] == v).any()]
    if not drawn:
        return None
    placed_at = request_column(x)
    cells = variant_cells(facets(summary, variants), drawn)
    kinds = divergences(metrics, drawn)
    width = figure_width(cells.cols)
    legend = Legend()
    runs: list[int] = []
    description = ""
    # where each variant's panel starts: the slot before its first request, or the cost at which
    # its first request arrived earliest
    firsts = {v: arrived.loc[arrived["variant"] == v, placed_at].min() for v in drawn}
    starts = {v: int(f) - 1 if x == "iteration" else float(f) for v, f in firsts.items()}
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 0.9 + S.PANEL_HEIGHT_IN * cells.rows, ax=ax, fig=fig)
        specs = area.add_gridspec(cells.rows, cells.cols)
        recorded: dict[str, tuple[LogPanel, bool]] = {}
        for variant in drawn:
            kind = kinds[variant]
            grid_, main = band_matrix(metrics, variant, kind.column, x)
            keep = grid_ >= starts[variant]
            xs = grid_[keep]
            runs.append(main.shape[0])
            lp = LogPanel()
            missing_retrain = True
            for column, role, name in (
                (kind.column, S.UNLEARNING, "unlearning"),
                (kind.retrain_column, S.RETRAIN, "retrain from scratch"),
            ):
                if column not in metrics.columns:
                    continue
                values = (
                    main if column == kind.column else band_matrix(metrics, variant, column, x)[1]
                )
                values = values[:, keep]
                if not np.isfinite(values).any():
                    continue
                missing_retrain = missing_retrain and column != kind.retrain_column
                band = across_runs(values, statistic)
                description = band.description
                label = name
                lp.band(xs, band.lo, band.hi, color=role["color"], alpha=S.BAND_ALPHA,
                        linewidth=0, label=label)  # fmt: skip
                lp.line(xs, band.center, label=label, **role)
                legend.add(label, band_handle(role["color"], linestyle=role["linestyle"]))
            best = best_lines(metrics, [variant], x=x).get(variant)
            if best is not None:
                by = best[1][keep]
                lp.line(xs, by, label="best in family", **S.BEST)
                legend.add("best in family", line_handle(**S.BEST))
                if excess and tolerance:
                    name = f"best in family + tolerance {tolerance:g}"
                    lp.line(xs, by + tolerance, label=name, **S.BEST_PLUS_TOLERANCE)
                    legend.add(name, line_handle(**S.BEST_PLUS_TOLERANCE))
            if tolerance and not excess:
                tol = Tolerance(tolerance, f"tolerance {tolerance:g}", S.TOLERANCE)
                tolerance_line(lp, kind, tol, legend)
            recorded[variant] = (lp, missing_retrain)
        scales = common_scales([recorded[v][0] for v in drawn], [kinds[v] for v in drawn])
        same_start = len(set(firsts.values())) == 1
        panel_width = area.bbox.width / area.dpi / cells.cols
        placed: dict[tuple[int, int], Axes] = {}
        names: list[RequestNames | None] = []
        first: LogPanel | None = None
        firsts_of: dict[str, LogPanel] = {}  # the first panel of each divergence: its scale
        at = {cells.where[v]: v for v in drawn}
        for variant in drawn:
            lp, missing_retrain = recorded[variant]
            kind = kinds[variant]
            r, c = cells.where[variant]
            span, zero = scales[kind.column]
            shared_x = first.main if first is not None and same_start else None
            top_ax = lp.render(area, specs[r, c], sharex=shared_x, sharey=firsts_of.get(kind.column),
                               span=span, zero=zero)  # fmt: skip
            first = first or lp
            firsts_of.setdefault(kind.column, lp)
            placed[r, c] = top_ax
            variant_marks = request_marks(arrived, [variant], placed_at)
            names.append(draw_request_marks(lp.axes, top_ax, variant_marks))
            add_request_entries(legend, variant_marks)
            if missing_retrain:
                why = (
                    "no retrain baseline (protocol.retrain_baseline = false)"
                    if kind.retrain_column not in metrics.columns
                    else f"retrain baseline: no {kind.name} recorded after the request"
                )
                top_ax.text(0.98, 0.96, why, transform=top_ax.transAxes, ha="right", va="top",
                          fontsize=6, gid="note")  # fmt: skip
            if cells.row_labels is None and len(drawn) > 1:
                top_ax.set_title(wrap(variant, panel_width - 0.3, 8))
            left = at.get((r, c - 1))
            if c == 0 or (left is not None and kinds[left].column != kind.column):
                top_ax.set_ylabel(kind.without)
            else:  # the scale is shared with the panel on the left
                for a in lp.axes:
                    a.tick_params(labelleft=False)
            below = any(cells.where[v] == (r + 1, c) for v in drawn)
            if not below:
                lp.bottom.set_xlabel(X_LABELS[x])
            style_x_axis(lp.bottom.xaxis, x, 5)
        label_cells(placed, cells, panel_width, S.PANEL_HEIGHT_IN - 0.4)
        heading = area.suptitle("Unlearning vs retraining from scratch (same walk)")
        for note in notes:
            legend.add(note, line_handle(linestyle="none"))
        key = legend.place(area, ncols=2 if width <= S.COLUMN_WIDTH_IN else 4,
                           title=f"{description} ({runs_text(runs)})")  # fmt: skip
        fit_height(area, ax is None and fig is None, S.PANEL_HEIGHT_IN * cells.rows, heading, key)
        return finish(area, path, names)
