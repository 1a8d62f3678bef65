"""Bayesian linear and logistic regression with Gaussian posteriors, on real or synthetic data.

``linear-regression`` (known noise σ, full-covariance Gaussian): conjugate, so G-FVL adds each node's
exact factor (Xᵀy/σ², −½XᵀX/σ²)/α once (eqs. 13-14) and the target is the exact posterior.

``logistic-regression`` (``family = "gaussian-full"`` or ``"gaussian-diagonal"``): non-conjugate,
learned by natural-gradient G-FVL (eq. 17) with one of three estimators of ∇_μ E_q[L_k]:

- ``reinforce``: the score-function estimator (eqs. 18-20), F⁻¹ applied in closed form;
- ``reparameterization``: E_q[∇L_k] and E_q[∇²L_k] from draws θ = m + Lε (Bonnet/Price); with S
  draws per point each point's projection xᵀθ is drawn directly (the same estimator in
  distribution, one normal per draw instead of d: :mod:`.logistic_estimators`);
- ``exact``: the same expectations by Gauss–Hermite quadrature on each projection xᵀθ (32 points),
  so the step is deterministic.

The target is the centralised variational optimum in the same family: the stationary point of the
free energy (2) on the pooled data of every included node, found by damped natural-gradient steps
with the exact estimator (and Newton steps where they stall) and accepted when its estimated KL to
the optimum is at most 1e-11 nats (:mod:`gossipsim.families.optimum`). G-FVL with the exact estimator has the
same fixed point, so KL(q ‖ target) measures how far the gossip run is from it. Held-out accuracy,
negative log-likelihood and expected calibration error (eq. 14 of the DSVGD paper, ``[metrics]
ece_bins`` bins) are recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np

from gossipsim.core.capabilities import (
    BATCHED_MEAN_GRADIENT,
    EXACT_FACTORS,
    LOGLIK_GRADIENT,
    MEAN_GRADIENT,
    BatchedMeanGradient,
    EstimatorSettings,
    MeanGradient,
)
from gossipsim.core.schema import Key
from gossipsim.data.datasets import (
    DATASETS,
    Task,
    TaskKind,
    check_fraction,
    load_task,
    partition,
    synthetic_linear_task,
    synthetic_logistic_task,
    table_task,
)
from gossipsim.data.tables import DEFAULT_LABEL_COLUMN, Table, read_table
from gossipsim.errors import ConfigError
from gossipsim.families import ModelParam
from gossipsim.families.gaussian import GaussianDiagonal, GaussianFull
from gossipsim.families.natgrad import gaussian_mean_gradient
from gossipsim.families.optimum import KL_TOL, MAX_STEPS, NEWTON_STEPS, variational_optimum
from gossipsim.logdensity.hierarchical import GammaPrior
from gossipsim.logdensity.logistic import (
    LOGISTIC_PRECISION_PRIOR,
    logistic_log_likelihood,
    logistic_log_likelihood_score,
    logistic_log_prior,
    logistic_predictive_probability,
    sample_logistic_prior,
)
from gossipsim.models import glm
from gossipsim.models.base import (
    SIGMA_KEY,
    FamilyTarget,
    Model,
    Target,
    check_prior_numbers,
    check_sigma,
)
from gossipsim.models.logistic_estimators import (
    QUADRATURE_POINTS,
    NodePoints,
    logistic_batched_gradient,
)
from gossipsim.models.particle import ParticleClassifier
from gossipsim.scheduling import IndexedGraph
from gossipsim.study import budget

if TYPE_CHECKING:
    from gossipsim.study.settings import ModelSpec

FAMILIES = ("gaussian-full", "gaussian-diagonal")
DATA_KEYS = (
    Key("dataset", "choice", "synthetic", "`synthetic`, or a data set bundled with scikit-learn "
        "(the table above; the model takes those of its task)", choices=("synthetic", *DATASETS)),
    Key("partition", "choice", "iid", "`iid`; `dirichlet` (label skew: each class split over the "
        "nodes with proportions ~ Dirichlet(`concentration`·1)); `labels` (each node holds only "
        "`labels_per_node` of the original classes); `classes` (node k holds the classes listed "
        "for it in `node_classes`); `majority` (node k's majority class is class k mod C, held at "
        "`majority_share`, each other class at (1 − `majority_share`)/(C − 1))",
        choices=("iid", "dirichlet", "labels", "classes", "majority")),
    Key("concentration", "number", None, "β of the Dirichlet partition (small: strong skew)",
        minimum=0, exclusive_minimum=True),
    Key("labels_per_node", "integer", None, "c of the labels partition, at most the number of "
        "classes", minimum=1),
    Key("node_classes", "numbers", None, "the classes partition: one list of class indices per "
        "node (`[[1, 3], [4, 6], ...]`; binary tasks: 0 and 1), each class's rows split among the "
        "nodes listing it; rows of unlisted classes are not used", list_only=True),
    Key("majority_share", "number", None, "s of the majority partition (0.9: 9:1 in a binary "
        "task); each class's rows split among the nodes in proportion to s (its majority nodes) "
        "and (1 − s)/(C − 1) (the others), so the ratio is exact for balanced classes and C "
        "dividing the number of nodes (see below)", minimum=0, exclusive_minimum=True, maximum=1,
        exclusive_maximum=True),
    Key("sizes", "choice", "equal", "for `iid`: `equal` (sizes differ by at most one) or `random` "
        "(proportions ~ Dirichlet(1), at least one row each)", choices=("equal", "random")),
    Key("test_fraction", "number", 0.2, "held-out fraction (synthetic data hold "
        "test_fraction/(1 − test_fraction) test rows per training row); stratified by class for "
        "binary tasks", minimum=0, exclusive_minimum=True, maximum=1, exclusive_maximum=True),
    Key("features", "integer", 5, "synthetic data: dimension, a bias column included", minimum=1),
    Key("label_column", "string", DEFAULT_LABEL_COLUMN, "`[data] path` of a CSV or Parquet file: "
        "the column holding the label or target (the other columns are the features)"),
    Key("noise", "number", None, "synthetic linear data: noise standard deviation",
        minimum=0, exclusive_minimum=True, default_text="`[model] sigma`"),
)  # fmt: skip
_DATA_DEFAULTS = {key.name: key.default for key in DATA_KEYS}
FAMILY_KEY = Key(
    "family", "choice", "gaussian-full", "the Gaussian family of q: full covariance, or mean field "
    "(diagonal; logistic regression only)", choices=FAMILIES,
)  # fmt: skip


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


def _test_fraction(options: dict[str, Any]) -> float:
    """``[data] test_fraction``, strictly between 0 and 1 (checked before any division by
    1 − test_fraction)."""
    return check_fraction(_option(options, "test_fraction", float))


def _features(options: dict[str, Any]) -> int:
    """``[data] features`` of synthetic data: the dimension, bias column included, >= 1."""
    features = int(_option(options, "features", int))
    if features < 1:
        raise ConfigError("data.features", f"must be an integer >= 1 (got {features})")
    return features


def data_file(spec: ModelSpec) -> Path | None:
    """``[data] path`` (a user's table, relative to the scenario file's folder), or None. With it
    or a table given from Python (``[data] table``, for which it returns None), ``[data]
    dataset`` is an error; without them, ``[data] label_column`` is."""
    options = spec.data.options
    given = spec.data.table is not None  # a table given from Python, checked as a file is
    if spec.data.path is None and not given:
        if "label_column" in options:
            raise ConfigError("data.label_column", "applies to a data file (data.path) only")
        return None
    key, what = ("data.table", "a table") if given else ("data.path", "a file")
    if "dataset" in options:
        raise ConfigError(
            "data.dataset",
            f"give one of data.dataset (a bundled or synthetic set) and {key} ({what}), not both",
        )
    for name in ("features", "noise"):
        if name in options:
            raise ConfigError(f"data.{name}", f"applies to synthetic data, not to {what} ({key})")
    if given:
        return None
    path = Path(str(spec.data.path)).expanduser()
    return path if path.is_absolute() else Path(spec.base_dir) / path


def data_table(spec: ModelSpec) -> Table | None:
    """The table of ``[data] path`` (read once per process; :func:`read_table`), the table given
    from Python (``[data] table``), or None."""
    path = data_file(spec)
    if spec.data.table is not None:
        return cast(Table, spec.data.table)
    if path is None:
        return None
    column = _option(dict(spec.data.options), "label_column", str)
    return read_table(path, column)


def user_data_key(spec: ModelSpec) -> str:
    """The key of the user's own data: ``data.table`` (given from Python) or ``data.path``."""
    return "data.table" if spec.data.table is not None else "data.path"


def _largest_node(spec: ModelSpec, train_rows: int) -> int:
    """Rows of the largest node: known for synthetic data, at most every row otherwise."""
    points = spec.data.points_per_node
    if _source(spec) == "synthetic":
        return max(points, default=0) if isinstance(points, tuple) else points
    return train_rows


def _synthetic_rows(
    points: int | tuple[int, ...], nodes: int, test_fraction: float
) -> tuple[int, int]:
    """Training rows of all nodes, and held-out rows: test_fraction of all the rows (at least 1)."""
    total = int(sum(points)) if isinstance(points, tuple) else int(points) * nodes
    return total, max(int(round(total * test_fraction / (1 - test_fraction))), 1)


def _source(spec: ModelSpec) -> str:
    """``synthetic``, a bundled set's name, or ``file`` (``[data] path`` or ``[data] table``)."""
    if data_file(spec) is not None or spec.data.table is not None:
        return "file"
    return str(_option(dict(spec.data.options), "dataset", str))


def _option(options: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    """``[data] key`` as ``kind``; when absent, ``default`` if given, else the default that
    :data:`DATA_KEYS` states."""
    if key in options:
        value = options[key]
    else:
        value = default if default is not None else _DATA_DEFAULTS.get(key)
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


def partition_rows(
    options: dict[str, Any], groups: np.ndarray, nodes: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """The training rows of each node, dealt as ``[data] partition`` and its keys say
    (:func:`gossipsim.data.datasets.partition` of the rows' ``groups``)."""
    return partition(
        groups,
        nodes,
        scheme=_option(options, "partition", str),
        concentration=_option(options, "concentration", float, None),
        labels_per_node=_option(options, "labels_per_node", int, None),
        sizes=_option(options, "sizes", str),
        node_classes=options.get("node_classes"),
        majority_share=_option(options, "majority_share", float, None),
        rng=rng,
    )


class GaussianRegression(Model):
    """What linear and logistic regression share: data sets, partitions, the Gaussian prior."""

    task_kind: ClassVar[str] = ""
    family: GaussianFull | GaussianDiagonal
    model_keys: ClassVar[tuple[Key, ...]] = (FAMILY_KEY,)
    data_keys: ClassVar[tuple[Key, ...]] = DATA_KEYS
    reads_files: ClassVar[bool] = True
    reads_tables: ClassVar[bool] = True
    prior_params = (
        ModelParam("mean", "real", "prior mean of every coefficient", 0.0),
        ModelParam(
            "variance", "positive", "prior variance of every coefficient (isotropic), > 0", 1.0
        ),
    )

    def __init__(self, spec: ModelSpec, graph: IndexedGraph, data_rng: np.random.Generator) -> None:
        self.spec = spec
        self.graph = graph
        self.temperature = spec.model.temperature
        self.options = dict(spec.data.options)
        self.dataset = _source(spec)
        self.table = data_table(spec)
        if self.table is None and self.dataset != "synthetic":
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
        self.check_budget(spec, graph)
        first = self.draw_data(data_rng)  # validates every data key once
        self.d = first.X_test.shape[1]
        self.family = self.make_family(spec.model.options.get("family", FAMILY_KEY.default), self.d)
        prior = spec.model.prior
        with np.errstate(all="ignore"):  # an extreme variance is reported just below
            self.prior = self.family.natural(
                np.full(self.d, float(prior["mean"])), np.eye(self.d) * float(prior["variance"])
            )
        check_prior_numbers(self.family, self.prior)
        self.check_data(first)
        self.fixed_data = first if spec.data.draw == "once" else None

    def check_data(self, data: RegressionData) -> None:
        """Refuse data the model cannot compute with (checked on the first draw)."""

    @classmethod
    def dimension(cls, spec: ModelSpec) -> int:
        """d, the number of coefficients: the data set's features plus the bias column, or
        ``[data] features`` (bias included) for synthetic data."""
        options = spec.data.options
        table = data_table(spec)
        if table is not None:
            return int(table.X.shape[1]) + 1
        dataset = _option(options, "dataset", str)
        if dataset == "synthetic":
            return _features(options)
        if dataset not in DATASETS:
            raise ConfigError("data.dataset", f"unknown data set {dataset!r}")
        return DATASETS[dataset].n_features + 1

    @classmethod
    def rows(cls, spec: ModelSpec, nodes: int) -> tuple[int, int]:
        """Training and held-out rows of the data."""
        options = spec.data.options
        table = data_table(spec)
        if table is not None:
            n = int(table.X.shape[0])
            test = round(_test_fraction(options) * n)
            return n - test, test
        dataset = _option(options, "dataset", str)
        if dataset != "synthetic":
            n = DATASETS[dataset].n_samples
            test = round(_test_fraction(options) * n)
            return n - test, test
        points = spec.data.points_per_node
        return _synthetic_rows(points, nodes, _test_fraction(options))

    @classmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        d = cls.dimension(spec)
        family = cls.make_family(spec.model.options.get("family", FAMILY_KEY.default), d)
        train, test = cls.rows(spec, nodes)
        source = _source(spec)
        synthetic = source == "synthetic"
        data_key = user_data_key(spec) if source == "file" else "data.dataset"
        if synthetic:  # the setting that makes the rows × columns big
            data_key = (
                "data.test_fraction"
                if test > train
                else "data.features"
                if d > train + test
                else "data.points_per_node"
            )
        return budget.ModelSizes(
            state_entries=family.dim,
            message_entries=family.message_entries,
            particle_entries=d + 1 if LOGLIK_GRADIENT in cls.capabilities else 0,
            # the rows, their standardised or partitioned copies and the label arrays
            data_values=3.0 * (train + test) * (d + 1),
            data_key=data_key,
            data_what=f"{train + test} rows of {d} columns",
            state_key="data.features" if synthetic else "model.family",
            state_what=f"{nodes} nodes with {family.dim}-entry factors (d = {d})",
            every_slot=EXACT_FACTORS not in cls.capabilities,
            evaluation_values=cls.evaluation_values(spec, family.dim, test),
            step_values=cls.step_values(spec, d, _largest_node(spec, train)),
            # a particle's gradient: a product with the row and one back (particle protocols)
            row_flops=4.0 * d + 10.0 if LOGLIK_GRADIENT in cls.capabilities else 0.0,
            rows=float(train),
            test_rows=float(test),
            flops_key=data_key,
        )

    @classmethod
    def evaluation_values(cls, spec: ModelSpec, state_entries: int, test_rows: int) -> float:
        """Numbers computed to evaluate one recorded state (moments and held-out predictions;
        measured: about 6 copies of the state and 4 numbers a test row)."""
        return 6.0 * state_entries + 4.0 * test_rows

    @classmethod
    def step_values(cls, spec: ModelSpec, d: int, node_rows: int) -> float:
        """Numbers of one gradient step's temporaries at a node of ``node_rows`` rows (none for
        exact conjugate updates)."""
        return 0.0

    @staticmethod
    def make_family(name: str, d: int) -> GaussianFull | GaussianDiagonal:
        return GaussianFull(d) if name == "gaussian-full" else GaussianDiagonal(d)

    def _task(self, rng: np.random.Generator) -> Task:
        opts = self.options
        test_fraction = _test_fraction(opts)
        if self.table is not None:
            kind: TaskKind = "regression" if self.task_kind == "regression" else "binary"
            return table_task(self.table, kind, test_fraction=test_fraction, bias=True, rng=rng)
        if self.dataset != "synthetic":
            return load_task(self.dataset, test_fraction=test_fraction, bias=True, rng=rng)
        features = _features(opts)
        points = self.spec.data.points_per_node
        self._check_node_sizes(points)  # before the rows are drawn: errors name points_per_node
        total, n_test = _synthetic_rows(points, self.graph.size, test_fraction)
        if self.task_kind == "regression":
            noise = _option(
                opts, "noise", float, float(self.spec.model.options.get("sigma", SIGMA_KEY.default))
            )
            if not 0 < noise < math.inf:
                raise ConfigError("data.noise", f"must be a finite number > 0 (got {noise})")
            return synthetic_linear_task(
                total, features, rng, noise_std=noise, n_test=n_test, bias=True
            )
        return synthetic_logistic_task(total, features, rng, n_test=n_test, bias=True)

    def draw_data(self, rng: np.random.Generator) -> RegressionData:
        opts = self.options
        task = self._task(rng)
        points = self.spec.data.points_per_node
        if self.dataset == "synthetic" and isinstance(points, tuple):  # explicit node sizes
            self._check_node_sizes(points)
            bounds = np.cumsum((0, *points))
            order = rng.permutation(task.n_train)
            parts = [np.sort(order[bounds[i] : bounds[i + 1]]) for i in range(self.graph.size)]
        else:
            parts = partition_rows(opts, task.groups_train, self.graph.size, rng)
        return RegressionData(
            tuple(task.X_train[p] for p in parts),
            tuple(task.y_train[p] for p in parts),
            task.X_test,
            task.y_test,
        )

    def _check_node_sizes(self, points: int | tuple[int, ...]) -> None:
        """Synthetic rows per node: a list has one value per node, every node at least one."""
        if isinstance(points, tuple) and len(points) != self.graph.size:
            raise ConfigError(
                "data.points_per_node",
                f"a per-node list needs one value per node ({self.graph.size}), got {len(points)}",
            )
        if min(points, default=0) < 1 if isinstance(points, tuple) else points < 1:
            raise ConfigError("data.points_per_node", "every node needs at least one point")

    def node_sizes(self, data: Any) -> list[int]:
        return [int(y.size) for y in data.y] if data is not None else []

    def _moments(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.family.conventional(np.asarray(states, dtype=float))

    def _projection_moments(self, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of one member as :mod:`gossipsim.models.glm` takes them: a diagonal
        covariance as its diagonal (cheaper projections)."""
        if isinstance(self.family, GaussianDiagonal):
            return self.family.conventional(eta)[0], self.family.variance(eta)
        return self._moments(eta)

    @classmethod
    def prepare(cls, model: Any, key: str = "model") -> tuple[dict[str, Any], dict[str, Any]]:
        prior, _ = super().prepare(model, key)
        family = model.get("family", FAMILY_KEY.default)
        allowed = cls.allowed_families()
        if family not in allowed:
            raise ConfigError(
                f"{key}.family",
                f"unknown or unsupported family {family!r} for {cls.kind}; allowed: {', '.join(allowed)}",
            )
        options: dict[str, Any] = {"family": family}
        for precision_key in ("precision_shape", "precision_rate"):
            if precision_key in model:
                options[precision_key] = float(model[precision_key])
        if "sigma" in model:
            options["sigma"] = check_sigma(model["sigma"], f"{key}.sigma")
        return prior, options

    @classmethod
    def allowed_families(cls) -> tuple[str, ...]:
        return FAMILIES


class LinearRegression(GaussianRegression):
    kind = "linear-regression"
    description = "y = xᵀθ + N(0, sigma²) with known sigma ([model] sigma), Gaussian prior; conjugate (gaussian-full)"
    task_kind = "regression"
    capabilities: ClassVar[frozenset[str]] = frozenset({EXACT_FACTORS})
    model_keys: ClassVar[tuple[Key, ...]] = (FAMILY_KEY, SIGMA_KEY)

    @classmethod
    def allowed_families(cls) -> tuple[str, ...]:
        return ("gaussian-full",)

    @property
    def sigma(self) -> float:
        return float(self.spec.model.options.get("sigma", SIGMA_KEY.default))

    def check_data(self, data: RegressionData) -> None:
        """The exact posterior must be computable: finite factors and a finite KL from the prior
        (a noise or a target too large for the model's arithmetic fails here, not in every run)."""
        with np.errstate(all="ignore"):
            factors = self.factors(data)
            target = self.prior + factors.sum(axis=0)
            kl = self.family.kl(self.prior[None, :], target)
        if not (np.all(np.isfinite(factors)) and np.all(np.isfinite(kl))):
            raise ConfigError(
                "data",
                "the data give a posterior whose KL from the prior is not finite (targets or "
                "noise too large for the model's arithmetic, or model.sigma too small)",
            )

    def factors(self, data: RegressionData) -> np.ndarray:
        """Exact local factors (Xᵀy/σ², −½XᵀX/σ²)/α in the flat layout, one row per node."""
        rows = []
        for X, y in zip(data.X, data.y, strict=True):
            eta1, eta2 = glm.linear_regression_factor(X, y, self.sigma)
            rows.append(np.concatenate([eta1, eta2.ravel()]))
        return np.stack(rows) / self.temperature

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


#: ``[model]`` keys of the hierarchical prior particle protocols use (w ~ N(0, ξ⁻¹I), ξ ~ Gamma)
PRECISION_KEYS = (
    Key("precision_shape", "number", LOGISTIC_PRECISION_PRIOR.shape, "particle protocols: shape a "
        "of the Gamma prior on the weights' precision ξ (the papers' 1)", minimum=0,
        exclusive_minimum=True),
    Key("precision_rate", "number", LOGISTIC_PRECISION_PRIOR.rate, "particle protocols: rate b of "
        "that Gamma prior (the papers' 0.01)", minimum=0, exclusive_minimum=True),
)  # fmt: skip


class LogisticRegression(ParticleClassifier, GaussianRegression):
    """Logistic regression for G-FVL (Gaussian prior and posterior) and for particle protocols
    (the papers' hierarchical prior: θ = [w, log ξ], w ~ N(0, ξ⁻¹I), ξ ~ Gamma(a, rate b), the
    log-Jacobian of the log transform included; :mod:`gossipsim.logdensity.logistic`)."""

    kind = "logistic-regression"
    description = "binary labels, p(y=1|x) = σ(xᵀθ), Gaussian prior and posterior (full or diagonal); non-conjugate"
    task_kind = "binary"
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {MEAN_GRADIENT, LOGLIK_GRADIENT, BATCHED_MEAN_GRADIENT}
    )
    estimators: ClassVar[tuple[str, ...]] = ("reinforce", "reparameterization", "exact")
    model_keys: ClassVar[tuple[Key, ...]] = (FAMILY_KEY, *PRECISION_KEYS)

    @property
    def precision_prior(self) -> GammaPrior:
        options = self.spec.model.options
        return GammaPrior(
            float(options.get("precision_shape", LOGISTIC_PRECISION_PRIOR.shape)),
            float(options.get("precision_rate", LOGISTIC_PRECISION_PRIOR.rate)),
        )

    @property
    def particle_dimension(self) -> int:
        return self.d + 1

    def sample_prior(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return sample_logistic_prior(rng, count, self.d, self.precision_prior)

    def log_prior(self, particles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return logistic_log_prior(particles, self.precision_prior)

    def log_likelihood(
        self, data: Any, node: int, particles: np.ndarray, rows: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        X, y = data.X[node], data.y[node]
        if rows is None:
            return logistic_log_likelihood(particles, X, y)
        return logistic_log_likelihood(particles, X[rows], y[rows], scale=y.size / len(rows))

    def log_likelihood_score(
        self, data: Any, node: int, particles: np.ndarray, rows: np.ndarray | None = None
    ) -> np.ndarray:
        X, y = data.X[node], data.y[node]
        if rows is None:
            return logistic_log_likelihood_score(particles, X, y)
        return logistic_log_likelihood_score(particles, X[rows], y[rows], scale=y.size / len(rows))

    def node_rows(self, data: Any, node: int) -> int:
        return int(data.y[node].size)

    def predictive_probabilities(self, data: Any, particles: np.ndarray) -> np.ndarray:
        p = logistic_predictive_probability(particles, data.X_test)
        return np.stack([1.0 - p, p], axis=-1)

    def training_labels(self, data: Any, node: int) -> np.ndarray:
        return np.asarray(data.y[node], dtype=np.int64)

    def test_labels(self, data: Any) -> np.ndarray:
        return np.asarray(data.y_test, dtype=np.int64)

    def bins(self) -> int:
        return int(self.spec.ece_bins)

    @classmethod
    def sizes(cls, spec: ModelSpec, nodes: int) -> budget.ModelSizes:
        """As for linear regression; evaluating a state also fills ``[metrics] ece_bins``
        calibration bins, named when they are what makes the evaluation big."""
        sizes = super().sizes(spec, nodes)
        bins = spec.ece_bins
        if 4.0 * bins > sizes.evaluation_values:
            sizes = replace(
                sizes,
                evaluation_key="metrics.ece_bins",
                evaluation_what=f"{bins} calibration bins per recorded slot",
            )
        return sizes

    @classmethod
    def evaluation_values(cls, spec: ModelSpec, state_entries: int, test_rows: int) -> float:
        """Moments and predictive probabilities of one state: about 80 copies of the state, the
        quadrature nodes of every test row's projection (4 arrays of them, measured about 0.8 KiB a
        row) and the calibration bins."""
        return 80.0 * state_entries + 4.0 * QUADRATURE_POINTS * test_rows + 2.0 * spec.ece_bins

    @classmethod
    def step_values(cls, spec: ModelSpec, d: int, node_rows: int) -> float:
        """A step's draws: S per row (or S in all, with a d × d Hessian each), a few arrays of
        them; the exact estimator's quadrature nodes per row."""
        p = spec.protocol.options
        if getattr(p, "estimator", "exact") == "exact":
            return 4.0 * QUADRATURE_POINTS * node_rows + 4.0 * d * d
        if p.samples_per == "point":
            return 4.0 * p.samples * node_rows * d + 4.0 * d * d
        return 2.0 * p.samples * (d + d * d)

    def mean_gradient(self, data: RegressionData, estimation: EstimatorSettings) -> MeanGradient:
        """∇_μ E_q[L_k(θ)] for node k (L_k: the sum of the node's log-losses) by the given estimator
        (capability ``mean-gradient``): :meth:`batched_mean_gradient` with a batch of one."""
        batched = self.batched_mean_gradient(data, estimation)

        def one(eta: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            return batched(np.asarray(eta, dtype=float)[None, :], np.array([k]), (rng,))[0]

        return one

    def in_domain_rows(self, etas: np.ndarray) -> np.ndarray:
        """:meth:`in_domain` of each row of ``etas`` (B, D)."""
        return np.asarray(self.family.in_domain(etas), dtype=bool)

    def batched_mean_gradient(
        self, data: RegressionData, estimation: EstimatorSettings
    ) -> BatchedMeanGradient:
        """The estimators of :mod:`gossipsim.models.logistic_estimators` for a batch of runs
        (capability ``batched-mean-gradient``), on this data set's nodes."""
        cache = self.__dict__.setdefault("_node_points", {})
        points = cache.get(id(data))
        if points is None or points[0] is not data:
            points = cache[id(data)] = (data, NodePoints(data.X, data.y))
        return logistic_batched_gradient(self.family, points[1], estimation)

    def compute_target(self, data: Any, forgotten: frozenset[int]) -> Target:
        """The variational optimum (:meth:`centralised_optimum`) as a :class:`FamilyTarget`: its
        score and draws are the optimum Gaussian's, not the exact posterior's (the particle
        protocols measure against :meth:`particle_target`, the exact posterior's score)."""
        return FamilyTarget(self.family, self.centralised_optimum(data, forgotten))

    def centralised_optimum(
        self,
        data: RegressionData,
        forgotten: frozenset[int],
        *,
        kl_tol: float = KL_TOL,
        max_steps: int = MAX_STEPS,
        newton_steps: int = NEWTON_STEPS,
    ) -> np.ndarray:
        """The variational optimum on the pooled data of the included nodes: the stationary point
        of the free energy (2) in the family, G-FVL's fixed point with the exact estimator
        (:func:`gossipsim.families.optimum.variational_optimum`: at most ``max_steps`` damped
        natural-gradient steps and ``newton_steps`` Newton steps, accepted when the estimated KL
        to the optimum is at most ``kl_tol`` nats; :class:`~gossipsim.families.optimum.OptimumError` if
        not)."""
        X, y = data.pooled(self.included(forgotten))
        family = self.family
        # the search asks for the free energy at a candidate and then, if it takes it, for the
        # gradient there: both from one integration of that q (the last one is kept)
        last: dict[bytes, glm.LogisticExpectations] = {}

        def expectations(eta: np.ndarray) -> glm.LogisticExpectations:
            key = np.ascontiguousarray(eta, dtype=float).tobytes()
            if key not in last:
                last.clear()
                mean, cov = self._projection_moments(eta)
                last[key] = glm.LogisticExpectations(mean, cov, X, QUADRATURE_POINTS)
            return last[key]

        def mean_gradient(eta: np.ndarray) -> np.ndarray:
            g, h = expectations(eta).grad_hess(X, y)
            return gaussian_mean_gradient(family, eta, g, h)

        def free_energy(eta: np.ndarray) -> float:
            loss = expectations(eta).loss(y)
            return float(loss) / self.temperature + float(family.kl(eta, self.prior))

        forgot = ",".join(str(self.graph.labels[n]) for n in sorted(forgotten))
        return variational_optimum(
            self.prior, mean_gradient, free_energy, lambda eta: bool(family.in_domain(eta)),
            fisher_norm=family.fisher_norm, temperature=self.temperature, kl_tol=kl_tol,
            max_steps=max_steps, newton_steps=newton_steps,
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
            "ece": glm.expected_calibration_error(prob, data.y_test, self.spec.ece_bins),
        }


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * a))
