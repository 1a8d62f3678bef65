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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gossipsim.cover.iteration import cover_iteration
from gossipsim.engine.slottables import SlotTable
from gossipsim.engine.token import Arrival, RunRecord
from gossipsim.measurement.metrics import (
    Segments,
    kl_segments,
    recorded_slots,
    reference_level,
    reference_slots,
)
from gossipsim.protocols import protocol_kind
from gossipsim.states.representations import REPRESENTATIONS, Representation, Target, representation
from gossipsim.world.world import World, node_labels


class NonFiniteKL(ArithmeticError):
    """A run whose KL to its target became NaN or infinite: the run fails with this message
    (:func:`nonfinite_kl`), the same from either engine."""


def nonfinite_kl(
    which: str, slot: int, value: float, state: np.ndarray, target: Target, name: str = "KL"
) -> NonFiniteKL:
    """The failure of a run whose ``which`` (the protocol's state, or the retrain baseline's) has
    the non-finite KL ``value`` to ``target`` from ``slot`` on, with its cause: a state that is not
    finite, a KL beyond float64's largest number, or terms of the KL beyond float64's range (an
    ∞ − ∞ or a 0·∞)."""
    eta = np.asarray(state, dtype=float)
    target_eta = getattr(target, "eta", None)
    where = f"state {_numbers(eta)}" + (
        f", target {_numbers(target_eta)}" if target_eta is not None else ""
    )
    if not np.all(np.isfinite(eta)):
        cause = "the state's numbers are not finite"
    elif value == np.inf:
        cause = f"the {name} is larger than float64's largest number ({np.finfo(float).max:.3g})"
    else:
        cause = f"terms of the {name} are beyond float64's range (an ∞ − ∞ or 0·∞)"
    what = "NaN" if np.isnan(value) else f"{value:g}"
    return NonFiniteKL(
        f"the {name} of the {which} to its target is {what} from slot {slot} ({where}): {cause}"
    )


def _numbers(values: Any) -> str:
    flat = np.asarray(values, dtype=float).ravel()
    shown = ", ".join(f"{x:.6g}" for x in flat[:4])
    return f"({shown}{', ...' if flat.size > 4 else ''})"


def _check_finite(
    segments: Segments,
    trace: Any,
    targets: list[Target],
    last_slot: int,
    which: str,
    name: str = "KL",
) -> None:
    """Raise :class:`NonFiniteKL` for the first segment of slots 1..``last_slot`` whose KL is not
    a number."""
    m = segments.first_nonfinite(last_slot)
    if m is None:
        return
    assert segments.state_index is not None and segments.target_index is not None
    state = trace.states[int(segments.state_index[m])]
    target = targets[int(segments.target_index[m])]
    raise nonfinite_kl(which, int(segments.starts[m]), float(segments.kl[m]), state, target, name)


@dataclass
class RunOutput:
    """The rows one run contributes to the three tables (columns as arrays / dicts)."""

    run: int
    seed: int
    run_row: dict[str, Any]
    request_rows: list[dict[str, Any]]
    metrics: dict[str, np.ndarray]
    visits: np.ndarray  # slots each node held the token, by node index
    #: the run's particle sets for particles.csv (:func:`particle_columns`), None when it keeps
    #: none (``[metrics] particles``, ``particle_runs``)
    particles: dict[str, np.ndarray] | None = None

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
    #: runs of the batch that failed (not in ``runs``, nor in any column), by run index: a KL that
    #: is not a number (:class:`NonFiniteKL`)
    failures: dict[int, NonFiniteKL] = field(default_factory=dict)
    #: runs.csv rows after the variant (``run`` first), for runs measured one by one
    run_rows: list[dict[str, Any]] = field(default_factory=list)
    #: requests.csv rows after the variant (``run`` first), for runs measured one by one
    request_rows: list[dict[str, Any]] = field(default_factory=list)
    #: particles.csv columns after the variant (``run`` first; :func:`particle_columns`) of the
    #: runs that keep their particle sets; empty when none does
    particles: dict[str, np.ndarray] = field(default_factory=dict)

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
            particles=joined_particles(
                [(out.run, out.particles) for out in outputs if out.particles is not None]
            ),
        )


#: the worlds of particles.csv, in the order of a run's rows: the protocol's, the retrain baseline's
PARTICLE_WORLDS = ("main", "retrain")
#: the columns of a run's particle sets (:func:`particle_columns`); ``theta`` is ``(rows, d)``
PARTICLE_FIELDS = ("iteration", "world", "particle", "theta")


def particle_columns(traces: dict[str, Any], which: str) -> dict[str, np.ndarray]:
    """A run's particle sets as particles.csv's columns: for each world of
    :data:`PARTICLE_WORLDS` with a trace, the set in force after each recorded slot (``which =
    "recorded"``: every slot the trace holds, the last record of a slot being the one in force, as
    :meth:`~gossipsim.engine.protocol_api.StateTrace.at` reads it) or after its last recorded slot
    (``"final"``); a row per particle: ``iteration`` (the slot; 0 is before the first),
    ``world``, ``particle`` (0 … N − 1) and ``theta`` ``(rows, d)``."""
    iterations, worlds, indices, thetas = [], [], [], []
    for world in PARTICLE_WORLDS:
        trace = traces.get(world)
        if trace is None or not len(trace):
            continue
        slots = np.unique(trace.slots)
        if which == "final":
            slots = slots[-1:]
        states = np.asarray(trace.states[trace.at(slots)], dtype=np.float64)  # (R, N, d)
        records, count, dimension = states.shape
        iterations.append(np.repeat(slots, count))
        worlds.append(np.full(records * count, world, dtype=f"<U{max(map(len, PARTICLE_WORLDS))}"))
        indices.append(np.tile(np.arange(count, dtype=np.int64), records))
        thetas.append(states.reshape(records * count, dimension))
    if not thetas:
        return {
            "iteration": np.zeros(0, dtype=np.int64), "world": np.zeros(0, dtype="<U7"),
            "particle": np.zeros(0, dtype=np.int64), "theta": np.zeros((0, 0)),
        }  # fmt: skip
    return {
        "iteration": np.concatenate(iterations).astype(np.int64),
        "world": np.concatenate(worlds),
        "particle": np.concatenate(indices),
        "theta": np.concatenate(thetas, axis=0),
    }


def joined_particles(parts: list[tuple[int, dict[str, np.ndarray]]]) -> dict[str, np.ndarray]:
    """The particle columns of several runs (run index, :func:`particle_columns`) as one, in run
    order, with a ``run`` column first; empty without any. Runs of another dimension d cannot
    share a batch (every run of a variant has the same)."""
    parts = sorted((part for part in parts if len(part[1]["iteration"])), key=lambda p: p[0])
    if not parts:
        return {}
    return {
        "run": np.concatenate(
            [np.full(len(cols["iteration"]), run, dtype=np.int64) for run, cols in parts]
        ),
        **{
            name: np.concatenate([cols[name] for _, cols in parts], axis=0)
            for name in PARTICLE_FIELDS
        },
    }


def batches_of(outputs: list[RunOutput]) -> list[BatchOutput]:
    """Runs measured one by one as batches (:meth:`BatchOutput.from_runs`), one per set of metric
    columns (one in practice: every run of a variant has the same)."""
    groups: dict[tuple[str, ...], list[RunOutput]] = {}
    for out in outputs:
        groups.setdefault(tuple(out.metrics), []).append(out)
    return [BatchOutput.from_runs(group) for group in groups.values()]


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


def batches_with_failures(
    outputs: list[RunOutput], failures: dict[int, NonFiniteKL], nodes: int
) -> list[BatchOutput]:
    """Runs measured one by one (:func:`batches_of`) with the runs that failed attached to the
    first batch (a batch of none when every run failed)."""
    batches = batches_of(outputs) if outputs else []
    if failures:
        if not batches:  # every run failed: a batch of none
            batches = [BatchOutput((), {}, np.empty(0, dtype=np.int64), {}, np.zeros(nodes, int))]
        batches[0].failures.update(failures)
    return batches


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
    _check_finite(main, traces["main"], targets, n, "protocol's state", name)
    if retrain is not None:
        _check_finite(retrain, traces["retrain"], targets, n, "retrain baseline's state", name)
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

_NEVER = np.iinfo(np.int64).max  # no such slot


@dataclass
class BatchRecord:
    """What the vectorised engine records of a batch of runs with unlearning requests (the batch
    counterpart of :class:`~gossipsim.engine.token.RunRecord`): arrays of runs × slots, runs × records,
    ... Slots are 1-based; ``_NEVER`` (the largest int64) pads and stands for "none"."""

    runs: np.ndarray  # run indices
    seeds: np.ndarray  # their integer seeds
    walk: SlotTable  # holder, end and start time, bits sent before each slot of each run
    slots: np.ndarray  # each run's number of slots n
    arrival_slots: np.ndarray  # the requests' slots, in the order they are processed
    arrival_requests: np.ndarray  # their indices in the scenario's list of requests
    arrival_nodes: np.ndarray  # their nodes (indices)
    first_visits: np.ndarray  # runs × nodes: first slot each node holds the token
    main_slots: np.ndarray  # runs × records: slots of the protocol's trace records, in order
    main_states: np.ndarray  # runs × records × dim: the states recorded
    retrain_slots: np.ndarray | None  # the retrain baseline's trace (None: no baseline)
    retrain_states: np.ndarray | None
    removals: np.ndarray  # runs × requests (processing order): removal slot of the request's node
    datas: list[Any]  # the data of every run, or the one data set of all runs
    visits: np.ndarray  # slots each node held the token, summed over the runs


@dataclass
class _BatchSegments:
    """:class:`~gossipsim.measurement.metrics.Segments` of every run of a batch: ``kl[b, m]`` holds on slots
    ``starts[b, m]`` up to the next start (``_NEVER`` / NaN pad the rows)."""

    starts: np.ndarray
    kl: np.ndarray
    limit: int  # larger than every slot of the runs (pads are compared as this)
    state_idx: np.ndarray  # each segment's state in its run's trace
    target_idx: np.ndarray  # each segment's target (in processing order of the requests)

    def index(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The segment holding each (row, slot): the last start ≤ slot (−1: none)."""
        return _row_search(self.starts, rows, slots, self.limit)

    def at(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """KL at each (row, slot) (NaN before the first segment)."""
        idx = self.index(rows, slots)
        return np.where(idx >= 0, self.kl[rows, np.maximum(idx, 0)], np.nan)

    def first_at_or_below(self, threshold: float, from_slot: np.ndarray) -> np.ndarray:
        """Per run, :meth:`Segments.first_at_or_below`: the first slot ≥ ``from_slot`` whose value
        is ≤ ``threshold`` (``_NEVER``: none)."""
        rows = np.arange(self.starts.shape[0])
        idx = self.index(rows, np.minimum(from_slot, self.limit))
        below = self.kl <= threshold  # NaN pads are not
        here = (idx >= 0) & below[rows, np.maximum(idx, 0)]
        later = below & (np.arange(self.starts.shape[1])[None, :] > idx[:, None])
        first_later = later.argmax(axis=1)
        found = np.where(later.any(axis=1), self.starts[rows, first_later], _NEVER)
        return np.where(here, from_slot, found)

    def nonfinite_slots(self, last_slot: np.ndarray) -> np.ndarray:
        """Per run, :meth:`Segments.nonfinite_slots`."""
        valid = self.starts < _NEVER
        following = np.concatenate(
            [self.starts[:, 1:], np.full((self.starts.shape[0], 1), _NEVER)], axis=1
        )
        end = np.minimum(following, last_slot[:, None] + 1)
        lengths = np.clip(end - np.where(valid, self.starts, 0), 0, None)
        bad = valid & ~np.isfinite(self.kl)
        return np.where(bad, lengths, 0).sum(axis=1).astype(np.int64)


def _row_search(table: np.ndarray, rows: np.ndarray, values: np.ndarray, limit: int) -> np.ndarray:
    """For each (row, value), the index in ``table[row]`` (ascending, ``_NEVER``-padded) of the last
    entry ≤ value, −1 if none: one search in the flattened table, rows kept apart by an offset."""
    width = table.shape[1]
    span = limit + 1
    flat = (np.arange(table.shape[0])[:, None] * span + np.minimum(table, limit)).ravel()
    keys = rows * span + np.minimum(values, limit)
    return np.searchsorted(flat, keys, side="right") - 1 - rows * width


def _batch_segments(
    trace_slots: np.ndarray,
    trace_states: np.ndarray,
    begin: np.ndarray,
    target_slots: np.ndarray,
    kl_of: Callable[[int | None, int, np.ndarray], np.ndarray],
    n_slots: np.ndarray,
    limit: int,
) -> _BatchSegments:
    """:func:`~gossipsim.measurement.metrics.kl_segments` of every run at once: segments start at ``begin``,
    at every trace record after it and at every target change after it; each holds the last state
    recorded and the last target in force at its start. ``kl_of(run or None, target, states)`` is
    the divergence to target ``t`` (of that run's data; None: the data shared by all runs)."""
    batch = trace_slots.shape[0]
    targets = np.broadcast_to(target_slots[None, :], (batch, target_slots.size))
    after = begin[:, None]
    candidates = np.concatenate(
        [
            after,
            np.where(trace_slots > after, trace_slots, _NEVER),
            np.where((targets > after) & (targets <= n_slots[:, None]), targets, _NEVER),
        ],
        axis=1,
    )
    candidates.sort(axis=1)
    repeated = np.zeros(candidates.shape, dtype=bool)
    repeated[:, 1:] = candidates[:, 1:] == candidates[:, :-1]
    candidates[repeated] = _NEVER
    candidates.sort(axis=1)
    valid = candidates < _NEVER
    width = max(int(valid.sum(axis=1).max(initial=0)), 1)
    starts, valid = candidates[:, :width], valid[:, :width]
    rows = np.broadcast_to(np.arange(batch)[:, None], starts.shape)
    state_idx = _row_search(trace_slots, rows, starts, limit)
    target_idx = np.searchsorted(target_slots, starts, side="right") - 1
    kl = np.full(starts.shape, np.nan)
    for t in np.unique(target_idx[valid]).tolist():
        mask = valid & (target_idx == t)
        b, c = np.nonzero(mask)
        chosen = trace_states[b, state_idx[b, c]]
        shared = kl_of(None, t, chosen)
        if shared is not None:
            kl[b, c] = shared
            continue
        for run in np.unique(b).tolist():  # data drawn per run: a target per run
            mine = b == run
            kl[b[mine], c[mine]] = kl_of(run, t, chosen[mine])
    return _BatchSegments(starts, kl, limit, state_idx, target_idx)


def measure_batch(world: World, record: BatchRecord) -> BatchOutput:
    """The rows of a batch of runs with requests, from their records, column by column: the values
    :func:`measure` gives each run (the same definitions, first-passage latencies under an
    absolute tolerance: a relative one runs the event engine's :func:`measure`)."""
    sc = world.scenario
    if sc.metrics.tolerance is None:
        raise ValueError("measure_batch judges an absolute tolerance only")
    tol = sc.metrics.tolerance
    n = record.slots
    batch = n.size
    rows = np.arange(batch)
    walk = record.walk
    limit = walk.columns + 1
    at = record.arrival_slots
    arrived = at[None, :] <= n[:, None]  # runs × requests, in processing order
    target_slots = np.concatenate([[0], at]).astype(np.int64)
    kl_of = _target_kl(world, record)
    with np.errstate(all="ignore"):  # a non-finite KL is counted (nonfinite_kl_slots), not warned
        main = _batch_segments(
            record.main_slots, record.main_states, np.ones(batch, dtype=np.int64),
            target_slots, kl_of, n, limit,
        )  # fmt: skip
        retrain: _BatchSegments | None = None
        if record.retrain_slots is not None and record.retrain_states is not None and at.size:
            begin = np.where(arrived[:, 0], at[0], _NEVER)
            retrain = _batch_segments(
                record.retrain_slots, record.retrain_states, begin, target_slots, kl_of, n, limit
            )
    converged = main.first_at_or_below(tol, np.ones(batch, dtype=np.int64))

    def time_of(slot: np.ndarray) -> np.ndarray:  # end of each run's slot (NaN for none)
        ok = slot < _NEVER
        return np.where(ok, walk.end_time(rows, np.where(ok, slot, 1)), np.nan)

    request_count = len(world.requests)
    columns: dict[str, list[np.ndarray]] = {}
    extras = [converged]
    labels = node_labels(world)
    position = {int(r): p for p, r in enumerate(record.arrival_requests.tolist())}
    for r, request in enumerate(world.requests):
        p = position[r]
        a = int(at[p])
        here = arrived[:, p]
        from_slot = np.where(here, a, _NEVER)
        done = np.where(here, main.first_at_or_below(tol, from_slot), _NEVER)
        if retrain is not None:
            retrained = np.where(here, retrain.first_at_or_below(tol, from_slot), _NEVER)
        else:
            retrained = np.full(batch, _NEVER)
        removed = np.where(here, record.removals[:, p], _NEVER)
        extras += [done, retrained, removed]
        column = min(a, walk.columns)  # a request after the walk never arrives
        arrival_time = np.where(here, walk.start_time(rows, np.full(batch, column)), np.nan)
        if a >= 2 and here.any():
            settled = main.kl[rows, np.maximum(main.index(rows, np.full(batch, a - 1)), 0)] <= tol
        else:
            settled = np.zeros(batch, dtype=bool)
        row = {
            "request": np.full(batch, r, dtype=np.int64),
            "node": np.repeat(labels[request.node : request.node + 1], batch),
            "request_iteration": np.where(here, float(a), np.nan),
            "request_time": arrival_time,
            "settled_at_request": np.array(
                [
                    bool(s) if h else None
                    for s, h in zip(settled.tolist(), here.tolist(), strict=True)
                ],
                dtype=object,
            ),
            "latency_threshold": np.where(here, tol, np.nan),
        }
        for name, slot in (
            ("removal_latency", removed),
            ("latency", done),
            ("retrain_latency", retrained),
        ):
            ok = slot < _NEVER
            row[name] = np.where(ok, (slot - a + 1).astype(float), np.nan)
            row[f"{name}_time"] = np.where(
                ok, np.where(slot < a, 0.0, time_of(slot) - arrival_time), np.nan
            )
        for name, value in row.items():
            columns.setdefault(name, []).append(value)
    # requests.csv: each run's rows in request order
    request_columns: dict[str, np.ndarray] = {}
    if request_count:
        request_columns["run"] = np.repeat(record.runs, request_count)
        for name in (
            "request", "node", "request_iteration", "request_time", "settled_at_request",
            "latency_threshold", "removal_latency", "removal_latency_time", "latency",
            "latency_time",
            "retrain_latency", "retrain_latency_time",
        ):  # fmt: skip
            request_columns[name] = np.stack(columns[name], axis=1).ravel()

    visited = record.first_visits < _NEVER
    covered = np.all(visited, axis=1)
    cover = np.where(visited, record.first_visits, 0).max(axis=1)
    slot_rows, slots = _recorded_many(n, sc.metrics.record_every, np.stack(extras, axis=1))
    metrics = {
        "iteration": slots,
        "time": walk.end_time(slot_rows, slots),
        "holder": labels[walk.holder(slot_rows, slots)],
        "kl": main.at(slot_rows, slots),
        "bits": walk.bits(slot_rows, slots),
    }
    if retrain is not None or (world.requests and sc.protocol.retrain_baseline):
        metrics["retrain_kl"] = (
            retrain.at(slot_rows, slots) if retrain is not None else np.full(slots.size, np.nan)
        )
    failures = _batch_failures(world, record, main, retrain, n)
    never = converged == _NEVER
    run_columns = {
        "seed": record.seeds,
        "cover_iteration": np.where(covered, cover, np.nan),
        "convergence_iteration": np.where(never, np.nan, converged),
        "convergence_time": time_of(converged),
        "convergence_threshold": np.full(batch, tol, dtype=float),
        "iterations": n.astype(np.int64),
        "time": walk.end_time(rows, n),
        "bits": walk.bits(rows, n),
        "best_family_kl": np.full(batch, np.nan),
        "damped_steps": np.full(batch, np.nan),
        "domain_recoveries": np.full(batch, np.nan),
        "nonfinite_kl_slots": main.nonfinite_slots(n),
    }
    output = BatchOutput(
        runs=tuple(record.runs.tolist()),
        run_columns=run_columns,
        metric_runs=record.runs[slot_rows],
        metrics=metrics,
        visits=record.visits,
        request_columns=request_columns,
    )
    if not failures:
        return output
    kept = ~np.isin(record.runs, list(failures))
    return without_runs(output, failures, walk.visits(n, kept))


def without_runs(
    output: BatchOutput, failures: dict[int, NonFiniteKL], visits: np.ndarray
) -> BatchOutput:
    """``output`` without the rows of the ``failures``' runs (listed in its ``failures``), with the
    ``visits`` of the runs kept."""
    runs = np.asarray(output.runs, dtype=np.int64)
    failed = list(failures)
    kept = ~np.isin(runs, failed)
    rows = ~np.isin(output.metric_runs, failed)
    requests = output.request_columns
    request_rows = ~np.isin(requests["run"], failed) if requests else None
    particles = output.particles
    particle_rows = ~np.isin(particles["run"], failed) if particles else None
    return BatchOutput(
        runs=tuple(runs[kept].tolist()),
        run_columns={name: values[kept] for name, values in output.run_columns.items()},
        metric_runs=output.metric_runs[rows],
        metrics={name: values[rows] for name, values in output.metrics.items()},
        visits=visits,
        request_columns={name: values[request_rows] for name, values in requests.items()},
        failures={**output.failures, **failures},
        particles={name: values[particle_rows] for name, values in particles.items()},
    )


def _batch_failures(
    world: World,
    record: BatchRecord,
    main: _BatchSegments,
    retrain: _BatchSegments | None,
    n: np.ndarray,
) -> dict[int, NonFiniteKL]:
    """The runs of a batch whose KL (the protocol's, then the retrain baseline's) is not a number
    at some slot of the run, with the failure :func:`measure` raises for each."""
    model = world.model
    nodes = record.arrival_nodes.tolist()
    out: dict[int, NonFiniteKL] = {}
    traces = [(main, record.main_states, "protocol's state")]
    if retrain is not None and record.retrain_states is not None:
        traces.append((retrain, record.retrain_states, "retrain baseline's state"))
    for segments, states, which in traces:
        bad = ~np.isfinite(segments.kl) & (segments.starts <= n[:, None])
        for b in np.flatnonzero(bad.any(axis=1)).tolist():
            run = int(record.runs[b])
            if run in out:
                continue
            m = int(np.argmax(bad[b]))
            data = model.fixed_data if model.fixed_data is not None else record.datas[b]
            t = int(segments.target_idx[b, m])
            target = model.target(data, frozenset(nodes[:t]))
            state = states[b, segments.state_idx[b, m]]
            out[run] = nonfinite_kl(
                which, int(segments.starts[b, m]), float(segments.kl[b, m]), state, target
            )
    return out


def _target_kl(
    world: World, record: BatchRecord
) -> Callable[[int | None, int, np.ndarray], np.ndarray]:
    """The divergence of states to target ``t`` (all data but the nodes of the first ``t``
    requests processed), as :func:`measure` computes it: the data shared by all runs (run None),
    or each run's own (None is then returned for run None)."""
    model = world.model
    divergence = REPRESENTATIONS["natural-parameters"].divergence
    nodes = record.arrival_nodes.tolist()

    def forgotten(t: int) -> frozenset[int]:
        return frozenset(nodes[:t])

    def kl_of(run: int | None, t: int, states: np.ndarray) -> np.ndarray:
        if model.fixed_data is not None:
            return divergence(model.target(model.fixed_data, forgotten(t)), states)
        if run is None:
            return None  # type: ignore[return-value]
        return divergence(model.target(record.datas[run], forgotten(t)), states)

    return kl_of


def _recorded_many(
    n_slots: np.ndarray, every: int, extra: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~gossipsim.measurement.metrics.recorded_slots` of every run at once, with its extra slots
    (runs × extras; anything outside 1 < s < n is dropped): the (row, slot) of each metrics row,
    row by row, slots ascending."""
    widths = {int(k): recorded_slots(int(k), every, []).size for k in np.unique(n_slots)}
    table = np.zeros((n_slots.size, max(widths.values())), dtype=np.int64)
    for k, width in widths.items():
        table[n_slots == k, :width] = recorded_slots(k, every, [])
    keep = (extra > 1) & (extra < n_slots[:, None]) & (extra % every != 0)
    both = np.concatenate([table, np.where(keep, extra, 0)], axis=1)
    both.sort(axis=1)
    repeated = np.zeros(both.shape, dtype=bool)
    repeated[:, 1:] = both[:, 1:] == both[:, :-1]
    both[repeated] = 0  # an extra slot named twice
    both.sort(axis=1)
    present = both > 0
    rows = np.broadcast_to(np.arange(n_slots.size)[:, None], both.shape)
    return rows[present], both[present]
