"""Failures and churn (issue 33, item 2): the walk over the live graph and its stationary
distribution, exact recovery of conjugate G-FVL after lost tokens (and the naive restore that is
not exact), requests from nodes that are down, a run with every node down, tables unchanged when
nothing fails, workers, and the errors of bad input."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
from gossipsim.engine.token import run_token
from gossipsim.network.failures import Failures, Liveness, Outage
from gossipsim.network.links import LinkModel
from gossipsim.protocols.gfvl import ConjugateGFVL
from gossipsim.scheduling import IndexedGraph, Walker
from tests.helpers import base_scenario, validate_error

KARATE = IndexedGraph.from_networkx(nx.karate_club_graph())


def _static_view(graph: IndexedGraph, down: list[int], links_down: list[tuple[int, int]] = ()):
    """A liveness with ``down`` nodes and ``links_down`` links down for good (no processes)."""
    live = Liveness(graph, Failures(token_timeout_s=1.0), np.random.default_rng(0))
    for k in down:
        live._node_down(k, 0.0)
    for k, j in links_down:
        live._link(live.edge_entry(k, j), False, 0.0)
    return live


def _batch_means_se(series: np.ndarray, batches: int = 50) -> float:
    """Standard error of the mean of a Markov chain's series by batch means."""
    means = series[: series.size - series.size % batches].reshape(batches, -1).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(batches))


@pytest.mark.parametrize("kind", ["metropolis-hastings", "simple-random-walk"])
def test_the_walk_moves_over_the_live_graph_with_the_law_of_its_edge_weights(kind):
    live = _static_view(KARATE, down=[2, 3], links_down=[(0, 1), (32, 33)])
    walker = Walker(KARATE, kind, np.random.default_rng(5), live.view)
    weights = walker.scheduler.edge_weights(KARATE, live.view)
    rows = np.repeat(np.arange(KARATE.size), KARATE.degree)
    k, steps = 0, 60_000
    counts = np.zeros(KARATE.indices.size)
    holders = np.empty(steps, dtype=np.int64)
    for i in range(steps):
        j = walker.next(k)
        holders[i] = j
        if j != k:
            lo, hi = KARATE.indptr[k], KARATE.indptr[k + 1]
            counts[lo + int(np.searchsorted(KARATE.indices[lo:hi], j))] += 1
        k = j
    assert not np.isin(holders, [2, 3]).any()  # down nodes are never proposed
    for e in (KARATE.indptr[0], KARATE.indptr[32] + list(KARATE.neighbours[32]).index(33)):
        assert counts[e] == 0 if weights[e] == 0 else True
    visits = np.bincount(holders, minlength=KARATE.size)
    # each row's moves: the empirical frequency of every edge against its weight, within 4 SE
    for node in (0, 5, 33):
        n = visits[node]
        mask = rows == node
        freq = counts[mask] / n
        se = np.sqrt(weights[mask] * (1 - weights[mask]) / n)
        assert (np.abs(freq - weights[mask]) <= 4 * se + 1e-12).all(), (node, freq, weights[mask])
    # the stationary distribution: uniform over the live nodes (MH), ∝ live degree (SRW)
    live_nodes = [v for v in range(KARATE.size) if v not in (2, 3)]
    if kind == "metropolis-hastings":
        expected = np.full(len(live_nodes), 1 / len(live_nodes))
        matrix = walker.scheduler.transition_matrix(KARATE, live.view).toarray()
        sub = matrix[np.ix_(live_nodes, live_nodes)]
        np.testing.assert_allclose(sub.sum(axis=0), 1.0, atol=1e-12)  # doubly stochastic
        np.testing.assert_allclose(sub.sum(axis=1), 1.0, atol=1e-12)
    else:
        degree = np.asarray(live.live_degree, dtype=float)[live_nodes]
        expected = degree / degree.sum()
    for node, p in zip(live_nodes, expected, strict=True):
        series = (holders == node).astype(float)
        assert abs(series.mean() - p) <= 4 * _batch_means_se(series), (node, series.mean(), p)


class _NaiveRestore(ConjugateGFVL):
    """The naive recovery: the token goes back to the custodian's copy, the holder keeps its
    belief that its factor is in (it is not told)."""

    def on_holder_lost(self, holder: int, slot: int) -> None:
        node, was_in = self._kept
        if self.contributed[holder] != was_in:
            self._add(slot, holder, 1 if was_in else -1)
            self.rolled_back += 1  # the holder's own flag stays: it believes its factor is in


def _churn_run(protocol: ConjugateGFVL, seed: int):
    """Karate under heavy scripted churn during the first 300 s (680 outages of random nodes,
    exponential lengths of mean 5 s), then none: 6,000 slots of about 0.45 s."""
    rng = np.random.default_rng(seed)
    starts = rng.uniform(0.0, 300.0, 680)
    outages = tuple(
        Outage(int(n), float(a), float(a + d))
        for n, a, d in zip(rng.integers(0, KARATE.size, 680), starts, rng.exponential(5.0, 680),
                           strict=True)
    )  # fmt: skip
    failures = Failures(token_timeout_s=0.5, outages=outages)
    live = Liveness(KARATE, failures, np.random.default_rng(rng.integers(2**32)))
    walker = Walker(KARATE, "metropolis-hastings", np.random.default_rng(rng.integers(2**32)),
                    live.view)  # fmt: skip
    return run_token(
        walker=walker, protocol=protocol, start=0, iterations=6000, compute_seconds=0.4,
        links=LinkModel(rate_bps=1e4, latency_s=0.05), liveness=live,
    )  # fmt: skip


def _failing(runs: int = 2, iterations: int = 600, **failures) -> dict:
    raw = base_scenario(
        topology={"kind": "karate"},
        compute={"seconds_per_iteration": 0.1},
        links={"rate_bps": 1e4, "latency_s": 0.01},
        failures=failures,
    )
    raw["scenario"].update(runs=runs, iterations=iterations)
    return raw


def test_a_failure_after_the_run_leaves_every_table_as_without_failures():
    quiet = _failing(token_timeout_s=1.0, outage=[{"node": 3, "from_s": 1e6, "to_s": 2e6}])
    res = gs.run(quiet, plots=False)
    plain = quiet.copy()
    del plain["failures"]
    ref = gs.run(plain, plots=False, engine="event")
    assert "nodes or links fail" in res.engines["t"]
    for a, b in ((res.metrics, ref.metrics), (res.requests, ref.requests)):
        assert a.equals(b[a.columns]) if len(a) else len(b) == 0
    common = [c for c in ref.runs.columns]
    assert res.runs[common].equals(ref.runs)
    assert (
        (res.runs[["regenerations", "lost_messages", "token_wait_s", "all_down_s"]] == 0)
        .all()
        .all()
    )


def test_every_node_down_at_once_makes_the_token_wait_and_the_tables_say_so():
    outages = [{"node": n, "from_s": 5.0, "to_s": 12.5} for n in range(34)]
    res = gs.run(_failing(runs=2, token_timeout_s=0.5, outage=outages), plots=False)
    runs = res.runs
    np.testing.assert_allclose(runs["all_down_s"], 7.5)
    assert (runs["regenerations"] >= 1).all() and (runs["token_wait_s"] > 0).all()
    m = res.metrics
    assert not ((m["time"] > 5.0 + 1e-9) & (m["time"] < 12.5)).any()  # no slot ends meanwhile
    assert (m.groupby("run")["iteration"].max() == 600).all()


@pytest.mark.parametrize("mode", ["wait", "delegate"])
def test_a_request_from_a_node_that_is_down_waits_for_it_or_is_delegated(mode):
    raw = _failing(
        runs=4, iterations=2500, token_timeout_s=0.5, requests_from_down=mode,
        outage=[{"node": 5, "from_s": 90.0, "to_s": 130.0}],
    )  # fmt: skip
    raw["unlearning"] = [{"node": 5, "at_time": 100.0}]
    res = gs.run(raw, plots=False)
    m, req = res.metrics, res.requests
    for _, row in req.iterrows():
        slots = m[m["run"] == row["run"]].set_index("iteration")["time"]
        arrived_before = slots.loc[row["request_iteration"]] - 0.1  # the start of its slot
        removed_at = row["request_time"] + row["removal_latency_time"]
        if mode == "wait":
            assert arrived_before >= 130.0 - 1e-9  # delivered once node 5 is up again
            assert not row["served"] or removed_at > 130.0
        else:
            assert arrived_before < 100.0 + 1.0  # at once (slots last ~0.1 s)
            assert removed_at < 130.0  # by a neighbour holding the token while node 5 is down
        assert row["request_time"] == 100.0  # latency in seconds counts from the request
    assert (req["removal_latency"].dropna() > 0).all() and req["served"].sum() >= 2


def test_failures_give_the_same_tables_with_one_or_two_workers(tmp_path):
    raw = _failing(runs=4, token_timeout_s=0.5, node_up_s=20.0, node_down_s=5.0,
                   link_up_s=30.0, link_down_s=3.0)  # fmt: skip
    one = gs.run(raw, plots=False, workers=1)
    two = gs.run(raw, plots=False, workers=2)
    assert one.runs.equals(two.runs) and one.metrics.equals(two.metrics)
    assert (one.runs["regenerations"] > 0).all()


@pytest.mark.parametrize(
    ("failures", "expected"),
    [
        ({"token_timeout_s": 1.0, "node_up_s": 0.0, "node_down_s": 1.0}, "failures.node_up_s"),
        ({"token_timeout_s": 1.0, "node_up_s": 5.0, "node_down_s": -1.0}, "failures.node_down_s"),
        ({"token_timeout_s": 1.0, "node_up_s": 5.0}, "failures.node_down_s: is required"),
        ({"token_timeout_s": 1.0, "link_down_s": 5.0}, "failures.link_up_s: is required"),
        ({"node_up_s": 5.0, "node_down_s": 1.0}, "failures.token_timeout_s: is required"),
        ({"token_timeout_s": 0.0, "node_up_s": 5.0, "node_down_s": 1.0}, "failures.token_timeout_s"),
        ({"token_timeout_s": 1.0, "outage": [{"node": 99, "from_s": 1.0, "to_s": 2.0}]},
         "failures.outage[0].node"),
        ({"token_timeout_s": 1.0, "outage": [{"node": 1, "from_s": 3.0, "to_s": 2.0}]},
         "failures.outage[0].to_s: must be after from_s"),
        ({"token_timeout_s": 1.0, "outage": [{"node": 1, "from_s": 3.0}]},
         "failures.outage[0].to_s"),
        ({"token_timeout_s": 1.0, "requests_from_down": "drop"}, "failures.requests_from_down"),
        ({"token_timeout_s": 1.0, "down_clients": "skip"}, "failures.down_clients: is for the"),
    ],
)  # fmt: skip
def test_bad_failure_settings_are_one_line_and_exit_2(tmp_path, capsys, failures, expected):
    err = validate_error(_failing(**failures), tmp_path, capsys)
    assert expected in err, err


def test_what_cannot_run_under_failures_is_refused_in_one_line(tmp_path, capsys):
    raw = _failing(token_timeout_s=1.0, node_up_s=5.0, node_down_s=1.0)
    raw["scheduler"] = {"kind": "uniform"}
    err = validate_error(raw, tmp_path, capsys)
    assert "scheduler.kind" in err and "metropolis-hastings" in err, err
    raw = _failing(token_timeout_s=1.0, link_up_s=5.0, link_down_s=1.0)
    raw["protocol"] = {"kind": "gfvl", "architecture": "server"}
    assert "failures.link_up_s" in validate_error(raw, tmp_path, capsys)
    raw = _failing(token_timeout_s=1.0, node_up_s=5.0, node_down_s=1.0)
    raw["protocol"] = {"kind": "svgd"}
    raw["model"] = {"kind": "logistic-regression"}
    raw["data"] = {"dataset": "breast_cancer"}
    assert "learns at a centre" in validate_error(raw, tmp_path, capsys)
    raw = _failing(token_timeout_s=1.0, node_up_s=5.0, node_down_s=1.0)
    raw["protocol"] = {"kind": "fedavg", "retrain_baseline": True}
    raw["model"] = {"kind": "logistic-regression"}
    raw["data"] = {"dataset": "breast_cancer"}
    assert "does not recover a token" in validate_error(raw, tmp_path, capsys)


@pytest.mark.parametrize("variant", ["sound", "paper"])
def test_dsvgd_recovers_a_lost_token_without_counting_a_score_twice(variant):
    """DSVGD under churn with a request: after every recovery the token is the custodian's copy,
    and (sound variant) the aggregate S equals the sum of the scores g_k the nodes keep."""
    from gossipsim.execution.runner import build_world, make_protocol
    from gossipsim.study.sections import parse_scenario

    means = [[[-0.8, 0.6]], [[0.7, 0.9]], [[0.6, -0.7]], [[-0.5, -0.8]], [[-1.6, -1.1]]] * 2
    raw = base_scenario(
        topology={"kind": "complete", "nodes": 10},
        model={"kind": "gaussian-mixture", "prior": {"mean": 0.0, "variance": 4.0}},
        data={"means": means, "variance": 4.0, "points_per_node": 20},
        protocol={
            "kind": "dsvgd",
            "particles": 10,
            "variant": variant,
            **({"local_iterations": 2, "fit_iterations": 2} if variant == "paper" else {}),
        },
        compute={"seconds_per_iteration": 0.4},
        failures={"token_timeout_s": 0.5, "node_up_s": 15.0, "node_down_s": 5.0},
        unlearning=[{"node": 4, "at_iteration": 150}],
        metrics={},
    )
    raw["scenario"].update(iterations=400, runs=1)
    world = build_world(parse_scenario(raw))
    protocol = make_protocol(world, world.model.fixed_data, np.random.SeedSequence(1))
    inner = protocol.main  # the retrain baseline wraps it
    lost = []

    class Checked(type(inner)):  # type: ignore[misc]
        def on_holder_lost(self, holder: int, slot: int) -> None:
            copy = self._kept
            super().on_holder_lost(holder, slot)
            assert self.particles is copy[2] and self.state is copy[1]
            lost.append(slot)

    inner.__class__ = Checked
    f = world.failures
    live = Liveness(world.indexed, f, np.random.default_rng(3))
    walker = Walker(world.indexed, "metropolis-hastings", np.random.default_rng(4), live.view)
    run_token(walker=walker, protocol=protocol, start=0, iterations=400, compute_seconds=0.4,
              requests=world.requests, liveness=live)  # fmt: skip
    assert len(lost) > 3
    if variant == "sound":
        total = sum(inner.own.values())
        np.testing.assert_allclose(inner.state.aggregate, total, rtol=1e-9, atol=1e-9)
    assert 4 in inner.removals() or 4 in inner.pending  # the request stands


def test_the_churn_figure_draws_the_runs_medians_against_the_down_fraction(tmp_path):
    from gossipsim.figures.churn import down_fraction, panel_points

    raw = _failing(runs=6, iterations=800, token_timeout_s=0.5, node_down_s=5.0, node_up_s=20.0)
    raw["unlearning"] = [{"node": 0, "at_time": 30.0}]
    raw["sweep"] = {"failures.node_up_s": [math.inf, 20.0]}
    res = gs.run(raw, plots=False)
    assert res.plot(tmp_path, which="churn")["churn"].is_file()
    summary = res.figure_summary()
    variants = list(summary["variants"])
    points = panel_points(res.runs, res.requests, summary, variants)
    assert down_fraction({"node_up_s": 20.0, "node_down_s": 5.0}) == 0.2
    assert down_fraction({"node_up_s": math.inf, "node_down_s": 5.0}) == 0.0
    for v, x in zip(variants, (0.0, 0.2), strict=True):
        mine = points[points["variant"] == v].set_index(["what", "request"])
        assert (mine["x"] == x).all()
        runs = res.runs[res.runs["variant"].astype(str) == v]
        regen = 1000 * runs["regenerations"] / runs["iterations"]
        assert mine.loc[("regenerations_per_1000", -1), "median"] == regen.median()
        req = res.requests[res.requests["variant"].astype(str) == v]
        served = req["removal_latency_time"].dropna()
        assert mine.loc[("removal_latency_time", 0), "median"] == served.median()
        assert mine.loc[("removal_latency_time", 0), "missing"] == len(req) - len(served)
    assert (
        points.loc[points["x"] == 0.0, "median"][points["what"] == "regenerations_per_1000"].iloc[0]
        == 0.0
    )
    # a second swept key (the timeout too) makes series of their own, the down fraction the x
    raw["sweep"]["failures.token_timeout_s"] = [0.5, 2.0]
    res = gs.run(raw, plots=False)
    points = panel_points(res.runs, res.requests, res.figure_summary(), list(res.variants))
    assert sorted(set(points["series"])) == [
        "failures.token_timeout_s = 0.5",
        "failures.token_timeout_s = 2.0",
    ]
    assert sorted(set(points["x"])) == [0.0, 0.2]


@pytest.mark.parametrize("mode", ["skip", "wait"])
def test_the_server_skips_or_waits_for_agents_that_are_down_and_learns_exactly(mode):
    """Conjugate G-FVL with the server, round robin over 10 agents that fail: a round with an
    agent down at its start is skipped (an iteration without an update, token_timeout_s long) or
    waits for it; a round whose agent fails before it ends is taken back. The run still ends at
    the exact posterior (KL 0) once every agent has had a round since its last failure."""
    raw = base_scenario(
        protocol={"kind": "gfvl", "architecture": "server"},
        scheduler={"kind": "round-robin"},
        compute={"seconds_per_iteration": 0.1},
        links={"rate_bps": 1e4, "latency_s": 0.01},
        failures={"node_up_s": 20.0, "node_down_s": 5.0, "token_timeout_s": 0.5,
                  "down_clients": mode, "outage": [{"node": 3, "from_s": 0.0, "to_s": 30.0}]},
    )  # fmt: skip
    raw["scenario"].update(runs=3, iterations=600)
    res = gs.run(raw, plots=False)
    m = res.metrics.sort_values(["run", "iteration"])
    runs = res.runs.set_index("run")
    for run, g in m.groupby("run"):
        dt = np.diff(np.concatenate([[0.0], g["time"].to_numpy()]))
        holders = g["holder"].to_numpy()
        round_time = 0.1 + 2 * (128 / 1e4 + 0.01)
        if mode == "skip":
            # node 3's rounds in its outage: skipped, token_timeout_s each, nothing learnt
            early3 = (holders == 3) & (g["time"].to_numpy() < 30.0)
            np.testing.assert_allclose(dt[early3], 0.5)
            assert runs.loc[run, "lost_messages"] > 0
        else:
            assert dt.max() >= 25.0  # the first round with node 3 waited for its outage to end
            assert runs.loc[run, "token_wait_s"] >= 25.0
        assert (np.isclose(dt, round_time) | (dt > round_time)).all()  # no slot is shorter
        assert g["kl"].iloc[-1] == 0.0  # the exact posterior


def test_tokens_regenerated_match_their_exact_expectation():
    """Node up times are exponential (memoryless), so a slot's holder goes down during its
    computation with probability 1 − exp(−c/U), or before its hop arrives 1 − exp(−(c + h)/U), and
    the receiver (up when proposed) during the hop 1 − exp(−h/U): the expected regenerations of a
    run from its hops (its bits / 128) and slots, against the runs' mean within 4 SE."""
    up, c, h = 20.0, 0.1, 128 / 1e4 + 0.01
    raw = _failing(runs=24, iterations=2000, token_timeout_s=0.5, node_up_s=up, node_down_s=5.0)
    runs = gs.run(raw, plots=False).runs
    hops, slots = runs["bits"] / 128.0, runs["iterations"]

    def p(window: float) -> float:
        return 1.0 - math.exp(-window / up)

    expected = hops * (p(c + h) + (1 - p(c + h)) * p(h)) + (slots - hops) * p(c)
    diff = runs["regenerations"] - expected
    se = diff.std(ddof=1) / math.sqrt(len(diff))
    assert runs["regenerations"].sum() > 200  # enough of them to test
    assert abs(diff.mean()) < 4 * se, (runs["regenerations"].mean(), expected.mean(), se)
