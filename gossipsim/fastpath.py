"""The vectorised engine: many runs of a conjugate scenario at once, in NumPy, without SimPy.

It applies when nothing but the walk decides what happens (``engine="auto"`` checks this): exact
conjugate updates (the protocol changes state only at a node's first visit, or at its first visit
after an unlearning request), requests at iterations (not at simulated times), and homogeneous links
(a hop's delay does not depend on the link). Then

1. the walks of a batch of runs advance together, one vectorised step per slot, drawing each run's
   uniforms from *its own* generator in the same blocks, in the same order, as the event engine's
   :class:`~gossipsim.scheduling.Walker`, so each run realises exactly the same walk;
2. the protocol is called only at the slots where it can change state (first visits, first visits
   after each request, request slots), which is all the event engine's calls amount to;
3. slot times and payload bits are cumulative sums of the same increments in the same order.

Each run's raw record is therefore the one the event engine produces, and the metrics come from the
same code: the two engines give byte-identical tables (tested), the vectorised one several times
faster
(``benchmarks/engines.py``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

import numpy as np

from .engine import Arrival, RunRecord
from .links import LinkModel
from .metrics import recorded_slots
from .models import ConjugateExpFam
from .protocols import WithRetrainBaseline
from .runner import (
    DATA,
    PROTOCOL,
    START,
    WALK,
    RunOutput,
    World,
    make_protocol,
    measure,
    node_labels,
    run_seed,
    run_stream,
    start_node,
)
from .scheduling import _BLOCK

ENGINES = ("auto", "event", "vectorized")
#: ``auto`` vectorises a variant only with at least this many runs: a vectorised step costs about as
#: much as 20 event-engine hops, so a batch must be wide enough to pay for it
MIN_VECTORIZED_RUNS = 32
BATCH = 256  # runs advanced together (memory: BATCH × 2 × 8192 uniforms per block)
LEARNING_BATCH = 1024  # runs per batch of the all-vectorised learning path
MAX_BATCH_SLOTS = 20_000_000  # runs × slots held at once by the all-vectorised learning path


def unavailable(world: World) -> str | None:
    """Why the vectorised engine cannot run ``world`` (None when it can)."""
    sc = world.scenario
    if not world.model.conjugate:  # conjugate models learn by ConjugateGFVL (first visits only)
        return f"model {sc.model.kind!r} takes natural-gradient steps at every visit"
    if any(r.at_time is not None for r in world.requests):
        return "an unlearning request arrives at a simulated time"
    if type(world.links) is not LinkModel:
        return "links are not homogeneous"
    return None


def simulate_runs(world: World, runs: Sequence[int]) -> list[RunOutput]:
    """The outputs of ``runs`` (run indices) of ``world``, computed in batches.

    Without unlearning requests and extra evaluation columns everything, metrics included, is
    computed across the batch at once (:func:`_batch_learning`); otherwise the walks are vectorised
    and each run's protocol and metrics are processed with the event engine's own code
    (:func:`_batch`).
    """
    out: list[RunOutput] = []
    simple = (
        not world.requests
        and not world.model.evaluation_columns()
        and isinstance(world.model, ConjugateExpFam)
    )
    size = LEARNING_BATCH if simple else BATCH
    for start in range(0, len(runs), size):
        batch = list(runs[start : start + size])
        fits = len(batch) * world.scenario.run.iterations <= MAX_BATCH_SLOTS
        if simple and fits:
            out += _batch_learning(world, batch)
        else:
            out += _batch(world, batch)
    return out


def _batch_learning(world: World, runs: list[int]) -> list[RunOutput]:
    """Learning only (no requests), exact conjugate updates: the state after slot i is the prior
    plus the factors of the nodes visited by slot i (eqs. 13-14), so every quantity of every run
    follows from the first-visit slots, computed across the batch."""
    sc = world.scenario
    model = world.model
    graph = world.indexed
    k_nodes, total = graph.size, sc.run.iterations
    seeds = [run_seed(sc.run.seed, r) for r in runs]
    walk_rngs, starts, datas = [], [], []
    for seed in seeds:
        if model.fixed_data is not None:
            datas.append(model.fixed_data)
        else:
            datas.append(model.draw_data(np.random.default_rng(run_stream(seed, DATA))))
        walk_rngs.append(np.random.default_rng(run_stream(seed, WALK)))
        starts.append(
            start_node(
                world,
                np.random.default_rng(run_stream(seed, START)) if world.start is None else None,
            )
        )
    batch = len(runs)
    rows = np.arange(batch)
    first = np.full((batch, k_nodes), -1, dtype=np.int64)  # column (slot − 1) of each first visit
    seen = np.zeros((batch, k_nodes), dtype=bool)
    chunks = []
    for slot0, chunk in _walks(world, walk_rngs, starts, chunk=64):
        chunks.append(chunk)
        for i in range(chunk.shape[1]):
            position = chunk[:, i]
            new = ~seen[rows, position]
            first[rows[new], position[new]] = slot0 - 1 + i
            seen[rows, position] = True
        if sc.run.stop_when_done and seen.all():
            break
    holders = np.concatenate(chunks, axis=1)
    columns = holders.shape[1]
    covered = np.asarray(seen.all(axis=1), dtype=bool)
    cover = np.where(covered, first.max(axis=1) + 1, -1)
    n_slots = np.where(covered & sc.run.stop_when_done, cover, total)
    # states after each first visit: prior, prior + f_(1), prior + f_(1) + f_(2), ... (summed in order)
    order = np.argsort(np.where(first < 0, np.iinfo(np.int64).max, first), axis=1, kind="stable")
    visit_slots = np.take_along_axis(first, order, axis=1) + 1  # 1-based; 0 where never visited
    visit_slots = np.where(visit_slots > 0, visit_slots, np.iinfo(np.int64).max)
    factors = (
        np.stack([np.asarray(d, dtype=float) for d in datas])
        if model.fixed_data is None
        else np.broadcast_to(
            np.asarray(model.fixed_data, dtype=float), (batch, k_nodes, model.prior.size)
        )
    )
    steps = np.take_along_axis(factors, order[:, :, None], axis=1)
    states = np.cumsum(
        np.concatenate([np.broadcast_to(model.prior, (batch, 1, model.prior.size)), steps], axis=1),
        axis=1,
    )
    if model.fixed_data is not None:  # one target for every run
        kl = model.target(model.fixed_data, frozenset()).kl(states)
    else:  # targets depend on the run's data when it is drawn per run
        kl = np.stack([model.target(datas[b], frozenset()).kl(states[b]) for b in range(batch)])
    bits = float(sc.protocol.bits_per_entry * model.message_entries)
    hop = world.links.delay(0, 0, bits)
    moved = holders[:, 1:] != holders[:, :-1]
    increments = np.empty((batch, 2 * columns - 1))
    increments[:, 0::2] = sc.compute_seconds
    increments[:, 1::2] = np.where(moved, hop, 0.0)
    end_times = np.cumsum(increments, axis=1)[:, 0::2]
    sent = np.concatenate(
        [np.zeros((batch, 1)), np.cumsum(np.where(moved, bits, 0.0), axis=1)], axis=1
    )
    labels = node_labels(world)
    tol = sc.metrics.tolerance
    outputs = []
    for b, run in enumerate(runs):
        n = int(n_slots[b])
        below = np.flatnonzero(
            kl[b, 1:] <= tol
        )  # state index j ≥ 1 holds from the j-th first visit
        converged = (
            int(visit_slots[b, below[0]]) if below.size and visit_slots[b, below[0]] <= n else None
        )
        slots = recorded_slots(
            n, sc.metrics.record_every, [converged] if converged is not None else []
        )
        idx = slots - 1
        state_index = np.searchsorted(visit_slots[b], slots, side="right")
        metrics = {
            "iteration": slots,
            "time": end_times[b, idx],
            "holder": labels[holders[b, idx]],
            "kl": kl[b, state_index],
            "bits": sent[b, idx],
        }
        run_row = {
            "seed": seeds[b],
            "cover_iteration": int(cover[b]) if bool(covered[b]) and int(cover[b]) <= n else np.nan,
            "convergence_iteration": converged if converged is not None else np.nan,
            "convergence_time": float(end_times[b, converged - 1])
            if converged is not None
            else np.nan,
            "iterations": n,
            "time": float(end_times[b, n - 1]),
            "bits": float(sent[b, n - 1]),
            "best_family_kl": np.nan,
            "damped_steps": np.nan,
        }
        visits = np.bincount(holders[b, :n], minlength=k_nodes)
        outputs.append(RunOutput(run, seeds[b], run_row, [], metrics, visits))
    return outputs


class _RunState:
    """One run of a batch: its protocol and the bookkeeping of where state can change."""

    def __init__(self, world: World, run: int) -> None:
        sc = world.scenario
        self.run = run
        self.seed = run_seed(sc.run.seed, run)
        walk_ss, start_ss, protocol_ss, data_ss = (
            run_stream(self.seed, s) for s in (WALK, START, PROTOCOL, DATA)
        )
        model = world.model
        self.data = (
            model.fixed_data
            if model.fixed_data is not None
            else model.draw_data(np.random.default_rng(data_ss))
        )
        self.walk_rng = np.random.default_rng(walk_ss)
        self.start = start_node(world, np.random.default_rng(start_ss))
        self.protocol = make_protocol(world, self.data, protocol_ss)
        n = world.nodes
        self.seen = np.zeros(n, dtype=bool)  # visited at least once
        self.seen_since: dict[int, np.ndarray] = {}  # request slot -> visited since that slot
        self.holders: list[np.ndarray] = []
        self.arrivals: list[Arrival] = []
        self.pending = sorted(((r.at_iteration or 0), i) for i, r in enumerate(world.requests))
        self.stop: int | None = None
        self.bits = 0.0


def _batch(world: World, runs: list[int]) -> list[RunOutput]:
    states = [_RunState(world, r) for r in runs]
    active = np.ones(len(states), dtype=bool)
    for slot0, chunk in _walks(world, [s.walk_rng for s in states], [s.start for s in states]):
        for b, state in enumerate(states):
            if active[b]:
                _advance(world, state, chunk[b], slot0)
                active[b] = state.stop is None
        if not active.any():
            break
    return [_finish(world, s) for s in states]


def _walks(
    world: World, rngs: Sequence[np.random.Generator], starts: Sequence[int], chunk: int = _BLOCK
) -> Iterator[tuple[int, np.ndarray]]:
    """Every run's holders, ``chunk`` slots at a time: ``(first slot, runs × slots array)``.

    The step from slot s to s + 1 uses uniform number s − 1 of the run's own generator, drawn in
    blocks of 8,192 (u, then v) exactly as :class:`~gossipsim.scheduling.Walker` draws them."""
    sc = world.scenario
    graph = world.indexed
    total = sc.run.iterations
    position = np.array(starts, dtype=np.int64)
    u = v = np.empty((len(rngs), 0))
    slot0 = 1
    while slot0 <= total:
        length = min(chunk, total - slot0 + 1)
        block = np.empty((len(rngs), length), dtype=np.int64)
        for i in range(length):
            draw = slot0 - 1 + i
            block[:, i] = position
            if draw % _BLOCK == 0:
                need = min(_BLOCK, total - draw)
                u = np.stack([_block(g, need) for g in rngs])
                v = np.stack([_block(g, need) for g in rngs])
            j = draw % _BLOCK
            position = _step(
                sc.scheduler.kind,
                position,
                u[:, j],
                v[:, j],
                graph.indptr,
                graph.indices,
                graph.degree,
                graph.size,
            )
        yield slot0, block
        slot0 += length


def _block(rng: np.random.Generator, need: int) -> np.ndarray:
    """The first ``need`` of the next 8,192 uniforms of ``rng``, leaving it where drawing all 8,192
    would (one 64-bit output per double: ``advance`` skips the rest exactly, as tested)."""
    out = rng.random(need)
    if need < _BLOCK:
        rng.bit_generator.advance(_BLOCK - need)  # type: ignore[attr-defined]
    return out


def _step(
    kind: str,
    k: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    degree: np.ndarray,
    n: int,
) -> np.ndarray:
    """One move of every walk, with the same arithmetic as :class:`~gossipsim.scheduling.Walker`."""
    if kind == "uniform":
        return (u * n).astype(np.int64)
    d = degree[k]
    j = indices[indptr[k] + (u * d).astype(np.int64)]
    if kind == "simple-random-walk":
        return j
    return np.where(v * degree[j] < d, j, k)  # eq. (5)


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
    sc = world.scenario
    holders = np.concatenate(state.holders) if state.holders else np.empty(0, dtype=np.int64)
    if state.stop is not None:
        holders = holders[: state.stop]
    n = holders.size
    bits = _payload(state.protocol)
    moved = holders[1:] != holders[:-1]
    hop = world.links.delay(0, 0, bits)
    increments = np.empty(2 * n - 1)
    increments[0::2] = sc.compute_seconds
    increments[1::2] = np.where(moved, hop, 0.0)
    cumulative = np.cumsum(increments)
    end_times = cumulative[0::2]
    starts = np.concatenate([[0.0], cumulative[1::2]])
    bits_sent = np.concatenate([[0.0], np.cumsum(np.where(moved, bits, 0.0))])
    arrivals = [
        Arrival(a.request, a.node, a.slot, float(starts[a.slot - 1])) for a in state.arrivals
    ]
    record = RunRecord(
        holders=holders,
        end_times=end_times,
        bits=bits_sent,
        arrivals=arrivals,
        traces=state.protocol.traces(),
        stopped_early=state.stop is not None and state.stop < sc.run.iterations,
        requests=world.requests,
    )
    return measure(world, state.data, record, state.protocol.stats(), state.run, state.seed)


def _payload(protocol: object) -> float:
    main = protocol.main if isinstance(protocol, WithRetrainBaseline) else protocol
    return float(main.bits)  # type: ignore[attr-defined]
