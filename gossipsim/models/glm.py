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
from functools import lru_cache

import numpy as np
from scipy.special import expit, ndtr

from gossipsim.models.classification import calibration_error

LOG_2PI = float(np.log(2.0 * np.pi))


# --------------------------------------------------------------------------- helpers
def _softplus(a: np.ndarray) -> np.ndarray:
    """log(1 + eᵃ) = max(a, 0) + log1p(e^{−|a|}), stable for any a."""
    return np.maximum(a, 0.0) + np.log1p(np.exp(-np.abs(a)))


def _projections(
    means: np.ndarray, covs: np.ndarray, X: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean x_nᵀm and standard deviation √(x_nᵀΣx_n) of a_n = x_nᵀθ, shape (…, N) each.

    ``covs`` is (…, d, d), or (…, d) for a diagonal covariance given by its diagonal."""
    X = np.asarray(X, dtype=float)
    means = np.asarray(means, dtype=float)
    covs = np.asarray(covs, dtype=float)
    loc = means @ X.T
    if covs.ndim == means.ndim:  # diagonal covariances: x_nᵀΣx_n = Σ_i x_ni² v_i
        var = covs @ (X * X).T
    elif covs.ndim == 2:  # one posterior: two BLAS products instead of an einsum loop
        var = np.sum((X @ covs) * X, axis=1)
    else:
        var = np.einsum("ni,...ij,nj->...n", X, covs, X)
    return loc, np.sqrt(np.maximum(var, 0.0))


@lru_cache(maxsize=8)
def _hermite_rule(points: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes t_k and probability weights w_k / √π of ``points`` nodes, read-only.

    Computed once per number of nodes: NumPy's ``hermgauss`` solves an eigenproblem each call
    (0.6 ms at 32 nodes), which was a fifth of finding a logistic target and a cost of every
    exact-expectation step and every evaluation of held-out metrics."""
    t, w = np.polynomial.hermite.hermgauss(points)
    w = w / np.sqrt(np.pi)
    t.setflags(write=False)
    w.setflags(write=False)
    return t, w


def _gauss_hermite(
    loc: np.ndarray, scale: np.ndarray, points: int
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (…, K) of N(loc, scale²) and their probability weights (K,) (summing to 1)."""
    t, w = _hermite_rule(points)
    nodes = loc[..., None] + np.sqrt(2.0) * scale[..., None] * t
    return nodes, w


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


#: projections with a standard deviation up to this are integrated by Gauss–Hermite quadrature, wider
#: ones by the split of :func:`logistic_projection_expectations` (both accurate to ~1e-15 here)
_HERMITE_MAX_SCALE = 1.0
#: below this standard deviation E[σ'(a)] is the plain quadrature Σ w σ'(node) (Stein's form divides
#: by the scale; the two agree to rounding there)
_STEIN_MIN_SCALE = 1e-6
#: the split integrates log(1 + e^{−u}) over u in [0, 10], [10, 20] and [20, 40] (beyond, below 1e-17)
_TAIL_PANELS = ((0.0, 10.0, 48), (10.0, 20.0, 32), (20.0, 40.0, 32))
_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


def _tail_nodes() -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights of the composite rule on [0, 40] (:data:`_TAIL_PANELS`)."""
    nodes, weights = [], []
    for lo, hi, n in _TAIL_PANELS:
        x, w = np.polynomial.legendre.leggauss(n)
        nodes.append(0.5 * (hi - lo) * x + 0.5 * (hi + lo))
        weights.append(0.5 * (hi - lo) * w)
    return np.concatenate(nodes), np.concatenate(weights)


_TAIL_U, _TAIL_W = _tail_nodes()
_TAIL_G = np.log1p(np.exp(-_TAIL_U))  # log(1 + e^{−u})


def _rule(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ_k values[..., k] · weights[k]: a quadrature rule applied row by row, each row's sum the same
    bits wherever the row sits (a matrix-vector product by BLAS rounds a row differently by its
    position, so the vectorised engine's batches would not reproduce a run alone)."""
    return np.einsum("...k,k->...", values, weights)


def logistic_projection_expectations(
    loc: np.ndarray, scale: np.ndarray, points: int = 32
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """E[log(1 + eᵃ)], E[σ(a)] and E[σ'(a)] for a ~ N(loc, scale²), element-wise (any shape).

    The three are computed by one integration rule R(loc, scale) for the first, the second being
    ∂R/∂loc and the third (∂R/∂scale)/scale (Stein's lemma, E[σ'(a)] = ∂E[softplus(a)]/∂s / s). The
    derivatives are exact derivatives of the rule, so a gradient built from them is the exact
    gradient of the expected loss built from R: the natural-gradient step and the free energy of
    :mod:`gossipsim.families.optimum` agree to rounding.

    - scale ≤ 1: Gauss–Hermite quadrature with ``points`` nodes (error ~1e-15 at 32 nodes);
    - scale > 1: softplus(a) = max(a, 0) + log(1 + e^{−|a|}). The first part has the closed form
      m Φ(m/s) + s φ(m/s); the second is concentrated on |a| ≲ 40 and is integrated in a itself,
      ∫₀^∞ log(1 + e^{−u}) [φ_s(u − m) + φ_s(u + m)] du, by composite Gauss–Legendre. Gauss–Hermite
      alone would need thousands of nodes for a wide projection (softplus bends on the scale of 1,
      the Gaussian spreads over many units: 32 nodes err by 1e-4 at s = 12).

    The elements are integrated in chunks whose temporaries stay in the cache (each element's
    numbers are the same bits whatever the chunk: the rule sums row by row).
    """
    soft, sig, slope = _projection_expectations(loc, scale, points, loss=True)
    assert soft is not None
    return soft, sig, slope


def logistic_projection_derivatives(
    loc: np.ndarray, scale: np.ndarray, points: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """E[σ(a)] and E[σ'(a)] of :func:`logistic_projection_expectations` (the same numbers),
    without the expected loss: what a gradient and a Hessian need."""
    _, sig, slope = _projection_expectations(loc, scale, points, loss=False)
    return sig, slope


#: numbers per temporary array of a chunk (128 KiB): elements are integrated in chunks of
#: ``_CHUNK_VALUES // nodes`` (512 on the 32 Gauss–Hermite nodes, 146 on the 112 tail nodes).
#: Measured on 2,400 elements: 0.72 ms (narrow) and 3.0 ms (wide) in such chunks, against 2.2 and
#: 14.6 ms at once; larger chunks fall off a cliff just above 128 KiB a temporary (glibc serves
#: such allocations by mmap, paying page faults on every one)
_CHUNK_VALUES = 16_384


def _projection_expectations(
    loc: np.ndarray, scale: np.ndarray, points: int, loss: bool
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    loc = np.asarray(loc, dtype=float)
    scale = np.asarray(scale, dtype=float)
    loc, scale = np.broadcast_arrays(loc, scale)
    shape = loc.shape
    loc, scale = loc.reshape(-1), scale.reshape(-1)
    e_soft = np.empty(loc.shape) if loss else None
    e_sig = np.empty(loc.shape)
    e_slope = np.empty(loc.shape)
    narrow = scale <= _HERMITE_MAX_SCALE
    rules = ((narrow, _narrow_rule, points), (~narrow, _wide_rule, _TAIL_U.size))
    for chosen, integrate, nodes in rules:
        where = np.flatnonzero(chosen)
        chunk = max(_CHUNK_VALUES // nodes, 1)
        for begin in range(0, where.size, chunk):
            part = where[begin : begin + chunk]
            soft, e_sig[part], e_slope[part] = integrate(loc[part], scale[part], points, loss)
            if e_soft is not None:
                e_soft[part] = soft
    return (
        None if e_soft is None else e_soft.reshape(shape),
        e_sig.reshape(shape),
        e_slope.reshape(shape),
    )


def _narrow_rule(
    m: np.ndarray, s: np.ndarray, points: int, loss: bool
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Gauss–Hermite quadrature of :func:`logistic_projection_expectations` (scale ≤ 1)."""
    t, w = _hermite_rule(points)
    nodes = m[:, None] + np.sqrt(2.0) * s[:, None] * t
    p = expit(nodes)
    soft = _rule(_softplus(nodes), w) if loss else None
    safe = np.where(s > _STEIN_MIN_SCALE, s, 1.0)
    stein = _rule(p, w * np.sqrt(2.0) * t) / safe
    slope = np.where(s > _STEIN_MIN_SCALE, stein, _rule(p * (1.0 - p), w))
    return soft, _rule(p, w), slope


def _wide_rule(
    m: np.ndarray, s: np.ndarray, points: int, loss: bool
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The split of :func:`logistic_projection_expectations` (scale > 1)."""
    z = m / s
    cdf, pdf = ndtr(z), np.exp(-0.5 * z * z) / _SQRT_2PI
    u = _TAIL_U
    gw = _TAIL_G * _TAIL_W
    minus = (u - m[:, None]) / s[:, None]  # φ_s(u − m): a = u > 0
    plus = (u + m[:, None]) / s[:, None]  # φ_s(u + m): a = −u < 0
    phi_minus = np.exp(-0.5 * minus * minus) / (_SQRT_2PI * s[:, None])
    phi_plus = np.exp(-0.5 * plus * plus) / (_SQRT_2PI * s[:, None])
    soft = m * cdf + s * pdf + _rule(phi_minus + phi_plus, gw) if loss else None
    # ∂/∂m: Φ(m/s) + ∫ g [φ_s(u − m)(u − m) − φ_s(u + m)(u + m)] / s²
    sig = cdf + _rule(phi_minus * minus - phi_plus * plus, gw) / s
    # ∂/∂s: φ(m/s) + ∫ g [φ_s(u − m)((u − m)²/s² − 1) + φ_s(u + m)((u + m)²/s² − 1)] / s
    d_scale = pdf + _rule(phi_minus * (minus * minus - 1) + phi_plus * (plus * plus - 1), gw) / s
    return soft, sig, d_scale / s


class LogisticExpectations:
    """The projections' means ``loc`` (…, N) and E[log(1 + eᵃ)], E[σ(a)], E[σ'(a)] (…, N) under
    q = N(m, Σ) (:func:`logistic_projection_expectations`): what the expected loss and its
    derivatives are built from, so that both can share one integration of the same q."""

    __slots__ = ("loc", "softplus", "sigmoid", "slope", "diagonal")

    def __init__(self, mean: np.ndarray, cov: np.ndarray, X: np.ndarray, points: int = 32) -> None:
        self.loc, scale = _projections(mean, cov, X)
        self.softplus, self.sigmoid, self.slope = logistic_projection_expectations(
            self.loc, scale, points
        )
        #: a diagonal covariance given by its diagonal: E_q[∇²f] is then only its diagonal
        self.diagonal = np.ndim(cov) == np.ndim(mean)

    def loss(self, y: np.ndarray) -> np.ndarray:
        """E_q[Σ_n logistic_loss], shape (…)."""
        return np.sum(self.softplus - np.asarray(y, dtype=float) * self.loc, axis=-1)

    def grad_hess(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """E_q[∇f] (…, d) and E_q[∇²f] (…, d, d), or its diagonal (…, d) for a diagonal q."""
        X = np.asarray(X, dtype=float)
        grad = (self.sigmoid - np.asarray(y, dtype=float)) @ X
        slope = self.slope
        if self.diagonal:
            return grad, slope @ (X * X)
        if slope.ndim == 1:
            hess = (X * slope[:, None]).T @ X
        else:
            hess = np.einsum("...n,ni,nj->...ij", slope, X, X)
        return grad, hess


def expected_logistic_grad_hess(
    mean: np.ndarray, cov: np.ndarray, X: np.ndarray, y: np.ndarray, points: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """E_q[∇f] (…, d) and E_q[∇²f] (…, d, d) for the summed logistic loss under q = N(m, Σ), by
    integrating each projection a_n ~ N(x_nᵀm, x_nᵀΣx_n): Σ_n x_n (E σ(a_n) − y_n) and
    Σ_n x_n x_nᵀ E σ'(a_n) (:func:`logistic_projection_expectations`).

    Both are the exact derivatives of :func:`expected_logistic_loss` (the same integration rule)
    with respect to m and 2Σ. A diagonal covariance may be given by its diagonal (…, d); E_q[∇²f]
    is then only its diagonal (…, d), which is all a mean-field family needs.
    """
    X = np.asarray(X, dtype=float)
    return LogisticExpectations(mean, cov, X, points).grad_hess(X, y)


def expected_logistic_loss(
    mean: np.ndarray, cov: np.ndarray, X: np.ndarray, y: np.ndarray, points: int = 32
) -> np.ndarray:
    """E_q[Σ_n logistic_loss] under q = N(m, Σ), shape (…), each projection integrated by
    :func:`logistic_projection_expectations` (a diagonal covariance may be given as (…, d))."""
    return LogisticExpectations(mean, cov, X, points).loss(y)


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
    (any leading axes), by :func:`logistic_projection_expectations` on the projection."""
    return logistic_projection_derivatives(*_projections(means, covs, X), points)[0]


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
    return calibration_error(conf, correct, bins)


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
