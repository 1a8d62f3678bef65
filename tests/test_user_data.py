"""A user's own data set: ``[data] path`` of a CSV, Parquet or .npz file for the classification and
regression models (issue 34, item 4). Every file here is written by the test."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.data.datasets import _raw, load_task, table_task
from gossipsim.data.tables import read_table
from tests.helpers import validate_error


def _logistic(path: Path | None, **data: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "scenario": {"name": "own", "seed": 5, "runs": 3, "iterations": 60},
        "topology": {"kind": "complete", "nodes": 6},
        "model": {"kind": "logistic-regression", "family": "gaussian-diagonal"},
        "data": {"test_fraction": 0.25, **data},
        "protocol": {"kind": "gfvl", "estimator": "exact", "learning_rate": 0.3},
        "metrics": {"tolerance": 0.05, "record_every": 20},
    }
    if path is not None:
        raw["data"]["path"] = str(path)
    return raw


def _linear(path: Path | None, **data: Any) -> dict[str, Any]:
    raw = _logistic(path, **data)
    raw["model"] = {"kind": "linear-regression", "sigma": 1.0}
    raw["protocol"] = {"kind": "gfvl"}
    return raw


def _write_bundled(name: str, path: Path, *, label_column: str = "label") -> None:
    """The bundled set, its raw target as the label, every number written exactly (repr)."""
    X, target, names = _raw(name)
    with path.open("w") as f:
        f.write(",".join([*names[:3], label_column, *names[3:]]) + "\n")
        for row, t in zip(X, target, strict=True):
            cells = [repr(float(v)) for v in row]
            f.write(",".join([*cells[:3], repr(float(t)), *cells[3:]]) + "\n")


def _tables_equal(a: gs.Results, b: gs.Results) -> bool:
    return a.metrics.equals(b.metrics) and a.requests.equals(b.requests)


@pytest.mark.parametrize("model", ["logistic", "linear"])
def test_a_csv_written_from_a_bundled_set_gives_its_tables(tmp_path, model):
    """The independent check: breast_cancer (binary, labels 0/1 in sorted order = sklearn's) and
    diabetes (a real target) as bundled and from a CSV of the same numbers give identical tables;
    the label column sits among the features, so the feature order is checked too."""
    name, make = ("breast_cancer", _logistic) if model == "logistic" else ("diabetes", _linear)
    path = tmp_path / f"{name}.csv"
    _write_bundled(name, path)
    bundled = gs.run(make(None, dataset=name), plots=False)
    own = gs.run(make(path), plots=False)
    assert _tables_equal(bundled, own)
    task = load_task(name, test_fraction=0.3, rng=3)
    kind = "binary" if model == "logistic" else "regression"
    mine = table_task(read_table(path), kind, test_fraction=0.3, rng=3)
    for field in ("X_train", "y_train", "X_test", "y_test", "groups_train"):
        assert np.array_equal(getattr(task, field), getattr(mine, field)), field


def test_one_or_two_workers_give_the_same_tables(tmp_path):
    path = tmp_path / "bc.csv"
    _write_bundled("breast_cancer", path, label_column="diagnosis")
    raw = _logistic(path, label_column="diagnosis", partition="dirichlet", concentration=1.0)
    one = gs.run(raw, plots=False, workers=1)
    two = gs.run(raw, plots=False, workers=2)
    assert _tables_equal(one, two)


def test_string_labels_map_to_0_and_1_in_sorted_order(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(40) > 0, "yes", "no")
    path = tmp_path / "yn.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "label": y}).to_csv(path, index=False)
    task = table_task(read_table(path), "binary", rng=1)
    both = np.concatenate([task.y_train, task.y_test])
    assert sorted(set(both)) == [0.0, 1.0]
    assert task.kind == "binary" and task.feature_names == ("a", "b", "bias")
    # "no" < "yes": 1 means yes
    table = read_table(path)
    assert np.array_equal(table.class_index(), (y == "yes").astype(np.int64))
    res = gs.run(_logistic(path), plots=False)
    assert res.metrics["accuracy"].notna().all()


def test_multiclass_file_keeps_its_classes(tmp_path):
    """A BNN on iris written as a file with labels 10, 20, 30: three classes 0..2 in sorted order,
    the same tables as the bundled iris (whose classes are 0, 1, 2)."""
    X, target, names = _raw("iris")
    path = tmp_path / "iris.npz"
    np.savez(path, X=X, y=10.0 * (target + 1))
    raw: dict[str, Any] = {
        "scenario": {"name": "bnn", "seed": 2, "runs": 2, "iterations": 20},
        "topology": {"kind": "complete", "nodes": 3},
        "model": {"kind": "bnn", "hidden": 4},
        "data": {"dataset": "iris", "partition": "classes", "node_classes": [[0], [1], [2]]},
        "protocol": {"kind": "dsvgd", "particles": 4, "local_iterations": 2},
        "metrics": {"record_every": 10},
    }
    bundled = gs.run(raw, plots=False)
    mine = copy.deepcopy(raw)
    del mine["data"]["dataset"]
    mine["data"]["path"] = str(path)
    own = gs.run(mine, plots=False)
    assert _tables_equal(bundled, own)


def test_parquet_and_npz_read_as_the_csv(tmp_path):
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(rng.standard_normal((30, 3)), columns=["u", "v", "w"])
    frame["target"] = rng.standard_normal(30)
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    np.savez(tmp_path / "t.npz", X=frame[["u", "v", "w"]].to_numpy(), y=frame["target"].to_numpy())
    csv = read_table(tmp_path / "t.csv", "target")
    parquet = read_table(tmp_path / "t.parquet", "target")
    npz = read_table(tmp_path / "t.npz")
    for other in (parquet, npz):
        assert np.array_equal(csv.X, other.X) and np.array_equal(csv.target(), other.target())
    assert parquet.feature_names == ("u", "v", "w") and npz.feature_names == ("x0", "x1", "x2")


BAD_FILES = {
    "missing": (None, "cannot read the file"),
    "unreadable": (b"\xff\xfe\x00garbage\n", "not a UTF-8 text file"),
    "no label": (b"a,b\n1,2\n3,4\n", "no label column 'label'"),
    "non-numeric": (b"a,b,label\n1,2,0\n3,x,1\n", "row 3, column 'b': 'x' is not a number"),
    "one row": (b"a,label\n1,0\n", "1 data rows: a data set needs at least 2"),
    "nan": (b"a,b,label\n1,2,0\nnan,4,1\n", "row 3, column 'a': 'nan' is not a finite number"),
    "nan label": (b"a,label\n1,0\n2,\n", "row 3, column 'label'"),
    "three labels": (b"a,label\n1,0\n2,1\n3,2\n", "needs exactly 2 distinct labels"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_is_one_line_naming_the_file(tmp_path, capsys, case):
    content, expected = BAD_FILES[case]
    path = tmp_path / "data.csv"
    if content is not None:
        path.write_bytes(content)
    err = validate_error(_logistic(path), tmp_path, capsys)
    assert "data.path" in err and str(path) in err and expected in err, err


def test_a_regression_target_must_be_a_number(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text("a,label\n1,low\n2,high\n3,low\n")
    err = validate_error(_linear(path), tmp_path, capsys)
    assert "data.path" in err and "must be a number" in err and "low" in err, err


def test_dataset_and_path_together_and_a_stray_label_column_are_errors(tmp_path, capsys):
    path = tmp_path / "bc.csv"
    _write_bundled("breast_cancer", path)
    err = validate_error(_logistic(path, dataset="breast_cancer"), tmp_path, capsys)
    assert "data.dataset" in err and "not both" in err
    err = validate_error(
        _logistic(None, dataset="breast_cancer", label_column="y"), tmp_path, capsys
    )
    assert "data.label_column" in err
    err = validate_error(_linear(path, noise=0.5), tmp_path, capsys)
    assert "data.noise" in err and "synthetic" in err


def test_a_relative_path_is_read_from_the_scenario_folder(tmp_path, capsys):
    from gossipsim.cli.parser import main
    from tests.helpers import to_toml

    _write_bundled("breast_cancer", tmp_path / "bc.csv")
    raw = _logistic(None)
    raw["data"]["path"] = "bc.csv"
    (tmp_path / "s.toml").write_text(to_toml(raw))
    assert main(["validate", str(tmp_path / "s.toml")]) == 0


def test_parquet_and_npz_errors_name_the_row_and_column(tmp_path):
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": ["1", "oops", "2"], "label": [0, 1, 0]})
    frame.to_parquet(tmp_path / "p.parquet")
    with pytest.raises(gs.ConfigError, match=r"row 1, column 'b': 'oops' is not a number"):
        read_table(tmp_path / "p.parquet")
    np.savez(tmp_path / "n.npz", X=np.array([[1.0, 2.0], [np.inf, 0.0]]), y=np.array([0, 1]))
    with pytest.raises(gs.ConfigError, match=r"row 1, column 'x0': .* is not a finite number"):
        read_table(tmp_path / "n.npz")
    np.savez(tmp_path / "m.npz", X=np.ones((3, 2)))
    with pytest.raises(gs.ConfigError, match=r"no array 'y'"):
        read_table(tmp_path / "m.npz")
    (tmp_path / "t.txt").write_text("a,label\n1,0\n")
    with pytest.raises(gs.ConfigError, match=r"unknown file type '.txt'"):
        read_table(tmp_path / "t.txt")


def test_a_bnn_on_a_file_of_real_labels_is_regression(tmp_path):
    """diabetes as a CSV: its target is whole numbers, so task = auto reads classes and
    task = "regression" is needed; then the tables equal the bundled diabetes's. A target with a
    fraction is regression under auto."""
    path = tmp_path / "diabetes.csv"
    _write_bundled("diabetes", path)
    raw: dict[str, Any] = {
        "scenario": {"name": "bnnr", "seed": 4, "runs": 2, "iterations": 20},
        "topology": {"kind": "complete", "nodes": 3},
        "model": {"kind": "bnn", "hidden": 4, "task": "regression"},
        "data": {"dataset": "diabetes"},
        "protocol": {"kind": "dsvgd", "particles": 4},
        "metrics": {"record_every": 10},
    }
    bundled = gs.run(raw, plots=False)
    mine = copy.deepcopy(raw)
    mine["data"] = {"path": str(path)}
    own = gs.run(mine, plots=False)
    assert "rmse" in own.metrics and _tables_equal(bundled, own)
    X, target, _ = _raw("diabetes")
    np.savez(tmp_path / "half.npz", X=X, y=target + 0.5)
    mine["model"] = {"kind": "bnn", "hidden": 4}
    mine["data"] = {"path": str(tmp_path / "half.npz")}
    assert "rmse" in gs.run(mine, plots=False).metrics
    mine["model"]["task"] = "classification"
    with pytest.raises(gs.ConfigError, match="model.task.*regression set"):
        gs.run(mine, plots=False)


def test_a_csv_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfa,label\n1,0\n2,1\n")
    assert read_table(path).feature_names == ("a",)
