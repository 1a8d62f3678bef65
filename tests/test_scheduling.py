"""The walk: eq. (5) transition matrix and the per-hop sampler agree."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph, Walker, stationary_distribution, transition_matrix
from tests.helpers import base_scenario


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


@pytest.mark.parametrize("kind", ["metropolis-hastings", "simple-random-walk", "uniform"])
def test_a_runs_walk_does_not_depend_on_its_length_or_engine(kind):
    """The vectorised engine draws each run's walk in blocks sized from the run length and the batch;
    the event engine's walker refills a fixed block. Runs of 150, 8,192 ± 1 and 20,000 slots (across
    block boundaries), with and without stopping early, start with the same holders on both engines,
    run by run, as the first slots of the longest event-engine run."""
    raw = base_scenario(
        scenario={"name": "w", "seed": 11, "runs": 3, "iterations": 20_000},
        topology={"kind": "barabasi_albert", "nodes": 12, "m": 2},
        scheduler={"kind": kind},
    )
    reference = _holders(gs.run(raw, engine="event"))
    for iterations in (150, 8191, 8192, 8193, 20_000):
        for engine in ("event", "vectorized"):
            for stop in (False, True):
                raw["scenario"].update(iterations=iterations, stop_when_done=stop)
                got = _holders(gs.run(raw, engine=engine))
                for run, path in got.items():
                    assert path.size >= 2
                    np.testing.assert_array_equal(
                        path, reference[run][: path.size], err_msg=f"{engine} {iterations} {stop}"
                    )


def _holders(results) -> dict[int, np.ndarray]:
    metrics = results.metrics
    return {
        int(run): group.sort_values("iteration")["holder"].to_numpy()
        for run, group in metrics.groupby("run")
    }


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
