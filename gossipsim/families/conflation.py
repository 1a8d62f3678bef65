"""Aggregating diagonal Gaussian clients, FedUAB style (paper 004, Section 4; issue 35).

Three pure functions of arrays and a running form:

* :func:`conflate` — eq. (8), the aggregation FedUAB uses. The data fractions ``n_k/n`` weight the
  clients' *precisions*::

      μ_g = Σ_k (n_k/n) μ_k σ_k⁻² / Σ_k (n_k/n) σ_k⁻²,      σ_g² = 1 / Σ_k (n_k/n) σ_k⁻²      (8)

  which is exactly the normalized product of the client densities each raised to its data fraction,
  ``∏_k N(μ_k, σ_k²)^{n_k/n}`` (a logarithmic opinion pool, the weighted conflation): raising a
  Gaussian to the power w multiplies its precision by w and keeps its mean. As the fractions sum to
  1, K identical clients conflate to that client — no shrinkage (Hill's unweighted conflation,
  the plain product, would divide the variance by K).
* :func:`average` — eq. (7), the rule the paper rejects: the law of the weighted *sum* of
  independent Gaussians, ``μ_g = Σ (n_k/n) μ_k``, ``σ_g² = Σ ((n_k/n) σ_k)²``. For K equal
  clients of equal variance it divides the variance by K (the standard deviation by √K — the
  paper's "1/√K" is the standard deviation's factor), so r rounds give ``σ² K^{-r}``.
* The running conflation in natural parameters, :class:`ConflationAggregate` with
  :func:`add_factor` / :func:`remove_factor`: the sums ``P = Σ w_k σ_k⁻²``, ``S = Σ w_k μ_k σ_k⁻²``
  and ``W = Σ w_k`` (per coordinate), whose moments ``(S/P, W/P)`` are eq. (8) with ``n = W``.
  Adding or removing a client is one addition or subtraction of its factor, so a client's
  contribution leaves the aggregate exactly (up to rounding).
* :func:`uncertainty_matrices` / :func:`uncertainty_traces` — eqs. (11)-(12), the aleatoric /
  epistemic split of the predictive covariance of a classifier from Z Monte Carlo weight samples.

Weights are anything proportional to the data counts n_k (they are divided by their sum, as
``n_k/n``); they must be finite, ≥ 0 and not all zero. Bad input is a ``ValueError`` naming the
argument. The paper gives no regression variant of eq. (12); none is offered here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the rule :func:`remove_factor` applies to coordinates a removal would take outside the family
KEEP_PREVIOUS = "keep-previous"

#: default relative threshold of :func:`remove_factor` (see there): ~4500 ε, far above the rounding
#: of one addition and one subtraction (≤ 2ε of the larger sum), far below any precision ratio of
#: real clients
REMOVAL_RTOL = 1e-12


def _clients(
    means: np.ndarray, variances: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked (K, d) means and variances and the (K,) weights normalized to sum to 1."""
    m = np.asarray(means, dtype=float)
    v = np.asarray(variances, dtype=float)
    w = np.asarray(weights, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"means must be (K, d), got shape {m.shape}")
    if m.shape[0] == 0:
        raise ValueError("means: at least one client (K ≥ 1) is needed, got K = 0")
    if v.shape != m.shape:
        raise ValueError(f"variances must have the shape of means {m.shape}, got {v.shape}")
    if w.shape != (m.shape[0],):
        raise ValueError(f"weights must be ({m.shape[0]},), one per client, got {w.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError("means must be finite")
    if not np.all(np.isfinite(v) & (v > 0)):
        raise ValueError("variances must be finite and > 0")
    if not np.all(np.isfinite(w) & (w >= 0)):
        raise ValueError("weights must be finite and ≥ 0")
    total = w.sum()
    if not total > 0:
        raise ValueError("weights must not all be zero")
    return m, v, w / total


def conflate(
    means: np.ndarray, variances: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (8) of paper 004: the weighted conflation of K diagonal Gaussians, ``(K, d) → (d,), (d,)``.

    Precision-weighted with the data fractions on the precisions, ``λ_g = Σ_k (n_k/n) σ_k⁻²``,
    ``μ_g = Σ_k (n_k/n) σ_k⁻² μ_k / λ_g``, ``σ_g² = 1/λ_g``; the same as the normalized product
    ``∏_k N(μ_k, σ_k²)^{n_k/n}``. ``weights`` are proportional to n_k (divided by their sum here).

    The precisions are scaled by the smallest variance of each coordinate before summing, so one
    client returns its own mean and variance bit for bit, and no precision overflows.
    """
    m, v, w = _clients(means, variances, weights)
    reference = v.min(axis=0)
    scaled = w[:, None] * (reference / v)  # (n_k/n) σ_k⁻² · σ_ref², in (0, 1] per client
    total = scaled.sum(axis=0)
    mean = (scaled * m).sum(axis=0) / total
    variance = reference / total
    return mean, variance


def average(
    means: np.ndarray, variances: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (7) of paper 004: ``μ_g = Σ_k (n_k/n) μ_k``, ``σ_g² = Σ_k ((n_k/n) σ_k)²``.

    The law of the weighted sum ``Σ (n_k/n) ω_k`` of independent ``ω_k ~ N(μ_k, σ_k²)``. Equal
    weights and variances give ``σ²/K``: the variance shrinks by 1/K a round, the standard
    deviation by 1/√K (the factor the paper quotes). Kept for reproducing the paper's ablation.
    """
    m, v, w = _clients(means, variances, weights)
    return (w[:, None] * m).sum(axis=0), (w[:, None] ** 2 * v).sum(axis=0)


@dataclass(frozen=True)
class ConflationAggregate:
    """A running weighted conflation in natural parameters, per coordinate (all ``(d,)``):
    ``precision = Σ w_k σ_k⁻²``, ``shift = Σ w_k μ_k σ_k⁻²``, ``weight = Σ w_k``.

    Its moments (:meth:`moments`) are eq. (8) with ``n = weight``. The total weight is kept per
    coordinate so that a coordinate where :func:`remove_factor` refuses the removal keeps its whole
    previous state. The empty aggregate (all zeros, :meth:`empty`) has no moments.
    """

    precision: np.ndarray
    shift: np.ndarray
    weight: np.ndarray

    @classmethod
    def empty(cls, d: int) -> ConflationAggregate:
        """No client yet: ``P = S = W = 0`` in each of d coordinates."""
        return cls(np.zeros(d), np.zeros(d), np.zeros(d))

    @classmethod
    def of(
        cls, means: np.ndarray, variances: np.ndarray, weights: np.ndarray
    ) -> ConflationAggregate:
        """The aggregate of K clients ``(K, d)`` with weights ``(K,)`` (taken as given, not
        normalized: the running sums are over the n_k themselves)."""
        m, v, _ = _clients(means, variances, weights)
        w = np.asarray(weights, dtype=float)[:, None]
        return cls((w / v).sum(axis=0), (w * m / v).sum(axis=0), np.broadcast_to(w, m.shape).sum(0))

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean ``S/P`` and variance ``W/P`` (eq. 8 with n = W); a ValueError where P or W ≤ 0."""
        if not np.all((self.precision > 0) & (self.weight > 0)):
            raise ValueError("aggregate: a coordinate has no client (precision or weight ≤ 0)")
        return self.shift / self.precision, self.weight / self.precision


@dataclass(frozen=True)
class RemovalOutcome:
    """What :func:`remove_factor` did: the new ``aggregate``; ``outside``, the ``(d,)`` mask of
    coordinates the subtraction would have left with precision or weight ≤ the threshold (outside
    the Gaussian family); ``rule``, what was done there (:data:`KEEP_PREVIOUS`: those coordinates
    keep their previous precision, shift and weight — the client's factor stays in them)."""

    aggregate: ConflationAggregate
    outside: np.ndarray
    rule: str = KEEP_PREVIOUS

    @property
    def count(self) -> int:
        """How many coordinates were outside the family."""
        return int(np.count_nonzero(self.outside))


def _factor(
    aggregate: ConflationAggregate, mean: np.ndarray, variance: np.ndarray, weight: float
) -> tuple[np.ndarray, np.ndarray, float]:
    d = aggregate.precision.shape
    m = np.asarray(mean, dtype=float)
    v = np.asarray(variance, dtype=float)
    if m.shape != d or not np.all(np.isfinite(m)):
        raise ValueError(f"mean must be finite and of the aggregate's shape {d}, got {m.shape}")
    if v.shape != d or not np.all(np.isfinite(v) & (v > 0)):
        raise ValueError(f"variance must be finite, > 0 and of shape {d}, got {v.shape}")
    if not (np.isfinite(weight) and weight > 0):
        raise ValueError(f"weight must be finite and > 0, got {weight}")
    return weight / v, weight * m / v, float(weight)


def add_factor(
    aggregate: ConflationAggregate, mean: np.ndarray, variance: np.ndarray, weight: float
) -> ConflationAggregate:
    """The aggregate with one client's factor ``N(mean, variance)^weight`` multiplied in (eq. 8 as
    a running sum): ``P + w/σ²``, ``S + w μ/σ²``, ``W + w``."""
    precision, shift, w = _factor(aggregate, mean, variance, weight)
    return ConflationAggregate(
        aggregate.precision + precision, aggregate.shift + shift, aggregate.weight + w
    )


def remove_factor(
    aggregate: ConflationAggregate,
    mean: np.ndarray,
    variance: np.ndarray,
    weight: float,
    rtol: float = REMOVAL_RTOL,
) -> RemovalOutcome:
    """The aggregate with one client's factor divided out: ``P − w/σ²``, ``S − w μ/σ²``, ``W − w``.

    Never raises for the result: a coordinate whose new precision or weight would be
    ``≤ rtol ×`` its previous value is outside the family (removing the only client, a factor that
    was never added, or a client whose factor changed since; within ``rtol`` the difference is
    rounding, ~ε of the sum, not information). Rule :data:`KEEP_PREVIOUS`: such a coordinate keeps
    its previous state. A floor on the precision would invent a variance (1/floor) and a mean
    (S/floor) that no client holds; keeping the previous state stays a valid conflation of real
    clients, and the mask tells the caller the factor is still in there (the caller counts it,
    and may restart those coordinates from the prior, eq. 9). ``rtol = 0`` flags exactly ``≤ 0``.
    """
    precision, shift, w = _factor(aggregate, mean, variance, weight)
    if not (np.isfinite(rtol) and rtol >= 0):
        raise ValueError(f"rtol must be finite and ≥ 0, got {rtol}")
    new_precision = aggregate.precision - precision
    new_weight = aggregate.weight - w
    outside = (new_precision <= rtol * aggregate.precision) | (
        new_weight <= rtol * aggregate.weight
    )
    kept = ConflationAggregate(
        np.where(outside, aggregate.precision, new_precision),
        np.where(outside, aggregate.shift, aggregate.shift - shift),
        np.where(outside, aggregate.weight, new_weight),
    )
    return RemovalOutcome(kept, outside)


@dataclass(frozen=True)
class UncertaintyParts:
    """Eq. (12)'s two terms, per example: ``(N, C, C)`` matrices or ``(N,)`` traces."""

    aleatoric: np.ndarray
    epistemic: np.ndarray


def _probabilities(probabilities: np.ndarray) -> np.ndarray:
    p = np.asarray(probabilities, dtype=float)
    if p.ndim != 3 or 0 in p.shape:
        raise ValueError(f"probabilities must be (Z, N, C) with Z, N, C ≥ 1, got {p.shape}")
    if not np.all(np.isfinite(p) & (p >= 0)):
        raise ValueError("probabilities must be finite and ≥ 0")
    if not np.allclose(p.sum(axis=-1), 1.0, rtol=0.0, atol=1e-6):
        raise ValueError("probabilities must sum to 1 over the classes (last axis), within 1e-6")
    return p


def _deviations(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p̄ (eq. 11) and p̂_z − p̄. The mean is taken about the first sample, so Z equal samples give
    p̄ equal to them and deviations exactly 0 (a plain mean of Z equal numbers may be off by an ulp)."""
    offsets = p - p[0]
    mean = p[0] + offsets.mean(axis=0)
    return mean, offsets - (mean - p[0])


def uncertainty_matrices(probabilities: np.ndarray) -> UncertaintyParts:
    """Eq. (12) of paper 004 from ``(Z, N, C)`` predictive probabilities of Z weight samples.

    ``aleatoric = (1/Z) Σ_z diag(p̂_z) − p̂_z p̂_zᵀ`` and ``epistemic = (1/Z) Σ_z (p̂_z − p̄)(p̂_z − p̄)ᵀ``
    (the 1/Z covariance, as the paper writes), each ``(N, C, C)``. They sum to the predictive
    covariance ``diag(p̄) − p̄ p̄ᵀ`` of the mean prediction p̄ (eq. 11). The labels are eq. (12)'s;
    the paper's prose after it swaps the usual readings of the two words.
    """
    p = _probabilities(probabilities)
    _, dev = _deviations(p)
    z = p.shape[0]
    aleatoric = -np.einsum("zni,znj->nij", p, p) / z
    # the diagonal as Σ_z p(1 − p) / Z, so one-hot samples give exactly 0 (not p̄ − mean p², which
    # rounds differently)
    diagonal = np.einsum("nii->ni", aleatoric)  # a writable view of the diagonals
    diagonal[...] = (p * (1.0 - p)).mean(axis=0)
    epistemic = np.einsum("zni,znj->nij", dev, dev) / z
    return UncertaintyParts(aleatoric, epistemic)


def uncertainty_traces(probabilities: np.ndarray) -> UncertaintyParts:
    """The traces of :func:`uncertainty_matrices`, ``(N,)`` each, without forming the matrices:
    ``aleatoric = (1/Z) Σ_z Σ_c p̂_zc (1 − p̂_zc)``, ``epistemic = Σ_c (1/Z) Σ_z (p̂_zc − p̄_c)²``;
    they sum to ``Σ_c p̄_c (1 − p̄_c)``."""
    p = _probabilities(probabilities)
    _, dev = _deviations(p)
    return UncertaintyParts((p * (1.0 - p)).sum(axis=2).mean(axis=0), (dev**2).sum(axis=2).mean(0))
