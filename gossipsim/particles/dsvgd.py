"""DSVGD and Forget-SVGD as the papers write them (``variant = "paper"``), as pure functions.

A node k holding the token with the global particles (their Gaussian KDE is q) and its local
particles (their KDE is its approximate likelihood t_k):

1. moves the global particles by L SVGD steps towards the tilted distribution (eq. 7 of 000)

       p̃(θ) ∝ q(θ) / t_k(θ) · exp((1/α)·Σ_i log p(x_i | θ));

2. moves its local particles by L' SVGD steps towards t_k^new = q^new / q^old · t_k^old (eq. 14 of
   003), starting from the old local particles (the reference code's choice).

Forget-SVGD (eq. 8 of 000) moves the global particles by L steps towards
q(θ) / t_k(θ) · exp(−(β/α)·Σ_i log p(x_i | θ)) (β = 1 in the paper), after which the node holds
no factor.

Every KDE has the fixed bandwidth λ (0.55 in the reference code, a standard deviation:
:mod:`gossipsim.particles.kde`) and the reference code's per-component floor (1e-9). Each SVGD loop
starts a fresh AdaGrad history, as the reference code's does. Far from the particles the ratio of
two KDEs of one bandwidth is a linear tilt with a constant gradient, which AdaGrad turns into
full-speed drift; the floor stops it, and makes t_k inert once its particles lie beyond the KDE's
reach. This module reproduces that behaviour on purpose; the default variant is
:mod:`gossipsim.particles.aggregated`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from gossipsim.particles.adagrad import AdaGradSettings
from gossipsim.particles.kde import kde_log_density_and_score
from gossipsim.particles.kernels import BandwidthRule
from gossipsim.particles.svgd import run_svgd

FloatArray = NDArray[np.float64]
Score = Callable[[FloatArray], FloatArray]

#: the reference code's KDE bandwidth λ (a standard deviation) and per-component floor
PAPER_KDE_BANDWIDTH = 0.55
PAPER_KDE_FLOOR = 1e-9


@dataclass(frozen=True)
class PaperSettings:
    """The constants of a paper-variant visit: L, L', AdaGrad, the SVGD kernel's bandwidth rule,
    the KDE's λ and floor, the temperature α and the forgetting power β."""

    local_iterations: int = 200
    fit_iterations: int = 200
    adagrad: AdaGradSettings = field(
        default_factory=lambda: AdaGradSettings(step_size=0.05, fudge=1e-9)
    )
    kernel_rule: BandwidthRule = "median"
    kernel_bandwidth: float | None = None
    kde_bandwidth: float = PAPER_KDE_BANDWIDTH
    kde_floor: float = PAPER_KDE_FLOOR
    temperature: float = 1.0
    forget_tempering: float = 1.0

    def __post_init__(self) -> None:
        if self.local_iterations < 1 or self.fit_iterations < 0:
            raise ValueError("local_iterations must be >= 1 and fit_iterations >= 0")
        for name in ("kde_bandwidth", "temperature", "forget_tempering"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def kde_score(settings: PaperSettings, centres: FloatArray) -> Score:
    """∇ log of the KDE of ``centres`` ``(..., N, d)`` (bandwidth λ, floor), as a function."""

    def score(points: FloatArray) -> FloatArray:
        return kde_log_density_and_score(
            points, centres, settings.kde_bandwidth, floor=settings.kde_floor
        )[1]

    return score


def _svgd(particles: FloatArray, score: Score, steps: int, settings: PaperSettings) -> FloatArray:
    return run_svgd(
        particles, score, steps, settings.adagrad, rule=settings.kernel_rule,
        bandwidth=settings.kernel_bandwidth,
    )  # fmt: skip


def paper_visit(
    global_particles: FloatArray,
    local_particles: FloatArray,
    likelihood_score: Score,
    settings: PaperSettings,
) -> tuple[FloatArray, FloatArray]:
    """One DSVGD visit (eq. 7 of 000, then eq. 14 of 003): the new global and local particles.

    ``likelihood_score`` gives ∇θ Σ_i log p(x_i | θ) over the node's data (or a mini-batch
    scaled to it), untempered."""
    q_old = np.asarray(global_particles, dtype=np.float64)
    t_old = np.asarray(local_particles, dtype=np.float64)
    q_old_score, t_old_score = kde_score(settings, q_old), kde_score(settings, t_old)
    inverse_temperature = 1.0 / settings.temperature

    def tilted(theta: FloatArray) -> FloatArray:
        return (
            q_old_score(theta) - t_old_score(theta) + inverse_temperature * likelihood_score(theta)
        )

    q_new = _svgd(q_old, tilted, settings.local_iterations, settings)
    q_new_score = kde_score(settings, q_new)

    def factor(theta: FloatArray) -> FloatArray:
        return q_new_score(theta) - q_old_score(theta) + t_old_score(theta)

    t_new = _svgd(t_old, factor, settings.fit_iterations, settings)
    return q_new, t_new


def paper_forget(
    global_particles: FloatArray,
    local_particles: FloatArray,
    likelihood_score: Score,
    settings: PaperSettings,
) -> FloatArray:
    """One Forget-SVGD visit (eq. 8 of 000): the global particles moved by L SVGD steps towards
    q / t_k · exp(−(β/α)·Σ_i log p(x_i | θ))."""
    q_old = np.asarray(global_particles, dtype=np.float64)
    t_old = np.asarray(local_particles, dtype=np.float64)
    q_old_score, t_old_score = kde_score(settings, q_old), kde_score(settings, t_old)
    weight = settings.forget_tempering / settings.temperature

    def forgetting(theta: FloatArray) -> FloatArray:
        return q_old_score(theta) - t_old_score(theta) - weight * likelihood_score(theta)

    return _svgd(q_old, forgetting, settings.local_iterations, settings)
