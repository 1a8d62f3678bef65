"""Issue 23's speed table: whole ``gossipsim run ... --no-plots`` commands on the event engine and on
the vectorized engine, measured in the same run, for the studies that spend their time simulating.

Workloads (shipped scenarios, as a user runs them):

- ``fig4``: ``scenarios/fig4_beta_exponential.toml`` (natural-gradient G-FVL, REINFORCE, 3 cases ×
  100 runs, 20,000 local iterations each);
- ``fig5``: ``scenarios/fig5_beta_exponential_unlearning.toml`` (100 runs × 20,000 slots, a request
  and the retrain baseline);
- ``logistic``: ``scenarios/logistic_breast_cancer_karate.toml`` (full and diagonal Gaussians,
  30 runs × 20,000 slots, reparameterisation estimator);
- ``fig3_5000``: ``scenarios/fig3_beta_bernoulli.toml`` with 5,000 runs per topology and every 10th
  slot recorded (the conjugate kernel: issue 10's ratio, to keep).

Each command runs in a fresh process; the tables of the two engines are compared byte for byte
(they are identical by design). ``--runs`` and ``--iterations`` shrink a workload (the ratio then
measures smaller batches and a larger share of start-up); ``--before DIR`` also times the event
engine of another checkout (e.g. a worktree of the commit before this issue, with its own
``.venv``), the "before" of the issue's table.

    python benchmarks/batched_engines.py [--workload fig4 fig5 logistic fig3_5000] [--runs N]
        [--iterations N] [--before /path/to/old/checkout]

Targets (issue 23): fig4 and fig5 ≥ 10×, logistic ≥ 5×, fig3_5000 ≥ 6×.
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from whole_command import ENTRY, ROOT  # the console script's entry, this checkout

TABLES = ("metrics.csv", "runs.csv", "requests.csv")

#: the node each workload's request is for: ``--iterations`` moves it to the middle of the run
REQUESTS = {"fig5": 9, "logistic": 0}
WORKLOADS: dict[str, tuple[str, list[str]]] = {
    "fig4": ("scenarios/fig4_beta_exponential.toml", []),
    "fig5": ("scenarios/fig5_beta_exponential_unlearning.toml", []),
    "logistic": ("scenarios/logistic_breast_cancer_karate.toml", []),
    "fig3_5000": (
        "scenarios/fig3_beta_bernoulli.toml",
        ["--runs", "5000", "--set", "metrics.record_every=10"],
    ),
}


def timed(checkout: Path, args: list[str]) -> float:
    """Wall seconds of one ``gossipsim`` command of ``checkout`` (its own .venv)."""
    python = checkout / ".venv" / "bin" / "python"
    begin = time.perf_counter()
    subprocess.run([str(python), "-c", ENTRY, *args], cwd=checkout, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - begin


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--runs", type=int, help="override every workload's runs")
    parser.add_argument("--iterations", type=int, help="override scenario.iterations")
    parser.add_argument("--before", type=Path, help="a checkout whose event engine is 'before'")
    args = parser.parse_args()
    print(f"{'workload':<10} {'event s':>9} {'vectorized s':>13} {'ratio':>7}"
          + (f" {'before s':>9} {'ratio':>7}" if args.before else ""))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.workload:
            scenario, extra = WORKLOADS[name]
            extra = list(extra)
            if args.runs:
                extra += ["--runs", str(args.runs)]
            if args.iterations:
                extra += ["--set", f"scenario.iterations={args.iterations}"]
                if name in REQUESTS:
                    at = args.iterations // 2
                    extra += ["--set", f"unlearning=[{{node={REQUESTS[name]}, at_iteration={at}}}]"]
            outs = {}
            seconds = {}
            for engine in ("vectorized", "event"):
                out = Path(tmp) / f"{name}-{engine}"
                outs[engine] = out
                seconds[engine] = timed(ROOT, ["run", scenario, "--out", str(out), "--no-plots",
                                               "--progress", "off", "--engine", engine, *extra])  # fmt: skip
            same = all(
                filecmp.cmp(outs["event"] / t, outs["vectorized"] / t, shallow=False)
                for t in TABLES
            )
            line = (f"{name:<10} {seconds['event']:>9.1f} {seconds['vectorized']:>13.1f} "
                    f"{seconds['event'] / seconds['vectorized']:>6.1f}x")  # fmt: skip
            if args.before:
                before = timed(args.before, ["run", scenario, "--out", str(Path(tmp) / f"{name}-b"),
                                             "--no-plots", "--engine", "event", *extra])  # fmt: skip
                line += f" {before:>9.1f} {before / seconds['vectorized']:>6.1f}x"
            print(line + ("" if same else "   TABLES DIFFER"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
