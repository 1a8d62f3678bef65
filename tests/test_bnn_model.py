"""``[model] kind = "bnn"`` (issue 22, items 7-9): the model's log-densities against a network
written out here, its gradients against finite differences, its metrics against direct
computation, its data (original classes, partitions, Fashion-MNIST) and its one-line errors."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import gamma, norm

from gossipsim.api import parse_study
from gossipsim.errors import ConfigError
from gossipsim.models import particlemodel
from gossipsim.results import studyrecord
from gossipsim.study.sections import parse_scenario
from gossipsim.world.world import build_world
from tests.helpers import base_scenario, validate_error
from tests.test_imagetask import _folder as fashion_folder

PROTOCOL = {"kind": "tests.plugins:ValidateParticles"}  # validation only: builds no protocol


def _raw(model: dict[str, Any], data: dict[str, Any], nodes: int = 3, **sections: Any) -> dict:
    raw = base_scenario(model={"kind": "bnn", **model}, data=data, protocol=PROTOCOL, **sections)
    raw["topology"] = {"kind": "complete", "nodes": nodes}
    return raw


def _model(model: dict[str, Any], data: dict[str, Any], nodes: int = 3, **sections: Any) -> Any:
    return build_world(parse_scenario(_raw(model, data, nodes, **sections))).model


# -------------------------------------------------------------- the network, written out here


def _unpack(theta: np.ndarray, p: int, h: int, c: int) -> tuple[np.ndarray, ...]:
    at = 0
    w1 = theta[at : at + p * h].reshape(p, h)
    at += p * h
    b1 = theta[at : at + h]
    at += h
    w2 = theta[at : at + h * c].reshape(h, c)
    at += h * c
    return w1, b1, w2, theta[at : at + c]


def _outputs(theta: np.ndarray, X: np.ndarray, p: int, h: int, c: int) -> np.ndarray:
    w1, b1, w2, b2 = _unpack(theta, p, h, c)
    return np.maximum(X @ w1 + b1, 0.0) @ w2 + b2


def _row_log_likelihoods(model: Any, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log p(y_i | x_i, θ) of every row, from the layer sizes alone."""
    layout = model.layout
    f = _outputs(theta, X, layout.features, layout.hidden, layout.outputs)
    if layout.task == "classification":
        return f[np.arange(y.size), y.astype(int)] - logsumexp(f, axis=1)
    noise = math.exp(theta[layout.weight_count])  # log γ follows the weights
    return norm.logpdf(y, f[:, 0], 1.0 / math.sqrt(noise))


def _log_prior(model: Any, theta: np.ndarray) -> float:
    """N(0, λ⁻¹) weights with λ fixed, or λ ~ Gamma (the last coordinate, log λ); γ ~ Gamma; on
    the log scale with the Jacobians."""
    layout = model.layout
    weights = theta[: layout.weight_count]
    if layout.hierarchical:
        log_precision = theta[-1]
        precision = math.exp(log_precision)
        a, b = model.weight_prior.shape, model.weight_prior.rate
        value = gamma.logpdf(precision, a, scale=1.0 / b) + log_precision
    else:
        precision, value = model.weight_prior.precision, 0.0
    value += norm.logpdf(weights, 0.0, 1.0 / math.sqrt(precision)).sum()
    if layout.task == "regression":
        log_noise = theta[layout.weight_count]
        a, b = model.noise_prior.shape, model.noise_prior.rate
        value += gamma.logpdf(math.exp(log_noise), a, scale=1.0 / b) + log_noise
    return float(value)


def _finite_difference(function: Any, theta: np.ndarray, step: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(theta)
    for i in range(theta.size):
        bump = np.zeros_like(theta)
        bump[i] = step
        out[i] = (function(theta + bump) - function(theta - bump)) / (2 * step)
    return out


def _particles(model: Any, count: int, seed: int, scale: float = 0.5) -> np.ndarray:
    """Particles of moderate size (prior draws can have weights of 100, whose logits overflow a
    finite-difference step into round-off)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(count, model.particle_dimension)) * scale
    theta[:, model.layout.weight_count :] = rng.normal(size=(count, 1)) * 0.5  # log γ, log λ
    return theta


# --------------------------------------------------------------------------------------- data


@pytest.mark.parametrize(
    ("dataset", "classes", "features"),
    [("iris", 3, 4), ("wine", 3, 13), ("digits", 10, 64), ("breast_cancer", 2, 30)],
)
def test_classification_sets_keep_their_original_classes(dataset, classes, features):
    from sklearn import datasets as skd

    model = _model({"hidden": 4}, {"dataset": dataset}, nodes=4)
    data = model.fixed_data
    layout = model.layout
    assert (layout.task, layout.features, layout.outputs) == ("classification", features, classes)
    assert model.particle_dimension == (features + 1) * 4 + (4 + 1) * classes  # λ fixed
    assert model.message_entries == model.particle_dimension
    target = getattr(skd, f"load_{dataset}")().target
    held = np.concatenate([*data.y, data.y_test]).astype(int)
    assert Counter(held.tolist()) == Counter(target.tolist())  # every row once, its own class
    assert all(X.shape[1] == features for X in data.X)  # no bias column: the network has biases


def test_diabetes_gives_regression_with_a_learned_noise_precision():
    model = _model({"hidden": 5}, {"dataset": "diabetes", "test_fraction": 0.25})
    layout = model.layout
    assert (layout.task, layout.outputs) == ("regression", 1)
    assert model.particle_dimension == 11 * 5 + 6 + 1  # weights, log γ (λ fixed)
    assert model.particle_columns(frozenset({1})) == ("rmse", "nll", "particle_spread")
    assert model.fixed_data.y_test.size == math.floor(0.25 * 442 + 0.5)  # rounded half up


def test_partitions_and_caps_are_those_of_the_settings():
    data_keys = {"dataset": "digits", "partition": "labels", "labels_per_node": 2,
                 "rows_per_node": 30, "test_rows": 50}  # fmt: skip
    data = _model({"hidden": 3}, data_keys, nodes=5).fixed_data
    assert [y.size for y in data.y] == [30] * 5 and data.y_test.size == 50
    assert all(np.unique(y).size <= 2 for y in data.y)
    again = _model({"hidden": 3}, data_keys, nodes=5).fixed_data
    for a, b in zip(data.X, again.X, strict=True):
        np.testing.assert_array_equal(a, b)  # the data seed decides everything


def test_fashion_mnist_on_its_feature_map(tmp_path: Path):
    folder = fashion_folder(tmp_path)
    model = _model(
        {"hidden": 3},
        {"dataset": "fashion_mnist", "folder": str(folder), "components": 5, "rows_per_node": 7,
         "test_rows": 9},
        nodes=2,
    )  # fmt: skip
    data = model.fixed_data
    assert (model.layout.features, model.layout.outputs) == (5, 10)
    assert [X.shape for X in data.X] == [(7, 5), (7, 5)] and data.X_test.shape == (9, 5)
    np.testing.assert_array_equal(np.concatenate(data.y) % 1, 0.0)
    # the bundled folder's four files are inputs of the results folder's fingerprint
    study = parse_study(
        _raw({"hidden": 3}, {"dataset": "fashion_mnist", "folder": str(folder), "components": 5},
             nodes=2)
    )  # fmt: skip
    hashes = studyrecord.input_hashes(study)
    assert sorted(hashes) == sorted(
        f"data.folder={folder}/{name}"
        for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                     "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    )  # fmt: skip


# ------------------------------------------------------------------------------ log-densities


@pytest.mark.parametrize("dataset", ["iris", "diabetes"])
def test_log_likelihood_is_the_sum_over_the_node_s_rows(dataset):
    model = _model({"hidden": 3}, {"dataset": dataset})
    data = model.fixed_data
    theta = _particles(model, 4, 1)
    if dataset == "diabetes":
        theta[:, -2] = [-0.5, 0.0, 0.3, 1.0]  # log γ
    for node in range(3):
        value, gradient = model.log_likelihood(data, node, theta)
        direct = [_row_log_likelihoods(model, t, data.X[node], data.y[node]).sum() for t in theta]
        np.testing.assert_allclose(value, direct, rtol=1e-11)
        numeric = _finite_difference(
            lambda t, n=node: _row_log_likelihoods(model, t, data.X[n], data.y[n]).sum(), theta[0]
        )
        np.testing.assert_allclose(gradient[0], numeric, rtol=1e-5, atol=1e-5)


def test_a_mini_batch_is_scaled_to_the_node_s_rows():
    model = _model({"hidden": 3}, {"dataset": "wine"})
    data = model.fixed_data
    theta = _particles(model, 3, 2)
    rows = np.array([0, 4, 5, 11])
    n = data.y[1].size
    value, gradient = model.log_likelihood(data, 1, theta, rows)
    direct = [
        n / 4 * _row_log_likelihoods(model, t, data.X[1][rows], data.y[1][rows]).sum()
        for t in theta
    ]
    np.testing.assert_allclose(value, direct, rtol=1e-11)
    full_value, full_gradient = model.log_likelihood(data, 1, theta, np.arange(n))
    np.testing.assert_allclose(full_value, model.log_likelihood(data, 1, theta)[0], rtol=1e-12)
    np.testing.assert_allclose(full_gradient, model.log_likelihood(data, 1, theta)[1], rtol=1e-12)
    numeric = _finite_difference(
        lambda t: n / 4 * _row_log_likelihoods(model, t, data.X[1][rows], data.y[1][rows]).sum(),
        theta[2],
    )
    np.testing.assert_allclose(gradient[2], numeric, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="at least one row"):
        model.log_likelihood(data, 1, theta, np.array([], dtype=np.intp))


def test_rows_taken_in_blocks_give_the_same_sums(monkeypatch):
    model = _model({"hidden": 3}, {"dataset": "digits"}, nodes=2)
    data = model.fixed_data
    theta = _particles(model, 5, 3)[None].repeat(2, axis=0)  # a batch axis too
    whole = model.log_likelihood(data, 0, theta)
    monkeypatch.setattr(particlemodel, "CHUNK_VALUES", 500)
    monkeypatch.setattr("gossipsim.models.bnn.CHUNK_VALUES", 500)  # 5 particles x 17: 5 rows
    blocks = model.log_likelihood(data, 0, theta)
    np.testing.assert_allclose(blocks[0], whole[0], rtol=1e-12)
    np.testing.assert_allclose(blocks[1], whole[1], rtol=1e-10, atol=1e-12)


def test_a_set_s_likelihood_is_the_same_bits_alone_or_in_a_batch(monkeypatch):
    """The rows are summed in blocks sized by one set's activations, never by the batch's: a set
    computed alone (one run of the event engine) and in a batch (the vectorized engine's runs, a
    KSD call's sets) gives the same bits, whatever CHUNK_VALUES. Blocks sized by the batch (5
    rows alone, 1 row in the batch of 5 sets here) summed in another order: last-bit differences
    of the ``bnn`` KSD and particle sets between the engines (issue 30, item 9)."""
    model = _model({"hidden": 3}, {"dataset": "digits"}, nodes=2)
    data = model.fixed_data
    sets = np.stack([_particles(model, 5, seed) for seed in range(5)])  # (5 sets, 5, d)
    monkeypatch.setattr("gossipsim.models.bnn.CHUNK_VALUES", 500)  # 5 particles x 17: 5 rows
    for rows in (None, np.arange(0, 40, 3)):
        value, gradient = model.log_likelihood(data, 0, sets, rows)
        for i, one in enumerate(sets):
            alone = model.log_likelihood(data, 0, one, rows)
            np.testing.assert_array_equal(alone[0], value[i])
            np.testing.assert_array_equal(alone[1], gradient[i])
    # a batch of batches keeps its leading axes
    value, gradient = model.log_likelihood(data, 1, sets.reshape(5, 1, 5, -1))
    assert value.shape == (5, 1, 5) and gradient.shape == (5, 1, *sets.shape[1:])
    np.testing.assert_array_equal(gradient[:, 0], model.log_likelihood(data, 1, sets)[1])


PRIORS = {
    "hierarchical": {"weight_prior": "hierarchical",
                     "prior": {"weight_shape": 1.5, "weight_rate": 0.3, "noise_shape": 2.0,
                               "noise_rate": 0.5}},
    "fixed": {"prior": {"weight_precision": 1.7, "noise_shape": 2.0, "noise_rate": 0.5}},
}  # fmt: skip


@pytest.mark.parametrize("weight_prior", sorted(PRIORS))
@pytest.mark.parametrize("dataset", ["iris", "diabetes"])
def test_the_target_score_is_the_gradient_of_prior_and_tempered_likelihoods(dataset, weight_prior):
    model = _model({"hidden": 2, "temperature": 2.0, **PRIORS[weight_prior]}, {"dataset": dataset})
    data = model.fixed_data
    theta = _particles(model, 2, 4)
    forgotten = frozenset({1})

    def log_target(t: np.ndarray) -> float:
        likelihood = sum(_row_log_likelihoods(model, t, data.X[k], data.y[k]).sum() for k in (0, 2))
        return _log_prior(model, t) + likelihood / 2.0

    score = model.particle_target(data, forgotten).score(theta)
    for i in range(2):
        numeric = _finite_difference(log_target, theta[i])
        np.testing.assert_allclose(score[i], numeric, rtol=1e-5, atol=1e-5)
    # the model's target (what the runner asks for) is this posterior
    np.testing.assert_array_equal(model.target(data, forgotten).score(theta), score)
    np.testing.assert_allclose(
        model.log_prior(theta)[0], [_log_prior(model, t) for t in theta], rtol=1e-12
    )


def test_prior_draws_have_the_prior_s_precision():
    """log λ of 4,000 draws: mean within 4 SE of E log λ = ψ(a) − log b."""
    from scipy.special import digamma

    model = _model(
        {"hidden": 2, "weight_prior": "hierarchical",
         "prior": {"weight_shape": 3.0, "weight_rate": 0.5}},
        {"dataset": "iris"},
    )  # fmt: skip
    draws = model.sample_prior(np.random.default_rng(5), 4000)
    assert draws.shape == (4000, model.particle_dimension)
    log_precision = draws[:, -1]
    se = log_precision.std(ddof=1) / math.sqrt(4000)
    assert abs(log_precision.mean() - (digamma(3.0) - math.log(0.5))) < 4 * se


def test_the_default_prior_fixes_the_weights_precision_at_e():
    """No log λ coordinate; 4,000 draws of each weight have variance 1/e: the sample variance of
    all weights within 4 SE of it (SE of a variance: σ²·√(2/(n − 1)))."""
    model = _model({"hidden": 2}, {"dataset": "iris"})
    layout = model.layout
    assert not layout.hierarchical and model.weight_prior.precision == math.e
    assert model.particle_dimension == layout.weight_count == (4 + 1) * 2 + (2 + 1) * 3
    draws = model.sample_prior(np.random.default_rng(6), 4000)
    weights = draws.ravel()
    variance = 1.0 / math.e
    se = variance * math.sqrt(2.0 / (weights.size - 1))
    assert abs(weights.var(ddof=1) - variance) < 4 * se
    regression = _model({"hidden": 2}, {"dataset": "diabetes"})
    assert regression.particle_dimension == regression.layout.weight_count + 1  # log γ last


# ------------------------------------------------------------------------------------ metrics


def test_classification_metrics_against_direct_computation():
    model = _model({"hidden": 3}, {"dataset": "iris", "partition": "labels",
                                   "labels_per_node": 1}, nodes=3)  # fmt: skip
    data = model.fixed_data
    sets = np.stack([_particles(model, 6, seed) * 2 for seed in (10, 11)])  # (2, 6, d)
    requested = frozenset({0})
    out = model.evaluate_particles(data, sets, requested)
    assert tuple(out) == model.particle_columns(requested)
    labels = data.y_test.astype(int)
    forgotten_label = int(np.unique(data.y[0])[0])  # node 0 alone holds its class
    for r in range(2):
        p = np.mean(
            [
                np.exp(f - logsumexp(f, axis=1, keepdims=True))
                for f in (_outputs(t, data.X_test, 4, 3, 3) for t in sets[r])
            ],
            axis=0,
        )
        right = p.argmax(axis=1) == labels
        assert out["accuracy"][r] == pytest.approx(right.mean())
        assert out["nll"][r] == pytest.approx(-np.log(p[np.arange(labels.size), labels]).mean())
        mask = labels == forgotten_label
        assert out["accuracy_forgotten"][r] == pytest.approx(right[mask].mean())
        assert out["accuracy_remaining"][r] == pytest.approx(right[~mask].mean())
        confidence = p.max(axis=1)
        ece = sum(
            abs(right[b].mean() - confidence[b].mean()) * b.sum() / labels.size
            for m in range(10)
            if (b := (confidence > m / 10) & (confidence <= (m + 1) / 10)).any()
        )
        assert out["ece"][r] == pytest.approx(ece)
        centred = sets[r] - sets[r].mean(axis=0)
        assert out["particle_spread"][r] == pytest.approx(np.sqrt((centred**2).sum(1).mean()))


def test_regression_metrics_against_direct_computation(monkeypatch):
    model = _model({"hidden": 3}, {"dataset": "diabetes"})
    data = model.fixed_data
    sets = np.stack([_particles(model, 5, seed) for seed in (12, 13, 14)])
    sets[..., -2] = np.linspace(-1.0, 1.0, 5)  # log γ
    out = model.evaluate_particles(data, sets, frozenset())
    for r in range(3):
        f = np.stack([_outputs(t, data.X_test, 10, 3, 1)[:, 0] for t in sets[r]])  # (N, M)
        rmse = np.sqrt(np.mean((data.y_test - f.mean(axis=0)) ** 2))
        sd = 1.0 / np.sqrt(np.exp(sets[r, :, -1]))[:, None]
        density = logsumexp(norm.logpdf(data.y_test, f, sd), axis=0) - math.log(5)
        assert out["rmse"][r] == pytest.approx(rmse, rel=1e-12)
        assert out["nll"][r] == pytest.approx(-density.mean(), rel=1e-12)
    monkeypatch.setattr(particlemodel, "CHUNK_VALUES", 1)  # one set at a time: the same values
    one_by_one = model.evaluate_particles(data, sets, frozenset())
    single = model.evaluate_particles(data, sets[2], frozenset())  # one set (N, d)
    for name, values in out.items():
        np.testing.assert_allclose(one_by_one[name], values, rtol=1e-13)
        assert np.shape(single[name]) == () and single[name] == pytest.approx(values[2])


def test_sizes_count_d_numbers_per_particle():
    spec = parse_scenario(_raw({"hidden": 7}, {"dataset": "wine"})).model_spec
    from gossipsim.models.bnn import BayesianNeuralNetwork

    sizes = BayesianNeuralNetwork.sizes(spec, 3)
    d = 14 * 7 + 8 * 3
    assert (sizes.state_entries, sizes.message_entries) == (d, d)
    raw = _raw({"hidden": 7, "weight_prior": "hierarchical"}, {"dataset": "wine"})
    sizes = BayesianNeuralNetwork.sizes(parse_scenario(raw).model_spec, 3)
    assert (sizes.state_entries, sizes.message_entries) == (d + 1, d + 1)  # and log λ


# ---------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("model", "data", "key", "words"),
    [
        ({"hidden": -1}, {"dataset": "iris"}, "model.hidden", ">= 0"),
        ({"task": "regression"}, {"dataset": "digits"}, "data.dataset", "takes: diabetes"),
        ({"task": "classification"}, {"dataset": "diabetes"}, "data.dataset", "fashion_mnist"),
        ({}, {"dataset": "mnist"}, "data.dataset", "unknown value"),
        ({}, {}, "data.dataset", "required"),
        ({}, {"dataset": "iris", "components": 5}, "data.components", "fashion_mnist"),
        ({}, {"dataset": "fashion_mnist", "test_fraction": 0.1}, "data.test_fraction",
         "its own test split"),
        ({}, {"dataset": "fashion_mnist", "folder": "absent"}, "data.folder",
         "apt install dataset-fashion-mnist"),
        ({"weight_prior": "hierarchical", "prior": {"weight_rate": 1e-200}}, {"dataset": "iris"},
         "model.prior.weight_rate", "1e-100"),
        ({"prior": {"weight_rate": 0.5}}, {"dataset": "iris"}, "model.prior.weight_rate",
         'weight_prior = "hierarchical" only'),
        ({"weight_prior": "hierarchical", "prior": {"weight_precision": 2}}, {"dataset": "iris"},
         "model.prior.weight_precision", 'weight_prior = "fixed" only'),
        ({"prior": {"weight_precision": 0}}, {"dataset": "iris"}, "model.prior.weight_precision",
         "> 0"),
        ({"weight_prior": "gamma"}, {"dataset": "iris"}, "model.weight_prior", "hierarchical"),
        ({"prior": {"noise_shape": -1}}, {"dataset": "diabetes"}, "model.prior.noise_shape", "> 0"),
        ({}, {"dataset": "iris", "partition": "labels", "labels_per_node": 4},
         "data.labels_per_node", "only 3 labels"),
        ({}, {"dataset": "iris", "rows_per_node": 0}, "data.rows_per_node", ">= 1"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_line_with_exit_2(tmp_path, capsys, model, data, key, words):
    line = validate_error(_raw(model, data), tmp_path, capsys)
    assert f"{key}:" in line, line
    assert words in line, line


def test_a_g_fvl_protocol_refuses_the_network(tmp_path, capsys):
    raw = _raw({}, {"dataset": "iris"})
    del raw["protocol"]
    line = validate_error(raw, tmp_path, capsys)
    assert "protocol.kind" in line and "'bnn' has neither" in line


def test_errors_from_python_name_the_key():
    with pytest.raises(ConfigError, match="data.dataset"):
        _model({"task": "regression"}, {"dataset": "wine"})
