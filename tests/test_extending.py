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
from gossipsim.cli.parser import main
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


def _same_tables_in_workers(raw: dict, folder: Path) -> None:
    """``gossipsim run`` of ``raw`` in this process and with 2 worker processes: the same tables,
    byte for byte."""
    path = folder / "workers.toml"
    path.write_text(to_toml(raw))
    tables = []
    for flags in ([], ["--workers", "2"]):
        out = folder / f"out{len(tables)}"
        assert main(["run", str(path), "--out", str(out), "--no-plots", *flags]) == 0
        tables.append({n: (out / f"{n}.csv").read_bytes() for n in ("metrics", "runs", "requests")})
    assert tables[0] == tables[1]


def test_the_command_line_runs_it_in_workers_with_one_line_errors(tmp_path, capsys):
    _same_tables_in_workers(_scenario(0.5, runs=12), tmp_path)
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
    examples = {
        "partial_participation", "lazy_walk", "gamma_exponential", "poisson_regression",
        "gilbert_elliott",
    }  # fmt: skip
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
    study = gs.load_scenario(EXAMPLES / "poisson_regression.toml")
    assert study.variants[0].scenario.model.kind == "poisson_regression:PoissonRegression"
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


# --------------------------------------------------------------------- a particle model of one's own

POISSON = "poisson_regression:PoissonRegression"


def _poisson(**data) -> dict:
    """A small DSVGD scenario of the Poisson-regression plug-in: a ring of 5 nodes, node 0 forgotten
    before slot 151."""
    return base_scenario(
        scenario={"name": "poisson", "seed": 3, "runs": 4, "iterations": 300},
        topology={"kind": "ring", "nodes": 5},
        model={"kind": POISSON, "prior": {"scale": 1.5}},
        data={"points_per_node": 30, **data},
        protocol={"kind": "dsvgd", "particles": 10, "step_size": 0.2},
        metrics={"record_every": 10, "tolerance": 100.0},
        unlearning=[{"node": 0, "at_iteration": 151}],
    )


def _poisson_model(**data):
    world = gs.build_world(gs.parse_study(_poisson(**data)).variants[0].scenario)
    return world.model, world.model.fixed_data


def _log_posterior(data, nodes, theta: np.ndarray, scale: float) -> np.ndarray:
    """The log posterior density (unnormalised) of the rows of ``nodes`` at points θ ``(..., d)``,
    from SciPy's densities: what the plug-in computes, written independently of it."""
    from scipy import stats

    theta = np.asarray(theta, dtype=float)
    X = np.concatenate([data.X[k] for k in nodes])
    y = np.concatenate([data.y[k] for k in nodes])
    prior = stats.norm.logpdf(theta, scale=scale).sum(axis=-1)
    return prior + stats.poisson.logpmf(y, np.exp(theta @ X.T)).sum(axis=-1)


def test_the_poisson_log_densities_are_scipy_s_and_their_gradients_finite_differences():
    """log p0 and log p(D_k | θ) of particle sets with a batch axis, (R, N, d), against SciPy's
    normal and Poisson densities; their gradients against central differences (step 1e-6, relative
    error below 1e-6: the truncation error is O(h²) times the third derivative, the rounding error
    about 1e-16·|f|/h); a mini-batch of rows scaled by n_k/|rows|, and all rows the same as None."""
    from scipy import stats

    model, data = _poisson_model(coefficients=[0.4, 0.5, -0.3])
    rng = np.random.default_rng(8)
    particles = 0.5 * rng.standard_normal((3, 4, 3))
    prior, prior_grad = model.log_prior(particles)
    likelihood, likelihood_grad = model.log_likelihood(data, 2, particles)
    for r, n in np.ndindex(3, 4):
        theta = particles[r, n]
        assert prior[r, n] == pytest.approx(stats.norm.logpdf(theta, scale=1.5).sum(), rel=1e-12)
        rate = np.exp(data.X[2] @ theta)
        expected = stats.poisson.logpmf(data.y[2], rate).sum()
        assert likelihood[r, n] == pytest.approx(expected, rel=1e-12)
    h = 1e-6
    for j in range(3):
        step = np.zeros(3)
        step[j] = h
        for function, gradient in (
            (lambda p: model.log_prior(p)[0], prior_grad),
            (lambda p: model.log_likelihood(data, 2, p)[0], likelihood_grad),
        ):
            difference = (function(particles + step) - function(particles - step)) / (2 * h)
            np.testing.assert_allclose(gradient[..., j], difference, rtol=1e-6, atol=1e-6)
    rows = np.array([0, 4, 7, 11, 20])
    value, grad = model.log_likelihood(data, 2, particles, rows)
    subset = model.log_likelihood(
        type(data)(tuple(x[rows] for x in data.X), tuple(y[rows] for y in data.y), data.X_test,
                   data.y_test),
        2, particles,
    )  # fmt: skip
    np.testing.assert_allclose(value, 30 / 5 * subset[0], rtol=1e-12)
    np.testing.assert_allclose(grad, 30 / 5 * subset[1], rtol=1e-12)
    whole = model.log_likelihood(data, 2, particles, np.arange(30))
    np.testing.assert_allclose(whole[0], likelihood, rtol=1e-12)


def test_the_poisson_target_is_checked_against_an_optimiser_and_a_grid():
    """The target gossipsim measures the particles against (known only through its score) is the
    posterior of every node's rows but the forgotten ones': its score is the gradient of SciPy's
    log posterior written here (central differences), it vanishes at the mode SciPy's optimiser
    finds for that log posterior (BFGS), and that mode is the maximum of the log posterior on a
    grid of step 0.002 (within one step) — with and without node 0."""
    from scipy import optimize

    model, data = _poisson_model()
    for forgotten in (frozenset(), frozenset({0})):
        kept = [k for k in range(5) if k not in forgotten]
        target = model.target(data, forgotten)

        def negative(theta, kept=kept):
            return -float(_log_posterior(data, kept, theta, 1.5))

        found = optimize.minimize(negative, np.zeros(2), method="BFGS", options={"gtol": 1e-5})
        mode = found.x  # SciPy's own finite-difference gradients: nothing of the plug-in's
        # the target's score vanishes within 1e-5 of SciPy's mode (its score there is at most the
        # curvature times 1e-5; the grid below is 200 times coarser)
        score = target.score(mode[None, None, :])[0, 0]
        curvature = np.abs(target.score((mode + [1e-3, 0])[None, None])[0, 0] - score) / 1e-3
        assert found.success and np.abs(score).max() <= 1e-5 * curvature.max(), (score, found)
        points = mode + np.random.default_rng(1).normal(scale=0.1, size=(5, 2))
        h = 1e-6
        for theta, analytic in zip(points, target.score(points[None])[0], strict=True):
            numeric = [
                (negative(theta - h * e) - negative(theta + h * e)) / (2 * h) for e in np.eye(2)
            ]
            np.testing.assert_allclose(analytic, numeric, rtol=1e-5)
        axes = [np.arange(m - 0.1, m + 0.1, 0.002) for m in np.round(mode, 3)]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
        log_density = _log_posterior(data, kept, grid, 1.5)
        assert np.abs(grid[np.argmax(log_density)] - mode).max() <= 0.002


def test_the_poisson_nll_column_is_the_predictive_s():
    """``nll``: minus the mean over held-out rows of log (1/N)·Σ_n Poisson(y; exp(xᵀθ_n)),
    computed here with SciPy for two particle sets."""
    from scipy import stats

    model, data = _poisson_model()
    sets = np.random.default_rng(2).normal([1.0, 0.5], 0.1, size=(2, 6, 2))
    columns = model.evaluate_particles(data, sets, frozenset({0}))
    assert tuple(columns) == model.particle_columns(frozenset({0})) == ("nll", "particle_spread")
    for r in range(2):
        rates = np.exp(sets[r] @ data.X_test.T)  # (N, M)
        predictive = stats.poisson.pmf(data.y_test, rates).mean(axis=0)
        assert columns["nll"][r] == pytest.approx(-np.log(predictive).mean(), rel=1e-10)


def test_the_poisson_plugin_runs_dsvgd_and_forgets_alike_on_both_engines_and_in_workers(
    tmp_path, capsys
):
    """DSVGD with a forget request on the plug-in: identical tables on the event and vectorised
    engines and with 2 worker processes; the request is served (removal latency in every run, the
    exact expectation in the theory, retrain columns), the ksd falls while learning."""
    raw = _poisson()
    event = gs.run(raw, engine="event", progress=None)
    vectorised = gs.run(raw, engine="vectorized", progress=None)
    for name in ("metrics", "runs", "requests"):
        pd.testing.assert_frame_equal(getattr(event, name), getattr(vectorised, name))
    assert event.requests["removal_latency"].notna().all()
    assert event.theory["poisson"]["removal_latency"][0]["expected"] > 0
    by_slot = event.metrics.groupby("iteration")["ksd"].median()
    assert by_slot.loc[150] < by_slot.loc[1] / 100
    assert {"nll", "retrain_ksd", "retrain_nll"} <= set(event.metrics.columns)
    _same_tables_in_workers(raw, tmp_path)
    capsys.readouterr()


def test_the_poisson_plugin_with_data_drawn_per_run_gets_its_theory():
    """Data drawn per run (node sizes unknown before a run): the theory step gives the exact
    removal latency instead of failing (it indexed an empty list of node sizes)."""
    raw = _poisson()
    raw["data"]["draw"] = "per-run"
    raw["scenario"].update(runs=2, iterations=200)
    res = gs.run(raw, progress=None)
    assert not res.theory_errors
    assert res.theory["poisson"]["removal_latency"][0]["expected"] > 0


@pytest.mark.parametrize(
    "change, key",
    [
        ({"coefficients": 1.0}, "data.coefficients"),
        ({"coefficients": [[1.0], [2.0]]}, "data.coefficients"),
        ({"coefficients": [1.0, 9.0]}, "data.coefficients[1]"),
        ({"test_rows": 0}, "data.test_rows"),
        ({"points_per_node": [30, 30]}, "data.points_per_node"),
    ],
)
def test_bad_poisson_settings_are_one_line(tmp_path, capsys, change, key):
    err = validate_error(_poisson(**change), tmp_path, capsys)
    assert err.startswith(f"gossipsim: error: {key}: "), err


@pytest.mark.parametrize(
    "method, signature",
    [
        ("draw_data", "draw_data(rng)"),
        ("log_likelihood", "log_likelihood(data, node, particles, rows)"),
        ("log_prior", "log_prior(particles)"),
        ("node_rows", "node_rows(data, node)"),
        ("particle_dimension", "particle_dimension"),
        ("sample_prior", "sample_prior(rng, count)"),
        ("sizes", "sizes(spec, nodes)"),
    ],
)
def test_the_poisson_plugin_without_a_required_method_is_one_line(
    tmp_path, capsys, monkeypatch, method, signature
):
    """What docs/extending.md lists as required of a particle model, taken out of the example one
    at a time: gossipsim validate names it in one line, exit status 2 (without ``sizes`` it was an
    AttributeError from the memory estimate; without ``log_prior`` the scenario was valid and every
    run failed)."""
    from poisson_regression import PoissonRegression

    import tests.plugins
    from gossipsim.core.contracts import abstract_methods
    from gossipsim.models import ParticleModel

    assert method in abstract_methods(ParticleModel) and len(abstract_methods(ParticleModel)) == 7
    own = {k: v for k, v in vars(PoissonRegression).items() if k not in (method, "__dict__")}
    monkeypatch.setattr(
        tests.plugins, "Poisson", type("Poisson", (ParticleModel,), own), raising=False
    )
    raw = _poisson()
    raw["model"]["kind"] = "tests.plugins:Poisson"
    with pytest.raises(gs.ConfigError) as caught:
        gs.parse_study(raw)
    line = (
        f"model.kind: 'tests.plugins:Poisson' does not define {signature}, which a model kind must "
        "define (docs/extending.md lists them)"
    )
    assert str(caught.value) == line
    assert validate_error(raw, tmp_path, capsys) == f"gossipsim: error: {line}"


def test_the_docs_list_what_a_model_must_define():
    """docs/extending.md's tables of what a particle model must define and what each capability
    needs are those the check at loading enforces."""
    from gossipsim.core.capabilities import CAPABILITY_METHODS
    from gossipsim.core.contracts import abstract_methods
    from gossipsim.models import ParticleModel

    doc = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")

    def rows(marker: str) -> list[tuple[list[str], list[str]]]:
        """The names in backquotes of the first two columns of each row of the marked table (a
        name: lower-case letters, digits, - and _)."""
        block = doc.split(f"<!-- {marker} -->\n", 1)[1].split("\n\n", 1)[0]
        cells = [line.split(" | ")[:2] for line in block.splitlines()[2:]]
        return [tuple(re.findall(r"`([a-z_][a-z0-9_-]*)", c) for c in pair) for pair in cells]

    required = {first[0] for first, _ in rows("particle-model-required")}
    assert required == {*abstract_methods(ParticleModel), "__init__"}
    listed = {first[0]: set(second) for first, second in rows("capability-methods")}
    assert listed == {c: set(methods) for c, methods in CAPABILITY_METHODS.items()}
