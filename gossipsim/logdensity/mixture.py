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
        logs = np.stack(
            [
                multivariate_normal.logpdf(points, mean, cov, allow_singular=False)
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
    factor, in row-major order of the choices."""
    if not factors:
        raise ValueError("a product needs at least one factor")
    product = factors[0]
    for factor in factors[1:]:
        log_weights, means, covariances = [], [], []
        for wa, a, big_a in zip(
            product.log_weights, product.means, product.covariances, strict=True
        ):
            for wb, b, big_b in zip(
                factor.log_weights, factor.means, factor.covariances, strict=True
            ):
                joined = np.linalg.inv(np.linalg.inv(big_a) + np.linalg.inv(big_b))
                log_weights.append(wa + wb + multivariate_normal.logpdf(a, b, big_a + big_b))
                means.append(joined @ (np.linalg.solve(big_a, a) + np.linalg.solve(big_b, b)))
                covariances.append(joined)
        product = GaussianMixture(np.array(log_weights), np.array(means), np.array(covariances))
    return product
