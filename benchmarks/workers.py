"""Parallel sweeps: whole ``gossipsim run --no-plots`` commands with ``--workers 1``, ``2`` and
the machine's number of cores (``os.cpu_count()``; one command when that is 2), the speed-ups,
the serial part they imply by Amdahl's law, and the speed-up it predicts on 16 cores; then where
the parent process spends its time (the serial part).

Amdahl: a command whose serial part is a fraction s of its time on one worker takes
T_n = T_1 (s + (1 - s) g(n)) on n workers, where g(n) = ceil(U / n) / U is the share of the U units
of work (one event-engine run, or a batch of up to 1,024 vectorised runs of a variant) that the
busiest worker runs (1/n when n divides U). So

    s = (T_n / T_1 - g(n)) / (1 - g(n))        (= (T_n / T_1 - 1/n) / (1 - 1/n) when n divides U)

and the speed-up on m cores is T_1 / T_m = 1 / (s + (1 - s) g(m)), at most 1/s however many cores,
and no more workers than U are started (gossipsim caps ``--workers`` by the units of work). The
serial part includes the pool's start-up and everything the parent does before and after the
runs; timings on a shared machine make s larger than it is (another process's work looks serial).

Cases:

- ``big-graph``: 8 event-engine runs of 100,000 slots on a 200,000-node Barabási–Albert graph
  (m = 3): the graph takes seconds to build, as long as a few runs;
- ``logistic``: the shipped logistic-regression scenario (two families, breast cancer on the karate
  club), 4 runs of 600 slots with the request at slot 300: four target searches of about a second
  each;
- ``ba-sweep``: the shipped ``unlearning_ba_sweep`` (6 variants of 200 vectorised runs: 6 units).

Each command runs in a fresh process; the best of ``--repeat`` wall times counts (this machine's
timings vary by tens of percent), and the tables of the commands are compared byte for byte. Then
one more command per case at the largest number of workers runs with timers around gossipsim's
functions in the parent process (``--no-breakdown`` skips it): start-up and imports, checking the
scenario and building the worlds and targets, the runs (the pool's start-up, handing out work,
waiting for the workers, committing their results), merging the parts, the theory, the tables and
summary.json.

    python benchmarks/workers.py [--case big-graph logistic ba-sweep] [--repeat 2] [--no-breakdown]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from whole_command import ENTRY, PHASES, ROOT, child_env  # this checkout's gossipsim

TABLES = ("runs.csv", "metrics.csv", "requests.csv")
CORES_PREDICTED = 16

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
    "ba-sweep": (ROOT / "scenarios" / "unlearning_ba_sweep.toml", []),
}  # fmt: skip

# The timed child of whole_command.py (timers around gossipsim's functions, in this process only:
# a pool worker's time is not the parent's), also recording the sweep's units of work.
BREAKDOWN = PHASES.replace(
    "T_MAIN = time.perf_counter()",
    """import gossipsim.api as _api
_count_units = _api.count_units
def _counted(*args, **kwargs):
    n = _count_units(*args, **kwargs)
    totals["units"] = float(n)
    return n
_api.count_units = _counted
T_MAIN = time.perf_counter()""",
)


def command(scenario: Path, out: Path, flags: list[str], workers: int) -> list[str]:
    return [
        "run", str(scenario), "--out", str(out), "--no-plots", "--progress", "off",
        "--workers", str(workers), *flags,
    ]  # fmt: skip


def whole(scenario: Path, out: Path, flags: list[str], workers: int) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, *command(scenario, out, flags, workers)],
        check=True, env=child_env(), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - start


def busiest_share(workers: int, units: int | None) -> float:
    """g(n): the share of the units of work the busiest of ``workers`` runs (1/n if not known)."""
    if not units:
        return 1.0 / workers
    return math.ceil(units / min(workers, units)) / units


def serial_fraction(t1: float, tn: float, share: float) -> float:
    """Amdahl's serial part s from T_1 and T_n: T_n / T_1 = s + (1 - s) g(n)."""
    return (tn / t1 - share) / (1.0 - share)


def predicted_speedup(s: float, share: float) -> float:
    return 1.0 / (s + (1.0 - s) * share)


def breakdown(scenario: Path, out: Path, flags: list[str], workers: int) -> dict[str, float]:
    """Where the parent process of one command spends its time (seconds by phase)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", BREAKDOWN, *command(scenario, out, flags, workers)],
        check=True, env=child_env(), capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    data = json.loads(done.stdout.strip().splitlines()[-1])
    t = data["totals"]
    merging = t.get("merging (collect)", 0.0) + t.get("reading parts", 0.0)
    running = t.get("running", 0.0)
    known = ("world building", "running", "theory", "tables", "removing parts")
    phases = {
        "interpreter start and exit": wall - data["child"],
        "imports": data["imports"],
        "scenario, worlds and targets (checking)": t.get("world building", 0.0),
        "merging the parts": merging,
        "theory": t.get("theory", 0.0),
        "tables and summary.json": t.get("tables", 0.0),
        "removing the parts": t.get("removing parts", 0.0),
        "other (scenario file, store, summary line)": data["main"]
        - sum(t.get(name, 0.0) for name in known)
        - merging,
    }
    phases["serial: all but the runs"] = wall - running
    phases["runs (pool start, hand-out, waiting, commits)"] = running
    phases["  of which committing results"] = t.get("commits", 0.0)
    phases["wall"] = wall
    phases["units"] = t.get("units", 0.0)
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", nargs="+", choices=tuple(CASES), default=list(CASES))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-breakdown", action="store_true", help="wall times only")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    counts = sorted({1, 2, cores})
    with tempfile.TemporaryDirectory(prefix="gossipsim-workers-") as tmp:
        folder = Path(tmp)
        print(f"load average {os.getloadavg()[0]:.1f}; os.cpu_count() = {cores}: workers "
              f"{', '.join(map(str, counts))}"
              + (" (2 is the machine's count: timed once)" if cores == 2 else ""),
              flush=True)  # fmt: skip
        for name in args.case:
            path, flags = CASES[name]
            if path is None:
                path = folder / "big_graph.toml"
                path.write_text(BIG_GRAPH, encoding="utf-8")
            best: dict[int, float] = {}
            for _ in range(max(1, args.repeat)):
                for workers in counts:
                    elapsed = whole(path, folder / f"{name}-{workers}", flags, workers)
                    best[workers] = min(best.get(workers, elapsed), elapsed)
            same = all(
                (folder / f"{name}-1" / t).read_bytes() == (folder / f"{name}-{n}" / t).read_bytes()
                for n in counts[1:]
                for t in TABLES
                if (folder / f"{name}-1" / t).exists()
            )
            times = ", ".join(f"--workers {n} {best[n]:.2f} s" for n in counts)
            print(f"{name}: {times} (best of {args.repeat}); identical tables: {same}", flush=True)
            parts: dict[str, float] = {}
            if not args.no_breakdown:
                parts = breakdown(path, folder / f"{name}-timed", flags, counts[-1])
            units = int(parts.get("units", 0)) or None
            s = 0.0
            for n in counts[1:]:
                share = busiest_share(n, units)
                s = serial_fraction(best[1], best[n], share)
                print(f"  {n} workers: speed-up {best[1] / best[n]:.2f}x; busiest worker's share "
                      f"g = {share:.3f}; serial part s = (T_n/T_1 - g)/(1 - g) = {s:.3f} "
                      f"({s * best[1]:.2f} s of T_1)")  # fmt: skip
            share16 = busiest_share(CORES_PREDICTED, units)
            if 0.0 <= s <= 1.0:
                print(f"  predicted on {CORES_PREDICTED} cores: {predicted_speedup(s, share16):.2f}x"
                      f" (units of work: {units if units else 'unknown'}; g = {share16:.3f}; "
                      f"at most 1/s = {1 / s if s > 0 else float('inf'):.2f}x on any number)",
                      flush=True)  # fmt: skip
            else:  # more workers took longer than the parts can explain: other load on the cores
                print(f"  s outside [0, 1]: the timings measure this machine's other load, not "
                      f"the sweep (load average {os.getloadavg()[0]:.1f}); no prediction")  # fmt: skip
            if parts:
                # the serial part as timed in the parent (what it does outside the runs): Amdahl's
                # s without the noise of comparing two commands
                serial = parts["serial: all but the runs"] / best[1]
                if serial < 1.0:
                    print(f"  serial part timed in the parent: {serial:.3f} of T_1, predicting "
                          f"{predicted_speedup(serial, share16):.2f}x on {CORES_PREDICTED} cores")  # fmt: skip
                print(f"  the parent process at --workers {counts[-1]} (one timed command, "
                      f"{parts['wall']:.2f} s):")  # fmt: skip
                for phase, seconds in parts.items():
                    if phase not in ("wall", "units"):
                        print(f"    {phase:<48}{seconds:7.2f} s")
            print(flush=True)


if __name__ == "__main__":
    main()
