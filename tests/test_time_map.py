"""The ``time_map`` figure's numbers (:mod:`gossipsim.figures.time_map`): where a walk spends its
simulated time, read from the gaps between recorded slots, against independent computations: each
edge's hops times its link's hop time (the graph file's attributes), the visits table times the
compute time, the runs' end times, the retransmissions of lossy links, and the expectation from
the walk's transition matrix."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.figures.time_map import (
    per_edge_links,
    slot_compute_seconds,
    time_map_refusal,
    time_on_graph,
)
from gossipsim.world.world import build_world
from tests.helpers import base_scenario, to_toml

ROOT = Path(__file__).resolve().parent.parent
TWO_SITES = ROOT / "topologies" / "karate_two_sites.graphml"
BITS = 128.0  # a Beta's two natural parameters, 64 bits each
COMPUTE = 1e-3
RATE, LATENCY = 1e6, 1e-3


def _two_sites(runs: int, iterations: int, **sections) -> dict:
    return base_scenario(
        scenario={"name": "t", "seed": 11, "runs": runs, "iterations": iterations},
        topology={"kind": "graphml", "path": str(TWO_SITES)},
        compute={"seconds_per_iteration": COMPUTE},
        links={"rate_bps": RATE, "latency_s": LATENCY},
        **sections,
    )


def _spent(res: gs.Results, variant: str = "t", runs: object = None):
    summary = res.figure_summary()
    graph = res.graphs[variant]
    metrics = res.metrics if runs is None else res.metrics[res.metrics["run"].isin(runs)]
    compute = slot_compute_seconds(summary["variants"][variant], graph)
    return time_on_graph(metrics, graph, variant, compute), graph


@pytest.fixture(scope="module")
def two_sites() -> gs.Results:
    return gs.run(_two_sites(40, 600), plots=False)


def test_each_edge_takes_its_hops_times_its_links_hop(two_sites):
    spent, graph = _spent(two_sites)
    hops = {frozenset(e): 0 for e in graph.edges}
    for _, run in two_sites.metrics.groupby("run"):
        holders = run.sort_values("iteration")["holder"].tolist()
        for a, b in zip(holders, holders[1:], strict=False):
            if a != b:
                hops[frozenset((a, b))] += 1
    for (u, v), seconds, crossed in zip(spent.edges, spent.edge_seconds, spent.edge_hops,
                                        strict=True):  # fmt: skip
        data = graph.edges[u, v]
        hop = BITS / data.get("rate_bps", RATE) + data.get("latency_s", LATENCY)
        assert crossed == hops[frozenset((u, v))]
        assert seconds == pytest.approx(crossed * hop, rel=1e-9, abs=1e-12)
    assert spent.stay_seconds == 0


def test_the_parts_add_up_to_the_runs_times_and_the_visits(two_sites):
    spent, graph = _spent(two_sites)
    total = float(two_sites.runs["time"].sum())
    assert spent.total_seconds == pytest.approx(total, rel=1e-12)
    assert spent.compute_seconds + spent.link_seconds == pytest.approx(total, rel=1e-9)
    visits = two_sites.visits.set_index(two_sites.visits["node"].astype(str))["visits"]
    expected = np.array([visits[str(n)] * COMPUTE for n in graph.nodes])
    np.testing.assert_allclose(spent.node_seconds, expected, rtol=1e-12)


def test_link_time_per_run_matches_the_stationary_walk(two_sites):
    """From a uniform start Metropolis-Hastings is stationary at every slot: a move crosses edge
    {u, v} with probability π_u P(u, v) + π_v P(v, u), so a run of n slots spends, in
    expectation, (n − 1) Σ_e that × the edge's hop on links (and on the slow links alone their
    part of it). Per run measured against it, within 4 standard errors."""
    graph = nx.read_graphml(TWO_SITES, node_type=int)
    p = gs.transition_matrix(graph)
    p = p.toarray() if hasattr(p, "toarray") else np.asarray(p)
    nodes = list(graph.nodes)
    pi = 1.0 / len(nodes)
    every, slow = 0.0, 0.0
    for u, v, data in graph.edges(data=True):
        i, j = nodes.index(u), nodes.index(v)
        hop = BITS / data.get("rate_bps", RATE) + data.get("latency_s", LATENCY)
        flow = pi * (p[i, j] + p[j, i])
        every += flow * hop
        slow += flow * hop if "rate_bps" in data else 0.0
    moves = 600 - 1
    per_run, per_run_slow = [], []
    for run in sorted(two_sites.runs["run"]):
        spent, g = _spent(two_sites, runs=[run])
        own = np.array(["rate_bps" in g.edges[e] for e in spent.edges])
        per_run.append(spent.link_seconds)
        per_run_slow.append(float(spent.edge_seconds[own].sum()))
    for measured, exact in ((per_run, moves * every), (per_run_slow, moves * slow)):
        values = np.asarray(measured)
        se = values.std(ddof=1) / np.sqrt(values.size)
        assert abs(values.mean() - exact) < 4 * se, (values.mean(), exact, se)


def test_lossy_links_hop_times_and_lost_messages():
    """Stop-and-wait ARQ: every hop's time beyond a delivered attempt is its retransmissions'
    timeouts (runs.csv counts them), the mean hop is bits / rate + latency + timeout · loss /
    (1 − loss) within 4 standard errors, and a message lost for good (the sender keeps the token)
    is time between two slots of one holder: (max_retries + 1) timeouts each."""
    loss, timeout = 0.3, 0.5
    raw = base_scenario(
        scenario={"name": "t", "seed": 4, "runs": 20, "iterations": 300},
        topology={"kind": "complete", "nodes": 6},
        links={"rate_bps": 1000.0, "latency_s": 0.01, "loss": loss, "timeout_s": timeout},
    )
    res = gs.run(raw, plots=False)
    spent, _ = _spent(res)
    delivered = BITS / 1000.0 + 0.01
    hops = float(spent.edge_hops.sum())
    retransmissions = float(res.runs["retransmissions"].sum())
    assert spent.link_seconds == pytest.approx(
        hops * delivered + retransmissions * timeout, rel=1e-9
    )
    sd = timeout * np.sqrt(loss) / (1 - loss)  # F geometric: Var F = loss / (1 − loss)²
    expected = delivered + timeout * loss / (1 - loss)
    assert abs(spent.link_seconds / hops - expected) < 4 * sd / np.sqrt(hops)
    raw["links"]["max_retries"] = 0  # a message lost at its first failed attempt
    res = gs.run(raw, runs=3, plots=False)
    spent, _ = _spent(res)
    lost = float(res.runs["lost_messages"].sum())
    assert lost > 0
    assert spent.stay_seconds == pytest.approx(lost * timeout, rel=1e-9)
    total = spent.compute_seconds + spent.link_seconds + spent.stay_seconds
    assert total == pytest.approx(float(res.runs["time"].sum()), rel=1e-9)


@pytest.mark.parametrize(
    "compute",
    [
        {"seconds_per_iteration": [0.5, 0.25, 1.0, 2.0, 0.125, 4.0]},
        {"seconds_per_iteration": 0.5, "seconds_per_local_iteration": 0.25},
        {"node_attribute": "speed", "seconds_per_local_iteration": 0.125},
    ],
)
def test_the_figure_reads_each_nodes_compute_time_as_the_world_does(tmp_path, compute):
    graph = nx.cycle_graph(6)
    for n in graph:
        graph.nodes[n]["speed"] = 0.25 * (n + 1)
    path = tmp_path / "g.graphml"
    nx.write_graphml(graph, path)
    raw = base_scenario(
        scenario={"name": "t", "seed": 2, "runs": 2, "iterations": 30},
        topology={"kind": "graphml", "path": str(path)},
        model={"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
        data={"points_per_node": 3, "theta": 0.5},
        protocol={"local_iterations": 3, "samples": 2},
        compute=compute,
    )
    res = gs.run(raw, plots=False)
    world = build_world(res.study.variants[0].scenario)
    expected = np.broadcast_to(np.asarray(world.compute_seconds, dtype=float), (6,))
    got = slot_compute_seconds(res.figure_summary()["variants"]["t"], res.graphs["t"])
    np.testing.assert_array_equal(got, expected)


def test_drawn_by_default_for_links_of_their_own_and_on_request_otherwise(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(to_toml(_two_sites(3, 200)))
    out = tmp_path / "two"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    assert (out / "plots" / "time_map.png").is_file()
    plain = _two_sites(3, 200)
    plain["topology"] = {"kind": "karate"}
    scenario.write_text(to_toml(plain))
    out = tmp_path / "one"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    assert not (out / "plots" / "time_map.png").exists()  # every link alike: not by default
    capsys.readouterr()
    assert main(["plot", str(out), "--figure", "time_map"]) == 0
    assert (out / "plots" / "time_map.png").is_file()
    plain["metrics"]["record_every"] = 5
    scenario.write_text(to_toml(plain))
    out = tmp_path / "sparse"
    assert main(["run", str(scenario), "--out", str(out), "--no-plots"]) == 0
    capsys.readouterr()
    assert main(["plot", str(out), "--figure", "time_map"]) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        "gossipsim: note: figure time_map not drawn: metrics.record_every = 5: the gaps between "
        "slots need every slot recorded"
    ), err
    res = gs.load_results(out)
    reason = time_map_refusal(res.metrics, res.figure_summary(), res.graphs)
    assert reason is not None and "record_every = 5" in reason


def test_which_links_differ_by_edge():
    """Where the time map is drawn by default: links drawn per edge (summary.json describes the
    law), lossy links or an edge with link attributes; not infinite rates, which summary.json
    writes as the text "inf"."""
    plain, own = nx.path_graph(3), nx.path_graph(3)
    own.edges[0, 1]["latency_s"] = 0.5

    def entry(**links: object) -> dict:
        return {"resolved": {"links": {"rate_bps": "inf", "latency_s": 0.0, "loss": 0.0, **links}}}

    assert not per_edge_links(entry(), plain)
    assert per_edge_links(entry(), own)
    assert per_edge_links(entry(loss=0.1), plain)
    assert per_edge_links(entry(rate_bps="{ lognormal = [9.0, 1.0] }"), plain)
