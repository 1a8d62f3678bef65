"""The ``conjugate-first-visits`` kernel: exact conjugate G-FVL, whose state changes only at a node's
first visit (or its first visit after an unlearning request). Every state follows from the
first-visit slots, so the traces and every metric of a batch are computed at once: without requests
(the prior plus the factors visited) and with requests at iterations (a node's factor leaves at its
first visit after its request; the retrain baseline restarts at each request and adds the first
visits since), measured by :func:`~gossipsim.measurement.batch.measure_batch`. The walks are
stepped (:mod:`.walks`) or drawn stay by stay (:mod:`.stays`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gossipsim.core.streams import DATA, WALK, WalkStreams, run_seeds, run_stream
from gossipsim.engine.slottables import SlotTable, SteppedSlots
from gossipsim.execution.vectorized.stays import walk_stays
from gossipsim.execution.vectorized.walks import (
    NEVER,
    start_nodes,
    stepped_first_visits,
    stepped_slots,
    stepped_walks,
)
from gossipsim.families.exactsum import running_sums
from gossipsim.measurement.batch import BatchRecord, measure_batch
from gossipsim.measurement.metrics import recorded_slots
from gossipsim.measurement.outputs import BatchOutput, NonFiniteKL, nonfinite_kl, without_runs
from gossipsim.world.world import World, node_labels

#: how a batch's walks are made for the first-visit kernels: ``(world, seeds)`` → the walks and
#: each node's first slot (runs × nodes)
FirstVisitWalker = Callable[[World, np.ndarray], tuple[SlotTable, np.ndarray]]


#: ``(world, seeds, restart slots, each node's first request slot, non-zero factors)`` → the
#: walks, first visits and first visits at or after each restart slot
UnlearningWalker = Callable[
    [World, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    tuple[SlotTable, np.ndarray, np.ndarray],
]


def drawn_first_visits(world: World, seeds: np.ndarray) -> tuple[SlotTable, np.ndarray]:
    """:func:`~.walks.stepped_first_visits` with the walks drawn stay by stay: a run stops at its cover
    slot (``stop_when_done``) or at the slot budget."""
    stop_when_done = world.scenario.run.stop_when_done

    def stop_of(first: np.ndarray, since: np.ndarray) -> np.ndarray:
        if not stop_when_done:
            return np.full(first.shape[0], NEVER, dtype=np.int64)
        return first.max(axis=1)  # NEVER until every node has held the token

    no_restarts = np.empty(0, dtype=np.int64)
    walk, first, _ = walk_stays(world, seeds, start_nodes(world, seeds), no_restarts, stop_of)
    return walk, np.where(first < NEVER, first - 1, NEVER)  # columns, as stepped


def drawn_unlearning(
    world: World,
    seeds: np.ndarray,
    restart_slots: np.ndarray,
    first_request: np.ndarray,
    nonzero: np.ndarray,
) -> tuple[SlotTable, np.ndarray, np.ndarray]:
    """:func:`_walk_unlearning` with the walks drawn stay by stay, each run up to its stop slot
    (:func:`_stop_slots`)."""

    def stop_of(first: np.ndarray, since: np.ndarray) -> np.ndarray:
        return _stop_slots(world, first, since, restart_slots, first_request, nonzero)

    return walk_stays(world, seeds, start_nodes(world, seeds), restart_slots, stop_of)


def unlearning_cells(world: World) -> int:
    """Array entries one run of an unlearning batch holds, about: its walk and clocks, first
    visits since each request slot, and the states of its two traces."""
    sc = world.scenario
    nodes, requests = world.nodes, len(world.requests)
    dim = int(np.size(world.model.prior))
    return 6 * sc.run.iterations + (requests + 4) * (nodes + 1) * (dim + 3)


def learning_batch(
    world: World, runs: list[int], walk_first_visits: FirstVisitWalker | None = None
) -> BatchOutput:
    """Learning only (no requests), exact conjugate updates: the state after slot i is the prior
    plus the factors of the nodes visited by slot i (eqs. 13-14), so every quantity of every run
    follows from the first-visit slots, computed across the batch. The walks are stepped slot by
    slot (:func:`~.walks.stepped_first_visits`) or drawn by ``walk_first_visits``."""
    sc = world.scenario
    run_ids = np.asarray(runs, dtype=np.int64)
    seeds = run_seeds(sc.run.seed, run_ids)
    batch = run_ids.size
    rows = np.arange(batch)
    walk, first_visit = (walk_first_visits or stepped_first_visits)(world, seeds)
    columns = walk.columns
    visited = first_visit < NEVER
    covered = visited.all(axis=1)
    cover = np.where(covered, np.where(visited, first_visit, 0).max(axis=1) + 1, 0)
    n_slots = np.where(covered & sc.run.stop_when_done, cover, sc.run.iterations)
    with np.errstate(all="ignore"):  # a non-finite KL fails its run (below), not warned
        kl, visit_slots, states, datas = _state_kl(world, seeds, first_visit)

    below = kl[:, 1:] <= sc.metrics.tolerance  # state j >= 1 holds from the j-th first visit
    converged = np.where(below.any(axis=1), visit_slots[rows, below.argmax(axis=1)], NEVER)
    converged = np.where(converged <= n_slots, converged, 0)  # 0: not within the run
    labels = node_labels(world)
    every_slot = sc.metrics.record_every == 1 and bool((n_slots == columns).all())
    if every_slot and isinstance(walk, SteppedSlots):  # every slot of every run, as stepped
        # number of first visits up to each column: the index of the state that holds there
        new_visit = np.zeros((batch, columns + 1), dtype=np.int64)
        new_visit[np.broadcast_to(rows[:, None], visited.shape)[visited], first_visit[visited]] = 1
        state_index = np.cumsum(new_visit[:, :columns], axis=1)
        slot_rows = np.repeat(rows, columns)
        metrics = {
            "iteration": np.tile(np.arange(1, columns + 1, dtype=np.int64), batch),
            "time": walk.end_times.ravel(),
            "holder": labels[walk.holders.ravel()],
            "kl": np.take_along_axis(kl, state_index, axis=1).ravel(),
            "bits": walk.sent.ravel(),
        }
    else:
        slot_rows, slots = _recorded(n_slots, sc.metrics.record_every, converged)
        # the state that holds at a slot: the number of first visits up to it
        span = columns + 2
        flat = (rows[:, None] * span + np.minimum(visit_slots, span - 1)).ravel()
        held = np.searchsorted(flat, slot_rows * span + slots, side="right")
        held -= slot_rows * visit_slots.shape[1]
        metrics = {
            "iteration": slots,
            "time": walk.end_time(slot_rows, slots),
            "holder": labels[walk.holder(slot_rows, slots)],
            "kl": kl[slot_rows, held],
            "bits": walk.bits(slot_rows, slots),
        }
    run_columns = {
        "seed": seeds.astype(np.int64),
        "cover_iteration": np.where(covered & (cover <= n_slots), cover, np.nan),
        "convergence_iteration": np.where(converged > 0, converged, np.nan),
        "convergence_time": np.where(
            converged > 0, walk.end_time(rows, np.maximum(converged, 1)), np.nan
        ),
        "convergence_threshold": np.full(batch, sc.metrics.tolerance, dtype=float),
        "iterations": n_slots.astype(np.int64),
        "time": walk.end_time(rows, n_slots),
        "bits": walk.bits(rows, n_slots),
        "best_family_kl": np.full(batch, np.nan),
        "damped_steps": np.full(batch, np.nan),
        "domain_recoveries": np.full(batch, np.nan),
        "nonfinite_kl_slots": _nonfinite_slots(kl, visit_slots, n_slots),
    }
    visits = walk.visits(n_slots)
    output = BatchOutput(tuple(runs), run_columns, run_ids[slot_rows], metrics, visits)
    failures = _learning_failures(world, run_ids, kl, visit_slots, n_slots, states, datas)
    if not failures:
        return output
    kept = ~np.isin(run_ids, list(failures))
    return without_runs(output, failures, walk.visits(n_slots, kept))


def _learning_failures(
    world: World,
    run_ids: np.ndarray,
    kl: np.ndarray,
    visit_slots: np.ndarray,
    n_slots: np.ndarray,
    states: np.ndarray,
    datas: list[Any],
) -> dict[int, NonFiniteKL]:
    """The runs of a learning batch whose KL is not a number at some slot of the run (state j ≥ 1
    holds from the j-th first visit), with the failure :func:`~gossipsim.measurement.measure.measure` raises."""
    bad = ~np.isfinite(kl[:, 1:]) & (visit_slots <= n_slots[:, None])
    out: dict[int, NonFiniteKL] = {}
    model = world.model
    for b in np.flatnonzero(bad.any(axis=1)).tolist():
        j = int(np.argmax(bad[b]))
        data = model.fixed_data if model.fixed_data is not None else datas[b]
        target = model.target(data, frozenset())
        out[int(run_ids[b])] = nonfinite_kl(
            "protocol's state",
            int(visit_slots[b, j]),
            float(kl[b, j + 1]),
            states[b, j + 1],
            target,
        )
    return out


def unlearning_batch(
    world: World, runs: list[int], walk_unlearning: UnlearningWalker | None = None
) -> BatchOutput:
    """Unlearning requests at iterations, exact conjugate updates: every state of the protocol and
    of its retrain baseline follows from first visits (eqs. 13-14 and 21), computed across the batch.

    The protocol (``conjugate-first-visits``) adds node k's factor at its first visit; a request for
    k arriving before slot a (processed before that slot's visit) makes k's next visit from a on
    remove it, or nothing if k had not contributed (its removal slot is then a − 1). The retrain
    baseline restarts from the prior at each request and adds the first visits since then of the
    nodes not forgotten. Trace states are the cumulative sums of the same signed factors in the same
    order as :class:`~gossipsim.protocols.gfvl.FactorTrace` sums them, so they are bit for bit the
    event engine's; :func:`~gossipsim.measurement.batch.measure_batch` measures them. The walks are stepped
    slot by slot (:func:`_walk_unlearning`) or drawn by ``walk_unlearning``."""
    sc = world.scenario
    model = world.model
    run_ids = np.asarray(runs, dtype=np.int64)
    seeds = run_seeds(sc.run.seed, run_ids)
    batch, k_nodes = run_ids.size, world.nodes
    # requests in the order they are processed: by slot, then by their index
    order = sorted(range(len(world.requests)), key=lambda r: (world.requests[r].at_iteration, r))
    at = np.asarray([world.requests[r].at_iteration for r in order], dtype=np.int64)
    nodes = np.asarray([world.requests[r].node for r in order], dtype=np.int64)
    restart_slots = np.unique(at)
    datas = [model.fixed_data] if model.fixed_data is not None else _run_data(world, seeds)
    factors = np.stack([model.factors(d) for d in datas])  # type: ignore[attr-defined]
    factors = np.broadcast_to(factors, (batch, k_nodes, factors.shape[-1]))
    nonzero = np.any(factors != 0.0, axis=2)
    # the slot of the first request for each node (NEVER: none)
    first_request = np.full(k_nodes, NEVER, dtype=np.int64)
    np.minimum.at(first_request, nodes, at)
    walk, first, since = (walk_unlearning or _walk_unlearning)(
        world, seeds, restart_slots, first_request, nonzero
    )
    stop = _stop_slots(world, first, since, restart_slots, first_request, nonzero)
    n_slots = np.minimum(stop, sc.run.iterations)  # a run that never stops runs every slot

    # the main protocol: + at first visits (unless forgotten before), - at the first visit since
    # the node's first request (if it had contributed a non-zero factor)
    requested = first_request[None, :] <= n_slots[:, None]  # the request arrived within the run
    request_at = np.where(requested, first_request[None, :], NEVER)
    since_request = _since(since, restart_slots, first_request, batch)
    plus = np.where(first < request_at, first, NEVER)
    minus = np.where(requested & (first < request_at) & nonzero, since_request, NEVER)
    plus = np.where(plus <= n_slots[:, None], plus, NEVER)
    minus = np.where(minus <= n_slots[:, None], minus, NEVER)
    removed = np.where(
        first >= request_at, request_at - 1, np.where(nonzero, minus, request_at - 1)
    )
    removed = np.where(requested, removed, NEVER)
    prior = np.asarray(model.prior, dtype=float)
    add_up = _adder(model)
    main_slots, main_states = _trace(
        np.zeros((batch, 1), dtype=np.int64),
        np.concatenate([plus, minus], axis=1),
        np.concatenate([factors, -1.0 * factors], axis=1),
        prior,
        add_up,
    )
    retrain_slots = retrain_states = None
    if sc.protocol.retrain_baseline:
        retrain_slots, retrain_states = _retrain_trace(
            at, nodes, restart_slots, since, factors, prior, n_slots, add_up
        )
    record = BatchRecord(
        runs=run_ids,
        seeds=seeds.astype(np.int64),
        walk=walk,
        slots=n_slots,
        arrival_slots=at,
        arrival_requests=np.asarray(order, dtype=np.int64),
        arrival_nodes=nodes,
        first_visits=np.where(first <= n_slots[:, None], first, NEVER),
        main_slots=main_slots,
        main_states=main_states,
        retrain_slots=retrain_slots,
        retrain_states=retrain_states,
        removals=removed[:, nodes],
        datas=datas,
        visits=walk.visits(n_slots),
    )
    return measure_batch(world, record)


def _walk_unlearning(
    world: World,
    seeds: np.ndarray,
    restart_slots: np.ndarray,
    first_request: np.ndarray,
    nonzero: np.ndarray,
) -> tuple[SteppedSlots, np.ndarray, np.ndarray]:
    """The walks of every run stepped slot by slot (runs × slots, as many slots as the last run to
    stop needs), each node's first visit (runs × nodes, 1-based slot; ``NEVER``: none) and its
    first visit at or after each restart slot (restarts × runs × nodes)."""
    sc = world.scenario
    batch, k_nodes = seeds.size, world.nodes
    base = (np.arange(batch)[:, None] * k_nodes).astype(np.int64)
    first = np.full(batch * k_nodes, NEVER, dtype=np.int64)
    since = np.full((restart_slots.size, batch * k_nodes), NEVER, dtype=np.int64)
    chunks = []
    for slot0, chunk in stepped_walks(
        world, WalkStreams(seeds, WALK), start_nodes(world, seeds), 64
    ):
        chunks.append(chunk)
        slots = np.arange(slot0, slot0 + chunk.shape[1], dtype=np.int64)
        keys = (base + chunk).ravel()
        np.minimum.at(first, keys, np.tile(slots, batch))
        for i, a in enumerate(restart_slots.tolist()):
            if a > slots[-1]:
                continue
            late = slots >= a
            np.minimum.at(since[i], (base + chunk[:, late]).ravel(), np.tile(slots[late], batch))
        if sc.run.stop_when_done:
            shaped = first.reshape(batch, k_nodes)
            later = since.reshape(restart_slots.size, batch, k_nodes)
            stop = _stop_slots(world, shaped, later, restart_slots, first_request, nonzero)
            if bool((stop <= slots[-1]).all()):
                break
    return (
        stepped_slots(world, np.concatenate(chunks, axis=1)),
        first.reshape(batch, k_nodes),
        since.reshape(restart_slots.size, batch, k_nodes),
    )


def _since(
    since: np.ndarray, restart_slots: np.ndarray, slot_of_node: np.ndarray, batch: int
) -> np.ndarray:
    """Each node's first visit at or after ``slot_of_node[k]`` (a restart slot, or ``NEVER``:
    none), runs × nodes."""
    out = np.full((batch, slot_of_node.size), NEVER, dtype=np.int64)
    for i, a in enumerate(restart_slots.tolist()):
        mine = slot_of_node == a
        out[:, mine] = since[i][:, mine]
    return out


def _stop_slots(
    world: World,
    first: np.ndarray,
    since: np.ndarray,
    restart_slots: np.ndarray,
    first_request: np.ndarray,
    nonzero: np.ndarray,
) -> np.ndarray:
    """The slot each run stops at (``stop_when_done``: once every request has arrived, the slot
    after which neither the protocol nor its retrain baseline can change; ``NEVER`` while it is
    not among the slots walked so far), or the slot budget."""
    sc = world.scenario
    batch = first.shape[0]
    total = sc.run.iterations
    last_request = int(restart_slots[-1])
    if not sc.run.stop_when_done or last_request > total:
        return np.full(batch, total, dtype=np.int64)
    requested = first_request < NEVER
    since_request = _since(since, restart_slots, first_request, batch)
    # when each node leaves the protocol's work: its first visit, or the removal of its factor
    # (a node forgotten before its first visit is done at the request, before the last one)
    done = np.where(
        requested[None, :] & (first < first_request[None, :]) & nonzero, since_request, first
    )
    done = np.where(requested[None, :] & (first >= first_request[None, :]), 0, done)
    stop = np.maximum(done.max(axis=1), last_request)
    if sc.protocol.retrain_baseline:  # the last restart must have seen every node not forgotten
        kept = ~requested
        if kept.any():
            stop = np.maximum(stop, since[-1][:, kept].max(axis=1))
    return stop


def _adder(model: Any) -> Callable[..., np.ndarray]:
    """How a trace's states are summed, as :class:`~gossipsim.protocols.gfvl.FactorTrace` sums
    them for this model: correctly rounded (``exact_sums``) or float64's cumulative sums."""
    return running_sums if getattr(model, "exact_sums", False) else np.cumsum


def _trace(
    begin: np.ndarray,
    slots: np.ndarray,
    steps: np.ndarray,
    prior: np.ndarray,
    add_up: Callable[..., np.ndarray] = np.cumsum,
) -> tuple[np.ndarray, np.ndarray]:
    """A factor trace of every run: the slots of its records in order (``begin``: the reset
    records, then the changes at ``slots``; ``NEVER`` pads) and the states after each, prior plus
    the signed factors ``steps`` summed in slot order by ``add_up`` (as FactorTrace sums them)."""
    batch = slots.shape[0]
    every = np.concatenate([begin, slots], axis=1)
    order = np.argsort(every, axis=1, kind="stable")
    sorted_slots = np.take_along_axis(every, order, axis=1)
    resets = begin.shape[1]
    padded = np.concatenate([np.broadcast_to(prior, (batch, resets, prior.size)), steps], axis=1)
    ordered = np.take_along_axis(padded, order[:, :, None], axis=1)
    return sorted_slots, _sum_records(add_up, ordered, sorted_slots)


def _sum_records(
    add_up: Callable[..., np.ndarray], values: np.ndarray, slots: np.ndarray
) -> np.ndarray:
    """``add_up(values, axis=1)`` over each row's records (``slots`` < ``NEVER``, a prefix of
    the row: records in slot order, pads last); the pads' states, never read, are NaN. Only the
    records are summed where the sums are exact, which costs per value."""
    width = int((slots < NEVER).sum(axis=1).max(initial=0))
    if add_up is np.cumsum or width == values.shape[1]:
        return add_up(values, axis=1)
    out = np.full(values.shape, np.nan)
    out[:, :width] = add_up(values[:, :width], axis=1)
    return out


def _retrain_trace(
    at: np.ndarray,
    nodes: np.ndarray,
    restart_slots: np.ndarray,
    since: np.ndarray,
    factors: np.ndarray,
    prior: np.ndarray,
    n_slots: np.ndarray,
    add_up: Callable[..., np.ndarray] = np.cumsum,
) -> tuple[np.ndarray, np.ndarray]:
    """The retrain baseline's trace of every run: restarted from the prior at each request that
    arrived (in processing order), then each node not forgotten by then added at its first visit
    since the restart and before the next one (summed by ``add_up``, as in :func:`_trace`)."""
    batch, k_nodes, dim = factors.shape
    slots_parts, state_parts = [], []
    forgotten = np.zeros(k_nodes, dtype=bool)
    for i, a in enumerate(at.tolist()):
        forgotten[nodes[i]] = True
        arrived = a <= n_slots
        nxt = int(at[i + 1]) if i + 1 < at.size else NEVER
        visit = since[int(np.searchsorted(restart_slots, a))]
        visit = np.where(
            ~forgotten[None, :] & (visit < nxt) & (visit <= n_slots[:, None]), visit, NEVER
        )
        visit = np.where(arrived[:, None], visit, NEVER)
        order = np.argsort(visit, axis=1, kind="stable")
        block_slots = np.concatenate(
            [np.where(arrived, a, NEVER)[:, None], np.take_along_axis(visit, order, axis=1)],
            axis=1,
        )
        steps = np.take_along_axis(factors, order[:, :, None], axis=1)
        block = np.concatenate([np.broadcast_to(prior, (batch, 1, dim)), steps], axis=1)
        slots_parts.append(block_slots)
        state_parts.append(_sum_records(add_up, block, block_slots))
    every = np.concatenate(slots_parts, axis=1)
    states = np.concatenate(state_parts, axis=1)
    order = np.argsort(every, axis=1, kind="stable")  # pads (NEVER) last, records in slot order
    return np.take_along_axis(every, order, axis=1), np.take_along_axis(
        states, order[:, :, None], axis=1
    )


def _nonfinite_slots(kl: np.ndarray, visit_slots: np.ndarray, n_slots: np.ndarray) -> np.ndarray:
    """Slots of each run whose KL is not finite: state j ≥ 1 holds from the j-th first visit to the
    slot before the next one (or the run's end), as :meth:`~gossipsim.measurement.metrics.Segments.nonfinite_slots`
    counts for the event engine."""
    bad = ~np.isfinite(kl[:, 1:])
    if not bad.any():
        return np.zeros(kl.shape[0], dtype=np.int64)
    last = n_slots[:, None] + 1
    begin = np.minimum(visit_slots, last)
    end = np.minimum(np.append(visit_slots[:, 1:], last, axis=1), last)
    return np.where(bad, end - begin, 0).sum(axis=1).astype(np.int64)


def _state_kl(
    world: World, seeds: np.ndarray, first_visit: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    """KL to the target of the states after each first visit (prior, prior + f_(1), ..., summed in
    visit order: eqs. 13-14), runs × (nodes + 1), the 1-based slot of the j-th first visit, the
    states themselves and the data (one set for all runs, or each run's)."""
    model = world.model
    batch, k_nodes = first_visit.shape
    order = np.argsort(first_visit, axis=1, kind="stable")
    visit_slots = np.take_along_axis(first_visit, order, axis=1)
    visit_slots = np.where(visit_slots < NEVER, visit_slots + 1, NEVER)
    datas = [model.fixed_data] if model.fixed_data is not None else _run_data(world, seeds)
    factors = np.stack([model.factors(d) for d in datas])  # type: ignore[attr-defined]
    factors = np.broadcast_to(factors, (batch, k_nodes, model.prior.size))
    steps = np.take_along_axis(factors, order[:, :, None], axis=1)
    prior = np.broadcast_to(model.prior, (batch, 1, model.prior.size))
    states = _adder(model)(np.concatenate([prior, steps], axis=1), axis=1)
    if model.fixed_data is not None:  # one target for every run
        return model.target(model.fixed_data, frozenset()).kl(states), visit_slots, states, datas
    # targets depend on the run's data when it is drawn per run
    kl = np.stack([model.target(datas[b], frozenset()).kl(states[b]) for b in range(batch)])
    return kl, visit_slots, states, datas


def _run_data(world: World, seeds: np.ndarray) -> list[Any]:
    """Each run's data, drawn from its DATA stream (``draw = "per-run"``)."""
    model = world.model
    return [
        model.draw_data(np.random.default_rng(run_stream(seed, DATA))) for seed in seeds.tolist()
    ]


def _recorded(n_slots: np.ndarray, every: int, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~gossipsim.measurement.metrics.recorded_slots` of every run at once, with at most one extra slot
    per run (0: none): the (batch row, slot) of each metrics row, in row-major order."""
    widths = {int(n): recorded_slots(int(n), every, []).size for n in np.unique(n_slots)}
    width = max(widths.values())
    table = np.zeros((n_slots.size, width + 1), dtype=np.int64)  # 0 pads: dropped below
    for n in widths:
        table[n_slots == n, : widths[n]] = recorded_slots(n, every, [])
    keep = (extra > 1) & (extra < n_slots) & (extra % every != 0)
    if keep.any():  # put each extra slot in its place
        table[keep, width] = extra[keep]
        table[keep] = np.sort(table[keep], axis=1)
    present = table > 0
    rows = np.broadcast_to(np.arange(n_slots.size)[:, None], table.shape)
    return rows[present], table[present]
