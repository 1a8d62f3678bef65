"""The vectorised unlearning batch (walks, protocol and retrain states, measurement across the
batch) gives the event engine's tables exactly, on random scenarios: several requests (the same
slot, the same node twice, slot 1, the last slot, a node that never held the token), nodes
without data, stop when done or not, with and without the retrain baseline, any record_every,
data drawn per run, every scheduler, start and conjugate model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
import gossipsim.execution.vectorized.driver as fastpath
from gossipsim.measurement.batch import _recorded_many
from gossipsim.measurement.metrics import recorded_slots

MODELS = [
    ({"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}}, {"theta": 0.7}),
    ({"kind": "gamma-poisson", "prior": {"shape": 2, "rate": 1}}, {"mean": 3.0}),
    ({"kind": "normal-normal", "prior": {"mean": 0, "variance": 4}, "sigma": 1.5}, {"mean": 1.0}),
    (
        {"kind": "dirichlet-categorical", "prior": {"alpha": [1, 2, 1]}},
        {"probs": [0.2, 0.5, 0.3]},
    ),
]
TOPOLOGIES = [
    {"kind": "complete", "nodes": 6},
    {"kind": "ring", "nodes": 7},
    {"kind": "star", "nodes": 6},
    {"kind": "karate"},
    {"kind": "path", "nodes": 5},
]


def random_scenario(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    topology = TOPOLOGIES[rng.integers(len(TOPOLOGIES))]
    nodes = 34 if topology["kind"] == "karate" else topology["nodes"]
    model, params = MODELS[rng.integers(len(MODELS))]
    iterations = int(rng.choice([60, 150, 400]))
    stop = bool(rng.random() < 0.6)
    requests = []
    chosen = rng.permutation(nodes)[: int(rng.integers(1, 5))]
    for node in chosen.tolist():
        at = int(rng.choice([1, 2, int(rng.integers(3, iterations)), iterations]))
        requests.append({"node": node, "at_iteration": at})
    if len(requests) > 1 and rng.random() < 0.5:  # two requests in one slot
        requests[-1]["at_iteration"] = requests[0]["at_iteration"]
    points = [int(p) for p in rng.choice([0, 3, 20], size=nodes, p=[0.2, 0.3, 0.5])]
    data = {"points_per_node": points, **params}
    if rng.random() < 0.3:
        data["draw"] = "per-run"
    scheduler = {
        "kind": str(rng.choice(["metropolis-hastings", "simple-random-walk", "uniform"])),
        "start": str(rng.choice(["uniform", "stationary"])),
    }
    return {
        "scenario": {
            "name": "u",
            "seed": seed,
            "runs": int(rng.integers(16, 40)),
            "iterations": iterations,
            "stop_when_done": stop,
        },
        "topology": topology,
        "model": model,
        "data": data,
        "scheduler": scheduler,
        "protocol": {"kind": "gfvl", "retrain_baseline": bool(rng.random() < 0.7)},
        "unlearning": requests,
        "compute": {"seconds_per_iteration": float(rng.choice([0.0, 0.001]))},
        "links": {"rate_bps": 1e6, "latency_s": float(rng.choice([0.0, 0.003]))},
        "metrics": {
            "tolerance": float(rng.choice([1e-12, 1e-6, 0.05])),
            "record_every": int(rng.choice([1, 7, 50])),
        },
    }


def _same(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True, obj=what)


@pytest.mark.parametrize("seed", range(24))
def test_random_unlearning_scenarios_give_the_event_engine_s_tables(monkeypatch, seed):
    raw = random_scenario(seed)
    calls = []
    real = fastpath.unlearning_batch
    monkeypatch.setattr(
        fastpath, "unlearning_batch", lambda w, runs: calls.append(runs) or real(w, runs)
    )
    monkeypatch.setattr(fastpath, "LEARNING_BATCH", 7)  # several batches, one of them short
    event = gs.run(raw, engine="event")
    vectorized = gs.run(raw, engine="vectorized")
    assert calls, "the vectorised unlearning batch was not used"
    for name in ("runs", "requests", "metrics", "visits"):
        _same(getattr(event, name), getattr(vectorized, name), f"{name} ({raw})")


def test_recorded_slots_of_many_runs_are_those_of_each_run():
    rng = np.random.default_rng(3)
    for every in (1, 3, 10):
        n = rng.integers(1, 60, size=40)
        extra = rng.integers(-2, 70, size=(40, 5))
        extra[rng.random(extra.shape) < 0.3] = np.iinfo(np.int64).max
        rows, slots = _recorded_many(n, every, extra)
        for b in range(40):
            wanted = [int(s) for s in extra[b] if 1 <= s < np.iinfo(np.int64).max]
            assert slots[rows == b].tolist() == recorded_slots(int(n[b]), every, wanted).tolist()


@pytest.mark.parametrize("seed", [5, 11, 17])
def test_the_batch_measures_what_measure_gives_each_run(seed):
    """measure_batch's columns against the rows measure() gives each run of the event engine."""
    from gossipsim.execution.runner import build_world, run_seed, simulate_run

    raw = random_scenario(seed)
    runs = list(range(raw["scenario"]["runs"]))
    world = build_world(gs.parse_study(raw).variants[0].scenario)
    (batch,) = fastpath.simulate_runs(world, runs)
    assert batch.request_columns and not batch.run_rows  # measured as columns
    for run in runs:
        out = simulate_run(world, run, run_seed(world.scenario.run.seed, run))  # measure()
        mine = batch.metric_runs == run
        assert list(batch.metrics) == list(out.metrics)
        for name, column in out.metrics.items():
            np.testing.assert_array_equal(batch.metrics[name][mine], column, err_msg=name)
        b = batch.runs.index(run)
        assert set(batch.run_columns) == set(out.run_row)
        for name, value in out.run_row.items():
            np.testing.assert_array_equal(batch.run_columns[name][b], value, err_msg=name)
        rows = batch.request_columns["run"] == run
        for name in out.request_rows[0]:
            got = batch.request_columns[name][rows].tolist()
            want = [row[name] for row in out.request_rows]
            assert pd.Series(got, dtype=object).equals(pd.Series(want, dtype=object)), name
