"""Where the figures draw a graph's nodes: Kamada-Kawai up to :data:`KAMADA_KAWAI_NODES` nodes (in
closed form for the small regular graphs where it is known: :func:`regular_layout`), else a spring
layout with seed :data:`LAYOUT_SEED`, kept on the graph's nodes as ``layout_x`` and ``layout_y``
(which the results folder's GraphML files carry, so a figure redrawn from a folder places every
node where it was)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

LAYOUT_SEED = 1
KAMADA_KAWAI_NODES = 100  # graphs up to this size are laid out by Kamada-Kawai, larger by springs
LAYOUT_KEYS = ("layout_x", "layout_y")


def layout(graph: nx.Graph) -> dict[Any, tuple[float, float]]:
    """Each node's position for the figures: the saved ``layout_x``/``layout_y`` attributes when
    every node has them, else computed (and stored on the graph's nodes, so it is computed once):
    Kamada-Kawai up to :data:`KAMADA_KAWAI_NODES` nodes (in closed form where it is known:
    :func:`regular_layout`), else a spring layout with seed :data:`LAYOUT_SEED`."""
    nodes = graph.nodes
    if graph.number_of_nodes() and all(
        "layout_x" in nodes[n] and "layout_y" in nodes[n] for n in graph
    ):
        return {n: (float(nodes[n]["layout_x"]), float(nodes[n]["layout_y"])) for n in graph}
    pos = regular_layout(graph)
    if pos is None:
        from threadpoolctl import threadpool_limits

        kamada_kawai = graph.number_of_nodes() <= KAMADA_KAWAI_NODES
        if kamada_kawai:  # SciPy's own BLAS is loaded with it: loaded first, the limit holds it too
            import scipy.optimize  # noqa: F401
        # One BLAS thread: Kamada-Kawai's L-BFGS-B calls BLAS on vectors of a few hundred
        # numbers, where OpenBLAS's threads cost far more than they save (a 100-node layout took
        # 1.1 s instead of 0.15 s on a busy 2-core machine); the positions are the same bit for bit.
        # The limit applies to the libraries loaded when it is set (a BLAS loaded inside the block
        # keeps its threads: 4 times slower for three 15-100-node layouts, without SciPy imported
        # before, as gossipsim plot now reads a folder).
        with threadpool_limits(limits=1, user_api="blas"):
            pos = (
                nx.kamada_kawai_layout(graph)
                if kamada_kawai
                else nx.spring_layout(graph, seed=LAYOUT_SEED)
            )
    out = {n: (float(p[0]), float(p[1])) for n, p in pos.items()}
    for n, (x, y) in out.items():
        nodes[n]["layout_x"] = x
        nodes[n]["layout_y"] = y
    return out


def regular_layout(graph: nx.Graph) -> dict[Any, np.ndarray] | None:
    """``nx.kamada_kawai_layout(graph)`` in closed form for the small regular graphs where it is
    known, None for any other graph.

    Kamada-Kawai starts from the circular layout (node ``k`` of ``n`` at angle 2πk/n) and moves
    the nodes to a minimum of its energy. For a cycle whose nodes go round it in order and for a
    complete graph the circle is already that minimum, so it is the layout; for a star whose leaves
    spread evenly round the hub the minimum keeps the circle's mirror symmetry about the hub's
    starting angle: the hub at the centre and leaf ``j`` (counted round the circle from the
    hub) at angle 2πh/n + (j + ½)·2π/(n − 1), h the hub's place in the node order. The sizes are
    those where the minimum L-BFGS-B finds is that one (to 1e-4 of the figure's width;
    ``tests/test_graphfiles.py`` compares them): cycles up to :data:`KAMADA_KAWAI_NODES` nodes,
    complete graphs up to 40, stars of 4 to 12 nodes (larger stars and complete graphs have
    lower-energy layouts off the circle). Their drawing then needs no SciPy optimiser, whose
    import is most of a small graph's layout (about 0.2 s)."""
    n = graph.number_of_nodes()
    if (
        n < 2
        or graph.is_directed()
        or graph.is_multigraph()
        or any(u == v or "weight" in data for u, v, data in graph.edges(data=True))
    ):
        return None  # Kamada-Kawai reads an edge's weight as its length
    nodes = list(graph)
    edges = graph.number_of_edges()
    complete = edges == n * (n - 1) // 2 and n <= 40
    cycle = (
        3 <= n <= KAMADA_KAWAI_NODES
        and edges == n
        and all(graph.has_edge(nodes[k - 1], nodes[k]) for k in range(n))
    )
    if complete or cycle:
        return dict(nx.circular_layout(graph))
    if not (4 <= n <= 12 and edges == n - 1):
        return None
    hub = max(nodes, key=graph.degree)
    if graph.degree(hub) != n - 1:
        return None
    h = nodes.index(hub)
    leaves = nodes[h + 1 :] + nodes[:h]  # round the circle from the hub
    angles = 2 * np.pi * h / n + (np.arange(n - 1) + 0.5) * 2 * np.pi / (n - 1)
    xy = np.zeros((n, 2))
    xy[[nodes.index(v) for v in leaves]] = np.column_stack([np.cos(angles), np.sin(angles)])
    return dict(zip(nodes, nx.rescale_layout(xy, scale=1), strict=True))
