"""The built-in scheduler kinds, one class each, registered by ``@register``.

``metropolis-hastings``
    eq. (5) of the core paper: the holder k proposes a neighbour j uniformly at random and passes the
    token with probability ``min(1, deg(k) / deg(j))``; otherwise it keeps the token for the next slot.
    The stationary distribution is uniform over the nodes.
``simple-random-walk``
    the token goes to a uniformly chosen neighbour (stationary distribution proportional to degree).
``uniform``
    any node, uniformly at random, regardless of the graph (a parameter-server baseline).
``round-robin``
    node k + 1 after node k, in the graph's node order, back to the first after the last, regardless
    of the graph (the parameter server's schedule of the DSVGD papers). Deterministic: it reads no
    uniform; the cover iteration is K from any start.

Hop arithmetic, the same in the one-step and the batched sampler: the proposed neighbour is entry
``int(u·deg(k))`` of row k (``u·d < d`` for ``u < 1``), Metropolis-Hastings accepts when
``v·deg(j) < deg(k)``, the uniform scheduler picks node ``int(u·K)``.

**Under failures** (a :class:`~.base.NodeView` with ``up``: ``[failures]``), the two walks on the
graph see only the live graph: nodes that are up, joined by links that are up. With d(k) the number
of k's live neighbours (``live_degree``), Metropolis-Hastings proposes the ``int(u·d(k))``-th live
neighbour j in row order and accepts with ``min(1, d(k)/d(j))``: its move probability
``min(1/d(k), 1/d(j))`` is symmetric, so for the live graph of the moment the walk is doubly
stochastic and its stationary distribution is uniform over each connected part of it (tested). The
simple random walk moves to the ``int(u·d(k))``-th live neighbour (stationary distribution
proportional to the live degree). A holder without live neighbours keeps the token. The other
kinds do not read the view and are refused with ``[failures]``.

A new kind is a class like these (here or in a module imported by ``gossipsim/scheduling/__init__.py``)
with ``@register`` above it, or a class in a module of one's own named by import path in the scenario
(``kind = "mypackage.module:MyWalk"``, with ``kind`` set to that path; ``examples/lazy_walk.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gossipsim.scheduling.base import (
    UNIFORM_BLOCK,
    NodeView,
    Scheduler,
    machine_csr,
    register,
    uniform_blocks,
)
from gossipsim.scheduling.graph import CSR, IndexedGraph
from gossipsim.scheduling.jump import JumpChain

if TYPE_CHECKING:
    import scipy.sparse as sp  # imported where a matrix is built (base.py says why)


@register
class MetropolisHastings(Scheduler):
    kind = "metropolis-hastings"
    kernel = "batched-step"
    stay_kernel = "jump-chain"
    description = (
        "propose a uniform neighbour j, accept with min(1, deg(k)/deg(j)), else stay (eq. 5)"
    )
    uniform_stationary = True

    reads_liveness = True

    def edge_weights(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        # propose 1/deg(k), accept min(1, deg(k)/deg(j)); the rest stays at k
        rows = np.repeat(np.arange(g.size), g.degree)
        if view is not None and view.has_failures:  # the live graph's degrees (module docstring)
            live, deg = _live_entries(g, view)
            with np.errstate(divide="ignore"):
                weights = np.minimum(1.0 / deg[rows], 1.0 / deg[g.indices])
            return np.where(live, weights, 0.0)
        deg = g.degree.astype(float)
        return np.minimum(1.0, deg[rows] / deg[g.indices]) / deg[rows]

    def stationary(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        return np.full(g.size, 1.0 / g.size)

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        indptr, indices, deg = machine_csr(g)
        buf, pos, refill = uniform_blocks(rng)
        if view is not None and view.has_failures:
            return _live_sampler(indptr, indices, deg, view, buf, pos, refill, accept=True)

        def metropolis_hastings(k: int) -> int:
            if pos[0] >= UNIFORM_BLOCK:
                refill()
            i = pos[0]
            pos[0] = i + 1
            d = deg[k]
            j = indices[indptr[k] + int(buf[0][i] * d)]  # u*d < d for u < 1 (see IndexedGraph)
            if buf[1][i] * deg[j] < d:  # accept with min(1, deg(k)/deg(j)), eq. (5)
                return j
            return k

        return metropolis_hastings

    def step(
        self,
        positions: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        csr: CSR,
        view: NodeView | None = None,
    ) -> np.ndarray:
        d = csr.degree[positions]
        j = csr.indices[csr.indptr[positions] + (u * d).astype(np.int64)]
        return np.where(v * csr.degree[j] < d, j, positions)  # eq. (5)


@register
class SimpleRandomWalk(Scheduler):
    kind = "simple-random-walk"
    kernel = "batched-step"
    stay_kernel = "jump-chain"
    description = "move to a uniformly chosen neighbour"
    may_stay = False

    reads_liveness = True

    def edge_weights(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        rows = np.repeat(np.arange(g.size), g.degree)
        if view is not None and view.has_failures:  # uniform over the live neighbours
            live, deg = _live_entries(g, view)
            with np.errstate(divide="ignore"):
                return np.where(live, 1.0 / deg[rows], 0.0)
        deg = g.degree.astype(float)
        return 1.0 / deg[rows]

    def stationary(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        deg = g.degree.astype(float)
        total = deg.sum()
        if total == 0:  # a single node: it holds the token for ever
            return np.full(g.size, 1.0 / g.size)
        return deg / total

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        indptr, indices, deg = machine_csr(g)
        buf, pos, refill = uniform_blocks(rng)
        if view is not None and view.has_failures:
            return _live_sampler(indptr, indices, deg, view, buf, pos, refill, accept=False)

        def simple_random_walk(k: int) -> int:
            if pos[0] >= UNIFORM_BLOCK:
                refill()
            i = pos[0]
            pos[0] = i + 1
            return indices[indptr[k] + int(buf[0][i] * deg[k])]

        return simple_random_walk

    def step(
        self,
        positions: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        csr: CSR,
        view: NodeView | None = None,
    ) -> np.ndarray:
        d = csr.degree[positions]
        return csr.indices[csr.indptr[positions] + (u * d).astype(np.int64)]


@register
class Uniform(Scheduler):
    kind = "uniform"
    kernel = "batched-step"
    stay_kernel = "jump-chain"
    description = "any node uniformly at random, ignoring the graph (parameter-server baseline)"
    reads_v = False
    ignores_graph = True
    uniform_stationary = True

    def transition_matrix(self, g: IndexedGraph, view: NodeView | None = None) -> sp.csr_array:
        """Every entry 1/K, dense data in CSR form: only for small graphs (the cover and hitting-time
        code uses closed forms for this scheduler instead)."""
        import scipy.sparse as sp

        n = g.size
        return sp.csr_array(np.full((n, n), 1.0 / n))

    def stationary(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        return np.full(g.size, 1.0 / g.size)

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        n = g.size
        buf, pos, refill = uniform_blocks(rng)

        def uniform(k: int) -> int:
            if pos[0] >= UNIFORM_BLOCK:
                refill()
            i = pos[0]
            pos[0] = i + 1
            return int(buf[0][i] * n)

        return uniform

    def step(
        self,
        positions: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        csr: CSR,
        view: NodeView | None = None,
    ) -> np.ndarray:
        return (u * csr.size).astype(np.int64)

    def jump_chain(self, g: IndexedGraph, view: NodeView | None = None) -> JumpChain:
        return JumpChain(g, None)  # every slot a uniform node


@register
class RoundRobin(Scheduler):
    kind = "round-robin"
    kernel = "batched-step"
    stay_kernel = "jump-chain"
    description = (
        "node k+1 after node k in the graph's node order, the first after the last, ignoring the "
        "graph (a parameter server's round robin)"
    )
    reads_v = False
    may_stay = False
    ignores_graph = True
    uniform_stationary = True

    def transition_matrix(self, g: IndexedGraph, view: NodeView | None = None) -> sp.csr_array:
        """The cyclic permutation k → k + 1 (mod K): one entry per row."""
        import scipy.sparse as sp

        n = g.size
        rows = np.arange(n)
        return sp.csr_array((np.ones(n), (rows, (rows + 1) % n)), shape=(n, n))

    def stationary(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        return np.full(g.size, 1.0 / g.size)

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        n = g.size

        def round_robin(k: int) -> int:
            return (k + 1) % n

        return round_robin

    def step(
        self,
        positions: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        csr: CSR,
        view: NodeView | None = None,
    ) -> np.ndarray:
        return (positions + 1) % csr.size

    def jump_chain(self, g: IndexedGraph, view: NodeView | None = None) -> JumpChain:
        return JumpChain.cyclic(g)


# --------------------------------------------------------------------------- walks under failures


def _live_entries(g: IndexedGraph, view: NodeView) -> tuple[np.ndarray, np.ndarray]:
    """Which CSR entries k → j join two live nodes over a live link, and each node's live degree
    (its live neighbours over live links, whatever its own state) as floats."""
    up = np.asarray(view.up, dtype=bool)
    edge_up = np.ones(g.indices.size, bool) if view.edge_up is None else np.asarray(view.edge_up)
    rows = np.repeat(np.arange(g.size), g.degree)
    reachable = up[g.indices] & edge_up
    deg = np.bincount(rows, weights=reachable, minlength=g.size)
    return reachable & up[rows], deg


def _live_sampler(
    indptr: Any,
    indices: Any,
    deg: Any,
    view: NodeView,
    buf: list[list[float]],
    pos: list[int],
    refill: Callable[[], None],
    *,
    accept: bool,
    weights: Any = None,
) -> Callable[[int], int]:
    """The one-step sampler over the live graph (module docstring): the ``int(u·d(k))``-th live
    neighbour, accepted with ``min(1, d(k)/d(j))`` (``accept``: Metropolis-Hastings), with
    ``min(1, w_j·d(k) / (w_k·d(j)))`` given the selection ``weights`` w (a memory view read at
    every hop: the importance-weighted walk, :mod:`.weighted`) or always (the simple random walk);
    the holder keeps the token when it has no live neighbour. Reads the view's arrays through
    memory views: they change in place as nodes and links fail."""
    assert view.up is not None and view.live_degree is not None
    up = np.asarray(view.up).view(np.uint8).data
    edge_up = np.asarray(view.edge_up).view(np.uint8).data if view.edge_up is not None else None
    live = np.asarray(view.live_degree).data

    def live_walk(k: int) -> int:
        if pos[0] >= UNIFORM_BLOCK:
            refill()
        i = pos[0]
        pos[0] = i + 1
        d = live[k]
        if d == 0:
            return k
        m = int(buf[0][i] * d)
        if d == deg[k]:  # every neighbour live: the m-th entry, as without failures
            j = indices[indptr[k] + m]
        else:
            j = k
            for e in range(indptr[k], indptr[k + 1]):
                j = indices[e]
                if up[j] and (edge_up is None or edge_up[e]):
                    if m == 0:
                        break
                    m -= 1
        if weights is not None:
            return j if buf[1][i] * weights[k] * live[j] < weights[j] * d else k
        if not accept or buf[1][i] * live[j] < d:
            return j
        return k

    return live_walk
