"""003's indicators (gossipsim.particles.selection) against their population values for Gaussians.

The closed form ``gaussian_stein_inner_product`` (E_{θ,θ'∼q}[h_{p1,p2}(θ, θ')], Theorem 1 of 003)
is checked by quadrature of the Stein kernel written from its definition: SciPy's ``dblquad`` in
one dimension, a tensor Gauss–Hermite rule in two. The particle-set statistics (eq. 10's KSD, eq.
19's inner product, eq. 24's HIP) are then checked as estimators of it: over R independent particle
sets of N draws from q, the mean V-statistic is within 4 standard errors of its exact expectation
(the population value plus the diagonal's O(1/N) share), and the U-statistic made from it (the
diagonal taken out) within 4 standard errors of the population value itself. The standard errors
are the replications' sample standard deviations over √R; the bandwidth h is fixed (a median
bandwidth depends on the draws, and the population value is for one h).

The clients are linear-Gaussian regressions: client k's likelihood Π N(y | xᵀθ, σ²) has the score
X_kᵀ(y_k − X_kθ)/σ² = −P_k(θ − μ_k), a Gaussian's with P_k = X_kᵀX_k/σ² and μ_k its least-squares
fit; the average p' = (Π p_k)^(1/K) of Lemma 3 is then N(μ', P̄⁻¹), P̄ = mean P_k and
μ' = P̄⁻¹ mean(P_kμ_k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import integrate

from gossipsim.particles import gaussian_stein_discrepancy, gaussian_stein_inner_product
from gossipsim.particles.selection import (
    inner_products,
    inner_products_with_average,
    stein_discrepancies,
)

Z = 4.0  # standard errors allowed; a fixed seed makes each check deterministic


def _spd(rng: np.random.Generator, d: int, scale: float) -> np.ndarray:
    a = rng.normal(size=(d, d))
    return scale * (a @ a.T / d + 0.5 * np.eye(d))


def _stein_kernel_grid(x, y, s1, s2, h):
    """h_{p1,p2}(x, y) of Theorem 1 from its definition, ``x``/``y``/scores ``(..., d)``:
    s_1(x)ᵀs_2(y)κ + s_1(x)ᵀ∇_yκ + ∇_xκᵀs_2(y) + tr ∇_x∇_yκ for κ = exp(−‖x − y‖²/h)."""
    d = x.shape[-1]
    diff = x - y
    squared = np.sum(diff**2, axis=-1)
    k = np.exp(-squared / h)
    grad_y = (2.0 / h) * diff * k[..., None]
    grad_x = -grad_y
    trace = k * (2.0 * d / h) - k * 4.0 * squared / h**2
    return (
        np.sum(s1 * s2, axis=-1) * k
        + np.sum(s1 * grad_y, axis=-1)
        + np.sum(grad_x * s2, axis=-1)
        + trace
    )


def _diagonal_mean(mean, cov, mean1, cov1, mean2, cov2, h) -> float:
    """E[h_{p1,p2}(θ, θ)] = E[s_1(θ)·s_2(θ)] + 2d/h for θ ∼ N(m, S) (κ = 1, no pull on the
    diagonal): the share of the N diagonal terms in the V-statistic's expectation."""
    p1, p2 = np.linalg.inv(cov1), np.linalg.inv(cov2)
    product = p1 @ p2
    return float(
        (mean - mean1) @ product @ (mean - mean2) + np.trace(product @ cov) + 2.0 * len(mean) / h
    )


# --- the closed form ---------------------------------------------------------------------------


def test_the_inner_product_of_one_target_with_itself_is_its_ksd_and_it_is_symmetric() -> None:
    rng = np.random.default_rng(21)
    d = 3
    m, s = rng.normal(size=d), _spd(rng, d, 0.7)
    mu1, cov1 = rng.normal(size=d), _spd(rng, d, 1.2)
    mu2, cov2 = rng.normal(size=d), _spd(rng, d, 0.5)
    for h in (0.3, 1.7, 25.0):
        same = gaussian_stein_inner_product(m, s, mu1, cov1, mu1, cov1, h)
        assert same == pytest.approx(gaussian_stein_discrepancy(m, s, mu1, cov1, h), rel=1e-12)
        assert same > 0.0
        forward = gaussian_stein_inner_product(m, s, mu1, cov1, mu2, cov2, h)
        backward = gaussian_stein_inner_product(m, s, mu2, cov2, mu1, cov1, h)
        assert forward == pytest.approx(backward, rel=1e-12)
    # q = p1: φ_1 = 0 in the RKHS, so its inner product with any other direction is 0
    assert gaussian_stein_inner_product(mu1, cov1, mu1, cov1, mu2, cov2, 1.1) == pytest.approx(
        0.0, abs=1e-12
    )


def test_the_closed_form_matches_dblquad_in_one_dimension() -> None:
    """∫∫ q(x)q(y) h_{p1,p2}(x, y) dx dy by adaptive quadrature over m ± 12s (the mass left out is
    below 1e-30), requested to 1e-11 absolute; the closed form agrees to 1e-8."""
    m, s, mu1, sigma1, mu2, sigma2, h = 0.4, 0.8, -0.3, 1.2, 1.1, 0.6, 0.9

    def integrand(y: float, x: float) -> float:
        """q(x)q(y)·h_{p1,p2}(x, y), the 1-D Stein kernel term by term from its definition."""
        density = math.exp(-0.5 * ((x - m) / s) ** 2 - 0.5 * ((y - m) / s) ** 2) / (
            2.0 * math.pi * s**2
        )
        s1, s2 = -(x - mu1) / sigma1**2, -(y - mu2) / sigma2**2
        k = math.exp(-((x - y) ** 2) / h)
        grad_y = 2.0 / h * (x - y) * k  # ∂κ/∂y
        grad_x = -grad_y
        trace = k * (2.0 / h - 4.0 * (x - y) ** 2 / h**2)  # ∂²κ/∂x∂y
        return density * (s1 * s2 * k + s1 * grad_y + grad_x * s2 + trace)

    lo, hi = m - 12.0 * s, m + 12.0 * s
    value, error = integrate.dblquad(integrand, lo, hi, lo, hi, epsabs=1e-11, epsrel=1e-11)
    assert error < 1e-9
    closed = gaussian_stein_inner_product(
        [m], [[s**2]], [mu1], [[sigma1**2]], [mu2], [[sigma2**2]], h
    )
    assert closed == pytest.approx(value, abs=1e-8)
    assert abs(closed) > 0.05  # a value the check can tell from 0


def test_the_closed_form_matches_a_gauss_hermite_rule_in_two_dimensions() -> None:
    """E over θ, θ' ∼ N(m, S) in R² by the tensor Gauss–Hermite rule on the four coordinates
    (θ = m + √2·L·t, LLᵀ = S): converged (24 against 32 nodes a coordinate) to 1e-11 relative."""
    m = np.array([0.3, -0.5])
    s = np.array([[0.6, 0.2], [0.2, 0.4]])
    mu1, cov1 = np.array([-0.4, 0.2]), np.array([[1.0, 0.3], [0.3, 0.5]])
    mu2, cov2 = np.array([0.8, 0.1]), np.array([[0.4, -0.1], [-0.1, 0.9]])
    h = 1.4
    chol = np.linalg.cholesky(s)
    p1, p2 = np.linalg.inv(cov1), np.linalg.inv(cov2)

    def expectation(nodes: int) -> float:
        t, w = np.polynomial.hermite.hermgauss(nodes)
        grid = np.stack(np.meshgrid(t, t, indexing="ij"), axis=-1).reshape(-1, 2)
        weights = np.outer(w, w).reshape(-1) / math.pi  # ∫ e^{-‖t‖²} dt = π in R²
        points = m + math.sqrt(2.0) * grid @ chol.T
        x, y = points[:, None, :], points[None, :, :]
        u = _stein_kernel_grid(x, y, -(x - mu1) @ p1, -(y - mu2) @ p2, h)
        return float(weights @ u @ weights)

    closed = gaussian_stein_inner_product(m, s, mu1, cov1, mu2, cov2, h)
    fine = expectation(32)
    assert fine == pytest.approx(expectation(24), rel=1e-11)  # the rule has converged
    assert closed == pytest.approx(fine, rel=1e-10)
    assert abs(closed) > 0.05


# --- K Gaussian likelihoods: Lemma 3 on the closed form ------------------------------------------


@dataclass(frozen=True)
class Clients:
    """K linear-Gaussian regression clients, q = N(m, S), and the Gaussian forms of their scores."""

    features: list[np.ndarray]  # X_k (n_k, d)
    targets: list[np.ndarray]  # y_k (n_k,)
    noise: float
    means: list[np.ndarray]  # μ_k
    covariances: list[np.ndarray]  # P_k⁻¹
    average_mean: np.ndarray  # μ'
    average_covariance: np.ndarray  # P̄⁻¹
    q_mean: np.ndarray
    q_covariance: np.ndarray

    def scores(self, particles: np.ndarray) -> np.ndarray:
        """∇log l_k at ``particles`` (N, d) from the data, ``(K, N, d)``."""
        return np.stack(
            [
                (y[None, :] - particles @ x.T) @ x / self.noise**2
                for x, y in zip(self.features, self.targets, strict=True)
            ]
        )


def _clients(seed: int = 31, count: int = 5, d: int = 2) -> Clients:
    rng = np.random.default_rng(seed)
    noise = 1.5
    truth = rng.normal(size=d)
    features, targets, means, precisions = [], [], [], []
    for k in range(count):
        x = rng.normal(size=(6 + 2 * k, d)) * rng.uniform(0.3, 1.0, size=d)
        y = x @ (truth + 0.8 * rng.normal(size=d)) + noise * rng.normal(size=len(x))  # skewed
        features.append(x)
        targets.append(y)
        precisions.append(x.T @ x / noise**2)
        means.append(np.linalg.solve(x.T @ x, x.T @ y))
    average = np.mean(precisions, axis=0)
    average_mean = np.linalg.solve(
        average, np.mean([p @ mu for p, mu in zip(precisions, means, strict=True)], axis=0)
    )
    return Clients(
        features,
        targets,
        noise,
        means,
        [np.linalg.inv(p) for p in precisions],
        average_mean,
        np.linalg.inv(average),
        q_mean=np.zeros(d),
        q_covariance=np.array([[1.0, 0.3], [0.3, 0.7]]),
    )


def _exact_hip(clients: Clients, h: float) -> np.ndarray:
    return np.array(
        [
            gaussian_stein_inner_product(
                clients.q_mean, clients.q_covariance, mu, cov,
                clients.average_mean, clients.average_covariance, h,
            )
            for mu, cov in zip(clients.means, clients.covariances, strict=True)
        ]
    )  # fmt: skip


def test_the_gaussian_forms_are_the_clients_scores() -> None:
    """The fixture's (μ_k, P_k⁻¹) and (μ', P̄⁻¹) give the scores the data give (the closed forms
    below are for the targets the particle statistics see)."""
    clients = _clients()
    theta = np.random.default_rng(5).normal(size=(7, 2))
    scores = clients.scores(theta)
    for k, (mu, cov) in enumerate(zip(clients.means, clients.covariances, strict=True)):
        np.testing.assert_allclose(scores[k], -(theta - mu) @ np.linalg.inv(cov), atol=1e-10)
    average = -(theta - clients.average_mean) @ np.linalg.inv(clients.average_covariance)
    np.testing.assert_allclose(scores.mean(axis=0), average, atol=1e-10)


def test_lemma_3_holds_for_the_closed_form() -> None:
    """Eq. (21): Σ_m ⟨φ_k, φ_m⟩ = K⟨φ_k, φ'⟩ for each k, and so Σ_k ⟨φ_k, φ'⟩ = K⟨φ', φ'⟩ =
    K·S(q, p') ≥ 0 (eq. 24's denominator), on population values. One client's may be negative."""
    clients = _clients()
    m, s, h = clients.q_mean, clients.q_covariance, 1.2
    targets = list(zip(clients.means, clients.covariances, strict=True))
    count = len(targets)
    hip = _exact_hip(clients, h)
    for k, (mu_k, cov_k) in enumerate(targets):
        pairwise = sum(
            gaussian_stein_inner_product(m, s, mu_k, cov_k, mu, cov, h) for mu, cov in targets
        )
        assert pairwise == pytest.approx(count * hip[k], rel=1e-11)
    ksd = gaussian_stein_discrepancy(m, s, clients.average_mean, clients.average_covariance, h)
    assert hip.sum() == pytest.approx(count * ksd, rel=1e-11)
    assert ksd > 0.0


# --- the particle statistics as estimators --------------------------------------------------------


def _u_from_v(v: np.ndarray, left: np.ndarray, right: np.ndarray, h: float) -> np.ndarray:
    """U-statistic(s) from V-statistic(s) of one set: (N²V − Σ_i h(θ_i, θ_i))/(N(N − 1)), where
    h(θ, θ) = s_1(θ)·s_2(θ) + 2d/h. ``left`` ``(K, N, d)``, ``right`` ``(K or 1, N, d)``."""
    n, d = left.shape[-2], left.shape[-1]
    diagonal = np.einsum("knd,knd->k", left, np.broadcast_to(right, left.shape)) + n * 2.0 * d / h
    return (n**2 * v - diagonal) / (n * (n - 1))


def _within(estimates: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|mean − expected| and the standard error of the mean, per column of ``estimates`` (R, K)."""
    standard_error = estimates.std(axis=0, ddof=1) / math.sqrt(len(estimates))
    return np.abs(estimates.mean(axis=0) - expected), standard_error


@pytest.mark.parametrize("count", [8, 40])
def test_ksd_and_hip_estimate_their_population_values(count: int) -> None:
    """R = 300 sets of N draws from q. Per client: the mean of ``stein_discrepancies`` (eq. 10) is
    within 4 SE of E[V] = S + (D − S)/N, and its U-statistic within 4 SE of S; likewise
    ``inner_products_with_average`` (eqs. 19, 24) against the HIP's closed form. The V mean is
    also > 4 SE from the population value itself (20-48 SE here): the diagonal's bias is visible
    at both N, so accounting for it is needed and the checks can tell."""
    clients = _clients()
    m, s, h = clients.q_mean, clients.q_covariance, 1.2
    rng = np.random.default_rng(100 + count)
    replications = 300
    ksd_v, ksd_u, hip_v, hip_u = [], [], [], []
    for _ in range(replications):
        theta = rng.multivariate_normal(m, s, size=count)
        scores = clients.scores(theta)
        v = stein_discrepancies(theta, scores, h)
        ksd_v.append(v)
        ksd_u.append(_u_from_v(v, scores, scores, h))
        v = inner_products_with_average(theta, scores, h)
        hip_v.append(v)
        hip_u.append(_u_from_v(v, scores, scores.mean(axis=0)[None], h))
    targets = list(zip(clients.means, clients.covariances, strict=True))
    ksd = np.array([gaussian_stein_discrepancy(m, s, mu, cov, h) for mu, cov in targets])
    ksd_diagonal = np.array([_diagonal_mean(m, s, mu, cov, mu, cov, h) for mu, cov in targets])
    hip = _exact_hip(clients, h)
    average = (clients.average_mean, clients.average_covariance)
    hip_diagonal = np.array([_diagonal_mean(m, s, mu, cov, *average, h) for mu, cov in targets])
    cases = {
        "ksd V": (np.array(ksd_v), ksd + (ksd_diagonal - ksd) / count),
        "ksd U": (np.array(ksd_u), ksd),
        "hip V": (np.array(hip_v), hip + (hip_diagonal - hip) / count),
        "hip U": (np.array(hip_u), hip),
    }
    for name, (estimates, expected) in cases.items():
        gap, standard_error = _within(estimates, expected)
        assert np.all(gap < Z * standard_error), (name, gap / standard_error)
    for name, population in (("ksd", ksd), ("hip", hip)):
        gap, standard_error = _within(cases[f"{name} V"][0], population)
        assert np.all(gap > Z * standard_error), (name, gap / standard_error)


def test_inner_products_with_another_target_estimate_the_closed_form() -> None:
    """``inner_products`` against a target that is no client's (a Gaussian posterior-like p2):
    the U-statistic's mean over R = 300 sets of N = 20 is within 4 SE of the closed form (which is
    negative for most clients here: their directions point away from p2's)."""
    clients = _clients()
    m, s, h = clients.q_mean, clients.q_covariance, 0.8
    mu2, cov2 = np.array([0.5, -0.4]), np.array([[0.3, 0.05], [0.05, 0.2]])
    p2 = np.linalg.inv(cov2)
    rng = np.random.default_rng(7)
    replications, count = 300, 20
    estimates = []
    for _ in range(replications):
        theta = rng.multivariate_normal(m, s, size=count)
        scores = clients.scores(theta)
        target = -(theta - mu2) @ p2
        v = inner_products(theta, scores, target, h)
        estimates.append(_u_from_v(v, scores, target[None], h))
    expected = np.array(
        [
            gaussian_stein_inner_product(m, s, mu, cov, mu2, cov2, h)
            for mu, cov in zip(clients.means, clients.covariances, strict=True)
        ]
    )
    gap, standard_error = _within(np.array(estimates), expected)
    assert np.all(gap < Z * standard_error), gap / standard_error
    # the check tells the clients apart (one client's value happens to be near 0, others < 0)
    assert np.ptp(expected) > 2 * Z * standard_error.max()
