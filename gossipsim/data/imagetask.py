"""Fashion-MNIST as a multi-class :class:`~gossipsim.data.datasets.Task` on a fixed feature map.

The papers train the particles on the last layer of a network pre-trained by FedAvg. gossipsim's
feature map is label-free and fixed, so every run and node sees the same features: the first
``components`` principal components of the 60,000 training images (pixels scaled to [0, 1]),
fitted on the training split only and whitened (each component divided by its standard deviation,
so the features are standardised), then a bias column. The 10,000 test images go through the same
map. ``y`` is the class index 0..9 (:data:`gossipsim.data.idx.FASHION_MNIST_CLASSES`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from gossipsim.data.datasets import Task
from gossipsim.data.idx import load_fashion_mnist
from gossipsim.errors import ConfigError

FloatArray = NDArray[np.float64]
PIXELS = 28 * 28


def principal_components(
    images: FloatArray, components: int, *, chunk: int = 10_000
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Mean ``(p,)``, the top ``components`` eigenvectors ``(p, c)`` of the covariance and their
    standard deviations ``(c,)``, by an eigendecomposition of the p × p covariance accumulated in
    chunks (never a float copy of all rows)."""
    rows = images.shape[0]
    flat = images.reshape(rows, -1)
    mean = flat.mean(axis=0, dtype=np.float64)
    scatter = np.zeros((flat.shape[1], flat.shape[1]))
    for start in range(0, rows, chunk):
        block = flat[start : start + chunk].astype(np.float64) - mean
        scatter += block.T @ block
    values, vectors = np.linalg.eigh(scatter / rows)
    order = np.argsort(values)[::-1][:components]
    return mean, vectors[:, order], np.sqrt(np.maximum(values[order], 0.0))


@cache
def _fashion_features(folder: str | None, components: int, key: str) -> tuple[FloatArray, ...]:
    images = load_fashion_mnist(folder, key=key)
    mean, vectors, deviations = principal_components(images.train_images, components)
    if np.any(deviations <= 1e-6 * deviations[0]):
        raise ConfigError(
            "data.components",
            f"{components} components exceed the rank of the training images; use fewer",
        )

    def features(pictures: FloatArray) -> FloatArray:
        projected = (pictures.reshape(pictures.shape[0], -1) - mean) @ vectors / deviations
        return np.hstack([projected, np.ones((projected.shape[0], 1))])

    train, test = features(images.train_images), features(images.test_images)
    for array in (train, test):
        array.setflags(write=False)
    return (
        train,
        images.train_labels.astype(float),
        test,
        images.test_labels.astype(float),
    )


def fashion_mnist_task(
    folder: str | Path | None = None, *, components: int = 50, key: str = "data.path"
) -> Task:
    """The Fashion-MNIST task on its PCA feature map (see the module docstring); cached per
    (folder, components) within a process. Missing or damaged files are errors naming ``key``."""
    if isinstance(components, bool) or not isinstance(components, (int, np.integer)):
        raise ConfigError("data.components", f"must be an integer 1..{PIXELS}, got {components!r}")
    if not 1 <= components <= PIXELS:
        raise ConfigError("data.components", f"must be an integer 1..{PIXELS}, got {components}")
    X_train, y_train, X_test, y_test = _fashion_features(
        None if folder is None else str(folder), int(components), key
    )
    names = tuple(f"pc{i + 1}" for i in range(components)) + ("bias",)
    return Task(
        name="fashion_mnist",
        kind="multiclass",
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        groups_train=y_train.astype(np.int64),
        feature_names=names,
        groups_test=y_test.astype(np.int64),
    )
