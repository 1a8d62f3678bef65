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


def gaussian_stein_inner_product(
    mean: FloatArray,
    covariance: FloatArray,
    mean1: FloatArray,
    covariance1: FloatArray,
    mean2: FloatArray,
    covariance2: FloatArray,
    bandwidth: float,
) -> float:
    """The exact ⟨φ_1, φ_2⟩_H = E_{θ,θ'∼q iid}[h_{p1,p2}(θ, θ')] of Theorem 1 of 003 (the population
    value eq. 19 estimates) for q = N(m, S) and two Gaussian targets p_i = N(μ_i, Σ_i), RBF kernel
    κ = exp(−‖θ − θ'‖²/h).

    With P_i = Σ_i⁻¹ the scores are s_i(θ) = −P_i(θ − μ_i) and, for x = θ, y = θ',

        h_{p1,p2}(x, y) = κ·[s_1(x)·s_2(y) + (2/h)(s_1(x) − s_2(y))·(x − y) + 2d/h − 4‖x − y‖²/h²]

    (∇_yκ = (2/h)(x − y)κ = −∇_xκ, tr ∇_x∇_yκ = κ(2d/h − 4‖x − y‖²/h²)). Write δ = x − y and
    ū = (x + y)/2: δ ∼ N(0, 2S) and ū ∼ N(m, S/2) are independent (Cov(x + y, x − y) = S − S = 0),
    and κ = exp(−δᵀδ/h) depends on δ alone. Hence E[κ·f(ū, δ)] = E[κ]·Ẽ[f], where Ẽ takes ū as
    before and δ from its κ-tilted law: the density ∝ exp(−δᵀ(2S)⁻¹δ/2 − δᵀδ/h) is N(0, C) with
    C = ((2S)⁻¹ + (2/h)I)⁻¹ = 2S(I + 4S/h)⁻¹, and E[κ] = det(I + 4S/h)^(−1/2).

    With a_i = ū − μ_i, x = ū + δ/2, y = ū − δ/2 and c_i = m − μ_i, term by term under Ẽ (δ has
    mean 0 and is independent of ū, so every term odd in δ vanishes):

    - s_1(x)·s_2(y) = (a_1 + δ/2)ᵀP_1P_2(a_2 − δ/2) → c_1ᵀP_1P_2c_2 + tr(P_1P_2S)/2 − tr(P_1P_2C)/4
      (E[a_1ᵀMa_2] = c_1ᵀMc_2 + tr(M·S/2));
    - (2/h) s_1(x)·δ = −(2/h)(a_1 + δ/2)ᵀP_1δ → −tr(P_1C)/h, and −(2/h) s_2(y)·δ =
      (2/h)(a_2 − δ/2)ᵀP_2δ → −tr(P_2C)/h;
    - 2d/h − 4‖δ‖²/h² → 2d/h − 4 tr(C)/h².

    So, with d the dimension,

        ⟨φ_1, φ_2⟩ = E[κ]·[c_1ᵀP_1P_2c_2 + tr(P_1P_2S)/2 − tr(P_1P_2C)/4
                           − tr((P_1 + P_2)C)/h + 2d/h − 4 tr(C)/h²].

    It is symmetric in p_1, p_2 (transpose each term) and bilinear in the scores, and for p_1 = p_2
    it is :func:`gaussian_stein_discrepancy`'s S(q, p) (eq. 10). For a V-statistic of N draws from
    q add the diagonal's share: E[V] = ⟨φ_1, φ_2⟩ + (E[h(θ, θ)] − ⟨φ_1, φ_2⟩)/N, where
    E[h(θ, θ)] = c_1ᵀP_1P_2c_2 + tr(P_1P_2S) + 2d/h (κ = 1 and δ = 0 on the diagonal).
    """
    mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
    covariance = np.atleast_2d(np.asarray(covariance, dtype=np.float64))
    mean1 = np.atleast_1d(np.asarray(mean1, dtype=np.float64))
    mean2 = np.atleast_1d(np.asarray(mean2, dtype=np.float64))
    covariance1 = np.atleast_2d(np.asarray(covariance1, dtype=np.float64))
    covariance2 = np.atleast_2d(np.asarray(covariance2, dtype=np.float64))
    dimension = mean.shape[0]
    for name, value in (("mean1", mean1), ("mean2", mean2)):
        if value.shape != (dimension,):
            raise ValueError(f"{name} must have shape ({dimension},), got {value.shape}")
    for name, value in (
        ("covariance", covariance),
        ("covariance1", covariance1),
        ("covariance2", covariance2),
    ):
        if value.shape != (dimension, dimension):
            raise ValueError(f"{name} must be ({dimension}, {dimension}), got {value.shape}")
    if not (np.isfinite(bandwidth) and bandwidth > 0.0):
        raise ValueError(f"bandwidth must be a finite number > 0, got {bandwidth!r}")
    identity = np.eye(dimension)
    precision1 = np.linalg.inv(covariance1)
    precision2 = np.linalg.inv(covariance2)
    product = precision1 @ precision2
    widened = identity + 4.0 * covariance / bandwidth
    kernel_mean = np.linalg.det(widened) ** -0.5
    tilted = 2.0 * covariance @ np.linalg.inv(widened)
    offset1 = mean - mean1
    offset2 = mean - mean2
    bracket = (
        offset1 @ product @ offset2
        + np.trace(product @ covariance) / 2.0
        - np.trace(product @ tilted) / 4.0
        - np.trace((precision1 + precision2) @ tilted) / bandwidth
        + 2.0 * dimension / bandwidth
        - 4.0 * np.trace(tilted) / bandwidth**2
    )
    return float(kernel_mean * bracket)
