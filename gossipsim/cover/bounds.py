"""Matthews' bounds on the expected cover time, for graphs too large for the exact computation.

Matthews (1988), "Covering problems for Markov chains", Ann. Probab. 16(3): for every start x,
``E_x C ≤ H_{K−1} · max_{i≠j} H(i, j)`` and, for every ``A ⊆ V`` with ``x ∈ A``,
``E_x C ≥ H_{|A|−1} · min_{i≠j ∈ A} H(i, j)`` (see also Levin, Peres & Wilmer, "Markov chains and
mixing times", §11.2). Here ``H_n = 1 + 1/2 + ... + 1/n`` and ``H(i, j)`` are the all-pairs hitting
times of :mod:`gossipsim.cover.hitting`.
"""

from __future__ import annotations

import numpy as np

from gossipsim.cover.common import Graph, harmonic
from gossipsim.cover.hitting import MATTHEWS_MAX_NODES, all_pairs_hitting_times
from gossipsim.scheduling import NodeView

__all__ = ["MATTHEWS_MAX_NODES", "matthews_bounds"]


def matthews_bounds(
    graph: Graph, scheduler: str = "metropolis-hastings", *, view: NodeView | None = None
) -> tuple[float, float]:
    """Matthews' (1988) bounds ``(lower, upper)`` on the expected cover moves of the ``scheduler``
    walk, valid for every start (so for every start distribution, the scenario's included).

    * upper: ``H_{K−1} · max_{i≠j} H(i, j)`` (holds for every start);
    * lower: ``max_A H_{|A|−1} · min_{i≠j ∈ A} H(i, j)``. Matthews' argument gives it for every
      start in A; from a start x outside A the walk first hits A at some ``a`` (having visited no
      other node of A) and must then cover A from a, so it holds for every start too. The maximum
      over A is approximated greedily: start from ``A = V`` and repeatedly drop one endpoint of the
      closest pair (by ``min(H(i,j), H(j,i))``) -- the one with the smaller mean distance to the
      rest of A -- keeping the best value seen. Any A gives a valid bound.

    Dense all-pairs hitting times: limited to :data:`MATTHEWS_MAX_NODES` nodes. ``view``: the node
    state held fixed (:func:`all_pairs_hitting_times`).
    """
    h = all_pairs_hitting_times(graph, scheduler, view=view)
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
