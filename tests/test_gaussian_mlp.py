"""Bayes by Backprop on a multilayer perceptron (paper 004, FedUAB, Section 4; issue 35):
gossipsim.logdensity.gaussian_mlp and gossipsim.logdensity.bbb_training.

Every Monte Carlo check compares with a tolerance of 4 standard errors, computed in the test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from gossipsim.logdensity.bbb_training import adam_init, adam_step, train_client, train_clients
from gossipsim.logdensity.gaussian_mlp import (
    MlpLayout,
    bbb_loss_and_gradient,
    gaussian_kl,
    initial_posterior,
    initial_prior,
    layer_variances,
    negative_log_likelihood,
    softplus,
)


def _problem(task: str, sizes: tuple[int, ...], rows: int, seed: int):
    rng = np.random.default_rng(seed)
    layout = MlpLayout(sizes, task)  # type: ignore[arg-type]
    d = layout.dimension
    X = rng.standard_normal((rows, sizes[0]))
    if task == "classification":
        y = rng.integers(0, sizes[-1], size=rows)
    else:
        y = rng.standard_normal(rows)
    mu = 0.7 * rng.standard_normal(d)
    rho = rng.uniform(-2.0, 0.0, size=d)
    prior_mu = 0.3 * rng.standard_normal(d)
    prior_sigma = rng.uniform(0.5, 1.5, size=d)
    return rng, layout, X, y, mu, rho, prior_mu, prior_sigma


def test_layout_size_and_round_trip():
    layout = MlpLayout((784, 50, 50, 10))
    assert layout.dimension == 42_310  # 004, Table 4: 42 310 weights
    rng = np.random.default_rng(0)
    flat = rng.standard_normal((2, layout.dimension))
    layers = layout.unpack(flat)
    assert [w.shape for w, _ in layers] == [(2, 784, 50), (2, 50, 50), (2, 50, 10)]
    assert layers[1][1].shape == (2, 50)
    np.testing.assert_array_equal(layout.pack(layers), flat)
    # W_1 first, row-major, then b_1
    assert layers[0][0][1, 0, 1] == flat[1, 1] and layers[0][1][0, 0] == flat[0, 784 * 50]


def test_variance_reduction_per_layer_and_its_check():
    layout = MlpLayout((784, 50, 50, 10))
    np.testing.assert_allclose(layer_variances(layout), [0.01, 0.005, 0.0025])
    np.testing.assert_allclose(layer_variances(layout, variance_reduction=1.0), [0.01] * 3)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="variance_reduction"):
            layer_variances(layout, variance_reduction=bad)
    mu, rho = initial_posterior(layout, np.random.default_rng(1))
    sigma = softplus(rho)
    np.testing.assert_allclose(sigma[0], 0.1)
    np.testing.assert_allclose(sigma[-1], 0.05)
    (w1, b1), _, _ = layout.unpack(mu)
    assert np.abs(w1).max() <= math.sqrt(6 / 834) and np.all(b1 == 0.01)
    _, prior_sigma = initial_prior(layout)
    np.testing.assert_allclose(prior_sigma, sigma)


@pytest.mark.parametrize(
    ("m", "s", "m0", "s0"), [(0.3, 0.5, -0.2, 1.3), (1.0, 2.0, 0.0, 0.7), (-2.0, 0.1, 0.5, 0.4)]
)
def test_kl_against_quadrature(m, s, m0, s0):
    q, p = stats.norm(m, s), stats.norm(m0, s0)
    value, error = integrate.quad(
        lambda x: q.pdf(x) * (q.logpdf(x) - p.logpdf(x)), m - 12 * s, m + 12 * s, epsabs=1e-12
    )
    kl = gaussian_kl(np.array([m]), np.array([s]), np.array([m0]), np.array([s0]))
    assert abs(kl - value) < 1e-9 + 10 * error


def test_kl_known_values():
    one, zero = np.ones(1), np.zeros(1)
    assert gaussian_kl(zero, one, zero, one) == 0.0
    assert gaussian_kl(one, one, zero, one) == pytest.approx(0.5)
    assert gaussian_kl(zero, 2 * one, zero, one) == pytest.approx(1.5 - math.log(2.0))
    # sums over the weights
    assert gaussian_kl(np.array([0.0, 1.0]), np.ones(2), np.zeros(2), np.ones(2)) == pytest.approx(
        0.5
    )


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_gradient_against_finite_differences_with_common_draws(task):
    outputs = 3 if task == "classification" else 1
    rng, layout, X, y, mu, rho, prior_mu, prior_sigma = _problem(task, (4, 5, 3, outputs), 6, 2)
    eps = rng.standard_normal((3, layout.dimension))
    options = {"likelihood_scale": 7.0, "kl_weight": 0.4, "noise_precision": 2.5}

    def loss(m, r):
        return bbb_loss_and_gradient(layout, m, r, prior_mu, prior_sigma, X, y, eps, **options)[0]

    _, grad_mu, grad_rho = bbb_loss_and_gradient(
        layout, mu, rho, prior_mu, prior_sigma, X, y, eps, **options
    )
    h = 1e-6
    unit = np.eye(layout.dimension)
    fd_mu = np.array([(loss(mu + h * e, rho) - loss(mu - h * e, rho)) / (2 * h) for e in unit])
    fd_rho = np.array([(loss(mu, rho + h * e) - loss(mu, rho - h * e)) / (2 * h) for e in unit])
    # central differences: truncation O(h²) and rounding O(1e-16·|L|/h) ≈ 1e-9 here
    np.testing.assert_allclose(grad_mu, fd_mu, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad_rho, fd_rho, rtol=1e-6, atol=1e-7)


def test_gradient_is_unbiased_against_a_score_function_reference():
    """The pathwise gradient (Z = 2, R draws) against an independent estimator of the same
    expectation: the score-function one, ∇_μ E f = E[(f − f̄)(w − μ)/σ²],
    ∇_σ E f = E[(f − f̄)(ε² − 1)/σ], with many samples."""
    rng, layout, X, y, mu, rho, prior_mu, prior_sigma = _problem("classification", (3, 4, 2), 5, 3)
    d, draws, samples = layout.dimension, 4000, 2
    options = {"likelihood_scale": 2.0, "kl_weight": 0.5}
    eps = rng.standard_normal((draws, samples, d))
    _, g_mu, g_rho = bbb_loss_and_gradient(
        layout, mu, rho, prior_mu, prior_sigma, X, y, eps, **options
    )
    assert g_mu.shape == (draws, d)
    sigma = softplus(rho)
    many = 400_000
    eps_ref = rng.standard_normal((many, d))
    f, _ = negative_log_likelihood(layout, mu + sigma * eps_ref, X, y, np.full(len(y), 2.0))
    centred = (f - f.mean())[:, None]
    score_mu = centred * eps_ref / sigma
    score_rho = centred * (eps_ref**2 - 1.0) / sigma * (1.0 / (1.0 + np.exp(-rho)))
    # the KL part is exact in both: take it out of the pathwise draws
    _, kl_mu, kl_rho = bbb_loss_and_gradient(
        layout,
        mu,
        rho,
        prior_mu,
        prior_sigma,
        X,
        y,
        np.zeros((1, d)),
        likelihood_scale=0.0,
        kl_weight=0.5,
    )
    for path, score, kl in ((g_mu, score_mu, kl_mu), (g_rho, score_rho, kl_rho)):
        path = path - kl
        se = np.sqrt(path.var(axis=0) / draws + score.var(axis=0) / many)
        gap = np.abs(path.mean(axis=0) - score.mean(axis=0))
        assert np.all(gap < 4 * se), (gap / se).max()


def _conjugate(seed: int = 4):
    rng = np.random.default_rng(seed)
    layout = MlpLayout((3, 1), "regression")
    n, tau = 40, 4.0
    X = rng.standard_normal((n, 3))
    y = X @ np.array([0.5, -1.0, 2.0]) + 0.3 + rng.standard_normal(n) / math.sqrt(tau)
    prior_mu, prior_sigma = np.array([0.1, 0.0, -0.2, 0.0]), np.array([1.0, 2.0, 0.5, 1.0])
    design = np.column_stack([X, np.ones(n)])  # the flat layout: W (3 × 1), then b
    precision = np.diag(prior_sigma**-2) + tau * design.T @ design
    mean = np.linalg.solve(precision, prior_mu / prior_sigma**2 + tau * design.T @ y)
    return rng, layout, X, y, tau, prior_mu, prior_sigma, precision, mean


def test_conjugate_gradient_matches_closed_form_and_vanishes_at_the_optimum():
    """One linear layer, regression with known noise τ, full batch, γ = 1: the expected loss is
    ½(μ − m)ᵀΛ(μ − m) + Σ_i (½Λ_ii σ_i² − log σ_i) + const, Λ and m the exact posterior's
    precision and mean, so its gradient is Λ(μ − m) in μ and (Λ_ii σ_i − 1/σ_i)·sigmoid(ρ_i) in ρ,
    and the mean-field optimum is μ = m (for any features: Λ(μ − m) = 0), σ_i² = 1/Λ_ii."""
    rng, layout, X, y, tau, prior_mu, prior_sigma, precision, mean = _conjugate()
    d, draws = layout.dimension, 4000
    diagonal = np.diag(precision)
    points = {
        "optimum": (mean, np.log(np.expm1(diagonal**-0.5))),
        "elsewhere": (mean + 0.2, np.log(np.expm1(0.5 * diagonal**-0.5))),
    }
    for mu, rho in points.values():
        eps = rng.standard_normal((draws, 1, d))
        _, g_mu, g_rho = bbb_loss_and_gradient(
            layout,
            mu,
            rho,
            prior_mu,
            prior_sigma,
            X,
            y,
            eps,
            likelihood_scale=1.0,
            noise_precision=tau,
        )
        sigma = softplus(rho)
        exact_mu = precision @ (mu - mean)
        exact_rho = (diagonal * sigma - 1.0 / sigma) / (1.0 + np.exp(-rho))
        for g, exact in ((g_mu, exact_mu), (g_rho, exact_rho)):
            se = g.std(axis=0) / math.sqrt(draws)
            assert np.all(np.abs(g.mean(axis=0) - exact) < 4 * se)


def test_conjugate_training_reaches_the_mean_field_optimum():
    """Adam with Z = 1 from the prior, full batch, lr α. Near the optimum Adam is SGD preconditioned
    by the gradient's RMS s_i (the noise sd there), so linearised, each coordinate is an
    Ornstein–Uhlenbeck process of stationary sd √(α·s_i/(2·c_i)), c_i the expected loss's curvature:
    Λ_ii in μ_i, 2Λ_ii·sigmoid(ρ_i)² in ρ_i. s_i is measured at the optimum; the check is 4 sd.
    15 000 steps: ρ drifts slowly (its mean gradient is small against its noise, and Adam steps
    by their ratio), and at 3 000 steps the σ_i are still 20–50 sd from their optimum."""
    rng, layout, X, y, tau, prior_mu, prior_sigma, precision, mean = _conjugate()
    rate, d, diagonal = 3e-3, layout.dimension, np.diag(precision)
    best_rho = np.log(np.expm1(diagonal**-0.5))
    mu, rho = train_client(
        layout,
        prior_mu.copy(),
        np.log(np.expm1(prior_sigma)),
        prior_mu,
        prior_sigma,
        X,
        y,
        rng,
        epochs=15000,
        batch_size=len(y),
        samples=1,
        learning_rate=rate,
        noise_precision=tau,
    )
    _, g_mu, g_rho = bbb_loss_and_gradient(
        layout,
        mean,
        best_rho,
        prior_mu,
        prior_sigma,
        X,
        y,
        rng.standard_normal((4000, 1, d)),
        likelihood_scale=1.0,
        noise_precision=tau,
    )
    slope = 1.0 / (1.0 + np.exp(-best_rho))
    spread_mu = np.sqrt(rate * g_mu.std(axis=0) / (2 * diagonal))
    spread_rho = np.sqrt(rate * g_rho.std(axis=0) / (4 * diagonal * slope**2))
    assert np.all(np.abs(mu - mean) < 4 * spread_mu), np.abs(mu - mean) / spread_mu
    assert np.all(np.abs(rho - best_rho) < 4 * spread_rho), np.abs(rho - best_rho) / spread_rho


def test_adam_first_step_moves_by_the_learning_rate():
    params = np.array([[1.0, -2.0, 3.0]])
    moved, state = adam_step(
        params, np.array([[0.5, -4.0, 1e3]]), adam_init(params), learning_rate=0.1
    )
    np.testing.assert_allclose(moved, [[0.9, -1.9, 2.9]], rtol=1e-6)
    assert state.steps[0] == 1.0


@pytest.mark.parametrize("sizes", [(20, 20, 20), (20, 13, 7)])
def test_clients_batched_give_the_numbers_of_one_at_a_time(sizes):
    layout = MlpLayout((4, 6, 3))
    rng = np.random.default_rng(5)
    data = [(rng.standard_normal((n, 4)), rng.integers(0, 3, size=n)) for n in sizes]
    prior_mu, prior_sigma = initial_prior(layout)
    starts = [initial_posterior(layout, rng) for _ in sizes]
    options = {"epochs": 2, "batch_size": 5, "samples": 2, "learning_rate": 1e-2}
    alone = [
        train_client(
            layout, m, r, prior_mu, prior_sigma, Xk, yk, np.random.default_rng(10 + k), **options
        )
        for k, ((m, r), (Xk, yk)) in enumerate(zip(starts, data, strict=True))
    ]
    mu, rho = train_clients(
        layout,
        np.stack([m for m, _ in starts]),
        np.stack([r for _, r in starts]),
        prior_mu,
        prior_sigma,
        data,
        [np.random.default_rng(10 + k) for k in range(len(sizes))],
        **options,
    )
    for k, (m, r) in enumerate(alone):
        assert not np.allclose(m, starts[k][0])
        np.testing.assert_allclose(mu[k], m, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(rho[k], r, rtol=1e-12, atol=1e-14)
