"""Bayesian logistic regression as in the DSVGD papers: θ = [w, log ξ] with the hierarchical prior
w ∼ N(0, ξ⁻¹ I), ξ ∼ Gamma(1, rate 0.01) (:mod:`gossipsim.logdensity.hierarchical`) and
p(y = 1 | x, w) = σ(xᵀw), labels y in {0, 1}.

    log p(D | w) = Σ_i [y_i·log σ(x_iᵀw) + (1 − y_i)·log σ(−x_iᵀw)],
    ∇_w log p(D | w) = Σ_i (y_i − σ(x_iᵀw))·x_i,    ∂/∂ log ξ = 0.

A mini-batch B of a node's n rows is scaled to the whole: (n/|B|)·Σ_{i∈B}, as the reference code does.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, log_expit

from gossipsim.logdensity.hierarchical import (
    GammaPrior,
    hierarchical_log_prior,
    sample_hierarchical_prior,
)

FloatArray = NDArray[np.float64]

#: The precision prior of the papers' Bayesian logistic regression: Gamma(1, rate 0.01).
LOGISTIC_PRECISION_PRIOR: Final = GammaPrior(shape=1.0, rate=0.01)


def logistic_log_likelihood(
    particles: FloatArray, X: FloatArray, y: FloatArray, *, scale: float = 1.0
) -> tuple[FloatArray, FloatArray]:
    """scale·log p(y | X, w) and its gradient in θ = [w, log ξ]: ``(..., N)`` and ``(..., N, p + 1)``.

    ``particles`` is ``(..., N, p + 1)`` (the last coordinate log ξ), ``X`` ``(n, p)``, ``y``
    ``(n,)`` in {0, 1}; ``scale`` multiplies both (n_node / n_batch for a mini-batch).
    """
    particles = np.asarray(particles, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    logits = particles[..., :-1] @ X.T
    log_density = scale * np.sum(y * log_expit(logits) + (1.0 - y) * log_expit(-logits), axis=-1)
    return log_density, _gradient(particles, logits, X, y, scale)


def logistic_log_likelihood_score(
    particles: FloatArray, X: FloatArray, y: FloatArray, *, scale: float = 1.0
) -> FloatArray:
    """The gradient of :func:`logistic_log_likelihood` alone (its arithmetic, without the
    log-density's two log-sigmoids per row and particle): ``(..., N, p + 1)``."""
    particles = np.asarray(particles, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return _gradient(particles, particles[..., :-1] @ X.T, X, y, scale)


def _gradient(
    particles: FloatArray, logits: FloatArray, X: FloatArray, y: FloatArray, scale: float
) -> FloatArray:
    """scale·Σ_i (y_i − σ(x_iᵀw))·x_i, and 0 for log ξ."""
    gradient = np.zeros_like(particles)
    weighted = (y - expit(logits)) @ X
    gradient[..., :-1] = weighted if scale == 1.0 else scale * weighted  # 1.0·x is x
    return gradient


def logistic_log_prior(
    particles: FloatArray, prior: GammaPrior = LOGISTIC_PRECISION_PRIOR
) -> tuple[FloatArray, FloatArray]:
    """log p(θ) of the hierarchical prior and its gradient: ``(..., N)`` and ``(..., N, p + 1)``."""
    particles = np.asarray(particles, dtype=np.float64)
    log_density, weight_gradient, precision_gradient = hierarchical_log_prior(
        particles[..., :-1], particles[..., -1], prior
    )
    gradient = np.concatenate([weight_gradient, precision_gradient[..., None]], axis=-1)
    return log_density, gradient


def sample_logistic_prior(
    rng: np.random.Generator,
    count: int,
    features: int,
    prior: GammaPrior = LOGISTIC_PRECISION_PRIOR,
) -> FloatArray:
    """``count`` particles drawn exactly from the prior, ``(count, features + 1)``."""
    weights, log_precision = sample_hierarchical_prior(rng, count, features, prior)
    return np.concatenate([weights, log_precision[:, None]], axis=1)


def logistic_predictive_probability(particles: FloatArray, X: FloatArray) -> FloatArray:
    """p(y = 1 | x) of the particle-averaged predictive, (1/N)·Σ_n σ(xᵀw_n): ``(..., n)``."""
    particles = np.asarray(particles, dtype=np.float64)
    return np.asarray(expit(particles[..., :-1] @ np.asarray(X, dtype=np.float64).T).mean(axis=-2))
