"""Benchmark: one SVGD step of gossipsim's kernel against the original SVGD code's kernel.

Usage::

    python benchmarks/svgd.py [--particles 100] [--dims 56 7850] [--repeats 20] [--seed 1]
                              [--blas-threads T]

For each dimension d, times the SVGD direction φ (eq. 6 of 000) for N particles with the median
bandwidth, computed two ways in the same run: :func:`gossipsim.particles.svgd_direction` (distances
in Gram-matrix form, the repulsive term as two matrix products) and a straightforward NumPy copy of
the original SVGD code's ``svgd_kernel`` (``pdist``/``squareform``, then a Python loop over the d
coordinates) followed by its ``(K·∇log p + ∇K)/N``. The score is a standard normal's, so the
time is the kernel's. The two are timed alternately, step by step. Prints the median seconds per step of each, their ratio (baseline / ours,
> 1 means gossipsim is faster) and the largest difference between the two directions.

Both use the BLAS library's threads (``--blas-threads`` limits them through threadpoolctl, which
scikit-learn installs). On a machine whose cores are busy, several BLAS threads contend and small
products slow down for both; compare ``--blas-threads 1`` when the figures look noisy.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np
from scipy.spatial.distance import pdist, squareform
from threadpoolctl import threadpool_info, threadpool_limits

from gossipsim.particles import svgd_direction


def original_direction(theta: np.ndarray, score: np.ndarray) -> np.ndarray:
    """φ as the original SVGD code computes it (its kernel, then ``(K·score + ∇K)/N``)."""
    pairwise = squareform(pdist(theta)) ** 2
    h = np.sqrt(0.5 * np.median(pairwise) / np.log(theta.shape[0] + 1))
    kxy = np.exp(-pairwise / h**2 / 2)
    dxkxy = -np.matmul(kxy, theta)
    sumkxy = np.sum(kxy, axis=1)
    for i in range(theta.shape[1]):
        dxkxy[:, i] = dxkxy[:, i] + np.multiply(theta[:, i], sumkxy)
    dxkxy = dxkxy / (h**2)
    return (np.matmul(kxy, score) + dxkxy) / theta.shape[0]


def interleaved_median_seconds(first, second, repeats: int) -> tuple[float, float]:
    """Median seconds of each callable, timed alternately so machine noise hits both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for step, bucket in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            step()
            bucket.append(time.perf_counter() - start)
    return float(np.median(times[0])), float(np.median(times[1]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=100, help="N (default 100)")
    parser.add_argument(
        "--dims", type=int, nargs="+", default=[56, 7850], help="dimensions d (default 56 7850)"
    )
    parser.add_argument("--repeats", type=int, default=20, help="timed steps each (default 20)")
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
    print(
        f"one SVGD step, N = {args.particles} particles, median of {args.repeats} interleaved steps each, "
        f"BLAS threads {threads}"
    )
    print(f"{'d':>6} {'original code s':>16} {'gossipsim s':>12} {'ratio':>7} {'max |diff|':>11}")
    for dimension in args.dims:
        theta = rng.normal(size=(args.particles, dimension))
        score = -theta
        ours = svgd_direction(theta, score, rule="median-svgd-code")
        theirs = original_direction(theta, score)
        difference = float(np.max(np.abs(ours - theirs)))
        baseline, gossipsim = interleaved_median_seconds(
            partial(original_direction, theta, score),
            partial(svgd_direction, theta, score, rule="median-svgd-code"),
            args.repeats,
        )
        print(
            f"{dimension:>6} {baseline:>16.6f} {gossipsim:>12.6f} "
            f"{baseline / gossipsim:>6.2f}x {difference:>11.2e}"
        )


if __name__ == "__main__":
    main()
