"""Bayesian linear and logistic regression: derivatives, quadrature expectations, evaluation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from gossipsim.families.gaussian import GaussianFull
from gossipsim.families.natgrad import gaussian_mean_gradient
from gossipsim.models.glm import (
    accuracy,
    expected_calibration_error,
    expected_linear_grad_hess,
    expected_linear_loss,
    expected_logistic_grad_hess,
    expected_logistic_loss,
    linear_grad_hess,
    linear_loss,
    linear_predictive_nll,
    linear_regression_factor,
    linear_rmse,
    logistic_grad_hess,
    logistic_loss,
    negative_log_likelihood,
    predictive_probability,
    projected_expectation,
)

SIGMA = 0.7


def _data(n: int = 20, d: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=(n, d - 1)), np.ones(n)])
    theta = rng.normal(size=d)
    y_log = (rng.random(n) < expit(X @ theta)).astype(float)
    y_lin = X @ theta + SIGMA * rng.normal(size=n)
    return X, y_log, y_lin


def _posterior(d: int = 3, seed: int = 1):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    return 0.3 * rng.normal(size=d), 0.2 * a @ a.T + 0.1 * np.eye(d)


def _fd_grad(func, theta: np.ndarray, h: float = 1e-6) -> np.ndarray:
    return np.array(
        [(func(theta + h * e) - func(theta - h * e)) / (2 * h) for e in np.eye(theta.size)]
    )


# --------------------------------------------------------------------------- losses and derivatives
def test_logistic_loss_is_stable_and_correct():
    X = np.array([[1.0], [1.0], [1.0]])
    y = np.array([1.0, 0.0, 1.0])
    for a in (-800.0, -3.0, 0.0, 2.5, 800.0):
        loss = logistic_loss(np.array([[a]]), X, y)
        assert loss.shape == (1, 3)
        assert np.all(np.isfinite(loss))
        expected = np.array([np.logaddexp(0, -a), np.logaddexp(0, a), np.logaddexp(0, -a)])
        np.testing.assert_allclose(loss[0], expected, rtol=1e-14)


def test_linear_loss_is_the_gaussian_negative_log_likelihood():
    X, _, y = _data()
    thetas = np.random.default_rng(2).normal(size=(4, 3))
    loss = linear_loss(thetas, X, y, SIGMA)
    assert loss.shape == (4, 20)
    np.testing.assert_allclose(
        loss, -stats.norm.logpdf(y, loc=thetas @ X.T, scale=SIGMA), rtol=1e-12
    )


def test_logistic_gradients_and_hessians_match_finite_differences():
    X, y, _ = _data()
    thetas = np.random.default_rng(3).normal(size=(3, 3))
    grads, hessians = logistic_grad_hess(thetas, X, y)
    assert grads.shape == (3, 3) and hessians.shape == (3, 3, 3)
    for theta, g, h in zip(thetas, grads, hessians, strict=True):
        np.testing.assert_allclose(
            g, _fd_grad(lambda t: logistic_loss(t, X, y).sum(), theta), rtol=1e-6, atol=1e-7
        )
        fd_hess = _fd_grad(lambda t: logistic_grad_hess(t, X, y)[0], theta)
        np.testing.assert_allclose(h, fd_hess, rtol=1e-6, atol=1e-7)


def test_linear_gradients_and_hessians_match_finite_differences():
    X, _, y = _data()
    thetas = np.random.default_rng(4).normal(size=(2, 3))
    grads, hessians = linear_grad_hess(thetas, X, y, SIGMA)
    for theta, g, h in zip(thetas, grads, hessians, strict=True):
        np.testing.assert_allclose(
            g, _fd_grad(lambda t: linear_loss(t, X, y, SIGMA).sum(), theta), rtol=1e-6, atol=1e-6
        )
        fd_hess = _fd_grad(lambda t: linear_grad_hess(t, X, y, SIGMA)[0], theta)
        np.testing.assert_allclose(h, fd_hess, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- Gaussian expectations
def test_logistic_expectations_match_monte_carlo():
    X, y, _ = _data()
    mean, cov = _posterior()
    rng = np.random.default_rng(5)
    thetas = rng.multivariate_normal(mean, cov, size=100_000)
    grads, hessians = logistic_grad_hess(thetas, X, y)
    losses = logistic_loss(thetas, X, y).sum(axis=-1)
    e_grad, e_hess = expected_logistic_grad_hess(mean, cov, X, y)
    e_loss = expected_logistic_loss(mean, cov, X, y)
    for samples, exact in ((grads, e_grad), (hessians, e_hess), (losses, e_loss)):
        se = samples.std(axis=0) / np.sqrt(len(samples))
        assert np.all(np.abs(samples.mean(axis=0) - exact) < 4 * se)


def test_quadrature_is_exact_for_the_quadratic_linear_loss():
    X, _, y = _data()
    mean, cov = _posterior()
    const = 0.5 * np.log(2 * np.pi * SIGMA**2)

    def per_point_loss(a):
        return (y[:, None] - a) ** 2 / (2 * SIGMA**2) + const

    quad = projected_expectation(per_point_loss, mean, cov, X, points=8).sum()
    assert quad == pytest.approx(expected_linear_loss(mean, cov, X, y, SIGMA), rel=1e-10)
    e_resid = projected_expectation(lambda a: (a - y[:, None]) / SIGMA**2, mean, cov, X)
    grad, hess = expected_linear_grad_hess(mean, cov, X, y, SIGMA)
    np.testing.assert_allclose(e_resid @ X, grad, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hess, X.T @ X / SIGMA**2, rtol=1e-12)


def test_expectations_are_batched_over_posteriors():
    X, y, _ = _data()
    (m1, c1), (m2, c2) = _posterior(seed=1), _posterior(seed=2)
    grads, hessians = expected_logistic_grad_hess(np.stack([m1, m2]), np.stack([c1, c2]), X, y)
    assert grads.shape == (2, 3) and hessians.shape == (2, 3, 3)
    g2, h2 = expected_logistic_grad_hess(m2, c2, X, y)
    np.testing.assert_allclose(grads[1], g2, rtol=1e-14)
    np.testing.assert_allclose(hessians[1], h2, rtol=1e-14)


def test_predictive_probability_matches_monte_carlo():
    X, _, _ = _data(n=8)
    posteriors = [_posterior(seed=s) for s in (1, 2)]
    means = np.stack([m for m, _ in posteriors])
    covs = np.stack([c for _, c in posteriors])
    p = predictive_probability(means, covs, X)
    assert p.shape == (2, 8)
    rng = np.random.default_rng(6)
    for i, (m, c) in enumerate(posteriors):
        draws = expit(rng.multivariate_normal(m, c, size=100_000) @ X.T)
        se = draws.std(axis=0) / np.sqrt(len(draws))
        assert np.all(np.abs(draws.mean(axis=0) - p[i]) < 4 * se)
    # a point mass gives the plug-in probability
    np.testing.assert_allclose(
        predictive_probability(means, np.zeros_like(covs), X), expit(means @ X.T), rtol=1e-12
    )


# --------------------------------------------------------------------------- conjugate linear factor
def test_linear_factor_gives_the_textbook_posterior():
    X, _, y = _data()
    m0, lam0 = np.array([0.5, -0.2, 0.1]), np.diag([2.0, 1.0, 0.5])
    eta1, eta2 = linear_regression_factor(X, y, SIGMA)
    fam = GaussianFull(3)
    posterior = GaussianFull.natural(m0, precision=lam0) + np.concatenate([eta1, eta2.ravel()])
    lam = lam0 + X.T @ X / SIGMA**2
    mean = np.linalg.solve(lam, lam0 @ m0 + X.T @ y / SIGMA**2)
    m, cov = fam.conventional(posterior)
    np.testing.assert_allclose(m, mean, rtol=1e-10)
    np.testing.assert_allclose(cov, np.linalg.inv(lam), rtol=1e-10)


def test_natural_gradient_of_linear_loss_is_minus_the_factor():
    """E_q[Σ linear_loss] is linear in μ, so ∇_μ = −(factor) for every q: eq. (17) with ρ = α = 1
    lands on the exact posterior in one step."""
    X, _, y = _data()
    fam = GaussianFull(3)
    eta1, eta2 = linear_regression_factor(X, y, SIGMA)
    factor = np.concatenate([eta1, eta2.ravel()])
    for seed in (1, 2):
        mean, cov = _posterior(seed=seed)
        eta = GaussianFull.natural(mean, cov=cov)
        g = gaussian_mean_gradient(fam, eta, *expected_linear_grad_hess(mean, cov, X, y, SIGMA))
        np.testing.assert_allclose(g, -factor, rtol=1e-10, atol=1e-10)
        prior = GaussianFull.natural(np.zeros(3), precision=np.eye(3))
        local = eta - prior  # η_k, so that η = η₀ + η_k
        np.testing.assert_allclose(eta - (local + g), prior + factor, rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------- evaluation metrics
def test_accuracy_and_nll_trivial_cases():
    y = np.array([1.0, 0.0, 1.0, 0.0])
    assert accuracy(y, y) == 1.0
    assert accuracy(1 - y, y) == 0.0
    assert accuracy(np.full(4, 0.5), y) == 0.5  # a tie predicts class 0
    assert negative_log_likelihood(y, y) == pytest.approx(0.0, abs=1e-11)
    assert negative_log_likelihood(np.full(4, 0.5), y) == pytest.approx(np.log(2), rel=1e-14)
    assert np.isfinite(negative_log_likelihood(1 - y, y))
    batched = np.stack([y, 1 - y, np.full(4, 0.5)])
    np.testing.assert_allclose(accuracy(batched, y), [1.0, 0.0, 0.5])
    assert negative_log_likelihood(batched, y).shape == (3,)


def test_expected_calibration_error_by_hand():
    p = np.array([0.95, 0.92, 0.15, 0.62, 0.58, 0.35, 0.75, 0.22, 0.55, 0.85])
    y = np.array([1, 1, 0, 0, 1, 1, 1, 0, 0, 1], dtype=float)
    # confidence 0.95 0.92 0.85 0.62 0.58 0.65 0.75 0.78 0.55 0.85
    # correct    1    1    1    0    1    0    1    1    0    1
    bins = {  # (0.5,0.6], (0.6,0.7], (0.7,0.8], (0.8,0.9], (0.9,1]: (accuracy, mean confidence)
        "b6": (0.5, (0.58 + 0.55) / 2),
        "b7": (0.0, (0.62 + 0.65) / 2),
        "b8": (1.0, (0.75 + 0.78) / 2),
        "b9": (1.0, 0.85),
        "b10": (1.0, (0.95 + 0.92) / 2),
    }
    expected = sum(2 / 10 * abs(acc - conf) for acc, conf in bins.values())
    assert expected == pytest.approx(0.23)
    assert expected_calibration_error(p, y, bins=10) == pytest.approx(expected, rel=1e-12)
    # one bin of width ½ above ½: |7/10 − mean confidence|
    assert expected_calibration_error(p, y, bins=2) == pytest.approx(
        abs(0.7 - np.maximum(p, 1 - p).mean()), rel=1e-12
    )
    # batching over a leading axis; perfect confident predictions are calibrated
    batched = np.stack([p, y, np.full(10, 0.5)])
    ece = expected_calibration_error(batched, y)
    assert ece.shape == (3,)
    assert ece[0] == pytest.approx(expected, rel=1e-12)
    assert ece[1] == 0.0
    assert ece[2] == pytest.approx(0.1, rel=1e-12)  # all in (0.4, 0.5]: |4/10 − ½|


def test_expected_calibration_error_matches_a_loop_reference():
    rng = np.random.default_rng(8)
    p = rng.random((3, 200))
    y = (rng.random(200) < 0.5).astype(float)

    def reference(row: np.ndarray, bins: int) -> float:
        conf = np.maximum(row, 1 - row)
        correct = ((row > 0.5) == y).astype(float)
        total = 0.0
        for m in range(bins):
            inside = (conf > m / bins) & (conf <= (m + 1) / bins)
            if inside.any():
                total += inside.sum() / len(row) * abs(correct[inside].mean() - conf[inside].mean())
        return total

    for bins in (5, 10, 15):
        np.testing.assert_allclose(
            expected_calibration_error(p, y, bins), [reference(r, bins) for r in p], rtol=1e-12
        )


def test_linear_regression_metrics():
    X, _, y = _data()
    (m1, c1), (m2, c2) = _posterior(seed=1), _posterior(seed=2)
    means, covs = np.stack([m1, m2]), np.stack([c1, c2])
    rmse = linear_rmse(means, X, y)
    np.testing.assert_allclose(rmse[0], np.sqrt(np.mean((y - X @ m1) ** 2)), rtol=1e-14)
    nll = linear_predictive_nll(means, covs, X, y, SIGMA)
    sd = np.sqrt(SIGMA**2 + np.einsum("ni,ij,nj->n", X, c2, X))
    np.testing.assert_allclose(nll[1], -stats.norm.logpdf(y, X @ m2, sd).mean(), rtol=1e-12)
