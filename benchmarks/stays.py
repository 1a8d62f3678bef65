"""Benchmark: walks that mostly wait, stepped slot by slot against drawn stay by stay (issue 23).

Usage::

    python benchmarks/stays.py [--skip-stepped] [--star-nodes 400] [--star-runs 200]

Whole commands, each timed from the shell's point of view (a fresh ``gossipsim`` process, start-up,
theory and tables included; no plots), in one run so the ratios compare like with like:

(a) ``gossipsim run scenarios/cover_time_vs_nodes.toml`` with ``[scheduler] stays = "stepped"``
    (``--set scheduler.stays=stepped``: every slot of every walk stepped, as before the shipped
    file opted in) against the file as shipped (``stays = "drawn"``); the target is ≥ 10× faster.
    ``--skip-stepped`` leaves out the stepped run (about 4.5 minutes on two cores).
(b) a star of ``--star-nodes`` nodes with ``--star-runs`` runs (stop when covered, every 100,000th
    slot recorded): ``gossipsim run`` with drawn stays against ``gossipsim covertime`` on the same
    graph, scheduler and run count (its Monte Carlo jumps over rejections too); the target is
    ≤ 8× the covertime command. The stepped run of the same star is timed beside them.

Prints each time, the ratios, and the mean cover moves each command reports.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
GOSSIPSIM = [sys.executable, "-m", "gossipsim"]
SCENARIO = ROOT / "scenarios" / "cover_time_vs_nodes.toml"


def timed(args: list[str]) -> tuple[float, str]:
    """Seconds the command takes, and its standard output (a failure stops the benchmark)."""
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds, done.stdout


def mean_cover_moves(folder: Path) -> float:
    runs = pd.read_csv(folder / "runs.csv")
    return float((runs["cover_iteration"] - 1).mean())


def star_scenario(folder: Path, nodes: int, runs: int, stays: str) -> Path:
    path = folder / f"star_{stays}.toml"
    path.write_text(
        f"""[scenario]
name = "star_{stays}"
seed = 5
runs = {runs}
iterations = 50000000
stop_when_done = true

[topology]
kind = "star"
nodes = {nodes}

[model]
kind = "beta-bernoulli"

[data]
points_per_node = 1

[scheduler]
stays = "{stays}"

[metrics]
record_every = 100000
""",
        encoding="utf-8",
    )
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-stepped", action="store_true", help="leave out (a)'s stepped run")
    parser.add_argument("--star-nodes", type=int, default=400)
    parser.add_argument("--star-runs", type=int, default=200)
    args = parser.parse_args(argv)
    run = [*GOSSIPSIM, "run", "--no-plots", "--progress", "off"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"(a) gossipsim run {SCENARIO.relative_to(ROOT)} --no-plots (whole command)")
        drawn, _ = timed([*run, str(SCENARIO), "--out", str(work / "drawn")])
        print(f"    drawn stays (as shipped): {drawn:8.1f} s")
        if not args.skip_stepped:
            stepped, _ = timed(
                [*run, str(SCENARIO), "--out", str(work / "stepped"), "--set",
                 "scheduler.stays=stepped"]
            )  # fmt: skip
            print(f"    stepped every slot:       {stepped:8.1f} s")
            print(f"    stepped / drawn:          {stepped / drawn:8.1f}x  (target >= 10x)")
        k, n = args.star_nodes, args.star_runs
        print(f"(b) a star of {k} nodes, {n} runs, Metropolis-Hastings (whole commands)")
        star_drawn, _ = timed(
            [*run, str(star_scenario(work, k, n, "drawn")), "--out", str(work / "star_drawn")]
        )
        cover, text = timed(
            [*GOSSIPSIM, "covertime", "--topology", "star", "--nodes", str(k), "--runs", str(n),
             "--seed", "5", "--json"]
        )  # fmt: skip
        star_stepped, _ = timed(
            [*run, str(star_scenario(work, k, n, "stepped")), "--out", str(work / "star_stepped")]
        )
        monte_carlo = json.loads(text)
        print(f"    gossipsim covertime:      {cover:8.2f} s  mean cover moves "
              f"{monte_carlo['mean_moves']:,.0f}")  # fmt: skip
        print(f"    gossipsim run, drawn:     {star_drawn:8.2f} s  mean cover moves "
              f"{mean_cover_moves(work / 'star_drawn'):,.0f}")  # fmt: skip
        print(f"    gossipsim run, stepped:   {star_stepped:8.2f} s  mean cover moves "
              f"{mean_cover_moves(work / 'star_stepped'):,.0f}")  # fmt: skip
        print(f"    run drawn / covertime:    {star_drawn / cover:8.1f}x  (target <= 8x)")
        print(f"    run stepped / covertime:  {star_stepped / cover:8.1f}x")


if __name__ == "__main__":
    main()
