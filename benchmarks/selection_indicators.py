"""Benchmark: the server's per-iteration work for 003's client selection against DSVGD's own step.

Usage::

    python benchmarks/selection_indicators.py [--clients 120] [--particles 20] [--dimension 100]
                                              [--points 50] [--repeats 50] [--seed 1]
                                              [--blas-threads T]

K clients each hold a logistic-regression shard (``--points`` rows, d features, labels ±1); the
server has N global particles. Each iteration of 003's HIP scheme (Algorithm 2, steps 4-6) the
server gets every client's likelihood score at the particles, a ``(K, N, d)`` array, and computes
eq. (24)'s indicators ⟨φ_k, φ'⟩_H (eq. 19) for all clients. Timed, in the same run and interleaved
(median seconds of ``--repeats`` calls each, so machine noise hits all alike):

- ``inner_products_with_average`` on the ``(K, N, d)`` array: one kernel matrix for all clients;
- the baseline (a): a Python loop over the clients calling ``inner_products`` one client at a time
  (the kernel recomputed K times), the same values;
- ``stein_discrepancies`` (eq. 17's KSD indicator) on the same array, and its per-client loop;
- the baseline (b): DSVGD's own step, ``aggregated_visit`` for one node (prior N(0, I) score, the
  node's logistic likelihood score evaluated twice, one SVGD step, AdaGrad), median bandwidth;
- for context, the clients' side: all K likelihood scores at the particles.

The indicators use the particles' median bandwidth h = med²/log N, computed once outside the
timings (the kernel itself is recomputed in every call). Prints seconds per call and the ratios.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from gossipsim.particles import AdaGradSettings, median_bandwidth, pairwise_squared_distances
from gossipsim.particles.aggregated import aggregated_visit, start_state
from gossipsim.particles.selection import (
    inner_products,
    inner_products_with_average,
    stein_discrepancies,
)


def interleaved_median_seconds(calls: dict[str, Callable[[], object]], repeats: int) -> dict:
    """Median seconds of each callable, timed round-robin so machine noise hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(spent)) for name, spent in times.items()}


def logistic_score(features: np.ndarray, labels: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """∇_θ Σ_i log σ(y_i x_iᵀθ) at each particle, ``(N, d)``: Σ_i y_i σ(−y_i x_iᵀθ) x_i."""

    def score(particles: np.ndarray) -> np.ndarray:
        margins = (particles @ features.T) * labels
        return (labels / (1.0 + np.exp(margins))) @ features

    return score


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=120, help="K (default 120)")
    parser.add_argument("--particles", type=int, default=20, help="N (default 20)")
    parser.add_argument("--dimension", type=int, default=100, help="d (default 100)")
    parser.add_argument("--points", type=int, default=50, help="rows per client (default 50)")
    parser.add_argument("--repeats", type=int, default=50, help="timed calls each (default 50)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--blas-threads", type=int, default=None, help="limit BLAS threads (default: unchanged)"
    )
    args = parser.parse_args(argv)
    if args.blas_threads is not None:
        threadpool_limits(limits=args.blas_threads, user_api="blas")
    threads = sorted(
        {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}
    )
    rng = np.random.default_rng(args.seed)
    k, n, d = args.clients, args.particles, args.dimension
    truth = rng.normal(size=d) / np.sqrt(d)
    shards = []
    for _ in range(k):
        features = rng.normal(size=(args.points, d))
        labels = np.where(rng.random(args.points) < 1.0 / (1.0 + np.exp(-features @ truth)), 1, -1)
        shards.append(logistic_score(features, labels.astype(np.float64)))
    particles = rng.normal(size=(n, d))
    bandwidth = float(median_bandwidth(pairwise_squared_distances(particles, particles)))

    def client_scores() -> np.ndarray:
        return np.stack([score(particles) for score in shards])

    scores = client_scores()

    def hip_loop() -> np.ndarray:
        average = scores.mean(axis=0)
        return np.concatenate(
            [inner_products(particles, scores[c : c + 1], average, bandwidth) for c in range(k)]
        )

    def ksd_loop() -> np.ndarray:
        return np.concatenate(
            [stein_discrepancies(particles, scores[c : c + 1], bandwidth) for c in range(k)]
        )

    def prior_score(theta: np.ndarray) -> np.ndarray:
        return -theta

    # one node's visit with every other node's last score in the aggregate (a settled token)
    state = start_state(particles)
    state = type(state)(particles, scores.sum(axis=0), None)
    settings = AdaGradSettings(step_size=0.05, cumulative=True)

    def dsvgd_visit() -> object:
        return aggregated_visit(state, scores[0], prior_score, shards[0], settings)

    hip = inner_products_with_average(particles, scores, bandwidth)
    hip_difference = float(np.max(np.abs(hip - hip_loop())))
    ksd = stein_discrepancies(particles, scores, bandwidth)
    ksd_difference = float(np.max(np.abs(ksd - ksd_loop())))
    calls: dict[str, Callable[[], object]] = {
        "hip: inner_products_with_average": lambda: inner_products_with_average(
            particles, scores, bandwidth
        ),
        "hip: loop of inner_products (a)": hip_loop,
        "ksd: stein_discrepancies": lambda: stein_discrepancies(particles, scores, bandwidth),
        "ksd: loop of stein_discrepancies": ksd_loop,
        "dsvgd: aggregated_visit, 1 node (b)": dsvgd_visit,
        "clients: K likelihood scores": client_scores,
    }
    seconds = interleaved_median_seconds(calls, args.repeats)
    print(
        f"K = {k} clients, N = {n} particles, d = {d}, {args.points} rows a client, h = "
        f"{bandwidth:.3g}; median of {args.repeats} interleaved calls each, BLAS threads {threads}"
    )
    visit = seconds["dsvgd: aggregated_visit, 1 node (b)"]
    print(f"{'call':<38} {'s per call':>11} {'/ dsvgd visit':>14}")
    for name, spent in seconds.items():
        print(f"{name:<38} {spent:>11.3e} {spent / visit:>13.2f}x")
    print(
        f"hip: loop (a) / batched = "
        f"{seconds['hip: loop of inner_products (a)'] / seconds['hip: inner_products_with_average']:.1f}x"
        f" (max |diff| {hip_difference:.1e}); ksd: loop / batched = "
        f"{seconds['ksd: loop of stein_discrepancies'] / seconds['ksd: stein_discrepancies']:.1f}x"
        f" (max |diff| {ksd_difference:.1e})"
    )
    print(
        f"hip indicators, {int(np.sum(hip > 0))} of {k} positive; sum = K·S(q̂, p') = "
        f"{hip.sum():.4g}"
    )


if __name__ == "__main__":
    main()
