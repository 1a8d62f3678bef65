"""Results folders: CSV tables, and Parquet copies where pyarrow is installed."""

from __future__ import annotations

import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.errors import ConfigError
from gossipsim.results import writing
from tests.helpers import base_scenario

pytest.importorskip("pyarrow")


def _results() -> gs.Results:
    raw = base_scenario(
        scenario={"name": "p", "seed": 1, "runs": 20, "iterations": 120},
        topology={"kind": "ring", "nodes": 6},
        unlearning=[{"node": 2, "at_iteration": 40}],
    )
    return gs.run(raw)


def test_parquet_copies_hold_the_same_tables(tmp_path):
    res = _results()
    res.write(tmp_path)
    for stem, table in res.tables().items():
        back = pd.read_parquet(tmp_path / f"{stem}.parquet")
        pd.testing.assert_frame_equal(
            back, table.reset_index(drop=True), check_dtype=False, check_categorical=False
        )
        assert (tmp_path / f"{stem}.csv").is_file()
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert str(runs["cover_iteration"].dtype) == "Int64"  # types kept, unlike CSV


def test_without_parquet_stale_copies_are_removed(tmp_path, monkeypatch):
    res = _results()
    res.write(tmp_path)
    assert (tmp_path / "metrics.parquet").is_file()
    res.write(tmp_path, parquet=False)
    assert not list(tmp_path.glob("*.parquet"))
    monkeypatch.setattr(writing, "parquet_available", lambda: False)
    res.write(tmp_path)  # default: only where pyarrow is installed
    assert not list(tmp_path.glob("*.parquet"))
    with pytest.raises(ConfigError, match="pyarrow"):
        res.write(tmp_path, parquet=True)


def test_mixed_node_labels_become_strings_in_parquet():
    table = pd.DataFrame({"node": pd.array([3, "a", None], dtype=object), "x": [1.0, 2.0, 3.0]})
    ready = writing._parquet_ready(table)
    assert ready["node"].tolist()[:2] == ["3", "a"] and pd.isna(ready["node"].iloc[2])
    assert table["node"].tolist() == [3, "a", None]  # the caller's table is not modified
    same = table[["x"]]
    assert writing._parquet_ready(same) is same


def test_variant_column_is_categorical_in_the_sweep_order():
    res = _results()
    for table in res.tables().values():
        assert isinstance(table["variant"].dtype, pd.CategoricalDtype)
        assert list(table["variant"].cat.categories) == res.variants
    assert res.metrics["variant"].astype(str).tolist() == [res.variants[0]] * len(res.metrics)
    assert list(res.runs.columns[:2]) == ["variant", "run"]  # no sweep: no swept columns


def test_summaries_are_per_request_and_report_censoring(tmp_path, capsys):
    """Two requests for different nodes are summarised apart, each with its served count, exact
    expectation and, for the star's uncovered runs, the censoring-aware estimates; summary.json holds
    the same per-request entries."""
    import json

    from gossipsim.cli.parser import main
    from tests.helpers import base_scenario, to_toml

    raw = base_scenario(
        scenario={"name": "c", "seed": 3, "runs": 40, "iterations": 200},
        topology={"kind": "star", "nodes": 10},
        unlearning=[{"node": 0, "at_iteration": 20}, {"node": 5, "at_iteration": 30}],
    )
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "request for node" in line]
    assert len(lines) == 2 and "node 0 at slot 20" in lines[0] and "node 5 at slot 30" in lines[1]
    assert all("exact" in line and "/40 runs" in line for line in lines)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    variant = summary["variants"]["c"]
    runs = pd.read_csv(tmp_path / "o" / "runs.csv")
    cover = variant["cover"]
    assert cover["total"] == 40 and cover["observed"] == runs["cover_iteration"].notna().sum()
    assert 0 < cover["observed"] < 40  # some star runs cover within 200 slots, some do not
    assert "Kaplan–Meier median" in out and "biased low" in out
    assert cover["restricted_mean"] >= cover["mean_of_observed"]
    requests = pd.read_csv(tmp_path / "o" / "requests.csv")
    for entry in variant["per_request"]:
        rows = requests[requests["request"] == entry["request"]]
        served = rows["removal_latency"].notna().sum()
        assert entry["removal_latency"]["observed"] == served
        assert entry["removal_latency"]["mean_of_observed"] == pytest.approx(
            rows["removal_latency"].mean()
        )
        assert entry["expected_removal_latency"]["value"] > 0
