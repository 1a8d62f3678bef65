"""Figures against the runs: for each shipped sweep, the whole command ``gossipsim run SCENARIO
--no-plots`` (the engine ``auto`` picks, one worker), then the whole command ``gossipsim plot``
on the folder it wrote (every figure, PNG), each in a fresh process as a user types them, and the
ratio plot / run. The goal (issue 23, item 4): drawing the figures takes less time than the run
that made the tables, ratio < 1.

The first ``gossipsim plot`` of a folder written with ``--no-plots`` is the one timed: it also
lays out the graphs of the visit map (saved in ``graphs/`` for later plots). With ``--repeat``
the pair runs again in a fresh folder and the best of each counts (this machine's timings vary by
tens of percent: other work shares its two cores, and the load average is printed). Beside the
wall times, each command's processor time (user + system): on a busy machine the steadier
measure of what a command costs.
``--per-figure`` adds one more process per scenario that times each figure on its own (the tables
read once; the same functions ``gossipsim plot`` calls), to show which figures cost what.

    python benchmarks/figures.py [--scenario NAME ...] [--all] [--repeat 1] [--per-figure]
                                 [--checkout DIR]

``--checkout DIR`` measures the gossipsim of another checkout (its ``gossipsim/`` package on the
path of the child processes, which start in a scratch folder so that the current folder's
``gossipsim/`` does not come first; for a before/after comparison); by default the checkout this
file belongs to. The default scenarios are those that run in seconds to a minute; ``--all`` adds the
slow ones (``cover_time_vs_nodes``, ``fig4_beta_exponential``, ``fig5_beta_exponential_unlearning``
and the DSVGD ones: minutes each on the event engine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from whole_command import ENTRY, ROOT, child_env  # this checkout's gossipsim, bytecode cached

FAST = (
    "unlearning_ba_sweep",
    "fig3_beta_bernoulli",
    "server_vs_walk",
    "unlearning_karate",
    "unlearning_complete",
)
SLOW = (
    "cover_time_vs_nodes",
    "fig4_beta_exponential",
    "fig5_beta_exponential_unlearning",
    "dsvgd_mixture_2d",
    "dsvgd_breast_cancer",
)

# The child of --per-figure: reads the folder once as gossipsim plot reads it (without its study
# where this gossipsim wrote it, else with load_results), then draws each figure gossipsim plot
# draws, timed on its own; prints {figure: seconds} as JSON on its last line. (Where a figure
# imports a module first, e.g. SciPy's optimiser for a graph's layout, its time includes it.)
PER_FIGURE = r"""
import json, sys, time
from pathlib import Path
from gossipsim.results import results
try:
    from gossipsim.results.figuretables import load_figure_tables
except ImportError:  # a checkout before results.py was split (issue 31)
    load_figure_tables = getattr(results, "load_figure_tables", lambda folder: None)
try:
    from gossipsim.figures.standard import _figure_jobs
except ImportError:  # a checkout before the figures were split (issue 31)
    from gossipsim.figures.plots import _figure_jobs

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
start = time.perf_counter()
drawn = load_figure_tables(folder)
if drawn is None:
    res = results.load_results(folder)
    args = (res.metrics, res.runs, res.requests, res.visits, res.figure_summary(), "median",
            res.graphs, res.particles)
else:
    args = (drawn.metrics, drawn.runs, drawn.requests, drawn.visits, drawn.summary, "median",
            drawn.graphs, drawn.particles)
times = {"(reading the folder)": time.perf_counter() - start}
jobs = _figure_jobs(*args)
for name, job in jobs.items():
    start = time.perf_counter()
    if job(out / f"{name}.png") is not None:
        times[name] = time.perf_counter() - start
print(json.dumps(times))
"""


def env_for(checkout: Path) -> dict[str, str]:
    env = child_env()
    if checkout != ROOT:
        rest = [p for p in env["PYTHONPATH"].split(os.pathsep) if p and Path(p) != ROOT]
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), *rest])
    return env


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall time and processor time (user + system, the process and its children) of one whole
    gossipsim command in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", ENTRY, *args],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        cwd=cwd,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def per_figure(folder: Path, out: Path, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", PER_FIGURE, str(folder), str(out)],
        check=True, env=env, capture_output=True, text=True, cwd=out.parent,
    )  # fmt: skip
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", nargs="+", choices=FAST + SLOW, default=None)
    parser.add_argument("--all", action="store_true", help="the slow scenarios too")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--per-figure", action="store_true", help="time each figure on its own")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="a gossipsim checkout to time")
    args = parser.parse_args()
    names = args.scenario or (FAST + SLOW if args.all else FAST)
    checkout = args.checkout.resolve()
    if not (checkout / "gossipsim" / "__init__.py").exists():
        parser.error(f"--checkout: no gossipsim/ package in {checkout}")
    env = env_for(checkout)
    print(f"gossipsim of {checkout}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          f"cores", flush=True)  # fmt: skip
    print(f"{'scenario':<34}{'run (s)':>9}{'plot (s)':>10}{'plot/run':>10}"
          f"{'run cpu':>10}{'plot cpu':>10}{'ratio':>7}", flush=True)  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="gossipsim-figures-") as tmp:
        for name in names:
            scenario = ROOT / "scenarios" / f"{name}.toml"
            run_s = plot_s = run_cpu = plot_cpu = float("inf")
            for k in range(max(1, args.repeat)):
                folder = Path(tmp) / f"{name}-{k}"
                wall, cpu = timed(["run", str(scenario), "--out", str(folder), "--no-plots",
                                   "--progress", "off"], env, Path(tmp))  # fmt: skip
                run_s, run_cpu = min(run_s, wall), min(run_cpu, cpu)
                if args.per_figure and k == 0:  # the folder as the run left it (no graph layout)
                    shutil.copytree(folder, Path(tmp) / f"{name}-figures")
                wall, cpu = timed(["plot", str(folder)], env, Path(tmp))
                plot_s, plot_cpu = min(plot_s, wall), min(plot_cpu, cpu)
            rows.append((name, run_s, plot_s))
            print(f"{name:<34}{run_s:9.2f}{plot_s:10.2f}{plot_s / run_s:10.2f}"
                  f"{run_cpu:10.2f}{plot_cpu:10.2f}{plot_cpu / run_cpu:7.2f}",
                  flush=True)  # fmt: skip
            if args.per_figure:
                times = per_figure(Path(tmp) / f"{name}-figures", Path(tmp) / f"{name}-png", env)
                print("    " + ", ".join(f"{k} {v:.2f}" for k, v in times.items()), flush=True)
    slower = [name for name, run_s, plot_s in rows if plot_s >= run_s]
    print(f"figures slower than the run: {', '.join(slower) if slower else 'none'}")


if __name__ == "__main__":
    main()
