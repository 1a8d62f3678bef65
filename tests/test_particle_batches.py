"""Particle protocols on the vectorised engine (issue 23, item 2): SVGD, DSVGD (sound and paper) and
Forget-SVGD stepped for many runs at once give the event engine's tables bit for bit, particles.csv
included (the same walks, prior draws and mini-batches per run, the same arithmetic set by set)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.execution.vectorized import capability
from gossipsim.particles.kernels import median_bandwidth, pairwise_squared_distances
from gossipsim.protocols import protocol_kind

TABLES = ("runs", "requests", "metrics", "particles")


def assert_same_tables(event: gs.Results, vectorized: gs.Results) -> None:
    """The two engines' tables are identical, bit for bit."""
    for name in TABLES:
        pd.testing.assert_frame_equal(
            getattr(vectorized, name), getattr(event, name), check_exact=True, obj=name
        )


def _raw(protocol: dict[str, Any], model: str = "logistic-regression", **extra: Any) -> dict:
    """Three runs on a ring of 4, three requests (two at one slot), the retrain baseline, every
    run's particle sets at every record in particles.csv."""
    raw: dict[str, Any] = {
        "scenario": {"name": "pb", "seed": 3, "runs": 3, "iterations": 60},
        "topology": {"kind": "ring", "nodes": 4},
        "model": {"kind": model},
        "protocol": protocol,
        "metrics": {"record_every": 7, "particles": "recorded", "particle_runs": 3},
        "unlearning": [{"node": 1, "at_iteration": 20}, {"node": 3, "at_iteration": 20},
                       {"node": 2, "at_iteration": 41}],
    }  # fmt: skip
    if model == "logistic-regression":
        raw["data"] = {"dataset": "synthetic", "points_per_node": 15, "features": 3}
    raw.update(extra)
    return raw


def test_the_particle_kinds_declare_batched_steps():
    """On the walk and with the server (tests/test_server_batches.py)."""
    world = gs.check(gs.parse_study(_raw({"kind": "dsvgd", "particles": 5})))[0]
    for kind in ("svgd", "dsvgd"):
        assert protocol_kind(kind).kernel(world.model) == "batched-steps"
    assert capability.unavailable(world) is None
    server = _raw({"kind": "dsvgd", "particles": 5, "architecture": "server"})
    assert capability.unavailable(gs.check(gs.parse_study(server))[0]) is None


CASES = {
    "svgd": ({"kind": "svgd", "particles": 6}, "logistic-regression"),
    "sound": ({"kind": "dsvgd", "particles": 5, "local_iterations": 2}, "logistic-regression"),
    "sound-minibatch": ({"kind": "dsvgd", "particles": 5, "batch_size": 4}, "logistic-regression"),
    "paper": (
        {"kind": "dsvgd", "particles": 5, "variant": "paper", "local_iterations": 3,
         "fit_iterations": 2}, "logistic-regression",
    ),
    "svgd-mixture": ({"kind": "svgd", "particles": 6, "step_size": 0.2}, "gaussian-mixture"),
    "paper-mixture": (
        {"kind": "dsvgd", "particles": 6, "variant": "paper", "local_iterations": 3,
         "fit_iterations": 2}, "gaussian-mixture",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_same_tables_on_both_engines(case):
    """Forget-SVGD's removals, the retrain baseline's ksd and held-out columns, particles.csv."""
    protocol, model = CASES[case]
    raw = _raw(protocol, model)
    event, vectorized = gs.run(raw, engine="event"), gs.run(raw, engine="vectorized")
    assert vectorized.engines == {"pb": "vectorized"}
    assert_same_tables(event, vectorized)
    assert vectorized.requests["removal_latency"].notna().all()
    assert vectorized.metrics["retrain_ksd"].notna().any()
    assert set(vectorized.particles["world"]) == {"main", "retrain"}
    assert set(vectorized.particles["run"]) == {0, 1, 2}


def test_bnn_final_particles_on_both_engines():
    """A network (one hidden layer, mini-batches) and particles.csv's final sets only."""
    raw = _raw({"kind": "dsvgd", "particles": 4, "batch_size": 5}, "bnn", data={"dataset": "iris"})
    raw["model"]["hidden"] = 3
    raw["metrics"]["particles"] = "final"
    event, vectorized = gs.run(raw, engine="event"), gs.run(raw, engine="vectorized")
    assert_same_tables(event, vectorized)
    assert set(vectorized.particles["iteration"]) == {60}


def test_bnn_on_fashion_mnist_gives_the_same_ksd_on_both_engines(tmp_path, monkeypatch):
    """The softmax last layer on Fashion-MNIST's feature map (hidden = 0, 10 components, 8
    particles, a synthetic image folder), with the parameter server and Forget-SVGD: the ksd and
    retrain_ksd columns and the particle sets are the same bits on both engines. CHUNK_VALUES is
    small so that the likelihood's rows are summed in several blocks: blocks sized by the batch
    (a run alone on the event engine, two runs on the vectorized one) made the tables differ in
    ksd, nll and ece (issue 30, item 9; docs/particles.md)."""
    from tests.test_imagetask import _folder

    folder = _folder(tmp_path, train=60, test=20)
    monkeypatch.setattr("gossipsim.models.bnn.CHUNK_VALUES", 1000)  # 8 particles x 30: 4 rows
    raw = {
        "scenario": {"name": "fm", "seed": 1, "runs": 2, "iterations": 20},
        "topology": {"kind": "complete", "nodes": 4},
        "scheduler": {"kind": "round-robin", "start": 0},
        "model": {"kind": "bnn", "hidden": 0},
        "data": {"dataset": "fashion_mnist", "folder": str(folder), "components": 10,
                 "rows_per_node": 10, "test_rows": 10},
        "protocol": {"kind": "dsvgd", "architecture": "server", "particles": 8},
        "metrics": {"record_every": 5, "particles": "final"},
        "unlearning": [{"node": 3, "at_iteration": 20}],
    }  # fmt: skip
    event, vectorized = gs.run(raw, engine="event"), gs.run(raw, engine="vectorized")
    assert vectorized.engines == {"fm": "vectorized"}
    assert_same_tables(event, vectorized)
    assert vectorized.metrics["retrain_ksd"].notna().any()


def test_results_identical_for_any_number_of_workers_and_batches(monkeypatch):
    """A run's numbers do not depend on which runs share its batch."""
    raw = _raw({"kind": "dsvgd", "particles": 5})
    raw["scenario"]["runs"] = 5
    whole = gs.run(raw, engine="vectorized", workers=2)
    monkeypatch.setattr("gossipsim.study.budget.VECTORIZED_MAX_RUNS", 2)
    split = gs.run(raw, engine="vectorized")
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(whole, name), getattr(split, name), check_exact=True)


def test_median_bandwidth_of_a_set_does_not_depend_on_its_batch():
    """h of a set alone equals its h among others (a NumPy scalar's ``**2`` is C's pow, which
    differs from the array's square in the last bit for about one number in a thousand)."""
    sets = np.random.default_rng(0).random((10_000, 2, 1)) * 3.0
    squared = pairwise_squared_distances(sets, sets)
    batched = median_bandwidth(squared)
    alone = np.array([median_bandwidth(one) for one in squared])
    np.testing.assert_array_equal(alone, batched)
