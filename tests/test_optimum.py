"""The targets that KL, convergence and latency are measured against, each checked by another method.

- Logistic regression (both Gaussian families, every bundled classification set): the centralised
  optimum is stationary, agrees with an independent optimiser of the free energy written here
  (L-BFGS over the mean and the Cholesky factor / log-variances, with its own 64-point quadrature),
  and G-FVL with exact expectations reaches it.
- Beta–exponential: the best-in-family Beta agrees with Nelder–Mead on KL(q ‖ p) and with a grid.
- Linear regression: the exact posterior agrees with a least-squares solve of the augmented system.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.special import expit

import gossipsim as gs
from gossipsim.families import Beta
from gossipsim.glm import logistic_projection_expectations
from gossipsim.models import ExactPosterior
from gossipsim.optimum import (
    STATIONARITY_TOL,
    OptimumError,
    relative_residual,
    stationarity_residual,
    variational_optimum,
)

CLASSIFICATION = ["iris", "wine", "breast_cancer", "digits"]
FAMILIES = ["gaussian-full", "gaussian-diagonal"]


def logistic_world(dataset: str, family: str, nodes: int = 10, **protocol):
    raw = {
        "scenario": {"name": "opt", "seed": 3, "runs": 1, "iterations": 10},
        "topology": {"kind": "complete", "nodes": nodes},
        "model": {
            "kind": "logistic-regression",
            "family": family,
            "prior": {"mean": 0.0, "variance": 1.0},
        },
        "data": {"dataset": dataset, "partition": "iid"},
        "protocol": {"estimator": "exact", **protocol},
    }
    return gs.build_world(gs.parse_study(raw).variants[0].scenario)


# ----------------------------------------------------------------------------- independent optimiser


@pytest.mark.parametrize("scale", [0.01, 0.5, 1.0, 1.001, 3.0, 12.0, 60.0])
@pytest.mark.parametrize("loc", [-35.0, -4.0, 0.0, 0.7, 9.0, 22.0])
def test_projection_integrals_match_adaptive_quadrature(loc, scale):
    """E[log(1 + eᵃ)], E[σ(a)], E[σ'(a)] for a ~ N(loc, scale²) against scipy's adaptive quadrature
    (split at 0 and at loc ± 10·scale), to 1e-11 absolute; narrow and wide projections both."""

    def reference(f):
        def g(a):
            return f(a) * np.exp(-0.5 * ((a - loc) / scale) ** 2) / (scale * np.sqrt(2 * np.pi))

        edges = sorted({-np.inf, loc - 10 * scale, 0.0, loc, loc + 10 * scale, np.inf})
        return sum(
            integrate.quad(g, lo, hi, epsabs=1e-14, epsrel=1e-13, limit=400)[0]
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        )

    got = logistic_projection_expectations(np.array([loc]), np.array([scale]))
    want = [
        reference(lambda a: np.logaddexp(0.0, a)),
        reference(expit),
        reference(lambda a: expit(a) * expit(-a)),
    ]
    for value, expected in zip(got, want, strict=True):
        assert abs(value[0] - expected) <= 1e-11 + 1e-13 * abs(expected)


def test_projection_integrals_are_derivatives_of_one_rule():
    """E[σ] = ∂R/∂loc and E[σ'] = (∂R/∂scale)/scale of the rule R for E[softplus], on both sides
    of the switch between the two integration methods (central differences)."""
    loc = np.array([-3.0, 0.2, 4.0, 0.2, 7.0])
    scale = np.array([0.4, 0.9, 1.5, 6.0, 20.0])
    soft, sig, slope = logistic_projection_expectations(loc, scale)
    h = 1e-5
    d_loc = (
        logistic_projection_expectations(loc + h, scale)[0]
        - logistic_projection_expectations(loc - h, scale)[0]
    ) / (2 * h)
    d_scale = (
        logistic_projection_expectations(loc, scale + h)[0]
        - logistic_projection_expectations(loc, scale - h)[0]
    ) / (2 * h)
    assert np.allclose(sig, d_loc, rtol=1e-8, atol=1e-9)
    assert np.allclose(slope, d_scale / scale, rtol=1e-7, atol=1e-9)


class FreeEnergy:
    """F(m, Σ) = E_q[Σ_n log(1 + e^{a_n}) − y_n a_n] + KL(N(m, Σ) ‖ N(m₀, v₀I)) assembled here: the
    projections, the KL (from log-determinants) and the chain rule to the parameters are the
    test's own; the one-dimensional integrals E[softplus(a)], E[σ(a)], E[σ'(a)] are the package's
    rule, itself checked against adaptive quadrature below. Parameters: the mean and the lower
    Cholesky factor (full) or the log-variances (diagonal)."""

    def __init__(self, X, y, prior_mean: float, prior_var: float, diagonal: bool) -> None:
        self.X, self.y = X, y
        self.m0, self.v0 = prior_mean, prior_var
        self.diagonal = diagonal
        self.d = X.shape[1]
        self.tril = np.tril_indices(self.d)

    def unpack(self, x):
        d = self.d
        m = x[:d]
        if self.diagonal:
            return m, np.exp(x[d:])
        chol = np.zeros((d, d))
        chol[self.tril] = x[d:]
        return m, chol

    def covariance(self, x) -> np.ndarray:
        _, c = self.unpack(x)
        return np.diag(c) if self.diagonal else c @ c.T

    def value_and_grad(self, x):
        X, y, d = self.X, self.y, self.d
        m, c = self.unpack(x)
        cov = np.diag(c) if self.diagonal else c @ c.T
        loc = X @ m
        s = np.sqrt(np.einsum("ni,ij,nj->n", X, cov, X))
        e_soft, e_sig, e_dsig = logistic_projection_expectations(loc, s)
        e_loss = e_soft.sum() - y @ loc
        logdet = np.sum(np.log(c)) if self.diagonal else 2 * np.sum(np.log(np.abs(np.diag(c))))
        kl = 0.5 * (
            np.trace(cov) / self.v0
            + np.sum((m - self.m0) ** 2) / self.v0
            - d
            + d * np.log(self.v0)
            - logdet
        )
        g_m = X.T @ (e_sig - y) + (m - self.m0) / self.v0
        if self.diagonal:  # dF/dv_i = ½ Σ_n x_ni² E σ' + ½ (1/v0 − 1/v_i); chain rule to log v
            g_v = 0.5 * (X * X).T @ e_dsig + 0.5 * (1 / self.v0 - 1 / c)
            g_c = g_v * c
        else:  # dF/dΣ = ½ Xᵀ diag(E σ') X + ½ (I/v0 − Σ⁻¹); dF/dL = 2 (dF/dΣ) L
            g_cov = 0.5 * (X * e_dsig[:, None]).T @ X + 0.5 * np.eye(d) / self.v0
            g_chol = 2 * g_cov @ c - np.linalg.inv(c).T  # d(−log|Σ|/2)/dL = −L⁻ᵀ
            g_c = g_chol[self.tril]
        return e_loss + kl, np.concatenate([g_m, g_c])

    def minimise(self):
        d = self.d
        x0 = np.concatenate([np.zeros(d), np.zeros(d) if self.diagonal else np.eye(d)[self.tril]])
        res = optimize.minimize(
            self.value_and_grad,
            x0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 20000, "maxcor": 30, "gtol": 1e-10, "ftol": 1e-15},
        )
        grad_norm = float(np.linalg.norm(res.jac))
        assert grad_norm < 1e-5 * max(1.0, abs(res.fun)), (res.message, grad_norm)
        return self.unpack(res.x)[0], self.covariance(res.x), res.fun


def gaussian_kl(m_q, cov_q, m_p, cov_p) -> float:
    d = m_q.size
    inv_p = np.linalg.inv(cov_p)
    diff = m_p - m_q
    return 0.5 * float(
        np.trace(inv_p @ cov_q)
        + diff @ inv_p @ diff
        - d
        + np.linalg.slogdet(cov_p)[1]
        - np.linalg.slogdet(cov_q)[1]
    )


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "dataset",
    # digits (d = 65) takes 5-20 s per family: in the slow set (make test-slow)
    [pytest.param(d, marks=pytest.mark.slow) if d == "digits" else d for d in CLASSIFICATION],
)
def test_logistic_target_is_stationary_and_agrees_with_an_independent_optimiser(dataset, family):
    world = logistic_world(dataset, family)
    model, data = world.model, world.model.fixed_data
    eta = model.target(data, frozenset()).eta

    # stationary: the fixed-point residual of eq. (17) with all data at one node
    X, y = data.pooled(model.included(frozenset()))
    mean, cov = model.family.conventional(eta)
    from gossipsim import glm

    g, h = glm.expected_logistic_grad_hess(mean, cov, X, y)
    grad = model.family.mean_gradient(eta, g, h)
    residual = stationarity_residual(eta, model.prior, grad)
    assert relative_residual(residual, eta, model.prior) <= STATIONARITY_TOL

    # the same free energy minimised by L-BFGS in another parametrisation, another quadrature
    energy = FreeEnergy(X, y, 0.0, 1.0, diagonal=family == "gaussian-diagonal")
    m_ref, cov_ref, _ = energy.minimise()
    assert gaussian_kl(m_ref, cov_ref, mean, cov) < 1e-7
    assert np.allclose(mean, m_ref, atol=1e-4 * max(1.0, np.abs(m_ref).max()))


@pytest.mark.parametrize("family", FAMILIES)
def test_gossip_with_exact_expectations_reaches_the_target(family):
    """With exact expectations G-FVL's fixed point is the centralised optimum: KL(q ‖ target) falls
    below 1e-6 (wine, complete graph K = 5, ρ = 0.5 constant)."""
    raw = {
        "scenario": {"name": "lr", "seed": 5, "runs": 2, "iterations": 1200},
        "topology": {"kind": "complete", "nodes": 5},
        "model": {
            "kind": "logistic-regression",
            "family": family,
            "prior": {"mean": 0, "variance": 1},
        },
        "data": {"dataset": "wine", "partition": "iid"},
        "protocol": {"estimator": "exact", "learning_rate": 0.5},
        "metrics": {"tolerance": 1e-6, "record_every": 100},
    }
    res = gs.run(raw)
    final = res.metrics.groupby("run")["kl"].last()
    assert (final < 1e-6).all(), final
    assert res.runs["convergence_iteration"].notna().all()


def test_the_optimum_search_raises_one_line_when_it_cannot_converge():
    world = logistic_world("iris", "gaussian-diagonal")
    with pytest.raises(OptimumError, match=r"^target: did not converge in 3 steps"):
        world.model.centralised_optimum(world.model.fixed_data, frozenset(), max_steps=3)


def test_the_plain_fixed_point_iteration_oscillates_where_the_damped_one_converges():
    """Why damping is needed: the undamped iteration (ρ = 1, the previous target) does not reach
    the residual tolerance for the mean-field family on breast cancer; the damped search does."""
    world = logistic_world("breast_cancer", "gaussian-diagonal")
    model = world.model
    data = model.fixed_data
    X, y = data.pooled(model.included(frozenset()))
    from gossipsim import glm

    def grad(eta):
        mean, cov = model.family.conventional(eta)
        return model.family.mean_gradient(eta, *glm.expected_logistic_grad_hess(mean, cov, X, y))

    eta = model.prior.copy()
    for _ in range(500):
        eta = eta - stationarity_residual(eta, model.prior, grad(eta))
        if not model.family.in_domain(eta):
            break
    plain = relative_residual(stationarity_residual(eta, model.prior, grad(eta)), eta, model.prior)
    assert not plain <= 1e-3  # NaN (left the domain) or far from stationary
    damped = model.target(data, frozenset()).eta
    assert (
        relative_residual(
            stationarity_residual(damped, model.prior, grad(damped)), damped, model.prior
        )
        <= STATIONARITY_TOL
    )


def test_variational_optimum_on_a_conjugate_model_is_the_exact_posterior():
    """For a quadratic loss the stationary point is the conjugate posterior (closed form)."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=(40, 2)), np.ones(40)])
    y = X @ np.array([0.5, -1.0, 2.0]) + 0.3 * rng.normal(size=40)
    from gossipsim import glm
    from gossipsim.families import GaussianFull

    family = GaussianFull(3)
    prior = family.natural(np.zeros(3), 2.0 * np.eye(3))

    def grad(eta):
        mean, cov = family.conventional(eta)
        return family.mean_gradient(eta, *glm.expected_linear_grad_hess(mean, cov, X, y, 0.3))

    def energy(eta):
        mean, cov = family.conventional(eta)
        return float(glm.expected_linear_loss(mean, cov, X, y, 0.3) + family.kl(eta, prior))

    found = variational_optimum(prior, grad, energy, lambda e: bool(family.in_domain(e)))
    eta1, eta2 = glm.linear_regression_factor(X, y, 0.3)
    exact = prior + np.concatenate([eta1, eta2.ravel()])
    assert np.allclose(found.eta, exact, rtol=1e-9, atol=1e-9)
    assert found.steps <= 3  # one natural-gradient step with ρ = 1 is exact for a quadratic loss


# ----------------------------------------------------------------------------- Beta–exponential


@pytest.mark.parametrize(
    "c1, c2, c3",
    [
        (2.0 - 1 - 100, 1.0, 48.0),
        (2.0 - 1 - 100, 1.0, 60.0),
        (1.0 - 30, 1.0, 0.6),
        (-9.0, 1.0, 2.0),
    ],
)
def test_beta_exponential_best_in_family_agrees_with_nelder_mead_and_a_grid(c1, c2, c3):
    target = ExactPosterior(c1, c2, c3)
    a, b = Beta.conventional(target.best_family)

    def objective(x):
        v = float(target.kl(Beta.natural(np.exp(x[0]), np.exp(x[1])))[()])
        return v if np.isfinite(v) else 1e300

    res = optimize.minimize(
        objective,
        np.log([a * 1.3, b * 0.7]),
        method="Nelder-Mead",
        options={"xatol": 1e-12, "fatol": 1e-15, "maxiter": 10000},
    )
    # a relative residual of 1e-9 puts the KL within ~1e-11 of its minimum
    assert target.best_family_kl <= res.fun + 1e-10
    assert np.allclose(np.exp(res.x), [a, b], rtol=1e-4)
    # a grid of ±5% around it holds nothing better
    grid = np.exp(np.linspace(-0.05, 0.05, 41))
    aa, bb = np.meshgrid(a * grid, b * grid)
    values = target.kl(np.stack([aa - 1, bb - 1], axis=-1))
    assert np.nanmin(values) >= target.best_family_kl - 1e-10
    assert target.best_family_residual <= STATIONARITY_TOL


def test_beta_exponential_gossip_fixed_point_is_the_best_in_family():
    """The stationarity residual is G-FVL's: the exact estimator's run ends at the same Beta."""
    raw = {
        "scenario": {"name": "be", "seed": 4, "runs": 1, "iterations": 1500},
        "topology": {"kind": "complete", "nodes": 10},
        "model": {"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 10, "theta": [{"beta": [11 - i, i]} for i in range(1, 11)]},
        "protocol": {"estimator": "exact", "learning_rate": 0.2},
        "metrics": {"tolerance": 1e-9, "excess": True, "record_every": 50},
    }
    res = gs.run(raw)
    final = res.metrics.iloc[-1]
    assert abs(final["kl"] - final["best_family_kl"]) <= 1e-10


# ----------------------------------------------------------------------------- linear regression


def test_linear_regression_target_agrees_with_least_squares_on_the_augmented_system():
    raw = {
        "scenario": {"name": "lin", "seed": 6, "runs": 1, "iterations": 10},
        "topology": {"kind": "ring", "nodes": 8},
        "model": {"kind": "linear-regression", "sigma": 0.8, "prior": {"mean": 0.5, "variance": 4}},
        "data": {"dataset": "diabetes", "partition": "dirichlet", "concentration": 1.0},
    }
    world = gs.build_world(gs.parse_study(raw).variants[0].scenario)
    model, data = world.model, world.model.fixed_data
    for forgotten in (frozenset(), frozenset({3})):
        eta = model.target(data, forgotten).eta
        mean, cov = model.family.conventional(eta)
        X, y = data.pooled(model.included(forgotten))
        d = X.shape[1]
        # posterior mean = least-squares solution of [X/σ; I/√v₀] θ ≈ [y/σ; m₀/√v₀]
        A = np.vstack([X / 0.8, np.eye(d) / 2.0])
        b = np.concatenate([y / 0.8, np.full(d, 0.5) / 2.0])
        theta, *_ = np.linalg.lstsq(A, b, rcond=None)
        assert np.allclose(mean, theta, rtol=1e-9, atol=1e-10)
        r = np.linalg.qr(A, mode="r")  # AᵀA = RᵀR: the posterior precision
        assert np.allclose(cov, np.linalg.inv(r.T @ r), rtol=1e-8, atol=1e-12)
