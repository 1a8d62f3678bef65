"""Parallel sweeps: whole ``gossipsim run --no-plots`` commands with ``--workers 1`` and
``--workers 2`` on two sweeps whose variants are costly to build, and the speed-up. A worker gets
each variant's targets from the command (found once while checking the sweep), and a forked worker
(Linux) starts with the variants already built; before, every worker built the graph and data and
searched for the targets again, which capped the speed-up of such sweeps.

- ``big-graph``: 8 event-engine runs of 100,000 slots on a 200,000-node Barabási–Albert graph
  (m = 3): the graph takes seconds to build, as long as a few runs;
- ``logistic``: the shipped logistic-regression scenario (two families, breast cancer on the karate
  club), 4 runs of 600 slots with the request at slot 300: four target searches of about a second
  each.

Each command runs in a fresh process; the best of ``--repeat`` wall times counts (this machine's
timings vary by tens of percent), and the tables of the two commands are compared byte for byte.

    python benchmarks/workers.py [--case big-graph logistic] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from whole_command import ENTRY, ROOT, child_env  # this checkout's gossipsim, bytecode cached

TABLES = ("runs.csv", "metrics.csv", "requests.csv")

BIG_GRAPH = """\
[scenario]
name = "big_graph"
seed = 1
runs = 8
iterations = 100000

[topology]
kind = "barabasi_albert"
nodes = 200000
m = 3

[model]
kind = "beta-bernoulli"
prior = { a = 2, b = 2 }

[data]
points_per_node = 2
theta = 0.5
"""

CASES = {
    "big-graph": (None, ["--engine", "event"]),
    "logistic": (
        ROOT / "scenarios" / "logistic_breast_cancer_karate.toml",
        ["--runs", "4", "--set", "scenario.iterations=600",
         "--set", "unlearning=[{node = 0, at_iteration = 300}]"],
    ),
}  # fmt: skip


def whole(scenario: Path, out: Path, flags: list[str], workers: int) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, "run", str(scenario), "--out", str(out), "--no-plots",
         "--progress", "off", "--workers", str(workers), *flags],
        check=True, env=child_env(), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", nargs="+", choices=tuple(CASES), default=list(CASES))
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gossipsim-workers-") as tmp:
        folder = Path(tmp)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        for name in args.case:
            path, flags = CASES[name]
            if path is None:
                path = folder / "big_graph.toml"
                path.write_text(BIG_GRAPH, encoding="utf-8")
            best: dict[int, float] = {}
            for _ in range(max(1, args.repeat)):
                for workers in (1, 2):
                    elapsed = whole(path, folder / f"{name}-{workers}", flags, workers)
                    best[workers] = min(best.get(workers, elapsed), elapsed)
            same = all(
                (folder / f"{name}-1" / t).read_bytes() == (folder / f"{name}-2" / t).read_bytes()
                for t in TABLES
                if (folder / f"{name}-1" / t).exists()
            )
            print(
                f"{name}: --workers 1 {best[1]:.2f} s, --workers 2 {best[2]:.2f} s, speed-up "
                f"{best[1] / best[2]:.2f}x (best of {args.repeat}); identical tables: {same}",
                flush=True,
            )


if __name__ == "__main__":
    main()
