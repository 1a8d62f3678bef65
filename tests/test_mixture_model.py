"""``[model] kind = "gaussian-mixture"`` (issue 22, item 7): the exact posterior against the
pointwise product of prior and factors and against a grid, its draws against its moments, the
target's score against finite differences, the ``mmd`` column against its expectation in closed
form, the placement keys and the one-line errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

import gossipsim as gs
from gossipsim.models import particlemodel
from gossipsim.models.mixture import GaussianMixtureModel
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_world
from tests.helpers import base_scenario, validate_error

PROTOCOL = {"kind": "tests.plugins:ValidateParticles"}  # validation only: builds no protocol


def _raw(model: dict[str, Any], data: dict[str, Any], nodes: int = 4, seed: int = 7) -> dict:
    raw = base_scenario(model={"kind": "gaussian-mixture", **model}, data=data, protocol=PROTOCOL)
    raw["topology"] = {"kind": "ring", "nodes": nodes}
    raw["scenario"]["seed"] = seed
    return raw


def _model(model: dict[str, Any] | None = None, data: dict[str, Any] | None = None,
           nodes: int = 4, seed: int = 7) -> Any:  # fmt: skip
    return build_world(parse_scenario(_raw(model or {}, data or {}, nodes, seed))).model


def _log_factor(factor: Any, points: np.ndarray) -> np.ndarray:
    """log Σ_c w_c N(θ; μ_c, Σ_c) written out with SciPy."""
    terms = [
        w + multivariate_normal.logpdf(points, m, c)
        for w, m, c in zip(factor.log_weights, factor.means, factor.covariances, strict=True)
    ]
    return logsumexp(np.stack(terms), axis=0)


def _log_unnormalised(model: Any, points: np.ndarray, kept: list[int]) -> np.ndarray:
    """log p0(θ) + Σ_{k kept} log f_k(θ), from the prior's settings and the factors."""
    prior = model.spec.model.prior
    value = multivariate_normal.logpdf(
        points, np.full(model.d, prior["mean"]), prior["variance"] * np.eye(model.d)
    )
    return value + sum(_log_factor(model.fixed_data.factors[k], points) for k in kept)


def _moments(mixture: Any) -> tuple[np.ndarray, np.ndarray]:
    weights = np.exp(mixture.log_weights - logsumexp(mixture.log_weights))
    mean = weights @ mixture.means
    second = np.einsum(
        "c,cij->ij", weights, mixture.covariances + np.einsum("ci,cj->cij", *(mixture.means,) * 2)
    )
    return mean, second - np.outer(mean, mean)


# ----------------------------------------------------------------------- the exact posterior


def test_the_posterior_is_prior_times_factors_and_integrates_to_one():
    model = _model(data={"jitter": 0.8})
    data = model.fixed_data
    for forgotten in (frozenset(), frozenset({2})):
        posterior = model.posterior(data, forgotten)
        assert posterior.log_weights.size == 2 ** (4 - len(forgotten))
        points = np.random.default_rng(1).normal(size=(50, 2)) * 2.5
        kept = [k for k in range(4) if k not in forgotten]
        gap = posterior.log_density(points) - _log_unnormalised(model, points, kept)
        assert np.ptp(gap) < 1e-9  # the same density up to its normalising constant
        # a Riemann sum of a smooth density that vanishes at the edges: exact to far below 1e-6
        axis = np.arange(-8.0, 8.0, 0.08) + 0.04
        grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1)
        mass = np.exp(posterior.log_density(grid)).sum() * 0.08**2
        assert mass == pytest.approx(1.0, abs=1e-6)


def test_exact_draws_have_the_posterior_s_moments():
    """40,000 draws of the target's sampler: mean and covariance entries within 4 SE."""
    model = _model(data={"jitter": 0.8})
    target = model.target(model.fixed_data, frozenset({0}))
    assert target.has_samples
    draws = target.sample(np.random.default_rng(2), 40_000)
    mean, cov = _moments(model.posterior(model.fixed_data, frozenset({0})))
    se = draws.std(axis=0, ddof=1) / math.sqrt(40_000)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * se)
    products = np.einsum("ni,nj->nij", draws - mean, draws - mean)
    se_cov = products.std(axis=0, ddof=1) / math.sqrt(40_000)
    assert np.all(np.abs(products.mean(axis=0) - cov) < 4 * se_cov)
    # forgetting a node changes the posterior: the check can tell them apart
    other, _ = _moments(model.posterior(model.fixed_data, frozenset()))
    assert np.any(np.abs(other - mean) > 4 * se)


def test_the_target_score_is_the_gradient_of_prior_and_factors():
    model = _model({"prior": {"mean": 0.5, "variance": 3.0}}, {"jitter": 0.8})
    points = np.random.default_rng(3).normal(size=(2, 5, 2)) * 2.0  # a batch of particle sets
    score = model.particle_target(model.fixed_data, frozenset({1})).score(points)
    step = 1e-6
    for i in range(2):
        bump = np.zeros(2)
        bump[i] = step
        numeric = (
            _log_unnormalised(model, points + bump, [0, 2, 3])
            - _log_unnormalised(model, points - bump, [0, 2, 3])
        ) / (2 * step)
        np.testing.assert_allclose(score[..., i], numeric, rtol=1e-6, atol=1e-7)
    value, gradient = model.log_likelihood(model.fixed_data, 3, points[0])
    np.testing.assert_allclose(value, _log_factor(model.fixed_data.factors[3], points[0]))
    assert gradient.shape == (5, 2)
    assert model.log_likelihood(model.fixed_data, 3, points[0], np.array([0]))[0] == pytest.approx(
        value
    )
    with pytest.raises(ValueError, match="one row"):
        model.log_likelihood(model.fixed_data, 3, points[0], np.array([0, 0]))


# -------------------------------------------------------------------------------- the MMD


def _mean_kernel(offset: np.ndarray, covariance: np.ndarray, h: float) -> float:
    """E exp(−‖z‖²/h) for z ~ N(offset, covariance)."""
    d = offset.size
    shrink = np.linalg.det(np.eye(d) + 2.0 * covariance / h) ** -0.5
    return float(
        shrink * np.exp(-0.5 * offset @ np.linalg.solve(covariance + h / 2 * np.eye(d), offset))
    )


def test_mmd_averages_to_its_closed_form_and_sees_a_shift():
    """For N exact draws x against the fixed draws y: E_x MMD²_V = 1/N + (1 − 1/N)·E κ(x, x')
    + mean κ(y, y') − 2·mean_j E κ(x, y_j), each expectation in closed form over the mixture's
    components; 300 sets of 40 draws average to it within 4 SE, and a set shifted by one unit in
    each coordinate is far away."""
    model = _model(nodes=3, data={"jitter": 0.8, "mmd_samples": 200})
    data = model.fixed_data
    posterior = model.posterior(data, frozenset())
    draws, h = model.exact_draws(data, frozenset())
    assert draws.shape == (200, 2)
    weights = np.exp(posterior.log_weights)
    means, covs = posterior.means, posterior.covariances
    pairs = sum(
        weights[a] * weights[b] * _mean_kernel(means[a] - means[b], covs[a] + covs[b], h)
        for a in range(weights.size)
        for b in range(weights.size)
    )
    to_draws = np.mean(
        [sum(w * _mean_kernel(m - y, c, h) for w, m, c in zip(weights, means, covs, strict=True))
         for y in draws]
    )  # fmt: skip
    within = np.exp(-((draws[:, None] - draws[None]) ** 2).sum(-1) / h).mean()

    def expected(n: int) -> float:
        return 1 / n + (1 - 1 / n) * pairs + within - 2 * to_draws

    sets = posterior.sample(np.random.default_rng(4), 300 * 40).reshape(300, 40, 2)
    values = model.mmd(data, sets, frozenset())
    se = values.std(ddof=1) / math.sqrt(300)
    assert abs(values.mean() - expected(40)) < 4 * se
    shifted = model.mmd(data, sets + 1.0, frozenset())
    assert shifted.mean() > 10 * values.mean()
    # the columns: with requests, the MMD to the posterior without the requesting nodes too
    out = model.evaluate_particles(data, sets[:3], frozenset({1}))
    assert tuple(out) == ("mmd", "mmd_unlearned", "particle_spread")
    np.testing.assert_array_equal(out["mmd"], values[:3])
    np.testing.assert_array_equal(out["mmd_unlearned"], model.mmd(data, sets[:3], frozenset({1})))


def test_mmd_is_reproducible_and_evaluated_a_few_sets_at_a_time(monkeypatch):
    one, two = _model(seed=11), _model(seed=11)
    sets = one.sample_prior(np.random.default_rng(5), 60).reshape(3, 20, 2)
    a = one.evaluate_particles(one.fixed_data, sets, frozenset({0}))
    b = two.evaluate_particles(two.fixed_data, sets, frozenset({0}))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])  # the same draws in a new process
    np.testing.assert_array_equal(
        one.exact_draws(one.fixed_data, frozenset())[0],
        two.exact_draws(two.fixed_data, frozenset())[0],
    )
    other = _model(seed=12)
    assert not np.array_equal(
        one.exact_draws(one.fixed_data, frozenset())[0],
        other.exact_draws(other.fixed_data, frozenset())[0],
    )
    monkeypatch.setattr(particlemodel, "CHUNK_VALUES", 1)
    c = one.evaluate_particles(one.fixed_data, sets, frozenset({0}))
    single = one.evaluate_particles(one.fixed_data, sets[1], frozenset({0}))  # one set (N, d)
    for name in a:
        np.testing.assert_allclose(c[name], a[name], rtol=1e-12)
        assert np.shape(single[name]) == () and single[name] == pytest.approx(a[name][1])


# ------------------------------------------------------------------------------- placement


def test_factors_are_placed_about_the_prior_mean_or_where_given():
    model = _model({"prior": {"mean": 1.0}}, {"components": 3, "radius": 2.5, "jitter": 0.0})
    centres = model.fixed_data.factors[0].means
    np.testing.assert_allclose(np.linalg.norm(centres - 1.0, axis=1), 2.5)
    for factor in model.fixed_data.factors:
        np.testing.assert_array_equal(factor.means, centres)  # no jitter: every node alike
    given = _model(
        data={"means": [[[-2, 0], [2, 0]], [[0, 1]], [[1, 1], [2, 2]], [[3, 0], [0, 3]]],
              "weights": [[1, 3], [2], [1, 1], [5, 1]], "variance": [0.5, 1, 2, 1]}
    )  # fmt: skip
    factors = given.fixed_data.factors
    np.testing.assert_array_equal(factors[1].means, [[0.0, 1.0]])
    np.testing.assert_allclose(np.exp(factors[0].log_weights), [1.0, 3.0])
    np.testing.assert_array_equal(factors[2].covariances, [2 * np.eye(2)] * 2)
    assert given.posterior(given.fixed_data, frozenset()).log_weights.size == 8
    shared = _model({"dimension": 3}, {"means": [[0, 0, 1], [0, 0, -1]]}, nodes=2)
    assert shared.particle_dimension == 3 == shared.message_entries
    np.testing.assert_array_equal(shared.fixed_data.factors[1].means, [[0, 0, 1], [0, 0, -1]])
    line = _model({"dimension": 1}, {"components": 3, "jitter": 0.0}, nodes=2)
    np.testing.assert_allclose(line.fixed_data.factors[0].means[:, 0], [-2.0, 0.0, 2.0])
    sizes = GaussianMixtureModel.sizes(parse_scenario(_raw({}, {})).model_spec, 4)
    assert (sizes.state_entries, sizes.message_entries) == (2, 2)


@pytest.mark.parametrize(
    ("model", "data", "nodes", "key", "words"),
    [
        ({"temperature": 2.0}, {}, 4, "model.temperature", "temperature = 1"),
        ({}, {"means": [[0, 1, 2]]}, 4, "data.means", "points of 2 numbers"),
        ({}, {"means": [[[0, 1]], [[1, 1]]]}, 4, "data.means", "one entry per node (4)"),
        ({}, {"means": [[[0, 1]], [[1, 1], [2]], [[0, 0]], [[1, 0]]]}, 4, "data.means[1]",
         "points of 2 numbers"),
        ({}, {"means": [[0, 1]], "radius": 1.0}, 4, "data.radius", "remove one"),
        ({}, {"means": [[0, "x"]]}, 4, "data.means[0][1]", "must be a number"),
        ({}, {"weights": [1, 2, 3]}, 4, "data.weights", "2 components but 3 weights"),
        ({}, {"weights": [1, 0]}, 4, "data.weights[1]", "> 0"),
        ({}, {"variance": [1, 1]}, 4, "data.variance", "one entry per node (4)"),
        ({}, {"variance": -1.0}, 4, "data.variance", ">= 1e-100"),
        # issue 30: sizes and ranges that failed only in the runs (or in a traceback)
        ({"dimension": 10_000_000}, {}, 4, "model.dimension", "<= 2047 (got 10000000)"),
        ({"dimension": 100_000}, {"components": 1}, 4, "model.dimension", "<= 2047"),
        ({"dimension": 20_000}, {}, 4, "model.dimension", "d × d covariance"),
        ({}, {"radius": 1e300}, 4, "data.radius", "<= 1e+100 (got 1e+300)"),
        ({}, {"jitter": 1e300}, 4, "data.jitter", "<= 1e+100"),
        ({}, {"variance": 1e-300}, 4, "data.variance", ">= 1e-100"),
        ({}, {"means": [[1e200, 0.0]]}, 4, "data.means[0][0]", "<= 1e+100"),
        ({}, {"means": 3}, 4, "data.means", "a list (of lists) of numbers"),
        ({}, {}, 25, "data.components", "2^25.0 of them"),
        ({"dimension": 0}, {}, 4, "model.dimension", ">= 1"),
        ({"prior": {"variance": 1e300}}, {}, 4, "model.prior.variance", "1e+100"),
        ({}, {"mmd_samples": 1}, 4, "data.mmd_samples", ">= 2"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_line_with_exit_2(tmp_path, capsys, model, data, nodes, key, words):
    line = validate_error(_raw(model, data, nodes), tmp_path, capsys)
    assert f"{key}:" in line, line
    assert words in line, line


def test_the_extremes_allowed_run(tmp_path):
    """The largest radius, jitter and means and the smallest and largest variance allowed (1e100,
    1e-100) run: every run succeeds (radius or jitter 1e300 were accepted and failed every run)."""
    for data in (
        {"radius": 1e100, "jitter": 1e100},
        {"variance": 1e-100},
        {"variance": 1e100},
        {"means": [[-1e100, 1e100], [0.0, 1.0]]},
    ):
        raw = _raw({}, data)
        raw["protocol"] = {"kind": "dsvgd", "particles": 10}
        raw["scenario"].update(runs=2, iterations=20)
        res = gs.run(raw)
        assert len(res.runs) == 2 and not len(res.failures), (data, res.failures)


def test_the_posterior_size_is_refused_before_the_prior_is_built(monkeypatch):
    """A posterior of too many components is refused before any array that grows with d is
    made (a d × d identity of d = 20,000 allocated 3.2 GB before the refusal)."""
    made = []
    real_eye = np.eye
    monkeypatch.setattr(np, "eye", lambda n, *a, **k: made.append(n) or real_eye(n, *a, **k))
    with pytest.raises(gs.ConfigError, match="data.components: the exact posterior"):
        _model({"dimension": 300}, {"components": 2}, nodes=8)
    assert made == []
