"""What every built graph must be: labels, connectivity, and parameter values in range.

:func:`check_graph` (and :func:`finish`, its in-place form for graphs built here) turns a NetworkX
graph into a simple, undirected, connected one with at least two nodes; :func:`check_connected` is
the same connectivity check on CSR arrays (:class:`~gossipsim.scheduling.IndexedGraph`), for graphs
drawn without NetworkX. :func:`parse_label` is how a node label read from text becomes an int or
stays a string, everywhere (graph files, data files, the CLI). :class:`OutOfRange` is what a builder
raises for a parameter outside its range; the build reports it with the parameter's allowed values
(:attr:`ParamSpec.check <gossipsim.topology.registry.ParamSpec.check>`), stated once in the registry.
"""

from __future__ import annotations

import re
import warnings

import networkx as nx
import numpy as np
import scipy.sparse as sp

from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph
from gossipsim.scheduling.graph import reaches_all

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "OutOfRange",
    "check_connected",
    "check_graph",
    "check_graph_object",
    "finish",
    "parse_label",
]

_INT_RE = re.compile(r"[+-]?[0-9]+")

#: integer labels are 64-bit (as TOML integers and the simulator's label arrays); longer digit
#: strings stay strings
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class OutOfRange(ValueError):
    """A builder's parameter outside its allowed values (which may depend on ``nodes``).

    Raised by the builders of :mod:`gossipsim.topology.generators`; :func:`gossipsim.topology.
    build_topology` turns it into ``topology.<name>: must be <allowed values>, got <value> (<why>)``.

    Parameters
    ----------
    name : str
        The parameter (a key of the kind's ``params``).
    why : str, optional
        What makes the value invalid, e.g. ``"nodes = 10"``.
    """

    def __init__(self, name: str, why: str = "") -> None:
        super().__init__(f"{name} is out of range" + (f" ({why})" if why else ""))
        self.name = name
        self.why = why


def parse_label(text: str) -> int | str:
    """A node label read from text: an int if it looks like a 64-bit integer, else the stripped string.

    Parameters
    ----------
    text : str
        The label as written in a file (surrounding whitespace is ignored).

    Returns
    -------
    int or str
        ``int(text)`` for an optional sign followed by ASCII digits whose value lies in the 64-bit
        range [−2⁶³, 2⁶³ − 1], otherwise the stripped text (so ``18446744073709551616`` is the string
        label ``"18446744073709551616"``, written so in a scenario too).

    Examples
    --------
    >>> parse_label(" 12 "), parse_label("-4"), parse_label("a3"), parse_label("3.0")
    (12, -4, 'a3', '3.0')
    >>> parse_label("18446744073709551616")
    '18446744073709551616'
    """
    s = text.strip()
    if _INT_RE.fullmatch(s):
        sign, digits = ("-" if s[0] == "-" else ""), s.lstrip("+-").lstrip("0") or "0"
        if len(digits) <= 19:  # at most 19 digits: never a huge (or refused) int() conversion
            value = int(sign + digits)
            if INT64_MIN <= value <= INT64_MAX:
                return value
    return s


def check_graph(graph: nx.Graph, key: str = "topology") -> nx.Graph:
    """Validate a user graph and return a simple, undirected, connected copy of it.

    Directed graphs become undirected, parallel edges of a multigraph are collapsed into one (the
    attributes of one of them are kept), and self-loops are dropped with a :class:`UserWarning`.
    The input is not modified.

    Parameters
    ----------
    graph : networkx.Graph
        Any NetworkX graph (``Graph``, ``DiGraph``, ``MultiGraph`` or ``MultiDiGraph``).
    key : str
        Setting named in errors and warnings.

    Returns
    -------
    networkx.Graph
        A new graph with the same node labels and node, edge and graph attributes.

    Raises
    ------
    ConfigError
        If ``graph`` is not a NetworkX graph, has fewer than 2 nodes, or is disconnected.

    Examples
    --------
    >>> g = check_graph(nx.DiGraph([(0, 1), (1, 2)]))
    >>> type(g).__name__, sorted(g.edges())
    ('Graph', [(0, 1), (1, 2)])
    """
    if not isinstance(graph, nx.Graph):
        raise ConfigError(key, f"expected a networkx graph, got {type(graph).__name__}")
    return finish(nx.Graph(graph), key)


def check_graph_object(graph: object, key: str = "topology") -> nx.Graph:
    """A graph given to a scenario from Python, checked and frozen: an undirected simple
    ``networkx.Graph`` (not a DiGraph or MultiGraph: say how to convert it), connected, with at least
    2 nodes whose labels are integers (64-bit, not bool; NumPy integers become Python ones) or
    strings, as requests and
    ``scheduler.start`` name them. Returns a frozen copy (:func:`networkx.freeze`) keeping the node,
    edge and graph attributes; self-loops are dropped with a warning, as for every graph.

    >>> g = check_graph_object(nx.path_graph(["a", "b", "c"]))
    >>> list(g.nodes), nx.is_frozen(g)
    (['a', 'b', 'c'], True)
    """
    if not isinstance(graph, nx.Graph):
        raise ConfigError(key, f"expected a networkx graph, got {type(graph).__name__}")
    if graph.is_directed() or graph.is_multigraph():
        raise ConfigError(
            key,
            f"must be an undirected simple graph, got a {type(graph).__name__}; convert it "
            "with networkx.Graph(G) (a directed edge becomes an undirected one, parallel edges one)",
        )
    given: nx.Graph = graph
    if any(isinstance(label, np.integer) for label in given.nodes):  # NumPy integers are integers
        given = nx.relabel_nodes(
            given, {v: int(v) for v in given.nodes if isinstance(v, np.integer)}, copy=True
        )
    for label in given.nodes:
        if isinstance(label, bool) or not isinstance(label, int | str):
            raise ConfigError(
                key,
                f"node labels must be integers or strings, got {label!r} "
                f"({type(label).__name__}); relabel with networkx.convert_node_labels_to_integers(G)",
            )
        if isinstance(label, int) and not INT64_MIN <= label <= INT64_MAX:
            raise ConfigError(key, f"node label {label} is outside the 64-bit integer range")
    _check_distinct_as_text(given, key)
    copy = given.copy()  # attributes dicts copied: the caller's later edits do not reach the runs
    return nx.freeze(finish(copy, key))


def _check_distinct_as_text(graph: nx.Graph, key: str) -> None:
    """Refuse two node labels written alike, the integer 3 and the string "3": the results folder
    saves labels as text (``graphs/*.graphml``), and requests, ``scheduler.start`` and the CLI's
    ``--node`` name nodes by text, so they would be one node there (a graph of 3, "3" and "a" was
    saved as two nodes and a self-loop)."""
    seen: dict[str, object] = {}
    for label in graph.nodes:
        other = seen.setdefault(str(label), label)
        if other is not label and other != label:
            raise ConfigError(
                key,
                f"node labels {other!r} and {label!r} are written alike ({str(label)!r}): labels "
                "are saved and named as text, so give each node a label of its own",
            )


def finish(graph: nx.Graph, key: str) -> nx.Graph:
    """:func:`check_graph` for a simple undirected graph we own: modified in place and returned."""
    loops = list(nx.selfloop_edges(graph))
    if loops:
        graph.remove_edges_from(loops)
        warnings.warn(
            f"{key}: dropped {len(loops)} self-loop{'s' if len(loops) != 1 else ''} "
            "(a node passing the token to itself is not an edge)",
            UserWarning,
            stacklevel=3,
        )
    n = graph.number_of_nodes()
    if n < 2:
        raise ConfigError(
            key, f"the graph has {n} node{'s' if n != 1 else ''}; at least 2 are needed"
        )
    if not nx.is_connected(graph):
        sizes = sorted((len(c) for c in nx.connected_components(graph)), reverse=True)
        raise _disconnected(key, sizes)
    return graph


def check_connected(indexed: IndexedGraph, key: str) -> None:
    """The CSR form of :func:`finish`'s connectivity check (same message): a breadth-first search
    from node 0 over the CSR arrays (memory of the order of the nodes, not of the edges); only a
    disconnected graph pays for SciPy's component labelling, to report the sizes."""
    n = indexed.size
    if reaches_all(indexed):
        return
    from scipy.sparse.csgraph import connected_components  # here: only a disconnected graph pays

    matrix = sp.csr_matrix(
        (np.ones(indexed.indices.size, dtype=np.int8), indexed.indices, indexed.indptr),
        shape=(n, n),
    )
    count, component = connected_components(matrix, directed=False)
    if count > 1:
        raise _disconnected(key, sorted(np.bincount(component).tolist(), reverse=True))


def _disconnected(key: str, sizes: list[int]) -> ConfigError:
    shown = ", ".join(str(s) for s in sizes[:10]) + (", ..." if len(sizes) > 10 else "")
    return ConfigError(
        key,
        f"the graph is disconnected ({len(sizes)} components, sizes {shown}); "
        "the token cannot reach every node",
    )
