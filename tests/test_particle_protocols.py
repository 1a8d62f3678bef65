"""Particle protocols (issue 22, items 2-5): svgd and dsvgd step for step against the pure
functions, Forget-SVGD's removal slots, the ksd column against a direct KSD, the retrain baseline's
columns, message sizes, reproducibility across workers, and bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gossipsim.api import run
from gossipsim.engine.token import run_token
from gossipsim.logdensity.logistic import logistic_log_likelihood, logistic_log_prior
from gossipsim.measurement.measure import measure
from gossipsim.particles import AdaGradSettings, adagrad_step, svgd_direction
from gossipsim.particles.aggregated import aggregated_visit, forget, start_state
from gossipsim.particles.dsvgd import PaperSettings, paper_forget, paper_visit
from gossipsim.particles.kernels import median_bandwidth, pairwise_squared_distances
from gossipsim.particles.stein import kernel_stein_discrepancy
from gossipsim.scheduling import Walker
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_protocol, build_world, make_protocol
from tests.helpers import validate_error


def _raw(protocol: dict[str, Any], **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "scenario": {"name": "p", "seed": 3, "runs": 2, "iterations": 40},
        "topology": {"kind": "ring", "nodes": 4},
        "model": {"kind": "logistic-regression"},
        "data": {"dataset": "synthetic", "points_per_node": 15, "features": 3},
        "protocol": protocol,
        "metrics": {"record_every": 5},
    }
    raw.update(extra)
    return raw


def _world(raw: dict[str, Any]) -> Any:
    return build_world(parse_scenario(raw))


def _scores(world: Any, node: int):  # the node's exact likelihood score (α = 1)
    data = world.model.fixed_data
    return lambda t: logistic_log_likelihood(t, data.X[node], data.y[node])[1]


def _prior(t: np.ndarray) -> np.ndarray:
    return logistic_log_prior(t)[1]


def test_svgd_is_one_adagrad_step_a_slot_on_the_pooled_data():
    world = _world(_raw({"kind": "svgd", "particles": 6}))
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(1))
    particles = protocol.particles.copy()
    history = None
    settings = AdaGradSettings(step_size=0.05)
    for slot in range(1, 4):
        protocol.on_token(slot % 4, slot)
        score = _prior(particles) + sum(_scores(world, k)(particles) for k in range(4))
        particles, history = adagrad_step(
            particles, svgd_direction(particles, score), history, settings
        )
        np.testing.assert_allclose(protocol.particles, particles, rtol=1e-12, atol=1e-12)
    protocol.on_request(2, 4)  # node 2's data leave the score at once
    protocol.on_token(0, 4)
    score = _prior(particles) + sum(_scores(world, k)(particles) for k in (0, 1, 3))
    particles, history = adagrad_step(
        particles, svgd_direction(particles, score), history, settings
    )
    np.testing.assert_allclose(protocol.particles, particles, rtol=1e-12, atol=1e-12)
    assert protocol.removals() == {2: 3}


def test_sound_dsvgd_follows_the_aggregated_visits_and_forgets_at_the_next_visit():
    world = _world(_raw({"kind": "dsvgd", "particles": 5}))
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(2))
    state = start_state(protocol.particles.copy())
    own = {k: np.zeros_like(state.particles) for k in range(4)}
    settings = AdaGradSettings(step_size=0.05, cumulative=True)
    holders = [0, 1, 2, 1, 0, 3]
    for slot, k in enumerate(holders, start=1):
        protocol.on_token(k, slot)
        state, own[k] = aggregated_visit(state, own[k], _prior, _scores(world, k), settings)
        np.testing.assert_allclose(protocol.particles, state.particles, rtol=1e-12, atol=1e-12)
    protocol.on_request(1, 7)
    protocol.on_token(0, 7)  # node 1 has not held the token since: nothing removed yet
    state, own[0] = aggregated_visit(state, own[0], _prior, _scores(world, 0), settings)
    assert 1 not in protocol.removals()
    protocol.on_token(1, 8)  # its next visit: S loses g_1, then a step on the others' scores
    state = forget(state, own.pop(1))
    state, _ = aggregated_visit(state, np.zeros_like(state.particles), _prior, None, settings)
    np.testing.assert_allclose(protocol.particles, state.particles, rtol=1e-12, atol=1e-12)
    assert protocol.removals() == {1: 8}
    remaining = sum(own[k] for k in (0, 2, 3))
    np.testing.assert_allclose(protocol.state.aggregate, remaining, rtol=1e-12, atol=1e-9)
    protocol.on_request(2, 9)  # visited: removed at its next visit too
    protocol.on_token(2, 9)
    assert protocol.removals()[2] == 9


def test_a_node_forgotten_before_its_first_visit_has_nothing_to_remove():
    world = _world(_raw({"kind": "dsvgd", "particles": 4}))
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(2))
    protocol.on_token(0, 1)
    protocol.on_request(3, 2)
    assert protocol.removals() == {3: 1}
    before = protocol.state.aggregate.copy()
    protocol.on_token(3, 2)  # steps on the others' scores, contributes nothing
    np.testing.assert_allclose(protocol.state.aggregate, before, rtol=1e-12, atol=1e-12)


def test_paper_dsvgd_follows_the_papers_visits():
    protocol_settings = {
        "kind": "dsvgd", "variant": "paper", "particles": 4, "local_iterations": 3,
        "fit_iterations": 2,
    }  # fmt: skip
    world = _world(_raw(protocol_settings))
    protocol = build_protocol(world, world.model.fixed_data, np.random.default_rng(4))
    start = protocol.particles.copy()
    settings = PaperSettings(
        local_iterations=3, fit_iterations=2, adagrad=AdaGradSettings(step_size=0.05, fudge=1e-9)
    )
    particles, local = start, {}
    for slot, k in enumerate([0, 1, 0], start=1):
        protocol.on_token(k, slot)
        particles, local[k] = paper_visit(
            particles, local.get(k, start), _scores(world, k), settings
        )
        np.testing.assert_allclose(protocol.particles, particles, rtol=1e-10, atol=1e-10)
    protocol.on_request(0, 4)
    protocol.on_token(0, 4)
    particles = paper_forget(particles, local[0], _scores(world, 0), settings)
    np.testing.assert_allclose(protocol.particles, particles, rtol=1e-10, atol=1e-10)
    protocol.on_token(0, 5)  # a forgotten node passes the token on unchanged
    np.testing.assert_allclose(protocol.particles, particles, rtol=0, atol=0)


def test_ksd_column_is_the_kernel_stein_discrepancy_of_the_recorded_particles():
    raw = _raw({"kind": "dsvgd", "particles": 5}, unlearning=[{"node": 1, "at_iteration": 20}])
    world = _world(raw)
    data = world.model.fixed_data
    walker = Walker(world.indexed, "metropolis-hastings", np.random.default_rng(1))
    protocol = make_protocol(world, data, np.random.SeedSequence(2))
    record = run_token(
        walker=walker, protocol=protocol, start=0, iterations=40, requests=world.requests
    )
    out = measure(world, data, record, protocol.stats(), 0, 0)
    metrics = out.metrics
    assert "kl" not in metrics and "retrain_kl" not in metrics
    trace = record.traces["main"]
    slots = metrics["iteration"]
    removal = record.removals[1]
    assert set(trace.slots.tolist()) == {0, 1, 5, 10, 15, 20, 25, 30, 35, 40, removal}
    states = trace.states[trace.at(slots)]
    h = median_bandwidth(pairwise_squared_distances(states, states), "median")
    for forgotten, rows in ((frozenset(), slots < 20), (frozenset({1}), slots >= 20)):
        target = world.model.particle_target(data, forgotten)
        expected = kernel_stein_discrepancy(states[rows], target.score(states[rows]), h[rows])
        np.testing.assert_allclose(metrics["ksd"][rows], expected, rtol=1e-12)
    assert np.isnan(metrics["retrain_ksd"][slots < 20]).all()
    assert np.isnan(metrics["retrain_accuracy"][slots < 20]).all()
    assert np.isfinite(metrics["retrain_ksd"][slots >= 20]).all()
    assert np.isfinite(metrics["retrain_accuracy"][slots >= 20]).all()
    spread = np.sqrt(np.mean(np.sum((states - states.mean(axis=1, keepdims=True)) ** 2, -1), -1))
    np.testing.assert_allclose(metrics["particle_spread"], spread, rtol=1e-12)
    assert out.request_rows[0]["removal_latency"] == removal - 20 + 1


def test_the_target_score_is_the_gradient_of_prior_and_tempered_likelihoods():
    world = _world(_raw({"kind": "svgd", "particles": 3}, model={
        "kind": "logistic-regression", "temperature": 2.0}))  # fmt: skip
    model, data = world.model, world.model.fixed_data
    theta = np.random.default_rng(5).normal(size=(3, model.particle_dimension)) * 0.3
    target = model.particle_target(data, frozenset({2}))

    def log_density(t: np.ndarray) -> float:
        total = logistic_log_prior(t)[0]
        for k in (0, 1, 3):
            total = total + logistic_log_likelihood(t, data.X[k], data.y[k])[0] / 2.0
        return float(np.sum(total))

    numeric = np.zeros_like(theta)
    for index in np.ndindex(theta.shape):
        bump = np.zeros_like(theta)
        bump[index] = 1e-6
        numeric[index] = (log_density(theta + bump) - log_density(theta - bump)) / 2e-6
    np.testing.assert_allclose(target.score(theta), numeric, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    ("protocol", "variant", "entries"),
    [("svgd", None, 1), ("dsvgd", "sound", 3), ("dsvgd", "paper", 1)],
)
def test_a_message_carries_the_particles(protocol, variant, entries):
    settings = {"kind": protocol, "particles": 7, "bits_per_entry": 32}
    if variant:
        settings["variant"] = variant
    world = _world(_raw(settings))
    d = world.model.particle_dimension  # 3 features + log precision
    assert d == 4
    assert world.message_bits == 32 * entries * 7 * d


def test_same_tables_whatever_the_number_of_workers():
    raw = _raw({"kind": "dsvgd", "particles": 4}, unlearning=[{"node": 1, "at_iteration": 15}])
    one = run(raw, runs=3)
    two = run(raw, runs=3, workers=2)
    for name in ("metrics", "runs", "requests"):
        a, b = getattr(one, name), getattr(two, name)
        assert a.equals(b), name


@pytest.mark.parametrize(
    ("protocol", "model", "needle"),
    [
        ({"kind": "dsvgd", "particles": 1}, None, "protocol.particles"),
        ({"kind": "svgd", "kernel_bandwidth": 0}, None, "protocol.kernel_bandwidth"),
        ({"kind": "svgd", "kernel_bandwidth": "mean"}, None, "protocol.kernel_bandwidth"),
        ({"kind": "dsvgd", "local_iterations": 0}, None, "protocol.local_iterations"),
        ({"kind": "dsvgd", "fit_iterations": 10}, None, "protocol.fit_iterations"),
        (
            {"kind": "dsvgd", "variant": "paper", "kde_bandwidth": -1},
            None,
            "protocol.kde_bandwidth",
        ),
        ({"kind": "dsvgd", "variant": "exact"}, None, "protocol.variant"),
        ({"kind": "dsvgd", "batch_size": 0}, None, "protocol.batch_size"),
        ({"kind": "dsvgd"}, {"kind": "beta-bernoulli"}, "protocol.kind"),
        (
            {"kind": "svgd"},
            {"kind": "logistic-regression", "precision_rate": 0},
            "model.precision_rate",
        ),
    ],
)
def test_bad_particle_settings_are_one_line(tmp_path, capsys, protocol, model, needle):
    raw = _raw(protocol)
    if model is not None:
        raw["model"] = model
        if model["kind"] == "beta-bernoulli":
            raw["data"] = {"points_per_node": 10, "theta": 0.5}
    line = validate_error(raw, tmp_path, capsys)
    assert needle in line


@pytest.mark.parametrize(("protocol", "zero"), [("svgd", True), ("dsvgd", False)])
def test_theory_knows_when_a_protocol_removes(protocol, zero):
    from gossipsim.measurement.theory import theory_for

    raw = _raw({"kind": protocol}, unlearning=[{"node": 1, "at_iteration": 20}])
    entry = theory_for(_world(raw))["removal_latency"][0]
    assert (entry["expected"] == 0.0) is zero
    assert ("drops the node's data at the request" in entry["method"]) is zero


@pytest.fixture
def _forget_least_scored():
    """The scheduler named by import path is registered under it on first use: removed after."""
    yield
    from gossipsim.scheduling.base import unregister

    unregister("tests.plugins:LeastScored")


def test_a_scheduler_reads_the_protocols_node_view_on_workers_too(_forget_least_scored):
    """The runner builds the walker with the protocol's NodeView: a server schedule of one's own
    (tests.plugins:LeastScored) picks the agent whose last likelihood score is smallest, so every
    agent is visited once, in index order, before any twice (uniform draws would not be)."""
    raw = _raw(
        {"kind": "dsvgd", "particles": 4, "architecture": "server"},
        scheduler={"kind": "tests.plugins:LeastScored", "start": 0},
        metrics={"record_every": 1},
    )
    one = run(raw, runs=2)
    for _, rows in one.metrics.groupby("run"):
        assert rows["holder"].tolist()[:4] == [0, 1, 2, 3]
    world = _world(raw)
    protocol = make_protocol(world, world.model.fixed_data, np.random.SeedSequence(1))
    walker = Walker(world.indexed, raw["scheduler"]["kind"], np.random.default_rng(1),
                    protocol.node_view())  # fmt: skip
    record = run_token(walker=walker, protocol=protocol, start=0, iterations=12)
    assert record.holders[:4].tolist() == [0, 1, 2, 3]
    scores = protocol.node_view().scores
    assert scores.shape == (4,) and (scores > 0).all()
    two = run(raw, runs=2, workers=2)
    assert one.metrics.equals(two.metrics) and one.runs.equals(two.runs)
