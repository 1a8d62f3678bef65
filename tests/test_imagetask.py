"""Fashion-MNIST on its PCA feature map, on a tiny IDX folder written here (issue 22, item 9)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA

from gossipsim.data.idx import FASHION_MNIST_FILES
from gossipsim.data.imagetask import fashion_mnist_task, principal_components
from gossipsim.errors import ConfigError
from tests.test_idx import idx_bytes


def _folder(tmp_path: Path, train: int = 40, test: int = 12) -> Path:
    rng = np.random.default_rng(60)
    arrays = {
        "train_images": rng.integers(0, 256, size=(train, 28, 28)).astype("u1"),
        "train_labels": (np.arange(train) % 10).astype("u1"),
        "test_images": rng.integers(0, 256, size=(test, 28, 28)).astype("u1"),
        "test_labels": (np.arange(test) % 10).astype("u1"),
    }
    for name, file in FASHION_MNIST_FILES.items():
        (tmp_path / file).write_bytes(gzip.compress(idx_bytes(arrays[name], "u1")))
    return tmp_path


def test_principal_components_agree_with_scikit_learn() -> None:
    rng = np.random.default_rng(61)
    images = rng.random((300, 6, 5)) * np.linspace(0.2, 3.0, 30).reshape(6, 5)
    mean, vectors, deviations = principal_components(images, 4, chunk=70)
    reference = PCA(n_components=4).fit(images.reshape(300, -1))
    np.testing.assert_allclose(mean, reference.mean_, rtol=1e-12)
    np.testing.assert_allclose(deviations**2, reference.explained_variance_ * 299 / 300, rtol=1e-9)
    # Components agree up to sign.
    np.testing.assert_allclose(np.abs(vectors.T @ reference.components_.T), np.eye(4), atol=1e-9)


def test_fashion_task_features_are_whitened_components_plus_bias(tmp_path: Path) -> None:
    task = fashion_mnist_task(_folder(tmp_path), components=5)
    assert task.kind == "multiclass"
    assert task.X_train.shape == (40, 6) and task.X_test.shape == (12, 6)
    assert task.feature_names[-1] == "bias" and np.all(task.X_train[:, -1] == 1.0)
    np.testing.assert_allclose(task.X_train[:, :5].mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(task.X_train[:, :5].std(axis=0), 1.0, rtol=1e-10)
    np.testing.assert_array_equal(task.y_train, np.arange(40) % 10)
    np.testing.assert_array_equal(task.groups_test, np.arange(12) % 10)


def test_bad_component_counts_are_one_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    for bad in (0, 785, 2.5, True):
        with pytest.raises(ConfigError, match="data.components: must be an integer 1..784"):
            fashion_mnist_task(folder, components=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="exceed the rank"):
        fashion_mnist_task(folder, components=60)
    with pytest.raises(ConfigError, match="apt install dataset-fashion-mnist"):
        fashion_mnist_task(tmp_path / "absent", components=5)
