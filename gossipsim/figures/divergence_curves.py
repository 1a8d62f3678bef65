"""The divergence curves: ``kl_vs_iteration``, ``kl_vs_time`` and ``kl_vs_local_iterations``.

Each variant's divergence (KL(q ‖ target), or the KSD of a particle protocol) against the slot,
the simulated seconds (each variant's line ending where its last run ends) or the total local
iterations L·i: the median over runs with the 12.5th-87.5th percentile band, or the mean with its
95% confidence interval, on a log axis whose exact zeros are drawn past a break, with the best in
family, the tolerance and the request slots marked. :func:`divergence_figure` draws such curves in
the panels of a sweep, each divergence on its own scale; ``compare`` draws the curves of several
folders with it, ``unlearning_kl`` shares its best-in-family lines, tolerance line and scales, and
:func:`summary_tolerance` and :func:`summary_excess` read summary.json's tolerance and whether
the variants are judged by KL − best-in-family KL.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
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
    RequestMark,
    RequestNames,
    add_request_entries,
    band_handle,
    draw_request_marks,
    line_handle,
    marks_by_variant,
    merge_marks,
    runs_text,
    wrap,
)
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.costaxis import (
    COST_RUNS_END,
    X_LABELS,
    on_axis,
    request_column,
    style_x_axis,
)
from gossipsim.figures.layout import (
    Facets,
    Panel,
    facets,
    grid,
)
from gossipsim.figures.stats import (
    across_runs,
    band_matrix,
    step_values_on_grid,
)
from gossipsim.states.divergences import KL, Divergence, divergences
from gossipsim.states.divergences import title as divergence_title

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class Curve:
    """One variant's divergence against ``x``, a row per run."""

    variant: str
    x: np.ndarray
    values: np.ndarray  # runs × points


def best_lines(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    scale: dict[str, float] | None = None,
    x: str = "iteration",
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each variant's best-in-family KL against the slot (or the column ``x`` of a table read on
    a cost grid) (median over runs), where it is known."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if "best_family_kl" not in metrics.columns:
        return out
    for v in variants:
        grid_, best = band_matrix(metrics, v, "best_family_kl", x)
        line = across_runs(best, "median").center if best.size else np.zeros(0)
        if np.isfinite(line).any():
            out[v] = (grid_ * (scale or {}).get(v, 1.0), line)
    return out


def _constant(lines: dict[str, tuple[np.ndarray, np.ndarray]]) -> float | None:
    """The one value of every line when all are the same constant (the same data and target), else
    None."""
    values: list[float] = []
    for _, y in lines.values():
        y = y[np.isfinite(y)]
        if y.size == 0:
            continue
        if float(np.ptp(y)) > 1e-9 * max(1.0, float(np.abs(y).max())):
            return None
        values.append(float(y[0]))
    if not values or max(values) - min(values) > 1e-9 * max(1.0, abs(max(values))):
        return None
    return values[0]


@dataclass(frozen=True)
class Tolerance:
    """A tolerance line: its value, its name in the legend and its style."""

    value: float
    label: str
    style: dict[str, Any]
    #: the curves it is the tolerance of (None: all); drawn only in panels holding one of them
    curves: frozenset[str] | None = None


def divergence_figure(
    path: Where,
    curves: Sequence[Curve],
    fac: Facets,
    *,
    statistic: str,
    tolerance: float | None,
    excess: bool,
    best: dict[str, tuple[np.ndarray, np.ndarray]],
    marks: dict[str, list[RequestMark]],
    xlabel: str,
    title: str,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
    linestyles: dict[str, Any] | None = None,
    tolerances: Sequence[Tolerance] | None = None,
    divergence: dict[str, Divergence] | None = None,
    notes: Sequence[str] = (),
    x: str = "iteration",
    share_x: bool = True,
) -> Path | Figure:
    """Divergence curves (centre line and band per variant) in the panels of ``fac``, on one
    shared scale (x and y; with ``share_x`` false each panel's x axis spans its own curves);
    ``linestyles`` (variant -> style) outlines each band in its line's
    style, so that overlapping bands stay told apart (``gossipsim compare``); ``tolerances``
    replaces the single ``tolerance`` line. ``divergence`` says what each curve is (variant ->
    divergence; KL where not given): curves of different divergences never share a panel or a
    scale, each panel of ``fac`` is split into one per divergence, its y axis labelled.
    ``notes`` are said in the legend, each without a mark; ``x`` names what the x axis is (its
    ticks: :func:`~gossipsim.figures.costaxis.style_x_axis`)."""
    by_variant = {c.variant: c for c in curves}
    placed = _divergence_panels(fac, by_variant, divergence or {})
    panels = [p for p, _ in placed]
    kinds = [d for _, d in placed]
    rows, cols, width = grid(len(panels))
    legend = Legend()
    common = _constant(best)
    single_best = len(best) == 1
    description = ""
    if tolerances is None:
        tolerances = (
            [Tolerance(tolerance, f"tolerance {tolerance:g}", S.TOLERANCE)]
            if tolerance and not excess
            else []
        )
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 0.9 + S.PANEL_HEIGHT_IN * rows, ax=ax, fig=fig)
        specs = area.add_gridspec(rows, cols)
        recorded: list[LogPanel] = []
        for panel, kind in zip(panels, kinds, strict=True):
            lp = LogPanel()
            recorded.append(lp)
            for v in panel.variants:
                if v not in by_variant:
                    continue
                curve = by_variant[v]
                band = across_runs(curve.values, statistic)
                description = band.description
                colour, label = fac.colour[v], fac.label[v]
                ls = (linestyles or {}).get(v)
                if ls is None:
                    lp.band(curve.x, band.lo, band.hi, color=colour, alpha=S.BAND_ALPHA, linewidth=0,
                            label=label)  # fmt: skip
                    lp.line(curve.x, band.center, color=colour, label=label)
                    legend.add(label, band_handle(colour))
                else:  # a faint band outlined in the line's style
                    lp.band(curve.x, band.lo, band.hi, color=colour, alpha=0.08, linewidth=0,
                            label=label)  # fmt: skip
                    for edge in (band.lo, band.hi):
                        lp.line(curve.x, edge, color=colour, linestyle=ls, linewidth=0.5, alpha=0.7,
                                label="_band edge")  # fmt: skip
                    lp.line(curve.x, band.center, color=colour, linestyle=ls, label=label)
                    legend.add(label, band_handle(colour, linestyle=ls))
                if v in best and common is None:
                    bx, by = best[v]
                    style = S.BEST if single_best else {**S.BEST, "color": colour}
                    name = "best in family" if single_best else f"{label}: best in family"
                    lp.line(bx, by, label=name, **style)
                    legend.add(name, line_handle(**style))
                    if excess and tolerance:
                        style = {**style, "linestyle": ":"}
                        name = f"{name} + tolerance {tolerance:g}"
                        lp.line(bx, by + tolerance, label=name, **style)
                        legend.add(name, line_handle(**style))
            if common is not None:
                name = f"best in family ({common:.3g})"
                lp.hline(common, label=name, **S.BEST)
                legend.add(name, line_handle(**S.BEST))
                if excess and tolerance:
                    name = f"best in family + tolerance {tolerance:g}"
                    lp.hline(common + tolerance, label=name, **S.BEST_PLUS_TOLERANCE)
                    legend.add(name, line_handle(**S.BEST_PLUS_TOLERANCE))
            for tol in tolerances:
                if tol.curves is None or tol.curves & set(panel.variants):
                    tolerance_line(lp, kind, tol, legend)
        scales = common_scales(recorded, kinds)
        panel_width = area.bbox.width / area.dpi / cols
        names: list[RequestNames | None] = []
        firsts: dict[str, LogPanel] = {}  # the first panel of each divergence: its scales
        for k, (panel, lp) in enumerate(zip(panels, recorded, strict=True)):
            r, c = divmod(k, cols)
            kind = kinds[k]
            span, zero = scales[kind.column]
            first = firsts.get(kind.column)
            main = lp.render(area, specs[r, c], sharex=first.main if first and share_x else None,
                             sharey=first, span=span, zero=zero)  # fmt: skip
            firsts.setdefault(kind.column, lp)
            panel_marks = merge_marks(marks, panel.variants)
            names.append(draw_request_marks(lp.axes, main, panel_marks))
            add_request_entries(legend, panel_marks)
            if panel.title:
                main.set_title(wrap(panel.title, panel_width - 0.3, 8))
            if c == 0 or kinds[k - 1].column != kind.column:
                main.set_ylabel(kind.axis)
            else:  # the scale is shared with the panel on the left: its labels once per row
                for a in lp.axes:
                    a.tick_params(labelleft=False)
            if k + cols >= len(panels):
                lp.bottom.set_xlabel(xlabel)
            style_x_axis(lp.bottom.xaxis, x, 6)
        for note in notes:
            legend.add(note, line_handle(linestyle="none"))
        heading = area.suptitle(wrap(title, area.bbox.width / area.dpi - 0.2, 9))
        head = f"{fac.line_title}: " if fac.line_title else ""
        runs = runs_text([cv.values.shape[0] for cv in curves])
        key = legend.place(area, ncols=2 if width <= S.COLUMN_WIDTH_IN else 4,
                           title=f"{head}{description} ({runs})")  # fmt: skip
        fit_height(area, ax is None and fig is None, S.PANEL_HEIGHT_IN * rows, heading, key)
        return finish(area, path, names)


#: a tolerance this far below every value of a particle divergence is not drawn (it says so)
UNREACHABLE_DECADES = 3


def tolerance_line(lp: LogPanel, kind: Divergence, tol: Tolerance, legend: Legend) -> None:
    """The tolerance as a horizontal line of ``lp``; for a divergence other than KL, a tolerance
    more than :data:`UNREACHABLE_DECADES` decades below everything the panel draws is named in the
    legend instead: the KSD of N particles is a V-statistic with a positive floor of order 1/N, so
    such a tolerance (the default 1e-9, made for KL, which can reach 0) only stretches the axis
    over empty decades."""
    drawn = lp.positive_range()
    if kind.column != KL.column and drawn and tol.value < drawn[0] / 10.0**UNREACHABLE_DECADES:
        label = f"{tol.label}: far below every {kind.name} value, not drawn"
        legend.add(label, line_handle(linestyle="none"))
        return
    lp.hline(tol.value, label=tol.label, **tol.style)
    legend.add(tol.label, line_handle(**tol.style))


def _divergence_panels(
    fac: Facets, drawn: Collection[str], divergence: dict[str, Divergence]
) -> list[tuple[Panel, Divergence]]:
    """The panels of ``fac`` that hold a curve of ``drawn``, each split into one per divergence
    (variant -> divergence, KL where not given) in the order the divergences first appear."""

    def of(v: str) -> Divergence:
        return divergence.get(v, KL)

    order = list(dict.fromkeys(of(v).column for v in fac.variants if v in drawn))
    out: list[tuple[Panel, Divergence]] = []
    for panel in fac.panels:
        if not any(v in drawn for v in panel.variants):
            continue
        if len(order) <= 1:  # one divergence: the panel as it is
            out.append((panel, of(next(v for v in panel.variants if v in drawn))))
            continue
        for column in order:
            part = [v for v in panel.variants if v in drawn and of(v).column == column]
            if part:
                out.append((Panel(panel.title, part), of(part[0])))
    return out


def common_scales(
    panels: Sequence[LogPanel], kinds: Sequence[Divergence]
) -> dict[str, tuple[tuple[float, float] | None, bool]]:
    """The common log scale of the panels of each divergence: its positive range and whether a
    strip for exact zeros is drawn."""
    out: dict[str, tuple[tuple[float, float] | None, bool]] = {}
    for column in dict.fromkeys(k.column for k in kinds):
        same = [lp for lp, k in zip(panels, kinds, strict=True) if k.column == column]
        out[column] = (_common_span(same), any(lp.has_zero() for lp in same))
    return out


def _common_span(panels: Sequence[LogPanel]) -> tuple[float, float] | None:
    """The positive range of every panel together (their common log scale)."""
    ranges = [r for r in (lp.positive_range() for lp in panels) if r is not None]
    if not ranges:
        return None
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def plot_kl_vs_iteration(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    title: str = "",
    x_scale: dict[str, float] | None = None,
    xlabel: str = "",
    excess: bool = False,
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
    x: str = "iteration",
) -> Path | Figure | None:
    """KL(q ‖ target) (or the variant's divergence: the KSD of particle protocols,
    :mod:`gossipsim.states.divergences`) vs slot: ``statistic`` over runs and its band, one line per
    variant, faceted by the second dimension of a sweep (``summary``), request slots
    (``requests``) marked. Written to ``path`` (returned), or without a path the Figure is
    returned; ``ax`` (drawn in its place) or ``fig`` (a Figure or SubFigure) draws into a figure
    of the caller's, as every ``plot_*``.

    ``x_scale`` multiplies each variant's slots (e.g. by L for total local iterations L·i, Fig. 4).
    Where the target lies outside the family, its best-in-family KL is drawn dashed: once, in black,
    when it is the same for every variant. Variants of different divergences are drawn in
    separate panels.

    ``x = "bits"`` or ``"time"`` draws the same against cumulative bits or simulated seconds, each
    run read on its variant's grid of that cost (:mod:`gossipsim.figures.costaxis`: the rule);
    None when no slot costs any.
    """
    read = on_axis(metrics, requests, variants, x)
    if read is None:
        return None
    metrics, requests, notes = read
    kinds = divergences(metrics, variants)
    curves = []
    for variant in variants:
        grid_, values = band_matrix(metrics, variant, kinds[variant].column, x)
        curves.append(Curve(variant, grid_ * (x_scale or {}).get(variant, 1.0), values))
    return divergence_figure(
        path,
        curves,
        facets(summary, variants),
        statistic=statistic,
        tolerance=tolerance,
        excess=excess,
        best=best_lines(metrics, variants, x_scale, x),
        marks=marks_by_variant(requests, variants, request_column(x), x_scale),
        xlabel=xlabel or X_LABELS[x],
        title=title or divergence_title(kinds),
        ax=ax,
        fig=fig,
        divergence=kinds,
        notes=notes,
        x=x,
    )


def plot_kl_vs_time(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    title: str = "",
    points: int = 400,
    excess: bool = False,
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """KL (or the variant's divergence) vs simulated time, on a time grid common to the lines of
    a panel (each run's divergence is a step function of time); None when no slot takes any time.

    Each variant's line ends where its runs end: at the latest time any of its runs reached (its
    last slot's end), a point of its own; a run that ended sooner keeps its last value up to there
    (what it ended with: a run stopped once done, or its last slot), which the legend says when
    some run did. A request arriving at different times in different runs is shaded from its
    first to its last arrival (named in the legend). The panels of a sweep share the divergence
    axis; each panel's time axis and grid span its own lines (variants whose slots cost seconds
    in one panel and milliseconds in another, as on links of different rates, stay readable).
    Where every run of a variant has one best-in-family KL (a target outside the family, no
    request changing it), it is drawn as on the slot figures."""
    if not (metrics["time"].max() > 0):
        return None
    kinds = divergences(metrics, variants)
    fac = facets(summary, variants)
    curves = []
    runs, times = metrics["run"].to_numpy(), metrics["time"].to_numpy(dtype=float)
    in_variant = {
        v: (metrics["variant"] == v).to_numpy(dtype=bool, na_value=False) for v in variants
    }  # the variant's rows of three columns (a filtered table copies all)
    ended_sooner = False
    best: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for panel in fac.panels:
        drawn = [v for v in panel.variants if in_variant.get(v, np.zeros(0, bool)).any()]
        if not drawn:
            continue
        longest = max(float(times[in_variant[v]].max()) for v in drawn)
        grid_ = np.linspace(0.0, longest, points)
        for variant in drawn:
            mask = in_variant[variant]
            column = metrics[kinds[variant].column].to_numpy(dtype=float, na_value=np.nan)[mask]
            ends = run_ends(runs[mask], times[mask])
            x = np.append(grid_[grid_ < ends.max()], ends.max())  # to the last run's end
            rows = step_values_on_grid(runs[mask], times[mask], column, x)
            curves.append(Curve(variant, x, rows))
            ended_sooner = ended_sooner or bool((ends < ends.max()).any())
            level = _one_best(metrics, mask)
            if level is not None:
                best[variant] = (x, np.full(x.shape, level))
    marks = (
        marks_by_variant(requests, variants, "request_time")
        if requests is not None
        and "request_time" in requests
        and requests["request_time"].gt(0).any()
        else {}
    )
    return divergence_figure(
        path,
        curves,
        fac,
        statistic=statistic,
        tolerance=tolerance,
        excess=excess,
        best=best,
        marks=marks,
        xlabel="simulated time (s)",
        title=title or f"{divergence_title(kinds)} against simulated time",
        ax=ax,
        fig=fig,
        divergence=kinds,
        notes=[RUNS_END] if ended_sooner else [],
        share_x=False,
    )


def _one_best(metrics: pd.DataFrame, mask: np.ndarray) -> float | None:
    """The best-in-family KL of the rows ``mask`` when it is one number (None: not known, or it
    changes, as at a request)."""
    if "best_family_kl" not in metrics.columns:
        return None
    values = metrics["best_family_kl"].to_numpy(dtype=float, na_value=np.nan)[mask]
    values = values[np.isfinite(values)]
    if values.size == 0 or float(np.ptp(values)) > 1e-9 * max(1.0, float(np.abs(values).max())):
        return None
    return float(values[0])


#: what the time figure says of runs that end before their variant's line does
RUNS_END = COST_RUNS_END


def run_ends(runs: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The latest time of each run's rows (runs in ascending order): where the run ended."""
    ids, codes = np.unique(runs, return_inverse=True)
    ends = np.full(ids.size, -np.inf)
    np.maximum.at(ends, codes, times)
    return ends


def summary_excess(summary: dict[str, Any]) -> bool:
    """Whether a variant is judged by KL − best-in-family KL (``[metrics] excess``): its tolerance
    is then drawn above the best in family."""
    return any(
        bool(entry.get("resolved", {}).get("metrics", {}).get("excess", False))
        for entry in summary.get("variants", {}).values()
    )


def summary_tolerance(summary: dict[str, Any]) -> float | None:
    """The first variant's ``[metrics] tolerance`` that summary.json records, else None."""
    for entry in summary.get("variants", {}).values():
        tol = entry.get("resolved", {}).get("metrics", {}).get("tolerance")
        if tol:
            return float(tol)
    return None
