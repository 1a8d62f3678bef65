"""The shipped topology kinds: each key stated once, each kind registered in one call.

To add a kind, write its builder (in :mod:`gossipsim.topology.generators`, or use a NetworkX
generator as it is) and add one :func:`~gossipsim.topology.registry.register` line below; it is
then a ``[topology] kind`` of scenarios, a ``--topology`` of the CLI, listed by ``gossipsim list``,
and a row of the reference table (regenerate the table of ``docs/scenarios.md``; a test says so).
The order of the calls is the order of ``gossipsim list`` and of the documentation.
"""

from __future__ import annotations

import math

import networkx as nx

from gossipsim.topology import arrays, files, generators
from gossipsim.topology.registry import ParamSpec, register

# --- keys (type, default, allowed values, documentation) -------------------------------------------

ROWS = ParamSpec(
    "rows",
    int,
    "number of rows (required unless nodes is given: then the largest divisor of nodes that is "
    "<= sqrt(nodes))",
    check="rows >= 1, rows * cols >= 2",
    optional=True,
)
COLS = ParamSpec(
    "cols",
    int,
    "number of columns (required unless nodes is given: then nodes // rows)",
    check="cols >= 1, rows * cols >= 2",
    optional=True,
)
EDGE_P = ParamSpec("p", float, "edge probability", low=0.0, high=1.0)
DEGREE = ParamSpec(
    "degree",
    int,
    "degree of every node",
    check="integer 1 <= degree < nodes with nodes * degree even",
)
M = ParamSpec("m", int, "edges added per new node", check="integer 1 <= m < nodes")
K = ParamSpec("k", int, "neighbours in the ring lattice", check="even integer 2 <= k < nodes")
REWIRE_P = ParamSpec("p", float, "rewiring probability", low=0.0, high=1.0)
RADIUS = ParamSpec("radius", float, "connection distance", low=0.0, low_open=True)
PATH = ParamSpec(
    "path", str, "graph file, relative to the scenario file's folder", check="an existing file"
)


def _pairs(n: int) -> float:
    return n * (n - 1) / 2


# --- kinds: name, builder, description, keys, options ---------------------------------------------
# (size: nodes and expected edges before building, for the memory check; arrays: the same graph
# drawn straight into CSR arrays by build_indexed)

# deterministic families: nodes is the total number of nodes
register(
    "complete", nx.complete_graph, "every pair of nodes is connected", size=lambda n: (n, _pairs(n))
)
register("ring", nx.cycle_graph, "cycle 0-1-...-(K-1)-0", size=lambda n: (n, n))
register("star", generators.star, "centre 0 connected to leaves 1..K-1", size=lambda n: (n, n - 1))
register("path", nx.path_graph, "line 0-1-...-(K-1)", size=lambda n: (n, n - 1))
register(
    "grid",
    generators.grid,
    "2-D rows x cols lattice, nodes numbered row by row",
    ROWS,
    COLS,
    nodes="optional",
    size=generators.grid_size,
)

# random families, drawn from the seed
register(
    "erdos_renyi",
    generators.erdos_renyi,
    "G(n, p): each pair connected independently with probability p",
    EDGE_P,
    random=True,
    size=lambda n, p: (n, p * _pairs(n)),
    arrays=arrays.erdos_renyi_edges,
)
register(
    "random_regular",
    generators.random_regular,
    "uniformly random simple graph with every node of the same degree",
    DEGREE,
    random=True,
    size=lambda n, degree: (n, n * degree / 2),
)
register(
    "barabasi_albert",
    generators.barabasi_albert,
    "preferential attachment: each new node links to m existing nodes",
    M,
    random=True,
    size=lambda n, m: (n, n * min(m, n)),  # m >= n is refused by the builder, naming m
)
register(
    "watts_strogatz",
    generators.watts_strogatz,
    "small world: ring lattice of k nearest neighbours, each edge rewired with probability p",
    K,
    REWIRE_P,
    random=True,
    size=lambda n, k, p: (n, n * k / 2),
)
# (disc area π r² of the unit square's pairs: border effects make it an upper bound; a radius of
# 1 or more links every pair, and squaring 1e308 would overflow)
register(
    "random_geometric",
    generators.random_geometric,
    "uniform points in the unit square, linked when within radius (node attribute 'pos')",
    RADIUS,
    random=True,
    size=lambda n, radius: (n, min(1.0, math.pi * min(radius, 1.0) ** 2) * _pairs(n)),
    arrays=arrays.random_geometric_edges,
)

# small real social networks bundled with NetworkX, with their own node labels
register(
    "karate", nx.karate_club_graph, "Zachary's karate club (34 nodes, labels 0..33)", nodes="fixed"
)
register(
    "florentine",
    nx.florentine_families_graph,
    "Florentine families marriage network (15 nodes, family names)",
    nodes="fixed",
)
register(
    "les_miserables",
    nx.les_miserables_graph,
    "Les Miserables character co-occurrence (77 nodes, character names)",
    nodes="fixed",
)
register(
    "davis",
    nx.davis_southern_women_graph,
    "Davis southern women bipartite network (32 nodes: 18 women, 14 events)",
    nodes="fixed",
)

# graphs read from a file (path relative to the scenario's folder)
register(
    "edgelist",
    files.read_edgelist,
    "edge list file: 'u v [weight ...]' per line, whitespace or comma separated, '#' comments",
    PATH,
    nodes="fixed",
    from_file=True,
)
register(
    "graphml",
    files.read_graphml,
    "GraphML file (node and edge attributes kept)",
    PATH,
    nodes="fixed",
    from_file=True,
)
