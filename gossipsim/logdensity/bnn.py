"""A Bayesian neural network (ReLU hidden layers) for classification or regression.

θ holds, in this order: W1 (p × H, row-major), b1 (H), W2 (H × C), b2 (C), for regression log γ
(the noise precision), and, with the hierarchical weight prior only, last log λ (the weights' prior
precision). The network is f(x) = W2ᵀ·relu(W1ᵀx + b1) + b2; with several hidden layers (widths
H_1, ..., H_L) W_1, b_1, ..., W_{L+1}, b_{L+1} in the same order, a ReLU after each but the last. Every weight and bias v ∼ N(0, λ⁻¹ I),
with one of two weight priors:

- :class:`FixedPrecision` (the default): λ fixed, e by default, as in the DSVGD reference code's
  classification network (kclip/DSVGD, "loglambda = 1") and the BNN of 003 (Section V, λ = e);
- :class:`~gossipsim.logdensity.hierarchical.GammaPrior`: λ ∼ Gamma(a, rate b) learned with the
  weights, as in the original SVGD code's network (a = 1, b = 0.1), carried as log λ with its
  Jacobian (:mod:`gossipsim.logdensity.hierarchical`). Its density has a funnel: at W = 0 the best
  λ is (m/2 + a)/b for m weights, and for a network with a hidden layer on a small data set that
  point is denser than any fitted network by hundreds of nats, so SVGD with few particles, which
  follows the density, collapses there (docs/particles.md, "The BNN's weight prior").

For regression γ ∼ Gamma(1, rate 0.1) by default, carried as log γ with its Jacobian.

Likelihoods: classification, softmax over C classes, log p(y | x) = f_y(x) − logsumexp f(x);
regression (C = 1), y ∼ N(f(x), γ⁻¹). Gradients by backpropagation, written out below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln, log_softmax, logsumexp, softmax

from gossipsim.logdensity.gaussian_mlp import MlpLayout
from gossipsim.logdensity.hierarchical import (
    LOG_2PI,
    GammaPrior,
    hierarchical_log_prior,
    sample_hierarchical_prior,
)

FloatArray = NDArray[np.float64]
BnnTask = Literal["classification", "regression"]


@dataclass(frozen=True)
class FixedPrecision:
    """Weights v ∼ N(0, λ⁻¹ I) with a fixed precision λ (e: the DSVGD reference code's
    ``loglambda = 1`` and 003's BNN)."""

    precision: float = math.e

    def __post_init__(self) -> None:
        if not (np.isfinite(self.precision) and self.precision > 0.0):
            raise ValueError(f"precision must be a finite number > 0, got {self.precision!r}")


#: A prior on the weights: a fixed precision, or a Gamma prior on a learned one.
WeightPrior = FixedPrecision | GammaPrior

#: The default weight prior (fixed λ = e) and the original SVGD code's priors on a learned weight
#: precision λ and on the noise precision γ.
BNN_FIXED_WEIGHT_PRIOR: Final = FixedPrecision()
BNN_WEIGHT_PRECISION_PRIOR: Final = GammaPrior(shape=1.0, rate=0.1)
BNN_NOISE_PRECISION_PRIOR: Final = GammaPrior(shape=1.0, rate=0.1)


@dataclass(frozen=True)
class BnnLayout:
    """Where each parameter sits in a particle of a network with ``features`` inputs, ``hidden``
    ReLU units and ``outputs`` outputs (the number of classes; 1 for regression). ``hidden = 0``
    is no hidden layer: a softmax (or linear) regression on the features, W ``(p, C)`` and b
    ``(C,)``, the papers' last layer on a feature map. ``hidden`` may also be a sequence of layer
    widths (each >= 1) for several hidden ReLU layers, W_1, b_1, ..., W_L, b_L in order (the layout
    of :class:`~gossipsim.logdensity.gaussian_mlp.MlpLayout`); one width is stored as the integer,
    so ``[H]`` is the one-layer network ``H``, bit for bit. ``hierarchical``: the weights'
    precision λ is learned (a last coordinate log λ) rather than fixed."""

    features: int
    hidden: int | tuple[int, ...]
    outputs: int
    task: BnnTask = "classification"
    hierarchical: bool = False

    def __post_init__(self) -> None:
        for name in ("features", "outputs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if isinstance(self.hidden, Sequence):
            widths = tuple(int(h) for h in self.hidden)
            if not widths or min(widths) < 1:
                raise ValueError(f"hidden widths must be >= 1 (at least one), got {self.hidden!r}")
            object.__setattr__(self, "hidden", widths[0] if len(widths) == 1 else widths)
        elif self.hidden < 0:
            raise ValueError(f"hidden must be >= 0, got {self.hidden}")
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {self.task!r}")
        if self.task == "regression" and self.outputs != 1:
            raise ValueError("a regression network has one output")
        if self.task == "classification" and self.outputs < 2:
            raise ValueError("a classification network needs at least 2 classes")

    @property
    def widths(self) -> tuple[int, ...]:
        """The hidden layers' widths: () without a hidden layer."""
        if isinstance(self.hidden, tuple):
            return self.hidden
        return (self.hidden,) if self.hidden > 0 else ()

    @property
    def units(self) -> int:
        """Hidden units over all layers (each row's activations: pre-activation and output)."""
        return sum(self.widths)

    @property
    def deep(self) -> bool:
        """Several hidden layers (:meth:`layers` gives their views)."""
        return isinstance(self.hidden, tuple)

    @property
    def mlp(self) -> MlpLayout:
        """The same weights as an :class:`MlpLayout` (sizes p, widths..., C)."""
        return MlpLayout((self.features, *self.widths, self.outputs), self.task)

    def layers(self, particles: FloatArray) -> list[tuple[FloatArray, FloatArray]]:
        """Views (W_l ``(..., d_{l−1}, d_l)``, b_l ``(..., d_l)``) of every layer, any depth."""
        return self.mlp.unpack(particles)

    @property
    def weight_count(self) -> int:
        """Number of weights and biases (those under the N(0, λ⁻¹) prior)."""
        if isinstance(self.hidden, tuple):
            return self.mlp.dimension
        if self.hidden == 0:
            return (self.features + 1) * self.outputs
        return (self.features + 1) * self.hidden + (self.hidden + 1) * self.outputs

    @property
    def dimension(self) -> int:
        """Length of a particle: the weights, then log γ for regression, then log λ if learned."""
        return self.weight_count + (1 if self.task == "regression" else 0) + int(self.hierarchical)

    @property
    def noise_index(self) -> int:
        """Where log γ sits in a regression particle (right after the weights)."""
        if self.task != "regression":
            raise ValueError("only a regression network has a noise precision")
        return self.weight_count

    def check_prior(self, weight_prior: WeightPrior) -> None:
        """A Gamma prior goes with a learned λ (``hierarchical``), a fixed precision without."""
        if isinstance(weight_prior, GammaPrior) != self.hierarchical:
            want = "a GammaPrior" if self.hierarchical else "a FixedPrecision"
            raise ValueError(f"this layout (hierarchical={self.hierarchical}) takes {want}")

    def unpack(
        self, particles: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Views W1 ``(..., p, H)``, b1 ``(..., H)``, W2 ``(..., H, C)``, b2 ``(..., C)``; with no
        hidden layer W1 and b1 are empty and W2 is ``(..., p, C)``. One hidden layer at most
        (:meth:`layers` for several)."""
        if isinstance(self.hidden, tuple):
            raise ValueError("a network of several hidden layers: use layers()")
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
    if layout.deep:
        return _deep_forward(layout, particles, np.asarray(X, dtype=np.float64))[2]
    return _forward(layout, particles, np.asarray(X, dtype=np.float64))[2]


def _deep_forward(
    layout: BnnLayout, particles: FloatArray, X: FloatArray
) -> tuple[list[FloatArray], list[FloatArray], FloatArray]:
    """Pre-activations of the hidden layers, the inputs of every layer (X first), the outputs."""
    layers = layout.layers(particles)
    inputs = [X]
    pre: list[FloatArray] = []
    for w, b in layers[:-1]:
        pre.append(inputs[-1] @ w + b[..., None, :])  # (..., N, n, H_l)
        inputs.append(np.maximum(pre[-1], 0.0))
    w, b = layers[-1]
    return pre, inputs, inputs[-1] @ w + b[..., None, :]


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
    if layout.deep:
        pres, inputs, outputs = _deep_forward(layout, particles, X)
    else:
        pre, hidden, outputs = _forward(layout, particles, X)
    gradient = np.zeros_like(particles)
    if layout.task == "classification":
        one_hot = np.eye(layout.outputs)[y.astype(np.intp)]  # (n, C)
        log_density = np.einsum("...nc,nc->...", log_softmax(outputs, axis=-1), one_hot)
        output_gradient = one_hot - softmax(outputs, axis=-1)
    else:
        log_noise = particles[..., layout.noise_index]
        noise = np.exp(log_noise)[..., None]
        residual = np.asarray(y, dtype=np.float64) - outputs[..., 0]  # (..., N, n)
        rows = residual.shape[-1]
        squared = np.einsum("...n,...n->...", residual, residual)
        log_density = 0.5 * rows * (log_noise - LOG_2PI) - 0.5 * noise[..., 0] * squared
        output_gradient = (noise * residual)[..., None]
        gradient[..., layout.noise_index] = scale * (0.5 * rows - 0.5 * noise[..., 0] * squared)
    if layout.deep:
        _deep_backward(layout, particles, pres, inputs, output_gradient, scale, gradient)
        return scale * log_density, gradient
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


def _deep_backward(
    layout: BnnLayout,
    particles: FloatArray,
    pres: list[FloatArray],
    inputs: list[FloatArray],
    output_gradient: FloatArray,
    scale: float,
    gradient: FloatArray,
) -> None:
    """Backpropagation of ∂ log p / ∂f through every layer, written (times ``scale``) into
    ``gradient``'s weight coordinates."""
    layers = layout.layers(particles)
    gradients = layout.layers(gradient)
    delta = output_gradient
    for layer in range(len(layers) - 1, -1, -1):
        gw, gb = gradients[layer]
        gw[...] = scale * (np.swapaxes(inputs[layer], -1, -2) @ delta)
        gb[...] = scale * delta.sum(axis=-2)
        if layer > 0:
            delta = (delta @ np.swapaxes(layers[layer][0], -1, -2)) * (pres[layer - 1] > 0.0)


def bnn_log_prior(
    layout: BnnLayout,
    particles: FloatArray,
    weight_prior: WeightPrior | None = None,
    noise_prior: GammaPrior = BNN_NOISE_PRECISION_PRIOR,
) -> tuple[FloatArray, FloatArray]:
    """log p(θ) and its gradient: ``(..., N)`` and ``(..., N, D)``.

    ``weight_prior`` (default: the layout's, fixed λ = e or the original SVGD code's
    Gamma(1, rate 0.1)): with a fixed precision λ, log p(v) = (m/2)·log(λ/2π) − (λ/2)·‖v‖²;
    with a Gamma prior, the hierarchical density of :func:`hierarchical_log_prior` in (v, log λ).
    """
    particles = np.asarray(particles, dtype=np.float64)
    weight_prior = _weight_prior(layout, weight_prior)
    count = layout.weight_count
    gradient = np.zeros_like(particles)
    if isinstance(weight_prior, GammaPrior):
        log_density, weight_gradient, precision_gradient = hierarchical_log_prior(
            particles[..., :count], particles[..., -1], weight_prior
        )
        gradient[..., -1] = precision_gradient
    else:
        weights = particles[..., :count]
        precision = weight_prior.precision
        log_density = 0.5 * count * (math.log(precision) - LOG_2PI) - 0.5 * precision * np.einsum(
            "...m,...m->...", weights, weights
        )
        weight_gradient = -precision * weights
    gradient[..., :count] = weight_gradient
    if layout.task == "regression":
        log_noise = particles[..., layout.noise_index]
        noise = np.exp(log_noise)
        log_density = log_density + (
            noise_prior.shape * np.log(noise_prior.rate)
            - gammaln(noise_prior.shape)
            + noise_prior.shape * log_noise
            - noise_prior.rate * noise
        )
        gradient[..., layout.noise_index] = noise_prior.shape - noise_prior.rate * noise
    return log_density, gradient


def _weight_prior(layout: BnnLayout, weight_prior: WeightPrior | None) -> WeightPrior:
    """The given weight prior, checked against the layout, or the layout's default."""
    if weight_prior is None:
        return BNN_WEIGHT_PRECISION_PRIOR if layout.hierarchical else BNN_FIXED_WEIGHT_PRIOR
    layout.check_prior(weight_prior)
    return weight_prior


def sample_bnn_prior(
    layout: BnnLayout,
    rng: np.random.Generator,
    count: int,
    weight_prior: WeightPrior | None = None,
    noise_prior: GammaPrior = BNN_NOISE_PRECISION_PRIOR,
) -> FloatArray:
    """``count`` particles drawn exactly from the prior, ``(count, D)``."""
    weight_prior = _weight_prior(layout, weight_prior)
    log_precision: FloatArray | None = None
    if isinstance(weight_prior, GammaPrior):
        weights, log_precision = sample_hierarchical_prior(
            rng, count, layout.weight_count, weight_prior
        )
    else:
        scale = 1.0 / math.sqrt(weight_prior.precision)
        weights = rng.standard_normal((count, layout.weight_count)) * scale
    columns = [weights]
    if layout.task == "regression":
        noise = rng.gamma(noise_prior.shape, 1.0 / noise_prior.rate, size=count)
        columns.append(np.log(noise)[:, None])
    if log_precision is not None:
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
    log_noise = particles[..., layout.noise_index][..., None]
    residual = np.asarray(y, dtype=np.float64) - outputs
    per_particle = 0.5 * (log_noise - LOG_2PI) - 0.5 * np.exp(log_noise) * residual**2
    return np.asarray(logsumexp(per_particle, axis=-2) - np.log(particles.shape[-2]))
