"""``[model] hidden`` as a list of widths (issue 35, item 1): a ``bnn`` of several hidden ReLU layers.
Its gradient against central differences, its forward pass and likelihood against
:mod:`gossipsim.logdensity.gaussian_mlp`'s (an independent implementation of the same layout),
``[H]`` against ``H`` bit for bit, its budgets, a short DSVGD run on both engines, bad values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import gossipsim as gs
from gossipsim.logdensity.bnn import (
    BnnLayout,
    bnn_log_likelihood,
    bnn_log_prior,
    bnn_outputs,
    sample_bnn_prior,
)
from gossipsim.logdensity.gaussian_mlp import MlpLayout, negative_log_likelihood
from gossipsim.models.bnn import BayesianNeuralNetwork
from gossipsim.study.sections import parse_scenario
from tests.helpers import base_scenario, validate_error

PROTOCOL = {"kind": "tests.plugins:ValidateParticles"}


def _raw(model: dict[str, Any], data: dict[str, Any], **sections: Any) -> dict:
    raw = base_scenario(model={"kind": "bnn", **model}, data=data, **sections)
    raw["topology"] = {"kind": "complete", "nodes": 3}
    raw.setdefault("protocol", PROTOCOL)
    return raw


def _problem(task: str, seed: int = 0) -> tuple[BnnLayout, np.ndarray, np.ndarray, np.ndarray]:
    """A 4-5-3-C network (C = 3 classes, or 1 output), a batch (2, 3) of particles, 7 rows."""
    rng = np.random.default_rng(seed)
    outputs = 3 if task == "classification" else 1
    layout = BnnLayout(4, (5, 3), outputs, task)  # type: ignore[arg-type]
    particles = rng.standard_normal((2, 3, layout.dimension))
    X = rng.standard_normal((7, 4))
    y = rng.integers(0, 3, size=7) if task == "classification" else rng.standard_normal(7)
    return layout, particles, X, y


def test_the_layout_counts_every_layer():
    assert BnnLayout(784, (50, 50), 10).dimension == 42_310  # 004's 784-50-50-10
    assert BnnLayout(64, (50, 50), 10).dimension == 6_310  # digits at [50, 50]
    assert BnnLayout(4, (5, 3), 1, "regression").dimension == 25 + 18 + 4 + 1  # and log γ
    assert BnnLayout(4, [6], 3).hidden == 6  # one width is the integer
    assert BnnLayout(4, (5, 3), 3).units == 8
    with pytest.raises(ValueError, match="widths"):
        BnnLayout(4, (5, 0), 3)
    with pytest.raises(ValueError, match="widths"):
        BnnLayout(4, (), 3)


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_gradient_at_a_batch_of_particles_matches_central_differences(task):
    layout, particles, X, y = _problem(task)
    value, gradient = bnn_log_likelihood(layout, particles, X, y, scale=1.5)
    assert value.shape == (2, 3) and gradient.shape == particles.shape
    step = 1e-6
    coordinates = np.random.default_rng(1).choice(layout.dimension, size=25, replace=False)
    for k in (*coordinates, layout.dimension - 1):
        up, down = particles.copy(), particles.copy()
        up[..., k] += step
        down[..., k] -= step
        numeric = (
            bnn_log_likelihood(layout, up, X, y, scale=1.5)[0]
            - bnn_log_likelihood(layout, down, X, y, scale=1.5)[0]
        ) / (2 * step)
        np.testing.assert_allclose(gradient[..., k], numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_forward_and_likelihood_match_gaussian_mlp(task):
    """gaussian_mlp's backpropagation of one weight vector, particle by particle."""
    layout, particles, X, y = _problem(task, seed=2)
    mlp = MlpLayout((4, 5, 3, layout.outputs), task)  # type: ignore[arg-type]
    value, gradient = bnn_log_likelihood(layout, particles, X, y)
    outputs = bnn_outputs(layout, particles, X)
    for i in range(2):
        for j in range(3):
            theta = particles[i, j]
            weights = theta[: mlp.dimension]
            noise = 1.0 if task == "classification" else float(np.exp(theta[-1]))
            nll, grad = negative_log_likelihood(
                mlp, weights, X, y, np.ones(7), noise_precision=noise
            )
            np.testing.assert_allclose(value[i, j], -nll, rtol=1e-12)
            np.testing.assert_allclose(gradient[i, j, : mlp.dimension], -grad, atol=1e-12)
            # the outputs, written out layer by layer from MlpLayout's views
            h = X
            layers = mlp.unpack(weights)
            for w, b in layers[:-1]:
                h = np.maximum(h @ w + b, 0.0)
            np.testing.assert_allclose(outputs[i, j], h @ layers[-1][0] + layers[-1][1], atol=1e-12)


def test_the_prior_takes_any_depth():
    layout = BnnLayout(4, (5, 3), 3, hierarchical=True)
    particles = sample_bnn_prior(layout, np.random.default_rng(0), 6)
    assert particles.shape == (6, layout.dimension)
    value, gradient = bnn_log_prior(layout, particles)
    assert value.shape == (6,) and np.isfinite(gradient).all()


def _spec(model: dict[str, Any], data: dict[str, Any]) -> Any:
    return parse_scenario(_raw(model, data)).model_spec


@pytest.mark.parametrize("dataset", ["wine", "diabetes"])
def test_a_list_of_one_width_is_the_integer_bit_for_bit(dataset):
    from gossipsim.world.world import build_world

    worlds = [
        build_world(parse_scenario(_raw({"hidden": h}, {"dataset": dataset}))) for h in (7, [7])
    ]
    one, listed = (w.model for w in worlds)
    assert one.layout == listed.layout
    data = one.draw_data(np.random.default_rng(3))
    particles = one.sample_prior(np.random.default_rng(4), 5)
    for a, b in zip(
        one.log_likelihood(data, 0, particles),
        listed.log_likelihood(data, 0, particles),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    sizes = [
        BayesianNeuralNetwork.sizes(_spec({"hidden": h}, {"dataset": dataset}), 3) for h in (7, [7])
    ]
    assert sizes[0] == sizes[1]


def test_budgets_count_every_layer():
    deep = BayesianNeuralNetwork.sizes(_spec({"hidden": [50, 50]}, {"dataset": "digits"}), 3)
    one = BayesianNeuralNetwork.sizes(_spec({"hidden": 50}, {"dataset": "digits"}), 3)
    assert deep.particle_entries == deep.state_entries == deep.message_entries == 6_310
    assert deep.row_flops == 6.0 * 6_310  # every weight of every layer
    assert deep.step_values > one.step_values  # the second layer's activations


def _study(engine: str, protocol: dict[str, Any], model: dict[str, Any], dataset: str) -> Any:
    raw = {
        "scenario": {"name": "deep", "seed": 3, "runs": 2, "iterations": 6},
        "topology": {"kind": "ring", "nodes": 3},
        "model": {"kind": "bnn", "hidden": [20, 20], **model},
        "data": {"dataset": dataset, "rows_per_node": 30, "test_rows": 40},
        "protocol": protocol,
        "metrics": {"record_every": 3},
    }
    return gs.run(raw, engine=engine)


@pytest.mark.parametrize(
    ("protocol", "model", "dataset", "columns"),
    [
        ({"kind": "dsvgd", "particles": 4}, {}, "digits", ("accuracy", "nll", "ece")),
        ({"kind": "parallel-dsvgd", "particles": 4, "architecture": "server"}, {}, "digits",
         ("accuracy", "nll", "ece")),
        ({"kind": "svgd", "particles": 4}, {}, "digits", ("accuracy", "nll", "ece")),
        ({"kind": "dsvgd", "particles": 4, "batch_size": 5}, {"weight_prior": "hierarchical"},
         "diabetes", ("rmse", "nll")),
    ],
)  # fmt: skip
def test_short_particle_runs_of_two_hidden_layers(protocol, model, dataset, columns):
    """A few slots of DSVGD (walk), parallel DSVGD, SVGD on digits and DSVGD regression under the
    hierarchical prior: metric columns written, and the vectorised engine's batched path gives the
    event engine's bits (parallel DSVGD has no vectorised kernel for the bnn, of any depth)."""
    event = _study("event", protocol, model, dataset)
    for column in columns:
        values = event.metrics[column].dropna()
        assert len(values) > 0 and np.isfinite(values).all(), column
    if protocol["kind"] == "parallel-dsvgd":
        return
    vectorized = _study("vectorized", protocol, model, dataset)
    assert vectorized.engines == {"deep": "vectorized"}
    for name in ("runs", "metrics"):
        pd.testing.assert_frame_equal(
            getattr(vectorized, name), getattr(event, name), check_exact=True, obj=name
        )


@pytest.mark.parametrize(
    ("hidden", "words"),
    [
        ([], "non-empty list"),
        ([50, 0], "model.hidden[1]: must be an integer >= 1"),
        ([50, -2], ">= 1"),
        ([50, 2.5], "an integer"),
        ([[50]], "an integer"),
        ("50", "an integer"),
        (-1, ">= 0"),
    ],
)
def test_bad_hidden_is_one_line_with_exit_2(tmp_path, capsys, hidden, words):
    line = validate_error(_raw({"hidden": hidden}, {"dataset": "iris"}), tmp_path, capsys)
    assert "model.hidden" in line, line
    assert words in line, line
