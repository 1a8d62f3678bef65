"""Particle protocols on the vectorized engine (issue 23, item 2): whole ``gossipsim run ...
--no-plots`` commands on the DSVGD breast-cancer scenario (``scenarios/dsvgd_breast_cancer.toml``),
event engine against vectorized engine, in one run of this script:

- ``whole``: the scenario as shipped, ``--engine event`` against ``--engine auto`` (its server case,
  ``architecture = "server"``, runs on the event engine either way; auto picks the vectorized
  engine for the other cases from 16 runs on, hence ``--runs 16`` by default);
- ``walk``: the same scenario without its server case (SVGD, DSVGD on three graphs, G-FVL),
  ``--engine event`` against ``--engine vectorized``.

Each command runs in a fresh process on this checkout; the best of ``--repeat`` wall times counts
(this machine's timings vary by tens of percent). The two engines' tables (runs, requests, metrics)
are compared byte for byte.

    python benchmarks/particle_batches.py [--runs 16] [--iterations 2000] [--repeat 1]

Target (issue 23): the vectorized engine at least 5x the event engine on this scenario.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "dsvgd_breast_cancer.toml"
ENTRY = "import sys; from gossipsim.cli import main; sys.exit(main())"
TABLES = ("runs.csv", "requests.csv", "metrics.csv")
SERVER_CASE = '[[sweep.cases]]\nlabel = "DSVGD, server'


def without_server_case(text: str) -> str:
    """The scenario's TOML without its ``[[sweep.cases]]`` entry of the parameter server."""
    begin = text.index(SERVER_CASE)
    end = text.index("[[sweep.cases]]", begin + len(SERVER_CASE))
    return text[:begin] + text[end:]


def timed(scenario: Path, engine: str, out: Path, args: argparse.Namespace) -> float:
    """Wall seconds of one whole command (best of ``args.repeat``)."""
    command = [
        sys.executable, "-c", ENTRY, "run", str(scenario), "--no-plots", "--progress", "off",
        "--engine", engine, "--runs", str(args.runs), "--set",
        f"scenario.iterations={args.iterations}", "--out", str(out),
    ]  # fmt: skip
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def same_tables(first: Path, second: Path) -> bool:
    return all((first / t).read_bytes() == (second / t).read_bytes() for t in TABLES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        walk = work / "dsvgd_breast_cancer_walk.toml"
        walk.write_text(without_server_case(SCENARIO.read_text()))
        print(f"{args.runs} runs x {args.iterations} slots per case")
        for name, scenario, fast in (("whole", SCENARIO, "auto"), ("walk", walk, "vectorized")):
            event = timed(scenario, "event", work / f"{name}-event", args)
            vectorized = timed(scenario, fast, work / f"{name}-{fast}", args)
            same = same_tables(work / f"{name}-event", work / f"{name}-{fast}")
            print(
                f"{name:6s} event {event:7.1f} s   {fast} {vectorized:7.1f} s   "
                f"ratio {event / vectorized:5.2f}x   tables identical: {same}"
            )


if __name__ == "__main__":
    main()
