"""From a run's raw record to its rows of the three tables (runs, requests, metrics): the
definitions of docs/architecture.md (cover, convergence, latency) applied to what either engine
recorded. Both engines call :func:`measure`.

A run whose KL to its target (of the protocol's state, or of its retrain baseline's) is NaN or
infinite at some slot of the run has a divergence float64 could not compute: it fails with a
:class:`NonFiniteKL` naming the first such slot and its cause (the executors list it in
failures.csv with its seed; its rows are in none of the tables), rather than leaving numbers in
the tables that are not a divergence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gossipsim.cover.iteration import cover_iteration
from gossipsim.engine.records import Arrival, RunRecord
from gossipsim.measurement.metrics import (
    Segments,
    kl_segments,
    recorded_slots,
    reference_level,
    reference_slots,
)
from gossipsim.measurement.outputs import RunOutput, check_finite, particle_columns
from gossipsim.protocols import protocol_kind
from gossipsim.states.representations import Representation, Target, representation
from gossipsim.world.world import World, node_labels


def target_trace(
    world: World, data: Any, arrivals: list[tuple[int, int, int]], state: Representation
) -> tuple[np.ndarray, list[Target]]:
    """Slots at which the target changes and the exact targets from then on, for the requests
    ``arrivals`` that reached the run, as (slot, request index, node)."""
    forgotten: frozenset[int] = frozenset()
    slots = [0]
    targets = [state.target(world.model, data, forgotten)]
    for slot, _, node in sorted(arrivals):
        forgotten = forgotten | {node}
        targets.append(state.target(world.model, data, forgotten))
        slots.append(slot)
    return np.asarray(slots, dtype=np.int64), targets


def measure(
    world: World,
    data: Any,
    record: RunRecord,
    stats: dict[str, float],
    run: int,
    seed: int,
    segments: dict[str, Segments] | None = None,
) -> RunOutput:
    """The run's rows of the three tables, from its raw record (both engines use this).

    ``segments`` are the divergences of the traces' worlds when they were computed as the states
    were made (:mod:`gossipsim.execution.vectorized.trace`; the traces then hold only the states read here)."""
    sc = world.scenario
    tol = sc.metrics.tolerance
    n = record.slots
    state = representation(record.representation)  # what the traces hold, and how to judge it
    arrivals = [(a.slot, a.request, a.node) for a in record.arrivals]
    target_slots, targets = target_trace(world, data, arrivals, state)
    divergence = state.divergence_name
    traces = record.traces
    excess = sc.metrics.excess
    retrain: Segments | None = None
    if segments is not None:
        main = segments["main"]
        if "retrain" in segments and segments["retrain"].starts.size:
            retrain = segments["retrain"]
    else:
        with np.errstate(all="ignore"):  # a non-finite KL is counted (nonfinite_kl_slots)
            main = kl_segments(
                traces["main"], target_slots, targets, excess=excess, divergence=state.divergence
            )
            if "retrain" in traces and len(traces["retrain"]):
                retrain = kl_segments(
                    traces["retrain"], target_slots, targets, excess=excess,
                    divergence=state.divergence,
                )  # fmt: skip
    name = divergence.upper()
    check_finite(main, traces["main"], targets, n, "protocol's state", name)
    if retrain is not None:
        check_finite(retrain, traces["retrain"], targets, n, "retrain baseline's state", name)
    end_times = record.end_times

    def time_of(slot: int | None) -> float:
        return float(end_times[slot - 1]) if slot is not None else np.nan

    window = sc.metrics.latency_window
    final = record.stopped_early  # nothing could change any more: a stretch may end with the run
    arrival_slots = sorted({a.slot for a in record.arrivals})

    def threshold(before: int) -> float:
        """The tolerance of the request(s) arriving before slot ``before`` (of convergence for
        ``before`` = the first arrival, or n + 1 without requests)."""
        if tol is not None:
            return tol
        since = max([s for s in arrival_slots if s < before], default=1)
        level = reference_level(main, *reference_slots(since, before))
        return sc.metrics.relative_tolerance * level

    def settled(segments: Segments, from_slot: int, limit: float) -> int | None:
        return segments.first_settled(limit, from_slot, window, n, final=final)

    converged_under = threshold(arrival_slots[0] if arrival_slots else n + 1)
    converged = settled(main, 1, converged_under)
    request_rows: list[dict[str, Any]] = []
    completions: list[int] = []
    for arrival in sorted(record.arrivals, key=lambda a: a.request):
        limit = threshold(arrival.slot)
        done_at = settled(main, arrival.slot, limit)
        retrain_at = settled(retrain, arrival.slot, limit) if retrain is not None else None
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
                    limit, max(arrival.slot - window, 1), arrival.slot - 1
                ),
                "latency_threshold": limit,
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
                    "latency_threshold": np.nan,
                    "removal_latency": np.nan,
                    "removal_latency_time": np.nan,
                    "latency": np.nan,
                    "latency_time": np.nan,
                    "retrain_latency": np.nan,
                    "retrain_latency_time": np.nan,
                }
            )
    request_rows.sort(key=lambda row: int(row["request"]))

    # a centralised protocol has no walk: no cover time (its visits are not written either)
    walks = not protocol_kind(sc.protocol.kind).centralised
    cover = cover_iteration(record.holders, world.nodes) if walks else None
    extra = [s for s in [converged, *completions] if s is not None and s >= 1]
    slots = recorded_slots(n, sc.metrics.record_every, extra)
    idx = slots - 1
    labels = node_labels(world)
    metrics = {
        "iteration": slots,
        "time": end_times[idx],
        "holder": labels[record.holders[idx]],
        divergence: main.at(slots),
        "bits": record.bits[idx],
    }
    for column, values in record.series.items():  # the protocol's own, per slot
        metrics[column] = np.asarray(values)[idx]
    has_best = any(t.best_family_kl is not None for t in targets)
    if has_best:
        metrics["best_family_kl"] = main.best_at(slots)
    requested = frozenset(request.node for request in world.requests)
    columns = state.columns(world.model, requested)
    if columns:
        trace = traces["main"]
        evaluated = state.evaluate(world.model, data, trace.states[trace.at(slots)], requested)
        for column in columns:
            metrics[column] = evaluated[column]
    with_retrain = retrain is not None or bool(world.requests and sc.protocol.retrain_baseline)
    if with_retrain:
        metrics[f"retrain_{divergence}"] = (
            retrain.at(slots) if retrain is not None else np.full(slots.size, np.nan)
        )
    if with_retrain and columns and state.evaluates_retrain:
        metrics.update(_retrain_metrics(world, data, traces.get("retrain"), slots, state, columns))
    run_row = {
        "seed": seed,
        "cover_iteration": cover if cover is not None else np.nan,
        "convergence_iteration": converged if converged is not None else np.nan,
        "convergence_time": time_of(converged),
        "convergence_threshold": converged_under,
        "iterations": n,
        "time": float(end_times[-1]),
        "bits": float(record.bits[-1]),
        "best_family_kl": targets[-1].best_family_kl if has_best else np.nan,
        "damped_steps": stats.get("damped_steps", np.nan),
        "domain_recoveries": stats.get("domain_recoveries", np.nan),
        "nonfinite_kl_slots": main.nonfinite_slots(n),
    }
    if world.links.lossy or world.failures is not None:  # only then: tables keep their columns
        run_row["retransmissions"] = record.retransmissions
        run_row["lost_messages"] = sum(1 for e in record.events if e.kind == "lost")
    if world.failures is not None:
        # a token restarted from a copy: after a lost message, or a holder that went down with it
        run_row["regenerations"] = sum(
            1 for e in record.events if e.kind in ("lost", "holder-lost")
        )
        run_row["token_wait_s"] = record.token_wait_seconds
        run_row["all_down_s"] = record.all_down_seconds
    # every other counter the protocol reports becomes a column of runs.csv (Protocol.stats)
    run_row.update({key: value for key, value in stats.items() if key not in run_row})
    visits = np.bincount(record.holders, minlength=world.nodes)
    particles = None
    if state.particle_sets and sc.metrics.keeps_particles(run):
        particles = particle_columns(traces, sc.metrics.particles)
    return RunOutput(run, seed, run_row, request_rows, metrics, visits, particles)


def _retrain_metrics(
    world: World,
    data: Any,
    trace: Any,
    slots: np.ndarray,
    state: Representation,
    columns: tuple[str, ...],
) -> dict[str, np.ndarray]:
    """The held-out metrics of the retrain baseline's states at ``slots`` (``retrain_`` + each
    column; NaN before its first record)."""
    out = {f"retrain_{column}": np.full(slots.size, np.nan) for column in columns}
    if trace is None or not len(trace):
        return out
    index = trace.at(slots)
    present = index >= 0
    if present.any():
        requested = frozenset(request.node for request in world.requests)
        evaluated = state.evaluate(world.model, data, trace.states[index[present]], requested)
        for column in columns:
            out[f"retrain_{column}"][present] = evaluated[column]
    return out


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


# ------------------------------------------------------------------------- batches of runs at once
