"""From a run's raw record to its rows of the three tables (runs, requests, metrics): the
definitions of docs/architecture.md (cover, convergence, latency) applied to what either engine
recorded. Both engines call :func:`measure`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cover.iteration import cover_iteration
from .engine import Arrival, RunRecord
from .metrics import Segments, kl_segments, recorded_slots
from .representations import REPRESENTATIONS, Target
from .world import World, node_labels


@dataclass
class RunOutput:
    """The rows one run contributes to the three tables (columns as arrays / dicts)."""

    run: int
    seed: int
    run_row: dict[str, Any]
    request_rows: list[dict[str, Any]]
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # slots each node held the token, by node index

    @property
    def runs(self) -> tuple[int, ...]:
        return (self.run,)


@dataclass
class BatchOutput:
    """The rows of many runs of one variant (the same values the runs' :class:`RunOutput` would
    hold), runs.csv and requests.csv column by column (the vectorised engine's batches) or row by
    row (runs measured one by one and committed together, :meth:`from_runs`)."""

    runs: tuple[int, ...]  # run indices, ascending
    run_columns: dict[str, np.ndarray]  # runs.csv columns after variant and run, one entry per run
    metric_runs: np.ndarray  # the run index of each metrics row
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # summed over the runs
    #: requests.csv columns after the variant (``run`` first), one entry per request of each run
    request_columns: dict[str, np.ndarray] = field(default_factory=dict)
    #: runs.csv rows after the variant (``run`` first), for runs measured one by one
    run_rows: list[dict[str, Any]] = field(default_factory=list)
    #: requests.csv rows after the variant (``run`` first), for runs measured one by one
    request_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run(self) -> int:
        return self.runs[0]

    @classmethod
    def from_runs(cls, outputs: list[RunOutput]) -> BatchOutput:
        """Runs measured one by one (same metric columns) as one batch, in run order: their rows
        as they are, their metric columns concatenated, their visits summed."""
        outputs = sorted(outputs, key=lambda out: out.run)
        names = list(outputs[0].metrics)
        sizes = [len(out.metrics[names[0]]) if names else 0 for out in outputs]
        runs = np.asarray([out.run for out in outputs], dtype=np.int64)
        visits = outputs[0].visits.copy()
        for out in outputs[1:]:
            visits += out.visits
        return cls(
            runs=tuple(runs.tolist()),
            run_columns={},
            metric_runs=np.repeat(runs, sizes),
            metrics={
                name: np.concatenate([out.metrics[name] for out in outputs]) for name in names
            },
            visits=visits,
            run_rows=[{"run": out.run, **out.run_row} for out in outputs],
            request_rows=[{"run": out.run, **row} for out in outputs for row in out.request_rows],
        )


def _target_trace(world: World, data: Any, record: RunRecord) -> tuple[np.ndarray, list[Target]]:
    """Slots at which the target changes and the exact targets from then on."""
    forgotten: frozenset[int] = frozenset()
    slots = [0]
    targets = [world.model.target(data, forgotten)]
    for arrival in sorted(record.arrivals, key=lambda a: (a.slot, a.request)):
        forgotten = forgotten | {arrival.node}
        targets.append(world.model.target(data, forgotten))
        slots.append(arrival.slot)
    return np.asarray(slots, dtype=np.int64), targets


def measure(
    world: World, data: Any, record: RunRecord, stats: dict[str, float], run: int, seed: int
) -> RunOutput:
    """The run's rows of the three tables, from its raw record (both engines use this)."""
    sc = world.scenario
    tol = sc.metrics.tolerance
    n = record.slots
    target_slots, targets = _target_trace(world, data, record)
    state = REPRESENTATIONS[record.representation]  # what the traces hold, and how to judge it
    traces = record.traces
    excess = sc.metrics.excess
    with np.errstate(all="ignore"):  # a non-finite KL is counted (nonfinite_kl_slots), not warned
        main = kl_segments(
            traces["main"], target_slots, targets, excess=excess, divergence=state.divergence
        )
        retrain: Segments | None = None
        if "retrain" in traces and len(traces["retrain"]):
            retrain = kl_segments(
                traces["retrain"], target_slots, targets, excess=excess, divergence=state.divergence
            )
    end_times = record.end_times

    def time_of(slot: int | None) -> float:
        return float(end_times[slot - 1]) if slot is not None else np.nan

    window = sc.metrics.latency_window
    final = record.stopped_early  # nothing could change any more: a stretch may end with the run

    def settled(segments: Segments, from_slot: int) -> int | None:
        return segments.first_settled(tol, from_slot, window, n, final=final)

    converged = settled(main, 1)
    request_rows: list[dict[str, Any]] = []
    completions: list[int] = []
    for arrival in sorted(record.arrivals, key=lambda a: a.request):
        done_at = settled(main, arrival.slot)
        retrain_at = settled(retrain, arrival.slot) if retrain is not None else None
        removed_at = record.removals.get(arrival.node)
        completions += [s for s in (done_at, retrain_at, removed_at) if s is not None]
        request_rows.append(
            {
                "request": arrival.request,
                "node": world.indexed.labels[arrival.node],
                "request_iteration": arrival.slot,
                "request_time": arrival.time,
                # the KL had settled under the tolerance in the window before the request: if not,
                # a KL-based latency times the learning or the estimator noise, not the unlearning
                "settled_at_request": main.all_at_or_below(
                    tol, max(arrival.slot - window, 1), arrival.slot - 1
                ),
                "removal_latency": _latency(removed_at, arrival.slot),
                "removal_latency_time": _latency_time(removed_at, arrival, time_of),
                "latency": _latency(done_at, arrival.slot),
                "latency_time": _latency_time(done_at, arrival, time_of),
                "retrain_latency": _latency(retrain_at, arrival.slot),
                "retrain_latency_time": _latency_time(retrain_at, arrival, time_of),
            }
        )
    delivered = {a.request for a in record.arrivals}
    for r, req in enumerate(world.requests):
        if r not in delivered:  # the run ended before the request arrived
            request_rows.append(
                {
                    "request": r,
                    "node": world.indexed.labels[req.node],
                    "request_iteration": np.nan,
                    "request_time": np.nan,
                    "settled_at_request": None,
                    "removal_latency": np.nan,
                    "removal_latency_time": np.nan,
                    "latency": np.nan,
                    "latency_time": np.nan,
                    "retrain_latency": np.nan,
                    "retrain_latency_time": np.nan,
                }
            )
    request_rows.sort(key=lambda row: int(row["request"]))

    cover = cover_iteration(record.holders, world.nodes)
    extra = [s for s in [converged, *completions] if s is not None and s >= 1]
    slots = recorded_slots(n, sc.metrics.record_every, extra)
    idx = slots - 1
    labels = node_labels(world)
    metrics = {
        "iteration": slots,
        "time": end_times[idx],
        "holder": labels[record.holders[idx]],
        "kl": main.at(slots),
        "bits": record.bits[idx],
    }
    has_best = any(t.best_family_kl is not None for t in targets)
    if has_best:
        metrics["best_family_kl"] = main.best_at(slots)
    columns = world.model.evaluation_columns()
    if columns:
        trace = traces["main"]
        evaluated = state.evaluate(world.model, data, trace.states[trace.at(slots)])
        for column in columns:
            metrics[column] = evaluated[column]
    if retrain is not None or (world.requests and sc.protocol.retrain_baseline):
        metrics["retrain_kl"] = (
            retrain.at(slots) if retrain is not None else np.full(slots.size, np.nan)
        )
    run_row = {
        "seed": seed,
        "cover_iteration": cover if cover is not None else np.nan,
        "convergence_iteration": converged if converged is not None else np.nan,
        "convergence_time": time_of(converged),
        "iterations": n,
        "time": float(end_times[-1]),
        "bits": float(record.bits[-1]),
        "best_family_kl": targets[-1].best_family_kl if has_best else np.nan,
        "damped_steps": stats.get("damped_steps", np.nan),
        "domain_recoveries": stats.get("domain_recoveries", np.nan),
        "nonfinite_kl_slots": main.nonfinite_slots(n),
    }
    # every other counter the protocol reports becomes a column of runs.csv (Protocol.stats)
    run_row.update({key: value for key, value in stats.items() if key not in run_row})
    visits = np.bincount(record.holders, minlength=world.nodes)
    return RunOutput(run, seed, run_row, request_rows, metrics, visits)


def _latency(done_at: int | None, request_slot: int) -> float:
    """i* − r + 1 (slots); 0 when the removal slot is r − 1 (nothing to remove on arrival)."""
    return float(done_at - request_slot + 1) if done_at is not None else np.nan


def _latency_time(
    done_at: int | None, arrival: Arrival, time_of: Callable[[int | None], float]
) -> float:
    """Simulated seconds from the request's arrival to the end of slot i* (0 if nothing to do)."""
    if done_at is None:
        return np.nan
    if done_at < arrival.slot:
        return 0.0
    return time_of(done_at) - arrival.time
