"""The ``evaluation`` figure: every held-out metric of the metrics table (:func:`evaluation_columns`)
and the divergence to the target against the slot, the target's own metrics dashed, request
slots marked; for particle protocols the retrain baseline's ``retrain_`` metrics and divergence
dashed beside the protocol's, and a log axis for a metric that spans decades.
"""

from __future__ import annotations

import math
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
    marks_by_variant,
    merge_marks,
    runs_text,
    tidy_log_axis,
    wrap,
)
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.costaxis import (
    X_LABELS,
    on_axis,
    request_column,
    style_x_axis,
)
from gossipsim.figures.layout import (
    facets,
)
from gossipsim.figures.stats import (
    across_runs,
    band_matrix,
)
from gossipsim.figures.unlearning_accuracy import ACCURACY_SPLIT
from gossipsim.states.divergences import KL, distinct, divergences, joined_names

if TYPE_CHECKING:
    pass


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
    x: str = "iteration",
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
        placed_at = request_column(x)
        part = requests.loc[requests["variant"] == variant].dropna(subset=[placed_at])
        slots = part.groupby("request")[placed_at].median().sort_index().to_numpy()
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
    x: str = "iteration",
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
    everything drawn on it (the divergence's log axis from its smallest to its largest value).

    ``x = "bits"`` or ``"time"``: against cumulative bits or simulated seconds
    (:mod:`gossipsim.figures.costaxis`: the rule; a target's own value changes at the median cost
    at which a request arrived); None when no slot costs any."""
    columns = [c for c in columns if c in metrics.columns]
    if not columns:
        return None
    read = on_axis(metrics, requests, variants, x)
    if read is None:
        return None
    metrics, requests, notes = read
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
    width = S.COLUMN_WIDTH_IN if cols == 1 else S.DOUBLE_WIDTH_IN
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
            marks = merge_marks(
                marks_by_variant(requests, panel.variants, request_column(x)), panel.variants
            )
            for r, column in enumerate(names):
                lp = LogPanel() if column in rows_of else None
                pax = None if lp is not None else area.add_subplot(specs[r, c], sharex=top)
                for v in panel.variants:
                    if lp is not None and kinds[v].column != column:
                        continue  # another divergence's row
                    grid_, values = band_matrix(metrics.dropna(subset=[column]), v, column, x)
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
                                                  statistic, x)  # fmt: skip
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
                        _retrain_line(pax, metrics, v, column, statistic, colour, roles, x)
                    steps = (
                        _reference_steps(summary, requests, v, column, reference, x)
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
            bottom.set_xlabel(X_LABELS[x])
            style_x_axis(bottom.xaxis, x, 5)
        for label, handle in roles.entries.items():
            legend.add(label, handle)
        for note in notes:
            legend.add(note, line_handle(linestyle="none"))
        head = f"{fac.line_title}: " if fac.line_title else ""
        default = f"Held-out metrics and {joined_names(kinds)} to the target"
        heading = area.suptitle(wrap(title or default, width, 9))
        key = legend.place(area, ncols=2 if width <= S.COLUMN_WIDTH_IN else 4,
                           title=f"{head}{description} ({runs_text(counts)})")  # fmt: skip
        fit_height(area, ax is None and fig is None, 1.45 * len(names), heading, key)
        return finish(area, path, names_drawn)


RETRAIN_BESIDE = "dashed: retrain from scratch (centre line)"


RETRAIN_STYLE: dict[str, Any] = {"linestyle": S.RETRAIN["linestyle"], "linewidth": 1.0}


def _retrain_center(
    metrics: pd.DataFrame, variant: str, name: str, statistic: str, x: str = "iteration"
) -> tuple[np.ndarray, np.ndarray] | None:
    """The slots and centre line over runs of the retrain baseline's column ``name`` (from the
    first request on), None where the variant has no value of it."""
    if name not in metrics.columns:
        return None
    grid_, values = band_matrix(metrics.dropna(subset=[name]), variant, name, x)
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
    x: str = "iteration",
) -> None:
    """The retrain baseline's ``retrain_`` copy of ``column`` (from the first request on): its
    centre line, dashed in the variant's colour (its band would hide the protocol's)."""
    found = _retrain_center(metrics, variant, f"retrain_{column}", statistic, x)
    if found is None:
        return
    ax.plot(*found, color=colour, label=RETRAIN_BESIDE, gid="retrain", **RETRAIN_STYLE)
    legend.add(RETRAIN_BESIDE, line_handle(color="0.3", **RETRAIN_STYLE))
