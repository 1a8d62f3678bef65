"""Particle protocols on the vectorized engine (issue 23, item 2): whole ``gossipsim run ...
--no-plots`` commands on the DSVGD breast-cancer scenario (``scenarios/dsvgd_breast_cancer.toml``),
``--engine event`` against ``--engine vectorized``, in one run of this script:

- ``whole``: the scenario as shipped, every case (centralised SVGD, DSVGD on three graphs and with
  the parameter server scheduling round-robin, Gaussian G-FVL), 16 runs by default (the shipped
  file has 10; from 16 on ``--engine auto`` picks the vectorized engine for every case);
- ``server``: its server case alone (``architecture = "server"``);
- ``walk`` (with ``--rows``): the scenario without its server case.

Each command runs in a fresh process on this checkout; the best of ``--repeat`` wall times counts
(this machine's timings vary by tens of percent). The two engines' tables (runs, requests, metrics)
are compared byte for byte.

    python benchmarks/particle_batches.py [--runs 16] [--iterations 2000] [--repeat 1]
                                          [--rows whole,server]

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
ENTRY = "import sys; from gossipsim.cli.parser import main; sys.exit(main())"
TABLES = ("runs.csv", "requests.csv", "metrics.csv")
SERVER_CASE = '[[sweep.cases]]\nlabel = "DSVGD, server'


def _server_case(text: str) -> tuple[int, int]:
    """Where the ``[[sweep.cases]]`` entry of the parameter server begins and ends in ``text``."""
    begin = text.index(SERVER_CASE)
    end = text.find("[[sweep.cases]]", begin + len(SERVER_CASE))
    return begin, len(text) if end < 0 else end


def without_server_case(text: str) -> str:
    """The scenario's TOML without its ``[[sweep.cases]]`` entry of the parameter server."""
    begin, end = _server_case(text)
    return text[:begin] + text[end:]


def only_server_case(text: str) -> str:
    """The scenario's TOML with its server case as its only ``[[sweep.cases]]`` entry."""
    begin, end = _server_case(text)
    return text[: text.index("\n[[sweep.cases]]") + 1] + text[begin:end]


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
    parser.add_argument("--rows", default="whole,server", help="of whole, server, walk")
    args = parser.parse_args()
    rows = args.rows.split(",")
    if not set(rows) <= {"whole", "server", "walk"}:
        parser.error(f"--rows: {args.rows!r}; allowed: whole, server, walk, comma-separated")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        scenarios = {"whole": SCENARIO}
        for name, edit in (("server", only_server_case), ("walk", without_server_case)):
            scenarios[name] = work / f"dsvgd_breast_cancer_{name}.toml"
            scenarios[name].write_text(edit(SCENARIO.read_text()))
        print(f"{args.runs} runs x {args.iterations} slots per case")
        for name in rows:
            event = timed(scenarios[name], "event", work / f"{name}-event", args)
            vectorized = timed(scenarios[name], "vectorized", work / f"{name}-vectorized", args)
            same = same_tables(work / f"{name}-event", work / f"{name}-vectorized")
            print(
                f"{name:6s} event {event:7.1f} s   vectorized {vectorized:7.1f} s   "
                f"ratio {event / vectorized:5.2f}x   tables identical: {same}"
            )


if __name__ == "__main__":
    main()
