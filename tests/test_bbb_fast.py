"""The fast Bayes by Backprop loop (issue 35's speed target): an epoch's ε drawn in one call, the
in-place trainer against the reference functions, and the local reparameterisation trick."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from gossipsim.logdensity.bbb_training import adam_init, adam_step, train_client, train_clients
from gossipsim.logdensity.gaussian_mlp import (
    MlpLayout,
    bbb_gradient,
    bbb_loss_and_gradient,
    initial_posterior,
    initial_prior,
    local_bbb_loss_and_gradient,
    local_draws,
    negative_log_likelihood,
    softplus,
)


@pytest.mark.parametrize("shape", [(7, 1, 1001), (5, 3, 257)])
def test_one_call_draws_the_numbers_of_per_step_calls(shape):
    """NumPy fills an array of normals in order, so one (steps, Z, d) call (or ``out=``) gives
    the per-step (Z, d) calls' numbers, and the generator ends in the same state."""
    steps = shape[0]
    a, b, c = (np.random.default_rng(3) for _ in range(3))
    per_step = np.stack([a.standard_normal(shape[1:]) for _ in range(steps)])
    at_once = b.standard_normal(shape)
    into = np.empty(shape)
    c.standard_normal(out=into[:4])
    c.standard_normal(out=into[4:])
    np.testing.assert_array_equal(per_step, at_once)
    np.testing.assert_array_equal(per_step, into)
    assert a.standard_normal() == b.standard_normal() == c.standard_normal()


def _reference_train(layout, mu, rho, prior_mu, prior_sigma, X, y, rng, epochs, batch, z, kl):
    """train_client as it was: per-step draws, bbb_gradient, adam_step, with σ'(ρ) = expit."""
    n, d = len(y), layout.dimension
    params = np.concatenate([mu, rho])
    state = adam_init(params)
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch):
            rows = order[start : start + batch]
            eps = rng.standard_normal((z, d))
            g_mu, g_rho = bbb_gradient(
                layout, params[:d], params[d:], prior_mu, prior_sigma, X[rows], y[rows], eps,
                likelihood_scale=n / rows.size, kl_weight=kl,
            )  # fmt: skip
            params, state = adam_step(
                params, np.concatenate([g_mu, g_rho]), state, learning_rate=1e-2
            )
    return params[:d], params[d:]


@pytest.mark.parametrize(("samples", "kl"), [(1, 1.0), (3, 0.2)])
def test_in_place_training_matches_the_reference_loop(samples, kl):
    """Same numbers to rounding: the only change of arithmetic is σ'(ρ), computed from softplus's
    e^−|ρ| rather than by scipy's expit (≤ 3 ulp apart)."""
    layout = MlpLayout((6, 5, 4, 3))
    rng = np.random.default_rng(8)
    X, y = rng.standard_normal((23, 6)), rng.integers(0, 3, size=23)
    prior_mu, prior_sigma = initial_prior(layout)
    mu, rho = initial_posterior(layout, rng)
    args = (layout, mu, rho, prior_mu, prior_sigma, X, y)
    ref = _reference_train(*args, np.random.default_rng(2), 3, 5, samples, kl)
    new = train_client(
        *args, np.random.default_rng(2), epochs=3, batch_size=5, samples=samples,
        learning_rate=1e-2, kl_weight=kl,
    )  # fmt: skip
    for a, b in zip(ref, new, strict=True):
        assert not np.allclose(a, mu) or not np.allclose(a, rho)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def test_sigmoid_from_softplus_within_3_ulp_of_expit():
    rho = np.concatenate([np.linspace(-40, 40, 100_001), [-700.0, 0.0, 700.0]])
    e = np.exp(-np.abs(rho))
    fused = np.where(rho < 0, e / (1 + e), 1 / (1 + e))
    exact = expit(rho)
    assert np.all(np.abs(fused - exact) <= 3 * np.spacing(exact))


def test_local_reparameterisation_with_zero_noise_is_the_mean_network():
    """ξ = 0: the pre-activations are their means, the network at w = μ."""
    layout = MlpLayout((4, 5, 3))
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((6, 4)), rng.integers(0, 3, size=6)
    mu, rho = rng.standard_normal(layout.dimension), rng.uniform(-3, 0, layout.dimension)
    prior_mu, prior_sigma = np.zeros(layout.dimension), np.ones(layout.dimension)
    options = {"likelihood_scale": 2.0, "kl_weight": 0.5}
    local = local_bbb_loss_and_gradient(
        layout, mu, rho, prior_mu, prior_sigma, X, y, np.zeros((1, 6, local_draws(layout))),
        **options,
    )  # fmt: skip
    weights = bbb_loss_and_gradient(
        layout, mu, rho, prior_mu, prior_sigma, X, y, np.zeros((1, layout.dimension)), **options
    )
    np.testing.assert_allclose(local[0], weights[0], rtol=1e-12)
    np.testing.assert_allclose(local[1], weights[1], rtol=1e-12, atol=1e-14)


def test_local_reparameterisation_gradient_is_unbiased():
    """The local trick's gradient (Z = 2, R draws of ξ) against the score-function estimator of
    the weight-sampling expectation (as in test_gaussian_mlp), many samples: other random numbers,
    the same expectation. The local estimator's variance is also checked to be lower than the
    pathwise weight-sampling one's on this problem."""
    rng = np.random.default_rng(3)
    layout = MlpLayout((3, 4, 2))
    d, rows = layout.dimension, 5
    X, y = rng.standard_normal((rows, 3)), rng.integers(0, 2, size=rows)
    mu, rho = 0.7 * rng.standard_normal(d), rng.uniform(-2.0, 0.0, size=d)
    prior_mu, prior_sigma = 0.3 * rng.standard_normal(d), rng.uniform(0.5, 1.5, size=d)
    draws, samples = 4000, 2
    options = {"likelihood_scale": 2.0, "kl_weight": 0.5}
    xi = rng.standard_normal((draws, samples, rows, local_draws(layout)))
    _, g_mu, g_rho = local_bbb_loss_and_gradient(
        layout, mu, rho, prior_mu, prior_sigma, X, y, xi, **options
    )
    assert g_mu.shape == (draws, d)
    eps = rng.standard_normal((draws, samples, d))
    _, w_mu, w_rho = bbb_loss_and_gradient(
        layout, mu, rho, prior_mu, prior_sigma, X, y, eps, **options
    )
    sigma = softplus(rho)
    many = 400_000
    eps_ref = rng.standard_normal((many, d))
    f, _ = negative_log_likelihood(layout, mu + sigma * eps_ref, X, y, np.full(rows, 2.0))
    centred = (f - f.mean())[:, None]
    score_mu = centred * eps_ref / sigma
    score_rho = centred * (eps_ref**2 - 1.0) / sigma * expit(rho)
    _, kl_mu, kl_rho = bbb_loss_and_gradient(
        layout, mu, rho, prior_mu, prior_sigma, X, y, np.zeros((1, d)),
        likelihood_scale=0.0, kl_weight=0.5,
    )  # fmt: skip
    for path, score, kl in ((g_mu, score_mu, kl_mu), (g_rho, score_rho, kl_rho)):
        path = path - kl
        se = np.sqrt(path.var(axis=0) / draws + score.var(axis=0) / many)
        gap = np.abs(path.mean(axis=0) - score.mean(axis=0))
        assert np.all(gap < 4 * se), (gap / se).max()
    assert g_mu.var(axis=0).sum() < w_mu.var(axis=0).sum()
    assert g_rho.var(axis=0).sum() < w_rho.var(axis=0).sum()


@pytest.mark.parametrize("sizes", [(20, 20, 20), (20, 13, 7)])
def test_local_clients_batched_give_the_numbers_of_one_at_a_time(sizes):
    layout = MlpLayout((4, 6, 3))
    rng = np.random.default_rng(5)
    data = [(rng.standard_normal((n, 4)), rng.integers(0, 3, size=n)) for n in sizes]
    prior_mu, prior_sigma = initial_prior(layout)
    starts = [initial_posterior(layout, rng) for _ in sizes]
    options = {
        "epochs": 2, "batch_size": 6, "samples": 2, "learning_rate": 1e-2,
        "reparameterisation": "local",
    }  # fmt: skip
    alone = [
        train_client(
            layout, m, r, prior_mu, prior_sigma, Xk, yk, np.random.default_rng(10 + k), **options
        )
        for k, ((m, r), (Xk, yk)) in enumerate(zip(starts, data, strict=True))
    ]
    mu, rho = train_clients(
        layout, np.stack([m for m, _ in starts]), np.stack([r for _, r in starts]),
        prior_mu, prior_sigma, data, [np.random.default_rng(10 + k) for k in range(len(sizes))],
        **options,
    )  # fmt: skip
    for k, (m, r) in enumerate(alone):
        assert not np.allclose(m, starts[k][0])
        np.testing.assert_allclose(mu[k], m, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(rho[k], r, rtol=1e-12, atol=1e-14)


def test_reparameterisation_is_checked():
    layout = MlpLayout((2, 2))
    with pytest.raises(ValueError, match="reparameterisation"):
        train_client(
            layout, np.zeros(6), np.zeros(6), np.zeros(6), np.ones(6), np.zeros((2, 2)),
            np.zeros(2, dtype=int), np.random.default_rng(0), epochs=1, batch_size=1,
            reparameterisation="layers",  # type: ignore[arg-type]
        )  # fmt: skip
