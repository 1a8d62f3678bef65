"""``[data] partition = "majority"`` with ``majority_share``: node k's majority class is class
k mod C, each class's rows cut among the nodes with fixed weights s and (1 − s)/(C − 1) (003
Section IV-A's 1:9 per client). Expected counts here are worked out by hand, not by the code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.data.datasets import partition
from gossipsim.errors import ConfigError
from tests.helpers import validate_error


def _counts(groups: np.ndarray, parts: list[np.ndarray], classes: int) -> np.ndarray:
    """Rows of each class (columns) at each node (rows)."""
    return np.array([np.bincount(groups[p], minlength=classes) for p in parts])


def _check_cover(parts: list[np.ndarray], n: int) -> None:
    assert all(p.size > 0 and np.all(np.diff(p) > 0) for p in parts)
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))


def test_exact_counts_on_a_small_unbalanced_label_vector():
    """Classes of 12, 24 and 6 rows over 5 nodes at s = 0.6 (weights 0.6 and 0.2; majorities
    0, 1, 2, 0, 1). Class 0: weights 3,1,1,3,1 of 9, cumulative x 12/9 = 4, 5.3, 6.7, 10.7, 12,
    floors 4, 5, 6, 10: counts 4, 1, 1, 4, 2. Class 1 (1,3,1,1,3 of 9, x 24/9): 2.7, 10.7, 13.3,
    16, 24: counts 2, 8, 3, 3, 8. Class 2 (1,1,3,1,1 of 7, x 6/7): 0.9, 1.7, 4.3, 5.1, 6:
    counts 0, 1, 3, 1, 1."""
    groups = np.random.default_rng(3).permutation(np.repeat([0, 1, 2], [12, 24, 6]))
    parts = partition(
        groups, 5, scheme="majority", majority_share=0.6, rng=np.random.default_rng(0)
    )
    _check_cover(parts, groups.size)
    expected = [[4, 2, 0], [1, 8, 1], [1, 3, 3], [4, 3, 1], [2, 8, 1]]
    np.testing.assert_array_equal(_counts(groups, parts, 3), expected)
    # unbalanced classes: node 0's 4 of class 0 against 2 of class 1, not 0.6 : 0.2 = 3:1


def test_the_classes_are_numbered_in_sorted_order():
    """Labels 7 and 3: class 0 is 3, held mostly by the even nodes; binary nodes alternate."""
    groups = np.repeat([7, 3], 20)
    parts = partition(groups, 4, scheme="majority", majority_share=0.9, rng=1)
    threes = [int((groups[p] == 3).sum()) for p in parts]
    sevens = [int((groups[p] == 7).sum()) for p in parts]
    assert threes == [9, 1, 9, 1] and sevens == [1, 9, 1, 9]


@pytest.mark.parametrize(
    ("classes", "per_class", "nodes", "share"),
    [(2, 500, 10, 0.9), (2, 401, 6, 0.9), (3, 300, 9, 0.7), (10, 180, 20, 0.9), (10, 97, 30, 0.5)],
)
def test_balanced_classes_hold_the_ratio_up_to_rounding(classes, per_class, nodes, share):
    """With C dividing the nodes every class's weight total is nodes/C, so node k holds
    n_c · s · C/nodes of its majority class and n_c · (1 − s)/(C − 1) · C/nodes of each other
    (each within one row)."""
    groups = np.random.default_rng(classes).permutation(np.repeat(np.arange(classes), per_class))
    parts = partition(groups, nodes, scheme="majority", majority_share=share, rng=5)
    _check_cover(parts, groups.size)
    counts = _counts(groups, parts, classes)
    scale = per_class * classes / nodes
    for k in range(nodes):
        expected = np.full(classes, scale * (1 - share) / (classes - 1))
        expected[k % classes] = scale * share
        assert np.all(np.abs(counts[k] - expected) < 1), (k, counts[k], expected)
    if (classes, per_class, nodes) == (2, 500, 10):  # integral: 90 and 10, exactly 9:1
        assert all(sorted(row) == [10, 90] for row in counts.tolist())


def test_it_is_deterministic_given_the_seed():
    groups = np.random.default_rng(0).integers(0, 4, 400)
    a = partition(groups, 8, scheme="majority", majority_share=0.8, rng=11)
    b = partition(groups, 8, scheme="majority", majority_share=0.8, rng=np.random.SeedSequence(11))
    c = partition(groups, 8, scheme="majority", majority_share=0.8, rng=12)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    # the counts do not depend on the seed, only which rows
    assert np.array_equal(_counts(groups, a, 4), _counts(groups, c, 4))


def _raises(key: str, groups: np.ndarray, nodes: int, **kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        partition(groups, nodes, rng=0, **kwargs)
    assert err.value.key == key
    return err.value


def test_bad_input_names_the_key():
    groups = np.repeat([0, 1], 50)
    for bad in (None, 0, 0.0, 1, 1.0, -0.5, 1.5, float("nan"), float("inf"), True, "0.9"):
        err = _raises("data.majority_share", groups, 4, scheme="majority", majority_share=bad)
        assert "strictly between 0 and 1" in err.message
    err = _raises("data.majority_share", groups, 4, scheme="dirichlet", majority_share=0.9)
    assert "partition = 'majority' only" in err.message
    _raises("data.concentration", groups, 4, scheme="majority", concentration=1.0)
    err = _raises("data.partition", np.repeat([0, 1], 3), 6, scheme="majority", majority_share=0.9)
    assert "gets no data" in err.message


def _logistic(**data: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "maj", "seed": 4, "runs": 1, "iterations": 20},
        "topology": {"kind": "complete", "nodes": 10},
        "model": {"kind": "logistic-regression", "family": "gaussian-diagonal"},
        "data": {"test_fraction": 0.2, **data},
        "protocol": {"kind": "gfvl", "estimator": "exact", "learning_rate": 0.3},
        "metrics": {"tolerance": 0.05, "record_every": 10},
    }


def _bnn(**data: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "maj", "seed": 2, "runs": 1, "iterations": 10},
        "topology": {"kind": "complete", "nodes": 6},
        "model": {"kind": "bnn", "hidden": 4},
        "data": data,
        "protocol": {"kind": "dsvgd", "particles": 4, "local_iterations": 2},
        "metrics": {"record_every": 5},
    }


def _node_labels(raw: dict[str, Any]) -> list[np.ndarray]:
    world = gs.build_world(gs.parse_study(raw).variants[0].scenario)
    data = world.model.draw_data(np.random.default_rng(0))
    return [np.asarray(y).astype(int) for y in data.y]


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ({"partition": "majority"}, "strictly between 0 and 1"),
        ({"partition": "majority", "majority_share": 1.0}, "majority_share"),
        ({"partition": "majority", "majority_share": 0}, "majority_share"),
        ({"partition": "majority", "majority_share": 1.5}, "majority_share"),
        ({"partition": "iid", "majority_share": 0.9}, "'majority' only"),
        ({"partition": "dirichlet", "concentration": 1.0, "majority_share": 0.9}, "only"),
    ],
)
def test_bad_scenarios_are_one_line_naming_the_key(tmp_path, capsys, section, needle):
    for raw in (_logistic(dataset="breast_cancer", **section), _bnn(dataset="iris", **section)):
        err = validate_error(raw, tmp_path, capsys)
        assert "data.majority_share" in err and needle in err, err


def test_logistic_regression_on_digits_takes_the_digit_as_the_class():
    """digits' classes are the ten digits: node k mostly holds digit k, hence mostly label 0
    (digit < 5) at nodes 0-4 and label 1 at nodes 5-9, at about 0.9 + 4 · 0.1/9 ≈ 0.94."""
    labels = _node_labels(_logistic(dataset="digits", partition="majority", majority_share=0.9))
    for k, y in enumerate(labels):
        share = float(np.mean(y == (1 if k >= 5 else 0)))
        assert 0.92 < share < 0.97, (k, share)


def test_logistic_regression_on_breast_cancer_runs():
    """Two classes (170 malignant, 286 benign training rows: unbalanced, so not 9:1)."""
    raw = _logistic(dataset="breast_cancer", partition="majority", majority_share=0.9)
    labels = _node_labels(raw)
    for k, y in enumerate(labels):
        assert np.mean(y == k % 2) > 0.8
    res = gs.run(raw, plots=False)
    assert res.metrics["accuracy"].notna().all()


def test_a_bnn_on_a_multiclass_set():
    """iris (three classes of 40 training rows each) over 6 nodes at s = 0.8: node k holds
    40 · 0.8 · 3/6 = 16 of class k mod 3 and 40 · 0.1 · 3/6 = 2 of each other class."""
    raw = _bnn(dataset="iris", partition="majority", majority_share=0.8)
    labels = _node_labels(raw)
    for k, y in enumerate(labels):
        expected = [2, 2, 2]
        expected[k % 3] = 16
        assert np.bincount(y, minlength=3).tolist() == expected, k
    res = gs.run(raw, plots=False)
    assert len(res.metrics) > 0


def test_a_user_file_of_two_balanced_labels_is_exactly_one_to_nine(tmp_path: Path):
    """500 rows of each label ("no"/"yes"): the stratified split keeps 400 of each for training,
    so each of 10 nodes holds 72 of its majority label and 8 of the other, 9:1 exactly; even
    nodes hold mostly "no" (label 0)."""
    rng = np.random.default_rng(1)
    path = tmp_path / "own.csv"
    X = rng.standard_normal((1000, 3))
    y = np.repeat(["no", "yes"], 500)
    rng.shuffle(y)
    rows = [",".join([*map(repr, r), str(t)]) for r, t in zip(X.tolist(), y, strict=True)]
    lines = ["a,b,c,label", *rows]
    path.write_text("\n".join(lines) + "\n")
    raw = _logistic(path=str(path), partition="majority", majority_share=0.9)
    labels = _node_labels(raw)
    for k, lab in enumerate(labels):
        assert np.bincount(lab, minlength=2).tolist() == ([72, 8] if k % 2 == 0 else [8, 72])
    res = gs.run(raw, plots=False)
    assert res.metrics["accuracy"].notna().all()
