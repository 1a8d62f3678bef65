"""The graph the token walks on, numbered 0..K-1, as CSR arrays (:class:`IndexedGraph`)."""

from __future__ import annotations

import functools
from array import array
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import networkx as nx
import numpy as np

from gossipsim.errors import ConfigError


class CSR(NamedTuple):
    """The adjacency a batched sampler reads: row ``k``'s neighbours are
    ``indices[indptr[k]:indptr[k + 1]]`` (sorted), ``degree[k]`` their number, ``size`` the number
    of nodes K (int64 arrays)."""

    indptr: np.ndarray
    indices: np.ndarray
    degree: np.ndarray
    size: int


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

    @functools.cached_property
    def csr(self) -> CSR:
        """The adjacency as :class:`CSR` (degrees computed once), as the batched samplers read it."""
        return CSR(self.indptr, self.indices, self.degree, self.size)

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


#: levels of the vectorised breadth-first search before :func:`reaches_all` hands a graph of long
#: paths (a ring or a path of millions of nodes has as many levels as half its nodes, each a few NumPy
#: calls: 7 s for a ring of 300,000) to SciPy's connected components, linear in the graph's size
BFS_LEVELS = 256


def reaches_all(indexed: IndexedGraph) -> bool:
    """Whether a breadth-first search from node 0 reaches every node (vectorised level by level;
    after :data:`BFS_LEVELS` levels SciPy counts the components instead: ``csgraph`` is imported
    only by the graphs that need it)."""
    indptr, indices = indexed.indptr, indexed.indices
    seen = np.zeros(indexed.size, dtype=bool)
    seen[0] = True
    frontier = np.zeros(1, dtype=np.int64)
    reached = 1
    levels = 0
    while frontier.size:
        levels += 1
        if levels > BFS_LEVELS:
            return _components(indexed) == 1
        entries = int((indptr[frontier + 1] - indptr[frontier]).sum())
        parts = []
        for part in np.array_split(frontier, 1 + entries // 2**20):  # ~1M entries at a time
            begin, lengths = indptr[part], indptr[part + 1] - indptr[part]
            offsets = np.repeat(begin - (np.cumsum(lengths) - lengths), lengths)
            found = indices[np.arange(int(lengths.sum()), dtype=np.int64) + offsets]
            new = np.unique(found[~seen[found]])
            seen[new] = True
            parts.append(new)
        frontier = np.concatenate(parts)
        reached += frontier.size
    return reached == indexed.size


def _components(indexed: IndexedGraph) -> int:
    """The number of connected components (SciPy's, in C: linear in the nodes and edges)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    n = indexed.size
    matrix = sp.csr_array(
        (np.ones(indexed.indices.size, dtype=np.int8), indexed.indices, indexed.indptr),
        shape=(n, n),
    )
    count, _ = connected_components(matrix, directed=False)
    return int(count)
