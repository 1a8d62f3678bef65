"""Benchmark: seconds per DSVGD visit on breast cancer, and the engine's share of a run.

Usage::

    python benchmarks/dsvgd_visit.py [--iterations 2000] [--particles 20] [--variant sound]
                                     [--seed 1]

Builds the world of a breast-cancer DSVGD scenario (K = 10 nodes on a ring, Dirichlet(0.5) label
skew, N particles, d = 32: 30 features, the bias and log ξ) and runs one token walk on the event engine, timing every call of
the protocol's ``on_token`` (the visit: SVGD steps and likelihood gradients). Prints the seconds
per visit, the whole walk's seconds, the engine's share (the walk's time outside the visits:
scheduling, SimPy, link times, records; a ratio within the same run), and, for the whole command
a user runs, ``measure`` (KSD and held-out metrics of the recorded particle sets) beside it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gossipsim.engine.token import run_token
from gossipsim.measurement.measure import measure
from gossipsim.scheduling import Walker
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_world, make_protocol


def scenario(iterations: int, particles: int, variant: str) -> dict:
    return {
        "scenario": {"name": "bench", "seed": 1, "runs": 1, "iterations": iterations},
        "topology": {"kind": "ring", "nodes": 10},
        "model": {"kind": "logistic-regression"},
        "data": {"dataset": "breast_cancer", "partition": "dirichlet", "concentration": 0.5},
        "protocol": {"kind": "dsvgd", "particles": particles, "variant": variant},
        "metrics": {"record_every": 50},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--particles", type=int, default=20)
    parser.add_argument("--variant", default="sound", choices=("sound", "paper"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    raw = scenario(args.iterations, args.particles, args.variant)
    if args.variant == "paper":
        raw["protocol"].update(local_iterations=20, fit_iterations=20)
    world = build_world(parse_scenario(raw))
    data = world.model.fixed_data
    protocol = make_protocol(world, data, np.random.SeedSequence(args.seed))
    spent = [0.0]
    visit = protocol.on_token

    def timed(holder: int, slot: int):  # the visit, timed
        begin = time.perf_counter()
        out = visit(holder, slot)
        spent[0] += time.perf_counter() - begin
        return out

    protocol.on_token = timed  # type: ignore[method-assign]
    walker = Walker(world.indexed, "metropolis-hastings", np.random.default_rng(args.seed))
    begin = time.perf_counter()
    record = run_token(walker=walker, protocol=protocol, start=0, iterations=args.iterations)
    walk = time.perf_counter() - begin
    begin = time.perf_counter()
    measure(world, data, record, protocol.stats(), 0, args.seed)
    measured = time.perf_counter() - begin
    print(
        f"variant {args.variant}, N = {args.particles}, d = {world.model.particle_dimension}, "
        f"{args.iterations} visits"
    )
    print(f"seconds per visit: {spent[0] / args.iterations:.3e}")
    print(
        f"walk: {walk:.3f} s, of which visits {spent[0]:.3f} s; "
        f"engine share {(walk - spent[0]) / walk:.1%}"
    )
    print(
        f"measure (ksd and held-out metrics of {len(record.traces['main'])} records): "
        f"{measured:.3f} s ({measured / walk:.2f} x the walk)"
    )


if __name__ == "__main__":
    main()
