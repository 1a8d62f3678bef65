"""The vectorised engine reproduces the event engine exactly (same walks, same tables)."""

from __future__ import annotations

import numpy as np
import pytest

import gossipsim as gs
from gossipsim.cli.parser import main
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
    raw["model"] = {"kind": "beta-exponential"}
    raw["sweep"] = {"data.draw": ["once", "per-run"]}
    raw["data"] = {"points_per_node": 5, "theta": 0.5}
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "vectorized for 1 variant(s)" in out and "data are drawn per run" in out
    raw["scenario"]["runs"] = 3  # too few runs to pay for vectorised steps
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    assert "vectorized" not in capsys.readouterr().out


def test_vectorized_refuses_what_it_cannot_run(tmp_path, capsys):
    raw = base_scenario(
        scenario={"name": "t", "seed": 1, "runs": 2, "iterations": 50},
        compute={"seconds_per_iteration": 0.1},
        unlearning=[{"node": 1, "at_time": 0.5}],
    )
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--engine", "vectorized"]) == 2
    err = capsys.readouterr().err
    assert "--engine" in err and "simulated time" in err and len(err.strip().splitlines()) == 1
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 0  # auto: event


def test_batches_and_single_runs_merge_in_run_order():
    """A sweep resumed with another engine holds batches and single runs interleaved."""
    from gossipsim.execution.runner import build_world, run_seed, simulate_run
    from gossipsim.execution.vectorized.driver import simulate_runs
    from gossipsim.results.assembly import collect

    study = gs.parse_study(CASES["learning, record_every"])
    world = build_world(study.variants[0].scenario)
    base = world.scenario.run.seed
    single = [(0, simulate_run(world, r, run_seed(base, r))) for r in range(6)]
    (batch,) = simulate_runs(world, [0, 2, 4])
    mixed = [(0, batch), single[1], single[3], single[5]]
    expected = collect(study, single)
    got = collect(study, mixed)
    assert got.metrics.equals(expected.metrics) and got.runs.equals(expected.runs)


def test_resume_with_the_other_engine_gives_the_same_tables(tmp_path):
    from gossipsim.results.status import status
    from gossipsim.results.store import RunStore

    study = gs.parse_study(CASES["learning, record_every"])
    whole = gs.run(study, engine="event")
    # an interrupted event-engine sweep: runs 0..9 and 25 committed
    from gossipsim.execution.runner import build_world, run_seed, simulate_run

    world = build_world(study.variants[0].scenario)
    store = RunStore(tmp_path / "o", study)
    for r in [*range(10), 25]:
        store.save(0, simulate_run(world, r, run_seed(world.scenario.run.seed, r)))
    store.commit()  # single runs are held back until then (or a count or time bound)
    assert status(tmp_path / "o")["done"] == 11
    resumed = gs.run(study, engine="vectorized", out=tmp_path / "o", resume=True, plots=False)
    assert resumed.metrics.equals(whole.metrics) and resumed.runs.equals(whole.runs)


def test_status_counts_the_runs_of_a_committed_batch(tmp_path):
    from gossipsim.execution.runner import build_world
    from gossipsim.execution.vectorized.driver import simulate_runs
    from gossipsim.results.status import status
    from gossipsim.results.store import RunStore

    study = gs.parse_study(CASES["learning, record_every"])
    world = build_world(study.variants[0].scenario)
    store = RunStore(tmp_path / "o", study)
    (batch,) = simulate_runs(world, list(range(7)))
    store.save(0, batch)
    assert store.finished() == {(0, r) for r in range(7)}
    info = status(tmp_path / "o")
    assert (info["done"], info["failed"], info["remaining"]) == (7, 0, 33)


@pytest.mark.slow
def test_engines_agree_statistically_on_independent_seeds():
    """Two-sample tests (Mann-Whitney U, level 0.001 each) between the event engine at one seed and
    the vectorized engine at another: cover iteration, convergence iteration, unlearning latency.
    (At the same seed the tables are identical, tested above; this compares the distributions.)
    Slow set: the fast suite runs the same code path, both engines on a ring with requests, in
    test_engines_give_identical_tables["requests, retrain"], whose tables must agree exactly."""
    from scipy.stats import mannwhitneyu

    raw = base_scenario(
        scenario={"name": "s", "seed": 0, "runs": 300, "iterations": 400},
        topology={"kind": "ring", "nodes": 8},
        unlearning=[{"node": 3, "at_iteration": 100}],
    )
    event = gs.run(raw, engine="event", seed=101)
    vectorized = gs.run(raw, engine="vectorized", seed=202)
    for table, column in [
        ("runs", "cover_iteration"),
        ("runs", "convergence_iteration"),
        ("requests", "latency"),
    ]:
        a = getattr(event, table)[column].dropna().to_numpy(dtype=float)
        b = getattr(vectorized, table)[column].dropna().to_numpy(dtype=float)
        assert min(a.size, b.size) > 250, column
        assert mannwhitneyu(a, b).pvalue > 1e-3, column


@pytest.mark.parametrize("budget", [5_000, 1_000])
def test_memory_bounded_batches_give_the_same_tables(monkeypatch, budget):
    """Narrow batches (runs × slots capped): 2 learning batches of 20, or 10 protocol batches of 4."""
    from gossipsim.execution.vectorized import capability

    raw = CASES["learning, record_every"]
    whole = gs.run(raw, engine="event")
    monkeypatch.setattr(capability, "MAX_BATCH_SLOTS", budget)
    split = gs.run(raw, engine="vectorized")
    assert split.metrics.equals(whole.metrics) and split.runs.equals(whole.runs)
    assert split.visits.equals(whole.visits)
    # auto leaves such long runs to the event engine when 16 of them do not fit
    auto = gs.run(raw, engine="auto")
    note = auto.engines[auto.variants[0]]
    assert note.startswith("vectorized") == (budget == 5_000)
    if budget == 1_000:
        assert "too long to batch" in note
