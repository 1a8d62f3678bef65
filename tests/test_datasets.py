"""Real and synthetic tasks (bundled scikit-learn data) and partitions of training rows over nodes."""

from __future__ import annotations

import numpy as np
import pytest

from gossipsim.data.datasets import (
    DATASETS,
    load_task,
    partition,
    synthetic_linear_task,
    synthetic_logistic_task,
)
from gossipsim.errors import ConfigError


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def check_partition(parts: list[np.ndarray], n: int) -> None:
    """Every node has rows, each index array is sorted, and every row appears exactly once."""
    assert all(p.size > 0 for p in parts)
    assert all(np.all(np.diff(p) > 0) for p in parts)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))


def mean_entropy(groups: np.ndarray, parts: list[np.ndarray]) -> float:
    ent = []
    for p in parts:
        _, counts = np.unique(groups[p], return_counts=True)
        q = counts / counts.sum()
        ent.append(float(-(q * np.log(q)).sum()))
    return float(np.mean(ent))


# -------------------------------------------------------------------------------------------- tasks


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_task_has_consistent_shapes(name):
    spec = DATASETS[name]
    task = load_task(name, rng=rng())
    assert task.name == name and task.kind == spec.task
    n_train, n_test = task.X_train.shape[0], task.X_test.shape[0]
    assert n_train + n_test == spec.n_samples
    assert abs(n_test - 0.2 * spec.n_samples) <= spec.classes
    assert task.X_train.shape[1] == task.X_test.shape[1] == spec.n_features + 1
    assert task.y_train.shape == (n_train,) and task.y_test.shape == (n_test,)
    assert task.groups_train.shape == (n_train,)
    assert task.groups_train.dtype == np.int64
    assert len(task.feature_names) == spec.n_features + 1 and task.feature_names[-1] == "bias"
    np.testing.assert_array_equal(task.X_train[:, -1], 1.0)
    np.testing.assert_array_equal(task.X_test[:, -1], 1.0)
    assert np.all(np.isfinite(task.X_train)) and np.all(np.isfinite(task.X_test))
    assert np.unique(task.groups_train).size == spec.classes
    if spec.task == "binary":
        assert set(np.unique(task.y_train)) == {0.0, 1.0}


def test_breast_cancer_dimension_and_no_bias():
    task = load_task("breast_cancer", rng=rng())
    assert task.dim == 31 and task.n_train == task.X_train.shape[0]
    plain = load_task("breast_cancer", bias=False, rng=rng())
    assert plain.X_train.shape[1] == 30 and "bias" not in plain.feature_names
    np.testing.assert_array_equal(plain.X_train, task.X_train[:, :30])
    # label = sklearn's target: benign = 1, and the groups are that same class
    np.testing.assert_array_equal(task.y_train, task.groups_train.astype(float))


def test_binary_labels_follow_the_documented_definitions():
    wine = load_task("wine", rng=rng())
    np.testing.assert_array_equal(wine.y_train, (wine.groups_train == 0).astype(float))
    digits = load_task("digits", rng=rng())
    np.testing.assert_array_equal(digits.y_train, (digits.groups_train >= 5).astype(float))
    iris = load_task("iris", rng=rng())
    np.testing.assert_array_equal(iris.y_train, (iris.groups_train == 1).astype(float))


def test_standardisation_uses_the_training_split_only():
    task = load_task("breast_cancer", rng=rng(3))
    Xtr, Xte = task.X_train[:, :-1], task.X_test[:, :-1]
    np.testing.assert_allclose(Xtr.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(Xtr.std(axis=0), 1.0, atol=1e-10)
    assert np.abs(Xte.mean(axis=0)).max() > 1e-3
    assert np.abs(Xte.std(axis=0) - 1.0).max() > 1e-3


def test_constant_training_columns_are_zero_in_both_splits():
    task = load_task("digits", bias=False, rng=rng(1))
    std = task.X_train.std(axis=0)
    constant = std == 0
    assert constant.any()  # blank border pixels
    np.testing.assert_array_equal(task.X_train[:, constant], 0.0)
    np.testing.assert_array_equal(task.X_test[:, constant], 0.0)
    np.testing.assert_allclose(std[~constant], 1.0, atol=1e-10)


def test_regression_target_is_standardised_on_train_and_grouped_in_quantile_bins():
    task = load_task("diabetes", rng=rng(2))
    assert task.kind == "regression" and task.dim == 11
    assert abs(task.y_train.mean()) < 1e-10 and abs(task.y_train.std() - 1.0) < 1e-10
    assert abs(task.y_test.mean()) > 1e-6
    counts = np.bincount(task.groups_train)
    assert counts.size == 5 and counts.min() >= task.n_train // 5 - 2
    # bins are ordered by y
    means = [task.y_train[task.groups_train == g].mean() for g in range(5)]
    assert means == sorted(means)
    assert task.target_scale > 1.0  # the raw target is in disease-progression units


@pytest.mark.parametrize("name", ["wine", "digits", "iris", "breast_cancer"])
def test_binary_split_is_stratified_by_original_class(name):
    from sklearn import datasets as skd

    loader = {
        "wine": skd.load_wine,
        "digits": skd.load_digits,
        "iris": skd.load_iris,
        "breast_cancer": skd.load_breast_cancer,
    }[name]
    total = np.bincount(loader().target)
    task = load_task(name, test_fraction=0.25, rng=rng(5))
    train = np.bincount(task.groups_train, minlength=total.size)
    test = total - train
    np.testing.assert_array_equal(test, np.floor(0.25 * total + 0.5).astype(int))
    assert task.groups_test is not None
    np.testing.assert_array_equal(np.bincount(task.groups_test, minlength=total.size), test)


def test_same_seed_same_arrays_different_seed_different_split():
    a = load_task("wine", rng=rng(11))
    b = load_task("wine", rng=np.random.SeedSequence(11))
    for field in ("X_train", "y_train", "X_test", "y_test", "groups_train"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    c = load_task("wine", rng=rng(12))
    assert not np.array_equal(a.X_train, c.X_train)


def test_bad_dataset_and_test_fraction_are_config_errors():
    with pytest.raises(ConfigError, match=r"data\.dataset.*breast_cancer") as err:
        load_task("mnist", rng=rng())
    assert err.value.key == "data.dataset"
    for bad in (0, 1, 1.5, -0.1, True, "0.2", float("nan")):
        with pytest.raises(ConfigError) as err:
            load_task("iris", test_fraction=bad, rng=rng())
        assert err.value.key == "data.test_fraction"
        assert "data.test_fraction" in str(err.value)
    with pytest.raises(ConfigError, match="data.test_fraction"):
        load_task("iris", test_fraction=0.001, rng=rng())  # rounds to no test rows


# ---------------------------------------------------------------------------------------- synthetic


def test_synthetic_linear_task():
    theta = np.array([1.0, -2.0, 0.5])
    task = synthetic_linear_task(2000, 3, rng(0), theta=theta, noise_std=0.1)
    assert task.kind == "regression" and task.X_train.shape == (2000, 3)
    assert task.X_test.shape == (500, 3)
    np.testing.assert_array_equal(task.theta_true, theta)
    est = np.linalg.lstsq(task.X_train, task.y_train, rcond=None)[0]
    np.testing.assert_allclose(est, theta, atol=0.02)
    again = synthetic_linear_task(2000, 3, rng(0), theta=theta, noise_std=0.1)
    np.testing.assert_array_equal(task.y_train, again.y_train)
    drawn = synthetic_linear_task(50, 4, rng(1), bias=True, n_test=10)
    assert drawn.theta_true is not None and drawn.theta_true.shape == (4,)
    np.testing.assert_array_equal(drawn.X_train[:, -1], 1.0)
    assert drawn.feature_names[-1] == "bias" and drawn.X_test.shape == (10, 4)
    with pytest.raises(ConfigError, match="data.theta"):
        synthetic_linear_task(10, 3, rng(), theta=np.zeros(2))
    with pytest.raises(ConfigError, match="data.noise_std"):
        synthetic_linear_task(10, 3, rng(), noise_std=0)


def test_synthetic_logistic_task():
    task = synthetic_logistic_task(5000, 2, rng(0), theta=np.array([2.0, -1.0]))
    assert task.kind == "binary" and set(np.unique(task.y_train)) == {0.0, 1.0}
    np.testing.assert_array_equal(task.groups_train, task.y_train.astype(np.int64))
    # labels agree with the sign of X theta much more often than chance
    agree = np.mean((task.X_train @ task.theta_true > 0) == (task.y_train == 1))
    assert agree > 0.75
    groups_then_partition = partition(
        task.groups_train, 4, scheme="labels", labels_per_node=1, rng=rng()
    )
    check_partition(groups_then_partition, task.n_train)


# --------------------------------------------------------------------------------------- partitions


@pytest.fixture(scope="module")
def digits_groups() -> np.ndarray:
    return load_task("digits", rng=rng(0)).groups_train


def test_iid_equal_sizes_differ_by_at_most_one(digits_groups):
    n = digits_groups.size
    for nodes in (1, 7, 10, 100):
        parts = partition(digits_groups, nodes, rng=rng(nodes))
        check_partition(parts, n)
        sizes = [p.size for p in parts]
        assert max(sizes) - min(sizes) <= 1


def test_iid_random_sizes_cover_every_row_and_vary(digits_groups):
    n = digits_groups.size
    parts = partition(digits_groups, 20, sizes="random", rng=rng(4))
    check_partition(parts, n)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) > 10
    tight = partition(np.zeros(30, dtype=int), 30, sizes="random", rng=rng(4))
    check_partition(tight, 30)


def test_dirichlet_partition_is_exact_and_skew_grows_as_concentration_shrinks(digits_groups):
    n = digits_groups.size
    strong = partition(digits_groups, 5, scheme="dirichlet", concentration=0.1, rng=rng(0))
    weak = partition(digits_groups, 5, scheme="dirichlet", concentration=100.0, rng=rng(0))
    check_partition(strong, n)
    check_partition(weak, n)
    assert mean_entropy(digits_groups, strong) < mean_entropy(digits_groups, weak) - 0.5
    assert mean_entropy(digits_groups, weak) > 0.95 * np.log(10)


def test_labels_partition_caps_the_distinct_labels_per_node(digits_groups):
    n = digits_groups.size
    for nodes, c in ((10, 1), (10, 2), (7, 3), (25, 2), (3, 4), (4, 10)):
        parts = partition(digits_groups, nodes, scheme="labels", labels_per_node=c, rng=rng(c))
        check_partition(parts, n)
        assert all(np.unique(digits_groups[p]).size <= c for p in parts)
    # with nodes * c a multiple of the number of labels every node has exactly c labels
    parts = partition(digits_groups, 10, scheme="labels", labels_per_node=2, rng=rng(9))
    assert all(np.unique(digits_groups[p]).size == 2 for p in parts)


def test_partitions_are_deterministic(digits_groups):
    for kwargs in (
        {"scheme": "iid"},
        {"scheme": "iid", "sizes": "random"},
        {"scheme": "dirichlet", "concentration": 0.5},
        {"scheme": "labels", "labels_per_node": 2},
    ):
        a = partition(digits_groups, 8, rng=rng(21), **kwargs)
        b = partition(digits_groups, 8, rng=np.random.SeedSequence(21), **kwargs)
        c = partition(digits_groups, 8, rng=rng(22), **kwargs)
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def _raises(key: str, groups: np.ndarray, nodes: int, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        partition(groups, nodes, rng=rng(0), **kwargs)
    assert err.value.key == key and key in str(err.value)
    return err.value


def test_partition_errors_name_the_key(digits_groups):
    g = digits_groups
    err = _raises("data.partition", g, 5, scheme="shards")
    assert "dirichlet" in err.message
    for bad in (0, -1, None, 0.0, float("inf"), float("nan")):
        _raises("data.concentration", g, 5, scheme="dirichlet", concentration=bad)
    _raises("data.concentration", g, 5, scheme="iid", concentration=1.0)
    err = _raises("data.labels_per_node", g, 5, scheme="labels", labels_per_node=11)
    assert "only 10 labels" in err.message
    _raises("data.labels_per_node", g, 5, scheme="labels", labels_per_node=0)
    _raises("data.labels_per_node", g, 5, scheme="labels")
    _raises("data.labels_per_node", g, 4, scheme="labels", labels_per_node=2)  # 8 slots < 10
    _raises("data.labels_per_node", g, 5, scheme="iid", labels_per_node=2)
    _raises("data.sizes", g, 5, sizes="lognormal")
    _raises("data.sizes", g, 5, scheme="dirichlet", concentration=1.0, sizes="random")
    err = _raises("data.partition", g, g.size + 1)
    assert "training rows" in err.message
    _raises("data.partition", g, 0)


def test_a_node_without_data_is_an_error_not_silent():
    groups = load_task("breast_cancer", rng=rng(0)).groups_train
    err = _raises("data.partition", groups, 50, scheme="dirichlet", concentration=1e-3)
    assert "gets no data" in err.message and "larger concentration" in err.message
    # a label held by more nodes than it has rows leaves a node empty in the labels scheme
    tiny = np.array([0, 0, 0, 0, 0, 0, 1])
    err = _raises("data.partition", tiny, 4, scheme="labels", labels_per_node=1)
    assert "gets no data" in err.message


@pytest.mark.parametrize(
    "name,classes", [("digits", 10), ("wine", 3), ("iris", 3), ("breast_cancer", 2)]
)
def test_multiclass_tasks_keep_the_original_classes(name: str, classes: int) -> None:
    """labels="classes": y is the sklearn class index, rows and features as in the binary task."""
    from sklearn import datasets as skd

    task = load_task(name, rng=rng(), labels="classes")
    binary = load_task(name, rng=rng())
    assert task.kind == "multiclass"
    np.testing.assert_array_equal(task.X_train, binary.X_train)
    np.testing.assert_array_equal(task.y_train, task.groups_train)
    np.testing.assert_array_equal(task.y_test, task.groups_test)
    assert sorted(np.unique(task.y_train).astype(int).tolist()) == list(range(classes))
    counts = np.bincount(np.concatenate([task.y_train, task.y_test]).astype(int))
    raw = getattr(skd, f"load_{name}")().target
    np.testing.assert_array_equal(counts, np.bincount(raw))


def test_multiclass_labels_refused_for_regression_and_unknown_modes() -> None:
    with pytest.raises(ConfigError, match="data.labels: 'diabetes' is a regression set"):
        load_task("diabetes", rng=rng(), labels="classes")
    with pytest.raises(ConfigError, match="data.labels: must be one of binary, classes"):
        load_task("wine", rng=rng(), labels="all")  # type: ignore[arg-type]
