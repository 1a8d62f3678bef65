"""Exponential families in natural parameters: log-partition, mean parameters, Fisher information,
sampling, the score ∇θ log q and closed-form KL divergence.

A member is ``q(θ) = exp(ηᵀ s(θ) − A(η) + M(θ))`` (eq. 10 and 15 of the core paper). Every method takes
natural parameters as an array whose last axis holds the ``dim`` entries, so a whole trace of
posteriors (shape ``(n, dim)``) is handled in one call.

KL divergence between two members of one family is the Bregman divergence of the log-partition,

    KL(q_η ‖ q_λ) = A(λ) − A(η) − (λ − η)ᵀ ∇A(η),

which every family below inherits; ``∇A(η)`` is the mean parameter μ = E[s(θ)].

The **score** of a member, ∇θ log q_η(θ) = J_s(θ)ᵀ η + ∇M(θ), is what particle divergences (the
kernelized Stein discrepancy) need. It takes points ``(..., p)`` in the coordinates
:meth:`ExponentialFamily.sample_points` draws in: p = 1 for the scalar families (Beta, Gamma,
Normal), θ's d coordinates for the Gaussians, and the first C − 1 coordinates of a Dirichlet (the
last implied, θ_C = 1 − Σθ_c: the simplex has no density in the C ambient coordinates). It is NaN at
points outside the support.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
from scipy.special import digamma, gammaln, zeta

from gossipsim.families import stablekl

#: the largest bound on the rounding error (nats) of the Bregman form's KL that is accepted; beyond
#: it, Beta, Gamma and Dirichlet KLs are computed by the stable forms of :mod:`.stablekl`. Ordinary
#: posteriors stay below it and keep the Bregman form's bits (the shipped scenarios' largest bound
#: is 3.3e-10: gamma–Poisson with 6,000 counts in unlearning_ba_sweep).
BREGMAN_ERROR_LIMIT = 1e-9
_ROUNDING = 8 * float(np.finfo(float).eps)


def trigamma(x: np.ndarray | float) -> np.ndarray:
    """ψ₁(x) = d² log Γ(x) / dx² = ζ(2, x), the Hurwitz zeta function: the values
    ``scipy.special.polygamma(1, x)`` gives (it computes them so), without its Python wrapper,
    which costs several times the ufunc on the natural-gradient hot path (the Fisher matrices)."""
    return zeta(2.0, x)


class ExponentialFamily(ABC):
    """A family of distributions over θ indexed by natural parameters of length ``dim``."""

    name: str = ""

    @property
    @abstractmethod
    def dim(self) -> int:
        """Number of natural-parameter entries (the size of a message is ``64·dim`` bits)."""

    @abstractmethod
    def log_partition(self, eta: np.ndarray) -> np.ndarray:
        """A(η), over the last axis."""

    @abstractmethod
    def mean_params(self, eta: np.ndarray) -> np.ndarray:
        """μ = ∇A(η) = E_q[s(θ)]."""

    @abstractmethod
    def fisher(self, eta: np.ndarray) -> np.ndarray:
        """Fisher information ∇²A(η), shape ``(..., dim, dim)`` (eq. 19)."""

    @abstractmethod
    def in_domain(self, eta: np.ndarray) -> np.ndarray:
        """Whether η lies in the natural-parameter domain (a normalisable member)."""

    @abstractmethod
    def sample(self, eta: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` draws of θ from the member with natural parameters ``eta`` (one member)."""

    @abstractmethod
    def sufficient_statistics(self, theta: np.ndarray) -> np.ndarray:
        """s(θ), with the statistics on the last axis."""

    def score(self, eta: np.ndarray, points: np.ndarray) -> np.ndarray:
        """∇θ log q_η(θ) of one member ``eta`` at ``points`` ``(..., p)`` (the coordinates of
        :meth:`sample_points`; leading batch axes allowed), same shape; NaN outside the support."""
        raise NotImplementedError(f"the {self.name or type(self).__name__} family has no score")

    def sample_points(self, eta: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` draws of :meth:`sample` as points ``(size, p)`` in the coordinates of
        :meth:`score` (a scalar θ as one coordinate)."""
        return np.asarray(self.sample(eta, size, rng), dtype=float).reshape(size, -1)

    def fisher_norm(self, eta: np.ndarray, direction: np.ndarray) -> float:
        """‖v‖_F = √(vᵀ F(η) v) for one member η and one change v of its natural parameters: the
        length of v in the family's own geometry, KL(q_η ‖ q_{η+v}) = ½‖v‖²_F + O(‖v‖³) (eq. 19)."""
        v = np.asarray(direction, dtype=float)
        return float(np.sqrt(max(float(v @ self.fisher(np.asarray(eta, dtype=float)) @ v), 0.0)))

    def kl(self, eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
        """KL(q_η ‖ p_λ) by the Bregman form of the log-partition; broadcasts over leading axes.

        Rounding can leave a result of order 1e-15·A(η) below zero when q = p; such values are
        returned as 0.
        """
        eta_q = np.asarray(eta_q, dtype=float)
        eta_p = np.asarray(eta_p, dtype=float)
        mu = self.mean_params(eta_q)
        value = (
            self.log_partition(eta_p)
            - self.log_partition(eta_q)
            - np.sum((eta_p - eta_q) * mu, axis=-1)
        )
        return np.maximum(value, 0.0)

    def _kl_with_stable_form(
        self,
        eta_q: np.ndarray,
        eta_p: np.ndarray,
        partition_size: Callable[[np.ndarray], np.ndarray],
        mean_error: Callable[[np.ndarray], np.ndarray],
        usable: Callable[[np.ndarray], np.ndarray],
        stable: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """The Bregman form's KL (:meth:`kl`, the same bits) where its rounding error is below
        :data:`BREGMAN_ERROR_LIMIT` nats, else (or where it is not a number while both
        log-partitions are) the ``stable`` form (:mod:`.stablekl`) where both members are
        ``usable`` by it. The error bound is 8 rounding errors of the size of the terms the KL is
        computed from: ``partition_size`` (the sum of the absolute values of the terms of A) at λ
        and at η, plus Σ|λ − η|·``mean_error(η)`` (the same for each mean parameter μ)."""
        q = np.asarray(eta_q, dtype=float)
        p = np.asarray(eta_p, dtype=float)
        mu = self.mean_params(q)
        a_p = self.log_partition(p)
        a_q = self.log_partition(q)
        value = a_p - a_q - np.sum((p - q) * mu, axis=-1)
        with np.errstate(all="ignore"):
            error = _ROUNDING * (
                partition_size(p)
                + partition_size(q)
                + np.sum(np.abs(p - q) * mean_error(q), axis=-1)
            )
            inexact = ~np.isfinite(value) | (error > BREGMAN_ERROR_LIMIT)
            redo = inexact & np.isfinite(a_p) & np.isfinite(a_q) & usable(q) & usable(p)
        if np.any(redo):
            rows_q, rows_p = np.broadcast_arrays(q, p)
            value = np.array(np.broadcast_to(value, redo.shape), dtype=float)
            exact = np.asarray(stable(rows_q[redo], rows_p[redo]), dtype=float)
            # (not a number at concentrations below about 1e-308: the Bregman form's value kept)
            value[redo] = np.where(np.isfinite(exact), exact, value[redo])
        # −∞ (a mean parameter beyond float64 where the stable form does not apply) is not a
        # divergence of 0: NaN, which fails the run (gossipsim.measurement.outputs.NonFiniteKL)
        return np.where(value == -np.inf, np.nan, np.maximum(value, 0.0))


def concentration_kl(family: ExponentialFamily, eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
    """KL of a Beta or Dirichlet family (natural parameters: concentrations − 1): the Bregman form,
    or the stable form (:func:`.stablekl.dirichlet_kl_rows`) where the former's rounding error
    exceeds :data:`BREGMAN_ERROR_LIMIT`."""
    return family._kl_with_stable_form(
        eta_q,
        eta_p,
        _concentration_partition_size,
        _concentration_mean_error,
        _concentrations_usable,
        stablekl.dirichlet_kl_rows,
    )


class Beta(ExponentialFamily):
    """Beta(a, b) on θ ∈ (0, 1): s(θ) = (log θ, log(1 − θ)), η = (a − 1, b − 1)."""

    name = "beta"

    @property
    def dim(self) -> int:
        return 2

    @staticmethod
    def natural(a: float, b: float) -> np.ndarray:
        return np.array([a - 1.0, b - 1.0])

    @staticmethod
    def conventional(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eta = np.asarray(eta, dtype=float)
        return eta[..., 0] + 1.0, eta[..., 1] + 1.0

    def log_partition(self, eta: np.ndarray) -> np.ndarray:
        a, b = self.conventional(eta)
        return gammaln(a) + gammaln(b) - gammaln(a + b)

    def mean_params(self, eta: np.ndarray) -> np.ndarray:
        a, b = self.conventional(eta)
        psi_ab = digamma(a + b)
        return np.stack([digamma(a) - psi_ab, digamma(b) - psi_ab], axis=-1)

    def fisher(self, eta: np.ndarray) -> np.ndarray:
        a, b = self.conventional(eta)
        t_ab = trigamma(a + b)
        if np.ndim(t_ab) == 0:  # one η (a natural-gradient step): a third of the stacks' cost
            return np.array([[trigamma(a) - t_ab, -t_ab], [-t_ab, trigamma(b) - t_ab]])
        row0 = np.stack([trigamma(a) - t_ab, -t_ab], axis=-1)
        row1 = np.stack([-t_ab, trigamma(b) - t_ab], axis=-1)
        return np.stack([row0, row1], axis=-2)

    def in_domain(self, eta: np.ndarray) -> np.ndarray:
        a, b = self.conventional(eta)
        return (a > 0) & (b > 0)

    def kl(self, eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
        """:func:`concentration_kl` (a Beta is a Dirichlet of two categories)."""
        return concentration_kl(self, eta_q, eta_p)

    def sample(self, eta: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        a, b = self.conventional(eta)
        return rng.beta(a, b, size=size)

    def score(self, eta: np.ndarray, points: np.ndarray) -> np.ndarray:
        """(a − 1)/θ − (b − 1)/(1 − θ) at ``points`` ``(..., 1)`` in (0, 1)."""
        eta, theta = member_and_points(eta, points, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = eta[0] / theta - eta[1] / (1.0 - theta)
        return np.where((theta > 0.0) & (theta < 1.0), value, np.nan)

    def sufficient_statistics(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return np.stack([np.log(theta), np.log1p(-theta)], axis=-1)

    def reinforce_mean_gradient(
        self, eta: np.ndarray, thetas: np.ndarray, weights: np.ndarray, scale: float = 1.0
    ) -> np.ndarray:
        """F(η)⁻¹ · scale · Σ_s w_s (s(θ_s) − μ) (eqs. 18-20) with the 2×2 Fisher inverted in closed
        form (the hot path of the Beta–exponential model; equals the generic linear solve)."""
        a, b = float(eta[0]) + 1.0, float(eta[1]) + 1.0
        args = np.array([a, b, a + b])
        ta, tb, tab = trigamma(args)
        pa, pb, pab = digamma(args)
        t = np.asarray(thetas, dtype=float).ravel()
        w = np.asarray(weights, dtype=float).ravel()
        s1 = scale * float(w @ (np.log(t) - (pa - pab)))
        s2 = scale * float(w @ (np.log1p(-t) - (pb - pab)))
        f11, f22, f12 = ta - tab, tb - tab, -tab
        det = f11 * f22 - f12 * f12
        return np.array([(f22 * s1 - f12 * s2) / det, (f11 * s2 - f12 * s1) / det])


class Gamma(ExponentialFamily):
    """Gamma(shape α, rate β) on θ > 0: s(θ) = (log θ, θ), η = (α − 1, −β)."""

    name = "gamma"

    @property
    def dim(self) -> int:
        return 2

    @staticmethod
    def natural(shape: float, rate: float) -> np.ndarray:
        return np.array([shape - 1.0, -rate])

    @staticmethod
    def conventional(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eta = np.asarray(eta, dtype=float)
        return eta[..., 0] + 1.0, -eta[..., 1]

    def log_partition(self, eta: np.ndarray) -> np.ndarray:
        shape, rate = self.conventional(eta)
        return gammaln(shape) - shape * np.log(rate)

    def mean_params(self, eta: np.ndarray) -> np.ndarray:
        shape, rate = self.conventional(eta)
        return np.stack([digamma(shape) - np.log(rate), shape / rate], axis=-1)

    def fisher(self, eta: np.ndarray) -> np.ndarray:
        shape, rate = self.conventional(eta)
        row0 = np.stack([trigamma(shape), 1.0 / rate], axis=-1)
        row1 = np.stack([1.0 / rate, shape / rate**2], axis=-1)
        return np.stack([row0, row1], axis=-2)

    def in_domain(self, eta: np.ndarray) -> np.ndarray:
        shape, rate = self.conventional(eta)
        return (shape > 0) & (rate > 0)

    def kl(self, eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
        """The Bregman form, or the stable form (:func:`.stablekl.gamma_kl_rows`) where the former's
        rounding error exceeds :data:`BREGMAN_ERROR_LIMIT`."""

        def partition_size(eta: np.ndarray) -> np.ndarray:
            shape, rate = self.conventional(eta)
            return np.abs(gammaln(shape)) + np.abs(shape * np.log(rate))

        def mean_error(eta: np.ndarray) -> np.ndarray:
            shape, rate = self.conventional(eta)
            return np.stack([np.abs(digamma(shape)) + np.abs(np.log(rate)), shape / rate], axis=-1)

        def usable(eta: np.ndarray) -> np.ndarray:
            return (eta[..., 0] + 1.0 > 0) & (eta[..., 1] < 0)

        return self._kl_with_stable_form(
            eta_q, eta_p, partition_size, mean_error, usable, stablekl.gamma_kl_rows
        )

    def sample(self, eta: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        shape, rate = self.conventional(eta)
        return rng.gamma(shape, 1.0 / rate, size=size)

    def score(self, eta: np.ndarray, points: np.ndarray) -> np.ndarray:
        """(α − 1)/θ − β at ``points`` ``(..., 1)``, θ > 0."""
        eta, theta = member_and_points(eta, points, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = eta[0] / theta + eta[1]
        return np.where(theta > 0.0, value, np.nan)

    def sufficient_statistics(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return np.stack([np.log(theta), theta], axis=-1)


class Normal(ExponentialFamily):
    """Normal(m, v) on θ ∈ ℝ: s(θ) = (θ, θ²), η = (m / v, −1 / (2v))."""

    name = "normal"

    @property
    def dim(self) -> int:
        return 2

    @staticmethod
    def natural(mean: float, variance: float) -> np.ndarray:
        return np.array([mean / variance, -0.5 / variance])

    @staticmethod
    def conventional(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eta = np.asarray(eta, dtype=float)
        variance = -0.5 / eta[..., 1]
        return eta[..., 0] * variance, variance

    def log_partition(self, eta: np.ndarray) -> np.ndarray:
        eta = np.asarray(eta, dtype=float)
        e1, e2 = eta[..., 0], eta[..., 1]
        return -(e1**2) / (4.0 * e2) - 0.5 * np.log(-2.0 * e2)

    def mean_params(self, eta: np.ndarray) -> np.ndarray:
        mean, variance = self.conventional(eta)
        return np.stack([mean, variance + mean**2], axis=-1)

    def fisher(self, eta: np.ndarray) -> np.ndarray:
        mean, v = self.conventional(eta)
        row0 = np.stack([v, 2.0 * mean * v], axis=-1)
        row1 = np.stack([2.0 * mean * v, 2.0 * v**2 + 4.0 * mean**2 * v], axis=-1)
        return np.stack([row0, row1], axis=-2)

    def in_domain(self, eta: np.ndarray) -> np.ndarray:
        return np.asarray(eta, dtype=float)[..., 1] < 0

    def kl(self, eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
        """KL(N(m_q, v_q) ‖ N(m_p, v_p)) = ½[(d − log(1 + d)) + (m_q − m_p)²/v_p]: the Bregman
        form's value, without its log-partition differences, from the natural parameters
        η = (m/v, −1/(2v)) directly:

            d = v_q/v_p − 1 = (η_p2 − η_q2)/η_q2,
            m_q − m_p = (η_p1 η_q2 − η_q1 η_p2) / (2 η_q2 η_p2),    1/v_p = −2 η_p2,

        the difference of products with error-free products (:func:`_difference_of_products`).

        A(η) = m²/(2v) − ½ log v grows with the mean: two members with means near 1e10 and a KL of
        0.005 have log-partitions near 1e22, whose difference loses everything below 1e6 (a KL
        computed as 0, or as 1e6); and each mean m = η₁v, rounded, is off by 1e-6, which is a
        relative error of 1e-4 in that KL. Here the KL is accurate to a few rounding errors of its
        own size, and two identical members give exactly 0."""
        q = np.asarray(eta_q, dtype=float)
        p = np.asarray(eta_p, dtype=float)
        q1, q2, p1, p2 = q[..., 0], q[..., 1], p[..., 0], p[..., 1]
        d = (p2 - q2) / q2
        mean_difference = _difference_of_products(p1, q2, q1, p2) / (2.0 * q2 * p2)
        z = mean_difference * np.sqrt(-2.0 * p2)
        return np.maximum(0.5 * ((d - np.log1p(d)) + z * z), 0.0)

    def sample(self, eta: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        mean, variance = self.conventional(eta)
        return rng.normal(mean, np.sqrt(variance), size=size)

    def score(self, eta: np.ndarray, points: np.ndarray) -> np.ndarray:
        """η₁ + 2η₂θ = −(θ − m)/v at ``points`` ``(..., 1)``."""
        eta, theta = member_and_points(eta, points, 1)
        return eta[0] + 2.0 * eta[1] * theta

    def sufficient_statistics(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return np.stack([theta, theta**2], axis=-1)


class Dirichlet(ExponentialFamily):
    """Dirichlet(α₁..α_C) on the simplex: s(θ) = (log θ_c), η = (α_c − 1)."""

    name = "dirichlet"

    def __init__(self, categories: int) -> None:
        if categories < 2:
            raise ValueError("a Dirichlet needs at least 2 categories")
        self.categories = categories

    @property
    def dim(self) -> int:
        return self.categories

    @staticmethod
    def natural(alpha: np.ndarray) -> np.ndarray:
        return np.asarray(alpha, dtype=float) - 1.0

    def log_partition(self, eta: np.ndarray) -> np.ndarray:
        alpha = np.asarray(eta, dtype=float) + 1.0
        return np.sum(gammaln(alpha), axis=-1) - gammaln(np.sum(alpha, axis=-1))

    def mean_params(self, eta: np.ndarray) -> np.ndarray:
        alpha = np.asarray(eta, dtype=float) + 1.0
        return digamma(alpha) - digamma(np.sum(alpha, axis=-1, keepdims=True))

    def fisher(self, eta: np.ndarray) -> np.ndarray:
        alpha = np.asarray(eta, dtype=float) + 1.0
        diag = trigamma(alpha)
        total = trigamma(np.sum(alpha, axis=-1))
        eye = np.eye(self.categories)
        return diag[..., :, None] * eye - total[..., None, None]

    def in_domain(self, eta: np.ndarray) -> np.ndarray:
        return np.all(np.asarray(eta, dtype=float) + 1.0 > 0, axis=-1)

    def kl(self, eta_q: np.ndarray, eta_p: np.ndarray) -> np.ndarray:
        """:func:`concentration_kl`."""
        return concentration_kl(self, eta_q, eta_p)

    def sample(self, eta: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        return rng.dirichlet(np.asarray(eta, dtype=float) + 1.0, size=size)

    def sample_points(self, eta: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
        """The first C − 1 coordinates of :meth:`sample`'s draws, ``(size, C − 1)``."""
        return self.sample(eta, size, rng)[:, :-1]

    def score(self, eta: np.ndarray, points: np.ndarray) -> np.ndarray:
        """(α_c − 1)/θ_c − (α_C − 1)/θ_C, c < C, at ``points`` ``(..., C − 1)``: the first C − 1
        coordinates, θ_C = 1 − Σ_c θ_c implied (the density of the simplex is one in C − 1
        coordinates, scipy.stats.dirichlet's). Inside the simplex: every θ_c > 0 and θ_C > 0."""
        eta, theta = member_and_points(eta, points, self.categories - 1)
        last = 1.0 - np.sum(theta, axis=-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = eta[:-1] / theta - eta[-1] / last
        inside = np.all(theta > 0.0, axis=-1, keepdims=True) & (last > 0.0)
        return np.where(inside, value, np.nan)

    def sufficient_statistics(self, theta: np.ndarray) -> np.ndarray:
        return np.log(np.asarray(theta, dtype=float))


def member_and_points(
    eta: np.ndarray, points: np.ndarray, coordinates: int
) -> tuple[np.ndarray, np.ndarray]:
    """One member's natural parameters ``(dim,)`` and points whose last axis has ``coordinates``
    entries (a ValueError otherwise: a score of the wrong shape would broadcast silently)."""
    eta = np.asarray(eta, dtype=float)
    theta = np.asarray(points, dtype=float)
    if eta.ndim != 1:
        raise ValueError(f"a score is of one member: eta must be (dim,), got {eta.shape}")
    if theta.ndim == 0 or theta.shape[-1] != coordinates:
        raise ValueError(
            f"points must be (..., {coordinates}) for this family's score, got {theta.shape}"
        )
    return eta, theta


def _concentration_partition_size(eta: np.ndarray) -> np.ndarray:
    """Σ|lnΓ(α_i)| + |lnΓ(Σα)|: the terms a Beta's or Dirichlet's log-partition is summed from."""
    alpha = np.asarray(eta, dtype=float) + 1.0
    return np.sum(np.abs(gammaln(alpha)), axis=-1) + np.abs(gammaln(np.sum(alpha, axis=-1)))


def _concentration_mean_error(eta: np.ndarray) -> np.ndarray:
    """|ψ(α_i)| + |ψ(Σα)|: what each mean parameter ψ(α_i) − ψ(Σα) of a Beta or Dirichlet is
    computed from."""
    alpha = np.asarray(eta, dtype=float) + 1.0
    total = digamma(np.sum(alpha, axis=-1, keepdims=True))
    return np.abs(digamma(alpha)) + np.abs(total)


def _concentrations_usable(eta: np.ndarray) -> np.ndarray:
    """Every concentration α = η + 1 > 0 (a member of the family)."""
    return np.all(np.asarray(eta, dtype=float) + 1.0 > 0.0, axis=-1)


_difference_of_products = stablekl.difference_of_products
