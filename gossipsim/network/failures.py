"""Failures and churn (``[failures]``): which nodes and links are up, as SimPy processes.

The model, all in simulated seconds:

* **nodes** alternate up and down: each stays up for an exponential time of mean ``node_up_s``,
  then down for an exponential time of mean ``node_down_s``, independently of the others;
* **scripted outages** take a node down from ``from_s`` to ``to_s`` (on top of the churn: a node is
  up when no outage holds it and its churn has it up);
* **links** (undirected edges) alternate the same way with means ``link_up_s`` and ``link_down_s``;
  a link's state is that of both directions;
* everything is up at time 0 (the token's first holder can start), and the durations come from the
  run's failures stream (:data:`gossipsim.core.streams.FAILURES`; nodes and links each a generator
  spawned from it), drawn when each period begins: the same seed gives the same history of
  failures whatever the token does.

:class:`Liveness` owns the state: flat byte arrays that the walk's sampler reads at every hop
(:class:`~gossipsim.scheduling.NodeView` ``up``, ``edge_up``, ``live_degree``: the number of
neighbours that are up over links that are up), and the last time each node and link went down,
which the engine reads to tell whether a node failed while it held the token or a link failed under
a transmission. The nodes' churn is one SimPy process taking every node's changes in time order
from a heap, the links' another, each outage a process of its own: one event per change, and no
per-node process to start (a graph of 10,000 nodes and 15,000 links starts in milliseconds).
Processes are started in a fixed order (nodes, outages, links), so ties are broken the same way in
every run.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from array import array
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gossipsim.scheduling.base import NodeView
from gossipsim.scheduling.graph import IndexedGraph

if TYPE_CHECKING:
    import simpy

#: what a request from a node that is down does: ``wait`` until the node is up again (its latency
#: includes the wait), or is ``delegate``d (served at once, by a neighbour acting for the node)
REQUESTS_FROM_DOWN = ("wait", "delegate")


@dataclass(frozen=True)
class Outage:
    """Node index ``node`` is down from ``from_s`` to ``to_s`` (simulated seconds)."""

    node: int
    from_s: float
    to_s: float


@dataclass(frozen=True)
class Failures:
    """A run's failure model (see the module docstring); ``token_timeout_s`` is how long a node
    waits for the acknowledgement of a token it handed on (or for its holder's sign of life) before
    it regenerates the token from its copy."""

    token_timeout_s: float
    node_up_s: float | None = None
    node_down_s: float | None = None
    link_up_s: float | None = None
    link_down_s: float | None = None
    outages: tuple[Outage, ...] = ()
    requests_from_down: str = "wait"
    #: with the parameter server: a round with an agent that is down is ``skip``-ped (an
    #: iteration without an update, ``token_timeout_s`` long) or ``wait``-s for it
    down_clients: str = "skip"

    @property
    def node_churn(self) -> bool:
        """Whether nodes fail by churn (a mean up time of inf: they never do)."""
        return self.node_up_s is not None and math.isfinite(self.node_up_s)

    @property
    def link_churn(self) -> bool:
        """Whether links fail (a mean up time of inf: they never do)."""
        return self.link_up_s is not None and math.isfinite(self.link_up_s)


class Liveness:
    """The live state of a run's nodes and links, changed by SimPy processes (:meth:`start`).

    ``node_up[k]`` and ``edge_up[e]`` (e a CSR entry of the graph; both directions of an edge change
    together) are 1 while up; ``live_degree[k]`` counts k's neighbours j with ``node_up[j]`` over
    links that are up (whatever k's own state); ``node_down_at[k]`` and ``edge_down_at[e]`` are the
    last times they went down (−inf: never). ``all_down_seconds`` adds up the time during which every
    node was down (with ``all_down_since`` the start of the current such period, or None).
    """

    def __init__(self, graph: IndexedGraph, failures: Failures, rng: np.random.Generator) -> None:
        n = graph.size
        self.graph = graph
        self.failures = failures
        self.rng = rng
        self.node_up = bytearray(b"\x01") * n
        self.edge_up = bytearray(b"\x01") * int(graph.indices.size)
        self.live_degree = array("q", graph.degree.tolist())
        self.node_down_at = [-math.inf] * n
        self.edge_down_at = [-math.inf] * int(graph.indices.size)
        self.up_count = n
        self.last_link_down = -math.inf  # the last time any link went down
        self.all_down_seconds = 0.0
        self.all_down_since: float | None = None
        self._reasons = [0] * n  # what holds each node down: its churn, outages
        self._indptr = graph.indptr.tolist()
        self._indices = graph.indices.tolist()
        self._mirror = _mirror_entries(graph)
        self._waiting: dict[int, list[simpy.Event]] = {}
        self._node_changes: list[float] | None = None  # each node's next churn change
        self._outage_starts: dict[int, list[float]] = {}
        for outage in failures.outages:
            self._outage_starts.setdefault(outage.node, []).append(outage.from_s)
        for starts in self._outage_starts.values():
            starts.sort()
        self.view = NodeView(
            up=np.frombuffer(self.node_up, dtype=np.bool_),
            edge_up=np.frombuffer(self.edge_up, dtype=np.bool_),
            live_degree=np.frombuffer(self.live_degree, dtype=np.int64),
        )

    # ------------------------------------------------------------------ the processes

    def start(self, env: simpy.Environment) -> None:
        """Start the failure processes in ``env``: the nodes' churn, the links' churn (one process
        each, with a generator of its own spawned from the failures stream), then one process per
        scripted outage."""
        f = self.failures
        node_rng, link_rng = self.rng.spawn(2)
        if f.node_churn:
            assert f.node_up_s is not None and f.node_down_s is not None
            self._node_changes = [math.inf] * self.graph.size
            env.process(self._churn(env, node_rng, self.graph.size, f.node_up_s, f.node_down_s,
                                    self._node_down, self._node_back, self._node_changes))  # fmt: skip
        for outage in f.outages:
            env.process(self._outage(env, outage))
        if f.link_churn:
            assert f.link_up_s is not None and f.link_down_s is not None
            lower = [e for e in range(len(self._indices)) if self._mirror[e] > e]  # one per edge

            def link_down(i: int, now: float) -> None:
                self._link(lower[i], False, now)

            def link_back(i: int, now: float) -> None:
                self._link(lower[i], True, now)

            env.process(self._churn(env, link_rng, len(lower), f.link_up_s, f.link_down_s,
                                    link_down, link_back, [math.inf] * len(lower)))  # fmt: skip

    def _churn(
        self,
        env: simpy.Environment,
        rng: np.random.Generator,
        count: int,
        up_s: float,
        down_s: float,
        go_down: Callable[[int, float], None],
        come_back: Callable[[int, float], None],
        changes: list[float],
    ) -> Generator[simpy.Event, None, None]:
        """``count`` items alternating up (exponential, mean ``up_s``) and down (mean ``down_s``),
        all up at time 0: one process taking their changes in time order from a heap (one SimPy
        event per change), each item's next period drawn when the current one begins;
        ``changes[i]`` is item i's next change (known a period ahead)."""
        first = rng.exponential(up_s, count).tolist()
        changes[:] = first
        heap = list(zip(first, range(count), strict=True))
        heapq.heapify(heap)
        down = bytearray(count)
        exponential = rng.exponential
        while heap:
            at, i = heap[0]
            if at > env.now:
                yield env.timeout(at - env.now)
            if down[i]:
                down[i] = 0
                come_back(i, env.now)
                period = exponential(up_s)
            else:
                down[i] = 1
                go_down(i, env.now)
                period = exponential(down_s)
            changes[i] = at + period
            heapq.heapreplace(heap, (at + period, i))

    def _outage(self, env: simpy.Environment, outage: Outage) -> Generator[simpy.Event, None, None]:
        if outage.from_s > 0:
            yield env.timeout(outage.from_s)
        self._node_down(outage.node, env.now)
        yield env.timeout(outage.to_s - outage.from_s)
        self._node_back(outage.node, env.now)

    # ------------------------------------------------------------------ state changes

    def _node_down(self, k: int, now: float) -> None:
        self._reasons[k] += 1
        if self._reasons[k] > 1:
            return  # already down
        self.node_up[k] = 0
        self.node_down_at[k] = now
        self._neighbours_see(k, -1)
        self.up_count -= 1
        if self.up_count == 0:
            self.all_down_since = now

    def _node_back(self, k: int, now: float) -> None:
        self._reasons[k] -= 1
        if self._reasons[k] > 0:
            return  # still held down
        self.node_up[k] = 1
        self._neighbours_see(k, 1)
        if self.up_count == 0 and self.all_down_since is not None:
            self.all_down_seconds += now - self.all_down_since
            self.all_down_since = None
        self.up_count += 1
        for event in self._waiting.pop(k, ()):
            event.succeed()

    def _neighbours_see(self, k: int, change: int) -> None:
        """k went down (−1) or came back (+1): its neighbours over links that are up see it."""
        edge_up, live, indices = self.edge_up, self.live_degree, self._indices
        for e in range(self._indptr[k], self._indptr[k + 1]):
            if edge_up[e]:
                live[indices[e]] += change

    def _link(self, e: int, up: bool, now: float) -> None:
        back = self._mirror[e]
        self.edge_up[e] = self.edge_up[back] = int(up)
        if not up:
            self.edge_down_at[e] = self.edge_down_at[back] = now
            self.last_link_down = now
        change = 1 if up else -1
        j = self._indices[e]  # entry e is k → j; its mirror j → k
        k = self._indices[back]
        if self.node_up[j]:
            self.live_degree[k] += change
        if self.node_up[k]:
            self.live_degree[j] += change

    def view_with(self, other: NodeView | None) -> NodeView:
        """The view a walker reads: this liveness, with the scores and weights of ``other`` (a
        protocol's)."""
        if other is None:
            return self.view
        return dataclasses.replace(self.view, scores=other.scores, weights=other.weights)

    # ------------------------------------------------------------------ what the engine asks

    def next_down(self, k: int, now: float) -> float:
        """The next time after ``now`` at which node k, up now, goes down (inf: never): its churn's
        next change, drawn a period ahead, or the start of its next scripted outage. The engine
        advances the clock to it in one step instead of event after event."""
        at = self._node_changes[k] if self._node_changes is not None else math.inf
        starts = self._outage_starts.get(k)
        if starts:
            i = bisect.bisect_right(starts, now)
            if i < len(starts):
                at = min(at, starts[i])
        return at

    def adjacent(self, k: int, j: int) -> bool:
        """Whether j is a neighbour of k over a link that is up."""
        e = self.edge_entry(k, j)
        return e < self._indptr[k + 1] and self._indices[e] == j and bool(self.edge_up[e])

    def when_up(self, env: simpy.Environment, k: int) -> simpy.Event:
        """An event that fires when node k is up (at once if it is)."""
        event = env.event()
        if self.node_up[k]:
            event.succeed()
        else:
            self._waiting.setdefault(k, []).append(event)
        return event

    def edge_entry(self, k: int, j: int) -> int:
        """The CSR entry of the edge k → j (rows are sorted)."""
        return bisect.bisect_left(self._indices, j, self._indptr[k], self._indptr[k + 1])

    def all_down_until(self, now: float) -> float:
        """Seconds during which every node was down, up to ``now`` (a period still going on
        counted up to ``now``)."""
        if self.all_down_since is None:
            return self.all_down_seconds
        return self.all_down_seconds + max(now - self.all_down_since, 0.0)


def _mirror_entries(graph: IndexedGraph) -> list[int]:
    """For each CSR entry k → j, the entry j → k: the entries are sorted by (row, column), so the
    mirror is a search of (j, k) among them."""
    n = graph.size
    rows = np.repeat(np.arange(n, dtype=np.int64), graph.degree)
    cols = graph.indices.astype(np.int64)
    keys = rows * n + cols
    return np.searchsorted(keys, cols * n + rows).tolist()
