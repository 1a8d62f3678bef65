"""Why a BNN with a hidden layer collapses under the hierarchical weight prior (issue 30, item 1):
the measurements behind docs/particles.md, "The BNN's weight prior".

    python tools/bnn_weight_prior.py [--dataset wine] [--hidden 10] [--slots 1500]
                                     [--original-slots 12000]

Three parts, each printed as a small table:

1. **The funnel.** The log posterior (prior × likelihood of every training row) at W = 0 with its
   best λ, (m/2 + a)/b, against a fitted network (weights maximised by L-BFGS at λ = 1, then λ at
   its best for those weights), and where joint ascent from the fitted network ends. Under the
   hierarchical prior the point W = 0 wins by hundreds of nats for a network with a hidden layer;
   under the fixed prior (λ = e) there is no such point.
2. **The original SVGD code's recipe** (dilinwang820's ``bayesian_nn.py``, read for its facts:
   Gamma(1, rate 0.1) on λ and, for regression, on γ; weights initialised N(0, 1/(fan-in + 1)),
   biases 0, λ drawn from NumPy's ``gamma(1, 0.1)`` (mean 0.1: NumPy's second argument is a scale),
   γ set from the initial residuals; AdaGrad step 1e-3; mini-batches of 100 rows taken in turn;
   h = med²/log(N + 1)) run with gossipsim's log density and pure SVGD functions on the same data
   for ``--original-slots`` (its script stops at 2,000, before log λ has climbed to the funnel),
   against the same loop at gossipsim's defaults (particles from the prior, step 0.05, full rows,
   h = med²/log N). Printed: held-out accuracy (or RMSE), RMS weight, mean log λ at a few slots.
3. **gossipsim's centralised SVGD** (``gs.run``, the defaults, 20 particles, complete graph of 5,
   seed 1) under both weight priors: held-out accuracy, spread and KSD.

No random state is global: every draw comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

import gossipsim as gs
from gossipsim.data.datasets import DATASETS, load_task
from gossipsim.logdensity.bnn import (
    BNN_FIXED_WEIGHT_PRIOR,
    BNN_NOISE_PRECISION_PRIOR,
    BNN_WEIGHT_PRECISION_PRIOR,
    BnnLayout,
    WeightPrior,
    bnn_log_likelihood,
    bnn_log_prior,
    bnn_outputs,
    sample_bnn_prior,
)
from gossipsim.particles import adagrad_step, svgd_direction
from gossipsim.particles.adagrad import AdaGradSettings

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Data:
    layout: BnnLayout
    X: FloatArray
    y: FloatArray
    X_test: FloatArray
    y_test: FloatArray


def load(dataset: str, hidden: int, hierarchical: bool, seed: int) -> Data:
    regression = DATASETS[dataset].task == "regression"
    task = load_task(
        dataset,
        test_fraction=0.2,
        bias=False,
        rng=np.random.default_rng(seed),
        labels="binary" if regression else "classes",
    )
    outputs = 1 if regression else DATASETS[dataset].classes
    layout = BnnLayout(
        task.X_train.shape[1],
        hidden,
        outputs,
        "regression" if regression else "classification",
        hierarchical=hierarchical,
    )
    return Data(layout, task.X_train, task.y_train, task.X_test, task.y_test)


def log_posterior(
    data: Data, theta: FloatArray, prior: WeightPrior, rows: NDArray[np.intp] | None = None
) -> tuple[FloatArray, FloatArray]:
    """log p0(θ) + log p(D | θ) (over ``rows`` scaled to all rows) and its gradient."""
    X, y, scale = data.X, data.y, 1.0
    if rows is not None:
        X, y, scale = X[rows], y[rows], data.y.size / rows.size
    value, gradient = bnn_log_prior(data.layout, theta, prior)
    likelihood, likelihood_gradient = bnn_log_likelihood(data.layout, theta, X, y, scale=scale)
    return value + likelihood, gradient + likelihood_gradient


def held_out(data: Data, particles: FloatArray) -> float:
    """Accuracy of the particle-averaged predictive, or the RMSE of its mean (regression)."""
    outputs = bnn_outputs(data.layout, particles, data.X_test)
    if data.layout.task == "regression":
        return float(np.sqrt(np.mean((outputs[..., 0].mean(axis=0) - data.y_test) ** 2)))
    shifted = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
    probabilities = (shifted / shifted.sum(axis=-1, keepdims=True)).mean(axis=0)
    return float(np.mean(probabilities.argmax(axis=-1) == data.y_test))


def funnel(data: Data, prior: WeightPrior, seed: int) -> dict[str, float]:
    """log posterior at W = 0 (best λ) and at a fitted network (best λ), and after joint ascent."""
    layout, m = data.layout, data.layout.weight_count
    rng = np.random.default_rng(seed)

    def value(theta: FloatArray) -> float:
        return float(log_posterior(data, theta[None], prior)[0][0])

    def negative(theta: FloatArray) -> tuple[float, FloatArray]:
        v, g = log_posterior(data, theta[None], prior)
        return -float(v[0]), -g[0]

    start = np.zeros(layout.dimension)
    start[:m] = rng.normal(0.0, 0.3, m)
    fixed = np.zeros(layout.dimension, dtype=bool)
    fixed[:m] = True
    if layout.task == "regression":
        fixed[layout.noise_index] = True

    def negative_at(free: FloatArray) -> tuple[float, FloatArray]:
        theta = start.copy()
        theta[fixed] = free
        v, g = negative(theta)
        return v, g[fixed]

    fit = minimize(negative_at, start[fixed], jac=True, method="L-BFGS-B",
                   options={"maxiter": 20_000})  # fmt: skip
    fitted = start.copy()
    fitted[fixed] = fit.x
    out = {"fitted": math.nan, "funnel": math.nan}
    if layout.hierarchical:
        assert isinstance(prior, type(BNN_WEIGHT_PRECISION_PRIOR))
        a, b = prior.shape, prior.rate
        zero = np.zeros(layout.dimension)
        if layout.task == "regression":
            zero[layout.noise_index] = fitted[layout.noise_index]
        zero[-1] = math.log((m / 2 + a) / b)
        norm = float(fitted[:m] @ fitted[:m])
        fitted[-1] = math.log((m / 2 + a) / (norm / 2 + b))
        out["funnel"] = value(zero)
    out["fitted"] = value(fitted)
    ascent = minimize(negative, fitted, jac=True, method="L-BFGS-B", options={"maxiter": 50_000})
    if not ascent.success and ascent.nit >= 50_000:
        raise RuntimeError(f"joint ascent did not converge: {ascent.message}")
    out["ascent"] = -float(ascent.fun)
    out["ascent_rms_weight"] = float(np.sqrt(np.mean(ascent.x[:m] ** 2)))
    out["ascent_log_lambda"] = (
        float(ascent.x[-1])
        if layout.hierarchical
        else math.log(getattr(prior, "precision", math.e))
    )
    out["ascent_held_out"] = held_out(data, ascent.x[None])
    out["fitted_held_out"] = held_out(data, fitted[None])
    return out


def original_initialisation(data: Data, rng: np.random.Generator, count: int) -> FloatArray:
    """The original SVGD code's ``init_weights`` (and its γ heuristic), on this layout."""
    layout = data.layout
    p, h, c = layout.features, layout.hidden, layout.outputs
    particles = np.zeros((count, layout.dimension))
    w1, b1, w2, b2 = layout.unpack(particles)
    for i in range(count):
        if h > 0:
            w1[i] = rng.standard_normal((p, h)) / math.sqrt(p + 1)
            w2[i] = rng.standard_normal((h, c)) / math.sqrt(h + 1)
        else:
            w2[i] = rng.standard_normal((p, c)) / math.sqrt(p + 1)
        # NumPy's gamma(shape, scale): the code's gamma(a0, b0) has scale b0 = 0.1, mean 0.1
        if layout.task == "regression":
            rng.gamma(1.0, 0.1)  # the code draws a log γ it replaces below
            rows = rng.choice(data.y.size, size=min(data.y.size, 1000), replace=False)
            residual = (
                bnn_outputs(layout, particles[i : i + 1], data.X[rows])[0, :, 0] - data.y[rows]
            )
            particles[i, layout.noise_index] = -math.log(float(np.mean(residual**2)))
        if layout.hierarchical:
            particles[i, -1] = math.log(rng.gamma(1.0, 0.1))
    return particles


def svgd_loop(
    data: Data,
    particles: FloatArray,
    prior: WeightPrior,
    *,
    slots: int,
    settings: AdaGradSettings,
    rule: str,
    batch: int | None,
    report: Callable[[int, FloatArray], None],
) -> FloatArray:
    """Centralised SVGD with AdaGrad-with-momentum, one step a slot; ``batch`` rows in turn."""
    history = None
    n = data.y.size
    for slot in range(1, slots + 1):
        rows = None
        if batch is not None:
            rows = np.arange((slot - 1) * batch, slot * batch) % n
        _, score = log_posterior(data, particles, prior, rows)
        direction = svgd_direction(particles, score, rule=rule)  # type: ignore[arg-type]
        particles, history = adagrad_step(particles, direction, history, settings)
        report(slot, particles)
    return particles


def trajectory(data: Data, prior: WeightPrior, recipe: str, slots: int, seed: int) -> list[str]:
    """The held-out metric, RMS weight and mean log λ of one SVGD loop at a few slots."""
    rng = np.random.default_rng(seed)
    if recipe == "original":
        particles = original_initialisation(data, rng, 20)
        settings, rule, batch = AdaGradSettings(step_size=1e-3), "median-svgd-code", 100
    else:
        particles = sample_bnn_prior(data.layout, rng, 20, prior, BNN_NOISE_PRECISION_PRIOR)
        settings, rule, batch = AdaGradSettings(step_size=0.05), "median", None
    rows: list[str] = []
    marks = {1, 50, 100, 200, 500, 1000, slots, *range(2000, slots, 2000)}
    m = data.layout.weight_count

    def report(slot: int, current: FloatArray) -> None:
        if slot in marks:
            log_lambda = current[:, -1].mean() if data.layout.hierarchical else math.nan
            rows.append(
                f"  {recipe:9s} slot {slot:5d}: held-out {held_out(data, current):.3f}  "
                f"RMS weight {np.sqrt(np.mean(current[:, :m] ** 2)):.3f}  "
                f"mean log λ {log_lambda:6.2f}"
            )

    svgd_loop(data, particles, prior, slots=slots, settings=settings, rule=rule, batch=batch,
              report=report)  # fmt: skip
    return rows


def whole_runs(dataset: str, hidden: int, slots: int) -> list[str]:
    rows = []
    for weight_prior in ("fixed", "hierarchical"):
        res = gs.run(
            {
                "scenario": {"name": "bnn", "seed": 1, "runs": 1, "iterations": slots},
                "topology": {"kind": "complete", "nodes": 5},
                "model": {"kind": "bnn", "hidden": hidden, "weight_prior": weight_prior},
                "data": {"dataset": dataset},
                "protocol": {"kind": "svgd", "particles": 20},
                "metrics": {"record_every": 50},
            },
            engine="event",
        )
        metric = "accuracy" if "accuracy" in res.metrics else "rmse"
        for _, row in res.metrics.iterrows():
            if row.iteration in (1, 50, 200, 500, 1000, slots):
                rows.append(
                    f"  {weight_prior:12s} slot {int(row.iteration):5d}: {metric} "
                    f"{row[metric]:.3f}  spread {row.particle_spread:7.3f}  KSD {row.ksd:10.1f}"
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="wine", choices=sorted(DATASETS))
    parser.add_argument("--hidden", type=int, default=10)
    parser.add_argument("--slots", type=int, default=1500)
    parser.add_argument(
        "--original-slots",
        type=int,
        default=12_000,
        help="slots of the original code's recipe (its script runs 2,000)",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.dataset}, hidden = {args.hidden}, {args.slots} slots, seed {args.seed}")
    for hierarchical, prior in (
        (True, BNN_WEIGHT_PRECISION_PRIOR),
        (False, BNN_FIXED_WEIGHT_PRIOR),
    ):
        data = load(args.dataset, args.hidden, hierarchical, args.seed)
        name = "hierarchical Gamma(1, rate 0.1)" if hierarchical else "fixed λ = e"
        print(f"\n[{name}] d = {data.layout.dimension}, {data.y.size} training rows")
        numbers = funnel(data, prior, args.seed)
        print(
            f"  log posterior: W = 0 at its best λ {numbers['funnel']:.1f}; fitted network "
            f"{numbers['fitted']:.1f} (held-out {numbers['fitted_held_out']:.3f}); joint ascent "
            f"from it ends at {numbers['ascent']:.1f} (RMS weight "
            f"{numbers['ascent_rms_weight']:.4f}, log λ {numbers['ascent_log_lambda']:.2f}, "
            f"held-out {numbers['ascent_held_out']:.3f})"
        )
        print("\n".join(trajectory(data, prior, "original", args.original_slots, args.seed)))
        print("\n".join(trajectory(data, prior, "gossipsim", args.slots, args.seed)))
    print("\ngs.run, centralised SVGD, defaults:")
    print("\n".join(whole_runs(args.dataset, args.hidden, args.slots)))


if __name__ == "__main__":
    main()
