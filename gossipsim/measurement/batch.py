"""A batch of runs measured at once, column by column (the vectorized engine's conjugate
first-visit kernel): the same definitions as :func:`gossipsim.measurement.measure.measure` gives
each run (first-passage latencies under an absolute tolerance), from the batch's record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gossipsim.engine.slottables import SlotTable
from gossipsim.measurement.metrics import (
    recorded_slots,
)
from gossipsim.measurement.outputs import BatchOutput, NonFiniteKL, nonfinite_kl, without_runs
from gossipsim.states.representations import REPRESENTATIONS
from gossipsim.world.world import World, node_labels

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
