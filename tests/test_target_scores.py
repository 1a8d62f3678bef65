"""Scores and exact draws of the exponential families and of the model targets (issue 22, item 1):
scores against finite differences of scipy.stats' log densities, draws against the families'
moments, and the kernelized Stein discrepancy of a Gaussian target's own draws against its closed
form."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

import gossipsim as gs
from gossipsim.families import (
    Beta,
    Dirichlet,
    ExponentialFamily,
    Gamma,
    GaussianDiagonal,
    GaussianFull,
    Normal,
)
from gossipsim.models import FamilyTarget, Model
from gossipsim.models.beta_exponential import ExactPosterior
from gossipsim.particles import gaussian_stein_discrepancy, kernel_stein_discrepancy
from gossipsim.states.particlestate import stein_discrepancy

LogDensity = Callable[[np.ndarray], np.ndarray]

FULL_MEAN = np.array([0.4, -1.1, 0.7])
FULL_COV = np.array([[1.2, 0.4, -0.2], [0.4, 0.8, 0.1], [-0.2, 0.1, 0.5]])
DIAG_VAR = np.array([0.6, 2.0, 0.3])
DIRICHLET_ALPHA = np.array([2.0, 3.5, 1.5])


def _dirichlet_logpdf(points: np.ndarray) -> np.ndarray:
    """scipy's Dirichlet log density at the first C − 1 coordinates, the last implied."""
    flat = points.reshape(-1, points.shape[-1])
    full = np.concatenate([flat, 1.0 - flat.sum(axis=1, keepdims=True)], axis=1)
    values = [stats.dirichlet.logpdf(row, DIRICHLET_ALPHA) for row in full]
    return np.array(values).reshape(points.shape[:-1])


def _scalar(logpdf: Callable[[np.ndarray], np.ndarray]) -> LogDensity:
    return lambda points: logpdf(points[..., 0])


# (family, natural parameters, scipy's log density at points (..., p), points of the support)
CASES: list[tuple[ExponentialFamily, np.ndarray, LogDensity, Callable[..., np.ndarray]]] = [
    (
        Beta(),
        Beta.natural(2.5, 4.0),
        _scalar(lambda t: stats.beta.logpdf(t, 2.5, 4.0)),
        lambda rng, shape: rng.uniform(0.05, 0.95, (*shape, 1)),
    ),
    (
        Gamma(),
        Gamma.natural(3.5, 2.0),
        _scalar(lambda t: stats.gamma.logpdf(t, 3.5, scale=0.5)),
        lambda rng, shape: rng.uniform(0.2, 5.0, (*shape, 1)),
    ),
    (
        Normal(),
        Normal.natural(0.7, 1.8),
        _scalar(lambda t: stats.norm.logpdf(t, 0.7, math.sqrt(1.8))),
        lambda rng, shape: rng.normal(0.0, 2.0, (*shape, 1)),
    ),
    (
        GaussianFull(3),
        GaussianFull.natural(FULL_MEAN, FULL_COV),
        lambda x: stats.multivariate_normal(FULL_MEAN, FULL_COV).logpdf(x),
        lambda rng, shape: rng.normal(0.0, 2.0, (*shape, 3)),
    ),
    (
        GaussianDiagonal(3),
        GaussianDiagonal.natural(FULL_MEAN, DIAG_VAR),
        lambda x: stats.multivariate_normal(FULL_MEAN, np.diag(DIAG_VAR)).logpdf(x),
        lambda rng, shape: rng.normal(0.0, 2.0, (*shape, 3)),
    ),
    (
        Dirichlet(3),
        Dirichlet.natural(DIRICHLET_ALPHA),
        _dirichlet_logpdf,
        lambda rng, shape: rng.dirichlet([1.0, 1.0, 1.0], shape)[..., :2],
    ),
]
IDS = ["beta", "gamma", "normal", "gaussian-full", "gaussian-diagonal", "dirichlet"]


def _numerical_gradient(logpdf: LogDensity, points: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central differences of ``logpdf`` in each coordinate of ``points`` (..., p)."""
    gradient = np.empty_like(points)
    for c in range(points.shape[-1]):
        shift = np.zeros(points.shape[-1])
        shift[c] = step
        gradient[..., c] = (logpdf(points + shift) - logpdf(points - shift)) / (2 * step)
    return gradient


@pytest.mark.parametrize(("family", "eta", "logpdf", "draw"), CASES, ids=IDS)
def test_score_is_the_gradient_of_scipys_log_density(family, eta, logpdf, draw):
    """At 12 random points of the support, in a (3, 4, p) batch: the score equals central
    differences of scipy.stats' log density to 1e-6 (differences' error: about 1e-9)."""
    points = draw(np.random.default_rng(31), (3, 4))
    score = family.score(eta, points)
    assert score.shape == points.shape
    np.testing.assert_allclose(score, _numerical_gradient(logpdf, points), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("family", "eta", "outside"),
    [
        (Beta(), Beta.natural(2.0, 3.0), [[-0.1], [0.0], [1.0], [1.5]]),
        (Gamma(), Gamma.natural(2.0, 1.0), [[-1.0], [0.0]]),
        (Dirichlet(3), Dirichlet.natural(DIRICHLET_ALPHA), [[0.7, 0.3], [-0.1, 0.5], [0.6, 0.6]]),
    ],
    ids=["beta", "gamma", "dirichlet"],
)
def test_score_is_nan_outside_the_support(family, eta, outside):
    assert np.all(np.isnan(family.score(eta, np.array(outside))))


def test_score_refuses_points_of_the_wrong_shape_and_more_than_one_member():
    with pytest.raises(ValueError, match=r"points must be \(\.\.\., 1\)"):
        Beta().score(Beta.natural(2.0, 3.0), np.array([0.2, 0.3]))  # (2,): two scalars?
    with pytest.raises(ValueError, match=r"points must be \(\.\.\., 2\)"):
        Dirichlet(3).score(Dirichlet.natural(DIRICHLET_ALPHA), np.array([[0.2, 0.3, 0.5]]))
    with pytest.raises(ValueError, match="one member"):
        GaussianFull(2).score(np.zeros((2, 6)), np.zeros((5, 2)))


def test_a_dirichlet_of_two_categories_has_the_beta_score():
    points = np.random.default_rng(32).uniform(0.01, 0.99, (10, 1))
    np.testing.assert_allclose(
        Dirichlet(2).score(np.array([1.5, 3.0]), points),
        Beta().score(np.array([1.5, 3.0]), points),
        rtol=1e-14,
    )


def _mean_and_variance(family: ExponentialFamily, eta: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each point coordinate's mean and variance under the member (scipy's, or the Gaussians'
    conventional parameters)."""
    if isinstance(family, Beta):
        a, b = Beta.conventional(eta)
        dist = stats.beta(a, b)
    elif isinstance(family, Gamma):
        shape, rate = Gamma.conventional(eta)
        dist = stats.gamma(shape, scale=1.0 / rate)
    elif isinstance(family, Normal):
        mean, variance = Normal.conventional(eta)
        dist = stats.norm(mean, math.sqrt(variance))
    elif isinstance(family, Dirichlet):
        alpha = eta + 1.0
        return stats.dirichlet.mean(alpha)[:-1], stats.dirichlet.var(alpha)[:-1]
    else:
        mean, cov = family.conventional(eta)
        return mean, np.diagonal(cov)
    return np.atleast_1d(dist.mean()), np.atleast_1d(dist.var())


@pytest.mark.parametrize(("family", "eta", "logpdf", "draw"), CASES, ids=IDS)
def test_family_target_draws_have_the_members_mean_and_variance(family, eta, logpdf, draw):
    """100,000 exact draws (seed 33): each coordinate's sample mean and variance within 4
    standard errors of the member's (SE of the variance from the sample's fourth moment)."""
    target = FamilyTarget(family, eta)
    assert target.has_samples
    count = 100_000
    draws = target.sample(np.random.default_rng(33), count)
    mean, variance = _mean_and_variance(family, eta)
    assert draws.shape == (count, mean.size)
    centred = draws - draws.mean(axis=0)
    sample_variance = centred.var(axis=0, ddof=1)
    mean_se = np.sqrt(sample_variance / count)
    variance_se = np.sqrt((np.mean(centred**4, axis=0) - sample_variance**2) / count)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * mean_se)
    assert np.all(np.abs(sample_variance - variance) < 4 * variance_se)
    np.testing.assert_array_equal(target.score(draws[:5]), family.score(eta, draws[:5]))


def _world_model(raw: dict) -> Model:
    return gs.build_world(gs.parse_study(raw).variants[0].scenario).model


def test_the_beta_exponential_posterior_score_is_the_gradient_of_its_log_density():
    """The exact posterior without node 1, at temperature 2: its score against central differences
    of log Beta(θ; a₀, b₀) + (1/α)·Σ log Exp(z; mean θ) over the kept nodes' observations (scipy's
    densities); no exact draws."""
    raw = {
        "scenario": {"name": "be", "seed": 3, "runs": 1, "iterations": 10},
        "topology": {"kind": "complete", "nodes": 3},
        "model": {"kind": "beta-exponential", "prior": {"a": 3, "b": 2}, "temperature": 2.0},
        "data": {"points_per_node": 6, "theta": 0.4},
        "protocol": {"estimator": "exact", "learning_rate": 0.01},
    }
    model = _world_model(raw)
    data = model.fixed_data
    target = model.target(data, frozenset({1}))
    assert isinstance(target, ExactPosterior)
    kept = np.concatenate([data.observations[0], data.observations[2]])

    def logpdf(points: np.ndarray) -> np.ndarray:
        theta = points[..., 0]
        likelihood = stats.expon.logpdf(kept[:, None], scale=theta.ravel()[None, :]).sum(axis=0)
        return stats.beta.logpdf(theta, 3.0, 2.0) + likelihood.reshape(theta.shape) / 2.0

    points = np.random.default_rng(34).uniform(0.1, 0.9, (2, 5, 1))
    score = target.score(points)
    assert score.shape == points.shape
    np.testing.assert_allclose(score, _numerical_gradient(logpdf, points), rtol=1e-6, atol=1e-6)
    assert np.all(np.isnan(target.score(np.array([[0.0], [1.0], [1.2]]))))
    assert not target.has_samples
    with pytest.raises(NotImplementedError, match="no exact samples"):
        target.sample(np.random.default_rng(0), 3)


@pytest.mark.parametrize(
    ("model", "data"),
    [
        ({"kind": "beta-bernoulli"}, {"points_per_node": 20, "theta": 0.3}),
        ({"kind": "gamma-poisson"}, {"points_per_node": 20, "mean": 4.0}),
        ({"kind": "normal-normal"}, {"points_per_node": 20, "mean": 1.0}),
        (
            {"kind": "dirichlet-categorical", "prior": {"alpha": [1.0, 2.0, 3.0]}},
            {"points_per_node": 20, "probs": [0.2, 0.3, 0.5]},
        ),
        (
            {"kind": "linear-regression", "prior": {"mean": 0, "variance": 1}},
            {"dataset": "diabetes", "partition": "iid"},
        ),
    ],
    ids=["beta-bernoulli", "gamma-poisson", "normal-normal", "dirichlet-categorical", "linear"],
)
def test_conjugate_model_targets_give_exact_draws_and_their_score(model, data):
    """Each conjugate model's target (all data but node 0's) is its posterior member: exact draws
    ``(count, p)`` and a finite score there, the member's."""
    raw = {
        "scenario": {"name": "c", "seed": 5, "runs": 1, "iterations": 10},
        "topology": {"kind": "complete", "nodes": 4},
        "model": model,
        "data": data,
    }
    built = _world_model(raw)
    target = built.target(built.fixed_data, frozenset({0}))
    assert isinstance(target, FamilyTarget) and target.has_samples
    draws = target.sample(np.random.default_rng(35), 50)
    score = target.score(draws)
    assert draws.ndim == 2 and draws.shape[0] == 50 and score.shape == draws.shape
    assert np.all(np.isfinite(score))
    np.testing.assert_array_equal(score, built.family.score(target.eta, draws))


GAUSSIAN_MEAN = np.array([0.5, -0.3])
GAUSSIAN_COV = np.array([[1.0, 0.3], [0.3, 0.5]])
SHIFT = np.array([2.0, -1.0])


def test_stein_discrepancy_of_a_gaussian_targets_own_draws_is_small_and_its_closed_form():
    """A FamilyTarget of GaussianFull (d = 2) judged on 200 sets of its own exact draws (50
    particles each) and on the same sets shifted by (2, −1):

    - ``stein_discrepancy`` (V-statistic, median bandwidth of each set): every exact set below
      every shifted set;
    - at a fixed bandwidth h = 1.3, where the closed form applies (the median bandwidth is random),
      the mean U-statistic is within 4 standard errors of ``gaussian_stein_discrepancy`` (0 for
      the exact sets), and the mean V-statistic of the closed form plus its diagonal terms,
      E[V] = ((N − 1)/N)·S + (1/N)·E[u_p(θ, θ)], E[u_p(θ, θ)] = E‖s(θ)‖² + 2d/h."""
    family = GaussianFull(2)
    target = FamilyTarget(family, GaussianFull.natural(GAUSSIAN_MEAN, GAUSSIAN_COV))
    rng = np.random.default_rng(36)
    sets, count, h = 200, 50, 1.3
    exact = target.sample(rng, sets * count).reshape(sets, count, 2)
    shifted = exact + SHIFT

    own, moved = stein_discrepancy(target, exact), stein_discrepancy(target, shifted)
    assert own.max() < moved.min(), (own.max(), moved.min())

    precision = np.linalg.inv(GAUSSIAN_COV)
    for particles, offset in ((exact, np.zeros(2)), (shifted, SHIFT)):
        scores = target.score(particles)
        closed = gaussian_stein_discrepancy(
            GAUSSIAN_MEAN + offset, GAUSSIAN_COV, GAUSSIAN_MEAN, GAUSSIAN_COV, h
        )
        u = kernel_stein_discrepancy(particles, scores, h, statistic="u")
        assert abs(u.mean() - closed) < 4 * u.std(ddof=1) / math.sqrt(sets), (u.mean(), closed)
        # E‖P(θ − μ)‖² = tr(P²Σ) + cᵀP²c for θ ~ N(μ + c, Σ)
        squared_score = np.trace(precision @ precision @ GAUSSIAN_COV) + offset @ (
            precision @ precision @ offset
        )
        expected_v = (count - 1) / count * closed + (squared_score + 2 * 2 / h) / count
        v = kernel_stein_discrepancy(particles, scores, h)
        assert abs(v.mean() - expected_v) < 4 * v.std(ddof=1) / math.sqrt(sets), (
            v.mean(),
            expected_v,
        )
