"""Per-request censoring in the tables and the per-request summary as a DataFrame (issue 20, items
6 and 14)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
from tests.helpers import to_toml


def _study(**sections) -> dict:
    raw = {
        "scenario": {"name": "cens", "seed": 2, "runs": 30, "iterations": 120},
        "topology": {"kind": "karate"},
        "model": {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 5, "theta": 0.7},
        "unlearning": [
            {"node": 33, "at_iteration": 60},
            {"node": 16, "at_iteration": 110},  # near the end: often not served
            {"node": 5, "at_time": 119.5},  # before slot 121: never arrives
        ],
        "compute": {"seconds_per_iteration": 1.0},
        "metrics": {"tolerance": 1e-9},
        "sweep": {"scheduler.kind": ["metropolis-hastings", "simple-random-walk"]},
    }
    raw.update(sections)
    return raw


def test_served_and_censored_at_follow_from_the_latencies_and_the_run_length():
    res = gs.run(_study())
    req = res.requests.merge(res.runs[["variant", "run", "iterations"]], on=["variant", "run"])
    arrived = req["request_iteration"].notna()
    assert str(req["served"].dtype) == "boolean" and str(req["censored_at"].dtype) == "Int64"
    assert (
        req.loc[~arrived, "served"].isna().all() and req.loc[~arrived, "censored_at"].isna().all()
    )
    on = req[arrived]
    assert (on["served"] == on["removal_latency"].notna()).all()
    missing = on[["removal_latency", "latency", "retrain_latency"]].isna().any(axis=1)
    assert (on.loc[missing, "censored_at"] == on.loc[missing, "iterations"]).all()
    assert on.loc[~missing, "censored_at"].isna().all()
    # the study has both: served and censored requests
    assert on["served"].any() and (~on["served"]).any() and missing.any()


def test_the_per_request_summary_is_a_tidy_table_equal_to_summary_json(tmp_path):
    res = gs.run(_study(), out=tmp_path / "R", plots=False)
    table = res.request_summary()
    assert list(table.columns[:2]) == ["variant", "scheduler.kind"]
    assert str(table["scheduler.kind"].dtype) != "object"
    # 2 variants x 3 requests x 3 latencies
    assert len(table) == 18
    assert set(table["latency"]) == {"removal_latency", "latency", "retrain_latency"}
    summary = json.loads((tmp_path / "R" / "summary.json").read_text())
    for row in table.itertuples():
        entries = summary["variants"][row.variant]["per_request"]
        entry = next(e for e in entries if e["request"] == row.request)
        stats = entry[row.latency]
        assert row.observed == stats["observed"] and row.total == stats["total"]
        for name in ("km_median", "restricted_mean", "mean_of_observed"):
            a, b = getattr(row, name), stats[name]
            assert (b is None and np.isnan(a)) or a == pytest.approx(b), name
    # the censored removal latencies: the restricted mean counts them at the end of their run
    late = table[(table["request"] == 1) & (table["latency"] == "removal_latency")].iloc[0]
    rows = res.requests[
        (res.requests["variant"] == late["variant"]) & (res.requests["request"] == 1)
    ]
    assert late["observed"] == rows["served"].sum() < late["total"] == len(rows)
    # not served by slot 120: the latency exceeds 120 − 110 + 1, so min(latency, 12) = 12
    by_end = rows["removal_latency"].astype(float).fillna(120 - 110 + 2)
    assert late["restricted_to"] == 12
    assert late["restricted_mean"] == pytest.approx(by_end.mean())  # one censoring time: exact
    # the exact expectation goes with the removal latency only
    removal = table[table["latency"] == "removal_latency"]
    assert removal.loc[removal["request"] == 0, "expected"].notna().all()
    assert table.loc[table["latency"] != "removal_latency", "expected"].isna().all()


def test_without_a_retrain_baseline_nothing_is_said_of_retraining(tmp_path, capsys):
    raw = _study(protocol={"retrain_baseline": False})
    res = gs.run(raw)
    assert "retrain_latency" not in set(res.request_summary()["latency"])
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "R"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "request for node 33" in out and "retrain latency" not in out


def test_a_folder_without_the_new_columns_gets_them_on_loading(tmp_path):
    res = gs.run(_study(), out=tmp_path / "R", plots=False)
    folder = tmp_path / "R"
    for name in ("requests.csv",):
        table = pd.read_csv(folder / name).drop(columns=["served", "censored_at"])
        table.to_csv(folder / name, index=False)
    (folder / "requests.parquet").unlink(missing_ok=True)
    summary = json.loads((folder / "summary.json").read_text())
    for column in ("served", "censored_at"):
        del summary["columns"]["requests"][column]
    for key in ("files", "summary_sha256"):  # an older gossipsim recorded no checksums
        summary.pop(key, None)
    (folder / "summary.json").write_text(json.dumps(summary))
    back = gs.load_results(folder)
    pd.testing.assert_frame_equal(back.requests, res.requests)
