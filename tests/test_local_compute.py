"""Local iterations cost compute time: ``[compute] seconds_per_local_iteration`` is charged once per
local iteration a slot computes (``ProtocolKind.slot_local_iterations``: L natural-gradient, SGD or
SVGD steps, with the paper DSVGD's fit iterations; 1 for an exact update), on top of ``[compute]
seconds_per_iteration``, on both engines, on the walk and with the server."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.network.links import LinkModel, check_horizon
from gossipsim.world.world import build_world
from tests.helpers import base_scenario, validate_error

#: dyadic times: every difference of two slot times is exact
PER_SLOT, PER_LOCAL = 0.5, 0.125
TABLES = ("metrics", "runs", "requests", "visits")


def _natural_gradient(local_iterations: int, compute: dict, runs: int = 16, **sections) -> dict:
    raw = base_scenario(
        scenario={"name": "t", "seed": 5, "runs": runs, "iterations": 40},
        model={"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
        data={"points_per_node": 5, "theta": 0.5},
        protocol={"local_iterations": local_iterations, "samples": 4},
        compute=compute,
        **sections,
    )
    return raw


@pytest.mark.parametrize("engine", ["event", "vectorized"])
@pytest.mark.parametrize("architecture", ["walk", "server"])
def test_a_slot_computes_for_each_of_its_local_iterations(engine, architecture):
    compute = {"seconds_per_iteration": PER_SLOT, "seconds_per_local_iteration": PER_LOCAL}
    raw = _natural_gradient(6, compute)
    raw["protocol"]["architecture"] = architecture
    res = gs.run(raw, engine=engine, plots=False)
    assert res.engines == {"t": engine}
    for _, run in res.metrics.groupby("run"):
        spent = np.diff(run["time"].to_numpy(), prepend=0.0)  # instantaneous links
        np.testing.assert_array_equal(spent, PER_SLOT + 6 * PER_LOCAL)


def test_both_engines_give_the_same_tables_and_links_add_their_hops():
    compute = {"seconds_per_local_iteration": PER_LOCAL}
    links = {"rate_bps": 1024.0, "latency_s": 0.25}
    event = gs.run(_natural_gradient(3, compute, links=links), engine="event", plots=False)
    fast = gs.run(_natural_gradient(3, compute, links=links), engine="vectorized", plots=False)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(event, table), getattr(fast, table), check_exact=True)
    hop = 128 / 1024.0 + 0.25  # a Beta's two natural parameters at 64 bits each
    for _, run in event.metrics.groupby("run"):
        holders = run["holder"].to_numpy()
        moved = np.r_[False, holders[1:] != holders[:-1]]
        spent = np.diff(run["time"].to_numpy(), prepend=0.0)
        np.testing.assert_array_equal(spent, 3 * PER_LOCAL + np.where(moved, hop, 0.0))


def test_per_node_times_add_the_local_iterations_at_every_node():
    times = [0.5, 0.25, 1.0, 2.0, 0.125, 4.0, 0.5, 0.25, 1.0, 2.0]
    compute = {"seconds_per_iteration": times, "seconds_per_local_iteration": PER_LOCAL}
    res = gs.run(_natural_gradient(4, compute, runs=3), engine="event", plots=False)
    for _, run in res.metrics.groupby("run"):
        spent = np.diff(run["time"].to_numpy(), prepend=0.0)
        np.testing.assert_array_equal(spent, [times[h] + 4 * PER_LOCAL for h in run["holder"]])


def test_zero_seconds_per_local_iteration_changes_no_number():
    plain = gs.run(_natural_gradient(3, {"seconds_per_iteration": PER_SLOT}, runs=3), plots=False)
    zero = {"seconds_per_iteration": PER_SLOT, "seconds_per_local_iteration": 0.0}
    same = gs.run(_natural_gradient(3, zero, runs=3), plots=False)
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(plain, table), getattr(same, table), check_exact=True)


@pytest.mark.parametrize(
    ("model", "data", "protocol", "expected"),
    [
        ({"kind": "beta-bernoulli"}, {"points_per_node": 5}, {}, 1),  # exact conjugate update
        ({"kind": "beta-exponential"}, {"points_per_node": 5, "theta": 0.5},
         {"local_iterations": 7}, 7),
        ({"kind": "logistic-regression"}, {"dataset": "synthetic", "points_per_node": 5, "features": 2},
         {"kind": "fedavg", "local_iterations": 5}, 5),
        ({"kind": "logistic-regression"}, {"dataset": "synthetic", "points_per_node": 5, "features": 2},
         {"kind": "dsvgd", "particles": 4, "local_iterations": 3}, 3),
        ({"kind": "logistic-regression"}, {"dataset": "synthetic", "points_per_node": 5, "features": 2},
         {"kind": "dsvgd", "variant": "paper", "particles": 4, "local_iterations": 3,
          "fit_iterations": 2}, 5),
        ({"kind": "logistic-regression"}, {"dataset": "synthetic", "points_per_node": 5, "features": 2},
         {"kind": "svgd", "particles": 4}, 1),
    ],
)  # fmt: skip
def test_what_each_protocol_counts_as_a_slots_local_iterations(model, data, protocol, expected):
    raw = base_scenario(
        model=model, data=data, protocol=protocol,
        compute={"seconds_per_iteration": 0.5, "seconds_per_local_iteration": 0.25},
    )  # fmt: skip
    (variant,) = gs.load_scenario(raw).variants
    assert variant.scenario.local_iterations_per_slot == expected
    assert variant.scenario.local_compute_seconds == 0.25 * expected
    assert build_world(variant.scenario).compute_seconds == 0.5 + 0.25 * expected


def test_the_horizon_counts_the_local_iterations(tmp_path, capsys):
    links = LinkModel(1e3, 0.0)
    bound = check_horizon(10, 0.5, links, 128.0, local=(0.25, 8))
    assert bound == pytest.approx(10 * (0.5 + 2.0 + 0.128))
    compute = {"seconds_per_local_iteration": 1e306}
    err = validate_error(_natural_gradient(1000, compute), tmp_path, capsys)
    assert (
        "compute.seconds_per_local_iteration: 1e+306 s × 1000 local iterations per slot" in err
    ), err
    timed = _natural_gradient(10, {"seconds_per_local_iteration": 0.5},
                              unlearning=[{"node": 1, "at_time": 201.0}])  # fmt: skip
    err = validate_error(timed, tmp_path, capsys)
    assert "unlearning[0].at_time: is 201 s, after the longest a run can last (200 s" in err, err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (-1.0, "compute.seconds_per_local_iteration: must be a number >= 0 (got -1)"),
        ("fast", "compute.seconds_per_local_iteration: must be a number >= 0 (got 'fast')"),
    ],
)
def test_bad_seconds_per_local_iteration_is_one_line(tmp_path, capsys, value, expected):
    raw = _natural_gradient(2, {"seconds_per_local_iteration": value})
    err = validate_error(raw, tmp_path, capsys)
    assert expected in err, err
