"""Exact hitting times of the token walk and the expected unlearning latency.

Hitting time
    ``H(v, k) = E_v[min{t ≥ 0 : X_t = k}]`` (so ``H(k, k) = 0``), the solution of
    ``(I − P)|_{V∖k} h = 1`` (Aldous & Fill, "Reversible Markov chains and random walks on graphs",
    ch. 2 §2), with ``P`` the scheduler's transition matrix.
Unlearning latency of node k
    a request arrives before slot ``r``; the holder of slot ``r`` is drawn from π (default);
    the latency is 1 if that holder is ``k``, else ``1 +`` the moves until ``k`` holds the token, so
    ``E[latency] = 1 + Σ_v π(v)·H(v, k)``. On the complete graph: ``1/K + K − 1``.

The ``uniform`` scheduler has the closed form ``H(v, k) = K`` (v ≠ k).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import scipy.sparse as sp

from ..errors import ConfigError
from .common import Graph, Start, prepare, resolve_node, start_weights

MATTHEWS_MAX_NODES = 5000
"""Largest graph for the dense all-pairs hitting times behind
:func:`~gossipsim.cover.bounds.matthews_bounds` (dense ``K×K`` inverse plus the greedy subset search:
about 8 s and 1.2 GB at 5,000 nodes)."""


def hitting_times_to(
    graph: Graph, node: Hashable, scheduler: str = "metropolis-hastings"
) -> np.ndarray:
    """Exact expected moves ``H(v, k)`` to reach node ``k`` (labelled ``node``, as in scenario files:
    ``"Medici"``, or ``3`` on a graph whose nodes are 0..K−1) from every node v (0 at k), indexed
    in ``graph.nodes`` order.

    Sparse solve of ``(I − P)|_{V∖{k}} h = 1`` (first-step analysis; Aldous & Fill ch. 2). For the
    ``uniform`` scheduler every slot's holder is k with probability 1/K, so ``H(v, k) = K`` for v ≠ k.
    """
    g, sched = prepare(graph, scheduler)
    n = g.size
    k = resolve_node(g, node, "node")
    h = np.zeros(n)
    if n == 1:
        return h
    others = np.flatnonzero(np.arange(n) != k)
    if sched.kind == "uniform":
        h[others] = float(n)
        return h
    p = sched.transition_matrix(g).tocsc()
    sub = p[others][:, others]
    a = (sp.identity(n - 1, format="csc") - sub).tocsc()
    import scipy.sparse.linalg as spla  # here: importing it costs every command 0.1 s

    h[others] = spla.spsolve(a, np.ones(n - 1))
    return h


def expected_unlearning_latency(
    graph: Graph,
    node: Hashable,
    scheduler: str = "metropolis-hastings",
    start: Start = "stationary",
) -> float:
    """``1 + Σ_v w(v)·H(v, k)`` where w is the distribution of the first holder after the request
    for node ``k`` (labelled ``node``: ``expected_unlearning_latency(G, "Medici")``).

    ``start`` is ``"stationary"`` (default, π), ``"uniform"`` or a node label.
    """
    g, sched = prepare(graph, scheduler)
    w = start_weights(g, sched, start)
    return 1.0 + float(w @ hitting_times_to(g, node, sched.kind))


def all_pairs_hitting_times(graph: Graph, scheduler: str = "metropolis-hastings") -> np.ndarray:
    """Matrix ``H[i, j]`` of expected moves from i to j (dense; at most :data:`MATTHEWS_MAX_NODES`).

    Through the fundamental matrix ``Z = (I − P + 1πᵀ)^{-1}``: ``H(i, j) = (Z_jj − Z_ij)/π_j``
    (Aldous & Fill ch. 2; Lovász 1993).
    """
    g, sched = prepare(graph, scheduler)
    n = g.size
    if n > MATTHEWS_MAX_NODES:
        raise ConfigError(
            "nodes",
            f"all-pairs hitting times are dense and limited to {MATTHEWS_MAX_NODES} nodes (got {n}); "
            "use hitting times to one node or Monte Carlo",
        )
    if sched.kind == "uniform":
        h = np.full((n, n), float(n))
        np.fill_diagonal(h, 0.0)
        return h
    p = sched.transition_matrix(g).toarray()
    pi = sched.stationary(g)
    m = np.eye(n) - p + pi[None, :]
    z = np.linalg.inv(m)
    h = (np.diag(z)[None, :] - z) / pi[None, :]
    np.fill_diagonal(h, 0.0)
    return h
