"""003's client selection on the parameter server (scheduler kinds ``ksd`` and ``hip``).

The indicators a run publishes are recomputed here by another route (the per-set KSD of
:func:`~gossipsim.particles.stein.kernel_stein_discrepancy` on tilted scores assembled from the
model); the draws are checked against the published distribution within the multinomial standard
error; each slot's bits against the round's exact sizes; bad input gives one line, exit 2.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.particles.kde import kde_log_density_and_score
from gossipsim.particles.kernels import median_bandwidth, pairwise_squared_distances
from gossipsim.particles.selection import inner_products_with_average, selection_distribution
from gossipsim.particles.stein import kernel_stein_discrepancy
from gossipsim.scheduling import IndexedGraph, NodeView, Walker
from gossipsim.study.scenario import parse_scenario
from gossipsim.world.world import build_protocol, build_world
from tests.helpers import validate_error

NODES = 5


def _raw(indicator: str = "ksd", variant: str = "sound", **protocol):
    return {
        "scenario": {"name": "sel", "seed": 11, "runs": 2, "iterations": 12},
        "topology": {"kind": "complete", "nodes": NODES},
        "model": {"kind": "logistic-regression"},
        "data": {"points_per_node": 20, "partition": "dirichlet", "concentration": 1.0},
        "protocol": {
            "kind": "dsvgd",
            "architecture": "server",
            "particles": 8,
            "variant": variant,
            **protocol,
        },  # fmt: skip
        "scheduler": {"kind": indicator},
    }


def _protocol(raw):
    world = build_world(parse_scenario(raw))
    data = world.model.fixed_data
    protocol = build_protocol(world, data, np.random.default_rng(5), selects=True)
    return world, data, protocol


def _bandwidth(particles):
    return float(median_bandwidth(pairwise_squared_distances(particles, particles)))


@pytest.mark.parametrize("variant", ["sound", "paper"])
def test_the_published_ksd_distribution_is_each_clients_ksd_to_its_tilted_target(variant):
    extra = {"local_iterations": 3, "fit_iterations": 3} if variant == "paper" else {}
    world, data, protocol = _protocol(_raw("ksd", variant, **extra))
    model = world.model
    for slot in (1, 2, 3):  # after visits, the tilted targets differ from the prior's
        protocol.on_token(slot % NODES, slot)
    theta = protocol.particles
    temperature = float(model.temperature)
    prior = np.asarray(model.log_prior(theta)[1])
    ksd = []
    for k in range(NODES):
        likelihood = np.asarray(model.log_likelihood_score(data, k, theta, None)) / temperature
        if variant == "sound":
            own = protocol.own.get(k, np.zeros_like(theta))
            tilted = prior + protocol.state.aggregate - own + likelihood
        else:
            ps = protocol.paper_settings
            local = protocol.local.get(k, protocol.start)
            q = kde_log_density_and_score(theta, theta, ps.kde_bandwidth, floor=ps.kde_floor)[1]
            t = kde_log_density_and_score(theta, local, ps.kde_bandwidth, floor=ps.kde_floor)[1]
            tilted = q - t + likelihood
        ksd.append(float(kernel_stein_discrepancy(theta, tilted, _bandwidth(theta))))
    expected = np.asarray(ksd) / np.sum(ksd)
    np.testing.assert_allclose(protocol.view.weights, expected, rtol=1e-9)


@pytest.mark.parametrize("fixed", [None, 0.605])
def test_the_published_hip_distribution_is_eq_24_on_the_likelihood_scores(fixed):
    raw = _raw("hip")
    if fixed is not None:
        raw["scheduler"]["indicator_bandwidth"] = fixed
    world, data, protocol = _protocol(raw)
    model = world.model
    protocol.on_token(0, 1)
    theta = protocol.particles
    scores = np.stack([
        np.asarray(model.log_likelihood_score(data, k, theta, None)) / float(model.temperature)
        for k in range(NODES)
    ])  # fmt: skip
    hip = inner_products_with_average(theta, scores, fixed or _bandwidth(theta))
    expected = selection_distribution(hip).probabilities
    np.testing.assert_allclose(protocol.view.weights, expected, rtol=1e-9)


def test_draws_follow_the_published_distribution_within_the_standard_error():
    weights = np.array([0.5, 0.0, 0.2, 0.25, 0.05])
    view = NodeView(weights=weights.copy())
    graph = IndexedGraph.from_networkx(nx.complete_graph(5))
    walker = Walker(graph, "hip", np.random.default_rng(2), view)
    draws = 40_000
    counts = np.bincount([walker.next(0) for _ in range(draws)], minlength=5)
    assert counts[1] == 0  # a client of weight 0 is never drawn
    se = np.sqrt(weights * (1 - weights) / draws)
    z = (counts / draws - weights)[weights > 0] / se[weights > 0]
    assert np.all(np.abs(z) < 4.0), z
    view.weights[:] = [0.0, 0.0, 0.0, 1.0, 0.0]  # the sampler reads the view live
    assert {walker.next(0) for _ in range(50)} == {3}


def test_a_pending_request_is_served_at_the_next_iteration():
    world, data, protocol = _protocol(_raw("ksd"))
    protocol.on_token(2, 1)
    protocol.on_request(2, 2)
    protocol.on_token(0, 2)  # the weights made at its end select the requesting client
    np.testing.assert_array_equal(protocol.view.weights, np.eye(NODES)[2])
    protocol.on_token(2, 3)  # its removal
    assert protocol.view.weights[2] == 0.0 and 2 in protocol.forgotten


@pytest.mark.parametrize(("indicator", "variant"), [("ksd", "sound"), ("hip", "sound"),
                                                    ("ksd", "paper"), ("hip", "paper")])  # fmt: skip
def test_every_slot_costs_the_broadcast_the_reports_and_one_upload(indicator, variant, tmp_path):
    extra = {"local_iterations": 2, "fit_iterations": 2} if variant == "paper" else {}
    raw = _raw(indicator, variant, **extra)
    raw["links"] = {"rate_bps": 1e6, "latency_s": 0.01}
    res = gs.run(raw, out=tmp_path / "out", make_plots=None)
    world = build_world(res.study.variants[0].scenario)
    state = world.message_bits  # the server's state: N d numbers, 3 N d for the sound variant
    particles = state / 3 if variant == "sound" else state
    report = 64.0 if indicator == "ksd" else particles  # one number, or N d scores
    # the broadcast: the particles, and for the sound variant's KSD the scores' aggregate S; the
    # rest of the state (none for the paper variant) to the selected client alone
    broadcast = 2 * particles if (indicator, variant) == ("ksd", "sound") else particles
    per_slot = NODES * broadcast + NODES * report + (state - broadcast) + state
    metrics = res.metrics
    np.testing.assert_array_equal(metrics["bits"], metrics["iteration"] * per_slot)
    extra = (NODES - 1) * broadcast + NODES * report
    np.testing.assert_array_equal(metrics["indicator_bits"], metrics["iteration"] * extra)

    def delay(bits):
        return bits / 1e6 + 0.01

    rest = delay(state - broadcast) if state > broadcast else 0.0
    slot = delay(broadcast) + delay(report) + rest + delay(state)
    np.testing.assert_allclose(metrics["time"], metrics["iteration"] * slot, rtol=1e-12)
    assert (metrics["selection_entropy"] <= math.log(NODES) + 1e-12).all()
    assert (res.runs["selection_fallbacks"] == 0).all()
    visits = res.visits.set_index("node")["visits"]
    assert visits.sum() == 2 * 12  # the selected clients, every slot


def test_run_and_its_tables_are_reproducible_with_workers(tmp_path):
    one = gs.run(_raw("hip"), out=tmp_path / "one", make_plots=None)
    two = gs.run(_raw("hip"), out=tmp_path / "two", make_plots=None, workers=2)
    pd.testing.assert_frame_equal(one.metrics, two.metrics)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"protocol": {"kind": "gfvl", "architecture": "server"}},
         "needs a protocol whose clients compute the KSD indicator"),
        ({"protocol": {"kind": "dsvgd", "particles": 8}},
         'set protocol.architecture = "server"'),
        ({"topology": {"kind": "graphml", "path": "one.graphml"}}, "at least 2 are needed"),  # K = 1
        ({"links": {"uplink_loss": 0.1, "timeout_s": 1.0}}, "remove [links] loss"),
        ({"protocol": {"kind": "dsvgd", "architecture": "server", "particles": 8,
                       "compression": {"scheme": "shared", "budget": "5d", "a_max": 0.05}}},
         "runs uncompressed rounds"),
        ({"scheduler": {"kind": "ksd", "selection_floor": 1.5}}, "selection_floor"),
        ({"scheduler": {"kind": "hip-walk"}, "protocol": {"kind": "dsvgd", "variant": "paper"}},
         "use protocol.variant = \"sound\" or kind = \"ksd-walk\""),
        ({"scheduler": {"kind": "ksd-walk"},
          "protocol": {"kind": "dsvgd", "variant": "paper", "compression": {"entry_bits": 8, "a_max": 4.0}}},
         "runs an uncompressed token"),
        ({"scheduler": {"kind": "uniform", "indicator_bandwidth": 0.6}},
         "indicator_bandwidth: applies to client selection"),
    ],
)  # fmt: skip
def test_bad_selection_input_is_one_line(change, message, tmp_path, capsys):
    raw = _raw("ksd")
    if change.get("protocol", {}).get("kind") == "gfvl":
        raw["model"] = {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}}
        raw["data"] = {"points_per_node": 10, "theta": 0.5}
    raw.update(change)
    one = nx.Graph()
    one.add_node("a")
    nx.write_graphml(one, tmp_path / "one.graphml")
    err = validate_error(raw, tmp_path, capsys)
    assert message in err, err


# ------------------------------------------------------------------ the importance-weighted walk


def _walk_raw(kind: str = "ksd-walk"):
    raw = _raw(kind)
    raw["topology"] = {"kind": "ring", "nodes": NODES}
    raw["protocol"] = {"kind": "dsvgd", "particles": 8}
    raw["metrics"] = {"record_every": 1}
    return raw


@pytest.mark.parametrize("kind", ["ksd-walk", "hip-walk"])
def test_the_walks_bits_are_its_hops_and_every_holders_sharing(kind, tmp_path):
    res = gs.run(_walk_raw(kind), out=tmp_path / "out", make_plots=None)
    world = build_world(res.study.variants[0].scenario)
    token = world.message_bits
    degree = world.indexed.degree  # ring: 2 neighbours each, 2|E| = 2K numbers at slot 0
    for _, part in res.metrics.groupby("run"):
        holders = part["holder"].astype(int).to_numpy()
        side = 64.0 * degree[holders]
        side[0] += 64.0 * degree.sum()
        moves = np.r_[0, np.cumsum(holders[1:] != holders[:-1])]
        np.testing.assert_array_equal(part["bits"], np.cumsum(side) + moves * token)
        np.testing.assert_array_equal(part["indicator_bits"], np.cumsum(side))
        # the weights' mean age: slots since each node last held the token (slot 0: never)
        last = np.zeros(NODES)
        ages = []
        for slot, holder in enumerate(holders, start=1):
            last[holder] = slot
            ages.append(np.mean(slot - last))
        np.testing.assert_allclose(part["indicator_age"], ages, rtol=0, atol=1e-12)


def test_the_holder_publishes_its_own_ksd_at_the_particles_it_passes_on():
    world, data, protocol = _protocol(_walk_raw())
    model = world.model
    theta0 = protocol.particles
    prior0 = np.asarray(model.log_prior(theta0)[1])
    for k in range(NODES):  # slot 0: every node's at the initial particles, S = 0
        lik = np.asarray(model.log_likelihood_score(data, k, theta0, None))
        expected = kernel_stein_discrepancy(theta0, prior0 + lik, _bandwidth(theta0))
        assert protocol.view.weights[k] == pytest.approx(float(expected), rel=1e-9)
    before = protocol.view.weights.copy()
    message = protocol.on_token(2, 1)
    theta = protocol.particles
    tilted = (np.asarray(model.log_prior(theta)[1]) + protocol.state.aggregate - protocol.own[2]
              + np.asarray(model.log_likelihood_score(data, 2, theta, None)))  # fmt: skip
    expected = kernel_stein_discrepancy(theta, tilted, _bandwidth(theta))
    assert protocol.view.weights[2] == pytest.approx(float(expected), rel=1e-9)
    np.testing.assert_array_equal(np.delete(protocol.view.weights, 2), np.delete(before, 2))
    assert message.side_bits == 64.0 * (2 + 2 * NODES)  # its 2 neighbours, and slot 0's 2K


def test_a_pending_request_draws_the_walk_and_a_forgotten_node_repels_it():
    world, data, protocol = _protocol(_walk_raw())
    protocol.on_token(3, 1)
    protocol.on_request(3, 2)
    assert protocol.view.weights[3] == np.inf  # every neighbour passes it the token
    protocol.on_token(3, 2)  # its removal
    assert 3 in protocol.forgotten and protocol.view.weights[3] == 0.0
    protocol.on_request(4, 3)  # nothing to remove: forgotten at once
    assert protocol.view.weights[4] == 0.0


@pytest.mark.parametrize("variant", ["sound", "paper"])
def test_both_variants_publish_each_nodes_score_rms_for_a_schedule_of_ones_own(variant):
    extra = {"local_iterations": 2, "fit_iterations": 2} if variant == "paper" else {}
    raw = _raw("uniform", variant, **extra)
    world, data, protocol = _protocol(raw)
    protocol.on_token(1, 1)
    scores = protocol.node_view().scores
    assert scores[1] > 0.0 and np.count_nonzero(scores) == 1
    protocol.on_request(1, 2)
    protocol.on_token(1, 2)  # its removal: nothing of it left to read
    assert scores[1] == 0.0


def test_indicators_that_give_no_distribution_are_counted_not_a_crash():
    """A diverged score (NaN) or indicators all 0: the server draws uniformly among the clients
    taking part and counts it (runs.csv's selection_fallbacks)."""
    from gossipsim.protocols.selection import ClientSelection, SelectionSettings

    chosen = ClientSelection(SelectionSettings("ksd"), 4, 64.0, "median", 1.0)
    particles = np.random.default_rng(0).normal(size=(6, 2))
    part = np.array([True, True, False, True])
    chosen.refresh(particles, lambda k: np.full((6, 2), np.nan), part, set())
    np.testing.assert_array_equal(chosen.weights, [1 / 3, 1 / 3, 0.0, 1 / 3])
    assert chosen.fallbacks == 1
    hip = ClientSelection(SelectionSettings("hip"), 4, 64.0, "median", 1.0)
    # no client's data move q: every HIP is the kernel's own term, one positive number for all
    hip.refresh(particles, lambda k: np.zeros((6, 2)), part, set())
    assert hip.fallbacks == 0
    np.testing.assert_allclose(hip.weights, [1 / 3, 1 / 3, 0.0, 1 / 3], rtol=1e-12)


def test_a_floor_of_one_draws_uniformly_end_to_end_on_workers(tmp_path):
    """``[scheduler] selection_floor = 1`` mixes in the uniform distribution wholly: the entropy
    of every slot's distribution is ln K, in a run on two worker processes."""
    raw = _raw("hip")
    raw["scheduler"]["selection_floor"] = 1.0
    res = gs.run(raw, out=tmp_path / "out", make_plots=None, workers=2)
    np.testing.assert_allclose(res.metrics["selection_entropy"], math.log(NODES), rtol=1e-12)
    half = _raw("hip")
    half["scheduler"]["selection_floor"] = 0.5
    other = gs.run(half, out=tmp_path / "half", make_plots=None)
    entropy = other.metrics["selection_entropy"]
    assert (entropy < math.log(NODES)).any() and (entropy > 0).all()
