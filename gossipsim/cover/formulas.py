"""Closed-form expected cover times that need no graph: the star (:func:`star_cover_moves`) and the
value of a topology kind for the "cover time vs K" figure (:func:`theoretical_cover`).

Closed forms are known for Metropolis-Hastings, the simple random walk and the uniform scheduler
only; for any other registered kind (the round robin's is in :mod:`~gossipsim.cover.exact`)
:func:`theoretical_cover` returns ``None`` and :func:`star_cover_moves` refuses the scheduler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gossipsim.cover.common import check_node, harmonic
from gossipsim.errors import ConfigError
from gossipsim.scheduling import check_scheduler

#: a start of the graph-free closed forms: "uniform", "stationary" (or, for the star, "centre" and
#: "leaf") or a node *index* of the graph the topology kind builds
IndexStart = str | int

#: the walks along edges with known closed forms (they coincide on regular graphs)
GRAPH_WALKS = ("metropolis-hastings", "simple-random-walk")


def _known(scheduler: str) -> str:
    kind = check_scheduler(scheduler, "scheduler")
    if kind not in (*GRAPH_WALKS, "uniform"):
        raise ConfigError("scheduler", f"no closed form is known for the {kind!r} scheduler")
    return kind


def star_cover_moves(
    leaves: int, scheduler: str = "metropolis-hastings", start: IndexStart = "uniform"
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
    star: coupon collector ``K·H_K − 1`` for every start (:mod:`gossipsim.cover.exact`).
    """
    kind = _known(scheduler)
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
    start: IndexStart = "uniform",
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
        index = check_node(start, k, "start")
        where = f"node {index}"
    if kind_name not in (*GRAPH_WALKS, "uniform"):
        return None  # no closed form known for this kind
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
    start: IndexStart = "uniform",
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
