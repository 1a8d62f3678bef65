"""The hierarchical Gaussian prior: weights v ∼ N(0, ξ⁻¹ I), precision ξ ∼ Gamma(a, rate b), with
ζ = log ξ the coordinate the particles carry (Gershman et al. 2012, used by SVGD and DSVGD).

On (v, ζ), with m weights and the log-Jacobian ζ of ξ = e^ζ included:

    log p(v, ζ) = (m/2)·ζ − (e^ζ/2)·‖v‖² − (m/2)·log 2π + a·log b − log Γ(a) + a·ζ − b·e^ζ,
    ∂/∂v = −e^ζ·v,    ∂/∂ζ = m/2 − (e^ζ/2)·‖v‖² + a − b·e^ζ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln

FloatArray = NDArray[np.float64]
LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class GammaPrior:
    """Gamma(shape a, rate b) on a precision; the mean is a/b."""

    shape: float
    rate: float

    def __post_init__(self) -> None:
        for name, value in (("shape", self.shape), ("rate", self.rate)):
            if not (np.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def hierarchical_log_prior(
    weights: FloatArray, log_precision: FloatArray, prior: GammaPrior
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """log p(v, ζ) and its gradients in v and ζ: shapes ``(...)``, ``(..., m)`` and ``(...)``.

    ``weights`` v is ``(..., m)`` and ``log_precision`` ζ ``(...)``.
    """
    weights = np.asarray(weights, dtype=np.float64)
    log_precision = np.asarray(log_precision, dtype=np.float64)
    count = weights.shape[-1]
    precision = np.exp(log_precision)
    squared_norm = np.einsum("...m,...m->...", weights, weights)
    log_density = (
        0.5 * count * (log_precision - LOG_2PI)
        - 0.5 * precision * squared_norm
        + prior.shape * np.log(prior.rate)
        - gammaln(prior.shape)
        + prior.shape * log_precision
        - prior.rate * precision
    )
    weight_gradient = -precision[..., None] * weights
    precision_gradient = (
        0.5 * count - 0.5 * precision * squared_norm + prior.shape - prior.rate * precision
    )
    return log_density, weight_gradient, precision_gradient


def sample_hierarchical_prior(
    rng: np.random.Generator, count: int, weights: int, prior: GammaPrior
) -> tuple[FloatArray, FloatArray]:
    """``count`` exact draws (v, ζ) from the prior: ``(count, weights)`` and ``(count,)``."""
    precision = rng.gamma(prior.shape, 1.0 / prior.rate, size=count)
    draws = rng.standard_normal((count, weights)) / np.sqrt(precision)[:, None]
    return draws, np.log(precision)
