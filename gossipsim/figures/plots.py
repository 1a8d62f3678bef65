"""The standard figures of a results folder, readable at paper-column width.

- ``kl_vs_iteration``: KL(q ‖ target) against the slot, one line per variant: the median over runs
  with the 12.5th-87.5th percentile band, or (``statistic="mean"``) the mean with its 95% confidence
  interval; log scale, exact zeros drawn past a break in the axis; request slots marked;
- ``kl_vs_time``: the same against simulated seconds (skipped when no slot takes any time), each
  variant's line ending where its last run ends;
- ``kl_vs_local_iterations``: the same against total local iterations L·i (Fig. 4);
- ``unlearning_kl``: one panel per variant from its first request: KL of the unlearning protocol
  (blue, solid) and of the retrain-from-scratch baseline (vermillion, dashed), best in family;
- ``latency``: one panel per request, rows the variants and columns their requests: Kaplan–Meier
  estimates over *all* requests of the removal, unlearning and retrain latencies (a request not
  served by the end of its run censored there), each median with its Brookmeyer–Crowley interval
  and the (restricted) mean with its interval, the observation window and the expected removal
  latency, named for what it is;
- ``cover_time``: mean cover time (moves, 95% CI) per variant or against the number of nodes, with
  the exact expectation, Matthews' bounds and the asymptotic formula where known (a centralised
  protocol, which has no walk, left out; tick labels kept apart);
- ``compare.png`` of ``gossipsim compare`` (:func:`plot_comparison`): the KL curves of several
  results folders in one panel;
- ``evaluation``: every held-out metric (:func:`evaluation_columns`) and KL to the optimum against
  the slot, the target's own metrics dashed, request slots marked; for particle protocols
  accuracy, NLL, ECE, particle spread, a mixture's MMD² and the KSD, the retrain baseline's
  ``retrain_`` metrics and KSD dashed beside the protocol's;
- ``unlearning_accuracy``: accuracy on the forgotten and on the remaining labels against the slot,
  the protocol (blue, solid) against retraining from scratch (vermillion, dashed), request slots
  marked (particle protocols with requests);
- ``particles``: the particle sets of one run (particles.csv) after learning and after forgetting,
  the protocol's and the retrain baseline's, over the exact posterior's highest-density regions
  (summary.json ``theory.target_density``; :mod:`gossipsim.figures.particles`);
- ``visits``: the graph of each variant that walks, each node coloured by the deviation of its
  share of token visits from the walk's stationary share, sized by degree, requested nodes ringed.

Each variant's divergence is read from the metrics table (:mod:`gossipsim.states.divergences`): KL(q ‖
target) for natural parameters, the kernelized Stein discrepancy (``ksd``) for particle sets. The
``kl_*`` figures (named so for every folder), ``unlearning_kl``, ``latency``, ``evaluation`` and
``compare.png`` draw and label the one each variant has; variants (or folders) of different
divergences never share a panel or a scale.

A sweep of two or more dimensions is faceted: one panel per value of its second (and later)
dimensions, one line per value of the first (:mod:`gossipsim.figures.layout`); the panels of a
figure share their axes. Legends sit below the panels, fitted to the figure's width, and name every
line and band; titles wrap.

Every function takes the tables as DataFrames, so a notebook can call them on :class:`Results`
directly. With a path it writes the figure there and returns the path; without one it returns the
Figure; ``ax=`` draws it in the place of an axes of the caller's (a SubFigure in its cell), ``fig=``
into a Figure or SubFigure of the caller's. Figures are made without pyplot
(:mod:`gossipsim.figures.canvas`), so that the backend of a notebook or script is left alone.
:func:`plot_results` writes all that apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import networkx as nx
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure, SubFigure
from matplotlib.patches import Patch
from matplotlib.patheffects import withStroke
from matplotlib.ticker import MaxNLocator, NullLocator
from matplotlib.transforms import Bbox

from gossipsim.figures import style as S
from gossipsim.figures.axes import (
    Legend,
    LogPanel,
    RequestMark,
    RequestNames,
    add_request_entries,
    band_handle,
    draw_request_marks,
    fitted_legend,
    keep_tick_labels_apart,
    line_handle,
    request_marks,
    separate_request_names,
    tidy_log_axis,
    wrap,
)
from gossipsim.figures.canvas import Figures, drawing_area, root
from gossipsim.figures.canvas import fit_height as _fit_height
from gossipsim.figures.graph_layout import layout
from gossipsim.figures.layout import Cells, Facets, Panel, facets, figure_width, grid, variant_cells
from gossipsim.figures.requests import (
    LATENCIES,
    STATIONARY_LABEL,
    RequestPanel,
    expected_removal,
    expected_within_run,
    latency_window,
    request_entry,
    request_panels,
)
from gossipsim.figures.stats import (
    STATISTICS,
    across_runs,
    band_matrix,
    cover_moves,
    mean_and_half_width,
    step_values_on_grid,
)
from gossipsim.measurement.censoring import (
    Estimates,
    empirical_survival,
    estimates,
    kaplan_meier,
    summary_estimates,
)
from gossipsim.states.divergences import KL, Divergence, distinct, divergences, joined_names
from gossipsim.states.divergences import title as divergence_title

if TYPE_CHECKING:
    from gossipsim.results.results import Results

__all__ = [
    "COLUMN_WIDTH_IN",
    "EVALUATION_LABELS",
    "FIGURES",
    "FORMATS",
    "MAX_NODES_DRAWN",
    "STATISTICS",
    "draw_figures",
    "evaluation_columns",
    "plot_comparison",
    "plot_cover_time",
    "plot_evaluation",
    "plot_kl_vs_iteration",
    "plot_kl_vs_time",
    "plot_latency",
    "plot_results",
    "plot_particles",
    "plot_unlearning_accuracy",
    "plot_unlearning_kl",
    "plot_visits",
]

FORMATS = ("png", "pdf", "svg")
#: the standard figures, by the name of their file (what Results.plot(which=...) picks from)
FIGURES = (
    "kl_vs_iteration", "kl_vs_time", "unlearning_kl", "latency", "cover_time",
    "kl_vs_local_iterations", "evaluation", "unlearning_accuracy", "particles", "visits",
)  # fmt: skip
COLUMN_WIDTH_IN = S.COLUMN_WIDTH_IN
MAX_NODES_DRAWN = 500
PANEL_HEIGHT_IN = 2.0
KL_LABEL = KL.axis

#: where a figure goes: a file (``path``), or nowhere (the Figure is returned)
Where = Path | str | None
#: zlib's level for the PNG files (lossless at any level): 3 encodes the figures about a third
#: faster than PIL's default 6, in files no larger (4% smaller on Fig. 3's and
#: unlearning_complete's nine)
PNG_COMPRESSION = 3


def _finish(
    area: Figure | SubFigure, path: Where, names: Sequence[RequestNames | None] = ()
) -> Path | Figure:
    """Write the figure of ``area`` to ``path`` and return the path, or without a path return the
    figure (the caller's own when it gave ``ax`` or ``fig``); the request names of ``names`` are
    separated (:func:`separate_request_names`) first."""
    fig = root(area)
    agg = isinstance(fig.canvas, FigureCanvasAgg)  # gossipsim's own figures; not every caller's
    if path is None or Path(path).suffix.lower() != ".png" or not agg:
        separate_request_names(area, names)
        return fig if path is None else _save(fig, Path(path))
    return _save(fig, Path(path), _lay_out(fig, names))


def _lay_out(fig: Figure, names: Sequence[RequestNames | None] = ()) -> Bbox:
    """Lay ``fig`` out once, at the resolution it is saved at, separating its request names on
    that layout (laid out again only if names were merged), and return the tight box (inches)
    that ``savefig(bbox_inches="tight")`` would crop it to. ``savefig`` finds that box by drawing
    the figure without output (the draw lays it out) before the draw that renders it, and the
    request names took one more such draw at the figure's own resolution; the layout alone gives
    the same box and the same pixels (compared on every shipped scenario's figures)."""
    with mpl.rc_context(S.RC):
        dpi, pad = mpl.rcParams["savefig.dpi"], mpl.rcParams["savefig.pad_inches"]
        shown = fig.dpi
        try:
            fig.dpi = dpi
            engine = fig.get_layout_engine()
            if engine is not None:
                engine.execute(fig)  # constrained layout, as savefig's first draw does
                if separate_request_names(fig, names, drawn=True):
                    engine.execute(fig)  # names merged: their new width may move a margin
            else:
                separate_request_names(fig, names)
            # the renderer the layout measured with (the Agg canvas keeps it for the figure's size)
            canvas = fig.canvas
            assert isinstance(canvas, FigureCanvasAgg)
            box = fig.get_tightbbox(canvas.get_renderer())
        finally:
            fig.dpi = shown
    return box.padded(pad)


def _save(fig: Figure, path: Path, box: Bbox | None = None) -> Path:
    """Write ``fig`` to ``path``; ``box`` (from :func:`_lay_out`, the figure laid out already) is
    the area written, and the figure is rendered without laying it out again."""
    with mpl.rc_context(S.RC):
        if box is None:
            fig.savefig(path)
            return path
        engine = fig.get_layout_engine()
        fig.set_layout_engine(None)  # none at all: savefig would lay a placeholder engine out again
        try:
            fig.savefig(path, bbox_inches=box, pil_kwargs={"compress_level": PNG_COMPRESSION})
        finally:
            fig.set_layout_engine(engine)
    return path


def _num(x: float, digits: int = 3) -> str:
    """``digits`` significant digits without an exponent (1,234 rather than 1.23e+03)."""
    if not np.isfinite(x):
        return "nan"
    if abs(x) >= 10**digits:
        return f"{x:,.0f}"
    return f"{float(f'{x:.{digits}g}'):g}"


def _runs_text(counts: Sequence[int]) -> str:
    counts = [c for c in counts if c]
    if not counts:
        return "no runs"
    lo, hi = min(counts), max(counts)
    each = " each" if len(counts) > 1 else ""
    return f"{lo:,} runs{each}" if lo == hi else f"{lo:,}-{hi:,} runs per variant"


# ---------------------------------------------------------------------------------------------------
# KL against slots, time or local iterations


@dataclass(frozen=True)
class _Curve:
    variant: str
    x: np.ndarray
    values: np.ndarray  # runs × points


def _best_lines(
    metrics: pd.DataFrame, variants: Sequence[str], scale: dict[str, float] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each variant's best-in-family KL against the slot (median over runs), where it is known."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if "best_family_kl" not in metrics.columns:
        return out
    for v in variants:
        grid_, best = band_matrix(metrics, v, "best_family_kl")
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
class _Tolerance:
    value: float
    label: str
    style: dict[str, Any]
    #: the curves it is the tolerance of (None: all); drawn only in panels holding one of them
    curves: frozenset[str] | None = None


def _kl_figure(
    path: Where,
    curves: Sequence[_Curve],
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
    tolerances: Sequence[_Tolerance] | None = None,
    divergence: dict[str, Divergence] | None = None,
    notes: Sequence[str] = (),
) -> Path | Figure:
    """Divergence curves (centre line and band per variant) in the panels of ``fac``, on one
    shared scale (x and y); ``linestyles`` (variant -> style) outlines each band in its line's
    style, so that overlapping bands stay told apart (``gossipsim compare``); ``tolerances``
    replaces the single ``tolerance`` line. ``divergence`` says what each curve is (variant ->
    divergence; KL where not given): curves of different divergences never share a panel or a
    scale, each panel of ``fac`` is split into one per divergence, its y axis labelled.
    ``notes`` are said in the legend, each without a mark."""
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
            [_Tolerance(tolerance, f"tolerance {tolerance:g}", S.TOLERANCE)]
            if tolerance and not excess
            else []
        )
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 0.9 + PANEL_HEIGHT_IN * rows, ax=ax, fig=fig)
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
                    _tolerance_line(lp, kind, tol, legend)
        scales = _scales(recorded, kinds)
        panel_width = area.bbox.width / area.dpi / cols
        names: list[RequestNames | None] = []
        firsts: dict[str, LogPanel] = {}  # the first panel of each divergence: its scales
        for k, (panel, lp) in enumerate(zip(panels, recorded, strict=True)):
            r, c = divmod(k, cols)
            kind = kinds[k]
            span, zero = scales[kind.column]
            first = firsts.get(kind.column)
            main = lp.render(area, specs[r, c], sharex=first.main if first else None,
                             sharey=first, span=span, zero=zero)  # fmt: skip
            firsts.setdefault(kind.column, lp)
            panel_marks = _merge_marks(marks, panel.variants)
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
            lp.bottom.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
        for note in notes:
            legend.add(note, line_handle(linestyle="none"))
        heading = area.suptitle(wrap(title, area.bbox.width / area.dpi - 0.2, 9))
        head = f"{fac.line_title}: " if fac.line_title else ""
        runs = _runs_text([cv.values.shape[0] for cv in curves])
        key = legend.place(area, ncols=2 if width <= COLUMN_WIDTH_IN else 4,
                           title=f"{head}{description} ({runs})")  # fmt: skip
        _fit_height(area, ax is None and fig is None, PANEL_HEIGHT_IN * rows, heading, key)
        return _finish(area, path, names)


#: a tolerance this far below every value of a particle divergence is not drawn (it says so)
UNREACHABLE_DECADES = 3


def _tolerance_line(lp: LogPanel, kind: Divergence, tol: _Tolerance, legend: Legend) -> None:
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


def _scales(
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


def _merge_marks(marks: dict[str, list[RequestMark]], variants: Sequence[str]) -> list[RequestMark]:
    out: list[RequestMark] = []
    for v in variants:
        for m in marks.get(v, []):
            if m not in out:
                out.append(m)
    return out


def _marks_by_variant(
    requests: pd.DataFrame | None,
    variants: Sequence[str],
    column: str,
    scale: dict[str, float] | None = None,
) -> dict[str, list[RequestMark]]:
    return {v: request_marks(requests, [v], column, scale) for v in variants}


def plot_kl_vs_iteration(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    title: str = "",
    x_scale: dict[str, float] | None = None,
    xlabel: str = "iteration (slot)",
    excess: bool = False,
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure:
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
    """
    kinds = divergences(metrics, variants)
    curves = []
    for variant in variants:
        grid_, values = band_matrix(metrics, variant, kinds[variant].column)
        curves.append(_Curve(variant, grid_ * (x_scale or {}).get(variant, 1.0), values))
    return _kl_figure(
        path,
        curves,
        facets(summary, variants),
        statistic=statistic,
        tolerance=tolerance,
        excess=excess,
        best=_best_lines(metrics, variants, x_scale),
        marks=_marks_by_variant(requests, variants, "request_iteration", x_scale),
        xlabel=xlabel,
        title=title or divergence_title(kinds),
        ax=ax,
        fig=fig,
        divergence=kinds,
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
    """KL (or the variant's divergence) vs simulated time, on a common time grid (each run's
    divergence is a step function of time); None when no slot takes any time.

    Each variant's line ends where its runs end: at the latest time any of its runs reached (its
    last slot's end), a point of its own; a run that ended sooner keeps its last value up to there
    (what it ended with: a run stopped once done, or its last slot), which the legend says when
    some run did. A request arriving at different times in different runs is shaded from its
    first to its last arrival (named in the legend)."""
    if not (metrics["time"].max() > 0):
        return None
    kinds = divergences(metrics, variants)
    grid_ = np.linspace(0.0, float(metrics["time"].max()), points)
    curves = []
    runs, times = metrics["run"].to_numpy(), metrics["time"].to_numpy(dtype=float)
    ended_sooner = False
    for variant in variants:  # the variant's rows of three columns (a filtered table copies all)
        mask = (metrics["variant"] == variant).to_numpy(dtype=bool, na_value=False)
        if not mask.any():
            continue
        column = metrics[kinds[variant].column].to_numpy(dtype=float, na_value=np.nan)[mask]
        ends = run_ends(runs[mask], times[mask])
        x = np.append(grid_[grid_ < ends.max()], ends.max())  # to the last run's end, no further
        rows = step_values_on_grid(runs[mask], times[mask], column, x)
        curves.append(_Curve(variant, x, rows))
        ended_sooner = ended_sooner or bool((ends < ends.max()).any())
    marks = (
        _marks_by_variant(requests, variants, "request_time")
        if requests is not None
        and "request_time" in requests
        and requests["request_time"].gt(0).any()
        else {}
    )
    return _kl_figure(
        path,
        curves,
        facets(summary, variants),
        statistic=statistic,
        tolerance=tolerance,
        excess=excess,
        best={},  # best in family is per slot; it is drawn on the slot figures
        marks=marks,
        xlabel="simulated time (s)",
        title=title or f"{divergence_title(kinds)} against simulated time",
        ax=ax,
        fig=fig,
        divergence=kinds,
        notes=[RUNS_END] if ended_sooner else [],
    )


#: what the time figure says of runs that end before their variant's line does
RUNS_END = (
    "a line ends where its variant's last run ends; runs that ended sooner keep their last value"
)


def run_ends(runs: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The latest time of each run's rows (runs in ascending order): where the run ended."""
    ids, codes = np.unique(runs, return_inverse=True)
    ends = np.full(ids.size, -np.inf)
    np.maximum.at(ends, codes, times)
    return ends


#: line styles of the folders of a comparison, in order
FOLDER_STYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))


def plot_comparison(
    studies: Sequence[tuple[str, pd.DataFrame, pd.DataFrame | None, dict[str, Any]]],
    path: Where = None,
    *,
    statistic: str = "median",
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure:
    """KL (or KSD) vs slot of several results folders in one panel (``gossipsim compare``):
    ``studies`` are (name, metrics, requests, summary) of each folder. The same variant has the
    same colour in every folder (folders of one variant each: a colour each) and each folder its
    line style; a band is faint and outlined in its line's style, so that overlapping bands stay
    told apart. Each folder's tolerance is drawn (one line where they agree), and its requests
    marked. Curves of different divergences (a G-FVL folder, KL, beside a particle one, KSD) are
    drawn in a panel each, one above the other, on scales of their own."""
    frames, request_frames, labels = [], [], []
    kinds: dict[str, Divergence] = {}
    colours: dict[str, str] = {}
    linestyles: dict[str, Any] = {}
    order: list[str] = []
    tolerances: dict[float, list[str]] = {}
    owners: dict[float, set[str]] = {}  # the curves of the folders of each tolerance
    excess = False
    excess_tolerance: float | None = None
    # the same variant in the same colour in every folder; studies of one variant: one each
    by_variant = any(len(summary.get("variants", {})) > 1 for _, _, _, summary in studies)
    for k, (name, metrics, requests, summary) in enumerate(studies):
        variants = list(summary.get("variants", {})) or list(
            dict.fromkeys(metrics["variant"].astype(str))
        )
        one = len(variants) == 1  # a study of one variant: its curve is named by the folder
        found = divergences(metrics, variants)
        frames.append(
            metrics.assign(variant=name if one else name + ": " + metrics["variant"].astype(str))
        )
        if requests is not None and len(requests):
            request_frames.append(
                requests.assign(
                    variant=name if one else name + ": " + requests["variant"].astype(str)
                )
            )
        for v in variants:
            if v not in order:
                order.append(v)
            label = name if one else f"{name}: {v}"
            labels.append(label)
            kinds[label] = found[v]
            colours[label] = S.colour(order.index(v) if by_variant else k)
            linestyles[label] = FOLDER_STYLES[k % len(FOLDER_STYLES)]
        tol = _tolerance(summary)
        if _excess(summary):
            excess, excess_tolerance = True, tol
        elif tol:
            tolerances.setdefault(tol, []).append(name)
            owners.setdefault(tol, set()).update(labels[-len(variants) :])
    lines = [
        _Tolerance(
            value,
            f"tolerance {value:g}" if len(tolerances) == 1 else f"tolerance {value:g} ({', '.join(names)})",
            {**S.TOLERANCE, "linestyle": ":" if len(tolerances) == 1 else FOLDER_STYLES[i % 5]},
            frozenset(owners[value]),
        )
        for i, (value, names) in enumerate(tolerances.items())
    ]  # fmt: skip
    metrics = pd.concat(frames, ignore_index=True)
    requests = pd.concat(request_frames, ignore_index=True) if request_frames else None
    curves = []
    for label in labels:
        grid_, values = band_matrix(metrics, label, kinds[label].column)
        curves.append(_Curve(label, grid_, values))
    fac = Facets([Panel("", labels)], "", {v: v for v in labels}, colours)
    return _kl_figure(
        path,
        curves,
        fac,
        statistic=statistic,
        tolerance=excess_tolerance,
        excess=excess,
        best=_best_lines(metrics, labels),
        marks=_marks_by_variant(requests, labels, "request_iteration"),
        xlabel="iteration (slot)",
        title=f"{joined_names(kinds)} vs iteration: " + ", ".join(name for name, *_ in studies),
        ax=ax,
        fig=fig,
        linestyles=linestyles,
        tolerances=lines,
        divergence=kinds,
    )


# ---------------------------------------------------------------------------------------------------
# unlearning


def _label_cells(
    placed: dict[tuple[int, int], Axes], cells: Cells, panel_width: float, panel_height: float
) -> None:
    """A grid of a sweep's factors: each column's label above its top panel, each row's label to
    the right of its last panel (read downwards), both wrapped to the panel's size (inches)."""
    if cells.col_labels:
        for c, label in enumerate(cells.col_labels):
            top = min((r for r, cc in placed if cc == c), default=None)
            if top is not None and label:
                placed[top, c].set_title(wrap(label, panel_width - 0.3, 8))
    if cells.row_labels:
        for r, label in enumerate(cells.row_labels):
            last = max((c for rr, c in placed if rr == r), default=None)
            if last is None or not label:
                continue
            ax = placed[r, last]
            ax.annotate(wrap(label, panel_height, 7), xy=(1.03, 0.5), xycoords="axes fraction",
                        rotation=270, ha="left", va="center", fontsize=7, gid="row-label",
                        annotation_clip=False)  # fmt: skip


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
) -> Path | Figure | None:
    """One panel per variant, from its first request: KL of unlearning (blue, solid) and of
    retraining from scratch on the same walk (vermillion, dashed), each with its band; the
    best-in-family KL (black, dashed) where the target is outside the family; request slots marked.
    A sweep of two or more dimensions is laid out by its factors (rows: its first dimension,
    columns: the others); the panels share their scales. A panel whose retrain baseline recorded
    no KL says so. Each variant's own divergence is drawn (KL, or the KSD of particle
    protocols: :mod:`gossipsim.states.divergences`); panels of different divergences have scales of
    their own."""
    if requests.empty or "request_iteration" not in requests:
        return None
    if requests["request_iteration"].isna().all():  # no request arrived within any run
        return None
    arrived = requests.dropna(subset=["request_iteration"])
    drawn = [v for v in variants if (arrived["variant"] == v).any()]
    if not drawn:
        return None
    cells = variant_cells(facets(summary, variants), drawn)
    kinds = divergences(metrics, drawn)
    width = figure_width(cells.cols)
    legend = Legend()
    runs: list[int] = []
    description = ""
    firsts = {
        v: int(arrived.loc[arrived["variant"] == v, "request_iteration"].min()) for v in drawn
    }
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 0.9 + PANEL_HEIGHT_IN * cells.rows, ax=ax, fig=fig)
        specs = area.add_gridspec(cells.rows, cells.cols)
        recorded: dict[str, tuple[LogPanel, bool]] = {}
        for variant in drawn:
            kind = kinds[variant]
            grid_, main = band_matrix(metrics, variant, kind.column)
            keep = grid_ >= firsts[variant] - 1
            x = grid_[keep]
            runs.append(main.shape[0])
            lp = LogPanel()
            missing_retrain = True
            for column, role, name in (
                (kind.column, S.UNLEARNING, "unlearning"),
                (kind.retrain_column, S.RETRAIN, "retrain from scratch"),
            ):
                if column not in metrics.columns:
                    continue
                values = main if column == kind.column else band_matrix(metrics, variant, column)[1]
                values = values[:, keep]
                if not np.isfinite(values).any():
                    continue
                missing_retrain = missing_retrain and column != kind.retrain_column
                band = across_runs(values, statistic)
                description = band.description
                label = name
                lp.band(x, band.lo, band.hi, color=role["color"], alpha=S.BAND_ALPHA,
                        linewidth=0, label=label)  # fmt: skip
                lp.line(x, band.center, label=label, **role)
                legend.add(label, band_handle(role["color"], linestyle=role["linestyle"]))
            best = _best_lines(metrics, [variant]).get(variant)
            if best is not None:
                by = best[1][keep]
                lp.line(x, by, label="best in family", **S.BEST)
                legend.add("best in family", line_handle(**S.BEST))
                if excess and tolerance:
                    name = f"best in family + tolerance {tolerance:g}"
                    lp.line(x, by + tolerance, label=name, **S.BEST_PLUS_TOLERANCE)
                    legend.add(name, line_handle(**S.BEST_PLUS_TOLERANCE))
            if tolerance and not excess:
                tol = _Tolerance(tolerance, f"tolerance {tolerance:g}", S.TOLERANCE)
                _tolerance_line(lp, kind, tol, legend)
            recorded[variant] = (lp, missing_retrain)
        scales = _scales([recorded[v][0] for v in drawn], [kinds[v] for v in drawn])
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
            variant_marks = request_marks(arrived, [variant])
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
                lp.bottom.set_xlabel("iteration (slot)")
            lp.bottom.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        _label_cells(placed, cells, panel_width, PANEL_HEIGHT_IN - 0.4)
        heading = area.suptitle("Unlearning vs retraining from scratch (same walk)")
        key = legend.place(area, ncols=2 if width <= COLUMN_WIDTH_IN else 4,
                           title=f"{description} ({_runs_text(runs)})")  # fmt: skip
        _fit_height(area, ax is None and fig is None, PANEL_HEIGHT_IN * cells.rows, heading, key)
        return _finish(area, path, names)


LATENCY_NAMES = {
    "removal_latency": "removal",
    "latency": "unlearning (KL)",
    "retrain_latency": "retrain (KL)",
}
LATENCY_KEYS = {
    "removal_latency": "removal latency (the paper's unlearning latency: the node's factor leaves q)",
    "latency": "unlearning latency (KL to the target without the node settled)",
    "retrain_latency": "retrain latency (retraining from scratch on the same walk, KL settled)",
}


def latency_names(kind: Divergence = KL) -> dict[str, str]:
    """What a latency panel calls each latency, the divergence-based ones by ``kind``."""
    if kind.column == KL.column:
        return LATENCY_NAMES
    return {**LATENCY_NAMES, "latency": f"unlearning ({kind.name})",
            "retrain_latency": f"retrain ({kind.name})"}  # fmt: skip


def latency_keys(kinds: Sequence[Divergence] = (KL,)) -> dict[str, str]:
    """The latency figure's key to each latency, the divergence-based ones by ``kinds`` (the
    divergences of its panels: "KL or KSD" where they differ)."""
    shown = list(dict.fromkeys(k.name for k in kinds)) or [KL.name]
    if shown == [KL.name]:
        return LATENCY_KEYS
    name = " or ".join(shown)
    return {
        **LATENCY_KEYS,
        "latency": f"unlearning latency ({name} to the target without the node settled)",
        "retrain_latency": f"retrain latency (retraining from scratch on the same walk, {name} "
        "settled)",
    }


LATENCY_STYLES: dict[str, dict[str, Any]] = {
    "removal_latency": S.REMOVAL,
    "latency": {**S.UNLEARNING, "linewidth": 1.2},
    "retrain_latency": {**S.RETRAIN, "linewidth": 1.2},
}
#: where each latency's median is marked, around 1/2 so that equal medians stay apart
MEDIAN_HEIGHT = {"removal_latency": 0.5, "latency": 0.46, "retrain_latency": 0.54}
MEDIAN_KEY = "median with its 95% CI (marked at 1/2)"
UNOBSERVED = "after the end of the run: not observed"
LATENCY_TITLE = (
    "Kaplan–Meier estimates over every request that arrived (one not served by the end of its run "
    "is censored there). Each panel: served/arrived; median [95% CI, Brookmeyer–Crowley]; mean "
    "[95% CI, Greenwood], '≥' when some were not served: the mean of min(latency, window), a lower "
    "bound of the mean"
)


def _interval(ci: tuple[float, float]) -> str:
    """The interval "[lo, hi]" to two significant digits (whole numbers kept whole), or
    "[lo, ∞)" when the data do not bound it above."""
    lo, hi = ci
    return f"[{_num(lo, 2)}, {_num(hi, 2)}]" if math.isfinite(hi) else f"[{_num(lo, 2)}, ∞)"


def _estimate_text(name: str, est: Estimates) -> str:
    """Two lines: served / arrived, then the median and the (restricted) mean with intervals."""
    head = f"{name}: {est.observed:,}/{est.total:,} served"
    if est.observed == 0:
        return f"{head}\nnone within the run (> {_num(est.tau - 1)})"
    median = (
        f"median {_num(est.median)} {_interval(est.median_ci)}"
        if math.isfinite(est.median)
        else f"median > {_num(est.tau - 1)}"
    )
    bound = "≥ " if est.censored else ""
    mean = f"mean {bound}{_num(est.restricted_mean)} {_interval(est.restricted_mean_ci)}"
    return f"{head}\n{median}; {mean}"


def _latency_cells(panels: Sequence[RequestPanel], fac: Facets) -> tuple[Cells, str]:
    """Where each request's panel goes, and a description shared by all panels ("" if none): one
    request per variant in a sweep of two or more dimensions is laid out by the sweep's factors;
    otherwise rows are the variants and columns the requests, labelled where every row has the
    same requests."""
    variants = list(dict.fromkeys(p.variant for p in panels))
    per_variant = {v: [p for p in panels if p.variant == v] for v in variants}
    descriptions = {p.description for p in panels}
    if all(len(ps) == 1 for ps in per_variant.values()):
        cells = variant_cells(fac, variants)
        if cells.row_labels is not None:
            where = {(p.variant, p.request): cells.where[p.variant] for p in panels}
            shared = descriptions.pop() if len(descriptions) == 1 else ""
            return Cells(where, cells.rows, cells.cols, cells.row_labels, cells.col_labels), shared
    cols = max(len(ps) for ps in per_variant.values())
    where = {
        (p.variant, p.request): (r, j)
        for r, v in enumerate(variants)
        for j, p in enumerate(per_variant[v])
    }
    rows_same = len({tuple(p.description for p in ps) for ps in per_variant.values()}) == 1
    col_labels = [p.description for p in per_variant[variants[0]]] if rows_same else None
    row_labels = list(variants) if len(variants) > 1 else None
    return Cells(where, len(variants), cols, row_labels, col_labels), ""


def plot_latency(
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    summary: dict[str, Any] | None = None,
    *,
    runs: pd.DataFrame | None = None,
    divergence: Mapping[str, Divergence] | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """One panel per request: rows are the variants and columns their requests (one request per
    variant of a two-dimensional sweep: rows and columns are the sweep's factors), on shared axes.
    Each panel draws the Kaplan–Meier estimate of the distribution of the removal latency (wide
    pale line; the paper's unlearning latency), the KL-based unlearning latency (solid) and the
    retrain latency (dashed) over *all* requests that arrived, a request not served by the end of
    its run censored there (the run's length from ``runs``, runs.csv); its median with the
    Brookmeyer–Crowley 95% interval is marked at 1/2, and its legend gives served / arrived, the
    median and the mean (restricted to the observation window when some were not served, a lower
    bound of the mean) with their intervals. When some runs did not serve it, latencies past the
    end of those runs are shaded: not observed. The expected removal latency (summary.json) is the
    dotted line, named for what it is. ``divergence`` (variant -> divergence, KL where not given:
    :func:`gossipsim.states.divergences.divergences` of the metrics table) names what the unlearning and
    retrain latencies were judged on."""
    columns = [c for c in LATENCIES if c in requests]
    if requests.empty or not columns or "request_iteration" not in requests:
        return None
    if not any(requests[c].notna().any() for c in columns):
        return None
    panels = request_panels(requests, variants, runs, summary)
    if not any(p.arrived for p in panels):
        return None
    cells, shared = _latency_cells(panels, facets(summary, [p.variant for p in panels]))
    expected = {
        (p.variant, p.request): expected_removal(summary, p.variant, p.request, p.node)
        for p in panels
    }
    within = {(p.variant, p.request): expected_within_run(summary, p.variant, p.request)
              for p in panels}  # fmt: skip
    values = {
        (p.variant, p.request, column): p.rows[column].to_numpy(dtype=float, na_value=np.nan)
        for p in panels
        for column in columns
    }
    reach = [float(np.nanmax(v)) for v in values.values() if np.isfinite(v).any()]
    for p in panels:  # the censored requests' bounds, where the curves end
        served = np.isfinite(np.column_stack([values[p.variant, p.request, k] for k in columns]))
        reach += [float(b) for b in p.censored_at[~served.all(axis=1)] if np.isfinite(b)]
    reach += [e[0] for e in expected.values() if e is not None]
    x_end = 1.3 * max([*reach, 1.0])
    lines = 2 * len(columns) + 1 + any(p.late for p in panels)
    legend_in = 0.125 * lines + 0.1
    width = figure_width(cells.cols, 2.45)
    legend = Legend()
    kinds = {p.variant: (divergence or {}).get(p.variant, KL) for p in panels}
    keys = latency_keys(list(kinds.values()))
    for column in columns:
        legend.add(keys[column], line_handle(**LATENCY_STYLES[column]))
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 1.0 + (1.75 + legend_in) * cells.rows, ax=ax, fig=fig)
        ratios = [r for _ in range(cells.rows) for r in (1.45, legend_in)]
        specs = area.add_gridspec(2 * cells.rows, cells.cols, height_ratios=ratios)
        panel_width = area.bbox.width / area.dpi / cells.cols
        placed: dict[tuple[int, int], Axes] = {}
        first: Axes | None = None
        for p in panels:
            r, c = cells.where[p.variant, p.request]
            ax_ = area.add_subplot(specs[2 * r, c], sharex=first, sharey=first)
            first = first or ax_
            placed[r, c] = ax_
            if p.arrived:
                handles, labels = _latency_panel(
                    ax_, p, columns, values, expected[p.variant, p.request], x_end, legend,
                    within[p.variant, p.request], latency_window(summary, p.variant),
                    latency_names(kinds[p.variant]),
                    request_entry(summary, p.variant, p.request, p.node),
                )  # fmt: skip
            else:
                never = f"arrived in none of the {p.late:,} runs\n(every run ended before it)"
                ax_.text(0.5, 0.5, never, transform=ax_.transAxes, ha="center", va="center",
                         fontsize=7, gid="note")  # fmt: skip
                handles, labels = [], []
            if cells.col_labels is None and not shared:  # the variant: the row's label
                ax_.set_title(wrap(p.description, panel_width - 0.3, 8))
            if c == 0:
                ax_.set_ylabel("fraction of requests served")
            else:
                ax_.tick_params(labelleft=False)
            ax_.set_xlabel("latency (slots after the request)", fontsize=7)
            holder = area.add_subplot(specs[2 * r + 1, c])
            holder.set_axis_off()
            if not handles:
                continue
            fitted_legend(holder.legend, handles, labels, width_px=panel_width * area.dpi,
                          dpi=area.dpi, loc="upper center", fontsize=6, handlelength=2.0,
                          handletextpad=0.5, borderaxespad=0.0, labelspacing=0.35)  # fmt: skip
        assert first is not None
        first.set_xscale("symlog", linthresh=1.0)
        first.set_xlim(0, x_end)
        first.set_ylim(0, 1.03)
        _label_cells(placed, cells, panel_width, 1.3)
        head = "Latency per request, in slots after the request"
        heading = area.suptitle(
            wrap(f"{head}: {shared}" if shared else head, area.bbox.width / area.dpi - 0.2, 9)
        )
        key = legend.place(area, ncols=2, title=LATENCY_TITLE)
        own = ax is None and fig is None
        _fit_height(area, own, (1.75 + legend_in) * cells.rows, heading, key)
        return _finish(area, path)


def _latency_panel(
    ax: Axes,
    panel: RequestPanel,
    columns: Sequence[str],
    values: dict[tuple[str, int, str], np.ndarray],
    expected: tuple[float, str] | None,
    x_end: float,
    legend: Legend,
    within: tuple[float, float] | None = None,
    settled_slots: int = 1,
    names: Mapping[str, str] = LATENCY_NAMES,
    stored: Mapping[str, Any] | None = None,
) -> tuple[list[Any], list[str]]:
    """One request's curves, medians, window and expectation; its legend entries (``names``: what
    each latency is called). Where no run leaves a latency censored, its estimates are those of
    ``stored`` (the request's entry of summary.json's ``per_request``) when they are of the same
    latencies (:func:`gossipsim.measurement.censoring.summary_estimates`), and its curve the empirical
    distribution (the Kaplan–Meier estimate without censoring): no SciPy import."""
    stored = stored or {}
    handles: list[Any] = []
    labels: list[str] = []
    unserved = np.zeros(len(panel.censored_at), dtype=bool)
    for column in columns:
        x = values[panel.variant, panel.request, column]
        unserved |= ~np.isfinite(x)
        # a KL latency needs W settled slots: a run sees it W − 1 slots short of the removal's
        bound = panel.censored_at - (settled_slots - 1 if column != "removal_latency" else 0)
        style = LATENCY_STYLES[column]
        if np.isfinite(x).all():  # nothing censored: summary.json's estimates, if theirs
            est = summary_estimates(stored.get(column), x, bound) or estimates(x, bound)
            km = empirical_survival(x)  # = the Kaplan–Meier estimate (SciPy's) up to rounding
        else:
            est = estimates(x, bound)
            km = kaplan_meier(x, bound)
        if km.times.size:
            cdf = 1.0 - km.survival
            end = x_end
            if est.censored:  # the estimate says nothing past the longest follow-up
                end = min(x_end, float(np.nanmax(np.where(np.isfinite(x), x, bound))))
            keep = km.times <= end
            ax.step(np.concatenate([[0.0], km.times[keep], [end]]),
                    np.concatenate([[0.0], cdf[keep], [cdf[keep][-1] if keep.any() else 0.0]]),
                    where="post", label=names[column], gid=f"km-{column}",
                    **style)  # fmt: skip
        if math.isfinite(est.median):
            _median_mark(ax, est, MEDIAN_HEIGHT[column], style, x_end)
            legend.add(MEDIAN_KEY, line_handle(color="0.3", marker="o", ms=3, linewidth=0.9))
        handles.append(line_handle(**style))
        labels.append(_estimate_text(names[column], est))
    if expected is not None:
        value, words = expected
        ax.axvline(value, gid="expected", label=words, **S.EXACT)
        legend.add(f"dotted: {words}", line_handle(**S.EXACT))
        handles.append(line_handle(**S.EXACT))
        short = "next-visit" if words == STATIONARY_LABEL else "expected"
        text = f"{short}: {_num(value)}"
        if within is not None and unserved.any():  # the mean shown is restricted: compare alike
            text += f"; within the run, E[min(L, {within[0]:,.0f})]: {_num(within[1])}"
        labels.append(text)
    window = _window(panel.bound, unserved)
    if window is not None and window < x_end:
        ax.axvspan(window, x_end, color="0.6", alpha=0.25, linewidth=0, zorder=0, gid="unobserved")
        legend.add(UNOBSERVED, _unobserved_handle())
    if panel.late:
        handles.append(line_handle(linestyle="none"))
        labels.append(f"{panel.late:,} runs ended before the request")
    ax.grid(True, alpha=0.3)
    return handles, labels


def _unobserved_handle() -> Patch:
    return Patch(facecolor="0.6", alpha=0.25, linewidth=0)


def _window(bound: np.ndarray, unserved: np.ndarray) -> float | None:
    """Where the observation of a request ends when some runs did not serve it (in some latency):
    the earliest end among those runs (None when every run served it, or the ends are unknown)."""
    known = unserved & np.isfinite(bound)
    return float(bound[known].min()) if known.any() else None


def _median_mark(ax: Axes, est: Estimates, y: float, style: dict[str, Any], x_end: float) -> None:
    """The median at height ``y`` with its interval as a horizontal bar (an arrow at the panel's
    edge when the interval is unbounded above)."""
    lo, hi = est.median_ci
    colour = style["color"]
    lo = est.median if not math.isfinite(lo) else lo
    right = min(hi, x_end)
    ax.plot(
        [lo, right], [y, y], color=colour, linewidth=1.0, solid_capstyle="butt", gid="median-ci"
    )
    ax.plot([est.median], [y], marker="o", ms=3.2, color=colour, mec="white", mew=0.4,
            linestyle="none", gid="median", zorder=5)  # fmt: skip
    if not math.isfinite(hi):
        ax.plot([right], [y], marker=">", ms=3.2, color=colour, linestyle="none", gid="median-ci")


# ---------------------------------------------------------------------------------------------------
# cover time


def _group_label(values: dict[str, Any], fallback: str) -> str:
    from gossipsim.study.sweeps import variant_label

    rest = {k: v for k, v in values.items() if not k.endswith(".nodes")}
    return variant_label(rest, fallback) if rest else fallback


def _cover_rows(runs: pd.DataFrame, summary: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for label, entry in summary.get("variants", {}).items():
        x, total = cover_moves(runs.loc[runs["variant"] == label])
        if x.size == 0:
            continue
        topo = entry.get("resolved", {}).get("topology", {})
        theory = entry.get("theory", {}) or {}
        mean, half = mean_and_half_width(x, recorded=entry.get("cover_mean"))
        matthews = theory.get("matthews_cover_moves")
        rows.append(
            {
                "label": label,
                "group": _group_label(entry.get("values", {}) or {}, topo.get("kind", label)),
                "nodes": theory.get("nodes", topo.get("nodes")),
                "mean": mean,
                "ci": half if np.isfinite(half) else 0.0,
                "censored": 1.0 - x.size / total,
                "exact": theory.get("exact_cover_moves"),
                "theory": theory.get("theoretical_cover_moves")
                if theory.get("theoretical_cover_method") == "asymptotic"
                else None,
                "matthews_lo": matthews[0] if matthews else None,
                "matthews_hi": matthews[1] if matthews else None,
            }
        )
    return pd.DataFrame(rows)


SIMULATED = "simulated mean (95% CI)"
EXACT_COVER = "exact expectation"
ASYMPTOTIC = "asymptotic formula"
MATTHEWS = "Matthews' bounds"
CENSORED = "hollow: some runs not covered\n(mean of the covered runs, biased low)"


def plot_cover_time(
    runs: pd.DataFrame,
    summary: dict[str, Any],
    path: Where = None,
    *,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """Mean cover time (moves, 95% CI) per variant, or against the number of nodes when that differs
    between variants (one line per other sweep value), with the exact expectation (closed form or
    subset chain), Matthews' bounds (a bar from lower to upper) and the asymptotic formula where
    known. A sweep of two or more dimensions puts the values of its first dimension on the axis and
    gives the others a colour each, side by side. A mean over only the covered runs (some runs
    ended first) is drawn hollow."""
    if runs["cover_iteration"].notna().sum() == 0:
        return None
    table = _cover_rows(runs, summary)
    if table.empty:
        return None
    by_nodes = table["nodes"].nunique() > 1
    fac = facets(summary, list(table["label"]))
    grouped = not by_nodes and len(fac.panels) > 1
    categories = list(dict.fromkeys(fac.label[v] for v in table["label"])) if grouped else []
    slots = len(table)
    width = COLUMN_WIDTH_IN if by_nodes or slots <= 8 else S.DOUBLE_WIDTH_IN
    legend = Legend()
    styles = Legend()
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 3.4 if by_nodes else 3.2, ax=ax, fig=fig)
        ax_ = area.add_subplot()
        ticks: list[str] = []  # the x tick labels, kept apart once the figure is laid out
        if by_nodes:
            groups = list(dict.fromkeys(table["group"]))
            for i, group in enumerate(groups):
                part = table.loc[table["group"] == group].sort_values("nodes")
                colour = S.colour(i)
                offset = 1.0 + 0.035 * (i - (len(groups) - 1) / 2)  # bars side by side
                x = part["nodes"].to_numpy(dtype=float) * offset
                _cover_points(ax_, x, part, colour, styles, joined=True)
                legend.add(group, line_handle(color=colour, marker="o", ms=4, linestyle="none"))
            ax_.set_xscale("log")
            ax_.set_yscale("log")
            sizes = sorted({int(n) for n in table["nodes"]})
            ax_.set_xticks(sizes)
            ticks = [f"{n:,}" for n in sizes]
            ax_.xaxis.set_minor_locator(NullLocator())
            low, high = _cover_extent(table)
            ax_.set_ylim(low / 1.3, high * 1.3)
            tidy_log_axis(ax_.yaxis, low / 1.3, high * 1.3)
            ax_.set_xlabel("number of nodes K (log scale)")
        elif grouped:
            step = 0.8 / len(fac.panels)
            for i, panel in enumerate(fac.panels):
                part = table.loc[table["label"].isin(panel.variants)]
                x = np.array([categories.index(fac.label[v]) for v in part["label"]], dtype=float)
                x += step * (i - (len(fac.panels) - 1) / 2)
                _cover_points(ax_, x, part, S.colour(i), styles, joined=False, width=step)
                legend.add(panel.title, line_handle(color=S.colour(i), marker="o", ms=4,
                                                    linestyle="none"))  # fmt: skip
            ax_.set_xticks(range(len(categories)))
            ticks = list(categories)
            ax_.set_xlim(-0.6, len(categories) - 0.4)
            ax_.set_xlabel(fac.line_title or "variant")
            ax_.set_ylim(0, _cover_extent(table)[1] * 1.08)
        else:
            x = np.arange(slots, dtype=float)
            _cover_points(ax_, x, table, S.PALETTE[0], styles, joined=False)
            ax_.set_xticks(x)
            ticks = [str(v) for v in table["label"]]
            ax_.set_xlim(-0.6, slots - 0.4)
            ax_.set_xlabel(fac.line_title or "variant")
            ax_.set_ylim(0, _cover_extent(table)[1] * 1.08)
        ax_.set_ylabel("cover time (moves =\ncover iteration − 1)")
        ax_.grid(True, alpha=0.3)
        heading = area.suptitle("Cover time of the token walk")
        for label, handle in styles.entries.items():  # the variants first, then what marks mean
            legend.add(label, handle)
        key = legend.place(area, ncols=2)
        # labels taller than four lines (two rows, upright) take their room from the figure
        taken = keep_tick_labels_apart(ax_, ticks)
        panels_in = 2.6 + max(0.0, taken - 0.5)
        _fit_height(area, ax is None and fig is None, panels_in, heading, key)
        return _finish(area, path)


def _cover_extent(table: pd.DataFrame) -> tuple[float, float]:
    """The smallest and largest value a cover figure draws: whiskers, exact values and bounds."""
    values = np.concatenate(
        [
            (table["mean"] - table["ci"]).to_numpy(dtype=float),
            (table["mean"] + table["ci"]).to_numpy(dtype=float),
            *(table[c].to_numpy(dtype=float, na_value=np.nan) for c in
              ("exact", "theory", "matthews_lo", "matthews_hi")),
        ]
    )  # fmt: skip
    values = values[np.isfinite(values) & (values > 0)]
    return (float(values.min()), float(values.max())) if values.size else (1.0, 10.0)


def _cover_points(
    ax: Axes,
    x: np.ndarray,
    part: pd.DataFrame,
    colour: str,
    legend: Legend,
    *,
    joined: bool,
    width: float = 1.0,
) -> None:
    """The simulated means with their intervals at ``x`` and, where known, the exact value, the
    bounds and the asymptotic formula: joined by lines in ``colour`` (against K) or as separate
    marks ``width`` wide (a category)."""
    grey = "0.3"
    bounds = part["matthews_hi"].notna().to_numpy()
    if bounds.any():
        lo = part["matthews_lo"].to_numpy(dtype=float)[bounds]
        hi = part["matthews_hi"].to_numpy(dtype=float)[bounds]
        ax.vlines(x[bounds], lo, hi, color=colour if joined else grey, linewidth=5, alpha=0.3,
                  label=MATTHEWS)  # fmt: skip
        legend.add(MATTHEWS, line_handle(color=grey, linewidth=5, alpha=0.3))
    exact = part["exact"].notna().to_numpy()
    if exact.any():
        y = part["exact"].to_numpy(dtype=float)[exact]
        if joined:
            # an open diamond at each exact value (a line of one point would not show), over the
            # simulated mean so that both are seen where they agree
            ax.plot(x[exact], y, color=colour, linewidth=0.9, marker="D", ms=6, mfc="none",
                    mew=1.0, zorder=4, label=EXACT_COVER)  # fmt: skip
            legend.add(
                EXACT_COVER, line_handle(color=grey, linewidth=0.9, marker="D", ms=6, mfc="none")
            )
        else:
            ax.plot(x[exact], y, linestyle="none", marker="_", ms=16 if width >= 1 else 8, mew=1.6,
                    color="black", label=EXACT_COVER)  # fmt: skip
            legend.add(
                EXACT_COVER,
                line_handle(color="black", linestyle="none", marker="_", ms=12, mew=1.6),
            )
    asym = part["theory"].notna().to_numpy() & ~exact
    if asym.any():
        y = part["theory"].to_numpy(dtype=float)[asym]
        ax.plot(x[asym], y, color=colour if joined else grey, linestyle="--" if joined else "none",
                linewidth=0.9, marker="x", ms=4, label=ASYMPTOTIC)  # fmt: skip
        legend.add(
            ASYMPTOTIC, line_handle(color=grey, linestyle="--", linewidth=0.9, marker="x", ms=4)
        )
    censored = part["censored"].to_numpy() > 0
    for hollow in (False, True):
        sel = censored == hollow
        if not sel.any():
            continue
        ax.errorbar(
            x[sel], part["mean"].to_numpy(dtype=float)[sel], yerr=part["ci"].to_numpy(dtype=float)[sel],
            fmt="o", ms=3.5, color=colour, mfc="white" if hollow else colour, capsize=2,
            linewidth=0.9, label=CENSORED if hollow else SIMULATED, zorder=3,
        )  # fmt: skip
        legend.add(SIMULATED, line_handle(color=grey, marker="o", ms=3.5, linestyle="none"))
        if hollow:
            legend.add(
                CENSORED, line_handle(color=grey, marker="o", ms=3.5, mfc="white", linestyle="none")
            )
    if not joined:
        for p, (_, row) in zip(x, part.iterrows(), strict=True):
            if row["censored"] > 0:
                ax.annotate(f"{row['censored']:.0%} of runs\nnot covered", (p, row["mean"]),
                            textcoords="offset points", xytext=(6, -4), fontsize=6, va="top")  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# visits


def _scheduler_kind(summary: dict[str, Any] | None, variant: str) -> str:
    entry = (summary or {}).get("variants", {}).get(variant, {})
    return str(entry.get("resolved", {}).get("scheduler", {}).get("kind", "metropolis-hastings"))


def _requested_nodes(
    summary: dict[str, Any] | None, requests: pd.DataFrame | None, variant: str
) -> list[str]:
    if requests is not None and not requests.empty and "node" in requests:
        return sorted({str(n) for n in requests.loc[requests["variant"] == variant, "node"]})
    entry = (summary or {}).get("variants", {}).get(variant, {})
    return sorted({str(r.get("node")) for r in entry.get("resolved", {}).get("unlearning", [])})


def _stationary_words(kind: str, pi: np.ndarray, *, short: bool = False) -> str:
    law = (
        "π uniform"
        if np.allclose(pi, pi[0])
        else "π ∝ degree"
        if kind == "simple-random-walk"
        else ""
    )
    if short:
        return law or "π of the walk"
    return f"{kind} walk" + (f", {law}" if law else "")


def _visit_cells(fac: Facets, variants: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Grid cell of each variant's graph: one row per facet of a sweep (up to three graphs each),
    otherwise three per row in order."""
    present = [[v for v in p.variants if v in variants] for p in fac.panels]
    present = [p for p in present if p]
    if len(present) > 1 and max(len(p) for p in present) <= 3:
        return {v: (r, c) for r, p in enumerate(present) for c, v in enumerate(p)}
    return {v: (i // 3, i % 3) for i, v in enumerate(variants)}


def visit_deviation(
    visits: pd.DataFrame, graph: nx.Graph, variant: str, kind: str = "metropolis-hastings"
) -> tuple[np.ndarray, np.ndarray]:
    """Per node of ``graph`` (in its order): the walk's stationary share π and the relative deviation
    of the measured share of token visits from it, share / π − 1 (NaN for a node without a row)."""
    from gossipsim.scheduling import stationary_distribution

    pi = np.asarray(stationary_distribution(graph, kind), dtype=float)
    part = visits.loc[visits["variant"] == variant]
    share = dict(zip(part["node"].map(str), part["share"], strict=True))
    measured = np.array([share.get(str(node), np.nan) for node in graph.nodes], dtype=float)
    return pi, measured / pi - 1.0


def plot_visits(
    visits: pd.DataFrame,
    graphs: dict[str, nx.Graph],
    path: Where = None,
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
    *,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """The graph of each variant (up to 6), each node coloured by the deviation of its share of token
    visits (all runs' slots together) from the walk's stationary share (uniform under
    Metropolis-Hastings, proportional to the degree under the simple random walk), on a diverging
    scale centred on zero; node size by degree, with a key; requested nodes ringed and named. A
    variant without rows in ``visits`` (a centralised protocol: no walk) is left out."""
    visited = set(visits["variant"].astype(str)) if "variant" in visits else set()
    drawable = [
        (v, g)
        for v, g in graphs.items()
        if g.number_of_nodes() <= MAX_NODES_DRAWN and str(v) in visited
    ]
    if not drawable:
        return None
    drawable = drawable[:6]
    cells = _visit_cells(facets(summary, [v for v, _ in drawable]), [v for v, _ in drawable])
    rows = 1 + max(r for r, _ in cells.values())
    cols = 1 + max(c for _, c in cells.values())
    deviations = {
        v: visit_deviation(visits, g, v, _scheduler_kind(summary, v)) for v, g in drawable
    }
    spread = max(
        (float(np.nanmax(np.abs(d))) for _, d in deviations.values() if np.isfinite(d).any()),
        default=0.0,
    )
    limit = max(100 * spread, 0.1)  # percent; a scale of at least ±0.1% says "no deviation"
    degrees = np.concatenate(
        [np.array([d for _, d in g.degree()], dtype=float) for _, g in drawable]
    )
    dmin, dmax = float(degrees.min()), float(degrees.max())
    biggest = max(g.number_of_nodes() for _, g in drawable)
    smax = 20 + 140 * min(1.0, 34 / biggest)

    def size(d: np.ndarray) -> np.ndarray:
        return (
            6 + (smax - 6) * (d - dmin) / (dmax - dmin)
            if dmax > dmin
            else np.full(d.shape, smax / 2)
        )

    kinds = {v: _scheduler_kind(summary, v) for v, _ in drawable}
    legend = Legend()
    width = COLUMN_WIDTH_IN if cols == 1 else S.DOUBLE_WIDTH_IN
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 0.9 + 2.6 * rows * (1.0 if cols > 1 else 1.1), ax=ax, fig=fig)
        specs = area.add_gridspec(rows, cols)
        panel_width = area.bbox.width / area.dpi / cols
        mappable = None
        axes = []
        for variant, graph in drawable:
            gax = area.add_subplot(specs[cells[variant]])
            axes.append(gax)
            pi, dev = deviations[variant]
            deg = np.array([d for _, d in graph.degree()], dtype=float)
            pos = layout(graph)  # saved with the graph (graphs/*.graphml), else computed once
            index = {node: i for i, node in enumerate(graph.nodes)}
            xy = np.array([pos[node] for node in graph.nodes], dtype=float).reshape(-1, 2)
            edges = [(pos[u], pos[v]) for u, v in graph.edges() if u != v]
            gax.add_collection(LineCollection(edges, colors="black", linewidths=0.4, alpha=0.35,
                                             zorder=1))  # fmt: skip
            mappable = gax.scatter(
                xy[:, 0], xy[:, 1], s=size(deg), c=100 * dev, cmap="RdBu_r", vmin=-limit,
                vmax=limit, edgecolors="0.3", linewidths=0.3, zorder=2,
            )  # fmt: skip
            requested = set(_requested_nodes(summary, requests, variant))
            asked = [node for node in graph.nodes if str(node) in requested]
            if asked:
                ring = [index[a] for a in asked]
                gax.scatter(xy[ring, 0], xy[ring, 1], s=size(deg[ring]) + 60, facecolors="none",
                           edgecolors="black", linewidths=1.4, zorder=3)  # fmt: skip
                for a in asked:
                    gax.annotate(f"{a}", pos[a], textcoords="offset points", xytext=(6, 6), fontsize=7,
                                fontweight="bold", path_effects=[withStroke(linewidth=2, foreground="white")])  # fmt: skip
                legend.add("requested node (ringed, labelled)", line_handle(
                    linestyle="none", marker="o", ms=8, mfc="none", mec="black", mew=1.4))  # fmt: skip
            finite = dev[np.isfinite(dev)]
            worst = 100 * float(np.abs(finite).max()) if finite.size else float("nan")
            walk = (
                ""
                if len(set(kinds.values())) == 1
                else f"{_stationary_words(kinds[variant], pi, short=True)}; "
            )
            gax.set_title(
                wrap(f"{variant}\n{walk}max |share / π − 1| = {worst:.2g}%", panel_width - 0.2, 7),
                fontsize=7,
            )
            gax.margins(0.08)
            gax.set_axis_off()
            # no axis is drawn: hidden, their ticks are not laid out for the title's position
            gax.xaxis.set_visible(False)
            gax.yaxis.set_visible(False)
        for d in sorted({dmin, round((dmin + dmax) / 2), dmax}):
            legend.add(f"degree {d:g}", line_handle(linestyle="none", marker="o", color="0.75", mec="0.3",
                                                  mew=0.3, ms=math.sqrt(float(size(np.array([d]))[0]))))  # fmt: skip
        if mappable is not None:
            bar = area.colorbar(mappable, ax=axes, shrink=0.8, pad=0.02)
            bar.set_label("visit share vs stationary share π:\nshare / π − 1 (%)")
        walk = (
            f"\n{_stationary_words(next(iter(kinds.values())), deviations[drawable[0][0]][0])}"
            if len(set(kinds.values())) == 1
            else ""
        )
        heading = area.suptitle(
            f"Share of token visits (all runs' slots) against the stationary share π{walk}"
        )
        key = legend.place(area, ncols=4, title="node size: degree")
        panels_in = 2.6 * rows * (1.0 if cols > 1 else 1.1)
        _fit_height(area, ax is None and fig is None, panels_in, heading, key)
        return _finish(area, path)


# ---------------------------------------------------------------------------------------------------
# held-out evaluation


EVALUATION_LABELS = {
    "accuracy": "accuracy\n(fraction)",
    "nll": "NLL\n(nats per point)",
    "ece": "ECE\n(fraction)",
    "rmse": "RMSE\n(units of y)",
    "particle_spread": "particle spread\n(RMS distance\nto their mean)",
    "mmd": "MMD² to exact\ndraws (every\nnode's data)",
    "mmd_unlearned": "MMD² to exact\ndraws (without\nforgotten nodes)",
}
#: columns of a metrics table that are not a held-out metric of the model's
NOT_EVALUATION = frozenset(
    {"variant", "run", "iteration", "time", "holder", "bits", "best_family_kl"}
)
#: a metric row whose values are all positive and span at least this ratio has a log axis
LOG_ROW_RATIO = 100.0


def evaluation_columns(metrics: pd.DataFrame) -> list[str]:
    """The held-out metric columns of a metrics table, in its order: every numeric column the
    model (or a representation) declared (``accuracy``, ``nll``, ``ece``, ``rmse``,
    ``particle_spread``, a Gaussian mixture's ``mmd`` and ``mmd_unlearned``, a plug-in model's
    own), without the slot, time, holder and bits, the divergences (rows of their own), the
    retrain baseline's ``retrain_`` copies (drawn beside their column), the swept keys (dotted
    names) and the accuracy on the forgotten and the remaining labels (the
    ``unlearning_accuracy`` figure's)."""
    from gossipsim.states.divergences import divergence_columns

    left_out = NOT_EVALUATION | set(divergence_columns()) | {c for c, _ in ACCURACY_SPLIT}
    return [
        str(c)
        for c in metrics.columns
        if str(c) not in left_out
        and not str(c).startswith("retrain_")
        and "." not in str(c)
        and pd.api.types.is_numeric_dtype(metrics[c])
        and not pd.api.types.is_bool_dtype(metrics[c])
    ]


def _log_rows(metrics: pd.DataFrame, variants: Sequence[str], columns: Sequence[str]) -> set[str]:
    """The metric rows drawn on a log axis: every value of the column (and of its ``retrain_``
    copy) in the variants' rows is positive and they span at least :data:`LOG_ROW_RATIO` (an MMD²
    from prior draws down to a converged set)."""
    rows = metrics["variant"].astype(str).isin([str(v) for v in variants]).to_numpy()
    out = set()
    for column in columns:
        names = [n for n in (column, f"retrain_{column}") if n in metrics.columns]
        values = np.concatenate(
            [metrics[n].to_numpy(dtype=float, na_value=np.nan)[rows] for n in names]
        )
        values = values[np.isfinite(values)]
        if values.size and values.min() > 0 and values.max() >= LOG_ROW_RATIO * values.min():
            out.add(column)
    return out


REFERENCE_LABEL = "the target's own value (dashed)"
REFERENCE_DOTTED = "the target's own value (dotted)"


def _reference_steps(
    summary: dict[str, Any] | None,
    requests: pd.DataFrame | None,
    variant: str,
    column: str,
    reference: dict[str, dict[str, float]] | None,
) -> list[tuple[float, float]]:
    """(from slot, value) of the target's own metric: the target of all the data, then after each
    request the target without the nodes forgotten so far (summary.json theory.target)."""
    targets = ((summary or {}).get("variants", {}).get(variant, {}).get("theory") or {}).get(
        "target", {}
    )
    stages = [entry.get(column) for entry in targets.values()] if targets else []
    if not stages or stages[0] is None:
        value = (reference or {}).get(variant, {}).get(column)
        return [] if value is None else [(-math.inf, float(value))]
    out = [(-math.inf, float(stages[0]))]
    if requests is not None and not requests.empty and len(stages) > 1:
        part = requests.loc[requests["variant"] == variant].dropna(subset=["request_iteration"])
        slots = part.groupby("request")["request_iteration"].median().sort_index().to_numpy()
        for slot, value in zip(slots, stages[1:], strict=False):
            if value is not None:
                out.append((float(slot), float(value)))
    return out


def plot_evaluation(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    columns: Sequence[str],
    path: Where = None,
    *,
    statistic: str = "median",
    reference: dict[str, dict[str, float]] | None = None,
    title: str = "",
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """Held-out metrics (accuracy, NLL, ECE, particle spread, MMD², ...: ``columns``, by default
    every one the table holds, :func:`evaluation_columns`) and the divergence to the target (KL,
    or the KSD of particle protocols) vs slot, one row each (one column per facet of a sweep; a
    sweep mixing divergences has a row for each); dashed: the same metric of the target posterior
    (the centralised optimum, and after a request the optimum without the forgotten nodes), or,
    where the folder has the retrain baseline's copy of a metric or of the divergence
    (``retrain_accuracy``, ``retrain_ksd``, ``retrain_mmd_unlearned``, ...), the retrain
    baseline's centre line; request slots marked. A metric whose values are all positive and
    span two decades or more (:func:`_log_rows`) is drawn on a log axis; every axis holds
    everything drawn on it (the divergence's log axis from its smallest to its largest value)."""
    columns = [c for c in columns if c in metrics.columns]
    if not columns:
        return None
    fac = facets(summary, variants)
    panels = [p for p in fac.panels if p.variants]
    kinds = divergences(metrics, fac.variants)
    names = [*columns, *(k.column for k in distinct(kinds))]
    rows_of = {k.column: k for k in kinds.values()}
    retrained = [
        c
        for c in [*columns, *(k.column for k in distinct(kinds))]
        if f"retrain_{c}" in metrics.columns and metrics[f"retrain_{c}"].notna().any()
    ]  # the retrain baseline's lines are dashed: the target's own value is then dotted
    # the target's own metrics are those of a natural-parameter target (summary.json theory): a
    # particle protocol's target has none (folders of gossipsim 4cb3108 recorded the Gaussian
    # optimum's there, another posterior)
    own = [v for v in fac.variants if kinds[v].column == KL.column]
    logarithmic = _log_rows(metrics, fac.variants, columns)
    references = any(
        _reference_steps(summary, requests, v, c, reference) for v in own for c in columns
    )
    reference_style = ":" if retrained and references else S.REFERENCE_STYLE
    reference_label = REFERENCE_LABEL if reference_style == "--" else REFERENCE_DOTTED
    cols = len(panels)
    width = COLUMN_WIDTH_IN if cols == 1 else S.DOUBLE_WIDTH_IN
    legend = Legend()
    roles = Legend()  # the retrain baseline's lines: named after the variants
    description = ""
    counts: list[int] = []
    names_drawn: list[RequestNames | None] = []
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 0.9 + 1.45 * len(names), ax=ax, fig=fig)
        specs = area.add_gridspec(len(names), cols)
        panel_width = area.bbox.width / area.dpi / cols
        for c, panel in enumerate(panels):
            top: Axes | None = None
            marks = _merge_marks(
                _marks_by_variant(requests, panel.variants, "request_iteration"), panel.variants
            )
            for r, column in enumerate(names):
                lp = LogPanel() if column in rows_of else None
                pax = None if lp is not None else area.add_subplot(specs[r, c], sharex=top)
                for v in panel.variants:
                    if lp is not None and kinds[v].column != column:
                        continue  # another divergence's row
                    grid_, values = band_matrix(metrics.dropna(subset=[column]), v, column)
                    if lp is not None:
                        counts.append(values.shape[0])
                    if not grid_.size:
                        continue  # no value of this metric in the variant's rows
                    band = across_runs(values, statistic)
                    description = band.description
                    colour, label = fac.colour[v], fac.label[v]
                    legend.add(label, band_handle(colour))
                    if lp is not None:
                        lp.band(
                            grid_,
                            band.lo,
                            band.hi,
                            color=colour,
                            alpha=S.BAND_ALPHA,
                            linewidth=0,
                            label=label,
                        )
                        lp.line(grid_, band.center, color=colour, label=label)
                        retrain = _retrain_center(metrics, v, rows_of[column].retrain_column,
                                                  statistic)  # fmt: skip
                        if retrain is not None:
                            lp.line(*retrain, color=colour, label=RETRAIN_BESIDE, gid="retrain",
                                    **RETRAIN_STYLE)  # fmt: skip
                            roles.add(RETRAIN_BESIDE, line_handle(color="0.3", **RETRAIN_STYLE))
                        continue
                    assert pax is not None
                    pax.fill_between(grid_, band.lo, band.hi, color=colour, alpha=S.BAND_ALPHA, linewidth=0,
                                    label=label)  # fmt: skip
                    pax.plot(grid_, band.center, color=colour, label=label)
                    if column in retrained:
                        _retrain_line(pax, metrics, v, column, statistic, colour, roles)
                    steps = (
                        _reference_steps(summary, requests, v, column, reference)
                        if v in own
                        else []
                    )
                    if steps and grid_.size:
                        xs = [max(s, float(grid_[0])) for s, _ in steps] + [float(grid_[-1])]
                        ys = [val for _, val in steps]
                        pax.stairs(ys, xs, color=colour, linestyle=reference_style, linewidth=0.8,
                                  baseline=None, label=reference_label)  # fmt: skip
                        legend.add(
                            reference_label,
                            line_handle(color="0.3", linestyle=reference_style, linewidth=0.8),
                        )
                if lp is not None:
                    pax = lp.render(area, specs[r, c], sharex=top)
                    axes = lp.axes
                    pax.set_ylabel(rows_of[column].stacked)
                    bottom = lp.bottom
                    if r < len(names) - 1:  # a sweep of two divergences: another row below
                        for a in axes:
                            a.tick_params(labelbottom=False)
                else:
                    assert pax is not None
                    axes = [pax]
                    pax.set_ylabel(EVALUATION_LABELS.get(column, column))
                    if column in logarithmic:
                        pax.set_yscale("log")
                        low, high = pax.get_ylim()
                        tidy_log_axis(pax.yaxis, low, high)
                    pax.grid(True, alpha=0.3)
                    pax.tick_params(labelbottom=False)
                    bottom = pax
                top = top or pax
                names_drawn.append(draw_request_marks(axes, pax, marks, name=r == 0))
                add_request_entries(legend, marks)
                if r == 0 and panel.title:
                    pax.set_title(wrap(panel.title, panel_width - 0.3, 8))
            bottom.set_xlabel("iteration (slot)")
            bottom.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        for label, handle in roles.entries.items():
            legend.add(label, handle)
        head = f"{fac.line_title}: " if fac.line_title else ""
        default = f"Held-out metrics and {joined_names(kinds)} to the target"
        heading = area.suptitle(wrap(title or default, width, 9))
        key = legend.place(area, ncols=2 if width <= COLUMN_WIDTH_IN else 4,
                           title=f"{head}{description} ({_runs_text(counts)})")  # fmt: skip
        _fit_height(area, ax is None and fig is None, 1.45 * len(names), heading, key)
        return _finish(area, path, names_drawn)


RETRAIN_BESIDE = "dashed: retrain from scratch (centre line)"
RETRAIN_STYLE: dict[str, Any] = {"linestyle": S.RETRAIN["linestyle"], "linewidth": 1.0}


def _retrain_center(
    metrics: pd.DataFrame, variant: str, name: str, statistic: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """The slots and centre line over runs of the retrain baseline's column ``name`` (from the
    first request on), None where the variant has no value of it."""
    if name not in metrics.columns:
        return None
    grid_, values = band_matrix(metrics.dropna(subset=[name]), variant, name)
    if not grid_.size:
        return None
    return grid_, across_runs(values, statistic).center


def _retrain_line(
    ax: Axes,
    metrics: pd.DataFrame,
    variant: str,
    column: str,
    statistic: str,
    colour: str,
    legend: Legend,
) -> None:
    """The retrain baseline's ``retrain_`` copy of ``column`` (from the first request on): its
    centre line, dashed in the variant's colour (its band would hide the protocol's)."""
    found = _retrain_center(metrics, variant, f"retrain_{column}", statistic)
    if found is None:
        return
    ax.plot(*found, color=colour, label=RETRAIN_BESIDE, gid="retrain", **RETRAIN_STYLE)
    legend.add(RETRAIN_BESIDE, line_handle(color="0.3", **RETRAIN_STYLE))


# ---------------------------------------------------------------------------------------------------
# accuracy on the forgotten and the remaining labels

#: the rows of the unlearning-accuracy figure: column, y label
ACCURACY_SPLIT = (
    ("accuracy_forgotten", "accuracy on the\nforgotten labels"),
    ("accuracy_remaining", "accuracy on the\nremaining labels"),
)
NO_FORGOTTEN = "no label is held only by forgotten nodes"
PROTOCOL_LINE = "the protocol: learning, then unlearning"


def plot_unlearning_accuracy(
    metrics: pd.DataFrame,
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Where = None,
    *,
    statistic: str = "median",
    summary: dict[str, Any] | None = None,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """Accuracy on the held-out examples whose labels only the forgotten nodes hold
    (``accuracy_forgotten``, top) and on the rest (``accuracy_remaining``, below) vs slot: the
    protocol (blue, solid: learning, then unlearning) and the retrain baseline from the first
    request on (vermillion, dashed; ``retrain_accuracy_forgotten``, ...), each with its band,
    request slots marked: Forget-SVGD against retraining (issue 22, item 10). One column per
    variant (up to three a row), or a sweep of two or more dimensions by its factors, each cell
    holding the two panels; the panels of a row share their scales. Where no held-out label is
    held only by forgotten nodes (``accuracy_forgotten`` empty: every label remains), the one
    panel of each variant is its accuracy and the title says why. None without either column or
    without a request that arrived."""
    present = [c for c, _ in ACCURACY_SPLIT if c in metrics.columns]
    if not present or requests is None or requests.empty:
        return None
    if "request_iteration" not in requests or requests["request_iteration"].isna().all():
        return None
    held = metrics.groupby("variant", observed=True, sort=False)[present].count()
    have = {str(v): {c for c, n in zip(present, row, strict=True) if n > 0}
            for v, row in zip(held.index, held.to_numpy(), strict=True)}  # fmt: skip
    drawn = [v for v in variants if have.get(v)]
    if not drawn:
        return None
    forgotten = any("accuracy_forgotten" in have[v] for v in drawn)
    rows_shown = (
        [(c, label) for c, label in ACCURACY_SPLIT if c in present]
        if forgotten
        else [("accuracy_remaining", "accuracy (every\nlabel remains)")]
    )
    fac = facets(summary, variants)
    if len([p for p in fac.panels if any(v in drawn for v in p.variants)]) > 1:
        cells = variant_cells(fac, drawn)
    else:  # one dimension: the variants side by side, three a row
        cols = min(len(drawn), 3)
        cells = Cells({v: divmod(i, cols) for i, v in enumerate(drawn)},
                      math.ceil(len(drawn) / cols), cols)  # fmt: skip
    width = figure_width(cells.cols)
    n = len(rows_shown)
    cell_in = 1.45 * n + 0.45
    legend = Legend()
    runs: list[int] = []
    description = ""
    arrived = requests.dropna(subset=["request_iteration"])
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 0.9 + cell_in * cells.rows, ax=ax, fig=fig)
        specs = area.add_gridspec(cells.rows, cells.cols)
        panel_width = area.bbox.width / area.dpi / cells.cols
        placed: dict[tuple[int, int], Axes] = {}
        names: list[RequestNames | None] = []
        shared: dict[str, Axes] = {}  # the first axes of each row: the scales of its kind
        for variant in drawn:
            r, c = cells.where[variant]
            sub = specs[r, c].subgridspec(n, 1, hspace=0.1)
            axes: list[Axes] = []
            for k, (column, ylabel) in enumerate(rows_shown):
                pax = area.add_subplot(sub[k], sharex=shared.get("x"), sharey=shared.get(column))
                shared.setdefault("x", pax)
                shared.setdefault(column, pax)
                axes.append(pax)
                for name, role, label in (
                    (column, S.UNLEARNING, PROTOCOL_LINE),
                    (f"retrain_{column}", S.RETRAIN, "retrain from scratch (same walk)"),
                ):
                    if name not in metrics.columns:
                        continue
                    grid_, values = band_matrix(metrics.dropna(subset=[name]), variant, name)
                    if not grid_.size:
                        continue
                    if name == column and k == 0:
                        runs.append(values.shape[0])
                    band = across_runs(values, statistic)
                    description = band.description
                    pax.fill_between(grid_, band.lo, band.hi, color=role["color"], alpha=S.BAND_ALPHA,
                                     linewidth=0, label=label)  # fmt: skip
                    pax.plot(grid_, band.center, label=label, **role)
                    legend.add(label, band_handle(role["color"], linestyle=role["linestyle"]))
                pax.grid(True, alpha=0.3)
                if c == 0:
                    pax.set_ylabel(ylabel)
                else:
                    pax.tick_params(labelleft=False)
                if k < n - 1:
                    pax.tick_params(labelbottom=False)
            marks = request_marks(arrived, [variant])
            names.append(draw_request_marks(axes, axes[0], marks))
            add_request_entries(legend, marks)
            placed[r, c] = axes[0]
            if cells.row_labels is None and len(drawn) > 1:
                axes[0].set_title(wrap(variant, panel_width - 0.3, 8))
            bottom = axes[-1]
            if not any(cells.where[v] == (r + 1, c) for v in drawn):
                bottom.set_xlabel("iteration (slot)")
            bottom.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        _label_cells(placed, cells, panel_width, cell_in - 0.5)
        what = (
            "Accuracy on the forgotten and the remaining labels"
            if forgotten
            else f"Held-out accuracy ({NO_FORGOTTEN})"
        )
        heading = area.suptitle(wrap(f"{what}: unlearning vs retraining from scratch",
                                     area.bbox.width / area.dpi - 0.2, 9))  # fmt: skip
        key = legend.place(area, ncols=2 if width <= COLUMN_WIDTH_IN else 4,
                           title=f"{description} ({_runs_text(runs)})")  # fmt: skip
        _fit_height(area, ax is None and fig is None, cell_in * cells.rows, heading, key)
        return _finish(area, path, names)


# ---------------------------------------------------------------------------------------------------
# particle sets over the exact density


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
    (``theory.target_density``), with each set's KSD and MMD² from ``metrics``
    (:mod:`gossipsim.figures.particles`). None without particle sets of d ≥ 2."""
    from gossipsim.figures.particles import draw_particles

    area = draw_particles(particles, requests, variants, summary=summary, metrics=metrics,
                          ax=ax, fig=fig)  # fmt: skip
    return None if area is None else _finish(area, path)


# ---------------------------------------------------------------------------------------------------
# all figures of a results folder


def plot_results(
    metrics: pd.DataFrame,
    runs: pd.DataFrame,
    requests: pd.DataFrame,
    visits: pd.DataFrame | None,
    summary: dict[str, Any],
    out_dir: Path,
    *,
    fmt: str = "png",
    statistic: str = "median",
    graphs: dict[str, nx.Graph] | None = None,
    which: Sequence[str] | None = None,
    particles: pd.DataFrame | None = None,
) -> list[Path]:
    """Write every standard figure that applies (or those of ``which``, names from
    :data:`FIGURES`) to ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = _figure_jobs(metrics, runs, requests, visits, summary, statistic, graphs, particles)
    written = [
        job(out_dir / f"{name}.{fmt}")
        for name, job in jobs.items()
        if which is None or name in which
    ]
    return [p for p in written if isinstance(p, Path)]


def draw_figures(
    results: Results,
    out_dir: Path | None,
    *,
    which: Sequence[str] | None = None,
    fmt: str = "png",
    statistic: str = "median",
) -> dict[str, Path] | dict[str, Figure]:
    """The standard figures of ``results`` (:meth:`gossipsim.results.results.Results.plot`): written to
    ``out_dir`` (name -> file), or, without a folder, returned as :class:`Figures` (matplotlib
    Figures by name, made without pyplot, which a notebook shows)."""
    summary = results.figure_summary()  # without estimating what summary.json holds
    args = (results.metrics, results.runs, results.requests, results.visits, summary)
    if out_dir is not None:
        written = plot_results(*args, out_dir, fmt=fmt, statistic=statistic,
                               graphs=results.graphs, which=which,
                               particles=results.particles)  # fmt: skip
        return {p.stem: p for p in written}
    figures = Figures()
    for name, job in _figure_jobs(*args, statistic, results.graphs, results.particles).items():
        if which is None or name in which:
            drawn = job(None)
            if isinstance(drawn, Figure):
                figures[name] = drawn
    return figures


def _figure_jobs(
    metrics: pd.DataFrame,
    runs: pd.DataFrame,
    requests: pd.DataFrame,
    visits: pd.DataFrame | None,
    summary: dict[str, Any],
    statistic: str,
    graphs: dict[str, nx.Graph] | None,
    particles: pd.DataFrame | None = None,
) -> dict[str, Callable[[Path | None], Path | Figure | None]]:
    """Each standard figure that may apply, by name: a function drawing it to a path (or, given
    None, returning its Figure)."""
    variants = list(summary.get("variants", {})) or list(
        dict.fromkeys(metrics["variant"].astype(str))
    )
    tolerance = _tolerance(summary)
    excess = _excess(summary)
    name = summary.get("name", "")
    kinds = divergences(metrics, variants)  # KL, or the KSD of particle protocols
    heading = divergence_title(kinds)
    common: dict[str, Any] = {"statistic": statistic, "tolerance": tolerance, "excess": excess}
    jobs: dict[str, Callable[[Path | None], Path | Figure | None]] = {
        "kl_vs_iteration": lambda path: plot_kl_vs_iteration(
            metrics, variants, path, **common,
            title=f"{name}: {heading}", summary=summary, requests=requests,
        ),
        "kl_vs_time": lambda path: plot_kl_vs_time(
            metrics, variants, path, **common,
            title=f"{name}: {heading} against simulated time",
            summary=summary, requests=requests,
        ),
        "unlearning_kl": lambda path: plot_unlearning_kl(
            metrics, requests, variants, path, **common, summary=summary
        ),
        "latency": lambda path: plot_latency(requests, variants, path, summary, runs=runs,
                                             divergence=kinds),
        "cover_time": lambda path: plot_cover_time(runs, summary, path),
    }  # fmt: skip
    local = _local_iterations(summary)
    if any(v > 1 for v in local.values()):  # Fig. 4: against total local iterations L·i
        jobs["kl_vs_local_iterations"] = lambda path: plot_kl_vs_iteration(
            metrics, variants, path, **common, x_scale=local,
            xlabel="total local iterations L·i",
            title=f"{name}: {joined_names(kinds)} against total local iterations",
            summary=summary, requests=requests,
        )  # fmt: skip
    evaluation = evaluation_columns(metrics)
    if evaluation:
        reference = {
            label: entry.get("theory", {}).get("target", {}).get("all", {})
            for label, entry in summary.get("variants", {}).items()
        }
        jobs["evaluation"] = lambda path: plot_evaluation(
            metrics, variants, evaluation, path, statistic=statistic, reference=reference,
            title=f"{name}: held-out metrics and {joined_names(kinds)} to the target",
            summary=summary, requests=requests,
        )  # fmt: skip
    if any(c in metrics.columns for c, _ in ACCURACY_SPLIT):
        jobs["unlearning_accuracy"] = lambda path: plot_unlearning_accuracy(
            metrics, requests, variants, path, statistic=statistic, summary=summary
        )
    if particles is not None and len(particles):
        jobs["particles"] = lambda path: plot_particles(
            particles, requests, variants, path, summary=summary, metrics=metrics
        )
    if visits is not None and graphs:
        jobs["visits"] = lambda path: plot_visits(visits, graphs, path, summary, requests)
    return jobs


def _local_iterations(summary: dict[str, Any]) -> dict[str, float]:
    out = {}
    for label, entry in summary.get("variants", {}).items():
        value = entry.get("resolved", {}).get("protocol", {}).get("local_iterations", 1)
        out[label] = float(value or 1)
    return out


def _excess(summary: dict[str, Any]) -> bool:
    return any(
        bool(entry.get("resolved", {}).get("metrics", {}).get("excess", False))
        for entry in summary.get("variants", {}).values()
    )


def _tolerance(summary: dict[str, Any]) -> float | None:
    for entry in summary.get("variants", {}).values():
        tol = entry.get("resolved", {}).get("metrics", {}).get("tolerance")
        if tol:
            return float(tol)
    return None
