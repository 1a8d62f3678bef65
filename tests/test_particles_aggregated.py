"""Aggregated-score DSVGD (prototype): exact against centralised SVGD where the scores are fresh."""

from __future__ import annotations

import numpy as np

from gossipsim.particles import AdaGradSettings, adagrad_step, run_svgd, svgd_direction
from gossipsim.particles.aggregated import aggregated_visit, forget, start_state

MEANS = np.array([[-1.0, 0.5], [2.0, 0.0], [0.5, -1.5]])
SETTINGS = AdaGradSettings(step_size=0.05)


def prior(theta):
    return -theta / 4.0


def local(k):
    return lambda theta: -(theta - MEANS[k])


def test_one_node_is_centralised_svgd_step_for_step() -> None:
    start = np.random.default_rng(70).normal(size=(8, 2)) * 2
    state, own = start_state(start), np.zeros_like(start)
    for _ in range(60):
        state, own = aggregated_visit(state, own, prior, local(0), SETTINGS)
    expected = run_svgd(start, lambda t: prior(t) + local(0)(t), 60, SETTINGS)
    np.testing.assert_allclose(state.particles, expected, rtol=1e-12, atol=1e-12)


def test_after_forgetting_the_other_node_the_steps_are_centralised_without_it() -> None:
    start = np.random.default_rng(71).normal(size=(8, 2))
    state = start_state(start)
    own = [np.zeros_like(start), np.zeros_like(start)]
    for i in range(40):
        k = i % 2
        state, own[k] = aggregated_visit(state, own[k], prior, local(k), SETTINGS)
    state = forget(state, own[1])
    # node 0's next visit sees S − g_0 = 0: exactly the centralised step on its data alone,
    # continuing the same AdaGrad history
    particles, history = state.particles, state.history
    for _ in range(20):
        state, own[0] = aggregated_visit(state, own[0], prior, local(0), SETTINGS)
        direction = svgd_direction(particles, prior(particles) + local(0)(particles))
        particles, history = adagrad_step(particles, direction, history, SETTINGS)
    np.testing.assert_allclose(state.particles, particles, rtol=1e-12, atol=1e-12)


def test_three_nodes_settle_where_centralised_svgd_does() -> None:
    """Stale scores vanish as the particles settle: after 3,000 visits round robin the particle
    mean and spread are those of 3,000 centralised steps. Both keep jittering at the scale of
    AdaGrad's step (0.05); measured: means 0.011 apart, spreads 2.5 % apart."""
    start = np.random.default_rng(72).normal(size=(10, 2)) * 3
    state, own = start_state(start), [np.zeros_like(start) for _ in range(3)]
    for i in range(3000):
        k = i % 3
        state, own[k] = aggregated_visit(state, own[k], prior, local(k), SETTINGS)
    central = run_svgd(
        start, lambda t: prior(t) + sum(local(k)(t) for k in range(3)), 3000, SETTINGS
    )
    np.testing.assert_allclose(state.particles.mean(0), central.mean(0), atol=0.05)
    np.testing.assert_allclose(state.particles.std(0), central.std(0), rtol=0.1)
