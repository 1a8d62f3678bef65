"""Communication graphs for the token walk: a registry of ``[topology] kind`` s, builders, checks.

A topology is named by a *kind* plus ``nodes`` and kind-specific parameters, and built with
:func:`build_topology` (a NetworkX graph) or :func:`build_indexed` (the simulator's CSR form).
``gossipsim list`` shows the kinds, ``docs/scenarios.md`` has their reference table
(:func:`reference_table`). The package, by job:

``registry``
    :class:`TopologyKind` and :class:`ParamSpec` records, :data:`TOPOLOGY_KINDS`,
    :func:`register` / :func:`unregister`, checking a table's settings, the reference table.
``kinds``
    the shipped kinds: each key stated once, each kind one :func:`register` call. A new kind is a
    builder plus one line there.
``generators``
    NetworkX builders with ``(n, ..., seed)`` signatures (grid, star, the random families).
``arrays``
    Erdős–Rényi and random geometric graphs drawn straight into edge arrays (10⁶ nodes without a
    NetworkX graph), the same graphs as their NetworkX builders for the same seed.
``files``
    edge-list and GraphML readers, path resolution.
``checks``
    :func:`check_graph` (simple, undirected, connected, at least 2 nodes; also for graphs supplied
    by the user), its CSR form, :func:`parse_label`, :class:`~checks.OutOfRange`.
``build``
    :func:`build_topology`, :func:`build_indexed`, :func:`planned_size` (for
    :mod:`gossipsim.study.budget`).

Node labels read from files that look like integers become ints (:func:`parse_label`), so ``3`` in
a scenario and ``3`` in a file name the same node.
"""

from __future__ import annotations

from gossipsim.topology import kinds as _kinds  # noqa: F401  (registers the shipped kinds)
from gossipsim.topology.build import (
    ARRAY_KINDS,
    SeedLike,
    build_indexed,
    build_topology,
    planned_size,
)
from gossipsim.topology.checks import (
    INT64_MAX,
    INT64_MIN,
    OutOfRange,
    check_graph,
    check_graph_object,
    parse_label,
)
from gossipsim.topology.files import shown_path
from gossipsim.topology.registry import (
    TOPOLOGY_KINDS,
    ParamSpec,
    TopologyKind,
    TopologySpec,
    reference_table,
    register,
    unregister,
)

__all__ = [
    "ARRAY_KINDS",
    "INT64_MAX",
    "INT64_MIN",
    "TOPOLOGY_KINDS",
    "OutOfRange",
    "ParamSpec",
    "SeedLike",
    "TopologyKind",
    "TopologySpec",
    "build_indexed",
    "build_topology",
    "check_graph",
    "check_graph_object",
    "parse_label",
    "planned_size",
    "reference_table",
    "register",
    "shown_path",
    "unregister",
]
