"""The ``theory`` block of summary.json (gossipsim.measurement.theory.theory_for) follows the scenario's walk.

Every exact cover figure is checked against two computations that share no code with
:mod:`gossipsim.cover`: a brute-force linear solve of the (visited set, holder) chain written
here from the three scheduler rules, and the simulator itself (``gossipsim.run`` of the scenario,
cover moves = ``cover_iteration`` − 1, or :class:`~gossipsim.scheduling.Walker` with the runner's
own start draw), with |mean − exact| ≤ 4·SE. Seeds are fixed; run counts are chosen so that 4·SE is
a few percent of the value at most (asserted), never tuned to the seed.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import gossipsim as gs
from gossipsim import cover as ct
from gossipsim.cover import exact as cover_exact
from gossipsim.execution.runner import World, start_node
from gossipsim.measurement.theory import theory_for
from gossipsim.scheduling import Walker

MH = "metropolis-hastings"
SRW = "simple-random-walk"
UNIFORM = "uniform"
SCHEDULERS = (MH, SRW, UNIFORM)

STAR = {"kind": "star", "nodes": 10}  # node 0 is the centre
PATH = {"kind": "path", "nodes": 7}  # irregular, no closed form: the subset chain is used


def raw_scenario(
    topology: dict[str, Any], kind: str, start: str | int, *, iterations: int = 500, **extra: Any
) -> dict[str, Any]:
    return {
        "scenario": {"name": "t", "seed": 11, "runs": 10, "iterations": iterations},
        "topology": topology,
        "model": {"kind": "beta-bernoulli"},
        "data": {"points_per_node": 1},
        "scheduler": {"kind": kind, "start": start},
        "metrics": {"record_every": iterations},
        **extra,
    }


def make_world(raw: dict[str, Any]) -> World:
    study = gs.parse_study(raw)
    return gs.build_world(study.variants[0].scenario)


# --------------------------------------------------------------------------- independent references


def walk_matrix(neighbours: list[list[int]], kind: str) -> np.ndarray:
    """P[k, j] written from the scheduler rules (scheduling.py's docstring), dense."""
    n = len(neighbours)
    p = np.zeros((n, n))
    if kind == UNIFORM:  # any node, the holder included
        return np.full((n, n), 1.0 / n)
    for k, nbrs in enumerate(neighbours):
        dk = len(nbrs)
        for j in nbrs:
            if kind == SRW:
                p[k, j] = 1.0 / dk
            else:  # propose j with 1/deg(k), accept with min(1, deg(k)/deg(j)), else stay
                p[k, j] = min(1.0, dk / len(neighbours[j])) / dk
        p[k, k] += 1.0 - p[k].sum()
    return p


def start_distribution(neighbours: list[list[int]], kind: str, start: str | int) -> np.ndarray:
    n = len(neighbours)
    if start == "uniform" or (start == "stationary" and kind != SRW):  # MH, uniform: π uniform
        return np.full(n, 1.0 / n)
    if start == "stationary":  # SRW: π ∝ degree
        deg = np.array([len(nb) for nb in neighbours], dtype=float)
        return deg / deg.sum()
    w = np.zeros(n)
    w[int(start)] = 1.0  # the test graphs are labelled 0..K−1 in index order
    return w


def brute_force_cover_moves(world: World, kind: str, start: str | int) -> float:
    """Σ_v w(v)·E[{v}, v] from one sparse solve over all states (S, v), v ∈ S ≠ V:
    ``E[S, v] − Σ_u P(v, u)·E[S ∪ {u}, u] = 1`` with ``E[V, ·] = 0``."""
    neighbours = [list(nb) for nb in world.indexed.neighbours]
    n = len(neighbours)
    p = walk_matrix(neighbours, kind)
    full = (1 << n) - 1
    index: dict[tuple[int, int], int] = {}
    for mask in range(1, full):
        for v in range(n):
            if mask >> v & 1:
                index[(mask, v)] = len(index)
    rows, cols, vals = [], [], []
    for (mask, v), i in index.items():
        rows.append(i)
        cols.append(i)
        vals.append(1.0)
        for u in np.flatnonzero(p[v]).tolist():
            nxt = mask | (1 << u)
            if nxt != full:
                rows.append(i)
                cols.append(index[(nxt, u)])
                vals.append(-p[v, u])
    a = sp.csr_array((vals, (rows, cols)), shape=(len(index), len(index)))
    e = spla.spsolve(a.tocsc(), np.ones(len(index)))
    w = start_distribution(neighbours, kind, start)
    return float(sum(w[v] * e[index[(1 << v, v)]] for v in range(n)))


def simulated_cover_moves(raw: dict[str, Any], runs: int) -> np.ndarray:
    """Cover moves (cover_iteration − 1) of ``runs`` runs of the scenario, all covered."""
    res = gs.run(raw, runs=runs)
    x = res.runs["cover_iteration"].to_numpy(dtype=float) - 1.0
    assert not np.isnan(x).any(), "some runs ended before covering: raise iterations"
    return x


def walker_cover_moves(world: World, runs: int, seed: int) -> np.ndarray:
    """Cover moves with the simulator's Walker and the runner's start draw, run by run."""
    rng = np.random.default_rng(seed)
    walker = Walker(world.indexed, world.scenario.scheduler.kind, rng)
    step = walker.next
    n = world.nodes
    out = np.empty(runs)
    for r in range(runs):
        k = start_node(world, rng)
        seen = [False] * n
        seen[k] = True
        missing, moves = n - 1, 0
        while missing:
            k = step(k)
            moves += 1
            if not seen[k]:
                seen[k] = True
                missing -= 1
        out[r] = moves
    return out


def mean_se(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


def assert_within_4se(x: np.ndarray, exact: float) -> None:
    mean, se = mean_se(x)
    assert 4 * se < 0.06 * exact, ("too few runs for a meaningful check", mean, se)
    assert abs(mean - exact) <= 4 * se, (mean, exact, se)


def assert_exact_matches_brute_force(world: World, theory: dict[str, Any]) -> None:
    kind = world.scenario.scheduler.kind
    start = world.scenario.scheduler.start
    reference = brute_force_cover_moves(world, kind, start)
    assert theory["exact_cover_moves"] == pytest.approx(reference, rel=1e-9, abs=1e-9)


# --------------------------------------------------------------------------- every scheduler × start

CASES = [
    *[(STAR, kind, start) for kind in SCHEDULERS for start in ("uniform", "stationary", 0, 3)],
    *[(PATH, kind, start) for kind in SCHEDULERS for start in ("uniform", "stationary", 2)],
]


def case_id(case: tuple[dict[str, Any], str, str | int]) -> str:
    topology, kind, start = case
    return f"{topology['kind']}-{kind}-{start}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_exact_cover_moves_follow_scheduler_and_start(
    case: tuple[dict[str, Any], str, str | int],
) -> None:
    topology, kind, start = case
    world = make_world(raw_scenario(topology, kind, start))
    theory = theory_for(world)
    assert theory["scheduler"] == kind and theory["start"] == start
    reference = brute_force_cover_moves(world, kind, start)
    assert theory["exact_cover_moves"] == pytest.approx(reference, rel=1e-9, abs=1e-9)
    closed = topology["kind"] == "star" or kind == UNIFORM
    assert theory["exact_cover_method"] == ("closed-form" if closed else "subset-chain")
    if topology["kind"] == "star":  # the kind's formula is exact here, for this walk and start
        assert theory["theoretical_cover_moves"] == pytest.approx(reference, rel=1e-12)
        assert theory["theoretical_cover_method"] == "closed-form"


#: the simulated check on every scheduler, both graphs and every kind of start (uniform, stationary,
#: a node) runs by default; the other cases are marked slow (``make test-slow``)
SIMULATED_FAST = {
    (STAR["kind"], MH, 0), (PATH["kind"], MH, "uniform"), (STAR["kind"], SRW, 3),
    (PATH["kind"], SRW, "stationary"), (STAR["kind"], UNIFORM, "stationary"),
    (PATH["kind"], UNIFORM, 2),
}  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=case_id(c),
            marks=() if (c[0]["kind"], c[1], c[2]) in SIMULATED_FAST else pytest.mark.slow,
        )
        for c in CASES
    ],
)
def test_simulated_cover_moves_match_the_exact_value(
    case: tuple[dict[str, Any], str, str | int],
) -> None:
    """The simulator: enough slots that every run covers (no censoring); the long
    Metropolis-Hastings star walks (≈ 245 moves, 12× as many slots) get fewer runs, still with
    4·SE < 6% of the value."""
    topology, kind, start = case
    exact = theory_for(make_world(raw_scenario(topology, kind, start)))["exact_cover_moves"]
    raw = raw_scenario(topology, kind, start, iterations=int(12 * exact) + 100)
    runs = 2500 if exact > 200 else 4000
    assert_within_4se(simulated_cover_moves(raw, runs=runs), exact)


def test_start_changes_the_value_where_it_should() -> None:
    """The cases above would not notice a start ignored if the starts gave the same value."""
    values = {
        (kind, start): theory_for(make_world(raw_scenario(PATH, kind, start)))["exact_cover_moves"]
        for kind in (MH, SRW)
        for start in ("uniform", "stationary", 2)
    }
    for kind in (MH, SRW):
        assert values[(kind, 2)] - values[(kind, "uniform")] > 2.0
    assert values[(SRW, "stationary")] != pytest.approx(values[(SRW, "uniform")], abs=0.1)
    star = {
        start: theory_for(make_world(raw_scenario(STAR, SRW, start)))["exact_cover_moves"]
        for start in ("uniform", "stationary", 0, 3)
    }
    assert len({round(v, 6) for v in star.values()}) == 4


# --------------------------------------------------------------------------- the case


def star_srw_uniform_k10() -> float:
    """The issue's value, by hand: n = 9 leaves, T = 1; centre 2·9·H9 − 1, leaf 2·9·H8."""
    h8 = sum(Fraction(1, i) for i in range(1, 9))
    h9 = h8 + Fraction(1, 9)
    centre = 2 * 9 * h9 - 1
    leaf = 2 * 9 * h8
    return float((centre + 9 * leaf) / 10)


def test_star_simple_random_walk_reports_the_simulated_walk(tmp_path: Path) -> None:
    expected = star_srw_uniform_k10()
    assert expected == pytest.approx(49.0214285714, abs=1e-9)
    mh_value = ct.star_cover_moves(9, MH, "uniform")
    assert mh_value == pytest.approx(244.7071428571, abs=1e-9)  # what summary.json used to say

    raw = raw_scenario(STAR, SRW, "uniform", iterations=700)
    res = gs.run(raw, runs=4000, out=tmp_path / "out", plots=False)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    theory = summary["variants"]["t"]["theory"]
    assert theory["scheduler"] == SRW and theory["start"] == "uniform"
    assert theory["exact_cover_moves"] == pytest.approx(expected, abs=1e-9)
    assert theory["theoretical_cover_moves"] == pytest.approx(expected, abs=1e-9)
    assert "simple-random-walk" in theory["theoretical_cover_assumes"]

    x = res.runs["cover_iteration"].to_numpy(dtype=float) - 1.0
    assert not np.isnan(x).any()
    assert_within_4se(x, expected)
    w = walker_cover_moves(make_world(raw), runs=20_000, seed=5)
    assert_within_4se(w, expected)
    for sample in (x, w):  # the Metropolis-Hastings value is far outside
        mean, se = mean_se(sample)
        assert abs(mean - mh_value) > 100 * se


# --------------------------------------------------------------------------- wrong forms are caught


def test_a_closed_form_for_the_wrong_scheduler_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    right = ct.star_cover_moves

    def always_mh(leaves: int, scheduler: str = MH, start: ct.Start = "uniform") -> float:
        return right(leaves, MH if scheduler == SRW else scheduler, start)

    monkeypatch.setattr(cover_exact, "star_cover_moves", always_mh)  # where the form is used
    raw = raw_scenario(STAR, SRW, "uniform")
    world = make_world(raw)
    theory = theory_for(world)
    assert theory["exact_cover_moves"] == pytest.approx(244.707, abs=1e-3)
    with pytest.raises(AssertionError):
        assert_exact_matches_brute_force(world, theory)
    x = walker_cover_moves(world, runs=2000, seed=6)
    with pytest.raises(AssertionError):
        assert_within_4se(x, theory["exact_cover_moves"])


def test_a_closed_form_ignoring_the_start_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    right = ct.star_cover_moves

    def uniform_start(leaves: int, scheduler: str = MH, start: ct.Start = "uniform") -> float:
        return right(leaves, scheduler, "uniform")

    monkeypatch.setattr(cover_exact, "star_cover_moves", uniform_start)
    for kind, start in ((SRW, 0), (SRW, "stationary"), (MH, 0)):
        world = make_world(raw_scenario(STAR, kind, start))
        with pytest.raises(AssertionError):
            assert_exact_matches_brute_force(world, theory_for(world))


def test_the_brute_force_reference_tells_the_walks_apart() -> None:
    """On the path every scheduler gives a different value: the reference is not blind to it."""
    world = make_world(raw_scenario(PATH, MH, "uniform"))
    values = [brute_force_cover_moves(world, kind, "uniform") for kind in SCHEDULERS]
    assert min(abs(a - b) for i, a in enumerate(values) for b in values[i + 1 :]) > 1.0


# --------------------------------------------------------------------------- theoretical values


@pytest.mark.parametrize("kind", SCHEDULERS)
def test_theoretical_cover_uses_the_scheduler(kind: str) -> None:
    ring = theory_for(make_world(raw_scenario({"kind": "ring", "nodes": 9}, kind, 4)))
    assert ring["theoretical_cover_moves"] == pytest.approx(ring["exact_cover_moves"], rel=1e-12)
    assert ring["theoretical_cover_method"] == "closed-form"

    topology = {"kind": "random_regular", "nodes": 12, "degree": 3}
    regular = theory_for(make_world(raw_scenario(topology, kind, "uniform")))
    assert regular["exact_cover_method"] == "subset-chain" or kind == UNIFORM
    if kind == UNIFORM:  # coupon collector: exact whatever the graph
        assert regular["theoretical_cover_method"] == "closed-form"
        assert regular["theoretical_cover_moves"] == pytest.approx(12 * ct.harmonic(12) - 1)
        assert regular["exact_cover_moves"] == pytest.approx(regular["theoretical_cover_moves"])
    else:  # Cooper–Frieze: asymptotic, for the simple random walk (= MH on a regular graph)
        assert regular["theoretical_cover_method"] == "asymptotic"
        assert regular["theoretical_cover_moves"] == pytest.approx(2 * 12 * math.log(12))
        assumes = regular["theoretical_cover_assumes"]
        assert "asymptotic" in assumes and "simple random walk" in assumes


def test_theoretical_cover_star_start_argument() -> None:
    for kind in (MH, SRW):
        assert ct.theoretical_cover_moves(
            "star", 10, scheduler=kind, start=0
        ) == ct.star_cover_moves(9, kind, "centre")
        assert ct.theoretical_cover_moves(
            "star", 10, scheduler=kind, start=4
        ) == ct.star_cover_moves(9, kind, "leaf")
    with pytest.raises(gs.ConfigError, match="start"):
        ct.theoretical_cover_moves("star", 10, start=10)
    with pytest.raises(gs.ConfigError, match="start"):
        ct.theoretical_cover_moves("ring", 10, start="centre")


# --------------------------------------------------------------------------- bounds and latency


def test_matthews_bounds_say_they_hold_for_every_start() -> None:
    theory = theory_for(make_world(raw_scenario({"kind": "path", "nodes": 30}, SRW, 3)))
    assert "exact_cover_moves" not in theory  # beyond the subset chain, no closed form
    lo, hi = theory["matthews_cover_moves"]
    assert "every start" in theory["matthews_cover_assumes"]
    # SRW on a path of n = 29 edges from node i: i(n − i) to reach an end, then n² (Lovász 1993)
    exact_from_3 = 3 * 26 + 29**2
    assert lo <= exact_from_3 <= hi


@pytest.mark.parametrize("kind", SCHEDULERS)
def test_next_visit_latency_says_what_it_assumes(kind: str) -> None:
    raw = raw_scenario(PATH, kind, 2, unlearning=[{"node": 5, "at_iteration": 40}])
    world = make_world(raw)
    theory = theory_for(world)
    assumes = theory["next_visit_latency_assumes"]
    assert "stationary" in assumes and kind in assumes
    # 1 + Σ_v π(v)·H(v, 5), with H from a dense solve of the walk written here
    neighbours = [list(nb) for nb in world.indexed.neighbours]
    p = walk_matrix(neighbours, kind)
    others = [v for v in range(7) if v != 5]
    h = np.zeros(7)
    h[others] = np.linalg.solve(np.eye(6) - p[np.ix_(others, others)], np.ones(6))
    pi = start_distribution(neighbours, kind, "stationary")
    assert theory["next_visit_latency"]["5"] == pytest.approx(1 + pi @ h, rel=1e-9)
