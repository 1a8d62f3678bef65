"""The walks of a batch of runs on the vectorized engine, slot by slot: each run's start node and
walk stream are the event engine's own (:mod:`gossipsim.core.streams`), and the walks advance
together in blocks of uniforms read in the same order as :class:`~gossipsim.scheduling.Walker`
reads them, so each run realises exactly the event engine's walk."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from gossipsim.core.streams import START, WALK, WalkStreams, run_stream
from gossipsim.engine.slottables import SteppedSlots, stepped_clock
from gossipsim.scheduling import UNIFORM_BLOCK, scheduler_for
from gossipsim.world.world import World, slot_costs, start_node

#: the first-visit slot of a node never visited (larger than every slot)
NEVER = np.iinfo(np.int64).max


def start_nodes(world: World, seeds: np.ndarray) -> np.ndarray:
    """Each run's first holder, as :func:`~gossipsim.world.world.start_node` draws it from the run's
    START stream, run by run."""
    if world.start is not None:
        return np.full(seeds.size, world.start, dtype=np.int64)
    starts = np.empty(seeds.size, dtype=np.int64)
    for b, seed in enumerate(seeds.tolist()):
        starts[b] = start_node(world, np.random.default_rng(run_stream(seed, START)))
    return starts


def stepped_first_visits(world: World, seeds: np.ndarray) -> tuple[SteppedSlots, np.ndarray]:
    """The walks of every run stepped slot by slot (runs × slots; fewer slots when every run
    stopped early) and the column of each node's first visit (runs × nodes; ``NEVER`` if not
    visited)."""
    sc = world.scenario
    batch, k_nodes = seeds.size, world.nodes
    rows = np.arange(batch)
    first = np.full(batch * k_nodes, NEVER, dtype=np.int64)
    chunks = []
    for slot0, chunk in stepped_walks(
        world, WalkStreams(seeds, WALK), start_nodes(world, seeds), 64
    ):
        chunks.append(chunk)
        columns = np.arange(slot0 - 1, slot0 - 1 + chunk.shape[1], dtype=np.int64)
        np.minimum.at(first, (rows[:, None] * k_nodes + chunk).ravel(), np.tile(columns, batch))
        if sc.run.stop_when_done and first.max() < NEVER:
            break
    return stepped_slots(world, np.concatenate(chunks, axis=1)), first.reshape(batch, k_nodes)


def stepped_slots(world: World, holders: np.ndarray) -> SteppedSlots:
    """Stepped walks (runs × slots) with their clocks: end and start time of each slot and payload
    bits sent by its end, with the event engine's arithmetic
    (:func:`~gossipsim.engine.slottables.stepped_clock` of the world's :func:`~gossipsim.world.world.slot_costs`)."""
    end_times, start_times, sent = stepped_clock(slot_costs(world), holders)
    return SteppedSlots(holders, end_times, start_times, sent, world.nodes)


def stepped_walks(
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


def first_new(chunk: np.ndarray, seen: np.ndarray, offset: int) -> np.ndarray:
    """Slots (1-based) in ``chunk`` (starting at slot ``offset``) of the first visit of nodes not yet
    ``seen``; marks them seen."""
    nodes, first = np.unique(chunk, return_index=True)
    new = ~seen[nodes]
    seen[nodes[new]] = True
    return first[new] + offset
