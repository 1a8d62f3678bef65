"""A one-hidden-layer Bayesian neural network (ReLU) for classification or regression.

θ holds, in this order: W1 (p × H, row-major), b1 (H), W2 (H × C), b2 (C), for regression log γ
(the noise precision), and last log λ (the weights' prior precision). The network is
f(x) = W2ᵀ·relu(W1ᵀx + b1) + b2. Priors, as in the original SVGD code's Bayesian neural network:
all weights and biases v ∼ N(0, λ⁻¹ I), λ ∼ Gamma(1, rate 0.1); γ ∼ Gamma(1, rate 0.1); both on
the log scale with their Jacobians (:mod:`gossipsim.logdensity.hierarchical`).

Likelihoods: classification, softmax over C classes, log p(y | x) = f_y(x) − logsumexp f(x);
regression (C = 1), y ∼ N(f(x), γ⁻¹). Gradients by backpropagation, written out below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln, log_softmax, logsumexp, softmax

from gossipsim.logdensity.hierarchical import (
    LOG_2PI,
    GammaPrior,
    hierarchical_log_prior,
    sample_hierarchical_prior,
)

FloatArray = NDArray[np.float64]
BnnTask = Literal["classification", "regression"]

#: The original SVGD code's priors on the weight precision λ and the noise precision γ.
BNN_WEIGHT_PRECISION_PRIOR: Final = GammaPrior(shape=1.0, rate=0.1)
BNN_NOISE_PRECISION_PRIOR: Final = GammaPrior(shape=1.0, rate=0.1)


@dataclass(frozen=True)
class BnnLayout:
    """Where each parameter sits in a particle of a network with ``features`` inputs, ``hidden``
    ReLU units and ``outputs`` outputs (the number of classes; 1 for regression). ``hidden = 0``
    is no hidden layer: a softmax (or linear) regression on the features, W ``(p, C)`` and b
    ``(C,)``, the papers' last layer on a feature map."""

    features: int
    hidden: int
    outputs: int
    task: BnnTask = "classification"

    def __post_init__(self) -> None:
        for name in ("features", "outputs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.hidden < 0:
            raise ValueError(f"hidden must be >= 0, got {self.hidden}")
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {self.task!r}")
        if self.task == "regression" and self.outputs != 1:
            raise ValueError("a regression network has one output")
        if self.task == "classification" and self.outputs < 2:
            raise ValueError("a classification network needs at least 2 classes")

    @property
    def weight_count(self) -> int:
        """Number of weights and biases (those under the N(0, λ⁻¹) prior)."""
        if self.hidden == 0:
            return (self.features + 1) * self.outputs
        return (self.features + 1) * self.hidden + (self.hidden + 1) * self.outputs

    @property
    def dimension(self) -> int:
        """Length of a particle: the weights, then log γ for regression, then log λ."""
        return self.weight_count + (1 if self.task == "regression" else 0) + 1

    def unpack(
        self, particles: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Views W1 ``(..., p, H)``, b1 ``(..., H)``, W2 ``(..., H, C)``, b2 ``(..., C)``; with no
        hidden layer W1 and b1 are empty and W2 is ``(..., p, C)``."""
        p, h, c = self.features, self.hidden, self.outputs
        lead = particles.shape[:-1]
        at = 0
        if h == 0:
            w = particles[..., : p * c].reshape(*lead, p, c)
            b = particles[..., p * c : p * c + c]
            return particles[..., :0].reshape(*lead, p, 0), particles[..., :0], w, b
        w1 = particles[..., at : at + p * h].reshape(*lead, p, h)
        at += p * h
        b1 = particles[..., at : at + h]
        at += h
        w2 = particles[..., at : at + h * c].reshape(*lead, h, c)
        at += h * c
        b2 = particles[..., at : at + c]
        return w1, b1, w2, b2


def _forward(
    layout: BnnLayout, particles: FloatArray, X: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    w1, b1, w2, b2 = layout.unpack(particles)
    if layout.hidden == 0:  # no hidden layer: the features feed the outputs
        return X, X, X @ w2 + b2[..., None, :]
    pre = X @ w1 + b1[..., None, :]  # (..., N, n, H)
    hidden = np.maximum(pre, 0.0)
    outputs = hidden @ w2 + b2[..., None, :]  # (..., N, n, C)
    return pre, hidden, outputs


def bnn_outputs(layout: BnnLayout, particles: FloatArray, X: FloatArray) -> FloatArray:
    """f(x) for every particle and row: ``(..., N, n, C)``."""
    particles = np.asarray(particles, dtype=np.float64)
    return _forward(layout, particles, np.asarray(X, dtype=np.float64))[2]


def bnn_log_likelihood(
    layout: BnnLayout,
    particles: FloatArray,
    X: FloatArray,
    y: FloatArray,
    *,
    scale: float = 1.0,
) -> tuple[FloatArray, FloatArray]:
    """scale·log p(y | X, θ) and its gradient in θ: ``(..., N)`` and ``(..., N, D)``.

    ``y`` holds class indices 0..C−1 (classification) or real targets (regression); ``scale``
    multiplies both (n_node / n_batch for a mini-batch).
    """
    particles = np.asarray(particles, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    pre, hidden, outputs = _forward(layout, particles, X)
    gradient = np.zeros_like(particles)
    if layout.task == "classification":
        one_hot = np.eye(layout.outputs)[y.astype(np.intp)]  # (n, C)
        log_density = np.einsum("...nc,nc->...", log_softmax(outputs, axis=-1), one_hot)
        output_gradient = one_hot - softmax(outputs, axis=-1)
    else:
        log_noise = particles[..., -2]
        noise = np.exp(log_noise)[..., None]
        residual = np.asarray(y, dtype=np.float64) - outputs[..., 0]  # (..., N, n)
        rows = residual.shape[-1]
        squared = np.einsum("...n,...n->...", residual, residual)
        log_density = 0.5 * rows * (log_noise - LOG_2PI) - 0.5 * noise[..., 0] * squared
        output_gradient = (noise * residual)[..., None]
        gradient[..., -2] = scale * (0.5 * rows - 0.5 * noise[..., 0] * squared)
    # Backpropagation of ∂ log p / ∂f through the two layers.
    w1, b1, w2, b2 = layout.unpack(gradient)
    _, _, w2_values, _ = layout.unpack(particles)
    w2[...] = scale * (np.swapaxes(hidden, -1, -2) @ output_gradient)
    b2[...] = scale * output_gradient.sum(axis=-2)
    if layout.hidden == 0:
        return scale * log_density, gradient
    hidden_gradient = (output_gradient @ np.swapaxes(w2_values, -1, -2)) * (pre > 0.0)
    w1[...] = scale * (X.T @ hidden_gradient)
    b1[...] = scale * hidden_gradient.sum(axis=-2)
    return scale * log_density, gradient


def bnn_log_prior(
    layout: BnnLayout,
    particles: FloatArray,
    weight_prior: GammaPrior = BNN_WEIGHT_PRECISION_PRIOR,
    noise_prior: GammaPrior = BNN_NOISE_PRECISION_PRIOR,
) -> tuple[FloatArray, FloatArray]:
    """log p(θ) and its gradient: ``(..., N)`` and ``(..., N, D)``."""
    particles = np.asarray(particles, dtype=np.float64)
    count = layout.weight_count
    log_density, weight_gradient, precision_gradient = hierarchical_log_prior(
        particles[..., :count], particles[..., -1], weight_prior
    )
    gradient = np.zeros_like(particles)
    gradient[..., :count] = weight_gradient
    gradient[..., -1] = precision_gradient
    if layout.task == "regression":
        log_noise = particles[..., -2]
        noise = np.exp(log_noise)
        log_density = log_density + (
            noise_prior.shape * np.log(noise_prior.rate)
            - gammaln(noise_prior.shape)
            + noise_prior.shape * log_noise
            - noise_prior.rate * noise
        )
        gradient[..., -2] = noise_prior.shape - noise_prior.rate * noise
    return log_density, gradient


def sample_bnn_prior(
    layout: BnnLayout,
    rng: np.random.Generator,
    count: int,
    weight_prior: GammaPrior = BNN_WEIGHT_PRECISION_PRIOR,
    noise_prior: GammaPrior = BNN_NOISE_PRECISION_PRIOR,
) -> FloatArray:
    """``count`` particles drawn exactly from the prior, ``(count, D)``."""
    weights, log_precision = sample_hierarchical_prior(
        rng, count, layout.weight_count, weight_prior
    )
    columns = [weights]
    if layout.task == "regression":
        noise = rng.gamma(noise_prior.shape, 1.0 / noise_prior.rate, size=count)
        columns.append(np.log(noise)[:, None])
    columns.append(log_precision[:, None])
    return np.concatenate(columns, axis=1)


def bnn_predictive_probabilities(
    layout: BnnLayout, particles: FloatArray, X: FloatArray
) -> FloatArray:
    """Class probabilities of the particle-averaged predictive, (1/N)·Σ_n softmax f_n(x): ``(..., n, C)``."""
    if layout.task != "classification":
        raise ValueError("class probabilities need a classification network")
    return np.asarray(softmax(bnn_outputs(layout, particles, X), axis=-1).mean(axis=-3))


def bnn_predictive_log_density(
    layout: BnnLayout, particles: FloatArray, X: FloatArray, y: FloatArray
) -> FloatArray:
    """log of the regression predictive (1/N)·Σ_n N(y; f_n(x), γ_n⁻¹) at each row: ``(..., n)``."""
    if layout.task != "regression":
        raise ValueError("a predictive density of real targets needs a regression network")
    particles = np.asarray(particles, dtype=np.float64)
    outputs = bnn_outputs(layout, particles, X)[..., 0]
    log_noise = particles[..., -2][..., None]
    residual = np.asarray(y, dtype=np.float64) - outputs
    per_particle = 0.5 * (log_noise - LOG_2PI) - 0.5 * np.exp(log_noise) * residual**2
    return np.asarray(logsumexp(per_particle, axis=-2) - np.log(particles.shape[-2]))
