"""The papers' unlearning split and last layer (issue 22, item 10): partition = "classes" deals each
listed class's rows among the nodes that list it, and bnn with hidden = 0 is a softmax (or linear)
regression on the features, its gradient against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax

from gossipsim.data.datasets import partition
from gossipsim.errors import ConfigError
from gossipsim.logdensity.bnn import BnnLayout, bnn_log_likelihood


def test_classes_partition_deals_each_class_to_the_nodes_listing_it():
    groups = np.repeat(np.arange(4), [6, 5, 7, 3])
    parts = partition(groups, 3, scheme="classes", node_classes=[[0, 1], [1, 2], [0]], rng=4)
    held = [set(groups[p].tolist()) for p in parts]
    assert held == [{0, 1}, {1, 2}, {0}]
    dealt = np.concatenate(parts)
    assert np.unique(dealt).size == dealt.size  # no row twice
    assert set(dealt.tolist()) == set(np.flatnonzero(groups != 3).tolist())  # class 3: unlisted
    # class 0's 6 rows split 3/3 between nodes 0 and 2, class 1's 5 rows 3/2 between 0 and 1
    assert [int(np.sum(groups[p] == 0)) for p in parts] == [3, 0, 3]
    assert sorted(int(np.sum(groups[p] == 1)) for p in parts[:2]) == [2, 3]


@pytest.mark.parametrize(
    ("node_classes", "needle"),
    [
        ([[0], [1]], "one list of classes per node (3)"),
        ([[0], [1], [9]], "not a class"),
        ([[0, 0], [1], [2]], "twice"),
        ([[0], [], [1]], "node 1 gets no data"),
        (None, "needs one list of classes per node"),
        (2, "needs one list of classes per node (got 2)"),  # a TypeError traceback (issue 30)
        ("0,1", "needs one list of classes per node (got '0,1')"),
    ],
)
def test_classes_partition_refuses_bad_lists_in_one_line(node_classes, needle):
    groups = np.repeat(np.arange(3), 4)
    with pytest.raises(ConfigError) as raised:
        partition(groups, 3, scheme="classes", node_classes=node_classes, rng=0)
    assert needle in str(raised.value) and "\n" not in str(raised.value)


def test_node_classes_belongs_to_the_classes_partition():
    with pytest.raises(ConfigError, match="data.node_classes"):
        partition(np.arange(6) % 2, 2, scheme="iid", node_classes=[[0], [1]], rng=0)


def test_a_network_without_hidden_layer_is_softmax_regression():
    rng = np.random.default_rng(0)
    layout = BnnLayout(4, 0, 3, hierarchical=True)
    assert layout.weight_count == 5 * 3 and layout.dimension == 16
    theta = rng.normal(size=(2, 5, layout.dimension))
    X, y = rng.normal(size=(7, 4)), rng.integers(0, 3, 7)
    values, gradient = bnn_log_likelihood(layout, theta, X, y, scale=1.5)
    W, b = theta[..., :12].reshape(2, 5, 4, 3), theta[..., 12:15]
    direct = log_softmax(X @ W + b[..., None, :], axis=-1)[..., np.arange(7), y].sum(axis=-1)
    np.testing.assert_allclose(values, 1.5 * direct, rtol=1e-12)
    numeric = np.zeros_like(theta)
    for index in np.ndindex(theta.shape):
        bump = np.zeros_like(theta)
        bump[index] = 1e-6
        plus = bnn_log_likelihood(layout, theta + bump, X, y, scale=1.5)[0].sum()
        minus = bnn_log_likelihood(layout, theta - bump, X, y, scale=1.5)[0].sum()
        numeric[index] = (plus - minus) / 2e-6
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-6)
    assert np.all(gradient[..., -1] == 0.0)  # log λ enters through the prior only
