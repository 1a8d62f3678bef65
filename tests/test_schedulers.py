"""Every scheduler kind's faces agree with one another: the transition matrix and stationary
distribution (theory, exact computations), the one-step sampler (event engine), the batched sampler
(vectorised engine) and the jump chain (cover-time Monte Carlo). Plus the extension points: a kind
registered in one line runs in both engines, and a :class:`NodeView` reaches the sampler.

Statistical checks use fixed seeds and tolerances that do not depend on the seed: a chi-square
goodness-of-fit p-value above 1e-4 per row, or |mean − exact| < 5·SE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import networkx as nx
import numpy as np
import pytest
from scipy.stats import chisquare

import gossipsim as gs
from gossipsim.engine.token import run_token
from gossipsim.errors import ConfigError
from gossipsim.families import Beta
from gossipsim.scheduling import (
    CSR,
    SCHEDULER_KINDS,
    SCHEDULERS,
    UNIFORM_BLOCK,
    IndexedGraph,
    MetropolisHastings,
    NodeView,
    Scheduler,
    Walker,
    check_scheduler,
    register,
    scheduler_for,
    stationary_distribution,
    transition_matrix,
    unregister,
)
from gossipsim.scheduling.base import machine_csr, uniform_blocks

BUILT_IN = ("metropolis-hastings", "simple-random-walk", "uniform", "round-robin")
#: kinds that read the protocol's state: the server's client selection
#: (tests/test_client_selection.py) and the importance-weighted walks (tests/test_weighted_walk.py)
STATE_KINDS = ("ksd", "hip")
WEIGHTED = ("ksd-walk", "hip-walk")
AVOID = "test-avoid-down"


class AvoidDown(Scheduler):
    """Metropolis-Hastings that never passes the token to a node that is down (the holder keeps it
    instead): a scheduler reading the :class:`NodeView`, for the tests of the extension point."""

    kind = AVOID
    description = "Metropolis-Hastings that never moves to a node that is down (tests only)"
    kernel = "batched-step"  # its step moves a batch exactly as its sampler moves one walk

    def edge_weights(self, g: IndexedGraph, view: NodeView | None = None) -> np.ndarray:
        w = MetropolisHastings().edge_weights(g)
        if view is not None and view.up is not None:
            w = w * view.up[g.indices]
        return w

    def sampler(
        self, g: IndexedGraph, rng: np.random.Generator, view: NodeView | None = None
    ) -> Callable[[int], int]:
        indptr, indices, deg = machine_csr(g)
        buf, pos, refill = uniform_blocks(rng)
        up = view.up if view is not None and view.up is not None else np.ones(g.size, dtype=bool)

        def avoid_down(k: int) -> int:
            if pos[0] >= UNIFORM_BLOCK:
                refill()
            i = pos[0]
            pos[0] = i + 1
            d = deg[k]
            j = indices[indptr[k] + int(buf[0][i] * d)]
            if up[j] and buf[1][i] * deg[j] < d:
                return j
            return k

        return avoid_down

    def step(
        self,
        positions: np.ndarray,
        u: np.ndarray,
        v: np.ndarray,
        csr: CSR,
        view: NodeView | None = None,
    ) -> np.ndarray:
        moved = MetropolisHastings().step(positions, u, v, csr)
        if view is None or view.up is None:
            return moved
        return np.where(view.up[moved], moved, positions)


@pytest.fixture
def avoid_down() -> Iterator[type[AvoidDown]]:
    register(AvoidDown)  # the one line that makes a kind known to scenarios, the CLI and engines
    try:
        yield AvoidDown
    finally:
        unregister(AVOID)


def irregular() -> IndexedGraph:
    """8 nodes, degrees 1..5 (a pendant, a triangle, a 4-cycle)."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 6), (6, 3), (6, 7), (2, 5), (1, 6)]
    return IndexedGraph.from_networkx(nx.Graph(edges))


GRAPHS: dict[str, Callable[[], IndexedGraph]] = {
    "lollipop": lambda: IndexedGraph.from_networkx(nx.lollipop_graph(4, 3)),
    "star": lambda: IndexedGraph.from_networkx(nx.star_graph(5)),
    "irregular": irregular,
}


def down(n: int, *nodes: int) -> NodeView:
    up = np.ones(n, dtype=bool)
    up[list(nodes)] = False
    return NodeView(up=up)


# (kind, graph, view) cases: every built-in kind without a view (they ignore it) and the test kind
# with node 2 down (and with every node up, where it is Metropolis-Hastings)
CASES = [(kind, name, False) for kind in BUILT_IN for name in GRAPHS] + [
    (AVOID, name, with_view) for name in ("lollipop", "irregular") for with_view in (True, False)
]
IDS = [f"{k}-{g}{'-view' if v else ''}" for k, g, v in CASES]


def setup(kind: str, name: str, with_view: bool) -> tuple[IndexedGraph, Scheduler, NodeView | None]:
    g = GRAPHS[name]()
    view = down(g.size, 2) if with_view else None
    return g, scheduler_for(kind), view


@pytest.mark.usefixtures("avoid_down")
@pytest.mark.parametrize(("kind", "name", "with_view"), CASES, ids=IDS)
def test_transition_matrix_is_stochastic_and_stationary_is_left_eigenvector(
    kind: str, name: str, with_view: bool
) -> None:
    g, sched, view = setup(kind, name, with_view)
    p = sched.transition_matrix(g, view).toarray()
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    pi = sched.stationary(g, view)
    assert np.all(pi >= 0) and pi.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
    # the module-level functions are the scheduler's
    np.testing.assert_array_equal(transition_matrix(g, kind, view).toarray(), p)
    np.testing.assert_array_equal(stationary_distribution(g, kind, view), pi)
    if view is not None and view.up is not None:  # MH restricted to the up nodes: uniform on them
        expected = np.where(view.up, 1.0 / view.up.sum(), 0.0)
        np.testing.assert_allclose(pi, expected, atol=1e-12)


@pytest.mark.usefixtures("avoid_down")
@pytest.mark.parametrize(("kind", "name", "with_view"), CASES, ids=IDS)
def test_one_step_sampler_matches_transition_matrix(kind: str, name: str, with_view: bool) -> None:
    """Every row k: 20,000 calls ``next(k)``; zero entries never drawn, the others by chi-square."""
    g, sched, view = setup(kind, name, with_view)
    p = sched.transition_matrix(g, view).toarray()
    step = Walker(g, kind, np.random.default_rng(3), view).next
    draws = 20_000
    for k in range(g.size):
        counts = np.bincount([step(k) for _ in range(draws)], minlength=g.size)
        assert counts[p[k] == 0].sum() == 0, (k, counts, p[k])
        nz = p[k] > 0
        if nz.sum() > 1:
            assert chisquare(counts[nz], draws * p[k, nz]).pvalue > 1e-4, (k, counts, p[k])


GRAPHS_EXACT = {
    **GRAPHS,
    "karate": lambda: IndexedGraph.from_networkx(nx.karate_club_graph()),
    "rr1000": lambda: IndexedGraph.from_networkx(nx.random_regular_graph(3, 1000, seed=1)),
}


@pytest.mark.usefixtures("avoid_down")
@pytest.mark.parametrize("name", list(GRAPHS_EXACT))
@pytest.mark.parametrize("kind", [*BUILT_IN, AVOID])
def test_batched_sampler_equals_one_step_sampler(kind: str, name: str) -> None:
    """Given the uniforms the one-step sampler reads (blocks of 8,192 u, then 8,192 v, from the same
    seed), the batched sampler returns the same next holder for every hop, bit for bit."""
    g = GRAPHS_EXACT[name]()
    sched = scheduler_for(kind)
    view = down(g.size, 2, 5) if kind == AVOID else None
    hops = 2 * UNIFORM_BLOCK + 1000  # three blocks
    positions = np.random.default_rng(9).integers(0, g.size, size=hops)
    step = sched.sampler(g, np.random.default_rng(4), view)
    one = np.array([step(k) for k in positions.tolist()])
    rng = np.random.default_rng(4)
    blocks = [(rng.random(UNIFORM_BLOCK), rng.random(UNIFORM_BLOCK)) for _ in range(3)]
    u = np.concatenate([b[0] for b in blocks])[:hops]
    v = np.concatenate([b[1] for b in blocks])[:hops]
    batched = sched.step(positions, u, v, g.csr, view)
    np.testing.assert_array_equal(batched, one)
    assert batched.dtype == np.int64
    if not sched.reads_v:  # then v must not matter
        np.testing.assert_array_equal(sched.step(positions, u, 1.0 - v, g.csr, view), one)


@pytest.mark.usefixtures("avoid_down")
@pytest.mark.parametrize(("kind", "name", "with_view"), CASES, ids=IDS)
def test_jump_chain_matches_transition_matrix(kind: str, name: str, with_view: bool) -> None:
    """The Monte Carlo's jump chain: from k the token stays Geometric(1 − P(k, k)) slots and then
    moves to j ≠ k with probability P(k, j)/(1 − P(k, k)); for the uniform scheduler every slot's
    holder is drawn from the row of P (the holder included)."""
    g, sched, view = setup(kind, name, with_view)
    p = sched.transition_matrix(g, view).toarray()
    chain = sched.jump_chain(g, view)
    rng = np.random.default_rng(5)
    draws = 20_000
    for k in range(g.size):
        pos = np.full(draws, k, dtype=np.int64)
        hold = chain.hold(rng, pos)
        dest = chain.dest(rng, pos)
        counts = np.bincount(dest, minlength=g.size)
        if chain.mode == "uniform":
            assert hold is None
            target = p[k]
        else:
            stay = p[k, k]
            target = p[k].copy()
            target[k] = 0.0
            target /= 1.0 - stay
            if hold is None:
                assert stay < 1e-12
            else:
                se = np.sqrt(stay) / (1.0 - stay) / np.sqrt(draws)  # sd of Geometric(1 − stay)
                assert abs(hold.mean() - 1.0 / (1.0 - stay)) < 5 * se + 1e-12, (k, hold.mean())
        assert counts[target == 0].sum() == 0
        nz = target > 0
        if nz.sum() > 1:
            assert chisquare(counts[nz], draws * target[nz]).pvalue > 1e-4, (k, counts, target)


# --------------------------------------------------------------------------- the registry


def test_registry_lists_the_built_in_kinds() -> None:
    # kinds of one's own that other tests of the same worker imported by their path are not built in
    built_in = {kind for kind in SCHEDULER_KINDS if ":" not in kind}
    assert built_in == set(BUILT_IN + STATE_KINDS + WEIGHTED)
    assert {kind for kind in SCHEDULERS if ":" not in kind} == built_in
    for kind, cls in SCHEDULERS.items():
        assert cls.kind == kind and SCHEDULER_KINDS[kind] == cls.description
        assert isinstance(scheduler_for(kind), cls)
    with pytest.raises(ConfigError, match="scheduler.kind"):
        scheduler_for("teleport")
    with pytest.raises(ConfigError) as err:
        check_scheduler("teleport", "--scheduler")
    assert err.value.key == "--scheduler"


def test_a_kind_cannot_be_registered_twice() -> None:
    class Other(MetropolisHastings):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register(Other)
    assert SCHEDULERS["metropolis-hastings"] is MetropolisHastings


def test_a_registered_kind_runs_in_both_engines_with_identical_tables(avoid_down) -> None:
    """One ``register`` line: scenarios accept the kind, and the event engine (one-step sampler) and
    the vectorised engine (batched sampler) realise the same walks from the same seeds."""
    assert AVOID in SCHEDULER_KINDS
    raw: dict[str, Any] = {
        "scenario": {"name": "x", "seed": 3, "runs": 20, "iterations": 300},
        "topology": {"kind": "karate"},
        "model": {"kind": "beta-bernoulli"},
        "data": {"points_per_node": 5},
        "scheduler": {"kind": AVOID, "start": "stationary"},
        "metrics": {"record_every": 10},
    }
    event = gs.run(raw, engine="event")
    fast = gs.run(raw, engine="vectorized")
    assert event.runs.equals(fast.runs) and event.metrics.equals(fast.metrics)
    # with every node up the kind is Metropolis-Hastings: the same walks as that kind
    raw["scheduler"]["kind"] = "metropolis-hastings"
    assert gs.run(raw, engine="event").metrics.equals(event.metrics)


# --------------------------------------------------------------------------- the node view


class Churn:
    """Wraps a protocol; takes node ``node`` down at slot ``at`` by changing the view in place, as a
    churn process would."""

    def __init__(self, inner: Any, view: NodeView, node: int, at: int) -> None:
        self.inner, self.view, self.node, self.at = inner, view, node, at

    def on_token(self, holder: int, slot: int) -> Any:
        if slot == self.at:
            assert self.view.up is not None
            self.view.up[self.node] = False
        return self.inner.on_token(holder, slot)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_scheduler_reads_the_live_node_view_in_the_event_engine(avoid_down) -> None:
    g = IndexedGraph.from_networkx(nx.karate_club_graph())
    view = NodeView(up=np.ones(g.size, dtype=bool))
    node, at = 0, 2000  # the hub: visited often before it goes down
    walker = Walker(g, AVOID, np.random.default_rng(8), view)
    factors = np.random.default_rng(1).integers(0, 100, size=(g.size, 2)).astype(float)
    protocol = Churn(gs.ConjugateGFVL(Beta.natural(2, 2), factors), view, node, at)
    rec = run_token(walker=walker, protocol=protocol, start=5, iterations=20_000)  # type: ignore[arg-type]
    holders = rec.holders
    assert np.count_nonzero(holders[:at] == node) > 50
    # once the token has left the down node it never comes back
    left = at + int(np.argmax(holders[at:] != node))
    assert not np.any(holders[left:] == node)
    rest = nx.karate_club_graph()
    rest.remove_node(node)  # the walk goes on over the rest of the hub's component
    reachable = nx.node_connected_component(rest, int(holders[left]))
    assert set(np.unique(holders[left:]).tolist()) == reachable
    # built-in kinds accept a view and ignore it
    a = Walker(g, "metropolis-hastings", np.random.default_rng(8), down(g.size, 0))
    b = Walker(g, "metropolis-hastings", np.random.default_rng(8))
    path_a, path_b = [5], [5]
    for _ in range(1000):
        path_a.append(a.next(path_a[-1]))
        path_b.append(b.next(path_b[-1]))
    assert path_a == path_b
