"""A user's own data set given from Python: ``{"data": {"table": (X, y)}}`` or a pandas DataFrame
with ``data.label_column``, for the models that read tables (linear-regression,
logistic-regression, bnn). The same numbers as a file (``data.path``, written here) give the same
tables, in this process and on two workers; the results folder records the table by its hash and
keeps a copy; bad input is one ConfigError line naming data.table."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.data.datasets import _raw


def _logistic(**data: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "own", "seed": 5, "runs": 3, "iterations": 60},
        "topology": {"kind": "complete", "nodes": 6},
        "model": {"kind": "logistic-regression", "family": "gaussian-diagonal"},
        "data": {"test_fraction": 0.25, "partition": "dirichlet", "concentration": 1.0, **data},
        "protocol": {"kind": "gfvl", "estimator": "exact", "learning_rate": 0.3},
        "metrics": {"tolerance": 0.05, "record_every": 20},
    }


def _breast_cancer() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    X, target, names = _raw("breast_cancer")
    return X, target.astype(np.int64), names


def _write_csv(path: Path, X: np.ndarray, y: np.ndarray, names: tuple[str, ...]) -> None:
    """Every number written exactly (repr), the label column first."""
    with path.open("w") as f:
        f.write(",".join(["label", *names]) + "\n")
        for row, t in zip(X, y, strict=True):
            f.write(",".join([repr(int(t)), *(repr(float(v)) for v in row)]) + "\n")


def _tables_equal(a: gs.Results, b: gs.Results) -> bool:
    return a.metrics.equals(b.metrics) and a.requests.equals(b.requests) and a.runs.equals(b.runs)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_table_from_python_gives_the_tables_of_the_same_file(tmp_path, workers):
    """(X, y), a DataFrame and a CSV file of the same numbers: bit-identical tables, on one worker
    and on two (the table travels to the worker processes with the study)."""
    X, y, names = _breast_cancer()
    path = tmp_path / "bc.csv"
    _write_csv(path, X, y, names)
    from_file = gs.run(_logistic(path=str(path)), plots=False, workers=workers)
    from_arrays = gs.run(_logistic(table=(X, y)), plots=False, workers=workers)
    frame = pd.DataFrame(X, columns=list(names)).assign(diagnosis=y)
    from_frame = gs.run(
        _logistic(table=frame, label_column="diagnosis"), plots=False, workers=workers
    )
    assert _tables_equal(from_file, from_arrays)
    assert _tables_equal(from_file, from_frame)
    if workers == 2:
        assert _tables_equal(from_arrays, gs.run(_logistic(table=(X, y)), plots=False))


def test_linear_regression_and_bnn_take_a_table(tmp_path):
    X, target, _ = _raw("diabetes")
    raw = _logistic(table=(X, target))
    raw["model"] = {"kind": "linear-regression", "sigma": 1.0}
    raw["protocol"] = {"kind": "gfvl"}
    raw["data"] = {"test_fraction": 0.25, "table": (X, target)}
    path = tmp_path / "d.npz"
    np.savez(path, X=X, y=target)
    filed = copy.deepcopy({k: v for k, v in raw.items() if k != "data"})
    filed["data"] = {"test_fraction": 0.25, "path": str(path)}
    assert _tables_equal(gs.run(raw, plots=False), gs.run(filed, plots=False))
    Xi, ti, _ = _raw("iris")
    bnn: dict[str, Any] = {
        "scenario": {"name": "bnn", "seed": 2, "runs": 2, "iterations": 20},
        "topology": {"kind": "complete", "nodes": 3},
        "model": {"kind": "bnn", "hidden": 4},
        "data": {"table": (Xi, np.array(["a", "b", "c"])[ti.astype(int)]), "partition": "classes",
                 "node_classes": [[0], [1], [2]]},
        "protocol": {"kind": "dsvgd", "particles": 4, "local_iterations": 2},
        "metrics": {"record_every": 10},
    }  # fmt: skip
    iris = copy.deepcopy({k: v for k, v in bnn.items() if k != "data"})
    iris["data"] = {"dataset": "iris", "partition": "classes", "node_classes": [[0], [1], [2]]}
    assert _tables_equal(gs.run(bnn, plots=False), gs.run(iris, plots=False))


def test_the_table_is_copied_and_recorded_by_its_hash(tmp_path):
    X, y, _ = _breast_cancer()
    X = X.copy()
    study = gs.parse_study(_logistic(table=(X, y)))
    described = study.raw["data"]["table"]
    assert described.startswith("in-memory table: 569 rows, 30 features, (X, y), sha256 ")
    X[0, 0] += 1.0  # the caller's array changed afterwards: the study keeps its copy
    assert not np.array_equal(study.table.X, X)
    again = gs.parse_study(_logistic(table=(X, y))).raw["data"]["table"]
    assert again != described  # other numbers, another hash (and so another fingerprint)
    # a key replaced keeps the table; replacing the table describes the new one
    assert study.replace("scenario.runs", 2).raw["data"]["table"] == described
    assert study.replace("data.table", (X, y)).raw["data"]["table"] == again


def test_results_folder_records_the_table_and_resumes_only_with_it(tmp_path):
    X, y, _ = _breast_cancer()
    raw = _logistic(table=(X, y))
    out = tmp_path / "out"
    res = gs.run(raw, plots=False, out=out)
    record = json.loads((out / ".gossipsim" / "study.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    digest = record["inputs"]["data.table=in-memory"]
    assert summary["scenario"]["data"]["table"].endswith(f"sha256 {digest}")
    assert (out / "data" / "table.npz").is_file()  # a copy, as graphs given from Python
    loaded = gs.load_results(out)
    assert loaded.metrics.equals(res.metrics) and loaded.study.table is not None
    again = gs.run(raw, plots=False, out=out, resume=True)  # the same data: read back
    assert again.metrics.equals(res.metrics)
    other = X.copy()
    other[3, 2] *= 2
    with pytest.raises(gs.ConfigError, match="another scenario"):
        gs.run(_logistic(table=(other, y)), plots=False, out=out, resume=True)


@pytest.mark.parametrize(
    ("table", "extra", "expected"),
    [
        ("1d", {}, "X must be rows x features and y one label per row"),
        ("short-y", {}, "got shapes (40, 2) and (39,)"),
        ("nan", {}, "row 3, column 'x1': nan is not a finite number"),
        ("text", {}, "is not a number"),
        ("one-class", {}, "a binary model needs exactly 2 distinct labels"),
        ("frame", {}, "no label column 'label' (columns: a, b, target)"),
        ("frame", {"label_column": "nope"}, "no label column 'nope'"),
        ("number", {}, "must be (X, y)"),
        ("xy", {"label_column": "y"}, "data.label_column: applies to a DataFrame"),
        ("xy", {"path": "x.csv"}, "give one of data.path (a file) and data.table"),
        ("xy", {"dataset": "iris"}, "data.dataset: give one of data.dataset"),
    ],
)
def test_bad_tables_are_one_line_naming_the_key(table, extra, expected):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 2))
    y = (X[:, 0] > 0).astype(int)
    values: dict[str, Any] = {
        "1d": (X[:, 0], y),
        "short-y": (X, y[:-1]),
        "nan": (np.where((np.arange(40)[:, None] == 3) & (np.arange(2) == 1), np.nan, X), y),
        "text": (np.array([["1", "a"]] * 40, dtype=object), y),
        "one-class": (X, np.zeros(40)),
        "frame": pd.DataFrame(X, columns=["a", "b"]).assign(target=y),
        "number": 3,
        "xy": (X, y),
    }
    with pytest.raises(gs.ConfigError) as info:
        gs.run(_logistic(table=values[table], **extra), plots=False)
    message = str(info.value)
    assert "\n" not in message and expected in message, message
    assert message.startswith(("data.table", "data.label_column", "data.dataset")), message


def test_models_that_read_no_tables_and_sweeps_over_tables_are_refused():
    X = np.random.default_rng(0).standard_normal((20, 2))
    y = (X[:, 0] > 0).astype(int)
    raw = _logistic(table=(X, y))
    raw["model"] = {"kind": "beta-bernoulli"}
    with pytest.raises(gs.ConfigError, match=r"^data\.table: model 'beta-bernoulli' does not read"):
        gs.parse_study(raw)
    swept = _logistic()
    swept["sweep"] = {"data.table": [(X, y), (X, 1 - y)]}
    with pytest.raises(gs.ConfigError, match=r"^sweep\.data\.table: a sweep over tables"):
        gs.parse_study(swept)
    with pytest.raises(gs.ConfigError, match=r"^data\.table: takes \(X, y\)"):
        gs.parse_study(_logistic(table="in-memory table: 20 rows"))
