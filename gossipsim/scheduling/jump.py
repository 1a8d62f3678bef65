"""The token walk as its jump chain, sampled for many runs at once (the cover-time Monte Carlo).

At node k the token leaves with probability ``p_move(k) = Σ_{j≠k} P(k, j)`` per slot, so the slots
spent at k before leaving are ``Geometric(p_move(k))`` and the next distinct holder is j with
probability ``P(k, j)/p_move(k)``. Sampling this chain instead of every slot keeps the distribution of
cover times and hitting times exact and costs one draw per visit: a Metropolis-Hastings leaf of a star
(which keeps the token with probability ``1 − 1/(K−1)``) costs one draw instead of ``K − 1`` on average.

A :class:`JumpChain` is built by a scheduler (:meth:`~gossipsim.scheduling.Scheduler.jump_chain`)
from the same move probabilities along the edges that define its transition matrix, so the Monte
Carlo, the exact computations and the walks share one definition of the rule. It draws from a NumPy
Generator of its own (not the walk streams of the engines): Monte Carlo samples are reproducible from
their seed, not equal to simulated walks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gossipsim.scheduling.graph import IndexedGraph

_INT16_MAX = 32767


def uniform_ints(rng: np.random.Generator, high: int, size: int) -> np.ndarray:
    """``size`` exact uniform draws from ``0..high−1`` as int64 (16-bit draws when they suffice,
    which NumPy generates about twice as fast)."""
    if high <= _INT16_MAX:
        return rng.integers(0, high, size=size, dtype=np.int16).astype(np.int64)
    return rng.integers(0, high, size=size)


class JumpChain:
    """Vectorised sampler of the jump chain: holding slots and the next distinct holder.

    ``weights[e]`` is the probability ``P(k, indices[e])`` of moving from row k along CSR entry e;
    ``None`` means the uniform scheduler's rule (every slot a uniform node, the holder included).

    Modes: ``uniform`` (every slot a uniform node, a "stay" counts as a move), ``cyclic`` (k + 1
    after k, mod K: the round robin; :meth:`cyclic`), ``rows`` (every row's
    jump distribution is uniform over the neighbours: simple random walk, and Metropolis-Hastings on
    regular graphs or stars) and ``cumulative`` (general: a global array of within-row cumulative
    weights, offset by the row index, searched with ``np.searchsorted``).
    """

    def __init__(self, g: IndexedGraph, weights: np.ndarray | None) -> None:
        self.graph = g
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
        if weights is None or n == 1:
            return
        rows = np.repeat(np.arange(n), deg)
        w = weights
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

    @classmethod
    def cyclic(cls, g: IndexedGraph) -> JumpChain:
        """The deterministic cycle k → k + 1 (mod K) over the node indices, whatever the edges."""
        chain = cls(g, None)
        chain.mode = "cyclic"
        return chain

    def hold(self, rng: np.random.Generator, pos: np.ndarray) -> np.ndarray | None:
        """Slots until the token leaves each holder (``None``: one slot for all)."""
        if self.all_move:
            return None
        return rng.geometric(self.pmove[pos])

    def dest(self, rng: np.random.Generator, pos: np.ndarray) -> np.ndarray:
        """Next distinct holder (for ``uniform``: next holder, possibly the same)."""
        if self.mode == "uniform":
            return uniform_ints(rng, self.n, pos.size)
        if self.mode == "cyclic":
            return (pos + 1) % self.n
        if self.mode == "rows" and self.regular:  # every degree is r: row k starts at k·r
            r = self.regular
            e = uniform_ints(rng, r, pos.size)
            e += pos * r
            return self.indices[e]
        return self.dest_at(pos, rng.random(pos.size))

    def dest_at(self, pos: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The next distinct holder of walks at ``pos`` given one uniform ``u`` in [0, 1) each
        (the same law as :meth:`dest`, by inversion: the neighbour ``int(u·deg)`` of a uniform
        row, the first cumulative weight above ``u`` of a general one)."""
        if self.mode == "uniform":
            return np.minimum((u * self.n).astype(np.int64), self.n - 1)
        if self.mode == "cyclic":
            return (pos + 1) % self.n
        if self.mode == "rows":
            d = self.deg[pos]
            off = np.minimum((u * d).astype(np.int64), d - 1)
            return self.indices[self.indptr[pos] + off]
        e = np.searchsorted(self.key, pos + u, side="right")
        np.minimum(e, self.last[pos], out=e)
        return self.indices[e]

    def dest_step(self, u: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
        """:meth:`dest_at` for a block of uniforms ``u`` (walks × moves), as ``step(pos, j)`` for
        move j: on a regular graph the neighbour's offset is computed for the block at once."""
        if self.mode == "rows" and self.regular:
            r = self.regular
            offsets = np.minimum((u * r).astype(np.int64), r - 1)
            indices = self.indices

            def regular_step(pos: np.ndarray, j: int) -> np.ndarray:
                return indices[pos * r + offsets[:, j]]

            return regular_step
        return lambda pos, j: self.dest_at(pos, u[:, j])

    def stay_lengths(self, pos: np.ndarray, u: np.ndarray, cap: int) -> np.ndarray:
        """The slots each walk at ``pos`` keeps the token (its stay, at least 1), given one uniform
        ``u`` in [0, 1) each: ``Geometric(p_move)`` by inversion,
        ``1 + floor(log(1 − u) / log(1 − p_move))`` (P(length > n) = (1 − p_move)^n), capped at
        ``cap`` (a stay past the run's last slot needs no exact length)."""
        if self.all_move:
            return np.ones(pos.shape, dtype=np.int64)
        with np.errstate(divide="ignore"):  # p_move = 1: log(0) = −inf, a stay of one slot
            tail = np.log1p(-u) / np.log1p(-self.pmove[pos])
        return 1 + np.minimum(np.floor(tail), cap).astype(np.int64)
