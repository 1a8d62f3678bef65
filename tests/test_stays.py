"""Drawn stays (``[scheduler] stays = "drawn"``, issue 23 item 3): walks drawn stay by stay agree in
distribution with the exact cover and hitting times gossipsim computes (4 standard errors) and with
stepped walks; a stay's slots, time and bits are accounted as the definitions say; runs depend on
their seed alone (any batch, any number of workers); bad input is one line."""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
import pytest

import gossipsim as gs
import gossipsim.execution.vectorized.driver as fastpath
from gossipsim import cover as ct
from gossipsim.api import check
from gossipsim.cli.parser import main
from gossipsim.engine.slottables import SlotCosts, StaySlots
from gossipsim.errors import ConfigError
from gossipsim.scheduling import scheduler_for
from gossipsim.study.scenario import parse_study
from tests.helpers import to_toml

MH = "metropolis-hastings"


def scenario(
    topology: dict[str, Any],
    runs: int,
    *,
    stays: str = "drawn",
    seed: int = 3,
    iterations: int = 10**7,
    requests: list[dict[str, Any]] | None = None,
    stop: bool = True,
    every: int = 1000,
    scheduler: str = MH,
    **sections: Any,
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "scenario": {
            "name": "stays",
            "seed": seed,
            "runs": runs,
            "iterations": iterations,
            "stop_when_done": stop,
        },
        "topology": topology,
        "model": {"kind": "beta-bernoulli", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 5, "theta": 0.7},
        "scheduler": {"kind": scheduler, "stays": stays},
        "metrics": {"record_every": every},
    }
    if requests:
        raw["unlearning"] = requests
    raw.update(sections)
    return raw


def run_all(raw: dict[str, Any], **options: Any) -> gs.Results:
    """``gs.run``, checking that every run of every variant finished (none failed)."""
    res = gs.run(raw, **options)
    assert res.failures.empty, res.failures["error"].iloc[0]
    expected = raw["scenario"]["runs"] * len(res.variants)
    assert len(res.runs) == expected
    return res


def within_4se(samples: np.ndarray, exact: float) -> tuple[bool, str]:
    x = np.asarray(samples, dtype=float)
    se = x.std(ddof=1) / math.sqrt(x.size)
    return abs(x.mean() - exact) <= 4 * se, f"mean {x.mean():.4g}, exact {exact:.6g}, se {se:.3g}"


def graph_of(topology: dict[str, Any]) -> Any:
    """The graph a scenario with this topology runs on."""
    return check(parse_study(scenario(topology, 1)))[0].indexed


# --------------------------------------------------------------------------- the stay's law


def test_stay_lengths_are_geometric_by_inversion() -> None:
    """On an even grid of N uniforms the share of stays of at most n slots is P(length ≤ n) =
    1 − (1 − p)^n to within 1/N (the inverse CDF); p = 1 gives one slot; a cap bounds the length."""
    g = graph_of({"kind": "star", "nodes": 5})
    chain = scheduler_for(MH).jump_chain(g)
    p = float(chain.pmove[1])
    assert p == pytest.approx(0.25)  # a leaf accepts the hub with probability 1/4
    grid = (np.arange(200_000) + 0.5) / 200_000
    lengths = chain.stay_lengths(np.ones(grid.size, dtype=np.int64), grid, 10**9)
    for n in (1, 2, 3, 10, 40):
        assert abs(np.mean(lengths <= n) - (1 - (1 - p) ** n)) <= 1 / grid.size
    assert lengths.min() == 1
    hub = np.zeros(3, dtype=np.int64)
    assert chain.stay_lengths(hub, np.array([0.0, 0.5, 1 - 2**-53]), 10**9).tolist() == [1, 1, 1]
    capped = chain.stay_lengths(np.array([1]), np.array([1 - 2**-53]), 7)
    assert capped[0] == 8  # beyond the run's slots: no exact length needed


def test_stay_slots_account_time_and_bits_by_hand() -> None:
    """A run holding node 2 in slots 1-3, node 0 in slot 4, node 1 from slot 5: slot i ends at
    i·c + (moves before i)·hop, starts c earlier, and has sent (moves before i)·bits."""
    walk = StaySlots(
        rows=np.array([0, 0, 0]),
        starts=np.array([1, 4, 5]),
        holders=np.array([2, 0, 1]),
        hops=np.array([0, 1, 2]),
        columns=9,
        costs=SlotCosts(0.5, hop_seconds=0.25, hop_bits=128.0),
        per_run_visits=np.array([[1, 5, 3]]),
    )
    rows = np.zeros(6, dtype=np.int64)
    slots = np.array([1, 3, 4, 5, 6, 9])
    assert walk.holder(rows, slots).tolist() == [2, 2, 0, 1, 1, 1]
    assert walk.end_time(rows, slots).tolist() == [0.5, 1.5, 2.25, 3.0, 3.5, 5.0]
    assert walk.start_time(rows, slots).tolist() == [0.0, 1.0, 1.75, 2.5, 3.0, 4.5]
    assert walk.bits(rows, slots).tolist() == [0.0, 0.0, 128.0, 256.0, 256.0, 256.0]
    assert walk.visits(np.array([9])).tolist() == [1, 5, 3]


GRAPHS = {
    "star": nx.star_graph(4),
    "ring": nx.cycle_graph(6),
    "florentine": nx.florentine_families_graph(),
}


@pytest.mark.parametrize(
    "topology",
    [{"kind": "star", "nodes": 5}, {"kind": "ring", "nodes": 6}, {"kind": "florentine"}],
)
def test_every_recorded_slot_follows_the_definitions(topology: dict[str, Any]) -> None:
    """With every slot recorded, each run's rows are its whole walk: from their holders alone
    (not the engine's stays), time is i·c + moves·hop, bits moves·bits, the cover iteration the
    first slot every node has held the token, the KL changes only at first visits, visits count
    the slots each node holds the token, and each slot's holder is a neighbour or itself."""
    raw = scenario(
        topology,
        20,
        iterations=3000,
        stop=False,
        every=1,
        compute={"seconds_per_iteration": 0.5},
        links={"rate_bps": 64.0, "latency_s": 0.125},
    )
    res = run_all(raw)
    graph = GRAPHS[topology["kind"]]
    bits = 64 * 2.0  # beta-bernoulli: two numbers a message
    hop = bits / 64.0 + 0.125
    visits = np.zeros(len(res.visits), dtype=np.int64)
    for run, rows in res.metrics.groupby("run"):
        holders = rows["holder"].to_numpy()
        assert rows["iteration"].tolist() == list(range(1, 3001))
        moved = np.concatenate([[0], np.cumsum(holders[1:] != holders[:-1])])
        i = rows["iteration"].to_numpy()
        np.testing.assert_allclose(rows["time"], i * 0.5 + moved * hop, rtol=1e-12)
        np.testing.assert_array_equal(rows["bits"], moved * bits)
        seen = {}
        for slot, h in zip(i.tolist(), holders.tolist(), strict=True):
            seen.setdefault(h, slot)
        cover = max(seen.values()) if len(seen) == len(res.visits) else None
        assert res.runs.loc[res.runs.run == run, "cover_iteration"].item() == cover
        kl = rows["kl"].to_numpy()
        changes = np.flatnonzero(kl[1:] != kl[:-1]) + 2
        assert set(changes.tolist()) <= set(seen.values())
        pairs = zip(holders[:-1].tolist(), holders[1:].tolist(), strict=True)
        assert all(a == b or graph.has_edge(a, b) for a, b in pairs)
        labels = res.visits["node"].tolist()
        for h in holders.tolist():
            visits[labels.index(h)] += 1
    assert visits.tolist() == res.visits["visits"].tolist()


# --------------------------------------------------------------------------- exact expectations


def cover_moves(raw: dict[str, Any]) -> np.ndarray:
    res = run_all(raw)
    assert set(res.engines.values()) == {"vectorized (drawn stays)"}
    assert res.runs["cover_iteration"].notna().all()
    return res.runs["cover_iteration"].to_numpy() - 1.0


COVER_CASES = [
    ({"kind": "star", "nodes": 8}, 1500),  # holds at the leaves
    ({"kind": "ring", "nodes": 9}, 400),  # a line walk, drawn by cumulative sums
    ({"kind": "florentine"}, 800),  # irregular: holds with different probabilities
    ({"kind": "path", "nodes": 7}, 800),  # a line whose ends hold
    ({"kind": "complete", "nodes": 9}, 300),  # moves every slot
    ({"kind": "random_regular", "nodes": 10, "degree": 3, "seed": 1}, 300),  # regular, no holds
]


@pytest.mark.parametrize(("topology", "runs"), COVER_CASES)
def test_cover_moves_match_the_exact_expectation(topology: dict[str, Any], runs: int) -> None:
    exact = ct.exact_cover_moves(graph_of(topology), MH)
    ok, text = within_4se(cover_moves(scenario(topology, runs)), exact)
    assert ok, text


@pytest.mark.slow
@pytest.mark.parametrize(
    "topology",
    [
        {"kind": "star", "nodes": 30},
        {"kind": "ring", "nodes": 25},
        {"kind": "florentine"},
        {"kind": "path", "nodes": 12},
    ],
)
def test_cover_moves_match_the_exact_expectation_many_runs(topology: dict[str, Any]) -> None:
    exact = ct.exact_cover_moves(graph_of(topology), MH)
    ok, text = within_4se(cover_moves(scenario(topology, 2000, seed=11)), exact)
    assert ok, text


def removal_latencies(raw: dict[str, Any]) -> np.ndarray:
    res = run_all(raw)
    assert set(res.engines.values()) == {"vectorized (drawn stays)"}
    return res.requests["removal_latency"].to_numpy()


REMOVAL_CASES = [
    ({"kind": "star", "nodes": 8}, 3, 40, 400),  # a leaf, within the cover
    ({"kind": "star", "nodes": 8}, 0, 3, 400),  # the hub, early: often 0 or 1
    ({"kind": "ring", "nodes": 9}, 4, 30, 400),
    ({"kind": "florentine"}, "Medici", 25, 300),
]


@pytest.mark.parametrize(("topology", "node", "at", "runs"), REMOVAL_CASES)
def test_removal_latency_matches_the_exact_expectation(
    topology: dict[str, Any], node: Any, at: int, runs: int
) -> None:
    raw = scenario(topology, runs, requests=[{"node": node, "at_iteration": at}])
    exact = ct.expected_removal_latency(graph_of(topology), node, at_slot=at, scheduler=MH)
    ok, text = within_4se(removal_latencies(raw), exact)
    assert ok, text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("topology", "node", "at"),
    [
        ({"kind": "star", "nodes": 20}, 7, 200),
        ({"kind": "ring", "nodes": 15}, 6, 120),
        ({"kind": "florentine"}, "Strozzi", 60),
    ],
)
def test_removal_latency_matches_the_exact_expectation_many_runs(
    topology: dict[str, Any], node: Any, at: int
) -> None:
    raw = scenario(topology, 2000, seed=13, requests=[{"node": node, "at_iteration": at}])
    exact = ct.expected_removal_latency(graph_of(topology), node, at_slot=at, scheduler=MH)
    ok, text = within_4se(removal_latencies(raw), exact)
    assert ok, text


# --------------------------------------------------------------------------- against stepped walks


def two_samples_agree(a: np.ndarray, b: np.ndarray) -> tuple[bool, str]:
    """Equal means at 4 standard errors, and equal shares of missing values (NaN: not reached
    within the run) at 4 standard errors."""
    gone_a, gone_b = np.isnan(a), np.isnan(b)
    pooled = (gone_a.sum() + gone_b.sum()) / (a.size + b.size)
    se_gone = math.sqrt(pooled * (1 - pooled) * (1 / a.size + 1 / b.size))
    if abs(gone_a.mean() - gone_b.mean()) > 4 * se_gone:
        return False, f"missing in {gone_a.mean():.3f} vs {gone_b.mean():.3f} of the runs"
    a, b = a[~gone_a], b[~gone_b]
    if min(a.size, b.size) < 10:  # (almost) never reached: the shares said it all
        return True, f"reached in {a.size} and {b.size} runs"
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return abs(a.mean() - b.mean()) <= 4 * se, f"{a.mean():.5g} vs {b.mean():.5g}, se {se:.3g}"


def drawn_and_stepped(raw: dict[str, Any]) -> tuple[Any, Any]:
    stepped = {**raw, "scheduler": {**raw["scheduler"], "stays": "stepped"}}
    return run_all(raw), run_all(stepped, engine="vectorized")


@pytest.mark.parametrize("runs", [300, pytest.param(2000, marks=pytest.mark.slow)])
def test_drawn_stays_agree_with_stepped_walks(runs: int) -> None:
    """An irregular graph with a request: cover, convergence time, removal, unlearning and retrain
    latency (in slots and seconds), bits and slots of drawn and stepped walks have the same means."""
    raw = scenario(
        {"kind": "florentine"},
        runs,
        requests=[{"node": "Medici", "at_iteration": 30}, {"node": "Pazzi", "at_iteration": 30}],
        compute={"seconds_per_iteration": 0.01},
        links={"latency_s": 0.05},
    )
    drawn, stepped = drawn_and_stepped(raw)
    for column in ("cover_iteration", "convergence_time", "iterations", "bits", "time"):
        a, b = drawn.runs[column].to_numpy(float), stepped.runs[column].to_numpy(float)
        ok, text = two_samples_agree(a, b)
        assert ok, f"{column}: {text}"
    for column in ("removal_latency", "latency", "retrain_latency", "removal_latency_time"):
        for node in ("Medici", "Pazzi"):
            a = drawn.requests.loc[drawn.requests.node == node, column].to_numpy(float)
            b = stepped.requests.loc[stepped.requests.node == node, column].to_numpy(float)
            ok, text = two_samples_agree(a, b)
            assert ok, f"{column} of {node}: {text}"


@pytest.mark.parametrize(
    ("topology", "iterations", "stop"),
    [
        ({"kind": "complete", "nodes": 10}, 500, True),  # examples/lazy_walk.toml's walks
        ({"kind": "star", "nodes": 9}, 90, False),  # every run ends at the slot budget
        ({"kind": "ring", "nodes": 12}, 70, False),
    ],
)
def test_runs_cut_by_the_slot_budget_agree_with_stepped_walks(
    topology: dict[str, Any], iterations: int, stop: bool
) -> None:
    raw = scenario(
        topology,
        400,
        iterations=iterations,
        stop=stop,
        every=20,
        requests=[{"node": 1, "at_iteration": iterations // 2}],
    )
    drawn, stepped = drawn_and_stepped(raw)
    for column in ("cover_iteration", "convergence_iteration", "iterations", "bits"):
        ok, text = two_samples_agree(
            drawn.runs[column].to_numpy(float), stepped.runs[column].to_numpy(float)
        )
        assert ok, f"{column}: {text}"
    for column in ("removal_latency", "retrain_latency"):
        ok, text = two_samples_agree(
            drawn.requests[column].to_numpy(float), stepped.requests[column].to_numpy(float)
        )
        assert ok, f"{column}: {text}"
    assert drawn.metrics.groupby("run")["iteration"].max().le(iterations).all()


def test_a_request_within_a_stay_is_served_at_its_slot() -> None:
    """On a star a leaf holds the token for many slots: a request for that leaf arriving while it
    holds the token is served at the request's slot (removal latency 1), as a stepped walk serves
    it; the unlearning latency equals the removal latency (conjugate, converged before)."""
    raw = scenario(
        {"kind": "star", "nodes": 6}, 300, requests=[{"node": 2, "at_iteration": 400}], every=1
    )
    res = run_all(raw)
    holder_at = res.metrics.loc[res.metrics.iteration == 400].set_index("run")["holder"]
    requests = res.requests.set_index("run")
    held = holder_at[holder_at == 2].index
    assert held.size > 20  # the leaf holds slot 400 in about 1/6 of the runs
    assert (requests.loc[held, "removal_latency"] == 1).all()
    converged = res.runs.set_index("run")["convergence_iteration"] < 400
    both = requests.loc[converged[converged].index]
    assert (both["latency"] == both["removal_latency"]).all()


# --------------------------------------------------------------------------- reproducibility


def test_a_run_depends_on_its_seed_alone() -> None:
    """Runs drawn in one batch or another, alone or with others, give the same rows: the tables do
    not depend on how runs are split between batches, workers or a resumed sweep."""
    raw = scenario({"kind": "star", "nodes": 7}, 24, requests=[{"node": 3, "at_iteration": 50}])
    world = check(parse_study(raw))[0]
    whole = fastpath.simulate_runs(world, list(range(24)))[0]
    alone = fastpath.simulate_runs(world, [5, 17])[0]
    keep = np.isin(whole.metric_runs, [5, 17])
    for name, values in alone.metrics.items():
        np.testing.assert_array_equal(values, whole.metrics[name][keep], err_msg=name)
    rows = np.isin(np.asarray(whole.runs), [5, 17])
    for name, values in alone.run_columns.items():
        np.testing.assert_array_equal(values, whole.run_columns[name][rows], err_msg=name)
    requests = np.isin(whole.request_columns["run"], [5, 17])
    for name, values in alone.request_columns.items():
        np.testing.assert_array_equal(values, whole.request_columns[name][requests], err_msg=name)


def test_a_resumed_sweep_gives_the_same_tables(tmp_path) -> None:
    """Runs 3, 4 and 11 committed by an interrupted sweep, the rest run on --resume."""
    from gossipsim.results.status import status
    from gossipsim.results.store import RunStore

    raw = scenario({"kind": "star", "nodes": 7}, 16, requests=[{"node": 3, "at_iteration": 50}])
    study = parse_study(raw)
    whole = run_all(raw)
    world = check(study)[0]
    store = RunStore(tmp_path / "o", study)
    for batch in fastpath.simulate_runs(world, [3, 4, 11]):
        store.save(0, batch)
    store.commit()
    assert status(tmp_path / "o")["done"] == 3
    resumed = gs.run(study, out=tmp_path / "o", resume=True, plots=False)
    assert resumed.failures.empty
    for table in ("runs", "metrics", "requests", "visits"):
        assert getattr(resumed, table).equals(getattr(whole, table)), table


def test_one_and_two_workers_give_the_same_tables(tmp_path) -> None:
    raw = scenario({"kind": "star", "nodes": 7}, 40, every=50)
    raw["sweep"] = {"topology.nodes": [5, 9]}
    one = run_all(raw, workers=1)
    two = run_all(raw, workers=2)
    for table in ("runs", "metrics", "visits"):
        left, right = getattr(one, table), getattr(two, table)
        assert left.equals(right), table


# --------------------------------------------------------------------------- bad input


def run_cli(raw: dict[str, Any], tmp_path, capsys, *extra: str) -> tuple[int, str]:
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw), encoding="utf-8")
    code = main(["run", str(path), "--no-plots", "--out", str(tmp_path / "out"), *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "extra", "words"),
    [
        (
            {"scheduler": {"stays": "sometimes"}},
            (),
            "unknown value 'sometimes'; allowed: stepped, drawn",
        ),
        ({}, ("--engine", "event"), "--engine event steps every slot"),
        (
            {"metrics": {"record_every": 1000, "latency_window": 5}},
            (),
            "metrics.latency_window is not 1",
        ),
        (
            {
                "model": {"kind": "beta-exponential"},
                "data": {"points_per_node": 5},
                "protocol": {"estimator": "exact"},
            },
            (),
            "does not declare that repeated visits change nothing",
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, change, extra, words) -> None:
    raw = scenario({"kind": "star", "nodes": 5}, 20, iterations=500)
    for section, values in change.items():
        raw[section] = {**raw.get(section, {}), **values}
    code, err = run_cli(raw, tmp_path, capsys, *extra)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gossipsim: error: "), err
    assert "scheduler.stays" in lines[0] and words in lines[0], lines[0]


def test_validate_refuses_what_run_refuses(tmp_path, capsys) -> None:
    raw = scenario({"kind": "star", "nodes": 5}, 20, iterations=500)
    raw["metrics"] = {"record_every": 1000, "latency_window": 5}
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "scheduler.stays" in err[0], err


def test_stepped_stays_are_the_default_and_keep_the_event_engines_tables() -> None:
    raw = scenario({"kind": "star", "nodes": 6}, 20, iterations=400, stop=False, every=7)
    del raw["scheduler"]["stays"]
    assert parse_study(raw).variants[0].scenario.scheduler.stays == "stepped"
    vectorized = run_all(raw, engine="vectorized")
    event = run_all(raw, engine="event")
    assert vectorized.metrics.equals(event.metrics)
    with pytest.raises(ConfigError, match="scheduler.stays"):
        parse_study({**raw, "scheduler": {"stays": 3}})
