"""Next-holder policies for the token: who computes in the next time slot.

Three schedulers are provided, each as a per-hop sampler (:class:`Walker`, used by the event engine)
and as a transition matrix (:func:`transition_matrix`, used by the exact cover and hitting-time
computations), so that simulation and theory share one definition:

``metropolis-hastings``
    eq. (5) of the core paper: the holder k proposes a neighbour j uniformly at random and passes the
    token with probability ``min(1, deg(k) / deg(j))``; otherwise it keeps the token for the next slot.
    The stationary distribution is uniform over the nodes.
``simple-random-walk``
    the token goes to a uniformly chosen neighbour (stationary distribution proportional to degree).
``uniform``
    any node, uniformly at random, regardless of the graph (a parameter-server baseline).

A move to a neighbour and a Metropolis-Hastings rejection (stay) both take one slot.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import scipy.sparse as sp

from .errors import ConfigError

SCHEDULER_KINDS: dict[str, str] = {
    "metropolis-hastings": "propose a uniform neighbour j, accept with min(1, deg(k)/deg(j)), else stay (eq. 5)",
    "simple-random-walk": "move to a uniformly chosen neighbour",
    "uniform": "any node uniformly at random, ignoring the graph (parameter-server baseline)",
}

_BLOCK = 8192  # uniforms drawn per refill; fixed so the stream does not depend on the run length


class RangeIndex(Mapping[Hashable, int]):
    """``index_of`` of a graph whose nodes are labelled 0..n-1: the label is the index (no dict of
    a million entries)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, label: Hashable) -> int:
        if isinstance(label, int | np.integer) and not isinstance(label, bool):
            index = int(label)
            if 0 <= index < self.n:
                return index
        raise KeyError(label)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


@dataclass(frozen=True, eq=False)
class IndexedGraph:
    """A connected graph with its nodes numbered 0..K-1 in ``graph.nodes`` order.

    ``labels[i]`` is the original node id of index ``i``; ``neighbours[i]`` lists the indices of its
    neighbours (sorted, no self-loops); ``indptr``/``indices`` are the same adjacency in CSR form.
    """

    labels: Sequence[Hashable]
    indptr: np.ndarray
    indices: np.ndarray
    index_of: Mapping[Hashable, int] = field(repr=False)

    @classmethod
    def from_networkx(cls, graph: nx.Graph) -> IndexedGraph:
        labels = tuple(graph.nodes)
        index_of = {label: i for i, label in enumerate(labels)}
        degree = np.zeros(len(labels), dtype=np.int64)
        flat = array("q")  # CSR built straight from the adjacency: no per-node Python objects kept
        for i, u in enumerate(labels):
            row = sorted(index_of[v] for v in graph.adj[u] if v != u)
            degree[i] = len(row)
            flat.extend(row)
        indptr = np.zeros(len(labels) + 1, dtype=np.int64)
        np.cumsum(degree, out=indptr[1:])
        indices = (
            np.frombuffer(flat, dtype=np.int64).copy() if len(flat) else np.zeros(0, dtype=np.int64)
        )
        return cls(labels, indptr, indices, index_of)

    @classmethod
    def from_edges(cls, n: int, u: np.ndarray, v: np.ndarray) -> IndexedGraph:
        """The graph on nodes 0..n-1 with edges (u[i], v[i]), built straight into CSR (no NetworkX
        graph): parallel edges are merged and self-loops dropped, as in :meth:`from_networkx`."""
        u = np.asarray(u, dtype=np.int64)
        v = np.asarray(v, dtype=np.int64)
        loops = u == v
        if loops.any():
            u, v = u[~loops], v[~loops]
        del loops
        m = u.size
        key = np.empty(2 * m, dtype=np.int64)  # row · n + column of both directions of every edge
        np.multiply(u, n, out=key[:m])
        key[:m] += v
        np.multiply(v, n, out=key[m:])
        key[m:] += u
        key.sort()
        if key.size:
            distinct = np.empty(key.size, dtype=bool)
            distinct[0] = True
            np.not_equal(key[1:], key[:-1], out=distinct[1:])
            if not distinct.all():
                key = key[distinct]
        indptr = np.searchsorted(key, np.arange(n + 1, dtype=np.int64) * n)
        np.remainder(key, n, out=key)  # now the column indices
        return cls(range(n), indptr.astype(np.int64), key, RangeIndex(n))

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Each edge once, as index arrays (u < v)."""
        rows = np.repeat(np.arange(self.size, dtype=np.int64), self.degree)
        upper = rows < self.indices
        return rows[upper], self.indices[upper]

    def to_networkx(self) -> nx.Graph:
        """The graph as NetworkX, with the original labels."""
        graph = nx.Graph()
        labels = self.labels
        graph.add_nodes_from(labels)
        u, v = self.edges()
        graph.add_edges_from(
            (labels[i], labels[j]) for i, j in zip(u.tolist(), v.tolist(), strict=True)
        )
        return graph

    @functools.cached_property
    def neighbours(self) -> tuple[tuple[int, ...], ...]:
        """``neighbours[i]``: the sorted indices of node i's neighbours (built on first use)."""
        bounds = self.indptr.tolist()
        flat = self.indices.tolist()
        return tuple(tuple(flat[bounds[i] : bounds[i + 1]]) for i in range(self.size))

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    def index(self, label: Hashable, key: str = "node") -> int:
        """Index of node ``label``; a :class:`ConfigError` naming ``key`` if there is no such node."""
        try:
            return self.index_of[label]
        except (KeyError, TypeError):
            shown = ", ".join(repr(self.labels[i]) for i in range(min(5, self.size)))
            more = ", ..." if self.size > 5 else ""
            raise ConfigError(
                key, f"node {label!r} does not exist in the graph (nodes are {shown}{more})"
            ) from None


def check_scheduler(kind: str, key: str = "scheduler.kind") -> str:
    if kind not in SCHEDULER_KINDS:
        raise ConfigError(key, f"unknown scheduler {kind!r}; allowed: {', '.join(SCHEDULER_KINDS)}")
    return kind


def transition_matrix(
    graph: IndexedGraph | nx.Graph, kind: str = "metropolis-hastings"
) -> sp.csr_array:
    """Transition matrix P[k, j] of the token walk (eq. 5 for Metropolis-Hastings), as sparse CSR.

    For ``uniform`` the matrix is dense (every entry 1/K) and is returned in CSR form only for small
    graphs; the cover/hitting code uses closed forms for that scheduler instead.
    """
    g = graph if isinstance(graph, IndexedGraph) else IndexedGraph.from_networkx(graph)
    check_scheduler(kind)
    n = g.size
    if kind == "uniform":
        return sp.csr_array(np.full((n, n), 1.0 / n))
    deg = g.degree.astype(float)
    rows = np.repeat(np.arange(n), g.degree)
    cols = g.indices
    if kind == "simple-random-walk":
        vals = 1.0 / deg[rows]
        return sp.csr_array((vals, (rows, cols)), shape=(n, n))
    # Metropolis-Hastings: propose 1/deg(k), accept min(1, deg(k)/deg(j)); the rest stays at k.
    vals = np.minimum(1.0, deg[rows] / deg[cols]) / deg[rows]
    stay = 1.0 - np.bincount(rows, weights=vals, minlength=n)
    stay[np.abs(stay) < 1e-15] = 0.0
    mask = stay > 0
    all_rows = np.concatenate([rows, np.flatnonzero(mask)])
    all_cols = np.concatenate([cols, np.flatnonzero(mask)])
    all_vals = np.concatenate([vals, stay[mask]])
    return sp.csr_array((all_vals, (all_rows, all_cols)), shape=(n, n))


def stationary_distribution(
    graph: IndexedGraph | nx.Graph, kind: str = "metropolis-hastings"
) -> np.ndarray:
    """Stationary distribution of the walk: uniform for MH and uniform, degree-proportional for SRW."""
    g = graph if isinstance(graph, IndexedGraph) else IndexedGraph.from_networkx(graph)
    check_scheduler(kind)
    if kind == "simple-random-walk":
        deg = g.degree.astype(float)
        return deg / deg.sum()
    return np.full(g.size, 1.0 / g.size)


class Walker:
    """Samples the next holder, one hop at a time, for one run.

    Two uniforms are consumed per hop whatever the scheduler, drawn from ``rng`` in fixed blocks, so
    the walk realised by a seed never depends on how long the run lasts. ``next(k)`` is a closure
    over local variables (about 40% faster per hop than a method reading attributes).
    """

    __slots__ = ("kind", "next", "_n", "_rng")

    def __init__(self, graph: IndexedGraph, kind: str, rng: np.random.Generator) -> None:
        self.kind = check_scheduler(kind)
        self._n = graph.size
        self._rng = rng
        self.next: Callable[[int], int] = _make_step(graph, kind, rng)

    def start(self, start: int | None) -> int:
        """Index of the first holder: ``start`` if given, else uniform over the nodes."""
        if start is not None:
            return start
        return int(self._rng.integers(self._n))


_INT_IS_32_BITS = array("i").itemsize == 4


def _machine_ints(values: np.ndarray) -> array[int]:
    """A flat machine-integer copy of an integer array, made through the buffer (no Python ints):
    32-bit when the values fit (half the memory, about 10% faster per hop), else 64-bit."""
    small = values.size == 0 or (int(values.min()) >= -(2**31) and int(values.max()) < 2**31)
    dtype, code = (np.int32, "i") if small and _INT_IS_32_BITS else (np.int64, "q")
    out = array(code)
    out.frombytes(np.ascontiguousarray(values, dtype=dtype).data.cast("B"))
    return out


def _make_step(graph: IndexedGraph, kind: str, rng: np.random.Generator) -> Callable[[int], int]:
    # CSR adjacency in flat machine-integer arrays: one contiguous read per lookup, which keeps the
    # per-hop cost low on graphs of millions of nodes (tuples of Python ints scatter in memory)
    indptr = _machine_ints(graph.indptr)
    indices = _machine_ints(graph.indices)
    deg = _machine_ints(graph.degree)
    n = graph.size
    buf: list[list[float]] = [[], []]  # the current blocks of u (which neighbour) and v (accept)
    pos = [_BLOCK]

    def refill() -> None:
        buf[0] = rng.random(_BLOCK).tolist()
        buf[1] = rng.random(_BLOCK).tolist()
        pos[0] = 0

    def metropolis_hastings(k: int) -> int:
        if pos[0] >= _BLOCK:
            refill()
        i = pos[0]
        pos[0] = i + 1
        d = deg[k]
        j = indices[indptr[k] + int(buf[0][i] * d)]  # u*d < d for u < 1 (see IndexedGraph)
        if buf[1][i] * deg[j] < d:  # accept with min(1, deg(k)/deg(j)), eq. (5)
            return j
        return k

    def simple_random_walk(k: int) -> int:
        if pos[0] >= _BLOCK:
            refill()
        i = pos[0]
        pos[0] = i + 1
        return indices[indptr[k] + int(buf[0][i] * deg[k])]

    def uniform(k: int) -> int:
        if pos[0] >= _BLOCK:
            refill()
        i = pos[0]
        pos[0] = i + 1
        return int(buf[0][i] * n)

    return {
        "metropolis-hastings": metropolis_hastings,
        "simple-random-walk": simple_random_walk,
        "uniform": uniform,
    }[kind]
