"""The ``time_map`` figure: where a walk spends its simulated time. The graph of each variant that
walks, each edge coloured and thickened by its share of the runs' simulated time spent on its
link (hops in either direction), each node coloured by its share spent computing there (the
slots it held the token), on one logarithmic scale.

The time of a run splits exactly into its slots' computations and the gaps between them
(docs/architecture.md, Time): slot i ends at t_i, the next slot starts at s_{i+1} and ends at
t_{i+1} = s_{i+1} + c(k(i+1)), c(k) the compute time of a slot at holder k. The gap s_{i+1} − t_i =
t_{i+1} − t_i − c(k(i+1)) is the hop's time when the token moves (every attempt over the link
of edge k(i)–k(i+1), timeouts of lost attempts included), and zero when it stays. The results keep
no per-hop record; :func:`time_on_graph` reads the gaps from the metrics table's ``time`` and
``holder`` of every slot (``[metrics] record_every = 1``) and c(k) from summary.json (``[compute]
seconds_per_iteration``, one or one per node, or ``node_attribute`` from the saved graph, plus
``seconds_per_local_iteration`` × the slot's local iterations: :func:`slot_compute_seconds`). A
gap between two slots of one holder (a message lost for good: the sender kept the token) is
counted apart (:attr:`TimeOnGraph.stay_seconds`). Summed over a run, the parts add up to its last
slot's end time.

Drawn by default where the edges' links differ or lose messages (edge attributes, drawn rates,
``[links] loss``), on request (``gossipsim plot DIR --figure time_map``) for any walk whose slots
take time; :func:`time_map_refusal` says why a folder has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import networkx as nx
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure, SubFigure
from matplotlib.patheffects import withStroke

from gossipsim.figures import style as S
from gossipsim.figures.axes import Legend, line_handle, wrap
from gossipsim.figures.canvas import Where, drawing_area, finish, fit_height
from gossipsim.figures.graph_layout import layout

#: graphs larger than this are not drawn (as the visit map)
MAX_NODES_DRAWN = 500
#: edge attributes that give an edge a link of its own (gossipsim.network.arq)
LINK_ATTRIBUTES = ("rate_bps", "latency_s", "loss", "timeout_s", "max_retries")
#: panels of one figure at most
MAX_PANELS = 6


@dataclass(frozen=True)
class TimeOnGraph:
    """Where one variant's runs spent their simulated time, summed over the runs: ``node_seconds``
    computing at each node (graph order), ``edge_seconds`` on each edge's link and ``edge_hops``
    hops over it (both directions; ``edges`` in the graph's edge order), ``stay_seconds`` between
    two slots of one holder beyond its computation (a message lost for good), ``total_seconds`` the
    runs' end times summed (the last slot's end of each)."""

    nodes: list[Any]
    node_seconds: np.ndarray
    edges: list[tuple[Any, Any]]
    edge_seconds: np.ndarray
    edge_hops: np.ndarray
    stay_seconds: float
    total_seconds: float
    runs: int

    @property
    def link_seconds(self) -> float:
        """Seconds on every link together."""
        return float(self.edge_seconds.sum())

    @property
    def compute_seconds(self) -> float:
        """Seconds of computation at every node together."""
        return float(self.node_seconds.sum())


def slot_compute_seconds(entry: Mapping[str, Any], graph: nx.Graph) -> np.ndarray:
    """The compute time of a slot at each node of ``graph`` (graph order) by a variant's resolved
    scenario (summary.json ``variants.<label>.resolved``): ``[compute] seconds_per_iteration``
    (one number, or one per node in graph order) or each node's ``node_attribute``, plus
    ``seconds_per_local_iteration`` × the local iterations of a slot, as the world computes it
    (:func:`gossipsim.world.world.node_compute_seconds`)."""
    resolved = entry.get("resolved", {}) or {}
    attribute = resolved.get("compute_attribute")
    if attribute is not None:
        own = np.array([float(graph.nodes[n][attribute]) for n in graph.nodes], dtype=float)
    else:
        given = resolved.get("compute_seconds", 0.0)
        own = (
            np.array(given, dtype=float)
            if isinstance(given, list | tuple)
            else np.full(graph.number_of_nodes(), float(given))
        )
    local = float(resolved.get("seconds_per_local_iteration", 0.0) or 0.0) * int(
        resolved.get("local_iterations_per_slot", 1) or 1
    )
    return own + local if local else own


def time_on_graph(
    metrics: pd.DataFrame, graph: nx.Graph, variant: str, compute: np.ndarray
) -> TimeOnGraph:
    """Where ``variant``'s runs spent their time on ``graph`` (module docstring), from its rows of
    ``metrics`` (every slot of every run: ``run``, ``iteration``, ``time``, ``holder``) and the
    compute time of a slot at each node (``compute``, graph order: :func:`slot_compute_seconds`).
    Raises ValueError when a run's slots are not all recorded, or a hop crosses no edge of
    ``graph``."""
    part = metrics.loc[
        (metrics["variant"] == variant).to_numpy(dtype=bool, na_value=False),
        ["run", "iteration", "time", "holder"],
    ].sort_values(["run", "iteration"], kind="stable")
    runs = part["run"].to_numpy()
    slots = part["iteration"].to_numpy(dtype=np.int64)
    times = part["time"].to_numpy(dtype=float)
    index = {str(n): i for i, n in enumerate(graph.nodes)}
    mapped = part["holder"].astype(str).map(index)
    if mapped.isna().any():
        stray = part["holder"][mapped.isna()].iloc[0]
        raise ValueError(f"holder {stray!r} is no node of the graph")
    holders = mapped.to_numpy(dtype=np.int64)
    first = np.ones(runs.size, dtype=bool)
    first[1:] = runs[1:] != runs[:-1]
    expected = np.where(first, 1, np.r_[0, slots[:-1]] + 1)
    if not np.array_equal(slots, expected):
        raise ValueError("not every slot of every run is recorded (metrics.record_every = 1)")
    cost = compute[holders]
    node_seconds = np.bincount(holders, weights=cost, minlength=len(index))
    follows = ~first[1:]  # slot i + 1 of the same run as slot i
    before, after = holders[:-1][follows], holders[1:][follows]
    gaps = (times[1:] - times[:-1] - cost[1:])[follows]
    moved = before != after
    edges = list(graph.edges())
    edge_index = {}
    for e, (u, v) in enumerate(edges):
        a, b = index[str(u)], index[str(v)]
        edge_index[(a, b)] = edge_index[(b, a)] = e
    size = len(index)
    key_of = np.full(size * size, -1, dtype=np.int64)
    for (a, b), e in edge_index.items():
        key_of[a * size + b] = e
    crossed = key_of[before[moved] * size + after[moved]]
    if (crossed < 0).any():
        raise ValueError("a hop crosses no edge of the graph")
    edge_seconds = np.bincount(crossed, weights=gaps[moved], minlength=len(edges))
    edge_hops = np.bincount(crossed, minlength=len(edges))
    stays = gaps[~moved]
    scale = np.maximum(1.0, np.abs(times[1:][follows][~moved]))
    stay_seconds = float(stays[np.abs(stays) > 1e-9 * scale].sum())  # rounding is no wait
    last = np.ones(runs.size, dtype=bool)
    last[:-1] = runs[1:] != runs[:-1]
    return TimeOnGraph(
        nodes=list(graph.nodes), node_seconds=node_seconds, edges=edges,
        edge_seconds=edge_seconds, edge_hops=edge_hops, stay_seconds=stay_seconds,
        total_seconds=float(times[last].sum()), runs=int(first.sum()),
    )  # fmt: skip


def variant_refusal(
    entry: Mapping[str, Any], graph: nx.Graph | None, times: pd.Series | None = None
) -> str | None:
    """Why a variant (its summary.json entry, its saved graph, its rows' ``time``) has no time
    map (None: it has one)."""
    resolved = entry.get("resolved", {}) or {}
    protocol = resolved.get("protocol", {}) or {}
    if protocol.get("architecture", "walk") != "walk" or protocol.get("kind") == "svgd":
        return "no token walks (a server's or a centralised protocol's slots)"
    if graph is None:
        return "its graph is not in the folder's graphs/"
    if graph.number_of_nodes() > MAX_NODES_DRAWN:
        return f"its graph has more than {MAX_NODES_DRAWN} nodes"
    if (resolved.get("topology", {}) or {}).get("draw") == "per-run":
        return "each run draws its own graph (topology.draw = per-run)"
    every = (resolved.get("metrics", {}) or {}).get("record_every", 1)
    if every != 1:
        return f"metrics.record_every = {every}: the gaps between slots need every slot recorded"
    if times is not None and not (times.max() > 0):
        return "no slot takes any simulated time"
    return None


def per_edge_links(entry: Mapping[str, Any], graph: nx.Graph) -> bool:
    """Whether the variant's links differ by edge or lose messages (edge attributes of a link,
    values drawn per edge, ``[links] loss``): where the time map is drawn by default."""
    links = (entry.get("resolved", {}) or {}).get("links", {}) or {}
    if float(links.get("loss", 0.0) or 0.0) > 0:
        return True
    for name in ("rate_bps", "latency_s"):  # drawn per edge: summary.json describes the law
        value = links.get(name)
        if isinstance(value, str) and value.startswith("{"):  # "{ lognormal = [...] }", not "inf"
            return True
    return any(name in data for *_, data in graph.edges(data=True) for name in LINK_ATTRIBUTES)


def time_map_refusal(
    metrics: pd.DataFrame, summary: Mapping[str, Any], graphs: Mapping[str, nx.Graph] | None
) -> str | None:
    """Why no variant of a folder has a time map (None: some variant has one): the first
    variant's reason."""
    entries = summary.get("variants", {}) or {}
    reasons = []
    longest: pd.Series | None = None
    for variant, entry in entries.items():
        why = variant_refusal(entry, (graphs or {}).get(variant))
        if why is None:
            if longest is None:  # each variant's latest time, read once
                longest = metrics.groupby(metrics["variant"].astype(str), sort=False)["time"].max()
            if float(longest.get(variant, 0.0)) > 0:
                return None
            why = "no slot takes any simulated time"
        reasons.append(f"{variant}: {why}" if len(entries) > 1 else why)
    return reasons[0] if reasons else "the folder has no variant"


def plot_time_map(
    metrics: pd.DataFrame,
    graphs: Mapping[str, nx.Graph],
    summary: Mapping[str, Any],
    path: Where = None,
    *,
    ax: Axes | None = None,
    fig: Figure | SubFigure | None = None,
) -> Path | Figure | None:
    """The graph of each variant that has a time map (up to :data:`MAX_PANELS`), edges coloured
    and widened by their share of the variant's simulated time (all runs together), nodes
    coloured by the share spent computing there, on one logarithmic colour scale; None when no
    variant has one (:func:`time_map_refusal`)."""
    entries = summary.get("variants", {}) or {}
    shown: list[tuple[str, nx.Graph, TimeOnGraph]] = []
    for variant, entry in entries.items():
        rows = metrics.loc[(metrics["variant"] == variant).to_numpy(dtype=bool, na_value=False)]
        graph = graphs.get(variant)
        if variant_refusal(entry, graph, rows["time"]) is not None or graph is None:
            continue
        compute = slot_compute_seconds(entry, graph)
        shown.append((variant, graph, time_on_graph(rows, graph, variant, compute)))
        if len(shown) == MAX_PANELS:
            break
    if not shown:
        return None
    shares = [
        (100 * t.edge_seconds / t.total_seconds, 100 * t.node_seconds / t.total_seconds)
        for _, _, t in shown
    ]
    positive = np.concatenate([np.r_[e, n] for e, n in shares])
    positive = positive[positive > 0]
    top = float(positive.max()) if positive.size else 1.0
    norm = LogNorm(vmin=max(float(positive.min()) if positive.size else 1e-3, top / 1e4), vmax=top)
    cmap = mpl.colormaps["viridis"]
    cols = min(len(shown), 3 if len(shown) > 4 else 2) if len(shown) > 1 else 1
    rows = -(-len(shown) // cols)
    width = S.COLUMN_WIDTH_IN if cols == 1 else S.DOUBLE_WIDTH_IN
    panels_in = 2.8 * rows * (1.0 if cols > 1 else 1.1)
    legend = Legend()
    with mpl.rc_context(S.RC):
        area = drawing_area(width, 1.1 + panels_in, ax=ax, fig=fig)
        specs = area.add_gridspec(rows, cols)
        panel_width = area.bbox.width / area.dpi / cols
        axes = []
        own_links = unused = False
        for k, ((variant, graph, spent), (edge_share, node_share)) in enumerate(
            zip(shown, shares, strict=True)
        ):
            gax = area.add_subplot(specs[divmod(k, cols)])
            axes.append(gax)
            pos = layout(graph)
            segments = [(pos[u], pos[v]) for u, v in spent.edges]
            order = np.argsort(edge_share)  # the busiest links drawn last, on top
            used = edge_share[order] > 0
            colours = [
                cmap(norm(s)) if s > 0 else (0.75, 0.75, 0.75, 1.0) for s in edge_share[order]
            ]
            widths = np.where(used, 0.6 + 5.0 * np.sqrt(edge_share[order] / top), 0.4)
            gax.add_collection(LineCollection([segments[i] for i in order], colors=colours,
                                              linewidths=widths, zorder=1, capstyle="round"))  # fmt: skip
            own = [segments[i] for i, (u, v) in enumerate(spent.edges)
                   if any(name in graph.edges[u, v] for name in LINK_ATTRIBUTES)]  # fmt: skip
            if own:  # an edge whose link the graph sets: a dashed line along it
                gax.add_collection(LineCollection(own, colors="black", linewidths=0.6,
                                                  linestyles=(0, (2, 2)), zorder=1.5))  # fmt: skip
                own_links = True
            unused = unused or bool((edge_share == 0).any())
            xy = np.array([pos[n] for n in spent.nodes], dtype=float).reshape(-1, 2)
            gax.scatter(
                xy[:, 0], xy[:, 1], s=42, c=np.where(node_share > 0, node_share, np.nan),
                cmap=cmap, norm=norm, edgecolors="0.2", linewidths=0.5, zorder=2,
                plotnonfinite=True,
            )  # fmt: skip
            busiest = int(np.argmax(spent.edge_seconds)) if spent.edges else None
            link = 100 * spent.link_seconds / spent.total_seconds
            computing = 100 * spent.compute_seconds / spent.total_seconds
            words = f"links {link:.3g}%, compute {computing:.3g}%"
            if busiest is not None and spent.edge_seconds[busiest] > 0:
                u, v = spent.edges[busiest]
                words += f"; busiest link {u}–{v}: {edge_share[busiest]:.3g}%"
                for end in (u, v):  # its ends named on the graph
                    gax.annotate(f"{end}", pos[end], textcoords="offset points", xytext=(5, 5),
                                 fontsize=7, fontweight="bold",
                                 path_effects=[withStroke(linewidth=2, foreground="white")])  # fmt: skip
            if spent.stay_seconds > 0:
                words += f"; {100 * spent.stay_seconds / spent.total_seconds:.3g}% in lost messages"
            gax.set_title(wrap(f"{variant}\n{words}", panel_width - 0.2, 7), fontsize=7)
            gax.margins(0.06)
            gax.set_axis_off()
            gax.xaxis.set_visible(False)
            gax.yaxis.set_visible(False)
        mappable = mpl.cm.ScalarMappable(norm=norm, cmap=cmap)
        bar = area.colorbar(mappable, ax=axes, shrink=0.8, pad=0.02)
        bar.set_label("share of the runs' simulated time (%)")
        legend.add("edge: time on its link (width and colour)",
                   line_handle(color=cmap(0.7), linewidth=3.0))  # fmt: skip
        legend.add("node: time computing there",
                   line_handle(linestyle="none", marker="o", ms=6, mfc=cmap(0.4), mec="0.2"))  # fmt: skip
        if own_links:
            legend.add("edge with a link of its own (graph attributes)",
                       line_handle(color="black", linewidth=0.6, linestyle=(0, (2, 2))))  # fmt: skip
        if unused:
            legend.add("edge no token crossed", line_handle(color="0.75", linewidth=0.6))
        runs = sorted({t.runs for _, _, t in shown})
        heading = area.suptitle(
            f"Where the walk spends its simulated time ({'/'.join(map(str, runs))} runs"
            f"{'' if len(shown) == 1 else ' each'}, every slot)"
        )
        key = legend.place(area, ncols=3)
        fit_height(area, ax is None and fig is None, panels_in, heading, key)
        return finish(area, path)
