"""The maximum mean discrepancy between two sample sets with the RBF kernel, and its Gaussian
closed form.

MMD²(P, Q) = E κ(x, x') + E κ(y, y') − 2 E κ(x, y), x, x' ∼ P and y, y' ∼ Q independent, with
κ(x, y) = exp(−‖x − y‖²/h) (Gretton et al. 2012). Used to measure particles against exact samples
of a target whose samples are available.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.kernels import pairwise_squared_distances, rbf_gram

FloatArray = NDArray[np.float64]


def _mean_kernel(
    x: FloatArray, y: FloatArray, h: FloatArray, leave_out_diagonal: bool
) -> FloatArray:
    gram = rbf_gram(pairwise_squared_distances(x, y), h)
    total = gram.sum(axis=(-2, -1))
    if leave_out_diagonal:
        count = x.shape[-2]
        return np.asarray((total - count) / (count * (count - 1)))
    return np.asarray(total / (x.shape[-2] * y.shape[-2]))


def maximum_mean_discrepancy(
    x: FloatArray,
    y: FloatArray,
    bandwidth: FloatArray | float,
    *,
    statistic: Literal["v", "u"] = "v",
) -> FloatArray:
    """MMD² between the sets ``x`` ``(..., N, d)`` and ``y`` ``(..., M, d)``, shape ``(...)``.

    ``"v"`` (default) compares the two empirical measures themselves (never negative); ``"u"``
    leaves out the i = j terms within each set: unbiased for the laws they are drawn from.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if statistic not in ("u", "v"):
        raise ValueError(f"statistic must be 'v' or 'u', got {statistic!r}")
    if statistic == "u" and min(x.shape[-2], y.shape[-2]) < 2:
        raise ValueError("the U-statistic needs at least 2 points in each set")
    # each term's Gram matrices have only the batch axes of its own sets and of h: a fixed set y
    # compared with many x (a scalar h) has its y–y term computed once, not once per x
    h = np.asarray(bandwidth, dtype=np.float64)
    shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2], h.shape)
    within = statistic == "u"
    value = np.broadcast_to(
        _mean_kernel(x, x, h, within)
        + _mean_kernel(y, y, h, within)
        - 2.0 * _mean_kernel(x, y, h, False),
        shape,
    )
    return np.asarray(np.maximum(value, 0.0) if statistic == "v" else value)


def _gaussian_mean_kernel(offset: FloatArray, covariance: FloatArray, h: float) -> float:
    """E exp(−‖z‖²/h) for z ∼ N(offset, covariance)."""
    dimension = offset.shape[0]
    widened = np.eye(dimension) + 2.0 * covariance / h
    quadratic = offset @ np.linalg.solve(covariance + 0.5 * h * np.eye(dimension), offset)
    return float(np.linalg.det(widened) ** -0.5 * np.exp(-0.5 * quadratic))


def gaussian_mmd(
    mean_p: FloatArray, cov_p: FloatArray, mean_q: FloatArray, cov_q: FloatArray, bandwidth: float
) -> float:
    """The exact MMD² between N(m_p, S_p) and N(m_q, S_q) with the RBF kernel of bandwidth h.

    With z = x − y ∼ N(a − b, A + B): E exp(−‖z‖²/h) = det(I + 2(A + B)/h)^(−1/2)·
    exp(−(a − b)ᵀ(A + B + (h/2) I)⁻¹(a − b)/2).
    """
    mp = np.atleast_1d(np.asarray(mean_p, dtype=np.float64))
    mq = np.atleast_1d(np.asarray(mean_q, dtype=np.float64))
    sp = np.atleast_2d(np.asarray(cov_p, dtype=np.float64))
    sq = np.atleast_2d(np.asarray(cov_q, dtype=np.float64))
    zero = np.zeros_like(mp)
    return (
        _gaussian_mean_kernel(zero, 2.0 * sp, bandwidth)
        + _gaussian_mean_kernel(zero, 2.0 * sq, bandwidth)
        - 2.0 * _gaussian_mean_kernel(mp - mq, sp + sq, bandwidth)
    )
