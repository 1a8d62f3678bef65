"""Multi-class held-out metrics: equal to the binary ones at C = 2, and against direct counts."""

from __future__ import annotations

import numpy as np
import pytest

from gossipsim.models import glm
from gossipsim.models.classification import (
    classification_accuracy,
    classification_ece,
    classification_nll,
    particle_spread,
)


def test_two_classes_equal_the_binary_metrics() -> None:
    rng = np.random.default_rng(50)
    p = rng.random((3, 40))
    p[0, :5] = 0.5  # ties go to class 0 in both
    y = rng.integers(0, 2, size=40)
    probabilities = np.stack([1 - p, p], axis=-1)
    np.testing.assert_allclose(classification_accuracy(probabilities, y), glm.accuracy(p, y))
    np.testing.assert_allclose(
        classification_nll(probabilities, y), glm.negative_log_likelihood(p, y), rtol=1e-12
    )
    np.testing.assert_allclose(
        classification_ece(probabilities, y, bins=7),
        glm.expected_calibration_error(p, y, bins=7),
        rtol=1e-12,
    )


def test_three_classes_against_direct_counts() -> None:
    probabilities = np.array(
        [[0.7, 0.2, 0.1], [0.1, 0.15, 0.75], [0.3, 0.4, 0.3], [0.34, 0.33, 0.33]]
    )
    labels = np.array([0, 1, 1, 2])
    assert classification_accuracy(probabilities, labels) == pytest.approx(0.5)
    expected_nll = -np.mean(np.log([0.7, 0.15, 0.4, 0.33]))
    assert classification_nll(probabilities, labels) == pytest.approx(expected_nll)
    # bins of width 0.5: (0, 0.5] holds rows 2 and 3 (conf 0.4, 0.34; correct 1, 0);
    # (0.5, 1] holds rows 0 and 1 (conf 0.7, 0.75; correct 1, 0).
    expected_ece = (abs(1 - 0.4 + 0 - 0.34) + abs(1 - 0.7 + 0 - 0.75)) / 4
    assert classification_ece(probabilities, labels, bins=2) == pytest.approx(expected_ece)
    with pytest.raises(ValueError, match="class indices"):
        classification_accuracy(probabilities, np.array([0, 1, 3, 2]))


def test_particle_spread_is_the_rms_distance_from_the_mean() -> None:
    particles = np.array([[[0.0, 0.0], [2.0, 0.0], [1.0, 3.0]]])
    mean = particles[0].mean(axis=0)
    expected = np.sqrt(np.mean(np.sum((particles[0] - mean) ** 2, axis=1)))
    assert particle_spread(particles)[0] == pytest.approx(expected)
