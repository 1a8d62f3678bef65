"""Monte Carlo cover moves and unlearning latencies, all runs stepping together in NumPy.

The walk is simulated as its *jump chain* with geometric holding times
(:class:`~gossipsim.scheduling.JumpChain`, built by the scheduler from its own move probabilities),
which keeps the distribution exact: at node k the token leaves with probability
``p_move(k) = Σ_{j≠k} P(k, j)`` per slot, so the slots spent at k before leaving are
``Geometric(p_move(k))`` and the destination is j with probability ``P(k, j)/p_move(k)``. A
Metropolis-Hastings leaf of a star (which keeps the token with probability ``1 − 1/(K−1)``) then costs
one draw per visit instead of ``K − 1`` on average. Runs are retired by compacting the active set; when
the chain never holds (every slot moves: simple random walk, Metropolis-Hastings on a regular graph, the
uniform scheduler) the last few runs of a cover simulation are finished one at a time with the
scheduler's one-step sampler (the same chain, as :class:`~gossipsim.scheduling.Walker` uses it), which
is cheaper than a NumPy step over a handful of runs.

Hitting a node needs no pass per slot where the law allows a shortcut (:func:`_moves_to`): under
the uniform scheduler the slots are Geometric(1/K); on a ring or a path the walk is a ±1 walk on a
line, drawn a block of steps at a time by cumulative sums (a ring of 20,000 nodes, 6.7·10^7 moves
a walk, in about a second). Walks there known to exceed :data:`MAX_LINE_MOVES` moves in all are
refused at once (:func:`check_hitting_work`).

Samples are reproducible from the seed given (``rng``); they are not the walks the engines realise
from a scenario's seeds (those come from the runs' own walk streams).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gossipsim.cover.common import (
    Graph,
    Start,
    as_rng,
    check_runs,
    draw_starts,
    prepare,
    resolve_node,
)
from gossipsim.errors import ConfigError
from gossipsim.scheduling import JumpChain, Scheduler

_TAIL_RUNS = 32  # below this many active runs (chains without holding) finish run by run
_VISITED_BYTES = 200_000_000  # cap on the runs×K visited matrix of one Monte Carlo chunk


def _cover_tail(
    chain: JumpChain,
    sched: Scheduler,
    act: np.ndarray,
    base: np.ndarray,
    pos: np.ndarray,
    visited: np.ndarray,
    step: int,
    rng: np.random.Generator,
    max_moves: int | None,
    out: np.ndarray,
) -> None:
    """Finish the last few runs one at a time with the scheduler's one-step sampler (what
    :class:`~gossipsim.scheduling.Walker` uses).

    Only for chains without holding (every slot moves), where the sampler's step is the jump chain's
    step; a NumPy step over a handful of runs costs more than a plain Python hop per run.
    """
    step_one = sched.sampler(chain.graph, rng)
    k_nodes = chain.n
    limit = math.inf if max_moves is None else max_moves
    for run, row, k in zip(act.tolist(), base.tolist(), pos.tolist(), strict=True):
        missing = k_nodes - int(np.count_nonzero(visited[row : row + k_nodes]))
        seen = visited[row : row + k_nodes].tolist()
        t = step
        while missing and t < limit:
            k = step_one(k)
            t += 1
            if not seen[k]:
                seen[k] = True
                missing -= 1
        if not missing:
            out[run] = t


def _cover_chunk(
    chain: JumpChain,
    sched: Scheduler,
    starts: np.ndarray,
    rng: np.random.Generator,
    max_moves: int | None,
) -> np.ndarray:
    """Cover moves of ``len(starts)`` runs stepping together (NaN beyond ``max_moves``)."""
    k_nodes = chain.n
    runs = starts.size
    out = np.full(runs, np.nan)
    if k_nodes == 1:
        out[:] = 0.0
        return out
    visited = np.zeros(runs * k_nodes, dtype=bool)
    act = np.arange(runs)
    base = act * k_nodes
    pos = starts.astype(np.int64)
    visited[base + pos] = True
    count = np.ones(runs, dtype=np.int64)
    per_run = not chain.all_move
    moves = np.zeros(runs, dtype=np.int64)
    step = 0
    stale = 0  # finished (or over the limit) runs still in the active set
    limited = per_run and max_moves is not None  # runs can also retire by exceeding max_moves
    limit = int(max_moves) if max_moves is not None else 0
    while act.size:
        if not per_run and max_moves is not None and step >= max_moves:
            break
        if not per_run and act.size <= _TAIL_RUNS:
            keep = count < k_nodes
            _cover_tail(
                chain, sched, act[keep], base[keep], pos[keep], visited, step, rng, max_moves, out
            )
            break
        step += 1
        if per_run:
            hold = chain.hold(rng, pos)
            assert hold is not None
            moves += hold
        pos = chain.dest(rng, pos)
        idx = base + pos
        new = np.flatnonzero(~visited[idx])  # runs whose new holder had not held the token yet
        visited[idx[new]] = True
        count[new] += 1
        fin = new[count[new] == k_nodes]
        if fin.size:
            ids = act[fin]
            if per_run:
                vals = moves[fin]
                if max_moves is not None:
                    ok = vals <= max_moves
                    ids, vals = ids[ok], vals[ok]
                out[ids] = vals
            else:
                out[ids] = step
            stale += fin.size
        if limited:
            keep = (count < k_nodes) & (moves <= limit)
            stale = act.size - int(np.count_nonzero(keep))
        if stale * 8 >= act.size:
            if not limited:
                keep = count < k_nodes
            act, base, pos, count, moves = (
                act[keep],
                base[keep],
                pos[keep],
                count[keep],
                moves[keep],
            )
            stale = 0
    return out


def monte_carlo_cover_moves(
    graph: Graph,
    scheduler: str = "metropolis-hastings",
    runs: int = 1000,
    rng: np.random.Generator | int | None = None,
    start: Start = "uniform",
    max_moves: int | None = None,
) -> np.ndarray:
    """Per-run cover moves (float; NaN where the cover takes more than ``max_moves`` moves).

    All runs step together (in chunks keeping the runs×K visited matrix under 200 MB); the walk is
    simulated as its jump chain with geometric holding times (module docstring), which is exact.
    ``start`` is ``"uniform"``, ``"stationary"`` or a node label.
    """
    g, sched = prepare(graph, scheduler)
    runs = check_runs(runs)
    if max_moves is not None and (
        isinstance(max_moves, bool) or not isinstance(max_moves, int | np.integer) or max_moves < 0
    ):
        raise ConfigError("max_moves", f"expected None or an integer >= 0, got {max_moves!r}")
    gen = as_rng(rng)
    starts = draw_starts(g, sched, start, runs, gen)
    chain = sched.jump_chain(g)
    chunk = max(1, min(runs, _VISITED_BYTES // g.size))
    out = np.empty(runs)
    for lo in range(0, runs, chunk):
        hi = min(runs, lo + chunk)
        out[lo:hi] = _cover_chunk(chain, sched, starts[lo:hi], gen, max_moves)
    return out


def monte_carlo_unlearning_latency(
    graph: Graph,
    node: Hashable,
    scheduler: str = "metropolis-hastings",
    runs: int = 1000,
    rng: np.random.Generator | int | None = None,
    start: Start = "stationary",
) -> np.ndarray:
    """Per-run unlearning latency (slots, ≥ 1) of a request for the node labelled ``node``.

    The holder of the first slot after the request is drawn from ``start`` (default: the stationary
    distribution); the latency is 1 if it is the node, else 1 + the moves until the node holds the
    token. Vectorised across runs like :func:`monte_carlo_cover_moves`.
    """
    g, sched = prepare(graph, scheduler)
    target = resolve_node(g, node, "node")
    runs = check_runs(runs)
    gen = as_rng(rng)
    pos = draw_starts(g, sched, start, runs, gen)
    chain = sched.jump_chain(g)
    out = np.ones(runs)
    alive = pos != target
    direct = _moves_to(chain, gen, pos[alive], target)
    if direct is not None:  # hitting times drawn without a NumPy pass a slot
        out[alive] = 1.0 + direct
        return out
    act = np.flatnonzero(alive)
    pos = pos[alive]
    moves = np.zeros(act.size, dtype=np.int64)
    step = 0
    while act.size:
        step += 1
        hold = chain.hold(gen, pos)
        if hold is not None:
            moves += hold
        pos = chain.dest(gen, pos)
        hit = pos == target
        if hit.any():
            out[act[hit]] = 1.0 + (moves[hit] if hold is not None else step)
            keep = ~hit
            act, pos, moves = act[keep], pos[keep], moves[keep]
    return out


def monte_carlo_removal_latency(
    graph: Graph,
    node: Hashable,
    at_slot: int,
    scheduler: str = "metropolis-hastings",
    runs: int = 1000,
    rng: np.random.Generator | int | None = None,
    start: Start = "uniform",
) -> np.ndarray:
    """Per-run removal latency (slots, ≥ 0) of a request for the node labelled ``node`` arriving
    before slot ``at_slot`` (r) of a walk whose first holder is drawn from ``start``: 0 when the node
    held none of the slots 1..r−1, else 1 + the slots after r until it holds the token (1 if it
    holds slot r), as a run measures it; the Monte Carlo counterpart of
    :func:`~gossipsim.cover.hitting.expected_removal_latency`.

    Each walk is simulated by its jump chain (a holder keeps the token for a geometric number of
    slots, then moves to a distinct holder), vectorised across runs."""
    if isinstance(at_slot, bool) or not isinstance(at_slot, int | np.integer) or at_slot < 1:
        raise ConfigError("at_slot", f"must be an integer slot >= 1, got {at_slot!r}")
    r = int(at_slot)
    g, sched = prepare(graph, scheduler)
    target = resolve_node(g, node, "node")
    runs = check_runs(runs)
    gen = as_rng(rng)
    pos = draw_starts(g, sched, start, runs, gen)
    chain = sched.jump_chain(g)
    first = np.ones(runs, dtype=np.int64)  # first slot of the current holder's stay
    seen = np.zeros(runs, dtype=bool)  # the node held one of the slots before ``first``
    out = np.full(runs, np.nan)
    act = np.arange(runs)
    while act.size:  # until each walk's stay covers slot r
        hold = chain.hold(gen, pos)
        stay = np.ones(act.size, dtype=np.int64) if hold is None else hold.astype(np.int64)
        covers = first + stay > r  # this stay holds slot r
        if covers.any():
            here = act[covers]
            at_node = pos[covers] == target
            earlier = seen[covers] | (at_node & (first[covers] < r))  # held before slot r
            out[here] = np.where(earlier, np.where(at_node, 1.0, np.nan), 0.0)
            still = earlier & ~at_node  # seen before, not holding slot r: walk on to the node
            if still.any():
                out[here[still]] = _slots_to_node(
                    chain, gen, pos[covers][still], (first + stay)[covers][still], target
                ) - (r - 1)
            keep = ~covers
            act, pos, first, stay, seen = act[keep], pos[keep], first[keep], stay[keep], seen[keep]
        seen |= pos == target
        first = first + stay
        pos = chain.dest(gen, pos)
    return out


def _slots_to_node(
    chain: JumpChain, gen: np.random.Generator, pos: np.ndarray, next_first: np.ndarray, target: int
) -> np.ndarray:
    """The first slot the node ``target`` holds, for walks that leave ``pos`` at the start of slot
    ``next_first`` (the jump chain from there on)."""
    out = np.empty(pos.size)
    direct = _moves_to(chain, gen, pos, target, first_stay=False)
    if direct is not None:  # the slot reaching the target is next_first − 1 + its slots
        return next_first - 1 + direct
    act = np.arange(pos.size)
    first = next_first.copy()
    pos = chain.dest(gen, pos)
    while act.size:
        hit = pos == target
        if hit.any():
            out[act[hit]] = first[hit]
            keep = ~hit
            act, pos, first = act[keep], pos[keep], first[keep]
            if not act.size:
                break
        hold = chain.hold(gen, pos)
        first = first + (1 if hold is None else hold.astype(np.int64))
        pos = chain.dest(gen, pos)
    return out


#: most ±1 steps of a walk on a cycle or a path drawn at once (8 MB of int64 partial sums)
_LINE_BLOCK = 1 << 20
#: the most moves the walks to a node on a cycle or a path may take in all: about 15 s at the
#: measured 6.5 ns a move (a ring of 20,000 nodes takes 6.7·10^7 moves a walk on average)
MAX_LINE_MOVES = 2_000_000_000


@dataclass(frozen=True)
class Line:
    """A walk on a cycle or a path seen as a ±1 walk on the integers (:func:`line_of`): node
    ``v`` sits at the points ``rank[v] + k·period`` (a cycle: period K) or ``±rank[v] + k·period``
    (a path folded: period 2(K − 1), its ends at the multiples of K − 1)."""

    rank: np.ndarray
    period: int
    path: bool
    #: the probability of leaving each end of a path per slot (1: no holding), else ()
    leave: tuple[float, ...] = ()

    def targets(self, target: int) -> tuple[int, ...]:
        t = int(self.rank[target])
        return (t, -t) if self.path else (t,)

    def exit_gaps(self, starts: np.ndarray, target: int) -> tuple[np.ndarray, np.ndarray]:
        """Steps up and down from each start's point to the nearest point of ``target``."""
        x = self.rank[starts]
        up = np.min([(t - x) % self.period for t in self.targets(target)], axis=0)
        down = np.min([(x - t) % self.period for t in self.targets(target)], axis=0)
        return up, down

    @functools.cached_property
    def order(self) -> np.ndarray:
        """The nodes in their order along the line (the inverse of :attr:`rank`)."""
        return np.argsort(self.rank)

    def nodes_at(self, points: np.ndarray) -> np.ndarray:
        """The node at each point of the line (folded on a path)."""
        y = points % self.period
        if self.path:
            y = np.where(y < self.rank.size, y, self.period - y)
        return self.order[y]


def line_of(chain: JumpChain) -> Line | None:
    """The walk as a ±1 walk on a line, when ``chain`` jumps to either of two neighbours with
    probability 1/2 (its rows uniform) on a cycle (every node of degree 2, moving every slot) or
    a path (two ends of degree 1, the inner nodes moving every slot; the ends may hold, as
    Metropolis-Hastings' do, with probability 1/2): Metropolis-Hastings or the simple random walk
    on a ring or a path. Else None. The order along the graph is SciPy's depth-first order from
    node 0 (a cycle) or from an end (a path)."""
    n = chain.n
    if chain.mode != "rows" or n < 3:
        return None
    deg = chain.deg
    ends = np.flatnonzero(deg == 1)
    if np.all(deg == 2) and chain.all_move:
        start, path = 0, False
    elif ends.size == 2 and np.count_nonzero(deg == 2) == n - 2:
        inner = np.ones(n, dtype=bool)
        inner[ends] = False
        if not np.all(chain.pmove[inner] == 1.0):
            return None
        start, path = int(ends[0]), True
    else:
        return None
    import scipy.sparse as sp
    from scipy.sparse.csgraph import depth_first_order

    matrix = sp.csr_array(
        (np.ones(chain.indices.size, dtype=np.int8), chain.indices, chain.indptr), shape=(n, n)
    )
    order = depth_first_order(matrix, start, directed=False, return_predecessors=False)
    if order.size != n:  # not connected (refused before)
        return None
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    if not path:
        return Line(rank, n, False)
    leave = (float(chain.pmove[order[0]]), float(chain.pmove[order[-1]]))
    return Line(rank, 2 * (n - 1), True, leave if min(leave) < 1.0 else ())


def check_hitting_work(
    graph: Graph, node: Hashable, scheduler: str, runs: int, key: str = "runs"
) -> None:
    """Refuse, at once and in one line naming ``key``, walks to ``node`` that would take more
    than :data:`MAX_LINE_MOVES` moves in all, where that is known without simulating them: on a
    cycle or a path (:func:`line_of`) a walk from x takes up·down moves on average (the ±1 walk's
    exit time from the interval between the node's nearest points), here averaged over a uniform
    first holder ((K² − 1)/6 on a ring of K nodes)."""
    g, sched = prepare(graph, scheduler)
    line = line_of(sched.jump_chain(g))
    if line is None:
        return
    target = resolve_node(g, node, "node")
    up, down = line.exit_gaps(np.arange(g.size), target)
    each = float(np.mean(up * down, dtype=float))
    _refuse_line_work(each * int(runs), each, g.size, line, key)


def _refuse_line_work(moves: float, each: float, n: int, line: Line, key: str) -> None:
    if moves > MAX_LINE_MOVES:
        what = "path" if line.path else "cycle"
        raise ConfigError(
            key,
            f"the walks to the node would take about {moves:.3g} moves in all on this {what} of "
            f"{n:,} nodes ({each:.3g} a walk on average), more than the {MAX_LINE_MOVES:.3g} "
            "simulated in about 15 s; use fewer runs or nodes (the exact expectation alone: "
            "gossipsim.next_visit_latency)",
        )


def _moves_to(
    chain: JumpChain,
    gen: np.random.Generator,
    pos: np.ndarray,
    target: int,
    *,
    first_stay: bool = True,
) -> np.ndarray | None:
    """Slots until each walk from ``pos`` (none at ``target``) first reaches ``target``, the stay
    at ``pos`` included when ``first_stay``, drawn from their exact law without stepping all walks
    slot by slot, where the walk allows it; None elsewhere (the caller steps the jump chain).

    * The ``uniform`` scheduler: every slot's holder is uniform over the K nodes, so the slots are
      ``Geometric(1/K)`` (support 1, 2, …).
    * A walk on a cycle or a path that jumps to either neighbour with probability 1/2
      (:func:`line_of`: Metropolis-Hastings or the simple random walk on a ring or a path): its
      position is a ±1 random walk on a line, simulated a block of steps at a time by cumulative
      sums (:func:`_line_walk`); each stay at an end of a path that holds (Metropolis-Hastings)
      lasts Geometric(p) slots, added as a negative binomial. A ring of K nodes takes about K²/6
      moves from a stationary start (10^8 at K = 20,000: about a second, where one NumPy pass per
      slot took minutes).
    """
    if chain.mode == "uniform":
        return gen.geometric(1.0 / chain.n, size=pos.size).astype(float)
    line = line_of(chain)
    if line is None:
        return None
    up, down = line.exit_gaps(pos, target)
    total = float(np.sum(up * down, dtype=float))
    _refuse_line_work(total, total / max(pos.size, 1), chain.n, line, "runs")
    out = np.empty(pos.size)
    for i, (start, u, d) in enumerate(
        zip(line.rank[pos].tolist(), up.tolist(), down.tolist(), strict=True)
    ):
        moves, at_ends = _line_walk(int(u), int(d), int(start), line, gen, first_stay)
        held = zip(at_ends, line.leave, strict=True) if line.leave else ()
        extra = sum(int(gen.negative_binomial(v, p)) for v, p in held if v and p < 1)
        out[i] = moves + extra
    return out


def _line_walk(
    up: int, down: int, start: int, line: Line, gen: np.random.Generator, first_stay: bool
) -> tuple[int, tuple[int, int]]:
    """Steps of a ±1 random walk from 0 until it first reaches ``up`` or ``−down``, and (for a
    path whose ends hold) the stays at each end before that (the first point, ``start``, counted
    when ``first_stay``): blocks of steps drawn at once, growing to :data:`_LINE_BLOCK`, the first
    hit found in their cumulative sums."""
    done = 0
    position = 0
    block = 1024
    ends = [0, 0]
    half = line.period // 2
    if line.leave and first_stay and start % half == 0:
        ends[(start % line.period) // half] += 1
    while True:
        steps = gen.integers(0, 2, size=block, dtype=np.int8).astype(np.int64)
        walk = np.cumsum(2 * steps - 1)
        walk += position
        outside = (walk >= up) | (walk <= -down)
        first = int(np.argmax(outside))
        hit = bool(outside[first])
        if line.leave:  # the stays at the ends among the points before the hit
            points = (walk[: first if hit else block] + start) % line.period
            ends[0] += int(np.count_nonzero(points == 0))
            ends[1] += int(np.count_nonzero(points == half))
        if hit:
            return done + first + 1, (ends[0], ends[1])
        done += block
        position = int(walk[-1])
        block = min(4 * block, _LINE_BLOCK)


def summarize(samples: np.ndarray) -> dict[str, Any]:
    """Mean, standard deviation, standard error, 95% CI (mean ± 1.96·sd/√n) and median.

    NaN samples (runs that hit ``max_moves``) are left out and counted in ``unfinished``. With
    fewer than two finished runs the spread is unknown: ``sd`` and ``se`` are NaN and ``ci95`` is
    None (one run says nothing about the interval; it is not of zero width).
    """
    x = np.asarray(samples, dtype=float).ravel()
    finite = x[~np.isnan(x)]
    n = int(finite.size)
    nan = float("nan")
    if n == 0:
        return {
            "mean": nan,
            "sd": nan,
            "se": nan,
            "ci95": None,
            "median": nan,
            "runs": 0,
            "unfinished": int(x.size),
        }
    mean = float(finite.mean())
    sd = float(finite.std(ddof=1)) if n > 1 else nan
    se = sd / math.sqrt(n)
    return {
        "mean": mean,
        "sd": sd,
        "se": se,
        "ci95": (mean - 1.96 * se, mean + 1.96 * se) if n > 1 else None,
        "median": float(np.median(finite)),
        "runs": n,
        "unfinished": int(x.size - n),
    }
