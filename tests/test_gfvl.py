"""G-FVL and gossip unlearning against exact posteriors and the paper's closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.families import Beta
from gossipsim.protocols import ConjugateGFVL
from tests.helpers import base_scenario


def _harmonic(n: int) -> float:
    return sum(1.0 / i for i in range(1, n + 1))


def test_conjugate_update_is_exact_posterior():
    """After every node has held the token, η = η₀ + Σ_k s_k (eqs. 13-14); later visits change nothing."""
    prior = Beta.natural(2, 2)
    factors = np.array([[3.0, 7.0], [10.0, 0.0], [5.0, 5.0]])
    proto = ConjugateGFVL(prior, factors)
    for slot, k in enumerate([0, 0, 2, 1, 2, 0], start=1):
        proto.on_token(k, slot)
    np.testing.assert_array_equal(proto.eta, prior + factors.sum(axis=0))
    assert proto.done()
    proto.on_request(1, 7)  # eq. (21): removed at node 1's next visit
    assert not proto.done()
    proto.on_token(0, 7)
    np.testing.assert_array_equal(proto.eta, prior + factors.sum(axis=0))
    proto.on_token(1, 8)
    np.testing.assert_array_equal(proto.eta, prior + factors[[0, 2]].sum(axis=0))
    proto.on_token(1, 9)  # a forgotten node never contributes again
    np.testing.assert_array_equal(proto.eta, prior + factors[[0, 2]].sum(axis=0))


def test_forgetting_a_node_never_visited_is_immediate():
    proto = ConjugateGFVL(Beta.natural(1, 1), np.ones((3, 2)))
    proto.on_token(0, 1)
    proto.on_request(2, 2)
    proto.on_token(1, 2)
    assert proto.done()
    np.testing.assert_array_equal(proto.eta, Beta.natural(1, 1) + 2.0)


def test_complete_graph_converges_exactly_at_cover():
    """Complete K = 10: every run converges at its cover iteration with KL ≤ 1e-10 (tolerance 1e-10),
    and the mean cover time matches (K−1)·H(K−1) = 25.46 moves within 4 standard errors."""
    raw = base_scenario(scenario={"name": "t", "seed": 3, "runs": 400, "iterations": 400})
    res = gs.run(raw)
    runs = res.runs
    assert runs["convergence_iteration"].notna().all()
    assert (runs["convergence_iteration"] == runs["cover_iteration"]).all()
    final = res.metrics.groupby("run")["kl"].last()
    assert (final <= 1e-10).all()
    moves = runs["cover_iteration"].to_numpy(dtype=float) - 1
    expected = 9 * _harmonic(9)
    assert expected == pytest.approx(25.4607, abs=1e-4)
    assert abs(moves.mean() - expected) < 4 * moves.std(ddof=1) / math.sqrt(moves.size)
    assert res.theory["t"]["exact_cover_moves"] == pytest.approx(expected)


def test_ring_cover_time_is_45_moves():
    raw = base_scenario(
        scenario={"name": "t", "seed": 4, "runs": 400, "iterations": 600, "stop_when_done": True},
        topology={"kind": "ring", "nodes": 10},
    )
    moves = gs.run(raw).runs["cover_iteration"].to_numpy(dtype=float) - 1
    assert abs(moves.mean() - 45.0) < 4 * moves.std(ddof=1) / math.sqrt(moves.size)


def test_star_cover_time_matches_exact_subset_chain():
    raw = base_scenario(
        scenario={"name": "t", "seed": 5, "runs": 300, "iterations": 5000, "stop_when_done": True},
        topology={"kind": "star", "nodes": 6},
    )
    res = gs.run(raw)
    moves = res.runs["cover_iteration"].to_numpy(dtype=float) - 1
    exact = gs.exact_cover_moves(
        gs.build_topology("star", 6), "metropolis-hastings", method="subset-chain"
    )
    assert abs(moves.mean() - exact) < 4 * moves.std(ddof=1) / math.sqrt(moves.size)


def test_unlearning_restores_exact_posterior_and_latency_is_9_1():
    """Complete K = 10, a request for node 3 at slot 300 (long after convergence, stationary holder):
    q ends at the exact posterior without node 3 (KL ≤ 1e-10) and the mean latency is 1/K + K − 1 = 9.1."""
    raw = base_scenario(
        scenario={"name": "t", "seed": 6, "runs": 600, "iterations": 2000, "stop_when_done": True},
        unlearning=[{"node": 3, "at_iteration": 300}],
    )
    res = gs.run(raw)
    req = res.requests
    assert req["latency"].notna().all() and req["retrain_latency"].notna().all()
    lat = req["latency"].to_numpy(dtype=float)
    assert abs(lat.mean() - 9.1) < 4 * lat.std(ddof=1) / math.sqrt(lat.size)
    assert res.theory["t"]["next_visit_latency"]["3"] == pytest.approx(9.1)
    final = res.metrics.groupby("run")[["kl", "retrain_kl"]].last()
    assert (final["kl"] <= 1e-10).all() and (final["retrain_kl"] <= 1e-10).all()
    # retraining from scratch must visit the 9 other nodes again: never faster than unlearning here
    assert (req["retrain_latency"] >= 9).all()
    assert lat.mean() < req["retrain_latency"].astype(float).mean()


def test_request_before_the_node_is_visited():
    """A request at slot 1 for a node not yet visited: the target is the posterior without it, reached
    once all other nodes are visited; the node's data never enters q."""
    raw = base_scenario(
        scenario={"name": "t", "seed": 8, "runs": 50, "iterations": 600},
        unlearning=[{"node": 0, "at_iteration": 1}],
        scheduler={"kind": "metropolis-hastings", "start": 5},
    )
    res = gs.run(raw)
    assert res.requests["latency"].notna().all()
    assert (res.metrics.groupby("run")["kl"].last() <= 1e-10).all()
    # same walk, same target: with nothing to remove, unlearning and retraining coincide
    assert (res.requests["latency"] == res.requests["retrain_latency"]).all()


def test_several_requests_and_temperature():
    raw = base_scenario(
        scenario={"name": "t", "seed": 9, "runs": 30, "iterations": 1500},
        model={"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}, "temperature": 2.5},
        unlearning=[
            {"node": 1, "at_iteration": 100},
            {"node": 2, "at_time": 0.0},
            {"node": 7, "at_iteration": 400},
        ],
    )
    res = gs.run(raw)
    assert res.requests.groupby("run").size().eq(3).all()
    assert res.requests["latency"].notna().all()
    assert (res.metrics.groupby("run")["kl"].last() <= 1e-10).all()


def test_other_conjugate_models_converge_exactly():
    models = [
        (
            {"kind": "gamma-poisson", "prior": {"shape": 2, "rate": 1}},
            {"points_per_node": 30, "mean": 4.0},
        ),
        (
            {"kind": "normal-normal", "prior": {"mean": 0, "variance": 10}, "sigma": 2.0},
            {"points_per_node": 30, "mean": 1.5},
        ),
        (
            {"kind": "dirichlet-categorical", "prior": {"alpha": [1, 2, 3]}},
            {"points_per_node": 30, "probs": [0.2, 0.3, 0.5]},
        ),
    ]
    for model, data in models:
        raw = base_scenario(
            scenario={"name": "t", "seed": 1, "runs": 10, "iterations": 300}, model=model, data=data
        )
        res = gs.run(raw)
        assert (res.runs["convergence_iteration"] == res.runs["cover_iteration"]).all(), model[
            "kind"
        ]


def test_engine_latency_on_a_real_graph_matches_exact_hitting_times():
    """Florentine families (15 nodes, MH walk): the engine's mean unlearning latency for a request at
    slot 1500 (runs converged, stationary holder) matches 1 + Σ_v π(v)·H(v, k) within 4 standard errors."""
    raw = base_scenario(
        scenario={
            "name": "t",
            "seed": 21,
            "runs": 400,
            "iterations": 20000,
            "stop_when_done": True,
        },
        topology={"kind": "florentine"},
        unlearning=[{"node": "Pazzi", "at_iteration": 1500}],
    )
    res = gs.run(raw)
    assert res.runs["cover_iteration"].max() < 1500  # every run had converged when the request came
    lat = res.requests["latency"].to_numpy(dtype=float)
    exact = res.theory["t"]["next_visit_latency"]["Pazzi"]
    graph = gs.build_topology("florentine")
    assert exact == pytest.approx(gs.next_visit_latency(graph, "Pazzi"))
    assert abs(lat.mean() - exact) < 4 * lat.std(ddof=1) / math.sqrt(lat.size)
    # 15 nodes: the exact expected cover time comes from the subset chain; the engine agrees
    moves = res.runs["cover_iteration"].to_numpy(dtype=float) - 1
    exact_cover = res.theory["t"]["exact_cover_moves"]
    assert res.theory["t"]["exact_cover_method"] == "subset-chain"
    assert abs(moves.mean() - exact_cover) < 4 * moves.std(ddof=1) / math.sqrt(moves.size)


def test_summary_gives_matthews_bounds_beyond_the_exact_limit():
    raw = base_scenario(
        scenario={"name": "t", "seed": 2, "runs": 2, "iterations": 10}, topology={"kind": "karate"}
    )
    theory = gs.run(raw).theory["t"]
    lo, hi = theory["matthews_cover_moves"]
    assert 0 < lo < hi
    assert "exact_cover_moves" not in theory
