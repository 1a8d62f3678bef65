"""The vectorised engine's ``batched-steps`` kernel: natural-gradient G-FVL stepped for many runs at
once gives the event engine's tables bit for bit (the same walks, the same Monte Carlo draws per run,
the same arithmetic row by row)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.engine.protocol_api import StateTrace
from gossipsim.execution.vectorized import capability
from gossipsim.execution.vectorized.trace import StreamedWorlds
from gossipsim.measurement.metrics import kl_segments
from gossipsim.protocols import protocol_kind
from tests.test_nonconjugate import beta_exponential, logistic


def assert_same_tables(event: gs.Results, vectorized: gs.Results) -> None:
    """The two engines' runs, requests and metrics tables are identical, bit for bit."""
    for name in ("runs", "requests", "metrics"):
        pd.testing.assert_frame_equal(
            getattr(vectorized, name), getattr(event, name), check_exact=True, obj=name
        )


def both_engines(raw: dict) -> tuple[gs.Results, gs.Results]:
    return gs.run(raw, engine="event"), gs.run(raw, engine="vectorized")


def unlearning_beta(**protocol) -> dict:
    return beta_exponential(
        scenario={"name": "be", "seed": 3, "runs": 5, "iterations": 400},
        protocol={"learning_rate": 5e-3, "samples": 10, **protocol},
        unlearning=[{"node": 9, "at_iteration": 150}, {"node": 2, "at_iteration": 150},
                    {"node": 4, "at_iteration": 260}],
        metrics={"tolerance": 0.1, "excess": True, "record_every": 25, "latency_window": 20},
    )  # fmt: skip


def test_the_kernel_is_declared_for_natural_gradient_models():
    """gfvl declares batched steps for a model with batched estimators; auto then vectorises it."""
    world = gs.check(gs.parse_study(beta_exponential()))[0]
    assert protocol_kind("gfvl").kernel(world.model) == "batched-steps"
    assert capability.unavailable(world) is None


@pytest.mark.parametrize(
    "protocol",
    [
        {"estimator": "reinforce", "samples_per": "point"},
        {"estimator": "reinforce", "samples_per": "total", "baseline": 1.5},
        {"estimator": "exact", "local_iterations": 3, "schedule": "inverse"},
    ],
    ids=["reinforce-point", "reinforce-total", "exact"],
)
def test_beta_exponential_unlearning_same_tables_on_both_engines(protocol):
    """Three requests (two at one slot), the retrain baseline, a KL window: both engines."""
    event, vectorized = both_engines(unlearning_beta(**protocol))
    assert_same_tables(event, vectorized)
    assert vectorized.requests["removal_latency"].notna().all()


def test_halvings_and_domain_recoveries_on_both_engines():
    """A step size that leaves the domain (halved, counted) and a subtraction that leaves it (the
    state restarts): the counters and tables agree."""
    raw = unlearning_beta(estimator="reinforce", learning_rate=0.2)
    event, vectorized = both_engines(raw)
    assert event.runs["damped_steps"].sum() > 0  # the test reaches the halving path
    assert_same_tables(event, vectorized)


def test_frozen_runs_stop_when_done_on_both_engines():
    """refine_after_unlearning = false freezes the state at the request; with stop_when_done and no
    retrain baseline a run stops once the forgotten factor has left."""
    raw = unlearning_beta(
        estimator="reinforce", refine_after_unlearning=False, retrain_baseline=False
    )
    raw["scenario"]["stop_when_done"] = True
    raw["unlearning"] = [{"node": 9, "at_iteration": 100}]
    event, vectorized = both_engines(raw)
    assert (event.runs["iterations"] < 400).all()  # they did stop early
    assert_same_tables(event, vectorized)


@pytest.mark.parametrize("family", ["gaussian-full", "gaussian-diagonal"])
@pytest.mark.parametrize(
    "protocol",
    [
        {"estimator": "exact", "learning_rate": 0.5},
        {"estimator": "reparameterization", "learning_rate": 0.2, "samples": 3},
        {"estimator": "reparameterization", "learning_rate": 0.2, "samples": 3,
         "samples_per": "total"},
        {"estimator": "reinforce", "learning_rate": 0.01, "samples": 3},
        {"estimator": "reinforce", "learning_rate": 0.001, "samples": 3, "samples_per": "total"},
    ],
    ids=["exact", "reparameterization", "reparameterization-total", "reinforce", "reinforce-total"],
)  # fmt: skip
def test_logistic_regression_same_tables_on_both_engines(family, protocol):
    """Held-out metrics included, with unequal node sizes (label-skewed partition)."""
    raw = logistic(
        scenario={"name": "lr", "seed": 2, "runs": 3, "iterations": 40},
        model={"kind": "logistic-regression", "family": family, "prior": {"mean": 0, "variance": 1}},
        data={"dataset": "wine", "partition": "dirichlet", "concentration": 0.5},
        protocol=protocol,
        unlearning=[{"node": 1, "at_iteration": 25}],
        metrics={"tolerance": 0.5, "record_every": 10},
    )  # fmt: skip
    event, vectorized = both_engines(raw)
    assert {"accuracy", "nll", "ece", "retrain_kl"} <= set(vectorized.metrics.columns)
    assert_same_tables(event, vectorized)


def test_results_identical_for_any_number_of_workers_and_batches(monkeypatch):
    """A run's numbers do not depend on which runs share its batch, nor on the process (two
    variants: two units of work, one per worker process)."""
    raw = unlearning_beta(estimator="reinforce")
    raw["sweep"] = {"protocol.samples": [4, 10]}
    whole = gs.run(raw, engine="vectorized", workers=2)
    monkeypatch.setattr("gossipsim.study.budget.VECTORIZED_MAX_RUNS", 2)
    split = gs.run(raw, engine="vectorized")
    for name in ("runs", "requests", "metrics"):
        pd.testing.assert_frame_equal(getattr(whole, name), getattr(split, name))


def test_streamed_segments_are_those_of_the_whole_trace():
    """StreamedWorlds, fed a trace slot by slot (with slots without a record and a target change),
    gives kl_segments' segments of the whole trace, and keeps the state in force at every slot it
    must (the kept slots and each stretch's first slot)."""
    from gossipsim.families import Beta
    from gossipsim.models.base import FamilyTarget

    rng = np.random.default_rng(0)
    targets = [
        FamilyTarget(Beta(), np.array([5.0, 3.0])),
        FamilyTarget(Beta(), np.array([2.0, 6.0])),
    ]
    target_slots = np.array([0, 37])
    batch, slots = 3, 90
    states = np.abs(rng.normal([5.0, 3.0], 2.0, size=(batch, slots + 1, 2)))
    recorded = rng.random((batch, slots + 1)) < 0.6
    recorded[:, 0] = True
    streamed = StreamedWorlds(
        batch, 2, {"main": 1}, targets, target_slots, lambda t, x: t.kl(x),
        excess=False, tolerance=0.5, keep_slots=np.array([1, 30, 60, 90]),
    )  # fmt: skip
    current = states[:, 0].copy()
    for slot in range(slots + 1):
        current[recorded[:, slot]] = states[recorded[:, slot], slot]
        streamed.push(slot, {"main": (current.copy(), recorded[:, slot])}, np.ones(batch, bool))
    out = streamed.finish()
    for b in range(batch):
        trace = StateTrace()
        for slot in np.flatnonzero(recorded[b]):
            trace.record(int(slot), states[b, slot])
        expected = kl_segments(trace, target_slots, targets)
        found, kept = out[b]["main"]
        np.testing.assert_array_equal(found.starts, expected.starts)
        np.testing.assert_array_equal(found.kl, expected.kl)
        needed = [1, 30, 60, 90]
        first = found.first_settled(0.5, 1, 3, slots)
        needed += [first] if first is not None else []
        for slot in needed:
            np.testing.assert_array_equal(
                kept.states[kept.at(np.array([slot]))[0]],
                trace.states[trace.at(np.array([slot]))[0]],
            )


@pytest.mark.slow
def test_a_thousand_runs_identical_on_both_engines():
    """1,000 runs of Beta–exponential unlearning with a step size that halves and restarts now and
    then: every run's rows identical on both engines (rare paths included)."""
    raw = unlearning_beta(estimator="reinforce", learning_rate=0.05)
    raw["scenario"].update(runs=1000, iterations=300)
    event, vectorized = both_engines(raw)
    assert event.runs["damped_steps"].sum() > 0
    assert_same_tables(event, vectorized)


@pytest.mark.parametrize("family", ["gaussian-full", "gaussian-diagonal"])
def test_logistic_batched_estimators_against_the_families_own_expectations(family):
    """The model's batched estimators (the event engine's too, with a batch of one) checked against
    an independent computation: E_q[∇L], E_q[∇²L] of the node's points by glm's quadrature through
    the family's own ``mean_gradient``. Exact: equal to rounding. Reparameterisation (per point,
    with the projection draws, and in total) and REINFORCE: the mean of 2,000 independent estimates
    within 4 standard errors of it, every coordinate."""
    from gossipsim.core.capabilities import EstimatorSettings
    from gossipsim.models.glm import expected_logistic_grad_hess

    raw = logistic(
        model={
            "kind": "logistic-regression",
            "family": family,
            "prior": {"mean": 0, "variance": 1},
        },
        data={"dataset": "wine", "partition": "dirichlet", "concentration": 0.5},
    )
    model = gs.check(gs.parse_study(raw))[0].model
    data, fam = model.fixed_data, model.family
    k = int(np.argmax([y.size for y in data.y]))  # the node with the most points
    X, y = data.X[k], data.y[k]
    rng = np.random.default_rng(8)
    mean = rng.normal(0.0, 0.3, size=model.d)
    root = rng.normal(0.0, 0.15, size=(model.d, model.d))
    cov = root @ root.T + 0.05 * np.eye(model.d)
    if family == "gaussian-diagonal":
        cov = np.diag(np.diag(cov))
    eta = fam.natural(mean, cov=cov)
    reference = fam.mean_gradient(eta, *expected_logistic_grad_hess(mean, cov, X, y))

    exact = model.batched_mean_gradient(data, EstimatorSettings("exact"))
    np.testing.assert_allclose(
        exact(eta[None], np.array([k]), [rng])[0], reference, rtol=1e-9, atol=1e-9
    )
    count = 2000
    etas, holders = np.tile(eta, (count, 1)), np.full(count, k)
    for settings in (
        EstimatorSettings("reparameterization", 4, "point"),
        EstimatorSettings("reparameterization", 4, "total"),
        EstimatorSettings("reinforce", 4, "point"),
    ):
        rngs = [np.random.default_rng([9, i]) for i in range(count)]
        estimates = model.batched_mean_gradient(data, settings)(etas, holders, rngs)
        se = estimates.std(axis=0, ddof=1) / np.sqrt(count)
        excess = np.abs(estimates.mean(axis=0) - reference) / np.maximum(se, 1e-12)
        assert excess.max() < 4, (settings, float(excess.max()))
