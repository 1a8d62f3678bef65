"""The ``latency`` figure: a panel per request, rows the variants and columns their requests, with
the Kaplan–Meier estimates over *all* runs of the removal, unlearning and retrain latencies (a
request not served by the end of its run censored there: :mod:`gossipsim.figures.requests`),
each median with its Brookmeyer–Crowley interval and the (restricted) mean with its interval, the
observation window and the expected removal latency, each named for what it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.patches import Patch

from gossipsim.figures import style as S
from gossipsim.figures.axes import (
    Legend,
    fitted_legend,
    line_handle,
    wrap,
)
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.layout import (
    Cells,
    Facets,
    facets,
    figure_width,
    label_cells,
    variant_cells,
)
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
from gossipsim.measurement.censoring import (
    Estimates,
    empirical_survival,
    estimates,
    kaplan_meier,
    summary_estimates,
)
from gossipsim.states.divergences import KL, Divergence

if TYPE_CHECKING:
    pass


def _num(x: float, digits: int = 3) -> str:
    """``digits`` significant digits without an exponent (1,234 rather than 1.23e+03)."""
    if not np.isfinite(x):
        return "nan"
    if abs(x) >= 10**digits:
        return f"{x:,.0f}"
    return f"{float(f'{x:.{digits}g}'):g}"


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
        label_cells(placed, cells, panel_width, 1.3)
        head = "Latency per request, in slots after the request"
        heading = area.suptitle(
            wrap(f"{head}: {shared}" if shared else head, area.bbox.width / area.dpi - 0.2, 9)
        )
        key = legend.place(area, ncols=2, title=LATENCY_TITLE)
        own = ax is None and fig is None
        fit_height(area, own, (1.75 + legend_in) * cells.rows, heading, key)
        return finish(area, path)


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
