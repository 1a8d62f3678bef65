"""Selection on the decentralised walk: the importance-weighted Metropolis-Hastings walk
(``ksd-walk``, ``hip-walk``, :mod:`gossipsim.scheduling.weighted`), and no exact value printed for
a schedule that depends on the protocol's state (the theory trap).

Statistical checks use fixed seeds and tolerances from the sampling law, never tuned: a chi-square
p-value above 1e-4 per row for one-step draws; |z| < 4 for the visit share of every node in one
long walk, with the standard error from the chain's exact asymptotic variance (the fundamental
matrix); |mean − exact| < 4·SE for independent Monte Carlo runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import networkx as nx
import numpy as np
import pytest
from scipy.stats import chisquare

import gossipsim as gs
import gossipsim.cover as ct
from gossipsim.cli import main
from gossipsim.engine.token import run_token
from gossipsim.errors import ConfigError
from gossipsim.families import Beta
from gossipsim.protocols.wrapped import Wrapped
from gossipsim.scheduling import (
    SCHEDULER_KINDS,
    UNIFORM_BLOCK,
    IndexedGraph,
    MetropolisHastings,
    NodeView,
    Scheduler,
    Walker,
    register,
    scheduler_for,
    unregister,
)
from gossipsim.scheduling.kinds import _live_entries
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_world
from tests.helpers import validate_error
from tests.plugins import PlainGFVL

WEIGHTED = ("ksd-walk", "hip-walk")
STAND_IN = "tests.test_weighted_walk:FixedWeightsGFVL"


def irregular() -> IndexedGraph:
    """8 nodes, degrees 1..5 (a pendant, a triangle, a 4-cycle), as in tests/test_schedulers.py."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 6), (6, 3), (6, 7), (2, 5), (1, 6)]
    return IndexedGraph.from_networkx(nx.Graph(edges))


#: weights spanning a factor of 16, so that both sides of min(1, ·) are taken
W8 = np.array([1.0, 3.0, 0.5, 2.0, 4.0, 1.5, 0.25, 2.5])


def reference_matrix(g: IndexedGraph, w: np.ndarray, view: NodeView | None = None) -> np.ndarray:
    """The rule written out edge by edge (independently of the scheduler's vectorised code):
    propose 1/d(k), accept 0 if w_j = 0, 1 if w_k = 0 < w_j, else min(1, w_j d(k)/(w_k d(j)));
    under failures d is the live degree and only live entries are proposed."""
    n = g.size
    if view is not None and view.has_failures:
        live, deg = _live_entries(g, view)
    else:
        live, deg = np.ones(g.indices.size, bool), g.degree.astype(float)
    p = np.zeros((n, n))
    for k in range(n):
        for e in range(g.indptr[k], g.indptr[k + 1]):
            j = int(g.indices[e])
            if not live[e]:
                continue
            if w[j] == 0:
                accept = 0.0
            elif w[k] == 0:
                accept = 1.0
            else:
                accept = min(1.0, w[j] * deg[k] / (w[k] * deg[j]))
            p[k, j] += accept / deg[k]
        p[k, k] += 1.0 - p[k].sum()
    return p


def asymptotic_sd(p: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Per node i, the standard deviation σ_i of √n·(share of visits to i − π_i) for the chain P
    started stationary: σ² = 2⟨f̄, Z f̄⟩_π − ⟨f̄, f̄⟩_π with f̄ = 1{i} − π_i and the fundamental
    matrix Z = (I − P + 1πᵀ)⁻¹ (Aldous & Fill ch. 2; Kemeny & Snell)."""
    n = pi.size
    z = np.linalg.inv(np.eye(n) - p + pi[None, :])
    var = np.empty(n)
    for i in range(n):
        f = -np.full(n, pi[i])
        f[i] += 1.0
        var[i] = 2.0 * np.sum(pi * f * (z @ f)) - np.sum(pi * f * f)
    return np.sqrt(var)


def visit_z_scores(
    g: IndexedGraph, kind: str, view: NodeView, hops: int, seed: int, nodes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One walk of ``hops`` hops from a stationary start (over ``nodes``, an irreducible class):
    the visit shares, π and the z-score of each share."""
    sched = scheduler_for(kind)
    p = sched.transition_matrix(g, view).toarray()[np.ix_(nodes, nodes)]
    pi = sched.stationary(g, view)[nodes]
    pi = pi / pi.sum()
    rng = np.random.default_rng(seed)
    step = Walker(g, kind, rng, view).next
    k = int(nodes[rng.choice(nodes.size, p=pi)])
    counts = np.zeros(g.size, dtype=np.int64)
    for _ in range(hops):
        k = step(k)
        counts[k] += 1
    share = counts[nodes] / hops
    z = (share - pi) / (asymptotic_sd(p, pi) / np.sqrt(hops))
    assert counts.sum() == counts[nodes].sum()  # never left the class
    return share, pi, z


# --------------------------------------------------------------------------- the stand-in protocol


class Published(Wrapped):
    """Wraps a protocol; publishes fixed selection weights through ``node_view()`` (what the
    protocol side of selection on the walk will do with live indicators)."""

    def __init__(self, protocol: Any, weights: np.ndarray) -> None:
        super().__init__(protocol)
        self.view = NodeView(weights=weights)

    def on_token(self, holder: int, slot: int) -> Any:
        return self.protocol.on_token(holder, slot)

    def node_view(self) -> NodeView:
        return self.view


def stand_in_weights(nodes: int) -> np.ndarray:
    return 1.0 + (np.arange(nodes) % 4).astype(float)


class FixedWeightsGFVL(PlainGFVL):
    """G-FVL (event engine) that publishes the fixed weights :func:`stand_in_weights` (tests only)."""

    name = STAND_IN
    description = "G-FVL publishing fixed selection weights 1 + k mod 4 (tests only)"
    #: it publishes weights for either indicator (what a protocol of one's own declares)
    selection_indicators = frozenset({"ksd", "hip"})

    def build(self, request: Any) -> Any:
        return Published(super().build(request), stand_in_weights(request.nodes))


def scenario(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "scenario": {"name": "w", "seed": 5, "runs": 3, "iterations": 300},
        "topology": {"kind": "ring", "nodes": 8},
        "model": {"kind": "beta-bernoulli"},
        "data": {"points_per_node": 5},
        "protocol": {"kind": STAND_IN},
        "scheduler": {"kind": "ksd-walk"},
        "metrics": {"record_every": 10},
        "unlearning": [{"node": 3, "at_iteration": 50}],
    }
    for key, value in over.items():
        raw[key] = {**raw.get(key, {}), **value}
    return raw


# --------------------------------------------------------------------------- the kinds


@pytest.mark.parametrize("kind", WEIGHTED)
def test_the_kinds_declare_a_state_dependent_event_engine_walk(kind: str) -> None:
    cls = type(scheduler_for(kind))
    assert cls.reads_state and cls.reads_liveness
    assert cls.kernel is None and cls.stay_kernel is None
    assert cls.indicator == kind.removesuffix("-walk")
    assert "\n" not in SCHEDULER_KINDS[kind] and len(SCHEDULER_KINDS[kind]) < 120
    assert not cls.unmet_needs()


@pytest.mark.parametrize("kind", WEIGHTED)
def test_exact_matrix_is_the_rule_and_its_stationary_distribution_is_w(kind: str) -> None:
    g = irregular()
    view = NodeView(weights=W8.copy())
    sched = scheduler_for(kind)
    p = sched.transition_matrix(g, view).toarray()
    np.testing.assert_allclose(p, reference_matrix(g, W8), atol=1e-15)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    pi = sched.stationary(g, view)
    np.testing.assert_allclose(pi, W8 / W8.sum(), atol=1e-15)  # the closed form
    np.testing.assert_allclose(pi @ p, pi, atol=1e-14)
    np.testing.assert_allclose(Scheduler.stationary(sched, g, view), pi, atol=1e-12)  # sparse solve
    flow = pi[:, None] * p  # detailed balance: π_k P(k, j) = π_j P(j, k)
    np.testing.assert_allclose(flow, flow.T, atol=1e-15)
    # the matrix is the one the view holds at that moment
    view.weights[4] = 40.0  # type: ignore[index]
    assert sched.stationary(g, view)[4] == pytest.approx(40.0 / (W8.sum() + 36.0))


def test_the_zero_cases() -> None:
    """w_j = 0: the proposal is rejected; w_k = 0 < w_j: accepted (P(k, j) = 1/deg(k))."""
    g = irregular()
    w = W8.copy()
    w[[2, 6]] = 0.0  # 2 and 6 are not neighbours
    p = scheduler_for("ksd-walk").transition_matrix(g, NodeView(weights=w)).toarray()
    np.testing.assert_allclose(p, reference_matrix(g, w), atol=1e-15)
    deg = g.degree
    for z in (2, 6):
        assert np.all(p[:, z][np.arange(g.size) != z] == 0.0)  # never entered
        for j in g.indices[g.indptr[z] : g.indptr[z + 1]]:
            assert p[z, j] == pytest.approx(1.0 / deg[z])  # left at the first proposal
        assert p[z, z] == pytest.approx(0.0, abs=1e-15)
    pi = scheduler_for("ksd-walk").stationary(g, NodeView(weights=w))
    assert pi[2] == pi[6] == 0.0
    np.testing.assert_allclose(pi @ p, pi, atol=1e-14)
    # the sampler: from a zero-weight node the token leaves at once and never comes back
    step = Walker(g, "ksd-walk", np.random.default_rng(2), NodeView(weights=w)).next
    path = [6]
    for _ in range(20_000):
        path.append(step(path[-1]))
    assert path[1] != 6 and 6 not in path[1:] and 2 not in path


def test_the_sampler_reads_u_then_v_blocks_with_the_documented_arithmetic() -> None:
    """Three blocks of 8,192 u then 8,192 v from the run's generator: the next holder is entry
    int(u·deg(k)) of row k, accepted when v·w_k·deg(j) < w_j·deg(k), bit for bit."""
    g = IndexedGraph.from_networkx(nx.karate_club_graph())
    w = np.random.default_rng(0).gamma(0.5, size=g.size)
    w[[3, 17]] = 0.0
    hops = 2 * UNIFORM_BLOCK + 1000
    positions = np.random.default_rng(9).integers(0, g.size, size=hops)
    step = Walker(g, "hip-walk", np.random.default_rng(4), NodeView(weights=w)).next
    got = np.array([step(k) for k in positions.tolist()])
    rng = np.random.default_rng(4)
    blocks = [(rng.random(UNIFORM_BLOCK), rng.random(UNIFORM_BLOCK)) for _ in range(3)]
    u = np.concatenate([b[0] for b in blocks])[:hops]
    v = np.concatenate([b[1] for b in blocks])[:hops]
    d = g.degree[positions]
    j = g.indices[g.indptr[positions] + (u * d).astype(np.int64)]
    want = np.where(v * w[positions] * g.degree[j] < w[j] * d, j, positions)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", WEIGHTED)
def test_one_step_sampler_matches_the_exact_matrix(kind: str) -> None:
    """Every row k: 20,000 calls next(k); zero entries never drawn, the others by chi-square."""
    g = irregular()
    view = NodeView(weights=W8.copy())
    p = scheduler_for(kind).transition_matrix(g, view).toarray()
    step = Walker(g, kind, np.random.default_rng(3), view).next
    draws = 20_000
    for k in range(g.size):
        counts = np.bincount([step(k) for _ in range(draws)], minlength=g.size)
        assert counts[p[k] == 0].sum() == 0, (k, counts, p[k])
        nz = p[k] > 0
        assert chisquare(counts[nz], draws * p[k, nz]).pvalue > 1e-4, (k, counts, p[k])


def test_the_sampler_reads_the_weights_in_place_at_every_hop() -> None:
    """The protocol changes NodeView.weights in place: the next hop sees it (node 4 given weight 0
    is never entered again; given back a weight, it is)."""
    g = irregular()
    w = W8.copy()
    step = Walker(g, "ksd-walk", np.random.default_rng(6), NodeView(weights=w)).next
    k = 3
    for _ in range(5_000):
        k = step(k)
    w[4] = 0.0
    if k == 4:
        k = step(k)
    path = [k]
    for _ in range(20_000):
        path.append(step(path[-1]))
    assert 4 not in path
    w[4] = 4.0
    for _ in range(20_000):
        path.append(step(path[-1]))
    assert 4 in path


def test_a_view_without_weights_is_one_line_naming_scheduler_kind() -> None:
    g = irregular()
    for view in (None, NodeView(), NodeView(up=np.ones(g.size, bool))):
        with pytest.raises(ConfigError) as err:
            Walker(g, "ksd-walk", np.random.default_rng(1), view)
        assert err.value.key == "scheduler.kind" and "\n" not in str(err.value)
        assert "'ksd-walk'" in str(err.value) and "publish" in str(err.value)
        with pytest.raises(ConfigError, match="scheduler.kind"):
            scheduler_for("hip-walk").transition_matrix(g, view)
    with pytest.raises(ConfigError, match="float NumPy array"):
        Walker(g, "ksd-walk", np.random.default_rng(1), NodeView(weights=[1.0] * g.size))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="non-negative"):
        scheduler_for("ksd-walk").stationary(g, NodeView(weights=-W8))


# --------------------------------------------------------------------------- under failures


def failing_view(g: IndexedGraph, w: np.ndarray, nodes: list[int], links: list[tuple[int, int]]):
    up = np.ones(g.size, dtype=bool)
    up[nodes] = False
    edge_up = np.ones(g.indices.size, dtype=bool)
    for a, b in links:
        for k, j in ((a, b), (b, a)):
            row = slice(g.indptr[k], g.indptr[k + 1])
            edge_up[g.indptr[k] + int(np.flatnonzero(g.indices[row] == j)[0])] = False
    view = NodeView(up=up, edge_up=edge_up, live_degree=np.zeros(g.size, np.int64), weights=w)
    _, deg = _live_entries(g, view)
    view.live_degree[:] = deg  # type: ignore[index]
    return view


def test_under_failures_the_walk_moves_over_the_live_graph_with_pi_w_on_each_part() -> None:
    """Node 6 down, links 2–5 and 3–4 down: live parts {0, 1, 2, 3} and {4, 5}, node 7 alone. The
    matrix is the rule over live neighbours and live degrees; w restricted to each part and
    normalised is stationary; the sampler matches the matrix row by row."""
    g = irregular()
    view = failing_view(g, W8.copy(), [6], [(2, 5), (3, 4)])
    assert view.has_failures
    sched = scheduler_for("ksd-walk")
    p = sched.transition_matrix(g, view).toarray()
    np.testing.assert_allclose(p, reference_matrix(g, W8, view), atol=1e-15)
    for part in ([0, 1, 2, 3], [4, 5], [7], [6]):
        pi = np.zeros(g.size)
        pi[part] = W8[part] / W8[part].sum()
        np.testing.assert_allclose(pi @ p, pi, atol=1e-14)
    assert p[7, 7] == 1.0 and p[6, 6] == 1.0  # no live neighbour / down: keeps the token
    step = Walker(g, "ksd-walk", np.random.default_rng(11), view).next
    draws = 20_000
    for k in range(g.size):
        if k == 6:  # a down node never holds the token (the engine regenerates it elsewhere): its
            continue  # row of the matrix keeps it, as metropolis-hastings's does
        counts = np.bincount([step(k) for _ in range(draws)], minlength=g.size)
        assert counts[p[k] == 0].sum() == 0, (k, counts, p[k])
        nz = p[k] > 0
        if nz.sum() > 1:
            assert chisquare(counts[nz], draws * p[k, nz]).pvalue > 1e-4, (k, counts, p[k])


# --------------------------------------------------------------------------- visit shares vs P


@pytest.mark.parametrize("case", ["no-failures", "failures"])
def test_a_long_walk_visits_every_node_in_proportion_to_its_weight(case: str) -> None:
    """400,000 hops from a stationary start: each node's visit share is P_k = w_k / Σ w within
    4 standard errors, the standard error from the chain's exact asymptotic variance. Under
    failures (node 2 down, link 3–4 down: live degrees differ from the degrees) the walk stays on
    the live nodes, and its shares are w restricted to them."""
    g = irregular()
    if case == "no-failures":
        view, nodes = NodeView(weights=W8.copy()), np.arange(g.size)
    else:
        view = failing_view(g, W8.copy(), [2], [(3, 4)])
        nodes = np.array([0, 1, 3, 4, 5, 6, 7])
    share, pi, z = visit_z_scores(g, "ksd-walk", view, 400_000, seed=21, nodes=nodes)
    print(f"{case}: share {np.round(share, 4)}; P {np.round(pi, 4)}; z {np.round(z, 2)}")
    assert np.all(np.abs(z) < 4.0), (share, pi, z)


# --------------------------------------------------------------------------- exact values, fixed w


LOLLIPOP_W = np.array([1.0, 2.0, 3.0, 0.5, 4.0, 1.0, 2.0])


def lollipop() -> IndexedGraph:
    return IndexedGraph.from_networkx(nx.lollipop_graph(4, 3))


def test_exact_hitting_times_for_fixed_weights_are_the_brute_force_solve() -> None:
    """hitting_times_to with view=NodeView(weights=w) solves the first-step equations of the
    weighted walk: the dense solve of (I − P)|_{V∖k} h = 1 with P written out edge by edge; the
    all-pairs matrix, the next-visit latency and Matthews' bounds are of the same walk."""
    g = lollipop()
    view = NodeView(weights=LOLLIPOP_W)
    p = reference_matrix(g, LOLLIPOP_W)
    all_pairs = ct.all_pairs_hitting_times(g, "ksd-walk", view=view)
    for k in range(g.size):
        others = np.flatnonzero(np.arange(g.size) != k)
        want = np.zeros(g.size)
        want[others] = np.linalg.solve(np.eye(g.size - 1) - p[np.ix_(others, others)], np.ones(6))
        got = ct.hitting_times_to(g, k, "ksd-walk", view=view)
        np.testing.assert_allclose(got, want, rtol=1e-10)
        np.testing.assert_allclose(all_pairs[:, k], want, rtol=1e-8)
        pi = LOLLIPOP_W / LOLLIPOP_W.sum()
        assert ct.next_visit_latency(g, k, "hip-walk", view=view) == pytest.approx(1 + pi @ want)
    # not metropolis-hastings's values (the walk the view-less matrix would have been)
    assert not np.allclose(ct.hitting_times_to(g, 0, "metropolis-hastings"), got)
    cover = ct.exact_cover_moves_with_method(g, "ksd-walk", view=view)
    assert cover.method == "subset-chain"
    lo, hi = ct.matthews_bounds(g, "ksd-walk", view=view)
    assert lo <= cover.moves <= hi
    law = ct.removal_latency_law(g, 3, 10_000, "ksd-walk", view=view)
    assert law.mean == pytest.approx(1 + pi @ ct.hitting_times_to(g, 3, "ksd-walk", view=view))


def _monte_carlo(g: IndexedGraph, view: NodeView, runs: int, seed: int, target: int | None):
    """Per run from a stationary start: the moves until ``target`` is first held (cover: None)."""
    rng = np.random.default_rng(seed)
    step = Walker(g, "ksd-walk", rng, view).next
    pi = LOLLIPOP_W / LOLLIPOP_W.sum()
    out = np.empty(runs)
    for r in range(runs):
        k = int(rng.choice(g.size, p=pi))
        seen, moves = {k}, 0
        while (len(seen) < g.size) if target is None else (k != target):
            k = step(k)
            seen.add(k)
            moves += 1
        out[r] = moves
    return out


@pytest.mark.parametrize("what", ["hitting", "cover"])
def test_exact_values_for_fixed_weights_agree_with_the_simulated_walk(what: str) -> None:
    """2,000 independent walks of the sampler from a stationary start: the mean moves to hit node
    4 (the far end of the path) and to cover the graph are the exact values within 4 standard
    errors (the sample SE of independent runs)."""
    g = lollipop()
    view = NodeView(weights=LOLLIPOP_W)
    pi = LOLLIPOP_W / LOLLIPOP_W.sum()
    if what == "hitting":
        exact = float(pi @ ct.hitting_times_to(g, 4, "ksd-walk", view=view))
        samples = _monte_carlo(g, view, 2_000, seed=7, target=4)
    else:
        exact = ct.exact_cover_moves(g, "ksd-walk", "stationary", view=view)
        samples = _monte_carlo(g, view, 2_000, seed=8, target=None)
    se = samples.std(ddof=1) / np.sqrt(samples.size)
    z = (samples.mean() - exact) / se
    print(f"{what}: simulated {samples.mean():.3f} ± {se:.3f}, exact {exact:.3f}, z {z:.2f}")
    assert abs(z) < 4.0


def test_exact_values_need_positive_weights_and_a_connected_graph() -> None:
    g = lollipop()
    w = LOLLIPOP_W.copy()
    w[5] = 0.0
    with pytest.raises(ConfigError) as err:
        ct.hitting_times_to(g, 0, "ksd-walk", view=NodeView(weights=w))
    assert err.value.key == "weights" and "never entered" in str(err.value)
    # a graph that is not connected: refused as for metropolis-hastings (the same one line)
    two = nx.Graph([(0, 1), (1, 2), (3, 4)])
    for kind, view in (("metropolis-hastings", None), ("ksd-walk", NodeView(weights=np.ones(5)))):
        with pytest.raises(ConfigError) as err:
            ct.hitting_times_to(two, 0, kind, view=view)
        assert err.value.key == "graph" and "2 components" in str(err.value)


# --------------------------------------------------------------------------- the theory trap


class StateMH(MetropolisHastings):
    """Reads the protocol's state (reads_state) and, without it, falls back to Metropolis-Hastings:
    the walk whose exact values the theory used to print for a state-dependent schedule."""

    kind = "test-state-mh"
    description = "Metropolis-Hastings declaring reads_state (tests only)"
    reads_state = True


@pytest.fixture
def state_mh() -> Iterator[str]:
    register(StateMH)
    try:
        yield StateMH.kind
    finally:
        unregister(StateMH.kind)


NO_EXACT = "no exact value applies"


@pytest.mark.usefixtures("state_mh")
@pytest.mark.parametrize("kind", [*WEIGHTED, "test-state-mh"])
def test_every_exact_and_monte_carlo_function_refuses_a_state_dependent_walk_without_a_view(
    kind: str,
) -> None:
    g = IndexedGraph.from_networkx(nx.cycle_graph(6))  # closed forms exist for MH here
    calls = [
        lambda: ct.exact_cover_moves(g, kind),
        lambda: ct.exact_cover_moves_with_method(g, kind, method="closed-form"),
        lambda: ct.hitting_times_to(g, 0, kind),
        lambda: ct.next_visit_latency(g, 0, kind),
        lambda: ct.removal_latency_law(g, 0, 10, kind),
        lambda: ct.expected_removal_latency(g, 0, 10, kind),
        lambda: ct.all_pairs_hitting_times(g, kind),
        lambda: ct.matthews_bounds(g, kind),
        lambda: ct.monte_carlo_cover_moves(g, kind, runs=2, rng=1),
        lambda: ct.monte_carlo_unlearning_latency(g, 0, kind, runs=2, rng=1),
        lambda: ct.monte_carlo_removal_latency(g, 0, 5, kind, runs=2, rng=1),
    ]
    for call in calls:
        with pytest.raises(ConfigError) as err:
            call()
        assert err.value.key == "scheduler" and NO_EXACT in str(err.value), call
        assert "\n" not in str(err.value)


def _theory(raw: dict[str, Any]) -> dict[str, Any]:
    from gossipsim.measurement.theory import theory_for

    return theory_for(build_world(parse_scenario(raw)))


WALK_NUMBERS = (
    "exact_cover_moves",
    "matthews_cover_moves",
    "theoretical_cover_moves",
    "next_visit_latency",
)


@pytest.mark.usefixtures("state_mh")
@pytest.mark.parametrize("kind", [*WEIGHTED, "test-state-mh"])
def test_the_theory_says_no_exact_value_applies_and_prints_no_other_walks_numbers(kind) -> None:
    """On a ring (closed forms for cover and hitting exist for the view-less walk) the theory of
    a state-dependent schedule has a state_note and no cover figure; each request's expected
    removal latency is None with a method saying why."""
    raw = scenario(scheduler={"kind": kind})
    theory = _theory(raw)
    assert NO_EXACT in theory["state_note"] and kind in theory["state_note"]
    for key in WALK_NUMBERS:
        assert key not in theory, key
    (entry,) = theory["removal_latency"]
    assert entry["expected"] is None and entry["method"].startswith(f"not computed: {NO_EXACT}")
    assert entry["at_slot"] == 50
    # the same scenario with metropolis-hastings has them (the trap was to print these)
    mh = _theory(scenario(scheduler={"kind": "metropolis-hastings"}))
    assert "exact_cover_moves" in mh and mh["removal_latency"][0]["expected"] is not None
    assert "state_note" not in mh


def test_a_run_of_the_stand_in_protocol_walks_by_its_weights_and_prints_no_exact_value(
    tmp_path, capsys
) -> None:
    """The runner hands the protocol's node_view() to the Walker: a scenario whose protocol
    publishes weights runs (on the event engine); summary.json's theory and the printed summary
    say that no exact value applies; the cover figure's table has no exact or theory line; with
    [failures] too."""
    from gossipsim.cli.run import _print_summary
    from gossipsim.figures.cover_time import _cover_rows

    results = gs.run(scenario(), engine="auto")
    assert all(e.startswith("event") for e in results.engines.values())
    assert not len(results.failures)
    theory = results.theory["w"]
    assert NO_EXACT in theory["state_note"]
    assert not set(WALK_NUMBERS) & set(theory)
    _print_summary(results, tmp_path)
    out = capsys.readouterr().out
    assert f"note: {NO_EXACT}" in out and "exact expectation" not in out
    rows = _cover_rows(results.runs, {"variants": {"w": {"theory": theory}}})
    assert rows[["exact", "theory", "matthews_lo"]].isna().all().all()
    failing = scenario(failures={"node_up_s": 5.0, "node_down_s": 1.0, "token_timeout_s": 0.5})
    under = gs.run(failing)
    assert not len(under.failures) and NO_EXACT in under.theory["w"]["state_note"]


def test_the_event_engine_walks_by_the_published_weights() -> None:
    """run_token with the stand-in protocol: the holders are the sampler's walk for those weights
    (the same seed gives the same path through Walker.next)."""
    g = IndexedGraph.from_networkx(nx.karate_club_graph())
    factors = np.random.default_rng(1).integers(0, 10, size=(g.size, 2)).astype(float)
    protocol = Published(gs.ConjugateGFVL(Beta.natural(2, 2), factors), stand_in_weights(g.size))
    walker = Walker(g, "ksd-walk", np.random.default_rng(8), protocol.node_view())
    rec = run_token(walker=walker, protocol=protocol, start=5, iterations=3_000)  # type: ignore[arg-type]
    step = Walker(
        g, "ksd-walk", np.random.default_rng(8), NodeView(weights=stand_in_weights(34))
    ).next
    path = [5]
    for _ in range(2_999):
        path.append(step(path[-1]))
    np.testing.assert_array_equal(rec.holders, path)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kind", WEIGHTED)
def test_the_walk_kinds_with_the_server_point_to_the_server_kinds(kind: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_scenario(scenario(protocol={"architecture": "server"}, scheduler={"kind": kind}))
    assert err.value.key == "scheduler.kind" and "\n" not in str(err.value)
    assert f'kind = "{kind.removesuffix("-walk")}"' in str(err.value)


@pytest.mark.usefixtures("state_mh")
@pytest.mark.parametrize("kind", [*WEIGHTED, "test-state-mh"])
def test_a_stationary_start_is_refused(kind: str) -> None:
    """The start would be drawn from the view-less walk's stationary distribution: another walk's."""
    with pytest.raises(ConfigError) as err:
        parse_scenario(scenario(scheduler={"kind": kind, "start": "stationary"}))
    assert err.value.key == "scheduler.start" and "\n" not in str(err.value)


def test_a_protocol_computing_no_indicators_is_refused_in_one_line(tmp_path, capsys) -> None:
    raw = scenario(protocol={"kind": "tests.plugins:PlainGFVL"}, scenario={"runs": 1})
    err = validate_error(raw, tmp_path, capsys)
    assert "scheduler.kind" in err and "has none" in err


@pytest.mark.parametrize("command", ["covertime", "hitting"])
def test_the_walk_commands_refuse_a_state_dependent_walk_in_one_line(capsys, command) -> None:
    args = [command, "--topology", "ring", "--nodes", "8", "--scheduler", "ksd-walk", "--exact"]
    if command == "hitting":
        args += ["--node", "3"]
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--scheduler" in err and NO_EXACT in err


@pytest.mark.usefixtures("state_mh")
def test_the_figures_draw_no_exact_line_and_no_visit_deviation_for_a_state_dependent_walk(
    tmp_path,
) -> None:
    """The standard figures of a run of the stand-in protocol are drawn (the visits figure, which
    compares visit shares with the walk's stationary share, leaves the walk out: it has none)."""
    from gossipsim.api import standard_figures
    from gossipsim.figures.visits import has_fixed_stationary

    assert not has_fixed_stationary("ksd-walk") and not has_fixed_stationary("test-state-mh")
    assert has_fixed_stationary("metropolis-hastings")
    raw = scenario(scenario={"runs": 2, "iterations": 120})
    gs.run(raw, out=tmp_path / "w", make_plots=standard_figures("png", "mean"))
    drawn = {p.name for p in (tmp_path / "w" / "plots").iterdir()}
    assert "cover_time.png" in drawn and "visits.png" not in drawn
