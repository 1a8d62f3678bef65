"""The targets that KL, convergence and latency are measured against, each checked by another method.

- Logistic regression (both Gaussian families, every bundled classification set, prior variances
  0.1-100, temperatures 0.5-3): the centralised optimum is accepted, and agrees with an independent
  optimiser of the free energy written here (L-BFGS over the mean and the Cholesky factor /
  log-variances, then SciPy's Newton-Krylov root of its gradient) to KL 2e-11; its estimated KL to
  the optimum is the KL to a known optimum; G-FVL with exact expectations reaches it.
- Beta–exponential: the best-in-family Beta agrees with Nelder–Mead on KL(q ‖ p) and with a grid.
- Linear regression (diabetes and synthetic data): the exact posterior agrees with a least-squares
  solve of the augmented system, and the search finds it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.special import expit

import gossipsim as gs
from gossipsim.data.datasets import load_task
from gossipsim.families import Beta
from gossipsim.families.gaussian import GaussianDiagonal, GaussianFull
from gossipsim.families.optimum import (
    KL_TOL,
    STATIONARITY_TOL,
    OptimumError,
    newton_step,
    relative_residual,
    stationarity_residual,
    variational_optimum,
)
from gossipsim.models import ExactPosterior, glm
from gossipsim.models.glm import logistic_projection_expectations

ROOT = Path(__file__).resolve().parent.parent
CLASSIFICATION = ["iris", "wine", "breast_cancer", "digits"]
FAMILIES = ["gaussian-full", "gaussian-diagonal"]


def logistic_world(
    dataset: str,
    family: str,
    nodes: int = 10,
    variance: float = 1.0,
    temperature: float = 1.0,
    **protocol,
):
    raw = {
        "scenario": {"name": "opt", "seed": 3, "runs": 1, "iterations": 10},
        "topology": {"kind": "complete", "nodes": nodes},
        "model": {
            "kind": "logistic-regression",
            "family": family,
            "temperature": temperature,
            "prior": {"mean": 0.0, "variance": variance},
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


def test_projection_integrals_are_the_same_bits_in_any_chunk_and_shape():
    """Thousands of projections at once (several chunks of each rule, mixed in one array of
    shape (3, 700)) give each element the bits it has alone; the derivatives alone are the same
    numbers as with the loss."""
    from gossipsim.models.glm import logistic_projection_derivatives

    rng = np.random.default_rng(11)
    loc = 4.0 * rng.standard_normal((3, 700))
    scale = np.exp(rng.standard_normal((3, 700)))  # about a third wide (> 1)
    together = logistic_projection_expectations(loc, scale)
    alone = [logistic_projection_expectations(loc[:, i], scale[:, i]) for i in range(700)]
    for k in range(3):
        np.testing.assert_array_equal(together[k], np.stack([a[k] for a in alone], axis=1))
    for got, want in zip(logistic_projection_derivatives(loc, scale), together[1:], strict=True):
        np.testing.assert_array_equal(got, want)


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
    """F(m, Σ) = (1/α) E_q[Σ_n log(1 + e^{a_n}) − y_n a_n] + KL(N(m, Σ) ‖ N(m₀, v₀I)) assembled here:
    the projections, the KL (from log-determinants) and the chain rule to the parameters are the
    test's own; the one-dimensional integrals E[softplus(a)], E[σ(a)], E[σ'(a)] are the package's
    rule, itself checked against adaptive quadrature above. Parameters: the mean and the lower
    Cholesky factor (full) or the log-variances (diagonal)."""

    def __init__(
        self, X, y, prior_mean: float, prior_var: float, diagonal: bool, temperature: float = 1.0
    ) -> None:
        self.X, self.y = X, y
        self.m0, self.v0 = prior_mean, prior_var
        self.diagonal = diagonal
        self.alpha = temperature
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
        X, y, d, alpha = self.X, self.y, self.d, self.alpha
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
        g_m = X.T @ (e_sig - y) / alpha + (m - self.m0) / self.v0
        if self.diagonal:  # dF/dv_i = ½ Σ_n x_ni² E σ' / α + ½ (1/v0 − 1/v_i); chain rule to log v
            g_v = 0.5 * (X * X).T @ e_dsig / alpha + 0.5 * (1 / self.v0 - 1 / c)
            g_c = g_v * c
        else:  # dF/dΣ = ½ Xᵀ diag(E σ') X / α + ½ (I/v0 − Σ⁻¹); dF/dL = 2 (dF/dΣ) L
            g_cov = 0.5 * (X * e_dsig[:, None]).T @ X / alpha + 0.5 * np.eye(d) / self.v0
            g_chol = 2 * g_cov @ c - np.linalg.inv(c).T  # d(−log|Σ|/2)/dL = −L⁻ᵀ
            g_c = g_chol[self.tril]
        return e_loss / alpha + kl, np.concatenate([g_m, g_c])

    def minimise(self):
        """L-BFGS on F from the prior, then SciPy's Newton-Krylov root of ∇F = 0 from there: L-BFGS
        alone stops where F no longer resolves (KL up to 1e-9 from the optimum for the mean-field
        family at large prior variances); the root-finder works on the gradient."""
        d = self.d
        start = np.concatenate(
            [
                np.full(d, float(self.m0)),
                np.full(d, np.log(self.v0))
                if self.diagonal
                else np.sqrt(self.v0) * np.eye(d)[self.tril],
            ]
        )
        res = optimize.minimize(
            self.value_and_grad,
            start,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 20000, "maxcor": 30, "gtol": 1e-10, "ftol": 1e-15},
        )
        root = optimize.root(
            lambda x: self.value_and_grad(x)[1],
            res.x,
            method="krylov",
            options={"fatol": 1e-12, "maxiter": 200},
        )
        assert root.success, root.message
        return self.unpack(root.x)[0], self.covariance(root.x)


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


def check_target(model, data, forgotten=frozenset()) -> float:
    """The target is accepted (no OptimumError), its estimated KL to the optimum is at most KL_TOL,
    and its KL to the independent optimum is at most 2·KL_TOL (each within KL_TOL of the optimum;
    the independent root's gradient is at rounding level). Returns that KL."""
    eta = model.target(data, forgotten).eta
    X, y = data.pooled(model.included(forgotten))
    mean, cov = model.family.conventional(eta)
    prior = model.spec.model.prior
    diagonal = isinstance(model.family, GaussianDiagonal)
    energy = FreeEnergy(
        X, y, float(prior["mean"]), float(prior["variance"]), diagonal, model.temperature
    )
    m_ref, cov_ref = energy.minimise()
    kl = gaussian_kl(mean, cov, m_ref, cov_ref)
    assert kl <= 2 * KL_TOL, kl
    assert np.allclose(mean, m_ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(m_ref).max()))
    return kl


VARIANCES = (0.1, 1, 2, 4, 9, 25, 100)
TEMPERATURES = (0.5, 1.0, 3.0)
# in the default suite: stalls that were refused before (iris mean field at variance 9, wine full at
# 9 and 25), both families and all three temperatures; the rest of the grid is slow
FAST = {
    ("iris", "gaussian-diagonal", 9, 1.0),
    ("iris", "gaussian-full", 100, 0.5),
    ("wine", "gaussian-full", 25, 1.0),
    ("wine", "gaussian-full", 9, 3.0),
    ("wine", "gaussian-diagonal", 0.1, 0.5),
}


def _digits_case(family: str, variance: float, temperature: float) -> bool:
    """Digits (d = 65) in part: the independent optimiser takes about a minute for the full family
    (2,210 parameters) and 5-10 s for the mean field. Mean field: every variance at α = 1, and
    variances 1 and 100 at α = 0.5 and 3; full: variances 1, 9 (the old rule's point is 3e-12 from
    the optimum: a Newton step follows) and 100 at α = 1."""
    if family == "gaussian-full":
        return temperature == 1.0 and variance in (1, 9, 100)
    return temperature == 1.0 or variance in (1, 100)


def _grid() -> list:
    cases = []
    for dataset in CLASSIFICATION:
        for family in FAMILIES:
            for variance in VARIANCES:
                for temperature in TEMPERATURES:
                    case = (dataset, family, variance, temperature)
                    if dataset == "digits" and not _digits_case(family, variance, temperature):
                        continue
                    slow = () if case in FAST else (pytest.mark.slow,)
                    cases.append(pytest.param(*case, marks=slow, id="-".join(map(str, case))))
    return cases


@pytest.mark.parametrize("dataset, family, variance, temperature", _grid())
def test_logistic_target_is_accepted_and_agrees_with_an_independent_optimiser(
    dataset, family, variance, temperature
):
    world = logistic_world(dataset, family, variance=variance, temperature=temperature)
    check_target(world.model, world.model.fixed_data)


@pytest.mark.parametrize(
    "family",
    # the mean-field targets were accepted before (and take ~3 s each): in the slow set
    ["gaussian-full", pytest.param("gaussian-diagonal", marks=pytest.mark.slow)],
)
def test_the_shipped_logistic_scenario_with_prior_variance_2_is_accepted(family):
    """The issue's reproducer: ``logistic_breast_cancer_karate.toml`` with the prior variance set to
    2 was refused ("no step decreases the free energy after 39 steps", full covariance). Both
    targets (all data, and without node 0, the request) agree with the independent optimiser."""
    raw = tomllib.loads((ROOT / "scenarios/logistic_breast_cancer_karate.toml").read_text())
    raw["model"]["prior"]["variance"] = 2.0
    raw["model"]["family"] = family
    raw.pop("sweep")
    world = gs.build_world(gs.parse_study(raw).variants[0].scenario)
    for forgotten in (frozenset(), frozenset({0})):
        check_target(world.model, world.model.fixed_data, forgotten)


@pytest.mark.parametrize(
    "dataset, family, variance", [("iris", "gaussian-diagonal", 9), ("wine", "gaussian-full", 25)]
)
def test_the_estimated_kl_is_the_kl_to_the_optimum(dataset, family, variance):
    """K(η) = ½ δᵀF(η)δ of the Newton step δ, the acceptance criterion, against the exact KL from
    points around the optimum (Fisher length 1e-3 in random directions: KL ≈ 5e-7) to it: equal
    within 2% (the second-order error is of the order of the Fisher length)."""
    world = logistic_world(dataset, family, variance=variance)
    model, data = world.model, world.model.fixed_data
    family_ = model.family
    optimum_eta = model.target(data, frozenset()).eta
    X, y = data.pooled(model.included(frozenset()))

    def residual(eta):
        mean, cov = model._projection_moments(eta)
        g, h = glm.expected_logistic_grad_hess(mean, cov, X, y)
        return stationarity_residual(eta, model.prior, family_.mean_gradient(eta, g, h))

    rng = np.random.default_rng(0)
    for _ in range(4):
        direction = rng.normal(size=optimum_eta.size)
        if isinstance(family_, GaussianFull):  # a symmetric η₂ (the family's own members)
            d = family_.d
            block = direction[d:].reshape(d, d)
            direction[d:] = (0.5 * (block + block.T)).ravel()
        eta = optimum_eta + 1e-3 * direction / family_.fisher_norm(optimum_eta, direction)
        delta, solved = newton_step(
            residual, family_.fisher_norm, lambda e: bool(family_.in_domain(e)), eta, residual(eta)
        )
        assert solved
        estimate = 0.5 * family_.fisher_norm(eta, delta) ** 2
        exact = float(family_.kl(eta, optimum_eta))
        assert estimate == pytest.approx(exact, rel=0.02), (estimate, exact)


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


def test_the_optimum_search_raises_one_line_when_its_steps_are_capped():
    """Three natural-gradient steps and no Newton step leave the target far from the optimum: one
    line saying so, with the estimated KL."""
    world = logistic_world("iris", "gaussian-diagonal")
    with pytest.raises(OptimumError) as caught:
        world.model.centralised_optimum(
            world.model.fixed_data, frozenset(), max_steps=3, newton_steps=0
        )
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "target: did not converge in 3 steps and 0 Newton steps (estimated KL to the optimum "
    )
    assert float(message.split("optimum ")[1].split(" >")[0]) > 1e-3


@pytest.mark.parametrize("max_steps", [0, 5000])
def test_the_optimum_search_raises_one_line_when_the_free_energy_has_no_minimum(max_steps):
    """A loss −θ² under a N(0, 1) prior: F(m, v) = −½(m² + v) − ½ log v − ½ falls without end as v
    grows (the tempered "posterior" has negative precision), so there is no optimum to accept.
    The natural-gradient steps stall (after 28 steps v is too large for F to resolve) or stop at
    their cap, the Newton step of r(η) = 0 leaves the domain and no shorter one shrinks the
    residual's Fisher length: one line either way."""
    family = GaussianDiagonal(1)
    prior = family.natural(np.zeros(1), np.ones(1))

    def grad(eta):  # E_q[−θ²] = −μ₂: its gradient in the mean parameters
        return np.array([0.0, -1.0])

    def energy(eta):
        mean, var = family.conventional(eta)
        return float(-(mean[0] ** 2 + var[0, 0]) + family.kl(eta, prior))

    with pytest.raises(OptimumError) as caught:
        variational_optimum(
            prior,
            grad,
            energy,
            lambda e: bool(family.in_domain(e)),
            fisher_norm=family.fisher_norm,
            max_steps=max_steps,
            what="target",
        )
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("target: did not converge")
    assert "and 0 Newton steps; no Newton step shrinks the residual" in message


def test_the_plain_fixed_point_iteration_oscillates_where_the_damped_one_converges():
    """Why damping is needed: the undamped iteration (ρ = 1, the previous target) does not reach
    the residual tolerance for the mean-field family on breast cancer; the damped search does."""
    world = logistic_world("breast_cancer", "gaussian-diagonal")
    model = world.model
    data = model.fixed_data
    X, y = data.pooled(model.included(frozenset()))

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


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("variance", VARIANCES)
@pytest.mark.parametrize("dataset", ["synthetic", "diabetes"])
def test_variational_optimum_on_a_conjugate_model_is_the_exact_posterior(
    dataset, variance, temperature
):
    """For a quadratic loss the stationary point is the conjugate posterior (closed form: the prior
    plus the exact factor over α), on synthetic data and on diabetes (d = 11), for every prior
    variance and temperature of the logistic grid; accepted with its estimated KL to it ≤ KL_TOL,
    and that estimate an upper bound to round-off of the KL to the closed form."""
    sigma = 0.3
    if dataset == "synthetic":
        rng = np.random.default_rng(0)
        X = np.column_stack([rng.normal(size=(40, 2)), np.ones(40)])
        y = X @ np.array([0.5, -1.0, 2.0]) + sigma * rng.normal(size=40)
    else:
        task = load_task("diabetes", test_fraction=0.2, bias=True, rng=np.random.default_rng(2))
        X, y = task.X_train, task.y_train
    d = X.shape[1]
    family = GaussianFull(d)
    prior = family.natural(np.zeros(d), variance * np.eye(d))

    def grad(eta):
        mean, cov = family.conventional(eta)
        return family.mean_gradient(eta, *glm.expected_linear_grad_hess(mean, cov, X, y, sigma))

    def energy(eta):
        mean, cov = family.conventional(eta)
        loss = glm.expected_linear_loss(mean, cov, X, y, sigma) / temperature
        return float(loss + family.kl(eta, prior))

    found = variational_optimum(
        prior,
        grad,
        energy,
        lambda e: bool(family.in_domain(e)),
        fisher_norm=family.fisher_norm,
        temperature=temperature,
    )
    eta1, eta2 = glm.linear_regression_factor(X, y, sigma)
    exact = prior + np.concatenate([eta1, eta2.ravel()]) / temperature
    assert found.kl_to_optimum <= KL_TOL
    assert float(family.kl(found.eta, exact)) <= KL_TOL
    assert np.allclose(found.eta, exact, rtol=1e-8, atol=1e-8 * np.abs(exact).max())
    # one natural-gradient step with ρ = 1 is exact for a quadratic loss
    assert found.steps <= 3 and found.newton_steps == 0


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
    assert target.best_family_kl_to_optimum <= KL_TOL


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


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("variance", VARIANCES)
def test_linear_regression_target_agrees_with_least_squares_on_the_augmented_system(
    variance, temperature
):
    raw = {
        "scenario": {"name": "lin", "seed": 6, "runs": 1, "iterations": 10},
        "topology": {"kind": "ring", "nodes": 8},
        "model": {
            "kind": "linear-regression",
            "sigma": 0.8,
            "temperature": temperature,
            "prior": {"mean": 0.5, "variance": variance},
        },
        "data": {"dataset": "diabetes", "partition": "dirichlet", "concentration": 1.0},
    }
    noise = 0.8 * np.sqrt(temperature)  # the tempered likelihood: σ²α in place of σ²
    world = gs.build_world(gs.parse_study(raw).variants[0].scenario)
    model, data = world.model, world.model.fixed_data
    for forgotten in (frozenset(), frozenset({3})):
        eta = model.target(data, forgotten).eta
        mean, cov = model.family.conventional(eta)
        X, y = data.pooled(model.included(forgotten))
        d = X.shape[1]
        # posterior mean = least-squares solution of [X/σ; I/√v₀] θ ≈ [y/σ; m₀/√v₀]
        A = np.vstack([X / noise, np.eye(d) / np.sqrt(variance)])
        b = np.concatenate([y / noise, np.full(d, 0.5) / np.sqrt(variance)])
        theta, *_ = np.linalg.lstsq(A, b, rcond=None)
        assert np.allclose(mean, theta, rtol=1e-9, atol=1e-10)
        r = np.linalg.qr(A, mode="r")  # AᵀA = RᵀR: the posterior precision
        assert np.allclose(cov, np.linalg.inv(r.T @ r), rtol=1e-8, atol=1e-12)
