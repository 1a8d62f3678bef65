"""Large random graphs drawn straight into edge arrays, without a NetworkX graph.

A NetworkX graph costs about 200 B per edge and 450 B per node; these builders return the edges as
two int64 arrays ``(u, v)`` (one entry per edge), which
:meth:`IndexedGraph.from_edges <gossipsim.scheduling.IndexedGraph.from_edges>` turns into the
simulator's CSR form: 0.6 instead of 3.3-3.9 GiB for 10⁶ nodes and mean degree 20. Each gives
exactly the graph of its NetworkX builder in :mod:`gossipsim.topology.generators` for the same
seed (tested), so a scenario's graph does not depend on the way it was built. A kind registered
with ``arrays=`` (see :mod:`gossipsim.topology.kinds`) is built this way by
:func:`gossipsim.topology.build_indexed`.
"""

from __future__ import annotations

import math
import random
from array import array

import numpy as np

__all__ = ["erdos_renyi_edges", "random_geometric_edges", "random_geometric_points"]

#: edge probability below which an Erdős–Rényi graph has no edge (whatever its size)
_NO_EDGE_P = 1e-300


def erdos_renyi_edges(n: int, p: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges of ``networkx.fast_gnp_random_graph(n, p, seed)`` as arrays.

    The same algorithm (Batagelj and Brandes' geometric skips over the pairs w < v) with the same
    ``random.Random`` stream, so the same graph, without building a NetworkX graph.

    Parameters
    ----------
    n : int
        Number of nodes, labelled 0..n-1.
    p : float
        Edge probability in [0, 1].
    seed : int
        Seed of the ``random.Random`` stream (as NetworkX's ``seed`` argument).

    Returns
    -------
    u, v : numpy.ndarray of int64
        The endpoints of each edge (``u > v``), in NetworkX's order.

    Examples
    --------
    >>> u, v = erdos_renyi_edges(5, 1.0, seed=0)
    >>> len(u)
    10
    """
    if p < _NO_EDGE_P:  # (below it not one of the ≤ 2^126 pairs has a chance: no edges)
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if p >= 1:  # networkx returns the complete graph
        upper = np.triu_indices(n, 1)
        return upper[0].astype(np.int64), upper[1].astype(np.int64)
    rng = random.Random(seed)
    draw, log = rng.random, math.log
    # NetworkX's log(1 − p) is 0 when 1 − p rounds to 1 (p < 1.1e-16), where it divides by zero:
    # there (and only there) the exact log1p(−p)
    lp = log(1.0 - p) or math.log1p(-p)
    us, ws = array("q"), array("q")
    v, w = 1, -1
    while v < n:
        w = w + 1 + int(log(1.0 - draw()) / lp)
        while w >= v and v < n:
            w = w - v
            v = v + 1
        if v < n:
            us.append(v)
            ws.append(w)
    return np.frombuffer(us, dtype=np.int64), np.frombuffer(ws, dtype=np.int64)


def random_geometric_points(n: int, radius: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform points in the unit square and the pairs (i < j) within ``radius`` (a KD-tree).

    Parameters
    ----------
    n : int
        Number of points (nodes).
    radius : float
        Connection distance (> 0).
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    pos : numpy.ndarray, shape (n, 2)
        The points.
    pairs : numpy.ndarray, shape (edges, 2)
        Index pairs ``i < j`` at distance at most ``radius``.
    """
    pos = np.random.default_rng(seed).random((n, 2))
    from scipy.spatial import cKDTree  # here: only random geometric graphs need it

    return pos, cKDTree(pos).query_pairs(radius, output_type="ndarray")


def random_geometric_edges(n: int, radius: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges of :func:`gossipsim.topology.generators.random_geometric` as arrays ``(u, v)``.

    Parameters
    ----------
    n, radius, seed
        As :func:`random_geometric_points`.

    Returns
    -------
    u, v : numpy.ndarray
        The endpoints of each edge (``u < v``).
    """
    _, pairs = random_geometric_points(n, radius, seed)
    return pairs[:, 0], pairs[:, 1]
