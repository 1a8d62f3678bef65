"""What every cover-time computation checks and shares: the graph (connected, undirected, as an
:class:`~gossipsim.scheduling.IndexedGraph`), the scheduler (its :class:`~gossipsim.scheduling.Scheduler`
object), node indices, the start distribution, run counts, seeds, and the harmonic numbers."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeAlias

import networkx as nx
import numpy as np
import scipy.sparse as sp

from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph, NodeView, Scheduler, scheduler_for
from gossipsim.scheduling.graph import reaches_all
from gossipsim.scheduling.weighted import ImportanceWeightedWalk, fixed_weights

Graph: TypeAlias = IndexedGraph | nx.Graph
Start: TypeAlias = Hashable  # "uniform", "stationary" or a node label


def harmonic(n: int) -> float:
    """The harmonic number ``H_n = Σ_{i=1..n} 1/i`` (``H_0 = 0``)."""
    if n <= 0:
        return 0.0
    return float(np.sum(1.0 / np.arange(1, n + 1, dtype=float)))


def indexed(graph: Graph) -> IndexedGraph:
    """``graph`` as an :class:`IndexedGraph` (checked: undirected, at least one node)."""
    if isinstance(graph, IndexedGraph):
        g = graph
    elif isinstance(graph, nx.Graph):
        if graph.is_directed():
            raise ConfigError(
                "graph", "the token walk needs an undirected graph (got a directed one)"
            )
        g = IndexedGraph.from_networkx(graph)
    else:
        raise ConfigError(
            "graph", f"expected a networkx.Graph or an IndexedGraph, got {type(graph).__name__}"
        )
    if g.size == 0:
        raise ConfigError("graph", "the graph has no nodes")
    return g


def require_connected(g: IndexedGraph) -> None:
    """The walk must be able to reach every node (else cover and hitting times are infinite)."""
    if g.size == 1 or reaches_all(g):  # a breadth-first search; SciPy only to count components
        return
    from scipy.sparse.csgraph import connected_components

    adj = sp.csr_array(
        (np.ones(g.indices.size, dtype=np.int8), g.indices, g.indptr), shape=(g.size, g.size)
    )
    n_comp, _ = connected_components(adj, directed=False)
    if n_comp != 1:
        raise ConfigError(
            "graph",
            f"the graph must be connected for the token to reach every node (it has {n_comp} components)",
        )


def state_dependent_note(kind: str) -> str:
    """Why no exact value (nor a Monte Carlo of the walk alone) applies to a scheduler that reads
    the protocol's state (``Scheduler.reads_state``): what the theory of a run and the CLI say."""
    return (
        f"no exact value applies: the {kind} scheduler's transitions depend on the protocol's state "
        "(the selection weights it publishes change as the run goes on); exact cover and hitting "
        "times exist only for weights held fixed (Python: view=NodeView(weights=...))"
    )


def prepare(
    graph: Graph, scheduler: str, view: NodeView | None = None
) -> tuple[IndexedGraph, Scheduler]:
    """The checked graph and the scheduler object of kind ``scheduler`` (errors name ``scheduler``
    and ``graph``); the graph must be connected unless the scheduler ignores it.

    A scheduler whose transitions depend on the protocol's state (``reads_state``) has exact values
    only for that state held fixed: ``view`` must hold it, else a :class:`ConfigError` naming
    ``scheduler``. For ``ksd-walk`` and ``hip-walk`` that is :attr:`NodeView.weights`, every weight
    > 0 (a node of weight 0 is never entered: its hitting time and the cover time are infinite).
    Any other ``view`` is passed to the scheduler's matrices as it is (e.g. nodes that are down)."""
    sched = scheduler_for(scheduler, "scheduler")
    g = indexed(graph)
    if not sched.ignores_graph:
        require_connected(g)
    if sched.reads_state and view is None:
        raise ConfigError("scheduler", state_dependent_note(sched.kind))
    if isinstance(sched, ImportanceWeightedWalk):
        if view is None or view.weights is None:
            raise ConfigError("scheduler", state_dependent_note(sched.kind))
        if not np.all(fixed_weights(sched.kind, g, view) > 0):
            raise ConfigError(
                "weights",
                "every weight must be > 0 for exact cover and hitting times (a node of weight 0 "
                "is never entered: they are infinite)",
            )
    return g, sched


def node_index(graph: Graph, label: Hashable, key: str = "node") -> int:
    """Index (``0..K−1``, ``graph.nodes`` order) of the node labelled ``label``.

    Raises :class:`ConfigError` naming ``key`` if there is no such node.
    """
    return indexed(graph).index(label, key)


def check_node(node: Any, n: int, key: str = "node") -> int:
    """A node *index* ``0..n−1`` (for the closed forms, which have no graph and so no labels)."""
    if isinstance(node, bool) or not isinstance(node, int | np.integer):
        raise ConfigError(key, f"expected a node index 0..{n - 1}, got {node!r}")
    if not 0 <= int(node) < n:
        raise ConfigError(key, f"node index must be in 0..{n - 1}, got {int(node)}")
    return int(node)


def resolve_node(g: IndexedGraph, label: Any, key: str = "node") -> int:
    """The index of the node labelled ``label`` (as in scenario files and the CLI: ``"Medici"``, or
    ``3`` on a graph whose nodes are 0..K−1); a :class:`ConfigError` naming ``key`` if there is no
    such node. ``True``/``False`` are not node labels here (they would equal 1 and 0)."""
    if isinstance(label, bool):
        raise ConfigError(key, f"expected a node label, got {label!r}")
    return g.index(label, key)


def start_weights(
    g: IndexedGraph, sched: Scheduler, start: Start, view: NodeView | None = None
) -> np.ndarray:
    """Distribution of the first holder over the node indices: ``start`` is ``"uniform"``,
    ``"stationary"`` (the walk's for ``view``) or a node label."""
    n = g.size
    if isinstance(start, str):
        if start == "uniform":
            return np.full(n, 1.0 / n)
        if start == "stationary":
            return sched.stationary(g, view)
        if start not in g.index_of:
            raise ConfigError(
                "start", f"expected 'uniform', 'stationary' or a node label, got {start!r}"
            )
    w = np.zeros(n)
    w[resolve_node(g, start, "start")] = 1.0
    return w


def as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int | np.integer) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise ConfigError("rng", f"expected a numpy Generator, an integer seed or None, got {rng!r}")


def check_runs(runs: Any) -> int:
    if isinstance(runs, bool) or not isinstance(runs, int | np.integer) or runs < 1:
        raise ConfigError("runs", f"the number of runs must be an integer >= 1, got {runs!r}")
    return int(runs)


def draw_starts(
    g: IndexedGraph, sched: Scheduler, start: Start, runs: int, rng: np.random.Generator
) -> np.ndarray:
    """The first holder of each of ``runs`` Monte Carlo runs (a stationary start of a scheduler whose
    stationary distribution is uniform is drawn as a uniform integer)."""
    n = g.size
    if start in ("uniform", "stationary"):
        w = start_weights(g, sched, start)
        if start == "uniform" or sched.uniform_stationary:
            return rng.integers(0, n, size=runs)
        return rng.choice(n, size=runs, p=w)
    return np.full(runs, resolve_node(g, start, "start"), dtype=np.int64)
