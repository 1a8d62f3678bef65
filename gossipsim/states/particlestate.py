"""Particle sets as protocol states: the ``particles`` representation and the targets it measures
against.

A particle protocol (``svgd``, ``dsvgd``) records its global particles, ``(N, d)`` per record. The
divergence of a set to the target posterior p is the kernelized Stein discrepancy (eq. 10 of 003)

    S(q̂, p) = (1/N²) Σ_ij u_p(θ_i, θ_j)

with the RBF kernel of SVGD and the median bandwidth of the set being judged; it needs only the
target's score ∇ log p (its normalising constant is never known), and it is 0 exactly where the
SVGD direction vanishes. It is reported as ``ksd`` (``retrain_ksd`` for the retrain baseline), and
:mod:`gossipsim.measurement.metrics` applies the tolerance, convergence and latency definitions to it as to KL.
The held-out metrics come from the model (``particle_columns`` / ``evaluate_particles``), for the
retrain baseline's particles too (``retrain_`` columns).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from gossipsim.core.memory import ksd_sets_at_once
from gossipsim.particles.kernels import median_bandwidth, pairwise_squared_distances
from gossipsim.particles.stein import kernel_stein_discrepancy
from gossipsim.states.representations import Representation, Target, register_representation

FloatArray = NDArray[np.float64]
Score = Callable[[FloatArray], FloatArray]
Sampler = Callable[[np.random.Generator, int], FloatArray]


class ParticleTarget(Target):
    """A posterior known through its score (and exact draws where the model has them)."""

    def __init__(self, score: Score, sampler: Sampler | None = None) -> None:
        self._score = score
        self._sampler = sampler

    def score(self, points: np.ndarray) -> np.ndarray:
        return self._score(np.asarray(points, dtype=np.float64))

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        if self._sampler is None:
            return super().sample(rng, count)
        return self._sampler(rng, count)

    @property
    def has_samples(self) -> bool:
        return self._sampler is not None


def stein_discrepancy(target: Target, particle_sets: np.ndarray) -> np.ndarray:
    """KSD (V-statistic, median bandwidth of each set) of each set ``(R, N, d)`` to ``target``."""
    sets = np.asarray(particle_sets, dtype=np.float64)
    out = np.empty(sets.shape[0])
    step = ksd_sets_at_once(sets.shape[-2])  # bounds the N × N × sets temporaries
    for begin in range(0, sets.shape[0], step):
        chunk = sets[begin : begin + step]
        h = median_bandwidth(pairwise_squared_distances(chunk, chunk), "median")
        out[begin : begin + step] = kernel_stein_discrepancy(chunk, target.score(chunk), h)
    return out


class ParticleSets(Representation):
    """States are particle sets ``(N, d)``: divergence ``ksd``, the model's particle metrics."""

    name = "particles"
    divergence_name: ClassVar[str] = "ksd"
    evaluates_retrain: ClassVar[bool] = True
    particle_sets: ClassVar[bool] = True
    absolute_scale: ClassVar[bool] = False

    def divergence(self, target: Target, states: np.ndarray) -> np.ndarray:
        return stein_discrepancy(target, states)

    def target(self, model: Any, data: Any, forgotten: frozenset[int]) -> Target:
        return model.particle_target(data, forgotten)

    def columns(self, model: Any, requested: frozenset[int]) -> tuple[str, ...]:
        return tuple(model.particle_columns(requested))

    def evaluate(
        self, model: Any, data: Any, states: np.ndarray, requested: frozenset[int] = frozenset()
    ) -> dict[str, np.ndarray]:
        return dict(model.evaluate_particles(data, np.asarray(states, dtype=float), requested))


PARTICLE_SETS = register_representation(ParticleSets())
