"""Estimators of ∇_μ E_q[L_k(θ)] for Gaussian logistic regression (eq. 17), for a batch of members
at once: row b is one run's q (natural parameters η_b), its holder k_b and its generator.

L_k(θ) = Σ_n [log(1 + e^{a_n}) − y_n a_n] with a_n = x_nᵀθ is the sum of the node's log-losses.
Every estimator forms E_q[∇L] and E_q[∇²L] (or its diagonal, for a mean-field q) and maps them to
∇_μ (Bonnet and Price, :func:`~gossipsim.families.natgrad_batch.gaussian_mean_gradient`), except
REINFORCE, which weighs the score of q (eqs. 18-20):

- ``exact``: each projection a_n ~ N(x_nᵀm, x_nᵀΣx_n) integrated by the rule of
  :func:`~gossipsim.models.glm.logistic_projection_derivatives` (deterministic);
- ``reparameterization`` with S draws per point: point n's derivatives depend on its own draws
  θ_ns only through a_ns = x_nᵀθ_ns, and the θ_ns are independent, so a_ns is drawn directly,
  a_ns = x_nᵀm + ‖L⁻¹x_n‖ z_ns (z_ns ~ N(0, 1); ‖√v ⊙ x_n‖ for the diagonal family): the same
  estimator in distribution as drawing θ_ns = m + L⁻ᵀε_ns, with one normal per draw instead of d;
- ``reparameterization`` with S draws in all: θ_s = m + L⁻ᵀε_s (every point at the same draws);
- ``reinforce``: θ drawn as the family's ``sample`` draws them, weighted by the losses.

The one-run estimator of the event engine is this with a batch of one
(:meth:`~gossipsim.models.regression.LogisticRegression.mean_gradient`), so both engines draw and
compute the same numbers, up to the rounding of sums over the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from gossipsim.core.capabilities import BatchedMeanGradient, EstimatorSettings
from gossipsim.families import natgrad_batch
from gossipsim.families.gaussian import GaussianDiagonal, GaussianFull
from gossipsim.models import glm

#: Gauss–Hermite points of the exact estimator's rule
QUADRATURE_POINTS = 32


@dataclass(frozen=True)
class HeldPoints:
    """The training points of a batch's holders, twice: padded per run, ``X`` (B, W, d), ``y``
    (B, W) and ``mask`` (B, W) with W the largest node's count (for matrix products over the
    batch), and end to end, run b's points at (``run``, ``position``) (for the draws, which only
    real points get)."""

    X: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    run: np.ndarray
    position: np.ndarray


class NodePoints:
    """Every node's training points, gathered for a batch's holders by :meth:`held`."""

    def __init__(self, X: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> None:
        self.sizes = np.asarray([int(np.size(labels)) for labels in y], dtype=np.int64)
        width = int(self.sizes.max(initial=0))
        d = int(np.shape(X[0])[1])
        self.X = np.zeros((len(X), width, d))
        self.y = np.zeros((len(X), width))
        for k, (features, labels) in enumerate(zip(X, y, strict=True)):
            self.X[k, : self.sizes[k]] = features
            self.y[k, : self.sizes[k]] = labels

    def held(self, holders: np.ndarray) -> HeldPoints:
        """The holders' points, padded to the largest node's count whatever the holders (so that
        a run's sums over its points have the same shape, and the same bits, in a batch of any
        runs as alone)."""
        counts = self.sizes[holders]
        mask = np.arange(self.X.shape[1]) < counts[:, None]
        run, position = np.nonzero(mask)
        return HeldPoints(self.X[holders], self.y[holders], mask, run, position)


def logistic_batched_gradient(
    family: GaussianFull | GaussianDiagonal, points: NodePoints, estimation: EstimatorSettings
) -> BatchedMeanGradient:
    """The batched estimator of ``estimation.estimator`` (module docstring)."""
    diagonal = isinstance(family, GaussianDiagonal)
    samples, per_point, baseline = (
        estimation.samples,
        estimation.samples_per == "point",
        estimation.baseline,
    )
    d = points.X.shape[2]

    def moments(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's mean (B, d) and the map ε ↦ θ − m: √v (B, d) or L⁻¹ (B, d, d)
        (θ = m + ε L⁻¹ as a row, as the family's ``sample`` forms it)."""
        if diagonal:
            mean, var = family._mean_var(eta)  # type: ignore[union-attr]
            return mean, np.sqrt(var)
        mean, _, _, chol_inv, _ = family._moments(eta)  # type: ignore[union-attr]
        return mean, chol_inv

    def projections(
        held: HeldPoints, mean: np.ndarray, spread: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """x_nᵀm and the standard deviation of x_nᵀθ of each padded point, (B, W) each."""
        loc = np.einsum("bwd,bd->bw", held.X, mean)
        # rows (L⁻¹x_n)ᵀ, or √v ⊙ x_n
        direction = held.X * spread[:, None, :] if diagonal else held.X @ np.swapaxes(spread, 1, 2)
        return loc, np.sqrt(np.einsum("bwd,bwd->bw", direction, direction))

    def thetas(
        mean: np.ndarray, spread: np.ndarray, rngs: Sequence[np.random.Generator], count: int
    ) -> np.ndarray:
        """``count`` draws θ per row as the family's ``sample`` makes them, (B, count, d)."""
        eps = np.stack([rng.standard_normal((count, d)) for rng in rngs])
        if diagonal:
            return mean[:, None, :] + eps * spread[:, None, :]
        return mean[:, None, :] + eps @ spread

    def to_mean_gradient(
        held: HeldPoints, residual: np.ndarray, slope: np.ndarray, mean: np.ndarray
    ) -> np.ndarray:
        """E[∇L] = Σ_n r_n x_n, E[∇²L] = Σ_n s_n x_n x_nᵀ (its diagonal for a mean-field q),
        from (B, W) residuals and slopes (zero on padding), into ∇_μ."""
        residual = np.where(held.mask, residual, 0.0)
        slope = np.where(held.mask, slope, 0.0)
        grad = np.einsum("bw,bwd->bd", residual, held.X)
        if diagonal:
            hess = np.einsum("bw,bwd->bd", slope, held.X * held.X)
        else:
            hess = np.swapaxes(held.X * slope[:, :, None], 1, 2) @ held.X
        return natgrad_batch.gaussian_mean_gradient(family, mean, grad, hess)

    def exact(
        eta: np.ndarray, holders: np.ndarray, rngs: Sequence[np.random.Generator]
    ) -> np.ndarray:
        held = points.held(holders)
        mean, spread = moments(eta)
        loc, scale = projections(held, mean, spread)
        r, w = held.run, held.position  # the real points only, not the padding
        sigmoid, slope = np.zeros(loc.shape), np.zeros(loc.shape)
        sigmoid[r, w], slope[r, w] = glm.logistic_projection_derivatives(
            loc[r, w], scale[r, w], QUADRATURE_POINTS
        )
        return to_mean_gradient(held, sigmoid - held.y, slope, mean)

    def reparameterization(
        eta: np.ndarray, holders: np.ndarray, rngs: Sequence[np.random.Generator]
    ) -> np.ndarray:
        held = points.held(holders)
        mean, spread = moments(eta)
        if per_point:  # a_ns = x_nᵀm + sd_n z_ns: each point at its own S draws
            loc, scale = projections(held, mean, spread)
            counts = held.mask.sum(axis=1).tolist()
            z = np.concatenate(
                [rngs[b].standard_normal((n, samples)) for b, n in enumerate(counts)]
            )
            r, w = held.run, held.position
            prob = np.zeros((*held.mask.shape, samples))
            prob[r, w] = expit(loc[r, w][:, None] + scale[r, w][:, None] * z)
            residual = prob.mean(axis=2) - held.y
            slope = (prob * (1.0 - prob)).mean(axis=2)
        else:  # every point at the run's S draws θ_s, averaged over them
            theta = thetas(mean, spread, rngs, samples)
            prob = expit(theta @ np.swapaxes(held.X, 1, 2))  # (B, S, W)
            residual = (prob - held.y[:, None, :]).mean(axis=1)
            slope = (prob * (1.0 - prob)).mean(axis=1)
        return to_mean_gradient(held, residual, slope, mean)

    def reinforce(
        eta: np.ndarray, holders: np.ndarray, rngs: Sequence[np.random.Generator]
    ) -> np.ndarray:
        held = points.held(holders)
        mean, spread = moments(eta)
        batch, width = held.mask.shape
        if per_point:  # S draws for each point (the family's sample of n·S), weighted by its loss
            theta = np.zeros((batch, width * samples, d))
            for b, n in enumerate(held.mask.sum(axis=1).tolist()):
                theta[b, : n * samples] = thetas(
                    mean[b : b + 1], spread[b : b + 1], rngs[b : b + 1], n * samples
                )[0]
            theta = theta.reshape(batch, width, samples, d)
            a = np.einsum("bwsd,bwd->bws", theta, held.X)
            losses = np.logaddexp(0.0, a) - held.y[:, :, None] * a - baseline
            weights = np.where(held.mask[:, :, None], losses, 0.0).reshape(batch, -1)
            theta = theta.reshape(batch, -1, d)
        else:  # S draws in all, weighted by the whole local loss
            theta = thetas(mean, spread, rngs, samples)
            a = theta @ np.swapaxes(held.X, 1, 2)  # (B, S, W)
            losses = np.logaddexp(0.0, a) - held.y[:, None, :] * a
            weights = np.where(held.mask[:, None, :], losses, 0.0).sum(axis=2) - baseline
        # the family's closed form (eqs. 18-20) run by run, on each run's own draws only
        counts = held.mask.sum(axis=1) * samples if per_point else np.full(batch, samples)
        return np.stack(
            [
                family.reinforce_mean_gradient(eta[b], theta[b, :n], weights[b, :n], 1.0 / samples)
                for b, n in enumerate(counts.tolist())
            ]
        )

    return {"exact": exact, "reparameterization": reparameterization, "reinforce": reinforce}[
        estimation.estimator
    ]
