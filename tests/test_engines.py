"""The vectorised engine reproduces the event engine exactly (same walks, same tables)."""

from __future__ import annotations

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.cli import main
from gossipsim.fastpath import _block
from tests.helpers import base_scenario, to_toml

CASES = {
    "learning, record_every": base_scenario(
        scenario={"name": "e", "seed": 1, "runs": 40, "iterations": 250},
        metrics={"tolerance": 1e-10, "record_every": 7},
        topology={"kind": "star", "nodes": 8},
    ),
    "stop when done, links": base_scenario(
        scenario={"name": "e", "seed": 2, "runs": 40, "iterations": 5000, "stop_when_done": True},
        topology={"kind": "karate"},
        compute={"seconds_per_iteration": 0.003},
        links={"rate_bps": 1e5, "latency_s": 0.01},
    ),
    "requests, retrain": base_scenario(
        scenario={"name": "e", "seed": 3, "runs": 40, "iterations": 600, "stop_when_done": True},
        topology={"kind": "ring", "nodes": 9},
        unlearning=[
            {"node": 0, "at_iteration": 1},
            {"node": 4, "at_iteration": 200},
            {"node": 5, "at_iteration": 200},
        ],
    ),
    "per-run data, simple random walk": base_scenario(
        scenario={"name": "e", "seed": 4, "runs": 30, "iterations": 300},
        data={"points_per_node": 20, "theta": 0.3, "draw": "per-run"},
        scheduler={"kind": "simple-random-walk", "start": "stationary"},
        topology={"kind": "florentine"},
    ),
    "uniform scheduler, dirichlet": base_scenario(
        scenario={"name": "e", "seed": 5, "runs": 30, "iterations": 200},
        model={"kind": "dirichlet-categorical", "prior": {"alpha": [1, 1, 2]}},
        data={"points_per_node": 10, "probs": [0.2, 0.3, 0.5]},
        scheduler={"kind": "uniform"},
    ),
    "linear regression": {
        "scenario": {"name": "e", "seed": 6, "runs": 10, "iterations": 200},
        "topology": {"kind": "complete", "nodes": 6},
        "model": {"kind": "linear-regression", "prior": {"mean": 0, "variance": 2}},
        "data": {"dataset": "diabetes"},
        "unlearning": [{"node": 1, "at_iteration": 100}],
        "metrics": {"tolerance": 1e-9, "record_every": 10},
    },
}


@pytest.mark.parametrize("name", list(CASES))
def test_engines_give_identical_tables(tmp_path, capsys, name):
    path = tmp_path / "s.toml"
    path.write_text(to_toml(CASES[name]))
    for engine in ("event", "vectorized"):
        assert (
            main(
                [
                    "run",
                    str(path),
                    "--out",
                    str(tmp_path / engine),
                    "--no-plots",
                    "--engine",
                    engine,
                ]
            )
            == 0
        )
    for table in ("metrics.csv", "runs.csv", "requests.csv", "visits.csv"):
        assert (tmp_path / "event" / table).read_bytes() == (
            tmp_path / "vectorized" / table
        ).read_bytes(), table


def test_vectorized_engine_agrees_with_theory():
    """Statistical check of the fast path on its own: complete K = 10, mean cover 25.46 moves."""
    raw = base_scenario(scenario={"name": "t", "seed": 9, "runs": 2000, "iterations": 400})
    moves = gs.run(raw, engine="vectorized").runs["cover_iteration"].to_numpy(dtype=float) - 1
    assert abs(moves.mean() - 25.4607) < 4 * moves.std(ddof=1) / np.sqrt(moves.size)


def test_auto_picks_per_variant_and_says_why(tmp_path, capsys):
    raw = base_scenario(scenario={"name": "t", "seed": 1, "runs": 40, "iterations": 50})
    raw["sweep"] = {"model": [{"kind": "beta-bernoulli"}, {"kind": "beta-exponential"}]}
    raw["data"] = {"points_per_node": 5}
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "vectorized for 1 variant(s)" in out and "event (model 'beta-exponential'" in out
    raw["scenario"]["runs"] = 3  # too few runs to pay for vectorised steps
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    assert "vectorized" not in capsys.readouterr().out


def test_vectorized_refuses_what_it_cannot_run(tmp_path, capsys):
    raw = base_scenario(
        scenario={"name": "t", "seed": 1, "runs": 2, "iterations": 50},
        unlearning=[{"node": 1, "at_time": 0.5}],
    )
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--engine", "vectorized"]) == 2
    err = capsys.readouterr().err
    assert "--engine" in err and "simulated time" in err and len(err.strip().splitlines()) == 1
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0  # auto: event


def test_partial_blocks_leave_the_generator_where_a_full_block_would():
    a = np.random.default_rng(3)
    b = np.random.default_rng(3)
    full = a.random(8192)[:100]
    part = _block(b, 100)
    np.testing.assert_array_equal(full, part)
    np.testing.assert_array_equal(a.random(5), b.random(5))
