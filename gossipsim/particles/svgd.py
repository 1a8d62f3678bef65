"""The SVGD direction φ (eq. 6 of 000) with the RBF kernel in Gram-matrix form, and an SVGD loop."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.adagrad import AdaGradSettings, adagrad_step
from gossipsim.particles.kernels import (
    BandwidthRule,
    median_bandwidth,
    pairwise_squared_distances,
    rbf_gram,
)

FloatArray = NDArray[np.float64]


def svgd_direction(
    particles: FloatArray,
    scores: FloatArray,
    *,
    bandwidth: FloatArray | float | None = None,
    rule: BandwidthRule = "median",
) -> FloatArray:
    """φ at every particle, eq. (6) of 000, for each particle set: ``(..., N, d)``.

    φ(θ_i) = (1/N) Σ_j [κ(θ_j, θ_i) ∇log p(θ_j) + ∇_{θ_j} κ(θ_j, θ_i)] with
    κ(x, x') = exp(−‖x − x'‖²/h), whose gradient term sums to
    (2/h)·(θ_i Σ_j κ_ij − Σ_j κ_ij θ_j): with the distances, two matrix products in all
    (no per-pair ``d``-vectors). ``scores`` holds ∇log p at each particle, the same shape as ``particles``.
    ``bandwidth`` h (batch shape or scalar) overrides the median ``rule``
    (see :func:`gossipsim.particles.kernels.median_bandwidth`).
    """
    particles = np.asarray(particles, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    if particles.ndim < 2:
        raise ValueError(f"particles must be (..., N, d), got shape {particles.shape}")
    if scores.shape != particles.shape:
        raise ValueError(
            f"scores must have the particles' shape {particles.shape}, got {scores.shape}"
        )
    squared = pairwise_squared_distances(particles, particles)
    if bandwidth is None:
        h = median_bandwidth(squared, rule)
    else:
        h = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), particles.shape[:-2])
    gram = rbf_gram(squared, h)
    count = particles.shape[-2]
    # Σ_j κ_ij s_j − (2/h) Σ_j κ_ij θ_j as one product, then + (2/h) θ_i Σ_j κ_ij.
    two_over_h = (2.0 / h)[..., None, None]
    direction = gram @ (scores - two_over_h * particles)
    direction += two_over_h * gram.sum(axis=-1)[..., None] * particles
    direction /= count
    return direction


def run_svgd(
    particles: FloatArray,
    score: Callable[[FloatArray], FloatArray],
    steps: int,
    settings: AdaGradSettings | None = None,
    *,
    rule: BandwidthRule = "median",
    bandwidth: float | None = None,
) -> FloatArray:
    """``steps`` SVGD moves (eqs. 5-6 of 000) with AdaGrad, from ``particles`` ``(..., N, d)``.

    ``score`` maps particles to ∇log p at each of them (same shape). The AdaGrad history starts
    afresh, as each SVGD loop of the reference codes does. A fixed kernel ``bandwidth`` h overrides
    the median ``rule``. Returns the moved particles.
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    adagrad = settings if settings is not None else AdaGradSettings()
    current = np.array(particles, dtype=np.float64)
    history: FloatArray | None = None
    for _ in range(steps):
        direction = svgd_direction(current, score(current), bandwidth=bandwidth, rule=rule)
        current, history = adagrad_step(current, direction, history, adagrad)
    return current
