"""Drawn stays: the vectorised engine's walks of a batch drawn stay by stay, not slot by slot.

With ``[scheduler] stays = "drawn"`` a walk that mostly waits (a Metropolis–Hastings leaf of a star
keeps the token with probability 1 − 1/(K − 1) a slot) costs one draw per *move* instead of one
per slot. It needs two declarations: the protocol kind's
(:meth:`~gossipsim.protocols.ProtocolKind.idle_stays`: a slot whose holder held the slot before
changes nothing unless a request arrives before it, as for exact conjugate G-FVL) and the
scheduler's (:attr:`~gossipsim.scheduling.Scheduler.stay_kernel` ``"jump-chain"``: its
:meth:`~gossipsim.scheduling.Scheduler.jump_chain` is the walk's exact law). The walk is then its
jump chain, the chain the cover-time Monte Carlo samples (:mod:`gossipsim.cover.montecarlo`): at
node k the token stays ``Geometric(p_move(k))`` slots (:meth:`~gossipsim.scheduling.JumpChain.
stay_lengths`), then moves to j ≠ k with probability P(k, j)/p_move(k)
(:meth:`~gossipsim.scheduling.JumpChain.dest_at`). Where the chain is a ±1 walk on a line that never
holds (a ring, or a path without holding ends: :func:`~gossipsim.cover.montecarlo.line_of`) a
block of moves is drawn at once by cumulative sums, as the hitting-time Monte Carlo does.

Randomness: move m of a run reads uniforms u_m (its stay) and v_m (its destination; the ±1 step of a
line walk reads u_m) from the run's own walk stream, laid out as the stepped walk lays out the
uniforms of slot m (blocks of 8,192 u, then 8,192 v). Each run's walk depends on its seed alone,
never on the batch it is drawn in, so results are identical for any number of workers and across
``--resume``; they are not the stepped walks (other draws of the same law).

What a batch keeps is bounded by runs × moves and, in fact, by far less: the first visit of every
node (runs × nodes), its first visit at or after each request slot, the slots each node held the
token, and only the stays the measurement can ask about (:func:`walk_stays`), so a run of millions
of slots takes a few thousand stays of memory.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gossipsim.core.streams import WALK, WalkStreams
from gossipsim.cover.montecarlo import Line, line_of
from gossipsim.engine.slottables import StaySlots
from gossipsim.protocols import protocol_kind
from gossipsim.scheduling import UNIFORM_BLOCK, JumpChain, scheduler_for
from gossipsim.world.world import World, slot_costs

#: the scheduler stay kernels this engine implements (:attr:`~gossipsim.scheduling.Scheduler.stay_kernel`)
STAY_KERNELS = ("jump-chain",)
#: most entries (runs × moves) of one chunk of drawn moves: a few tens of MB of arrays
CHUNK_CELLS = 1 << 20
NEVER = np.iinfo(np.int64).max

#: ``(first visits: runs × nodes, first visits since each restart: restarts × runs × nodes)`` →
#: the slot each run stops at (``NEVER`` while not known from the slots walked so far)
StopRule = Callable[[np.ndarray, np.ndarray], np.ndarray]


def drawn_unavailable(world: World) -> str | None:
    """Why the walks of ``world`` cannot be drawn stay by stay (None: they can), beyond what the
    vectorised engine needs anyway (:func:`~gossipsim.execution.vectorized.capability.unavailable`)."""
    sc = world.scenario
    model = world.model
    if not protocol_kind(sc.protocol.kind).idle_stays(model):
        return (
            f"protocol {sc.protocol.kind!r} does not declare that repeated visits change nothing "
            f"for model {sc.model.kind!r}"
        )
    if scheduler_for(sc.scheduler.kind).stay_kernel not in STAY_KERNELS:
        return f"scheduler {sc.scheduler.kind!r} declares no stay kernel"
    if model.evaluation_columns():
        return f"model {sc.model.kind!r} evaluates every recorded state (evaluation columns)"
    if sc.metrics.latency_window != 1:
        return "metrics.latency_window is not 1 (latencies are then not first passages)"
    if sc.metrics.tolerance is None:
        return 'metrics.tolerance = "relative" (each run is judged after it ends)'
    if isinstance(world.compute_seconds, tuple):
        return (
            "nodes compute at their own speeds ([compute] per node): drawn stays time every slot "
            "alike"
        )
    return None


class _JumpMoves:
    """Moves of the jump chain, one vectorised step per move across the runs still walking."""

    def __init__(
        self, chain: JumpChain, streams: WalkStreams, starts: np.ndarray, total: int
    ) -> None:
        self.chain = chain
        self.streams = streams
        self.total = total
        self.rows = np.arange(starts.size)
        self.pos = np.asarray(starts, dtype=np.int64).copy()
        self.next_start = np.ones(starts.size, dtype=np.int64)
        self.hops = np.zeros(starts.size, dtype=np.int64)
        self.move = 0
        self.u = self.v = np.empty((starts.size, 0))

    def keep(self, mask: np.ndarray) -> None:
        self.streams.keep(mask)
        self.rows, self.pos = self.rows[mask], self.pos[mask]
        self.next_start, self.hops = self.next_start[mask], self.hops[mask]
        self.u, self.v = self.u[mask], self.v[mask]

    def _refill(self, draw: int) -> None:
        """The uniforms of the block of moves starting at move ``draw`` (u, then v)."""
        need = min(UNIFORM_BLOCK, self.total - draw)
        self.u = self.streams.block(2 * draw, need)
        self.v = self.streams.block(2 * draw + UNIFORM_BLOCK, need)

    def chunk(self, moves: int) -> tuple[np.ndarray, ...]:
        """The next ``moves`` stays of each run (at most as many as slots remain): holders, first
        slots, lengths, moves before.

        Only the destinations need a step per move; the stays' lengths follow from the holders
        and their uniforms at once, their first slots and the moves before them by sums."""
        moves = min(moves, self.total - self.move)  # a stay lasts a slot at least
        shape = (self.rows.size, moves)
        holders = np.empty(shape, dtype=np.int64)
        u = np.empty(shape)
        chain, pos = self.chain, self.pos
        step = chain.dest_step(self.v)
        for i in range(moves):
            j = (self.move + i) % UNIFORM_BLOCK
            if j == 0:
                self._refill(self.move + i)
                step = chain.dest_step(self.v)
            holders[:, i] = pos
            u[:, i] = self.u[:, j]
            pos = step(pos, j)
        lengths = chain.stay_lengths(holders, u, self.total)
        ends = np.cumsum(lengths, axis=1)
        starts = self.next_start[:, None] + ends - lengths
        moved = np.empty(shape, dtype=np.int64)
        moved[:, :-1] = holders[:, 1:] != holders[:, :-1]
        moved[:, -1] = pos != holders[:, -1]
        hops = self.hops[:, None] + np.cumsum(moved, axis=1) - moved
        self.pos, self.next_start = pos, starts[:, -1] + lengths[:, -1]
        self.hops = hops[:, -1] + moved[:, -1]
        self.move += moves
        return holders, starts, lengths, hops


class _LineMoves(_JumpMoves):
    """Moves of a ±1 walk on a line that never holds (a ring; a path whose ends move every slot):
    a chunk of moves drawn at once by cumulative sums, one slot and one hop each."""

    def __init__(
        self, line: Line, chain: JumpChain, streams: WalkStreams, starts: np.ndarray, total: int
    ) -> None:
        super().__init__(chain, streams, starts, total)
        self.line = line
        self.points = line.rank[self.pos]

    def keep(self, mask: np.ndarray) -> None:
        super().keep(mask)
        self.points = self.points[mask]

    def chunk(self, moves: int) -> tuple[np.ndarray, ...]:
        j = self.move % UNIFORM_BLOCK
        if j == 0:
            self._refill(self.move)
        moves = min(moves, self.u.shape[1] - j)  # within the block of uniforms
        steps = np.where(self.u[:, j : j + moves] < 0.5, 1, -1)
        walked = np.cumsum(steps, axis=1)
        points = self.points[:, None] + walked - steps  # each stay's point, before its move
        self.points = self.points + walked[:, -1]
        index = np.arange(self.move, self.move + moves, dtype=np.int64)
        shape = points.shape
        self.move += moves
        return (
            self.line.nodes_at(points),
            np.broadcast_to(index + 1, shape),
            np.ones(shape, dtype=np.int64),
            np.broadcast_to(index, shape),
        )


def _moves_of(world: World, seeds: np.ndarray, starts: np.ndarray) -> _JumpMoves:
    sc = world.scenario
    chain = scheduler_for(sc.scheduler.kind).jump_chain(world.indexed)
    streams = WalkStreams(seeds, WALK)
    line = line_of(chain)
    if line is not None and not line.leave:  # holds nowhere: a block of ±1 steps at once
        return _LineMoves(line, chain, streams, starts, sc.run.iterations)
    return _JumpMoves(chain, streams, starts, sc.run.iterations)


def walk_stays(
    world: World,
    seeds: np.ndarray,
    starts: np.ndarray,
    restart_slots: np.ndarray,
    stop_of: StopRule,
) -> tuple[StaySlots, np.ndarray, np.ndarray]:
    """The walks of a batch drawn stay by stay, until each run's last slot (``stop_of``, or the
    slot budget): the walks as a :class:`~gossipsim.engine.slottables.StaySlots`, each node's first visit
    (runs × nodes, 1-based slot; ``NEVER``: none) and its first visit at or after each restart
    slot (restarts × runs × nodes; a stay holding the restart slot counts from it).

    The stays kept are those holding a slot the measurement asks about: slot 1, the multiples of
    ``record_every``, a first visit (ever or since a restart), the slots before and at each
    restart, and the run's last slot (convergence, removal and latency slots are first visits or
    restart slots)."""
    sc = world.scenario
    total, every = sc.run.iterations, sc.metrics.record_every
    batch, k_nodes = seeds.size, world.nodes
    first = np.full(batch * k_nodes, NEVER, dtype=np.int64)
    since = np.full((restart_slots.size, batch * k_nodes), NEVER, dtype=np.int64)
    visits = np.zeros(batch * k_nodes, dtype=np.int64)
    last = np.full(batch, total, dtype=np.int64)  # each run's last slot, once known
    kept: list[tuple[np.ndarray, ...]] = []
    source = _moves_of(world, seeds, starts)
    while source.rows.size:
        width = CHUNK_CELLS // source.rows.size
        moves = max(64, min(UNIFORM_BLOCK, 1 << max(width.bit_length() - 1, 0)))
        rows = source.rows
        holders, begins, lengths, hops = source.chunk(moves)
        ends = begins + lengths - 1
        keys = rows[:, None] * k_nodes + holders
        valid = begins <= total
        new = valid & (first[keys] == NEVER)
        np.minimum.at(first, keys[new], begins[new])
        asked = np.zeros(keys.shape, dtype=bool)  # the stays the measurement may ask about
        asked[new] = first[keys[new]] == begins[new]  # first visits
        for i, a in enumerate(restart_slots.tolist()):
            new = valid & (ends >= a) & (since[i][keys] == NEVER)
            np.minimum.at(since[i], keys[new], np.maximum(begins[new], a))
        stop = stop_of(first.reshape(batch, k_nodes), since.reshape(-1, batch, k_nodes))
        last = np.minimum(stop, total)
        limit = last[rows][:, None]
        inside = begins <= limit
        held = np.minimum(ends, limit) - begins + 1
        if not inside.all():
            keys, held = keys[inside], held[inside]
        visits += np.bincount(keys.ravel(), held.ravel(), visits.size).astype(np.int64)
        asked |= begins == 1
        asked |= ends // every > (begins - 1) // every  # a multiple of record_every
        asked |= (begins <= limit) & (ends >= limit)
        for i, a in enumerate(restart_slots.tolist()):
            asked |= (begins <= a) & (ends >= a - 1)
            asked |= since[i][rows[:, None] * k_nodes + holders] == begins
        keep = inside & asked
        kept.append((np.broadcast_to(rows[:, None], keep.shape)[keep], begins[keep],
                     holders[keep], hops[keep]))  # fmt: skip
        source.keep(begins[:, -1] + lengths[:, -1] <= limit[:, 0])  # a stay still to come
    columns = int(last.max(initial=1))
    run_rows, stay_starts, stay_holders, stay_hops = (
        np.concatenate(p) for p in zip(*kept, strict=True)
    )
    order = np.argsort(run_rows * (columns + 1) + stay_starts, kind="stable")
    walk = StaySlots(
        rows=run_rows[order],
        starts=stay_starts[order],
        holders=stay_holders[order],
        hops=stay_hops[order],
        columns=columns,
        costs=slot_costs(world),
        per_run_visits=visits.reshape(batch, k_nodes),
    )
    return walk, first.reshape(batch, k_nodes), since.reshape(-1, batch, k_nodes)
