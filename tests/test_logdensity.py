"""Log-densities for particle methods (issue 22, item 7): values against SciPy and direct sums,
gradients against finite differences, prior samples against their moments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import digamma, expit, log_softmax
from scipy.stats import gamma, multivariate_normal, norm

from gossipsim.logdensity.bnn import (
    BnnLayout,
    FixedPrecision,
    bnn_log_likelihood,
    bnn_log_prior,
    bnn_outputs,
    bnn_predictive_log_density,
    bnn_predictive_probabilities,
    sample_bnn_prior,
)
from gossipsim.logdensity.hierarchical import GammaPrior, hierarchical_log_prior
from gossipsim.logdensity.logistic import (
    logistic_log_likelihood,
    logistic_log_prior,
    logistic_predictive_probability,
    sample_logistic_prior,
)
from gossipsim.logdensity.mixture import GaussianMixture, product_of_mixtures


def _finite_difference_gradient(function, particles, step=1e-6):
    """Central differences of a function returning (..., N) values, coordinate by coordinate."""
    gradient = np.zeros_like(particles)
    for index in np.ndindex(particles.shape):
        bump = np.zeros_like(particles)
        bump[index] = step
        plus = function(particles + bump)
        minus = function(particles - bump)
        gradient[index] = (plus - minus)[index[:-1]] / (2 * step)
    return gradient


def test_hierarchical_prior_is_normal_times_gamma_with_the_log_jacobian() -> None:
    prior = GammaPrior(shape=2.5, rate=0.3)
    rng = np.random.default_rng(20)
    v = rng.normal(size=(4, 3))
    zeta = rng.normal(size=4)
    log_p, grad_v, grad_zeta = hierarchical_log_prior(v, zeta, prior)
    xi = np.exp(zeta)
    expected = np.array(
        [
            multivariate_normal.logpdf(v[i], np.zeros(3), np.eye(3) / xi[i])
            + gamma.logpdf(xi[i], 2.5, scale=1 / 0.3)
            + zeta[i]
            for i in range(4)
        ]
    )
    np.testing.assert_allclose(log_p, expected, rtol=1e-12)
    particles = np.concatenate([v, zeta[:, None]], axis=1)
    numeric = _finite_difference_gradient(
        lambda t: hierarchical_log_prior(t[:, :3], t[:, 3], prior)[0], particles
    )
    np.testing.assert_allclose(grad_v, numeric[:, :3], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad_zeta, numeric[:, 3], rtol=1e-6, atol=1e-7)


def test_logistic_prior_samples_have_the_priors_moments() -> None:
    """E[log ξ] = ψ(a) − log b and E[w²] = b/(a − 1), each within 4 standard errors."""
    prior = GammaPrior(shape=3.0, rate=2.0)
    draws = sample_logistic_prior(np.random.default_rng(21), 20_000, 2, prior)
    zeta, w2 = draws[:, -1], draws[:, 0] ** 2
    for values, exact in ((zeta, digamma(3.0) - math.log(2.0)), (w2, 2.0 / 2.0)):
        assert abs(values.mean() - exact) < 4 * values.std(ddof=1) / math.sqrt(values.size)


def test_logistic_log_likelihood_and_gradients() -> None:
    rng = np.random.default_rng(22)
    X = rng.normal(size=(15, 3))
    y = rng.integers(0, 2, size=15).astype(float)
    particles = rng.normal(size=(2, 5, 4))
    log_lik, grad = logistic_log_likelihood(particles, X, y, scale=2.5)
    logits = particles[..., :3] @ X.T
    probabilities = expit(logits)
    direct = 2.5 * np.sum(y * np.log(probabilities) + (1 - y) * np.log(1 - probabilities), axis=-1)
    np.testing.assert_allclose(log_lik, direct, rtol=1e-12)
    numeric = _finite_difference_gradient(
        lambda t: logistic_log_likelihood(t, X, y, scale=2.5)[0], particles
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)
    prior_value, prior_grad = logistic_log_prior(particles)
    numeric = _finite_difference_gradient(lambda t: logistic_log_prior(t)[0], particles)
    np.testing.assert_allclose(prior_grad, numeric, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        logistic_predictive_probability(particles, X), probabilities.mean(axis=-2), rtol=1e-13
    )
    # Far into the tails the log-likelihood stays finite (no log(0)).
    far, _ = logistic_log_likelihood(np.array([[1e3, 0.0, 0.0, 0.0]]), X, 1.0 - (X[:, 0] > 0))
    assert np.isfinite(far).all()


@pytest.mark.parametrize("hierarchical", [False, True])
@pytest.mark.parametrize("task,outputs", [("classification", 3), ("regression", 1)])
def test_bnn_log_likelihood_matches_a_direct_sum_and_finite_differences(
    task, outputs, hierarchical
) -> None:
    layout = BnnLayout(features=3, hidden=4, outputs=outputs, task=task, hierarchical=hierarchical)
    rng = np.random.default_rng(23)
    X = rng.normal(size=(6, 3))
    y = rng.integers(0, 3, size=6) if task == "classification" else rng.normal(size=6)
    particles = rng.normal(size=(2, 3, layout.dimension))
    log_lik, grad = bnn_log_likelihood(layout, particles, X, y, scale=1.7)
    direct = np.zeros((2, 3))
    for a in range(2):
        for n in range(3):
            w1, b1, w2, b2 = layout.unpack(particles[a, n])
            out = np.maximum(X @ w1 + b1, 0.0) @ w2 + b2
            if task == "classification":
                direct[a, n] = log_softmax(out, axis=1)[np.arange(6), y].sum()
            else:
                noise = math.exp(particles[a, n, layout.weight_count])  # log γ after the weights
                direct[a, n] = norm.logpdf(y, out[:, 0], 1 / math.sqrt(noise)).sum()
    np.testing.assert_allclose(log_lik, 1.7 * direct, rtol=1e-12)
    numeric = _finite_difference_gradient(
        lambda t: bnn_log_likelihood(layout, t, X, y, scale=1.7)[0], particles
    )
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)
    prior_value, prior_grad = bnn_log_prior(layout, particles)
    numeric = _finite_difference_gradient(lambda t: bnn_log_prior(layout, t)[0], particles)
    np.testing.assert_allclose(prior_grad, numeric, rtol=1e-6, atol=1e-6)
    weights = particles[..., : layout.weight_count]
    if hierarchical:  # N(0, 1/λ) weights, λ ~ Gamma(1, rate 0.1), the log-Jacobian log λ
        precision = np.exp(particles[..., -1])
        expected = norm.logpdf(weights, 0.0, 1.0 / np.sqrt(precision)[..., None]).sum(axis=-1)
        expected += gamma.logpdf(precision, 1.0, scale=10.0) + particles[..., -1]
    else:  # N(0, 1/e) weights
        expected = norm.logpdf(weights, 0.0, math.exp(-0.5)).sum(axis=-1)
    if task == "regression":
        log_noise = particles[..., layout.weight_count]
        expected += gamma.logpdf(np.exp(log_noise), 1.0, scale=10.0) + log_noise
    np.testing.assert_allclose(prior_value, expected, rtol=1e-12)


def test_bnn_posterior_is_the_original_svgd_code_s_up_to_its_constants() -> None:
    """The regression network with both Gamma priors against the log posterior the original SVGD
    code (dilinwang820, ``bayesian_nn.py``) writes out for a mini-batch of B of N rows:

        log_lik·N/B + (a0 − 1)·log γ − b0·γ + log γ
        − (m/2)·(log 2π − log λ) − (λ/2)·‖W‖² + (a0 − 1)·log λ − b0·λ + log λ,

    whose Gamma densities lack their normalising constants a0·log b0 − log Γ(a0) (once for γ, once
    for λ); the gradients are the same. θ = [W, log γ, log λ], as the code packs it."""
    p, h = 4, 5
    layout = BnnLayout(features=p, hidden=h, outputs=1, task="regression", hierarchical=True)
    assert layout.dimension == p * h + h + h + 1 + 2  # the code's num_vars
    rng = np.random.default_rng(31)
    X, y = rng.normal(size=(7, p)), rng.normal(size=7)
    whole = 40  # N, the rows the batch stands for
    theta = rng.normal(size=(3, layout.dimension)) * 0.5
    a0, b0 = 1.0, 0.1
    m = layout.weight_count

    def original(t: np.ndarray) -> np.ndarray:
        log_gamma, log_lambda = t[..., m], t[..., m + 1]
        w1, b1, w2, b2 = layout.unpack(t)
        prediction = (np.maximum(X @ w1 + b1[..., None, :], 0.0) @ w2)[..., 0] + b2
        log_lik = -0.5 * X.shape[0] * (math.log(2 * math.pi) - log_gamma) - np.exp(
            log_gamma
        ) / 2 * ((prediction - y) ** 2).sum(axis=-1)
        prior_gamma = (a0 - 1) * log_gamma - b0 * np.exp(log_gamma) + log_gamma
        prior_w = (
            -0.5 * m * (math.log(2 * math.pi) - log_lambda)
            - np.exp(log_lambda) / 2 * (t[..., :m] ** 2).sum(axis=-1)
            + (a0 - 1) * log_lambda
            - b0 * np.exp(log_lambda)
            + log_lambda
        )
        return log_lik * whole / X.shape[0] + prior_gamma + prior_w

    prior = GammaPrior(a0, b0)
    value, gradient = bnn_log_prior(layout, theta, prior, prior)
    likelihood, likelihood_gradient = bnn_log_likelihood(
        layout, theta, X, y, scale=whole / X.shape[0]
    )
    constant = 2 * (a0 * math.log(b0) - math.lgamma(a0))
    np.testing.assert_allclose(value + likelihood, original(theta) + constant, rtol=1e-12)
    numeric = _finite_difference_gradient(original, theta)
    np.testing.assert_allclose(gradient + likelihood_gradient, numeric, rtol=1e-6, atol=1e-6)


def test_bnn_layout_priors_and_predictives() -> None:
    layout = BnnLayout(features=2, hidden=5, outputs=4)
    assert layout.dimension == 2 * 5 + 5 + 5 * 4 + 4
    assert BnnLayout(2, 5, 4, hierarchical=True).dimension == layout.dimension + 1  # log λ
    regression = BnnLayout(features=2, hidden=5, outputs=1, task="regression")
    assert regression.dimension == 2 * 5 + 5 + 5 + 1 + 1
    assert regression.noise_index == regression.dimension - 1
    with pytest.raises(ValueError, match="GammaPrior"):
        bnn_log_prior(BnnLayout(2, 5, 4, hierarchical=True), np.zeros((1, 36)), FixedPrecision())
    with pytest.raises(ValueError, match="FixedPrecision"):
        sample_bnn_prior(layout, np.random.default_rng(0), 2, GammaPrior(1.0, 1.0))
    rng = np.random.default_rng(24)
    particles = sample_bnn_prior(layout, rng, 7)
    assert particles.shape == (7, layout.dimension)
    X = rng.normal(size=(9, 2))
    probabilities = bnn_predictive_probabilities(layout, particles, X)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0)
    outputs = bnn_outputs(layout, particles, X)
    expected = np.exp(log_softmax(outputs, axis=-1)).mean(axis=0)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-12)
    reg_particles = sample_bnn_prior(regression, rng, 7)
    y = rng.normal(size=9)
    density = bnn_predictive_log_density(regression, reg_particles, X, y)
    out = bnn_outputs(regression, reg_particles, X)[..., 0]
    sd = 1 / np.sqrt(np.exp(reg_particles[:, regression.noise_index]))[:, None]
    direct = np.log(norm.pdf(y, out, sd).mean(axis=0))
    np.testing.assert_allclose(density, direct, rtol=1e-10)
    for bad in (
        dict(features=0, hidden=1, outputs=2),
        dict(features=1, hidden=1, outputs=2, task="regression"),
        dict(features=1, hidden=1, outputs=1),
    ):
        with pytest.raises(ValueError):
            BnnLayout(**bad)


def _random_mixture(rng, components, dimension=2):
    means = rng.normal(size=(components, dimension)) * 2
    roots = rng.normal(size=(components, dimension, dimension)) * 0.5
    covariances = roots @ np.swapaxes(roots, -1, -2) + 0.3 * np.eye(dimension)
    return GaussianMixture.from_weights(rng.random(components) + 0.1, means, covariances)


def test_mixture_density_score_and_samples() -> None:
    rng = np.random.default_rng(25)
    mixture = _random_mixture(rng, 3).normalised()
    points = rng.normal(size=(4, 5, 2))
    weights = np.exp(mixture.log_weights)
    direct = np.log(
        sum(
            w * multivariate_normal.pdf(points, m, c)
            for w, m, c in zip(weights, mixture.means, mixture.covariances, strict=True)
        )
    )
    np.testing.assert_allclose(mixture.log_density(points), direct, rtol=1e-12)
    numeric = _finite_difference_gradient(mixture.log_density, points)
    np.testing.assert_allclose(mixture.score(points), numeric, rtol=1e-6, atol=1e-7)
    samples = mixture.sample(np.random.default_rng(26), 40_000)
    exact_mean = weights @ mixture.means
    standard_error = samples.std(axis=0, ddof=1) / math.sqrt(40_000)
    assert np.all(np.abs(samples.mean(axis=0) - exact_mean) < 4 * standard_error)
    second = np.einsum(
        "c,cij->ij", weights, mixture.covariances + np.einsum("ci,cj->cij", *(mixture.means,) * 2)
    )
    exact_var = np.diag(second) - exact_mean**2
    var_se = np.sqrt(((samples - exact_mean) ** 2).var(axis=0, ddof=1) / 40_000)
    assert np.all(np.abs(((samples - exact_mean) ** 2).mean(axis=0) - exact_var) < 4 * var_se)


def test_product_of_mixtures_is_the_pointwise_product() -> None:
    rng = np.random.default_rng(27)
    prior = GaussianMixture.from_weights([1.0], [[0.0, 0.0]], [np.eye(2) * 9.0])
    factors = [prior] + [_random_mixture(rng, 2) for _ in range(3)]
    product = product_of_mixtures(factors)
    assert product.log_weights.shape == (8,)
    points = rng.normal(size=(10, 2)) * 2
    np.testing.assert_allclose(
        product.log_density(points), sum(f.log_density(points) for f in factors), rtol=1e-10
    )
    with pytest.raises(ValueError):
        product_of_mixtures([])


def test_mixture_values_keep_axes_of_length_one() -> None:
    """One particle, or a batch of one-particle sets: values ``(..., N)`` keep every axis (SciPy's
    logpdf squeezes axes of length 1 away)."""
    mixture = _random_mixture(np.random.default_rng(28), 2)
    points = np.random.default_rng(29).normal(size=(3, 1, 2))
    assert mixture.log_density(points).shape == (3, 1)
    assert mixture.log_density(points[0]).shape == (1,)
    assert mixture.score(points).shape == (3, 1, 2)
    np.testing.assert_allclose(
        mixture.log_density(points)[:, 0], mixture.log_density(points[:, 0]), rtol=1e-14
    )
