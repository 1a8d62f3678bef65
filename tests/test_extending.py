"""The worked example of docs/extending.md: a protocol of one's own (examples/partial_participation.py),
named by import path in a scenario, checked against G-FVL and against closed forms."""

from __future__ import annotations

import math
import re
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.cli import main
from gossipsim.scheduling import unregister
from tests.helpers import base_scenario, to_toml, validate_error

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KIND = "partial_participation:PartialGFVL"
LAZY = "lazy_walk:LazyMetropolisHastings"
MODEL = "gamma_exponential:GammaExponential"
NODES = 10


@pytest.fixture(autouse=True)
def _examples_importable(monkeypatch):
    """The example module importable, here and in worker processes (as PYTHONPATH=examples)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLES))
    yield
    unregister(LAZY)  # registered by its path on first use


def _scenario(participation: float | None, *, runs: int, requests: bool = True, **protocol):
    raw = base_scenario(
        scenario={"name": "pp", "seed": 5, "runs": runs, "iterations": 400},
        topology={"kind": "ring", "nodes": NODES},
        protocol={
            "kind": KIND,
            **({} if participation is None else {"participation": participation}),
            **protocol,
        },
    )
    if requests:
        raw["unlearning"] = [{"node": 0, "at_iteration": 200}]
    return raw


def test_full_participation_is_gfvl_slot_for_slot():
    """participation = 1: every table of G-FVL (event engine), value for value; the example adds
    its skipped_updates column (all zero)."""
    ours = gs.run(_scenario(1.0, runs=40), progress=None)
    raw = _scenario(None, runs=40)
    raw["protocol"] = {"kind": "gfvl"}
    theirs = gs.run(raw, engine="event", progress=None)
    assert ours.engines[ours.variants[0]].startswith("event (protocol")  # no kernel: event engine
    assert theirs.engines == {ours.variants[0]: "event"}
    assert (ours.runs["skipped_updates"] == 0).all()
    pd.testing.assert_frame_equal(ours.runs.drop(columns="skipped_updates"), theirs.runs)
    for name in ("metrics", "requests", "visits"):
        pd.testing.assert_frame_equal(getattr(ours, name), getattr(theirs, name))


def test_skipped_updates_follow_the_geometric_law():
    """Before its factor goes in, a node skips a Geometric(p) number of visits (failures before the
    first success), independently of the walk: over K nodes the mean is K(1-p)/p, the variance
    K(1-p)/p². With 400 slots on a ring of 10 every node has joined in every run (checked), so the
    mean of 300 runs lies within 4 standard errors of K(1-p)/p."""
    p, runs = 0.5, 300
    res = gs.run(_scenario(p, runs=runs, requests=False), progress=None)
    assert res.runs["convergence_iteration"].notna().all()  # every factor went in: the full count
    skipped = res.runs["skipped_updates"].to_numpy()
    mean, variance = NODES * (1 - p) / p, NODES * (1 - p) / p**2
    assert abs(skipped.mean() - mean) <= 4 * math.sqrt(variance / runs)
    # convergence is the slot at which the last node joins: never before the cover slot, and on
    # average where an independent simulation of the same walk with a coin per visit puts it
    converged = res.runs["convergence_iteration"].to_numpy(dtype=float)
    assert (converged >= res.runs["cover_iteration"].to_numpy()).all()
    reference = _joining_slots(p, runs=4000, seed=12)
    se = math.sqrt(converged.var(ddof=1) / runs + reference.var(ddof=1) / reference.size)
    assert abs(converged.mean() - reference.mean()) <= 4 * se, (converged.mean(), reference.mean())
    assert reference.mean() > _joining_slots(1.0, runs=4000, seed=13).mean() + 4 * se  # it slows


def _joining_slots(p: float, *, runs: int, seed: int) -> np.ndarray:
    """The slot at which the last node of the ring joins, simulated here with NumPy alone: the
    token moves by the rows of the Metropolis-Hastings matrix (from a uniform start, slot 1 being
    the first holder's), and a node that has not joined joins at a visit with probability p."""
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(gs.transition_matrix(nx.cycle_graph(NODES)).toarray(), axis=1)
    holder = rng.integers(NODES, size=runs)
    joined = np.zeros((runs, NODES), dtype=bool)
    last = np.zeros(runs)
    for slot in range(1, 20 * 400):
        joins = ~joined[np.arange(runs), holder] & (rng.random(runs) < p)
        joined[np.arange(runs), holder] |= joins
        last[joins] = slot
        if joined.all():
            return last
        u = rng.random(runs)
        holder = np.minimum((cumulative[holder] <= u[:, None]).sum(axis=1), NODES - 1)
    raise AssertionError("the reference walks did not all finish")


def test_unlearning_ends_at_the_exact_posterior_without_the_node():
    """Once node 0's factor is out, the state is the exact conjugate posterior of the other nodes'
    data: the KL against it is zero (to rounding), and the removal slot is in requests.csv."""
    raw = _scenario(0.3, runs=30)
    raw["scenario"]["iterations"] = 1500  # every other node has joined by the end (P > 1 - 1e-20)
    res = gs.run(raw, progress=None)
    assert res.requests["removal_latency"].notna().all()
    last = res.metrics.sort_values("iteration").groupby("run").tail(1)
    assert (last["kl"].abs() <= 1e-12).all()


def test_the_command_line_runs_it_in_workers_with_one_line_errors(tmp_path, capsys):
    raw = _scenario(0.5, runs=12)
    path = tmp_path / "pp.toml"
    path.write_text(to_toml(raw))
    tables = []
    for flags in ([], ["--workers", "2"]):
        out = tmp_path / f"out{len(tables)}"
        assert main(["run", str(path), "--out", str(out), "--no-plots", *flags]) == 0
        tables.append({n: (out / f"{n}.csv").read_bytes() for n in ("metrics", "runs", "requests")})
    assert tables[0] == tables[1]
    assert f"protocol {KIND!r} declares no vectorised kernel" in capsys.readouterr().out
    for protocol, model, key in (
        ({"participation": 0}, None, "protocol.participation"),
        ({"participation": 1.5}, None, "protocol.participation"),
        ({"rounds": 3}, None, "protocol.rounds"),
        ({}, {"kind": "beta-exponential", "prior": {"a": 2, "b": 2}}, "protocol.kind"),
    ):
        bad = _scenario(None, runs=2)
        bad["protocol"].update(protocol)
        if model is not None:
            bad["model"] = model
            bad["data"] = {"points_per_node": 10, "theta": 0.5}
        err = validate_error(bad, tmp_path, capsys)
        assert key in err, err


def test_the_docs_show_the_examples_as_they_are():
    """Every python block of docs/extending.md that quotes an example module is a verbatim piece of
    it, and every scenario block is the whole shipped file (the page cannot drift from the code the
    tests run)."""
    doc = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    examples = {"partial_participation", "lazy_walk", "gamma_exponential"}
    for marker, suffix, language, whole in (
        ("from ", "py", "python", False),
        ("", "toml", "toml", True),
    ):
        pattern = rf"<!-- {marker}examples/(\w+)\.{suffix} -->\n```{language}\n(.*?)```"
        blocks = re.findall(pattern, doc, re.S)
        assert {name for name, _ in blocks} == examples, suffix
        for name, block in blocks:
            shipped = (EXAMPLES / f"{name}.{suffix}").read_text(encoding="utf-8")
            assert (block == shipped) if whole else (block in shipped), (name, suffix, block[:200])


def test_the_shipped_example_scenarios_are_valid():
    study = gs.load_scenario(EXAMPLES / "partial_participation.toml")
    assert [v.values["protocol.participation"] for v in study.variants] == [1.0, 0.5, 0.2]
    assert np.all([v.scenario.protocol.kind == KIND for v in study.variants])
    assert (
        gs.load_scenario(EXAMPLES / "gamma_exponential.toml").variants[0].scenario.model.kind
        == MODEL
    )
    study = gs.load_scenario(EXAMPLES / "lazy_walk.toml")
    assert [v.scenario.scheduler.kind for v in study.variants] == ["metropolis-hastings", LAZY]


# --------------------------------------------------------------------------- a scheduler of one's own


def test_the_lazy_walk_s_exact_hitting_times_are_twice_metropolis_hastings():
    """The lazy walk's matrix is (I + P)/2, so every hitting time doubles: gossipsim's exact values
    for the plug-in (from its own transition matrix) against that closed-form relation, and against
    a dense solve of (I - P)|_{V minus k} h = 1 written here (karate club: degrees 1 to 17, so the
    Metropolis-Hastings acceptances matter)."""
    import networkx as nx

    graph = nx.karate_club_graph()
    lazy = gs.hitting_times_to(graph, 0, LAZY)
    plain = gs.hitting_times_to(graph, 0, "metropolis-hastings")
    np.testing.assert_allclose(lazy, 2 * plain, rtol=1e-10)
    P = gs.transition_matrix(graph, LAZY).toarray()
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    A = P.shape[0]
    keep = np.arange(A) != 0
    dense = np.linalg.solve(np.eye(A - 1) - P[np.ix_(keep, keep)], np.ones(A - 1))
    np.testing.assert_allclose(lazy[keep], dense, rtol=1e-10)
    # from a stationary start: 1 + w·H, so the latency beyond the first slot doubles too
    assert gs.next_visit_latency(graph, 0, LAZY) == pytest.approx(
        1 + 2 * (gs.next_visit_latency(graph, 0, "metropolis-hastings") - 1), rel=1e-10
    )


def test_the_lazy_walk_runs_vectorised_by_declaration_and_matches_its_exact_latency():
    """The plug-in declares the batched-step kernel: auto vectorises it, with the event engine's
    tables; the mean removal latency of 2,000 runs lies within 4 standard errors of the exact value."""
    raw = base_scenario(
        scenario={
            "name": "lazy",
            "seed": 3,
            "runs": 2000,
            "iterations": 500,
            "stop_when_done": True,
        },
        scheduler={"kind": LAZY},
        unlearning=[{"node": 9, "at_iteration": 200}],
    )
    fast = gs.run(raw, progress=None)
    assert fast.engines == {"lazy": "vectorized"}
    latency = fast.requests["removal_latency"].to_numpy(dtype=float)
    exact = fast.theory["lazy"]["next_visit_latency"]["9"]
    assert exact == pytest.approx(1 + 2 * (1 / 10 + 9 - 1), rel=1e-12)  # complete K: 1/K + K - 1
    assert abs(latency.mean() - exact) <= 4 * latency.std(ddof=1) / math.sqrt(latency.size)
    raw["scenario"]["runs"] = 60
    vectorised = gs.run(raw, engine="vectorized", progress=None)
    event = gs.run(raw, engine="event", progress=None)
    for name in ("metrics", "runs", "requests", "visits"):
        pd.testing.assert_frame_equal(getattr(vectorised, name), getattr(event, name))


@pytest.mark.parametrize(
    "path, message",
    [
        ("tests.plugins:PlainGFVL", "is not a gossipsim Scheduler subclass"),
        ("tests.plugins:PlainWalk", "must set kind = 'tests.plugins:PlainWalk'"),
        ("lazy_walk:Nope", "has no 'Nope'"),
        ("teleport", "or an import path module:Class"),
    ],
)
def test_a_bad_scheduler_is_one_line(tmp_path, capsys, path, message):
    err = validate_error(base_scenario(scheduler={"kind": path}), tmp_path, capsys)
    assert "scheduler.kind" in err and message in err, err


# --------------------------------------------------------------------------- a model of one's own


def _gamma_exponential(tmp_path, observations: dict[int, np.ndarray], **scenario):
    rows = ["node,x"] + [f"{k},{x!r}" for k, xs in observations.items() for x in xs.tolist()]
    (tmp_path / "obs.csv").write_text("\n".join(rows) + "\n")
    raw = base_scenario(
        scenario={"name": "ge", "seed": 2, "runs": 30, "iterations": 300, **scenario},
        topology={"kind": "ring", "nodes": NODES},
        model={"kind": MODEL, "prior": {"shape": 2.0, "rate": 1.0}},
        data={"path": str(tmp_path / "obs.csv")},
        unlearning=[{"node": 3, "at_iteration": 150}],
    )
    return raw


def test_the_gamma_exponential_target_is_the_closed_form_and_a_grid_posterior(tmp_path):
    """The exact posterior gossipsim computes for the plug-in model from a CSV of waiting times is
    Gamma(shape + N, rate + Σx) (closed form), with and without node 3; and its mean is that of the
    posterior computed on a grid of θ from the prior density and the likelihood directly."""
    from gossipsim.families import Gamma

    rng = np.random.default_rng(4)
    observations = {k: rng.exponential(2.0, size=5 + k) for k in range(NODES)}
    world = gs.build_world(
        gs.parse_study(_gamma_exponential(tmp_path, observations)).variants[0].scenario
    )
    model = world.model
    everything = np.concatenate(list(observations.values()))
    without = np.concatenate([x for k, x in observations.items() if k != 3])
    for forgotten, xs in ((frozenset(), everything), (frozenset({3}), without)):
        eta = model.target(model.fixed_data, forgotten).eta
        np.testing.assert_allclose(eta, Gamma.natural(2.0 + xs.size, 1.0 + xs.sum()), rtol=1e-12)
        # brute force: log prior + log likelihood on a grid of θ, normalised by the trapezoid rule
        theta = np.linspace(1e-6, 3.0, 300_001)
        log_density = (2.0 - 1.0) * np.log(theta) - 1.0 * theta
        log_density += xs.size * np.log(theta) - theta * xs.sum()
        density = np.exp(log_density - log_density.max())
        grid_mean = np.trapezoid(theta * density, theta) / np.trapezoid(density, theta)
        assert grid_mean == pytest.approx((2.0 + xs.size) / (1.0 + xs.sum()), rel=1e-6)


def test_the_gamma_exponential_model_learns_and_unlearns_exactly_on_both_engines(tmp_path):
    rng = np.random.default_rng(5)
    observations = {k: rng.exponential(2.0, size=8) for k in range(NODES)}
    raw = _gamma_exponential(tmp_path, observations, iterations=600)
    fast = gs.run(raw, engine="vectorized", progress=None)
    event = gs.run(raw, engine="event", progress=None)
    for name in ("metrics", "runs", "requests"):
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(event, name))
    last = fast.metrics.sort_values("iteration").groupby("run").tail(1)
    assert (last["kl"].abs() <= 1e-12).all()  # the exact posterior without node 3, in every run
    assert fast.requests["removal_latency"].notna().all()


@pytest.mark.parametrize(
    "change, key",
    [
        ({"model": {"kind": MODEL, "prior": {"shape": -1.0, "rate": 1.0}}}, "model.prior.shape"),
        ({"model": {"kind": MODEL, "prior": {"shape": 2.0, "scale": 1.0}}}, "model.prior"),
        ({"data": {"points_per_node": 10, "rate": 0.0}}, "data.rate"),
    ],
)
def test_bad_model_settings_are_one_line(tmp_path, capsys, change, key):
    raw = _gamma_exponential(tmp_path, {0: np.array([1.0])})
    raw.update(change)
    err = validate_error(raw, tmp_path, capsys)
    assert key in err, err


def test_a_waiting_time_that_is_not_positive_names_the_file_row(tmp_path, capsys):
    err = validate_error(_gamma_exponential(tmp_path, {0: np.array([1.0, -2.0])}), tmp_path, capsys)
    assert "data.path" in err and "row 3" in err, err
