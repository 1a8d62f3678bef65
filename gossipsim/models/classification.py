"""Held-out metrics of a predictive over C classes, and the spread of a particle set.

The probabilities are those of the particle-averaged predictive, ``(..., n, C)`` for n held-out
rows; labels are class indices ``(n,)``. With C = 2 and probabilities (1 − p, p) every metric equals
its binary counterpart in :mod:`gossipsim.models.glm` (prediction: argmax, a tie to the lower class).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def _labels(labels: NDArray[np.generic], classes: int) -> NDArray[np.intp]:
    indices = np.asarray(labels).astype(np.intp)
    if indices.size and (indices.min() < 0 or indices.max() >= classes):
        raise ValueError(f"labels must be class indices 0..{classes - 1}")
    return indices


def classification_accuracy(probabilities: FloatArray, labels: NDArray[np.generic]) -> FloatArray:
    """Fraction of rows whose most probable class is the label: ``(...)``."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    indices = _labels(labels, probabilities.shape[-1])
    return np.asarray(np.mean(np.argmax(probabilities, axis=-1) == indices, axis=-1))


def classification_nll(
    probabilities: FloatArray, labels: NDArray[np.generic], eps: float = 1e-12
) -> FloatArray:
    """Mean over rows of −log p(label), probabilities clipped to [eps, 1]: ``(...)``."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    indices = _labels(labels, probabilities.shape[-1])
    chosen = np.take_along_axis(
        probabilities, np.broadcast_to(indices[:, None], probabilities.shape[:-1] + (1,)), axis=-1
    )[..., 0]
    return np.asarray(-np.mean(np.log(np.clip(chosen, eps, 1.0)), axis=-1))


def classification_ece(
    probabilities: FloatArray, labels: NDArray[np.generic], bins: int = 10
) -> FloatArray:
    """ECE = Σ_m |B_m|/n · |acc(B_m) − conf(B_m)| (eq. 14 of 000): ``(...)``.

    Confidence is the largest class probability; bin m = 1..M holds the confidences in
    ((m − 1)/M, m/M]; empty bins contribute 0.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    indices = _labels(labels, probabilities.shape[-1])
    confidence = probabilities.max(axis=-1)
    correct = (np.argmax(probabilities, axis=-1) == indices).astype(np.float64)
    return calibration_error(confidence, correct, bins)


def calibration_error(confidence: FloatArray, correct: FloatArray, bins: int = 10) -> FloatArray:
    """Σ_m |B_m|/n · |acc(B_m) − conf(B_m)| from each row's confidence and whether its prediction
    was right, ``(..., n)`` each → ``(...)``: bin m = 1..M holds the confidences in
    ((m − 1)/M, m/M]; empty bins contribute 0 (eq. 14 of 000; binary and multi-class ECE)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, bins - 1)
    lead = confidence.shape[:-1]
    rows = int(np.prod(lead, dtype=int))
    flat_index = (np.arange(rows)[:, None] * bins + index.reshape(rows, -1)).ravel()
    gap = np.bincount(
        flat_index, weights=(np.asarray(correct) - confidence).reshape(-1), minlength=rows * bins
    ).reshape(rows, bins)
    return (np.sum(np.abs(gap), axis=-1) / confidence.shape[-1]).reshape(lead)


def particle_spread(particles: FloatArray) -> FloatArray:
    """Root mean square distance of the particles from their mean, √((1/N) Σ_n ‖θ_n − θ̄‖²): ``(...)``."""
    particles = np.asarray(particles, dtype=np.float64)
    centred = particles - particles.mean(axis=-2, keepdims=True)
    return np.asarray(np.sqrt(np.mean(np.sum(centred**2, axis=-1), axis=-1)))
