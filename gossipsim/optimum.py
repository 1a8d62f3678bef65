"""The variational optimum in an exponential family: the point G-FVL converges to, found centrally.

With every included node's data pooled at one node, the local step of eq. (17) is

    η ← η − ρ r(η),     r(η) = η − η₀ + (1/α) ∇_μ E_{q_η}[L(θ)],

where L is the summed log-loss of the pooled data. r(η) = ∇_μ F is the natural gradient of the free
energy of eq. (2) restricted to the family,

    F(η) = (1/α) E_{q_η}[L(θ)] + KL(q_η ‖ p₀)        (up to a constant: KL(q_η ‖ p(θ | D))),

so r(η*) = 0 exactly at a stationary point of F. It is also G-FVL's fixed point: at a fixed point
of eq. (17) every local factor is η_k = −(1/α) ∇_μ E_q[L_k], and summing over the nodes gives
r(η) = 0 (the gradient is linear in the data). :func:`variational_optimum` finds it by damped
natural-gradient steps:

* the step size ρ starts at 1 and is halved until the step stays in the family's domain and does not
  increase F; after an accepted step it is doubled again (at most 1). The natural gradient is a
  descent direction of F, so this converges where the plain iteration with ρ = 1 oscillates (it does
  for mean-field Gaussians and for nearly separable data);
* once F can no longer tell two points apart (F rises by at most 1e-10 relative, the rounding
  level of its terms), a step is accepted when it shrinks the residual instead;
* it stops when the **stationarity residual** ‖r(η)‖ / max(‖η‖, ‖η₀‖) is at most ``tol``
  (default :data:`STATIONARITY_TOL` = 1e-9) and raises :class:`OptimumError` (one line) when that is
  not reached within ``max_steps`` steps or the step size underflows.

Everything here is a pure function of arrays and callables: the models supply the gradient, the
free energy and the domain (:mod:`gossipsim.models.regression`,
:mod:`gossipsim.models.beta_exponential`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

#: documented tolerance on the relative stationarity residual ‖r(η)‖ / max(‖η‖, ‖η₀‖)
STATIONARITY_TOL = 1e-9
MAX_STEPS = 5000
_MIN_STEP = 2.0**-50
_ROUNDING = 64 * np.finfo(float).eps
#: a step that shrinks the residual may raise F by this much relative (rounding in F's terms, which
#: can be far larger than F itself, e.g. the Beta–exponential KL)
_SLACK = 1e-10


class OptimumError(ConfigError):
    """The variational optimum was not found to the documented tolerance (a one-line message)."""


@dataclass(frozen=True)
class Optimum:
    """A stationary point of the free energy: natural parameters, steps taken, final residual."""

    eta: np.ndarray
    steps: int
    residual: float  # relative stationarity residual ‖r(η)‖ / max(‖η‖, ‖η₀‖)
    free_energy: float


def stationarity_residual(
    eta: np.ndarray, prior: np.ndarray, mean_gradient: np.ndarray, temperature: float = 1.0
) -> np.ndarray:
    """r(η) = η − η₀ + (1/α) ∇_μ E_q[L]: the residual of G-FVL's fixed-point equation (eq. 17 with
    all data at one node), and the natural gradient of the free energy (eq. 2)."""
    return np.asarray(eta, dtype=float) - prior + np.asarray(mean_gradient) / temperature


def relative_residual(residual: np.ndarray, eta: np.ndarray, prior: np.ndarray) -> float:
    """‖r‖ / max(‖η‖, ‖η₀‖): the residual relative to the scale of the natural parameters."""
    scale = max(float(np.linalg.norm(eta)), float(np.linalg.norm(prior)), np.finfo(float).tiny)
    return float(np.linalg.norm(residual)) / scale


def variational_optimum(
    prior: np.ndarray,
    mean_gradient: Callable[[np.ndarray], np.ndarray],
    free_energy: Callable[[np.ndarray], float],
    in_domain: Callable[[np.ndarray], bool],
    *,
    temperature: float = 1.0,
    start: np.ndarray | None = None,
    tol: float = STATIONARITY_TOL,
    max_steps: int = MAX_STEPS,
    what: str = "variational optimum",
) -> Optimum:
    """The stationary point of F(η) = (1/α) E_q[L] + KL(q ‖ p₀) in the family (module docstring).

    ``mean_gradient(η)`` is ∇_μ E_{q_η}[L] of the pooled data (not divided by α), ``free_energy(η)``
    is F up to an additive constant (finite inside the domain), ``in_domain(η)`` says whether η is
    admissible. The search starts at ``start`` (default: the prior). Raises :class:`OptimumError`
    naming ``what`` when the relative residual does not reach ``tol``.
    """
    prior = np.asarray(prior, dtype=float)
    eta = np.array(prior if start is None else start, dtype=float, copy=True)
    if not in_domain(eta):
        raise OptimumError(what, "the starting point is outside the family's domain")

    def residual(x: np.ndarray) -> np.ndarray:
        return stationarity_residual(x, prior, mean_gradient(x), temperature)

    r = residual(eta)
    energy = float(free_energy(eta))
    rho = 1.0
    for step in range(max_steps + 1):
        rel = relative_residual(r, eta, prior)
        if not np.isfinite(rel):
            raise OptimumError(what, f"the free energy's gradient is not finite after {step} steps")
        if rel <= tol:
            return Optimum(eta, step, rel, energy)
        if step == max_steps:
            break
        rho = min(1.0, 2.0 * rho)
        norm_r = float(np.linalg.norm(r))
        while True:
            candidate = eta - rho * r
            if in_domain(candidate):
                value = float(free_energy(candidate))
                if np.isfinite(value):
                    if value < energy - _ROUNDING * (abs(energy) + 1.0):
                        r_new = residual(candidate)
                        break
                    # F cannot tell (its terms cancel to rounding level): judge by the residual
                    if value <= energy + _SLACK * (abs(energy) + 1.0):
                        r_new = residual(candidate)
                        if float(np.linalg.norm(r_new)) < norm_r:
                            break
            rho *= 0.5
            if rho < _MIN_STEP:
                raise OptimumError(
                    what,
                    f"did not converge: no step decreases the free energy after {step} steps "
                    f"(relative stationarity residual {rel:.2g} > {tol:g})",
                )
        eta, r, energy = candidate, r_new, value
    raise OptimumError(
        what,
        f"did not converge in {max_steps} steps (relative stationarity residual {rel:.2g} > {tol:g})",
    )
