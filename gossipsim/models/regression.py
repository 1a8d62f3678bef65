"""Bayesian linear and logistic regression with Gaussian posteriors, on real or synthetic data.

``linear-regression`` (known noise σ, full-covariance Gaussian): conjugate, so G-FVL adds each node's
exact factor (Xᵀy/σ², −½XᵀX/σ²)/α once (eqs. 13-14) and the target is the exact posterior.

``logistic-regression`` (``family = "gaussian-full"`` or ``"gaussian-diagonal"``): non-conjugate,
learned by natural-gradient G-FVL (eq. 17) with one of three estimators of ∇_μ E_q[L_k]:

- ``reinforce``: the score-function estimator (eqs. 18-20), F⁻¹ applied in closed form;
- ``reparameterization``: E_q[∇L_k] and E_q[∇²L_k] from draws θ = m + Lε (Bonnet/Price);
- ``exact``: the same expectations by Gauss–Hermite quadrature on each projection xᵀθ (32 points),
  so the step is deterministic.

The target is the centralised variational optimum in the same family: the stationary point of the
free energy (2) on the pooled data of every included node, found by damped natural-gradient steps
with the exact estimator and checked to a relative stationarity residual of 1e-9
(:mod:`gossipsim.optimum`). G-FVL with the exact estimator has the same fixed point, so
KL(q ‖ target) measures how far the gossip run is from it. Held-out accuracy, negative log-likelihood and expected
calibration error (eq. 14 of the DSVGD paper, ``[metrics] ece_bins`` bins) are recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .. import glm
from ..datasets import (
    DATASETS,
    Task,
    load_task,
    partition,
    synthetic_linear_task,
    synthetic_logistic_task,
)
from ..errors import ConfigError
from ..families import ModelParam
from ..families.gaussian import GaussianDiagonal, GaussianFull
from ..families.natgrad import gaussian_mean_gradient, reinforce_mean_gradient
from ..optimum import MAX_STEPS, STATIONARITY_TOL, variational_optimum
from ..protocols import Protocol, StateTrace
from ..protocols.natgrad import MeanGradient
from ..scheduling import IndexedGraph
from .base import FamilyTarget, Model, Target

if TYPE_CHECKING:
    from ..scenario import Scenario

FAMILIES = ("gaussian-full", "gaussian-diagonal")
DATA_KEYS = (
    "dataset", "partition", "concentration", "labels_per_node", "sizes", "test_fraction",
    "features", "noise",
)  # fmt: skip
QUADRATURE_POINTS = 32


@dataclass(frozen=True, eq=False)
class RegressionData:
    """Each node's rows of the training split, and the held-out test split."""

    X: tuple[np.ndarray, ...]
    y: tuple[np.ndarray, ...]
    X_test: np.ndarray
    y_test: np.ndarray

    def pooled(self, included: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.flatnonzero(included)
        return np.concatenate([self.X[i] for i in idx]), np.concatenate([self.y[i] for i in idx])


def _option(options: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = options.get(key, default)
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(
            f"data.{key}",
            f"must be {'a number' if kind is float else 'an integer' if kind is int else 'a string'} (got {value!r})",
        )
    return value


class GaussianRegression(Model):
    """What linear and logistic regression share: data sets, partitions, the Gaussian prior."""

    task_kind: ClassVar[str] = ""
    family: GaussianFull | GaussianDiagonal
    model_keys: ClassVar[tuple[str, ...]] = ("family",)
    data_keys: ClassVar[tuple[str, ...]] = DATA_KEYS
    prior_params = (
        ModelParam("mean", "real", "prior mean of every coefficient", 0.0),
        ModelParam(
            "variance", "positive", "prior variance of every coefficient (isotropic), > 0", 1.0
        ),
    )

    def __init__(
        self, scenario: Scenario, graph: IndexedGraph, data_rng: np.random.Generator
    ) -> None:
        self.scenario = scenario
        self.graph = graph
        self.temperature = scenario.model.temperature
        self.options = dict(scenario.data.options)
        self.dataset = _option(self.options, "dataset", str, "synthetic")
        if self.dataset != "synthetic":
            if self.dataset not in DATASETS:
                raise ConfigError(
                    "data.dataset",
                    f"unknown data set {self.dataset!r}; allowed: synthetic, {', '.join(DATASETS)}",
                )
            if DATASETS[self.dataset].task != self.task_kind:
                fitting = [n for n, s in DATASETS.items() if s.task == self.task_kind]
                raise ConfigError(
                    "data.dataset",
                    f"{self.dataset!r} is a {DATASETS[self.dataset].task} task; {self.kind} takes: synthetic, {', '.join(fitting)}",
                )
        first = self.draw_data(data_rng)  # validates every data key once
        self.d = first.X_test.shape[1]
        self.family = self.make_family(
            scenario.model.options.get("family", "gaussian-full"), self.d
        )
        prior = scenario.model.prior
        self.prior = self.family.natural(
            np.full(self.d, float(prior["mean"])), np.eye(self.d) * float(prior["variance"])
        )
        self.fixed_data = first if scenario.data.draw == "once" else None

    @staticmethod
    def make_family(name: str, d: int) -> GaussianFull | GaussianDiagonal:
        return GaussianFull(d) if name == "gaussian-full" else GaussianDiagonal(d)

    def _task(self, rng: np.random.Generator) -> Task:
        opts = self.options
        test_fraction = _option(opts, "test_fraction", float, 0.2)
        if self.dataset != "synthetic":
            return load_task(self.dataset, test_fraction=test_fraction, bias=True, rng=rng)
        points = self.scenario.data.points_per_node
        total = int(sum(points)) if isinstance(points, tuple) else int(points) * self.graph.size
        features = _option(opts, "features", int, 5)
        if features < 1:
            raise ConfigError("data.features", f"must be an integer >= 1 (got {features})")
        n_test = max(int(round(total * test_fraction / (1 - test_fraction))), 1)
        if self.task_kind == "regression":
            noise = _option(
                opts, "noise", float, float(self.scenario.model.options.get("sigma", 1.0))
            )
            if not noise > 0:
                raise ConfigError("data.noise", f"must be > 0 (got {noise})")
            return synthetic_linear_task(
                total, features, rng, noise_std=noise, n_test=n_test, bias=True
            )
        return synthetic_logistic_task(total, features, rng, n_test=n_test, bias=True)

    def draw_data(self, rng: np.random.Generator) -> RegressionData:
        opts = self.options
        task = self._task(rng)
        scheme = _option(opts, "partition", str, "iid")
        points = self.scenario.data.points_per_node
        if self.dataset == "synthetic" and isinstance(points, tuple):  # explicit node sizes
            if len(points) != self.graph.size:
                raise ConfigError(
                    "data.points_per_node",
                    f"a per-node list needs one value per node ({self.graph.size}), got {len(points)}",
                )
            if min(points) < 1:
                raise ConfigError("data.points_per_node", "every node needs at least one point")
            bounds = np.cumsum((0, *points))
            order = rng.permutation(task.n_train)
            parts = [np.sort(order[bounds[i] : bounds[i + 1]]) for i in range(self.graph.size)]
        else:
            parts = partition(
                task.groups_train,
                self.graph.size,
                scheme=scheme,
                concentration=_option(opts, "concentration", float, None),
                labels_per_node=_option(opts, "labels_per_node", int, None),
                sizes=_option(opts, "sizes", str, "equal"),
                rng=rng,
            )
        return RegressionData(
            tuple(task.X_train[p] for p in parts),
            tuple(task.y_train[p] for p in parts),
            task.X_test,
            task.y_test,
        )

    def node_sizes(self, data: Any) -> list[int]:
        return [int(y.size) for y in data.y] if data is not None else []

    def _moments(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.family.conventional(np.asarray(states, dtype=float))

    def _projection_moments(self, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of one member as :mod:`gossipsim.glm` takes them: a diagonal
        covariance as its diagonal (cheaper projections)."""
        if isinstance(self.family, GaussianDiagonal):
            return self.family.conventional(eta)[0], self.family.variance(eta)
        return self._moments(eta)

    @classmethod
    def prepare(cls, model: Any, key: str = "model") -> tuple[dict[str, Any], dict[str, Any]]:
        prior, _ = super().prepare(model, key)
        family = model.get("family", "gaussian-full")
        allowed = cls.allowed_families()
        if family not in allowed:
            raise ConfigError(
                f"{key}.family",
                f"unknown or unsupported family {family!r} for {cls.kind}; allowed: {', '.join(allowed)}",
            )
        options: dict[str, Any] = {"family": family}
        if "sigma" in model:
            sigma = model["sigma"]
            if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not sigma > 0:
                raise ConfigError(f"{key}.sigma", f"must be a number > 0 (got {sigma!r})")
            options["sigma"] = float(sigma)
        return prior, options

    @classmethod
    def allowed_families(cls) -> tuple[str, ...]:
        return FAMILIES


class LinearRegression(GaussianRegression):
    kind = "linear-regression"
    description = "y = xᵀθ + N(0, sigma²) with known sigma ([model] sigma), Gaussian prior; conjugate (gaussian-full)"
    task_kind = "regression"
    conjugate: ClassVar[bool] = True
    model_keys: ClassVar[tuple[str, ...]] = ("family", "sigma")

    @classmethod
    def allowed_families(cls) -> tuple[str, ...]:
        return ("gaussian-full",)

    @property
    def sigma(self) -> float:
        return float(self.scenario.model.options.get("sigma", 1.0))

    def factors(self, data: RegressionData) -> np.ndarray:
        """Exact local factors (Xᵀy/σ², −½XᵀX/σ²)/α in the flat layout, one row per node."""
        rows = []
        for X, y in zip(data.X, data.y, strict=True):
            eta1, eta2 = glm.linear_regression_factor(X, y, self.sigma)
            rows.append(np.concatenate([eta1, eta2.ravel()]))
        return np.stack(rows) / self.temperature

    def make_protocol(
        self, data: Any, rng: np.random.Generator, *, bits: float, forgotten: frozenset[int] = frozenset(),
        trace: StateTrace | None = None, start_slot: int = 0,
    ) -> Protocol:  # fmt: skip
        return self._conjugate_protocol(
            self.factors(data), bits=bits, forgotten=forgotten, trace=trace, start_slot=start_slot
        )

    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Target:
        return FamilyTarget(
            self.family, self.prior + self.factors(data)[self.included(forgotten)].sum(axis=0)
        )

    def evaluation_columns(self) -> tuple[str, ...]:
        return ("rmse", "nll")

    def evaluate(self, data: Any, states: np.ndarray) -> dict[str, np.ndarray]:
        means, covs = self._moments(states)
        return {
            "rmse": glm.linear_rmse(means, data.X_test, data.y_test),
            "nll": glm.linear_predictive_nll(means, covs, data.X_test, data.y_test, self.sigma),
        }


class LogisticRegression(GaussianRegression):
    kind = "logistic-regression"
    description = "binary labels, p(y=1|x) = σ(xᵀθ), Gaussian prior and posterior (full or diagonal); non-conjugate"
    task_kind = "binary"
    conjugate: ClassVar[bool] = False
    estimators: ClassVar[tuple[str, ...]] = ("reinforce", "reparameterization", "exact")

    def mean_gradient(self, data: RegressionData, estimator: str | None = None) -> MeanGradient:
        """∇_μ E_q[L_k(θ)] for node k (L_k: the sum of the node's log-losses)."""
        p = self.scenario.protocol
        estimator = estimator or p.estimator
        family = self.family
        samples, per_point, baseline = p.samples, p.samples_per == "point", p.baseline

        def exact(eta: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            mean, cov = self._projection_moments(eta)
            g, h = glm.expected_logistic_grad_hess(
                mean, cov, data.X[k], data.y[k], QUADRATURE_POINTS
            )
            return gaussian_mean_gradient(family, eta, g, h)

        def reparameterization(eta: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            X, y = data.X[k], data.y[k]
            if per_point:  # S draws for each point, each point's derivatives at its own draws
                theta = family.sample(eta, X.shape[0] * samples, rng).reshape(
                    X.shape[0], samples, -1
                )
                prob = _sigmoid(np.einsum("nsd,nd->ns", theta, X))
                g = X.T @ (prob.mean(axis=1) - y)
                h = np.einsum("n,ni,nj->ij", (prob * (1 - prob)).mean(axis=1), X, X)
            else:
                grads, hessians = glm.logistic_grad_hess(family.sample(eta, samples, rng), X, y)
                g, h = grads.mean(axis=0), hessians.mean(axis=0)
            return gaussian_mean_gradient(family, eta, g, h)

        def reinforce(eta: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            X, y = data.X[k], data.y[k]
            if per_point:
                theta = family.sample(eta, X.shape[0] * samples, rng).reshape(
                    X.shape[0], samples, -1
                )
                a = np.einsum("nsd,nd->ns", theta, X)
                weights = np.logaddexp(0.0, a) - y[:, None] * a - baseline
                return reinforce_mean_gradient(
                    family,
                    eta,
                    theta.reshape(-1, theta.shape[-1]),
                    weights.ravel(),
                    scale=1.0 / samples,
                )
            theta = family.sample(eta, samples, rng)
            weights = glm.logistic_loss(theta, X, y).sum(axis=1) - baseline
            return reinforce_mean_gradient(family, eta, theta, weights, scale=1.0 / samples)

        return {"exact": exact, "reparameterization": reparameterization, "reinforce": reinforce}[
            estimator
        ]

    def make_protocol(
        self, data: Any, rng: np.random.Generator, *, bits: float, forgotten: frozenset[int] = frozenset(),
        trace: StateTrace | None = None, start_slot: int = 0,
    ) -> Protocol:  # fmt: skip
        return self._natural_gradient_protocol(
            self.mean_gradient(data), rng, bits=bits, forgotten=forgotten, trace=trace,
            start_slot=start_slot,
        )  # fmt: skip

    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Target:
        return FamilyTarget(self.family, self.centralised_optimum(data, forgotten))

    def centralised_optimum(
        self,
        data: RegressionData,
        forgotten: frozenset[int],
        *,
        tol: float = STATIONARITY_TOL,
        max_steps: int = MAX_STEPS,
    ) -> np.ndarray:
        """The variational optimum on the pooled data of the included nodes: the stationary point
        of the free energy (2) in the family, G-FVL's fixed point with the exact estimator
        (:func:`gossipsim.optimum.variational_optimum`: damped natural-gradient steps, checked to
        a relative stationarity residual ``tol``; :class:`~gossipsim.optimum.OptimumError` if not
        reached)."""
        X, y = data.pooled(self.included(forgotten))
        family = self.family

        def mean_gradient(eta: np.ndarray) -> np.ndarray:
            mean, cov = self._projection_moments(eta)
            g, h = glm.expected_logistic_grad_hess(mean, cov, X, y, QUADRATURE_POINTS)
            return gaussian_mean_gradient(family, eta, g, h)

        def free_energy(eta: np.ndarray) -> float:
            mean, cov = self._projection_moments(eta)
            loss = glm.expected_logistic_loss(mean, cov, X, y, QUADRATURE_POINTS)
            return float(loss) / self.temperature + float(family.kl(eta, self.prior))

        forgot = ",".join(str(self.graph.labels[n]) for n in sorted(forgotten))
        return variational_optimum(
            self.prior, mean_gradient, free_energy, lambda eta: bool(family.in_domain(eta)),
            temperature=self.temperature, tol=tol, max_steps=max_steps,
            what="target" + (f" (without node {forgot})" if forgot else ""),
        ).eta  # fmt: skip

    def evaluation_columns(self) -> tuple[str, ...]:
        return ("accuracy", "nll", "ece")

    def evaluate(self, data: Any, states: np.ndarray) -> dict[str, np.ndarray]:
        means, covs = self._moments(states)
        prob = glm.predictive_probability(means, covs, data.X_test, QUADRATURE_POINTS)
        return {
            "accuracy": glm.accuracy(prob, data.y_test),
            "nll": glm.negative_log_likelihood(prob, data.y_test),
            "ece": glm.expected_calibration_error(
                prob, data.y_test, self.scenario.metrics.ece_bins
            ),
        }


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * a))
