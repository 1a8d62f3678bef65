"""Parallel DSVGD (``[protocol] kind = "parallel-dsvgd"``, paper 003 Section IV-E): with one client
it is DSVGD bit for bit through the whole Python path (both variants); the sound variant's slot is
one centralised SVGD step on the prior and every client's score, computed here independently, and
a forgotten client leaves the sum at the request's slot; the paper variant's slot is every
client's DSVGD visit combined by the product rule; a slot's time and bits exactly from the links;
lossy links take a slot back whole; bad input in one line."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.logdensity.logistic import logistic_log_likelihood, logistic_log_prior
from gossipsim.network.messages import SERVER
from gossipsim.particles import AdaGradSettings, adagrad_step, svgd_direction
from gossipsim.particles.dsvgd import paper_forget, paper_visit
from gossipsim.particles.parallel import combine_paper, displacement_start
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_protocol, build_world
from tests.helpers import validate_error

#: 8 particles of d = 4 (3 features and the intercept) at 64 bits: one message
BITS = 8 * 4 * 64.0
#: powers of two, so that every slot time below is an exact binary fraction
COMPUTE, DOWN_RATE, DOWN_LATENCY, UP_RATE, UP_LATENCY = 1.0, 1024.0, 0.25, 4096.0, 0.125


def _raw(protocol: dict[str, Any], nodes: int = 4, **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "scenario": {"name": "p", "seed": 3, "runs": 2, "iterations": 12},
        "topology": {"kind": "complete", "nodes": nodes},
        "model": {"kind": "logistic-regression"},
        "data": {"dataset": "synthetic", "points_per_node": 15, "features": 3},
        "protocol": {"architecture": "server", "particles": 8, **protocol},
        "metrics": {"record_every": 1},
    }
    raw.update(extra)
    return raw


def _run(raw: dict[str, Any]) -> gs.Results:
    return gs.run(gs.parse_study(raw), progress=None, engine="event")


PAPER = {"variant": "paper", "local_iterations": 3, "fit_iterations": 2}


@pytest.mark.parametrize(
    "variant", [{"variant": "sound"}, {**PAPER, "batch_size": 5}], ids=["sound", "paper"]
)
def test_with_one_client_it_is_dsvgd_bit_for_bit(variant):
    """Two nodes, node 1 forgotten before slot 1 (it never contributes), the server always
    scheduling node 0: DSVGD's rounds are node 0's alone, parallel DSVGD's every client's, i.e.
    node 0's. The particles, KSDs and retrain world agree exactly; for the paper variant (the
    same N × d numbers each way) so do time and bits."""
    results = {}
    for kind in ("dsvgd", "parallel-dsvgd"):
        raw = _raw(
            {"kind": kind, **variant},
            nodes=2,
            scheduler={"kind": "tests.plugins:StayAtStart", "start": 0},
            unlearning=[{"node": 1, "at_iteration": 1}],
            compute={"seconds_per_iteration": COMPUTE},
            links={"rate_bps": DOWN_RATE, "latency_s": DOWN_LATENCY},
        )
        raw["metrics"].update(particles="recorded", particle_runs=2)
        results[kind] = _run(raw)
    a, b = results["dsvgd"], results["parallel-dsvgd"]
    assert len(a.metrics) == 2 * 12 and (a.metrics["holder"] == 0).all()
    for column in ("run", "iteration", "holder", "ksd", "retrain_ksd"):
        pd.testing.assert_series_equal(a.metrics[column], b.metrics[column])
    pd.testing.assert_frame_equal(a.particles, b.particles)
    assert len(a.particles) > 0
    pd.testing.assert_series_equal(a.requests["removal_latency"], b.requests["removal_latency"])
    if variant["variant"] == "paper":
        for column in ("time", "bits"):
            pd.testing.assert_series_equal(a.metrics[column], b.metrics[column])


def _world(protocol: dict[str, Any]) -> Any:
    return build_world(parse_scenario(_raw({"kind": "parallel-dsvgd", **protocol})))


def _score(world: Any, node: int) -> Any:  # the node's exact likelihood score (α = 1)
    data = world.model.fixed_data
    return lambda t: logistic_log_likelihood(t, data.X[node], data.y[node])[1]


def _step(particles, history, clients, world):
    """One centralised SVGD step (cumulative AdaGrad) on the prior and the clients' data."""
    score = logistic_log_prior(particles)[1]
    for k in clients:
        score = score + _score(world, k)(particles)
    direction = svgd_direction(particles, score)
    return adagrad_step(particles, direction, history, AdaGradSettings(0.05, cumulative=True))


def test_the_sound_step_is_centralised_svgd_on_every_clients_score_and_forgets_exactly():
    world = _world({})
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(5))
    particles, history = protocol.particles.copy(), None
    for slot in (1, 2):
        round_ = protocol.on_token(slot % 4, slot)  # the scheduled agent is a label only
        particles, history = _step(particles, history, range(4), world)
        np.testing.assert_allclose(protocol.particles, particles, rtol=1e-13, atol=1e-13)
        assert {t.receiver for t in round_.transfers[:4]} == {0, 1, 2, 3}
    protocol.on_request(1, 3)  # client 1's score leaves the sum at the request's slot
    round_ = protocol.on_token(0, 3)
    particles, history = _step(particles, None, (0, 2, 3), world)  # AdaGrad restarted
    np.testing.assert_allclose(protocol.particles, particles, rtol=1e-13, atol=1e-13)
    assert protocol.removals() == {1: 3}
    assert [t.receiver for t in round_.transfers[:3]] == [0, 2, 3]
    assert [t.sender for t in round_.transfers[3:]] == [0, 2, 3]
    protocol.on_token(2, 4)
    particles, history = _step(particles, history, (0, 2, 3), world)
    np.testing.assert_allclose(protocol.particles, particles, rtol=1e-13, atol=1e-13)


def test_the_paper_slot_is_every_clients_visit_combined_by_the_product_rule():
    world = _world(PAPER)
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(6))
    settings = protocol.paper_settings
    q, start = protocol.particles.copy(), protocol.particles.copy()
    local = {}
    moved = []
    for k in range(4):
        q_k, local[k] = paper_visit(q, start, _score(world, k), settings)
        moved.append(q_k)
    protocol.on_token(3, 1)
    expected = combine_paper(q, moved, settings)
    np.testing.assert_array_equal(protocol.particles, expected)
    for k in range(4):
        np.testing.assert_array_equal(protocol.local[k], local[k])
    # the server starts from the displacements added up, then moves: not the start itself
    assert not np.array_equal(expected, displacement_start(q, moved))
    np.testing.assert_array_equal(combine_paper(q, moved[:1], settings), moved[0])
    np.testing.assert_array_equal(combine_paper(q, [], settings), q)
    # a request: Forget-SVGD for client 2 in the next slot, combined with the others' visits
    protocol.on_request(2, 2)
    q = protocol.particles.copy()
    moved = []
    for k in range(4):
        if k == 2:
            moved.append(paper_forget(q, local.pop(2), _score(world, 2), settings))
        else:
            q_k, local[k] = paper_visit(q, local[k], _score(world, k), settings)
            moved.append(q_k)
    round_ = protocol.on_token(0, 2)
    np.testing.assert_array_equal(protocol.particles, combine_paper(q, moved, settings))
    assert protocol.removals() == {2: 2} and 2 not in protocol.local
    assert len(round_.transfers) == 8  # client 2 uploads its forgetting update
    assert len(protocol.on_token(0, 3).transfers) == 6  # and takes no part afterwards


@pytest.mark.parametrize("variant", [{}, PAPER], ids=["sound", "paper"])
def test_a_slots_time_and_bits_are_the_links_exactly(variant):
    raw = _raw(
        {"kind": "parallel-dsvgd", **variant},
        compute={"seconds_per_iteration": COMPUTE},
        links={
            "rate_bps": DOWN_RATE, "latency_s": DOWN_LATENCY, "uplink_rate_bps": UP_RATE,
            "uplink_latency_s": UP_LATENCY,
        },
        unlearning=[{"node": 2, "at_iteration": 5}],
    )  # fmt: skip
    m = _run(raw).metrics
    # all downloads at once, then all uploads at once: compute + one download + one upload
    per_slot = COMPUTE + BITS / DOWN_RATE + DOWN_LATENCY + BITS / UP_RATE + UP_LATENCY
    assert per_slot == 3.875
    np.testing.assert_array_equal(m["time"].to_numpy(), per_slot * m["iteration"].to_numpy())
    # K downloads and K uploads of N·d·64 bits: 4 clients, 3 after client 2's removal (the
    # paper variant's client 2 still uploads its Forget-SVGD update in slot 5)
    slots = m["iteration"].to_numpy()
    four = 4 if variant else 3
    clients = np.where(slots < 5, 4, np.where(slots == 5, four, 3))
    sent = np.cumsum(clients.reshape(2, -1), axis=1).ravel() * 2 * BITS
    np.testing.assert_array_equal(m["bits"].to_numpy(), sent)


def test_the_round_is_every_download_then_every_upload_chained():
    world = _world({})
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(1))
    round_ = protocol.on_token(0, 1)
    assert round_.phase_sizes == (4, 4) and round_.chained and round_.compute_after == 4
    assert [(t.sender, t.receiver) for t in round_.transfers] == [
        *((SERVER, k) for k in range(4)),
        *((k, SERVER) for k in range(4)),
    ]
    assert round_.bits == 8 * BITS


@pytest.mark.parametrize("variant", [{}, PAPER], ids=["sound", "paper"])
def test_a_slot_taken_back_leaves_everything_as_before(variant):
    world = _world(variant)
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(2))
    protocol.on_token(0, 1)
    protocol.on_request(1, 2)
    before = protocol.particles.copy()
    saved = protocol.checkpoint(0)
    protocol.on_token(0, 2)
    assert protocol.removals() == {1: 2}
    protocol.take_back(saved, 2)
    np.testing.assert_array_equal(protocol.particles, before)
    assert protocol.removals() == {} and protocol.pending == {1}
    # over lossy links the runs go on, rounds taken back whole
    raw = _raw(
        {"kind": "parallel-dsvgd", **variant},
        links={"downlink_loss": 0.2, "downlink_timeout_s": 1.0, "downlink_max_retries": 0},
        unlearning=[{"node": 1, "at_iteration": 4}],
    )
    res = _run(raw)
    assert (res.runs["lost_messages"] > 0).any()
    assert res.requests["removal_latency"].ge(1).all()


@pytest.mark.parametrize(
    ("protocol", "extra", "words"),
    [
        ({"architecture": "walk"}, {}, "protocol.architecture"),
        ({"local_iterations": 2}, {}, "protocol.local_iterations"),
        ({"compression": {"entry_bits": 8}}, {}, "protocol.compression"),
        ({"fit_iterations": 3}, {}, "protocol.fit_iterations"),
        ({}, {"compute": {"seconds_per_iteration": [1.0, 2.0, 3.0, 4.0]}}, "compute.seconds_per"),
        ({}, {"failures": {"node_up_s": 10.0, "node_down_s": 1.0, "token_timeout_s": 1.0}},
         "failures"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(tmp_path, capsys, protocol, extra, words):
    raw = _raw({"kind": "parallel-dsvgd", **protocol}, **extra)
    err = validate_error(raw, tmp_path, capsys)
    assert words in err, err


def test_summary_expects_removal_at_the_requests_slot():
    from gossipsim.measurement.theory import theory_for

    requests = [{"node": 2, "at_iteration": 5}, {"node": 1, "at_iteration": 1}]
    world = build_world(parse_scenario(_raw({"kind": "parallel-dsvgd"}, unlearning=requests)))
    theory = theory_for(world)
    assert [e["expected"] for e in theory["removal_latency"]] == [1.0, 0.0]
    assert theory["next_visit_latency"] == {"2": 1.0, "1": 1.0}
    res = _run(_raw({"kind": "parallel-dsvgd"}, unlearning=requests))
    assert res.requests["removal_latency"].tolist() == [1, 0, 1, 0]
