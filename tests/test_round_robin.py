"""The round-robin scheduler (issue 22, item 6): a deterministic cycle over the nodes, checked
against its closed forms on both engines and in the cover and hitting-time code."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
from gossipsim import cover as ct


@pytest.mark.parametrize("graph", [nx.path_graph(7), nx.star_graph(5), nx.karate_club_graph()])
def test_cover_and_hitting_times_are_the_cycles(graph) -> None:
    """Cover: K − 1 moves from any start. From a uniform holder the next visit to a node takes
    1 + d slots with d = (node − holder) mod K: mean (K + 1)/2. A request before slot r of a walk
    from node 0 (r ≤ K): the node has held a slot iff its index < r − 1, and it then
    holds slot r + ((i − (r − 1)) mod K), a latency of 1 + ((i − (r − 1)) mod K)."""
    k = graph.number_of_nodes()
    exact = ct.exact_cover_moves_with_method(graph, "round-robin")
    assert exact.moves == k - 1 and exact.method == "closed-form"
    if k <= 12:  # the closed form against the subset chain on the kind's transition matrix
        from gossipsim.cover.common import start_weights
        from gossipsim.cover.exact import _subset_chain
        from gossipsim.scheduling import IndexedGraph, scheduler_for

        g = IndexedGraph.from_networkx(graph)
        sched = scheduler_for("round-robin")
        weights = start_weights(g, sched, "uniform")
        p = sched.transition_matrix(g).toarray()
        assert _subset_chain(p, weights) == pytest.approx(k - 1, rel=1e-12)
    moves = ct.monte_carlo_cover_moves(graph, "round-robin", runs=30, rng=1)
    assert np.all(moves == k - 1)
    labels = list(graph.nodes)
    assert ct.next_visit_latency(graph, labels[2], "round-robin") == pytest.approx((k + 1) / 2)
    for r in (1, 3, k):
        for i in (0, 2, k - 1):
            seen = i < r - 1
            expected = (1 + (i - (r - 1)) % k) if seen else 0
            got = ct.expected_removal_latency(graph, labels[i], r, "round-robin", labels[0])
            assert got == pytest.approx(expected), (r, i)
            simulated = ct.monte_carlo_removal_latency(
                graph, labels[i], r, "round-robin", runs=5, rng=2, start=labels[0]
            )
            assert np.all(simulated == expected)


def test_a_round_robin_run_covers_in_k_slots_on_both_engines(tmp_path) -> None:
    scenario = {
        "scenario": {"name": "rr", "seed": 3, "runs": 20, "iterations": 30},
        "topology": {"kind": "star", "nodes": 9},
        "model": {"kind": "beta-bernoulli"},
        "data": {"points_per_node": 5},
        "scheduler": {"kind": "round-robin", "start": "uniform"},
    }
    event = gs.run(scenario, engine="event", progress=False)
    vectorized = gs.run(scenario, engine="vectorized", progress=False)
    assert (event.runs["cover_iteration"] == 9).all()
    assert event.metrics.reset_index(drop=True).equals(vectorized.metrics.reset_index(drop=True))
    for _, run in event.metrics.sort_values(["run", "iteration"]).groupby("run"):
        holders = run["holder"].to_numpy()  # each slot's holder is the one after the last
        assert np.all(holders[1:] == (holders[:-1] + 1) % 9)
