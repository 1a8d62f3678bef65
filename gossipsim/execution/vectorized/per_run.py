"""Runs whose protocol the vectorized engine does not step itself (extra evaluation columns, a
settling window): the walks of the batch advance together (:mod:`.walks`), the protocol of each run
is called only at the slots where it can change state (first visits, first visits after each
request, request slots), which is all the event engine's calls amount to, and each run is
measured by the event engine's own code (:func:`run_output`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np

from gossipsim.core.streams import DATA, PROTOCOL, WALK, WalkStreams, run_seeds, run_stream
from gossipsim.engine.records import Arrival, RunRecord
from gossipsim.engine.slottables import stepped_clock
from gossipsim.execution.vectorized.walks import first_new, start_nodes, stepped_walks
from gossipsim.measurement.measure import measure
from gossipsim.measurement.outputs import BatchOutput, NonFiniteKL, RunOutput, batches_with_failures
from gossipsim.protocols import ServerRounds, WithRetrainBaseline, protocol_kind
from gossipsim.world.world import World, make_protocol, slot_costs


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


def per_run_batch(world: World, runs: list[int]) -> list[BatchOutput]:
    """Runs whose walks are vectorised and whose protocols and metrics are the event engine's
    (:func:`_advance`, :func:`_finish`), as batches; a run whose KL is not a number is a failure
    of its batch (:attr:`~gossipsim.measurement.outputs.BatchOutput.failures`)."""
    seeds = run_seeds(world.scenario.run.seed, np.asarray(runs, dtype=np.int64))
    starts = start_nodes(world, seeds)
    states = [
        _RunState(world, r, seed, start)
        for r, seed, start in zip(runs, seeds.tolist(), starts.tolist(), strict=True)
    ]
    active = np.ones(len(states), dtype=bool)
    for slot0, chunk in stepped_walks(world, WalkStreams(seeds, WALK), starts):
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


def _advance(world: World, state: _RunState, chunk: np.ndarray, slot0: int) -> None:
    """Drive the run's protocol through one chunk of slots, only where its state can change:
    first visits, first visits since each request, and the request slots themselves."""
    sc = world.scenario
    state.holders.append(chunk)
    last = slot0 + chunk.size - 1
    queue: list[int] = first_new(chunk, state.seen, slot0).tolist()
    queue += [at for at, _ in state.pending if slot0 <= at <= last]
    for at, seen in state.seen_since.items():
        begin = max(at, slot0)
        queue += first_new(chunk[begin - slot0 :], seen, begin).tolist()
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
                for later in first_new(chunk[slot - slot0 :], seen, slot).tolist():
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
