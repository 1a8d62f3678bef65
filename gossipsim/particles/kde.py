"""A Gaussian kernel density estimate of a particle set, its log-density and score, in log space.

q(θ) = (1/N) Σ_n N(θ; θ_n, λ² I): the KDE DSVGD and Forget-SVGD use for the global posterior and
the local approximate likelihoods (000, Section II-B). Here λ is the kernel's standard deviation, as
in the DSVGD reference code (``exp(−‖θ − θ_n‖² / (2λ²))``); the paper's ``exp(−‖x − x'‖²/λ)`` uses
the letter for 2λ².

Everything is computed by log-sum-exp, so a point far from every particle in many dimensions
(where each kernel value underflows to 0 in double precision) still gets its exact log-density and
a score that points to the nearest particles. An optional per-component ``floor`` adds a constant
to every kernel value before summing, as the reference code does (``+ 1e-9``): far from the
particles the floor dominates and the score fades to 0.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from gossipsim.particles.kernels import pairwise_squared_distances

FloatArray = NDArray[np.float64]


def _log_kernels(
    points: FloatArray, centres: FloatArray, bandwidth: FloatArray | float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    points = np.asarray(points, dtype=np.float64)
    centres = np.asarray(centres, dtype=np.float64)
    bandwidth = np.asarray(bandwidth, dtype=np.float64)
    if np.any(~np.isfinite(bandwidth)) or np.any(bandwidth <= 0.0):
        raise ValueError("bandwidth must be a finite number > 0")
    if points.shape[-1] != centres.shape[-1]:
        raise ValueError(
            f"points and centres must have the same dimension, got {points.shape[-1]} "
            f"and {centres.shape[-1]}"
        )
    variance = np.square(bandwidth)[..., None, None]
    log_kernels = -pairwise_squared_distances(points, centres) / (2.0 * variance)
    return points, centres, log_kernels


def _normaliser(count: int, dimension: int, bandwidth: FloatArray | float) -> FloatArray:
    variance = np.square(np.asarray(bandwidth, dtype=np.float64))
    return np.log(count) + 0.5 * dimension * np.log(2.0 * np.pi * variance)


def _log_sums(log_kernels: FloatArray, floor: float) -> FloatArray:
    if floor < 0.0 or not np.isfinite(floor):
        raise ValueError(f"floor must be a finite number >= 0, got {floor!r}")
    sums = logsumexp(log_kernels, axis=-1)
    if floor > 0.0:
        sums = np.logaddexp(sums, np.log(log_kernels.shape[-1] * floor))
    return np.asarray(sums)


def kde_log_density(
    points: FloatArray,
    centres: FloatArray,
    bandwidth: FloatArray | float,
    *,
    floor: float = 0.0,
) -> FloatArray:
    """log q(θ) at each of ``points`` ``(..., M, d)`` for the KDE of ``centres`` ``(..., N, d)``.

    ``bandwidth`` λ is a scalar or has the batch shape ``(...)``. Returns ``(..., M)``.
    """
    points, centres, log_kernels = _log_kernels(points, centres, bandwidth)
    count, dimension = centres.shape[-2], centres.shape[-1]
    normaliser = _normaliser(count, dimension, bandwidth)
    return _log_sums(log_kernels, floor) - np.asarray(normaliser)[..., None]


def kde_log_density_and_score(
    points: FloatArray,
    centres: FloatArray,
    bandwidth: FloatArray | float,
    *,
    floor: float = 0.0,
) -> tuple[FloatArray, FloatArray]:
    """log q(θ) and its gradient ∇_θ log q(θ) at each of ``points``: ``(..., M)`` and ``(..., M, d)``.

    ∇ log q(θ) = Σ_n w_n (θ_n − θ)/λ² with w_n = K_n / (Σ_m K_m + N·floor), the weights taken
    from the log-kernels by one log-sum-exp, so they never underflow all at once.
    """
    points, centres, log_kernels = _log_kernels(points, centres, bandwidth)
    count, dimension = centres.shape[-2], centres.shape[-1]
    log_sums = _log_sums(log_kernels, floor)
    weights = np.exp(log_kernels - log_sums[..., None])
    variance = np.square(np.asarray(bandwidth, dtype=np.float64))[..., None, None]
    score = (weights @ centres - weights.sum(axis=-1)[..., None] * points) / variance
    log_density = log_sums - np.asarray(_normaliser(count, dimension, bandwidth))[..., None]
    return log_density, score
