"""Peak memory of a many-run natural-gradient study on the vectorized engine: the shipped
``logistic_breast_cancer_karate`` (full and diagonal Gaussians, d = 31, 34 nodes, a request and the
retrain baseline) with 10,000 runs (target: under 2 GiB of resident memory).

A batch's memory does not grow with the slots (states are streamed out, only the states metrics.csv
reads are kept), so ``--slots`` shortens the runs to keep the benchmark's time reasonable while
``--record-every`` keeps the tables as large as the shipped study's (its 20,000 slots recorded
every 100th: 201 rows a run and variant). Runs ``gossipsim run`` in a child process and reads its
peak resident set size (``ru_maxrss``).

    python benchmarks/memory_batched.py [--runs 10000] [--slots 1000] [--record-every 5]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=1_000)
    parser.add_argument("--record-every", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "gossipsim", "run", "scenarios/logistic_breast_cancer_karate.toml",
            "--out", str(Path(tmp) / "out"), "--no-plots", "--progress", "off",
            "--engine", "vectorized", "--runs", str(args.runs),
            "--set", f"scenario.iterations={args.slots}",
            "--set", f"metrics.record_every={args.record_every}",
            "--set", f"unlearning=[{{node=0, at_iteration={args.slots // 2}}}]",
        ]  # fmt: skip
        begin = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - begin
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB -> GiB
    print(f"{args.runs} runs x {args.slots} slots x 2 variants, every {args.record_every}th slot "
          f"recorded: {seconds:.0f} s, peak resident memory {peak:.2f} GiB (target < 2 GiB)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
