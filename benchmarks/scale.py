"""Scale: build time, peak memory and token hops per second of a conjugate run on random 3-regular
graphs of 10^4, 10^5 and 10^6 nodes (targets: 10^6 nodes under 4 GiB; hops/s at 10^6 at least half
the rate at 10^4). Each size runs in a fresh process so its peak memory is its own.

    python benchmarks/scale.py [--sizes 10000 100000 1000000] [--slots 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
import gossipsim as gs
from gossipsim.families import Beta
nodes, slots = int(sys.argv[1]), int(sys.argv[2])
t0 = time.perf_counter()
graph = gs.build_topology("random_regular", nodes, {"degree": 3}, seed=1)
indexed = gs.IndexedGraph.from_networkx(graph)
build = time.perf_counter() - t0
factors = np.random.default_rng(1).integers(0, 10, size=(nodes, 2)).astype(float)
protocol = gs.ConjugateGFVL(Beta.natural(2, 2), factors)
walker = gs.Walker(indexed, "metropolis-hastings", np.random.default_rng(2))
t0 = time.perf_counter()
gs.run_token(walker=walker, protocol=protocol, start=0, iterations=slots, compute_seconds=1e-3)
run = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"build_s": build, "hops_per_s": slots / run, "peak_mib": peak}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--slots", type=int, default=1_000_000)
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(n), str(args.slots)],
            check=True,
            capture_output=True,
            text=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((n, row))
        print(
            f"{n:>9,} nodes: build {row['build_s']:6.1f} s, {row['hops_per_s']:>10,.0f} hops/s, peak {row['peak_mib']:7.0f} MiB"
        )
    base = rows[0][1]["hops_per_s"]
    for n, row in rows[1:]:
        print(
            f"hops/s at {n:,} nodes / at {rows[0][0]:,}: {row['hops_per_s'] / base:.2f} (target >= 0.5)"
        )


if __name__ == "__main__":
    main()
