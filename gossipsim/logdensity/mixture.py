"""Gaussian mixtures: log-density, score, exact samples, and products of mixtures.

A product of Gaussian mixtures is a Gaussian mixture (one component per choice of a component in
each factor), by N(θ; a, A)·N(θ; b, B) = N(a; b, A + B)·N(θ; c, C) with C = (A⁻¹ + B⁻¹)⁻¹ and
c = C(A⁻¹a + B⁻¹b). So a Gaussian prior times node likelihoods that are mixtures in θ has an exact
posterior, with or without any node: a target whose density, score and samples are all exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

FloatArray = NDArray[np.float64]


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

    def _component_terms(self, points: FloatArray) -> tuple[FloatArray, FloatArray]:
        """log π_c N(θ; μ_c, Σ_c) ``(..., C)`` and the components' scores ``(..., C, d)``."""
        points = np.asarray(points, dtype=np.float64)
        precisions = np.linalg.inv(self.covariances)
        offsets = points[..., None, :] - self.means  # (..., C, d)
        flat = points.reshape(-1, self.dimension)
        # SciPy squeezes every axis of length 1 from its result: reshaped back to the points' axes
        logs = np.stack(
            [
                np.reshape(multivariate_normal.logpdf(flat, mean, cov), points.shape[:-1])
                for mean, cov in zip(self.means, self.covariances, strict=True)
            ],
            axis=-1,
        )
        scores = -np.einsum("cde,...ce->...cd", precisions, offsets)
        return logs + self.log_weights, scores

    def log_density(self, points: FloatArray) -> FloatArray:
        """log Σ_c π_c N(θ; μ_c, Σ_c) at each point ``(..., d)`` → ``(...)``."""
        terms, _ = self._component_terms(points)
        return np.asarray(logsumexp(terms, axis=-1))

    def score(self, points: FloatArray) -> FloatArray:
        """∇_θ log of the mixture at each point, ``(..., d)``: component scores weighted by their
        responsibilities (computed by log-sum-exp)."""
        terms, scores = self._component_terms(points)
        responsibilities = np.exp(terms - logsumexp(terms, axis=-1, keepdims=True))
        return np.einsum("...c,...cd->...d", responsibilities, scores)

    def sample(self, rng: np.random.Generator, count: int) -> FloatArray:
        """``count`` exact draws ``(count, d)`` from the normalised mixture."""
        weights = np.exp(self.normalised().log_weights)
        components = rng.choice(weights.size, size=count, p=weights / weights.sum())
        noise = rng.standard_normal((count, self.dimension))
        factors = np.linalg.cholesky(self.covariances)
        return self.means[components] + np.einsum("nde,ne->nd", factors[components], noise)


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
