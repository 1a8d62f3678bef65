"""Benchmark: vectorised Monte Carlo cover time against a plain per-run Python loop.

Usage::

    python benchmarks/covertime.py [--runs 10000] [--nodes 100] [--plain-runs 500] [--seed 1]

Measures the Metropolis-Hastings cover time of the complete graph on ``--nodes`` nodes with
``--runs`` runs through :func:`gossipsim.cover.monte_carlo_cover_moves` (all runs stepping
together in NumPy), and with a straightforward Python while-loop per run (``random.Random`` draws and a
visited set) on ``--plain-runs`` runs, scaled to a per-run cost. Prints both per-run costs, hops per
second, the speed ratio and both means next to the exact value ``(K−1)·H(K−1)``; then the exact
subset-chain cover time of a 16-node random 3-regular graph.
"""

from __future__ import annotations

import argparse
import random
import time

import networkx as nx
import numpy as np

from gossipsim.cover import (
    exact_cover_moves_with_method,
    harmonic,
    monte_carlo_cover_moves,
    summarize,
)
from gossipsim.scheduling import IndexedGraph


def plain_cover_moves(graph: IndexedGraph, runs: int, seed: int) -> list[int]:
    """Cover moves of ``runs`` Metropolis-Hastings walks, one hop at a time (uniform start)."""
    rnd = random.Random(seed)
    nbrs = [list(x) for x in graph.neighbours]
    deg = [len(x) for x in nbrs]
    k_nodes = graph.size
    out = []
    for _ in range(runs):
        k = rnd.randrange(k_nodes)
        visited = {k}
        moves = 0
        while len(visited) < k_nodes:
            nb = nbrs[k]
            d = deg[k]
            j = nb[int(rnd.random() * d)]  # propose a uniform neighbour
            if rnd.random() * deg[j] < d:  # accept with min(1, deg(k)/deg(j)), else stay
                k = j
            moves += 1
            visited.add(k)
        out.append(moves)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="vectorised runs (default 10000)")
    parser.add_argument(
        "--nodes", type=int, default=100, help="complete-graph size K (default 100)"
    )
    parser.add_argument(
        "--plain-runs", type=int, default=500, help="runs of the plain loop (default 500)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--exact-nodes", type=int, default=16, help="size of the subset-chain example (default 16)"
    )
    args = parser.parse_args(argv)

    k_nodes = args.nodes
    graph = IndexedGraph.from_networkx(nx.complete_graph(k_nodes))
    exact = (k_nodes - 1) * harmonic(k_nodes - 1)

    # warm-up (first-call costs: imports, allocator), not timed
    monte_carlo_cover_moves(graph, "metropolis-hastings", runs=100, rng=np.random.default_rng(0))
    t0 = time.perf_counter()
    fast = monte_carlo_cover_moves(
        graph, "metropolis-hastings", runs=args.runs, rng=np.random.default_rng(args.seed)
    )
    t_fast = time.perf_counter() - t0

    t0 = time.perf_counter()
    plain = plain_cover_moves(graph, args.plain_runs, args.seed)
    t_plain = time.perf_counter() - t0

    s_fast = summarize(fast)
    s_plain = summarize(np.asarray(plain, dtype=float))
    per_fast = t_fast / args.runs
    per_plain = t_plain / args.plain_runs
    hops_fast = float(np.nansum(fast)) / t_fast
    hops_plain = float(sum(plain)) / t_plain

    print(f"complete graph K={k_nodes}, Metropolis-Hastings, uniform start")
    print(
        f"  vectorised: {args.runs} runs in {t_fast:.3f} s = {per_fast * 1e6:9.1f} us/run, "
        f"{hops_fast / 1e6:7.2f} M hops/s, mean {s_fast['mean']:.2f} ± {s_fast['se']:.2f}"
    )
    print(
        f"  plain loop: {args.plain_runs} runs in {t_plain:.3f} s = {per_plain * 1e6:9.1f} us/run, "
        f"{hops_plain / 1e6:7.2f} M hops/s, mean {s_plain['mean']:.2f} ± {s_plain['se']:.2f}"
    )
    print(f"  speed ratio (per run): {per_plain / per_fast:.1f}x (target >= 20x)")
    print(f"  exact (K-1)·H(K-1) = {exact:.2f}")

    ring = nx.random_regular_graph(3, args.exact_nodes, seed=args.seed)
    t0 = time.perf_counter()
    res = exact_cover_moves_with_method(ring, "metropolis-hastings", method="subset-chain")
    t_exact = time.perf_counter() - t0
    print(
        f"exact subset-chain cover time, random 3-regular graph K={args.exact_nodes}: "
        f"{res.moves:.4f} moves in {t_exact:.2f} s ({res.detail})"
    )


if __name__ == "__main__":
    main()
