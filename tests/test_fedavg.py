"""FedAvg, the frequentist baseline (issue 32; paper 000, Section IV): one SGD step as computed by
hand, each compressed server slot's bits by eq. 10 with N_p = 1, the same tables with 1 or 2
workers, learning to a held-out accuracy near centralised logistic regression's, the server and
the walk learning the same weights, requests served by the retrain baseline alone, and every bad
setting one line."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from scipy.special import gammaln, log_expit

import gossipsim as gs
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_protocol, build_world
from tests.helpers import validate_error

D = 32  # breast cancer: 30 standardised features, the bias and log ξ
BASE = {
    "scenario": {"name": "f", "seed": 3, "runs": 2, "iterations": 24},
    "topology": {"kind": "complete", "nodes": 4},
    "scheduler": {"kind": "round-robin", "start": 0},
    "model": {"kind": "logistic-regression"},
    "data": {"dataset": "breast_cancer"},
    "protocol": {
        "kind": "fedavg", "architecture": "server", "learning_rate": 0.1, "local_iterations": 3,
        "compression": {"budget": "2d", "a_max": 0.5},
    },
    "unlearning": [{"node": 1, "at_iteration": 10}],
}  # fmt: skip


def _with(**protocol):
    raw = copy.deepcopy(BASE)
    raw["protocol"].update(protocol)
    return raw


def _loss(theta, X, y, total_rows, shape=1.0, rate=0.01):
    """f_k(θ) = −(1/n_k)·log p(D_k | w) − (1/n)·log p0(w, ζ), written out: the logistic
    log-likelihood and the hierarchical prior w ~ N(0, e^−ζ I), e^ζ ~ Gamma(a, rate b) with the
    log-Jacobian ζ."""
    w, zeta = theta[:-1], theta[-1]
    logits = X @ w
    loglik = np.sum(y * log_expit(logits) + (1 - y) * log_expit(-logits))
    m = w.size
    log_prior = (
        0.5 * m * (zeta - math.log(2 * math.pi)) - 0.5 * math.exp(zeta) * w @ w
        + shape * math.log(rate) - gammaln(shape) + shape * zeta - rate * math.exp(zeta)
    )  # fmt: skip
    return -loglik / y.size - log_prior / total_rows


def test_one_local_step_is_the_gradient_step_by_hand():
    raw = _with(local_iterations=1, learning_rate=0.05)
    del raw["protocol"]["compression"], raw["unlearning"]
    world = build_world(parse_scenario(raw))
    data = world.model.fixed_data
    protocol = build_protocol(world, data, np.random.default_rng(5))
    theta0 = protocol.particles[0].copy()
    agent = 2
    protocol.on_token(agent, 1)
    X, y = data.X[agent], data.y[agent].astype(float)
    total = sum(v.size for v in data.y)
    h = 1e-6
    gradient = np.array([
        (_loss(theta0 + h * e, X, y, total) - _loss(theta0 - h * e, X, y, total)) / (2 * h)
        for e in np.eye(theta0.size)
    ])  # fmt: skip
    np.testing.assert_allclose(protocol.particles[0], theta0 - 0.05 * gradient, rtol=0, atol=1e-8)
    assert protocol.traces()["main"].states[-1].shape == (1, D)


def test_each_compressed_slot_costs_the_download_and_eq_10_with_one_particle():
    res = gs.run(BASE, plots=False)
    budget = 2 * D
    # eq. 10 with N_p = 1 by the exact binomial (one pattern, 5 bits an entry), not upload_bits
    bits = [math.log2(math.comb(D, k)) + 5 * k for k in range(D + 1)]
    k = max(j for j in range(D + 1) if bits[j] <= budget)
    upload, download = bits[k], D * 64
    for _, rows in res.metrics.groupby("run"):
        per_slot = np.diff(np.concatenate([[0.0], rows["bits"].to_numpy()]))
        holders, slots = rows["holder"].to_numpy(), rows["iteration"].to_numpy()
        # node 1 (holder at slots 2, 6, 10, ...) is forgotten before slot 10: it uploads nothing
        idle = (holders == 1) & (slots >= 10)
        assert idle.any()
        assert np.allclose(per_slot[~idle], download + upload)
        assert np.allclose(per_slot[idle], download)


def test_tables_are_the_same_with_one_or_two_workers_on_the_event_engine():
    one = gs.run(BASE, plots=False, workers=1)
    two = gs.run(BASE, plots=False, workers=2)
    assert one.metrics.equals(two.metrics) and one.requests.equals(two.requests)
    assert "fedavg runs on the event engine" in one.engines[one.variants[0]]


def test_requests_are_served_by_the_retrain_baseline_alone():
    res = gs.run(BASE, plots=False)
    wanted = {"score_norm", "accuracy", "nll", "ece", "retrain_score_norm", "retrain_accuracy"}
    assert wanted <= set(res.metrics.columns)
    assert "particle_spread" not in res.metrics.columns and "ksd" not in res.metrics.columns
    # node 1 had contributed at slot 2: its contribution never leaves the main weights
    assert res.requests["removal_latency"].isna().all()
    assert res.requests["retrain_latency"].notna().any()
    entry = res.theory[res.variants[0]]["removal_latency"][0]
    assert entry["expected"] is None and "no unlearning of its own" in entry["method"]
    assert "next_visit_latency" not in res.theory[res.variants[0]]


def test_uncompressed_server_and_walk_learn_the_same_weights():
    raw = _with(batch_size=20)
    del raw["protocol"]["compression"]
    server = gs.run(raw, plots=False)
    raw["protocol"]["architecture"] = "walk"
    walk = gs.run(raw, plots=False)
    columns = ["score_norm", "accuracy", "nll", "ece", "retrain_score_norm", "retrain_accuracy"]
    assert server.metrics[columns].equals(walk.metrics[columns])
    assert not server.metrics["bits"].equals(walk.metrics["bits"])


def test_fedavg_learns_to_near_the_centralised_maps_accuracy():
    """Five nodes (iid), 200 round-robin slots of 5 local steps, compressed uploads (k = 8 of 32
    entries, 5 bits each): the held-out accuracy is within 3 of the 113 held-out rows (0.027) of
    the accuracy of the point FedAvg aims at, the MAP of the same posterior found centrally on the
    pooled training rows of the same split (scipy's BFGS on the loss written in this file; 0.99
    here). Three rows, because constant-step SGD with several local steps and quantized updates
    hovers about the MAP rather than sitting on it (with accuracies near 0.99 a row or two of the
    border moves either way); chance (the majority class) is about 0.63."""
    from scipy.optimize import minimize

    raw = _with(local_iterations=5)
    raw["scenario"].update(runs=1, iterations=200)
    raw["topology"]["nodes"] = 5
    raw["metrics"] = {"record_every": 50}
    del raw["unlearning"]
    res = gs.run(raw, plots=False)
    data = build_world(res.study.variants[0].scenario).model.fixed_data
    X, y = np.concatenate(data.X), np.concatenate(data.y).astype(float)
    fit = minimize(lambda t: _loss(t, X, y, y.size), np.zeros(D), method="BFGS")
    assert fit.success
    reference = np.mean((data.X_test @ fit.x[:-1] > 0) == data.y_test)
    chance = max(np.mean(data.y_test), 1 - np.mean(data.y_test))
    final = res.metrics["accuracy"].iloc[-1]
    assert data.y_test.size == 113 and reference > 0.95 and chance < 0.7
    assert final >= reference - 3 / 113, (final, reference)
    assert res.metrics["nll"].iloc[-1] < res.metrics["nll"].iloc[0] / 2


def test_error_feedback_changes_the_weights_not_the_bits():
    plain = gs.run(BASE, plots=False)
    raw = copy.deepcopy(BASE)
    raw["protocol"]["compression"]["error_feedback"] = True
    fed = gs.run(raw, plots=False)
    assert fed.metrics["bits"].equals(plain.metrics["bits"])
    assert not fed.metrics["score_norm"].equals(plain.metrics["score_norm"])


def test_a_network_learns_on_the_walk():
    raw = {
        "scenario": {"name": "n", "seed": 2, "runs": 1, "iterations": 60},
        "topology": {"kind": "ring", "nodes": 3},
        "model": {"kind": "bnn", "hidden": 8},
        "data": {"dataset": "iris"},
        "protocol": {"kind": "fedavg", "local_iterations": 5, "learning_rate": 0.05},
        "metrics": {"record_every": 60},
    }
    res = gs.run(raw, plots=False)
    first, last = res.metrics.iloc[0], res.metrics.iloc[-1]
    assert last["nll"] < first["nll"] and last["accuracy"] > 0.6  # 3 classes: chance 1/3
    assert last["score_norm"] < first["score_norm"]


@pytest.mark.parametrize(
    ("change", "key", "says"),
    [
        ({"learning_rate": 0}, "protocol.learning_rate", "> 0"),
        ({"local_iterations": 0}, "protocol.local_iterations", ">= 1"),
        ({"batch_size": 0}, "protocol.batch_size", ">= 1"),
        ({"particles": 3}, "protocol.particles", "unknown key"),
        ({"architecture": "walk"}, "protocol.compression", 'architecture = "server"'),
        ({"compression": {"budget": "d", "a_max": 1, "scheme": "shared"}},
         "protocol.compression.scheme", "does not apply to fedavg"),
        ({"compression": {"budget": "d", "a_max": 1, "alpha": 0.5}},
         "protocol.compression.alpha", "does not apply to fedavg"),
        ({"compression": {"budget": "1", "a_max": 1}}, "protocol.compression.budget",
         "do not hold one entry"),
        ({"compression": {"budget": "d"}}, "protocol.compression.a_max", "is required"),
        ({"retrain_baseline": False}, "protocol.retrain_baseline", "no unlearning of its own"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_line(tmp_path, capsys, change, key, says):
    line = validate_error(_with(**change), tmp_path, capsys)
    assert key in line and says in line, line


def test_a_model_without_gradients_is_one_line(tmp_path, capsys):
    raw = {
        "scenario": {"name": "b"},
        "topology": {"kind": "complete", "nodes": 3},
        "model": {"kind": "beta-bernoulli"},
        "data": {"points_per_node": 5},
        "protocol": {"kind": "fedavg"},
    }
    line = validate_error(raw, tmp_path, capsys)
    assert "protocol.kind" in line and "'beta-bernoulli'" in line and "loglik-gradient" in line
