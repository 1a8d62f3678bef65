"""The vectorised engine's ``batched-steps`` kernel: natural-gradient G-FVL stepped for many runs at
once gives the event engine's tables bit for bit (the same walks, the same Monte Carlo draws per run,
the same arithmetic row by row)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim import fastpath
from gossipsim.fastpath_trace import StreamedWorlds
from gossipsim.metrics import kl_segments
from gossipsim.protocol_api import StateTrace
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
    assert fastpath.unavailable(world) is None


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
    """A run's numbers do not depend on which runs share its batch."""
    raw = unlearning_beta(estimator="reinforce")
    whole = gs.run(raw, engine="vectorized", workers=2)
    monkeypatch.setattr("gossipsim.fastpath_steps.MAX_RUNS", 2)
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
