"""What the models made only for particle protocols share: a :class:`~.base.Model` with the
``loglik-gradient`` capability and no exponential family.

Its states are particle sets (the protocol's): a message carries d numbers per particle
(:attr:`ParticleModel.message_entries` is d; the protocol multiplies by its number of particles),
and its target is the posterior known through its score
(:meth:`~.particle.ParticleCapable.particle_target`). Held-out metrics of many recorded particle
sets are computed a few sets at a time (:func:`in_chunks`), so that a network's activations for
every set, particle and test row never live at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from gossipsim.core.capabilities import LOGLIK_GRADIENT
from gossipsim.core.schema import format_number
from gossipsim.errors import ConfigError
from gossipsim.models.base import Model
from gossipsim.models.particle import ParticleCapable
from gossipsim.states.representations import Target

FloatArray = NDArray[np.float64]

#: prior parameters lie here (in absolute value): their powers, logarithms and reciprocals, and the
#: draws they give, are then finite, non-zero floats
PRIOR_RANGE = (1e-100, 1e100)

#: numbers of temporaries one chunk of :func:`in_chunks` may hold (2^22: 32 MiB of float64)
CHUNK_VALUES = 2**22


def in_chunks(
    function: Callable[[FloatArray], FloatArray], particles: FloatArray, values_per_set: float
) -> FloatArray:
    """``function`` of particle sets ``(..., N, d)`` applied to a few sets at a time (as many as
    keep ``values_per_set`` temporaries each within :data:`CHUNK_VALUES`) and joined again: the
    leading axes of the result are those of the sets."""
    particles = np.asarray(particles, dtype=np.float64)
    lead = particles.shape[:-2]
    flat = particles.reshape(-1, *particles.shape[-2:])
    step = max(1, int(CHUNK_VALUES // max(values_per_set, 1.0)))
    parts = [function(flat[begin : begin + step]) for begin in range(0, flat.shape[0], step)]
    joined = np.concatenate(parts, axis=0) if parts else function(flat)
    return joined.reshape(lead + joined.shape[1:])


class ParticleModel(ParticleCapable, Model):
    """A model for particle protocols only: capability ``loglik-gradient``, no exponential family
    (G-FVL cannot learn it), its target the posterior's score."""

    capabilities: ClassVar[frozenset[str]] = frozenset({LOGLIK_GRADIENT})

    @property
    def message_entries(self) -> int:
        """Numbers per particle a message carries: d (the protocol multiplies by its particles)."""
        return self.particle_dimension

    def in_domain(self, eta: np.ndarray) -> bool:
        """Every point θ ∈ R^d is a state."""
        return True

    def node_sizes(self, data: Any) -> list[int]:
        """Each node's rows (:meth:`~.particle.ParticleCapable.node_rows`); ``[]`` for data drawn
        per run (``data`` None)."""
        return [] if data is None else [self.node_rows(data, k) for k in range(self.nodes)]

    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Target:
        """The posterior of all data but the ``forgotten`` nodes', through its score."""
        return self.particle_target(data, forgotten)

    @classmethod
    def prepare(
        cls, model: Mapping[str, Any], key: str = "model"
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The prior parameters (each within :data:`PRIOR_RANGE`) and the model's own keys."""
        prior, _ = super().prepare(model, key)
        low, high = PRIOR_RANGE
        for param in cls.prior_params:
            value = abs(float(prior[param.name]))
            if value > high or (param.domain == "positive" and value < low):
                span = f"[{low:g}, {high:g}]" if param.domain == "positive" else f"±{high:g}"
                raise ConfigError(
                    f"{key}.prior.{param.name}",
                    f"must lie within {span} (got {format_number(prior[param.name])}): the model's arithmetic "
                    "needs its powers, logarithms and the draws it gives to be finite floats",
                )
        return prior, {k.name: k.read(model, key) for k in cls.model_keys}
