"""The vectorised engine's ``batched-steps`` kernel: protocols whose state changes at every visit
(natural-gradient G-FVL, the particle protocols), stepped for a batch of runs at once.

Each run keeps everything it has on the event engine: its seed, start node, walk stream (the walks
of the batch advance together, :func:`~gossipsim.execution.vectorized.walks.stepped_walks`, exactly as each run's own
:class:`~gossipsim.scheduling.Walker` moves) and its protocol generators (the main protocol's and
the retrain baseline's, spawned from its PROTOCOL stream as
:func:`~gossipsim.world.world.make_protocol` spawns them). At every slot, in the event engine's order,

1. the requests arriving at that slot are delivered (by request index) to every run still going:
   the protocol marks the node forgotten, and the retrain baseline restarts from the prior without
   every node forgotten so far;
2. the retrain baseline, then the protocol, take the slot's step for every run at once
   (the kind's :meth:`~gossipsim.protocols.registry.ProtocolKind.build_batch`: one row per run);
3. with ``stop_when_done``, a run stops after the first slot at whose end its protocol is done and
   no request is still to arrive.

Each run is then measured by the event engine's own code (:func:`~gossipsim.execution.vectorized.per_run.run_output`)
from its streamed segments. With the parameter server (``architecture = "server"``) the holder is the
agent the scheduler picks and its step is the same; only the clock differs (each slot a download and
an upload: :func:`~gossipsim.world.world.slot_costs`).
The estimators draw each run's samples from its own generators with the one-run calls, and every
operation gives a run the same bits whatever the other runs of its batch (no matrix-vector product
across runs, whose rounding depends on a row's position; no padding that lengthens a run's sums),
so the tables are the event engine's byte for byte (tests/test_batched_steps.py,
tests/test_particle_batches.py).

Runs of a batch share one data set (``[data] draw = "once"``). The states are streamed out as they
are made (:mod:`gossipsim.execution.vectorized.trace`: divergences computed batched, only the states the
measurement reads kept), so a batch's memory is its protocol state and walks
(:func:`batch_size`), whatever the number of slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gossipsim.core import memory
from gossipsim.core.streams import PROTOCOL, WALK, WalkStreams, run_seeds, run_stream
from gossipsim.engine.records import Arrival
from gossipsim.execution.vectorized.per_run import run_output
from gossipsim.execution.vectorized.trace import StreamedWorlds
from gossipsim.execution.vectorized.walks import start_nodes, stepped_walks
from gossipsim.measurement.measure import target_trace
from gossipsim.measurement.outputs import BatchOutput, NonFiniteKL, RunOutput, batches_with_failures
from gossipsim.protocols import protocol_kind
from gossipsim.protocols.registry import BatchBuildRequest
from gossipsim.states.representations import representation
from gossipsim.study import budget
from gossipsim.world.world import World, representation_of


def batch_size(world: World) -> int:
    """Runs per batch (:func:`gossipsim.study.budget.vectorized_batch_runs`): as many as
    :data:`~gossipsim.study.budget.VECTORIZED_BATCH_BYTES` allow for each run's protocol states (the
    state and a factor per node, both worlds), walk (8 bytes a slot), streamed segments (about 40
    bytes a slot a world) and kept states (one per slot written to metrics.csv, both worlds), the
    last two twice (copied once when assembled), and for a particle protocol the N × N matrices
    of its step."""
    sc = world.scenario
    dim = protocol_kind(sc.protocol.kind).state_entries(sc.protocol.options, world.model)
    slots = sc.run.iterations
    kept = slots // sc.metrics.record_every + 4 * len(world.requests) + 4
    # kept states are copied once when the batch's traces are assembled: counted twice
    per_run: float = 2 * 8 * dim * (world.nodes + 1 + 2 * kept) + 8 * slots + 2 * 2 * 40 * slots
    particles = getattr(sc.protocol.options, "particles", None)
    if isinstance(particles, int) and representation_of(sc).particle_sets:
        per_run += memory.VALUE_BYTES * budget.step_kernel_values(particles)
    return budget.vectorized_batch_runs(per_run)


def simulate_stepped(world: World, runs: Sequence[int]) -> list[BatchOutput]:
    """The outputs of ``runs`` (ascending) of ``world``, batch by batch."""
    size = batch_size(world)
    out: list[BatchOutput] = []
    for begin in range(0, len(runs), size):
        out += per_run_batch(world, list(runs[begin : begin + size]))
    return out


def per_run_batch(world: World, runs: list[int]) -> list[BatchOutput]:
    sc = world.scenario
    model = world.model
    data = model.fixed_data
    seeds = run_seeds(sc.run.seed, np.asarray(runs, dtype=np.int64))
    batch, total = len(runs), sc.run.iterations
    spawned = [run_stream(seed, PROTOCOL).spawn(2) for seed in seeds.tolist()]
    kind = protocol_kind(sc.protocol.kind)

    def build(index: int) -> Any:
        rngs = tuple(np.random.default_rng(pair[index]) for pair in spawned)
        return kind.build_batch(
            BatchBuildRequest(
                model=model, data=data, rngs=rngs, settings=sc.protocol.options,
                nodes=world.nodes, record_every=sc.metrics.record_every, iterations=total,
            )
        )  # fmt: skip

    every = np.arange(batch)
    order = sorted(range(len(world.requests)), key=lambda r: (world.requests[r].at_iteration, r))
    arrive: dict[int, list[int]] = {}
    for r in order:
        arrive.setdefault(int(world.requests[r].at_iteration or 0), []).append(r)
    baseline = bool(world.requests) and sc.protocol.retrain_baseline
    main = build(0)
    retrain = build(1) if baseline else None
    state = representation(kind.representation_name)
    arrived = [(int(world.requests[r].at_iteration or 0), r, world.requests[r].node) for r in order]
    target_slots, targets = target_trace(world, data, arrived, state)
    request_slots = np.asarray(sorted(arrive), dtype=np.int64)
    grid = np.arange(sc.metrics.record_every, total + 1, sc.metrics.record_every)
    # particles.csv (``[metrics] particles = "recorded"``) writes every record, the prior's at slot 0
    # too; every other record of a particle protocol is at a slot kept anyway
    first = [0] if state.particle_sets else []
    streams = StreamedWorlds(
        batch, main.eta.shape[1:],
        {"main": 1, "retrain": int(request_slots.min())} if retrain is not None else {"main": 1},
        targets, target_slots, state.divergence,
        excess=sc.metrics.excess, tolerance=sc.metrics.tolerance,
        keep_slots=np.concatenate([first, [1, total], grid, request_slots, request_slots - 1]),
    )  # fmt: skip
    main.new_slot()
    main.start(every, 0)
    streams.push(0, _states(main, retrain), np.ones(batch, dtype=bool))
    forgotten: list[int] = []
    arrivals: list[list[Arrival]] = [[] for _ in runs]
    undelivered = len(world.requests)
    active = np.ones(batch, dtype=bool)
    stop = np.full(batch, total, dtype=np.int64)
    chunks = []
    for slot0, chunk in stepped_walks(world, WalkStreams(seeds, WALK), start_nodes(world, seeds)):
        chunks.append(chunk)
        for column in range(chunk.shape[1]):
            slot = slot0 + column
            main.new_slot()
            if retrain is not None:
                retrain.new_slot()
            for r in arrive.get(slot, ()):
                node = world.requests[r].node
                rows = np.flatnonzero(active)
                main.request(node, slot, rows)
                for row in rows.tolist():
                    arrivals[row].append(Arrival(r, node, slot, np.nan))
                undelivered -= 1
                if retrain is not None:
                    forgotten.append(node)
                    retrain.start(rows, slot, sorted(set(forgotten)))
            holders = chunk[:, column]
            if retrain is not None and forgotten:
                retrain.step(holders, slot, active)
            main.step(holders, slot, active)
            finished = np.zeros(batch, dtype=bool)
            if sc.run.stop_when_done and undelivered == 0:
                done = main.done() if retrain is None else main.done() & retrain.done()
                finished = active & done
                stop[finished] = slot
            streams.push(slot, _states(main, retrain), active, main.removed_now | finished)
            active &= ~finished
        if not active.any():
            break
    walked = np.concatenate(chunks, axis=1)
    streamed = streams.finish()
    outputs: list[RunOutput] = []
    failures: dict[int, NonFiniteKL] = {}
    for row, run in enumerate(runs):
        n = int(stop[row])
        traces = {name: trace for name, (_, trace) in streamed[row].items()}
        segments = {name: found for name, (found, _) in streamed[row].items()}
        try:
            outputs.append(
                run_output(
                    world,
                    run,
                    int(seeds[row]),
                    data,
                    walked[row, :n],
                    world.message_bits,
                    arrivals[row],
                    traces,
                    n < total,
                    dict(main.removed[row]),
                    main.stats(row),
                    segments,
                )  # fmt: skip
            )
        except NonFiniteKL as exc:
            failures[run] = exc
    return batches_with_failures(outputs, failures, world.nodes)


def _states(main: Any, retrain: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each world's states and whether each run recorded one in this slot."""
    out = {"main": (main.eta, main.recorded_now)}
    if retrain is not None:
        out["retrain"] = (retrain.eta, retrain.recorded_now)
    return out
