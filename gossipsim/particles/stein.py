"""The kernelized Stein discrepancy of a particle set to a target known up to a constant.

S(q, p) = ‖φ*‖²_H with φ*(·) = E_{θ∼q}[∇log p(θ) κ(θ, ·) + ∇κ(θ, ·)] (eqs. 9-10 of 003), the
squared norm of the steepest SVGD direction in the kernel's RKHS. It needs only the target's score
∇log p at the particles, so an unnormalised posterior (prior times retained likelihoods) is enough.
With κ(x, x') = exp(−‖x − x'‖²/h) it is E[u_p(θ, θ')] over independent θ, θ' ∼ q of

    u_p(x, x') = s(x)·s(x') κ + s(x)·∇_{x'}κ + ∇_x κ·s(x') + tr ∇_x∇_{x'}κ
               = κ(x, x')·[s(x)·s(x') + (2/h)(s(x) − s(x'))·(x − x') + 2d/h − 4‖x − x'‖²/h²].
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.kernels import pairwise_squared_distances, rbf_gram

FloatArray = NDArray[np.float64]
SteinStatistic = Literal["v", "u"]


def kernel_stein_discrepancy(
    particles: FloatArray,
    scores: FloatArray,
    bandwidth: FloatArray | float,
    *,
    statistic: SteinStatistic = "v",
) -> FloatArray:
    """S(q̂, p) of the particle set q̂ = (1/N) Σ δ_{θ_n} to p, eq. (10) of 003, for each set ``(...)``.

    ``particles`` and ``scores`` (∇log p at each particle) are ``(..., N, d)``; ``bandwidth`` h of
    the RBF kernel is a scalar or has the batch shape. ``statistic = "v"`` (the default) is
    (1/N²) Σ_ij u_p(θ_i, θ_j): exactly ‖φ̂*‖²_H for the particle set, never negative, 0 only where
    the SVGD direction vanishes in the RKHS. ``"u"`` leaves out i = j: an unbiased estimate of the
    discrepancy of the distribution the particles are drawn from (it can be negative).
    """
    particles = np.asarray(particles, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    if particles.ndim < 2 or scores.shape != particles.shape:
        raise ValueError(
            f"particles and scores must both be (..., N, d) of one shape, got "
            f"{particles.shape} and {scores.shape}"
        )
    count, dimension = particles.shape[-2], particles.shape[-1]
    if statistic == "u" and count < 2:
        raise ValueError("the U-statistic needs at least 2 particles")
    if statistic not in ("u", "v"):
        raise ValueError(f"statistic must be 'v' or 'u', got {statistic!r}")
    h = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), particles.shape[:-2])
    squared = pairwise_squared_distances(particles, particles)
    gram = rbf_gram(squared, h)
    h_pairs = h[..., None, None]
    score_products = scores @ np.swapaxes(scores, -1, -2)
    # Σ_ij κ_ij (s_i − s_j)·(θ_i − θ_j) = 2 Σ_i s_i·(θ_i Σ_j κ_ij − Σ_j κ_ij θ_j), κ symmetric.
    pulled = particles * gram.sum(axis=-1)[..., None] - gram @ particles
    # every sum over two axes is taken one axis at a time (the last first): NumPy's einsum and
    # reductions over several axes of a stack of sets add in an order that depends on how many
    # sets the stack holds, and a set's KSD must be the same bits alone or in a batch
    cross = 2.0 * np.einsum("...nd,...nd->...n", scores, pulled).sum(axis=-1)
    pair_terms = gram * (score_products + 2.0 * dimension / h_pairs - 4.0 * squared / h_pairs**2)
    total = pair_terms.sum(axis=-1).sum(axis=-1) + (2.0 / h) * cross
    if statistic == "v":
        return np.asarray(np.maximum(total, 0.0) / count**2)
    diagonal = np.einsum("...nd,...nd->...n", scores, scores).sum(axis=-1)
    diagonal = diagonal + count * 2.0 * dimension / h
    return np.asarray((total - diagonal) / (count * (count - 1)))


def gaussian_stein_discrepancy(
    mean: FloatArray,
    covariance: FloatArray,
    target_mean: FloatArray,
    target_covariance: FloatArray,
    bandwidth: float,
) -> float:
    """The exact S(q, p) for q = N(m, S) and p = N(μ, Σ) with the RBF kernel of bandwidth h.

    With δ = θ − θ' ∼ N(0, 2S) and ū = (θ + θ')/2 − μ ∼ N(m − μ, S/2) independent, P = Σ⁻¹ and the
    score s(θ) = −P(θ − μ), the terms of u_p reduce to moments of δ under the weight
    κ = exp(−δᵀδ/h): E[κ] = det(I + 4S/h)^(−1/2), and δ tilted by κ is N(0, C) with
    C = 2S(I + 4S/h)⁻¹, so

        S(q, p) = E[κ]·[tr(P²S)/2 + cᵀP²c − tr(P²C)/4 − (2/h) tr(PC) + 2d/h − 4 tr(C)/h²],

    c = m − μ. It is 0 when q = p. The closed form that :func:`kernel_stein_discrepancy` is tested
    against.
    """
    mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
    covariance = np.atleast_2d(np.asarray(covariance, dtype=np.float64))
    target_mean = np.atleast_1d(np.asarray(target_mean, dtype=np.float64))
    target_covariance = np.atleast_2d(np.asarray(target_covariance, dtype=np.float64))
    dimension = mean.shape[0]
    identity = np.eye(dimension)
    precision = np.linalg.inv(target_covariance)
    precision_squared = precision @ precision
    widened = identity + 4.0 * covariance / bandwidth
    kernel_mean = np.linalg.det(widened) ** -0.5
    tilted = 2.0 * covariance @ np.linalg.inv(widened)
    offset = mean - target_mean
    bracket = (
        np.trace(precision_squared @ covariance) / 2.0
        + offset @ precision_squared @ offset
        - np.trace(precision_squared @ tilted) / 4.0
        - 2.0 / bandwidth * np.trace(precision @ tilted)
        + 2.0 * dimension / bandwidth
        - 4.0 * np.trace(tilted) / bandwidth**2
    )
    return float(kernel_mean * bracket)
