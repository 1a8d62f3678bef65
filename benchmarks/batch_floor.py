"""What a batched step can still gain: the marginal cost of one run-slot on the event engine and on
the vectorized engine with the scenario's runs and with four times as many, in one process.

A slot of the vectorized engine costs Python overhead shared by the batch plus arithmetic that each
run needs for itself (its draws, its factorisations, its likelihood at its own particles). When the
cost per run-slot no longer falls as the batch grows, the overhead is amortised and what is left is
the runs' own arithmetic: the event engine must do the same arithmetic for the tables to be the
same, so ``event / vectorized at 4x runs`` bounds the ratio any batching can reach on this machine
(faster arithmetic speeds both engines).

The marginal cost is measured without start-up, world building and targets: each engine runs the
workload for ``--slots`` and for twice as many slots, and the difference is divided by the runs and
the extra slots (requests move to the middle of the run). Workloads (shipped scenarios):

- ``fig5``: ``fig5_beta_exponential_unlearning`` (Beta–exponential, REINFORCE, 300 Beta draws a
  slot per run);
- ``logistic``: ``logistic_breast_cancer_karate`` (full and diagonal Gaussians, reparameterisation);
- ``dsvgd``: the ``DSVGD, complete`` case of ``dsvgd_breast_cancer`` (20 particles, d = 32);
- ``gfvl_exact``: its ``G-FVL (Gaussian)`` case (full covariance, exact estimator).

    python benchmarks/batch_floor.py [--workload fig5 logistic dsvgd gfvl_exact] [--slots 500]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

import gossipsim as gs

ROOT = Path(__file__).resolve().parents[1]

#: scenario file, the case label kept (None: every case), the runs of the event engine's timing
WORKLOADS: dict[str, tuple[str, str | None, int]] = {
    "fig5": ("fig5_beta_exponential_unlearning.toml", None, 8),
    "logistic": ("logistic_breast_cancer_karate.toml", None, 4),
    "dsvgd": ("dsvgd_breast_cancer.toml", "DSVGD, complete", 8),
    "gfvl_exact": ("dsvgd_breast_cancer.toml", "G-FVL (Gaussian)", 4),
}


def scenario(name: str, slots: int) -> dict[str, Any]:
    """The workload's scenario with ``slots`` slots, its requests in the middle."""
    path, label, _ = WORKLOADS[name]
    raw = tomllib.loads((ROOT / "scenarios" / path).read_text())
    raw = copy.deepcopy(raw)
    if label is not None:
        raw["sweep"]["cases"] = [c for c in raw["sweep"]["cases"] if c["label"] == label]
    raw["scenario"]["iterations"] = slots
    for request in raw.get("unlearning", []):
        request["at_iteration"] = slots // 2
    return raw


def seconds(raw: dict[str, Any], runs: int, engine: str) -> float:
    begin = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gs.run(raw, runs=runs, engine=engine, progress=False)
    return time.perf_counter() - begin


def per_run_slot(name: str, runs: int, engine: str, slots: int) -> float:
    """Microseconds per run and slot, from the difference of ``slots`` and ``2 * slots``."""
    short = seconds(scenario(name, slots), runs, engine)
    long = seconds(scenario(name, 2 * slots), runs, engine)
    return (long - short) / (runs * slots) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--slots", type=int, default=500)
    args = parser.parse_args()
    print(f"{'workload':<11} {'runs':>5} {'event us':>9} {'vec us':>8} {'4x runs us':>11} "
          f"{'ratio':>6} {'bound':>6}   (per run-slot; ratio = event / vec, bound = event / "
          "vec at 4x runs)")  # fmt: skip
    for name in args.workload:
        raw = scenario(name, args.slots)
        runs = max(int(raw["scenario"]["runs"]), 16)  # auto vectorises from 16 runs
        seconds(scenario(name, 20), 2, "vectorized")  # imports and first-time caches
        event = per_run_slot(name, WORKLOADS[name][2], "event", args.slots)
        vectorized = per_run_slot(name, runs, "vectorized", args.slots)
        wide = per_run_slot(name, 4 * runs, "vectorized", args.slots)
        print(f"{name:<11} {runs:>5} {event:>9.1f} {vectorized:>8.1f} {wide:>11.1f} "
              f"{event / vectorized:>5.1f}x {event / wide:>5.1f}x", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
