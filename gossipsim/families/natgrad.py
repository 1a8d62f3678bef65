"""Natural-gradient estimators for G-FVL with non-conjugate losses (Section III-C, eqs. 17-20).

Every estimator returns ``g = ∇_μ E_{q_η}[f(θ)]``, the gradient of the expected loss with respect
to the *mean* parameters μ = ∇A(η) of q, in the same flat layout as η. It enters the local step

    η ← η − ρ (η_k + g / α)                                             (eq. 17)

Estimators:

* :func:`reinforce_mean_gradient` — the score-function (REINFORCE) estimator
  ``F(η)⁻¹ · scale · Σ_s (f(θ_s) − c) (s(θ_s) − μ)`` (eqs. 18-20) with the Fisher inverse applied
  exactly: a linear solve for a generic family, a closed form through the (m, Σ) parametrisation
  for the Gaussian families (dispatched automatically to their ``reinforce_mean_gradient``).
  Eq. (18) is recovered with ``scale = 1/S``.
* :func:`gaussian_mean_gradient` — for Gaussian q, from E_q[∇f] and E_q[∇²f] (Bonnet and Price
  theorems; Khan & Lin 2017), with the expectations either exact (quadrature, closed form) or
  estimated by samples θ = m + Lε (:func:`reparameterisation_mean_gradient`).

For the full-covariance Gaussian the μ₂ block of g is the symmetric Frobenius gradient (see
:mod:`gossipsim.families.gaussian`), so η₂ stays symmetric under eq. (17).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gossipsim.families.expfam import ExponentialFamily

#: per-sample gradients (S, d) and Hessians (S, d, d) (or Hessian diagonals (S, d)) of f at θ (S, d)
GradHess = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def score_sum(
    family: ExponentialFamily,
    eta: np.ndarray,
    thetas: np.ndarray,
    weights: np.ndarray,
    scale: float = 1.0,
) -> np.ndarray:
    """``scale · Σ_s w_s (s(θ_s) − μ)``: the weighted score ∇_η log q summed over draws (eq. 20).

    ``weights`` has any shape; ``thetas`` has that shape (scalar families) or that shape plus the
    event axis. Returns shape (dim,).
    """
    eta = np.asarray(eta, dtype=float)
    w = np.asarray(weights, dtype=float).reshape(-1)
    stats = family.sufficient_statistics(np.asarray(thetas, dtype=float)).reshape(w.size, -1)
    return scale * (w @ (stats - family.mean_params(eta)))


def solve_fisher(family: ExponentialFamily, eta: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """F(η)⁻¹ · vector (eq. 19) by a linear solve with the family's Fisher matrix.

    A family whose flat layout is redundant (full-covariance Gaussian) exposes
    ``fisher_null_projector()``, the projector P onto the Fisher's null space; the solve is then
    with F + P, which gives the exact solution of F x = v lying in the range of F (for v in that
    range, as every score sum is).
    """
    fisher = family.fisher(np.asarray(eta, dtype=float))
    projector = getattr(family, "fisher_null_projector", None)
    if projector is not None:
        fisher = fisher + projector()
    return np.linalg.solve(fisher, np.asarray(vector, dtype=float))


def reinforce_mean_gradient(
    family: ExponentialFamily,
    eta: np.ndarray,
    thetas: np.ndarray,
    weights: np.ndarray,
    scale: float = 1.0,
    *,
    closed_form: bool = True,
) -> np.ndarray:
    """REINFORCE ``F(η)⁻¹ · scale · Σ_s w_s (s(θ_s) − μ)`` (eqs. 18-20), shape (dim,).

    ``thetas`` are draws from q_η and ``weights`` the matching ``f(θ_s) − c`` (any leading shape,
    see :func:`score_sum`). The Fisher inverse is applied exactly: by the family's own
    ``reinforce_mean_gradient`` closed form when it has one (Gaussian families) and
    ``closed_form`` is true, otherwise by :func:`solve_fisher`.
    """
    own = getattr(family, "reinforce_mean_gradient", None)
    if closed_form and own is not None:
        return np.asarray(own(eta, thetas, weights, scale))
    return solve_fisher(family, eta, score_sum(family, eta, thetas, weights, scale))


def reinforce_estimate(
    family: ExponentialFamily,
    eta: np.ndarray,
    loss: Callable[[np.ndarray], np.ndarray],
    samples: int,
    rng: np.random.Generator,
    *,
    baseline: str | float = "leave-one-out",
) -> np.ndarray:
    """Eq. (18) end to end: draw S = ``samples`` θ_s ~ q_η, weigh by f(θ_s) − c, scale 1/S.

    ``loss`` maps the (S, …) draws to (S,) values. ``baseline`` is a constant c, or
    ``"leave-one-out"`` (c_s = mean of the other S − 1 losses, which keeps the estimate unbiased;
    needs S ≥ 2).
    """
    thetas = family.sample(np.asarray(eta, dtype=float), samples, rng)
    values = np.asarray(loss(thetas), dtype=float).reshape(samples)
    if baseline == "leave-one-out":
        if samples < 2:
            raise ValueError("a leave-one-out baseline needs at least 2 samples")
        weights = samples / (samples - 1) * (values - values.mean())
    elif isinstance(baseline, str):
        raise ValueError(f"unknown baseline {baseline!r}")
    else:
        weights = values - float(baseline)
    return reinforce_mean_gradient(family, eta, thetas, weights, scale=1.0 / samples)


def gaussian_mean_gradient(
    family: ExponentialFamily,
    eta: np.ndarray,
    expected_grad: np.ndarray,
    expected_hess: np.ndarray,
) -> np.ndarray:
    """∇_μ E_q[f] for a Gaussian q from E_q[∇f] (…, d) and E_q[∇²f] (…, d, d) (leading axes batch).

    Full covariance: ∇_{μ₂} = ½ E[∇²f], ∇_{μ₁} = E[∇f] − E[∇²f] m. Diagonal: ∇_{μ₂} = ½ diag E[∇²f],
    ∇_{μ₁} = E[∇f] − diag E[∇²f] ⊙ m (a (d,) Hessian diagonal is accepted too).
    """
    own = getattr(family, "mean_gradient", None)
    if own is None:
        raise TypeError(f"{type(family).__name__} is not a Gaussian family")
    return np.asarray(own(eta, expected_grad, expected_hess))


def reparameterisation_mean_gradient(
    family: ExponentialFamily,
    eta: np.ndarray,
    grad_hess: GradHess,
    samples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """:func:`gaussian_mean_gradient` with E[∇f], E[∇²f] estimated from S draws θ = m + Lε.

    ``grad_hess`` maps the draws (S, d) to per-sample gradients (S, d) and Hessians (S, d, d).
    """
    thetas = family.sample(np.asarray(eta, dtype=float), samples, rng)
    grads, hessians = grad_hess(thetas)
    return gaussian_mean_gradient(
        family, eta, np.asarray(grads).mean(axis=0), np.asarray(hessians).mean(axis=0)
    )
