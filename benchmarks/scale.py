"""Scale: build time, peak memory and token hops per second of a conjugate run on random graphs of
10^4, 10^5 and 10^6 nodes (targets: 10^6 nodes under 4 GiB; hops/s at 10^6 at least half the rate
at 10^4). Each size runs in a fresh process so its peak memory is its own.

    python benchmarks/scale.py [--kind random_regular|erdos_renyi|random_geometric] [--degree D]
                               [--sizes 10000 100000 1000000] [--slots 1000000] [--repeat 3]

Hops per second are the best of ``--repeat`` runs on the same graph (this machine's timings vary by
tens of percent from one run to the next).

``--degree`` is the (mean) degree: 3 for random regular graphs by default, 20 for Erdős–Rényi
(p = D / (n - 1)) and random geometric graphs (radius with π r² n = D), which must be connected:
below a mean degree of about ln n, isolated nodes appear and the build stops with a one-line error.
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
nodes, slots, kind, degree = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
params = {
    "random_regular": {"degree": int(degree)},
    "erdos_renyi": {"p": degree / (nodes - 1)},
    "random_geometric": {"radius": (degree / (np.pi * nodes)) ** 0.5},
}[kind]
t0 = time.perf_counter()
indexed, _ = gs.build_indexed(kind, nodes, params, seed=1)  # as the simulator builds it
build = time.perf_counter() - t0
factors = np.random.default_rng(1).integers(0, 10, size=(nodes, 2)).astype(float)
run = float("inf")
for repeat in range(int(sys.argv[5])):  # best of a few: this machine's timings are noisy
    protocol = gs.ConjugateGFVL(Beta.natural(2, 2), factors)
    walker = gs.Walker(indexed, "metropolis-hastings", np.random.default_rng(2))
    t0 = time.perf_counter()
    gs.run_token(walker=walker, protocol=protocol, start=0, iterations=slots, compute_seconds=1e-3)
    run = min(run, time.perf_counter() - t0)
    del protocol, walker
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"build_s": build, "hops_per_s": slots / run, "peak_mib": peak}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--slots", type=int, default=1_000_000)
    parser.add_argument(
        "--kind",
        default="random_regular",
        choices=["random_regular", "erdos_renyi", "random_geometric"],
    )
    parser.add_argument("--degree", type=float, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the best rate counts")
    args = parser.parse_args()
    degree = (
        args.degree if args.degree is not None else (3 if args.kind == "random_regular" else 20)
    )
    print(f"{args.kind}, degree {degree:g}, {args.slots:,} slots")
    rows = []
    for n in args.sizes:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(n),
                str(args.slots),
                args.kind,
                str(degree),
                str(max(1, args.repeat)),
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            lines = out.stderr.strip().splitlines() or ["(no message)"]
            print(f"{n:>9,} nodes: failed: {lines[-1]}")
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((n, row))
        print(
            f"{n:>9,} nodes: build {row['build_s']:6.1f} s, {row['hops_per_s']:>10,.0f} hops/s, peak {row['peak_mib']:7.0f} MiB"
        )
    if not rows:
        return
    base = rows[0][1]["hops_per_s"]
    for n, row in rows[1:]:
        print(
            f"hops/s at {n:,} nodes / at {rows[0][0]:,}: {row['hops_per_s'] / base:.2f} (target >= 0.5)"
        )


if __name__ == "__main__":
    main()
