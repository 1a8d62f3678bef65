"""Cover times, hitting times and unlearning latencies (gossipsim.cover).

Statistical checks use fixed seeds and tolerances from the standard error (|mean − exact| < 4·se, or
the exact value inside the 95% CI where stated), never tuned to the seed.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from gossipsim import cover as ct
from gossipsim.cover import hitting, montecarlo
from gossipsim.errors import ConfigError
from gossipsim.scheduling import IndexedGraph, Walker

MH = "metropolis-hastings"
SRW = "simple-random-walk"


def harmonic(n: int) -> float:
    return math.fsum(1.0 / i for i in range(1, n + 1))


def within_4se(samples: np.ndarray, exact: float) -> None:
    s = ct.summarize(samples)
    assert s["unfinished"] == 0
    assert abs(s["mean"] - exact) < 4 * s["se"], (s["mean"], exact, s["se"])


def irregular_graph() -> nx.Graph:
    """A fixed connected 8-node graph with degrees 1..5 (a pendant, a triangle, a 4-cycle)."""
    return nx.Graph(
        [(0, 1), (1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 6), (6, 3), (6, 7), (2, 5), (1, 6)]
    )


# --------------------------------------------------------------------------- exact cover time


def test_exact_complete_graph_closed_form_and_subset_chain() -> None:
    g = nx.complete_graph(10)
    expected = 9 * harmonic(9)
    assert expected == pytest.approx(25.460714285714, abs=1e-9)
    res = ct.exact_cover_moves_with_method(g)
    assert res.method == "closed-form" and "complete" in res.detail
    assert res.moves == pytest.approx(expected, abs=1e-9)
    for kind in (MH, SRW):
        chain = ct.exact_cover_moves(g, kind, method="subset-chain")
        assert chain == pytest.approx(expected, abs=1e-9)


def test_exact_ring_closed_form_and_subset_chain() -> None:
    g = nx.cycle_graph(10)
    res = ct.exact_cover_moves_with_method(g, SRW)
    assert res.method == "closed-form" and "cycle" in res.detail
    assert res.moves == 45.0
    for kind in (MH, SRW):
        assert ct.exact_cover_moves(g, kind, method="subset-chain") == pytest.approx(45.0, abs=1e-9)
        assert ct.exact_cover_moves(g, kind, start=3, method="subset-chain") == pytest.approx(
            45.0, abs=1e-9
        )


@pytest.mark.parametrize("kind", [MH, SRW])
@pytest.mark.parametrize("k_nodes", range(5, 11))
def test_exact_star_closed_form_matches_subset_chain(kind: str, k_nodes: int) -> None:
    g = nx.star_graph(k_nodes - 1)  # node 0 is the centre
    for start in ("uniform", "stationary", 0, 1, k_nodes - 1):
        res = ct.exact_cover_moves_with_method(g, kind, start)
        assert res.method == "closed-form" and "star" in res.detail
        chain = ct.exact_cover_moves(g, kind, start, method="subset-chain")
        assert res.moves == pytest.approx(chain, rel=1e-10, abs=1e-9), start


def test_exact_star_centre_not_first_node() -> None:
    g = nx.relabel_nodes(nx.star_graph(5), {0: 9})  # the centre is now the last node
    g = nx.Graph(sorted(g.edges))  # node order: 1, 9, 2, 3, 4, 5 -> centre at index 1
    for start in ("uniform", 1, 9):  # starts are node labels: 1 is a leaf, 9 the centre
        assert ct.exact_cover_moves(g, MH, start) == pytest.approx(
            ct.exact_cover_moves(g, MH, start, method="subset-chain"), rel=1e-10
        )
    assert ct.exact_cover_moves(g, MH, 9) == pytest.approx(ct.star_cover_moves(5, MH, "centre"))
    assert ct.exact_cover_moves(g, MH, 1) == pytest.approx(ct.star_cover_moves(5, MH, "leaf"))
    with pytest.raises(ConfigError, match="start: node 0 does not exist"):
        ct.exact_cover_moves(g, MH, 0)  # an index that is not a label


def test_exact_path_of_three_by_hand() -> None:
    g = nx.path_graph(3)  # 0 - 1 - 2
    # Simple random walk. From the centre: each leaf visit is new with probability 1/2 after the
    # first, so the number N of leaf visits is 1 + Geometric(1/2) (mean 3) and moves = 2N − 1 = 5.
    # From a leaf: 1 move to the centre, then N' ~ Geometric(1/2) (mean 2) leaf visits with returns
    # in between: moves = 1 + 2N' − 1 = 4. Uniform start: (5 + 4 + 4)/3 = 13/3.
    assert ct.exact_cover_moves(g, SRW, "uniform", method="subset-chain") == pytest.approx(13 / 3)
    assert ct.exact_cover_moves(g, SRW, 1, method="subset-chain") == pytest.approx(5.0)
    assert ct.exact_cover_moves(g, SRW, 0, method="subset-chain") == pytest.approx(4.0)
    # Metropolis-Hastings: the centre (degree 2) always passes to a uniform leaf; a leaf passes back
    # with probability min(1, 1/2) per slot (2 moves on average). At a leaf with the other leaf
    # still unseen: L = 2 + 1 + L/2, so L = 6. From the centre: 1 + L = 7; from a leaf:
    # 2 + 1 + L/2 = 6. Uniform start: (7 + 6 + 6)/3 = 19/3.
    assert ct.exact_cover_moves(g, MH, 1, method="subset-chain") == pytest.approx(7.0)
    assert ct.exact_cover_moves(g, MH, 0, method="subset-chain") == pytest.approx(6.0)
    assert ct.exact_cover_moves(g, MH, method="subset-chain") == pytest.approx(19 / 3)
    assert ct.exact_cover_moves(g, MH) == pytest.approx(19 / 3)  # star closed form, 2 leaves


def test_exact_uniform_scheduler_is_coupon_collector() -> None:
    for k_nodes in (1, 2, 7, 50):
        g = nx.path_graph(k_nodes)
        res = ct.exact_cover_moves_with_method(g, "uniform")
        assert res.moves == pytest.approx(k_nodes * harmonic(k_nodes) - 1)
    assert ct.exact_cover_moves(nx.path_graph(7), "uniform", method="subset-chain") == (
        pytest.approx(7 * harmonic(7) - 1)
    )


def test_exact_subset_chain_against_monte_carlo() -> None:
    g = irregular_graph()
    for kind in (MH, SRW):
        exact = ct.exact_cover_moves(g, kind)
        assert ct.exact_cover_moves_with_method(g, kind).method == "subset-chain"
        within_4se(ct.monte_carlo_cover_moves(g, kind, runs=20_000, rng=11), exact)
    exact = ct.exact_cover_moves(g, SRW, "stationary")
    within_4se(ct.monte_carlo_cover_moves(g, SRW, runs=20_000, rng=12, start="stationary"), exact)
    exact = ct.exact_cover_moves(g, MH, 7)
    within_4se(ct.monte_carlo_cover_moves(g, MH, runs=20_000, rng=13, start=7), exact)


def test_exact_accepts_indexed_graph_and_single_node() -> None:
    g = nx.cycle_graph(6)
    assert ct.exact_cover_moves(IndexedGraph.from_networkx(g)) == 15.0
    one = nx.empty_graph(1)
    assert ct.exact_cover_moves_with_method(one).moves == 0.0
    assert ct.monte_carlo_cover_moves(one, runs=3, rng=0).tolist() == [0.0, 0.0, 0.0]


# --------------------------------------------------------------------------- Monte Carlo cover


def test_monte_carlo_complete_graph() -> None:
    within_4se(
        ct.monte_carlo_cover_moves(nx.complete_graph(10), runs=20_000, rng=1), 9 * harmonic(9)
    )


def test_monte_carlo_ring() -> None:
    within_4se(ct.monte_carlo_cover_moves(nx.cycle_graph(10), SRW, runs=20_000, rng=2), 45.0)


def test_monte_carlo_star_metropolis_hastings() -> None:
    g = nx.star_graph(9)
    exact = ct.exact_cover_moves(g, MH)
    within_4se(ct.monte_carlo_cover_moves(g, MH, runs=20_000, rng=3), exact)


def test_monte_carlo_uniform_scheduler() -> None:
    g = nx.path_graph(10)  # ignored by the uniform scheduler
    within_4se(ct.monte_carlo_cover_moves(g, "uniform", runs=20_000, rng=4), 10 * harmonic(10) - 1)


def test_monte_carlo_cover_values_are_whole_moves() -> None:
    x = ct.monte_carlo_cover_moves(nx.karate_club_graph(), MH, runs=500, rng=5)
    assert np.all(x == np.floor(x)) and np.all(x >= 33)


def _walker_cover_moves(g: IndexedGraph, kind: str, runs: int, seed: int) -> np.ndarray:
    """Plain step-by-step cover moves with scheduling.Walker (uniform start)."""
    walker = Walker(g, kind, np.random.default_rng(seed))
    out = np.empty(runs)
    for r in range(runs):
        k = walker.start(None)
        seen = {k}
        moves = 0
        while len(seen) < g.size:
            k = walker.next(k)
            moves += 1
            seen.add(k)
        out[r] = moves
    return out


@pytest.mark.parametrize("kind", [MH, SRW])
def test_jump_chain_matches_walker_on_karate_club(kind: str) -> None:
    g = IndexedGraph.from_networkx(nx.karate_club_graph())
    plain = ct.summarize(_walker_cover_moves(g, kind, runs=600, seed=21))
    fast = ct.summarize(ct.monte_carlo_cover_moves(g, kind, runs=10_000, rng=22))
    se = math.hypot(plain["se"], fast["se"])
    assert abs(plain["mean"] - fast["mean"]) < 4 * se, (plain["mean"], fast["mean"], se)


def test_chunked_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(montecarlo, "_VISITED_BYTES", 10 * 700)  # 700 runs per chunk of 10 nodes
    x = ct.monte_carlo_cover_moves(nx.complete_graph(10), runs=5000, rng=14)
    within_4se(x, 9 * harmonic(9))
    x = ct.monte_carlo_cover_moves(nx.star_graph(9), MH, runs=5000, rng=15)
    within_4se(x, ct.exact_cover_moves(nx.star_graph(9), MH))


def test_max_moves_truncates() -> None:
    g = nx.karate_club_graph()
    full = ct.monte_carlo_cover_moves(g, MH, runs=4000, rng=6)
    limit = int(np.median(full))
    cut = ct.monte_carlo_cover_moves(g, MH, runs=4000, rng=7, max_moves=limit)
    done = cut[~np.isnan(cut)]
    assert np.all(done <= limit)
    p_full = float(np.mean(full <= limit))
    p_cut = done.size / cut.size
    se = math.sqrt(p_full * (1 - p_full) * 2 / 4000)
    assert abs(p_full - p_cut) < 4 * se
    s = ct.summarize(cut)
    assert s["runs"] == done.size and s["unfinished"] == cut.size - done.size
    # without holding (complete graph): the global step counter path
    cut = ct.monte_carlo_cover_moves(nx.complete_graph(10), runs=2000, rng=8, max_moves=20)
    assert np.all(cut[~np.isnan(cut)] <= 20) and np.isnan(cut).any()
    assert np.isnan(
        ct.monte_carlo_cover_moves(nx.complete_graph(4), runs=5, rng=0, max_moves=0)
    ).all()


def test_monte_carlo_is_reproducible_from_seed() -> None:
    g = nx.karate_club_graph()
    a = ct.monte_carlo_cover_moves(g, runs=300, rng=9)
    b = ct.monte_carlo_cover_moves(g, runs=300, rng=np.random.default_rng(9))
    assert np.array_equal(a, b)


@pytest.mark.slow
def test_monte_carlo_big_star_metropolis_hastings() -> None:
    g = nx.star_graph(999)  # K = 1000: a leaf keeps the token with probability 1 − 1/999
    exact = ct.exact_cover_moves(g, MH)
    assert exact == pytest.approx(ct.theoretical_cover_moves("star", 1000))
    within_4se(ct.monte_carlo_cover_moves(g, MH, runs=2000, rng=31), exact)


@pytest.mark.slow
def test_subset_chain_at_the_size_limit() -> None:
    k_nodes = ct.EXACT_COVER_MAX_NODES
    res = ct.exact_cover_moves_with_method(nx.cycle_graph(k_nodes), SRW, method="subset-chain")
    assert res.method == "subset-chain"
    assert res.moves == pytest.approx(k_nodes * (k_nodes - 1) / 2, rel=1e-9)


# --------------------------------------------------------------------------- cover iteration


def test_cover_iteration() -> None:
    assert ct.cover_iteration(np.array([0, 1, 0, 2, 1]), 3) == 4
    assert ct.cover_iteration(np.array([2, 2, 1, 1, 0, 0]), 3) == 5
    assert ct.cover_iteration(np.array([0, 1, 0, 1]), 3) is None
    assert ct.cover_iteration(np.array([], dtype=int), 2) is None
    assert ct.cover_iteration(np.array([0]), 1) == 1
    with pytest.raises(ConfigError):
        ct.cover_iteration(np.array([0, 3]), 3)


# --------------------------------------------------------------------------- hitting times


@pytest.mark.parametrize("kind", [MH, SRW])
def test_hitting_times_complete_graph(kind: str) -> None:
    h = ct.hitting_times_to(nx.complete_graph(10), 4, kind)
    expected = np.full(10, 9.0)
    expected[4] = 0.0
    np.testing.assert_allclose(h, expected, atol=1e-9)


def test_hitting_times_path_simple_random_walk() -> None:
    k_nodes = 12  # to the end K − 1 of a path from i: (K − 1)² − i²
    h = ct.hitting_times_to(nx.path_graph(k_nodes), k_nodes - 1, SRW)
    i = np.arange(k_nodes)
    np.testing.assert_allclose(h, (k_nodes - 1) ** 2 - i**2, atol=1e-8)


def test_hitting_times_uniform_scheduler_and_all_pairs() -> None:
    h = ct.hitting_times_to(nx.path_graph(5), 2, "uniform")
    np.testing.assert_allclose(h, [5, 5, 0, 5, 5])
    g = nx.karate_club_graph()
    full = ct.all_pairs_hitting_times(g, MH)
    np.testing.assert_allclose(full[:, 7], ct.hitting_times_to(g, 7, MH), rtol=1e-8)


def test_hitting_times_large_graph() -> None:
    g = nx.random_regular_graph(3, 3000, seed=5)
    h = ct.hitting_times_to(g, 17, MH)
    assert h.shape == (3000,) and h[17] == 0.0
    others = np.delete(h, 17)
    assert np.all(np.isfinite(others)) and np.all(others >= 1.0)


def test_expected_latency_complete_graph() -> None:
    g = nx.complete_graph(10)
    for kind in (MH, SRW):
        assert ct.next_visit_latency(g, 0, kind) == pytest.approx(9.1, abs=1e-9)
    assert ct.next_visit_latency(g, 0, MH, holder=0) == 1.0
    assert ct.next_visit_latency(g, 0, MH, holder=3) == pytest.approx(10.0)
    assert ct.next_visit_latency(nx.path_graph(10), 3, "uniform") == pytest.approx(10.0)


@pytest.mark.parametrize("kind", [MH, SRW, "uniform"])
def test_latency_les_miserables_in_monte_carlo_ci(kind: str) -> None:
    g = nx.les_miserables_graph()
    exact = ct.next_visit_latency(g, "MmeMagloire", kind)
    x = ct.monte_carlo_unlearning_latency(g, "MmeMagloire", kind, runs=20_000, rng=5)
    assert np.all(x >= 1) and np.all(x == np.floor(x))
    stats = ct.summarize(x)
    assert abs(stats["mean"] - exact) <= 4 * stats["se"], (stats["mean"], exact)


@pytest.mark.parametrize("kind", [MH, SRW])
def test_latency_star_leaf_and_centre(kind: str) -> None:
    g = nx.star_graph(9)
    for node, seed in ((0, 41), (4, 42)):
        exact = ct.next_visit_latency(g, node, kind)
        within_4se(ct.monte_carlo_unlearning_latency(g, node, kind, runs=20_000, rng=seed), exact)


@pytest.mark.parametrize("kind", [MH, SRW])
def test_functions_take_node_labels_as_the_cli(kind: str) -> None:
    """Nodes are named by label, as in scenario files: the same numbers as the integer-relabelled
    graph at the label's position, for every function that takes a node or a start."""
    g = nx.florentine_families_graph()
    plain = nx.convert_node_labels_to_integers(g)  # same node order: position = new label
    k = list(g.nodes).index("Medici")
    s = list(g.nodes).index("Strozzi")
    assert ct.next_visit_latency(g, "Medici", kind) == pytest.approx(
        ct.next_visit_latency(plain, k, kind), rel=1e-12
    )
    assert ct.next_visit_latency(g, "Medici", kind, holder="Strozzi") == pytest.approx(
        1 + ct.hitting_times_to(plain, k, kind)[s], rel=1e-12
    )
    np.testing.assert_allclose(
        ct.hitting_times_to(g, "Medici", kind), ct.hitting_times_to(plain, k, kind)
    )
    assert ct.exact_cover_moves(g, kind, "Medici") == pytest.approx(
        ct.exact_cover_moves(plain, kind, k), rel=1e-12
    )
    np.testing.assert_array_equal(
        ct.monte_carlo_unlearning_latency(g, "Medici", kind, runs=500, rng=3, start="Strozzi"),
        ct.monte_carlo_unlearning_latency(plain, k, kind, runs=500, rng=3, start=s),
    )
    with pytest.raises(ConfigError, match="node: node 'Borgia' does not exist"):
        ct.hitting_times_to(g, "Borgia", kind)
    with pytest.raises(
        ConfigError, match="start: expected 'uniform', 'stationary' or a node label"
    ):
        ct.exact_cover_moves(g, kind, "Borgia")
    with pytest.raises(ConfigError, match="node: expected a node label, got True"):
        ct.next_visit_latency(plain, True, kind)


def test_latency_node_label_helper() -> None:
    g = nx.les_miserables_graph()
    k = ct.node_index(g, "Valjean")
    assert list(g.nodes)[k] == "Valjean"
    with pytest.raises(ConfigError) as err:
        ct.node_index(g, "Javert2", key="unlearn.node")
    assert err.value.key == "unlearn.node"


def test_latency_random_regular_2000_in_monte_carlo_ci() -> None:
    g = nx.random_regular_graph(3, 2000, seed=2)
    exact = ct.next_visit_latency(g, 0, MH)
    lo, hi = ct.summarize(ct.monte_carlo_unlearning_latency(g, 0, MH, runs=20_000, rng=5))["ci95"]
    assert lo <= exact <= hi, (lo, exact, hi)


# --------------------------------------------------------------------------- Matthews bounds


@pytest.mark.parametrize(
    "graph",
    [
        irregular_graph(),
        nx.path_graph(7),
        nx.star_graph(6),
        nx.lollipop_graph(4, 3),
        nx.complete_graph(6),
        nx.cycle_graph(8),
    ],
    ids=["irregular", "path", "star", "lollipop", "complete", "cycle"],
)
@pytest.mark.parametrize("kind", [MH, SRW])
def test_matthews_bounds_bracket_worst_start(graph: nx.Graph, kind: str) -> None:
    lower, upper = ct.matthews_bounds(graph, kind)
    worst = max(
        ct.exact_cover_moves(graph, kind, v, method="subset-chain") for v in range(len(graph))
    )
    assert 0 < lower <= worst + 1e-9
    assert worst <= upper + 1e-9


def test_matthews_upper_is_tight_on_complete_graph() -> None:
    lower, upper = ct.matthews_bounds(nx.complete_graph(8))
    assert upper == pytest.approx(7 * harmonic(7))
    assert lower == pytest.approx(7 * harmonic(7))


# --------------------------------------------------------------------------- theory


def test_theoretical_cover_moves() -> None:
    assert ct.theoretical_cover_moves("complete", 10) == pytest.approx(9 * harmonic(9))
    assert ct.theoretical_cover_moves("ring", 10) == 45.0
    assert ct.theoretical_cover_moves("star", 10) == pytest.approx(
        ct.exact_cover_moves(nx.star_graph(9), MH)
    )
    assert ct.theoretical_cover_moves("star", 10, scheduler=SRW) == pytest.approx(
        ct.exact_cover_moves(nx.star_graph(9), SRW)
    )
    assert ct.theoretical_cover_moves("random_regular", 100, degree=3) == pytest.approx(
        2 * 100 * math.log(100)
    )
    assert ct.theoretical_cover_moves("random_regular", 100, degree=2) is None
    assert ct.theoretical_cover_moves("barabasi", 100) is None
    assert ct.theoretical_cover_moves("ring", 10, scheduler="uniform") == pytest.approx(
        10 * harmonic(10) - 1
    )


def test_summarize() -> None:
    s = ct.summarize(np.array([1.0, 2.0, 3.0, np.nan]))
    assert s["mean"] == 2.0 and s["runs"] == 3 and s["unfinished"] == 1 and s["median"] == 2.0
    half = 1.96 * 1.0 / math.sqrt(3)
    assert s["ci95"] == pytest.approx((2.0 - half, 2.0 + half))
    assert ct.summarize(np.array([np.nan]))["runs"] == 0


# --------------------------------------------------------------------------- errors


def test_exact_beyond_limit_raises_nodes() -> None:
    g = nx.random_regular_graph(3, ct.EXACT_COVER_MAX_NODES + 2, seed=1)
    with pytest.raises(ConfigError) as err:
        ct.exact_cover_moves(g)
    assert err.value.key == "nodes"
    assert str(ct.EXACT_COVER_MAX_NODES) in str(err.value) and "Matthews" in str(err.value)
    # closed forms have no size limit
    assert ct.exact_cover_moves(nx.cycle_graph(500)) == 500 * 499 / 2
    with pytest.raises(ConfigError) as err:
        ct.exact_cover_moves(nx.cycle_graph(40), method="subset-chain")
    assert err.value.key == "nodes"


def test_bad_arguments_raise_config_error() -> None:
    g = nx.cycle_graph(5)
    cases = [
        (lambda: ct.exact_cover_moves(g, "teleport"), "scheduler"),
        (lambda: ct.monte_carlo_cover_moves(g, "teleport"), "scheduler"),
        (lambda: ct.hitting_times_to(g, 0, "teleport"), "scheduler"),
        (lambda: ct.exact_cover_moves(g, start="anywhere"), "start"),
        (lambda: ct.exact_cover_moves(g, start=5), "start"),
        (lambda: ct.exact_cover_moves(g, method="guess"), "method"),
        (lambda: ct.exact_cover_moves(irregular_graph(), method="closed-form"), "method"),
        (lambda: ct.monte_carlo_cover_moves(g, runs=0), "runs"),
        (lambda: ct.monte_carlo_cover_moves(g, max_moves=-1), "max_moves"),
        (lambda: ct.monte_carlo_unlearning_latency(g, 9), "node"),
        (lambda: ct.hitting_times_to(g, -1), "node"),
        (lambda: ct.exact_cover_moves(nx.Graph([(0, 1), (2, 3)])), "graph"),
        (lambda: ct.exact_cover_moves(nx.DiGraph([(0, 1), (1, 0)])), "graph"),
        (lambda: ct.exact_cover_moves("not a graph"), "graph"),
        (lambda: ct.theoretical_cover_moves("random_regular", 10), "degree"),
        (lambda: ct.theoretical_cover_moves("ring", 0), "nodes"),
    ]
    for call, key in cases:
        with pytest.raises(ConfigError) as err:
            call()
        assert err.value.key == key, (key, err.value)


def test_matthews_beyond_limit_raises_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hitting, "MATTHEWS_MAX_NODES", 10)
    with pytest.raises(ConfigError) as err:
        ct.matthews_bounds(nx.cycle_graph(11))
    assert err.value.key == "nodes"
