"""The walk: eq. (5) transition matrix and the per-hop sampler agree."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph, Walker, stationary_distribution, transition_matrix


def _empirical(graph: IndexedGraph, kind: str, steps: int, seed: int) -> np.ndarray:
    walker = Walker(graph, kind, np.random.default_rng(seed))
    counts = np.zeros((graph.size, graph.size))
    k = 0
    for _ in range(steps):
        j = walker.next(k)
        counts[k, j] += 1
        k = j
    return counts


@pytest.mark.parametrize("kind", ["metropolis-hastings", "simple-random-walk", "uniform"])
def test_walker_matches_transition_matrix(kind):
    graph = IndexedGraph.from_networkx(nx.lollipop_graph(4, 3))
    p = transition_matrix(graph, kind).toarray()
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    counts = _empirical(graph, kind, 200_000, seed=3)
    visits = counts.sum(axis=1, keepdims=True)
    freq = counts / visits
    se = np.sqrt(p * (1 - p) / visits)
    assert np.all(np.abs(freq - p) <= 5 * se + 1e-12)


def test_metropolis_hastings_eq5_entries():
    graph = IndexedGraph.from_networkx(nx.star_graph(3))  # centre 0 (degree 3), leaves degree 1
    p = transition_matrix(graph, "metropolis-hastings").toarray()
    # centre proposes a leaf w.p. 1/3 and always accepts (min(1, 3/1)); a leaf accepts w.p. min(1, 1/3)
    np.testing.assert_allclose(p[0], [0, 1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(p[1], [1 / 3, 2 / 3, 0, 0])


def test_stationary_distributions():
    g = nx.lollipop_graph(4, 3)
    for kind in ("metropolis-hastings", "simple-random-walk"):
        pi = stationary_distribution(g, kind)
        p = transition_matrix(g, kind).toarray()
        np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
    np.testing.assert_allclose(stationary_distribution(g, "metropolis-hastings"), 1 / 7)


def test_walk_stream_does_not_depend_on_length():
    graph = IndexedGraph.from_networkx(nx.cycle_graph(12))
    a = Walker(graph, "metropolis-hastings", np.random.default_rng(5))
    b = Walker(graph, "metropolis-hastings", np.random.default_rng(5))
    ka = kb = 0
    path_a = []
    for _ in range(20_000):
        ka = a.next(ka)
        path_a.append(ka)
    path_b = []
    for _ in range(100):
        kb = b.next(kb)
        path_b.append(kb)
    assert path_a[:100] == path_b


def test_unknown_scheduler_and_node():
    graph = IndexedGraph.from_networkx(nx.path_graph(3))
    with pytest.raises(ConfigError, match="scheduler.kind"):
        Walker(graph, "teleport", np.random.default_rng(0))
    with pytest.raises(ConfigError, match="unlearning"):
        graph.index(9, "unlearning[0].node")


def test_csr_view_of_the_graph():
    graph = IndexedGraph.from_networkx(nx.lollipop_graph(4, 3))
    csr = graph.csr
    assert csr is graph.csr  # computed once
    np.testing.assert_array_equal(csr.indptr, graph.indptr)
    np.testing.assert_array_equal(csr.indices, graph.indices)
    np.testing.assert_array_equal(csr.degree, graph.degree)
    assert csr.size == graph.size == 7
