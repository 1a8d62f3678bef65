"""Finished runs are committed in batches: one part per batch of the vectorized engine; single runs
of the event engine held back and committed together by count or time, at the end of a sweep and
when it is interrupted; the tables are those of runs committed one by one."""

from __future__ import annotations

import pytest

import gossipsim as gs
from gossipsim.execution import executors
from gossipsim.execution.executors import RunFailure
from gossipsim.execution.runner import build_world, run_seed, simulate_run
from gossipsim.results import store
from gossipsim.results.assembly import collect
from gossipsim.results.status import status
from gossipsim.results.store import RunStore
from tests.helpers import base_scenario

TABLES = ("metrics.csv", "runs.csv", "requests.csv", "visits.csv", "failures.csv", "summary.json")


def _study(runs: int = 12) -> gs.Study:
    raw = base_scenario(
        scenario={"name": "c", "seed": 9, "runs": runs, "iterations": 80},
        unlearning=[{"node": 3, "at_iteration": 40}],
    )
    raw["sweep"] = {"topology.kind": ["ring", "complete"]}
    return gs.parse_study(raw)


def _outcome(study: gs.Study, variant: int, run: int):
    world = build_world(study.variants[variant].scenario)
    return simulate_run(world, run, run_seed(world.scenario.run.seed, run))


class Clock:
    """time.monotonic() of the store, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(store.time, "monotonic", fake)
    return fake


def _parts(out) -> list[list[int]]:
    return sorted(
        store.read_header(p)["runs"] for p in (out / ".gossipsim" / "parts").glob("*.part")
    )


def test_runs_are_committed_by_count(tmp_path, monkeypatch, clock):
    monkeypatch.setattr(store, "COMMIT_RUNS", 3)
    study = _study()
    out = tmp_path / "o"
    s = RunStore(out, study)
    for run in range(7):
        s.save(0, _outcome(study, 0, run))
        clock.now += 0.01
    assert _parts(out) == [[0, 1, 2], [3, 4, 5]]  # run 6 held back
    assert status(out)["done"] == 6
    s.commit()
    assert _parts(out) == [[0, 1, 2], [3, 4, 5], [6]]
    assert s.finished() == {(0, r) for r in range(7)}


def test_runs_are_committed_by_time_and_slow_runs_one_by_one(tmp_path, clock):
    study = _study()
    out = tmp_path / "o"
    s = RunStore(out, study)
    for run in range(5):  # a run every 0.3 s: the first waits 0.9 s, then 1.2 s: committed
        clock.now += 0.3
        s.save(0, _outcome(study, 0, run))
    assert _parts(out) == [[0, 1, 2, 3, 4]]
    clock.now += 1.5  # a slow run: committed as soon as it finishes
    s.save(0, _outcome(study, 0, 5))
    assert _parts(out) == [[0, 1, 2, 3, 4], [5]]


def test_a_batch_is_one_part_at_once_and_parts_are_per_variant(tmp_path, clock):
    from gossipsim.execution.vectorized.driver import simulate_runs

    study = _study()
    out = tmp_path / "o"
    s = RunStore(out, study)
    s.save(1, _outcome(study, 1, 0))
    s.save(0, _outcome(study, 0, 2))
    s.save(0, RunFailure(run=0, seed=1, error="ValueError: x"))
    s.save(0, RunFailure(run=1, seed=2, error="ValueError: y"))
    world = build_world(study.variants[1].scenario)
    (batch,) = simulate_runs(world, [4, 5, 6])
    s.save(1, batch)
    assert _parts(out) == [[4, 5, 6]]  # the batch at once, the single runs held back
    s.commit()
    names = sorted(p.name for p in (out / ".gossipsim" / "parts").glob("*.part"))
    assert names == [
        "v0000-r000000.part",  # failures 0 and 1
        "v0000-r000002.part",
        "v0001-r000000.part",
        "v0001-r000004.part",
    ]
    info = status(out)
    assert (info["done"], info["failed"]) == (5, 2)


def test_grouped_parts_give_the_tables_of_single_runs(tmp_path, monkeypatch):
    """Runs committed in groups (out of order, as a pool returns them, with a failure among them)
    merge into the same tables as the runs collected one by one."""
    monkeypatch.setattr(store, "COMMIT_RUNS", 5)
    study = _study()
    single = [(v, _outcome(study, v, r)) for v in range(2) for r in range(12)]
    single[7] = (0, RunFailure(run=7, seed=3, error="RuntimeError: z"))
    expected = collect(study, single)
    s = RunStore(tmp_path / "o", study)
    order = [*single[12:], *single[5:12], *single[:5]]
    order[3], order[15] = order[15], order[3]
    for variant, outcome in order:
        s.save(variant, outcome)
    s.commit()
    got = collect(study, s.load())
    for name in ("runs", "requests", "metrics", "failures"):
        a, b = getattr(expected, name), getattr(got, name)
        assert a.equals(b), name
        assert list(a.dtypes) == list(b.dtypes), name
    assert expected.visits.equals(got.visits)


def test_an_interrupted_sweep_commits_the_runs_it_holds(tmp_path, monkeypatch):
    """Ctrl-C after 9 runs: the runs held back are committed before the interrupt goes on, and
    --resume completes the tables of an uninterrupted sweep."""
    monkeypatch.setattr(store, "COMMIT_SECONDS", 3600.0)  # nothing committed before the interrupt
    study = _study()
    whole = tmp_path / "whole"
    gs.run(study, engine="event", out=whole, plots=False)
    real = executors.run_unit
    calls = []

    def interrupted(study, unit):
        calls.append(unit)
        if len(calls) == 10:
            raise KeyboardInterrupt
        return real(study, unit)

    out = tmp_path / "o"
    with monkeypatch.context() as patch:
        patch.setattr(executors, "run_unit", interrupted)
        with pytest.raises(KeyboardInterrupt):
            gs.run(study, engine="event", out=out, plots=False)
    assert status(out)["done"] == 9
    assert len(_parts(out)) == 1
    gs.run(study, engine="event", out=out, resume=True, plots=False)
    for name in TABLES:
        assert (whole / name).read_bytes() == (out / name).read_bytes(), name
