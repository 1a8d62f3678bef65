"""Cover times and unlearning latencies of the token walk: exact values, bounds and Monte Carlo.

Time is counted in slots ``i = 1, 2, ...``; slot 1 is the first holder. A move to a neighbour and a
Metropolis-Hastings rejection (the holder keeps the token) both take one slot, and "moves" are slot
transitions, so the cover *iteration* (first slot at which every node has held the token) is the
cover *moves* plus one.

Quantities
----------
Cover time (moves)
    ``C = min{t : {X_0, ..., X_t} = V}`` for the walk ``X`` of :mod:`gossipsim.scheduling`
    (Lovász 1993, "Random walks on graphs: a survey", §2; Aldous & Fill, "Reversible Markov chains
    and random walks on graphs", ch. 6). The start ``X_0`` is uniform over the nodes by default, a
    given node index, or the stationary distribution π.
Hitting time
    ``H(v, k) = E_v[min{t ≥ 0 : X_t = k}]`` (so ``H(k, k) = 0``), the solution of
    ``(I − P)|_{V∖k} h = 1`` (Aldous & Fill ch. 2 §2).
Unlearning latency of node k
    a request arrives before slot ``r``; the holder of slot ``r`` is drawn from π (default);
    the latency is 1 if that holder is ``k``, else ``1 +`` the moves until ``k`` holds the token, so
    ``E[latency] = 1 + Σ_v π(v)·H(v, k)``. On the complete graph: ``1/K + K − 1``.

Exact cover time
    by the Markov chain on states ``(S, v)``, ``v ∈ S ⊆ V`` (visited set, holder):
    ``E[V, v] = 0`` and ``E[S, v] = 1 + Σ_u P(v, u)·E[S ∪ {u}, u]``. Ordered by visited set the system
    is block-triangular; subsets are processed by decreasing size and all subsets of one size ``m``
    are solved together as a batch of dense ``m×m`` systems (``numpy.linalg.solve`` on stacked
    matrices). The state space has ``K·2^(K−1)`` states, hence :data:`EXACT_COVER_MAX_NODES`.
    Closed forms are used, for any K, on

    * the complete graph (Metropolis-Hastings = simple random walk there): ``(K−1)·H_{K−1}``;
    * the cycle: ``K(K−1)/2`` (Lovász 1993, §2 example);
    * the star with ``n = K−1`` leaves (derived below, :func:`star_cover_moves`);
    * the ``uniform`` scheduler (coupon collector): ``K·H_K − 1``.

    The complete graph and the cycle are vertex-transitive and regular (Metropolis-Hastings never
    rejects there, so it *is* the simple random walk): their values hold for every start. The star's
    value depends on the scheduler and on the start (centre or leaf). The uniform scheduler draws
    every slot's holder uniformly from all K nodes, the current holder included, so slot 1 (whatever
    its holder) is one coupon and the other ``K − 1`` take ``K·H_{K−1} = K·H_K − 1`` moves on
    average: the same for every start.

Bounds
    Matthews (1988), "Covering problems for Markov chains", Ann. Probab. 16(3): for every start x,
    ``E_x C ≤ H_{K−1} · max_{i≠j} H(i, j)`` and, for every ``A ⊆ V`` with ``x ∈ A``,
    ``E_x C ≥ H_{|A|−1} · min_{i≠j ∈ A} H(i, j)`` (see also Levin, Peres & Wilmer, "Markov chains and
    mixing times", §11.2). Here ``H_n = 1 + 1/2 + ... + 1/n``.

Monte Carlo
    all runs step together in NumPy. The walk is simulated as its *jump chain* with geometric holding
    times, which keeps the distribution exact: at node k the token leaves with probability
    ``p_move(k) = Σ_{j≠k} P(k, j)`` per slot, so the slots spent at k before leaving are
    ``Geometric(p_move(k))`` and the destination is j with probability ``P(k, j)/p_move(k)``. A
    Metropolis-Hastings leaf of a star (which keeps the token with probability ``1 − 1/(K−1)``) then
    costs one draw per visit instead of ``K − 1`` on average. Runs are retired by compacting the
    active set; when the chain never holds (every slot moves: simple random walk, Metropolis-Hastings
    on a regular graph, the uniform scheduler) the last few runs of a cover simulation are finished
    one at a time with :class:`~gossipsim.scheduling.Walker` (the same chain), which is cheaper than a
    NumPy step over a handful of runs.

Every function takes a :class:`networkx.Graph` or an :class:`~gossipsim.scheduling.IndexedGraph`, a
scheduler name (see :data:`~gossipsim.scheduling.SCHEDULER_KINDS`), and node *indices* (``0..K−1`` in
``graph.nodes`` order; :func:`node_index` maps a label). Randomness comes only from the
:class:`numpy.random.Generator` (or seed) passed in.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, TypeAlias

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import connected_components

from .errors import ConfigError
from .scheduling import (
    IndexedGraph,
    Walker,
    check_scheduler,
    stationary_distribution,
    transition_matrix,
)

__all__ = [
    "EXACT_COVER_MAX_NODES",
    "MATTHEWS_MAX_NODES",
    "ExactCover",
    "all_pairs_hitting_times",
    "cover_iteration",
    "exact_cover_moves",
    "exact_cover_moves_with_method",
    "expected_unlearning_latency",
    "harmonic",
    "hitting_times_to",
    "matthews_bounds",
    "monte_carlo_cover_moves",
    "monte_carlo_unlearning_latency",
    "node_index",
    "star_cover_moves",
    "summarize",
    "TheoreticalCover",
    "theoretical_cover",
    "theoretical_cover_moves",
]

EXACT_COVER_MAX_NODES = 22
"""Largest graph for the subset-chain exact cover time (``K·2^(K−1)`` states). Measured on a 2-core
machine (random 3-regular / dense graphs): K=16 in 0.15 s, K=18 in 0.6–1.1 s, K=20 in 3.2–3.6 s,
K=22 in 12–15 s, all under 0.6 GB; K=23 takes about 31 s and each extra node roughly doubles it."""

MATTHEWS_MAX_NODES = 5000
"""Largest graph for the dense all-pairs hitting times behind :func:`matthews_bounds`
(dense ``K×K`` inverse plus the greedy subset search: about 8 s and 1.2 GB at 5,000 nodes)."""

_INT16_MAX = 32767
_DENSE_WIDTH = (
    0.2  # subset chain: rows with more nonzeros than this fraction of K are gathered whole
)
_TAIL_RUNS = 32  # below this many active runs (chains without holding) finish run by run
_VISITED_BYTES = 200_000_000  # cap on the runs×K visited matrix of one Monte Carlo chunk
_SUBSET_CHUNK_BYTES = 64_000_000  # cap on one batch of stacked m×m systems in the subset chain

Graph: TypeAlias = IndexedGraph | nx.Graph
Start: TypeAlias = str | int


# --------------------------------------------------------------------------- helpers


def harmonic(n: int) -> float:
    """The harmonic number ``H_n = Σ_{i=1..n} 1/i`` (``H_0 = 0``)."""
    if n <= 0:
        return 0.0
    return float(np.sum(1.0 / np.arange(1, n + 1, dtype=float)))


def _indexed(graph: Graph) -> IndexedGraph:
    if isinstance(graph, IndexedGraph):
        g = graph
    elif isinstance(graph, nx.Graph):
        if graph.is_directed():
            raise ConfigError(
                "graph", "the token walk needs an undirected graph (got a directed one)"
            )
        g = IndexedGraph.from_networkx(graph)
    else:
        raise ConfigError(
            "graph", f"expected a networkx.Graph or an IndexedGraph, got {type(graph).__name__}"
        )
    if g.size == 0:
        raise ConfigError("graph", "the graph has no nodes")
    return g


def _require_connected(g: IndexedGraph) -> None:
    """The walk must be able to reach every node (else cover and hitting times are infinite)."""
    if g.size == 1:
        return
    adj = sp.csr_array(
        (np.ones(g.indices.size, dtype=np.int8), g.indices, g.indptr), shape=(g.size, g.size)
    )
    n_comp, _ = connected_components(adj, directed=False)
    if n_comp != 1:
        raise ConfigError(
            "graph",
            f"the graph must be connected for the token to reach every node (it has {n_comp} components)",
        )


def _prepare(graph: Graph, scheduler: str) -> tuple[IndexedGraph, str]:
    kind = check_scheduler(scheduler, "scheduler")
    g = _indexed(graph)
    if kind != "uniform":
        _require_connected(g)
    return g, kind


def node_index(graph: Graph, label: Hashable, key: str = "node") -> int:
    """Index (``0..K−1``, ``graph.nodes`` order) of the node labelled ``label``.

    Raises :class:`ConfigError` naming ``key`` if there is no such node.
    """
    return _indexed(graph).index(label, key)


def _check_node(node: Any, n: int, key: str = "node") -> int:
    if isinstance(node, bool) or not isinstance(node, int | np.integer):
        raise ConfigError(key, f"expected a node index 0..{n - 1}, got {node!r}")
    if not 0 <= int(node) < n:
        raise ConfigError(key, f"node index must be in 0..{n - 1}, got {int(node)}")
    return int(node)


def _start_weights(g: IndexedGraph, kind: str, start: Start) -> np.ndarray:
    """Distribution of the first holder over the node indices."""
    n = g.size
    if isinstance(start, str):
        if start == "uniform":
            return np.full(n, 1.0 / n)
        if start == "stationary":
            return stationary_distribution(g, kind)
        raise ConfigError(
            "start", f"expected 'uniform', 'stationary' or a node index, got {start!r}"
        )
    w = np.zeros(n)
    w[_check_node(start, n, "start")] = 1.0
    return w


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int | np.integer) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise ConfigError("rng", f"expected a numpy Generator, an integer seed or None, got {rng!r}")


def _check_runs(runs: Any) -> int:
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 1:
        raise ConfigError("runs", f"the number of runs must be an integer >= 1, got {runs!r}")
    return int(runs)


def _draw_starts(
    g: IndexedGraph, kind: str, start: Start, runs: int, rng: np.random.Generator
) -> np.ndarray:
    n = g.size
    if isinstance(start, str):
        w = _start_weights(g, kind, start)  # validates the string
        if start == "uniform" or kind != "simple-random-walk":
            return rng.integers(0, n, size=runs)
        return rng.choice(n, size=runs, p=w)
    return np.full(runs, _check_node(start, n, "start"), dtype=np.int64)


# --------------------------------------------------------------------------- cover iteration


def cover_iteration(holders: np.ndarray, n_nodes: int) -> int | None:
    """First slot (1-based; slot 1 is ``holders[0]``) at which every node has held the token.

    ``holders`` is the recorded walk: the holder index of each slot. Returns ``None`` if some node
    never holds the token. The cover *moves* are this value minus one.
    """
    h = np.asarray(holders)
    if h.ndim != 1:
        raise ConfigError("holders", f"expected a 1-D array of holder indices, got shape {h.shape}")
    if n_nodes < 1:
        raise ConfigError("n_nodes", f"expected at least one node, got {n_nodes}")
    if h.size == 0:
        return None
    if h.min() < 0 or h.max() >= n_nodes:
        raise ConfigError("holders", f"holder indices must lie in 0..{n_nodes - 1}")
    first = np.full(n_nodes, -1, dtype=np.int64)
    first[h[::-1]] = np.arange(h.size - 1, -1, -1)  # reversed: each node keeps its earliest slot
    if np.any(first < 0):
        return None
    return int(first.max()) + 1


# --------------------------------------------------------------------------- Monte Carlo


def _uniform_ints(rng: np.random.Generator, high: int, size: int) -> np.ndarray:
    """``size`` exact uniform draws from ``0..high−1`` as int64 (16-bit draws when they suffice,
    which NumPy generates about twice as fast)."""
    if high <= _INT16_MAX:
        return rng.integers(0, high, size=size, dtype=np.int16).astype(np.int64)
    return rng.integers(0, high, size=size)


class _JumpChain:
    """Vectorised sampler of the jump chain: holding slots and the next distinct holder.

    Modes: ``uniform`` (the uniform scheduler: every slot a uniform node, a "stay" counts as a move),
    ``rows`` (every row's jump distribution is uniform over the neighbours: simple random walk, and
    Metropolis-Hastings on regular graphs or stars) and ``cumulative`` (general: a global array of
    within-row cumulative weights, offset by the row index, searched with ``np.searchsorted``).
    """

    def __init__(self, g: IndexedGraph, kind: str) -> None:
        self.graph = g
        self.kind = kind
        self.n = n = g.size
        self.all_move = True  # every row leaves its node with probability 1 per slot
        self.mode = "uniform"
        self.regular = 0  # the common degree when the graph is regular (rows mode), else 0
        self.pmove: np.ndarray = np.ones(n)
        deg = g.degree
        self.indptr = g.indptr
        self.indices = g.indices
        self.deg = deg
        self.last = g.indptr[1:] - 1
        self.key = np.empty(0)
        if kind == "uniform" or n == 1:
            return
        rows = np.repeat(np.arange(n), deg)
        degf = deg.astype(float)
        if kind == "simple-random-walk":
            w = 1.0 / degf[rows]
        else:  # metropolis-hastings, eq. (5)
            w = np.minimum(1.0, degf[rows] / degf[g.indices]) / degf[rows]
        pmove = np.asarray(np.bincount(rows, weights=w, minlength=n), dtype=float)
        pmove[pmove > 1.0 - 1e-12] = 1.0
        self.pmove = pmove
        self.all_move = bool(np.all(pmove == 1.0))
        starts = g.indptr[:-1]
        wmax = np.maximum.reduceat(w, starts)
        wmin = np.minimum.reduceat(w, starts)
        if np.all(wmax - wmin <= 1e-12 * wmax):
            self.mode = "rows"
            if bool(np.all(deg == deg[0])):
                self.regular = int(deg[0])
            return
        self.mode = "cumulative"
        cs = np.cumsum(w)
        before = np.concatenate(([0.0], cs))[starts]
        within = np.bincount(rows, weights=w, minlength=n)
        key = rows + (cs - before[rows]) / within[rows]
        key[self.last] = np.arange(1, n + 1, dtype=float)  # each row ends exactly at k + 1
        self.key = key

    def hold(self, rng: np.random.Generator, pos: np.ndarray) -> np.ndarray | None:
        """Slots until the token leaves each holder (``None``: one slot for all)."""
        if self.all_move:
            return None
        return rng.geometric(self.pmove[pos])

    def dest(self, rng: np.random.Generator, pos: np.ndarray) -> np.ndarray:
        """Next distinct holder (for ``uniform``: next holder, possibly the same)."""
        if self.mode == "uniform":
            return _uniform_ints(rng, self.n, pos.size)
        if self.mode == "rows" and self.regular:  # every degree is r: row k starts at k·r
            r = self.regular
            e = _uniform_ints(rng, r, pos.size)
            e += pos * r
            return self.indices[e]
        u = rng.random(pos.size)
        if self.mode == "rows":
            d = self.deg[pos]
            off = np.minimum((u * d).astype(np.int64), d - 1)
            return self.indices[self.indptr[pos] + off]
        e = np.searchsorted(self.key, pos + u, side="right")
        np.minimum(e, self.last[pos], out=e)
        return self.indices[e]


def _cover_tail(
    chain: _JumpChain,
    act: np.ndarray,
    base: np.ndarray,
    pos: np.ndarray,
    visited: np.ndarray,
    step: int,
    rng: np.random.Generator,
    max_moves: int | None,
    out: np.ndarray,
) -> None:
    """Finish the last few runs one at a time with :class:`~gossipsim.scheduling.Walker`.

    Only for chains without holding (every slot moves), where the walker's step is the jump chain's
    step; a NumPy step over a handful of runs costs more than a plain Python hop per run.
    """
    walker = Walker(chain.graph, chain.kind, rng)
    k_nodes = chain.n
    limit = math.inf if max_moves is None else max_moves
    for run, row, k in zip(act.tolist(), base.tolist(), pos.tolist(), strict=True):
        missing = k_nodes - int(np.count_nonzero(visited[row : row + k_nodes]))
        seen = visited[row : row + k_nodes].tolist()
        t = step
        while missing and t < limit:
            k = walker.next(k)
            t += 1
            if not seen[k]:
                seen[k] = True
                missing -= 1
        if not missing:
            out[run] = t


def _cover_chunk(
    chain: _JumpChain,
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
            _cover_tail(chain, act[keep], base[keep], pos[keep], visited, step, rng, max_moves, out)
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
    ``start`` is ``"uniform"``, ``"stationary"`` or a node index.
    """
    g, kind = _prepare(graph, scheduler)
    runs = _check_runs(runs)
    if max_moves is not None and (
        isinstance(max_moves, bool) or not isinstance(max_moves, int | np.integer) or max_moves < 0
    ):
        raise ConfigError("max_moves", f"expected None or an integer >= 0, got {max_moves!r}")
    gen = _rng(rng)
    starts = _draw_starts(g, kind, start, runs, gen)
    chain = _JumpChain(g, kind)
    chunk = max(1, min(runs, _VISITED_BYTES // g.size))
    out = np.empty(runs)
    for lo in range(0, runs, chunk):
        hi = min(runs, lo + chunk)
        out[lo:hi] = _cover_chunk(chain, starts[lo:hi], gen, max_moves)
    return out


def monte_carlo_unlearning_latency(
    graph: Graph,
    node_index: int,
    scheduler: str = "metropolis-hastings",
    runs: int = 1000,
    rng: np.random.Generator | int | None = None,
    start: Start = "stationary",
) -> np.ndarray:
    """Per-run unlearning latency (slots, ≥ 1) of a request for node ``node_index``.

    The holder of the first slot after the request is drawn from ``start`` (default: the stationary
    distribution); the latency is 1 if it is the node, else 1 + the moves until the node holds the
    token. Vectorised across runs like :func:`monte_carlo_cover_moves`.
    """
    g, kind = _prepare(graph, scheduler)
    target = _check_node(node_index, g.size, "node")
    runs = _check_runs(runs)
    gen = _rng(rng)
    pos = _draw_starts(g, kind, start, runs, gen)
    chain = _JumpChain(g, kind)
    out = np.ones(runs)
    alive = pos != target
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


def summarize(samples: np.ndarray) -> dict[str, Any]:
    """Mean, standard deviation, standard error, 95% CI (mean ± 1.96·sd/√n) and median.

    NaN samples (runs that hit ``max_moves``) are left out and counted in ``unfinished``.
    """
    x = np.asarray(samples, dtype=float).ravel()
    finite = x[~np.isnan(x)]
    n = int(finite.size)
    if n == 0:
        nan = float("nan")
        return {
            "mean": nan,
            "sd": nan,
            "se": nan,
            "ci95": (nan, nan),
            "median": nan,
            "runs": 0,
            "unfinished": int(x.size),
        }
    mean = float(finite.mean())
    sd = float(finite.std(ddof=1)) if n > 1 else 0.0
    se = sd / math.sqrt(n)
    return {
        "mean": mean,
        "sd": sd,
        "se": se,
        "ci95": (mean - 1.96 * se, mean + 1.96 * se),
        "median": float(np.median(finite)),
        "runs": n,
        "unfinished": int(x.size - n),
    }


# --------------------------------------------------------------------------- hitting times


def hitting_times_to(
    graph: Graph, node_index: int, scheduler: str = "metropolis-hastings"
) -> np.ndarray:
    """Exact expected moves ``H(v, k)`` to reach node ``k = node_index`` from every node v (0 at k).

    Sparse solve of ``(I − P)|_{V∖{k}} h = 1`` (first-step analysis; Aldous & Fill ch. 2). For the
    ``uniform`` scheduler every slot's holder is k with probability 1/K, so ``H(v, k) = K`` for v ≠ k.
    """
    g, kind = _prepare(graph, scheduler)
    n = g.size
    k = _check_node(node_index, n, "node")
    h = np.zeros(n)
    if n == 1:
        return h
    others = np.flatnonzero(np.arange(n) != k)
    if kind == "uniform":
        h[others] = float(n)
        return h
    p = transition_matrix(g, kind).tocsc()
    sub = p[others][:, others]
    a = (sp.identity(n - 1, format="csc") - sub).tocsc()
    h[others] = spla.spsolve(a, np.ones(n - 1))
    return h


def expected_unlearning_latency(
    graph: Graph,
    node_index: int,
    scheduler: str = "metropolis-hastings",
    start: Start = "stationary",
) -> float:
    """``1 + Σ_v w(v)·H(v, k)`` where w is the distribution of the first holder after the request.

    ``start`` is ``"stationary"`` (default, π), ``"uniform"`` or a node index.
    """
    g, kind = _prepare(graph, scheduler)
    w = _start_weights(g, kind, start)
    return 1.0 + float(w @ hitting_times_to(g, node_index, kind))


def all_pairs_hitting_times(graph: Graph, scheduler: str = "metropolis-hastings") -> np.ndarray:
    """Matrix ``H[i, j]`` of expected moves from i to j (dense; at most :data:`MATTHEWS_MAX_NODES`).

    Through the fundamental matrix ``Z = (I − P + 1πᵀ)^{-1}``: ``H(i, j) = (Z_jj − Z_ij)/π_j``
    (Aldous & Fill ch. 2; Lovász 1993).
    """
    g, kind = _prepare(graph, scheduler)
    n = g.size
    if n > MATTHEWS_MAX_NODES:
        raise ConfigError(
            "nodes",
            f"all-pairs hitting times are dense and limited to {MATTHEWS_MAX_NODES} nodes (got {n}); "
            "use hitting times to one node or Monte Carlo",
        )
    if kind == "uniform":
        h = np.full((n, n), float(n))
        np.fill_diagonal(h, 0.0)
        return h
    p = transition_matrix(g, kind).toarray()
    pi = stationary_distribution(g, kind)
    m = np.eye(n) - p + pi[None, :]
    z = np.linalg.inv(m)
    h = (np.diag(z)[None, :] - z) / pi[None, :]
    np.fill_diagonal(h, 0.0)
    return h


def matthews_bounds(graph: Graph, scheduler: str = "metropolis-hastings") -> tuple[float, float]:
    """Matthews' (1988) bounds ``(lower, upper)`` on the expected cover moves of the ``scheduler``
    walk, valid for every start (so for every start distribution, the scenario's included).

    * upper: ``H_{K−1} · max_{i≠j} H(i, j)`` (holds for every start);
    * lower: ``max_A H_{|A|−1} · min_{i≠j ∈ A} H(i, j)``. Matthews' argument gives it for every
      start in A; from a start x outside A the walk first hits A at some ``a`` (having visited no
      other node of A) and must then cover A from a, so it holds for every start too. The maximum
      over A is approximated greedily: start from ``A = V`` and repeatedly drop one endpoint of the
      closest pair (by ``min(H(i,j), H(j,i))``) -- the one with the smaller mean distance to the
      rest of A -- keeping the best value seen. Any A gives a valid bound.

    Dense all-pairs hitting times: limited to :data:`MATTHEWS_MAX_NODES` nodes.
    """
    h = all_pairs_hitting_times(graph, scheduler)
    n = h.shape[0]
    if n == 1:
        return 0.0, 0.0
    upper = harmonic(n - 1) * float(h.max())
    d = np.minimum(h, h.T)
    np.fill_diagonal(d, np.inf)
    alive = np.ones(n, dtype=bool)
    nearest = d.min(axis=1)
    near_arg = d.argmin(axis=1)
    lower = 0.0
    for size in range(n, 1, -1):
        masked = np.where(alive, nearest, np.inf)
        a = int(masked.argmin())
        lower = max(lower, float(masked[a]) * harmonic(size - 1))
        if size == 2:
            break
        b = int(near_arg[a])
        rest = np.flatnonzero(alive)
        rest = rest[(rest != a) & (rest != b)]
        drop = a if d[a, rest].sum() <= d[b, rest].sum() else b
        alive[drop] = False
        d[drop, :] = np.inf
        d[:, drop] = np.inf
        stale = np.flatnonzero(alive & (near_arg == drop))
        if stale.size:
            nearest[stale] = d[stale].min(axis=1)
            near_arg[stale] = d[stale].argmin(axis=1)
    return lower, upper


# --------------------------------------------------------------------------- exact cover time


@dataclass(frozen=True)
class ExactCover:
    """An exact expected cover time and how it was obtained."""

    moves: float
    method: str  # "closed-form", "subset-chain" or "trivial"
    detail: str  # human-readable, e.g. "closed form: cycle K(K-1)/2"


def star_cover_moves(
    leaves: int, scheduler: str = "metropolis-hastings", start: Start = "uniform"
) -> float:
    """Exact expected cover moves of the star with ``n = leaves`` leaves (K = n + 1 nodes, n ≥ 2).

    From the centre the token always moves to a uniform leaf (under both walks: Metropolis-Hastings
    accepts ``min(1, n/1) = 1``); from a leaf it returns to the centre after ``T`` moves on average:
    ``T = 1`` (simple random walk) or ``T = n`` (Metropolis-Hastings: the leaf passes with
    probability ``min(1, 1/n)`` per slot and keeps the token otherwise). Leaf visits are
    coupon-collector draws, so with ``N`` the number of leaf visits until all n leaves are seen:

    * from the centre: ``E[N] = n·H_n``, moves ``= N + (N − 1)·T``  →  ``n·H_n·(1 + T) − T``;
    * from a leaf: ``T`` to reach the centre, then ``E[N'] = n·H_{n−1}`` visits for the other leaves,
      moves ``= T + N' + (N' − 1)·T``  →  ``n·H_{n−1}·(1 + T)``.

    ``start`` is ``"uniform"`` (centre with probability 1/K), ``"stationary"`` (MH: uniform; SRW:
    centre with probability 1/2), ``"centre"`` or ``"leaf"``. The ``uniform`` scheduler ignores the
    star: coupon collector ``K·H_K − 1`` for every start (module docstring).
    """
    kind = check_scheduler(scheduler, "scheduler")
    n = int(leaves)
    if n < 2:
        raise ConfigError("nodes", f"the star formula needs at least 2 leaves, got {n}")
    if start not in ("uniform", "stationary", "centre", "leaf"):
        raise ConfigError(
            "start", f"expected 'uniform', 'stationary', 'centre' or 'leaf', got {start!r}"
        )
    if kind == "uniform":
        return (n + 1) * harmonic(n + 1) - 1.0
    t = 1.0 if kind == "simple-random-walk" else float(n)
    centre = n * harmonic(n) * (1.0 + t) - t
    leaf = n * harmonic(n - 1) * (1.0 + t)
    if start == "centre":
        return centre
    if start == "leaf":
        return leaf
    if start == "uniform" or kind == "metropolis-hastings":  # MH: π is uniform
        return (centre + n * leaf) / (n + 1)
    return 0.5 * centre + 0.5 * leaf  # SRW stationary: π(centre) = n / 2n


def _closed_form(g: IndexedGraph, kind: str, start: Start) -> ExactCover | None:
    """The exact expected cover moves of the ``kind`` walk from ``start`` where a closed form applies,
    else ``None`` (the caller then uses the subset chain).

    Applies to the uniform scheduler on any graph and any start (coupon collector); for the two
    walks, to the complete graph and the cycle (regular and vertex-transitive: any start, MH = SRW)
    and to the star (the value depends on the walk and on whether the start is the centre, a leaf,
    uniform or stationary). Assumes ``g`` has at least two nodes and is connected (checked by the
    caller) and ``start`` is valid.
    """
    n = g.size
    if kind == "uniform":
        return ExactCover(
            n * harmonic(n) - 1.0,
            "closed-form",
            "closed form: coupon collector K·H(K) − 1 (uniform scheduler, any start)",
        )
    if n < 3:
        return None
    deg = g.degree
    edges = int(deg.sum()) // 2
    if edges == n * (n - 1) // 2:
        return ExactCover(
            (n - 1) * harmonic(n - 1),
            "closed-form",
            "closed form: complete graph (K−1)·H(K−1) (any start; MH = SRW on a regular graph)",
        )
    if edges == n and bool(np.all(deg == 2)):
        return ExactCover(
            n * (n - 1) / 2.0,
            "closed-form",
            "closed form: cycle K(K−1)/2 (any start; MH = SRW on a regular graph)",
        )
    if edges == n - 1 and int(deg.max()) == n - 1:
        centre = int(deg.argmax())
        where = start if isinstance(start, str) else "centre" if start == centre else "leaf"
        return ExactCover(
            star_cover_moves(n - 1, kind, where),
            "closed-form",
            f"closed form: star with K−1 leaves ({kind}, start {where})",
        )
    return None


def _popcounts(bits: int) -> np.ndarray:
    """Popcount of every integer 0..2^bits − 1 (uint8)."""
    pc = np.zeros(1 << bits, dtype=np.uint8)
    for b in range(bits):
        pc[1 << b : 2 << b] = pc[: 1 << b] + 1
    return pc


def _subset_chain(p: np.ndarray, weights: np.ndarray) -> float:
    """``Σ_v weights(v)·E[{v}, v]`` by the subset chain (module docstring), dense P.

    Levels ``|S| = c`` are processed from ``K − 1`` down to 1. For each subset (bitmask ``m``) the
    unknowns are ``x_i = E[S, members_i]`` and the system is ``(I − P[S, S]) x = 1 + P[S, V∖S]·e``
    with ``e_u = E[S ∪ {u}, u]`` read from the previous level: its row is ``rank[m | 2^u]`` and its
    column ``popcount(m & (2^u − 1))`` (the position of u in the sorted members of ``S ∪ {u}``; the
    same formula gives the position of a member u within S). Only the nonzero entries of P are
    gathered (padded neighbour lists), so sparse graphs cost ``O(c·degree)`` per subset plus the
    batched dense solve.
    """
    n = p.shape[0]
    if n == 1:
        return 0.0
    pc = _popcounts(n)
    order = np.argsort(pc, kind="stable")  # masks by popcount, ascending within a level
    counts = np.bincount(pc, minlength=n + 1)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    rank = np.empty(1 << n, dtype=np.int32)  # row of a mask within its level
    rank[order] = (np.arange(1 << n) - offsets[pc[order]]).astype(np.int32)
    bit = np.int64(1) << np.arange(n, dtype=np.int64)

    off = p.copy()
    np.fill_diagonal(off, 0.0)
    stay = np.diag(p).copy()
    nz_r, nz_c = np.nonzero(off > 0)
    nnz = np.bincount(nz_r, minlength=n)
    width = max(1, int(nnz.max()))
    nbr = np.repeat(np.arange(n)[:, None], width, axis=1)  # padding: the node itself, weight 0
    wt = np.zeros((n, width))
    slot = np.arange(nz_r.size) - np.concatenate(([0], np.cumsum(nnz)))[nz_r]
    nbr[nz_r, slot] = nz_c
    wt[nz_r, slot] = off[nz_r, nz_c]
    wt_flat = wt.ravel()
    nbit_flat = bit[nbr].ravel()
    lanes = np.arange(width)

    dense = width > _DENSE_WIDTH * n  # gather whole rows of P rather than neighbour lists
    e_next = np.zeros((1, n))  # level K: the full set, every value 0
    for c in range(n - 1, 0, -1):
        masks = order[offsets[c] : offsets[c + 1]].astype(np.int64)
        e_cur = np.empty((masks.size, c))
        chunk = max(1, _SUBSET_CHUNK_BYTES // (8 * c * (n if dense else max(c, width))))
        diag = np.arange(c)
        for lo in range(0, masks.size, chunk):
            m = masks[lo : lo + chunk]
            s = m.size
            inside = (m[:, None] & bit[None, :]) != 0
            members = np.nonzero(inside)[1].reshape(s, c)
            if dense:
                rows = p[members]  # (s, c, n)
                cols_in = np.broadcast_to(inside[:, None, :], rows.shape)
                a = -rows[cols_in].reshape(s, c, c)
                a.reshape(s, c * c)[:, :: c + 1] += 1.0
                p_out = rows[~cols_in].reshape(s, c, n - c)
                ob = bit[np.nonzero(~inside)[1].reshape(s, n - c)]
                row_of = np.take(rank, m[:, None] | ob).astype(np.int64)
                known = np.take(e_next, row_of * (c + 1) + np.take(pc, m[:, None] & (ob - 1)))
                rhs = 1.0 + np.einsum("sij,sj->si", p_out, known)
            else:
                entry = members[:, :, None] * width + lanes  # (s, c, width): padded lists
                w = np.take(wt_flat, entry)
                sb = np.take(nbit_flat, entry)
                mm = m[:, None, None]
                is_in = (mm & sb) != 0
                col = np.take(pc, mm & (sb - 1))
                a = np.zeros((s, c, c))
                a.reshape(s, c * c)[:, :: c + 1] = 1.0 - np.take(stay, members)
                sel = is_in & (w > 0)
                flat = (np.arange(s)[:, None, None] * c + diag[None, :, None]) * c + col
                a.reshape(-1)[flat[sel]] = -w[sel]
                out = ~is_in
                known = np.zeros(w.shape)
                row_of = np.take(rank, (mm | sb)[out]).astype(np.int64)
                known[out] = np.take(e_next, row_of * (c + 1) + col[out])
                rhs = 1.0 + (w * known).sum(axis=2)
            e_cur[lo : lo + chunk] = np.linalg.solve(a, rhs[:, :, None])[:, :, 0]
        e_next = e_cur
    return float(weights @ e_next[:, 0])  # level 1 masks are 1, 2, 4, ...: node order


def exact_cover_moves_with_method(
    graph: Graph,
    scheduler: str = "metropolis-hastings",
    start: Start = "uniform",
    method: str = "auto",
) -> ExactCover:
    """Exact expected cover moves of the ``scheduler`` walk from ``start``, with the method used.

    ``start`` is ``"uniform"`` (first holder uniform over the nodes), ``"stationary"`` (drawn from
    the walk's stationary distribution) or a node index (``0..K−1``), as ``scheduler.start`` of a
    scenario. ``method``: ``"auto"`` (a closed form when the graph is complete, a cycle or a star,
    or the scheduler is ``uniform``; else the subset chain), ``"closed-form"`` or
    ``"subset-chain"``. The subset chain is limited to :data:`EXACT_COVER_MAX_NODES` nodes.
    """
    if method not in ("auto", "closed-form", "subset-chain"):
        raise ConfigError(
            "method", f"expected 'auto', 'closed-form' or 'subset-chain', got {method!r}"
        )
    g, kind = _prepare(graph, scheduler)
    n = g.size
    weights = _start_weights(g, kind, start)  # validates start
    if n == 1:
        return ExactCover(0.0, "trivial", "one node: covered at slot 1")
    if method != "subset-chain":
        found = _closed_form(g, kind, start)
        if found is not None:
            return found
        if method == "closed-form":
            raise ConfigError(
                "method",
                "no closed form for this graph (known: complete graph, cycle, star, uniform scheduler)",
            )
    if n > EXACT_COVER_MAX_NODES:
        raise ConfigError(
            "nodes",
            f"exact cover time by the subset chain is limited to {EXACT_COVER_MAX_NODES} nodes "
            f"(got {n}); use --bounds (Matthews) or Monte Carlo",
        )
    p = transition_matrix(g, kind).toarray()
    return ExactCover(
        _subset_chain(p, weights),
        "subset-chain",
        f"subset chain over K·2^(K−1) = {n << (n - 1)} states",
    )


def exact_cover_moves(
    graph: Graph,
    scheduler: str = "metropolis-hastings",
    start: Start = "uniform",
    method: str = "auto",
) -> float:
    """Exact expected cover moves (see :func:`exact_cover_moves_with_method`)."""
    return exact_cover_moves_with_method(graph, scheduler, start, method).moves


# --------------------------------------------------------------------------- theory vs K


@dataclass(frozen=True)
class TheoreticalCover:
    """A theoretical expected cover time (moves) of a topology kind and what it assumes."""

    moves: float
    method: str  # "closed-form" (exact for the stated walk and start) or "asymptotic"
    assumes: str  # human-readable: the walk, the start and the regime the value is for


_THEORY_STARTS = ("uniform", "stationary")


def theoretical_cover(
    kind: str,
    nodes: int,
    *,
    scheduler: str = "metropolis-hastings",
    start: Start = "uniform",
    **params: Any,
) -> TheoreticalCover | None:
    """Closed form or asymptotic expected cover moves of topology ``kind`` with ``nodes`` nodes.

    ``scheduler`` is the walk and ``start`` its first holder: ``"uniform"``, ``"stationary"`` or a
    node index of the graph that ``[topology] kind`` builds (for ``star``: index 0 is the centre;
    ``"centre"`` and ``"leaf"`` are accepted too). Known values:

    * ``uniform`` scheduler, any kind and any start: coupon collector ``K·H(K) − 1`` (exact);
    * ``complete``: ``(K−1)·H(K−1)``; ``ring``/``cycle``: ``K(K−1)/2`` -- exact for both walks
      (regular graphs: Metropolis-Hastings = simple random walk) and every start;
    * ``star``: :func:`star_cover_moves` for the walk and the start (exact);
    * ``random_regular`` with ``degree=d ≥ 3``: Cooper & Frieze (2005), "The cover time of random
      regular graphs": ``(d−1)/(d−2)·K·ln K``, asymptotic (K → ∞, for almost every random d-regular
      graph) for the simple random walk, which Metropolis-Hastings equals on a regular graph; the
      start does not change the leading order.

    ``None`` when no value is known (or for ``random_regular`` with ``d < 3``). Other keyword
    parameters of the topology (e.g. ``p``) are ignored.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int | np.integer) or nodes < 1:
        raise ConfigError("nodes", f"expected an integer >= 1, got {nodes!r}")
    k = int(nodes)
    kind_name = check_scheduler(scheduler, "scheduler")
    name = kind.replace("-", "_").lower()
    star = name == "star"
    if isinstance(start, str):
        if start not in _THEORY_STARTS + (("centre", "leaf") if star else ()):
            allowed = "'uniform', 'stationary', " + ("'centre', 'leaf' " if star else "")
            raise ConfigError("start", f"expected {allowed}or a node index, got {start!r}")
        where = start
    else:
        index = _check_node(start, k, "start")
        where = f"node {index}"
    if kind_name == "uniform":
        return TheoreticalCover(
            k * harmonic(k) - 1.0,
            "closed-form",
            f"exact: uniform scheduler (coupon collector), any graph, start {where}",
        )
    if name == "complete":
        return TheoreticalCover(
            (k - 1) * harmonic(k - 1),
            "closed-form",
            f"exact: complete graph, {kind_name} (= the other walk on a regular graph), any start",
        )
    if name in ("ring", "cycle"):
        return TheoreticalCover(
            k * (k - 1) / 2.0,
            "closed-form",
            f"exact: cycle, {kind_name} (= the other walk on a regular graph), any start",
        )
    if star:
        if k == 2:  # a single edge: one move from either end, under both walks
            return TheoreticalCover(1.0, "closed-form", f"exact: star of 2 nodes, start {where}")
        if k < 3:
            return None
        if not isinstance(start, str):
            where = "centre" if int(start) == 0 else "leaf"
        return TheoreticalCover(
            star_cover_moves(k - 1, kind_name, where),
            "closed-form",
            f"exact: star, {kind_name}, start {where}",
        )
    if name in ("random_regular", "regular"):
        d = params.get("degree", params.get("d"))
        if d is None:
            raise ConfigError("degree", "random_regular needs degree=d (an integer >= 3)")
        d = int(d)
        if d < 3:
            return None
        return TheoreticalCover(
            (d - 1) / (d - 2) * k * math.log(k),
            "asymptotic",
            "asymptotic (K → ∞, Cooper & Frieze 2005) for the simple random walk on a typical "
            f"random {d}-regular graph (= Metropolis-Hastings on a regular graph), any start",
        )
    return None


def theoretical_cover_moves(
    kind: str,
    nodes: int,
    *,
    scheduler: str = "metropolis-hastings",
    start: Start = "uniform",
    **params: Any,
) -> float | None:
    """The value of :func:`theoretical_cover` (closed form or asymptotic expected cover moves for
    the "cover time vs K" figure) for the walk ``scheduler`` from ``start``; ``None`` when unknown.

    ``kind``: ``complete`` ((K−1)·H(K−1)), ``ring``/``cycle`` (K(K−1)/2), ``star``
    (:func:`star_cover_moves` for the walk and start), ``random_regular`` with ``degree=d ≥ 3``
    (Cooper & Frieze 2005: ``(d−1)/(d−2)·K·ln K``, asymptotic, simple random walk = MH on a regular
    graph); the ``uniform`` scheduler gives the coupon collector ``K·H(K) − 1`` for any kind.
    """
    found = theoretical_cover(kind, nodes, scheduler=scheduler, start=start, **params)
    return None if found is None else found.moves
