"""Client-selection indicators of 003 for one particle set and many clients, as pure functions.

Every client k is judged from the same global particles θ_1..θ_N (the server's, broadcast to all)
and its own score function at them, ``scores[k]`` = s_k(θ_n), an array ``(K, N, d)``. With the RBF
kernel κ(x, x') = exp(−‖x − x'‖²/h), the Stein kernel of two score functions s, s' (Theorem 1 of 003)

    h_{s,s'}(x, x') = s(x)ᵀκ s'(x') + s(x)ᵀ∇_{x'}κ + ∇_xκᵀ s'(x') + tr ∇_x∇_{x'}κ

gives the RKHS inner product of the two SVGD directions φ_s and φ_s' of the particle set, eq. (19):

    ⟨φ_s, φ_s'⟩_H = (1/N²) Σ_ij h_{s,s'}(θ_i, θ_j).

- **KSD** (eq. 17's indicator): S(q, p̃_k) = ⟨φ_k, φ_k⟩ with s_k the score of client k's tilted
  distribution: :func:`stein_discrepancies`. It is ≥ 0 (a squared RKHS norm).
- **HIP** (eqs. 21, 24): ⟨φ_k, φ'⟩ with s_k the score of client k's likelihood and s' = (1/K) Σ_m s_m
  the score of the geometric average p' = (Π p_m)^(1/K): :func:`inner_products_with_average`. The
  sum over k is K·⟨φ', φ'⟩ ≥ 0, but one client's may be negative (its SVGD direction points away
  from the average's).

The double sum is bilinear in the scores, so every client's value comes from one pass over the
N × N kernel matrix (shared by all clients) and products of ``(K, N, d)`` arrays: no loop over the
clients. With P = Σ_j κ_ij(θ_i − θ_j) (the kernel-weighted pull on particle i) and κ symmetric,

    N²⟨φ_s, φ_s'⟩ = Σ_i s_i·(κ s')_i + (2/h) Σ_i s_i·P_i + (2/h) Σ_i s'_i·P_i
                    + Σ_ij κ_ij (2d/h − 4‖θ_i − θ_j‖²/h²).

:func:`selection_distribution` turns indicators into the distribution the server draws from
(eqs. 17, 24), with the rule for values eq. 17 and 24 leave undefined (non-positive, not finite).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.kernels import pairwise_squared_distances, rbf_gram

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class _KernelTerms:
    """What every client's value shares: κ, the pull P, and the score-free double sum."""

    gram: FloatArray  # (N, N)
    pull: FloatArray  # (N, d): Σ_j κ_ij (θ_i − θ_j)
    constant: float  # Σ_ij κ_ij (2d/h − 4‖θ_i − θ_j‖²/h²)
    bandwidth: float


def _kernel_terms(particles: FloatArray, bandwidth: float) -> _KernelTerms:
    if particles.ndim != 2:
        raise ValueError(f"particles must be (N, d), got shape {particles.shape}")
    if not (np.isfinite(bandwidth) and bandwidth > 0.0):
        raise ValueError(f"bandwidth must be a finite number > 0, got {bandwidth!r}")
    dimension = particles.shape[1]
    squared = pairwise_squared_distances(particles, particles)
    gram = rbf_gram(squared, bandwidth)
    pull = particles * gram.sum(axis=1)[:, None] - gram @ particles
    pairs = gram * (2.0 * dimension / bandwidth - 4.0 * squared / bandwidth**2)
    return _KernelTerms(gram, pull, float(pairs.sum(axis=1).sum()), float(bandwidth))


def _check_scores(particles: FloatArray, scores: FloatArray) -> None:
    if scores.ndim != 3 or scores.shape[1:] != particles.shape:
        raise ValueError(
            f"scores must be (K, N, d) with (N, d) = particles' shape {particles.shape}, got "
            f"{scores.shape}"
        )


def stein_discrepancies(particles: FloatArray, scores: FloatArray, bandwidth: float) -> FloatArray:
    """S(q̂, p_k) of one particle set to each of K targets, eq. (10) of 003, shape ``(K,)``.

    ``particles`` ``(N, d)``; ``scores[k]`` ``(N, d)`` is ∇log p_k at them; ``bandwidth`` h of the
    RBF kernel. The V-statistic (1/N²) Σ_ij u_{p_k}(θ_i, θ_j): exactly ‖φ̂_k‖²_H, never negative
    (the same value as :func:`~gossipsim.particles.stein.kernel_stein_discrepancy` per client,
    which recomputes the kernel for each)."""
    particles = np.asarray(particles, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    _check_scores(particles, scores)
    terms = _kernel_terms(particles, bandwidth)
    count = particles.shape[0]
    smoothed = terms.gram @ scores  # (κ s_k)_i, every client at once
    quadratic = np.einsum("kid,kid->k", scores, smoothed)
    cross = np.einsum("kid,id->k", scores, terms.pull)
    total = quadratic + (4.0 / terms.bandwidth) * cross + terms.constant
    return np.asarray(np.maximum(total, 0.0) / count**2)


def inner_products(
    particles: FloatArray, scores: FloatArray, target_scores: FloatArray, bandwidth: float
) -> FloatArray:
    """⟨φ_k, φ_target⟩_H of the SVGD direction of each of K scores with one target's, eq. (19) of
    003, shape ``(K,)``: ``scores`` ``(K, N, d)``, ``target_scores`` ``(N, d)``, both at
    ``particles`` ``(N, d)``."""
    particles = np.asarray(particles, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    target_scores = np.asarray(target_scores, dtype=np.float64)
    _check_scores(particles, scores)
    if target_scores.shape != particles.shape:
        raise ValueError(
            f"target_scores must be (N, d) = {particles.shape}, got {target_scores.shape}"
        )
    terms = _kernel_terms(particles, bandwidth)
    count = particles.shape[0]
    smoothed_target = terms.gram @ target_scores  # (κ s')_i
    quadratic = np.einsum("kid,id->k", scores, smoothed_target)
    cross = np.einsum("kid,id->k", scores, terms.pull)
    target_cross = float(np.einsum("id,id->", target_scores, terms.pull))
    total = quadratic + (2.0 / terms.bandwidth) * (cross + target_cross) + terms.constant
    return np.asarray(total / count**2)


def inner_products_with_average(
    particles: FloatArray, scores: FloatArray, bandwidth: float
) -> FloatArray:
    """The HIP indicator of eq. (24) of 003 for each of K clients, ``(K,)``: ⟨φ_k, φ'⟩_H with
    s' = (1/K) Σ_m s_m, the score of p' = (Π_m p_m)^(1/K) (Lemma 3). ``scores[k]`` is ∇log p_k
    (client k's likelihood) at ``particles``."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 3:
        raise ValueError(f"scores must be (K, N, d), got shape {scores.shape}")
    return inner_products(particles, scores, scores.mean(axis=0), bandwidth)


@dataclass(frozen=True)
class Selection:
    """A selection distribution and how it was made from the indicators.

    ``probabilities`` sums to 1; ``fallback`` is True when the indicators gave no distribution
    (none positive, or one not finite) and the server drew uniformly instead."""

    probabilities: FloatArray
    fallback: bool

    @property
    def entropy(self) -> float:
        """−Σ P_k ln P_k in nats (ln K for the uniform distribution, 0 for a certain client)."""
        p = self.probabilities[self.probabilities > 0.0]
        return float(-(p * np.log(p)).sum())


def selection_distribution(indicators: FloatArray, floor: float = 0.0) -> Selection:
    """P_k ∝ max(I_k, 0), eqs. (17) and (24) of 003, mixed with the uniform: (1 − floor)·P + floor/K.

    The paper divides each indicator by their sum and is silent where that is no distribution.
    Here a client whose indicator is ≤ 0 gets probability 0 (for HIP: its SVGD direction does not
    point towards the average likelihood's; a KSD is never negative); when no indicator is
    positive, or one is not finite (NaN or ±inf: a diverged score), the server draws uniformly and
    :attr:`Selection.fallback` says so (counted per run: ``selection_fallbacks``). ``floor`` in
    [0, 1] keeps every client selectable (0: the paper's rule)."""
    values = np.asarray(indicators, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"indicators must be a non-empty vector, got shape {values.shape}")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be in [0, 1], got {floor!r}")
    count = values.size
    positive = np.maximum(values, 0.0)
    total = positive.sum()
    if not (np.all(np.isfinite(values)) and total > 0.0 and np.isfinite(total)):
        return Selection(np.full(count, 1.0 / count), True)
    probabilities = positive / total
    if floor > 0.0:
        probabilities = (1.0 - floor) * probabilities + floor / count
    return Selection(probabilities, False)
