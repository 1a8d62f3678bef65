"""Gaussian mixtures: log-density, score, exact samples, and products of mixtures.

A product of Gaussian mixtures is a Gaussian mixture (one component per choice of a component in
each factor), by N(θ; a, A)·N(θ; b, B) = N(a; b, A + B)·N(θ; c, C) with C = (A⁻¹ + B⁻¹)⁻¹ and
c = C(A⁻¹a + B⁻¹b). So a Gaussian prior times node likelihoods that are mixtures in θ has an exact
posterior, with or without any node: a target whose density, score and samples are all exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

FloatArray = NDArray[np.float64]

#: numbers of temporaries one call of :meth:`GaussianMixture.log_density_and_score` may hold
#: (2^22: 32 MiB of float64): beyond, the points are taken a few at a time
CHUNK_VALUES = 2**22


@dataclass(frozen=True)
class GaussianMixture:
    """Σ_c π_c N(θ; μ_c, Σ_c): ``log_weights`` ``(C,)`` (normalised to log-sum 0 unless the mixture
    is a likelihood factor), ``means`` ``(C, d)``, ``covariances`` ``(C, d, d)``."""

    log_weights: FloatArray
    means: FloatArray
    covariances: FloatArray

    @classmethod
    def from_weights(
        cls, weights: FloatArray, means: FloatArray, covariances: FloatArray
    ) -> GaussianMixture:
        """A mixture from plain (non-negative) weights, kept as given (not normalised)."""
        weights = np.asarray(weights, dtype=np.float64)
        if np.any(weights < 0.0) or not np.any(weights > 0.0):
            raise ValueError("mixture weights must be >= 0 with at least one > 0")
        with np.errstate(divide="ignore"):
            log_weights = np.log(weights)
        return cls(log_weights, np.asarray(means, float), np.asarray(covariances, float))

    @property
    def dimension(self) -> int:
        return int(self.means.shape[-1])

    def normalised(self) -> GaussianMixture:
        """The same mixture with weights summing to 1."""
        return GaussianMixture(
            self.log_weights - logsumexp(self.log_weights), self.means, self.covariances
        )

    @cached_property
    def _precisions(self) -> FloatArray:
        """Σ_c⁻¹ of every component ``(C, d, d)``."""
        return np.asarray(np.linalg.inv(self.covariances), dtype=np.float64)

    @cached_property
    def _log_norms(self) -> FloatArray:
        """−½ log det(2π Σ_c) of every component ``(C,)`` (one small determinant per component,
        not a SciPy call per one)."""
        _, log_det = np.linalg.slogdet(self.covariances)
        return np.asarray(-0.5 * (log_det + self.dimension * np.log(2.0 * np.pi)))

    def _component_terms(self, points: FloatArray) -> tuple[FloatArray, FloatArray]:
        """log π_c N(θ; μ_c, Σ_c) ``(..., C)`` and the components' scores ``(..., C, d)``."""
        points = np.asarray(points, dtype=np.float64)
        offsets = points[..., None, :] - self.means  # (..., C, d)
        scores = -np.einsum("cde,...ce->...cd", self._precisions, offsets)
        # log N(θ; μ_c, Σ_c) = −½ (θ − μ_c)ᵀ Σ_c⁻¹ (θ − μ_c) − ½ log det(2π Σ_c), every component
        # at once
        logs = 0.5 * np.einsum("...cd,...cd->...c", offsets, scores) + self._log_norms
        return logs + self.log_weights, scores

    def log_density(self, points: FloatArray) -> FloatArray:
        """log Σ_c π_c N(θ; μ_c, Σ_c) at each point ``(..., d)`` → ``(...)``."""
        return self.log_density_and_score(points)[0]

    def score(self, points: FloatArray) -> FloatArray:
        """∇_θ log of the mixture at each point, ``(..., d)``: component scores weighted by their
        responsibilities (computed by log-sum-exp)."""
        return self.log_density_and_score(points)[1]

    def log_density_and_score(self, points: FloatArray) -> tuple[FloatArray, FloatArray]:
        """:meth:`log_density` and :meth:`score` at once (the component terms computed once), a
        few points at a time where every point's terms of every component would hold more than
        :data:`CHUNK_VALUES` numbers (a posterior of 2^19 components on a grid of 81 × 81)."""
        points = np.asarray(points, dtype=np.float64)
        per_point = self.log_weights.size * (3 * self.dimension + 3)
        if points.size // max(self.dimension, 1) * per_point <= CHUNK_VALUES:
            return self._log_density_and_score(points)
        flat = points.reshape(-1, points.shape[-1])
        total, score = np.empty(flat.shape[0]), np.empty_like(flat)
        step = max(1, CHUNK_VALUES // per_point)
        for begin in range(0, flat.shape[0], step):
            part = slice(begin, begin + step)
            total[part], score[part] = self._log_density_and_score(flat[part])
        return total.reshape(points.shape[:-1]), score.reshape(points.shape)

    def _log_density_and_score(self, points: FloatArray) -> tuple[FloatArray, FloatArray]:
        terms, scores = self._component_terms(points)
        total = _logsumexp_last(terms)
        responsibilities = np.exp(terms - total[..., None])
        return total, np.einsum("...c,...cd->...d", responsibilities, scores)

    def sample(self, rng: np.random.Generator, count: int) -> FloatArray:
        """``count`` exact draws ``(count, d)`` from the normalised mixture."""
        weights = np.exp(self.normalised().log_weights)
        components = rng.choice(weights.size, size=count, p=weights / weights.sum())
        noise = rng.standard_normal((count, self.dimension))
        factors = np.linalg.cholesky(self.covariances)
        return self.means[components] + np.einsum("nde,ne->nd", factors[components], noise)


def _logsumexp_last(terms: FloatArray) -> FloatArray:
    """log Σ exp over the last axis, by the largest term: :func:`scipy.special.logsumexp`'s value
    without its per-call overhead (about 0.5 ms, most of a particle step on a small mixture).
    A row of −∞ only (no mass) gives −∞."""
    top = np.max(terms, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(terms - top), axis=-1)) + top[..., 0]


def product_of_mixtures(factors: list[GaussianMixture]) -> GaussianMixture:
    """The mixture proportional to Π_k factors[k](θ), unnormalised (its log-weights carry the
    product's mass: logsumexp of them is log ∫ Π_k f_k). Components: every choice of one in each
    factor, in row-major order of the choices (all pairs of two mixtures at once)."""
    if not factors:
        raise ValueError("a product needs at least one factor")
    product = factors[0]
    for factor in factors[1:]:
        a, big_a = product.means[:, None, :], product.covariances[:, None]  # (n, 1, ...)
        b, big_b = factor.means[None, :, :], factor.covariances[None, :]  # (1, m, ...)
        precision_a, precision_b = np.linalg.inv(big_a), np.linalg.inv(big_b)
        joined = np.linalg.inv(precision_a + precision_b)
        means = np.einsum(
            "...de,...e->...d",
            joined,
            np.einsum("...de,...e->...d", precision_a, a)
            + np.einsum("...de,...e->...d", precision_b, b),
        )
        # log N(a; b, A + B) by a Cholesky factor of A + B
        spread = np.linalg.cholesky(big_a + big_b)
        offsets = np.linalg.solve(spread, (a - b)[..., None])[..., 0]
        log_normal = (
            -0.5 * np.einsum("...d,...d->...", offsets, offsets)
            - np.log(np.diagonal(spread, axis1=-2, axis2=-1)).sum(axis=-1)
            - 0.5 * product.dimension * np.log(2.0 * np.pi)
        )
        log_weights = product.log_weights[:, None] + factor.log_weights[None, :] + log_normal
        count, dimension = log_weights.size, product.dimension
        product = GaussianMixture(
            log_weights.reshape(count),
            means.reshape(count, dimension),
            joined.reshape(count, dimension, dimension),
        )
    return product
