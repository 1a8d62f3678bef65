"""The ``compare.png`` of ``gossipsim compare``: the divergence curves of several results folders in
one figure, a line style per folder, each folder's tolerance drawn in the panel of its curves (a
KL folder and a KSD folder in a panel each, on their own scales).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure

from gossipsim.errors import ConfigError
from gossipsim.figures import style as S
from gossipsim.figures.axes import (
    marks_by_variant,
)
from gossipsim.figures.canvas import Where
from gossipsim.figures.costaxis import (
    X_LABELS,
    on_axis,
    request_column,
)
from gossipsim.figures.divergence_curves import (
    Curve,
    Tolerance,
    best_lines,
    divergence_figure,
    summary_excess,
    summary_tolerance,
)
from gossipsim.figures.layout import (
    Facets,
    Panel,
)
from gossipsim.figures.stats import (
    band_matrix,
)
from gossipsim.states.divergences import Divergence, divergences, joined_names

if TYPE_CHECKING:
    pass


#: line styles of the folders of a comparison, in order
FOLDER_STYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))


def plot_comparison(
    studies: Sequence[tuple[str, pd.DataFrame, pd.DataFrame | None, dict[str, Any]]],
    path: Where = None,
    *,
    statistic: str = "median",
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
    x: str = "iteration",
) -> Path | Figure:
    """KL (or KSD) vs slot of several results folders in one panel (``gossipsim compare``):
    ``studies`` are (name, metrics, requests, summary) of each folder. The same variant has the
    same colour in every folder (folders of one variant each: a colour each) and each folder its
    line style; a band is faint and outlined in its line's style, so that overlapping bands stay
    told apart. Each folder's tolerance is drawn (one line where they agree), and its requests
    marked. Curves of different divergences (a G-FVL folder, KL, beside a particle one, KSD) are
    drawn in a panel each, one above the other, on scales of their own.

    ``x = "bits"`` or ``"time"`` (``gossipsim compare --x``): against cumulative bits or simulated
    seconds, each curve read on its own grid of that cost (:mod:`gossipsim.figures.costaxis`); a
    ConfigError naming ``--x`` when no folder's slots cost any."""
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
        tol = summary_tolerance(summary)
        if summary_excess(summary):
            excess, excess_tolerance = True, tol
        elif tol:
            tolerances.setdefault(tol, []).append(name)
            owners.setdefault(tol, set()).update(labels[-len(variants) :])
    lines = [
        Tolerance(
            value,
            f"tolerance {value:g}" if len(tolerances) == 1 else f"tolerance {value:g} ({', '.join(names)})",
            {**S.TOLERANCE, "linestyle": ":" if len(tolerances) == 1 else FOLDER_STYLES[i % 5]},
            frozenset(owners[value]),
        )
        for i, (value, names) in enumerate(tolerances.items())
    ]  # fmt: skip
    metrics = pd.concat(frames, ignore_index=True)
    requests = pd.concat(request_frames, ignore_index=True) if request_frames else None
    read = on_axis(metrics, requests, labels, x)
    if read is None:
        what = "sends any bits" if x == "bits" else "takes any simulated time"
        raise ConfigError("--x", f"no slot of these folders {what}: nothing to draw against {x}")
    metrics, requests, notes = read
    curves = []
    for label in labels:
        grid_, values = band_matrix(metrics, label, kinds[label].column, x)
        curves.append(Curve(label, grid_, values))
    fac = Facets([Panel("", labels)], "", {v: v for v in labels}, colours)
    return divergence_figure(
        path,
        curves,
        fac,
        statistic=statistic,
        tolerance=excess_tolerance,
        excess=excess,
        best=best_lines(metrics, labels, x=x),
        marks=marks_by_variant(requests, labels, request_column(x)),
        xlabel=X_LABELS[x],
        title=f"{joined_names(kinds)} vs {AGAINST[x]}: " + ", ".join(name for name, *_ in studies),
        ax=ax,
        fig=fig,
        linestyles=linestyles,
        tolerances=lines,
        divergence=kinds,
        notes=notes,
        x=x,
    )


#: the title's words for each x axis
AGAINST = {"iteration": "iteration", "bits": "cumulative bits", "time": "simulated time"}
