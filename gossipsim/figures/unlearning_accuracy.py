"""The ``unlearning_accuracy`` figure (particle protocols with requests): the accuracy on the
held-out examples whose labels only the forgotten nodes hold, and on the remaining ones, against
the slot, the protocol (blue, solid) against retraining from scratch (vermillion, dashed), request
slots marked. :data:`ACCURACY_SPLIT` names its columns, which the ``evaluation`` figure leaves to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure

from gossipsim.figures import style as S
from gossipsim.figures.axes import (
    Legend,
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
from gossipsim.figures.layout import (
    Cells,
    facets,
    figure_width,
    label_cells,
    variant_cells,
)
from gossipsim.figures.stats import (
    across_runs,
    band_matrix,
)

if TYPE_CHECKING:
    pass


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
    x: str = "iteration",
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
    without a request that arrived. ``x = "bits"`` or ``"time"``: against cumulative bits or
    simulated seconds (:mod:`gossipsim.figures.costaxis`: the rule; None when no slot costs
    any)."""
    present = [c for c, _ in ACCURACY_SPLIT if c in metrics.columns]
    if not present or requests is None or requests.empty:
        return None
    if "request_iteration" not in requests or requests["request_iteration"].isna().all():
        return None
    read = on_axis(metrics, requests, variants, x)
    if read is None:
        return None
    metrics, on_grid, notes = read
    requests = requests if on_grid is None else on_grid
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
                    grid_, values = band_matrix(metrics.dropna(subset=[name]), variant, name, x)
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
            marks = request_marks(arrived, [variant], request_column(x))
            names.append(draw_request_marks(axes, axes[0], marks))
            add_request_entries(legend, marks)
            placed[r, c] = axes[0]
            if cells.row_labels is None and len(drawn) > 1:
                axes[0].set_title(wrap(variant, panel_width - 0.3, 8))
            bottom = axes[-1]
            if not any(cells.where[v] == (r + 1, c) for v in drawn):
                bottom.set_xlabel(X_LABELS[x])
            style_x_axis(bottom.xaxis, x, 5)
        label_cells(placed, cells, panel_width, cell_in - 0.5)
        what = (
            "Accuracy on the forgotten and the remaining labels"
            if forgotten
            else f"Held-out accuracy ({NO_FORGOTTEN})"
        )
        heading = area.suptitle(wrap(f"{what}: unlearning vs retraining from scratch",
                                     area.bbox.width / area.dpi - 0.2, 9))  # fmt: skip
        for note in notes:
            legend.add(note, line_handle(linestyle="none"))
        key = legend.place(area, ncols=2 if width <= S.COLUMN_WIDTH_IN else 4,
                           title=f"{description} ({runs_text(runs)})")  # fmt: skip
        fit_height(area, ax is None and fig is None, cell_in * cells.rows, heading, key)
        return finish(area, path, names)
