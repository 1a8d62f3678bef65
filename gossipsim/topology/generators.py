"""NetworkX builders of the generated kinds, with NetworkX's ``(n, ..., seed)`` signatures.

Kinds whose NetworkX generator already does what the kind promises are registered with it directly
(``complete``: :func:`networkx.complete_graph`, ``ring``: :func:`networkx.cycle_graph`, ``path``:
:func:`networkx.path_graph`, and the bundled social graphs); the builders here add what a scenario
needs on top (``nodes`` as the total node count, parameter ranges that depend on ``nodes``, a grid
numbered row by row, a faster random geometric graph). A parameter outside its range raises
:class:`~gossipsim.topology.checks.OutOfRange`, reported with the allowed values stated in the
registry (:mod:`gossipsim.topology.kinds`); seeds are ints, as
:func:`gossipsim.topology.build_topology` derives them from the scenario's seed.
"""

from __future__ import annotations

import math

import networkx as nx

from gossipsim.errors import ConfigError
from gossipsim.topology.arrays import erdos_renyi_edges, random_geometric_points
from gossipsim.topology.checks import OutOfRange

__all__ = [
    "barabasi_albert",
    "erdos_renyi",
    "grid",
    "grid_size",
    "random_geometric",
    "random_regular",
    "star",
    "watts_strogatz",
]


def star(n: int) -> nx.Graph:
    """Star with ``n`` nodes in all: centre 0 and leaves 1..n-1.

    Parameters
    ----------
    n : int
        Total number of nodes (NetworkX's :func:`~networkx.star_graph` takes the number of leaves).

    Returns
    -------
    networkx.Graph

    Examples
    --------
    >>> star(5).degree[0]
    4
    """
    return nx.star_graph(n - 1)  # networkx: centre 0 plus n - 1 leaves


def grid(n: int | None, rows: int | None = None, cols: int | None = None) -> nx.Graph:
    """2-D ``rows x cols`` lattice, node ``i * cols + j`` at row ``i`` and column ``j``.

    Parameters
    ----------
    n : int or None
        Total number of nodes; None to take ``rows * cols``.
    rows, cols : int, optional
        The shape. Given ``n``, a missing one is ``n`` divided by the other; both missing: ``rows``
        is the largest divisor of ``n`` that is at most ``sqrt(n)`` (the most square shape).

    Returns
    -------
    networkx.Graph

    Raises
    ------
    OutOfRange
        For ``rows`` or ``cols`` below 1.
    ConfigError
        For a shape that disagrees with ``n``, or without enough information to derive it.

    Examples
    --------
    >>> g = grid(12)
    >>> g.number_of_nodes(), g.number_of_edges()
    (12, 17)
    """
    r, c = rows, cols
    for name, value in (("rows", r), ("cols", c)):
        if not (value is None or value >= 1):
            raise OutOfRange(name)
    if n is None:
        if r is None or c is None:
            missing = "nodes" if r is None and c is None else "rows" if r is None else "cols"
            raise ConfigError(f"topology.{missing}", "a grid needs nodes, or both rows and cols")
    elif r is None and c is None:
        r = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
        c = n // r
    elif r is None or c is None:
        given, name = (r, "rows") if c is None else (c, "cols")
        assert given is not None
        if n % given:
            raise ConfigError(
                f"topology.{name}",
                f"nodes = {n} is not a multiple of {name} = {given}; "
                f"give a divisor of {n} or leave {name} out",
            )
        r, c = (given, n // given) if name == "rows" else (n // given, given)
    elif r * c != n:
        raise ConfigError(
            "topology.nodes",
            f"nodes = {n} disagrees with rows * cols = {r} * {c} = {r * c}; give matching "
            "values or leave nodes out",
        )
    assert r is not None and c is not None
    if r * c < 2:
        raise ConfigError("topology.rows", f"a grid needs rows * cols >= 2, got {r} * {c}")
    g = nx.Graph()
    g.add_nodes_from(range(r * c))
    g.add_edges_from((i * c + j, i * c + j + 1) for i in range(r) for j in range(c - 1))
    g.add_edges_from((i * c + j, (i + 1) * c + j) for i in range(r - 1) for j in range(c))
    return g


def grid_size(
    n: int | None, rows: int | None = None, cols: int | None = None
) -> tuple[int, float] | None:
    """Nodes and (an upper bound on the) edges of :func:`grid`, before building it: at most 2 edges
    per node; None when ``n`` is None and ``rows`` or ``cols`` is missing (the build says which)."""
    if n is None:
        if rows is None or cols is None:
            return None
        n = int(rows) * int(cols)
    return n, 2.0 * n


def erdos_renyi(n: int, p: float, seed: int) -> nx.Graph:
    """G(n, p): each of the ``n (n - 1) / 2`` pairs is an edge with probability ``p``.

    :func:`networkx.fast_gnp_random_graph`, except for ``p`` so small that ``1 - p`` rounds to 1,
    where NetworkX divides by zero and the same graph is drawn by
    :func:`~gossipsim.topology.arrays.erdos_renyi_edges`.

    Parameters
    ----------
    n : int
        Number of nodes.
    p : float
        Edge probability in [0, 1].
    seed : int
        Seed (as NetworkX's).

    Returns
    -------
    networkx.Graph
    """
    if 1.0 - p == 1.0:  # NetworkX would divide by log(1 − p) = 0 (p < 1.1e-16)
        u, w = erdos_renyi_edges(n, p, seed)
        graph = nx.empty_graph(n)
        graph.add_edges_from(zip(u.tolist(), w.tolist(), strict=True))
        return graph
    return nx.fast_gnp_random_graph(n, p, seed=seed)


def random_regular(n: int, degree: int, seed: int) -> nx.Graph:
    """Uniformly random simple graph with every node of degree ``degree``.

    Parameters
    ----------
    n : int
        Number of nodes.
    degree : int
        ``1 <= degree < n``, with ``n * degree`` even.
    seed : int
        Seed (as NetworkX's).

    Returns
    -------
    networkx.Graph

    Raises
    ------
    OutOfRange
        For a degree outside its range.
    """
    if not 1 <= degree < n:
        raise OutOfRange("degree", f"nodes = {n}")
    if n * degree % 2 != 0:
        raise OutOfRange("degree", f"nodes * degree = {n * degree} is odd")
    try:
        return nx.random_regular_graph(degree, n, seed=seed)
    except nx.NetworkXError as exc:  # pragma: no cover - networkx gives up after many tries
        raise ConfigError("topology.degree", f"could not draw the graph: {exc}") from exc


def barabasi_albert(n: int, m: int, seed: int) -> nx.Graph:
    """Preferential attachment: each new node links to ``m`` existing nodes.

    Parameters
    ----------
    n : int
        Number of nodes.
    m : int
        Edges per new node, ``1 <= m < n``.
    seed : int
        Seed (as NetworkX's).

    Returns
    -------
    networkx.Graph
    """
    if not 1 <= m < n:
        raise OutOfRange("m", f"nodes = {n}")
    return nx.barabasi_albert_graph(n, m, seed=seed)


def watts_strogatz(n: int, k: int, p: float, seed: int) -> nx.Graph:
    """Small world: a ring lattice of ``k`` nearest neighbours, each edge rewired with probability p.

    Parameters
    ----------
    n : int
        Number of nodes.
    k : int
        Even, ``2 <= k < n``.
    p : float
        Rewiring probability in [0, 1].
    seed : int
        Seed (as NetworkX's).

    Returns
    -------
    networkx.Graph
    """
    if not (2 <= k < n and k % 2 == 0):
        raise OutOfRange("k", f"nodes = {n}")
    return nx.watts_strogatz_graph(n, k, p, seed=seed)


def random_geometric(n: int, radius: float, seed: int) -> nx.Graph:
    """Uniform points in the unit square, linked when at most ``radius`` apart.

    The points are the node attribute ``pos``. NetworkX's own generator sorts all pairs in Python;
    a KD-tree with ndarray output (:func:`~gossipsim.topology.arrays.random_geometric_points`) is
    about 3x faster.

    Parameters
    ----------
    n : int
        Number of nodes.
    radius : float
        Connection distance (> 0).
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    networkx.Graph
    """
    pos, pairs = random_geometric_points(n, radius, seed)
    g = nx.Graph()
    g.add_nodes_from((i, {"pos": (x, y)}) for i, (x, y) in enumerate(pos.tolist()))
    g.add_edges_from(pairs.tolist())
    return g
