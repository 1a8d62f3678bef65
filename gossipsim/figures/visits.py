"""The ``visits`` figure: the graph of each variant that walks, each node coloured by the deviation of
its share of the token's visits from the walk's stationary share (:func:`visit_deviation`), sized
by degree, the requested nodes ringed; graphs over :data:`MAX_NODES_DRAWN` nodes are not drawn,
nor a walk whose stationary share moves with the protocol's state (``ksd-walk``, ``hip-walk``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import networkx as nx
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure, SubFigure
from matplotlib.patheffects import withStroke

from gossipsim.figures import style as S
from gossipsim.figures.axes import (
    Legend,
    line_handle,
    wrap,
)
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.graph_layout import layout
from gossipsim.figures.layout import (
    Facets,
    facets,
)

if TYPE_CHECKING:
    pass


MAX_NODES_DRAWN = 500


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


def has_fixed_stationary(kind: str) -> bool:
    """Whether the ``kind`` walk has one stationary share π to compare the visits with: not a
    schedule whose transitions depend on the protocol's state (``Scheduler.reads_state``: the
    selection weights of ``ksd-walk`` and ``hip-walk`` move as the run goes on)."""
    from gossipsim.scheduling import scheduler_for

    return not scheduler_for(kind).reads_state


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
    variant without rows in ``visits`` (a centralised protocol: no walk) is left out, and so is
    one whose walk has no fixed stationary share (:func:`has_fixed_stationary`)."""
    visited = set(visits["variant"].astype(str)) if "variant" in visits else set()
    drawable = [
        (v, g)
        for v, g in graphs.items()
        if g.number_of_nodes() <= MAX_NODES_DRAWN
        and str(v) in visited
        and has_fixed_stationary(_scheduler_kind(summary, v))
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
    width = S.COLUMN_WIDTH_IN if cols == 1 else S.DOUBLE_WIDTH_IN
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
        fit_height(area, ax is None and fig is None, panels_in, heading, key)
        return finish(area, path)
