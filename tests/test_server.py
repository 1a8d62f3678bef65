"""The parameter-server architecture (``[protocol] architecture = "server"``): every slot a round of
a download and an upload with the agent the scheduler picks, for any protocol.

The checks: with the same scheduler and seed the server learns exactly the walk's states slot for
slot (the same holders, KL, retrain KL and latencies); each slot's time is compute + download +
upload, each bits / rate + latency of its own link, computed by hand with numbers whose sums are
exact in binary; each slot sends two messages; the direction of each transfer picks its link; the
round-robin schedule; the retrain baseline, workers, the Python API and the vectorised engine (the
same numbers: tests/test_server_batches.py); bad keys in one line."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.engine.protocol_api import Protocol, StateTrace
from gossipsim.engine.token import run_token
from gossipsim.errors import ConfigError
from gossipsim.network.channels import Channel, Delivery
from gossipsim.network.links import LinkModel, ServerLinks
from gossipsim.network.messages import SERVER, Message, Round, Transfer
from gossipsim.protocols import ServerRounds
from gossipsim.scheduling import IndexedGraph, Walker
from tests.helpers import base_scenario, to_toml, validate_error

#: a Beta's natural parameters: 2 entries × 64 bits
BITS = 128.0
#: powers of two, so that every slot time below is an exact binary fraction
COMPUTE, DOWN_RATE, DOWN_LATENCY, UP_RATE, UP_LATENCY = 1.0, 256.0, 0.25, 64.0, 0.125


def _raw(architecture: str, scheduler: str = "metropolis-hastings", **extra):
    raw = base_scenario(
        scenario={"name": "s", "seed": 4, "runs": 6, "iterations": 120},
        topology={"kind": "karate"},
        protocol={"architecture": architecture},
        scheduler={"kind": scheduler},
        compute={"seconds_per_iteration": COMPUTE},
        links={
            "rate_bps": DOWN_RATE,  # the walk's links; the server's downlink inherits it
            "latency_s": 0.5,
            "downlink_latency_s": DOWN_LATENCY,
            "uplink_rate_bps": UP_RATE,
            "uplink_latency_s": UP_LATENCY,
        },
        unlearning=[{"node": 5, "at_iteration": 60}],
    )
    raw.update(extra)
    return raw


def _run(raw, **kwargs) -> gs.Results:
    return gs.run(gs.parse_study(raw), progress=None, **kwargs)


@pytest.mark.parametrize("engine", ["event", "vectorized"])
@pytest.mark.parametrize("scheduler", ["metropolis-hastings", "uniform", "round-robin"])
def test_the_server_learns_the_walks_states_slot_for_slot(scheduler, engine):
    walk = _run(_raw("walk", scheduler), engine="event")
    server = _run(_raw("server", scheduler), engine=engine)
    a, b = walk.metrics, server.metrics
    assert len(a) == len(b) == 6 * 120
    for column in ("run", "iteration", "holder", "kl", "retrain_kl"):
        pd.testing.assert_series_equal(a[column], b[column])
    for column in ("removal_latency", "latency", "retrain_latency", "request_iteration"):
        pd.testing.assert_series_equal(walk.requests[column], server.requests[column])
    pd.testing.assert_series_equal(walk.runs["cover_iteration"], server.runs["cover_iteration"])
    # time: each slot is compute, a download at the downlink's rate and latency, an upload at the
    # uplink's; bits: two messages per slot (rejections included)
    per_slot = COMPUTE + BITS / DOWN_RATE + DOWN_LATENCY + BITS / UP_RATE + UP_LATENCY
    assert per_slot == 3.875
    np.testing.assert_array_equal(b["time"].to_numpy(), per_slot * b["iteration"].to_numpy())
    np.testing.assert_array_equal(b["bits"].to_numpy(), 2 * BITS * b["iteration"].to_numpy())
    # the walk: one hop per move at rate_bps and latency_s, nothing for a rejection
    hop = BITS / DOWN_RATE + 0.5
    for _, run in a.groupby("run"):
        moves = np.concatenate([[0], np.cumsum(np.diff(run["holder"].to_numpy()) != 0)])
        np.testing.assert_array_equal(run["time"], COMPUTE * run["iteration"] + hop * moves)
        np.testing.assert_array_equal(run["bits"], BITS * moves)


def test_round_robin_serves_the_agents_in_turn():
    raw = _raw("server", "round-robin")
    raw["scheduler"]["start"] = 30
    res = _run(raw)
    expected = (30 + np.arange(120)) % 34  # karate's 34 nodes in graph order, from node 30
    for _, run in res.metrics.groupby("run"):
        np.testing.assert_array_equal(run["holder"], expected)
    # every agent once in 34 slots; node 5's request before slot 60 (node 21 scheduled then):
    # served when node 5 is next scheduled, at slot 60 + (5 - 21) mod 34 = 78
    assert (res.runs["cover_iteration"] == 34).all()
    assert (res.requests["removal_latency"] == 78 - 60 + 1).all()


class Growing(Protocol):
    """A protocol whose message grows by 8 bits a slot (the download is the previous state)."""

    def on_token(self, holder, slot):
        return Message(8.0 * slot)

    def on_request(self, node, slot):
        pass

    def done(self):
        return False

    def traces(self):
        return {"main": StateTrace()}


def _ring_walker(n=5):
    return Walker(IndexedGraph.from_networkx(nx.cycle_graph(n)), "round-robin",
                  np.random.default_rng(0))  # fmt: skip


def test_each_transfer_goes_over_its_own_link():
    """Downlink and uplink at different rates and latencies, a download the size of the previous
    state and an upload the size of the new one: each slot's time is exactly as computed by hand,
    and swapping the links changes it."""
    down, up = LinkModel(16.0, 0.5), LinkModel(4.0, 0.25)
    # slot i: a download of 8(i-1) bits (slot 1: the initial state, 8), an upload of 8i
    sent_down = np.array([8.0, 8, 16, 24, 32, 40])
    sent_up = 8.0 * np.arange(1, 7)
    times = {}
    for name, links in (("as is", ServerLinks(down, up)), ("swapped", ServerLinks(up, down))):
        record = run_token(walker=_ring_walker(), protocol=ServerRounds(Growing()), start=0,
                           iterations=6, compute_seconds=1.0, links=links)  # fmt: skip
        times[name] = record.end_times
        np.testing.assert_array_equal(record.bits, np.cumsum(sent_down + sent_up))
    expect = np.cumsum(1.0 + sent_down / 16 + 0.5 + sent_up / 4 + 0.25)
    np.testing.assert_array_equal(times["as is"], expect)
    swapped = np.cumsum(1.0 + sent_down / 4 + 0.25 + sent_up / 16 + 0.5)
    np.testing.assert_array_equal(times["swapped"], swapped)
    assert not np.array_equal(expect, swapped)


def test_a_round_carries_the_state_down_and_the_update_up():
    protocol = ServerRounds(Growing())
    first = protocol.on_token(3, 1)
    second = protocol.on_token(4, 2)
    assert isinstance(first, Round) and first.sequential
    assert [(t.sender, t.receiver, t.message.bits) for t in first.transfers] == [
        (SERVER, 3, 8.0), (3, SERVER, 8.0)]  # fmt: skip
    assert [(t.sender, t.receiver, t.message.bits) for t in second.transfers] == [
        (SERVER, 4, 8.0), (4, SERVER, 16.0)]  # fmt: skip


class OwnRounds(Growing):
    """A protocol that runs its own rounds: the wrapper passes them on, and their outcomes."""

    def __init__(self):
        self.outcomes = []

    def on_token(self, holder, slot):
        return Round((Transfer(SERVER, holder, Message(32.0)),))

    def on_round(self, slot, delivered):
        self.outcomes.append(list(delivered))


def test_a_protocols_own_round_is_passed_on():
    inner = OwnRounds()
    record = run_token(walker=_ring_walker(), protocol=ServerRounds(inner), start=0, iterations=3,
                       links=ServerLinks(LinkModel(32.0), LinkModel(1.0)))  # fmt: skip
    np.testing.assert_array_equal(record.end_times, [1.0, 2.0, 3.0])  # the downlink only
    assert inner.outcomes == [[True]] * 3


class Lossy(Channel):
    lossy = True

    def delay(self, sender, receiver, bits):
        return 1.0

    def transmit(self, sender, receiver, message, rng):
        return Delivery(1.0, lost=receiver == SERVER)


def test_a_lost_transfer_without_a_checkpoint_is_refused():
    with pytest.raises(ValueError, match=r"nothing was saved .* lossy=True"):
        run_token(walker=_ring_walker(), protocol=ServerRounds(Growing()), start=0, iterations=3,
                  links=Lossy(), channel_rng=np.random.default_rng(0))  # fmt: skip


def test_server_links_carry_only_transfers_with_the_server():
    links = ServerLinks(LinkModel(2.0, 1.0), LinkModel(4.0, 3.0))
    assert links.delay(SERVER, 7, 8.0) == 5.0
    assert links.delay(7, SERVER, 8.0) == 5.0
    assert links.delay(SERVER, 0, 4.0) == 3.0 and links.delay(0, SERVER, 4.0) == 4.0
    with pytest.raises(ValueError, match="to or from the server"):
        links.delay(1, 2, 8.0)


def test_a_sweep_over_the_architecture_on_workers(tmp_path, capsys):
    raw = _raw("walk")
    del raw["protocol"]
    raw["sweep"] = {"protocol.architecture": ["walk", "server"]}
    raw["scenario"]["runs"] = 20  # the walk variant runs vectorised
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        assert main(["run", str(path), "--out", str(out), "--no-plots", "--workers", workers]) == 0
        outs.append(out)
    capsys.readouterr()
    for name in ("metrics.csv", "runs.csv", "requests.csv", "visits.csv", "summary.json"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    metrics = pd.read_csv(outs[0] / "metrics.csv")
    assert list(metrics["protocol.architecture"].unique()) == ["walk", "server"]
    walk, server = (metrics[metrics["protocol.architecture"] == a] for a in ("walk", "server"))
    np.testing.assert_array_equal(walk["kl"], server["kl"])
    np.testing.assert_array_equal(walk["holder"], server["holder"])
    summary = json.loads((outs[0] / "summary.json").read_text())
    resolved = summary["variants"]["server"]["resolved"]
    assert resolved["protocol"]["architecture"] == "server"
    assert resolved["links"] == {
        "rate_bps": 256.0, "latency_s": 0.5, "downlink_rate_bps": 256.0,
        "downlink_latency_s": 0.25, "uplink_rate_bps": 64.0, "uplink_latency_s": 0.125,
        "loss": 0.0, "timeout_s": None, "max_retries": 100, "downlink_loss": 0.0,
        "downlink_timeout_s": None, "downlink_max_retries": 100, "uplink_loss": 0.0,
        "uplink_timeout_s": None, "uplink_max_retries": 100,
    }  # fmt: skip


def test_the_python_api_takes_the_architecture():
    study = gs.parse_study(_raw("walk")).replace({"protocol.architecture": "server"})
    res = gs.run(study, progress=None)
    assert res.metrics["time"].iloc[0] == 3.875
    with pytest.raises(ConfigError, match=r"^protocol\.architecture: "):
        study.replace({"protocol.architecture": "hub"})


def test_a_shipped_scenario_uses_it():
    study = gs.load_scenario("scenarios/server_vs_walk.toml")
    kinds = [(v.scenario.protocol.architecture, v.scenario.scheduler.kind) for v in study.variants]
    assert kinds == [
        ("walk", "metropolis-hastings"), ("server", "metropolis-hastings"),
        ("server", "uniform"), ("server", "round-robin"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("section", "values", "key", "says"),
    [
        ("protocol", {"architecture": "hub"}, "protocol.architecture", "allowed: walk, server"),
        ("protocol", {"architecture": 1}, "protocol.architecture", "must be a string"),
        ("links", {"uplink_rate_bps": 0}, "links.uplink_rate_bps", "> 0"),
        ("links", {"downlink_rate_bps": -3.0}, "links.downlink_rate_bps", "> 0"),
        ("links", {"uplink_latency_s": -1}, "links.uplink_latency_s", ">= 0"),
        ("links", {"downlink_latency_s": "fast"}, "links.downlink_latency_s", "a number"),
        ("links", {"uplink_rate": 5}, "links.uplink_rate", "unknown key"),
    ],
)
def test_bad_keys_are_one_line(tmp_path, capsys, section, values, key, says):
    raw = base_scenario(**{section: values})
    line = validate_error(raw, tmp_path, capsys)
    assert line.startswith(f"gossipsim: error: {key}: ") and says in line, line


@pytest.mark.parametrize(
    ("links", "key"),
    [
        ({"uplink_rate_bps": 1e-300}, "links.uplink_rate_bps"),
        ({"downlink_latency_s": 1e308}, "links.downlink_latency_s"),
        ({"rate_bps": 1e-300}, "links.rate_bps"),  # both of the server's links inherit it
    ],
)
def test_server_times_that_overflow_the_clock_name_their_key(tmp_path, capsys, links, key):
    raw = base_scenario(protocol={"architecture": "server"}, links=links)
    line = validate_error(raw, tmp_path, capsys)
    assert line.startswith(f"gossipsim: error: {key}: ") and "overflow" in line, line
    raw["protocol"] = {"architecture": "walk"}  # the walk never uses the server's links
    if key != "links.rate_bps":
        path = tmp_path / "walk.toml"
        path.write_text(to_toml(raw))
        assert main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_a_timed_request_after_the_servers_horizon(tmp_path, capsys):
    raw = base_scenario(protocol={"architecture": "server"}, links={"uplink_latency_s": 1.0},
                        unlearning=[{"node": 1, "at_time": 250.0}])  # fmt: skip
    line = validate_error(raw, tmp_path, capsys)  # 200 slots of 1 s at most
    assert line.startswith("gossipsim: error: unlearning[0].at_time: ") and "server" in line, line


class Constant(Growing):
    message = Message(128.0)

    def on_token(self, holder, slot):
        return self.message


def _peak_bytes(protocol, links, slots):
    import tracemalloc

    walker = Walker(IndexedGraph.from_networkx(nx.complete_graph(10)), "metropolis-hastings",
                    np.random.default_rng(1))  # fmt: skip
    tracemalloc.start()
    try:
        run_token(walker=walker, protocol=protocol, start=0, iterations=slots, links=links)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_memory_budget_counts_the_record_of_every_round():
    from gossipsim.study import budget

    slots = 20_000
    walk = _peak_bytes(Constant(), LinkModel(1e3), slots)
    server = _peak_bytes(
        ServerRounds(Constant()), ServerLinks(LinkModel(1e3), LinkModel(1e2)), slots
    )
    per_round = (server - walk) / slots
    assert budget.ROUND_BYTES / 2 < per_round <= budget.ROUND_BYTES, per_round
    scenario = gs.parse_study(_raw("server")).variants[0].scenario
    assert budget.run_shape(scenario).rounds
    assert not budget.run_shape(gs.parse_study(_raw("walk")).variants[0].scenario).rounds


def test_a_protocol_of_ones_own_gets_the_server_too(monkeypatch):
    """The plug-in of docs/extending.md (a node adds its factor with probability 1/2, drawn from the
    protocol's stream), named by import path: the server learns its states and counts its skipped
    updates as the walk does, in the server's time."""
    examples = str(Path(__file__).resolve().parents[1] / "examples")
    monkeypatch.syspath_prepend(examples)
    monkeypatch.setenv("PYTHONPATH", examples)
    tables = {}
    for architecture in ("walk", "server"):
        raw = _raw(architecture, "uniform")
        raw["protocol"]["kind"] = "partial_participation:PartialGFVL"
        raw["protocol"]["participation"] = 0.5
        tables[architecture] = _run(raw, workers=2)
    walk, server = tables["walk"], tables["server"]
    for column in ("holder", "kl", "retrain_kl"):
        pd.testing.assert_series_equal(walk.metrics[column], server.metrics[column])
    assert walk.runs["skipped_updates"].sum() > 0
    pd.testing.assert_series_equal(walk.runs["skipped_updates"], server.runs["skipped_updates"])
    m = server.metrics
    np.testing.assert_array_equal(m["time"], 3.875 * m["iteration"])
