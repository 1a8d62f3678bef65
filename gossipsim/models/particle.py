"""Models for particle protocols (SVGD, DSVGD, Forget-SVGD): log densities and their gradients at
points θ ∈ R^d, no exponential family.

A model with the capability :data:`~gossipsim.core.capabilities.LOGLIK_GRADIENT` offers

- ``particle_dimension`` d and ``sample_prior(rng, count)``: the particles start as exact prior
  draws;
- ``log_prior(θ)`` and ``log_likelihood(data, node, θ, rows=None)``: values ``(..., N)`` and
  gradients ``(..., N, d)`` for particle sets ``(..., N, d)`` (leading batch axes allowed), the
  likelihood summed over the node's rows (over ``rows`` only, scaled to the node's size, for a
  mini-batch); ``log_likelihood_score``, the gradient alone (by default taken from
  ``log_likelihood``), is what the protocols and the targets' scores call;
- ``exact_density(data, forgotten)``, optional: the posterior's normalised log-density where the
  model knows it (the contours of the ``particles`` figure);
- ``particle_target(data, forgotten)``: the posterior of all data but the forgotten nodes', known up
  to its normalising constant (:class:`~gossipsim.states.particlestate.ParticleTarget`: its score, exact
  samples where the model has them), against which the kernelized Stein discrepancy ``ksd`` is
  measured;
- ``particle_columns(requested)`` and ``evaluate_particles(data, particles, requested)``: held-out
  metrics of the particle-averaged predictive (``requested``: the nodes with unlearning requests).

:class:`ParticleClassifier` gives the classification metrics of item 8 of issue 22 from the model's
``predictive_probabilities``; a model may be both an exponential-family model (for G-FVL) and a
particle model (``logistic-regression``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from gossipsim.logdensity.densitygrid import ExactDensity
from gossipsim.models.classification import (
    classification_accuracy,
    classification_ece,
    classification_nll,
    particle_spread,
)
from gossipsim.states.particlestate import ParticleTarget

FloatArray = NDArray[np.float64]


class ParticleCapable:
    """The methods of the ``loglik-gradient`` capability (a mix-in of a :class:`~.base.Model`)."""

    temperature: float
    fixed_data: Any
    nodes: int

    @property
    @abstractmethod
    def particle_dimension(self) -> int:
        """d: the number of coordinates of a particle."""

    @abstractmethod
    def sample_prior(self, rng: np.random.Generator, count: int) -> FloatArray:
        """``count`` exact draws from the prior, ``(count, d)``."""

    @abstractmethod
    def log_prior(self, particles: FloatArray) -> tuple[FloatArray, FloatArray]:
        """log p0(θ) and ∇θ log p0(θ): ``(..., N)`` and ``(..., N, d)``."""

    @abstractmethod
    def log_likelihood(
        self, data: Any, node: int, particles: FloatArray, rows: NDArray[np.intp] | None = None
    ) -> tuple[FloatArray, FloatArray]:
        """Σ_i log p(x_i | θ) over node ``node``'s rows (``rows`` only, scaled by n_node/|rows|)
        and its gradient in θ: ``(..., N)`` and ``(..., N, d)``."""

    def log_likelihood_score(
        self, data: Any, node: int, particles: FloatArray, rows: NDArray[np.intp] | None = None
    ) -> FloatArray:
        """The gradient of :meth:`log_likelihood` alone (what the particle protocols step on): a
        model may skip computing the values."""
        return np.asarray(self.log_likelihood(data, node, particles, rows)[1])

    @abstractmethod
    def node_rows(self, data: Any, node: int) -> int:
        """How many rows node ``node`` holds (the mini-batch draws from them)."""

    def likelihood_score(
        self, data: Any, nodes: Sequence[int], particles: FloatArray
    ) -> FloatArray:
        """(1/α)·Σ over ``nodes`` of ∇θ log p(D_k | θ): the tempered likelihood score."""
        total = np.zeros_like(np.asarray(particles, dtype=np.float64))
        for node in nodes:
            total += self.log_likelihood_score(data, node, particles)
        return total / self.temperature

    def particle_target(self, data: Any, forgotten: frozenset[int]) -> ParticleTarget:
        """The posterior of every node's data but the ``forgotten`` nodes', through its score
        ∇ log p0 + (1/α)·Σ_k ∇ log p(D_k | θ) (eq. 1 of 000 tempered as in eq. 2 of 001)."""
        included = [k for k in range(self.nodes) if k not in forgotten]

        def score(particles: FloatArray) -> FloatArray:
            return self.log_prior(particles)[1] + self.likelihood_score(data, included, particles)

        return ParticleTarget(score, self.exact_sampler(data, forgotten))

    def exact_sampler(self, data: Any, forgotten: frozenset[int]) -> Any:
        """``(rng, count) -> (count, d)`` exact posterior draws where the model has them (None)."""
        return None

    def exact_density(self, data: Any, forgotten: frozenset[int]) -> ExactDensity | None:
        """The normalised log-density of the posterior of every node's data but the
        ``forgotten`` nodes', with a box holding nearly all of its mass, where the model knows it
        exactly (None): summary.json records it on a grid for d = 2, the contours of the
        ``particles`` figure (:mod:`gossipsim.logdensity.densitygrid`)."""
        return None

    def particle_columns(self, requested: frozenset[int]) -> tuple[str, ...]:
        """metrics.csv columns of :meth:`evaluate_particles`."""
        return ("particle_spread",)

    def evaluate_particles(
        self, data: Any, particles: FloatArray, requested: frozenset[int]
    ) -> dict[str, FloatArray]:
        """Held-out metrics of each particle set ``(R, N, d)``: ``(R,)`` per column."""
        return {"particle_spread": particle_spread(particles)}


class ParticleClassifier(ParticleCapable):
    """Classification metrics of the particle-averaged predictive (eq. 14 of 000 for the ECE):
    ``accuracy``, ``nll``, ``ece`` and, with unlearning requests, ``accuracy_forgotten`` (held-out
    rows whose label only requested nodes hold in training) and ``accuracy_remaining`` (the rest);
    NaN where no such row exists."""

    ece_bins: ClassVar[int] = 10

    @abstractmethod
    def predictive_probabilities(self, data: Any, particles: FloatArray) -> FloatArray:
        """(1/N)·Σ_n p(y = c | x, θ_n) for every held-out row: ``(..., M, C)``."""

    @abstractmethod
    def training_labels(self, data: Any, node: int) -> NDArray[np.int64]:
        """The class indices of node ``node``'s training rows."""

    @abstractmethod
    def test_labels(self, data: Any) -> NDArray[np.int64]:
        """The class indices of the held-out rows."""

    def bins(self) -> int:
        return self.ece_bins

    def particle_columns(self, requested: frozenset[int]) -> tuple[str, ...]:
        split = ("accuracy_forgotten", "accuracy_remaining") if requested else ()
        return ("accuracy", "nll", "ece", *split, "particle_spread")

    def forgotten_rows(self, data: Any, requested: frozenset[int]) -> NDArray[np.bool_]:
        """Held-out rows whose label no node without a request holds."""
        kept = [k for k in range(self.nodes) if k not in requested]
        held = (
            np.unique(np.concatenate([self.training_labels(data, k) for k in kept]))
            if kept
            else np.array([], dtype=np.int64)
        )
        return ~np.isin(self.test_labels(data), held)

    def evaluate_particles(
        self, data: Any, particles: FloatArray, requested: frozenset[int]
    ) -> dict[str, FloatArray]:
        probabilities = self.predictive_probabilities(data, particles)
        labels = self.test_labels(data)
        out = {
            "accuracy": classification_accuracy(probabilities, labels),
            "nll": classification_nll(probabilities, labels),
            "ece": classification_ece(probabilities, labels, self.bins()),
        }
        if requested:
            rows = self.forgotten_rows(data, requested)
            for name, mask in (("accuracy_forgotten", rows), ("accuracy_remaining", ~rows)):
                out[name] = (
                    classification_accuracy(probabilities[..., mask, :], labels[mask])
                    if mask.any()
                    else np.full(probabilities.shape[:-2], np.nan)
                )
        out["particle_spread"] = particle_spread(particles)
        return out
