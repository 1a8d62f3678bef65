"""Exact hitting times of the token walk and exact expectations of the removal latency.

Hitting time
    ``H(v, k) = E_v[min{t ≥ 0 : X_t = k}]`` (so ``H(k, k) = 0``), the solution of
    ``(I − P)|_{V∖k} h = 1`` (Aldous & Fill, "Reversible Markov chains and random walks on graphs",
    ch. 2 §2), with ``P`` the scheduler's transition matrix.
Removal latency of a request for node k arriving before slot ``r`` (what a run measures)
    0 when k had not held the token in slots ``1 .. r − 1`` (it contributed nothing), else 1 if k
    holds slot ``r`` and ``1 +`` the moves until it does otherwise. Its exact expectation
    (:func:`expected_removal_latency`) uses the law of the walk at slot ``r`` jointly with whether
    k was visited: with ``μ`` the law of the first holder, ``P(X_r = v) = (μ P^{r−1})(v)`` and
    ``P(X_r = v, k unvisited in 1..r−1)`` from the walk killed at k; then
    ``E[L] = Σ_v P(X_r = v, k visited before r) · (1 + H(v, k))`` (the Markov property: what
    follows slot r depends on the past only through ``X_r``).
Next-visit latency from a given holder (:func:`next_visit_latency`)
    the holder of slot ``r`` drawn from a distribution w (default π) and k's contribution present:
    ``1 + Σ_v w(v)·H(v, k)``; on the complete graph ``1/K + K − 1``. It is the limit of the
    removal latency's expectation for a request arriving long after the start (the walk mixed and
    k visited), not its value at a given slot.

The ``uniform`` scheduler has the closed form ``H(v, k) = K`` (v ≠ k).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gossipsim.cover.common import Graph, Start, prepare, resolve_node, start_weights
from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph, NodeView, Scheduler

MATTHEWS_MAX_NODES = 5000
"""Largest graph for the dense all-pairs hitting times behind
:func:`~gossipsim.cover.bounds.matthews_bounds` (dense ``K×K`` inverse plus the greedy subset search:
about 8 s and 1.2 GB at 5,000 nodes)."""


def hitting_times_to(
    graph: Graph,
    node: Hashable,
    scheduler: str = "metropolis-hastings",
    *,
    view: NodeView | None = None,
) -> np.ndarray:
    """Exact expected moves ``H(v, k)`` to reach node ``k`` (labelled ``node``, as in scenario files:
    ``"Medici"``, or ``3`` on a graph whose nodes are 0..K−1) from every node v (0 at k), indexed
    in ``graph.nodes`` order.

    Sparse solve of ``(I − P)|_{V∖{k}} h = 1`` (first-step analysis; Aldous & Fill ch. 2). For the
    ``uniform`` scheduler every slot's holder is k with probability 1/K, so ``H(v, k) = K`` for v ≠ k.

    ``view``: the node state the scheduler reads, held fixed: required by a walk whose transitions
    depend on the protocol's state (``ksd-walk``, ``hip-walk``: ``view=NodeView(weights=w)``, the
    walk for those weights; :func:`~gossipsim.cover.common.prepare`).
    """
    g, sched = prepare(graph, scheduler, view)
    n = g.size
    k = resolve_node(g, node, "node")
    h = np.zeros(n)
    if n == 1:
        return h
    others = np.flatnonzero(np.arange(n) != k)
    if sched.kind == "uniform":
        h[others] = float(n)
        return h
    p = sched.transition_matrix(g, view).tocsc()
    sub = p[others][:, others]
    a = (sp.identity(n - 1, format="csc") - sub).tocsc()
    import scipy.sparse.linalg as spla  # here: importing it costs every command 0.1 s

    h[others] = spla.spsolve(a, np.ones(n - 1))
    return h


def next_visit_latency(
    graph: Graph,
    node: Hashable,
    scheduler: str = "metropolis-hastings",
    holder: Start = "stationary",
    *,
    view: NodeView | None = None,
) -> float:
    """``1 + Σ_v w(v)·H(v, k)``: the expected slots until node ``k`` (labelled ``node``:
    ``next_visit_latency(G, "Medici")``) holds the token, the first slot included, when the holder
    of that slot is drawn from w (``holder``: ``"stationary"``, the default, π; ``"uniform"``; or
    a node label).

    This is the removal latency of a request arriving at a holder drawn from w with k's
    contribution in the state, e.g. long after the start. For a request at a given slot of a run,
    whose holder has the walk's law at that slot and which costs nothing when k had not yet held
    the token, use :func:`expected_removal_latency`. ``view``: as for :func:`hitting_times_to`.
    """
    g, sched = prepare(graph, scheduler, view)
    w = start_weights(g, sched, holder, view)
    return 1.0 + float(w @ hitting_times_to(g, node, sched.kind, view=view))


def expected_unlearning_latency(
    graph: Graph,
    node: Hashable,
    scheduler: str = "metropolis-hastings",
    start: Start = "stationary",
) -> float:
    """Deprecated name of :func:`next_visit_latency` (``start`` is its ``holder``): the value from a
    holder drawn from a distribution, not the expectation of a request at a given slot
    (:func:`expected_removal_latency`)."""
    warnings.warn(
        "expected_unlearning_latency is now next_visit_latency (the latency from a holder drawn "
        "from a distribution); for a request at a slot use expected_removal_latency",
        DeprecationWarning,
        stacklevel=2,
    )
    return next_visit_latency(graph, node, scheduler, holder=start)


#: the most work (transitions × stored entries of P, at least 64 per transition) the exact law at a
#: slot may take: about 2-5 s; the laws usually settle long before (see :func:`removal_latency_law`)
MAX_LAW_WORK = 300_000_000
#: the laws are taken as settled when one transition changes them by less than this (L1)
SETTLED = 1e-15


@dataclass(frozen=True)
class RemovalLatencyLaw:
    """What :func:`removal_latency_law` computes for a request for node ``node`` (an index)
    arriving before slot ``at_slot``."""

    node: int
    at_slot: int
    #: E[removal latency] (slots), counting 0 for a node that had not held the token
    mean: float
    #: P(the node had not held the token in slots 1 .. at_slot − 1): the latency is then 0
    nothing_to_remove: float
    #: transitions computed (fewer than at_slot − 1 once the laws had settled)
    transitions: int
    #: with a ``horizon`` τ: E[min(L, τ)] (what a Kaplan–Meier restricted mean to τ estimates)
    restricted_mean: float | None = None
    #: with a ``horizon`` τ: P(L ≤ τ − 1), the chance the request is served within τ − 1 slots
    served_within: float | None = None
    horizon: int | None = None


def removal_latency_law(
    graph: Graph,
    node: Hashable,
    at_slot: int,
    scheduler: str = "metropolis-hastings",
    start: Start = "uniform",
    *,
    hitting: np.ndarray | None = None,
    horizon: int | None = None,
    view: NodeView | None = None,
) -> RemovalLatencyLaw:
    """The exact expectation of the removal latency that a run measures for a request for ``node``
    arriving before slot ``at_slot`` (``r``), in a run whose first holder is drawn from ``start``
    (``"uniform"``, the scenario default; ``"stationary"``; or a node label).

    With ``u_i(v) = P(X_i = v, k ∉ {X_1 .. X_i})`` (the walk killed at k: ``u_1 = μ`` off k,
    ``u_{i+1} = (u_i P)`` off k) and ``p_i = μ P^{i−1}``, the holder of slot r and whether k held the
    token before it have ``P(X_r = v, k unvisited) = (u_{r−1} P)(v)`` and ``P(X_r = v, k visited) =
    p_r(v) − (u_{r−1} P)(v)``, so ``E[L] = Σ_v P(X_r = v, k visited)·(1 + H(v, k))`` (module
    docstring). The laws are iterated one transition at a time, stopping early once ``p`` no longer
    changes (to :data:`SETTLED`) and ``u`` has no mass left. A slot too late for that within
    :data:`MAX_LAW_WORK` is a :class:`ConfigError` naming ``at_slot``. ``hitting``: the node's
    :func:`hitting_times_to`, when the caller has them already.

    With a ``horizon`` τ ≥ 1 (a run of n slots observes latencies up to n − r + 1: τ = n − r + 2)
    also ``restricted_mean`` = E[min(L, τ)] = Σ_{ℓ<τ} P(L > ℓ) and ``served_within`` =
    P(L ≤ τ − 1), from the walk killed at k after slot r (``P(L > ℓ)`` for ℓ ≥ 1 is the mass that
    held the node before r and avoided it in slots r .. r + ℓ − 1); None when that takes more than
    :data:`MAX_LAW_WORK`. ``view``: as for :func:`hitting_times_to`.
    """
    if isinstance(at_slot, bool) or not isinstance(at_slot, int | np.integer) or at_slot < 1:
        raise ConfigError("at_slot", f"must be an integer slot >= 1, got {at_slot!r}")
    r = int(at_slot)
    g, sched = prepare(graph, scheduler, view)
    k = resolve_node(g, node, "node")
    if r == 1 or g.size == 1:  # nothing held the token before the first slot
        nothing = RemovalLatencyLaw(k, r, 0.0, 1.0, 0)
        if horizon is None:
            return nothing
        return dataclasses.replace(nothing, restricted_mean=0.0, served_within=1.0, horizon=horizon)
    mu = start_weights(g, sched, start, view)
    step, cost = _transition(g, sched, view)
    law = mu.copy()  # p_i, i = 1
    unvisited = mu.copy()
    unvisited[k] = 0.0  # u_1
    transitions = 0
    law_settled = False
    for _ in range(r - 2):  # up to i = r − 1
        if transitions * cost > MAX_LAW_WORK:
            raise ConfigError(
                "at_slot",
                f"the exact law at slot {r:,} of this walk on {g.size:,} nodes takes more than "
                f"{MAX_LAW_WORK:,} operations (it had not settled after {transitions:,} slots)",
            )
        if not law_settled:
            following = step(law)
            law_settled = float(np.abs(following - law).sum()) <= SETTLED
            law = following
        unvisited = step(unvisited)
        unvisited[k] = 0.0
        transitions += 1
        if law_settled and float(unvisited.sum()) <= SETTLED * 1e-3:
            break
    law_r = law if law_settled else step(law)
    fresh = step(unvisited)  # P(X_r = v, k unvisited in 1..r−1)
    visited = np.clip(law_r - fresh, 0.0, None)
    if hitting is None:
        hitting = hitting_times_to(g, g.labels[k], sched.kind, view=view)
    mean = float(visited @ (1.0 + hitting))
    law_ = RemovalLatencyLaw(k, r, mean, float(min(fresh.sum(), 1.0)), transitions + 1)
    if horizon is None:
        return law_
    restricted, beyond = _restricted(step, cost, visited, k, int(horizon))
    if restricted is None:
        return law_
    return dataclasses.replace(
        law_, restricted_mean=restricted, served_within=1.0 - beyond, horizon=int(horizon)
    )


def _restricted(
    step: Callable[[np.ndarray], np.ndarray], cost: int, visited: np.ndarray, k: int, tau: int
) -> tuple[float | None, float]:
    """(E[min(L, τ)], P(L > τ − 1)) from ``visited`` = P(X_r = v, k held a slot before r): with
    a(ℓ) the mass that also avoided k in slots r .. r + ℓ − 1, P(L > ℓ) = Σ a(ℓ) (a(0) =
    visited). (None, nan) when it would take more than :data:`MAX_LAW_WORK`."""
    if tau < 1:
        raise ConfigError("horizon", f"must be an integer >= 1, got {tau!r}")
    alive = visited.copy()
    total = 0.0
    for ell in range(tau):
        tail = float(alive.sum())  # P(L > ℓ)
        total += tail
        if ell == tau - 1:
            return total, tail
        if tail <= SETTLED * 1e-3:  # nothing left to wait for: the later terms are 0
            return total, 0.0
        if ell * cost > MAX_LAW_WORK:
            return None, float("nan")
        alive[k] = 0.0  # k holds slot r + ℓ: removed there
        alive = step(alive)
    return total, 0.0  # τ = 0 is refused above: not reached


def expected_removal_latency(
    graph: Graph,
    node: Hashable,
    at_slot: int,
    scheduler: str = "metropolis-hastings",
    start: Start = "uniform",
    *,
    view: NodeView | None = None,
) -> float:
    """E[removal latency] of a request for ``node`` arriving before slot ``at_slot`` in a run whose
    first holder is drawn from ``start`` (:func:`removal_latency_law`): what the mean of the
    ``removal_latency`` column estimates when the node's next visit removes its contribution.

    >>> import networkx as nx
    >>> round(expected_removal_latency(nx.complete_graph(10), 0, at_slot=10_000), 6)  # 1/K + K − 1
    9.1
    >>> expected_removal_latency(nx.complete_graph(10), 0, at_slot=1)  # nothing to remove yet
    0.0
    """
    return removal_latency_law(graph, node, at_slot, scheduler, start, view=view).mean


def _transition(
    g: IndexedGraph, sched: Scheduler, view: NodeView | None = None
) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """``v ↦ v P`` for a row vector v (the law one slot later), and its cost in operations."""
    n = g.size
    if sched.kind == "uniform":  # every holder is uniform whatever came before
        return (lambda v: np.full(n, v.sum() / n)), n
    pt = sched.transition_matrix(g, view).T.tocsr()
    if n <= 256:  # a dense product is faster than a sparse one at this size
        dense = pt.toarray()
        return (lambda v: dense @ v), max(n * n, 64)
    return (lambda v: pt @ v), max(int(pt.nnz), 64)


def all_pairs_hitting_times(
    graph: Graph, scheduler: str = "metropolis-hastings", *, view: NodeView | None = None
) -> np.ndarray:
    """Matrix ``H[i, j]`` of expected moves from i to j (dense; at most :data:`MATTHEWS_MAX_NODES`).

    Through the fundamental matrix ``Z = (I − P + 1πᵀ)^{-1}``: ``H(i, j) = (Z_jj − Z_ij)/π_j``
    (Aldous & Fill ch. 2; Lovász 1993). ``view``: as for :func:`hitting_times_to`.
    """
    g, sched = prepare(graph, scheduler, view)
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
    p = sched.transition_matrix(g, view).toarray()
    pi = sched.stationary(g, view)
    m = np.eye(n) - p + pi[None, :]
    z = np.linalg.inv(m)
    h = (np.diag(z)[None, :] - z) / pi[None, :]
    np.fill_diagonal(h, 0.0)
    return h
