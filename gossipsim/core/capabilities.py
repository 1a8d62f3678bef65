"""What a model can offer a protocol: named capabilities and the settings they take.

A model class lists its capabilities in ``Model.capabilities``; a protocol kind
(:class:`gossipsim.protocols.registry.ProtocolKind`) checks that the ones it needs are there and
then calls the matching methods. Models never build protocols.

- :data:`EXACT_FACTORS`: exact conjugate statistics. ``model.factors(data)`` gives each node's exact
  likelihood factor in natural parameters, shape (K, D) (eqs. 13-14), to be added to
  ``model.prior``; with ``model.exact_sums`` the states are the correctly rounded sums of the
  factors they hold (:mod:`gossipsim.families.exactsum`), in both engines.
- :data:`MEAN_GRADIENT`: expected log-likelihood gradients. ``model.mean_gradient(data, estimator)``
  gives a function ``(η, k, rng) -> ∇_μ E_{q_η}[L_k]`` (eq. 17) for one of ``model.estimators``,
  configured by an :class:`EstimatorSettings`; ``model.in_domain(η)`` says where E_q[L_k] is finite.
- :data:`BATCHED_MEAN_GRADIENT`: the same gradients for a batch of runs at once, for the vectorised
  engine. ``model.batched_mean_gradient(data, estimator)`` gives a function
  ``(η (B, D), holders (B,), rngs) -> (B, D)`` that draws row b's samples from ``rngs[b]`` with the
  calls the one-run estimator makes, and ``model.in_domain_rows(η (B, D))`` is ``in_domain`` per row.
- :data:`LOGLIK_GRADIENT`: log-densities and their gradients at points θ ∈ R^d, for particle
  protocols. ``model.log_prior(θ)``, ``model.log_likelihood(data, k, θ, rows)`` (values and
  ∇θ for particle sets ``(..., N, d)``), ``model.sample_prior(rng, n)``,
  ``model.particle_target(data, forgotten)`` and the particle metrics
  (:class:`gossipsim.models.particle.ParticleCapable`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

EXACT_FACTORS = "exact-factors"
MEAN_GRADIENT = "mean-gradient"
LOGLIK_GRADIENT = "loglik-gradient"
BATCHED_MEAN_GRADIENT = "batched-mean-gradient"
CAPABILITIES = (EXACT_FACTORS, MEAN_GRADIENT, LOGLIK_GRADIENT, BATCHED_MEAN_GRADIENT)

#: what a model that declares a capability must define (the methods and attributes above; checked
#: when its kind is loaded, :meth:`gossipsim.models.Model.unmet_needs`)
CAPABILITY_METHODS: dict[str, tuple[str, ...]] = {
    EXACT_FACTORS: ("factors",),
    MEAN_GRADIENT: ("mean_gradient", "estimators"),
    BATCHED_MEAN_GRADIENT: ("batched_mean_gradient", "in_domain_rows"),
    LOGLIK_GRADIENT: (
        "particle_dimension", "sample_prior", "log_prior", "log_likelihood", "node_rows",
        "particle_target", "particle_columns", "evaluate_particles",
    ),
}  # fmt: skip

#: what ``model.mean_gradient`` returns: ``(η, k, rng) -> ∇_μ E_{q_η}[L_k]`` (eq. 17)
MeanGradient = Callable[[np.ndarray, int, np.random.Generator], np.ndarray]
#: what ``model.batched_mean_gradient`` returns: ``(η (B, D), holders (B,), rngs) -> (B, D)``
BatchedMeanGradient = Callable[[np.ndarray, np.ndarray, Sequence[np.random.Generator]], np.ndarray]


@dataclass(frozen=True)
class EstimatorSettings:
    """How a mean gradient is estimated: ``estimator`` (one of the model's), ``samples`` S,
    ``samples_per`` ("point": S draws per data point; "total": S in all) and the REINFORCE
    ``baseline`` c."""

    estimator: str = "reinforce"
    samples: int = 30
    samples_per: str = "point"
    baseline: float = 0.0
