"""The vectorised engine: many runs of a scenario at once, in NumPy, without SimPy.

It runs a variant only by declaration (``engine="auto"`` checks them, :func:`unavailable`): the
protocol kind declares a kernel this engine has (exact conjugate G-FVL: ``conjugate-first-visits``,
the state changes only at a node's first visit, or at its first visit after an unlearning request;
natural-gradient G-FVL and the particle protocols: ``batched-steps``, every run's holder stepped at
once, in :mod:`gossipsim.execution.vectorized.steps`), the scheduler kind declares ``batched-step`` (its batched
sampler moves walks exactly as its one-step sampler does), the channel declares
``homogeneous-delay`` on the walk (a hop's delay does not depend on the link and nothing is lost)
or ``homogeneous-server-links`` with the parameter server (every agent's downlink alike, every
uplink alike, nothing lost), and requests arrive at iterations (not at simulated times). Anything
without a declaration runs on the event engine.

Both architectures run here. With ``protocol.architecture = "server"`` the scheduler picks the agent
of each slot exactly as it picks the walk's next holder, and the agent's work is the walk holder's
(:class:`~gossipsim.protocols.server.ServerRounds` calls the wrapped protocol's ``on_token``), so the
kernels step the scheduled agents as they step holders; only what a slot costs differs
(:func:`~gossipsim.world.world.slot_costs`): the walk pays a hop when the token moves, the server a round
every slot, a download of the state then an upload of the message, both counted. Then

1. each run's seed, start node and walk stream are NumPy's own SeedSequence / PCG64 objects, built
   run by run as the event engine builds them (:mod:`gossipsim.core.streams`);
2. the walks of a batch of runs advance together, one vectorised step per slot, each run reading
   *its own* stream's uniforms in the same blocks, in the same order, as the event engine's
   :class:`~gossipsim.scheduling.Walker`, so each run realises exactly the same walk;
3. with exact factors every state follows from the first-visit slots: without requests (the
   prior plus the factors visited) and with requests at iterations (a node's factor leaves at its
   first visit after its request; the retrain baseline restarts at each request and adds the first
   visits since), so the traces and every metric are computed across the batch
   (:func:`~gossipsim.measurement.measure.measure_batch`, the same definitions as
   :func:`~gossipsim.measurement.measure.measure`). Otherwise (extra evaluation columns, a settling window)
   the protocol is called only at the slots where it can change state (first visits, first
   visits after each request, request slots), which is all the event engine's calls amount to,
   and each run is measured by the event engine's own code. Either way a batch gives one
   :class:`~gossipsim.measurement.measure.BatchOutput`, committed to a results folder as one part;
4. slot times are cumulative sums of the same increments in the same order (compute, the server's
   round, the hop: :func:`~gossipsim.engine.slottables.stepped_clock`), payload bits the same whole
   numbers.

The two engines therefore give byte-identical tables (tested); the vectorised one is about 12-15x
faster on the paper's Fig. 3 scenario (``benchmarks/engines.py``).

**Drawn stays** (``[scheduler] stays = "drawn"``; :func:`_drawn`). A walk that mostly waits (a
Metropolis–Hastings leaf of a star keeps the token with probability 1 − 1/(K − 1)) is stepped slot
by slot above. Where the protocol kind declares that a repeated visit changes nothing
(:meth:`~gossipsim.protocols.ProtocolKind.idle_stays`) and the scheduler that its jump chain is its
law (:attr:`~gossipsim.scheduling.Scheduler.stay_kernel`), :mod:`gossipsim.execution.vectorized.stays` draws
each stay's length at once (geometric) and the next holder from the jump chain, from each run's own
walk stream, keeping first visits, first visits since each request, the slots each node held the
token and the stays holding a recorded or requested slot: memory bounded by runs × moves, not runs
× slots. The walks are read through a :class:`~gossipsim.engine.slottables.SlotTable`, so states, traces
and metrics are computed by the same code as for stepped walks (:func:`_batch_learning`,
:func:`_batch_unlearning`, :func:`~gossipsim.measurement.measure.measure_batch`), with the same meaning of
every number; the tables agree with the stepped walks' in distribution, not in value (tested
against the exact cover and hitting times). ``scenarios/cover_time_vs_nodes.toml``: 275 s stepped,
about 26 s drawn, as a whole command on two cores (``benchmarks/stays.py``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from gossipsim.core.capabilities import EXACT_FACTORS
from gossipsim.core.streams import DATA, PROTOCOL, START, WALK, WalkStreams, run_seeds, run_stream
from gossipsim.engine.slottables import SlotTable, SteppedSlots, stepped_clock
from gossipsim.engine.token import Arrival, RunRecord
from gossipsim.execution.vectorized.stays import drawn_unavailable, walk_stays
from gossipsim.families.exactsum import running_sums
from gossipsim.measurement.measure import (
    BatchOutput,
    BatchRecord,
    NonFiniteKL,
    RunOutput,
    batches_with_failures,
    measure,
    measure_batch,
    nonfinite_kl,
    without_runs,
)
from gossipsim.measurement.metrics import recorded_slots
from gossipsim.protocols import ServerRounds, WithRetrainBaseline, protocol_kind
from gossipsim.scheduling import UNIFORM_BLOCK, scheduler_for
from gossipsim.states.representations import representation
from gossipsim.world.world import World, make_protocol, node_labels, slot_costs, start_node

ENGINES = ("auto", "event", "vectorized")
#: how a batch's walks are made for the first-visit kernels: ``(world, seeds)`` → the walks and
#: each node's first slot (runs × nodes)
FirstVisitWalker = Callable[[World, np.ndarray], tuple[SlotTable, np.ndarray]]
#: ``(world, seeds, restart slots, each node's first request slot, non-zero factors)`` → the
#: walks, first visits and first visits at or after each restart slot
UnlearningWalker = Callable[
    [World, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    tuple[SlotTable, np.ndarray, np.ndarray],
]
#: the kernels this engine implements, by the name a protocol kind declares
#: (:meth:`~gossipsim.protocols.ProtocolKind.kernel`): exact conjugate G-FVL changes the state only at
#: first visits and first visits after a request
KERNELS = ("conjugate-first-visits", "batched-steps")
#: the scheduler kernels it implements (:attr:`~gossipsim.scheduling.Scheduler.kernel`)
SCHEDULER_KERNELS = ("batched-step",)
#: the channel kernels it implements (:attr:`~gossipsim.network.channels.Channel.kernel`): on the walk
#: every hop costs the same delay, with the server every agent's downlink and uplink are alike;
#: nothing is lost (:func:`~gossipsim.world.world.slot_costs`)
CHANNEL_KERNELS = ("homogeneous-delay", "homogeneous-server-links")
#: ``auto`` vectorises a variant only with at least this many runs: below about 16 runs the event
#: engine is as fast (measured on the Fig. 3 and karate unlearning scenarios)
MIN_VECTORIZED_RUNS = 16
BATCH = 256  # runs advanced together (memory: BATCH × 2 × 8192 uniforms per block)
LEARNING_BATCH = 1024  # runs per batch of the all-vectorised learning path
#: runs × slots (or runs × nodes) held at once by a batch: a few hundred MiB of walk and clock arrays
MAX_BATCH_SLOTS = 20_000_000


def unavailable(world: World) -> str | None:
    """Why the vectorised engine cannot run ``world`` (None when it can)."""
    sc = world.scenario
    if sc.topology.draw == "per-run":
        return "the graph is drawn per run (topology.draw = per-run)"
    kernel = protocol_kind(sc.protocol.kind).kernel(world.model)
    if kernel not in KERNELS:  # only what declares a kernel this engine has is vectorised
        return f"protocol {sc.protocol.kind!r} declares no vectorised kernel for model {sc.model.kind!r}"
    if kernel == "batched-steps" and world.model.fixed_data is None:
        return "the data are drawn per run (data.draw = per-run): batched steps share one data set"
    scheduler = scheduler_for(sc.scheduler.kind)
    if scheduler.kernel not in SCHEDULER_KERNELS:
        return f"scheduler {sc.scheduler.kind!r} declares no vectorised kernel"
    if any(r.at_time is not None for r in world.requests):
        return "an unlearning request arrives at a simulated time"
    channel = getattr(world.links, "kernel", None)
    if channel not in CHANNEL_KERNELS:
        return f"the channel {type(world.links).__name__} declares no vectorised kernel"
    if sc.metrics.tolerance is None and kernel == "batched-steps":
        kind = protocol_kind(sc.protocol.kind)
        if not representation(kind.representation_name).particle_sets:
            return (
                'metrics.tolerance = "relative" judges each run after it ends, and the batched '
                "steps keep only the states an absolute tolerance can need"
            )
    if sc.scheduler.stays == "drawn":
        return drawn_unavailable(world)
    return None


def simulate_runs(world: World, runs: Sequence[int]) -> list[BatchOutput]:
    """The outputs of ``runs`` (run indices, ascending) of ``world``, one :class:`BatchOutput` per
    batch of runs.

    With exact factors, no extra evaluation columns and first-passage latencies, everything is
    computed across the batch at once: the walks, the states after first visits, the metrics
    (:func:`_batch_learning` without requests; :func:`_batch_unlearning` and
    :func:`~gossipsim.measurement.measure.measure_batch` with them). Otherwise the walks are vectorised and
    each run's protocol and metrics are processed with the event engine's own code
    (:func:`_batch`).
    """
    if world.scenario.scheduler.stays == "drawn":  # each stay drawn at once (fastpath_stays)
        return _drawn(world, runs)
    if protocol_kind(world.scenario.protocol.kind).kernel(world.model) == "batched-steps":
        from gossipsim.execution.vectorized.steps import (
            simulate_stepped,  # it builds on this module's walks
        )

        return simulate_stepped(world, runs)
    out: list[BatchOutput] = []
    model = world.model
    simple = (
        not model.evaluation_columns()
        and EXACT_FACTORS in model.capabilities
        and world.scenario.metrics.latency_window == 1  # the batch judges a first passage
        and world.scenario.metrics.tolerance is not None  # ... under an absolute threshold
    )
    run = world.scenario.run
    if world.requests:
        fit = MAX_BATCH_SLOTS // _unlearning_cells(world)
    else:
        fit = MAX_BATCH_SLOTS // max(run.iterations, world.nodes)  # runs × (slots or nodes) arrays
    vectorised = simple and fit >= MIN_VECTORIZED_RUNS
    if vectorised:
        size = min(LEARNING_BATCH, fit)
    elif run.stop_when_done:  # runs usually stop long before the slot budget: keep batches wide
        size = BATCH
    else:  # each run keeps its walk until the end: bound runs × slots
        size = min(BATCH, max(1, MAX_BATCH_SLOTS // run.iterations))
    for start in range(0, len(runs), size):
        batch = list(runs[start : start + size])
        if vectorised and world.requests:
            out.append(_batch_unlearning(world, batch))
        elif vectorised:
            out.append(_batch_learning(world, batch))
        else:
            out += _batch(world, batch)
    return out


def _drawn(world: World, runs: Sequence[int]) -> list[BatchOutput]:
    """``runs`` of ``world`` with their walks drawn stay by stay
    (:func:`~gossipsim.execution.vectorized.stays.walk_stays`), in batches whose runs × nodes arrays (first
    visits, visits, first visits since each request, trace states) stay within
    :data:`MAX_BATCH_SLOTS`."""
    cells = _unlearning_cells(world) - 6 * world.scenario.run.iterations
    size = max(1, min(LEARNING_BATCH, MAX_BATCH_SLOTS // cells))
    out = []
    for start in range(0, len(runs), size):
        batch = list(runs[start : start + size])
        if world.requests:
            out.append(_batch_unlearning(world, batch, _drawn_unlearning))
        else:
            out.append(_batch_learning(world, batch, _drawn_first_visits))
    return out


def _drawn_first_visits(world: World, seeds: np.ndarray) -> tuple[SlotTable, np.ndarray]:
    """:func:`_walk_first_visits` with the walks drawn stay by stay: a run stops at its cover
    slot (``stop_when_done``) or at the slot budget."""
    stop_when_done = world.scenario.run.stop_when_done

    def stop_of(first: np.ndarray, since: np.ndarray) -> np.ndarray:
        if not stop_when_done:
            return np.full(first.shape[0], _NEVER, dtype=np.int64)
        return first.max(axis=1)  # _NEVER until every node has held the token

    no_restarts = np.empty(0, dtype=np.int64)
    walk, first, _ = walk_stays(world, seeds, start_nodes(world, seeds), no_restarts, stop_of)
    return walk, np.where(first < _NEVER, first - 1, _NEVER)  # columns, as stepped


def _drawn_unlearning(
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


def _unlearning_cells(world: World) -> int:
    """Array entries one run of an unlearning batch holds, about: its walk and clocks, first
    visits since each request slot, and the states of its two traces."""
    sc = world.scenario
    nodes, requests = world.nodes, len(world.requests)
    dim = int(np.size(world.model.prior))
    return 6 * sc.run.iterations + (requests + 4) * (nodes + 1) * (dim + 3)


def too_long(world: World) -> str | None:
    """Why ``auto`` should not vectorise ``world`` for memory's sake (None: it may): runs that keep
    their whole walk cannot be batched 16 at a time within :data:`MAX_BATCH_SLOTS`."""
    run = world.scenario.run
    if not run.stop_when_done and MAX_BATCH_SLOTS // run.iterations < MIN_VECTORIZED_RUNS:
        return (
            f"runs of {run.iterations} slots are too long to batch {MIN_VECTORIZED_RUNS} at a time "
            "in memory"
        )
    return None


def start_nodes(world: World, seeds: np.ndarray) -> np.ndarray:
    """Each run's first holder, as :func:`~gossipsim.world.world.start_node` draws it from the run's
    START stream, run by run."""
    if world.start is not None:
        return np.full(seeds.size, world.start, dtype=np.int64)
    starts = np.empty(seeds.size, dtype=np.int64)
    for b, seed in enumerate(seeds.tolist()):
        starts[b] = start_node(world, np.random.default_rng(run_stream(seed, START)))
    return starts


def _batch_learning(
    world: World, runs: list[int], walk_first_visits: FirstVisitWalker | None = None
) -> BatchOutput:
    """Learning only (no requests), exact conjugate updates: the state after slot i is the prior
    plus the factors of the nodes visited by slot i (eqs. 13-14), so every quantity of every run
    follows from the first-visit slots, computed across the batch. The walks are stepped slot by
    slot (:func:`_walk_first_visits`) or drawn by ``walk_first_visits``."""
    sc = world.scenario
    run_ids = np.asarray(runs, dtype=np.int64)
    seeds = run_seeds(sc.run.seed, run_ids)
    batch = run_ids.size
    rows = np.arange(batch)
    walk, first_visit = (walk_first_visits or _walk_first_visits)(world, seeds)
    columns = walk.columns
    visited = first_visit < _NEVER
    covered = visited.all(axis=1)
    cover = np.where(covered, np.where(visited, first_visit, 0).max(axis=1) + 1, 0)
    n_slots = np.where(covered & sc.run.stop_when_done, cover, sc.run.iterations)
    with np.errstate(all="ignore"):  # a non-finite KL fails its run (below), not warned
        kl, visit_slots, states, datas = _state_kl(world, seeds, first_visit)

    below = kl[:, 1:] <= sc.metrics.tolerance  # state j >= 1 holds from the j-th first visit
    converged = np.where(below.any(axis=1), visit_slots[rows, below.argmax(axis=1)], _NEVER)
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


_NEVER = np.iinfo(np.int64).max  # the first-visit column of a node never visited


def _batch_unlearning(
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
    event engine's; :func:`~gossipsim.measurement.measure.measure_batch` measures them. The walks are stepped
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
    # the slot of the first request for each node (_NEVER: none)
    first_request = np.full(k_nodes, _NEVER, dtype=np.int64)
    np.minimum.at(first_request, nodes, at)
    walk, first, since = (walk_unlearning or _walk_unlearning)(
        world, seeds, restart_slots, first_request, nonzero
    )
    stop = _stop_slots(world, first, since, restart_slots, first_request, nonzero)
    n_slots = np.minimum(stop, sc.run.iterations)  # a run that never stops runs every slot

    # the main protocol: + at first visits (unless forgotten before), - at the first visit since
    # the node's first request (if it had contributed a non-zero factor)
    requested = first_request[None, :] <= n_slots[:, None]  # the request arrived within the run
    request_at = np.where(requested, first_request[None, :], _NEVER)
    since_request = _since(since, restart_slots, first_request, batch)
    plus = np.where(first < request_at, first, _NEVER)
    minus = np.where(requested & (first < request_at) & nonzero, since_request, _NEVER)
    plus = np.where(plus <= n_slots[:, None], plus, _NEVER)
    minus = np.where(minus <= n_slots[:, None], minus, _NEVER)
    removed = np.where(
        first >= request_at, request_at - 1, np.where(nonzero, minus, request_at - 1)
    )
    removed = np.where(requested, removed, _NEVER)
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
        first_visits=np.where(first <= n_slots[:, None], first, _NEVER),
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
    stop needs), each node's first visit (runs × nodes, 1-based slot; ``_NEVER``: none) and its
    first visit at or after each restart slot (restarts × runs × nodes)."""
    sc = world.scenario
    batch, k_nodes = seeds.size, world.nodes
    base = (np.arange(batch)[:, None] * k_nodes).astype(np.int64)
    first = np.full(batch * k_nodes, _NEVER, dtype=np.int64)
    since = np.full((restart_slots.size, batch * k_nodes), _NEVER, dtype=np.int64)
    chunks = []
    for slot0, chunk in _walks(world, WalkStreams(seeds, WALK), start_nodes(world, seeds), 64):
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
        _stepped(world, np.concatenate(chunks, axis=1)),
        first.reshape(batch, k_nodes),
        since.reshape(restart_slots.size, batch, k_nodes),
    )


def _since(
    since: np.ndarray, restart_slots: np.ndarray, slot_of_node: np.ndarray, batch: int
) -> np.ndarray:
    """Each node's first visit at or after ``slot_of_node[k]`` (a restart slot, or ``_NEVER``:
    none), runs × nodes."""
    out = np.full((batch, slot_of_node.size), _NEVER, dtype=np.int64)
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
    after which neither the protocol nor its retrain baseline can change; ``_NEVER`` while it is
    not among the slots walked so far), or the slot budget."""
    sc = world.scenario
    batch = first.shape[0]
    total = sc.run.iterations
    last_request = int(restart_slots[-1])
    if not sc.run.stop_when_done or last_request > total:
        return np.full(batch, total, dtype=np.int64)
    requested = first_request < _NEVER
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
    records, then the changes at ``slots``; ``_NEVER`` pads) and the states after each, prior plus
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
    """``add_up(values, axis=1)`` over each row's records (``slots`` < ``_NEVER``, a prefix of
    the row: records in slot order, pads last); the pads' states, never read, are NaN. Only the
    records are summed where the sums are exact, which costs per value."""
    width = int((slots < _NEVER).sum(axis=1).max(initial=0))
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
        nxt = int(at[i + 1]) if i + 1 < at.size else _NEVER
        visit = since[int(np.searchsorted(restart_slots, a))]
        visit = np.where(
            ~forgotten[None, :] & (visit < nxt) & (visit <= n_slots[:, None]), visit, _NEVER
        )
        visit = np.where(arrived[:, None], visit, _NEVER)
        order = np.argsort(visit, axis=1, kind="stable")
        block_slots = np.concatenate(
            [np.where(arrived, a, _NEVER)[:, None], np.take_along_axis(visit, order, axis=1)],
            axis=1,
        )
        steps = np.take_along_axis(factors, order[:, :, None], axis=1)
        block = np.concatenate([np.broadcast_to(prior, (batch, 1, dim)), steps], axis=1)
        slots_parts.append(block_slots)
        state_parts.append(_sum_records(add_up, block, block_slots))
    every = np.concatenate(slots_parts, axis=1)
    states = np.concatenate(state_parts, axis=1)
    order = np.argsort(every, axis=1, kind="stable")  # pads (_NEVER) last, records in slot order
    return np.take_along_axis(every, order, axis=1), np.take_along_axis(
        states, order[:, :, None], axis=1
    )


def _walk_first_visits(world: World, seeds: np.ndarray) -> tuple[SteppedSlots, np.ndarray]:
    """The walks of every run stepped slot by slot (runs × slots; fewer slots when every run
    stopped early) and the column of each node's first visit (runs × nodes; ``_NEVER`` if not
    visited)."""
    sc = world.scenario
    batch, k_nodes = seeds.size, world.nodes
    rows = np.arange(batch)
    first = np.full(batch * k_nodes, _NEVER, dtype=np.int64)
    chunks = []
    for slot0, chunk in _walks(world, WalkStreams(seeds, WALK), start_nodes(world, seeds), 64):
        chunks.append(chunk)
        columns = np.arange(slot0 - 1, slot0 - 1 + chunk.shape[1], dtype=np.int64)
        np.minimum.at(first, (rows[:, None] * k_nodes + chunk).ravel(), np.tile(columns, batch))
        if sc.run.stop_when_done and first.max() < _NEVER:
            break
    return _stepped(world, np.concatenate(chunks, axis=1)), first.reshape(batch, k_nodes)


def _stepped(world: World, holders: np.ndarray) -> SteppedSlots:
    """Stepped walks (runs × slots) with their clocks: end and start time of each slot and payload
    bits sent by its end, with the event engine's arithmetic
    (:func:`~gossipsim.engine.slottables.stepped_clock` of the world's :func:`~gossipsim.world.world.slot_costs`)."""
    end_times, start_times, sent = stepped_clock(slot_costs(world), holders)
    return SteppedSlots(holders, end_times, start_times, sent, world.nodes)


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
    visit_slots = np.where(visit_slots < _NEVER, visit_slots + 1, _NEVER)
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


class _RunState:
    """One run of a batch: its protocol and the bookkeeping of where state can change."""

    def __init__(self, world: World, run: int, seed: int, start: int) -> None:
        self.run = run
        self.seed = seed
        model = world.model
        self.data = (
            model.fixed_data
            if model.fixed_data is not None
            else model.draw_data(np.random.default_rng(run_stream(seed, DATA)))
        )
        self.start = start
        self.protocol = make_protocol(world, self.data, run_stream(seed, PROTOCOL))
        n = world.nodes
        self.seen = np.zeros(n, dtype=bool)  # visited at least once
        self.seen_since: dict[int, np.ndarray] = {}  # request slot -> visited since that slot
        self.holders: list[np.ndarray] = []
        self.arrivals: list[Arrival] = []
        self.pending = sorted(((r.at_iteration or 0), i) for i, r in enumerate(world.requests))
        self.stop: int | None = None
        self.bits = 0.0


def _batch(world: World, runs: list[int]) -> list[BatchOutput]:
    """Runs whose walks are vectorised and whose protocols and metrics are the event engine's
    (:func:`_advance`, :func:`_finish`), as batches; a run whose KL is not a number is a failure
    of its batch (:attr:`~gossipsim.measurement.measure.BatchOutput.failures`)."""
    seeds = run_seeds(world.scenario.run.seed, np.asarray(runs, dtype=np.int64))
    starts = start_nodes(world, seeds)
    states = [
        _RunState(world, r, seed, start)
        for r, seed, start in zip(runs, seeds.tolist(), starts.tolist(), strict=True)
    ]
    active = np.ones(len(states), dtype=bool)
    for slot0, chunk in _walks(world, WalkStreams(seeds, WALK), starts):
        for b, state in enumerate(states):
            if active[b]:
                _advance(world, state, chunk[b], slot0)
                active[b] = state.stop is None
        if not active.any():
            break
    outputs: list[RunOutput] = []
    failures: dict[int, NonFiniteKL] = {}
    for state in states:
        try:
            outputs.append(_finish(world, state))
        except NonFiniteKL as exc:
            failures[state.run] = exc
    return batches_with_failures(outputs, failures, world.nodes)


def _walks(
    world: World, streams: WalkStreams, starts: np.ndarray, chunk: int = UNIFORM_BLOCK
) -> Iterator[tuple[int, np.ndarray]]:
    """Every run's holders, ``chunk`` slots at a time: ``(first slot, runs × slots array)``.

    The step from slot s to s + 1 uses uniform number s − 1 of the run's own walk stream, drawn in
    blocks of 8,192 (u, then v) exactly as :class:`~gossipsim.scheduling.Walker` draws them: block
    k's u are the stream's outputs 16,384·k + i, its v the outputs 16,384·k + 8,192 + i. Each step is
    the scheduler's batched sampler (:meth:`~gossipsim.scheduling.Scheduler.step`), which computes
    the event engine's one-step sampler's arithmetic for every run at once."""
    sc = world.scenario
    scheduler = scheduler_for(sc.scheduler.kind)
    step = scheduler.step
    reads_v = scheduler.reads_v
    csr = world.indexed.csr
    total = sc.run.iterations
    position = np.array(starts, dtype=np.int64)
    u = v = np.empty((len(position), 0))
    slot0 = 1
    while slot0 <= total:
        length = min(chunk, total - slot0 + 1)
        block = np.empty((len(position), length), dtype=np.int64)
        for i in range(length):
            draw = slot0 - 1 + i
            block[:, i] = position
            if draw % UNIFORM_BLOCK == 0:
                need = min(UNIFORM_BLOCK, total - draw)
                u = streams.block(2 * draw, need)
                if reads_v:  # a scheduler that never reads v (uniform) does not draw it
                    v = streams.block(2 * draw + UNIFORM_BLOCK, need)
            j = draw % UNIFORM_BLOCK
            position = step(position, u[:, j], v[:, j] if reads_v else u[:, j], csr)
        yield slot0, block
        slot0 += length


def _first_new(chunk: np.ndarray, seen: np.ndarray, offset: int) -> np.ndarray:
    """Slots (1-based) in ``chunk`` (starting at slot ``offset``) of the first visit of nodes not yet
    ``seen``; marks them seen."""
    nodes, first = np.unique(chunk, return_index=True)
    new = ~seen[nodes]
    seen[nodes[new]] = True
    return first[new] + offset


def _advance(world: World, state: _RunState, chunk: np.ndarray, slot0: int) -> None:
    """Drive the run's protocol through one chunk of slots, only where its state can change:
    first visits, first visits since each request, and the request slots themselves."""
    sc = world.scenario
    state.holders.append(chunk)
    last = slot0 + chunk.size - 1
    queue: list[int] = _first_new(chunk, state.seen, slot0).tolist()
    queue += [at for at, _ in state.pending if slot0 <= at <= last]
    for at, seen in state.seen_since.items():
        begin = max(at, slot0)
        queue += _first_new(chunk[begin - slot0 :], seen, begin).tolist()
    heapq.heapify(queue)
    protocol = state.protocol
    requests = world.requests
    done_slot = 0
    while queue:
        slot = heapq.heappop(queue)
        if slot == done_slot:
            continue  # already handled (a slot can be a candidate for several reasons)
        done_slot = slot
        while state.pending and state.pending[0][0] == slot:
            _, r = state.pending.pop(0)
            protocol.on_request(requests[r].node, slot)
            state.arrivals.append(Arrival(r, requests[r].node, slot, np.nan))
            if slot not in state.seen_since:  # from now on, first visits since this slot matter
                seen = np.zeros(world.nodes, dtype=bool)
                state.seen_since[slot] = seen
                for later in _first_new(chunk[slot - slot0 :], seen, slot).tolist():
                    heapq.heappush(queue, later)
        protocol.on_token(int(chunk[slot - slot0]), slot)
        if sc.run.stop_when_done and not state.pending and protocol.done():
            state.stop = slot
            return


def _finish(world: World, state: _RunState) -> RunOutput:
    holders = np.concatenate(state.holders) if state.holders else np.empty(0, dtype=np.int64)
    if state.stop is not None:
        holders = holders[: state.stop]
    protocol = state.protocol
    return run_output(
        world, state.run, state.seed, state.data, holders, _payload(protocol), state.arrivals,
        protocol.traces(), state.stop is not None, protocol.removals(), protocol.stats(),
    )  # fmt: skip


def run_output(
    world: World,
    run: int,
    seed: int,
    data: Any,
    holders: np.ndarray,
    bits: float,
    arrivals: Sequence[Arrival],
    traces: dict[str, Any],
    stopped: bool,
    removals: dict[int, int],
    stats: dict[str, float],
    segments: dict[str, Any] | None = None,
) -> RunOutput:
    """One run measured by the event engine's code (:func:`~gossipsim.measurement.measure.measure`) from its
    holders (one per slot it ran), its constant message size, request arrivals (their times are
    filled in here), the protocol's traces, whether it stopped early, its removal slots and its
    counters (and the traces' divergences when they were streamed, ``segments``); slot times and
    bits with the event engine's arithmetic (:func:`~gossipsim.engine.slottables.stepped_clock`)."""
    sc = world.scenario
    n = holders.size
    end_times, starts, bits_sent = (
        a[0] for a in stepped_clock(slot_costs(world, bits), holders[None, :])
    )
    record = RunRecord(
        holders=holders,
        end_times=end_times,
        bits=bits_sent,
        arrivals=[Arrival(a.request, a.node, a.slot, float(starts[a.slot - 1])) for a in arrivals],
        traces=traces,
        stopped_early=stopped and n < sc.run.iterations,
        requests=world.requests,
        removals=removals,
        representation=protocol_kind(sc.protocol.kind).representation_name,
    )
    return measure(world, data, record, stats, run, seed, segments)


def _payload(protocol: object) -> float:
    """The bits of the run's messages (of constant size), from the protocol inside the server's
    rounds and the retrain baseline."""
    inner = protocol.protocol if isinstance(protocol, ServerRounds) else protocol
    main = inner.main if isinstance(inner, WithRetrainBaseline) else inner
    return float(main.bits)  # type: ignore[attr-defined]
