"""Communication graphs for the token walk: builders for every ``[topology] kind`` and graph checks.

A topology is named by a *kind* (see :data:`TOPOLOGY_KINDS`) plus ``nodes`` and kind-specific
parameters, and built with :func:`build_topology`:

``complete``, ``ring``, ``star``, ``path``, ``grid``
    deterministic families; ``nodes`` is always the total number of nodes (a star with K nodes has
    centre 0 and leaves 1..K-1).
``erdos_renyi``, ``random_regular``, ``barabasi_albert``, ``watts_strogatz``, ``random_geometric``
    random families, drawn from ``seed`` (same seed => same graph); all scale to 10^5 nodes, and
    ``erdos_renyi`` / ``random_geometric`` to 10^6 through :func:`build_indexed` (CSR arrays).
``karate``, ``florentine``, ``les_miserables``, ``davis``
    small real social networks bundled with NetworkX, with their own node labels.
``edgelist``, ``graphml``
    a graph read from a file (``path``, relative to the scenario's folder).

Every graph goes through :func:`check_graph`, which is also what the Python API uses for a graph
supplied by the user: the result is a simple, undirected, connected :class:`networkx.Graph` with at
least two nodes (self-loops are dropped with a warning; a disconnected graph is an error, because the
token could never reach every node). Node labels read from files that look like integers become
ints (:func:`parse_label`), so ``3`` in a scenario and ``3`` in a file name the same node.
"""

from __future__ import annotations

import math
import os
import random
import re
import warnings
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from . import budget
from .errors import ConfigError
from .scheduling import IndexedGraph

__all__ = [
    "TOPOLOGY_KINDS",
    "ParamSpec",
    "TopologySpec",
    "build_indexed",
    "build_topology",
    "check_graph",
    "parse_label",
    "planned_size",
]

SeedLike = int | np.random.SeedSequence | np.random.Generator | None


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a topology kind.

    Attributes
    ----------
    name : str
        Key under ``[topology]`` (errors name it as ``topology.<name>``).
    type : type
        ``int``, ``float`` or ``str`` (an int is accepted where a float is expected; bools never).
    description : str
        One line for help texts.
    default : object or None
        Value used when the key is absent; ``None`` means there is no default (see the description
        for keys that are derived from ``nodes``, such as the grid's ``rows`` and ``cols``).
    check : str
        The allowed values, as shown in error messages, e.g. ``"0 <= p <= 1"``.

    Examples
    --------
    >>> TOPOLOGY_KINDS["erdos_renyi"].params["p"].check
    '0 <= p <= 1'
    """

    name: str
    type: type
    description: str
    default: object | None = None
    check: str = ""
    #: for numbers: the allowed interval [low, high], with ``low`` excluded when ``low_open``
    low: float | None = None
    high: float | None = None
    low_open: bool = False


@dataclass(frozen=True)
class TopologySpec:
    """What a topology kind is and which keys it takes.

    Attributes
    ----------
    name : str
        The ``kind`` string.
    description : str
        One line for help texts.
    params : dict of str to ParamSpec
        Kind-specific parameters (``nodes`` is not listed here; see ``needs_nodes``).
    random : bool
        Whether the graph is drawn from the seed.
    needs_nodes : bool
        Whether ``nodes`` is required (it is optional for grids given ``rows`` and ``cols``, and for
        bundled and file graphs, where it is only checked against the real node count).
    from_file : bool
        Whether the graph is read from ``path``.

    Examples
    --------
    >>> spec = TOPOLOGY_KINDS["random_regular"]
    >>> spec.random, spec.needs_nodes, list(spec.params)
    (True, True, ['degree'])
    """

    name: str
    description: str
    params: dict[str, ParamSpec]
    random: bool = False
    needs_nodes: bool = True
    from_file: bool = False


def _p(
    name: str,
    type_: type,
    description: str,
    check: str,
    default: object | None = None,
    **bounds: Any,
) -> ParamSpec:
    return ParamSpec(
        name=name, type=type_, description=description, default=default, check=check, **bounds
    )


_PROB = _p("p", float, "edge probability", "0 <= p <= 1", low=0.0, high=1.0)
_PATH = _p("path", str, "graph file, relative to the scenario file's folder", "an existing file")

_SPECS = [
    TopologySpec("complete", "every pair of nodes is connected", {}),
    TopologySpec("ring", "cycle 0-1-...-(K-1)-0", {}),
    TopologySpec("star", "centre 0 connected to leaves 1..K-1", {}),
    TopologySpec("path", "line 0-1-...-(K-1)", {}),
    TopologySpec(
        "grid",
        "2-D rows x cols lattice, nodes numbered row by row",
        {
            "rows": _p(
                "rows",
                int,
                "number of rows (required unless nodes is given: then the largest divisor of "
                "nodes that is <= sqrt(nodes))",
                "rows >= 1, rows * cols >= 2",
            ),
            "cols": _p(
                "cols",
                int,
                "number of columns (required unless nodes is given: then nodes // rows)",
                "cols >= 1, rows * cols >= 2",
            ),
        },
        needs_nodes=False,
    ),
    TopologySpec(
        "erdos_renyi",
        "G(n, p): each pair connected independently with probability p",
        {"p": _PROB},
        random=True,
    ),
    TopologySpec(
        "random_regular",
        "uniformly random simple graph with every node of the same degree",
        {
            "degree": _p(
                "degree",
                int,
                "degree of every node",
                "integer 1 <= degree < nodes with nodes * degree even",
            )
        },
        random=True,
    ),
    TopologySpec(
        "barabasi_albert",
        "preferential attachment: each new node links to m existing nodes",
        {"m": _p("m", int, "edges added per new node", "integer 1 <= m < nodes")},
        random=True,
    ),
    TopologySpec(
        "watts_strogatz",
        "small world: ring lattice of k nearest neighbours, each edge rewired with probability p",
        {
            "k": _p("k", int, "neighbours in the ring lattice", "even integer 2 <= k < nodes"),
            "p": _p("p", float, "rewiring probability", "0 <= p <= 1", low=0.0, high=1.0),
        },
        random=True,
    ),
    TopologySpec(
        "random_geometric",
        "uniform points in the unit square, linked when within radius (node attribute 'pos')",
        {
            "radius": _p(
                "radius", float, "connection distance", "radius > 0", low=0.0, low_open=True
            )
        },
        random=True,
    ),
    TopologySpec("karate", "Zachary's karate club (34 nodes, labels 0..33)", {}, needs_nodes=False),
    TopologySpec(
        "florentine",
        "Florentine families marriage network (15 nodes, family names)",
        {},
        needs_nodes=False,
    ),
    TopologySpec(
        "les_miserables",
        "Les Miserables character co-occurrence (77 nodes, character names)",
        {},
        needs_nodes=False,
    ),
    TopologySpec(
        "davis",
        "Davis southern women bipartite network (32 nodes: 18 women, 14 events)",
        {},
        needs_nodes=False,
    ),
    TopologySpec(
        "edgelist",
        "edge list file: 'u v [weight ...]' per line, whitespace or comma separated, '#' comments",
        {"path": _PATH},
        needs_nodes=False,
        from_file=True,
    ),
    TopologySpec(
        "graphml",
        "GraphML file (node and edge attributes kept)",
        {"path": _PATH},
        needs_nodes=False,
        from_file=True,
    ),
]

TOPOLOGY_KINDS: dict[str, TopologySpec] = {spec.name: spec for spec in _SPECS}
"""All topology kinds, in documentation order: kind name -> :class:`TopologySpec`."""

_INT_RE = re.compile(r"[+-]?[0-9]+")

#: integer labels are 64-bit (as TOML integers and the simulator's label arrays); longer digit
#: strings stay strings
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


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


# --------------------------------------------------------------------------------------------------
# checks


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
    return _finish(nx.Graph(graph), key)


def _finish(graph: nx.Graph, key: str) -> nx.Graph:
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
        shown = ", ".join(str(s) for s in sizes[:10]) + (", ..." if len(sizes) > 10 else "")
        raise ConfigError(
            key,
            f"the graph is disconnected ({len(sizes)} components, sizes {shown}); "
            "the token cannot reach every node",
        )
    return graph


def _check_value(spec: ParamSpec, value: object) -> int | float | str:
    key = f"topology.{spec.name}"
    if spec.type is int:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ConfigError(key, f"must be an integer, got {value!r}; allowed: {spec.check}")
        return int(value)
    if spec.type is float:
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            raise ConfigError(key, f"must be a number, got {value!r}; allowed: {spec.check}")
        x = float(value)
        if not math.isfinite(x):
            raise ConfigError(key, f"must be a finite number, got {value!r}; allowed: {spec.check}")
        below = spec.low is not None and (x <= spec.low if spec.low_open else x < spec.low)
        if below or (spec.high is not None and x > spec.high):
            raise ConfigError(key, f"must be {spec.check}, got {value!r}")
        return x
    if not isinstance(value, str | os.PathLike):
        raise ConfigError(key, f"must be a string, got {value!r}; allowed: {spec.check}")
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _check_nodes(nodes: object) -> int:
    if isinstance(nodes, bool) or not isinstance(nodes, int | np.integer):
        raise ConfigError("topology.nodes", f"must be an integer >= 2, got {nodes!r}")
    if nodes < 2:
        raise ConfigError("topology.nodes", f"must be an integer >= 2, got {nodes}")
    return int(nodes)


def _require(condition: bool, name: str, spec: ParamSpec, value: object, why: str = "") -> None:
    if not condition:
        extra = f" ({why})" if why else ""
        raise ConfigError(f"topology.{name}", f"must be {spec.check}, got {value!r}{extra}")


def _nx_seed(seed: SeedLike) -> int:
    """A 32-bit int seed for NetworkX: ``seed`` and ``SeedSequence(seed)`` give the same value."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**32))
    if isinstance(seed, np.random.SeedSequence):
        return int(seed.generate_state(1)[0])
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError("seed", f"must be a non-negative integer, got {seed!r}")
    return int(np.random.SeedSequence(int(seed)).generate_state(1)[0])


# --------------------------------------------------------------------------------------------------
# builders


def _grid(nodes: int | None, params: dict[str, Any]) -> nx.Graph:
    r: int | None = params.get("rows")
    c: int | None = params.get("cols")
    for name, value in (("rows", r), ("cols", c)):
        _require(value is None or value >= 1, name, TOPOLOGY_KINDS["grid"].params[name], value)
    if nodes is None:
        if r is None or c is None:
            missing = "nodes" if r is None and c is None else "rows" if r is None else "cols"
            raise ConfigError(f"topology.{missing}", "a grid needs nodes, or both rows and cols")
    elif r is None and c is None:
        r = max(d for d in range(1, math.isqrt(nodes) + 1) if nodes % d == 0)
        c = nodes // r
    elif r is None or c is None:
        given, name = (r, "rows") if c is None else (c, "cols")
        assert given is not None
        if nodes % given:
            raise ConfigError(
                f"topology.{name}",
                f"nodes = {nodes} is not a multiple of {name} = {given}; "
                f"give a divisor of {nodes} or leave {name} out",
            )
        r, c = (given, nodes // given) if name == "rows" else (nodes // given, given)
    elif r * c != nodes:
        raise ConfigError(
            "topology.nodes",
            f"nodes = {nodes} disagrees with rows * cols = {r} * {c} = {r * c}; give matching "
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


def _star(n: int) -> nx.Graph:
    return nx.star_graph(n - 1)  # networkx: centre 0 plus n - 1 leaves


def _random_geometric_points(n: int, radius: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform points in the unit square and the pairs (i < j) within ``radius`` (a KD-tree)."""
    pos = np.random.default_rng(seed).random((n, 2))
    return pos, cKDTree(pos).query_pairs(radius, output_type="ndarray")


def _random_geometric(n: int, radius: float, seed: int) -> nx.Graph:
    # networkx's own generator sorts all pairs in Python; a KD-tree with ndarray output is ~3x faster.
    pos, pairs = _random_geometric_points(n, radius, seed)
    g = nx.Graph()
    g.add_nodes_from((i, {"pos": (x, y)}) for i, (x, y) in enumerate(pos.tolist()))
    g.add_edges_from(pairs.tolist())
    return g


#: edge probability below which an Erdős–Rényi graph has no edge (whatever its size)
_NO_EDGE_P = 1e-300


def _erdos_renyi_edges(n: int, p: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges of ``networkx.fast_gnp_random_graph(n, p, seed)`` as arrays: the same algorithm
    (Batagelj and Brandes' geometric skips over the pairs w < v) with the same ``random.Random``
    stream, so the same graph, without building a NetworkX graph."""
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


_BUNDLED: dict[str, Callable[[], nx.Graph]] = {
    "karate": nx.karate_club_graph,
    "florentine": nx.florentine_families_graph,
    "les_miserables": nx.les_miserables_graph,
    "davis": nx.davis_southern_women_graph,
}


def _relabel_checked(labels: Mapping[str, int | str], where: str) -> None:
    seen: dict[int | str, str] = {}
    for text, label in labels.items():
        other = seen.setdefault(label, text)
        if other != text:
            raise ConfigError(
                "topology.path",
                f"{where}: node ids {other!r} and {text!r} both read as node {label!r}; "
                "ids that look like integers become integers, so write each node one way",
            )


def _read_edgelist(file: Path) -> nx.Graph:
    from .data import read_text  # (data reads node labels with parse_label, from here)

    # UTF-8 with an optional byte-order mark; another encoding is an error saying where
    text = read_text(file, "topology.path")
    g = nx.Graph()
    labels: dict[str, int | str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")] if "," in line else line.split()
        if len(fields) < 2 or not fields[0] or not fields[1]:
            raise ConfigError(
                "topology.path",
                f"{file}:{lineno}: expected 'u v' (two node labels separated by whitespace or a "
                f"comma, optionally followed by a weight), got {raw.strip()!r}",
            )
        u = labels.setdefault(fields[0], parse_label(fields[0]))
        v = labels.setdefault(fields[1], parse_label(fields[1]))
        weight = _number(fields[2]) if len(fields) > 2 else None
        if weight is None:
            g.add_edge(u, v)
        else:
            g.add_edge(u, v, weight=weight)
    if g.number_of_edges() == 0:
        raise ConfigError("topology.path", f"edge list {str(file)!r} has no edges")
    _relabel_checked(labels, str(file))
    return g


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _read_graphml(file: Path) -> nx.Graph:
    try:
        g = nx.read_graphml(file, node_type=str)
    except Exception as exc:  # any parse failure of a user file is a user error
        reason = str(exc) or type(exc).__name__
        raise ConfigError("topology.path", f"cannot read GraphML {str(file)!r}: {reason}") from exc
    mapping = {text: parse_label(text) for text in g.nodes}
    _relabel_checked(mapping, str(file))
    g = nx.relabel_nodes(g, mapping, copy=True)
    return nx.Graph(g)  # undirected, parallel edges collapsed


def shown_path(path: str | os.PathLike[str], limit: int = 120) -> str:
    """A path as error messages show it: quoted, and shortened in the middle when longer than
    ``limit`` characters (a 5,000-character path would drown the one-line message)."""
    text = os.fspath(path)
    if len(text) > limit:
        keep = (limit - 5) // 2
        text = f"{text[:keep]}[...]{text[-keep:]}"
    return repr(text)


def _resolve(path: str | os.PathLike[str], base_dir: str | os.PathLike[str] | None) -> Path:
    try:
        p = Path(path).expanduser()
        if not p.is_absolute() and base_dir is not None:
            p = Path(base_dir).expanduser() / p
        exists, is_file = p.exists(), p.is_file()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte, ...
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(
            "topology.path", f"cannot use the path {shown_path(path)}: {reason}"
        ) from None
    if not exists:
        where = f" (resolved against {shown_path(base_dir)})" if base_dir is not None else ""
        raise ConfigError(
            "topology.path", f"file {shown_path(path)} does not exist{where}; give an existing file"
        )
    if not is_file:
        raise ConfigError("topology.path", f"{shown_path(p)} is not a file; give a graph file")
    return p


def build_topology(
    kind: str,
    nodes: int | None = None,
    params: Mapping[str, object] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    seed: SeedLike = None,
) -> nx.Graph:
    """Build the communication graph of a ``[topology]`` table.

    Parameters
    ----------
    kind : str
        One of :data:`TOPOLOGY_KINDS`.
    nodes : int, optional
        Total number of nodes K (>= 2). Required for the generated families except ``grid`` given
        ``rows`` and ``cols``; for bundled and file graphs it is optional and must equal the real
        node count if given.
    params : mapping, optional
        Kind-specific parameters (see ``TOPOLOGY_KINDS[kind].params``); unknown keys are errors.
    path : str or path-like, optional
        Graph file for ``edgelist``/``graphml`` (may also be given as ``params["path"]``).
    base_dir : str or path-like, optional
        Folder a relative ``path`` is resolved against (the scenario file's folder); default: the
        current directory.
    seed : int, SeedSequence or Generator, optional
        Randomness for the random kinds (ignored by the others). An int ``s`` and
        ``SeedSequence(s)`` give the same graph; a Generator is advanced by one draw; ``None`` means
        fresh entropy.

    Returns
    -------
    networkx.Graph
        A simple, undirected, connected graph (see :func:`check_graph`).

    Raises
    ------
    ConfigError
        Naming ``topology.kind``, ``topology.nodes``, ``topology.<param>``, ``topology.path`` or
        ``topology`` (for a graph that fails :func:`check_graph`, e.g. a disconnected one).

    Examples
    --------
    >>> g = build_topology("star", 10)
    >>> g.number_of_nodes(), g.degree[0]
    (10, 9)
    >>> a = build_topology("random_regular", 100, {"degree": 3}, seed=1)
    >>> b = build_topology("random_regular", 100, {"degree": 3}, seed=1)
    >>> sorted(a.edges()) == sorted(b.edges())
    True
    """
    spec, n, values = _validated(kind, nodes, params, path)
    _check_memory(spec, n, values)
    graph = _build(spec, n, values, base_dir, seed)
    return _finish(graph, "topology")


#: kinds whose graphs :func:`build_indexed` draws straight into CSR arrays (same graph as NetworkX's
#: for the same seed, without a NetworkX graph's memory: 0.6 instead of 3.3-3.9 GiB at 10^6 nodes)
ARRAY_KINDS = ("erdos_renyi", "random_geometric")


def build_indexed(
    kind: str,
    nodes: int | None = None,
    params: Mapping[str, object] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    seed: SeedLike = None,
) -> tuple[IndexedGraph, nx.Graph | None]:
    """:func:`build_topology` as the simulator uses it: the graph in CSR form, and the NetworkX
    graph when one was built (None for :data:`ARRAY_KINDS`, drawn straight into arrays; their CSR
    equals that of :func:`build_topology`'s graph for the same arguments, tested). Same checks and
    errors as :func:`build_topology`."""
    spec, n, values = _validated(kind, nodes, params, path)
    _check_memory(spec, n, values)
    if spec.name not in ARRAY_KINDS:
        graph = _finish(_build(spec, n, values, base_dir, seed), "topology")
        return IndexedGraph.from_networkx(graph), graph
    assert n is not None
    if spec.name == "erdos_renyi":
        u, v = _erdos_renyi_edges(n, values["p"], _nx_seed(seed))
    else:
        _, pairs = _random_geometric_points(n, values["radius"], _nx_seed(seed))
        u, v = pairs[:, 0], pairs[:, 1]
    indexed = IndexedGraph.from_edges(n, u, v)
    _check_connected(indexed, "topology")
    return indexed, None


def _check_connected(indexed: IndexedGraph, key: str) -> None:
    """The CSR form of :func:`_finish`'s connectivity check (same message): a breadth-first search
    from node 0 over the CSR arrays (memory of the order of the nodes, not of the edges); only a
    disconnected graph pays for SciPy's component labelling, to report the sizes."""
    n = indexed.size
    if _reaches_all(indexed):
        return
    matrix = sp.csr_matrix(
        (np.ones(indexed.indices.size, dtype=np.int8), indexed.indices, indexed.indptr),
        shape=(n, n),
    )
    count, component = connected_components(matrix, directed=False)
    if count > 1:
        sizes = sorted(np.bincount(component).tolist(), reverse=True)
        shown = ", ".join(str(s) for s in sizes[:10]) + (", ..." if len(sizes) > 10 else "")
        raise ConfigError(
            key,
            f"the graph is disconnected ({len(sizes)} components, sizes {shown}); "
            "the token cannot reach every node",
        )


def _reaches_all(indexed: IndexedGraph) -> bool:
    """Whether a breadth-first search from node 0 reaches every node (vectorised level by level)."""
    indptr, indices = indexed.indptr, indexed.indices
    seen = np.zeros(indexed.size, dtype=bool)
    seen[0] = True
    frontier = np.zeros(1, dtype=np.int64)
    reached = 1
    while frontier.size:
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


def planned_size(
    kind: str,
    nodes: int | None = None,
    params: Mapping[str, object] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> tuple[int, float, bool] | None:
    """``(nodes, expected edges, built through NetworkX)`` of a generated graph, from its settings
    alone, for :mod:`gossipsim.budget`; None for bundled and file graphs (known once read). Invalid
    settings raise the errors of :func:`build_topology`."""
    spec, n, values = _validated(kind, nodes, params, path)
    return _planned(spec, n, values)


def _planned(
    spec: TopologySpec, n: int | None, values: Mapping[str, Any]
) -> tuple[int, float, bool] | None:
    if spec.from_file or spec.name in _BUNDLED:
        return None
    if spec.name == "grid":
        rows, cols = values.get("rows"), values.get("cols")
        if n is None:
            if rows is None or cols is None:
                return None  # _grid reports what is missing
            n = int(rows) * int(cols)
        return n, 2.0 * n, True  # at most 2 edges per node
    assert n is not None
    pairs = n * (n - 1) / 2
    v = values
    edges = {
        "complete": lambda: pairs,
        "ring": lambda: n,
        "star": lambda: n - 1,
        "path": lambda: n - 1,
        "erdos_renyi": lambda: v["p"] * pairs,
        "random_regular": lambda: n * v["degree"] / 2,
        "barabasi_albert": lambda: n * v["m"],
        "watts_strogatz": lambda: n * v["k"] / 2,
        # disc area π r² of the unit square's pairs (border effects make it an upper bound)
        "random_geometric": lambda: min(1.0, math.pi * v["radius"] ** 2) * pairs,
    }[spec.name]()
    return n, float(edges), spec.name not in ARRAY_KINDS


def _check_memory(spec: TopologySpec, n: int | None, values: Mapping[str, Any]) -> None:
    """Refuse, before building, a generated graph that cannot fit in this machine's memory."""
    planned = _planned(spec, n, values)
    if planned is not None:
        nodes, edges, networkx = planned
        key = "topology.nodes" if n is not None else "topology.rows"
        budget.check_graph(nodes, max(edges, 0.0), networkx=networkx, key=key)


def _validated(
    kind: str,
    nodes: int | None,
    params: Mapping[str, object] | None,
    path: str | os.PathLike[str] | None,
) -> tuple[TopologySpec, int | None, dict[str, Any]]:
    """The kind's spec, the node count and the parameter values, checked (one-line errors)."""
    spec = TOPOLOGY_KINDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise ConfigError(
            "topology.kind", f"unknown topology {kind!r}; allowed: {', '.join(TOPOLOGY_KINDS)}"
        )
    given: dict[str, Any] = dict(params or {})
    for name in given:
        if name not in spec.params:
            allowed = ", ".join(["nodes", *spec.params])
            raise ConfigError(
                f"topology.{name}",
                f"unknown parameter {name!r} for topology {kind!r}; allowed: {allowed}",
            )
    if path is not None:
        if not spec.from_file:
            files = ", ".join(k for k, s in TOPOLOGY_KINDS.items() if s.from_file)
            raise ConfigError(
                "topology.path", f"a file is only read for kinds {files}, not {kind!r}"
            )
        if "path" in given and str(given["path"]) != os.fspath(path):
            raise ConfigError("topology.path", f"given twice: {given['path']!r} and {path!r}")
        given["path"] = path
    n = None if nodes is None else _check_nodes(nodes)
    if spec.needs_nodes and n is None:
        raise ConfigError("topology.nodes", f"topology {kind!r} needs nodes (an integer >= 2)")
    values: dict[str, Any] = {}
    for name, ps in spec.params.items():
        if name in given:
            values[name] = _check_value(ps, given[name])
        elif ps.default is not None:
            values[name] = ps.default
        elif kind != "grid":  # a grid may derive rows and cols from nodes; _grid reports the rest
            raise ConfigError(f"topology.{name}", f"topology {kind!r} needs {name} ({ps.check})")
    return spec, n, values


def _build(
    spec: TopologySpec,
    n: int | None,
    values: dict[str, Any],
    base_dir: str | os.PathLike[str] | None,
    seed: SeedLike,
) -> nx.Graph:
    kind = spec.name
    ps = spec.params
    if kind == "grid":
        return _grid(n, values)
    if spec.from_file:
        file = _resolve(values["path"], base_dir)
        graph = _read_edgelist(file) if kind == "edgelist" else _read_graphml(file)
        if n is not None and graph.number_of_nodes() != n:
            raise ConfigError(
                "topology.nodes",
                f"nodes = {n} but {str(file)!r} has {graph.number_of_nodes()} nodes; "
                "give the file's node count or leave nodes out",
            )
        return graph
    if kind in _BUNDLED:
        graph = _BUNDLED[kind]()
        if n is not None and graph.number_of_nodes() != n:
            raise ConfigError(
                "topology.nodes",
                f"topology {kind!r} has exactly {graph.number_of_nodes()} nodes, got nodes = {n}; "
                "give that count or leave nodes out",
            )
        return graph
    assert n is not None  # every other kind needs nodes (checked by build_topology)
    if kind == "complete":
        return nx.complete_graph(n)
    if kind == "ring":
        return nx.cycle_graph(n)
    if kind == "star":
        return _star(n)
    if kind == "path":
        return nx.path_graph(n)

    v = values
    if kind == "erdos_renyi":
        if 1.0 - v["p"] == 1.0:  # NetworkX would divide by log(1 − p) = 0 (p < 1.1e-16)
            u, w = _erdos_renyi_edges(n, v["p"], _nx_seed(seed))
            graph = nx.empty_graph(n)
            graph.add_edges_from(zip(u.tolist(), w.tolist(), strict=True))
            return graph
        return nx.fast_gnp_random_graph(n, v["p"], seed=_nx_seed(seed))
    if kind == "random_regular":
        d = v["degree"]
        _require(1 <= d < n, "degree", ps["degree"], d, f"nodes = {n}")
        _require(n * d % 2 == 0, "degree", ps["degree"], d, f"nodes * degree = {n * d} is odd")
        try:
            return nx.random_regular_graph(d, n, seed=_nx_seed(seed))
        except nx.NetworkXError as exc:  # pragma: no cover - networkx gives up after many tries
            raise ConfigError("topology.degree", f"could not draw the graph: {exc}") from exc
    if kind == "barabasi_albert":
        _require(1 <= v["m"] < n, "m", ps["m"], v["m"], f"nodes = {n}")
        return nx.barabasi_albert_graph(n, v["m"], seed=_nx_seed(seed))
    if kind == "watts_strogatz":
        k = v["k"]
        _require(2 <= k < n and k % 2 == 0, "k", ps["k"], k, f"nodes = {n}")
        return nx.watts_strogatz_graph(n, k, v["p"], seed=_nx_seed(seed))
    if kind == "random_geometric":
        return _random_geometric(n, v["radius"], _nx_seed(seed))
    raise AssertionError(f"no builder for topology {kind!r}")  # pragma: no cover
