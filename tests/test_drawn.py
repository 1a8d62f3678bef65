"""Data-generator parameters drawn from distributions (``mean = { gamma = [2, 0.5] }``) for every
model with per-node generator parameters: the draws against closed-form moments, the documented
order of the data stream replayed by hand, per-run redraws, and one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.core.streams import DATA_TAG
from gossipsim.errors import ConfigError
from gossipsim.families.drawn import parse_drawn
from tests.helpers import base_scenario, to_toml

DRAWS = 20_000


@pytest.mark.parametrize(
    ("table", "domain", "mean", "variance"),
    [
        ({"beta": [2, 6]}, "probability", 2 / 8, 2 * 6 / (8**2 * 9)),
        ({"gamma": [2, 0.5]}, "poisson-rate", 4.0, 8.0),
        (
            {"lognormal": [0.5, 0.4]},
            "positive",
            math.exp(0.58),
            (math.exp(0.16) - 1) * math.exp(1.16),
        ),
        ({"normal": [-1.0, 3.0]}, "real", -1.0, 9.0),
        ({"uniform": [0.2, 0.8]}, "unit-mean", 0.5, 0.36 / 12),
    ],
)
def test_draws_have_the_distributions_moments(table, domain, mean, variance):
    """Sample mean within 4 standard errors of the closed-form mean (fixed seed)."""
    drawn = parse_drawn(table, domain, "data.x")
    rng = np.random.default_rng(11)
    x = np.array([drawn.draw(rng) for _ in range(DRAWS)])
    assert abs(x.mean() - mean) < 4 * math.sqrt(variance / DRAWS)


def test_dirichlet_draws_probabilities_with_the_right_mean():
    drawn = parse_drawn({"dirichlet": [1, 2, 5]}, "simplex", "data.probs")
    rng = np.random.default_rng(3)
    x = np.array([drawn.draw(rng) for _ in range(DRAWS)])
    np.testing.assert_allclose(x.sum(axis=1), 1.0)
    alpha = np.array([1.0, 2.0, 5.0])
    mean = alpha / alpha.sum()
    se = np.sqrt(mean * (1 - mean) / (alpha.sum() + 1) / DRAWS)
    assert np.all(np.abs(x.mean(axis=0) - mean) < 4 * se)


def _world(model: dict, data: dict, nodes: int = 4, seed: int = 5) -> gs.World:
    raw = base_scenario(
        scenario={"runs": 1, "iterations": 10, "seed": seed},
        topology={"kind": "ring", "nodes": nodes},
        model=model,
        data=data,
    )
    return gs.build_world(gs.parse_study(raw).variants[0].scenario)


def test_gamma_poisson_replays_the_documented_stream():
    """Each node in order: its λ from Gamma(2, rate 0.5), then its counts, from the data stream."""
    world = _world(
        {"kind": "gamma-poisson", "prior": {"shape": 1, "rate": 1}},
        {"points_per_node": 30, "mean": {"gamma": [2, 0.5]}},
    )
    rng = np.random.default_rng(np.random.SeedSequence([5, DATA_TAG]))
    expected = []
    for _ in range(4):
        lam = rng.gamma(2.0, 1 / 0.5)
        counts = rng.poisson(lam, size=30)
        expected.append([counts.sum(), -30.0])
    np.testing.assert_array_equal(world.model.fixed_data, np.array(expected, dtype=float))


def test_a_per_node_list_mixes_numbers_and_distributions():
    world = _world(
        {"kind": "beta-bernoulli", "prior": {"a": 1, "b": 1}},
        {"points_per_node": 50, "theta": [0.0, {"beta": [3, 1]}, 1.0, {"uniform": [0.4, 0.6]}]},
    )
    rng = np.random.default_rng(np.random.SeedSequence([5, DATA_TAG]))
    expected = []
    for theta in (0.0, "beta", 1.0, "uniform"):
        if theta == "beta":
            theta = rng.beta(3.0, 1.0)
        elif theta == "uniform":
            theta = rng.uniform(0.4, 0.6)
        ones = int((rng.random(50) < theta).sum())
        expected.append([ones, 50 - ones])
    np.testing.assert_array_equal(world.model.fixed_data, np.array(expected, dtype=float))


def test_per_run_data_redraw_the_parameters():
    """draw = "per-run": each data set draws new λ_k; "once": one data set for the study."""
    data = {"points_per_node": 200, "mean": {"gamma": [2, 0.5]}, "draw": "per-run"}
    world = _world({"kind": "gamma-poisson"}, data)
    assert world.model.fixed_data is None
    first = world.model.draw_data(np.random.default_rng(1))
    second = world.model.draw_data(np.random.default_rng(2))
    # with 200 counts per node the node means estimate λ_k to about ±0.2: two draws of λ differ
    assert np.abs(first[:, 0] / 200 - second[:, 0] / 200).max() > 1.0


def test_normal_normal_and_dirichlet_categorical_take_distributions():
    """Both replayed by hand: per node, its parameters in order (mean, then sigma), then its data."""
    world = _world(
        {"kind": "normal-normal", "sigma": 1.0},
        {"points_per_node": 10, "mean": {"normal": [0, 5]}, "sigma": {"gamma": [4, 4]}},
    )
    assert np.all(np.isfinite(world.model.fixed_data))
    rng = np.random.default_rng(np.random.SeedSequence([5, DATA_TAG]))
    expected = []
    for _ in range(4):
        mean, sigma = rng.normal(0.0, 5.0), rng.gamma(4.0, 1 / 4.0)
        expected.append(world.model.impl.statistics(rng.normal(mean, sigma, size=10)))
    np.testing.assert_array_equal(world.model.fixed_data, np.array(expected))
    world = _world(
        {"kind": "dirichlet-categorical", "prior": {"alpha": [1, 1, 1]}},
        {"points_per_node": 10, "probs": {"dirichlet": [1, 1, 1]}},
    )
    assert world.model.fixed_data.sum() == pytest.approx(40.0)
    rng = np.random.default_rng(np.random.SeedSequence([5, DATA_TAG]))
    counts = []
    for _ in range(4):
        probs = rng.dirichlet(np.ones(3))
        counts.append(np.bincount(rng.choice(3, size=10, p=probs), minlength=3))
    np.testing.assert_array_equal(world.model.fixed_data, np.array(counts, dtype=float))


def test_beta_exponential_takes_a_uniform_mean():
    world = _world(
        {"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
        {"points_per_node": 20, "theta": {"uniform": [0.2, 0.9]}},
    )
    rng = np.random.default_rng(np.random.SeedSequence([5, DATA_TAG]))
    first_mean = rng.uniform(0.2, 0.9)
    np.testing.assert_array_equal(
        world.model.fixed_data.observations[0], rng.exponential(first_mean, size=20)
    )


@pytest.mark.parametrize(
    ("model", "data", "key", "words"),
    [
        ({"kind": "beta-bernoulli"}, {"theta": {"gamma": [1, 1]}}, "data.theta", "cannot be drawn from 'gamma' here; allowed: { beta"),
        ({"kind": "gamma-poisson"}, {"mean": {"gamma": [0, 1]}}, "data.mean", "needs parameters > 0"),
        ({"kind": "beta-bernoulli"}, {"theta": {"uniform": [0.5, 2]}}, "data.theta", "high <= 1"),
        ({"kind": "beta-bernoulli"}, {"theta": {"beta": [1, 1], "uniform": [0, 1]}}, "data.theta", "one distribution"),
        ({"kind": "beta-bernoulli"}, {"theta": {"beta": [1]}}, "data.theta", "takes 2 numbers"),
        ({"kind": "beta-bernoulli"}, {"theta": [0.5, {"beta": ["a", 1]}, 0.5, 0.5]}, "data.theta[1]", "finite numbers"),
        ({"kind": "gamma-poisson"}, {"rate": 3}, "data.rate", "is now data.mean"),
        ({"kind": "gamma-poisson"}, {"mean": {"lognormal": [50, 1]}}, "data.mean", "above the largest allowed value"),
        ({"kind": "dirichlet-categorical", "prior": {"alpha": [1, 1, 1]}}, {"probs": {"dirichlet": [1, 1]}}, "data.probs", "one concentration per category (3), got 2"),
        ({"kind": "beta-exponential", "prior": {"a": 2, "b": 2}}, {"theta": {"normal": [0.5, 1]}}, "data.theta", "allowed: { beta"),
        ({"kind": "gamma-poisson", "prior": {"shape": {"gamma": [1, 1]}}}, {}, "model.prior.shape", "must be a number"),
    ],
)  # fmt: skip
def test_bad_distributions_are_one_line_errors(model, data, key, words):
    with pytest.raises(ConfigError) as err:
        _world(model, {"points_per_node": 5, **data})
    assert err.value.key == key and words in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_validates_a_drawn_parameter(tmp_path, capsys):
    from gossipsim.cli.parser import main

    raw = base_scenario(
        scenario={"runs": 2, "iterations": 20},
        model={"kind": "gamma-poisson", "prior": {"shape": 1, "rate": 1}},
        data={"points_per_node": 10, "mean": {"gamma": [2, 0.5]}},
    )
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["validate", str(path)]) == 0
    raw["data"]["mean"] = {"gamma": [2, -1]}
    path.write_text(to_toml(raw))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "data.mean" in err
