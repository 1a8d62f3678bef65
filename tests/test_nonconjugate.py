"""Natural-gradient G-FVL (Section III-C): Beta–exponential, Bayesian linear and logistic regression."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

import gossipsim as gs
from gossipsim.cli.parser import main
from gossipsim.families import Beta
from gossipsim.models import ExactPosterior
from tests.helpers import to_toml

THETAS = [{"beta": [11 - i, i]} for i in range(1, 11)]  # agent i's mean θ_i ~ Beta(11 − i, i)


def beta_exponential(**overrides):
    raw = {
        "scenario": {"name": "be", "seed": 4, "runs": 4, "iterations": 1500},
        "topology": {"kind": "complete", "nodes": 10},
        "model": {"kind": "beta-exponential", "prior": {"a": 2, "b": 2}},
        "data": {"points_per_node": 10, "theta": THETAS},
        "protocol": {"learning_rate": 5e-3, "samples": 30},
        "metrics": {"tolerance": 0.01, "excess": True, "record_every": 50},
    }
    raw.update(overrides)
    return raw


def logistic(**overrides):
    raw = {
        "scenario": {"name": "lr", "seed": 5, "runs": 2, "iterations": 400},
        "topology": {"kind": "complete", "nodes": 5},
        "model": {
            "kind": "logistic-regression",
            "family": "gaussian-full",
            "prior": {"mean": 0, "variance": 1},
        },
        "data": {"dataset": "breast_cancer", "partition": "iid"},
        "protocol": {"estimator": "exact", "learning_rate": 0.5},
        "metrics": {"tolerance": 1e-6, "record_every": 50},
    }
    raw.update(overrides)
    return raw


def test_exact_posterior_kl_matches_a_fine_grid():
    """The closed-form KL given the quadrature normaliser equals brute-force integration."""
    target = ExactPosterior(log_theta=2.0 - 1 - 100, log_one_minus=1.0, inverse=48.0)
    u = np.linspace(-30, 30, 400_001)  # logit grid: smooth integrands, no end-point singularities
    theta = 1 / (1 + np.exp(-u))
    jac = theta * (1 - theta)
    log_p = target.log_unnormalised(theta)
    log_z = np.log(integrate.trapezoid(np.exp(log_p - log_p.max()) * jac, u)) + log_p.max()
    assert target.log_normaliser == pytest.approx(log_z, abs=1e-9)
    for a, b in [(40.0, 60.0), (3.0, 2.0), (150.0, 80.0)]:
        log_q = (
            (a - 1) * np.log(theta)
            + (b - 1) * np.log1p(-theta)
            - (
                np.log(np.exp(1)) * 0
                + (np.log(integrate.trapezoid(theta ** (a - 1) * (1 - theta) ** (b - 1) * jac, u)))
            )
        )
        q = np.exp(log_q)
        grid_kl = integrate.trapezoid(q * (log_q - (log_p - log_z)) * jac, u)
        assert target.kl(Beta.natural(a, b))[()] == pytest.approx(grid_kl, rel=1e-7, abs=1e-9)


def test_best_in_family_is_the_minimum():
    target = ExactPosterior(log_theta=2.0 - 1 - 100, log_one_minus=1.0, inverse=48.0)
    a, b = Beta.conventional(target.best_family)
    assert target.best_family_kl == pytest.approx(float(target.kl(target.best_family)[()]))
    for da, db in [(0.01, 0), (-0.01, 0), (0, 0.01), (0, -0.01), (0.01, 0.01)]:
        assert target.kl(Beta.natural(a * (1 + da), b * (1 + db)))[()] > target.best_family_kl


def test_exact_natural_gradient_reaches_the_best_in_family():
    """G-FVL's fixed point is the minimiser of the free energy (2) in the family: with exact
    gradients KL(q ‖ p) falls to the best-in-family KL (to 1e-9)."""
    raw = beta_exponential(protocol={"estimator": "exact", "learning_rate": 0.2})
    res = gs.run(raw)
    final = res.metrics.groupby("run").last()
    assert ((final["kl"] - final["best_family_kl"]).abs() <= 1e-9).all()
    best = res.runs["best_family_kl"]
    assert best.nunique() == 1 and 0.005 < best.iloc[0] < 0.05
    assert res.runs["convergence_iteration"].notna().all()


def test_reinforce_approaches_the_best_in_family_and_unlearning_removes_the_node():
    raw = beta_exponential(
        unlearning=[{"node": 9, "at_iteration": 1000}],
        metrics={"tolerance": 0.1, "excess": True, "record_every": 50},
    )
    res = gs.run(raw)
    final = res.metrics.groupby("run").last()
    # REINFORCE noise keeps q near, not at, the optimum; 1,500 slots bring it well inside 0.1
    assert (final["kl"] - final["best_family_kl"] < 0.1).all()
    before = res.metrics[res.metrics.iteration == 1000 - 50]["best_family_kl"].iloc[0]
    after = final["best_family_kl"].iloc[0]
    assert before != after  # the target changed: p(θ | D without node 9)
    assert (res.requests["request_iteration"] == 1000).all()
    # node 9's factor leaves within the run; retraining from the prior at ρ = 5e-3 needs far longer
    assert res.requests["removal_latency"].notna().all()
    assert (res.metrics.groupby("run")["retrain_kl"].last() > final["kl"]).all()
    assert res.runs["damped_steps"].notna().all()


def test_steps_leaving_the_domain_are_damped_and_counted():
    raw = beta_exponential(protocol={"learning_rate": 0.9, "samples": 5})
    res = gs.run(raw)
    assert (res.runs["damped_steps"] > 0).all()
    final = res.metrics.groupby("run")["kl"].last()
    assert np.isfinite(final).all()


def test_samples_in_total_and_per_point_both_run():
    for samples_per in ("point", "total"):
        raw = beta_exponential(
            scenario={"name": "be", "seed": 4, "runs": 2, "iterations": 300},
            protocol={
                "learning_rate": 5e-3,
                "samples": 30,
                "samples_per": samples_per,
                "baseline": 1.0,
            },
        )
        assert gs.run(raw).metrics["kl"].notna().all()


def test_linear_regression_is_exact_after_one_cover_and_unlearning_restores_it():
    raw = {
        "scenario": {"name": "lin", "seed": 6, "runs": 30, "iterations": 400},
        "topology": {"kind": "ring", "nodes": 8},
        "model": {"kind": "linear-regression", "sigma": 1.0, "prior": {"mean": 0, "variance": 4}},
        "data": {"dataset": "diabetes", "partition": "dirichlet", "concentration": 1.0},
        "unlearning": [{"node": 3, "at_iteration": 300}],
        "metrics": {"tolerance": 1e-9},
    }
    res = gs.run(raw)
    runs = res.runs
    assert (runs["convergence_iteration"] == runs["cover_iteration"]).all()
    final = res.metrics.groupby("run")[["kl", "retrain_kl"]].last()
    assert (final["kl"] <= 1e-9).all() and (final["retrain_kl"] <= 1e-9).all()
    assert {"rmse", "nll"} <= set(res.metrics.columns)


def test_logistic_gossip_fixed_point_is_the_centralised_optimum():
    """With the exact (quadrature) estimator, G-FVL converges to the centralised variational optimum."""
    res = gs.run(logistic())
    final = res.metrics.groupby("run").last()
    assert (final["kl"] <= 1e-6).all()
    assert {"accuracy", "nll", "ece"} <= set(res.metrics.columns)
    assert res.metrics["ece"].between(0, 1).all()


def test_logistic_accuracy_close_to_scikit_learn():
    from sklearn.linear_model import LogisticRegression as SkLogistic

    study = gs.parse_study(logistic())
    world = gs.build_world(study.variants[0].scenario)
    data = world.model.fixed_data
    target = world.model.target(data, frozenset())
    ours = world.model.evaluate(data, target.eta[None, :])["accuracy"][0]
    X = np.concatenate(data.X)
    y = np.concatenate(data.y)
    sk = SkLogistic(max_iter=5000).fit(X[:, :-1], y)  # sklearn fits its own intercept
    theirs = sk.score(data.X_test[:, :-1], data.y_test)
    assert abs(ours - theirs) <= 0.02, (ours, theirs)


@pytest.mark.parametrize("family", ["gaussian-full", "gaussian-diagonal"])
@pytest.mark.parametrize("estimator", ["reinforce", "reparameterization"])
def test_stochastic_logistic_estimators_learn(family, estimator):
    raw = logistic(
        scenario={"name": "lr", "seed": 7, "runs": 1, "iterations": 150},
        model={
            "kind": "logistic-regression",
            "family": family,
            "prior": {"mean": 0, "variance": 1},
        },
        protocol={
            "estimator": estimator,
            "learning_rate": 0.05 if estimator != "reinforce" else 0.005,
            "samples": 10,
        },
        data={"dataset": "wine", "partition": "labels", "labels_per_node": 2},
    )
    res = gs.run(raw)
    kl = res.metrics.groupby("iteration")["kl"].median()
    assert kl.iloc[-1] < kl.iloc[0]
    assert res.metrics["accuracy"].iloc[-1] > 0.8


def test_nonconjugate_results_identical_for_any_number_of_workers(tmp_path, capsys):
    raw = beta_exponential(scenario={"name": "be", "seed": 4, "runs": 4, "iterations": 200})
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    for w in ("1", "2"):
        assert (
            main(["run", str(path), "--out", str(tmp_path / w), "--no-plots", "--workers", w]) == 0
        )
    for name in ("metrics.csv", "runs.csv"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes()


BAD = [
    (beta_exponential(protocol={"learning_rate": 0}), "protocol.learning_rate"),
    (beta_exponential(protocol={"learning_rate": -1e-3}), "protocol.learning_rate"),
    (beta_exponential(protocol={"samples": 0}), "protocol.samples"),
    (beta_exponential(protocol={"local_iterations": 0}), "protocol.local_iterations"),
    (beta_exponential(protocol={"estimator": "reparameterization"}), "protocol.estimator"),
    (beta_exponential(protocol={"samples_per": "node"}), "protocol.samples_per"),
    (
        beta_exponential(model={"kind": "beta-exponential", "prior": {"a": 0, "b": 2}}),
        "model.prior.a",
    ),
    (beta_exponential(data={"points_per_node": 10, "theta": [0.5] * 3}), "data.theta"),
    (beta_exponential(data={"points_per_node": 10, "theta": 1.5}), "data.theta"),
    (beta_exponential(metrics={"ece_bins": 0}), "metrics.ece_bins"),
    (
        logistic(model={"kind": "logistic-regression", "prior": {"mean": 0, "variance": -1}}),
        "model.prior.variance",
    ),
    (logistic(model={"kind": "logistic-regression", "family": "student-t"}), "model.family"),
    (logistic(data={"dataset": "mnist"}), "data.dataset"),
    (logistic(data={"dataset": "diabetes"}), "data.dataset"),
    (
        logistic(data={"dataset": "breast_cancer", "partition": "labels", "labels_per_node": 3}),
        "data.labels_per_node",
    ),
    (
        logistic(
            data={"dataset": "breast_cancer", "partition": "dirichlet", "concentration": 0.001},
            topology={"kind": "complete", "nodes": 40},
        ),
        "data.partition",
    ),
    (
        logistic(
            data={"dataset": "breast_cancer", "partition": "dirichlet", "concentration": -1.0}
        ),
        "data.concentration",
    ),
    (logistic(data={"dataset": "breast_cancer", "test_fraction": 1.5}), "data.test_fraction"),
    (logistic(metrics={"excess": True}), "metrics.excess"),
    (
        {
            **logistic(),
            "model": {"kind": "beta-bernoulli"},
            "data": {"points_per_node": 5},
            "protocol": {"learning_rate": 0.1},
        },
        "protocol.learning_rate",
    ),
]


@pytest.mark.parametrize(("raw", "key"), BAD, ids=[k for _, k in BAD])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, raw, key):
    path = tmp_path / "s.toml"
    path.write_text(to_toml(raw))
    out = tmp_path / "res"
    code = main(["run", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and key in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.slow
def test_fig4_setting_median_kl_within_0_01_of_best_in_family():
    """The Fig. 4 setting (L = 1, ρ = 5e-3 constant, S = 30 per data point, c = 0, 100 runs): the
    median of KL − best-in-family KL over runs falls to 0.01 within 5,000 slots (measured: 2,254 with
    the shipped scenario's seed) and stays near it (REINFORCE noise: the median excess over slots
    10,000-12,000 averages below 0.012)."""
    raw = beta_exponential(
        scenario={"name": "fig4", "seed": 2024, "runs": 100, "iterations": 12000},
        data={"points_per_node": 10, "theta": THETAS, "draw": "once"},
        protocol={"learning_rate": 5e-3, "samples": 30, "samples_per": "point", "baseline": 0.0},
        metrics={"tolerance": 0.01, "excess": True, "record_every": 20},
    )
    res = gs.run(raw, workers=2)
    m = res.metrics
    excess = (m["kl"] - m["best_family_kl"]).groupby(m["iteration"]).median()
    first = excess[excess <= 0.01].index.min()
    assert first <= 5000, first
    assert excess.loc[10000:12000].mean() < 0.012
