"""One natural-gradient local iteration (eq. 17, S = 30 REINFORCE samples per data point), vectorised
over samples and data as gossipsim does it, against a straightforward per-sample Python loop of the
same math in this script (target: >= 10x).

Two models: Beta–exponential (10 points at the node, the Fig. 4 setting) and logistic regression on
breast cancer with a full-covariance Gaussian (d = 31, a node holding 46 training points, a tenth of
the training split). Both implementations return the same step up to Monte Carlo noise; the script
checks they agree on a common stream of draws first.

    python benchmarks/natgrad.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from gossipsim.data.datasets import load_task
from gossipsim.families import Beta, GaussianFull
from gossipsim.families.natgrad import reinforce_mean_gradient

S = 30
RHO = 5e-3


def beta_vectorised(eta, local, z, rng):
    a, b = Beta.conventional(eta)
    theta = np.clip(rng.beta(a, b, size=(z.size, S)), 1e-300, 1 - 1e-16)
    weights = np.log(theta) + z[:, None] / theta
    g = reinforce_mean_gradient(Beta(), eta, theta.ravel(), weights.ravel(), scale=1.0 / S)
    return eta - RHO * (local + g)


def beta_loop(eta, local, z, rng):
    a, b = float(eta[0]) + 1, float(eta[1]) + 1
    mu = Beta().mean_params(eta)
    s1 = s2 = 0.0
    for zn in z:
        for _ in range(S):
            t = min(max(rng.beta(a, b), 1e-300), 1 - 1e-16)
            w = math.log(t) + zn / t
            s1 += w * (math.log(t) - mu[0])
            s2 += w * (math.log1p(-t) - mu[1])
    g = np.linalg.solve(Beta().fisher(eta), np.array([s1, s2]) / S)
    return eta - RHO * (local + g)


def logistic_vectorised(family, eta, local, X, y, rng):
    theta = family.sample(eta, X.shape[0] * S, rng).reshape(X.shape[0], S, -1)
    a = np.einsum("nsd,nd->ns", theta, X)
    weights = np.logaddexp(0.0, a) - y[:, None] * a
    g = reinforce_mean_gradient(
        family, eta, theta.reshape(-1, X.shape[1]), weights.ravel(), scale=1.0 / S
    )
    return eta - RHO * (local + g)


def logistic_loop(family, eta, local, X, y, rng):
    d = X.shape[1]
    mean, cov = family.conventional(eta)
    chol = np.linalg.cholesky(cov)
    precision = np.linalg.inv(cov)
    sum_w = 0.0
    sum_wx = np.zeros(d)
    sum_wxx = np.zeros((d, d))
    for n in range(X.shape[0]):
        for _ in range(S):
            theta = mean + chol @ rng.standard_normal(d)
            act = float(theta @ X[n])
            w = math.log1p(math.exp(-abs(act))) + max(act, 0.0) - y[n] * act
            dev = theta - mean
            sum_w += w
            sum_wx += w * dev
            sum_wxx += w * np.outer(dev, dev)
    # score of N(m, Σ): ∇_m = Σ⁻¹ E[w (θ−m)], ∇_Σ = ½ Σ⁻¹ (E[w (θ−m)(θ−m)ᵀ] − E[w] Σ) Σ⁻¹
    grad_m = precision @ sum_wx / S
    grad_sigma = 0.5 * precision @ (sum_wxx / S - (sum_w / S) * cov) @ precision
    g = np.concatenate([grad_m - 2 * grad_sigma @ mean, grad_sigma.ravel()])
    return eta - RHO * (local + g)


def timed(fn, repeat):
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(1)

    eta = Beta.natural(30.0, 12.0)
    local = np.zeros(2)
    z = rng.exponential(0.7, size=10)
    fast = timed(lambda: beta_vectorised(eta, local, z, rng), args.repeat)
    slow = timed(lambda: beta_loop(eta, local, z, rng), max(args.repeat // 10, 5))
    print(
        f"beta-exponential, 10 points x S={S}: vectorised {fast * 1e6:8.1f} us, loop {slow * 1e6:9.1f} us, ratio {slow / fast:5.1f}x (target >= 10x)"
    )

    task = load_task("breast_cancer", rng=np.random.default_rng(0))
    X, y = task.X_train[:46], task.y_train[:46]
    family = GaussianFull(X.shape[1])
    eta = family.natural(np.zeros(X.shape[1]), 0.05 * np.eye(X.shape[1]))
    local = np.zeros(family.dim)
    a = logistic_vectorised(family, eta, local, X, y, np.random.default_rng(5))
    b = logistic_loop(family, eta, local, X, y, np.random.default_rng(5))
    rel = np.linalg.norm(a - b) / np.linalg.norm(a - eta)
    fast = timed(
        lambda: logistic_vectorised(family, eta, local, X, y, rng), max(args.repeat // 4, 5)
    )
    slow = timed(lambda: logistic_loop(family, eta, local, X, y, rng), 3)
    print(
        f"logistic regression, d={X.shape[1]}, 46 points x S={S}: vectorised {fast * 1e3:7.2f} ms, loop {slow * 1e3:8.1f} ms, ratio {slow / fast:5.1f}x (target >= 10x); steps differ by {rel:.1e} (Monte Carlo)"
    )


if __name__ == "__main__":
    main()
