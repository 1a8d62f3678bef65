"""Peak memory of one long run on a large graph: a random 3-regular graph of 100,000 nodes,
1,000,000 slots, beta–Bernoulli G-FVL, in one process (target: under 2 GiB).

Runs ``gossipsim run`` in a child process and reads its peak resident set size (``ru_maxrss``).

    python benchmarks/memory.py [--nodes 100000] [--slots 1000000]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = """
[scenario]
name = "memory"
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
[[unlearning]]
node = 0
at_iteration = {request}
[metrics]
record_every = 1000
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--slots", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.toml"
        path.write_text(
            SCENARIO.format(nodes=args.nodes, slots=args.slots, request=args.slots // 2)
        )
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
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        f"random 3-regular graph, {args.nodes:,} nodes, {args.slots:,} slots, one unlearning request"
    )
    print(
        f"whole command: {elapsed:.1f} s, peak resident memory {peak_kib / 1024:.0f} MiB (target < 2048 MiB)"
    )


if __name__ == "__main__":
    main()
