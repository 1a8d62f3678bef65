"""A point estimate as the protocol state: the ``point`` representation of ``fedavg``.

A frequentist protocol (``[protocol] kind = "fedavg"``) holds one set of weights θ, not a
distribution. It is recorded as a particle set of one particle, ``(1, d)``, so that the model's
particle metrics apply unchanged: the held-out ``accuracy``, ``nll`` and ``ece`` of the particle-
averaged predictive are those of the point's own softmax (sigmoid for logistic regression), since
an average over one particle is that particle.

Two things of the particle sets do not carry over to a single point, and are replaced here:

- the divergence. The kernelized Stein discrepancy of one particle needs a kernel bandwidth, and
  the median rule gives none (there is no pair of particles: 0/log 1); with a constant kernel the
  KSD of one point is the squared norm of the target's score there. The point's divergence is that
  norm, ``score_norm`` = ‖∇θ log p(θ | data)‖ (the posterior of the data meant to be learned,
  tempered as the particle protocols' is): 0 exactly at the posterior's mode (the MAP), the point
  a frequentist fit of the same loss is meant to reach, and larger the farther the point is from
  being stationary. It has no scale of its own (it grows with the number of rows), so
  ``[metrics] tolerance = "auto"`` judges it relatively to the run's own level, as the KSD;
- ``particle_spread``, which is 0 for one particle: the column is left out.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from gossipsim.states.particlestate import ParticleSets
from gossipsim.states.representations import Target, register_representation

#: the particle metric a single point leaves out (always 0)
SPREAD = "particle_spread"


class PointEstimates(ParticleSets):
    """States are single points ``(1, d)``: divergence ``score_norm``, the model's particle
    metrics but the spread."""

    name = "point"
    divergence_name: ClassVar[str] = "score_norm"

    def divergence(self, target: Target, states: np.ndarray) -> np.ndarray:
        """‖∇θ log p(θ | data)‖ at each recorded point ``(R, 1, d)``: ``(R,)``."""
        points = np.asarray(states, dtype=np.float64)
        score = np.asarray(target.score(points))
        return np.asarray(np.sqrt(np.sum(np.square(score), axis=(-2, -1))))

    def columns(self, model: Any, requested: frozenset[int]) -> tuple[str, ...]:
        return tuple(c for c in super().columns(model, requested) if c != SPREAD)

    def evaluate(
        self, model: Any, data: Any, states: np.ndarray, requested: frozenset[int] = frozenset()
    ) -> dict[str, np.ndarray]:
        found = super().evaluate(model, data, states, requested)
        found.pop(SPREAD, None)
        return found


POINT_ESTIMATES = register_representation(PointEstimates())
