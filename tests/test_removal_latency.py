"""The exact expectation of the removal latency a run measures (issue 20, item 4): the walk's law at
the request's slot and the zero rule, checked against closed forms, an independent dynamic
programme over (holder, node seen) built from the graph itself, and the simulator's own runs; the
value from a stationary holder (next_visit_latency) is a different quantity and is named so."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
from gossipsim import cover as ct
from gossipsim.errors import ConfigError

MH, SRW = "metropolis-hastings", "simple-random-walk"


def _complete_closed_form(k: int, r: int) -> float:
    """K-complete graph, uniform first holder, no rejections (MH = the simple walk there): the
    holder of slot r is uniform; u = P(node unvisited in 1..r−1) = (K−1)/K ((K−2)/(K−1))^(r−2);
    E = P(X_r = node, seen)·1 + P(X_r ≠ node, seen)·(1 + (K − 1))."""
    if r == 1:
        return 0.0
    u = (k - 1) / k * ((k - 2) / (k - 1)) ** (r - 2)
    return (1 / k - u / (k - 1)) + k * ((k - 1) / k - u * (k - 2) / (k - 1))


@pytest.mark.parametrize("kind", [MH, SRW])
@pytest.mark.parametrize("r", [1, 2, 3, 7, 40, 5000])
def test_complete_graph_closed_form(kind: str, r: int) -> None:
    value = ct.expected_removal_latency(nx.complete_graph(10), 4, at_slot=r, scheduler=kind)
    assert value == pytest.approx(_complete_closed_form(10, r), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("r", [1, 2, 9, 60])
def test_uniform_scheduler_closed_form(r: int) -> None:
    """Holders i.i.d. uniform: the node was seen before slot r with probability 1 − (1 − 1/K)^(r−1)
    and then needs K slots on average (H = K off the node, 1 on it: K·(1/K) + ... = K)."""
    k = 12
    value = ct.expected_removal_latency(nx.path_graph(k), 5, at_slot=r, scheduler="uniform")
    assert value == pytest.approx(k * (1 - (1 - 1 / k) ** (r - 1)), rel=1e-12, abs=1e-12)


def _walk_matrix(graph: nx.Graph, kind: str) -> np.ndarray:
    """The transition matrix built here from the adjacency (not gossipsim's code): Metropolis-
    Hastings to the uniform distribution, or the simple random walk."""
    nodes = list(graph)
    index = {n: i for i, n in enumerate(nodes)}
    p = np.zeros((len(nodes), len(nodes)))
    for u in nodes:
        du = graph.degree(u)
        for v in graph[u]:
            p[index[u], index[v]] = (min(1.0, du / graph.degree(v)) if kind == MH else 1.0) / du
        p[index[u], index[u]] = 1.0 - p[index[u]].sum()
    return p


def _by_dynamic_programme(
    graph: nx.Graph, node, r: int, kind: str, start: str, horizon: int = 10**9
) -> float:
    """E[min(L, horizon)] = Σ_{ℓ < horizon} P(L > ℓ) over the chain (holder, node seen before the
    request): the node's mass is carried on the walk until slot r, then killed at the node; no
    hitting times."""
    p = _walk_matrix(graph, kind)
    n = p.shape[0]
    k = list(graph).index(node)
    uniform = start == "uniform"
    law = np.full(n, 1.0 / n) if uniform else np.eye(n)[list(graph).index(start)]
    # seen: P(X_i = v, the node held one of the slots 1..i−1); fresh: the same, none of them
    seen, fresh = np.zeros(n), law.copy()
    for _ in range(r - 1):
        was_node = fresh[k]
        fresh_off = fresh.copy()
        fresh_off[k] = 0.0
        carried = seen.copy()
        carried[k] += was_node
        seen, fresh = carried @ p, fresh_off @ p
    total, alive = 0.0, seen.copy()  # P(L > 0) = P(seen)
    for _ in range(min(horizon, 1_000_000)):
        mass = alive.sum()
        total += mass
        if mass < 1e-15:
            break
        alive[k] = 0.0  # the node holds this slot: removed
        alive = alive @ p
    return total


CASES = [
    (nx.karate_club_graph(), 33, MH, "uniform"),
    (nx.karate_club_graph(), 0, SRW, "uniform"),
    (nx.florentine_families_graph(), "Medici", MH, "Strozzi"),
    (nx.lollipop_graph(5, 6), 10, MH, "uniform"),
    (nx.lollipop_graph(5, 6), 0, SRW, 10),
]


@pytest.mark.parametrize(("graph", "node", "kind", "start"), CASES)
@pytest.mark.parametrize("r", [2, 5, 31, 400])
def test_agrees_with_an_independent_dynamic_programme(graph, node, kind, start, r) -> None:
    law = ct.removal_latency_law(graph, node, r, kind, start)
    assert law.mean == pytest.approx(
        _by_dynamic_programme(graph, node, r, kind, start), rel=1e-9, abs=1e-9
    )


@pytest.mark.parametrize(("graph", "node", "kind", "start"), CASES[:3])
@pytest.mark.parametrize(("r", "horizon"), [(2, 1), (31, 7), (400, 60), (5, 10**6)])
def test_restricted_to_a_horizon_agrees_with_the_dynamic_programme(
    graph, node, kind, start, r, horizon
) -> None:
    law = ct.removal_latency_law(graph, node, r, kind, start, horizon=horizon)
    assert law.restricted_mean == pytest.approx(
        _by_dynamic_programme(graph, node, r, kind, start, horizon), rel=1e-9, abs=1e-9
    )
    assert law.restricted_mean <= law.mean + 1e-9 and 0 <= law.served_within <= 1
    if horizon == 10**6:
        assert law.restricted_mean == pytest.approx(law.mean, rel=1e-9)


def test_tends_to_the_next_visit_latency_long_after_the_start() -> None:
    g = nx.karate_club_graph()
    late = ct.removal_latency_law(g, 33, 5000)
    assert late.nothing_to_remove < 1e-15
    assert late.mean == pytest.approx(ct.next_visit_latency(g, 33), rel=1e-10)
    assert late.transitions < 5000  # the laws settled: not every slot was stepped


def test_bad_arguments_are_one_clear_error() -> None:
    g = nx.karate_club_graph()
    for bad in (0, -3, 2.5, True, "10"):
        with pytest.raises(ConfigError, match="at_slot"):
            ct.removal_latency_law(g, 33, bad)
    with pytest.raises(ConfigError, match="node"):
        ct.removal_latency_law(g, 99, 10)


def test_a_slot_too_late_for_the_exact_law_is_refused(monkeypatch) -> None:
    import gossipsim.cover.hitting as hitting

    monkeypatch.setattr(hitting, "MAX_LAW_WORK", 10_000)
    with pytest.raises(ConfigError, match="at_slot"):
        ct.removal_latency_law(nx.cycle_graph(400), 0, 10_000, SRW)


def test_the_old_name_still_works_and_says_what_it_is() -> None:
    g = nx.karate_club_graph()
    with pytest.warns(DeprecationWarning, match="next_visit_latency"):
        old = gs.expected_unlearning_latency(g, 33, MH, start="uniform")
    assert old == ct.next_visit_latency(g, 33, MH, holder="uniform")


# ------------------------------------------------------------------ against the simulator's runs


def _karate(at: dict, runs: int, **sections) -> dict:
    raw = {
        "scenario": {
            "name": "k",
            "seed": 4,
            "runs": runs,
            "iterations": 4000,
            "stop_when_done": True,
        },
        "topology": {"kind": "karate"},
        "model": {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 5, "theta": 0.7},
        "unlearning": [{"node": 33, **at}],
    }
    raw.update(sections)
    return raw


def test_the_simulated_mean_estimates_the_exact_expectation_not_the_stationary_value() -> None:
    """A request at slot 30 of karate (the node unseen in about half the runs): the mean removal
    latency over 2,000 runs is within 4 standard errors of the exact expectation at slot 30, which
    summary.json and the printed summary carry, and the value from a stationary holder is not."""
    res = gs.run(_karate({"at_iteration": 30}, 2000))
    latency = res.requests["removal_latency"].astype(float)
    assert latency.notna().all()  # every run served it: the mean is not censored
    mean, se = latency.mean(), latency.std(ddof=1) / math.sqrt(len(latency))
    exact = gs.expected_removal_latency(gs.build_topology("karate"), 33, at_slot=30)
    assert abs(mean - exact) < 4 * se, (mean, exact, se)
    entry = res.request_entries("k")[0]
    assert entry["expected_removal_latency"]["value"] == pytest.approx(exact, rel=1e-12)
    assert "the request's slot" in entry["expected_removal_latency"]["label"]
    stationary = entry["next_visit_latency"]
    assert stationary == pytest.approx(gs.next_visit_latency(gs.build_topology("karate"), 33))
    assert abs(mean - stationary) > 8 * se  # a different quantity
    zero = (latency == 0).mean()
    p0 = res.theory["k"]["removal_latency"][0]["nothing_to_remove"]
    assert abs(zero - p0) < 4 * math.sqrt(p0 * (1 - p0) / len(latency))
    table = res.request_summary()
    row = table[table["latency"] == "removal_latency"].iloc[0]
    assert row["expected"] == pytest.approx(exact) and row["observed"] == 2000


def test_a_timed_request_is_exact_only_when_its_slot_cannot_depend_on_the_walk() -> None:
    """compute 0.01 s per slot and free links: a request at 0.295 s arrives before slot 31 in every
    run and gets the exact value at slot 31; with a link latency the slot depends on the moves, and
    the summary says that no exact value was computed (and why) instead of printing another one."""
    timed = _karate({"at_time": 0.295}, 20, compute={"seconds_per_iteration": 0.01})
    res = gs.run(timed)
    assert set(res.requests["request_iteration"]) == {31}
    entry = res.theory["k"]["removal_latency"][0]
    assert entry["at_slot"] == 31
    assert entry["expected"] == pytest.approx(
        gs.expected_removal_latency(gs.build_topology("karate"), 33, at_slot=31)
    )
    slow = gs.run({**timed, "links": {"latency_s": 0.001}})
    entry = slow.theory["k"]["removal_latency"][0]
    assert entry["expected"] is None and "depends on the walk" in entry["method"]
    summary = slow.request_entries("k")[0]
    assert summary["expected_removal_latency"]["value"] is None


@pytest.mark.parametrize(
    ("graph", "node", "kind", "start", "r", "seed"),
    [
        (nx.karate_club_graph(), 33, MH, "uniform", 30, 1),
        (nx.karate_club_graph(), 0, SRW, "stationary", 7, 2),
        (nx.complete_graph(10), 3, "uniform", "uniform", 5, 3),
        (nx.lollipop_graph(5, 6), 10, MH, 2, 40, 4),
    ],
)
def test_monte_carlo_at_a_slot_agrees_with_the_exact_expectation(graph, node, kind, start, r, seed):
    """The jump-chain Monte Carlo (another method: holding times and jumps, not laws) within 4
    standard errors of the exact value, its zeros as often as nothing_to_remove says."""
    x = ct.monte_carlo_removal_latency(graph, node, r, kind, runs=20_000, rng=seed, start=start)
    law = ct.removal_latency_law(graph, node, r, kind, start)
    assert np.isfinite(x).all() and (x >= 0).all() and (x == np.floor(x)).all()
    assert abs(x.mean() - law.mean) < 4 * x.std(ddof=1) / math.sqrt(x.size)
    p0 = law.nothing_to_remove
    assert abs((x == 0).mean() - p0) < 4 * math.sqrt(p0 * (1 - p0) / x.size) + 1e-12
    tau = 12
    cut = ct.removal_latency_law(graph, node, r, kind, start, horizon=tau)
    held = np.minimum(x, tau)
    assert abs(held.mean() - cut.restricted_mean) < 4 * held.std(ddof=1) / math.sqrt(x.size)
    p = cut.served_within
    assert abs((x <= tau - 1).mean() - p) < 4 * math.sqrt(p * (1 - p) / x.size) + 1e-12


def test_hitting_command_at_a_slot(capsys):
    from gossipsim.cli.parser import main

    args = ["hitting", "--topology", "karate", "--node", "33", "--runs", "4000", "--exact"]
    assert main([*args, "--at-slot", "30", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    exact = ct.expected_removal_latency(nx.karate_club_graph(), 33, 30)
    assert out["at_slot"] == 30 and out["exact_latency"] == pytest.approx(exact)
    lo, hi = out["ci95_latency"]
    assert lo < out["mean_latency"] < hi
    assert main([*args, "--json"]) == 0  # no slot: from a stationary holder
    out = json.loads(capsys.readouterr().out)
    assert out["exact_latency"] == pytest.approx(ct.next_visit_latency(nx.karate_club_graph(), 33))
    assert main([*args, "--at-slot", "5", "--start", "99"]) == 2
    assert "--start" in capsys.readouterr().err


def test_a_request_near_the_end_is_compared_within_the_run() -> None:
    """Node 33 asked to be forgotten at slot 390 of 400-slot runs: most runs end before its next
    visit. The Kaplan–Meier restricted mean (censored runs counted at τ = 12) estimates the exact
    E[min(L, 12)] that summary.json carries beside the unrestricted expectation (within 4 SE),
    and the share served within the run is P(L ≤ 11)."""
    raw = _karate({"at_iteration": 390}, 2000)
    raw["scenario"] = {**raw["scenario"], "iterations": 400}
    res = gs.run(raw)
    rows = res.requests
    assert (~rows["served"]).sum() > 500  # heavily censored
    entry = res.theory["k"]["removal_latency"][0]
    assert entry["restricted_to"] == 400 - 390 + 2
    held = rows["removal_latency"].astype(float).fillna(12.0).to_numpy()
    assert abs(held.mean() - entry["restricted_expected"]) < 4 * held.std(ddof=1) / math.sqrt(2000)
    p = entry["served_within_run"]
    assert abs(rows["served"].mean() - p) < 4 * math.sqrt(p * (1 - p) / 2000)
    summary = res.request_entries("k")[0]
    assert summary["removal_latency"]["restricted_mean"] == pytest.approx(held.mean())
    assert entry["expected"] > 2 * entry["restricted_expected"]  # the two must not be confused
