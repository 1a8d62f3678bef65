"""Bayesian linear and logistic regression: losses, derivatives, Gaussian expectations, evaluation.

Data are a design matrix X (N, d) (a bias column, if wanted, is the caller's business) and targets
y (N,): labels in {0, 1} for logistic regression, reals for linear regression with known noise
standard deviation σ. Losses are per-point negative log-likelihoods ("log-losses"); the local loss
of a node is their sum (Section III-C of the core paper).

Expectations under a Gaussian q = N(m, Σ) need only the 1-D projections a_n = x_nᵀθ ~
N(x_nᵀm, x_nᵀΣx_n), so they are computed exactly (to quadrature accuracy) by Gauss–Hermite
quadrature with ``points`` nodes: E[g(a)] = π^{-1/2} Σ_k w_k g(μ + √2 s t_k).

Functions taking posterior moments accept leading batch axes: means (…, d), covs (…, d, d).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

LOG_2PI = float(np.log(2.0 * np.pi))


# --------------------------------------------------------------------------- helpers
def _softplus(a: np.ndarray) -> np.ndarray:
    """log(1 + eᵃ) = max(a, 0) + log1p(e^{−|a|}), stable for any a."""
    return np.maximum(a, 0.0) + np.log1p(np.exp(-np.abs(a)))


def _projections(
    means: np.ndarray, covs: np.ndarray, X: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean x_nᵀm and standard deviation √(x_nᵀΣx_n) of a_n = x_nᵀθ, shape (…, N) each."""
    X = np.asarray(X, dtype=float)
    loc = np.asarray(means, dtype=float) @ X.T
    var = np.einsum("ni,...ij,nj->...n", X, np.asarray(covs, dtype=float), X)
    return loc, np.sqrt(np.maximum(var, 0.0))


def _gauss_hermite(
    loc: np.ndarray, scale: np.ndarray, points: int
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (…, K) of N(loc, scale²) and their probability weights (K,) (summing to 1)."""
    t, w = np.polynomial.hermite.hermgauss(points)
    nodes = loc[..., None] + np.sqrt(2.0) * scale[..., None] * t
    return nodes, w / np.sqrt(np.pi)


# --------------------------------------------------------------------------- logistic regression
def logistic_loss(thetas: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-point log-loss −log p(y_n | x_n, θ) = log(1 + e^{a}) − y_n a with a = x_nᵀθ.

    ``thetas`` (S, d) (or any (…, d)) → (S, N).
    """
    a = np.asarray(thetas, dtype=float) @ np.asarray(X, dtype=float).T
    return _softplus(a) - np.asarray(y, dtype=float) * a


def logistic_grad_hess(
    thetas: np.ndarray, X: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient (S, d) and Hessian (S, d, d) of the summed loss Σ_n logistic_loss at each sample:
    ∇f = Xᵀ(σ(Xθ) − y), ∇²f = Xᵀ diag(σ(1 − σ)) X. Per sample, not averaged over S."""
    X = np.asarray(X, dtype=float)
    p = expit(np.asarray(thetas, dtype=float) @ X.T)
    grads = (p - np.asarray(y, dtype=float)) @ X
    hessians = np.einsum("...n,ni,nj->...ij", p * (1.0 - p), X, X)
    return grads, hessians


def projected_expectation(
    func: Callable[[np.ndarray], np.ndarray],
    mean: np.ndarray,
    cov: np.ndarray,
    X: np.ndarray,
    points: int = 32,
) -> np.ndarray:
    """E_q[g_n(x_nᵀθ)] for each point under q = N(m, Σ), shape (…, N), by ``points``-node
    Gauss–Hermite quadrature on the projection a_n ~ N(x_nᵀm, x_nᵀΣx_n) (exact for polynomial
    g_n of degree < 2·points). ``func`` maps the nodes (…, N, K) to g_n at them (same shape)."""
    nodes, w = _gauss_hermite(*_projections(mean, cov, X), points)
    return np.asarray(func(nodes)) @ w


def expected_logistic_grad_hess(
    mean: np.ndarray, cov: np.ndarray, X: np.ndarray, y: np.ndarray, points: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """E_q[∇f] (…, d) and E_q[∇²f] (…, d, d) for the summed logistic loss under q = N(m, Σ), by
    Gauss–Hermite quadrature on each projection: Σ_n x_n (E σ(a_n) − y_n), Σ_n x_n x_nᵀ E σ'(a_n).
    """
    X = np.asarray(X, dtype=float)
    nodes, w = _gauss_hermite(*_projections(mean, cov, X), points)
    p = expit(nodes)
    grad = (p @ w - np.asarray(y, dtype=float)) @ X
    hess = np.einsum("...n,ni,nj->...ij", (p * (1.0 - p)) @ w, X, X)
    return grad, hess


def expected_logistic_loss(
    mean: np.ndarray, cov: np.ndarray, X: np.ndarray, y: np.ndarray, points: int = 32
) -> np.ndarray:
    """E_q[Σ_n logistic_loss] under q = N(m, Σ) by Gauss–Hermite quadrature, shape (…)."""
    loc = np.asarray(mean, dtype=float) @ np.asarray(X, dtype=float).T
    e_soft = projected_expectation(_softplus, mean, cov, X, points)
    return np.sum(e_soft - np.asarray(y, dtype=float) * loc, axis=-1)


# --------------------------------------------------------------------------- linear regression
def linear_loss(thetas: np.ndarray, X: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """Per-point −log N(y_n | x_nᵀθ, σ²) = (y_n − x_nᵀθ)²/(2σ²) + ½ log 2πσ² (constant included).

    ``thetas`` (S, d) → (S, N).
    """
    resid = np.asarray(y, dtype=float) - np.asarray(thetas, dtype=float) @ np.asarray(X).T
    return 0.5 * resid**2 / sigma**2 + 0.5 * (LOG_2PI + 2.0 * np.log(sigma))


def linear_grad_hess(
    thetas: np.ndarray, X: np.ndarray, y: np.ndarray, sigma: float
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient (S, d) and Hessian (S, d, d) of the summed linear loss at each sample:
    ∇f = Xᵀ(Xθ − y)/σ², ∇²f = XᵀX/σ²."""
    X = np.asarray(X, dtype=float)
    thetas = np.asarray(thetas, dtype=float)
    grads = (thetas @ X.T - np.asarray(y, dtype=float)) @ X / sigma**2
    hess = np.broadcast_to(X.T @ X / sigma**2, (*thetas.shape[:-1], X.shape[1], X.shape[1]))
    return grads, hess.copy()


def expected_linear_grad_hess(
    mean: np.ndarray, cov: np.ndarray, X: np.ndarray, y: np.ndarray, sigma: float
) -> tuple[np.ndarray, np.ndarray]:
    """Exact E_q[∇f] = Xᵀ(Xm − y)/σ² (…, d) and E_q[∇²f] = XᵀX/σ² (…, d, d) for the summed linear
    loss (``cov`` only sets the batch shape: the loss is quadratic)."""
    X = np.asarray(X, dtype=float)
    mean = np.asarray(mean, dtype=float)
    grad = (mean @ X.T - np.asarray(y, dtype=float)) @ X / sigma**2
    lead = np.broadcast_shapes(mean.shape[:-1], np.shape(cov)[:-2])
    hess = np.broadcast_to(X.T @ X / sigma**2, (*lead, X.shape[1], X.shape[1])).copy()
    return np.broadcast_to(grad, (*lead, X.shape[1])).copy(), hess


def expected_linear_loss(
    mean: np.ndarray, cov: np.ndarray, X: np.ndarray, y: np.ndarray, sigma: float
) -> np.ndarray:
    """Exact E_q[Σ_n linear_loss] = Σ_n [(y_n − x_nᵀm)² + x_nᵀΣx_n]/(2σ²) + (N/2) log 2πσ²."""
    loc, scale = _projections(mean, cov, X)
    resid = np.asarray(y, dtype=float) - loc
    n = np.asarray(X).shape[0]
    return np.sum(resid**2 + scale**2, axis=-1) / (2.0 * sigma**2) + 0.5 * n * (
        LOG_2PI + 2.0 * np.log(sigma)
    )


def linear_regression_factor(
    X: np.ndarray, y: np.ndarray, sigma: float
) -> tuple[np.ndarray, np.ndarray]:
    """The exact conjugate factor of the data: (η₁, η₂) = (Xᵀy/σ², −½XᵀX/σ²), η₂ as a (d, d)
    matrix. In the flat :class:`~gossipsim.families.gaussian.GaussianFull` layout it is
    ``np.concatenate([eta1, eta2.ravel()])``; adding it to a Gaussian prior gives the posterior."""
    X = np.asarray(X, dtype=float)
    return X.T @ np.asarray(y, dtype=float) / sigma**2, -0.5 * (X.T @ X) / sigma**2


# --------------------------------------------------------------------------- evaluation
def predictive_probability(
    means: np.ndarray, covs: np.ndarray, X: np.ndarray, points: int = 32
) -> np.ndarray:
    """p(y = 1 | x_n) = E_q[σ(x_nᵀθ)] for each posterior: means (P, d), covs (P, d, d) → (P, N)
    (any leading axes), by Gauss–Hermite quadrature on the projection."""
    return projected_expectation(expit, means, covs, X, points)


def _predictions(p: np.ndarray) -> np.ndarray:
    """argmax of (1 − p, p): 1 where p > ½ (a tie goes to class 0)."""
    return (np.asarray(p, dtype=float) > 0.5).astype(float)


def accuracy(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Fraction of points whose prediction (1 iff p > ½) equals y; p (…, N), y (N,) → (…)."""
    return np.mean(_predictions(p) == np.asarray(y, dtype=float), axis=-1)


def negative_log_likelihood(p: np.ndarray, y: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Mean over points of −[y log p + (1 − y) log(1 − p)], p clipped to [eps, 1 − eps]; (…)."""
    p = np.clip(np.asarray(p, dtype=float), eps, 1.0 - eps)
    y = np.asarray(y, dtype=float)
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p), axis=-1)


def expected_calibration_error(p: np.ndarray, y: np.ndarray, bins: int = 10) -> np.ndarray:
    """ECE = Σ_m |B_m|/n · |acc(B_m) − conf(B_m)| (eq. 14 of the compressed-DSVGD paper).

    Binary case: confidence max(p, 1 − p), prediction argmax (1 iff p > ½); bin m = 1..M holds the
    confidences in ((m − 1)/M, m/M] (bins of width 1/M on [0, 1], the lower half unused); empty bins
    contribute 0. p (…, N), y (N,) → (…).
    """
    p = np.asarray(p, dtype=float)
    conf = np.maximum(p, 1.0 - p)
    correct = (_predictions(p) == np.asarray(y, dtype=float)).astype(float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    lead = p.shape[:-1]
    rows = int(np.prod(lead, dtype=int))
    flat_index = (np.arange(rows)[:, None] * bins + index.reshape(rows, -1)).ravel()
    gap = np.bincount(
        flat_index, weights=(correct - conf).reshape(-1), minlength=rows * bins
    ).reshape(rows, bins)
    return (np.sum(np.abs(gap), axis=-1) / p.shape[-1]).reshape(lead)


def linear_rmse(means: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Root-mean-square error of the posterior-mean prediction x_nᵀm; means (P, d) → (P,)."""
    resid = np.asarray(y, dtype=float) - np.asarray(means, dtype=float) @ np.asarray(X).T
    return np.sqrt(np.mean(resid**2, axis=-1))


def linear_predictive_nll(
    means: np.ndarray, covs: np.ndarray, X: np.ndarray, y: np.ndarray, sigma: float
) -> np.ndarray:
    """Mean over points of −log N(y_n | x_nᵀm, σ² + x_nᵀΣx_n) (the exact posterior predictive,
    constant included); means (P, d), covs (P, d, d) → (P,)."""
    loc, scale = _projections(means, covs, X)
    var = sigma**2 + scale**2
    resid = np.asarray(y, dtype=float) - loc
    return np.mean(0.5 * (LOG_2PI + np.log(var) + resid**2 / var), axis=-1)
