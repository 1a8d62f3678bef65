"""The standard figures of a results folder, readable at paper-column width.

- ``kl_vs_iteration``: KL(q ‖ target) against the slot, one line per variant: the median over runs
  with the 12.5th-87.5th percentile band, or (``statistic="mean"``) the mean with its 95% confidence
  interval; log scale, exact zeros drawn past a break in the axis; request slots marked;
- ``kl_vs_time``: the same against simulated seconds (skipped when no slot takes any time);
- ``kl_vs_local_iterations``: the same against total local iterations L·i (Fig. 4);
- ``unlearning_kl``: one panel per variant from its first request: KL of the unlearning protocol
  (blue, solid) and of the retrain-from-scratch baseline (vermillion, dashed), best in family;
- ``latency``: one panel per request (variant, node, slot): ECDFs over *all* requests of the removal,
  unlearning and retrain latencies (ending below 1 when some were not served), the measured means
  with their 95% CI and the exact expectation from hitting times;
- ``cover_time``: mean cover time (moves, 95% CI) per variant or against the number of nodes, with
  the exact expectation, Matthews' bounds and the asymptotic formula where known;
- ``evaluation``: held-out metrics and KL to the optimum against the slot, the target's own metrics
  dashed, request slots marked;
- ``visits``: the graph of each variant, each node coloured by the deviation of its share of token
  visits from the walk's stationary share, sized by degree, requested nodes ringed.

A sweep of two or more dimensions is faceted: one panel per value of its second (and later)
dimensions, one line per value of the first (:mod:`gossipsim.plotting.layout`). Legends sit below the
panels and name every line and band. Every function takes the tables as DataFrames, so a notebook
can call them on :class:`Results` directly; :func:`plot_results` writes all that apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patheffects import withStroke  # noqa: E402
from matplotlib.ticker import MaxNLocator, NullLocator  # noqa: E402

from .graphfiles import layout  # noqa: E402
from .plotting import style as S  # noqa: E402
from .plotting.axes import (  # noqa: E402
    REQUEST_LABEL,
    Legend,
    LogPanel,
    RequestMark,
    band_handle,
    draw_request_marks,
    line_handle,
    request_handle,
    request_marks,
)
from .plotting.layout import Facets, facets, grid  # noqa: E402
from .plotting.stats import (  # noqa: E402
    STATISTICS,
    across_runs,
    band_matrix,
    ecdf,
    mean_and_half_width,
    step_values_on_grid,
)

if TYPE_CHECKING:
    from .results import Results

__all__ = [
    "COLUMN_WIDTH_IN",
    "EVALUATION_LABELS",
    "FIGURES",
    "FORMATS",
    "MAX_NODES_DRAWN",
    "STATISTICS",
    "draw_figures",
    "plot_cover_time",
    "plot_evaluation",
    "plot_kl_vs_iteration",
    "plot_kl_vs_time",
    "plot_latency",
    "plot_results",
    "plot_unlearning_kl",
    "plot_visits",
]

FORMATS = ("png", "pdf", "svg")
#: the standard figures, by the name of their file (what Results.plot(which=...) picks from)
FIGURES = (
    "kl_vs_iteration", "kl_vs_time", "unlearning_kl", "latency", "cover_time",
    "kl_vs_local_iterations", "evaluation", "visits",
)  # fmt: skip
# while set, figures are kept (by file stem) instead of saved: Results.plot without a folder
_KEPT: ContextVar[dict[str, Figure] | None] = ContextVar("kept_figures", default=None)
COLUMN_WIDTH_IN = S.COLUMN_WIDTH_IN
MAX_NODES_DRAWN = 500
PANEL_HEIGHT_IN = 2.0
KL_LABEL = "KL(q ‖ target) (nats)"


def _figure(width: float, height: float) -> Figure:
    fig = plt.figure(figsize=(width, height), layout="constrained")
    engine = cast(Any, fig.get_layout_engine())
    engine.set(h_pad=0.03, w_pad=0.03, hspace=0.03, wspace=0.03)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    kept = _KEPT.get()
    if kept is not None:  # returned to the caller (a notebook shows it), not written
        plt.close(fig)  # out of pyplot's list of open figures; the object stays usable
        kept[path.stem] = fig
        return path
    fig.savefig(path)
    plt.close(fig)
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


def _kl_figure(
    path: Path,
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
) -> Path:
    """KL curves (centre line and band per variant) in the panels of ``fac``."""
    by_variant = {c.variant: c for c in curves}
    panels = [p for p in fac.panels if any(v in by_variant for v in p.variants)]
    rows, cols, width = grid(len(panels))
    legend = Legend()
    common = _constant(best)
    single_best = len(best) == 1
    description = ""
    with plt.rc_context(S.RC):
        fig = _figure(width, 0.9 + PANEL_HEIGHT_IN * rows)
        specs = fig.add_gridspec(rows, cols)
        first: Axes | None = None
        for k, panel in enumerate(panels):
            lp = LogPanel()
            for v in panel.variants:
                if v not in by_variant:
                    continue
                c = by_variant[v]
                band = across_runs(c.values, statistic)
                description = band.description
                colour, label = fac.colour[v], fac.label[v]
                lp.band(c.x, band.lo, band.hi, color=colour, alpha=S.BAND_ALPHA, linewidth=0,
                        label=label)  # fmt: skip
                lp.line(c.x, band.center, color=colour, label=label)
                legend.add(label, band_handle(colour))
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
            if tolerance and not excess:
                name = f"tolerance {tolerance:g}"
                lp.hline(tolerance, label=name, **S.TOLERANCE)
                legend.add(name, line_handle(**S.TOLERANCE))
            ax = lp.render(fig, specs[k // cols, k % cols], sharex=first)
            first = first or ax
            panel_marks = _merge_marks(marks, panel.variants)
            draw_request_marks(lp.axes, ax, panel_marks)
            if panel_marks:
                legend.add(REQUEST_LABEL, request_handle())
            if panel.title:
                ax.set_title(panel.title)
            if k % cols == 0:
                ax.set_ylabel(KL_LABEL)
            if k + cols >= len(panels):
                lp.bottom.set_xlabel(xlabel)
            lp.bottom.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
        fig.suptitle(title)
        head = f"{fac.line_title}: " if fac.line_title else ""
        runs = _runs_text([c.values.shape[0] for c in curves])
        legend.place(fig, ncols=2 if width <= COLUMN_WIDTH_IN else 4,
                     title=f"{head}{description} ({runs})")  # fmt: skip
        return _save(fig, path)


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
    path: Path,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    title: str = "",
    x_scale: dict[str, float] | None = None,
    xlabel: str = "iteration (slot)",
    excess: bool = False,
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
) -> Path:
    """KL(q ‖ target) vs slot: ``statistic`` over runs and its band, one line per variant, faceted
    by the second dimension of a sweep (``summary``), request slots (``requests``) marked.

    ``x_scale`` multiplies each variant's slots (e.g. by L for total local iterations L·i, Fig. 4).
    Where the target lies outside the family, its best-in-family KL is drawn dashed: once, in black,
    when it is the same for every variant.
    """
    curves = []
    for variant in variants:
        grid_, values = band_matrix(metrics, variant, "kl")
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
        title=title or "KL divergence to the target",
    )


def plot_kl_vs_time(
    metrics: pd.DataFrame,
    variants: Sequence[str],
    path: Path,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    title: str = "",
    points: int = 400,
    excess: bool = False,
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
) -> Path | None:
    """KL vs simulated time, on a common time grid (each run's KL is a step function of time)."""
    if not (metrics["time"].max() > 0):
        return None
    grid_ = np.linspace(0.0, float(metrics["time"].max()), points)
    curves = []
    for variant in variants:
        part = metrics.loc[metrics["variant"] == variant]
        rows = step_values_on_grid(
            part["run"].to_numpy(), part["time"].to_numpy(), part["kl"].to_numpy(float), grid_
        )
        curves.append(_Curve(variant, grid_, rows))
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
        title=title or "KL divergence to the target against simulated time",
    )


# ---------------------------------------------------------------------------------------------------
# unlearning


def _variant_grid(
    fac: Facets, variants: Sequence[str]
) -> tuple[list[tuple[str, int, int]], int, int, float]:
    """Positions of one panel per variant: a sweep's facets as columns (up to three, each variant of
    a facet in its own row), otherwise :func:`grid` in order."""
    present = [p for p in fac.panels if any(v in variants for v in p.variants)]
    sizes = {len([v for v in p.variants if v in variants]) for p in present}
    if 1 < len(present) <= 3 and len(sizes) == 1:
        rows = sizes.pop()
        cells = [
            (v, r, c)
            for c, p in enumerate(present)
            for r, v in enumerate([v for v in p.variants if v in variants])
        ]
        width = COLUMN_WIDTH_IN if len(present) == 1 else S.DOUBLE_WIDTH_IN
        return cells, rows, len(present), width
    ordered = [v for v in fac.variants if v in variants]
    rows, cols, width = grid(len(ordered))
    return [(v, i // cols, i % cols) for i, v in enumerate(ordered)], rows, cols, width


def plot_unlearning_kl(
    metrics: pd.DataFrame,
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Path,
    *,
    statistic: str = "median",
    tolerance: float | None = None,
    excess: bool = False,
    summary: dict[str, Any] | None = None,
) -> Path | None:
    """One panel per variant, from its first request: KL of unlearning (blue, solid) and of
    retraining from scratch on the same walk (vermillion, dashed), each with its band; the
    best-in-family KL (black, dashed) where the target is outside the family; request slots marked.
    A panel whose retrain baseline recorded no KL says so."""
    if requests.empty or "request_iteration" not in requests:
        return None
    if requests["request_iteration"].isna().all():  # no request arrived within any run
        return None
    arrived = requests.dropna(subset=["request_iteration"])
    drawn = [v for v in variants if (arrived["variant"] == v).any()]
    if not drawn:
        return None
    cells, rows, cols, width = _variant_grid(facets(summary, variants), drawn)
    legend = Legend()
    runs: list[int] = []
    description = ""
    with plt.rc_context(S.RC):
        fig = _figure(width, 0.9 + PANEL_HEIGHT_IN * rows)
        specs = fig.add_gridspec(rows, cols)
        for variant, r, c in cells:
            first = int(arrived.loc[arrived["variant"] == variant, "request_iteration"].min())
            grid_, main = band_matrix(metrics, variant, "kl")
            keep = grid_ >= first - 1
            x = grid_[keep]
            runs.append(main.shape[0])
            lp = LogPanel()
            missing_retrain = True
            for column, role, name in (
                ("kl", S.UNLEARNING, "unlearning"),
                ("retrain_kl", S.RETRAIN, "retrain from scratch"),
            ):
                if column not in metrics.columns:
                    continue
                values = main if column == "kl" else band_matrix(metrics, variant, column)[1]
                values = values[:, keep]
                if not np.isfinite(values).any():
                    continue
                missing_retrain = missing_retrain and column != "retrain_kl"
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
                name = f"tolerance {tolerance:g}"
                lp.hline(tolerance, label=name, **S.TOLERANCE)
                legend.add(name, line_handle(**S.TOLERANCE))
            ax = lp.render(fig, specs[r, c])
            draw_request_marks(lp.axes, ax, request_marks(arrived, [variant]))
            legend.add(REQUEST_LABEL, request_handle())
            if missing_retrain:
                why = (
                    "no retrain baseline (protocol.retrain_baseline = false)"
                    if "retrain_kl" not in metrics.columns
                    else "retrain baseline: no KL recorded after the request"
                )
                ax.text(0.98, 0.96, why, transform=ax.transAxes, ha="right", va="top", fontsize=6,
                        gid="note")  # fmt: skip
            if len(drawn) > 1:
                ax.set_title(variant)
            if c == 0:
                ax.set_ylabel("KL(q ‖ target without\nthe forgotten nodes) (nats)")
            if r == rows - 1 or not any(cr == r + 1 and cc == c for _, cr, cc in cells):
                lp.bottom.set_xlabel("iteration (slot)")
            lp.bottom.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        fig.suptitle("Unlearning vs retraining from scratch (same walk)")
        legend.place(fig, ncols=2, title=f"{description} ({_runs_text(runs)})")
        return _save(fig, path)


LATENCY_NAMES = {
    "removal_latency": "removal",
    "latency": "unlearning (KL)",
    "retrain_latency": "retrain (KL)",
}
LATENCY_STYLES: dict[str, dict[str, Any]] = {
    "removal_latency": S.REMOVAL,
    "latency": {**S.UNLEARNING, "linewidth": 1.2},
    "retrain_latency": {**S.RETRAIN, "linewidth": 1.2},
}


def _exact_latency(summary: dict[str, Any] | None, variant: str, node: Any) -> float | None:
    entry = (summary or {}).get("variants", {}).get(variant, {})
    value = (entry.get("theory") or {}).get("expected_unlearning_latency", {}).get(str(node))
    return None if value is None else float(value)


def plot_latency(
    requests: pd.DataFrame,
    variants: Sequence[str],
    path: Path,
    summary: dict[str, Any] | None = None,
) -> Path | None:
    """One panel per request (variant, node and slot): empirical CDFs of the removal latency (wide
    pale line; the paper's unlearning latency), the KL-based unlearning latency (solid) and the
    retrain latency (dashed), each a fraction of *all* requests that arrived, so it ends below 1 when
    some were not served within the run; the legend gives each mean with its 95% CI and served /
    total, the exact expectation from hitting times is the dotted line, and a latency none of the
    requests reached is named with "none served"."""
    columns = [c for c in LATENCY_NAMES if c in requests]
    if requests.empty or not columns or "request_iteration" not in requests:
        return None
    if not any(requests[c].notna().any() for c in columns):
        return None
    panels: list[tuple[str, Any, Any, pd.DataFrame, int]] = []
    for variant in variants:
        part = requests.loc[requests["variant"] == variant]
        for (_, node), rows_ in part.groupby(["request", "node"], sort=True):
            arrived = rows_.dropna(subset=["request_iteration"])
            if len(arrived):
                slots = arrived["request_iteration"].to_numpy(dtype=float)
                slot = int(slots[0]) if np.all(slots == slots[0]) else None
                panels.append((variant, node, slot, arrived, len(rows_) - len(arrived)))
    if not panels:
        return None
    fac = facets(summary, variants)
    per_variant = {v: sum(1 for p in panels if p[0] == v) for v in variants}
    if set(per_variant.values()) <= {0, 1}:
        vcells, rows, cols, width = _variant_grid(fac, [p[0] for p in panels])
        where = {v: (r, c) for v, r, c in vcells}
        cells = [(p, *where[p[0]]) for p in panels]
    else:
        rows, cols, width = grid(len(panels))
        cells = [(p, i // cols, i % cols) for i, p in enumerate(panels)]
    with plt.rc_context(S.RC):
        fig = _figure(width, 0.5 + 2.75 * rows)
        specs = fig.add_gridspec(rows, cols)
        for (variant, node, slot, arrived, late), r, c in cells:
            ax = fig.add_subplot(specs[r, c])
            total = len(arrived)
            handles: list[Any] = []
            labels: list[str] = []
            ecdfs = {c: ecdf(arrived[c].to_numpy(dtype=float, na_value=np.nan)) for c in columns}
            # every curve runs on to the panel's right end, where its level (served / total) is read
            exact = _exact_latency(summary, variant, node)
            reach = [float(e.x[-1]) for e in ecdfs.values() if e.served]
            end = 1.3 * max([*reach, exact or 0.0, 1.0])
            for column in columns:
                e = ecdfs[column]
                style = LATENCY_STYLES[column]
                name = LATENCY_NAMES[column]
                if e.served == 0:
                    label = f"{name}: none of {total:,} served"
                else:
                    mean, half = mean_and_half_width(e.x)
                    ci = f" ± {_num(half, 2)}" if np.isfinite(half) else ""
                    label = f"{name}: mean {_num(mean)}{ci}, {e.served:,}/{total:,} served"
                    ax.step(
                        np.concatenate([[0.0], e.x, [end]]),
                        np.concatenate([[0.0], e.y, [e.y[-1]]]),
                        where="post",
                        label=label,
                        **style,
                    )
                handles.append(line_handle(**style))
                labels.append(label)
                if column == "removal_latency" and exact is not None:
                    label = f"exact E[removal] (hitting times): {_num(exact)}"
                    ax.axvline(exact, label=label, **S.EXACT)
                    handles.append(line_handle(**S.EXACT))
                    labels.append(label)
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlim(0, end)
            ax.set_ylim(0, 1.03)
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("latency (slots after the request; log scale)")
            if c == 0:
                ax.set_ylabel("fraction of requests served")
            where_ = f"at slot {slot:,}" if slot is not None else "at varying slots"
            head = f"{variant}\n" if len(variants) > 1 else ""
            tail = f"; {late} runs ended before it" if late else ""
            ax.set_title(f"{head}node {node}, request {where_} ({total:,} requests{tail})")
            ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncols=1,
                      fontsize=6, handlelength=2.4)  # fmt: skip
        fig.suptitle(
            "Latency per request: ECDF over all requests (below 1 if some were\n"
            "not served); mean of the served ones ± 95% CI, in slots"
        )
        return _save(fig, path)


# ---------------------------------------------------------------------------------------------------
# cover time


def _group_label(values: dict[str, Any], fallback: str) -> str:
    from .sweeps import variant_label

    rest = {k: v for k, v in values.items() if not k.endswith(".nodes")}
    return variant_label(rest, fallback) if rest else fallback


def _cover_rows(runs: pd.DataFrame, summary: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for label, entry in summary.get("variants", {}).items():
        part = runs.loc[runs["variant"] == label]
        all_runs = (  # cover moves: the cover iteration − 1 (tables of older folders lack them)
            part["cover_moves"].to_numpy(dtype=float, na_value=np.nan)
            if "cover_moves" in part
            else part["cover_iteration"].to_numpy(dtype=float, na_value=np.nan) - 1
        )
        x = all_runs[np.isfinite(all_runs)]
        if x.size == 0:
            continue
        topo = entry.get("resolved", {}).get("topology", {})
        theory = entry.get("theory", {}) or {}
        mean, half = mean_and_half_width(x)
        matthews = theory.get("matthews_cover_moves")
        rows.append(
            {
                "label": label,
                "group": _group_label(entry.get("values", {}) or {}, topo.get("kind", label)),
                "nodes": theory.get("nodes", topo.get("nodes")),
                "mean": mean,
                "ci": half if np.isfinite(half) else 0.0,
                "censored": 1.0 - x.size / all_runs.size,
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


def plot_cover_time(runs: pd.DataFrame, summary: dict[str, Any], path: Path) -> Path | None:
    """Mean cover time (moves, 95% CI) per variant, or against the number of nodes when that differs
    between variants (one line per other sweep value), with the exact expectation (closed form or
    subset chain), Matthews' bounds (a bar from lower to upper) and the asymptotic formula where
    known. A mean over only the covered runs (some runs ended first) is drawn hollow."""
    if runs["cover_iteration"].notna().sum() == 0:
        return None
    table = _cover_rows(runs, summary)
    if table.empty:
        return None
    by_nodes = table["nodes"].nunique() > 1
    legend = Legend()
    styles = Legend()
    with plt.rc_context(S.RC):
        fig = _figure(COLUMN_WIDTH_IN, 3.4 if by_nodes else 3.0)
        ax = fig.add_subplot()
        if by_nodes:
            groups = list(dict.fromkeys(table["group"]))
            for i, group in enumerate(groups):
                part = table.loc[table["group"] == group].sort_values("nodes")
                colour = S.colour(i)
                offset = 1.0 + 0.035 * (i - (len(groups) - 1) / 2)  # bars side by side
                x = part["nodes"].to_numpy(dtype=float) * offset
                _cover_points(ax, x, part, colour, styles, joined=True)
                legend.add(group, line_handle(color=colour, marker="o", ms=4, linestyle="none"))
            ax.set_xscale("log")
            ax.set_yscale("log")
            sizes = sorted({int(n) for n in table["nodes"]})
            ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("number of nodes K (log scale)")
        else:
            x = np.arange(len(table), dtype=float)
            _cover_points(ax, x, table, S.PALETTE[0], styles, joined=False)
            ax.set_xticks(x, table["label"])
            ax.set_xlim(-0.6, len(table) - 0.4)
            ax.set_xlabel("variant")
            if (table["exact"].notna() | table["matthews_hi"].notna()).any():
                top = np.nanmax(table[["mean", "exact", "matthews_hi"]].to_numpy(dtype=float))
                ax.set_ylim(0, top * 1.12)
        ax.set_ylabel("cover time (moves = cover iteration − 1)")
        ax.grid(True, alpha=0.3)
        fig.suptitle("Cover time of the token walk")
        for label, handle in styles.entries.items():  # the variants first, then what marks mean
            legend.add(label, handle)
        legend.place(fig, ncols=2)
        return _save(fig, path)


def _cover_points(
    ax: Axes, x: np.ndarray, part: pd.DataFrame, colour: str, legend: Legend, *, joined: bool
) -> None:
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
            ax.plot(x[exact], y, linestyle="none", marker="_", ms=16, mew=1.6, color="black",
                    label=EXACT_COVER)  # fmt: skip
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
    from .scheduling import stationary_distribution

    pi = np.asarray(stationary_distribution(graph, kind), dtype=float)
    part = visits.loc[visits["variant"] == variant]
    share = dict(zip(part["node"].map(str), part["share"], strict=True))
    measured = np.array([share.get(str(node), np.nan) for node in graph.nodes], dtype=float)
    return pi, measured / pi - 1.0


def plot_visits(
    visits: pd.DataFrame,
    graphs: dict[str, nx.Graph],
    path: Path,
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
) -> Path | None:
    """The graph of each variant (up to 6), each node coloured by the deviation of its share of token
    visits (all runs' slots together) from the walk's stationary share (uniform under
    Metropolis-Hastings, proportional to the degree under the simple random walk), on a diverging
    scale centred on zero; node size by degree, with a key; requested nodes ringed and named."""
    drawable = [(v, g) for v, g in graphs.items() if g.number_of_nodes() <= MAX_NODES_DRAWN]
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
    with plt.rc_context(S.RC):
        fig = _figure(width, 0.9 + 2.6 * rows * (1.0 if cols > 1 else 1.1))
        specs = fig.add_gridspec(rows, cols)
        mappable = None
        axes = []
        for variant, graph in drawable:
            ax = fig.add_subplot(specs[cells[variant]])
            axes.append(ax)
            pi, dev = deviations[variant]
            deg = np.array([d for _, d in graph.degree()], dtype=float)
            pos = layout(graph)  # saved with the graph (graphs/*.graphml), else computed once
            nx.draw_networkx_edges(graph, pos, ax=ax, width=0.4, alpha=0.35)
            mappable = nx.draw_networkx_nodes(
                graph, pos, ax=ax, node_size=size(deg), node_color=100 * dev, cmap="RdBu_r",
                vmin=-limit, vmax=limit, edgecolors="0.3", linewidths=0.3,
            )  # fmt: skip
            asked = [
                node
                for node in graph.nodes
                if str(node) in _requested_nodes(summary, requests, variant)
            ]
            if asked:
                index = {node: i for i, node in enumerate(graph.nodes)}
                nx.draw_networkx_nodes(
                    graph, pos, nodelist=asked, ax=ax,
                    node_size=[size(deg[[index[a]]])[0] + 60 for a in asked],
                    node_color="none", edgecolors="black", linewidths=1.4,
                )  # fmt: skip
                for a in asked:
                    ax.annotate(f"{a}", pos[a], textcoords="offset points", xytext=(6, 6), fontsize=7,
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
            ax.set_title(f"{variant}\n{walk}max |share / π − 1| = {worst:.2g}%", fontsize=7)
            ax.margins(0.08)
            ax.set_axis_off()
        for d in sorted({dmin, round((dmin + dmax) / 2), dmax}):
            legend.add(f"degree {d:g}", line_handle(linestyle="none", marker="o", color="0.75", mec="0.3",
                                                  mew=0.3, ms=math.sqrt(float(size(np.array([d]))[0]))))  # fmt: skip
        if mappable is not None:
            bar = fig.colorbar(mappable, ax=axes, shrink=0.8, pad=0.02)
            bar.set_label("visit share vs stationary share π:\nshare / π − 1 (%)")
        walk = (
            f"\n{_stationary_words(next(iter(kinds.values())), deviations[drawable[0][0]][0])}"
            if len(set(kinds.values())) == 1
            else ""
        )
        fig.suptitle(
            f"Share of token visits (all runs' slots) against the stationary share π{walk}"
        )
        legend.place(fig, ncols=4, title="node size: degree")
        return _save(fig, path)


# ---------------------------------------------------------------------------------------------------
# held-out evaluation


EVALUATION_LABELS = {
    "accuracy": "accuracy\n(fraction)",
    "nll": "NLL\n(nats per point)",
    "ece": "ECE\n(fraction)",
    "rmse": "RMSE\n(units of y)",
}
REFERENCE_LABEL = "the target's own value (dashed)"


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
    path: Path,
    *,
    statistic: str = "median",
    reference: dict[str, dict[str, float]] | None = None,
    title: str = "",
    summary: dict[str, Any] | None = None,
    requests: pd.DataFrame | None = None,
) -> Path | None:
    """Held-out metrics (accuracy, NLL, ECE, ...) and KL to the target vs slot, one row each (one
    column per facet of a sweep); dashed: the same metric of the target posterior (the centralised
    optimum, and after a request the optimum without the forgotten nodes); request slots marked."""
    columns = [c for c in columns if c in metrics.columns]
    if not columns:
        return None
    fac = facets(summary, variants)
    panels = [p for p in fac.panels if p.variants]
    names = [*columns, "kl"]
    cols = len(panels)
    width = COLUMN_WIDTH_IN if cols == 1 else S.DOUBLE_WIDTH_IN
    legend = Legend()
    description = ""
    counts: list[int] = []
    with plt.rc_context(S.RC):
        fig = _figure(width, 0.9 + 1.45 * len(names))
        specs = fig.add_gridspec(len(names), cols)
        for c, panel in enumerate(panels):
            top: Axes | None = None
            marks = _merge_marks(
                _marks_by_variant(requests, panel.variants, "request_iteration"), panel.variants
            )
            for r, column in enumerate(names):
                lp = LogPanel() if column == "kl" else None
                ax = None if lp is not None else fig.add_subplot(specs[r, c], sharex=top)
                for v in panel.variants:
                    grid_, values = band_matrix(metrics.dropna(subset=[column]), v, column)
                    if column == "kl":
                        counts.append(values.shape[0])
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
                        continue
                    assert ax is not None
                    ax.fill_between(grid_, band.lo, band.hi, color=colour, alpha=S.BAND_ALPHA, linewidth=0,
                                    label=label)  # fmt: skip
                    ax.plot(grid_, band.center, color=colour, label=label)
                    steps = _reference_steps(summary, requests, v, column, reference)
                    if steps and grid_.size:
                        xs = [max(s, float(grid_[0])) for s, _ in steps] + [float(grid_[-1])]
                        ys = [val for _, val in steps]
                        ax.stairs(ys, xs, color=colour, linestyle=S.REFERENCE_STYLE, linewidth=0.8,
                                  baseline=None, label=REFERENCE_LABEL)  # fmt: skip
                        legend.add(
                            REFERENCE_LABEL,
                            line_handle(color="0.3", linestyle=S.REFERENCE_STYLE, linewidth=0.8),
                        )
                if lp is not None:
                    ax = lp.render(fig, specs[r, c], sharex=top)
                    axes = lp.axes
                    ax.set_ylabel("KL(q ‖ target)\n(nats)")
                    bottom = lp.bottom
                else:
                    assert ax is not None
                    axes = [ax]
                    ax.set_ylabel(EVALUATION_LABELS.get(column, column))
                    ax.grid(True, alpha=0.3)
                    ax.tick_params(labelbottom=False)
                    bottom = ax
                top = top or ax
                draw_request_marks(axes, ax, marks, name=r == 0)
                if marks:
                    legend.add(REQUEST_LABEL, request_handle())
                if r == 0 and panel.title:
                    ax.set_title(panel.title)
            bottom.set_xlabel("iteration (slot)")
            bottom.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
        head = f"{fac.line_title}: " if fac.line_title else ""
        fig.suptitle(title or "Held-out metrics and KL to the target")
        legend.place(fig, ncols=2, title=f"{head}{description} ({_runs_text(counts)})")
        return _save(fig, path)


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
) -> list[Path]:
    """Write every standard figure that applies (or those of ``which``, names from
    :data:`FIGURES`) to ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = _figure_jobs(metrics, runs, requests, visits, summary, statistic, graphs)
    written = _draw(jobs, which, lambda name: out_dir / f"{name}.{fmt}")
    return [p for p in written if p is not None]


def draw_figures(
    results: Results,
    out_dir: Path | None,
    *,
    which: Sequence[str] | None = None,
    fmt: str = "png",
    statistic: str = "median",
) -> dict[str, Path] | dict[str, Figure]:
    """The standard figures of ``results`` (:meth:`gossipsim.results.Results.plot`): written to
    ``out_dir`` (name -> file), or, without a folder, returned as matplotlib Figures by name."""
    args = (results.metrics, results.runs, results.requests, results.visits, results.summary())
    if out_dir is not None:
        written = plot_results(*args, out_dir, fmt=fmt, statistic=statistic,
                               graphs=results.graphs, which=which)  # fmt: skip
        return {p.stem: p for p in written}
    kept: dict[str, Figure] = {}
    token = _KEPT.set(kept)
    try:
        _draw(_figure_jobs(*args, statistic, results.graphs), which, lambda n: Path(f"{n}.{fmt}"))
    finally:
        _KEPT.reset(token)
    return kept


def _draw(
    jobs: dict[str, Callable[[Path], Path | None]],
    which: Sequence[str] | None,
    path_of: Callable[[str], Path],
) -> list[Path | None]:
    """Run the jobs of the figures ``which`` names (all when None), each to ``path_of(name)``."""
    return [job(path_of(name)) for name, job in jobs.items() if which is None or name in which]


def _figure_jobs(
    metrics: pd.DataFrame,
    runs: pd.DataFrame,
    requests: pd.DataFrame,
    visits: pd.DataFrame | None,
    summary: dict[str, Any],
    statistic: str,
    graphs: dict[str, nx.Graph] | None,
) -> dict[str, Callable[[Path], Path | None]]:
    """Each standard figure that may apply, by name: a function drawing it to a path."""
    variants = list(summary.get("variants", {})) or list(
        dict.fromkeys(metrics["variant"].astype(str))
    )
    tolerance = _tolerance(summary)
    excess = _excess(summary)
    name = summary.get("name", "")
    common: dict[str, Any] = {"statistic": statistic, "tolerance": tolerance, "excess": excess}
    jobs: dict[str, Callable[[Path], Path | None]] = {
        "kl_vs_iteration": lambda path: plot_kl_vs_iteration(
            metrics, variants, path, **common,
            title=f"{name}: KL divergence to the target", summary=summary, requests=requests,
        ),
        "kl_vs_time": lambda path: plot_kl_vs_time(
            metrics, variants, path, **common,
            title=f"{name}: KL divergence to the target against simulated time",
            summary=summary, requests=requests,
        ),
        "unlearning_kl": lambda path: plot_unlearning_kl(
            metrics, requests, variants, path, **common, summary=summary
        ),
        "latency": lambda path: plot_latency(requests, variants, path, summary),
        "cover_time": lambda path: plot_cover_time(runs, summary, path),
    }  # fmt: skip
    local = _local_iterations(summary)
    if any(v > 1 for v in local.values()):  # Fig. 4: against total local iterations L·i
        jobs["kl_vs_local_iterations"] = lambda path: plot_kl_vs_iteration(
            metrics, variants, path, **common, x_scale=local,
            xlabel="total local iterations L·i",
            title=f"{name}: KL against total local iterations", summary=summary, requests=requests,
        )  # fmt: skip
    evaluation = [c for c in EVALUATION_LABELS if c in metrics.columns]
    if evaluation:
        reference = {
            label: entry.get("theory", {}).get("target", {}).get("all", {})
            for label, entry in summary.get("variants", {}).items()
        }
        jobs["evaluation"] = lambda path: plot_evaluation(
            metrics, variants, evaluation, path, statistic=statistic, reference=reference,
            title=f"{name}: held-out metrics and KL to the target", summary=summary,
            requests=requests,
        )  # fmt: skip
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
