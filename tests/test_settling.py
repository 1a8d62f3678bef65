"""Relative tolerances (issue 30, item 6): a particle study settles against ρ × the run's own
divergence before the request, so its latencies mean something without knowing the KSD's scale.

The thresholds and latencies are recomputed here from metrics.csv (every slot recorded) by a
plain loop: the median of the slot-by-slot values of the window, the first slot from which the
value stays under ρ × it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.errors import ConfigError
from gossipsim.measurement.metrics import Segments, reference_level, reference_slots
from gossipsim.study.sections import parse_scenario
from tests.helpers import base_scenario, validate_error
from tests.test_batched_steps import unlearning_beta

# ------------------------------------------------------------------------------ pure functions


def test_reference_level_is_the_median_of_the_slots_values():
    starts = np.array([1, 4, 5, 9])
    values = np.array([8.0, 2.0, 5.0, 1.0])
    segments = Segments(starts, values, np.full(4, np.nan))
    per_slot = {
        slot: values[np.searchsorted(starts, slot, side="right") - 1] for slot in range(1, 13)
    }
    for first in range(1, 12):
        for last in range(first, 13):
            expected = np.median([per_slot[s] for s in range(first, last + 1)])
            assert reference_level(segments, first, last) == expected, (first, last)
    assert math.isnan(reference_level(segments, 5, 4))  # empty
    assert math.isnan(
        reference_level(Segments(np.array([3]), np.array([1.0]), np.full(1, np.nan)), 1, 4)
    )
    bad = Segments(starts, np.array([8.0, np.inf, 5.0, 1.0]), np.full(4, np.nan))
    assert math.isnan(reference_level(bad, 3, 6)) and reference_level(bad, 5, 8) == 5.0


@pytest.mark.parametrize(
    ("since", "before", "window"),
    [(1, 601, (541, 600)), (1, 2, (1, 1)), (1, 12, (10, 11)), (601, 1201, (1141, 1200)),
     (5, 5, (5, 4)), (1, 1, (1, 0))],
)  # fmt: skip
def test_reference_slots_are_the_last_tenth_rounded_up(since, before, window):
    assert reference_slots(since, before) == window


# -------------------------------------------------------------------------------- settings


def _mixture(**metrics: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "mix", "seed": 3, "runs": 2, "iterations": 240},
        "topology": {"kind": "ring", "nodes": 4},
        "model": {"kind": "gaussian-mixture"},
        "data": {"components": 2},
        "protocol": {"kind": "dsvgd", "particles": 12, "step_size": 0.2},
        "metrics": {"record_every": 1, **metrics},
        "unlearning": [{"node": 3, "at_iteration": 121}],
    }


def test_auto_is_relative_for_the_ksd_and_absolute_for_a_kl():
    assert parse_scenario(_mixture()).metrics.tolerance is None
    assert parse_scenario(_mixture(tolerance=0.5)).metrics.tolerance == 0.5
    assert parse_scenario(base_scenario(metrics={})).metrics.tolerance == 1e-9
    relative = parse_scenario(base_scenario(metrics={"tolerance": "relative"})).metrics
    assert relative.tolerance is None and relative.relative_tolerance == 2.0


@pytest.mark.parametrize(
    ("metrics", "key", "words"),
    [
        ({"tolerance": 1e-6, "relative_tolerance": 3}, "metrics.relative_tolerance",
         'applies to tolerance = "relative" only'),
        ({"relative_tolerance": 3}, "metrics.relative_tolerance", "absolute threshold"),
        ({"tolerance": "relative", "relative_tolerance": 0.5}, "metrics.relative_tolerance", ">= 1"),
        ({"tolerance": "loose"}, "metrics.tolerance", "relative"),
    ],
)  # fmt: skip
def test_bad_tolerances_are_one_line(tmp_path, capsys, metrics, key, words):
    line = validate_error(base_scenario(metrics=metrics), tmp_path, capsys)
    assert f"error: {key}:" in line and words in line, line


# ------------------------------------------------------------------------- what runs measure


def _first_settled(values: pd.Series, slots: pd.Series, since: int, limit: float) -> float:
    """The first slot ≥ ``since`` whose value is ≤ ``limit`` (settled with a window of one slot,
    the DSVGD default)."""
    below = (values <= limit) & (slots >= since)
    return float(slots[below].iloc[0]) if below.any() else math.nan


def _check_relative(result: Any, rho: float = 2.0) -> int:
    """Each run's thresholds and latencies against a plain recomputation; returns the number of
    requests served by the KSD rule (protocol and retraining)."""
    served = 0
    for (variant, run), rows in result.metrics.groupby(["variant", "run"]):
        rows = rows.sort_values("iteration")
        slots = rows.iteration
        assert (slots.diff().dropna() == 1).all()  # every slot recorded
        requests = result.requests[
            (result.requests.variant == variant) & (result.requests.run == run)
        ]
        for _, request in requests.iterrows():
            r = int(request.request_iteration)
            count = r - 1
            window = rows[(slots >= r - math.ceil(count / 10)) & (slots <= r - 1)]
            limit = rho * float(np.median(window.ksd))
            assert request.latency_threshold == pytest.approx(limit, rel=1e-12)
            for column, divergence in (("latency", "ksd"), ("retrain_latency", "retrain_ksd")):
                first = _first_settled(rows[divergence], slots, r, limit)
                expected = first - r + 1 if not math.isnan(first) else math.nan
                got = request[column]
                assert (pd.isna(got) and math.isnan(expected)) or got == expected, (column, got)
                served += not math.isnan(expected)
        first_request = int(requests.request_iteration.min())
        window = rows[(slots >= first_request - math.ceil((first_request - 1) / 10))
                      & (slots < first_request)]  # fmt: skip
        threshold = rho * float(np.median(window.ksd))
        runs = result.runs
        run_row = runs[(runs.variant == variant) & (runs.run == run)].iloc[0]
        assert run_row.convergence_threshold == pytest.approx(threshold, rel=1e-12)
        assert run_row.convergence_iteration == _first_settled(rows.ksd, slots, 1, threshold)
    return served


@pytest.mark.parametrize("engine", ["event", "vectorized"])
def test_particle_latencies_are_judged_against_the_run_s_own_level(engine):
    result = gs.run(_mixture(), engine=engine)
    assert _check_relative(result) >= 3  # the rule serves requests (4 latencies in all)


def test_both_engines_give_the_same_relative_latencies():
    event, vectorized = (gs.run(_mixture(), engine=e) for e in ("event", "vectorized"))
    pd.testing.assert_frame_equal(event.requests, vectorized.requests)
    pd.testing.assert_frame_equal(event.runs, vectorized.runs)


def test_rho_scales_the_threshold():
    loose = gs.run(_mixture(relative_tolerance=4.0), engine="event")
    assert _check_relative(loose, rho=4.0) >= 3


def test_a_kl_protocol_may_settle_relatively_on_either_engine():
    """Exact conjugate G-FVL: the vectorized engine measures each run as the event engine does."""
    raw = base_scenario(
        scenario={"name": "g", "seed": 2, "runs": 16, "iterations": 300},
        metrics={"tolerance": "relative"},
        unlearning=[{"node": 3, "at_iteration": 150}],
    )
    event, vectorized = (gs.run(raw, engine=e) for e in ("event", "vectorized"))
    pd.testing.assert_frame_equal(event.requests, vectorized.requests)
    requests = event.requests
    # learning had converged exactly (the exact sums' KL is 0), so the level is 0, and the
    # unlearning latency is the removal latency, as for an absolute tolerance
    assert (requests.latency_threshold == 0.0).all()
    assert (requests.latency == requests.removal_latency).all()


def test_natural_gradient_steps_settle_relatively_on_the_event_engine_only(tmp_path):
    raw = unlearning_beta(estimator="reinforce", learning_rate=0.2)
    raw["metrics"] = {**raw["metrics"], "tolerance": "relative"}
    raw["scenario"]["runs"] = 16
    result = gs.run(raw)  # auto: the event engine, which says why
    (note,) = result.engines.values()
    assert note.startswith("event") and 'tolerance = "relative"' in note, note
    assert result.requests.latency_threshold.notna().all()
    with pytest.raises(ConfigError, match='tolerance = "relative"'):
        gs.run(raw, engine="vectorized", out=tmp_path / "v")
