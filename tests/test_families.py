"""Exponential families against finite differences, quadrature and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import digamma, gammaln

from gossipsim.families import Beta, Dirichlet, Gamma, Normal

FAMILIES = [
    (Beta(), np.array([[1.5, 3.0], [10.0, 0.2], [80.0, 25.0]])),
    (Gamma(), np.array([[0.5, -2.0], [4.0, -0.3], [30.0, -12.0]])),
    (Normal(), np.array([[0.3, -0.5], [-4.0, -2.0], [10.0, -50.0]])),
    (Dirichlet(3), np.array([[0.5, 1.0, 2.0], [10.0, 0.1, 3.0], [40.0, 50.0, 60.0]])),
]


@pytest.mark.parametrize(("family", "etas"), FAMILIES, ids=lambda f: getattr(f, "name", ""))
def test_mean_params_are_gradient_of_log_partition(family, etas):
    h = 1e-6
    for eta in etas:
        grad = np.array(
            [
                (family.log_partition(eta + h * e) - family.log_partition(eta - h * e)) / (2 * h)
                for e in np.eye(eta.size)
            ]
        )
        np.testing.assert_allclose(family.mean_params(eta), grad, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(("family", "etas"), FAMILIES, ids=lambda f: getattr(f, "name", ""))
def test_fisher_is_hessian_of_log_partition(family, etas):
    h = 1e-5
    for eta in etas:
        hess = np.array(
            [
                (family.mean_params(eta + h * e) - family.mean_params(eta - h * e)) / (2 * h)
                for e in np.eye(eta.size)
            ]
        )
        np.testing.assert_allclose(family.fisher(eta), hess, rtol=1e-5, atol=1e-6)
    # one η at a time (a natural-gradient step) and a batch of them: the same floats
    assert np.array_equal(family.fisher(etas), np.stack([family.fisher(eta) for eta in etas]))


@pytest.mark.parametrize(("family", "etas"), FAMILIES, ids=lambda f: getattr(f, "name", ""))
def test_kl_is_zero_on_itself_and_positive_elsewhere(family, etas):
    np.testing.assert_allclose(family.kl(etas, etas), 0.0, atol=1e-12)
    assert np.all(family.kl(etas[0], etas[1:]) > 0)


def test_beta_kl_matches_quadrature():
    q, p = (3.0, 5.0), (7.0, 2.0)
    fam = Beta()

    def integrand(t):
        return stats.beta.pdf(t, *q) * (stats.beta.logpdf(t, *q) - stats.beta.logpdf(t, *p))

    expected, _ = integrate.quad(integrand, 0, 1)
    assert fam.kl(Beta.natural(*q), Beta.natural(*p)) == pytest.approx(expected, rel=1e-8)


def test_gamma_kl_matches_quadrature():
    fam = Gamma()
    q, p = (3.0, 2.0), (5.0, 1.5)  # (shape, rate)

    def integrand(t):
        lq = stats.gamma.logpdf(t, q[0], scale=1 / q[1])
        lp = stats.gamma.logpdf(t, p[0], scale=1 / p[1])
        return np.exp(lq) * (lq - lp)

    expected, _ = integrate.quad(integrand, 0, np.inf)
    assert fam.kl(Gamma.natural(*q), Gamma.natural(*p)) == pytest.approx(expected, rel=1e-8)


def test_normal_kl_closed_form():
    fam = Normal()
    m1, v1, m2, v2 = 0.3, 2.0, -1.0, 0.5
    expected = 0.5 * (np.log(v2 / v1) + (v1 + (m1 - m2) ** 2) / v2 - 1)
    assert fam.kl(Normal.natural(m1, v1), Normal.natural(m2, v2)) == pytest.approx(
        expected, rel=1e-12
    )


def test_dirichlet_kl_closed_form():
    a = np.array([2.0, 3.0, 4.0])
    b = np.array([1.0, 5.0, 0.5])
    a0, b0 = a.sum(), b.sum()
    expected = (
        gammaln(a0)
        - gammaln(a).sum()
        - gammaln(b0)
        + gammaln(b).sum()
        + np.sum((a - b) * (digamma(a) - digamma(a0)))
    )
    assert Dirichlet(3).kl(a - 1, b - 1) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("family", "etas"), FAMILIES, ids=lambda f: getattr(f, "name", ""))
def test_sampling_matches_mean_parameters(family, etas):
    """E[s(θ)] over 200,000 draws equals μ = ∇A(η) within 5 standard errors."""
    rng = np.random.default_rng(11)
    eta = etas[0]
    draws = family.sample(eta, 200_000, rng)
    s = family.sufficient_statistics(draws)
    se = s.std(axis=0) / np.sqrt(len(s))
    assert np.all(np.abs(s.mean(axis=0) - family.mean_params(eta)) < 5 * se)
    assert np.all(family.in_domain(etas))


def test_trigamma_is_polygamma_of_order_one_bit_for_bit():
    """The Fisher matrices' ψ₁ is ζ(2, x), which is what polygamma(1, x) computes: the same
    floats (so no number changes), checked against polygamma and against the series
    ψ₁(x) = Σₙ 1/(x + n)² summed by brute force."""
    from scipy.special import polygamma

    from gossipsim.families.expfam import trigamma

    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.lognormal(0.0, 3.0, 20_000), rng.uniform(1e-8, 1e3, 20_000), [1e-300, 0.5, 1.0, 1e300]]
    )
    assert np.array_equal(trigamma(x), polygamma(1, x))
    assert float(trigamma(2.5)) == float(polygamma(1, 2.5))
    n = np.arange(2_000_000, dtype=float)
    for point in (0.3, 1.0, 7.5):
        tail = 1.0 / (point + n[-1] + 0.5)  # the rest of the series, Σ beyond N ≈ 1/(x + N + ½)
        assert trigamma(point) == pytest.approx(np.sum(1.0 / (point + n) ** 2) + tail, rel=1e-12)
    assert trigamma(1.0) == pytest.approx(np.pi**2 / 6, rel=1e-15)
