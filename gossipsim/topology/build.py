"""Building a ``[topology]`` table: checked settings, the memory check, the builder, the graph checks.

:func:`build_topology` returns a NetworkX graph; :func:`build_indexed` the simulator's CSR form,
drawing the kinds registered with ``arrays=`` (:data:`ARRAY_KINDS`) without NetworkX;
:func:`planned_size` is the size of a generated graph before building it, for
:mod:`gossipsim.study.budget`. Everything kind-specific comes from the kind's record in the registry
(:data:`~gossipsim.topology.registry.TOPOLOGY_KINDS`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Set
from typing import Any

import networkx as nx
import numpy as np

from gossipsim.core import memory
from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph
from gossipsim.topology.checks import OutOfRange, check_connected, finish
from gossipsim.topology.files import resolve
from gossipsim.topology.registry import TOPOLOGY_KINDS, TopologyKind, validate

__all__ = ["ARRAY_KINDS", "SeedLike", "build_indexed", "build_topology", "nx_seed", "planned_size"]

SeedLike = int | np.random.SeedSequence | np.random.Generator | None


class _ArrayKinds(Set[str]):
    """The names of the kinds registered with ``arrays=`` (a live view of the registry)."""

    def __contains__(self, name: object) -> bool:
        spec = TOPOLOGY_KINDS.get(name) if isinstance(name, str) else None
        return spec is not None and spec.arrays is not None

    def __iter__(self) -> Iterator[str]:
        return (name for name, spec in TOPOLOGY_KINDS.items() if spec.arrays is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"ARRAY_KINDS({', '.join(self)})"


#: kinds whose graphs :func:`build_indexed` draws straight into CSR arrays (the graph
#: :func:`build_topology` gives for the same seed, without a NetworkX graph's memory: 0.6 instead of
#: 3.3-3.9 GiB at 10^6 nodes); erdos_renyi's is NetworkX's fast_gnp_random_graph, random_geometric's
#: is gossipsim's own (points from NumPy, not NetworkX's random_geometric_graph)
ARRAY_KINDS: Set[str] = _ArrayKinds()


def nx_seed(seed: SeedLike) -> int:
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
        One of :data:`~gossipsim.topology.registry.TOPOLOGY_KINDS`.
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
        A simple, undirected, connected graph (see :func:`~gossipsim.topology.checks.check_graph`).

    Raises
    ------
    ConfigError
        Naming ``topology.kind``, ``topology.nodes``, ``topology.<param>``, ``topology.path`` or
        ``topology`` (for a graph that fails the checks, e.g. a disconnected one).

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
    spec, n, values = validate(kind, nodes, params, path)
    _check_memory(spec, n, values)
    graph = _build(spec, n, values, base_dir, seed)
    return finish(graph, "topology")


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
    spec, n, values = validate(kind, nodes, params, path)
    _check_memory(spec, n, values)
    if spec.arrays is None:
        graph = finish(_build(spec, n, values, base_dir, seed), "topology")
        return IndexedGraph.from_networkx(graph), graph
    assert n is not None  # (register: arrays only for kinds that need nodes)
    u, v = spec.arrays(n, **values, seed=nx_seed(seed))
    indexed = IndexedGraph.from_edges(n, u, v)
    check_connected(indexed, "topology")
    return indexed, None


def planned_size(
    kind: str,
    nodes: int | None = None,
    params: Mapping[str, object] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> tuple[int, float, bool] | None:
    """``(nodes, expected edges, built through NetworkX)`` of a generated graph, from its settings
    alone, for :mod:`gossipsim.study.budget`; None for bundled and file graphs (known once read). Invalid
    settings raise the errors of :func:`build_topology`."""
    spec, n, values = validate(kind, nodes, params, path)
    return _planned(spec, n, values)


def _planned(
    spec: TopologyKind, n: int | None, values: Mapping[str, Any]
) -> tuple[int, float, bool] | None:
    planned = None if spec.size is None else spec.size(n, **values)
    if planned is None:
        return None
    count, edges = planned
    return count, float(edges), spec.arrays is None


def _check_memory(spec: TopologyKind, n: int | None, values: Mapping[str, Any]) -> None:
    """Refuse, before building, a generated graph that cannot fit in this machine's memory."""
    planned = _planned(spec, n, values)
    if planned is not None:
        nodes, edges, networkx = planned
        # without nodes the size comes from the parameters: name the first (the grid's rows)
        key = "topology.nodes" if n is not None else f"topology.{next(iter(spec.params), 'nodes')}"
        memory.check_graph(nodes, max(edges, 0.0), networkx=networkx, key=key)


def _build(
    spec: TopologyKind,
    n: int | None,
    values: dict[str, Any],
    base_dir: str | os.PathLike[str] | None,
    seed: SeedLike,
) -> nx.Graph:
    """The kind's builder called with the checked values (file resolved, seed made an int)."""
    args = dict(values)
    if spec.from_file:
        args["path"] = resolve(values["path"], base_dir)
    if spec.random:
        args["seed"] = nx_seed(seed)
    try:
        graph = spec.build(**args) if spec.nodes == "fixed" else spec.build(n, **args)
    except OutOfRange as exc:
        raise _out_of_range(spec, values, exc) from None
    count = graph.number_of_nodes()
    if spec.nodes == "fixed" and n is not None and count != n:
        if spec.from_file:
            raise ConfigError(
                "topology.nodes",
                f"nodes = {n} but {str(args['path'])!r} has {count} nodes; "
                "give the file's node count or leave nodes out",
            )
        raise ConfigError(
            "topology.nodes",
            f"topology {spec.name!r} has exactly {count} nodes, got nodes = {n}; "
            "give that count or leave nodes out",
        )
    return graph


def _out_of_range(spec: TopologyKind, values: Mapping[str, Any], exc: OutOfRange) -> ConfigError:
    """``topology.<name>: must be <allowed values>, got <value> (<why>)``."""
    key = f"topology.{exc.name}"
    if exc.name not in spec.params:  # pragma: no cover - a builder naming a key it does not take
        return ConfigError(key, str(exc))
    extra = f" ({exc.why})" if exc.why else ""
    return ConfigError(
        key, f"must be {spec.params[exc.name].check}, got {values[exc.name]!r}{extra}"
    )
