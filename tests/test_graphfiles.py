"""The figures' graph layouts: Kamada-Kawai in closed form for small regular graphs
(:func:`gossipsim.figures.graph_layout.regular_layout`), against NetworkX's own Kamada-Kawai layout."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from gossipsim.figures import graph_layout
from gossipsim.figures.graph_layout import regular_layout

#: how far a closed-form position may lie from Kamada-Kawai's (its layout spans [-1, 1]: 1e-4 is
#: under a twentieth of a pixel of the visit map's widest panel at 200 dpi); L-BFGS-B stops within
#: about 1e-7 to 1e-5 of the minimum it finds
TOLERANCE = 1e-4


def _kamada_kawai(graph: nx.Graph) -> np.ndarray:
    with threadpool_limits(limits=1, user_api="blas"):  # as graphfiles.layout runs it: faster
        pos = nx.kamada_kawai_layout(graph)
    return np.array([pos[n] for n in graph])


def _closed_form(graph: nx.Graph) -> np.ndarray:
    pos = regular_layout(graph)
    assert pos is not None, f"no closed form for {graph}"
    assert list(pos) == list(graph)
    return np.array([pos[n] for n in graph])


def _star(leaves: int, hub_at: int) -> nx.Graph:
    """A star whose hub is the ``hub_at``-th node of the node order, its leaves labelled 1..."""
    order = [*range(1, hub_at + 1), 0, *range(hub_at + 1, leaves + 1)]
    graph = nx.Graph()
    graph.add_nodes_from(order)
    graph.add_edges_from(nx.star_graph(leaves).edges())
    return graph


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 10, 16, 25, 40])
def test_a_complete_graph_is_laid_out_as_kamada_kawai_lays_it_out(n):
    graph = nx.complete_graph(n)
    assert np.abs(_closed_form(graph) - _kamada_kawai(graph)).max() < TOLERANCE


@pytest.mark.parametrize("n", [3, 4, 5, 8, 10, 13, 30, 100])
def test_a_cycle_in_node_order_is_laid_out_as_kamada_kawai_lays_it_out(n):
    graph = nx.cycle_graph(n)
    assert np.abs(_closed_form(graph) - _kamada_kawai(graph)).max() < TOLERANCE


@pytest.mark.parametrize("n", range(4, 13))
def test_a_star_is_laid_out_as_kamada_kawai_lays_it_out_wherever_its_hub_is(n):
    for hub_at in sorted({0, 1, (n - 1) // 2, n - 1}):
        graph = _star(n - 1, hub_at)
        assert list(graph)[hub_at] == 0
        gap = np.abs(_closed_form(graph) - _kamada_kawai(graph)).max()
        assert gap < TOLERANCE, (n, hub_at, gap)


@pytest.mark.slow
def test_every_size_of_the_closed_forms_is_kamada_kawai_s_layout():
    """Every size the closed forms are used for (the fast tests take a sample)."""
    for n in range(2, 41):
        graph = nx.complete_graph(n)
        assert np.abs(_closed_form(graph) - _kamada_kawai(graph)).max() < TOLERANCE, n
    for n in range(3, graph_layout.KAMADA_KAWAI_NODES + 1):
        graph = nx.cycle_graph(n)
        assert np.abs(_closed_form(graph) - _kamada_kawai(graph)).max() < TOLERANCE, n
    for n in range(4, 13):
        for hub_at in range(n):
            graph = _star(n - 1, hub_at)
            assert np.abs(_closed_form(graph) - _kamada_kawai(graph)).max() < TOLERANCE, n


def test_other_graphs_have_no_closed_form():
    """Kamada-Kawai is run for them: a cycle out of node order (the layout untangles it), a star
    too large for the circle to be its minimum, a complete graph likewise, weighted edges (their
    weights are lengths), a graph with a loop, a path, a directed cycle, a single node."""
    shuffled = nx.Graph()
    shuffled.add_nodes_from([0, 2, 1, 3, 4])
    shuffled.add_edges_from(nx.cycle_graph(5).edges())
    weighted = nx.cycle_graph(6)
    nx.set_edge_attributes(weighted, 2.0, "weight")
    looped = nx.complete_graph(5)
    looped.add_edge(0, 0)
    for graph in (
        shuffled,
        nx.star_graph(12),  # 13 nodes
        nx.complete_graph(41),
        weighted,
        looped,
        nx.path_graph(5),
        nx.karate_club_graph(),
        nx.cycle_graph(5, create_using=nx.DiGraph),
        nx.empty_graph(1),
    ):
        assert regular_layout(graph) is None, graph


def test_a_regular_graph_is_laid_out_without_scipy_s_optimiser(monkeypatch):
    """The figures' layout of a ring, a star and a complete graph takes the closed form (no
    Kamada-Kawai run, whose SciPy import is most of a small graph's layout); another graph
    runs Kamada-Kawai."""
    calls = []

    def kamada_kawai(graph, *args, **kwargs):
        calls.append(graph.number_of_nodes())
        return {n: np.zeros(2) for n in graph}

    monkeypatch.setattr(nx, "kamada_kawai_layout", kamada_kawai)
    for graph in (nx.cycle_graph(10), nx.star_graph(9), nx.complete_graph(10)):
        pos = graph_layout.layout(graph)
        assert set(pos) == set(graph) and graph.nodes[0]["layout_x"] == pos[0][0]
    assert calls == []
    graph_layout.layout(nx.path_graph(4))
    assert calls == [4]


def test_scipy_s_blas_is_loaded_before_kamada_kawai_s_thread_limit():
    """The one-BLAS-thread limit holds only the libraries loaded when it is set: in a process that
    has not imported SciPy (``gossipsim plot`` reads a folder without it), SciPy and its own BLAS
    are imported before the limit, not by Kamada-Kawai inside it (its L-BFGS-B was then about 4
    times slower on a busy 2-core machine)."""
    import subprocess
    import sys

    code = (
        "import sys, contextlib, threadpoolctl, networkx as nx\n"
        "from gossipsim.figures import graph_layout\n"
        "assert 'scipy' not in sys.modules\n"
        "seen = []\n"
        "@contextlib.contextmanager\n"
        "def limits(**kwargs):\n"
        "    seen.append('scipy.optimize' in sys.modules)\n"
        "    yield\n"
        "threadpoolctl.threadpool_limits = limits\n"
        "graph_layout.layout(nx.path_graph(5))\n"
        "print(seen)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[True]"
