"""The BNN's weight prior (issue 30, item 1): why the hierarchical prior makes a network with a
hidden layer collapse to a constant predictor, and that the default (fixed λ = e) does not.

Fast tests check the mechanism: under λ ∼ Gamma(1, rate 0.1) the log posterior of wine with ten
hidden units is highest at W = 0 (a funnel whose best λ is (m/2 + a)/b), and joint ascent from a
fitted network ends there; under the fixed prior W = 0 is no maximum. The slow tests are the
acceptance runs: centralised SVGD and sound DSVGD keep their held-out accuracy for 1,500 slots on
wine (10 and 50 hidden units) and digits (50), and Forget-SVGD's remaining-label accuracy ends
beside retraining's on a classes split.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize, minimize_scalar

import gossipsim as gs
from gossipsim.data.datasets import load_task
from gossipsim.logdensity.bnn import (
    BNN_FIXED_WEIGHT_PRIOR,
    BNN_WEIGHT_PRECISION_PRIOR,
    BnnLayout,
    WeightPrior,
    bnn_log_likelihood,
    bnn_log_prior,
    bnn_outputs,
)

# ------------------------------------------------------------------------------- the mechanism


def _wine(hierarchical: bool) -> tuple[BnnLayout, np.ndarray, np.ndarray]:
    task = load_task("wine", bias=False, rng=np.random.default_rng(1), labels="classes")
    return BnnLayout(13, 10, 3, hierarchical=hierarchical), task.X_train, task.y_train


def _log_posterior(
    layout: BnnLayout, X: np.ndarray, y: np.ndarray, prior: WeightPrior, theta: np.ndarray
) -> tuple[float, np.ndarray]:
    value, gradient = bnn_log_prior(layout, theta[None], prior)
    likelihood, likelihood_gradient = bnn_log_likelihood(layout, theta[None], X, y)
    return float(value[0] + likelihood[0]), (gradient + likelihood_gradient)[0]


def _ascend(function: Any, start: np.ndarray) -> np.ndarray:
    """L-BFGS to a local maximum; raises unless it converged."""
    result = minimize(
        lambda t: tuple(-v for v in function(t)), start, jac=True, method="L-BFGS-B",
        options={"maxiter": 50_000, "gtol": 1e-8},
    )  # fmt: skip
    assert result.success, result.message
    return np.asarray(result.x)


def _fitted(layout: BnnLayout, X: np.ndarray, y: np.ndarray, prior: WeightPrior) -> np.ndarray:
    """A network fitted at λ = 1: the weights maximise the log posterior with log λ held at 0."""
    m = layout.weight_count
    start = np.random.default_rng(2).normal(0.0, 0.3, layout.dimension)
    if layout.hierarchical:
        start[-1] = 0.0

    def weights_only(w: np.ndarray) -> tuple[float, np.ndarray]:
        theta = start.copy()
        theta[:m] = w
        value, gradient = _log_posterior(layout, X, y, prior, theta)
        return value, gradient[:m]

    theta = start.copy()
    theta[:m] = _ascend(weights_only, start[:m])
    return theta


def test_the_hierarchical_prior_s_density_peaks_at_the_constant_network():
    layout, X, y = _wine(hierarchical=True)
    prior = BNN_WEIGHT_PRECISION_PRIOR
    m = layout.weight_count
    assert m == 173

    def at(theta: np.ndarray) -> float:
        return _log_posterior(layout, X, y, prior, theta)[0]

    # At W = 0 the best log λ is log((m/2 + a)/b): checked by a bounded scalar search.
    zero = np.zeros(layout.dimension)

    def at_log_lambda(z: float) -> float:
        theta = zero.copy()
        theta[-1] = z
        return -at(theta)

    search = minimize_scalar(at_log_lambda, bounds=(-5.0, 15.0), method="bounded",
                             options={"xatol": 1e-9})  # fmt: skip
    best = math.log((m / 2 + prior.shape) / prior.rate)
    assert search.x == pytest.approx(best, abs=1e-5)
    zero[-1] = best
    funnel = at(zero)
    # A fitted network with its own best λ (the same closed form with ‖W‖²) is far less dense.
    fitted = _fitted(layout, X, y, prior)
    norm = float(fitted[:m] @ fitted[:m])
    fitted[-1] = math.log((m / 2 + prior.shape) / (norm / 2 + prior.rate))
    likelihood = bnn_log_likelihood(layout, fitted[None], X, y)[0][0]
    assert likelihood > -10.0  # it fits the 142 rows (the constant network: 142·log(1/3) ≈ −156)
    assert funnel - at(fitted) > 200.0
    # Joint ascent from the fitted network falls into the funnel: weights near 0, λ near its best,
    # and a predictive that no longer depends on the features.
    ascent = _ascend(lambda t: _log_posterior(layout, X, y, prior, t), fitted)
    assert np.sqrt(np.mean(ascent[:m] ** 2)) < 0.01
    assert ascent[-1] == pytest.approx(best, abs=0.05)
    outputs = bnn_outputs(layout, ascent[None], X)[0]
    assert np.ptp(outputs.argmax(axis=-1)) == 0


def test_the_fixed_prior_keeps_a_fitted_network():
    layout, X, y = _wine(hierarchical=False)
    prior = BNN_FIXED_WEIGHT_PRIOR
    m = layout.weight_count
    fitted = _fitted(layout, X, y, prior)
    value = _log_posterior(layout, X, y, prior, fitted)[0]
    assert value > _log_posterior(layout, X, y, prior, np.zeros(layout.dimension))[0] + 50.0
    # the fitted network is a maximum of the whole density: ascent stays there
    ascent = _ascend(lambda t: _log_posterior(layout, X, y, prior, t), fitted)
    np.testing.assert_allclose(ascent, fitted, atol=1e-4)
    assert np.sqrt(np.mean(ascent[:m] ** 2)) > 0.1


def _runs(
    dataset: str, hidden: int, protocol: str, slots: int, runs: int, **model: Any
) -> pd.DataFrame:
    result = gs.run(
        {
            "scenario": {"name": "bnn", "seed": 1, "runs": runs, "iterations": slots},
            "topology": {"kind": "complete", "nodes": 5},
            "model": {"kind": "bnn", "hidden": hidden, **model},
            "data": {"dataset": dataset},
            "protocol": {"kind": protocol, "particles": 20},
            "metrics": {"record_every": 25},
        },
        engine="event",
    )
    return result.metrics


def _held(metrics: pd.DataFrame) -> None:
    """Every run ends at 0.85 or more, within 0.05 of its best record."""
    for run, rows in metrics.groupby("run"):
        best, final = rows.accuracy.max(), rows.accuracy.iloc[-1]
        assert final >= 0.85 and final >= best - 0.05, (run, best, final)


def test_centralised_svgd_with_the_default_prior_keeps_its_accuracy():
    _held(_runs("wine", 10, "svgd", 300, runs=2))


def test_the_hierarchical_prior_collapses_to_the_majority_class():
    """The pathology the option keeps (docs/particles.md): by slot 300 the particles have shrunk
    to W ≈ 0 and predict one class."""
    metrics = _runs("wine", 10, "svgd", 300, runs=2, weight_prior="hierarchical")
    for _, rows in metrics.groupby("run"):
        last = rows.iloc[-1]
        assert last.accuracy < 0.5 and last.particle_spread < 0.5
        assert rows.accuracy.max() > 0.85  # it had fitted the data before collapsing


# ----------------------------------------------------------------------------- the acceptance


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["svgd", "dsvgd"])
@pytest.mark.parametrize(("dataset", "hidden", "runs"), [("wine", 10, 3), ("wine", 50, 3),
                                                         ("digits", 50, 2)])  # fmt: skip
def test_networks_keep_their_accuracy_for_1500_slots(dataset, hidden, runs, protocol):
    _held(_runs(dataset, hidden, protocol, 1500, runs=runs))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dataset", "hidden", "node_classes"),
    [
        ("wine", 10, [[0, 1], [0, 1], [0, 1], [0, 1], [2]]),
        ("digits", 50, [[0, 1, 2, 3], [4, 5, 6, 7], [0, 2, 4, 6], [1, 3, 5, 7], [8, 9]]),
    ],
)
def test_forget_svgd_keeps_the_remaining_labels_as_retraining_does(dataset, hidden, node_classes):
    """Node 4 alone holds the last classes and asks to be forgotten at slot 751; at slot 1,500
    the remaining labels' accuracy is within 0.05 of the retrain baseline's, run by run."""
    result = gs.run(
        {
            "scenario": {"name": "forget", "seed": 1, "runs": 2, "iterations": 1500},
            "topology": {"kind": "complete", "nodes": 5},
            "model": {"kind": "bnn", "hidden": hidden},
            "data": {"dataset": dataset, "partition": "classes", "node_classes": node_classes},
            "protocol": {"kind": "dsvgd", "particles": 20},
            "metrics": {"record_every": 50},
            "unlearning": [{"node": 4, "at_iteration": 751}],
        },
        engine="event",
    )
    for run, rows in result.metrics.groupby("run"):
        last = rows.iloc[-1]
        assert last.accuracy_remaining >= last.retrain_accuracy_remaining - 0.05, (run, last)
        assert last.retrain_accuracy_remaining >= 0.85, (run, last)
