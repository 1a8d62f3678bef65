"""Whole commands: ``gossipsim run ... --no-plots`` as a user types it, start-up and tables
included, on the event engine and on the vectorized engine, for two scenarios:

- ``unlearning``: 3,000 runs of conjugate unlearning on the complete graph K = 10 (beta–Bernoulli,
  node 9 forgotten at slot 200, ``stop_when_done``; ``scenarios/unlearning_complete.toml`` with
  3,000 runs and the request at slot 200);
- ``fig3``: the paper's Fig. 3 scenario as shipped (3 topologies × 1,000 runs × 300 slots, every
  slot recorded: 900,000 rows of metrics.csv);
- ``fig3-15000``: the same with 5,000 runs on each of complete, ring and star and every 10th slot
  recorded (issue 31's workload: 450,000 rows of metrics.csv, where start-up and the summary weigh
  most).

Each command runs in a fresh process (``python -c "from gossipsim.cli import main; main()"``, what
the ``gossipsim`` console script does) on the checkout this file belongs to; the best of
``--repeat`` wall times counts (this machine's timings vary by tens of percent). The two engines'
tables are compared byte for byte. Then each command runs once more with phase timers (wrapping
gossipsim's functions in the child process, so every figure comes from the same code path) to show
where the time goes; the *serial part* is everything but the simulation of the runs (start-up,
world building, commits, merging, tables): what caps a sweep's speed-up with more workers. A line
says how small that rest would have to be for the target ratio, given the two engines' simulation
and measurement times; another gives the least that rest can be while the tables are written as
today (the interpreter, the third-party imports other than pandas and pyarrow, the tables phase)
and the ratio it would leave; and a last one gives the ratio of what gossipsim controls: each timed
command without the interpreter's start and exit and without third-party imports (NumPy, SciPy,
NetworkX, pandas, ...: the outermost of them, from ``python -X importtime``, which the timed run
uses and which makes its imports a little slower).

    python benchmarks/whole_command.py [--scenario unlearning fig3 fig3-15000] [--repeat 3] [--no-phases]

Targets: vectorized at least 5x the event engine on ``unlearning``, 6x on ``fig3`` (issue 10) and
on ``fig3-15000`` (issue 31).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from gossipsim.cli import main; sys.exit(main())"
ENGINES = ("event", "vectorized")
TABLES = ("metrics.csv", "runs.csv", "requests.csv", "visits.csv", "failures.csv")
#: third-party packages a run imports only to build and write its tables (an import is counted
#: under the outermost package: gossipsim imports NumPy before pandas, so NumPy counts for itself)
TABLE_PACKAGES = ("pandas", "pyarrow")

UNLEARNING = """\
# 3,000 runs of conjugate unlearning on the complete graph (benchmarks/whole_command.py)
[scenario]
name = "unlearning_3000"
seed = 11
runs = 3000
iterations = 400
stop_when_done = true

[topology]
kind = "complete"
nodes = 10

[model]
kind = "beta-bernoulli"
prior = { a = 2, b = 2 }

[data]
points_per_node = 100
theta = 0.75

[[unlearning]]
node = 9
at_iteration = 200

[metrics]
tolerance = 1e-9
"""

# The child of the phase breakdown: wraps gossipsim's functions with timers, runs the command, and
# prints the totals as JSON on its last line. Written against names that exist before and after
# the batched commits (missing ones are skipped), so that old and new code are measured alike.
PHASES = r"""
import time
T0 = time.perf_counter()
import functools, importlib, json, sys
import gossipsim.cli

totals = {}
depth = {}

def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if depth.get(name):  # recursion or nesting of the same phase: count once
            return fn(*args, **kwargs)
        depth[name] = 1
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - start
            depth[name] = 0
    return wrapper

def patch(module, attr, name, owners=()):
    mod = importlib.import_module(module)
    if not hasattr(mod, attr):
        return
    fn = timed(name, getattr(mod, attr))
    setattr(mod, attr, fn)
    for owner in owners:  # modules that imported the function by name
        try:
            other = importlib.import_module(owner)
        except ImportError:
            continue
        if hasattr(other, attr):
            setattr(other, attr, fn)

def patch_method(module, cls, attr, name):
    owner = getattr(importlib.import_module(module), cls, None)
    if owner is not None and hasattr(owner, attr):
        setattr(owner, attr, timed(name, getattr(owner, attr)))

patch("gossipsim.api", "check", "world building")
patch("gossipsim.api", "_execute", "running")
patch("gossipsim.execution.executors", "run_unit", "simulation")
patch("gossipsim.measurement.measure", "measure", "measurement", ["gossipsim.execution.vectorized.per_run", "gossipsim.execution.runner"])
patch("gossipsim.measurement.batch", "measure_batch", "measurement", ["gossipsim.execution.vectorized.first_visits"])
patch_method("gossipsim.results.store", "RunStore", "save", "commits")
patch_method("gossipsim.results.store", "RunStore", "commit", "commits")
patch_method("gossipsim.results.store", "RunStore", "load", "reading parts")
patch("gossipsim.api", "collect", "merging (collect)")
patch("gossipsim.api", "_attach_theory", "theory")
patch_method("gossipsim.results.results", "Results", "write_tables", "tables")
patch_method("gossipsim.results.store", "RunStore", "finish", "removing parts")
# the modules patched above are those a run imports (the CLI imports them lazily, inside main):
# their import is counted here, as start-up, and not inside the first phase that needs them
T_MAIN = time.perf_counter()
sys.argv = ["gossipsim", *sys.argv[1:]]
code = gossipsim.cli.main()  # as the console script calls it
T_END = time.perf_counter()
print(json.dumps({"imports": T_MAIN - T0, "main": T_END - T_MAIN, "child": T_END - T0,
                  "totals": totals, "code": code}))
"""


def write_scenarios(folder: Path) -> dict[str, Path]:
    unlearning = folder / "unlearning_3000.toml"
    unlearning.write_text(UNLEARNING, encoding="utf-8")
    fig3 = folder / "fig3_beta_bernoulli.toml"
    shutil.copy(ROOT / "scenarios" / "fig3_beta_bernoulli.toml", fig3)
    fig3_15000 = folder / "fig3_15000.toml"
    text = fig3.read_text(encoding="utf-8")
    for old, new in (("runs = 1000", "runs = 5000"), ("record_every = 1", "record_every = 10")):
        assert text.count(f"\n{old}\n") == 1, old  # the shipped file's keys, once each
        text = text.replace(f"\n{old}\n", f"\n{new}\n")
    fig3_15000.write_text(text, encoding="utf-8")
    return {"unlearning": unlearning, "fig3": fig3, "fig3-15000": fig3_15000}


PYCACHE = Path(tempfile.gettempdir()) / "gossipsim-whole-command-pycache"


def child_env() -> dict[str, str]:
    """This checkout first on the path of the child processes, with its bytecode cached (as an
    installed package's is: PYTHONDONTWRITEBYTECODE would otherwise make every start compile
    gossipsim again), in a folder of its own outside the checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def command(scenario: Path, out: Path, engine: str) -> list[str]:
    return [
        "run", str(scenario), "--out", str(out), "--engine", engine, "--no-plots",
        "--progress", "off",
    ]  # fmt: skip


def whole(scenario: Path, out: Path, engine: str) -> float:
    """Wall time of one whole command in a fresh process."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, *command(scenario, out, engine)],
        check=True,
        env=child_env(),
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def phases(scenario: Path, out: Path, engine: str) -> dict[str, float]:
    """Where one whole command spends its time (seconds by phase, from timers in the child)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PHASES, *command(scenario, out, engine)],
        check=True,
        env=child_env(),
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    data = json.loads(done.stdout.strip().splitlines()[-1])
    third_party = third_party_imports(done.stderr)
    table_packages = sum(third_party.get(name, 0.0) for name in TABLE_PACKAGES)
    t = data["totals"]
    simulation = t.get("simulation", 0.0)
    measurement = t.get("measurement", 0.0)
    commits = t.get("commits", 0.0)
    # parts are read inside collect (a generator) or before it: either way, one phase
    merging = t.get("merging (collect)", 0.0) + t.get("reading parts", 0.0)
    out_phases = {
        "wall": wall,
        "interpreter start and exit": wall - data["child"],
        "imports (the modules a run needs)": data["imports"],
        "third-party imports (start-up and later)": sum(third_party.values()),
        "  of which pandas and pyarrow (tables)": table_packages,
        "world building and checks": t.get("world building", 0.0),
        "simulation (walks, protocols)": simulation - measurement,
        "measurement": measurement,
        "commits to the store": commits,
        "running, other (executor, progress)": t.get("running", 0.0) - simulation - commits,
        "reading parts, merging (collect)": merging,
        "theory": t.get("theory", 0.0),
        "tables (CSV, Parquet, summary)": t.get("tables", 0.0),
        "removing parts": t.get("removing parts", 0.0),
    }
    out_phases["other (scenario, store, summary print)"] = (
        data["main"]
        - sum(
            t.get(name, 0.0)
            for name in ("world building", "running", "theory", "tables", "removing parts")
        )
        - merging
    )
    out_phases["serial part (all but simulation)"] = wall - simulation
    return out_phases


def third_party_imports(importtime: str) -> dict[str, float]:
    """Seconds spent importing packages other than gossipsim and the standard library, from the
    ``-X importtime`` lines of a child, by top-level package: the cumulative time of each outermost
    such import (one made by gossipsim or the standard library, not by another third-party
    package; what that import pulls in, NumPy under pandas say, counts for the outer one)."""
    entries = []  # (depth, name, cumulative seconds), in the order Python reports them (post-order)
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue  # the header line
        depth = (len(name) - len(name.lstrip(" "))) // 2
        entries.append((depth, name.strip(), int(cumulative) / 1e6))
    totals: dict[str, float] = {}
    outer: list[tuple[int, bool]] = []  # enclosing imports: (depth, third-party)
    for depth, name, seconds in reversed(entries):  # parents come before their children
        while outer and outer[-1][0] >= depth:
            outer.pop()
        top = name.split(".")[0]
        third = (
            top != "gossipsim" and top not in sys.stdlib_module_names and top != "_distutils_hack"
        )
        if third and not any(t for _, t in outer):
            totals[top] = totals.get(top, 0.0) + seconds
        outer.append((depth, third))
    return totals


def print_budget(table: dict[str, dict[str, float]], target: float) -> None:
    """What the target asks of the serial part. With the simulation (and measurement) times S_e and
    S_v of the two engines and a serial part F common to both, the ratio is (F + S_e) / (F + S_v):
    it reaches ``target`` only when F <= (S_e - target * S_v) / (target - 1)."""
    work = {
        engine: phases["simulation (walks, protocols)"] + phases["measurement"]
        for engine, phases in table.items()
    }
    serial = {engine: phases["wall"] - work[engine] for engine, phases in table.items()}
    allowed = (work["event"] - target * work["vectorized"]) / (target - 1)
    own = {  # what gossipsim controls: the wall without the interpreter and third-party imports
        engine: phases["wall"]
        - phases["interpreter start and exit"]
        - phases["third-party imports (start-up and later)"]
        for engine, phases in table.items()
    }
    # the least the vectorized rest can be while the tables are written as today: the interpreter,
    # the third-party imports the runs themselves need (all but the table packages) and the tables
    vectorized = table["vectorized"]
    needed_imports = (
        vectorized["third-party imports (start-up and later)"]
        - vectorized["  of which pandas and pyarrow (tables)"]
    )
    floor = (
        vectorized["interpreter start and exit"]
        + needed_imports
        + vectorized["tables (CSV, Parquet, summary)"]
    )
    print(
        f"  simulation and measurement: event {work['event']:.2f} s, vectorized "
        f"{work['vectorized']:.2f} s (ratio {work['event'] / work['vectorized']:.1f}x without "
        f"anything else); the rest: event {serial['event']:.2f} s, vectorized "
        f"{serial['vectorized']:.2f} s; {target:g}x needs the rest <= {allowed:.2f} s"
    )
    print(
        f"  the vectorized rest with today's tables is at least {floor:.2f} s: interpreter "
        f"{vectorized['interpreter start and exit']:.2f} + third-party imports other than the "
        f"table packages {needed_imports:.2f} + tables {vectorized['tables (CSV, Parquet, summary)']:.2f}"
        f" (at most {(floor + work['event']) / (floor + work['vectorized']):.1f}x with nothing else)"
    )
    print(
        f"  without interpreter start and third-party imports: event {own['event']:.2f} s, "
        f"vectorized {own['vectorized']:.2f} s, ratio {own['event'] / own['vectorized']:.1f}x"
    )


def same_tables(a: Path, b: Path) -> bool:
    return all(
        (a / name).read_bytes() == (b / name).read_bytes()
        for name in TABLES
        if (a / name).exists() or (b / name).exists()
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scenario",
        nargs="+",
        choices=("unlearning", "fig3", "fig3-15000"),
        default=["unlearning", "fig3", "fig3-15000"],
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-phases", action="store_true", help="wall times only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gossipsim-whole-") as tmp:
        folder = Path(tmp)
        files = write_scenarios(folder)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        for name in args.scenario:
            for engine in ENGINES:  # warm-up: bytecode cache, file cache
                whole(files[name], folder / f"{name}-warm", engine)
            best: dict[str, float] = {}
            for _ in range(max(1, args.repeat)):
                for engine in ENGINES:
                    elapsed = whole(files[name], folder / f"{name}-{engine}", engine)
                    best[engine] = min(best.get(engine, elapsed), elapsed)
            identical = same_tables(folder / f"{name}-event", folder / f"{name}-vectorized")
            ratio = best["event"] / best["vectorized"]
            target = {"unlearning": 5.0, "fig3": 6.0, "fig3-15000": 6.0}[name]
            print(f"{name}: gossipsim run --no-plots, best of {args.repeat}")
            print(f"  event engine     : {best['event']:6.2f} s")
            print(f"  vectorized engine: {best['vectorized']:6.2f} s")
            print(
                f"  ratio {ratio:.1f}x (target {target:g}x); identical tables: {identical}",
                flush=True,
            )
            if args.no_phases:
                continue
            table = {
                engine: phases(files[name], folder / f"{name}-{engine}-phases", engine)
                for engine in ENGINES
            }
            print(f"  where the time goes (s, one timed run each):{'event':>10}{'vectorized':>12}")
            for phase in table["event"]:
                print(
                    f"    {phase:<40}{table['event'][phase]:10.2f}"
                    f"{table['vectorized'][phase]:12.2f}"
                )
            print_budget(table, target)
            print(flush=True)


if __name__ == "__main__":
    main()
