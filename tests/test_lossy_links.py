"""Lossy links with stop-and-wait ARQ and per-edge links (issue 33, item 1): the expected hop time
and attempts against their closed forms, exact per-hop times, tables unchanged by loss = 0, messages
lost for good, workers, and the errors of bad input."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.errors import ConfigError
from gossipsim.network.arq import Link, LossyLinks
from gossipsim.network.messages import Message
from tests.helpers import base_scenario, slot_hops, validate_error

PAYLOAD = 128.0  # beta-Bernoulli: 2 natural parameters × 64 bits


def _lossy(iterations: int, runs: int, **links: float) -> dict:
    raw = base_scenario(links=links)
    raw["scenario"].update(runs=runs, iterations=iterations)
    return raw


def test_the_mean_hop_time_and_attempts_are_the_arq_formulas():
    rate, latency, loss, timeout = 1000.0, 0.01, 0.3, 0.5
    raw = _lossy(2000, 2, rate_bps=rate, latency_s=latency, loss=loss, timeout_s=timeout)
    res = gs.run(raw, plots=False)
    assert "lossy links (links.loss > 0) run on the event engine" in res.engines["t"]
    hops = slot_hops(res)
    assert (hops["sender"] != hops["receiver"]).all()  # complete graph, a retry limit of 100
    attempts = hops["dbits"] / PAYLOAD
    np.testing.assert_array_equal(attempts, np.round(attempts))  # bits = payload × attempts
    assert attempts.min() == 1 and attempts.max() > 3
    # every hop exactly: its failed attempts' timeouts, then a delivered attempt
    np.testing.assert_allclose(
        hops["dt"], (attempts - 1) * timeout + PAYLOAD / rate + latency, rtol=1e-9
    )
    n = len(hops)
    exact_time = PAYLOAD / rate + latency + timeout * loss / (1 - loss)
    se_time = hops["dt"].std(ddof=1) / math.sqrt(n)
    assert abs(hops["dt"].mean() - exact_time) < 4 * se_time, (
        hops["dt"].mean(),
        exact_time,
        se_time,
    )
    se_attempts = attempts.std(ddof=1) / math.sqrt(n)
    assert abs(attempts.mean() - 1 / (1 - loss)) < 4 * se_attempts
    runs = res.runs.set_index("run")
    for run, group in hops.groupby("run"):
        assert runs.loc[run, "retransmissions"] == int((group["dbits"] / PAYLOAD - 1).sum())
        assert runs.loc[run, "lost_messages"] == 0


def test_per_edge_links_from_graph_attributes_give_each_edge_its_delay():
    graph = nx.cycle_graph(6)  # every node of degree 2: Metropolis–Hastings always moves
    for u, v in graph.edges:
        graph.edges[u, v]["rate_bps"] = 1000.0 * (1 + min(u, v) + max(u, v))
        graph.edges[u, v]["latency_s"] = 0.001 * (u + v)
    graph.edges[0, 5]["latency_s"] = np.float64(0.25)  # NumPy numbers are numbers
    raw = base_scenario(topology={"graph": graph}, links={"latency_s": 9.0})
    raw["scenario"].update(runs=2, iterations=300)
    res = gs.run(raw, plots=False)
    assert "per-edge links" in res.engines["t"]
    hops = slot_hops(res)
    assert (hops["sender"] != hops["receiver"]).all()
    edge = graph.edges
    expected = [
        PAYLOAD / edge[u, v]["rate_bps"] + edge[u, v]["latency_s"]
        for u, v in zip(hops["sender"], hops["receiver"], strict=True)
    ]
    np.testing.assert_allclose(hops["dt"], expected, rtol=1e-9)
    assert len(set(np.round(expected, 12))) == 6  # six edges, six delays
    assert "retransmissions" not in res.runs.columns  # nothing is lost on these links


def test_an_edge_without_attributes_keeps_the_scenario_links():
    graph = nx.path_graph(3)
    graph.edges[0, 1]["rate_bps"] = 256.0
    raw = base_scenario(topology={"graph": graph}, links={"rate_bps": 1024.0, "latency_s": 0.5})
    raw["scenario"].update(runs=1, iterations=100)
    hops = slot_hops(gs.run(raw, plots=False))
    moved = hops[hops["sender"] != hops["receiver"]]
    fast = moved["sender"].isin([2]) | moved["receiver"].isin([2])
    np.testing.assert_allclose(moved.loc[fast, "dt"], PAYLOAD / 1024 + 0.5)
    np.testing.assert_allclose(moved.loc[~fast, "dt"], PAYLOAD / 256 + 0.5)


def test_loss_zero_gives_the_tables_of_the_scenario_without_the_keys():
    plain = base_scenario(links={"rate_bps": 1000.0, "latency_s": 0.01})
    plain["unlearning"] = [{"node": 3, "at_iteration": 50}]
    keyed = base_scenario(
        links={"rate_bps": 1000.0, "latency_s": 0.01, "loss": 0.0, "timeout_s": 2.0,
               "max_retries": 3},
    )  # fmt: skip
    keyed["unlearning"] = plain["unlearning"]
    a, b = gs.run(plain, plots=False), gs.run(keyed, plots=False)
    assert a.engines == b.engines and a.engines["t"].startswith("vectorized")
    for name in ("metrics", "runs", "requests"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


def test_a_message_lost_for_good_leaves_the_token_with_the_sender():
    timeout = 0.2
    raw = _lossy(400, 2, rate_bps=1000.0, loss=0.9, timeout_s=timeout, max_retries=1)
    res = gs.run(raw, plots=False)
    hops = slot_hops(res)
    stayed = hops["sender"] == hops["receiver"]
    assert stayed.sum() > 100  # P(lost for good) = 0.81 per message
    np.testing.assert_allclose(hops.loc[stayed, "dt"], 2 * timeout)  # both attempts timed out
    np.testing.assert_array_equal(hops.loc[stayed, "dbits"], 2 * PAYLOAD)  # both counted
    runs = res.runs
    assert runs["iterations"].tolist() == [400, 400]  # the run goes on
    assert runs["lost_messages"].sum() == stayed.sum()
    assert runs["retransmissions"].sum() == int((hops["dbits"] / PAYLOAD - 1).sum())


def test_lossy_runs_are_the_same_on_one_and_two_workers():
    raw = _lossy(150, 6, rate_bps=1000.0, latency_s=0.01, loss=0.4, timeout_s=0.3)
    raw["unlearning"] = [{"node": 2, "at_time": 5.0}]
    one, two = gs.run(raw, plots=False), gs.run(raw, plots=False, workers=2)
    for name in ("metrics", "runs", "requests"):
        pd.testing.assert_frame_equal(getattr(one, name), getattr(two, name))


def test_the_arq_draw_is_one_geometric_per_message():
    link = Link(rate_bps=100.0, latency_s=0.5, loss=0.5, timeout_s=3.0, max_retries=2)
    rng = np.random.default_rng(1)
    failed = np.random.default_rng(1).geometric(0.5, size=50) - 1
    for f in failed:
        d = link.send(10.0, rng)
        if f > 2:
            assert d.lost and d.attempts == 3 and d.delay == 9.0 and d.bits == 30.0
        else:
            assert not d.lost and d.attempts == f + 1 and d.bits == 10.0 * (f + 1)
            assert d.delay == f * 3.0 + 0.1 + 0.5
    free = LossyLinks(Link(rate_bps=100.0))  # no loss: no draw, the plain delay
    assert free.transmit(0, 1, Message(10.0), rng).delay == 0.1


@pytest.mark.parametrize(
    ("links", "key", "words"),
    [
        ({"loss": 1.0, "timeout_s": 1.0}, "links.loss", "< 1"),
        ({"loss": -0.1, "timeout_s": 1.0}, "links.loss", ">= 0"),
        ({"loss": 0.1}, "links.timeout_s", "is required"),
        ({"loss": 0.1, "timeout_s": 0}, "links.timeout_s", "> 0"),
        ({"max_retries": -1}, "links.max_retries", ">= 0"),
        ({"max_retries": 1.5}, "links.max_retries", "integer"),
        ({"rate_bps": 0}, "links.rate_bps", "> 0"),
        ({"loss": 0.1, "timeout_s": 1e300}, "links.timeout_s", "overflow"),
    ],
)
def test_bad_links_are_one_line(tmp_path, capsys, links, key, words):
    err = validate_error(base_scenario(links=links), tmp_path, capsys)
    assert key in err and words in err, err


GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="r" for="edge" attr.name="rate_bps" attr.type="{rate_type}"/>
  <key id="l" for="edge" attr.name="loss" attr.type="double"/>
  <graph edgedefault="undirected">
    <node id="a"/><node id="b"/><node id="c"/>
    <edge source="a" target="b"><data key="r">{rate}</data></edge>
    <edge source="b" target="c"><data key="l">{loss}</data></edge>
  </graph>
</graphml>
"""


@pytest.mark.parametrize(
    ("rate_type", "rate", "loss", "shown"),
    [
        ("string", "fast", 0.0, "topology edge ('a', 'b') attribute rate_bps: must be a number"),
        ("double", -1.0, 0.0, "topology edge ('a', 'b') attribute rate_bps: must be a number > 0"),
        ("double", 5.0, 1.5, "topology edge ('b', 'c') attribute loss: must be a number >= 0"),
        ("double", 5.0, 0.5, "topology edge ('b', 'c') attribute timeout_s: is required"),
    ],
)
def test_bad_edge_attributes_are_one_line(tmp_path, capsys, rate_type, rate, loss, shown):
    (tmp_path / "g.graphml").write_text(GRAPHML.format(rate_type=rate_type, rate=rate, loss=loss))
    raw = base_scenario(topology={"kind": "graphml", "path": "g.graphml"})
    err = validate_error(raw, tmp_path, capsys)
    assert shown in err, err


def test_edge_attributes_from_a_graph_file_set_the_links(tmp_path):
    (tmp_path / "g.graphml").write_text(GRAPHML.format(rate_type="double", rate=64.0, loss=0.5))
    raw = base_scenario(
        topology={"kind": "graphml", "path": str(tmp_path / "g.graphml")},
        links={"timeout_s": 1.0},
    )
    raw["scenario"].update(runs=2, iterations=300)
    res = gs.run(raw, plots=False)
    assert "lossy links" in res.engines["t"]
    hops = slot_hops(res)
    hops = hops[hops["sender"] != hops["receiver"]]  # Metropolis–Hastings stays at "a" at times
    slow = (hops["sender"] == "a") | (hops["receiver"] == "a")
    np.testing.assert_allclose(hops.loc[slow, "dt"], PAYLOAD / 64.0)
    lossy = hops.loc[~slow]
    attempts = lossy["dbits"] / PAYLOAD
    np.testing.assert_allclose(lossy["dt"], attempts - 1)  # timeouts only: rate inf, latency 0
    assert res.runs["retransmissions"].sum() == int((attempts - 1).sum())


def test_per_edge_links_given_from_python_are_checked():
    graph = nx.cycle_graph(4)
    graph.edges[1, 2]["loss"] = "often"
    with pytest.raises(
        ConfigError, match=r"topology edge \(1, 2\) attribute loss: must be a number"
    ):
        gs.run(base_scenario(topology={"graph": graph}), plots=False)


def test_rates_drawn_per_edge_give_each_edge_its_own_fixed_rate():
    raw = base_scenario(links={"rate_bps": {"lognormal": [7.0, 1.0]}, "latency_s": 0.01})
    raw["scenario"].update(runs=3, iterations=300)
    res = gs.run(raw, plots=False)
    assert "per-edge links" in res.engines["t"]
    hops = slot_hops(res)
    assert (hops["sender"] != hops["receiver"]).all()
    edge = np.minimum(hops["sender"], hops["receiver"]) * 10 + np.maximum(
        hops["sender"], hops["receiver"]
    )
    per_edge = hops["dt"].groupby(edge)
    np.testing.assert_allclose(per_edge.max(), per_edge.min(), rtol=1e-9)  # one delay per edge
    assert per_edge.ngroups > 30 and per_edge.min().nunique() == per_edge.ngroups
    rates = PAYLOAD / (per_edge.min() - 0.01)
    assert 0.1 < np.log(rates).std() < 3 and 4 < np.log(rates).mean() < 10  # lognormal(7, 1)
    again = gs.run(raw, plots=False)
    pd.testing.assert_frame_equal(res.metrics, again.metrics)
    other = gs.run({**raw, "scenario": {**raw["scenario"], "seed": 8}}, plots=False)
    assert not np.allclose(slot_hops(other)["dt"].to_numpy()[:50], hops["dt"].to_numpy()[:50])


@pytest.mark.parametrize(
    ("links", "protocol", "shown"),
    [
        ({"rate_bps": {"normal": [0, 1]}}, {}, "links.rate_bps: cannot be drawn from 'normal'"),
        ({"latency_s": {"lognormal": [0, -1]}}, {}, "links.latency_s: { lognormal = [mu, sd] }"),
        ({"rate_bps": {"gamma": [2, 1]}}, {"architecture": "server"}, "links.rate_bps: is drawn"),
    ],
)
def test_bad_drawn_links_are_one_line(tmp_path, capsys, links, protocol, shown):
    err = validate_error(base_scenario(links=links, protocol=protocol), tmp_path, capsys)
    assert shown in err, err


def test_summary_says_how_likely_a_message_is_lost_for_good():
    raw = _lossy(50, 1, loss=0.3, timeout_s=0.5, max_retries=2)
    theory = gs.run(raw, plots=False).summary()["variants"]["t"]["theory"]
    assert "probability at most 0.027 per hop" in theory["lossy_links_note"]  # 0.3 ** 3
    assert "exact_cover_moves" in theory  # still given, with the note beside it
    quiet = gs.run(_lossy(50, 1, loss=0.0), plots=False).summary()["variants"]["t"]["theory"]
    assert "lossy_links_note" not in quiet
