"""The parameter-server architecture on the vectorised engine (issue 23): every kernel
(``batched-steps``: DSVGD sound and paper, centralised SVGD (which the server's rounds leave
alone: tests/test_centralised.py), natural-gradient G-FVL;
``conjugate-first-visits``: exact G-FVL, learning and unlearning, and runs measured one by one)
gives the event engine's tables bit for bit with ``architecture = "server"``, with the scheduler
round-robin, uniform or a Metropolis–Hastings walk: the same scheduled agents and states, and each
slot's two transfers (the download of the state, the upload of the update, one after the other)
charged in the same order. The link numbers are chosen so that the order of the additions shows in
the last bits (``test_the_clock_adds_up_in_the_event_engines_order``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.api import choose_engines
from gossipsim.engine.slottables import SlotCosts, StaySlots, stepped_clock
from gossipsim.execution.vectorized import capability
from gossipsim.network.links import LinkModel, ServerLinks
from gossipsim.world.world import slot_costs
from tests.helpers import base_scenario
from tests.test_batched_steps import unlearning_beta
from tests.test_centralised import assert_upload_charged
from tests.test_nonconjugate import logistic
from tests.test_particle_batches import _raw as particle_raw

#: the server's links and compute time: rates and latencies that are not binary fractions, a slower
#: uplink than downlink, so that every sum's rounding depends on its order
SERVER_LINKS = {"rate_bps": 3.0e4, "latency_s": 0.013, "uplink_rate_bps": 7.0e3,
                "uplink_latency_s": 0.021}  # fmt: skip
COMPUTE = {"seconds_per_iteration": 0.1}


def on_server(raw: dict[str, Any], scheduler: str = "round-robin") -> dict[str, Any]:
    """``raw`` with the parameter server scheduling the agents, over :data:`SERVER_LINKS`."""
    out = dict(raw)
    out["protocol"] = {**raw.get("protocol", {}), "architecture": "server"}
    out["scheduler"] = {**raw.get("scheduler", {}), "kind": scheduler}
    out["links"] = dict(SERVER_LINKS)
    out["compute"] = dict(COMPUTE)
    return out


def assert_same_tables(event: gs.Results, vectorized: gs.Results, tables: tuple[str, ...]) -> None:
    assert set(vectorized.engines.values()) == {"vectorized"}
    assert set(event.engines.values()) == {"event"}
    for name in tables:
        pd.testing.assert_frame_equal(
            getattr(vectorized, name), getattr(event, name), check_exact=True, obj=name
        )


def both_engines(raw: dict[str, Any], **options: Any) -> tuple[gs.Results, gs.Results]:
    return gs.run(raw, engine="event"), gs.run(raw, engine="vectorized", **options)


def assert_rounds_charged(res: gs.Results, bits: float) -> None:
    """Every slot of every run: two transfers of ``bits`` (bits grow by 2 × bits a slot) and the
    slot's time is compute + download + upload (to rounding)."""
    per_slot = (
        COMPUTE["seconds_per_iteration"]
        + bits / SERVER_LINKS["rate_bps"] + SERVER_LINKS["latency_s"]
        + bits / SERVER_LINKS["uplink_rate_bps"] + SERVER_LINKS["uplink_latency_s"]
    )  # fmt: skip
    m = res.metrics
    np.testing.assert_array_equal(m["bits"], 2 * bits * m["iteration"])
    np.testing.assert_allclose(m["time"], per_slot * m["iteration"], rtol=1e-12)


PARTICLES = {
    "dsvgd-sound": {"kind": "dsvgd", "particles": 5, "local_iterations": 2},
    "dsvgd-sound-minibatch": {"kind": "dsvgd", "particles": 5, "batch_size": 4},
    "dsvgd-paper": {"kind": "dsvgd", "particles": 5, "variant": "paper", "local_iterations": 3,
                    "fit_iterations": 2},
    "svgd": {"kind": "svgd", "particles": 6},
}  # fmt: skip


@pytest.mark.parametrize("case", list(PARTICLES))
def test_particle_protocols_with_the_server_same_tables_on_both_engines(case):
    """Forget-SVGD's three requests (two at one slot), the retrain baseline, particles.csv; agents
    in turn (round-robin)."""
    raw = on_server(particle_raw(PARTICLES[case]))
    event, vectorized = both_engines(raw)
    assert_same_tables(event, vectorized, ("runs", "requests", "metrics", "particles"))
    assert vectorized.requests["removal_latency"].notna().all()
    assert set(vectorized.particles["world"]) == {"main", "retrain"}
    if PARTICLES[case]["kind"] == "svgd":  # centralised: the upload of every node's data only
        assert_upload_charged(vectorized, raw)  # whatever the architecture
        return
    bits = gs.check(gs.parse_study(raw))[0].message_bits
    assert_rounds_charged(vectorized, bits)


@pytest.mark.parametrize("scheduler", ["uniform", "metropolis-hastings"])
def test_dsvgd_with_other_schedulers_same_tables_on_both_engines(scheduler):
    raw = on_server(particle_raw(PARTICLES["dsvgd-sound"]), scheduler)
    assert_same_tables(*both_engines(raw), ("runs", "requests", "metrics", "particles"))


def test_dsvgd_with_the_server_in_batches_and_on_two_workers(monkeypatch):
    """A run's numbers do not depend on its batch nor on the process: a sweep of two variants on two
    workers against the event engine, then batches of two runs."""
    raw = on_server(particle_raw(PARTICLES["dsvgd-sound"]))
    raw["scenario"]["runs"] = 5
    raw["sweep"] = {"protocol.local_iterations": [1, 2]}
    event = gs.run(raw, engine="event")
    whole = gs.run(raw, engine="vectorized", workers=2)
    assert_same_tables(event, whole, ("runs", "requests", "metrics", "particles"))
    monkeypatch.setattr("gossipsim.study.budget.VECTORIZED_MAX_RUNS", 2)
    split = gs.run(raw, engine="vectorized")
    assert_same_tables(event, split, ("runs", "requests", "metrics", "particles"))


@pytest.mark.parametrize(
    "protocol",
    [{"estimator": "reinforce"}, {"estimator": "exact", "local_iterations": 3}],
    ids=["reinforce", "exact"],
)
def test_natural_gradient_gfvl_with_the_server_same_tables_on_both_engines(protocol):
    """Beta–exponential: three requests, the retrain baseline, a KL window."""
    raw = on_server(unlearning_beta(**protocol))
    event, vectorized = both_engines(raw)
    assert_same_tables(event, vectorized, ("runs", "requests", "metrics"))
    assert_rounds_charged(vectorized, 128.0)


def test_natural_gradient_runs_that_stop_with_the_server():
    raw = on_server(
        unlearning_beta(estimator="reinforce", refine_after_unlearning=False,
                        retrain_baseline=False),
        "uniform",
    )  # fmt: skip
    raw["scenario"]["stop_when_done"] = True
    raw["unlearning"] = [{"node": 9, "at_iteration": 100}]
    event, vectorized = both_engines(raw)
    assert (event.runs["iterations"] < 400).all()  # they did stop early
    assert_same_tables(event, vectorized, ("runs", "requests", "metrics"))


def test_logistic_regression_with_the_server_same_tables_on_both_engines():
    """Held-out metrics of the full Gaussian family, a request, the retrain baseline."""
    raw = logistic(
        scenario={"name": "lr", "seed": 2, "runs": 3, "iterations": 40},
        data={"dataset": "wine", "partition": "dirichlet", "concentration": 0.5},
        protocol={"estimator": "reparameterization", "learning_rate": 0.2, "samples": 3},
        unlearning=[{"node": 1, "at_iteration": 25}],
        metrics={"tolerance": 0.5, "record_every": 10},
    )
    event, vectorized = both_engines(on_server(raw))
    assert {"accuracy", "retrain_kl"} <= set(vectorized.metrics.columns)
    assert_same_tables(event, vectorized, ("runs", "requests", "metrics"))


def conjugate(**sections: Any) -> dict[str, Any]:
    """Beta–Bernoulli on karate (an irregular graph), 20 runs of 300 slots."""
    return base_scenario(
        scenario={"name": "c", "seed": 5, "runs": 20, "iterations": 300},
        topology={"kind": "karate"},
        **sections,
    )


@pytest.mark.parametrize(
    "case",
    ["learning", "unlearning", "stop-when-done", "one-by-one"],
)
@pytest.mark.parametrize("scheduler", ["round-robin", "metropolis-hastings"])
def test_conjugate_gfvl_with_the_server_same_tables_on_both_engines(case, scheduler):
    """Every path of the conjugate kernel: states from first visits without and with requests,
    runs that stop once done, and runs whose protocols are called at first visits and measured
    one by one (a KL window of 3 slots)."""
    requests = [{"node": 5, "at_iteration": 60}, {"node": 0, "at_iteration": 60},
                {"node": 33, "at_iteration": 150}]  # fmt: skip
    sections: dict[str, Any] = {
        "learning": {},
        "unlearning": {"unlearning": requests},
        "stop-when-done": {"unlearning": requests},
        "one-by-one": {"unlearning": requests, "metrics": {"tolerance": 1e-10,
                                                          "latency_window": 3}},
    }[case]  # fmt: skip
    raw = on_server(conjugate(**sections), scheduler)
    if case == "stop-when-done":
        raw["scenario"].update(stop_when_done=True, iterations=5000)
    event, vectorized = both_engines(raw)
    assert_same_tables(event, vectorized, ("runs", "requests", "metrics"))
    assert_rounds_charged(vectorized, 128.0)
    if case == "stop-when-done":
        assert (vectorized.runs["iterations"] < 5000).all()


def test_the_server_runs_on_the_vectorized_engine():
    """Nothing about the server keeps a variant from the vectorised engine: auto picks it from 16
    runs on, as on the walk."""
    study = gs.parse_study(on_server(conjugate()))
    worlds = gs.check(study)
    assert isinstance(worlds[0].links, ServerLinks)
    assert capability.unavailable(worlds[0]) is None
    assert choose_engines(study, worlds, "auto") == (["vectorized"], ["vectorized"])


def test_the_clock_adds_up_in_the_event_engines_order():
    """The stepped clock adds compute, then the round, slot by slot: with these link numbers, the
    same costs added in another grouping (compute and round summed first, or the slot's time
    multiplied) give other bits, so the tables above test the order."""
    world = gs.check(gs.parse_study(on_server(conjugate())))[0]
    costs = slot_costs(world)
    assert costs.round_bits == (128.0, 128.0) and costs.hop_seconds == 0.0
    down, up = LinkModel(3.0e4, 0.013), LinkModel(7.0e3, 0.021)
    assert costs.round_seconds == down.delay(0, 0, 128.0) + up.delay(0, 0, 128.0)
    holders = np.zeros((1, 300), dtype=np.int64)
    end, start, sent = stepped_clock(costs, holders)
    s, expect = 0.0, []
    for _ in range(300):  # the event engine's arithmetic, written out
        t = s + 0.1
        t = t + costs.round_seconds
        expect.append(t)
        s = t
    np.testing.assert_array_equal(end[0], expect)
    np.testing.assert_array_equal(start[0], [0.0, *expect[:-1]])
    np.testing.assert_array_equal(sent[0], 256.0 * np.arange(1, 301))
    grouped = np.cumsum(np.full(300, 0.1 + costs.round_seconds))
    assert not np.array_equal(grouped, end[0])
    assert not np.array_equal(np.arange(1, 301) * (0.1 + costs.round_seconds), end[0])


def test_the_walks_clock_is_unchanged():
    """On the walk: compute, then a hop when the token moves (nothing when it stays); bits are the
    hops before each slot."""
    costs = SlotCosts(0.5, hop_seconds=0.25, hop_bits=128.0)
    holders = np.array([[2, 2, 0, 0, 1]])
    end, start, sent = stepped_clock(costs, holders)
    assert end[0].tolist() == [0.5, 1.0, 1.75, 2.25, 3.0]
    assert start[0].tolist() == [0.0, 0.5, 1.25, 1.75, 2.5]
    assert sent[0].tolist() == [0.0, 0.0, 128.0, 128.0, 256.0]


def test_bits_beyond_exact_products_are_summed_in_order():
    """Bits that are not whole numbers are summed transfer by transfer, as the event engine does."""
    costs = SlotCosts(1.0, round_bits=(0.1, 0.2))
    _, _, sent = stepped_clock(costs, np.zeros((1, 50), dtype=np.int64))
    total, expect = 0.0, []
    for _ in range(50):
        total += 0.1
        total += 0.2
        expect.append(total)
    np.testing.assert_array_equal(sent[0], expect)
    walk = SlotCosts(1.0, hop_seconds=1.0, hop_bits=0.1)
    _, _, sent = stepped_clock(walk, np.arange(50)[None, :] % 3)
    np.testing.assert_array_equal(sent[0], np.concatenate([[0.0], np.cumsum(np.full(49, 0.1))]))


def test_stays_with_the_server_account_time_and_bits_by_hand():
    """Drawn stays (exact conjugate G-FVL): with the server slot i ends at i·(c + r), starts c + r
    earlier, and has sent i times the round's bits, whoever holds it."""
    walk = StaySlots(
        rows=np.array([0, 0, 0]),
        starts=np.array([1, 4, 5]),
        holders=np.array([2, 0, 1]),
        hops=np.array([0, 1, 2]),
        columns=9,
        costs=SlotCosts(0.5, round_seconds=0.25, round_bits=(128.0, 64.0)),
        per_run_visits=np.array([[1, 5, 3]]),
    )
    rows = np.zeros(4, dtype=np.int64)
    slots = np.array([1, 3, 4, 9])
    assert walk.end_time(rows, slots).tolist() == [0.75, 2.25, 3.0, 6.75]
    assert walk.start_time(rows, slots).tolist() == [0.0, 1.5, 2.25, 6.0]
    assert walk.bits(rows, slots).tolist() == [192.0, 576.0, 768.0, 1728.0]


def test_drawn_stays_with_the_server_learn_the_walks_states():
    """A Metropolis–Hastings schedule on a star drawn stay by stay: the server realises the walk's
    drawn holders and states (the same walk streams), in the server's time and bits."""
    raw = base_scenario(
        scenario={"name": "d", "seed": 2, "runs": 30, "iterations": 5000},
        topology={"kind": "star", "nodes": 8},
        scheduler={"kind": "metropolis-hastings", "stays": "drawn"},
        unlearning=[{"node": 3, "at_iteration": 400}],
        metrics={"tolerance": 1e-10, "record_every": 100},
        compute={"seconds_per_iteration": 0.5},
        links={"rate_bps": 512.0, "latency_s": 0.125},
    )
    walk = gs.run(raw)
    server = gs.run({**raw, "protocol": {"architecture": "server"}})
    assert walk.engines == server.engines == {"d": "vectorized (drawn stays)"}
    for column in ("run", "iteration", "holder", "kl", "retrain_kl"):
        pd.testing.assert_series_equal(walk.metrics[column], server.metrics[column])
    for column in ("removal_latency", "latency", "retrain_latency"):
        pd.testing.assert_series_equal(walk.requests[column], server.requests[column])
    m = server.metrics
    per_slot = 0.5 + 2 * (128.0 / 512.0 + 0.125)  # binary fractions: exact
    np.testing.assert_array_equal(m["time"], per_slot * m["iteration"])
    np.testing.assert_array_equal(m["bits"], 256.0 * m["iteration"])
