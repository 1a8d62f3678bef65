"""Real and synthetic supervised tasks, and partitions of their training rows over the nodes.

Real data sets come from scikit-learn's *bundled* data (no download). Every task is either
``"binary"`` (labels ``y`` in ``{0.0, 1.0}``, float64), ``"multiclass"`` (``y`` the original class
index 0..C−1 as float64, with ``load_task(..., labels="classes")``) or ``"regression"`` (a real
target):

=================  ============  =========================================================  ========
name               kind          label / target                                             groups
=================  ============  =========================================================  ========
``breast_cancer``  binary        sklearn's target: malignant = 0, benign = 1 (30 features)  2 classes
``wine``           binary        1 = cultivar "class_0", 0 = the other two (13 features)    3 classes
``digits``         binary        1 = digit >= 5, 0 = digit < 5 (64 pixel features)          10 digits
``iris``           binary        1 = versicolor, 0 = setosa or virginica (4 features)       3 species
``diabetes``       regression    disease progression, standardised (10 features)            5 y-bins
=================  ============  =========================================================  ========

``groups_train`` holds each training row's *original* class (the digit, the cultivar, ...) so that
label-skew partitions act on the real classes; for regression it is the quintile bin (0..4) of the
standardised training target. Versicolor-vs-rest is used for iris because it is not linearly
separable (setosa-vs-rest is, which makes a logistic likelihood degenerate).

Preprocessing, in this order, all deterministic given ``rng``:

1. Train/test split. Binary tasks are stratified by the original class: each class's rows are
   shuffled and ``round(test_fraction * n_class)`` of them (at most ``n_class - 1``) go to the test
   split. Regression splits a random permutation (``round(test_fraction * n)`` test rows, at least
   one row on each side). The rows of each split keep the data set's order.
2. Features are standardised with the mean and (population) standard deviation of the *training*
   split only; the same transform is applied to the test split. A column that is constant on the
   training split (blank digit pixels) is set to 0 in both splits. The regression target is
   standardised the same way (``Task.target_mean`` / ``Task.target_scale`` undo it).
3. With ``bias=True`` a column of ones named ``"bias"`` is appended last, after standardisation.

:func:`partition` deals the training rows to ``nodes`` nodes (``"iid"``, ``"dirichlet"`` label
skew, the ``"labels"`` few-labels-per-node scheme, listed ``"classes"`` or a ``"majority"`` class
at a fixed share); every node gets at least one row, every row goes to exactly one node, and each
node's index array is sorted. Mistakes raise
:class:`~gossipsim.errors.ConfigError` naming the scenario key (``data.dataset``,
``data.test_fraction``, ``data.partition``, ``data.sizes``, ``data.concentration``,
``data.labels_per_node``, ``data.majority_share``, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from itertools import accumulate
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np

from gossipsim.data.tables import Table
from gossipsim.errors import ConfigError

TaskKind = Literal["binary", "multiclass", "regression"]
LabelMode = Literal["binary", "classes"]
LABEL_MODES = ("binary", "classes")
RngLike = np.random.Generator | np.random.SeedSequence | int

#: Number of quantile bins of ``y`` used as the groups of a regression task.
REGRESSION_GROUPS = 5

PARTITION_SCHEMES = ("iid", "dirichlet", "labels", "classes", "majority")
SIZE_MODES = ("equal", "random")


@dataclass(frozen=True)
class DatasetSpec:
    """What a named data set is: its task, size before the split and number of groups.

    ``n_features`` excludes the bias column; ``classes`` is the number of groups available to
    label-skew partitions (the original classes, or the ``y`` quantile bins for regression).
    """

    name: str
    task: TaskKind
    description: str
    n_samples: int
    n_features: int
    classes: int


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            "breast_cancer",
            "binary",
            "Wisconsin diagnostic breast cancer: benign (1) vs malignant (0); groups = the 2 classes",
            569,
            30,
            2,
        ),
        DatasetSpec(
            "wine",
            "binary",
            "Wine cultivars: class 0 (1) vs the rest (0); groups = the 3 cultivars",
            178,
            13,
            3,
        ),
        DatasetSpec(
            "digits",
            "binary",
            "8x8 handwritten digits: digit >= 5 (1) vs < 5 (0); groups = the 10 digits",
            1797,
            64,
            10,
        ),
        DatasetSpec(
            "iris",
            "binary",
            "Iris: versicolor (1) vs setosa or virginica (0); groups = the 3 species",
            150,
            4,
            3,
        ),
        DatasetSpec(
            "diabetes",
            "regression",
            "Diabetes progression one year after baseline, standardised; groups = 5 quantile bins of y",
            442,
            10,
            REGRESSION_GROUPS,
        ),
    )
}


@dataclass(frozen=True, eq=False)
class Task:
    """A supervised task split into train and test arrays.

    ``X_*`` have shape ``(n, d)`` (``d`` includes the bias column when there is one) and ``y_*``
    shape ``(n,)``, float64. ``groups_train`` (int64) is the original class of each training row, or
    the quantile bin of ``y`` for regression. ``groups_test`` is the same for the test rows.
    ``target_mean`` / ``target_scale`` map a standardised regression target back to its units
    (``y_raw = target_mean + target_scale * y``); ``theta_true`` is the generating parameter of a
    synthetic task (``None`` for real data).
    """

    name: str
    kind: TaskKind
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    groups_train: np.ndarray
    feature_names: tuple[str, ...]
    groups_test: np.ndarray | None = None
    target_mean: float = 0.0
    target_scale: float = 1.0
    theta_true: np.ndarray | None = None

    @property
    def n_train(self) -> int:
        """Number of training rows."""
        return int(self.X_train.shape[0])

    @property
    def dim(self) -> int:
        """Number of columns of ``X`` (the parameter dimension of a linear model)."""
        return int(self.X_train.shape[1])


# ----------------------------------------------------------------------------------------- helpers


def as_generator(rng: RngLike) -> np.random.Generator:
    """A numpy Generator from a Generator (returned as is), a SeedSequence or an integer seed."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.SeedSequence) or (
        isinstance(rng, Integral) and not isinstance(rng, bool)
    ):
        return np.random.default_rng(rng)
    raise TypeError(
        f"rng must be a numpy Generator, SeedSequence or int seed, not {type(rng).__name__}"
    )


def check_fraction(test_fraction: Any) -> float:
    """``data.test_fraction`` as a float strictly between 0 and 1 (NaN and infinities excluded)."""
    if (
        isinstance(test_fraction, bool)
        or not isinstance(test_fraction, Real)
        or not 0.0 < float(test_fraction) < 1.0
    ):
        raise ConfigError(
            "data.test_fraction",
            f"must be a number strictly between 0 and 1, got {test_fraction!r}",
        )
    return float(test_fraction)


def _check_int(value: Any, key: str, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        raise ConfigError(key, f"{what} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def quantile_groups(y: np.ndarray, bins: int = REGRESSION_GROUPS) -> np.ndarray:
    """Bin a real target into ``bins`` quantile groups ``0..bins-1`` (ties may merge bins)."""
    y = np.asarray(y, dtype=float)
    edges = np.quantile(y, np.arange(1, bins) / bins)
    return np.searchsorted(edges, y, side="right").astype(np.int64)


def _stratified_split(
    classes: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    test_parts = []
    for c in np.unique(classes):
        rows = rng.permutation(np.flatnonzero(classes == c))
        n_test = min(_round_half_up(test_fraction * rows.size), rows.size - 1)
        test_parts.append(rows[:n_test])
    test = np.sort(np.concatenate(test_parts))
    if test.size == 0:
        raise ConfigError(
            "data.test_fraction", f"{test_fraction} leaves no test rows; use a larger fraction"
        )
    train = np.setdiff1d(np.arange(classes.size), test)
    return train, test


def _random_split(
    n: int, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    perm = rng.permutation(n)
    n_test = min(max(_round_half_up(test_fraction * n), 1), n - 1)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardise columns with the training mean/std; columns constant on train become 0."""
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    ok = std > 1e-12 * np.maximum(1.0, np.abs(mean))
    scale = np.where(ok, std, 1.0)
    train_z = np.where(ok, (train - mean) / scale, 0.0)
    test_z = np.where(ok, (test - mean) / scale, 0.0)
    return train_z, test_z


@cache
def _raw(name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The bundled data set as (X, target, feature names); cached, arrays read-only."""
    try:
        from sklearn import datasets as skd
    except ImportError:  # pragma: no cover - scikit-learn is a dependency
        raise ConfigError(
            "data.dataset", f"the {name!r} data set needs scikit-learn (pip install scikit-learn)"
        ) from None
    loaders = {
        "breast_cancer": skd.load_breast_cancer,
        "wine": skd.load_wine,
        "digits": skd.load_digits,
        "iris": skd.load_iris,
    }
    bunch = skd.load_diabetes(scaled=False) if name == "diabetes" else loaders[name]()
    X = np.array(bunch.data, dtype=float)
    target = np.array(bunch.target)
    names = tuple(str(f) for f in bunch.feature_names)
    X.setflags(write=False)
    target.setflags(write=False)
    return X, target, names


def _binary_labels(name: str, target: np.ndarray) -> np.ndarray:
    if name == "breast_cancer":
        return (target == 1).astype(float)  # benign
    if name == "wine":
        return (target == 0).astype(float)
    if name == "digits":
        return (target >= 5).astype(float)
    if name == "iris":
        return (target == 1).astype(float)  # versicolor
    raise AssertionError(name)  # pragma: no cover


def _with_bias(X: np.ndarray) -> np.ndarray:
    return np.hstack([X, np.ones((X.shape[0], 1))])


# -------------------------------------------------------------------------------------- real tasks


def load_task(
    name: str,
    *,
    test_fraction: float = 0.2,
    bias: bool = True,
    rng: RngLike,
    labels: LabelMode = "binary",
) -> Task:
    """Load a bundled scikit-learn data set as a standardised binary, multi-class or regression
    :class:`Task`.

    See the module docstring for the task definitions and the preprocessing. ``labels="classes"``
    keeps a classification set's original classes (``kind="multiclass"``, ``y`` the class index;
    the split and features are the binary task's, row for row). ``rng`` drives the train/test
    split only; the same seed gives identical arrays.
    """
    if name not in DATASETS:
        raise ConfigError(
            "data.dataset", f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}"
        )
    if labels not in LABEL_MODES:
        raise ConfigError("data.labels", f"must be one of {', '.join(LABEL_MODES)}, got {labels!r}")
    if labels == "classes" and DATASETS[name].task != "binary":
        raise ConfigError("data.labels", f"{name!r} is a regression set: it has no classes to keep")
    spec = DATASETS[name]
    X, target, names = _raw(name)
    if spec.task == "binary":
        classes = target.astype(np.int64)
        y = _binary_labels(name, target) if labels == "binary" else classes.astype(float)
        kind: TaskKind = "multiclass" if labels == "classes" else "binary"
        return _build_task(name, kind, X, names, y, classes, test_fraction, bias, rng)
    return _build_task(name, "regression", X, names, target, None, test_fraction, bias, rng)


def table_task(
    table: Table,
    kind: TaskKind,
    *,
    test_fraction: float = 0.2,
    bias: bool = True,
    rng: RngLike,
) -> Task:
    """A user's table (:func:`gossipsim.data.tables.read_table`) as a :class:`Task` of ``kind``,
    preprocessed exactly as :func:`load_task` preprocesses a bundled set. Classification: the
    distinct labels in sorted order are the classes ``0..C-1`` (a binary task needs exactly two,
    the smaller being 0); the groups are the classes. Regression: the label is a real target."""
    name = table.name
    if kind == "regression":
        return _build_task(
            name, kind, table.X, table.feature_names, table.target(), None, test_fraction, bias, rng
        )
    classes = table.classes()
    if kind == "binary" and classes.size != 2:
        shown = ", ".join(str(c) for c in classes[:5]) + (", ..." if classes.size > 5 else "")
        raise ConfigError(
            table.key,
            f"{table.source}: a binary model needs exactly 2 distinct labels, the data has "
            f"{classes.size} ({shown})",
        )
    if classes.size < 2:
        raise ConfigError(
            table.key, f"{table.source}: a classification model needs at least 2 distinct labels"
        )
    index = table.class_index()
    return _build_task(
        name, kind, table.X, table.feature_names, index.astype(float), index, test_fraction,
        bias, rng,
    )  # fmt: skip


def _build_task(
    name: str,
    kind: TaskKind,
    X: np.ndarray,
    names: tuple[str, ...],
    y: np.ndarray,
    classes: np.ndarray | None,
    test_fraction: float,
    bias: bool,
    rng: RngLike,
) -> Task:
    """Split (stratified by ``classes`` when given, else at random), standardise and add the
    bias column; a regression target (``classes is None``) is standardised too."""
    fraction = check_fraction(test_fraction)
    gen = as_generator(rng)
    if classes is not None:
        train, test = _stratified_split(classes, fraction, gen)
        y_train, y_test = y[train], y[test]
        groups_train, groups_test = classes[train], classes[test]
        target_mean, target_scale = 0.0, 1.0
    else:
        train, test = _random_split(y.size, fraction, gen)
        raw_train = y[train].astype(float)
        target_mean = float(raw_train.mean())
        target_scale = float(raw_train.std()) or 1.0
        y_train = (raw_train - target_mean) / target_scale
        y_test = (y[test].astype(float) - target_mean) / target_scale
        groups_train = quantile_groups(y_train)
        edges = np.quantile(y_train, np.arange(1, REGRESSION_GROUPS) / REGRESSION_GROUPS)
        groups_test = np.searchsorted(edges, y_test, side="right").astype(np.int64)

    X_train, X_test = _standardise(X[train], X[test])
    if bias:
        X_train, X_test = _with_bias(X_train), _with_bias(X_test)
        names = (*names, "bias")
    return Task(
        name=name,
        kind=kind,
        X_train=X_train,
        y_train=np.asarray(y_train, dtype=float),
        X_test=X_test,
        y_test=np.asarray(y_test, dtype=float),
        groups_train=np.asarray(groups_train, dtype=np.int64),
        feature_names=names,
        groups_test=np.asarray(groups_test, dtype=np.int64),
        target_mean=target_mean,
        target_scale=target_scale,
    )


# --------------------------------------------------------------------------------- synthetic tasks


def _synthetic_inputs(
    n: int,
    d: int,
    gen: np.random.Generator,
    theta: np.ndarray | None,
    n_test: int | None,
    bias: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    n = _check_int(n, "data.n_samples", 1, "the number of training rows")
    d = _check_int(d, "data.dimension", 1, "the dimension")
    n_test = max(n // 4, 1) if n_test is None else _check_int(n_test, "data.n_test", 0, "n_test")
    if theta is None:
        theta_arr = gen.standard_normal(d)
    else:
        theta_arr = np.array(theta, dtype=float)
        if theta_arr.shape != (d,) or not np.all(np.isfinite(theta_arr)):
            raise ConfigError(
                "data.theta",
                f"must be {d} finite numbers (one per column), got shape {theta_arr.shape}",
            )
    X = gen.standard_normal((n + n_test, d))
    if bias:
        X[:, -1] = 1.0
    return theta_arr, X, X @ theta_arr, n


def _feature_names(d: int, bias: bool) -> tuple[str, ...]:
    names = [f"x{j}" for j in range(d)]
    if bias:
        names[-1] = "bias"
    return tuple(names)


def synthetic_linear_task(
    n: int,
    d: int,
    rng: RngLike,
    *,
    theta: np.ndarray | None = None,
    noise_std: float = 1.0,
    n_test: int | None = None,
    bias: bool = False,
    name: str = "synthetic_linear",
) -> Task:
    """A linear-Gaussian regression task: ``y = X theta + noise_std * eps``.

    ``n`` training rows and ``n_test`` test rows (default ``max(n // 4, 1)``) have ``X`` rows drawn
    from ``N(0, I_d)``; with ``bias=True`` the last of the ``d`` columns is all ones (so ``d`` is
    always the parameter dimension). ``theta`` is drawn from ``N(0, I_d)`` unless given. Nothing is
    standardised, so ``Task.theta_true`` is the exact generating parameter. Groups are quantile
    bins of ``y_train``. Draw order from ``rng``: theta (if drawn), X (train then test), noise.
    """
    if isinstance(noise_std, bool) or not isinstance(noise_std, Real) or not noise_std > 0:
        raise ConfigError("data.noise_std", f"must be a number > 0, got {noise_std!r}")
    gen = as_generator(rng)
    theta_arr, X, mean, n = _synthetic_inputs(n, d, gen, theta, n_test, bias)
    y = mean + float(noise_std) * gen.standard_normal(mean.size)
    groups = quantile_groups(y[:n])
    edges = np.quantile(y[:n], np.arange(1, REGRESSION_GROUPS) / REGRESSION_GROUPS)
    return Task(
        name=name,
        kind="regression",
        X_train=X[:n],
        y_train=y[:n],
        X_test=X[n:],
        y_test=y[n:],
        groups_train=groups,
        feature_names=_feature_names(d, bias),
        groups_test=np.searchsorted(edges, y[n:], side="right").astype(np.int64),
        theta_true=theta_arr,
    )


def synthetic_logistic_task(
    n: int,
    d: int,
    rng: RngLike,
    *,
    theta: np.ndarray | None = None,
    n_test: int | None = None,
    bias: bool = False,
    name: str = "synthetic_logistic",
) -> Task:
    """A logistic-regression task: ``y ~ Bernoulli(sigmoid(X theta))`` with labels in {0.0, 1.0}.

    Inputs are drawn as in :func:`synthetic_linear_task`; the groups are the labels themselves.
    Draw order from ``rng``: theta (if drawn), X (train then test), the uniforms for the labels.
    """
    gen = as_generator(rng)
    theta_arr, X, logits, n = _synthetic_inputs(n, d, gen, theta, n_test, bias)
    p = 0.5 * (1.0 + np.tanh(0.5 * logits))  # a numerically stable sigmoid
    y = (gen.random(logits.size) < p).astype(float)
    return Task(
        name=name,
        kind="binary",
        X_train=X[:n],
        y_train=y[:n],
        X_test=X[n:],
        y_test=y[n:],
        groups_train=y[:n].astype(np.int64),
        feature_names=_feature_names(d, bias),
        groups_test=y[n:].astype(np.int64),
        theta_true=theta_arr,
    )


# -------------------------------------------------------------------------------------- partitions


def partition(
    groups: np.ndarray,
    nodes: int,
    *,
    scheme: str = "iid",
    concentration: float | None = None,
    labels_per_node: int | None = None,
    sizes: str = "equal",
    node_classes: Sequence[Sequence[Any]] | None = None,
    majority_share: float | None = None,
    rng: RngLike,
) -> list[np.ndarray]:
    """Deal the training rows ``0..len(groups)-1`` to ``nodes`` nodes; one sorted index array each.

    ``groups`` is the group (original class) of each row. Schemes:

    ``"iid"``
        Shuffle the rows and deal them out. ``sizes="equal"``: node sizes differ by at most one.
        ``sizes="random"``: node proportions ``p ~ Dirichlet(1, ..., 1)``; each node gets one row
        plus a ``Multinomial(n - nodes, p)`` share of the rest (so every node has data).
    ``"dirichlet"``
        Label skew (Hsu, Qi & Brown 2019): for each group ``c`` (in sorted order), draw node
        proportions ``p_c ~ Dirichlet(concentration * 1_K)``, shuffle the group's rows and cut them
        at ``floor(cumsum(p_c) * n_c)``. Small ``concentration`` means strong skew; it must be > 0.
    ``"labels"``
        Pathological non-IID with a hard guarantee: every node holds rows of at most
        ``labels_per_node = c`` distinct groups. The groups are put in random order and dealt
        cyclically into ``nodes * c`` slots (node ``k`` gets groups ``order[(k*c + j) mod G]``,
        ``j < c``, which are distinct since ``c <= G``), after a random relabelling of the nodes.
        Each group is thus held by ``floor`` or ``ceil`` of ``nodes * c / G`` nodes, and its
        shuffled rows are split among them into near-equal parts. Needs ``nodes * c >= G`` so that
        every group (hence every row) is placed.

    ``"classes"``
        Each node holds the groups listed for it in ``node_classes`` (one list per node, e.g.
        ``[[1, 3], [4, 6], ...]``): each group's shuffled rows are split into near-equal parts
        among the nodes that list it. Rows of groups no node lists are not dealt. This is the
        papers' unlearning split (000 Section IV-B: each node two classes, the forgotten labels at
        the forgotten nodes only).
    ``"majority"``
        A fixed ratio (003 Section IV-A: 1:9 per client). With the ``C`` groups in sorted order,
        node ``k``'s majority group is group ``k mod C``; each group ``c`` (in sorted order) is
        shuffled and cut at ``floor(cumsum(w_c) * n_c / sum(w_c))``, computed exactly (the share
        as the decimal it prints as), with fixed weights ``w_kc = s = majority_share`` if ``c``
        is node ``k``'s majority group, else ``(1 - s) / (C - 1)``. Node ``k`` holds about
        ``n_c * w_kc / sum_j w_jc`` rows of group ``c``: with balanced groups and ``C`` dividing
        ``nodes`` that is ``s : (1 - s)/(C - 1)`` up to rounding; otherwise the ratio of group
        ``c`` to the majority group ``m`` is scaled by ``(n_c / sum_j w_jc) / (n_m / sum_j w_jm)``.

    ``sizes`` other than ``"equal"`` applies to ``"iid"`` only; ``concentration`` belongs to
    ``"dirichlet"``, ``labels_per_node`` to ``"labels"``, ``node_classes`` to ``"classes"`` and
    ``majority_share`` to ``"majority"`` (giving one to another scheme is an error). A node left without rows is a :class:`ConfigError` for ``data.partition`` (never
    silently fixed, e.g. by resampling); so are more nodes than rows.
    """
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ConfigError("data.partition", f"groups must be one-dimensional, got {groups.shape}")
    n = int(groups.size)
    nodes = _check_int(nodes, "data.partition", 1, "the number of nodes")
    if scheme not in PARTITION_SCHEMES:
        raise ConfigError(
            "data.partition",
            f"unknown partition {scheme!r}; choose one of {', '.join(PARTITION_SCHEMES)}",
        )
    if sizes not in SIZE_MODES:
        raise ConfigError(
            "data.sizes", f"unknown sizes {sizes!r}; choose one of {', '.join(SIZE_MODES)}"
        )
    if sizes != "equal" and scheme != "iid":
        raise ConfigError(
            "data.sizes", f"sizes = {sizes!r} applies to partition = 'iid' only, not {scheme!r}"
        )
    if concentration is not None and scheme != "dirichlet":
        raise ConfigError(
            "data.concentration", f"applies to partition = 'dirichlet' only, not {scheme!r}"
        )
    if node_classes is not None and scheme != "classes":
        raise ConfigError(
            "data.node_classes", f"applies to partition = 'classes' only, not {scheme!r}"
        )
    if labels_per_node is not None and scheme != "labels":
        raise ConfigError(
            "data.labels_per_node", f"applies to partition = 'labels' only, not {scheme!r}"
        )
    if majority_share is not None and scheme != "majority":
        raise ConfigError(
            "data.majority_share", f"applies to partition = 'majority' only, not {scheme!r}"
        )
    if nodes > n:
        raise ConfigError(
            "data.partition",
            f"{nodes} nodes but only {n} training rows: every node needs at least one row; "
            "use fewer nodes or more data",
        )
    gen = as_generator(rng)

    if scheme == "iid":
        parts = _iid(n, nodes, sizes, gen)
    elif scheme == "dirichlet":
        if (
            concentration is None
            or isinstance(concentration, bool)
            or not isinstance(concentration, Real)
            or not (math.isfinite(concentration) and concentration > 0)
        ):
            raise ConfigError(
                "data.concentration",
                f"partition = 'dirichlet' needs a finite concentration > 0, got {concentration!r}",
            )
        parts = _dirichlet(groups, nodes, float(concentration), gen)
    elif scheme == "classes":
        parts = _classes(groups, nodes, node_classes, gen)
    elif scheme == "majority":
        if (
            majority_share is None
            or isinstance(majority_share, bool)
            or not isinstance(majority_share, Real)
            or not 0 < majority_share < 1  # False for nan
        ):
            raise ConfigError(
                "data.majority_share",
                f"partition = 'majority' needs a number strictly between 0 and 1, got "
                f"{majority_share!r}",
            )
        parts = _majority(groups, nodes, float(majority_share), gen)
    else:
        labels = np.unique(groups)
        if (
            labels_per_node is None
            or isinstance(labels_per_node, bool)
            or not isinstance(labels_per_node, Integral)
            or not 1 <= labels_per_node <= labels.size
        ):
            raise ConfigError(
                "data.labels_per_node",
                f"partition = 'labels' needs an integer between 1 and {labels.size}, got "
                f"{labels_per_node!r}: the data set has only {labels.size} labels",
            )
        if nodes * int(labels_per_node) < labels.size:
            raise ConfigError(
                "data.labels_per_node",
                f"{nodes} nodes x {labels_per_node} labels per node cannot hold all "
                f"{labels.size} labels; use more labels per node or more nodes",
            )
        parts = _labels(groups, labels, nodes, int(labels_per_node), gen)

    out = [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    for i, p in enumerate(out):
        if p.size == 0:
            hint = {
                "dirichlet": "use fewer nodes, a larger concentration, or a larger data set",
                "labels": "use fewer nodes, more labels per node, or a larger data set",
                "classes": "list at least one class for it in data.node_classes, or fewer "
                "nodes per class",
                "majority": "use fewer nodes or a larger data set",
                "iid": "use fewer nodes or a larger data set",
            }[scheme]
            raise ConfigError(
                "data.partition", f"node {i} gets no data under partition = {scheme!r}: {hint}"
            )
    return out


def _classes(
    groups: np.ndarray,
    nodes: int,
    node_classes: Sequence[Sequence[Any]] | None,
    gen: np.random.Generator,
) -> list[np.ndarray]:
    """The ``"classes"`` partition: node k holds its listed groups, each group's rows split among
    the nodes listing it."""
    key = "data.node_classes"
    if not isinstance(node_classes, list | tuple):  # None, a number or a string
        got = "" if node_classes is None else f" (got {node_classes!r})"
        raise ConfigError(key, f"partition = 'classes' needs one list of classes per node{got}")
    listed = list(node_classes)
    if len(listed) != nodes:
        raise ConfigError(key, f"needs one list of classes per node ({nodes}), got {len(listed)}")
    known = np.unique(groups)
    holders: dict[Any, list[int]] = {}
    for k, classes in enumerate(listed):
        entries = classes if isinstance(classes, list | tuple) else [classes]
        for c in entries:
            if isinstance(c, bool) or not isinstance(c, Integral | Real) or c not in known:
                raise ConfigError(
                    key,
                    f"node {k} lists {c!r}, which is not a class of the data set; classes: "
                    f"{', '.join(str(x) for x in known.tolist())}",
                )
            if k in holders.setdefault(c, []):
                raise ConfigError(key, f"node {k} lists class {c!r} twice")
            holders[c].append(k)
    parts: list[list[np.ndarray]] = [[] for _ in range(nodes)]
    for c in sorted(holders):
        rows = gen.permutation(np.flatnonzero(groups == c))
        for k, share in zip(holders[c], np.array_split(rows, len(holders[c])), strict=True):
            parts[k].append(share)
    return [np.concatenate(p) if p else np.array([], dtype=np.int64) for p in parts]


def _iid(n: int, nodes: int, sizes: str, gen: np.random.Generator) -> list[np.ndarray]:
    perm = gen.permutation(n)
    if sizes == "equal":
        return list(np.array_split(perm, nodes))
    p = gen.dirichlet(np.ones(nodes))
    counts = 1 + gen.multinomial(n - nodes, p)
    return list(np.split(perm, np.cumsum(counts)[:-1]))


def _dirichlet(
    groups: np.ndarray, nodes: int, concentration: float, gen: np.random.Generator
) -> list[np.ndarray]:
    parts: list[list[np.ndarray]] = [[] for _ in range(nodes)]
    for c in np.unique(groups):
        rows = gen.permutation(np.flatnonzero(groups == c))
        p = gen.dirichlet(np.full(nodes, concentration))
        if not np.all(np.isfinite(p)):  # pragma: no cover - numpy >= 1.25 handles tiny alphas
            raise ConfigError(
                "data.concentration", f"{concentration} is too small to sample; use a larger one"
            )
        cuts = np.minimum((np.cumsum(p) * rows.size).astype(np.int64), rows.size)[:-1]
        for k, chunk in enumerate(np.split(rows, cuts)):
            parts[k].append(chunk)
    return [np.concatenate(p) for p in parts]


def _majority(
    groups: np.ndarray, nodes: int, share: float, gen: np.random.Generator
) -> list[np.ndarray]:
    """The ``"majority"`` partition, in integers: ``share = p/q`` gives the weights
    ``p (C - 1)`` (majority) and ``q - p`` (any other group), so the cuts are exact."""
    labels = np.unique(groups)
    exact = Fraction(repr(share))
    major = exact.numerator * max(labels.size - 1, 1)
    minor = exact.denominator - exact.numerator
    parts: list[list[np.ndarray]] = [[] for _ in range(nodes)]
    for i, c in enumerate(labels):
        rows = gen.permutation(np.flatnonzero(groups == c))
        weights = [major if k % labels.size == i else minor for k in range(nodes)]
        total = sum(weights)
        cuts = [w * rows.size // total for w in accumulate(weights)][:-1]
        for k, chunk in enumerate(np.split(rows, cuts)):
            parts[k].append(chunk)
    return [np.concatenate(p) for p in parts]


def _labels(
    groups: np.ndarray,
    labels: np.ndarray,
    nodes: int,
    per_node: int,
    gen: np.random.Generator,
) -> list[np.ndarray]:
    n_labels = labels.size
    order = gen.permutation(n_labels)
    node_order = gen.permutation(nodes)
    holders: list[list[int]] = [[] for _ in range(n_labels)]
    for slot in range(nodes * per_node):
        holders[int(order[slot % n_labels])].append(int(node_order[slot // per_node]))
    parts: list[list[np.ndarray]] = [[] for _ in range(nodes)]
    for g, owners in enumerate(holders):
        rows = gen.permutation(np.flatnonzero(groups == labels[g]))
        for k, chunk in zip(owners, np.array_split(rows, len(owners)), strict=True):
            parts[k].append(chunk)
    return [np.concatenate(p) if p else np.empty(0, dtype=np.int64) for p in parts]
