"""Next-holder policies for the token: who computes in the next time slot.

Each scheduler kind is one object (:class:`Scheduler`, :mod:`.kinds`) giving the rule as a transition
matrix and stationary distribution (exact cover and hitting times), as a one-step sampler (the event
engine's :class:`Walker`) and as a batched sampler (the vectorised engine), tested against one another,
plus its jump chain for the cover-time Monte Carlo. The kinds registered:

``metropolis-hastings``
    eq. (5) of the core paper: the holder k proposes a neighbour j uniformly at random and passes the
    token with probability ``min(1, deg(k) / deg(j))``; otherwise it keeps the token for the next slot.
    The stationary distribution is uniform over the nodes.
``simple-random-walk``
    the token goes to a uniformly chosen neighbour (stationary distribution proportional to degree).
``uniform``
    any node, uniformly at random, regardless of the graph (a parameter-server baseline).
``round-robin``
    node k + 1 after node k, regardless of the graph (a parameter server's round robin).
``ksd-walk``, ``hip-walk``
    selection on the walk (:mod:`.weighted`): Metropolis-Hastings with stationary distribution
    proportional to the selection weights the protocol publishes (:attr:`NodeView.weights`), read
    at every hop; its transitions depend on the protocol's state (``reads_state``).

A move to a neighbour and a Metropolis-Hastings rejection (stay) both take one slot. The
parameter server's ``round-robin`` and 003's client selection (``ksd``, ``hip``: the next client drawn
from the selection distribution the protocol publishes, :mod:`.selection`) are kinds too.

Modules: :mod:`.graph` (the graph in CSR form), :mod:`.base` (the :class:`Scheduler` contract, the
registry, the :class:`NodeView` of node state, the uniform blocks), :mod:`.kinds` (the first four
kinds), :mod:`.selection` (the server's client selection), :mod:`.weighted` (the importance-weighted
walk), :mod:`.walker` (:class:`Walker`), :mod:`.jump` (:class:`JumpChain`).

A new kind is a :class:`Scheduler` subclass with ``@register`` above it, in :mod:`.kinds`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from gossipsim.scheduling.base import (
    SCHEDULER_KINDS,
    SCHEDULERS,
    UNIFORM_BLOCK,
    NodeView,
    Scheduler,
    check_scheduler,
    machine_csr,
    register,
    scheduler_for,
    uniform_blocks,
    unregister,
)
from gossipsim.scheduling.graph import CSR, IndexedGraph, RangeIndex
from gossipsim.scheduling.jump import JumpChain
from gossipsim.scheduling.kinds import MetropolisHastings, SimpleRandomWalk, Uniform
from gossipsim.scheduling.selection import HIPSelection, KSDSelection
from gossipsim.scheduling.walker import Walker
from gossipsim.scheduling.weighted import HipWalk, ImportanceWeightedWalk, KsdWalk

if TYPE_CHECKING:
    import scipy.sparse as sp  # imported where a matrix is built (base.py)

__all__ = [
    "CSR",
    "HIPSelection",
    "HipWalk",
    "ImportanceWeightedWalk",
    "KSDSelection",
    "KsdWalk",
    "SCHEDULERS",
    "SCHEDULER_KINDS",
    "IndexedGraph",
    "JumpChain",
    "MetropolisHastings",
    "NodeView",
    "RangeIndex",
    "Scheduler",
    "SimpleRandomWalk",
    "Uniform",
    "Walker",
    "UNIFORM_BLOCK",
    "check_scheduler",
    "machine_csr",
    "register",
    "scheduler_for",
    "stationary_distribution",
    "transition_matrix",
    "uniform_blocks",
    "unregister",
]


def _graph(graph: IndexedGraph | nx.Graph) -> IndexedGraph:
    return graph if isinstance(graph, IndexedGraph) else IndexedGraph.from_networkx(graph)


def transition_matrix(
    graph: IndexedGraph | nx.Graph, kind: str = "metropolis-hastings", view: NodeView | None = None
) -> sp.csr_array:
    """Transition matrix P[k, j] of the token walk (eq. 5 for Metropolis-Hastings), as sparse CSR.

    For ``uniform`` the matrix is dense (every entry 1/K) and is returned in CSR form only for small
    graphs; the cover/hitting code uses closed forms for that scheduler instead.
    """
    g = _graph(graph)
    return scheduler_for(kind).transition_matrix(g, view)


def stationary_distribution(
    graph: IndexedGraph | nx.Graph, kind: str = "metropolis-hastings", view: NodeView | None = None
) -> np.ndarray:
    """Stationary distribution of the walk: uniform for MH and uniform, degree-proportional for SRW."""
    g = _graph(graph)
    return scheduler_for(kind).stationary(g, view)
