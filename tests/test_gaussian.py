"""Gaussian families (full and diagonal) and the natural-gradient estimators (eqs. 17-20)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from gossipsim.errors import ConfigError
from gossipsim.families.expfam import Beta, ExponentialFamily
from gossipsim.families.gaussian import GaussianDiagonal, GaussianFull
from gossipsim.families.natgrad import (
    gaussian_mean_gradient,
    reinforce_estimate,
    reinforce_mean_gradient,
    reparameterisation_mean_gradient,
    score_sum,
    solve_fisher,
)
from gossipsim.models.glm import expected_logistic_grad_hess, logistic_grad_hess, logistic_loss


def _random_moments(d: int, seed: int, diagonal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    cov = a @ a.T + 0.5 * np.eye(d)
    if diagonal:
        cov = np.diag(np.diag(cov))
    return rng.normal(size=d), cov


def _etas(family: GaussianFull | GaussianDiagonal, count: int = 3) -> np.ndarray:
    diagonal = isinstance(family, GaussianDiagonal)
    return np.stack([family.natural(*_random_moments(family.d, s, diagonal)) for s in range(count)])


FAMILIES = [
    GaussianFull(1),
    GaussianFull(2),
    GaussianFull(3),
    GaussianDiagonal(1),
    GaussianDiagonal(3),
]
IDS = ["full1", "full2", "full3", "diag1", "diag3"]


def _fd_gradient(func, eta: np.ndarray, h: float) -> np.ndarray:
    return np.array([(func(eta + h * e) - func(eta - h * e)) / (2 * h) for e in np.eye(eta.size)])


# --------------------------------------------------------------------------- layouts and conversions
def test_dimensions_and_message_entries():
    assert (GaussianFull(3).dim, GaussianFull(3).message_entries) == (12, 9)
    assert (GaussianDiagonal(3).dim, GaussianDiagonal(3).message_entries) == (6, 6)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError):
            GaussianFull(bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            GaussianDiagonal(bad)  # type: ignore[arg-type]


def test_full_flat_layout_and_round_trip():
    mean, cov = _random_moments(3, 0)
    lam = np.linalg.inv(cov)
    eta = GaussianFull.natural(mean, cov=cov)
    np.testing.assert_allclose(eta[:3], lam @ mean, rtol=1e-12)
    np.testing.assert_allclose(eta[3:].reshape(3, 3), -0.5 * lam, rtol=1e-12)
    np.testing.assert_allclose(GaussianFull.natural(mean, precision=lam), eta, rtol=1e-12)
    fam = GaussianFull(3)
    m, c = fam.conventional(eta)
    np.testing.assert_allclose(m, mean, rtol=1e-12)
    np.testing.assert_allclose(c, cov, rtol=1e-12)
    np.testing.assert_allclose(fam.precision(eta), lam, rtol=1e-12)
    # batched
    means = np.stack([mean, -mean])
    covs = np.stack([cov, 2 * cov])
    etas = GaussianFull.natural(means, cov=covs)
    assert etas.shape == (2, 12)
    ms, cs = fam.conventional(etas)
    np.testing.assert_allclose(ms, means, rtol=1e-12)
    np.testing.assert_allclose(cs, covs, rtol=1e-12)
    with pytest.raises(ConfigError):
        GaussianFull.natural(mean)
    with pytest.raises(ConfigError):
        GaussianFull.natural(mean, cov=cov, precision=lam)


def test_diagonal_flat_layout_and_round_trip():
    mean, var = np.array([0.5, -1.0, 2.0]), np.array([0.3, 2.0, 1.5])
    eta = GaussianDiagonal.natural(mean, cov=var)
    np.testing.assert_allclose(eta, np.concatenate([mean / var, -0.5 / var]), rtol=1e-14)
    np.testing.assert_allclose(GaussianDiagonal.natural(mean, cov=np.diag(var)), eta, rtol=1e-14)
    np.testing.assert_allclose(GaussianDiagonal.natural(mean, precision=1 / var), eta, rtol=1e-14)
    fam = GaussianDiagonal(3)
    m, c = fam.conventional(eta)
    np.testing.assert_allclose(m, mean, rtol=1e-14)
    np.testing.assert_allclose(c, np.diag(var), rtol=1e-14)
    np.testing.assert_allclose(fam.variance(eta), var, rtol=1e-14)
    np.testing.assert_allclose(fam.precision(eta), np.diag(1 / var), rtol=1e-14)


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_log_density_matches_scipy(family):
    """ηᵀs(θ) − A(η) − (d/2) log 2π is the Gaussian log density: A excludes the constant."""
    rng = np.random.default_rng(1)
    eta = _etas(family)[0]
    mean, cov = family.conventional(eta)
    theta = rng.normal(size=(5, family.d))
    log_q = (
        family.sufficient_statistics(theta) @ eta
        - family.log_partition(eta)
        - 0.5 * family.d * np.log(2 * np.pi)
    )
    np.testing.assert_allclose(
        log_q, stats.multivariate_normal(mean, cov).logpdf(theta), rtol=1e-10
    )


def test_diagonal_agrees_with_full_on_diagonal_covariances():
    full, diag = GaussianFull(3), GaussianDiagonal(3)
    (m1, c1), (m2, c2) = _random_moments(3, 4, True), _random_moments(3, 5, True)
    f1, f2 = full.natural(m1, cov=c1), full.natural(m2, cov=c2)
    d1, d2 = diag.natural(m1, cov=c1), diag.natural(m2, cov=c2)
    assert diag.log_partition(d1) == pytest.approx(full.log_partition(f1), rel=1e-12)
    assert diag.kl(d1, d2) == pytest.approx(full.kl(f1, f2), rel=1e-12)


# --------------------------------------------------------------------------- generic family checks
@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_mean_params_are_gradient_of_log_partition(family):
    for eta in _etas(family):
        grad = _fd_gradient(family.log_partition, eta, 1e-6)
        np.testing.assert_allclose(family.mean_params(eta), grad, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_fisher_is_hessian_of_log_partition(family):
    """Entry-by-entry perturbations of the flat η (including non-symmetric η₂ ones)."""
    for eta in _etas(family):
        hess = _fd_gradient(family.mean_params, eta, 1e-5)
        np.testing.assert_allclose(family.fisher(eta), hess, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_fisher_norm_is_the_quadratic_form_of_the_fisher_and_the_kl_to_second_order(family):
    """The closed form √(vᵀFv) (no dim × dim matrix) against the Fisher matrix, for directions with
    non-symmetric η₂ blocks too; and ½‖tv‖²_F against the exact KL(q_η ‖ q_{η+tv}) (error O(t³))."""
    rng = np.random.default_rng(4)
    for eta in _etas(family):
        for _ in range(3):
            v = rng.normal(size=family.dim)
            quadratic = float(v @ family.fisher(eta) @ v)
            assert family.fisher_norm(eta, v) ** 2 == pytest.approx(quadratic, rel=1e-12)
            step = 1e-4 * v / family.fisher_norm(eta, v)
            kl = float(family.kl(eta, eta + step))
            assert kl == pytest.approx(0.5e-8, rel=1e-3)


def test_full_fisher_is_second_difference_of_log_partition():
    fam = GaussianFull(2)
    eta = _etas(fam)[1]
    h = 1e-4
    basis = np.eye(fam.dim)
    second = np.array(
        [
            [
                (
                    fam.log_partition(eta + h * (ei + ej))
                    - fam.log_partition(eta + h * (ei - ej))
                    - fam.log_partition(eta - h * (ei - ej))
                    + fam.log_partition(eta - h * (ei + ej))
                )
                / (4 * h * h)
                for ej in basis
            ]
            for ei in basis
        ]
    )
    np.testing.assert_allclose(fam.fisher(eta), second, rtol=1e-5, atol=1e-5)


def test_full_fisher_null_space_is_antisymmetric_eta2():
    fam = GaussianFull(3)
    eta = _etas(fam)[0]
    fisher = fam.fisher(eta)
    proj = fam.fisher_null_projector()
    np.testing.assert_allclose(proj @ proj, proj, atol=1e-15)
    np.testing.assert_allclose(fisher @ proj, 0.0, atol=1e-12)
    assert np.linalg.matrix_rank(fisher) == fam.message_entries
    eig = np.linalg.eigvalsh(fisher + proj)
    assert eig.min() > 1e-6
    # A is constant along antisymmetric η₂ perturbations
    anti = np.zeros(fam.dim)
    anti[3 + 1], anti[3 + 3] = 0.7, -0.7  # η₂[0,1] += 0.7, η₂[1,0] −= 0.7
    assert fam.log_partition(eta + anti) == pytest.approx(fam.log_partition(eta), rel=1e-13)


def test_fisher_is_covariance_of_statistics():
    fam = GaussianFull(2)
    eta = _etas(fam)[0]
    rng = np.random.default_rng(3)
    s = fam.sufficient_statistics(fam.sample(eta, 400_000, rng))
    np.testing.assert_allclose(np.cov(s.T), fam.fisher(eta), rtol=0.05, atol=0.02)


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_fisher_is_batched(family):
    etas = _etas(family)
    batched = family.fisher(etas)
    for eta, f in zip(etas, batched, strict=True):
        np.testing.assert_allclose(family.fisher(eta), f, rtol=1e-14)


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_kl_is_zero_on_itself_and_positive_elsewhere(family):
    etas = _etas(family)
    assert np.all(family.kl(etas, etas) == 0.0)
    assert np.all(family.kl(etas[0], etas[1:]) > 0)
    # agrees with the Bregman form of the base class
    np.testing.assert_allclose(
        family.kl(etas[0], etas[1:]), ExponentialFamily.kl(family, etas[0], etas[1:]), rtol=1e-9
    )


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_kl_broadcasts_over_both_arguments(family):
    etas = _etas(family, 4)
    table = family.kl(etas[:, None, :], etas[None, :, :])
    assert table.shape == (4, 4)
    for i in range(4):
        for j in range(4):
            assert table[i, j] == pytest.approx(family.kl(etas[i], etas[j]), rel=1e-12, abs=0)
    assert np.all(np.diag(table) == 0.0)


def test_full_kl_matches_closed_form_and_monte_carlo():
    fam = GaussianFull(2)
    (mq, cq), (mp, cp) = _random_moments(2, 7), _random_moments(2, 8)
    lam_p = np.linalg.inv(cp)
    delta = mp - mq
    expected = 0.5 * (
        np.trace(lam_p @ cq)
        + delta @ lam_p @ delta
        - 2
        + np.log(np.linalg.det(cp) / np.linalg.det(cq))
    )
    value = fam.kl(fam.natural(mq, cov=cq), fam.natural(mp, cov=cp))
    assert value == pytest.approx(expected, rel=1e-12)
    rng = np.random.default_rng(9)
    theta = rng.multivariate_normal(mq, cq, size=200_000)
    ratio = stats.multivariate_normal(mq, cq).logpdf(theta) - stats.multivariate_normal(
        mp, cp
    ).logpdf(theta)
    assert abs(ratio.mean() - value) < 4 * ratio.std() / np.sqrt(ratio.size)


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_sampling_matches_mean_parameters(family):
    """E[s(θ)] over 200,000 draws equals μ = ∇A(η) within 5 standard errors."""
    rng = np.random.default_rng(11)
    eta = _etas(family)[2]
    draws = family.sample(eta, 200_000, rng)
    assert draws.shape == (200_000, family.d)
    s = family.sufficient_statistics(draws)
    se = s.std(axis=0) / np.sqrt(len(s))
    assert np.all(np.abs(s.mean(axis=0) - family.mean_params(eta)) < 5 * se + 1e-15)


def test_in_domain_is_batched_and_log_partition_is_nan_outside():
    fam = GaussianFull(2)
    good = _etas(fam)[0]
    indefinite = GaussianFull.natural(np.zeros(2), precision=np.diag([1.0, -1.0]))
    bad = np.stack([good, indefinite, -good, np.full(6, np.nan)])
    np.testing.assert_array_equal(fam.in_domain(bad), [True, False, False, False])
    assert fam.in_domain(good)
    values = fam.log_partition(bad)
    assert np.isfinite(values[0]) and np.all(np.isnan(values[1:]))
    diag = GaussianDiagonal(2)
    etas = np.array([[1.0, 1.0, -0.5, -0.5], [1.0, 1.0, -0.5, 0.0], [1.0, 1.0, 0.5, -0.5]])
    np.testing.assert_array_equal(diag.in_domain(etas), [True, False, False])


# --------------------------------------------------------------------------- natural gradients
@pytest.mark.parametrize(
    "family", [GaussianFull(2), GaussianFull(3), GaussianDiagonal(2), GaussianDiagonal(3)]
)
def test_closed_form_reinforce_equals_exact_fisher_solve(family):
    """The (m, Σ) closed form is F(η)⁻¹ · scale · Σ w (s(θ) − μ) with the FIM inverse exact."""
    rng = np.random.default_rng(5)
    for eta in _etas(family):
        thetas = family.sample(eta, 9, rng)
        weights = rng.normal(size=9)
        closed = reinforce_mean_gradient(family, eta, thetas, weights, scale=0.37)
        generic = reinforce_mean_gradient(
            family, eta, thetas, weights, scale=0.37, closed_form=False
        )
        np.testing.assert_allclose(closed, generic, rtol=1e-9, atol=1e-11)
        # and F · g reproduces the score sum (eq. 20)
        b = score_sum(family, eta, thetas, weights, scale=0.37)
        np.testing.assert_allclose(family.fisher(eta) @ closed, b, rtol=1e-9, atol=1e-11)


def test_full_gradient_keeps_eta2_symmetric():
    fam = GaussianFull(3)
    eta = _etas(fam)[0]
    rng = np.random.default_rng(2)
    g = reinforce_mean_gradient(fam, eta, fam.sample(eta, 5, rng), rng.normal(size=5))
    block = g[3:].reshape(3, 3)
    np.testing.assert_array_equal(block, block.T)


def test_solve_fisher_matches_direct_solve_for_beta():
    fam = Beta()
    eta = Beta.natural(3.0, 5.0)
    v = np.array([0.3, -1.2])
    np.testing.assert_allclose(
        solve_fisher(fam, eta, v), np.linalg.solve(fam.fisher(eta), v), rtol=1e-14
    )


def test_reinforce_estimate_with_leave_one_out_baseline_ignores_constants():
    fam = GaussianFull(2)
    eta = _etas(fam)[0]
    g = reinforce_estimate(fam, eta, lambda t: np.full(len(t), 3.0), 10, np.random.default_rng(0))
    np.testing.assert_array_equal(g, 0.0)
    with pytest.raises(ValueError):
        reinforce_estimate(fam, eta, lambda t: t[:, 0], 1, np.random.default_rng(0))


def test_gaussian_mean_gradient_on_a_quadratic_is_exact():
    """f(θ) = ½θᵀHθ + bᵀθ: E_q[f] = ½tr(Hμ₂) + bᵀμ₁ is linear in μ, so ∇_μ = (b, ½H)."""
    rng = np.random.default_rng(6)
    a = rng.normal(size=(3, 3))
    hess = a @ a.T
    b = rng.normal(size=3)
    for fam in (GaussianFull(3), GaussianDiagonal(3)):
        eta = _etas(fam)[0]
        mean = fam.conventional(eta)[0]
        g = gaussian_mean_gradient(fam, eta, hess @ mean + b, hess)
        if isinstance(fam, GaussianFull):
            expected = np.concatenate([b, 0.5 * hess.ravel()])
        else:  # mean field: only the diagonal of H couples to μ₂
            expected = np.concatenate(
                [b + (hess - np.diag(np.diag(hess))) @ mean, 0.5 * np.diag(hess)]
            )
        np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-12)


def test_beta_reinforce_is_unbiased():
    """Beta–exponential loss f(θ) = N log θ + Z/θ: the mean of REINFORCE estimates equals the
    quadrature value F⁻¹ ∫ f (s − μ) q dθ within 4 standard errors per coordinate."""
    fam = Beta()
    a, b = 4.0, 3.0
    eta = Beta.natural(a, b)
    n_points, z_sum = 10.0, 5.0
    mu = fam.mean_params(eta)

    def f(t):
        return n_points * np.log(t) + z_sum / t

    score = [
        integrate.quad(
            lambda t, i=i: (
                f(t) * (fam.sufficient_statistics(t)[i] - mu[i]) * stats.beta.pdf(t, a, b)
            ),
            0,
            1,
        )[0]
        for i in range(2)
    ]
    exact = np.linalg.solve(fam.fisher(eta), np.array(score))
    rng = np.random.default_rng(12)
    batches, samples = 10_000, 10
    thetas = rng.beta(a, b, size=(batches, samples))
    baseline = 4.0  # ≈ E_q[f]; any constant keeps the estimator unbiased
    estimates = np.array(
        [reinforce_mean_gradient(fam, eta, t, f(t) - baseline, scale=1.0 / samples) for t in thetas]
    )
    se = estimates.std(axis=0, ddof=1) / np.sqrt(batches)
    assert np.all(np.abs(estimates.mean(axis=0) - exact) < 4 * se)


def _logistic_problem():
    rng = np.random.default_rng(21)
    X = np.column_stack([rng.normal(size=30), np.ones(30)])
    y = (rng.random(30) < 0.6).astype(float)
    return X, y


@pytest.mark.parametrize("family", [GaussianFull(2), GaussianDiagonal(2)], ids=["full", "diag"])
def test_gaussian_estimators_are_unbiased_and_reparameterisation_has_lower_variance(family):
    X, y = _logistic_problem()
    mean = np.array([0.3, -0.5])
    cov = np.array([[0.5, 0.2], [0.2, 0.4]])
    if isinstance(family, GaussianDiagonal):
        cov = np.diag(np.diag(cov))
    eta = family.natural(mean, cov=cov)
    exact = gaussian_mean_gradient(family, eta, *expected_logistic_grad_hess(mean, cov, X, y))

    rng = np.random.default_rng(33)
    batches, samples = 3000, 10
    thetas = family.sample(eta, batches * samples, rng).reshape(batches, samples, 2)
    losses = logistic_loss(thetas, X, y).sum(axis=-1)  # (batches, samples)
    baseline = float(losses.mean())  # a constant c keeps REINFORCE unbiased
    reinforce = np.array(
        [
            reinforce_mean_gradient(family, eta, t, w - baseline, scale=1.0 / samples)
            for t, w in zip(thetas, losses, strict=True)
        ]
    )
    grads, hessians = logistic_grad_hess(thetas, X, y)
    reparam = gaussian_mean_gradient(family, eta, grads.mean(axis=1), hessians.mean(axis=1))
    assert reparam.shape == reinforce.shape == (batches, family.dim)
    for estimates in (reinforce, reparam):
        se = estimates.std(axis=0, ddof=1) / np.sqrt(batches)
        assert np.all(np.abs(estimates.mean(axis=0) - exact) < 4 * se + 1e-12)
    var_reinforce = reinforce.var(axis=0)
    var_reparam = reparam.var(axis=0)
    assert np.all(var_reparam < var_reinforce)
    print(f"{family.name}: variance ratio reparam/REINFORCE = {var_reparam / var_reinforce}")


def test_reparameterisation_helper_matches_manual_average():
    fam = GaussianFull(2)
    X, y = _logistic_problem()
    eta = fam.natural(np.array([0.1, 0.2]), cov=np.eye(2) * 0.3)
    g = reparameterisation_mean_gradient(
        fam, eta, lambda t: logistic_grad_hess(t, X, y), 50, np.random.default_rng(4)
    )
    thetas = fam.sample(eta, 50, np.random.default_rng(4))
    grads, hess = logistic_grad_hess(thetas, X, y)
    np.testing.assert_allclose(
        g, gaussian_mean_gradient(fam, eta, grads.mean(0), hess.mean(0)), rtol=1e-14
    )


def test_the_kept_moments_are_those_of_the_eta_asked_for():
    """GaussianFull keeps the moments of the last single η (a natural-gradient step asks twice):
    asked again for it, or for another η, or for an η changed in place, it gives the moments that
    η has (compared with a family that never saw it), read-only; a pickled copy keeps none."""
    import pickle

    family = GaussianFull(3)
    first = GaussianFull.natural(*_random_moments(3, 1))
    second = GaussianFull.natural(*_random_moments(3, 2))

    def fresh(eta: np.ndarray) -> tuple[np.ndarray, ...]:
        return GaussianFull(3)._moments(eta.copy())

    for eta in (first, second, first, first):
        got = family._moments(eta)
        for a, b in zip(got, fresh(eta), strict=True):
            np.testing.assert_array_equal(a, b)
    mean = family._moments(first)[0]
    with pytest.raises(ValueError, match="read-only"):
        mean[0] = 1.0
    changed = first.copy()
    family._moments(changed)
    changed[0] += 0.5  # the same array object, other values
    np.testing.assert_array_equal(family._moments(changed)[0], fresh(changed)[0])
    assert not np.array_equal(family._moments(changed)[0], fresh(first)[0])
    # a batch is computed, not kept, and leaves the kept η alone
    stack = np.stack([first, second])
    np.testing.assert_array_equal(family._moments(stack)[0][1], fresh(second)[0])
    assert pickle.loads(pickle.dumps(family))._last is None


def test_lower_inverse_is_the_inverse_of_each_factor_wherever_it_sits():
    """The triangular inverse of the moments (LAPACK's dtrtri) against NumPy's general inverse and
    against L L⁻¹ = I, lower-triangular, and each factor's bits the same alone and in a stack."""
    from gossipsim.families.gaussian import _lower_inverse

    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 7, 9))
    chol = np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + 0.1 * np.eye(7))
    inverse = _lower_inverse(chol)
    assert inverse.shape == chol.shape
    np.testing.assert_allclose(inverse, np.linalg.inv(chol), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chol @ inverse, np.broadcast_to(np.eye(7), chol.shape), atol=1e-12)
    assert np.all(np.triu(inverse, 1) == 0.0)
    np.testing.assert_array_equal(_lower_inverse(chol[1, 2]), inverse[1, 2])
    singular = chol[0, 0].copy()
    singular[3, 3] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        _lower_inverse(singular)
