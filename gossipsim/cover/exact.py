"""Exact expected cover times: closed forms where the graph is recognised, else the subset chain.

Exact cover time
    by the Markov chain on states ``(S, v)``, ``v ∈ S ⊆ V`` (visited set, holder):
    ``E[V, v] = 0`` and ``E[S, v] = 1 + Σ_u P(v, u)·E[S ∪ {u}, u]``, with ``P`` the scheduler's
    transition matrix. Ordered by visited set the system is block-triangular; subsets are processed
    by decreasing size and all subsets of one size ``m`` are solved together as a batch of dense
    ``m×m`` systems (``numpy.linalg.solve`` on stacked matrices). The state space has ``K·2^(K−1)``
    states, hence :data:`EXACT_COVER_MAX_NODES`. Closed forms are used, for any K, on

    * the complete graph (Metropolis-Hastings = simple random walk there): ``(K−1)·H_{K−1}``;
    * the cycle: ``K(K−1)/2`` (Lovász 1993, §2 example);
    * the star with ``n = K−1`` leaves (derived in :func:`~gossipsim.cover.formulas.star_cover_moves`);
    * the ``uniform`` scheduler (coupon collector): ``K·H_K − 1``.

    The complete graph and the cycle are vertex-transitive and regular (Metropolis-Hastings never
    rejects there, so it *is* the simple random walk): their values hold for every start. The star's
    value depends on the scheduler and on the start (centre or leaf). The uniform scheduler draws
    every slot's holder uniformly from all K nodes, the current holder included, so slot 1 (whatever
    its holder) is one coupon and the other ``K − 1`` take ``K·H_{K−1} = K·H_K − 1`` moves on
    average: the same for every start. The round robin covers in K − 1 moves from any start.
    Closed forms apply to the built-in schedulers only, given no node view; another registered kind,
    or a walk given a view (the importance-weighted walk for fixed weights), always goes through the
    subset chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gossipsim.cover.common import Graph, Start, harmonic, prepare, resolve_node, start_weights
from gossipsim.cover.formulas import GRAPH_WALKS, star_cover_moves
from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph, NodeView

EXACT_COVER_MAX_NODES = 22
"""Largest graph for the subset-chain exact cover time (``K·2^(K−1)`` states). Measured on a 2-core
machine (random 3-regular / dense graphs): K=16 in 0.15 s, K=18 in 0.6–1.1 s, K=20 in 3.2–3.6 s,
K=22 in 12–15 s, all under 0.6 GB; K=23 takes about 31 s and each extra node roughly doubles it."""

_DENSE_WIDTH = (
    0.2  # subset chain: rows with more nonzeros than this fraction of K are gathered whole
)
_SUBSET_CHUNK_BYTES = 64_000_000  # cap on one batch of stacked m×m systems in the subset chain


@dataclass(frozen=True)
class ExactCover:
    """An exact expected cover time and how it was obtained."""

    moves: float
    method: str  # "closed-form", "subset-chain" or "trivial"
    detail: str  # human-readable, e.g. "closed form: cycle K(K-1)/2"


def _closed_form(g: IndexedGraph, kind: str, start: str | int) -> ExactCover | None:
    """The exact expected cover moves of the ``kind`` walk from ``start`` where a closed form applies,
    else ``None`` (the caller then uses the subset chain).

    Applies to the uniform scheduler on any graph and any start (coupon collector); for the two
    walks, to the complete graph and the cycle (regular and vertex-transitive: any start, MH = SRW)
    and to the star (the value depends on the walk and on whether the start is the centre, a leaf,
    uniform or stationary); to no other kind. Assumes ``g`` has at least two nodes and is connected (checked by the
    caller) and ``start`` is ``"uniform"``, ``"stationary"`` or a node *index*.
    """
    n = g.size
    if kind == "uniform":
        return ExactCover(
            n * harmonic(n) - 1.0,
            "closed-form",
            "closed form: coupon collector K·H(K) − 1 (uniform scheduler, any start)",
        )
    if kind == "round-robin":  # k + 1 after k: every node within K − 1 moves of any start
        return ExactCover(
            float(n - 1), "closed-form", "closed form: K − 1 (round robin, any start)"
        )
    if n < 3 or kind not in GRAPH_WALKS:
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
    *,
    view: NodeView | None = None,
) -> ExactCover:
    """Exact expected cover moves of the ``scheduler`` walk from ``start``, with the method used.

    ``start`` is ``"uniform"`` (first holder uniform over the nodes), ``"stationary"`` (drawn from
    the walk's stationary distribution) or a node label (``"Medici"``; ``3`` on a graph whose nodes
    are 0..K−1), as ``scheduler.start`` of a scenario. ``method``: ``"auto"`` (a closed form when the graph is complete, a cycle or a star,
    or the scheduler is ``uniform``; else the subset chain), ``"closed-form"`` or
    ``"subset-chain"``. The subset chain is limited to :data:`EXACT_COVER_MAX_NODES` nodes.

    ``view``: the node state the scheduler reads, held fixed (the closed forms are for no view):
    required by a scheduler whose transitions depend on the protocol's state (``ksd-walk``,
    ``hip-walk``: ``view=NodeView(weights=w)``, the walk for those weights), which has no exact
    value otherwise (:func:`~gossipsim.cover.common.prepare`).
    """
    if method not in ("auto", "closed-form", "subset-chain"):
        raise ConfigError(
            "method", f"expected 'auto', 'closed-form' or 'subset-chain', got {method!r}"
        )
    g, sched = prepare(graph, scheduler, view)
    n = g.size
    weights = start_weights(g, sched, start, view)  # validates start
    if n == 1:
        return ExactCover(0.0, "trivial", "one node: covered at slot 1")
    if method != "subset-chain" and view is None:
        where = start if start in ("uniform", "stationary") else resolve_node(g, start, "start")
        found = _closed_form(g, sched.kind, where)
        if found is not None:
            return found
    if method == "closed-form":
        raise ConfigError(
            "method",
            "no closed form for this graph (known: complete graph, cycle, star, uniform scheduler)"
            if view is None
            else "no closed form for a walk given a view (the closed forms are for no node state)",
        )
    if n > EXACT_COVER_MAX_NODES:
        raise ConfigError(
            "nodes",
            f"exact cover time by the subset chain is limited to {EXACT_COVER_MAX_NODES} nodes "
            f"(got {n}); use --bounds (Matthews) or Monte Carlo",
        )
    p = sched.transition_matrix(g, view).toarray()
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
    *,
    view: NodeView | None = None,
) -> float:
    """Exact expected cover moves (see :func:`exact_cover_moves_with_method`)."""
    return exact_cover_moves_with_method(graph, scheduler, start, method, view=view).moves
