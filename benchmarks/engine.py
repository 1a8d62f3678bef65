"""Token hops per second of gossipsim against a bare SimPy Metropolis-Hastings loop, in one run.

Four ratios are printed (target: each ≥ 0.5):

1. loop: the engine's token loop with the conjugate G-FVL protocol and per-slot recording
   (``run_token``), against a bare SimPy process doing a Metropolis-Hastings walk with a 2-vector
   update per hop, on the same random 3-regular graph of 10,000 nodes;
2. lossy: the same engine loop over lossy links (stop-and-wait ARQ, ``--loss`` per attempt, default
   0.1; timeout 0.5 s, 1 Mbit/s, 1 ms latency: one geometric draw of the failed attempts per hop
   from the channel stream), against the same bare loop (issue 33's benchmark);
3. failures: the lossy loop while nodes and links fail (``[failures]``: every node and every link
   up ``--node-up-s`` and down ``--node-down-s`` on average, 1% of the time down by default; their
   SimPy processes beside the token, the walk over the live graph, lost tokens regenerated after
   2 s), against the same bare loop without failures (issue 33's benchmark). Every change of a
   node or link is one SimPy event (a few microseconds): with the defaults, 25,000 nodes and
   links on the 10,000-node graph change about 0.05 times per hop; ten times the churn rate (up
   1e5 s) is 0.5 changes per hop and costs about as much again as the hops;
4. command: a whole ``gossipsim run`` (process start-up, imports, graph build, run, metrics, CSV files,
   plots) of a long run (``--slots``, default 2,000,000, ``record_every = 100``), against the bare loop
   doing the same number of hops.

Absolute times vary on a shared machine; the ratios are measured in the same run, each timing the
best of ``--repeat`` (default 3) taken in turn with the other side of its ratio.

    python benchmarks/engine.py [--nodes 10000] [--slots 2000000] [--loop-slots 500000] [--repeat 3]
                                [--loss 0.1] [--node-up-s 1e6] [--node-down-s 1e4]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import networkx as nx
import numpy as np
import simpy

import gossipsim as gs
from gossipsim.families import Beta
from gossipsim.network.arq import Link, edge_channel
from gossipsim.network.failures import Failures, Liveness
from gossipsim.protocols import ConjugateGFVL
from gossipsim.scheduling import IndexedGraph, Walker


def bare_simpy_loop(neighbours: list[list[int]], slots: int, seed: int) -> float:
    """A plain SimPy MH token loop with a 2-vector update per hop; returns seconds."""
    rnd = random.Random(seed)
    deg = [len(n) for n in neighbours]
    env = simpy.Environment()
    state = [0.0, 0.0]

    def token():
        k = 0
        for _ in range(slots):
            state[0] += 1.0  # the 2-vector update
            state[1] += 0.5
            nb = neighbours[k]
            j = nb[int(rnd.random() * len(nb))]
            if rnd.random() * deg[j] < deg[k]:
                k = j
            yield env.timeout(1.0)

    start = time.perf_counter()
    env.process(token())
    env.run()
    return time.perf_counter() - start


def engine_loop(
    graph: IndexedGraph, slots: int, seed: int, loss: float = 0.0, failures: Failures | None = None
) -> float:
    """The engine's token loop; with ``loss`` > 0 over lossy links (ARQ), with ``failures`` while
    nodes and links fail."""
    rng = np.random.default_rng(seed)
    factors = rng.integers(0, 100, size=(graph.size, 2)).astype(float)
    proto = ConjugateGFVL(Beta.natural(2, 2), factors)
    liveness = None
    if failures is not None:
        liveness = Liveness(graph, failures, np.random.default_rng(seed + 2))
    view = liveness.view if liveness is not None else None
    walker = Walker(graph, "metropolis-hastings", np.random.default_rng(seed), view)
    links, channel_rng = None, None
    if loss > 0:
        links = edge_channel(Link(rate_bps=1e6, latency_s=0.001, loss=loss, timeout_s=0.5))
        channel_rng = np.random.default_rng(seed + 1)
    start = time.perf_counter()
    gs.run_token(walker=walker, protocol=proto, start=0, iterations=slots, compute_seconds=1.0,
                 links=links, channel_rng=channel_rng, liveness=liveness)  # fmt: skip
    return time.perf_counter() - start


SCENARIO = """
[scenario]
name = "bench"
seed = 1
runs = 1
iterations = {slots}
[topology]
kind = "random_regular"
nodes = {nodes}
degree = 3
[model]
kind = "beta-bernoulli"
prior = {{ a = 2, b = 2 }}
[data]
points_per_node = 10
theta = 0.6
[compute]
seconds_per_iteration = 0.001
[metrics]
record_every = 100
"""


def whole_command(nodes: int, slots: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.toml"
        path.write_text(SCENARIO.format(nodes=nodes, slots=slots))
        cmd = [
            sys.executable,
            "-m",
            "gossipsim",
            "run",
            str(path),
            "--out",
            str(Path(tmp) / "out"),
            "--progress",
            "off",
        ]
        start = time.perf_counter()
        subprocess.run(
            cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONHASHSEED": "0"}
        )
        return time.perf_counter() - start


def best_of(repeat: int, *timers: Callable[[], float]) -> list[float]:
    """The least of ``repeat`` timings of each timer, the timers taken in turn (so that a slow
    spell of the machine falls on both sides of a ratio)."""
    best = [math.inf] * len(timers)
    for _ in range(repeat):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer())
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument(
        "--loss", type=float, default=0.1, help="loss per attempt of the lossy loop"
    )
    parser.add_argument(
        "--slots", type=int, default=2_000_000, help="slots of the whole-command run"
    )
    parser.add_argument(
        "--node-up-s", type=float, default=1_000_000.0, help="mean up time of nodes and links"
    )
    parser.add_argument(
        "--node-down-s", type=float, default=10_000.0, help="mean down time of nodes and links"
    )
    parser.add_argument(
        "--loop-slots", type=int, default=500_000, help="slots of the loop-only comparison"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="each timing is the best of this many, taken in turn (this machine's timings vary)",
    )
    args = parser.parse_args()
    g = nx.random_regular_graph(3, args.nodes, seed=1)
    graph = IndexedGraph.from_networkx(g)
    neighbours = [list(n) for n in graph.neighbours]
    repeat = max(1, args.repeat)

    bare, loop = best_of(
        repeat,
        lambda: bare_simpy_loop(neighbours, args.loop_slots, 1),
        lambda: engine_loop(graph, args.loop_slots, 1),
    )
    print(f"graph: random 3-regular, {args.nodes} nodes; each timing the best of {repeat}")
    print(f"bare SimPy MH loop : {args.loop_slots / bare:12,.0f} hops/s")
    print(
        f"gossipsim run_token: {args.loop_slots / loop:12,.0f} hops/s   ratio {bare / loop:.2f} (target >= 0.5)"
    )

    bare, lossy = best_of(
        repeat,
        lambda: bare_simpy_loop(neighbours, args.loop_slots, 1),
        lambda: engine_loop(graph, args.loop_slots, 1, args.loss),
    )
    print(
        f"run_token, lossy links (loss {args.loss:g}, ARQ): {args.loop_slots / lossy:12,.0f} "
        f"hops/s   ratio {bare / lossy:.2f} against the bare loop (target >= 0.5)"
    )

    churn = Failures(
        token_timeout_s=2.0, node_up_s=args.node_up_s, node_down_s=args.node_down_s,
        link_up_s=args.node_up_s, link_down_s=args.node_down_s,
    )  # fmt: skip
    bare, failing = best_of(
        repeat,
        lambda: bare_simpy_loop(neighbours, args.loop_slots, 1),
        lambda: engine_loop(graph, args.loop_slots, 1, args.loss, churn),
    )
    print(
        f"run_token, lossy links and failures (nodes and links up {args.node_up_s:g} s, down "
        f"{args.node_down_s:g} s on average): {args.loop_slots / failing:12,.0f} hops/s   ratio "
        f"{bare / failing:.2f} against the bare loop (target >= 0.5)"
    )

    bare_long, command = best_of(
        repeat,
        lambda: bare_simpy_loop(neighbours, args.slots, 2),
        lambda: whole_command(args.nodes, args.slots),
    )
    print(
        f"bare SimPy MH loop, {args.slots:,} hops: {bare_long:.2f} s ({args.slots / bare_long:,.0f} hops/s)"
    )
    print(
        f"gossipsim run (whole command, start-up included, record_every=100): {command:.2f} s "
        f"({args.slots / command:,.0f} hops/s)   ratio {bare_long / command:.2f} (target >= 0.5)"
    )


if __name__ == "__main__":
    main()
